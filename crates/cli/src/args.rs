//! The command line: every command and option of `smartio` (clap types); each value's range
//! check is in [`crate::values`].

use crate::values::{
    block_size, device, engine_bytes, fio_ops, iodepth, iterations, jobs, nsid, percent,
    range_size, repeat, runtime, streams, transfer_size, write_len, Direction,
};
use clap::{Parser, Subcommand, ValueEnum};
use smartio_platform::SimDuration;

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
    Topo {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Draw the cluster into FILE as an SVG picture instead: hosts, NTB adapters, cables,
        /// cluster switches, expansion chassis, devices (kind, fdid) and the devices the
        /// scenario passes through to VMs. The file is replaced whole or not at all.
        #[arg(long, value_name = "FILE", conflicts_with = "json", value_parser = crate::outfile::OutputFile::parse)]
        svg: Option<crate::outfile::OutputFile>,
    },
    /// List every device SmartIO can lend: its cluster-wide id, lender and who uses it.
    Devices {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        bench: Bench,
    },
    /// Round-trip latency between two hosts' CPUs through NTB-mapped segments (--from,
    /// --to), or between two devices' kernels by peer-to-peer stores (--device-a,
    /// --device-b).
    Pingpong(PingpongArgs),
    /// A fio-like block workload on an NVMe, through the native NVMe driver or a client of
    /// the distributed NVMe driver (--method).
    Fio(FioArgs),
    /// An iperf2-like TCP-style throughput test between hosts' NICs (own or borrowed): a
    /// server, clients with parallel streams, a report every interval of virtual time.
    Iperf(IperfArgs),
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
        sweep: crate::sweep::Sweep,
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

#[derive(clap::Args, Debug)]
pub struct PingpongArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// The host that pings.
    #[arg(
        long,
        required_unless_present = "device_a",
        conflicts_with_all = ["device_a", "device_b"]
    )]
    pub from: Option<String>,
    /// The host that echoes.
    #[arg(long, required_unless_present = "device_a", conflicts_with_all = ["device_a", "device_b"])]
    pub to: Option<String>,
    /// The pinging device (a GPU or DMA test device): `gpu0`, or `lender:gpu0` to borrow it.
    #[arg(long, requires = "device_b", value_parser = device)]
    pub device_a: Option<String>,
    /// The echoing device.
    #[arg(long, requires = "device_a", value_parser = device)]
    pub device_b: Option<String>,
    /// Host the devices are attached to (default: the scenario's first host).
    #[arg(long, requires = "device_a")]
    pub host: Option<String>,
    /// Run the ping-pong as kernels on two GPUs timed by the pinging GPU's cycle counter
    /// (the default when both devices are GPUs; with --gpu, anything else is refused).
    #[arg(long, requires = "device_a")]
    pub gpu: bool,
    /// Where the GPU kernels' counters live: each GPU's memory, or the host's RAM.
    #[arg(long, value_enum, requires = "device_a")]
    pub counters: Option<Counters>,
    /// Round trips, 1 to 100000000 (about five minutes of wall time at the most; the
    /// percentiles settle long before).
    /// Default: 1000, or 100000 between GPUs (the papers' count).
    #[arg(long, value_name = "N", value_parser = iterations)]
    pub iterations: Option<u32>,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the time went (--breakdown, --trace).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

