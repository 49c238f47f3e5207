//! `--breakdown` and `--trace`: where a measured time went, as a table (or JSON) of the
//! critical path of representative operations, and as a Chrome/Perfetto trace of the run.
//!
//! Every explained command goes the same way ([`ExplainArgs::run`]): the workload runs once
//! as usual, its percentiles say which operations are representative, and it runs again on
//! a fresh cluster, recorded, keeping those operations' critical paths; the second run must
//! measure exactly what the first did (the run is deterministic), or the command fails.
//!
//! The trace file is the Trace Event Format's JSON object form: `traceEvents` holds one
//! complete event (`"ph": "X"`, times in microseconds) per slice, and metadata events
//! (`"ph": "M"`) naming a process per kind of track (hosts, VMs, devices, links, workload)
//! and a thread per track. Perfetto UI and chrome://tracing open it.

use crate::error::CliError;
use crate::render;
use crate::usage::Usage;
use crate::value_error::ValueError;
use serde::Serialize;
use smartio_machine::{CriticalPath, Trace, TrackKind};
use smartio_workloads::{ExplainSpec, Explained, Explanation, Target};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Most trace slices `--trace-limit` allows (a slice is a few hundred bytes of JSON).
pub const MAX_TRACE_LIMIT: usize = 5_000_000;

/// Trace slices kept when `--trace-limit` is not given.
pub const DEFAULT_TRACE_LIMIT: usize = 100_000;

/// What [`ExplainArgs::run`] gives back: the first run's result, the operations explained
/// (with `--breakdown`) and the recorded run's trace (with `--trace`).
#[derive(Debug)]
pub struct Recorded<R> {
    /// The first run's result (the recorded run's is equal).
    pub result: R,
    /// The explained operations, in the targets' order.
    pub explained: Vec<Explained>,
    /// The recorded run's timeline.
    pub trace: Option<Trace>,
}

impl<R> Recorded<R> {
    /// Writes the trace where `--trace` says (if it does); the result and the explained
    /// operations remain.
    pub fn write_trace(self, args: &ExplainArgs) -> Result<(R, Vec<Explained>), CliError> {
        if let (Some(path), Some(trace)) = (&args.trace, &self.trace) {
            write_trace(path, trace)?;
        }
        Ok((self.result, self.explained))
    }
}

/// The median and 99th-percentile operations, from a run's percentiles in nanoseconds.
pub fn p50_p99(p50_ns: f64, p99_ns: f64) -> Vec<Target> {
    vec![Target::at_ns("p50", p50_ns), Target::at_ns("p99", p99_ns)]
}

/// A result with its breakdown as one JSON object (the result's fields, then `breakdown`
/// when there is one).
#[derive(Debug, Serialize)]
pub struct WithBreakdown<'a, R: Serialize> {
    /// The result.
    #[serde(flatten)]
    pub result: &'a R,
    /// The explained operations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breakdown: Vec<ExplainedJson>,
}

impl<'a, R: Serialize> WithBreakdown<'a, R> {
    /// `result` with `explained` as its `breakdown`.
    pub fn new(result: &'a R, explained: &[Explained]) -> Self {
        WithBreakdown {
            result,
            breakdown: to_json(explained),
        }
    }
}

/// The options every explainable command takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExplainArgs {
    /// Show where the time of representative operations went: each one's critical path,
    /// step by step (each link and chip of each crossing, the media, interrupts, software),
    /// summing to its latency — fio and pingpong: the median (p50) and 99th-percentile
    /// operation; bench dma: the median copy of the smallest and of the largest size; exp
    /// vm-nvme: each row's p50 QD1 read with interrupts. Runs the workload twice (the
    /// second time recording; the results are the same).
    #[arg(long)]
    pub breakdown: bool,
    /// Write the run's timeline to FILE as Chrome/Perfetto trace-event JSON (one track per
    /// link direction, device, host and workload job); open it in ui.perfetto.dev or
    /// chrome://tracing.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// With --trace: the most slices the trace holds, 1 to 5000000 [default: 100000]; the
    /// run's steps after that are counted, not kept.
    #[arg(long, value_name = "N", value_parser = trace_limit, requires = "trace")]
    pub trace_limit: Option<usize>,
}

