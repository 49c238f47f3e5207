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

/// Status register bits software clears by writing one (RW1C): Master Data Parity Error,
/// Signaled Target Abort, Received Target Abort, Received Master Abort, Signaled System
/// Error, Detected Parity Error.
pub const STATUS_ERRORS: u16 = 1 << 8 | 1 << 11 | 1 << 12 | 1 << 13 | 1 << 14 | 1 << 15;

/// The number of BARs of a type-0 header.
pub const BAR_COUNT: u8 = 6;

/// First offset of the extended configuration space (PCI Express extended capabilities).
pub const EXTENDED_CAPABILITIES: u16 = 0x100;

/// Size of a function's configuration space (PCI Express: 4 KiB).
pub const CONFIG_SPACE_SIZE: u16 = 0x1000;

/// Base address register bits (memory BARs; I/O BARs are not modelled).
pub mod bar {
    /// Type field, bits 2:1: `0b10` is a 64-bit BAR (the next BAR holds the upper dword).
    pub const MEM_64: u32 = 0b10 << 1;
    /// The region is prefetchable.
    pub const PREFETCHABLE: u32 = 1 << 3;
    /// The read-only low bits of a memory BAR (space, type, prefetchable).
    pub const FLAGS: u32 = 0xf;
}

/// Capability ids (PCI Code and ID Assignment Specification).
pub mod cap {
    /// Power Management capability.
    pub const POWER_MANAGEMENT: u8 = 0x01;
    /// MSI capability.
    pub const MSI: u8 = 0x05;
    /// PCI Express capability.
    pub const PCIE: u8 = 0x10;
    /// MSI-X capability.
    pub const MSIX: u8 = 0x11;
    /// Offset of the next-capability pointer in a capability's header.
    pub const NEXT: u16 = 0x01;
}

/// Extended capability ids (in the extended space, 0x100 and above).
pub mod ext_cap {
    /// Device Serial Number.
    pub const DEVICE_SERIAL_NUMBER: u16 = 0x0003;
    /// Single Root I/O Virtualization.
    pub const SRIOV: u16 = 0x0010;
    /// Header: id in bits 15:0, version in 19:16, next offset in 31:20.
    pub const NEXT_SHIFT: u32 = 20;
    /// Header: bits of the version field (after shifting by 16).
    pub const VERSION_MASK: u32 = 0xf;
}

/// SR-IOV extended capability registers, as offsets from the capability (PCI Express Base
/// Specification §9.3.3, "SR-IOV Extended Capability"). A PF's VFs take routing ids
/// `PF + First VF Offset + (n − 1) · VF Stride` for VF n (1-based).
pub mod sriov {
    /// SR-IOV Capabilities (32 bits): VF Migration Capable (bit 0), ARI Capable Hierarchy
    /// Preserved (bit 1), VF Migration Interrupt Message Number (bits 31:21).
    pub const CAPABILITIES: u16 = 0x04;
    /// SR-IOV Control (16 bits).
    pub const CONTROL: u16 = 0x08;
    /// SR-IOV Status (16 bits): VF Migration Status (bit 0, RW1C).
    pub const STATUS: u16 = 0x0a;
    /// InitialVFs (16 bits): VFs initially associated with the PF.
    pub const INITIAL_VFS: u16 = 0x0c;
    /// TotalVFs (16 bits): the most VFs the PF can have.
    pub const TOTAL_VFS: u16 = 0x0e;
    /// NumVFs (16 bits): VFs software makes visible when it sets VF Enable.
    pub const NUM_VFS: u16 = 0x10;
    /// Function Dependency Link (8 bits): the PF this one depends on (its own number when
    /// independent).
    pub const FUNCTION_DEPENDENCY_LINK: u16 = 0x12;
    /// First VF Offset (16 bits): routing id of VF 1 minus the PF's.
    pub const FIRST_VF_OFFSET: u16 = 0x14;
    /// VF Stride (16 bits): routing id distance between consecutive VFs.
    pub const VF_STRIDE: u16 = 0x16;
    /// VF Device ID (16 bits): the device id VFs report (their vendor id is the PF's).
    pub const VF_DEVICE_ID: u16 = 0x1a;
    /// Supported Page Sizes (32 bits): bit n set means pages of 2^(n + 12) bytes.
    pub const SUPPORTED_PAGE_SIZES: u16 = 0x1c;
    /// System Page Size (32 bits): the one page size software chose, same encoding; VF BARs
    /// are aligned to it.
    pub const SYSTEM_PAGE_SIZE: u16 = 0x20;
    /// VF BAR 0; VF BAR n is at `VF_BAR0 + 4 n` (through 0x3b). Each holds the base of VF 1's
    /// region; VF n's follows at `(n − 1)` times the region's size.
    pub const VF_BAR0: u16 = 0x24;
    /// VF Migration State Array Offset (32 bits): BIR in bits 2:0, offset above.
    pub const VF_MIGRATION_STATE_ARRAY_OFFSET: u16 = 0x3c;
    /// Length of the capability.
    pub const LENGTH: u16 = 0x40;

