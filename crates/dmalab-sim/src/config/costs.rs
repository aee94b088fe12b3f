//! The cost parameters of a platform's host and device sections (`[io]`, `[net]`, `[stream]`,
//! `[vhost]`, `[copy]`, `[dma_engine]`), each read with its range checked. The workload models
//! take them as inputs; they live here, below the workloads, so that the platform reads them
//! without importing any workload.

use crate::config::params::ParamReader;
use crate::config::proto::{ETHERNET_HEADER_BYTES, IPV4_TCP_HEADER_BYTES};
use crate::error::Result;
use serde::Serialize;

/// The host and device costs of the I/O path (a platform's `[io]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IoCosts {
    /// CPU time to submit one I/O (syscall, block and SCSI layers, driver), without mapping.
    pub submit_ns: u64,
    /// CPU time to complete one I/O (interrupt, driver, block layer, return), without unmapping.
    pub complete_ns: u64,
    /// The device's fixed time per I/O (doorbell to the start of its DMA, and its completion).
    pub device_latency_ns: u64,
    /// The device's data rate (its DMA engine, its link or its wire).
    pub device_bytes_per_s: u64,
    /// Where the IOMMU's invalidation queue ends many CPUs' invalidations with one wait
    /// (`[iommu_hw] invalidation = "shared-sync"`): its commands' costs and how an unmap's
    /// pages become commands; `None` where each invalidation's wait is served in turn. Set
    /// from the platform's IOMMU, not read here.
    #[serde(skip)]
    pub shared_sync: Option<crate::iommu::sync::SyncCosts>,
}

impl IoCosts {
    /// Read the costs under `prefix` (such as `io`), each range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<IoCosts> {
        let f = |name: &str| format!("{prefix}.{name}");
        Ok(IoCosts {
            submit_ns: r.u64(&f("submit_ns"), 0..=100_000_000)?,
            complete_ns: r.u64(&f("complete_ns"), 0..=100_000_000)?,
            device_latency_ns: r.u64(&f("device_latency_ns"), 0..=100_000_000)?,
            device_bytes_per_s: r.u64(&f("device_bytes_per_s"), 1_000..=1 << 40)?,
            shared_sync: None,
        })
    }
}

/// Whether the mapping layer's table lock serializes maps and unmaps across a host's cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapLock {
    /// One lock per translation table, held across the allocation and the table update or
    /// hypervisor call.
    Table,
    /// No shared lock is modelled (per-CPU pools, or a lock-free allocator).
    None,
}

/// Host, NIC and network costs (a platform's `[net]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetCosts {
    /// Ethernet line rate.
    pub link_bits_per_s: u64,
    /// IP MTU.
    pub mtu_bytes: u64,
    /// Per-frame bytes on the wire beyond the IP packet (Ethernet header, FCS, preamble, gap).
    pub frame_overhead_bytes: u64,
    /// One-way latency of the switch.
    pub switch_latency_ns: u64,
    /// A NIC's latency per frame, each way (doorbell or arrival to DMA done).
    pub nic_latency_ns: u64,
    /// CPU cores per host.
    pub cores: u64,
    /// Sender CPU per message (system call, socket, protocol).
    pub send_per_message_ns: u64,
    /// Sender CPU per transmitted frame or TSO segment (driver, descriptors).
    pub send_per_frame_ns: u64,
    /// Receiver CPU per received frame (interrupt or poll, driver, protocol).
    pub receive_per_frame_ns: u64,
    /// Receiver CPU per message (socket, wake-up of the application).
    pub receive_per_message_ns: u64,
    /// Application time per request at the server (uperf's turnaround).
    pub server_app_ns: u64,
    /// Largest TCP segment the NIC cuts into frames (TSO); received frames are not merged.
    pub tso_bytes: u64,
    /// Received frames per receive-buffer mapping (the driver maps buffers in chunks).
    pub rx_frames_per_map: u64,
    /// Whether a table lock serializes each host's maps and unmaps (with a TCE or page-table
    /// translation; a direct window or passthrough takes no lock).
    pub map_lock: MapLock,
    /// Data frames per TCP acknowledgement.
    pub ack_every_frames: u64,
    /// Frames up to this length (Ethernet header included) are copied into the send descriptor
    /// and not mapped; 0 turns inlining off.
    pub tx_inline_bytes: u64,
    /// A TCP stream's window: bytes a sender may have sent that its receiver's application has
    /// not yet read.
    pub tcp_window_bytes: u64,
    /// Descriptors per send and per receive ring.
    pub ring_entries: u64,
    /// Bytes of one send descriptor the NIC reads.
    pub tx_descriptor_bytes: u64,
    /// Bytes of one receive descriptor the NIC reads.
    pub rx_descriptor_bytes: u64,
    /// Bytes of one completion entry the NIC writes.
    pub completion_bytes: u64,
}