fn trace_limit(s: &str) -> Result<usize, ValueError> {
    let n: usize = s.parse().map_err(|_| ValueError::NotCount {
        text: s.to_string(),
    })?;
    if !(1..=MAX_TRACE_LIMIT).contains(&n) {
        return Err(ValueError::TraceLimit {
            n,
            max: MAX_TRACE_LIMIT,
        });
    }
    Ok(n)
}

impl ExplainArgs {
    /// Whether the run is recorded at all.
    pub fn any(&self) -> bool {
        self.breakdown || self.trace.is_some()
    }

    /// The option given, if any (`--breakdown` first), for a command that refuses them.
    pub fn given(&self) -> Option<&'static str> {
        if self.breakdown {
            Some("--breakdown")
        } else if self.trace.is_some() {
            Some("--trace")
        } else {
            None
        }
    }

    /// What to record: `targets` when breaking down, the trace when tracing.
    pub fn spec(&self, targets: Vec<Target>) -> ExplainSpec {
        ExplainSpec {
            targets: if self.breakdown { targets } else { Vec::new() },
            trace_limit: self
                .trace
                .as_ref()
                .map(|_| self.trace_limit.unwrap_or(DEFAULT_TRACE_LIMIT)),
        }
    }

    /// The sequence every explained command follows: `first` runs the workload as usual;
    /// unless asked to explain, that is all. Otherwise `targets` picks the operations to
    /// explain from its result, `again` runs it once more recorded (on a fresh cluster),
    /// and the two results must be equal. What was explained is kept only with
    /// `--breakdown`, the trace only with `--trace` (see [`Recorded::write_trace`]).
    pub fn run<R: PartialEq>(
        &self,
        first: impl FnOnce() -> Result<R, CliError>,
        targets: impl FnOnce(&R) -> Vec<Target>,
        again: impl FnOnce(&ExplainSpec) -> Result<(R, Explanation), CliError>,
    ) -> Result<Recorded<R>, CliError> {
        let result = first()?;
        if !self.any() {
            return Ok(Recorded {
                result,
                explained: Vec::new(),
                trace: None,
            });
        }
        let spec = self.spec(targets(&result));
        let (recorded, explanation) = again(&spec)?;
        if recorded != result {
            return Err(CliError::RecordedDiffers);
        }
        Ok(Recorded {
            result,
            explained: if self.breakdown {
                explanation.explained
            } else {
                Vec::new()
            },
            trace: explanation.trace,
        })
    }

    /// Refuses a trace file that cannot be written, before anything runs.
    pub fn check(&self) -> Result<(), CliError> {
        if let Some(path) = &self.trace {
            if path.is_dir() {
                return Err(Usage::TraceIsDirectory { path: path.clone() }.into());
            }
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(dir) = dir.filter(|d| !d.is_dir()) {
                return Err(Usage::TraceDirectory {
                    path: path.clone(),
                    dir: dir.to_path_buf(),
                }
                .into());
            }
        }
        Ok(())
    }
}

/// One step as JSON.
#[derive(Debug, Serialize)]
pub struct StepJson {
    /// From the operation's start, in ns.
    pub start_ns: f64,
    /// In ns.
    pub duration_ns: f64,
    /// `link`, `chip`, `software`, ...
    pub class: &'static str,
    /// The transfer it is part of (a TLP), if any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub part_of: String,
    /// Where and what.
    pub step: String,
    /// What it waited for (empty: its own work).
    pub waited_for: String,
    /// Equal steps merged into this one.
    pub count: u32,
}

/// One explained operation as JSON.
#[derive(Debug, Serialize)]
pub struct ExplainedJson {
    /// `p50`, `p99`.
    pub name: String,
    /// The operation.
    pub operation: String,
    /// Its latency in ns.
    pub latency_ns: f64,
    /// The latency the workload counted it at in its percentiles, in ns (fio's histogram
    /// rounds to three significant digits, a GPU's cycle counter to whole cycles).
    pub recorded_ns: f64,
    /// The sum of the steps, in ns (equal to the latency).
    pub steps_sum_ns: f64,
    /// Time per class of step, in ns.
    pub by_class: BTreeMap<&'static str, f64>,
    /// The critical path.
    pub steps: Vec<StepJson>,
}

