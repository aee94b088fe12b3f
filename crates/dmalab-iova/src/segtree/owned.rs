//! A per-thread cache that its owner enters without an atomic read-modify-write, and that any
//! other thread can still take whole (to flush it, or to read it for a report).
//!
//! Each cache slot has one owner at a time: the live thread holding that index from
//! [`owned_slot`](crate::shard::owned_slot), which no other live thread holds. The owner and a
//! thief (any thread that needs the cache while the owner may be using it) exclude each other
//! with two flags, Dekker-style: the owner raises `busy` and then reads `steal`; a thief raises
//! `steal` and then reads `busy`, and whoever sees the other's flag backs off (the owner) or
//! waits (the thief, while the owner's few instructions finish).
//!
//! Dekker needs each side's store ordered before its load. The owner's side is the hot path, so
//! on Linux it orders them for free (a compiler fence only) and the thief pays instead, with a
//! process-wide barrier (`membarrier(2)`, private expedited): the kernel runs a full memory
//! barrier on every CPU running one of our threads, so either the owner's `busy` store is
//! visible to the thief's load, or the owner's `steal` load comes after the barrier and sees
//! the thief's store. Thieves are rare (a flush after a failed search, `stats`, `work`,
//! `memory_bytes`). Where the barrier is not available (another OS, or a sandbox refusing the
//! call), both sides use an ordinary `SeqCst` fence, which is correct everywhere and costs the
//! owner one fence, as much as a lock.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, fence, AtomicBool, Ordering};
use std::sync::OnceLock;

use super::spin::SpinLock;

/// How owners and thieves order their flag store before their flag load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fences {
    /// Owner: compiler fence; thief: `membarrier(2)`.
    Asymmetric,
    /// Both: `fence(SeqCst)`.
    Symmetric,
}

impl Fences {
    /// The best the platform offers, decided once per process (registering for the barrier).
    pub fn detect() -> Self {
        static MODE: OnceLock<Fences> = OnceLock::new();
        *MODE.get_or_init(|| {
            if std::env::var_os("DMALAB_SEGTREE_SYMMETRIC_FENCES").is_some() {
                return Self::Symmetric;
            }
            if membarrier::register() {
                Self::Asymmetric
            } else {
                Self::Symmetric
            }
        })
    }

    #[inline]
    fn light(self) {
        match self {
            Self::Asymmetric => compiler_fence(Ordering::SeqCst),
            Self::Symmetric => fence(Ordering::SeqCst),
        }
    }

    fn heavy(self) {
        match self {
            Self::Asymmetric => membarrier::barrier(),
            Self::Symmetric => fence(Ordering::SeqCst),
        }
    }
}

