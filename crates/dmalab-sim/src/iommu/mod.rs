//! The IOMMU: translation caches (IOTLB, TCE cache) and IOTLB invalidation policies with the
//! exposure each leaves.

pub mod flush;
pub mod iotlb;
pub mod window;
