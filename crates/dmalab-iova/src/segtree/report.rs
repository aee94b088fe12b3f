//! Reports: the domain's occupancy, work and memory, and where a zone's free pages are.
//!
//! Ranges move between the caches and the tree only under the backend lock, and no path holds
//! a cache while waiting for it: holding it while reading the caches gives a snapshot in which
//! every page is counted once.

use crossbeam_utils::CachePadded;

use super::cache::Slot;
use super::SegTreeAllocator;
use crate::types::{DomainStats, Pfn, WorkCounters};

/// Where the free pages at or below a limit are in a [`SegTreeAllocator`] domain
/// ([`SegTreeAllocator::zone_report`]): to follow how a crowded zone, such as a 32-bit
/// device's, wears down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneReport {
    /// Pages free in the tree.
    pub tree_free_pages: u64,
    /// Maximal runs of free pages in the tree.
    pub tree_free_runs: u64,
    /// The longest of those runs.
    pub tree_largest_run: u64,
    /// Free aligned blocks of 64 pages in the tree (64 pages aligned to 64 frames).
    pub tree_free_blocks_64: u64,
    /// Pages of the zone held in the shared depot.
    pub depot_pages: u64,
    /// Pages of the zone held in each cache in use: other threads' owned caches in slot order,
    /// then the caller's, then the shared ones.
    pub cached_pages: Vec<u64>,
}

impl SegTreeAllocator {
    /// Where the free pages at or below `limit` are: free in the tree, in the depot, or held
    /// by each cache in use. Takes the backend lock and, with other threads' caches in use,
    /// a process-wide barrier; meant for diagnosis, not for a hot path.
    pub fn zone_report(&self, limit: Pfn) -> ZoneReport {
        let lim = limit.0.clamp(self.base(), self.cfg.pfn_hi.0) - self.base();
        // Pages of the ranges of `classes` (by size) that end at or below the limit.
        let below = |classes: &[Vec<u64>]| -> u64 {
            let pages = classes.iter().enumerate().map(|(n, class)| {
                class.iter().filter(|&&o| o + n as u64 <= lim + 1).count() as u64 * n as u64
            });
            pages.sum()
        };
        // As in `stats`: the backend lock held while the caches are read gives a snapshot.
        let b = self.backend();
        let mut cached_pages = Vec::new();
        self.each_used_cache(|c| cached_pages.push(below(&c.classes)));
        let (largest, runs, free) = b.tree.free_runs(lim);
        let depot_pages = below(&b.depot);
        // Offsets of the blocks aligned to 64 frames.
        let first = (64 - self.base() % 64) % 64;
        let blocks = (first..)
            .step_by(64)
            .take_while(|&o| o + 63 <= lim)
            .filter(|&o| b.tree.next_used(o, o + 63).is_none())
            .count() as u64;
        ZoneReport {
            tree_free_pages: free,
            tree_free_runs: runs,
            tree_largest_run: largest,
            tree_free_blocks_64: blocks,
            depot_pages,
            cached_pages,
        }
    }

    /// Occupancy now (see [`crate::IovaAllocator::stats`]).
    pub(super) fn occupancy(&self) -> DomainStats {
        let b = self.backend();
        let mut cached_pages = b.depot_pages;
        self.each_used_cache(|c| cached_pages += c.cached_pages);
        let (largest, extents, free) = b.tree.free_runs(self.cfg.total_pages() - 1);
        let reserved: u64 = b.reserved.iter().map(|&(l, h)| h - l + 1).sum();
        let total = self.cfg.total_pages();
        DomainStats {
            live_allocations: self.live.count(),
            allocated_pages: total - free - reserved - cached_pages,
            reserved_pages: reserved,
            cached_pages,
            free_pages: free,
            largest_free_extent_pages: largest,
            free_extents: extents,
        }
    }

    /// Work counted since creation, the backend's and every cache's.
    pub(super) fn work_counted(&self) -> WorkCounters {
        let mut w = self
            .published
            .read()
            .unwrap_or_else(|| self.backend().tree.work);
        self.each_used_cache(|c| w.add(&c.work()));
        // Cache hits are allocations the backend never saw.
        w.allocs += w.cache_hits;
        w
    }

    /// Heap bytes held: structures, caches and the depot.
    pub(super) fn heap_bytes(&self) -> usize {
        let mut caches = self.cpus.len() * std::mem::size_of::<CachePadded<Slot>>();
        self.each_used_cache(|c| {
            caches += c.classes.iter().map(|v| v.capacity() * 8).sum::<usize>()
                + c.classes.capacity() * std::mem::size_of::<Vec<u64>>();
        });
        let b = self.backend();
        // The depot's lists and its word masks (a key, a value and a control byte a slot).
        let depot = b.depot.iter().map(|v| v.capacity() * 8).sum::<usize>()
            + b.depot.capacity() * std::mem::size_of::<Vec<u64>>()
            + b.depot_mask.as_ref().map_or(0, |m| m.capacity() * 17);
        b.tree.bytes()
            + b.reserved.capacity() * 16
            + depot
            + self.live.bytes()
            + self.ends.bytes()
            + caches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocRequest, DomainConfig, IovaAllocator};

    #[test]
    fn a_zone_report_counts_the_free_pages_below_the_limit_where_they_are() {
        // A zone of 1024 pages below a larger domain's top, where ranges over 16 pages come
        // one at a time.
        let cfg = DomainConfig::new(Pfn(0), Pfn(2047), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let whole = dom.zone_report(Pfn(1023));
        assert_eq!(
            (
                whole.tree_free_pages,
                whole.tree_free_runs,
                whole.tree_largest_run
            ),
            (1024, 1, 1024)
        );
        assert_eq!((whole.tree_free_blocks_64, whole.depot_pages), (16, 0));
        // A 40-page range at the top, freed: cached, and its block's tail free in the tree.
        let r = dom
            .allocate(&AllocRequest::pages(40).size_aligned().below(Pfn(1023)))
            .unwrap();
        assert_eq!(r.pfn_lo, Pfn(960));
        dom.free(r.pfn_lo, 40).unwrap();
        let after = dom.zone_report(Pfn(1023));
        assert_eq!(after.cached_pages.iter().sum::<u64>(), 40);
        assert_eq!(after.tree_free_pages, 1024 - 40);
        assert_eq!((after.tree_free_runs, after.tree_largest_run), (2, 960));
        assert_eq!(after.tree_free_blocks_64, 15);
        // Below the range, neither it nor its block's tail counts.
        let low = dom.zone_report(Pfn(959));
        assert_eq!(low.cached_pages.iter().sum::<u64>(), 0);
        assert_eq!((low.tree_free_pages, low.tree_free_blocks_64), (960, 15));
    }
}
