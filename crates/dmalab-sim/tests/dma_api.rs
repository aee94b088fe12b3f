//! The DMA API on the mapping layer: scatter-gather lists, coherent buffers, bounce buffers by
//! direction and sync, reserved ranges.

use dmalab_iova::AllocatorKind;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::dma::{DmaDirection, DmaMapper, MapperConfig};
use dmalab_sim::iommu::flush::FlushPolicy;
use dmalab_sim::iommu::Translation;
use dmalab_sim::units::Ps;

fn mapper(
    translation: Translation,
    window_bytes: u64,
    mask: u32,
    reserved: Vec<(u64, u64)>,
) -> DmaMapper {
    let p = Platform::builtin("intel-vtd-2008-server", &Picks::new()).unwrap();
    let config = MapperConfig {
        translation,
        allocator: AllocatorKind::SegTree,
        window_bytes,
        flush: FlushPolicy::Strict,
        cpus: 1,
        dma_mask_bits: mask,
        window_offset: 0,
        reserved,
    };
    DmaMapper::new(&config, p.iommu().unwrap().clone()).unwrap()
}

#[test]
fn a_scatter_gather_list_gets_one_iova_range() {
    let mut m = mapper(Translation::PageTable, 1 << 32, 64, vec![]);
    let segs = [(0x10_0100, 100), (0x20_0000, 4096), (0x30_0ff0, 32)];
    let (sg, t) = m
        .map_sg(Ps::ZERO, 0, &segs, DmaDirection::ToDevice)
        .unwrap();
    // 1 + 1 + 2 pages, contiguous in IOVA space, each segment at its page offset.
    assert_eq!(sg.mapping.pages, 4);
    let base = sg.mapping.pfn.unwrap() * 4096;
    assert_eq!(
        sg.segment_addrs,
        [base + 0x100, base + 4096, base + 2 * 4096 + 0xff0]
    );
    assert_eq!(t.table_ps, Ps::from_ns(100).times(4));
    m.unmap(Ps(1), 0, &sg.mapping).unwrap();
    let s = m.stats();
    assert_eq!(
        (
            s.maps,
            s.unmaps,
            s.allocator_work.allocs,
            s.allocator_work.frees
        ),
        (1, 1, 1, 1)
    );
}

#[test]
fn bounce_buffers_copy_by_direction() {
    let mut m = mapper(Translation::None, 1 << 32, 32, vec![]);
    let high = 8u64 << 30;
    let (to, t) = m
        .map_dir(Ps::ZERO, 0, high, 2048, DmaDirection::ToDevice)
        .unwrap();
    assert!(to.bounced && t.bounce_ps > Ps::ZERO);
    assert_eq!(m.unmap(Ps(1), 0, &to).unwrap().bounce_ps, Ps::ZERO);
    let (from, t) = m
        .map_dir(Ps(2), 0, high, 2048, DmaDirection::FromDevice)
        .unwrap();
    assert_eq!(t.bounce_ps, Ps::ZERO);
    assert!(m.sync_for_cpu(&from).bounce_ps > Ps::ZERO);
    assert_eq!(m.sync_for_device(&from).bounce_ps, Ps::ZERO);
    assert!(m.unmap(Ps(3), 0, &from).unwrap().bounce_ps > Ps::ZERO);
    let (low, _) = m
        .map_dir(Ps(4), 0, 1 << 20, 2048, DmaDirection::Bidirectional)
        .unwrap();
    assert!(!low.bounced);
    assert_eq!(m.stats().bounced, 2);
}

