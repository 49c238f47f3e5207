//! The dispatcher: the calibration, the budget's check of the command's estimate, and the
//! command's own module run with its (already range-checked) arguments. Errors are
//! [`CliError`]s (each layer's own error, or the command line's refusal naming the option and
//! the value); `main` prints their message after `smartio: ` and exits with status 1.

use crate::args::{Cli, Command};
use crate::error::CliError;
use crate::{app, bench, budget, cluster, demo, devices, exp, fio, iperf, pingpong};
use crate::{progress, repro, scenarios, serve, sweep, topo};
use smartio_calibration::Calibration;

/// The calibration file at `path`, or the embedded one.
fn load_calibration(path: Option<&str>) -> Result<Calibration, CliError> {
    match path {
        None => Ok(Calibration::default_embedded()),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| CliError::ReadCalibration {
                path: p.into(),
                source,
            })?;
            Ok(Calibration::parse(p, &text)?)
        }
    }
}

/// Runs the command `cli` names, once its estimate fits the budget (or `--no-budget` says
/// to run it anyway; the servers have no estimate).
pub fn run(cli: Cli) -> Result<(), CliError> {
    let calibration = load_calibration(cli.calibration.as_deref())?;
    let facts = budget::models::Facts {
        calibration: &calibration,
    };
    if let Some(estimate) = budget::models::estimate(&cli, &facts) {
        let command = budget::models::command_name(&cli.command);
        budget::Budget {
            overridden: cli.no_budget,
        }
        .check(&command, &estimate)?;
        progress::announce(&command, &estimate);
    }
    match cli.command {
        Command::Sweep { sweep } => sweep::run(sweep, cli.calibration.as_deref(), cli.no_budget),
        Command::Scenarios => scenarios::run(),
        Command::Topo(args) => topo::run(&calibration, args),
        Command::Bench { bench } => bench::run(&calibration, bench),
        Command::Devices(args) => devices::run(&calibration, args),
        Command::Pingpong(args) => pingpong::run(&calibration, args),
        Command::Fio(args) => fio::run(&calibration, args),
        Command::Iperf(args) => iperf::run(&calibration, args),
        Command::App { app } => app::run(&calibration, app),
        Command::Exp(args) => exp::run(&calibration, args),
        Command::Repro(args) => {
            let text = match &cli.calibration {
                Some(p) => {
                    std::fs::read_to_string(p).map_err(|source| CliError::ReadCalibration {
                        path: p.into(),
                        source,
                    })?
                }
                None => smartio_calibration::DEFAULT_CALIBRATION.to_string(),
            };
            repro::run(&calibration, &text, args)
        }
        Command::Demo => demo::demo(&calibration),
        Command::Serve { serve } => serve::run(&calibration, serve),
        Command::Cluster { cluster } => cluster::run(&calibration, cluster),
    }
}
