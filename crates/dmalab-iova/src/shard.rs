//! Which per-CPU cache a thread uses: a slot fixed per thread, so that a thread always finds its
//! own cache (no migration, unlike the kernel's per-CPU data) and runs are repeatable.

use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// Slot numbers are masked to this (so none reaches the thread-local words' markers).
const SLOT_MASK: usize = usize::MAX >> 1;

/// The two thread-local words behind [`thread_slot`] and [`owned_slot`], both zero in a new
/// thread.
///
/// They sit on the hot path of every cached allocate and free. Rust's `thread_local!` compiles,
/// in a shared library such as the Python module, to the general-dynamic TLS model: a call to
/// `__tls_get_addr` on every access (`docs/design/segtree.md` has what that cost), and stable
/// Rust has no switch for the model. With the `fast-tls` feature, on x86-64 Linux with glibc,
/// the words are therefore defined and read here with the initial-exec model by hand: one load
/// of the word's offset from the GOT and one load relative to the thread pointer (the ELF TLS
/// ABI for x86-64; see Drepper, "ELF Handling For Thread-Local Storage", section 4.3.2). A
/// shared library using it takes 16 bytes of glibc's surplus static TLS when loaded (a
/// `dlopen` fails if none is left). Without the feature, or elsewhere, the words are ordinary
/// `thread_local!` cells.
mod fast_tls {
    /// Which word.
    #[derive(Clone, Copy)]
    pub(super) enum Word {
        /// [`super::owned_slot`] + 1, or `RELEASED`.
        Owned,
        /// [`super::thread_slot`] + 1.
        Slot,
    }

    #[cfg(all(
        feature = "fast-tls",
        target_arch = "x86_64",
        target_os = "linux",
        target_env = "gnu"
    ))]
    mod imp {
        use super::Word;
        use core::arch::{asm, global_asm};

        // Two zero-initialised words in the thread-local image, `Word::Owned` then
        // `Word::Slot`. Global but hidden: visible to every object file of the library or
        // program (inlined readers may land in another crate's code), never exported from it,
        // so two libraries never share them.
        global_asm!(
            ".pushsection .tbss,\"awT\",@nobits",
            ".p2align 3",
            ".globl dmalab_iova_tls_v1",
            ".hidden dmalab_iova_tls_v1",
            ".type dmalab_iova_tls_v1,@object",
            ".size dmalab_iova_tls_v1,16",
            "dmalab_iova_tls_v1:",
            ".zero 16",
            ".popsection",
        );

        /// The word at byte offset `OFF` of the pair.
        #[inline(always)]
        fn load_at<const OFF: usize>() -> usize {
            let v: usize;
            // SAFETY: reads this thread's own word at its thread-pointer offset; the words are
            // 8-byte aligned and live as long as the thread.
            unsafe {
                asm!(
                    "mov {v}, qword ptr [rip + dmalab_iova_tls_v1@GOTTPOFF]",
                    "mov {v}, qword ptr fs:[{v} + {off}]",
                    v = out(reg) v,
                    off = const OFF,
                    options(nostack, readonly, preserves_flags, pure),
                );
            }
            v
        }

        #[inline(always)]
        fn store_at<const OFF: usize>(x: usize) {
            // SAFETY: writes this thread's own word (see `load_at`); no other thread addresses
            // it.
            unsafe {
                asm!(
                    "mov {t}, qword ptr [rip + dmalab_iova_tls_v1@GOTTPOFF]",
                    "mov qword ptr fs:[{t} + {off}], {x}",
                    t = out(reg) _,
                    x = in(reg) x,
                    off = const OFF,
                    options(nostack, preserves_flags),
                );
            }
        }

        #[inline(always)]
        pub(in super::super) fn load(w: Word) -> usize {
            match w {
                Word::Owned => load_at::<0>(),
                Word::Slot => load_at::<8>(),
            }
        }

        #[inline(always)]
        pub(in super::super) fn store(w: Word, x: usize) {
            match w {
                Word::Owned => store_at::<0>(x),
                Word::Slot => store_at::<8>(x),
            }
        }
    }

    #[cfg(not(all(
        feature = "fast-tls",
        target_arch = "x86_64",
        target_os = "linux",
        target_env = "gnu"
    )))]
    mod imp {
        use super::Word;
        use std::cell::Cell;

        thread_local! {
            static OWNED: Cell<usize> = const { Cell::new(0) };
            static SLOT: Cell<usize> = const { Cell::new(0) };
        }

        #[inline]
        pub(in super::super) fn load(w: Word) -> usize {
            match w {
                Word::Owned => OWNED.with(Cell::get),
                Word::Slot => SLOT.with(Cell::get),
            }
        }

        #[inline]
        pub(in super::super) fn store(w: Word, x: usize) {
            match w {
                Word::Owned => OWNED.with(|c| c.set(x)),
                Word::Slot => SLOT.with(|c| c.set(x)),
            }
        }
    }

    pub(super) use imp::{load, store};
}

/// This thread's slot, assigned on first use in thread-start order.
#[inline]
pub(crate) fn thread_slot() -> usize {
    match fast_tls::load(fast_tls::Word::Slot) {
        0 => {
            let v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) & SLOT_MASK;
            fast_tls::store(fast_tls::Word::Slot, v + 1);
            v
        }
        v => v - 1,
    }
}

/// The machine's hardware threads (4 if unknown).
pub(crate) fn hardware_threads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

/// How many caches a domain keeps: twice the hardware threads, so that threads created in a
/// burst rarely share one.
pub(crate) fn default_shards() -> usize {
    2 * hardware_threads()
}

/// Owned slots that threads gave back at exit, for the next threads to take (lowest first).
static FREE_OWNED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
static NEXT_OWNED: AtomicUsize = AtomicUsize::new(0);
/// This thread's owned slot was given back (the thread is exiting): it owns none any more.
/// (The thread-local word holds 0 before a slot is assigned, slot + 1 once it is.)
const RELEASED: usize = usize::MAX;

/// Gives the thread's owned slot back when the thread exits.
struct OwnedSlotGuard;

impl Drop for OwnedSlotGuard {
    fn drop(&mut self) {
        let v = fast_tls::load(fast_tls::Word::Owned);
        fast_tls::store(fast_tls::Word::Owned, RELEASED);
        if v != 0 && v != RELEASED {
            crate::lock(&FREE_OWNED).push(v - 1);
        }
    }
}

thread_local! {
    static OWNED_GUARD: OwnedSlotGuard = const { OwnedSlotGuard };
}

/// This thread's [`owned_slot`] once one is assigned, without assigning one: while none is (or
/// after it went back) a number past every domain's slots, so a bounds check turns it away.
#[inline(always)]
pub(crate) fn owned_slot_or_past() -> usize {
    fast_tls::load(fast_tls::Word::Owned).wrapping_sub(1)
}

/// A slot no other live thread holds, kept until this thread exits and then handed to a later
/// thread (the hand-over goes through a mutex, so everything the old owner did happens before
/// the new owner's first use). Low numbers are reused first, so the slots in use stay as few as
/// the threads alive. `None` while the thread is being torn down (after its slot went back).
#[inline]
pub(crate) fn owned_slot() -> Option<usize> {
    match fast_tls::load(fast_tls::Word::Owned) {
        RELEASED => None,
        0 => assign_owned_slot(),
        v => Some(v - 1),
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
            None => NEXT_OWNED.fetch_add(1, Ordering::Relaxed).min(RELEASED - 2),
        }
    };
    fast_tls::store(fast_tls::Word::Owned, v + 1);
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
