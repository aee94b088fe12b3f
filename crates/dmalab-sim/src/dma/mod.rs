//! The DMA-mapping layer: what a driver's `map` and `unmap` cost and leave open, under each
//! translation mode, with a real IOVA allocator from `dmalab-iova` inside.
//!
//! Time is charged from counted work: the allocator's own work counters (nodes visited, words
//! scanned, locks, cache hits) times per-unit costs from the platform file, plus per-page table
//! writes, invalidations, hypervisor calls and bounce copies. Nothing is a per-scenario constant.

use crate::config::params::ParamReader;
use crate::error::{invalid_arg, iova, Result};
use crate::iommu::flush::{Exposure, FlushAction, FlushPolicy, FlushQueues, PendingUnmap};
use crate::iommu::iotlb::{Iotlb, IotlbStats, Replacement};
use crate::iommu::Translation;
use crate::units::Ps;
use dmalab_iova::{
    new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator, Pfn, WorkCounters,
};
use serde::Serialize;

/// The per-unit costs of the mapping layer (a platform's `[iommu]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapCosts {
    /// Page size of the I/O address space.
    pub page_bytes: u64,
    /// Fixed CPU cost of one allocator call (entry, checks, return).
    pub alloc_call_ns: u64,
    /// CPU cost per tree node the allocator visits.
    pub node_visit_ns: u64,
    /// CPU cost per bitmap word the allocator reads or writes.
    pub word_scan_ns: u64,
    /// CPU cost per lock the allocator takes.
    pub lock_ns: u64,
    /// CPU cost of a per-CPU cache hit.
    pub cache_hit_ns: u64,
    /// CPU cost of allocating the tree's node (a slab allocation) per tree allocation.
    pub node_alloc_ns: u64,
    /// Writing one page-table entry (and flushing it to memory where the walker is not coherent).
    pub pte_write_ns: u64,
    /// Clearing one page-table entry.
    pub pte_clear_ns: u64,
    /// A page-selective IOTLB invalidation, submitted and waited for.
    pub invalidate_ns: u64,
    /// A global IOTLB flush, submitted and waited for.
    pub flush_all_ns: u64,
    /// Hypervisor call that sets TCEs (per call).
    pub hcall_map_ns: u64,
    /// Hypervisor call that clears TCEs (per call).
    pub hcall_unmap_ns: u64,
    /// Levels of the I/O page table (walk length on an IOTLB miss).
    pub table_levels: u64,
    /// Memory latency of one table level during a walk.
    pub walk_level_ns: u64,
    /// IOTLB (or TCE cache) entries.
    pub iotlb_entries: u64,
    /// IOTLB ways.
    pub iotlb_ways: u64,
    /// IOTLB replacement.
    pub iotlb_replacement: Replacement,
    /// CPU cost per KiB of a bounce copy.
    pub bounce_ns_per_kib: u64,
}

impl MapCosts {
    /// Read the costs under `prefix` (such as `iommu`), each range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<MapCosts> {
        let f = |name: &str| format!("{prefix}.{name}");
        let ns = 0..=10_000_000;
        let replacement = r.choice(&f("iotlb_replacement"), &Replacement::NAMES)?;
        Ok(MapCosts {
            page_bytes: r.pow2(&f("page_bytes"), 4096..=1 << 30)?,
            alloc_call_ns: r.u64(&f("alloc_call_ns"), ns.clone())?,
            node_visit_ns: r.u64(&f("node_visit_ns"), ns.clone())?,
            word_scan_ns: r.u64(&f("word_scan_ns"), ns.clone())?,
            lock_ns: r.u64(&f("lock_ns"), ns.clone())?,
            cache_hit_ns: r.u64(&f("cache_hit_ns"), ns.clone())?,
            node_alloc_ns: r.u64(&f("node_alloc_ns"), ns.clone())?,
            pte_write_ns: r.u64(&f("pte_write_ns"), ns.clone())?,
            pte_clear_ns: r.u64(&f("pte_clear_ns"), ns.clone())?,
            invalidate_ns: r.u64(&f("invalidate_ns"), ns.clone())?,
            flush_all_ns: r.u64(&f("flush_all_ns"), ns.clone())?,
            hcall_map_ns: r.u64(&f("hcall_map_ns"), ns.clone())?,
            hcall_unmap_ns: r.u64(&f("hcall_unmap_ns"), ns.clone())?,
            table_levels: r.u64(&f("table_levels"), 1..=6)?,
            walk_level_ns: r.u64(&f("walk_level_ns"), ns.clone())?,
            iotlb_entries: r.u64(&f("iotlb_entries"), 1..=1 << 20)?,
            iotlb_ways: r.u64(&f("iotlb_ways"), 1..=1 << 20)?,
            iotlb_replacement: Replacement::parse(&replacement).unwrap_or(Replacement::Lru),
            bounce_ns_per_kib: r.u64(&f("bounce_ns_per_kib"), ns)?,
        })
    }
}

