//! What mapping costs: the per-unit costs a platform gives the mapping layer ([`MapCosts`]),
//! the time of counted work at those costs, and where an operation's time goes ([`MapTime`]).

use crate::config::params::{Admits, ParamReader};
use crate::error::Result;
use crate::iommu::iotlb::Replacement;
use crate::iommu::walk::IommuHw;
use crate::units::{Ps, PsSum};
use dmalab_iova::WorkCounters;
use serde::Serialize;

/// The per-unit costs of the mapping layer (a platform's `[iommu]` section).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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
    /// A contended lock changing hands: its cache line (and the data it guards) moving to the
    /// next CPU.
    pub lock_transfer_ns: u64,
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
    /// The host kernel's default invalidation policy (`default_flush`, optional): `Some(true)`
    /// where it is lazy, `Some(false)` strict, `None` where the file states none. What
    /// `bench map` runs unless told.
    pub default_lazy: Option<bool>,
}

impl MapCosts {
    /// Read the costs under `prefix` (such as `iommu`), each range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<MapCosts> {
        Self::read_with(r, prefix, None)
    }

    /// Read the costs under `prefix`; where the platform describes its translation hardware
    /// (`hw`, with the LLC latency its walks read at), the table levels, the IOTLB and a walk
    /// level's time come from there and the section must not repeat them.
    pub fn read_with(
        r: &mut ParamReader<'_>,
        prefix: &str,
        hw: Option<(&IommuHw, u64)>,
    ) -> Result<MapCosts> {
        let f = |name: &str| format!("{prefix}.{name}");
        let ns = 0..=10_000_000;
        let software = |r: &mut ParamReader<'_>| -> Result<MapCosts> {
            let replacement = r.choice(&f("iotlb_replacement"), &Replacement::NAMES)?;
            let costs = MapCosts {
                table_levels: r.u64(&f("table_levels"), 1..=6)?,
                walk_level_ns: r.u64(&f("walk_level_ns"), 0..=10_000_000)?,
                iotlb_entries: r.u64(&f("iotlb_entries"), 1..=1 << 20)?,
                iotlb_ways: r.u64(&f("iotlb_ways"), 1..=1 << 20)?,
                iotlb_replacement: Replacement::parse(&replacement).unwrap_or(Replacement::Lru),
                ..MapCosts::default()
            };
            // Draws take powers of two for both, so that the ways always divide the entries.
            r.admit(&f("iotlb_entries"), Admits::Pow2);
            r.admit(&f("iotlb_ways"), Admits::Pow2);
            Ok(costs)
        };
        let hardware = match hw {
            Some((hw, llc_ns)) => MapCosts {
                table_levels: hw.levels,
                walk_level_ns: hw.walk_step_ns + llc_ns,
                iotlb_entries: hw.iotlb_entries,
                iotlb_ways: hw.iotlb_ways,
                iotlb_replacement: hw.iotlb_replacement,
                ..MapCosts::default()
            },
            None => software(r)?,
        };
        Ok(MapCosts {
            page_bytes: r.pow2(&f("page_bytes"), 4096..=1 << 30)?,
            alloc_call_ns: r.u64(&f("alloc_call_ns"), ns.clone())?,
            node_visit_ns: r.u64(&f("node_visit_ns"), ns.clone())?,
            word_scan_ns: r.u64(&f("word_scan_ns"), ns.clone())?,
            lock_ns: r.u64(&f("lock_ns"), ns.clone())?,
            lock_transfer_ns: r.u64(&f("lock_transfer_ns"), ns.clone())?,
            cache_hit_ns: r.u64(&f("cache_hit_ns"), ns.clone())?,
            node_alloc_ns: r.u64(&f("node_alloc_ns"), ns.clone())?,
            pte_write_ns: r.u64(&f("pte_write_ns"), ns.clone())?,
            pte_clear_ns: r.u64(&f("pte_clear_ns"), ns.clone())?,
            invalidate_ns: r.u64(&f("invalidate_ns"), ns.clone())?,
            flush_all_ns: r.u64(&f("flush_all_ns"), ns.clone())?,
            hcall_map_ns: r.u64(&f("hcall_map_ns"), ns.clone())?,
            hcall_unmap_ns: r.u64(&f("hcall_unmap_ns"), ns.clone())?,
            bounce_ns_per_kib: r.u64(&f("bounce_ns_per_kib"), ns)?,
            default_lazy: if r.has(&f("default_flush")) {
                Some(r.choice(&f("default_flush"), &["strict", "lazy"])? == "lazy")
            } else {
                None
            },
            ..hardware
        })
    }

    /// The time of the allocator work `d`: each call, node visited, bitmap word scanned, lock
    /// taken and cache hit at its unit cost, and a node allocation per tree allocation.
    pub(super) fn allocator_work(&self, d: &WorkCounters) -> Ps {
        let calls = d.allocs + d.frees + d.failures;
        // A tree design allocates a node per allocation (it visits nodes; a bitmap does not).
        let node_allocs = if d.nodes_visited > 0 {
            d.allocs.saturating_sub(d.cache_hits)
        } else {
            0
        };
        Ps::from_ns(
            calls * self.alloc_call_ns
                + d.nodes_visited * self.node_visit_ns
                + d.words_scanned * self.word_scan_ns
                + d.lock_acquisitions * self.lock_ns
                + d.cache_hits * self.cache_hit_ns
                + node_allocs * self.node_alloc_ns,
        )
    }

    /// A CPU copy of `len_bytes` to or from a bounce buffer.
    pub(super) fn bounce_copy(&self, len_bytes: u64) -> Ps {
        Ps((len_bytes * self.bounce_ns_per_kib * 1000).div_ceil(1024))
    }

    /// One IOTLB miss: a walk of every table level.
    pub fn table_walk(&self) -> Ps {
        Ps::from_ns(self.walk_level_ns * self.table_levels)
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

/// A run's [`MapTime`]s summed component by component, each in a [`PsSum`] (a run's totals
/// are added to on every map and unmap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapTimeSum {
    alloc: PsSum,
    free: PsSum,
    table: PsSum,
    flush: PsSum,
    hcall: PsSum,
    bounce: PsSum,
}

