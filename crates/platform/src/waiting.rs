//! What a task is waiting for, so that an engine can say why a run did not finish.
//!
//! A future that returns `Poll::Pending` for a reason the engine cannot see by itself (a
//! device's doorbell [`crate::Notify`], a driver's free command tag) calls [`note`] with a
//! short description. The engine clears the notes before it polls a task ([`clear`]) and
//! keeps what the poll left ([`take`]) as that task's reason for waiting. Waits inside the
//! engine (timers, transactions, memory watches, interrupts) are described by the engine
//! itself, with addresses and hosts.
//!
//! Notes are per thread: an engine polls its tasks on one thread. Noting costs a push of a
//! `&'static str`; nothing is formatted until a report is asked for.

use std::cell::RefCell;

/// At most this many notes are kept per poll (a task waiting on more things at once is
/// described by the first ones).
const MAX_NOTES: usize = 4;

thread_local! {
    static NOTES: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// Records that the task being polled waits for `what` (a phrase such as "a doorbell of
/// the NVMe controller").
pub fn note(what: &'static str) {
    NOTES.with(|n| {
        let mut n = n.borrow_mut();
        if n.len() < MAX_NOTES && !n.contains(&what) {
            n.push(what);
        }
    });
}

/// Forgets the notes (an engine calls this before polling a task).
#[inline]
pub fn clear() {
    NOTES.with(|n| n.borrow_mut().clear());
}

/// Moves the notes left by the last poll into `into` (which is cleared first).
pub fn take(into: &mut Vec<&'static str>) {
    into.clear();
    NOTES.with(|n| into.append(&mut n.borrow_mut()));
}

/// Hands each note left by the last poll to `each`, in order, and forgets them.
#[inline]
pub fn drain(mut each: impl FnMut(&'static str)) {
    NOTES.with(|n| {
        let mut n = n.borrow_mut();
        if !n.is_empty() {
            n.iter().for_each(|&what| each(what));
            n.clear();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_kept_once_each_up_to_the_limit_and_taken_in_order() {
        clear();
        note("a doorbell");
        note("a doorbell");
        for what in ["b", "c", "d", "e", "f"] {
            note(what);
        }
        let mut got = vec!["stale"];
        take(&mut got);
        assert_eq!(got, vec!["a doorbell", "b", "c", "d"]);
        take(&mut got);
        assert!(got.is_empty(), "take empties the notes");
        note("x");
        note("y");
        let mut drained = Vec::new();
        drain(|n| drained.push(n));
        assert_eq!(drained, ["x", "y"]);
        drain(|n| drained.push(n));
        assert_eq!(drained, ["x", "y"], "drain empties the notes");
    }
}
