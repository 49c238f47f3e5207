//! The DMA test device: a copy engine with registers in BAR0 and device memory in BAR2, like
//! the GPU copy engine of the papers' bandwidth tests (CUDA `bandwidthTest`).
//!
//! Registers (BAR0, 64-bit little-endian):
//!
//! | offset | name            | meaning                                                   |
//! |--------|-----------------|-----------------------------------------------------------|
//! | 0x00   | SRC             | source: a bus address, or a BAR2 offset (FLAGS.SRC_LOCAL) |
//! | 0x08   | DST             | destination, likewise (FLAGS.DST_LOCAL)                   |
//! | 0x10   | LEN             | bytes to copy                                             |
//! | 0x18   | FLAGS           | bit 0 SRC_LOCAL, bit 1 DST_LOCAL                          |
//! | 0x20   | COMPLETION_ADDR | bus address the device writes the completion word to      |
//! | 0x28   | DOORBELL        | write a sequence number to start a copy                   |
//! | 0x30   | STATUS          | 0 idle, 1 busy, 2 error (read-only)                       |
//! | 0x38   | ID              | `DEVICE_MAGIC` (read-only)                                |
//!
//! After the copy, the device writes the sequence number to COMPLETION_ADDR (with bit 63 set
//! if the copy failed). PCIe ordering makes the data visible before the completion word.

use smartio_platform::{
    BarHandler, BusAddr, Clock, CompleterError, Notify, Port, SimDuration, SparseMemory,
};
use std::cell::{Cell, RefCell};

/// PCI vendor id of the test device.
pub const VENDOR_ID: u16 = 0x1de5;
/// PCI device id of the test device.
pub const DEVICE_ID: u16 = 0x0d3a;
/// Size of the register BAR.
pub const REGISTER_BAR_SIZE: u64 = 64 << 10;
/// Value of the ID register.
pub const DEVICE_MAGIC: u64 = 0x534d_4152_5444_4d41;

/// Register offsets in BAR0.
pub mod reg {
    /// Source address.
    pub const SRC: u64 = 0x00;
    /// Destination address.
    pub const DST: u64 = 0x08;
    /// Length.
    pub const LEN: u64 = 0x10;
    /// Flags.
    pub const FLAGS: u64 = 0x18;
    /// Completion word address.
    pub const COMPLETION_ADDR: u64 = 0x20;
    /// Doorbell.
    pub const DOORBELL: u64 = 0x28;
    /// Status.
    pub const STATUS: u64 = 0x30;
    /// Identification.
    pub const ID: u64 = 0x38;
}

/// FLAGS bits.
pub mod flags {
    /// SRC is an offset into the device's own memory.
    pub const SRC_LOCAL: u64 = 1 << 0;
    /// DST is an offset into the device's own memory.
    pub const DST_LOCAL: u64 = 1 << 1;
}

/// STATUS values.
pub mod status {
    /// Idle.
    pub const IDLE: u64 = 0;
    /// A copy is running.
    pub const BUSY: u64 = 1;
    /// The last copy failed.
    pub const ERROR: u64 = 2;
}

/// Bit set in the completion word when the copy failed.
pub const COMPLETION_ERROR: u64 = 1 << 63;

const REGISTER_COUNT: usize = 8;
const REGISTER_BAR: u8 = 0;
const MEMORY_BAR: u8 = 2;

/// The DMA test device's state.
#[derive(Debug)]
pub struct DmaDevice {
    regs: RefCell<[u64; REGISTER_COUNT]>,
    memory: RefCell<SparseMemory>,
    memory_size: u64,
    doorbell: Notify,
    rung: Cell<Option<u64>>,
    setup: SimDuration,
}

impl DmaDevice {
    /// A device with `memory_size` bytes of device memory and a start-up cost per copy.
    pub fn new(memory_size: u64, setup: SimDuration) -> Self {
        Self {
            regs: RefCell::new([0; REGISTER_COUNT]),
            memory: RefCell::new(SparseMemory::new()),
            memory_size,
            doorbell: Notify::new(),
            rung: Cell::new(None),
            setup,
        }
    }

    fn reg(&self, offset: u64) -> u64 {
        self.regs.borrow()[(offset / 8) as usize]
    }

    /// The device's engine: waits for the doorbell, copies, reports. Runs forever.
    pub async fn run<P: Port + Clock>(&self, port: P) {
        loop {
            self.doorbell.notified().await;
            let Some(sequence) = self.rung.take() else {
                continue;
            };
            self.regs.borrow_mut()[(reg::STATUS / 8) as usize] = status::BUSY;
            port.sleep(self.setup).await;
            let ok = self.copy(&port).await.is_ok();
            self.regs.borrow_mut()[(reg::STATUS / 8) as usize] =
                if ok { status::IDLE } else { status::ERROR };
            let word = if ok {
                sequence
            } else {
                sequence | COMPLETION_ERROR
            };
            let completion = BusAddr(self.reg(reg::COMPLETION_ADDR));
            // A failed completion write has nowhere to be reported but the fabric's fault log.
            let _ = port.write(completion, &word.to_le_bytes()).await;
        }
    }

