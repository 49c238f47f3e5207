//! The NTB adapter's own DMA engine (Paper I §6.1, thesis lines 3106-3130; seed 002: "we used
//! Dolphin's SISCI API for programming the DMA engine on the NTB itself"). It is a function
//! of the adapter: its requests carry the adapter's requester id, start inside the adapter's
//! chip (into the adapter's window they go straight over the NTB; to the host's RAM up the
//! adapter's link), and its registers are a block of the adapter's BAR0 ([`spec`]).
//!
//! Software posts transfers as descriptors in a ring in host memory and rings TAIL; the
//! engine fetches them by DMA, decodes and validates each (a descriptor it cannot run is
//! completed with the status that says why), moves the bytes, writes the status back into
//! the descriptor and, when it has caught up with TAIL, writes the done word. Bytes move as
//! a real engine moves them: read requests of at most the read request size in force (MRRS)
//! with at most [`AdapterDmaConfig::max_outstanding_reads`] in flight (Paper I: 64), each
//! piece written on to the destination as its completions arrive, and a last read of the
//! destination's final bytes whose completion proves the writes landed (PCIe orders it
//! behind them) before the descriptor is reported done. How fast that goes is the timed
//! engine's business: no rate is set here.
//!
//! Bad use of the registers never panics: a refused write leaves its [`RegisterError`] in
//! ERROR; a bad descriptor gets its [`DescriptorStatus`]; an unreachable ring halts the
//! queue. Files: [`spec`] the interface, `engine` the queue, `mover` the bytes.

mod engine;
mod mover;
pub mod spec;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use smartio_platform::{BarHandler, CompleterError, Notify, SimDuration};
use spec::{control, reg, QueueState, RegisterError, BLOCK, BLOCK_BYTES, DESCRIPTOR_BYTES};
use std::cell::{Cell, RefCell};

pub use spec::{Descriptor, DescriptorStatus, Direction};

/// What the engine is built with: the calibration's figures for the adapter and the read
/// request size the cluster runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterDmaConfig {
    /// Read requests the engine keeps in flight (at least 1).
    pub max_outstanding_reads: u32,
    /// Bytes per read request: the Max_Read_Request_Size in force (a power of two).
    pub read_request_bytes: u64,
    /// Start-up after a doorbell, before the descriptors are fetched.
    pub setup: SimDuration,
}

/// What the engine has done, for tests and the fuzzer's invariants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdapterDmaCounters {
    /// Descriptors completed (any status).
    pub completed: u64,
    /// Descriptors completed [`DescriptorStatus::Done`].
    pub done: u64,
    /// Bytes of descriptors completed done.
    pub bytes_done: u64,
    /// Read requests issued (descriptor fetches, data, and the reads that prove writes
    /// landed).
    pub reads: u64,
    /// Most read requests in flight at once.
    pub peak_reads_in_flight: u32,
}

/// The register file and the queue's bookkeeping.
#[derive(Debug, Clone, Copy)]
struct Registers {
    ring_base: u64,
    ring_entries: u64,
    done_addr: u64,
    tail: u64,
    head: u64,
    state: QueueState,
    error: RegisterError,
    abort: bool,
}

/// An NTB adapter's DMA engine.
#[derive(Debug)]
pub struct AdapterDma {
    config: AdapterDmaConfig,
    regs: RefCell<Registers>,
    doorbell: Notify,
    in_flight: Cell<u32>,
    counters: Cell<AdapterDmaCounters>,
}

impl AdapterDma {
    /// An engine, disabled. A `max_outstanding_reads` of 0 is taken as 1 and a read request
    /// size that is not a power of two from 64 B to 4 KiB as the nearest one (the calibration
    /// and the scenario check both before they get here).
    pub fn new(config: AdapterDmaConfig) -> Self {
        let config = AdapterDmaConfig {
            max_outstanding_reads: config.max_outstanding_reads.max(1),
            read_request_bytes: config
                .read_request_bytes
                .clamp(64, 4096)
                .next_power_of_two()
                .min(4096),
            ..config
        };
        Self {
            config,
            regs: RefCell::new(Registers {
                ring_base: 0,
                ring_entries: 0,
                done_addr: 0,
                tail: 0,
                head: 0,
                state: QueueState::Disabled,
                error: RegisterError::None,
                abort: false,
            }),
            doorbell: Notify::new(),
            in_flight: Cell::new(0),
            counters: Cell::new(AdapterDmaCounters::default()),
        }
    }

    /// What it is built with.
    pub fn config(&self) -> AdapterDmaConfig {
        self.config
    }

    /// The queue's state.
    pub fn state(&self) -> QueueState {
        self.regs.borrow().state
    }

    /// ERROR.
    pub fn error(&self) -> RegisterError {
        self.regs.borrow().error
    }

    /// HEAD and TAIL.
    pub fn head_and_tail(&self) -> (u64, u64) {
        let r = self.regs.borrow();
        (r.head, r.tail)
    }

    /// What it has done so far.
    pub fn counters(&self) -> AdapterDmaCounters {
        self.counters.get()
    }

    /// Read requests in flight now.
    pub fn reads_in_flight(&self) -> u32 {
        self.in_flight.get()
    }

    fn count(&self, f: impl FnOnce(&mut AdapterDmaCounters)) {
        let mut c = self.counters.get();
        f(&mut c);
        self.counters.set(c);
    }

