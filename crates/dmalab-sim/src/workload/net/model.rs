//! The two hosts and what they share: the protocol, the TCP acknowledgements in flight, the
//! streams' windows and what was measured. Sending and receiving a unit join a host's CPU work,
//! its mapping work and its NIC's DMA in the order a driver does them.

use super::host::{BusTimes, Host};
use super::{Shape, Side};
use crate::bus::Bus;
use crate::config::costs::NetCosts;
use crate::config::proto::{IPV4_TCP_TIMESTAMP_HEADER_BYTES, IPV4_UDP_HEADER_BYTES};
use crate::dma::DmaMapper;
use crate::error::Result;
use crate::progress::Progress;
use crate::units::Ps;
use crate::workload::latency::LatencyRecorder;

/// The network model's state between events.
pub(super) struct NetModel<'a> {
    /// The costs of the network stack and the NICs.
    pub(super) costs: &'a NetCosts,
    /// The workload as run.
    pub(super) shape: Shape,
    /// Where progress is reported (units done).
    pub(super) progress: &'a Progress,
    /// The client and the server, by [`Side::index`].
    pub(super) hosts: [Host<'a>; 2],
    /// The platform's bus and its cached times, if the NICs' DMA is timed.
    bus: Option<BusTimes<'a>>,
    /// The protocol's IP and transport headers per frame.
    header_bytes: u64,
    /// Cores per host.
    pub(super) cores: usize,
    /// Data frames the receiver has not yet acknowledged.
    unacked: u64,
    /// Per stream: ACKs sent to its sender that the sender's core has not yet processed.
    acks_pending: Vec<u64>,
    /// ACKs sent.
    pub(super) acks: u64,
    /// The current event's time: every booking is at or after it.
    pub(super) clock: Ps,
    /// A stream's window in units.
    pub(super) window_units: u64,
    /// Per stream: units sent but not yet read by the receiver.
    pub(super) in_flight: Vec<u64>,
    /// Per stream: whether the sender waits for the window to open.
    pub(super) blocked: Vec<bool>,
    /// Units started (transactions or stream units).
    pub(super) started: u64,
    /// Units delivered.
    pub(super) done: u64,
    /// Each delivered unit's latency, from its start to the application having it.
    pub(super) latencies: LatencyRecorder,
    /// When the last unit was delivered.
    pub(super) last: Ps,
}

impl<'a> NetModel<'a> {
    /// The model of `shape` between a client with `client` and a server with `server`
    /// mappers, each host's rings allocated, their NICs' DMA timed on `bus` if there is one.
    pub(super) fn new(
        costs: &'a NetCosts,
        client: &'a mut DmaMapper,
        server: &'a mut DmaMapper,
        shape: Shape,
        bus: Option<&'a Bus>,
        progress: &'a Progress,
    ) -> Result<Self> {
        let header_bytes = if shape.tcp {
            IPV4_TCP_TIMESTAMP_HEADER_BYTES
        } else {
            IPV4_UDP_HEADER_BYTES
        };
        let hosts = [
            Host::new(Side::Client, client, costs, shape.rr, header_bytes)?,
            Host::new(Side::Server, server, costs, shape.rr, header_bytes)?,
        ];
        let streams = if shape.rr {
            0
        } else {
            shape.instances as usize
        };
        Ok(NetModel {
            costs,
            shape,
            progress,
            hosts,
            bus: bus.map(BusTimes::new),
            header_bytes,
            cores: usize::try_from(costs.cores).unwrap_or(1),
            unacked: 0,
            acks_pending: vec![0; streams],
            acks: 0,
            clock: Ps::ZERO,
            window_units: (costs.tcp_window_bytes / shape.unit_bytes).max(1),
            in_flight: vec![0; streams],
            blocked: vec![false; streams],
            started: 0,
            done: 0,
            latencies: LatencyRecorder::new(),
            last: Ps::ZERO,
        })
    }

    /// The frames that carry `bytes` of payload (at least one).
    fn frames(&self, bytes: u64) -> u64 {
        bytes
            .div_ceil(self.costs.mtu_bytes - self.header_bytes)
            .max(1)
    }

