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
mod figure;
mod figures;
mod html;
mod mesh;
mod paper1;
mod paper3;
mod paper3_latency;
mod paper5;
mod rules;
mod seed003;

use crate::error::CliError;
use error::ReproError;
use figure::{Ctx, Figure, Finding, Outcome};
use smartio_calibration::Calibration;
use std::path::{Path, PathBuf};

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
        .scenarios()
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
