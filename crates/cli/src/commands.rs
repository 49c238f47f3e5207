//! What each `smartio` command does with its (already range-checked) arguments: load the
//! scenario, run the workload, print a table or JSON. Errors are [`CliError`]s (each layer's
//! own error, or the command line's refusal naming the option and the value); `main` prints
//! their message after `smartio: ` and exits with status 1.

use crate::args::{Bench, Cli, Command, FioArgs, P2pArgs};
use crate::error::CliError;
use crate::hosts::{first_host, host_of_device};
use crate::nvme_options::{self, announce_backing, check_backing, nvme_key};
use crate::outfile::OutputFile;
use crate::output::print_json;
use crate::usage::Usage;
use crate::values::Direction;
use crate::{budget, demo, exp, explain, gpu, render};
use smartio_calibration::Calibration;
use smartio_cluster::ClusterOptions;
use smartio_cluster::{Cluster, SHIPPED};
use smartio_drivers::CompletionMode;
use smartio_workloads::gpu::is_gpu;
use smartio_workloads::{
    bench_engine, bench_p2p, bench_pio, run_fio, Amount, FioConfig, GpuBandwidthConfig,
    GpuP2pConfig, P2pConfig, P2pDirection, PioBenchConfig, RwMode, Workbench,
};

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
        crate::progress::announce(&command, &estimate);
    }
    match cli.command {
        Command::Sweep { sweep } => {
            crate::sweep::run(sweep, cli.calibration.as_deref(), cli.no_budget)
        }
        Command::Scenarios => scenarios(),
        Command::Topo {
            scenario,
            svg: Some(file),
            ..
        } => topo_picture(&calibration, &scenario, &file),
        Command::Topo { scenario, json, .. } => topo(&calibration, &scenario, json),
        Command::Bench { bench } => bench_command(&calibration, bench),
        Command::Devices { scenario, json } => devices(&calibration, &scenario, json),
        Command::Pingpong(args) => crate::pingpong::run(&calibration, args),
        Command::Fio(args) => fio(&calibration, args),
        Command::Iperf(args) => crate::iperf::run(&calibration, args),
        Command::App { app } => crate::app::run(&calibration, app),
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
            crate::repro::run(&calibration, &text, args)
        }
        Command::Demo => demo::demo(&calibration),
        Command::Serve { serve } => crate::serve::run(&calibration, serve),
        Command::Cluster { cluster } => crate::cluster::run(&calibration, cluster),
    }
}

