//! `smartio`: run and inspect emulated SmartIO clusters.

#![forbid(unsafe_code)]

mod exp;
mod render;

// Large DMA buffers come and go for every copy; mimalloc reuses them instead of mapping
// fresh zeroed pages from the kernel each time (which cost more than the simulation).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand, ValueEnum};
use smartio_cluster::ClusterOptions;
use smartio_cluster::{Cluster, SHIPPED};
use smartio_drivers::CompletionMode;
use smartio_engine::Calibration;
use smartio_platform::SimDuration;
use smartio_workloads::{
    bench_dma, bench_engine, bench_p2p, bench_pio, device_pingpong, nvme_demo, pingpong, run_fio,
    shm_demo, Amount, DevicePingPongConfig, DmaBenchConfig, DmaDirection, FioConfig, FioResult,
    LatencySummary, P2pConfig, P2pDirection, PingPongConfig, PioBenchConfig, RwMode, Workbench,
};
use smartio_workloads::{nvmeof_compare, share_clients, NvmeofConfig, ShareConfig};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "smartio",
    version,
    about = "Emulated PCIe/NTB clusters running SmartIO"
)]
struct Cli {
    /// Calibration file (default: the embedded calibration/default.toml).
    #[arg(long, global = true)]
    calibration: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the shipped scenarios.
    Scenarios,
    /// Print each host's PCI tree and address map.
    Topo {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
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
    Pingpong {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// The host that pings.
        #[arg(
            long,
            required_unless_present = "device_a",
            conflicts_with_all = ["device_a", "device_b"]
        )]
        from: Option<String>,
        /// The host that echoes.
        #[arg(long, required_unless_present = "device_a", conflicts_with_all = ["device_a", "device_b"])]
        to: Option<String>,
        /// The pinging device (a GPU or DMA test device): `gpu0`, or `lender:gpu0` to
        /// borrow it.
        #[arg(long, requires = "device_b")]
        device_a: Option<String>,
        /// The echoing device.
        #[arg(long, requires = "device_a")]
        device_b: Option<String>,
        /// Host the devices are attached to (default: the scenario's first host).
        #[arg(long, requires = "device_a")]
        host: Option<String>,
        /// Round trips.
        #[arg(long, default_value_t = 1000)]
        iterations: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A fio-like block workload on an NVMe through the native driver.
    Fio(FioArgs),
    /// The papers' experiments on the device API and the distributed NVMe driver: a table
    /// (or JSON) and SVG figures.
    Exp(exp::ExpArgs),
    /// A short tour on a shipped scenario.
    Demo,
}

