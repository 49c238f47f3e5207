//! A host's kernel: its RAM, its PCI device tree, and the drivers bound to the devices.
//!
//! The tree starts as the firmware enumerated it (the fabric's endpoints of this host) and
//! changes by hot-add and hot-remove. Binding follows Linux: when a device appears, the first
//! registered driver whose match accepts it probes it; on removal the driver is unbound first.

use crate::block::{BlockDevice, BlockDriver, BlockError, Disks};
use crate::device::{DeviceHandle, LocalFunction};
use crate::dma::LocalDma;
use crate::driver::Driver;
use crate::guest::{GuestMemory, GuestMemoryError};
use crate::memory::{RamAllocator, RamError};
use crate::pci::{BarWindow, PciId};
use smartio_fabric::{EndpointId, HostId};
use smartio_machine::{Agent, Machine};
use smartio_platform::{BusAddr, GuestPhysAddr, PhysAddr, PAGE_SIZE};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

pub use crate::error::{HostError, NoIntx};

/// State shared by a kernel and the handles of its devices.
#[derive(Debug)]
pub(crate) struct OsShared {
    machine: Machine,
    host: HostId,
    /// The CPU the kernel runs on: the host's, or a VM's vCPU.
    cpu: Agent,
    ram: RefCell<RamAllocator>,
    /// Interrupt vectors handed out so far; a VM's kernel draws from its host's (the
    /// hypervisor injects a guest's interrupts as those vectors).
    next_vector: Rc<Cell<u32>>,
    /// The next legacy interrupt line this kernel routes (a host's own; a VM's kernel uses
    /// vectors instead).
    next_line: Cell<u8>,
    /// In a VM: how its physical (guest-physical) addresses map onto the host's RAM.
    guest: Option<GuestMemory>,
    /// The kernel itself (its device tree), for a PF driver's `enable_sriov`, which
    /// hot-adds the VFs. Weak: the kernel owns this.
    kernel: RefCell<std::rc::Weak<OsInner>>,
}

impl OsShared {
    pub fn alloc(&self, len: u64) -> Result<PhysAddr, RamError> {
        self.alloc_aligned(len, PAGE_SIZE)
    }

    pub fn alloc_aligned(&self, len: u64, align: u64) -> Result<PhysAddr, RamError> {
        self.ram.borrow_mut().alloc(len, align).map(PhysAddr)
    }

    pub fn free(&self, addr: PhysAddr) {
        let _ = self.ram.borrow_mut().free(addr.get());
    }

    /// Clears freshly allocated memory (as the kernel hands out zeroed pages).
    pub fn zero(&self, addr: PhysAddr, len: u64) {
        // A range the VM has no RAM at is nothing to zero.
        for (host, len) in self.host_pieces(addr, len).unwrap_or_default() {
            self.machine.zero_memory(self.host, host, len);
        }
    }

    /// The host memory behind `len` bytes at this kernel's physical `addr`: itself on a
    /// host; the pieces of host RAM that back the guest range in a VM, or why there are none.
    fn host_pieces(
        &self,
        addr: PhysAddr,
        len: u64,
    ) -> Result<Vec<(PhysAddr, u64)>, GuestMemoryError> {
        match &self.guest {
            None => Ok(vec![(addr, len)]),
            Some(g) => Ok(g
                .translate(GuestPhysAddr(addr.get()), len)?
                .iter()
                .map(|p| (p.addr, p.len))
                .collect()),
        }
    }

    /// A vector for a function's legacy INTx: on a host the next free interrupt line (its
    /// vector has the same number); in a VM a vector of the host set aside for the guest
    /// (the hypervisor routes the real line and injects it). `None` when the lines are used up.
    pub fn allocate_intx(&self) -> Option<u32> {
        if self.guest.is_some() {
            return Some(self.allocate_vectors(1));
        }
        let line = self.next_line.get();
        if !smartio_platform::msi::INTX_LINES.contains(&line) {
            return None;
        }
        self.next_line.set(line + 1);
        Some(u32::from(line))
    }

    /// `count` consecutive interrupt vectors of this host.
    pub fn allocate_vectors(&self, count: u32) -> u32 {
        let first = self.next_vector.get();
        self.next_vector.set(first + count);
        first
    }

