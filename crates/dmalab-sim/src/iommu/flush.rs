//! IOTLB invalidation after unmap, and what each policy leaves open.
//!
//! - **Strict**: every unmap invalidates its pages before the IOVA is freed. Nothing stays
//!   reachable; every unmap pays an invalidation and waits for it.
//! - **Deferred**: unmapped ranges wait in a queue (their IOVAs stay allocated, so they cannot be
//!   handed out again while a stale translation may exist); when the queue reaches its
//!   high-water mark (250 in the Intel IOMMU code of seed 003) or its oldest entry its timeout,
//!   one global flush covers them all and their IOVAs are freed. Cheap per unmap; the device can
//!   still reach a queued buffer through a cached translation until the flush.
//! - **Per-CPU queues**: the same, with one queue per CPU, so unmaps on different CPUs do not
//!   share a lock (Linux's later flush queues); each queue flushes on its own.
//!
//! Exposure is counted from the IOTLB itself: at unmap, the pages whose translations are still
//! cached stay reachable until the flush that drops them.

use crate::units::Ps;
use serde::Serialize;

/// An invalidation policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum FlushPolicy {
    /// Invalidate on every unmap.
    Strict,
    /// One queue; flush all at `high_water` entries or when the oldest is `timeout` old.
    Deferred {
        /// Entries that trigger a flush.
        high_water: usize,
        /// Age of the oldest entry that triggers a flush.
        timeout: Ps,
    },
    /// One queue per CPU, each with its own high-water mark and timeout.
    PerCpu {
        /// Entries per CPU queue that trigger its flush.
        high_water: usize,
        /// Age of a queue's oldest entry that triggers its flush.
        timeout: Ps,
    },
}

/// An unmapped range waiting for its flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingUnmap {
    /// First I/O page.
    pub pfn: u64,
    /// Pages.
    pub pages: u64,
    /// Pages still cached in the IOTLB at unmap (reachable until the flush).
    pub cached_pages: u64,
    /// When the driver unmapped it.
    pub unmapped_at: Ps,
}

/// What an unmap asks of the IOMMU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlushAction {
    /// Invalidate these pages now, then free the range (strict).
    InvalidateNow,
    /// Nothing now: the range waits in a queue.
    Queued,
    /// Flush the whole IOTLB now (at the returned time), then free every range listed.
    FlushAll {
        /// When the flush happens: now, or the moment the oldest entry timed out.
        at: Ps,
        /// The ranges the flush releases.
        released: Vec<PendingUnmap>,
    },
}

/// Bytes left reachable after unmap, and for how long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Exposure {
    /// Unmapped pages whose translation was still cached when the driver unmapped them.
    pub pages_exposed: u64,
    /// Sum over those pages of the time until their flush, in page-picoseconds.
    pub page_ps: u128,
    /// The longest time one page stayed reachable after its unmap.
    pub max_window_ps: Ps,
}

/// The queues of one IOMMU domain under a policy.
#[derive(Clone, Debug)]
pub struct FlushQueues {
    policy: FlushPolicy,
    queues: Vec<Vec<PendingUnmap>>,
    exposure: Exposure,
    flushes: u64,
}

impl FlushQueues {
    /// Queues for `cpus` CPUs under `policy`.
    pub fn new(policy: FlushPolicy, cpus: usize) -> FlushQueues {
        let n = match policy {
            FlushPolicy::PerCpu { .. } => cpus.max(1),
            _ => 1,
        };
        FlushQueues {
            policy,
            queues: vec![Vec::new(); n],
            exposure: Exposure::default(),
            flushes: 0,
        }
    }

    /// The policy.
    pub fn policy(&self) -> FlushPolicy {
        self.policy
    }

    /// The driver unmapped `pending` on `cpu`: what must happen now.
    #[inline(always)]
    pub fn on_unmap(&mut self, cpu: usize, pending: PendingUnmap) -> FlushAction {
        let (high_water, timeout) = match self.policy {
            FlushPolicy::Strict => return FlushAction::InvalidateNow,
            FlushPolicy::Deferred {
                high_water,
                timeout,
            }
            | FlushPolicy::PerCpu {
                high_water,
                timeout,
            } => (high_water, timeout),
        };
        let now = pending.unmapped_at;
        let q = self.queue_index(cpu);
        // A queue whose oldest entry timed out before this unmap was flushed by its timer then.
        if let Some(action) = self.expire(q, now, timeout) {
            self.queues[q].push(pending);
            return action;
        }
        self.queues[q].push(pending);
        if self.queues[q].len() >= high_water.max(1) {
            return self.flush_queue(q, now);
        }
        FlushAction::Queued
    }