/// Where the time of mapping goes, per component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MapTime {
    /// IOVA allocation (allocator work).
    pub alloc_ps: Ps,
    /// IOVA free (allocator work).
    pub free_ps: Ps,
    /// Page-table or TCE writes and clears done by the OS.
    pub table_ps: Ps,
    /// IOTLB invalidations and flushes.
    pub flush_ps: Ps,
    /// Hypervisor calls.
    pub hcall_ps: Ps,
    /// Bounce copies.
    pub bounce_ps: Ps,
}

impl MapTime {
    /// The sum of the components.
    pub fn total(&self) -> Ps {
        self.alloc_ps
            + self.free_ps
            + self.table_ps
            + self.flush_ps
            + self.hcall_ps
            + self.bounce_ps
    }

    /// Each component divided by `n` (per-operation averages from run totals).
    pub fn per(&self, n: u64) -> MapTime {
        let d = |p: Ps| Ps(p.0 / n.max(1));
        MapTime {
            alloc_ps: d(self.alloc_ps),
            free_ps: d(self.free_ps),
            table_ps: d(self.table_ps),
            flush_ps: d(self.flush_ps),
            hcall_ps: d(self.hcall_ps),
            bounce_ps: d(self.bounce_ps),
        }
    }

    /// Component-wise sum.
    pub fn add(&mut self, o: &MapTime) {
        self.alloc_ps += o.alloc_ps;
        self.free_ps += o.free_ps;
        self.table_ps += o.table_ps;
        self.flush_ps += o.flush_ps;
        self.hcall_ps += o.hcall_ps;
        self.bounce_ps += o.bounce_ps;
    }
}

/// Which way the data of a mapping moves (the DMA API's direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmaDirection {
    /// The device reads the buffer (transmit, disk write): a bounce copy happens at map.
    ToDevice,
    /// The device writes the buffer (receive, disk read): a bounce copy happens at unmap.
    FromDevice,
    /// Both: bounce copies at map and at unmap.
    Bidirectional,
}

impl DmaDirection {
    fn copies_at_map(self) -> bool {
        matches!(self, DmaDirection::ToDevice | DmaDirection::Bidirectional)
    }

    fn copies_at_unmap(self) -> bool {
        matches!(self, DmaDirection::FromDevice | DmaDirection::Bidirectional)
    }
}

/// A scatter-gather list mapped for the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SgMapping {
    /// The mapping behind the list: one IOVA range covering every segment's pages (as the
    /// IOMMU DMA layers map a list), or, untranslated, the span of the segments.
    pub mapping: Mapping,
    /// The device address of each segment, in order.
    pub segment_addrs: Vec<u64>,
}

