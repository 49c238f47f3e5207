//! `smartio pingpong`: the round trip between two hosts' CPUs through NTB-mapped segments
//! (`--from`, `--to`), between two devices' kernels by peer-to-peer stores (`--device-a`,
//! `--device-b`), or between kernels on two GPUs timed by the pinging GPU's cycle counter
//! (`--gpu`, or both devices GPUs). With `--breakdown`, the p50 and p99 round trips'
//! critical paths, reported by the pinging task; with `--trace`, the recorded run's
//! timeline.

use crate::error::CliError;
use crate::explain;
use crate::hosts::first_host;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::values::{device, iterations};
use clap::ValueEnum;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::gpu::is_gpu;
use smartio_workloads::{
    device_pingpong_explained, gpu_pingpong_explained, pingpong_explained, CounterPlace,
    DevicePingPongConfig, ExplainSpec, GpuPingPongConfig, PingPongConfig,
};

/// `smartio pingpong` arguments.
#[derive(clap::Args, Debug)]
pub struct PingpongArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// The host that pings.
    #[arg(
        long,
        required_unless_present = "device_a",
        conflicts_with_all = ["device_a", "device_b"]
    )]
    pub from: Option<String>,
    /// The host that echoes.
    #[arg(long, required_unless_present = "device_a", conflicts_with_all = ["device_a", "device_b"])]
    pub to: Option<String>,
    /// The pinging device (a GPU or DMA test device): `gpu0`, or `lender:gpu0` to borrow it.
    #[arg(long, requires = "device_b", value_parser = device)]
    pub device_a: Option<String>,
    /// The echoing device.
    #[arg(long, requires = "device_a", value_parser = device)]
    pub device_b: Option<String>,
    /// Host the devices are attached to (default: the scenario's first host).
    #[arg(long, requires = "device_a")]
    pub host: Option<String>,
    /// Run the ping-pong as kernels on two GPUs timed by the pinging GPU's cycle counter
    /// (the default when both devices are GPUs; with --gpu, anything else is refused).
    #[arg(long, requires = "device_a")]
    pub gpu: bool,
    /// Where the GPU kernels' counters live: each GPU's memory, or the host's RAM.
    #[arg(long, value_enum, requires = "device_a")]
    pub counters: Option<Counters>,
    /// Round trips, 1 to 100000000 (about five minutes of wall time at the most; the
    /// percentiles settle long before).
    /// Default: 1000, or 100000 between GPUs (the papers' count).
    #[arg(long, value_name = "N", value_parser = iterations)]
    pub iterations: Option<u32>,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the time went (--breakdown, --trace).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

/// `--counters`: where the GPU kernels' counters live.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Counters {
    Gpu,
    Host,
}

/// Round trips of a ping-pong when `--iterations` is not given.
const PINGPONG_ITERATIONS: u32 = 1000;
/// Round trips of a GPU ping-pong when `--iterations` is not given: the papers' 100,000
/// (Paper V §7.1.4).
const GPU_PINGPONG_ITERATIONS: u32 = 100_000;

/// Runs `smartio pingpong`.
pub fn run(calibration: &Calibration, args: PingpongArgs) -> Result<(), CliError> {
    args.explain.check()?;
    match (&args.device_a, &args.device_b) {
        (Some(a), Some(b)) => devices(calibration, &args, a, b),
        _ => cpus(calibration, &args),
    }
}

/// A fresh cluster of the run's scenario and seed (each run, recorded or not, boots its own).
fn cluster(calibration: &Calibration, args: &PingpongArgs) -> Result<Cluster, CliError> {
    Ok(Cluster::seeded(&args.scenario, calibration, args.seed)?)
}

