//! `smartio serve nbd`: one host's view of an NVMe namespace, exported over NBD to
//! unmodified clients. The cluster runs on this thread; the connections' threads hand it
//! their requests ([`smartio_workloads::nbd`]).

use crate::error::CliError;
use crate::nvme_options::{self, announce_backing, check_backing, nvme_key};
use crate::usage::Usage;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_nbd::Listener;
use smartio_workloads::fio::LatencyNs;
use smartio_workloads::nbd::{NbdConfig, NbdExport, NbdStats, ServeControl, MAX_DEPTH, MAX_QUEUES};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// What `serve` serves.
#[derive(clap::Subcommand, Debug)]
pub enum Serve {
    /// Export a host's view of an NVMe namespace over NBD: every request becomes an I/O of
    /// that host on the emulated cluster, through the driver --method names. Serves until
    /// Ctrl-C or SIGTERM (or, with --once, until the last client leaves), then prints what
    /// the I/Os saw in virtual time next to the wall time. On Ctrl-C or SIGTERM, requests in
    /// flight are finished and answered, later ones answered ESHUTDOWN and counted as
    /// dropped.
    Nbd(NbdArgs),
}

/// The options of `serve nbd`.
#[derive(clap::Args, Debug)]
pub struct NbdArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// The host whose view is exported (its CPUs do the I/O).
    #[arg(long)]
    pub host: String,
    /// NVMe device in that host's tree, or `lender:nvme0` to borrow it (Device Lending).
    #[arg(long, value_parser = crate::values::device)]
    pub device: String,
    /// native (the NVMe driver on --host) or nvme-client (a client of the distributed
    /// driver on --host; needs --manager).
    #[arg(long, default_value = "native")]
    pub method: String,
    /// Host running the distributed driver's manager (with --method nvme-client).
    #[arg(long)]
    pub manager: Option<String>,
    /// Listen on this Unix socket (clients: nbd+unix:///?socket=PATH).
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "port",
        required_unless_present = "port"
    )]
    pub socket: Option<String>,
    /// Listen on this TCP port of 127.0.0.1 (clients: nbd://127.0.0.1:PORT), 1 to 65535.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Namespace id, 1 to 4294967294.
    #[arg(long, default_value = "1", value_name = "NSID", value_parser = clap::value_parser!(u32).range(1..0xFFFF_FFFF))]
    pub nsid: u32,
    /// Export only this many bytes from the namespace's start (K, M, G = KiB, MiB, GiB), a
    /// multiple of its block size [default: the whole namespace].
    #[arg(long, value_name = "SIZE", value_parser = crate::values::range_size)]
    pub size: Option<u64>,
    /// Refuse writes (clients see a read-only export).
    #[arg(long)]
    pub read_only: bool,
    /// I/O queue pairs the host uses; requests take them in turn.
    #[arg(long, default_value = "4", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_QUEUES)))]
    pub queues: u32,
    /// Requests each queue pair holds at once (one I/O buffer of MDTS bytes each).
    #[arg(long, default_value = "32", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DEPTH)))]
    pub depth: u32,
    /// Exit when the last client leaves (otherwise serve until Ctrl-C or SIGTERM). fio
    /// connects once to learn the size before its jobs connect: use --once with clients
    /// that make one connection, such as nbdcopy and qemu-img.
    #[arg(long)]
    pub once: bool,
    /// Also print the figures so far every this long in wall time, whole seconds with their
    /// unit, 1s to 86400s (e.g. 1s, 10s).
    #[arg(long, value_name = "TIME", value_parser = crate::values::wall_seconds)]
    pub stats_every: Option<Duration>,
    /// Keep the NVMe's namespaces in this file (created sparse if missing), so what clients
    /// wrote outlives the server: a FLUSH, and a request with FUA, fdatasync it before
    /// their reply, and writes acknowledged since the last are synced when the server
    /// ends (exit status 1 if that fails).
    #[arg(long, value_name = "FILE")]
    pub backing: Option<String>,
    /// Seed of the emulation's variation.
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
}

/// Runs `serve`.
pub fn run(calibration: &Calibration, serve: Serve) -> Result<(), CliError> {
    match serve {
        Serve::Nbd(a) => nbd(calibration, a),
    }
}

