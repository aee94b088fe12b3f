//! The IOMMU: translation caches (IOTLB, TCE cache) and IOTLB invalidation policies with the
//! exposure each leaves.

pub mod flush;
pub mod iotlb;
pub mod sync;
pub mod walk;
pub mod window;

use serde::Serialize;

/// How device addresses become memory addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Translation {
    /// No IOMMU: the bus address is the physical address; a buffer the device cannot reach is
    /// bounced through a low buffer by a CPU copy.
    None,
    /// An IOMMU in identity (passthrough) mode: no per-I/O work and no protection.
    Passthrough,
    /// Per-I/O mappings in an I/O page table, cached by an IOTLB (VT-d, AMD-Vi).
    PageTable,
    /// Per-I/O mappings of TCEs set and cleared by hypervisor calls (POWER default window).
    Tce,
    /// A window mapping all partition memory at a fixed offset (POWER 64-bit direct DMA).
    DirectWindow,
}
