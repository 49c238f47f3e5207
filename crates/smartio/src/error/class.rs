//! SISCI's error classes (`sci_error_t`, Dolphin's SISCI API) and which one each
//! [`SciError`] belongs to.
//!
//! The class is what a SISCI program would branch on (retry on `Busy`, give up on
//! `NoSuchSegment`, free something on `HwNospc`); the [`SciError`] itself keeps the context
//! for the message.

use super::SciError;
use smartio_fabric::{MulticastError, NtbError};
use smartio_host::HostError;

/// A SISCI error class: the `SCI_ERR_*` code a real SISCI driver returns for the same
/// failure. Only the classes this emulation produces are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SciErrorClass {
    /// `SCI_ERR_BUSY`: the object is in use (connected, mapped, borrowed, registered).
    Busy,
    /// `SCI_ERR_NOSPC`: out of local resources (host RAM for a segment).
    Nospc,
    /// `SCI_ERR_HW_NOSPC`: out of hardware resources (look-up-table or requester-id
    /// entries, NTB window, IOMMU domains or address space, multicast groups).
    HwNospc,
    /// `SCI_ERR_NO_SUCH_ADAPTERNO`: the host has no adapter with that number.
    NoSuchAdapterNo,
    /// `SCI_ERR_TIMEOUT`: nothing arrived in time.
    Timeout,
    /// `SCI_ERR_OUT_OF_RANGE`: an offset or length outside a segment, map or message.
    OutOfRange,
    /// `SCI_ERR_NO_SUCH_SEGMENT`: no segment with that id behind the node id.
    NoSuchSegment,
    /// `SCI_ERR_CONNECTION_REFUSED`: the segment is not available on that adapter.
    ConnectionRefused,
    /// `SCI_ERR_ILLEGAL_PARAMETER`: a handle, id, name or size that names nothing valid.
    IllegalParameter,
    /// `SCI_ERR_SEGMENT_NOT_PREPARED`: the segment is not prepared on that adapter.
    SegmentNotPrepared,
    /// `SCI_ERR_SIZE_ALIGNMENT`: a size no segment can have (none at all).
    SizeAlignment,
    /// `SCI_ERR_ILLEGAL_ADDRESS`: an address the requester cannot use.
    IllegalAddress,
    /// `SCI_ERR_ILLEGAL_OPERATION`: the call is not allowed on this object.
    IllegalOperation,
    /// `SCI_ERR_SEGMENTID_USED`: the segment id is taken on that host.
    SegmentIdUsed,
    /// `SCI_ERR_NOT_CONNECTED`: no working path between the adapters or hosts.
    NotConnected,
    /// `SCI_ERR_NO_SUCH_NODEID`: no adapter has that node id.
    NoSuchNodeId,
    /// `SCI_ERR_TRANSFER_FAILED`: an access on the fabric failed.
    TransferFailed,
    /// `SCI_ERR_NO_SUCH_FDID`: no registered device has that fdid (SmartIO extension).
    NoSuchFdid,
    /// `SCI_ERR_NOT_AVAILABLE`: the device is held by someone else (SmartIO extension:
    /// what a borrow of a device another holder excludes returns).
    NotAvailable,
    /// `SCI_ERR_ILLEGAL_FLAG`: a flag the call (or a DMA vector entry) does not take.
    IllegalFlag,
    /// `SCI_ERR_MAX_ENTRIES`: more entries than a DMA queue or vector holds.
    MaxEntries,
    /// `SCI_ERR_NO_LINK_ACCESS`: a link between the adapters is down.
    NoLinkAccess,
}

/// Every SISCI error code has this bit set (`SCI_ERR_OK`, 0, has not).
pub const SCI_ERR_MASK: u32 = 0x4000_0000;

