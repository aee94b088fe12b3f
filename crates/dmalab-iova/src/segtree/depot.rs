//! The backend behind the caches: the tree, the reservations, and the shared depot of ranges by
//! exact size, all under one lock; with the spill from a cache into the depot.
//!
//! A full cache class spills its older half to the depot and an empty one refills from it
//! before it searches the tree, so ranges freed on one thread serve another's requests without
//! a search, and a freed large range waits for a request of its size instead of being split by
//! small ones (a tree search would place small requests in it too, and on a crowded 32-bit zone
//! that splits the aligned holes the large requests need). This is the depot layer of Bonwick
//! and Adams' magazines ("Magazines and Vmem", USENIX 2001), kept here by exact size.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::tree::SegTree;
use super::tuning::Tuning;
use super::{fits, SegTreeAllocator};
use crate::placement::Fit;

/// The tree, the reservations and the depot: everything the backend lock guards.
#[derive(Debug)]
pub(super) struct Backend {
    pub(super) tree: SegTree,
    /// Reserved ranges as offsets, sorted and disjoint.
    pub(super) reserved: Vec<(u64, u64)>,
    /// `depot[n]`: ranges of `n` pages any thread's cache refills from before it searches the
    /// tree, and where a full class spills first.
    pub(super) depot: Vec<Vec<u64>>,
    /// Pages in the depot.
    pub(super) depot_pages: u64,
    /// The depot's pages as masks of position words (offsets plus the tree's phase), kept as
    /// ranges come and go, so that a reclaim finds blocks made of depot ranges without
    /// visiting every range (see `SegTreeAllocator::reclaim_in`). Built by the first reclaim:
    /// a domain that never runs short pays nothing for it.
    pub(super) depot_mask: Option<WordMasks>,
}

/// Masks of pages by position word (64 pages a word).
pub(super) type WordMasks = HashMap<u64, u64, BuildHasherDefault<OffsetHasher>>;

/// A hasher for page offsets: one multiplication (Fibonacci hashing, Knuth, TAOCP vol. 3,
/// 6.4) and a fold of the high half into the low, far cheaper than SipHash on a reclaim.
#[derive(Default)]
pub(super) struct OffsetHasher(u64);

