//! Message-signalled interrupts as a function sends them (PCI Local Bus Specification 3.0
//! §6.8): a posted write of a 32-bit data word to an address. MSI and MSI-X differ only in
//! where software programs the pair (the capability or the MSI-X table), not in the message.

use crate::addr::BusAddr;

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
