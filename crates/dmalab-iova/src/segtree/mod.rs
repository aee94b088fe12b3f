//! `segtree`: dmalab's allocator. An exact segment-tree search over lazily allocated bitmaps, with
//! per-CPU caches for every size and lock-free checking of frees.
//!
//! Why this design, against the three it must beat:
//!
//! * The tree design (Linux's) walks allocated ranges one by one from a cached position; on a full,
//!   fragmented space the walk grows with the number of ranges. Here a segment tree over the page
//!   bitmap keeps, for every span, its longest free run and the runs at its edges (module `tree`),
//!   and for size-aligned requests of up to 64 pages the longest run from an aligned start: a
//!   search skips any span that cannot hold the request, so a constrained fit costs `O(log n)` node
//!   visits, and it still proves failure exactly. Where space is scarce the same summaries place
//!   requests as a buddy allocator would, partly used blocks first.
//! * The bitmap design costs a bit per page of the whole domain; a 48-bit domain cannot have one.
//!   Here every plane and the tree live in chunks created on first write (module `planes`), so
//!   memory follows the pages in use (about 11 bytes per live 1-page mapping on `nic-ring`).
//! * The magazine layer only caches power-of-two sizes up to 32 pages (rounding wastes IOVA space)
//!   and needs the backend or a registry to check frees. Here each thread slot caches exact sizes
//!   up to [`MAX_CACHED_PAGES`], refilled in batches under one backend lock and spilled in batches,
//!   and a free is checked without the backend or a registry. A `live` plane marks the first page
//!   of every range a caller holds (a byte a page, so an allocation marks it with a plain store)
//!   and an `ends` plane the last page of every range the backend gave out. A free of
//!   `(pfn, pages)` is legal exactly when `pfn` is live, `pfn + pages - 1` is an end and no end
//!   lies between.
//!
//! The live byte of a range under 254 pages holds its size. A free takes the byte from that size to
//! *freeing* with one compare-exchange, so of two racing frees exactly one gets further, and a
//! wrong size fails the compare (reading the ends plane on every free had cost 8% of one-page
//! map-and-unmap throughput). For a longer range the free then checks the size against the ends
//! plane, which cannot change while the range is live, and clears the byte (or, for a wrong size,
//! puts it back, so a wrong-size free can never clear a range that was freed and handed out again
//! in between). A racing free that finds the byte *freeing* waits the few instructions until it is
//! decided.
//!
//! Each thread caches in the slot whose number it owns (no other live thread holds that number:
//! `shard::owned_slot`), and enters it without an atomic read-modify-write: a flag store and load,
//! ordered by a process-wide barrier that the rare other users of the cache pay for instead (module
//! `owned`). So a cache hit is two plain stores, and a map and unmap of one page is one atomic
//! read-modify-write in all, the free's. Threads beyond the slots share locked caches. A full class
//! spills its older half to a shared depot, kept by exact size under the backend lock (a range next
//! to free pages of the tree joins them there instead, so that the tree's free space does not
//! wear down to fragments that only small requests can use), and an empty
//! class refills from the depot before it searches the tree: ranges freed on one thread serve
//! another's requests without a search, and a freed large range waits for a request of its size
//! instead of being split by small ones. When the tree finds no space, a larger cached range at a
//! legal start is cut to size (the tail goes to the tree). Next, for a request of at most 64 pages
//! aligned to its size, an aligned block whose used pages all belong to ranges in the depot, or
//! else in this thread's cache or the depot, is reclaimed: those ranges alone go back to the tree,
//! and up to eight more such blocks go to the depot as ranges of the request's size, for the
//! requests of that size that follow (`reclaim_in`); with other threads' caches in use, every cache
//! is then taken at once and searched the same way, and if no block qualifies the request fails, as
//! a flush could not have served it. Other requests next return the thread's own cache and the
//! depot to the tree, and only then is every cache flushed into the tree and the request retried,
//! so a single thread finds space whenever some exists. Flushing other threads' caches is the last
//! resort because it undoes that separation by size: on a crowded 32-bit zone, one flush used to
//! set off thousands.
//!
//! Once `n >= 2` threads use a domain, each refills from its own `n`th of the space first (then
//! the whole, so exactness is kept): threads whose ranges interleave share the cache lines of the
//! live bytes and end bits, and their frees' compare-exchanges bounce them between cores. A lone
//! thread searches the whole space, so where its ranges land does not depend on the slot it holds.

mod owned;
mod planes;
mod spin;
mod tree;

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use self::owned::{Fences, Owned, OwnerGuard};
use self::planes::{live_code, BitPlane, LivePlane, FREEING, LIVE_LONG};
use self::spin::{SpinGuard, SpinLock};
use self::tree::SegTree;
use crate::bitmap::check_in_domain;
use crate::error::IovaError;
use crate::placement::Fit;
use crate::shard::{default_shards, owned_slot, thread_slot};
use crate::types::{AllocRequest, DomainConfig, DomainStats, IovaRange, Pfn, WorkCounters};
use crate::IovaAllocator;

/// Largest domain: 2^40 pages (52-bit addresses with 4 KiB pages). The top level of each lazy
/// directory is sized to the domain up front (about 4.7 MB for a 48-bit domain, 75 MB here), so
/// larger domains are refused rather than risk an allocation failure.
pub const SEGTREE_MAX_PAGES: u64 = 1 << 40;
/// Largest request served from the per-CPU caches (1 MiB of 4 KiB pages).
pub const MAX_CACHED_PAGES: u64 = 256;
/// Pages the per-CPU caches may hold in all, at first, shared equally among the caches in use
/// (so two threads hoard no more of a crowded zone than one). Every flush forced by a failed
/// search halves it (down to [`MIN_CACHE_BUDGET_PAGES`]): a domain whose space is tight learns
/// to cache less, so the caches stop holding the pages other requests need.
pub const CACHE_BUDGET_PAGES: u64 = 64 * 1024;
/// Once a request below a limit (a 32-bit device's zone) finds no place in the tree, the caches
/// together may hold at most this fraction of that zone: 32k pages of the 2^20-page 32-bit zone
/// of 4 KiB pages. For a limit below 4 GiB the cap bounds only the cached pages of ranges that
/// start there (each cache counts them apart, at a compare on every map and unmap), so the rest
/// of the space keeps its caching: with the 32-bit zone full, two threads running `mixed`-like
/// churn above it (the `zone_crunch` example) ran 131M to 141M calls/s, against 49M to 72M when
/// the cap bounded every cached page, and 147M to 159M with the zone untouched. For a higher
/// limit it bounds every cached page.
///
/// On `fragmented-32bit` two threads' caches had held about 25k pages each and the depot most
/// of the rest of the zone's free pages, leaving the tree only fragments; from then on,
/// requests of 33 to 64 pages were cut from larger cached ranges, whose tails split the tree
/// further. Over seven passes of 10M calls a thread, two threads fell from 74M to
/// between 17M and 28M ops/s with 3,101 refusals; with spills joining free pages of the tree
/// (see `spill`), to between 45M and 56M with 330 to 404; with this cap as well, they held 69M
/// to 73M with none (in the same minutes: this machine's two-thread speed drifts between about
/// 70M and 100M from one quarter of an hour to the next). A cap of 1/16 (no cap, with the
/// default budget) wore down as before; a budget of 16k pages from the start held, but at 84M
/// against 100M for 32k in the same minutes.
pub const ZONE_CACHE_SHARE: u64 = 32;
/// The floor of the adaptive cache budget, before it is shared.
pub const MIN_CACHE_BUDGET_PAGES: u64 = 1024;

/// Ranges one CPU caches of size `pages`: a few KiB of entries at most.
fn class_capacity(pages: u64) -> usize {
    (1024 / pages).clamp(8, 512) as usize
}

/// `len < class_capacity(pages)` for `1 <= pages <= MAX_CACHED_PAGES`, without a division (the
/// test on every free).
#[inline]
fn class_has_room(len: usize, pages: u64) -> bool {
    len < 8 || (len < 512 && (len as u64 + 1) * pages <= 1024)
}

