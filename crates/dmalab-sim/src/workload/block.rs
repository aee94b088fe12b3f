//! Closed-loop I/O through the DMA-mapping layer: `threads` submitters keep `queue_depth` I/Os
//! of `io_bytes` each in flight to one device; every I/O is mapped before the doorbell and
//! unmapped at completion, like fio or sgp_dd against a block HBA, or a NIC sending frames from
//! a ring. It runs on the event engine, with the real IOVA allocator inside the mapper.
//!
//! Per I/O: a CPU submits (its per-I/O cost plus the map), the device translates the buffer's
//! pages (IOTLB hits or walks), moves the bytes at its rate after its fixed latency, then a CPU
//! completes (its per-I/O cost plus the unmap) and submits the next.
//!
//! With several `devices` the queue slots are spread over them in turn, each device with its
//! own slots and data path. The IOMMU's invalidation hardware is shared by the CPUs: an unmap's
//! invalidation (or a flush queue's domain flush) is served in order of arrival, and the CPU
//! waits for it (VT-d's wait descriptor, SMMUv3's CMD_SYNC, or the register interface's poll);
//! with one CPU it never queues.
//!
//! **The IOVA allocator's lock.** With several threads, a map whose allocation reached the
//! allocator's shared structure (tree nodes, bitmap words, or a per-CPU cache miss: the real
//! allocator's counted work) holds the domain's allocator lock for that work, and so does an
//! unmap whose frees reached it (its own range, or a lazy flush's batch); work served from a
//! per-CPU cache holds nothing shared, as in `bench map`. The thread reaches the lock when its
//! CPU starts the allocation (the map's first step) or the frees (once the IOTLB can no longer
//! hold the range: after the unmap's invalidation and its wait when it invalidates, as Linux
//! frees after the sync, else the unmap's last step; the free's own CPU time stays booked with
//! the unmap's), as an event in simulated time, so the lock serves CPUs in the order they reach
//! it; a lock taken last by
//! another CPU first moves here (`lock_transfer_ns`), and the spin is CPU time ("IOVA allocator
//! lock wait"). A lazy flush's batch is held as one section, where Linux frees it range by
//! range. The simulation runs one allocator, so the per-CPU caches of `magazines+*` and `segtree`
//! are one cache shared by every simulated CPU (see `bench map`). One thread has no lock to
//! wait for.
//!
//! **Queues.** Each device has `queues_per_device` submission queues; CPUs are mapped to them in
//! contiguous groups, as Linux's blk-mq spreads CPUs over a device's hardware queues. Threads
//! that share a queue take its lock to write their command and ring the doorbell (the NVMe
//! driver's submission queue lock): the section costs the platform's uncontended lock time
//! (`lock_ns`, carved out of `submit_ns`, so one thread per queue costs what it did before), a
//! lock taken last by another CPU first moves to this one (`lock_transfer_ns`), and a CPU that
//! finds it held spins. Without `queues_per_device` every thread has its own queue.
//!
//! **Sockets.** With `sockets` above one, threads are pinned to sockets in contiguous blocks (as
//! a CPU list fills one socket before the next) and devices attach to sockets in turn. Each
//! socket has its own IOMMU with its own invalidation hardware (at least one translation unit
//! per socket's root complexes: VT-d's remapping units and AMD-Vi's IOMMUs are per root complex,
//! SMMUv3 per PCIe host bridge); a device's unmaps queue at its socket's. An I/O between a thread
//! and a device on different sockets crosses the socket link (the platform's `socket_link_ns`
//! and `socket_link_bytes_per_us`): the doorbell write arrives a link later; the data, written
//! into the thread's memory, also crosses the link into the thread's socket (one link a
//! direction per socket, shared by every remote device writing there); the completion reads its
//! completion entry across it; an invalidation's wait status comes back across it.
//!
//! **Completions.** `completion` says which CPU runs an I/O's completion path and unmap (and so
//! its invalidation wait and frees): the submitter (the default: NVMe's per-queue interrupt
//! vectors, with a queue per CPU, are steered to that CPU), or the CPU taking its queue's
//! interrupt (`queue-interrupt`, as when the block layer completes where the interrupt lands).
//! A queue's vector is affine to the CPUs of the queue's group and delivered to one of them;
//! Linux's x86 vector allocator puts each on the CPU of the mask with the fewest vectors
//! (`kernel/irq/matrix.c`), modelled as the devices' vectors for a queue taken in turn over
//! the group's CPUs. With shared queues one CPU then completes for every thread of its group
//! on a device. The submitter learns of the completion without cost: the wake-up of a thread
//! on another CPU is not modelled. The devices
//! share one mapper (one domain), so a lazy flush queue's domain-wide invalidation goes to the
//! IOMMU of the device whose unmap filled it, as if each device had its own domain.

use crate::bus::memory::MemoryPath;
use crate::bus::trace::Direction;
use crate::bus::{Bus, ADDRESS_PERIOD_BYTES};
use crate::config::costs::IoCosts;
use crate::config::workload::{check, valid, Completion, IoScenario};
use crate::dma::{DmaMapper, MapTime, MapTimeSum, Mapping};
use crate::error::{invalid_arg, Result, SimError};
use crate::iommu::sync::SharedSync;
use crate::progress::Progress;
use crate::resource::{FifoLock, Grant, Resource};
use crate::slots::{Chain, SlotQueue};
use crate::units::{BusAddr, Ps, PsSum};
use crate::workload::latency::{Latency, LatencyRecorder};
use crate::workload::timeline::{Timeline, Track};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

