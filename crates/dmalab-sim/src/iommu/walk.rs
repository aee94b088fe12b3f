//! The IOMMU's translation hardware under long-lived mappings (a platform's `[iommu_hw]`
//! section): an IOTLB, a paging-structure cache per table level above the leaf, and a bounded
//! number of table walks in flight, so that a stream of misses has a throughput and not only a
//! latency.
//!
//! The structure follows the Intel VT-d specification (chapter 6, "Caching Translation
//! Information": the IOTLB, and the paging-structure caches for the second-level PML4, PDPE and
//! PDE entries); AMD-Vi's page directory cache and an SMMUv3 walk cache play the same parts.
//! A table of `levels` levels maps 4 KiB at level 1, 2 MiB at level 2 (a PDE used as a leaf) and
//! 1 GiB at level 3, each level indexing 9 bits of the address (the x86-64 and Arm 4 KiB-granule
//! layouts alike).
//!
//! A walk starts at the lowest level whose entry a paging-structure cache holds and reads one
//! table line per level down to the leaf; each read is timed by the caller (through the memory
//! path: LLC or DRAM), plus the walker's own step time. A walk takes a walker; with every walker
//! busy a miss waits for the first to free. A request that hits an entry whose walk is still in
//! flight waits for that walk (one walk per page, not one per request).

use super::iotlb::{Iotlb, Replacement};
use super::sync::{PageCommands, SyncCosts};
use crate::config::params::{Admits, ParamReader, Valid};
use crate::error::{invalid_arg, Result};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::VecDeque;

/// The page sizes a mapping may use: 4 KiB, 2 MiB and 1 GiB.
pub const PAGE_SIZES: [u64; 3] = [1 << 12, 1 << 21, 1 << 30];

const LEVELS: Valid = Valid::Range(2, 5);
const MAX_PAGE: Valid = Valid::OneOf(&PAGE_SIZES);
const ENTRIES: Valid = Valid::Range(1, 1 << 16);
const CACHE_ENTRIES: Valid = Valid::Range(0, 1 << 16);
const WALKERS: Valid = Valid::Range(1, 1024);
const STEP_NS: Valid = Valid::Range(0, 100_000);
const PAGE_COMMANDS: Valid = Valid::Range(1, 1 << 20);

/// The `level` of an IOTLB entry in the list of entries walks are filling.
const LEAF_ENTRY: u32 = 0;

/// Entries of walks in flight kept at most (older ones are dropped first).
const IN_FLIGHT_KEPT: usize = 4096;

/// Bytes of one table entry (VT-d, AMD-Vi and Arm VMSA entries are all 64-bit).
pub const ENTRY_BYTES: u64 = 8;

/// How software asks the IOMMU to invalidate its caches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Invalidation {
    /// One set of invalidation registers per IOMMU (the first VT-d units, seed 003's era): a CPU
    /// writes the request and polls until the hardware clears it, holding the registers' lock
    /// throughout.
    #[default]
    Register,
    /// A queue in memory that the hardware consumes in order (VT-d queued invalidation with a
    /// wait descriptor; SMMUv3's command queue with CMD_SYNC; AMD-Vi's command buffer with
    /// COMPLETION_WAIT): a CPU appends its commands and a wait under the queue's lock, releases
    /// it, and polls for its wait's completion, so waits queue behind every earlier command.
    Queued,
    /// A command queue whose wait completes every command queued before it (SMMUv3: a CMD_SYNC
    /// completes once all earlier commands have, Arm IHI 0070 4.7.3), filled by CPUs without a
    /// global lock (Linux's arm-smmu-v3 driver claims queue space with an atomic since 5.5).
    /// Invalidations that reach the queue while the IOMMU works on a batch go in the next
    /// batch, and one wait ends them all: a batch takes the first invalidation's time and
    /// `command_ns` for each other command in it.
    SharedSync,
}

