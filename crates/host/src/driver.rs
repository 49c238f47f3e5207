//! What a driver implements to be bound to devices by a host's kernel.

use crate::device::DeviceHandle;
use crate::pci::PciId;
use std::any::Any;
use std::rc::Rc;

pub use crate::future::BoxFuture;

/// Why a driver could not bind. Drivers live in crates above this one and are kept as
/// `dyn Driver`, so the host cannot name their error types: each driver returns its own
/// typed error, boxed, and the host keeps it in [`crate::HostError::ProbeFailed`] as a
/// [`crate::ForeignError`] (so the host's error stays `Clone` and comparable).
pub type ProbeError = Box<dyn std::error::Error + Send + Sync>;

/// A driver: which functions it takes, and how it takes and releases one.
pub trait Driver {
    /// The driver's name (`nvme`, ...).
    fn name(&self) -> &str;

    /// Whether the driver handles functions with `id` (by class, or vendor and device).
    fn matches(&self, id: &PciId) -> bool;

    /// Binds to `device`; returns the driver's per-device state (what `driver_data` gives
    /// back) or why it could not bind.
    fn probe(&self, device: DeviceHandle) -> BoxFuture<Result<Rc<dyn Any>, ProbeError>>;

    /// Unbinds from a device before it goes away: stop I/O, release queues, disable it.
    fn remove(&self, state: Rc<dyn Any>) -> BoxFuture<()>;
}
