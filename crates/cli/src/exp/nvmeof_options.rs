//! The options only `exp nvmeof-compare` takes (`--rw`, `--initiator`, `--target-mode`), as
//! every experiment's [`super::setup::Setup`] carries them.

use clap::ValueEnum;
use smartio_nvmeof::{InitiatorChoice, IoChoice, TargetMode};

/// `--rw`: which I/O the rows do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Rw {
    /// Random reads.
    Randread,
    /// Random writes (each row's written blocks are read back and checked).
    Randwrite,
    /// Random reads, then random writes.
    Both,
}

/// `--initiator`: which NVMe-oF initiators, each against its own local baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Initiator {
    /// The polled user-space initiator (SPDK's), against the local SmartIO driver.
    Polled,
    /// The kernel initiator (nvme-rdma, block layer, interrupts), against the native driver
    /// with interrupts and the block layer.
    Kernel,
    /// Both.
    Both,
}

/// `--target-mode`: how the NVMe-oF target serves commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// SPDK's software target, polling (the seeds' target).
    Spdk,
    /// Target offload: the HCA hands commands to the NVMe and answers by itself.
    Offload,
}

/// The options only `nvmeof-compare` takes (unset: reads and writes, both initiators, the
/// SPDK target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// `--rw`.
    pub rw: Option<Rw>,
    /// `--initiator`.
    pub initiator: Option<Initiator>,
    /// `--target-mode`.
    pub target_mode: Option<Target>,
}

impl Options {
    /// The first option given, as `--name value`, if any (for experiments that take none).
    pub fn first_given(&self) -> Option<String> {
        let named = |name: &str, v: Option<clap::builder::PossibleValue>| {
            v.map(|v| format!("--{name} {}", v.get_name()))
        };
        named("rw", self.rw.and_then(|v| v.to_possible_value()))
            .or_else(|| {
                named(
                    "initiator",
                    self.initiator.and_then(|v| v.to_possible_value()),
                )
            })
            .or_else(|| {
                named(
                    "target-mode",
                    self.target_mode.and_then(|v| v.to_possible_value()),
                )
            })
    }

    /// The I/O the rows do.
    pub fn io(self) -> IoChoice {
        match self.rw {
            Some(Rw::Randread) => IoChoice::Reads,
            Some(Rw::Randwrite) => IoChoice::Writes,
            Some(Rw::Both) | None => IoChoice::Both,
        }
    }

    /// The initiators of the NVMe-oF rows.
    pub fn initiators(self) -> InitiatorChoice {
        match self.initiator {
            Some(Initiator::Polled) => InitiatorChoice::Polled,
            Some(Initiator::Kernel) => InitiatorChoice::Kernel,
            Some(Initiator::Both) | None => InitiatorChoice::Both,
        }
    }

    /// How the target serves commands.
    pub fn target_mode(self) -> TargetMode {
        match self.target_mode {
            Some(Target::Offload) => TargetMode::Offload,
            Some(Target::Spdk) | None => TargetMode::Spdk,
        }
    }
}
