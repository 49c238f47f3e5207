//! `smartio bench pio`: remote-store (PIO) throughput — one host's CPU stores into another
//! host's segment through the NTB, per block size.

use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use crate::values::{repeat, transfer_size};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{bench_pio, PioBenchConfig};

/// `bench pio` arguments.
#[derive(clap::Args, Debug)]
pub struct PioArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// The storing host.
    #[arg(long)]
    pub from: String,
    /// The host owning the segment.
    #[arg(long)]
    pub to: String,
    /// Block sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G, e.g. 64,4K,1M.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        value_parser = transfer_size,
        default_value = "64,256,1K,4K,16K,64K,256K,1M,4M"
    )]
    pub sizes: Vec<u64>,
    /// Blocks per size, 1 to 1000 (the median is reported).
    #[arg(long, default_value = "5", value_name = "N", value_parser = repeat)]
    pub repeat: u32,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `bench pio`.
pub fn run(calibration: &Calibration, args: PioArgs) -> Result<(), CliError> {
    let PioArgs {
        scenario,
        from,
        to,
        sizes,
        repeat,
        json,
        seed,
    } = args;
    let cluster = Cluster::seeded(&scenario, calibration, seed)?;
    let config = PioBenchConfig {
        from,
        to,
        sizes,
        repeat,
    };
    let samples = bench_pio(&cluster, &config)?;
    if json {
        print_json(&samples)?;
    } else {
        print!(
            "{}",
            render::wrapped(
                &format!(
                    "remote stores on {scenario}: {} CPU -> {} segment, {} repeats per size",
                    config.from, config.to, repeat
                ),
                "",
                "  "
            )
        );
        println!("{}", render::pio_table(&samples));
    }
    Ok(())
}
