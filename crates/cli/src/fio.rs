//! `smartio fio`: a fio-like block workload on an NVMe, through the native NVMe driver or a
//! client of the distributed NVMe driver (`--method`); with `--breakdown`, the p50 and p99
//! I/Os' critical paths, and with `--trace` the recorded run's timeline.

use crate::error::CliError;
use crate::explain;
use crate::nvme_options::{self, announce_backing, check_backing, nvme_key};
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::values::{
    block_size, device, fio_ops, iodepth, jobs, nsid, percent, range_size, runtime,
};
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_drivers::CompletionMode;
use smartio_platform::SimDuration;
use smartio_workloads::fio::FioMethod;
use smartio_workloads::{run_fio, Amount, FioConfig, RwMode};

/// `smartio fio` arguments.
#[derive(clap::Args, Debug)]
pub struct FioArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Host whose CPUs run the workload.
    #[arg(long)]
    pub host: String,
    /// NVMe device in that host's tree, or `lender:nvme0` to borrow it.
    #[arg(long, value_parser = device)]
    pub device: String,
    /// read, write, randread, randwrite or randrw.
    #[arg(long, default_value = "randread")]
    pub rw: String,
    /// Block size in bytes (K, M = KiB, MiB), a multiple of the namespace's LBA size and at
    /// most the controller's maximum transfer (MDTS), e.g. 4k.
    #[arg(long, default_value = "4k", value_name = "SIZE", value_parser = block_size)]
    pub bs: u64,
    /// I/Os in flight per job, 1 to 4095 (an NVMe queue of the emulated controller has 4096
    /// entries, one always empty); jobs × iodepth × bs is at most 1 GiB of buffers.
    #[arg(long, default_value = "1", value_name = "N", value_parser = iodepth)]
    pub iodepth: u32,
    /// Total I/Os over all jobs, 1 to 1000000000 (about three hours of wall time at the
    /// emulator's ~100k I/Os per second) [default: 10000 unless --runtime].
    #[arg(long, conflicts_with = "runtime", value_name = "N", value_parser = fio_ops)]
    pub ops: Option<u64>,
    /// Virtual run time instead of --ops, e.g. 10ms, 1s: more than 0 and at most 3600s (an
    /// hour of virtual time takes an hour or more of wall time). Units ns, us, ms, s; the
    /// unit is required (a bare 10 is refused).
    #[arg(long, value_name = "TIME", value_parser = runtime)]
    pub runtime: Option<SimDuration>,
    /// Jobs, each on its own CPU and its own I/O queue pair; more jobs than the controller
    /// (or manager) grants pairs is an error that says how many it grants.
    #[arg(long, default_value = "1", value_name = "N", value_parser = jobs)]
    pub jobs: u32,
    /// Check every byte read against what was written (first writes the whole range,
    /// which may then be at most 4 GiB).
    #[arg(long)]
    pub verify: bool,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Bytes of the namespace to use, from its start (default: the namespace, at most 1G).
    /// Blocks written are kept in memory unless the namespace has a backing file.
    #[arg(long, value_name = "SIZE", value_parser = range_size)]
    pub size: Option<u64>,
    /// Namespace id, 1 to 4294967294 (0 is no namespace, 0xFFFFFFFF means all).
    #[arg(long, default_value = "1", value_name = "NSID", value_parser = nsid)]
    pub nsid: u32,
    /// Percentage of reads, 0 to 100; only with --rw randrw [default: 50].
    #[arg(long, value_name = "PERCENT", value_parser = percent)]
    pub rwmixread: Option<u32>,
    /// Native driver completion mode: interrupt or poll [default: interrupt]. The
    /// distributed driver's clients (--method nvme-client, nvme-block) always poll.
    #[arg(long)]
    pub mode: Option<String>,
    /// Keep the NVMe's namespaces in this file (overrides the scenario's `backing`). A new
    /// file is created sparse at the namespaces' full size (said on stderr); only written
    /// blocks take disk space.
    #[arg(long, value_name = "FILE")]
    pub backing: Option<String>,
    /// How to reach the controller: native (the NVMe driver on --host), nvme-client (a
    /// client of the distributed driver on --host, one queue pair per job, polled) or
    /// nvme-block (the distributed driver's kernel block client on --host: a disk with a
    /// hardware queue and queue pair per job, data through its bounce buffer, polled).
    #[arg(long, default_value = "native")]
    pub method: String,
    /// Host running the distributed driver's manager (with --method nvme-client or
    /// nvme-block).
    #[arg(long)]
    pub manager: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the time went (--breakdown, --trace).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