impl SciErrorClass {
    /// The value of the `SCI_ERR_*` constant, as `sisci_error.h` defines it: the values
    /// public SISCI code shows (0x900 upwards with [`SCI_ERR_MASK`]); `SCI_ERR_NO_SUCH_FDID`,
    /// whose value no public source gives, is 0xC01 with the mask (a range SISCI does not
    /// use). A program compares against the name, so only equality with the header matters.
    pub fn code(self) -> u32 {
        let low = match self {
            SciErrorClass::Busy => 0x900,
            SciErrorClass::Nospc => 0x904,
            SciErrorClass::HwNospc => 0x906,
            SciErrorClass::NoSuchAdapterNo => 0x909,
            SciErrorClass::Timeout => 0x90A,
            SciErrorClass::OutOfRange => 0x90B,
            SciErrorClass::NoSuchSegment => 0x90C,
            SciErrorClass::ConnectionRefused => 0x90E,
            SciErrorClass::SizeAlignment => 0x910,
            SciErrorClass::IllegalParameter => 0x912,
            SciErrorClass::SegmentNotPrepared => 0x914,
            SciErrorClass::IllegalAddress => 0x915,
            SciErrorClass::IllegalOperation => 0x916,
            SciErrorClass::SegmentIdUsed => 0x918,
            SciErrorClass::NotConnected => 0x91B,
            SciErrorClass::NoSuchNodeId => 0xA00,
            SciErrorClass::TransferFailed => 0xA06,
            SciErrorClass::NoSuchFdid => 0xC01,
            SciErrorClass::NotAvailable => 0x91C,
            SciErrorClass::IllegalFlag => 0x902,
            SciErrorClass::MaxEntries => 0x913,
            SciErrorClass::NoLinkAccess => 0xA05,
        };
        SCI_ERR_MASK | low
    }

    /// The `SCI_ERR_*` name of the class, as SISCI's headers spell it.
    pub fn name(self) -> &'static str {
        match self {
            SciErrorClass::Busy => "SCI_ERR_BUSY",
            SciErrorClass::Nospc => "SCI_ERR_NOSPC",
            SciErrorClass::HwNospc => "SCI_ERR_HW_NOSPC",
            SciErrorClass::NoSuchAdapterNo => "SCI_ERR_NO_SUCH_ADAPTERNO",
            SciErrorClass::Timeout => "SCI_ERR_TIMEOUT",
            SciErrorClass::OutOfRange => "SCI_ERR_OUT_OF_RANGE",
            SciErrorClass::NoSuchSegment => "SCI_ERR_NO_SUCH_SEGMENT",
            SciErrorClass::ConnectionRefused => "SCI_ERR_CONNECTION_REFUSED",
            SciErrorClass::IllegalParameter => "SCI_ERR_ILLEGAL_PARAMETER",
            SciErrorClass::SegmentNotPrepared => "SCI_ERR_SEGMENT_NOT_PREPARED",
            SciErrorClass::SizeAlignment => "SCI_ERR_SIZE_ALIGNMENT",
            SciErrorClass::IllegalAddress => "SCI_ERR_ILLEGAL_ADDRESS",
            SciErrorClass::IllegalOperation => "SCI_ERR_ILLEGAL_OPERATION",
            SciErrorClass::SegmentIdUsed => "SCI_ERR_SEGMENTID_USED",
            SciErrorClass::NotConnected => "SCI_ERR_NOT_CONNECTED",
            SciErrorClass::NoSuchNodeId => "SCI_ERR_NO_SUCH_NODEID",
            SciErrorClass::TransferFailed => "SCI_ERR_TRANSFER_FAILED",
            SciErrorClass::NoSuchFdid => "SCI_ERR_NO_SUCH_FDID",
            SciErrorClass::NotAvailable => "SCI_ERR_NOT_AVAILABLE",
            SciErrorClass::IllegalFlag => "SCI_ERR_ILLEGAL_FLAG",
            SciErrorClass::MaxEntries => "SCI_ERR_MAX_ENTRIES",
            SciErrorClass::NoLinkAccess => "SCI_ERR_NO_LINK_ACCESS",
        }
    }
}

