//! Helpers shared by the device DMA model's property tests: a link, a point on the default
//! window, a measurement of a path built in code, and the two directions.

use dmalab_sim::bus::device::DeviceEngine;
use dmalab_sim::bus::memory::{Access, Cache, Home, MemoryPath};
use dmalab_sim::bus::pcie::{PcieLink, PcieParams, TlpSplit};
use dmalab_sim::bus::trace::Direction;
use dmalab_sim::workload::devdma::{DeviceDma, DmaPoint, DmaRecord, IommuMode};
use proptest::prelude::*;

/// Either direction.
pub fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Read), Just(Direction::Write)]
}

/// A point of `size` bytes at `offset`: local, warm, sequential over 64 KiB, IOMMU off.
pub fn point(direction: Direction, size: u64, offset: u64) -> DmaPoint {
    DmaPoint {
        direction,
        size_bytes: size,
        offset_bytes: offset,
        window_bytes: 1 << 16,
        access: Access::Seq,
        memory: Home::Local,
        cache: Cache::Warm,
        iommu: IommuMode::Off,
        page_bytes: 4096,
        device_offset_bytes: 0,
        then_read: false,
        mixed: false,
    }
}

/// The point measured on a path built in code.
pub fn measure(link: &PcieLink, m: &MemoryPath, e: &DeviceEngine, p: &DmaPoint) -> DmaRecord {
    DeviceDma::from_parts("props", link, m, e)
        .measure(p)
        .unwrap()
}

/// A link of `generation` and `lanes` with `tags` read tags; 256-byte MPS, 512-byte MRRS, RCB
/// 64, aligned splits.
pub fn link(generation: u64, lanes: u64, tags: u64) -> PcieLink {
    PcieLink::new(PcieParams {
        generation,
        lanes,
        max_payload_bytes: 256,
        max_read_request_bytes: 512,
        read_completion_boundary_bytes: 64,
        addressing_bits: 64,
        ecrc: false,
        tlp_split: TlpSplit::Aligned,
        read_latency_ns: 0,
        max_outstanding_read_requests: tags,
        tlps_per_ack: 4,
        tlps_per_fc_update: 4,
        cache_line_bytes: 64,
        read_modify_write_ns: 90,
    })
    .unwrap()
}
