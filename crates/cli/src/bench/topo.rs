//! `smartio bench topo`: wall time and peak memory of bringing up a large cluster — a
//! three-level cascade of 24-port cluster switches with N hosts, parsed, built and started as
//! every command does before it runs.

use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use smartio_calibration::Calibration;

/// `bench topo` arguments.
#[derive(clap::Args, Debug)]
pub struct TopoBenchArgs {
    /// Hosts, the lender of an NVMe included: 2 to 10000 (the scenario limit).
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(2..=smartio_workloads::topo_bench::MAX_HOSTS))]
    pub hosts: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `smartio bench topo`: how long a cluster of `--hosts` hosts takes to parse, build and
/// start.
pub fn run(calibration: &Calibration, args: TopoBenchArgs) -> Result<(), CliError> {
    let r = smartio_workloads::bench_topo(calibration, args.hosts)?;
    if args.json {
        print_json(&r)?;
    } else {
        let memory = r.peak_memory_bytes.map_or_else(
            || "peak memory unknown".to_string(),
            |b| format!("peak memory {:.0} MiB", b as f64 / f64::from(1u32 << 20)),
        );
        print!("{}", render::wrapped(&format!(
            "{} hosts, {} cluster switches, {} fabric nodes: {:.3} s (parse {:.3} s, build {:.3} s, start {:.3} s), {memory}",
            r.hosts, r.cluster_switches, r.nodes, r.total_seconds, r.parse_seconds,
            r.build_seconds, r.start_seconds
        ), "", "  "));
    }
    Ok(())
}