    async fn copy<P: Port>(&self, port: &P) -> Result<(), ()> {
        let (src, dst, len, fl) = (
            self.reg(reg::SRC),
            self.reg(reg::DST),
            self.reg(reg::LEN),
            self.reg(reg::FLAGS),
        );
        let local_ok = |off: u64| {
            off.checked_add(len)
                .is_some_and(|end| end <= self.memory_size)
        };
        let data = if fl & flags::SRC_LOCAL != 0 {
            if !local_ok(src) {
                return Err(());
            }
            let mut data = vec![0u8; len as usize];
            self.memory.borrow().read(src, &mut data);
            data
        } else {
            port.read_owned(BusAddr(src), len as usize)
                .await
                .map_err(|_| ())?
        };
        if fl & flags::DST_LOCAL != 0 {
            if !local_ok(dst) {
                return Err(());
            }
            self.memory.borrow_mut().write(dst, &data);
        } else {
            port.write_owned(BusAddr(dst), data).await.map_err(|_| ())?;
        }
        Ok(())
    }
}

impl BarHandler for DmaDevice {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        match bar {
            REGISTER_BAR => {
                if buf.len() != 8 || !offset.is_multiple_of(8) {
                    return Err(CompleterError::BadWidth(buf.len()));
                }
                let value = match offset {
                    reg::ID => DEVICE_MAGIC,
                    o if o < (REGISTER_COUNT as u64) * 8 => self.reg(o),
                    _ => return Err(CompleterError::OutOfRange),
                };
                buf.copy_from_slice(&value.to_le_bytes());
                Ok(())
            }
            MEMORY_BAR if offset + buf.len() as u64 <= self.memory_size => {
                self.memory.borrow().read(offset, buf);
                Ok(())
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        match bar {
            REGISTER_BAR => {
                if !data.len().is_multiple_of(8) || !offset.is_multiple_of(8) {
                    return Err(CompleterError::BadWidth(data.len()));
                }
                for (i, word) in data.chunks_exact(8).enumerate() {
                    let o = offset + 8 * i as u64;
                    let mut b = [0u8; 8];
                    b.copy_from_slice(word);
                    let value = u64::from_le_bytes(b);
                    match o {
                        reg::STATUS | reg::ID => return Err(CompleterError::ReadOnly),
                        reg::DOORBELL => {
                            self.rung.set(Some(value));
                            self.doorbell.notify();
                        }
                        o if o < (REGISTER_COUNT as u64) * 8 => {
                            self.regs.borrow_mut()[(o / 8) as usize] = value
                        }
                        _ => return Err(CompleterError::OutOfRange),
                    }
                }
                Ok(())
            }
            MEMORY_BAR if offset + data.len() as u64 <= self.memory_size => {
                self.memory.borrow_mut().write(offset, data);
                Ok(())
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_read_back_and_read_only_ones_refuse_writes() {
        let dev = DmaDevice::new(1 << 20, SimDuration::ZERO);
        dev.mmio_write(0, reg::LEN, &4096u64.to_le_bytes())
            .expect("LEN is writable");
        let mut buf = [0u8; 8];
        dev.mmio_read(0, reg::LEN, &mut buf).expect("readable");
        assert_eq!(u64::from_le_bytes(buf), 4096);
        dev.mmio_read(0, reg::ID, &mut buf).expect("readable");
        assert_eq!(u64::from_le_bytes(buf), DEVICE_MAGIC);
        assert_eq!(
            dev.mmio_write(0, reg::STATUS, &[0; 8]),
            Err(CompleterError::ReadOnly)
        );
        assert_eq!(
            dev.mmio_read(0, 0x1000, &mut buf),
            Err(CompleterError::OutOfRange)
        );
        assert_eq!(
            dev.mmio_read(0, reg::LEN, &mut [0u8; 4]),
            Err(CompleterError::BadWidth(4))
        );
    }

    #[test]
    fn device_memory_is_reachable_through_bar2_within_its_size() {
        let dev = DmaDevice::new(1 << 20, SimDuration::ZERO);
        dev.mmio_write(2, 100, b"hello").expect("in range");
        let mut buf = [0u8; 5];
        dev.mmio_read(2, 100, &mut buf).expect("in range");
        assert_eq!(&buf, b"hello");
        assert_eq!(
            dev.mmio_write(2, (1 << 20) - 2, b"abc"),
            Err(CompleterError::OutOfRange)
        );
    }
}