/// Where an I/O's time goes, summed over the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IoBreakdown {
    /// CPU submit path, without mapping.
    pub submit_ps: Ps,
    /// CPU complete path, without unmapping.
    pub complete_ps: Ps,
    /// Map and unmap, by component.
    pub mapping: MapTime,
    /// Device time waiting for address translation (IOTLB misses).
    pub translation_ps: Ps,
    /// CPU time waiting for the shared invalidation hardware to reach its invalidation.
    pub invalidation_wait_ps: Ps,
    /// CPU time spinning on a shared submission queue's lock, and moving it between CPUs.
    pub queue_lock_wait_ps: Ps,
    /// CPU time spinning on the IOVA allocator's lock (an allocation or free that reached the
    /// allocator's shared structure, not a per-CPU cache), and moving it between CPUs.
    pub alloc_lock_wait_ps: Ps,
    /// Time added by crossing between sockets: doorbells, data, completion entries and
    /// invalidation waits of I/Os whose thread and device are on different sockets.
    pub socket_ps: Ps,
    /// Device time: latency and data.
    pub device_ps: Ps,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IoResult {
    /// The scenario run.
    pub scenario: IoScenario,
    /// Completed I/Os per second of simulated time.
    pub iops: f64,
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// Latency from submit to completion done: mean, percentiles, maximum, histogram.
    pub latency: Latency,
    /// CPU busy time over elapsed time, averaged over the submitting CPUs.
    pub cpu_utilization: f64,
    /// Device data-path busy time over elapsed time (the mean over the devices).
    pub device_utilization: f64,
    /// Time per I/O by component (totals divided by I/Os).
    pub per_io: IoBreakdown,
    /// Simulated time.
    pub elapsed_ps: Ps,
    /// Events the engine handled.
    pub events: u64,
}

/// What happens next to the I/O in a queue slot: the slot's one pending event (events stay
/// small: the slot's state is kept in a table, not carried in the event queue).
#[derive(Clone, Copy)]
enum Stage {
    /// The slot's thread submits its next I/O.
    Submit,
    /// The slot's thread reaches the IOVA allocator's lock with its map's allocation.
    MapLock,
    /// The slot's thread reaches its shared submission queue's lock.
    Doorbell,
    /// The doorbell reaches the device.
    DeviceStart,
    /// The device's data transfer may start.
    DataStart,
    /// The device completed the I/O.
    DeviceDone,
    /// The completing CPU reaches the IOVA allocator's lock with its unmap's frees.
    FreeLock,
    /// The completing CPU reaches the IOMMU's invalidation hardware with its unmap's
    /// invalidation, and waits for it.
    Invalidate,
}

/// The I/O in flight in one queue slot.
struct InFlight {
    thread: usize,
    /// The slot's device, that device's socket and the thread's socket (fixed for the run).
    device: u32,
    device_socket: u32,
    thread_socket: u32,
    /// One crossing of the socket link between the thread and the device: zero on one socket.
    crossing: Ps,
    /// The CPU that completes the slot's I/Os (see [`Completion`]), and one crossing between
    /// it and the device.
    completer: usize,
    completion_crossing: Ps,
    mapping: Option<Mapping>,
    submitted: Ps,
    /// The unmap's invalidation still to be served.
    flush: Ps,
    /// The pages its unmap invalidates (for a queue of per-page commands).
    flush_pages: u64,
    /// While the slot's thread waits to reach the allocator's lock: when its CPU's work for
    /// the I/O ends without a wait, and how long it holds the lock.
    cpu_end: Ps,
    hold: Ps,
}

/// Run `scenario` with `mapper` and `costs`.
pub fn run(
    mapper: &mut DmaMapper,
    costs: &IoCosts,
    scenario: IoScenario,
    progress: &Progress,
) -> Result<IoResult> {
    run_on_bus(mapper, costs, scenario, None, progress)
}

/// As [`run_placed`] on one socket.
pub fn run_on_bus(
    mapper: &mut DmaMapper,
    costs: &IoCosts,
    scenario: IoScenario,
    bus: Option<&Bus>,
    progress: &Progress,
) -> Result<IoResult> {
    run_placed(mapper, costs, scenario, bus, None, progress)
}

/// Run `scenario` with the device's data moved over `bus` (the platform's PCI, PCI-X or PCIe
/// model: its commands or TLPs at the mapping's device address), or, without a bus, at the
/// device's rate alone. With a bus the data time is the slower of the two (a NIC's wire, say,
/// may be slower than its link). The device writes memory (reads from a disk, frames received).
/// `memory` gives the socket link that a scenario with several `sockets` crosses.
pub fn run_placed(
    mapper: &mut DmaMapper,
    costs: &IoCosts,
    scenario: IoScenario,
    bus: Option<&Bus>,
    memory: Option<&MemoryPath>,
    progress: &Progress,
) -> Result<IoResult> {
    run_traced(mapper, costs, scenario, bus, memory, progress, 0).map(|(r, _)| r)
}

