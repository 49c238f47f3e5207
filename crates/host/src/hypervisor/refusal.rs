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

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_fabric::DomainId;
    use smartio_platform::{BusAddr, GuestPhysAddr};

    /// Two refusals of every kind that differ only in their payload (the kinds without one
    /// once).
    fn pairs() -> Vec<(Refusal, Option<Refusal>)> {
        let s = |x: &str| x.to_string();
        let access = |a: u64| AccessError::UnsupportedRequest {
            host: s("h"),
            addr: BusAddr(a),
        };
        let claim = |d: &str| {
            Box::new(HostError::Claimed {
                device: s(d),
                holder: s("x"),
            })
        };
        let one = Arc::new(std::io::Error::other("one"));
        vec![
            (
                Refusal::OtherHost { host: s("a") },
                Some(Refusal::OtherHost { host: s("b") }),
            ),
            (
                Refusal::AlreadyPassedThrough { vm: s("a") },
                Some(Refusal::AlreadyPassedThrough { vm: s("b") }),
            ),
            (
                Refusal::InUse {
                    driver: s("d"),
                    host: s("h"),
                },
                Some(Refusal::InUse {
                    driver: s("d"),
                    host: s("k"),
                }),
            ),
            (
                Refusal::NoIommu { host: s("a") },
                Some(Refusal::NoIommu { host: s("b") }),
            ),
            (
                Refusal::Iommu(IommuError::UnknownDomain(DomainId(1))),
                Some(Refusal::Iommu(IommuError::UnknownDomain(DomainId(2)))),
            ),
            (Refusal::Claim(claim("a")), Some(Refusal::Claim(claim("b")))),
            (
                Refusal::GuestMemory(GuestMemoryError::Unmapped {
                    addr: GuestPhysAddr(1),
                }),
                Some(Refusal::GuestMemory(GuestMemoryError::Unmapped {
                    addr: GuestPhysAddr(2),
                })),
            ),
            (Refusal::Access(access(1)), Some(Refusal::Access(access(2)))),
            (
                Refusal::NoInterruptLine { host: None },
                Some(Refusal::NoInterruptLine { host: Some(s("a")) }),
            ),
            (Refusal::NoIntxRoute, None),
            (
                Refusal::Backend(one),
                Some(Refusal::backend(std::io::Error::other("two"))),
            ),
        ]
    }

    #[test]
    fn a_refusal_equals_its_like_and_no_refusal_with_another_cause() {
        let all = pairs();
        for (i, (a, other)) in all.iter().enumerate() {
            assert_eq!(a, &a.clone(), "{a:?}");
            if let Some(b) = other {
                assert_ne!(a, b, "{a:?} vs {b:?}");
                assert_eq!(b, &b.clone(), "{b:?}");
            }
            for (j, (c, _)) in all.iter().enumerate() {
                if i != j {
                    assert_ne!(a, c, "{a:?} vs {c:?}");
                }
            }
        }
        // The InUse payload in both fields, and a backend error by what it says.
        let in_use = |d: &str, h: &str| Refusal::InUse {
            driver: d.into(),
            host: h.into(),
        };
        assert_ne!(in_use("d", "h"), in_use("e", "h"));
        assert_eq!(
            Refusal::backend(std::io::Error::other("same")),
            Refusal::backend(std::io::Error::other("same"))
        );
    }

    #[test]
    fn a_backend_error_is_found_by_its_type_and_only_in_a_backend_refusal() {
        let r = Refusal::backend(std::io::Error::other("theirs"));
        let found = r.backend_error::<std::io::Error>().map(|e| e.to_string());
        assert_eq!(found.as_deref(), Some("theirs"));
        assert!(r.backend_error::<std::fmt::Error>().is_none());
        assert!(Refusal::NoIntxRoute
            .backend_error::<std::io::Error>()
            .is_none());
    }
}
