//! Why a host's kernel or a device handle refused: [`HostError`], and [`NoIntx`] for a
//! function's legacy interrupt.

use crate::dma::DmaError;
use crate::memory::RamError;
use smartio_platform::AccessError;
use thiserror::Error;

/// A host OS failure.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    /// No device of that name in the host's tree.
    #[error("host {host} has no device {device:?} (devices: {known})")]
    UnknownDevice {
        /// The host.
        host: String,
        /// The name asked for.
        device: String,
        /// The names it has.
        known: String,
    },
    /// A device of that name is already in the tree.
    #[error("host {host} already has a device {device:?}")]
    DuplicateDevice {
        /// The host.
        host: String,
        /// The name.
        device: String,
    },
    /// The device has no such BAR.
    #[error("{device} has no BAR{bar}")]
    NoSuchBar {
        /// The device.
        device: String,
        /// The BAR index.
        bar: u8,
    },
    /// The device has no MSI-X capability.
    #[error("{device} has no MSI-X capability")]
    NoMsix {
        /// The device.
        device: String,
    },
    /// More vectors asked for than the table has.
    #[error("{device}: {wanted} MSI-X vectors asked for, the table has {available}")]
    TooManyVectors {
        /// The device.
        device: String,
        /// Asked.
        wanted: u16,
        /// In the table.
        available: u16,
    },
    /// A configuration or MMIO access failed.
    #[error("{device}: {source}")]
    Access {
        /// The device.
        device: String,
        /// The access error.
        source: AccessError,
    },
    /// The DMA API failed.
    #[error("{0}")]
    Dma(#[from] DmaError),
    /// No registered driver matches the device.
    #[error("no driver for {device} (vendor {vendor:#06x}, device {id:#06x}, class {class:#08x})")]
    NoDriver {
        /// The device.
        device: String,
        /// Vendor id.
        vendor: u16,
        /// Device id.
        id: u16,
        /// Class code.
        class: u32,
    },
    /// The driver's probe failed.
    #[error("driver {driver} failed to bind {device}: {source}")]
    ProbeFailed {
        /// The driver.
        driver: String,
        /// The device.
        device: String,
        /// The driver's own error.
        #[source]
        source: crate::ForeignError,
    },
    /// The function is held by a driver or claimed by someone else (`vfio-pci`, `smartio`).
    #[error("{device} is held by {holder}")]
    Claimed {
        /// `host:device`.
        device: String,
        /// The driver or claimant.
        holder: String,
    },
    /// Legacy INTx cannot be used for the function.
    #[error("{device}: no legacy INTx: {why}")]
    NoIntx {
        /// The device.
        device: String,
        /// Why.
        why: NoIntx,
    },
    /// The function is gone (a VF removed when its PF disabled SR-IOV): every call on its
    /// handle answers this.
    #[error("{device} is gone: its physical function disabled SR-IOV")]
    FunctionGone {
        /// The device.
        device: String,
    },
    /// `enable_sriov` on a function without the SR-IOV capability.
    #[error("{device} has no SR-IOV capability")]
    NoSrIov {
        /// The device.
        device: String,
    },
    /// `enable_sriov(n)` with `n` of 0 or more than the PF's TotalVFs. (The capability
    /// itself keeps its old NumVFs on such a write, as hardware does; the driver checks.)
    #[error("{device}: {asked} VFs asked for, the device supports 1 to {total} (TotalVFs)")]
    TooManyVfs {
        /// The PF.
        device: String,
        /// NumVFs asked for.
        asked: u16,
        /// TotalVFs.
        total: u16,
    },
    /// `enable_sriov` while VFs are enabled already (disable them first).
    #[error("{device}: SR-IOV is already enabled with {num_vfs} VFs (disable it first)")]
    SrIovEnabled {
        /// The PF.
        device: String,
        /// NumVFs in force.
        num_vfs: u16,
    },
    /// `enable_sriov` on a PF this kernel does not own directly (a borrowed PF or one in a
    /// VM): its VFs would have to be lent or passed through one by one.
    #[error("{device}: SR-IOV can only be enabled by the kernel of the PF's own host")]
    SrIovNotLocal {
        /// The PF.
        device: String,
    },
    /// A function named for VFIO pass-through that is not the host's own (a borrowed one).
    #[error("{device} of {host} is not one of the host's own functions")]
    NotOwnFunction {
        /// The function as named.
        device: String,
        /// The host.
        host: String,
    },
    /// A VM's guest kernel found no room in its PCI windows for a BAR.
    #[error("{device}: no room for BAR{bar}: {source}")]
    NoBarRoom {
        /// The function.
        device: String,
        /// The BAR.
        bar: u8,
        /// The window allocator's refusal.
        source: RamError,
    },
    /// The hypervisor could not give a guest function what it asked for (an interrupt).
    #[error(transparent)]
    Vm(Box<crate::VmError>),
}

/// Why a function's legacy INTx cannot be used ([`HostError::NoIntx`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NoIntx {
    /// A borrowed device: its interrupt line is on the lender's side of the NTB.
    #[error(
        "legacy interrupts cannot cross the NTB; a borrowed device interrupts by MSI-X (a VM \
         borrowing it by MDEV can use INTx)"
    )]
    AcrossNtb,
    /// The function's backend has no line to route.
    #[error("this kind of function has no legacy interrupt route")]
    NoRoute,
    /// The vector asked for is not an interrupt line number.
    #[error("vector {0} is no interrupt line")]
    NotALine(u32),
    /// The host has no free interrupt line.
    #[error("every interrupt line of the host is in use")]
    LinesInUse,
    /// The hypervisor could not route the line into the VM.
    #[error("{0}")]
    Vm(#[source] Box<crate::VmError>),
}
