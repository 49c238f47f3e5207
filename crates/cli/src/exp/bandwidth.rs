//! What the bandwidth experiments (`iommu-penalty`, `vm-p2p`) share: the transfer sizes,
//! one curve per configuration, a table with the configurations side by side and the
//! relative difference of two of them, and a figure per direction.

use super::plot::{Chart, Plot, Series};
use super::refusal::ExpError;
use crate::render::iec_size;
use comfy_table::Table;
use serde::Serialize;
use smartio_workloads::DmaSample;

/// Transfer sizes from 4 KiB to 128 MiB, as the papers' sweeps (every fourth power of two,
/// and 128 MiB to end where they end).
pub const SIZES: [u64; 9] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    128 << 20,
];

/// Copies per size unless `--ops` says otherwise: the model is deterministic, so the
/// median settles at once; three show that it does (min = max).
pub const REPEAT: u32 = 3;

/// The most copies per size `--ops` may ask for (`bench dma --repeat`'s limit).
pub const MAX_REPEAT: u64 = 1000;

/// One configuration's throughput per size, in one direction.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// The configuration.
    pub name: String,
    /// One sample per size, in [`SIZES`] order.
    pub samples: Vec<DmaSample>,
}

/// `(a − b) / b` in percent, at one size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// Transfer size.
    pub size_bytes: u64,
    /// Median throughput of `a` relative to `b`, in percent (negative: `a` is slower).
    pub percent: f64,
}

/// Median throughput of `a` relative to `b` at every size both measured.
pub fn differences(a: &Curve, b: &Curve) -> Vec<Difference> {
    a.samples
        .iter()
        .zip(&b.samples)
        .map(|(x, y)| Difference {
            size_bytes: x.size_bytes,
            percent: (x.median_bytes_per_s - y.median_bytes_per_s) / y.median_bytes_per_s * 100.0,
        })
        .collect()
}

/// Median GB/s with three decimals.
pub fn gbps(s: &DmaSample) -> String {
    format!("{:.3}", s.median_bytes_per_s / 1e9)
}

/// A table header: `measure`, `size`, one column per configuration, and the comparison.
pub fn header<'a>(names: &[&'a str], comparison: &'a str) -> Vec<&'a str> {
    let mut h = vec!["measure", "size"];
    h.extend_from_slice(names);
    h.push(comparison);
    h
}

/// Adds a row per size: the median GB/s of every curve and `compared` (a difference per
/// size, as from [`differences`]).
pub fn add_rows(t: &mut Table, measure: &str, curves: &[Curve], compared: &[Difference]) {
    for (i, d) in compared.iter().enumerate() {
        let mut row = vec![measure.to_string(), iec_size(d.size_bytes)];
        row.extend(
            curves
                .iter()
                .map(|c| c.samples.get(i).map_or_else(String::new, gbps)),
        );
        row.push(format!("{:+.1}", d.percent));
        t.add_row(row);
    }
}

/// A figure of median throughput against transfer size, one line per curve.
pub fn plot(file: &str, title: &str, curves: &[Curve]) -> Plot {
    Plot {
        file: file.into(),
        title: title.into(),
        x_label: "transfer size".into(),
        y_label: "median throughput (GB/s)".into(),
        chart: Chart::SizeLines(
            curves
                .iter()
                .map(|c| Series {
                    name: c.name.clone(),
                    points: c
                        .samples
                        .iter()
                        .map(|s| (s.size_bytes as f64, s.median_bytes_per_s / 1e9))
                        .collect(),
                })
                .collect(),
        ),
    }
}

/// Copies per size from `--ops`: `what` names the experiment in the refusal.
pub fn repeat(ops: Option<u64>, what: &'static str) -> Result<u32, ExpError> {
    let refused = |ops| ExpError::Copies {
        ops,
        exp: what,
        max: MAX_REPEAT,
    };
    match ops {
        None => Ok(REPEAT),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|_| n <= MAX_REPEAT)
            .ok_or_else(|| refused(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(name: &str, rates: &[f64]) -> Curve {
        Curve {
            name: name.into(),
            samples: rates
                .iter()
                .zip(SIZES)
                .map(|(&r, size)| DmaSample::from_seconds(size, &[size as f64 / r]))
                .collect(),
        }
    }

    #[test]
    fn differences_are_relative_to_the_second_curve() {
        let a = curve("a", &[1.0e9, 2.0e9]);
        let b = curve("b", &[2.0e9, 2.0e9]);
        let d = differences(&a, &b);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].size_bytes, 4096);
        assert!((d[0].percent + 50.0).abs() < 1e-9, "{d:?}");
        assert!(d[1].percent.abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn ops_sets_the_copies_per_size_up_to_the_bench_limit() {
        assert_eq!(repeat(None, "x"), Ok(REPEAT));
        assert_eq!(repeat(Some(7), "x"), Ok(7));
        let err = repeat(Some(1001), "iommu-penalty")
            .expect_err("over the limit")
            .to_string();
        assert!(
            err.contains("--ops 1001: iommu-penalty") && err.contains("at most 1000"),
            "{err}"
        );
    }
}
