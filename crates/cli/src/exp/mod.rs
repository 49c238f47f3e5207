//! `smartio exp NAME`: the papers' experiments on the device API and the distributed NVMe
//! driver. Each prints a table (or JSON with `--json`) and, with `--plots DIR`, writes its
//! SVG figures there (nothing is written without it).
//!
//! The experiments are a table: each is a file here implementing [`Experiment`] (its name
//! and help, default scenario, the options it takes, its cost for the budget, its run from a
//! [`Setup`] to a [`Report`](setup::Report)) and one line of [`EXPERIMENTS`], through which `exp` parses its
//! name, lists them in `--help`, and runs them; the workloads they run live in
//! `smartio-workloads`, an experiment only chooses their parameters and presents them.

pub(crate) mod bandwidth;
pub mod experiment;
mod failover;
mod gpu_nvme;
mod iommu_penalty;
mod migrate;
mod multicast;
mod names;
mod nvmeof;
pub mod nvmeof_options;
pub mod plot;
pub(crate) mod refusal;
pub mod setup;
mod share;
mod sq_placement;
pub(crate) mod sriov;
mod sriov_share;
mod train;
mod video;
mod vm_nvme;
mod vm_p2p;

pub use experiment::{Exp, Experiment};
pub use failover::Failover;
pub use gpu_nvme::GpuNvme;
pub use iommu_penalty::IommuPenalty;
pub use migrate::Migrate;
pub use multicast::Multicast;
pub use nvmeof::NvmeofCompare;
pub use setup::Setup;
pub use share::Share30;
pub use sq_placement::SqPlacement;
pub use sriov::Sriov;
pub use sriov_share::SriovShare;
pub use train::Train;
pub use video::Video;
pub use vm_nvme::VmNvme;
pub use vm_p2p::VmP2p;

use crate::error::CliError;
use clap::builder::PossibleValue;
use clap::ValueEnum;
use nvmeof_options::Options as NvmeofOptions;
use refusal::ExpError;
use smartio_calibration::Calibration;
use std::path::PathBuf;

/// Every experiment, in the order `smartio exp --help` lists them.
pub static EXPERIMENTS: [Exp; 14] = [
    Exp(&SqPlacement),
    Exp(&Multicast),
    Exp(&Failover),
    Exp(&Share30),
    Exp(&NvmeofCompare),
    Exp(&VmNvme),
    Exp(&Migrate),
    Exp(&IommuPenalty),
    Exp(&VmP2p),
    Exp(&GpuNvme),
    Exp(&Sriov),
    Exp(&SriovShare),
    Exp(&Train),
    Exp(&Video),
];

/// `smartio exp NAME`: the name is one of [`EXPERIMENTS`], each listed with its help.
impl ValueEnum for Exp {
    fn value_variants<'a>() -> &'a [Self] {
        &EXPERIMENTS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.help()))
    }
}

/// `smartio exp` arguments.
#[derive(clap::Args, Debug)]
pub struct ExpArgs {
    /// Which experiment.
    pub name: Exp,
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
    pub rw: Option<nvmeof_options::Rw>,
    /// nvmeof-compare only: the NVMe-oF initiator, polled (user space, against the local
    /// SmartIO driver), kernel (nvme-rdma, against the native driver with interrupts and the
    /// block layer) or both [default: both].
    #[arg(long, value_enum, value_name = "INITIATOR")]
    pub initiator: Option<nvmeof_options::Initiator>,
    /// nvmeof-compare only: the NVMe-oF target, spdk (software, polling) or offload (the HCA
    /// serves the commands) [default: spdk].
    #[arg(long, value_enum, value_name = "MODE")]
    pub target_mode: Option<nvmeof_options::Target>,
    /// vm-nvme only: where the time went (--breakdown: each row's p50 QD1 read with
    /// interrupts and a table of the rows by kind of step; --trace: the four recorded runs).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

/// Runs `smartio exp`.
pub fn run(calibration: &Calibration, args: ExpArgs) -> Result<(), CliError> {
    let exp = args.name;
    let setup = Setup {
        ops: args.ops,
        nvmeof: NvmeofOptions {
            rw: args.rw,
            initiator: args.initiator,
            target_mode: args.target_mode,
        },
        verify: args.verify,
        ..Setup::new(
            args.scenario
                .clone()
                .unwrap_or_else(|| exp.default_scenario().to_string()),
            calibration,
            args.seed,
        )
    };
    check(&args, &setup)?;
    let (report, breakdown) = if args.explain.any() {
        exp.run_explained(&setup, &args.explain)?
    } else {
        (exp.run(&setup)?, String::new())
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
            "experiment": exp.name(),
            "scenario": setup.scenario,
            "result": report.json,
            "notes": report.notes,
            "plots": written,
            "links": *setup.traffic.borrow(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // An experiment that picks its own scenarios names them itself.
        let title = match exp.takes().own_scenarios {
            Some(_) => report.title.clone(),
            None => format!("{} on {}", report.title, setup.scenario),
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

/// Refuses the options `args` gives that experiment `args.name` does not take, in the order
/// the options are listed.
fn check(args: &ExpArgs, setup: &Setup) -> Result<(), ExpError> {
    let exp = args.name;
    let takes = exp.takes();
    if let (Some(given), false) = (setup.nvmeof.first_given(), takes.nvmeof) {
        return Err(ExpError::NvmeofOption {
            given,
            exp: exp.name(),
        });
    }
    if let (true, Some(checking)) = (args.verify, takes.checking) {
        return Err(ExpError::Verify {
            exp: exp.name(),
            checking,
        });
    }
    if let (Some(ops), Some(why)) = (setup.ops, takes.no_ops) {
        return Err(ExpError::NoOps { ops, why });
    }
    if let (Some(scenario), Some(why)) = (&args.scenario, takes.own_scenarios) {
        return Err(ExpError::OwnScenarios {
            scenario: scenario.clone(),
            why,
        });
    }
    if let (Some(option), false) = (args.explain.given(), takes.explain) {
        return Err(ExpError::NotExplained {
            option,
            exp: exp.name(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_is_listed_once_by_its_own_name() {
        let mut names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name()).collect();
        let listed = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), listed, "a name listed twice");
        for e in &EXPERIMENTS {
            let parsed = Exp::from_str(e.name(), false).expect("parses");
            assert_eq!(parsed.name(), e.name());
            assert!(
                !e.help().ends_with('.'),
                "{}: help ends with a stop",
                e.name()
            );
        }
    }
}
