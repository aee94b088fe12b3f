//! Tests of the segment tree: summaries against page-by-page counts, placements, pruning and limits.

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

/// Free pages from `s` in `used`, at most `a`.
fn run_slow(used: u64, s: u64, a: u64) -> u64 {
    (0..a)
        .take_while(|&i| s + i < 64 && used >> (s + i) & 1 == 0)
        .count() as u64
}

/// The longest run (capped at `a`) from a multiple `s` of `a` that `keep(s)` allows.
fn longest_slow(used: u64, a: u64, keep: impl Fn(u64) -> bool) -> u64 {
    (0..64 / a)
        .map(|j| j * a)
        .filter(|&s| keep(s))
        .map(|s| run_slow(used, s, a))
        .max()
        .unwrap_or(0)
}

#[test]
fn aligned_summaries_match_a_page_by_page_count() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut words = vec![0, u64::MAX, 1, 1 << 63, 0xffff_0000_ffff_0000, !0x00ff_ff00];
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Sparse and dense words as well as even ones.
        words.extend([x, x & x.rotate_left(17), x | x.rotate_left(29)]);
    }
    for w in words {
        let got = word_aligned(w, w);
        for k in 0..ALIGN_CLASSES {
            let a = 1u64 << k;
            let byte = |t: Tier| got[t as usize] >> (8 * k) & 0xff;
            let block_free = |s: u64, len: u64| run_slow(w, s, len) == len;
            assert_eq!(
                byte(Tier::Any),
                a - longest_slow(w, a, |_| true),
                "word {w:#018x}, alignment {a}, any"
            );
            assert_eq!(
                byte(Tier::Partial),
                longest_slow(w, a, |s| !block_free(s, a)),
                "word {w:#018x}, alignment {a}, partial"
            );
            let buddy = if k + 1 < ALIGN_CLASSES {
                longest_slow(w, a, |s| !block_free(s & !(2 * a - 1), 2 * a))
            } else {
                0
            };
            assert_eq!(
                byte(Tier::Buddy),
                buddy,
                "word {w:#018x}, alignment {a}, buddy"
            );
        }
    }
}

#[test]
fn node_slots_are_distinct_and_bands_share_chunks() {
    for leaves in [2u64, 4, 32, 64, 1 << 11, 1 << 12] {
        let store = NodeStore::new(leaves);
        let mut seen = std::collections::HashSet::new();
        for n in 1..leaves {
            let slot = store.slot(n);
            assert!(
                !slot.is_multiple_of(NODE_CHUNK as u64),
                "slot 0 of a chunk is unused"
            );
            assert!(
                seen.insert(slot),
                "{leaves} leaves: node {n} reuses slot {slot}"
            );
            // A parent of leaves shares its chunk with the ancestors up to four levels up,
            // as far as the band reaches.
            if n >= leaves / 2 {
                let chunk = slot / NODE_CHUNK as u64;
                let up = (leaves.trailing_zeros() - 1).min(BAND - 1);
                assert_eq!(store.slot(n >> up) / NODE_CHUNK as u64, chunk);
            }
        }
    }
}

#[test]
fn byte_wise_joins_match_byte_by_byte() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Seven bytes of 0..=64, as in the summaries.
        (0..ALIGN_CLASSES).fold(0u64, |acc, k| acc | ((x >> (8 * k) & 0xff) % 65) << (8 * k))
    };
    for _ in 0..10_000 {
        let (a, b) = ([next(), next(), next()], [next(), next(), next()]);
        let got = join_aligned(a, b);
        for k in 0..ALIGN_CLASSES {
            let byte = |v: u64| v >> (8 * k) & 0xff;
            assert_eq!(byte(got[0]), byte(a[0]).max(byte(b[0])));
            assert_eq!(byte(got[1]), byte(a[1]).max(byte(b[1])));
            assert_eq!(byte(got[2]), byte(a[2]).min(byte(b[2])));
        }
    }
    assert_eq!(word_aligned(u64::MAX, u64::MAX)[2], {
        let r = WordRuns::new(u64::MAX);
        (0..ALIGN_CLASSES).fold(0, |acc, k| {
            acc | ((1u64 << k) - r.longest(ALIGNED_STARTS[k as usize], k)) << (8 * k)
        })
    });
}

#[test]
fn aligned_requests_fill_partial_blocks_before_splitting_free_ones() {
    // One word of 64 pages: pages 0-5 used, the rest free. A 2-page request goes to 6 (its
    // 2-block is free but the 4-block is partly used), not to the highest free pair, 62.
    let mut t = SegTree::new(64, 0);
    t.mark(0, 5, true);
    let fit = |pages, align| Fit {
        pages,
        align,
        boundary: None,
    };
    assert_eq!(t.find_highest(63, 0, 0, &fit(2, 2)), Some(6));
    t.mark(6, 7, true);
    // A 3-page request aligned to 4 fills the partly used 4-block at 8 once one is made.
    t.mark(11, 11, true);
    assert_eq!(t.find_highest(63, 0, 0, &fit(3, 4)), Some(8));
    // A 16-page request takes the free 16-block whose buddy is partly used, 16, and leaves
    // the free 32-block at 32 whole.
    assert_eq!(t.find_highest(63, 0, 0, &fit(16, 16)), Some(16));
    // With no such block, the highest free one.
    t.mark(16, 31, true);
    assert_eq!(t.find_highest(63, 0, 0, &fit(16, 16)), Some(48));
}

#[test]
fn aligned_requests_skip_subtrees_with_only_misaligned_runs() {
    // First frame 1: offset o is frame o + 1. Every 64-page block holds a 40-page free run,
    // none of them starting on a multiple of 64 but the one at frame 64 * 200.
    let pages = 1 << 16;
    let mut t = SegTree::new(pages, 1);
    t.mark(0, pages - 1, true);
    for blk in 1..pages / 64 {
        let frame = blk * 64 + if blk == 200 { 0 } else { 8 };
        t.mark(frame - 1, frame - 1 + 39, false);
    }
    let fit = Fit {
        pages: 40,
        align: 64,
        boundary: None,
    };
    t.work = WorkCounters::default();
    assert_eq!(t.find_highest(pages - 1, 0, 1, &fit), Some(200 * 64 - 1));
    let visited = t.work.nodes_visited;
    assert!(
        visited < 64,
        "visited {visited} nodes, where a run-length prune alone visits over a thousand"
    );
    // The same request unaligned takes the highest run, as before.
    let fit = Fit {
        pages: 40,
        align: 1,
        boundary: None,
    };
    let top = (pages / 64 - 1) * 64 + 8;
    assert_eq!(t.find_highest(pages - 1, 0, 1, &fit), Some(top - 1));
}

#[test]
fn finds_runs_that_cross_words_and_respects_the_limit() {
    let mut t = SegTree::new(1024, 0);
    t.mark(0, 1023, true);
    t.mark(60, 200, false); // a run across three words
    let fit = Fit {
        pages: 141,
        align: 1,
        boundary: None,
    };
    assert_eq!(t.find_highest(1023, 0, 0, &fit), Some(60));
    let fit = Fit {
        pages: 142,
        align: 1,
        boundary: None,
    };
    assert_eq!(t.find_highest(1023, 0, 0, &fit), None);
    let fit = Fit {
        pages: 10,
        align: 1,
        boundary: None,
    };
    assert_eq!(t.find_highest(150, 0, 0, &fit), Some(141));
    let fit = Fit {
        pages: 64,
        align: 64,
        boundary: None,
    };
    assert_eq!(t.find_highest(1023, 0, 0, &fit), Some(128));
}
