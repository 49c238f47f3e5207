//! Runs a grid's runs as child processes of this same program, on a pool of worker threads
//! (rayon), and turns each into one JSON line. A run is a plain `smartio` process with its
//! own command line, so its result is the JSON that command prints on its own (the same
//! value, written compactly with its keys sorted).

use super::error::{RunFailure, SweepError};
use super::grid::Run;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One run's line in a sweep's output.
#[derive(Debug, Serialize)]
pub struct Line<'a> {
    /// The grid's name.
    pub sweep: &'a str,
    /// The run's place in the grid.
    pub index: usize,
    /// Runs in the grid.
    pub runs: usize,
    /// The varied options' values.
    pub params: &'a BTreeMap<String, serde_json::Value>,
    /// The run's `smartio` arguments.
    pub argv: &'a [String],
    /// What the command printed (with `--json`), if it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a serde_json::Value>,
    /// Why it failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// What became of one run.
#[derive(Debug)]
pub struct Outcome {
    /// The command's JSON, or why there is none.
    pub result: Result<serde_json::Value, RunFailure>,
    /// Its wall time.
    pub wall: Duration,
}

/// Runs `runs` with `exe` on `jobs` worker threads, each with `--no-budget` when
/// `no_budget` (the sweep as a whole was let over its budget); the outcomes in the order of
/// `runs`.
pub fn execute(
    exe: &Path,
    runs: &[&Run],
    jobs: usize,
    no_budget: bool,
) -> Result<Vec<Outcome>, SweepError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|source| SweepError::Workers { jobs, source })?;
    Ok(pool.install(|| runs.par_iter().map(|r| one(exe, r, no_budget)).collect()))
}

fn one(exe: &Path, run: &Run, no_budget: bool) -> Outcome {
    let start = Instant::now();
    let output = Command::new(exe)
        .args(&run.argv)
        .args(no_budget.then_some(crate::budget::OVERRIDE))
        .stdin(Stdio::null())
        .output();
    let wall = start.elapsed();
    let result = match output {
        Err(source) => Err(RunFailure::Start {
            exe: exe.to_path_buf(),
            source,
        }),
        Ok(out) if !out.status.success() => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = stderr.trim().trim_start_matches("smartio: ");
            Err(if why.is_empty() {
                RunFailure::Exited { status: out.status }
            } else {
                RunFailure::Failed {
                    status: out.status,
                    message: why.to_string(),
                }
            })
        }
        Ok(out) => serde_json::from_slice(&out.stdout).map_err(RunFailure::NoJson),
    };
    Outcome { result, wall }
}

/// The JSON line of `run` with its `outcome`.
pub fn line(
    sweep: &str,
    total: usize,
    run: &Run,
    outcome: &Outcome,
) -> Result<String, serde_json::Error> {
    let message = outcome.result.as_ref().err().map(ToString::to_string);
    serde_json::to_string(&Line {
        sweep,
        index: run.index,
        runs: total,
        params: &run.params,
        argv: &run.argv,
        result: outcome.result.as_ref().ok(),
        error: message.as_deref(),
    })
}
