//! The hypervisor: a VM on a host, the guest kernel inside it, and the functions passed
//! through to it (Paper V §5; ICPP'18 companion §5).
//!
//! A [`Vm`] owns its memory (the x86 layout of [`crate::vm`], backed by host pages), a
//! second-level translation ([`crate::vcpu::Ept`]) and a guest kernel — a [`HostOs`] whose
//! physical addresses are guest-physical, whose CPU is a vCPU, and whose drivers are the
//! same native drivers as on bare metal. Functions are passed through as [`PassThrough`]s:
//! a local function by VFIO ([`Vfio`]) or a remote one by SmartIO's MDEV parent. Either
//! way the hypervisor shows the guest one *virtual function* per device
//! (`virtual_function`): configuration cycles are trapped (BAR registers are the guest's
//! own, everything else goes to the real function), BARs are mapped into the guest
//! directly, and the device's DMA is made to reach guest memory at guest-physical addresses
//! when the guest sets Bus Master. Interrupts reach the guest in software: a host handler,
//! an eventfd, KVM's injection ([`VmContext::inject`]).
//!
//! ```text
//!   guest kernel ── driver ── DeviceHandle ── virtual function (config trapped, BARs mapped)
//!        │ vCPU (EPT: GPA → host)                        │
//!        ▼                                               ▼
//!   host RAM pages ◄── DMA at GPA (IOMMU: GPA → host) ── PassThrough (VFIO or MDEV)
//! ```
//!
//! Starting a VM resets every assigned function (where MDEV borrows it), lets the guest
//! kernel enumerate and size the BARs, and binds drivers; shutting down unbinds them,
//! releases every function (MDEV returns it) and gives the memory back.

mod guest_pci;
mod peers;
mod refusal;
mod vfio;
mod virtual_function;

pub use peers::{PeerChange, PeerMapping, PeerMappings};
pub use vfio::Vfio;

use crate::device::DeviceHandle;
use crate::driver::Driver;
use crate::error::HostError;
use crate::future::BoxFuture;
use crate::os::HostOs;
use crate::vcpu::{Ept, VcpuPort};
use crate::vm::{GuestPageSize, VmMemory, VmMemoryError, VmMemoryLayout};
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{EndpointId, HostId};
use smartio_platform::{race, Either};
use smartio_platform::{AccessError, Clock, MsiMessage};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use thiserror::Error;
use virtual_function::VirtualFunction;

pub use refusal::Refusal;

/// Why a VM could not start, or a function not be passed through.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VmError {
    /// The VM's memory could not be laid out or backed.
    #[error("VM {vm}: {source}")]
    Memory {
        /// The VM.
        vm: String,
        /// Why.
        source: VmMemoryError,
    },
    /// The guest kernel failed (a driver did not bind, a configuration access failed).
    #[error("VM {vm}: {source}")]
    Guest {
        /// The VM.
        vm: String,
        /// The guest kernel's error.
        source: HostError,
    },
    /// A function could not be passed through (the host or SmartIO refused).
    #[error("VM {vm}: passing {device} through: {source}")]
    PassThrough {
        /// The VM.
        vm: String,
        /// The function as the user named it.
        device: String,
        /// What the hypervisor or SmartIO refused for.
        source: Box<Refusal>,
    },
    /// The VM is not running (already shut down).
    #[error("VM {vm} is not running")]
    NotRunning {
        /// The VM.
        vm: String,
    },
}

/// What a VM is: its name on its host, its RAM and the pages backing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmConfig {
    /// The VM's name (`vm0`); shown as `host/vm0`.
    pub name: String,
    /// Guest RAM in bytes.
    pub memory: u64,
    /// The host pages backing it.
    pub page: GuestPageSize,
}

/// A passed-through function's BAR as the guest placed it, and where the function's host
/// reaches the real one (peer-to-peer between functions of one VM maps the former onto the
/// latter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestBar {
    /// The guest-physical address the guest kernel gave it.
    pub guest: u64,
    /// Bytes.
    pub size: u64,
    /// The function's host (its lender, for a borrowed one).
    pub host: HostId,
    /// The function.
    pub endpoint: EndpointId,
    /// The BAR index.
    pub index: u8,
    /// Where the VM's host CPU reaches the real BAR (its own bus address for a local
    /// function; the NTB window for a borrowed one).
    pub reached_at: u64,
}

