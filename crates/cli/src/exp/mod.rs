//! `smartio exp NAME`: the papers' experiments on the device API and the distributed NVMe
//! driver. Each prints a table (or JSON with `--json`) and, with `--plots DIR`, writes its
//! SVG figures there (nothing is written without it).
//!
//! An experiment is a function from a [`Setup`] to a [`Report`]; the workloads it runs live
//! in `smartio-workloads`, this module only chooses their parameters and presents them.

pub(crate) mod bandwidth;
mod failover;
mod gpu_nvme;
mod iommu_penalty;
mod migrate;
mod multicast;
mod nvmeof;
pub mod plot;
pub(crate) mod refusal;
mod share;
mod sq_placement;
pub(crate) mod sriov;
mod sriov_share;
mod train;
mod video;
mod vm_nvme;
mod vm_p2p;

pub use nvmeof::Options as NvmeofOptions;
pub use plot::{Bar, Chart, Plot, Series};

pub use crate::cells::{ms, ns, table};
use crate::error::CliError;
use clap::ValueEnum;
use comfy_table::Table;
pub use refusal::ExpError;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_machine::LinkTraffic;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;

/// The experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum ExpName {
    /// QD1 4 KiB reads by a distributed-driver client with its SQ in borrower RAM, lender
    /// RAM, a GPU next to the controller, or the controller's memory (Paper V Fig. 34).
    SqPlacement,
    /// One Identify whose data buffer is a multicast group lands in every other host.
    Multicast,
    /// A client with a queue pair on each of two NTB paths; the primary cable is cut
    /// mid-run and the client carries on over the backup.
    Failover,
    /// Thirty clients on thirty hosts, a queue pair each, reading one NVMe concurrently with
    /// verification; the 32nd queue pair is refused.
    #[value(name = "share-30")]
    Share30,
    /// The SmartIO driver local and remote against NVMe-oF over RDMA (Paper V Fig. 36).
    NvmeofCompare,
    /// One NVMe read locally, from a local VFIO VM, a bare-metal borrower and an MDEV VM
    /// borrower, with interrupts and polling, and sequential bandwidth (ICPP'18 Fig. 7).
    VmNvme,
    /// Cold migration of a VM with an NVMe passed through by MDEV, with verified data and
    /// the time of each step (Paper V §5.5).
    Migrate,
    /// DMA throughput of a borrowed device without and with the lender IOMMU, and through
    /// MDEV in a VM (Paper V Fig. 31); runs on back-to-back and vm-chassis.
    IommuPenalty,
    /// Device-to-device throughput and ping-pong latency with two devices passed through
    /// to a VM by local VFIO, by MDEV, and borrowed by a bare-metal host (Paper V Figs.
    /// 32-33).
    VmP2p,
    /// A GPU reads an NVMe through a queue pair in its own memory, its kernel submitting,
    /// ringing and reaping with no CPU in the data path, against the CPU driving the same
    /// read (Paper V §6.4, Fig. 18); `--ops` is commands of 64 KiB (default 1 GiB).
    GpuNvme,
    /// iperf throughput from a 100 GbE NIC's function used by its own host and lent to
    /// another (Paper V Fig. 28); `--ops` is milliseconds of virtual time (default 4).
    Sriov,
    /// One SR-IOV NIC shared by several hosts at once, a VF each (Paper V Fig. 29), and
    /// lender ↔ borrower through its internal switch; `--ops` is milliseconds (default 4).
    SriovShare,
    /// CNN training with its GPUs and NVMe local, on one lender, and on two lenders
    /// (Paper V Fig. 30), and natively and in VMs with every IOMMU on (Paper IV Fig. 21);
    /// runs on local-chassis, back-to-back, cluster-switch and vm-chassis; `--ops` is epochs
    /// (default 2).
    Train,
    /// Frames per second against the number of full-HD streams, with the local GPUs alone
    /// and with a borrowed one added (Paper II); `--ops` is frames per stream.
    Video,
}

