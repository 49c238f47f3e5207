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
//! - [`block`]: the block layer — disks drivers register, and a program's requests through
//!   a system call, the block layer's submission and completion paths and the driver.
//! - [`guest`]: a virtual machine's guest-physical address space over scattered host pages.
//! - [`vm`]: a VM's memory as an x86 hypervisor lays it out, backed by host pages.
//! - [`vcpu`]: a VM's vCPU, whose guest-physical accesses the hypervisor translates (EPT).
//! - [`hypervisor`]: VMs — the guest kernel (an [`os`] whose physical addresses are
//!   guest-physical), functions passed through to it (VFIO here; SmartIO's MDEV parent
//!   implements the same [`hypervisor::PassThrough`]), interrupt relay, start and shutdown.

#![forbid(unsafe_code)]

pub mod block;
pub mod device;
pub mod dma;
pub mod driver;
pub mod guest;
pub mod hypervisor;
pub mod memory;
pub mod os;
pub mod sriov;
pub mod vcpu;
pub mod vm;

pub use block::{BlockDevice, BlockDriver, BlockError, BlockRequest, Geometry, IoError, ReqOp};
pub use device::{BarWindow, DeviceBackend, DeviceHandle, IrqVector, Mmio, PciId, SoftwareCosts};
pub use dma::{DmaBuffer, DmaDirection, DmaError, DmaMapper, LocalDma, PeerBar};
pub use driver::{BoxFuture, Driver, ProbeError};
pub use guest::{GuestMemory, GuestMemoryError, HostPiece};
pub use hypervisor::{GuestBar, PassThrough, Refusal, Vfio, Vm, VmConfig, VmContext, VmError};
pub use memory::{RamAllocator, RamError};
pub use os::{HostError, HostOs};
