//! The model of each command: the work its input asks for, and what that costs in wall
//! time and memory at [`super::rates`]. Every command has one (the match over
//! [`Command`] is exhaustive, so a new command needs one too) but the two servers, which run
//! until they are stopped. The README's "Budgets" lists them in words.

use super::rates::*;
use super::{bytes, Estimate};
use crate::app::App;
use crate::args::{Cli, Command};
use crate::bench::{Bench, DmaArgs, GpuBandwidthArgs, GpuDirection, P2pArgs};
use crate::exp::ExpArgs;
use crate::fio::FioArgs;
use crate::iperf::IperfArgs;
use crate::pingpong::PingpongArgs;
use crate::values::Direction;
use smartio_calibration::Calibration;

/// What a model may ask of the scenario a command names.
pub struct Facts<'a> {
    /// The calibration in force (to load a scenario as the command will).
    pub calibration: &'a Calibration,
}

impl Facts<'_> {
    /// Whether reads by `device` (as a command names it, on `host`) cross a lender's root
    /// complex with its IOMMU on, which cuts them into 64-byte requests: a borrowed device
    /// (`lender:dev`) whose lender's IOMMU is on. A scenario that does not load answers no:
    /// the command then fails on it before any work.
    pub fn reads_cut(&self, scenario: &str, device: &str) -> bool {
        let Some((lender, _)) = device.split_once(':') else {
            return false;
        };
        let Ok(fabric) = smartio_cluster::load_calibrated_fabric(scenario, self.calibration) else {
            return false;
        };
        fabric
            .host_by_name(lender)
            .is_some_and(|h| fabric.host(h).iommu.enabled())
    }
}

/// The command's name as the budget's messages show it (`bench gpu-bandwidth`).
pub fn command_name(command: &Command) -> String {
    match command {
        Command::Scenarios => "scenarios".into(),
        Command::Topo(_) => "topo".into(),
        Command::Devices(_) => "devices".into(),
        Command::Bench { bench } => format!(
            "bench {}",
            match bench {
                Bench::Dma(a) if a.adapter => "dma --adapter",
                Bench::Dma(_) => "dma",
                Bench::P2p(_) => "p2p",
                Bench::GpuBandwidth(_) => "gpu-bandwidth",
                Bench::GpuP2p(_) => "gpu-p2p",
                Bench::Pio(_) => "pio",
                Bench::Engine(_) => "engine",
                Bench::Topo(_) => "topo",
            }
        ),
        Command::Pingpong(_) => "pingpong".into(),
        Command::Fio(_) => "fio".into(),
        Command::Iperf(_) => "iperf".into(),
        Command::App { app } => match app {
            App::Train(_) => "app train".into(),
            App::Video(_) => "app video".into(),
        },
        Command::Exp(a) => format!("exp {}", a.name.name()),
        Command::Repro(_) => "repro".into(),
        Command::Demo => "demo".into(),
        Command::Sweep { .. } => "sweep".into(),
        Command::Cluster { .. } => "cluster".into(),
        Command::Serve { .. } => "serve nbd".into(),
    }
}

/// The estimate of what `cli` costs, or `None` for a server (`serve nbd`, `cluster up`),
/// which runs until it is stopped, and for an input the command refuses by its own checks
/// before any work (those come first: `fio --verify --size 8G` is told the 4 GiB limit of
/// `--verify`, not the memory budget).
pub fn estimate(cli: &Cli, facts: &Facts) -> Option<Estimate> {
    Some(match &cli.command {
        Command::Scenarios => fixed(0.0, 0, "listing the shipped scenarios"),
        Command::Topo(_) | Command::Devices(_) => cluster_only(),
        Command::Bench { bench } => bench_estimate(bench, facts),
        Command::Pingpong(a) => pingpong(a),
        Command::Fio(a) => fio(a)?,
        Command::Iperf(a) => iperf(a)?,
        Command::App { app } => match app {
            App::Train(a) => train(a)?,
            App::Video(a) => video(a)?,
        },
        Command::Exp(a) => exp(a)?,
        Command::Repro(a) => repro(a),
        Command::Demo => fixed(DEMO_S, DEMO_MEMORY, "the demo's fixed tour"),
        Command::Sweep { sweep } => {
            super::sweep::estimate(sweep, cli.calibration.as_deref(), |run| {
                estimate(run, facts)
            })
        }
        Command::Cluster { cluster } => match cluster {
            crate::cluster::ClusterCommand::Up { .. } => return None,
            _ => fixed(0.0, 0, "installing libsisci or stopping a daemon"),
        },
        Command::Serve { .. } => return None,
    })
}