impl ExpName {
    /// The shipped scenario the experiment runs on unless `--scenario` says otherwise.
    pub fn default_scenario(self) -> &'static str {
        match self {
            ExpName::SqPlacement => "cluster-switch",
            ExpName::Multicast => "cascade-60",
            ExpName::Failover => "dual-path",
            ExpName::Share30 => "cascade-60",
            ExpName::NvmeofCompare => "back-to-back",
            ExpName::VmNvme => "vm-back-to-back",
            ExpName::Migrate => "vm-cluster",
            ExpName::IommuPenalty => iommu_penalty::IOMMU_SCENARIO,
            ExpName::VmP2p => "vm-back-to-back",
            ExpName::GpuNvme => "cluster-switch",
            ExpName::Sriov => "sriov",
            ExpName::SriovShare => "sriov-share",
            ExpName::Train => "local-chassis",
            ExpName::Video => "video-lending",
        }
    }

    /// The experiment's name as the command line writes it (`share-30`).
    pub fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(|| format!("{self:?}"), |v| v.get_name().to_string())
    }
}

/// `smartio exp` arguments.
#[derive(clap::Args, Debug)]
pub struct ExpArgs {
    /// Which experiment.
    pub name: ExpName,
    /// A shipped scenario name or a scenario file (default: the experiment's own).
    #[arg(long)]
    pub scenario: Option<String>,
    /// I/Os per measured run, 1 to 10000000 (default: the experiment's own; share-30 runs
    /// them on each client; multicast has no I/Os to count and refuses it; iommu-penalty:
    /// copies per transfer size, at most 1000; vm-p2p: ping-pong round trips; gpu-nvme:
    /// 64 KiB commands per read).
    #[arg(long, value_name = "N", value_parser = crate::values::exp_ops)]
    pub ops: Option<u64>,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Write the SVG figures into this directory (created if missing); without it no file
    /// is written.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Check every byte read (failover only: share-30 and nvmeof-compare always check,
    /// sq-placement and multicast time reads without checking, iommu-penalty and vm-p2p
    /// copies).
    #[arg(long)]
    pub verify: bool,
    /// nvmeof-compare only: the rows' I/O, randread, randwrite or both [default: both].
    #[arg(long, value_enum, value_name = "RW")]
    pub rw: Option<nvmeof::Rw>,
    /// nvmeof-compare only: the NVMe-oF initiator, polled (user space, against the local
    /// SmartIO driver), kernel (nvme-rdma, against the native driver with interrupts and the
    /// block layer) or both [default: both].
    #[arg(long, value_enum, value_name = "INITIATOR")]
    pub initiator: Option<nvmeof::Initiator>,
    /// nvmeof-compare only: the NVMe-oF target, spdk (software, polling) or offload (the HCA
    /// serves the commands) [default: spdk].
    #[arg(long, value_enum, value_name = "MODE")]
    pub target_mode: Option<nvmeof::Target>,
    /// vm-nvme only: where the time went (--breakdown: each row's p50 QD1 read with
    /// interrupts and a table of the rows by kind of step; --trace: the four recorded runs).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

/// The scenarios experiments booted, for a report that shows them (`repro`); clones share
/// one log.
#[derive(Debug, Clone, Default)]
pub struct ScenarioLog(Rc<RefCell<BTreeSet<String>>>);

impl ScenarioLog {
    /// Notes that `scenario` was booted.
    pub fn record(&self, scenario: &str) {
        self.0.borrow_mut().insert(scenario.to_string());
    }

    /// Every scenario noted, by name.
    pub fn names(&self) -> Vec<String> {
        self.0.borrow().iter().cloned().collect()
    }
}

/// What an experiment gets.
pub struct Setup<'a> {
    /// The scenario to load.
    pub scenario: String,
    /// The calibration in force.
    pub calibration: &'a Calibration,
    /// `--ops`, if given.
    pub ops: Option<u64>,
    /// `--seed`.
    pub seed: u64,
    /// `--rw`, `--initiator`, `--target-mode` (nvmeof-compare's own).
    pub nvmeof: NvmeofOptions,
    /// What the links of each cluster the experiment ran carried, in the order the clusters
    /// were done with (see [`RecordedCluster`]).
    pub traffic: Rc<RefCell<Vec<RunTraffic>>>,
    /// Where the scenarios booted are noted.
    pub used: ScenarioLog,
}

/// What the links of one cluster an experiment ran carried over its whole life (set-up
/// included), the links that carried nothing left out.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunTraffic {
    /// The cluster's scenario.
    pub scenario: String,
    /// Its links.
    pub links: Vec<LinkTraffic>,
}

