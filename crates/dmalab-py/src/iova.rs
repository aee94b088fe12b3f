//! `IovaDomain` and `IovaRange`: an allocator of any design over one domain, for Python.

use dmalab_iova::{
    new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator, IovaRange, Pfn,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{iova_err, ConfigError};

/// A range of I/O page frames handed out by a domain.
#[pyclass(name = "IovaRange", module = "dmalab._native", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PyIovaRange {
    inner: IovaRange,
}

#[pymethods]
impl PyIovaRange {
    /// First frame.
    #[getter]
    fn pfn_lo(&self) -> u64 {
        self.inner.pfn_lo.0
    }

    /// Last frame (inclusive).
    #[getter]
    fn pfn_hi(&self) -> u64 {
        self.inner.pfn_hi().0
    }

    /// Number of pages.
    #[getter]
    fn pages(&self) -> u64 {
        self.inner.pages
    }

    fn __repr__(&self) -> String {
        format!(
            "IovaRange(pfn_lo={:#x}, pages={})",
            self.inner.pfn_lo.0, self.inner.pages
        )
    }
}

/// One IOMMU domain's IOVA space managed by the named allocator design.
#[pyclass(name = "IovaDomain", module = "dmalab._native", frozen)]
pub(crate) struct PyIovaDomain {
    inner: Box<dyn IovaAllocator>,
}

/// A Python integer as a frame number or count: a negative or too large one is a typed error
/// naming the argument, not an OverflowError.
fn u64_arg(name: &str, value: i128, config: bool) -> PyResult<u64> {
    u64::try_from(value).map_err(|_| {
        let msg = format!("{name} is {value}; valid: 0..=2^64-1");
        if config {
            ConfigError::new_err(msg)
        } else {
            crate::errors::InvalidRequestError::new_err(msg)
        }
    })
}