/// `smartio bench …`: the benchmark `bench` names.
fn bench_command(calibration: &Calibration, bench: Bench) -> Result<(), CliError> {
    match bench {
        Bench::Dma(args) => crate::dma::run(calibration, args),
        Bench::Engine { bytes, json } => engine(calibration, bytes, json),
        Bench::Topo { hosts, json } => topo_bench(calibration, hosts, json),
        Bench::P2p(args) => p2p(calibration, args, false),
        Bench::GpuBandwidth {
            scenario,
            host,
            device,
            direction,
            sizes,
            copies,
            repeat,
            json,
            seed,
        } => {
            let cluster = Cluster::seeded(&scenario, calibration, seed)?;
            let host = match host {
                Some(h) => h,
                None => host_of_device(&cluster, &device)?,
            };
            let config = GpuBandwidthConfig {
                host,
                device,
                direction: gpu::copy_direction(direction),
                sizes,
                copies,
                repeat,
            };
            gpu::bandwidth(&cluster, config, json)
        }
        Bench::GpuP2p(args) => p2p(calibration, args, true),
        Bench::Pio {
            scenario,
            from,
            to,
            sizes,
            repeat,
            json,
            seed,
        } => {
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
    }
}

/// `smartio scenarios`: each shipped scenario's name and description.
fn scenarios() -> Result<(), CliError> {
    for s in SHIPPED {
        let name = format!("{:<26} ", s.name);
        let description = smartio_cluster::scenarios::description(s);
        print!("{}", render::wrapped(&description, &name, &" ".repeat(27)));
    }
    Ok(())
}

/// `smartio topo --svg FILE`: the picture of the scenario, and what it shows.
fn topo_picture(
    calibration: &Calibration,
    scenario: &str,
    file: &OutputFile,
) -> Result<(), CliError> {
    let done = crate::picture::write(scenario, calibration, file)?;
    print!("{}", render::wrapped(&done.written, "", "  "));
    print!("{}", render::wrapped(&done.shows, "  ", "  "));
    Ok(())
}

/// `smartio topo`: the fabric's report, as a table or JSON.
fn topo(calibration: &Calibration, scenario: &str, json: bool) -> Result<(), CliError> {
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

/// `smartio bench engine`: the engine's TLP arrivals per second.
fn engine(calibration: &Calibration, bytes: u64, json: bool) -> Result<(), CliError> {
    let result = bench_engine(calibration, bytes)?;
    if json {
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

/// `smartio bench topo`: how long a cluster of `hosts` hosts takes to parse, build and
/// start.
fn topo_bench(calibration: &Calibration, hosts: u64, json: bool) -> Result<(), CliError> {
    let r = smartio_workloads::bench_topo(calibration, hosts)?;
    if json {
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

/// `smartio devices`: the devices registered with SmartIO as the cluster starts.
fn devices(calibration: &Calibration, scenario: &str, json: bool) -> Result<(), CliError> {
    let cluster = Cluster::new(scenario, calibration)?;
    let bench = Workbench::with_devices(&cluster, &first_host(&cluster)?, &[])?;
    let mut devices = bench.smartio.devices();
    declared_assignments(&cluster, &mut devices);
    if json {
        print_json(&devices)?;
    } else {
        print!(
            "{}",
            render::wrapped(
                &format!(
                    "devices registered with SmartIO on {scenario} ({} devices)",
                    devices.len()
                ),
                "",
                "  "
            )
        );
        println!("{}", render::device_table(&devices));
        print!(
            "{}",
            render::wrapped(
                "This is the cluster as it starts: nothing is borrowed yet. A workload \
                 given a device as lender:device (fio, bench dma, bench p2p, pingpong) \
                 borrows it for its run and gives it back at the end; run in a VM \
                 (--host host/vm), it passes it through (MDEV) for as long as the VM \
                 runs. The VMs a device is assigned to are the scenario's ([[host.vm]] \
                 devices).",
                "",
                ""
            )
        );
    }
    Ok(())
}

/// `smartio fio`: the option combinations are checked here, the values' ranges by clap
/// and [`FioConfig::check`], what depends on the controller by the workload.
fn fio(calibration: &Calibration, a: FioArgs) -> Result<(), CliError> {
    let config = fio_config(&a)?;
    if let Some(path) = a.backing.as_deref() {
        check_backing(path)?;
    }
    let mut options = ClusterOptions {
        seed: a.seed,
        ..ClusterOptions::default()
    };
    let backing = a.backing.as_deref().map(|path| {
        let key = nvme_key(&config.host, &config.device);
        options.nvme_backing.push((key, path.into()));
        (path, std::path::Path::new(path).exists())
    });
    a.explain.check()?;
    let cluster = Cluster::with_options(&a.scenario, calibration, &options)?;
    if let Some((path, false)) = backing {
        announce_backing(path, &config.device);
    }
    let explain = &a.explain;
    let (result, explained) = explain
        .run(
            || Ok(run_fio(&cluster, &config)?),
            |r| explain::p50_p99(r.lat_ns.p50, r.lat_ns.p99),
            |spec| {
                // The same run again, recorded, on a fresh cluster.
                let cluster = Cluster::with_options(&a.scenario, calibration, &options)?;
                Ok(smartio_workloads::fio::run_fio_explained(
                    &cluster,
                    &config,
                    Some(spec),
                )?)
            },
        )?
        .write_trace(explain)?;
    if a.json {
        print_json(&explain::WithBreakdown::new(&result, &explained))
    } else {
        print!("{}", render::fio_summary(&a.scenario, &result));
        print!("{}", explain::render(&explained, "I/O"));
        Ok(())
    }
}

/// The workload `a` asks for, with every option combination and value checked
/// ([`FioConfig::check`]) — all that can be checked before anything is booted; the budget's
/// model of fio reckons only with inputs that pass.
pub(crate) fn fio_config(a: &FioArgs) -> Result<FioConfig, CliError> {
    let rw: RwMode = a.rw.parse().map_err(Usage::Rw)?;
    if a.rwmixread.is_some() && rw != RwMode::RandRw {
        return Err(Usage::Rwmixread { rw: a.rw.clone() }.into());
    }
    let method = nvme_options::method(&a.method, a.manager.clone())?;
    let mode: CompletionMode = match (&a.mode, &method) {
        (
            Some(m),
            smartio_workloads::fio::FioMethod::NvmeClient { .. }
            | smartio_workloads::fio::FioMethod::NvmeBlock { .. },
        ) => {
            return Err(Usage::ModeWithClient { mode: m.clone() }.into());
        }
        (Some(m), _) => m.parse().map_err(Usage::Mode)?,
        (None, _) => CompletionMode::Interrupt,
    };
    let amount = match (a.ops, a.runtime) {
        (Some(n), _) => Amount::Ops(n),
        (None, Some(t)) => Amount::Runtime(t),
        (None, None) => Amount::Ops(10_000),
    };
    let config = FioConfig {
        host: a.host.clone(),
        device: a.device.clone(),
        rw,
        bs: a.bs,
        iodepth: a.iodepth,
        amount,
        jobs: a.jobs,
        verify: a.verify,
        seed: a.seed,
        size: a.size,
        nsid: a.nsid,
        rwmixread: a.rwmixread.unwrap_or(50),
        mode,
        method,
    };
    config.check()?;
    Ok(config)
}

/// `bench p2p`, and `bench gpu-p2p` (`gpu_only`): two GPUs (or one, whose partner the GPU
/// workload then refuses) run the papers' program on the GPU model; two DMA test devices
/// the CPU-driven copy.
fn p2p(calibration: &Calibration, args: P2pArgs, gpu_only: bool) -> Result<(), CliError> {
    let P2pArgs {
        scenario,
        host,
        source,
        target,
        direction,
        sizes,
        repeat,
        seed,
        json,
    } = args;
    let cluster = Cluster::seeded(&scenario, calibration, seed)?;
    let host = match host {
        Some(h) => h,
        None => first_host(&cluster)?,
    };
    let direction = match direction {
        Direction::Write => P2pDirection::Write,
        Direction::Read => P2pDirection::Read,
    };
    if gpu_only || is_gpu(&cluster, &host, &source) || is_gpu(&cluster, &host, &target) {
        let config = GpuP2pConfig {
            host,
            source,
            target,
            direction,
            sizes,
            repeat,
        };
        return gpu::p2p(&cluster, config, json, gpu_only);
    }
    let config = P2pConfig {
        host,
        source,
        target,
        direction,
        sizes,
        repeat,
    };
    let samples = bench_p2p(&cluster, &config)?;
    if json {
        return print_json(&samples);
    }
    let (from, to) = match direction {
        P2pDirection::Write => (&config.source, &config.target),
        P2pDirection::Read => (&config.target, &config.source),
    };
    print!(
        "{}",
        render::wrapped(
            &format!(
                "peer-to-peer DMA {} on {scenario}: {from} memory -> {to} memory, driven by \
                 {}'s CPU through {}'s copy engine, {} repeats per size",
                if matches!(direction, P2pDirection::Write) {
                    "writes"
                } else {
                    "reads"
                },
                config.host,
                config.source,
                repeat
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&samples));
    Ok(())
}

/// Fills each device's `assigned` with the VMs the scenario passes it through to, as the VMs
/// would get it when they start: an entry `lender:device` is passed through by SmartIO's MDEV
/// parent (`host/vm (mdev)`, even when the lender is the VM's own host), a bare `device` of
/// the VM's host by VFIO (`host/vm (vfio)`) — the rule `Workbench` and `topo` follow.
fn declared_assignments(cluster: &Cluster, devices: &mut [smartio_workloads::DeviceInfo]) {
    let f = cluster.machine.fabric();
    for d in devices.iter_mut() {
        for h in f.hosts() {
            for vm in &h.vms {
                for (entry, _) in &vm.devices {
                    let (lender, device) = entry.split_once(':').unwrap_or((&h.name, entry));
                    if lender == d.lender && device == d.device {
                        let how = if entry.contains(':') { "mdev" } else { "vfio" };
                        d.assigned.push(format!("{}/{} ({how})", h.name, vm.name));
                    }
                }
            }
        }
    }
}
