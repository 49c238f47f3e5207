//! What can go wrong registering, borrowing and returning devices.

use super::Fdid;
use smartio_fabric::units::format_size;
use smartio_fabric::NtbError;
use smartio_host::HostError;
use thiserror::Error;

/// A SmartIO service failure. Every variant names the device and hosts involved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SmartIoError {
    /// No registered device has this fdid.
    #[error("no device with fdid {0} is registered")]
    UnknownFdid(Fdid),
    /// A `lender:device` name that matches no registered device.
    #[error("no registered device {spec:?} ({why})")]
    UnknownDevice {
        /// What was asked for.
        spec: String,
        /// Why it does not resolve, with what exists.
        why: String,
    },
    /// A segment size that cannot be represented once rounded to whole pages.
    #[error("{device}: a segment of {size} bytes cannot be created: {why}")]
    SegmentSize {
        /// `lender:device` the segment is for.
        device: String,
        /// The size asked for.
        size: u64,
        /// Why.
        why: String,
    },
    /// No host of that name.
    #[error("unknown host {host:?} (hosts: {known})")]
    UnknownHost {
        /// Asked for.
        host: String,
        /// The hosts.
        known: String,
    },
    /// The function is already registered.
    #[error("{device} is already registered as fdid {fdid}")]
    AlreadyRegistered {
        /// `lender:device`.
        device: String,
        /// Its fdid.
        fdid: Fdid,
    },
    /// A second exclusive borrow.
    #[error("{device} (fdid {fdid}) is borrowed exclusively by {borrower}")]
    Busy {
        /// `lender:device`.
        device: String,
        /// Its fdid.
        fdid: Fdid,
        /// The host holding it.
        borrower: String,
    },
    /// The lender's own driver is using the device.
    #[error("{device} is bound to driver {driver} on its lender; unbind it before lending")]
    InUseByLender {
        /// `lender:device`.
        device: String,
        /// The lender's driver.
        driver: String,
    },
    /// A host asked to borrow its own device.
    #[error("{device} is installed in {host} itself; use it directly")]
    OwnDevice {
        /// `lender:device`.
        device: String,
        /// The host.
        host: String,
    },
    /// The borrower holds no borrow of the device.
    #[error("{device} is not borrowed by {host}")]
    NotBorrowed {
        /// `lender:device`.
        device: String,
        /// The host.
        host: String,
    },
    /// No NTB path (or every path has a link down) between two hosts.
    #[error("no working NTB path between {from} and {to}")]
    NoPath {
        /// One host.
        from: String,
        /// The other.
        to: String,
    },
    /// Without a borrower IOMMU the lender must map all borrower RAM, and cannot.
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
    /// A window the device must reach lies beyond the device's addressing limit.
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
    /// The low I/O virtual address range of a lender device domain is used up.
    #[error("{device}: no room left below {limit:#x} to remap {len:#x} bytes")]
    LowSpaceExhausted {
        /// `lender:device`.
        device: String,
        /// The addressing limit.
        limit: u64,
        /// Bytes needed.
        len: u64,
    },
    /// An NTB look-up-table or requester-id operation failed (tables full, ...).
    #[error("{device}: {source}")]
    Ntb {
        /// `lender:device`.
        device: String,
        /// What the adapter said.
        source: NtbError,
    },
    /// An IOMMU operation failed.
    #[error("{device}: IOMMU of {host}: {message}")]
    Iommu {
        /// `lender:device`.
        device: String,
        /// Whose IOMMU.
        host: String,
        /// What it said.
        message: String,
    },
    /// The borrower's OS refused the shadow device (or a configuration access failed).
    #[error("{0}")]
    Host(#[from] HostError),
}
