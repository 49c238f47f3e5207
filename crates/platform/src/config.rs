//! Configuration space: how a device function answers configuration reads and writes.
//!
//! Configuration requests are routed by the function's bus/device/function, not by address,
//! so they are a separate path from BAR accesses: the host OS model uses them to discover a
//! function, to turn on memory decoding and bus mastering, and to enable MSI-X.

/// How a device function answers configuration requests (4 KiB of PCIe extended space).
///
/// Like [`crate::BarHandler`], a handler runs inside the engine and must not wait. Reads of
/// offsets the function does not implement return zeroes; writes to read-only bits are
/// ignored, as on hardware.
pub trait ConfigHandler {
    /// A configuration read of `buf.len()` bytes at `offset`.
    fn config_read(&self, offset: u16, buf: &mut [u8]);

    /// A configuration write of `data` at `offset`.
    fn config_write(&self, offset: u16, data: &[u8]);
}