impl std::fmt::Display for SciErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The class of an NTB adapter's refusal.
fn ntb_class(e: &NtbError) -> SciErrorClass {
    match e {
        NtbError::LutFull { .. } | NtbError::RequesterTableFull { .. } => SciErrorClass::HwNospc,
        NtbError::NoPath { .. } => SciErrorClass::NotConnected,
        NtbError::UnknownAdapter(_) => SciErrorClass::NoSuchAdapterNo,
        NtbError::BeyondAddressSpace { .. } => SciErrorClass::OutOfRange,
        NtbError::UnknownRequester { .. } | NtbError::NotMapped { .. } | NtbError::Empty => {
            SciErrorClass::IllegalParameter
        }
    }
}

/// The class of a multicast switch's refusal.
fn multicast_class(e: &MulticastError) -> SciErrorClass {
    match e {
        MulticastError::GroupsExhausted { .. } => SciErrorClass::HwNospc,
        MulticastError::Busy { .. } => SciErrorClass::Busy,
        MulticastError::BeyondAddressSpace { .. } => SciErrorClass::OutOfRange,
        MulticastError::UnknownGroup(_)
        | MulticastError::AlreadyMember { .. }
        | MulticastError::NotMember { .. } => SciErrorClass::IllegalParameter,
    }
}

