//! The domain's I/O virtual address space: ranges allocated from the domain's allocator
//! (`allocator.rs`) below the device's DMA mask and freed, and the allocator's counted work
//! charged as time.

use super::costs::MapTime;
use super::mapper::{touches_backend, DmaMapper};
use crate::error::{invalid_arg, iova, Result};
use crate::iommu::flush::PendingUnmap;
use crate::units::Ps;
use dmalab_iova::{AllocRequest, Pfn, WorkCounters};

impl DmaMapper {
    /// Allocate `pages` pages of IOVA, size-aligned and below the DMA mask; returns the first
    /// page and charges the allocator's work to `time`.
    pub(super) fn alloc_iova(&mut self, pages: u64, time: &mut MapTime) -> Result<u64> {
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
            if l < alloc.get().config().pfn_hi.0 {
                req = req.below(Pfn(l));
            }
        }
        let failed = move || format!("IOVA allocation of {pages} pages");
        if !self.per_call {
            let range = alloc.get().allocate(&req).map_err(iova(failed))?;
            let (ps, shared) = self.charge_work();
            time.alloc_ps += ps;
            self.backend_use.alloc |= shared;
            return Ok(range.pfn_lo.0);
        }
        // This call's work is tallied apart from any left uncharged (the reservations', or a
        // failed call's), which joins it only when there is some.
        let mut work = WorkCounters::default();
        let range = alloc.allocate_counted(&req, &mut work);
        if self.uncharged_left {
            self.uncharged_left = false;
            work.add(&std::mem::take(&mut self.uncharged));
        }
        let range = match range {
            Ok(r) => r,
            Err(e) => {
                self.uncharged.add(&work);
                self.uncharged_left = true;
                return Err(iova(failed)(e));
            }
        };
        time.alloc_ps += self.costs.allocator_work(&work);
        self.backend_use.alloc |= touches_backend(&work);
        Ok(range.pfn_lo.0)
    }

    /// Free the `pages` pages at `pfn` and charge the allocator's work to `time`.
    pub(super) fn free_iova(&mut self, pfn: u64, pages: u64, time: &mut MapTime) -> Result<()> {
        self.release(pfn, pages)?;
        self.charge_free(time);
        Ok(())
    }

    /// Free every range a global flush released, then charge the batch's work once.
    pub(super) fn free_released(
        &mut self,
        released: Vec<PendingUnmap>,
        time: &mut MapTime,
    ) -> Result<()> {
        for r in released {
            self.release(r.pfn, r.pages)?;
        }
        self.charge_free(time);
        Ok(())
    }

    /// Charge the frees' work to `time`, noting whether they reached the shared structure.
    fn charge_free(&mut self, time: &mut MapTime) {
        let (ps, shared) = self.charge_work();
        time.free_ps += ps;
        self.backend_use.free |= shared;
    }

    /// Hand the `pages` pages at `pfn` back to the allocator, uncharged.
    #[inline(always)]
    fn release(&mut self, pfn: u64, pages: u64) -> Result<()> {
        if let Some(alloc) = self.allocator.as_mut() {
            let freed = if self.per_call {
                // The mapper owns its domain's allocator: no other thread reaches it.
                alloc.free_counted_exclusive(Pfn(pfn), pages, &mut self.uncharged)
            } else {
                alloc.get().free(Pfn(pfn), pages)
            };
            freed.map_err(iova(|| format!("IOVA free at page {pfn:#x}")))?;
        }
        Ok(())
    }

    /// Time for the allocator work done since the last charge (and the tree node allocation
    /// for each new tree allocation), and whether that work touched the shared structure.
    fn charge_work(&mut self) -> (Ps, bool) {
        if let Some(a) = self.allocator.as_ref().filter(|_| !self.per_call) {
            let now = a.get().work();
            self.uncharged.add(&now.since(&self.last_work));
            self.last_work = now;
        }
        let d = std::mem::take(&mut self.uncharged);
        (self.costs.allocator_work(&d), touches_backend(&d))
    }
}
