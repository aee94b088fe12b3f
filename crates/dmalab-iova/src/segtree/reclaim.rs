//! Getting space the tree lacks out of the caches without flushing them: a range cut from a
//! larger cached one, or an aligned block whose used pages are all cached ranges, reclaimed.
//!
//! A flush returns every cached range to the tree, where searches for small requests then split
//! the aligned holes large ones need, and on a crowded zone one flush sets off more. So a
//! request the tree cannot serve first looks for exactly the cached ranges that make room for
//! it.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::Ordering;

use super::cache::CpuCache;
use super::depot::{Backend, WordMasks};
use super::{first_page_of, fits, SegTreeAllocator};
use crate::placement::Fit;

impl SegTreeAllocator {
    /// A range for `fit` cut from a larger cached one (this thread's cache or the depot) whose
    /// start is legal for it, the rest returned to the tree. The caller holds the backend lock.
    pub(super) fn cut_from_larger_cached(
        &self,
        b: &mut Backend,
        lim: u64,
        fit: &Fit,
    ) -> Option<u64> {
        let base = self.base();
        let n = fit.pages;
        if n >= self.tuning.max_cached_pages {
            return None;
        }
        // The smallest larger class with a range at a legal start among its newest few.
        let scan = self.tuning.cut_scan_ranges;
        let find = |classes: &[Vec<u64>]| -> Option<(u64, usize)> {
            (n + 1..classes.len() as u64).find_map(|m| {
                let class = &classes[m as usize];
                let from = class.len().saturating_sub(scan);
                class[from..]
                    .iter()
                    .rposition(|&o| fits(base, o, fit, lim))
                    .map(|i| (m, from + i))
            })
        };
        let (off, m) = {
            let mut c = self.my_cache();
            match find(&c.classes) {
                Some((m, i)) => {
                    let off = c.classes[m as usize].swap_remove(i);
                    c.uncount(off, m, self.low_end);
                    (off, m)
                }
                None => {
                    drop(c);
                    let (m, i) = find(&b.depot)?;
                    (b.take_depot_at(m, i), m)
                }
            }
        };
        let last = off + n - 1;
        self.ends.fetch_or(last / 64, 1 << (last % 64));
        self.give_back_locked(b, off + n, m - n);
        Some(off)
    }

    /// A block for `fit` reclaimed from this thread's cache and the depot (no barrier).
    pub(super) fn reclaim_from_own_cache(
        &self,
        b: &mut Backend,
        lim: u64,
        fit: &Fit,
    ) -> Option<u64> {
        let mut c = self.my_cache();
        self.reclaim_in(b, &mut [&mut c], lim, fit)
    }

    /// A block for `fit` reclaimed from every cache, taken at once, with no drain; `None`
    /// without trying when no other thread's cache was ever used (the caller's own cache and
    /// the depot were searched already, and a flush could not help either).
    pub(super) fn reclaim_from_every_cache(
        &self,
        b: &mut Backend,
        lim: u64,
        fit: &Fit,
    ) -> Option<u64> {
        if self.users.load(Ordering::Relaxed) <= 1 {
            return None;
        }
        self.with_every_cache(|all| self.reclaim_in(b, all, lim, fit))
    }

    /// Whether [`Self::reclaim_in`] serves `fit`: at most 64 pages, aligned to at least its
    /// size, so that every legal place is an aligned block inside one word of the tree.
    pub(super) fn reclaimable(fit: &Fit) -> bool {
        fit.pages <= 64 && fit.align >= fit.pages
    }

    /// A place for `fit` (see [`Self::reclaimable`]) in an aligned block whose used pages all
    /// belong to ranges that `caches` or the depot hold: those ranges go back to the tree and
    /// the block is taken, with up to `Tuning::reclaim_extra_blocks` more such blocks put in
    /// the depot as ranges of the request's size (the request that needed a reclaim is usually
    /// followed by others of its size).
    ///
    /// `None` only if no such block exists: a flush of exactly these caches could not have
    /// served the request either (every legal place of the request is an aligned block, and
    /// every block holding a page of a held range is examined). The caller holds the backend
    /// lock and `caches`.
    pub(super) fn reclaim_in(
        &self,
        b: &mut Backend,
        caches: &mut [&mut CpuCache],
        lim: u64,
        fit: &Fit,
    ) -> Option<u64> {
        if !Self::reclaimable(fit) {
            return None;
        }
        let found = self.reclaimable_blocks(b, caches, lim, fit);
        self.take_blocks(b, caches, found, fit.pages)
    }

