//! VFIO pass-through of a function of the VM's own host (the baseline MDEV is compared
//! with, Paper V §7.3.2).
//!
//! The function leaves the host's DMA domain for one of the VM's, in which the whole guest
//! memory is mapped guest-physical → host-physical (VFIO pins it all up front), so the guest
//! driver's DMA addresses are guest-physical. The other passed-through functions' guest BARs
//! are mapped there too (peer-to-peer). Interrupts go to the host, whose VFIO handler
//! signals the VM's eventfd; KVM injects them. Configuration requests are the host's own.

use super::peers::{PeerChange, PeerMappings};
use super::{GuestBar, PassThrough, Refusal, VmContext, VmError};
use crate::future::BoxFuture;
use crate::os::HostOs;
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{DomainId, EndpointId, HostId};
use smartio_platform::pci::{self, command};
use smartio_platform::{AccessError, BusAddr, Clock, GuestPhysAddr, MsiMessage, PhysAddr};
use std::cell::RefCell;
use std::rc::Rc;

/// What a pass-through took: the VM's domain, the function's domain before, the ranges of
/// guest memory mapped (I/O virtual address = guest-physical, length), and the other
/// functions' guest BARs mapped (by guest-physical address).
#[derive(Debug)]
struct Taken {
    vm: String,
    domain: DomainId,
    previous: Option<DomainId>,
    mapped: Vec<(u64, u64)>,
    peers: PeerMappings,
}

/// A function of the VM's host passed through by VFIO.
#[derive(Debug)]
pub struct Vfio {
    host: HostOs,
    endpoint: EndpointId,
    name: String,
    bars: Vec<AssignedBar>,
    taken: RefCell<Option<Taken>>,
}

impl Vfio {
    /// Function `device` of `host` for pass-through (nothing is taken until a VM resets it).
    pub fn new(host: &HostOs, device: &str) -> Result<Rc<Vfio>, crate::HostError> {
        host.device(device)?;
        let endpoint =
            host.endpoint_of(device)
                .ok_or_else(|| crate::HostError::NotOwnFunction {
                    device: device.to_string(),
                    host: host.name().to_string(),
                })?;
        let bars = host.machine().fabric().endpoint(endpoint).bars.clone();
        Ok(Rc::new(Vfio {
            host: host.clone(),
            endpoint,
            name: device.to_string(),
            bars,
            taken: RefCell::new(None),
        }))
    }

    fn refuse(&self, vm: &VmContext, source: impl Into<Refusal>) -> VmError {
        VmError::PassThrough {
            vm: vm.name().to_string(),
            device: self.name.clone(),
            source: Box::new(source.into()),
        }
    }

    /// Refuses a VM of another host, and a function another VM or a driver holds.
    fn check_free(&self, vm: &VmContext) -> Result<(), VmError> {
        if vm.host().id() != self.host.id() {
            return Err(self.refuse(
                vm,
                Refusal::OtherHost {
                    host: self.host.name().to_string(),
                },
            ));
        }
        if let Some(t) = self.taken.borrow().as_ref() {
            return Err(self.refuse(vm, Refusal::AlreadyPassedThrough { vm: t.vm.clone() }));
        }
        if let Some(driver) = self.host.bound_driver(&self.name) {
            return Err(self.refuse(
                vm,
                Refusal::InUse {
                    driver,
                    host: self.host.name().to_string(),
                },
            ));
        }
        Ok(())
    }

    /// Takes the function for `vm`: a domain of its own in the host IOMMU, the claim, the
    /// whole guest memory mapped in the domain; the guest pages to pin.
    fn take(&self, vm: &VmContext) -> Result<u64, VmError> {
        let host = self.host.id();
        let (domain, previous) = self
            .host
            .machine()
            .with_fabric_mut(|f| {
                let iommu = f.iommu_mut(host);
                if !iommu.enabled() {
                    return Err(None);
                }
                let previous = iommu.domain_of(self.endpoint);
                let d = iommu.create_domain().map_err(Some)?;
                Ok((d, previous))
            })
            .map_err(|e: Option<smartio_fabric::IommuError>| match e {
                None => self.refuse(
                    vm,
                    Refusal::NoIommu {
                        host: self.host.name().to_string(),
                    },
                ),
                Some(e) => self.refuse(vm, e),
            })?;
        self.host
            .claim(&self.name, "vfio-pci")
            .map_err(|e| self.refuse(vm, Refusal::Claim(Box::new(e))))?;
        *self.taken.borrow_mut() = Some(Taken {
            vm: vm.name().to_string(),
            domain,
            previous,
            mapped: Vec::new(),
            peers: PeerMappings::new(),
        });
        let pages = self.map_guest_memory(vm)?;
        self.host
            .machine()
            .with_fabric_mut(|f| f.iommu_mut(host).attach(self.endpoint, domain))
            .map_err(|e| self.refuse(vm, e))?;
        Ok(pages)
    }

