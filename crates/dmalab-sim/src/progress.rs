//! Progress of one run, for a user watching a long one: how many operations of how many are
//! done. A [`Progress`] is a handle made per run and passed in; clones share its counters, so a
//! caller keeps one and polls it while the run, on another thread, writes it. It never affects
//! results, and runs in parallel each have their own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Operations between two updates of the counters.
pub const EVERY: u64 = 4096;

/// A run's progress counters: `(done, total)` operations.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    counters: Arc<[AtomicU64; 2]>,
}

impl Progress {
    /// Counters at zero, before any run.
    pub fn new() -> Self {
        Self::default()
    }

    /// A run of `total` operations starts.
    pub fn start(&self, total: u64) {
        self.counters[0].store(0, Ordering::Relaxed);
        self.counters[1].store(total, Ordering::Relaxed);
    }

    /// `done` operations are finished (the counters move every [`EVERY`] operations and at the
    /// end, to keep the hot path free of shared writes).
    pub fn set(&self, done: u64) {
        self.counters[0].store(done, Ordering::Relaxed);
    }

    /// Note that `done` operations are finished, writing the counter every [`EVERY`].
    pub fn tick(&self, done: u64) {
        if done.is_multiple_of(EVERY) {
            self.set(done);
        }
    }

    /// `(done, total)` (`total` is 0 before the run starts).
    pub fn get(&self) -> (u64, u64) {
        (
            self.counters[0].load(Ordering::Relaxed),
            self.counters[1].load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_counters_and_separate_handles_do_not() {
        let a = Progress::new();
        let seen = a.clone();
        let other = Progress::new();
        a.start(10_000);
        a.tick(4095);
        assert_eq!(seen.get(), (0, 10_000));
        a.tick(4096);
        assert_eq!(seen.get(), (4096, 10_000));
        assert_eq!(other.get(), (0, 0));
    }
}
