//! `magazines+<backend>`: per-CPU caches of freed ranges in front of any other design.
//!
//! This is the style of Linux's IOVA range cache (after Bonwick's magazine allocator, USENIX
//! 2001): a request of at most [`MAX_CACHED_PAGES`] pages is rounded up to a power of two and
//! size-aligned, so that any freed range of that class can serve it. Each CPU (here: each thread
//! slot) holds a `loaded` and a `prev` magazine per class; full magazines go to a shared depot of
//! bounded size, and when the depot is full a magazine's ranges go back to the backend. When
//! the backend runs out, every cache is flushed into it and the request retried once.
//!
//! Cached ranges stay allocated in the backend, so a free cannot be checked there. A sharded
//! registry records, for every range this layer handed out or holds, whether it is live or
//! cached; a free of a cached range is a double free. (The kernel trusts its callers and has no
//! such registry; with one, this baseline does the same checking work as every other design.)
//!
//! A flush and its retry are one step: flushes run one at a time, each retry comes after its
//! flush has returned every range to the backend, and while one runs, frees bypass the caches
//! (going straight to the backend) and allocations do not take magazines from the depot. So no
//! range freed before the retry hides in a cache or in transit from it: a request is refused only
//! when the backend has no room for it counting every cache and the depot (the stress test
//! `tests/no_refusal_with_room.rs` checks it).
//!
//! After the flush, a request that still fails is retried unrounded. The design is still not
//! exact: the padding a rounded request carries (one page of a 3-page request's 4) stays
//! allocated in the backend while the request lives, so a later request, or a reservation, can
//! be refused while the pages it needs are padding. The kernel's cache has the same property.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use crossbeam_utils::CachePadded;

use crate::error::IovaError;
use crate::shard::{default_shards, thread_slot};
use crate::types::{AllocRequest, DomainConfig, DomainStats, IovaRange, Pfn, WorkCounters};
use crate::{lock, IovaAllocator};

/// Largest request served from the caches (the kernel caches orders 0 to 5).
pub const MAX_CACHED_PAGES: u64 = 32;
const CLASSES: usize = MAX_CACHED_PAGES.trailing_zeros() as usize + 1;
/// Ranges a magazine holds.
pub const MAGAZINE_SIZE: usize = 128;
/// Full magazines the depot keeps per class.
pub const DEPOT_MAGAZINES: usize = 32;
const REGISTRY_SHARDS: usize = 64;

/// A multiplicative hash for frame numbers (std's SipHash costs more than the whole lookup).
#[derive(Default)]
struct PfnHasher(u64);

impl Hasher for PfnHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type PfnMap<V> = HashMap<u64, V, BuildHasherDefault<PfnHasher>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Handed out for a request of this many pages.
    Live(u64),
    /// Held in a cache.
    Cached,
}

#[derive(Debug, Default)]
struct CpuCache {
    loaded: [Vec<u64>; CLASSES],
    prev: [Vec<u64>; CLASSES],
    work: WorkCounters,
}

/// The magazine layer over a backend.
#[derive(Debug)]
pub struct MagazineAllocator {
    backend: Box<dyn IovaAllocator>,
    cpus: Box<[CachePadded<Mutex<CpuCache>>]>,
    depot: Mutex<[Vec<Vec<u64>>; CLASSES]>,
    registry: Box<[CachePadded<Mutex<PfnMap<Entry>>>]>,
    /// Held shared while cached ranges go back to the backend (spills and flushes, not the hot
    /// path) and exclusively by `stats`, so a snapshot never counts a range as both cached and
    /// free.
    returning: RwLock<()>,
    /// One flush at a time, with the retry that follows it (see the module documentation).
    flush_serial: Mutex<()>,
    /// Flushes running: while non-zero, frees go to the backend and allocations leave the depot
    /// alone, so that nothing moves into a cache already drained. Read under a CPU's lock, and
    /// raised before any is drained.
    flushing: AtomicU64,
    /// Flushes completed: a request that failed before one completed retries once without a
    /// flush of its own first (threads that fail together then flush once, not each in turn).
    flushes_done: AtomicU64,
}

fn class_of(pages: u64) -> usize {
    pages.next_power_of_two().trailing_zeros() as usize
}

