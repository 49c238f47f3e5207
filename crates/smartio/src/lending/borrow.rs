//! Device Lending proper: borrowing takes the BAR, DMA and MSI windows and hot-adds a
//! shadow device to the borrower; returning hot-removes it, disables the function at the
//! lender and gives every window back. Which adapters the windows use is `path`'s
//! job.

use super::grants::{release, Grant, Taker};
use super::path::{ntb_pair, DeviceSide};
use super::shadow::{ShadowDma, ShadowFunction, WindowKind};
use super::{Fdid, Service, SmartIo, SmartIoError};
use crate::DeviceIommuFailure;
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{AdapterId, DomainId, EndpointId, Fabric, HostId, Requester};
use smartio_host::{BarWindow, DeviceHandle, DmaMapper, PciId, RamAllocator};
use smartio_platform::pci::{self, command};
use smartio_platform::PAGE_SIZE;
use smartio_platform::{AccessError, Clock};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

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
pub(super) struct Borrow {
    pub(super) borrower: HostId,
    pub(super) shadow: String,
    pub(super) grants: Vec<Grant>,
    pub(super) dma: Rc<ShadowDma>,
    /// The device's domain in the lender's IOMMU (when it is on).
    pub(super) domain: Option<DomainId>,
    pub(super) limit: u64,
    /// Peer BARs already mapped: (host, endpoint, bar) → device address.
    pub(super) peers: BTreeMap<(HostId, EndpointId, u8), u64>,
}

/// What a borrow set up: where the borrower's CPU reaches the BARs, the DMA window, the
/// device's MSI address, and the device's lender IOMMU domain.
struct Windows {
    bars: Vec<BarWindow>,
    dma: ShadowDma,
    msi_address: u64,
    domain: Option<DomainId>,
}

/// A registered device that may be borrowed.
struct Lendable {
    lender: HostId,
    endpoint: EndpointId,
    /// Its name on the lender.
    name: String,
    /// `lender:device`.
    qualified: String,
    id: PciId,
}

/// What a borrow's windows are sized and placed by, read from the fabric.
struct BorrowEnds {
    /// The device's host.
    lender: HostId,
    /// The device's BARs.
    bars: Vec<AssignedBar>,
    /// The end of the borrower's RAM, and its bytes.
    ram_end: u64,
    ram_bytes: u64,
    /// The borrower's MSI range.
    msi: std::ops::Range<u64>,
    borrower_iommu: bool,
    /// Bytes of the lender adapter's NTB window, and its look-up-table entry size.
    lender_window: u64,
    entry: u64,
    /// The borrower adapter's entry size.
    b_entry: u64,
    /// The adapters' own functions.
    b_ep: EndpointId,
    l_ep: EndpointId,
}

impl BorrowEnds {
    fn of(
        f: &Fabric,
        endpoint: EndpointId,
        borrower: HostId,
        (b, l): (AdapterId, AdapterId),
    ) -> BorrowEnds {
        let ep = f.endpoint(endpoint);
        let h = f.host(borrower);
        let la = f.adapter(l);
        BorrowEnds {
            lender: ep.host,
            bars: ep.bars.clone(),
            ram_end: h.ram.iter().map(|r| r.end).max().unwrap_or(0),
            ram_bytes: h.ram.iter().map(|r| r.end - r.start).sum::<u64>(),
            msi: h.msi.clone(),
            borrower_iommu: h.iommu.enabled(),
            lender_window: la.window.end - la.window.start,
            entry: la.entry_size,
            b_entry: f.adapter(b).entry_size,
            b_ep: f.adapter(b).endpoint,
            l_ep: la.endpoint,
        }
    }
}

