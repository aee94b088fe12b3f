//! Device DMA microbenchmarks (`dmalab bench dma`): a device's DMA engine reading or writing
//! host memory over its PCIe link, through the root complex and the memory path in cache lines.
//!
//! Each point is one transfer size at one host offset from a line boundary, over a buffer
//! window walked sequentially or at random, with memory local or remote and the cache warm or
//! cold. Two measurements:
//! - **bandwidth**: the engine keeps its queue full; a transfer starts as soon as one of the
//!   engine's contexts is free ([`DeviceEngine`]: set-ups overlap other transfers' data), and
//!   transfers follow each other as the contexts, the engine's issue port, the tags (held over
//!   the whole round trip, the device's own side included), both directions of the link, the
//!   root complex's pipeline (requests, lines, partial lines), DRAM and the socket link allow.
//!   Where the contexts or the tags bind, the rate is what they hold in flight over the time
//!   each is held (Little's law), so whatever lengthens the round trip (remote memory, a cold
//!   line, an IOTLB miss's walk) lowers the bandwidth. The rate is the least-squares slope of
//!   finish times over the second half of a run long enough to reach steady state. The limit
//!   named is a saturated server (the issue port, the link, the root complex, DRAM, the socket
//!   link, the walkers) where there is one, else the busiest part;
//! - **latency**: one transfer alone on an idle path, from the engine's set-up to the last byte
//!   (at the device for a read; in memory for a write), the median over a run of transfers
//!   (warm lines that only partly fit the cache make single transfers differ).
//!
//! Descriptor fetches and completion records take their link, tag and line time in the
//! bandwidth run; latency is the data transfer's own, as a device timing its DMA would see it.
//!
//! With the IOMMU on, the window (and the rings) are long-lived mappings of `page_bytes` pages,
//! as DPDK, VFIO and RDMA map their buffers once: every request is translated at its page when
//! it reaches the root complex ([`crate::iommu::walk`]: the IOTLB, the paging-structure caches,
//! walks whose table lines are read through the memory path, and a bounded number of walkers).
//! The address sequence is run once through the translation caches before the measured runs
//! (a warm-up), so that a miss rate is the steady state's. Table lines above the leaf level are
//! taken to stay in the LLC (a few lines serve the whole window); leaf lines hit the LLC as far
//! as the leaf tables of the window fit in it, walked in the data's order. The tables are homed
//! on the device's socket whatever the data's home.

use crate::bus::device::DeviceEngine;
use crate::bus::memory::{line_hits, lines_touched, Access, Cache, Home, MemoryPath};
use crate::bus::pcie::{payload_bytes, request_header_bytes, PcieLink, HEADER_3DW_BYTES};
use crate::bus::trace::Direction;
use crate::config::platform::Platform;
use crate::error::{invalid_arg, Result, SimError};
use crate::iommu::walk::{IommuHw, Translator, ENTRY_BYTES, PAGE_SIZES};
use crate::progress::Progress;
use crate::units::Ps;
use serde::{Deserialize, Serialize};

/// The largest transfer a point may have (16 MiB).
pub const MAX_SIZE_BYTES: u64 = 1 << 24;

/// The largest buffer window (1 TiB).
pub const MAX_WINDOW_BYTES: u64 = 1 << 40;

/// Bytes moved in a bandwidth run (at least, within the transfer counts below), so that the
/// tags and pipelines reach steady state. A run's cost is in its lines, so this sets the cost
/// of a point; its steady rate is resolved to about 0.2% (a run of 1 MiB gave the same
/// figures within 0.3% on 99.9% of the validation corpus's points, and 9% on one latency
/// median).
const RUN_BYTES: u64 = 1 << 18;

/// A sequential run also covers its window up to this many bytes (at most
/// [`MAX_WINDOW_TRANSFERS`]), so that the IOTLB sees every page of a window it cycles through:
/// a shorter run would find its own pages warm from the warm-up pass.
const WINDOW_RUN_BYTES: u64 = 1 << 20;

/// Transfers in a bandwidth run: at least this many and at most `MAX_RUN_TRANSFERS`.
pub const MIN_RUN_TRANSFERS: u64 = 256;
const MAX_RUN_TRANSFERS: u64 = 8_192;
const MAX_WINDOW_TRANSFERS: u64 = 32_768;

/// Transfers whose latency is measured one at a time (the median is reported).
const LATENCY_RUNS: u64 = 33;

/// Where descriptor rings and completion records live: an address far from any data buffer,
/// line aligned.
const RING_BASE: u64 = 1 << 40;

/// Whether the device's addresses are translated by the IOMMU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IommuMode {
    /// Bus addresses are physical addresses (no IOMMU, or passthrough).
    #[default]
    Off,
    /// Every request is translated through long-lived mappings of the window.
    On,
}

fn default_page_bytes() -> u64 {
    4096
}

/// One point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaPoint {
    /// Which way the data moves (read: device reads memory).
    pub direction: Direction,
    /// Bytes per transfer, 1..=2^24.
    pub size_bytes: u64,
    /// The buffer's offset from a cache-line boundary, 0..=4095.
    pub offset_bytes: u64,
    /// The host buffer window the transfers walk, at least the size plus the offset.
    pub window_bytes: u64,
    /// Sequential or random walk over the window.
    pub access: Access,
    /// The buffer's home socket.
    pub memory: Home,
    /// Whether the buffer was in the cache.
    pub cache: Cache,
    /// Whether the IOMMU translates the device's addresses (default off).
    #[serde(default)]
    pub iommu: IommuMode,
    /// The page size of the window's mappings with the IOMMU on: 4096, 2097152 or 1073741824
    /// (default 4096).
    #[serde(default = "default_page_bytes")]
    pub page_bytes: u64,
    /// The transfer's offset in the device's own memory, 0..=4095 (default 0): where it is not
    /// a multiple of the engine's `device_word_bytes`, a read's data is stored there with a
    /// read-modify-write of its partial words (`misaligned_store_ns`).
    #[serde(default)]
    pub device_offset_bytes: u64,
    /// With `direction` write: the latency is a write and then a read of the same bytes, from
    /// the write's set-up to the read's data back (the read starts once the write's data has
    /// left the device, and PCIe ordering lets it pass no posted write, so the root complex
    /// serves it after the write's lines). The bandwidth figures stay the write's.
    #[serde(default)]
    pub then_read: bool,
    /// With `direction` read: reads and writes alternate, one of each in turn, over the same
    /// window (pcie-bench's `BW_DMA_RW`). The bandwidth and rate count every transfer of
    /// both; the latency is the median over lone reads and writes in turn. Default false.
    #[serde(default)]
    pub mixed: bool,
}

