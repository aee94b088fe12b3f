//! A minimal spin lock for the per-CPU caches, whose critical sections are a few instructions.
//!
//! Taking it is one compare-exchange and releasing it one plain store, against two atomic
//! read-modify-writes for `std::sync::Mutex`; on the cache-hit path that is a third of the
//! work. A cache is contended only when another thread flushes it or two threads share a slot,
//! so a waiter spins briefly and then yields.
//!
//! The backend (the tree and the depot) is behind a `std::sync::Mutex` instead: its holds are
//! longer (a search, a spill), and with more threads than cores its holder is sometimes
//! descheduled. Spinning-then-yielding waiters then switched threads hundreds of thousands of
//! times a second; a `Mutex` waiter spins a little, then sleeps until the holder lets go
//! (`docs/results/2026-11-26-oversubscription.md`).

use std::ops::{Deref, DerefMut};

use super::sync::{spin_loop, yield_now, Access, AtomicBool, GuardedCell, Ordering};

/// A value behind a spin lock.
#[derive(Debug, Default)]
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: GuardedCell<T>,
}

// SAFETY: the lock hands out `&mut T` to one holder at a time (acquire on lock, release on
// unlock), so sharing the lock across threads is sound whenever `T` may be sent between them.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the value; `T: Send` allows that.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    #[cfg(test)]
    pub fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: GuardedCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    spin_loop();
                } else {
                    yield_now();
                }
            }
        }
        SpinGuard {
            lock: self,
            access: self.value.begin(),
        }
    }
}

/// Exclusive access until dropped.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    access: Access<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: holding the guard means holding the lock: no other reference exists.
        unsafe { self.lock.value.get(&self.access) }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only reference from the guard.
        unsafe { self.lock.value.get_mut(&mut self.access) }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.access.end();
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exactly_under_contention() {
        let l = SpinLock::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        *l.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*l.lock(), 80_000);
    }
}

/// A model check of the lock (see `owned.rs`'s `loom_model` for how to run it): two threads add
/// to the value with plain arithmetic, and loom checks every interleaving.
#[cfg(all(test, loom))]
mod loom_model {
    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    #[test]
    fn two_holders_exclude_each_other() {
        loom::model(|| {
            let l = Arc::new(SpinLock::new(0u64));
            let other = {
                let l = l.clone();
                thread::spawn(move || *l.lock() += 1)
            };
            *l.lock() += 1;
            other.join().unwrap();
            assert_eq!(*l.lock(), 2);
        });
    }
}