#[derive(clap::Args, Debug)]
struct FioArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    scenario: String,
    /// Host whose CPUs run the workload.
    #[arg(long)]
    host: String,
    /// NVMe device in that host's tree.
    #[arg(long)]
    device: String,
    /// read, write, randread, randwrite or randrw.
    #[arg(long, default_value = "randread")]
    rw: String,
    /// Block size (a multiple of the namespace's LBA size), e.g. 4k.
    #[arg(long, default_value = "4k")]
    bs: String,
    /// I/Os in flight per job.
    #[arg(long, default_value_t = 1)]
    iodepth: u32,
    /// Total I/Os over all jobs.
    #[arg(long, conflicts_with = "runtime")]
    ops: Option<u64>,
    /// Virtual run time, e.g. 10ms, 1s.
    #[arg(long)]
    runtime: Option<String>,
    /// Jobs, each on its own CPU and queue pair.
    #[arg(long, default_value_t = 1)]
    jobs: u32,
    /// Check every byte read against what was written.
    #[arg(long)]
    verify: bool,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bytes of the namespace to use (default: the namespace, at most 1G).
    #[arg(long)]
    size: Option<String>,
    /// Namespace id.
    #[arg(long, default_value_t = 1)]
    nsid: u32,
    /// Percentage of reads for randrw.
    #[arg(long, default_value_t = 50)]
    rwmixread: u32,
    /// Driver completion mode: interrupt or poll.
    #[arg(long, default_value = "interrupt")]
    mode: String,
    /// Keep the namespaces in this file (overrides the scenario's `backing`).
    #[arg(long)]
    backing: Option<String>,
    /// How to reach the controller: native (the NVMe driver on --host) or nvme-client (a
    /// client of the distributed driver on --host, one queue pair per job, polled).
    #[arg(long, default_value = "native")]
    method: String,
    /// Host running the distributed driver's manager (with --method nvme-client).
    #[arg(long)]
    manager: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// DMA throughput of the DMA test device per transfer size (like CUDA bandwidthTest).
    Dma {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// Host whose CPU drives the device (default: the host that has the device).
        #[arg(long)]
        host: Option<String>,
        /// The DMA test device.
        #[arg(long, default_value = "dma0")]
        device: String,
        /// write: device memory to host RAM; read: host RAM to device memory.
        #[arg(long, value_enum, default_value = "write")]
        direction: Direction,
        /// Transfer sizes, e.g. 4K,64K,1M,128M.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "4K,16K,64K,256K,512K,1M,4M,16M,64M,128M"
        )]
        sizes: Vec<String>,
        /// Copies per size.
        #[arg(long, default_value_t = 5)]
        repeat: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Peer-to-peer DMA throughput between two devices' memories per transfer size (the
    /// GPU-to-GPU bandwidth test).
    P2p {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// Host whose CPU drives the source (default: the scenario's first host).
        #[arg(long)]
        host: Option<String>,
        /// The device whose copy engine moves the data: `gpu0`, or `lender:gpu0` to borrow it.
        #[arg(long)]
        source: String,
        /// The device whose memory is written or read: `gpu1` or `lender2:gpu2`.
        #[arg(long)]
        target: String,
        /// write: source memory to target memory; read: target memory to source memory.
        #[arg(long, value_enum, default_value = "write")]
        direction: Direction,
        /// Transfer sizes, e.g. 4K,64K,1M,128M.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "4K,16K,64K,256K,1M,4M,16M,64M"
        )]
        sizes: Vec<String>,
        /// Copies per size.
        #[arg(long, default_value_t = 5)]
        repeat: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
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
        /// Block sizes, e.g. 64,4K,1M.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "64,256,1K,4K,16K,64K,256K,1M,4M"
        )]
        sizes: Vec<String>,
        /// Blocks per size.
        #[arg(long, default_value_t = 5)]
        repeat: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Simulated TLP arrivals per wall-clock second.
    Engine {
        /// Bytes to stream (half written, half read).
        #[arg(long, default_value = "2G")]
        bytes: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Direction {
    Write,
    Read,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("smartio: {message}");
            ExitCode::FAILURE
        }
    }
}

