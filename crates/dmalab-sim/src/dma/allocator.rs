//! The IOVA allocator of one device's domain, built over its window with the reserved ranges
//! taken out: the library's default design held as its own type, any other behind the trait.

use crate::error::{invalid_arg, iova, Result};
use crate::iommu::Translation;
use dmalab_iova::{
    new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator, IovaError, IovaRange,
    Pfn, SegTreeAllocator, WorkCounters,
};

/// A domain's IOVA allocator. The library's default design is held as its own type, so that
/// the mapper's allocations and frees call it directly and the compiler can inline its quick
/// path (a call through the trait object cannot be); any other design sits behind the trait.
pub(super) enum DomainAllocator {
    /// [`SegTreeAllocator`].
    SegTree(Box<SegTreeAllocator>),
    /// Any other design.
    Other(Box<dyn IovaAllocator>),
}

impl DomainAllocator {
    /// The allocator, for the calls off the per-I/O path.
    pub(super) fn get(&self) -> &dyn IovaAllocator {
        match self {
            DomainAllocator::SegTree(a) => a.as_ref(),
            DomainAllocator::Other(a) => a.as_ref(),
        }
    }

    /// [`IovaAllocator::allocate_counted`].
    #[inline(always)]
    pub(super) fn allocate_counted(
        &self,
        req: &AllocRequest,
        work: &mut WorkCounters,
    ) -> std::result::Result<IovaRange, IovaError> {
        match self {
            DomainAllocator::SegTree(a) => a.allocate_counted(req, work),
            DomainAllocator::Other(a) => a.allocate_counted(req, work),
        }
    }

    /// [`IovaAllocator::free_counted_exclusive`].
    #[inline(always)]
    pub(super) fn free_counted_exclusive(
        &mut self,
        pfn: Pfn,
        pages: u64,
        work: &mut WorkCounters,
    ) -> std::result::Result<(), IovaError> {
        match self {
            DomainAllocator::SegTree(a) => a.free_counted_exclusive(pfn, pages, work),
            DomainAllocator::Other(a) => a.free_counted_exclusive(pfn, pages, work),
        }
    }
}

/// The allocator of design `kind` for a domain in `translation` over an IOVA window of
/// `window_bytes` in pages of `page` bytes (page 0 never handed out), with the `reserved` byte
/// ranges (inclusive) taken; none for the untranslated modes.
pub(super) fn domain_allocator(
    translation: Translation,
    kind: &AllocatorKind,
    window_bytes: u64,
    reserved: &[(u64, u64)],
    page: u64,
) -> Result<Option<DomainAllocator>> {
    let (Translation::PageTable | Translation::Tce) = translation else {
        return Ok(None);
    };
    let pages = window_bytes / page.max(1);
    if pages < 2 {
        return Err(invalid_arg(
            "window_bytes",
            window_bytes,
            "at least two pages",
        ));
    }
    let domain = DomainConfig::new(Pfn(1), Pfn(pages - 1), page)
        .map_err(iova(|| format!("IOVA domain of {window_bytes} bytes")))?;
    let built = match kind {
        AllocatorKind::SegTree => {
            SegTreeAllocator::new(domain).map(|a| DomainAllocator::SegTree(Box::new(a)))
        }
        kind => new_allocator(kind.clone(), domain).map(DomainAllocator::Other),
    };
    let alloc = built.map_err(iova(|| format!("allocator {}", kind.name())))?;
    for &(start, end) in reserved {
        let lo = (start / page).max(1);
        let hi = (end / page).min(pages - 1);
        if lo <= hi {
            alloc
                .get()
                .reserve(Pfn(lo), Pfn(hi))
                .map_err(|e| invalid_arg("reserved", format!("{start:#x}-{end:#x}"), e))?;
        }
    }
    Ok(Some(alloc))
}
