//! Small order statistics over repeated measurements.

use serde::Serialize;

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

/// Latency percentiles in nanoseconds (nearest rank over exact samples).
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
        let mut v = samples.to_vec();
        v.sort_unstable();
        let rank = |p: f64| -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            let i = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
            v[i] as f64 / 1000.0
        };
        let mean = if v.is_empty() {
            0.0
        } else {
            v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1000.0
        };
        LatencySummary {
            min: rank(0.0),
            p50: rank(50.0),
            p99: rank(99.0),
            max: rank(100.0),
            mean,
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
}
