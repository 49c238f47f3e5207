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

mod figures;
mod html;
mod paper1;
mod seed003;

use crate::exp::{Plot, Report, Setup};
use serde::Serialize;
use smartio_calibration::Calibration;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
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
    pub run: fn(&Ctx) -> Result<Finding, String>,
}

/// An experiment and its `--ops`.
type ExpRun = (crate::exp::ExpName, Option<u64>);

/// What a figure's run gets: the calibration, and the experiments already run (two figures
/// may read one experiment).
pub struct Ctx<'a> {
    calibration: &'a Calibration,
    seed: u64,
    reports: RefCell<BTreeMap<ExpRun, Rc<Report>>>,
}

impl Ctx<'_> {
    /// The calibration in force.
    pub fn calibration(&self) -> &Calibration {
        self.calibration
    }

    /// The run's seed (`--seed`).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Experiment `name` on its default scenario with `ops` (run once per repro).
    pub fn exp(&self, name: crate::exp::ExpName, ops: Option<u64>) -> Result<Rc<Report>, String> {
        if let Some(r) = self.reports.borrow().get(&(name, ops)) {
            return Ok(r.clone());
        }
        let setup = Setup {
            scenario: name.default_scenario().to_string(),
            calibration: self.calibration,
            ops,
            seed: self.seed,
            nvmeof: Default::default(),
        };
        let report = Rc::new(crate::exp::produce(&setup, name, false)?);
        self.reports
            .borrow_mut()
            .insert((name, ops), report.clone());
        Ok(report)
    }
}

/// A figure's outcome, for the report.
#[derive(Debug, Serialize)]
struct Outcome {
    id: &'static str,
    paper: &'static str,
    claim: &'static str,
    source: &'static str,
    #[serde(flatten)]
    finding: Finding,
}

/// Runs `smartio repro`; `calibration_text` is the calibration file's text (for the HTML).
pub fn run(
    calibration: &Calibration,
    calibration_text: &str,
    args: ReproArgs,
) -> Result<(), String> {
    let all = figures::all();
    if args.list {
        for f in &all {
            let text = format!("{}: {} ({})", f.paper, f.claim, f.source);
            print!(
                "{}",
                crate::render::wrapped(&text, &format!("{:<8}", f.id), &" ".repeat(8))
            );
        }
        return Ok(());
    }
    for id in &args.figures {
        if !all.iter().any(|f| f.id.eq_ignore_ascii_case(id)) {
            let known: Vec<&str> = all.iter().map(|f| f.id).collect();
            return Err(format!(
                "--figure {id}: no such figure (known: {})",
                known.join(", ")
            ));
        }
    }
    // A report that cannot be written is refused before the figures run, not after.
    if let Some(path) = &args.html {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            return Err(format!(
                "--html {}: cannot write: the directory {} does not exist",
                path.display(),
                dir.display()
            ));
        }
    }
    let chosen: Vec<&Figure> = all
        .iter()
        .filter(|f| {
            args.figures.is_empty() || args.figures.iter().any(|id| f.id.eq_ignore_ascii_case(id))
        })
        .collect();
    let ctx = Ctx {
        calibration,
        seed: args.seed,
        reports: RefCell::default(),
    };
    let mut phase = smartio_workloads::progress::begin(
        "figures",
        chosen.len() as u64,
        smartio_workloads::progress::Unit::Items("figures"),
    );
    let mut outcomes = Vec::new();
    for (i, f) in chosen.iter().enumerate() {
        let finding = (f.run)(&ctx).unwrap_or_else(|e| Finding {
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
            finding,
        });
        phase.set(i as u64 + 1);
    }
    drop(phase);
    let holding = outcomes.iter().filter(|o| o.finding.holds).count();
    if let Some(path) = &args.html {
        let page = html::page(&outcomes, calibration_text)?;
        std::fs::write(path, page)
            .map_err(|e| format!("--html {}: cannot write: {e}", path.display()))?;
    }
    if args.json {
        let out = serde_json::json!({
            "figures": outcomes,
            "holding": holding,
            "of": outcomes.len(),
            "html": args.html.as_ref().map(|p| p.display().to_string()),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let mut t = crate::exp::table(&["figure", "verdict", "the paper", "the emulator", "rule"]);
    for o in &outcomes {
        t.add_row(vec![
            format!("{}\n{}", o.id, o.paper),
            if o.finding.holds { "holds" } else { "FAILS" }.to_string(),
            format!("{} ({})", o.claim, o.source),
            o.finding.measured.clone(),
            o.finding.rule.clone(),
        ]);
    }
    println!("{t}");
    println!(
        "{holding} of {} statements hold{}",
        outcomes.len(),
        args.html
            .as_ref()
            .map(|p| format!("; report written to {}", p.display()))
            .unwrap_or_default()
    );
    Ok(())
}
