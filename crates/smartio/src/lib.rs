//! The SmartIO layer.
//!
//! Today: [`sisci`], SISCI-shaped shared-memory segments over NTBs — create, prepare,
//! connect, map for the CPU, sequences, data interrupts and multicast. Device Lending
//! (issue 5) and the device-oriented API (issue 6) build on it.

#![forbid(unsafe_code)]

mod error;
pub mod lending;
pub mod sisci;

pub use error::{SciError, SciErrorClass};

pub use lending::{
    BorrowOptions, CpuMap, DeviceBorrow, DeviceInfo, Fdid, Hints, Lent, PeerRequester, Segment,
    SegmentLocation, SmartIo, SmartIoError,
};
