//! Turning host memory into addresses a device can use.
//!
//! With the host IOMMU off a device uses physical addresses (identity). With it on, each
//! function has its own domain and the DMA API hands out I/O virtual addresses mapped to the
//! buffer's pages, so a device reaching anywhere else faults.

use crate::memory::{RamAllocator, RamError};
use crate::pci::BarWindow;
use smartio_fabric::{DomainId, EndpointId, HostId, IommuError};
use smartio_machine::{CpuTiming, Machine};
use smartio_platform::{BusAddr, PhysAddr, SimDuration, PAGE_SIZE};
use std::cell::RefCell;
use std::collections::BTreeMap;
use thiserror::Error;

/// I/O virtual addresses handed out start here (above the 32-bit hole, like Linux's IOVA
/// allocator would for a 64-bit-capable device).
const IOVA_BASE: u64 = 1 << 32;
const IOVA_SPACE: u64 = 1 << 40;

/// Which way data moves (as Linux's `dma_data_direction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaDirection {
    /// The device reads the buffer.
    ToDevice,
    /// The device writes the buffer.
    FromDevice,
    /// Both.
    Bidirectional,
}

/// A DMA API failure.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaError {
    /// No I/O virtual address range is left.
    #[error("{device}: I/O virtual address space exhausted mapping {len} bytes")]
    NoIova {
        /// The device.
        device: String,
        /// Requested bytes.
        len: u64,
    },
    /// The IOMMU refused the mapping.
    #[error("{device}: {source}")]
    Iommu {
        /// The device.
        device: String,
        /// What the IOMMU said.
        source: IommuError,
    },
    /// An unmap of an address that was not mapped by this handle.
    #[error("{device}: {addr} was not mapped by the DMA API")]
    NotMapped {
        /// The device.
        device: String,
        /// The address.
        addr: BusAddr,
    },
    /// Host RAM is exhausted (coherent allocations).
    #[error("{device}: {source}")]
    OutOfMemory {
        /// The device.
        device: String,
        /// The allocator's refusal.
        source: RamError,
    },
    /// The peer's BAR could not be mapped for the CPU to find its window.
    #[error("{device}: {source}")]
    PeerBar {
        /// The device doing DMA.
        device: String,
        /// The host's error about the peer.
        source: Box<crate::HostError>,
    },
    /// The function is gone (a VF removed when its PF disabled SR-IOV).
    #[error("{device} is gone: its physical function disabled SR-IOV")]
    FunctionGone {
        /// The device.
        device: String,
    },
    /// A borrowed device's DMA window, which covers the borrower's RAM from its first byte,
    /// does not reach `len` bytes at `phys`.
    #[error("{device}: {phys} + {len:#x} lies beyond the borrower RAM the DMA window covers")]
    BeyondWindow {
        /// The device.
        device: String,
        /// The first byte.
        phys: PhysAddr,
        /// Bytes.
        len: u64,
    },
    /// A borrowed device's DMA window (of `window` bytes) has no room left for `len` bytes.
    #[error(
        "{device}: DMA window of {} is full mapping {len:#x} bytes",
        smartio_fabric::units::format_size(*window)
    )]
    WindowFull {
        /// The device.
        device: String,
        /// The window's size.
        window: u64,
        /// Bytes asked for.
        len: u64,
    },
    /// The SmartIO service that lent the device is gone.
    #[error("{device}: SmartIO is gone")]
    ServiceGone {
        /// The device.
        device: String,
    },
    /// SmartIO could not make a peer's BAR reachable by the borrowed device.
    #[error("{device}: {source}")]
    PeerRefused {
        /// The device.
        device: String,
        /// SmartIO's own error.
        #[source]
        source: crate::ForeignError,
    },
}

/// A coherent DMA buffer: CPU and device addresses of the same memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaBuffer {
    /// Where the CPU reaches it (host physical).
    pub cpu: PhysAddr,
    /// Where the device reaches it.
    pub bus: BusAddr,
    /// Bytes.
    pub len: u64,
}

