//! The parameters of a block workload (fio, the NBD export, the NVMe demo) that it refuses,
//! each with the value given and the bound it broke ([`super::FioError::BadParameter`]).

use super::config::{
    MAX_BUFFER_BYTES, MAX_IODEPTH, MAX_JOBS, MAX_OPS, MAX_RUNTIME, MAX_VERIFY_BYTES,
};
use crate::attach::NameOption;
use smartio_drivers::nvme::NvmeError;
use smartio_drivers::nvme_dist::BlockClientError;
use smartio_platform::SimDuration;
use thiserror::Error;

/// A parameter a block workload refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadParameter {
    /// `--bs 0`.
    #[error("--bs 0: a block size of at least one LBA")]
    ZeroBs,
    /// `--iodepth` outside an NVMe queue.
    #[error(
        "--iodepth {iodepth}: must be 1..={MAX_IODEPTH} (an NVMe queue of the emulated \
         controller has {} entries, one always empty)",
        MAX_IODEPTH + 1
    )]
    Iodepth {
        /// As given.
        iodepth: u32,
    },
    /// `--jobs` outside the queue pairs a controller has.
    #[error("--jobs {jobs}: must be 1..={MAX_JOBS} (one NVMe I/O queue pair per job)")]
    Jobs {
        /// As given.
        jobs: u32,
    },
    /// More bytes of I/O buffers in flight than the emulator holds.
    #[error(
        "--jobs {jobs} × --iodepth {iodepth} × --bs {bs} = {} bytes of I/O buffers in flight; \
         at most {MAX_BUFFER_BYTES} (1 GiB): they are emulated RAM held by this process",
        .bytes.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
    )]
    Buffers {
        /// `--jobs`.
        jobs: u32,
        /// `--iodepth`.
        iodepth: u32,
        /// `--bs`.
        bs: u64,
        /// Their product (`None`: past 2^64).
        bytes: Option<u64>,
    },
    /// `--ops` outside what a run can do.
    #[error(
        "--ops {ops}: must be 1..={MAX_OPS} (about three hours of wall time at the emulator's \
         ~100k I/Os per second)"
    )]
    Ops {
        /// As given.
        ops: u64,
    },
    /// `--runtime` of nothing, or longer than an hour.
    #[error(
        "--runtime {} s: must be more than 0 and at most {} s (an hour of virtual time takes an \
         hour or more of wall time)",
        .runtime.as_secs_f64(),
        MAX_RUNTIME.as_secs_f64()
    )]
    Runtime {
        /// As given.
        runtime: SimDuration,
    },
    /// `--runtime` ending past the virtual clock.
    #[error(
        "--runtime {} s: the run would end past the virtual clock's limit (2^64 ps, about 213 \
         days)",
        .runtime.as_secs_f64()
    )]
    RuntimePastClock {
        /// As given.
        runtime: SimDuration,
    },
    /// `--rwmixread` that is no percentage.
    #[error("--rwmixread {percent}: a percentage, 0..=100")]
    Rwmixread {
        /// As given.
        percent: u32,
    },
    /// `--size` too large to verify.
    #[error(
        "--size {size} with --verify: at most {MAX_VERIFY_BYTES} bytes (4 GiB); a verifying \
         run first writes the whole range and keeps a version of every block"
    )]
    VerifySize {
        /// As given.
        size: u64,
    },
    /// `--nsid` names no namespace of the device.
    #[error("--nsid {nsid}: {source}")]
    Nsid {
        /// As given.
        nsid: u32,
        /// Why it names none.
        source: Box<NamespaceError>,
    },
    /// `--nsid` the block client cannot make a disk of.
    #[error("--nsid {nsid}: {source}")]
    BlockNsid {
        /// As given.
        nsid: u32,
        /// The block client's refusal.
        source: Box<BlockClientError>,
    },
    /// A namespace the driver does not have.
    #[error("{0}")]
    Namespace(#[source] Box<NvmeError>),
    /// `--bs` that is not a whole number of blocks.
    #[error("--bs {bs} is not a multiple of the namespace's LBA size {lba}")]
    BsNotBlocks {
        /// As given.
        bs: u64,
        /// The namespace's block size.
        lba: u64,
    },
    /// `--bs` larger than the controller transfers at once.
    #[error("--bs {bs} exceeds the controller's maximum transfer {max} (MDTS)")]
    BsOverMdts {
        /// As given.
        bs: u64,
        /// The controller's largest transfer.
        max: u64,
    },
    /// `--size` smaller than a block or larger than the namespace.
    #[error(
        "--size {size} must be at least --bs {bs} and at most the namespace ({capacity} bytes)"
    )]
    Size {
        /// As given (or the default).
        size: u64,
        /// `--bs`.
        bs: u64,
        /// The namespace's bytes.
        capacity: u64,
    },
    /// `--iodepth` deeper than the manager's queues.
    #[error(
        "--iodepth {iodepth}: the controller's queues hold at most {most} commands ({entries} \
         entries, one always empty)"
    )]
    QueueDepth {
        /// As given.
        iodepth: u32,
        /// The most commands a queue holds.
        most: u32,
        /// The queue's entries.
        entries: u32,
    },
    /// `--iodepth` the block client's queues cannot take.
    #[error("--iodepth {iodepth}: {allowed}")]
    BlockIodepth {
        /// As given.
        iodepth: u32,
        /// What the block client takes.
        allowed: String,
    },
    /// `--jobs` more than the manager has queue pairs left.
    #[error(
        "--jobs {jobs}: every job needs its own I/O queue pair, and the manager has none left \
         of the {granted} the controller granted (in use: {owners})"
    )]
    NoQueueLeft {
        /// As given.
        jobs: u32,
        /// Pairs the controller granted.
        granted: u16,
        /// Who holds them.
        owners: String,
    },
    /// A device or VM name that names nothing.
    #[error("{0}")]
    Name(#[from] NameOption),
    /// A read-back range that is not whole blocks.
    #[error("offset {offset} and length {len} must be multiples of the LBA size {lba}")]
    Unaligned {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u64,
        /// The namespace's block size.
        lba: u64,
    },
    /// The demo's write does not fit the namespace or a transfer.
    #[error(
        "{device}: cannot write {len} bytes at byte {offset} of namespace {nsid} ({blocks} \
         blocks of {lba_size} B, maximum transfer {max_transfer} B)"
    )]
    DemoWrite {
        /// The device.
        device: String,
        /// Bytes.
        len: u64,
        /// Byte offset.
        offset: u64,
        /// The namespace.
        nsid: u32,
        /// Its blocks.
        blocks: u64,
        /// Its block size.
        lba_size: u64,
        /// The controller's largest transfer.
        max_transfer: u64,
    },
    /// `--queues` of the NBD export.
    #[error("--queues {queues}: 1..={max}")]
    Queues {
        /// As given.
        queues: u32,
        /// The most.
        max: u32,
    },
    /// `--depth` of the NBD export.
    #[error("--depth {depth}: 1..={max}")]
    Depth {
        /// As given.
        depth: u32,
        /// The most.
        max: u32,
    },
    /// `--nsid 0`.
    #[error("--nsid 0: namespaces count from 1")]
    ZeroNsid,
    /// The NBD export through the block client, which only reads and writes.
    #[error(
        "--method nvme-block: the block client's disk takes only reads and writes; export \
         through native or nvme-client"
    )]
    ExportBlockMethod,
    /// `--size` of the NBD export.
    #[error(
        "--size {size}: a non-zero multiple of the namespace's {lba}-byte blocks, at most its \
         {capacity} bytes"
    )]
    ExportSize {
        /// As given.
        size: u64,
        /// The namespace's block size.
        lba: u64,
        /// The namespace's bytes.
        capacity: u64,
    },
}

/// Why a namespace id names no namespace of the workload's device.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NamespaceError {
    /// The native driver has none of that id.
    #[error("{0}")]
    Driver(#[from] NvmeError),
    /// The manager's controller has none of that id active.
    #[error("the controller has no namespace {nsid} (active: {})", list(.active))]
    NotActive {
        /// Asked for.
        nsid: u32,
        /// The active ones.
        active: Vec<u32>,
    },
    /// The block client's disk is another namespace.
    #[error("disk {disk} is namespace {ours}, not {nsid}")]
    OtherDisk {
        /// The disk.
        disk: String,
        /// Its namespace.
        ours: u32,
        /// Asked for.
        nsid: u32,
    },
}

/// `1, 2, 3`.
fn list(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