    /// Maps the whole guest memory, guest-physical → host-physical; the guest pages.
    fn map_guest_memory(&self, vm: &VmContext) -> Result<u64, VmError> {
        let mut pages = 0u64;
        for range in vm.layout().ranges() {
            let pieces = vm
                .memory()
                .memory()
                .translate(GuestPhysAddr(range.start), range.end - range.start)
                .map_err(|e| self.refuse(vm, e))?;
            let mut iova = range.start;
            for p in pieces {
                self.map(vm, iova, p.addr.get(), p.len)?;
                iova += p.len;
            }
            pages += (range.end - range.start) / vm.layout().page.bytes();
        }
        Ok(pages)
    }

    /// Maps `len` bytes at I/O virtual address `iova` to `target` in the VM's domain.
    fn map(&self, vm: &VmContext, iova: u64, target: u64, len: u64) -> Result<(), VmError> {
        let mut taken = self.taken.borrow_mut();
        let Some(t) = taken.as_mut() else {
            return Err(VmError::NotRunning {
                vm: vm.name().to_string(),
            });
        };
        let host = self.host.id();
        self.host
            .machine()
            .with_fabric_mut(|f| {
                f.iommu_mut(host)
                    .map(t.domain, BusAddr(iova), PhysAddr(target), len, true)
            })
            .map_err(|e| self.refuse(vm, e))?;
        t.mapped.push((iova, len));
        Ok(())
    }

    /// Makes the other functions' guest BARs reachable where the guest has them now
    /// (`peers`): mappings of BARs the guest has moved since go first (their old range no
    /// longer reaches them, and a BAR placed there now must be reached instead), then every
    /// BAR not mapped where it is gets mapped. Where the guest made BARs overlap, the later
    /// in `peers` wins.
    fn sync_peers(&self, vm: &VmContext, peers: &[GuestBar]) -> Result<(), VmError> {
        let mut taken = self.taken.borrow_mut();
        let Some(t) = taken.as_mut() else {
            return Err(VmError::NotRunning {
                vm: vm.name().to_string(),
            });
        };
        let host = self.host.id();
        let domain = t.domain;
        let machine = self.host.machine();
        let len = |p: &GuestBar| p.size.next_multiple_of(smartio_platform::PAGE_SIZE);
        t.peers.sync(peers, len, |change| {
            machine
                .with_fabric_mut(|f| match change {
                    PeerChange::Unmap { at, mapping } => {
                        f.iommu_mut(host).unmap(domain, BusAddr(at), mapping.len)
                    }
                    PeerChange::Map { bar, len } => f.iommu_mut(host).map(
                        domain,
                        BusAddr(bar.guest),
                        PhysAddr(bar.reached_at),
                        len,
                        true,
                    ),
                })
                .map(|()| true)
                .map_err(|e| self.refuse(vm, e))
        })?;
        Ok(())
    }
}

impl PassThrough for Vfio {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn reset(&self, vm: &Rc<VmContext>) -> BoxFuture<Result<(), VmError>> {
        let vm = vm.clone();
        // Everything but the pinning time and the reset itself happens now, in order.
        let result = self.check_free(&vm).and_then(|()| self.take(&vm));
        let cpu = self.host.cpu();
        let endpoint = self.endpoint;
        let name = self.name.clone();
        Box::pin(async move {
            let pages = result?;
            // VFIO pins every page of guest memory before the VM runs.
            let pin = cpu.machine().cpu_timing().vm.page_pin;
            cpu.spend("VFIO: pin the guest's memory", pin.times(pages))
                .await;
            // The reset: the function stops decoding and mastering until the guest enables it.
            let mut cmd = [0u8; 2];
            let reset = async {
                cpu.config_read(endpoint, pci::COMMAND, &mut cmd).await?;
                let off = u16::from_le_bytes(cmd) & !(command::BUS_MASTER | command::MEMORY_SPACE);
                cpu.config_write(endpoint, pci::COMMAND, &off.to_le_bytes())
                    .await
            };
            reset.await.map_err(|e| VmError::PassThrough {
                vm: vm.name().to_string(),
                device: name,
                source: Box::new(Refusal::Access(e)),
            })
        })
    }

