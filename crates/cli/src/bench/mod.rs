//! `smartio bench …`: the benchmarks, one module each, with its options and its run.

mod adapter_dma;
mod dma;
mod engine;
mod gpu_bandwidth;
mod p2p;
mod pio;
mod topo;

pub use dma::DmaArgs;
pub use engine::EngineArgs;
pub use gpu_bandwidth::{GpuBandwidthArgs, GpuDirection};
pub use p2p::P2pArgs;
pub use pio::PioArgs;
pub use topo::TopoBenchArgs;

use crate::error::CliError;
use clap::Subcommand;
use smartio_calibration::Calibration;

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// DMA throughput of the DMA test device per transfer size (like CUDA bandwidthTest), or
    /// with --adapter of the host's NTB adapter's own DMA engine, RAM to remote RAM.
    Dma(DmaArgs),
    /// Peer-to-peer DMA throughput between two devices' memories per transfer size (the
    /// GPU-to-GPU bandwidth test; between GPUs the same as `bench gpu-p2p`).
    P2p(P2pArgs),
    /// GPU copy throughput as CUDA bandwidthTest measures it: pinned host memory, copies
    /// queued on a stream between two GPU events (Paper V Figs. 22-23).
    GpuBandwidth(GpuBandwidthArgs),
    /// Device-to-device copies between two GPUs' memories, each timed by GPU events with a
    /// dummy kernel launched between copies (Paper V Figs. 24 and 26).
    GpuP2p(P2pArgs),
    /// Remote-store (PIO) throughput: one host's CPU stores into another's segment.
    Pio(PioArgs),
    /// Simulated TLP arrivals per wall-clock second: DMA copies of 4 MiB on local-chassis,
    /// half of --bytes written to host RAM, half read from it.
    Engine(EngineArgs),
    /// Wall time and peak memory of bringing up a large cluster: a three-level cascade of
    /// 24-port cluster switches with N hosts, parsed, built and started as every command
    /// does before it runs.
    Topo(TopoBenchArgs),
}

/// Runs the benchmark `bench` names.
pub fn run(calibration: &Calibration, bench: Bench) -> Result<(), CliError> {
    match bench {
        Bench::Dma(args) => dma::run(calibration, args),
        Bench::P2p(args) => p2p::run(calibration, args, false),
        Bench::GpuBandwidth(args) => gpu_bandwidth::run(calibration, args),
        Bench::GpuP2p(args) => p2p::run(calibration, args, true),
        Bench::Pio(args) => pio::run(calibration, args),
        Bench::Engine(args) => engine::run(calibration, args),
        Bench::Topo(args) => topo::run(calibration, args),
    }
}