/// A fixed cost on top of a booted cluster.
fn fixed(wall_s: f64, memory: u64, work: &str) -> Estimate {
    Estimate::new(START_S + wall_s, START_MEMORY + memory, work)
}

/// `units` of work at `unit_s` each, `memory` on top of a booted cluster.
fn per_unit(units: u64, unit_s: f64, memory: u64, work: String) -> Estimate {
    Estimate::new(
        START_S + units as f64 * unit_s,
        START_MEMORY.saturating_add(memory),
        work,
    )
}

/// `topo` and `devices`: a cluster brought up and listed; the scenario's limits (10 000
/// hosts) bound it.
fn cluster_only() -> Estimate {
    let hosts = smartio_workloads::topo_bench::MAX_HOSTS;
    per_unit(
        hosts,
        HOST_S,
        hosts * HOST_MEMORY,
        format!("a scenario of at most {hosts} hosts brought up"),
    )
}

/// `frames` video frames.
fn video_frames(frames: u64, what: &str) -> Estimate {
    per_unit(
        frames,
        FRAME_S,
        frames.saturating_mul(FRAME_MEMORY),
        format!("{frames} {what} decoded, copied and analysed"),
    )
}

/// Copies of `sizes`, each `count` times, at `ns_per_byte`, plus each size's buffers set up
/// and checked once; `buffers` times the largest size held at once.
fn transfers(
    sizes: &[u64],
    each: u64,
    ns_per_byte: f64,
    buffers: u64,
    what: (&str, &str),
) -> Estimate {
    let moved: u64 = sizes
        .iter()
        .fold(0u64, |a, s| a.saturating_add(s.saturating_mul(each)));
    let set_up: u64 = sizes.iter().fold(0u64, |a, s| a.saturating_add(*s));
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let copies = (sizes.len() as u64).saturating_mul(each);
    Estimate::new(
        START_S + (moved as f64 * ns_per_byte + set_up as f64 * BUFFER_NS_PER_BYTE) * 1e-9,
        START_MEMORY.saturating_add(largest.saturating_mul(buffers)),
        format!(
            "{} of {}: {} moved",
            count(copies, what.0, what.1),
            sizes_text(sizes),
            moved_text(moved)
        ),
    )
}

/// `1 copy`, `2 copies`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A virtual duration as options write it: `10 ms`, `3600 s`.
fn virtual_time(d: smartio_platform::SimDuration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s} s")
    } else {
        d.to_string()
    }
}

/// `4K, 1M` (at most four sizes, then how many more).
fn sizes_text(sizes: &[u64]) -> String {
    let mut shown: Vec<String> = sizes.iter().take(4).map(|s| bytes(*s)).collect();
    if sizes.len() > 4 {
        shown.push(format!("{} more sizes", sizes.len() - 4));
    }
    shown.join(", ")
}

/// Bytes moved, in decimal units as throughputs are (`5.4 TB`).
fn moved_text(b: u64) -> String {
    let v = b as f64;
    if v >= 1e12 {
        format!("{:.1} TB", v / 1e12)
    } else if v >= 1e9 {
        format!("{:.1} GB", v / 1e9)
    } else {
        format!("{:.1} MB", v / 1e6)
    }
}

