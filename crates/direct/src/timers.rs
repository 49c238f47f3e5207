//! Timers: sleeps and scheduled link changes, fired in `(time, arming order)`.

use smartio_fabric::LinkId;
use smartio_platform::SimTime;
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::task::Waker;

/// What a sleep shares with its timer.
#[derive(Default)]
pub(crate) struct Alarm {
    pub fired: Cell<bool>,
    /// Set when the sleep is dropped before it fires: the timer then neither fires nor
    /// moves the clock.
    pub cancelled: Cell<bool>,
    pub waker: RefCell<Option<Waker>>,
}

/// What happens when a timer's time comes.
pub(crate) enum Due {
    Wake(Rc<Alarm>),
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

    /// The earliest timer that still matters, if it is due by `deadline` (cancelled sleeps
    /// are dropped on the way).
    pub fn pop_due(&mut self, deadline: SimTime) -> Option<(SimTime, Due)> {
        while let Some(Reverse(e)) = self.heap.peek() {
            if matches!(&e.due, Due::Wake(alarm) if alarm.cancelled.get()) {
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
