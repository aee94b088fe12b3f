//! The model's events, the first ones scheduled and one handler each. A unit goes: the client
//! starts it (send), its frames reach the wire, arrive at the server; for request/response the
//! server's application replies and the response goes the same way back to the client, which
//! starts the next transaction; for a stream the server's read opens the sender's window.

use super::model::NetModel;
use super::Side;
use crate::engine::{Engine, Flow};
use crate::error::Result;
use crate::units::Ps;

/// What happens next in the run. Every event names its instance; those of a unit in flight
/// carry when the unit started (for its latency).
pub(super) enum Ev {
    /// An instance starts its next transaction or stream unit.
    Start { instance: u64 },
    /// Frames from `side` reach its NIC's wire (after the NIC's latency).
    ToWire {
        /// The sending host.
        side: Side,
        /// The instance whose unit (or response) the frames carry.
        instance: u64,
        /// When the unit started.
        started: Ps,
        /// The bytes the wire carries: payload, headers and per-frame overhead.
        wire_bytes: u64,
    },
    /// The frames from the other side arrived at `side`'s NIC.
    Arrive {
        /// The receiving host.
        side: Side,
        /// The instance whose unit (or response) arrived.
        instance: u64,
        /// When the unit started.
        started: Ps,
    },
    /// The server's application replies.
    Reply {
        /// The instance whose request it answers.
        instance: u64,
        /// When the request's transaction started.
        started: Ps,
    },
    /// A stream's receiver has read a unit: its sender learns the window has room.
    WindowUpdate { instance: u64 },
}

