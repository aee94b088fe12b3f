//! Progress of one run, for a user watching a long one: how many operations of how many are
//! done, and a way to stop it. A [`Progress`] is a handle made per run and passed in; clones
//! share its counters, so a caller keeps one and polls it while the run, on another thread,
//! writes it. It never affects results, and runs in parallel each have their own.
//!
//! [`Progress::cancel`] asks the run to stop (a user's Ctrl-C): every long loop looks at the
//! flag where it writes its counters (every [`EVERY`] operations, well under a millisecond of
//! work) and returns [`crate::SimError::Interrupted`] instead of a result.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

thread_local! {
    /// The stop flag that [`Progress::new`] takes on this thread, inside [`Progress::within`].
    static AMBIENT: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Operations between two updates of the counters.
pub const EVERY: u64 = 4096;

/// A run's progress counters: `(done, total)` operations.
#[derive(Clone, Debug)]
pub struct Progress {
    counters: Arc<[AtomicU64; 2]>,
    stop: Arc<AtomicBool>,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            counters: Arc::default(),
            stop: AMBIENT.with(|a| a.borrow().clone()).unwrap_or_default(),
        }
    }
}

impl Progress {
    /// Counters at zero, before any run; its stop flag is the one [`Progress::within`] set on
    /// this thread, if any, else its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Run `f` on this thread with this handle's stop flag as every new handle's: the runs
    /// that `f` makes with [`Progress::new`] (a claim's many runs) stop when this one is
    /// cancelled.
    pub fn within<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Restore(Option<Arc<AtomicBool>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                AMBIENT.with(|a| *a.borrow_mut() = self.0.take());
            }
        }
        let _restore = Restore(AMBIENT.with(|a| a.borrow_mut().replace(Arc::clone(&self.stop))));
        f()
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

    /// Note that `done` operations are finished, writing the counter every [`EVERY`]; false
    /// once the run was asked to stop (looked at only when the counter is written).
    #[must_use = "a run stops when tick returns false"]
    pub fn tick(&self, done: u64) -> bool {
        if done.is_multiple_of(EVERY) {
            self.set(done);
            return !self.cancelled();
        }
        true
    }

    /// A handle for a run inside this one: its own counters, this one's stop flag (a cancel of
    /// either stops both).
    pub fn child(&self) -> Self {
        Self {
            counters: Arc::default(),
            stop: Arc::clone(&self.stop),
        }
    }

    /// Ask the run to stop; it returns [`crate::SimError::Interrupted`] within [`EVERY`]
    /// operations.
    pub fn cancel(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether the run was asked to stop.
    pub fn cancelled(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// [`crate::SimError::Interrupted`] if the run was asked to stop, with how far it got.
    pub fn check(&self) -> crate::Result<()> {
        if self.cancelled() {
            let (done, total) = self.get();
            return Err(crate::SimError::Interrupted { done, total });
        }
        Ok(())
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
        assert!(a.tick(4095));
        assert_eq!(seen.get(), (0, 10_000));
        assert!(a.tick(4096));
        assert_eq!(seen.get(), (4096, 10_000));
        assert_eq!(other.get(), (0, 0));
    }

    #[test]
    fn a_cancel_is_seen_by_clones_at_the_next_counter_write() {
        let a = Progress::new();
        let run = a.clone();
        run.start(100_000);
        assert!(run.check().is_ok());
        a.cancel();
        assert!(
            run.tick(4097),
            "looked at only where the counter is written"
        );
        assert!(!run.tick(8192));
        assert!(matches!(
            run.check(),
            Err(crate::SimError::Interrupted {
                done: 8192,
                total: 100_000
            })
        ));
        assert!(!Progress::new().cancelled());
        let parent = Progress::new();
        let inner = parent.child();
        inner.start(5);
        assert_eq!(parent.get(), (0, 0), "a child keeps its own counters");
        parent.cancel();
        assert!(inner.cancelled());
        let outer = Progress::new();
        let made = outer.within(Progress::new);
        assert!(!Progress::new().cancelled() && !made.cancelled());
        outer.cancel();
        assert!(
            made.cancelled(),
            "a handle made within shares the stop flag"
        );
        assert!(!Progress::new().cancelled(), "only within");
    }
}
