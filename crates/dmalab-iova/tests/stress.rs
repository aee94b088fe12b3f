//! Multi-threaded stress test of every design: concurrent allocations and frees (some handed to another thread), every range checked for overlap as it is handed out, no page lost at the end.
//!
//! Each design gets 2 to 4 worker threads (by `available_parallelism`) doing a seeded random
//! mix of allocations (1 to 64 pages, some size-aligned, some below a limit, some inside a
//! segment boundary), frees of their own allocations, wrong-size frees that must be refused,
//! hand-offs of allocations to another thread which frees them, and a few reservations. Every range handed out is recorded in one
//! interval set under a mutex and checked there at once against every range held (and every
//! reservation). A range leaves the set before it is freed, so the set never holds a range the
//! allocator may hand out again. At the end every allocation is freed, the caches flushed, and
//! `stats()` must show an empty domain with no page lost, whose largest free extent can be
//! allocated in one piece. Separate tests call `stats()` while another thread allocates and
//! frees.
//!
//! Set `DMALAB_STRESS_SEED` to change the seed, `DMALAB_STRESS_OPS` the operations per thread
//! (default 60000) and `DMALAB_STRESS_STATS_MS` the length of each `stats()` race test.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;
#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

use dmalab_iova::{
    new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator, IovaError, IovaRange,
    Pfn,
};

const PAGE: u64 = 4096;
const DOMAIN_LO: u64 = 1;
const DOMAIN_PAGES: u64 = 1 << 16;
/// Reserved before the run: the bottom of the domain (which also keeps every free run above an
/// occupied range: see `bug_rbtree_misses_the_bottom_run_across_its_cached_position` in
/// `model.rs`) and a window in the middle.
const RESERVED_AT_START: [(u64, u64); 2] = [
    (DOMAIN_LO, DOMAIN_LO + 15),
    (DOMAIN_LO + 40_000, DOMAIN_LO + 40_255),
];
/// Tried once each during the run by thread 0; they fail while an allocation overlaps them.
const RESERVED_DURING: [(u64, u64); 4] = [
    (2_000, 2_003),
    (20_000, 20_031),
    (50_000, 50_000),
    (65_000, 65_007),
];

/// The tests here run one at a time, each with the whole machine: races need threads that
/// actually run at the same time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn seed() -> u64 {
    std::env::var("DMALAB_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_abcd_0001)
}

fn ops_per_thread() -> usize {
    std::env::var("DMALAB_STRESS_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60_000)
}

fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Thread(usize),
    Reserved,
}

/// Everything the threads share besides the allocator.
struct Shared {
    /// Every range held by a thread and every reservation: first page -> (last page, holder).
    held: Mutex<BTreeMap<u64, (u64, Holder)>>,
    /// Per-thread inboxes of allocations handed over to be freed there.
    inboxes: Vec<Mutex<Vec<IovaRange>>>,
    /// Workers still in their random phase (they may still hand allocations over).
    running: AtomicUsize,
    failed: AtomicBool,
    errors: Mutex<Vec<String>>,
    reserved_during: Mutex<Vec<(u64, u64)>>,
}

impl Shared {
    fn fail(&self, msg: String) {
        self.failed.store(true, Ordering::SeqCst);
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(msg);
    }

    /// Record a range as held, failing if it overlaps anything held.
    fn claim(&self, lo: u64, hi: u64, who: Holder) -> Result<(), String> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((&plo, &(phi, owner))) = held.range(..=hi).next_back() {
            if phi >= lo {
                return Err(format!(
                    "[{lo:#x}, {hi:#x}] handed to {who:?} overlaps [{plo:#x}, {phi:#x}] held by {owner:?}"
                ));
            }
        }
        held.insert(lo, (hi, who));
        Ok(())
    }

    /// Forget a range before it is freed (so that the allocator may hand it out again).
    fn release(&self, r: IovaRange, who: Holder) -> Result<(), String> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match held.get(&r.pfn_lo.0).copied() {
            Some((hi, Holder::Thread(_))) if hi == r.pfn_hi().0 => {
                held.remove(&r.pfn_lo.0);
                Ok(())
            }
            other => Err(format!("{who:?} frees {r:?} but the set holds {other:?}")),
        }
    }
}

