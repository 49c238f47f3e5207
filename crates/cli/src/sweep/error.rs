//! Why a sweep, its grid, one of its runs, or a merge of its shards failed.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use thiserror::Error;

/// A line of a shard's file: `file:line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineAt {
    /// The file as given.
    pub file: String,
    /// The line, from 1.
    pub line: usize,
}

impl fmt::Display for LineAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Why one run of a sweep gave no result.
#[derive(Debug, Error)]
pub enum RunFailure {
    /// The program could not be started.
    #[error("cannot start {}: {source}", .exe.display())]
    Start {
        /// The program.
        exe: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// It failed without saying why.
    #[error("exited with {status}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
    },
    /// It failed, and said why on standard error.
    #[error("{message}")]
    Failed {
        /// Its exit status.
        status: ExitStatus,
        /// What it said (without `smartio: `).
        message: String,
    },
    /// It succeeded but printed no JSON.
    #[error("printed no JSON ({0})")]
    NoJson(#[source] serde_json::Error),
}

/// A sweep that failed.
#[derive(Debug, Error)]
pub enum SweepError {
    /// This program's own path cannot be found.
    #[error("cannot find this program: {0}")]
    NoProgram(#[source] std::io::Error),
    /// The worker threads could not be started.
    #[error("cannot start {jobs} worker threads: {source}")]
    Workers {
        /// Threads asked for.
        jobs: usize,
        /// Why.
        source: rayon::ThreadPoolBuildError,
    },
    /// Runs failed (each line says why).
    #[error(
        "{failed} of {runs} runs failed (their lines say why); the first: run {index} \
         ({described}): {error}"
    )]
    RunsFailed {
        /// Runs that failed.
        failed: usize,
        /// Runs of the sweep (or shard).
        runs: usize,
        /// The first failed run's index.
        index: usize,
        /// Its varied options.
        described: String,
        /// Why it failed.
        error: RunFailure,
    },
    /// A shard's line that is no sweep line.
    #[error("{at}: not a sweep's line ({source})")]
    NotALine {
        /// Where.
        at: LineAt,
        /// Why.
        source: serde_json::Error,
    },
    /// A line of another sweep.
    #[error("{at}: a line of sweep {sweep:?} with {runs} runs, not of {grid:?} with {total}")]
    OtherSweep {
        /// Where.
        at: LineAt,
        /// The line's sweep.
        sweep: String,
        /// Its runs.
        runs: usize,
        /// The grid's name.
        grid: String,
        /// The grid's runs.
        total: usize,
    },
    /// A run index past the grid.
    #[error("{at}: run {index} is beyond the grid's {total}")]
    Beyond {
        /// Where.
        at: LineAt,
        /// The line's run.
        index: usize,
        /// The grid's runs.
        total: usize,
    },
    /// A run that ran other arguments than the grid's.
    #[error(
        "{at}: run {index} ran `{}`, the grid's run {index} is `{}` (a different grid?)",
        .argv.join(" "),
        .expected.join(" ")
    )]
    OtherArgv {
        /// Where.
        at: LineAt,
        /// The run.
        index: usize,
        /// What it ran.
        argv: Vec<String>,
        /// What the grid runs.
        expected: Vec<String>,
    },
    /// A run with other parameters than the grid's.
    #[error("{at}: run {index} has other params than the grid's run {index} (a different grid?)")]
    OtherParams {
        /// Where.
        at: LineAt,
        /// The run.
        index: usize,
    },
    /// A line with both a result and an error, or neither.
    #[error(
        "{at}: run {index} has {} (a run's line has its result or its error)",
        if *.both { "both a result and an error" } else { "neither a result nor an error" }
    )]
    ResultOrError {
        /// Where.
        at: LineAt,
        /// The run.
        index: usize,
        /// Both (else neither).
        both: bool,
    },
    /// A run in two shards.
    #[error("{at}: run {index} is also in {first} (overlapping shards?)")]
    Overlap {
        /// Where.
        at: LineAt,
        /// The run.
        index: usize,
        /// Where it was first.
        first: LineAt,
    },
    /// Runs no shard has.
    #[error(
        "{} of {total} runs missing: {}{} (a shard not run or not given?)",
        .missing.len(),
        list(.missing),
        more(.missing)
    )]
    Missing {
        /// The runs missing.
        missing: Vec<usize>,
        /// The grid's runs.
        total: usize,
    },
}

/// Most missing runs a message lists.
const LISTED: usize = 10;

/// The first [`LISTED`] runs of `missing`.
fn list(missing: &[usize]) -> String {
    missing
        .iter()
        .take(LISTED)
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` and N more` past [`LISTED`].
fn more(missing: &[usize]) -> String {
    match missing.len().saturating_sub(LISTED) {
        0 => String::new(),
        more => format!(" and {more} more"),
    }
}

/// What is wrong with a grid.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GridError {
    #[error("{file}: {message}")]
    Toml { file: String, message: String },
    #[error("{file}: no such file and no shipped grid of that name{} (shipped: {shipped}): {why}",
        nearest.map_or_else(String::new, |n| format!("; did you mean `{n}`?")))]
    Missing {
        file: String,
        nearest: Option<&'static str>,
        shipped: String,
        why: String,
    },
    #[error("{file}: command = [] names no command (allowed first words: {allowed})")]
    NoCommand { file: String, allowed: String },
    #[error("{file}: command {command:?} prints no JSON a sweep could collect (allowed first words: {allowed})")]
    Command {
        file: String,
        command: String,
        allowed: String,
    },
    #[error("{file}: {section}.{key}: {why}")]
    Key {
        file: String,
        section: &'static str,
        key: String,
        why: String,
    },
    #[error("{file}: the grid expands to more than {max} runs")]
    TooManyRuns { file: String, max: usize },
    #[error("{file}: metric = {metric:?} is not a JSON pointer (it starts with '/', e.g. \"/lat_ns/p50\")")]
    Metric { file: String, metric: String },
    #[error("{file}: run {index} ({params}): {why}")]
    Run {
        file: String,
        index: usize,
        params: String,
        why: String,
    },
}