    /// The kernel, while it runs.
    pub fn kernel(&self) -> Option<HostOs> {
        self.kernel.borrow().upgrade().map(|inner| HostOs { inner })
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The host.
    pub fn host(&self) -> HostId {
        self.host
    }

    /// Whether this is a VM's kernel.
    pub fn is_guest(&self) -> bool {
        self.guest.is_some()
    }
}

struct Entry {
    handle: DeviceHandle,
    endpoint: Option<EndpointId>,
    bound: Option<(Rc<dyn Driver>, Rc<dyn Any>)>,
    /// Who holds the function instead of a driver of this kernel (`vfio-pci` while it is
    /// passed through to a VM, `smartio` while SmartIO lends it).
    claimed: Option<String>,
}

struct OsInner {
    name: String,
    shared: Rc<OsShared>,
    devices: RefCell<Vec<Entry>>,
    drivers: RefCell<Vec<Rc<dyn Driver>>>,
    /// The disks drivers registered ([`crate::block`]).
    disks: Disks,
}

/// One host's kernel. Cheap to clone.
#[derive(Clone)]
pub struct HostOs {
    inner: Rc<OsInner>,
}

impl std::fmt::Debug for HostOs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOs")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// First MSI vector number handed to devices (lower ones belong to the platform).
const FIRST_DEVICE_VECTOR: u32 = 0x100;

/// Bytes at the bottom of a VM's RAM its kernel keeps for itself (never allocated).
pub const GUEST_RESERVED: u64 = 16 << 20;

impl HostOs {
    /// Boots `host`: its RAM allocator and a device tree of the functions the firmware
    /// enumerated in it (NTB adapters included). No driver is bound yet.
    pub fn boot(machine: &Machine, host: HostId) -> Result<HostOs, HostError> {
        let (name, ram, msi, endpoints) = {
            let f = machine.fabric();
            let h = f.host(host);
            let eps: Vec<_> = f
                .endpoints()
                .iter()
                .enumerate()
                // VFs are not enumerated by firmware: the PF driver adds them.
                .filter(|(_, e)| e.host == host && !e.is_virtual())
                .map(|(i, e)| (EndpointId(i as u32), e.clone()))
                .collect();
            (h.name.clone(), RamAllocator::new(&h.ram), h.msi.start, eps)
        };
        let shared = Rc::new(OsShared {
            machine: machine.clone(),
            host,
            cpu: machine.cpu(host),
            ram: RefCell::new(ram),
            next_vector: Rc::new(Cell::new(FIRST_DEVICE_VECTOR)),
            next_line: Cell::new(smartio_platform::msi::INTX_LINES.start),
            guest: None,
            kernel: RefCell::new(std::rc::Weak::new()),
        });
        let os = HostOs {
            inner: Rc::new(OsInner {
                name,
                shared,
                devices: RefCell::new(Vec::new()),
                drivers: RefCell::new(Vec::new()),
                disks: Default::default(),
            }),
        };
        *os.inner.shared.kernel.borrow_mut() = Rc::downgrade(&os.inner);
        for (id, ep) in endpoints {
            let backend = Rc::new(LocalFunction {
                cpu: machine.cpu(host),
                host,
                endpoint: id,
                msi_base: BusAddr(msi),
            });
            let dma = Rc::new(LocalDma::new(machine, host, id, &ep.name)?);
            let bars = ep
                .bars
                .iter()
                .map(|b| BarWindow {
                    index: b.index,
                    base: b.base,
                    size: b.size,
                })
                .collect();
            let pci = PciId {
                vendor: ep.layout.vendor_id,
                device: ep.layout.device_id,
                class: ep.layout.class_code,
            };
            let handle = DeviceHandle::new(&os, &ep.name, pci, bars, backend, dma);
            os.inner.devices.borrow_mut().push(Entry {
                handle,
                endpoint: Some(id),
                bound: None,
                claimed: None,
            });
        }
        Ok(os)
    }

    /// Boots every host of the simulation, in host order.
    pub fn boot_all(machine: &Machine) -> Result<Vec<HostOs>, HostError> {
        let n = machine.fabric().hosts().len();
        (0..n)
            .map(|i| HostOs::boot(machine, HostId(i as u32)))
            .collect()
    }

