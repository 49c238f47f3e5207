//! The shadow device's two halves, handed to the borrower's OS in a `DeviceHandle`:
//!
//! - [`ShadowFunction`] forwards configuration requests to the lender, which performs them on
//!   the real function (Paper V §4.2). On the way it masks legacy INTx (the interrupt pin
//!   reads 0 and INTx stays disabled: it cannot cross an NTB) and gives the MSI address of
//!   the borrower's interrupt controller *as the device reaches it*: through the lender-side
//!   MSI window.
//! - [`ShadowDma`] is the DMA API of the shadow device (Paper V §4.3): every address it hands
//!   out lies inside the DMA window the lender mapped at borrow time. With a borrower IOMMU a
//!   map only adds an entry to the borrower's IOMMU; without one the window covers all
//!   borrower RAM and a map is arithmetic. Neither talks to the lender.

use super::{Fdid, Service};
use smartio_fabric::{DomainId, EndpointId, HostId};
use smartio_host::{BoxFuture, DeviceBackend, DmaDirection, DmaError, DmaMapper, HostError};
use smartio_host::{PeerBar, RamAllocator};
use smartio_machine::{Agent, CpuTiming};
use smartio_platform::pci::{self, command};
use smartio_platform::PAGE_SIZE;
use smartio_platform::{AccessError, BusAddr, Clock, MsiMessage, PhysAddr, SimDuration};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Weak;

/// Configuration access to a lent function, performed by its lender.
#[derive(Debug, Clone)]
pub(crate) struct ShadowFunction {
    /// The borrower's CPU (it waits for the lender's answer).
    pub borrower_cpu: Agent,
    /// The lender's CPU (it performs the access).
    pub lender_cpu: Agent,
    /// The lender.
    pub lender: HostId,
    /// The real function.
    pub endpoint: EndpointId,
    /// One control message between the SmartIO drivers.
    pub message: SimDuration,
    /// The device's address of the borrower's MSI doorbell.
    pub msi_address: u64,
    /// Counts messages to the lender.
    pub service: Weak<Service>,
}

impl ShadowFunction {
    /// A round trip to the lender: request message, the lender's own access, answer.
    fn count(&self) {
        if let Some(s) = self.service.upgrade() {
            s.count_lender_interaction();
        }
    }
}

impl DeviceBackend for ShadowFunction {
    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>> {
        let me = self.clone();
        Box::pin(async move {
            me.count();
            me.borrower_cpu
                .spend(
                    "SmartIO: configuration access relayed to the lender",
                    me.message,
                )
                .await;
            let mut buf = vec![0u8; len];
            me.lender_cpu
                .config_read(me.endpoint, offset, &mut buf)
                .await?;
            me.borrower_cpu
                .spend(
                    "SmartIO: configuration access relayed to the lender",
                    me.message,
                )
                .await;
            // Legacy interrupts cannot be routed over the NTB: the device has no INTx pin.
            let pin = usize::from(pci::INTERRUPT_PIN);
            let at = usize::from(offset);
            if (at..at + len).contains(&pin) {
                buf[pin - at] = 0;
            }
            Ok(buf)
        })
    }

    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>> {
        let me = self.clone();
        Box::pin(async move {
            me.count();
            let mut data = data;
            // Whatever the driver writes to Command, INTx stays disabled.
            let cmd = usize::from(pci::COMMAND);
            let at = usize::from(offset);
            if (at..at + data.len()).contains(&(cmd + 1)) {
                data[cmd + 1 - at] |= (command::INTX_DISABLE >> 8) as u8;
            }
            me.borrower_cpu
                .spend(
                    "SmartIO: configuration access relayed to the lender",
                    me.message,
                )
                .await;
            me.lender_cpu
                .config_write(me.endpoint, offset, &data)
                .await?;
            me.borrower_cpu
                .spend(
                    "SmartIO: configuration access relayed to the lender",
                    me.message,
                )
                .await;
            Ok(())
        })
    }

    fn msi_message(&self, vector: u32) -> Result<MsiMessage, HostError> {
        Ok(MsiMessage {
            address: BusAddr(self.msi_address),
            data: vector,
        })
    }

    fn function(&self) -> (HostId, EndpointId) {
        (self.lender, self.endpoint)
    }

    /// Legacy interrupts cannot be routed over the NTB (the device has no INTx pin here).
    fn route_intx(&self, _vector: u32) -> BoxFuture<Result<u32, HostError>> {
        Box::pin(async move {
            Err(HostError::NoIntx {
                device: String::new(),
                why: smartio_host::os::NoIntx::AcrossNtb,
            })
        })
    }
}

/// How a borrower's memory is reached through the DMA window.
#[derive(Debug)]
pub(crate) enum WindowKind {
    /// The window is a range of the borrower adapter's IOMMU domain: each map adds entries.
    Iommu {
        /// The borrower.
        host: HostId,
        /// The borrower adapter's domain.
        domain: DomainId,
        /// First I/O virtual address of the window in that domain.
        iova_base: u64,
        /// Sub-allocator of the window.
        space: RefCell<RamAllocator>,
        /// Mapped ranges: iova → page-rounded length.
        mapped: RefCell<BTreeMap<u64, u64>>,
    },
    /// The window maps the borrower's physical memory `0..ram_end` one to one.
    WholeRam {
        /// End of borrower RAM.
        ram_end: u64,
    },
}

