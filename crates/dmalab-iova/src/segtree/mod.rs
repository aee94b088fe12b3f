//! `segtree`: dmalab's allocator. An exact segment-tree search over lazily allocated bitmaps, with
//! per-thread caches for every size and lock-free checking of frees.
//!
//! Why this design, against the three it must beat (`docs/design/segtree.md` has the
//! measurements behind each choice):
//!
//! * The tree design (Linux's) walks allocated ranges one by one from a cached position; on a
//!   full, fragmented space the walk grows with the number of ranges. Here a segment tree over
//!   the page bitmap keeps, for every span, its longest free run and the runs at its edges
//!   (module `tree`), and for size-aligned requests of up to 64 pages the longest run from an
//!   aligned start: a search skips any span that cannot hold the request, so a constrained fit
//!   costs `O(log n)` node visits, and it still proves failure exactly. Where space is scarce
//!   the same summaries place requests as a buddy allocator would, partly used blocks first.
//! * The bitmap design costs a bit per page of the whole domain; a 48-bit domain cannot have
//!   one. Here every plane and the tree live in chunks created on first write (module
//!   `planes`), so memory follows the pages in use.
//! * The magazine layer only caches power-of-two sizes (rounding wastes IOVA space) and needs
//!   the backend or a registry to check frees. Here each thread slot caches exact sizes up to
//!   [`Tuning::max_cached_pages`] (module `cache`), refilled in batches under one backend lock
//!   and spilled in batches to a shared depot (module `depot`), and a free is checked without
//!   the backend or a registry (module `free`): a `live` plane marks the first page of every
//!   range a caller holds (a byte a page, so an allocation marks it with a plain store) and an
//!   `ends` plane the last page of every range the backend gave out. A free of `(pfn, pages)`
//!   is legal exactly when `pfn` is live, `pfn + pages - 1` is an end and no end lies between.
//!
//! A thread enters its own cache without an atomic read-modify-write (module `owned`), so a
//! cache hit is two plain stores, and a map and unmap of one page is one atomic
//! read-modify-write in all, the free's. Each cache keeps the address of the live plane's chunk
//! it last used (`planes::LiveMemo`), so a quick call reaches its live byte in one load, not
//! through the plane's directory (`docs/results/2026-12-06-live-memo.md` measures why).
//!
//! # The slow path
//!
//! An allocation the thread's cache cannot serve takes these steps, in order, stopping at the
//! first that finds a place (as Linux's `alloc_iova_fast` tries its per-CPU cache, then the
//! depot, then the tree, then flushes and retries):
//!
//! 1. `refill` (module `refill`): the depot's ranges of the exact size, else a tree search
//!    (this thread's part of the space first), with a batch more for the cache.
//! 2. `cap_zone_budget` (module `flush`): the tree has no place below a device's limit, so the
//!    caches' share of that zone is capped from now on.
//! 3. `cut_from_larger_cached` (module `reclaim`): a larger cached range at a legal start, cut
//!    to size.
//! 4. `reclaim_from_own_cache`: for a size-aligned request of at most 64 pages, an aligned
//!    block whose used pages are all ranges in the depot or this thread's cache.
//! 5. `reclaim_from_every_cache`: the same over every cache; if no block qualifies, the
//!    request fails here, as a flush could not serve it.
//! 6. `flush_own_and_retry` (module `flush`): other requests return this thread's cache and
//!    the depot to the tree and search again.
//! 7. `flush_all_and_retry`: every cache returned, the budget halved, and an exact search: a
//!    single thread finds space whenever some exists.
//!
//! Steps 1 to 7 run under one hold of the backend lock, so no other thread's refill takes what
//! they free for this request, and no range another thread returns to the tree after step 1's
//! search escapes the steps after it: a request is refused only when no place exists counting
//! the tree, the depot and every cache (steps 5 and 7 are exact: see `reclaim_in` and
//! `flush_all_and_retry`).

mod cache;
mod depot;
mod flush;
mod free;
mod owned;
mod planes;
mod published;
mod reclaim;
mod refill;
mod report;
mod reserve;
mod spin;
mod sync;
mod tree;
mod tuning;

use std::sync::atomic::AtomicU64;

use crossbeam_utils::CachePadded;

pub use self::report::ZoneReport;
pub use self::tuning::{
    FenceMode, Tuning, CACHE_BUDGET_PAGES, DEPOT_PAGES, MAX_CACHED_PAGES, MIN_CACHE_BUDGET_PAGES,
    SEGTREE_MAX_PAGES, ZONE_CACHE_SHARE,
};

