//! Which per-CPU cache a thread uses: a slot fixed per thread, so that a thread always finds its
//! own cache (no migration, unlike the kernel's per-CPU data) and runs are repeatable.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// Not yet assigned: no slot takes this value (slots are masked below it).
const UNASSIGNED: usize = usize::MAX;

thread_local! {
    // A constant initialiser and no destructor: reading the slot is one thread-local load,
    // with no lazy-initialisation state to check.
    static SLOT: Cell<usize> = const { Cell::new(UNASSIGNED) };
}

/// This thread's slot, assigned on first use in thread-start order.
#[inline]
pub(crate) fn thread_slot() -> usize {
    SLOT.with(|s| match s.get() {
        UNASSIGNED => {
            let v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) & (UNASSIGNED >> 1);
            s.set(v);
            v
        }
        v => v,
    })
}

/// How many caches a domain keeps: twice the hardware threads, so that threads created in a
/// burst rarely share one.
pub(crate) fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(8, |n| 2 * n.get())
}
