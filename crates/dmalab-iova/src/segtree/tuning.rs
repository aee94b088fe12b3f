//! Every knob of `segtree` in one [`Tuning`] value, with today's defaults and their validation.
//!
//! The defaults are the values the allocator was measured and tuned with (the design note
//! `docs/design/segtree.md` gives the reasons and the measurements). A caller embedding the
//! crate may change any of them through [`SegTreeAllocator::with_tuning`]; every value is
//! checked there and a bad one comes back as [`IovaError::InvalidTuning`], naming the field and
//! its valid range.
//!
//! [`SegTreeAllocator::with_tuning`]: super::SegTreeAllocator::with_tuning

use crate::error::IovaError;

/// Largest domain: 2^40 pages (52-bit addresses with 4 KiB pages). The top level of each lazy
/// directory is sized to the domain up front (about 4.7 MB for a 48-bit domain, 75 MB here), so
/// larger domains are refused rather than risk an allocation failure.
pub const SEGTREE_MAX_PAGES: u64 = 1 << 40;
/// Default of [`Tuning::max_cached_pages`]: 1 MiB of 4 KiB pages.
pub const MAX_CACHED_PAGES: u64 = 256;
/// Default of [`Tuning::cache_budget_pages`].
pub const CACHE_BUDGET_PAGES: u64 = 64 * 1024;
/// Default of [`Tuning::zone_cache_share`]: the caches may hold 1/32 of a zone that ran short.
pub const ZONE_CACHE_SHARE: u64 = 32;
/// Default of [`Tuning::min_cache_budget_pages`].
pub const MIN_CACHE_BUDGET_PAGES: u64 = 1024;
/// Default of [`Tuning::depot_pages`].
pub const DEPOT_PAGES: u64 = 64 * 1024;

/// How the owner of a per-thread cache and a thread taking it from the owner order their flag
/// store before their flag load (see the `owned` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FenceMode {
    /// Asymmetric fences where the process can use them: the owner (every cached allocate and
    /// free) pays a compiler fence only, and a thread taking its cache pays a process-wide
    /// `membarrier(2)`. Needs the `membarrier` feature and a Linux kernel that accepts the
    /// registration (done once per process, by the first domain built in this mode);
    /// otherwise, and from the first barrier call the kernel refuses, the domain uses
    /// [`FenceMode::Symmetric`].
    #[default]
    Auto,
    /// A full fence on both sides: no system call and no process-wide registration; correct
    /// everywhere, and slower on the cached path (one fence, as much as a lock).
    Symmetric,
}