impl NetCosts {
    /// Read `[net]` (under `prefix`), each field range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<NetCosts> {
        let f = |n: &str| format!("{prefix}.{n}");
        let ns = 0..=100_000_000;
        Ok(NetCosts {
            link_bits_per_s: r.u64(&f("link_bits_per_s"), 1_000_000..=1_000_000_000_000)?,
            mtu_bytes: r.u64(&f("mtu_bytes"), 576..=9000)?,
            frame_overhead_bytes: r.u64(&f("frame_overhead_bytes"), 0..=128)?,
            switch_latency_ns: r.u64(&f("switch_latency_ns"), ns.clone())?,
            nic_latency_ns: r.u64(&f("nic_latency_ns"), ns.clone())?,
            cores: r.u64(&f("cores"), 1..=4096)?,
            send_per_message_ns: r.u64(&f("send_per_message_ns"), ns.clone())?,
            send_per_frame_ns: r.u64(&f("send_per_frame_ns"), ns.clone())?,
            receive_per_frame_ns: r.u64(&f("receive_per_frame_ns"), ns.clone())?,
            receive_per_message_ns: r.u64(&f("receive_per_message_ns"), ns.clone())?,
            server_app_ns: r.u64(&f("server_app_ns"), ns)?,
            tso_bytes: r.u64(&f("tso_bytes"), 1500..=262_144)?,
            rx_frames_per_map: r.u64(&f("rx_frames_per_map"), 1..=4096)?,
            map_lock: match r.choice(&f("map_lock"), &["table", "none"])?.as_str() {
                "table" => MapLock::Table,
                _ => MapLock::None,
            },
            ack_every_frames: r.u64(&f("ack_every_frames"), 1..=64)?,
            tx_inline_bytes: r.u64(&f("tx_inline_bytes"), 0..=1024)?,
            tcp_window_bytes: r.u64(&f("tcp_window_bytes"), 1500..=1 << 30)?,
            ring_entries: r.u64(&f("ring_entries"), 1..=65536)?,
            tx_descriptor_bytes: r.u64(&f("tx_descriptor_bytes"), 4..=4096)?,
            rx_descriptor_bytes: r.u64(&f("rx_descriptor_bytes"), 4..=4096)?,
            completion_bytes: r.u64(&f("completion_bytes"), 4..=4096)?,
        })
    }
}

/// The platform's parameters of the stream workload (`[stream]` in the platform file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamParams {
    /// The IP MTU.
    pub mtu_bytes: u64,
    /// The Ethernet line rate.
    pub link_bits_per_s: u64,
    /// Per-frame bytes on the wire beyond the frame (preamble, FCS, inter-frame gap).
    pub wire_overhead_bytes: u64,
    /// Bytes the NIC writes to memory for one received ACK frame.
    pub ack_frame_bytes: u64,
    /// Full-sized segments acknowledged by one ACK.
    pub data_segments_per_ack: u64,
    /// Size of one transmit or receive descriptor.
    pub descriptor_bytes: u64,
    /// Descriptors the NIC fetches with one read.
    pub descriptors_per_fetch: u64,
    /// Offset of an unaligned (Linux) transmit frame in a 512-byte block.
    pub unaligned_tx_offset_bytes: u64,
    /// Offset of an unaligned (Linux) receive buffer in a 512-byte block.
    pub unaligned_rx_offset_bytes: u64,
    /// The largest datagram one large send (TSO) hands the NIC.
    pub tso_segment_bytes: u64,
    /// The page of the host's memory and of its I/O mappings: a large send's payload lies in
    /// page-aligned socket buffers, one transmit descriptor per page.
    pub page_bytes: u64,
    /// The sender's CPU time per send (TCP/IP, driver), without copies or mappings.
    pub host_per_send_ns: u64,
    /// CPU time per KiB of a cache-hot copy.
    pub copy_ns_per_kib: u64,
    /// CPU time to start a copy.
    pub copy_setup_ns: u64,
    /// CPU time to map one buffer for DMA (write its TCE).
    pub tce_map_ns: u64,
    /// CPU time to unmap one buffer (clear its TCE, invalidate the bridge's TCE cache).
    pub tce_unmap_ns: u64,
}

