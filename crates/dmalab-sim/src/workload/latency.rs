//! Latency distributions: every operation's latency goes into an HDR histogram, so a run's
//! memory stays bounded however many operations it has, while the mean and the maximum stay
//! exact and the percentiles are within 0.1% of the exact order statistics.
//!
//! The histogram is the HdrHistogram design (Gil Tene's high dynamic range histogram, in its
//! maintained Rust port): logarithmic buckets each split linearly into enough sub-buckets for
//! three significant decimal digits, growing as larger values arrive.

use crate::units::Ps;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Significant decimal digits the histogram keeps: a percentile is within 0.1% of the latency
/// at that rank.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Buckets per doubling in the histogram a report carries for plotting (quarter octaves).
const PLOT_BUCKETS_PER_OCTAVE: f64 = 4.0;

/// The latencies of a run's operations as they complete.
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    /// A run of equal latencies not yet in `hist`: the value and how many (a closed loop
    /// with one request in flight repeats its latency; one `record_n` per run costs less than
    /// a record per operation and counts the same).
    run_value: u64,
    run_len: u64,
    sum_ps: u128,
    max_ps: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        let hist = Histogram::new(SIGNIFICANT_DIGITS)
            .unwrap_or_else(|_| unreachable!("3 significant digits is within 0..=5"));
        LatencyRecorder {
            hist,
            run_value: 0,
            run_len: 0,
            sum_ps: 0,
            max_ps: 0,
        }
    }

    /// Count one operation's latency.
    pub fn record(&mut self, latency: Ps) {
        // The histogram grows to take every value up to i64::MAX ps (106 days); a larger one
        // saturates into its top bucket, while the sum and the maximum stay exact.
        if latency.0 == self.run_value && self.run_len > 0 {
            self.run_len += 1;
        } else {
            Self::add_run(&mut self.hist, self.run_value, self.run_len);
            (self.run_value, self.run_len) = (latency.0, 1);
        }
        self.sum_ps += u128::from(latency.0);
        self.max_ps = self.max_ps.max(latency.0);
    }

    /// Put `n` operations of latency `value` ps into `hist`.
    fn add_run(hist: &mut Histogram<u64>, value: u64, n: u64) {
        if n > 0 && hist.record_n(value, n).is_err() {
            hist.saturating_record_n(value, n);
        }
    }

    /// The histogram of every operation recorded, the pending run included.
    fn settled(&self) -> Cow<'_, Histogram<u64>> {
        if self.run_len == 0 {
            return Cow::Borrowed(&self.hist);
        }
        let mut h = self.hist.clone();
        Self::add_run(&mut h, self.run_value, self.run_len);
        Cow::Owned(h)
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.hist.len() + self.run_len
    }

    /// The distribution read out: exact mean and maximum, percentiles, and the histogram in
    /// quarter-octave buckets.
    pub fn summary(&self) -> Latency {
        let hist = self.settled();
        let n = hist.len();
        let mean = u64::try_from(self.sum_ps / u128::from(n.max(1))).unwrap_or(u64::MAX);
        // A bucket's highest equivalent value can pass the largest latency seen: cap it there.
        let at = |q: f64| {
            if n == 0 {
                Ps::ZERO
            } else {
                Ps(hist.value_at_quantile(q).min(self.max_ps))
            }
        };
        Latency {
            count: n,
            mean_ps: Ps(mean),
            p50_ps: at(0.5),
            p90_ps: at(0.9),
            p99_ps: at(0.99),
            p99_9_ps: at(0.999),
            p99_99_ps: at(0.9999),
            max_ps: Ps(self.max_ps),
            histogram: plot_buckets(&hist),
        }
    }
}

/// The values of `hist` in quarter-octave buckets, lowest first, empty buckets left out.
fn plot_buckets(hist: &Histogram<u64>) -> Vec<LatencyBucket> {
    let mut buckets: BTreeMap<i64, u64> = BTreeMap::new();
    for v in hist.iter_recorded() {
        let value = hist.median_equivalent(v.value_iterated_to()).max(1);
        let index = ((value as f64).log2() * PLOT_BUCKETS_PER_OCTAVE).floor() as i64;
        *buckets.entry(index).or_default() += v.count_since_last_iteration();
    }
    let edge_us = |i: i64| (i as f64 / PLOT_BUCKETS_PER_OCTAVE).exp2() / 1e6;
    buckets
        .into_iter()
        .map(|(i, count)| LatencyBucket {
            low_us: edge_us(i),
            high_us: edge_us(i + 1),
            count,
        })
        .collect()
}

