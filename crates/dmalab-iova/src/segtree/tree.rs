//! The backing structure of `segtree`: a segment tree of free-run summaries over a bit plane.
//!
//! Leaves are the 64-page words of the `used` plane; each internal node stores, for its span,
//! the free run touching its low end (`pre`), the one touching its high end (`suf`) and the
//! longest inside (`best`). A parent's summary follows from its children's (the classic
//! maximal-subarray combination), so an update of `k` words costs `O(k + log n)` node writes,
//! and a search can skip any subtree whose runs are all too short. The search walks right to
//! left, carrying how far the free run continues past the node's right edge, so runs that cross
//! node boundaries are found too: it returns the highest legal placement below the limit, or
//! proves there is none. Spans beyond the domain's last page read as free, and every search is
//! clipped to the limit, so they are never handed out.
//!
//! Nodes store deficits (span length minus each value) so that a never-written, all-free
//! subtree reads as zero and costs no memory.
//!
//! A run long enough is not always one that fits: a size-aligned request of 40 pages needs 40
//! free pages starting at a multiple of 64, and in a fragmented space most subtrees with a
//! 40-page run have none there. Pruning by run length alone then let such searches visit much
//! of the tree: a test below builds a space where it visits 1,662 nodes for one request, and on
//! a long fragmented run the searches came to dominate (`docs/design/segtree.md`). So each node
//! also stores, for every alignment `a` of 1 to 64 pages, the longest free run (up to `a`) that
//! starts at a multiple of `a` inside it. Such blocks never cross a word, so a parent's value is
//! the larger of its children's, and a request of at most `a` pages aligned to `a` (and not
//! split by a boundary smaller than `a`) prunes every subtree that cannot hold it: the search
//! visits O(log n) nodes, plus those along the limit. Tree coordinates are page offsets shifted
//! by the domain's first frame modulo 64 (the pages before offset 0 are kept used), so that a
//! word starts at a frame that is a multiple of 64 and alignment inside words is alignment of
//! frames.
//!
//! Where space is scarce the same summaries also choose the placement, in the manner of a buddy
//! allocator: a partly used block before a free block with a partly used buddy, before any
//! other (see [`Tier`]), which packs a crowded zone fuller, with fewer refusals, than the highest
//! start alone or first fit (`docs/design/segtree.md`). This is Knowlton's buddy system ("A
//! Fast Storage Allocator", CACM 1965) used as a placement preference. Each summary level
//! stops the refresh as soon as nothing changes, and words that are all free or all used skip
//! the per-class work.

use super::planes::{BitPlane, PagedArray, NODE_CHUNK};
use crate::placement::Fit;
use crate::types::WorkCounters;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Deficit {
    pre: u64,
    suf: u64,
    best: u64,
    /// Aligned-run summaries by placement tier (see [`Tier`]): byte `k` of `aligned[t]` is, for
    /// alignment `2^k`, the longest free run (capped at `2^k`) from a tier-`t` start. Tiers
    /// [`Tier::Partial`] and [`Tier::Buddy`] store the run itself, [`Tier::Any`] `2^k` less it,
    /// so that a never-written, all-free subtree reads as zero in each (no partial blocks, no
    /// used buddies, full runs).
    aligned: [u64; 3],
}

/// Alignment classes kept per node: 1, 2, 4, .. 64 pages.
const ALIGN_CLASSES: u32 = 7;

/// Where in a word a size-aligned request of `2^k` pages may go, best first. A placement in an
/// aligned block that is already partly used fills a hole that only requests of this size or
/// smaller can use; one in a free block whose buddy (the other half of the block twice its
/// size) is partly used splits no free block larger than the request; any other placement
/// splits a larger free block, which a later large request may have needed (buddy allocators
/// place for the same reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    /// A start whose `2^k` block is not entirely free.
    Partial = 0,
    /// A start whose `2^(k+1)` block is not entirely free (`k < 6`: the block lies in the word).
    Buddy = 1,
    /// Any start.
    Any = 2,
}

const TIERS: [Tier; 3] = [Tier::Partial, Tier::Buddy, Tier::Any];