/// As [`run_placed`], also keeping the run's timeline: each CPU's submit, map, complete, unmap
/// and waits, each device's translation and latency, each data path's transfers and each
/// invalidation unit's work, as slices, at most `timeline_limit` of them (0: none).
pub fn run_traced(
    mapper: &mut DmaMapper,
    costs: &IoCosts,
    scenario: IoScenario,
    bus: Option<&Bus>,
    memory: Option<&MemoryPath>,
    progress: &Progress,
    timeline_limit: usize,
) -> Result<(IoResult, Timeline)> {
    validate(&scenario)?;
    let link = match memory {
        // The memory section describes a two-socket host: a line's home is this socket or
        // the other, across the one link; more sockets than the host has would add IOMMUs
        // and links it does not have.
        Some(m) if m.has_socket_link() => {
            if scenario.sockets > 2 {
                return Err(invalid_arg(
                    "workload.sockets",
                    scenario.sockets,
                    "1 or 2: the platform describes a two-socket host (one socket link, \
                     [memory] socket_link_ns)",
                ));
            }
            Some(m)
        }
        _ if scenario.sockets == 1 => None,
        _ => {
            return Err(invalid_arg(
                "workload.sockets",
                scenario.sockets,
                "1: the platform describes no socket link ([memory] socket_link_ns and \
                 socket_link_bytes_per_us)",
            ))
        }
    };
    // The warm-up may hold more I/Os in flight than a short counted run: admit the larger.
    let most = IoScenario {
        ios: scenario.ios.max(scenario.warm_up_ios),
        ..scenario
    };
    admit(mapper, &scenario, in_flight(&most), timeline_limit)?;
    // The warm-up: its I/Os run to the last, on the same mapper (its allocator's caches, its
    // flush queues), and nothing of them is kept but that state and the time it ended.
    let mut start = Ps::ZERO;
    if scenario.warm_up_ios > 0 {
        let warm = IoScenario {
            ios: scenario.warm_up_ios,
            warm_up_ios: 0,
            ..scenario
        };
        let child = progress.child();
        let (_, _, end) = phase(mapper, costs, warm, bus, link, &child, 0, Ps::ZERO)?;
        start = end;
    }
    let (result, timeline, _) = phase(
        mapper,
        costs,
        scenario,
        bus,
        link,
        progress,
        timeline_limit,
        start,
    )?;
    Ok((result, timeline))
}

/// One closed loop of `scenario.ios` I/Os starting at `start` with every resource idle: its
/// result, timeline and the time its last I/O ended.
#[allow(clippy::too_many_arguments)]
fn phase(
    mapper: &mut DmaMapper,
    costs: &IoCosts,
    scenario: IoScenario,
    bus: Option<&Bus>,
    link: Option<&MemoryPath>,
    progress: &Progress,
    timeline_limit: usize,
    start: Ps,
) -> Result<(IoResult, Timeline, Ps)> {
    let slots = in_flight(&scenario);
    progress.start(scenario.ios);
    let mut queue: SlotQueue<Stage> = SlotQueue::new(slots)
        .map_err(|_| invalid_arg("threads x queue_depth", slots, "1 to 2^31 - 1"))?;
    let mut model = BlockModel::new(mapper, costs, scenario, bus, link, progress);
    model.start = start;
    model.last_end = start;
    model.timeline = Timeline::new(timeline_limit);
    model.first_submits(&mut queue)?;
    let run = queue.run(Ps(u64::MAX), |now, slot, stage, chain| {
        model.on_event(now, slot, stage, chain)
    });
    progress.set(model.done);
    run?;
    progress.check()?;
    let timeline = std::mem::take(&mut model.timeline);
    let end = model.last_end.max(queue.now());
    Ok((model.finish(&queue), timeline, end))
}

/// The closed loop's state: the CPUs, the device, the I/Os in flight and what was measured.
struct BlockModel<'a> {
    mapper: &'a mut DmaMapper,
    costs: &'a IoCosts,
    scenario: IoScenario,
    bus: Option<&'a Bus>,
    progress: &'a Progress,
    rng: Pcg64Mcg,
    cpus: Vec<Resource>,
    /// Each device's I/O slots (latency and translation overlap across I/Os).
    devices: Vec<Resource>,
    /// Each device's one data path.
    data_paths: Vec<Resource>,
    /// Each socket's IOMMU invalidation hardware, shared by every CPU.
    invalidation: Vec<Resource>,
    /// Each socket's shared-sync queue, where the IOMMU ends many invalidations with one wait
    /// (empty elsewhere: `invalidation` serves them in turn).
    sync: Vec<SharedSync>,
    /// Each shared submission queue's lock (device by device, queue by queue); empty when no
    /// two threads share a queue.
    queue_locks: Vec<FifoLock>,
    /// The domain's IOVA allocator lock, with several submitting CPUs (one CPU never waits for
    /// it or moves it: with one thread the run is the same without it).
    alloc_lock: Option<FifoLock>,
    /// Submission queues per device.
    queues: usize,
    /// The queue lock's section (the last `lock_ns` of the submit path, at most all of it) and
    /// a lock's move between CPUs.
    section_ps: Ps,
    transfer_ps: Ps,
    /// The link into each socket, carrying remote devices' data writes.
    links: Vec<Resource>,
    /// One crossing of the socket link, and an I/O's data occupancy of it.
    link_ps: Ps,
    link_occupancy_ps: Ps,
    /// The I/O in flight in each queue slot.
    slots: Vec<InFlight>,
    /// Bus time by the buffer's offset in [`ADDRESS_PERIOD_BYTES`], computed once each.
    bus_times: Vec<Option<Ps>>,
    /// The data time at the device's own rate.
    rate_ps: Ps,
    /// Bytes between two buffers' starts: a page, or the I/O's size rounded up to a power of
    /// two if larger.
    buffer_spacing: u64,
    b: IoTotals,
    /// The mapper's time sum when the run started: the run's map and unmap time is what it
    /// added since (every map and unmap of the run is the mapper's, and nothing else is).
    mapping_from: MapTimeSum,
    latencies: LatencyRecorder,
    /// What each resource did when, if asked for.
    timeline: Timeline,
    started: u64,
    done: u64,
    last_end: Ps,
    /// When the run's first I/Os are submitted: 0, or the end of its warm-up.
    start: Ps,
}

