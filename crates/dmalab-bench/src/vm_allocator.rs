//! The `vm-allocator` crate (rust-vmm's address allocator) behind dmalab's allocator trait, as an
//! outside baseline.
//!
//! Its `AddressAllocator` takes `&mut self`, so it sits behind one `Mutex`. What its API cannot
//! express is emulated and documented here: a limit (it has none) by allocating first-fit from the
//! bottom and refusing a result above the limit; a segment boundary is not supported (such a
//! request fails with `NoSpace`); a reservation is an exact-address allocation. Requests without
//! a limit use `LastMatch` (top-down, as IOVA allocators place ranges).

use std::sync::Mutex;

use dmalab_iova::{
    AllocRequest, DomainConfig, DomainStats, IovaAllocator, IovaError, IovaRange, Pfn, WorkCounters,
};
use vm_allocator::{AddressAllocator, AllocPolicy, RangeInclusive};

/// The name used in benchmark records.
pub const NAME: &str = "vm-allocator";

/// Heap bytes of one node of its interval tree (range, state, two child links, height), plus
/// the allocator's per-block header.
const NODE_BYTES: usize = 16 + 8 + 2 * 8 + 8 + 16;

#[derive(Debug)]
struct Inner {
    alloc: AddressAllocator,
    /// Live ranges and pages, for statistics and the node count.
    live: u64,
    live_pages: u64,
    work: WorkCounters,
}

/// `vm_allocator::AddressAllocator` as an `IovaAllocator`.
#[derive(Debug)]
pub struct VmAllocatorAdapter {
    cfg: DomainConfig,
    inner: Mutex<Inner>,
}

impl VmAllocatorAdapter {
    /// An allocator over the whole domain.
    pub fn new(cfg: DomainConfig) -> Result<Self, IovaError> {
        cfg.validate()?;
        let ps = cfg.page_size_bytes;
        let alloc =
            AddressAllocator::new(cfg.pfn_lo.0 * ps, cfg.total_pages() * ps).map_err(|_| {
                IovaError::DomainTooLarge {
                    pages: cfg.total_pages(),
                    max_pages: u64::MAX / ps,
                    allocator: NAME,
                }
            })?;
        Ok(Self {
            cfg,
            inner: Mutex::new(Inner {
                alloc,
                live: 0,
                live_pages: 0,
                work: WorkCounters::default(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl IovaAllocator for VmAllocatorAdapter {
    fn name(&self) -> String {
        NAME.into()
    }

    fn config(&self) -> &DomainConfig {
        &self.cfg
    }

    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let limit = req.validate(&self.cfg)?;
        let no_space = || IovaError::NoSpace {
            pages: req.pages,
            align_pages: req.align_pages,
            limit,
            boundary_pages: req.boundary_pages,
        };
        if req.boundary_pages.is_some() {
            return Err(no_space());
        }
        let ps = self.cfg.page_size_bytes;
        let policy = if limit < self.cfg.pfn_hi {
            AllocPolicy::FirstMatch
        } else {
            AllocPolicy::LastMatch
        };
        let mut g = self.lock();
        g.work.lock_acquisitions += 1;
        let r = g
            .alloc
            .allocate(req.pages * ps, req.align_pages * ps, policy)
            .map_err(|_| no_space())?;
        let pfn = r.start() / ps;
        if pfn + req.pages - 1 > limit.0 {
            let _ = g.alloc.free(&r);
            g.work.failures += 1;
            return Err(no_space());
        }
        g.live += 1;
        g.live_pages += req.pages;
        g.work.allocs += 1;
        Ok(IovaRange {
            pfn_lo: Pfn(pfn),
            pages: req.pages,
        })
    }

    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        if pages == 0 {
            return Err(IovaError::ZeroSize);
        }
        let ps = self.cfg.page_size_bytes;
        let mut g = self.lock();
        g.work.lock_acquisitions += 1;
        // Its own free checks the exact range; a wrong size is refused as not allocated.
        let key = RangeInclusive::new(pfn.0 * ps, (pfn.0 + pages) * ps - 1)
            .map_err(|_| IovaError::NotAllocated { pfn, pages })?;
        g.alloc
            .free(&key)
            .map_err(|_| IovaError::NotAllocated { pfn, pages })?;
        g.live -= 1;
        g.live_pages -= pages;
        g.work.frees += 1;
        Ok(())
    }

    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        let ps = self.cfg.page_size_bytes;
        let pages = pfn_hi.0.saturating_sub(pfn_lo.0) + 1;
        let mut g = self.lock();
        g.alloc
            .allocate(pages * ps, ps, AllocPolicy::ExactMatch(pfn_lo.0 * ps))
            .map(|_| ())
            .map_err(|_| IovaError::ReserveOverlapsAllocation {
                pfn_lo,
                pfn_hi,
                allocated_pfn: pfn_lo,
            })
    }

    fn stats(&self) -> DomainStats {
        let g = self.lock();
        DomainStats {
            live_allocations: g.live,
            allocated_pages: g.live_pages,
            free_pages: self.cfg.total_pages() - g.live_pages,
            ..DomainStats::default()
        }
    }

    fn work(&self) -> WorkCounters {
        self.lock().work
    }

    fn memory_bytes(&self) -> usize {
        // Its tree holds a node per allocated range and about one per free gap between them.
        2 * self.lock().live as usize * NODE_BYTES
    }

    fn exact_fit(&self) -> bool {
        false
    }
}
