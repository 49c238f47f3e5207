//! Why a pass-through backend (VFIO, or SmartIO's MDEV parent) refused to give a VM a
//! function: the typed cause a [`super::VmError::PassThrough`] carries.

use crate::guest::GuestMemoryError;
use crate::HostError;
use smartio_fabric::IommuError;
use smartio_platform::AccessError;
use std::sync::Arc;
use thiserror::Error;

/// A backend's refusal. The message is the cause's own; the VM and function are the
/// [`super::VmError::PassThrough`]'s.
#[derive(Debug, Clone, Error)]
pub enum Refusal {
    /// VFIO passes through only functions of the VM's own host.
    #[error("VFIO passes through functions of the VM's own host, not of {host}")]
    OtherHost {
        /// The function's host.
        host: String,
    },
    /// The function is passed through to another VM already.
    #[error("already passed through to VM {vm}")]
    AlreadyPassedThrough {
        /// The VM that has it.
        vm: String,
    },
    /// A driver of the function's host holds it.
    #[error("in use by {driver} on {host} (unbind or return it first)")]
    InUse {
        /// The driver bound to it.
        driver: String,
        /// The function's host.
        host: String,
    },
    /// The host has no IOMMU to give the VM its own domain.
    #[error("VFIO needs the IOMMU of {host} (iommu = true in the scenario)")]
    NoIommu {
        /// The host.
        host: String,
    },
    /// The host IOMMU refused a domain, mapping or attachment.
    #[error("{0}")]
    Iommu(#[from] IommuError),
    /// The host kernel would not let the function be claimed.
    #[error("{0}")]
    Claim(#[source] Box<HostError>),
    /// The guest's memory does not translate to host memory.
    #[error("{0}")]
    GuestMemory(#[from] GuestMemoryError),
    /// A configuration access to the real function failed.
    #[error("{0}")]
    Access(#[from] AccessError),
    /// The host the function's interrupt line is routed on has no free line (`host` is
    /// `None` for the VM's own host).
    #[error("every interrupt line of {} is in use", .host.as_deref().unwrap_or("the host"))]
    NoInterruptLine {
        /// The host, when it is not the VM's own.
        host: Option<String>,
    },
    /// The backend routes no legacy INTx.
    #[error("no legacy INTx route")]
    NoIntxRoute,
    /// The backend's own error (SmartIO's, for MDEV), kept as it was raised; downcast it to
    /// the backend's error type to look inside.
    #[error("{0}")]
    Backend(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

impl PartialEq for Refusal {
    /// Equal causes; a backend's errors are equal when they are one error or say the same.
    fn eq(&self, other: &Refusal) -> bool {
        use Refusal::*;
        match (self, other) {
            (OtherHost { host: a }, OtherHost { host: b }) => a == b,
            (AlreadyPassedThrough { vm: a }, AlreadyPassedThrough { vm: b }) => a == b,
            (InUse { driver: a, host: h }, InUse { driver: b, host: k }) => a == b && h == k,
            (NoIommu { host: a }, NoIommu { host: b }) => a == b,
            (Iommu(a), Iommu(b)) => a == b,
            (Claim(a), Claim(b)) => a == b,
            (GuestMemory(a), GuestMemory(b)) => a == b,
            (Access(a), Access(b)) => a == b,
            (NoInterruptLine { host: a }, NoInterruptLine { host: b }) => a == b,
            (NoIntxRoute, NoIntxRoute) => true,
            (Backend(a), Backend(b)) => Arc::ptr_eq(a, b) || a.to_string() == b.to_string(),
            _ => false,
        }
    }
}

impl Eq for Refusal {}

impl Refusal {
    /// A backend's own error.
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Refusal {
        Refusal::Backend(Arc::new(error))
    }

    /// The backend's error as `E`, when it is one.
    pub fn backend_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Refusal::Backend(e) => e.downcast_ref(),
            _ => None,
        }
    }
}