    /// Boots the kernel of a VM called `name` running on `host`: its RAM is `memory`
    /// (guest-physical; the kernel keeps [`GUEST_RESERVED`] bytes at the bottom for itself),
    /// its CPU is `vcpu` (whose accesses the hypervisor translates), and its device tree
    /// starts empty — the hypervisor's virtual functions are hot-added after the guest
    /// enumerated them. Its interrupt vectors are drawn from the host's.
    pub fn boot_guest(
        host: &HostOs,
        name: &str,
        memory: &GuestMemory,
        ranges: &[std::ops::Range<u64>],
        vcpu: Agent,
    ) -> HostOs {
        let h = &host.inner.shared;
        let shared = Rc::new(OsShared {
            machine: h.machine.clone(),
            host: h.host,
            cpu: vcpu,
            ram: RefCell::new(RamAllocator::reserving(ranges, GUEST_RESERVED)),
            next_vector: h.next_vector.clone(),
            next_line: Cell::new(smartio_platform::msi::INTX_LINES.start),
            guest: Some(memory.clone()),
            kernel: RefCell::new(std::rc::Weak::new()),
        });
        let os = HostOs {
            inner: Rc::new(OsInner {
                name: name.to_string(),
                shared,
                devices: RefCell::new(Vec::new()),
                drivers: RefCell::new(Vec::new()),
                disks: Default::default(),
            }),
        };
        *os.inner.shared.kernel.borrow_mut() = Rc::downgrade(&os.inner);
        os
    }

    /// `count` consecutive interrupt vectors of this host, for a handler a driver or
    /// SmartIO installs itself (an interrupt relay).
    pub fn allocate_vectors(&self, count: u32) -> u32 {
        self.inner.shared.allocate_vectors(count)
    }

    /// A legacy interrupt line of this host (its vector has the same number), for a
    /// function whose INTx the hypervisor or SmartIO routes; `None` when all are in use.
    pub fn allocate_intx_line(&self) -> Option<u32> {
        self.inner.shared.allocate_intx()
    }

    /// Whether this kernel runs in a VM (its physical addresses are guest-physical).
    pub fn is_guest(&self) -> bool {
        self.inner.shared.guest.is_some()
    }

    /// Copies `data` into this kernel's memory at `addr` without taking simulated time (a
    /// program filling a buffer before a measured run). In a VM the guest-physical range is
    /// translated; a range the VM has no RAM at is refused.
    pub fn write_memory(&self, addr: PhysAddr, data: &[u8]) -> Result<(), GuestMemoryError> {
        let s = &self.inner.shared;
        let mut at = 0usize;
        for (host, len) in self.inner.shared.host_pieces(addr, data.len() as u64)? {
            s.machine
                .poke_memory(s.host, host, &data[at..at + len as usize]);
            at += len as usize;
        }
        Ok(())
    }

    /// Copies this kernel's memory at `addr` into `buf` without taking simulated time (a
    /// program checking a buffer after a run); see [`HostOs::write_memory`].
    pub fn read_memory(&self, addr: PhysAddr, buf: &mut [u8]) -> Result<(), GuestMemoryError> {
        let s = &self.inner.shared;
        let mut at = 0usize;
        for (host, len) in self.inner.shared.host_pieces(addr, buf.len() as u64)? {
            s.machine
                .peek_memory(s.host, host, &mut buf[at..at + len as usize]);
            at += len as usize;
        }
        Ok(())
    }

    /// Appends `len` bytes of this kernel's memory at `addr` to `out` without taking
    /// simulated time: [`HostOs::read_memory`] into a buffer that is not zeroed first. On
    /// a refusal `out` is as it was.
    pub fn read_memory_append(
        &self,
        addr: PhysAddr,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), GuestMemoryError> {
        let s = &self.inner.shared;
        let pieces = s.host_pieces(addr, len as u64)?;
        out.reserve(len);
        for (host, n) in pieces {
            s.machine.peek_memory_append(s.host, host, n as usize, out);
        }
        Ok(())
    }

    /// Registers `driver`'s disk as `name` (Linux's `add_disk`); returns it as programs
    /// open it. Refused when the name is taken or the geometry describes no disk.
    pub fn register_disk(
        &self,
        name: &str,
        driver: Rc<dyn BlockDriver>,
    ) -> Result<BlockDevice, BlockError> {
        self.inner
            .disks
            .register(self.name(), self.cpu(), name, driver)
    }

