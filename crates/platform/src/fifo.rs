//! A first-come first-served lock held across `await` points (single threaded): a GPU copy
//! engine serves the channels' copies one at a time in the order they asked, a GPU stream's
//! submissions hold it from reserving ring entries to writing `PUT`.
//!
//! Invariant: a caller's place in the queue is taken when [`FifoLock::acquire`] is *called*,
//! not when its future is first polled, so the order is the order of the calls; a waiter that
//! is dropped leaves the queue and wakes the next.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Poll, Waker};

/// The lock.
#[derive(Debug)]
pub struct FifoLock {
    /// What a task waiting for it waits for, in the engine's report of stuck tasks.
    what: &'static str,
    held: Cell<bool>,
    next_ticket: Cell<u64>,
    /// Tickets not yet served, in arrival order, with their waker.
    queue: RefCell<VecDeque<(u64, Option<Waker>)>>,
}

/// Holding the lock; dropping it lets the next waiter in.
#[derive(Debug)]
pub struct FifoHold {
    lock: Rc<FifoLock>,
}

impl Drop for FifoHold {
    fn drop(&mut self) {
        self.lock.held.set(false);
        self.lock.wake_front();
    }
}

/// A place in the queue; leaving it unserved (the waiter was dropped) lets the next in.
struct Waiting {
    lock: Rc<FifoLock>,
    ticket: u64,
    served: Cell<bool>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.served.get() {
            self.lock
                .queue
                .borrow_mut()
                .retain(|(t, _)| *t != self.ticket);
            self.lock.wake_front();
        }
    }
}

impl FifoLock {
    /// A free lock; `what` names it in the engine's report of tasks that never finish.
    pub fn new(what: &'static str) -> FifoLock {
        FifoLock {
            what,
            held: Cell::new(false),
            next_ticket: Cell::new(0),
            queue: RefCell::default(),
        }
    }

    fn wake_front(&self) {
        if let Some((_, Some(w))) = self.queue.borrow().front() {
            w.wake_by_ref();
        }
    }

    /// Takes a place in the queue now; resolves when the lock is the caller's.
    pub fn acquire(self: &Rc<Self>) -> impl Future<Output = FifoHold> + 'static {
        let ticket = self.next_ticket.get();
        self.next_ticket.set(ticket.wrapping_add(1));
        self.queue.borrow_mut().push_back((ticket, None));
        let waiting = Waiting {
            lock: self.clone(),
            ticket,
            served: Cell::new(false),
        };
        async move {
            poll_fn(|cx| {
                let lock = &waiting.lock;
                let mut queue = lock.queue.borrow_mut();
                if !lock.held.get() && queue.front().map(|(t, _)| *t) == Some(ticket) {
                    queue.pop_front();
                    lock.held.set(true);
                    waiting.served.set(true);
                    return Poll::Ready(());
                }
                if let Some(slot) = queue.iter_mut().find(|(t, _)| *t == ticket) {
                    slot.1 = Some(cx.waker().clone());
                }
                crate::waiting::note(lock.what);
                Poll::Pending
            })
            .await;
            FifoHold {
                lock: waiting.lock.clone(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::Context;

    #[test]
    fn waiters_are_served_in_call_order_and_a_dropped_waiter_gives_its_place_up() {
        let lock = Rc::new(FifoLock::new("a test lock"));
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = pin!(lock.acquire());
        let mut second = Box::pin(lock.acquire());
        let mut third = pin!(lock.acquire());
        // Polled out of order: the third asked last, so it waits even though the lock is free.
        assert!(third.as_mut().poll(&mut cx).is_pending(), "not its turn");
        let Poll::Ready(hold) = first.as_mut().poll(&mut cx) else {
            panic!("the lock is free and this is the first call");
        };
        assert!(second.as_mut().poll(&mut cx).is_pending(), "held");
        drop(hold);
        drop(second);
        let Poll::Ready(_third_holds) = third.as_mut().poll(&mut cx) else {
            panic!("the dropped second waiter gave its turn to the third");
        };
        let mut fourth = pin!(lock.acquire());
        assert!(
            fourth.as_mut().poll(&mut cx).is_pending(),
            "the third holds it"
        );
    }
}
