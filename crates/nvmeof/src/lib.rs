//! `nvmeof-compare`: QD1 random reads and writes of one NVMe by every way the papers compare
//! (Paper V §7.4.3, Figs. 36–38; seed 003 §VI, Fig. 10; seed 004 Figs. 9–10) — the
//! distributed driver with its client next to the controller and across the NTB, the native
//! kernel driver on the controller's host, and NVMe-oF over RDMA from the far host with a
//! polled user-space initiator or the kernel's.
//!
//! ```text
//!   local native     fio (lender) ── block layer ── nvme driver ─────────────── nvme0 (lender)
//!   local SmartIO    client (lender) ───────────────────────────────────────── nvme0 (lender)
//!   remote SmartIO   client (borrower) ══ NTB ══ PEX8733 ── PEX8796 ── nvme0
//!   NVMe-oF polled   initiator (borrower) ══ HCA ══ HCA ── target (lender) ── nvme0
//!   NVMe-oF kernel   fio ── block layer ── nvme-rdma (borrower) ══ HCA ══ HCA ── target ── nvme0
//! ```
//!
//! Each NVMe-oF row is compared with the local row of its own kind, as the seeds did: the
//! polled initiator with the polled local driver (seed 004 Fig. 10 put SPDK on both sides),
//! the kernel initiator with the native driver in interrupt mode under the block layer (seed
//! 003 Fig. 10: the stock Linux driver locally, its NVMe-oF initiator remotely), so that what
//! both pay — the block layer, an interrupt, the waiting thread's wake-up — cancels and the
//! difference is NVMe-oF's own. The steps of an NVMe-oF I/O are in `rdma`.
//!
//! The native row runs first, with the native driver bound to the controller on the target;
//! it is then unbound, and the distributed driver's manager takes the controller for the
//! other rows. Every byte moves and is checked: the namespace holds a known pattern in every
//! block the rows touch, each read is checked where its reader ends up with it, and each
//! write row writes a new version of the pattern that is read back afterwards (`blocks`).
//!
//! # Inside this crate
//!
//! `nvmeof_compare` runs the native driver with interrupts and the block
//! layer, and local and remote SmartIO clients, against NVMe-oF over RDMA with a polled or a
//! kernel initiator and an SPDK or offloading target, reads and writes, every byte checked:
//! the NVMe command on the target is the emulated controller, the network, HCA, initiator
//! and target steps are `[nvmeof]` calibration entries, plus an HCA's DMA read of work requests
//! it was told about by a doorbell only — the kernel's mlx5 driver always posts that way,
//! user-space libmlx5 only for more than one request at once (a single one it writes into the
//! HCA's BAR, BlueFlame) — `[nvmeof] hca_wqe_fetch_ns`, a device's DMA read round trip as
//! Neugebauer et al. measured it (the engine's own device reads on a direct link come to ~0.19
//! µs, below that measurement). `rdma` has the steps of one I/O, `blocks` the offsets, the pattern versions and the rows' I/O loop.

#![forbid(unsafe_code)]

mod blocks;
mod costs;
mod error;
mod rdma;
mod sgl;

pub use error::NvmeofError;

use blocks::{Blocks, Measured, Offsets, Way, MAX_SPAN};
use costs::RdmaCosts;
use rdma::{Rdma, Stack};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::NamespaceInfo;
use smartio_drivers::nvme::{CompletionMode, NvmeDevice, NvmeDriver, NvmeDriverConfig};
use smartio_drivers::nvme_dist::{Client, ClientQueue, Manager, SqPlacement};
use smartio_host::HostOs;
use smartio_smartio::{Fdid, SegmentLocation, SmartIo};
use smartio_workloads::booted::{run_workload, Booted};
use smartio_workloads::{LatencyRecorder, LatencySummary};
use std::rc::Rc;

/// One NVMe operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NvmeofIo {
    /// A read of `bs` bytes.
    Read,
    /// A write of `bs` bytes.
    Write,
}