fn load_calibration(path: Option<&str>) -> Result<Calibration, String> {
    match path {
        None => Ok(Calibration::default_embedded()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("{p}: cannot read the calibration: {e}"))?;
            Calibration::parse(p, &text).map_err(|e| e.to_string())
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let calibration = load_calibration(cli.calibration.as_deref())?;
    match cli.command {
        Command::Scenarios => {
            for s in SHIPPED {
                println!(
                    "{:<26} {}",
                    s.name,
                    smartio_cluster::scenarios::description(s)
                );
            }
            Ok(())
        }
        Command::Topo { scenario, json } => {
            let mut fabric = smartio_cluster::load_fabric(&scenario).map_err(|e| e.to_string())?;
            // Table sizes as the simulations see them (calibration fills what the scenario
            // leaves out).
            calibration.configure_fabric(&mut fabric);
            let report = fabric.report();
            if json {
                print_json(&report)?;
            } else {
                print!("{}", render::topology(&report));
            }
            Ok(())
        }
        Command::Bench {
            bench:
                Bench::Dma {
                    scenario,
                    host,
                    device,
                    direction,
                    sizes,
                    repeat,
                    json,
                },
        } => {
            let sizes = parse_sizes(&sizes)?;
            let cluster = Cluster::new(&scenario, &calibration).map_err(|e| e.to_string())?;
            let host = match host {
                Some(h) => h,
                None => host_of_device(&cluster, &device)?,
            };
            let direction = match direction {
                Direction::Write => DmaDirection::Write,
                Direction::Read => DmaDirection::Read,
            };
            let config = DmaBenchConfig {
                host,
                device,
                direction,
                sizes,
                repeat,
            };
            let samples = bench_dma(&cluster, &config).map_err(|e| e.to_string())?;
            if json {
                print_json(&samples)?;
            } else {
                println!(
                    "DMA {} on {} ({}:{}), {} repeats per size",
                    if matches!(direction, DmaDirection::Write) {
                        "writes (device -> host RAM)"
                    } else {
                        "reads (host RAM -> device)"
                    },
                    scenario,
                    config.host,
                    config.device,
                    repeat.max(1)
                );
                println!("{}", render::dma_table(&samples));
            }
            Ok(())
        }
        Command::Bench {
            bench: Bench::Engine { bytes, json },
        } => {
            let bytes = smartio_fabric::units::parse_size(&bytes)?;
            let result = bench_engine(&calibration, bytes).map_err(|e| e.to_string())?;
            if json {
                print_json(&result)?;
            } else {
                println!(
                    "{} TLP arrivals in {:.3} s wall ({:.3} ms simulated): {:.1} million TLP arrivals per second",
                    result.tlp_arrivals,
                    result.wall_seconds,
                    result.simulated_seconds * 1e3,
                    result.tlp_arrivals_per_s / 1e6
                );
            }
            Ok(())
        }
        Command::Devices { scenario, json } => {
            let cluster = Cluster::new(&scenario, &calibration).map_err(|e| e.to_string())?;
            let bench = Workbench::with_devices(&cluster, &first_host(&cluster)?, &[])
                .map_err(|e| e.to_string())?;
            let devices = bench.smartio.devices();
            if json {
                print_json(&devices)?;
            } else {
                println!(
                    "devices registered with SmartIO on {scenario} ({} devices)",
                    devices.len()
                );
                println!("{}", render::device_table(&devices));
            }
            Ok(())
        }
        Command::Bench {
            bench:
                Bench::P2p {
                    scenario,
                    host,
                    source,
                    target,
                    direction,
                    sizes,
                    repeat,
                    json,
                },
        } => {
            let sizes = parse_sizes(&sizes)?;
            let cluster = Cluster::new(&scenario, &calibration).map_err(|e| e.to_string())?;
            let host = match host {
                Some(h) => h,
                None => first_host(&cluster)?,
            };
            let direction = match direction {
                Direction::Write => P2pDirection::Write,
                Direction::Read => P2pDirection::Read,
            };
            let config = P2pConfig {
                host,
                source,
                target,
                direction,
                sizes,
                repeat,
            };
            let samples = bench_p2p(&cluster, &config).map_err(|e| e.to_string())?;
            if json {
                print_json(&samples)?;
            } else {
                let (from, to) = match direction {
                    P2pDirection::Write => (&config.source, &config.target),
                    P2pDirection::Read => (&config.target, &config.source),
                };
                println!(
                    "peer-to-peer DMA {} on {scenario}: {from} memory -> {to} memory, driven by {}'s CPU through {}'s copy engine, {} repeats per size",
                    if matches!(direction, P2pDirection::Write) {
                        "writes"
                    } else {
                        "reads"
                    },
                    config.host,
                    config.source,
                    repeat.max(1)
                );
                println!("{}", render::dma_table(&samples));
            }
            Ok(())
        }
        Command::Pingpong {
            scenario,
            device_a: Some(a),
            device_b: Some(b),
            host,
            iterations,
            json,
            ..
        } => {
            let cluster = Cluster::new(&scenario, &calibration).map_err(|e| e.to_string())?;
            let host = match host {
                Some(h) => h,
                None => first_host(&cluster)?,
            };
            let config = DevicePingPongConfig {
                host,
                a,
                b,
                iterations,
            };
            let result = device_pingpong(&cluster, &config).map_err(|e| e.to_string())?;
            if json {
                print_json(&result)?;
            } else {
                print!("{}", render::device_pingpong(&result));
            }
            Ok(())
        }
        Command::Pingpong {
            scenario,
            from,
            to,
            iterations,
            json,
            ..
        } => {
            let (Some(from), Some(to)) = (from, to) else {
                return Err(
                    "pingpong needs --from and --to (hosts), or --device-a and --device-b".into(),
                );
            };
            let cluster = Cluster::new(&scenario, &calibration).map_err(|e| e.to_string())?;
            let config = PingPongConfig {
                from,
                to,
                iterations,
            };
            let result = pingpong(&cluster, &config).map_err(|e| e.to_string())?;
            if json {
                print_json(&result)?;
            } else {
                println!(
                    "ping-pong on {}: {} -> {} -> {}, {} round trips (8-byte stores into the peer's segment, polled locally)",
                    result.scenario, result.from, result.to, result.from, result.iterations
                );
                println!("{}", render::latency_table("round trip", &result.rtt_ns));
            }
            Ok(())
        }
        Command::Bench {
            bench:
                Bench::Pio {
                    scenario,
                    from,
                    to,
                    sizes,
                    repeat,
                    json,
                },
        } => {
            let sizes = parse_sizes(&sizes)?;
            if let Some(bad) = sizes.iter().find(|&&s| s == 0) {
                return Err(format!(
                    "block size {bad} is not allowed; give sizes of 1 byte or more"
                ));
            }
            let cluster = Cluster::new(&scenario, &calibration).map_err(|e| e.to_string())?;
            let config = PioBenchConfig {
                from,
                to,
                sizes,
                repeat,
            };
            let samples = bench_pio(&cluster, &config).map_err(|e| e.to_string())?;
            if json {
                print_json(&samples)?;
            } else {
                println!(
                    "remote stores on {scenario}: {} CPU -> {} segment, {} repeats per size",
                    config.from,
                    config.to,
                    repeat.max(1)
                );
                println!("{}", render::pio_table(&samples));
            }
            Ok(())
        }
        Command::Fio(args) => fio(&calibration, args),
        Command::Exp(args) => exp::run(&calibration, args),
        Command::Demo => demo(&calibration),
    }
}

/// Prints a result as pretty JSON.
fn parse_duration(text: &str) -> Result<SimDuration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?}: expected a duration such as 500us, 10ms or 2s"))?;
    let ns = match unit.trim() {
        "ns" => value,
        "us" => value * 1e3,
        "ms" => value * 1e6,
        "s" | "" => value * 1e9,
        u => return Err(format!("{text:?}: unknown unit {u:?} (ns, us, ms, s)")),
    };
    if ns <= 0.0 {
        return Err(format!("{text:?}: must be positive"));
    }
    Ok(SimDuration::from_ns_f64(ns))
}