/// Most cache slots a domain keeps.
const MAX_CPUS: usize = 128;

/// Pages the shared depot may hold in all. A full class spills its older half there and an
/// empty one refills from there before it searches the tree, so that ranges freed on one thread
/// serve another's requests without a search, and so that a freed large range is kept for a
/// request of its size (a tree search places small requests in it too: on a crowded 32-bit
/// zone that splits the aligned holes the large requests need).
///
/// On `fragmented-32bit` the depot is where most of the zone's free pages end up, kept by exact
/// size, and the more it keeps, the less the tree's free space splits: with 16k pages (and two
/// classes a size) one thread ran 28.6M to 30.6M ops/s with 281 refusals a cell and two threads
/// 21.8M to 26.2M, against 36.2M to 36.8M with none and 51M to 59M with these sizes (three
/// runs each); `mixed` did not change.
pub const DEPOT_PAGES: u64 = 64 * 1024;

/// Ranges of `pages` pages the depot keeps: sixteen full classes.
fn depot_capacity(pages: u64) -> usize {
    16 * class_capacity(pages)
}

/// Blocks a reclaim (`SegTreeAllocator::reclaim_in`) puts in the depot beyond the one it
/// was asked for.
const RECLAIM_EXTRA: usize = 8;

/// Largest range a refill below a limit (a 32-bit device's zone) fetches in a batch.
const BATCH_MAX_PAGES: u64 = 16;

/// Ranges fetched from the backend, beyond the one requested, when a CPU's cache of that size is
/// empty: a batch of about 256 pages, except for ranges over [`BATCH_MAX_PAGES`] requested
/// below a limit (`limited`), which come one at a time. A limited zone is small and crowded,
/// and a batch of large ranges takes the aligned holes that other sizes and other threads need:
/// on `fragmented-32bit` with two threads, such batches left the other thread's requests
/// without holes, and each of those flushed every cache (two threads ran at 0.2x to 0.7x the
/// speed of one; with single ranges, 1.4x to 2.0x). On the whole space the batches stay: one
/// range at a time cost `mixed` a tenth of its two-thread speed in backend-lock waits.
fn refill_extra(pages: u64, limited: bool) -> usize {
    if limited && pages > BATCH_MAX_PAGES {
        0
    } else {
        (class_capacity(pages) / 4).max(1)
    }
}

#[derive(Debug)]
struct Backend {
    tree: SegTree,
    /// Reserved ranges as offsets, sorted and disjoint.
    reserved: Vec<(u64, u64)>,
    /// `depot[n]`: ranges of `n` pages any thread's cache refills from before it searches the
    /// tree, and where a full class spills first (see [`DEPOT_PAGES`]).
    depot: Vec<Vec<u64>>,
    /// Pages in the depot.
    depot_pages: u64,
    /// The depot's pages as masks of position words (offsets plus the tree's phase), kept as
    /// ranges come and go, so that a reclaim finds blocks made of depot ranges without
    /// visiting every range (see `SegTreeAllocator::reclaim_in`). Built by the first reclaim:
    /// a domain that never runs short pays nothing for it (keeping them from the start cost
    /// the simulator of seed 003's runs, whose deferred flushes move hundreds of ranges
    /// through the depot at a time, about a tenth of its speed).
    depot_mask: Option<WordMasks>,
}

type WordMasks = HashMap<u64, u64, BuildHasherDefault<OffsetHasher>>;

impl Backend {
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
    fn masks_of_depot(&self) -> WordMasks {
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
    fn keep_depot_masks(&mut self) {
        if self.depot_mask.is_none() {
            self.depot_mask = Some(self.masks_of_depot());
        }
    }

    /// Take the range at index `i` of the depot's class of `pages` pages.
    fn take_depot_at(&mut self, pages: u64, i: usize) -> u64 {
        let off = self.depot[pages as usize].swap_remove(i);
        self.depot_pages -= pages;
        self.note_depot(off, pages, false);
        off
    }

    /// Whether the depot may take one more range of `pages` pages.
    fn depot_has_room(&self, pages: u64) -> bool {
        self.depot_pages + pages <= DEPOT_PAGES
            && self
                .depot
                .get(pages as usize)
                .is_none_or(|d| d.len() < depot_capacity(pages))
    }

    /// Keep a spilled range of `pages` pages in the depot if it has room; otherwise hand it
    /// back.
    fn keep_in_depot(&mut self, off: u64, pages: u64) -> Option<u64> {
        if !self.depot_has_room(pages) {
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
}

#[derive(Debug, Default)]
struct CpuCache {
    /// `classes[n]`: cached ranges of `n` pages, as offsets; grown to the largest size cached.
    classes: Vec<Vec<u64>>,
    cached_pages: u64,
    work: WorkCounters,
    /// Of `cached_pages`, those of ranges that start in the low zone (see
    /// `SegTreeAllocator::low_end`).
    low_pages: u64,
}

/// One slot's caches.
#[derive(Debug, Default)]
struct Slot {
    /// The cache of the thread owning this slot's number.
    owned: Owned<CpuCache>,
    /// Whether an owner has ever entered `owned` (set once, by the owner): a report skips
    /// caches never used, and needs no barrier when the caller's own is the only one used.
    used: AtomicBool,
    /// Whether a thread has ever used `shared`.
    shared_used: AtomicBool,
    /// The order in which `owned` and `shared` were first used among the domain's caches
    /// (`SegTreeAllocator::users` before each): which part of the space their threads refill
    /// from first (`SegTreeAllocator::home_part`).
    owned_user: AtomicU64,
    shared_user: AtomicU64,
    /// A cache shared, under a lock, by threads owning no slot here (more threads than slots).
    shared: CachePadded<SpinLock<CpuCache>>,
}

/// A thread's hold on its cache.
enum CacheGuard<'a> {
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
    /// Count a range of `pages` pages at `off` out of the cache.
    #[inline(always)]
    fn uncount(&mut self, off: u64, pages: u64, low_end: u64) {
        self.cached_pages -= pages;
        if off < low_end {
            self.low_pages -= pages;
        }
    }

    /// Count a range of `pages` pages at `off` into the cache.
    #[inline(always)]
    fn count(&mut self, off: u64, pages: u64, low_end: u64) {
        self.cached_pages += pages;
        if off < low_end {
            self.low_pages += pages;
        }
    }

    /// Count every range out (the classes are being emptied).
    fn uncount_all(&mut self) {
        self.cached_pages = 0;
        self.low_pages = 0;
    }

    /// The cache of `pages`-page ranges, creating the table up to it.
    fn class_mut(&mut self, pages: u64) -> &mut Vec<u64> {
        let i = pages as usize;
        if self.classes.len() <= i {
            self.classes.resize_with(i + 1, Vec::new);
        }
        &mut self.classes[i]
    }
}

/// A hasher for page offsets: one multiplication (Fibonacci hashing) and a fold of the high
/// half into the low, where the default hasher's SipHash took a fifth of the time of a
/// reclaim.
#[derive(Default)]
struct OffsetHasher(u64);

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

/// dmalab's allocator; see the module documentation.
#[derive(Debug)]
pub struct SegTreeAllocator {
    cfg: DomainConfig,
    backend: SpinLock<Backend>,
    /// First page of every range a caller holds (a byte each: see [`LivePlane`]).
    live: LivePlane,
    /// Last page of every range the backend handed out (held by a caller or a cache).
    ends: BitPlane,
    /// A power of two of slots, at most [`MAX_CPUS`].
    cpus: Box<[CachePadded<Slot>]>,
    fences: Fences,
    /// The current per-CPU cache budget, in pages.
    budget_pages: AtomicU64,
    /// End (exclusive offset) of the low zone, the domain's pages below 4 GiB: a zone that 32-bit
    /// devices share and that can run short while the rest of the space cannot.
    low_end: u64,
    /// The budget of the caches' pages in the low zone: unbounded until a request below a limit
    /// in it finds no place in the tree (see [`ZONE_CACHE_SHARE`]).
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
}

/// Where the free pages at or below a limit are in a [`SegTreeAllocator`] domain
/// ([`SegTreeAllocator::zone_report`]): to follow how a crowded zone, such as a 32-bit
/// device's, wears down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneReport {
    /// Pages free in the tree.
    pub tree_free_pages: u64,
    /// Maximal runs of free pages in the tree.
    pub tree_free_runs: u64,
    /// The longest of those runs.
    pub tree_largest_run: u64,
    /// Free aligned blocks of 64 pages in the tree (64 pages aligned to 64 frames).
    pub tree_free_blocks_64: u64,
    /// Pages of the zone held in the shared depot.
    pub depot_pages: u64,
    /// Pages of the zone held in each cache in use: other threads' owned caches in slot order,
    /// then the caller's, then the shared ones.
    pub cached_pages: Vec<u64>,
}

impl SegTreeAllocator {
    /// Where the free pages at or below `limit` are: free in the tree, in the depot, or held
    /// by each cache in use. Takes the backend lock and, with other threads' caches in use,
    /// a process-wide barrier; meant for diagnosis, not for a hot path.
    pub fn zone_report(&self, limit: Pfn) -> ZoneReport {
        let lim = limit.0.clamp(self.base(), self.cfg.pfn_hi.0) - self.base();
        // Pages of the ranges of `classes` (by size) that end at or below the limit.
        let below = |classes: &[Vec<u64>]| -> u64 {
            let pages = classes.iter().enumerate().map(|(n, class)| {
                class.iter().filter(|&&o| o + n as u64 <= lim + 1).count() as u64 * n as u64
            });
            pages.sum()
        };
        // As in `stats`: the backend lock held while the caches are read gives a snapshot.
        let b = self.backend.lock();
        let mut cached_pages = Vec::new();
        self.each_used_cache(|c| cached_pages.push(below(&c.classes)));
        let (largest, runs, free) = b.tree.free_runs(lim);
        let depot_pages = below(&b.depot);
        // Offsets of the blocks aligned to 64 frames.
        let first = (64 - self.base() % 64) % 64;
        let blocks = (first..)
            .step_by(64)
            .take_while(|&o| o + 63 <= lim)
            .filter(|&o| b.tree.next_used(o, o + 63).is_none())
            .count() as u64;
        ZoneReport {
            tree_free_pages: free,
            tree_free_runs: runs,
            tree_largest_run: largest,
            tree_free_blocks_64: blocks,
            depot_pages,
            cached_pages,
        }
    }