    /// SR-IOV Control: VF Enable — the VFs exist (NumVFs of them).
    pub const VF_ENABLE: u16 = 1 << 0;
    /// SR-IOV Control: VF Migration Enable.
    pub const VF_MIGRATION_ENABLE: u16 = 1 << 1;
    /// SR-IOV Control: VF Migration Interrupt Enable.
    pub const VF_MIGRATION_INTERRUPT_ENABLE: u16 = 1 << 2;
    /// SR-IOV Control: VF MSE — the VFs decode their memory (the VFs' Memory Space Enable).
    pub const VF_MSE: u16 = 1 << 3;
    /// SR-IOV Control: ARI Capable Hierarchy — the PF may place VFs at function numbers
    /// above 7.
    pub const ARI_CAPABLE_HIERARCHY: u16 = 1 << 4;

    /// Page-size bit of 4 KiB pages (bit 0), in Supported Page Sizes and System Page Size.
    pub const PAGE_4K: u32 = 1 << 0;
    /// Page-size bit n stands for `1 << (n + PAGE_SHIFT)` bytes.
    pub const PAGE_SHIFT: u32 = 12;
}

/// PCI Express capability registers, as offsets from the capability (Base Specification
/// §7.5.3).
pub mod pcie {
    /// PCI Express Capabilities register (16 bits): version, device/port type.
    pub const FLAGS: u16 = 0x02;
    /// Device Capabilities (32 bits).
    pub const DEVICE_CAPABILITIES: u16 = 0x04;
    /// Device Control (16 bits): error reporting, relaxed ordering, MPS, no snoop, MRRS.
    pub const DEVICE_CONTROL: u16 = 0x08;
    /// Device Status (16 bits): error detected bits (RW1C).
    pub const DEVICE_STATUS: u16 = 0x0a;
    /// Link Capabilities (32 bits).
    pub const LINK_CAPABILITIES: u16 = 0x0c;
    /// Link Control (16 bits).
    pub const LINK_CONTROL: u16 = 0x10;
    /// Link Status (16 bits).
    pub const LINK_STATUS: u16 = 0x12;
    /// Device Control 2 (16 bits): completion timeout.
    pub const DEVICE_CONTROL_2: u16 = 0x28;
    /// Length of a version-2 capability of an endpoint.
    pub const LENGTH: u16 = 0x3c;
}

/// MSI capability registers, as offsets from the capability (PCI Local Bus 3.0 §6.8.1).
pub mod msi {
    /// Message Control (16 bits).
    pub const CONTROL: u16 = 0x02;
    /// Message Address (low 32 bits; bits 1:0 are zero).
    pub const ADDRESS: u16 = 0x04;
    /// Message Control: MSI is enabled.
    pub const ENABLE: u16 = 1 << 0;
    /// Message Control: Multiple Message Capable, log2 of the vectors (bits 3:1).
    pub const MULTIPLE_CAPABLE_SHIFT: u16 = 1;
    /// Message Control: Multiple Message Enable, log2 of the vectors granted (bits 6:4).
    pub const MULTIPLE_ENABLE: u16 = 0b111 << 4;
    /// Message Control: the function can send 64-bit addresses.
    pub const ADDRESS_64: u16 = 1 << 7;
    /// Message Control: the function has per-vector mask bits.
    pub const PER_VECTOR_MASK: u16 = 1 << 8;
}

/// Power Management capability registers (PCI Bus Power Management Interface 1.2).
pub mod pm {
    /// Power Management Capabilities (16 bits).
    pub const CAPABILITIES: u16 = 0x02;
    /// Power Management Control/Status (16 bits).
    pub const CONTROL_STATUS: u16 = 0x04;
    /// PMC: version 3 of the interface (1.2).
    pub const VERSION_1_2: u16 = 0b011;
    /// PMCSR: PowerState, D0 to D3hot (bits 1:0).
    pub const POWER_STATE: u16 = 0b11;
    /// PMCSR: No_Soft_Reset (a D3hot → D0 transition keeps the function's state).
    pub const NO_SOFT_RESET: u16 = 1 << 3;
    /// PMCSR: PME_En.
    pub const PME_ENABLE: u16 = 1 << 8;
    /// PMCSR: PME_Status (RW1C).
    pub const PME_STATUS: u16 = 1 << 15;
    /// Length of the capability.
    pub const LENGTH: u16 = 8;
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
    /// Message control: table size − 1 (bits 10:0).
    pub const TABLE_SIZE: u16 = 0x7ff;
    /// Table and PBA registers: the BAR indicator (bits 2:0).
    pub const BIR: u32 = 0b111;
    /// Length of the capability.
    pub const LENGTH: u16 = 12;
    /// Bytes per table entry: address low, address high, data, vector control.
    pub const ENTRY_SIZE: u64 = 16;
    /// Vector control: this vector is masked.
    pub const VECTOR_MASKED: u32 = 1;
}
