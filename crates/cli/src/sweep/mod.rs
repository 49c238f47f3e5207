//! `smartio sweep`: a grid of independent runs (scenario × options, [`grid`]) run in parallel
//! on every core ([`run`]), one JSON line per run in the grid's order, and a summary table.
//! `--shard I/N` runs every N-th run from the I-th, so that a batch system (Slurm job arrays,
//! Kubernetes Indexed Jobs) spreads one sweep over machines as plain processes; `sweep merge`
//! joins the shards' lines into exactly the lines of the whole sweep ([`merge`]).

mod error;
pub(crate) mod grid;
mod merge;
mod run;

pub use error::SweepError;

use crate::args::Cli;
use crate::error::CliError;
use crate::value_error::ValueError;
use clap::Parser;
use std::io::Write;
use std::time::Instant;

/// Most shards one sweep may be split into.
pub const MAX_SHARDS: usize = 10_000;

/// Most worker threads.
pub const MAX_JOBS: u16 = 256;

#[derive(clap::Subcommand, Debug)]
pub enum Sweep {
    /// Run a grid's runs (or one shard of them) in parallel: one JSON line per run, in the
    /// grid's order; with --out, the lines go to that file and a summary table is printed.
    Run(RunArgs),
    /// Join the JSON lines of a sweep's shards into the lines of the whole sweep, each run
    /// once, checked against the grid.
    Merge(MergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The grid: a TOML file, or a shipped grid's name (qd1-seeds).
    pub grid: String,
    /// Run only shard I of N (0 <= I < N <= 10000): the runs whose index modulo N is I.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Worker threads, each running one run at a time, 1 to 256 (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_JOBS)))]
    pub jobs: Option<u16>,
    /// Write the JSON lines to this file and print a summary table (default: the lines on
    /// standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The grid the shards ran: a TOML file or a shipped grid's name.
    pub grid: String,
    /// The shards' JSON-lines files (--out of each `sweep run --shard`).
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<String>,
    /// Write the merged lines to this file (default: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
}

/// One shard of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which one (0-based).
    pub index: usize,
    /// Of how many.
    pub count: usize,
}

fn parse_shard(s: &str) -> Result<Shard, ValueError> {
    let bad = || ValueError::Shard { max: MAX_SHARDS };
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let index: usize = i.trim().parse().map_err(|_| bad())?;
    let count: usize = n.trim().parse().map_err(|_| bad())?;
    if count == 0 || count > MAX_SHARDS || index >= count {
        return Err(bad());
    }
    Ok(Shard { index, count })
}

/// The budget's estimate of `sweep` (see [`crate::budget::models`]): a run's estimate is
/// its command's, the runs share the workers (the wall time is their sum over the workers,
/// the memory one run's at most on each worker at once). A grid that does not load is
/// estimated as nothing: the sweep then fails on it before any run.
pub fn estimate(
    sweep: &Sweep,
    cli: &crate::args::Cli,
    facts: &crate::budget::models::Facts,
) -> crate::budget::Estimate {
    use crate::budget::{models, rates, Estimate};
    let Sweep::Run(args) = sweep else {
        return Estimate::new(
            rates::START_S,
            rates::START_MEMORY,
            "merging a sweep's shards",
        );
    };
    let Ok(grid) = grid::load(&args.grid, cli.calibration.as_deref()) else {
        return Estimate::new(
            rates::START_S,
            rates::START_MEMORY,
            "a grid that does not load",
        );
    };
    let runs: Vec<&grid::Run> = grid
        .runs
        .iter()
        .filter(|r| args.shard.is_none_or(|s| r.index % s.count == s.index))
        .collect();
    let workers = jobs(args).min(runs.len()).max(1);
    let (mut wall, mut memory) = (0.0, 0u64);
    for r in &runs {
        let parsed =
            Cli::try_parse_from(std::iter::once("smartio".to_string()).chain(r.argv.clone()));
        if let Some(e) = parsed
            .ok()
            .as_ref()
            .and_then(|c| models::estimate(c, facts))
        {
            wall += e.wall_s;
            memory = memory.max(e.memory);
        }
    }
    Estimate::new(
        rates::START_S + wall / workers as f64,
        memory.saturating_mul(workers as u64),
        format!("{} runs on {workers} workers", runs.len()),
    )
}

