//! An event queue for a model whose events each belong to one of a fixed number of slots, with
//! at most one event pending in a slot: a closed loop whose I/O slots each wait for their I/O's
//! next stage (the block workload: every thread's queue slots, thousands on a storage server).
//!
//! Events come out in the same total order as from [`Engine`](crate::engine::Engine): by time,
//! then by a sequence number taken when the event is scheduled. The queue is a tournament tree
//! of losers over the slots (Knuth, *The Art of Computer Programming*, vol. 3, section 5.4.1,
//! "replacement selection"): the earliest event is the tree's winner, found at once, and after
//! it is handled its slot's next event (or none) replays the one path from its leaf to the
//! root, a comparison a level, with selects rather than branches. A heap would instead sift the
//! winner out and the next event in, moving entries at each level: with 2,048 slots that was
//! about two fifths of a storage-server run's instructions, and its branches went the data's
//! way.

use crate::engine::{order_key as key, past};
use crate::error::{invalid_arg, Result};
use crate::units::Ps;

/// A slot with nothing pending: after every real key.
const NONE: u128 = u128::MAX;

/// What a handler of [`SlotQueue::run`] may take at once, without returning to the queue: with
/// one slot, every next event of that slot (nothing else can come first); with more, none.
#[derive(Debug)]
pub struct Chain {
    until: Ps,
    alone: bool,
    now: Ps,
    taken: u64,
}

impl Chain {
    /// Whether the handler may handle an event at `at` now, as the next taken: its slot is
    /// the only one, and `at` is neither in the past nor after the run's horizon. If so it
    /// counts as taken (with the next sequence number, the clock at `at`); if not, the handler
    /// returns it.
    #[inline]
    pub fn take(&mut self, at: Ps) -> bool {
        let next = self.alone && at >= self.now && at <= self.until;
        if next {
            self.now = at;
            self.taken += 1;
        }
        next
    }
}

/// The slots' pending events, with the clock.
pub struct SlotQueue<E> {
    now: Ps,
    next_seq: u64,
    handled: u64,
    /// Each slot's pending event's key, [`NONE`] when nothing is pending; padded with [`NONE`]
    /// to `leaves` (a power of two).
    keys: Vec<u128>,
    events: Vec<Option<E>>,
    /// `tree[0]` is the slot of the earliest event; `tree[n]` for an inner node `n` (1 to
    /// `leaves - 1`, node `n`'s children `2n` and `2n + 1`, leaf `leaves + s` for slot `s`) is
    /// the slot that lost at `n`: the later of the two subtrees' earliest events.
    tree: Vec<u32>,
    leaves: usize,
    /// Slots there are.
    slots: usize,
    /// Whether events were scheduled since the tree was last built.
    stale: bool,
}

impl<E> SlotQueue<E> {
    /// Bytes the queue takes per leaf (its leaves round the slots up to a power of two): a
    /// key, an event, a tree node.
    pub fn bytes_per_slot() -> u64 {
        (std::mem::size_of::<u128>()
            + std::mem::size_of::<Option<E>>()
            + std::mem::size_of::<u32>()) as u64
    }

    /// A queue of `slots` slots (at least one, fewer than 2^31) with nothing pending, at time
    /// zero.
    pub fn new(slots: usize) -> Result<SlotQueue<E>> {
        if slots == 0 || slots >= 1 << 31 {
            return Err(invalid_arg("slots", slots, "1 to 2^31 - 1"));
        }
        let leaves = slots.next_power_of_two();
        let mut q = SlotQueue {
            now: Ps::ZERO,
            next_seq: 0,
            handled: 0,
            keys: vec![NONE; leaves],
            events: (0..leaves).map(|_| None).collect(),
            tree: vec![0; leaves],
            leaves,
            slots,
            stale: false,
        };
        q.rebuild();
        Ok(q)
    }

    /// The current time: that of the event last taken.
    pub fn now(&self) -> Ps {
        self.now
    }

    /// Events taken so far.
    pub fn handled(&self) -> u64 {
        self.handled
    }

    /// The time of the earliest pending event, if any.
    pub fn peek_time(&self) -> Option<Ps> {
        let k = if self.stale {
            self.keys.iter().copied().min().unwrap_or(NONE)
        } else {
            self.keys[self.tree[0] as usize]
        };
        (k != NONE).then_some(Ps((k >> 64) as u64))
    }

