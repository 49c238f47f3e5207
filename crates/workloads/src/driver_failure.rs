//! What failed on the way a DMA workload (`bench dma`, `bench p2p`, `device pingpong`) drives
//! the DMA test device: the host's DMA API, its memory, the driver, or the fabric under it.

use crate::attach::AttachError;
use smartio_drivers::DriverError;
use smartio_fabric::RouteError;
use smartio_host::{DmaError, GuestMemoryError, HostError, RamError};
use smartio_platform::{AccessError, BusAddr, CompleterError};
use thiserror::Error;

/// A failure of the driver path of a DMA workload.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DriverFailure {
    /// The host OS refused (enabling the device).
    #[error("{0}")]
    Host(#[from] HostError),
    /// The DMA API refused (a coherent buffer, a mapping).
    #[error("{0}")]
    Dma(#[from] DmaError),
    /// Host RAM for the buffer ran out.
    #[error("{0}")]
    Ram(#[from] RamError),
    /// The host's memory could not be written.
    #[error("{0}")]
    Memory(#[from] GuestMemoryError),
    /// The DMA test driver failed.
    #[error("{0}")]
    Device(#[from] DriverError),
    /// A copy failed, and the fabric recorded why.
    #[error("{source}: {}", join(.faults))]
    Faulted {
        /// The driver's report.
        source: DriverError,
        /// What the fabric recorded meanwhile.
        faults: Vec<AccessError>,
    },
    /// A device's store failed.
    #[error("{0}")]
    Access(#[from] AccessError),
    /// No route for a device's store.
    #[error("no path to {addr}: {source}")]
    NoPath {
        /// Where the store goes.
        addr: BusAddr,
        /// Why it does not route.
        source: RouteError,
    },
    /// A store never arrived, and the fabric recorded why.
    #[error("a store never arrived: {}", join(.faults))]
    Lost {
        /// What the fabric recorded.
        faults: Vec<AccessError>,
    },
    /// The device refused the write clearing its flag word.
    #[error("clearing the flag word: {0}")]
    ClearFlag(#[source] CompleterError),
    /// The device could not be attached (an emulator bug: the workbench's own index).
    #[error("{0}")]
    Attach(#[source] Box<AttachError>),
}

/// `a; b; c`.
fn join(faults: &[AccessError]) -> String {
    faults
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
