//! `smartio bench dma`: the DMA test device copying between its memory and host RAM, each
//! copy timed until the CPU sees its completion word (like CUDA's `bandwidthTest`); with
//! `--adapter`, the NTB adapter's own DMA engine instead ([`crate::adapter_dma`]).
//!
//! With `--breakdown`, each copy is an operation, and the copy nearest the median time of
//! the smallest size and of the largest size is explained: the smallest shows the fixed
//! costs of a copy (the descriptor, the doorbell, the engine's setup, the completion word
//! and its poll), the largest what limits the throughput. Every size in between is the
//! same mix in another proportion, so the two read better than a table per size.

use crate::args::DmaArgs;
use crate::error::CliError;
use crate::explain;
use crate::hosts::host_of_device;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::values::Direction;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_platform::SimDuration;
use smartio_workloads::{
    bench_dma_explained, copy_kind, DmaBenchConfig, DmaDirection, DmaSample, Target,
};

/// Runs `bench dma`.
pub fn run(calibration: &Calibration, args: DmaArgs) -> Result<(), CliError> {
    if args.adapter {
        if let Some(option) = args.explain.given() {
            return Err(Usage::ExplainAdapter { option }.into());
        }
        let adapter = crate::adapter_dma::AdapterDmaArgs {
            scenario: args.scenario,
            host: args.host,
            direction: args.direction,
            sizes: args.sizes,
            repeat: args.repeat,
            seed: args.seed,
            json: args.json,
        };
        return crate::adapter_dma::run(calibration, adapter);
    }
    args.explain.check()?;
    // clap requires --scenario without --adapter.
    let scenario = args.scenario.clone().ok_or(Usage::NoScenario)?;
    let cluster = || Cluster::seeded(&scenario, calibration, args.seed);
    let first = cluster()?;
    let host = match &args.host {
        Some(h) => h.clone(),
        None => host_of_device(&first, &args.device)?,
    };
    let direction = match args.direction {
        Direction::Write => DmaDirection::Write,
        Direction::Read => DmaDirection::Read,
    };
    let config = DmaBenchConfig {
        host,
        device: args.device.clone(),
        direction,
        sizes: args.sizes.clone(),
        repeat: args.repeat,
    };
    let explain = &args.explain;
    let (samples, explained) = explain
        .run(
            || Ok(bench_dma_explained(&first, &config, None).map(|(run, _)| run)?),
            |run| median_copies(&run.samples),
            |spec| Ok(bench_dma_explained(&cluster()?, &config, Some(spec))?),
        )?
        .write_trace(explain)?;
    let samples = samples.samples;
    if args.json {
        if explained.is_empty() {
            return print_json(&samples);
        }
        // With a breakdown the samples move into an object beside it.
        #[derive(serde::Serialize)]
        struct WithBreakdown<'a> {
            samples: &'a [DmaSample],
            breakdown: Vec<explain::ExplainedJson>,
        }
        return print_json(&WithBreakdown {
            samples: &samples,
            breakdown: explain::to_json(&explained),
        });
    }
    print!(
        "{}",
        render::wrapped(
            &format!(
                "DMA {} on {} ({}:{}), {} repeats per size",
                if matches!(direction, DmaDirection::Write) {
                    "writes (device -> host RAM)"
                } else {
                    "reads (host RAM -> device)"
                },
                scenario,
                config.host,
                config.device,
                args.repeat
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&samples));
    print!("{}", explain::render(&explained, "copy"));
    Ok(())
}

/// The copies to explain: the one nearest the median time of the smallest size, and of the
/// largest (one target when they are the same size).
fn median_copies(samples: &[DmaSample]) -> Vec<Target> {
    let smallest = samples.iter().min_by_key(|s| s.size_bytes);
    let largest = samples.iter().max_by_key(|s| s.size_bytes);
    let mut targets = Vec::new();
    for s in smallest.into_iter().chain(largest) {
        if targets
            .iter()
            .any(|t: &Target| t.of.as_deref() == Some(copy_kind(s.size_bytes).as_str()))
        {
            continue;
        }
        targets.push(Target {
            name: format!("median {}", render::iec_size(s.size_bytes)),
            latency: SimDuration::from_ns_f64(s.median_ns),
            of: Some(copy_kind(s.size_bytes)),
        });
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(size: u64, ns: f64) -> DmaSample {
        DmaSample::from_seconds(size, &[ns / 1e9])
    }

    #[test]
    fn the_smallest_and_the_largest_sizes_median_copies_are_explained() {
        let t = median_copies(&[
            sample(65536, 9_000.0),
            sample(4096, 2_000.0),
            sample(1 << 20, 90_000.0),
        ]);
        let names: Vec<(&str, Option<&str>)> = t
            .iter()
            .map(|t| (t.name.as_str(), t.of.as_deref()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("median 4 KiB", Some("4096 B")),
                ("median 1 MiB", Some("1048576 B"))
            ]
        );
        assert_eq!(t[0].latency, SimDuration::from_ns(2_000));
    }

    #[test]
    fn one_size_is_explained_once() {
        assert_eq!(median_copies(&[sample(4096, 2_000.0)]).len(), 1);
    }
}
