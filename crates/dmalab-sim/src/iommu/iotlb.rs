//! A set-associative translation cache: the IOTLB of a page-table IOMMU (Intel VT-d, AMD-Vi)
//! or the TCE cache of a POWER host bridge. Keys are I/O page numbers; a set is chosen by the
//! low bits of the page number, and a full set evicts by the configured replacement.
//!
//! Seed 003 asks that "the allocation policy ... match the IO TLB replacement implemented in the
//! IOMMU HW": an allocator that hands out the same few IOVAs keeps them hot, one that walks
//! through the space misses on every I/O. This cache lets a run count exactly that.

use serde::Serialize;

/// How a full set chooses its victim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Replacement {
    /// Least recently used.
    #[default]
    Lru,
    /// First in, first out (insertion order; hits do not refresh).
    Fifo,
    /// Round-robin pointer per set, a cheap stand-in for hardware pseudo-random replacement
    /// that keeps runs deterministic.
    RoundRobin,
}

impl Replacement {
    /// The names used in platform files.
    pub const NAMES: [&'static str; 3] = ["lru", "fifo", "round-robin"];

    /// Parse a name from a platform file.
    pub fn parse(name: &str) -> Option<Replacement> {
        match name {
            "lru" => Some(Replacement::Lru),
            "fifo" => Some(Replacement::Fifo),
            "round-robin" => Some(Replacement::RoundRobin),
            _ => None,
        }
    }
}

/// Hits, misses and invalidations of a translation cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IotlbStats {
    /// Lookups that found their page.
    pub hits: u64,
    /// Lookups that had to walk the table.
    pub misses: u64,
    /// Entries dropped by page invalidations.
    pub invalidated: u64,
    /// Whole-cache flushes.
    pub flushes: u64,
}

impl IotlbStats {
    /// Hits over lookups (1.0 with no lookups).
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            1.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// A page number no entry can hold: marks an empty way.
const EMPTY: u64 = u64::MAX;

/// A set-associative translation cache.
#[derive(Clone, Debug)]
pub struct Iotlb {
    sets: usize,
    ways: usize,
    replacement: Replacement,
    /// The cached page of each way (`EMPTY` when free), set by set.
    pages: Vec<u64>,
    /// When each way was filled (FIFO) or last used (LRU).
    stamps: Vec<u64>,
    next_victim: Vec<usize>,
    clock: u64,
    stats: IotlbStats,
}

impl Iotlb {
    /// A cache of `entries` entries in sets of `ways` (both at least 1; `entries` is rounded
    /// down to a multiple of `ways`, and the number of sets to a power of two).
    pub fn new(entries: usize, ways: usize, replacement: Replacement) -> Iotlb {
        let ways = ways.clamp(1, entries.max(1));
        let sets_wanted = (entries.max(1) / ways).max(1);
        let sets = 1usize << (usize::BITS - 1 - sets_wanted.leading_zeros());
        Iotlb {
            sets,
            ways,
            replacement,
            pages: vec![EMPTY; sets * ways],
            stamps: vec![0; sets * ways],
            next_victim: vec![0; sets],
            clock: 0,
            stats: IotlbStats::default(),
        }
    }

    /// Entries the cache holds.
    pub fn capacity(&self) -> usize {
        self.sets * self.ways
    }

    fn set_of(&self, page: u64) -> std::ops::Range<usize> {
        let set = (page as usize) & (self.sets - 1);
        set * self.ways..(set + 1) * self.ways
    }

    /// Look up `page`; on a miss, fill it (the walk's result). Returns whether it hit.
    pub fn access(&mut self, page: u64) -> bool {
        self.clock += 1;
        let range = self.set_of(page);
        let base = range.start;
        // One pass over the set: the hit, else the first empty way and the oldest stamp.
        let (mut empty, mut oldest, mut oldest_stamp) = (None, 0, u64::MAX);
        for (i, (&p, &stamp)) in self.pages[range.clone()]
            .iter()
            .zip(&self.stamps[range])
            .enumerate()
        {
            if p == page {
                if self.replacement == Replacement::Lru {
                    self.stamps[base + i] = self.clock;
                }
                self.stats.hits += 1;
                return true;
            }
            if p == EMPTY {
                empty.get_or_insert(i);
            } else if stamp < oldest_stamp {
                (oldest, oldest_stamp) = (i, stamp);
            }
        }
        self.stats.misses += 1;
        let victim = match (empty, self.replacement) {
            (Some(i), _) => i,
            (None, Replacement::Lru | Replacement::Fifo) => oldest,
            (None, Replacement::RoundRobin) => {
                let set = base / self.ways;
                let v = self.next_victim[set];
                self.next_victim[set] = (v + 1) % self.ways;
                v
            }
        };
        self.pages[base + victim] = page;
        self.stamps[base + victim] = self.clock;
        false
    }

    /// Drop `page` if cached (a page-selective invalidation). Returns whether it was cached.
    pub fn invalidate(&mut self, page: u64) -> bool {
        let range = self.set_of(page);
        match self.pages[range.clone()].iter().position(|&p| p == page) {
            Some(i) => {
                self.pages[range.start + i] = EMPTY;
                self.stats.invalidated += 1;
                true
            }
            None => false,
        }
    }

    /// Whether `page` is cached, without touching replacement state (for exposure checks).
    pub fn contains(&self, page: u64) -> bool {
        self.pages[self.set_of(page)].contains(&page)
    }

    /// Drop every entry (a global or domain-selective invalidation).
    pub fn flush(&mut self) {
        let dropped = self.pages.iter().filter(|&&p| p != EMPTY).count() as u64;
        self.pages.fill(EMPTY);
        self.stats.invalidated += dropped;
        self.stats.flushes += 1;
    }

    /// The counters so far.
    pub fn stats(&self) -> IotlbStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_keeps_the_recently_used_page() {
        let mut t = Iotlb::new(2, 2, Replacement::Lru);
        assert!(!t.access(1));
        assert!(!t.access(2));
        assert!(t.access(1));
        assert!(!t.access(3)); // evicts 2, the least recently used
        assert!(t.access(1));
        assert!(!t.access(2));
        assert_eq!(t.stats().hits, 2);
    }

    #[test]
    fn fifo_ignores_hits() {
        let mut t = Iotlb::new(2, 2, Replacement::Fifo);
        t.access(1);
        t.access(2);
        t.access(1);
        t.access(3); // evicts 1, the first in
        assert!(!t.contains(1) && t.contains(2) && t.contains(3));
    }

    #[test]
    fn sets_split_by_low_page_bits_and_invalidation_drops_entries() {
        let mut t = Iotlb::new(8, 2, Replacement::RoundRobin);
        assert_eq!(t.capacity(), 8);
        for p in [0, 4, 8] {
            t.access(p); // all in set 0: the third evicts the first
        }
        assert!(!t.contains(0) && t.contains(4) && t.contains(8));
        assert!(t.invalidate(4));
        assert!(!t.invalidate(4));
        t.access(1);
        t.flush();
        assert!(!t.contains(8) && !t.contains(1));
        assert_eq!(t.stats().flushes, 1);
    }
}