use self::cache::{QuickFree, Slot};
use self::depot::Backend;
use self::owned::Fences;
use self::planes::{BitPlane, LivePlane, LIVE_LONG};
use self::published::{BackendGuard, PublishedWork};
use self::tree::SegTree;
use crate::bitmap::check_in_domain;
use crate::error::IovaError;
use crate::placement::Fit;
use crate::shard::hardware_threads;
use crate::types::{AllocRequest, DomainConfig, DomainStats, IovaRange, Pfn, WorkCounters};
use crate::{counted_between_snapshots, IovaAllocator};

/// The most caches the domain's budget ([`Tuning::cache_budget_pages`]) is split among: on a
/// machine with more hardware threads, each running cache still keeps this share of the budget,
/// so the caches may hold up to `running / MAX_BUDGET_SHARERS` times the budget in all until a
/// zone runs short (the zone's cap, the forced flushes' halving and the low zone's own budget,
/// split among every cache, bound them then; a request is never refused for what caches hold,
/// as the slow path reclaims it). Split 16 ways (a 16-CPU machine; measured on 2 cores with the
/// machine's count forced to 16), each cache of `mixed`'s threads (4096 live mappings of 1 to 64
/// pages) held 4096 pages and went to the backend lock on 3.8% of its calls instead of 0.3%,
/// halving `mixed`'s throughput at 16 threads and raising its p99 4x; on a 16-core machine
/// that lock's queue is the likely source of the 53 us p99 of issue 45.
const MAX_BUDGET_SHARERS: u64 = 4;

/// dmalab's allocator; see the module documentation.
#[derive(Debug)]
pub struct SegTreeAllocator {
    cfg: DomainConfig,
    tuning: Tuning,
    backend: std::sync::Mutex<Backend>,
    /// The backend's work counters as its last holder left them (module `published`).
    published: CachePadded<PublishedWork>,
    /// First page of every range a caller holds (a byte each: see [`LivePlane`]).
    live: LivePlane,
    /// Last page of every range the backend handed out (held by a caller or a cache).
    ends: BitPlane,
    /// A power of two of slots, at most `2^Tuning::max_slots_log2`.
    cpus: Box<[CachePadded<Slot>]>,
    fences: Fences,
    /// The caches' budget, in pages: shared among the caches running (`cache_budget`).
    budget_pages: AtomicU64,
    /// End (exclusive offset) of the low zone, the domain's pages below 4 GiB: a zone that 32-bit
    /// devices share and that can run short while the rest of the space cannot.
    low_end: u64,
    /// The budget of the caches' pages in the low zone: unbounded until a request below a limit
    /// in it finds no place in the tree (see [`Tuning::zone_cache_share`]).
    low_budget_pages: AtomicU64,
    /// Threads flushing the caches to retry a failed search. While it is non-zero, frees take
    /// the backend lock the flusher holds (and so reach the depot or the tree after its search)
    /// instead of a per-CPU cache, so that no page freed during a flush hides in a cache it
    /// already drained.
    flushing: AtomicU64,
    /// Caches (owned or shared) some thread has used: while one thread alone uses the domain, its
    /// refills search the whole space, so where ranges land does not depend on which slot the
    /// thread happens to hold (a simulator's runs stay bit-identical on any thread).
    users: AtomicU64,
    /// Hardware threads of the machine (at least 1): the most caches that run at once, as far as
    /// the budget is concerned, which is split among at most [`MAX_BUDGET_SHARERS`] of them.
    running: u64,
    /// Bumped (with release) after every change of `users`, `budget_pages` or
    /// `low_budget_pages`, and at the start of every flush: a cache whose limits were worked out
    /// at another value works them out again ([`CpuCache::limits`]), so the cached free compares
    /// instead of multiplying, and the quick free needs no test of `flushing` of its own.
    budget_gen: AtomicU64,
    /// The largest size a free keeps the quick way: the caches' largest, but below
    /// [`LIVE_LONG`] (a longer range's byte does not hold its size, and its free reads the ends
    /// plane, the full way). One compare then tests both, and the quick free's byte is the size.
    quick_free_pages: u64,
}

impl SegTreeAllocator {
    /// An empty domain with the default [`Tuning`].
    pub fn new(cfg: DomainConfig) -> Result<Self, IovaError> {
        Self::with_tuning(cfg, Tuning::default())
    }

