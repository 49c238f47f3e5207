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

mod api;
mod error;
mod grants;
mod shadow;

pub use api::{CpuMap, DeviceBorrow, Hints, PeerRequester, Segment, SegmentLocation};
pub use error::SmartIoError;

use grants::{release, Grant, Ledger, Taker};
use serde::Serialize;
use shadow::{ShadowDma, ShadowFunction, WindowKind};
use smartio_engine::{Calibration, FaultRecord, Sim};
use smartio_fabric::{AdapterId, DomainId, EndpointId, HostId, Requester};
use smartio_host::{BarWindow, DeviceHandle, DmaMapper, HostOs, PciId, PeerBar, RamAllocator};
use smartio_platform::pci::{self, command};
use smartio_platform::{AccessError, Clock, SimDuration};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

/// A cluster-wide device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Fdid(pub u32);

impl fmt::Display for Fdid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a device is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharingMethod {
    /// Hot-added into the borrower as a shadow device (exclusive).
    DeviceLending,
    /// Held by a program through the device API (exclusive or shared).
    Api,
}

impl SharingMethod {
    /// The name shown in listings.
    pub fn name(self) -> &'static str {
        match self {
            SharingMethod::DeviceLending => "device-lending",
            SharingMethod::Api => "api",
        }
    }
}

/// Choices made when borrowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BorrowOptions {
    /// Size of the DMA window when the borrower has an IOMMU (rounded up to whole
    /// look-up-table entries of the lender's adapter).
    pub dma_window: u64,
    /// Highest bus address the device can generate (`u32::MAX` for a 32-bit device).
    pub dma_limit: u64,
}

impl Default for BorrowOptions {
    fn default() -> Self {
        Self {
            dma_window: 2 << 30,
            dma_limit: u64::MAX,
        }
    }
}

/// A host using a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BorrowerInfo {
    /// The borrowing host.
    pub host: String,
    /// How.
    pub method: SharingMethod,
    /// Whether no one else may use the device.
    pub exclusive: bool,
    /// The shadow device's name in the borrower's tree.
    pub shadow: String,
}

/// A registered device, as any host lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// Cluster-wide id.
    pub fdid: Fdid,
    /// The lender.
    pub lender: String,
    /// Name in the lender's tree.
    pub device: String,
    /// Device kind (`nvme`, `gpu`, `dma`).
    pub kind: String,
    /// What the class code says.
    pub class: String,
    /// The 24-bit class code.
    pub class_code: u32,
    /// Who uses it (empty: available).
    pub borrowers: Vec<BorrowerInfo>,
}

impl DeviceInfo {
    /// `lender:device`.
    pub fn qualified(&self) -> String {
        format!("{}:{}", self.lender, self.device)
    }
}

/// A device lent to a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lent {
    /// The device.
    pub fdid: Fdid,
    /// The borrower.
    pub borrower: HostId,
    /// The shadow device's name in the borrower's tree.
    pub device: String,
}

#[derive(Debug)]
struct Borrow {
    borrower: HostId,
    shadow: String,
    grants: Vec<Grant>,
    dma: Rc<ShadowDma>,
    /// The device's domain in the lender's IOMMU (when it is on).
    domain: Option<DomainId>,
    limit: u64,
    /// Peer BARs already mapped: (host, endpoint, bar) → device address.
    peers: BTreeMap<(HostId, EndpointId, u8), u64>,
}

#[derive(Debug)]
struct Registered {
    lender: HostId,
    endpoint: EndpointId,
    name: String,
    qualified: String,
    id: PciId,
    kind: String,
    class: String,
    borrow: Option<Borrow>,
}

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
    pub sim: Sim,
    hosts: Vec<HostOs>,
    message: SimDuration,
    state: RefCell<State>,
    interactions: Cell<u64>,
}

/// The SmartIO service of a cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SmartIo {
    inner: Rc<Service>,
}

/// What a borrow set up: where the borrower's CPU reaches the BARs, the DMA window, the
/// device's MSI address, and the device's lender IOMMU domain.
struct Windows {
    bars: Vec<BarWindow>,
    dma: ShadowDma,
    msi_address: u64,
    domain: Option<DomainId>,
}

