//! One host of the pair: its cores, its side of the wire, its NIC's rings and link, and the
//! DMA-mapping layer its driver maps and unmaps buffers through, with the table lock that
//! layer may take. The mapping work is charged here, on the CPU that does it.
//!
//! When the platform's bus times the NICs ([`super::run_on_bus`]), each transfer holds the
//! host's link for its data packets' time and ends when the bus model says: to send, the NIC
//! reads the descriptor, then the frame or TSO segment, and writes a completion; to receive,
//! it reads a receive descriptor, writes each frame and a completion.

use super::Side;
use crate::bus::trace::Direction;
use crate::bus::{Bus, ADDRESS_PERIOD_BYTES};
use crate::config::costs::{MapLock, NetCosts};
use crate::config::proto::ETHERNET_HEADER_BYTES;
use crate::dma::{DmaMapper, MapTime, Mapping};
use crate::error::Result;
use crate::iommu::Translation;
use crate::resource::{Calendar, Grant, Resource};
use crate::units::{BusAddr, Ps};
use crate::workload::timeline::{Timeline, Track};
use std::collections::HashMap;

/// One side's resources and what it spent: the queueing resources its work books, its mapper,
/// and the CPU time by kind.
pub(super) struct Host<'a> {
    /// The costs of the network stack and the NIC (shared by both hosts).
    costs: &'a NetCosts,
    /// The protocol's IP and transport headers per frame.
    header_bytes: u64,
    /// One pool of all cores (request/response: any core serves), or one resource per core
    /// with each flow pinned to one (streams, as receive-side scaling keeps a flow on a core).
    cores: Vec<Resource>,
    /// The wire from this host to the other (ACKs book it ahead of the events that carry
    /// data).
    wire: Calendar,
    /// The host's DMA-mapping layer.
    mapper: &'a mut DmaMapper,
    /// Mapping time by component, summed over the run.
    pub(super) mapping: MapTime,
    /// The mapping table's lock.
    pub(super) lock: Calendar,
    /// Whether maps and unmaps take the lock.
    locked: bool,
    /// Frames received since the last receive-buffer chunk was replaced.
    rx_frames: u64,
    /// The host's link: one resource for what the NIC reads, one for what it writes (a PCIe
    /// link carries both directions at once).
    link: [Calendar; 2],
    /// The send ring, receive ring and completion queue (coherent, mapped once).
    rings: [Mapping; 3],
    /// Entries used so far per ring (ring positions).
    cursor: [u64; 3],
    /// CPU time in the socket layer and application calls (per-message costs).
    pub(super) stack: Ps,
    /// CPU time in the driver and per-frame protocol work (per-frame costs, ACKs).
    pub(super) driver: Ps,
    /// 0 for the client, 1 for the server (the timeline's host index).
    index: usize,
    /// What the host's cores, wire and link did when, if asked for.
    pub(super) timeline: Timeline,
}

impl<'a> Host<'a> {
    /// The host on `side`, mapping through `mapper`, its cores one pool (`pooled`) or one
    /// resource each, with frames carrying `header_bytes` of headers. Its rings and completion
    /// queue are allocated coherent here, once, and stay mapped for the whole run.
    pub(super) fn new(
        side: Side,
        mapper: &'a mut DmaMapper,
        costs: &'a NetCosts,
        pooled: bool,
        header_bytes: u64,
    ) -> Result<Self> {
        let n = costs.ring_entries;
        let mut ring = |bytes: u64| -> Result<Mapping> {
            Ok(mapper.alloc_coherent(Ps::ZERO, 0, n * bytes)?.0)
        };
        let rings = [
            ring(costs.tx_descriptor_bytes)?,
            ring(costs.rx_descriptor_bytes)?,
            ring(2 * costs.completion_bytes)?,
        ];
        let name = side.name();
        let cores = usize::try_from(costs.cores).unwrap_or(1);
        let cores = if pooled {
            vec![Resource::new(format!("{name} cores"), cores)]
        } else {
            (0..cores)
                .map(|i| Resource::new(format!("{name} core {i}"), 1))
                .collect()
        };
        Ok(Host {
            costs,
            header_bytes,
            cores,
            wire: Calendar::new(format!("wire to {}", side.other().name())),
            locked: costs.map_lock == MapLock::Table
                && matches!(
                    mapper.translation(),
                    Translation::Tce | Translation::PageTable
                ),
            mapper,
            mapping: MapTime::default(),
            lock: Calendar::new(format!("{name} table lock")),
            rx_frames: 0,
            link: [
                Calendar::new(format!("{name} link, NIC reads")),
                Calendar::new(format!("{name} link, NIC writes")),
            ],
            rings,
            cursor: [0; 3],
            stack: Ps::ZERO,
            driver: Ps::ZERO,
            index: side.index(),
            timeline: Timeline::default(),
        })
    }

