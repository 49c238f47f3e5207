//! The model of `sweep`: a run's estimate is its command's, the runs share the workers (the
//! wall time is their sum over the workers, the memory one run's at most on each worker at
//! once). A grid that does not load is estimated as nothing: the sweep then fails on it
//! before any run.

use super::rates::{START_MEMORY, START_S};
use super::Estimate;
use crate::args::Cli;
use crate::sweep::args::Sweep;
use crate::sweep::grid;
use clap::Parser;

/// The estimate of `sweep` (with the command line's `--calibration`, which every run gets),
/// `run` being the estimate of one run's command line.
pub fn estimate(
    sweep: &Sweep,
    calibration: Option<&str>,
    run: impl Fn(&Cli) -> Option<Estimate>,
) -> Estimate {
    let Sweep::Run(args) = sweep else {
        return Estimate::new(START_S, START_MEMORY, "merging a sweep's shards");
    };
    let Ok(grid) = grid::load(&args.grid, calibration) else {
        return Estimate::new(START_S, START_MEMORY, "a grid that does not load");
    };
    let runs: Vec<&grid::Run> = grid
        .runs
        .iter()
        .filter(|r| args.in_shard(r.index))
        .collect();
    let workers = args.workers().min(runs.len()).max(1);
    let (mut wall, mut memory) = (0.0, 0u64);
    for r in &runs {
        let parsed =
            Cli::try_parse_from(std::iter::once("smartio".to_string()).chain(r.argv.clone()));
        if let Some(e) = parsed.ok().as_ref().and_then(&run) {
            wall += e.wall_s;
            memory = memory.max(e.memory);
        }
    }
    Estimate::new(
        START_S + wall / workers as f64,
        memory.saturating_mul(workers as u64),
        format!("{} runs on {workers} workers", runs.len()),
    )
}
