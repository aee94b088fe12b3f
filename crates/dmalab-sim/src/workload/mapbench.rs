//! `dmalab bench map`: map and unmap latency with N CPUs at once, with the semantics of the
//! kernel's DMA map benchmark (`dma_map_benchmark`: every thread maps a buffer of `granule`
//! pages for a device of `dma_bits`, unmaps it, and so on; the mean and standard deviation of
//! each operation's latency are reported, in microseconds).
//!
//! Each simulated CPU runs the loop on one IOMMU domain, with the real IOVA allocator inside the
//! mapper (`crate::dma`). What is shared, and how:
//! - **the IOVA allocator's lock**: an operation whose counted work touched the allocator's
//!   backing structure (tree nodes, bitmap words, or a cache miss) holds the domain's allocator
//!   lock for that work; one served from a per-CPU cache holds nothing shared. A lock taken last
//!   by another CPU first moves to this one (`lock_transfer_ns`: its cache line and the data it
//!   guards);
//! - **the invalidation interface**: with strict invalidation every unmap puts a page-selective
//!   invalidation and a wait to the IOMMU, which serves them one at a time in order
//!   (`invalidate_ns` each); with lazy invalidation an unmap goes to its CPU's flush queue
//!   (Linux's per-CPU queues of 256 entries and a 10 ms timeout, `drivers/iommu/dma-iommu.c`),
//!   and the unmap that fills a queue flushes the whole domain (`flush_all_ns`) and frees the
//!   batch. Submitting holds the interface's lock for `invalidation_submit_ns`; a register
//!   interface holds it until the hardware is done, a queued one only while writing;
//! - page-table writes and clears are each CPU's own (no page-table lock is modelled); on a
//!   platform whose mappings are hypervisor calls (POWER's TCEs) the calls set, clear and
//!   invalidate, and there is no invalidation queue or flush queue of the OS's own.
//!
//! The allocator's per-CPU caches (of `magazines+*` and `segtree`) are one cache here: the
//! simulation runs on one thread, and the real allocator picks its cache by thread. With several
//! CPUs a cache is then shared that real CPUs would each have, which changes their hit rates
//! (most under lazy flushing, whose batches of 256 frees land in it).
//!
//! The run is event-driven: each CPU's operation is a sequence of stages, and a CPU reaching a
//! lock or the invalidation hardware is served in the order of the times it reaches them. A
//! lazy flush frees its batch one range at a time, taking the allocator's lock for each, so
//! other CPUs get in between, as with a fair spinlock.

use crate::config::platform::Platform;
use crate::config::proto::X86_INTERRUPT_WINDOW;
use crate::dma::{touches_backend, DmaDirection, DmaMapper, MapTime, MapperConfig, Mapping};
use crate::error::{invalid_arg, Result};
use crate::iommu::flush::FlushPolicy;
use crate::iommu::sync::{PageCommands, SharedSync, SyncCosts};
use crate::iommu::walk::Invalidation;
use crate::iommu::Translation;
use crate::progress::Progress;
use crate::resource::FifoLock;
use crate::units::Ps;
use dmalab_iova::AllocatorKind;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Entries of a per-CPU flush queue before it flushes (Linux's `IOVA_FQ_SIZE`).
pub const FLUSH_QUEUE_ENTRIES: usize = 256;

/// Map-unmap pairs each CPU runs before the counted ones (one flush queue's worth), so that
/// the allocator's caches and the flush queues are in their steady state: a lazy CPU's first
/// 256 unmaps free nothing, so its first 256 maps all miss a per-CPU cache. The kernel's
/// benchmark, which runs for seconds, hardly counts them either.
pub const WARM_UP_PAIRS: u64 = FLUSH_QUEUE_ENTRIES as u64;

/// A flush queue's timeout (Linux's `IOVA_FQ_TIMEOUT`, 10 ms).
pub const FLUSH_QUEUE_TIMEOUT: Ps = Ps(10_000_000_000);

/// When unmapped pages are invalidated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushMode {
    /// Every unmap invalidates its pages and waits.
    #[default]
    Strict,
    /// Per-CPU flush queues; a full queue flushes the domain.
    Lazy,
}