    /// The timeline's track of the core that `grant` (of [`Self::core`] for `instance`) gave.
    pub(super) fn core_track(&self, instance: u64, grant: &Grant) -> Track {
        let core = if self.cores.len() == 1 {
            grant.server
        } else {
            (instance % self.cores.len() as u64) as usize
        };
        Track::HostCore {
            host: self.index,
            core,
        }
    }

    /// The core that serves `instance` (any free one of the pool when the cores are pooled).
    pub(super) fn core(&mut self, instance: u64) -> &mut Resource {
        let n = self.cores.len() as u64;
        &mut self.cores[(instance % n) as usize]
    }

    /// Map and unmap `buffers` buffers of `bytes`, the CPU starting at `t`, with the current
    /// time `clock`: when it is done. Both are charged together (a transmit buffer's unmap at
    /// its completion and a receive buffer's replacement map run on the same CPU); each takes
    /// the table lock on its own, so other cores' maps can come between them.
    fn map_unmap(&mut self, clock: Ps, mut t: Ps, buffers: u64, bytes: u64) -> Result<Ps> {
        for b in 0..buffers {
            let phys = (1 << 32) + b * 65536;
            let (m, mt) = self.mapper.map(t, 0, phys, bytes.max(1))?;
            t = self.hold(clock, t, mt.total());
            let ut = self.mapper.unmap(t, 0, &m)?;
            t = self.hold(clock, t, ut.total());
            self.mapping.add(&mt);
            self.mapping.add(&ut);
        }
        Ok(t)
    }

    /// The CPU runs mapping work of `work` from `t`, under the table lock if the host takes
    /// one (spinning while it waits): when it is done.
    fn hold(&mut self, clock: Ps, t: Ps, work: Ps) -> Ps {
        if self.locked && work > Ps::ZERO {
            self.lock.book(clock, t, work).end
        } else {
            t + work
        }
    }

    /// `frames` frames have filled receive buffers, the CPU starting at `t`: replace the chunks
    /// they completed. Receive buffers are carved from chunks mapped once per
    /// `rx_frames_per_map` frames: a filled chunk is unmapped and a fresh one mapped in its
    /// place.
    pub(super) fn refill(&mut self, clock: Ps, t: Ps, frames: u64) -> Result<Ps> {
        let c = self.costs;
        self.rx_frames += frames;
        let chunks = self.rx_frames / c.rx_frames_per_map;
        self.rx_frames %= c.rx_frames_per_map;
        self.map_unmap(
            clock,
            t,
            chunks,
            c.rx_frames_per_map * (c.mtu_bytes + ETHERNET_HEADER_BYTES),
        )
    }

    /// Whether a frame carrying `segment_bytes` is copied into its send descriptor (it fits
    /// the inline threshold) rather than mapped.
    fn inline(&self, segment_bytes: u64) -> bool {
        self.frame_bytes(segment_bytes) <= self.costs.tx_inline_bytes
    }

    /// The bytes of a frame carrying `segment_bytes` of payload, headers included.
    fn frame_bytes(&self, segment_bytes: u64) -> u64 {
        segment_bytes + self.header_bytes + ETHERNET_HEADER_BYTES
    }