impl NvmeofIo {
    /// `read` or `write`.
    pub fn name(self) -> &'static str {
        match self {
            NvmeofIo::Read => "read",
            NvmeofIo::Write => "write",
        }
    }
}

/// Which operations a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoChoice {
    /// Random reads only.
    Reads,
    /// Random writes only.
    Writes,
    /// Reads, then writes.
    #[default]
    Both,
}

impl IoChoice {
    fn ios(self) -> &'static [NvmeofIo] {
        match self {
            IoChoice::Reads => &[NvmeofIo::Read],
            IoChoice::Writes => &[NvmeofIo::Write],
            IoChoice::Both => &[NvmeofIo::Read, NvmeofIo::Write],
        }
    }
}

/// Which NVMe-oF initiators a run measures (each with its own local baseline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitiatorChoice {
    /// The polled user-space initiator, against the local SmartIO driver.
    Polled,
    /// The kernel initiator, against the native driver with interrupts and the block layer.
    Kernel,
    /// Both.
    #[default]
    Both,
}

impl InitiatorChoice {
    fn polled(self) -> bool {
        matches!(self, InitiatorChoice::Polled | InitiatorChoice::Both)
    }

    fn kernel(self) -> bool {
        matches!(self, InitiatorChoice::Kernel | InitiatorChoice::Both)
    }
}

/// How the NVMe-oF target serves commands: the modes the seeds measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetMode {
    /// SPDK's software target, polling its HCA and its NVMe (seeds 003 and 004, Paper V).
    #[default]
    Spdk,
    /// Target offload: the HCA hands commands to the NVMe and answers by itself (seed 003
    /// §VI tried it; Paper V §7.4.3 describes it).
    Offload,
}

impl TargetMode {
    /// `spdk` or `offload`.
    pub fn name(self) -> &'static str {
        match self {
            TargetMode::Spdk => "spdk",
            TargetMode::Offload => "offload",
        }
    }
}

/// The way a row reaches the NVMe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPath {
    /// The native driver on the target, interrupts and the block layer: the kernel
    /// initiator's baseline.
    LocalNative,
    /// The distributed driver's client on the target (polled, no block layer).
    LocalSmartio,
    /// The distributed driver's client on the initiator host, across the NTB.
    RemoteSmartio,
    /// NVMe-oF with the polled user-space initiator.
    NvmeofPolled,
    /// NVMe-oF with the kernel initiator.
    NvmeofKernel,
}

impl IoPath {
    /// The local row this one is compared with.
    pub fn baseline(self) -> IoPath {
        match self {
            IoPath::LocalNative | IoPath::NvmeofKernel => IoPath::LocalNative,
            _ => IoPath::LocalSmartio,
        }
    }

    /// What the row is, in words.
    pub fn describe(self) -> &'static str {
        match self {
            IoPath::LocalNative => "local native driver (interrupts, block layer)",
            IoPath::LocalSmartio => "local SmartIO driver",
            IoPath::RemoteSmartio => "remote SmartIO driver",
            IoPath::NvmeofPolled => "NVMe-oF, polled user-space initiator",
            IoPath::NvmeofKernel => "NVMe-oF, kernel initiator (nvme-rdma)",
        }
    }

    /// Whether the row's I/O is issued on the initiator host (the far one) rather than on
    /// the target, which has the controller.
    pub fn remote(self) -> bool {
        !matches!(self, IoPath::LocalNative | IoPath::LocalSmartio)
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct NvmeofConfig {
    /// The controller, `lender:device`.
    pub device: String,
    /// The host that has the controller: it runs the native driver, the distributed
    /// driver's manager, the local client and the NVMe-oF target.
    pub target: String,
    /// The far host: it runs the remote client and the NVMe-oF initiators.
    pub initiator: String,
    /// I/Os per row.
    pub ops: u64,
    /// Bytes per I/O (a multiple of the namespace's LBA size).
    pub bs: u64,
    /// Seed of the random offsets and of the data pattern.
    pub seed: u64,
    /// Reads, writes or both.
    pub io: IoChoice,
    /// Which NVMe-oF initiators.
    pub initiators: InitiatorChoice,
    /// How the target serves them.
    pub target_mode: TargetMode,
}

impl Default for NvmeofConfig {
    fn default() -> Self {
        NvmeofConfig {
            device: "lender:nvme0".into(),
            target: "lender".into(),
            initiator: "borrower".into(),
            ops: 1000,
            bs: 4096,
            seed: 1,
            io: IoChoice::default(),
            initiators: InitiatorChoice::default(),
            target_mode: TargetMode::default(),
        }
    }
}

/// One step of an NVMe-oF I/O and its median time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmeofStep {
    /// What happens.
    pub step: String,
    /// Median over the row's I/Os, in nanoseconds.
    pub median_ns: f64,
}