    /// Up to `1 + reclaim_extra_blocks` blocks for `fit` whose used pages are all held: blocks
    /// of depot ranges alone first, from the depot's word masks kept as ranges come and go
    /// (the depot holds most of a crowded zone's free pages, and hashing every held range on
    /// every reclaim is slow); only if none qualifies, blocks that need the caches' ranges too.
    fn reclaimable_blocks(
        &self,
        b: &mut Backend,
        caches: &[&mut CpuCache],
        lim: u64,
        fit: &Fit,
    ) -> Vec<u64> {
        b.keep_depot_masks();
        let depot_words = b.depot_mask.iter().flat_map(|m| m.keys());
        let found = self.blocks_in_words(b, depot_words.map(|&w| (w, 0)), lim, fit);
        if !found.is_empty() {
            return found;
        }
        let held = held_masks(caches, lim, b.tree.phase());
        self.blocks_in_words(b, held.iter().map(|(&w, &m)| (w, m)), lim, fit)
    }

    /// In each position word (with the mask of its held pages, the depot's added), the
    /// highest block for `fit` whose used pages are all held: one test of the used word per
    /// place. Stops once it has as many blocks as it can use (in the words' order, which
    /// follows the history of the depot and caches, so runs stay deterministic): a full pass
    /// over a large depot's words on every reclaim keeps other threads waiting.
    fn blocks_in_words(
        &self,
        b: &Backend,
        words: impl Iterator<Item = (u64, u64)>,
        lim: u64,
        fit: &Fit,
    ) -> Vec<u64> {
        let (n, base, phase) = (fit.pages, self.base(), b.tree.phase());
        let block = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let step = fit.align.min(64);
        let mut found: Vec<u64> = Vec::new();
        for (w, mask) in words {
            if found.len() > self.tuning.reclaim_extra_blocks {
                break;
            }
            let used = b.tree.used_word(w);
            let depot = b.depot_mask.as_ref().and_then(|m| m.get(&w));
            let mask = mask | depot.copied().unwrap_or(0);
            let mut j = 64 - step;
            loop {
                let pos = w * 64 + j;
                if pos >= phase
                    && used & (block << j) & !mask == 0
                    && fits(base, pos - phase, fit, lim)
                {
                    found.push(pos - phase);
                    break;
                }
                if j == 0 {
                    break;
                }
                j -= step;
            }
        }
        found
    }

    /// Reclaim the blocks `found` of `n` pages, highest first: the highest that can be
    /// reclaimed serves the request and the rest go to the depot while it has room.
    fn take_blocks(
        &self,
        b: &mut Backend,
        caches: &mut [&mut CpuCache],
        mut found: Vec<u64>,
        n: u64,
    ) -> Option<u64> {
        found.sort_unstable_by(|x, y| y.cmp(x));
        let (mut got, mut extra_left) = (None, 1 + self.tuning.reclaim_extra_blocks);
        for s in found {
            if got.is_some() && !b.depot_has_room(&self.tuning, n) {
                break;
            }
            if self.reclaim_block(b, caches, s, n) {
                match got {
                    None => got = Some(s),
                    Some(_) => {
                        if let Some(o) = b.keep_in_depot(&self.tuning, s, n) {
                            self.give_back_locked(b, o, n);
                        }
                    }
                }
                extra_left -= 1;
                if extra_left == 0 {
                    break;
                }
            }
        }
        got
    }