    /// An empty domain.
    pub fn new(cfg: DomainConfig) -> Result<Self, IovaError> {
        cfg.validate()?;
        if cfg.total_pages() > SEGTREE_MAX_PAGES {
            return Err(IovaError::DomainTooLarge {
                pages: cfg.total_pages(),
                max_pages: SEGTREE_MAX_PAGES,
                allocator: "segtree",
            });
        }
        let words = cfg.total_pages().div_ceil(64);
        // A power of two, so a thread's cache is found with a mask rather than a division.
        let n = default_shards().next_power_of_two().clamp(1, MAX_CPUS);
        let cpus = (0..n).map(|_| CachePadded::new(Slot::default())).collect();
        Ok(Self {
            cfg,
            backend: SpinLock::new(Backend {
                tree: SegTree::new(cfg.total_pages(), cfg.pfn_lo.0),
                reserved: Vec::new(),
                depot: Vec::new(),
                depot_pages: 0,
                depot_mask: None,
            }),
            live: LivePlane::new(cfg.total_pages()),
            ends: BitPlane::new(words),
            cpus,
            fences: Fences::detect(),
            budget_pages: AtomicU64::new(CACHE_BUDGET_PAGES),
            low_end: if cfg.pfn_lo <= cfg.pfn_32bit() {
                cfg.pfn_32bit().0 - cfg.pfn_lo.0 + 1
            } else {
                0
            },
            low_budget_pages: AtomicU64::new(u64::MAX),
            flushing: AtomicU64::new(0),
            users: AtomicU64::new(0),
        })
    }

    fn base(&self) -> u64 {
        self.cfg.pfn_lo.0
    }

    /// This thread's cache. Never called while the thread holds a guard from it.
    #[inline(always)]
    fn my_cache(&self) -> CacheGuard<'_> {
        match owned_slot() {
            Some(i) if i < self.cpus.len() => {
                let slot = &self.cpus[i];
                if !slot.used.load(Ordering::Relaxed) {
                    slot.used.store(true, Ordering::Relaxed);
                    let n = self.users.fetch_add(1, Ordering::Relaxed);
                    slot.owned_user.store(n, Ordering::Relaxed);
                }
                // SAFETY: no other live thread owns number `i`, and numbers pass between
                // threads through a mutex; no caller enters again while holding the guard.
                CacheGuard::Owned(unsafe { slot.owned.enter(self.fences) })
            }
            _ => {
                let slot = &self.cpus[self.cache_index()];
                if !slot.shared_used.load(Ordering::Relaxed) {
                    slot.shared_used.store(true, Ordering::Relaxed);
                    let n = self.users.fetch_add(1, Ordering::Relaxed);
                    slot.shared_user.store(n, Ordering::Relaxed);
                }
                CacheGuard::Shared(slot.shared.lock())
            }
        }
    }

    /// Every cache at once: the owned ones taken from their threads (one process-wide barrier
    /// for all), then the shared ones locked, each in a fixed order (so thieves never wait on
    /// each other in a cycle). The caller may hold the backend lock, never a cache.
    fn with_every_cache<R>(&self, f: impl FnOnce(&mut [&mut CpuCache]) -> R) -> R {
        let mut owned = Owned::steal_all(self.cpus.iter().map(|s| &s.owned), self.fences);
        let mut shared: Vec<_> = self.cpus.iter().map(|s| s.shared.lock()).collect();
        let mut all: Vec<&mut CpuCache> = owned
            .iter_mut()
            .map(|g| &mut **g)
            .chain(shared.iter_mut().map(|g| &mut **g))
            .collect();
        f(&mut all)
    }

    /// [`Self::with_every_cache`], one cache at a time.
    fn each_cache(&self, mut f: impl FnMut(&mut CpuCache)) {
        self.with_every_cache(|all| all.iter_mut().for_each(|c| f(c)));
    }

    /// Every cache that has been used, for a report (`work`, `stats`, `memory_bytes`): the
    /// caller's own entered as its owner, the others taken from their threads (one barrier for
    /// all, and none when no other thread's cache was ever used, as in a single-threaded
    /// simulator that reads the counters after every call). A cache whose first use races with
    /// this call is left out: what it holds then comes from calls concurrent with the report.
    /// Flushes drain every cache with [`Self::each_cache`] instead.
    fn each_used_cache(&self, mut f: impl FnMut(&CpuCache)) {
        let mine = owned_slot().filter(|&i| i < self.cpus.len());
        let others = self
            .cpus
            .iter()
            .enumerate()
            .filter(|&(i, s)| Some(i) != mine && s.used.load(Ordering::Acquire))
            .map(|(_, s)| &s.owned);
        for g in Owned::steal_all(others, self.fences) {
            f(&g);
        }
        if let Some(i) = mine {
            // SAFETY: this thread owns number `i` and holds no guard from it (reports are never
            // made from inside a cache).
            let g = unsafe { self.cpus[i].owned.enter(self.fences) };
            f(&g);
        }
        for s in self
            .cpus
            .iter()
            .filter(|s| s.shared_used.load(Ordering::Acquire))
        {
            f(&s.shared.lock());
        }
    }

    /// Pages one thread's cache may hold: the domain's budget shared among the caches in use.
    fn cache_budget(&self) -> u64 {
        self.budget_pages.load(Ordering::Relaxed) / self.users.load(Ordering::Relaxed).max(1)
    }

    /// Pages of the low zone one thread's cache may hold.
    fn low_cache_budget(&self) -> u64 {
        self.low_budget_pages.load(Ordering::Relaxed) / self.users.load(Ordering::Relaxed).max(1)
    }