fn fio(calibration: &Calibration, a: FioArgs) -> Result<(), String> {
    let rw: RwMode = a.rw.parse().map_err(|e| format!("--rw: {e}"))?;
    let mode: CompletionMode = a.mode.parse().map_err(|e| format!("--mode: {e}"))?;
    if a.rwmixread > 100 {
        return Err(format!(
            "--rwmixread {}: a percentage, 0..=100",
            a.rwmixread
        ));
    }
    if a.ops == Some(0) {
        return Err("--ops 0: at least one I/O".into());
    }
    let method = match (a.method.as_str(), a.manager) {
        ("native", None) => smartio_workloads::fio::FioMethod::Native,
        ("native", Some(_)) => {
            return Err("--manager: only with --method nvme-client".into());
        }
        ("nvme-client", Some(manager)) => smartio_workloads::fio::FioMethod::NvmeClient { manager },
        ("nvme-client", None) => {
            return Err(
                "--method nvme-client needs --manager HOST (the host running the distributed driver's manager)"
                    .into(),
            );
        }
        (m, _) => {
            return Err(format!(
                "--method: unknown method {m:?} (native, nvme-client)"
            ))
        }
    };
    let bs = smartio_fabric::units::parse_size(&a.bs).map_err(|e| format!("--bs: {e}"))?;
    let size = a
        .size
        .as_deref()
        .map(smartio_fabric::units::parse_size)
        .transpose()
        .map_err(|e| format!("--size: {e}"))?;
    let amount = match (a.ops, a.runtime.as_deref()) {
        (Some(n), _) => Amount::Ops(n),
        (None, Some(t)) => {
            Amount::Runtime(parse_duration(t).map_err(|e| format!("--runtime {e}"))?)
        }
        (None, None) => Amount::Ops(10_000),
    };
    let mut options = ClusterOptions::default();
    if let Some(path) = &a.backing {
        options
            .nvme_backing
            .push((format!("{}.{}", a.host, a.device), path.into()));
    }
    let cluster =
        Cluster::with_options(&a.scenario, calibration, &options).map_err(|e| e.to_string())?;
    let config = FioConfig {
        host: a.host,
        device: a.device,
        rw,
        bs,
        iodepth: a.iodepth,
        amount,
        jobs: a.jobs,
        verify: a.verify,
        seed: a.seed,
        size,
        nsid: a.nsid,
        rwmixread: a.rwmixread,
        mode,
        method,
    };
    let result = run_fio(&cluster, &config).map_err(|e| e.to_string())?;
    if a.json {
        print_json(&result)
    } else {
        print!("{}", render::fio_summary(&a.scenario, &result));
        Ok(())
    }
}

