//! Thread-safe IOVA allocators for IOMMU domains, with counted work for modelling.
//!
#![doc = include_str!("../README.md")]

pub mod bitmap;
mod bits;
pub mod error;
pub mod magazines;
mod placement;
pub mod rbtree;
#[cfg(feature = "testing")]
pub mod reference;
pub mod segtree;
mod shard;
pub mod types;

use std::sync::{Mutex, MutexGuard};

pub use bitmap::BitmapAllocator;
pub use error::IovaError;
pub use magazines::MagazineAllocator;
pub use rbtree::RbTreeAllocator;
pub use segtree::{SegTreeAllocator, ZoneReport};
pub use types::{AllocRequest, DomainConfig, DomainStats, IovaRange, Pfn, WorkCounters, MAX_PFN};

/// An IOVA allocator for one domain, safe to share between threads.
///
/// Implementations must never hand out overlapping ranges, reserved frames, or frames outside
/// the request's constraints, and must accept each free of a live allocation exactly once.
pub trait IovaAllocator: Send + Sync + std::fmt::Debug {
    /// The design's name as used in benchmark records (`"bitmap"`, `"magazines+rbtree"`, ...).
    fn name(&self) -> String;
    /// The domain this allocator manages.
    fn config(&self) -> &DomainConfig;
    /// Allocate a range satisfying `req`.
    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError>;
    /// Free the live allocation of `pages` pages starting at `pfn`.
    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError>;
    /// Reserve `[pfn_lo, pfn_hi]` for good: it is never handed out. May overlap earlier
    /// reservations, not allocations.
    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError>;
    /// Occupancy now. Walks the structure: meant for reports, not hot paths.
    fn stats(&self) -> DomainStats;
    /// Work counted since creation.
    fn work(&self) -> WorkCounters;
    /// Heap bytes the allocator holds (structures and caches).
    fn memory_bytes(&self) -> usize;
    /// Return every cached range to the backing structure.
    fn flush_caches(&self) {}
    /// Whether, used from one thread, the design finds space whenever some exists.
    fn exact_fit(&self) -> bool;
    /// Whether [`Self::allocate_counted`] and [`Self::free_counted`] know their common path's
    /// work without reading the counters. A caller that charges every call's work (a
    /// simulator) uses them then, and otherwise reads [`Self::work`] once a charge.
    fn counts_each_call(&self) -> bool {
        false
    }
    /// [`Self::allocate`], adding the work this call counted to `work`: for a caller that
    /// charges each call's work (a simulator), in place of a [`Self::work`] snapshot before
    /// and after. The default takes those two snapshots; a design that knows its common path's
    /// work overrides it (and [`Self::counts_each_call`]). Exact when no other thread uses the
    /// domain during the call.
    fn allocate_counted(
        &self,
        req: &AllocRequest,
        work: &mut WorkCounters,
    ) -> Result<IovaRange, IovaError> {
        counted_between_snapshots(self, work, || self.allocate(req))
    }
    /// [`Self::free`], adding the work this call counted to `work`, as
    /// [`Self::allocate_counted`].
    fn free_counted(&self, pfn: Pfn, pages: u64, work: &mut WorkCounters) -> Result<(), IovaError> {
        counted_between_snapshots(self, work, || self.free(pfn, pages))
    }
    /// [`Self::free_counted`] by a caller that holds the allocator alone (`&mut`: no other
    /// thread can reach it during the call, as for a simulator's own domain). The result and
    /// the counted work are those of [`Self::free_counted`]; a design may skip the atomic
    /// read-modify-writes that only other threads make necessary. By default it is
    /// [`Self::free_counted`].
    fn free_counted_exclusive(
        &mut self,
        pfn: Pfn,
        pages: u64,
        work: &mut WorkCounters,
    ) -> Result<(), IovaError> {
        self.free_counted(pfn, pages, work)
    }
}

/// Run `call` on `a`, adding the work counted between a [`IovaAllocator::work`] snapshot
/// before and one after to `work` (exact when no other thread uses `a` meanwhile): how the
/// counted calls count by default, and how a caller counts the calls that have no counted
/// form (a reservation, a flush).
pub fn counted_between_snapshots<A: IovaAllocator + ?Sized, T>(
    a: &A,
    work: &mut WorkCounters,
    call: impl FnOnce() -> T,
) -> T {
    let before = a.work();
    let r = call();
    work.add(&a.work().since(&before));
    r
}

/// Which design to build.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AllocatorKind {
    /// [`BitmapAllocator`].
    Bitmap,
    /// [`RbTreeAllocator`].
    RbTree,
    /// [`MagazineAllocator`] in front of the named backend.
    Magazines(Box<AllocatorKind>),
    /// [`SegTreeAllocator`], the library's default.
    #[default]
    SegTree,
}

impl AllocatorKind {
    /// Every name [`AllocatorKind::parse`] accepts.
    pub const NAMES: [&'static str; 5] = [
        "bitmap",
        "rbtree",
        "magazines+rbtree",
        "magazines+bitmap",
        "segtree",
    ];

    /// Parse a name such as `"magazines+rbtree"`.
    pub fn parse(name: &str) -> Result<Self, IovaError> {
        let unknown = || IovaError::UnknownAllocator {
            name: name.to_string(),
            valid: Self::NAMES.join(", "),
        };
        match name {
            "bitmap" => Ok(Self::Bitmap),
            "rbtree" => Ok(Self::RbTree),
            "segtree" => Ok(Self::SegTree),
            _ => match name.strip_prefix("magazines+") {
                Some(inner @ ("bitmap" | "rbtree")) => {
                    Ok(Self::Magazines(Box::new(Self::parse(inner)?)))
                }
                _ => Err(unknown()),
            },
        }
    }

    /// The name [`AllocatorKind::parse`] reads back.
    pub fn name(&self) -> String {
        match self {
            Self::Bitmap => "bitmap".into(),
            Self::RbTree => "rbtree".into(),
            Self::SegTree => "segtree".into(),
            Self::Magazines(inner) => format!("magazines+{}", inner.name()),
        }
    }
}

/// Build an allocator of the given design for a domain.
pub fn new_allocator(
    kind: AllocatorKind,
    cfg: DomainConfig,
) -> Result<Box<dyn IovaAllocator>, IovaError> {
    Ok(match kind {
        AllocatorKind::Bitmap => Box::new(BitmapAllocator::new(cfg)?),
        AllocatorKind::RbTree => Box::new(RbTreeAllocator::new(cfg)?),
        AllocatorKind::SegTree => Box::new(SegTreeAllocator::new(cfg)?),
        AllocatorKind::Magazines(inner) => {
            Box::new(MagazineAllocator::new(new_allocator(*inner, cfg)?))
        }
    })
}

/// Take a lock, recovering the data if a thread panicked while holding it: every critical
/// section in this crate leaves its structure consistent before any call that could panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