    /// Return to the tree every range held in `caches` or the depot that overlaps the block of
    /// `n` pages at `s`, then mark the block as one range; false (and nothing changed) if a
    /// used page of the block belongs to a range none of them holds. The caller holds the
    /// backend lock and `caches`.
    fn reclaim_block(&self, b: &mut Backend, caches: &mut [&mut CpuCache], s: u64, n: u64) -> bool {
        let Some(ranges) = self.ranges_in_block(b, s, n) else {
            return false;
        };
        // Find each one's holder before changing anything.
        let Some(holders) = holders_of(b, caches, &ranges) else {
            return false;
        };
        for (&(o, m), &holder) in ranges.iter().zip(&holders) {
            self.unhold(b, caches, holder, o, m);
        }
        let last = s + n - 1;
        b.tree.mark(s, last, true);
        self.ends.fetch_or(last / 64, 1 << (last % 64));
        true
    }

    /// The ranges (offset, pages) with a used page in the block of `n` pages at `s`, from the
    /// ends plane: a used page after a gap or a range starts one (the first may begin before
    /// the block); `None` if a used page has no end.
    fn ranges_in_block(&self, b: &Backend, s: u64, n: u64) -> Option<Vec<(u64, u64)>> {
        let mut ranges = Vec::new();
        let mut q = s;
        while q < s + n {
            if !b.tree.is_used(q) {
                q += 1;
                continue;
            }
            let first = if q == s {
                first_page_of(&b.tree, &self.ends, &b.reserved, q)
            } else {
                q
            };
            let last = self.ends.next_set(first, self.cfg.total_pages() - 1).0?;
            ranges.push((first, last - first + 1));
            q = last + 1;
        }
        Some(ranges)
    }

    /// Take the range of `m` pages at `o` out of its holder (cache `Some(i)`, or the depot)
    /// and return it to the tree.
    fn unhold(
        &self,
        b: &mut Backend,
        caches: &mut [&mut CpuCache],
        holder: Option<usize>,
        o: u64,
        m: u64,
    ) {
        let class = match holder {
            Some(i) => &mut caches[i].classes[m as usize],
            None => &mut b.depot[m as usize],
        };
        if let Some(i) = class.iter().position(|&x| x == o) {
            class.swap_remove(i);
        }
        match holder {
            Some(i) => caches[i].uncount(o, m, self.low_end),
            None => b.forget_depot_range(o, m),
        }
        self.give_back_locked(b, o, m);
    }
}

/// Which holds each of `ranges`: `Some(i)` for `caches[i]`, `None` for the depot; `None` in
/// all if one is held by neither (a caller's live range, or a reservation).
fn holders_of(
    b: &Backend,
    caches: &[&mut CpuCache],
    ranges: &[(u64, u64)],
) -> Option<Vec<Option<usize>>> {
    let mut from = Vec::with_capacity(ranges.len());
    for &(o, m) in ranges {
        let holds = |classes: &Vec<Vec<u64>>| {
            classes
                .get(m as usize)
                .is_some_and(|class| class.contains(&o))
        };
        let holder = match caches.iter().position(|c| holds(&c.classes)) {
            Some(i) => Some(i),
            None if holds(&b.depot) => None,
            None => return None,
        };
        from.push(holder);
    }
    Some(from)
}

