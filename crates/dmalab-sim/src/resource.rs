//! Resources that requests queue for: CPU cores, a bus, IOMMU walkers, a device's engines, a
//! lock. A resource has `servers` identical servers; a request arriving at `now` that needs
//! `service` starts on the server that frees first (the lowest-numbered on a tie) and holds it
//! for `service`. First come, first served, computed without events: the caller schedules the
//! completion at the returned end time.

use crate::units::Ps;
use serde::Serialize;

/// A first-come-first-served resource with identical servers.
#[derive(Clone, Debug)]
pub struct Resource {
    name: String,
    free_at: Vec<Ps>,
    stats: ResourceStats,
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
        Resource {
            name: name.into(),
            free_at: vec![Ps::ZERO; servers.max(1)],
            stats: ResourceStats::default(),
        }
    }

    /// The resource's name, for breakdowns.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Serve a request arriving at `now` that needs `service`.
    pub fn acquire(&mut self, now: Ps, service: Ps) -> Grant {
        let (server, free) = self
            .free_at
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, t)| (t, i))
            .unwrap_or((0, Ps::ZERO));
        let start = if free > now { free } else { now };
        let end = start + service;
        if let Some(slot) = self.free_at.get_mut(server) {
            *slot = end;
        }
        let wait = start - now;
        self.stats.served += 1;
        self.stats.busy_ps += service;
        self.stats.wait_ps += wait;
        self.stats.max_wait_ps = self.stats.max_wait_ps.max(wait);
        Grant { server, start, end }
    }

    /// When the first server frees (a request arriving then or later starts at once).
    pub fn next_free(&self) -> Ps {
        self.free_at.iter().copied().min().unwrap_or(Ps::ZERO)
    }

    /// The statistics so far.
    pub fn stats(&self) -> &ResourceStats {
        &self.stats
    }

    /// Busy time over `elapsed` times servers: 0 to 1.
    pub fn utilization(&self, elapsed: Ps) -> f64 {
        let capacity = elapsed.0 as f64 * self.free_at.len() as f64;
        if capacity == 0.0 {
            0.0
        } else {
            self.stats.busy_ps.0 as f64 / capacity
        }
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
    fn several_servers_share_the_load() {
        let mut cpus = Resource::new("cpu", 2);
        assert_eq!(cpus.acquire(Ps(0), Ps(10)).server, 0);
        assert_eq!(cpus.acquire(Ps(0), Ps(10)).server, 1);
        let third = cpus.acquire(Ps(0), Ps(10));
        assert_eq!((third.server, third.start), (0, Ps(10)));
    }
}
