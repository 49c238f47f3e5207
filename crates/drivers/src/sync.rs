//! A first-come first-served lock for one task at a time across `await` points (single
//! threaded): a GPU stream's submissions hold it from reserving ring entries to writing `PUT`,
//! so two tasks sharing a stream cannot interleave entries or move `PUT` past unwritten ones;
//! a network stack holds it while it hands a frame to its interface.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// The lock.
#[derive(Debug)]
pub(crate) struct TaskLock {
    /// What a task waiting for it waits for, in the engine's report of stuck tasks.
    what: &'static str,
    held: Cell<bool>,
    /// Tickets not yet served, in arrival order, with their waker.
    queue: RefCell<VecDeque<(u64, Option<Waker>)>>,
    next_ticket: Cell<u64>,
}

/// Holding the lock; dropping it lets the next waiter in.
#[derive(Debug)]
pub(crate) struct TaskGuard<'a> {
    lock: &'a TaskLock,
}

impl TaskLock {
    /// A free lock; `what` names it in the engine's report of tasks that never finish.
    pub(crate) fn new(what: &'static str) -> TaskLock {
        TaskLock {
            what,
            held: Cell::new(false),
            queue: RefCell::default(),
            next_ticket: Cell::new(0),
        }
    }

    /// Waits for the lock, first come first served.
    pub(crate) async fn lock(&self) -> TaskGuard<'_> {
        if !self.held.get() && self.queue.borrow().is_empty() {
            self.held.set(true);
            return TaskGuard { lock: self };
        }
        let ticket = self.next_ticket.get();
        self.next_ticket.set(ticket + 1);
        self.queue.borrow_mut().push_back((ticket, None));
        let mut waiting = Waiting { lock: self, ticket };
        poll_fn(|cx| {
            let mut queue = self.queue.borrow_mut();
            let first = queue.front().map(|(t, _)| *t);
            if !self.held.get() && first == Some(ticket) {
                queue.pop_front();
                self.held.set(true);
                return Poll::Ready(());
            }
            if let Some(entry) = queue.iter_mut().find(|(t, _)| *t == ticket) {
                entry.1 = Some(cx.waker().clone());
            }
            smartio_platform::waiting::note(self.what);
            Poll::Pending
        })
        .await;
        waiting.ticket = u64::MAX;
        TaskGuard { lock: self }
    }

    fn wake_first(&self) {
        if let Some((_, Some(w))) = self.queue.borrow().front() {
            w.wake_by_ref();
        }
    }
}

/// A ticket still queued when its future is dropped gives its place up.
struct Waiting<'a> {
    lock: &'a TaskLock,
    ticket: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.ticket == u64::MAX {
            return;
        }
        let ticket = self.ticket;
        self.lock.queue.borrow_mut().retain(|(t, _)| *t != ticket);
        if !self.lock.held.get() {
            self.lock.wake_first();
        }
    }
}

impl Drop for TaskGuard<'_> {
    fn drop(&mut self) {
        self.lock.held.set(false);
        self.lock.wake_first();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::Context;

    #[test]
    fn waiters_get_the_lock_in_arrival_order_and_a_dropped_waiter_gives_its_place_up() {
        let lock = TaskLock::new("a test lock");
        let mut cx = Context::from_waker(Waker::noop());
        let first = pin!(lock.lock());
        let Poll::Ready(guard) = first.poll(&mut cx) else {
            panic!("a free lock is taken at once");
        };
        let mut second = Box::pin(lock.lock());
        let mut third = Box::pin(lock.lock());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        drop(guard);
        assert!(third.as_mut().poll(&mut cx).is_pending(), "not its turn");
        drop(second);
        let Poll::Ready(_g) = third.as_mut().poll(&mut cx) else {
            panic!("the second gave its place up");
        };
    }
}
