//! Order statistics over repeated measurements, in memory that does not grow with the
//! number of samples.
//!
//! [`LatencyRecorder`] takes one latency (picoseconds) at a time. It keeps the exact count,
//! minimum, maximum and sum, and the distribution two ways:
//!
//! - **exactly**, as the distinct values in order with their counts, while the run has at most
//!   [`EXACT_DISTINCT_VALUES`] distinct values (samples are kept as they come, up to
//!   [`PENDING_SAMPLES`], and counted in by one sort and merge when that many have come or a
//!   figure is asked for: recording one is a push). The timing model is deterministic, so a run
//!   usually has few (a QD1 run on an idle path has one): percentiles are then the exact
//!   nearest-rank values of the samples, as if every sample had been kept and sorted;
//! - past that, as an HdrHistogram with 3 significant decimal digits (values within 0.1 %
//!   of each other share a bucket), into which the counts are folded once. Percentiles are then
//!   the upper end of their bucket, clamped to `[min, max]`.
//!
//! Either way the memory is bounded (at most a few hundred KiB per recorder) whatever the
//! number of samples, and the same samples give the same figures.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::borrow::Cow;

/// Distinct values a [`LatencyRecorder`] keeps exactly before it folds them into a histogram.
pub const EXACT_DISTINCT_VALUES: usize = 4096;

/// Samples a [`LatencyRecorder`] keeps as they came before it counts them in with the others.
pub const PENDING_SAMPLES: usize = 4096;

/// Significant decimal digits of the histogram a [`LatencyRecorder`] falls back to.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Median of a non-empty slice (mean of the middle two for even lengths).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// How a [`LatencyRecorder`] holds its distribution.
#[derive(Debug, Clone)]
enum Distribution {
    /// Every distinct value counted so far and how often it was seen, in increasing order,
    /// and the samples recorded since, not yet counted in (at most [`PENDING_SAMPLES`]).
    Exact {
        counted: Vec<(u64, u64)>,
        pending: Vec<u64>,
    },
    /// Too many distinct values: buckets of 3 significant digits.
    Histogram(Box<Histogram<u64>>),
}

/// Latencies in picoseconds, one at a time, in bounded memory (see the module docs).
///
/// Invariants: `count` is the number of recorded samples; `min <= max` when `count > 0`;
/// `sum` is their exact sum; the distribution holds exactly `count` samples.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    distribution: Distribution,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> LatencyRecorder {
        LatencyRecorder {
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            distribution: Distribution::Exact {
                counted: Vec::new(),
                pending: Vec::new(),
            },
        }
    }

    /// Records one latency of `ps` picoseconds.
    pub fn record(&mut self, ps: u64) {
        self.count += 1;
        self.min = self.min.min(ps);
        self.max = self.max.max(ps);
        self.sum += u128::from(ps);
        match &mut self.distribution {
            Distribution::Exact { pending, .. } => {
                pending.push(ps);
                if pending.len() >= PENDING_SAMPLES {
                    self.settle();
                }
            }
            Distribution::Histogram(h) => put(h, ps, 1),
        }
    }

    /// Counts the pending samples in with the others (sorted, then merged); past
    /// [`EXACT_DISTINCT_VALUES`] distinct values, folds them all into the histogram.
    fn settle(&mut self) {
        let Distribution::Exact { counted, pending } = &mut self.distribution else {
            return;
        };
        if pending.is_empty() {
            return;
        }
        pending.sort_unstable();
        let mut merged = Vec::with_capacity(counted.len() + pending.len());
        let mut older = counted.iter().copied().peekable();
        let mut newer = pending.iter().copied().peekable();
        loop {
            // The smaller of the two next values, with its count from both.
            let next = match (older.peek().copied(), newer.peek().copied()) {
                (None, None) => break,
                (Some((v, n)), Some(p)) if v <= p => {
                    older.next();
                    (v, n)
                }
                (Some((v, n)), None) => {
                    older.next();
                    (v, n)
                }
                (_, Some(p)) => {
                    newer.next();
                    (p, 1)
                }
            };
            match merged.last_mut() {
                Some((v, n)) if *v == next.0 => *n += next.1,
                _ => merged.push(next),
            }
        }
        *counted = merged;
        pending.clear();
        if counted.len() > EXACT_DISTINCT_VALUES {
            // Creating a histogram of 3 significant digits cannot fail; should it, the
            // counts simply stay exact.
            if let Ok(h) = fold(counted) {
                self.distribution = Distribution::Histogram(Box::new(h));
            }
        }
    }

    /// This recorder with every sample counted in: itself when none is pending, else a
    /// settled copy. Figures asked one after another are best asked of one settled view.
    pub fn settled(&self) -> Cow<'_, LatencyRecorder> {
        match &self.distribution {
            Distribution::Exact { pending, .. } if !pending.is_empty() => {
                let mut r = self.clone();
                r.settle();
                Cow::Owned(r)
            }
            _ => Cow::Borrowed(self),
        }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest sample (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Sum of the samples.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Whether percentiles are exact (at most `EXACT_DISTINCT_VALUES` distinct values so
    /// far).
    pub fn is_exact(&self) -> bool {
        matches!(self.settled().distribution, Distribution::Exact { .. })
    }

    /// The sample of 1-based nearest rank `rank` (clamped to `1..=count`); 0 when empty.
    fn at_rank(&self, rank: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = rank.clamp(1, self.count);
        let settled = self.settled();
        match &settled.distribution {
            Distribution::Exact { counted, .. } => {
                let mut seen = 0;
                for &(value, n) in counted {
                    seen += n;
                    if seen >= rank {
                        return value;
                    }
                }
                self.max
            }
            Distribution::Histogram(h) => {
                let mut seen = 0;
                for v in h.iter_recorded() {
                    seen += v.count_at_value();
                    if seen >= rank {
                        return h
                            .highest_equivalent(v.value_iterated_to())
                            .clamp(self.min, self.max);
                    }
                }
                self.max
            }
        }
    }

    /// The `p`-th percentile (0..=100) by nearest rank: the smallest sample with at least
    /// `p` % of the samples at or below it. 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        // The same rank as sorting every sample and taking index ceil(p/100 * n) - 1.
        let rank = (p / 100.0 * self.count as f64).ceil() as u64;
        self.at_rank(rank)
    }

    /// The middle two samples (the same one twice for an odd count), whose mean is the
    /// median as `median` takes it; `(0, 0)` when empty.
    pub fn middle(&self) -> (u64, u64) {
        let r = self.settled();
        let half = r.count / 2;
        if r.count % 2 == 1 {
            let m = r.at_rank(half + 1);
            (m, m)
        } else {
            (r.at_rank(half), r.at_rank(half + 1))
        }
    }

    /// Arithmetic mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

/// An auto-resizing histogram (it grows with the largest value, not with the count) holding
/// what `counted` counted.
fn fold(counted: &[(u64, u64)]) -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    let mut h = Histogram::new(SIGNIFICANT_DIGITS)?;
    for &(value, n) in counted {
        put(&mut h, value, n);
    }
    Ok(h)
}