/// The DMA API of a shadow device.
#[derive(Debug)]
pub(crate) struct ShadowDma {
    /// The shadow device's name, for errors.
    pub name: String,
    /// The device's address of the window's first byte.
    pub device_base: u64,
    /// Window size.
    pub size: u64,
    /// How the window reaches memory.
    pub kind: WindowKind,
    /// The service (peer-to-peer resolution goes through the lender, on the control path).
    pub service: Weak<Service>,
    /// The borrowed device.
    pub fdid: Fdid,
}

impl ShadowDma {
    fn service_gone(&self) -> DmaError {
        DmaError::ServiceGone {
            device: self.name.clone(),
        }
    }

    /// I/O virtual mappings still in place (what a return must clean up if a driver leaked).
    pub fn leftover(&self) -> Vec<(HostId, DomainId, u64, u64)> {
        match &self.kind {
            WindowKind::Iommu {
                host,
                domain,
                mapped,
                ..
            } => mapped
                .borrow()
                .iter()
                .map(|(&iova, &len)| (*host, *domain, iova, len))
                .collect(),
            WindowKind::WholeRam { .. } => Vec::new(),
        }
    }
}

impl DmaMapper for ShadowDma {
    /// The window hook, and with a borrower IOMMU the page-table entries it adds.
    fn map_cost(&self, phys: PhysAddr, len: u64, cpu: &CpuTiming) -> SimDuration {
        match &self.kind {
            WindowKind::WholeRam { .. } => cpu.dma_map + cpu.dma_window_map,
            WindowKind::Iommu { .. } => {
                smartio_host::dma::iommu_map_cost(phys, len, cpu) + cpu.dma_window_map
            }
        }
    }

    /// With a borrower IOMMU, the unmap updates its page table and queues the IOVA for the
    /// next batched IOTLB flush.
    fn unmap_cost(&self, cpu: &CpuTiming) -> SimDuration {
        match &self.kind {
            WindowKind::WholeRam { .. } => cpu.dma_unmap,
            WindowKind::Iommu { .. } => cpu.dma_unmap + cpu.iommu_unmap,
        }
    }

    fn map(&self, phys: PhysAddr, len: u64, dir: DmaDirection) -> Result<BusAddr, DmaError> {
        match &self.kind {
            WindowKind::WholeRam { ram_end } => {
                if phys.get().saturating_add(len) > *ram_end {
                    return Err(DmaError::BeyondWindow {
                        device: self.name.clone(),
                        phys,
                        len,
                    });
                }
                Ok(BusAddr(self.device_base + phys.get()))
            }
            WindowKind::Iommu {
                host,
                domain,
                iova_base,
                space,
                mapped,
            } => {
                let (first, span) = smartio_host::dma::pages(phys.get(), len);
                let iova = space.borrow_mut().alloc(span, PAGE_SIZE).map_err(|_| {
                    DmaError::WindowFull {
                        device: self.name.clone(),
                        window: self.size,
                        len,
                    }
                })?;
                let writable = dir != DmaDirection::ToDevice;
                let host = *host;
                let domain = *domain;
                let machine = match self.service.upgrade() {
                    Some(s) => s.machine.clone(),
                    None => return Err(self.service_gone()),
                };
                if let Err(e) = machine.with_fabric_mut(|f| {
                    f.iommu_mut(host)
                        .map(domain, BusAddr(iova), PhysAddr(first), span, writable)
                }) {
                    let _ = space.borrow_mut().free(iova);
                    return Err(DmaError::Iommu {
                        device: self.name.clone(),
                        source: e,
                    });
                }
                mapped.borrow_mut().insert(iova, span);
                Ok(BusAddr(
                    self.device_base + (iova - iova_base) + (phys.get() - first),
                ))
            }
        }
    }

    fn unmap(&self, bus: BusAddr) -> Result<(), DmaError> {
        let WindowKind::Iommu {
            host,
            domain,
            iova_base,
            space,
            mapped,
        } = &self.kind
        else {
            return Ok(());
        };
        let not_mapped = || DmaError::NotMapped {
            device: self.name.clone(),
            addr: bus,
        };
        let Some(offset) = bus
            .get()
            .checked_sub(self.device_base)
            .filter(|&o| o < self.size)
        else {
            // Peer mappings stay until the device is returned.
            return Ok(());
        };
        let iova = (iova_base + offset) & !(PAGE_SIZE - 1);
        let span = mapped.borrow_mut().remove(&iova).ok_or_else(not_mapped)?;
        let machine = self
            .service
            .upgrade()
            .map(|s| s.machine.clone())
            .ok_or_else(not_mapped)?;
        let (host, domain) = (*host, *domain);
        machine
            .with_fabric_mut(|f| f.iommu_mut(host).unmap(domain, BusAddr(iova), span))
            .map_err(|source| DmaError::Iommu {
                device: self.name.clone(),
                source,
            })?;
        space.borrow_mut().free(iova).map_err(|_| not_mapped())
    }

    fn map_peer(&self, bar: &PeerBar) -> Result<BusAddr, DmaError> {
        let service = self.service.upgrade().ok_or_else(|| self.service_gone())?;
        Service::map_peer(&service, self.fdid, bar)
            .map(BusAddr)
            .map_err(|e| DmaError::PeerRefused {
                device: self.name.clone(),
                source: smartio_host::ForeignError::new(e),
            })
    }
}
