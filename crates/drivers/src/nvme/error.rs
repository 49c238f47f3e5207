//! The NVMe driver's errors: the controller's answers, the host's refusals, and the requests
//! the driver refuses before the controller sees them.

use super::BlockOp;
use smartio_devices::nvme::prp::PrpError;
use smartio_devices::nvme::spec::Status;
use smartio_host::{DmaError, HostError};
use smartio_platform::AccessError;
use thiserror::Error;

/// A driver failure.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NvmeError {
    /// A register or memory access failed.
    #[error("{device}: {source}")]
    Access {
        /// The device.
        device: String,
        /// What failed.
        source: AccessError,
    },
    /// The host OS refused (MSI-X, BAR mapping).
    #[error("{0}")]
    Host(#[from] HostError),
    /// The DMA API refused.
    #[error("{0}")]
    Dma(#[from] DmaError),
    /// The controller did not become ready (or not-ready) in CAP.TO.
    #[error("{device}: controller did not {what} within {timeout_ms} ms")]
    Timeout {
        /// The device.
        device: String,
        /// `become ready` / `reset`.
        what: &'static str,
        /// CAP.TO in ms.
        timeout_ms: u64,
    },
    /// CSTS.CFS: the controller reported a fatal error.
    #[error("{device}: controller fatal status (CSTS.CFS)")]
    Fatal {
        /// The device.
        device: String,
    },
    /// A command completed with an error status.
    #[error("{device}: {command} failed: {status}")]
    Command {
        /// The device.
        device: String,
        /// What was asked.
        command: String,
        /// What the controller answered.
        status: Status,
    },
    /// No such namespace.
    #[error("{device}: no namespace {nsid} (namespaces: {known:?})")]
    NoNamespace {
        /// The device.
        device: String,
        /// Asked for.
        nsid: u32,
        /// Present.
        known: Vec<u32>,
    },
    /// A request the driver refuses before the controller sees it.
    #[error("{device}: {why}")]
    BadRequest {
        /// The device.
        device: String,
        /// What is wrong.
        why: BadRequest,
    },
}

/// A request the driver refuses ([`NvmeError::BadRequest`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadRequest {
    /// CAP.CSS does not include the NVM command set.
    #[error("controller does not support the NVM command set")]
    NoNvmCommandSet,
    /// A log page length that is not a multiple of 4 up to two pages.
    #[error("log page length {len}: a multiple of 4 up to {max}")]
    LogPageLength {
        /// Bytes asked for.
        len: u32,
        /// The most the driver reads (two pages, PRP1 and PRP2).
        max: u64,
    },
    /// A block count the command cannot carry.
    #[error("{op:?} of {blocks} blocks: must be 1..={max}")]
    Blocks {
        /// The operation.
        op: BlockOp,
        /// Blocks asked for.
        blocks: u32,
        /// The most one command carries.
        max: u32,
    },
    /// A transfer larger than MDTS.
    #[error("transfer of {len} bytes exceeds the controller's {max} (MDTS)")]
    Transfer {
        /// Bytes.
        len: u64,
        /// The controller's largest transfer.
        max: u64,
    },
    /// A transfer whose PRPs would need a chained list.
    #[error("{len} bytes need a chained PRP list")]
    ChainedPrpList {
        /// Bytes.
        len: u64,
    },
    /// The PRPs could not be built.
    #[error("{0}")]
    Prps(#[from] PrpError),
}
