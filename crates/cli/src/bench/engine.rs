//! `smartio bench engine`: how fast the timed engine runs — simulated TLP arrivals per
//! wall-clock second, DMA copies of 4 MiB on local-chassis (the one command that reads the
//! wall clock, to measure the engine itself).

use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use crate::values::engine_bytes;
use smartio_calibration::Calibration;
use smartio_workloads::bench_engine;

/// `bench engine` arguments.
#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    /// Bytes to stream (K, M, G = KiB, MiB, GiB): a multiple of 8M (one 4 MiB copy
    /// each way), 8M to 256G.
    #[arg(long, default_value = "2G", value_name = "SIZE", value_parser = engine_bytes)]
    pub bytes: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `smartio bench engine`: the engine's TLP arrivals per second.
pub fn run(calibration: &Calibration, args: EngineArgs) -> Result<(), CliError> {
    let result = bench_engine(calibration, args.bytes)?;
    if args.json {
        print_json(&result)?;
    } else {
        print!("{}", render::wrapped(&format!(
            "{} TLP arrivals in {:.3} s wall ({:.3} ms simulated): {:.1} million TLP arrivals per second",
            result.tlp_arrivals,
            result.wall_seconds,
            result.simulated_seconds * 1e3,
            result.tlp_arrivals_per_s / 1e6
        ), "", "  "));
    }
    Ok(())
}