/// The workers a sweep runs on: `--jobs`, or one per core.
fn jobs(args: &RunArgs) -> usize {
    match args.jobs {
        Some(j) => usize::from(j),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Runs `sweep`; `calibration` is the command line's own `--calibration`, `no_budget` its
/// `--no-budget` (which every run then gets too).
pub fn run(sweep: Sweep, calibration: Option<&str>, no_budget: bool) -> Result<(), CliError> {
    match sweep {
        Sweep::Run(args) => run_grid(&args, calibration, no_budget),
        Sweep::Merge(args) => {
            let grid = grid::load(&args.grid, calibration)?;
            let parts = args
                .parts
                .iter()
                .map(|p| {
                    std::fs::read_to_string(p)
                        .map(|text| (p.clone(), text))
                        .map_err(CliError::file(p))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let lines = merge::merge(&grid, &parts)?;
            write_lines(args.out.as_deref(), &lines)
        }
    }
}

fn run_grid(args: &RunArgs, calibration: Option<&str>, no_budget: bool) -> Result<(), CliError> {
    let grid = grid::load(&args.grid, calibration)?;
    let total = grid.runs.len();
    let runs: Vec<&grid::Run> = grid
        .runs
        .iter()
        .filter(|r| args.shard.is_none_or(|s| r.index % s.count == s.index))
        .collect();
    let jobs = jobs(args);
    let exe = std::env::current_exe().map_err(SweepError::NoProgram)?;
    let start = Instant::now();
    let outcomes = run::execute(&exe, &runs, jobs, no_budget)?;
    let wall = start.elapsed();
    let lines = runs
        .iter()
        .zip(&outcomes)
        .map(|(r, o)| run::line(&grid.name, total, r, o))
        .collect::<Result<Vec<_>, _>>()?;
    write_lines(args.out.as_deref(), &lines)?;
    if args.out.is_some() {
        print!("{}", summary(&grid, &runs, &outcomes));
    }
    let busy: f64 = outcomes.iter().map(|o| o.wall.as_secs_f64()).sum();
    eprintln!(
        "{} of {total} runs{} on {jobs} workers: {:.2} s wall, {busy:.2} s of runs in all \
         (wall / sum {:.2})",
        runs.len(),
        args.shard
            .map_or_else(String::new, |s| format!(" (shard {}/{})", s.index, s.count)),
        wall.as_secs_f64(),
        if busy > 0.0 {
            wall.as_secs_f64() / busy
        } else {
            0.0
        },
    );
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    let first = runs
        .iter()
        .zip(outcomes)
        .find_map(|(r, o)| o.result.err().map(|e| (r, e)));
    match first {
        None => Ok(()),
        Some((r, error)) => Err(SweepError::RunsFailed {
            failed,
            runs: runs.len(),
            index: r.index,
            described: r.described(),
            error,
        }
        .into()),
    }
}

fn write_lines(out: Option<&str>, lines: &[String]) -> Result<(), CliError> {
    match out {
        None => {
            for l in lines {
                println!("{l}");
            }
            Ok(())
        }
        Some(path) => {
            let write = || -> std::io::Result<()> {
                let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
                for l in lines {
                    writeln!(f, "{l}")?;
                }
                f.flush()
            };
            write().map_err(CliError::file(path))
        }
    }
}

/// A table of the runs: index, the varied options, and the metric (or ok / the error).
fn summary(grid: &grid::Grid, runs: &[&grid::Run], outcomes: &[run::Outcome]) -> String {
    let mut header = vec!["run".to_string()];
    header.extend(grid.keys.iter().cloned());
    header.push(grid.metric.clone().unwrap_or_else(|| "result".into()));
    let mut t = crate::render::table();
    t.set_header(header);
    for (r, o) in runs.iter().zip(outcomes) {
        let mut row = vec![r.index.to_string()];
        for k in &grid.keys {
            row.push(match r.params.get(k) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            });
        }
        row.push(match (&o.result, &grid.metric) {
            (Ok(v), Some(m)) => v
                .pointer(m)
                .map_or_else(|| "(not in the result)".into(), |x| x.to_string()),
            (Ok(_), None) => "ok".into(),
            (Err(e), _) => format!("failed: {e}"),
        });
        t.add_row(row);
    }
    format!("{t}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_i_of_n_with_i_below_n() {
        assert_eq!(parse_shard("0/3"), Ok(Shard { index: 0, count: 3 }));
        assert_eq!(parse_shard("2/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in ["3/3", "0/0", "1", "a/3", "-1/3", "0/10001", ""] {
            let e = parse_shard(bad).expect_err(bad).to_string();
            assert!(e.contains("0 <= I < N <= 10000"), "{bad}: {e}");
        }
    }
}