/// Doubles a run's wall time when it is explained (run again, recorded) and adds the
/// recording, and the trace's slices: as many as its work makes at [`TRACE_SLICES_PER_S`],
/// at most `--trace-limit`.
fn explained(mut e: Estimate, explain: &crate::explain::ExplainArgs) -> Estimate {
    if !explain.any() {
        return e;
    }
    let work_s = e.wall_s - START_S;
    let slices = explain.trace.as_ref().map_or(0, |_| {
        let limit = explain
            .trace_limit
            .unwrap_or(crate::explain::DEFAULT_TRACE_LIMIT) as u64;
        limit.min((work_s * TRACE_SLICES_PER_S).ceil() as u64)
    });
    e.wall_s = START_S + 2.0 * work_s + slices as f64 * TRACE_SLICE_S;
    e.memory = e
        .memory
        .saturating_add(RECORDING_MEMORY)
        .saturating_add(slices.saturating_mul(TRACE_SLICE));
    e.work.push_str(", run twice (the second time recorded");
    if slices > 0 {
        e.work.push_str(&format!(", {slices} trace slices"));
    }
    e.work.push(')');
    e
}

fn bench_estimate(bench: &Bench, facts: &Facts) -> Estimate {
    match bench {
        Bench::Dma(a) => dma(a, facts),
        Bench::P2p(a) => p2p(a, facts, false),
        Bench::GpuP2p(a) => p2p(a, facts, true),
        Bench::GpuBandwidth(a) => gpu_bandwidth(a, facts),
        Bench::Pio(a) => transfers(
            &a.sizes,
            u64::from(a.repeat),
            PIO_NS_PER_BYTE,
            DMA_BUFFERS,
            ("block of remote stores", "blocks of remote stores"),
        ),
        Bench::Engine(a) => Estimate::new(
            START_S + a.bytes as f64 * ENGINE_NS_PER_BYTE * 1e-9,
            START_MEMORY,
            format!("{} streamed as 4 MiB copies", moved_text(a.bytes)),
        ),
        Bench::Topo(a) => per_unit(
            a.hosts,
            HOST_S,
            a.hosts.saturating_mul(HOST_MEMORY),
            format!("a cluster of {} hosts brought up", a.hosts),
        ),
    }
}

fn gpu_bandwidth(a: &GpuBandwidthArgs, facts: &Facts) -> Estimate {
    let rate =
        if matches!(a.direction, GpuDirection::H2d) && facts.reads_cut(&a.scenario, &a.device) {
            CUT_READ_NS_PER_BYTE
        } else {
            GPU_NS_PER_BYTE
        };
    transfers(
        &a.sizes,
        u64::from(a.copies) * u64::from(a.repeat),
        rate,
        GPU_BUFFERS,
        ("GPU copy", "GPU copies"),
    )
}

fn dma(a: &DmaArgs, facts: &Facts) -> Estimate {
    let repeat = u64::from(a.repeat);
    if a.adapter {
        return transfers(
            &a.sizes,
            repeat,
            ADAPTER_NS_PER_BYTE,
            DMA_BUFFERS,
            ("adapter DMA copy", "adapter DMA copies"),
        );
    }
    let scenario = a.scenario.as_deref().unwrap_or_default();
    let rate = if matches!(a.direction, Direction::Read) && facts.reads_cut(scenario, &a.device) {
        CUT_READ_NS_PER_BYTE
    } else {
        DMA_NS_PER_BYTE
    };
    explained(
        transfers(
            &a.sizes,
            repeat,
            rate,
            DMA_BUFFERS,
            ("DMA copy", "DMA copies"),
        ),
        &a.explain,
    )
}

fn p2p(a: &P2pArgs, facts: &Facts, gpu: bool) -> Estimate {
    let cut = matches!(a.direction, Direction::Read)
        && (facts.reads_cut(&a.scenario, &a.source) || facts.reads_cut(&a.scenario, &a.target));
    let rate = match (cut, gpu) {
        (true, _) => CUT_READ_NS_PER_BYTE,
        (false, true) => GPU_NS_PER_BYTE,
        (false, false) => DMA_NS_PER_BYTE,
    };
    transfers(
        &a.sizes,
        u64::from(a.repeat),
        rate,
        P2P_BUFFERS,
        ("peer-to-peer copy", "peer-to-peer copies"),
    )
}