impl<'a> BlockModel<'a> {
    fn new(
        mapper: &'a mut DmaMapper,
        costs: &'a IoCosts,
        scenario: IoScenario,
        bus: Option<&'a Bus>,
        link: Option<&MemoryPath>,
        progress: &'a Progress,
    ) -> Self {
        let period = ADDRESS_PERIOD_BYTES as usize;
        let queues = scenario.queues_per_device.unwrap_or(scenario.threads);
        let shared = queues < scenario.threads;
        let map_costs = mapper.costs();
        let section_ps = Ps::from_ns(map_costs.lock_ns.min(costs.submit_ns));
        let transfer_ps = Ps::from_ns(map_costs.lock_transfer_ns);
        BlockModel {
            rng: Pcg64Mcg::seed_from_u64(scenario.seed),
            cpus: (0..scenario.threads)
                .map(|i| Resource::new(format!("cpu{i}"), 1))
                .collect(),
            devices: (0..scenario.devices)
                .map(|d| {
                    // A server per slot of the device: every I/O reaching it starts at once.
                    let slots = in_flight(&scenario).div_ceil(scenario.devices).max(1);
                    Resource::new(format!("device{d}"), slots)
                })
                .collect(),
            data_paths: (0..scenario.devices)
                .map(|d| Resource::new(format!("device{d} data path"), 1))
                .collect(),
            invalidation: (0..scenario.sockets)
                .map(|s| Resource::new(format!("socket{s} IOMMU invalidation"), 1))
                .collect(),
            sync: match costs.shared_sync {
                Some(sync) => (0..scenario.sockets)
                    .map(|_| SharedSync::new(sync, Ps::from_ns(mapper.costs().flush_all_ns).0))
                    .collect(),
                None => Vec::new(),
            },
            queue_locks: if shared {
                vec![FifoLock::default(); scenario.devices * queues]
            } else {
                Vec::new()
            },
            alloc_lock: (scenario.threads > 1).then(FifoLock::default),
            queues,
            section_ps,
            transfer_ps,
            links: (0..scenario.sockets)
                .map(|s| Resource::new(format!("socket link into socket{s}"), 1))
                .collect(),
            link_ps: link.map_or(Ps::ZERO, |m| Ps::from_ns(m.socket_link_ns)),
            link_occupancy_ps: link.map_or(Ps::ZERO, |m| {
                let per_mib = (1_000_000u64 << 20).div_ceil(m.socket_link_bytes_per_us);
                Ps((scenario.io_bytes * per_mib).div_ceil(1 << 20))
            }),
            slots: Vec::with_capacity(in_flight(&scenario)),
            bus_times: if bus.is_some() {
                vec![None; period]
            } else {
                Vec::new()
            },
            rate_ps: Ps::for_bytes(scenario.io_bytes, costs.device_bytes_per_s),
            buffer_spacing: mapper
                .page_bytes()
                .max(scenario.io_bytes.next_power_of_two()),
            b: IoTotals::default(),
            mapping_from: mapper.time_sum(),
            latencies: LatencyRecorder::new(),
            timeline: Timeline::default(),
            started: 0,
            done: 0,
            last_end: Ps::ZERO,
            start: Ps::ZERO,
            mapper,
            costs,
            scenario,
            bus,
            progress,
        }
    }

    /// Fill every thread's queue: one slot per I/O in flight, each submitting at time zero.
    /// Threads fill their queues in turn and stop at the run's `ios`: a slot past them would
    /// never submit, so it is not made (see [`in_flight`]).
    fn first_submits(&mut self, queue: &mut SlotQueue<Stage>) -> Result<()> {
        let slots = in_flight(&self.scenario);
        for thread in 0..self.scenario.threads {
            for _ in 0..self.scenario.queue_depth {
                if self.slots.len() == slots {
                    return Ok(());
                }
                let slot = u32::try_from(self.slots.len()).map_err(|_| {
                    invalid_arg("threads x queue_depth", self.slots.len(), "below 2^32")
                })?;
                let device = slot as usize % self.devices.len();
                let device_socket = device % self.scenario.sockets;
                let socket_of = |t: usize| t * self.scenario.sockets / self.scenario.threads;
                let thread_socket = socket_of(thread);
                let completer = match self.scenario.completion {
                    Completion::Submitter => thread,
                    // A CPU of the contiguous group mapped to the thread's queue: the devices'
                    // vectors for that queue in turn over the group's CPUs.
                    Completion::QueueInterrupt => {
                        let (t, q) = (self.scenario.threads, self.queues);
                        let queue = thread * q / t;
                        let (lo, hi) = ((queue * t).div_ceil(q), ((queue + 1) * t).div_ceil(q));
                        lo + device % (hi - lo).max(1)
                    }
                };
                let link = |socket: usize| {
                    if socket == device_socket {
                        Ps::ZERO
                    } else {
                        self.link_ps
                    }
                };
                self.slots.push(InFlight {
                    completer,
                    completion_crossing: link(socket_of(completer)),
                    thread,
                    device: device as u32,
                    device_socket: device_socket as u32,
                    thread_socket: thread_socket as u32,
                    crossing: link(thread_socket),
                    mapping: None,
                    submitted: Ps::ZERO,
                    flush: Ps::ZERO,
                    flush_pages: 0,
                    cpu_end: Ps::ZERO,
                    hold: Ps::ZERO,
                });
                queue.schedule(slot as usize, self.start, Stage::Submit)?;
                self.started += 1;
            }
        }
        Ok(())
    }

