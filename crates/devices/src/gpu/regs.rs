//! BAR0 (registers, channel blocks, MSI-X table and pending bits) and BAR1 (the aperture
//! onto device memory): how the GPU answers loads and stores (spec: [`super::spec::reg`],
//! [`super::spec::channel`]).
//!
//! Rules: registers take aligned 8-byte accesses only ([`CompleterError::BadWidth`]); the
//! MSI-X table and PBA take what the PCI specification allows (dword or qword). Global
//! registers and a channel's `GET`, `STATUS`, `ERROR`, `ERROR_INFO` refuse writes
//! ([`CompleterError::ReadOnly`]); `RESET` reads 0. Any other offset of BAR0, an access past
//! the aperture in BAR1, and every other BAR are [`CompleterError::OutOfRange`].

use super::spec::{self, channel, reg, GPU_MAGIC, MSIX_PBA, MSIX_TABLE};
use super::Gpu;
use smartio_platform::pci::msix;
use smartio_platform::{BarHandler, Clock, CompleterError};

/// Bytes of the MSI-X table (one entry per channel).
const MSIX_TABLE_SIZE: u64 = spec::CHANNELS as u64 * msix::ENTRY_SIZE;

/// Where a BAR0 offset lands.
enum Bar0 {
    /// The MSI-X table, at this offset into it.
    MsixTable(u64),
    /// The pending-bit array, at this offset into it.
    MsixPba(u64),
    /// A global register.
    Global(u64),
    /// Channel `c`'s register at this offset into its block.
    Channel(u16, u64),
    /// Nothing.
    Nothing,
}

fn locate(offset: u64) -> Bar0 {
    let channels_end = channel::base(spec::CHANNELS);
    if (MSIX_TABLE..MSIX_TABLE + MSIX_TABLE_SIZE).contains(&offset) {
        Bar0::MsixTable(offset - MSIX_TABLE)
    } else if (MSIX_PBA..MSIX_PBA + 8).contains(&offset) {
        Bar0::MsixPba(offset - MSIX_PBA)
    } else if offset <= reg::CHANNELS {
        Bar0::Global(offset)
    } else if (channel::FIRST..channels_end).contains(&offset) {
        let rel = offset - channel::FIRST;
        // In range: fewer than CHANNELS blocks lie below `channels_end`.
        Bar0::Channel((rel / channel::STRIDE) as u16, rel % channel::STRIDE)
    } else {
        Bar0::Nothing
    }
}

/// A register access must be 8 bytes wide and 8-byte aligned.
fn check_register_width(offset: u64, len: usize) -> Result<(), CompleterError> {
    if len != 8 || !offset.is_multiple_of(8) {
        return Err(CompleterError::BadWidth(len));
    }
    Ok(())
}

impl<P: Clock> Gpu<P> {
    fn global(&self, offset: u64) -> Option<u64> {
        let t = &self.config.timing;
        Some(match offset {
            reg::ID => GPU_MAGIC,
            reg::MEMORY_SIZE => self.config.memory,
            reg::APERTURE_SIZE => self.config.aperture,
            reg::COPY_ENGINES => u64::from(t.copy_engines),
            reg::SM_COUNT => u64::from(t.sm_count),
            reg::CLOCK_KHZ => t.clock_khz,
            reg::TIMER => self.timer_ns(),
            reg::DMA_BITS => u64::from(t.dma_bits),
            reg::CHANNELS => u64::from(spec::CHANNELS),
            _ => return None,
        })
    }

    fn channel_register(&self, c: u16, offset: u64) -> Option<u64> {
        let r = self.channels.get(usize::from(c))?.regs.borrow();
        Some(match offset {
            channel::RING_BASE => r.ring_base,
            channel::RING_ENTRIES => r.ring_entries,
            channel::PUT => r.put,
            channel::GET => r.get,
            channel::STATUS => r.status,
            channel::ERROR => r.error,
            channel::ERROR_INFO => r.error_info,
            channel::NOTIFIER => r.notifier,
            channel::RESET => 0,
            _ => return None,
        })
    }

