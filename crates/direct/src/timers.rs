//! Timers (sleeps and scheduled link changes, fired in `(time, arming order)`) and the
//! signal a waiting future shares with what it waits for.

use smartio_fabric::LinkId;
use smartio_platform::SimTime;
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// What a waiting future shares with what it waits for (a timer, a memory watch).
#[derive(Default)]
pub(crate) struct Signal {
    fired: Cell<bool>,
    /// Set when the future is dropped before the signal fired: a timer then neither fires
    /// nor moves the clock, a watch is pruned.
    abandoned: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Signal {
    /// Fires the signal; returns the waiting task's waker, if it has polled.
    pub fn fire(&self) -> Option<Waker> {
        self.fired.set(true);
        self.waker.borrow_mut().take()
    }

    /// Whether its future was dropped before it fired.
    pub fn abandoned(&self) -> bool {
        self.abandoned.get()
    }
}

/// Waits for a [`Signal`]; dropped before it fires, it abandons it.
pub(crate) struct Awaited(pub Rc<Signal>);

impl Future for Awaited {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.fired.get() {
            Poll::Ready(())
        } else {
            *self.0.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        if !self.0.fired.get() {
            self.0.abandoned.set(true);
        }
    }
}

/// What happens when a timer's time comes.
pub(crate) enum Due {
    Wake(Rc<Signal>),
    Link { link: LinkId, up: bool },
}

struct Entry {
    at: SimTime,
    seq: u64,
    due: Due,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The pending timers.
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl Timers {
    /// Arms a timer.
    pub fn add(&mut self, at: SimTime, due: Due) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            due,
        }));
    }

    /// When the earliest timer still wanted is due (cancelled sleeps are dropped on the
    /// way).
    pub fn next_due(&mut self) -> Option<SimTime> {
        while let Some(Reverse(e)) = self.heap.peek() {
            if matches!(&e.due, Due::Wake(signal) if signal.abandoned()) {
                self.heap.pop();
                continue;
            }
            return Some(e.at);
        }
        None
    }

    /// The earliest timer that still matters, if it is due by `deadline` (cancelled sleeps
    /// are dropped on the way).
    pub fn pop_due(&mut self, deadline: SimTime) -> Option<(SimTime, Due)> {
        while let Some(Reverse(e)) = self.heap.peek() {
            if matches!(&e.due, Due::Wake(signal) if signal.abandoned()) {
                self.heap.pop();
                continue;
            }
            if e.at > deadline {
                return None;
            }
            return self.heap.pop().map(|Reverse(e)| (e.at, e.due));
        }
        None
    }
}
