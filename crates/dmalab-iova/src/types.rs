//! Page-frame newtypes, domain configuration, allocation requests and the counters every allocator reports.

use crate::error::IovaError;

/// An I/O page frame number: an IOVA divided by the domain's page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Pfn(pub u64);

impl Pfn {
    /// The frame's number as a plain integer.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for Pfn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A contiguous run of pages `[pfn_lo, pfn_lo + pages - 1]` handed out by an allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct IovaRange {
    /// First page of the range.
    pub pfn_lo: Pfn,
    /// Number of pages, at least 1.
    pub pages: u64,
}

impl IovaRange {
    /// Last page of the range (inclusive).
    #[inline]
    pub const fn pfn_hi(&self) -> Pfn {
        Pfn(self.pfn_lo.0 + self.pages - 1)
    }

    /// The I/O virtual address of the first byte, for a page size in bytes.
    #[inline]
    pub const fn iova(&self, page_size_bytes: u64) -> u64 {
        self.pfn_lo.0 * page_size_bytes
    }

    /// Whether two ranges share at least one page.
    #[inline]
    pub const fn overlaps(&self, other: &IovaRange) -> bool {
        self.pfn_lo.0 <= other.pfn_hi().0 && other.pfn_lo.0 <= self.pfn_hi().0
    }
}

/// Largest frame number a domain may use: 2^52 pages, so that `pfn + pages` never overflows and
/// a 64-bit address space of 4 KiB pages fits.
pub const MAX_PFN: u64 = (1 << 52) - 1;

/// The IOVA space of one IOMMU domain: page frames `[pfn_lo, pfn_hi]`, both inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DomainConfig {
    /// Lowest usable frame (Linux keeps frame 0 out of use so that IOVA 0 is never handed out).
    pub pfn_lo: Pfn,
    /// Highest usable frame, inclusive.
    pub pfn_hi: Pfn,
    /// Page size in bytes, a power of two of at least 512.
    pub page_size_bytes: u64,
}

impl DomainConfig {
    /// A domain of `[pfn_lo, pfn_hi]`, checked.
    pub fn new(pfn_lo: Pfn, pfn_hi: Pfn, page_size_bytes: u64) -> Result<Self, IovaError> {
        let cfg = Self {
            pfn_lo,
            pfn_hi,
            page_size_bytes,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// A domain covering IOVAs below `2^address_bits`, frame 0 excluded, as for a device whose
    /// DMA mask or IOMMU address width is `address_bits`.
    pub fn with_address_bits(address_bits: u32, page_size_bytes: u64) -> Result<Self, IovaError> {
        if !page_size_bytes.is_power_of_two() || page_size_bytes < 512 {
            return Err(IovaError::InvalidPageSize { page_size_bytes });
        }
        let page_shift = page_size_bytes.trailing_zeros();
        if !(page_shift + 1..=64).contains(&address_bits) {
            return Err(IovaError::InvalidAddressBits {
                address_bits,
                min: page_shift + 1,
                max: 64,
            });
        }
        let pages = 1u128 << (address_bits - page_shift);
        let hi = (pages - 1).min(MAX_PFN as u128) as u64;
        Self::new(Pfn(1), Pfn(hi), page_size_bytes)
    }

    /// Check the invariants: `pfn_lo <= pfn_hi <= MAX_PFN` and a power-of-two page size.
    pub fn validate(&self) -> Result<(), IovaError> {
        if !self.page_size_bytes.is_power_of_two() || self.page_size_bytes < 512 {
            return Err(IovaError::InvalidPageSize {
                page_size_bytes: self.page_size_bytes,
            });
        }
        if self.pfn_lo > self.pfn_hi || self.pfn_hi.0 > MAX_PFN {
            return Err(IovaError::InvalidDomain {
                pfn_lo: self.pfn_lo,
                pfn_hi: self.pfn_hi,
                max_pfn: Pfn(MAX_PFN),
            });
        }
        Ok(())
    }

    /// Number of frames in the domain.
    #[inline]
    pub const fn total_pages(&self) -> u64 {
        self.pfn_hi.0 - self.pfn_lo.0 + 1
    }

    /// Highest frame below 4 GiB (or `pfn_hi` if lower): the limit of a 32-bit-only device.
    pub fn pfn_32bit(&self) -> Pfn {
        let below_4g = (1u64 << 32) / self.page_size_bytes - 1;
        Pfn(below_4g.min(self.pfn_hi.0))
    }
}

/// What a caller asks for: `pages` frames, aligned, below a limit, inside one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AllocRequest {
    /// Number of pages, at least 1.
    pub pages: u64,
    /// The first frame must be a multiple of this, a power of two (1 = no alignment).
    pub align_pages: u64,
    /// Highest frame the allocation may use (a 32-bit device passes `pfn_32bit`); `None` means
    /// the top of the domain.
    pub limit: Option<Pfn>,
    /// If set, a power of two: the allocation must not cross a multiple of it (a device's DMA
    /// segment boundary, in pages).
    pub boundary_pages: Option<u64>,
}

impl AllocRequest {
    /// `pages` frames with no constraint.
    pub const fn pages(pages: u64) -> Self {
        Self {
            pages,
            align_pages: 1,
            limit: None,
            boundary_pages: None,
        }
    }

