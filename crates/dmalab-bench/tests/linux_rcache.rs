//! The `linux-rcache` baseline: placement, the range cache's LIFO order, rounding, the
//! cache bypass above 32 pages, the flush-and-retry, the 32-bit fast fail, reservations, and
//! a multi-threaded stress against a shared occupancy check.

use std::collections::BTreeMap;
use std::sync::{Barrier, Mutex};

use dmalab_bench::linux_rcache::{LinuxRcache, NAME};
use dmalab_iova::{AllocRequest, DomainConfig, IovaAllocator, IovaError, Pfn};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Frames 1..=63 of 4 KiB: all in the 32-bit zone.
fn tiny() -> DomainConfig {
    DomainConfig::new(Pfn(1), Pfn(63), 4096).unwrap()
}

/// Frames 1..=1023 of 16 MiB: the 32-bit zone is frames 1..=255.
fn with_zone() -> DomainConfig {
    DomainConfig::with_address_bits(34, 1 << 24).unwrap()
}

/// The frames an allocation of `pages` occupies: below 32 pages, rounded up to a power of two.
fn extent(pages: u64) -> u64 {
    if pages < 32 {
        pages.next_power_of_two()
    } else {
        pages
    }
}

fn req(pages: u64, limit: Option<Pfn>) -> AllocRequest {
    let r = AllocRequest::pages(pages).size_aligned();
    match limit {
        Some(l) => r.below(l),
        None => r,
    }
}

/// Whether `[lo, lo + len)` meets a range of `live` (first frame -> frames).
fn overlaps(live: &BTreeMap<u64, u64>, lo: u64, len: u64) -> Option<(u64, u64)> {
    let below = live.range(..=lo).next_back().filter(|(&l, &n)| l + n > lo);
    let above = live.range(lo..lo + len).next();
    below.or(above).map(|(&l, &n)| (l, n))
}

#[derive(Debug, Clone)]
enum Op {
    Alloc { pages: u64, zone32: bool },
    Free(usize),
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1..=64u64, any::<bool>()).prop_map(|(pages, zone32)| Op::Alloc { pages, zone32 }),
        5 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        rng_seed: RngSeed::Fixed(0x11a7_1234),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every allocation is size-aligned, inside the domain and its limit, and overlaps no
    /// live allocation or reservation; the statistics add up after every step.
    #[test]
    fn live_ranges_never_overlap(
        slots in 1..=3usize,
        reserve in proptest::option::of((1..1000u64, 0..40u64)),
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let cfg = with_zone();
        let a = LinuxRcache::with_cpu_slots(cfg, slots).unwrap();
        let mut live: BTreeMap<u64, u64> = BTreeMap::new();
        let mut pages_of: BTreeMap<u64, u64> = BTreeMap::new();
        let mut reserved = 0;
        if let Some((lo, len)) = reserve {
            let hi = (lo + len).min(cfg.pfn_hi.0);
            a.reserve(Pfn(lo), Pfn(hi)).unwrap();
            live.insert(lo, hi - lo + 1);
            reserved = hi - lo + 1;
        }
        for op in ops {
            match op {
                Op::Alloc { pages, zone32 } => {
                    let limit = zone32.then(|| cfg.pfn_32bit());
                    match a.allocate(&req(pages, limit)) {
                        Ok(r) => {
                            let n = extent(pages);
                            let lo = r.pfn_lo.0;
                            prop_assert_eq!(r.pages, pages);
                            prop_assert_eq!(lo % pages.next_power_of_two(), 0, "{:?}", r);
                            prop_assert!(lo >= cfg.pfn_lo.0, "{:?}", r);
                            prop_assert!(lo + n - 1 <= limit.unwrap_or(cfg.pfn_hi).0, "{:?}", r);
                            let hit = overlaps(&live, lo, n);
                            prop_assert!(hit.is_none(), "{:?} meets {:?}", r, hit);
                            live.insert(lo, n);
                            pages_of.insert(lo, pages);
                        }
                        Err(IovaError::NoSpace { .. }) => {}
                        Err(e) => prop_assert!(false, "{e}"),
                    }
                }
                Op::Free(i) if !pages_of.is_empty() => {
                    let (&lo, &pages) = pages_of.iter().nth(i % pages_of.len()).unwrap();
                    a.free(Pfn(lo), pages).unwrap();
                    pages_of.remove(&lo);
                    live.remove(&lo);
                }
                Op::Free(_) => {}
                Op::Flush => a.flush_caches(),
            }
            let s = a.stats();
            let used: u64 = pages_of.keys().map(|lo| live[lo]).sum();
            prop_assert_eq!(s.live_allocations, pages_of.len() as u64);
            prop_assert_eq!(s.allocated_pages, used);
            prop_assert_eq!(s.reserved_pages, reserved);
            prop_assert_eq!(
                s.allocated_pages + s.cached_pages + s.free_pages + s.reserved_pages,
                cfg.total_pages()
            );
        }
        for (lo, pages) in std::mem::take(&mut pages_of) {
            a.free(Pfn(lo), pages).unwrap();
        }
        a.flush_caches();
        let s = a.stats();
        prop_assert_eq!(s.cached_pages, 0);
        prop_assert_eq!(s.free_pages + reserved, cfg.total_pages());
    }
}