/// The knobs of a [`SegTreeAllocator`](super::SegTreeAllocator). [`Tuning::default`] gives the
/// values the allocator is built with by [`SegTreeAllocator::new`](super::SegTreeAllocator::new).
///
/// ```
/// use dmalab_iova::segtree::{FenceMode, SegTreeAllocator, Tuning};
/// use dmalab_iova::{DomainConfig, IovaError};
///
/// let cfg = DomainConfig::with_address_bits(32, 4096)?;
/// let quiet = Tuning { fences: FenceMode::Symmetric, depot_pages: 4096, ..Tuning::default() };
/// let dom = SegTreeAllocator::with_tuning(cfg, quiet)?;
/// assert_eq!(dom.tuning().depot_pages, 4096);
///
/// let bad = Tuning { class_max_ranges: 0, ..Tuning::default() };
/// assert!(matches!(
///     SegTreeAllocator::with_tuning(cfg, bad),
///     Err(IovaError::InvalidTuning { field: "class_max_ranges", .. })
/// ));
/// # Ok::<(), IovaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Largest request served from the per-thread caches, in pages; larger ones always go to
    /// the tree. Default [`MAX_CACHED_PAGES`] (256); valid 1 to 4096.
    pub max_cached_pages: u64,
    /// Pages one size class of a cache aims to hold: a class of `n`-page ranges keeps
    /// `class_pages / n` ranges, clamped to `class_min_ranges..=class_max_ranges`. Default
    /// 1024; valid 1 to 2^20.
    pub class_pages: u64,
    /// Fewest ranges a size class keeps room for. Default 8; valid 1 to `class_max_ranges`.
    pub class_min_ranges: usize,
    /// Most ranges a size class keeps. Default 512; valid 1 to 65536.
    pub class_max_ranges: usize,
    /// A refill of an empty class fetches a `1/refill_divisor` share of the class's capacity
    /// beyond the range asked for (at least one). Default 4 (a batch of about 256 pages);
    /// valid 1 to 65536.
    pub refill_divisor: usize,
    /// Below a limit (a 32-bit device's zone) only ranges of at most this many pages are
    /// fetched in batches; larger ones come one at a time. Default 16; valid 0 to
    /// `max_cached_pages`.
    pub limited_batch_max_pages: u64,
    /// Pages each cache's share is worked out from: the budget shared equally among the caches
    /// running (those in use, at most the hardware threads and at most 4), so on a machine of
    /// more than 4 hardware threads the caches may hold more than this in all. Each flush forced
    /// by a failed search halves it, down to `min_cache_budget_pages`.
    /// Default [`CACHE_BUDGET_PAGES`] (65536); valid `min_cache_budget_pages` to 2^40.
    pub cache_budget_pages: u64,
    /// The floor of the halving budget. Default [`MIN_CACHE_BUDGET_PAGES`] (1024); valid 0 to
    /// 2^40.
    pub min_cache_budget_pages: u64,
    /// Once a request below a limit finds no place in the tree, the caches together may hold
    /// at most `1/zone_cache_share` of the space below that limit (of the low zone's pages
    /// alone when the limit is below 4 GiB). Default [`ZONE_CACHE_SHARE`] (32); valid 1 to
    /// 2^20.
    pub zone_cache_share: u64,
    /// Pages the shared depot may hold in all. Default [`DEPOT_PAGES`] (65536); valid 0 to
    /// 2^40.
    pub depot_pages: u64,
    /// Ranges of one size the depot keeps, in full classes of that size. Default 16; valid 0
    /// to 1024.
    pub depot_classes_per_size: usize,
    /// Blocks a reclaim puts in the depot beyond the one it was asked for. Default 8; valid 0
    /// to 64.
    pub reclaim_extra_blocks: usize,
    /// When the newest cached range of a size does not fit a request, how many of the newest
    /// are looked at. Default 4; valid 0 to 1024.
    pub pop_scan_ranges: usize,
    /// How many of the newest ranges of each larger size are looked at for one to cut a
    /// request from. Default 8; valid 0 to 1024.
    pub cut_scan_ranges: usize,
    /// Ranges of the depot looked at for one in the thread's own part of the space, beyond
    /// `depot_home_scan_per_request` for each range wanted. Default 16; valid 0 to 65536.
    pub depot_home_scan_ranges: usize,
    /// See `depot_home_scan_ranges`. Default 4; valid 0 to 1024.
    pub depot_home_scan_per_request: usize,
    /// Cache slots a domain keeps per hardware thread (rounded up to a power of two in all).
    /// Threads beyond the slots share locked caches, and a sharer descheduled inside one makes
    /// the other spin and yield; 8 per hardware thread lets up to 8 times as many threads as
    /// cores each own a cache (docs/results/2026-11-26-oversubscription.md). Default 8; valid 1
    /// to 64.
    pub slots_per_cpu: usize,
    /// The most cache slots a domain keeps, as a power of two. Default 7 (128 slots); valid 0
    /// to 12.
    pub max_slots_log2: u32,
    /// How cache owners and thieves are ordered. Default [`FenceMode::Auto`].
    pub fences: FenceMode,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            max_cached_pages: MAX_CACHED_PAGES,
            class_pages: 1024,
            class_min_ranges: 8,
            class_max_ranges: 512,
            refill_divisor: 4,
            limited_batch_max_pages: 16,
            cache_budget_pages: CACHE_BUDGET_PAGES,
            min_cache_budget_pages: MIN_CACHE_BUDGET_PAGES,
            zone_cache_share: ZONE_CACHE_SHARE,
            depot_pages: DEPOT_PAGES,
            depot_classes_per_size: 16,
            reclaim_extra_blocks: 8,
            pop_scan_ranges: 4,
            cut_scan_ranges: 8,
            depot_home_scan_ranges: 16,
            depot_home_scan_per_request: 4,
            slots_per_cpu: 8,
            max_slots_log2: 7,
            fences: FenceMode::Auto,
        }
    }
}

/// `value` within `min..=max`, or the error naming `field`.
fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), IovaError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(IovaError::InvalidTuning {
            field,
            value,
            min,
            max,
        })
    }
}