impl std::hash::Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are the well-mixed ones; the table indexes by the low ones
        // (and offsets of large ranges share many low zero bits).
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &x in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(x)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Backend {
    /// An empty backend over `pages` pages starting at frame `first_pfn`.
    pub(super) fn new(pages: u64, first_pfn: u64) -> Self {
        Self {
            tree: SegTree::new(pages, first_pfn),
            reserved: Vec::new(),
            depot: Vec::new(),
            depot_pages: 0,
            depot_mask: None,
        }
    }

    /// Note that the range of `pages` pages at `off` entered (`add`) or left the depot.
    fn note_depot(&mut self, off: u64, pages: u64, add: bool) {
        let phase = self.tree.phase();
        let Some(masks) = self.depot_mask.as_mut() else {
            return;
        };
        crate::bits::for_words(off + phase, off + pages - 1 + phase, |w, m| {
            let w = w as u64;
            if add {
                *masks.entry(w).or_insert(0) |= m;
            } else if let Some(x) = masks.get_mut(&w) {
                *x &= !m;
                if *x == 0 {
                    masks.remove(&w);
                }
            }
        });
    }

    /// The depot's word masks computed from its ranges.
    pub(super) fn masks_of_depot(&self) -> WordMasks {
        let (mut masks, phase) = (WordMasks::default(), self.tree.phase());
        for (pages, class) in self.depot.iter().enumerate() {
            for &o in class {
                crate::bits::for_words(o + phase, o + pages as u64 - 1 + phase, |w, m| {
                    *masks.entry(w as u64).or_insert(0) |= m;
                });
            }
        }
        masks
    }

    /// Build the depot's word masks if no reclaim has needed them before.
    pub(super) fn keep_depot_masks(&mut self) {
        if self.depot_mask.is_none() {
            self.depot_mask = Some(self.masks_of_depot());
        }
    }

    /// Take the range at index `i` of the depot's class of `pages` pages.
    pub(super) fn take_depot_at(&mut self, pages: u64, i: usize) -> u64 {
        let off = self.depot[pages as usize].swap_remove(i);
        self.forget_depot_range(off, pages);
        off
    }

    /// Count a range of `pages` pages at `off`, already removed from its class, out of the
    /// depot.
    pub(super) fn forget_depot_range(&mut self, off: u64, pages: u64) {
        self.depot_pages -= pages;
        self.note_depot(off, pages, false);
    }

    /// Whether the depot may take one more range of `pages` pages.
    pub(super) fn depot_has_room(&self, t: &Tuning, pages: u64) -> bool {
        self.depot_pages + pages <= t.depot_pages
            && self
                .depot
                .get(pages as usize)
                .is_none_or(|d| d.len() < t.depot_capacity(pages))
    }

    /// Keep a range of `pages` pages in the depot if it has room; otherwise hand it back.
    pub(super) fn keep_in_depot(&mut self, t: &Tuning, off: u64, pages: u64) -> Option<u64> {
        if !self.depot_has_room(t, pages) {
            return Some(off);
        }
        let i = pages as usize;
        if self.depot.len() <= i {
            self.depot.resize_with(i + 1, Vec::new);
        }
        self.depot[i].push(off);
        self.depot_pages += pages;
        self.note_depot(off, pages, true);
        None
    }

    /// Empty the depot, handing back its classes (by size).
    pub(super) fn take_depot(&mut self) -> Vec<Vec<u64>> {
        self.depot_pages = 0;
        if let Some(m) = self.depot_mask.as_mut() {
            m.clear();
        }
        std::mem::take(&mut self.depot)
    }
}

impl SegTreeAllocator {
    /// Up to `n` ranges from the depot that satisfy `fit` below `lim`, newest first. With `home`
    /// (the part of the space this thread refills from first), ranges there are taken first,
    /// from the newest few: a range taken from another thread's part interleaves the threads'
    /// live bytes, whose cache lines their frees then bounce between cores.
    pub(super) fn take_from_depot(
        &self,
        b: &mut Backend,
        lim: u64,
        home: Option<(u64, u64)>,
        fit: &Fit,
        n: usize,
    ) -> Vec<u64> {
        let t = &self.tuning;
        if let Some((lo, hi)) = home {
            let window = t.depot_home_scan_per_request * n + t.depot_home_scan_ranges;
            let got =
                self.take_newest_from_depot(b, lim, fit, n, window, |o| (lo..=hi).contains(&o));
            if !got.is_empty() {
                return got;
            }
        }
        self.take_newest_from_depot(b, lim, fit, n, usize::MAX, |_| true)
    }

    /// Up to `n` ranges for `fit` below `lim` among the newest `window` of the depot's class,
    /// newest first, that `wanted` accepts.
    fn take_newest_from_depot(
        &self,
        b: &mut Backend,
        lim: u64,
        fit: &Fit,
        n: usize,
        window: usize,
        wanted: impl Fn(u64) -> bool,
    ) -> Vec<u64> {
        let base = self.base();
        let mut got = Vec::new();
        let len = b.depot.get(fit.pages as usize).map_or(0, Vec::len);
        let stop = len.saturating_sub(window);
        let mut i = len;
        while i > stop && got.len() < n {
            i -= 1;
            let o = b.depot[fit.pages as usize][i];
            if wanted(o) && fits(base, o, fit, lim) {
                got.push(b.take_depot_at(fit.pages, i));
            }
        }
        got
    }