fn default_threads() -> usize {
    1
}
fn default_granule() -> u64 {
    1
}
fn default_bits() -> u32 {
    32
}
fn default_direction() -> DmaDirection {
    DmaDirection::Bidirectional
}
fn default_allocator() -> String {
    "magazines+rbtree".into()
}
fn default_maps() -> u64 {
    4096
}
fn default_node() -> i64 {
    -1
}

/// One run of the map benchmark.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapBench {
    /// CPUs mapping at once, 1..=256.
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Pages per mapping, 1..=1024.
    #[serde(default = "default_granule")]
    pub granule_pages: u64,
    /// The device's DMA mask: 32 or 64 bits.
    #[serde(default = "default_bits")]
    pub dma_bits: u32,
    /// Which way the data would move (bounce copies do not arise: the domain translates).
    #[serde(default = "default_direction")]
    pub direction: DmaDirection,
    /// Strict or lazy invalidation.
    #[serde(default)]
    pub flush: FlushMode,
    /// The IOVA allocator, by name (default `magazines+rbtree`, Linux's design: per-CPU
    /// caches over a red-black tree).
    #[serde(default = "default_allocator")]
    pub allocator: String,
    /// Counted map-unmap pairs per CPU, 1..=1_000_000, after [`WARM_UP_PAIRS`] uncounted.
    #[serde(default = "default_maps")]
    pub maps_per_thread: u64,
    /// The node the CPUs run on, as the kernel tool's `-n`: -1 (unbound: the scheduler spreads
    /// them, taken as alternating over the sockets), or a socket (the device's IOMMU is on
    /// socket 0). On a two-socket host a CPU on socket 1 waits for each invalidation's status
    /// to cross the socket link back (`socket_link_ns`).
    #[serde(default = "default_node")]
    pub node: i64,
}

impl Default for MapBench {
    fn default() -> Self {
        MapBench {
            threads: default_threads(),
            granule_pages: default_granule(),
            dma_bits: default_bits(),
            direction: default_direction(),
            flush: FlushMode::default(),
            allocator: default_allocator(),
            maps_per_thread: default_maps(),
            node: default_node(),
        }
    }
}

impl MapBench {
    /// Check the ranges, naming the field and the valid range.
    pub fn validate(&self) -> Result<AllocatorKind> {
        if !(1..=256).contains(&self.threads) {
            return Err(invalid_arg("threads", self.threads, "1..=256"));
        }
        if !(1..=1024).contains(&self.granule_pages) {
            return Err(invalid_arg("granule_pages", self.granule_pages, "1..=1024"));
        }
        if ![32, 64].contains(&self.dma_bits) {
            return Err(invalid_arg("dma_bits", self.dma_bits, "32 or 64"));
        }
        if !(1..=1_000_000).contains(&self.maps_per_thread) {
            return Err(invalid_arg(
                "maps_per_thread",
                self.maps_per_thread,
                "1..=1000000",
            ));
        }
        AllocatorKind::parse(&self.allocator).map_err(|_| {
            invalid_arg(
                "allocator",
                &self.allocator,
                AllocatorKind::NAMES.join(", "),
            )
        })
    }
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapBenchRecord {
    /// The platform's name.
    pub platform: String,
    /// The run (its fields at the record's top level in JSON).
    #[serde(flatten)]
    pub bench: MapBench,
    /// Mean map latency, us.
    pub map_us: f64,
    /// Standard deviation of the map latency, us.
    pub map_sd_us: f64,
    /// Mean unmap latency, us.
    pub unmap_us: f64,
    /// Standard deviation of the unmap latency, us.
    pub unmap_sd_us: f64,
    /// Where a map's time goes on average, us, by component.
    pub map_parts: Vec<(&'static str, f64)>,
    /// Where an unmap's time goes on average, us, by component.
    pub unmap_parts: Vec<(&'static str, f64)>,
    /// The share of the run the IOMMU spent on invalidations (warm-up pairs included).
    pub invalidation_busy: f64,
    /// The share of the run the allocator's lock was held (warm-up pairs included).
    pub allocator_lock_busy: f64,
    /// Domain-wide flushes (lazy) over the run.
    pub flushes: u64,
    /// Map-unmap pairs done.
    pub pairs: u64,
}

/// The map parts, as reports name them.
pub const MAP_PARTS: [&str; 4] = [
    "IOVA allocation",
    "allocator lock wait",
    "page-table writes",
    "bounce copies",
];

/// The unmap parts, as reports name them.
pub const UNMAP_PARTS: [&str; 9] = [
    "page-table clears",
    "flush queue",
    "invalidation submit",
    "invalidation lock wait",
    "invalidation queue wait",
    "invalidation",
    "IOVA free",
    "allocator lock wait",
    "socket link",
];

/// Where each part of an operation is kept: the index of its name in [`MAP_PARTS`] or
/// [`UNMAP_PARTS`].
mod part {
    pub const ALLOC: usize = 0;
    pub const MAP_LOCK: usize = 1;
    pub const TABLE: usize = 2;
    pub const BOUNCE: usize = 3;
    pub const CLEARS: usize = 0;
    pub const FLUSH_QUEUE: usize = 1;
    pub const SUBMIT: usize = 2;
    pub const SUBMIT_LOCK: usize = 3;
    pub const QUEUE_WAIT: usize = 4;
    pub const INVALIDATION: usize = 5;
    pub const FREE: usize = 6;
    pub const FREE_LOCK: usize = 7;
    pub const SOCKET_LINK: usize = 8;
}

/// Running mean and variance (Welford).
#[derive(Default)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn sd(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / self.n as f64).sqrt()
        }
    }
}

