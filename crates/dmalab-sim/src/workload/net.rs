//! Network workloads between two hosts, like uperf or netperf: request/response (UDP) with
//! concurrent instances, and TCP streams. Each host maps and unmaps its NIC's buffers through
//! its own [`DmaMapper`] (a TCE window, a direct window, ...), so the mapping costs land on the
//! CPUs that pay them, and CPUs, wires and NICs are queueing resources on the event engine.
//!
//! A message of `m` bytes crosses as `ceil(m / mss)` frames. Sending costs the CPU a per-message
//! and a per-frame (or, with TSO, a per-segment) cost plus one map per transmit buffer and, at
//! transmit completion, its unmap; receiving costs a per-frame cost plus, per frame, the unmap
//! of the filled ring buffer and the map of its replacement, then a per-message cost (socket,
//! wake-up). The wire carries the frames at the line rate; each NIC adds its latency.
//!
//! Three details decide where a TCE window's costs bite under load:
//! - With `map_lock = "table"`, every map and unmap holds the translation table's one lock
//!   across its allocation and its hypervisor call, so the hosts' cores queue for it (and spin:
//!   the wait is CPU time). Linux on POWER allocated TCEs under a single per-table lock and made
//!   the hypervisor call before releasing it until the IOMMU pools of Linux 3.x split the table;
//!   RHEL 6.4, seed 000's system, is built on 2.6.32.
//! - A TCP receiver acknowledges every `ack_every_frames` data frames (delayed ACK, RFC 1122
//!   4.2.3.2 and RFC 5681 4.2), and the sender's core receives those ACKs, each into a posted
//!   receive buffer, so the sender pays receive-side mapping too.
//! - A frame no longer than `tx_inline_bytes` is copied into the send descriptor and needs no
//!   mapping (small requests and ACKs on adapters that inline).
//!
//! With a bus ([`run_on_bus`]), each NIC's DMA crosses its host's link, timed by the platform's
//! bus model at the buffer's address: to send, the NIC reads the descriptor, then the frame or
//! TSO segment, and writes a completion; to receive, it reads a receive descriptor, writes each
//! frame and a completion. The rings and completion queues are coherent allocations made once
//! per host at the start (they stay mapped for the whole run: the exposure report counts them).

use crate::bus::trace::Direction;
use crate::bus::Bus;
use crate::config::costs::{MapLock, NetCosts};
use crate::config::workload::{check, valid, NetWorkload};
use crate::dma::{DmaMapper, MapTime, Mapping};
use crate::engine::{Engine, Flow};
use crate::error::{invalid_arg, Result};
use crate::iommu::Translation;
use crate::progress::Progress;
use crate::proto::{ETHERNET_HEADER_BYTES, IPV4_TCP_TIMESTAMP_HEADER_BYTES, IPV4_UDP_HEADER_BYTES};
use crate::resource::{Calendar, Resource};
use crate::units::BusAddr;
use crate::units::Ps;
use serde::Serialize;
use std::collections::HashMap;

/// What a network run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetResult {
    /// The workload run.
    pub workload: NetWorkload,
    /// Transactions (RR) or messages (stream) per second.
    pub per_second: f64,
    /// Payload bits per second (stream), or request plus response bits per second (RR).
    pub bits_per_s: f64,
    /// Mean latency of a transaction or a message's delivery.
    pub mean_latency_ps: Ps,
    /// Median latency.
    pub p50_latency_ps: Ps,
    /// 99th percentile latency.
    pub p99_latency_ps: Ps,
    /// CPU utilization of the sending (client) host's cores.
    pub client_cpu_utilization: f64,
    /// CPU utilization of the receiving (server) host's cores.
    pub server_cpu_utilization: f64,
    /// Mapping time on the client host, per component, summed over the run.
    pub client_mapping: MapTime,
    /// Mapping time on the server host, per component, summed over the run.
    pub server_mapping: MapTime,
    /// Time the client's cores spun waiting for the mapping layer's table lock.
    pub client_lock_wait_ps: Ps,
    /// Time the server's cores spun waiting for the mapping layer's table lock.
    pub server_lock_wait_ps: Ps,
    /// TCP acknowledgements the receiver sent (streams).
    pub acks: u64,
    /// Client CPU time in the socket layer and system calls (per-message work).
    pub client_stack_ps: Ps,
    /// Client CPU time in the driver and per-frame protocol work (ACKs included).
    pub client_driver_ps: Ps,
    /// Server CPU time in the socket layer and system calls.
    pub server_stack_ps: Ps,
    /// Server CPU time in the driver and per-frame protocol work.
    pub server_driver_ps: Ps,
    /// Time the client's link carried its NIC's DMA (descriptors, frames, completions).
    pub client_bus_ps: Ps,
    /// Time the server's link carried its NIC's DMA.
    pub server_bus_ps: Ps,
    /// Simulated time.
    pub elapsed_ps: Ps,
    /// Engine events handled.
    pub events: u64,
}

