//! Drivers. Each is written against the [`smartio_platform`] traits only, the way a native
//! driver is written against its kernel's API: it cannot tell which engine runs it, nor
//! whether its device is local or borrowed.

#![forbid(unsafe_code)]

pub mod dma;
pub mod gpu;
pub mod net;
pub mod nic;
pub mod ntb_dma;
pub mod nvme;
pub mod nvme_dist;
pub mod nvme_gpu;
pub mod sisci_dma;

pub use dma::{DmaTestDriver, DriverError, Location};
pub use gpu::{
    DeviceBuffer, Event, GpuContext, GpuError, GpuProperties, HostBuffer, PeerAccess, RuntimeCosts,
    Stream,
};
pub use ntb_dma::{AdapterDmaError, AdapterDmaQueue, Batch, QueueMemory, QueueView};
pub use nvme::{
    BlockOp, CompletionMode, NvmeDevice, NvmeDriver, NvmeDriverConfig, NvmeError,
    UnknownCompletionMode,
};
pub use sisci_dma::{SisciDmaError, SisciDmaQueue};