#[derive(clap::Args, Debug)]
pub struct IperfArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// The receiving host and its NIC: `HOST` (its nic0) or `HOST=DEVICE`.
    #[arg(long, value_name = "HOST[=DEVICE]")]
    pub server: String,
    /// A sending host and the NIC it uses: its own (`lender=nic0`) or a lender's, borrowed
    /// for the run (`borrower=lender:nic0`). Repeat for several clients.
    #[arg(long, value_name = "HOST=DEVICE", required = true)]
    pub client: Vec<String>,
    /// Parallel streams per client, 1 to 64 (iperf -P).
    #[arg(long, short = 'P', default_value = "1", value_name = "N", value_parser = streams)]
    pub parallel: u32,
    /// How long the clients write, in virtual time, e.g. 10ms, 1s (iperf -t); a
    /// millisecond of 100 Gb/s takes about a tenth of a second of wall time.
    #[arg(long, short = 't', default_value = "10ms", value_name = "TIME", value_parser = runtime)]
    pub time: SimDuration,
    /// Report interval in virtual time (iperf -i), at most --time [default: a quarter of
    /// --time].
    #[arg(long, short = 'i', value_name = "TIME", value_parser = runtime)]
    pub interval: Option<SimDuration>,
    /// Bytes per write, 1 to 16M (iperf -l).
    #[arg(long, short = 'l', default_value = "128K", value_name = "SIZE", value_parser = write_len)]
    pub len: u64,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct FioArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Host whose CPUs run the workload.
    #[arg(long)]
    pub host: String,
    /// NVMe device in that host's tree, or `lender:nvme0` to borrow it.
    #[arg(long, value_parser = device)]
    pub device: String,
    /// read, write, randread, randwrite or randrw.
    #[arg(long, default_value = "randread")]
    pub rw: String,
    /// Block size in bytes (K, M = KiB, MiB), a multiple of the namespace's LBA size and at
    /// most the controller's maximum transfer (MDTS), e.g. 4k.
    #[arg(long, default_value = "4k", value_name = "SIZE", value_parser = block_size)]
    pub bs: u64,
    /// I/Os in flight per job, 1 to 4095 (an NVMe queue of the emulated controller has 4096
    /// entries, one always empty); jobs × iodepth × bs is at most 1 GiB of buffers.
    #[arg(long, default_value = "1", value_name = "N", value_parser = iodepth)]
    pub iodepth: u32,
    /// Total I/Os over all jobs, 1 to 1000000000 (about three hours of wall time at the
    /// emulator's ~100k I/Os per second) [default: 10000 unless --runtime].
    #[arg(long, conflicts_with = "runtime", value_name = "N", value_parser = fio_ops)]
    pub ops: Option<u64>,
    /// Virtual run time instead of --ops, e.g. 10ms, 1s: more than 0 and at most 3600s (an
    /// hour of virtual time takes an hour or more of wall time). Units ns, us, ms, s; the
    /// unit is required (a bare 10 is refused).
    #[arg(long, value_name = "TIME", value_parser = runtime)]
    pub runtime: Option<SimDuration>,
    /// Jobs, each on its own CPU and its own I/O queue pair; more jobs than the controller
    /// (or manager) grants pairs is an error that says how many it grants.
    #[arg(long, default_value = "1", value_name = "N", value_parser = jobs)]
    pub jobs: u32,
    /// Check every byte read against what was written (first writes the whole range,
    /// which may then be at most 4 GiB).
    #[arg(long)]
    pub verify: bool,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Bytes of the namespace to use, from its start (default: the namespace, at most 1G).
    /// Blocks written are kept in memory unless the namespace has a backing file.
    #[arg(long, value_name = "SIZE", value_parser = range_size)]
    pub size: Option<u64>,
    /// Namespace id, 1 to 4294967294 (0 is no namespace, 0xFFFFFFFF means all).
    #[arg(long, default_value = "1", value_name = "NSID", value_parser = nsid)]
    pub nsid: u32,
    /// Percentage of reads, 0 to 100; only with --rw randrw [default: 50].
    #[arg(long, value_name = "PERCENT", value_parser = percent)]
    pub rwmixread: Option<u32>,
    /// Native driver completion mode: interrupt or poll [default: interrupt]. The
    /// distributed driver's clients (--method nvme-client, nvme-block) always poll.
    #[arg(long)]
    pub mode: Option<String>,
    /// Keep the NVMe's namespaces in this file (overrides the scenario's `backing`). A new
    /// file is created sparse at the namespaces' full size (said on stderr); only written
    /// blocks take disk space.
    #[arg(long, value_name = "FILE")]
    pub backing: Option<String>,
    /// How to reach the controller: native (the NVMe driver on --host), nvme-client (a
    /// client of the distributed driver on --host, one queue pair per job, polled) or
    /// nvme-block (the distributed driver's kernel block client on --host: a disk with a
    /// hardware queue and queue pair per job, data through its bounce buffer, polled).
    #[arg(long, default_value = "native")]
    pub method: String,
    /// Host running the distributed driver's manager (with --method nvme-client or
    /// nvme-block).
    #[arg(long)]
    pub manager: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the time went (--breakdown, --trace).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

/// The options of `bench p2p` and `bench gpu-p2p`.
#[derive(clap::Args, Debug)]
pub struct P2pArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Host whose CPU drives the source (default: the scenario's first host).
    #[arg(long)]
    pub host: Option<String>,
    /// The device whose copy engine moves the data: `gpu0`, or `lender:gpu0` to borrow it.
    #[arg(long, value_parser = device)]
    pub source: String,
    /// The device whose memory is written or read: `gpu1` or `lender2:gpu2`.
    #[arg(long, value_parser = device)]
    pub target: String,
    /// write: source memory to target memory; read: target memory to source memory.
    #[arg(long, value_enum, default_value = "write")]
    pub direction: Direction,
    /// Transfer sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G and at most both
    /// devices' memory (a GPU target's: its BAR1 aperture), e.g. 4K,64K,1M,128M.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        value_parser = transfer_size,
        default_value = "4K,16K,64K,256K,1M,4M,16M,64M"
    )]
    pub sizes: Vec<u64>,
    /// Copies per size, 1 to 1000 (the median is reported).
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