#[test]
fn a_cached_free_is_the_next_allocation_of_its_class() {
    let a = LinuxRcache::with_cpu_slots(with_zone(), 1).unwrap();
    let x = a.allocate(&req(1, None)).unwrap();
    let y = a.allocate(&req(1, None)).unwrap();
    let z = a.allocate(&req(2, None)).unwrap();
    a.free(x.pfn_lo, 1).unwrap();
    a.free(z.pfn_lo, 2).unwrap();
    a.free(y.pfn_lo, 1).unwrap();
    // Last in, first out, per class.
    assert_eq!(a.allocate(&req(1, None)).unwrap().pfn_lo, y.pfn_lo);
    assert_eq!(a.allocate(&req(1, None)).unwrap().pfn_lo, x.pfn_lo);
    // A 2-page class hit serves a 2-page request and not a 1-page one.
    assert_eq!(a.allocate(&req(2, None)).unwrap().pfn_lo, z.pfn_lo);
    let w = a.work();
    assert_eq!((w.cache_hits, w.cache_misses), (3, 3), "{w:?}");
}

#[test]
fn a_cached_range_above_the_limit_is_not_handed_out() {
    let cfg = with_zone();
    let a = LinuxRcache::with_cpu_slots(cfg, 1).unwrap();
    let high = a.allocate(&req(1, None)).unwrap();
    assert!(high.pfn_lo > cfg.pfn_32bit());
    a.free(high.pfn_lo, 1).unwrap();
    let low = a.allocate(&req(1, Some(cfg.pfn_32bit()))).unwrap();
    assert!(low.pfn_lo <= cfg.pfn_32bit(), "{low:?}");
    assert_eq!(a.stats().cached_pages, 1);
}

#[test]
fn three_pages_take_four_aligned_to_four() {
    let a = LinuxRcache::with_cpu_slots(with_zone(), 1).unwrap();
    let r = a.allocate(&req(3, None)).unwrap();
    assert_eq!(r.pages, 3);
    assert_eq!(r.pfn_lo.0 % 4, 0, "{r:?}");
    assert_eq!(a.stats().allocated_pages, 4);
    // The fourth page is taken: the next range goes just below the four.
    let next = a.allocate(&req(1, None)).unwrap();
    assert_eq!(next.pfn_lo.0, r.pfn_lo.0 - 1);
    // A 3-page free goes to the 4-page class and serves a 4-page request.
    a.free(r.pfn_lo, 3).unwrap();
    assert_eq!(a.stats().cached_pages, 4);
    assert_eq!(a.allocate(&req(4, None)).unwrap().pfn_lo, r.pfn_lo);
}