/// `--device-a A --device-b B`: kernels on two devices (GPUs, or DMA test devices).
fn devices(
    calibration: &Calibration,
    args: &PingpongArgs,
    a: &str,
    b: &str,
) -> Result<(), CliError> {
    let first = cluster(calibration, args)?;
    let host = match &args.host {
        Some(h) => h.clone(),
        None => first_host(&first)?,
    };
    let explain = &args.explain;
    if args.gpu || is_gpu(&first, &host, a) || is_gpu(&first, &host, b) {
        let config = GpuPingPongConfig {
            host,
            a: a.to_string(),
            b: b.to_string(),
            iterations: args.iterations.unwrap_or(GPU_PINGPONG_ITERATIONS),
            counters: counter_place(args.counters),
        };
        let run = |cluster: &Cluster, spec: Option<&ExplainSpec>| {
            gpu_pingpong_explained(cluster, &config, spec)
        };
        let (result, explained) = explain
            .run(
                || Ok(run(&first, None).map(|(r, _)| r)?),
                |r| explain::p50_p99(r.rtt_ns.p50, r.rtt_ns.p99),
                |spec| Ok(run(&cluster(calibration, args)?, Some(spec))?),
            )?
            .write_trace(explain)?;
        return report(args, &result, &explained, render::gpu_pingpong);
    }
    if args.counters.is_some() {
        return Err(Usage::CountersWithoutGpus {
            a: a.to_string(),
            b: b.to_string(),
        }
        .into());
    }
    let config = DevicePingPongConfig {
        host,
        a: a.to_string(),
        b: b.to_string(),
        iterations: args.iterations.unwrap_or(PINGPONG_ITERATIONS),
    };
    let run = |cluster: &Cluster, spec: Option<&ExplainSpec>| {
        device_pingpong_explained(cluster, &config, spec)
    };
    let (result, explained) = explain
        .run(
            || Ok(run(&first, None).map(|(r, _)| r)?),
            |r| explain::p50_p99(r.rtt_ns.p50, r.rtt_ns.p99),
            |spec| Ok(run(&cluster(calibration, args)?, Some(spec))?),
        )?
        .write_trace(explain)?;
    report(args, &result, &explained, render::device_pingpong)
}

/// `--from A --to B`: two hosts' CPUs.
fn cpus(calibration: &Calibration, args: &PingpongArgs) -> Result<(), CliError> {
    let (Some(from), Some(to)) = (&args.from, &args.to) else {
        return Err(Usage::PingpongEnds.into());
    };
    if let Some(h) = &args.host {
        return Err(Usage::HostWithCpus { host: h.clone() }.into());
    }
    let config = PingPongConfig {
        from: from.clone(),
        to: to.clone(),
        iterations: args.iterations.unwrap_or(PINGPONG_ITERATIONS),
    };
    let run = |spec: Option<&ExplainSpec>| -> Result<_, CliError> {
        Ok(pingpong_explained(
            &cluster(calibration, args)?,
            &config,
            spec,
        )?)
    };
    let explain = &args.explain;
    let (result, explained) = explain
        .run(
            || run(None).map(|(r, _)| r),
            |r| explain::p50_p99(r.rtt_ns.p50, r.rtt_ns.p99),
            |spec| run(Some(spec)),
        )?
        .write_trace(explain)?;
    report(args, &result, &explained, |r| {
        format!(
            "{}{}\n",
            render::wrapped(
                &format!(
                    "ping-pong on {}: {} -> {} -> {}, {} round trips (8-byte stores into the peer's segment, polled locally)",
                    r.scenario, r.from, r.to, r.from, r.iterations
                ),
                "",
                "  "
            ),
            render::latency_table("round trip", &r.rtt_ns)
        )
    })
}

/// Prints `result` (`text` renders it) and its breakdown, or both as JSON.
fn report<R: serde::Serialize>(
    args: &PingpongArgs,
    result: &R,
    explained: &[smartio_workloads::Explained],
    text: impl Fn(&R) -> String,
) -> Result<(), CliError> {
    if args.json {
        return print_json(&explain::WithBreakdown::new(result, explained));
    }
    print!("{}", text(result));
    print!("{}", explain::render(explained, "round trip"));
    Ok(())
}

/// The workload's counter place for `--counters` (GPU memory unless told).
fn counter_place(c: Option<Counters>) -> CounterPlace {
    match c {
        Some(Counters::Host) => CounterPlace::Host,
        Some(Counters::Gpu) | None => CounterPlace::Gpu,
    }
}
