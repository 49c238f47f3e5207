//! What the running task is doing, in words, for an engine that explains where time goes.
//!
//! Before a step whose cost it wants named — a software cost it sleeps for, an access it
//! issues — code calls [`doing`] with a short phrase ("block layer: submit", "fetch the
//! submission queue entry"). An engine that records steps takes the phrase for the next
//! step it makes for that task ([`take`]) and forgets it when it polls another task
//! ([`clear`]). An engine that records nothing never reads it.
//!
//! The phrase is per thread, as an engine polls its tasks on one thread. Setting it costs a
//! store of a `&'static str`; nothing is formatted.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static DOING: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Whether any engine of the process has asked for phrases ([`wanted`]): until then naming
/// a step costs one load.
static WANTED: AtomicBool = AtomicBool::new(false);

/// An engine that records steps asks for the phrases from now on (for the whole process).
pub fn wanted() {
    WANTED.store(true, Ordering::Relaxed);
}

/// Names the next step the running task makes (a phrase such as "block layer: submit").
#[inline]
pub fn doing(what: &'static str) {
    if WANTED.load(Ordering::Relaxed) {
        DOING.with(|d| d.set(Some(what)));
    }
}

/// Takes the phrase set by [`doing`], if any (it names one step only).
pub fn take() -> Option<&'static str> {
    DOING.with(|d| d.take())
}

/// Forgets the phrase (an engine calls this before it polls a task).
pub fn clear() {
    DOING.with(|d| d.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phrase_names_one_step_and_is_gone_after_it_is_taken_or_cleared() {
        wanted();
        clear();
        assert_eq!(take(), None);
        doing("block layer: submit");
        doing("fetch the submission queue entry");
        assert_eq!(
            take(),
            Some("fetch the submission queue entry"),
            "the last one"
        );
        assert_eq!(take(), None, "taken once");
        doing("media");
        clear();
        assert_eq!(take(), None);
    }
}
