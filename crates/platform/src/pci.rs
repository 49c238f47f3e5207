//! Configuration-space layout from the PCI specifications, shared by device models (which
//! implement it) and the host OS model (which reads it), as a kernel and a device would share
//! `pci_regs.h`.

/// Vendor id (16 bits).
pub const VENDOR_ID: u16 = 0x00;
/// Device id (16 bits).
pub const DEVICE_ID: u16 = 0x02;
/// Command register (16 bits).
pub const COMMAND: u16 = 0x04;
/// Status register (16 bits).
pub const STATUS: u16 = 0x06;
/// Revision id (8 bits), followed by the 24-bit class code.
pub const REVISION: u16 = 0x08;
/// Class code: programming interface, sub-class, base class (24 bits at 0x09).
pub const CLASS: u16 = 0x09;
/// Header type (8 bits).
pub const HEADER_TYPE: u16 = 0x0e;
/// BAR 0; BAR n is at `BAR0 + 4 n`.
pub const BAR0: u16 = 0x10;
/// Subsystem vendor id.
pub const SUBSYSTEM_VENDOR_ID: u16 = 0x2c;
/// Subsystem id.
pub const SUBSYSTEM_ID: u16 = 0x2e;
/// Pointer to the first capability.
pub const CAPABILITIES: u16 = 0x34;
/// Legacy interrupt line (writable scratch).
pub const INTERRUPT_LINE: u16 = 0x3c;
/// Legacy interrupt pin (0 = none).
pub const INTERRUPT_PIN: u16 = 0x3d;

/// Command register bits.
pub mod command {
    /// The function decodes its memory BARs.
    pub const MEMORY_SPACE: u16 = 1 << 1;
    /// The function may issue DMA.
    pub const BUS_MASTER: u16 = 1 << 2;
    /// Legacy INTx is disabled.
    pub const INTX_DISABLE: u16 = 1 << 10;
}

/// Status register: a capability list is present.
pub const STATUS_CAP_LIST: u16 = 1 << 4;

/// Capability ids.
pub mod cap {
    /// PCI Express capability.
    pub const PCIE: u8 = 0x10;
    /// MSI-X capability.
    pub const MSIX: u8 = 0x11;
}

/// MSI-X capability registers, as offsets from the capability.
pub mod msix {
    /// Message control (16 bits): table size − 1 in bits 10:0, function mask, enable.
    pub const CONTROL: u16 = 0x02;
    /// Table offset (bits 31:3) and BAR indicator (bits 2:0).
    pub const TABLE: u16 = 0x04;
    /// Pending-bit array offset and BAR indicator.
    pub const PBA: u16 = 0x08;
    /// Message control: MSI-X is enabled.
    pub const ENABLE: u16 = 1 << 15;
    /// Message control: every vector is masked.
    pub const FUNCTION_MASK: u16 = 1 << 14;
    /// Bytes per table entry: address low, address high, data, vector control.
    pub const ENTRY_SIZE: u64 = 16;
    /// Vector control: this vector is masked.
    pub const VECTOR_MASKED: u32 = 1;
}