#[test]
fn reserved_ranges_are_never_handed_out() {
    // A 16 MiB window with all but its first and last 64 KiB reserved.
    let reserved = vec![(0x1_0000, 0xFE_FFFF)];
    let mut m = mapper(Translation::PageTable, 1 << 24, 64, reserved);
    let mut live = Vec::new();
    for i in 0..30 {
        let (map, _) = m.map(Ps(i), 0, 0x1000 * i, 4096).unwrap();
        assert!(
            map.dma_addr < 0x1_0000 || map.dma_addr > 0xFE_FFFF,
            "{:#x}",
            map.dma_addr
        );
        live.push(map);
    }
    // Pages 1..=15 below and 4080..=4095 above are usable: 31 in all, so one more single-page
    // mapping fits and the next finds no space.
    assert!(m.map(Ps(98), 0, 0, 4096).is_ok());
    assert!(m.map(Ps(99), 0, 0, 4096).is_err());
    assert_eq!(live.len(), 30);
}

#[test]
fn coherent_buffers_are_mapped_once_and_counted() {
    let mut m = mapper(Translation::PageTable, 1 << 32, 64, vec![]);
    let (ring, _) = m.alloc_coherent(Ps::ZERO, 0, 16 * 256).unwrap();
    assert_eq!(ring.pages, 1);
    assert_eq!(m.stats().coherent_bytes, 4096);
    m.unmap(Ps(1), 0, &ring).unwrap();
}

#[test]
fn a_list_with_any_bounced_segment_is_copied_back_at_unmap() {
    let mut m = mapper(Translation::None, 1 << 32, 32, vec![]);
    let segs = [(1 << 20, 512), (8u64 << 30, 512)];
    let (sg, _) = m
        .map_sg(Ps::ZERO, 0, &segs, DmaDirection::FromDevice)
        .unwrap();
    assert!(sg.mapping.bounced);
    assert!(m.unmap(Ps(1), 0, &sg.mapping).unwrap().bounce_ps > Ps::ZERO);
}

/// Every unit of the allocator's counted work is charged once, as allocation or free time:
/// the domain's building and reservations, refused allocations (charged with the next
/// allocation or free), the quick and the slow paths. With the per-allocation node cost set to
/// zero the charge is linear in the counters, so the run's allocation and free time must equal
/// the charge of the allocator's total work.
#[test]
fn all_counted_allocator_work_is_charged_once() {
    let p = Platform::builtin("intel-vtd-2008-server", &Picks::new()).unwrap();
    let mut costs = p.iommu().unwrap().clone();
    costs.node_alloc_ns = 0;
    let config = MapperConfig {
        translation: Translation::PageTable,
        allocator: AllocatorKind::SegTree,
        window_bytes: 64 * 4096,
        flush: FlushPolicy::Strict,
        cpus: 1,
        dma_mask_bits: 64,
        window_offset: 0,
        reserved: vec![(8 * 4096, 12 * 4096 - 1)],
    };
    let mut m = DmaMapper::new(&config, costs.clone()).unwrap();
    let mut live = Vec::new();
    let mut refused = 0;
    // Fill the window past refusal, free half, fill again: refusals between charges.
    for round in 0..3u64 {
        for i in 0..80u64 {
            let pages = 1 + (i + round) % 3;
            match m.map(Ps(i), 0, (1 << 30) + i * 65536, pages * 4096) {
                Ok((mapping, _)) => live.push(mapping),
                Err(_) => refused += 1,
            }
        }
        let keep = live.len() / 2;
        for mapping in live.drain(keep..) {
            m.unmap(Ps(100), 0, &mapping).unwrap();
        }
    }
    let (mapping, _) = m.map(Ps(200), 0, 1 << 30, 4096).unwrap();
    m.unmap(Ps(300), 0, &mapping).unwrap();
    assert!(refused > 0, "the window never refused a mapping");
    let w = m.allocator_work();
    assert!(
        w.failures > 0 && w.cache_hits > 0 && w.nodes_visited > 0,
        "{w:?}"
    );
    let ns = (w.allocs + w.frees + w.failures) * costs.alloc_call_ns
        + w.nodes_visited * costs.node_visit_ns
        + w.words_scanned * costs.word_scan_ns
        + w.lock_acquisitions * costs.lock_ns
        + w.cache_hits * costs.cache_hit_ns;
    let t = m.stats().time;
    assert_eq!(t.alloc_ps + t.free_ps, Ps::from_ns(ns));
}