#[test]
fn more_than_32_pages_bypass_the_cache() {
    let a = LinuxRcache::with_cpu_slots(with_zone(), 1).unwrap();
    let r = a.allocate(&req(33, None)).unwrap();
    assert_eq!(r.pfn_lo.0 % 64, 0);
    assert_eq!(a.stats().allocated_pages, 33);
    let before = a.work();
    assert_eq!((before.cache_hits, before.cache_misses), (0, 0));
    assert_eq!(
        a.free(r.pfn_lo, 34),
        Err(IovaError::SizeMismatch {
            pfn: r.pfn_lo,
            pages: 34,
            allocated_pages: 33
        })
    );
    assert!(matches!(
        a.free(Pfn(r.pfn_lo.0 + 1), 33),
        Err(IovaError::NotAllocated { .. })
    ));
    a.free(r.pfn_lo, 33).unwrap();
    let s = a.stats();
    assert_eq!((s.cached_pages, s.allocated_pages), (0, 0));
    // The tree checks: a second free is refused.
    assert!(matches!(
        a.free(r.pfn_lo, 33),
        Err(IovaError::NotAllocated { .. })
    ));
    // 32 pages is the largest cached class.
    let r = a.allocate(&req(32, None)).unwrap();
    a.free(r.pfn_lo, 32).unwrap();
    assert_eq!(a.stats().cached_pages, 32);
}

#[test]
fn a_cached_double_free_is_not_caught() {
    // As in Linux: frees of cacheable sizes are not checked.
    let a = LinuxRcache::with_cpu_slots(with_zone(), 1).unwrap();
    let r = a.allocate(&req(1, None)).unwrap();
    a.free(r.pfn_lo, 1).unwrap();
    a.free(r.pfn_lo, 1).unwrap();
    assert_eq!(a.stats().cached_pages, 2);
    assert_eq!(a.allocate(&req(1, None)).unwrap().pfn_lo, r.pfn_lo);
    assert_eq!(a.allocate(&req(1, None)).unwrap().pfn_lo, r.pfn_lo);
    // Bad sizes and ranges outside the domain are still refused.
    assert_eq!(a.free(r.pfn_lo, 0), Err(IovaError::ZeroSize));
    assert!(matches!(
        a.free(Pfn(0), 1),
        Err(IovaError::RangeOutsideDomain { .. })
    ));
}

#[test]
fn an_exhausted_domain_is_refilled_from_the_caches() {
    let cfg = tiny();
    let a = LinuxRcache::with_cpu_slots(cfg, 1).unwrap();
    let mut got = Vec::new();
    while let Ok(r) = a.allocate(&req(1, None)) {
        got.push(r.pfn_lo);
    }
    assert_eq!(got.len() as u64, cfg.total_pages());
    for &p in &got {
        a.free(p, 1).unwrap();
    }
    // Every frame sits in a 1-page magazine; the tree has none free.
    let s = a.stats();
    assert_eq!((s.cached_pages, s.free_pages), (cfg.total_pages(), 0));
    let flushes = a.work().cache_flushes;
    let r = a.allocate(&req(2, None)).unwrap();
    assert_eq!(r.pfn_lo.0 % 2, 0);
    assert_eq!(a.work().cache_flushes, flushes + 1);
    let s = a.stats();
    assert_eq!(s.cached_pages, 0);
    assert_eq!(s.free_pages, cfg.total_pages() - 2);
}

#[test]
fn a_failed_32bit_size_fails_fast_until_a_32bit_free() {
    let cfg = with_zone();
    let zone = Some(cfg.pfn_32bit());
    let a = LinuxRcache::with_cpu_slots(cfg, 1).unwrap();
    // 64-page ranges fill frames 64..=255; frames 1..=63 cannot hold one aligned.
    let got: Vec<_> = (0..3)
        .map(|_| a.allocate(&req(64, zone)).unwrap().pfn_lo.0)
        .collect();
    assert_eq!(got, [192, 128, 64]);
    let w0 = a.work();
    assert!(a.allocate(&req(64, zone)).is_err());
    let w1 = a.work();
    assert!(
        w1.nodes_visited > w0.nodes_visited,
        "the first failure walks"
    );
    // Now any 32-bit request of 64 pages or more fails without a walk.
    for pages in [64, 100] {
        assert!(a.allocate(&req(pages, zone)).is_err());
        assert!(a.allocate(&req(pages, Some(Pfn(200)))).is_err());
    }
    let w2 = a.work();
    assert_eq!(w2.nodes_visited, w1.nodes_visited);
    assert_eq!(w2.failures, w1.failures + 4);
    // Smaller 32-bit requests, and requests above the zone, still search.
    assert_eq!(a.allocate(&req(32, zone)).unwrap().pfn_lo.0, 32);
    assert!(a.allocate(&req(64, None)).unwrap().pfn_lo > cfg.pfn_32bit());
    // A free below 4 GiB lifts the fast fail.
    a.free(Pfn(128), 64).unwrap();
    assert_eq!(a.allocate(&req(64, zone)).unwrap().pfn_lo.0, 128);
}

