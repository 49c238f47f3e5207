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
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Poll, Waker};

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

/// A first-come-first-served lock for async callers on one host (single-threaded).
#[derive(Debug, Default)]
pub(crate) struct FifoLock {
    held: Cell<bool>,
    waiters: RefCell<VecDeque<(u64, Option<Waker>)>>,
    tickets: Cell<u64>,
}

/// Holds a [`FifoLock`] until dropped.
pub(crate) struct Held<'a>(&'a FifoLock);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.held.set(false);
        if let Some((_, Some(w))) = self.0.waiters.borrow().front() {
            w.wake_by_ref();
        }
    }
}

impl FifoLock {
    /// Waits for the lock, after every caller that asked before (a caller asks when the
    /// returned future is first polled).
    pub(crate) async fn lock(&self) -> Held<'_> {
        let ticket = self.tickets.get();
        self.tickets.set(ticket + 1);
        self.waiters.borrow_mut().push_back((ticket, None));
        let mut queued = Queued(self, ticket);
        poll_fn(|cx| {
            let mut waiters = self.waiters.borrow_mut();
            let first = waiters.front().map(|(t, _)| *t) == Some(ticket);
            if first && !self.held.get() {
                waiters.pop_front();
                self.held.set(true);
                return Poll::Ready(());
            }
            if let Some(w) = waiters.iter_mut().find(|(t, _)| *t == ticket) {
                w.1 = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
        queued.1 = u64::MAX;
        Held(self)
    }
}

/// Removes a caller's place in the queue if it stops waiting (its future dropped).
struct Queued<'a>(&'a FifoLock, u64);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.1 == u64::MAX {
            return;
        }
        let mut waiters = self.0.waiters.borrow_mut();
        waiters.retain(|(t, _)| *t != self.1);
        if !self.0.held.get() {
            if let Some((_, Some(w))) = waiters.front() {
                w.wake_by_ref();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Wake};

    struct Nop;
    impl Wake for Nop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn buffers_hold_a_whole_frame_rounded_to_64_bytes() {
        assert_eq!(buffer_size(1500), 1536);
        assert_eq!(buffer_size(9000), 9024);
    }

    #[test]
    fn the_lock_is_granted_in_the_order_it_was_asked_for() {
        let lock = FifoLock::default();
        let waker = Waker::from(Arc::new(Nop));
        let mut cx = Context::from_waker(&waker);
        let mut a = pin!(lock.lock());
        let Poll::Ready(held) = a.as_mut().poll(&mut cx) else {
            panic!("free lock not granted");
        };
        let mut b = pin!(lock.lock());
        let mut c = pin!(lock.lock());
        // A caller asks when its future first runs: b, then c.
        assert!(b.as_mut().poll(&mut cx).is_pending());
        assert!(c.as_mut().poll(&mut cx).is_pending());
        drop(held);
        assert!(c.as_mut().poll(&mut cx).is_pending(), "c asked after b");
        assert!(b.as_mut().poll(&mut cx).is_ready());
    }
}