    /// The disk called `name`, as a program opens it.
    pub fn disk(&self, name: &str) -> Result<BlockDevice, BlockError> {
        self.inner.disks.get(self.name(), name)
    }

    /// The names of the registered disks, in registration order.
    pub fn disk_names(&self) -> Vec<String> {
        self.inner.disks.names()
    }

    /// Takes disk `name` away (Linux's `del_gendisk`): no program can open it any more; one
    /// that holds it keeps a handle whose driver the caller is about to stop.
    pub fn unregister_disk(&self, name: &str) -> Result<(), BlockError> {
        self.inner.disks.unregister(self.name(), name)
    }

    pub(crate) fn shared(&self) -> Rc<OsShared> {
        self.inner.shared.clone()
    }

    /// The host's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The host's id.
    pub fn id(&self) -> HostId {
        self.inner.shared.host
    }

    /// The simulation.
    pub fn machine(&self) -> &Machine {
        &self.inner.shared.machine
    }

    /// A CPU of this host (a VM's vCPU, for a VM's kernel).
    pub fn cpu(&self) -> Agent {
        self.inner.shared.cpu.clone()
    }

    /// Allocates `len` bytes of RAM (page-aligned, zeroed) for the kernel or a program.
    pub fn alloc(&self, len: u64) -> Result<PhysAddr, RamError> {
        self.alloc_aligned(len, PAGE_SIZE)
    }

    /// Like [`HostOs::alloc`], aligned to `align` bytes (a power of two, at least a page).
    pub fn alloc_aligned(&self, len: u64, align: u64) -> Result<PhysAddr, RamError> {
        let len = len
            .max(1)
            .checked_next_multiple_of(4096)
            .ok_or(RamError::Invalid { size: len, align })?;
        let a = self.inner.shared.alloc_aligned(len, align.max(4096))?;
        self.inner.shared.zero(a, len);
        Ok(a)
    }

    /// Frees an [`HostOs::alloc`] allocation.
    pub fn free(&self, addr: PhysAddr) {
        self.inner.shared.free(addr);
    }

    /// Bytes of RAM allocated (kernel reservation included): what a leak would grow.
    pub fn ram_in_use(&self) -> u64 {
        self.inner.shared.ram.borrow().allocated_bytes()
    }

    /// The devices in the tree, in order.
    pub fn devices(&self) -> Vec<DeviceHandle> {
        self.inner
            .devices
            .borrow()
            .iter()
            .map(|e| e.handle.clone())
            .collect()
    }

    /// The fabric endpoint behind a device of this host's own tree (`None` for added ones).
    pub fn endpoint_of(&self, name: &str) -> Option<EndpointId> {
        self.inner
            .devices
            .borrow()
            .iter()
            .find(|e| e.handle.name() == name)
            .and_then(|e| e.endpoint)
    }

