//! Refills: taking ranges from the backend (the depot first, then the tree) for a request the
//! cache could not serve, with a batch more for the cache; and the tree's take and give-back.
//!
//! Once `n >= 2` threads use a domain, each refills from its own `n`th of the space first
//! (then the whole, so exactness is kept): threads whose ranges interleave share the cache
//! lines of the live bytes and end bits, and their frees' compare-exchanges bounce them between
//! cores. A lone thread searches the whole space, so where its ranges land does not depend on
//! the slot it holds.

use std::sync::atomic::Ordering;

use super::depot::Backend;
use super::SegTreeAllocator;
use crate::placement::Fit;

impl SegTreeAllocator {
    /// The part of the space below `lim` that this thread's refills search first, as
    /// `(lowest, highest)` offsets, or `None` while one thread alone uses the domain (it
    /// searches from `lim`): once `n >= 2` caches are in use, the `i`th cache to have been used
    /// takes the `i`th `n`th down from the limit (the domain's top, or a 32-bit device's limit:
    /// then its zone is split the same way, which together with the depot's preference for
    /// ranges from a thread's own part keeps the threads' ranges apart there too).
    ///
    /// The parts are counted in caches in use, not in slots: the domain keeps more slots than
    /// CPUs, and with parts per slot, two threads each holding nearly half a zone overflowed
    /// their quarters into the same shared half below.
    pub(super) fn home_part(&self, lim: u64) -> Option<(u64, u64)> {
        let n = self.users.load(Ordering::Relaxed);
        if n < 2 {
            return None;
        }
        let part = (lim + 1) / n;
        let hi = lim - self.my_user().min(n - 1) * part;
        Some((hi + 1 - part, hi))
    }

    /// The lowest offset where a search below `lim` prefers its best placement tier (see
    /// `SegTree::find_highest`), or `lim + 1` for none.
    ///
    /// The tiers pack a crowded space: below a 32-bit limit, or in a domain no larger than that
    /// zone. A request allowed above the zone of a larger domain has room to spare and takes the
    /// highest start: there the tiers buy nothing and spread placements over more words.
    /// Inside a thread's own part of the space (`home_lo`: the lowest offset of the part), the
    /// tiers look there only.
    pub(super) fn tier_floor(&self, lim: u64, home_lo: Option<u64>) -> u64 {
        let zone_end = self.cfg.pfn_32bit().0.checked_sub(self.base());
        if zone_end.is_none_or(|z| lim > z) {
            return lim + 1;
        }
        home_lo.unwrap_or(0)
    }

    /// Search and mark one range; the caller holds the backend lock.
    pub(super) fn take_locked(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        self.take_locked_in(b, lim, self.tier_floor(lim, None), fit)
    }

    /// [`Self::take_locked`] preferring placements at `floor` or above.
    pub(super) fn take_locked_in(
        &self,
        b: &mut Backend,
        lim: u64,
        floor: u64,
        fit: &Fit,
    ) -> Option<u64> {
        let off = b.tree.find_highest(lim, floor, self.base(), fit)?;
        let last = off + fit.pages - 1;
        b.tree.mark(off, last, true);
        self.ends.fetch_or(last / 64, 1 << (last % 64));
        Some(off)
    }

    /// Return one range to the tree; the caller holds the backend lock.
    pub(super) fn give_back_locked(&self, b: &mut Backend, off: u64, pages: u64) {
        let last = off + pages - 1;
        self.ends.fetch_clear(last / 64, 1 << (last % 64));
        b.tree.mark(off, last, false);
    }

    /// Return ranges of `pages` pages to the tree under one lock; `frees` of them are callers'
    /// frees (the rest were cached).
    pub(super) fn release(&self, pages: u64, offs: &[u64], frees: u64) {
        if offs.is_empty() {
            return;
        }
        let mut b = self.backend();
        b.tree.work.lock_acquisitions += 1;
        b.tree.work.frees += frees;
        for &off in offs {
            self.give_back_locked(&mut b, off, pages);
        }
    }

    /// A backend allocation of `fit`, plus up to `extra` more of the same shape put in this
    /// thread's cache (as far as its budget allows) before the backend lock is let go (so that a
    /// flush never misses them): from the depot when it holds any that fit, else from the tree
    /// (searched down from this thread's part of the space first).
    ///
    /// `part` is [`Self::home_part`] of `lim`; the caller holds the backend lock (and keeps it
    /// for the slow path's later steps if this finds nothing).
    pub(super) fn refill_locked(
        &self,
        b: &mut Backend,
        lim: u64,
        part: Option<(u64, u64)>,
        fit: &Fit,
        extra: usize,
        cacheable: bool,
    ) -> Option<u64> {
        let mut got = self.take_from_depot(b, lim, part, fit, 1 + extra);
        if got.is_empty() {
            // A cacheable request missed every cache.
            b.tree.work.cache_misses += u64::from(cacheable);
            got = self.search_tree(b, lim, part, fit, 1 + extra);
            if got.is_empty() {
                return None;
            }
            b.tree.work.allocs += 1;
        } else {
            b.tree.work.cache_hits += 1;
        }
        let more = got.split_off(1);
        if !more.is_empty() {
            self.stash_in_cache(b, fit.pages, more);
        }
        Some(got[0])
    }