/// A row minus its baseline, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gap {
    /// Difference of the minimum latencies (seed 003's measure).
    pub min: f64,
    /// Difference of the medians.
    pub p50: f64,
    /// Difference of the 99th percentiles (seed 004's measure).
    pub p99: f64,
}

/// One way, one operation: its latency, and what it adds over its baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmeofRow {
    /// The way.
    pub path: IoPath,
    /// The operation.
    pub io: NvmeofIo,
    /// From submission to completion, in nanoseconds.
    pub latency: LatencySummary,
    /// The row it is compared with.
    pub baseline: IoPath,
    /// This row's latency minus the baseline's.
    pub added: Gap,
    /// An NVMe-oF row's steps (medians; their sum is close to, not exactly, the median of
    /// the whole); empty for the other rows.
    pub steps: Vec<NvmeofStep>,
}

/// What `nvmeof-compare` measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmeofCompare {
    /// I/Os per row.
    pub ops: u64,
    /// Bytes per I/O.
    pub bs: u64,
    /// How the NVMe-oF target served the commands.
    pub target_mode: TargetMode,
    /// Where the remote client's SQ ended up.
    pub remote_sq_in: String,
    /// Every row, by operation, then in [`IoPath`] order.
    pub rows: Vec<NvmeofRow>,
}

impl NvmeofCompare {
    /// The row of `path` and `io`, if the run measured it.
    pub fn row(&self, path: IoPath, io: NvmeofIo) -> Option<&NvmeofRow> {
        self.rows.iter().find(|r| r.path == path && r.io == io)
    }
}

/// Entries of every queue pair: one command in flight (QD1) needs two, as an SQ of `n`
/// entries holds `n - 1` commands.
const QD1_ENTRIES: u16 = 2;

/// Where the remote client's SQ goes: its own RAM, like its CQ and data. On `back-to-back`
/// the controller reaches borrower RAM through as many switch chips (PEX8796 and two
/// PEX8733) as lender RAM, so the remote client is the local one mirrored (Paper V
/// Fig. 37(c)) and the two rows differ only by the NTB path itself. `Hints` would put the
/// SQ in lender RAM here (the controller has no memory buffer), which is the other
/// experiment (`sq-placement`).
const REMOTE_SQ: SqPlacement = SqPlacement::ClientRam;

