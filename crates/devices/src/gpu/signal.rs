//! A broadcast signal for many waiters: a generation counter and the wakers of everyone
//! waiting for it to move. Device-memory writes, channel resets and aborted launches use it.
//!
//! Unlike `smartio_platform::Notify` (one waiter, one pending flag), any number of tasks can
//! wait at once and every one of them is woken by each [`Broadcast::fire`]. A waiter is
//! armed when it takes the generation ([`Broadcast::fired`] does so when called), so a fire
//! between arming and the first poll is not missed.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::task::{Poll, Waker};

/// A signal every waiter sees.
#[derive(Debug, Default)]
pub struct Broadcast {
    generation: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
    /// What a task waiting here waits for (for the engine's report of blocked tasks).
    what: &'static str,
}

impl Broadcast {
    /// A signal whose waiters are described as waiting for `what`.
    pub fn new(what: &'static str) -> Self {
        Self {
            generation: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
            what,
        }
    }

    /// Times fired so far (wrapping).
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Moves the generation and wakes every waiter.
    pub fn fire(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
    }

    /// Resolves once the signal has fired after generation `armed`.
    pub fn fired_since(&self, armed: u64) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            if self.generation.get() != armed {
                Poll::Ready(())
            } else {
                self.waiters.borrow_mut().push(cx.waker().clone());
                smartio_platform::waiting::note(self.what);
                Poll::Pending
            }
        })
    }

    /// Resolves after the next fire; armed when called.
    pub fn fired(&self) -> impl Future<Output = ()> + '_ {
        self.fired_since(self.generation.get())
    }

    /// Wakers registered now (a waiter polled again before a fire counts twice).
    pub fn waiter_count(&self) -> usize {
        self.waiters.borrow().len()
    }
}