/// The BARs' windows: mappings on the borrower's adapter; BARs that share look-up-table
/// entries (or sit in neighbouring ones) share one mapping.
fn bar_windows(
    taker: &mut Taker<'_>,
    ends: &BorrowEnds,
    (b, l): (AdapterId, AdapterId),
) -> Result<Vec<BarWindow>, SmartIoError> {
    let mut windows = Vec::new();
    let lender_domain = taker.domain_of(ends.lender, ends.l_ep)?;
    for group in bar_groups(&ends.bars, ends.b_entry) {
        let (start, end) = (group.start, group.end);
        let m = taker.lut(b, l, start, end - start)?;
        windows.extend(
            ends.bars
                .iter()
                .filter(|bar| group.contains(&bar.base.get()))
                .map(|bar| BarWindow {
                    index: bar.index,
                    base: smartio_platform::BusAddr(m.bus_addr + (bar.base.get() - start)),
                    size: bar.size,
                }),
        );
        // With the lender's IOMMU on, requests arriving through its adapter are translated
        // in the adapter's domain: the BARs must be mapped there.
        if let Some(d) = lender_domain {
            taker.identity(ends.lender, d, start, end - start)?;
        }
    }
    windows.sort_by_key(|w| w.index);
    Ok(windows)
}

impl SmartIo {
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
        cpu.spend("SmartIO: control message", svc.message).await;
        cpu.spend("SmartIO: control message", svc.message).await;
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
        cpu.spend("SmartIO: control message", svc.message).await;
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
        cpu.spend("SmartIO: control message", svc.message).await;
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
pub(super) fn bar_groups(
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

impl Service {
    /// Checks the borrow is allowed, takes every window and builds the shadow device's
    /// handle; records the borrow. Nothing is left taken on failure.
    fn prepare_borrow(
        self: &Rc<Self>,
        borrower: HostId,
        fdid: Fdid,
        options: &BorrowOptions,
    ) -> Result<DeviceHandle, SmartIoError> {
        let device = self.check_borrow(borrower, fdid)?;
        let (b, l) = ntb_pair(&self.machine, borrower, device.lender)?;
        let mut grants = Vec::new();
        let taken = {
            let mut st = self.state.borrow_mut();
            let mut taker = Taker {
                machine: &self.machine,
                ledger: &mut st.ledger,
                grants: &mut grants,
                device: &device.qualified,
            };
            self.take_windows(&mut taker, borrower, fdid, device.endpoint, (b, l), options)
        };
        let windows = match taken {
            Ok(t) => t,
            Err(e) => {
                let mut st = self.state.borrow_mut();
                let _ = release(&self.machine, &mut st.ledger, grants);
                return Err(e);
            }
        };
        let domain = windows.domain;
        let (handle, shadow, dma) = self.shadow_device(borrower, fdid, &device, windows);
        self.claim(device.lender, &device.name);
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

    /// The device `fdid` if `borrower` may borrow it: registered, held by nobody, present,
    /// another host's, and not in use by a driver of its lender.
    fn check_borrow(&self, borrower: HostId, fdid: Fdid) -> Result<Lendable, SmartIoError> {
        self.check_host(borrower)?;
        let device = {
            let st = self.state.borrow();
            let d = st
                .devices
                .get(&fdid)
                .ok_or(SmartIoError::UnknownFdid(fdid))?;
            if let Some(holder) = self.holder(&st, fdid) {
                return Err(SmartIoError::Borrowed {
                    device: d.qualified.clone(),
                    fdid,
                    borrower: holder,
                });
            }
            Lendable {
                lender: d.lender,
                endpoint: d.endpoint,
                name: d.name.clone(),
                qualified: d.qualified.clone(),
                id: d.id,
            }
        };
        self.check_present(device.endpoint, &device.qualified)?;
        if device.lender == borrower {
            return Err(SmartIoError::OwnDevice {
                device: device.qualified,
                host: self.hosts[device.lender.index()].name().to_string(),
            });
        }
        if let Some(driver) = self.lender_user(device.lender, &device.name) {
            return Err(SmartIoError::InUseByLender {
                device: device.qualified,
                driver,
            });
        }
        Ok(device)
    }

    /// The shadow device's handle on `borrower` over the taken `windows` (named after the
    /// lender's function, or with the lender's name added when the borrower has one of that
    /// name); its name and DMA window.
    fn shadow_device(
        self: &Rc<Self>,
        borrower: HostId,
        fdid: Fdid,
        device: &Lendable,
        windows: Windows,
    ) -> (DeviceHandle, String, Rc<ShadowDma>) {
        let Windows {
            bars,
            dma,
            msi_address,
            domain: _,
        } = windows;
        let lender = device.lender;
        let os = &self.hosts[borrower.index()];
        let shadow = if os.device(&device.name).is_ok() {
            format!("{}-{}", device.name, self.hosts[lender.index()].name())
        } else {
            device.name.clone()
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
            endpoint: device.endpoint,
            message: self.message,
            msi_address,
            service: Rc::downgrade(self),
        });
        let handle = DeviceHandle::new(
            os,
            &shadow,
            device.id,
            bars,
            backend,
            dma.clone() as Rc<dyn DmaMapper>,
        );
        (handle, shadow, dma)
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
        let ends = BorrowEnds::of(&self.machine.fabric(), endpoint, borrower, (b, l));
        let bars = bar_windows(taker, &ends, (b, l))?;
        let side = DeviceSide {
            lender: ends.lender,
            fdid,
            domain: taker.domain_of(ends.lender, endpoint)?,
            limit: options.dma_limit,
            qualified: taker.device.to_string(),
            via: None,
        };
        // Reads through the lender's NTB need the device in its requester-id table.
        taker.requester(l, Requester::Device(endpoint))?;
        let (kind, lender_bus, size) = self.dma_window(taker, &ends, borrower, (b, l), options)?;
        let device_base = side.expose(taker, lender_bus, size, "DMA window")?;

        // MSI window: the borrower's interrupt controller, as the device reaches it.
        let msi_len = ends.msi.end - ends.msi.start;
        let m = taker.shared_lut(l, b, ends.msi.start, msi_len)?;
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
            bars,
            dma,
            msi_address,
            domain: side.domain,
        })
    }