/// Runs `config` on `cluster`: boots every host and starts SmartIO; measures the native
/// driver's rows (if the kernel initiator is asked for) with the driver bound on the target,
/// then unbinds it, starts the distributed driver's manager on the target and measures the
/// other rows, all with the same offsets.
pub fn nvmeof_compare(
    cluster: &Cluster,
    config: &NvmeofConfig,
) -> Result<NvmeofCompare, NvmeofError> {
    let costs = RdmaCosts::new(&cluster.calibration.nvmeof, cluster.machine.cpu_timing())?;
    let local_name = check_config(config)?;
    let (booted, fdid) = Booted::with_device(cluster, &config.device)?;
    let (tos, ios) = (
        booted.host(&config.target)?,
        booted.host(&config.initiator)?,
    );
    let names = booted.names();
    let Booted { smartio, .. } = booted;
    let cfg = config.clone();
    let machine = cluster.machine.clone();
    run_workload(&cluster.machine, async move {
        let mut measured: Vec<(IoPath, NvmeofIo, Measured)> = Vec::new();

        // The native driver's rows, before the distributed driver takes the controller.
        let mut blocks = None;
        if cfg.initiators.kernel() {
            let b = native_rows(&machine, &tos, &local_name, &cfg, &mut measured).await?;
            blocks = Some(b);
        }

        let manager = Manager::start(&smartio, &tos, fdid)
            .await
            .map_err(|source| NvmeofError::Manager {
                host: cfg.target.clone(),
                source: Box::new(source),
            })?;
        let connect =
            |os: HostOs, who: &'static str| connect(&smartio, &manager, fdid, os, who, cfg.bs);
        let (local, lq) = connect(tos.clone(), "local client").await?;
        let (remote, rq) = connect(ios.clone(), "remote client").await?;
        let (target, tq) = connect(tos.clone(), "NVMe-oF target").await?;
        let remote_sq_in = sq_in(&rq, &names);
        let local_way = Way::Client {
            client: &local,
            q: &lq,
        };
        let blocks = match blocks {
            Some(b) => b,
            None => pattern_through(&machine, &manager, &local_way, &cfg).await?,
        };
        let rdma = Rdma::new(
            &machine,
            costs,
            cfg.target_mode,
            &ios,
            &tos,
            &target,
            &tq,
            cfg.bs,
        )?;
        let remote_way = Way::Client {
            client: &remote,
            q: &rq,
        };
        let polled_way = Way::Nvmeof {
            rdma: &rdma,
            stack: Stack::Polled,
        };
        let kernel_way = Way::Nvmeof {
            rdma: &rdma,
            stack: Stack::Kernel,
        };
        let mut ways = vec![
            (IoPath::LocalSmartio, &local_way, "local SmartIO"),
            (IoPath::RemoteSmartio, &remote_way, "remote SmartIO"),
        ];
        if cfg.initiators.polled() {
            ways.push((IoPath::NvmeofPolled, &polled_way, "NVMe-oF polled"));
        }
        if cfg.initiators.kernel() {
            ways.push((IoPath::NvmeofKernel, &kernel_way, "NVMe-oF kernel"));
        }
        let result = measure_rows(&blocks, &ways, &local_way, &cfg, &mut measured).await;
        rdma.free(&ios, &tos);
        result?;
        drop(ways);
        leave([(local, "local"), (remote, "remote"), (target, "target")]).await?;
        Ok(NvmeofCompare {
            ops: cfg.ops,
            bs: cfg.bs,
            target_mode: cfg.target_mode,
            remote_sq_in,
            rows: rows(measured),
        })
    })
}

/// Refuses a configuration that names no lender's device on the target, one host for both
/// ends, or no I/O; the device's name on its lender.
fn check_config(config: &NvmeofConfig) -> Result<String, NvmeofError> {
    let (lender, local_name) =
        config
            .device
            .split_once(':')
            .ok_or_else(|| NvmeofError::NotQualified {
                device: config.device.clone(),
            })?;
    if lender != config.target {
        return Err(NvmeofError::TargetNotLender {
            device: config.device.clone(),
            lender: lender.to_string(),
            target: config.target.clone(),
        });
    }
    if config.initiator == config.target {
        return Err(NvmeofError::SameHost {
            host: config.target.clone(),
        });
    }
    if config.ops == 0 {
        return Err(NvmeofError::NoOps);
    }
    if config.bs == 0 {
        return Err(NvmeofError::ZeroBlockSize);
    }
    Ok(local_name.to_string())
}