    /// Schedule `event` in `slot` (which must have nothing pending) at `at` (not in the past),
    /// with the next sequence number.
    pub fn schedule(&mut self, slot: usize, at: Ps, event: E) -> Result<()> {
        if slot >= self.slots {
            return Err(invalid_arg("slot", slot, format!("below {}", self.slots)));
        }
        if self.keys[slot] != NONE {
            return Err(invalid_arg("slot", slot, "a slot with no event pending"));
        }
        if at < self.now {
            return Err(past(at, self.now));
        }
        self.keys[slot] = key(at, self.next_seq);
        self.next_seq += 1;
        self.events[slot] = Some(event);
        // The tree is built again when the run starts: filling every slot costs one build.
        self.stale = true;
        Ok(())
    }

    /// Play every match again from the leaves (after a change to a slot that may not be the
    /// winner).
    fn rebuild(&mut self) {
        self.stale = false;
        let mut winner = vec![0u32; 2 * self.leaves];
        for s in 0..self.leaves {
            winner[self.leaves + s] = s as u32;
        }
        for n in (1..self.leaves).rev() {
            let (l, r) = (winner[2 * n], winner[2 * n + 1]);
            let (w, lost) = if self.keys[r as usize] < self.keys[l as usize] {
                (r, l)
            } else {
                (l, r)
            };
            winner[n] = w;
            self.tree[n] = lost;
        }
        self.tree[0] = winner[1];
    }

    /// The winner's key changed: play its matches again on its path to the root.
    #[inline]
    fn replay(&mut self, slot: u32) {
        let (mut win, mut win_key) = (slot, self.keys[slot as usize]);
        let mut n = (self.leaves + slot as usize) >> 1;
        while n > 0 {
            let lost = self.tree[n];
            let lost_key = self.keys[lost as usize];
            // Selects rather than a branch on which won: the outcome is the data's, which no
            // branch predictor learns.
            let swap = lost_key < win_key;
            self.tree[n] = std::hint::select_unpredictable(swap, win, lost);
            win = std::hint::select_unpredictable(swap, lost, win);
            win_key = std::hint::select_unpredictable(swap, lost_key, win_key);
            n >>= 1;
        }
        self.tree[0] = win;
    }