fn print_json(value: &impl serde::Serialize) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Parses sizes like `4K,1M` given on the command line.
fn parse_sizes(sizes: &[String]) -> Result<Vec<u64>, String> {
    sizes
        .iter()
        .map(|s| smartio_fabric::units::parse_size(s))
        .collect()
}

/// The scenario's first host (where commands run when no host is named).
fn first_host(cluster: &Cluster) -> Result<String, String> {
    cluster
        .sim
        .fabric()
        .hosts()
        .first()
        .map(|h| h.name.clone())
        .ok_or_else(|| "the scenario has no host".to_string())
}

fn host_of_device(cluster: &Cluster, device: &str) -> Result<String, String> {
    let fabric = cluster.sim.fabric();
    let owners: Vec<&str> = fabric
        .endpoints()
        .iter()
        .filter(|e| e.name == device)
        .map(|e| fabric.host(e.host).name.as_str())
        .collect();
    match owners.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(format!("no host has a device {device:?}")),
        many => Err(format!(
            "several hosts have {device:?} ({}); choose one with --host",
            many.join(", ")
        )),
    }
}

fn demo(calibration: &Calibration) -> Result<(), String> {
    println!("smartio demo — scenario local-chassis\n");
    let fabric = smartio_cluster::load_fabric("local-chassis").map_err(|e| e.to_string())?;
    print!("{}", render::topology(&fabric.report()));
    println!();
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let cluster = Cluster::new("local-chassis", calibration).map_err(|e| e.to_string())?;
        let config = DmaBenchConfig {
            host: "local".into(),
            device: "dma0".into(),
            direction,
            sizes: vec![4 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20],
            repeat: 3,
        };
        let samples = bench_dma(&cluster, &config).map_err(|e| e.to_string())?;
        println!(
            "dma0 DMA {} through PEX8796 + 2 x PEX8733 (Gen3 x16):",
            if matches!(direction, DmaDirection::Write) {
                "writes to host RAM"
            } else {
                "reads from host RAM"
            }
        );
        println!("{}\n", render::dma_table(&samples));
    }
    let timing =
        smartio_engine::Timing::resolve(&fabric, calibration).map_err(|e| e.to_string())?;
    let mps = timing.sizes.mps;
    if let Some(link) = timing.links.first() {
        println!(
            "Model: Gen3 x16 with MPS {mps} B carries {:.2} GB/s of payload ({} B overhead per TLP, DLLP share {:.0}%).",
            link.payload_bandwidth(mps) / 1e9,
            link.overhead,
            calibration.pcie.dllp_overhead_fraction.value * 100.0
        );
    }
    println!();
    shared_memory_demo(calibration)?;
    let local = nvme_demo_step(calibration)?;
    lending_demo_step(calibration, &local)?;
    shared_nvme_demo_step(calibration)?;
    nvmeof_demo_step(calibration)?;
    println!("Next: `smartio devices --scenario cluster-switch`, `smartio topo --scenario back-to-back`, `smartio pingpong --scenario cluster-switch --from borrower --to lender`, `smartio bench dma --scenario local-chassis-extra-hop`, `smartio fio --scenario local-chassis --host local --device nvme0 --rw randrw --iodepth 8 --size 64M --verify`, `smartio fio --scenario cluster-switch --host borrower --device lender:nvme0 --method nvme-client --manager lender --verify`, `smartio exp sq-placement` (also share-30, multicast, failover --verify, nvmeof-compare).");
    Ok(())
}