    /// Handle stage `stage` of `slot` at `now`, and the slot's next stages while `chain` takes
    /// them; returns the slot's next stage it did not take and its time, if any.
    fn on_event(
        &mut self,
        now: Ps,
        slot: u32,
        stage: Stage,
        chain: &mut Chain,
    ) -> Result<Option<(Ps, Stage)>> {
        let (mut now, mut stage) = (now, stage);
        loop {
            match self.on_stage(now, stage, slot)? {
                Some((at, next)) if chain.take(at) => (now, stage) = (at, next),
                next => return Ok(next),
            }
        }
    }

    /// Handle stage `stage` of `slot` at `now`; returns the slot's next stage and its time,
    /// if any.
    #[inline(always)]
    fn on_stage(&mut self, now: Ps, stage: Stage, slot: u32) -> Result<Option<(Ps, Stage)>> {
        let next = match stage {
            Stage::Submit => Some(self.submit(now, slot)?),
            Stage::MapLock => {
                let cpu = self.slots[slot as usize].thread;
                let end = self.allocator_lock(now, slot, cpu);
                Some(self.submitted(slot, end))
            }
            Stage::FreeLock => {
                let cpu = self.slots[slot as usize].completer;
                let end = self.allocator_lock(now, slot, cpu);
                self.unmapped(slot, end)
            }
            Stage::Doorbell => Some((self.doorbell(now, slot), Stage::DeviceStart)),
            Stage::DeviceStart => Some((self.device_start(now, slot), Stage::DataStart)),
            Stage::DataStart => Some((self.data_start(now, slot)?, Stage::DeviceDone)),
            Stage::DeviceDone => self.device_done(now, slot)?,
            Stage::Invalidate => self.invalidate(now, slot),
        };
        Ok(next)
    }

    /// The device of `slot`: the slots are spread over the devices in turn (device `slot mod
    /// devices`), and devices over the sockets in turn (socket `device mod sockets`); threads
    /// are pinned to sockets in contiguous blocks. Fixed when the slot is made.
    fn device_of(&self, slot: u32) -> usize {
        self.slots[slot as usize].device as usize
    }

    /// The socket link crossing between `slot`'s thread and its device: zero on one socket.
    fn crossing(&self, slot: u32) -> Ps {
        self.slots[slot as usize].crossing
    }

    /// [`Self::crossing`] for one crossing the I/O makes, counted in the breakdown.
    fn cross(&mut self, slot: u32) -> Ps {
        self.counted(self.crossing(slot))
    }

    /// One crossing between the slot's completing CPU and its device, counted in the
    /// breakdown.
    fn cross_completion(&mut self, slot: u32) -> Ps {
        self.counted(self.slots[slot as usize].completion_crossing)
    }

    /// `crossing`, added to the breakdown's socket link time.
    fn counted(&mut self, crossing: Ps) -> Ps {
        self.b.socket_ps += crossing;
        crossing
    }

    /// The slot's thread picks a buffer, maps it and rings the doorbell; returns when the
    /// doorbell reaches the device, or, when threads share its queue, when the thread reaches
    /// the queue's lock (the last `lock_ns` of its submit path).
    fn submit(&mut self, now: Ps, slot: u32) -> Result<(Ps, Stage)> {
        let s = self.scenario;
        let thread = self.slots[slot as usize].thread;
        let pick = if s.buffers > 1 {
            self.rng.random_range(0..s.buffers)
        } else {
            0
        };
        let buffer = pick + thread as u64 * s.buffers;
        let phys = (1 << 30) + buffer * self.buffer_spacing;
        let (mapping, t) = self.mapper.map(now, thread, phys, s.io_bytes)?;
        let submit = Ps::from_ns(self.costs.submit_ns);
        self.b.submit_ps += submit;
        let cpu = self.cpus[thread].acquire(now, submit + t.total());
        if self.timeline.is_on() {
            let end = self
                .timeline
                .slices(Track::Cpu(thread), cpu.start, &map_parts(&t));
            self.timeline
                .slice(Track::Cpu(thread), "submit", end, submit);
        }
        let io = &mut self.slots[slot as usize];
        io.mapping = Some(mapping);
        io.submitted = now;
        io.flush = Ps::ZERO;
        // The allocation comes first in the map: a thread whose allocation reached the
        // allocator's shared structure reaches its lock when its CPU starts the map.
        if self.alloc_lock.is_some() && self.mapper.backend_use().alloc {
            io.cpu_end = cpu.end;
            io.hold = t.alloc_ps;
            return Ok((cpu.start, Stage::MapLock));
        }
        Ok(self.submitted(slot, cpu.end))
    }

    /// The slot's submit path ends at `end` on its CPU: the doorbell's next step.
    fn submitted(&mut self, slot: u32, end: Ps) -> (Ps, Stage) {
        if !self.queue_locks.is_empty() {
            return (end - self.section_ps, Stage::Doorbell);
        }
        (end + self.cross(slot), Stage::DeviceStart)
    }

    /// The slot's thread reaches its queue's lock at `now`, with the lock's section (writing
    /// the command, ringing the doorbell) still to run: it spins while another CPU holds the
    /// lock and takes the lock's line if another held it last; returns when the doorbell
    /// reaches the device. Uncontended, that is when the submit path ends, as without a shared
    /// queue. The spin is added to the CPU's busy time after what it already has queued (a
    /// CPU's work is booked in order of requests, so the time is right and its place is not).
    fn doorbell(&mut self, now: Ps, slot: u32) -> Ps {
        let thread = self.slots[slot as usize].thread;
        let queue = thread * self.queues / self.scenario.threads;
        let index = self.device_of(slot) * self.queues + queue;
        let (section, transfer) = (self.section_ps.0, self.transfer_ps.0);
        let (wait, transfer, release) =
            self.queue_locks[index].take(now.0, thread, section, transfer);
        if wait + transfer > 0 {
            self.b.queue_lock_wait_ps += Ps(wait + transfer);
            let cpu = self.cpus[thread].acquire(now, Ps(wait + transfer));
            if self.timeline.is_on() {
                let name = "submission queue lock wait";
                let spin = cpu.end - cpu.start;
                self.timeline
                    .slice(Track::Cpu(thread), name, cpu.start, spin);
            }
        }
        Ps(release) + self.cross(slot)
    }

