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

/// No way: the end of a recency list.
const NONE: u32 = u32::MAX;

/// A byte of `page`'s hash (Fibonacci hashing's multiplier, top byte): equal pages have equal
/// tags, and different pages rarely do.
#[inline(always)]
const fn tag(page: u64) -> u8 {
    (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// An empty way's tag.
const EMPTY_TAG: u8 = tag(EMPTY);

/// Ways whose tags a lookup compares at once: on x86_64 one 16-byte vector compare and the
/// mask of its byte lanes.
const GROUP: usize = 16;

/// The lanes of `group` equal to `want`, as bits.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn matches(group: &[u8; GROUP], want: u8) -> u32 {
    use core::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    // SAFETY: SSE2 is part of the x86_64 baseline, and the unaligned load reads the 16 bytes
    // of `group`, which the reference keeps valid.
    unsafe {
        let lanes = _mm_loadu_si128(group.as_ptr().cast());
        let equal = _mm_cmpeq_epi8(lanes, _mm_set1_epi8(want as i8));
        _mm_movemask_epi8(equal) as u32
    }
}

/// The lanes of `group` equal to `want`, as bits.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn matches(group: &[u8; GROUP], want: u8) -> u32 {
    matches_bytewise(group, want)
}

/// [`matches`] a byte at a time: the lookup's other targets, and the reference it is tested
/// against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn matches_bytewise(group: &[u8; GROUP], want: u8) -> u32 {
    group
        .iter()
        .enumerate()
        .fold(0, |m, (i, &t)| m | u32::from(t == want) << i)
}

/// A set-associative translation cache.
///
/// LRU and FIFO keep each set's ways in a recency list, oldest first, with emptied ways moved
/// to the oldest end: the victim is the list's head, found at once however many ways a set has
/// (a 32-way fully associative IOTLB is scanned only to look a page up). Hits move a way to
/// the newest end under LRU, not under FIFO. Round-robin takes the lowest empty way, else the
/// set's pointer.
#[derive(Clone, Debug)]
pub struct Iotlb {
    sets: usize,
    ways: usize,
    replacement: Replacement,
    /// The cached page of each way (`EMPTY` when free), set by set.
    pages: Vec<u64>,
    /// A byte of each way's page hash (`tag`), in groups of [`GROUP`], `tag_groups` groups a
    /// set (lanes past the set's ways hold `EMPTY_TAG` and are never taken): a lookup compares
    /// a group of ways at once and reads a page only where its byte matches.
    tags: Vec<[u8; GROUP]>,
    tag_groups: usize,
    /// Each way's `[older, newer]` neighbours in its set's recency list (ways within the set),
    /// set by set: one slice of a set's links and its ends serve a whole update.
    links: Vec<[u32; 2]>,
    /// Each set's `[oldest, newest]` way.
    ends: Vec<[u32; 2]>,
    next_victim: Vec<usize>,
    /// The index in `pages` of the way the last access hit or filled: an unmap asks about the
    /// page its I/O just used, found there without a search.
    last_way: usize,
    stats: IotlbStats,
}

impl Iotlb {
    /// A cache of `entries` entries in sets of `ways` (both at least 1; `entries` is rounded
    /// down to a multiple of `ways`, and the number of sets to a power of two).
    pub fn new(entries: usize, ways: usize, replacement: Replacement) -> Iotlb {
        let ways = ways.clamp(1, entries.max(1)).min(NONE as usize - 1);
        let sets_wanted = (entries.max(1) / ways).max(1);
        let sets = 1usize << (usize::BITS - 1 - sets_wanted.leading_zeros());
        let way = |i: usize| i as u32;
        let tag_groups = ways.div_ceil(GROUP);
        Iotlb {
            sets,
            ways,
            replacement,
            pages: vec![EMPTY; sets * ways],
            tags: vec![[EMPTY_TAG; GROUP]; sets * tag_groups],
            tag_groups,
            // Initially way 0 is the oldest of each set, way ways-1 the newest.
            links: (0..sets * ways)
                .map(|i| {
                    let w = i % ways;
                    let older = if w == 0 { NONE } else { way(w - 1) };
                    let newer = if w == ways - 1 { NONE } else { way(w + 1) };
                    [older, newer]
                })
                .collect(),
            ends: vec![[0, way(ways - 1)]; sets],
            next_victim: vec![0; sets],
            last_way: 0,
            stats: IotlbStats::default(),
        }
    }

    /// Entries the cache holds.
    pub fn capacity(&self) -> usize {
        self.sets * self.ways
    }

