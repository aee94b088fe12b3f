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
//!
//! The model is split by concept: `host` holds one side's CPUs, wire, mapper, table lock, NIC
//! rings and link, and the mapping and DMA work they do; `model` holds the two hosts and what
//! they share (the protocol, the ACKs in flight, the streams' windows) and the send and receive
//! paths that join them; `events` has one handler per engine event.

mod events;
mod host;
mod model;

use crate::bus::Bus;
use crate::config::costs::NetCosts;
use crate::config::workload::{check, valid, NetWorkload};
use crate::dma::{DmaMapper, MapTime};
use crate::engine::Engine;
use crate::error::Result;
use crate::progress::Progress;
use crate::units::Ps;
use crate::workload::latency::Latency;
use crate::workload::timeline::Timeline;
use events::Ev;
use model::NetModel;
use serde::Serialize;

/// What a network run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetResult {
    /// The workload run.
    pub workload: NetWorkload,
    /// Transactions (RR) or messages (stream) per second.
    pub per_second: f64,
    /// Payload bits per second (stream), or request plus response bits per second (RR).
    pub bits_per_s: f64,
    /// Latency of a transaction or a message's delivery: mean, percentiles, maximum, histogram.
    pub latency: Latency,
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
    /// The host that sends requests, or a stream's data.
    Client,
    /// The host that replies, or receives a stream.
    Server,
}

impl Side {
    /// The side's place in the model's pair of hosts.
    fn index(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }

    /// The host at the other end of the wire.
    fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    /// The side's name, for the names of its resources in breakdowns.
    fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// The workload as the model runs it: its kind, sizes and counts, and the unit it moves.
#[derive(Clone, Copy, Debug)]
struct Shape {
    /// Concurrent transactions, or streams.
    instances: u64,
    /// Bytes of one message (request, response, or a stream's send call).
    bytes: u64,
    /// Request/response (else a stream).
    rr: bool,
    /// TCP (headers, segmentation offload, acknowledgements), else UDP.
    tcp: bool,
    /// Bytes moved per unit: a message, or for a TCP stream one TSO segment's worth of them.
    unit_bytes: u64,
    /// Send calls per unit.
    messages_per_unit: u64,
    /// Units to complete: transactions, or a stream's messages in units.
    total_units: u64,
}

impl Shape {
    /// The shape of `workload` under `costs`, its inputs checked against their valid ranges.
    fn new(workload: NetWorkload, costs: &NetCosts) -> Result<Shape> {
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
        Ok(Shape {
            instances,
            bytes,
            rr,
            tcp,
            unit_bytes,
            messages_per_unit,
            total_units,
        })
    }
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
    run_traced(costs, client, server, workload, bus, progress, 0).map(|(r, _)| r)
}

/// As [`run_on_bus`], also keeping the run's timeline: each host's cores (stack, driver,
/// mapping), its wire (frames) and its link (the NIC's DMA reads and writes), at most
/// `timeline_limit` slices (0: none); each host keeps its own first slices, the client's
/// listed first.
pub fn run_traced(
    costs: &NetCosts,
    client: &mut DmaMapper,
    server: &mut DmaMapper,
    workload: NetWorkload,
    bus: Option<&Bus>,
    progress: &Progress,
    timeline_limit: usize,
) -> Result<(NetResult, Timeline)> {
    let shape = Shape::new(workload, costs)?;
    let mut model = NetModel::new(costs, client, server, shape, bus, progress)?;
    for host in &mut model.hosts {
        host.timeline = Timeline::new(timeline_limit);
    }
    progress.start(shape.total_units);
    let mut engine: Engine<Ev> = Engine::new();
    model.first_starts(&mut engine);
    let run = engine.run_until(Ps(u64::MAX), |eng, now, ev| model.on_event(eng, now, ev));
    progress.set(model.done);
    run?;
    progress.check()?;
    let mut timeline = Timeline::new(timeline_limit);
    for host in &mut model.hosts {
        timeline.absorb(std::mem::take(&mut host.timeline));
    }
    Ok((model.finish(workload, &engine), timeline))
}

impl NetModel<'_> {
    /// What the run measured, from the model after its last event: rates over the time the
    /// last unit was delivered, latency percentiles, and each host's CPU, mapping, lock and
    /// link time.
    fn finish(self, workload: NetWorkload, engine: &Engine<Ev>) -> NetResult {
        let (shape, done, last) = (self.shape, self.done, self.last);
        let secs = last.0.max(1) as f64 / 1e12;
        let payload_bits = (done * shape.unit_bytes * 8 * if shape.rr { 2 } else { 1 }) as f64;
        let [client, server] = &self.hosts;
        NetResult {
            workload,
            per_second: (done * shape.messages_per_unit) as f64 / secs,
            bits_per_s: payload_bits / secs,
            latency: self.latencies.summary(),
            client_cpu_utilization: client.utilization(last, self.cores),
            server_cpu_utilization: server.utilization(last, self.cores),
            client_mapping: client.mapping,
            server_mapping: server.mapping,
            client_lock_wait_ps: client.lock.stats().wait_ps,
            server_lock_wait_ps: server.lock.stats().wait_ps,
            acks: self.acks,
            client_stack_ps: client.stack,
            client_driver_ps: client.driver,
            server_stack_ps: server.stack,
            server_driver_ps: server.driver,
            client_bus_ps: client.bus_ps(),
            server_bus_ps: server.bus_ps(),
            elapsed_ps: last,
            events: engine.handled(),
        }
    }
}