    /// Transmit buffers of `segments` segments of `segment_bytes` from `t`: mapped, or copied
    /// into the descriptors when a frame fits the inline threshold.
    pub(super) fn transmit(
        &mut self,
        clock: Ps,
        t: Ps,
        segments: u64,
        segment_bytes: u64,
    ) -> Result<Ps> {
        if self.inline(segment_bytes) {
            Ok(t)
        } else {
            self.map_unmap(clock, t, segments, segment_bytes)
        }
    }

    /// Book the CPU work of `stack` (socket layer) and `driver` (driver and protocol) from
    /// `start`: when it is done, before any mapping.
    pub(super) fn cpu_work(&mut self, start: Ps, stack: Ps, driver: Ps) -> Ps {
        self.stack += stack;
        self.driver += driver;
        start + stack + driver
    }

    /// The frames of `wire_bytes` leave the NIC at `now`, the current time: when the last has
    /// crossed the switch and the other NIC.
    pub(super) fn send_on_wire(&mut self, now: Ps, wire_bytes: u64) -> Ps {
        let c = self.costs;
        let wire = self.book_wire(now, now, wire_bytes);
        wire + Ps::from_ns(c.switch_latency_ns + c.nic_latency_ns)
    }

    /// Book the wire for `wire_bytes` at the line rate from `at`, with the current time
    /// `clock`: when the last byte has left.
    pub(super) fn book_wire(&mut self, clock: Ps, at: Ps, wire_bytes: u64) -> Ps {
        let wire_ps = Ps::for_bytes(wire_bytes, self.costs.link_bits_per_s / 8);
        let g = self.wire.book(clock, at, wire_ps);
        if self.timeline.is_on() {
            self.timeline
                .slice(Track::Wire(self.index), "frames", g.start, wire_ps);
        }
        g.end
    }

    /// Busy time of the host's cores over `elapsed` times `cores`.
    pub(super) fn utilization(&self, elapsed: Ps, cores: usize) -> f64 {
        let busy: u64 = self.cores.iter().map(|c| c.stats().busy_ps.0).sum();
        busy as f64 / (elapsed.0.max(1) as f64 * cores.max(1) as f64)
    }

    /// Time the host's link carried its NIC's DMA, both directions.
    pub(super) fn bus_ps(&self) -> Ps {
        self.link[0].stats().busy_ps + self.link[1].stats().busy_ps
    }

    // The NIC's DMA on the host's link.

    /// One DMA transfer of `len` bytes at device address `addr` by the NIC, started at `t`,
    /// with the current time `clock`: when it is done. The link (one resource per direction)
    /// is held for the time the transfer's data packets take on it; the transfer ends when the
    /// bus model says, counted from when it got the link (a read's latency overlaps other
    /// transfers' data).
    fn dma(
        &mut self,
        bus: &mut BusTimes,
        clock: Ps,
        direction: Direction,
        t: Ps,
        addr: u64,
        len: u64,
    ) -> Result<Ps> {
        let (latency, occupancy) = bus.times(direction, addr, len)?;
        let write = direction == Direction::Write;
        let g = self.link[usize::from(write)].book(clock, t, occupancy);
        if self.timeline.is_on() {
            let track = Track::Link {
                host: self.index,
                write,
            };
            let name = if write { "DMA write" } else { "DMA read" };
            self.timeline.slice(track, name, g.start, occupancy);
        }
        Ok(g.end.max(g.start + latency))
    }

    /// The next entry's address in ring `ring` ([`SEND_RING`], [`RECEIVE_RING`] or
    /// [`COMPLETIONS`]), of entries of `bytes`.
    fn slot(&mut self, ring: usize, bytes: u64) -> u64 {
        let n = self.costs.ring_entries;
        self.cursor[ring] += 1;
        self.rings[ring].dma_addr + (self.cursor[ring] % n) * bytes
    }

