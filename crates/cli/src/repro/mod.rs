//! `smartio repro`: runs the papers' reproduced figures and tables on the emulator and
//! says, for each, what the paper states (with the line of the source document), what the
//! emulator measured, and whether the statement holds by a stated rule computed from the
//! measurement — nothing typed in. A failing figure is reported as failing. With `--html`
//! it writes one self-contained page: the verdicts, each figure's plots (SVG inline) and the
//! calibration the run used.
//!
//! The figures are in [`figures`]; each runs workloads or experiments with fewer repeats
//! than their commands' defaults where the model is deterministic (a median of a few equal
//! samples is the median of many).

pub(crate) mod error;
mod figures;
mod html;
mod paper1;
mod paper3;
mod paper3_latency;
mod paper5;
mod seed003;

use crate::error::CliError;
use crate::exp::{Plot, Report, ScenarioLog, Setup};
pub use error::ReproError;
use serde::Serialize;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// `smartio repro` arguments.
#[derive(clap::Args, Debug)]
pub struct ReproArgs {
    /// Only this figure (repeatable; `smartio repro --list` names them all), e.g. V-27.
    #[arg(long = "figure", value_name = "ID")]
    pub figures: Vec<String>,
    /// List the figures and what each claims, without running them.
    #[arg(long, conflicts_with_all = ["figures", "html", "json"])]
    pub list: bool,
    /// Write a self-contained HTML report (verdicts, plots, calibration) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, conflicts_with = "list", default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
}

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