/// What a hypervisor needs from a function passed through to a VM: a local function by
/// VFIO, or a remote one by SmartIO's MDEV parent.
pub trait PassThrough {
    /// The function as the user named it (`nvme0`, `lender:nvme0`).
    fn name(&self) -> String;

    /// The guest resets the function (at VM start): the backend takes it for `vm`.
    fn reset(&self, vm: &Rc<VmContext>) -> BoxFuture<Result<(), VmError>>;

    /// The real function's BARs, at the host bus addresses where the VM's host CPU reaches
    /// them (valid after [`PassThrough::reset`]).
    fn bars(&self) -> Vec<AssignedBar>;

    /// A configuration read of the real function.
    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>>;

    /// A configuration write to the real function.
    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>>;

    /// The guest is setting Bus Master: make the VM's memory, and the other functions' guest
    /// BARs (`peers`, where the guest has them now), reachable by the function at their
    /// guest-physical addresses; a peer mapping left from before a BAR moved goes.
    fn enable_dma(
        &self,
        vm: &Rc<VmContext>,
        peers: Vec<GuestBar>,
    ) -> BoxFuture<Result<(), VmError>>;

    /// The guest asks for `guest_vector`: the message the function must send, with a relay
    /// set up that injects `guest_vector` into the VM when it does.
    fn interrupt(&self, vm: &Rc<VmContext>, guest_vector: u32) -> Result<MsiMessage, VmError>;

    /// The guest routes the function's legacy INTx to `guest_vector`: the backend routes the
    /// real function's interrupt line on its host and relays it into the VM (Paper V §5.4:
    /// legacy interrupts work for VMs, not for bare-metal borrowers).
    fn intx(&self, vm: &Rc<VmContext>, guest_vector: u32) -> BoxFuture<Result<(), VmError>> {
        let _ = guest_vector;
        let e = VmError::PassThrough {
            vm: vm.name().to_string(),
            device: self.name(),
            source: Box::new(Refusal::NoIntxRoute),
        };
        Box::pin(async move { Err(e) })
    }

    /// The real function: its host and endpoint.
    fn function(&self) -> (HostId, EndpointId);

    /// The VM lets go of the function (shut down, or hot-removed): everything
    /// [`PassThrough::reset`] and [`PassThrough::enable_dma`] took goes back.
    fn release(&self, vm: &Rc<VmContext>) -> BoxFuture<Result<(), VmError>>;
}

/// What the pass-through backends see of a running VM.
#[derive(Debug)]
pub struct VmContext {
    name: String,
    host: HostOs,
    memory: VmMemory,
    ept: Rc<Ept>,
    running: Cell<bool>,
    /// Relay handlers waiting for interrupts, woken when the VM stops.
    /// Fired when the VM stops.
    stop_signal: smartio_platform::Broadcast,
    guest_bars: RefCell<Vec<(usize, GuestBar)>>,
}

impl VmContext {
    /// `host/vm`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host the VM runs on.
    pub fn host(&self) -> &HostOs {
        &self.host
    }

    /// The VM's memory: layout and guest-to-host translation.
    pub fn memory(&self) -> &VmMemory {
        &self.memory
    }

    /// The guest-physical layout.
    pub fn layout(&self) -> &VmMemoryLayout {
        self.memory.layout()
    }

    /// Whether the VM still runs (relays stop injecting once it is shut down).
    pub fn running(&self) -> bool {
        self.running.get()
    }

    /// Relays interrupt `host_vector` of the VM's host into the guest as `guest_vector`, from
    /// now until the VM stops: each time it fires, a host handler (`[vm] irq_handler_ns`)
    /// signals the VM's eventfd and KVM injects it ([`VmContext::inject`]).
    pub fn relay(self: &Rc<Self>, host_vector: u32, guest_vector: u32) {
        let vm = self.clone();
        let machine = self.host.machine().clone();
        let cpu = machine.cpu(self.host.id());
        machine.spawn(async move {
            let handler = cpu.machine().cpu_timing().vm.irq_handler;
            while vm.interrupt_while_running(&cpu, host_vector).await {
                cpu.spend("host: the VM's interrupt handler", handler).await;
                vm.inject(guest_vector).await;
            }
        });
    }

