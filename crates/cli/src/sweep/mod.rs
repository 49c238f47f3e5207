//! `smartio sweep`: a grid of independent runs (scenario × options, [`grid`]) run in parallel
//! on every core ([`run()`]), one JSON line per run in the grid's order, and a summary table.
//! `--shard I/N` runs every N-th run from the I-th, so that a batch system (Slurm job arrays,
//! Kubernetes Indexed Jobs) spreads one sweep over machines as plain processes; `sweep merge`
//! joins the shards' lines into exactly the lines of the whole sweep ([`merge`]).

pub mod args;
pub(crate) mod error;
pub(crate) mod grid;
mod merge;
mod run;

use crate::error::CliError;
use args::{RunArgs, Sweep};
use error::SweepError;
use std::io::Write;
use std::time::Instant;

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
        .filter(|r| args.in_shard(r.index))
        .collect();
    let jobs = args.workers();
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