/// Decrements `running` even if the worker panics, so nobody waits for it forever.
struct RunningGuard<'a>(&'a AtomicUsize, bool);

impl RunningGuard<'_> {
    fn done(&mut self) {
        if !self.1 {
            self.1 = true;
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

fn check_placement(cfg: &DomainConfig, req: &AllocRequest, r: &IovaRange) -> Result<(), String> {
    let limit = req.limit.unwrap_or(cfg.pfn_hi).0;
    let (lo, hi) = (r.pfn_lo.0, r.pfn_hi().0);
    let ok = r.pages == req.pages
        && lo >= cfg.pfn_lo.0
        && hi <= limit
        && lo % req.align_pages == 0
        && req.boundary_pages.is_none_or(|b| lo / b == hi / b);
    if ok {
        Ok(())
    } else {
        Err(format!("{req:?} got illegal {r:?}"))
    }
}

fn random_request(rng: &mut Rng, cfg: &DomainConfig) -> AllocRequest {
    let pages = if rng.chance(70) {
        1 + rng.below(8)
    } else {
        1 + rng.below(64)
    };
    let mut req = AllocRequest::pages(pages);
    if rng.chance(30) {
        req = req.size_aligned();
    }
    if rng.chance(20) {
        // A low zone, as a 32-bit device would have: contended.
        req = req.below(Pfn(cfg.pfn_lo.0
            + DOMAIN_PAGES / 8
            + rng.below(DOMAIN_PAGES / 8)));
    }
    if rng.chance(10) {
        req = req.within_boundary(pages.next_power_of_two() << rng.below(3));
    }
    req
}

/// Outcome counts of one worker.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    allocs: u64,
    no_space: u64,
    frees: u64,
    handed_over: u64,
    received: u64,
    bad_frees: u64,
}

fn worker(me: usize, dom: &dyn IovaAllocator, shared: &Shared, seed: u64, ops: usize) -> Counts {
    let mut guard = RunningGuard(&shared.running, false);
    let cfg = *dom.config();
    let mut rng = Rng::new(seed ^ (me as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut live: Vec<IovaRange> = Vec::new();
    let mut c = Counts::default();
    let n = shared.inboxes.len();
    let who = Holder::Thread(me);
    let free_one = |r: IovaRange, c: &mut Counts| {
        if let Err(e) = shared.release(r, who) {
            shared.fail(e);
            return;
        }
        match dom.free(r.pfn_lo, r.pages) {
            Ok(()) => c.frees += 1,
            Err(e) => shared.fail(format!("thread {me}: free of live {r:?} refused: {e}")),
        }
    };
    for i in 0..ops {
        if shared.failed.load(Ordering::Relaxed) {
            break;
        }
        let roll = rng.below(1000);
        if roll < 500 && live.len() < 400 || live.is_empty() {
            let req = random_request(&mut rng, &cfg);
            match dom.allocate(&req) {
                Ok(r) => {
                    if let Err(e) = check_placement(&cfg, &req, &r)
                        .and_then(|()| shared.claim(r.pfn_lo.0, r.pfn_hi().0, who))
                    {
                        shared.fail(format!("thread {me} op {i}: {e}"));
                        break;
                    }
                    live.push(r);
                    c.allocs += 1;
                }
                Err(IovaError::NoSpace { .. }) => c.no_space += 1,
                Err(e) => {
                    shared.fail(format!("thread {me} op {i}: {req:?} refused: {e}"));
                    break;
                }
            }
        } else if roll < 900 {
            let r = live.swap_remove(rng.below(live.len() as u64) as usize);
            free_one(r, &mut c);
        } else if roll < 950 {
            // Hand one over to another thread, which frees it.
            let r = live.swap_remove(rng.below(live.len() as u64) as usize);
            let to = (me + 1 + rng.below(n as u64 - 1) as usize) % n;
            shared.inboxes[to]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(r);
            c.handed_over += 1;
        } else if roll < 980 {
            let got =
                std::mem::take(&mut *shared.inboxes[me].lock().unwrap_or_else(|e| e.into_inner()));
            c.received += got.len() as u64;
            live.extend(got);
        } else if roll < 998 {
            // A wrong-size free of a live allocation: refused, and the allocation stays live.
            let r = live[rng.below(live.len() as u64) as usize];
            let wrong = if r.pages > 1 && rng.chance(70) {
                r.pages - 1 - rng.below(r.pages - 1)
            } else {
                0
            };
            if wrong == r.pages || dom.free(r.pfn_lo, wrong).is_ok() {
                shared.fail(format!(
                    "thread {me} op {i}: free({:?}, {wrong}) of {r:?} accepted",
                    r.pfn_lo
                ));
                break;
            }
            c.bad_frees += 1;
        } else if me == 0 && rng.chance(50) {
            let k = rng.below(RESERVED_DURING.len() as u64) as usize;
            let (lo, hi) = RESERVED_DURING[k];
            let mut done = shared
                .reserved_during
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if !done.contains(&(lo, hi)) && dom.reserve(Pfn(lo), Pfn(hi)).is_ok() {
                done.push((lo, hi));
                if let Err(e) = shared.claim(lo, hi, Holder::Reserved) {
                    shared.fail(format!(
                        "thread {me} op {i}: reserve succeeded over a held range: {e}"
                    ));
                    break;
                }
            }
        } else {
            dom.flush_caches();
        }
    }
    // Stop handing over; free what is left, then whatever others still hand over.
    guard.done();
    for r in live.drain(..) {
        free_one(r, &mut c);
    }
    loop {
        let last_round =
            shared.running.load(Ordering::SeqCst) == 0 || shared.failed.load(Ordering::Relaxed);
        let got =
            std::mem::take(&mut *shared.inboxes[me].lock().unwrap_or_else(|e| e.into_inner()));
        c.received += got.len() as u64;
        for r in got {
            free_one(r, &mut c);
        }
        if last_round {
            break;
        }
        std::thread::yield_now();
    }
    c
}

fn stress(name: &str) {
    stress_with(name, threads());
}

fn stress_with(name: &str, n: usize) {
    let _one = exclusive();
    let seed = seed();
    let ops = ops_per_thread();
    let cfg = DomainConfig::new(Pfn(DOMAIN_LO), Pfn(DOMAIN_LO + DOMAIN_PAGES - 1), PAGE).unwrap();
    let dom = new_allocator(AllocatorKind::parse(name).unwrap(), cfg).unwrap();
    let dom = dom.as_ref();
    let shared = Shared {
        held: Mutex::new(BTreeMap::new()),
        inboxes: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
        running: AtomicUsize::new(n),
        failed: AtomicBool::new(false),
        errors: Mutex::new(Vec::new()),
        reserved_during: Mutex::new(Vec::new()),
    };
    for (lo, hi) in RESERVED_AT_START {
        dom.reserve(Pfn(lo), Pfn(hi)).unwrap();
        shared.claim(lo, hi, Holder::Reserved).unwrap();
    }
    let start = Instant::now();
    let counts: Vec<Counts> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..n)
            .map(|me| {
                let shared = &shared;
                s.spawn(move || worker(me, dom, shared, seed, ops))
            })
            .collect();
        let counts = workers
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join().unwrap_or_else(|p| {
                    shared.fail(format!("thread {i} panicked: {}", panic_message(&*p)));
                    Counts::default()
                })
            })
            .collect();
        counts
    });
    let elapsed = start.elapsed();
    let errors = shared
        .errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert!(
        errors.is_empty(),
        "{name} (seed {seed:#x}, {n} threads): {} failure(s), first: {}",
        errors.len(),
        errors.join("\n")
    );
    let total: Counts = counts.iter().fold(Counts::default(), |mut a, c| {
        a.allocs += c.allocs;
        a.no_space += c.no_space;
        a.frees += c.frees;
        a.handed_over += c.handed_over;
        a.received += c.received;
        a.bad_frees += c.bad_frees;
        a
    });
    eprintln!(
        "{name}: {n} threads x {ops} ops in {elapsed:?}: {total:?}, reserved during the run {:?}",
        shared.reserved_during.lock().unwrap()
    );
    assert_eq!(
        total.allocs, total.frees,
        "{name}: every allocation freed once"
    );
    assert_eq!(
        total.handed_over, total.received,
        "{name}: every hand-over received"
    );
    assert!(
        total.handed_over > 0 && total.bad_frees > 0,
        "{name}: the mix ran"
    );

    // Only the reservations are left.
    let held = shared.held.lock().unwrap();
    assert!(
        held.values().all(|&(_, h)| h == Holder::Reserved),
        "{name}: set not empty"
    );
    let reserved: u64 = held.iter().map(|(&lo, &(hi, _))| hi - lo + 1).sum();
    dom.flush_caches();
    let st = dom.stats();
    assert_eq!(
        (st.live_allocations, st.allocated_pages, st.cached_pages),
        (0, 0, 0),
        "{name}: {st:?}"
    );
    assert_eq!(st.reserved_pages, reserved, "{name}: {st:?}");
    assert_eq!(
        st.free_pages,
        cfg.total_pages() - reserved,
        "{name}: pages lost: {st:?}"
    );
    // The free runs are exactly the gaps between reservations.
    let mut gaps = Vec::new();
    let mut next = cfg.pfn_lo.0;
    for (&lo, &(hi, _)) in held.iter() {
        if lo > next {
            gaps.push(lo - next);
        }
        next = hi + 1;
    }
    if next <= cfg.pfn_hi.0 {
        gaps.push(cfg.pfn_hi.0 - next + 1);
    }
    let largest = gaps.iter().copied().max().unwrap();
    assert_eq!(st.largest_free_extent_pages, largest, "{name}: {st:?}");
    assert_eq!(st.free_extents, gaps.len() as u64, "{name}: {st:?}");
    let whole = dom
        .allocate(&AllocRequest::pages(largest))
        .unwrap_or_else(|e| {
            panic!("{name}: the largest free extent ({largest} pages) in one piece: {e}")
        });
    assert!(
        held.range(..=whole.pfn_hi().0)
            .next_back()
            .is_none_or(|(_, &(hi, _))| hi < whole.pfn_lo.0),
        "{name}: {whole:?} overlaps a reservation"
    );
    dom.free(whole.pfn_lo, whole.pages).unwrap();
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// `stats()` while other threads allocate and free: it must not panic and must add up.
///
/// A race detector. It found a bug in magazines and in segtree, both since fixed (01dfbbc,
/// c9ed825): `stats()` read the caches and the backing structure at different moments, so a
/// range moving between them in between was counted twice or subtracted without being
/// counted, and `allocated_pages` (or `live_allocations`) underflowed: a panic in a debug
/// build, a huge number in release. Against the code before those fixes this test failed for
/// all three designs in every run tried (6 of 6, 2-core machine); lengthen it with
/// `DMALAB_STRESS_STATS_MS` (default 1500).
fn stats_during_traffic(name: &str) {
    // Not one at a time: other tests running too make preemption inside stats() likelier.
    let cfg = DomainConfig::new(Pfn(DOMAIN_LO), Pfn(DOMAIN_LO + 4095), PAGE).unwrap();
    let dom = new_allocator(AllocatorKind::parse(name).unwrap(), cfg).unwrap();
    let dom = dom.as_ref();
    let stop = AtomicBool::new(false);
    let ms = std::env::var("DMALAB_STRESS_STATS_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let deadline = Instant::now() + std::time::Duration::from_millis(ms);
    let (calls, result) = std::thread::scope(|s| {
        // More threads than cores: preemption in the middle of a stats() call is what widens
        // the race windows.
        for t in 0..2u64 {
            let stop = &stop;
            s.spawn(move || {
                let mut rng = Rng::new(seed() ^ t);
                let mut live = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if t % 2 == 0 {
                        // Batches that fill the caches until they spill, then a flush.
                        for _ in 0..1 + rng.below(1000) {
                            let pages = 1 + rng.below(2);
                            if let Ok(r) = dom.allocate(&AllocRequest::pages(pages)) {
                                live.push(r);
                            }
                        }
                        for r in live.drain(..) {
                            dom.free(r.pfn_lo, r.pages).unwrap();
                        }
                        if rng.chance(50) {
                            dom.flush_caches();
                        }
                    } else {
                        // Ranges moving between the caches and the backing structure while nothing
                        // is allocated: a refill and a flush.
                        let r = dom.allocate(&AllocRequest::pages(1)).unwrap();
                        dom.free(r.pfn_lo, 1).unwrap();
                        dom.flush_caches();
                    }
                }
            });
        }
        let checker = s.spawn(|| {
            let mut calls = 0u64;
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                while Instant::now() < deadline {
                    let st = dom.stats();
                    calls += 1;
                    let sum =
                        st.free_pages + st.allocated_pages + st.reserved_pages + st.cached_pages;
                    assert_eq!(sum, cfg.total_pages(), "{st:?}");
                    assert!(
                        st.allocated_pages <= cfg.total_pages()
                            && st.live_allocations <= cfg.total_pages(),
                        "{st:?}"
                    );
                }
            }));
            stop.store(true, Ordering::Relaxed);
            (calls, result)
        });
        checker.join().unwrap()
    });
    if let Err(p) = result {
        panic!(
            "{name}: stats() during traffic failed after {calls} calls: {}",
            panic_message(&*p)
        );
    }
}

