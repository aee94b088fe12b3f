//! Bit-range helpers over `[u64]` words (bit `i` of word `w` is index `64 * w + i`), each
//! returning how many words it touched so that callers can count their work.

/// Mask of bits `[lo, hi]` inside one word (`lo <= hi < 64`).
#[inline]
pub(crate) fn word_mask(lo: u32, hi: u32) -> u64 {
    (u64::MAX >> (63 - hi)) & (u64::MAX << lo)
}

/// Iterate the words overlapping `[lo, hi]` as `(word index, mask within it)`.
#[inline]
pub(crate) fn for_words(lo: u64, hi: u64, mut f: impl FnMut(usize, u64)) {
    let (wlo, whi) = (lo / 64, hi / 64);
    for w in wlo..=whi {
        let a = if w == wlo { (lo % 64) as u32 } else { 0 };
        let b = if w == whi { (hi % 64) as u32 } else { 63 };
        f(w as usize, word_mask(a, b));
    }
}

/// Set bits `[lo, hi]`; returns words touched.
pub(crate) fn set_range(words: &mut [u64], lo: u64, hi: u64) -> u64 {
    let mut n = 0;
    for_words(lo, hi, |w, m| {
        words[w] |= m;
        n += 1;
    });
    n
}

/// Clear bits `[lo, hi]`; returns words touched.
pub(crate) fn clear_range(words: &mut [u64], lo: u64, hi: u64) -> u64 {
    let mut n = 0;
    for_words(lo, hi, |w, m| {
        words[w] &= !m;
        n += 1;
    });
    n
}

/// Whether every bit of `[lo, hi]` is set.
pub(crate) fn all_set(words: &[u64], lo: u64, hi: u64) -> bool {
    let mut all = true;
    for_words(lo, hi, |w, m| all &= words[w] & m == m);
    all
}

/// Whether any bit of `[lo, hi]` is set.
pub(crate) fn any_set(words: &[u64], lo: u64, hi: u64) -> bool {
    let mut any = false;
    for_words(lo, hi, |w, m| any |= words[w] & m != 0);
    any
}

/// The first index in `[lo, hi]` whose bit equals `want`, and the words read to find it.
pub(crate) fn next_with(words: &[u64], lo: u64, hi: u64, want: bool) -> (Option<u64>, u64) {
    if lo > hi {
        return (None, 0);
    }
    let (wlo, whi) = (lo / 64, hi / 64);
    let mut read = 0;
    for w in wlo..=whi {
        read += 1;
        let mut word = if want {
            words[w as usize]
        } else {
            !words[w as usize]
        };
        if w == wlo {
            word &= u64::MAX << (lo % 64);
        }
        if word != 0 {
            let idx = w * 64 + u64::from(word.trailing_zeros());
            return (if idx <= hi { Some(idx) } else { None }, read);
        }
    }
    (None, read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_searches_agree_with_a_bool_vector() {
        let mut words = vec![0u64; 4];
        let mut bools = vec![false; 256];
        let ops = [
            (3u64, 70u64, true),
            (10, 12, false),
            (128, 255, true),
            (200, 201, false),
        ];
        for &(lo, hi, set) in &ops {
            if set {
                set_range(&mut words, lo, hi);
            } else {
                clear_range(&mut words, lo, hi);
            }
            for b in &mut bools[lo as usize..=hi as usize] {
                *b = set;
            }
        }
        for lo in (0..256u64).step_by(7) {
            for hi in (lo..256).step_by(11) {
                let slice = &bools[lo as usize..=hi as usize];
                assert_eq!(all_set(&words, lo, hi), slice.iter().all(|&b| b));
                assert_eq!(any_set(&words, lo, hi), slice.iter().any(|&b| b));
                for want in [true, false] {
                    let expect = slice.iter().position(|&b| b == want).map(|p| lo + p as u64);
                    assert_eq!(next_with(&words, lo, hi, want).0, expect);
                }
            }
        }
    }
}