/// The IOMMU's translation hardware.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IommuHw {
    /// Levels of the I/O page table (4 for a 48-bit address space with 4 KiB pages).
    pub levels: u64,
    /// The largest page the tables can map (4 KiB, 2 MiB or 1 GiB).
    pub max_page_bytes: u64,
    /// IOTLB entries.
    pub iotlb_entries: u64,
    /// IOTLB ways per set.
    pub iotlb_ways: u64,
    /// How a full IOTLB set picks its victim.
    pub iotlb_replacement: Replacement,
    /// Entries of each paging-structure cache (one per level above the leaf; fully associative,
    /// LRU); 0: none, every walk starts at the top.
    pub walk_cache_entries: u64,
    /// Table walks in flight at once.
    pub walkers: u64,
    /// The walker's own time per level read, besides the memory read.
    pub walk_step_ns: u64,
    /// Whether table reads snoop the caches (VT-d's page-walk coherency); if not, every table
    /// line comes from DRAM.
    pub walk_coherent: bool,
    /// The invalidation interface.
    pub invalidation: Invalidation,
    /// CPU time to put one invalidation (and its wait) to the interface, under its lock.
    pub invalidation_submit_ns: u64,
    /// With [`Invalidation::SharedSync`]: the IOMMU's time for each invalidation command of a
    /// batch after the first (0 elsewhere).
    pub command_ns: u64,
    /// With [`Invalidation::SharedSync`]: the CPU's time to build and write each command of an
    /// unmap after the first (0 elsewhere).
    pub command_write_ns: u64,
    /// With [`Invalidation::SharedSync`]: how an unmap of several pages is invalidated (one
    /// range command elsewhere).
    pub page_commands: PageCommands,
}

impl IommuHw {
    /// The shared-sync queue's command costs (zero where the queue is another kind).
    pub fn sync_costs(&self) -> SyncCosts {
        SyncCosts {
            command_ns: self.command_ns,
            command_write_ns: self.command_write_ns,
            pages: self.page_commands,
        }
    }

    /// Read the section under `prefix`, each value range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<IommuHw> {
        let f = |name: &str| format!("{prefix}.{name}");
        let replacement = r.choice(&f("iotlb_replacement"), &Replacement::NAMES)?;
        let hw = IommuHw {
            levels: LEVELS.read(r, &f("levels"))?,
            max_page_bytes: MAX_PAGE.read(r, &f("max_page_bytes"))?,
            iotlb_entries: ENTRIES.read(r, &f("iotlb_entries"))?,
            iotlb_ways: ENTRIES.read(r, &f("iotlb_ways"))?,
            iotlb_replacement: Replacement::parse(&replacement).unwrap_or(Replacement::Lru),
            walk_cache_entries: CACHE_ENTRIES.read(r, &f("walk_cache_entries"))?,
            walkers: WALKERS.read(r, &f("walkers"))?,
            walk_step_ns: STEP_NS.read(r, &f("walk_step_ns"))?,
            walk_coherent: r.choice(&f("walk_coherent"), &["on", "off"])? == "on",
            invalidation: match r
                .choice(&f("invalidation"), &["register", "queued", "shared-sync"])?
                .as_str()
            {
                "register" => Invalidation::Register,
                "queued" => Invalidation::Queued,
                _ => Invalidation::SharedSync,
            },
            invalidation_submit_ns: STEP_NS.read(r, &f("invalidation_submit_ns"))?,
            command_ns: 0,
            command_write_ns: 0,
            page_commands: PageCommands::RANGE,
        };
        let hw = if hw.invalidation == Invalidation::SharedSync {
            let range = r.choice(&f("range_invalidation"), &["on", "off"])? == "on";
            IommuHw {
                command_ns: STEP_NS.read(r, &f("command_ns"))?,
                command_write_ns: STEP_NS.read(r, &f("command_write_ns"))?,
                // Read whether or not the range commands make it moot: a draw may turn them off.
                page_commands: PageCommands {
                    range,
                    max_page_commands: PAGE_COMMANDS.read(r, &f("max_page_commands"))?,
                },
                ..hw
            }
        } else {
            hw
        };
        // Draws take powers of two for both, which always leave a power-of-two number of sets.
        r.admit(&f("iotlb_entries"), Admits::Pow2);
        r.admit(&f("iotlb_ways"), Admits::Pow2);
        let sets = hw.iotlb_entries / hw.iotlb_ways.max(1);
        if !hw.iotlb_entries.is_multiple_of(hw.iotlb_ways) || !sets.is_power_of_two() {
            let v = toml::Value::Integer(hw.iotlb_ways as i64);
            let valid = format!(
                "a divisor of iotlb_entries ({}) that leaves a power-of-two number of sets",
                hw.iotlb_entries
            );
            return Err(r.invalid(&f("iotlb_ways"), &v, &valid));
        }
        if leaf_level(hw.max_page_bytes) > hw.levels as u32 {
            let v = toml::Value::Integer(hw.max_page_bytes as i64);
            let valid = format!("a page a {}-level table can map", hw.levels);
            return Err(r.invalid(&f("max_page_bytes"), &v, &valid));
        }
        Ok(hw)
    }

    /// The bytes one IOTLB's entries map at `page_bytes`: its reach.
    pub fn reach_bytes(&self, page_bytes: u64) -> u64 {
        self.iotlb_entries.saturating_mul(page_bytes)
    }
}