impl DmaPoint {
    /// Check the point's ranges, naming the field and the valid range.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_SIZE_BYTES).contains(&self.size_bytes) {
            return Err(invalid_arg(
                "size_bytes",
                self.size_bytes,
                format!("1..={MAX_SIZE_BYTES}"),
            ));
        }
        if self.offset_bytes >= 4096 {
            return Err(invalid_arg("offset_bytes", self.offset_bytes, "0..=4095"));
        }
        if self.then_read && self.direction != Direction::Write {
            return Err(invalid_arg(
                "then_read",
                "true",
                "false with direction read (a write then a read takes direction write)",
            ));
        }
        if self.mixed && (self.direction != Direction::Read || self.then_read) {
            return Err(invalid_arg(
                "mixed",
                "true",
                "false with direction write or then_read (reads and writes in turn take \
                 direction read)",
            ));
        }
        if self.device_offset_bytes >= 4096 {
            return Err(invalid_arg(
                "device_offset_bytes",
                self.device_offset_bytes,
                "0..=4095",
            ));
        }
        let least = self.size_bytes + self.offset_bytes;
        if !(least..=MAX_WINDOW_BYTES).contains(&self.window_bytes) {
            return Err(invalid_arg(
                "window_bytes",
                self.window_bytes,
                format!("{least}..={MAX_WINDOW_BYTES} (at least size + offset)"),
            ));
        }
        if !PAGE_SIZES.contains(&self.page_bytes) {
            return Err(invalid_arg(
                "page_bytes",
                self.page_bytes,
                "4096, 2097152 or 1073741824",
            ));
        }
        Ok(())
    }
}

/// The measurements of one point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmaRecord {
    /// The platform's name.
    pub platform: String,
    /// The point measured (its fields appear at the record's top level in JSON).
    #[serde(flatten)]
    pub point: DmaPoint,
    /// Payload bandwidth with the queue full, Gbit/s.
    pub bandwidth_gbit_s: f64,
    /// Median latency of one transfer alone, ns.
    pub latency_ns: f64,
    /// Transfers per second with the queue full.
    pub transactions_per_s: f64,
    /// The part with the highest utilisation in the bandwidth run.
    pub limit: &'static str,
    /// Each part's utilisation in the bandwidth run (busy time over elapsed time; for the tags,
    /// the mean share in use), highest first.
    pub utilisation: Vec<(&'static str, f64)>,
    /// Cache lines the transfer's requests touch (the mean over the run).
    pub lines_per_transfer: f64,
    /// Data TLPs per transfer (MRd or MWr; the mean over the run).
    pub tlps_per_transfer: f64,
    /// Where the median lone transfer's latency goes, ns: set-up, the request's wire time,
    /// (with the IOMMU on) its translation, the root complex and memory, the data's wire time.
    pub latency_parts: Vec<(&'static str, f64)>,
    /// With the IOMMU on, the share of the data requests (not the rings') that missed the
    /// IOTLB in the bandwidth run (after the warm-up); none with it off.
    pub iotlb_miss_rate: Option<f64>,
    /// With the IOMMU on, table lines read by walks per transfer; none with it off.
    pub walk_reads_per_transfer: Option<f64>,
}

/// The IOMMU's walkers as a report names them (a part with the IOMMU on).
pub const WALKERS_PART: &str = "IOMMU walkers";

/// The engine's data port to the device's own memory, as a report names it (a part where the
/// engine has one, `[device_dma] data_bytes_per_us`).
pub const PORT_PART: &str = "device data port";

/// The parts a transfer uses, named as reports name them: the engine's contexts (the mean
/// share in use), its issue port, the link's data and request directions, the read tags and
/// the root port's posted-write entries (each the mean share in use), the root complex's
/// pipeline, DRAM and the socket link.
pub const PARTS: [&str; 9] = [
    "engine contexts",
    "device engine",
    "link",
    "link (requests)",
    "tags",
    "posted entries",
    "root complex",
    "memory",
    "socket link",
];

/// Busy time per part, in ps, over a run.
#[derive(Default)]
struct Busy {
    /// Context time held by transfers (over all contexts).
    context_hold: u128,
    /// The engine's issue port.
    engine: u128,
    /// The link's direction from the device to the host (requests, written data).
    up: u128,
    /// From the host to the device (completions with data).
    down: u128,
    tag_hold: u128,
    /// Posted-write entry time held by writes (over all entries).
    posted_hold: u128,
    root_complex: u128,
    dram: u128,
    socket: u128,
    /// The engine's data port.
    port: u128,
}

/// The IOMMU's state in a run.
#[derive(Clone)]
struct Mmu {
    translator: Translator,
    coherent: bool,
    /// The hit share of leaf table lines in the LLC.
    leaf_share: (u64, u64),
    /// Leaf table lines read so far.
    leaf_reads: u64,
    /// The data requests translated (not the rings') and how many missed.
    data_lookups: u64,
    data_misses: u64,
}

/// The state of the path's resources during a run: when each is free next.
#[derive(Default)]
struct Path {
    /// When each of the engine's contexts is free next, and the next one to take.
    contexts: Vec<u64>,
    next_context: usize,
    /// When the engine's issue port is free next.
    engine: u64,
    up: u64,
    down: u64,
    tags: Vec<u64>,
    next_tag: usize,
    /// When each of the root port's posted-write entries is free next, and the next to take.
    posted: Vec<u64>,
    next_posted: usize,
    root_complex: u64,
    dram: u64,
    socket: u64,
    /// When each of the engine's data ports (to the device's own memory) is free next.
    ports: Vec<u64>,
    line_count: u64,
    /// When the last line so far left the last shared part it used (before its own access
    /// time): a bandwidth run of writes is timed by this, which does not jitter with each
    /// line's hit or miss.
    drained: u64,
    busy: Busy,
    mmu: Option<Mmu>,
    /// Buffers reused from transfer to transfer: each line's done time of the request being
    /// served, and the requests of the transfer being made.
    lines: Vec<u64>,
    spans: Vec<(u64, u64)>,
    /// Whether the data ports serve transfers in time order rather than in issue order (see
    /// [`take_port_gap`]): set for reads and writes in turn, whose writes fetch their data
    /// before, and whose reads store it after, the link round trip.
    port_gaps: bool,
    /// Each data port's bookings, `(start, end)` in time order, with `port_gaps` (one list
    /// per port, made with the path's ports).
    port_slots: Vec<Vec<(u64, u64)>>,
}

/// How a line is served.
struct LineService {
    hit: bool,
}

/// The model of one platform's device DMA path.
pub struct DeviceDma<'a> {
    platform: &'a str,
    link: &'a PcieLink,
    memory: &'a MemoryPath,
    engine: &'a DeviceEngine,
    iommu: Option<&'a IommuHw>,
    dram_line_ps: u64,
    socket_line_ps: u64,
}