#[test]
fn reservations_are_kept_out_and_merge() {
    let cfg = tiny();
    let a = LinuxRcache::with_cpu_slots(cfg, 1).unwrap();
    a.reserve(Pfn(10), Pfn(20)).unwrap();
    a.reserve(Pfn(5), Pfn(12)).unwrap();
    a.reserve(Pfn(15), Pfn(25)).unwrap();
    a.reserve(Pfn(7), Pfn(8)).unwrap();
    assert_eq!(a.stats().reserved_pages, 21);
    let mut n = 0;
    while let Ok(r) = a.allocate(&req(1, None)) {
        assert!(!(5..=25).contains(&r.pfn_lo.0), "{r:?}");
        n += 1;
    }
    assert_eq!(n, cfg.total_pages() - 21);
    assert_eq!(
        a.free(Pfn(6), 40),
        Err(IovaError::FreeOfReserved { pfn: Pfn(6) })
    );
    assert!(matches!(
        a.reserve(Pfn(26), Pfn(30)),
        Err(IovaError::ReserveOverlapsAllocation { .. })
    ));
    // A reservation over cached ranges takes them back first.
    a.free(Pfn(30), 1).unwrap();
    a.reserve(Pfn(30), Pfn(30)).unwrap();
    assert_eq!(a.stats().reserved_pages, 22);
}