/// A client of the distributed driver on `os` (`who` names it in errors), with a QD1
/// queue pair: its SQ in the client's RAM on the manager's host, else placed as
/// [`REMOTE_SQ`].
async fn connect(
    smartio: &SmartIo,
    manager: &Rc<Manager>,
    fdid: Fdid,
    os: HostOs,
    who: &'static str,
    bs: u64,
) -> Result<(Client, Rc<ClientQueue>), NvmeofError> {
    let client = Client::connect(smartio, &os, fdid, manager, bs)
        .await
        .map_err(|source| NvmeofError::Connect {
            who,
            host: os.name().to_string(),
            source: Box::new(source),
        })?;
    let placement = if os.id() == manager.host() {
        SqPlacement::ClientRam
    } else {
        REMOTE_SQ
    };
    let q = client
        .create_queue(QD1_ENTRIES, placement)
        .await
        .map_err(|source| NvmeofError::QueuePair {
            who,
            source: Box::new(source),
        })?;
    Ok((client, q))
}

/// The blocks of the manager's first namespace the rows touch, with the pattern written
/// through `local_way` (when the native driver did not write it).
async fn pattern_through<'m>(
    machine: &'m smartio_machine::Machine,
    manager: &Manager,
    local_way: &Way<'_>,
    cfg: &NvmeofConfig,
) -> Result<Blocks<'m>, NvmeofError> {
    let ns = *manager
        .namespaces()
        .first()
        .ok_or(NvmeofError::NoNamespace)?;
    let b = geometry(machine, ns, manager.max_transfer(), cfg)?;
    blocks::write_all(&b, local_way).await?;
    Ok(b)
}

/// Each client leaves the distributed driver, in order.
async fn leave(clients: [(Client, &'static str); 3]) -> Result<(), NvmeofError> {
    for (client, who) in clients {
        client.leave().await.map_err(|source| NvmeofError::Leave {
            who,
            source: Box::new(source),
        })?;
    }
    Ok(())
}

/// Where the remote client's SQ is, for the report.
fn sq_in(q: &ClientQueue, names: &[String]) -> String {
    match q.sq_location() {
        SegmentLocation::Ram { host, .. } => format!(
            "{} RAM",
            names
                .get(host.index())
                .map_or("an unknown host's", String::as_str)
        ),
        SegmentLocation::Device { .. } => "controller memory".to_string(),
        SegmentLocation::LocalDevice { .. } => "a host's device memory".to_string(),
    }
}

/// Measures each way's row for each operation into `measured` (stopping at the first
/// failure).
async fn measure_rows(
    blocks: &Blocks<'_>,
    ways: &[(IoPath, &Way<'_>, &'static str)],
    local_way: &Way<'_>,
    cfg: &NvmeofConfig,
    measured: &mut Vec<(IoPath, NvmeofIo, Measured)>,
) -> Result<(), NvmeofError> {
    for &op in cfg.io.ios() {
        for (path, way, label) in ways {
            let m = blocks::row(blocks, way, local_way, op, label).await?;
            measured.push((*path, op, m));
        }
    }
    Ok(())
}

/// Binds the native NVMe driver (interrupts, one QD1 queue pair) to `device` on the target,
/// writes the pattern through it, measures its rows into `measured`, and unbinds it.
async fn native_rows<'m>(
    machine: &'m smartio_machine::Machine,
    tos: &HostOs,
    device: &str,
    cfg: &NvmeofConfig,
    measured: &mut Vec<(IoPath, NvmeofIo, Measured)>,
) -> Result<Blocks<'m>, NvmeofError> {
    let native = |what: &'static str| {
        move |source| NvmeofError::Native {
            what,
            host: tos.name().to_string(),
            device: device.to_string(),
            source: Box::new(source),
        }
    };
    tos.register_driver(Rc::new(NvmeDriver {
        config: NvmeDriverConfig {
            mode: CompletionMode::Interrupt,
            io_queues: 1,
            queue_entries: QD1_ENTRIES,
            intx: false,
        },
    }));
    tos.probe(device).await.map_err(native("bind"))?;
    let dev: Rc<NvmeDevice> =
        tos.driver_data(device)
            .ok_or_else(|| NvmeofError::NotNvmeDriver {
                host: tos.name().to_string(),
                device: device.to_string(),
            })?;
    let ns = *dev.namespaces().first().ok_or(NvmeofError::NoNamespace)?;
    let blocks = geometry(machine, ns, dev.info().max_transfer, cfg)?;
    let buf = tos.alloc(cfg.bs).map_err(|source| NvmeofError::Alloc {
        what: "the native driver's buffer",
        host: tos.name().to_string(),
        source,
    })?;
    let way = Way::Native {
        dev: &dev,
        os: tos,
        buf,
    };
    let mut run = blocks::write_all(&blocks, &way).await;
    for &op in cfg.io.ios() {
        if run.is_err() {
            break;
        }
        run = blocks::row(&blocks, &way, &way, op, "local native")
            .await
            .map(|m| measured.push((IoPath::LocalNative, op, m)));
    }
    tos.free(buf);
    drop(dev);
    run?;
    tos.unbind(device).await.map_err(native("unbind"))?;
    Ok(blocks)
}