#[test]
fn stats_during_traffic_bitmap() {
    stats_during_traffic("bitmap");
}

#[test]
fn stats_during_traffic_rbtree() {
    stats_during_traffic("rbtree");
}

#[test]
fn stats_during_traffic_magazines_rbtree() {
    stats_during_traffic("magazines+rbtree");
}

#[test]
fn stats_during_traffic_magazines_bitmap() {
    stats_during_traffic("magazines+bitmap");
}

#[test]
fn stats_during_traffic_segtree() {
    stats_during_traffic("segtree");
}

/// 100 rounds on a fresh domain of design `name`: 250 random allocations, then `race` frees them
/// from racing threads; after each round, once the caches are flushed, every page must be free
/// again (nothing lost, nothing still live).
fn race_rounds(name: &str, seed: u64, mut race: impl FnMut(&dyn IovaAllocator, &[IovaRange], u32)) {
    let _one = exclusive();
    let cfg = DomainConfig::new(Pfn(DOMAIN_LO), Pfn(DOMAIN_LO + 16383), PAGE).unwrap();
    let dom = new_allocator(AllocatorKind::parse(name).unwrap(), cfg).unwrap();
    let dom = dom.as_ref();
    let mut rng = Rng::new(seed);
    for round in 0..100 {
        let ranges: Vec<IovaRange> = (0..250)
            .map(|_| {
                dom.allocate(&AllocRequest::pages(1 + rng.below(40)))
                    .unwrap()
            })
            .collect();
        race(dom, &ranges, round);
        dom.flush_caches();
        let st = dom.stats();
        assert_eq!(
            (st.live_allocations, st.allocated_pages, st.free_pages),
            (0, 0, cfg.total_pages()),
            "{name} round {round}: {st:?}"
        );
    }
}