    /// Flush every queue whose oldest entry is older than the timeout at `now` (the timer).
    pub fn on_timer(&mut self, now: Ps) -> Vec<FlushAction> {
        let timeout = match self.policy {
            FlushPolicy::Strict => return Vec::new(),
            FlushPolicy::Deferred { timeout, .. } | FlushPolicy::PerCpu { timeout, .. } => timeout,
        };
        (0..self.queues.len())
            .filter_map(|q| self.expire(q, now, timeout))
            .collect()
    }

    fn expire(&mut self, q: usize, now: Ps, timeout: Ps) -> Option<FlushAction> {
        let oldest = self.queues[q].first()?.unmapped_at;
        let due = oldest + timeout;
        (due <= now).then(|| self.flush_queue(q, due))
    }

    fn flush_queue(&mut self, q: usize, at: Ps) -> FlushAction {
        // The next batch grows as large: room for it now, not by doubling from empty.
        let room = Vec::with_capacity(self.queues[q].len());
        let released = std::mem::replace(&mut self.queues[q], room);
        for p in &released {
            self.account(p, at);
        }
        self.flushes += 1;
        FlushAction::FlushAll { at, released }
    }

    fn account(&mut self, p: &PendingUnmap, flushed_at: Ps) {
        if p.cached_pages == 0 {
            return;
        }
        let window = flushed_at - p.unmapped_at;
        self.exposure.pages_exposed += p.cached_pages;
        self.exposure.page_ps += u128::from(window.0) * u128::from(p.cached_pages);
        self.exposure.max_window_ps = self.exposure.max_window_ps.max(window);
    }

    fn queue_index(&self, cpu: usize) -> usize {
        // One queue (the global policy), or a CPU's own: no division on the unmap path.
        let n = self.queues.len();
        if cpu < n {
            cpu
        } else if n == 1 {
            0
        } else {
            cpu % n
        }
    }

    /// Entries waiting in all queues.
    pub fn pending(&self) -> usize {
        self.queues.iter().map(Vec::len).sum()
    }

    /// Flushes so far.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// The exposure so far (pending entries are not yet counted).
    pub fn exposure(&self) -> Exposure {
        self.exposure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unmap(pfn: u64, at: u64, cached: u64) -> PendingUnmap {
        PendingUnmap {
            pfn,
            pages: 1,
            cached_pages: cached,
            unmapped_at: Ps(at),
        }
    }

    #[test]
    fn strict_invalidates_every_unmap() {
        let mut f = FlushQueues::new(FlushPolicy::Strict, 4);
        assert_eq!(f.on_unmap(0, unmap(1, 0, 1)), FlushAction::InvalidateNow);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn deferred_flushes_at_the_high_water_mark_and_counts_exposure() {
        let mut f = FlushQueues::new(
            FlushPolicy::Deferred {
                high_water: 3,
                timeout: Ps(1_000),
            },
            1,
        );
        assert_eq!(f.on_unmap(0, unmap(1, 0, 1)), FlushAction::Queued);
        assert_eq!(f.on_unmap(0, unmap(2, 10, 0)), FlushAction::Queued);
        let FlushAction::FlushAll { at, released } = f.on_unmap(0, unmap(3, 20, 1)) else {
            panic!()
        };
        assert_eq!((at, released.len()), (Ps(20), 3));
        let e = f.exposure();
        assert_eq!(
            (e.pages_exposed, e.page_ps, e.max_window_ps),
            (2, 20, Ps(20))
        );
    }

    #[test]
    fn deferred_times_out() {
        let mut f = FlushQueues::new(
            FlushPolicy::Deferred {
                high_water: 250,
                timeout: Ps(100),
            },
            1,
        );
        f.on_unmap(0, unmap(1, 0, 1));
        assert!(f.on_timer(Ps(99)).is_empty());
        let actions = f.on_timer(Ps(150));
        assert!(matches!(
            &actions[..],
            [FlushAction::FlushAll { at: Ps(100), .. }]
        ));
        // An unmap arriving after a missed timeout flushes the old entries first.
        f.on_unmap(0, unmap(2, 200, 1));
        let a = f.on_unmap(0, unmap(3, 400, 1));
        assert!(
            matches!(a, FlushAction::FlushAll { at: Ps(300), ref released } if released.len() == 1)
        );
        assert_eq!(f.pending(), 1);
    }

    #[test]
    fn per_cpu_queues_flush_separately() {
        let mut f = FlushQueues::new(
            FlushPolicy::PerCpu {
                high_water: 2,
                timeout: Ps(1_000),
            },
            2,
        );
        assert_eq!(f.on_unmap(0, unmap(1, 0, 0)), FlushAction::Queued);
        assert_eq!(f.on_unmap(1, unmap(2, 0, 0)), FlushAction::Queued);
        assert!(matches!(
            f.on_unmap(0, unmap(3, 1, 0)),
            FlushAction::FlushAll { .. }
        ));
        assert_eq!(f.pending(), 1);
    }
}