    fn bars(&self) -> Vec<AssignedBar> {
        self.bars.clone()
    }

    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>> {
        let cpu = self.host.cpu();
        let endpoint = self.endpoint;
        Box::pin(async move {
            let mut buf = vec![0u8; len];
            cpu.config_read(endpoint, offset, &mut buf).await?;
            Ok(buf)
        })
    }

    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>> {
        let cpu = self.host.cpu();
        let endpoint = self.endpoint;
        Box::pin(async move { cpu.config_write(endpoint, offset, &data).await })
    }

    fn enable_dma(
        &self,
        vm: &Rc<VmContext>,
        peers: Vec<GuestBar>,
    ) -> BoxFuture<Result<(), VmError>> {
        let result = self.sync_peers(vm, &peers);
        Box::pin(async move { result })
    }

    fn interrupt(&self, vm: &Rc<VmContext>, guest_vector: u32) -> Result<MsiMessage, VmError> {
        let host_vector = self.host.allocate_vectors(1);
        let msi = self.host.machine().fabric().host(self.host.id()).msi.start;
        // vfio_msihandler on the host signals the VM's eventfd.
        vm.relay(host_vector, guest_vector);
        Ok(MsiMessage {
            address: BusAddr(msi),
            data: host_vector,
        })
    }

    fn function(&self) -> (HostId, EndpointId) {
        (self.host.id(), self.endpoint)
    }

    /// The host routes the function's INTx to a line of its own; VFIO's INTx handler relays
    /// it into the VM.
    fn intx(&self, vm: &Rc<VmContext>, guest_vector: u32) -> BoxFuture<Result<(), VmError>> {
        let line = self.host.allocate_intx_line();
        let (cpu, endpoint, vm, name) = (
            self.host.cpu(),
            self.endpoint,
            vm.clone(),
            self.name.clone(),
        );
        Box::pin(async move {
            let refuse = |source: Refusal| VmError::PassThrough {
                vm: vm.name().to_string(),
                device: name.clone(),
                source: Box::new(source),
            };
            let line = line.ok_or_else(|| refuse(Refusal::NoInterruptLine { host: None }))?;
            cpu.config_write(endpoint, pci::INTERRUPT_LINE, &[line as u8])
                .await
                .map_err(|e| refuse(Refusal::Access(e)))?;
            vm.relay(line, guest_vector);
            Ok(())
        })
    }

    fn release(&self, vm: &Rc<VmContext>) -> BoxFuture<Result<(), VmError>> {
        // Only what this VM took (a refused second VM releases nothing of the first's).
        let mine = self
            .taken
            .borrow()
            .as_ref()
            .is_some_and(|t| t.vm == vm.name());
        let taken = if mine {
            self.taken.borrow_mut().take()
        } else {
            None
        };
        if taken.is_some() {
            self.host.unclaim(&self.name);
        }
        let host = self.host.id();
        let endpoint = self.endpoint;
        let result = match taken {
            None => Ok(()),
            Some(t) => self.host.machine().with_fabric_mut(|f| {
                let iommu = f.iommu_mut(host);
                if let Some(p) = t.previous {
                    iommu.attach(endpoint, p)?;
                }
                for &(iova, len) in &t.mapped {
                    iommu.unmap(t.domain, BusAddr(iova), len)?;
                }
                for (iova, m) in t.peers.iter() {
                    iommu.unmap(t.domain, BusAddr(iova), m.len)?;
                }
                Ok(())
            }),
        }
        .map_err(|e: smartio_fabric::IommuError| self.refuse(vm, e));
        let cpu = self.host.cpu();
        Box::pin(async move {
            // Stop the function before the guest's memory goes back to the host.
            let mut cmd = [0u8; 2];
            if mine
                && cpu
                    .config_read(endpoint, pci::COMMAND, &mut cmd)
                    .await
                    .is_ok()
            {
                let off = u16::from_le_bytes(cmd) & !(command::BUS_MASTER | command::MEMORY_SPACE);
                let _ = cpu
                    .config_write(endpoint, pci::COMMAND, &off.to_le_bytes())
                    .await;
            }
            result
        })
    }
}
