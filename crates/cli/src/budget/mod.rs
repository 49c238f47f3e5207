//! The budget every command's input must fit before the command starts.
//!
//! Ranges on each option (`values`) keep every value sane on its own; together they still
//! allow runs of hours or gigabytes (`bench gpu-bandwidth --sizes 1G --copies 1000` is five
//! terabytes through the timed engine). So before a command starts, [`models::estimate`]
//! reckons the wall time and the peak memory its input implies — a simple model per command
//! (an experiment's is its own, [`ExpModel`]; a sweep's is its runs', [`sweep`]),
//! the work it does (bytes moved, I/Os, round trips, frames, report rows, buffers) times
//! what each unit costs on the emulator ([`rates`], measured) — and [`Budget::check`]
//! refuses an estimate above [`WALL_BUDGET_S`] or [`MEMORY_BUDGET`] with a
//! [`BudgetError`] that states the estimate, the limit and the work it came from.
//!
//! `--no-budget` (on every command) runs it anyway, after saying on standard error what
//! the estimate is, so a long or large run never starts silently. The two servers (`serve
//! nbd`, `cluster up`) run until they are stopped and have no estimate. Estimates are for
//! an idle 2-core machine with a margin (the [`rates`] were measured on a busy one and rounded
//! up); a loaded machine is slower.

pub mod models;
pub mod rates;
pub mod sweep;

use thiserror::Error;

/// Most wall time a command may be estimated to take without `--no-budget`.
pub const WALL_BUDGET_S: f64 = 60.0;

/// Most memory a command may be estimated to use without `--no-budget`: 2 GiB.
pub const MEMORY_BUDGET: u64 = 2 << 30;

/// The option that runs a command over its budget.
pub const OVERRIDE: &str = "--no-budget";

/// An estimate of what running a command costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Peak resident memory, bytes.
    pub memory: u64,
    /// The work the estimate was reckoned from, in the command's own terms (`5000 copies
    /// of 1 GiB: 5.4 TB through the timed engine`).
    pub work: String,
}

impl Estimate {
    /// An estimate of `wall_s` seconds and `memory` bytes for `work`.
    pub fn new(wall_s: f64, memory: u64, work: impl Into<String>) -> Estimate {
        Estimate {
            wall_s,
            memory,
            work: work.into(),
        }
    }

    /// Whether it fits the budget.
    pub fn fits(&self) -> bool {
        self.wall_s <= WALL_BUDGET_S && self.memory <= MEMORY_BUDGET
    }
}

/// What an experiment costs (its model for `exp NAME`): a fixed part and a part per unit of
/// `--ops`, whose meaning is the experiment's own (I/Os, copies, round trips, milliseconds,
/// epochs, frames). Each experiment states its own, measured with the default and a larger
/// `--ops`, rounded up.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpModel {
    /// `--ops` when not given.
    pub default_ops: u64,
    /// The `--ops` the experiment takes (it refuses others itself).
    pub ops: std::ops::RangeInclusive<u64>,
    /// What one `--ops` counts, with everything it multiplies.
    pub unit: &'static str,
    /// Seconds besides the ops.
    pub fixed_s: f64,
    /// Seconds per op.
    pub per_op_s: f64,
    /// Memory besides the ops.
    pub memory: u64,
    /// Memory per op.
    pub memory_per_op: u64,
}

impl ExpModel {
    /// `default_ops` of `unit` when not given, each `per_op_s` seconds and `memory_per_op`
    /// bytes, on top of `fixed_s` seconds and `memory_mb` MiB; any `--ops` taken.
    pub fn new(
        default_ops: u64,
        unit: &'static str,
        fixed_s: f64,
        per_op_s: f64,
        memory_mb: u64,
        memory_per_op: u64,
    ) -> ExpModel {
        ExpModel {
            default_ops,
            ops: 0..=u64::MAX,
            unit,
            fixed_s,
            per_op_s,
            memory: memory_mb << 20,
            memory_per_op,
        }
    }

    /// The same model for an experiment that takes only `ops` (it refuses others itself,
    /// naming its range).
    pub fn within(self, ops: std::ops::RangeInclusive<u64>) -> ExpModel {
        ExpModel { ops, ..self }
    }
}

/// Why a command was refused before it started: its input is estimated to take more wall
/// time or memory than the budget allows. Not fatal to anything: the same command with
/// fewer or smaller units of work, or with `--no-budget`, runs.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BudgetError {
    /// Longer than [`WALL_BUDGET_S`].
    #[error(
        "{command}: {work}: an estimated {} of wall time, over the budget of {} (the \
         README's \"Budgets\" gives each command's model); ask for less work, or give \
         {OVERRIDE} to run it anyway",
        seconds(*estimate_s),
        seconds(*limit_s)
    )]
    Time {
        /// The command (`bench gpu-bandwidth`).
        command: String,
        /// The work estimated.
        work: String,
        /// Estimated wall time, seconds.
        estimate_s: f64,
        /// The budget, seconds.
        limit_s: f64,
    },
    /// More memory than [`MEMORY_BUDGET`].
    #[error(
        "{command}: {work}: an estimated {} of memory, over the budget of {} (the README's \
         \"Budgets\" gives each command's model); ask for less work, or give {OVERRIDE} to \
         run it anyway",
        bytes(*estimate),
        bytes(*limit)
    )]
    Memory {
        /// The command.
        command: String,
        /// The work estimated.
        work: String,
        /// Estimated peak memory, bytes.
        estimate: u64,
        /// The budget, bytes.
        limit: u64,
    },
}

