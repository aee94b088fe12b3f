//! Progress of the run in progress, for a user watching a long one: how many operations of how
//! many are done. One process-wide pair of counters, written by the workloads every few thousand
//! operations and read by whoever draws a progress bar; it never affects results.

use std::sync::atomic::{AtomicU64, Ordering};

static DONE: AtomicU64 = AtomicU64::new(0);
static TOTAL: AtomicU64 = AtomicU64::new(0);

/// Operations between two updates of the counters.
pub const EVERY: u64 = 4096;

/// A run of `total` operations starts.
pub fn start(total: u64) {
    DONE.store(0, Ordering::Relaxed);
    TOTAL.store(total, Ordering::Relaxed);
}

/// `done` operations are finished.
pub fn set(done: u64) {
    DONE.store(done, Ordering::Relaxed);
}

/// `(done, total)` of the latest run (`total` is 0 before any run).
pub fn get() -> (u64, u64) {
    (DONE.load(Ordering::Relaxed), TOTAL.load(Ordering::Relaxed))
}
