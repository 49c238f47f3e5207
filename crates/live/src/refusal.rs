//! Why the daemon does not carry out a request: the SISCI layer refused it ([`SciError`]), or
//! one of the daemon's own checks did ([`Refused`]) — a request out of order, a value the
//! call does not take, a map the live engine cannot hand out as a memory file. Either way
//! the program sees an `sci_error_t` class and the message ([`RequestError::class`]).

use crate::shm::ShmError;
use smartio_fabric::RouteError;
use smartio_smartio::{Fdid, SciError, SciErrorClass};
use thiserror::Error;

/// A request the daemon answers with an error.
#[derive(Debug, Error)]
pub(crate) enum RequestError {
    /// The SISCI layer (or SmartIO) refused.
    #[error(transparent)]
    Sci(#[from] SciError),
    /// The daemon's own check refused.
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl RequestError {
    /// The `SCI_ERR_*` class the program sees: SISCI's own, `SCI_ERR_ILLEGAL_PARAMETER` for
    /// the daemon's refusals.
    pub(crate) fn class(&self) -> SciErrorClass {
        match self {
            RequestError::Sci(e) => e.class(),
            RequestError::Refused(_) => SciErrorClass::IllegalParameter,
        }
    }
}

/// `SCI_ERR_ILLEGAL_PARAMETER`: a request the daemon refuses as asked.
#[derive(Debug, Error)]
pub(crate) enum Refused {
    /// A second `Hello` on a connection.
    #[error("this connection has already said which host it is")]
    HelloAgain,
    /// Another request before `Hello`.
    #[error("the first request on a connection must be Hello")]
    NoHello,
    /// An auxiliary connection naming a descriptor token of no open descriptor of its host.
    #[error("descriptor {token} (no open descriptor of host {host} has that token)")]
    UnknownToken {
        /// The token given.
        token: u64,
        /// The host the connection said it is.
        host: String,
    },
    /// A handle removed while a call waited on it.
    #[error(
        "handle {handle}, removed while a call waited on it, does not exist (already removed, \
         disconnected or unmapped)"
    )]
    RemovedWhileWaiting {
        /// The handle.
        handle: u64,
    },
    /// `WaitSegmentEvent` on a handle that is neither a segment nor a connection.
    #[error(
        "handle {handle} (neither a segment nor a connection) does not exist (already \
         removed, disconnected or unmapped)"
    )]
    NoEventSource {
        /// The handle.
        handle: u64,
    },
    /// An adapter name longer than the protocol carries.
    #[error("an adapter name of {len} bytes; at most {max}")]
    NameTooLong {
        /// Its bytes.
        len: usize,
        /// [`crate::protocol::MAX_NAME`].
        max: usize,
    },
    /// A SISCI connection whose map reaches a device's BAR.
    #[error("a SISCI connection that reaches a BAR")]
    ConnectionToBar,
    /// A map whose CPU address routes nowhere.
    #[error("the map's address does not route: {0}")]
    Unroutable(#[source] RouteError),
    /// A map that lands neither in RAM nor in a BAR.
    #[error("the map lands in neither RAM nor a BAR")]
    NeitherRamNorBar,
    /// A map over memory that is not contiguous.
    #[error("the map lands in memory that is not contiguous")]
    NotContiguous,
    /// A map of no bytes.
    #[error("an empty map")]
    EmptyMap,
    /// A broadcast segment of another size than its group's members.
    #[error("broadcast segment {segment} is {size} bytes; its group's members have {group}")]
    GroupSize {
        /// The segment's id.
        segment: u32,
        /// Its bytes.
        size: u64,
        /// The group members' bytes.
        group: u64,
    },
    /// The memory file of a broadcast window could not be made.
    #[error("no memory file for the window: {0}")]
    WindowFile(#[source] ShmError),
    /// A memory type a device segment cannot have.
    #[error(
        "memory type {memtype} for a device segment (SCI_MEMTYPE_PRIVATE or SCI_MEMTYPE_SHARED)"
    )]
    DeviceSegmentType {
        /// `SCI_MEMTYPE_*` given.
        memtype: u32,
    },
    /// A memory type `ConnectDeviceSegment` does not know.
    #[error("memory type {memtype}")]
    MemoryType {
        /// `SCI_MEMTYPE_*` given.
        memtype: u32,
    },
    /// Access hints with bits SISCI does not define.
    #[error("access hints {hints:#x}")]
    Hints {
        /// The hints given.
        hints: u32,
    },
    /// A BAR number no BAR can have.
    #[error("BAR {id} of device {fdid}")]
    NoSuchBar {
        /// The number given.
        id: u32,
        /// The device.
        fdid: Fdid,
    },
    /// A device segment id nobody made.
    #[error("device {fdid} has no segment {id}")]
    NoDeviceSegment {
        /// The device.
        fdid: Fdid,
        /// The id given.
        id: u32,
    },
    /// Another borrower's private device segment.
    #[error("segment {id} of device {fdid} is another borrower's private memory")]
    PrivateSegment {
        /// The segment's id.
        id: u32,
        /// The device.
        fdid: Fdid,
    },
    /// `UnmapForDevice` of a segment not mapped for the device.
    #[error("the segment is not mapped for device {fdid}")]
    NotMappedForDevice {
        /// The device.
        fdid: Fdid,
    },
    /// A connection that reaches no segment any more.
    #[error("connection {handle} reaches no segment")]
    Unconnected {
        /// The connection's handle.
        handle: u64,
    },
    /// A BAR larger than a register page the live engine maps.
    #[error("BAR{bar} of {size} bytes: the live engine maps BARs of up to {max} bytes")]
    BarTooLarge {
        /// The BAR.
        bar: u8,
        /// Its bytes.
        size: u64,
        /// [`crate::pages::MAX_PAGE_BYTES`].
        max: u64,
    },
    /// The register page's memory file could not be made.
    #[error("{0}")]
    Page(#[source] ShmError),
    /// No function of the host at a bus and devfn.
    #[error("host {host} has no function at bus {bus:#x} devfn {devfn:#x}")]
    NoFunction {
        /// The host.
        host: String,
        /// Bus number given.
        bus: u32,
        /// Device and function given.
        devfn: u32,
    },
    /// A DMA queue whose engine has not taken its ring yet.
    #[error("the DMA queue is still being created")]
    QueueNotReady,
    /// An adapter without a register BAR for its DMA engine.
    #[error("{adapter} has no register BAR")]
    NoRegisterBar {
        /// The adapter.
        adapter: String,
    },
    /// A DMA transfer over a connection of another adapter (or to a multicast group).
    #[error("connection {connection} is not made through the DMA queue's adapter {adapter}")]
    OtherAdapter {
        /// The connection's handle.
        connection: u64,
        /// The queue's adapter number.
        adapter: u32,
    },
}
