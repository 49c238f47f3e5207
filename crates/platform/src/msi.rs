//! Message-signalled interrupts as a function sends them (PCI Local Bus Specification 3.0
//! §6.8): a posted write of a 32-bit data word to an address. MSI and MSI-X differ only in
//! where software programs the pair (the capability or the MSI-X table), not in the message.

use crate::addr::BusAddr;

/// Where every host's interrupt controller receives messages (x86's local APIC window): an
/// MSI is a write of its vector here; a function's legacy INTx assertion reaches the root
/// complex as the vector its host routed the function's interrupt line to (the IOAPIC's
/// redirection), modelled as the same write with the line as vector.
pub const INTERRUPT_CONTROLLER: u64 = 0xFEE0_0000;

/// Interrupt lines a host routes legacy INTx to (IOAPIC pins above the ISA ones); each is its
/// own vector, below the vectors handed to MSI-X.
pub const INTX_LINES: std::ops::Range<u8> = 16..255;

/// A message to send: write `data` (4 bytes, little-endian) to `address`.
///
/// The address is a [`BusAddr`]: the function issues the write as any other request, so the
/// host IOMMU (or an NTB window, for a lent function) translates it like DMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsiMessage {
    /// Where the write goes, as the function addresses it.
    pub address: BusAddr,
    /// What it carries.
    pub data: u32,
}

impl MsiMessage {
    /// The payload of the write.
    pub fn payload(&self) -> [u8; 4] {
        self.data.to_le_bytes()
    }
}