    /// Move a freed range of at most `max_cached_pages` pages to the depot when this thread's
    /// cache could not take it (full, over budget, or a flush is running), with the older half
    /// of its class if the class is full or the cache over budget, in one batch. A range next to
    /// a free page of the tree goes to the tree instead (so does one the full depot cannot
    /// take): kept apart in the depot, it would leave the tree's free pages beside it a
    /// fragment that only small requests can use. The backend lock is taken first, as
    /// everywhere, and held while the ranges leave the cache, so no flush can miss them in
    /// between.
    #[cold]
    #[inline(never)]
    pub(super) fn spill(&self, off: u64, pages: u64) {
        let mut b = self.backend();
        b.tree.work.lock_acquisitions += 1;
        b.tree.work.frees += 1;
        let spill = self.spill_from_cache(off, pages);
        for o in spill.into_iter().chain(std::iter::once(off)) {
            if self.touches_free_tree(&b, o, pages) {
                self.give_back_locked(&mut b, o, pages);
            } else if let Some(o) = b.keep_in_depot(&self.tuning, o, pages) {
                self.give_back_locked(&mut b, o, pages);
            }
        }
    }

    /// The older half of this thread's class of `pages` pages, taken out of the cache, if the
    /// class is full or the cache over its budget (lowered by a zone's cap or a flush: giving
    /// back half the class brings it soon within the budget again, instead of taking the
    /// backend lock on every free until then); else nothing.
    fn spill_from_cache(&self, off: u64, pages: u64) -> Vec<u64> {
        let cap = self.tuning.class_capacity(pages);
        let mut c = self.my_cache();
        let over = !self.may_cache_by_limits(&mut c, off, pages);
        let class = c.class_mut(pages);
        let spill: Vec<u64> = if class.len() >= cap || over {
            class.drain(..class.len() / 2).collect()
        } else {
            Vec::new()
        };
        for &o in &spill {
            c.uncount(o, pages, self.low_end);
        }
        spill
    }