    /// The DMA window: with the borrower's IOMMU, a window of `options.dma_window` in its own
    /// I/O virtual space; without, the borrower's whole RAM (refused when the lender's NTB
    /// window cannot hold it). Its kind, its address behind the lender's adapter and size.
    fn dma_window(
        &self,
        taker: &mut Taker<'_>,
        ends: &BorrowEnds,
        borrower: HostId,
        (b, l): (AdapterId, AdapterId),
        options: &BorrowOptions,
    ) -> Result<(WindowKind, u64, u64), SmartIoError> {
        if ends.borrower_iommu {
            let domain =
                taker
                    .domain_of(borrower, ends.b_ep)?
                    .ok_or_else(|| SmartIoError::DeviceIommu {
                        device: taker.device.to_string(),
                        host: self.hosts[borrower.index()].name().to_string(),
                        why: Box::new(DeviceIommuFailure::NoDomain),
                    })?;
            let size = options
                .dma_window
                .max(PAGE_SIZE)
                .next_multiple_of(ends.entry);
            let iova = taker.window_space(b, size, ends.entry)?;
            let m = taker.lut(l, b, iova, size)?;
            let kind = WindowKind::Iommu {
                host: borrower,
                domain,
                iova_base: iova,
                space: RefCell::new(RamAllocator::space(iova..iova + size)),
                mapped: RefCell::new(BTreeMap::new()),
            };
            return Ok((kind, m.bus_addr, size));
        }
        if ends.ram_end > ends.lender_window {
            return Err(SmartIoError::WindowTooSmall {
                device: taker.device.to_string(),
                borrower: self.hosts[borrower.index()].name().to_string(),
                adapter: self.machine.fabric().adapter_name(l),
                window: ends.lender_window,
                needed: ends.ram_end,
                ram: ends.ram_bytes,
            });
        }
        let m = taker.shared_lut(l, b, 0, ends.ram_end)?;
        Ok((
            WindowKind::WholeRam {
                ram_end: ends.ram_end,
            },
            m.bus_addr,
            ends.ram_end,
        ))
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
        self.unclaim(d.lender, &d.name);
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
}