impl<'a> DeviceDma<'a> {
    /// The model for `platform`, or an error naming what it lacks.
    pub fn new(platform: &'a Platform) -> Result<DeviceDma<'a>> {
        let (link, memory, engine) = platform.device_dma_path()?;
        let model = DeviceDma::from_parts(&platform.name, link, memory, engine);
        Ok(match &platform.iommu_hw {
            Some(hw) => model.with_iommu(hw),
            None => model,
        })
    }

    /// The same path with an IOMMU's translation hardware, for points with the IOMMU on.
    pub fn with_iommu(self, hw: &'a IommuHw) -> DeviceDma<'a> {
        DeviceDma {
            iommu: Some(hw),
            ..self
        }
    }

    /// The model of a path built in code (`memory.line_bytes` must be the link's cache line).
    pub fn from_parts(
        platform: &'a str,
        link: &'a PcieLink,
        memory: &'a MemoryPath,
        engine: &'a DeviceEngine,
    ) -> DeviceDma<'a> {
        DeviceDma {
            platform,
            link,
            memory,
            engine,
            iommu: None,
            dram_line_ps: memory.line_occupancy_ps(memory.dram_bytes_per_us),
            socket_line_ps: memory.line_occupancy_ps(memory.socket_link_bytes_per_us),
        }
    }

    /// Measure one point.
    pub fn measure(&self, point: &DmaPoint) -> Result<DmaRecord> {
        point.validate()?;
        if point.memory == Home::Remote && !self.memory.has_socket_link() {
            return Err(invalid_arg(
                "memory",
                "remote",
                "local: the host has one socket ([memory] socket_link_ns is 0)",
            ));
        }
        let addresses = self.addresses(point);
        let share = |p: &DmaPoint| {
            self.memory.hit_share(
                p.direction == Direction::Write,
                p.window_bytes,
                p.memory,
                p.cache,
                p.access,
            )
        };
        let hit_share = share(point);
        // A mixed point's writes, each after a read, over the same window.
        let write = DmaPoint {
            direction: Direction::Write,
            mixed: false,
            ..*point
        };
        let write_share = share(&write);
        let nth = |j: usize| {
            if point.mixed && j % 2 == 1 {
                (&write, write_share)
            } else {
                (point, hit_share)
            }
        };
        let mmu = self.warm_mmu(point, &addresses)?;
        // Bandwidth: a full queue.
        let n = addresses.len() as u64;
        let mut path = self.fresh_path();
        path.mmu = mmu;
        if point.mixed {
            path.port_gaps = true;
            path.port_slots = vec![Vec::new(); path.ports.len()];
        }
        let mut done = Vec::with_capacity(addresses.len());
        let (mut lines, mut tlps) = (0u64, 0u64);
        for (j, &addr) in addresses.iter().enumerate() {
            self.descriptor_fetch(&mut path, j as u64);
            let (this, share) = nth(j);
            let t = self.transfer(&mut path, this, addr, share, None);
            lines += t.lines;
            tlps += t.tlps;
            done.push(match this.direction {
                Direction::Read => t.done,
                Direction::Write => path.drained,
            });
            self.completion_write(&mut path, j as u64);
        }
        // A transfer's data can land before an earlier one's: time the run by the latest
        // finish so far.
        for i in 1..done.len() {
            done[i] = done[i].max(done[i - 1]);
        }
        let transactions_per_s = 1e12 / steady_ps_per_transfer(&done[done.len() / 2 - 1..]);
        let bandwidth_gbit_s = transactions_per_s * point.size_bytes as f64 * 8.0 / 1e9;
        let elapsed = [
            done[done.len() - 1],
            path.contexts.iter().copied().max().unwrap_or(0),
            path.engine,
            path.up,
            path.down,
            path.root_complex,
            path.dram,
            path.socket,
            path.ports.iter().copied().max().unwrap_or(0),
        ]
        .into_iter()
        .max()
        .unwrap_or(1)
        .max(1) as f64;
        let tags = self.tags() as f64;
        let translated = path.mmu.as_ref().map(|m| {
            let s = m.translator.stats();
            let busy = s.walker_busy_ps as f64 / elapsed / m.translator.walkers() as f64;
            let miss_rate = m.data_misses as f64 / m.data_lookups.max(1) as f64;
            (miss_rate, s.walk_reads as f64 / n as f64, busy)
        });
        let b = &path.busy;
        let (data, requests) = match point.direction {
            // Both directions carry data and requests when reads and writes alternate: the
            // busier one is the link's data side.
            Direction::Read if point.mixed => (b.down.max(b.up), b.down.min(b.up)),
            Direction::Read => (b.down, b.up),
            Direction::Write => (b.up, b.down),
        };
        // In the order of PARTS.
        let shares = [
            b.context_hold as f64 / elapsed / self.engine.contexts as f64,
            b.engine as f64 / elapsed,
            data as f64 / elapsed,
            requests as f64 / elapsed,
            b.tag_hold as f64 / elapsed / tags,
            b.posted_hold as f64 / elapsed / path.posted.len() as f64,
            b.root_complex as f64 / elapsed,
            b.dram as f64 / elapsed,
            b.socket as f64 / elapsed,
        ];
        let mut utilisation: Vec<(&'static str, f64)> = PARTS.into_iter().zip(shares).collect();
        if let Some((_, _, busy)) = translated {
            utilisation.push((WALKERS_PART, busy));
        }
        if self.engine.data_bytes_per_us.is_some() {
            let ports = path.ports.len().max(1) as f64;
            utilisation.push((PORT_PART, b.port as f64 / elapsed / ports));
        }
        if point.direction == Direction::Write {
            utilisation.retain(|(part, _)| *part != "tags" || b.tag_hold > 0);
        }
        utilisation.retain(|(part, _)| *part != "posted entries" || b.posted_hold > 0);
        // Highest first; ties keep PARTS order (a stable sort).
        utilisation.sort_by(|a, b| b.1.total_cmp(&a.1));
        let limit = limit_of(&utilisation);
        // Latency: one transfer at a time, each on an idle path.
        let mut latencies = Vec::new();
        for (j, &addr) in addresses.iter().take(LATENCY_RUNS as usize).enumerate() {
            let mut idle = self.fresh_path();
            idle.line_count = j as u64 * lines.div_ceil(n.max(1));
            // Each lone transfer finds the caches as the bandwidth run left them, and its own
            // place in the leaf lines' hit pattern (as `line_count` gives it in the data's).
            idle.mmu = path.mmu.as_ref().map(|m| Mmu {
                translator: m.translator.warm_copy(),
                leaf_reads: m.leaf_reads + j as u64 * m.leaf_reads.div_ceil(n.max(1)).max(1),
                ..*m
            });
            let mut split = LatencySplit::default();
            let t = if point.then_read {
                // The write alone, then the read on its context; the read finds the lines the
                // write just left in its home's cache on a host whose writes allocate there,
                // whatever the window (the corpus's write-then-read latencies are flat over
                // windows to 64 MiB, local and remote), else in DRAM.
                self.transfer(&mut idle, point, addr, hit_share, None);
                let k = idle.contexts.len();
                idle.next_context = (idle.next_context + k - 1) % k;
                let read = DmaPoint {
                    direction: Direction::Read,
                    then_read: false,
                    ..*point
                };
                let warm = if self.memory.write_allocate {
                    (1, 1)
                } else {
                    (0, 1)
                };
                // The read goes once the write's data has left, not when its command
                // completes (the hold frees the write's context for another transfer).
                let sent =
                    idle.contexts[idle.next_context] - Ps::from_ns(self.engine.write_hold_ns).0;
                idle.contexts[idle.next_context] = sent;
                split.before_ps = sent;
                self.transfer(&mut idle, &read, addr, warm, Some(&mut split))
            } else {
                let (this, share) = nth(j);
                self.transfer(&mut idle, this, addr, share, Some(&mut split))
            };
            latencies.push((t.done, j, split));
        }
        // The median transfer, and where its time went.
        latencies.sort_unstable_by_key(|&(done, j, _)| (done, j));
        let (median, _, parts) = latencies.swap_remove(latencies.len() / 2);
        let latency_ns = median as f64 / 1e3;
        Ok(DmaRecord {
            platform: self.platform.to_string(),
            point: *point,
            bandwidth_gbit_s,
            latency_ns,
            transactions_per_s,
            limit,
            utilisation,
            lines_per_transfer: lines as f64 / n as f64,
            tlps_per_transfer: tlps as f64 / n as f64,
            latency_parts: [
                point
                    .then_read
                    .then_some(("the write before it", parts.before_ps)),
                Some(("set-up", parts.setup_ps)),
                Some(("device", parts.device_ps)),
                Some(("request wire", parts.request_ps)),
                translated.map(|_| ("translation", parts.translation_ps)),
                Some(("root complex and memory", parts.memory_ps)),
                Some(("data wire", parts.data_ps)),
            ]
            .into_iter()
            .flatten()
            .map(|(part, ps)| (part, ps as f64 / 1e3))
            .collect(),
            iotlb_miss_rate: translated.map(|t| t.0),
            walk_reads_per_transfer: translated.map(|t| t.1),
        })
    }

    /// With the IOMMU on, a translator for the point's pages, warmed by one pass of the run's
    /// requests (and the rings'); none with it off.
    fn warm_mmu(&self, point: &DmaPoint, addresses: &[u64]) -> Result<Option<Mmu>> {
        if point.iommu == IommuMode::Off {
            return Ok(None);
        }
        let hw = self.iommu.ok_or_else(|| SimError::NotDescribed {
            platform: self.platform.to_string(),
            what: "an IOMMU's translation hardware ([iommu_hw]) for --iommu on".into(),
        })?;
        let mut translator = Translator::new(hw, point.page_bytes)?;
        let g = self.engine.granularity_bytes;
        let mut spans = Vec::new();
        for &addr in addresses {
            let end = addr + point.size_bytes;
            self.link
                .request_spans_into(point.direction, addr, end, g, &mut spans);
            for &(at, _) in &spans {
                translator.translate(at, 0, |start, _| start);
            }
            for ring in [RING_BASE, RING_BASE + (1 << 20)] {
                translator.translate(ring, 0, |start, _| start);
            }
        }
        translator.reset_timing();
        // The leaf tables of the window (one entry per page, at least a line), read in the
        // data's order.
        let pages = point.window_bytes.div_ceil(point.page_bytes);
        let table_bytes = (pages * ENTRY_BYTES).max(self.memory.line_bytes);
        let leaf_share =
            self.memory
                .hit_share(false, table_bytes, Home::Local, Cache::Warm, point.access);
        Ok(Some(Mmu {
            translator,
            coherent: hw.walk_coherent,
            leaf_share,
            leaf_reads: 0,
            data_lookups: 0,
            data_misses: 0,
        }))
    }

    /// The request to `addr` that reached the root complex at `arrival` is translated (with
    /// the IOMMU on); returns when it may go on to memory. Table lines come from the LLC, or
    /// from DRAM (taking its bandwidth) where they miss or the walker does not snoop. `data`:
    /// a request of the transfer's data, not of a ring.
    ///
    /// The root complex then serves requests in the order they arrived: a request waiting for
    /// its walk holds the requests behind it (their walks still overlap, up to the walkers),
    /// as posted writes must stay in order and as a translation pipeline without hit-under-miss
    /// would.
    fn translate(&self, path: &mut Path, addr: u64, arrival: u64, data: bool) -> u64 {
        let Some(mut mmu) = path.mmu.take() else {
            return arrival;
        };
        let misses_before = mmu.translator.stats().misses;
        let leaf = mmu.translator.leaf_level();
        let m = self.memory;
        let (llc_ps, dram_ps) = (Ps::from_ns(m.llc_ns).0, Ps::from_ns(m.dram_ns).0);
        let ready = mmu.translator.translate(addr, arrival, |start, level| {
            let hit = mmu.coherent
                && (level != leaf || {
                    let k = mmu.leaf_reads;
                    mmu.leaf_reads += 1;
                    line_hits(k, mmu.leaf_share)
                });
            if hit {
                return start + llc_ps;
            }
            // The line counts in DRAM's busy time but does not queue behind the data lines of
            // requests issued earlier and served later (a walk's reads are few, and the cursor
            // here is kept in issue order, not in time order).
            path.busy.dram += u128::from(self.dram_line_ps);
            start + dram_ps
        });
        if data {
            mmu.data_lookups += 1;
            mmu.data_misses += mmu.translator.stats().misses - misses_before;
        }
        path.mmu = Some(mmu);
        ready
    }

    fn tags(&self) -> u64 {
        self.link.params().max_outstanding_read_requests
    }

    fn fresh_path(&self) -> Path {
        Path {
            contexts: vec![0; self.engine.contexts.max(1) as usize],
            tags: vec![0; self.tags() as usize],
            posted: vec![0; self.memory.posted_writes.max(1) as usize],
            ports: vec![0; self.engine.data_ports.max(1) as usize],
            ..Path::default()
        }
    }

    /// The transfers' host addresses: sequential slots through the window, or the same slots
    /// in a fixed pseudo-random order; each transfer starts `offset` into its slot. Slots are
    /// the least power of two (at least a line) that holds size plus offset, so they tile
    /// 4 KiB blocks: a transfer crosses a 4 KiB boundary only when size plus offset exceeds
    /// 4 KiB, never because of where its slot happens to fall.
    fn addresses(&self, point: &DmaPoint) -> Vec<u64> {
        let line = self.memory.line_bytes;
        let stride = (point.size_bytes + point.offset_bytes)
            .next_power_of_two()
            .max(line);
        let slots = (point.window_bytes / stride).max(1);
        let mut n = (RUN_BYTES / point.size_bytes).clamp(MIN_RUN_TRANSFERS, MAX_RUN_TRANSFERS);
        if point.access == Access::Seq {
            let cycle =
                (point.window_bytes.min(WINDOW_RUN_BYTES) / stride).min(MAX_WINDOW_TRANSFERS);
            n = n.max(cycle);
        }
        let n = n.max(2);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|j| {
                let slot = match point.access {
                    Access::Seq => j % slots,
                    Access::Random => {
                        // splitmix64: a fixed sequence, so that runs are bit-identical.
                        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                        let mut z = state;
                        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                        (z ^ (z >> 31)) % slots
                    }
                };
                slot * stride + point.offset_bytes
            })
            .collect()
    }

    /// One transfer from the engine's set-up to its last byte; updates `path`.
    fn transfer(
        &self,
        path: &mut Path,
        point: &DmaPoint,
        addr: u64,
        hit_share: (u64, u64),
        mut split: Option<&mut LatencySplit>,
    ) -> Transferred {
        let setup = Ps::from_ns(self.engine.setup_ns).0;
        // The queue is full: the transfer starts when its context is free, and its set-up
        // overlaps whatever the other contexts are doing.
        let context = path.next_context;
        path.next_context = (context + 1) % path.contexts.len();
        let start = path.contexts[context];
        let mut ready = start + setup;
        let port_ps = self.engine.port_ps(addr, point.size_bytes);
        let mut own_ps = 0;
        if point.direction == Direction::Write {
            // A write's data is fetched from the device's memory and crosses its data port
            // whole before the first request goes out.
            let fetched = ready;
            // A misaligned device offset costs the fetch an extra word and a shift, on the
            // port.
            let skew = if self.misaligned(point) {
                Ps::from_ns(self.engine.misaligned_fetch_ns).0
            } else {
                0
            };
            if let Some(p) = port_ps {
                let out = take_port(path, fetched, p + skew);
                own_ps = out - ready;
                ready = out;
            } else {
                own_ps = fetched + skew - ready;
                ready = fetched + skew;
            }
        }
        let end = addr + point.size_bytes;
        let mut spans = std::mem::take(&mut path.spans);
        self.link.request_spans_into(
            point.direction,
            addr,
            end,
            self.engine.granularity_bytes,
            &mut spans,
        );
        let remote = point.memory == Home::Remote;
        let mut done = 0u64;
        let mut released = ready;
        let mut lines = 0u64;
        for &(at, upto) in &spans {
            let serve = |path: &mut Path| {
                let k = path.line_count;
                path.line_count += 1;
                LineService {
                    hit: line_hits(k, hit_share),
                }
            };
            lines += lines_touched(at, upto - at, self.memory.line_bytes);
            let span = (at, upto);
            let s = split.as_deref_mut();
            let finished = match point.direction {
                // A read's context is held until its data is back in the engine.
                Direction::Read => {
                    let back = self.read_request(path, ready, true, span, remote, serve, s);
                    released = released.max(back);
                    back
                }
                // A write's, until its data has left the device.
                Direction::Write => {
                    let (landed, sent) =
                        self.write_request(path, ready, true, span, remote, serve, s);
                    released = released.max(sent);
                    landed
                }
            };
            done = done.max(finished);
        }
        if point.direction == Direction::Write {
            // The engine completes a write's command some time after its data has left: the
            // context stays held that long (the transfer's own latency does not wait for it).
            released += Ps::from_ns(self.engine.write_hold_ns).0;
        }
        if point.direction == Direction::Read {
            // A read's data crosses the data port whole once its last completion is back,
            // and is stored with a read-modify-write of its partial words where its device
            // offset is not a word multiple (on the port where there is one).
            let store = if self.misaligned(point) {
                Ps::from_ns(self.engine.misaligned_store_ns).0
            } else {
                0
            };
            let out = match port_ps {
                Some(p) => take_port(path, done, p + store),
                None => done + store,
            };
            own_ps = out - done;
            done = out;
            released = released.max(done);
        }
        path.contexts[context] = released;
        path.busy.context_hold += u128::from(released - start);
        if let Some(s) = split {
            s.setup_ps = setup;
            s.device_ps += own_ps;
            let known = s.request_ps + s.translation_ps + s.data_ps + s.device_ps;
            s.memory_ps = done.saturating_sub(start + setup + known);
        }
        let tlps = spans.len() as u64;
        path.spans = spans;
        Transferred { done, lines, tlps }
    }

    /// Whether the point's device offset is not a multiple of the device memory's word.
    fn misaligned(&self, point: &DmaPoint) -> bool {
        !point
            .device_offset_bytes
            .is_multiple_of(self.engine.device_word_bytes.max(1))
    }

    /// The engine issues one request once its transfer is `ready`, its issue port and (for a
    /// read) a tag are free, and goes on to the next: the request reaches the link
    /// `request_path_ns` later, and the link sends requests in issue order as it is free (it
    /// queues them); a posted write (no tag) also waits for a free posted entry at the root
    /// port (the posted credits it advertises). Returns the issue time and the request's
    /// arrival at the root complex.
    fn issue(&self, path: &mut Path, ready: u64, wire_ps: u64, needs_tag: bool) -> (u64, u64) {
        let mut at = path.engine.max(ready);
        if needs_tag {
            at = at.max(path.tags[path.next_tag]);
        }
        let issue_ps = Ps::from_ns(self.engine.issue_ns).0;
        path.engine = at + issue_ps;
        path.busy.engine += u128::from(issue_ps);
        let mut start = (at + Ps::from_ns(self.engine.request_path_ns).0).max(path.up);
        if !needs_tag {
            start = start.max(path.posted[path.next_posted]);
        }
        path.up = start + wire_ps;
        path.busy.up += u128::from(wire_ps);
        (at, path.up)
    }

    /// The root complex and memory serve the lines of the request `[at, upto)` that arrived at
    /// `arrival`; a write's first or last line written only in part is read and merged.
    /// Returns when each line is done, in order.
    #[allow(clippy::too_many_arguments)]
    fn serve_lines(
        &self,
        path: &mut Path,
        arrival: u64,
        (at, upto): (u64, u64),
        remote: bool,
        write: bool,
        mut service: impl FnMut(&mut Path) -> LineService,
    ) -> Vec<u64> {
        let m = self.memory;
        let n = lines_touched(at, upto - at, m.line_bytes);
        let ends = (at % m.line_bytes != 0, upto % m.line_bytes != 0);
        let line_ps = Ps::from_ns(m.line_ns).0;
        let partial_ps = Ps::from_ns(m.partial_line_ns).0;
        let mut header_ps = Ps::from_ns(m.request_ns).0;
        let first = arrival + Ps::from_ns(m.root_complex_ns).0;
        let allocates = write && m.write_allocate && !remote;
        // The path's buffer, handed back by the caller once read (one allocation a run).
        let mut ready = std::mem::take(&mut path.lines);
        ready.clear();
        for i in 0..n {
            let LineService { hit } = service(path);
            // A line touched only in part costs the root complex more; one written only in
            // part is also read and merged: one more line of work.
            let partial = (i == 0 && ends.0) || (i + 1 == n && ends.1);
            let merge = write && partial;
            let uses = if merge { 2 } else { 1 };
            // The request's header goes through the pipeline with its first line.
            let own = header_ps + line_ps + if partial { partial_ps } else { 0 };
            header_ps = 0;
            let occupancy = own + if merge { line_ps } else { 0 };
            let start = first.max(path.root_complex);
            path.root_complex = start + occupancy;
            path.busy.root_complex += u128::from(occupancy);
            let mut t = start + own;
            if !hit {
                // From DRAM, or (a write allocated in the LLC) evicting a line to DRAM.
                let at = t.max(path.dram);
                path.dram = at + self.dram_line_ps * uses;
                path.busy.dram += u128::from(self.dram_line_ps * uses);
                t = at;
            }
            if remote {
                let at = t.max(path.socket);
                path.socket = at + self.socket_line_ps;
                path.busy.socket += u128::from(self.socket_line_ps);
                t = at + Ps::from_ns(m.socket_link_ns).0;
            }
            let access_ns = match (write, hit, merge) {
                (false, true, _) => m.llc_ns,
                (false, false, _) => m.dram_ns,
                // A written line is done when it is in the cache or, without allocation, at
                // the memory controller; a merge first reads the line.
                (true, true, false) => m.llc_ns,
                (true, true, true) => 2 * m.llc_ns,
                (true, false, false) if allocates => m.llc_ns,
                (true, false, false) => m.dram_ns,
                (true, false, true) if allocates => m.dram_ns + m.llc_ns,
                (true, false, true) => m.dram_ns + self.link.params().read_modify_write_ns,
            };
            path.drained = path.drained.max(t);
            ready.push(t + Ps::from_ns(access_ns).0);
        }
        ready
    }

    #[allow(clippy::too_many_arguments)]
    fn read_request(
        &self,
        path: &mut Path,
        ready: u64,
        data: bool,
        (at, upto): (u64, u64),
        remote: bool,
        service: impl FnMut(&mut Path) -> LineService,
        split: Option<&mut LatencySplit>,
    ) -> u64 {
        let request_ps = self.link.tlp_time(request_header_bytes(at), 0).0;
        let (issued, reached) = self.issue(path, ready, request_ps, true);
        let arrival = self.translate(path, at, reached, data);
        let ready = self.serve_lines(path, arrival, (at, upto), remote, false, service);
        let line = self.memory.line_bytes;
        let first_line = at / line;
        let mut last = arrival;
        let mut data_ps = 0;
        for (c_at, c_upto) in self.link.completion_spans(at, upto) {
            let last_line = ((c_upto - 1) / line - first_line) as usize;
            let data_ready = ready[last_line.min(ready.len() - 1)];
            let wire = self
                .link
                .tlp_time(HEADER_3DW_BYTES, payload_bytes(c_at, c_upto))
                .0;
            let start = path.down.max(data_ready);
            path.down = start + wire;
            path.busy.down += u128::from(wire);
            data_ps += wire;
            last = path.down;
        }
        path.lines = ready;
        // The last completion's data reaches the engine through the device's receive side;
        // the tag is free again then.
        let device_ps = Ps::from_ns(self.engine.request_path_ns + self.engine.completion_path_ns).0;
        last += Ps::from_ns(self.engine.completion_path_ns).0;
        let tag = path.next_tag;
        path.tags[tag] = last;
        path.next_tag = (tag + 1) % path.tags.len();
        path.busy.tag_hold += u128::from(last - issued);
        if let Some(s) = split {
            if s.request_ps == 0 {
                s.request_ps = request_ps;
                s.device_ps = device_ps;
            }
            s.data_ps += data_ps;
            s.translation_ps = s.translation_ps.max(arrival - reached);
        }
        last
    }

    /// One posted write of `[at, upto)`; returns when its lines are in memory and when its
    /// data had left the device.
    #[allow(clippy::too_many_arguments)]
    fn write_request(
        &self,
        path: &mut Path,
        ready: u64,
        data: bool,
        (at, upto): (u64, u64),
        remote: bool,
        service: impl FnMut(&mut Path) -> LineService,
        split: Option<&mut LatencySplit>,
    ) -> (u64, u64) {
        let wire = self.write_wire_ps(at, upto);
        let (_, reached) = self.issue(path, ready, wire, false);
        let arrival = self.translate(path, at, reached, data);
        let lines = self.serve_lines(path, arrival, (at, upto), remote, true, service);
        let committed = lines.iter().copied().max().unwrap_or(arrival);
        path.lines = lines;
        // The write's posted credit is taken when it goes on the link and comes back when its
        // lines are committed.
        let k = path.next_posted;
        path.posted[k] = committed;
        path.next_posted = (k + 1) % path.posted.len();
        path.busy.posted_hold += u128::from(committed - (reached - wire));
        if let Some(s) = split {
            s.data_ps += wire;
            s.device_ps = Ps::from_ns(self.engine.request_path_ns).0;
            s.translation_ps = s.translation_ps.max(arrival - reached);
        }
        (committed, reached)
    }

    /// Every `descriptors_per_fetch` transfers the engine reads that many descriptors from a
    /// ring the driver just wrote (lines in the local LLC); the transfer does not wait for it
    /// (the engine prefetches).
    fn descriptor_fetch(&self, path: &mut Path, j: u64) {
        let e = self.engine;
        if e.descriptor_bytes == 0 || !j.is_multiple_of(e.descriptors_per_fetch) {
            return;
        }
        let bytes = e.descriptor_bytes * e.descriptors_per_fetch;
        let at = RING_BASE + ((j / e.descriptors_per_fetch) * bytes) % 4096;
        for span in self
            .link
            .request_spans(Direction::Read, at, at + bytes, 4096)
        {
            self.read_request(
                path,
                0,
                false,
                span,
                false,
                |_| LineService { hit: true },
                None,
            );
        }
    }

    /// Every `completions_per_write` transfers the engine writes that many completion records
    /// to a ring in local memory (lines in the LLC). The write follows the transfer's data but
    /// holds up no later transfer, so it is charged where the run stands: its wire time on the
    /// upstream direction and its lines at the root complex.
    fn completion_write(&self, path: &mut Path, j: u64) {
        let e = self.engine;
        if e.completion_bytes == 0 || !(j + 1).is_multiple_of(e.completions_per_write) {
            return;
        }
        let bytes = e.completion_bytes * e.completions_per_write;
        let at = RING_BASE + (1 << 20) + ((j / e.completions_per_write) * bytes) % 4096;
        for span in self
            .link
            .request_spans(Direction::Write, at, at + bytes, 4096)
        {
            let wire = self.write_wire_ps(span.0, span.1);
            path.up += wire;
            path.busy.up += u128::from(wire);
            let arrival = self.translate(path, span.0, path.up, false);
            path.lines = self.serve_lines(path, arrival, span, false, true, |_| LineService {
                hit: true,
            });
        }
    }

    /// The wire time of one MWr carrying `[at, upto)`.
    fn write_wire_ps(&self, at: u64, upto: u64) -> u64 {
        self.link
            .tlp_time(request_header_bytes(at), payload_bytes(at, upto))
            .0
    }
}

/// The parts that are held over a transfer's or a request's whole round trip rather than busy
/// serving it: when a server ahead of them is saturated, they fill up waiting for it.
const HOLDERS: [&str; 3] = ["engine contexts", "tags", "posted entries"];

/// A server's share at which it is taken as saturated (a finite run's shares fall a little
/// short of 1 for a part that limits it).
const SATURATED: f64 = 0.97;

/// The part that limits a run, from its utilisation (highest first): a saturated server (the
/// issue port, the link, the root complex, DRAM, the socket link, the walkers) when there is
/// one, since the contexts and tags held in front of it are full because of it; else the
/// root port's posted entries when they are full (the writes' contexts, released only once
/// their data has left the device, then fill up waiting for them); otherwise the busiest part,
/// which is then a holder when latency sets the rate (Little's law).
fn limit_of(utilisation: &[(&'static str, f64)]) -> &'static str {
    let full = |part: &str| {
        utilisation
            .iter()
            .any(|(p, share)| *p == part && *share >= SATURATED)
    };
    utilisation
        .iter()
        .find(|(part, share)| !HOLDERS.contains(part) && *share >= SATURATED)
        .map(|(part, _)| *part)
        .or_else(|| full("posted entries").then_some("posted entries"))
        .unwrap_or(utilisation[0].0)
}

/// The steady state's time per transfer over `done` (finish times, non-decreasing): the
/// least-squares slope of finish time over transfer number. Unlike the span from the first to
/// the last, it does not move with the jitter of the two ends (one IOTLB miss at the first
/// transfer would shorten the span by its walk).
fn steady_ps_per_transfer(done: &[u64]) -> f64 {
    let n = done.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let first = done[0];
    let mean_y = done.iter().map(|&t| (t - first) as f64).sum::<f64>() / n;
    let (mut cov, mut var) = (0.0, 0.0);
    for (i, &t) in done.iter().enumerate() {
        let dx = i as f64 - mean_x;
        cov += dx * ((t - first) as f64 - mean_y);
        var += dx * dx;
    }
    (cov / var.max(1.0)).max(1.0)
}

/// One transfer's outcome.
struct Transferred {
    done: u64,
    lines: u64,
    tlps: u64,
}

/// Where a lone transfer's latency went, ps.
#[derive(Default, Clone, Copy)]
struct LatencySplit {
    /// Before the transfer timed: a write-then-read point's write, to its data sent.
    before_ps: u64,
    setup_ps: u64,
    /// The device's own side of the round trip (to the link and, for a read, back).
    device_ps: u64,
    request_ps: u64,
    /// The longest wait of one request for its translation.
    translation_ps: u64,
    memory_ps: u64,
    data_ps: u64,
}

/// The data port free first (the lowest-numbered among equals) moves `p` ps of data from
/// `from` on; returns when it is done.
fn take_port(path: &mut Path, from: u64, p: u64) -> u64 {
    if path.port_gaps {
        return take_port_gap(path, from, p);
    }
    let (k, &free) = path
        .ports
        .iter()
        .enumerate()
        .min_by_key(|&(k, &t)| (t, k))
        .expect("a path has at least one data port");
    let out = free.max(from) + p;
    path.ports[k] = out;
    path.busy.port += u128::from(p);
    out
}

/// [`take_port`] in time order: each port keeps its bookings, and `p` ps from `from` on take
/// the first gap that holds them, on the port where that gap starts first (the lowest-numbered
/// among equals). Where reads and writes alternate, a write's fetch, booked after an earlier
/// read's store, happens long before it; in issue order it would wait for that store, and
/// every transfer for the one before it. Bookings that end before every context is free are
/// forgotten: no later transfer starts before that.
fn take_port_gap(path: &mut Path, from: u64, p: u64) -> u64 {
    let horizon = path.contexts.iter().copied().min().unwrap_or(0);
    let mut best: Option<(u64, usize, usize)> = None;
    for (k, slots) in path.port_slots.iter_mut().enumerate() {
        // Bookings are disjoint and in time order, so their ends are in order too.
        let gone = slots.partition_point(|&(_, end)| end <= horizon);
        slots.drain(..gone);
        let mut start = from;
        let mut at = slots.len();
        for (i, &(s, e)) in slots.iter().enumerate() {
            if e <= start {
                continue;
            }
            if s >= start + p {
                at = i;
                break;
            }
            start = e;
        }
        if best.is_none_or(|(b, _, _)| start < b) {
            best = Some((start, k, at));
        }
    }
    let (start, k, at) = best.expect("a path has at least one data port");
    path.port_slots[k].insert(at, (start, start + p));
    path.ports[k] = path.ports[k].max(start + p);
    path.busy.port += u128::from(p);
    start + p
}

/// Measure every point on `platform`, counting points done on `progress`; stops with
/// [`crate::SimError::Interrupted`] at the next point once `progress` is cancelled.
pub fn sweep(
    platform: &Platform,
    points: &[DmaPoint],
    progress: &Progress,
) -> Result<Vec<DmaRecord>> {
    let model = DeviceDma::new(platform)?;
    let mut out = Vec::with_capacity(points.len());
    progress.start(points.len() as u64);
    for (i, p) in points.iter().enumerate() {
        progress.check()?;
        out.push(model.measure(p)?);
        progress.set(i as u64 + 1);
    }
    Ok(out)
}

/// A point from a JSON-like value with the fields of [`DmaPoint`] (`direction` is `read` or
/// `write`; `access` `seq` or `random`; `memory` `local` or `remote`; `cache` `warm` or
/// `cold`); errors name the field. Ranges are checked when the point is measured.
pub fn point_from_value(value: serde_json::Value) -> Result<DmaPoint> {
    crate::error::from_json("point", value)
}
