//! A small discrete-event engine: integer picosecond time, events at the same time in the order
//! they were scheduled, and nothing else. Models are plain structs that schedule events and
//! handle them; the engine knows nothing of buses or IOMMUs.
//!
//! Ties are broken by a sequence number taken at scheduling time, so a run depends only on the
//! order of `schedule` calls, never on the heap's internal layout: the same scenario and seed
//! give bit-identical results (the design of SimPy's and nexosim's queues).
//!
//! The earliest event is kept beside the heap when it was scheduled as the earliest: a closed
//! loop with one request in flight (seed 003's one thread at queue depth 1) then never touches
//! the heap. The order of events is the same total order on (time, sequence) either way.

use crate::error::{invalid_arg, Result};
use crate::units::Ps;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The identity of a scheduled event, unique within one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(pub u64);

struct Scheduled<E> {
    at: Ps,
    seq: u64,
    event: E,
}

/// An event's place in the order: time, then sequence number, as one integer.
#[inline(always)]
pub(crate) fn order_key(at: Ps, seq: u64) -> u128 {
    (u128::from(at.0) << 64) | u128::from(seq)
}

impl<E> Scheduled<E> {
    /// Time, then sequence number, as one integer (one comparison instead of two).
    #[inline(always)]
    fn key(&self) -> u128 {
        order_key(self.at, self.seq)
    }
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Scheduled<E> {}

impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Scheduled<E> {
    /// Reversed, so that the max-heap pops the earliest time, then the lowest sequence number.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// The event queue and the clock.
pub struct Engine<E> {
    now: Ps,
    next_seq: u64,
    /// An event before every event in `queue`, if one is held apart.
    front: Option<Scheduled<E>>,
    queue: BinaryHeap<Scheduled<E>>,
    handled: u64,
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Engine<E> {
    /// An engine at time zero with nothing scheduled.
    pub fn new() -> Self {
        Engine {
            now: Ps::ZERO,
            next_seq: 0,
            front: None,
            queue: BinaryHeap::new(),
            handled: 0,
        }
    }

    /// The current time: that of the event last taken by [`Engine::step`].
    pub fn now(&self) -> Ps {
        self.now
    }

    /// Events scheduled and not yet taken.
    pub fn pending(&self) -> usize {
        self.queue.len() + usize::from(self.front.is_some())
    }

    /// Events taken so far.
    pub fn handled(&self) -> u64 {
        self.handled
    }

    /// Schedule `event` at time `at`, which must not be in the past.
    pub fn schedule_at(&mut self, at: Ps, event: E) -> Result<EventId> {
        if at < self.now {
            return Err(past(at, self.now));
        }
        Ok(self.push(at, event))
    }

    /// Queue `event` at `at` (not in the past) with the next sequence number.
    #[inline]
    fn push(&mut self, at: Ps, event: E) -> EventId {
        let seq = self.next_seq;
        self.next_seq += 1;
        let new = Scheduled { at, seq, event };
        // A later sequence number never goes before an equal time: `new` is earliest only
        // when strictly earlier than everything held.
        match &self.front {
            None if self.queue.peek().is_none_or(|top| at < top.at) => self.front = Some(new),
            Some(front) if at < front.at => {
                if let Some(old) = self.front.replace(new) {
                    self.queue.push(old);
                }
            }
            _ => self.queue.push(new),
        }
        EventId(seq)
    }

    /// Schedule `event` after `delay` from now.
    pub fn schedule_in(&mut self, delay: Ps, event: E) -> EventId {
        self.push(self.now + delay, event)
    }

    /// The time of the next event, if any.
    pub fn peek_time(&self) -> Option<Ps> {
        match &self.front {
            Some(s) => Some(s.at),
            None => self.queue.peek().map(|s| s.at),
        }
    }

    /// Take the next event and advance the clock to it.
    pub fn step(&mut self) -> Option<(Ps, EventId, E)> {
        let s = match self.front.take() {
            Some(s) => s,
            None => self.queue.pop()?,
        };
        self.now = s.at;
        self.handled += 1;
        Some((s.at, EventId(s.seq), s.event))
    }

    /// Take events up to and including time `until`, handing each to `handle` (which may
    /// schedule more); stop early when `handle` returns [`Flow::Stop`] or an error, which the
    /// run returns. Returns the events handled.
    pub fn run_until(
        &mut self,
        until: Ps,
        mut handle: impl FnMut(&mut Self, Ps, E) -> Result<Flow>,
    ) -> Result<u64> {
        let start = self.handled;
        while self.peek_time().is_some_and(|t| t <= until) {
            let Some((at, _, event)) = self.step() else {
                break;
            };
            if handle(self, at, event)? == Flow::Stop {
                break;
            }
        }
        Ok(self.handled - start)
    }
}

impl<E> Engine<E> {
    /// As [`Engine::run_until`], for a model whose handler schedules at most one event, which
    /// it returns instead of scheduling. That event takes the next sequence number as if
    /// scheduled; when it is strictly earlier than every pending event (and not after `until`)
    /// it is the next to be taken, so it is handled at once, without the queue: a closed loop
    /// with one request in flight runs its whole chain this way, in the same order as through
    /// the queue. A returned event in the past is refused as by [`Engine::schedule_at`].
    pub fn run_chained(
        &mut self,
        until: Ps,
        mut handle: impl FnMut(Ps, E) -> Result<Option<(Ps, E)>>,
    ) -> Result<u64> {
        let start = self.handled;
        let mut carried: Option<(Ps, E)> = None;
        loop {
            let (at, event) = match carried.take() {
                Some(next) => next,
                None => {
                    if self.peek_time().is_none_or(|t| t > until) {
                        break;
                    }
                    let Some((at, _, event)) = self.step() else {
                        break;
                    };
                    (at, event)
                }
            };
            let Some((next_at, next)) = handle(at, event)? else {
                continue;
            };
            if next_at <= until && self.peek_time().is_none_or(|t| next_at < t) {
                if next_at < self.now {
                    return Err(past(next_at, self.now));
                }
                self.next_seq += 1;
                self.now = next_at;
                self.handled += 1;
                carried = Some((next_at, next));
            } else {
                self.schedule_at(next_at, next)?;
            }
        }
        Ok(self.handled - start)
    }
}

/// The error for an event scheduled at `at`, before `now`.
pub(crate) fn past(at: Ps, now: Ps) -> crate::error::SimError {
    invalid_arg("event time", at, format!("at or after now ({now})"))
}

/// Whether a run goes on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Take the next event.
    Continue,
    /// Stop the run here.
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_run_in_scheduling_order() {
        let mut e = Engine::new();
        for i in 0..5 {
            e.schedule_at(Ps(10), i).unwrap();
        }
        e.schedule_at(Ps(5), 99).unwrap();
        let order: Vec<i32> = std::iter::from_fn(|| e.step().map(|(_, _, v)| v)).collect();
        assert_eq!(order, [99, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn the_front_event_keeps_time_then_sequence_order() {
        // Interleaved schedules and steps, with many equal times: the events come out exactly
        // as a sort by (time, sequence) of those pending would give them.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let mut e = Engine::new();
        let mut pending: Vec<(Ps, u64)> = Vec::new();
        for _ in 0..20_000 {
            if rng.random_bool(0.55) {
                let at = e.now() + Ps(rng.random_range(0..4));
                let id = e.schedule_at(at, ()).unwrap();
                pending.push((at, id.0));
            } else if let Some((at, id, ())) = e.step() {
                let first = pending.iter().copied().min().unwrap();
                assert_eq!((at, id.0), first);
                pending.retain(|&p| p != first);
            } else {
                assert!(pending.is_empty());
            }
            assert_eq!(e.pending(), pending.len());
            assert_eq!(e.peek_time(), pending.iter().map(|p| p.0).min());
        }
    }

    #[test]
    fn a_chained_run_takes_events_in_the_order_of_a_scheduled_one() {
        // Chains of events, each scheduling the next of its chain after a random delay (ties
        // and zero delays included), with a horizon: the chained run hands the same events at
        // the same times in the same order, and leaves the same events pending.
        use rand::{Rng, SeedableRng};
        for (seed, chains) in [(1u64, 1u32), (2, 2), (3, 5), (4, 40)] {
            let delays: Vec<u64> = {
                let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
                (0..4000).map(|_| rng.random_range(0..4)).collect()
            };
            let run = |chained: bool| {
                let mut e = Engine::new();
                for c in 0..chains {
                    e.schedule_at(Ps(u64::from(c % 3)), (c, 0usize)).unwrap();
                }
                let mut seen = Vec::new();
                let next = |seen: &mut Vec<(Ps, u32, usize)>, now: Ps, (c, k): (u32, usize)| {
                    seen.push((now, c, k));
                    let i = seen.len();
                    (i < delays.len()).then(|| (now + Ps(delays[i]), (c, k + 1)))
                };
                let n = if chained {
                    e.run_chained(Ps(1500), |now, ev| Ok(next(&mut seen, now, ev)))
                } else {
                    e.run_until(Ps(1500), |eng, now, ev| {
                        if let Some((at, ev)) = next(&mut seen, now, ev) {
                            eng.schedule_at(at, ev)?;
                        }
                        Ok(Flow::Continue)
                    })
                };
                let rest: Vec<_> = std::iter::from_fn(|| e.step()).collect();
                (n, seen, rest, e.handled())
            };
            assert_eq!(run(true), run(false), "{chains} chains");
        }
    }

    #[test]
    fn a_chained_run_refuses_the_past() {
        let mut e = Engine::new();
        e.schedule_at(Ps(10), 0u32).unwrap();
        let r = e.run_chained(Ps(100), |now, k| Ok((k == 0).then(|| (now - Ps(1), 1))));
        assert!(r.is_err());
    }

    #[test]
    fn the_past_is_refused() {
        let mut e = Engine::new();
        e.schedule_at(Ps(10), ()).unwrap();
        e.step();
        assert!(e.schedule_at(Ps(9), ()).is_err());
        // A refused event takes no sequence number.
        assert_eq!(e.schedule_in(Ps(1), ()), EventId(1));
        assert_eq!(e.peek_time(), Some(Ps(11)));
    }

    #[test]
    fn run_until_stops_at_the_horizon_and_on_request() {
        let mut e = Engine::new();
        e.schedule_at(Ps(0), 0u32).unwrap();
        let n = e.run_until(Ps(100), |eng, _, k| {
            eng.schedule_in(Ps(10), k + 1);
            Ok(Flow::Continue)
        });
        assert_eq!(n, Ok(11));
        assert_eq!(e.now(), Ps(100));
        let n = e.run_until(Ps(1000), |eng, _, k| {
            eng.schedule_in(Ps(10), k + 1);
            Ok(if k < 12 { Flow::Continue } else { Flow::Stop })
        });
        assert_eq!(n, Ok(2));
        let err = e.run_until(Ps(1000), |_, _, k| Err(invalid_arg("k", k, "none")));
        assert!(
            err.is_err(),
            "an event's error ends the run and is returned"
        );
    }
}
