//! A first-come first-served pool of interchangeable things (single threaded): an NVMe queue
//! pair's command tags, an NBD export's I/O buffers.
//!
//! Invariants: a returned item goes straight to the longest waiting taker (so takers that
//! keep arriving cannot starve one that waits, and a newcomer never takes an item while
//! someone waits); a taker dropped before it was served leaves the queue, and one dropped
//! after an item was handed to it but before it ran passes the item on — no item is lost.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// The pool.
pub struct FifoPool<T> {
    /// What a task waiting for an item waits for, in the engine's report of stuck tasks.
    what: &'static str,
    free: RefCell<Vec<T>>,
    waiting: RefCell<VecDeque<Rc<Taker<T>>>>,
}

/// A waiting taker: where an item is handed over, and whom to wake.
struct Taker<T> {
    handed: Cell<Option<T>>,
    waker: RefCell<Option<Waker>>,
}

/// A wait in progress; see the module's invariants for what dropping it does.
struct Wait<'a, T> {
    pool: &'a FifoPool<T>,
    me: Rc<Taker<T>>,
    done: bool,
}

impl<T> Drop for Wait<'_, T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        match self.me.handed.take() {
            Some(item) => self.pool.give(item),
            None => self
                .pool
                .waiting
                .borrow_mut()
                .retain(|t| !Rc::ptr_eq(t, &self.me)),
        }
    }
}

impl<T> std::fmt::Debug for FifoPool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FifoPool")
            .field("what", &self.what)
            .field("available", &self.available())
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl<T> FifoPool<T> {
    /// A pool holding `items` (the last is taken first while nobody waits); `what` names
    /// it in the engine's report of tasks that never finish.
    pub fn new(what: &'static str, items: Vec<T>) -> FifoPool<T> {
        FifoPool {
            what,
            free: RefCell::new(items),
            waiting: RefCell::new(VecDeque::new()),
        }
    }

    /// Items not taken.
    pub fn available(&self) -> usize {
        self.free.borrow().len()
    }

    /// Takers waiting.
    pub fn waiting(&self) -> usize {
        self.waiting.borrow().len()
    }

    /// An item, at once if one is free and nobody waits; otherwise after every earlier
    /// taker (its place is taken when the future is first polled).
    pub async fn take(&self) -> T {
        if self.waiting.borrow().is_empty() {
            if let Some(item) = self.free.borrow_mut().pop() {
                return item;
            }
        }
        let mut wait = Wait {
            pool: self,
            me: Rc::new(Taker {
                handed: Cell::new(None),
                waker: RefCell::new(None),
            }),
            done: false,
        };
        self.waiting.borrow_mut().push_back(wait.me.clone());
        let item = poll_fn(|cx| match wait.me.handed.take() {
            Some(item) => Poll::Ready(item),
            None => {
                *wait.me.waker.borrow_mut() = Some(cx.waker().clone());
                crate::waiting::note(self.what);
                Poll::Pending
            }
        })
        .await;
        wait.done = true;
        item
    }

    /// Returns an item: to the longest waiting taker, or to the pool.
    pub fn give(&self, item: T) {
        let next = self.waiting.borrow_mut().pop_front();
        match next {
            Some(taker) => {
                taker.handed.set(Some(item));
                if let Some(w) = taker.waker.borrow_mut().take() {
                    w.wake();
                }
            }
            None => self.free.borrow_mut().push(item),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::Context;

    fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn takers_are_served_oldest_first_and_no_item_is_lost_to_a_dropped_one() {
        let pool = FifoPool::new("a test pool", vec![1u16]);
        let mut a = Box::pin(pool.take());
        let Poll::Ready(one) = poll(a.as_mut()) else {
            panic!("a free item is taken at once")
        };
        let mut b = Box::pin(pool.take());
        let mut c = Box::pin(pool.take());
        let mut d = Box::pin(pool.take());
        assert!(poll(b.as_mut()).is_pending());
        assert!(poll(c.as_mut()).is_pending());
        assert!(poll(d.as_mut()).is_pending());
        assert_eq!(pool.waiting(), 3);
        // c leaves before it is served: the queue forgets it.
        drop(c);
        assert_eq!(pool.waiting(), 2);
        // b is handed the item but dropped before it runs: the item goes on to d.
        pool.give(one);
        drop(b);
        assert_eq!(poll(d.as_mut()), Poll::Ready(1));
        assert_eq!((pool.waiting(), pool.available()), (0, 0));
        // Nobody waits: a returned item is free again, and taken at once.
        pool.give(7);
        assert_eq!(pool.available(), 1);
        let mut e = Box::pin(pool.take());
        assert_eq!(poll(e.as_mut()), Poll::Ready(7));
    }

    #[test]
    fn a_newcomer_waits_behind_those_already_waiting() {
        let pool = FifoPool::new("a test pool", vec![]);
        let mut first = Box::pin(pool.take());
        assert!(poll(first.as_mut()).is_pending());
        pool.give(5u8);
        // The item is first's even though first has not run again yet.
        let mut late = Box::pin(pool.take());
        assert!(poll(late.as_mut()).is_pending());
        assert_eq!(poll(first.as_mut()), Poll::Ready(5));
        assert!(poll(late.as_mut()).is_pending());
    }
}
