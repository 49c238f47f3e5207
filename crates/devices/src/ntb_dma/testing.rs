//! A stand-in bus for the engine's unit tests: byte-exact memory behind a port whose reads
//! take a few polls to complete (so that reads pile up in flight, as on a real path), a count
//! of the reads in flight that the port keeps itself, addresses that refuse reads or writes,
//! and a clock that never waits. `block_on` runs one future to its end on it.

use smartio_platform::{AccessError, BusAddr, Clock, Port, SimDuration, SimTime, SparseMemory};
use std::cell::{Cell, RefCell};
use std::future::{poll_fn, ready, Future};
use std::ops::Range;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Memory and a port onto it.
#[derive(Debug, Default)]
pub(super) struct Bus {
    pub memory: RefCell<SparseMemory>,
    /// Reads refused with an Unsupported Request.
    pub unreadable: RefCell<Vec<Range<u64>>>,
    /// Writes refused with an Unsupported Request.
    pub unwritable: RefCell<Vec<Range<u64>>>,
    in_flight: Cell<u32>,
    /// Most reads in flight at once, as the bus saw them.
    pub peak_in_flight: Cell<u32>,
    /// Every read: address and length.
    pub reads: RefCell<Vec<(u64, u64)>>,
}

impl Bus {
    pub fn poke(&self, addr: u64, data: &[u8]) {
        self.memory.borrow_mut().write(addr, data);
    }

    pub fn peek(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.memory.borrow().read(addr, &mut b);
        b
    }

    pub fn peek_u64(&self, addr: u64) -> u64 {
        self.memory.borrow().read_u64(addr)
    }

    fn refused(list: &RefCell<Vec<Range<u64>>>, addr: u64, len: u64) -> bool {
        list.borrow()
            .iter()
            .any(|r| addr < r.end && addr.saturating_add(len) > r.start)
    }

    fn unsupported(addr: u64) -> AccessError {
        AccessError::UnsupportedRequest {
            host: "test bus".into(),
            addr: BusAddr(addr),
        }
    }
}

/// Polls a read takes to complete once issued.
const READ_POLLS: u32 = 3;

impl Port for &Bus {
    fn read(&self, addr: BusAddr, buf: &mut [u8]) -> impl Future<Output = Result<(), AccessError>> {
        let bus: &Bus = self;
        let mut polls = 0u32;
        poll_fn(move |cx| {
            if polls == 0 {
                let n = bus.in_flight.get() + 1;
                bus.in_flight.set(n);
                bus.peak_in_flight.set(bus.peak_in_flight.get().max(n));
                bus.reads.borrow_mut().push((addr.get(), buf.len() as u64));
            }
            polls += 1;
            if polls < READ_POLLS {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            bus.in_flight.set(bus.in_flight.get() - 1);
            if Bus::refused(&bus.unreadable, addr.get(), buf.len() as u64) {
                return Poll::Ready(Err(Bus::unsupported(addr.get())));
            }
            bus.memory.borrow().read(addr.get(), buf);
            Poll::Ready(Ok(()))
        })
    }

    fn write(&self, addr: BusAddr, data: &[u8]) -> impl Future<Output = Result<(), AccessError>> {
        let bus: &Bus = self;
        ready(
            if Bus::refused(&bus.unwritable, addr.get(), data.len() as u64) {
                Err(Bus::unsupported(addr.get()))
            } else {
                bus.memory.borrow_mut().write(addr.get(), data);
                Ok(())
            },
        )
    }
}

impl Clock for &Bus {
    fn now(&self) -> SimTime {
        SimTime::ZERO
    }

    fn sleep(&self, _: SimDuration) -> impl Future<Output = ()> {
        ready(())
    }
}

struct NoWake;

impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

/// Polls `future` until it is ready. Panics after a million polls (a test that would hang).
pub(super) fn block_on<T>(future: impl Future<Output = T>) -> T {
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    for _ in 0..1_000_000 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("the future did not finish within a million polls");
}
