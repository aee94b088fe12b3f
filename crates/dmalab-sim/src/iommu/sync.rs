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
//!
//! An unmap of several pages without range commands writes one command per page: the CPU
//! takes `command_write_ns` for each after the first (building it and copying it into the
//! queue, in Linux's batches), while the IOMMU works through those already written. The
//! unmap's wait then ends no earlier than the last command written plus a lone
//! invalidation's time: with one CPU the writing bounds a large unmap, with several the
//! IOMMU's `command_ns` does.

/// How an unmap of several pages is invalidated: one range command where the IOMMU has
/// range invalidation (SMMUv3.2's TLBI range, `range_invalidation = "on"`), else one command
/// per page, and past `max_page_commands` pages one invalidation of the whole domain instead
/// (as Linux's arm-smmu-v3 driver does rather than queue thousands of commands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PageCommands {
    /// Whether one command covers a range of pages.
    pub range: bool,
    /// The most per-page commands for one unmap before the whole domain is invalidated.
    pub max_page_commands: u64,
}

impl PageCommands {
    /// One command for any range (and so never a whole-domain fallback).
    pub const RANGE: PageCommands = PageCommands {
        range: true,
        max_page_commands: u64::MAX,
    };

    /// Commands for an unmap of `pages` pages, and whether it is a whole-domain invalidation.
    pub fn for_pages(self, pages: u64) -> (u64, bool) {
        if self.range || pages <= 1 {
            (1, false)
        } else if pages > self.max_page_commands {
            (1, true)
        } else {
            (pages, false)
        }
    }
}

/// What a shared-sync queue's commands cost, in nanoseconds (`[iommu_hw]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SyncCosts {
    /// The IOMMU's time for each command of a batch after the first.
    pub command_ns: u64,
    /// The CPU's time to build and write each command of an unmap after the first.
    pub command_write_ns: u64,
    /// How an unmap's pages become commands.
    pub pages: PageCommands,
}

/// When an unmap's invalidation starts and ends, in picoseconds, and how long its CPU spent
/// writing the commands after the first (part of the time to the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Joined {
    /// When the IOMMU starts on the unmap's batch.
    pub start: u64,
    /// When the unmap's wait completes.
    pub end: u64,
    /// The CPU's time writing the commands after the first.
    pub writing: u64,
}

/// The queue's state, in picoseconds.
#[derive(Clone, Debug)]
pub struct SharedSync {
    command_ps: u64,
    write_ps: u64,
    /// How an unmap's pages become commands, and a whole-domain invalidation's time.
    pages: PageCommands,
    full_ps: u64,
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
    /// An idle queue with `costs`, taking `full_ps` for a whole-domain invalidation.
    pub fn new(costs: SyncCosts, full_ps: u64) -> Self {
        Self {
            command_ps: costs.command_ns * 1000,
            write_ps: costs.command_write_ns * 1000,
            pages: costs.pages,
            full_ps,
            started_end: 0,
            next: None,
            busy_ps: 0,
            batches: 0,
        }
    }

    /// An unmap of `pages` pages whose page-selective invalidation takes `service` on its own
    /// reaches the queue at `now`: [`SharedSync::join`] with its commands (a whole-domain
    /// invalidation past the per-page limit), ending no earlier than its CPU's last command
    /// written plus `service`.
    pub fn join_unmap(&mut self, now: u64, service: u64, pages: u64) -> Joined {
        let (commands, service) = match self.pages.for_pages(pages) {
            (_, true) => (1, self.full_ps.max(service)),
            (commands, false) => (commands, service),
        };
        let writing = commands.saturating_sub(1) * self.write_ps;
        let (start, end) = self.join(now, service, commands);
        Joined {
            start,
            end: end.max(now + writing + service),
            writing,
        }
    }

    /// An invalidation of `commands` commands, the first taking `service` on its own,
    /// reaches the queue at `now`: returns when the IOMMU starts on its batch and when its
    /// wait completes.
    pub fn join(&mut self, now: u64, service: u64, commands: u64) -> (u64, u64) {
        let more = commands.saturating_sub(1) * self.command_ps;
        if let Some((start, end)) = self.next {
            if now <= start {
                let end = end + self.command_ps + more;
                self.next = Some((start, end));
                self.busy_ps += u128::from(self.command_ps + more);
                return (start, end);
            }
            // The batch that was next has started.
            self.started_end = end;
            self.next = None;
        }
        self.batches += 1;
        self.busy_ps += u128::from(service + more);
        if now >= self.started_end {
            self.started_end = now + service + more;
            return (now, self.started_end);
        }
        let start = self.started_end;
        self.next = Some((start, start + service + more));
        (start, start + service + more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_queue_starts_at_once_and_a_busy_one_batches_the_next() {
        let costs = |pages| SyncCosts {
            command_ns: 0,
            command_write_ns: 0,
            pages,
        };
        let mut q = SharedSync::new(costs(PageCommands::RANGE), 1);
        q.command_ps = 50;
        q.full_ps = 1000;
        assert_eq!(q.join(0, 800, 1), (0, 800));
        // Three arrive while the first is in hand: one batch at 800, 50 apart.
        assert_eq!(q.join(100, 800, 1), (800, 1600));
        assert_eq!(q.join(200, 800, 1), (800, 1650));
        assert_eq!(q.join(700, 800, 1), (800, 1700));
        // One arriving after that batch started waits for it, then starts the next.
        assert_eq!(q.join(900, 800, 1), (1700, 2500));
        assert_eq!(q.batches, 3);
        assert_eq!(q.busy_ps, 800 + 800 + 100 + 800);
        // Idle again.
        assert_eq!(q.join(3000, 800, 1), (3000, 3800));
        // Four per-page commands: the first's full time, three more at 50 each; one joining
        // that batch's successor adds its own four.
        assert_eq!(q.join(4000, 800, 4), (4000, 4950));
        assert_eq!(q.join(4100, 800, 4), (4950, 5900));
        assert_eq!(q.join(4200, 800, 4), (4950, 6100));
        let per_page = PageCommands {
            range: false,
            max_page_commands: 512,
        };
        assert_eq!(per_page.for_pages(256), (256, false));
        assert_eq!(per_page.for_pages(513), (1, true));
        let range = PageCommands {
            range: true,
            ..per_page
        };
        assert_eq!(range.for_pages(256), (1, false));
        // An unmap past the per-page limit invalidates the whole domain, once.
        let mut q = SharedSync::new(costs(per_page), 1);
        q.command_ps = 50;
        q.full_ps = 1000;
        let at = |j: Joined| (j.start, j.end);
        assert_eq!(at(q.join_unmap(0, 800, 1000)), (0, 1000));
        assert_eq!(at(q.join_unmap(2000, 800, 3)), (2000, 2900));
        // A CPU writing its commands slower than the IOMMU takes them bounds its unmap: the
        // last written at 200 per command after the first, then a lone invalidation's time.
        q.write_ps = 200;
        let j = q.join_unmap(10_000, 800, 4);
        assert_eq!((j.start, j.end, j.writing), (10_000, 11_400, 600));
        // Faster writing leaves the IOMMU's time.
        q.write_ps = 10;
        let j = q.join_unmap(20_000, 800, 4);
        assert_eq!((j.start, j.end, j.writing), (20_000, 20_950, 30));
    }
}