    /// Waits for interrupt `vector` on `cpu` (a host CPU handling the VM's interrupts) unless
    /// the VM stops first: `true` when the interrupt came and the VM still runs. A relay's
    /// handler loops on this, so it ends with the VM instead of waiting forever.
    pub async fn interrupt_while_running(&self, cpu: &smartio_machine::Agent, vector: u32) -> bool {
        match race(cpu.interrupt(vector), self.stopped()).await {
            Either::Left(()) => self.running(),
            Either::Right(()) => false,
        }
    }

    /// Completes once the VM stops running.
    async fn stopped(&self) {
        // Armed before the check, so a stop in between is not missed.
        let stop = self.stop_signal.fired();
        if self.running.get() {
            stop.await;
        }
    }

    /// Marks the VM stopped and wakes everything waiting for that.
    fn stop(&self) {
        self.running.set(false);
        self.stop_signal.fire();
    }

    /// Injects `vector` into the guest, from the host's side of an interrupt relay: signal
    /// the VM's eventfd, let KVM inject (its MSI fast path, from the handler), and the vCPU
    /// takes the interrupt as a posted interrupt: the notification reaches its core as an
    /// inter-processor interrupt, no TLP, and its entry is the interrupt delivery the engine
    /// charges.
    pub async fn inject(&self, vector: u32) {
        if !self.running() {
            return;
        }
        let cpu = self.host.machine().cpu(self.host.id());
        let t = cpu.machine().cpu_timing().vm;
        cpu.spend("host: eventfd signal to KVM", t.eventfd_signal)
            .await;
        cpu.spend("KVM: inject the interrupt", t.irq_injection)
            .await;
        cpu.machine().raise_interrupt(self.host.id(), vector);
    }
}

/// A VM: created on a host with its memory and guest kernel, powered on with functions
/// passed through, shut down.
pub struct Vm {
    context: Rc<VmContext>,
    guest: HostOs,
    devices: RefCell<Vec<Rc<dyn PassThrough>>>,
    names: RefCell<Vec<String>>,
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("name", &self.context.name)
            .field("devices", &self.names.borrow())
            .finish()
    }
}

impl Vm {
    /// Creates VM `config` on `host`: backs its memory with the host's pages and boots its
    /// guest kernel with `drivers` registered. No function is passed through yet and no
    /// simulated time passes (see [`Vm::power_on`]).
    pub fn create(
        host: &HostOs,
        config: &VmConfig,
        drivers: &[Rc<dyn Driver>],
    ) -> Result<Vm, VmError> {
        let name = format!("{}/{}", host.name(), config.name);
        let memory_error = |source| VmError::Memory {
            vm: name.clone(),
            source,
        };
        let layout = VmMemoryLayout::x86(config.memory, config.page).map_err(memory_error)?;
        let memory = VmMemory::back(host, layout).map_err(memory_error)?;
        let ept = Rc::new(Ept::new(&name, memory.memory().clone()));
        let vcpu = host.machine().agent_with_port(Rc::new(VcpuPort::new(
            host.cpu().port(),
            ept.clone(),
            host.machine().cpu_timing().vm.cpu_overhead_ppm,
        )));
        let ranges: Vec<_> = memory.layout().ranges().collect();
        let guest = HostOs::boot_guest(host, &name, memory.memory(), &ranges, vcpu);
        for d in drivers {
            guest.register_driver(d.clone());
        }
        let context = Rc::new(VmContext {
            name,
            host: host.clone(),
            memory,
            ept,
            running: Cell::new(true),
            stop_signal: smartio_platform::Broadcast::new("the VM to stop"),
            guest_bars: RefCell::new(Vec::new()),
        });
        Ok(Vm {
            context,
            guest,
            devices: RefCell::new(Vec::new()),
            names: RefCell::new(Vec::new()),
        })
    }

    /// [`Vm::create`] and [`Vm::power_on`]; on failure everything taken is given back.
    pub async fn start(
        host: &HostOs,
        config: &VmConfig,
        devices: Vec<Rc<dyn PassThrough>>,
        drivers: &[Rc<dyn Driver>],
    ) -> Result<Vm, VmError> {
        let vm = Vm::create(host, config, drivers)?;
        match vm.power_on(devices).await {
            Ok(()) => Ok(vm),
            Err(e) => {
                let _ = vm.shutdown_inner().await;
                Err(e)
            }
        }
    }

