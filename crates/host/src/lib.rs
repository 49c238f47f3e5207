//! The host OS model: what an operating system on one emulated host owns.
//!
//! Today: the allocator of the host's physical RAM, which shared-memory segments, DMA buffers
//! and queues come from. The PCI device tree, driver binding and the device handle follow with
//! issue 4.

#![forbid(unsafe_code)]

pub mod memory;

pub use memory::{RamAllocator, RamError};