    /// The NIC sends `segments` segments of `segment_bytes` (headers added), its doorbell rung
    /// at `t`: when the last segment's data has crossed the link (each descriptor read first,
    /// since it holds the buffer's address; an inlined frame comes with its descriptor). The
    /// completions it writes do not hold the send up. Without a bus, at once.
    pub(super) fn nic_send(
        &mut self,
        bus: Option<&mut BusTimes>,
        clock: Ps,
        mut t: Ps,
        segments: u64,
        segment_bytes: u64,
    ) -> Result<Ps> {
        let Some(bus) = bus else {
            return Ok(t);
        };
        let (desc, cqe) = (self.costs.tx_descriptor_bytes, self.costs.completion_bytes);
        let frame = self.frame_bytes(segment_bytes);
        let inline = self.inline(segment_bytes);
        for _ in 0..segments {
            let d = self.slot(SEND_RING, desc);
            if inline {
                t = self.dma(bus, clock, Direction::Read, t, d, desc + frame)?;
            } else {
                t = self.dma(bus, clock, Direction::Read, t, d, desc)?;
                t = self.dma(bus, clock, Direction::Read, t, 0, frame)?;
            }
            let q = self.slot(COMPLETIONS, cqe);
            self.dma(bus, clock, Direction::Write, t, q, cqe)?;
        }
        Ok(t)
    }

    /// The NIC writes `frames` received frames holding `payload` bytes in all (0: frames
    /// without payload, such as ACKs), arrived at `t`: when the last frame and its completion
    /// are in memory. The receive descriptors were read ahead and hold nothing up. Without a
    /// bus, at once.
    pub(super) fn nic_receive(
        &mut self,
        bus: Option<&mut BusTimes>,
        clock: Ps,
        mut t: Ps,
        frames: u64,
        payload: u64,
    ) -> Result<Ps> {
        let Some(bus) = bus else {
            return Ok(t);
        };
        let (desc, cqe) = (self.costs.rx_descriptor_bytes, self.costs.completion_bytes);
        let per_frame = self.costs.mtu_bytes - self.header_bytes;
        let mut left = payload;
        for _ in 0..frames {
            let bytes = left.min(per_frame);
            left -= bytes;
            let d = self.slot(RECEIVE_RING, desc);
            self.dma(bus, clock, Direction::Read, t, d, desc)?;
            t = self.dma(bus, clock, Direction::Write, t, 0, self.frame_bytes(bytes))?;
            let q = self.slot(COMPLETIONS, cqe);
            t = self.dma(bus, clock, Direction::Write, t, q, cqe)?;
        }
        Ok(t)
    }
}

/// The send ring, in [`Host::rings`] and [`Host::cursor`].
const SEND_RING: usize = 0;
/// The receive ring.
const RECEIVE_RING: usize = 1;
/// The completion queue (shared by sends and receives).
const COMPLETIONS: usize = 2;

/// The platform's bus model, with the times it gave cached: the model's time depends on a
/// transfer's address only through its offset in a page, so each (direction, offset, length)
/// is asked once for both hosts.
pub(super) struct BusTimes<'a> {
    /// The bus model.
    bus: &'a Bus,
    /// Bus latency and link occupancy by direction (read?), offset in a page and length.
    cache: HashMap<(bool, u64, u64), (Ps, Ps)>,
}

impl<'a> BusTimes<'a> {
    /// An empty cache over `bus`.
    pub(super) fn new(bus: &'a Bus) -> Self {
        BusTimes {
            bus,
            cache: HashMap::new(),
        }
    }

    /// The latency of a transfer of `len` bytes at device address `addr` in `direction`, and
    /// the time its data packets occupy the link: computed once per offset in
    /// [`ADDRESS_PERIOD_BYTES`] (the bus model's timing repeats with that period).
    fn times(&mut self, direction: Direction, addr: u64, len: u64) -> Result<(Ps, Ps)> {
        let key = (
            direction == Direction::Read,
            addr % ADDRESS_PERIOD_BYTES,
            len,
        );
        if let Some(v) = self.cache.get(&key) {
            return Ok(*v);
        }
        let tr = self
            .bus
            .transfer(direction, BusAddr(key.1 + ADDRESS_PERIOD_BYTES), len)?;
        let occupancy = tr
            .entries
            .iter()
            .filter(|e| e.command.carries_data())
            .fold(Ps::ZERO, |a, e| a + (e.end_ps - e.start_ps));
        let v = (tr.totals.bus_time_ps, occupancy);
        self.cache.insert(key, v);
        Ok(v)
    }
}