/// The table level whose entries map `page_bytes` (1 for 4 KiB, 2 for 2 MiB, 3 for 1 GiB).
pub fn leaf_level(page_bytes: u64) -> u32 {
    (page_bytes.trailing_zeros().saturating_sub(12)) / 9 + 1
}

/// What the translations of a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TranslationStats {
    /// Requests translated.
    pub lookups: u64,
    /// Lookups that missed the IOTLB (each starts a walk).
    pub misses: u64,
    /// Table lines read by walks.
    pub walk_reads: u64,
    /// Lookups that hit an entry whose walk was still in flight.
    pub hits_under_walk: u64,
    /// Time walkers were busy, ps.
    pub walker_busy_ps: u128,
}

/// The translation state of one device's domain: caches, walkers and walks in flight.
#[derive(Clone, Debug)]
pub struct Translator {
    page_shift: u32,
    leaf: u32,
    levels: u32,
    step_ps: u64,
    iotlb: Iotlb,
    /// The paging-structure cache of level `leaf + 1 + i` at index `i`.
    walk_caches: Vec<Iotlb>,
    /// When each walker is free next, ps.
    walkers: Vec<u64>,
    /// Entries that walks fill, with when: `(level, key, at)`, where level [`LEAF_ENTRY`] is
    /// an IOTLB entry keyed by page and the others paging-structure cache entries.
    in_flight: VecDeque<(u32, u64, u64)>,
    /// The latest fill time of each entry in `in_flight`.
    fills: FxHashMap<(u32, u64), u64>,
    stats: TranslationStats,
}

impl Translator {
    /// A cold translator for mappings of `page_bytes` pages, or an error naming `page_bytes`
    /// and the sizes this IOMMU can map.
    pub fn new(hw: &IommuHw, page_bytes: u64) -> Result<Translator> {
        if !PAGE_SIZES.contains(&page_bytes) || page_bytes > hw.max_page_bytes {
            let valid: Vec<String> = PAGE_SIZES
                .iter()
                .filter(|&&p| p <= hw.max_page_bytes)
                .map(u64::to_string)
                .collect();
            return Err(invalid_arg(
                "page_bytes",
                page_bytes,
                format!("{} (the pages this IOMMU maps)", valid.join(", ")),
            ));
        }
        let leaf = leaf_level(page_bytes);
        let levels = hw.levels as u32;
        let cache = hw.walk_cache_entries as usize;
        Ok(Translator {
            page_shift: page_bytes.trailing_zeros(),
            leaf,
            levels,
            step_ps: hw.walk_step_ns * 1000,
            iotlb: Iotlb::new(
                hw.iotlb_entries as usize,
                hw.iotlb_ways as usize,
                hw.iotlb_replacement,
            ),
            walk_caches: (leaf + 1..=levels)
                .filter(|_| cache > 0)
                .map(|_| Iotlb::new(cache, cache, Replacement::Lru))
                .collect(),
            walkers: vec![0; hw.walkers as usize],
            in_flight: VecDeque::new(),
            fills: FxHashMap::default(),
            stats: TranslationStats::default(),
        })
    }

    /// The level of the leaf entries (1 for 4 KiB pages).
    pub fn leaf_level(&self) -> u32 {
        self.leaf
    }

