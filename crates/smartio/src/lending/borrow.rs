//! Device Lending proper: borrowing takes the BAR, DMA and MSI windows and hot-adds a
//! shadow device to the borrower; returning hot-removes it, disables the function at the
//! lender and gives every window back. Which adapters the windows use is `path`'s
//! job.

use super::grants::{release, Grant, Taker};
use super::path::{ntb_pair, DeviceSide};
use super::shadow::{ShadowDma, ShadowFunction, WindowKind};
use super::{Fdid, Service, SmartIo, SmartIoError};
use crate::DeviceIommuFailure;
use smartio_fabric::{AdapterId, DomainId, EndpointId, HostId, Requester};
use smartio_host::{BarWindow, DeviceHandle, DmaMapper, RamAllocator};
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
        self.check_host(borrower)?;
        let (lender, endpoint, name, qualified, id) = {
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
            (
                d.lender,
                d.endpoint,
                d.name.clone(),
                d.qualified.clone(),
                d.id,
            )
        };
        self.check_present(endpoint, &qualified)?;
        if lender == borrower {
            return Err(SmartIoError::OwnDevice {
                device: qualified,
                host: self.hosts[lender.index()].name().to_string(),
            });
        }
        if let Some(driver) = self.lender_user(lender, &name) {
            return Err(SmartIoError::InUseByLender {
                device: qualified,
                driver,
            });
        }
        let lender_name = name.clone();
        let (b, l) = ntb_pair(&self.machine, borrower, lender)?;
        let mut grants = Vec::new();
        let taken = {
            let mut st = self.state.borrow_mut();
            let mut taker = Taker {
                machine: &self.machine,
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
                let _ = release(&self.machine, &mut st.ledger, grants);
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
        self.claim(lender, &lender_name);
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
            let f = self.machine.fabric();
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
            let domain =
                taker
                    .domain_of(borrower, b_ep)?
                    .ok_or_else(|| SmartIoError::DeviceIommu {
                        device: qualified.clone(),
                        host: self.hosts[borrower.index()].name().to_string(),
                        why: Box::new(DeviceIommuFailure::NoDomain),
                    })?;
            let size = options.dma_window.max(PAGE_SIZE).next_multiple_of(entry);
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
                    adapter: self.machine.fabric().adapter_name(l),
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
