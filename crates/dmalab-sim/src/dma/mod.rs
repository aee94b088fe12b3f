//! The DMA-mapping layer: what a driver's `map` and `unmap` cost and leave open, under each
//! translation mode, with a real IOVA allocator from `dmalab-iova` inside.
//!
//! Time is charged from counted work: the allocator's own work counters (nodes visited, words
//! scanned, locks, cache hits) times per-unit costs from the platform file, plus per-page table
//! writes, invalidations, hypervisor calls and bounce copies. Nothing is a per-scenario constant.
//!
//! The layer in files, one concept each:
//!
//! - `mapper.rs`: the [`DmaMapper`] of one device's domain, what it is built from
//!   ([`MapperConfig`]) and its totals over a run ([`MapperStats`]);
//! - `map.rs`: mapping and unmapping a buffer ([`Mapping`], [`DmaDirection`]) or a
//!   scatter-gather list ([`SgMapping`]), coherent buffers, the device's accesses through the
//!   IOTLB, and the syncs of bounced buffers;
//! - `iova.rs`: the domain's I/O address space (allocating and freeing its ranges) and the
//!   charging of its allocator's work;
//! - `allocator.rs`: the domain's IOVA allocator, built over its window with the reserved
//!   ranges taken out;
//! - `costs.rs`: the per-unit costs from the platform's `[iommu]` ([`MapCosts`]) and where an
//!   operation's time goes ([`MapTime`]).

mod allocator;
mod costs;
mod iova;
mod map;
mod mapper;

pub use self::costs::{MapCosts, MapTime, MapTimeSum};
pub use self::map::{DmaDirection, Mapping, SgMapping};
pub use self::mapper::{touches_backend, BackendUse, DmaMapper, MapperConfig, MapperStats};
