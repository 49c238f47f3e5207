//! A broadcast signal for many waiters: a generation counter and the wakers of everyone
//! waiting for it to move. A GPU's device-memory writes, channel resets and aborted launches
//! use it, and a VM's stop (every interrupt relay waiting on the VM ends with it).
//!
//! Unlike [`crate::Notify`] (one waiter, one pending flag), any number of tasks can
//! wait at once and every one of them is woken by each [`Broadcast::fire`]. A waiter is
//! armed when it takes the generation ([`Broadcast::fired`] does so when called), so a fire
//! between arming and the first poll is not missed.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A signal every waiter sees.
///
/// Invariant: each waiting future holds at most one slot (re-polling replaces its waker), so
/// a task that is woken often for other reasons — a channel task racing its work against a
/// reset — does not pile up wakers; slots are woken in the order they were taken, which
/// keeps runs deterministic.
#[derive(Debug, Default)]
pub struct Broadcast {
    generation: Cell<u64>,
    next_slot: Cell<u64>,
    waiters: RefCell<BTreeMap<u64, Waker>>,
    /// What a task waiting here waits for (for the engine's report of blocked tasks).
    what: &'static str,
}

impl Broadcast {
    /// A signal whose waiters are described as waiting for `what`.
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            ..Self::default()
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
        for w in waiters.into_values() {
            w.wake();
        }
    }

    /// Resolves once the signal has fired after generation `armed`.
    pub fn fired_since(&self, armed: u64) -> Fired<'_> {
        Fired {
            signal: self,
            armed,
            slot: None,
        }
    }

    /// Resolves after the next fire; armed when called.
    pub fn fired(&self) -> Fired<'_> {
        self.fired_since(self.generation.get())
    }

    /// Waiters registered now (tests check that dropped waiters leave no slot behind).
    pub fn waiter_count(&self) -> usize {
        self.waiters.borrow().len()
    }
}

/// Waiting for a [`Broadcast`] to fire; leaves its slot when dropped.
#[derive(Debug)]
pub struct Fired<'a> {
    signal: &'a Broadcast,
    armed: u64,
    slot: Option<u64>,
}

impl Future for Fired<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let signal = this.signal;
        if signal.generation.get() != this.armed {
            if let Some(slot) = this.slot.take() {
                signal.waiters.borrow_mut().remove(&slot);
            }
            return Poll::Ready(());
        }
        let slot = *this.slot.get_or_insert_with(|| {
            let s = signal.next_slot.get();
            signal.next_slot.set(s.wrapping_add(1));
            s
        });
        let mut waiters = signal.waiters.borrow_mut();
        match waiters.get_mut(&slot) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => w.clone_from(cx.waker()),
            None => {
                waiters.insert(slot, cx.waker().clone());
            }
        }
        crate::waiting::note(signal.what);
        Poll::Pending
    }
}

impl Drop for Fired<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.signal.waiters.borrow_mut().remove(&slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    #[test]
    fn a_waiter_polled_again_keeps_one_slot_and_a_dropped_one_leaves() {
        let b = Broadcast::new("a test");
        let mut cx = Context::from_waker(Waker::noop());
        let mut one = pin!(b.fired());
        for _ in 0..100 {
            assert!(one.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(b.waiter_count(), 1);
        {
            let mut other = pin!(b.fired());
            assert!(other.as_mut().poll(&mut cx).is_pending());
            assert_eq!(b.waiter_count(), 2);
        }
        assert_eq!(b.waiter_count(), 1, "the dropped waiter left");
        b.fire();
        assert_eq!(b.waiter_count(), 0);
        assert!(one.as_mut().poll(&mut cx).is_ready());
        let mut late = pin!(b.fired_since(0));
        assert!(late.as_mut().poll(&mut cx).is_ready(), "fired since 0");
    }
}
