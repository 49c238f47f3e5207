//! The traits that device models and drivers use to touch the world.
//!
//! - [`Port`]: a requester's loads and stores (CPU) or DMA (device) into its host's PCIe
//!   domain. Reads are non-posted and complete when all data has arrived; writes are posted and
//!   complete when the last TLP has left the requester. PCIe ordering holds: a write issued
//!   after another on the same path never arrives before it.
//! - [`Clock`]: the current time and a way to let time pass (software cost, timers).
//! - [`MemoryWatch`]: wait until something writes a range of memory (polling a completion word,
//!   a doorbell page).
//! - [`BarHandler`]: how a device model answers the loads and stores that reach its BARs.
//!
//! The futures returned here are driven by the engine's executor; they are not `Send`.

use crate::addr::{BusAddr, PhysAddr};
use crate::time::{SimDuration, SimTime};
use std::future::Future;
use std::sync::Arc;
use thiserror::Error;

/// The error of a layer above the platform that refused an access (the hypervisor's, for a
/// configuration request it trapped), kept typed: the platform cannot name that layer's
/// error types, so it holds the error behind a shared pointer. It reads as that error, its
/// source is that error's source, and two are equal when they read the same (so that an
/// [`AccessError`] stays comparable).
#[derive(Debug, Clone)]
pub struct Reason(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Reason {
    /// `error`, as the reason of a refusal.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Reason {
        Reason(Arc::new(error))
    }

    /// The error itself (to downcast to its type).
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Reason {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Reason {}

/// Why a fabric access failed, as the requester observes it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AccessError {
    /// No one claims the address: the fabric answered Unsupported Request.
    #[error("unsupported request: no target claims address {addr} in host {host}")]
    UnsupportedRequest { host: String, addr: BusAddr },
    /// The target claimed the address but refused the access.
    #[error("completer abort from {target} at offset {offset:#x}: {reason}")]
    CompleterAbort {
        target: String,
        offset: u64,
        reason: CompleterError,
    },
    /// The host IOMMU has no mapping for the requester and address.
    #[error("IOMMU fault in host {host}: requester {requester} accessed {addr} ({access}) without a mapping")]
    IommuFault {
        host: String,
        requester: String,
        addr: BusAddr,
        access: &'static str,
    },
    /// An NTB window address whose look-up-table entry is not valid (Unsupported Request).
    #[error("NTB adapter {adapter}: no look-up-table entry translates {addr}")]
    NtbNoTranslation { adapter: String, addr: BusAddr },
    /// A read crossing an NTB by a requester the adapter's requester-id table does not know.
    #[error(
        "NTB adapter {adapter}: {requester} has no requester-id entry, so its read cannot complete"
    )]
    NtbNoRequesterId { adapter: String, requester: String },
    /// A link on the path is down; writes are dropped and reads return all-ones.
    #[error("link {link} is down")]
    LinkDown { link: String },
    /// A hypervisor trapped a configuration request of a VM and could not carry it out (e.g.
    /// SmartIO could not map the VM's memory when the guest enabled Bus Master).
    #[error("configuration request to {target} refused by the hypervisor: {reason}")]
    Refused {
        target: String,
        #[source]
        reason: Reason,
    },
    /// The function is gone: a virtual function removed when its physical function's driver
    /// disabled SR-IOV (or whose PF cleared VF Enable). Its handle answers every call so.
    #[error("{device} is gone: its physical function disabled SR-IOV")]
    FunctionGone { device: String },
    /// The access crosses from one target into another (e.g. past the end of a BAR).
    #[error("access of {len} bytes at {addr} crosses the end of {target}")]
    CrossesBoundary {
        addr: BusAddr,
        len: u64,
        target: String,
    },
}

/// Why a device refused an access to one of its BARs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CompleterError {
    /// The offset is not backed by a register or memory.
    #[error("offset outside any register or memory")]
    OutOfRange,
    /// A register was accessed with a width it does not support.
    #[error("unsupported access width {0}")]
    BadWidth(usize),
    /// The register is read-only.
    #[error("register is read-only")]
    ReadOnly,
}