    /// Whether a cache holding `(cached, low)` pages (in all, in the low zone) may take a range
    /// of `pages` pages at `off` within its budgets: the domain's, and the low zone's for a
    /// range that starts there (the test on every free).
    #[inline(always)]
    fn may_cache(&self, (cached, low): (u64, u64), off: u64, pages: u64) -> bool {
        let users = self.users.load(Ordering::Relaxed).max(1);
        (cached + pages) * users <= self.budget_pages.load(Ordering::Relaxed)
            && (off >= self.low_end
                || (low + pages) * users <= self.low_budget_pages.load(Ordering::Relaxed))
    }

    /// The cache this thread uses: its own slot, or the one it shares when it owns none here.
    fn cache_index(&self) -> usize {
        owned_slot().unwrap_or_else(thread_slot) & (self.cpus.len() - 1)
    }

    /// The part of the space below `lim` that this thread's refills search first, as
    /// `(lowest, highest)` offsets, or `None` while one thread alone uses the domain (it
    /// searches from `lim`): once `n >= 2` caches are in use, the `i`th cache to have been used
    /// takes the `i`th `n`th down from the limit (the domain's top, or a 32-bit device's limit:
    /// then its zone is split the same way). With the depot's preference for ranges from a
    /// thread's own part (`take_from_depot`), splitting the zone too gave `fragmented-32bit`
    /// 61M to 64M ops/s with two threads against 59M to 62M, and `mixed` 112M to 127M against
    /// 109M to 122M (three runs each); when the depot was small and took no notice of parts,
    /// splitting the zone had left more requests without space there.
    ///
    /// The parts are counted in caches in use, not in slots: the domain keeps twice as many
    /// slots as CPUs, and when the parts were slots' (quarters on this two-CPU machine), the two
    /// threads of `fragmented-32bit`, each holding nearly half the zone, overflowed their
    /// quarters into the shared half below and ended with 49% and 57% of their ranges in the
    /// upper half (98% and 4% with halves). Halves gave 80M to 86M ops/s there against 66M to
    /// 74M (three interleaved runs each), and `mixed` did not change.
    fn home_part(&self, lim: u64) -> Option<(u64, u64)> {
        let n = self.users.load(Ordering::Relaxed);
        if n < 2 {
            return None;
        }
        let part = (lim + 1) / n;
        let hi = lim - self.my_user().min(n - 1) * part;
        Some((hi + 1 - part, hi))
    }

    /// The order in which this thread's cache was first used (see [`Slot::owned_user`]).
    fn my_user(&self) -> u64 {
        match owned_slot() {
            Some(i) if i < self.cpus.len() => self.cpus[i].owned_user.load(Ordering::Relaxed),
            _ => self.cpus[self.cache_index()]
                .shared_user
                .load(Ordering::Relaxed),
        }
    }

    /// The lowest offset where a search below `lim` prefers its best placement tier (see
    /// `SegTree::find_highest`), or `lim + 1` for none.
    ///
    /// The tiers pack a crowded space: below a 32-bit limit, or in a domain no larger than that
    /// zone. A request allowed above the zone of a larger domain has room to spare and takes the
    /// highest start, as before: there the tiers bought nothing, and with two threads on
    /// `mixed` they cost 5% (120.2M against 127.0M ops/s, medians of 18 runs), as placements
    /// spread over more words. Inside a thread's own part of the space (`home_lo`: the lowest
    /// offset of the part), the tiers look there only.
    fn tier_floor(&self, lim: u64, home_lo: Option<u64>) -> u64 {
        let zone_end = self.cfg.pfn_32bit().0.checked_sub(self.base());
        if zone_end.is_none_or(|z| lim > z) {
            return lim + 1;
        }
        home_lo.unwrap_or(0)
    }

    /// Search and mark one range; the caller holds the backend lock.
    fn take_locked(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        self.take_locked_in(b, lim, self.tier_floor(lim, None), fit)
    }

    /// [`Self::take_locked`] preferring placements at `floor` or above.
    fn take_locked_in(&self, b: &mut Backend, lim: u64, floor: u64, fit: &Fit) -> Option<u64> {
        let off = b.tree.find_highest(lim, floor, self.base(), fit)?;
        let last = off + fit.pages - 1;
        b.tree.mark(off, last, true);
        self.ends.fetch_or(last / 64, 1 << (last % 64));
        Some(off)
    }

    /// Return one range to the tree; the caller holds the backend lock.
    fn give_back_locked(&self, b: &mut Backend, off: u64, pages: u64) {
        let last = off + pages - 1;
        self.ends.fetch_clear(last / 64, 1 << (last % 64));
        b.tree.mark(off, last, false);
    }

    /// A backend allocation of `fit`, plus up to `extra` more of the same shape put in this
    /// thread's cache (as far as its budget allows) before the backend lock is let go (so that a
    /// flush never misses them): from the depot when it holds any that fit, else from the tree.
    ///
    /// Each thread searches down from its own part of the space first (its home limit), then
    /// the whole: threads that refill from one region interleave their ranges, and then their
    /// frees' compare-exchanges on the live bytes (a byte a page, 64 pages a cache line) and
    /// the end bits bounce cache lines between cores. With two threads this was most of the
    /// time of a free on `mixed`.
    fn take_from_backend(&self, lim: u64, fit: &Fit, extra: usize, cacheable: bool) -> Option<u64> {
        let part = self.home_part(lim);
        let home = part.map_or(lim, |(_, hi)| hi);
        let mut b = self.backend.lock();
        b.tree.work.lock_acquisitions += 1;
        let floor = self.tier_floor(home, part.map(|(lo, _)| lo));
        let take = |b: &mut Backend| {
            self.take_locked_in(b, home, floor, fit).or_else(|| {
                (home < lim)
                    .then(|| self.take_locked(b, lim, fit))
                    .flatten()
            })
        };
        let mut got = self.take_from_depot(&mut b, lim, part, fit, 1 + extra);
        if got.is_empty() {
            // A cacheable request missed every cache.
            b.tree.work.cache_misses += u64::from(cacheable);
            got.push(take(&mut b)?);
            b.tree.work.allocs += 1;
            got.extend((0..extra).map_while(|_| take(&mut b)));
        } else {
            b.tree.work.cache_hits += 1;
        }
        let mut more = got.split_off(1);
        if !more.is_empty() {
            let mut c = self.my_cache();
            let mut room = self.cache_budget().saturating_sub(c.cached_pages);
            let mut low_room = self.low_cache_budget().saturating_sub(c.low_pages);
            // What the budgets leave no room for goes to the depot (or the tree).
            more.retain(|&off| {
                let low = off < self.low_end;
                let fits = fit.pages <= room && (!low || fit.pages <= low_room);
                if fits {
                    room -= fit.pages;
                    if low {
                        low_room -= fit.pages;
                    }
                } else if let Some(o) = b.keep_in_depot(off, fit.pages) {
                    self.give_back_locked(&mut b, o, fit.pages);
                }
                fits
            });
            for &off in &more {
                c.count(off, fit.pages, self.low_end);
            }
            c.class_mut(fit.pages).extend(more.iter().rev());
        }
        Some(got[0])
    }

    /// Up to `n` ranges from the depot that satisfy `fit` below `lim`, newest first. With `home`
    /// (the part of the space this thread refills from first), ranges there are taken first,
    /// from the newest few: a range taken from another thread's part interleaves the threads'
    /// live bytes, whose cache lines their frees then bounce between cores.
    fn take_from_depot(
        &self,
        b: &mut Backend,
        lim: u64,
        home: Option<(u64, u64)>,
        fit: &Fit,
        n: usize,
    ) -> Vec<u64> {
        let base = self.base();
        let mut got = Vec::new();
        let len = b.depot.get(fit.pages as usize).map_or(0, Vec::len);
        if let Some((lo, hi)) = home {
            let mut i = len;
            let stop = len.saturating_sub(4 * n + 16);
            while i > stop && got.len() < n {
                i -= 1;
                let o = b.depot[fit.pages as usize][i];
                if (lo..=hi).contains(&o) && fits(base, o, fit, lim) {
                    got.push(b.take_depot_at(fit.pages, i));
                }
            }
            if !got.is_empty() {
                return got;
            }
        }
        let mut i = len;
        while i > 0 && got.len() < n {
            i -= 1;
            if fits(base, b.depot[fit.pages as usize][i], fit, lim) {
                got.push(b.take_depot_at(fit.pages, i));
            }
        }
        got
    }