    /// A read request leaves.
    fn read_issued(&self) {
        let n = self.in_flight.get() + 1;
        self.in_flight.set(n);
        self.count(|c| {
            c.reads += 1;
            c.peak_reads_in_flight = c.peak_reads_in_flight.max(n);
        });
    }

    /// A read request's completions have all come back (or it failed).
    fn read_returned(&self) {
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
    }

    /// CAPS.
    fn caps(&self) -> u64 {
        u64::from(self.config.max_outstanding_reads) | (spec::MAX_RING_ENTRIES << 32)
    }

    fn read_register(&self, offset: u64) -> Option<u64> {
        let r = self.regs.borrow();
        Some(match offset {
            reg::ID => spec::MAGIC,
            reg::CAPS => self.caps(),
            reg::RING_BASE => r.ring_base,
            reg::RING_ENTRIES => r.ring_entries,
            reg::DONE_ADDR => r.done_addr,
            reg::CONTROL => {
                if r.state == QueueState::Disabled {
                    0
                } else {
                    control::ENABLE
                }
            }
            reg::TAIL => r.tail,
            reg::HEAD => r.head,
            reg::STATE => r.state.code(),
            reg::ERROR => r.error.code(),
            _ => return None,
        })
    }

    /// One register store; `Err` for what the completer refuses (read-only, no register),
    /// else the write is taken and what software did wrong goes to ERROR.
    fn write_register(&self, offset: u64, value: u64) -> Result<(), CompleterError> {
        let mut r = self.regs.borrow_mut();
        let refuse = |r: &mut Registers, e: RegisterError| r.error = e;
        match offset {
            reg::ID | reg::CAPS | reg::HEAD | reg::STATE => return Err(CompleterError::ReadOnly),
            reg::RING_BASE | reg::RING_ENTRIES | reg::DONE_ADDR => {
                if r.state != QueueState::Disabled {
                    refuse(&mut r, RegisterError::Busy);
                } else if offset == reg::RING_BASE {
                    r.ring_base = value;
                } else if offset == reg::RING_ENTRIES {
                    r.ring_entries = value;
                } else {
                    r.done_addr = value;
                }
            }
            reg::CONTROL => {
                if value & !control::ALL != 0 {
                    refuse(&mut r, RegisterError::UnknownControl);
                    return Ok(());
                }
                let enable = value & control::ENABLE != 0;
                match (r.state, enable) {
                    (QueueState::Disabled, true) => {
                        let problem =
                            if r.ring_entries == 0 || r.ring_entries > spec::MAX_RING_ENTRIES {
                                Some(RegisterError::RingSize)
                            } else if !r.ring_base.is_multiple_of(DESCRIPTOR_BYTES) {
                                Some(RegisterError::RingMisaligned)
                            } else if !r.done_addr.is_multiple_of(8) {
                                Some(RegisterError::DoneMisaligned)
                            } else {
                                None
                            };
                        match problem {
                            Some(e) => refuse(&mut r, e),
                            None => {
                                r.state = QueueState::Idle;
                                (r.head, r.tail, r.abort) = (0, 0, false);
                            }
                        }
                    }
                    (QueueState::Busy, false) => refuse(&mut r, RegisterError::Busy),
                    (_, false) => r.state = QueueState::Disabled,
                    (_, true) => {}
                }
                if value & control::ABORT != 0 && r.state == QueueState::Busy {
                    r.abort = true;
                    drop(r);
                    self.doorbell.notify();
                }
            }
            reg::TAIL => {
                if !matches!(r.state, QueueState::Idle | QueueState::Busy) {
                    refuse(&mut r, RegisterError::NotRunning);
                } else if value < r.tail || value - r.head > r.ring_entries {
                    refuse(&mut r, RegisterError::TailOutOfRange);
                } else {
                    r.tail = value;
                    drop(r);
                    self.doorbell.notify();
                }
            }
            reg::ERROR => r.error = RegisterError::None,
            _ => return Err(CompleterError::OutOfRange),
        }
        Ok(())
    }

    /// The register offset of a BAR access, if it is an aligned access inside the block.
    fn register_offset(bar: u8, offset: u64, len: usize) -> Result<u64, CompleterError> {
        if bar != spec::REGISTER_BAR {
            return Err(CompleterError::OutOfRange);
        }
        let inside = offset
            .checked_sub(BLOCK)
            .filter(|o| {
                o.checked_add(len as u64)
                    .is_some_and(|end| end <= BLOCK_BYTES)
            })
            .ok_or(CompleterError::OutOfRange)?;
        if len == 0 || !len.is_multiple_of(8) || !inside.is_multiple_of(8) {
            return Err(CompleterError::BadWidth(len));
        }
        Ok(inside)
    }
}

impl BarHandler for AdapterDma {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        let first = Self::register_offset(bar, offset, buf.len())?;
        for (i, word) in buf.chunks_exact_mut(8).enumerate() {
            let value = self
                .read_register(first + 8 * i as u64)
                .ok_or(CompleterError::OutOfRange)?;
            word.copy_from_slice(&value.to_le_bytes());
        }
        Ok(())
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        let first = Self::register_offset(bar, offset, data.len())?;
        for (i, word) in data.chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.write_register(first + 8 * i as u64, u64::from_le_bytes(w))?;
        }
        Ok(())
    }
}