/// Loads and stores (CPU) or DMA (device) into the requester's host PCIe domain.
pub trait Port {
    /// Non-posted read of `buf.len()` bytes at `addr`. Completes when all completions arrived.
    fn read(&self, addr: BusAddr, buf: &mut [u8]) -> impl Future<Output = Result<(), AccessError>>;

    /// Posted write of `data` at `addr`. Completes when the last TLP has left the requester;
    /// later writes on the same path arrive after it.
    fn write(&self, addr: BusAddr, data: &[u8]) -> impl Future<Output = Result<(), AccessError>>;

    /// [`Port::write`] of a buffer the caller gives away (saves a copy of large DMA data).
    fn write_owned(
        &self,
        addr: BusAddr,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<(), AccessError>> {
        async move { self.write(addr, &data).await }
    }

    /// [`Port::write`] of `data`'s bytes, which the engine may take as they are and leave
    /// `data` holding an empty buffer of its own instead, for the caller to reuse (saves a
    /// copy of large DMA data, and an allocation for the next). Afterwards `data` holds a
    /// buffer whose contents are unspecified. By default, copied as `write` copies them.
    fn write_swapped(
        &self,
        addr: BusAddr,
        data: &mut Vec<u8>,
    ) -> impl Future<Output = Result<(), AccessError>> {
        async move { self.write(addr, data).await }
    }

    /// [`Port::write`] of `len` zeroes (deallocated blocks' data: an engine may keep them
    /// without a buffer). By default, written from a zeroed buffer.
    fn write_zeroes(
        &self,
        addr: BusAddr,
        len: usize,
    ) -> impl Future<Output = Result<(), AccessError>> {
        async move { self.write(addr, &vec![0u8; len]).await }
    }

    /// [`Port::read`] into a new buffer of `len` bytes (saves a copy of large DMA data).
    fn read_owned(
        &self,
        addr: BusAddr,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, AccessError>> {
        async move {
            let mut buf = vec![0u8; len];
            self.read(addr, &mut buf).await.map(|()| buf)
        }
    }
}

/// Time as the running code sees it.
pub trait Clock {
    /// The current time.
    fn now(&self) -> SimTime;

    /// Let `duration` pass (a software step's cost, a timer).
    fn sleep(&self, duration: SimDuration) -> impl Future<Output = ()>;

    /// [`Clock::sleep`] for a named cost: `what` ("block layer: submit", "media read") names
    /// the step for an engine that explains where time goes ([`crate::activity`]).
    ///
    /// A cost is awaited where it is made, never raced: the caller does nothing else until
    /// it has passed. So an engine may let it pass in place, the clock moved on at once, when
    /// nothing else could happen meanwhile (the timed engine does when no other task is ready
    /// and nothing is due before its end; not inside a [`crate::race()`], see
    /// [`crate::race::racing`]). To wait for whichever comes first, race a [`Clock::sleep`].
    fn spend(&self, what: &'static str, duration: SimDuration) -> impl Future<Output = ()> {
        crate::activity::doing(what);
        self.sleep(duration)
    }
}

/// Waiting for memory to be written, the way a CPU polls a completion word.
pub trait MemoryWatch {
    /// Resolves after the next write that overlaps `[addr, addr + len)` of host memory has
    /// landed. The watch is armed when this is **called**, not when the future is first
    /// polled: a write that lands after the call, even while the caller is still busy
    /// (reading the very word it watches), resolves it. So the way to poll without missing a
    /// write is: arm, then read, then await the watch if what was read is stale. A write
    /// that happened before the call is not reported. Dropping the future disarms it.
    fn written(&self, addr: PhysAddr, len: u64) -> impl Future<Output = ()>;
}

/// How a device model answers accesses that reach its BARs.
///
/// Handlers run inside the engine when a TLP arrives; they must not block or wait. A handler
/// that needs to start work (a doorbell) records it and wakes the device's own task.
pub trait BarHandler {
    /// A memory read of `buf.len()` bytes at `offset` into BAR `bar`.
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError>;

    /// A memory write of `data` at `offset` into BAR `bar`.
    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError>;
}