/// Which host a stage runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

struct Hosts<'a> {
    /// Per side: one pool of all cores (request/response: any core serves), or one resource per
    /// core with each flow pinned to one (streams, as receive-side scaling keeps a flow on a core).
    cpu: [Vec<Resource>; 2],
    /// Each direction's wire (ACKs book it ahead of the events that carry data).
    wire: [Calendar; 2],
    mapper: [&'a mut DmaMapper; 2],
    mapping: [MapTime; 2],
    /// Each host's mapping-table lock.
    lock: [Calendar; 2],
    /// Whether maps and unmaps take the lock on each side.
    locked: [bool; 2],
    costs: &'a NetCosts,
    /// Frames received since the last receive-buffer chunk was replaced, per side.
    rx_frames: [u64; 2],
    /// Whether the workload is TCP (header size, acknowledgements).
    tcp: bool,
    /// Data frames the receiver has not yet acknowledged.
    unacked: u64,
    /// Per instance: ACKs sent to its sender that the sender's core has not yet processed.
    acks_pending: Vec<u64>,
    /// ACKs sent.
    acks: u64,
    /// The platform's bus, if the NICs' DMA is timed.
    bus: Option<&'a Bus>,
    /// Per host, its link: one resource for what the NIC reads, one for what it writes (a PCIe
    /// link carries both directions at once).
    link: [[Calendar; 2]; 2],
    /// Per host: its send ring, receive ring and completion queue (coherent, mapped once).
    rings: [[Mapping; 3]; 2],
    /// Bus latency and link occupancy by direction, offset in a page and length (the model's
    /// time depends on the address only through its offset).
    bus_times: HashMap<(bool, u64, u64), (Ps, Ps)>,
    /// The current event's time: every booking is at or after it.
    clock: Ps,
    /// CPU time per side in the socket layer and application calls (per-message costs).
    stack: [Ps; 2],
    /// CPU time per side in the driver and per-frame protocol work (per-frame costs, ACKs).
    driver: [Ps; 2],
    /// Entries used so far per host and ring (ring positions).
    cursor: [[u64; 3]; 2],
}