#[pymethods]
impl PyIovaDomain {
    #[new]
    #[pyo3(signature = (allocator = "segtree", *, pfn_lo = None, pfn_hi = None, address_bits = None, page_size = 4096))]
    fn new(
        allocator: &str,
        pfn_lo: Option<i128>,
        pfn_hi: Option<i128>,
        address_bits: Option<i128>,
        page_size: i128,
    ) -> PyResult<Self> {
        let kind = AllocatorKind::parse(allocator).map_err(iova_err)?;
        let pfn_lo = pfn_lo.map(|v| u64_arg("pfn_lo", v, true)).transpose()?;
        let pfn_hi = pfn_hi.map(|v| u64_arg("pfn_hi", v, true)).transpose()?;
        let page_size = u64_arg("page_size", page_size, true)?;
        let address_bits = address_bits
            .map(|v| {
                u32::try_from(v).map_err(|_| {
                    ConfigError::new_err(format!("address_bits is {v}; valid: 13..=64"))
                })
            })
            .transpose()?;
        let cfg = match (pfn_hi, address_bits) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new_err(
                    "give pfn_hi or address_bits, not both",
                ));
            }
            (Some(hi), None) => DomainConfig::new(Pfn(pfn_lo.unwrap_or(1)), Pfn(hi), page_size),
            (None, bits) => DomainConfig::with_address_bits(bits.unwrap_or(48), page_size)
                .and_then(|c| DomainConfig::new(pfn_lo.map_or(c.pfn_lo, Pfn), c.pfn_hi, page_size)),
        }
        .map_err(iova_err)?;
        Ok(Self {
            inner: new_allocator(kind, cfg).map_err(iova_err)?,
        })
    }

    /// The design's name, e.g. `"magazines+rbtree"`.
    #[getter]
    fn allocator(&self) -> String {
        self.inner.name()
    }

    /// First usable frame.
    #[getter]
    fn pfn_lo(&self) -> u64 {
        self.inner.config().pfn_lo.0
    }

    /// Last usable frame (inclusive).
    #[getter]
    fn pfn_hi(&self) -> u64 {
        self.inner.config().pfn_hi.0
    }

    /// Page size in bytes.
    #[getter]
    fn page_size(&self) -> u64 {
        self.inner.config().page_size_bytes
    }

    /// Allocate `pages` pages aligned to `align` pages, at or below frame `limit`, not crossing a
    /// multiple of `boundary` pages.
    #[pyo3(signature = (pages, *, align = 1, limit = None, boundary = None))]
    fn allocate(
        &self,
        pages: i128,
        align: i128,
        limit: Option<i128>,
        boundary: Option<i128>,
    ) -> PyResult<PyIovaRange> {
        let req = AllocRequest {
            pages: u64_arg("pages", pages, false)?,
            align_pages: u64_arg("align", align, false)?,
            limit: limit
                .map(|v| u64_arg("limit", v, false).map(Pfn))
                .transpose()?,
            boundary_pages: boundary
                .map(|v| u64_arg("boundary", v, false))
                .transpose()?,
        };
        let inner = self.inner.allocate(&req).map_err(iova_err)?;
        Ok(PyIovaRange { inner })
    }

    /// Free the live allocation of `pages` pages at frame `pfn`.
    fn free(&self, pfn: i128, pages: i128) -> PyResult<()> {
        let (pfn, pages) = (u64_arg("pfn", pfn, false)?, u64_arg("pages", pages, false)?);
        self.inner.free(Pfn(pfn), pages).map_err(iova_err)
    }

    /// Reserve frames `[pfn_lo, pfn_hi]` for good.
    fn reserve(&self, pfn_lo: i128, pfn_hi: i128) -> PyResult<()> {
        let (pfn_lo, pfn_hi) = (
            u64_arg("pfn_lo", pfn_lo, false)?,
            u64_arg("pfn_hi", pfn_hi, false)?,
        );
        self.inner
            .reserve(Pfn(pfn_lo), Pfn(pfn_hi))
            .map_err(iova_err)
    }

    /// Occupancy: live allocations, pages by state, largest free extent, fragmentation.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("live_allocations", s.live_allocations)?;
        d.set_item("allocated_pages", s.allocated_pages)?;
        d.set_item("reserved_pages", s.reserved_pages)?;
        d.set_item("cached_pages", s.cached_pages)?;
        d.set_item("free_pages", s.free_pages)?;
        d.set_item("largest_free_extent_pages", s.largest_free_extent_pages)?;
        d.set_item("free_extents", s.free_extents)?;
        d.set_item("fragmentation", s.fragmentation())?;
        Ok(d)
    }

    /// Work counted since creation (searches, locks, cache hits and misses).
    fn work<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let w = self.inner.work();
        let d = PyDict::new(py);
        for (k, v) in [
            ("allocs", w.allocs),
            ("frees", w.frees),
            ("failures", w.failures),
            ("nodes_visited", w.nodes_visited),
            ("words_scanned", w.words_scanned),
            ("lock_acquisitions", w.lock_acquisitions),
            ("cache_hits", w.cache_hits),
            ("cache_misses", w.cache_misses),
            ("cache_flushes", w.cache_flushes),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Heap bytes the allocator holds.
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// Return every cached range to the backing structure.
    fn flush_caches(&self) {
        self.inner.flush_caches();
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "IovaDomain({:?}, pfn_lo={:#x}, pfn_hi={:#x}, page_size={})",
            self.inner.name(),
            c.pfn_lo.0,
            c.pfn_hi.0,
            c.page_size_bytes
        )
    }
}

/// The names `IovaDomain` accepts.
#[pyfunction]
fn allocator_names() -> Vec<&'static str> {
    AllocatorKind::NAMES.to_vec()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyIovaRange>()?;
    m.add_class::<PyIovaDomain>()?;
    m.add_function(wrap_pyfunction!(allocator_names, m)?)?;
    Ok(())
}
