//! The mapper of one device's IOMMU domain: what it is built from ([`MapperConfig`]), the state
//! it keeps, and its totals over a run ([`MapperStats`]). Its operations are in `map.rs`
//! (buffers and scatter-gather lists) and `iova.rs` (the I/O address space); its allocator is
//! in `allocator.rs`.

use super::allocator::{domain_allocator, DomainAllocator};
use super::costs::{MapCosts, MapTime, MapTimeSum};
use crate::error::{invalid_arg, Result};
use crate::iommu::flush::{Exposure, FlushPolicy, FlushQueues};
use crate::iommu::iotlb::{Iotlb, IotlbStats};
use crate::iommu::Translation;
use dmalab_iova::{AllocatorKind, WorkCounters};
use serde::Serialize;

/// Totals of a mapper over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MapperStats {
    /// Maps done.
    pub maps: u64,
    /// Unmaps done.
    pub unmaps: u64,
    /// Buffers bounced.
    pub bounced: u64,
    /// Time per component, summed.
    pub time: MapTime,
    /// IOTLB counters.
    pub iotlb: IotlbStats,
    /// The allocator's work.
    pub allocator_work: WorkCounters,
    /// Bytes mapped beyond buffers because mappings are whole pages.
    pub sub_page_bytes_exposed: u64,
    /// Unmapped pages left reachable by deferred flushing, and for how long.
    pub exposure: Exposure,
    /// Whether every buffer stays reachable whether mapped or not (passthrough, direct window).
    pub all_memory_reachable: bool,
    /// Bytes of coherent buffers allocated.
    pub coherent_bytes: u64,
}

/// The DMA-mapping layer of one device's IOMMU domain.
pub struct DmaMapper {
    pub(super) translation: Translation,
    pub(super) costs: MapCosts,
    pub(super) allocator: Option<DomainAllocator>,
    pub(super) iotlb: Iotlb,
    pub(super) flush: FlushQueues,
    pub(super) dma_mask_bits: u32,
    pub(super) window_offset: u64,
    pub(super) stats: MapperStats,
    /// The time of every map, unmap and sync, summed ([`MapperStats::time`] when read).
    pub(super) time: MapTimeSum,
    /// Whether the allocator counts each call's work ([`IovaAllocator::counts_each_call`]):
    /// then its calls add their work to `uncharged`; otherwise each charge reads its counters
    /// and adds the work since `last_work`.
    pub(super) per_call: bool,
    /// The allocator's work not yet charged (at first, with `per_call`, the work of building
    /// the domain and its reservations).
    pub(super) uncharged: WorkCounters,
    /// Whether an allocation must take `uncharged` into its charge (set while it may hold work
    /// from before: the domain's building, a failed allocation); frees charge it whole anyway.
    pub(super) uncharged_left: bool,
    /// The counters at the last charge, without `per_call`.
    pub(super) last_work: WorkCounters,
    pub(super) backend_use: BackendUse,
}

/// Whether the last map's IOVA allocation and the last unmap's IOVA frees reached the
/// allocator's shared backing structure (and so the domain's allocator lock), rather than a
/// per-CPU cache alone: workloads with several CPUs charge that lock from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendUse {
    /// The last map's allocation visited tree nodes or bitmap words, or missed a cache.
    pub alloc: bool,
    /// The last unmap freed into the backing structure (its own range, or a flushed batch).
    pub free: bool,
}

/// Whether counted allocator work `d` touched the allocator's backing structure (and so its
/// lock): tree nodes, bitmap words, a cache miss or a cache flush. Work served from a per-CPU
/// cache alone touches nothing shared.
pub fn touches_backend(d: &WorkCounters) -> bool {
    d.nodes_visited + d.words_scanned + d.cache_misses + d.cache_flushes > 0
}

impl std::fmt::Debug for DmaMapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaMapper")
            .field("translation", &self.translation)
            .finish_non_exhaustive()
    }
}

