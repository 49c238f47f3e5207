//! The one error type of the SmartIO layer: SISCI shared memory and its device-oriented
//! extension (Device Lending, the device API) fail with the same [`SciError`].
//!
//! Every variant names what it concerns (host, adapter, node id, segment, device) and the
//! numbers involved; its doc comment says which SISCI error class (`sci_error_t`) it belongs
//! to, and [`SciError::class`] returns that class (see [`SciErrorClass`]). None is fatal to
//! the cluster: each refuses one call and leaves every table as it was before the call.

mod class;
mod iommu;

pub use class::{SciErrorClass, SCI_ERR_MASK};
pub use iommu::DeviceIommuFailure;

use crate::lending::Fdid;
use smartio_fabric::units::format_size;
use smartio_fabric::{ClusterNodeId, MulticastError, NtbError};
use smartio_host::{HostError, RamError};
use thiserror::Error;

/// The former name of [`SciError`] in the device API; the same type.
pub type SmartIoError = SciError;

/// A SISCI or SmartIO failure. Messages name the host, adapter, node id, segment or device
/// involved and, for exhausted resources, how much was asked for and how much there is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SciError {
    // --- Hosts, adapters and node ids -------------------------------------------------
    /// `SCI_ERR_NO_SUCH_ADAPTERNO`: the host has no adapter with this number.
    #[error("host {host} has no NTB adapter {number}")]
    UnknownAdapter {
        /// Host name.
        host: String,
        /// Adapter number asked for.
        number: u32,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: no host of the cluster has this id (a SISCI call).
    #[error("no host has id {id} (the cluster has {hosts} hosts, ids 0..{hosts})")]
    NoSuchHostId {
        /// The id given.
        id: u32,
        /// How many hosts there are.
        hosts: usize,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: no host of that name (or, for a host id SmartIO was
    /// given, `host` is "with id N").
    #[error("unknown host {host:?} (hosts: {known})")]
    UnknownHost {
        /// Asked for.
        host: String,
        /// The hosts.
        known: String,
    },
    /// `SCI_ERR_NO_SUCH_NODEID`: no adapter in the cluster has this node id.
    #[error("no NTB adapter has node id {0}")]
    UnknownNodeId(ClusterNodeId),
    /// `SCI_ERR_NOT_CONNECTED`: no NTB path (or every path has a link down) between two
    /// hosts.
    #[error("no working NTB path between {from} and {to}")]
    NoPath {
        /// One host.
        from: String,
        /// The other.
        to: String,
    },
    /// `SCI_ERR_NO_LINK_ACCESS`: a link between two adapters is down.
    #[error("{from} cannot reach {to}: link {link} is down")]
    LinkDown {
        /// The near adapter.
        from: String,
        /// The far adapter.
        to: String,
        /// The link that is down.
        link: String,
    },

    // --- Segments ---------------------------------------------------------------------
    /// `SCI_ERR_ILLEGAL_PARAMETER`: a segment size no segment can have (larger than the
    /// host's RAM, or past 64 bits once rounded to whole pages).
    #[error(
        "{}a segment of {size} bytes cannot be created: {why}",
        for_device(device)
    )]
    SegmentSize {
        /// `lender:device` the segment is for, when the device API was asked.
        device: Option<String>,
        /// The size asked for.
        size: u64,
        /// Why.
        why: String,
    },
    /// `SCI_ERR_SIZE_ALIGNMENT`: a segment of no bytes (Dolphin's library refuses a size
    /// it cannot make a segment of with this code, as libsisci refuses registering no
    /// memory).
    #[error("a segment of 0 bytes cannot be created: a segment holds at least one byte")]
    EmptySegment,
    /// `SCI_ERR_NOSPC`: a segment larger than the host's RAM (refused before anything is
    /// allocated).
    #[error(
        "host {host}: a segment of {size} bytes cannot be created: the host has {ram} bytes of RAM"
    )]
    LargerThanRam {
        /// Host name.
        host: String,
        /// The size asked for.
        size: u64,
        /// The host's RAM.
        ram: u64,
    },
    /// `SCI_ERR_SEGMENTID_USED`: the segment id is taken on this host.
    #[error("host {host}: segment id {id} is already in use")]
    SegmentIdInUse {
        /// Host name.
        host: String,
        /// The id.
        id: u32,
    },
    /// `SCI_ERR_NO_SUCH_SEGMENT`: no segment with this id on the host behind the node id.
    #[error("node {node_id} (host {host}): no segment {id}")]
    NoSuchSegment {
        /// Node id connected to.
        node_id: ClusterNodeId,
        /// Host behind it.
        host: String,
        /// Segment id.
        id: u32,
    },
    /// `SCI_ERR_NO_SUCH_INTNO` (the value of `SCI_ERR_NO_SUCH_SEGMENT`): no data interrupt
    /// with this number on the host behind the node id.
    #[error("node {node_id} (host {host}): no data interrupt {id}")]
    NoSuchInterrupt {
        /// Node id connected to.
        node_id: ClusterNodeId,
        /// Host behind it.
        host: String,
        /// Interrupt number.
        id: u32,
    },
    /// `SCI_ERR_CONNECTION_REFUSED`: the segment exists but is not available on that
    /// adapter.
    #[error("node {node_id} (host {host}): segment {id} is not available on that adapter")]
    NotAvailable {
        /// Node id connected to.
        node_id: ClusterNodeId,
        /// Host behind it.
        host: String,
        /// Segment id.
        id: u32,
    },
    /// `SCI_ERR_SEGMENT_NOT_PREPARED`: the segment must be prepared on the adapter first.
    #[error("host {host}: segment {id} is not prepared on adapter {adapter}")]
    NotPrepared {
        /// Host name.
        host: String,
        /// Segment id.
        id: u32,
        /// Adapter number.
        adapter: u32,
    },
    /// `SCI_ERR_ILLEGAL_OPERATION`: the segment's memory is device memory the device API
    /// allocated; only [`crate::SmartIo::remove_segment`] gives it back.
    #[error("host {host}: segment {id} is device memory of the device API; remove it with SmartIo::remove_segment")]
    NotOwner {
        /// Host name.
        host: String,
        /// Segment id.
        id: u32,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: the segment does not receive the multicast group through
    /// that adapter.
    #[error("host {host}: segment {id} does not receive multicast group {group} through adapter {adapter}")]
    NotMember {
        /// Host name.
        host: String,
        /// Segment id.
        id: u32,
        /// Adapter number.
        adapter: u32,
        /// The group's number.
        group: u32,
    },
    /// `SCI_ERR_BUSY`: something still uses the object (connections, maps, members).
    #[error("{what} is busy: {users}")]
    Busy {
        /// The object.
        what: String,
        /// Who uses it.
        users: String,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: the handle does not (or no longer) name a live object.
    #[error("{what} {id} does not exist (already removed, disconnected or unmapped)")]
    Stale {
        /// What kind of object (`segment`, `map handle`, ...).
        what: &'static str,
        /// Its id or handle.
        id: u64,
    },
    /// `SCI_ERR_OUT_OF_RANGE`: an access outside a map or segment.
    #[error("access of {len} bytes at offset {offset:#x} is outside the {size}-byte {what}")]
    OutOfRange {
        /// Map or segment.
        what: &'static str,
        /// Offset.
        offset: u64,
        /// Length.
        len: u64,
        /// Its size.
        size: u64,
    },
    /// `SCI_ERR_NOSPC`: the host's RAM could not hold the segment (whichever API asked:
    /// both draw from the host's one allocator).
    #[error("host {host}: {source}")]
    Memory {
        /// Host name.
        host: String,
        /// Why.
        source: RamError,
    },

    // --- NTB, IOMMU and multicast hardware ----------------------------------------------
    /// An NTB table is full or the adapters are not connected; the class follows the
    /// adapter's answer (`SCI_ERR_HW_NOSPC` for full tables, `SCI_ERR_NOT_CONNECTED` for no
    /// path, ...).
    #[error(transparent)]
    Ntb(#[from] NtbError),
    /// Like [`SciError::Ntb`], for resources taken on behalf of a device.
    #[error("{device}: {source}")]
    DeviceNtb {
        /// `lender:device` (or the segment or map) the resources were for.
        device: String,
        /// What the adapter said.
        source: NtbError,
    },
    /// A multicast group operation failed; the class follows the switch's answer.
    #[error(transparent)]
    Multicast(#[from] MulticastError),
    /// `SCI_ERR_HW_NOSPC`: the host IOMMU refused the segment mapping for the adapter.
    #[error("host {host}: IOMMU: {source}")]
    Iommu {
        /// Host name.
        host: String,
        /// What went wrong.
        source: smartio_fabric::IommuError,
    },
    /// `SCI_ERR_HW_NOSPC`: an IOMMU operation for a device failed (or giving its resources
    /// back did).
    #[error("{device}: IOMMU of {host}: {why}")]
    DeviceIommu {
        /// `lender:device`.
        device: String,
        /// Whose IOMMU.
        host: String,
        /// What went wrong.
        #[source]
        why: Box<DeviceIommuFailure>,
    },

    // --- Data interrupts ----------------------------------------------------------------
    /// `SCI_ERR_OUT_OF_RANGE`: the payload does not fit a data interrupt message.
    #[error("data interrupt payload of {len} bytes exceeds the {max}-byte limit")]
    PayloadTooLarge {
        /// Length given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// `SCI_ERR_HW_NOSPC`: the adapter's DMA engine carries a queue already (it has one
    /// ring).
    #[error("{adapter}: its DMA engine already carries a DMA queue (it has one ring)")]
    DmaEngineTaken {
        /// The adapter's name.
        adapter: String,
    },
    /// `SCI_ERR_TIMEOUT`: no message arrived in time.
    #[error("no data interrupt arrived within {0}")]
    Timeout(smartio_platform::SimDuration),

    // --- Devices (the SmartIO extension) ------------------------------------------------
    /// `SCI_ERR_NO_SUCH_FDID`: no registered device has this fdid.
    #[error("no device with fdid {0} is registered")]
    UnknownFdid(Fdid),
    /// `SCI_ERR_NO_SUCH_FDID`: the registered function is gone — a VF whose PF driver
    /// disabled SR-IOV on the lender; its fdid names nothing that can be borrowed.
    #[error("{device} is gone: its physical function disabled SR-IOV")]
    FunctionGone {
        /// `lender:device`.
        device: String,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: a `lender:device` name, BAR or handle that matches no
    /// registered device or live object.
    #[error("no registered device {spec:?} ({why})")]
    UnknownDevice {
        /// What was asked for.
        spec: String,
        /// Why it does not resolve, with what exists.
        why: String,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: a segment over a BAR of a device of the caller's own
    /// host (`SCIAttachPhysicalMemory`) that cannot be made: no such device in that host,
    /// no such BAR, or a range outside it.
    #[error("{host}:{device} BAR{bar}: {why}")]
    LocalDevice {
        /// The host asked about.
        host: String,
        /// The device as named.
        device: String,
        /// The BAR.
        bar: u8,
        /// What is wrong, with what exists.
        why: String,
    },
    /// `SCI_ERR_BUSY`: the function is already registered.
    #[error("{device} is already registered as fdid {fdid}")]
    AlreadyRegistered {
        /// `lender:device`.
        device: String,
        /// Its fdid.
        fdid: Fdid,
    },
    /// `SCI_ERR_NOT_AVAILABLE`: a second exclusive borrow (or a shared one while a host
    /// holds the device exclusively).
    #[error("{device} (fdid {fdid}) is borrowed exclusively by {borrower}")]
    Borrowed {
        /// `lender:device`.
        device: String,
        /// Its fdid.
        fdid: Fdid,
        /// The host holding it.
        borrower: String,
    },
    /// `SCI_ERR_BUSY`: the lender's own driver is using the device.
    #[error("{device} is bound to driver {driver} on its lender; unbind it before lending")]
    InUseByLender {
        /// `lender:device`.
        device: String,
        /// The lender's driver.
        driver: String,
    },
    /// `SCI_ERR_ILLEGAL_OPERATION`: a host asked to borrow its own device.
    #[error("{device} is installed in {host} itself; use it directly")]
    OwnDevice {
        /// `lender:device`.
        device: String,
        /// The host.
        host: String,
    },
    /// `SCI_ERR_ILLEGAL_OPERATION`: the borrower holds no borrow of the device.
    #[error("{device} is not borrowed by {host}")]
    NotBorrowed {
        /// `lender:device`.
        device: String,
        /// The host.
        host: String,
    },
    /// `SCI_ERR_ILLEGAL_OPERATION`: MDEV pass-through needs an IOMMU on both sides (the
    /// lender's mirrors the guest-physical layout; the borrower's gives the NTB contiguous
    /// windows over the VM's scattered pages).
    #[error("{device} cannot be passed through to VM {vm}: MDEV needs the IOMMU of {host} (iommu = true in the scenario)")]
    MdevNeedsIommu {
        /// `lender:device`.
        device: String,
        /// The VM.
        vm: String,
        /// The host whose IOMMU is off.
        host: String,
    },
    /// `SCI_ERR_HW_NOSPC`: a VM's memory does not fit through the lender's NTB window
    /// beside the entry that carries the relayed interrupts.
    #[error(
        "{device}: VM {vm} has {} of memory, but {adapter}'s NTB window is only {}; MDEV maps all of it, and an entry of {} for the interrupts it relays",
        format_size(*memory),
        format_size(*window),
        format_size(*entry)
    )]
    VmWindowTooSmall {
        /// `lender:device`.
        device: String,
        /// The VM.
        vm: String,
        /// The lender's adapter.
        adapter: String,
        /// Its window in bytes.
        window: u64,
        /// The VM's memory in bytes.
        memory: u64,
        /// The adapter's look-up-table entry size in bytes.
        entry: u64,
    },
    /// `SCI_ERR_HW_NOSPC`: without a borrower IOMMU the lender must map all borrower RAM,
    /// and its NTB window is too small.
    #[error(
        "{device}: {borrower} has no IOMMU, so all its RAM ({}, addresses up to {}) must be mapped through {adapter}, whose NTB window is only {}",
        format_size(*ram),
        format_size(*needed),
        format_size(*window)
    )]
    WindowTooSmall {
        /// `lender:device`.
        device: String,
        /// Borrower host.
        borrower: String,
        /// The lender's adapter.
        adapter: String,
        /// Its window size in bytes.
        window: u64,
        /// Bytes the window must cover (the end of the highest RAM range).
        needed: u64,
        /// The borrower's RAM in bytes.
        ram: u64,
    },
    /// `SCI_ERR_ILLEGAL_ADDRESS`: a window the device must reach lies beyond the device's
    /// addressing limit.
    #[error("{device} can address only up to {limit:#x}, but its {what} is at {addr:#x}; turn on the lender's IOMMU so SmartIO can remap it low")]
    AddressLimit {
        /// `lender:device`.
        device: String,
        /// The device's highest address.
        limit: u64,
        /// Which window.
        what: String,
        /// Where that window is.
        addr: u64,
    },
    /// `SCI_ERR_HW_NOSPC`: the low I/O virtual address range of a lender device domain is
    /// used up.
    #[error("{device}: no room left below {limit:#x} to remap {len:#x} bytes")]
    LowSpaceExhausted {
        /// `lender:device`.
        device: String,
        /// The addressing limit.
        limit: u64,
        /// Bytes needed.
        len: u64,
    },
    /// The borrower's OS refused the shadow device (or a configuration access failed):
    /// `SCI_ERR_TRANSFER_FAILED` for a failed access, `SCI_ERR_ILLEGAL_PARAMETER` otherwise.
    #[error("{0}")]
    Host(#[from] HostError),
}

/// `"lender:device: "` when a segment size error concerns a device, else nothing.
fn for_device(device: &Option<String>) -> String {
    device
        .as_ref()
        .map_or_else(String::new, |d| format!("{d}: "))
}

/// `Ok` if `len` bytes at `offset` lie inside `size` bytes of a `what`.
pub fn check_range(what: &'static str, offset: u64, len: u64, size: u64) -> Result<(), SciError> {
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(SciError::OutOfRange {
            what,
            offset,
            len,
            size,
        });
    }
    Ok(())
}