    /// The device called `name`.
    pub fn device(&self, name: &str) -> Result<DeviceHandle, HostError> {
        let devices = self.inner.devices.borrow();
        devices
            .iter()
            .find(|e| e.handle.name() == name)
            .map(|e| e.handle.clone())
            .ok_or_else(|| HostError::UnknownDevice {
                host: self.inner.name.clone(),
                device: name.to_string(),
                known: devices
                    .iter()
                    .map(|e| e.handle.name().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Makes `driver` available for binding (already present devices are not probed; call
    /// [`HostOs::probe`]).
    pub fn register_driver(&self, driver: Rc<dyn Driver>) {
        self.inner.drivers.borrow_mut().push(driver);
    }

    /// The name of the driver bound to `device`, or of whoever claimed it, if any.
    pub fn bound_driver(&self, device: &str) -> Option<String> {
        self.inner
            .devices
            .borrow()
            .iter()
            .find(|e| e.handle.name() == device)
            .and_then(|e| {
                e.bound
                    .as_ref()
                    .map(|(d, _)| d.name().to_string())
                    .or_else(|| e.claimed.clone())
            })
    }

    /// Claims `device` for `by` (`vfio-pci`, `smartio`), as binding a stub driver does on
    /// Linux: no driver of this kernel binds it and nobody else may claim it until
    /// [`HostOs::unclaim`]. Refused with [`HostError::Claimed`] when a driver is bound or
    /// someone claimed it already.
    pub fn claim(&self, device: &str, by: &str) -> Result<(), HostError> {
        self.device(device)?;
        if let Some(holder) = self.bound_driver(device) {
            return Err(HostError::Claimed {
                device: format!("{}:{device}", self.inner.name),
                holder,
            });
        }
        self.with_entry(device, |e| e.claimed = Some(by.to_string()));
        Ok(())
    }

    /// Calls `f` with the tree's entry of `device`, if there is one.
    fn with_entry<R>(&self, device: &str, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        self.inner
            .devices
            .borrow_mut()
            .iter_mut()
            .find(|e| e.handle.name() == device)
            .map(f)
    }

    /// Gives up a [`HostOs::claim`] (nothing if `device` is not claimed).
    pub fn unclaim(&self, device: &str) {
        self.with_entry(device, |e| e.claimed = None);
    }

    /// The state the bound driver keeps for `device`, if it is of type `T`.
    pub fn driver_data<T: 'static>(&self, device: &str) -> Option<Rc<T>> {
        let state = self
            .inner
            .devices
            .borrow()
            .iter()
            .find(|e| e.handle.name() == device)
            .and_then(|e| e.bound.as_ref().map(|(_, s)| s.clone()))?;
        state.downcast::<T>().ok()
    }

    /// Binds the first matching driver to `device` (if not bound already).
    pub async fn probe(&self, device: &str) -> Result<(), HostError> {
        let handle = self.device(device)?;
        if self.bound_driver(device).is_some() {
            return Ok(());
        }
        let id = handle.id();
        let driver = self
            .inner
            .drivers
            .borrow()
            .iter()
            .find(|d| d.matches(&id))
            .cloned()
            .ok_or_else(|| HostError::NoDriver {
                device: device.to_string(),
                vendor: id.vendor,
                id: id.device,
                class: id.class,
            })?;
        let state = driver
            .probe(handle)
            .await
            .map_err(|e| HostError::ProbeFailed {
                driver: driver.name().to_string(),
                device: device.to_string(),
                source: crate::ForeignError::boxed(e),
            })?;
        self.with_entry(device, |e| e.bound = Some((driver, state)));
        Ok(())
    }

    /// Unbinds the driver of `device`, if any (the driver's remove runs first).
    pub async fn unbind(&self, device: &str) -> Result<(), HostError> {
        self.device(device)?;
        let bound = self.with_entry(device, |e| e.bound.take()).flatten();
        if let Some((driver, state)) = bound {
            driver.remove(state).await;
        }
        Ok(())
    }

    /// Hot-adds `handle` to the tree and binds a driver if one matches (a device no driver
    /// wants stays in the tree unbound, as on Linux).
    pub async fn hot_add(&self, handle: DeviceHandle) -> Result<(), HostError> {
        self.hot_add_function(handle, None).await
    }

    /// [`HostOs::hot_add`] of a function of this host's own fabric (`endpoint`: a VF the PF
    /// driver enabled), so [`HostOs::endpoint_of`] finds it.
    pub(crate) async fn hot_add_function(
        &self,
        handle: DeviceHandle,
        endpoint: Option<EndpointId>,
    ) -> Result<(), HostError> {
        let name = handle.name().to_string();
        if self.device(&name).is_ok() {
            return Err(HostError::DuplicateDevice {
                host: self.inner.name.clone(),
                device: name,
            });
        }
        self.inner.devices.borrow_mut().push(Entry {
            handle,
            endpoint,
            bound: None,
            claimed: None,
        });
        match self.probe(&name).await {
            Ok(()) | Err(HostError::NoDriver { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Hot-removes `device`: unbinds its driver, then takes it out of the tree.
    pub async fn hot_remove(&self, device: &str) -> Result<DeviceHandle, HostError> {
        self.unbind(device).await?;
        let mut devices = self.inner.devices.borrow_mut();
        let at = devices
            .iter()
            .position(|e| e.handle.name() == device)
            .ok_or_else(|| HostError::UnknownDevice {
                host: self.inner.name.clone(),
                device: device.to_string(),
                known: String::new(),
            })?;
        Ok(devices.remove(at).handle)
    }
}
