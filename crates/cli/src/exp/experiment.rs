//! What every experiment of `smartio exp` is: the [`Experiment`] trait, and [`Exp`], one
//! experiment as the command line names it. The list of them is in `exp/mod.rs`, which also
//! makes [`Exp`] a clap value over it (so `--help` lists each with its help).

use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::error::CliError;
use crate::explain::ExplainArgs;

/// One experiment: its name and help on the command line, the scenario it runs on, the
/// options it takes beyond the common ones, what it costs, and its run.
pub trait Experiment: Sync {
    /// The name the command line gives it (`share-30`).
    fn name(&self) -> &'static str;

    /// What it measures, in one line for `--help` (a sentence without its final stop).
    fn help(&self) -> &'static str;

    /// The shipped scenario it runs on unless `--scenario` says otherwise.
    fn default_scenario(&self) -> &'static str;

    /// The options it takes besides `--ops`, `--scenario`, `--seed`, `--json`, `--plots`
    /// (and those of these it refuses).
    fn takes(&self) -> Takes {
        Takes::COMMON
    }

    /// What a run costs, for the budget (see [`crate::budget`]).
    fn cost(&self) -> ExpModel;

    /// Runs it on `setup` (its options already checked against [`Experiment::takes`]).
    fn run(&self, setup: &Setup) -> Result<Report, CliError>;

    /// Runs it with its time explained (`--breakdown`, `--trace`): the report and the
    /// breakdown's text. Only an experiment whose [`Takes::explain`] says so is asked; the
    /// others run unexplained.
    fn run_explained(
        &self,
        setup: &Setup,
        _explain: &ExplainArgs,
    ) -> Result<(Report, String), CliError> {
        Ok((self.run(setup)?, String::new()))
    }
}

/// How an experiment answers the options not every experiment takes. A refusal says why, in
/// the experiment's own words.
pub struct Takes {
    /// `--rw`, `--initiator`, `--target-mode` (nvmeof-compare's rows).
    pub nvmeof: bool,
    /// `None` when it takes `--verify`; else what it does about checking what it reads,
    /// said when it refuses `--verify`.
    pub checking: Option<&'static str>,
    /// Why it has no I/O count to set, when it refuses `--ops`.
    pub no_ops: Option<&'static str>,
    /// Which scenarios it runs on and why it takes no other, when it refuses `--scenario`
    /// (it then names its scenarios in its report's title itself).
    pub own_scenarios: Option<String>,
    /// `--breakdown` and `--trace` ([`Experiment::run_explained`]).
    pub explain: bool,
}

impl Takes {
    /// `--ops` and `--scenario` and none of the others; reads timed without being checked.
    pub const COMMON: Takes = Takes {
        nvmeof: false,
        checking: Some("times its reads without checking them"),
        no_ops: None,
        own_scenarios: None,
        explain: false,
    };
}

/// One experiment, as `smartio exp NAME` names it.
#[derive(Clone, Copy)]
pub struct Exp(pub &'static dyn Experiment);

impl std::ops::Deref for Exp {
    type Target = dyn Experiment;

    fn deref(&self) -> &(dyn Experiment + 'static) {
        self.0
    }
}

impl std::fmt::Debug for Exp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}