/// Bit masks of the starts that are multiples of `2^k` within a word.
const ALIGNED_STARTS: [u64; ALIGN_CLASSES as usize] = [
    u64::MAX,
    0x5555_5555_5555_5555,
    0x1111_1111_1111_1111,
    0x0101_0101_0101_0101,
    0x0001_0001_0001_0001,
    0x0000_0001_0000_0001,
    0x0000_0000_0000_0001,
];

/// The free runs of one word, by powers of two.
struct WordRuns {
    /// Bit `s` of `runs[j]`: the `2^j` pages from `s` are free (and inside the word).
    runs: [u64; ALIGN_CLASSES as usize],
}

impl WordRuns {
    fn new(used: u64) -> Self {
        let mut runs = [0u64; ALIGN_CLASSES as usize];
        runs[0] = !used;
        for j in 1..ALIGN_CLASSES as usize {
            let h = 1u32 << (j - 1);
            runs[j] = runs[j - 1] & runs[j - 1].checked_shr(h).unwrap_or(0);
        }
        Self { runs }
    }

    /// Starts of entirely free blocks of `2^k` pages.
    fn free_blocks(&self, k: u32) -> u64 {
        self.runs[k as usize] & ALIGNED_STARTS[k as usize]
    }

    /// The starts (multiples of `2^k`) that tier `t` allows.
    fn tier_starts(&self, k: u32, t: Tier) -> u64 {
        let aligned = ALIGNED_STARTS[k as usize];
        match t {
            Tier::Partial => aligned & !self.free_blocks(k),
            Tier::Buddy if k + 1 < ALIGN_CLASSES => {
                let pairs = self.free_blocks(k + 1);
                aligned & !(pairs | pairs << (1u32 << k))
            }
            Tier::Buddy => 0,
            Tier::Any => aligned,
        }
    }

    /// Of `starts`, those with `n` (1 to 64) free pages from them.
    fn with_run(&self, mut starts: u64, n: u64) -> u64 {
        let mut len = 0u32;
        for j in (0..ALIGN_CLASSES).rev() {
            if n >> j & 1 == 1 {
                starts &= self.runs[j as usize].checked_shr(len).unwrap_or(0);
                len += 1 << j;
            }
        }
        starts
    }

    /// The longest free run, capped at `2^k`, from one of `starts` (multiples of `2^k`).
    fn longest(&self, mut starts: u64, k: u32) -> u64 {
        let a = 1u64 << k;
        let mut len = 0u64;
        if starts == 0 {
            return 0;
        }
        // Binary lifting: keep the starts whose run goes on for another 2^j pages.
        for j in (0..=k).rev() {
            let step = 1u64 << j;
            if len + step > a {
                continue;
            }
            let keep = starts & self.runs[j as usize].checked_shr(len as u32).unwrap_or(0);
            if keep != 0 {
                starts = keep;
                len += step;
            }
        }
        len
    }
}

/// The packed aligned-run summaries (see [`Deficit::aligned`]) of a word with used bits `used`
/// (bit `i` is the page at position `64 w + i`), whose blocks are put in tiers as if `seen`
/// were its used bits (the first word does not count the positions before the domain, so that
/// they draw no placements).
fn word_aligned(used: u64, seen: u64) -> [u64; 3] {
    // The two commonest words, a free one and a full one.
    if used == seen {
        if used == 0 {
            return [0; 3];
        }
        if used == u64::MAX {
            return [0, 0, FULL_WORD_DEFICITS];
        }
    }
    let r = WordRuns::new(used);
    let view = WordRuns::new(seen);
    let mut out = [0u64; 3];
    for k in 0..ALIGN_CLASSES {
        for t in TIERS {
            let run = r.longest(view.tier_starts(k, t), k);
            let v = if t == Tier::Any {
                (1u64 << k) - run
            } else {
                run
            };
            out[t as usize] |= v << (8 * k);
        }
    }
    out
}

/// [`Tier::Any`] deficits of a word with every page used: `2^k` in byte `k`.
const FULL_WORD_DEFICITS: u64 = 0x0040_2010_0804_0201;