    /// An empty domain with the given knobs; [`IovaError::InvalidTuning`] names a value out of
    /// its range.
    pub fn with_tuning(cfg: DomainConfig, tuning: Tuning) -> Result<Self, IovaError> {
        cfg.validate()?;
        tuning.validate()?;
        if cfg.total_pages() > SEGTREE_MAX_PAGES {
            return Err(IovaError::DomainTooLarge {
                pages: cfg.total_pages(),
                max_pages: SEGTREE_MAX_PAGES,
                allocator: "segtree",
            });
        }
        let words = cfg.total_pages().div_ceil(64);
        let n = tuning.slots(hardware_threads());
        let cpus = (0..n).map(|_| CachePadded::new(Slot::default())).collect();
        Ok(Self {
            cfg,
            tuning,
            backend: std::sync::Mutex::new(Backend::new(cfg.total_pages(), cfg.pfn_lo.0)),
            published: CachePadded::new(PublishedWork::default()),
            live: LivePlane::new(cfg.total_pages()),
            ends: BitPlane::new(words),
            cpus,
            fences: Fences::new(tuning.fences),
            budget_pages: AtomicU64::new(tuning.cache_budget_pages),
            low_end: if cfg.pfn_lo <= cfg.pfn_32bit() {
                cfg.pfn_32bit().0 - cfg.pfn_lo.0 + 1
            } else {
                0
            },
            low_budget_pages: AtomicU64::new(u64::MAX),
            flushing: AtomicU64::new(0),
            users: AtomicU64::new(0),
            running: (hardware_threads() as u64).clamp(1, MAX_BUDGET_SHARERS),
            // Above every cache's starting value (0), so each works its limits out first.
            budget_gen: AtomicU64::new(1),
            quick_free_pages: tuning.max_cached_pages.min(u64::from(LIVE_LONG) - 1),
        })
    }