    /// The set of `page`.
    #[inline]
    fn set_of(&self, page: u64) -> usize {
        (page as usize) & (self.sets - 1)
    }

    /// The way of `set` holding `page`, if any: the ways whose tag byte matches, a group at a
    /// time; every matching way's page is compared.
    #[inline(always)]
    fn find(&self, set: usize, page: u64) -> Option<usize> {
        let base = set * self.ways;
        let tags = &self.tags[set * self.tag_groups..(set + 1) * self.tag_groups];
        find_in(tags, &self.pages[base..base + self.ways], page)
    }

    /// Put `page` in way `w` of `set`, with its tag.
    #[inline(always)]
    fn store(&mut self, set: usize, w: usize, page: u64) {
        self.pages[set * self.ways + w] = page;
        self.tags[set * self.tag_groups + w / GROUP][w % GROUP] = tag(page);
    }

    /// The recency links of `set`'s ways and the set's ends, for one update.
    #[inline(always)]
    fn recency(&mut self, set: usize) -> (&mut [[u32; 2]], &mut [u32; 2]) {
        let base = set * self.ways;
        (&mut self.links[base..base + self.ways], &mut self.ends[set])
    }

    /// Look up `page`; on a miss, fill it (the walk's result). Returns whether it hit.
    pub fn access(&mut self, page: u64) -> bool {
        let set = self.set_of(page);
        let (ways, groups) = (self.ways, self.tag_groups);
        let base = set * ways;
        // The set's ways, tags and recency list, each cut out once for the whole update.
        let pages = &mut self.pages[base..base + ways];
        let tags = &mut self.tags[set * groups..(set + 1) * groups];
        let links = &mut self.links[base..base + ways];
        let ends = &mut self.ends[set];
        if let Some(w) = find_in(tags, pages, page) {
            if self.replacement == Replacement::Lru && ends[NEWEST] != w as u32 {
                unlink(links, ends, w);
                push_at::<NEWEST>(links, ends, w);
            }
            self.stats.hits += 1;
            self.last_way = base + w;
            return true;
        }
        self.stats.misses += 1;
        let victim = match self.replacement {
            Replacement::Lru | Replacement::Fifo => {
                let w = ends[OLDEST] as usize;
                if ends[NEWEST] != w as u32 {
                    unlink(links, ends, w);
                    push_at::<NEWEST>(links, ends, w);
                }
                w
            }
            Replacement::RoundRobin => match pages.iter().position(|&p| p == EMPTY) {
                Some(w) => w,
                None => {
                    let v = self.next_victim[set];
                    self.next_victim[set] = (v + 1) % ways;
                    v
                }
            },
        };
        pages[victim] = page;
        tags[victim / GROUP][victim % GROUP] = tag(page);
        self.last_way = base + victim;
        false
    }

    /// Drop `page` if cached (a page-selective invalidation). Returns whether it was cached.
    pub fn invalidate(&mut self, page: u64) -> bool {
        let set = self.set_of(page);
        match self.find(set, page) {
            Some(w) => {
                self.store(set, w, EMPTY);
                let (links, ends) = self.recency(set);
                if ends[OLDEST] != w as u32 {
                    unlink(links, ends, w);
                    push_at::<OLDEST>(links, ends, w);
                }
                self.stats.invalidated += 1;
                true
            }
            None => false,
        }
    }

    /// Whether `page` is cached, without touching replacement state (for exposure checks).
    pub fn contains(&self, page: u64) -> bool {
        // A way holds one page: if the last access's way holds `page`, it is cached.
        self.pages[self.last_way] == page || self.find(self.set_of(page), page).is_some()
    }

    /// Drop every entry (a global or domain-selective invalidation).
    pub fn flush(&mut self) {
        let dropped = self.pages.iter().filter(|&&p| p != EMPTY).count() as u64;
        self.pages.fill(EMPTY);
        self.tags.fill([EMPTY_TAG; GROUP]);
        self.stats.invalidated += dropped;
        self.stats.flushes += 1;
    }

    /// The counters so far.
    pub fn stats(&self) -> IotlbStats {
        self.stats
    }
}

/// The way holding `page` among a set's `pages` (with its `tags`), if any: the ways whose tag
/// byte matches, a group at a time; every matching way's page is compared (lanes past the
/// set's ways match nothing).
#[inline(always)]
fn find_in(tags: &[[u8; GROUP]], pages: &[u64], page: u64) -> Option<usize> {
    let want = tag(page);
    for (i, group) in tags.iter().enumerate() {
        let mut flagged = matches(group, want);
        while flagged != 0 {
            let w = i * GROUP + flagged.trailing_zeros() as usize;
            if pages.get(w) == Some(&page) {
                return Some(w);
            }
            flagged &= flagged - 1;
        }
    }
    None
}