/// What a CPU does next, when its event comes.
#[derive(Clone, Copy)]
enum Stage {
    /// Start the next operation: a map, or the unmap of what it mapped.
    Start,
    /// The map reaches the allocator's lock: hold it `hold`, then `after` of its own.
    MapLock { hold: u64, after: u64 },
    /// The unmap reaches the invalidation interface with an invalidation of `service`, and
    /// then frees (`free` in `ranges` ranges; `shared`: under the allocator's lock).
    Invalidate {
        service: u64,
        pages: u64,
        free: Free,
    },
    /// The unmap frees: `left` more ranges under the allocator's lock, `slice` each.
    FreeLock { left: u64, slice: u64 },
}

/// An unmap's IOVA free: its time, how many ranges, and whether it takes the allocator's lock.
#[derive(Clone, Copy)]
struct Free {
    ps: u64,
    ranges: u64,
    shared: bool,
}

/// The operation a CPU is in.
#[derive(Clone, Copy, Default)]
struct Op {
    started: u64,
    map: bool,
    counted: bool,
    parts: [u64; 9],
}

/// The state of a run.
struct Run<'a> {
    mapper: DmaMapper,
    bench: &'a MapBench,
    invalidation: Invalidation,
    submit_ps: u64,
    transfer_ps: u64,
    /// The host's sockets (2 where it describes a socket link) and the link's one-way time.
    sockets: usize,
    link_ps: u64,
    fq_ps: u64,
    /// Whether unmaps go to per-CPU flush queues (lazy, on a page table).
    lazy_queue: bool,
    alloc_lock: FifoLock,
    inv_lock: FifoLock,
    /// When the IOMMU's invalidation hardware is free next.
    hw_free: u64,
    hw_busy: u128,
    /// With a shared-sync queue, its batches.
    sync: SharedSync,
    map: Moments,
    unmap: Moments,
    map_parts: [u128; 4],
    unmap_parts: [u128; 9],
    flushes: u64,
    ops: Vec<Op>,
    /// When the last operation so far ended.
    last_end: u64,
    held: Vec<Option<Mapping>>,
    pairs: Vec<u64>,
}

