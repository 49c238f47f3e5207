//! `smartio bench dma --adapter`: the NTB adapter's own DMA engine moving RAM to remote RAM
//! (write, a push) or remote RAM to RAM (read, a pull), driven through a DMA queue as SISCI
//! drives it (Paper I Fig. 4a), with the table `bench dma` prints.

use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::values::Direction;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{bench_adapter_dma, AdapterDmaBenchConfig, DmaDirection};

/// The scenario `--adapter` runs on without `--scenario`: Paper I's machines.
pub const DEFAULT_SCENARIO: &str = "pxh810-back-to-back";

/// `bench dma --adapter`'s options (already range-checked).
#[derive(Debug)]
pub struct AdapterDmaArgs {
    /// `--scenario`.
    pub scenario: Option<String>,
    /// `--host`.
    pub host: Option<String>,
    /// `--direction`.
    pub direction: Direction,
    /// `--sizes`.
    pub sizes: Vec<u64>,
    /// `--repeat`.
    pub repeat: u32,
    /// `--seed`.
    pub seed: u64,
    /// `--json`.
    pub json: bool,
}

/// The first host (in scenario order) with an NTB adapter.
fn first_host_with_an_adapter(cluster: &Cluster, scenario: &str) -> Result<String, Usage> {
    let f = cluster.machine.fabric();
    f.adapters()
        .iter()
        .map(|a| a.host)
        .min()
        .map(|h| f.host(h).name.clone())
        .ok_or_else(|| Usage::NoAdapter {
            scenario: scenario.into(),
        })
}

/// Runs it.
pub fn run(calibration: &Calibration, args: AdapterDmaArgs) -> Result<(), CliError> {
    let scenario = args
        .scenario
        .unwrap_or_else(|| DEFAULT_SCENARIO.to_string());
    let cluster = Cluster::seeded(&scenario, calibration, args.seed)?;
    let host = match args.host {
        Some(h) => h,
        None => first_host_with_an_adapter(&cluster, &scenario)?,
    };
    let direction = match args.direction {
        Direction::Write => DmaDirection::Write,
        Direction::Read => DmaDirection::Read,
    };
    let config = AdapterDmaBenchConfig {
        host,
        direction,
        sizes: args.sizes,
        repeat: args.repeat,
    };
    let run = bench_adapter_dma(&cluster, &config)?;
    if args.json {
        return print_json(&run);
    }
    let what = match direction {
        DmaDirection::Write => format!("writes ({} RAM -> {} RAM)", run.host, run.peer),
        DmaDirection::Read => format!("reads ({} RAM -> {} RAM)", run.peer, run.host),
    };
    print!(
        "{}",
        render::wrapped(
            &format!(
                "Adapter DMA {what} on {scenario} (the DMA engine of {}), {} repeats per \
                 size; MPS {} B, MRRS {} B",
                run.adapter,
                args.repeat,
                cluster.calibration.pcie.max_payload_size.value,
                cluster.calibration.pcie.max_read_request_size.value,
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&run.samples));
    Ok(())
}
