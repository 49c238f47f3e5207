//! Explaining a workload's operations: the critical path of representative ones (the
//! median, the 99th percentile) and the run's timeline as a trace.
//!
//! A workload that can be explained reports each operation's end to an [`Explainer`] from
//! the task that saw it end ([`Explainer::done`]). Which operations are representative is
//! known only after a run, so a command that explains runs twice: once as usual, to learn
//! its percentiles, and once more recording (the run is deterministic, so the second run
//! is the first one again, step for step), keeping the operation whose latency is nearest
//! each target. Recording does not change what a run does; a run that does not record pays
//! nothing for it.

use smartio_machine::{CriticalPath, Machine, RecordingOptions, Trace};
use smartio_platform::SimTime;
use std::cell::RefCell;
use std::rc::Rc;

/// What to explain.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExplainSpec {
    /// The operations to explain, by name and latency in nanoseconds: the operation whose
    /// latency is nearest (the first of equals) is explained under that name.
    pub targets: Vec<(String, u64)>,
    /// Keep the first this many steps as a trace.
    pub trace_limit: Option<usize>,
}

/// One operation explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// The target's name ("p50").
    pub name: String,
    /// The operation ("read 4096 B at LBA 8").
    pub what: String,
    /// Its latency in nanoseconds.
    pub latency_ns: u64,
    /// Where its time went.
    pub path: CriticalPath,
}

/// What a recorded run explains.
#[derive(Debug, Clone, Default)]
pub struct Explanation {
    /// One per target, in the targets' order (a target no operation came near is absent).
    pub explained: Vec<Explained>,
    /// The trace, if one was kept.
    pub trace: Option<Trace>,
}

/// Collects the operations of a recorded run.
pub struct Explainer {
    machine: Machine,
    spec: ExplainSpec,
    best: RefCell<Vec<Option<(u64, Explained)>>>,
}

impl Explainer {
    /// Starts recording on `machine`; `None` if its engine records nothing (no timing
    /// model).
    pub fn start(machine: &Machine, spec: &ExplainSpec) -> Option<Rc<Explainer>> {
        let options = RecordingOptions {
            trace_limit: spec.trace_limit,
        };
        if !machine.start_recording(options) {
            return None;
        }
        Some(Rc::new(Explainer {
            machine: machine.clone(),
            best: RefCell::new(vec![None; spec.targets.len()]),
            spec: spec.clone(),
        }))
    }

    /// An operation ran from `start` to `end` and the calling task saw it end (its wake-up
    /// is the operation's last step). `track` names the trace's track for it and `what`
    /// describes it (called only when it is kept).
    pub fn done(&self, track: &str, what: &dyn Fn() -> String, start: SimTime, end: SimTime) {
        let Some(last) = self.machine.current_step() else {
            return;
        };
        if self.spec.trace_limit.is_some() {
            self.machine.trace_span(track, &what(), start, end);
        }
        let ns = end.since(start).as_ps() / 1000;
        let mut best = self.best.borrow_mut();
        for (i, (name, target)) in self.spec.targets.iter().enumerate() {
            let distance = ns.abs_diff(*target);
            if best[i].as_ref().is_some_and(|(d, _)| *d <= distance) {
                continue;
            }
            if let Some(path) = self.machine.critical_path(last, start, end) {
                best[i] = Some((
                    distance,
                    Explained {
                        name: name.clone(),
                        what: what(),
                        latency_ns: ns,
                        path,
                    },
                ));
            }
        }
    }

    /// What the run explained, and its trace; recording stops mattering after this.
    pub fn finish(&self) -> Explanation {
        Explanation {
            explained: self
                .best
                .borrow_mut()
                .iter_mut()
                .filter_map(|b| b.take().map(|(_, e)| e))
                .collect(),
            trace: self.machine.take_trace(),
        }
    }
}
