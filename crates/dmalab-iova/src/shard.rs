//! Which per-CPU cache a thread uses: a slot fixed per thread, so that a thread always finds its
//! own cache (no migration, unlike the kernel's per-CPU data) and runs are repeatable.

use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
}

/// This thread's slot, assigned on first use in thread-start order.
#[inline]
pub(crate) fn thread_slot() -> usize {
    SLOT.with(|s| *s)
}

/// How many caches a domain keeps: twice the hardware threads, so that threads created in a
/// burst rarely share one.
pub(crate) fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(8, |n| 2 * n.get())
}