/// The blocks the rows touch on namespace `ns` with I/Os of `cfg.bs` bytes.
fn geometry<'m>(
    machine: &'m smartio_machine::Machine,
    ns: NamespaceInfo,
    max_transfer: u64,
    cfg: &NvmeofConfig,
) -> Result<Blocks<'m>, NvmeofError> {
    let lba_size = u64::from(ns.lba_size);
    if !cfg.bs.is_multiple_of(lba_size) {
        return Err(NvmeofError::BsNotMultiple {
            bs: cfg.bs,
            lba_size,
        });
    }
    // One command moves at most MDTS; a keyed SGL describes at most 24 bits of length.
    let most = max_transfer.min(sgl::KEYED_MAX_LEN);
    let too_large = NvmeofError::BsTooLarge { bs: cfg.bs, most };
    if cfg.bs > most {
        return Err(too_large);
    }
    let blocks = u32::try_from(cfg.bs / lba_size).map_err(|_| too_large)?;
    let lbas = Offsets {
        seed: cfg.seed,
        span: (ns.blocks / u64::from(blocks)).clamp(1, MAX_SPAN),
        blocks,
        ops: cfg.ops,
    };
    Ok(Blocks::new(machine, ns.nsid, cfg.bs, cfg.seed, lbas))
}

/// The rows of `measured`, by operation then way, each against its baseline.
fn rows(measured: Vec<(IoPath, NvmeofIo, Measured)>) -> Vec<NvmeofRow> {
    let summaries: Vec<(IoPath, NvmeofIo, LatencySummary)> = measured
        .iter()
        .map(|(p, io, m)| (*p, *io, LatencySummary::of(&m.total)))
        .collect();
    let mut rows: Vec<NvmeofRow> = measured
        .into_iter()
        .map(|(path, io, m)| {
            let latency = LatencySummary::of(&m.total);
            let baseline = path.baseline();
            let base = summaries
                .iter()
                .find(|(p, i, _)| *p == baseline && *i == io)
                .map_or(latency, |(_, _, l)| *l);
            NvmeofRow {
                path,
                io,
                latency,
                baseline,
                added: Gap {
                    min: latency.min - base.min,
                    p50: latency.p50 - base.p50,
                    p99: latency.p99 - base.p99,
                },
                steps: m.steps.iter().map(|(s, r)| step(s, r)).collect(),
            }
        })
        .collect();
    rows.sort_by_key(|r| (r.io, r.path));
    rows
}

fn step(what: &str, r: &LatencyRecorder) -> NvmeofStep {
    let (a, b) = r.middle();
    NvmeofStep {
        step: what.to_string(),
        median_ns: (a as f64 / 1000.0 + b as f64 / 1000.0) / 2.0,
    }
}
