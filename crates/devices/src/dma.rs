//! The DMA test device (placeholder constants; the model follows).

/// PCI vendor id of the test device.
pub const VENDOR_ID: u16 = 0x1de5;
/// PCI device id of the test device.
pub const DEVICE_ID: u16 = 0x0d3a;
/// Size of the register BAR.
pub const REGISTER_BAR_SIZE: u64 = 64 << 10;
