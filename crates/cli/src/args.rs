//! The command line: `smartio`'s global options and its table of commands. Each command's
//! options are its own module's clap type (`fio::FioArgs`, `bench::Bench`, …); each value's
//! range check is in [`crate::values`].

use clap::{Parser, Subcommand};

/// The widest a help line gets (on a wider terminal, or when not on a terminal).
pub const HELP_WIDTH: usize = 100;

#[derive(Parser, Debug)]
#[command(
    name = "smartio",
    version,
    about = "Emulated PCIe/NTB clusters running SmartIO",
    // Help wraps at the terminal's width, at most 100 columns (100 when not a terminal).
    max_term_width = HELP_WIDTH,
    after_help = "Sizes are binary: 4K = 4KiB = 4096 bytes (4KB is refused). Durations name \
                  their unit: 500us, 10ms, 1s."
)]
pub struct Cli {
    /// Calibration file (default: the embedded calibration/default.toml).
    #[arg(long, global = true)]
    pub calibration: Option<String>,
    /// Run even when the input is estimated to take more than 60 s of wall time or 2 GiB of
    /// memory (every command but the servers is estimated before it starts and refused
    /// over that budget; with this option the estimate is printed and the run starts).
    #[arg(long, global = true)]
    pub no_budget: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the shipped scenarios.
    Scenarios,
    /// Print each host's PCI tree and address map, or draw the whole cluster (--svg FILE).
    Topo(crate::topo::TopoArgs),
    /// List every device SmartIO can lend: its cluster-wide id, lender and who uses it.
    Devices(crate::devices::DevicesArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        bench: crate::bench::Bench,
    },
    /// Round-trip latency between two hosts' CPUs through NTB-mapped segments (--from,
    /// --to), or between two devices' kernels by peer-to-peer stores (--device-a,
    /// --device-b).
    Pingpong(crate::pingpong::PingpongArgs),
    /// A fio-like block workload on an NVMe, through the native NVMe driver or a client of
    /// the distributed NVMe driver (--method).
    Fio(crate::fio::FioArgs),
    /// An iperf2-like TCP-style throughput test between hosts' NICs (own or borrowed): a
    /// server, clients with parallel streams, a report every interval of virtual time.
    Iperf(crate::iperf::IperfArgs),
    /// Applications on local and lent devices: CNN training, multi-stream video analysis.
    App {
        #[command(subcommand)]
        app: crate::app::App,
    },
    /// The papers' experiments on the device API and the distributed NVMe driver: a table
    /// (or JSON), and SVG figures with --plots DIR.
    Exp(crate::exp::ExpArgs),
    /// Run the papers' reproduced figures: each paper statement (with its source line), the
    /// emulated result and a verdict computed by a stated rule; --html writes a report.
    Repro(crate::repro::ReproArgs),
    /// A short tour: lending an NVMe and a DMA engine, sharing an NVMe and passing it to VMs,
    /// on three shipped scenarios (back-to-back, cluster-switch, vm-back-to-back), each
    /// figure measured as it is printed.
    Demo,
    /// Sweeps: a grid of independent runs (scenario × options) in parallel on every core,
    /// one JSON line per run; --shard I/N splits it across machines, `merge` joins the shards.
    Sweep {
        #[command(subcommand)]
        sweep: crate::sweep::args::Sweep,
    },
    /// The live engine: `cluster up` runs a scenario on the wall clock with hosts' RAM in
    /// shared memory, for SISCI programs (libsisci) to run on; `cluster down` stops it.
    Cluster {
        #[command(subcommand)]
        cluster: crate::cluster::ClusterCommand,
    },
    /// Serve a host's view of the cluster to real clients: `serve nbd` exports an NVMe
    /// namespace over NBD (fio's nbd engine, nbdcopy, qemu-img, nbdfuse).
    Serve {
        #[command(subcommand)]
        serve: crate::serve::Serve,
    },
}
