//! The per-thread caches: a cache per slot, how a thread finds and enters its own, how a thief
//! takes them all, the budgets that bound them, and the cached allocate and free.
//!
//! Each thread caches in the slot whose number it owns (no other live thread holds that number:
//! `shard::owned_slot`), and enters it without an atomic read-modify-write (module `owned`).
//! Threads beyond the slots share locked caches. Each cache keeps exact sizes up to
//! `Tuning::max_cached_pages`, as Linux's IOVA range caches do for powers of two (after
//! Bonwick and Adams' magazines), so a freed range is reused for a request of its size without
//! rounding.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use super::free::take_byte;
use super::owned::{Owned, OwnerGuard};
use super::planes::{live_code, LiveMemo, LIVE_LONG};
use super::spin::{SpinGuard, SpinLock};
use super::{fits, SegTreeAllocator};
use crate::placement::Fit;
use crate::shard::{owned_slot, owned_slot_or_past, thread_slot};
use crate::types::{AllocRequest, WorkCounters};

/// One thread's (or a few threads') cached ranges by size.
#[derive(Debug, Default)]
pub(super) struct CpuCache {
    /// `classes[n]`: cached ranges of `n` pages, as offsets; grown to the largest size cached.
    pub(super) classes: Vec<Vec<u64>>,
    pub(super) cached_pages: u64,
    /// Work counted here, but for the quick calls' (see [`Self::work`]).
    pub(super) work: WorkCounters,
    /// Quick allocations: each a lock acquisition and a cache hit, one count for both.
    quick_hits: u64,
    /// Quick frees: each a lock acquisition and a free, one count for both.
    quick_frees: u64,
    /// Of `cached_pages`, those of ranges that start in the low zone (see
    /// `SegTreeAllocator::low_end`).
    pub(super) low_pages: u64,
    /// The cache's shares of the domain's budgets, as of a value of
    /// `SegTreeAllocator::budget_gen`.
    pub(super) limits: Limits,
    /// A live-plane chunk for the quick calls, moved by the slow ones (only ever with this
    /// domain's plane, as `LivePlane::memo_cell` asks).
    pub(super) live_memo: LiveMemo,
}

/// A generation `SegTreeAllocator::budget_gen` never has (it starts at 1): the limits of a
/// cache whose last full-way free came during a flush.
const STALE_GEN: u64 = 0;

/// What [`SegTreeAllocator::free_fast`] did.
pub(super) enum QuickFree {
    /// The free was checked and the range kept in the caller's own cache.
    Kept,
    /// The free was checked (the live byte is taken), but the cache cannot keep the range
    /// quickly: the caller keeps it the full way.
    Taken,
    /// Nothing changed: the caller checks the free the full way.
    Declined,
}

/// A cache's page limits as worked out from the domain's budgets and users at generation `gen`:
/// `(cached + pages) * sharers <= budget` exactly when `cached + pages <= budget / sharers`, so
/// the cached free checks its budgets with two compares.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Limits {
    gen: u64,
    cached: u64,
    low: u64,
}

/// One slot's caches.
#[derive(Debug, Default)]
pub(super) struct Slot {
    /// The cache of the thread owning this slot's number.
    pub(super) owned: Owned<CpuCache>,
    /// Whether an owner has ever entered `owned` (set once, by the owner): a report skips
    /// caches never used, and needs no barrier when the caller's own is the only one used.
    pub(super) used: AtomicBool,
    /// Whether a thread has ever used `shared`.
    pub(super) shared_used: AtomicBool,
    /// The order in which `owned` and `shared` were first used among the domain's caches
    /// (`SegTreeAllocator::users` before each): which part of the space their threads refill
    /// from first (`SegTreeAllocator::home_part`).
    pub(super) owned_user: AtomicU64,
    pub(super) shared_user: AtomicU64,
    /// A cache shared, under a lock, by threads owning no slot here (more threads than slots).
    pub(super) shared: CachePadded<SpinLock<CpuCache>>,
}

/// A thread's hold on its cache.
pub(super) enum CacheGuard<'a> {
    Owned(OwnerGuard<'a, CpuCache>),
    Shared(SpinGuard<'a, CpuCache>),
}

impl std::ops::Deref for CacheGuard<'_> {
    type Target = CpuCache;
    #[inline]
    fn deref(&self) -> &CpuCache {
        match self {
            Self::Owned(g) => g,
            Self::Shared(g) => g,
        }
    }
}