impl MagazineAllocator {
    /// Caches in front of `backend`, one per thread slot modulo twice the hardware threads.
    pub fn new(backend: Box<dyn IovaAllocator>) -> Self {
        let cpus = (0..default_shards())
            .map(|_| CachePadded::new(Mutex::new(CpuCache::default())))
            .collect();
        let registry = (0..REGISTRY_SHARDS)
            .map(|_| CachePadded::new(Mutex::new(PfnMap::default())))
            .collect();
        Self {
            backend,
            cpus,
            depot: Mutex::new(Default::default()),
            registry,
            returning: RwLock::new(()),
            flush_serial: Mutex::new(()),
            flushing: AtomicU64::new(0),
            flushes_done: AtomicU64::new(0),
        }
    }

    fn registry_of(&self, pfn: u64) -> &Mutex<PfnMap<Entry>> {
        &self.registry[(pfn.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % REGISTRY_SHARDS]
    }

    fn my_cpu(&self) -> &Mutex<CpuCache> {
        &self.cpus[thread_slot() % self.cpus.len()]
    }

    /// Pop a cached range of `class` below `limit` from this CPU, refilling from the depot.
    fn pop_cached(&self, class: usize, limit: u64) -> Option<u64> {
        let class_pages = 1u64 << class;
        let fits = |p: &u64| p + class_pages - 1 <= limit;
        let mut cpu = lock(self.my_cpu());
        cpu.work.lock_acquisitions += 1;
        for _ in 0..2 {
            if let Some(i) = cpu.loaded[class].iter().rposition(fits) {
                return Some(cpu.loaded[class].swap_remove(i));
            }
            if !cpu.prev[class].is_empty() {
                let c = &mut *cpu;
                std::mem::swap(&mut c.loaded[class], &mut c.prev[class]);
                continue;
            }
            // A flush is draining the caches: a magazine taken from the depot into this one
            // (drained already, perhaps) would escape it.
            if self.flushing.load(Ordering::SeqCst) > 0 {
                return None;
            }
            let mut depot = lock(&self.depot);
            cpu.work.lock_acquisitions += 1;
            match depot[class].pop() {
                // `prev` is empty here; the loaded magazine may still hold ranges that did not
                // fit this request, so it becomes `prev` rather than being dropped with them.
                Some(mag) => cpu.prev[class] = std::mem::replace(&mut cpu.loaded[class], mag),
                None => return None,
            }
        }
        None
    }

    /// Put a freed range of `class` into this CPU's magazines. A full magazine the full depot
    /// cannot take, or the range itself while a flush runs, goes back to the backend before the
    /// CPU's lock is let go, so that no range is in transit where a flush cannot see it (and a
    /// `stats` snapshot, which holds every CPU's lock, never sees it move).
    fn push_cached(&self, class: usize, pfn: u64) {
        let mut cpu = lock(self.my_cpu());
        cpu.work.lock_acquisitions += 1;
        if self.flushing.load(Ordering::SeqCst) > 0 {
            self.release_locked(class, &[pfn]);
            return;
        }
        let c = &mut *cpu;
        if c.loaded[class].len() >= MAGAZINE_SIZE {
            if c.prev[class].len() < MAGAZINE_SIZE {
                std::mem::swap(&mut c.loaded[class], &mut c.prev[class]);
            } else {
                let full =
                    std::mem::replace(&mut c.loaded[class], Vec::with_capacity(MAGAZINE_SIZE));
                let mut depot = lock(&self.depot);
                c.work.lock_acquisitions += 1;
                if depot[class].len() < DEPOT_MAGAZINES {
                    depot[class].push(full);
                } else {
                    drop(depot);
                    self.release_locked(class, &full);
                }
            }
        }
        c.loaded[class].push(pfn);
    }

    /// Return cached ranges of `class` to the backend while holding the lock of the CPU whose
    /// cache held them (which keeps `stats` out).
    fn release_locked(&self, class: usize, pfns: &[u64]) {
        for &pfn in pfns {
            lock(self.registry_of(pfn)).remove(&pfn);
            let released = self.backend.free(Pfn(pfn), 1 << class);
            debug_assert!(released.is_ok(), "{released:?}");
        }
    }

    /// `self.backend.allocate(req)` after a flush of every cache, both under `flush_serial`.
    ///
    /// `failed_at` is `flushes_done` as read before the failed attempt: if another thread's
    /// flush completed since, the backend is tried once more before this thread flushes.
    fn flush_and_retry(&self, req: &AllocRequest, failed_at: u64) -> Result<IovaRange, IovaError> {
        let _one = lock(&self.flush_serial);
        if self.flushes_done.load(Ordering::SeqCst) != failed_at {
            if let Ok(r) = self.backend.allocate(req) {
                return Ok(r);
            }
        }
        self.flushing.fetch_add(1, Ordering::SeqCst);
        self.flush_serialized();
        let r = self.backend.allocate(req);
        self.flushing.fetch_sub(1, Ordering::SeqCst);
        self.flushes_done.fetch_add(1, Ordering::SeqCst);
        r
    }

    /// Return cached ranges of `class` to the backend.
    fn release(&self, class: usize, pfns: Vec<u64>) {
        if pfns.is_empty() {
            return;
        }
        let _returning = self
            .returning
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for pfn in pfns {
            lock(self.registry_of(pfn)).remove(&pfn);
            // The backend holds these as allocations of the class size; a failure would mean
            // the registry and the backend disagree, which the tests rule out.
            let released = self.backend.free(Pfn(pfn), 1 << class);
            debug_assert!(released.is_ok(), "{released:?}");
        }
    }

    /// Return every cache and the depot to the backend; the caller holds `flush_serial`. The
    /// CPUs are drained before the depot: a magazine moves into the depot only from a CPU's
    /// cache, and (while `flushing` is raised) never out of it.
    fn flush_serialized(&self) {
        let mut out: Vec<(usize, Vec<u64>)> = Vec::new();
        for c in self.cpus.iter() {
            let mut c = lock(c);
            c.work.cache_flushes += 1;
            for k in 0..CLASSES {
                let a = std::mem::take(&mut c.loaded[k]);
                let b = std::mem::take(&mut c.prev[k]);
                out.push((k, a));
                out.push((k, b));
            }
        }
        for (k, mags) in lock(&self.depot).iter_mut().enumerate() {
            for m in mags.drain(..) {
                out.push((k, m));
            }
        }
        for (k, pfns) in out {
            self.release(k, pfns);
        }
    }

    fn set_entry(&self, pfn: u64, e: Entry) {
        lock(self.registry_of(pfn)).insert(pfn, e);
    }

    fn no_space(req: &AllocRequest, limit: Pfn) -> IovaError {
        IovaError::NoSpace {
            pages: req.pages,
            align_pages: req.align_pages,
            limit,
            boundary_pages: req.boundary_pages,
        }
    }
}

impl IovaAllocator for MagazineAllocator {
    fn name(&self) -> String {
        format!("magazines+{}", self.backend.name())
    }