/// Index of the older neighbour in a way's links, and of the oldest way in a set's ends.
const OLDER: usize = 0;
const OLDEST: usize = 0;
/// Index of the newer neighbour, and of the newest way.
const NEWER: usize = 1;
const NEWEST: usize = 1;

/// Take way `w` out of its set's recency list (`links`, `ends`: the set's, from
/// [`Iotlb::recency`]).
#[inline(always)]
fn unlink(links: &mut [[u32; 2]], ends: &mut [u32; 2], w: usize) {
    let [o, n] = links[w];
    match o {
        NONE => ends[OLDEST] = n,
        o => links[o as usize][NEWER] = n,
    }
    match n {
        NONE => ends[NEWEST] = o,
        n => links[n as usize][OLDER] = o,
    }
}

/// Put way `w` at end `END` of its set's list ([`NEWEST`], or [`OLDEST`] for an emptied way,
/// the next victim): its neighbour toward `END` is none, the other is the old end.
#[inline(always)]
fn push_at<const END: usize>(links: &mut [[u32; 2]], ends: &mut [u32; 2], w: usize) {
    let old_end = ends[END];
    links[w][END] = NONE;
    links[w][1 - END] = old_end;
    match old_end {
        NONE => ends[1 - END] = w as u32,
        e => links[e as usize][END] = w as u32,
    }
    ends[END] = w as u32;
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

    /// The plain model the cache must agree with: every way scanned, a stamp per way.
    struct Scan {
        ways: usize,
        sets: usize,
        lru: bool,
        pages: Vec<u64>,
        stamps: Vec<u64>,
        clock: u64,
    }

    impl Scan {
        fn access(&mut self, page: u64) -> bool {
            self.clock += 1;
            let base = (page as usize & (self.sets - 1)) * self.ways;
            let set = base..base + self.ways;
            if let Some(i) = self.pages[set.clone()].iter().position(|&p| p == page) {
                if self.lru {
                    self.stamps[base + i] = self.clock;
                }
                return true;
            }
            let victim = match self.pages[set.clone()].iter().position(|&p| p == EMPTY) {
                Some(i) => i,
                None => (0..self.ways)
                    .min_by_key(|&i| self.stamps[base + i])
                    .unwrap(),
            };
            self.pages[base + victim] = page;
            self.stamps[base + victim] = self.clock;
            false
        }

        fn invalidate(&mut self, page: u64) -> bool {
            let base = (page as usize & (self.sets - 1)) * self.ways;
            match self.pages[base..base + self.ways]
                .iter()
                .position(|&p| p == page)
            {
                Some(i) => {
                    self.pages[base + i] = EMPTY;
                    true
                }
                None => false,
            }
        }
    }

    #[test]
    fn a_group_matches_the_lanes_a_byte_loop_finds() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        for _ in 0..10_000 {
            // Few distinct bytes, so that most groups hold several matches.
            let group: [u8; GROUP] = std::array::from_fn(|_| rng.random_range(0..4u8) * 85);
            let want = rng.random_range(0..4u8) * 85;
            assert_eq!(matches(&group, want), matches_bytewise(&group, want));
        }
        assert_eq!(matches(&[EMPTY_TAG; GROUP], EMPTY_TAG), 0xFFFF);
    }

    #[test]
    fn recency_lists_choose_the_victims_a_full_scan_would() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        for (entries, ways) in [(32, 32), (64, 4), (128, 8), (12, 3), (1, 1), (40, 40)] {
            for replacement in [Replacement::Lru, Replacement::Fifo] {
                let mut t = Iotlb::new(entries, ways, replacement);
                let mut m = Scan {
                    ways: t.ways,
                    sets: t.sets,
                    lru: replacement == Replacement::Lru,
                    pages: vec![EMPTY; t.capacity()],
                    stamps: vec![0; t.capacity()],
                    clock: 0,
                };
                let span = 3 * entries as u64;
                for step in 0..20_000 {
                    let page = rng.random_range(0..span);
                    match rng.random_range(0..100) {
                        0..=79 => assert_eq!(t.access(page), m.access(page), "step {step}"),
                        80..=98 => assert_eq!(t.invalidate(page), m.invalidate(page)),
                        _ => {
                            t.flush();
                            m.pages.fill(EMPTY);
                        }
                    }
                    assert_eq!(t.contains(page), m.pages.contains(&page));
                    let other = rng.random_range(0..span);
                    assert_eq!(t.contains(other), m.pages.contains(&other));
                }
            }
        }
    }
}