impl Run<'_> {
    /// Handle `cpu`'s `stage` at `now`; returns its next event, if any.
    fn step(&mut self, now: u64, cpu: usize, stage: Stage) -> Result<Option<(u64, Stage)>> {
        match stage {
            Stage::Start => self.start(now, cpu),
            Stage::MapLock { hold, after } => {
                let (wait, transfer, release) =
                    self.alloc_lock.take(now, cpu, hold, self.transfer_ps);
                self.ops[cpu].parts[part::MAP_LOCK] += wait + transfer;
                Ok(self.finish(cpu, release + after))
            }
            Stage::Invalidate {
                service,
                pages,
                free,
            } if self.invalidation == Invalidation::SharedSync => {
                // No global lock: the CPU claims its place in the queue and writes its command
                // and wait, then waits for its batch (`crate::iommu::sync`).
                // Writing the commands after the first counts as submitting; the IOMMU's
                // batch may start before the CPU is done writing.
                let submitted = now + self.submit_ps;
                let j = self.sync.join_unmap(submitted, service, pages);
                let written = submitted + j.writing;
                let waited = j.start.saturating_sub(written);
                let parts = &mut self.ops[cpu].parts;
                parts[part::SUBMIT] += self.submit_ps + j.writing;
                parts[part::QUEUE_WAIT] += waited;
                parts[part::INVALIDATION] += j.end - written - waited;
                let done = self.crossed(cpu, j.end);
                Ok(self.free(done, cpu, free))
            }
            Stage::Invalidate { service, free, .. } => {
                let (wait, transfer, submitted) =
                    self.inv_lock
                        .take(now, cpu, self.submit_ps, self.transfer_ps);
                let start = submitted.max(self.hw_free);
                let done = start + service;
                self.hw_free = done;
                self.hw_busy += u128::from(service);
                if self.invalidation == Invalidation::Register {
                    // The registers stay held until the hardware is done.
                    self.inv_lock.busy += u128::from(done - submitted);
                    self.inv_lock.free_at = done;
                }
                let parts = &mut self.ops[cpu].parts;
                parts[part::SUBMIT] += self.submit_ps;
                parts[part::SUBMIT_LOCK] += wait + transfer;
                parts[part::QUEUE_WAIT] += start - submitted;
                parts[part::INVALIDATION] += service;
                let done = self.crossed(cpu, done);
                Ok(self.free(done, cpu, free))
            }
            Stage::FreeLock { left, slice } => {
                let (wait, transfer, release) =
                    self.alloc_lock.take(now, cpu, slice, self.transfer_ps);
                self.ops[cpu].parts[part::FREE_LOCK] += wait + transfer;
                if left > 1 {
                    return Ok(Some((
                        release,
                        Stage::FreeLock {
                            left: left - 1,
                            slice,
                        },
                    )));
                }
                Ok(self.finish(cpu, release))
            }
        }
    }

    fn start(&mut self, now: u64, cpu: usize) -> Result<Option<(u64, Stage)>> {
        let counted = self.pairs[cpu] >= WARM_UP_PAIRS;
        let map = self.held[cpu].is_none();
        self.ops[cpu] = Op {
            started: now,
            map,
            counted,
            parts: [0; 9],
        };
        if map {
            let page = self.mapper.page_bytes();
            let bytes = self.bench.granule_pages * page;
            // Each CPU maps its own buffer, page aligned, above the low 4 GiB.
            let phys = (1 << 32) + cpu as u64 * bytes.next_power_of_two();
            let before = self.mapper.allocator_work();
            let (mapping, t) =
                self.mapper
                    .map_dir(Ps(now), cpu, phys, bytes, self.bench.direction)?;
            let d = self.mapper.allocator_work().since(&before);
            self.held[cpu] = Some(mapping);
            let (alloc, table, bounce) = (t.alloc_ps.0, t.table_ps.0 + t.hcall_ps.0, t.bounce_ps.0);
            let parts = &mut self.ops[cpu].parts;
            parts[part::ALLOC] = alloc;
            parts[part::TABLE] = table;
            parts[part::BOUNCE] = bounce;
            if touches_backend(&d) {
                let stage = Stage::MapLock {
                    hold: alloc,
                    after: table + bounce,
                };
                return Ok(Some((now, stage)));
            }
            return Ok(self.finish(cpu, now + alloc + table + bounce));
        }
        let Some(mapping) = self.held[cpu].take() else {
            return Ok(None);
        };
        let before = self.mapper.allocator_work();
        let flushes_before = self.mapper.flushes();
        let t: MapTime = self.mapper.unmap(Ps(now), cpu, &mapping)?;
        let d = self.mapper.allocator_work().since(&before);
        if self.mapper.flushes() > flushes_before && counted {
            self.flushes += 1;
        }
        let own = t.table_ps.0 + t.hcall_ps.0 + t.bounce_ps.0;
        // A lazy unmap's entry goes to its CPU's flush queue, under that queue's own lock.
        let queue = if self.lazy_queue { self.fq_ps } else { 0 };
        let parts = &mut self.ops[cpu].parts;
        parts[part::CLEARS] = own;
        parts[part::FLUSH_QUEUE] = queue;
        parts[part::FREE] = t.free_ps.0;
        let free = Free {
            ps: t.free_ps.0,
            ranges: d.frees.max(1),
            shared: touches_backend(&d),
        };
        let at = now + own + queue;
        if t.flush_ps.0 > 0 {
            let stage = Stage::Invalidate {
                service: t.flush_ps.0,
                // A domain-wide flush (a lazy queue's) is one command whatever it frees.
                pages: if self.lazy_queue { 1 } else { mapping.pages },
                free,
            };
            return Ok(Some((at, stage)));
        }
        Ok(self.free(at, cpu, free))
    }

    /// `cpu`'s invalidation completed at `done`: when its CPU sees it, the wait's status
    /// having crossed the socket link where the CPU is on the other socket from the IOMMU.
    fn crossed(&mut self, cpu: usize, done: u64) -> u64 {
        let remote = match self.bench.node {
            -1 => self.sockets == 2 && cpu % 2 == 1,
            node => node == 1,
        };
        if !remote {
            return done;
        }
        self.ops[cpu].parts[part::SOCKET_LINK] += self.link_ps;
        done + self.link_ps
    }

    /// The unmap frees its IOVA at `at`: under the allocator's lock one range at a time (a fair
    /// lock lets other CPUs in between), or in the CPU's own cache.
    fn free(&mut self, at: u64, cpu: usize, free: Free) -> Option<(u64, Stage)> {
        if free.ps > 0 && free.shared {
            let stage = Stage::FreeLock {
                left: free.ranges,
                slice: free.ps / free.ranges,
            };
            return Some((at, stage));
        }
        self.finish(cpu, at + free.ps)
    }

    /// `cpu`'s operation ends at `end`: count it, and start the next one unless it was the
    /// last.
    fn finish(&mut self, cpu: usize, end: u64) -> Option<(u64, Stage)> {
        self.last_end = self.last_end.max(end);
        let op = self.ops[cpu];
        if op.counted {
            let us = (end - op.started) as f64 / 1e6;
            if op.map {
                self.map.add(us);
                for (sum, p) in self.map_parts.iter_mut().zip(op.parts) {
                    *sum += u128::from(p);
                }
            } else {
                self.unmap.add(us);
                for (sum, p) in self.unmap_parts.iter_mut().zip(op.parts) {
                    *sum += u128::from(p);
                }
            }
        }
        if !op.map {
            self.pairs[cpu] += 1;
            if self.pairs[cpu] == WARM_UP_PAIRS + self.bench.maps_per_thread {
                return None;
            }
        }
        Some((end, Stage::Start))
    }
}