impl StreamParams {
    /// Read `[stream]` (under `prefix`) with every field range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<StreamParams> {
        let f = |name: &str| format!("{prefix}.{name}");
        Ok(StreamParams {
            mtu_bytes: r.u64(&f("mtu_bytes"), 576..=9000)?,
            link_bits_per_s: r.u64(&f("link_bits_per_s"), 1_000_000..=800_000_000_000)?,
            wire_overhead_bytes: r.u64(&f("wire_overhead_bytes"), 0..=64)?,
            ack_frame_bytes: r.u64(&f("ack_frame_bytes"), 54..=128)?,
            data_segments_per_ack: r.u64(&f("data_segments_per_ack"), 1..=64)?,
            descriptor_bytes: r.pow2(&f("descriptor_bytes"), 4..=64)?,
            descriptors_per_fetch: r.u64(&f("descriptors_per_fetch"), 1..=256)?,
            unaligned_tx_offset_bytes: r.u64(&f("unaligned_tx_offset_bytes"), 0..=511)?,
            unaligned_rx_offset_bytes: r.u64(&f("unaligned_rx_offset_bytes"), 0..=511)?,
            tso_segment_bytes: r.u64(&f("tso_segment_bytes"), 1024..=262_144)?,
            page_bytes: r.pow2(&f("page_bytes"), 4096..=65_536)?,
            host_per_send_ns: r.u64(&f("host_per_send_ns"), 0..=1_000_000)?,
            copy_ns_per_kib: r.u64(&f("copy_ns_per_kib"), 0..=1_000_000)?,
            copy_setup_ns: r.u64(&f("copy_setup_ns"), 0..=1_000_000)?,
            tce_map_ns: r.u64(&f("tce_map_ns"), 0..=1_000_000)?,
            tce_unmap_ns: r.u64(&f("tce_unmap_ns"), 0..=1_000_000)?,
        })
    }

    /// TCP payload per full-sized frame (the MSS without options).
    pub fn mss_bytes(&self) -> u64 {
        self.mtu_bytes - IPV4_TCP_HEADER_BYTES
    }

    /// The smallest frame carrying TCP payload: the headers and one byte.
    pub fn min_frame_bytes(&self) -> u64 {
        ETHERNET_HEADER_BYTES + IPV4_TCP_HEADER_BYTES + 1
    }

    /// A full-sized frame as the NIC reads it (Ethernet header, IP, TCP, payload).
    pub fn frame_bytes(&self) -> u64 {
        self.mtu_bytes + ETHERNET_HEADER_BYTES
    }
}

/// The backend's own costs (a platform's `[vhost]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VhostCosts {
    /// Core time per packet: virtqueue descriptors, headers, offload flags.
    pub per_packet_ns: u64,
    /// Core time per mbuf: allocation, chaining, descriptor.
    pub per_mbuf_ns: u64,
    /// Descriptors an engine ring holds (copies in flight per engine).
    pub ring_entries: u64,
    /// The share of the per-packet work that waits on guest memory (the virtio ring, its
    /// descriptors, the virtio-net header), in percent: that share slows like a CPU copy when
    /// guest memory sits in another node than the core.
    pub guest_memory_share_pct: u64,
}

impl VhostCosts {
    /// Read `[vhost]` under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<VhostCosts> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(VhostCosts {
            per_packet_ns: r.u64(&f("per_packet_ns"), 0..=1_000_000)?,
            per_mbuf_ns: r.u64(&f("per_mbuf_ns"), 0..=1_000_000)?,
            ring_entries: r.u64(&f("ring_entries"), 1..=65_536)?,
            guest_memory_share_pct: r.u64(&f("guest_memory_share_pct"), 0..=100)?,
        })
    }
}

/// The copying core's costs (a platform's `[copy]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuCopyCosts {
    /// Set-up of one copy (call, length checks, tail handling).
    pub setup_ns: u64,
    /// Copy rate with source and destination in the core's node, bytes per microsecond.
    pub bytes_per_us: u64,
    /// Extra time, in percent, when the source or the destination is in another node.
    pub remote_slowdown_pct: u64,
}