    /// CPU `thread` (the slot's submitter for a map, its completer for frees) reaches the IOVA
    /// allocator's lock at `now`, to hold it for its counted work in the allocator's shared
    /// structure; it spins while another CPU holds the lock and takes the lock's line if
    /// another held it last. Returns when the CPU's work for the I/O ends now. The spin is booked after the CPU's queued work, as for the submission
    /// queue's lock (see [`Self::doorbell`]).
    fn allocator_lock(&mut self, now: Ps, slot: u32, thread: usize) -> Ps {
        let io = &self.slots[slot as usize];
        let (end, hold) = (io.cpu_end, io.hold);
        let Some(lock) = self.alloc_lock.as_mut() else {
            return end;
        };
        let (wait, transfer, _) = lock.take(now.0, thread, hold.0, self.transfer_ps.0);
        if wait + transfer == 0 {
            return end;
        }
        let spin = Ps(wait + transfer);
        self.b.alloc_lock_wait_ps += spin;
        let cpu = self.cpus[thread].acquire(end, spin);
        if self.timeline.is_on() {
            let name = "IOVA allocator lock wait";
            self.timeline
                .slice(Track::Cpu(thread), name, cpu.start, spin);
        }
        cpu.end
    }

    /// The device translates the buffer's pages and spends its fixed latency; returns when
    /// the data may start. Resources are taken when requests reach them, so that service is
    /// first come, first served in simulated time.
    fn device_start(&mut self, now: Ps, slot: u32) -> Ps {
        let io = &self.slots[slot as usize];
        let walk = io
            .mapping
            .as_ref()
            .map_or(Ps::ZERO, |m| self.mapper.device_access(m));
        self.b.translation_ps += walk;
        let latency = Ps::from_ns(self.costs.device_latency_ns);
        let device = self.device_of(slot);
        let g = self.devices[device].acquire(now, latency + walk);
        if self.timeline.is_on() {
            let parts = [
                ("translation (IOTLB misses)", walk),
                ("device latency", latency),
            ];
            self.timeline.slices(Track::Device(device), g.start, &parts);
        }
        g.end
    }

    /// The data crosses the device's data path; returns when the device completes.
    fn data_start(&mut self, now: Ps, slot: u32) -> Result<Ps> {
        let addr = self.slots[slot as usize]
            .mapping
            .as_ref()
            .map(|m| m.dma_addr);
        let data_ps = match (self.bus, addr) {
            (Some(bus), Some(addr)) => self.bus_time(bus, addr)?.max(self.rate_ps),
            _ => self.rate_ps,
        };
        let device = self.device_of(slot);
        let data = self.data_paths[device].acquire(now, data_ps);
        if self.timeline.is_on() {
            let path = Track::DataPath(device);
            self.timeline
                .slice(path, "data transfer", data.start, data_ps);
        }
        self.b.device_ps += Ps::from_ns(self.costs.device_latency_ns);
        self.b.device_ps += data_ps;
        let crossing = self.crossing(slot);
        if crossing == Ps::ZERO {
            return Ok(data.end);
        }
        // The data streams across the link into the thread's socket as the device writes it.
        let socket = self.slots[slot as usize].thread_socket as usize;
        let link = self.links[socket].acquire(now, self.link_occupancy_ps);
        let end = data.end.max(link.end) + crossing;
        self.b.socket_ps += end - data.end;
        Ok(end)
    }

    /// The bus time of the I/O's data at `addr`, which depends on the address only through
    /// its offset in [`ADDRESS_PERIOD_BYTES`]: computed once for each offset.
    fn bus_time(&mut self, bus: &Bus, addr: u64) -> Result<Ps> {
        let key = addr % ADDRESS_PERIOD_BYTES;
        if let Some(t) = self.bus_times[key as usize] {
            return Ok(t);
        }
        let at = BusAddr(key + ADDRESS_PERIOD_BYTES);
        let t = bus
            .transfer(Direction::Write, at, self.scenario.io_bytes)?
            .totals
            .bus_time_ps;
        self.bus_times[key as usize] = Some(t);
        Ok(t)
    }

