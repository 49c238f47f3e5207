//! Device models. Each device owns its configuration identity, BAR layout and registers, and
//! runs its own agent (a DMA engine, a controller) through the [`smartio_platform`] traits. No
//! device knows about hosts' software, SmartIO, or which engine runs it.

#![forbid(unsafe_code)]

pub mod config;
pub mod dma;
pub mod ethernet;
pub mod gpu;
pub mod kinds;
pub mod msix;
pub mod nic;
pub mod ntb_dma;
pub mod nvme;

pub use kinds::{layout_for, DeviceKind, ParamError, UnknownDeviceKind};

#[cfg(test)]
pub(crate) mod testing;