    fn write_channel(&self, c: u16, offset: u64, value: u64) -> Result<(), CompleterError> {
        let ch = self
            .channels
            .get(usize::from(c))
            .ok_or(CompleterError::OutOfRange)?;
        match offset {
            channel::RING_BASE => ch.regs.borrow_mut().ring_base = value,
            channel::RING_ENTRIES => ch.regs.borrow_mut().ring_entries = value,
            channel::NOTIFIER => ch.regs.borrow_mut().notifier = value,
            channel::PUT => ch.put(value),
            channel::RESET => ch.reset(),
            channel::GET | channel::STATUS | channel::ERROR | channel::ERROR_INFO => {
                return Err(CompleterError::ReadOnly)
            }
            _ => return Err(CompleterError::OutOfRange),
        }
        Ok(())
    }

    /// Checks that `len` bytes at `offset` lie in the aperture.
    fn in_aperture(&self, offset: u64, len: usize) -> Result<(), CompleterError> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.config.aperture => Ok(()),
            _ => Err(CompleterError::OutOfRange),
        }
    }
}

impl<P: Clock> BarHandler for Gpu<P> {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        match bar {
            spec::REGISTER_BAR => {
                let value = match locate(offset) {
                    Bar0::MsixTable(o) => return self.msix.read_table(o, buf),
                    Bar0::MsixPba(o) => return self.msix.read_pba(o, buf),
                    Bar0::Global(o) => {
                        check_register_width(offset, buf.len())?;
                        self.global(o)
                    }
                    Bar0::Channel(c, o) => {
                        check_register_width(offset, buf.len())?;
                        self.channel_register(c, o)
                    }
                    Bar0::Nothing => None,
                };
                let value = value.ok_or(CompleterError::OutOfRange)?;
                buf.copy_from_slice(&value.to_le_bytes());
                Ok(())
            }
            spec::APERTURE_BAR => {
                self.in_aperture(offset, buf.len())?;
                self.memory
                    .read(offset, buf)
                    .map_err(|_| CompleterError::OutOfRange)
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        match bar {
            spec::REGISTER_BAR => {
                let value = || {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(data);
                    u64::from_le_bytes(b)
                };
                match locate(offset) {
                    Bar0::MsixTable(o) => {
                        if self.msix.write_table(o, data)? {
                            self.wake.notify();
                        }
                        Ok(())
                    }
                    Bar0::MsixPba(_) => Err(CompleterError::ReadOnly),
                    Bar0::Global(o) => {
                        check_register_width(offset, data.len())?;
                        match self.global(o) {
                            Some(_) => Err(CompleterError::ReadOnly),
                            None => Err(CompleterError::OutOfRange),
                        }
                    }
                    Bar0::Channel(c, o) => {
                        check_register_width(offset, data.len())?;
                        self.write_channel(c, o, value())
                    }
                    Bar0::Nothing => Err(CompleterError::OutOfRange),
                }
            }
            spec::APERTURE_BAR => {
                self.in_aperture(offset, data.len())?;
                self.memory
                    .write(offset, data)
                    .map_err(|_| CompleterError::OutOfRange)
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::testing::{gpu, Stub};
    use smartio_platform::{SimTime, Spawner};
    use std::future::Future;
    use std::pin::pin;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    fn read(g: &Gpu<Stub>, offset: u64) -> Result<u64, CompleterError> {
        let mut b = [0u8; 8];
        g.mmio_read(spec::REGISTER_BAR, offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn write(g: &Gpu<Stub>, offset: u64, value: u64) -> Result<(), CompleterError> {
        g.mmio_write(spec::REGISTER_BAR, offset, &value.to_le_bytes())
    }

    #[test]
    fn global_registers_describe_the_gpu_and_refuse_writes() {
        let g = gpu(1 << 30);
        assert_eq!(read(&g, reg::ID), Ok(GPU_MAGIC));
        assert_eq!(read(&g, reg::MEMORY_SIZE), Ok(1 << 30));
        assert_eq!(read(&g, reg::APERTURE_SIZE), Ok(1 << 20));
        assert_eq!(read(&g, reg::COPY_ENGINES), Ok(2));
        assert_eq!(read(&g, reg::SM_COUNT), Ok(14));
        assert_eq!(read(&g, reg::CLOCK_KHZ), Ok(1_480_000));
        assert_eq!(read(&g, reg::DMA_BITS), Ok(47));
        assert_eq!(read(&g, reg::CHANNELS), Ok(u64::from(spec::CHANNELS)));
        for r in [reg::ID, reg::MEMORY_SIZE, reg::TIMER, reg::CHANNELS] {
            assert_eq!(write(&g, r, 1), Err(CompleterError::ReadOnly), "{r:#x}");
        }
        assert_eq!(read(&g, reg::ID), Ok(GPU_MAGIC));
    }

    #[test]
    fn the_timer_reads_virtual_time_in_nanoseconds_once_running() {
        let g = Rc::new(gpu(1 << 20));
        assert_eq!(read(&g, reg::TIMER), Ok(0));
        let port = Stub::default();
        port.now.set(SimTime(5_000_123));
        let mut run = pin!(g.clone().run(port.clone()));
        assert!(run
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        assert_eq!(read(&g, reg::TIMER), Ok(5_000));
        port.now.set(SimTime(7_000_000));
        assert_eq!(read(&g, reg::TIMER), Ok(7_000));
        port.spawn_task(Box::pin(async {}));
    }

    #[test]
    fn registers_take_aligned_8_byte_accesses_only() {
        let g = gpu(1 << 20);
        let mut four = [0u8; 4];
        assert_eq!(
            g.mmio_read(0, reg::ID, &mut four),
            Err(CompleterError::BadWidth(4))
        );
        let mut eight = [0u8; 8];
        assert_eq!(
            g.mmio_read(0, reg::ID + 4, &mut eight),
            Err(CompleterError::BadWidth(8))
        );
        let put = channel::base(0) + channel::PUT;
        assert_eq!(
            g.mmio_write(0, put, &[1, 0, 0, 0]),
            Err(CompleterError::BadWidth(4))
        );
        assert_eq!(read(&g, put), Ok(0), "the refused write did nothing");
    }

    #[test]
    fn channel_registers_keep_what_software_may_write_and_refuse_the_rest() {
        let g = gpu(1 << 20);
        let c = channel::base(3);
        write(&g, c + channel::RING_BASE, 0x1000).expect("RING_BASE");
        write(&g, c + channel::RING_ENTRIES, 64).expect("RING_ENTRIES");
        write(&g, c + channel::NOTIFIER, 0x2000).expect("NOTIFIER");
        assert_eq!(read(&g, c + channel::RING_BASE), Ok(0x1000));
        assert_eq!(read(&g, c + channel::RING_ENTRIES), Ok(64));
        assert_eq!(read(&g, c + channel::NOTIFIER), Ok(0x2000));
        for r in [
            channel::GET,
            channel::STATUS,
            channel::ERROR,
            channel::ERROR_INFO,
        ] {
            assert_eq!(write(&g, c + r, 5), Err(CompleterError::ReadOnly), "{r:#x}");
        }
        write(&g, c + channel::PUT, 2).expect("PUT");
        assert_eq!(read(&g, c + channel::PUT), Ok(2));
        assert_eq!(read(&g, c + channel::STATUS), Ok(spec::status::RUNNING));
        write(&g, c + channel::RESET, 1).expect("RESET");
        assert_eq!(read(&g, c + channel::PUT), Ok(0));
        assert_eq!(read(&g, c + channel::STATUS), Ok(spec::status::IDLE));
        assert_eq!(read(&g, c + channel::RESET), Ok(0));
        assert_eq!(
            read(&g, c + channel::RING_BASE),
            Ok(0x1000),
            "a reset keeps the ring set-up"
        );
    }

    #[test]
    fn offsets_without_a_register_are_out_of_range() {
        let g = gpu(1 << 20);
        for offset in [
            reg::CHANNELS + 8,
            0x0ff8,
            channel::base(0) + channel::RESET + 8,
            channel::base(spec::CHANNELS),
            MSIX_TABLE + MSIX_TABLE_SIZE,
            MSIX_PBA + 8,
            spec::BAR0_SIZE - 8,
            u64::MAX - 7,
        ] {
            assert_eq!(
                read(&g, offset),
                Err(CompleterError::OutOfRange),
                "{offset:#x}"
            );
            assert_eq!(
                write(&g, offset, 0),
                Err(CompleterError::OutOfRange),
                "{offset:#x}"
            );
        }
        let mut b = [0u8; 8];
        assert_eq!(g.mmio_read(3, 0, &mut b), Err(CompleterError::OutOfRange));
        assert_eq!(g.mmio_write(2, 0, &b), Err(CompleterError::OutOfRange));
    }

    #[test]
    fn the_msix_table_takes_dwords_and_the_pba_is_read_only() {
        let g = gpu(1 << 20);
        let entry = MSIX_TABLE + 2 * msix::ENTRY_SIZE;
        g.mmio_write(0, entry + 8, &77u32.to_le_bytes())
            .expect("data dword");
        let mut dword = [0u8; 4];
        g.mmio_read(0, entry + 8, &mut dword).expect("data dword");
        assert_eq!(u32::from_le_bytes(dword), 77);
        g.mmio_read(0, entry + 12, &mut dword).expect("control");
        assert_eq!(u32::from_le_bytes(dword), msix::VECTOR_MASKED);
        let mut qword = [0u8; 8];
        g.mmio_read(0, MSIX_PBA, &mut qword).expect("PBA");
        assert_eq!(qword, [0; 8]);
        assert_eq!(write(&g, MSIX_PBA, 1), Err(CompleterError::ReadOnly));
    }

    #[test]
    fn bar1_is_device_memory_up_to_the_aperture() {
        let g = gpu(1 << 22);
        g.mmio_write(1, 100, b"hello").expect("in the aperture");
        let mut buf = [0u8; 5];
        g.peek(100, &mut buf).expect("in memory");
        assert_eq!(&buf, b"hello");
        g.poke((1 << 20) - 2, b"ab").expect("in memory");
        g.mmio_read(1, (1 << 20) - 2, &mut buf[..2])
            .expect("the aperture's last bytes");
        assert_eq!(&buf[..2], b"ab");
        assert_eq!(
            g.mmio_read(1, (1 << 20) - 2, &mut buf),
            Err(CompleterError::OutOfRange),
            "crosses the aperture's end"
        );
        assert_eq!(
            g.mmio_write(1, 1 << 21, b"x"),
            Err(CompleterError::OutOfRange),
            "memory beyond the aperture is the GPU's own"
        );
        assert_eq!(
            g.mmio_write(1, u64::MAX - 1, b"abc"),
            Err(CompleterError::OutOfRange),
            "an offset that overflows is out of range, not a panic"
        );
        g.poke(3 << 20, b"z")
            .expect("beyond the aperture, inside memory");
        assert!(g.poke(4 << 20, b"z").is_err(), "outside memory");
    }

    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn bar1_writes_and_pokes_wake_every_waiter() {
        let g = gpu(1 << 20);
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiters: Vec<_> = (0..spec::MAX_THREADS)
            .map(|_| Box::pin(g.memory().word_written(64)))
            .collect();
        for w in &mut waiters {
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        g.mmio_write(1, 64, &1u64.to_le_bytes()).expect("BAR1");
        assert_eq!(counter.0.load(Ordering::SeqCst), spec::MAX_THREADS as usize);
        assert!(waiters
            .iter_mut()
            .all(|w| w.as_mut().poll(&mut cx).is_ready()));

        let mut next = pin!(g.memory().word_written(0));
        assert!(next.as_mut().poll(&mut cx).is_pending());
        g.poke(0, &[1]).expect("poke");
        assert!(next.as_mut().poll(&mut cx).is_ready(), "a poke wakes too");
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            spec::MAX_THREADS as usize + 1
        );
    }
}
