//! Flushes: returning cached ranges to the tree, the last resort of a request the tree cannot
//! serve, and the budgets that a zone running short lowers.
//!
//! A thread short of space returns its own cache and the depot first (no barrier, and other
//! threads' caches keep their ranges apart by size); only then is every cache flushed and the
//! search retried, so a single thread finds space whenever some exists. Each flush forced this
//! way halves the caches' budget: a domain whose space is tight learns to cache less.

use std::sync::atomic::Ordering;

use super::depot::Backend;
use super::SegTreeAllocator;
use crate::placement::Fit;

impl SegTreeAllocator {
    /// Once a request below `lim` (short of the domain's top) finds no place in the tree, cap
    /// the caches' pages there at `1/zone_cache_share` of that space: those of the low zone
    /// alone for a limit inside it (the rest of the space keeps its caching), else all of them.
    /// The cap stays for the domain's life.
    pub(super) fn cap_zone_budget(&self, lim: u64) {
        if lim + 1 >= self.cfg.total_pages() {
            return;
        }
        let t = &self.tuning;
        let cap = ((lim + 1) / t.zone_cache_share).max(t.min_cache_budget_pages);
        let budget = if lim < self.low_end {
            &self.low_budget_pages
        } else {
            &self.budget_pages
        };
        if budget.fetch_min(cap, Ordering::Relaxed) > cap {
            self.budgets_changed();
        }
    }

    /// With other threads' caches in use, return this thread's cache and the depot to the tree
    /// and search again; `None` (and nothing returned) for a lone thread, whose next step
    /// flushes everything anyway.
    pub(super) fn flush_own_and_retry(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        if self.users.load(Ordering::Relaxed) <= 1 {
            return None;
        }
        self.flush_own_locked(b);
        self.take_locked(b, lim, fit)
    }