/// A run's latency distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// Operations measured.
    pub count: u64,
    /// Exact mean.
    pub mean_ps: Ps,
    /// Median.
    pub p50_ps: Ps,
    /// 90th percentile.
    pub p90_ps: Ps,
    /// 99th percentile.
    pub p99_ps: Ps,
    /// 99.9th percentile.
    pub p99_9_ps: Ps,
    /// 99.99th percentile.
    pub p99_99_ps: Ps,
    /// Exact maximum.
    pub max_ps: Ps,
    /// Counts in quarter-octave buckets (for plotting), lowest first, empty ones left out.
    pub histogram: Vec<LatencyBucket>,
}

/// One bucket of a latency histogram: `count` operations took from `low_us` up to `high_us`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyBucket {
    /// The bucket's lower edge, microseconds (inclusive).
    pub low_us: f64,
    /// The bucket's upper edge, microseconds (exclusive).
    pub high_us: f64,
    /// Operations in the bucket.
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact nearest-rank percentile of a sorted list, for comparison.
    fn exact(sorted: &[u64], q: f64) -> u64 {
        sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
    }

    #[test]
    fn runs_of_equal_latencies_count_as_single_records() {
        // Runs of repeats (and values past the histogram's range) summarise exactly as the
        // same values put into a histogram one by one, read at any point.
        let mut rec = LatencyRecorder::new();
        let mut one_by_one = Histogram::<u64>::new(SIGNIFICANT_DIGITS).unwrap();
        let mut x: u64 = 7;
        for i in 0..5_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = match x >> 61 {
                0 => u64::MAX - (x >> 62),
                1..=4 => 1_000_000,
                _ => 1_000 + (x >> 40) % 5_000,
            };
            rec.record(Ps(v));
            if one_by_one.record(v).is_err() {
                one_by_one.saturating_record(v);
            }
            if i % 997 == 0 || i == 4_999 {
                let s = rec.summary();
                assert_eq!(rec.count(), one_by_one.len());
                assert_eq!(s.count, one_by_one.len());
                assert_eq!(s.histogram, plot_buckets(&one_by_one));
                assert_eq!(
                    s.p99_ps,
                    Ps(one_by_one.value_at_quantile(0.99).min(s.max_ps.0))
                );
                assert_eq!(*rec.settled(), one_by_one);
            }
        }
    }

    #[test]
    fn percentiles_are_within_a_thousandth_of_the_exact_ones() {
        let mut rec = LatencyRecorder::new();
        let mut values = Vec::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 1 us to about 4 ms, log-spread as latencies are.
            let v = (1_000_000u64 << (x % 12)) | ((x >> 40) % 1_000_000);
            values.push(v);
            rec.record(Ps(v));
        }
        values.sort_unstable();
        let s = rec.summary();
        for (q, got) in [
            (0.5, s.p50_ps),
            (0.9, s.p90_ps),
            (0.99, s.p99_ps),
            (0.999, s.p99_9_ps),
            (0.9999, s.p99_99_ps),
        ] {
            let want = exact(&values, q) as f64;
            assert!(
                (got.0 as f64 - want).abs() <= want * 1e-3,
                "q {q}: {got:?} vs {want}"
            );
        }
        assert_eq!(s.max_ps.0, *values.last().unwrap());
        let mean = values.iter().map(|&v| u128::from(v)).sum::<u128>() / values.len() as u128;
        assert_eq!(u128::from(s.mean_ps.0), mean);
        assert_eq!(s.histogram.iter().map(|b| b.count).sum::<u64>(), 200_000);
    }

    #[test]
    fn percentiles_are_ordered_and_capped_by_the_maximum() {
        let mut rec = LatencyRecorder::new();
        for v in [7_000_000u64, 7_000_000, 7_000_000, 9_000_001] {
            rec.record(Ps(v));
        }
        let s = rec.summary();
        let ps = [
            s.p50_ps,
            s.p90_ps,
            s.p99_ps,
            s.p99_9_ps,
            s.p99_99_ps,
            s.max_ps,
        ];
        assert!(ps.windows(2).all(|w| w[0] <= w[1]), "{ps:?}");
        assert_eq!(s.p99_99_ps, Ps(9_000_001));
        assert_eq!(s.mean_ps, Ps(7_500_000));
    }

    #[test]
    fn an_empty_recorder_reads_zero() {
        let s = LatencyRecorder::new().summary();
        assert_eq!(
            (s.count, s.mean_ps, s.p99_ps, s.max_ps),
            (0, Ps::ZERO, Ps::ZERO, Ps::ZERO)
        );
        assert!(s.histogram.is_empty());
    }

    #[test]
    fn memory_stays_bounded_however_many_operations() {
        let mut rec = LatencyRecorder::new();
        for i in 0..5_000_000u64 {
            rec.record(Ps(1_000_000 + (i % 100_000) * 97));
        }
        let before = rec.hist.distinct_values();
        for i in 0..5_000_000u64 {
            rec.record(Ps(1_000_000 + (i % 100_000) * 97));
        }
        assert_eq!(rec.hist.distinct_values(), before);
        assert_eq!(rec.count(), 10_000_000);
    }
}