/// How the core learns that a copy is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Completion {
    /// The core checks a completion record: `completion_ns` per copy, no added latency.
    Poll,
    /// The engine raises an interrupt per doorbell batch: `completion_ns` per interrupt, shared
    /// by the batch, and `interrupt_latency_ns` before the core sees it.
    Interrupt,
}

/// A copy engine's costs (a platform's `[dma_engine]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EngineCosts {
    /// Channels the core drives; each runs one descriptor at a time at `bytes_per_us`.
    pub channels: u64,
    /// Core time to build one descriptor and put it on the ring, engine in the core's node.
    pub submit_ns: u64,
    /// Core time of one doorbell (an uncached write to the engine's register or portal).
    pub doorbell_ns: u64,
    /// Descriptors submitted per doorbell (batching).
    pub descriptors_per_doorbell: u64,
    /// Polling or interrupts.
    pub completion: Completion,
    /// Core time per completion check (polling) or per interrupt, engine in the core's node.
    pub completion_ns: u64,
    /// With interrupts: from the engine finishing to the core seeing it.
    pub interrupt_latency_ns: u64,
    /// Extra core time per copy when the engine is in another node.
    pub remote_cpu_ns: u64,
    /// Engine time to start one descriptor.
    pub startup_ns: u64,
    /// One channel's copy rate with memory in its node, bytes per microsecond.
    pub bytes_per_us: u64,
    /// Extra engine time, in percent, for each of source and destination in another node.
    pub remote_memory_pct: u64,
}

impl CpuCopyCosts {
    /// Read `[copy]` under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<CpuCopyCosts> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(CpuCopyCosts {
            setup_ns: r.u64(&f("setup_ns"), 0..=100_000)?,
            bytes_per_us: r.u64(&f("bytes_per_us"), 1..=1_000_000_000)?,
            remote_slowdown_pct: r.u64(&f("remote_slowdown_pct"), 0..=1000)?,
        })
    }
}

/// The core's side of a copy engine (a host's `[dma_engine]` without an engine in its slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineHostSide {
    /// Polling or interrupts.
    pub completion: Completion,
    /// Core time per completion check (polling) or per interrupt, engine in the core's node.
    pub completion_ns: u64,
    /// With interrupts: from the engine finishing to the core seeing it.
    pub interrupt_latency_ns: u64,
    /// Extra core time per copy when the engine is in another node.
    pub remote_cpu_ns: u64,
}

impl EngineHostSide {
    /// Read the core's side of `[dma_engine]` under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<EngineHostSide> {
        let f = |n: &str| format!("{prefix}.{n}");
        let completion = match r.choice(&f("completion"), &["poll", "interrupt"])?.as_str() {
            "interrupt" => Completion::Interrupt,
            _ => Completion::Poll,
        };
        Ok(EngineHostSide {
            completion,
            completion_ns: r.u64(&f("completion_ns"), 0..=100_000)?,
            interrupt_latency_ns: r.u64(&f("interrupt_latency_ns"), 0..=10_000_000)?,
            remote_cpu_ns: r.u64(&f("remote_cpu_ns"), 0..=100_000)?,
        })
    }
}

impl EngineCosts {
    /// Read `[dma_engine]` under `prefix`: the core's side and the engine's own keys (those a
    /// copy-engine device file brings).
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<EngineCosts> {
        let f = |n: &str| format!("{prefix}.{n}");
        let host = EngineHostSide::read(r, prefix)?;
        Ok(EngineCosts {
            channels: r.u64(&f("channels"), 1..=64)?,
            submit_ns: r.u64(&f("submit_ns"), 0..=100_000)?,
            doorbell_ns: r.u64(&f("doorbell_ns"), 0..=100_000)?,
            descriptors_per_doorbell: r.u64(&f("descriptors_per_doorbell"), 1..=4096)?,
            completion: host.completion,
            completion_ns: host.completion_ns,
            interrupt_latency_ns: host.interrupt_latency_ns,
            remote_cpu_ns: host.remote_cpu_ns,
            startup_ns: r.u64(&f("startup_ns"), 0..=100_000)?,
            bytes_per_us: r.u64(&f("bytes_per_us"), 1..=1_000_000_000)?,
            remote_memory_pct: r.u64(&f("remote_memory_pct"), 0..=1000)?,
        })
    }
}
