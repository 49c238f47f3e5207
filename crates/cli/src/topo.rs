//! `smartio topo`: each host's PCI tree and address map as the simulations see them (the
//! calibration fills what the scenario leaves out), as a table or JSON — or, with `--svg
//! FILE`, the picture of the whole cluster ([`crate::picture`]).

use crate::error::CliError;
use crate::outfile::OutputFile;
use crate::output::print_json;
use crate::render;
use smartio_calibration::Calibration;

/// `smartio topo` arguments.
#[derive(clap::Args, Debug)]
pub struct TopoArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Draw the cluster into FILE as an SVG picture instead: hosts, NTB adapters, cables,
    /// cluster switches, expansion chassis, devices (kind, fdid) and the devices the
    /// scenario passes through to VMs. The file is replaced whole or not at all.
    #[arg(long, value_name = "FILE", conflicts_with = "json", value_parser = OutputFile::parse)]
    pub svg: Option<OutputFile>,
}

/// Runs `smartio topo`.
pub fn run(calibration: &Calibration, args: TopoArgs) -> Result<(), CliError> {
    match &args.svg {
        Some(file) => picture(calibration, &args.scenario, file),
        None => report(calibration, &args.scenario, args.json),
    }
}

/// `smartio topo --svg FILE`: the picture of the scenario, and what it shows.
fn picture(calibration: &Calibration, scenario: &str, file: &OutputFile) -> Result<(), CliError> {
    let done = crate::picture::write(scenario, calibration, file)?;
    print!("{}", render::wrapped(&done.written, "", "  "));
    print!("{}", render::wrapped(&done.shows, "  ", "  "));
    Ok(())
}

/// `smartio topo`: the fabric's report, as a table or JSON.
fn report(calibration: &Calibration, scenario: &str, json: bool) -> Result<(), CliError> {
    // Table sizes as the simulations see them (calibration fills what the scenario
    // leaves out); every chip and link must have timing, as for a run.
    let fabric = smartio_cluster::load_calibrated_fabric(scenario, calibration)?;
    let report = fabric.report();
    if json {
        print_json(&report)?;
    } else {
        print!("{}", render::topology(&report));
    }
    Ok(())
}