/// A BAR of another function, to be mapped for a device (peer-to-peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerBar {
    /// The host the function is installed in.
    pub host: HostId,
    /// Its endpoint in the fabric.
    pub endpoint: EndpointId,
    /// BAR index.
    pub index: u8,
    /// The BAR as this host's CPU reaches it.
    pub window: BarWindow,
}

/// Maps host memory for one device. Implementations: [`LocalDma`] for a local function;
/// SmartIO supplies one for a shadow device.
pub trait DmaMapper {
    /// Makes `len` bytes at `phys` reachable by the device; returns the device's address.
    fn map(&self, phys: PhysAddr, len: u64, dir: DmaDirection) -> Result<BusAddr, DmaError>;

    /// Undoes a [`DmaMapper::map`] (or [`DmaMapper::map_peer`]) that returned `bus`.
    fn unmap(&self, bus: BusAddr) -> Result<(), DmaError>;

    /// Makes another function's BAR reachable by the device; returns the address of the
    /// BAR's first byte as the device sees it.
    fn map_peer(&self, bar: &PeerBar) -> Result<BusAddr, DmaError>;

    /// What [`DmaMapper::map`] of `len` bytes at `phys` costs the calling CPU: the DMA API's
    /// own work (without an IOMMU, an address computation).
    fn map_cost(&self, _phys: PhysAddr, _len: u64, cpu: &CpuTiming) -> SimDuration {
        cpu.dma_map
    }

    /// What [`DmaMapper::unmap`] costs the calling CPU.
    fn unmap_cost(&self, cpu: &CpuTiming) -> SimDuration {
        cpu.dma_unmap
    }
}

/// The whole pages `len` bytes at `addr` touch (at least one): first page, span in bytes.
pub fn pages(addr: u64, len: u64) -> (u64, u64) {
    let first = addr & !(PAGE_SIZE - 1);
    (
        first,
        (addr + len.max(1)).next_multiple_of(PAGE_SIZE) - first,
    )
}

/// What mapping `len` bytes at `phys` into an IOMMU domain costs the CPU: the DMA API's own
/// work and a page-table entry per page.
pub fn iommu_map_cost(phys: PhysAddr, len: u64, cpu: &CpuTiming) -> SimDuration {
    let (_, span) = pages(phys.get(), len);
    cpu.dma_map + cpu.iommu_map_page.times(span / PAGE_SIZE)
}

/// The DMA mapper of a function in its own host.
#[derive(Debug)]
pub struct LocalDma {
    machine: Machine,
    host: HostId,
    name: String,
    domain: Option<DomainId>,
    iova: RefCell<RamAllocator>,
    /// bus page address → (iova start, page-rounded length)
    mapped: RefCell<BTreeMap<u64, (u64, u64)>>,
    /// Peer BARs mapped at their own addresses: page address → length.
    peers: RefCell<BTreeMap<u64, u64>>,
}

impl LocalDma {
    /// A mapper for `endpoint` of `host`; when the host IOMMU is on, the function gets a
    /// domain of its own (attached now).
    pub fn new(
        machine: &Machine,
        host: HostId,
        endpoint: EndpointId,
        name: &str,
    ) -> Result<Self, DmaError> {
        let domain = machine.with_fabric_mut(|f| {
            let iommu = f.iommu_mut(host);
            if !iommu.enabled() {
                return Ok(None);
            }
            let d = iommu.create_domain()?;
            iommu.attach(endpoint, d)?;
            Ok(Some(d))
        });
        let domain = domain.map_err(|source| DmaError::Iommu {
            device: name.to_string(),
            source,
        })?;
        Ok(Self {
            machine: machine.clone(),
            host,
            name: name.to_string(),
            domain,
            iova: RefCell::new(RamAllocator::space(IOVA_BASE..IOVA_BASE + IOVA_SPACE)),
            mapped: RefCell::new(BTreeMap::new()),
            peers: RefCell::new(BTreeMap::new()),
        })
    }

    /// The function's IOMMU domain, when the IOMMU is on.
    pub fn domain(&self) -> Option<DomainId> {
        self.domain
    }
}

