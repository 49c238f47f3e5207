//! Driver for the DMA test device: program a copy, ring the doorbell, poll the completion
//! word in host memory.

use smartio_devices::dma::{flags, reg, COMPLETION_ERROR, DEVICE_MAGIC};
use smartio_platform::{activity, AccessError, BusAddr, Clock, MemoryWatch, PhysAddr, Port};
use std::cell::Cell;
use thiserror::Error;

/// Errors of the DMA test driver.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DriverError {
    /// A register access failed.
    #[error("register access failed: {0}")]
    Access(#[from] AccessError),
    /// The ID register does not hold the test device's magic.
    #[error("not a DMA test device: ID register reads {0:#x}")]
    NotThisDevice(u64),
    /// The device reported the copy as failed.
    #[error("copy {sequence} failed on the device")]
    CopyFailed {
        /// Sequence number of the copy.
        sequence: u64,
    },
}

/// One end of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A bus address as the device sees it (host memory, another device's BAR).
    Bus(BusAddr),
    /// An offset into the device's own memory (BAR2).
    DeviceMemory(u64),
}

/// A bound DMA test device.
#[derive(Debug)]
pub struct DmaTestDriver<P> {
    cpu: P,
    registers: BusAddr,
    completion_cpu: PhysAddr,
    completion_bus: BusAddr,
    sequence: Cell<u64>,
}

impl<P: Port + Clock + MemoryWatch> DmaTestDriver<P> {
    /// Binds to the device whose register BAR is at `registers` (as the CPU sees it). The
    /// completion word lives in host memory at `completion_cpu`, which the device reaches at
    /// `completion_bus`.
    pub async fn probe(
        cpu: P,
        registers: BusAddr,
        completion_cpu: PhysAddr,
        completion_bus: BusAddr,
    ) -> Result<Self, DriverError> {
        let mut id = [0u8; 8];
        cpu.read(registers.offset(reg::ID), &mut id).await?;
        let id = u64::from_le_bytes(id);
        if id != DEVICE_MAGIC {
            return Err(DriverError::NotThisDevice(id));
        }
        cpu.write(BusAddr(completion_cpu.get()), &0u64.to_le_bytes())
            .await?;
        Ok(Self {
            cpu,
            registers,
            completion_cpu,
            completion_bus,
            sequence: Cell::new(0),
        })
    }

    /// Copies `len` bytes and waits for the device to report completion.
    pub async fn copy(&self, src: Location, dst: Location, len: u64) -> Result<(), DriverError> {
        let sequence = self.sequence.get() + 1;
        self.sequence.set(sequence);
        let (src_addr, src_flag) = split(src, flags::SRC_LOCAL);
        let (dst_addr, dst_flag) = split(dst, flags::DST_LOCAL);
        let mut descriptor = Vec::with_capacity(40);
        for value in [
            src_addr,
            dst_addr,
            len,
            src_flag | dst_flag,
            self.completion_bus.get(),
        ] {
            descriptor.extend_from_slice(&value.to_le_bytes());
        }
        // SRC..COMPLETION_ADDR are consecutive: one write-combined store, then the doorbell.
        activity::doing("DMA test driver: write the copy descriptor");
        self.cpu
            .write(self.registers.offset(reg::SRC), &descriptor)
            .await?;
        activity::doing("DMA test driver: ring the doorbell");
        self.cpu
            .write(
                self.registers.offset(reg::DOORBELL),
                &sequence.to_le_bytes(),
            )
            .await?;
        loop {
            let mut word = [0u8; 8];
            activity::doing("DMA test driver: read the completion word");
            self.cpu
                .read(BusAddr(self.completion_cpu.get()), &mut word)
                .await?;
            let word = u64::from_le_bytes(word);
            if word == sequence {
                return Ok(());
            }
            if word == sequence | COMPLETION_ERROR {
                return Err(DriverError::CopyFailed { sequence });
            }
            self.cpu.written(self.completion_cpu, 8).await;
        }
    }
}

fn split(location: Location, local_flag: u64) -> (u64, u64) {
    match location {
        Location::Bus(addr) => (addr.get(), 0),
        Location::DeviceMemory(offset) => (offset, local_flag),
    }
}
