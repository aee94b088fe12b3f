//! Where a request fits inside one free run: the alignment and segment-boundary rules, in one place.
//!
//! Every design reduces its search to "here is a maximal free run `[run_lo, run_hi]` (already
//! clipped to the domain and the limit); where, if anywhere, does the request go in it?". Keeping
//! that arithmetic here means the designs differ only in how they find runs.

/// The constraints of one request, validated: `pages >= 1`, `align` a power of two, `boundary`
/// (if any) a power of two no smaller than `pages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fit {
    pub pages: u64,
    pub align: u64,
    pub boundary: Option<u64>,
}

impl Fit {
    /// The constraints of `req` (validated by the caller).
    #[inline(always)]
    pub fn of(req: &crate::types::AllocRequest) -> Self {
        Self {
            pages: req.pages,
            align: req.align_pages,
            boundary: req.boundary_pages,
        }
    }

    /// Whether `[start, start + pages - 1]` crosses a multiple of the boundary.
    #[inline]
    fn crosses(&self, start: u64) -> Option<u64> {
        let b = self.boundary?;
        let end = start + self.pages - 1;
        let line = end & !(b - 1);
        (line > start).then_some(line)
    }

    /// The highest start in `[run_lo, run_hi]` that satisfies the request (top-down placement).
    ///
    /// One boundary correction suffices: when `align <= boundary`, the start
    /// `align_down(line - pages)` lies in `[line - boundary, line - pages]` because `line -
    /// boundary` is itself aligned; when `align > boundary`, every aligned start begins a segment
    /// and `pages <= boundary` keeps it inside.
    #[inline]
    pub fn highest(&self, run_lo: u64, run_hi: u64) -> Option<u64> {
        if run_hi < run_lo || run_hi - run_lo + 1 < self.pages {
            return None;
        }
        let mut start = (run_hi - (self.pages - 1)) & !(self.align - 1);
        if let Some(line) = self.crosses(start) {
            start = line.checked_sub(self.pages)? & !(self.align - 1);
        }
        (start >= run_lo).then_some(start)
    }

    /// The lowest start in `[run_lo, run_hi]` that satisfies the request (first-fit placement).
    #[inline]
    pub fn lowest(&self, run_lo: u64, run_hi: u64) -> Option<u64> {
        if run_hi < run_lo {
            return None;
        }
        let mut start = run_lo.checked_add(self.align - 1)? & !(self.align - 1);
        if let Some(line) = self.crosses(start) {
            // `line` is a multiple of the boundary and so of the alignment when align <= boundary.
            start = line;
        }
        let end = start.checked_add(self.pages - 1)?;
        (end <= run_hi).then_some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(start: u64, f: &Fit) -> bool {
        start.is_multiple_of(f.align) && f.crosses(start).is_none()
    }

    #[test]
    fn highest_and_lowest_agree_with_brute_force() {
        for pages in 1..=9u64 {
            for align in [1u64, 2, 4, 8] {
                for boundary in [None, Some(8u64), Some(16)] {
                    if boundary.is_some_and(|b| pages > b) {
                        continue;
                    }
                    let f = Fit {
                        pages,
                        align,
                        boundary,
                    };
                    // Under Miri, which interprets every step, a sample of the windows.
                    let stride = if cfg!(miri) { 5 } else { 1 };
                    for lo in (0..40u64).step_by(stride) {
                        for hi in (lo..48u64).step_by(stride) {
                            let all: Vec<u64> = (lo..=hi)
                                .filter(|&s| s + pages - 1 <= hi && ok(s, &f))
                                .collect();
                            assert_eq!(f.highest(lo, hi), all.last().copied(), "{f:?} [{lo},{hi}]");
                            assert_eq!(f.lowest(lo, hi), all.first().copied(), "{f:?} [{lo},{hi}]");
                        }
                    }
                }
            }
        }
    }
}
