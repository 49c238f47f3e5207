//! A queue pair's state: its transmit and receive rings as the driver programmed them
//! (base, size, head, tail), the interrupt enables, the last ring error, and the receive
//! descriptors fetched ahead of use.
//!
//! Invariants, enforced when registers are written: an enabled ring has a base aligned to
//! [`RING_ALIGN`] and a power-of-two size in [`RING_ENTRIES`]; `head <= tail <= head + size`
//! (a doorbell that would break it is refused with [`RingError::BadTail`] and ignored).
//! Enabling or disabling a ring resets its indices to 0 and forgets fetched descriptors, and
//! starts a new setup of it (`Ring::setup`): work the NIC began on an earlier setup — a
//! buffer being read or written when the driver set the ring up again, even in place — is
//! not this ring's and is dropped, never sent or written back.

use super::spec::{queue, RingError, RxDescriptor, DESCRIPTOR_BYTES, RING_ALIGN, RING_ENTRIES};
use smartio_platform::{BusAddr, CompleterError, Notify};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// One ring as the NIC sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ring {
    /// Bus address of descriptor 0.
    pub base: u64,
    /// Descriptors (0 while disabled).
    pub size: u64,
    /// Whether the ring was validated and enabled.
    pub enabled: bool,
    /// Next descriptor the NIC consumes.
    pub head: u64,
    /// Descriptors below this index are the NIC's.
    pub tail: u64,
    /// How many times the ring was set up (its size written): tells a ring set up again in
    /// place from the one the NIC's work in hand came from.
    pub setup: u64,
}

impl Ring {
    /// Where descriptor `index` lives.
    pub fn descriptor(&self, index: u64) -> BusAddr {
        BusAddr(self.base + (index % self.size.max(1)) * DESCRIPTOR_BYTES)
    }

    /// Descriptors the NIC may consume.
    pub fn ready(&self) -> u64 {
        if self.enabled {
            self.tail - self.head
        } else {
            0
        }
    }

    /// How many descriptors from `index` on can be read with one access: at most `max`, no
    /// further than `tail`, and not across the end of the ring.
    pub fn batch(&self, index: u64, max: u64) -> u64 {
        let to_end = self.size - index % self.size.max(1);
        self.tail.saturating_sub(index).min(max).min(to_end)
    }

    /// Validates base and size and enables the ring (size 0 disables it).
    fn set_size(&mut self, size: u64) -> Result<(), RingError> {
        *self = Ring {
            base: self.base,
            setup: self.setup.wrapping_add(1),
            ..Ring::default()
        };
        if size == 0 {
            return Ok(());
        }
        if !self.base.is_multiple_of(RING_ALIGN) {
            return Err(RingError::Misaligned);
        }
        if !size.is_power_of_two() || !RING_ENTRIES.contains(&size) {
            return Err(RingError::BadSize);
        }
        self.size = size;
        self.enabled = true;
        Ok(())
    }

    /// A doorbell: descriptors up to `tail` are ready.
    fn set_tail(&mut self, tail: u64) -> Result<(), RingError> {
        if !self.enabled {
            return Err(RingError::Disabled);
        }
        if tail < self.head || tail - self.head > self.size {
            return Err(RingError::BadTail);
        }
        self.tail = tail;
        Ok(())
    }
}

/// A queue pair of one function.
#[derive(Debug, Default)]
pub struct QueuePair {
    pub(crate) tx: RefCell<Ring>,
    pub(crate) rx: RefCell<Ring>,
    irq: Cell<u64>,
    error: Cell<u64>,
    /// Rung when the transmit tail moved.
    pub(crate) tx_doorbell: Notify,
    /// Receive descriptors fetched ahead: (index, descriptor), consecutive from the head.
    pub(crate) rx_fetched: RefCell<VecDeque<(u64, RxDescriptor)>>,
}

impl QueuePair {
    /// The interrupt enables.
    pub fn irq(&self) -> u64 {
        self.irq.get()
    }

    /// The last ring error.
    pub fn error(&self) -> Option<RingError> {
        RingError::from_code(self.error.get())
    }

    /// Records a ring error for the driver to read.
    pub(crate) fn fail(&self, e: RingError) {
        self.error.set(e.code());
    }

    /// A read of register `r` of the queue's block.
    pub(crate) fn read(&self, r: u64) -> Result<u64, CompleterError> {
        let (tx, rx) = (*self.tx.borrow(), *self.rx.borrow());
        Ok(match r {
            queue::TX_BASE => tx.base,
            queue::TX_SIZE => tx.size,
            queue::TX_TAIL => tx.tail,
            queue::TX_HEAD => tx.head,
            queue::RX_BASE => rx.base,
            queue::RX_SIZE => rx.size,
            queue::RX_TAIL => rx.tail,
            queue::RX_HEAD => rx.head,
            queue::IRQ => self.irq.get(),
            queue::ERROR => self.error.get(),
            _ => return Err(CompleterError::OutOfRange),
        })
    }