/// The demo's distributed-driver step: three hosts share one NVMe, each with its own queue
/// pair, reading concurrently with every byte checked.
fn shared_nvme_demo_step(calibration: &Calibration) -> Result<(), String> {
    println!(
        "Three hosts share one NVMe through the distributed driver — scenario cluster-switch\n"
    );
    let cluster = Cluster::new("cluster-switch", calibration).map_err(|e| e.to_string())?;
    let config = ShareConfig {
        manager: "lender".into(),
        device: "lender:nvme0".into(),
        clients: vec!["borrower".into(), "lender2".into(), "lender".into()],
        extra_client: "borrower".into(),
        ops: 200,
        ..ShareConfig::default()
    };
    let r = share_clients(&cluster, &config)?;
    println!(
        "1. The manager on {} resets {}, owns the admin queues and gets {} I/O queue pairs.",
        r.manager, r.device, r.granted
    );
    println!(
        "2. Each client gets a queue pair from it, writes its own {} KiB, then reads {} random 4 KiB blocks of it at QD1 and checks them, submitting, ringing and polling by itself:",
        config.range_bytes >> 10,
        config.ops
    );
    let rows: Vec<(String, LatencySummary)> = r
        .clients
        .iter()
        .map(|c| {
            (
                format!(
                    "{} (queue {}, {} bytes verified)",
                    c.host, c.qid, c.verified_bytes
                ),
                c.lat_ns,
            )
        })
        .collect();
    println!("{}", render::latency_rows(&rows));
    println!(
        "3. Queue pairs are the limit: once all {} are out, the next request is refused:\n   {}\n",
        r.granted, r.refused
    );
    Ok(())
}

/// The demo's last step: local SmartIO driver, remote SmartIO driver, NVMe-oF over RDMA.
fn nvmeof_demo_step(calibration: &Calibration) -> Result<(), String> {
    println!("Local vs remote vs NVMe-oF — scenario back-to-back\n");
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let r = nvmeof_compare(
        &cluster,
        &NvmeofConfig {
            ops: 200,
            ..NvmeofConfig::default()
        },
    )?;
    let rows = [
        ("SmartIO driver on the lender".to_string(), r.local),
        ("SmartIO driver on the borrower".to_string(), r.remote),
        (
            "NVMe-oF over RDMA, borrower -> lender".to_string(),
            r.nvmeof,
        ),
    ];
    println!("{}", render::latency_rows(&rows));
    println!(
        "   Remote SmartIO adds {:.0} ns at the median (the NTB path); NVMe-oF adds {:.1} us (HCAs, network and target software, from the [nvmeof] calibration).\n",
        r.remote.p50 - r.local.p50,
        (r.nvmeof.p50 - r.local.p50) / 1000.0
    );
    Ok(())
}

/// The demo's NVMe step: the native driver binds a local controller, Identify, a 64 KiB
/// write and read through a PRP list, then a short QD1 random-read run (returned).
fn nvme_demo_step(calibration: &Calibration) -> Result<FioResult, String> {
    println!("Native NVMe driver — scenario local-chassis\n");
    let cluster = Cluster::new("local-chassis", calibration).map_err(|e| e.to_string())?;
    let r = nvme_demo(&cluster, "local", "nvme0", CompletionMode::Interrupt)
        .map_err(|e| e.to_string())?;
    let size = smartio_fabric::units::format_size;
    println!(
        "1. {} boots, enumerates its tree and binds driver {} to {} ({} completions).",
        r.host, r.driver, r.device, r.mode
    );
    println!(
        "2. Identify Controller: model {:?}, serial {}, firmware {}, NVMe {}, maximum transfer {}.",
        r.model,
        r.serial,
        r.firmware,
        r.version,
        size(r.max_transfer)
    );
    for ns in &r.namespaces {
        println!(
            "   Identify Namespace {}: {:.1} GB ({} blocks of {} B).",
            ns.nsid,
            ns.bytes as f64 / 1e9,
            ns.blocks,
            ns.lba_size
        );
    }
    println!(
        "   I/O queue pairs: {} granted ({} asked for).",
        r.io_queues_granted, r.io_queues_requested
    );
    let kib = r.bytes / 1024;
    println!(
        "3. {kib} KiB of random data written at LBA {} of namespace {} (PRP1 + a PRP list of {} entries) in {:.2} us, read into a second buffer in {:.2} us: {kib} KiB written and read back identical.\n",
        r.lba,
        r.nsid,
        r.prp_list_entries,
        r.write_ns / 1e3,
        r.read_ns / 1e3
    );
    let cluster = Cluster::new("local-chassis", calibration).map_err(|e| e.to_string())?;
    let config = FioConfig {
        amount: Amount::Ops(2000),
        ..FioConfig::new("local", "nvme0")
    };
    let f = run_fio(&cluster, &config).map_err(|e| e.to_string())?;
    println!(
        "4. QD1 4 KiB random reads, {} I/Os ({:.0} IOPS), submission to completion:",
        f.reads, f.iops
    );
    println!(
        "{}\n",
        render::latency_table("4 KiB randread", &fio_summary(&f))
    );
    Ok(f)
}