/// Two threads free the same allocations at the same time: each free is accepted exactly once
/// and nothing else changes.
fn racing_double_frees(name: &str) {
    race_rounds(name, seed(), |dom, ranges, round| {
        let accepted: Vec<Vec<bool>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || {
                        ranges
                            .iter()
                            .map(|r| dom.free(r.pfn_lo, r.pages).is_ok())
                            .collect::<Vec<bool>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, r) in ranges.iter().enumerate() {
            assert!(
                accepted[0][i] != accepted[1][i],
                "{name} round {round}: free of {r:?} accepted {} times",
                u8::from(accepted[0][i]) + u8::from(accepted[1][i])
            );
        }
    });
}

/// One thread frees each allocation with its size while another tries wrong sizes on the same
/// ranges at the same time: every right free is accepted once, every wrong one refused, and
/// nothing is lost.
fn racing_wrong_size_frees(name: &str) {
    race_rounds(name, seed() ^ 0x77, |dom, ranges, round| {
        let (right, wrong) = std::thread::scope(|s| {
            let wrong = s.spawn(move || {
                let mut accepted = 0;
                for r in ranges {
                    for pages in [r.pages + 1, r.pages.saturating_sub(1).max(1), 64] {
                        if pages != r.pages && dom.free(r.pfn_lo, pages).is_ok() {
                            accepted += 1;
                        }
                    }
                }
                accepted
            });
            let right = s.spawn(move || {
                ranges
                    .iter()
                    .filter(|r| dom.free(r.pfn_lo, r.pages).is_ok())
                    .count()
            });
            (right.join().unwrap(), wrong.join().unwrap())
        });
        assert_eq!(
            (right, wrong),
            (ranges.len(), 0),
            "{name} round {round}: right frees accepted, wrong ones accepted"
        );
    });
}

