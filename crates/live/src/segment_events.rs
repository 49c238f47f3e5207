//! Segment events as the daemon keeps them: the `sci_segment_cb_reason_t` reasons, and a
//! queue of events per object (at most [`MAX_QUEUED`]; older ones are dropped). Noting and
//! waiting for them is in [`crate::events`].

use crate::protocol::Handle;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// Events kept per object before the oldest are dropped.
pub const MAX_QUEUED: usize = 256;

/// The `sci_segment_cb_reason_t` values the live engine reports, with SISCI's values (it
/// injects no link failures, so `SCI_CB_NOT_OPERATIONAL` (3) and `SCI_CB_OPERATIONAL` (4)
/// do not happen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `SCI_CB_CONNECT`.
    Connect,
    /// `SCI_CB_DISCONNECT`.
    Disconnect,
    /// `SCI_CB_LOST`.
    Lost,
}

impl Reason {
    /// The `sci_segment_cb_reason_t` value.
    pub fn code(self) -> u32 {
        match self {
            Reason::Connect => 1,
            Reason::Disconnect => 2,
            Reason::Lost => 5,
        }
    }
}

/// One event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) reason: Reason,
    /// The other side's node id.
    pub(crate) node_id: u32,
    /// The local adapter it concerns.
    pub(crate) adapter: u32,
}

/// Queues of events by object handle.
#[derive(Default)]
pub(crate) struct SegmentEvents {
    queues: BTreeMap<Handle, VecDeque<Event>>,
}

impl SegmentEvents {
    pub(crate) fn push(&mut self, handle: Handle, event: Event) {
        let q = self.queues.entry(handle).or_default();
        if q.len() == MAX_QUEUED {
            q.pop_front();
        }
        q.push_back(event);
    }

    pub(crate) fn pop(&mut self, handle: Handle) -> Option<Event> {
        self.queues.get_mut(&handle)?.pop_front()
    }

    /// Forgets an object's queue (the object is gone).
    pub(crate) fn forget(&mut self, handle: Handle) {
        self.queues.remove(&handle);
    }
}

/// Shared with waiting tasks.
pub(crate) type Events = Rc<RefCell<SegmentEvents>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn event(node_id: u32) -> Event {
        Event {
            reason: Reason::Connect,
            node_id,
            adapter: 0,
        }
    }

    #[test]
    fn events_are_taken_in_order_and_the_oldest_go_when_the_queue_is_full() {
        let mut events = SegmentEvents::default();
        events.push(7, event(1));
        events.push(7, event(2));
        events.push(8, event(3));
        assert_eq!(events.pop(7), Some(event(1)));
        assert_eq!(events.pop(7), Some(event(2)));
        assert_eq!(events.pop(7), None);
        for n in 0..=MAX_QUEUED as u32 {
            events.push(9, event(n));
        }
        assert_eq!(events.pop(9), Some(event(1)), "the oldest went");
        // A forgotten object's queue is gone.
        events.forget(8);
        assert_eq!(events.pop(8), None);
    }
}