fn pingpong(a: &PingpongArgs) -> Estimate {
    let devices = a.device_a.is_some();
    // Two GPUs ping-pong 100 000 times by default (DMA test devices 1000): reckon with the
    // GPUs' count for any two devices.
    let iterations = u64::from(a.iterations.unwrap_or(if devices { 100_000 } else { 1000 }));
    let (unit, what) = if devices {
        (DEVICE_ROUND_TRIP_S, "device round trips")
    } else {
        (CPU_ROUND_TRIP_S, "round trips")
    };
    explained(
        per_unit(iterations, unit, 0, format!("{iterations} {what}")),
        &a.explain,
    )
}

/// fio: I/Os (given, or the most `--runtime` can hold at [`MAX_IOPS`]) at [`IO_S`] and
/// their bytes at [`IO_NS_PER_BYTE`]; memory: the I/O buffers, and what the namespace
/// keeps of written data (each write at least a [`WRITTEN_PAGE`], all of `--size` at most;
/// a verifying run first writes all of it).
fn fio(a: &FioArgs) -> Option<Estimate> {
    use smartio_workloads::{Amount, RwMode};
    let config = crate::fio::fio_config(a).ok()?;
    let slots = f64::from(config.jobs) * f64::from(config.iodepth);
    let (ios, amount) = match config.amount {
        Amount::Ops(n) => (n, count(n, "I/O", "I/Os")),
        Amount::Runtime(t) => {
            let iops = (slots / IO_SLOT_S).min(MAX_IOPS);
            let n = (t.as_secs_f64() * iops).ceil() as u64;
            (
                n,
                format!("up to {n} I/Os in {} of virtual time", virtual_time(t)),
            )
        }
    };
    let write_share = match config.rw {
        RwMode::Write | RwMode::RandWrite => 1.0,
        RwMode::RandRw => 1.0 - f64::from(config.rwmixread) / 100.0,
        RwMode::Read | RwMode::RandRead => 0.0,
    };
    let writes = (ios as f64 * write_share).ceil() as u64;
    let range = config.size.unwrap_or(1 << 30);
    let per_write = match config.rw {
        RwMode::Read | RwMode::Write => config.bs,
        _ => config.bs.max(WRITTEN_PAGE),
    };
    let kept = if config.verify {
        range
    } else {
        writes.saturating_mul(per_write).min(range)
    };
    let buffers = u64::from(config.jobs) * u64::from(config.iodepth) * config.bs;
    let wall = START_S + ios as f64 * (IO_S + config.bs as f64 * IO_NS_PER_BYTE * 1e-9);
    let work = if kept > 0 {
        format!(
            "{amount} of {} ({} of written data kept)",
            bytes(config.bs),
            bytes(kept)
        )
    } else {
        format!("{amount} of {}", bytes(config.bs))
    };
    Some(explained(
        Estimate::new(
            wall,
            START_MEMORY.saturating_add(kept).saturating_add(buffers),
            work,
        ),
        &a.explain,
    ))
}

/// `app train`: images × epochs, and the training set held in memory.
fn train(a: &crate::app::TrainArgs) -> Option<Estimate> {
    use smartio_apps::train::{check, Storage, TrainConfig};
    let config = TrainConfig {
        host: a.host.clone(),
        gpus: a.gpus.0.clone(),
        nvme: a.nvme.clone(),
        storage: Storage::Native,
        images: a.images,
        batch: a.batch,
        epochs: a.epochs,
        seed: a.seed,
        spoil_image: None,
    };
    check(&config).ok()?;
    Some(per_unit(
        a.images.saturating_mul(a.epochs),
        IMAGE_S,
        a.images.saturating_mul(IMAGE_MEMORY),
        format!(
            "{} images × {} of training",
            a.images,
            count(a.epochs, "epoch", "epochs")
        ),
    ))
}

/// `app video`: streams × frames.
fn video(a: &crate::app::VideoArgs) -> Option<Estimate> {
    use smartio_apps::video::{check_counts, VideoConfig};
    let config = VideoConfig {
        streams: a.streams,
        fps: a.fps,
        frames: a.frames,
        ..VideoConfig::paper_ii()
    };
    check_counts(&config).ok()?;
    Some(video_frames(
        u64::from(a.streams) * u64::from(a.frames),
        "frames",
    ))
}

