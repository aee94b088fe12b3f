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
//! where it can the domain orders them for free on that side (a compiler fence only) and the
//! thief pays instead, with a process-wide barrier (`membarrier(2)`, private expedited): the
//! kernel runs a full memory barrier on every CPU running one of our threads, so either the
//! owner's `busy` store is visible to the thief's load, or the owner's `steal` load comes after
//! the barrier and sees the thief's store. This is the asymmetric-fence idea of user-space RCU
//! (Desnoyers et al., "User-Level Implementations of Read-Copy Update", IEEE TPDS 2012) and of
//! the kernel's own `membarrier` documentation. Thieves are rare (a flush after a failed
//! search, `stats`, `work`, `memory_bytes`).
//!
//! Where the barrier is not available (the `membarrier` feature off, another OS, a kernel or
//! sandbox refusing the registration, or [`FenceMode::Symmetric`] asked for), both sides use an
//! ordinary `SeqCst` fence from the start, which is correct everywhere and costs the owner one
//! fence, as much as a lock.
//!
//! A barrier call can also fail after registration succeeded (a seccomp filter installed later
//! by the embedding program, say). The domain then falls back for good: the thief switches the
//! mode to *degraded*, in which owners use the `SeqCst` fence too, and each owner records, once,
//! that it has entered under the new mode (`acked`). An owner that has not may still be inside
//! under the compiler fence alone, with its `busy` store unseen; so until it enters again, a
//! thief leaves its cache alone (a flush or report then misses that cache's ranges, which stay
//! cached and safe). Nothing aborts.
//!
//! The allocator's quick paths enter with [`Owned::try_enter`], which declines, changing
//! nothing, when the fences have degraded or a thief is in; the caller then goes the full way
//! (`enter`, which waits for the thief and acks a degraded domain).
//!
//! # Model checking
//!
//! Under `RUSTFLAGS="--cfg loom"` the flags, fences and the value's cell come from `loom` (module
//! `sync`), and the models in this file's `loom_model` module explore the interleavings of an
//! owner and thieves (`scripts/test.sh` runs them). The asymmetric mode cannot be modelled: the
//! kernel's barrier is outside loom, so under loom `Fences::new` never registers it and a domain
//! is symmetric. The models check the symmetric fences and the degraded path: a domain that starts
//! asymmetric with every barrier refused, whose owners' compiler fence orders nothing for loom
//! either, so the thief must leave an owner alone until it has acked. Two more repeat the first
//! and the degraded one with the quick entry; the first of them fails when `try_enter` skips its
//! `steal` load.

use std::ops::{Deref, DerefMut};

use super::spin::SpinLock;
use super::sync::{
    compiler_fence, fence, spin_loop, yield_now, Access, AtomicBool, AtomicU8, GuardedCell,
    Ordering,
};
use super::tuning::FenceMode;

/// Owner: compiler fence; thief: `membarrier(2)`.
const ASYMMETRIC: u8 = 0;
/// Both: `fence(SeqCst)`, from the domain's creation.
const SYMMETRIC: u8 = 1;
/// Both: `fence(SeqCst)`, since a barrier call failed: owners that have not entered since may
/// still rely on the barrier, and are left alone.
const DEGRADED: u8 = 2;

/// How one domain's owners and thieves order their flag store before their flag load.
#[derive(Debug)]
pub(crate) struct Fences {
    mode: AtomicU8,
    /// Tests make the next barrier calls fail, as a seccomp filter would.
    #[cfg(test)]
    refuse_barrier: AtomicBool,
}

/// Which owners a thief may take after its barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Every owner.
    All,
    /// Only owners that have entered since the domain degraded.
    Acked,
}

impl Fences {
    /// The fences for `mode`: asymmetric when asked for by [`FenceMode::Auto`] and the process
    /// is registered for the barrier (registering it on first use), else symmetric. Under loom
    /// always symmetric: the barrier is not modelled, and never registered.
    pub fn new(mode: FenceMode) -> Self {
        let asymmetric = mode == FenceMode::Auto && membarrier::registered();
        Self {
            mode: AtomicU8::new(if asymmetric { ASYMMETRIC } else { SYMMETRIC }),
            #[cfg(test)]
            refuse_barrier: AtomicBool::new(false),
        }
    }

    /// Whether the owner's side is the compiler fence alone (for tests and reports).
    #[cfg(test)]
    pub fn is_asymmetric(&self) -> bool {
        self.mode.load(Ordering::Relaxed) == ASYMMETRIC
    }