#[test]
fn racing_wrong_size_frees_rbtree() {
    racing_wrong_size_frees("rbtree");
}

#[test]
fn racing_wrong_size_frees_magazines_rbtree() {
    racing_wrong_size_frees("magazines+rbtree");
}

#[test]
fn racing_wrong_size_frees_segtree() {
    racing_wrong_size_frees("segtree");
}

#[test]
fn racing_double_frees_bitmap() {
    racing_double_frees("bitmap");
}

#[test]
fn racing_double_frees_rbtree() {
    racing_double_frees("rbtree");
}

#[test]
fn racing_double_frees_magazines_rbtree() {
    racing_double_frees("magazines+rbtree");
}

#[test]
fn racing_double_frees_magazines_bitmap() {
    racing_double_frees("magazines+bitmap");
}

#[test]
fn racing_double_frees_segtree() {
    racing_double_frees("segtree");
}

#[test]
fn stress_bitmap() {
    stress("bitmap");
}

#[test]
fn stress_rbtree() {
    stress("rbtree");
}

#[test]
fn stress_magazines_rbtree() {
    stress("magazines+rbtree");
}

#[test]
fn stress_magazines_bitmap() {
    stress("magazines+bitmap");
}

#[test]
fn stress_segtree() {
    stress("segtree");
}