    /// Up to `n` ranges for `fit` taken from the tree: in this thread's part of the space
    /// (`part`) first, then anywhere below `lim`; the caller holds the backend lock.
    fn search_tree(
        &self,
        b: &mut Backend,
        lim: u64,
        part: Option<(u64, u64)>,
        fit: &Fit,
        n: usize,
    ) -> Vec<u64> {
        let home = part.map_or(lim, |(_, hi)| hi);
        let floor = self.tier_floor(home, part.map(|(lo, _)| lo));
        let take = |b: &mut Backend| {
            self.take_locked_in(b, home, floor, fit).or_else(|| {
                (home < lim)
                    .then(|| self.take_locked(b, lim, fit))
                    .flatten()
            })
        };
        (0..n).map_while(|_| take(b)).collect()
    }

    /// Put the extra ranges of a refill (`pages` pages each) in this thread's cache, newest on
    /// top; what its budgets leave no room for goes to the depot (or the tree). The caller
    /// holds the backend lock.
    fn stash_in_cache(&self, b: &mut Backend, pages: u64, mut more: Vec<u64>) {
        let mut c = self.my_cache();
        let mut room = self.cache_budget().saturating_sub(c.cached_pages);
        let mut low_room = self.low_cache_budget().saturating_sub(c.low_pages);
        more.retain(|&off| {
            let low = off < self.low_end;
            let fits = pages <= room && (!low || pages <= low_room);
            if fits {
                room -= pages;
                if low {
                    low_room -= pages;
                }
            } else if let Some(o) = b.keep_in_depot(&self.tuning, off, pages) {
                self.give_back_locked(b, o, pages);
            }
            fits
        });
        for &off in &more {
            c.count(off, pages, self.low_end);
        }
        c.class_mut(pages).extend(more.iter().rev());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocRequest, DomainConfig, IovaAllocator, Pfn};

    #[test]
    fn threads_refill_from_their_own_part_of_the_space() {
        // One thread alone searches the whole space, whichever slot it holds.
        let cfg = DomainConfig::new(Pfn(0), Pfn(1023), 4096).unwrap();
        let one = SegTreeAllocator::new(cfg).unwrap();
        let alone = std::thread::scope(|s| {
            s.spawn(|| one.allocate(&AllocRequest::pages(1)).unwrap().pfn_lo.0)
                .join()
                .unwrap()
        });
        assert_eq!(alone, 1023);
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 20) - 1), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let barrier = std::sync::Barrier::new(2);
        // Both threads alive at once, so they hold different slot numbers.
        let got: Vec<(u64, u64)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        // Both threads use the domain first, so that both count as users.
                        dom.allocate(&AllocRequest::pages(1)).unwrap();
                        barrier.wait();
                        let user = dom.my_user();
                        let r = dom.allocate(&AllocRequest::pages(2)).unwrap();
                        barrier.wait();
                        (user, r.pfn_lo.0)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // Other tests' threads may hold slot numbers too, so two threads can land on one shared
        // cache; then the domain has one user and searches as one.
        let n = dom.users.load(Ordering::Relaxed);
        let regions = n >= 2;
        // Two threads split the space in halves, however many slots the domain keeps.
        let part = if regions { 1 << 19 } else { 1 << 20 };
        for (user, pfn) in got {
            // Each range lies in its thread's part: the top part for the first cache used, and so
            // on down.
            let top = (1 << 20) - 1 - if regions { user * part } else { 0 };
            assert!(
                pfn < top && pfn + part > top,
                "user {user} of {n}: pfn {pfn:#x}"
            );
        }
        // A 32-bit-style limit below the top splits its zone the same way.
        let low = dom
            .allocate(&AllocRequest::pages(1).below(Pfn(0xFFFF)))
            .unwrap();
        // This thread is a user now too: the zone splits among all of them.
        let n = dom.users.load(Ordering::Relaxed);
        let zone_top = 0xFFFF - dom.my_user() * (0x10000 / n);
        assert_eq!(low.pfn_lo.0, if n >= 2 { zone_top } else { 0xFFFF });
    }

    #[test]
    fn below_a_limit_only_small_ranges_are_fetched_in_batches() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 16) - 1), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let below = |pages: u64| AllocRequest::pages(pages).size_aligned().below(Pfn(0x7fff));
        let batch_max = dom.tuning.limited_batch_max_pages;
        dom.allocate(&below(batch_max + 1)).unwrap();
        assert_eq!(
            dom.stats().cached_pages,
            0,
            "a large range below a limit comes alone"
        );
        let batch = dom.tuning.refill_extra(batch_max, true) as u64 * batch_max;
        dom.allocate(&below(batch_max)).unwrap();
        assert_eq!(
            dom.stats().cached_pages,
            batch,
            "a small one brings a batch"
        );
        // Without a limit, large ranges come in batches too.
        let large = batch_max + 1;
        dom.allocate(&AllocRequest::pages(large).size_aligned())
            .unwrap();
        assert_eq!(
            dom.stats().cached_pages,
            batch + dom.tuning.refill_extra(large, false) as u64 * large
        );
    }
}