    /// The owner's fence between its `busy` store and its `steal` load.
    #[inline(always)]
    fn light(&self, acked: &AtomicBool) {
        match self.mode.load(Ordering::Relaxed) {
            ASYMMETRIC => compiler_fence(Ordering::SeqCst),
            mode => {
                fence(Ordering::SeqCst);
                if mode == DEGRADED {
                    ack(acked);
                }
            }
        }
    }

    /// The owner's fence for [`Owned::try_enter`]: as [`Self::light`] while the fences have not
    /// degraded; false (no fence) once they have, when the owner must take the full way.
    #[inline(always)]
    fn light_unless_degraded(&self) -> bool {
        // The asymmetric mode first: one compare on the common entry, the others laid out
        // aside (written as one chain of compares, the compiler tested the symmetric mode
        // first).
        let mode = self.mode.load(Ordering::Relaxed);
        if mode == ASYMMETRIC {
            compiler_fence(Ordering::SeqCst);
            return true;
        }
        Self::symmetric_unless_degraded(mode)
    }

    /// [`Self::light_unless_degraded`] in the other modes.
    #[cold]
    #[inline(always)]
    fn symmetric_unless_degraded(mode: u8) -> bool {
        if mode == SYMMETRIC {
            fence(Ordering::SeqCst);
            return true;
        }
        false
    }

    /// The thief's fence between its `steal` stores and its `busy` loads.
    fn heavy(&self) -> Reach {
        match self.mode.load(Ordering::Relaxed) {
            ASYMMETRIC if self.barrier() => Reach::All,
            ASYMMETRIC => {
                // A refused barrier leaves owners unordered: fall back for good.
                self.mode.store(DEGRADED, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                Reach::Acked
            }
            SYMMETRIC => {
                fence(Ordering::SeqCst);
                Reach::All
            }
            _ => {
                fence(Ordering::SeqCst);
                Reach::Acked
            }
        }
    }

    fn barrier(&self) -> bool {
        #[cfg(test)]
        if self.refuse_barrier.load(Ordering::Relaxed) {
            return false;
        }
        membarrier::barrier()
    }

    /// Make every later barrier call fail.
    #[cfg(test)]
    pub fn refuse_barriers(&self) {
        self.refuse_barrier.store(true, Ordering::Relaxed);
    }
}

/// Record that an owner entered under degraded fences (once; out of line, so the owner's
/// inlined entry stays short).
#[cold]
#[inline(never)]
fn ack(acked: &AtomicBool) {
    if !acked.load(Ordering::Relaxed) {
        // Release: the mode load that returned DEGRADED comes before, and every later one of
        // this owner returns it too (one location's loads never go back), so a thief that sees
        // the flag sees a symmetric owner.
        acked.store(true, Ordering::Release);
    }
}

// Under loom, the stub below: the kernel's barrier is outside the model.
#[cfg(all(feature = "membarrier", target_os = "linux", not(loom)))]
mod membarrier {
    use std::sync::OnceLock;

    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn call(cmd: libc::c_long) -> bool {
        // SAFETY: membarrier(cmd, flags = 0, cpu_id = 0) reads and writes no user memory.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        r == 0
    }

    /// Whether this process is registered for private expedited barriers (registering it, and
    /// trying one barrier, on the first call); false if the kernel refuses.
    pub fn registered() -> bool {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        *REGISTERED
            .get_or_init(|| call(CMD_REGISTER_PRIVATE_EXPEDITED) && call(CMD_PRIVATE_EXPEDITED))
    }

    /// A full memory barrier on every CPU running a thread of this process; false if the
    /// kernel refused it.
    pub fn barrier() -> bool {
        call(CMD_PRIVATE_EXPEDITED)
    }
}

#[cfg(not(all(feature = "membarrier", target_os = "linux", not(loom))))]
mod membarrier {
    /// No barrier here: domains use symmetric fences.
    pub fn registered() -> bool {
        false
    }