impl Hosts<'_> {
    fn idx(side: Side) -> usize {
        match side {
            Side::Client => 0,
            Side::Server => 1,
        }
    }

    fn core(&mut self, side: Side, instance: u64) -> &mut Resource {
        let cores = &mut self.cpu[Self::idx(side)];
        let n = cores.len() as u64;
        &mut cores[(instance % n) as usize]
    }

    fn header_bytes(&self) -> u64 {
        if self.tcp {
            IPV4_TCP_TIMESTAMP_HEADER_BYTES
        } else {
            IPV4_UDP_HEADER_BYTES
        }
    }

    fn frames(&self, bytes: u64) -> u64 {
        bytes
            .div_ceil(self.costs.mtu_bytes - self.header_bytes())
            .max(1)
    }

    /// Map and unmap `buffers` buffers of `bytes` on `side`, the CPU starting at `t`: when it is
    /// done. Both are charged together (a transmit buffer's unmap at its completion and a
    /// receive buffer's replacement map run on the same CPU); each takes the table lock on its
    /// own, so other cores' maps can come between them.
    fn map_unmap(&mut self, side: Side, mut t: Ps, buffers: u64, bytes: u64) -> Result<Ps> {
        let i = Self::idx(side);
        for b in 0..buffers {
            let phys = (1 << 32) + b * 65536;
            let (m, mt) = self.mapper[i].map(t, 0, phys, bytes.max(1))?;
            t = self.hold(i, t, mt.total());
            let ut = self.mapper[i].unmap(t, 0, &m)?;
            t = self.hold(i, t, ut.total());
            self.mapping[i].add(&mt);
            self.mapping[i].add(&ut);
        }
        Ok(t)
    }

    /// The CPU of host `i` runs mapping work of `work` from `t`, under the table lock if the host
    /// takes one (spinning while it waits): when it is done.
    fn hold(&mut self, i: usize, t: Ps, work: Ps) -> Ps {
        if self.locked[i] && work > Ps::ZERO {
            self.lock[i].book(self.clock, t, work).end
        } else {
            t + work
        }
    }

    /// `frames` frames have filled receive buffers on `side`, the CPU starting at `t`: replace
    /// the chunks they completed. Receive buffers are carved from chunks mapped once per
    /// `rx_frames_per_map` frames: a filled chunk is unmapped and a fresh one mapped in its place.
    fn refill(&mut self, side: Side, t: Ps, frames: u64) -> Result<Ps> {
        let c = self.costs;
        let i = Self::idx(side);
        self.rx_frames[i] += frames;
        let chunks = self.rx_frames[i] / c.rx_frames_per_map;
        self.rx_frames[i] %= c.rx_frames_per_map;
        self.map_unmap(
            side,
            t,
            chunks,
            c.rx_frames_per_map * (c.mtu_bytes + ETHERNET_HEADER_BYTES),
        )
    }

    /// Transmit buffers of `segments` segments of `segment_bytes` on `side` from `t`: mapped,
    /// or copied into the descriptors when a frame fits the inline threshold.
    fn transmit(&mut self, side: Side, t: Ps, segments: u64, segment_bytes: u64) -> Result<Ps> {
        let frame = segment_bytes + self.header_bytes() + ETHERNET_HEADER_BYTES;
        if frame <= self.costs.tx_inline_bytes {
            Ok(t)
        } else {
            self.map_unmap(side, t, segments, segment_bytes)
        }
    }

    /// The sending CPU's work for `bytes` written by `messages` send calls on `side` for
    /// `instance` at `now` (maps included): when it is done, when the NIC has read the data, and
    /// the bytes the wire will carry.
    ///
    /// The core also handles the ACKs its stream has received since its last send: each is a
    /// received frame, into a posted receive buffer.
    fn send_cpu(
        &mut self,
        side: Side,
        instance: u64,
        now: Ps,
        bytes: u64,
        messages: u64,
    ) -> Result<(Ps, Ps, u64)> {
        let c = self.costs;
        let frames = self.frames(bytes);
        let (segments, segment_bytes) = if self.tcp {
            let n = bytes.div_ceil(c.tso_bytes);
            (n, bytes.div_ceil(n))
        } else {
            (frames, bytes.div_ceil(frames))
        };
        let acks = match self.acks_pending.get_mut(instance as usize) {
            Some(a) => std::mem::take(a),
            None => 0,
        };
        let start = self.core(side, instance).next_free().max(now);
        let i = Self::idx(side);
        let stack = Ps::from_ns(messages * c.send_per_message_ns);
        let driver = Ps::from_ns(segments * c.send_per_frame_ns + acks * c.receive_per_frame_ns);
        self.stack[i] += stack;
        self.driver[i] += driver;
        let mut t = start + stack + driver;
        t = self.transmit(side, t, segments, segment_bytes)?;
        t = self.refill(side, t, acks)?;
        self.nic_receive(side, start, acks, 0)?;
        let cpu = self.core(side, instance).acquire(now, t - start);
        let sent = self.nic_send(side, cpu.end, segments, segment_bytes)?;
        Ok((
            cpu.end,
            sent,
            bytes + frames * (self.header_bytes() + c.frame_overhead_bytes),
        ))
    }

    /// One DMA transfer of `len` bytes at device address `addr` by host `i`'s NIC, started at
    /// `t`: when it is done. The link (one resource per direction) is held for the time the
    /// transfer's data packets take on it; the transfer ends when the bus model says, counted
    /// from when it got the link (a read's latency overlaps other transfers' data).
    fn dma(&mut self, i: usize, direction: Direction, t: Ps, addr: u64, len: u64) -> Result<Ps> {
        let Some(bus) = self.bus else {
            return Ok(t);
        };
        let key = (direction == Direction::Read, addr % 4096, len);
        let (latency, occupancy) = match self.bus_times.get(&key) {
            Some(v) => *v,
            None => {
                let tr = bus.transfer(direction, BusAddr(key.1 + 4096), len)?;
                let occupancy = tr
                    .entries
                    .iter()
                    .filter(|e| e.command.carries_data())
                    .fold(Ps::ZERO, |a, e| a + (e.end_ps - e.start_ps));
                let v = (tr.totals.bus_time_ps, occupancy);
                self.bus_times.insert(key, v);
                v
            }
        };
        let g =
            self.link[i][usize::from(direction == Direction::Write)].book(self.clock, t, occupancy);
        Ok(g.end.max(g.start + latency))
    }

    /// The next entry's address in ring `ring` (0 send, 1 receive, 2 completions) of host `i`.
    fn slot(&mut self, i: usize, ring: usize, bytes: u64) -> u64 {
        let n = self.costs.ring_entries;
        self.cursor[i][ring] += 1;
        self.rings[i][ring].dma_addr + (self.cursor[i][ring] % n) * bytes
    }

    /// `side`'s NIC sends `segments` segments of `segment_bytes` (headers added), its doorbell
    /// rung at `t`: when the last segment's data has crossed the link (each descriptor read
    /// first, since it holds the buffer's address; an inlined frame comes with its descriptor).
    /// The completions it writes do not hold the send up.
    fn nic_send(&mut self, side: Side, mut t: Ps, segments: u64, segment_bytes: u64) -> Result<Ps> {
        if self.bus.is_none() {
            return Ok(t);
        }
        let c = self.costs;
        let i = Self::idx(side);
        let (desc, cqe) = (c.tx_descriptor_bytes, c.completion_bytes);
        let frame = segment_bytes + self.header_bytes() + ETHERNET_HEADER_BYTES;
        let inline = frame <= c.tx_inline_bytes;
        for _ in 0..segments {
            let d = self.slot(i, 0, desc);
            if inline {
                t = self.dma(i, Direction::Read, t, d, desc + frame)?;
            } else {
                t = self.dma(i, Direction::Read, t, d, desc)?;
                t = self.dma(i, Direction::Read, t, 0, frame)?;
            }
            let q = self.slot(i, 2, cqe);
            self.dma(i, Direction::Write, t, q, cqe)?;
        }
        Ok(t)
    }

    /// `side`'s NIC writes `frames` received frames holding `payload` bytes in all (0: frames
    /// without payload, such as ACKs), arrived at `t`: when the last frame and its completion
    /// are in memory. The receive descriptors were read ahead and hold nothing up.
    fn nic_receive(&mut self, side: Side, mut t: Ps, frames: u64, payload: u64) -> Result<Ps> {
        if self.bus.is_none() {
            return Ok(t);
        }
        let c = self.costs;
        let i = Self::idx(side);
        let (desc, cqe) = (c.rx_descriptor_bytes, c.completion_bytes);
        let per_frame = c.mtu_bytes - self.header_bytes();
        let overhead = self.header_bytes() + ETHERNET_HEADER_BYTES;
        let mut left = payload;
        for _ in 0..frames {
            let bytes = left.min(per_frame);
            left -= bytes;
            let d = self.slot(i, 1, desc);
            self.dma(i, Direction::Read, t, d, desc)?;
            t = self.dma(i, Direction::Write, t, 0, bytes + overhead)?;
            let q = self.slot(i, 2, cqe);
            t = self.dma(i, Direction::Write, t, q, cqe)?;
        }
        Ok(t)
    }

    /// The frames of `wire_bytes` leave `side`'s NIC at `now`: when the last has crossed the
    /// switch and the other NIC.
    fn wire(&mut self, side: Side, now: Ps, wire_bytes: u64) -> Ps {
        let c = self.costs;
        let wire_ps = Ps::for_bytes(wire_bytes, c.link_bits_per_s / 8);
        let wire = self.wire[Self::idx(side)].book(self.clock, now, wire_ps);
        wire.end + Ps::from_ns(c.switch_latency_ns + c.nic_latency_ns)
    }

    /// Receive `bytes` on `side`, arrived at `now`: its CPU; returns when the application has it.
    /// A TCP stream's receiver also sends its ACKs (no payload) back over the other wire.
    fn receive(
        &mut self,
        side: Side,
        instance: u64,
        now: Ps,
        bytes: u64,
        stream: bool,
    ) -> Result<Ps> {
        let c = self.costs;
        let frames = self.frames(bytes);
        let now = self.nic_receive(side, now, frames, bytes)?;
        let start = self.core(side, instance).next_free().max(now);
        let i = Self::idx(side);
        let stack = Ps::from_ns(c.receive_per_message_ns);
        let driver = Ps::from_ns(frames * c.receive_per_frame_ns);
        self.stack[i] += stack;
        self.driver[i] += driver;
        let mut t = start + stack + driver;
        t = self.refill(side, t, frames)?;
        if stream && self.tcp {
            self.unacked += frames;
            let acks = self.unacked / c.ack_every_frames;
            self.unacked %= c.ack_every_frames;
            let ack_ps = Ps::from_ns(acks * c.send_per_frame_ns);
            self.driver[i] += ack_ps;
            t += ack_ps;
            t = self.transmit(side, t, acks, 0)?;
            self.nic_send(side, t, acks, 0)?;
            if let Some(a) = self.acks_pending.get_mut(instance as usize) {
                *a += acks;
            }
            self.acks += acks;
            // The ACKs share the reverse wire with nothing else; nothing waits on them there.
            let ack_wire = acks * (IPV4_TCP_TIMESTAMP_HEADER_BYTES + c.frame_overhead_bytes);
            let ack_ps = Ps::for_bytes(ack_wire, c.link_bits_per_s / 8);
            self.wire[Self::idx(side)].book(self.clock, t, ack_ps);
        }
        Ok(self.core(side, instance).acquire(now, t - start).end)
    }
}

