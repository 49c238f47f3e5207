//! The SmartIO service and Device Lending (Paper V §3–§4).
//!
//! Lenders *register* their functions; each gets a cluster-wide id ([`Fdid`]) and any host
//! can list them. A host *borrows* a device exclusively: SmartIO takes the NTB and IOMMU
//! resources the device needs and hot-adds a *shadow device* to the borrower's PCI tree,
//! where the native driver binds to it as to a local device.
//!
//! ```text
//!  borrower                                   lender
//!   CPU ── BARs window (borrower LUT) ═══════► device BARs            (MMIO)
//!   RAM ◄═ DMA window (lender LUT, borrower IOMMU or all RAM) ◄── device (DMA)
//!   MSI ◄═ MSI window (lender LUT) ◄──────────────────────────── device (MSI-X writes)
//!   config ── message ──► lender CPU ── configuration request ──► device
//! ```
//!
//! Every window is set up once, at borrow time; afterwards the data path is hardware alone
//! (counted: [`SmartIo::lender_interactions`] does not move while a driver maps DMA buffers).
//! Returning unbinds the driver first (hot-remove), disables the function, and gives back
//! every look-up-table entry, requester id and IOMMU mapping the borrow took.
//!
//! With the lender's IOMMU on, the device sits in its own domain where only its windows are
//! mapped: a stray DMA faults at the lender's root complex (reported by
//! [`SmartIo::device_faults`]) and lender memory is untouched. Windows beyond a device's
//! addressing limit are then remapped to low addresses. All its traffic goes through the
//! lender's root complex (ACS), which the engine costs, read-request splitting included.
//!
//! Peer-to-peer between a borrowed device and another device (Paper V §4.4) is resolved by
//! the lender: same lender — the target's own bus address; target in the borrower or in a
//! different lender — a look-up-table mapping on the lender's NTB towards the target's host.
//! Either way the transaction takes the shortest path.
//!
//! The service is split by job: `registry` gives fdids and lists devices, `borrow` lends
//! a device (windows, shadow device, return), `path` chooses the adapters a window uses and
//! resolves peer-to-peer addresses, `api` is the device-oriented API (its segments are
//! records of the service's [`Sisci`]), `grants` the ledger of taken resources and `shadow`
//! the borrower's view of a lent device. Errors are the crate's one [`crate::SciError`]
//! (`SmartIoError` is the same type).

mod api;
mod borrow;
mod grants;
mod mdev;
mod path;
mod registry;
mod shadow;

pub use crate::error::SmartIoError;
pub use api::{CpuMap, DeviceBorrow, Hints, PeerRequester, Segment, SegmentLocation};
pub use borrow::{BorrowOptions, Lent};
pub use grants::{ReleaseError, SharedKey};
pub use mdev::Mdev;
pub use registry::{BorrowerInfo, DeviceInfo, Fdid, SharingMethod};

use crate::sisci::Sisci;
use crate::DeviceIommuFailure;
use grants::{release, Grant, Ledger};
use registry::Registered;
use smartio_calibration::Calibration;
use smartio_fabric::{EndpointId, HostId};
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_platform::SimDuration;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// How a function SmartIO lends shows on its lender (as a stub driver would on Linux).
const CLAIM: &str = "smartio";

#[derive(Debug, Default)]
struct State {
    devices: BTreeMap<Fdid, Registered>,
    next: u32,
    ledger: Ledger,
    api: api::ApiState,
}

/// The SmartIO drivers of all hosts, as one service.
#[derive(Debug)]
pub(crate) struct Service {
    pub machine: Machine,
    hosts: Vec<HostOs>,
    /// The segment system: every device-API segment is a record of it.
    sisci: Sisci,
    message: SimDuration,
    state: RefCell<State>,
    interactions: Cell<u64>,
}

/// The SmartIO service of a cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SmartIo {
    inner: Rc<Service>,
}

impl SmartIo {
    /// The service for the cluster simulated by `machine`, whose hosts run `hosts` (in host
    /// order). No device is registered yet. Its segments are SISCI segments of
    /// [`SmartIo::sisci`], whose memory comes from the hosts' kernel allocators.
    pub fn new(machine: &Machine, hosts: &[HostOs], calibration: &Calibration) -> SmartIo {
        SmartIo {
            inner: Rc::new(Service {
                machine: machine.clone(),
                hosts: hosts.to_vec(),
                sisci: Sisci::on_hosts(machine, hosts),
                message: SimDuration::from_ns_f64(calibration.smartio.control_message_ns.value),
                state: RefCell::new(State {
                    next: 1,
                    ..State::default()
                }),
                interactions: Cell::new(0),
            }),
        }
    }