    /// The knobs this domain was built with.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// The backend, locked: its counters are published when the guard drops.
    fn backend(&self) -> BackendGuard<'_> {
        BackendGuard::lock(&self.backend, &self.published)
    }

    fn base(&self) -> u64 {
        self.cfg.pfn_lo.0
    }

    /// An allocation the cache could not serve: the slow path's steps (see the module
    /// documentation), kept out of `allocate`'s hot path.
    #[cold]
    #[inline(never)]
    fn allocate_slow(&self, req: &AllocRequest, limit: Pfn) -> Result<IovaRange, IovaError> {
        let lim = limit.0 - self.base();
        let cacheable = self.tuning.caches_size(req.pages);
        let fit = Fit::of(req);
        let extra = if cacheable {
            let limited = lim + 1 < self.cfg.total_pages();
            self.tuning.refill_extra(req.pages, limited)
        } else {
            0
        };
        // One hold of the backend lock from the refill's search to the last step: a range that
        // another thread returned to the tree (a flush, a spill, a reclaim's leftovers) between a
        // failed search and the steps after it would be in no cache and no depot word that the
        // reclaim looks at, and the request would be refused with room in the tree.
        let part = self.home_part(lim);
        let mut b = self.backend();
        b.tree.work.lock_acquisitions += 1;
        let got = self
            .refill_locked(&mut b, lim, part, &fit, extra, cacheable)
            .or_else(|| self.allocate_when_tree_full(&mut b, lim, &fit));
        let Some(off) = got else {
            b.tree.work.failures += 1;
            drop(b);
            return Err(IovaError::NoSpace {
                pages: req.pages,
                align_pages: req.align_pages,
                limit,
                boundary_pages: req.boundary_pages,
            });
        };
        drop(b);
        self.mark_live(off, req.pages);
        Ok(self.range_at(off, req.pages))
    }

    /// Steps 2 to 7 of the slow path, in the same hold of the backend lock as the refill.
    fn allocate_when_tree_full(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        let off = self.find_space_in_caches(b, lim, fit);
        if off.is_some() {
            b.tree.work.allocs += 1;
        }
        off
    }

    /// Steps 2 to 7 of the slow path; the caller holds the backend lock.
    fn find_space_in_caches(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        self.cap_zone_budget(lim);
        if let Some(off) = self.cut_from_larger_cached(b, lim, fit) {
            return Some(off);
        }
        if let Some(off) = self.reclaim_from_own_cache(b, lim, fit) {
            return Some(off);
        }
        if Self::reclaimable(fit) {
            return self.reclaim_from_every_cache(b, lim, fit);
        }
        if let Some(off) = self.flush_own_and_retry(b, lim, fit) {
            return Some(off);
        }
        self.flush_all_and_retry(b, lim, fit)
    }

    /// Whether `req` can be served from a cache without further checks but its size's: a
    /// power-of-two alignment, no boundary, and a limit inside the domain (or none). Any other
    /// request goes through [`Self::allocate_checked`], which validates it in full (a segment
    /// boundary too, still from the cache, so that the quick path holds one constraint fewer in
    /// registers).
    ///
    /// The size needs no test here: the quick path serves only a size whose class holds a
    /// range, and the classes hold sizes from 1 to [`Tuning::max_cached_pages`] alone (no free
    /// or refill of another size reaches them), so a size of 0 or above the caches finds no
    /// range and goes to [`Self::allocate_missed`], which sends it the full way.
    #[inline(always)]
    fn quick_request(&self, req: &AllocRequest) -> bool {
        req.align_pages.is_power_of_two()
            && req.boundary_pages.is_none()
            && req
                .limit
                .is_none_or(|l| l >= self.cfg.pfn_lo && l <= self.cfg.pfn_hi)
    }

    /// An allocation with every check: the path of requests [`Self::quick_request`] turns away
    /// (invalid ones, which fail here with their typed error, and sizes above the caches).
    #[cold]
    #[inline(never)]
    fn allocate_checked(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let limit = req.validate(&self.cfg)?;
        if self.tuning.caches_size(req.pages) {
            return self.allocate_cacheable(req, limit.0 - self.base());
        }
        self.allocate_slow(req, limit)
    }

    /// A quick request (one [`Self::quick_request`] passed) that the quick path did not serve:
    /// a size of 0 or above the caches the full way (`quick_request` does not test the size),
    /// else [`Self::allocate_cacheable`] with its limit as an offset, worked out here so that
    /// the quick path need not hold it, and without validating the request again.
    #[cold]
    #[inline(never)]
    fn allocate_missed(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        if !self.tuning.caches_size(req.pages) {
            return self.allocate_checked(req);
        }
        let top = req.limit.unwrap_or(self.cfg.pfn_hi);
        self.allocate_cacheable(req, top.0 - self.base())
    }

    /// A valid request of a cached size that the quick path did not serve (or that was checked
    /// in full): the cache the full way, then the slow path.
    #[cold]
    #[inline(never)]
    fn allocate_cacheable(&self, req: &AllocRequest, lim: u64) -> Result<IovaRange, IovaError> {
        if let Some(off) = self.pop_cached(req, lim) {
            self.mark_live(off, req.pages);
            return Ok(self.range_at(off, req.pages));
        }
        self.allocate_slow(req, Pfn(lim + self.base()))
    }

    /// The end of a quick allocation whose live byte's chunk the cache's memo does not hold.
    #[cold]
    #[inline(never)]
    fn mark_live_and_range(&self, off: u64, pages: u64) -> Result<IovaRange, IovaError> {
        self.mark_live(off, pages);
        self.refill_own_memo(off);
        Ok(self.range_at(off, pages))
    }

    /// A free of a cached size whose live byte is already taken, that the quick path could not
    /// keep (or that was checked in full): the cache the full way, or the depot and tree.
    #[cold]
    #[inline(never)]
    fn keep_freed(&self, off: u64, pages: u64) -> Result<(), IovaError> {
        if !self.cache_freed(off, pages) {
            self.spill(off, pages);
        }
        Ok(())
    }

    /// A free of a cached size inside the domain that the caller's own cache did not take (not
    /// entered yet, a thief in, a thread without a slot, a long range, or a live byte that did
    /// not hold the size): its live byte taken the short way where it can be, then kept the full
    /// way; otherwise every check.
    #[cold]
    #[inline(never)]
    fn free_declined<const EXCLUSIVE: bool>(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        // Wrapping: the quick free does not test the domain, so `pfn` may lie below it. Such an
        // offset is past every chunk: the memo stays as it is, the byte is not found, and
        // `free_checked` refuses the free.
        let off = pfn.0.wrapping_sub(self.base());
        self.refill_own_memo(off);
        if self.take_live_fast::<EXCLUSIVE>(off, pages) {
            return self.keep_freed(off, pages);
        }
        self.free_checked(pfn, pages)
    }

    /// A free with every check: sizes above the caches, ranges reaching outside the domain, and
    /// every free whose live byte did not hold its size (each refused with its typed error).
    #[cold]
    #[inline(never)]
    fn free_checked(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        if pages == 0 {
            return Err(IovaError::ZeroSize);
        }
        check_in_domain(&self.cfg, pfn, Pfn(pfn.0.saturating_add(pages - 1)))?;
        let off = pfn.0 - self.base();
        self.take_live(pfn, pages, off)?;
        if self.tuning.caches_size(pages) {
            return self.keep_freed(off, pages);
        }
        self.release(pages, &[off], 1);
        Ok(())
    }

    /// The range of `pages` pages at offset `off`, in frames.
    #[inline(always)]
    fn range_at(&self, off: u64, pages: u64) -> IovaRange {
        IovaRange {
            pfn_lo: Pfn(off + self.base()),
            pages,
        }
    }
}

