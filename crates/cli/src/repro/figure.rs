//! What a reproduced figure is and what its run gets: the [`Figure`] (its claim, source and
//! run), the [`Finding`] the run makes, the [`Ctx`] figures share runs and plots through, and
//! a figure's [`Outcome`] as the report shows it.

use super::error::ReproError;
use crate::error::CliError;
use crate::exp::plot::Plot;
use crate::exp::setup::{Report, ScenarioLog, Setup};
use crate::exp::Experiment;
use serde::Serialize;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// What a figure's run found.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The emulated result, in the words of the paper's statement.
    pub measured: String,
    /// The rule the verdict is computed by.
    pub rule: String,
    /// Whether the statement holds by the rule.
    pub holds: bool,
    /// Figures to show.
    #[serde(skip)]
    pub plots: Vec<Plot>,
}

/// What introduces the cause in a finding's text: a statement that fails says why
/// ("Why it fails: …"); one that holds gives the same account as its mechanism.
pub fn why(holds: bool) -> &'static str {
    if holds {
        ""
    } else {
        "Why it fails: "
    }
}

/// One reproduced figure or table.
pub struct Figure {
    /// Short id (`V-27`: Paper V, Fig. 27; `II-3`: Paper II, Fig. 3).
    pub id: &'static str,
    /// Which figure of which paper.
    pub paper: &'static str,
    /// What the paper states, in short.
    pub claim: &'static str,
    /// Where: the source document and line.
    pub source: &'static str,
    /// Runs it.
    pub run: fn(&Ctx) -> Result<Finding, CliError>,
}

/// An experiment (by its name) and its `--ops`.
type ExpRun = (&'static str, Option<u64>);

/// What a figure's run gets: the calibration, and what earlier figures already ran and
/// showed — two figures may read one experiment or one set of runs, and show its plots once.
pub struct Ctx<'a> {
    calibration: &'a Calibration,
    seed: u64,
    reports: RefCell<BTreeMap<ExpRun, Rc<Report>>>,
    /// Results of other runs figures share ([`Ctx::once`]), by what they measure.
    runs: RefCell<BTreeMap<String, Rc<dyn Any>>>,
    /// The files of the plots already shown by a figure.
    shown: RefCell<BTreeSet<String>>,
    /// The scenarios the figures booted (the report draws each).
    scenarios: ScenarioLog,
}

impl<'a> Ctx<'a> {
    /// Nothing run or shown yet.
    pub fn new(calibration: &'a Calibration, seed: u64) -> Ctx<'a> {
        Ctx {
            calibration,
            seed,
            reports: RefCell::default(),
            runs: RefCell::default(),
            shown: RefCell::default(),
            scenarios: ScenarioLog::default(),
        }
    }

    /// A fresh cluster of `scenario` with the run's calibration and seed (noted for the
    /// report's pictures).
    pub fn cluster(&self, scenario: &str) -> Result<Cluster, CliError> {
        self.scenarios.record(scenario);
        Ok(Cluster::seeded(scenario, self.calibration, self.seed)?)
    }

    /// The calibration in force.
    pub fn calibration(&self) -> &Calibration {
        self.calibration
    }

    /// The run's seed (`--seed`).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Experiment `exp` on its default scenario with `ops` (run once per repro).
    pub fn exp(
        &self,
        exp: &'static dyn Experiment,
        ops: Option<u64>,
    ) -> Result<Rc<Report>, CliError> {
        let key = (exp.name(), ops);
        if let Some(r) = self.reports.borrow().get(&key) {
            return Ok(r.clone());
        }
        let setup = Setup {
            ops,
            used: self.scenarios.clone(),
            ..Setup::new(
                exp.default_scenario().to_string(),
                self.calibration,
                self.seed,
            )
        };
        let report = Rc::new(exp.run(&setup)?);
        self.reports.borrow_mut().insert(key, report.clone());
        Ok(report)
    }

    /// The scenarios the figures booted so far, by name (the report draws each).
    pub fn scenarios(&self) -> Vec<String> {
        self.scenarios.names()
    }

    /// What `run` measures, run once per repro: the first figure asking for `key` runs it,
    /// later ones get the same result. `key` names everything the run depends on (its
    /// scenario, parameters and the run's seed are the same for every figure).
    pub fn once<T: 'static>(
        &self,
        key: &str,
        run: impl FnOnce() -> Result<T, CliError>,
    ) -> Result<Rc<T>, CliError> {
        let known = self.runs.borrow().get(key).cloned();
        if let Some(done) = known {
            return done.downcast::<T>().map_err(|_| {
                ReproError::KeptAsOther {
                    key: key.to_string(),
                }
                .into()
            });
        }
        let done = Rc::new(run()?);
        self.runs
            .borrow_mut()
            .insert(key.to_string(), done.clone() as Rc<dyn Any>);
        Ok(done)
    }