/// A cluster an experiment runs, which adds what its links carried to the experiment's
/// [`Setup::traffic`] when the experiment is done with it.
pub struct RecordedCluster {
    cluster: Cluster,
    scenario: String,
    log: Rc<RefCell<Vec<RunTraffic>>>,
}

impl std::ops::Deref for RecordedCluster {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for RecordedCluster {
    fn drop(&mut self) {
        let links = LinkTraffic::carried_since(&[], self.cluster.machine.link_traffic());
        self.log.borrow_mut().push(RunTraffic {
            scenario: std::mem::take(&mut self.scenario),
            links,
        });
    }
}

impl Setup<'_> {
    /// A fresh cluster of the scenario (every measured run boots its own).
    pub fn cluster(&self) -> Result<RecordedCluster, CliError> {
        self.cluster_of(&self.scenario)
    }

    /// A fresh cluster of another scenario, for experiments that compare two.
    pub fn cluster_of(&self, scenario: &str) -> Result<RecordedCluster, CliError> {
        self.used.record(scenario);
        let cluster = Cluster::seeded(scenario, self.calibration, self.seed)?;
        Ok(RecordedCluster {
            cluster,
            scenario: scenario.to_string(),
            log: self.traffic.clone(),
        })
    }

    /// The scenario's enumerated fabric only, to read host and device names from (no
    /// devices started, nothing booted).
    pub fn fabric(&self) -> Result<smartio_fabric::Fabric, CliError> {
        self.used.record(&self.scenario);
        Ok(smartio_cluster::load_calibrated_fabric(
            &self.scenario,
            self.calibration,
        )?)
    }
}

/// What an experiment produced.
pub struct Report {
    /// One line saying what was measured.
    pub title: String,
    /// The results.
    pub table: Table,
    /// The model's account of the results, and anything else worth saying.
    pub notes: Vec<String>,
    /// Figures to write.
    pub plots: Vec<Plot>,
    /// The full result for `--json`.
    pub json: serde_json::Value,
}