    /// A write of `value` to register `r` of the queue's block. Ring errors are recorded in
    /// `ERROR` (the write itself completes, as a posted write must).
    pub(crate) fn write(&self, r: u64, value: u64) -> Result<(), CompleterError> {
        let outcome = match r {
            queue::TX_BASE => {
                self.tx.borrow_mut().base = value;
                Ok(())
            }
            queue::RX_BASE => {
                self.rx.borrow_mut().base = value;
                Ok(())
            }
            queue::TX_SIZE => {
                let r = self.tx.borrow_mut().set_size(value);
                self.tx_doorbell.notify();
                r
            }
            queue::RX_SIZE => {
                self.rx_fetched.borrow_mut().clear();
                self.rx.borrow_mut().set_size(value)
            }
            queue::TX_TAIL => {
                let r = self.tx.borrow_mut().set_tail(value);
                if r.is_ok() {
                    self.tx_doorbell.notify();
                }
                r
            }
            queue::RX_TAIL => {
                let r = self.rx.borrow_mut().set_tail(value);
                if r.is_ok() {
                    // Descriptors the driver took back by lowering the tail are not the NIC's.
                    self.rx_fetched.borrow_mut().retain(|(i, _)| *i < value);
                }
                r
            }
            queue::IRQ => {
                self.irq.set(value);
                Ok(())
            }
            queue::TX_HEAD | queue::RX_HEAD | queue::ERROR => return Err(CompleterError::ReadOnly),
            _ => return Err(CompleterError::OutOfRange),
        };
        if let Err(e) = outcome {
            self.fail(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled(base: u64, size: u64) -> QueuePair {
        let q = QueuePair::default();
        q.write(queue::TX_BASE, base).expect("base");
        q.write(queue::TX_SIZE, size).expect("size");
        q
    }

    #[test]
    fn a_misaligned_ring_stays_disabled_with_its_error() {
        let q = enabled(0x1000 + 8, 64);
        assert!(!q.tx.borrow().enabled);
        assert_eq!(q.error(), Some(RingError::Misaligned));
        assert_eq!(q.read(queue::ERROR), Ok(RingError::Misaligned.code()));
        q.write(queue::TX_TAIL, 1).expect("posted");
        assert_eq!(q.error(), Some(RingError::Disabled));
    }

    #[test]
    fn ring_sizes_must_be_powers_of_two_in_range() {
        for size in [3, 4, 8192] {
            assert_eq!(
                enabled(0x1000, size).error(),
                Some(RingError::BadSize),
                "{size}"
            );
        }
        let q = enabled(0x1000, 8);
        assert_eq!((q.error(), q.tx.borrow().enabled), (None, true));
    }

    #[test]
    fn a_doorbell_past_the_ring_is_refused_and_ignored() {
        let q = enabled(0x1000, 8);
        q.write(queue::TX_TAIL, 9).expect("posted");
        assert_eq!(q.error(), Some(RingError::BadTail));
        assert_eq!(q.read(queue::TX_TAIL), Ok(0));
        q.write(queue::TX_TAIL, 8).expect("posted");
        assert_eq!(q.tx.borrow().ready(), 8);
    }

    #[test]
    fn head_and_error_are_read_only() {
        let q = QueuePair::default();
        for r in [queue::TX_HEAD, queue::RX_HEAD, queue::ERROR] {
            assert_eq!(q.write(r, 1), Err(CompleterError::ReadOnly));
        }
        assert_eq!(q.read(queue::END), Err(CompleterError::OutOfRange));
    }

    #[test]
    fn every_register_reads_back_what_the_queue_pair_holds() {
        let q = enabled(0x1000, 64);
        q.write(queue::RX_BASE, 0x8000).expect("base");
        q.write(queue::RX_SIZE, 16).expect("size");
        q.write(queue::TX_TAIL, 5).expect("posted");
        q.write(queue::RX_TAIL, 7).expect("posted");
        q.write(queue::IRQ, 3).expect("irq");
        q.tx.borrow_mut().head = 2;
        q.rx.borrow_mut().head = 4;
        let regs = [
            (queue::TX_BASE, 0x1000),
            (queue::TX_SIZE, 64),
            (queue::TX_TAIL, 5),
            (queue::TX_HEAD, 2),
            (queue::RX_BASE, 0x8000),
            (queue::RX_SIZE, 16),
            (queue::RX_TAIL, 7),
            (queue::RX_HEAD, 4),
            (queue::IRQ, 3),
            (queue::ERROR, 0),
        ];
        for (r, want) in regs {
            assert_eq!(q.read(r), Ok(want), "register {r:#x}");
        }
    }

    #[test]
    fn a_tail_may_come_down_to_the_head_and_no_further() {
        let q = enabled(0x1000, 64);
        q.write(queue::TX_TAIL, 6).expect("posted");
        q.tx.borrow_mut().head = 3;
        q.write(queue::TX_TAIL, 3).expect("taken back");
        assert_eq!((q.read(queue::TX_TAIL), q.error()), (Ok(3), None));
        q.write(queue::TX_TAIL, 2).expect("posted write");
        assert_eq!(q.read(queue::TX_TAIL), Ok(3), "refused");
        assert_eq!(q.error(), Some(RingError::BadTail));
    }

    #[test]
    fn batches_stop_at_the_tail_and_at_the_end_of_the_ring() {
        let ring = Ring {
            base: 0x1000,
            size: 8,
            enabled: true,
            head: 6,
            tail: 12,
            setup: 1,
        };
        assert_eq!(ring.batch(6, 16), 2, "wraps after index 7");
        assert_eq!(ring.batch(8, 16), 4, "up to the tail");
        assert_eq!(ring.batch(8, 3), 3);
        assert_eq!(ring.descriptor(9), BusAddr(0x1000 + 16));
    }
}
