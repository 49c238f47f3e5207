//! What an experiment refuses before it runs (a scenario without what it compares, an
//! option it does not take, an `--ops` out of its range), and what it finds wrong after (an
//! I/O lost or written twice): each with the scenario and the values.

use smartio_apps::train::MAX_EPOCHS;
use smartio_apps::video::{MAX_FRAMES, MIN_FRAMES};
use thiserror::Error;

/// An experiment that refused to run or found its result wrong.
#[derive(Debug, PartialEq, Eq, Error)]
pub enum ExpError {
    /// No NVMe controller in the scenario.
    #[error("{scenario} has no NVMe controller{}", needs.map_or_else(String::new, |n| format!("; {n}")))]
    NoNvme {
        /// The scenario.
        scenario: String,
        /// What the experiment needs the NVMe for, and what else (`failover needs one, and
        /// ...`), if it says.
        needs: Option<&'static str>,
    },
    /// No host but the NVMe's for failover's program.
    #[error(
        "{scenario} has no host besides {lender} with two cabled NTB adapters; failover needs \
         one for the program's primary and backup paths (such as dual-path)"
    )]
    NoDualPathHost {
        /// The scenario.
        scenario: String,
        /// The NVMe's host.
        lender: String,
    },
    /// No host but the NVMe's for a remote reader.
    #[error(
        "{scenario} has no host besides {target}, which has the NVMe; nvmeof-compare needs \
         another host for the remote reader"
    )]
    NoReader {
        /// The scenario.
        scenario: String,
        /// The NVMe's host.
        target: String,
    },
    /// No host but the NVMe's for share-30's clients.
    #[error(
        "{scenario} has no host besides {lender}, which has the NVMe; share-30 needs at least \
         one other host for a client"
    )]
    NoClientHost {
        /// The scenario.
        scenario: String,
        /// The NVMe's host.
        lender: String,
    },
    /// No host but the lender for sq-placement's client.
    #[error(
        "{scenario} has no host besides the lender {lender}; sq-placement needs another host for \
         the client"
    )]
    NoPlacementClient {
        /// The scenario.
        scenario: String,
        /// The NVMe's host.
        lender: String,
    },
    /// No GPU for gpu-nvme.
    #[error("{scenario} has no GPU; gpu-nvme needs one in the NVMe's host {lender} or another")]
    NoGpu {
        /// The scenario.
        scenario: String,
        /// The NVMe's host.
        lender: String,
    },
    /// Fewer than two hosts with a VM for migrate.
    #[error(
        "{scenario} declares a VM on {homes} host(s); migrate needs two hosts with a VM \
         ([[host.vm]])"
    )]
    TooFewVmHosts {
        /// The scenario.
        scenario: String,
        /// Hosts with a VM.
        homes: usize,
    },
    /// No other host with a VM for vm-nvme.
    #[error(
        "{scenario} has no host besides {lender} with a VM ([[host.vm]]); vm-nvme needs one to \
         borrow into"
    )]
    NoVmBorrower {
        /// The scenario.
        scenario: String,
        /// The NVMe's host.
        lender: String,
    },
    /// No host with two DMA test devices for vm-p2p.
    #[error("{scenario} has no host with two DMA test devices; vm-p2p needs two on one host")]
    NoDmaPair {
        /// The scenario.
        scenario: String,
    },
    /// No VM on the DMA devices' host for vm-p2p.
    #[error(
        "{scenario} declares no VM on {lender}, which has {a} and {b}; vm-p2p needs one there \
         for local VFIO ([[host.vm]])"
    )]
    NoLenderVm {
        /// The scenario.
        scenario: String,
        /// The host with the devices.
        lender: String,
        /// The first device.
        a: String,
        /// The second.
        b: String,
    },
    /// No other host with a VM for vm-p2p.
    #[error("{scenario} has no host besides {lender} with a VM; vm-p2p needs one for MDEV ([[host.vm]])")]
    NoBorrowerVm {
        /// The scenario.
        scenario: String,
        /// The host with the devices.
        lender: String,
    },
    /// No NIC host with two others for sriov.
    #[error(
        "{scenario} has no host with a NIC and two other hosts; sriov needs a lender, a borrower \
         and a receiver"
    )]
    NoNicLender {
        /// The scenario.
        scenario: String,
    },
    /// No second NIC host to receive.
    #[error("{scenario} has no second host with a NIC to receive")]
    NoReceiver {
        /// The scenario.
        scenario: String,
    },
    /// No host to lend the NIC to.
    #[error("{scenario} has no host to lend the NIC to")]
    NoNicBorrower {
        /// The scenario.
        scenario: String,
    },
    /// No NIC with two VFs for sriov-share.
    #[error(
        "{scenario} has no NIC with two virtual functions (params.vfs of 2 or more); \
         sriov-share needs one"
    )]
    NoTwoVfs {
        /// The scenario.
        scenario: String,
    },
    /// Fewer than two VF borrowers for sriov-share.
    #[error("{scenario} has fewer than two hosts to lend VFs to besides the receiver")]
    TooFewVfBorrowers {
        /// The scenario.
        scenario: String,
    },
    /// The NIC host has no NIC model (an emulator bug).
    #[error("{host} has no NIC model")]
    NoNicModel {
        /// The host.
        host: String,
    },
    /// Not both own and borrowed GPUs for video.
    #[error(
        "{scenario}: video compares {host}'s own GPUs with those plus GPUs borrowed from other \
         hosts; it has {own} of its own and {borrowed} on other hosts"
    )]
    VideoPool {
        /// The scenario.
        scenario: String,
        /// The host of the program.
        host: String,
        /// Its own GPUs.
        own: usize,
        /// GPUs on other hosts.
        borrowed: usize,
    },
    /// `--ops` as copies per size above the bound.
    #[error(
        "--ops {ops}: {exp} times --ops copies of each transfer size; at most {max} (a \
         deterministic model settles within a few)"
    )]
    Copies {
        /// As given.
        ops: u64,
        /// The experiment.
        exp: &'static str,
        /// The most.
        max: u64,
    },
    /// `--ops` as round trips that do not fit a count.
    #[error("--ops {ops}: {source}")]
    RoundTrips {
        /// As given.
        ops: u64,
        /// Why.
        source: std::num::TryFromIntError,
    },
    /// `--ops` as milliseconds above the bound.
    #[error("--ops {ops}: {exp} takes milliseconds of virtual time, 1 to {max}{}", if *.exp == "sriov" { SRIOV_WHY } else { "" })]
    Milliseconds {
        /// As given.
        ops: u64,
        /// The experiment.
        exp: &'static str,
        /// The most.
        max: u64,
    },
    /// `--ops` as gpu-nvme commands above the bound.
    #[error("--ops {ops}: at most {max} commands of 64 KiB (a read of at most 64 GiB)")]
    Commands {
        /// As given.
        ops: u64,
        /// The most.
        max: u64,
    },
    /// `--ops` as epochs above the bound.
    #[error("--ops {ops}: train's --ops is epochs per placement, at most {MAX_EPOCHS}")]
    Epochs {
        /// As given.
        ops: u64,
    },
    /// `--ops` as frames out of range.
    #[error(
        "--ops {ops}: video takes frames per stream, {MIN_FRAMES} to {MAX_FRAMES} (a stream's \
         rate is measured between its first and last frame; every frame moves 3 MB through the \
         timed engine, 32 runs of up to 16 streams)"
    )]
    Frames {
        /// As given.
        ops: u64,
    },
    /// `--ops` for an experiment with no count to set.
    #[error("--ops {ops}: {why}")]
    NoOps {
        /// As given.
        ops: u64,
        /// Why the experiment has no count to set.
        why: &'static str,
    },
    /// An NVMe-oF option for another experiment.
    #[error("{given}: only with nvmeof-compare ({exp} has no NVMe-oF rows)")]
    NvmeofOption {
        /// The option and value given.
        given: String,
        /// The experiment.
        exp: &'static str,
    },
    /// `--verify` for another experiment than failover.
    #[error("--verify: only with failover ({exp} {checking})")]
    Verify {
        /// The experiment.
        exp: &'static str,
        /// What it does about checking instead.
        checking: &'static str,
    },
    /// `--scenario` for an experiment with scenarios of its own.
    #[error("--scenario {scenario}: {why}")]
    OwnScenarios {
        /// As given.
        scenario: String,
        /// Which scenarios the experiment runs on, and why it takes no other.
        why: String,
    },
    /// An explanation option for an experiment not explained yet.
    #[error("{option}: only with vm-nvme ({exp} is not explained yet)")]
    NotExplained {
        /// The option.
        option: &'static str,
        /// The experiment.
        exp: &'static str,
    },
    /// failover lost I/O or wrote it twice.
    #[error("I/O was lost or written twice: {}", lost(.runs))]
    LostOrTwice {
        /// Each run's name, I/Os lost and I/Os written twice.
        runs: Vec<(&'static str, u64, u64)>,
    },
    /// share-30: a client verified less than it read.
    #[error("{host} verified {verified} of {expected} bytes")]
    Unverified {
        /// The client's host.
        host: String,
        /// Bytes it verified.
        verified: u64,
        /// Bytes it read.
        expected: u64,
    },
    /// share-30: the request past the last queue pair was granted.
    #[error("the request after the last queue pair was not refused")]
    NotRefused,
    /// share-30: queue pairs owned after every client left.
    #[error("queue pairs still owned after every client left: {owners:?}")]
    StillOwned {
        /// The owner table.
        owners: Vec<(u16, String)>,
    },
    /// vm-nvme: a row of the table was not measured (an emulator bug).
    #[error("vm-nvme: a row is missing (an emulator bug)")]
    MissingRow,
}

/// Why sriov bounds its milliseconds.
const SRIOV_WHY: &str =
    " (a millisecond of 100 Gbit/s takes about a tenth of a second of wall time per run)";

/// `name: lost N, twice M; ...`.
fn lost(runs: &[(&'static str, u64, u64)]) -> String {
    runs.iter()
        .map(|(w, lost, twice)| format!("{w}: lost {lost}, twice {twice}"))
        .collect::<Vec<_>>()
        .join("; ")
}