/// `smartio fio`: the option combinations are checked here, the values' ranges by clap
/// and [`FioConfig::check`], what depends on the controller by the workload.
pub fn run(calibration: &Calibration, a: FioArgs) -> Result<(), CliError> {
    let config = fio_config(&a)?;
    if let Some(path) = a.backing.as_deref() {
        check_backing(path)?;
    }
    let mut options = ClusterOptions {
        seed: a.seed,
        ..ClusterOptions::default()
    };
    let backing = a.backing.as_deref().map(|path| {
        let key = nvme_key(&config.host, &config.device);
        options.nvme_backing.push((key, path.into()));
        (path, std::path::Path::new(path).exists())
    });
    a.explain.check()?;
    let cluster = Cluster::with_options(&a.scenario, calibration, &options)?;
    if let Some((path, false)) = backing {
        announce_backing(path, &config.device);
    }
    let explain = &a.explain;
    let (result, explained) = explain
        .run(
            || Ok(run_fio(&cluster, &config)?),
            |r| explain::p50_p99(r.lat_ns.p50, r.lat_ns.p99),
            |spec| {
                // The same run again, recorded, on a fresh cluster.
                let cluster = Cluster::with_options(&a.scenario, calibration, &options)?;
                Ok(smartio_workloads::fio::run_fio_explained(
                    &cluster,
                    &config,
                    Some(spec),
                )?)
            },
        )?
        .write_trace(explain)?;
    if a.json {
        print_json(&explain::WithBreakdown::new(&result, &explained))
    } else {
        print!("{}", render::fio_summary(&a.scenario, &result));
        print!("{}", explain::render(&explained, "I/O"));
        Ok(())
    }
}

/// The workload `a` asks for, with every option combination and value checked
/// ([`FioConfig::check`]) — all that can be checked before anything is booted; the budget's
/// model of fio reckons only with inputs that pass.
pub fn fio_config(a: &FioArgs) -> Result<FioConfig, CliError> {
    let rw: RwMode = a.rw.parse().map_err(Usage::Rw)?;
    if a.rwmixread.is_some() && rw != RwMode::RandRw {
        return Err(Usage::Rwmixread { rw: a.rw.clone() }.into());
    }
    let method = nvme_options::method(&a.method, a.manager.clone())?;
    let mode: CompletionMode = match (&a.mode, &method) {
        (Some(m), FioMethod::NvmeClient { .. } | FioMethod::NvmeBlock { .. }) => {
            return Err(Usage::ModeWithClient { mode: m.clone() }.into());
        }
        (Some(m), _) => m.parse().map_err(Usage::Mode)?,
        (None, _) => CompletionMode::Interrupt,
    };
    let amount = match (a.ops, a.runtime) {
        (Some(n), _) => Amount::Ops(n),
        (None, Some(t)) => Amount::Runtime(t),
        (None, None) => Amount::Ops(10_000),
    };
    let config = FioConfig {
        host: a.host.clone(),
        device: a.device.clone(),
        rw,
        bs: a.bs,
        iodepth: a.iodepth,
        amount,
        jobs: a.jobs,
        verify: a.verify,
        seed: a.seed,
        size: a.size,
        nsid: a.nsid,
        rwmixread: a.rwmixread.unwrap_or(50),
        mode,
        method,
    };
    config.check()?;
    Ok(config)
}