/// Records `n` samples of `value`, growing the histogram as needed; a value past what it can
/// grow to (about 4.6e18 ps, 53 days) counts as its largest.
fn put(h: &mut Histogram<u64>, value: u64, n: u64) {
    // Saturating recording clamps without growing, so grow first.
    if h.record_n(value, n).is_err() {
        h.saturating_record_n(value, n);
    }
}

/// Latency percentiles in nanoseconds (nearest rank over the samples; see
/// [`LatencyRecorder`] for when they are exact).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl LatencySummary {
    /// Summarizes samples given in picoseconds.
    pub fn from_ps(samples: &[u64]) -> LatencySummary {
        let mut r = LatencyRecorder::new();
        for &s in samples {
            r.record(s);
        }
        LatencySummary::of(&r)
    }

    /// Summarizes a recorder (picoseconds) in nanoseconds.
    pub fn of(r: &LatencyRecorder) -> LatencySummary {
        let r = r.settled();
        let ns = |ps: u64| ps as f64 / 1000.0;
        LatencySummary {
            min: ns(r.percentile(0.0)),
            p50: ns(r.percentile(50.0)),
            p99: ns(r.percentile(99.0)),
            max: ns(r.percentile(100.0)),
            mean: r.mean() / 1000.0,
        }
    }

    /// Half of every value: the one-way latency of a symmetric round trip.
    pub fn halved(&self) -> LatencySummary {
        LatencySummary {
            min: self.min / 2.0,
            p50: self.p50 / 2.0,
            p99: self.p99 / 2.0,
            max: self.max / 2.0,
            mean: self.mean / 2.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let ps: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let s = LatencySummary::from_ps(&ps);
        assert_eq!((s.min, s.p50, s.p99, s.max), (1.0, 50.0, 99.0, 100.0));
        assert_eq!(s.mean, 50.5);
    }

    #[test]
    fn an_empty_recorder_reports_zeros() {
        let r = LatencyRecorder::new();
        assert_eq!(
            (r.count(), r.min(), r.max(), r.percentile(50.0)),
            (0, 0, 0, 0)
        );
        assert_eq!((r.mean(), r.middle()), (0.0, (0, 0)));
    }

    #[test]
    fn the_recorders_middle_is_the_middle_of_the_sorted_samples() {
        let mut r = LatencyRecorder::new();
        for v in [4u64, 1, 3, 2] {
            r.record(v);
        }
        assert_eq!(r.middle(), (2, 3));
        r.record(10);
        assert_eq!(r.middle(), (3, 3));
    }

    /// The nearest-rank `p`-th percentile of `samples`, sorting them all.
    fn nearest_rank(samples: &[u64], p: f64) -> u64 {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    #[test]
    fn exact_percentiles_are_those_of_every_sample_sorted_whenever_they_are_asked() {
        // Samples with repeats, out of order, over several batches of pending samples;
        // figures asked after each count of samples, between batches and at their edges.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let samples: Vec<u64> = (0..3 * PENDING_SAMPLES + 7)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                1_000 + x % 3_000
            })
            .collect();
        let mut r = LatencyRecorder::new();
        for (i, &s) in samples.iter().enumerate() {
            r.record(s);
            let n = i + 1;
            if [
                1,
                2,
                99,
                PENDING_SAMPLES - 1,
                PENDING_SAMPLES,
                PENDING_SAMPLES + 1,
            ]
            .contains(&n)
                || n == samples.len()
            {
                let seen = &samples[..n];
                for p in [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
                    assert_eq!(r.percentile(p), nearest_rank(seen, p), "p{p} of {n}");
                }
                let mut sorted = seen.to_vec();
                sorted.sort_unstable();
                let middle = if n % 2 == 1 {
                    (sorted[n / 2], sorted[n / 2])
                } else {
                    (sorted[n / 2 - 1], sorted[n / 2])
                };
                assert_eq!(r.middle(), middle, "middle of {n}");
                assert!(r.is_exact(), "{n} samples of at most 3000 distinct values");
            }
        }
        let s = LatencySummary::of(&r);
        let ns = |p| nearest_rank(&samples, p) as f64 / 1000.0;
        assert_eq!(
            (s.min, s.p50, s.p99, s.max),
            (ns(0.0), ns(50.0), ns(99.0), ns(100.0))
        );
    }

    #[test]
    fn distinct_values_past_the_limit_spread_over_batches_fold_into_the_histogram() {
        // Each batch alone has fewer distinct values than the limit; together, more.
        let mut r = LatencyRecorder::new();
        let n = 2 * EXACT_DISTINCT_VALUES as u64 + 10;
        for v in 0..n {
            r.record(1_000_000 + (v * 7919) % n * 1_000);
        }
        assert!(!r.is_exact());
        r.record(5);
        let Distribution::Histogram(h) = &r.distribution else {
            panic!("expected the histogram form once past the limit");
        };
        assert_eq!(h.len(), n + 1, "every sample is in the histogram");
        assert_eq!((r.min(), r.percentile(0.0)), (5, 5));
    }

    #[test]
    fn a_long_run_of_equal_samples_is_reported_exactly() {
        let mut same = LatencyRecorder::new();
        for _ in 0..100_000 {
            same.record(54_545_460);
        }
        assert!(same.is_exact());
        let s = LatencySummary::of(&same);
        assert_eq!(
            (s.min, s.p50, s.p99, s.max, s.mean),
            (54_545.46, 54_545.46, 54_545.46, 54_545.46, 54_545.46)
        );
    }

    #[test]
    fn past_the_exact_limit_percentiles_are_within_a_thousandth_and_inside_min_max() {
        let mut r = LatencyRecorder::new();
        let n = 3 * EXACT_DISTINCT_VALUES as u64;
        for v in 1..=n {
            r.record(v * 1_000);
        }
        assert!(!r.is_exact());
        assert_eq!((r.count(), r.min(), r.max()), (n, 1_000, n * 1_000));
        for (p, exact) in [
            (50.0, n / 2 * 1_000),
            (99.0, (n * 99).div_ceil(100) * 1_000),
        ] {
            let got = r.percentile(p);
            let error = got.abs_diff(exact) as f64 / exact as f64;
            assert!(error <= 1e-3, "p{p}: {got} vs {exact}");
        }
        assert_eq!(
            r.percentile(100.0),
            n * 1_000,
            "clamped to the exact maximum"
        );
        assert_eq!(r.percentile(0.0), 1_000, "clamped to the exact minimum");
        assert_eq!(r.mean(), (n + 1) as f64 / 2.0 * 1_000.0);
    }

    #[test]
    fn in_the_histogram_form_a_narrow_cluster_is_reported_inside_its_min_and_max() {
        let mut r = LatencyRecorder::new();
        // 5000 distinct values within 0.01 % of each other: one or two buckets.
        for v in 0..5000u64 {
            r.record(54_545_460 + v);
        }
        assert!(!r.is_exact());
        for p in [0.0, 50.0, 99.0, 100.0] {
            let got = r.percentile(p);
            assert!((54_545_460..=54_550_459).contains(&got), "p{p}: {got}");
        }
    }

    #[test]
    fn a_million_distinct_samples_keep_the_recorder_small() {
        let mut r = LatencyRecorder::new();
        for v in 0..1_000_000u64 {
            r.record(10_000_000 + v * 7);
        }
        let Distribution::Histogram(h) = &r.distribution else {
            panic!("expected the histogram form");
        };
        // 3 significant digits over 7 decades: a few thousand buckets, not a million.
        assert!(h.distinct_values() < 100_000, "{}", h.distinct_values());
        assert_eq!(r.count(), 1_000_000);
    }
}