/// Runs `smartio exp`.
pub fn run(calibration: &Calibration, args: ExpArgs) -> Result<(), CliError> {
    let setup = Setup {
        scenario: args
            .scenario
            .clone()
            .unwrap_or_else(|| args.name.default_scenario().to_string()),
        calibration,
        ops: args.ops,
        seed: args.seed,
        nvmeof: NvmeofOptions {
            rw: args.rw,
            initiator: args.initiator,
            target_mode: args.target_mode,
        },
        traffic: Default::default(),
        used: ScenarioLog::default(),
    };
    check(&args, &setup)?;
    let (report, breakdown) = if args.explain.any() {
        vm_nvme::run_explained(&setup, &args.explain)?
    } else {
        (produce(&setup, args.name, args.verify)?, String::new())
    };
    let written = match &args.plots {
        Some(dir) => report
            .plots
            .iter()
            .map(|p| p.write(dir).map(|path| path.display().to_string()))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    if args.json {
        let out = serde_json::json!({
            "experiment": args.name.name(),
            "scenario": setup.scenario,
            "result": report.json,
            "notes": report.notes,
            "plots": written,
            "links": *setup.traffic.borrow(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // An experiment that picks its own scenarios names them itself.
        let title = match args.name {
            ExpName::IommuPenalty | ExpName::Train => report.title.clone(),
            _ => format!("{} on {}", report.title, setup.scenario),
        };
        print!("{}", crate::render::wrapped(&title, "", "  "));
        println!("{}", report.table);
        for note in &report.notes {
            print!("{}", crate::render::wrapped(note, "- ", "  "));
        }
        print!("{breakdown}");
        for path in &written {
            println!("wrote {path}");
        }
        if args.plots.is_none() && !report.plots.is_empty() {
            let note = format!(
                "({} figure{} not written; give --plots DIR to write {})",
                report.plots.len(),
                if report.plots.len() == 1 { "" } else { "s" },
                report
                    .plots
                    .iter()
                    .map(|p| p.file.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            print!("{}", crate::render::wrapped(&note, "", " "));
        }
    }
    Ok(())
}

/// Runs experiment `name` on `setup` (its arguments already checked).
pub fn produce(setup: &Setup, name: ExpName, verify: bool) -> Result<Report, CliError> {
    match name {
        ExpName::SqPlacement => sq_placement::run(setup),
        ExpName::Multicast => multicast::run(setup),
        ExpName::Failover => failover::run(setup, verify),
        ExpName::Share30 => share::run(setup),
        ExpName::NvmeofCompare => nvmeof::run(setup),
        ExpName::VmNvme => vm_nvme::run(setup),
        ExpName::Migrate => migrate::run(setup),
        ExpName::IommuPenalty => iommu_penalty::run(setup),
        ExpName::VmP2p => vm_p2p::run(setup),
        ExpName::GpuNvme => gpu_nvme::run(setup),
        ExpName::Sriov => sriov::run(setup),
        ExpName::SriovShare => sriov_share::run(setup),
        ExpName::Train => train::run(setup),
        ExpName::Video => video::run(setup),
    }
}

/// Refuses the options `args` gives that experiment `args.name` does not take.
fn check(args: &ExpArgs, setup: &Setup) -> Result<(), ExpError> {
    let exp = args.name;
    if let (Some(given), false) = (setup.nvmeof.first_given(), exp == ExpName::NvmeofCompare) {
        return Err(ExpError::NvmeofOption { given, exp });
    }
    if args.verify && exp != ExpName::Failover {
        return Err(ExpError::Verify { exp });
    }
    if let (Some(ops), ExpName::Multicast | ExpName::Migrate) = (setup.ops, exp) {
        return Err(ExpError::NoOps { ops, exp });
    }
    if let (Some(scenario), ExpName::Train | ExpName::IommuPenalty) = (&args.scenario, exp) {
        return Err(ExpError::OwnScenarios {
            scenario: scenario.clone(),
            exp,
        });
    }
    if let (Some(option), false) = (args.explain.given(), exp == ExpName::VmNvme) {
        return Err(ExpError::NotExplained { option, exp });
    }
    Ok(())
}

/// The first host, device and other names an experiment needs, read from the scenario.
pub mod names {
    use smartio_cluster::DeviceKind;
    use smartio_fabric::Fabric;

    /// `(host, device)` of the first endpoint of `kind`, optionally only in host `in_host`.
    pub fn first_device(
        f: &Fabric,
        kind: DeviceKind,
        in_host: Option<&str>,
    ) -> Option<(String, String)> {
        f.endpoints().iter().find_map(|ep| {
            let host = &f.host(ep.host).name;
            (DeviceKind::of(ep) == Some(kind) && in_host.is_none_or(|h| h == host))
                .then(|| (host.clone(), ep.name.clone()))
        })
    }

    /// The first host but `except`, in scenario order, with two cabled NTB adapters.
    pub fn host_with_two_paths(f: &Fabric, except: &str) -> Option<String> {
        f.hosts().iter().enumerate().find_map(|(i, h)| {
            let id = smartio_fabric::HostId(u32::try_from(i).ok()?);
            let cabled = |n| {
                f.host_adapter(id, n)
                    .is_some_and(|a| f.adapter(a).cable.is_some())
            };
            (h.name != except && cabled(0) && cabled(1)).then(|| h.name.clone())
        })
    }

    /// `(host, first, second)`: the first host with two endpoints of `kind`, and their names.
    pub fn device_pair(f: &Fabric, kind: DeviceKind) -> Option<(String, String, String)> {
        f.hosts().iter().find_map(|h| {
            let mut of_kind = f
                .endpoints()
                .iter()
                .filter(|ep| f.host(ep.host).name == h.name && DeviceKind::of(ep) == Some(kind));
            let (a, b) = (of_kind.next()?, of_kind.next()?);
            Some((h.name.clone(), a.name.clone(), b.name.clone()))
        })
    }

    /// The first VM `host` declares.
    pub fn first_vm(f: &Fabric, host: &str) -> Option<String> {
        f.hosts()
            .iter()
            .find(|h| h.name == host)?
            .vms
            .first()
            .map(|v| v.name.clone())
    }

    /// `(host, vm)`: the first host but `except` that declares a VM, and its first VM.
    pub fn other_host_with_vm(f: &Fabric, except: &str) -> Option<(String, String)> {
        f.hosts().iter().find_map(|h| {
            let vm = h.vms.first()?;
            (h.name != except).then(|| (h.name.clone(), vm.name.clone()))
        })
    }

    /// Every host name but `except`, in scenario order.
    pub fn other_hosts(f: &Fabric, except: &str) -> Vec<String> {
        f.hosts()
            .iter()
            .map(|h| h.name.clone())
            .filter(|h| h != except)
            .collect()
    }
}