fn nbd(calibration: &Calibration, a: NbdArgs) -> Result<(), CliError> {
    let method = nvme_options::method(&a.method, a.manager)?;
    let config = NbdConfig {
        host: a.host,
        device: a.device,
        method,
        nsid: a.nsid,
        read_only: a.read_only,
        queues: a.queues,
        depth: a.depth,
        size: a.size,
    };
    config.check()?;
    if let Some(path) = a.backing.as_deref() {
        check_backing(path)?;
    }
    // Listen first: a socket another server holds is an error before anything boots.
    let listener = match (&a.socket, a.port) {
        (Some(path), _) => Listener::unix(std::path::Path::new(path)),
        (None, Some(port)) => Listener::tcp(port),
        (None, None) => return Err(Usage::NoListener.into()),
    }?;
    no_huge_pages();
    let mut options = ClusterOptions {
        seed: a.seed,
        ..ClusterOptions::default()
    };
    let backing = a.backing.as_deref().map(|path| {
        options
            .nvme_backing
            .push((nvme_key(&config.host, &config.device), path.into()));
        (path, std::path::Path::new(path).exists())
    });
    let cluster = Cluster::with_options(&a.scenario, calibration, &options)?;
    if let Some((path, false)) = backing {
        announce_backing(path, &config.device);
    }
    let export = NbdExport::start(&cluster, &config)?;
    let description = export.export();
    let uri = listener.uri();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // A second handler (a test harness that installs its own) is no reason to refuse.
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    let (tx, rx) = mpsc::channel();
    let _socket = listener
        .serve(description.clone(), tx)
        .map_err(CliError::Listener)?;
    eprintln!(
        "serving {:?} ({} bytes, {}-byte blocks, transfers of at most {} bytes){} at {uri}",
        description.name,
        description.size,
        description.block.minimum,
        export.max_transfer(),
        if config.read_only { ", read-only" } else { "" },
    );
    let control = ServeControl {
        stop: Some(&stop),
        once: a.once,
        every: a.stats_every,
    };
    // What the controller was asked to do, read through the driver before and after.
    let commands_before = export.io_commands().ok();
    let stats = export.serve(&rx, control, |s| print!("{}", render(s)))?;
    print!("{}", render(&stats));
    if let (Some((r0, w0)), Ok((r1, w1))) = (commands_before, export.io_commands()) {
        println!(
            "the controller carried out {} Read and {} Write commands (its SMART log)",
            r1.saturating_sub(r0),
            w1.saturating_sub(w0)
        );
    }
    // Writes acknowledged since the last FLUSH reach the backing file before the process
    // ends; if they cannot, the exit status says so.
    let durable = export.make_durable(&stats);
    let closed = export.close();
    durable?;
    Ok(closed?)
}

/// Turns transparent huge pages off for this process, before the cluster allocates anything.
///
/// An NVMe namespace's data lives in 4 KiB pages allocated as clients first write them;
/// mimalloc asks for huge pages for its arenas, so the first write into fresh memory makes
/// the kernel zero a whole 2 MiB page. Random 4 KiB writes over an export of 1 GiB touch
/// all of it within seconds: measured with fio (randwrite, QD32, crc32c verify) against a
/// fresh `serve nbd`, the first 3 s ran at 3,900 writes/s with 1.9 s of the server's CPU
/// time in the kernel (perf: 64% of samples in `clear_page_erms` under
/// `do_huge_pmd_anonymous_page`), and at 16,200 writes/s with 0.8 s in the kernel with huge
/// pages off; the emulation itself runs no slower without them (`bench engine`: 9.0 million
/// TLPs/s either way). With small pages only the 4 KiB pages a write touches are zeroed, as
/// in an `nbdkit memory` disk. Failing to turn them off changes nothing but the speed.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_thp_disable(true);
}

/// The figures: virtual time first, then wall time, each saying which it is.
fn render(s: &NbdStats) -> String {
    let lat = |r: &smartio_workloads::LatencyRecorder| {
        if r.count() == 0 {
            "  lat (usec): no requests\n".to_string()
        } else {
            crate::render::latency_lines(&LatencyNs::of(r))
        }
    };
    let ops = s.ops();
    let rate = |secs: f64| if secs > 0.0 { ops as f64 / secs } else { 0.0 };
    let vsecs = s.virtual_elapsed.as_ps() as f64 * 1e-12;
    let wsecs = s.wall_elapsed.as_secs_f64();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = String::new();
    out.push_str(&format!(
        "{ops} requests: {} reads ({:.1} MiB), {} writes ({:.1} MiB), {} flushes, {} write-zeroes, {} trims; {} refused, {} failed; {} connections\n",
        s.reads,
        mib(s.bytes_read),
        s.writes,
        mib(s.bytes_written),
        s.flushes,
        s.zeroes,
        s.trims,
        s.refused,
        s.failed,
        s.connections
    ));
    if s.dropped == 0 {
        out.push_str("dropped: 0\n");
    } else {
        out.push_str(&format!(
            "dropped: {} (read after the stop: {} answered ESHUTDOWN, {} unanswered as their connection closed)\n",
            s.dropped,
            s.dropped - s.dropped_unanswered,
            s.dropped_unanswered
        ));
    }
    let per = |n: u64| if ops > 0 { n as f64 / ops as f64 } else { 0.0 };
    out.push_str(&format!(
        "emulation: {} events, {} TLPs ({:.1} and {:.1} per request)\n",
        s.events,
        s.tlp_arrivals,
        per(s.events),
        per(s.tlp_arrivals)
    ));
    out.push_str(&format!(
        "virtual time (the emulated cluster's clock; it runs only while requests are in flight): {:.3} ms, IOPS={:.0}\n",
        vsecs * 1e3,
        rate(vsecs)
    ));
    out.push_str(&lat(&s.virtual_latency));
    out.push_str(&format!(
        "wall time (this machine's clock, first request to last reply, as the server saw them): {:.3} s, IOPS={:.0}\n",
        wsecs,
        rate(wsecs)
    ));
    out.push_str(&lat(&s.wall_latency));
    out
}