/// The high bit of every byte.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Byte-wise: 0xff where `x >= y`, else 0, for bytes below 0x80 (all summary bytes are at most
/// 64). `x | 0x80` less `y` keeps a byte's high bit exactly when `x >= y`, and never borrows
/// from the next byte.
fn ge_mask(x: u64, y: u64) -> u64 {
    let keep = ((x | HIGH_BITS) - y) & HIGH_BITS;
    (keep >> 7) * 0xff
}

/// A parent's summaries from its children's: the larger run, byte by byte (the smaller
/// deficit for [`Tier::Any`]).
fn join_aligned(x: [u64; 3], y: [u64; 3]) -> [u64; 3] {
    let max = |a: u64, b: u64| {
        let m = ge_mask(a, b);
        (a & m) | (b & !m)
    };
    let min = |a: u64, b: u64| {
        let m = ge_mask(a, b);
        (b & m) | (a & !m)
    };
    [max(x[0], y[0]), max(x[1], y[1]), min(x[2], y[2])]
}

/// Whether a subtree with summaries `aligned` holds an `n`-page run from a tier-`t` start
/// aligned to `2^k`.
fn may_hold(aligned: &[u64; 3], k: u32, n: u64, t: Tier) -> bool {
    let v = aligned[t as usize] >> (8 * k) & 0xff;
    match t {
        Tier::Any => v <= (1u64 << k) - n,
        _ => v >= n,
    }
}

/// A size-aligned request the tiered search serves: alignment `2^k`, `n` pages, starts of
/// tier `tier` at position `floor` or above.
#[derive(Debug, Clone, Copy)]
struct Class {
    k: u32,
    n: u64,
    tier: Tier,
    floor: u64,
}

/// Levels of the tree stored together: a chunk of the node array holds a subtree of this height
/// (31 nodes in 32 slots), so a path from a leaf to the root touches one chunk per five levels,
/// and the bottom chunk of a path holds the summaries of 32 words (2048 pages). Stored level by
/// level, as a heap, every level of a path touched its own chunk: with the aligned summaries
/// (48 bytes a node), the nodes of `nic-ring`'s 4096 mappings took 62 KB, 15 bytes a mapping.
const BAND: u32 = 5;
const _: () = assert!(1 << BAND == NODE_CHUNK);

/// The internal nodes (heap-numbered from 1), in subtrees of [`BAND`] levels counted from the
/// bottom (the parents of leaves); the top band may be shorter.
#[derive(Debug)]
struct NodeStore {
    arr: PagedArray<Deficit>,
    /// Depths of internal nodes: the root is at 0, the parents of leaves at `depths - 1`.
    depths: u32,
    /// For band `b` (from the bottom): the depth of its subtree roots and its first chunk.
    bands: Vec<(u32, u64)>,
}

impl NodeStore {
    /// Room for the internal nodes of a tree of `leaves` leaves (a power of two, at least 2).
    fn new(leaves: u64) -> Self {
        let depths = leaves.trailing_zeros();
        let mut bands = Vec::new();
        let mut next = 0u64;
        for b in 0..depths.div_ceil(BAND) {
            let top = depths.saturating_sub(BAND * (b + 1));
            bands.push((top, next));
            next += 1u64 << top;
        }
        Self {
            arr: PagedArray::new(next * NODE_CHUNK as u64),
            depths,
            bands,
        }
    }

    /// The array slot of node `n`.
    #[inline]
    fn slot(&self, n: u64) -> u64 {
        let d = n.ilog2();
        let (top, base) = self.bands[((self.depths - 1 - d) / BAND) as usize];
        let rd = d - top;
        let root = n >> rd;
        let local = (1u64 << rd) | (n & ((1u64 << rd) - 1));
        (base + (root - (1u64 << top))) * NODE_CHUNK as u64 + local
    }

    #[inline]
    fn get(&self, n: u64) -> Deficit {
        self.arr.get(self.slot(n))
    }

    #[inline]
    fn set(&mut self, n: u64, d: Deficit) {
        let i = self.slot(n);
        self.arr.set(i, d);
    }

