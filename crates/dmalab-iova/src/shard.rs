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

/// Owned slots that threads gave back at exit, for the next threads to take (lowest first).
static FREE_OWNED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
static NEXT_OWNED: AtomicUsize = AtomicUsize::new(0);
/// This thread's owned slot was given back (the thread is exiting): it owns none any more.
const RELEASED: usize = usize::MAX - 1;

/// Gives the thread's owned slot back when the thread exits.
struct OwnedSlotGuard;

impl Drop for OwnedSlotGuard {
    fn drop(&mut self) {
        let v = OWNED.with(|s| s.replace(RELEASED));
        if v < RELEASED {
            crate::lock(&FREE_OWNED).push(v);
        }
    }
}

thread_local! {
    static OWNED: Cell<usize> = const { Cell::new(UNASSIGNED) };
    static OWNED_GUARD: OwnedSlotGuard = const { OwnedSlotGuard };
}

/// A slot no other live thread holds, kept until this thread exits and then handed to a later
/// thread (the hand-over goes through a mutex, so everything the old owner did happens before
/// the new owner's first use). Low numbers are reused first, so the slots in use stay as few as
/// the threads alive. `None` while the thread is being torn down (after its slot went back).
#[inline]
pub(crate) fn owned_slot() -> Option<usize> {
    match OWNED.with(Cell::get) {
        RELEASED => None,
        UNASSIGNED => assign_owned_slot(),
        v => Some(v),
    }
}

#[cold]
fn assign_owned_slot() -> Option<usize> {
    // Registers the guard's destructor; refused once the thread's destructors are running.
    OWNED_GUARD.try_with(|_| ()).ok()?;
    let v = {
        let mut free = crate::lock(&FREE_OWNED);
        match free.iter().enumerate().min_by_key(|&(_, &v)| v) {
            Some((i, _)) => free.swap_remove(i),
            // (Saturating after 2^64 threads: a slot that high is never a cache index, so the
            // threads sharing it take the locked caches.)
            None => NEXT_OWNED.fetch_add(1, Ordering::Relaxed).min(RELEASED - 1),
        }
    };
    OWNED.with(|s| s.set(v));
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_slots_are_exclusive_among_live_threads_and_reused() {
        let mine = owned_slot().expect("a live thread owns a slot");
        assert_eq!(owned_slot(), Some(mine), "stable for the thread");
        let barrier = std::sync::Barrier::new(4);
        let slots: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let v = owned_slot().expect("owned");
                        barrier.wait(); // all four alive at once
                        v
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("no panic"))
                .collect()
        });
        let mut all = slots.clone();
        all.push(mine);
        all.sort_unstable();
        all.dedup();
        assert_eq!(
            all.len(),
            5,
            "live threads never share a slot: {slots:?} and {mine}"
        );
    }
}
