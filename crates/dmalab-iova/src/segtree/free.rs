//! Checking a free without the backend: the live byte of the range's first page, and for long
//! ranges the ends plane.
//!
//! The live byte of a range under 254 pages holds its size. A free takes the byte from that
//! size to zero with one compare-exchange (`take_live_fast`), so of two racing frees exactly one
//! succeeds, and a wrong size fails the compare; a free that fails it takes the full path, which
//! names the error. A caller that holds the allocator alone (`free_counted_exclusive`, `&mut`)
//! has no racing frees: it loads and stores the byte instead. On the full path the compare-exchange takes the byte to *freeing* instead. For a longer range the free then checks the
//! size against the ends plane, which cannot change while the range is live, and clears the
//! byte (or, for a wrong size, puts it back, so a wrong-size free can never clear a range that
//! was freed and handed out again in between). A racing free that finds the byte *freeing*
//! waits the few instructions until it is decided.

use std::sync::atomic::{AtomicU8, Ordering};

use super::planes::{live_code, FREEING, LIVE_LONG};
use super::SegTreeAllocator;
use crate::error::IovaError;
use crate::types::Pfn;

/// Take a short range's live byte from its size `code` to zero; false if it held anything else
/// (changing nothing).
#[inline(always)]
pub(super) fn take_byte<const EXCLUSIVE: bool>(cell: &AtomicU8, code: u8) -> bool {
    if EXCLUSIVE {
        // The caller holds the allocator alone (`&mut`): no other free or allocation can touch
        // the byte between this load and store, so they do what the compare-exchange does,
        // without its locked instruction.
        cell.load(Ordering::Relaxed) == code && {
            cell.store(0, Ordering::Relaxed);
            true
        }
    } else {
        cell.compare_exchange(code, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

impl SegTreeAllocator {
    /// Mark the range of `pages` pages at `off` as held by a caller.
    #[inline]
    pub(super) fn mark_live(&self, off: u64, pages: u64) {
        debug_assert!(
            !self.live.is_live(off),
            "range at offset {off} handed out twice"
        );
        self.live.set_live(off, pages);
    }

    /// The common case of [`Self::take_live`], for a range under [`LIVE_LONG`] pages freed with
    /// its size and no free racing it: one compare-exchange takes the byte from its size to
    /// zero (the byte alone checks a short range). False changes nothing, and the caller runs
    /// the full check, which names the error or waits for a racing free.
    #[inline(always)]
    pub(super) fn take_live_fast<const EXCLUSIVE: bool>(&self, off: u64, pages: u64) -> bool {
        let code = live_code(pages);
        code != LIVE_LONG
            && self
                .live
                .cell(off)
                .is_some_and(|cell| take_byte::<EXCLUSIVE>(cell, code))
    }

    /// Check a free of `pages` pages at `off` (frame `pfn`) and clear its live byte: after
    /// `Ok`, the range belongs to the caller's free alone.
    #[inline(always)]
    pub(super) fn take_live(&self, pfn: Pfn, pages: u64, off: u64) -> Result<(), IovaError> {
        let Some(cell) = self.live.cell(off) else {
            return Err(self.not_live_error(pfn, pages, off));
        };
        // Take the byte: of racing frees, one wins; the others wait for its decision. The byte
        // holds the size of a short range, so taking it checks the size too.
        let code = live_code(pages);
        if cell
            .compare_exchange(code, FREEING, Ordering::Acquire, Ordering::Acquire)
            .is_err()
        {
            self.take_contended(cell, code, pfn, pages, off)?;
        }
        if code == LIVE_LONG {
            if let Err(e) = self.check_end(pfn, off, pages) {
                cell.store(code, Ordering::Release);
                return Err(e);
            }
        }
        cell.store(0, Ordering::Release);
        Ok(())
    }

    /// Why a free at `off` (not live) is refused.
    fn not_live_error(&self, pfn: Pfn, pages: u64, off: u64) -> IovaError {
        let b = self.backend();
        let i = b.reserved.partition_point(|&(_, hi)| hi < off);
        if b.reserved.get(i).is_some_and(|&(lo, _)| lo <= off) {
            IovaError::FreeOfReserved { pfn }
        } else {
            IovaError::NotAllocated { pfn, pages }
        }
    }

    /// The slow way to take a live byte from `code` to freeing: wait while another free decides,
    /// fail if the range is not live or has another size.
    #[cold]
    #[inline(never)]
    fn take_contended(
        &self,
        cell: &AtomicU8,
        code: u8,
        pfn: Pfn,
        pages: u64,
        off: u64,
    ) -> Result<(), IovaError> {
        let mut spins = 0u32;
        loop {
            match cell.compare_exchange(code, FREEING, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(FREEING) => {}
                Err(0) => return Err(self.not_live_error(pfn, pages, off)),
                Err(other) if other < LIVE_LONG => {
                    return Err(IovaError::SizeMismatch {
                        pfn,
                        pages,
                        allocated_pages: u64::from(other),
                    })
                }
                Err(other) => {
                    // A long range, freed with a short size: its size is in the ends plane,
                    // which is read while the byte is held.
                    if cell
                        .compare_exchange(other, FREEING, Ordering::Acquire, Ordering::Acquire)
                        .is_ok()
                    {
                        let e = self.check_end_slow(pfn, off, pages);
                        cell.store(other, Ordering::Release);
                        return Err(e.err().unwrap_or(IovaError::SizeMismatch {
                            pfn,
                            pages,
                            allocated_pages: u64::from(LIVE_LONG),
                        }));
                    }
                }
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Whether the live range at `off` ends at `off + pages - 1`. The caller has taken the live
    /// byte to freeing, so the range stays live and the end bits read cannot change.
    #[inline]
    fn check_end(&self, pfn: Pfn, off: u64, pages: u64) -> Result<(), IovaError> {
        let last = off + pages - 1;
        // Common case: the range sits in one word of the ends plane, so one load decides.
        if off / 64 == last / 64 {
            let ends = self.ends.load(off / 64) >> (off % 64);
            if ends.trailing_zeros() == (pages - 1) as u32 {
                return Ok(());
            }
        }
        self.check_end_slow(pfn, off, pages)
    }

    #[cold]
    #[inline(never)]
    fn check_end_slow(&self, pfn: Pfn, off: u64, pages: u64) -> Result<(), IovaError> {
        let last = off + pages - 1;
        match self.ends.next_set(off, self.cfg.total_pages() - 1).0 {
            Some(e) if e == last => Ok(()),
            Some(e) => Err(IovaError::SizeMismatch {
                pfn,
                pages,
                allocated_pages: e - off + 1,
            }),
            // A live range always has an end: unreachable while the byte is held.
            None => Err(IovaError::NotAllocated { pfn, pages }),
        }
    }
}
