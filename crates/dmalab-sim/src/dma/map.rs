//! Mapping a buffer or a scatter-gather list for the device and unmapping it (the DMA API's
//! streaming `map`, `map_sg` and `unmap`, and its coherent allocation), with the device's
//! accesses through the IOTLB and the syncs that hand a bounced buffer between CPU and device.

use super::costs::MapTime;
use super::mapper::DmaMapper;
use crate::error::{invalid_arg, Result};
use crate::iommu::flush::{FlushAction, PendingUnmap};
use crate::iommu::Translation;
use crate::units::Ps;
use serde::{Deserialize, Serialize};

/// Which way the data of a mapping moves (the DMA API's direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// A scatter-gather list mapped for the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SgMapping {
    /// The mapping behind the list: one IOVA range covering every segment's pages (as the
    /// IOMMU DMA layers map a list), or, untranslated, the span of the segments.
    pub mapping: Mapping,
    /// The device address of each segment, in order.
    pub segment_addrs: Vec<u64>,
}

impl DmaMapper {
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
        self.backend_use.alloc = false;
        let (dma_addr, pfn, bounced) = match self.translation {
            Translation::None => {
                let reachable =
                    self.dma_mask_bits >= 64 || (phys + len_bytes) <= (1u64 << self.dma_mask_bits);
                if !reachable {
                    if direction.copies_at_map() {
                        time.bounce_ps = self.costs.bounce_copy(len_bytes);
                    }
                    self.stats.bounced += 1;
                }
                (phys, None, !reachable)
            }
            Translation::Passthrough => (phys, None, false),
            Translation::DirectWindow => (phys.wrapping_add(self.window_offset), None, false),
            Translation::PageTable | Translation::Tce => {
                let range = self.alloc_iova(pages, &mut time)?;
                let offset = phys & (page - 1);
                self.charge_entries_set(pages, &mut time);
                self.stats.sub_page_bytes_exposed += pages * page - len_bytes;
                (range * page + offset, Some(range), false)
            }
        };
        let mapping = Mapping {
            dma_addr,
            len_bytes,
            pfn,
            pages,
            bounced,
            direction,
        };
        self.time.add(&time);
        Ok((mapping, time))
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
        let mut time = MapTime::default();
        self.backend_use.alloc = false;
        let mut addrs = Vec::with_capacity(segments.len());
        let mapping = if matches!(self.translation, Translation::PageTable | Translation::Tce) {
            self.stats.maps += 1;
            let base = self.alloc_iova(total_pages, &mut time)?;
            self.charge_entries_set(total_pages, &mut time);
            let mut at = base;
            for seg in segments {
                addrs.push(at * page + seg.0 % page);
                at += pages_of(seg);
            }
            self.stats.sub_page_bytes_exposed += total_pages * page - total_bytes;
            self.time.add(&time);
            Mapping {
                dma_addr: addrs[0],
                len_bytes: total_bytes,
                pfn: Some(base),
                pages: total_pages,
                bounced: false,
                direction,
            }
        } else {
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
            m.ok_or_else(|| invalid_arg("segments", 0, "at least one"))?
        };
        Ok((
            SgMapping {
                mapping,
                segment_addrs: addrs,
            },
            time,
        ))
    }

    /// Charge to `time` the setting of `pages` new translations: one hypervisor call for TCEs,
    /// one page-table entry per page otherwise.
    fn charge_entries_set(&self, pages: u64, time: &mut MapTime) {
        match self.translation {
            Translation::Tce => time.hcall_ps = Ps::from_ns(self.costs.hcall_map_ns),
            _ => time.table_ps = Ps::from_ns(self.costs.pte_write_ns).times(pages),
        }
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
        self.costs.table_walk().times(misses)
    }

    /// Unmap `mapping` on `cpu` at `now`.
    pub fn unmap(&mut self, now: Ps, cpu: usize, mapping: &Mapping) -> Result<MapTime> {
        let mut time = MapTime {
            bounce_ps: self.bounce_if(mapping, mapping.direction.copies_at_unmap()),
            ..MapTime::default()
        };
        self.stats.unmaps += 1;
        self.backend_use.free = false;
        let Some(pfn) = mapping.pfn else {
            self.time.add(&time);
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
                    FlushAction::Queued => {
                        // Only the entries' clear and a bounce copy are charged now.
                        self.time.add_table_and_bounce(&time);
                        return Ok(time);
                    }
                    FlushAction::FlushAll { released, .. } => {
                        self.iotlb.flush();
                        time.flush_ps = Ps::from_ns(self.costs.flush_all_ns);
                        self.free_released(released, &mut time)?;
                    }
                }
            }
        }
        self.time.add(&time);
        Ok(time)
    }

    /// Hand a streaming mapping's buffer back to the CPU (`dma_sync_*_for_cpu`): a bounced
    /// buffer the device wrote is copied back.
    pub fn sync_for_cpu(&mut self, mapping: &Mapping) -> MapTime {
        self.sync(mapping, mapping.direction.copies_at_unmap())
    }

    /// Hand the buffer back to the device (`dma_sync_*_for_device`): a bounced buffer the CPU
    /// wrote is copied out again.
    pub fn sync_for_device(&mut self, mapping: &Mapping) -> MapTime {
        self.sync(mapping, mapping.direction.copies_at_map())
    }

    /// A sync of `mapping`: its bounce copy where `copies`, added to the totals.
    fn sync(&mut self, mapping: &Mapping, copies: bool) -> MapTime {
        let t = MapTime {
            bounce_ps: self.bounce_if(mapping, copies),
            ..MapTime::default()
        };
        self.time.add(&t);
        t
    }

    /// The bounce copy of `mapping` where it was bounced and its direction `copies` here.
    fn bounce_if(&self, mapping: &Mapping, copies: bool) -> Ps {
        if mapping.bounced && copies {
            self.costs.bounce_copy(mapping.len_bytes)
        } else {
            Ps::ZERO
        }
    }
}