    /// Halve the caches' budget, return every cache and the depot to the tree, and search
    /// again: the search is then exact.
    pub(super) fn flush_all_and_retry(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        let floor = self.tuning.min_cache_budget_pages;
        let halve = |b: u64| Some((b / 2).max(floor));
        let was = self
            .budget_pages
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, halve);
        // The caches' cached frees compare against limits worked out at a generation: without
        // a new one they kept caching to the old budget after every forced flush.
        if was.is_ok_and(|w| w != (w / 2).max(floor)) {
            self.budgets_changed();
        }
        // Raised before any cache is drained: a free that takes its cache's lock after the
        // drain sees it and goes to the tree, which waits for this search.
        self.begin_flush();
        self.flush_locked(b);
        let off = self.take_locked(b, lim, fit);
        self.end_flush();
        off
    }

    /// Turn every free the full way until [`Self::end_flush`]: `flushing` is raised, and then a
    /// new generation turns the quick frees (which test the generation alone) the full way,
    /// which tests `flushing` and works out no current limits while it is raised (see
    /// `may_cache_by_limits`).
    pub(super) fn begin_flush(&self) {
        self.flushing.fetch_add(1, Ordering::SeqCst);
        self.budgets_changed();
    }

    /// The end of [`Self::begin_flush`]: the caches work their limits out again on their next
    /// full-way free, and quick frees resume.
    pub(super) fn end_flush(&self) {
        self.flushing.fetch_sub(1, Ordering::SeqCst);
    }

    /// Return every range of `classes` (a cache's or the depot's, by size) to the tree; the
    /// caller holds the backend lock.
    fn drain_locked(&self, b: &mut Backend, classes: &mut [Vec<u64>]) {
        for (pages, class) in classes.iter_mut().enumerate() {
            for off in class.drain(..) {
                self.give_back_locked(b, off, pages as u64);
            }
        }
    }

    /// Empty the depot into the tree; the caller holds the backend lock.
    fn drain_depot_locked(&self, b: &mut Backend) {
        let mut depot = b.take_depot();
        self.drain_locked(b, &mut depot);
    }

    /// Empty the depot and this thread's cache into the tree; the caller holds the backend lock.
    fn flush_own_locked(&self, b: &mut Backend) {
        self.drain_depot_locked(b);
        let mut c = self.my_cache();
        c.work.cache_flushes += 1;
        c.uncount_all();
        self.drain_locked(b, &mut c.classes);
    }

    /// Empty the depot and every CPU's cache into the tree. The caller holds the backend lock
    /// (taken before any cache lock, as everywhere: no path holds a cache lock while waiting for
    /// the backend).
    pub(super) fn flush_locked(&self, b: &mut Backend) {
        self.drain_depot_locked(b);
        self.each_cache(|c| {
            c.work.cache_flushes += 1;
            c.uncount_all();
            self.drain_locked(b, &mut c.classes);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::tuning::{CACHE_BUDGET_PAGES, ZONE_CACHE_SHARE};
    use super::*;
    use crate::{AllocRequest, DomainConfig, IovaAllocator, IovaRange, Pfn};

    #[test]
    fn a_zone_that_runs_short_caps_the_caches() {
        // A domain of 64 KiB pages up to 8 GiB: its low zone (below 4 GiB) is 2^16 pages,
        // filled with 1-page ranges.
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 17) - 1), 65536).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let zone = 1u64 << 16;
        assert_eq!(dom.low_end, zone);
        let below = |pages: u64| {
            AllocRequest::pages(pages)
                .size_aligned()
                .below(Pfn(zone - 1))
        };
        let live: Vec<IovaRange> = (0..zone)
            .map(|_| dom.allocate(&below(1)).unwrap())
            .collect();
        assert_eq!(dom.low_budget_pages.load(Ordering::Relaxed), u64::MAX);
        // Every other range freed (no two free pages touch), then a block the tree cannot give.
        for r in live.iter().step_by(2) {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        assert!(dom.allocate(&below(64)).is_err());
        // The low zone's caching is capped; the rest of the space keeps its budget.
        let cap = zone / ZONE_CACHE_SHARE;
        assert_eq!(dom.low_budget_pages.load(Ordering::Relaxed), cap);
        assert_eq!(dom.budget_pages.load(Ordering::Relaxed), CACHE_BUDGET_PAGES);
        assert!(dom.my_cache().low_pages <= cap);
        // Without a limit only the flush that the failure forces halves it.
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 12) - 1), 4096).unwrap();
        let small = SegTreeAllocator::new(cfg).unwrap();
        small.allocate(&AllocRequest::pages(64)).unwrap();
        let gen = small.budget_gen.load(Ordering::Relaxed);
        while small.allocate(&AllocRequest::pages(64)).is_ok() {}
        assert_eq!(
            small.budget_pages.load(Ordering::Relaxed),
            CACHE_BUDGET_PAGES / 2
        );
        // ... and the caches' limits follow it.
        assert!(small.budget_gen.load(Ordering::Relaxed) > gen);
    }

    #[test]
    fn a_thread_short_of_space_empties_its_own_cache_before_other_threads() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(127), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        dom.reserve(Pfn(64), Pfn(127)).unwrap();
        // Below a limit, so that ranges over 16 pages come one at a time.
        let req = |pages: u64| AllocRequest::pages(pages).size_aligned().below(Pfn(126));
        let barrier = std::sync::Barrier::new(2);
        let (cached_before, got, cached_after, users) = std::thread::scope(|s| {
            let other = s.spawn(|| {
                // Another thread caches [32, 63] and stays alive while this one allocates.
                let r = dom.allocate(&req(32));
                if let Ok(r) = r {
                    dom.free(r.pfn_lo, 32).unwrap();
                }
                barrier.wait();
                barrier.wait();
                r
            });
            barrier.wait();
            // This thread takes [0, 31] as 16-page ranges (one held, one cached by the refill)
            // and frees the one it holds: its own cache holds [0, 31].
            let r = dom.allocate(&req(16)).unwrap();
            dom.free(r.pfn_lo, 16).unwrap();
            let cached_before = dom.stats().cached_pages;
            let got = dom.allocate(&req(32)).map(|r| r.pfn_lo);
            let cached_after = dom.stats().cached_pages;
            let users = dom.users.load(Ordering::Relaxed);
            barrier.wait();
            assert_eq!(other.join().unwrap().unwrap().pfn_lo, Pfn(32));
            (cached_before, got, cached_after, users)
        });
        assert_eq!(cached_before, 64);
        assert_eq!(got, Ok(Pfn(0)));
        // Two threads that share one cache (other tests' threads hold slot numbers too) are one
        // user, and then there is no other thread's cache to spare.
        if users >= 2 {
            assert_eq!(cached_after, 32, "the other thread's range stays cached");
        }
    }
}
