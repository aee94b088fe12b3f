//! Resources that requests queue for: CPU cores, a bus, IOMMU walkers, a device's engines, a
//! lock. A resource has `servers` identical servers; a request arriving at `now` that needs
//! `service` starts on the server that frees first (the lowest-numbered on a tie) and holds it
//! for `service`. First come, first served, computed without events: the caller schedules the
//! completion at the returned end time.
//!
//! The servers are kept in a min-heap by (time free, number), so a request costs a logarithm of
//! the server count, not the count: a device with hundreds of queue slots stays cheap.

use crate::units::{Ps, PsSum};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A spinlock served in the order CPUs reach it: when it is free next, which CPU held it last.
/// Times are in picoseconds.
#[derive(Clone, Debug, Default)]
pub(crate) struct FifoLock {
    /// When the lock is free next.
    pub(crate) free_at: u64,
    /// The CPU that held it last.
    pub(crate) holder: Option<usize>,
    /// Time held, transfers included.
    pub(crate) busy: u128,
}

impl FifoLock {
    /// `cpu` reaches the lock at `now` (no earlier than any CPU before it) and holds it for
    /// `hold`: returns (waited, transfer, release). A lock taken last by another CPU first
    /// moves here (`transfer_ps`: its cache line and the data it guards).
    pub(crate) fn take(
        &mut self,
        now: u64,
        cpu: usize,
        hold: u64,
        transfer_ps: u64,
    ) -> (u64, u64, u64) {
        let start = now.max(self.free_at);
        let transfer = match self.holder {
            Some(h) if h != cpu => transfer_ps,
            _ => 0,
        };
        let release = start + transfer + hold;
        self.free_at = release;
        self.holder = Some(cpu);
        self.busy += u128::from(release - start);
        (start - now, transfer, release)
    }
}

/// A server's time it frees and its number as one key, ordered as the pair (one comparison
/// instead of two in the heap's sifts).
#[inline(always)]
fn server_key(free: Ps, server: usize) -> u128 {
    (u128::from(free.0) << 64) | server as u128
}

/// The pair a [`server_key`] holds.
#[inline(always)]
fn key_server(key: u128) -> (Ps, usize) {
    (Ps((key >> 64) as u64), key as u64 as usize)
}

/// A first-come-first-served resource with identical servers.
#[derive(Clone, Debug)]
pub struct Resource {
    name: String,
    free_at: Servers,
    servers: usize,
    tally: Tally,
}

/// When a resource's servers free.
#[derive(Clone, Debug)]
enum Servers {
    /// One server (most resources: a CPU, a data path, a lock): when it frees.
    One(Ps),
    /// Each server's time it frees and number, as one key ([`server_key`]), earliest first.
    Many(BinaryHeap<Reverse<u128>>),
}

/// What a resource did over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResourceStats {
    /// Requests served.
    pub served: u64,
    /// Total service time given, over all servers.
    pub busy_ps: Ps,
    /// Total time requests waited before their service started.
    pub wait_ps: Ps,
    /// The longest single wait.
    pub max_wait_ps: Ps,
}

/// A [`ResourceStats`] as it is kept during a run: the sums in [`PsSum`]s.
#[derive(Clone, Debug, Default)]
struct Tally {
    served: u64,
    busy: PsSum,
    wait: PsSum,
    max_wait: Ps,
}

impl Tally {
    /// One request served for `service` after waiting `wait`.
    #[inline(always)]
    fn count(&mut self, service: Ps, wait: Ps) {
        self.served += 1;
        self.busy += service;
        self.wait += wait;
        self.max_wait = self.max_wait.max(wait);
    }

    fn stats(&self) -> ResourceStats {
        ResourceStats {
            served: self.served,
            busy_ps: self.busy.ps(),
            wait_ps: self.wait.ps(),
            max_wait_ps: self.max_wait,
        }
    }
}

/// When a request's service starts and ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The server it got.
    pub server: usize,
    /// When its service starts (at or after its arrival).
    pub start: Ps,
    /// When it releases the server.
    pub end: Ps,
}

impl Resource {
    /// A resource named `name` with `servers` servers (at least one).
    pub fn new(name: impl Into<String>, servers: usize) -> Resource {
        let servers = servers.max(1);
        Resource {
            name: name.into(),
            free_at: if servers == 1 {
                Servers::One(Ps::ZERO)
            } else {
                Servers::Many(
                    (0..servers)
                        .map(|i| Reverse(server_key(Ps::ZERO, i)))
                        .collect(),
                )
            },
            servers,
            tally: Tally::default(),
        }
    }

    /// The resource's name, for breakdowns.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Serve a request arriving at `now` that needs `service`.
    #[inline]
    pub fn acquire(&mut self, now: Ps, service: Ps) -> Grant {
        let (start, end, server) = match &mut self.free_at {
            Servers::One(free) => {
                let start = if *free > now { *free } else { now };
                *free = start + service;
                (start, *free, 0)
            }
            Servers::Many(heap) => match heap.peek_mut() {
                Some(mut top) => {
                    let (free, server) = key_server(top.0);
                    let start = if free > now { free } else { now };
                    let end = start + service;
                    *top = Reverse(server_key(end, server));
                    (start, end, server)
                }
                // Never: a resource has at least one server.
                None => (now, now + service, 0),
            },
        };
        // `start` is never before `now`.
        self.tally.count(service, Ps(start.0 - now.0));
        Grant { server, start, end }
    }