    /// The simulation.
    pub fn machine(&self) -> &Machine {
        &self.inner.machine
    }

    /// The SISCI drivers this service's segments belong to: the same segment records (ids
    /// per host), the same allocators. Programs that use SISCI next to the device API take
    /// this one, so both see every segment.
    pub fn sisci(&self) -> &Sisci {
        &self.inner.sisci
    }

    /// The OS of `host`.
    ///
    /// Panics if `host` is not a host of this cluster (an id from the fabric or from
    /// [`SmartIo::host_by_name`] always is).
    pub fn host(&self, host: HostId) -> &HostOs {
        &self.inner.hosts[host.index()]
    }

    /// The host called `name`.
    pub fn host_by_name(&self, name: &str) -> Result<HostId, SmartIoError> {
        let f = self.inner.machine.fabric();
        f.host_by_name(name)
            .ok_or_else(|| SmartIoError::UnknownHost {
                host: name.to_string(),
                known: f.host_names(),
            })
    }

    /// Messages SmartIO has exchanged with lenders so far (borrow, configuration accesses,
    /// peer resolution, return). The data path sends none.
    pub fn lender_interactions(&self) -> u64 {
        self.inner.interactions.get()
    }
}

impl Service {
    /// Who holds `fdid` so that nobody else may take it exclusively: a borrower, a VM
    /// (`host/vm`), or a program holding it through the API; `None` if it is free.
    fn holder(&self, st: &State, fdid: Fdid) -> Option<String> {
        let d = st.devices.get(&fdid)?;
        if let Some(b) = &d.borrow {
            return Some(self.hosts[b.borrower.index()].name().to_string());
        }
        if let Some(m) = &d.mdev {
            return Some(m.vm.clone());
        }
        st.api
            .holders(fdid)
            .next()
            .map(|h| self.hosts[h.host.index()].name().to_string())
    }

    /// Refuses a registered function that no longer exists (a VF whose PF disabled SR-IOV).
    fn check_present(&self, endpoint: EndpointId, qualified: &str) -> Result<(), SmartIoError> {
        if self.machine.fabric().function_present(endpoint) {
            Ok(())
        } else {
            Err(SmartIoError::FunctionGone {
                device: qualified.to_string(),
            })
        }
    }

    /// Who uses `device` of `lender` other than SmartIO itself: a driver of the lender's
    /// kernel, or VFIO passing it through to a VM there.
    fn lender_user(&self, lender: HostId, device: &str) -> Option<String> {
        self.hosts[lender.index()]
            .bound_driver(device)
            .filter(|d| d != CLAIM)
    }

    /// Marks `device` of `lender` as SmartIO's while someone borrows it, so that the
    /// lender's drivers and VFIO leave it alone; [`Service::unclaim`] when the last holder
    /// is gone.
    fn claim(&self, lender: HostId, device: &str) {
        let os = &self.hosts[lender.index()];
        if os.bound_driver(device).is_none() {
            // Not bound (checked just before by every caller): the claim cannot be refused.
            let _ = os.claim(device, CLAIM);
        }
    }

    fn unclaim(&self, lender: HostId, device: &str) {
        let os = &self.hosts[lender.index()];
        if os.bound_driver(device).as_deref() == Some(CLAIM) {
            os.unclaim(device);
        }
    }

    pub(crate) fn count_lender_interaction(&self) {
        self.interactions.set(self.interactions.get() + 1);
    }

    /// `Ok` if `host` is a host of this cluster. Every call that takes a host id from its
    /// caller checks it first, so the service indexes its hosts only with ids it checked.
    pub(super) fn check_host(&self, host: HostId) -> Result<(), SmartIoError> {
        if host.index() < self.hosts.len() {
            return Ok(());
        }
        Err(SmartIoError::UnknownHost {
            host: format!("with id {}", host.0),
            known: self
                .hosts
                .iter()
                .map(|h| h.name().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Gives `grants` back; a failure names `what` and `host`.
    fn release_for(
        &self,
        ledger: &mut Ledger,
        grants: Vec<Grant>,
        what: String,
        host: HostId,
    ) -> Result<(), SmartIoError> {
        release(&self.machine, ledger, grants).map_err(|e| SmartIoError::DeviceIommu {
            device: what,
            host: self.hosts[host.index()].name().to_string(),
            why: Box::new(DeviceIommuFailure::GivingBack(e)),
        })
    }
}