/// The pages of every range `caches` hold at or below `lim`, as masks of position words
/// (positions are offsets plus the tree's `phase`, so a word starts at a frame that is a
/// multiple of 64, and every legal place of a reclaimable request lies inside one word).
fn held_masks(caches: &[&mut CpuCache], lim: u64, phase: u64) -> WordMasks {
    let count = caches
        .iter()
        .flat_map(|c| c.classes.iter().map(Vec::len))
        .sum();
    let mut held: WordMasks =
        HashMap::with_capacity_and_hasher(count, BuildHasherDefault::default());
    for c in caches.iter() {
        for (m, class) in c.classes.iter().enumerate() {
            for &o in class.iter().filter(|&&o| o <= lim) {
                crate::bits::for_words(o + phase, o + m as u64 - 1 + phase, |w, mask| {
                    *held.entry(w as u64).or_insert(0) |= mask;
                });
            }
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocRequest, DomainConfig, IovaAllocator, IovaError, Pfn};

    #[test]
    fn a_request_the_tree_cannot_serve_is_cut_from_a_larger_cached_range_before_any_flush() {
        let cfg = DomainConfig::new(Pfn(0), Pfn(63), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        dom.reserve(Pfn(8), Pfn(63)).unwrap();
        let eight = dom
            .allocate(&AllocRequest::pages(8).size_aligned())
            .unwrap();
        assert_eq!(eight.pfn_lo, Pfn(0));
        dom.free(eight.pfn_lo, 8).unwrap();
        assert_eq!(dom.stats().cached_pages, 8);
        // No 5-page range is cached and the tree is full: the cached 8-page range is cut.
        let five = dom
            .allocate(&AllocRequest::pages(5).size_aligned())
            .unwrap();
        assert_eq!(five.pfn_lo, Pfn(0));
        let st = dom.stats();
        assert_eq!((st.cached_pages, st.free_pages), (0, 3), "{st:?}");
        assert_eq!(st.largest_free_extent_pages, 3);
        assert_eq!(dom.work().cache_flushes, 0);
        assert!(matches!(
            dom.free(Pfn(0), 8),
            Err(IovaError::SizeMismatch {
                allocated_pages: 5,
                ..
            })
        ));
        // The 3-page tail is in the tree and the 5-page range frees as 5 pages.
        let three = dom.allocate(&AllocRequest::pages(3)).unwrap();
        assert_eq!(three.pfn_lo, Pfn(5));
        dom.free(five.pfn_lo, 5).unwrap();
        dom.free(three.pfn_lo, 3).unwrap();
        dom.flush_caches();
        assert_eq!(dom.stats().free_pages, 8);
    }

    #[test]
    fn a_block_of_cached_ranges_and_free_pages_is_reclaimed_without_a_flush() {
        // Frames 0-127: two 64-page blocks. The top one takes four 16-page ranges, the other a
        // live 1-page range and cached 2-page ranges.
        let cfg = DomainConfig::new(Pfn(0), Pfn(127), 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let sixteen = AllocRequest::pages(16).size_aligned();
        let quarters: Vec<_> = (0..4).map(|_| dom.allocate(&sixteen).unwrap()).collect();
        let one = dom.allocate(&AllocRequest::pages(1)).unwrap();
        let twos: Vec<_> = (0..20)
            .map(|_| {
                dom.allocate(&AllocRequest::pages(2).size_aligned())
                    .unwrap()
            })
            .collect();
        assert!(one.pfn_lo.0 < 64 && twos.iter().all(|r| r.pfn_lo.0 < 64));
        assert!(quarters.iter().all(|r| r.pfn_lo.0 >= 64));
        // Three quarters and every 2-page range go to the cache; one quarter to the tree.
        for r in &quarters[..3] {
            dom.free(r.pfn_lo, 16).unwrap();
        }
        for r in &twos {
            dom.free(r.pfn_lo, 2).unwrap();
        }
        // The last quarter too: the top block is now four cached ranges, and the tree has no
        // free 64-page block. (Refills cached some more ranges in the other block.)
        dom.free(quarters[3].pfn_lo, 16).unwrap();
        let cached = dom.stats().cached_pages;
        assert!(cached >= 4 * 16 + 20 * 2, "{cached}");
        let whole = AllocRequest::pages(64).size_aligned();
        let got = dom.allocate(&whole).unwrap();
        assert_eq!(got.pfn_lo, Pfn(64));
        let st = dom.stats();
        assert_eq!(dom.work().cache_flushes, 0, "no cache was flushed");
        assert_eq!(
            st.cached_pages,
            cached - 64,
            "only the four quarters left the cache: {st:?}"
        );
        // The other block holds a live page: a second 64-page request finds no space, still
        // without a flush, and loses nothing.
        assert!(matches!(
            dom.allocate(&whole),
            Err(IovaError::NoSpace { .. })
        ));
        assert_eq!(dom.work().cache_flushes, 0);
        assert_eq!(dom.stats().cached_pages, cached - 64);
        dom.free(one.pfn_lo, 1).unwrap();
        dom.free(got.pfn_lo, 64).unwrap();
        dom.flush_caches();
        let st = dom.stats();
        assert_eq!((st.free_pages, st.live_allocations), (128, 0), "{st:?}");
    }
}