    /// Translate a request to `addr` that reaches the IOMMU at `arrival` (ps); `read(start,
    /// level)` times one table line of `level` read from `start` and returns when it is in the
    /// walker. Returns when the request may go on to memory.
    pub fn translate(
        &mut self,
        addr: u64,
        arrival: u64,
        mut read: impl FnMut(u64, u32) -> u64,
    ) -> u64 {
        self.stats.lookups += 1;
        let page = addr >> self.page_shift;
        self.expire(arrival);
        if self.iotlb.access(page) {
            // A hit on an entry still being walked waits for the walk.
            return match self.filled_at(LEAF_ENTRY, page) {
                Some(at) if at > arrival => {
                    self.stats.hits_under_walk += 1;
                    at
                }
                _ => arrival,
            };
        }
        self.stats.misses += 1;
        let (top, ready) = self.walk_start(addr);
        let (w, free) = self
            .walkers
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, t)| (t, i))
            .unwrap_or((0, 0));
        let start = arrival.max(free);
        // The walk reads below a cached entry only once that entry is filled.
        let mut t = start.max(ready);
        for level in (self.leaf..=top).rev() {
            t = read(t + self.step_ps, level);
            self.stats.walk_reads += 1;
            if level > self.leaf {
                // The entry read here points to the next table: its cache holds it from now.
                let key = addr >> (12 + 9 * (level - 1));
                let i = (level - self.leaf - 1) as usize;
                if let Some(cache) = self.walk_caches.get_mut(i) {
                    cache.access(key);
                    self.filling(level, key, t);
                }
            }
        }
        if let Some(slot) = self.walkers.get_mut(w) {
            *slot = t;
        }
        self.stats.walker_busy_ps += u128::from(t - start);
        self.filling(LEAF_ENTRY, page, t);
        t
    }

    /// A walk fills entry `key` of `level` at `at`.
    fn filling(&mut self, level: u32, key: u64, at: u64) {
        self.fills.insert((level, key), at);
        self.in_flight.push_back((level, key, at));
    }

    /// Forget fills done by `arrival` (they cannot hold up this request or, as requests
    /// arrive about in order, a later one), oldest first, and the oldest beyond
    /// [`IN_FLIGHT_KEPT`].
    fn expire(&mut self, arrival: u64) {
        while let Some(&(level, key, at)) = self.in_flight.front() {
            if at > arrival && self.in_flight.len() <= IN_FLIGHT_KEPT {
                break;
            }
            self.in_flight.pop_front();
            if self.fills.get(&(level, key)) == Some(&at) {
                self.fills.remove(&(level, key));
            }
        }
    }

    /// When the entry `key` of `level` (or, for [`LEAF_ENTRY`], the IOTLB's entry of page
    /// `key`) is filled by a walk still in flight, if one is.
    fn filled_at(&self, level: u32, key: u64) -> Option<u64> {
        self.fills.get(&(level, key)).copied()
    }

    /// Where a walk of `addr` starts: the level one below the lowest paging-structure cache
    /// that holds the address's entry (that entry is used, and refreshed), or the top; and when
    /// that entry is filled, if a walk in flight is still reading it.
    fn walk_start(&mut self, addr: u64) -> (u32, u64) {
        for (i, cache) in self.walk_caches.iter_mut().enumerate() {
            let level = self.leaf + 1 + i as u32;
            // A level-`level` entry covers 9 bits per level below it.
            let key = addr >> (12 + 9 * (level - 1));
            if cache.contains(key) {
                cache.access(key);
                let ready = self.filled_at(level, key).unwrap_or(0);
                return (level - 1, ready);
            }
        }
        (self.levels, 0)
    }

    /// Forget the timing of earlier walks (walkers free, none in flight) and the counters,
    /// keeping the caches' contents: what a warm-up leaves.
    pub fn reset_timing(&mut self) {
        self.walkers.fill(0);
        self.in_flight.clear();
        self.fills.clear();
        self.stats = TranslationStats::default();
    }

    /// A copy with the caches' contents and none of the timing (as a clone then
    /// [`Translator::reset_timing`] gives), without copying the walks in flight.
    pub fn warm_copy(&self) -> Translator {
        Translator {
            page_shift: self.page_shift,
            leaf: self.leaf,
            levels: self.levels,
            step_ps: self.step_ps,
            iotlb: self.iotlb.clone(),
            walk_caches: self.walk_caches.clone(),
            walkers: vec![0; self.walkers.len()],
            in_flight: VecDeque::new(),
            fills: FxHashMap::default(),
            stats: TranslationStats::default(),
        }
    }

    /// The counters since the last reset.
    pub fn stats(&self) -> TranslationStats {
        self.stats
    }

    /// Walks that may be in flight at once.
    pub fn walkers(&self) -> usize {
        self.walkers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn hw() -> IommuHw {
        IommuHw {
            levels: 4,
            max_page_bytes: 1 << 30,
            iotlb_entries: 64,
            iotlb_ways: 8,
            iotlb_replacement: Replacement::Lru,
            walk_cache_entries: 16,
            walkers: 2,
            walk_step_ns: 10,
            walk_coherent: true,
            invalidation: Invalidation::Queued,
            invalidation_submit_ns: 40,
            command_ns: 0,
            command_write_ns: 0,
            page_commands: PageCommands::RANGE,
        }
    }

    /// Every table read takes 100 ns.
    fn read(start: u64, _level: u32) -> u64 {
        start + 100_000
    }

    #[test]
    fn leaf_levels() {
        assert_eq!(PAGE_SIZES.map(leaf_level), [1, 2, 3]);
    }

    #[test]
    fn a_cold_walk_reads_every_level_and_caches_skip_the_upper_ones() {
        let mut t = Translator::new(&hw(), 4096).unwrap();
        // Cold: 4 levels of 10 + 100 ns.
        assert_eq!(t.translate(0, 0, read), 440_000);
        // Same 4 KiB page: a hit.
        assert_eq!(t.translate(64, 500_000, read), 500_000);
        // Next page, same 2 MiB region: the PDE cache holds its table; one read.
        assert_eq!(t.translate(4096, 500_000, read), 610_000);
        assert_eq!(t.stats().walk_reads, 5);
        // 2 MiB pages: three levels cold.
        let mut t = Translator::new(&hw(), 1 << 21).unwrap();
        assert_eq!(t.translate(0, 0, read), 330_000);
    }

    #[test]
    fn walkers_bound_the_misses_in_flight_and_hits_wait_for_their_walk() {
        let mut t = Translator::new(&hw(), 4096).unwrap();
        t.translate(0, 0, read); // warms the upper levels
        t.reset_timing();
        // Three misses at once on two walkers: the third waits for the first walker.
        let ends: Vec<u64> = (1..=3).map(|p| t.translate(p << 12, 0, read)).collect();
        assert_eq!(ends, [110_000, 110_000, 220_000]);
        // A request to the page still being walked waits for the walk.
        assert_eq!(t.translate(3 << 12, 150_000, read), 220_000);
        assert_eq!(t.stats().hits_under_walk, 1);
        assert_eq!(t.stats().walker_busy_ps, 330_000);
    }

    #[test]
    fn a_hit_waits_for_a_walk_queued_behind_busy_walkers() {
        let one = IommuHw {
            walkers: 1,
            walk_cache_entries: 0,
            levels: 1,
            max_page_bytes: 4096,
            ..hw()
        };
        let mut t = Translator::new(&one, 4096).unwrap();
        assert_eq!(t.translate(1 << 12, 0, read), 110_000);
        assert_eq!(t.translate(2 << 12, 0, read), 220_000);
        // A request for the first page that reached the IOMMU before its walk ended waits.
        assert_eq!(t.translate(1 << 12, 50_000, read), 110_000);
        assert_eq!(t.stats().hits_under_walk, 1);
    }

    #[test]
    fn a_walk_uses_a_cached_entry_only_once_it_is_read() {
        let mut t = Translator::new(&hw(), 4096).unwrap();
        // Cold: reads levels 4, 3, 2 (the PDE, done at 330 ns) and 1.
        assert_eq!(t.translate(0, 0, read), 440_000);
        // The next page 1 ns later hits the PDE cache, but the PDE is read only at 330 ns.
        assert_eq!(t.translate(4096, 1_000, read), 440_000);
    }

    #[test]
    fn unsupported_pages_name_the_field() {
        let small = IommuHw {
            max_page_bytes: 1 << 21,
            ..hw()
        };
        let e = Translator::new(&small, 1 << 30).unwrap_err().to_string();
        assert!(
            e.contains("page_bytes") && e.contains("4096, 2097152"),
            "{e}"
        );
    }
}