    /// A range for `fit` cut from a larger cached one (this thread's cache or the depot) whose
    /// start is legal for it, the rest returned to the tree: what a request the tree cannot
    /// serve tries before every cache is flushed. A flush puts every cached range back in the
    /// tree, where searches for small requests then split the aligned holes large ones need; on
    /// a crowded zone one flush led to thousands.
    fn split_cached(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        let base = self.base();
        let n = fit.pages;
        if n >= MAX_CACHED_PAGES {
            return None;
        }
        // The smallest larger class with a range at a legal start among its newest eight.
        let find = |classes: &[Vec<u64>]| -> Option<(u64, usize)> {
            (n + 1..classes.len() as u64).find_map(|m| {
                let class = &classes[m as usize];
                let from = class.len().saturating_sub(8);
                class[from..]
                    .iter()
                    .rposition(|&o| fits(base, o, fit, lim))
                    .map(|i| (m, from + i))
            })
        };
        let (off, m) = {
            let mut c = self.my_cache();
            match find(&c.classes) {
                Some((m, i)) => {
                    let off = c.classes[m as usize].swap_remove(i);
                    c.uncount(off, m, self.low_end);
                    (off, m)
                }
                None => {
                    drop(c);
                    let (m, i) = find(&b.depot)?;
                    (b.take_depot_at(m, i), m)
                }
            }
        };
        let last = off + n - 1;
        self.ends.fetch_or(last / 64, 1 << (last % 64));
        self.give_back_locked(b, off + n, m - n);
        Some(off)
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
        let mut depot = std::mem::take(&mut b.depot);
        b.depot_pages = 0;
        if let Some(m) = b.depot_mask.as_mut() {
            m.clear();
        }
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
    fn flush_locked(&self, b: &mut Backend) {
        self.drain_depot_locked(b);
        self.each_cache(|c| {
            c.work.cache_flushes += 1;
            c.uncount_all();
            self.drain_locked(b, &mut c.classes);
        });
    }

    /// Return ranges of `pages` pages to the tree under one lock; `frees` of them are callers'
    /// frees (the rest were cached).
    fn release(&self, pages: u64, offs: &[u64], frees: u64) {
        if offs.is_empty() {
            return;
        }
        let mut b = self.backend.lock();
        b.tree.work.lock_acquisitions += 1;
        b.tree.work.frees += frees;
        for &off in offs {
            self.give_back_locked(&mut b, off, pages);
        }
    }

    fn pop_cached(&self, req: &AllocRequest, lim: u64) -> Option<u64> {
        let base = self.base();
        let fit = Fit {
            pages: req.pages,
            align: req.align_pages,
            boundary: req.boundary_pages,
        };
        let ok = |off: &u64| fits(base, *off, &fit, lim);
        let mut c = self.my_cache();
        c.work.lock_acquisitions += 1;
        let class = c.classes.get_mut(req.pages as usize)?;
        // The most recent entry fits almost always; otherwise look at the few before it only:
        // an old entry that does not fit is not worth a scan.
        let hit = match class.last() {
            Some(off) if ok(off) => class.pop(),
            _ => {
                let from = class.len().saturating_sub(4);
                class[from..]
                    .iter()
                    .rposition(ok)
                    .map(|i| class.swap_remove(from + i))
            }
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

    /// Whether [`Self::reclaim_in`] serves `fit`: at most 64 pages, aligned to at least its
    /// size, so that every legal place is an aligned block.
    fn reclaimable(fit: &Fit) -> bool {
        fit.pages <= 64 && fit.align >= fit.pages
    }

    /// A place for `fit` (see [`Self::reclaimable`]) in an aligned block whose used pages all
    /// belong to ranges that `caches` or the depot hold: those ranges go back to the tree and
    /// the block is taken. What a request the tree cannot serve tries before any flush, which
    /// returns every cached range to sort out one block: on `fragmented-32bit` every flush was
    /// for a request of 57 to 64 pages aligned to 64, made while the 32-bit zone had 64k to
    /// 108k pages free in its tree but no free aligned 64-page block, and those flushes set off
    /// the collapse described in the README.
    ///
    /// Blocks made of depot ranges alone are looked for first, from word masks of the depot's
    /// pages kept as ranges come and go (`Backend::depot_mask`): the depot holds most of a
    /// crowded zone's free pages, and hashing every held range on every reclaim had made this
    /// function a fifth to a third of the time of `fragmented-32bit` with two threads. Only if
    /// none qualifies are the caches' ranges hashed. The search stops at `RECLAIM_EXTRA + 1`
    /// blocks; the highest of those found serves the request and the rest go to the depot as
    /// ranges of the request's size: the request that needed a reclaim is usually followed by
    /// others of its size.
    ///
    /// `None` only if no such block exists: a flush of exactly these caches could not have
    /// served the request either (every legal place of the request is an aligned block, and
    /// every block holding a page of a held range is examined). The caller holds the backend
    /// lock and `caches`.
    fn reclaim_in(
        &self,
        b: &mut Backend,
        caches: &mut [&mut CpuCache],
        lim: u64,
        fit: &Fit,
    ) -> Option<u64> {
        let (n, base) = (fit.pages, self.base());
        if !Self::reclaimable(fit) {
            return None;
        }
        let phase = b.tree.phase();
        // The highest block of each word whose used pages are all held (`mask`, with the
        // depot's pages added): one test of the used word per place.
        let block = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let step = fit.align.min(64);
        // The search stops once it has as many blocks as it can use (in the map's order, which
        // follows the history of the depot and caches, so runs stay deterministic): a full
        // pass over a large depot's words on every reclaim had kept the other thread waiting.
        let candidates = |b: &Backend, words: &mut dyn Iterator<Item = (u64, u64)>| {
            let mut found: Vec<u64> = Vec::new();
            for (w, mask) in words {
                if found.len() > RECLAIM_EXTRA {
                    break;
                }
                let used = b.tree.used_word(w);
                let depot = b.depot_mask.as_ref().and_then(|m| m.get(&w));
                let mask = mask | depot.copied().unwrap_or(0);
                let mut j = 64 - step;
                loop {
                    let pos = w * 64 + j;
                    if pos >= phase
                        && used & (block << j) & !mask == 0
                        && fits(base, pos - phase, fit, lim)
                    {
                        found.push(pos - phase);
                        break;
                    }
                    if j == 0 {
                        break;
                    }
                    j -= step;
                }
            }
            found
        };
        // Blocks made of depot ranges alone first: their masks are kept as the depot changes,
        // so this costs a pass over the depot's words and no hashing.
        b.keep_depot_masks();
        let depot_words = b.depot_mask.iter().flat_map(|m| m.keys());
        let mut found = candidates(b, &mut depot_words.map(|&w| (w, 0)));
        if found.is_empty() {
            // Then blocks that need cached ranges too: the pages of every range the caches hold
            // at or below the limit, as masks of position words (positions are offsets plus the
            // phase, so a word starts at a frame that is a multiple of 64, and every legal
            // place of the request lies inside one word).
            let count = caches
                .iter()
                .flat_map(|c| c.classes.iter().map(Vec::len))
                .sum();
            let mut held: WordMasks =
                HashMap::with_capacity_and_hasher(count, BuildHasherDefault::default());
            for c in caches.iter() {
                for (m, class) in c.classes.iter().enumerate() {
                    for &o in class.iter().filter(|&&o| o <= lim) {
                        crate::bits::for_words(o + phase, o + m as u64 - 1 + phase, |w, mask| {
                            *held.entry(w as u64).or_insert(0) |= mask;
                        });
                    }
                }
            }
            found = candidates(b, &mut held.iter().map(|(&w, &m)| (w, m)));
        }
        // The highest serves the request; up to RECLAIM_EXTRA more go to the depot as ranges of
        // this size, so the requests of this size that follow find them there instead of each
        // paying for a search like this one.
        found.sort_unstable_by(|x, y| y.cmp(x));
        let (mut got, mut extra_left) = (None, 1 + RECLAIM_EXTRA);
        for s in found {
            if got.is_some() && !b.depot_has_room(n) {
                break;
            }
            if self.reclaim_block(b, caches, s, n) {
                match got {
                    None => got = Some(s),
                    Some(_) => {
                        if let Some(o) = b.keep_in_depot(s, n) {
                            self.give_back_locked(b, o, n);
                        }
                    }
                }
                extra_left -= 1;
                if extra_left == 0 {
                    break;
                }
            }
        }
        got
    }

    /// Return to the tree every range held in `caches` or the depot that overlaps the block of
    /// `n` pages at `s`, then mark the block as one range; false (and nothing changed) if a
    /// used page of the block belongs to a range none of them holds. The caller holds the
    /// backend lock and `caches`.
    fn reclaim_block(&self, b: &mut Backend, caches: &mut [&mut CpuCache], s: u64, n: u64) -> bool {
        // The ranges in the block, from the ends plane: a used page after a gap or a range
        // starts one (the first may begin before the block).
        let mut take = Vec::new();
        let mut q = s;
        while q < s + n {
            if !b.tree.is_used(q) {
                q += 1;
                continue;
            }
            let first = if q == s {
                first_page_of(&b.tree, &self.ends, &b.reserved, q)
            } else {
                q
            };
            let Some(last) = self.ends.next_set(first, self.cfg.total_pages() - 1).0 else {
                return false;
            };
            take.push((first, last - first + 1));
            q = last + 1;
        }
        // Find each one's holder before changing anything.
        let mut from = Vec::with_capacity(take.len());
        for &(o, m) in &take {
            let holds = |classes: &Vec<Vec<u64>>| {
                classes
                    .get(m as usize)
                    .is_some_and(|class| class.contains(&o))
            };
            let holder = match caches.iter().position(|c| holds(&c.classes)) {
                Some(i) => Some(i),
                None if holds(&b.depot) => None,
                None => return false,
            };
            from.push(holder);
        }
        for (&(o, m), &holder) in take.iter().zip(&from) {
            let class = match holder {
                Some(i) => &mut caches[i].classes[m as usize],
                None => &mut b.depot[m as usize],
            };
            if let Some(i) = class.iter().position(|&x| x == o) {
                class.swap_remove(i);
            }
            match holder {
                Some(i) => caches[i].uncount(o, m, self.low_end),
                None => {
                    b.depot_pages -= m;
                    b.note_depot(o, m, false);
                }
            }
            self.give_back_locked(b, o, m);
        }
        let last = s + n - 1;
        b.tree.mark(s, last, true);
        self.ends.fetch_or(last / 64, 1 << (last % 64));
        true
    }

    /// Move a freed range of at most [`MAX_CACHED_PAGES`] pages to the depot when this thread's
    /// cache could not take it (full, over budget, or a flush is running), with the older half
    /// of its class if the class is full or the cache over budget, in one batch. A range next to
    /// a free page of the tree goes to the tree instead (so does one the full depot cannot
    /// take). The backend lock is taken first, as everywhere, and held while the ranges leave
    /// the cache, so no flush can miss them in between.
    ///
    /// Without the return to the tree, the tree's free pages wore down to fragments over long
    /// runs of `fragmented-32bit`: in turns of 64 steps with two lanes, from 12k free pages in
    /// 5k runs to 40k in 14k runs (the longest 14 pages) after 16M steps a lane, while the depot
    /// held the ranges next to them apart. One thread's throughput over seven passes of 10M calls
    /// fell from 54M to 39M ops/s, with 1,010 refusals; with it, 56M to 57M with none (two
    /// threads need [`ZONE_CACHE_SHARE`] too).
    #[cold]
    #[inline(never)]
    fn spill(&self, off: u64, pages: u64) {
        let cap = class_capacity(pages);
        let mut b = self.backend.lock();
        b.tree.work.lock_acquisitions += 1;
        b.tree.work.frees += 1;
        let spill: Vec<u64> = {
            let mut c = self.my_cache();
            // A cache over its budget (lowered by ZONE_CACHE_SHARE or a flush) gives back half
            // the class too, so that it is soon within it again instead of taking the backend
            // lock on every free until then.
            let over = !self.may_cache((c.cached_pages, c.low_pages), off, pages);
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
        };
        let total = self.cfg.total_pages();
        for o in spill.into_iter().chain(std::iter::once(off)) {
            // A range next to free pages of the tree joins them there instead: kept apart in
            // the depot, it would leave them a fragment that only small requests can use.
            let loose = (o > 0 && !b.tree.is_used(o - 1))
                || (o + pages < total && !b.tree.is_used(o + pages));
            if loose {
                self.give_back_locked(&mut b, o, pages);
            } else if let Some(o) = b.keep_in_depot(o, pages) {
                self.give_back_locked(&mut b, o, pages);
            }
        }
    }

    fn mark_live(&self, off: u64, pages: u64) {
        debug_assert!(
            !self.live.is_live(off),
            "range at offset {off} handed out twice"
        );
        self.live.set_live(off, pages);
    }

    /// Why a free at `off` (not live) is refused.
    fn not_live_error(&self, pfn: Pfn, pages: u64, off: u64) -> IovaError {
        let b = self.backend.lock();
        let i = b.reserved.partition_point(|&(_, hi)| hi < off);
        if b.reserved.get(i).is_some_and(|&(lo, _)| lo <= off) {
            IovaError::FreeOfReserved { pfn }
        } else {
            IovaError::NotAllocated { pfn, pages }
        }
    }

    /// A place for `fit` when the tree has none: cut from a larger cached range, else a block
    /// reclaimed from the caches (see [`Self::reclaim_in`]), else, for other requests, the
    /// thread's own cache and the depot returned to the tree, then every cache. The caller holds
    /// the backend lock.
    fn allocate_when_tree_full(&self, b: &mut Backend, lim: u64, fit: &Fit) -> Option<u64> {
        if lim + 1 < self.cfg.total_pages() {
            let cap = ((lim + 1) / ZONE_CACHE_SHARE).max(MIN_CACHE_BUDGET_PAGES);
            if lim < self.low_end {
                self.low_budget_pages.fetch_min(cap, Ordering::Relaxed);
            } else {
                self.budget_pages.fetch_min(cap, Ordering::Relaxed);
            }
        }
        if let Some(off) = self.split_cached(b, lim, fit) {
            return Some(off);
        }
        // This thread's cache and the depot, without a barrier.
        let reclaimed = {
            let mut c = self.my_cache();
            self.reclaim_in(b, &mut [&mut c], lim, fit)
        };
        if reclaimed.is_some() {
            return reclaimed;
        }
        if Self::reclaimable(fit) {
            // No block here: with no other cache ever used, a flush could not help; else every
            // cache, taken at once, with no drain.
            if self.users.load(Ordering::Relaxed) <= 1 {
                return None;
            }
            return self.with_every_cache(|all| self.reclaim_in(b, all, lim, fit));
        }
        // With other threads' caches in use, this thread's cache and the depot go back first:
        // theirs keep their ranges apart by size, and no barrier is paid.
        if self.users.load(Ordering::Relaxed) > 1 {
            self.flush_own_locked(b);
            if let Some(off) = self.take_locked(b, lim, fit) {
                return Some(off);
            }
        }
        let halve = |b: u64| Some((b / 2).max(MIN_CACHE_BUDGET_PAGES));
        let _ = self
            .budget_pages
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, halve);
        // Raised before any cache is drained: a free that takes its cache's lock after the
        // drain sees it and goes to the tree, which waits for this search.
        self.flushing.fetch_add(1, Ordering::SeqCst);
        self.flush_locked(b);
        let off = self.take_locked(b, lim, fit);
        self.flushing.fetch_sub(1, Ordering::SeqCst);
        off
    }

    /// An allocation the cache could not serve: from the tree, or
    /// [`Self::allocate_when_tree_full`] if the tree has no room (the cold part of `allocate`,
    /// kept out of its hot path).
    #[cold]
    #[inline(never)]
    fn allocate_from_backend(
        &self,
        req: &AllocRequest,
        limit: Pfn,
    ) -> Result<IovaRange, IovaError> {
        let lim = limit.0 - self.base();
        let cacheable = req.pages <= MAX_CACHED_PAGES;
        let fit = Fit {
            pages: req.pages,
            align: req.align_pages,
            boundary: req.boundary_pages,
        };
        let extra = if cacheable {
            refill_extra(req.pages, lim + 1 < self.cfg.total_pages())
        } else {
            0
        };
        let got = self
            .take_from_backend(lim, &fit, extra, cacheable)
            .or_else(|| {
                // Under one hold of the backend lock, so that no other thread's refill takes
                // what is freed for this request in between.
                let mut b = self.backend.lock();
                b.tree.work.lock_acquisitions += 1;
                let off = self.allocate_when_tree_full(&mut b, lim, &fit);
                if off.is_some() {
                    b.tree.work.allocs += 1;
                }
                off
            });
        let Some(off) = got else {
            self.backend.lock().tree.work.failures += 1;
            return Err(IovaError::NoSpace {
                pages: req.pages,
                align_pages: req.align_pages,
                limit,
                boundary_pages: req.boundary_pages,
            });
        };
        self.mark_live(off, req.pages);
        Ok(IovaRange {
            pfn_lo: Pfn(off + self.base()),
            pages: req.pages,
        })
    }

    /// The slow way to take a live byte from `code` to freeing: wait while another free decides,
    /// fail if the range is not live or has another size.
    #[cold]
    #[inline(never)]
    fn take_contended(
        &self,
        cell: &std::sync::atomic::AtomicU8,
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

impl IovaAllocator for SegTreeAllocator {
    fn name(&self) -> String {
        "segtree".into()
    }

    fn config(&self) -> &DomainConfig {
        &self.cfg
    }

    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let limit = req.validate(&self.cfg)?;
        let lim = limit.0 - self.base();
        if req.pages <= MAX_CACHED_PAGES {
            if let Some(off) = self.pop_cached(req, lim) {
                self.mark_live(off, req.pages);
                return Ok(IovaRange {
                    pfn_lo: Pfn(off + self.base()),
                    pages: req.pages,
                });
            }
        }
        self.allocate_from_backend(req, limit)
    }

    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        if pages == 0 {
            return Err(IovaError::ZeroSize);
        }
        check_in_domain(&self.cfg, pfn, Pfn(pfn.0.saturating_add(pages - 1)))?;
        let off = pfn.0 - self.base();
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
        if pages > MAX_CACHED_PAGES {
            self.release(pages, &[off], 1);
            return Ok(());
        }
        {
            let mut c = self.my_cache();
            c.work.lock_acquisitions += 1;
            // While a flush searches the tree, frees wait for the backend lock and so come after
            // the search.
            let flushing = self.flushing.load(Ordering::SeqCst) > 0;
            let held = (c.cached_pages, c.low_pages);
            let class = c.class_mut(pages);
            if !flushing && class_has_room(class.len(), pages) && self.may_cache(held, off, pages) {
                class.push(off);
                c.count(off, pages, self.low_end);
                c.work.frees += 1;
                return Ok(());
            }
        }
        self.spill(off, pages);
        Ok(())
    }

    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        check_in_domain(&self.cfg, pfn_lo, pfn_hi)?;
        let (lo, hi) = (pfn_lo.0 - self.base(), pfn_hi.0 - self.base());
        for attempt in 0..2 {
            let mut b = self.backend.lock();
            // A page that is used, not reserved, belongs to an allocation (live or cached).
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
            match conflict {
                None => {
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
                    return Ok(());
                }
                Some(u)
                    if attempt == 0
                        && !self.live.is_live(first_page_of(
                            &b.tree,
                            &self.ends,
                            &b.reserved,
                            u,
                        )) =>
                {
                    drop(b);
                    self.flush_caches();
                }
                Some(u) => {
                    return Err(IovaError::ReserveOverlapsAllocation {
                        pfn_lo,
                        pfn_hi,
                        allocated_pfn: Pfn(
                            first_page_of(&b.tree, &self.ends, &b.reserved, u) + self.base()
                        ),
                    })
                }
            }
        }
        unreachable!("the second attempt returns")
    }

    fn stats(&self) -> DomainStats {
        // Ranges move between the caches and the tree only under the backend lock, and no path
        // holds a cache while waiting for it: holding it while reading the caches gives a
        // snapshot in which every page is counted once.
        let b = self.backend.lock();
        let mut cached_pages = b.depot_pages;
        self.each_used_cache(|c| cached_pages += c.cached_pages);
        let (largest, extents, free) = b.tree.free_runs(self.cfg.total_pages() - 1);
        let reserved: u64 = b.reserved.iter().map(|&(l, h)| h - l + 1).sum();
        let total = self.cfg.total_pages();
        DomainStats {
            live_allocations: self.live.count(),
            allocated_pages: total - free - reserved - cached_pages,
            reserved_pages: reserved,
            cached_pages,
            free_pages: free,
            largest_free_extent_pages: largest,
            free_extents: extents,
        }
    }

    fn work(&self) -> WorkCounters {
        let mut w = self.backend.lock().tree.work;
        self.each_used_cache(|c| w.add(&c.work));
        // Cache hits are allocations the backend never saw.
        w.allocs += w.cache_hits;
        w
    }

    fn memory_bytes(&self) -> usize {
        let mut caches = self.cpus.len() * std::mem::size_of::<CachePadded<Slot>>();
        self.each_used_cache(|c| {
            caches += c.classes.iter().map(|v| v.capacity() * 8).sum::<usize>()
                + c.classes.capacity() * std::mem::size_of::<Vec<u64>>();
        });
        let b = self.backend.lock();
        // The depot's lists and its word masks (a key, a value and a control byte a slot).
        let depot = b.depot.iter().map(|v| v.capacity() * 8).sum::<usize>()
            + b.depot.capacity() * std::mem::size_of::<Vec<u64>>()
            + b.depot_mask.as_ref().map_or(0, |m| m.capacity() * 17);
        b.tree.bytes()
            + b.reserved.capacity() * 16
            + depot
            + self.live.bytes()
            + self.ends.bytes()
            + caches
    }

    fn flush_caches(&self) {
        let mut b = self.backend.lock();
        b.tree.work.lock_acquisitions += 1;
        self.flush_locked(&mut b);
    }

    fn exact_fit(&self) -> bool {
        true
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_zone_report_counts_the_free_pages_below_the_limit_where_they_are() {
        // A zone of 1024 pages below a larger domain's top, where ranges over 16 pages come
        // one at a time.
        let cfg = DomainConfig::new(Pfn(0), Pfn(2047), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let whole = dom.zone_report(Pfn(1023));
        assert_eq!(
            (
                whole.tree_free_pages,
                whole.tree_free_runs,
                whole.tree_largest_run
            ),
            (1024, 1, 1024)
        );
        assert_eq!((whole.tree_free_blocks_64, whole.depot_pages), (16, 0));
        // A 40-page range at the top, freed: cached, and its block's tail free in the tree.
        let r = dom
            .allocate(&AllocRequest::pages(40).size_aligned().below(Pfn(1023)))
            .unwrap();
        assert_eq!(r.pfn_lo, Pfn(960));
        dom.free(r.pfn_lo, 40).unwrap();
        let after = dom.zone_report(Pfn(1023));
        assert_eq!(after.cached_pages.iter().sum::<u64>(), 40);
        assert_eq!(after.tree_free_pages, 1024 - 40);
        assert_eq!((after.tree_free_runs, after.tree_largest_run), (2, 960));
        assert_eq!(after.tree_free_blocks_64, 15);
        // Below the range, neither it nor its block's tail counts.
        let low = dom.zone_report(Pfn(959));
        assert_eq!(low.cached_pages.iter().sum::<u64>(), 0);
        assert_eq!((low.tree_free_pages, low.tree_free_blocks_64), (960, 15));
    }

    #[test]
    fn a_request_the_tree_cannot_serve_is_cut_from_a_larger_cached_range_before_any_flush() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(63), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        dom.reserve(Pfn(8), Pfn(63)).unwrap();
        let eight = dom
            .allocate(&AllocRequest::pages(8).size_aligned())
            .unwrap();
        assert_eq!(eight.pfn_lo, Pfn(0));
        dom.free(eight.pfn_lo, 8).unwrap();
        assert_eq!(dom.stats().cached_pages, 8);
        // No 5-page range is cached and the tree is full: the cached 8-page range is cut.
        let five = dom
            .allocate(&AllocRequest::pages(5).size_aligned())
            .unwrap();
        assert_eq!(five.pfn_lo, Pfn(0));
        let st = dom.stats();
        assert_eq!((st.cached_pages, st.free_pages), (0, 3), "{st:?}");
        assert_eq!(st.largest_free_extent_pages, 3);
        assert_eq!(dom.work().cache_flushes, 0);
        assert!(matches!(
            dom.free(Pfn(0), 8),
            Err(IovaError::SizeMismatch {
                allocated_pages: 5,
                ..
            })
        ));
        // The 3-page tail is in the tree and the 5-page range frees as 5 pages.
        let three = dom.allocate(&AllocRequest::pages(3)).unwrap();
        assert_eq!(three.pfn_lo, Pfn(5));
        dom.free(five.pfn_lo, 5).unwrap();
        dom.free(three.pfn_lo, 3).unwrap();
        dom.flush_caches();
        assert_eq!(dom.stats().free_pages, 8);
    }

    #[test]
    fn a_block_of_cached_ranges_and_free_pages_is_reclaimed_without_a_flush() {
        // Frames 0-127: two 64-page blocks. The top one takes four 16-page ranges, the other a
        // live 1-page range and cached 2-page ranges.
        let cfg = DomainConfig::new(Pfn(0), Pfn(127), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let sixteen = AllocRequest::pages(16).size_aligned();
        let quarters: Vec<_> = (0..4).map(|_| dom.allocate(&sixteen).unwrap()).collect();
        let one = dom.allocate(&AllocRequest::pages(1)).unwrap();
        let twos: Vec<_> = (0..20)
            .map(|_| {
                dom.allocate(&AllocRequest::pages(2).size_aligned())
                    .unwrap()
            })
            .collect();
        assert!(one.pfn_lo.0 < 64 && twos.iter().all(|r| r.pfn_lo.0 < 64));
        assert!(quarters.iter().all(|r| r.pfn_lo.0 >= 64));
        // Three quarters and every 2-page range go to the cache; one quarter to the tree.
        for r in &quarters[..3] {
            dom.free(r.pfn_lo, 16).unwrap();
        }
        for r in &twos {
            dom.free(r.pfn_lo, 2).unwrap();
        }
        // The last quarter too: the top block is now four cached ranges, and the tree has no
        // free 64-page block. (Refills cached some more ranges in the other block.)
        dom.free(quarters[3].pfn_lo, 16).unwrap();
        let cached = dom.stats().cached_pages;
        assert!(cached >= 4 * 16 + 20 * 2, "{cached}");
        let whole = AllocRequest::pages(64).size_aligned();
        let got = dom.allocate(&whole).unwrap();
        assert_eq!(got.pfn_lo, Pfn(64));
        let st = dom.stats();
        assert_eq!(dom.work().cache_flushes, 0, "no cache was flushed");
        assert_eq!(
            st.cached_pages,
            cached - 64,
            "only the four quarters left the cache: {st:?}"
        );
        // The other block holds a live page: a second 64-page request finds no space, still
        // without a flush, and loses nothing.
        assert!(matches!(
            dom.allocate(&whole),
            Err(IovaError::NoSpace { .. })
        ));
        assert_eq!(dom.work().cache_flushes, 0);
        assert_eq!(dom.stats().cached_pages, cached - 64);
        dom.free(one.pfn_lo, 1).unwrap();
        dom.free(got.pfn_lo, 64).unwrap();
        dom.flush_caches();
        let st = dom.stats();
        assert_eq!((st.free_pages, st.live_allocations), (128, 0), "{st:?}");
    }

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
            let depot_before = dom.backend.lock().depot_pages;
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
            let b = dom.backend.lock();
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
        let b = dom.backend.lock();
        assert!(b.depot_mask.as_ref().is_some_and(|m| m.is_empty()));
        drop(b);
        assert_eq!(dom.stats().free_pages, cfg.total_pages());
    }

    #[test]
    fn a_full_class_spills_to_the_depot_and_an_empty_one_refills_from_it() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(4095), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let cap = class_capacity(1);
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
        let depot = dom.backend.lock().depot_pages;
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
        assert!(dom.backend.lock().depot_pages < depot);
        // A flush empties the depot too.
        dom.flush_caches();
        let st = dom.stats();
        assert_eq!(st.cached_pages, 0);
        assert_eq!(dom.backend.lock().depot_pages, 0);
        assert_eq!(st.free_pages, 4096 - st.live_allocations);
    }

    #[test]
    fn a_spilled_range_next_to_free_pages_of_the_tree_joins_them() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(4095), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let cap = class_capacity(1);
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
        assert_eq!(dom.backend.lock().depot_pages, 1);
        let in_cache = dom.my_cache().classes[1].len() as u64;
        assert_eq!(in_cache, cap as u64 - cap as u64 / 2);
        let st = dom.stats();
        assert_eq!(st.cached_pages, in_cache + 1);
        assert_eq!(st.free_pages, 4096 - in_cache - 1);
    }

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
        while small.allocate(&AllocRequest::pages(64)).is_ok() {}
        assert_eq!(
            small.budget_pages.load(Ordering::Relaxed),
            CACHE_BUDGET_PAGES / 2
        );
    }

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
        for r in live.iter().skip(1).step_by(2).take(2) {
            dom.free(r.pfn_lo, 1).unwrap();
        }
        // 400 -> 200 (half the class, and the free itself) -> 100.
        assert_eq!(dom.my_cache().cached_pages, 100);
    }

    #[test]
    fn below_a_limit_only_small_ranges_are_fetched_in_batches() {
        let cfg = DomainConfig::new(Pfn(0), Pfn((1 << 16) - 1), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let below = |pages: u64| AllocRequest::pages(pages).size_aligned().below(Pfn(0x7fff));
        dom.allocate(&below(BATCH_MAX_PAGES + 1)).unwrap();
        assert_eq!(
            dom.stats().cached_pages,
            0,
            "a large range below a limit comes alone"
        );
        let batch = refill_extra(BATCH_MAX_PAGES, true) as u64 * BATCH_MAX_PAGES;
        dom.allocate(&below(BATCH_MAX_PAGES)).unwrap();
        assert_eq!(
            dom.stats().cached_pages,
            batch,
            "a small one brings a batch"
        );
        // Without a limit, large ranges come in batches too.
        let large = BATCH_MAX_PAGES + 1;
        dom.allocate(&AllocRequest::pages(large).size_aligned())
            .unwrap();
        assert_eq!(
            dom.stats().cached_pages,
            batch + refill_extra(large, false) as u64 * large
        );
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

    #[test]
    fn room_test_matches_the_capacity() {
        for pages in 1..=MAX_CACHED_PAGES {
            for len in 0..600 {
                assert_eq!(
                    class_has_room(len, pages),
                    len < class_capacity(pages),
                    "pages {pages} len {len}"
                );
            }
        }
    }

    #[test]
    fn cache_count_is_a_power_of_two() {
        let a = SegTreeAllocator::new(DomainConfig::with_address_bits(32, 4096).unwrap()).unwrap();
        assert!(a.cpus.len().is_power_of_two() && a.cpus.len() <= MAX_CPUS);
    }
}