impl IovaAllocator for SegTreeAllocator {
    fn name(&self) -> String {
        "segtree".into()
    }

    fn config(&self) -> &DomainConfig {
        &self.cfg
    }

    #[inline]
    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        self.allocate_tallied(req, &mut ())
    }

    #[inline]
    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        self.free_tallied::<false>(pfn, pages, &mut ())
    }

    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        self.reserve_range(pfn_lo, pfn_hi)
    }

    fn stats(&self) -> DomainStats {
        self.occupancy()
    }

    fn work(&self) -> WorkCounters {
        self.work_counted()
    }

    fn memory_bytes(&self) -> usize {
        self.heap_bytes()
    }

    fn flush_caches(&self) {
        let mut b = self.backend();
        b.tree.work.lock_acquisitions += 1;
        self.flush_locked(&mut b);
    }

    fn exact_fit(&self) -> bool {
        true
    }

    fn counts_each_call(&self) -> bool {
        true
    }

    /// The quick paths count their known work; every other path is counted between
    /// snapshots, so the sum over calls equals what [`Self::work`] shows.
    #[inline]
    fn allocate_counted(
        &self,
        req: &AllocRequest,
        work: &mut WorkCounters,
    ) -> Result<IovaRange, IovaError> {
        self.allocate_tallied(req, work)
    }

    /// As [`Self::allocate_counted`].
    fn free_counted(&self, pfn: Pfn, pages: u64, work: &mut WorkCounters) -> Result<(), IovaError> {
        self.free_tallied::<false>(pfn, pages, work)
    }

    /// As [`Self::free_counted`]; the common free clears its live byte without a
    /// compare-exchange, which only racing frees need.
    #[inline]
    fn free_counted_exclusive(
        &mut self,
        pfn: Pfn,
        pages: u64,
        work: &mut WorkCounters,
    ) -> Result<(), IovaError> {
        self.free_tallied::<true>(pfn, pages, work)
    }
}

/// What an allocation or free tells its caller of its work: nothing (`()`, for
/// [`IovaAllocator::allocate`] and [`IovaAllocator::free`]), or its counts added to a
/// [`WorkCounters`] (for the counted calls). The quick paths know their counts; the ways off
/// them are counted between two snapshots.
trait Tally {
    /// A cached allocation: one cache hit under the cache's lock ([`IovaAllocator::work`]
    /// adds each hit to the allocations).
    fn quick_hit(&mut self);
    /// A cached free under the cache's lock.
    fn quick_free(&mut self);
    /// `call`, a way off the quick path, with whatever work it counts.
    fn around<T>(&mut self, a: &SegTreeAllocator, call: impl FnOnce() -> T) -> T;
}

impl Tally for () {
    #[inline(always)]
    fn quick_hit(&mut self) {}
    #[inline(always)]
    fn quick_free(&mut self) {}
    #[inline(always)]
    fn around<T>(&mut self, _: &SegTreeAllocator, call: impl FnOnce() -> T) -> T {
        call()
    }
}

impl Tally for WorkCounters {
    #[inline(always)]
    fn quick_hit(&mut self) {
        self.lock_acquisitions += 1;
        self.cache_hits += 1;
        self.allocs += 1;
    }
    #[inline(always)]
    fn quick_free(&mut self) {
        self.lock_acquisitions += 1;
        self.frees += 1;
    }
    #[inline(always)]
    fn around<T>(&mut self, a: &SegTreeAllocator, call: impl FnOnce() -> T) -> T {
        counted_between_snapshots(a, self, call)
    }
}

