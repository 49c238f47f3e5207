//! The SmartIO layer.
//!
//! [`sisci`]: SISCI-shaped shared-memory segments over NTBs — create, prepare, connect, map
//! for the CPU, sequences, data interrupts and multicast. [`lending`]: Device Lending and
//! the device-oriented API, SISCI's extension: its segments are SISCI segments (one record,
//! one allocator per host). Every call fails with the one [`SciError`], classed by SISCI's
//! error codes ([`SciErrorClass`]).

#![forbid(unsafe_code)]

mod error;
pub mod lending;
pub mod sisci;

pub use error::{check_range, DeviceIommuFailure, SciError, SciErrorClass, SCI_ERR_MASK};

pub use lending::{
    BorrowOptions, CpuMap, DeviceBorrow, DeviceInfo, Fdid, Hints, Lent, Mdev, PeerRequester,
    Segment, SegmentLocation, SmartIo, SmartIoError,
};