/// Whether a command's budget is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// `--no-budget` was given: an estimate over the budget is said, then run.
    pub overridden: bool,
}

impl Budget {
    /// Checks `estimate` of `command`: `Ok` when it fits; over the budget, an error, or
    /// with `--no-budget` a note on standard error saying what is about to run (`Ok`).
    pub fn check(&self, command: &str, estimate: &Estimate) -> Result<(), BudgetError> {
        if estimate.fits() {
            return Ok(());
        }
        if self.overridden {
            eprintln!("{}", over_budget_note(command, estimate));
            return Ok(());
        }
        Err(refusal(command, estimate))
    }
}

/// The error for an estimate over the budget: the wall time if that is over, else memory.
pub fn refusal(command: &str, e: &Estimate) -> BudgetError {
    if e.wall_s > WALL_BUDGET_S {
        BudgetError::Time {
            command: command.to_string(),
            work: e.work.clone(),
            estimate_s: e.wall_s,
            limit_s: WALL_BUDGET_S,
        }
    } else {
        BudgetError::Memory {
            command: command.to_string(),
            work: e.work.clone(),
            estimate: e.memory,
            limit: MEMORY_BUDGET,
        }
    }
}

/// The line `--no-budget` prints before a run over the budget starts. Its beginning,
/// [`NOTE_PREFIX`], is what the adversarial corpus looks for.
pub fn over_budget_note(command: &str, e: &Estimate) -> String {
    format!(
        "{NOTE_PREFIX} {command}: {}: an estimated {} of wall time and {} of memory, over \
         the budget of {} and {}; running anyway ({OVERRIDE})",
        e.work,
        seconds(e.wall_s),
        bytes(e.memory),
        seconds(WALL_BUDGET_S),
        bytes(MEMORY_BUDGET)
    )
}

/// How the note of a run over the budget begins.
pub const NOTE_PREFIX: &str = "smartio: note: over budget:";

/// Seconds as people read them: `45 s`, `12 min`, `3.2 h`, `14 days`.
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        "an unbounded time".into()
    } else if s < 100.0 {
        format!("{s:.0} s")
    } else if s < 2.0 * 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 2.0 * 86_400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.0} days", s / 86_400.0)
    }
}

/// Bytes in binary units: `512 MiB`, `2.0 GiB`, `5.0 TiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} bytes");
    }
    let mut v = b as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if v < 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_over_the_budget_is_refused_with_the_estimate_and_the_limit() {
        let budget = Budget { overridden: false };
        let small = Estimate::new(1.0, 1 << 20, "a little");
        assert_eq!(budget.check("fio", &small), Ok(()));
        let long = Estimate::new(4500.0, 1 << 30, "5000 copies");
        let e = budget
            .check("bench gpu-bandwidth", &long)
            .expect_err("long");
        assert_eq!(
            e,
            BudgetError::Time {
                command: "bench gpu-bandwidth".into(),
                work: "5000 copies".into(),
                estimate_s: 4500.0,
                limit_s: 60.0
            }
        );
        let text = e.to_string();
        assert!(text.contains("75 min") && text.contains("60 s"), "{text}");
        assert!(text.contains("--no-budget"), "{text}");
        let big = Estimate::new(5.0, 3 << 30, "a 1 GiB copy");
        let e = budget.check("bench dma", &big).expect_err("big");
        assert!(matches!(e, BudgetError::Memory { estimate, limit, .. }
            if estimate == 3 << 30 && limit == 2 << 30));
        assert!(e.to_string().contains("3.0 GiB") && e.to_string().contains("2.0 GiB"));
    }

    #[test]
    fn the_override_runs_what_is_over_the_budget() {
        let budget = Budget { overridden: true };
        let long = Estimate::new(4500.0, 1 << 30, "5000 copies");
        assert_eq!(budget.check("bench gpu-bandwidth", &long), Ok(()));
        let note = over_budget_note("bench gpu-bandwidth", &long);
        assert!(note.starts_with(NOTE_PREFIX), "{note}");
        assert!(
            note.contains("75 min") && note.contains("--no-budget"),
            "{note}"
        );
    }

    #[test]
    fn durations_and_sizes_read_as_people_write_them() {
        assert_eq!(seconds(45.2), "45 s");
        assert_eq!(seconds(4500.0), "75 min");
        assert_eq!(seconds(3.0 * 3600.0), "3.0 h");
        assert_eq!(seconds(10.0 * 86_400.0), "10 days");
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(2 << 30), "2.0 GiB");
        assert_eq!(bytes(5 << 40), "5.0 TiB");
        assert_eq!(bytes(300 << 20), "300 MiB");
    }
}