#[cfg(target_os = "linux")]
mod membarrier {
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier(cmd, flags = 0, cpu_id = 0) reads and writes no user memory.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    }

    /// Register this process for private expedited barriers; false if the kernel refuses.
    pub fn register() -> bool {
        call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && call(CMD_PRIVATE_EXPEDITED) == 0
    }

    /// A full memory barrier on every CPU running a thread of this process.
    pub fn barrier() {
        // Once registration succeeded the command cannot fail (its only errors are for an
        // unregistered process or an unknown command); a failure would leave owners unordered,
        // so it stops the process rather than risk handing out a range twice.
        if call(CMD_PRIVATE_EXPEDITED) != 0 {
            std::process::abort();
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod membarrier {
    pub fn register() -> bool {
        false
    }
    pub fn barrier() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// A value its owner enters cheaply and any thread can steal; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Owned<T> {
    /// The owner is inside (raised and lowered by the owner only).
    busy: AtomicBool,
    /// A thief is inside or about to be (raised and lowered by the thief holding `thieves`).
    steal: AtomicBool,
    /// One thief at a time.
    thieves: SpinLock<()>,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached only through `OwnerGuard` and `StealGuard`, which the flag protocol
// makes exclusive (see the module documentation); `T: Send` lets it move between threads.
unsafe impl<T: Send> Sync for Owned<T> {}
// SAFETY: as for `Sync`.
unsafe impl<T: Send> Send for Owned<T> {}

impl<T> Owned<T> {
    /// Enter as the owner.
    ///
    /// # Safety
    ///
    /// The caller must be this value's owner: no other thread may call `enter` on it until the
    /// caller hands ownership on with a happens-before edge (as the slot registry does), and the
    /// caller must not enter again while a guard from this call lives.
    #[inline(always)]
    pub unsafe fn enter(&self, fences: Fences) -> OwnerGuard<'_, T> {
        debug_assert!(!self.busy.load(Ordering::Relaxed), "owner entered twice");
        self.busy.store(true, Ordering::Relaxed);
        fences.light();
        // Acquire: a thief's writes to the value come before its release of `steal`.
        if !self.steal.load(Ordering::Acquire) {
            return OwnerGuard { owned: self };
        }
        self.enter_stolen(fences)
    }

    /// The rest of `enter` when a thief holds the value: step back, wait, and try again.
    /// Kept out of line, so the uncontended entry inlined into every cached call stays short.
    #[cold]
    #[inline(never)]
    fn enter_stolen(&self, fences: Fences) -> OwnerGuard<'_, T> {
        loop {
            self.busy.store(false, Ordering::Release);
            let mut spins = 0u32;
            while self.steal.load(Ordering::Relaxed) {
                backoff(&mut spins);
            }
            self.busy.store(true, Ordering::Relaxed);
            fences.light();
            if !self.steal.load(Ordering::Acquire) {
                return OwnerGuard { owned: self };
            }
        }
    }

    /// Take the value from whichever thread owns it (slow: a process-wide barrier).
    #[cfg(test)]
    pub fn steal(&self, fences: Fences) -> StealGuard<'_, T> {
        Self::steal_all(std::iter::once(self), fences)
            .pop()
            .expect("one value, one guard")
    }

    /// Take every value, in order, with one barrier for all (none when there is nothing to
    /// take). Thieves take values in a fixed order (callers pass them in the same order), so
    /// they never wait on each other in a cycle.
    pub fn steal_all<'a>(
        all: impl Iterator<Item = &'a Self>,
        fences: Fences,
    ) -> Vec<StealGuard<'a, T>>
    where
        T: 'a,
    {
        let guards: Vec<StealGuard<'a, T>> = all
            .map(|o| {
                let thieves = o.thieves.lock();
                o.steal.store(true, Ordering::Relaxed);
                StealGuard {
                    owned: o,
                    _thieves: thieves,
                }
            })
            .collect();
        if guards.is_empty() {
            return guards;
        }
        fences.heavy();
        for g in &guards {
            let mut spins = 0u32;
            // Acquire: the owner's writes come before its release of `busy`.
            while g.owned.busy.load(Ordering::Acquire) {
                backoff(&mut spins);
            }
        }
        guards
    }
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// The owner's exclusive access, until dropped.
pub(crate) struct OwnerGuard<'a, T> {
    owned: &'a Owned<T>,
}

impl<T> Deref for OwnerGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the owner is inside and no thief is (the flag protocol): no other reference.
        unsafe { &*self.owned.value.get() }
    }
}

impl<T> DerefMut for OwnerGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { &mut *self.owned.value.get() }
    }
}

impl<T> Drop for OwnerGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.owned.busy.store(false, Ordering::Release);
    }
}

/// A thief's exclusive access, until dropped.
pub(crate) struct StealGuard<'a, T> {
    owned: &'a Owned<T>,
    _thieves: super::spin::SpinGuard<'a, ()>,
}

impl<T> Deref for StealGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the owner is outside and will stay out while `steal` is raised; other thieves
        // wait on `thieves`.
        unsafe { &*self.owned.value.get() }
    }
}

impl<T> DerefMut for StealGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { &mut *self.owned.value.get() }
    }
}

impl<T> Drop for StealGuard<'_, T> {
    fn drop(&mut self) {
        self.owned.steal.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owner and thieves each add to a counter they only read and write through their
    /// guards, with plain (non-atomic) arithmetic: a lost update means the exclusion failed.
    fn counts_exactly(fences: Fences) {
        let o = Owned::<u64>::default();
        let per = 200_000u64;
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..per {
                    // SAFETY: this thread is the only one that enters.
                    let mut g = unsafe { o.enter(fences) };
                    *g += 1;
                }
            });
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..per / 100 {
                        *o.steal(fences) += 1;
                    }
                });
            }
        });
        assert_eq!(*o.steal(fences), per + 2 * (per / 100));
    }

    #[test]
    fn owner_and_thieves_exclude_each_other() {
        counts_exactly(Fences::detect());
        counts_exactly(Fences::Symmetric);
    }
}
