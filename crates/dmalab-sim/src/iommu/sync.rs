//! A command queue whose one wait completes every command queued before it, as SMMUv3's
//! CMD_SYNC does (Arm IHI 0070, 4.7.3), filled by CPUs without a global lock (Linux's
//! arm-smmu-v3 driver claims queue space with an atomic since 5.5): the timing of strict
//! invalidations that many CPUs put to one IOMMU at once ([`crate::iommu::walk::Invalidation::SharedSync`]).
//!
//! The IOMMU works on one batch at a time. An invalidation that reaches the queue while it is
//! idle starts a batch at once; one that comes while a batch is in hand joins the next batch,
//! which starts when the one in hand ends. A batch's first invalidation takes its full time
//! (the command and the wait for its completion, `invalidate_ns`); each later one adds
//! `command_ns`, the IOMMU's time for one more command, as the completion it waits for is the
//! one already under way. Each CPU's own wait ends once its command is done: the first
//! joiner's at the batch's start plus its time, each later one's `command_ns` after the one
//! before.

/// The queue's state, in picoseconds.
#[derive(Clone, Debug, Default)]
pub struct SharedSync {
    command_ps: u64,
    /// When the latest batch that has started ends.
    started_end: u64,
    /// The batch that has not started yet: its start and when its last command ends.
    next: Option<(u64, u64)>,
    /// Picoseconds the IOMMU spent on invalidations.
    pub busy_ps: u128,
    /// Batches started.
    pub batches: u64,
}

impl SharedSync {
    /// An idle queue whose IOMMU takes `command_ps` per command after a batch's first.
    pub fn new(command_ps: u64) -> Self {
        Self {
            command_ps,
            ..Self::default()
        }
    }

    /// An invalidation taking `service` on its own reaches the queue at `now`: returns when
    /// the IOMMU starts on its batch and when its wait completes.
    pub fn join(&mut self, now: u64, service: u64) -> (u64, u64) {
        if let Some((start, end)) = self.next {
            if now <= start {
                let end = end + self.command_ps;
                self.next = Some((start, end));
                self.busy_ps += u128::from(self.command_ps);
                return (start, end);
            }
            // The batch that was next has started.
            self.started_end = end;
            self.next = None;
        }
        self.batches += 1;
        self.busy_ps += u128::from(service);
        if now >= self.started_end {
            self.started_end = now + service;
            return (now, self.started_end);
        }
        let start = self.started_end;
        self.next = Some((start, start + service));
        (start, start + service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_queue_starts_at_once_and_a_busy_one_batches_the_next() {
        let mut q = SharedSync::new(50);
        assert_eq!(q.join(0, 800), (0, 800));
        // Three arrive while the first is in hand: one batch at 800, 50 apart.
        assert_eq!(q.join(100, 800), (800, 1600));
        assert_eq!(q.join(200, 800), (800, 1650));
        assert_eq!(q.join(700, 800), (800, 1700));
        // One arriving after that batch started waits for it, then starts the next.
        assert_eq!(q.join(900, 800), (1700, 2500));
        assert_eq!(q.batches, 3);
        assert_eq!(q.busy_ps, 800 + 800 + 100 + 800);
        // Idle again.
        assert_eq!(q.join(3000, 800), (3000, 3800));
    }
}
