//! Seed 003 on the VT-d server of 2008: the allocator and flush claims, the exposure each flush
//! policy leaves, and bit-identical runs.

use dmalab_iova::AllocatorKind;
use dmalab_sim::claims::reproduce;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::config::workload::IoScenario;
use dmalab_sim::dma::{DmaMapper, MapperConfig};
use dmalab_sim::iommu::flush::FlushPolicy;
use dmalab_sim::iommu::Translation;
use dmalab_sim::progress::Progress;
use dmalab_sim::units::Ps;
use dmalab_sim::workload::block::run;

fn vtd() -> Platform {
    Platform::builtin("intel-vtd-2008-server", &Picks::new()).unwrap()
}

fn mapper(
    p: &Platform,
    translation: Translation,
    allocator: AllocatorKind,
    flush: FlushPolicy,
) -> DmaMapper {
    let config = MapperConfig {
        translation,
        allocator,
        window_bytes: 1 << 32,
        flush,
        cpus: 1,
        dma_mask_bits: 64,
        window_offset: 0,
        reserved: vec![dmalab_sim::config::proto::X86_INTERRUPT_WINDOW],
    };
    DmaMapper::new(&config, p.iommu().unwrap().clone()).unwrap()
}

const SCENARIO: IoScenario = IoScenario {
    io_bytes: 1024,
    threads: 1,
    queue_depth: 1,
    devices: 1,
    queues_per_device: None,
    sockets: 1,
    completion: dmalab_sim::config::workload::Completion::Submitter,
    ios: 5_000,
    warm_up_ios: 0,
    buffers: 1,
    seed: 1,
};

#[test]
fn the_seed_003_claims_pass_and_name_their_fits() {
    let rows = reproduce(&["P3-IOPS", "P3-1GBE", "P3-DEFER"]).unwrap();
    for r in &rows {
        assert!(
            r.passed,
            "{} {}: published {} modelled {}\n{}",
            r.id, r.case, r.published, r.modelled, r.breakdown
        );
    }
    let fitted = |case: &str| {
        rows.iter()
            .find(|r| r.case == case)
            .unwrap()
            .fitted_here
            .clone()
    };
    assert_eq!(fitted("red-black tree"), ["iommu.node_alloc_ns"]);
    assert_eq!(fitted("bitmap"), ["iommu.invalidate_ns"]);
}

#[test]
fn strict_leaves_nothing_reachable_and_deferred_leaves_its_queue() {
    let p = vtd();
    let mut strict = mapper(
        &p,
        Translation::PageTable,
        AllocatorKind::RbTree,
        FlushPolicy::Strict,
    );
    run(&mut strict, p.io().unwrap(), SCENARIO, &Progress::new()).unwrap();
    assert_eq!(strict.stats().exposure.pages_exposed, 0);
    let deferred = FlushPolicy::Deferred {
        high_water: 250,
        timeout: Ps(10_000_000_000),
    };
    let mut lazy = mapper(&p, Translation::PageTable, AllocatorKind::RbTree, deferred);
    let r = run(&mut lazy, p.io().unwrap(), SCENARIO, &Progress::new()).unwrap();
    let s = lazy.stats();
    assert!(s.exposure.pages_exposed > 0);
    // A page waits for at most 249 more unmaps, each one I/O apart.
    let io_time = Ps((1e12 / r.iops) as u64);
    assert!(
        s.exposure.max_window_ps <= io_time.times(251),
        "{:?}",
        s.exposure
    );
    // Whole-page mappings expose the rest of each 4 KiB page beyond the 1 KiB buffer.
    assert_eq!(s.sub_page_bytes_exposed, 5_000 * 3072);
}

#[test]
fn runs_are_bit_identical() {
    let p = vtd();
    let once = || {
        let mut m = mapper(
            &p,
            Translation::PageTable,
            AllocatorKind::Bitmap,
            FlushPolicy::Strict,
        );
        let r = run(&mut m, p.io().unwrap(), SCENARIO, &Progress::new()).unwrap();
        serde_json::to_string(&(r, m.stats())).unwrap()
    };
    assert_eq!(once(), once());
}

#[test]
fn no_iommu_needs_no_allocator_and_direct_windows_leave_all_memory_reachable() {
    let p = vtd();
    let mut none = mapper(
        &p,
        Translation::None,
        AllocatorKind::Bitmap,
        FlushPolicy::Strict,
    );
    let r = run(&mut none, p.io().unwrap(), SCENARIO, &Progress::new()).unwrap();
    assert_eq!(r.per_io.mapping.total(), Ps::ZERO);
    let direct = mapper(
        &p,
        Translation::DirectWindow,
        AllocatorKind::Bitmap,
        FlushPolicy::Strict,
    );
    assert!(direct.stats().all_memory_reachable);
}
