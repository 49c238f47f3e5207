//! How far a long run is, for a person watching a terminal.
//!
//! Workloads say what they are doing and how far they are ([`begin`], [`Phase::set`]); a
//! front end that wants to show it installs a [`ProgressSink`] ([`install`]) — the CLI
//! draws a progress bar when its standard error is a terminal. Without a sink nothing is
//! reported and a report costs one comparison. A phase reports at most about a thousand
//! times whatever its length, so a sink never slows a run down.
//!
//! Progress never changes a result: it only observes counts and virtual time.

use std::cell::RefCell;
use std::rc::Rc;

/// What a phase counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Things done (I/Os, copies, round trips), named in the plural.
    Items(&'static str),
    /// Bytes moved.
    Bytes,
    /// Virtual time elapsed, in picoseconds (a run bounded by `--runtime`).
    VirtualPs,
}

/// Where progress goes.
pub trait ProgressSink {
    /// A phase starts: `what` it is, and the `total` it counts up to in `unit`.
    fn begin(&self, what: &str, total: u64, unit: Unit);
    /// The phase has done `done` of its total.
    fn set(&self, done: u64);
    /// The phase is over.
    fn end(&self);
    /// A line for the person watching (a result as it comes), printed above any bar.
    fn line(&self, text: &str) {
        eprintln!("{text}");
    }
}

thread_local! {
    static SINK: RefCell<Option<Rc<dyn ProgressSink>>> = const { RefCell::new(None) };
}

/// Sends progress to `sink` until the returned guard is dropped.
pub fn install(sink: Rc<dyn ProgressSink>) -> Installed {
    SINK.with(|s| *s.borrow_mut() = Some(sink));
    Installed(())
}

/// Keeps a sink installed; dropping it removes the sink.
#[derive(Debug)]
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        SINK.with(|s| *s.borrow_mut() = None);
    }
}

/// Reports this many times per phase at most.
const REPORTS: u64 = 1000;

/// A phase of a run; it ends when dropped.
pub struct Phase {
    sink: Option<Rc<dyn ProgressSink>>,
    step: u64,
    next: u64,
}

impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phase")
            .field("reported", &self.sink.is_some())
            .finish()
    }
}

/// Prints `text` on standard error as a line of its own: through the installed sink (above
/// its bar), or directly when none is installed (output not on a terminal), so a long run
/// shows its results as they come wherever its standard output goes.
pub fn line(text: &str) {
    match SINK.with(|s| s.borrow().clone()) {
        Some(sink) => sink.line(text),
        None => eprintln!("{text}"),
    }
}

/// Starts a phase of `total` in `unit`.
pub fn begin(what: &str, total: u64, unit: Unit) -> Phase {
    let sink = SINK.with(|s| s.borrow().clone());
    if let Some(s) = &sink {
        s.begin(what, total, unit);
    }
    let step = (total / REPORTS).max(1);
    Phase {
        sink,
        step,
        next: step,
    }
}

impl Phase {
    /// `done` of the total is done (reported when it has moved by a thousandth or more).
    pub fn set(&mut self, done: u64) {
        if done < self.next {
            return;
        }
        if let Some(s) = &self.sink {
            s.set(done);
        }
        self.next = done.saturating_add(self.step);
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(s) = &self.sink {
            s.end();
        }
    }
}

/// A phase counted by several tasks at once (the clients of a shared controller); it ends
/// when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Counter(Rc<RefCell<(u64, Phase)>>);

impl Counter {
    /// Starts a phase of `total` in `unit`.
    pub fn new(what: &str, total: u64, unit: Unit) -> Counter {
        Counter(Rc::new(RefCell::new((0, begin(what, total, unit)))))
    }

    /// `n` more are done.
    pub fn add(&self, n: u64) {
        let (done, phase) = &mut *self.0.borrow_mut();
        *done = done.saturating_add(n);
        phase.set(*done);
    }
}

/// A sink that records what it is told (for tests).
#[derive(Debug, Default)]
pub struct Recorder {
    /// Every event: `begin <what> <total>`, `set <done>`, `end`.
    pub events: RefCell<Vec<String>>,
}

impl ProgressSink for Recorder {
    fn begin(&self, what: &str, total: u64, _unit: Unit) {
        self.events
            .borrow_mut()
            .push(format!("begin {what} {total}"));
    }
    fn set(&self, done: u64) {
        self.events.borrow_mut().push(format!("set {done}"));
    }
    fn end(&self) {
        self.events.borrow_mut().push("end".to_string());
    }
    fn line(&self, text: &str) {
        self.events.borrow_mut().push(format!("line {text}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_sink_nothing_is_reported_and_with_one_a_phase_reports_at_most_a_thousand_times() {
        let mut quiet = begin("nothing", 10, Unit::Items("I/Os"));
        quiet.set(5);
        drop(quiet);
        let recorder = Rc::new(Recorder::default());
        let guard = install(recorder.clone());
        let mut phase = begin("reads", 1_000_000, Unit::Items("I/Os"));
        for done in 1..=1_000_000 {
            phase.set(done);
        }
        drop(phase);
        drop(guard);
        let events = recorder.events.borrow();
        assert_eq!(
            events.first().map(String::as_str),
            Some("begin reads 1000000")
        );
        assert_eq!(events.last().map(String::as_str), Some("end"));
        assert_eq!(events.len(), 1 + 1000 + 1);
        assert_eq!(events[events.len() - 2], "set 1000000");
        // After the guard is gone, nothing more arrives.
        begin("after", 1, Unit::Bytes).set(1);
        assert_eq!(recorder.events.borrow().len(), 1002);
    }

    #[test]
    fn a_line_goes_to_the_installed_sink_and_nowhere_else() {
        let recorder = Rc::new(Recorder::default());
        let guard = install(recorder.clone());
        line("V-27 holds");
        drop(guard);
        line("after: on standard error, not to the sink");
        assert_eq!(*recorder.events.borrow(), ["line V-27 holds"]);
    }
}