enum Ev {
    /// An instance starts its next transaction or stream unit.
    Start { instance: u64 },
    /// Frames from `side` reach its NIC's wire (after the NIC's latency).
    ToWire {
        side: Side,
        instance: u64,
        started: Ps,
        wire_bytes: u64,
    },
    /// The frames from the other side arrived at `side`'s NIC.
    Arrive {
        side: Side,
        instance: u64,
        started: Ps,
    },
    /// The server's application replies.
    Reply { instance: u64, started: Ps },
    /// A stream's receiver has read a unit: its sender learns the window has room.
    WindowUpdate { instance: u64 },
}

/// Run `workload` between a client with `client` and a server with `server` mappers, the NICs'
/// DMA untimed (their latency stands for it).
pub fn run(
    costs: &NetCosts,
    client: &mut DmaMapper,
    server: &mut DmaMapper,
    workload: NetWorkload,
    progress: &Progress,
) -> Result<NetResult> {
    run_on_bus(costs, client, server, workload, None, progress)
}

/// Run `workload` with each NIC's DMA (descriptors, frames, completions) timed on its host's
/// link by `bus` (the platform's bus model).
pub fn run_on_bus(
    costs: &NetCosts,
    client: &mut DmaMapper,
    server: &mut DmaMapper,
    workload: NetWorkload,
    bus: Option<&Bus>,
    progress: &Progress,
) -> Result<NetResult> {
    // (instances, bytes, count, request/response?, TCP segmentation offload?)
    let (instances, bytes, total, rr, tcp) = match workload {
        NetWorkload::UdpRr {
            instances,
            message_bytes,
            transactions,
        } => (instances, message_bytes, transactions, true, false),
        NetWorkload::TcpRr {
            instances,
            message_bytes,
            transactions,
        } => (instances, message_bytes, transactions, true, true),
        NetWorkload::UdpStream {
            instances,
            message_bytes,
            messages,
        } => (instances, message_bytes, messages, false, false),
        NetWorkload::TcpStream {
            instances,
            message_bytes,
            messages,
        } => (instances, message_bytes, messages, false, true),
    };
    check("instances", instances, valid::INSTANCES)?;
    check("message_bytes", bytes, valid::MESSAGE_BYTES)?;
    check("transactions or messages", total, valid::COUNT)?;
    // A stream moves in units of one TSO segment's worth of send calls: TCP hands the NIC
    // segments of up to `tso_bytes` from the socket buffer whatever the send size, and the
    // receiver reads what has arrived in one call.
    let (unit_bytes, messages_per_unit) = if rr || !tcp || bytes >= costs.tso_bytes {
        (bytes, 1)
    } else {
        let k = costs.tso_bytes / bytes;
        (k * bytes, k)
    };
    let total_units = if rr {
        total
    } else {
        total.div_ceil(messages_per_unit)
    };
    let cores = usize::try_from(costs.cores).unwrap_or(1);
    // Each host's send ring, receive ring and completion queue, allocated coherent once.
    let mut rings = Vec::with_capacity(2);
    for m in [&mut *client, &mut *server] {
        let n = costs.ring_entries;
        let mut ring =
            |bytes: u64| -> Result<Mapping> { Ok(m.alloc_coherent(Ps::ZERO, 0, n * bytes)?.0) };
        rings.push([
            ring(costs.tx_descriptor_bytes)?,
            ring(costs.rx_descriptor_bytes)?,
            ring(2 * costs.completion_bytes)?,
        ]);
    }
    let rings: [[Mapping; 3]; 2] = match <[[Mapping; 3]; 2]>::try_from(rings) {
        Ok(r) => r,
        Err(_) => return Err(invalid_arg("rings", 0, "one set per host")),
    };
    let pools = |name: &str| -> Vec<Resource> {
        if rr {
            vec![Resource::new(format!("{name} cores"), cores)]
        } else {
            (0..cores)
                .map(|i| Resource::new(format!("{name} core {i}"), 1))
                .collect()
        }
    };
    let mut hosts = Hosts {
        cpu: [pools("client"), pools("server")],
        wire: [
            Calendar::new("wire to server"),
            Calendar::new("wire to client"),
        ],
        locked: [&*client, &*server].map(|m| {
            costs.map_lock == MapLock::Table
                && matches!(m.translation(), Translation::Tce | Translation::PageTable)
        }),
        mapper: [client, server],
        mapping: [MapTime::default(); 2],
        lock: [
            Calendar::new("client table lock"),
            Calendar::new("server table lock"),
        ],
        costs,
        rx_frames: [0; 2],
        tcp,
        unacked: 0,
        acks_pending: vec![0; if rr { 0 } else { instances as usize }],
        acks: 0,
        bus,
        link: [
            [
                Calendar::new("client link, NIC reads"),
                Calendar::new("client link, NIC writes"),
            ],
            [
                Calendar::new("server link, NIC reads"),
                Calendar::new("server link, NIC writes"),
            ],
        ],
        rings,
        bus_times: HashMap::new(),
        clock: Ps::ZERO,
        stack: [Ps::ZERO; 2],
        driver: [Ps::ZERO; 2],
        cursor: [[0; 3]; 2],
    };
    progress.start(total_units);
    let mut engine: Engine<Ev> = Engine::new();
    for instance in 0..instances.min(total_units) {
        engine.schedule_in(Ps::ZERO, Ev::Start { instance });
    }
    let (mut started, mut done) = (instances.min(total_units), 0u64);
    // A stream's window in units, and per instance the units sent but not yet read and whether
    // the sender waits for the window to open.
    let window_units = (costs.tcp_window_bytes / unit_bytes).max(1);
    let streams = if rr { 0 } else { instances as usize };
    let (mut in_flight, mut blocked) = (vec![0u64; streams], vec![false; streams]);
    let mut latencies: Vec<Ps> = Vec::new();
    let mut last = Ps::ZERO;
    let run = engine.run_until(Ps(u64::MAX), |eng, now, ev| {
        hosts.clock = now;
        let step = (|| -> Result<()> {
            let nic = Ps::from_ns(costs.nic_latency_ns);
            match ev {
                Ev::Start { instance } => {
                    // A request, or a stream's data, goes client to server.
                    let (cpu_done, sent, wire_bytes) = hosts.send_cpu(
                        Side::Client,
                        instance,
                        now,
                        unit_bytes,
                        messages_per_unit,
                    )?;
                    let to_wire = Ev::ToWire {
                        side: Side::Client,
                        instance,
                        started: now,
                        wire_bytes,
                    };
                    eng.schedule_at(sent + nic, to_wire)?;
                    if let Some(sent) = in_flight.get_mut(instance as usize) {
                        // A stream's sender goes on as soon as its core is done with this send,
                        // unless its window is full: then the receiver's read reopens it.
                        *sent += 1;
                        if started < total_units {
                            if *sent < window_units || !tcp {
                                started += 1;
                                eng.schedule_at(cpu_done, Ev::Start { instance })?;
                            } else if let Some(b) = blocked.get_mut(instance as usize) {
                                *b = true;
                            }
                        }
                    }
                }
                Ev::ToWire {
                    side,
                    instance,
                    started: t0,
                    wire_bytes,
                } => {
                    let arrive = hosts.wire(side, now, wire_bytes);
                    let to = if side == Side::Client {
                        Side::Server
                    } else {
                        Side::Client
                    };
                    eng.schedule_at(
                        arrive,
                        Ev::Arrive {
                            side: to,
                            instance,
                            started: t0,
                        },
                    )?;
                }
                Ev::Arrive {
                    side: Side::Server,
                    instance,
                    started: t0,
                } => {
                    let delivered = hosts.receive(Side::Server, instance, now, unit_bytes, !rr)?;
                    if rr {
                        let reply = Ev::Reply {
                            instance,
                            started: t0,
                        };
                        eng.schedule_at(delivered + Ps::from_ns(costs.server_app_ns), reply)?;
                    } else {
                        latencies.push(delivered - t0);
                        last = last.max(delivered);
                        done += 1;
                        progress.tick(done);
                        // The application's read opens the window; the update reaches the
                        // sender one NIC, the switch and its NIC later.
                        let update =
                            Ps::from_ns(2 * costs.nic_latency_ns + costs.switch_latency_ns);
                        eng.schedule_at(delivered + update, Ev::WindowUpdate { instance })?;
                    }
                }
                Ev::WindowUpdate { instance } => {
                    let i = instance as usize;
                    if let Some(sent) = in_flight.get_mut(i) {
                        *sent = sent.saturating_sub(1);
                    }
                    if blocked.get(i) == Some(&true) && started < total_units {
                        blocked[i] = false;
                        started += 1;
                        eng.schedule_at(now, Ev::Start { instance })?;
                    }
                }
                Ev::Reply {
                    instance,
                    started: t0,
                } => {
                    let (_, sent, wire_bytes) =
                        hosts.send_cpu(Side::Server, instance, now, bytes, 1)?;
                    let to_wire = Ev::ToWire {
                        side: Side::Server,
                        instance,
                        started: t0,
                        wire_bytes,
                    };
                    eng.schedule_at(sent + nic, to_wire)?;
                }
                Ev::Arrive {
                    side: Side::Client,
                    instance,
                    started: t0,
                } => {
                    let delivered = hosts.receive(Side::Client, instance, now, bytes, false)?;
                    latencies.push(delivered - t0);
                    last = last.max(delivered);
                    done += 1;
                    progress.tick(done);
                    if started < total_units {
                        started += 1;
                        eng.schedule_at(delivered, Ev::Start { instance })?;
                    }
                }
            }
            Ok(())
        })();
        step.map(|()| Flow::Continue)
    });
    progress.set(done);
    run?;
    latencies.sort_unstable();
    let secs = last.0.max(1) as f64 / 1e12;
    let n = latencies.len().max(1);
    let pct = |q: f64| {
        latencies
            .get(((n as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(Ps::ZERO)
    };
    let payload_bits = (done * unit_bytes * 8 * if rr { 2 } else { 1 }) as f64;
    Ok(NetResult {
        workload,
        per_second: (done * messages_per_unit) as f64 / secs,
        bits_per_s: payload_bits / secs,
        mean_latency_ps: Ps(latencies.iter().map(|l| l.0).sum::<u64>() / n as u64),
        p50_latency_ps: pct(0.5),
        p99_latency_ps: pct(0.99),
        client_cpu_utilization: utilization(&hosts.cpu[0], last, cores),
        server_cpu_utilization: utilization(&hosts.cpu[1], last, cores),
        client_mapping: hosts.mapping[0],
        server_mapping: hosts.mapping[1],
        client_lock_wait_ps: hosts.lock[0].stats().wait_ps,
        server_lock_wait_ps: hosts.lock[1].stats().wait_ps,
        acks: hosts.acks,
        client_stack_ps: hosts.stack[0],
        client_driver_ps: hosts.driver[0],
        server_stack_ps: hosts.stack[1],
        server_driver_ps: hosts.driver[1],
        client_bus_ps: hosts.link[0][0].stats().busy_ps + hosts.link[0][1].stats().busy_ps,
        server_bus_ps: hosts.link[1][0].stats().busy_ps + hosts.link[1][1].stats().busy_ps,
        elapsed_ps: last,
        events: engine.handled(),
    })
}

/// Busy time of a side's cores over `elapsed` times `cores`.
fn utilization(cpus: &[Resource], elapsed: Ps, cores: usize) -> f64 {
    let busy: u64 = cpus.iter().map(|c| c.stats().busy_ps.0).sum();
    busy as f64 / (elapsed.0.max(1) as f64 * cores.max(1) as f64)
}
