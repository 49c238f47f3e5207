//! What identifies a PCI function to the kernel before a driver holds it: its ids for driver
//! matching ([`PciId`]) and its BARs as this host's CPU reaches them ([`BarWindow`]).

use smartio_platform::BusAddr;

/// Identity of a function, for driver matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciId {
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// 24-bit class code.
    pub class: u32,
}

/// A BAR as this host's CPU reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarWindow {
    /// BAR index.
    pub index: u8,
    /// CPU-visible base address.
    pub base: BusAddr,
    /// Bytes.
    pub size: u64,
}
