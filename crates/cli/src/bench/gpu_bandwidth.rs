//! `smartio bench gpu-bandwidth`: GPU copy throughput as CUDA bandwidthTest measures it —
//! pinned host memory, copies queued on a stream between two GPU events (Paper V Figs.
//! 22-23).

use crate::error::CliError;
use crate::hosts::host_of_device;
use crate::output::print_json;
use crate::render;
use crate::values::{device, repeat, transfer_size};
use clap::ValueEnum;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{bench_gpu_bandwidth, GpuBandwidthConfig, GpuCopyDirection};

/// `bench gpu-bandwidth` arguments.
#[derive(clap::Args, Debug)]
pub struct GpuBandwidthArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Host whose CPU runs the program (default: the host that has the GPU; a VM is
    /// host/vm).
    #[arg(long)]
    pub host: Option<String>,
    /// The GPU: `gpu0`, or `lender:gpu0` to borrow it.
    #[arg(long, default_value = "gpu0", value_parser = device)]
    pub device: String,
    /// h2d: pinned host memory to GPU memory; d2h: the reverse; d2d: inside the GPU.
    #[arg(long, value_enum, default_value = "h2d")]
    pub direction: GpuDirection,
    /// Transfer sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G and at most the GPU's
    /// memory, e.g. 4K,64K,1M,128M.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        value_parser = transfer_size,
        default_value = "4K,16K,64K,256K,1M,4M,16M,64M,128M"
    )]
    pub sizes: Vec<u64>,
    /// Copies queued between the two events of one sample, 1 to 1000.
    #[arg(long, default_value = "10", value_name = "N", value_parser = repeat)]
    pub copies: u32,
    /// Samples per size, 1 to 1000 (the median is reported).
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

/// `--direction`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum GpuDirection {
    H2d,
    D2h,
    D2d,
}

/// Runs `bench gpu-bandwidth`.
pub fn run(calibration: &Calibration, args: GpuBandwidthArgs) -> Result<(), CliError> {
    let GpuBandwidthArgs {
        scenario,
        host,
        device,
        direction,
        sizes,
        copies,
        repeat,
        json,
        seed,
    } = args;
    let cluster = Cluster::seeded(&scenario, calibration, seed)?;
    let host = match host {
        Some(h) => h,
        None => host_of_device(&cluster, &device)?,
    };
    let config = GpuBandwidthConfig {
        host,
        device,
        direction: copy_direction(direction),
        sizes,
        copies,
        repeat,
    };
    report(&cluster, config, json)
}

/// Runs the copies of `config` on `cluster` and prints them.
fn report(cluster: &Cluster, config: GpuBandwidthConfig, json: bool) -> Result<(), CliError> {
    let result = bench_gpu_bandwidth(cluster, &config)?;
    if json {
        return print_json(&result);
    }
    let what = match result.direction {
        GpuCopyDirection::HostToDevice => "pinned host RAM -> GPU memory",
        GpuCopyDirection::DeviceToHost => "GPU memory -> pinned host RAM",
        GpuCopyDirection::DeviceToDevice => "GPU memory -> GPU memory",
    };
    print!(
        "{}",
        render::wrapped(
            &format!(
                "GPU bandwidth on {} ({} from {}): {what}, copies queued per sample between \
                 two GPU events: {}, samples per size: {}; {} bytes verified",
                result.scenario,
                result.device,
                result.host,
                result.copies,
                result.repeat,
                result.verified_bytes
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&result.samples));
    Ok(())
}

/// The workload's direction for `--direction`.
fn copy_direction(d: GpuDirection) -> GpuCopyDirection {
    match d {
        GpuDirection::H2d => GpuCopyDirection::HostToDevice,
        GpuDirection::D2h => GpuCopyDirection::DeviceToHost,
        GpuDirection::D2d => GpuCopyDirection::DeviceToDevice,
    }
}