/// More threads than segtree keeps cache slots (a power of two up to four per hardware
/// thread): some threads own a slot's cache, the rest share locked ones, and every flush and
/// `stats` takes the owned caches from their threads.
#[test]
fn stress_segtree_more_threads_than_cache_slots() {
    let hw = std::thread::available_parallelism().map_or(2, |n| n.get());
    stress_with("segtree", (4 * hw + 1).min(64));
}

#[test]
fn the_interval_set_catches_overlaps() {
    let shared = Shared {
        held: Mutex::new(BTreeMap::new()),
        inboxes: Vec::new(),
        running: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        errors: Mutex::new(Vec::new()),
        reserved_during: Mutex::new(Vec::new()),
    };
    shared.claim(10, 19, Holder::Thread(0)).unwrap();
    shared.claim(30, 30, Holder::Reserved).unwrap();
    for (lo, hi) in [(19, 25), (0, 10), (12, 13), (5, 40), (30, 31), (25, 30)] {
        assert!(
            shared.claim(lo, hi, Holder::Thread(1)).is_err(),
            "[{lo}, {hi}]"
        );
    }
    shared.claim(20, 29, Holder::Thread(1)).unwrap();
    shared.claim(0, 9, Holder::Thread(1)).unwrap();
    let r = IovaRange {
        pfn_lo: Pfn(10),
        pages: 9,
    };
    assert!(shared.release(r, Holder::Thread(0)).is_err(), "wrong size");
    let r = IovaRange {
        pfn_lo: Pfn(10),
        pages: 10,
    };
    shared.release(r, Holder::Thread(0)).unwrap();
    assert!(
        shared.release(r, Holder::Thread(0)).is_err(),
        "released twice"
    );
    let cfg = DomainConfig::new(Pfn(1), Pfn(100), PAGE).unwrap();
    let req = AllocRequest::pages(4)
        .aligned(4)
        .below(Pfn(50))
        .within_boundary(8);
    let at = |lo| IovaRange {
        pfn_lo: Pfn(lo),
        pages: 4,
    };
    assert!(check_placement(&cfg, &req, &at(8)).is_ok());
    for bad in [0, 6, 48, 52] {
        assert!(check_placement(&cfg, &req, &at(bad)).is_err(), "{bad}");
    }
}

#[test]
fn stress_covers_every_design() {
    let mut names = AllocatorKind::NAMES.to_vec();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "bitmap",
            "magazines+bitmap",
            "magazines+rbtree",
            "rbtree",
            "segtree"
        ]
    );
}
