//! The one error type of the allocator library: every refusal names the values that caused it.

use crate::types::Pfn;

/// Why an allocator refused an operation. Nothing in the library panics on caller input; every
/// bad argument or impossible request comes back as one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IovaError {
    /// The page size is not a power of two of at least 512 bytes.
    #[error("page size {page_size_bytes} bytes is not a power of two of at least 512")]
    InvalidPageSize {
        /// The size given.
        page_size_bytes: u64,
    },
    /// The address width does not fit the page size.
    #[error("address width {address_bits} bits is outside the valid range {min}..={max} for this page size")]
    InvalidAddressBits {
        /// The width given.
        address_bits: u32,
        /// Smallest valid width (one page more than a single page).
        min: u32,
        /// Largest valid width.
        max: u32,
    },
    /// The domain's bounds are reversed or too large.
    #[error("domain [{pfn_lo}, {pfn_hi}] is invalid: need pfn_lo <= pfn_hi <= {max_pfn}")]
    InvalidDomain {
        /// Lower bound given.
        pfn_lo: Pfn,
        /// Upper bound given.
        pfn_hi: Pfn,
        /// Largest supported frame.
        max_pfn: Pfn,
    },
    /// A request for zero pages.
    #[error("allocation size is zero pages; the valid range is 1 or more")]
    ZeroSize,
    /// The alignment is not a power of two.
    #[error("alignment {align_pages} pages is not a power of two")]
    AlignmentNotPowerOfTwo {
        /// Alignment given.
        align_pages: u64,
    },
    /// The segment boundary is not a power of two.
    #[error("segment boundary {boundary_pages} pages is not a power of two")]
    BoundaryNotPowerOfTwo {
        /// Boundary given.
        boundary_pages: u64,
    },
    /// The request cannot fit inside one segment.
    #[error("size {pages} pages is larger than the segment boundary {boundary_pages} pages")]
    SizeExceedsBoundary {
        /// Size asked for.
        pages: u64,
        /// Boundary given.
        boundary_pages: u64,
    },
    /// The limit lies outside the domain.
    #[error("limit {limit} is outside the domain [{pfn_lo}, {pfn_hi}]")]
    LimitOutsideDomain {
        /// Limit given.
        limit: Pfn,
        /// Domain's first frame.
        pfn_lo: Pfn,
        /// Domain's last frame.
        pfn_hi: Pfn,
    },
    /// No free run satisfies the request.
    #[error("no free space for {pages} pages aligned to {align_pages} below {limit}{}", boundary_pages.map(|b| format!(" within {b}-page segments")).unwrap_or_default())]
    NoSpace {
        /// Size asked for.
        pages: u64,
        /// Alignment asked for.
        align_pages: u64,
        /// Effective limit.
        limit: Pfn,
        /// Segment boundary asked for.
        boundary_pages: Option<u64>,
    },
    /// A range lies (partly) outside the domain.
    #[error("range [{pfn_lo}, {pfn_hi}] is outside the domain [{domain_lo}, {domain_hi}]")]
    RangeOutsideDomain {
        /// First frame given.
        pfn_lo: Pfn,
        /// Last frame given.
        pfn_hi: Pfn,
        /// Domain's first frame.
        domain_lo: Pfn,
        /// Domain's last frame.
        domain_hi: Pfn,
    },
    /// A free of a range no live allocation starts at: a double free or a never-allocated range.
    #[error("free of {pages} pages at {pfn}: no live allocation starts there (double free or never allocated)")]
    NotAllocated {
        /// First frame given.
        pfn: Pfn,
        /// Size given.
        pages: u64,
    },
    /// A free whose size differs from the allocation's.
    #[error("free of {pages} pages at {pfn}: the allocation there is {allocated_pages} pages")]
    SizeMismatch {
        /// First frame given.
        pfn: Pfn,
        /// Size given.
        pages: u64,
        /// Size of the live allocation.
        allocated_pages: u64,
    },
    /// A free of a reserved range: reserved ranges stay reserved for the domain's life.
    #[error("free at {pfn}: the frame is reserved, not allocated")]
    FreeOfReserved {
        /// First frame given.
        pfn: Pfn,
    },
    /// A reservation that would cover a live (or cached) allocation.
    #[error("reserve [{pfn_lo}, {pfn_hi}] overlaps the allocation at {allocated_pfn}")]
    ReserveOverlapsAllocation {
        /// First frame given.
        pfn_lo: Pfn,
        /// Last frame given.
        pfn_hi: Pfn,
        /// First frame of an allocation inside the range.
        allocated_pfn: Pfn,
    },
    /// The domain is too large for a design whose memory grows with the domain.
    #[error("domain of {pages} pages is too large for the {allocator} allocator (at most {max_pages} pages)")]
    DomainTooLarge {
        /// Pages in the domain.
        pages: u64,
        /// The design's limit.
        max_pages: u64,
        /// The design's name.
        allocator: &'static str,
    },
    /// A segtree tuning value outside its valid range (see `segtree::Tuning`, whose fields
    /// document each range).
    #[error("segtree tuning {field} = {value} is outside the valid range {min}..={max}")]
    InvalidTuning {
        /// The `Tuning` field.
        field: &'static str,
        /// Value given.
        value: u64,
        /// Smallest valid value.
        min: u64,
        /// Largest valid value.
        max: u64,
    },
    /// An allocator name the library does not know.
    #[error("unknown allocator {name:?}; valid names: {valid}")]
    UnknownAllocator {
        /// Name given.
        name: String,
        /// Comma-separated list of valid names.
        valid: String,
    },
}