    /// The CPU completes and unmaps; returns when the slot submits again, if I/Os are left.
    fn device_done(&mut self, now: Ps, slot: u32) -> Result<Option<(Ps, Stage)>> {
        let io = &mut self.slots[slot as usize];
        let thread = io.completer;
        let Some(mapping) = io.mapping.take() else {
            return Ok(None);
        };
        let flushes = self.mapper.flushes();
        let t = self.mapper.unmap(now, thread, &mapping)?;
        let domain_flush = self.mapper.flushes() > flushes;
        let complete = Ps::from_ns(self.costs.complete_ns);
        self.b.complete_ps += complete;
        // A remote device's completion entry is read across the socket link.
        let crossing = self.cross_completion(slot);
        // The CPU's own work; then, if the unmap invalidates, the CPU takes its invalidation to
        // the shared hardware (an event at that time, so that the hardware serves CPUs in the
        // order they reach it).
        let own = complete + crossing + t.total() - t.flush_ps;
        let cpu = self.cpus[thread].acquire(now, own);
        if self.timeline.is_on() {
            let mut parts = vec![("complete", complete), ("socket link crossings", crossing)];
            parts.extend(unmap_parts(&t));
            self.timeline.slices(Track::Cpu(thread), cpu.start, &parts);
        }
        let locks = self.alloc_lock.is_some() && self.mapper.backend_use().free;
        let io = &mut self.slots[slot as usize];
        io.flush = t.flush_ps;
        // A domain-wide flush (a lazy queue's) is one command whatever it frees.
        io.flush_pages = if domain_flush { 1 } else { mapping.pages };
        io.hold = if locks { t.free_ps } else { Ps::ZERO };
        // The IOVA is freed once the IOTLB can no longer hold it (Linux frees after the
        // invalidation's sync): after the invalidation if the unmap invalidates, else last in
        // the CPU's own part of the unmap.
        if t.flush_ps > Ps::ZERO {
            return Ok(Some((cpu.end, Stage::Invalidate)));
        }
        if locks {
            io.cpu_end = cpu.end;
            return Ok(Some((cpu.end - t.free_ps, Stage::FreeLock)));
        }
        Ok(self.unmapped(slot, cpu.end))
    }

    /// The slot's unmap ends at `end` on its CPU: the I/O is done.
    #[inline(always)]
    fn unmapped(&mut self, slot: u32, end: Ps) -> Option<(Ps, Stage)> {
        self.completed(slot, end).map(|t| (t, Stage::Submit))
    }

    /// The CPU of `slot` reaches its device's socket's invalidation hardware at `now` and
    /// spins until its invalidation is served (and, from another socket, until the wait's
    /// status crosses back).
    fn invalidate(&mut self, now: Ps, slot: u32) -> Option<(Ps, Stage)> {
        let io = &mut self.slots[slot as usize];
        let (thread, flush, pages) = (io.completer, std::mem::take(&mut io.flush), io.flush_pages);
        let crossing = self.cross_completion(slot);
        let socket = self.slots[slot as usize].device_socket as usize;
        let inv = match self.sync.get_mut(socket) {
            // One wait ends every invalidation queued before it (`crate::iommu::sync`).
            Some(q) => {
                let j = q.join_unmap(now.0, flush.0, pages);
                Grant {
                    server: 0,
                    start: Ps(j.start),
                    end: Ps(j.end),
                }
            }
            None => self.invalidation[socket].acquire(now, flush),
        };
        self.b.invalidation_wait_ps += inv.start - now;
        let cpu = self.cpus[thread].acquire(now, inv.end + crossing - now);
        if self.timeline.is_on() {
            let unit = Track::Invalidation(socket);
            self.timeline
                .slice(unit, "IOTLB invalidation", inv.start, flush);
            let parts = [
                ("IOTLB invalidation queue wait", inv.start - now),
                ("IOTLB invalidation", flush),
                ("socket link crossings", crossing),
            ];
            self.timeline.slices(Track::Cpu(thread), cpu.start, &parts);
        }
        // The frees, if they need the allocator's lock, reach it when the wait is over.
        let io = &mut self.slots[slot as usize];
        if io.hold > Ps::ZERO {
            io.cpu_end = cpu.end;
            return Some((cpu.end, Stage::FreeLock));
        }
        self.unmapped(slot, cpu.end)
    }

    /// The I/O of `slot` is done at `end`: count it; returns when the slot submits again, if
    /// I/Os are left.
    #[inline(always)]
    fn completed(&mut self, slot: u32, end: Ps) -> Option<Ps> {
        let submitted = self.slots[slot as usize].submitted;
        self.latencies.record(end - submitted);
        self.last_end = self.last_end.max(end);
        self.done += 1;
        if !self.progress.tick(self.done) {
            // Asked to stop: start nothing more; the run returns `Interrupted` once the I/Os in
            // flight are done.
            self.started = self.scenario.ios;
        }
        if self.started < self.scenario.ios {
            self.started += 1;
            return Some(end);
        }
        None
    }

    fn finish(self, queue: &SlotQueue<Stage>) -> IoResult {
        let (s, done) = (self.scenario, self.done);
        // A run after a warm-up starts where the warm-up ended.
        let elapsed = self.last_end.max(queue.now()) - self.start;
        let n = done.max(1);
        let secs = elapsed.0 as f64 / 1e12;
        let cpus = &self.cpus;
        IoResult {
            scenario: s,
            iops: done as f64 / secs,
            bytes_per_s: (done * s.io_bytes) as f64 / secs,
            latency: self.latencies.summary(),
            cpu_utilization: cpus.iter().map(|c| c.utilization(elapsed)).sum::<f64>()
                / cpus.len() as f64,
            device_utilization: self
                .data_paths
                .iter()
                .map(|d| d.utilization(elapsed))
                .sum::<f64>()
                / self.data_paths.len() as f64,
            per_io: divide(
                &self.b,
                &self.mapper.time_sum().since(&self.mapping_from),
                n,
            ),
            elapsed_ps: elapsed,
            events: queue.handled(),
        }
    }
}

/// Bytes the IOVA allocator keeps per live range (assumed: a tree node or a magazine's entry
/// with its heap overhead; 32 to 128 across `dmalab-iova`'s allocators).
const IOVA_RANGE_BYTES: u64 = 96;

/// Timeline slices a block I/O books at most (assumed from the stages an I/O passes, 11 counted
/// on `p3-bitmap-strict`: 1,100,000 slices for 100,000 I/Os, 2026-12-07).
const SLICES_PER_IO: u64 = 12;