    fn config(&self) -> &DomainConfig {
        self.backend.config()
    }

    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let limit = req.validate(self.config())?;
        let class_pages = req.pages.next_power_of_two();
        // A power-of-two, size-aligned range satisfies any smaller alignment and, since the
        // boundary is a power of two no smaller than the request, never crosses it.
        let cacheable = req.pages <= MAX_CACHED_PAGES && req.align_pages <= class_pages;
        if !cacheable {
            let at = self.flushes_done.load(Ordering::SeqCst);
            return match self.backend.allocate(req) {
                Err(IovaError::NoSpace { .. }) => self.flush_and_retry(req, at),
                r => r,
            };
        }
        let class = class_of(req.pages);
        if let Some(pfn) = self.pop_cached(class, limit.0) {
            lock(self.my_cpu()).work.cache_hits += 1;
            self.set_entry(pfn, Entry::Live(req.pages));
            return Ok(IovaRange {
                pfn_lo: Pfn(pfn),
                pages: req.pages,
            });
        }
        lock(self.my_cpu()).work.cache_misses += 1;
        let rounded = AllocRequest {
            pages: class_pages,
            align_pages: class_pages,
            limit: Some(limit),
            boundary_pages: None,
        };
        let at = self.flushes_done.load(Ordering::SeqCst);
        let got = match self.backend.allocate(&rounded) {
            Err(IovaError::NoSpace { .. }) => self.flush_and_retry(&rounded, at),
            r => r,
        };
        match got {
            Ok(r) => {
                self.set_entry(r.pfn_lo.0, Entry::Live(req.pages));
                Ok(IovaRange {
                    pfn_lo: r.pfn_lo,
                    pages: req.pages,
                })
            }
            // Rounding can fail where the exact request fits; the exact range bypasses the cache.
            Err(IovaError::NoSpace { .. }) => self
                .backend
                .allocate(req)
                .map_err(|_| Self::no_space(req, limit)),
            Err(e) => Err(e),
        }
    }

    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        if pages == 0 {
            return Err(IovaError::ZeroSize);
        }
        crate::bitmap::check_in_domain(self.config(), pfn, Pfn(pfn.0.saturating_add(pages - 1)))?;
        let mut reg = lock(self.registry_of(pfn.0));
        match reg.get(&pfn.0).copied() {
            None => {
                drop(reg);
                self.backend.free(pfn, pages)
            }
            Some(Entry::Cached) => Err(IovaError::NotAllocated { pfn, pages }),
            Some(Entry::Live(p)) if p != pages => Err(IovaError::SizeMismatch {
                pfn,
                pages,
                allocated_pages: p,
            }),
            Some(Entry::Live(_)) => {
                reg.insert(pfn.0, Entry::Cached);
                drop(reg);
                self.push_cached(class_of(pages), pfn.0);
                let mut cpu = lock(self.my_cpu());
                cpu.work.frees += 1;
                Ok(())
            }
        }
    }

    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        match self.backend.reserve(pfn_lo, pfn_hi) {
            Err(IovaError::ReserveOverlapsAllocation { .. }) => {
                let _one = lock(&self.flush_serial);
                self.flush_serialized();
                self.backend.reserve(pfn_lo, pfn_hi)
            }
            r => r,
        }
    }

    fn stats(&self) -> DomainStats {
        // No range goes from a cache back to the backend while this runs; ranges taken out of a
        // cache but not yet returned count as allocated, which is what the backend says too.
        let _returning = self
            .returning
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Every CPU's cache and the depot are held at once: a magazine that moved from a cache
        // already read to the depot (or back) while they were read one at a time was counted
        // twice or not at all. Other paths nest only a cache's lock and then the depot's, one
        // cache at a time, so taking the caches in order and then the depot cannot deadlock.
        let mut per_class = [0u64; CLASSES];
        let cpus: Vec<_> = self.cpus.iter().map(|c| lock(c)).collect();
        for c in &cpus {
            for (k, n) in per_class.iter_mut().enumerate() {
                *n += (c.loaded[k].len() + c.prev[k].len()) as u64;
            }
        }
        for (k, mags) in lock(&self.depot).iter().enumerate() {
            per_class[k] += mags.iter().map(|m| m.len() as u64).sum::<u64>();
        }
        // The CPUs stay locked until the backend is read: a spill returns ranges to the backend
        // under its CPU's lock.
        let cached: u64 = per_class.iter().sum();
        let cached_pages: u64 = per_class.iter().enumerate().map(|(k, n)| n << k).sum();
        let mut s = self.backend.stats();
        drop(cpus);
        s.live_allocations = s.live_allocations.saturating_sub(cached);
        s.allocated_pages = s.allocated_pages.saturating_sub(cached_pages);
        s.cached_pages = cached_pages;
        s
    }

    fn work(&self) -> WorkCounters {
        let mut w = self.backend.work();
        for c in self.cpus.iter() {
            w.add(&lock(c).work);
        }
        // Cache hits are allocations the backend never saw.
        w.allocs += w.cache_hits;
        w
    }

    fn memory_bytes(&self) -> usize {
        let cpu_bytes: usize = self
            .cpus
            .iter()
            .map(|c| {
                let c = lock(c);
                c.loaded
                    .iter()
                    .chain(c.prev.iter())
                    .map(|v| v.capacity() * 8)
                    .sum::<usize>()
                    + std::mem::size_of::<CachePadded<Mutex<CpuCache>>>()
            })
            .sum();
        let depot_bytes: usize = lock(&self.depot)
            .iter()
            .flatten()
            .map(|m| m.capacity() * 8)
            .sum();
        // A hash map entry is the key, the value and one control byte, over a table kept at most
        // seven-eighths full.
        let entry = std::mem::size_of::<(u64, Entry)>() + 1;
        let registry_bytes: usize = self
            .registry
            .iter()
            .map(|m| lock(m).capacity() * entry * 8 / 7)
            .sum();
        self.backend.memory_bytes() + cpu_bytes + depot_bytes + registry_bytes
    }

    fn flush_caches(&self) {
        let _one = lock(&self.flush_serial);
        self.flush_serialized();
    }

    fn exact_fit(&self) -> bool {
        // Rounding padding stays allocated: see the module documentation.
        false
    }
}