/// An experiment and its `--ops`.
type ExpRun = (crate::exp::ExpName, Option<u64>);

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
    fn new(calibration: &'a Calibration, seed: u64) -> Ctx<'a> {
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

    /// Experiment `name` on its default scenario with `ops` (run once per repro).
    pub fn exp(&self, name: crate::exp::ExpName, ops: Option<u64>) -> Result<Rc<Report>, CliError> {
        if let Some(r) = self.reports.borrow().get(&(name, ops)) {
            return Ok(r.clone());
        }
        let setup = Setup {
            scenario: name.default_scenario().to_string(),
            calibration: self.calibration,
            ops,
            seed: self.seed,
            nvmeof: Default::default(),
            traffic: Default::default(),
            used: self.scenarios.clone(),
        };
        let report = Rc::new(crate::exp::produce(&setup, name, false)?);
        self.reports
            .borrow_mut()
            .insert((name, ops), report.clone());
        Ok(report)
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
struct Outcome {
    id: &'static str,
    paper: &'static str,
    claim: &'static str,
    source: &'static str,
    /// What of the statement's mechanism is fitted to the paper's own figure, not emergent.
    #[serde(skip_serializing_if = "Option::is_none")]
    fitted: Option<&'static str>,
    #[serde(flatten)]
    finding: Finding,
}

/// Runs `smartio repro`; `calibration_text` is the calibration file's text (for the HTML).
pub fn run(
    calibration: &Calibration,
    calibration_text: &str,
    args: ReproArgs,
) -> Result<(), CliError> {
    let all = figures::all();
    if args.list {
        list(&all);
        return Ok(());
    }
    check(&args, &all)?;
    let chosen: Vec<&Figure> = all
        .iter()
        .filter(|f| {
            args.figures.is_empty() || args.figures.iter().any(|id| f.id.eq_ignore_ascii_case(id))
        })
        .collect();
    let ctx = Ctx::new(calibration, args.seed);
    let outcomes = run_figures(&ctx, &chosen);
    let holding = outcomes.iter().filter(|o| o.finding.holds).count();
    if let Some(path) = &args.html {
        write_html(path, &ctx, &outcomes, calibration, calibration_text)?;
    }
    if args.json {
        let out = serde_json::json!({
            "figures": outcomes,
            "holding": holding,
            "of": outcomes.len(),
            "html": args.html.as_ref().map(|p| p.display().to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_table(&outcomes, holding, args.html.as_deref());
    Ok(())
}

/// Every statement's id, paper, claim and source, ids in a column.
fn list(all: &[Figure]) {
    // Ids in a column at least one space wider than the longest.
    let width = all.iter().map(|f| f.id.len() + 1).max().unwrap_or(0).max(8);
    for f in all {
        let text = format!("{}: {} ({})", f.paper, f.claim, f.source);
        print!(
            "{}",
            crate::render::wrapped(&text, &format!("{:<width$}", f.id), &" ".repeat(width))
        );
    }
}

/// Refuses a figure id that names none, and an HTML report whose directory does not exist
/// (before the figures run, not after).
fn check(args: &ReproArgs, all: &[Figure]) -> Result<(), ReproError> {
    for id in &args.figures {
        if !all.iter().any(|f| f.id.eq_ignore_ascii_case(id)) {
            return Err(ReproError::UnknownFigure {
                id: id.clone(),
                known: all.iter().map(|f| f.id).collect(),
            });
        }
    }
    if let Some(path) = &args.html {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            return Err(ReproError::HtmlDirectory {
                path: path.clone(),
                dir: dir.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Runs each chosen figure, reporting each verdict as it comes (a run that fails is a
/// verdict that fails).
fn run_figures(ctx: &Ctx, chosen: &[&Figure]) -> Vec<Outcome> {
    let mut phase = smartio_workloads::progress::begin(
        "figures",
        chosen.len() as u64,
        smartio_workloads::progress::Unit::Items("figures"),
    );
    let mut outcomes = Vec::new();
    for (i, f) in chosen.iter().enumerate() {
        let started = std::time::Instant::now();
        let finding = (f.run)(ctx).unwrap_or_else(|e| Finding {
            measured: format!("the run failed: {e}"),
            rule: "the run completes".into(),
            holds: false,
            plots: Vec::new(),
        });
        outcomes.push(Outcome {
            id: f.id,
            paper: f.paper,
            claim: f.claim,
            source: f.source,
            fitted: figures::fitted(f.id),
            finding,
        });
        // Each verdict as it comes (standard error): the table waits for the whole set.
        let verdict = if outcomes[i].finding.holds {
            "holds"
        } else {
            "FAILS"
        };
        smartio_workloads::progress::line(&format!(
            "repro [{}/{}] {} {verdict} ({:.1} s)",
            i + 1,
            chosen.len(),
            f.id,
            started.elapsed().as_secs_f64()
        ));
        phase.set(i as u64 + 1);
    }
    drop(phase);
    outcomes
}

/// Writes the HTML report to `path`, with each scenario the figures ran on drawn (a
/// scenario that cannot be drawn says why in its place).
fn write_html(
    path: &Path,
    ctx: &Ctx,
    outcomes: &[Outcome],
    calibration: &Calibration,
    calibration_text: &str,
) -> Result<(), CliError> {
    let pictures: Vec<(String, Result<String, crate::picture::PictureError>)> = ctx
        .scenarios
        .names()
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let svg = crate::picture::element(&name, calibration, &format!("s{i}"));
            (name, svg)
        })
        .collect();
    let page = html::page(outcomes, &pictures, calibration_text)?;
    std::fs::write(path, page).map_err(|source| ReproError::HtmlWrite {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// The verdicts as a table, and how many statements hold.
fn print_table(outcomes: &[Outcome], holding: usize, html: Option<&Path>) {
    let mut t = crate::cells::table(&["figure", "verdict", "the paper", "the emulator", "rule"]);
    for o in outcomes {
        t.add_row(vec![
            format!("{}\n{}", o.id, o.paper),
            if o.finding.holds { "holds" } else { "FAILS" }.to_string(),
            format!("{} ({})", o.claim, o.source),
            match o.fitted {
                Some(f) => format!("{} [fitted: {f}]", o.finding.measured),
                None => o.finding.measured.clone(),
            },
            o.finding.rule.clone(),
        ]);
    }
    println!("{t}");
    println!(
        "{holding} of {} statements hold{}",
        outcomes.len(),
        html.map(|p| format!("; report written to {}", p.display()))
            .unwrap_or_default()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::Chart;
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