/// iperf: virtual time × (a run's cost + each stream's); memory: each stream's socket
/// buffers and writes, and the report rows (one per interval within `-t`, and the last).
fn iperf(a: &IperfArgs) -> Option<Estimate> {
    let interval = crate::iperf::interval(a).ok()?;
    let streams = a.client.len() as u64 * u64::from(a.parallel);
    let t = a.time.as_secs_f64();
    let reports = a.time.as_ps() / interval.as_ps().max(1);
    let rows = reports.saturating_add(1).saturating_mul(streams);
    let memory = streams
        .saturating_mul(STREAM_MEMORY.saturating_add(2 * a.len))
        .saturating_add(rows.saturating_mul(REPORT_ROW));
    Some(Estimate::new(
        START_S + t * (IPERF_S_PER_S + IPERF_S_PER_S_PER_STREAM * streams as f64),
        START_MEMORY.saturating_add(memory),
        format!(
            "{} for {} of virtual time, {} of reports",
            count(streams, "stream", "streams"),
            virtual_time(a.time),
            count(rows, "row", "rows")
        ),
    ))
}

/// `exp NAME`: each experiment's fixed part and its cost per unit of `--ops` (its own
/// meaning: I/Os, copies, round trips, milliseconds, epochs, frames), from one run at the
/// default and one at a larger `--ops` each ([`crate::exp::Experiment::cost`]).
fn exp(a: &ExpArgs) -> Option<Estimate> {
    let m = a.name.cost();
    let ops = a.ops.unwrap_or(m.default_ops);
    if !m.ops.contains(&ops) {
        return None; // the experiment refuses it, naming its range
    }
    let e = Estimate::new(
        START_S + m.fixed_s + ops as f64 * m.per_op_s,
        START_MEMORY
            .saturating_add(m.memory)
            .saturating_add(ops.saturating_mul(m.memory_per_op)),
        format!("{ops} {}", m.unit),
    );
    Some(if a.name.takes().explain {
        explained(e, &a.explain)
    } else {
        e
    })
}

