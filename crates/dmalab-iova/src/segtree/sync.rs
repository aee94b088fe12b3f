//! The primitives of the caches' cross-thread protocol (modules `owned` and `spin`): the standard
//! library's, or under `cfg(loom)` the `loom` crate's models of them, so that `loom` can check the
//! protocol exhaustively (`RUSTFLAGS="--cfg loom"`; the models are in `owned.rs` and `spin.rs`).
//!
//! Without `cfg(loom)` everything here is the standard item itself or a zero-cost wrapper
//! (`#[inline(always)]`, zero-sized [`Access`]), so the protocol compiles to the same code.
//!
//! [`GuardedCell`] stands for `UnsafeCell`: a guard starts an [`Access`] when it gains the value
//! and ends it before it gives the value back (before the releasing store), and reaches the
//! value only through it. Under loom the access is a `MutPtr`, so loom's causality checker sees
//! the whole span of each guard's access and reports any two that are not ordered by
//! happens-before.
//!
//! `compiler_fence` is the standard one in both builds: loom does not model it (it orders
//! nothing between threads), which is what the model must assume of an owner that relied on a
//! process-wide barrier the kernel refused.

pub(crate) use std::sync::atomic::{compiler_fence, Ordering};

#[cfg(not(loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicU8},
    thread::yield_now,
};

#[cfg(loom)]
pub(crate) use loom::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicU8},
    thread::yield_now,
};

pub(crate) use self::cell::{Access, GuardedCell};

#[cfg(not(loom))]
mod cell {
    use std::fmt;
    use std::marker::PhantomData;

    /// An `UnsafeCell` reached through an [`Access`] (see the module documentation).
    #[derive(Default)]
    pub(crate) struct GuardedCell<T>(std::cell::UnsafeCell<T>);

    /// A guard's access to a [`GuardedCell`]: nothing here, a tracked pointer under loom.
    pub(crate) struct Access<T>(PhantomData<fn() -> T>);

    impl<T> GuardedCell<T> {
        #[inline(always)]
        #[cfg(test)]
        pub fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// Start an exclusive access.
        #[inline(always)]
        pub fn begin(&self) -> Access<T> {
            Access(PhantomData)
        }

        /// # Safety
        ///
        /// `access` was begun on this cell, and its holder has exclusive access to the value.
        #[inline(always)]
        pub unsafe fn get<'a>(&'a self, _access: &'a Access<T>) -> &'a T {
            // SAFETY: exclusive access, by the caller's contract.
            unsafe { &*self.0.get() }
        }

        /// # Safety
        ///
        /// As for [`get`](Self::get).
        #[inline(always)]
        pub unsafe fn get_mut<'a>(&'a self, _access: &'a mut Access<T>) -> &'a mut T {
            // SAFETY: exclusive access, by the caller's contract.
            unsafe { &mut *self.0.get() }
        }
    }

    impl<T> fmt::Debug for GuardedCell<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.fmt(f)
        }
    }

    impl<T> Access<T> {
        /// An access not begun yet (a thief's, until the owner is out).
        #[inline(always)]
        pub fn idle() -> Self {
            Access(PhantomData)
        }

        /// End the access (before the store that hands the value on).
        #[inline(always)]
        pub fn end(&mut self) {}
    }
}

#[cfg(loom)]
mod cell {
    use std::fmt;

    use loom::cell::{MutPtr, UnsafeCell};

    /// loom's `UnsafeCell`, reached through an [`Access`] (see the module documentation).
    #[derive(Default)]
    pub(crate) struct GuardedCell<T>(UnsafeCell<T>);

    /// A guard's access: loom treats the cell as written to while the pointer lives.
    pub(crate) struct Access<T>(Option<MutPtr<T>>);

    impl<T> GuardedCell<T> {
        #[cfg(test)]
        pub fn new(value: T) -> Self {
            Self(UnsafeCell::new(value))
        }

        /// Start an exclusive access: loom checks that every earlier access happens-before.
        #[track_caller]
        pub fn begin(&self) -> Access<T> {
            Access(Some(self.0.get_mut()))
        }

        /// # Safety
        ///
        /// `access` was begun on this cell and not ended.
        pub unsafe fn get<'a>(&'a self, access: &'a Access<T>) -> &'a T {
            let ptr = access.0.as_ref().expect("access not begun");
            // SAFETY: a live `MutPtr` into this cell, by the caller's contract.
            unsafe { ptr.deref() }
        }

        /// # Safety
        ///
        /// As for [`get`](Self::get).
        pub unsafe fn get_mut<'a>(&'a self, access: &'a mut Access<T>) -> &'a mut T {
            let ptr = access.0.as_ref().expect("access not begun");
            // SAFETY: as for `get`.
            unsafe { ptr.deref() }
        }
    }

    impl<T> fmt::Debug for GuardedCell<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("GuardedCell { .. }")
        }
    }

    impl<T> Access<T> {
        pub fn idle() -> Self {
            Access(None)
        }

        /// End the access: loom records its end at this point, which must come before the
        /// releasing store for the next holder's access to be ordered after it.
        pub fn end(&mut self) {
            self.0 = None;
        }
    }
}
