//! The parameters of a GPU workload or application it refuses (counts, sizes, devices), with
//! the values given and the bounds they broke ([`super::GpuWorkloadError::BadParameter`]).

use smartio_calibration::UnknownProfile;
use smartio_devices::nvme::BackingError;
use smartio_devices::ParamError;
use smartio_host::HostError;
use thiserror::Error;

/// A parameter a GPU workload refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadParameter {
    /// A count of 0 or above its bound.
    #[error("{option} {value}: allowed 1 to {max}")]
    Count {
        /// The option (`--copies`, ...).
        option: &'static str,
        /// As given.
        value: u32,
        /// The most.
        max: u32,
    },
    /// `--qd` outside what the GPU's threads carry.
    #[error(
        "--qd {qd}: allowed 1 to {max} (one GPU thread per command and a reaper, {threads} \
         threads at most)"
    )]
    QueueDepth {
        /// As given.
        qd: u32,
        /// The most.
        max: u32,
        /// Threads a launch has at most.
        threads: u32,
    },
    /// `--qd` deeper than the controller's queues.
    #[error(
        "--qd {qd}: a queue of the controller holds at most {most} commands ({entries} entries)"
    )]
    QueueTooSmall {
        /// As given.
        qd: u32,
        /// Commands a queue holds.
        most: u32,
        /// Its entries.
        entries: u32,
    },
    /// `--bytes` that is not whole chunks.
    #[error(
        "--bytes {bytes} --chunk {chunk}: both at least 1 and the bytes a whole number of chunks"
    )]
    Chunks {
        /// `--bytes`.
        bytes: u64,
        /// `--chunk`.
        chunk: u64,
    },
    /// `--bytes` above its bound.
    #[error("--bytes {bytes}: at most {max}")]
    Bytes {
        /// As given.
        bytes: u64,
        /// The most.
        max: u64,
    },
    /// `--chunk` that is not whole blocks.
    #[error("--chunk {chunk}: a whole number of {lba}-byte blocks")]
    ChunkBlocks {
        /// As given.
        chunk: u64,
        /// The namespace's block size.
        lba: u64,
    },
    /// `--chunk` larger than the controller transfers at once.
    #[error("--chunk {chunk}: above the controller's largest transfer (MDTS) of {max} bytes")]
    ChunkOverMdts {
        /// As given.
        chunk: u64,
        /// The controller's largest transfer.
        max: u64,
    },
    /// A GPU named with a lender where the program's own is needed.
    #[error(
        "--gpu {gpu}: the GPU must be a device of the program's host {host} (name it without a \
         lender)"
    )]
    LentGpu {
        /// As given.
        gpu: String,
        /// The program's host.
        host: String,
    },
    /// A GPU the program's host does not have.
    #[error("--gpu {gpu}: not a device of the program's host {host} ({source})")]
    NotHostGpu {
        /// As given.
        gpu: String,
        /// The program's host.
        host: String,
        /// The host's answer.
        source: Box<HostError>,
    },
    /// `--device` that is no NVMe.
    #[error("--device {device}: not an NVMe")]
    NotNvme {
        /// As given.
        device: String,
    },
    /// A namespace or size the NVMe does not have.
    #[error(
        "{bytes} bytes of namespace {nsid}: {device} has {namespaces} namespaces of {capacity} \
         bytes"
    )]
    Namespace {
        /// Bytes asked for.
        bytes: u64,
        /// The namespace.
        nsid: u32,
        /// The NVMe.
        device: String,
        /// Its namespaces.
        namespaces: u32,
        /// Bytes of each.
        capacity: u64,
    },
    /// The namespace could not be filled with the pattern before the run.
    #[error("filling the namespace: {0}")]
    Fill(#[source] BackingError),
    /// `--gpus` of none or too many.
    #[error("--gpus: {given} GPUs given; allowed 1 to {max}")]
    Gpus {
        /// GPUs given.
        given: usize,
        /// The most.
        max: usize,
    },
    /// `--batch` out of range or not shared evenly.
    #[error(
        "--batch {batch}: allowed 1 to {max}, a multiple of the {gpus} GPUs (each trains on an \
         equal share)"
    )]
    Batch {
        /// As given.
        batch: u64,
        /// The most.
        max: u64,
        /// GPUs.
        gpus: usize,
    },
    /// `--images` out of range or not whole batches.
    #[error("--images {images}: allowed 1 to {max}, a whole number of batches of {batch}")]
    Images {
        /// As given.
        images: u64,
        /// The most.
        max: u64,
        /// `--batch`.
        batch: u64,
    },
    /// `--epochs` out of range.
    #[error("--epochs {epochs}: allowed 1 to {max}")]
    Epochs {
        /// As given.
        epochs: u64,
        /// The most.
        max: u64,
    },
    /// `--nvme` that is no NVMe controller.
    #[error("--nvme {nvme}: not an NVMe controller (a {kind} device)")]
    NotNvmeController {
        /// As given.
        nvme: String,
        /// Its kind.
        kind: String,
    },
    /// More image records than the namespace holds.
    #[error(
        "--images {images}: {needed} bytes of records; namespace 1 of {nvme} holds {capacity}"
    )]
    DatasetTooLarge {
        /// As given.
        images: u64,
        /// Bytes of their records.
        needed: u64,
        /// The NVMe.
        nvme: String,
        /// Bytes of its namespace.
        capacity: u64,
    },
    /// The training set could not be written before the run.
    #[error("writing the training set to {nvme}: {source}")]
    WriteDataset {
        /// The NVMe.
        nvme: String,
        /// The store's error.
        source: BackingError,
    },
    /// The image to spoil could not be spoiled.
    #[error("spoiling image {id}: {source}")]
    Spoil {
        /// The image.
        id: u64,
        /// The store's error.
        source: BackingError,
    },
    /// A GPU's scenario parameters do not parse.
    #[error("{gpu}: {source}")]
    GpuParams {
        /// The GPU.
        gpu: String,
        /// Why.
        source: Box<ParamError>,
    },
    /// A GPU's profile the calibration does not have.
    #[error("{gpu}: {source}")]
    GpuProfile {
        /// The GPU.
        gpu: String,
        /// Why.
        source: UnknownProfile,
    },
    /// A frame to spoil outside the run.
    #[error(
        "the frame to spoil, stream {stream} frame {frame}, is not in the run ({streams} \
         streams of {frames} frames)"
    )]
    SpoilFrame {
        /// The frame's stream, from 0.
        stream: u32,
        /// The frame within its stream, from 0.
        frame: u32,
        /// Streams of the run.
        streams: u32,
        /// Frames of each.
        frames: u32,
    },
}