/// A live mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Mapping {
    /// The address the device uses.
    pub dma_addr: u64,
    /// Bytes of the buffer.
    pub len_bytes: u64,
    /// First I/O page of the mapping (none for untranslated modes).
    pub pfn: Option<u64>,
    /// I/O pages mapped.
    pub pages: u64,
    /// Whether the buffer was bounced.
    pub bounced: bool,
    /// Which way the data moves.
    pub direction: DmaDirection,
}

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
    translation: Translation,
    costs: MapCosts,
    allocator: Option<Box<dyn IovaAllocator>>,
    iotlb: Iotlb,
    flush: FlushQueues,
    dma_mask_bits: u32,
    window_offset: u64,
    stats: MapperStats,
    last_work: WorkCounters,
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
        let allocator = match config.translation {
            Translation::PageTable | Translation::Tce => {
                let page = costs.page_bytes;
                let pages = config.window_bytes / page.max(1);
                if pages < 2 {
                    return Err(invalid_arg(
                        "window_bytes",
                        config.window_bytes,
                        "at least two pages",
                    ));
                }
                let domain =
                    DomainConfig::new(Pfn(1), Pfn(pages - 1), page).map_err(iova(|| {
                        format!("IOVA domain of {} bytes", config.window_bytes)
                    }))?;
                let alloc = new_allocator(config.allocator.clone(), domain)
                    .map_err(iova(|| format!("allocator {}", config.allocator.name())))?;
                for &(start, end) in &config.reserved {
                    let lo = (start / page).max(1);
                    let hi = (end / page).min(pages - 1);
                    if lo <= hi {
                        alloc.reserve(Pfn(lo), Pfn(hi)).map_err(|e| {
                            invalid_arg("reserved", format!("{start:#x}-{end:#x}"), e)
                        })?;
                    }
                }
                Some(alloc)
            }
            _ => None,
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
            last_work: WorkCounters::default(),
            costs,
        })
    }

    /// The translation mode.
    pub fn translation(&self) -> Translation {
        self.translation
    }

    /// Map `len_bytes` at physical address `phys` for the device, on `cpu`, at `now`.
    pub fn map(
        &mut self,
        now: Ps,
        cpu: usize,
        phys: u64,
        len_bytes: u64,
    ) -> Result<(Mapping, MapTime)> {
        self.map_dir(now, cpu, phys, len_bytes, DmaDirection::Bidirectional)
    }

    /// Map `len_bytes` at `phys` for the device to move data in `direction`.
    pub fn map_dir(
        &mut self,
        now: Ps,
        cpu: usize,
        phys: u64,
        len_bytes: u64,
        direction: DmaDirection,
    ) -> Result<(Mapping, MapTime)> {
        if len_bytes == 0 {
            return Err(invalid_arg("len_bytes", 0, "at least 1"));
        }
        let _ = (now, cpu);
        // Pages are powers of two (checked when read): shifts, not divisions, on this hot path.
        let page = self.costs.page_bytes;
        let shift = page.trailing_zeros();
        let first = phys >> shift;
        let pages = ((phys + len_bytes + page - 1) >> shift) - first;
        let mut time = MapTime::default();
        self.stats.maps += 1;
        let mapping = match self.translation {
            Translation::None => {
                let reachable =
                    self.dma_mask_bits >= 64 || (phys + len_bytes) <= (1u64 << self.dma_mask_bits);
                if !reachable {
                    if direction.copies_at_map() {
                        time.bounce_ps = self.bounce_copy(len_bytes);
                    }
                    self.stats.bounced += 1;
                }
                Mapping {
                    dma_addr: phys,
                    len_bytes,
                    pfn: None,
                    pages,
                    bounced: !reachable,
                    direction,
                }
            }
            Translation::Passthrough => Mapping {
                dma_addr: phys,
                len_bytes,
                pfn: None,
                pages,
                bounced: false,
                direction,
            },
            Translation::DirectWindow => Mapping {
                dma_addr: phys.wrapping_add(self.window_offset),
                len_bytes,
                pfn: None,
                pages,
                bounced: false,
                direction,
            },
            Translation::PageTable | Translation::Tce => {
                let range = self.alloc_iova(pages, &mut time)?;
                let offset = phys & (page - 1);
                match self.translation {
                    Translation::Tce => time.hcall_ps = Ps::from_ns(self.costs.hcall_map_ns),
                    _ => time.table_ps = Ps::from_ns(self.costs.pte_write_ns).times(pages),
                }
                self.stats.sub_page_bytes_exposed += pages * page - len_bytes;
                Mapping {
                    dma_addr: range * page + offset,
                    len_bytes,
                    pfn: Some(range),
                    pages,
                    bounced: false,
                    direction,
                }
            }
        };
        self.stats.time.add(&time);
        Ok((mapping, time))
    }

    fn alloc_iova(&mut self, pages: u64, time: &mut MapTime) -> Result<u64> {
        let Some(alloc) = self.allocator.as_ref() else {
            return Err(invalid_arg(
                "translation",
                "untranslated",
                "a mode with an IOVA allocator",
            ));
        };
        let limit_pfn = if self.dma_mask_bits >= 64 {
            None
        } else {
            Some(((1u64 << self.dma_mask_bits) / self.costs.page_bytes).saturating_sub(1))
        };
        let mut req = AllocRequest::pages(pages).size_aligned();
        if let Some(l) = limit_pfn {
            if l < alloc.config().pfn_hi.0 {
                req = req.below(Pfn(l));
            }
        }
        let range = alloc
            .allocate(&req)
            .map_err(iova(|| format!("IOVA allocation of {pages} pages")))?;
        time.alloc_ps += self.charge_work();
        Ok(range.pfn_lo.0)
    }

    /// Time for the allocator work done since the last charge, and the tree node allocation
    /// for each new tree allocation.
    fn charge_work(&mut self) -> Ps {
        let Some(alloc) = self.allocator.as_ref() else {
            return Ps::ZERO;
        };
        let now = alloc.work();
        let d = now.since(&self.last_work);
        self.last_work = now;
        let c = &self.costs;
        let calls = d.allocs + d.frees + d.failures;
        // A tree design allocates a node per allocation (it visits nodes; a bitmap does not).
        let node_allocs = if d.nodes_visited > 0 {
            d.allocs.saturating_sub(d.cache_hits)
        } else {
            0
        };
        Ps::from_ns(
            calls * c.alloc_call_ns
                + d.nodes_visited * c.node_visit_ns
                + d.words_scanned * c.word_scan_ns
                + d.lock_acquisitions * c.lock_ns
                + d.cache_hits * c.cache_hit_ns
                + node_allocs * c.node_alloc_ns,
        )
    }

    /// The device accesses `mapping` (all its pages, once): IOTLB lookups and walks on misses.
    /// Returns the translation time the device waits for.
    pub fn device_access(&mut self, mapping: &Mapping) -> Ps {
        let Some(pfn) = mapping.pfn else {
            return Ps::ZERO;
        };
        let mut misses = 0;
        for p in pfn..pfn + mapping.pages {
            if !self.iotlb.access(p) {
                misses += 1;
            }
        }
        Ps::from_ns(self.costs.walk_level_ns * self.costs.table_levels).times(misses)
    }

    /// Unmap `mapping` on `cpu` at `now`.
    pub fn unmap(&mut self, now: Ps, cpu: usize, mapping: &Mapping) -> Result<MapTime> {
        let mut time = MapTime::default();
        self.stats.unmaps += 1;
        if mapping.bounced && mapping.direction.copies_at_unmap() {
            time.bounce_ps = self.bounce_copy(mapping.len_bytes);
        }
        let Some(pfn) = mapping.pfn else {
            self.stats.time.add(&time);
            return Ok(time);
        };
        match self.translation {
            Translation::Tce => {
                // The hypervisor clears the TCEs and invalidates the bridge's TCE cache.
                time.hcall_ps = Ps::from_ns(self.costs.hcall_unmap_ns);
                for p in pfn..pfn + mapping.pages {
                    self.iotlb.invalidate(p);
                }
                self.free_iova(pfn, mapping.pages, &mut time)?;
            }
            _ => {
                time.table_ps = Ps::from_ns(self.costs.pte_clear_ns).times(mapping.pages);
                let cached = (pfn..pfn + mapping.pages)
                    .filter(|&p| self.iotlb.contains(p))
                    .count() as u64;
                let pending = PendingUnmap {
                    pfn,
                    pages: mapping.pages,
                    cached_pages: cached,
                    unmapped_at: now,
                };
                match self.flush.on_unmap(cpu, pending) {
                    FlushAction::InvalidateNow => {
                        for p in pfn..pfn + mapping.pages {
                            self.iotlb.invalidate(p);
                        }
                        time.flush_ps = Ps::from_ns(self.costs.invalidate_ns);
                        self.free_iova(pfn, mapping.pages, &mut time)?;
                    }
                    FlushAction::Queued => {}
                    FlushAction::FlushAll { released, .. } => {
                        self.iotlb.flush();
                        time.flush_ps = Ps::from_ns(self.costs.flush_all_ns);
                        // Free the whole batch, then charge its counted work once.
                        for r in released {
                            if let Some(alloc) = self.allocator.as_ref() {
                                alloc
                                    .free(Pfn(r.pfn), r.pages)
                                    .map_err(iova(|| format!("IOVA free at page {:#x}", r.pfn)))?;
                            }
                        }
                        time.free_ps += self.charge_work();
                    }
                }
            }
        }
        self.stats.time.add(&time);
        Ok(time)
    }

    fn free_iova(&mut self, pfn: u64, pages: u64, time: &mut MapTime) -> Result<()> {
        if let Some(alloc) = self.allocator.as_ref() {
            alloc
                .free(Pfn(pfn), pages)
                .map_err(iova(|| format!("IOVA free at page {pfn:#x}")))?;
        }
        time.free_ps += self.charge_work();
        Ok(())
    }

    fn bounce_copy(&self, len_bytes: u64) -> Ps {
        Ps((len_bytes * self.costs.bounce_ns_per_kib * 1000).div_ceil(1024))
    }

    /// Map a scatter-gather list of `(phys, len_bytes)` segments: with an IOMMU, one IOVA range
    /// covering every segment's pages, each segment at its page's offset in it; without, each
    /// segment at its own address (bounced where the device cannot reach it).
    pub fn map_sg(
        &mut self,
        now: Ps,
        cpu: usize,
        segments: &[(u64, u64)],
        direction: DmaDirection,
    ) -> Result<(SgMapping, MapTime)> {
        if segments.is_empty() || segments.iter().any(|&(_, len)| len == 0) {
            return Err(invalid_arg(
                "segments",
                segments.len(),
                "a non-empty list of non-empty segments",
            ));
        }
        let page = self.costs.page_bytes;
        let pages_of = |&(phys, len): &(u64, u64)| (phys + len).div_ceil(page) - phys / page;
        let total_pages: u64 = segments.iter().map(pages_of).sum();
        let total_bytes: u64 = segments.iter().map(|s| s.1).sum();
        if !matches!(self.translation, Translation::PageTable | Translation::Tce) {
            let mut time = MapTime::default();
            let mut addrs = Vec::with_capacity(segments.len());
            let (mut first, mut bounced) = (None, false);
            for &(phys, len) in segments {
                let (m, t) = self.map_dir(now, cpu, phys, len, direction)?;
                time.add(&t);
                addrs.push(m.dma_addr);
                bounced |= m.bounced;
                first.get_or_insert(m);
            }
            // One unmap stands for the list: a bounce buffer is copied back whole.
            self.stats.maps -= segments.len() as u64 - 1;
            let m = first.map(|m| Mapping {
                len_bytes: total_bytes,
                pages: total_pages,
                bounced,
                ..m
            });
            let mapping = m.ok_or_else(|| invalid_arg("segments", 0, "at least one"))?;
            return Ok((
                SgMapping {
                    mapping,
                    segment_addrs: addrs,
                },
                time,
            ));
        }
        let mut time = MapTime::default();
        self.stats.maps += 1;
        let base = self.alloc_iova(total_pages, &mut time)?;
        match self.translation {
            Translation::Tce => time.hcall_ps = Ps::from_ns(self.costs.hcall_map_ns),
            _ => time.table_ps = Ps::from_ns(self.costs.pte_write_ns).times(total_pages),
        }
        let mut addrs = Vec::with_capacity(segments.len());
        let mut at = base;
        for seg in segments {
            addrs.push(at * page + seg.0 % page);
            at += pages_of(seg);
        }
        self.stats.sub_page_bytes_exposed += total_pages * page - total_bytes;
        self.stats.time.add(&time);
        let mapping = Mapping {
            dma_addr: addrs[0],
            len_bytes: total_bytes,
            pfn: Some(base),
            pages: total_pages,
            bounced: false,
            direction,
        };
        Ok((
            SgMapping {
                mapping,
                segment_addrs: addrs,
            },
            time,
        ))
    }

    /// Allocate a coherent buffer of `len_bytes` (descriptor rings, mailboxes): mapped once for
    /// the device's lifetime; free it with [`DmaMapper::unmap`].
    pub fn alloc_coherent(
        &mut self,
        now: Ps,
        cpu: usize,
        len_bytes: u64,
    ) -> Result<(Mapping, MapTime)> {
        // Coherent memory comes from pages the kernel picks below the device's mask, so it is
        // never bounced; the model places it at a fixed low address.
        let phys = 1 << 20;
        let (m, t) = self.map_dir(now, cpu, phys, len_bytes, DmaDirection::Bidirectional)?;
        self.stats.coherent_bytes += len_bytes;
        Ok((
            Mapping {
                bounced: false,
                ..m
            },
            t,
        ))
    }

    /// Hand a streaming mapping's buffer back to the CPU (`dma_sync_*_for_cpu`): a bounced
    /// buffer the device wrote is copied back.
    pub fn sync_for_cpu(&mut self, mapping: &Mapping) -> MapTime {
        let mut t = MapTime::default();
        if mapping.bounced && mapping.direction.copies_at_unmap() {
            t.bounce_ps = self.bounce_copy(mapping.len_bytes);
        }
        self.stats.time.add(&t);
        t
    }

    /// Hand the buffer back to the device (`dma_sync_*_for_device`): a bounced buffer the CPU
    /// wrote is copied out again.
    pub fn sync_for_device(&mut self, mapping: &Mapping) -> MapTime {
        let mut t = MapTime::default();
        if mapping.bounced && mapping.direction.copies_at_map() {
            t.bounce_ps = self.bounce_copy(mapping.len_bytes);
        }
        self.stats.time.add(&t);
        t
    }

    /// The size of an I/O page in this domain (the platform's `iommu.page_bytes`).
    pub fn page_bytes(&self) -> u64 {
        self.costs.page_bytes
    }

    /// Totals so far.
    pub fn stats(&self) -> MapperStats {
        let mut s = self.stats.clone();
        s.iotlb = self.iotlb.stats();
        s.exposure = self.flush.exposure();
        if let Some(a) = self.allocator.as_ref() {
            s.allocator_work = a.work();
        }
        s
    }
}
