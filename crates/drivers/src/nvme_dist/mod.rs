//! The distributed NVMe driver (Paper V §6.2, seed 003): one single-function NVMe shared at
//! the queue level by programs on many hosts, built on the device-oriented API alone.
//!
//! - The [`Manager`] (on any host) holds the controller exclusively while it resets it,
//!   places the admin queues, identifies the controller and asks for every I/O queue pair;
//!   then it downgrades to a shared hold and publishes where it runs and what the
//!   controller is in a segment ([`MANAGER_SEGMENT`], laid out as a [`Publication`]). It owns the admin queues, hands out queue ids, keeps which client
//!   owns which pair, and relays the clients' admin work (a control message each way).
//! - A [`Client`] (any host, several per host) holds the controller shared, maps its
//!   doorbells, and gets queue pairs whose SQ and CQ live in segments SmartIO places by their
//!   access hints. It submits, rings and polls on its own: no software between it and the
//!   controller in the data path. Data moves by DMA straight into the client's segment.
//! - A [`BlockClient`] is the kernel-space client of seed 003: a disk of its host's block
//!   layer whose requests go through one queue pair per hardware queue, their data copied
//!   through a bounce buffer mapped for the controller once, their completions polled.
//! - A client leaving gives its queues back; the manager's [`Manager::sweep`] deletes the
//!   queues of a client whose hold is gone without leaving.

mod bad_request;
mod block;
mod bounce;
mod client;
mod manager;
mod publication;

pub use bad_request::BadRequest;
pub use block::{BlockClient, BlockClientConfig, BlockClientError, BlockClientStats, DRIVER_NAME};
pub use client::{Client, ClientQueue, SqPlacement};
pub use manager::{Manager, MANAGER_SEGMENT};
pub use publication::{Publication, PublicationError, MAX_NAMESPACES};

use smartio_platform::AccessError;
use smartio_smartio::SmartIoError;
use thiserror::Error;

/// A distributed-driver failure.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DistError {
    /// SmartIO refused (device busy, unknown, windows exhausted).
    #[error("{0}")]
    SmartIo(#[from] SmartIoError),
    /// A register or memory access failed.
    #[error("{what}: {source}")]
    Access {
        /// What was being done.
        what: String,
        /// The access error.
        source: AccessError,
    },
    /// The controller did not become ready (or not-ready) in time.
    #[error("controller did not reach CSTS.RDY={ready} within {timeout_ms} ms")]
    Timeout {
        /// The state waited for.
        ready: bool,
        /// CAP.TO in milliseconds.
        timeout_ms: u64,
    },
    /// A command completed with an error status.
    #[error("{what} failed with status {status:#05x}")]
    Command {
        /// The command.
        what: String,
        /// Status field (SCT << 8 | SC).
        status: u16,
    },
    /// Every I/O queue pair the controller granted is in use.
    #[error("no I/O queue pair left: all {granted} the controller granted are in use (owners: {owners})")]
    NoQueues {
        /// Pairs the controller granted.
        granted: u16,
        /// Which hosts hold them, with counts.
        owners: String,
    },
    /// The client asked about a queue pair it does not own.
    #[error("queue pair {qid} does not belong to this client")]
    NotOwner {
        /// The queue id.
        qid: u16,
    },
    /// The published manager segment is missing or names another manager.
    #[error("no NVMe manager found for {device}: {why}")]
    NoManager {
        /// The device.
        device: String,
        /// What is wrong.
        why: String,
    },
    /// The manager's published segment does not read as its metadata.
    #[error("the NVMe manager's segment for {device} is unreadable: {source}")]
    Publication {
        /// The device.
        device: String,
        /// What is wrong with it.
        source: PublicationError,
    },
    /// A command was given up on (a timeout, or its path went down); its queue pair is
    /// considered lost.
    #[error("queue pair {qid}: gave up on {what}: {why}")]
    Abandoned {
        /// The queue pair.
        qid: u16,
        /// The command.
        what: String,
        /// Why.
        why: String,
    },
    /// A request the driver refuses (transfer too large, out of the data segment).
    #[error("{0}")]
    BadRequest(#[from] BadRequest),
}

pub(crate) fn access(what: &str) -> impl Fn(AccessError) -> DistError + '_ {
    move |source| DistError::Access {
        what: what.to_string(),
        source,
    }
}