/// Run the map benchmark on `platform`, ticking `progress` per counted pair done.
pub fn run(platform: &Platform, bench: &MapBench, progress: &Progress) -> Result<MapBenchRecord> {
    let kind = bench.validate()?;
    let costs = platform.iommu()?.clone();
    let (invalidation, submit_ns, sync) = platform.iommu_hw.as_ref().map_or(
        (
            Invalidation::Register,
            0,
            SyncCosts {
                command_ns: 0,
                command_write_ns: 0,
                pages: PageCommands::RANGE,
            },
        ),
        |h| (h.invalidation, h.invalidation_submit_ns, h.sync_costs()),
    );
    let flush = match bench.flush {
        FlushMode::Strict => FlushPolicy::Strict,
        FlushMode::Lazy => FlushPolicy::PerCpu {
            high_water: FLUSH_QUEUE_ENTRIES,
            timeout: FLUSH_QUEUE_TIMEOUT,
        },
    };
    // Mappings set by hypervisor calls (POWER's TCEs) are made and invalidated by the calls:
    // no invalidation queue of the OS's own, and no flush queue.
    let translation = if costs.hcall_map_ns + costs.hcall_unmap_ns > 0 {
        Translation::Tce
    } else {
        Translation::PageTable
    };
    let config = MapperConfig {
        translation,
        allocator: kind,
        // A 64-bit device's space is the IOMMU's 48-bit address width, kept to 2^40 here so
        // that a bitmap allocator's map of it stays small; a 32-bit device's is 4 GiB.
        window_bytes: 1 << bench.dma_bits.min(40),
        flush,
        cpus: bench.threads,
        dma_mask_bits: bench.dma_bits,
        window_offset: 0,
        reserved: vec![X86_INTERRUPT_WINDOW],
    };
    let transfer_ps = Ps::from_ns(costs.lock_transfer_ns).0;
    let fq_ps = Ps::from_ns(costs.lock_ns).0;
    // A host whose memory section describes a socket link has two sockets (as `run`'s block
    // model reads it); the CPUs' node must be one of them.
    let (sockets, link_ps) = match platform.memory.as_ref() {
        Some(m) if m.has_socket_link() => (2, Ps::from_ns(m.socket_link_ns).0),
        _ => (1, 0),
    };
    if bench.node < -1 || bench.node >= sockets as i64 {
        let valid = if sockets == 2 {
            "-1 (unbound), 0 (the device's socket) or 1: the host has two sockets"
        } else {
            "-1 (unbound) or 0: the host has one socket ([memory] describes no socket link)"
        };
        return Err(invalid_arg("node", bench.node, valid));
    }
    let full_ps = Ps::from_ns(costs.flush_all_ns).0;
    let mapper = DmaMapper::new(&config, costs)?;
    let n = bench.threads;
    let mut run = Run {
        mapper,
        bench,
        invalidation,
        submit_ps: Ps::from_ns(submit_ns).0,
        transfer_ps,
        sockets,
        link_ps,
        fq_ps,
        lazy_queue: bench.flush == FlushMode::Lazy && translation == Translation::PageTable,
        alloc_lock: FifoLock::default(),
        inv_lock: FifoLock::default(),
        hw_free: 0,
        hw_busy: 0,
        sync: SharedSync::new(sync, full_ps),
        map: Moments::default(),
        unmap: Moments::default(),
        map_parts: [0; 4],
        unmap_parts: [0; 9],
        flushes: 0,
        ops: vec![Op::default(); n],
        last_end: 0,
        held: vec![None; n],
        pairs: vec![0; n],
    };
    let total = n as u64 * bench.maps_per_thread;
    progress.start(total);
    // Each CPU's next event, earliest first (ties by CPU); its stage is kept beside.
    let mut next: BinaryHeap<Reverse<(u64, usize)>> = (0..n).map(|c| Reverse((0, c))).collect();
    let mut stages = vec![Stage::Start; n];
    let mut end = 0u64;
    while let Some(Reverse((now, cpu))) = next.pop() {
        let done_before = run.unmap.n;
        match run.step(now, cpu, stages[cpu])? {
            Some((at, stage)) => {
                stages[cpu] = stage;
                next.push(Reverse((at, cpu)));
                end = end.max(at);
            }
            None => end = end.max(now).max(run.last_end),
        }
        if run.unmap.n > done_before && !progress.tick(run.unmap.n) {
            progress.check()?;
        }
    }
    progress.set(run.unmap.n);
    let elapsed = end.max(1) as f64;
    let counted = run.map.n.max(1);
    let per = |sum: u128| sum as f64 / counted as f64 / 1e6;
    Ok(MapBenchRecord {
        platform: platform.name.clone(),
        bench: bench.clone(),
        map_us: run.map.mean,
        map_sd_us: run.map.sd(),
        unmap_us: run.unmap.mean,
        unmap_sd_us: run.unmap.sd(),
        map_parts: MAP_PARTS.into_iter().zip(run.map_parts.map(per)).collect(),
        unmap_parts: UNMAP_PARTS
            .into_iter()
            .zip(run.unmap_parts.map(per))
            .collect(),
        invalidation_busy: (run.hw_busy + run.sync.busy_ps) as f64 / elapsed,
        allocator_lock_busy: run.alloc_lock.busy as f64 / elapsed,
        flushes: run.flushes,
        pairs: run.unmap.n,
    })
}