/// `bench dma`'s options.
#[derive(clap::Args, Debug)]
pub struct DmaArgs {
    /// A shipped scenario name or a scenario file (with --adapter: default
    /// pxh810-back-to-back, Paper I's machines).
    #[arg(long, required_unless_present = "adapter")]
    pub scenario: Option<String>,
    /// Host whose CPU drives the device (default: the host that has the device; with
    /// --adapter, the first host with an NTB adapter).
    #[arg(long)]
    pub host: Option<String>,
    /// The DMA test device.
    #[arg(long, default_value = "dma0", conflicts_with = "adapter", value_parser = device)]
    pub device: String,
    /// Drive the DMA engine of the host's NTB adapter 0 instead (through a DMA queue, as
    /// SISCI does): between a segment in the host's RAM and one in the RAM of the host its
    /// adapter is cabled to (Paper I Fig. 4a).
    #[arg(long)]
    pub adapter: bool,
    /// write: device memory to host RAM; read: host RAM to device memory. With --adapter,
    /// write pushes host RAM into the peer's RAM, read pulls the peer's RAM into host RAM.
    #[arg(long, value_enum, default_value = "write")]
    pub direction: Direction,
    /// Transfer sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G and at most the
    /// device's memory (with --adapter, what both hosts' RAM holds), e.g. 4K,64K,1M,128M.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "SIZES",
        value_parser = transfer_size,
        default_value = "4K,16K,64K,256K,512K,1M,4M,16M,64M,128M"
    )]
    pub sizes: Vec<u64>,
    /// Copies per size, 1 to 1000 (the median is reported; a deterministic model
    /// settles within a few).
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
    /// Where the time went (--breakdown, --trace; not with --adapter).
    #[command(flatten)]
    pub explain: crate::explain::ExplainArgs,
}

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// DMA throughput of the DMA test device per transfer size (like CUDA bandwidthTest), or
    /// with --adapter of the host's NTB adapter's own DMA engine, RAM to remote RAM.
    Dma(DmaArgs),
    /// Peer-to-peer DMA throughput between two devices' memories per transfer size (the
    /// GPU-to-GPU bandwidth test; between GPUs the same as `bench gpu-p2p`).
    P2p(P2pArgs),
    /// GPU copy throughput as CUDA bandwidthTest measures it: pinned host memory, copies
    /// queued on a stream between two GPU events (Paper V Figs. 22-23).
    GpuBandwidth {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// Host whose CPU runs the program (default: the host that has the GPU; a VM is
        /// host/vm).
        #[arg(long)]
        host: Option<String>,
        /// The GPU: `gpu0`, or `lender:gpu0` to borrow it.
        #[arg(long, default_value = "gpu0", value_parser = device)]
        device: String,
        /// h2d: pinned host memory to GPU memory; d2h: the reverse; d2d: inside the GPU.
        #[arg(long, value_enum, default_value = "h2d")]
        direction: GpuDirection,
        /// Transfer sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G and at most the GPU's
        /// memory, e.g. 4K,64K,1M,128M.
        #[arg(
            long,
            value_delimiter = ',',
            value_name = "SIZES",
            value_parser = transfer_size,
            default_value = "4K,16K,64K,256K,1M,4M,16M,64M,128M"
        )]
        sizes: Vec<u64>,
        /// Copies queued between the two events of one sample, 1 to 1000.
        #[arg(long, default_value = "10", value_name = "N", value_parser = repeat)]
        copies: u32,
        /// Samples per size, 1 to 1000 (the median is reported).
        #[arg(long, default_value = "5", value_name = "N", value_parser = repeat)]
        repeat: u32,
        /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
        /// its random choices: the same seed gives the same output byte for byte (any 64-bit
        /// number).
        #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
        seed: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Device-to-device copies between two GPUs' memories, each timed by GPU events with a
    /// dummy kernel launched between copies (Paper V Figs. 24 and 26).
    GpuP2p(P2pArgs),
    /// Remote-store (PIO) throughput: one host's CPU stores into another's segment.
    Pio {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// The storing host.
        #[arg(long)]
        from: String,
        /// The host owning the segment.
        #[arg(long)]
        to: String,
        /// Block sizes (K, M, G = KiB, MiB, GiB), each 1 byte to 1G, e.g. 64,4K,1M.
        #[arg(
            long,
            value_delimiter = ',',
            value_name = "SIZES",
            value_parser = transfer_size,
            default_value = "64,256,1K,4K,16K,64K,256K,1M,4M"
        )]
        sizes: Vec<u64>,
        /// Blocks per size, 1 to 1000 (the median is reported).
        #[arg(long, default_value = "5", value_name = "N", value_parser = repeat)]
        repeat: u32,
        /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
        /// its random choices: the same seed gives the same output byte for byte (any 64-bit
        /// number).
        #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
        seed: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Simulated TLP arrivals per wall-clock second: DMA copies of 4 MiB on local-chassis,
    /// half of --bytes written to host RAM, half read from it.
    Engine {
        /// Bytes to stream (K, M, G = KiB, MiB, GiB): a multiple of 8M (one 4 MiB copy
        /// each way), 8M to 256G.
        #[arg(long, default_value = "2G", value_name = "SIZE", value_parser = engine_bytes)]
        bytes: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wall time and peak memory of bringing up a large cluster: a three-level cascade of
    /// 24-port cluster switches with N hosts, parsed, built and started as every command
    /// does before it runs.
    Topo {
        /// Hosts, the lender of an NVMe included: 2 to 10000 (the scenario limit).
        #[arg(long, default_value_t = 1000, value_name = "N",
              value_parser = clap::value_parser!(u64).range(2..=smartio_workloads::topo_bench::MAX_HOSTS))]
        hosts: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum GpuDirection {
    H2d,
    D2h,
    D2d,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Counters {
    Gpu,
    Host,
}