/// Where a lent device reaches a window: the lender side of a borrow.
struct DeviceSide {
    lender: HostId,
    fdid: Fdid,
    domain: Option<DomainId>,
    limit: u64,
    qualified: String,
    /// The adapter a path to the holder's host must use, if the holder chose one.
    via: Option<Via>,
}

impl DeviceSide {
    /// Makes `len` bytes at address `addr` of host `host` (RAM or a BAR there) reachable by
    /// the lent function `endpoint` over the shortest path, and returns the device's address
    /// for them (Paper V §4.4): in the lender itself, the address as it is; in another host
    /// (the borrower or another lender), a window on the lender's NTB towards that host, with
    /// the device in the adapter's requester-id table for reads and the range mapped in the
    /// far adapter's IOMMU domain when that host's IOMMU is on.
    fn reach(
        &self,
        taker: &mut Taker<'_>,
        endpoint: EndpointId,
        host: HostId,
        addr: u64,
        len: u64,
        what: &str,
    ) -> Result<u64, SmartIoError> {
        let lender_bus = if host == self.lender {
            addr
        } else {
            let (la, far) = ntb_pair_via(taker.sim, self.lender, host, self.via)?;
            let m = taker.shared_lut(la, far, addr, len)?;
            taker.requester(la, Requester::Device(endpoint))?;
            let far_ep = taker.sim.fabric().adapter(far).endpoint;
            if let Some(fd) = taker.domain_of(host, far_ep)? {
                taker.identity(host, fd, addr, len)?;
            }
            m.bus_addr
        };
        self.expose(taker, lender_bus, len, what)
    }

    /// Makes `len` bytes at lender bus address `bus` reachable by the device and returns the
    /// device's address for them: the same address, mapped one to one in its IOMMU domain
    /// when the lender's IOMMU is on, or remapped low when it lies beyond the device's reach.
    fn expose(
        &self,
        taker: &mut Taker<'_>,
        bus: u64,
        len: u64,
        what: &str,
    ) -> Result<u64, SmartIoError> {
        let reachable = bus
            .checked_add(len - 1)
            .is_some_and(|end| end <= self.limit);
        match self.domain {
            None if reachable => Ok(bus),
            None => Err(SmartIoError::AddressLimit {
                device: self.qualified.clone(),
                limit: self.limit,
                what: what.to_string(),
                addr: bus,
            }),
            Some(d) if reachable => {
                taker.identity(self.lender, d, bus, len)?;
                Ok(bus)
            }
            Some(d) => {
                let page = bus & !(grants::PAGE - 1);
                let span = (bus + len).next_multiple_of(grants::PAGE) - page;
                let low = taker
                    .low_space(self.fdid, span)
                    .filter(|low| low + span - 1 <= self.limit)
                    .ok_or_else(|| SmartIoError::LowSpaceExhausted {
                        device: self.qualified.clone(),
                        limit: self.limit,
                        len: span,
                    })?;
                taker.iommu(self.lender, d, low, page, span)?;
                Ok(low + (bus - page))
            }
        }
    }
}