    fn bytes(&self) -> usize {
        self.arr.bytes() + self.bands.capacity() * std::mem::size_of::<(u32, u64)>()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Summary {
    len: u64,
    pre: u64,
    suf: u64,
    best: u64,
}

impl Summary {
    fn of_word(used: u64) -> Self {
        if used == 0 {
            return Self {
                len: 64,
                pre: 64,
                suf: 64,
                best: 64,
            };
        }
        let (mut x, mut best) = (!used, 0u32);
        while x != 0 {
            x >>= x.trailing_zeros();
            let run = (!x).trailing_zeros();
            best = best.max(run);
            x = x.checked_shr(run).unwrap_or(0);
        }
        Self {
            len: 64,
            pre: u64::from(used.trailing_zeros()),
            suf: u64::from(used.leading_zeros()),
            best: u64::from(best),
        }
    }

    fn join(l: Self, r: Self) -> Self {
        Self {
            len: l.len + r.len,
            pre: if l.pre == l.len { l.len + r.pre } else { l.pre },
            suf: if r.suf == r.len { r.len + l.suf } else { r.suf },
            best: l.best.max(r.best).max(l.suf + r.pre),
        }
    }
}

/// The tree and the planes it summarises. The public methods take page offsets from the domain's
/// first page; inside, positions are offsets plus `phase`.
#[derive(Debug)]
pub(crate) struct SegTree {
    /// Bit per position: allocated (live or cached), reserved, or before the domain.
    used: BitPlane,
    /// The domain's first frame modulo 64: position `phase` is offset 0.
    phase: u64,
    /// Leaves (words) in the tree: a power of two.
    leaves: u64,
    nodes: NodeStore,
    pub work: WorkCounters,
}

impl SegTree {
    /// A tree over `total_pages` pages, the first at frame `first_pfn`.
    pub fn new(total_pages: u64, first_pfn: u64) -> Self {
        let phase = first_pfn % 64;
        let words = (total_pages + phase).div_ceil(64);
        let leaves = words.next_power_of_two().max(2);
        let mut t = Self {
            used: BitPlane::new(words),
            phase,
            leaves,
            nodes: NodeStore::new(leaves),
            work: WorkCounters::default(),
        };
        if phase > 0 {
            t.mark_positions(0, phase - 1, true);
            t.work = WorkCounters::default();
        }
        t
    }

    /// The used bits of position word `w` (positions are offsets plus [`Self::phase`]).
    pub fn used_word(&self, w: u64) -> u64 {
        self.used.load(w)
    }

    /// Position of offset 0: the domain's first frame modulo 64.
    pub fn phase(&self) -> u64 {
        self.phase
    }

    /// Whether the page at offset `i` is used.
    pub fn is_used(&self, i: u64) -> bool {
        self.used.test(i + self.phase)
    }

    /// The first used page in offsets `[lo, hi]`.
    pub fn next_used(&self, lo: u64, hi: u64) -> Option<u64> {
        let p = self.phase;
        self.used.next_set(lo + p, hi + p).0.map(|u| u - p)
    }

    fn span(&self, node: u64) -> u64 {
        64 * (self.leaves >> node.ilog2())
    }

    /// The aligned-run summaries of `node` (see [`Deficit::aligned`]).
    fn aligned(&self, node: u64) -> [u64; 3] {
        if node >= self.leaves {
            let w = node - self.leaves;
            let used = self.used.load(w);
            word_aligned(used, self.seen(w, used))
        } else {
            self.nodes.get(node).aligned
        }
    }

    /// Word `w`'s used bits as placement tiers see them: without the positions before offset 0.
    fn seen(&self, w: u64, used: u64) -> u64 {
        if w == 0 {
            used & !((1u64 << self.phase) - 1)
        } else {
            used
        }
    }

    fn summary(&self, node: u64) -> Summary {
        if node >= self.leaves {
            return Summary::of_word(self.used.load(node - self.leaves));
        }
        let len = self.span(node);
        let d = self.nodes.get(node);
        Summary {
            len,
            pre: len - d.pre,
            suf: len - d.suf,
            best: len - d.best,
        }
    }

    /// Recompute the ancestors of words `[w_lo, w_hi]` after their bits changed.
    /// Stops at the first level where no node changed: the ones above depend on nothing else.
    fn refresh(&mut self, w_lo: u64, w_hi: u64) {
        let (mut lo, mut hi) = ((w_lo + self.leaves) / 2, (w_hi + self.leaves) / 2);
        while lo >= 1 {
            let mut changed = false;
            for n in lo..=hi {
                let s = Summary::join(self.summary(2 * n), self.summary(2 * n + 1));
                let d = Deficit {
                    pre: s.len - s.pre,
                    suf: s.len - s.suf,
                    best: s.len - s.best,
                    aligned: join_aligned(self.aligned(2 * n), self.aligned(2 * n + 1)),
                };
                if self.nodes.get(n) != d {
                    self.nodes.set(n, d);
                    changed = true;
                }
            }
            self.work.nodes_visited += hi - lo + 1;
            if !changed {
                break;
            }
            lo /= 2;
            hi /= 2;
        }
    }

    /// Mark offsets `[lo, hi]` used (`set`) or free, and refresh the summaries above them.
    pub fn mark(&mut self, lo: u64, hi: u64, set: bool) {
        self.mark_positions(lo + self.phase, hi + self.phase, set);
    }

    fn mark_positions(&mut self, lo: u64, hi: u64, set: bool) {
        crate::bits::for_words(lo, hi, |w, m| {
            if set {
                self.used.fetch_or(w as u64, m);
            } else {
                self.used.fetch_clear(w as u64, m);
            }
        });
        self.work.words_scanned += hi / 64 - lo / 64 + 1;
        self.refresh(lo / 64, hi / 64);
    }

    /// A start `s` (an offset) with `[s, s + pages - 1]` free, inside `[0, lim]`, and legal for
    /// `fit` at absolute frame `base + s`: the highest, except that a size-aligned request of up
    /// to 64 pages takes the highest start of the best placement tier (see [`Tier`]) inside
    /// `[floor, lim]` when the highest start of all lies there. `floor` keeps the preference to
    /// the caller's region; above `lim`, the request simply takes the highest start.
    pub fn find_highest(&mut self, lim: u64, floor: u64, base: u64, fit: &Fit) -> Option<u64> {
        let p = self.phase;
        // Frame of position 0: a multiple of 64.
        let base = base - p;
        let (lim, floor) = (lim + p, floor + p);
        let found = match Self::aligned_class(fit) {
            Some((k, n)) => {
                // The better tiers above the floor; else the highest start of all (which is
                // below the floor exactly when nothing above it fits, so either way the
                // preference applies only where the highest start lies above the floor).
                let class = |tier, floor| Some(Class { k, n, tier, floor });
                let tiers: &[(Tier, u64)] = if floor <= lim {
                    &[(Tier::Partial, floor), (Tier::Buddy, floor), (Tier::Any, 0)]
                } else {
                    &[(Tier::Any, 0)]
                };
                tiers
                    .iter()
                    .find_map(|&(t, f)| self.search(1, 0, lim, 0, base, fit, class(t, f)))?
            }
            None => self.search(1, 0, lim, 0, base, fit, None)?,
        };
        // Positions before offset 0 are used, so never found.
        Some(found - p)
    }

    /// For a request that must lie inside one aligned block of at most 64 pages (its alignment
    /// `2^k >= pages`, and no boundary cuts such a block): `k` and its pages.
    fn aligned_class(fit: &Fit) -> Option<(u32, u64)> {
        let a = fit.align;
        let cut = fit.boundary.is_some_and(|b| b < a);
        (a <= 64 && fit.pages <= a && !cut).then_some((a.trailing_zeros(), fit.pages))
    }

    /// Runs starting inside `node` (which begins at position `lo`), with `ext` free pages known
    /// to follow its right edge (already clipped to the limit). `class`: see
    /// [`Self::aligned_class`].
    #[allow(clippy::too_many_arguments)]
    fn search(
        &mut self,
        node: u64,
        lo: u64,
        lim: u64,
        ext: u64,
        base: u64,
        fit: &Fit,
        class: Option<Class>,
    ) -> Option<u64> {
        self.work.nodes_visited += 1;
        if class.is_some_and(|c| lo + self.span(node) <= c.floor) {
            return None;
        }
        if node >= self.leaves {
            return match class {
                Some(c) => self.search_word_aligned(node - self.leaves, lim, c),
                None => self.search_word(node - self.leaves, lim, ext, base, fit),
            };
        }
        if let Some(c) = class {
            if !may_hold(&self.nodes.get(node).aligned, c.k, c.n, c.tier) {
                return None;
            }
        }
        let s = self.summary(node);
        if s.best.max(s.suf + ext) < fit.pages {
            return None;
        }
        let half = s.len / 2;
        let (left, right, r_lo) = (2 * node, 2 * node + 1, lo + half);
        let mut left_ext = 0;
        if r_lo <= lim {
            if let Some(found) = self.search(right, r_lo, lim, ext, base, fit, class) {
                return Some(found);
            }
            let r = self.summary(right);
            let run = if r.pre == half { half + ext } else { r.pre };
            left_ext = run.min(lim - r_lo + 1);
        }
        self.search(left, lo, lim, left_ext, base, fit, class)
    }

    /// The highest start in word `w` for an aligned request of tier `c.tier`, at most `lim`
    /// with its last page. Positions are frame-aligned (see `find_highest`), and no boundary
    /// cuts the block (see `aligned_class`), so the start is legal.
    fn search_word_aligned(&mut self, w: u64, lim: u64, c: Class) -> Option<u64> {
        self.work.words_scanned += 1;
        let first = w * 64;
        let used = self.used.load(w);
        let r = WordRuns::new(used);
        let view = WordRuns::new(self.seen(w, used));
        let mut starts = r.with_run(view.tier_starts(c.k, c.tier), c.n);
        // The last page, s + n - 1, at most the limit; the start at the floor or above.
        let top = (lim - first).checked_sub(c.n - 1)?;
        if top < 63 {
            starts &= u64::MAX >> (63 - top);
        }
        if c.floor > first {
            starts &= u64::MAX.checked_shl((c.floor - first) as u32).unwrap_or(0);
        }
        (starts != 0).then(|| first + u64::from(63 - starts.leading_zeros()))
    }

    /// Free runs of word `w`, highest first; the top run continues for `ext` pages.
    fn search_word(&mut self, w: u64, lim: u64, ext: u64, base: u64, fit: &Fit) -> Option<u64> {
        self.work.words_scanned += 1;
        let first = w * 64;
        let mut free = !self.used.load(w);
        if lim < first + 63 {
            free &= u64::MAX >> (63 - (lim - first));
        }
        while free != 0 {
            let top = 63 - free.leading_zeros();
            let used_below = !free & ((1u64 << top) - 1);
            let bottom = if used_below == 0 {
                0
            } else {
                64 - used_below.leading_zeros()
            };
            let run_hi = first + u64::from(top) + if top == 63 { ext } else { 0 };
            if let Some(s) = fit.highest(base + first + u64::from(bottom), base + run_hi) {
                return Some(s - base);
            }
            free &= (1u64 << bottom).wrapping_sub(1);
        }
        None
    }

    /// Largest free run, number of free runs and free pages inside offsets `[0, last]`, by
    /// walking the words.
    pub fn free_runs(&self, last: u64) -> (u64, u64, u64) {
        // The positions before offset 0 are used: they end no run and count no page.
        let last = last + self.phase;
        let (mut largest, mut count, mut free_pages, mut run) = (0u64, 0u64, 0u64, 0u64);
        let mut w = 0;
        while w <= last / 64 {
            // A chunk never written is all free: count it whole rather than word by word.
            if let Some(next) = self.used.absent_chunk_end(w) {
                let end = next.min(last / 64 + 1);
                let pages = (end * 64).min(last + 1) - w * 64;
                run += pages;
                free_pages += pages;
                w = end;
                continue;
            }
            let word = self.used.load(w);
            let n = if w == last / 64 { last % 64 + 1 } else { 64 };
            if word == 0 && n == 64 {
                run += 64;
                free_pages += 64;
                w += 1;
                continue;
            }
            for b in 0..n {
                if word >> b & 1 == 0 {
                    run += 1;
                    free_pages += 1;
                } else if run > 0 {
                    largest = largest.max(run);
                    count += 1;
                    run = 0;
                }
            }
            w += 1;
        }
        if run > 0 {
            largest = largest.max(run);
            count += 1;
        }
        (largest, count, free_pages)
    }

    pub fn bytes(&self) -> usize {
        self.used.bytes() + self.nodes.bytes()
    }
}

#[cfg(test)]
mod tests;
