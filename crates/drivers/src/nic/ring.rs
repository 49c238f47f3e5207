//! The driver's side of the NIC's rings: descriptor rings and their buffers in one coherent
//! DMA allocation per ring, the indices the driver owns, and a first-come-first-served lock
//! so that concurrent callers fill descriptors and ring doorbells in ring order.
//!
//! Layout of a ring's allocation: `entries` descriptors of 16 bytes, then `entries` buffers
//! of [`buffer_size`] bytes each. The allocation is page-aligned, so the ring base satisfies
//! the NIC's [`RING_ALIGN`](smartio_devices::nic::spec::RING_ALIGN).

use smartio_devices::nic::spec::{max_frame, DESCRIPTOR_BYTES};
use smartio_host::DmaBuffer;
use smartio_platform::{BusAddr, PhysAddr};
use std::cell::Cell;

/// Bytes per buffer for a port of `mtu`: the largest frame rounded up to 64 bytes.
pub fn buffer_size(mtu: usize) -> u64 {
    (max_frame(mtu) as u64).next_multiple_of(64)
}

/// One ring in memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingMemory {
    pub(crate) dma: DmaBuffer,
    pub(crate) entries: u64,
    pub(crate) buffer_size: u64,
}

impl RingMemory {
    /// Bytes a ring of `entries` with `buffer_size`-byte buffers needs.
    pub(crate) fn bytes(entries: u64, buffer_size: u64) -> u64 {
        entries * (DESCRIPTOR_BYTES + buffer_size)
    }

    fn slot(&self, index: u64) -> u64 {
        index % self.entries
    }

    /// Where the CPU reaches descriptor `index`.
    pub(crate) fn descriptor_cpu(&self, index: u64) -> PhysAddr {
        PhysAddr(self.dma.cpu.get() + self.slot(index) * DESCRIPTOR_BYTES)
    }

    /// Where the CPU reaches the buffer of descriptor `index`.
    pub(crate) fn buffer_cpu(&self, index: u64) -> PhysAddr {
        PhysAddr(self.buffer_offset(index) + self.dma.cpu.get())
    }

    /// Where the NIC reaches the buffer of descriptor `index`.
    pub(crate) fn buffer_bus(&self, index: u64) -> BusAddr {
        BusAddr(self.buffer_offset(index) + self.dma.bus.get())
    }

    fn buffer_offset(&self, index: u64) -> u64 {
        self.entries * DESCRIPTOR_BYTES + self.slot(index) * self.buffer_size
    }
}

/// A transmit queue's driver-side indices.
#[derive(Debug, Default)]
pub(crate) struct TxIndices {
    /// Next descriptor to fill.
    pub(crate) tail: Cell<u64>,
    /// Oldest descriptor not yet seen written back.
    pub(crate) clean: Cell<u64>,
}

/// The receive queue's driver-side indices.
#[derive(Debug, Default)]
pub(crate) struct RxIndices {
    /// Next descriptor to look at.
    pub(crate) next: Cell<u64>,
    /// The last `RX_TAIL` written.
    pub(crate) posted: Cell<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_hold_a_whole_frame_rounded_to_64_bytes() {
        assert_eq!(buffer_size(1500), 1536);
        assert_eq!(buffer_size(9000), 9024);
    }
}