impl SmartIo {
    /// The service for the cluster simulated by `sim`, whose hosts run `hosts` (in host
    /// order). No device is registered yet.
    pub fn new(sim: &Sim, hosts: &[HostOs], calibration: &Calibration) -> SmartIo {
        SmartIo {
            inner: Rc::new(Service {
                sim: sim.clone(),
                hosts: hosts.to_vec(),
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
    pub fn sim(&self) -> &Sim {
        &self.inner.sim
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
        let f = self.inner.sim.fabric();
        f.host_by_name(name)
            .ok_or_else(|| SmartIoError::UnknownHost {
                host: name.to_string(),
                known: f
                    .hosts()
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Registers `device` of `lender` for sharing.
    pub fn register(&self, lender: HostId, device: &str) -> Result<Fdid, SmartIoError> {
        self.inner.check_host(lender)?;
        let os = self.host(lender);
        let handle = os.device(device)?;
        let endpoint = os
            .endpoint_of(device)
            .ok_or_else(|| SmartIoError::UnknownDevice {
                spec: format!("{}:{device}", os.name()),
                why: "only functions installed in the lender can be registered".into(),
            })?;
        let (kind, class) = {
            let f = self.inner.sim.fabric();
            let ep = f.endpoint(endpoint);
            (ep.kind.clone(), ep.layout.description.clone())
        };
        let qualified = format!("{}:{device}", os.name());
        let mut st = self.inner.state.borrow_mut();
        if let Some((&fdid, _)) = st
            .devices
            .iter()
            .find(|(_, d)| d.lender == lender && d.endpoint == endpoint)
        {
            return Err(SmartIoError::AlreadyRegistered {
                device: qualified,
                fdid,
            });
        }
        let fdid = Fdid(st.next);
        st.next += 1;
        st.devices.insert(
            fdid,
            Registered {
                lender,
                endpoint,
                name: device.to_string(),
                qualified,
                id: handle.id(),
                kind,
                class,
                borrow: None,
            },
        );
        Ok(fdid)
    }

    /// Registers every function of every host except the NTB adapters, in host and tree
    /// order.
    pub fn register_all(&self) -> Result<Vec<Fdid>, SmartIoError> {
        let mut out = Vec::new();
        for os in &self.inner.hosts {
            for d in os.devices() {
                let Some(ep) = os.endpoint_of(d.name()) else {
                    continue;
                };
                if self.inner.sim.fabric().endpoint(ep).kind == "ntb" {
                    continue;
                }
                out.push(self.register(os.id(), d.name())?);
            }
        }
        Ok(out)
    }

    /// Every registered device, by fdid.
    pub fn devices(&self) -> Vec<DeviceInfo> {
        let st = self.inner.state.borrow();
        st.devices
            .iter()
            .map(|(&fdid, d)| DeviceInfo {
                fdid,
                lender: self.host(d.lender).name().to_string(),
                device: d.name.clone(),
                kind: d.kind.clone(),
                class: d.class.clone(),
                class_code: d.id.class,
                borrowers: d
                    .borrow
                    .iter()
                    .map(|b| BorrowerInfo {
                        host: self.host(b.borrower).name().to_string(),
                        method: SharingMethod::DeviceLending,
                        exclusive: true,
                        shadow: b.shadow.clone(),
                    })
                    .chain(st.api.holders(fdid).map(|h| BorrowerInfo {
                        host: self.host(h.host).name().to_string(),
                        method: SharingMethod::Api,
                        exclusive: h.exclusive,
                        shadow: String::new(),
                    }))
                    .collect(),
            })
            .collect()
    }

    /// The fdid of `lender:device`.
    pub fn find(&self, spec: &str) -> Result<Fdid, SmartIoError> {
        let unknown = |why: String| SmartIoError::UnknownDevice {
            spec: spec.to_string(),
            why,
        };
        let (host, device) = spec
            .split_once(':')
            .ok_or_else(|| unknown("write it as lender:device".into()))?;
        let lender = self.host_by_name(host)?;
        let st = self.inner.state.borrow();
        st.devices
            .iter()
            .find(|(_, d)| d.lender == lender && d.name == device)
            .map(|(&f, _)| f)
            .ok_or_else(|| {
                let known: Vec<_> = st
                    .devices
                    .values()
                    .filter(|d| d.lender == lender)
                    .map(|d| d.name.as_str())
                    .collect();
                unknown(format!("{host} lends: {}", known.join(", ")))
            })
    }

    /// Messages SmartIO has exchanged with lenders so far (borrow, configuration accesses,
    /// peer resolution, return). The data path sends none.
    pub fn lender_interactions(&self) -> u64 {
        self.inner.interactions.get()
    }

    /// Faults the device caused in its lender's fabric (IOMMU faults, unsupported requests).
    pub fn device_faults(&self, fdid: Fdid) -> Result<Vec<FaultRecord>, SmartIoError> {
        let (host, device) = {
            let st = self.inner.state.borrow();
            let d = st
                .devices
                .get(&fdid)
                .ok_or(SmartIoError::UnknownFdid(fdid))?;
            (self.host(d.lender).name().to_string(), d.name.clone())
        };
        Ok(self
            .inner
            .sim
            .faults()
            .into_iter()
            .filter(|f| match &f.error {
                AccessError::IommuFault {
                    host: h, requester, ..
                } => *h == host && *requester == device,
                _ => false,
            })
            .collect())
    }

    /// Borrows `fdid` for `borrower` by Device Lending: takes the windows, hot-adds the
    /// shadow device and lets the borrower's drivers probe it.
    pub async fn borrow(
        &self,
        borrower: HostId,
        fdid: Fdid,
        options: &BorrowOptions,
    ) -> Result<Lent, SmartIoError> {
        let svc = &self.inner;
        let handle = svc.prepare_borrow(borrower, fdid, options)?;
        let name = handle.name().to_string();
        // The request to the lender and its answer.
        svc.count_lender_interaction();
        let cpu = self.host(borrower).cpu();
        cpu.sleep(svc.message).await;
        cpu.sleep(svc.message).await;
        if let Err(e) = self.host(borrower).hot_add(handle).await {
            let _ = self.host(borrower).hot_remove(&name).await;
            svc.release_borrow(fdid)?;
            return Err(e.into());
        }
        Ok(Lent {
            fdid,
            borrower,
            device: name,
        })
    }

    /// Returns a borrowed device: the borrower's driver is unbound and the shadow device
    /// removed, the lender disables the function, and every resource goes back.
    pub async fn give_back(&self, borrower: HostId, fdid: Fdid) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        svc.check_host(borrower)?;
        let (shadow, lender, endpoint) = {
            let st = svc.state.borrow();
            let d = st
                .devices
                .get(&fdid)
                .ok_or(SmartIoError::UnknownFdid(fdid))?;
            match &d.borrow {
                Some(b) if b.borrower == borrower => (b.shadow.clone(), d.lender, d.endpoint),
                _ => {
                    return Err(SmartIoError::NotBorrowed {
                        device: d.qualified.clone(),
                        host: self.host(borrower).name().to_string(),
                    })
                }
            }
        };
        self.host(borrower).hot_remove(&shadow).await?;
        // The lender stops the function before its windows go away.
        svc.count_lender_interaction();
        let cpu = self.host(borrower).cpu();
        cpu.sleep(svc.message).await;
        let lender_cpu = self.host(lender).cpu();
        let mut cmd = [0u8; 2];
        let quiesce = async {
            lender_cpu
                .config_read(endpoint, pci::COMMAND, &mut cmd)
                .await?;
            let off = u16::from_le_bytes(cmd) & !(command::BUS_MASTER | command::MEMORY_SPACE);
            lender_cpu
                .config_write(endpoint, pci::COMMAND, &off.to_le_bytes())
                .await
        };
        let quiesced: Result<(), AccessError> = quiesce.await;
        cpu.sleep(svc.message).await;
        svc.release_borrow(fdid)?;
        quiesced.map_err(|source| {
            SmartIoError::Host(smartio_host::HostError::Access {
                device: shadow,
                source,
            })
        })
    }
}

/// The BARs grouped into runs that a look-up table maps together: BARs whose entry-aligned
/// ranges overlap or touch share a group (one mapping, no extra entries).
fn bar_groups(
    bars: &[smartio_fabric::topology::AssignedBar],
    entry: u64,
) -> Vec<std::ops::Range<u64>> {
    let mut ranges: Vec<_> = bars.iter().map(|b| b.range()).collect();
    ranges.sort_by_key(|r| r.start);
    let mut groups: Vec<std::ops::Range<u64>> = Vec::new();
    for r in ranges {
        match groups.last_mut() {
            Some(g) if r.start / entry <= g.end.div_ceil(entry) => g.end = g.end.max(r.end),
            _ => groups.push(r),
        }
    }
    groups
}

/// A path constraint: the NTB adapter (by number) a host's end of a path must use. A program
/// with two adapters keeps one queue pair on each, so a cut cable leaves the other working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Via {
    pub host: HostId,
    pub adapter: u32,
}

/// A pair of adapters, one in each host, with a working cable path between them.
fn ntb_pair(sim: &Sim, from: HostId, to: HostId) -> Result<(AdapterId, AdapterId), SmartIoError> {
    ntb_pair_via(sim, from, to, None)
}

/// Like [`ntb_pair`], with `via`'s host using its adapter `via.adapter`.
pub(crate) fn ntb_pair_via(
    sim: &Sim,
    from: HostId,
    to: HostId,
    via: Option<Via>,
) -> Result<(AdapterId, AdapterId), SmartIoError> {
    let f = sim.fabric();
    let allowed = |a: AdapterId| {
        let a = f.adapter(a);
        via.is_none_or(|v| v.host != a.host || v.adapter == a.number)
    };
    let adapters = |h: HostId| {
        f.adapters()
            .iter()
            .enumerate()
            .filter(move |(_, a)| a.host == h)
            .map(|(i, _)| AdapterId(i as u32))
    };
    adapters(from)
        .flat_map(|a| adapters(to).map(move |b| (a, b)))
        .find(|&(a, b)| allowed(a) && allowed(b) && f.ntb_path_up(a, b))
        .ok_or_else(|| SmartIoError::NoPath {
            from: f.host(from).name.clone(),
            to: f.host(to).name.clone(),
        })
}

impl Service {
    pub(crate) fn count_lender_interaction(&self) {
        self.interactions.set(self.interactions.get() + 1);
    }

    /// Checks the borrow is allowed, takes every window and builds the shadow device's
    /// handle; records the borrow. Nothing is left taken on failure.
    fn prepare_borrow(
        self: &Rc<Self>,
        borrower: HostId,
        fdid: Fdid,
        options: &BorrowOptions,
    ) -> Result<DeviceHandle, SmartIoError> {
        self.check_host(borrower)?;
        let (lender, endpoint, name, qualified, id) = {
            let st = self.state.borrow();
            let d = st
                .devices
                .get(&fdid)
                .ok_or(SmartIoError::UnknownFdid(fdid))?;
            let holder = d
                .borrow
                .as_ref()
                .map(|b| b.borrower)
                .or_else(|| st.api.holders(fdid).next().map(|h| h.host));
            if let Some(holder) = holder {
                return Err(SmartIoError::Busy {
                    device: d.qualified.clone(),
                    fdid,
                    borrower: self.hosts[holder.index()].name().to_string(),
                });
            }
            (
                d.lender,
                d.endpoint,
                d.name.clone(),
                d.qualified.clone(),
                d.id,
            )
        };
        if lender == borrower {
            return Err(SmartIoError::OwnDevice {
                device: qualified,
                host: self.hosts[lender.index()].name().to_string(),
            });
        }
        if let Some(driver) = self.hosts[lender.index()].bound_driver(&name) {
            return Err(SmartIoError::InUseByLender {
                device: qualified,
                driver,
            });
        }
        let (b, l) = ntb_pair(&self.sim, borrower, lender)?;
        let mut grants = Vec::new();
        let taken = {
            let mut st = self.state.borrow_mut();
            let mut taker = Taker {
                sim: &self.sim,
                ledger: &mut st.ledger,
                grants: &mut grants,
                device: &qualified,
            };
            self.take_windows(&mut taker, borrower, fdid, endpoint, (b, l), options)
        };
        let Windows {
            bars,
            dma,
            msi_address,
            domain,
        } = match taken {
            Ok(t) => t,
            Err(e) => {
                let mut st = self.state.borrow_mut();
                let _ = release(&self.sim, &mut st.ledger, grants);
                return Err(e);
            }
        };
        let os = &self.hosts[borrower.index()];
        let shadow = if os.device(&name).is_ok() {
            format!("{name}-{}", self.hosts[lender.index()].name())
        } else {
            name
        };
        let dma = Rc::new(ShadowDma {
            name: shadow.clone(),
            fdid,
            service: Rc::downgrade(self),
            ..dma
        });
        let backend = Rc::new(ShadowFunction {
            borrower_cpu: os.cpu(),
            lender_cpu: self.hosts[lender.index()].cpu(),
            lender,
            endpoint,
            message: self.message,
            msi_address,
            service: Rc::downgrade(self),
        });
        let handle = DeviceHandle::new(
            os,
            &shadow,
            id,
            bars,
            backend,
            dma.clone() as Rc<dyn DmaMapper>,
        );
        let mut st = self.state.borrow_mut();
        if let Some(d) = st.devices.get_mut(&fdid) {
            d.borrow = Some(Borrow {
                borrower,
                shadow,
                grants,
                dma,
                domain,
                limit: options.dma_limit,
                peers: BTreeMap::new(),
            });
        }
        Ok(handle)
    }

    /// Takes the BAR, DMA and MSI windows of one borrow through borrower adapter `b` and
    /// lender adapter `l`.
    fn take_windows(
        &self,
        taker: &mut Taker<'_>,
        borrower: HostId,
        fdid: Fdid,
        endpoint: EndpointId,
        (b, l): (AdapterId, AdapterId),
        options: &BorrowOptions,
    ) -> Result<Windows, SmartIoError> {
        let (
            lender,
            bars,
            ram_end,
            ram_bytes,
            msi,
            borrower_iommu,
            lender_window,
            entry,
            b_entry,
            b_ep,
            l_ep,
        ) = {
            let f = self.sim.fabric();
            let ep = f.endpoint(endpoint);
            let h = f.host(borrower);
            let la = f.adapter(l);
            (
                ep.host,
                ep.bars.clone(),
                h.ram.iter().map(|r| r.end).max().unwrap_or(0),
                h.ram.iter().map(|r| r.end - r.start).sum::<u64>(),
                h.msi.clone(),
                h.iommu.enabled(),
                la.window.end - la.window.start,
                la.entry_size,
                f.adapter(b).entry_size,
                f.adapter(b).endpoint,
                la.endpoint,
            )
        };
        let qualified = taker.device.to_string();

        // BARs: mappings on the borrower's adapter; BARs that share look-up-table entries
        // (or sit in neighbouring ones) share one mapping.
        let mut windows = Vec::new();
        let lender_domain = taker.domain_of(lender, l_ep)?;
        for group in bar_groups(&bars, b_entry) {
            let (start, end) = (group.start, group.end);
            let m = taker.lut(b, l, start, end - start)?;
            windows.extend(
                bars.iter()
                    .filter(|bar| group.contains(&bar.base.get()))
                    .map(|bar| BarWindow {
                        index: bar.index,
                        base: smartio_platform::BusAddr(m.bus_addr + (bar.base.get() - start)),
                        size: bar.size,
                    }),
            );
            // With the lender's IOMMU on, requests arriving through its adapter are
            // translated in the adapter's domain: the BARs must be mapped there.
            if let Some(d) = lender_domain {
                taker.identity(lender, d, start, end - start)?;
            }
        }
        windows.sort_by_key(|w| w.index);

        let side = DeviceSide {
            lender,
            fdid,
            domain: taker.domain_of(lender, endpoint)?,
            limit: options.dma_limit,
            qualified: qualified.clone(),
            via: None,
        };
        // Reads through the lender's NTB need the device in its requester-id table.
        taker.requester(l, Requester::Device(endpoint))?;

        // DMA window.
        let (kind, lender_bus, size) = if borrower_iommu {
            let domain = taker
                .domain_of(borrower, b_ep)?
                .ok_or_else(|| SmartIoError::Iommu {
                    device: qualified.clone(),
                    host: self.hosts[borrower.index()].name().to_string(),
                    message: "IOMMU reported on but has no domain".into(),
                })?;
            let size = options.dma_window.max(grants::PAGE).next_multiple_of(entry);
            let iova = taker.window_space(b, size, entry)?;
            let m = taker.lut(l, b, iova, size)?;
            let kind = WindowKind::Iommu {
                host: borrower,
                domain,
                iova_base: iova,
                space: RefCell::new(RamAllocator::space(iova..iova + size)),
                mapped: RefCell::new(BTreeMap::new()),
            };
            (kind, m.bus_addr, size)
        } else {
            if ram_end > lender_window {
                return Err(SmartIoError::WindowTooSmall {
                    device: qualified,
                    borrower: self.hosts[borrower.index()].name().to_string(),
                    adapter: self.sim.fabric().adapter_name(l),
                    window: lender_window,
                    needed: ram_end,
                    ram: ram_bytes,
                });
            }
            let m = taker.shared_lut(l, b, 0, ram_end)?;
            (WindowKind::WholeRam { ram_end }, m.bus_addr, ram_end)
        };
        let device_base = side.expose(taker, lender_bus, size, "DMA window")?;

        // MSI window: the borrower's interrupt controller, as the device reaches it.
        let msi_len = msi.end - msi.start;
        let m = taker.shared_lut(l, b, msi.start, msi_len)?;
        let msi_address = side.expose(taker, m.bus_addr, msi_len, "MSI window")?;

        let dma = ShadowDma {
            name: String::new(),
            device_base,
            size,
            kind,
            service: std::rc::Weak::new(),
            fdid,
        };
        Ok(Windows {
            bars: windows,
            dma,
            msi_address,
            domain: side.domain,
        })
    }

    /// Undoes a borrow's bookkeeping and gives its resources back (DMA mappings a driver
    /// left behind included).
    fn release_borrow(&self, fdid: Fdid) -> Result<(), SmartIoError> {
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        let Some(d) = st.devices.get_mut(&fdid) else {
            return Err(SmartIoError::UnknownFdid(fdid));
        };
        let qualified = d.qualified.clone();
        let Some(b) = d.borrow.take() else {
            return Ok(());
        };
        let mut grants = b.grants;
        for (host, domain, iova, len) in b.dma.leftover() {
            grants.push(Grant::Iommu {
                host,
                domain,
                iova,
                len,
            });
        }
        self.release_for(&mut st.ledger, grants, qualified, d.lender)
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
        release(&self.sim, ledger, grants).map_err(|message| SmartIoError::Iommu {
            device: what,
            host: self.hosts[host.index()].name().to_string(),
            message: format!("giving resources back: {message}"),
        })
    }

    /// Resolves a peer BAR for a borrowed device (Paper V §4.4): the address at which the
    /// device reaches it over the shortest path, set up by its lender.
    pub(crate) fn map_peer(
        self: &Rc<Self>,
        fdid: Fdid,
        bar: &PeerBar,
    ) -> Result<u64, SmartIoError> {
        let (target_base, target_size) = {
            let f = self.sim.fabric();
            let ep = f.endpoint(bar.endpoint);
            let real = ep
                .bars
                .iter()
                .find(|b| b.index == bar.index)
                .ok_or_else(|| SmartIoError::UnknownDevice {
                    spec: format!("{}:{} BAR{}", f.host(bar.host).name, ep.name, bar.index),
                    why: "the function has no such BAR".into(),
                })?;
            (real.base.get(), real.size)
        };
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        let d = st
            .devices
            .get_mut(&fdid)
            .ok_or(SmartIoError::UnknownFdid(fdid))?;
        let lender = d.lender;
        let endpoint = d.endpoint;
        let qualified = d.qualified.clone();
        let Some(b) = d.borrow.as_mut() else {
            return Err(SmartIoError::NotBorrowed {
                device: qualified,
                host: "anyone".into(),
            });
        };
        let key = (bar.host, bar.endpoint, bar.index);
        if let Some(&addr) = b.peers.get(&key) {
            return Ok(addr);
        }
        self.count_lender_interaction();
        let side = DeviceSide {
            lender,
            fdid,
            domain: b.domain,
            limit: b.limit,
            qualified: qualified.clone(),
            via: None,
        };
        let mut taker = Taker {
            sim: &self.sim,
            ledger: &mut st.ledger,
            grants: &mut b.grants,
            device: &qualified,
        };
        let addr = side.reach(
            &mut taker,
            endpoint,
            bar.host,
            target_base,
            target_size,
            "peer BAR",
        )?;
        b.peers.insert(key, addr);
        Ok(addr)
    }
}