/// Threads allocate and free their own ranges; at the end of each round every live range goes
/// into a shared occupancy map, which must never find two meeting. A violation is recorded
/// rather than panicking, so no thread is left waiting at a barrier.
fn stress(a: &LinuxRcache, threads: usize, rounds: usize) {
    let cfg = *a.config();
    let barrier = Barrier::new(threads);
    let occupied: Mutex<BTreeMap<u64, (u64, usize)>> = Mutex::new(BTreeMap::new());
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, occupied, errors) = (&barrier, &occupied, &errors);
            s.spawn(move || {
                let fail = |e: String| errors.lock().unwrap().push(e);
                let mut rng = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(t as u64 + 1);
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut live: Vec<(u64, u64)> = Vec::new();
                for _ in 0..rounds {
                    for _ in 0..3000 {
                        if live.len() < 48 && next() % 2 == 0 {
                            let pages = match next() % 10 {
                                0..=5 => 1,
                                6..=8 => 1 + next() % 16,
                                _ => 1 + next() % 64,
                            };
                            let limit = (next() % 3 == 0).then(|| cfg.pfn_32bit());
                            match a.allocate(&req(pages, limit)) {
                                Ok(r) => {
                                    let lo = r.pfn_lo.0;
                                    let top = limit.unwrap_or(cfg.pfn_hi).0;
                                    if lo % pages.next_power_of_two() != 0
                                        || lo + extent(pages) - 1 > top
                                    {
                                        fail(format!("{r:?} for {pages} pages below {top}"));
                                    }
                                    live.push((lo, pages));
                                }
                                Err(IovaError::NoSpace { .. }) => {}
                                Err(e) => fail(e.to_string()),
                            }
                        } else if !live.is_empty() {
                            let i = (next() % live.len() as u64) as usize;
                            let (lo, pages) = live.swap_remove(i);
                            if let Err(e) = a.free(Pfn(lo), pages) {
                                fail(e.to_string());
                            }
                        }
                    }
                    barrier.wait();
                    {
                        let mut occ = occupied.lock().unwrap();
                        for &(lo, pages) in &live {
                            let n = extent(pages);
                            let below = occ
                                .range(..=lo)
                                .next_back()
                                .filter(|(&l, &(m, _))| l + m > lo);
                            if let Some((&l, &(m, owner))) = below.or(occ.range(lo..lo + n).next())
                            {
                                fail(format!("[{lo}, +{n}) of {t} meets [{l}, +{m}) of {owner}"));
                            }
                            occ.insert(lo, (n, t));
                        }
                    }
                    barrier.wait();
                    if t == 0 {
                        occupied.lock().unwrap().clear();
                    }
                    barrier.wait();
                }
                for (lo, pages) in live {
                    if let Err(e) = a.free(Pfn(lo), pages) {
                        fail(e.to_string());
                    }
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap();
    assert!(
        errors.is_empty(),
        "{} violations, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    a.flush_caches();
    let s = a.stats();
    assert_eq!((s.live_allocations, s.allocated_pages), (0, 0));
    assert_eq!(s.free_pages, cfg.total_pages());
    assert_eq!(s.free_extents, 1);
}

/// Frames 1..=4095 of 4 MiB; the 32-bit zone is frames 1..=1023.
fn stress_domain() -> DomainConfig {
    DomainConfig::with_address_bits(34, 1 << 22).unwrap()
}

#[test]
fn threads_never_share_a_frame() {
    stress(&LinuxRcache::new(stress_domain()).unwrap(), 3, 25);
}

#[test]
fn threads_sharing_one_cpu_cache_never_share_a_frame() {
    // Every thread on one cache: its lock and the depot's are contended all the time.
    stress(
        &LinuxRcache::with_cpu_slots(stress_domain(), 1).unwrap(),
        4,
        100,
    );
}

#[test]
fn the_benchmark_knows_it() {
    assert!(dmalab_bench::allocator_names().iter().any(|n| n == NAME));
    let opts = dmalab_bench::BenchOptions {
        ops_per_thread: 20_000,
        warmup_ops: 2_000,
        pass_budget: std::time::Duration::from_millis(40),
        ..dmalab_bench::BenchOptions::quick()
    };
    for w in ["map-unmap-1page", "nic-ring"] {
        let r = dmalab_bench::run(NAME, w, 2, &opts).unwrap();
        assert_eq!(r.allocator, NAME);
        assert_eq!(r.failures, 0, "{w}");
        assert!(r.work.cache_hits > 0, "{w}: {:?}", r.work);
    }
}

#[test]
fn the_depot_gives_back_one_magazine_per_delay() {
    use dmalab_bench::linux_rcache::{IOVA_DEPOT_DELAY, IOVA_MAG_SIZE};
    // One slot: the depot keeps at most one magazine past its trim.
    let a = LinuxRcache::with_cpu_slots(with_zone(), 1).unwrap();
    let mag = IOVA_MAG_SIZE as u64;
    let mut got = Vec::new();
    for _ in 0..6 * mag + 1 {
        got.push(a.allocate(&req(1, None)).unwrap().pfn_lo);
    }
    let last = got.pop().unwrap();
    // `loaded` and `prev` fill, then four full magazines go to the depot.
    for &p in &got {
        a.free(p, 1).unwrap();
    }
    assert_eq!(a.stats().cached_pages, 6 * mag);
    std::thread::sleep(IOVA_DEPOT_DELAY + std::time::Duration::from_millis(10));
    // The next depot push finds the work overdue: the magazine on top goes back to the tree.
    a.free(last, 1).unwrap();
    assert_eq!(a.stats().cached_pages, 5 * mag + 1);
    // The work re-armed itself for later: depot pops and pushes give nothing more back now.
    let taken: Vec<_> = (0..3 * mag)
        .map(|_| a.allocate(&req(1, None)).unwrap().pfn_lo)
        .collect();
    assert_eq!(a.stats().cached_pages, 2 * mag + 1);
    for p in taken {
        a.free(p, 1).unwrap();
    }
    assert_eq!(a.stats().cached_pages, 5 * mag + 1);
}