    /// When the first server frees (a request arriving then or later starts at once).
    pub fn next_free(&self) -> Ps {
        match &self.free_at {
            Servers::One(t) => *t,
            Servers::Many(heap) => heap.peek().map_or(Ps::ZERO, |&Reverse(k)| key_server(k).0),
        }
    }

    /// The statistics so far.
    pub fn stats(&self) -> ResourceStats {
        self.tally.stats()
    }

    /// Busy time over `elapsed` times servers: 0 to 1.
    pub fn utilization(&self, elapsed: Ps) -> f64 {
        let capacity = elapsed.0 as f64 * self.servers as f64;
        if capacity == 0.0 {
            0.0
        } else {
            self.tally.busy.ps().0 as f64 / capacity
        }
    }
}

/// A single server booked by requests that may name times out of order: a request for `at`
/// takes the first gap at or after `at` long enough for it (a link or lock whose users compute
/// their own future times without events). Bookings that ended before the caller's `now` are
/// forgotten, so `now` must never go back.
#[derive(Clone, Debug)]
pub struct Calendar {
    name: String,
    /// Booked intervals, sorted and disjoint.
    busy: std::collections::VecDeque<(Ps, Ps)>,
    tally: Tally,
}

impl Calendar {
    /// An empty calendar named `name`.
    pub fn new(name: impl Into<String>) -> Calendar {
        Calendar {
            name: name.into(),
            busy: std::collections::VecDeque::new(),
            tally: Tally::default(),
        }
    }

    /// The calendar's name, for breakdowns.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Book `service` from `at` or the first gap after it, with the current time `now`.
    pub fn book(&mut self, now: Ps, at: Ps, service: Ps) -> Grant {
        while self.busy.front().is_some_and(|&(_, end)| end <= now) {
            self.busy.pop_front();
        }
        let mut start = at;
        let mut index = self.busy.len();
        if service > Ps::ZERO {
            for (k, &(s, e)) in self.busy.iter().enumerate() {
                if e <= start {
                    continue;
                }
                if start + service <= s {
                    index = k;
                    break;
                }
                start = e;
            }
            self.busy.insert(index, (start, start + service));
        }
        self.tally.count(service, start - at);
        Grant {
            server: 0,
            start,
            end: start + service,
        }
    }

    /// The statistics so far.
    pub fn stats(&self) -> ResourceStats {
        self.tally.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_queue_first_come_first_served() {
        let mut bus = Resource::new("bus", 1);
        assert_eq!(
            bus.acquire(Ps(0), Ps(10)),
            Grant {
                server: 0,
                start: Ps(0),
                end: Ps(10)
            }
        );
        assert_eq!(
            bus.acquire(Ps(5), Ps(10)),
            Grant {
                server: 0,
                start: Ps(10),
                end: Ps(20)
            }
        );
        assert_eq!(bus.acquire(Ps(30), Ps(1)).start, Ps(30));
        assert_eq!(bus.stats().wait_ps, Ps(5));
        assert_eq!(bus.stats().busy_ps, Ps(21));
        assert!((bus.utilization(Ps(42)) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_calendar_fills_gaps_for_requests_out_of_time_order() {
        let mut link = Calendar::new("link");
        assert_eq!(link.book(Ps(0), Ps(100), Ps(10)).start, Ps(100));
        // An earlier request made later still goes first if it fits before.
        assert_eq!(link.book(Ps(0), Ps(20), Ps(10)).start, Ps(20));
        // One that would overlap 100..110 waits for its end.
        let g = link.book(Ps(0), Ps(95), Ps(10));
        assert_eq!((g.start, g.end), (Ps(110), Ps(120)));
        // A gap too short is skipped: 30..100 fits 70, not 71.
        assert_eq!(link.book(Ps(0), Ps(30), Ps(70)).start, Ps(30));
        assert_eq!(link.book(Ps(0), Ps(0), Ps(15)).start, Ps(0));
        assert_eq!(link.book(Ps(0), Ps(0), Ps(1)).start, Ps(15));
        assert_eq!(link.book(Ps(0), Ps(0), Ps(5)).start, Ps(120));
        assert_eq!(link.stats().busy_ps, Ps(121));
        // Past bookings are forgotten once `now` passes them.
        assert_eq!(link.book(Ps(200), Ps(200), Ps(1)).start, Ps(200));
        assert_eq!(link.busy.len(), 1);
    }

    #[test]
    fn several_servers_share_the_load() {
        let mut cpus = Resource::new("cpu", 2);
        assert_eq!(cpus.acquire(Ps(0), Ps(10)).server, 0);
        assert_eq!(cpus.acquire(Ps(0), Ps(10)).server, 1);
        let third = cpus.acquire(Ps(0), Ps(10));
        assert_eq!((third.server, third.start), (0, Ps(10)));
    }

    #[test]
    fn the_server_freeing_first_serves_the_lowest_number_on_a_tie() {
        // Against a linear scan for the earliest (time, number), over many servers.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let mut r = Resource::new("slots", 37);
        let mut free = vec![Ps::ZERO; 37];
        let mut now = Ps::ZERO;
        for _ in 0..10_000 {
            now += Ps(rng.random_range(0..3));
            let service = Ps(rng.random_range(0..200));
            let (server, at) = free
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(i, t)| (t, i))
                .unwrap();
            let start = at.max(now);
            free[server] = start + service;
            let g = r.acquire(now, service);
            assert_eq!((g.server, g.start, g.end), (server, start, start + service));
            assert_eq!(r.next_free(), free.iter().copied().min().unwrap());
        }
    }
}
