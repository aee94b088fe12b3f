//! Reservations: ranges taken for good, never handed out, kept sorted and merged.

use super::depot::Backend;
use super::{first_page_of, SegTreeAllocator};
use crate::bitmap::check_in_domain;
use crate::error::IovaError;
use crate::types::Pfn;
use crate::IovaAllocator;

impl SegTreeAllocator {
    /// Reserve `[pfn_lo, pfn_hi]` (see [`IovaAllocator::reserve`]). A page that is used and
    /// not reserved belongs to an allocation: if that allocation is only cached, the caches
    /// are flushed and the reservation tried once more.
    pub(super) fn reserve_range(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        check_in_domain(&self.cfg, pfn_lo, pfn_hi)?;
        let (lo, hi) = (pfn_lo.0 - self.base(), pfn_hi.0 - self.base());
        for attempt in 0..2 {
            let mut b = self.backend();
            let Some(u) = first_conflict(&b, lo, hi) else {
                add_reservation(&mut b, lo, hi);
                return Ok(());
            };
            let first = first_page_of(&b.tree, &self.ends, &b.reserved, u);
            if attempt == 0 && !self.live.is_live(first) {
                drop(b);
                self.flush_caches();
                continue;
            }
            return Err(IovaError::ReserveOverlapsAllocation {
                pfn_lo,
                pfn_hi,
                allocated_pfn: Pfn(first + self.base()),
            });
        }
        unreachable!("the second attempt returns")
    }
}

/// The first used page of `[lo, hi]` outside the reservations, if any.
fn first_conflict(b: &Backend, lo: u64, hi: u64) -> Option<u64> {
    let mut conflict = None;
    let mut pos = lo;
    while pos <= hi && conflict.is_none() {
        let next_res = b.reserved.iter().find(|&&(_, rh)| rh >= pos).copied();
        match next_res {
            Some((rl, rh)) if rl <= pos => pos = rh + 1,
            _ => {
                let stop = next_res.map_or(hi, |(rl, _)| (rl - 1).min(hi));
                conflict = b.tree.next_used(pos, stop);
                pos = stop + 1;
            }
        }
    }
    conflict
}

/// Mark `[lo, hi]` used and add it to the reservations, merged with those it touches.
fn add_reservation(b: &mut Backend, lo: u64, hi: u64) {
    b.tree.mark(lo, hi, true);
    let (mut nlo, mut nhi) = (lo, hi);
    b.reserved.retain(|&(a, z)| {
        let touches = a <= hi.saturating_add(1) && lo <= z.saturating_add(1);
        if touches {
            nlo = nlo.min(a);
            nhi = nhi.max(z);
        }
        !touches
    });
    let at = b.reserved.partition_point(|&(a, _)| a < nlo);
    b.reserved.insert(at, (nlo, nhi));
}
