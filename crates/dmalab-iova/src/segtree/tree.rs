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

use super::planes::{BitPlane, PagedArray};
use crate::placement::Fit;
use crate::types::WorkCounters;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Deficit {
    pre: u64,
    suf: u64,
    best: u64,
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

/// The tree and the planes it summarises. Indices are page offsets from the domain's first page.
#[derive(Debug)]
pub(crate) struct SegTree {
    /// Bit per page: allocated (live or cached) or reserved.
    pub used: BitPlane,
    /// Leaves (words) in the tree: a power of two.
    leaves: u64,
    nodes: PagedArray<Deficit>,
    pub work: WorkCounters,
}

impl SegTree {
    pub fn new(total_pages: u64) -> Self {
        let words = total_pages.div_ceil(64);
        let leaves = words.next_power_of_two().max(2);
        Self {
            used: BitPlane::new(words),
            leaves,
            nodes: PagedArray::new(leaves),
            work: WorkCounters::default(),
        }
    }

    fn span(&self, node: u64) -> u64 {
        64 * (self.leaves >> node.ilog2())
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
    fn refresh(&mut self, w_lo: u64, w_hi: u64) {
        let (mut lo, mut hi) = ((w_lo + self.leaves) / 2, (w_hi + self.leaves) / 2);
        while lo >= 1 {
            for n in lo..=hi {
                let s = Summary::join(self.summary(2 * n), self.summary(2 * n + 1));
                self.nodes.set(
                    n,
                    Deficit {
                        pre: s.len - s.pre,
                        suf: s.len - s.suf,
                        best: s.len - s.best,
                    },
                );
            }
            self.work.nodes_visited += hi - lo + 1;
            lo /= 2;
            hi /= 2;
        }
    }

    /// Mark `[lo, hi]` used (`set`) or free, and refresh the summaries above it.
    pub fn mark(&mut self, lo: u64, hi: u64, set: bool) {
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

    /// The highest start `s` (an offset) with `[s, s + pages - 1]` free, inside `[0, lim]`, and
    /// legal for `fit` at absolute frame `base + s`.
    pub fn find_highest(&mut self, lim: u64, base: u64, fit: &Fit) -> Option<u64> {
        self.search(1, 0, lim, 0, base, fit)
    }

    /// Runs starting inside `node` (which begins at offset `lo`), with `ext` free pages known to
    /// follow its right edge (already clipped to the limit).
    fn search(
        &mut self,
        node: u64,
        lo: u64,
        lim: u64,
        ext: u64,
        base: u64,
        fit: &Fit,
    ) -> Option<u64> {
        self.work.nodes_visited += 1;
        if node >= self.leaves {
            return self.search_word(node - self.leaves, lim, ext, base, fit);
        }
        let s = self.summary(node);
        if s.best.max(s.suf + ext) < fit.pages {
            return None;
        }
        let half = s.len / 2;
        let (left, right, r_lo) = (2 * node, 2 * node + 1, lo + half);
        let mut left_ext = 0;
        if r_lo <= lim {
            if let Some(found) = self.search(right, r_lo, lim, ext, base, fit) {
                return Some(found);
            }
            let r = self.summary(right);
            let run = if r.pre == half { half + ext } else { r.pre };
            left_ext = run.min(lim - r_lo + 1);
        }
        self.search(left, lo, lim, left_ext, base, fit)
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

    /// Largest free run and number of free runs inside `[0, last]`, by walking the words.
    pub fn free_runs(&self, last: u64) -> (u64, u64, u64) {
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
mod tests {
    use super::*;

    #[test]
    fn word_summaries() {
        let s = Summary::of_word(0b1000_0110);
        assert_eq!((s.pre, s.suf, s.best), (1, 56, 56));
        let s = Summary::of_word(!0b0111_0000u64);
        assert_eq!((s.pre, s.suf, s.best), (0, 0, 3));
        let s = Summary::of_word(u64::MAX);
        assert_eq!((s.pre, s.suf, s.best), (0, 0, 0));
    }

    #[test]
    fn finds_runs_that_cross_words_and_respects_the_limit() {
        let mut t = SegTree::new(1024);
        t.mark(0, 1023, true);
        t.mark(60, 200, false); // a run across three words
        let fit = Fit {
            pages: 141,
            align: 1,
            boundary: None,
        };
        assert_eq!(t.find_highest(1023, 0, &fit), Some(60));
        let fit = Fit {
            pages: 142,
            align: 1,
            boundary: None,
        };
        assert_eq!(t.find_highest(1023, 0, &fit), None);
        let fit = Fit {
            pages: 10,
            align: 1,
            boundary: None,
        };
        assert_eq!(t.find_highest(150, 0, &fit), Some(141));
        let fit = Fit {
            pages: 64,
            align: 64,
            boundary: None,
        };
        assert_eq!(t.find_highest(1023, 0, &fit), Some(128));
    }
}