impl std::ops::DerefMut for CacheGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut CpuCache {
        match self {
            Self::Owned(g) => &mut *g,
            Self::Shared(g) => &mut *g,
        }
    }
}

impl CpuCache {
    /// The work counted here, the quick calls' included.
    pub(super) fn work(&self) -> WorkCounters {
        let mut w = self.work;
        w.lock_acquisitions += self.quick_hits + self.quick_frees;
        w.cache_hits += self.quick_hits;
        w.frees += self.quick_frees;
        w
    }

    /// Count a range of `pages` pages at `off` out of the cache.
    #[inline(always)]
    pub(super) fn uncount(&mut self, off: u64, pages: u64, low_end: u64) {
        self.cached_pages -= pages;
        if off < low_end {
            self.low_pages -= pages;
        }
    }

    /// Count a range of `pages` pages at `off` into the cache.
    #[inline(always)]
    pub(super) fn count(&mut self, off: u64, pages: u64, low_end: u64) {
        self.cached_pages += pages;
        if off < low_end {
            self.low_pages += pages;
        }
    }

    /// Count every range out (the classes are being emptied).
    pub(super) fn uncount_all(&mut self) {
        self.cached_pages = 0;
        self.low_pages = 0;
    }

    /// The cache of `pages`-page ranges, creating the table up to it.
    #[inline]
    pub(super) fn class_mut(&mut self, pages: u64) -> &mut Vec<u64> {
        let i = pages as usize;
        if i < self.classes.len() {
            return &mut self.classes[i];
        }
        self.grow_to(i)
    }

    /// The table grown up to class `i` (the first range of a new largest size), and that class.
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, i: usize) -> &mut Vec<u64> {
        self.classes.resize_with(i + 1, Vec::new);
        &mut self.classes[i]
    }
}

