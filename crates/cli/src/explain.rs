//! `--breakdown` and `--trace`: where a measured time went, as a table (or JSON) of the
//! critical path of representative operations, and as a Chrome/Perfetto trace of the run.
//!
//! The trace file is the Trace Event Format's JSON object form: `traceEvents` holds one
//! complete event (`"ph": "X"`, times in microseconds) per slice, and metadata events
//! (`"ph": "M"`) naming a process per kind of track (hosts, VMs, devices, links, workload)
//! and a thread per track. Perfetto UI and chrome://tracing open it.

use crate::render;
use serde::Serialize;
use smartio_machine::{CriticalPath, Trace, TrackKind};
use smartio_workloads::{ExplainSpec, Explained};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Most trace steps `--trace-limit` allows (a step is a few hundred bytes of JSON).
pub const MAX_TRACE_LIMIT: usize = 5_000_000;

/// The options every explainable command takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExplainArgs {
    /// Show where the time of a representative operation went: the critical path of the
    /// median (p50) and the 99th-percentile one, step by step (each link and chip of each
    /// crossing, the media, interrupts, software), summing to its latency. Runs the
    /// workload twice (the second time recording; the results are the same).
    #[arg(long)]
    pub breakdown: bool,
    /// Write the run's timeline to FILE as Chrome/Perfetto trace-event JSON (one track per
    /// link direction, device, host and workload job); open it in ui.perfetto.dev or
    /// chrome://tracing.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// With --trace: the most steps kept, 1 to 5000000 [default: 100000]; later steps are
    /// counted, not kept.
    #[arg(long, value_name = "N", value_parser = trace_limit, requires = "trace")]
    pub trace_limit: Option<usize>,
}

fn trace_limit(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if !(1..=MAX_TRACE_LIMIT).contains(&n) {
        return Err(format!(
            "{n} is out of range 1..={MAX_TRACE_LIMIT} (each kept step is a few hundred bytes of the trace file)"
        ));
    }
    Ok(n)
}

impl ExplainArgs {
    /// Whether the run is recorded at all.
    pub fn any(&self) -> bool {
        self.breakdown || self.trace.is_some()
    }

    /// What to record, given the first run's percentiles (`p50`, `p99` in ns) when
    /// breaking down.
    pub fn spec(&self, p50_p99: Option<(f64, f64)>) -> ExplainSpec {
        ExplainSpec {
            targets: match (self.breakdown, p50_p99) {
                (true, Some((p50, p99))) => {
                    vec![
                        ("p50".to_string(), p50 as u64),
                        ("p99".to_string(), p99 as u64),
                    ]
                }
                _ => Vec::new(),
            },
            trace_limit: self
                .trace
                .as_ref()
                .map(|_| self.trace_limit.unwrap_or(100_000)),
        }
    }

    /// Refuses a trace file that cannot be written, before anything runs.
    pub fn check(&self) -> Result<(), String> {
        if let Some(path) = &self.trace {
            if path.is_dir() {
                return Err(format!("--trace {}: is a directory", path.display()));
            }
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(dir) = dir.filter(|d| !d.is_dir()) {
                return Err(format!(
                    "--trace {}: the directory {} does not exist",
                    path.display(),
                    dir.display()
                ));
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
        out.push_str(&render::wrapped(
            &format!(
                "{} {unit} — {}: {} ns, where the time went (its critical path; the steps sum to {} ns):",
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
                    if nested { format!("  {what}") } else { what },
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

/// A trace in the Trace Event Format (JSON object form).
pub fn trace_json(trace: &Trace) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let pid = |k: TrackKind| match k {
        TrackKind::Host => 1,
        TrackKind::Vm => 2,
        TrackKind::Device => 3,
        TrackKind::Link => 4,
        TrackKind::Workload => 5,
    };
    let mut tids: BTreeMap<(TrackKind, String), usize> = BTreeMap::new();
    for e in &trace.events {
        let n = tids.len() + 1;
        tids.entry((e.track.kind, e.track.name.clone()))
            .or_insert(n);
    }
    let mut events: Vec<Value> = Vec::with_capacity(trace.events.len() + tids.len() + 5);
    for (kind, name) in [
        (TrackKind::Host, "hosts"),
        (TrackKind::Vm, "VMs"),
        (TrackKind::Device, "devices"),
        (TrackKind::Link, "links"),
        (TrackKind::Workload, "workload"),
    ] {
        events.push(
            json!({"ph": "M", "name": "process_name", "pid": pid(kind), "tid": 0,
            "args": {"name": name}}),
        );
    }
    for ((kind, name), tid) in &tids {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid(*kind), "tid": tid,
            "args": {"name": name}}),
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
            "pid": pid(e.track.kind),
            "tid": tid,
            "ts": e.start.as_ps() as f64 / 1e6,
            "dur": e.duration.as_ps() as f64 / 1e6,
            "args": args,
        }));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "smartio", "steps_not_kept": trace.dropped},
    })
}

/// Writes `trace` to `path`; says on standard error what was written.
pub fn write_trace(path: &std::path::Path, trace: &Trace) -> Result<(), String> {
    let text = serde_json::to_string(&trace_json(trace)).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("--trace {}: {e}", path.display()))?;
    let note = if trace.dropped > 0 {
        format!(
            " ({} later steps not kept: raise --trace-limit)",
            trace.dropped
        )
    } else {
        String::new()
    };
    eprintln!(
        "trace: {} slices written to {}{note}",
        trace.events.len(),
        path.display()
    );
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
