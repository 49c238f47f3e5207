//! `smartio bench p2p` and `bench gpu-p2p`: peer-to-peer copies between two devices'
//! memories per transfer size — between two GPUs the papers' program on the GPU model (each
//! copy timed by GPU events), between DMA test devices the CPU-driven copy.

use crate::error::CliError;
use crate::hosts::first_host;
use crate::output::print_json;
use crate::render;
use crate::values::{device, repeat, transfer_size, Direction};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::gpu::is_gpu;
use smartio_workloads::{bench_gpu_p2p, bench_p2p, GpuP2pConfig, P2pConfig, P2pDirection};

/// The options of `bench p2p` and `bench gpu-p2p`.
#[derive(clap::Args, Debug)]
pub struct P2pArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Host whose CPU drives the source (default: the scenario's first host).
    #[arg(long)]
    pub host: Option<String>,
    /// The device whose copy engine moves the data: `gpu0`, or `lender:gpu0` to borrow it.
    #[arg(long, value_parser = device)]
    pub source: String,
    /// The device whose memory is written or read: `gpu1` or `lender2:gpu2`.
    #[arg(long, value_parser = device)]
    pub target: String,
    /// write: source memory to target memory; read: target memory to source memory.
    #[arg(long, value_enum, default_value = "write")]
    pub direction: Direction,
    /// Transfer sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G and at most both
    /// devices' memory (a GPU target's: its BAR1 aperture), e.g. 4K,64K,1M,128M.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        value_parser = transfer_size,
        default_value = "4K,16K,64K,256K,1M,4M,16M,64M"
    )]
    pub sizes: Vec<u64>,
    /// Copies per size, 1 to 1000 (the median is reported).
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
}

/// `bench p2p`, and `bench gpu-p2p` (`gpu_only`): two GPUs (or one, whose partner the GPU
/// workload then refuses) run the papers' program on the GPU model; two DMA test devices
/// the CPU-driven copy.
pub fn run(calibration: &Calibration, args: P2pArgs, gpu_only: bool) -> Result<(), CliError> {
    let P2pArgs {
        scenario,
        host,
        source,
        target,
        direction,
        sizes,
        repeat,
        seed,
        json,
    } = args;
    let cluster = Cluster::seeded(&scenario, calibration, seed)?;
    let host = match host {
        Some(h) => h,
        None => first_host(&cluster)?,
    };
    let direction = match direction {
        Direction::Write => P2pDirection::Write,
        Direction::Read => P2pDirection::Read,
    };
    if gpu_only || is_gpu(&cluster, &host, &source) || is_gpu(&cluster, &host, &target) {
        let config = GpuP2pConfig {
            host,
            source,
            target,
            direction,
            sizes,
            repeat,
        };
        return on_gpus(&cluster, config, json, gpu_only);
    }
    let config = P2pConfig {
        host,
        source,
        target,
        direction,
        sizes,
        repeat,
    };
    let samples = bench_p2p(&cluster, &config)?;
    if json {
        return print_json(&samples);
    }
    let (verb, from, to) = way(direction, &config.source, &config.target);
    print!(
        "{}",
        render::wrapped(
            &format!(
                "peer-to-peer DMA {verb} on {scenario}: {from} memory -> {to} memory, driven by \
                 {}'s CPU through {}'s copy engine, {} repeats per size",
                config.host, config.source, repeat
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&samples));
    Ok(())
}

/// `bench gpu-p2p`, and `bench p2p` between two GPUs.
fn on_gpus(
    cluster: &Cluster,
    config: GpuP2pConfig,
    json: bool,
    full_json: bool,
) -> Result<(), CliError> {
    let result = bench_gpu_p2p(cluster, &config)?;
    if json {
        // `bench p2p --json` keeps its shape (the samples); `bench gpu-p2p` prints everything.
        return if full_json {
            print_json(&result)
        } else {
            print_json(&result.samples)
        };
    }
    let (verb, from, to) = way(result.direction, &result.source, &result.target);
    print!(
        "{}",
        render::wrapped(
            &format!(
                "GPU peer-to-peer {verb} on {}: {from} memory -> {to} memory by {}'s copy engine, \
                 programmed from {}; each copy timed by GPU events, a dummy kernel between \
                 copies, copies per size: {}; {} bytes verified",
                result.scenario, result.source, result.host, result.repeat, result.verified_bytes
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&result.samples));
    print!(
        "{}",
        render::wrapped(
            &format!(
                "path {} -> {} memory: {}",
                result.source,
                result.target,
                result.path.join(" -> ")
            ),
            "",
            "  "
        )
    );
    Ok(())
}

/// The verb of `direction`'s copies, and the memory they go from and to: a write goes from
/// the source device's memory to the target's, a read the other way.
fn way<'a>(
    direction: P2pDirection,
    source: &'a str,
    target: &'a str,
) -> (&'static str, &'a str, &'a str) {
    match direction {
        P2pDirection::Write => ("writes", source, target),
        P2pDirection::Read => ("reads", target, source),
    }
}