/// `repro`: the whole set, whatever is chosen (one statement can take a third of it: `II-3`
/// runs 1 to 16 video streams on two pools).
fn repro(a: &crate::repro::ReproArgs) -> Estimate {
    if a.list {
        return fixed(0.0, 0, "listing the statements");
    }
    Estimate::new(
        START_S + REPRO_S,
        START_MEMORY.saturating_add(REPRO_MEMORY),
        "the paper statements asked for (at most the whole set)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn estimate_of(line: &str) -> Option<Estimate> {
        let cli = Cli::try_parse_from(std::iter::once("smartio").chain(line.split_whitespace()))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        let calibration = Calibration::default_embedded();
        estimate(
            &cli,
            &Facts {
                calibration: &calibration,
            },
        )
    }

    /// Every command with its defaults (and the README's examples) fits the budget.
    #[test]
    fn every_command_with_its_defaults_fits_the_budget() {
        for line in [
            "scenarios",
            "topo --scenario cascade-60",
            "devices --scenario cascade-60",
            "bench dma --scenario local-chassis",
            "bench dma --adapter",
            "bench pio --scenario back-to-back --from borrower --to lender",
            "bench engine",
            "bench topo --hosts 10000",
            "bench p2p --scenario cluster-switch --source lender:gpu0 --target lender2:gpu2",
            "bench gpu-bandwidth --scenario local-chassis",
            "bench gpu-p2p --scenario local-chassis --source gpu0 --target gpu1",
            "pingpong --scenario back-to-back --from borrower --to lender",
            "pingpong --scenario cluster-switch --host borrower --device-a lender:gpu0 --device-b lender2:gpu2 --gpu",
            "fio --scenario local-chassis --host local --device nvme0",
            "fio --scenario local-chassis --host local --device nvme0 --rw randread --bs 4k --iodepth 1 --ops 327680",
            "fio --scenario local-chassis --host local --device nvme0 --rw randwrite --ops 100000",
            "iperf --scenario sriov --server receiver --client lender=nic0",
            "app train --scenario cluster-switch --host borrower --gpus lender:gpu0,lender2:gpu2 --nvme lender:nvme0 --epochs 1",
            "app video",
            "exp sq-placement",
            "exp share-30",
            "exp multicast",
            "exp failover",
            "exp nvmeof-compare",
            "exp vm-nvme",
            "exp migrate",
            "exp iommu-penalty",
            "exp vm-p2p",
            "exp gpu-nvme",
            "exp sriov",
            "exp sriov-share",
            "exp train",
            "exp video",
            "repro",
            "demo",
            "cluster install --prefix /nonexistent",
        ] {
            let e = estimate_of(line).unwrap_or_else(|| panic!("{line}: no estimate"));
            assert!(e.fits(), "{line}: {e:?}");
        }
    }

    /// The two servers run until they are stopped: no estimate.
    #[test]
    fn the_servers_are_not_estimated() {
        assert_eq!(estimate_of("cluster up --scenario back-to-back"), None);
        assert_eq!(
            estimate_of(
                "serve nbd --scenario back-to-back --host borrower --device lender:nvme0 --socket /x"
            ),
            None
        );
    }

    /// What the issue found too large, and each range's top, is over the budget.
    #[test]
    fn the_largest_inputs_are_over_the_budget() {
        for line in [
            "bench gpu-bandwidth --scenario local-chassis --sizes 1G --copies 1000",
            "bench dma --scenario local-chassis --sizes 1G --repeat 1",
            "bench engine --bytes 256G",
            "fio --scenario local-chassis --host local --device nvme0 --ops 1000000000",
            "fio --scenario local-chassis --host local --device nvme0 --runtime 3600s",
            "fio --scenario local-chassis --host local --device nvme0 --verify --size 4G",
            "fio --scenario local-chassis --host local --device nvme0 --rw randwrite --bs 64k --size 100G --ops 100000",
            "pingpong --scenario back-to-back --from borrower --to lender --iterations 100000000",
            "iperf --scenario sriov --server receiver --client lender=nic0 -t 3600s",
            "iperf --scenario sriov --server receiver --client a=nic0 --client b=nic0 --client c=nic0 --client d=nic0 -P 64 -t 1ms",
            "app video --streams 64 --frames 1000",
            "exp share-30 --ops 10000000",
            "exp gpu-nvme --ops 65536",
            "exp iommu-penalty --ops 1000",
            "exp sriov --ops 60000",
            "exp train --ops 10",
        ] {
            let e = estimate_of(line).unwrap_or_else(|| panic!("{line}: no estimate"));
            assert!(!e.fits(), "{line}: {e:?}");
        }
    }

    /// A run explained (`--breakdown`) is reckoned twice, its trace's slices on top: as
    /// many as its work makes, at most `--trace-limit`.
    #[test]
    fn an_explained_run_costs_two_runs_and_its_trace() {
        let line = "fio --scenario s --host h --device d --ops 100000";
        let plain = estimate_of(line).expect("fio");
        let doubled = START_S + 2.0 * (plain.wall_s - START_S);
        let explained = estimate_of(&format!("{line} --breakdown")).expect("fio");
        assert!((explained.wall_s - doubled).abs() < 1e-9, "{explained:?}");
        assert_eq!(explained.memory, plain.memory + RECORDING_MEMORY);
        let traced = estimate_of(&format!("{line} --trace t --trace-limit 1000000")).expect("fio");
        assert_eq!(
            traced.memory,
            plain.memory + RECORDING_MEMORY + 1_000_000 * TRACE_SLICE
        );
        assert!(!traced.fits(), "{traced:?}");
        // Two I/Os make a few hundred slices, whatever the limit.
        let tiny = estimate_of(
            "fio --scenario s --host h --device d --ops 2 --trace t --trace-limit 5000000",
        )
        .expect("fio");
        assert!(tiny.fits(), "{tiny:?}");
        assert!(tiny.work.contains(", 482 trace slices"), "{}", tiny.work);
    }
}
