//! Data a GPU workload read back that is not what was written ([`super::GpuWorkloadError::Verify`]):
//! always an emulator bug, reported with where it differs.

use thiserror::Error;

/// What a GPU workload found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Mismatch {
    /// The GPU-driven read's chunks failed or were not all reaped.
    #[error(
        "the GPU-driven read: {errors} chunks failed (first: {first:#x}), {reaped} of {expected} \
         completions reaped"
    )]
    GpuRead {
        /// Chunks that failed.
        errors: u64,
        /// The first failure's word.
        first: u64,
        /// Completions reaped.
        reaped: u64,
        /// Completions expected.
        expected: u64,
    },
    /// The CPU-driven read's chunks failed.
    #[error("the CPU-driven read: {failed} chunks failed (first: {first})")]
    CpuRead {
        /// Chunks that failed.
        failed: usize,
        /// The first.
        first: ChunkFailure,
    },
    /// A copy came back different.
    #[error("{direction} copy of {len} bytes differs at byte {at}")]
    Copy {
        /// Its direction (`host-to-device`, ...; `peer`).
        direction: &'static str,
        /// Bytes.
        len: u64,
        /// The first differing byte.
        at: u64,
    },
    /// A replica found damaged image records.
    #[error("step {step}: {gpu} found {wrong} damaged image records, the first image {first}")]
    Damaged {
        /// The training step.
        step: u64,
        /// The GPU.
        gpu: String,
        /// Records damaged.
        wrong: u64,
        /// The first damaged image.
        first: u64,
    },
    /// A replica trained on other images than the loader read.
    #[error("step {step}: {gpu} trained on images {found:?}; the loader read {want:?}")]
    Trained {
        /// The training step.
        step: u64,
        /// The GPU.
        gpu: String,
        /// The images it trained on.
        found: Vec<u64>,
        /// The images the loader read.
        want: Vec<u64>,
    },
    /// A replica's weight is not what the gradients sum to.
    #[error("{gpu}: weight {index} is not what the gradients sum to")]
    Weight {
        /// The GPU.
        gpu: String,
        /// The weight.
        index: usize,
    },
}

/// Why one chunk of the CPU-driven read failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChunkFailure {
    /// The driver failed the read.
    #[error("LBA {lba}: {source}")]
    Read {
        /// Its first block.
        lba: u64,
        /// The driver's error.
        source: smartio_drivers::nvme_dist::DistError,
    },
    /// The data differs from the pattern.
    #[error("LBA {lba}: data differs")]
    Differs {
        /// Its first block.
        lba: u64,
    },
    /// The data could not be read from host memory.
    #[error("LBA {lba}: {source}")]
    Memory {
        /// Its first block.
        lba: u64,
        /// Why.
        source: smartio_host::GuestMemoryError,
    },
}