/// What a [`DmaMapper`] is built from.
#[derive(Clone, Debug)]
pub struct MapperConfig {
    /// The translation mode.
    pub translation: Translation,
    /// The IOVA allocator design (for page tables and TCE windows).
    pub allocator: AllocatorKind,
    /// The IOVA window: bytes of I/O address space the domain manages.
    pub window_bytes: u64,
    /// The invalidation policy (page tables).
    pub flush: FlushPolicy,
    /// CPUs (for per-CPU flush queues).
    pub cpus: usize,
    /// The device's DMA mask in bits.
    pub dma_mask_bits: u32,
    /// The direct window's offset (the "10000000000000" of seed 000's driver log).
    pub window_offset: u64,
    /// IOVA byte ranges `[start, end]` (inclusive) no mapping may use, such as the interrupt
    /// window 0xFEE00000-0xFEEFFFFF that VT-d decodes as MSI writes (seed 003's
    /// `IOAPIC_RANGE_START`) or peer devices' MMIO.
    pub reserved: Vec<(u64, u64)>,
}

impl DmaMapper {
    /// A mapper for `config` with `costs`.
    pub fn new(config: &MapperConfig, costs: MapCosts) -> Result<DmaMapper> {
        if !(24..=64).contains(&config.dma_mask_bits) {
            return Err(invalid_arg(
                "dma_mask_bits",
                config.dma_mask_bits,
                "24..=64",
            ));
        }
        let allocator = domain_allocator(
            config.translation,
            &config.allocator,
            config.window_bytes,
            &config.reserved,
            costs.page_bytes,
        )?;
        let per_call = allocator
            .as_ref()
            .is_some_and(|a| a.get().counts_each_call());
        let uncharged = match allocator.as_ref() {
            Some(a) if per_call => a.get().work(),
            _ => WorkCounters::default(),
        };
        let iotlb = Iotlb::new(
            usize::try_from(costs.iotlb_entries).unwrap_or(usize::MAX),
            usize::try_from(costs.iotlb_ways).unwrap_or(1),
            costs.iotlb_replacement,
        );
        let reachable = matches!(
            config.translation,
            Translation::Passthrough | Translation::DirectWindow
        );
        Ok(DmaMapper {
            translation: config.translation,
            allocator,
            iotlb,
            flush: FlushQueues::new(config.flush, config.cpus),
            dma_mask_bits: config.dma_mask_bits,
            window_offset: config.window_offset,
            stats: MapperStats {
                all_memory_reachable: reachable,
                ..MapperStats::default()
            },
            time: MapTimeSum::default(),
            per_call,
            uncharged,
            uncharged_left: per_call,
            last_work: WorkCounters::default(),
            backend_use: BackendUse::default(),
            costs,
        })
    }

    /// The translation mode.
    pub fn translation(&self) -> Translation {
        self.translation
    }

    /// The size of an I/O page in this domain (the platform's `iommu.page_bytes`).
    pub fn page_bytes(&self) -> u64 {
        self.costs.page_bytes
    }

    /// The first and last page of IOVA a map may take, below the device's DMA mask (`None`
    /// where a map takes none: no IOMMU, passthrough, a direct window).
    pub fn iova_pages(&self) -> Option<(u64, u64)> {
        let alloc = self.allocator.as_ref()?;
        if !matches!(self.translation, Translation::PageTable | Translation::Tce) {
            return None;
        }
        let config = alloc.get().config();
        let mut hi = config.pfn_hi.0;
        if self.dma_mask_bits < 64 {
            hi = hi.min(((1u64 << self.dma_mask_bits) / self.costs.page_bytes).saturating_sub(1));
        }
        Some((config.pfn_lo.0, hi))
    }

    /// The costs the mapper charges.
    pub fn costs(&self) -> &MapCosts {
        &self.costs
    }

    /// The allocator's counted work so far (none without an allocator).
    pub fn allocator_work(&self) -> WorkCounters {
        self.allocator
            .as_ref()
            .map(|a| a.get().work())
            .unwrap_or_default()
    }

    /// Whether the last map and the last unmap reached the allocator's shared structure.
    pub fn backend_use(&self) -> BackendUse {
        self.backend_use
    }

    /// Domain-wide flushes of the invalidation queues so far.
    pub fn flushes(&self) -> u64 {
        self.flush.flushes()
    }

    /// The time of every map, unmap and sync so far, summed (a run's share is the difference
    /// of two readings, [`MapTimeSum::since`]).
    pub fn time_sum(&self) -> MapTimeSum {
        self.time
    }

    /// Totals so far.
    pub fn stats(&self) -> MapperStats {
        let mut s = self.stats.clone();
        s.time = self.time.total();
        s.iotlb = self.iotlb.stats();
        s.exposure = self.flush.exposure();
        if let Some(a) = self.allocator.as_ref() {
            s.allocator_work = a.get().work();
        }
        s
    }
}
