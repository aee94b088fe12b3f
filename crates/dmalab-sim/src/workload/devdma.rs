//! Device DMA microbenchmarks (`dmalab bench dma`): a device's DMA engine reading or writing
//! host memory over its PCIe link, through the root complex and the memory path in cache lines.
//!
//! Each point is one transfer size at one host offset from a line boundary, over a buffer
//! window walked sequentially or at random, with memory local or remote and the cache warm or
//! cold. Two measurements:
//! - **bandwidth**: the engine keeps its queue full; transfers follow each other as the engine,
//!   the tags, both directions of the link, the root complex's line pipeline, DRAM and the
//!   socket link allow. The rate is taken over the second half of a run long enough to reach
//!   steady state, and the part with the highest utilisation over the run is named as the limit;
//! - **latency**: one transfer alone on an idle path, from the engine's set-up to the last byte
//!   (at the device for a read; in memory for a write), the median over a run of transfers
//!   (warm lines that only partly fit the cache make single transfers differ).
//!
//! Descriptor fetches and completion records take their link, tag and line time in the
//! bandwidth run; latency is the data transfer's own, as a device timing its DMA would see it.

use crate::bus::device::DeviceEngine;
use crate::bus::memory::{line_hits, lines_touched, Access, Cache, Home, MemoryPath};
use crate::bus::pcie::{payload_bytes, request_header_bytes, PcieLink, HEADER_3DW_BYTES};
use crate::bus::trace::Direction;
use crate::config::platform::Platform;
use crate::error::{invalid_arg, Result};
use crate::units::Ps;
use serde::{Deserialize, Serialize};

/// The largest transfer a point may have (16 MiB).
pub const MAX_SIZE_BYTES: u64 = 1 << 24;

/// The largest buffer window (1 TiB).
pub const MAX_WINDOW_BYTES: u64 = 1 << 40;

/// Bytes moved in a bandwidth run (at least), so that the tags and pipelines reach steady state.
const RUN_BYTES: u64 = 1 << 20;

/// Transfers in a bandwidth run: at least this many, and at most [`MAX_RUN_TRANSFERS`].
const MIN_RUN_TRANSFERS: u64 = 256;
const MAX_RUN_TRANSFERS: u64 = 32_768;

/// Transfers whose latency is measured one at a time (the median is reported).
const LATENCY_RUNS: u64 = 33;