    /// The same request aligned to `align_pages`.
    pub const fn aligned(mut self, align_pages: u64) -> Self {
        self.align_pages = align_pages;
        self
    }

    /// The same request aligned to its size rounded up to a power of two, as the Linux DMA
    /// layer asks for every mapping.
    pub fn size_aligned(self) -> Self {
        let align = self.pages.max(1).checked_next_power_of_two().unwrap_or(1);
        self.aligned(align)
    }

    /// The same request below `limit`.
    pub const fn below(mut self, limit: Pfn) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The same request inside segments of `boundary_pages`.
    pub const fn within_boundary(mut self, boundary_pages: u64) -> Self {
        self.boundary_pages = Some(boundary_pages);
        self
    }

    /// Check the request against a domain and return the effective highest usable frame.
    pub fn validate(&self, cfg: &DomainConfig) -> Result<Pfn, IovaError> {
        if self.pages == 0 {
            return Err(IovaError::ZeroSize);
        }
        if !self.align_pages.is_power_of_two() {
            return Err(IovaError::AlignmentNotPowerOfTwo {
                align_pages: self.align_pages,
            });
        }
        if let Some(boundary) = self.boundary_pages {
            if !boundary.is_power_of_two() {
                return Err(IovaError::BoundaryNotPowerOfTwo {
                    boundary_pages: boundary,
                });
            }
            if self.pages > boundary {
                return Err(IovaError::SizeExceedsBoundary {
                    pages: self.pages,
                    boundary_pages: boundary,
                });
            }
        }
        match self.limit {
            None => Ok(cfg.pfn_hi),
            Some(limit) if limit >= cfg.pfn_lo && limit <= cfg.pfn_hi => Ok(limit),
            Some(limit) => Err(IovaError::LimitOutsideDomain {
                limit,
                pfn_lo: cfg.pfn_lo,
                pfn_hi: cfg.pfn_hi,
            }),
        }
    }
}

/// A snapshot of a domain's occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DomainStats {
    /// Allocations handed out and not yet freed.
    pub live_allocations: u64,
    /// Pages in live allocations.
    pub allocated_pages: u64,
    /// Pages in reserved ranges.
    pub reserved_pages: u64,
    /// Pages freed by callers but held in caches (not free in the backing structure).
    pub cached_pages: u64,
    /// Pages neither allocated, reserved nor cached.
    pub free_pages: u64,
    /// The longest run of free pages.
    pub largest_free_extent_pages: u64,
    /// Number of maximal free runs.
    pub free_extents: u64,
}

impl DomainStats {
    /// External fragmentation: `1 - largest_free_extent / free_pages` (0 when the free space is
    /// one run or empty, close to 1 when it is scattered in small pieces).
    pub fn fragmentation(&self) -> f64 {
        if self.free_pages == 0 {
            0.0
        } else {
            1.0 - self.largest_free_extent_pages as f64 / self.free_pages as f64
        }
    }
}

/// Work an allocator did, counted by operation rather than timed, so that a simulator can charge
/// modelled time from it. Single-threaded runs give identical counts for identical inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WorkCounters {
    /// Successful allocations.
    pub allocs: u64,
    /// Successful frees.
    pub frees: u64,
    /// Requests refused (no space or invalid).
    pub failures: u64,
    /// Tree nodes visited (tree designs) during searches and updates.
    pub nodes_visited: u64,
    /// Bitmap words read or written (bitmap designs).
    pub words_scanned: u64,
    /// Locks taken.
    pub lock_acquisitions: u64,
    /// Allocations served from a cache without touching the backing structure.
    pub cache_hits: u64,
    /// Allocations that went past the cache to the backing structure.
    pub cache_misses: u64,
    /// Times all caches were emptied back into the backing structure to retry a failed request.
    pub cache_flushes: u64,
}

impl WorkCounters {
    /// Field-wise sum.
    pub fn add(&mut self, o: &WorkCounters) {
        self.allocs += o.allocs;
        self.frees += o.frees;
        self.failures += o.failures;
        self.nodes_visited += o.nodes_visited;
        self.words_scanned += o.words_scanned;
        self.lock_acquisitions += o.lock_acquisitions;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.cache_flushes += o.cache_flushes;
    }

    /// The work done since `earlier` (a snapshot of the same counters), field by field.
    pub fn since(&self, earlier: &WorkCounters) -> WorkCounters {
        WorkCounters {
            allocs: self.allocs - earlier.allocs,
            frees: self.frees - earlier.frees,
            failures: self.failures - earlier.failures,
            nodes_visited: self.nodes_visited - earlier.nodes_visited,
            words_scanned: self.words_scanned - earlier.words_scanned,
            lock_acquisitions: self.lock_acquisitions - earlier.lock_acquisitions,
            cache_hits: self.cache_hits - earlier.cache_hits,
            cache_misses: self.cache_misses - earlier.cache_misses,
            cache_flushes: self.cache_flushes - earlier.cache_flushes,
        }
    }
}
