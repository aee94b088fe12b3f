//! `dmalab calibrate copy`: this machine's memcpy, measured by length (64 B to 4 MiB), with
//! data in cache and out of cache, aligned and not; then a cost model fitted to it (a set-up
//! time plus bytes at a rate) for the simulator's CPU copy costs.
//!
//! In-cache copies repeat on one source and one destination; out-of-cache copies walk through
//! two arenas far larger than the last-level cache, so every copy finds cold lines. Each point
//! is the median of several trials, each trial long enough (about a millisecond) that the
//! clock's resolution does not matter.

use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;

/// One measured point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyPoint {
    /// Bytes per copy.
    pub len_bytes: usize,
    /// `true` when source and destination were hot in cache.
    pub in_cache: bool,
    /// `true` when both buffers started on a 64-byte line; `false` for odd offsets.
    pub aligned: bool,
    /// Median nanoseconds per copy.
    pub ns_per_copy: f64,
}

/// A fitted `ns = setup + len / rate` model for one regime.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyFit {
    /// `true` for in-cache copies.
    pub in_cache: bool,
    /// `true` for aligned copies.
    pub aligned: bool,
    /// The fixed cost per copy, ns.
    pub setup_ns: f64,
    /// The rate, bytes per microsecond.
    pub bytes_per_us: f64,
    /// The largest relative error of the fit over the points it was fitted to.
    pub max_relative_error: f64,
}

/// Measurements and fits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyCalibration {
    /// Every point measured.
    pub points: Vec<CopyPoint>,
    /// One fit per regime.
    pub fits: Vec<CopyFit>,
}

/// Arena size for out-of-cache copies: larger than any last-level cache of a 2-socket server.
const COLD_ARENA_BYTES: usize = 256 << 20;

/// Measure and fit. `quick` measures fewer lengths, a smaller cold arena and shorter trials.
pub fn calibrate(quick: bool) -> CopyCalibration {
    let max_shift = if quick { 16 } else { 22 };
    let lengths: Vec<usize> = (6..=max_shift).map(|s| 1usize << s).collect();
    let arena = if quick { 32 << 20 } else { COLD_ARENA_BYTES };
    let trial_ns = if quick { 200_000 } else { 1_000_000 };
    let trials = if quick { 3 } else { 7 };
    let mut src = vec![1u8; arena + 4096];
    let mut dst = vec![0u8; arena + 4096];
    // Touch every page once so that first-touch faults are not measured.
    src.iter_mut().step_by(4096).for_each(|b| *b = 2);
    dst.iter_mut().step_by(4096).for_each(|b| *b = 0);
    let mut points = Vec::new();
    for &len in &lengths {
        for in_cache in [true, false] {
            for aligned in [true, false] {
                let ns = measure(
                    &src, &mut dst, len, in_cache, aligned, arena, trial_ns, trials,
                );
                points.push(CopyPoint {
                    len_bytes: len,
                    in_cache,
                    aligned,
                    ns_per_copy: ns,
                });
            }
        }
    }
    let fits = [(true, true), (true, false), (false, true), (false, false)]
        .iter()
        .map(|&(c, a)| fit(&points, c, a))
        .collect();
    CopyCalibration { points, fits }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one measurement's settings, each named at the call"
)]
fn measure(
    src: &[u8],
    dst: &mut [u8],
    len: usize,
    in_cache: bool,
    aligned: bool,
    arena: usize,
    trial_ns: u128,
    trials: usize,
) -> f64 {
    let (so, d_off) = if aligned { (0, 0) } else { (1, 3) };
    // Cold copies step through the arena by more than a page so the prefetchers cannot run
    // ahead of them from one copy to the next.
    let stride = (len + 4096 + 64).next_multiple_of(64);
    let slots = (arena / stride).max(1);
    let mut results = Vec::with_capacity(trials);
    let mut slot = 0usize;
    for _ in 0..trials {
        let mut copies = 0u64;
        let start = Instant::now();
        loop {
            for _ in 0..16 {
                let base = if in_cache { 0 } else { slot * stride };
                slot = (slot + 7) % slots;
                let (s, d) = (base + so, base + d_off);
                dst[d..d + len].copy_from_slice(&src[s..s + len]);
                black_box(&mut dst[d]);
                copies += 1;
            }
            if start.elapsed().as_nanos() >= trial_ns {
                break;
            }
        }
        results.push(start.elapsed().as_nanos() as f64 / copies as f64);
    }
    results.sort_by(f64::total_cmp);
    results[results.len() / 2]
}

/// The longest copy the fit covers: packet and mbuf copies (seed 002's are at most 64 KiB).
/// Longer copies are measured and shown but leave the caches for another regime.
pub const FIT_MAX_BYTES: usize = 65_536;

/// Least squares of `ns = a + b * len`, weighted so that every point counts by its relative
/// error (weights 1/ns^2), over the regime's points up to [`FIT_MAX_BYTES`].
fn fit(points: &[CopyPoint], in_cache: bool, aligned: bool) -> CopyFit {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.in_cache == in_cache && p.aligned == aligned && p.len_bytes <= FIT_MAX_BYTES)
        .map(|p| (p.len_bytes as f64, p.ns_per_copy))
        .collect();
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in &pts {
        let w = 1.0 / (y * y).max(1e-9);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let det = sw * sxx - sx * sx;
    let (a, b) = if det.abs() < f64::EPSILON {
        (0.0, 0.0)
    } else {
        ((sxx * sy - sx * sxy) / det, (sw * sxy - sx * sy) / det)
    };
    let (a, b) = (a.max(0.0), b.max(1e-9));
    let max_err = pts
        .iter()
        .map(|&(x, y)| ((a + b * x) - y).abs() / y)
        .fold(0.0, f64::max);
    CopyFit {
        in_cache,
        aligned,
        setup_ns: a,
        bytes_per_us: 1000.0 / b,
        max_relative_error: max_err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_a_known_line() {
        let points: Vec<CopyPoint> = [64usize, 256, 1024, 4096]
            .iter()
            .map(|&l| CopyPoint {
                len_bytes: l,
                in_cache: true,
                aligned: true,
                ns_per_copy: 20.0 + l as f64 / 8.0,
            })
            .collect();
        let f = fit(&points, true, true);
        assert!((f.setup_ns - 20.0).abs() < 1e-6, "{f:?}");
        assert!((f.bytes_per_us - 8000.0).abs() < 1e-3, "{f:?}");
        assert!(f.max_relative_error < 1e-9);
    }
}