impl SegTreeAllocator {
    /// This thread's cache. Never called while the thread holds a guard from it.
    #[inline(always)]
    pub(super) fn my_cache(&self) -> CacheGuard<'_> {
        match owned_slot() {
            Some(i) if i < self.cpus.len() => {
                let slot = &self.cpus[i];
                if !slot.used.load(Ordering::Relaxed) {
                    slot.used.store(true, Ordering::Relaxed);
                    let n = self.users.fetch_add(1, Ordering::Relaxed);
                    slot.owned_user.store(n, Ordering::Relaxed);
                    self.budgets_changed();
                }
                // SAFETY: no other live thread owns number `i`, and numbers pass between
                // threads through a mutex; no caller enters again while holding the guard.
                CacheGuard::Owned(unsafe { slot.owned.enter(&self.fences) })
            }
            _ => {
                let slot = &self.cpus[self.cache_index()];
                if !slot.shared_used.load(Ordering::Relaxed) {
                    slot.shared_used.store(true, Ordering::Relaxed);
                    let n = self.users.fetch_add(1, Ordering::Relaxed);
                    slot.shared_user.store(n, Ordering::Relaxed);
                    self.budgets_changed();
                }
                CacheGuard::Shared(slot.shared.lock())
            }
        }
    }

    /// Every cache at once: the owned ones taken from their threads (one process-wide barrier
    /// for all), then the shared ones locked, each in a fixed order (so thieves never wait on
    /// each other in a cycle). The caller may hold the backend lock, never a cache.
    pub(super) fn with_every_cache<R>(&self, f: impl FnOnce(&mut [&mut CpuCache]) -> R) -> R {
        let mut owned = Owned::steal_all(self.cpus.iter().map(|s| &s.owned), &self.fences);
        let mut shared: Vec<_> = self.cpus.iter().map(|s| s.shared.lock()).collect();
        let mut all: Vec<&mut CpuCache> = owned
            .iter_mut()
            .map(|g| &mut **g)
            .chain(shared.iter_mut().map(|g| &mut **g))
            .collect();
        f(&mut all)
    }

    /// [`Self::with_every_cache`], one cache at a time.
    pub(super) fn each_cache(&self, mut f: impl FnMut(&mut CpuCache)) {
        self.with_every_cache(|all| all.iter_mut().for_each(|c| f(c)));
    }

    /// Every cache that has been used, for a report (`work`, `stats`, `memory_bytes`): the
    /// caller's own entered as its owner, the others taken from their threads (one barrier for
    /// all, and none when no other thread's cache was ever used, as in a single-threaded
    /// simulator that reads the counters after every call). A cache whose first use races with
    /// this call is left out: what it holds then comes from calls concurrent with the report.
    /// Flushes drain every cache with [`Self::each_cache`] instead.
    pub(super) fn each_used_cache(&self, mut f: impl FnMut(&CpuCache)) {
        let mine = owned_slot().filter(|&i| i < self.cpus.len());
        // One cache used so far, and it is this thread's own: no other to visit (a simulator
        // reading the counters after every call takes this path).
        let only_mine = mine.is_some_and(|i| {
            self.users.load(Ordering::Acquire) == 1 && self.cpus[i].used.load(Ordering::Relaxed)
        });
        if !only_mine {
            let others = self
                .cpus
                .iter()
                .enumerate()
                .filter(|&(i, s)| Some(i) != mine && s.used.load(Ordering::Acquire))
                .map(|(_, s)| &s.owned);
            for g in Owned::steal_all(others, &self.fences) {
                f(&g);
            }
        }
        if let Some(i) = mine {
            // SAFETY: this thread owns number `i` and holds no guard from it (reports are never
            // made from inside a cache).
            let g = unsafe { self.cpus[i].owned.enter(&self.fences) };
            f(&g);
        }
        if !only_mine {
            for s in self
                .cpus
                .iter()
                .filter(|s| s.shared_used.load(Ordering::Acquire))
            {
                f(&s.shared.lock());
            }
        }
    }

    /// How many caches share the domain's budget: the caches in use, but never more than the
    /// threads the machine runs at once. A cache whose thread is descheduled keeps what it holds
    /// for the thread's return; splitting the budget among every thread ever seen would leave
    /// each of many time-sliced threads a cache too small for its own traffic, and its frees and
    /// refills would take the backend lock that a descheduled thread may hold
    /// (docs/results/2026-11-26-oversubscription.md). The low zone is scarce, so its pages are
    /// split among every cache in use ([`Self::low_cache_budget`]).
    #[inline(always)]
    pub(super) fn budget_sharers(&self) -> u64 {
        // `running` is at least 1: the same as `clamp(1, running)`, without its check.
        self.users.load(Ordering::Relaxed).min(self.running).max(1)
    }

    /// Pages one thread's cache may hold: the domain's budget shared among the caches running.
    pub(super) fn cache_budget(&self) -> u64 {
        self.budget_pages.load(Ordering::Relaxed) / self.budget_sharers()
    }

    /// Pages of the low zone one thread's cache may hold: the domain's budget (or the low zone's
    /// cap, once it ran short) shared among every cache in use.
    pub(super) fn low_cache_budget(&self) -> u64 {
        let budget = self.budget_pages.load(Ordering::Relaxed);
        let low = self.low_budget_pages.load(Ordering::Relaxed);
        budget.min(low) / self.users.load(Ordering::Relaxed).max(1)
    }

    /// Whether a cache holding `(cached, low)` pages (in all, in the low zone) may take a range
    /// of `pages` pages at `off` within its budgets: the domain's, and the low zone's for a
    /// range that starts there. The budgets' definition, multiplied out, against which the tests
    /// hold the [`Limits`] that frees use.
    #[cfg(test)]
    pub(super) fn may_cache(&self, (cached, low): (u64, u64), off: u64, pages: u64) -> bool {
        let budget = self.budget_pages.load(Ordering::Relaxed);
        (cached + pages) * self.budget_sharers() <= budget
            && (off >= self.low_end
                || (low + pages) * self.users.load(Ordering::Relaxed).max(1)
                    <= budget.min(self.low_budget_pages.load(Ordering::Relaxed)))
    }

    /// Tell the caches that `users` or a budget changed: each works its [`Limits`] out again
    /// before its next cached free. Release: a cache that sees the new generation (acquire) sees
    /// the change too.
    pub(super) fn budgets_changed(&self) {
        self.budget_gen.fetch_add(1, Ordering::Release);
    }

    /// Whether `c` may take a range of `pages` pages at `off` within its budgets (see
    /// `may_cache`), by its limits, worked out again first if the budgets changed since.
    pub(super) fn may_cache_by_limits(&self, c: &mut CpuCache, off: u64, pages: u64) -> bool {
        let gen = self.budget_gen.load(Ordering::Acquire);
        if c.limits.gen != gen {
            c.limits = self.limits_at(gen);
            // While a flush runs, the limits are kept at a generation that never comes, so
            // that no quick free passes: the flush raised `flushing` before the generation it
            // made, so a `gen` from it (or later) comes with `flushing` seen raised here, unless
            // that flush has ended.
            if self.flushing.load(Ordering::SeqCst) > 0 {
                c.limits.gen = STALE_GEN;
            }
        }
        self.within_limits(c, off, pages)
    }

    /// [`Self::may_cache_by_limits`] by `c`'s limits as they stand; `None` if the budgets changed since they
    /// were worked out (the caller then goes the full way, which works them out again).
    #[inline(always)]
    fn may_cache_quick(&self, c: &CpuCache, off: u64, pages: u64) -> Option<bool> {
        (c.limits.gen == self.budget_gen.load(Ordering::Acquire))
            .then(|| self.within_limits(c, off, pages))
    }

    #[inline(always)]
    fn within_limits(&self, c: &CpuCache, off: u64, pages: u64) -> bool {
        c.cached_pages + pages <= c.limits.cached
            && (off >= self.low_end || c.low_pages + pages <= c.limits.low)
    }

    /// The limits at generation `gen`: the shares of the budgets one cache may hold.
    #[cold]
    #[inline(never)]
    fn limits_at(&self, gen: u64) -> Limits {
        Limits {
            gen,
            cached: self.cache_budget(),
            low: self.low_cache_budget(),
        }
    }

    /// The cache this thread uses: its own slot, or the one it shares when it owns none here.
    pub(super) fn cache_index(&self) -> usize {
        owned_slot().unwrap_or_else(thread_slot) & (self.cpus.len() - 1)
    }

    /// The order in which this thread's cache was first used (see [`Slot::owned_user`]).
    pub(super) fn my_user(&self) -> u64 {
        match owned_slot() {
            Some(i) if i < self.cpus.len() => self.cpus[i].owned_user.load(Ordering::Relaxed),
            _ => self.cpus[self.cache_index()]
                .shared_user
                .load(Ordering::Relaxed),
        }
    }

    /// This thread's own cache, if it can be entered at once (a slot here, fences not degraded,
    /// no thief in); `None` changed nothing.
    #[inline(always)]
    fn try_own_cache(&self) -> Option<OwnerGuard<'_, CpuCache>> {
        // A slot never used here needs no test of `used`: its cache holds no range (the quick
        // allocation finds none) and its limits no generation (a quick free may take a byte
        // but not keep the range: it hands it to the full way), so the caller goes the full
        // way, which marks the slot used. Meanwhile no thief touches it unseen: reports skip
        // unused slots, and a flush takes every slot through the fences.
        let slot = self.cpus.get(owned_slot_or_past())?;
        // SAFETY: as in `my_cache`: no other live thread owns this number, and no caller enters
        // again while holding the guard.
        unsafe { slot.owned.try_enter(&self.fences) }
    }

    /// Point this thread's cache's live-plane memo at the chunk of offset `off`, so that the
    /// next quick calls near it find their byte there (called off the quick path, after it
    /// missed).
    #[cold]
    #[inline(never)]
    pub(super) fn refill_own_memo(&self, off: u64) {
        if let Some(mut g) = self.try_own_cache() {
            self.live.refill_memo(&mut g.live_memo, off);
        }
    }

    /// [`Self::pop_cached`] when it is quick: the most recent range of the size in this thread's
    /// own cache fits. Every step that could need more (another cache, a scan, a new class) makes
    /// it return `None` before it changes anything, and the caller then goes the full way, which
    /// counts the same work. The range, returned as its first frame, is marked live through the
    /// cache's memo of the live plane (the flag is false when the memo holds another chunk: the
    /// caller marks it).
    #[inline(always)]
    pub(super) fn pop_cached_fast<const LIMITED: bool>(
        &self,
        req: &AllocRequest,
    ) -> Option<(u64, bool)> {
        let mut g = self.try_own_cache()?;
        let c = &mut *g;
        let class = c.classes.get_mut(req.pages as usize)?;
        let &off = class.last()?;
        // `fits` for a request without a boundary: a cached range lies inside the domain, so
        // without a limit (`LIMITED` false: the caller's request has none) only its alignment
        // is left to test.
        let pfn = self.base() + off;
        if pfn & (req.align_pages - 1) != 0
            || LIMITED && req.limit.is_some_and(|l| pfn + req.pages - 1 > l.0)
        {
            return None;
        }
        class.truncate(class.len() - 1);
        c.uncount(off, req.pages, self.low_end);
        c.quick_hits += 1;
        debug_assert!(!self.live.is_live(off), "range at {off} handed out twice");
        // SAFETY: a cache's memo serves this domain's plane alone.
        let marked = match unsafe { self.live.memo_cell(&c.live_memo, off) } {
            Some(cell) => {
                cell.store(live_code(req.pages), Ordering::Release);
                true
            }
            None => false,
        };
        Some((pfn, marked))
    }

    /// A free of a cached size inside the domain, checked and kept in this thread's own cache:
    /// the range's live byte, found through the cache's memo, is taken first, and the cache's
    /// checks come after (fewer values live at once: the quick free saves one callee-saved
    /// register, where it saved four when the checks went ahead of the compare-exchange).
    #[inline(always)]
    pub(super) fn free_fast<const EXCLUSIVE: bool>(&self, off: u64, pages: u64) -> QuickFree {
        // The caller passes sizes from 1 to `quick_free_pages` only: the byte holds the size.
        debug_assert!((1..u64::from(LIVE_LONG)).contains(&pages));
        let code = pages as u8;
        let Some(mut g) = self.try_own_cache() else {
            return QuickFree::Declined;
        };
        let c = &mut *g;
        // SAFETY: a cache's memo serves this domain's plane alone.
        let Some(cell) = (unsafe { self.live.memo_cell(&c.live_memo, off) }) else {
            return QuickFree::Declined;
        };
        // No test of `flushing`: a flush makes a new generation, and while it runs no cache's
        // limits are current (see `may_cache_by_limits`).
        if !take_byte::<EXCLUSIVE>(cell, code) {
            return QuickFree::Declined;
        }
        if self.may_cache_quick(c, off, pages) != Some(true) {
            return QuickFree::Taken;
        }
        let Some(class) = c.classes.get_mut(pages as usize) else {
            return QuickFree::Taken;
        };
        if class.len() >= class.capacity() || !self.tuning.class_has_room(class.len(), pages) {
            return QuickFree::Taken;
        }
        let len = class.len();
        // SAFETY: `len < capacity` (tested above), so slot `len` is allocated: writing it and
        // counting it keeps the vector whole. (A plain `push` would keep a call to grow the
        // vector on this path, and with it the register saves of a call.)
        unsafe {
            class.as_mut_ptr().add(len).write(off);
            class.set_len(len + 1);
        }
        c.count(off, pages, self.low_end);
        c.quick_frees += 1;
        QuickFree::Kept
    }

    /// A cached range for `req` below `lim` from this thread's cache, if one fits.
    #[inline(always)]
    pub(super) fn pop_cached(&self, req: &AllocRequest, lim: u64) -> Option<u64> {
        let base = self.base();
        let fit = Fit::of(req);
        let mut c = self.my_cache();
        c.work.lock_acquisitions += 1;
        let class = c.classes.get_mut(req.pages as usize)?;
        // The most recent entry fits almost always; otherwise look at the few before it only:
        // an old entry that does not fit is not worth a scan.
        let n = class.len();
        let hit = match class.last() {
            Some(&off) if fits(base, off, &fit, lim) => {
                class.truncate(n - 1);
                Some(off)
            }
            _ => pop_scan(class, self.tuning.pop_scan_ranges, base, req, lim),
        };
        match hit {
            Some(off) => {
                c.uncount(off, req.pages, self.low_end);
                c.work.cache_hits += 1;
                Some(off)
            }
            None => None,
        }
    }

    /// Keep a freed range of `pages` pages at `off` in this thread's cache; false if the cache
    /// cannot take it (its class is full, it is over a budget, or a flush is running).
    #[inline(always)]
    pub(super) fn cache_freed(&self, off: u64, pages: u64) -> bool {
        let mut c = self.my_cache();
        c.work.lock_acquisitions += 1;
        // While a flush searches the tree, frees wait for the backend lock and so come after
        // the search.
        let flushing = self.flushing.load(Ordering::SeqCst) > 0;
        let budgets = self.may_cache_by_limits(&mut c, off, pages);
        let class = c.class_mut(pages);
        if !flushing && self.tuning.class_has_room(class.len(), pages) && budgets {
            class.push(off);
            c.count(off, pages, self.low_end);
            c.work.frees += 1;
            return true;
        }
        false
    }
}

