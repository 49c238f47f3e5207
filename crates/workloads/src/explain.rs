//! Explaining a workload's operations: the critical path of representative ones (the
//! median, the 99th percentile) and the run's timeline as a trace.
//!
//! A workload that can be explained reports each operation's end to an [`Explainer`] from
//! the task that saw it end ([`Explainer::done`], [`Explainer::report`]), with the latency
//! it records for it (fio's histogram keeps buckets of three significant digits, a GPU's
//! cycle counter whole cycles), so the operation explained for a percentile is one the
//! workload counted at that percentile. Which operations are representative is
//! known only after a run, so a command that explains runs twice: once as usual, to learn
//! its percentiles, and once more recording (the run is deterministic, so the second run
//! is the first one again, step for step), keeping the operation whose latency is nearest
//! each target. Recording does not change what a run does; a run that does not record pays
//! nothing for it.

use smartio_machine::{CriticalPath, Machine, RecordingOptions, Trace};
use smartio_platform::{SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

/// An operation to explain: the one whose recorded latency is nearest `latency` (the first
/// of equals), among the operations of kind `of` when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its name in the explanation ("p50", "median 4 KiB").
    pub name: String,
    /// The latency to come nearest to.
    pub latency: SimDuration,
    /// Only operations reported with this kind ([`Operation::kind`]); `None`: any.
    pub of: Option<String>,
}

impl Target {
    /// The operation nearest `ns` nanoseconds, of any kind.
    pub fn at_ns(name: &str, ns: f64) -> Target {
        Target {
            name: name.to_string(),
            latency: SimDuration::from_ns_f64(ns),
            of: None,
        }
    }
}

/// What to explain.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExplainSpec {
    /// The operations to explain.
    pub targets: Vec<Target>,
    /// Keep the run's first steps as a trace, up to this many slices
    /// ([`smartio_machine::RecordingOptions::trace_limit`]).
    pub trace_limit: Option<usize>,
}

/// An operation a workload reports as it ends.
pub struct Operation<'a> {
    /// Its kind, for targets that choose among one kind (bench dma: its size).
    pub kind: Option<&'a str>,
    /// The trace's track for it ("fio job 0").
    pub track: &'a str,
    /// What it was (called only when it is kept).
    pub what: &'a dyn Fn() -> String,
    /// When it started.
    pub start: SimTime,
    /// When it ended: when the reporting task saw it end.
    pub end: SimTime,
    /// The latency the workload recorded for it (`end - start`, or that as its recorder
    /// keeps it).
    pub recorded: SimDuration,
}

/// One operation explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// The target's name ("p50").
    pub name: String,
    /// The operation ("read 4096 B at LBA 8").
    pub what: String,
    /// Its latency in nanoseconds (rounded down).
    pub latency_ns: u64,
    /// The latency the workload recorded for it ([`Operation::recorded`]).
    pub recorded: SimDuration,
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

    /// An operation ran from `start` to `end`, recorded as `end - start`, and the calling
    /// task saw it end (its wake-up is the operation's last step). `track` names the
    /// trace's track for it and `what` describes it (called only when it is kept).
    pub fn done(&self, track: &str, what: &dyn Fn() -> String, start: SimTime, end: SimTime) {
        self.report(&Operation {
            kind: None,
            track,
            what,
            start,
            end,
            recorded: end.since(start),
        });
    }

    /// An operation ended, and the calling task saw it end (see [`Explainer::done`]).
    pub fn report(&self, op: &Operation) {
        let Some(last) = self.machine.current_step() else {
            return;
        };
        if self.spec.trace_limit.is_some() {
            self.machine
                .trace_span(op.track, &(op.what)(), op.start, op.end);
        }
        let mut best = self.best.borrow_mut();
        for (i, target) in self.spec.targets.iter().enumerate() {
            if target.of.as_deref().is_some_and(|of| Some(of) != op.kind) {
                continue;
            }
            let distance = op.recorded.as_ps().abs_diff(target.latency.as_ps());
            if best[i].as_ref().is_some_and(|(d, _)| *d <= distance) {
                continue;
            }
            if let Some(path) = self.machine.critical_path(last, op.start, op.end) {
                best[i] = Some((
                    distance,
                    Explained {
                        name: target.name.clone(),
                        what: (op.what)(),
                        latency_ns: op.end.since(op.start).as_ps() / 1000,
                        recorded: op.recorded,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_at_nanoseconds_is_in_picoseconds() {
        let t = Target::at_ns("p50", 556.125);
        assert_eq!((t.latency, t.of), (SimDuration::from_ps(556_125), None));
    }
}