/// A fio result's latency as a summary row.
fn fio_summary(f: &FioResult) -> LatencySummary {
    let l = &f.lat_ns;
    LatencySummary {
        min: l.min,
        p50: l.p50,
        p99: l.p99,
        max: l.max,
        mean: l.mean,
    }
}

/// The demo's Device Lending step: the borrower borrows the lender's NVMe, which appears
/// hot-added in its tree; the same native driver and the same short workload run on it, and
/// the two QD1 summaries are printed side by side.
fn lending_demo_step(calibration: &Calibration, local: &FioResult) -> Result<(), String> {
    println!("Device Lending — scenario back-to-back\n");
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let r = nvme_demo(
        &cluster,
        "borrower",
        "lender:nvme0",
        CompletionMode::Interrupt,
    )
    .map_err(|e| e.to_string())?;
    println!(
        "1. The lender registers its devices with SmartIO; {} borrows lender:nvme0 and SmartIO maps its BARs, a DMA window and an MSI window through the NTBs.",
        r.host
    );
    println!("2. {}'s PCI tree now holds:", r.host);
    for t in &r.tree {
        let origin = match &t.lender {
            Some(l) => format!("hot-added, borrowed from {l}"),
            None => "local".to_string(),
        };
        println!("     {:<8} class {:06x}  {origin}", t.name, t.class);
    }
    println!(
        "3. The unchanged native driver {} bound to {}: Identify says {:?}; {} KiB written and read back identical ({:.2} us write, {:.2} us read).",
        r.driver,
        r.device,
        r.model,
        r.bytes / 1024,
        r.write_ns / 1e3,
        r.read_ns / 1e3
    );
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let config = FioConfig {
        amount: Amount::Ops(local.reads),
        ..FioConfig::new("borrower", "lender:nvme0")
    };
    let f = run_fio(&cluster, &config).map_err(|e| e.to_string())?;
    println!(
        "4. The same QD1 4 KiB random reads, local and borrowed ({:.0} and {:.0} IOPS):",
        local.iops, f.iops
    );
    let rows = [
        ("local-chassis local:nvme0".to_string(), fio_summary(local)),
        (
            "back-to-back borrower:lender:nvme0".to_string(),
            fio_summary(&f),
        ),
    ];
    println!("{}", render::latency_rows(&rows));
    println!(
        "   Both paths cross the same three switch chips, so the medians differ by {:+.2}% (the external cable's propagation).\n",
        (f.lat_ns.p50 / local.lat_ns.p50 - 1.0) * 100.0
    );
    Ok(())
}

fn shared_memory_demo(calibration: &Calibration) -> Result<(), String> {
    println!("Shared memory through an NTB — scenario back-to-back\n");
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let r = shm_demo(&cluster, "borrower", "lender").map_err(|e| e.to_string())?;
    let size = smartio_fabric::units::format_size;
    println!(
        "1. {} creates segment {} ({}) in its RAM at {:#x}, prepares it on adapter 0 (node id {}) and makes it available.",
        r.owner, r.segment_id, size(r.segment_bytes), r.segment_phys, r.owner_node_id
    );
    println!(
        "2. {} connects to node {} segment {} and maps it: its adapter's window is {} at {:#x}, split into {} look-up-table entries of {}.",
        r.user, r.owner_node_id, r.segment_id, size(r.window_bytes), r.window_base, r.lut_entries, size(r.entry_bytes)
    );
    println!(
        "   Look-up-table entries in use: {} before, {} after (of {}); requester ids in use: {} of {} (the CPU's reserved pair).",
        r.lut_before, r.lut_after, r.lut_entries, r.requester_ids_used, r.requester_ids
    );
    println!(
        "3. {}'s CPU stores {:?} at bus address {:#x} (inside its NTB window).",
        r.user, r.message, r.mapped_bus_addr
    );
    println!(
        "4. {} polls its own RAM and reads {:?}, {:.0} ns after the store.\n",
        r.owner, r.read_by_owner, r.store_to_seen_ns
    );
    let pp = pingpong(
        &Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?,
        &PingPongConfig {
            from: "borrower".into(),
            to: "lender".into(),
            iterations: 100,
        },
    )
    .map_err(|e| e.to_string())?;
    println!("Ping-pong borrower -> lender -> borrower, 100 round trips:");
    println!("{}\n", render::latency_table("round trip", &pp.rtt_ns));
    Ok(())
}