    /// Powers the VM on with `devices` passed through: the machine reset resets every
    /// function (MDEV borrows it here), the guest kernel enumerates them, sizes and places
    /// their BARs, and binds its drivers. On failure the VM is left to be shut down.
    pub async fn power_on(&self, devices: Vec<Rc<dyn PassThrough>>) -> Result<(), VmError> {
        if !self.context.running() {
            return Err(VmError::NotRunning {
                vm: self.context.name.clone(),
            });
        }
        for d in devices {
            if let Err(e) = d.reset(&self.context).await {
                // A reset that failed half-way may have taken something: give it back.
                let _ = d.release(&self.context).await;
                return Err(e);
            }
            self.devices.borrow_mut().push(d);
        }
        let functions: Vec<_> = self
            .devices
            .borrow()
            .iter()
            .enumerate()
            .map(|(slot, d)| Rc::new(VirtualFunction::new(slot, d.clone(), self.context.clone())))
            .collect();
        // The guest kernel's PCI scan: identify, size and place every BAR, then bind drivers.
        let guest_error = |source| VmError::Guest {
            vm: self.context.name.clone(),
            source,
        };
        let handles = guest_pci::scan(&self.guest, &self.context, &functions)
            .await
            .map_err(guest_error)?;
        for handle in handles {
            self.names.borrow_mut().push(handle.name().to_string());
            self.guest.hot_add(handle).await.map_err(guest_error)?;
        }
        Ok(())
    }

    /// `host/vm`.
    pub fn name(&self) -> &str {
        &self.context.name
    }

    /// The guest kernel (what workloads inside the VM run on).
    pub fn guest(&self) -> &HostOs {
        &self.guest
    }

    /// The hypervisor's view of the VM.
    pub fn context(&self) -> &Rc<VmContext> {
        &self.context
    }

    /// The guest's name of each passed-through function, in assignment order.
    pub fn device_names(&self) -> Vec<String> {
        self.names.borrow().clone()
    }

    /// Shuts the VM down: the guest unbinds its drivers (as long as they take: see
    /// [`Vm::power_off`]), every function is released (MDEV returns it to its lender), the
    /// VM's memory goes back to the host. Reports the first failure after releasing
    /// everything it can.
    pub async fn shutdown(self) -> Result<(), VmError> {
        self.shutdown_inner().await
    }

    /// [`Vm::shutdown`] for a VM shared with others (a workbench): afterwards it runs no
    /// more and holds nothing.
    pub async fn shutdown_in_place(&self) -> Result<(), VmError> {
        self.shutdown_inner().await
    }

    /// Powers the VM off without the guest (a hypervisor's forced power-off, as `virsh
    /// destroy`): every function is released (MDEV returns it) and the memory goes back,
    /// whatever the guest's drivers are doing. For a VM whose [`Vm::shutdown_in_place`] does
    /// not finish — the guest's unbind waits forever when a driver waits for a device its
    /// own guest stopped (interrupts masked, Bus Master cleared): drop that shutdown, then
    /// power off. Reports the first failure after releasing everything it can; a VM already
    /// shut down or powered off holds nothing, and this releases nothing.
    pub async fn power_off(&self) -> Result<(), VmError> {
        self.names.borrow_mut().clear();
        self.release_all().await
    }

    async fn shutdown_inner(&self) -> Result<(), VmError> {
        let mut first = None;
        let names = std::mem::take(&mut *self.names.borrow_mut());
        for name in names {
            if let Err(source) = self.guest.hot_remove(&name).await {
                first.get_or_insert(VmError::Guest {
                    vm: self.context.name.clone(),
                    source,
                });
            }
        }
        if let Err(e) = self.release_all().await {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    /// Stops the VM and gives back every function and its memory.
    async fn release_all(&self) -> Result<(), VmError> {
        let mut first = None;
        self.context.stop();
        let devices = std::mem::take(&mut *self.devices.borrow_mut());
        for d in devices.into_iter().rev() {
            for b in d.bars() {
                self.context.ept.unmap_host(b.base, b.size);
            }
            if let Err(e) = d.release(&self.context).await {
                first.get_or_insert(e);
            }
        }
        self.context.memory.release_pages(&self.context.host);
        first.map_or(Ok(()), Err)
    }

    /// The device handle of the guest's function `name` (for tests and tools that look
    /// inside the guest).
    pub fn device(&self, name: &str) -> Result<DeviceHandle, HostError> {
        self.guest.device(name)
    }
}