    /// The plots of `plots` that no earlier figure showed (by file), now marked shown: a
    /// plot two figures read appears once in the report, with the first.
    pub fn unshown<'p>(&self, plots: impl IntoIterator<Item = &'p Plot>) -> Vec<Plot> {
        let mut shown = self.shown.borrow_mut();
        plots
            .into_iter()
            .filter(|p| shown.insert(p.file.clone()))
            .cloned()
            .collect()
    }
}

/// A figure's outcome, for the report.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub id: &'static str,
    pub paper: &'static str,
    pub claim: &'static str,
    pub source: &'static str,
    /// What of the statement's mechanism is fitted to the paper's own figure, not emergent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted: Option<&'static str>,
    #[serde(flatten)]
    pub finding: Finding,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::plot::Chart;
    use std::cell::Cell;

    fn plot(file: &str) -> Plot {
        Plot {
            file: file.into(),
            title: file.into(),
            x_label: String::new(),
            y_label: String::new(),
            chart: Chart::Bars(Vec::new()),
        }
    }

    #[test]
    fn a_run_two_figures_share_runs_once_and_both_get_its_result() {
        let calibration = Calibration::default_embedded();
        let ctx = Ctx::new(&calibration, 1);
        let runs = Cell::new(0);
        let run = || {
            runs.set(runs.get() + 1);
            Ok(vec![7u64])
        };
        let first = ctx.once("reads", run).expect("runs");
        let second = ctx.once("reads", run).expect("kept");
        assert_eq!(runs.get(), 1);
        assert!(Rc::ptr_eq(&first, &second));
        ctx.once("writes", run).expect("another run");
        assert_eq!(runs.get(), 2);
        let wrong = ctx.once("reads", || Ok("text"));
        assert!(wrong
            .expect_err("another type")
            .to_string()
            .contains("\"reads\""));
    }

    #[test]
    fn a_failed_run_is_not_kept() {
        let calibration = Calibration::default_embedded();
        let ctx = Ctx::new(&calibration, 1);
        let failed: Result<Rc<u8>, CliError> = ctx.once("x", || Err(CliError::NothingExplained));
        assert!(matches!(failed, Err(CliError::NothingExplained)));
        assert_eq!(*ctx.once("x", || Ok(3u8)).expect("runs again"), 3);
    }

    #[test]
    fn a_plot_two_figures_read_is_shown_by_the_first_only() {
        let calibration = Calibration::default_embedded();
        let ctx = Ctx::new(&calibration, 1);
        let report = [plot("a.svg"), plot("b.svg")];
        let files = |plots: Vec<Plot>| plots.into_iter().map(|p| p.file).collect::<Vec<_>>();
        assert_eq!(files(ctx.unshown(&report[..1])), ["a.svg"]);
        assert_eq!(files(ctx.unshown(&report)), ["b.svg"]);
        assert!(ctx.unshown(&report).is_empty());
    }
}