impl MapTimeSum {
    /// Add `t`'s components.
    #[inline]
    pub fn add(&mut self, t: &MapTime) {
        self.alloc += t.alloc_ps;
        self.free += t.free_ps;
        self.table += t.table_ps;
        self.flush += t.flush_ps;
        self.hcall += t.hcall_ps;
        self.bounce += t.bounce_ps;
    }

    /// [`Self::add`] for a `t` that has only table and bounce time (an unmap that queued its
    /// invalidation): two sums to add, not six.
    #[inline]
    pub fn add_table_and_bounce(&mut self, t: &MapTime) {
        debug_assert!(
            [t.alloc_ps, t.free_ps, t.flush_ps, t.hcall_ps] == [Ps::ZERO; 4],
            "{t:?}"
        );
        self.table += t.table_ps;
        self.bounce += t.bounce_ps;
    }

    /// What was added since `earlier`, a sum this one grew from.
    pub fn since(&self, earlier: &MapTimeSum) -> MapTimeSum {
        let d = |now: PsSum, then: PsSum| now.minus(then);
        MapTimeSum {
            alloc: d(self.alloc, earlier.alloc),
            free: d(self.free, earlier.free),
            table: d(self.table, earlier.table),
            flush: d(self.flush, earlier.flush),
            hcall: d(self.hcall, earlier.hcall),
            bounce: d(self.bounce, earlier.bounce),
        }
    }

    /// The totals, each saturated to [`Ps`] (as [`MapTime::add`] would have summed them).
    pub fn total(&self) -> MapTime {
        MapTime {
            alloc_ps: self.alloc.ps(),
            free_ps: self.free.ps(),
            table_ps: self.table.ps(),
            flush_ps: self.flush.ps(),
            hcall_ps: self.hcall.ps(),
            bounce_ps: self.bounce.ps(),
        }
    }
}
