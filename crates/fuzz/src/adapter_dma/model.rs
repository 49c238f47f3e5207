//! A reference model of the adapter DMA engine's registers and queue, written from the
//! interface's description (`devices::ntb_dma::spec`), not from the model's code: what a
//! register access returns or refuses, what it leaves in ERROR and STATE, and — given where
//! each address leads — how every posted descriptor must end and what the done word says.

use smartio_devices::ntb_dma::spec::{
    control, done, reg, DescriptorStatus, QueueState, RegisterError, BLOCK, BLOCK_BYTES,
    DESCRIPTOR_BYTES, MAGIC, MAX_RING_ENTRIES, MAX_TRANSFER_BYTES,
};
use smartio_platform::CompleterError;

/// Descriptors the engine fetches with one read.
pub const FETCH: u64 = 16;

/// The registers as software sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    pub ring_base: u64,
    pub entries: u64,
    pub done_addr: u64,
    pub state: QueueState,
    pub head: u64,
    pub tail: u64,
    pub error: RegisterError,
    /// Reads in flight the engine takes (CAPS).
    pub reads: u64,
}

impl Regs {
    pub fn new(reads: u64) -> Self {
        Regs {
            ring_base: 0,
            entries: 0,
            done_addr: 0,
            state: QueueState::Disabled,
            head: 0,
            tail: 0,
            error: RegisterError::None,
            reads,
        }
    }

    /// The register offset of an access of `len` bytes at BAR0 offset `offset`, or how it is
    /// refused: outside the block, then a width or alignment not of whole registers.
    pub fn offset(offset: u64, len: usize) -> Result<u64, CompleterError> {
        let inside = match offset.checked_sub(BLOCK) {
            Some(o) if o.checked_add(len as u64).is_some_and(|e| e <= BLOCK_BYTES) => o,
            _ => return Err(CompleterError::OutOfRange),
        };
        if len == 0 || !len.is_multiple_of(8) || !inside.is_multiple_of(8) {
            return Err(CompleterError::BadWidth(len));
        }
        Ok(inside)
    }

    /// What a load of register `r` returns.
    pub fn load(&self, r: u64) -> u64 {
        match r {
            reg::ID => MAGIC,
            reg::CAPS => self.reads | (MAX_RING_ENTRIES << 32),
            reg::RING_BASE => self.ring_base,
            reg::RING_ENTRIES => self.entries,
            reg::DONE_ADDR => self.done_addr,
            reg::CONTROL => u64::from(self.state != QueueState::Disabled) * control::ENABLE,
            reg::TAIL => self.tail,
            reg::HEAD => self.head,
            reg::STATE => self.state.code(),
            _ => self.error.code(),
        }
    }

    /// A store of `value` to register `r` while the engine is not busy.
    pub fn store(&mut self, r: u64, value: u64) -> Result<(), CompleterError> {
        match r {
            reg::ID | reg::CAPS | reg::HEAD | reg::STATE => return Err(CompleterError::ReadOnly),
            reg::RING_BASE | reg::RING_ENTRIES | reg::DONE_ADDR => {
                if self.state != QueueState::Disabled {
                    self.error = RegisterError::Busy;
                } else if r == reg::RING_BASE {
                    self.ring_base = value;
                } else if r == reg::RING_ENTRIES {
                    self.entries = value;
                } else {
                    self.done_addr = value;
                }
            }
            reg::CONTROL if value & !control::ALL != 0 => {
                self.error = RegisterError::UnknownControl;
            }
            reg::CONTROL => {
                let enable = value & control::ENABLE != 0;
                match (self.state, enable) {
                    (QueueState::Disabled, true) => {
                        if self.entries == 0 || self.entries > MAX_RING_ENTRIES {
                            self.error = RegisterError::RingSize;
                        } else if !self.ring_base.is_multiple_of(DESCRIPTOR_BYTES) {
                            self.error = RegisterError::RingMisaligned;
                        } else if !self.done_addr.is_multiple_of(8) {
                            self.error = RegisterError::DoneMisaligned;
                        } else {
                            self.state = QueueState::Idle;
                            self.head = 0;
                            self.tail = 0;
                        }
                    }
                    (QueueState::Busy, false) => self.error = RegisterError::Busy,
                    (_, false) => self.state = QueueState::Disabled,
                    (_, true) => {}
                }
            }
            reg::TAIL => {
                if !matches!(self.state, QueueState::Idle | QueueState::Busy) {
                    self.error = RegisterError::NotRunning;
                } else if value < self.tail || value - self.head > self.entries {
                    self.error = RegisterError::TailOutOfRange;
                } else {
                    self.tail = value;
                }
            }
            _ => self.error = RegisterError::None,
        }
        Ok(())
    }
}

