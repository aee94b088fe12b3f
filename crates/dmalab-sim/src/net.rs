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

use crate::dma::{DmaMapper, MapTime};
use crate::engine::Engine;
use crate::error::{invalid_arg, Result};
use crate::params::ParamReader;
use crate::resource::Resource;
use crate::units::Ps;
use serde::Serialize;

/// IPv4 and UDP headers (RFC 791, RFC 768) per frame. The model charges them to TCP frames too,
/// whose IPv4 and TCP headers are 40 bytes.
const IP_UDP_HEADER_BYTES: u64 = 28;

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
        })
    }
}

/// A network workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum NetWorkload {
    /// UDP request/response: each instance sends `message_bytes`, waits for as many back.
    UdpRr {
        /// Concurrent instances.
        instances: u64,
        /// Bytes of each request and of each response.
        message_bytes: u64,
        /// Transactions to complete, over all instances.
        transactions: u64,
    },
    /// TCP request/response: as UDP, with TCP's segmentation offload on each send.
    TcpRr {
        /// Concurrent connections.
        instances: u64,
        /// Bytes of each request and of each response.
        message_bytes: u64,
        /// Transactions to complete, over all connections.
        transactions: u64,
    },
    /// UDP stream: each instance sends datagrams back to back; each is its own frames.
    UdpStream {
        /// Concurrent senders.
        instances: u64,
        /// Bytes per datagram.
        message_bytes: u64,
        /// Datagrams to deliver, over all instances.
        messages: u64,
    },
    /// TCP stream: each instance sends messages back to back (no window is modelled).
    TcpStream {
        /// Concurrent connections.
        instances: u64,
        /// Bytes per send call.
        message_bytes: u64,
        /// Messages to deliver, over all instances.
        messages: u64,
    },
}

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
    wire: [Resource; 2],
    mapper: [&'a mut DmaMapper; 2],
    mapping: [MapTime; 2],
    costs: &'a NetCosts,
    /// Frames received since the last receive-buffer chunk was replaced, per side.
    rx_frames: [u64; 2],
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

    fn frames(&self, bytes: u64) -> u64 {
        bytes
            .div_ceil(self.costs.mtu_bytes - IP_UDP_HEADER_BYTES)
            .max(1)
    }

    /// Map and unmap `buffers` buffers of `bytes` on `side` at `now`: their CPU time. Both are
    /// charged together (a transmit buffer's unmap at its completion and a receive buffer's
    /// replacement map run on the same CPU).
    fn map_cost(&mut self, side: Side, now: Ps, buffers: u64, bytes: u64) -> Result<Ps> {
        let i = Self::idx(side);
        let mut total = Ps::ZERO;
        for b in 0..buffers {
            let phys = (1 << 32) + b * 65536;
            let (m, t) = self.mapper[i].map(now, 0, phys, bytes.max(1))?;
            let u = self.mapper[i].unmap(now, 0, &m)?;
            self.mapping[i].add(&t);
            self.mapping[i].add(&u);
            total += t.total() + u.total();
        }
        Ok(total)
    }

    /// The sending CPU's work for `bytes` written by `messages` send calls on `side` for
    /// `instance` at `now` (maps included): when it is done, and the bytes the wire will carry.
    fn send_cpu(
        &mut self,
        side: Side,
        instance: u64,
        now: Ps,
        bytes: u64,
        messages: u64,
        tso: bool,
    ) -> Result<(Ps, u64)> {
        let c = self.costs;
        let frames = self.frames(bytes);
        let (segments, segment_bytes) = if tso {
            let n = bytes.div_ceil(c.tso_bytes);
            (n, bytes.div_ceil(n))
        } else {
            (frames, bytes.div_ceil(frames))
        };
        let maps = self.map_cost(side, now, segments, segment_bytes)?;
        let cpu_ps =
            Ps::from_ns(messages * c.send_per_message_ns + segments * c.send_per_frame_ns) + maps;
        let cpu = self.core(side, instance).acquire(now, cpu_ps);
        Ok((
            cpu.end,
            bytes + frames * (IP_UDP_HEADER_BYTES + c.frame_overhead_bytes),
        ))
    }

    /// The frames of `wire_bytes` leave `side`'s NIC at `now`: when the last has crossed the
    /// switch and the other NIC.
    fn wire(&mut self, side: Side, now: Ps, wire_bytes: u64) -> Ps {
        let c = self.costs;
        let wire_ps = Ps::for_bytes(wire_bytes, c.link_bits_per_s / 8);
        let wire = self.wire[Self::idx(side)].acquire(now, wire_ps);
        wire.end + Ps::from_ns(c.switch_latency_ns + c.nic_latency_ns)
    }

    /// Receive `bytes` on `side`, arrived at `now`: its CPU; returns when the application has it.
    fn receive(&mut self, side: Side, instance: u64, now: Ps, bytes: u64) -> Result<Ps> {
        let c = self.costs;
        let frames = self.frames(bytes);
        // Receive buffers are carved from chunks mapped once per `rx_frames_per_map` frames:
        // a filled chunk is unmapped and a fresh one mapped in its place.
        let i = Self::idx(side);
        self.rx_frames[i] += frames;
        let chunks = self.rx_frames[i] / c.rx_frames_per_map;
        self.rx_frames[i] %= c.rx_frames_per_map;
        let maps = self.map_cost(side, now, chunks, c.rx_frames_per_map * (c.mtu_bytes + 14))?;
        let cpu_ps = Ps::from_ns(frames * c.receive_per_frame_ns + c.receive_per_message_ns) + maps;
        Ok(self.core(side, instance).acquire(now, cpu_ps).end)
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
}

/// Run `workload` between a client with `client` and a server with `server` mappers.
pub fn run(
    costs: &NetCosts,
    client: &mut DmaMapper,
    server: &mut DmaMapper,
    workload: NetWorkload,
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
    if !(1..=10_000).contains(&instances) {
        return Err(invalid_arg("instances", instances, "1..=10000"));
    }
    if !(1..=1 << 24).contains(&bytes) {
        return Err(invalid_arg("message_bytes", bytes, "1..=16 MiB"));
    }
    if total == 0 {
        return Err(invalid_arg("transactions or messages", 0, "at least 1"));
    }
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
            Resource::new("wire to server", 1),
            Resource::new("wire to client", 1),
        ],
        mapper: [client, server],
        mapping: [MapTime::default(); 2],
        costs,
        rx_frames: [0; 2],
    };
    crate::progress::start(total_units);
    let mut engine: Engine<Ev> = Engine::new();
    for instance in 0..instances.min(total_units) {
        engine.schedule_in(Ps::ZERO, Ev::Start { instance });
    }
    let (mut started, mut done) = (instances.min(total_units), 0u64);
    let mut latencies: Vec<Ps> = Vec::new();
    let mut last = Ps::ZERO;
    let mut error = None;
    engine.run_until(Ps(u64::MAX), |eng, now, ev| {
        let step = (|| -> Result<()> {
            let nic = Ps::from_ns(costs.nic_latency_ns);
            match ev {
                Ev::Start { instance } => {
                    // A request, or a stream's data, goes client to server.
                    let (cpu_done, wire_bytes) = hosts.send_cpu(
                        Side::Client,
                        instance,
                        now,
                        unit_bytes,
                        messages_per_unit,
                        tcp,
                    )?;
                    let to_wire = Ev::ToWire {
                        side: Side::Client,
                        instance,
                        started: now,
                        wire_bytes,
                    };
                    eng.schedule_at(cpu_done + nic, to_wire)?;
                    if !rr && started < total_units {
                        // A stream's sender does not wait for the receiver (no window is
                        // modelled): its next send starts when its core is done with this one.
                        started += 1;
                        eng.schedule_at(cpu_done, Ev::Start { instance })?;
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
                    let delivered = hosts.receive(Side::Server, instance, now, unit_bytes)?;
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
                        if done % crate::progress::EVERY == 0 {
                            crate::progress::set(done);
                        }
                    }
                }
                Ev::Reply {
                    instance,
                    started: t0,
                } => {
                    let (cpu_done, wire_bytes) =
                        hosts.send_cpu(Side::Server, instance, now, bytes, 1, tcp)?;
                    let to_wire = Ev::ToWire {
                        side: Side::Server,
                        instance,
                        started: t0,
                        wire_bytes,
                    };
                    eng.schedule_at(cpu_done + nic, to_wire)?;
                }
                Ev::Arrive {
                    side: Side::Client,
                    instance,
                    started: t0,
                } => {
                    let delivered = hosts.receive(Side::Client, instance, now, bytes)?;
                    latencies.push(delivered - t0);
                    last = last.max(delivered);
                    done += 1;
                    if done % crate::progress::EVERY == 0 {
                        crate::progress::set(done);
                    }
                    if started < total_units {
                        started += 1;
                        eng.schedule_at(delivered, Ev::Start { instance })?;
                    }
                }
            }
            Ok(())
        })();
        step.map_err(|e| error = Some(e)).is_ok()
    });
    crate::progress::set(done);
    if let Some(e) = error {
        return Err(e);
    }
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
        elapsed_ps: last,
        events: engine.handled(),
    })
}

/// Busy time of a side's cores over `elapsed` times `cores`.
fn utilization(cpus: &[Resource], elapsed: Ps, cores: usize) -> f64 {
    let busy: u64 = cpus.iter().map(|c| c.stats().busy_ps.0).sum();
    busy as f64 / (elapsed.0.max(1) as f64 * cores.max(1) as f64)
}