impl Tuning {
    /// Check every field against its documented range.
    pub fn validate(&self) -> Result<(), IovaError> {
        let n = |x: usize| x as u64;
        check("max_cached_pages", self.max_cached_pages, 1, 4096)?;
        check("class_pages", self.class_pages, 1, 1 << 20)?;
        check("class_max_ranges", n(self.class_max_ranges), 1, 1 << 16)?;
        let max_ranges = n(self.class_max_ranges);
        check("class_min_ranges", n(self.class_min_ranges), 1, max_ranges)?;
        check("refill_divisor", n(self.refill_divisor), 1, 1 << 16)?;
        let cached = self.max_cached_pages;
        check(
            "limited_batch_max_pages",
            self.limited_batch_max_pages,
            0,
            cached,
        )?;
        check(
            "min_cache_budget_pages",
            self.min_cache_budget_pages,
            0,
            1 << 40,
        )?;
        let floor = self.min_cache_budget_pages;
        check(
            "cache_budget_pages",
            self.cache_budget_pages,
            floor,
            1 << 40,
        )?;
        check("zone_cache_share", self.zone_cache_share, 1, 1 << 20)?;
        check("depot_pages", self.depot_pages, 0, 1 << 40)?;
        check(
            "depot_classes_per_size",
            n(self.depot_classes_per_size),
            0,
            1024,
        )?;
        check("reclaim_extra_blocks", n(self.reclaim_extra_blocks), 0, 64)?;
        check("pop_scan_ranges", n(self.pop_scan_ranges), 0, 1024)?;
        check("cut_scan_ranges", n(self.cut_scan_ranges), 0, 1024)?;
        check(
            "depot_home_scan_ranges",
            n(self.depot_home_scan_ranges),
            0,
            1 << 16,
        )?;
        let per = n(self.depot_home_scan_per_request);
        check("depot_home_scan_per_request", per, 0, 1024)?;
        check("slots_per_cpu", n(self.slots_per_cpu), 1, 64)?;
        check("max_slots_log2", u64::from(self.max_slots_log2), 0, 12)
    }

    /// Whether ranges of `pages` pages are cached: from 1 to `max_cached_pages`.
    #[inline]
    pub(crate) fn caches_size(&self, pages: u64) -> bool {
        pages.wrapping_sub(1) < self.max_cached_pages
    }

    /// Ranges one cache keeps of size `pages`: a few KiB of entries at most.
    pub(crate) fn class_capacity(&self, pages: u64) -> usize {
        let n = (self.class_pages / pages) as usize;
        n.clamp(self.class_min_ranges, self.class_max_ranges)
    }

    /// `len < class_capacity(pages)` for `1 <= pages <= max_cached_pages`, without a division
    /// (the test on every free).
    #[inline]
    pub(crate) fn class_has_room(&self, len: usize, pages: u64) -> bool {
        len < self.class_min_ranges
            || (len < self.class_max_ranges && (len as u64 + 1) * pages <= self.class_pages)
    }

    /// Ranges of `pages` pages the depot keeps.
    pub(crate) fn depot_capacity(&self, pages: u64) -> usize {
        self.depot_classes_per_size * self.class_capacity(pages)
    }

    /// Ranges fetched from the backend beyond the one requested when a cache's class of that
    /// size is empty: a share of the class, except for ranges over `limited_batch_max_pages`
    /// requested below a limit (`limited`), which come one at a time (a batch of large ranges
    /// takes the aligned holes of a small, crowded zone that other sizes and threads need).
    pub(crate) fn refill_extra(&self, pages: u64, limited: bool) -> usize {
        if limited && pages > self.limited_batch_max_pages {
            0
        } else {
            (self.class_capacity(pages) / self.refill_divisor).max(1)
        }
    }

    /// Cache slots for a machine of `cpus` hardware threads: a power of two, so that a
    /// thread's cache is found with a mask rather than a division.
    pub(crate) fn slots(&self, cpus: usize) -> usize {
        let max = 1usize << self.max_slots_log2;
        (self.slots_per_cpu * cpus)
            .next_power_of_two()
            .clamp(1, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_test_matches_the_capacity() {
        let odd = Tuning {
            class_pages: 700,
            class_min_ranges: 3,
            class_max_ranges: 100,
            ..Tuning::default()
        };
        for t in [Tuning::default(), odd] {
            for pages in 1..=t.max_cached_pages {
                for len in 0..600 {
                    assert_eq!(
                        t.class_has_room(len, pages),
                        len < t.class_capacity(pages),
                        "pages {pages} len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_defaults_are_valid_and_every_bad_value_is_named() {
        assert_eq!(Tuning::default().validate(), Ok(()));
        let bad = Tuning {
            class_min_ranges: 600,
            ..Tuning::default()
        };
        assert_eq!(
            bad.validate(),
            Err(IovaError::InvalidTuning {
                field: "class_min_ranges",
                value: 600,
                min: 1,
                max: 512
            })
        );
        let bad = Tuning {
            cache_budget_pages: 10,
            ..Tuning::default()
        };
        assert!(matches!(
            bad.validate(),
            Err(IovaError::InvalidTuning {
                field: "cache_budget_pages",
                min: MIN_CACHE_BUDGET_PAGES,
                ..
            })
        ));
    }

    #[test]
    fn slot_counts_are_powers_of_two_within_the_cap() {
        let t = Tuning::default();
        assert_eq!(t.slots(2), 16);
        assert_eq!(t.slots(3), 32);
        assert_eq!(t.slots(1000), 128);
    }
}