    /// The sending CPU's work for `bytes` written by `messages` send calls on `side` for
    /// `instance` at `now` (maps included): when it is done, when the NIC has read the data, and
    /// the bytes the wire will carry.
    ///
    /// The core also handles the ACKs its stream has received since its last send: each is a
    /// received frame, into a posted receive buffer.
    pub(super) fn send(
        &mut self,
        side: Side,
        instance: u64,
        now: Ps,
        bytes: u64,
        messages: u64,
    ) -> Result<(Ps, Ps, u64)> {
        let c = self.costs;
        let frames = self.frames(bytes);
        let (segments, segment_bytes) = if self.shape.tcp {
            let n = bytes.div_ceil(c.tso_bytes);
            (n, bytes.div_ceil(n))
        } else {
            (frames, bytes.div_ceil(frames))
        };
        let acks = match self.acks_pending.get_mut(instance as usize) {
            Some(a) => std::mem::take(a),
            None => 0,
        };
        let clock = self.clock;
        let host = &mut self.hosts[side.index()];
        let start = host.core(instance).next_free().max(now);
        let stack = Ps::from_ns(messages * c.send_per_message_ns);
        let driver = Ps::from_ns(segments * c.send_per_frame_ns + acks * c.receive_per_frame_ns);
        let mut t = host.cpu_work(start, stack, driver);
        t = host.transmit(clock, t, segments, segment_bytes)?;
        t = host.refill(clock, t, acks)?;
        host.nic_receive(self.bus.as_mut(), clock, start, acks, 0)?;
        let cpu = host.core(instance).acquire(now, t - start);
        if host.timeline.is_on() {
            let track = host.core_track(instance, &cpu);
            let mapping = t - (start + stack + driver);
            let parts = [
                ("stack (send)", stack),
                ("driver (send)", driver),
                ("map and unmap", mapping),
            ];
            host.timeline.slices(track, cpu.start, &parts);
        }
        let sent = host.nic_send(self.bus.as_mut(), clock, cpu.end, segments, segment_bytes)?;
        Ok((
            cpu.end,
            sent,
            bytes + frames * (self.header_bytes + c.frame_overhead_bytes),
        ))
    }

    /// Receive `bytes` on `side` for `instance`, arrived at `now`: its NIC writes the frames,
    /// then its CPU takes them; returns when the application has them. A TCP stream's receiver
    /// also sends its ACKs.
    pub(super) fn receive(
        &mut self,
        side: Side,
        instance: u64,
        now: Ps,
        bytes: u64,
        stream: bool,
    ) -> Result<Ps> {
        let c = self.costs;
        let frames = self.frames(bytes);
        let clock = self.clock;
        let host = &mut self.hosts[side.index()];
        let now = host.nic_receive(self.bus.as_mut(), clock, now, frames, bytes)?;
        let start = host.core(instance).next_free().max(now);
        let stack = Ps::from_ns(c.receive_per_message_ns);
        let driver = Ps::from_ns(frames * c.receive_per_frame_ns);
        let mut t = host.cpu_work(start, stack, driver);
        t = host.refill(clock, t, frames)?;
        if stream && self.shape.tcp {
            t = self.acknowledge(side, instance, t, frames)?;
        }
        let host = &mut self.hosts[side.index()];
        let cpu = host.core(instance).acquire(now, t - start);
        if host.timeline.is_on() {
            let track = host.core_track(instance, &cpu);
            let rest = t - (start + stack + driver);
            let parts = [
                ("stack (receive)", stack),
                ("driver (receive)", driver),
                ("map, unmap and ACKs", rest),
            ];
            host.timeline.slices(track, cpu.start, &parts);
        }
        Ok(cpu.end)
    }

    /// The receiver on `side` has taken `frames` data frames of `instance`'s stream, its CPU
    /// at `t`: it acknowledges every `ack_every_frames` of them and sends the ACKs (no
    /// payload) back over its wire, for the sender's core to take at its next send. Returns
    /// when the CPU is done with them.
    fn acknowledge(&mut self, side: Side, instance: u64, mut t: Ps, frames: u64) -> Result<Ps> {
        let c = self.costs;
        let clock = self.clock;
        self.unacked += frames;
        let acks = self.unacked / c.ack_every_frames;
        self.unacked %= c.ack_every_frames;
        let host = &mut self.hosts[side.index()];
        let ack_ps = Ps::from_ns(acks * c.send_per_frame_ns);
        host.driver += ack_ps;
        t += ack_ps;
        t = host.transmit(clock, t, acks, 0)?;
        host.nic_send(self.bus.as_mut(), clock, t, acks, 0)?;
        if let Some(a) = self.acks_pending.get_mut(instance as usize) {
            *a += acks;
        }
        self.acks += acks;
        // The ACKs share the reverse wire with nothing else; nothing waits on them there.
        let ack_wire = acks * (IPV4_TCP_TIMESTAMP_HEADER_BYTES + c.frame_overhead_bytes);
        host.book_wire(clock, t, ack_wire);
        Ok(t)
    }
}