    /// Never called while `registered` is false.
    pub fn barrier() -> bool {
        false
    }
}

/// A value its owner enters cheaply and any thread can steal; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Owned<T> {
    /// The owner is inside (raised and lowered by the owner only).
    busy: AtomicBool,
    /// A thief is inside or about to be (raised and lowered by the thief holding `thieves`).
    steal: AtomicBool,
    /// The owner has entered since the domain's fences degraded (see the module
    /// documentation); raised once, by the owner.
    acked: AtomicBool,
    /// One thief at a time.
    thieves: SpinLock<()>,
    value: GuardedCell<T>,
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
    pub unsafe fn enter(&self, fences: &Fences) -> OwnerGuard<'_, T> {
        debug_assert!(!self.busy.load(Ordering::Relaxed), "owner entered twice");
        self.busy.store(true, Ordering::Relaxed);
        fences.light(&self.acked);
        // Acquire: a thief's writes to the value come before its release of `steal`.
        if !self.steal.load(Ordering::Acquire) {
            return OwnerGuard::new(self);
        }
        self.enter_stolen(fences)
    }

    /// Enter as the owner if that is quick: the fences have not degraded and no thief is in.
    /// `None` leaves everything as it was, and the caller goes the full way ([`Self::enter`]).
    ///
    /// # Safety
    ///
    /// As for [`Self::enter`].
    #[inline(always)]
    pub unsafe fn try_enter(&self, fences: &Fences) -> Option<OwnerGuard<'_, T>> {
        debug_assert!(!self.busy.load(Ordering::Relaxed), "owner entered twice");
        self.busy.store(true, Ordering::Relaxed);
        // Acquire: as in `enter`.
        if !fences.light_unless_degraded() || self.steal.load(Ordering::Acquire) {
            self.busy.store(false, Ordering::Release);
            return None;
        }
        Some(OwnerGuard::new(self))
    }

    /// The rest of `enter` when a thief holds the value: step back, wait, and try again.
    /// Kept out of line, so the uncontended entry inlined into every cached call stays short.
    #[cold]
    #[inline(never)]
    fn enter_stolen(&self, fences: &Fences) -> OwnerGuard<'_, T> {
        loop {
            self.busy.store(false, Ordering::Release);
            let mut spins = 0u32;
            while self.steal.load(Ordering::Relaxed) {
                backoff(&mut spins);
            }
            self.busy.store(true, Ordering::Relaxed);
            fences.light(&self.acked);
            if !self.steal.load(Ordering::Acquire) {
                return OwnerGuard::new(self);
            }
        }
    }

    /// Take the value from whichever thread owns it (slow: a process-wide barrier); `None` if
    /// the domain's fences degraded and the owner has not entered since.
    #[cfg(test)]
    pub fn steal(&self, fences: &Fences) -> Option<StealGuard<'_, T>> {
        Self::steal_all(std::iter::once(self), fences).pop()
    }

    /// Take every value, in order, with one barrier for all (none when there is nothing to
    /// take). Thieves take values in a fixed order (callers pass them in the same order), so
    /// they never wait on each other in a cycle. After the fences degraded, values whose owner
    /// has not entered since are left out.
    pub fn steal_all<'a>(
        all: impl Iterator<Item = &'a Self>,
        fences: &Fences,
    ) -> Vec<StealGuard<'a, T>>
    where
        T: 'a,
    {
        let mut guards: Vec<StealGuard<'a, T>> = all
            .map(|o| {
                let thieves = o.thieves.lock();
                o.steal.store(true, Ordering::Relaxed);
                StealGuard {
                    owned: o,
                    access: Access::idle(),
                    _thieves: thieves,
                }
            })
            .collect();
        if guards.is_empty() {
            return guards;
        }
        if fences.heavy() == Reach::Acked {
            // Acquire: see `Fences::light`.
            guards.retain(|g| g.owned.acked.load(Ordering::Acquire));
        }
        for g in &mut guards {
            let mut spins = 0u32;
            // Acquire: the owner's writes come before its release of `busy`.
            while g.owned.busy.load(Ordering::Acquire) {
                backoff(&mut spins);
            }
            g.access = g.owned.value.begin();
        }
        guards
    }
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        spin_loop();
    } else {
        yield_now();
    }
}

/// The owner's exclusive access, until dropped.
pub(crate) struct OwnerGuard<'a, T> {
    owned: &'a Owned<T>,
    access: Access<T>,
}

impl<'a, T> OwnerGuard<'a, T> {
    #[inline(always)]
    fn new(owned: &'a Owned<T>) -> Self {
        Self {
            owned,
            access: owned.value.begin(),
        }
    }
}

impl<T> Deref for OwnerGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the owner is inside and no thief is (the flag protocol): no other reference.
        unsafe { self.owned.value.get(&self.access) }
    }
}