    /// Whether the range of `pages` pages at `off` has a free page of the tree beside it.
    fn touches_free_tree(&self, b: &Backend, off: u64, pages: u64) -> bool {
        let total = self.cfg.total_pages();
        (off > 0 && !b.tree.is_used(off - 1))
            || (off + pages < total && !b.tree.is_used(off + pages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocRequest, DomainConfig, IovaAllocator, IovaError, IovaRange, Pfn};

    #[test]
    fn the_depot_masks_follow_the_depot_and_reclaims_fill_it() {
        // A crowded 32-bit domain starting off a word boundary, driven near full with mixed
        // sizes: spills, refills, cuts and reclaims all change the depot.
        let cfg = DomainConfig::new(Pfn(5), Pfn(8192 + 4), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut live: Vec<IovaRange> = Vec::new();
        let (mut reclaimed_extra, mut checks) = (false, 0);
        for step in 0..40_000u32 {
            let pages = match next() % 10 {
                0..=4 => 1,
                5..=7 => 2 + next() % 6,
                _ => 17 + next() % 48,
            };
            if live.len() > 40 && (next() % 2 == 0 || step % 7 == 0) {
                let i = (next() % live.len() as u64) as usize;
                let r = live.swap_remove(i);
                dom.free(r.pfn_lo, r.pages).unwrap();
            }
            let depot_before = crate::lock(&dom.backend).depot_pages;
            match dom.allocate(&AllocRequest::pages(pages).size_aligned()) {
                Ok(r) => live.push(r),
                Err(IovaError::NoSpace { .. }) => {
                    if let Some(i) =
                        (!live.is_empty()).then(|| (next() % live.len() as u64) as usize)
                    {
                        let r = live.swap_remove(i);
                        dom.free(r.pfn_lo, r.pages).unwrap();
                    }
                }
                Err(e) => panic!("{e:?}"),
            }
            let b = crate::lock(&dom.backend);
            reclaimed_extra |= b.depot_pages > depot_before + pages.next_power_of_two();
            if let Some(m) = b.depot_mask.as_ref().filter(|_| step % 97 == 0) {
                assert_eq!(m, &b.masks_of_depot(), "step {step}");
                checks += 1;
            }
        }
        assert!(checks > 300, "{checks} checks");
        assert!(reclaimed_extra, "no reclaim put extra blocks in the depot");
        for r in live {
            dom.free(r.pfn_lo, r.pages).unwrap();
        }
        dom.flush_caches();
        let b = crate::lock(&dom.backend);
        assert!(b.depot_mask.as_ref().is_some_and(|m| m.is_empty()));
        drop(b);
        assert_eq!(dom.stats().free_pages, cfg.total_pages());
    }

    #[test]
    fn a_full_class_spills_to_the_depot_and_an_empty_one_refills_from_it() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(4095), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let cap = dom.tuning.class_capacity(1);
        // Every other page of a run of live pages is freed, so that no freed range has a free
        // page of the tree next to it (such a range would join the tree instead).
        let mut all: Vec<u64> = (0..2 * cap + 3)
            .map(|_| dom.allocate(&AllocRequest::pages(1)).unwrap().pfn_lo.0)
            .collect();
        dom.flush_caches();
        all.sort_unstable();
        assert!(all.windows(2).all(|w| w[1] == w[0] + 1), "one run");
        for &p in all.iter().skip(1).step_by(2).take(cap + 1) {
            dom.free(Pfn(p), 1).unwrap();
        }
        // The free that found the class full moved its older half and itself to the depot.
        let depot = crate::lock(&dom.backend).depot_pages;
        assert!(depot > cap as u64 / 2, "depot holds {depot} pages");
        let in_cache = dom.my_cache().classes[1].len();
        let st = dom.stats();
        assert_eq!(st.cached_pages, in_cache as u64 + depot);
        assert_eq!(st.free_pages + st.cached_pages, 4096 - (cap as u64 + 2));
        let before = dom.work();
        for _ in 0..in_cache + 1 {
            dom.allocate(&AllocRequest::pages(1)).unwrap();
        }
        let after = dom.work();
        // The thread's class emptied and the depot, not the tree, served the next request.
        assert_eq!(after.cache_misses, before.cache_misses);
        assert_eq!(after.cache_hits - before.cache_hits, in_cache as u64 + 1);
        assert!(crate::lock(&dom.backend).depot_pages < depot);
        // A flush empties the depot too.
        dom.flush_caches();
        let st = dom.stats();
        assert_eq!(st.cached_pages, 0);
        assert_eq!(crate::lock(&dom.backend).depot_pages, 0);
        assert_eq!(st.free_pages, 4096 - st.live_allocations);
    }

    #[test]
    fn a_spilled_range_next_to_free_pages_of_the_tree_joins_them() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(4095), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let cap = dom.tuning.class_capacity(1);
        let mut held: Vec<u64> = (0..cap + 1)
            .map(|_| dom.allocate(&AllocRequest::pages(1)).unwrap().pfn_lo.0)
            .collect();
        // One run of live pages at the top, the rest of the tree free.
        dom.flush_caches();
        held.sort_unstable();
        assert_eq!(held[cap], 4095);
        assert!(held.windows(2).all(|w| w[1] == w[0] + 1), "one run");
        for &p in &held {
            dom.free(Pfn(p), 1).unwrap();
        }
        // The free that found the class full spilled the older half, from the lowest up: the
        // lowest touched the free pages below it, and each next one the one before, so all
        // joined the tree. Only the last free (page 4095, whose neighbour below is cached and
        // above which the domain ends) went to the depot.
        assert_eq!(crate::lock(&dom.backend).depot_pages, 1);
        let in_cache = dom.my_cache().classes[1].len() as u64;
        assert_eq!(in_cache, cap as u64 - cap as u64 / 2);
        let st = dom.stats();
        assert_eq!(st.cached_pages, in_cache + 1);
        assert_eq!(st.free_pages, 4096 - in_cache - 1);
    }
}
