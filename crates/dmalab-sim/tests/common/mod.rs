//! The event queue against a reference: a `BTreeMap` keyed by (time, sequence) holds what the
//! engine should hand out next. Shared by the property test and the cargo-fuzz target.

use dmalab_sim::engine::Engine;
use dmalab_sim::units::Ps;
use std::collections::BTreeMap;

/// One operation on the queue.
#[derive(Clone, Debug)]
pub enum QueueOp {
    /// Schedule at `now + delay` (a delay of 0 ties with the current time).
    In(u64),
    /// Schedule at an absolute time (refused when it is in the past).
    At(u64),
    /// Take the next event.
    Step,
}

/// Run `ops` on the engine and the reference in lockstep; panic on the first disagreement.
pub fn check_queue(ops: &[QueueOp]) {
    let mut engine: Engine<u64> = Engine::new();
    let mut reference: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let (mut now, mut seq) = (0u64, 0u64);
    for (i, op) in ops.iter().enumerate() {
        let payload = i as u64;
        match *op {
            QueueOp::In(delay) => {
                let id = engine.schedule_in(Ps(delay), payload);
                assert_eq!(id.0, seq);
                reference.insert((now + delay, seq), payload);
                seq += 1;
            }
            QueueOp::At(at) => {
                let result = engine.schedule_at(Ps(at), payload);
                if at < now {
                    assert!(result.is_err(), "scheduled in the past: {at} < {now}");
                } else {
                    assert_eq!(result.map(|id| id.0).ok(), Some(seq));
                    reference.insert((at, seq), payload);
                    seq += 1;
                }
            }
            QueueOp::Step => {
                let expected = reference.pop_first();
                let got = engine.step();
                match (expected, got) {
                    (None, None) => {}
                    (Some(((at, s), p)), Some((gat, gid, gp))) => {
                        assert_eq!((Ps(at), s, p), (gat, gid.0, gp));
                        now = at;
                    }
                    (e, g) => panic!("reference {e:?}, engine {g:?}"),
                }
            }
        }
        assert_eq!(engine.pending(), reference.len());
        assert_eq!(engine.now(), Ps(now));
    }
}
