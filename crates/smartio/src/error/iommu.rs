//! What went wrong in an IOMMU operation SmartIO made for a device
//! ([`super::SciError::DeviceIommu`]).

use crate::lending::ReleaseError;
use smartio_fabric::IommuError;
use smartio_host::{GuestMemoryError, RamError};
use thiserror::Error;

/// Why an IOMMU operation for a device failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeviceIommuFailure {
    /// The IOMMU refused a mapping or a domain.
    #[error("{0}")]
    Iommu(#[from] IommuError),
    /// Unmapping a guest BAR the guest moved failed.
    #[error("unmapping a moved guest BAR: {0}")]
    MovedBar(#[source] ReleaseError),
    /// The host says its IOMMU is on, but the device has no domain in it.
    #[error("IOMMU reported on but has no domain")]
    NoDomain,
    /// The adapter's DMA-window I/O virtual space is used up.
    #[error("DMA-window space of {adapter} exhausted: {source}")]
    WindowSpace {
        /// The adapter.
        adapter: String,
        /// The space allocator's refusal.
        source: RamError,
    },
    /// A VM's guest memory does not translate to its host's.
    #[error("{0}")]
    GuestMemory(#[from] GuestMemoryError),
    /// Giving the device's resources back failed.
    #[error("giving resources back: {0}")]
    GivingBack(#[source] ReleaseError),
}