    /// Take events up to and including time `until` in order, handing each with its slot to
    /// `handle`, which returns the slot's next event, if any (it takes the next sequence
    /// number, as if scheduled then). With one slot, the handler may also take its next events
    /// itself, through [`Chain::take`] (with more, `take` refuses every event: the next event
    /// could be another slot's). A returned event in the past is refused as by
    /// [`SlotQueue::schedule`]. Returns the events taken.
    pub fn run(
        &mut self,
        until: Ps,
        mut handle: impl FnMut(Ps, u32, E, &mut Chain) -> Result<Option<(Ps, E)>>,
    ) -> Result<u64> {
        let start = self.handled;
        if self.stale {
            self.rebuild();
        }
        loop {
            let slot = self.tree[0];
            let s = slot as usize;
            let k = self.keys[s];
            let at = Ps((k >> 64) as u64);
            if k == NONE || at > until {
                break;
            }
            let Some(event) = self.events[s].take() else {
                break;
            };
            self.now = at;
            self.handled += 1;
            let mut chain = Chain {
                until,
                alone: self.slots == 1,
                now: at,
                taken: 0,
            };
            let returned = handle(at, slot, event, &mut chain);
            self.now = chain.now;
            self.next_seq += chain.taken;
            self.handled += chain.taken;
            match returned? {
                Some((next_at, next)) => {
                    if next_at < self.now {
                        return Err(past(next_at, self.now));
                    }
                    self.keys[s] = key(next_at, self.next_seq);
                    self.next_seq += 1;
                    self.events[s] = Some(next);
                }
                None => self.keys[s] = NONE,
            }
            self.replay(slot);
        }
        Ok(self.handled - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Engine, Flow};
    use rand::{Rng, SeedableRng};

    /// Every slot's chain of events with random delays (ties and zero delays included), run
    /// through the slot queue and through the engine's heap: the same events at the same times
    /// in the same order, the same count, and the same clock; with a horizon, the same events
    /// left pending.
    #[test]
    fn slots_take_events_in_the_engines_order() {
        for (seed, slots, until) in [
            (1u64, 1usize, 5_000u64),
            (2, 2, 5_000),
            (3, 3, 700),
            (4, 5, 5_000),
            (5, 64, 5_000),
            (6, 100, 900),
            (7, 2048, 20_000),
        ] {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let delays: Vec<u64> = (0..40_000).map(|_| rng.random_range(0..4)).collect();
            let starts: Vec<u64> = (0..slots).map(|_| rng.random_range(0..3)).collect();
            let next = |seen: &mut Vec<(Ps, usize, usize)>, now: Ps, (s, k): (usize, usize)| {
                seen.push((now, s, k));
                let i = seen.len();
                (i < delays.len()).then(|| (now + Ps(delays[i]), (s, k + 1)))
            };
            let mut heap_seen = Vec::new();
            let mut e = Engine::new();
            for (s, &t) in starts.iter().enumerate() {
                e.schedule_at(Ps(t), (s, 0usize)).unwrap();
            }
            let n_heap = e
                .run_until(Ps(until), |eng, now, ev| {
                    if let Some((at, ev)) = next(&mut heap_seen, now, ev) {
                        eng.schedule_at(at, ev)?;
                    }
                    Ok(Flow::Continue)
                })
                .unwrap();
            let heap_rest: Vec<(Ps, usize, usize)> = std::iter::from_fn(|| e.step())
                .map(|(at, _, (s, k))| (at, s, k))
                .collect();

            let mut slot_seen = Vec::new();
            let mut q = SlotQueue::new(slots).unwrap();
            for (s, &t) in starts.iter().enumerate() {
                q.schedule(s, Ps(t), (s, 0usize)).unwrap();
            }
            let n_slots = q
                .run(Ps(until), |now, slot, ev, _| {
                    assert_eq!(slot as usize, ev.0);
                    Ok(next(&mut slot_seen, now, ev))
                })
                .unwrap();
            assert_eq!(slot_seen, heap_seen, "{slots} slots");
            assert_eq!(n_slots, n_heap, "{slots} slots");
            assert_eq!(q.handled(), n_heap);
            // What is left, taken in order without a horizon.
            let mut slot_rest = Vec::new();
            q.run(Ps(u64::MAX), |now, _, (s, k), _| {
                slot_rest.push((now, s, k));
                Ok(None)
            })
            .unwrap();
            assert_eq!(slot_rest, heap_rest, "{slots} slots");
        }
    }

    #[test]
    fn one_slot_takes_its_chain_itself_in_the_same_order() {
        let delays = [0u64, 3, 0, 1, 2, 0, 5];
        let run = |inline: bool| {
            let mut q = SlotQueue::new(1).unwrap();
            q.schedule(0, Ps(2), 0usize).unwrap();
            let mut seen = Vec::new();
            let n = q
                .run(Ps(9), |mut now, _, mut k, chain| loop {
                    seen.push((now, k));
                    let next = delays.get(k).map(|&d| (now + Ps(d), k + 1));
                    match next {
                        Some((at, n)) if inline && chain.take(at) => (now, k) = (at, n),
                        other => return Ok(other),
                    }
                })
                .unwrap();
            (n, seen, q.now(), q.peek_time())
        };
        assert_eq!(run(true), run(false));
        let (n, _, now, next) = run(false);
        assert_eq!((n, now, next), (7, Ps(8), Some(Ps(13))));
    }

    #[test]
    fn the_past_and_bad_slots_are_refused() {
        let mut q = SlotQueue::new(2).unwrap();
        assert!(q.schedule(2, Ps(0), ()).is_err());
        q.schedule(0, Ps(10), ()).unwrap();
        assert!(q.schedule(0, Ps(11), ()).is_err());
        q.schedule(1, Ps(7), ()).unwrap();
        // Before the run builds the tree, the earliest is found by a scan.
        assert_eq!(q.peek_time(), Some(Ps(7)));
        let r = q.run(Ps(100), |now, _, (), _| Ok(Some((now - Ps(1), ()))));
        assert!(r.is_err());
        assert!(SlotQueue::<()>::new(0).is_err());
    }
}
