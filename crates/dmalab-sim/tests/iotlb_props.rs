//! Property tests of the IOMMU's translation under long-lived mappings (`bench dma --iommu on`).
//! Each property fails without its mechanism:
//! - a window within the IOTLB's reach has no misses after warm-up (fails if the IOTLB did not
//!   keep what it walked, or if sets were chosen so that a contiguous window overflows one);
//! - 2 MiB pages never miss more than 4 KiB pages on the same window, and below the larger
//!   reach never miss at all where 4 KiB pages do (fails if the page size did not set the
//!   IOTLB's key);
//! - translation never makes a transfer faster (fails if a miss's walk were not on the
//!   request's path, or if walks took no walker).

use dmalab_sim::bus::memory::{Access, Cache, Home};
use dmalab_sim::bus::trace::Direction;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::iommu::iotlb::Replacement;
use dmalab_sim::iommu::walk::{Invalidation, IommuHw, Translator};
use dmalab_sim::workload::devdma::{DeviceDma, DmaPoint, DmaRecord, IommuMode};
use proptest::prelude::*;
use proptest::sample::select;

/// The built-in platforms with an IOMMU's translation hardware and a device DMA path.
fn platforms() -> Vec<Platform> {
    Platform::builtin_names()
        .into_iter()
        .filter_map(|n| Platform::builtin(n, &Picks::new()).ok())
        .filter(|p| p.iommu_hw.is_some() && p.device_dma.is_some())
        .collect()
}

fn measure(p: &Platform, point: &DmaPoint) -> DmaRecord {
    DeviceDma::new(p).unwrap().measure(point).unwrap()
}

fn point(direction: Direction, size: u64, window: u64, access: Access, page: u64) -> DmaPoint {
    DmaPoint {
        direction,
        size_bytes: size,
        offset_bytes: 0,
        window_bytes: window.max(size),
        access,
        memory: Home::Local,
        cache: Cache::Warm,
        iommu: IommuMode::On,
        page_bytes: page,
    }
}

fn replacement() -> impl Strategy<Value = Replacement> {
    select(vec![
        Replacement::Lru,
        Replacement::Fifo,
        Replacement::RoundRobin,
    ])
}

#[test]
fn there_are_platforms_to_test() {
    assert!(platforms().len() >= 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any IOTLB geometry and replacement: after one pass over a contiguous window of at most
    /// `entries` pages, any order of accesses to it hits.
    #[test]
    fn a_window_within_reach_has_no_misses_after_warm_up(
        sets_log in 0u32..6,
        ways in 1u64..9,
        replacement in replacement(),
        page in select(vec![1u64 << 12, 1 << 21, 1 << 30]),
        base_page in 0u64..1 << 20,
        fill in 1u64..=100,
        order in prop::collection::vec(any::<u64>(), 1..200),
    ) {
        let entries = (1u64 << sets_log) * ways;
        let hw = IommuHw {
            levels: 4,
            max_page_bytes: 1 << 30,
            iotlb_entries: entries,
            iotlb_ways: ways,
            iotlb_replacement: replacement,
            walk_cache_entries: 4,
            walkers: 2,
            walk_step_ns: 10,
            walk_coherent: true,
            invalidation: Invalidation::Queued,
            invalidation_submit_ns: 40,
        };
        let pages = (entries * fill).div_ceil(100);
        let mut t = Translator::new(&hw, page).unwrap();
        let addr = |i: u64| (base_page + i) * page + (i * 64) % page;
        for i in 0..pages {
            t.translate(addr(i), 0, |s, _| s + 1);
        }
        t.reset_timing();
        for k in order {
            t.translate(addr(k % pages), 0, |s, _| s + 1);
        }
        prop_assert_eq!(t.stats().misses, 0);
        prop_assert_eq!(t.stats().walk_reads, 0);
    }

    /// On every platform, any window, walk and size: 2 MiB pages miss no more than 4 KiB
    /// pages, and translation never makes a transfer faster than no IOMMU.
    #[test]
    fn large_pages_never_miss_more_and_translation_never_speeds_up(
        window_log in 12u32..36,
        size in select(vec![64u64, 256, 1500, 4096]),
        access in select(vec![Access::Seq, Access::Random]),
        direction in select(vec![Direction::Read, Direction::Write]),
    ) {
        for p in platforms() {
            let small = point(direction, size, 1 << window_log, access, 1 << 12);
            let large = DmaPoint { page_bytes: 1 << 21, ..small };
            let off = DmaPoint { iommu: IommuMode::Off, ..small };
            let (s, l, o) = (measure(&p, &small), measure(&p, &large), measure(&p, &off));
            let miss = |r: &DmaRecord| r.iotlb_miss_rate.unwrap();
            prop_assert!(miss(&l) <= miss(&s), "{}: 2 MiB {} > 4 KiB {}", p.name, miss(&l), miss(&s));
            for r in [&s, &l] {
                prop_assert!(r.latency_ns >= o.latency_ns, "{}: {} < {}", p.name, r.latency_ns, o.latency_ns);
                prop_assert!(
                    r.transactions_per_s <= o.transactions_per_s * 1.001,
                    "{}: {} > {}", p.name, r.transactions_per_s, o.transactions_per_s
                );
            }
        }
    }
}

#[test]
fn windows_within_reach_do_not_miss_and_beyond_it_do() {
    for p in platforms() {
        let hw = p.iommu_hw.clone().unwrap();
        for page in [1u64 << 12, 1 << 21] {
            let reach = hw.reach_bytes(page);
            let within = point(Direction::Read, 64, reach / 2, Access::Random, page);
            let r = measure(&p, &within);
            assert_eq!(r.iotlb_miss_rate, Some(0.0), "{} {page}", p.name);
            assert_eq!(r.walk_reads_per_transfer, Some(0.0), "{} {page}", p.name);
            let beyond = point(Direction::Read, 64, reach * 8, Access::Random, page);
            let r = measure(&p, &beyond);
            assert!(r.iotlb_miss_rate.unwrap() > 0.5, "{} {page}: {r:?}", p.name);
        }
        // Between the two reaches: 4 KiB pages miss, 2 MiB pages do not.
        let window = hw.reach_bytes(1 << 12) * 8;
        let small = measure(
            &p,
            &point(Direction::Read, 64, window, Access::Random, 1 << 12),
        );
        let large = measure(
            &p,
            &point(Direction::Read, 64, window, Access::Random, 1 << 21),
        );
        assert!(small.iotlb_miss_rate.unwrap() > 0.5);
        assert_eq!(large.iotlb_miss_rate, Some(0.0));
        // The walk shows in the latency of a lone transfer.
        let part = |r: &DmaRecord| {
            r.latency_parts
                .iter()
                .find(|(n, _)| *n == "translation")
                .unwrap()
                .1
        };
        assert!(
            part(&small) > 0.0 && part(&large) == 0.0,
            "{p:?}",
            p = p.name
        );
    }
}

#[test]
fn with_the_iommu_off_records_carry_no_translation() {
    for p in platforms() {
        let off = DmaPoint {
            iommu: IommuMode::Off,
            ..point(Direction::Write, 256, 1 << 20, Access::Seq, 1 << 12)
        };
        let r = measure(&p, &off);
        assert_eq!((r.iotlb_miss_rate, r.walk_reads_per_transfer), (None, None));
        assert!(r.latency_parts.iter().all(|(n, _)| *n != "translation"));
        assert!(r.utilisation.iter().all(|(n, _)| *n != "IOMMU walkers"));
    }
}