impl SegTreeAllocator {
    /// An allocation, its work told to `tally`. The common request (a cached size, valid
    /// constraints) goes straight to the cache; anything else is checked in full out of line,
    /// so the cached call stays short.
    #[inline(always)]
    fn allocate_tallied(
        &self,
        req: &AllocRequest,
        tally: &mut impl Tally,
    ) -> Result<IovaRange, IovaError> {
        if !self.quick_request(req) {
            return tally.around(self, || self.allocate_checked(req));
        }
        // Every way off the quick path below is a call in tail position, so the quick path
        // itself calls nothing; with the limit's test out of line it holds few enough values
        // that it saves one register only (the result's address, around those calls).
        if req.limit.is_some() {
            return self.allocate_limited(req, tally);
        }
        self.allocate_quick::<false>(req, tally)
    }

    /// A quick request from the cache, or the full way if the quick path cannot serve it
    /// (`LIMITED`: the request has a limit, to test).
    #[inline(always)]
    fn allocate_quick<const LIMITED: bool>(
        &self,
        req: &AllocRequest,
        tally: &mut impl Tally,
    ) -> Result<IovaRange, IovaError> {
        let Some((pfn, marked)) = self.pop_cached_fast::<LIMITED>(req) else {
            return tally.around(self, || self.allocate_missed(req));
        };
        tally.quick_hit();
        if !marked {
            return tally.around(self, || {
                self.mark_live_and_range(pfn - self.base(), req.pages)
            });
        }
        // The frame the fit test worked out, not the offset again plus the base: the base is
        // read once.
        Ok(IovaRange {
            pfn_lo: Pfn(pfn),
            pages: req.pages,
        })
    }

    /// [`Self::allocate_tallied`] for a quick request with a limit: the same quick path with the
    /// limit tested, out of line, so that the common request's path does not hold the limit.
    #[inline(never)]
    fn allocate_limited(
        &self,
        req: &AllocRequest,
        tally: &mut impl Tally,
    ) -> Result<IovaRange, IovaError> {
        self.allocate_quick::<true>(req, tally)
    }

    /// A free, its work told to `tally`. The common free (a cached size) is checked by its live
    /// byte alone; anything else takes the full checks out of line.
    ///
    /// The range is not tested against the domain: the live byte decides that too. A short
    /// range's byte holds its exact size, set only by an allocation of that size inside the
    /// domain, so a byte that holds `pages` places the whole range inside. A first page outside
    /// the domain finds no byte that holds anything: an offset below the base wraps to one that
    /// no chunk holds, so the cache's memo cannot hold it, and an offset past the last page but
    /// inside the last chunk finds a byte never set. Either way the quick free declines, and
    /// [`Self::free_declined`] sends it to [`Self::free_checked`], which names the error.
    #[inline(always)]
    fn free_tallied<const EXCLUSIVE: bool>(
        &self,
        pfn: Pfn,
        pages: u64,
        tally: &mut impl Tally,
    ) -> Result<(), IovaError> {
        let off = pfn.0.wrapping_sub(self.base());
        if pages.wrapping_sub(1) >= self.quick_free_pages {
            return tally.around(self, || self.free_checked(pfn, pages));
        }
        match self.free_fast::<EXCLUSIVE>(off, pages) {
            QuickFree::Kept => {
                tally.quick_free();
                Ok(())
            }
            QuickFree::Taken => tally.around(self, || self.keep_freed(off, pages)),
            QuickFree::Declined => {
                tally.around(self, || self.free_declined::<EXCLUSIVE>(pfn, pages))
            }
        }
    }
}

/// Whether the range of `fit.pages` pages at offset `off` satisfies `fit` and ends at or below
/// `lim` (offsets from `base`; alignment and boundary apply to page frame numbers).
#[inline]
fn fits(base: u64, off: u64, fit: &Fit, lim: u64) -> bool {
    let (p, last) = (base + off, off + fit.pages - 1);
    p & (fit.align - 1) == 0
        && last <= lim
        // Same segment: `b` is a power of two (validated), so no bit at or above it differs.
        && fit.boundary.is_none_or(|b| p ^ (base + last) < b)
}

/// The first page of the allocation containing offset `u`: one past the previous end bit or
/// unused or reserved page (a walk as long as the allocation).
fn first_page_of(tree: &SegTree, ends: &BitPlane, reserved: &[(u64, u64)], u: u64) -> u64 {
    let is_reserved = |p: u64| reserved.iter().any(|&(lo, hi)| lo <= p && p <= hi);
    (0..u)
        .rev()
        .find(|&p| ends.test(p) || !tree.is_used(p) || is_reserved(p))
        .map_or(0, |p| p + 1)
}