impl SciError {
    /// The SISCI error class of this error (each variant's doc comment names it).
    pub fn class(&self) -> SciErrorClass {
        use SciErrorClass as C;
        match self {
            SciError::UnknownAdapter { .. } => C::NoSuchAdapterNo,
            SciError::NoSuchHostId { .. }
            | SciError::UnknownHost { .. }
            | SciError::SegmentSize { .. }
            | SciError::NotMember { .. }
            | SciError::Stale { .. }
            | SciError::UnknownDevice { .. }
            | SciError::LocalDevice { .. } => C::IllegalParameter,
            SciError::UnknownNodeId(_) => C::NoSuchNodeId,
            SciError::NoPath { .. } => C::NotConnected,
            SciError::LinkDown { .. } => C::NoLinkAccess,
            SciError::SegmentIdInUse { .. } => C::SegmentIdUsed,
            SciError::NoSuchSegment { .. } | SciError::NoSuchInterrupt { .. } => C::NoSuchSegment,
            SciError::NotAvailable { .. } => C::ConnectionRefused,
            SciError::NotPrepared { .. } => C::SegmentNotPrepared,
            SciError::NotOwner { .. }
            | SciError::MdevNeedsIommu { .. }
            | SciError::OwnDevice { .. }
            | SciError::NotBorrowed { .. } => C::IllegalOperation,
            SciError::Busy { .. }
            | SciError::AlreadyRegistered { .. }
            | SciError::InUseByLender { .. } => C::Busy,
            SciError::Borrowed { .. } => C::NotAvailable,
            SciError::OutOfRange { .. } | SciError::PayloadTooLarge { .. } => C::OutOfRange,
            SciError::Memory { .. } | SciError::LargerThanRam { .. } => C::Nospc,
            SciError::EmptySegment => C::SizeAlignment,
            SciError::Ntb(e) | SciError::DeviceNtb { source: e, .. } => ntb_class(e),
            SciError::Multicast(e) => multicast_class(e),
            SciError::Iommu { .. }
            | SciError::DeviceIommu { .. }
            | SciError::WindowTooSmall { .. }
            | SciError::VmWindowTooSmall { .. }
            | SciError::LowSpaceExhausted { .. }
            | SciError::DmaEngineTaken { .. } => C::HwNospc,
            SciError::Timeout(_) => C::Timeout,
            SciError::UnknownFdid(_) | SciError::FunctionGone { .. } => C::NoSuchFdid,
            SciError::AddressLimit { .. } => C::IllegalAddress,
            SciError::Host(HostError::Access { .. }) => C::TransferFailed,
            SciError::Host(_) => C::IllegalParameter,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lending::Fdid;
    use smartio_fabric::{ClusterNodeId, GroupId};
    use smartio_host::RamError;

    fn s(x: &str) -> String {
        x.to_string()
    }

    /// One value of every variant with the class its doc comment names.
    fn every_variant() -> Vec<(SciError, SciErrorClass)> {
        use SciErrorClass as C;
        let full = NtbError::LutFull {
            adapter: s("a.ntb0"),
            node_id: ClusterNodeId(4),
            needed: 1,
            free: 0,
            limit: 64,
            entry_size: s("2G"),
        };
        vec![
            (
                SciError::UnknownAdapter {
                    host: s("h"),
                    number: 3,
                },
                C::NoSuchAdapterNo,
            ),
            (
                SciError::NoSuchHostId { id: 9, hosts: 2 },
                C::IllegalParameter,
            ),
            (
                SciError::UnknownHost {
                    host: s("x"),
                    known: s("a, b"),
                },
                C::IllegalParameter,
            ),
            (SciError::UnknownNodeId(ClusterNodeId(7)), C::NoSuchNodeId),
            (
                SciError::NoPath {
                    from: s("a"),
                    to: s("b"),
                },
                C::NotConnected,
            ),
            (
                SciError::SegmentSize {
                    device: None,
                    size: 1,
                    why: s("w"),
                },
                C::IllegalParameter,
            ),
            (SciError::EmptySegment, C::SizeAlignment),
            (
                SciError::LargerThanRam {
                    host: s("h"),
                    size: 2,
                    ram: 1,
                },
                C::Nospc,
            ),
            (
                SciError::SegmentIdInUse {
                    host: s("h"),
                    id: 1,
                },
                C::SegmentIdUsed,
            ),
            (
                SciError::NoSuchSegment {
                    node_id: ClusterNodeId(4),
                    host: s("h"),
                    id: 9,
                },
                C::NoSuchSegment,
            ),
            (
                SciError::NoSuchInterrupt {
                    node_id: ClusterNodeId(4),
                    host: s("h"),
                    id: 3,
                },
                C::NoSuchSegment,
            ),
            (
                SciError::NotAvailable {
                    node_id: ClusterNodeId(4),
                    host: s("h"),
                    id: 9,
                },
                C::ConnectionRefused,
            ),
            (
                SciError::NotPrepared {
                    host: s("h"),
                    id: 1,
                    adapter: 0,
                },
                C::SegmentNotPrepared,
            ),
            (
                SciError::NotOwner {
                    host: s("h"),
                    id: 1,
                },
                C::IllegalOperation,
            ),
            (
                SciError::NotMember {
                    host: s("h"),
                    id: 1,
                    adapter: 0,
                    group: 0,
                },
                C::IllegalParameter,
            ),
            (
                SciError::Busy {
                    what: s("segment 1"),
                    users: s("1 map"),
                },
                C::Busy,
            ),
            (SciError::Stale { what: "map", id: 3 }, C::IllegalParameter),
            (
                SciError::OutOfRange {
                    what: "map",
                    offset: 8,
                    len: 8,
                    size: 8,
                },
                C::OutOfRange,
            ),
            (
                SciError::Memory {
                    host: s("h"),
                    source: RamError::OutOfMemory {
                        size: 8192,
                        align: 4096,
                        free: 0,
                    },
                },
                C::Nospc,
            ),
            (SciError::Ntb(full.clone()), C::HwNospc),
            (
                SciError::Ntb(NtbError::NoPath {
                    from: s("a"),
                    to: s("b"),
                }),
                C::NotConnected,
            ),
            (
                SciError::DeviceNtb {
                    device: s("l:nvme0"),
                    source: full,
                },
                C::HwNospc,
            ),
            (
                SciError::Multicast(MulticastError::GroupsExhausted { limit: 1 }),
                C::HwNospc,
            ),
            (
                SciError::Multicast(MulticastError::UnknownGroup(GroupId(3))),
                C::IllegalParameter,
            ),
            (
                SciError::Iommu {
                    host: s("h"),
                    source: smartio_fabric::IommuError::Disabled,
                },
                C::HwNospc,
            ),
            (
                SciError::DeviceIommu {
                    device: s("d"),
                    host: s("h"),
                    why: Box::new(crate::DeviceIommuFailure::NoDomain),
                },
                C::HwNospc,
            ),
            (
                SciError::PayloadTooLarge { len: 57, max: 56 },
                C::OutOfRange,
            ),
            (
                SciError::Timeout(smartio_platform::SimDuration::from_ns_f64(1.0)),
                C::Timeout,
            ),
            (SciError::UnknownFdid(Fdid(9)), C::NoSuchFdid),
            (
                SciError::FunctionGone {
                    device: s("l:dma0.vf1"),
                },
                C::NoSuchFdid,
            ),
            (
                SciError::UnknownDevice {
                    spec: s("x"),
                    why: s("y"),
                },
                C::IllegalParameter,
            ),
            (
                SciError::AlreadyRegistered {
                    device: s("d"),
                    fdid: Fdid(1),
                },
                C::Busy,
            ),
            (
                SciError::Borrowed {
                    device: s("d"),
                    fdid: Fdid(1),
                    borrower: s("b"),
                },
                C::NotAvailable,
            ),
            (
                SciError::InUseByLender {
                    device: s("d"),
                    driver: s("nvme"),
                },
                C::Busy,
            ),
            (
                SciError::OwnDevice {
                    device: s("d"),
                    host: s("h"),
                },
                C::IllegalOperation,
            ),
            (
                SciError::NotBorrowed {
                    device: s("d"),
                    host: s("h"),
                },
                C::IllegalOperation,
            ),
            (
                SciError::WindowTooSmall {
                    device: s("d"),
                    borrower: s("b"),
                    adapter: s("a"),
                    window: 1 << 30,
                    needed: 1 << 31,
                    ram: 1 << 31,
                },
                C::HwNospc,
            ),
            (
                SciError::MdevNeedsIommu {
                    device: s("d"),
                    vm: s("b/vm0"),
                    host: s("l"),
                },
                C::IllegalOperation,
            ),
            (
                SciError::VmWindowTooSmall {
                    device: s("d"),
                    vm: s("b/vm0"),
                    adapter: s("a"),
                    window: 1 << 30,
                    memory: 1 << 32,
                    entry: 1 << 24,
                },
                C::HwNospc,
            ),
            (
                SciError::AddressLimit {
                    device: s("d"),
                    limit: 0xffff_ffff,
                    what: s("w"),
                    addr: 1 << 40,
                },
                C::IllegalAddress,
            ),
            (
                SciError::LowSpaceExhausted {
                    device: s("d"),
                    limit: 1 << 32,
                    len: 1 << 30,
                },
                C::HwNospc,
            ),
            (
                SciError::LinkDown {
                    from: s("a.ntb0"),
                    to: s("b.ntb0"),
                    link: s("cable"),
                },
                C::NoLinkAccess,
            ),
            (
                SciError::DmaEngineTaken {
                    adapter: s("a.ntb0"),
                },
                C::HwNospc,
            ),
            (
                SciError::Host(HostError::NoMsix { device: s("d") }),
                C::IllegalParameter,
            ),
        ]
    }

    #[test]
    fn every_error_variant_has_the_sisci_class_its_doc_names() {
        for (e, class) in every_variant() {
            assert_eq!(e.class(), class, "{e:?}");
        }
    }

    #[test]
    fn every_error_message_is_specific_and_class_names_are_sisci_codes() {
        for (e, class) in every_variant() {
            let msg = e.to_string();
            assert!(!msg.trim().is_empty(), "{e:?}");
            assert!(class.to_string().starts_with("SCI_ERR_"), "{class:?}");
        }
    }

    #[test]
    fn a_segment_size_error_names_the_device_only_when_there_is_one() {
        let plain = SciError::SegmentSize {
            device: None,
            size: 9,
            why: s("w"),
        };
        assert_eq!(
            plain.to_string(),
            "a segment of 9 bytes cannot be created: w"
        );
        let dev = SciError::SegmentSize {
            device: Some(s("l:nvme0")),
            size: 9,
            why: s("w"),
        };
        assert_eq!(
            dev.to_string(),
            "l:nvme0: a segment of 9 bytes cannot be created: w"
        );
    }
}
