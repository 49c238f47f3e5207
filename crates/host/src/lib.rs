//! The host OS model: what an operating system on one emulated host owns.
//!
//! - [`memory`]: the allocator of the host's physical RAM.
//! - [`os`]: a host's kernel — its PCI device tree (from firmware enumeration), driver
//!   binding by vendor/device/class, hot-add and hot-remove.
//! - [`device`]: the Linux-like device handle a driver gets: configuration access, BAR
//!   mapping, the DMA API, MSI-X. A driver sees only this handle, so it cannot tell a local
//!   function from one SmartIO lends it.
//! - [`sriov`]: the PF driver's `enable_sriov` / `disable_sriov`, which make VFs exist and
//!   hot-add (or remove) them in the device tree.
//! - [`dma`]: how a handle turns memory into addresses its device can use (identity, or the
//!   host IOMMU).
//! - [`driver`]: what a driver implements to be bound.
//! - [`pci`], [`error`], [`future`]: what the kernel, the handles and the drivers share — a
//!   function's ids and BAR windows, [`HostError`], the boxed future of the host's traits —
//!   kept apart so that none of those modules is imported back by what it imports.
//! - [`foreign`]: a driver's or SmartIO's own error kept whole inside the host's errors
//!   ([`ForeignError`]), since the host cannot name the types of the crates above it.
//! - [`block`]: the block layer — disks drivers register, and a program's requests through
//!   a system call, the block layer's submission and completion paths and the driver.
//! - [`guest`]: a virtual machine's guest-physical address space over scattered host pages.
//! - [`vm`]: a VM's memory as an x86 hypervisor lays it out, backed by host pages.
//! - [`vcpu`]: a VM's vCPU, whose guest-physical accesses the hypervisor translates (EPT).
//! - [`hypervisor`]: VMs — the guest kernel (an [`os`] whose physical addresses are
//!   guest-physical), functions passed through to it (VFIO here; SmartIO's MDEV parent
//!   implements the same [`hypervisor::PassThrough`]), interrupt relay, start and shutdown.
//!
//! # Inside this crate
//!
//! What an operating system on one host owns.
//!
//! - `memory`: the allocator of a host's physical RAM (contiguous, aligned, first fit; the
//!   lowest 512 MiB are reserved for firmware, the kernel and the DMA bandwidth test's fixed
//!   buffers).
//! - `os`: `HostOs`, a host's kernel. `boot` builds the PCI device tree from what firmware
//!   enumerated in that host; drivers register and bind by class or vendor/device (`probe`,
//!   `unbind`); `hot_add` puts a new device handle into the tree and binds a driver, `hot_remove`
//!   unbinds first and then removes. `driver_data` returns a bound driver's per-device state.
//!   A driver's `probe` fails with its own error, boxed (`ProbeError`: drivers live above the
//!   host crate), and `HostError::ProbeFailed` keeps it, typed, as a `ForeignError`.
//! - `device`: `DeviceHandle`, the Linux-like handle a driver gets: configuration reads and
//!   writes, `enable` (memory decoding + bus mastering), `map_bar` (an `Mmio` of 32/64-bit and
//!   block loads and stores from this host's CPU), the DMA API (`dma_map`/`dma_unmap`,
//!   `dma_alloc_coherent`), `enable_msix` (host vectors allocated, table entries programmed and
//!   unmasked through the BAR, MSI-X enabled in configuration space) and `IrqVector::wait` for
//!   handlers, software costs from the calibration (block layer submit/complete), and
//!   `dma_map_peer` (Linux's `dma_map_resource`: another function's BAR as this device reaches
//!   it, for peer-to-peer). What differs between a local and a lent function sits behind two
//!   traits: `DeviceBackend` (where configuration requests go, which MSI address reaches this
//!   host, which physical function is behind the handle) and `DmaMapper` (how memory and peer
//!   BARs become device addresses, and what that costs the CPU: `map_cost`/`unmap_cost`, the
//!   direct mapping's `[cpu] dma_map_ns`/`dma_unmap_ns`, an IOMMU's page-table entries and unmap,
//!   a shadow device's window hook). Device Lending supplies its own implementations, so a driver
//!   cannot tell a shadow device from a local one. `dma_map_timed`/`dma_unmap_timed` charge the
//!   mapping's cost on the calling CPU; the native NVMe driver uses them for every request's
//!   buffer, as the Linux block layer maps each O_DIRECT buffer (Paper V §7.1.1).
//! - `block`: the host's block layer: drivers register disks with a geometry
//!   (`HostOs::register_disk`); each request pays the system call and `[cpu] block_submit_ns`,
//!   is queued to hardware queue `cpu % hw_queues`, and pays `block_complete_ns` when done;
//!   requests that are empty, out of range or too large are refused before a driver sees them.
//! - `guest`: `GuestMemory`, a VM's guest-physical space backed by scattered host pages: runs
//!   of guest pages mapped onto host pages (page-aligned, disjoint, merged when contiguous on
//!   both sides); `translate(GuestPhysAddr, len)` returns the host pieces in guest order, or
//!   `GuestMemoryError::Unmapped` naming the first missing byte; `resolvable_from` is the
//!   hypervisor's probe (how far from a base every address resolves).
//! - `vm`: a VM's memory: `VmMemoryLayout::x86` puts guest RAM at 0 up to the PCI hole (3 GiB)
//!   and the rest from 4 GiB — the low and high bases the MDEV parent probes from;
//!   `VmMemory::back` allocates it from the host's RAM one 4 KiB or 2 MiB page at a time into a
//!   `GuestMemory`, gives everything back on failure, and `release` at shutdown.
//! - `vcpu`: a VM's vCPU. `Ept` is the second-level translation (guest RAM through the
//!   `GuestMemory`, guest BARs onto the host addresses of the real BARs); `VcpuPort` wraps the
//!   host CPU's `AgentPort` (`Machine::agent_with_port`) so every load and store of the guest is
//!   translated, split at host-page boundaries, and costs what the host CPU's access costs. A
//!   guest address neither covers is refused; a guest's interrupt vectors are host vectors set
//!   aside for it.
//! - `hypervisor`: VMs. `Vm::create` backs the memory and boots the guest kernel — a `HostOs`
//!   (`boot_guest`) whose physical addresses are guest-physical, whose CPU is the vCPU, whose RAM
//!   allocator covers the guest's low and high memory and whose `read_memory`/`write_memory`
//!   translate; `Vm::power_on` resets every `PassThrough` (MDEV borrows here), lets the guest
//!   kernel scan them (`guest_pci`: identify, size every BAR by writing all-ones through the
//!   trapped configuration space, place it in the PCI hole or above RAM) and hot-adds the handles
//!   where the guest's drivers bind; `shutdown` unbinds, releases every function and gives the
//!   memory back; `power_off` does the last two without the guest (for a guest whose driver
//!   waits forever in its unbind for a device the guest itself stopped). `virtual_function` is the trap: BAR registers are the guest's own
//!   (`devices::config::VirtualBars`, the same write-mask helper the devices use) and mapped into
//!   the EPT when placed; a Command write that sets Bus Master first asks the backend to make
//!   guest memory and the other functions' guest BARs reachable at their guest-physical
//!   addresses; everything else goes to the real function; MSI-X messages come from the backend.
//!   The guest's DMA API is the identity (no virtual IOMMU). `Vfio` passes a function of the
//!   VM's own host through: a new IOMMU domain over all guest memory (GPA → HPA, pinned at
//!   reset), peers' guest BARs mapped in it where the guest has them at each Bus Master set (a
//!   moved BAR's old mapping goes, and a BAR placed where another was mapped is reached
//!   instead), interrupts to the host, whose handler signals the VM's eventfd and KVM injects
//!   (`VmContext::inject`: eventfd and injection costs, then an interrupt message the host CPU
//!   sends itself). The function is claimed `vfio-pci` on its host
//!   while passed through (`HostOs::claim`), so SmartIO will not lend it.
//!   Legacy INTx works for VMs (Paper V §5.4): `DeviceHandle::enable_intx` asks the backend to
//!   route the function's interrupt line (`DeviceBackend::route_intx`; a host programs
//!   INTERRUPT_LINE with a line of its own, `platform::msi::INTX_LINES`, whose vector has the
//!   same number), the guest's virtual function asks its `PassThrough` (`intx`: VFIO routes a
//!   line of the VM's host, MDEV one of the lender, then the same relay as MSI-X), and a shadow
//!   device refuses (INTx cannot cross the NTB). A function with MSI-X off and INTX_DISABLE
//!   clear asserts INTx as a message to its root complex carrying the routed line
//!   (`ConfigSpace::intx_line`; the NVMe controller does). The NVMe driver takes INTx with
//!   `NvmeDriverConfig::intx`: one vector, one handler reaping every queue.
//! - `dma`: `LocalDma`: identity when the host IOMMU is off; otherwise the function gets its own
//!   IOMMU domain at boot and the DMA API hands out I/O virtual addresses (above 4 GiB), so a
//!   device reaching anywhere else faults. A peer BAR is reached at this host's address for it
//!   (mapped one to one in the domain when the IOMMU is on).
//!
//! `HostOs::alloc` zeroes what it hands out by giving the pages back to sparse memory
//! (`Machine::zero_memory`), so a large allocation costs no memory until it is written.
//! `smartio::sisci` allocates through the booted kernels (`Sisci::on_hosts`); `Sisci::new`, for
//! hosts without kernels, keeps its own allocators.

#![forbid(unsafe_code)]

pub mod block;
pub mod device;
pub mod dma;
pub mod driver;
pub mod error;
pub mod foreign;
pub mod future;
pub mod guest;
pub mod hypervisor;
pub mod memory;
pub mod os;
pub mod pci;
pub mod sriov;
pub mod vcpu;
pub mod vm;

pub use block::{BlockDevice, BlockDriver, BlockError, BlockRequest, Geometry, IoError, ReqOp};
pub use device::{DeviceBackend, DeviceHandle, IrqVector, Mmio, SoftwareCosts};
pub use dma::{DmaBuffer, DmaDirection, DmaError, DmaMapper, LocalDma, PeerBar};
pub use driver::{Driver, ProbeError};
pub use error::HostError;
pub use foreign::ForeignError;
pub use future::BoxFuture;
pub use guest::{GuestMemory, GuestMemoryError, HostPiece};
pub use hypervisor::{GuestBar, PassThrough, Refusal, Vfio, Vm, VmConfig, VmContext, VmError};
pub use memory::{RamAllocator, RamError};
pub use os::HostOs;
pub use pci::{BarWindow, PciId};