/// Bytes a kept timeline slice costs end to end: the run's record, its JSON, the trace that
/// Python writes (1,136 B measured: the maximum resident size of `p3-bitmap-strict` with
/// 1.1M and 11M slices kept differed by 12.5 GB, 2026-12-07).
pub const SLICE_BYTES: u64 = 1_200;

/// Refuse, before anything is allocated, a run whose I/Os in flight cannot all hold their
/// IOVA at once, or whose queues and timeline would not fit in memory
/// ([`crate::limits::admit`]).
fn admit(mapper: &DmaMapper, s: &IoScenario, slots: usize, timeline_limit: usize) -> Result<()> {
    let slots = slots as u64;
    let in_flight = "workload.threads x workload.queue_depth (the I/Os in flight)";
    let iova = mapper.iova_pages();
    if let Some((lo, hi)) = iova {
        let space = (hi + 1).saturating_sub(lo);
        let pages = s.io_bytes.div_ceil(mapper.page_bytes());
        if slots.saturating_mul(pages) > space {
            // The allocator's own refusal, as a run that got that far would meet it (an IOVA
            // space search reads it as "too small"), before anything is allocated.
            return Err(SimError::Iova {
                operation: format!(
                    "{in_flight} is {slots}, at most {} with {pages} page{} of IOVA each below \
                     the device's DMA mask",
                    space / pages.max(1),
                    if pages == 1 { "" } else { "s" }
                ),
                source: dmalab_iova::IovaError::NoSpace {
                    pages: slots.saturating_mul(pages),
                    align_pages: 1,
                    limit: dmalab_iova::Pfn(hi),
                    boundary_pages: None,
                },
            });
        }
    }
    let per_slot = (std::mem::size_of::<InFlight>() + std::mem::size_of::<Ps>()) as u64
        + SlotQueue::<Stage>::bytes_per_slot()
        + if iova.is_some() { IOVA_RANGE_BYTES } else { 0 };
    let queues = slots.next_power_of_two().saturating_mul(per_slot);
    let slices = (timeline_limit as u64).min(s.ios.saturating_mul(SLICES_PER_IO));
    let timeline = slices.saturating_mul(SLICE_BYTES);
    let lower = if timeline > queues {
        "--timeline-limit (or workload.ios)"
    } else {
        in_flight
    };
    crate::limits::admit(queues.saturating_add(timeline), lower)
}

/// The queue slots a run makes: one per I/O that can be in flight, `threads x queue_depth`, but
/// never more than the run's `ios` (the slots past them would never submit). What the run keeps
/// per slot (its event queue, its I/O's state, its device's servers) is sized by this, not by
/// the product of the inputs, which reaches 2^26.
fn in_flight(s: &IoScenario) -> usize {
    let all = s.threads.saturating_mul(s.queue_depth);
    usize::try_from(s.ios).map_or(all, |ios| all.min(ios))
}

fn validate(s: &IoScenario) -> Result<()> {
    check("io_bytes", s.io_bytes, valid::IO_BYTES)?;
    check("threads", s.threads as u64, valid::THREADS)?;
    check("queue_depth", s.queue_depth as u64, valid::QUEUE_DEPTH)?;
    check("devices", s.devices as u64, valid::DEVICES)?;
    if let Some(q) = s.queues_per_device {
        check("queues_per_device", q as u64, valid::QUEUES_PER_DEVICE)?;
    }
    check("sockets", s.sockets as u64, valid::SOCKETS)?;
    check("ios", s.ios, valid::COUNT)?;
    check("warm_up_ios", s.warm_up_ios, valid::WARM_UP)?;
    check("buffers", s.buffers, valid::BUFFERS)?;
    Ok(())
}

/// A map's CPU time by component, named as the report's breakdown names them.
fn map_parts(t: &MapTime) -> [(&'static str, Ps); 5] {
    [
        ("map: IOVA allocation", t.alloc_ps),
        ("page-table writes", t.table_ps),
        ("hypervisor calls", t.hcall_ps),
        ("bounce copies", t.bounce_ps),
        ("IOTLB invalidation", t.flush_ps),
    ]
}

/// An unmap's CPU time by component but its invalidation (which goes to the shared hardware).
fn unmap_parts(t: &MapTime) -> [(&'static str, Ps); 4] {
    [
        ("unmap: IOVA free", t.free_ps),
        ("page-table writes", t.table_ps),
        ("hypervisor calls", t.hcall_ps),
        ("bounce copies", t.bounce_ps),
    ]
}

/// A run's [`IoBreakdown`] totals as they are kept during the run, in [`PsSum`]s.
#[derive(Default)]
struct IoTotals {
    submit_ps: PsSum,
    complete_ps: PsSum,
    translation_ps: PsSum,
    invalidation_wait_ps: PsSum,
    queue_lock_wait_ps: PsSum,
    alloc_lock_wait_ps: PsSum,
    socket_ps: PsSum,
    device_ps: PsSum,
}

/// The totals with the run's `mapping` time, each saturated to [`Ps`], divided by `n`.
fn divide(b: &IoTotals, mapping: &MapTimeSum, n: u64) -> IoBreakdown {
    let d = |p: PsSum| Ps(p.ps().0 / n);
    IoBreakdown {
        submit_ps: d(b.submit_ps),
        complete_ps: d(b.complete_ps),
        mapping: mapping.total().per(n),
        translation_ps: d(b.translation_ps),
        invalidation_wait_ps: d(b.invalidation_wait_ps),
        queue_lock_wait_ps: d(b.queue_lock_wait_ps),
        alloc_lock_wait_ps: d(b.alloc_lock_wait_ps),
        socket_ps: d(b.socket_ps),
        device_ps: d(b.device_ps),
    }
}