/// The last of the `scan` most recent ranges of `class` that fits (the most recent did not),
/// taken out.
#[cold]
#[inline(never)]
fn pop_scan(
    class: &mut Vec<u64>,
    scan: usize,
    base: u64,
    req: &AllocRequest,
    lim: u64,
) -> Option<u64> {
    let fit = Fit::of(req);
    let from = class.len().saturating_sub(scan);
    class[from..]
        .iter()
        .rposition(|&off| fits(base, off, &fit, lim))
        .map(|i| class.swap_remove(from + i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segtree::planes::LIVE_CHUNK;
    use crate::{DomainConfig, IovaAllocator, IovaError, IovaRange, Pfn};

    /// Pages of the ranges `c` holds that start below `low_end`.
    fn low_pages_of(c: &CpuCache, low_end: u64) -> u64 {
        (c.classes.iter().enumerate())
            .map(|(m, class)| class.iter().filter(|&&o| o < low_end).count() as u64 * m as u64)
            .sum()
    }

    #[test]
    fn the_low_zone_budget_bounds_only_the_low_zone() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 17) - 1), 65536).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let low_req = AllocRequest::pages(1).below(cfg.pfn_32bit());
        let low: Vec<IovaRange> = (0..300).map(|_| dom.allocate(&low_req).unwrap()).collect();
        // The rest of the low batch goes back, so that the high requests search the tree.
        dom.flush_caches();
        let high: Vec<IovaRange> = (0..300)
            .map(|_| dom.allocate(&AllocRequest::pages(1)).unwrap())
            .collect();
        assert!(low.iter().all(|r| r.pfn_lo.0 < dom.low_end));
        assert!(high.iter().all(|r| r.pfn_lo.0 >= dom.low_end));
        dom.flush_caches();
        dom.low_budget_pages.store(100, Ordering::Relaxed);
        dom.budgets_changed();
        for r in &low {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        let c = dom.my_cache();
        assert!(c.low_pages <= 100, "{} low pages cached", c.low_pages);
        assert_eq!(c.low_pages, low_pages_of(&c, dom.low_end));
        let low_cached = c.low_pages;
        drop(c);
        for r in &high {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        // Every high range is cached, whatever the low zone's budget.
        let c = dom.my_cache();
        assert_eq!(
            (c.low_pages, c.cached_pages),
            (low_cached, low_cached + 300)
        );
        assert_eq!(c.low_pages, low_pages_of(&c, dom.low_end));
        drop(c);
        // Allocations take from both and keep the count.
        for _ in 0..150 {
            dom.allocate(&low_req).unwrap();
            dom.allocate(&AllocRequest::pages(1)).unwrap();
        }
        let c = dom.my_cache();
        assert_eq!(c.low_pages, low_pages_of(&c, dom.low_end));
        drop(c);
        dom.flush_caches();
        assert_eq!(dom.my_cache().low_pages, 0);
    }

    #[test]
    fn a_cache_over_its_budget_spills_half_a_class_on_a_free() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(4095), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let live: Vec<IovaRange> = (0..1000)
            .map(|_| dom.allocate(&AllocRequest::pages(1)).unwrap())
            .collect();
        dom.flush_caches();
        for r in live.iter().step_by(2).take(400) {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        assert_eq!(dom.my_cache().cached_pages, 400);
        // As after a flush or a zone's cap: each free now finds the cache over its budget.
        dom.budget_pages.store(128, Ordering::Relaxed);
        dom.budgets_changed();
        for r in live.iter().skip(1).step_by(2).take(2) {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        // 400 -> 200 (half the class, and the free itself) -> 100.
        assert_eq!(dom.my_cache().cached_pages, 100);
    }

    #[test]
    fn more_threads_than_cpus_share_the_budget_as_cpus_but_the_low_zone_among_all() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 22) - 1), 4096).unwrap();
        let mut dom = SegTreeAllocator::new(cfg).unwrap();
        dom.running = 2;
        let budget = dom.budget_pages.load(Ordering::Relaxed);
        let high = dom.low_end;
        for (users, sharers) in [(1, 1), (2, 2), (8, 2)] {
            dom.users.store(users, Ordering::Relaxed);
            let share = budget / sharers;
            assert_eq!(dom.cache_budget(), share);
            assert!(dom.may_cache((share - 1, 0), high, 1));
            assert!(!dom.may_cache((share, 0), high, 1), "{users} caches");
            // The low zone is split among every cache in use, before any cap.
            let low_share = budget / users;
            assert_eq!(dom.low_cache_budget(), low_share);
            assert!(dom.may_cache((low_share - 1, low_share - 1), 0, 1));
            assert!(
                !dom.may_cache((low_share, low_share), 0, 1),
                "{users} caches"
            );
        }
        dom.low_budget_pages.store(800, Ordering::Relaxed);
        assert_eq!(dom.low_cache_budget(), 100);
        assert!(!dom.may_cache((100, 100), 0, 1));
        assert!(dom.may_cache((100, 100), high, 1));
    }

    #[test]
    fn the_cached_free_limits_agree_with_the_budgets_they_divide_out() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 22) - 1), 4096).unwrap();
        let mut dom = SegTreeAllocator::new(cfg).unwrap();
        let mut c = CpuCache::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..20_000 {
            dom.running = 1 + next(8);
            dom.users.store(next(12), Ordering::Relaxed);
            dom.budget_pages.store(next(5000), Ordering::Relaxed);
            dom.low_budget_pages.store(next(5000), Ordering::Relaxed);
            dom.budgets_changed();
            let (cached, low, pages) = (next(3000), next(3000), 1 + next(64));
            let off = if next(2) == 0 { 0 } else { dom.low_end };
            c.cached_pages = cached;
            c.low_pages = low;
            assert_eq!(
                dom.may_cache_by_limits(&mut c, off, pages),
                dom.may_cache((cached, low), off, pages),
                "cached {cached}, low {low}, pages {pages}, at {off}"
            );
        }
        // Without a new generation the limits stay as they were worked out.
        let before = c.limits;
        dom.budget_pages.store(0, Ordering::Relaxed);
        dom.may_cache_by_limits(&mut c, 0, 1);
        assert_eq!((c.limits.gen, c.limits.cached), (before.gen, before.cached));
    }

    #[test]
    fn quick_calls_find_each_live_byte_through_whichever_chunk_holds_it() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 16) - 1), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let req = AllocRequest::pages(1);
        let live: Vec<IovaRange> = (0..8000).map(|_| dom.allocate(&req).unwrap()).collect();
        // One range from each of the live-plane chunks the ranges span, so that every call
        // below finds the cache's memo holding another chunk than its range's.
        let mut picks: Vec<IovaRange> = Vec::new();
        for r in &live {
            let chunk = |r: &IovaRange| (r.pfn_lo.0 - dom.base()) / LIVE_CHUNK as u64;
            if picks.iter().all(|p| chunk(p) != chunk(r)) {
                picks.push(*r);
            }
        }
        assert!(picks.len() >= 3, "{} chunks", picks.len());
        let top = dom.base() + (1 << 16) - 1;
        for r in &picks {
            // Two pages from the domain's last page run past its end: that is the error then.
            let e = dom.free(r.pfn_lo, 2).unwrap_err();
            if r.pfn_lo.0 == top {
                assert!(matches!(e, IovaError::RangeOutsideDomain { .. }), "{e:?}");
            } else {
                assert!(matches!(e, IovaError::SizeMismatch { .. }), "{e:?}");
            }
        }
        for r in &picks {
            dom.free(r.pfn_lo, 1).unwrap();
            assert!(!dom.live.is_live(r.pfn_lo.0 - dom.base()));
        }
        for r in &picks {
            let e = dom.free(r.pfn_lo, 1).unwrap_err();
            assert!(matches!(e, IovaError::NotAllocated { .. }), "{e:?}");
        }
        // The cache hands them back, each marked live through the memo, and freed once each.
        let again: Vec<IovaRange> = picks.iter().map(|_| dom.allocate(&req).unwrap()).collect();
        let mut want: Vec<u64> = picks.iter().map(|r| r.pfn_lo.0).collect();
        let mut got: Vec<u64> = again.iter().map(|r| r.pfn_lo.0).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        for r in &again {
            assert!(dom.live.is_live(r.pfn_lo.0 - dom.base()));
        }
        for r in &again {
            dom.free(r.pfn_lo, 1).unwrap();
            assert!(dom.free(r.pfn_lo, 1).is_err());
        }
        // A page whose chunk was never written is not live.
        let far = Pfn(dom.base() + 100);
        assert!(matches!(
            dom.free(far, 1).unwrap_err(),
            IovaError::NotAllocated { .. }
        ));
    }

    #[test]
    fn frees_during_a_flush_go_the_full_way_and_quick_frees_resume_after() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 16) - 1), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let req = AllocRequest::pages(1);
        let live: Vec<IovaRange> = (0..64).map(|_| dom.allocate(&req).unwrap()).collect();
        // A free first (the full way: it works the limits out) and an allocation: frees are
        // quick now.
        dom.free(live[0].pfn_lo, 1).unwrap();
        dom.allocate(&req).unwrap();
        let quick = |dom: &SegTreeAllocator| dom.my_cache().quick_frees;
        let before = quick(&dom);
        dom.free(live[1].pfn_lo, 1).unwrap();
        assert_eq!(quick(&dom), before + 1);
        let cached = dom.my_cache().cached_pages;
        dom.begin_flush();
        for r in &live[2..10] {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        // None quick, none cached: the depot or the tree took them.
        assert_eq!(quick(&dom), before + 1);
        assert_eq!(dom.my_cache().cached_pages, cached);
        assert_eq!(dom.my_cache().limits.gen, STALE_GEN);
        dom.end_flush();
        // The first free after works the limits out again and is cached; the next is quick.
        dom.free(live[10].pfn_lo, 1).unwrap();
        assert_eq!(dom.my_cache().cached_pages, cached + 1);
        assert_eq!(quick(&dom), before + 1);
        dom.free(live[11].pfn_lo, 1).unwrap();
        assert_eq!(quick(&dom), before + 2);
    }

    /// A thread with a slot (from another domain) that has never used this domain's: its quick
    /// calls enter the unused slot, find nothing to serve, and go the full way, which marks the
    /// slot used; so a report, which skips unused slots, still sees what the thread keeps. The
    /// thread's first call here is a refused free, which moves the unused cache's memo, so the
    /// next free's byte is found and taken quickly, and the range must still be kept the full
    /// way.
    #[test]
    fn a_thread_entering_a_domain_first_keeps_its_ranges_where_reports_see_them() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 16) - 1), 4096).unwrap();
        let (x, y) = (
            SegTreeAllocator::new(cfg).unwrap(),
            SegTreeAllocator::new(cfg).unwrap(),
        );
        let held: Vec<IovaRange> = (0..8)
            .map(|_| y.allocate(&AllocRequest::pages(1)).unwrap())
            .collect();
        y.flush_caches();
        let before = y.stats().cached_pages;
        std::thread::scope(|s| {
            s.spawn(|| {
                // A slot for this thread, used in `x` only.
                let r = x.allocate(&AllocRequest::pages(1)).unwrap();
                x.free(r.pfn_lo, 1).unwrap();
                // Never allocated, in the chunk of the held ranges (the top of the domain).
                let lowest = held.iter().map(|r| r.pfn_lo.0).min().unwrap();
                let never = Pfn(lowest - 100);
                assert_eq!(never.0 / 2048, lowest / 2048);
                assert!(y.free(never, 1).is_err());
                for r in &held {
                    y.free(r.pfn_lo, 1).unwrap();
                }
            });
        });
        assert_eq!(y.stats().cached_pages, before + held.len() as u64);
        assert_eq!(y.stats().live_allocations, 0);
    }

    #[test]
    fn the_quick_allocation_tests_a_limit_only_where_the_request_has_one() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 20) - 1), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let one = AllocRequest::pages(1);
        let mut live: Vec<IovaRange> = (0..3).map(|_| dom.allocate(&one).unwrap()).collect();
        live.sort_by_key(|r| r.pfn_lo);
        // Freed lowest first, so the highest is on top of the class: a limit below it sends the
        // limited request the full way, which takes a range below the top.
        for r in &live {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        let limit = Pfn(live[1].pfn_lo.0);
        let got = dom.allocate(&one.below(limit)).unwrap();
        assert!(got.pfn_lo <= limit, "{got:?} above {limit:?}");
        // An unlimited request takes the top of the class, quick: the highest range.
        let hits = dom.my_cache().quick_hits;
        assert_eq!(dom.allocate(&one).unwrap().pfn_lo, live[2].pfn_lo);
        assert_eq!(dom.my_cache().quick_hits, hits + 1);
        // A limited request whose limit the top range meets is quick too.
        let left = dom.allocate(&one.below(Pfn((1 << 20) - 1))).unwrap();
        assert_eq!(dom.my_cache().quick_hits, hits + 2);
        assert_ne!(left.pfn_lo, got.pfn_lo);
    }

    #[test]
    fn cache_count_is_a_power_of_two() {
        let a = SegTreeAllocator::new(DomainConfig::with_address_bits(32, 4096).unwrap()).unwrap();
        assert!(a.cpus.len().is_power_of_two() && a.cpus.len() <= 1 << a.tuning.max_slots_log2);
    }
}
