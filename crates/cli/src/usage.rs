//! Combinations of options the commands refuse, and options a scenario cannot serve: checked
//! by the command before anything runs, each with the values that make it wrong.

use smartio_fabric::DeviceRefError;
use smartio_platform::SimDuration;
use smartio_workloads::UnknownRwMode;
use std::path::PathBuf;
use thiserror::Error;

/// A command line the command refuses.
#[derive(Debug, Error)]
pub enum Usage {
    /// `--rw` that is no mode.
    #[error("--rw: {0}")]
    Rw(#[source] UnknownRwMode),
    /// `--rwmixread` without `--rw randrw`.
    #[error(
        "--rwmixread: only with --rw randrw (it sets the mix of reads and writes; --rw {rw} has \
         none)"
    )]
    Rwmixread {
        /// `--rw` as given.
        rw: String,
    },
    /// `--mode` with a method whose completions are polled.
    #[error(
        "--mode {mode}: only with --method native (the distributed driver's clients always poll \
         their completions)"
    )]
    ModeWithClient {
        /// As given.
        mode: String,
    },
    /// `--mode` that is no completion mode.
    #[error("--mode: {0}")]
    Mode(#[source] smartio_drivers::nvme::UnknownCompletionMode),
    /// `--manager` with the native driver.
    #[error(
        "--manager: only with --method nvme-client or nvme-block (the native driver has no \
         manager)"
    )]
    ManagerWithNative,
    /// A distributed-driver method without `--manager`.
    #[error(
        "--method {method} needs --manager HOST (the host running the distributed driver's \
         manager)"
    )]
    NoManager {
        /// The method.
        method: String,
    },
    /// `--method` that is none.
    #[error("--method: unknown method {method:?} (native, nvme-client, nvme-block)")]
    Method {
        /// As given.
        method: String,
    },
    /// `--backing` that is a directory.
    #[error("--backing {path}: is a directory; give a file (created if missing)")]
    BackingIsDirectory {
        /// As given.
        path: String,
    },
    /// `--backing` in a directory that does not exist.
    #[error("--backing {path}: the directory {} does not exist", .dir.display())]
    BackingDirectory {
        /// As given.
        path: String,
        /// Its directory.
        dir: PathBuf,
    },
    /// A scenario without hosts.
    #[error("the scenario has no host")]
    NoHost,
    /// `--device` no host has.
    #[error(
        "--device {device:?}: no host of the scenario has it (name a lender with --host, or use \
         lender:device)"
    )]
    NoOwner {
        /// As given.
        device: String,
    },
    /// `--device` several hosts have.
    #[error("--device {device:?}: several hosts have it ({}); choose one with --host", .owners.join(", "))]
    SeveralOwners {
        /// As given.
        device: String,
        /// The hosts that have one.
        owners: Vec<String>,
    },
    /// `--counters` for a ping-pong between devices that are no GPUs.
    #[error("--counters: only for a ping-pong between GPUs (kernels); {a} and {b} are not GPUs")]
    CountersWithoutGpus {
        /// `--device-a`.
        a: String,
        /// `--device-b`.
        b: String,
    },
    /// `pingpong` with neither pair of options.
    #[error("pingpong needs --from and --to (hosts), or --device-a and --device-b")]
    PingpongEnds,
    /// `--host` for a ping-pong between CPUs.
    #[error(
        "--host {host}: only with --device-a and --device-b (the host they are attached to); a \
         ping-pong between CPUs runs between --from and --to"
    )]
    HostWithCpus {
        /// As given.
        host: String,
    },
    /// An explanation option with `bench dma --adapter`.
    #[error(
        "{option}: not with --adapter (the adapter's DMA engine is not explained yet; bench dma \
         on a DMA test device is)"
    )]
    ExplainAdapter {
        /// The option.
        option: &'static str,
    },
    /// `bench dma --adapter` on a scenario without adapters.
    #[error("--adapter: no host of scenario {scenario} has an NTB adapter")]
    NoAdapter {
        /// The scenario.
        scenario: String,
    },
    /// An iperf end that is not `HOST=DEVICE`.
    #[error("--{option} {text:?}: expected HOST=DEVICE, e.g. borrower=lender:nic0")]
    IperfEnd {
        /// `client` or `server`.
        option: &'static str,
        /// As given.
        text: String,
    },
    /// An iperf end without host or device.
    #[error("--{option} {text:?}: both the host and the device must be named (HOST=DEVICE)")]
    IperfEndHalf {
        /// `client` or `server`.
        option: &'static str,
        /// As given.
        text: String,
    },
    /// An iperf end's device name that is none.
    #[error("--{option} {text:?}: {source}")]
    IperfDevice {
        /// `client` or `server`.
        option: &'static str,
        /// As given.
        text: String,
        /// Why.
        source: DeviceRefError,
    },
    /// `--interval` longer than `--time`.
    #[error(
        "--interval {} us: longer than --time {} us: no report would fall inside the run",
        us(*.interval),
        us(*.time)
    )]
    IntervalPastTime {
        /// `--interval`.
        interval: SimDuration,
        /// `--time`.
        time: SimDuration,
    },
    /// `--interval` making too many reports.
    #[error(
        "--interval {} us: more than {max} reports in --time {} us (allowed: an interval of at \
         least a {max}th of the time)",
        us(*.interval),
        us(*.time)
    )]
    TooManyReports {
        /// `--interval`.
        interval: SimDuration,
        /// `--time`.
        time: SimDuration,
        /// The most reports.
        max: u64,
    },
    /// `bench dma` without `--adapter` or `--scenario`.
    #[error("--scenario: required without --adapter")]
    NoScenario,
    /// `serve nbd` without a place to listen.
    #[error("give --socket PATH or --port N")]
    NoListener,
    /// `--trace` that is a directory.
    #[error("--trace {}: is a directory", .path.display())]
    TraceIsDirectory {
        /// As given.
        path: PathBuf,
    },
    /// `--trace` in a directory that does not exist.
    #[error("--trace {}: the directory {} does not exist", .path.display(), .dir.display())]
    TraceDirectory {
        /// As given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// `app train --manager` with the native driver.
    #[error(
        "--manager {manager}: only with --method nvme-client (the native driver has no manager)"
    )]
    TrainManagerWithNative {
        /// As given.
        manager: String,
    },
    /// `app train --method nvme-client` without `--manager`.
    #[error(
        "--method nvme-client: give --manager HOST, the host that runs the distributed driver's \
         manager"
    )]
    TrainNoManager,
    /// `app video` on a scenario without GPUs.
    #[error("{scenario} has no GPU to run video analysis on")]
    NoGpu {
        /// The scenario.
        scenario: String,
    },
}

/// A duration in microseconds, as the iperf refusals show it.
fn us(d: SimDuration) -> f64 {
    d.as_ps() as f64 / 1e6
}