impl<T> DerefMut for OwnerGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { self.owned.value.get_mut(&mut self.access) }
    }
}

impl<T> Drop for OwnerGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.access.end();
        self.owned.busy.store(false, Ordering::Release);
    }
}

/// A thief's exclusive access, until dropped.
pub(crate) struct StealGuard<'a, T> {
    owned: &'a Owned<T>,
    /// Begun once the owner is out (idle while `steal_all` waits for it).
    access: Access<T>,
    _thieves: super::spin::SpinGuard<'a, ()>,
}

impl<T> Deref for StealGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the owner is outside and will stay out while `steal` is raised; other thieves
        // wait on `thieves`.
        unsafe { self.owned.value.get(&self.access) }
    }
}

impl<T> DerefMut for StealGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { self.owned.value.get_mut(&mut self.access) }
    }
}

impl<T> Drop for StealGuard<'_, T> {
    fn drop(&mut self) {
        self.access.end();
        self.owned.steal.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owner and thieves each add to a counter they only read and write through their
    /// guards, with plain (non-atomic) arithmetic: a lost update means the exclusion failed.
    /// With `refuse_after`, the barrier fails from that many steals on.
    fn counts_exactly(fences: &Fences, refuse_after: Option<u64>) {
        let o = Owned::<u64>::default();
        let per = 200_000u64;
        let stolen = std::sync::atomic::AtomicU64::new(0);
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
                    for i in 0..per / 100 {
                        if refuse_after == Some(i) {
                            fences.refuse_barriers();
                        }
                        if let Some(mut g) = o.steal(fences) {
                            *g += 1;
                            stolen.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let total = per + stolen.load(Ordering::Relaxed);
        // The owner has exited: this thread takes its place, and its entry counts as entering
        // since any fallback.
        // SAFETY: the owner's thread was joined; no other thread enters.
        drop(unsafe { o.enter(fences) });
        let g = o
            .steal(fences)
            .expect("the owner entered since any fallback");
        assert_eq!(*g, total);
    }

    #[test]
    fn without_the_feature_fences_are_symmetric_from_the_start() {
        let auto = Fences::new(FenceMode::Auto);
        assert!(!Fences::new(FenceMode::Symmetric).is_asymmetric());
        if !cfg!(all(feature = "membarrier", target_os = "linux")) {
            assert!(!auto.is_asymmetric());
        }
    }

    #[test]
    fn owner_and_thieves_exclude_each_other() {
        counts_exactly(&Fences::new(FenceMode::Auto), None);
        counts_exactly(&Fences::new(FenceMode::Symmetric), None);
    }

    #[test]
    fn a_refused_barrier_falls_back_to_symmetric_fences() {
        let fences = Fences::new(FenceMode::Auto);
        let asymmetric = fences.is_asymmetric();
        counts_exactly(&fences, Some(500));
        if asymmetric {
            assert_eq!(fences.mode.load(Ordering::Relaxed), DEGRADED);
        }
        // An owner that never entered since the fallback is left alone.
        let fences = Fences::new(FenceMode::Auto);
        fences.refuse_barriers();
        let asymmetric = fences.is_asymmetric();
        let o = Owned::<u64>::default();
        assert_eq!(o.steal(&fences).is_some(), !asymmetric);
        // SAFETY: this thread is the only one that enters.
        drop(unsafe { o.enter(&fences) });
        assert!(o.steal(&fences).is_some());
    }
}

/// Model checks of the owner/thief protocol: the interleavings of an owner and thieves, each
/// adding to the value with plain arithmetic through its guard. loom's causality checker sees
/// each guard's access to the value from its start to its end (module `sync`) and fails the
/// model on any two not ordered by happens-before; the final total checks that no update was
/// lost.
///
/// Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p
/// dmalab-iova --lib loom_model` (as `scripts/test.sh` does; about 15 s once built).
///
/// The two-thread models are exhaustive (no preemption bound). With three threads, two of them
/// spinning while they wait for the third (the owner and a thief both waiting on the other
/// thief), loom can hand the processor back and forth between the two spinners at no cost to
/// its preemption bound, so a path never ends: `two_thieves_and_an_owner` is bounded to one
/// preemption, and the race between thieves is checked exhaustively without a concurrent owner
/// (`two_thieves`). `LOOM_MAX_PREEMPTIONS` overrides every bound.
///
/// What is not modelled: the asymmetric mode (a compiler fence for the owner, `membarrier(2)`
/// for the thief), as the kernel's barrier is outside loom. The models cover the symmetric fences
/// (`fence(SeqCst)` on both sides) and the degraded path (a domain that starts asymmetric with
/// every barrier refused: an owner still under the compiler fence, which orders nothing for
/// loom, must be left alone).
///
/// The models catch a weakened protocol. Each of these changes, made by hand (and restored
/// after), makes loom fail `owner_and_thief`, `owner_and_thief_over_two_values`,
/// `two_thieves_and_an_owner` and the degraded model with "Causality violation: Concurrent write
/// accesses to `UnsafeCell`." (`LOOM_LOCATION=1` adds the two accesses' lines):
///
/// * the owner's `fence(Ordering::SeqCst)` in `Fences::light` (the `mode => {` arm) removed:
///   the owner and the thief both inside, each having missed the other's flag (store
///   buffering);
/// * the owner's `self.steal.load(Ordering::Acquire)` in `enter` made `Relaxed`: the owner
///   inside after a thief's release of `steal` without seeing the thief's writes;
/// * the `busy.store(false, Ordering::Release)` in `OwnerGuard::drop` made `Relaxed`: a thief
///   inside after the owner's release of `busy` without seeing the owner's writes.
///
/// And with the `guards.retain(..)` in `steal_all` removed, the degraded model fails the same
/// way: the thief takes the value of an owner inside under the compiler fence alone.
#[cfg(all(test, loom))]
mod loom_model {
    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    /// Check `f` under every interleaving, with at most `preemptions` preemptions (`None`: all)
    /// unless `LOOM_MAX_PREEMPTIONS` says otherwise.
    fn check(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = preemptions;
        }
        builder.check(f);
    }

    type Values = Arc<Vec<Owned<u64>>>;

    fn values(n: usize) -> Values {
        Arc::new((0..n).map(|_| Owned::default()).collect())
    }

    /// How an owner enters in a model.
    type Enter = for<'a> fn(&'a Owned<u64>, &Fences) -> OwnerGuard<'a, u64>;

    /// The plain entry.
    fn enter<'a>(o: &'a Owned<u64>, fences: &Fences) -> OwnerGuard<'a, u64> {
        // SAFETY: the model's owner thread is the only one that enters until joined.
        unsafe { o.enter(fences) }
    }

    /// The entry of the allocator's quick paths: `try_enter`, and `enter` when that declines.
    fn enter_quick<'a>(o: &'a Owned<u64>, fences: &Fences) -> OwnerGuard<'a, u64> {
        // SAFETY: as in `enter`.
        unsafe { o.try_enter(fences) }.unwrap_or_else(|| enter(o, fences))
    }

    /// Enter every value `times` times as its owner with `how`, adding one each time.
    fn own_with(how: Enter, all: &[Owned<u64>], fences: &Fences, times: u64) {
        for _ in 0..times {
            for o in all {
                *how(o, fences) += 1;
            }
        }
    }

    /// Enter every value `times` times as its owner, adding one each time.
    fn own(all: &[Owned<u64>], fences: &Fences, times: u64) {
        own_with(enter, all, fences, times);
    }

    /// Steal every value once, adding one to each taken; how many were taken.
    fn steal(all: &[Owned<u64>], fences: &Fences) -> u64 {
        let mut taken = 0;
        for mut g in Owned::steal_all(all.iter(), fences) {
            *g += 1;
            taken += 1;
        }
        taken
    }

    /// Run `f` on a new thread with its own handles on the values and the fences.
    fn spawn<R: 'static>(
        all: &Values,
        fences: &Arc<Fences>,
        f: impl FnOnce(&[Owned<u64>], &Fences) -> R + 'static,
    ) -> thread::JoinHandle<R> {
        let (all, fences) = (all.clone(), fences.clone());
        thread::spawn(move || f(&all, &fences))
    }

    /// Once no owner runs: the sum of the values, entering each first (so an owner that never
    /// acked does now, and a degraded thief may take it).
    fn total(all: &[Owned<u64>], fences: &Fences) -> u64 {
        all.iter()
            .map(|o| {
                // SAFETY: the owner's thread was joined; no other thread enters.
                drop(unsafe { o.enter(fences) });
                *o.steal(fences)
                    .expect("the owner entered since any fallback")
            })
            .sum()
    }

    /// An owner entering twice against a thief (symmetric fences: loom's `Fences::new`).
    #[test]
    fn owner_and_thief() {
        check(None, || {
            let fences = Arc::new(Fences::new(FenceMode::Auto));
            assert!(!fences.is_asymmetric());
            let all = values(1);
            let owner = spawn(&all, &fences, |all, fences| own(all, fences, 2));
            let taken = steal(&all, &fences);
            owner.join().unwrap();
            assert_eq!(taken, 1, "symmetric thieves take every value");
            assert_eq!(total(&all, &fences), 2 + taken);
        });
    }

    /// With symmetric fences, an owner entering each of `n` values `times` times with `how`
    /// against a thief stealing once: the thief takes every value, and no addition is lost.
    fn owner_and_thief_model(how: Enter, n: usize, times: u64) {
        check(None, move || {
            let fences = Arc::new(Fences::new(FenceMode::Symmetric));
            let all = values(n);
            let owner = spawn(&all, &fences, move |all, fences| {
                own_with(how, all, fences, times)
            });
            let taken = steal(&all, &fences);
            owner.join().unwrap();
            assert_eq!(taken, n as u64);
            assert_eq!(total(&all, &fences), n as u64 * times + taken);
        });
    }

    /// The quick entry (`try_enter`, falling back to `enter`) twice against a thief.
    #[test]
    fn quick_owner_and_thief() {
        owner_and_thief_model(enter_quick, 1, 2);
    }

    /// The degraded path with the quick entry: it declines once the fences degraded, so the
    /// owner acks through `enter` before a thief may take its value.
    #[test]
    fn a_refused_barrier_leaves_an_unacked_quick_owner_alone() {
        refused_barrier_model(enter_quick, 1);
    }

    /// An owner entering two values, a thief taking both under one fence.
    #[test]
    fn owner_and_thief_over_two_values() {
        owner_and_thief_model(enter, 2, 1);
    }

    /// Two thieves race for two values (the `thieves` locks, taken in the same order).
    #[test]
    fn two_thieves() {
        check(None, || {
            let fences = Arc::new(Fences::new(FenceMode::Symmetric));
            let all = values(2);
            own(&all, &fences, 1);
            let thief = spawn(&all, &fences, steal);
            let taken = steal(&all, &fences) + thief.join().unwrap();
            assert_eq!(taken, 4);
            assert_eq!(total(&all, &fences), 2 + taken);
        });
    }

    /// Two thieves race while the owner enters (one preemption: see the module documentation).
    #[test]
    fn two_thieves_and_an_owner() {
        check(Some(1), || {
            let fences = Arc::new(Fences::new(FenceMode::Symmetric));
            let all = values(1);
            let owner = spawn(&all, &fences, |all, fences| own(all, fences, 1));
            let thief = spawn(&all, &fences, steal);
            let taken = steal(&all, &fences) + thief.join().unwrap();
            owner.join().unwrap();
            assert_eq!(taken, 2);
            assert_eq!(total(&all, &fences), 1 + taken);
        });
    }

    /// The degraded path: the domain starts asymmetric and every barrier is refused. The owner
    /// may enter under the compiler fence alone, which loom (like the hardware) does not order,
    /// so the thief must take the value only from an owner that has acked.
    #[test]
    fn a_refused_barrier_leaves_an_unacked_owner_alone() {
        refused_barrier_model(enter, 2);
    }

    /// A domain that starts asymmetric with every barrier refused: an owner entering `times`
    /// times with `how` against a thief stealing twice. The thief may take the value only from an
    /// owner that has acked.
    fn refused_barrier_model(how: Enter, times: u64) {
        check(None, move || {
            let fences = Arc::new(Fences {
                mode: AtomicU8::new(ASYMMETRIC),
                refuse_barrier: AtomicBool::new(true),
            });
            let all = values(1);
            let owner = spawn(&all, &fences, move |all, fences| {
                own_with(how, all, fences, times)
            });
            let taken = steal(&all, &fences) + steal(&all, &fences);
            owner.join().unwrap();
            assert_eq!(fences.mode.load(Ordering::Relaxed), DEGRADED);
            if taken > 0 {
                assert!(
                    all[0].acked.load(Ordering::Relaxed),
                    "took an unacked owner's value"
                );
            }
            assert_eq!(total(&all, &fences), times + taken);
        });
    }
}