fn ns(ps: u64) -> f64 {
    ps as f64 / 1000.0
}

/// The JSON form of explained operations.
pub fn to_json(explained: &[Explained]) -> Vec<ExplainedJson> {
    explained
        .iter()
        .map(|e| ExplainedJson {
            name: e.name.clone(),
            operation: e.what.clone(),
            latency_ns: ns(e.path.end.since(e.path.start).as_ps()),
            recorded_ns: ns(e.recorded.as_ps()),
            steps_sum_ns: ns(e.path.total().as_ps()),
            by_class: e
                .path
                .by_class()
                .into_iter()
                .map(|(c, d)| (c.name(), ns(d.as_ps())))
                .collect(),
            steps: steps_json(&e.path),
        })
        .collect()
}

fn steps_json(path: &CriticalPath) -> Vec<StepJson> {
    path.steps
        .iter()
        .map(|s| StepJson {
            start_ns: ns(s.start.since(path.start).as_ps()),
            duration_ns: ns(s.duration.as_ps()),
            class: s.class.name(),
            part_of: s.part_of.clone(),
            step: s.what.clone(),
            waited_for: s.waited_for.clone(),
            count: s.count,
        })
        .collect()
}

/// The explained operations as tables, one per operation, with a line of time per class.
pub fn render(explained: &[Explained], unit: &str) -> String {
    let mut out = String::new();
    for e in explained {
        let latency = e.path.end.since(e.path.start);
        let counted = if e.recorded == latency {
            String::new()
        } else {
            format!(
                " (counted as {} ns in the percentiles)",
                fmt_ns(e.recorded.as_ps())
            )
        };
        out.push_str(&render::wrapped(
            &format!(
                "{} {unit} — {}: {} ns{counted}, where the time went (its critical path; the steps sum to {} ns):",
                e.name,
                e.what,
                fmt_ns(latency.as_ps()),
                fmt_ns(e.path.total().as_ps())
            ),
            "",
            "  ",
        ));
        let mut t = render::table();
        t.set_header(vec!["at ns", "ns", "kind", "step", "waited for"]);
        let steps = &e.path.steps;
        let mut i = 0;
        while i < steps.len() {
            let group = &steps[i].part_of;
            let end = if group.is_empty() {
                i + 1
            } else {
                i + steps[i..]
                    .iter()
                    .take_while(|s| &s.part_of == group)
                    .count()
            };
            let nested = !group.is_empty();
            if nested {
                // The transfer's line: its share of the path, then its steps indented.
                let ps: u64 = steps[i..end].iter().map(|s| s.duration.as_ps()).sum();
                t.add_row(vec![
                    fmt_ns(steps[i].start.since(e.path.start).as_ps()),
                    format!("({})", fmt_ns(ps)),
                    String::new(),
                    group.clone(),
                    String::new(),
                ]);
            }
            for s in &steps[i..end] {
                let what = if s.count > 1 {
                    format!("{} (×{})", s.what, s.count)
                } else {
                    s.what.clone()
                };
                t.add_row(vec![
                    fmt_ns(s.start.since(e.path.start).as_ps()),
                    fmt_ns(s.duration.as_ps()),
                    s.class.name().to_string(),
                    if nested {
                        format!("\u{a0}\u{a0}{what}")
                    } else {
                        what
                    },
                    s.waited_for.clone(),
                ]);
            }
            i = end;
        }
        out.push_str(&format!("{t}\n"));
        let classes: Vec<String> = e
            .path
            .by_class()
            .into_iter()
            .map(|(c, d)| format!("{} {}", c.name(), fmt_ns(d.as_ps())))
            .collect();
        out.push_str(&render::wrapped(
            &format!("by kind (ns): {}", classes.join(", ")),
            "  ",
            "    ",
        ));
    }
    out
}