impl NetModel<'_> {
    /// Schedule each instance's first unit at time zero (no more than there are units).
    pub(super) fn first_starts(&mut self, engine: &mut Engine<Ev>) {
        self.started = self.shape.instances.min(self.shape.total_units);
        for instance in 0..self.started {
            engine.schedule_in(Ps::ZERO, Ev::Start { instance });
        }
    }

    /// Handle `ev` at `now`: the clock set, then the event's handler.
    ///
    /// Inlined into the engine's loop: the loop is compiled with the engine's code, and as a
    /// call the dispatch cost the p0 scenarios about 5% of their speed (the event passed
    /// through memory on every one of them).
    #[inline]
    pub(super) fn on_event(&mut self, eng: &mut Engine<Ev>, now: Ps, ev: Ev) -> Result<Flow> {
        self.clock = now;
        match ev {
            Ev::Start { instance } => self.on_start(eng, now, instance),
            Ev::ToWire {
                side,
                instance,
                started,
                wire_bytes,
            } => self.on_to_wire(eng, now, side, instance, started, wire_bytes),
            Ev::Arrive {
                side: Side::Server,
                instance,
                started,
            } => self.on_arrive_server(eng, now, instance, started),
            Ev::Arrive {
                side: Side::Client,
                instance,
                started,
            } => self.on_arrive_client(eng, now, instance, started),
            Ev::Reply { instance, started } => self.on_reply(eng, now, instance, started),
            Ev::WindowUpdate { instance } => self.on_window_update(eng, now, instance),
        }
        .map(|()| Flow::Continue)
    }

    /// An instance starts a unit: a request, or a stream's data, goes client to server. A
    /// stream's sender goes on as soon as its core is done with this send, unless its window
    /// is full: then the receiver's read reopens it.
    fn on_start(&mut self, eng: &mut Engine<Ev>, now: Ps, instance: u64) -> Result<()> {
        let cpu_done = self.send_to_wire(eng, now, Side::Client, instance, now)?;
        if let Some(sent) = self.in_flight.get_mut(instance as usize) {
            *sent += 1;
            if self.started < self.shape.total_units {
                if *sent < self.window_units || !self.shape.tcp {
                    self.started += 1;
                    eng.schedule_at(cpu_done, Ev::Start { instance })?;
                } else if let Some(b) = self.blocked.get_mut(instance as usize) {
                    *b = true;
                }
            }
        }
        Ok(())
    }

    /// The frames of `wire_bytes` from `side` reach its wire: they arrive at the other side
    /// when they have crossed it, the switch and the other NIC.
    fn on_to_wire(
        &mut self,
        eng: &mut Engine<Ev>,
        now: Ps,
        side: Side,
        instance: u64,
        started: Ps,
        wire_bytes: u64,
    ) -> Result<()> {
        let arrive = self.hosts[side.index()].send_on_wire(now, wire_bytes);
        let to = side.other();
        eng.schedule_at(
            arrive,
            Ev::Arrive {
                side: to,
                instance,
                started,
            },
        )?;
        Ok(())
    }

    /// A request, or a stream's unit, arrived at the server. A request is answered after the
    /// server's application time; a stream's unit is delivered, and the application's read
    /// opens the window: the update reaches the sender one NIC, the switch and its NIC later.
    fn on_arrive_server(
        &mut self,
        eng: &mut Engine<Ev>,
        now: Ps,
        instance: u64,
        started: Ps,
    ) -> Result<()> {
        let (bytes, rr) = (self.shape.unit_bytes, self.shape.rr);
        let delivered = self.receive(Side::Server, instance, now, bytes, !rr)?;
        let c = self.costs;
        if rr {
            let reply = Ev::Reply { instance, started };
            eng.schedule_at(delivered + Ps::from_ns(c.server_app_ns), reply)?;
        } else {
            self.deliver(started, delivered);
            let update = Ps::from_ns(2 * c.nic_latency_ns + c.switch_latency_ns);
            eng.schedule_at(delivered + update, Ev::WindowUpdate { instance })?;
        }
        Ok(())
    }

    /// A response arrived at the client: the transaction is done, and the instance starts its
    /// next one if any are left.
    fn on_arrive_client(
        &mut self,
        eng: &mut Engine<Ev>,
        now: Ps,
        instance: u64,
        started: Ps,
    ) -> Result<()> {
        let delivered = self.receive(Side::Client, instance, now, self.shape.bytes, false)?;
        self.deliver(started, delivered);
        if self.started < self.shape.total_units {
            self.started += 1;
            eng.schedule_at(delivered, Ev::Start { instance })?;
        }
        Ok(())
    }

    /// The server's application replies to the request started at `started`.
    fn on_reply(
        &mut self,
        eng: &mut Engine<Ev>,
        now: Ps,
        instance: u64,
        started: Ps,
    ) -> Result<()> {
        self.send_to_wire(eng, now, Side::Server, instance, started)?;
        Ok(())
    }

    /// A stream's receiver has read a unit: one fewer in flight, and a sender that waited for
    /// the window starts its next unit now.
    fn on_window_update(&mut self, eng: &mut Engine<Ev>, now: Ps, instance: u64) -> Result<()> {
        let i = instance as usize;
        if let Some(sent) = self.in_flight.get_mut(i) {
            *sent = sent.saturating_sub(1);
        }
        if self.blocked.get(i) == Some(&true) && self.started < self.shape.total_units {
            self.blocked[i] = false;
            self.started += 1;
            eng.schedule_at(now, Ev::Start { instance })?;
        }
        Ok(())
    }

    /// `side` sends for `instance` at `now` (the client a unit, the server a response to the
    /// unit started at `started`); its frames reach the wire one NIC latency after the NIC has
    /// read them. Returns when the sending core is done.
    fn send_to_wire(
        &mut self,
        eng: &mut Engine<Ev>,
        now: Ps,
        side: Side,
        instance: u64,
        started: Ps,
    ) -> Result<Ps> {
        let (bytes, messages) = match side {
            Side::Client => (self.shape.unit_bytes, self.shape.messages_per_unit),
            Side::Server => (self.shape.bytes, 1),
        };
        let (cpu_done, sent, wire_bytes) = self.send(side, instance, now, bytes, messages)?;
        let to_wire = Ev::ToWire {
            side,
            instance,
            started,
            wire_bytes,
        };
        eng.schedule_at(sent + Ps::from_ns(self.costs.nic_latency_ns), to_wire)?;
        Ok(cpu_done)
    }

    /// A unit started at `started` reached its application at `delivered`: count it.
    fn deliver(&mut self, started: Ps, delivered: Ps) {
        self.latencies.record(delivered - started);
        self.last = self.last.max(delivered);
        self.done += 1;
        if !self.progress.tick(self.done) {
            // Asked to stop: start nothing more; the run returns `Interrupted` once the units
            // in flight are delivered.
            self.started = self.shape.total_units;
        }
    }
}