impl DmaMapper for LocalDma {
    /// With the IOMMU on, the DMA API also writes a page-table entry per page.
    fn map_cost(&self, phys: PhysAddr, len: u64, cpu: &CpuTiming) -> SimDuration {
        match self.domain {
            None => cpu.dma_map,
            Some(_) => iommu_map_cost(phys, len, cpu),
        }
    }

    /// With the IOMMU on, the unmap updates the page table and queues the IOVA for the next
    /// batched IOTLB flush.
    fn unmap_cost(&self, cpu: &CpuTiming) -> SimDuration {
        match self.domain {
            None => cpu.dma_unmap,
            Some(_) => cpu.dma_unmap + cpu.iommu_unmap,
        }
    }

    fn map(&self, phys: PhysAddr, len: u64, dir: DmaDirection) -> Result<BusAddr, DmaError> {
        let Some(domain) = self.domain else {
            return Ok(BusAddr(phys.get()));
        };
        let (first, span) = pages(phys.get(), len);
        let iova = self
            .iova
            .borrow_mut()
            .alloc(span, PAGE_SIZE)
            .map_err(|_| DmaError::NoIova {
                device: self.name.clone(),
                len,
            })?;
        let writable = dir != DmaDirection::ToDevice;
        let host = self.host;
        self.machine
            .with_fabric_mut(|f| {
                f.iommu_mut(host)
                    .map(domain, BusAddr(iova), PhysAddr(first), span, writable)
            })
            .map_err(|source| {
                let _ = self.iova.borrow_mut().free(iova);
                DmaError::Iommu {
                    device: self.name.clone(),
                    source,
                }
            })?;
        self.mapped.borrow_mut().insert(iova, (iova, span));
        Ok(BusAddr(iova + (phys.get() - first)))
    }

    /// A local function reaches a BAR at the address this host's CPU uses (its host's bus
    /// address: a local device, or a window of this host's NTB); with the IOMMU on the BAR
    /// is mapped into the function's domain at that same address, so the request is
    /// translated at the root complex and routed on from there.
    fn map_peer(&self, bar: &PeerBar) -> Result<BusAddr, DmaError> {
        let Some(domain) = self.domain else {
            return Ok(bar.window.base);
        };
        let (first, span) = pages(bar.window.base.get(), bar.window.size);
        let host = self.host;
        self.machine
            .with_fabric_mut(|f| {
                f.iommu_mut(host)
                    .map(domain, BusAddr(first), PhysAddr(first), span, true)
            })
            .map_err(|source| DmaError::Iommu {
                device: self.name.clone(),
                source,
            })?;
        self.peers.borrow_mut().insert(first, span);
        Ok(bar.window.base)
    }

    fn unmap(&self, bus: BusAddr) -> Result<(), DmaError> {
        let Some(domain) = self.domain else {
            return Ok(());
        };
        if let Some(span) = self
            .peers
            .borrow_mut()
            .remove(&(bus.get() & !(PAGE_SIZE - 1)))
        {
            let host = self.host;
            return self
                .machine
                .with_fabric_mut(|f| {
                    f.iommu_mut(host)
                        .unmap(domain, BusAddr(bus.get() & !(PAGE_SIZE - 1)), span)
                })
                .map_err(|source| DmaError::Iommu {
                    device: self.name.clone(),
                    source,
                });
        }
        let page = bus.get() & !(PAGE_SIZE - 1);
        let not_mapped = || DmaError::NotMapped {
            device: self.name.clone(),
            addr: bus,
        };
        let (iova, span) = self
            .mapped
            .borrow_mut()
            .remove(&page)
            .ok_or_else(not_mapped)?;
        let host = self.host;
        self.machine
            .with_fabric_mut(|f| f.iommu_mut(host).unmap(domain, BusAddr(iova), span))
            .map_err(|source| DmaError::Iommu {
                device: self.name.clone(),
                source,
            })?;
        self.iova.borrow_mut().free(iova).map_err(|_| not_mapped())
    }
}