/// Picoseconds as nanoseconds with at most three decimals, trailing zeros dropped.
pub fn fmt_ns(ps: u64) -> String {
    let whole = ps / 1000;
    let frac = ps % 1000;
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{frac:03}")
            .trim_end_matches('0')
            .to_string()
    }
}

/// Several runs' traces in one file (exp vm-nvme's rows): each run's tracks are processes
/// of their own, named after the run ("local: hosts"); every run starts at time 0.
pub fn traces_json(runs: &[(Option<&str>, &Trace)]) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    const KINDS: [(TrackKind, &str); 5] = [
        (TrackKind::Host, "hosts"),
        (TrackKind::Vm, "VMs"),
        (TrackKind::Device, "devices"),
        (TrackKind::Link, "links"),
        (TrackKind::Workload, "workload"),
    ];
    let pid = |run: usize, k: TrackKind| {
        let kind = KINDS.iter().position(|(c, _)| *c == k).unwrap_or(0);
        run * KINDS.len() + kind + 1
    };
    let mut events: Vec<Value> = Vec::new();
    let mut dropped = 0;
    for (run, (label, trace)) in runs.iter().enumerate() {
        dropped += trace.dropped;
        let mut tids: BTreeMap<(TrackKind, String), usize> = BTreeMap::new();
        for e in &trace.events {
            let n = tids.len() + 1;
            tids.entry((e.track.kind, e.track.name.clone()))
                .or_insert(n);
        }
        for (kind, name) in KINDS {
            let name = match label {
                Some(l) => format!("{l}: {name}"),
                None => name.to_string(),
            };
            events.push(
                json!({"ph": "M", "name": "process_name", "pid": pid(run, kind),
                "tid": 0, "args": {"name": name}}),
            );
        }
        for ((kind, name), tid) in &tids {
            events.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid(run, *kind),
                "tid": tid, "args": {"name": name}}),
            );
        }
        for e in &trace.events {
            let tid = tids
                .get(&(e.track.kind, e.track.name.clone()))
                .copied()
                .unwrap_or(0);
            let args: Map<String, Value> = e
                .args
                .iter()
                .map(|(k, v)| ((*k).to_string(), Value::String(v.clone())))
                .collect();
            events.push(json!({
                "ph": "X",
                "name": e.name,
                "cat": e.category,
                "pid": pid(run, e.track.kind),
                "tid": tid,
                "ts": e.start.as_ps() as f64 / 1e6,
                "dur": e.duration.as_ps() as f64 / 1e6,
                "args": args,
            }));
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "smartio", "steps_not_kept": dropped},
    })
}

/// Writes `trace` to `path`; says on standard error what was written.
pub fn write_trace(path: &std::path::Path, trace: &Trace) -> Result<(), CliError> {
    write_traces(path, &[(None, trace)])
}

/// Writes several runs' traces to `path` as one file ([`traces_json`]); says on standard
/// error what was written.
pub fn write_traces(
    path: &std::path::Path,
    runs: &[(Option<&str>, &Trace)],
) -> Result<(), CliError> {
    let text = serde_json::to_string(&traces_json(runs))?;
    std::fs::write(path, text).map_err(|source| CliError::Trace {
        path: path.to_path_buf(),
        source,
    })?;
    let slices: usize = runs.iter().map(|(_, t)| t.events.len()).sum();
    let dropped: u64 = runs.iter().map(|(_, t)| t.dropped).sum();
    let note = if dropped > 0 {
        format!(" ({dropped} later steps not kept: raise --trace-limit)")
    } else {
        String::new()
    };
    eprintln!("trace: {slices} slices written to {}{note}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_print_without_trailing_zeros() {
        assert_eq!(fmt_ns(12_000), "12");
        assert_eq!(fmt_ns(12_500), "12.5");
        assert_eq!(fmt_ns(12_345), "12.345");
        assert_eq!(fmt_ns(7), "0.007");
    }

    #[test]
    fn the_trace_limit_is_range_checked() {
        assert!(trace_limit("0").is_err());
        assert!(trace_limit("5000001").is_err());
        assert!(trace_limit("x").is_err());
        assert_eq!(trace_limit("10"), Ok(10));
    }
}