/// What the model knows of one descriptor before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    /// Refused for its fields: this status.
    Refused(DescriptorStatus),
    /// Runs: bytes from `from` to `to`.
    Runs { from: u64, to: u64, len: u64 },
}

/// Checks a ring entry's fields as the interface describes them, in its order.
pub fn fields(entry: &[u8; 32]) -> Fields {
    let word = |o: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&entry[o..o + 8]);
        u64::from_le_bytes(w)
    };
    let (local, remote, len) = (word(0), word(8), word(16));
    let flags = u32::from_le_bytes([entry[24], entry[25], entry[26], entry[27]]);
    let refused = if flags > 1 {
        Some(DescriptorStatus::UnknownFlags)
    } else if len == 0 {
        Some(DescriptorStatus::ZeroLength)
    } else if len > MAX_TRANSFER_BYTES {
        Some(DescriptorStatus::TooLong)
    } else if local.checked_add(len).is_none() || remote.checked_add(len).is_none() {
        Some(DescriptorStatus::AddressOverflow)
    } else {
        None
    };
    if let Some(s) = refused {
        return Fields::Refused(s);
    }
    let (from, to) = if flags & 1 != 0 {
        (remote, local)
    } else {
        (local, remote)
    };
    Fields::Runs { from, to, len }
}

/// The done word a drain that completed through `head` writes.
pub fn done_word(head: u64, failed: bool, aborted: bool, halted: bool) -> u64 {
    let mut w = head & done::COUNT;
    if failed {
        w |= done::FAILED;
    }
    if aborted {
        w |= done::ABORTED;
    }
    if halted {
        w |= done::HALTED;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_refuses_accesses_outside_the_block_before_bad_widths() {
        assert_eq!(Regs::offset(BLOCK - 8, 8), Err(CompleterError::OutOfRange));
        assert_eq!(
            Regs::offset(BLOCK + 0x50, 8),
            Err(CompleterError::OutOfRange)
        );
        assert_eq!(Regs::offset(BLOCK + 4, 4), Err(CompleterError::BadWidth(4)));
        assert_eq!(Regs::offset(BLOCK, 0), Err(CompleterError::BadWidth(0)));
        assert_eq!(Regs::offset(u64::MAX, 8), Err(CompleterError::OutOfRange));
        assert_eq!(Regs::offset(BLOCK + 0x48, 8), Ok(0x48));
    }

    #[test]
    fn enabling_checks_the_ring_and_a_doorbell_moves_tail_within_a_ring() {
        let mut r = Regs::new(64);
        r.store(reg::CONTROL, control::ENABLE).expect("taken");
        assert_eq!(r.error, RegisterError::RingSize);
        r.store(reg::RING_ENTRIES, 4).expect("taken");
        r.store(reg::CONTROL, control::ENABLE).expect("taken");
        assert_eq!(r.state, QueueState::Idle);
        r.store(reg::TAIL, 5).expect("taken");
        assert_eq!((r.tail, r.error), (0, RegisterError::TailOutOfRange));
        r.store(reg::TAIL, 4).expect("taken");
        assert_eq!(r.tail, 4);
        assert_eq!(r.store(reg::HEAD, 0), Err(CompleterError::ReadOnly));
    }
}
