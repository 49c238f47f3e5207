//! `smartio bench dma`: the DMA test device copying between its memory and host RAM, each
//! copy timed until the CPU sees its completion word (like CUDA's `bandwidthTest`); with
//! `--adapter`, the NTB adapter's own DMA engine instead ([`super::adapter_dma`]).
//!
//! With `--breakdown`, each copy is an operation, and the copy nearest the median time of
//! the smallest size and of the largest size is explained: the smallest shows the fixed
//! costs of a copy (the descriptor, the doorbell, the engine's setup, the completion word
//! and its poll), the largest what limits the throughput. Every size in between is the
//! same mix in another proportion, so the two read better than a table per size.

use crate::error::CliError;
use crate::explain;
use crate::hosts::host_of_device;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::values::{device, repeat, transfer_size, Direction};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_platform::SimDuration;
use smartio_workloads::{
    bench_dma_explained, copy_kind, DmaBenchConfig, DmaDirection, DmaSample, Target,
};

/// `bench dma`'s options.
#[derive(clap::Args, Debug)]
pub struct DmaArgs {
    /// A shipped scenario name or a scenario file (with --adapter: default
    /// pxh810-back-to-back, Paper I's machines).
    #[arg(long, required_unless_present = "adapter")]
    pub scenario: Option<String>,
    /// Host whose CPU drives the device (default: the host that has the device; with
    /// --adapter, the first host with an NTB adapter).
    #[arg(long)]
    pub host: Option<String>,
    /// The DMA test device.
    #[arg(long, default_value = "dma0", conflicts_with = "adapter", value_parser = device)]
    pub device: String,
    /// Drive the DMA engine of the host's NTB adapter 0 instead (through a DMA queue, as
    /// SISCI does): between a segment in the host's RAM and one in the RAM of the host its
    /// adapter is cabled to (Paper I Fig. 4a).
    #[arg(long)]
    pub adapter: bool,
    /// write: device memory to host RAM; read: host RAM to device memory. With --adapter,
    /// write pushes host RAM into the peer's RAM, read pulls the peer's RAM into host RAM.
    #[arg(long, value_enum, default_value = "write")]
    pub direction: Direction,
    /// Transfer sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G and at most the
    /// device's memory (with --adapter, what both hosts' RAM holds), e.g. 4K,64K,1M,128M.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        value_parser = transfer_size,
        default_value = "4K,16K,64K,256K,512K,1M,4M,16M,64M,128M"
    )]
    pub sizes: Vec<u64>,
    /// Copies per size, 1 to 1000 (the median is reported; a deterministic model
    /// settles within a few).
    #[arg(long, default_value = "5", value_name = "N", value_parser = repeat)]
    pub repeat: u32,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the time went (--breakdown, --trace; not with --adapter).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

/// Runs `bench dma`.
pub fn run(calibration: &Calibration, args: DmaArgs) -> Result<(), CliError> {
    if args.adapter {
        if let Some(option) = args.explain.given() {
            return Err(Usage::ExplainAdapter { option }.into());
        }
        let adapter = super::adapter_dma::AdapterDmaArgs {
            scenario: args.scenario,
            host: args.host,
            direction: args.direction,
            sizes: args.sizes,
            repeat: args.repeat,
            seed: args.seed,
            json: args.json,
        };
        return super::adapter_dma::run(calibration, adapter);
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