/// Where descriptor rings and completion records live: an address far from any data buffer,
/// line aligned.
const RING_BASE: u64 = 1 << 40;

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
        let least = self.size_bytes + self.offset_bytes;
        if !(least..=MAX_WINDOW_BYTES).contains(&self.window_bytes) {
            return Err(invalid_arg(
                "window_bytes",
                self.window_bytes,
                format!("{least}..={MAX_WINDOW_BYTES} (at least size + offset)"),
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
    /// Where one lone transfer's latency goes, ns: set-up, the request's wire time, the root
    /// complex and memory, the data's wire time.
    pub latency_parts: Vec<(&'static str, f64)>,
}

/// The parts a transfer uses, named as reports name them.
pub const PARTS: [&str; 7] = [
    "device engine",
    "link",
    "link (requests)",
    "tags",
    "root complex",
    "memory",
    "socket link",
];

/// Busy time per part, in ps, over a run.
#[derive(Default)]
struct Busy {
    engine: u128,
    /// The link's direction from the device to the host (requests, written data).
    up: u128,
    /// From the host to the device (completions with data).
    down: u128,
    tag_hold: u128,
    root_complex: u128,
    dram: u128,
    socket: u128,
}

/// The state of the path's resources during a run: when each is free next.
#[derive(Default)]
struct Path {
    engine: u64,
    up: u64,
    down: u64,
    tags: Vec<u64>,
    next_tag: usize,
    root_complex: u64,
    dram: u64,
    socket: u64,
    line_count: u64,
    /// When the last line so far left the last shared part it used (before its own access
    /// time): a bandwidth run of writes is timed by this, which does not jitter with each
    /// line's hit or miss.
    drained: u64,
    busy: Busy,
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
    dram_line_ps: u64,
    socket_line_ps: u64,
}

impl<'a> DeviceDma<'a> {
    /// The model for `platform`, or an error naming what it lacks.
    pub fn new(platform: &'a Platform) -> Result<DeviceDma<'a>> {
        let (link, memory, engine) = platform.device_dma_path()?;
        Ok(DeviceDma::from_parts(&platform.name, link, memory, engine))
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
            dram_line_ps: memory.line_occupancy_ps(memory.dram_bytes_per_us),
            socket_line_ps: memory.line_occupancy_ps(memory.socket_link_bytes_per_us),
        }
    }

    /// Measure one point.
    pub fn measure(&self, point: &DmaPoint) -> Result<DmaRecord> {
        point.validate()?;
        let addresses = self.addresses(point);
        let hit_share = self.memory.hit_share(
            point.direction == Direction::Write,
            point.window_bytes,
            point.memory,
            point.cache,
            point.access,
        );
        // Bandwidth: a full queue.
        let n = addresses.len() as u64;
        let mut path = self.fresh_path();
        let mut done = Vec::with_capacity(addresses.len());
        let (mut lines, mut tlps) = (0u64, 0u64);
        for (j, &addr) in addresses.iter().enumerate() {
            self.descriptor_fetch(&mut path, j as u64);
            let t = self.transfer(&mut path, point, addr, hit_share, None);
            lines += t.lines;
            tlps += t.tlps;
            done.push(match point.direction {
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
        let half = done.len() / 2;
        let span_ps = done[done.len() - 1].saturating_sub(done[half - 1]).max(1);
        let transfers = (done.len() - half) as f64;
        let transactions_per_s = transfers * 1e12 / span_ps as f64;
        let bandwidth_gbit_s = transactions_per_s * point.size_bytes as f64 * 8.0 / 1e9;
        let elapsed = [
            done[done.len() - 1],
            path.engine,
            path.up,
            path.down,
            path.root_complex,
            path.dram,
            path.socket,
        ]
        .into_iter()
        .max()
        .unwrap_or(1)
        .max(1) as f64;
        let tags = self.tags() as f64;
        let b = &path.busy;
        let (data, requests) = match point.direction {
            Direction::Read => (b.down, b.up),
            Direction::Write => (b.up, b.down),
        };
        // In the order of PARTS.
        let shares = [
            b.engine as f64 / elapsed,
            data as f64 / elapsed,
            requests as f64 / elapsed,
            b.tag_hold as f64 / elapsed / tags,
            b.root_complex as f64 / elapsed,
            b.dram as f64 / elapsed,
            b.socket as f64 / elapsed,
        ];
        let mut utilisation: Vec<(&'static str, f64)> = PARTS.into_iter().zip(shares).collect();
        if point.direction == Direction::Write {
            utilisation.retain(|(part, _)| *part != "tags" || b.tag_hold > 0);
        }
        // Highest first; ties keep PARTS order (a stable sort).
        utilisation.sort_by(|a, b| b.1.total_cmp(&a.1));
        let limit = utilisation[0].0;
        // Latency: one transfer at a time, each on an idle path.
        let mut latencies = Vec::new();
        let mut parts = None;
        for (j, &addr) in addresses.iter().take(LATENCY_RUNS as usize).enumerate() {
            let mut idle = self.fresh_path();
            idle.line_count = j as u64 * lines.div_ceil(n.max(1));
            let mut split = LatencySplit::default();
            let t = self.transfer(&mut idle, point, addr, hit_share, Some(&mut split));
            latencies.push(t.done);
            parts.get_or_insert(split);
        }
        latencies.sort_unstable();
        let latency_ns = latencies[latencies.len() / 2] as f64 / 1e3;
        let parts = parts.unwrap_or_default();
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
            latency_parts: vec![
                ("set-up", parts.setup_ps as f64 / 1e3),
                ("request wire", parts.request_ps as f64 / 1e3),
                ("root complex and memory", parts.memory_ps as f64 / 1e3),
                ("data wire", parts.data_ps as f64 / 1e3),
            ],
        })
    }

    fn tags(&self) -> u64 {
        self.link.params().max_outstanding_read_requests
    }

    fn fresh_path(&self) -> Path {
        Path {
            tags: vec![0; self.tags() as usize],
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
        let n = (RUN_BYTES / point.size_bytes)
            .clamp(MIN_RUN_TRANSFERS, MAX_RUN_TRANSFERS)
            .max(2);
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
        let start = path.engine;
        path.engine += setup;
        path.busy.engine += u128::from(setup);
        let end = addr + point.size_bytes;
        let spans =
            self.link
                .request_spans(point.direction, addr, end, self.engine.granularity_bytes);
        let remote = point.memory == Home::Remote;
        let mut done = 0u64;
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
            let finished = match point.direction {
                Direction::Read => {
                    self.read_request(path, (at, upto), remote, serve, split.as_deref_mut())
                }
                Direction::Write => {
                    self.write_request(path, (at, upto), remote, serve, split.as_deref_mut())
                }
            };
            done = done.max(finished);
        }
        if let Some(s) = split {
            s.setup_ps = setup;
            s.memory_ps = done.saturating_sub(start + setup + s.request_ps + s.data_ps);
        }
        Transferred {
            done,
            lines,
            tlps: spans.len() as u64,
        }
    }

    /// The engine issues one request when it and (for a read) a tag are free, and goes on to
    /// the next: the link sends requests in issue order as it is free (it queues them; flow
    /// control is not modelled). Returns the issue time and the request's arrival at the root
    /// complex.
    fn issue(&self, path: &mut Path, wire_ps: u64, needs_tag: bool) -> (u64, u64) {
        let mut at = path.engine;
        if needs_tag {
            at = at.max(path.tags[path.next_tag]);
        }
        let issue_ps = Ps::from_ns(self.engine.issue_ns).0;
        path.engine = at + issue_ps;
        path.busy.engine += u128::from(issue_ps);
        let start = at.max(path.up);
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
        let first = arrival + Ps::from_ns(m.root_complex_ns).0;
        let allocates = write && m.write_allocate && !remote;
        let mut ready = Vec::with_capacity(n as usize);
        for i in 0..n {
            let LineService { hit } = service(path);
            // A line written only in part is read and merged: one more line of work.
            let merge = write && ((i == 0 && ends.0) || (i + 1 == n && ends.1));
            let uses = if merge { 2 } else { 1 };
            let start = first.max(path.root_complex);
            path.root_complex = start + line_ps * uses;
            path.busy.root_complex += u128::from(line_ps * uses);
            let mut t = start + line_ps;
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

    fn read_request(
        &self,
        path: &mut Path,
        (at, upto): (u64, u64),
        remote: bool,
        service: impl FnMut(&mut Path) -> LineService,
        split: Option<&mut LatencySplit>,
    ) -> u64 {
        let request_ps = self.link.tlp_time(request_header_bytes(at), 0).0;
        let (issued, arrival) = self.issue(path, request_ps, true);
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
        let tag = path.next_tag;
        path.tags[tag] = last;
        path.next_tag = (tag + 1) % path.tags.len();
        path.busy.tag_hold += u128::from(last - issued);
        if let Some(s) = split {
            if s.request_ps == 0 {
                s.request_ps = request_ps;
            }
            s.data_ps += data_ps;
        }
        last
    }

    fn write_request(
        &self,
        path: &mut Path,
        (at, upto): (u64, u64),
        remote: bool,
        service: impl FnMut(&mut Path) -> LineService,
        split: Option<&mut LatencySplit>,
    ) -> u64 {
        let wire = self.write_wire_ps(at, upto);
        let (_, arrival) = self.issue(path, wire, false);
        let ready = self.serve_lines(path, arrival, (at, upto), remote, true, service);
        if let Some(s) = split {
            s.data_ps += wire;
        }
        ready.into_iter().max().unwrap_or(arrival)
    }

    /// Every `descriptors_per_fetch` transfers the engine reads that many descriptors from a
    /// ring the driver just wrote (lines in the local LLC); the transfer does not wait for it
    /// (the engine prefetches).
    fn descriptor_fetch(&self, path: &mut Path, j: u64) {
        let e = self.engine;
        if e.descriptor_bytes == 0 || j % e.descriptors_per_fetch != 0 {
            return;
        }
        let bytes = e.descriptor_bytes * e.descriptors_per_fetch;
        let at = RING_BASE + ((j / e.descriptors_per_fetch) * bytes) % 4096;
        for span in self
            .link
            .request_spans(Direction::Read, at, at + bytes, 4096)
        {
            self.read_request(path, span, false, |_| LineService { hit: true }, None);
        }
    }

    /// Every `completions_per_write` transfers the engine writes that many completion records
    /// to a ring in local memory (lines in the LLC). The write follows the transfer's data but
    /// holds up no later transfer, so it is charged where the run stands: its wire time on the
    /// upstream direction and its lines at the root complex.
    fn completion_write(&self, path: &mut Path, j: u64) {
        let e = self.engine;
        if e.completion_bytes == 0 || (j + 1) % e.completions_per_write != 0 {
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
            self.serve_lines(path, path.up, span, false, true, |_| LineService {
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

/// One transfer's outcome.
struct Transferred {
    done: u64,
    lines: u64,
    tlps: u64,
}

/// Where a lone transfer's latency went, ps.
#[derive(Default)]
struct LatencySplit {
    setup_ps: u64,
    request_ps: u64,
    memory_ps: u64,
    data_ps: u64,
}

/// Measure every point on `platform`, calling `progress(done, total)` after each.
pub fn sweep(
    platform: &Platform,
    points: &[DmaPoint],
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<DmaRecord>> {
    let model = DeviceDma::new(platform)?;
    let mut out = Vec::with_capacity(points.len());
    for (i, p) in points.iter().enumerate() {
        out.push(model.measure(p)?);
        progress(i + 1, points.len());
    }
    Ok(out)
}

/// A point from a JSON-like value with the fields of [`DmaPoint`] (`direction` is `read` or
/// `write`; `access` `seq` or `random`; `memory` `local` or `remote`; `cache` `warm` or
/// `cold`); errors name the field. Ranges are checked when the point is measured.
pub fn point_from_value(value: serde_json::Value) -> Result<DmaPoint> {
    crate::error::from_json("point", value)
}
