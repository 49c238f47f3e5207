//! Failover of a distributed-driver client across two NTB paths (Paper V §6.3): a program on a
//! host with two adapters keeps a client — and so a queue pair — on each. Its I/O goes over
//! the primary path; when the primary cable is cut mid-run the program learns it (the
//! adapter's link-down event, or a command timing out), gives up on the command in flight
//! and re-issues it on the backup path, then carries on there.
//!
//! Every write stores the block's pattern for its next version and every read checks the
//! current one (the fio scheme), so a lost write, or an old write landing after a newer one,
//! shows up as wrong data. What the run reports as lost or written twice is measured, not
//! inferred from the program's own bookkeeping: a final read-back of every block compares
//! its content with the version the program last wrote, and the controller's own counts of
//! read and write commands (its SMART / health log) are compared with the I/Os the program
//! believes it did. [`RecoveryFault`] makes the program recover wrongly on purpose, so tests
//! can show those measurements catch a dropped or a doubled write.

use crate::booted::{run_workload, BootError, Booted, Stuck};
use crate::fio::pattern;
use crate::stats::LatencySummary;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, ClientQueue, DistError, Manager, SqPlacement};
use smartio_fabric::{HostId, LinkId};
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_platform::{race, AccessError, BusAddr, Clock, Either, Port, SimDuration, SimTime};
use std::rc::Rc;
use thiserror::Error;

/// Why [`failover`] could not run, or what went wrong that the run could not count as lost
/// or duplicated I/O.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FailoverError {
    /// A count of zero: nothing to run.
    #[error("ops, bs and blocks must be positive")]
    NotPositive,
    /// The hosts did not boot, or the device or a host is unknown.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The program's host lacks the adapter of one of the two paths.
    #[error("{host} has no NTB adapter {number}: failover needs two")]
    NoAdapter {
        /// The program's host.
        host: String,
        /// The adapter's number on it (0 primary, 1 backup).
        number: u32,
    },
    /// An adapter of one of the two paths is not cabled.
    #[error("{host}'s NTB adapter {number} has no cable")]
    NoCable {
        /// The program's host.
        host: String,
        /// The adapter's number on it.
        number: u32,
    },
    /// The distributed driver failed (the manager, its SMART counts, a client leaving).
    #[error(transparent)]
    Dist(#[from] DistError),
    /// A path could not be set up: its client or its queue pair.
    #[error("{step} on adapter {adapter}: {source}")]
    Path {
        /// `"client"` or `"queue"`.
        step: &'static str,
        /// The adapter of the path.
        adapter: u32,
        /// The driver's refusal.
        source: DistError,
    },
    /// Giving up the primary queue pair after the path was lost failed.
    #[error("abandon the primary queue pair: {0}")]
    Abandon(#[source] DistError),
    /// The controller reports no namespace.
    #[error("the controller has no namespace")]
    NoNamespace,
    /// The blocks asked for do not fit the namespace, or `bs` is not whole LBAs.
    #[error("{blocks} blocks of {bs} bytes do not fit namespace {nsid} ({ns_blocks} blocks of {lba_size})")]
    DoesNotFit {
        /// Blocks asked for.
        blocks: u64,
        /// Bytes per block asked for.
        bs: u64,
        /// The namespace.
        nsid: u32,
        /// Its size in LBAs.
        ns_blocks: u64,
        /// Its LBA size.
        lba_size: u64,
    },
    /// Writing a block's first version (untimed set-up) failed.
    #[error("initial write of block {block}: {failure}")]
    InitialWrite {
        /// The block.
        block: u64,
        /// Why.
        failure: IoFailure,
    },
    /// An I/O of the timed run failed other than by its path going away first.
    #[error("I/O {index} (block {block}): {failure}")]
    Io {
        /// Which I/O, from 0.
        index: u64,
        /// Its block.
        block: u64,
        /// Why.
        failure: IoFailure,
    },
    /// Reading a block back after the run failed, or it held none of its versions.
    #[error("read-back of block {block}: {failure}")]
    ReadBack {
        /// The block.
        block: u64,
        /// Why.
        failure: IoFailure,
    },
    /// Queue pairs still had owners after every client left.
    #[error("queue pairs left behind: {owners:?}")]
    QueuePairsLeft {
        /// The manager's owner table: queue id and host.
        owners: Vec<(u16, HostId)>,
    },
    /// The run ended before the workload finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// How the program found its path gone.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathLost {
    /// It gave up on a command (`why`: `timeout`, `link event`).
    #[error("{why}")]
    GaveUp {
        /// The queue pair.
        qid: u16,
        /// The command.
        what: String,
        /// What made the program give up.
        why: String,
    },
    /// A doorbell or CQ-head write met the cut itself.
    #[error("{what}: {source}")]
    Cut {
        /// The write.
        what: String,
        /// The link-down the fabric answered.
        source: AccessError,
    },
}

/// Why one I/O of the program failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IoFailure {
    /// The path is gone.
    #[error("{0}")]
    PathLost(PathLost),
    /// Storing the block's pattern into the client's buffer failed.
    #[error("fill the buffer: {0}")]
    FillBuffer(#[source] AccessError),
    /// The driver failed the command for another reason.
    #[error(transparent)]
    Dist(DistError),
    /// A block read back differs from the version it should hold.
    #[error(
        "block {block} is wrong at byte {at}: read {got:#04x}, version {version} has {want:#04x}"
    )]
    WrongData {
        /// The block.
        block: u64,
        /// First differing byte.
        at: usize,
        /// What was read there.
        got: u8,
        /// The version expected.
        version: u32,
        /// What that version holds there.
        want: u8,
    },
    /// After the run a block holds content the program never wrote.
    #[error("block {block} holds none of versions 0..={version} the program wrote")]
    Unrecognized {
        /// The block.
        block: u64,
        /// The last version written.
        version: u32,
    },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct FailoverConfig {
    /// The controller, `lender:device`.
    pub device: String,
    /// Host of the manager.
    pub manager: String,
    /// Host of the program; it needs two NTB adapters (adapter 0 is the primary path).
    pub client: String,
    /// I/Os the program completes, half reads and half writes, one at a time.
    pub ops: u64,
    /// Bytes per I/O.
    pub bs: u64,
    /// Blocks of `bs` bytes the I/O is spread over.
    pub blocks: u64,
    /// When, after the timed I/O starts, the primary cable is cut.
    pub cut_after: SimDuration,
    /// How long a command may take before the program gives up on it.
    pub timeout: SimDuration,
    /// Whether the program watches its adapter's link events (otherwise only timeouts).
    pub link_events: bool,
    /// Check every block read against its expected pattern, and read the whole range back
    /// at the end.
    pub verify: bool,
    /// Random-offset seed.
    pub seed: u64,
    /// A deliberate mistake in the program's recovery (tests only; `None` in every
    /// experiment).
    pub fault: RecoveryFault,
}

/// How the program handles a write it gave up on when the primary path died. Only
/// [`RecoveryFault::None`] is correct; the others exist so tests can show that the run's
/// `lost` and `duplicated` figures are measurements that catch a wrong recovery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum RecoveryFault {
    /// Correct: ask the manager to delete the lost queue pair, read the block through the
    /// backup path, and issue the write again only if it had not landed.
    #[default]
    None,
    /// Wrong: count the write as done without checking or issuing it again. A write that
    /// had not landed is lost.
    DropGivenUpWrite,
    /// Wrong: issue the write again without checking whether it landed. A write that had
    /// landed runs twice.
    ReissueWithoutCheck,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        FailoverConfig {
            device: "lender:nvme0".into(),
            manager: "lender".into(),
            client: "borrower".into(),
            ops: 2000,
            bs: 4096,
            blocks: 256,
            cut_after: SimDuration::from_ns_f64(5_000_000.0),
            timeout: SimDuration::from_ns_f64(1_000_000.0),
            link_events: true,
            verify: true,
            seed: 1,
            fault: RecoveryFault::None,
        }
    }
}

/// One completed I/O, for the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Completed {
    /// When it completed, microseconds after the timed I/O started.
    pub at_us: f64,
    /// Its latency as the program saw it, re-issue included (ns).
    pub latency_ns: f64,
    /// The path it completed on: 0 primary, 1 backup.
    pub path: u8,
}

/// What a run found.
///
/// `completed`, `on_primary`, `on_backup`, `reissued` and `confirmed` are the program's own
/// view; `lost`, `duplicated`, `writes_missing`, `stale_blocks` and `reads_rerun` are
/// measured against the device (its content and its command counts), so a recovery that
/// drops or repeats a write shows up there even when the program believes all is well.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailoverResult {
    /// I/Os asked for.
    pub ops: u64,
    /// I/Os the program saw complete (a write it dropped on purpose, see [`RecoveryFault`],
    /// counts: the program believes it done).
    pub completed: u64,
    /// Writes lost: the larger of `writes_missing` and `stale_blocks`, each of which is a
    /// lower bound (a dropped write to a block that is written again later leaves no trace
    /// in the data; a dropped write and a doubled one cancel in the counts).
    pub lost: u64,
    /// Writes the program believes done that the controller never ran: the program's
    /// writes beyond the controller's count of write commands (its SMART log) during the
    /// timed I/O.
    pub writes_missing: u64,
    /// Blocks whose final content, read back after the run, is an older version than the
    /// one the program last wrote.
    pub stale_blocks: u64,
    /// Writes that ran twice: the controller's count of write commands beyond the writes
    /// the program did — a write given up on that the controller still carried out before
    /// it was issued again.
    pub duplicated: u64,
    /// Reads the controller ran beyond the program's own: the check of a write given up on,
    /// or a read given up on (its data died in the cable) and issued again. Harmless;
    /// reported so the controller's counts add up.
    pub reads_rerun: u64,
    /// Read and write commands the controller carried out during the timed I/O.
    pub device_commands: u64,
    /// I/Os completed on the primary path.
    pub on_primary: u64,
    /// I/Os completed on the backup path.
    pub on_backup: u64,
    /// Writes in flight when the program gave up on the primary path (0 or 1: the I/O is
    /// QD1).
    pub given_up_writes: u64,
    /// I/Os given up on the primary and issued again on the backup.
    pub reissued: u64,
    /// Writes given up on that a read through the backup found had landed (not issued
    /// again).
    pub confirmed: u64,
    /// Bytes checked against the expected pattern: reads during the run (with `verify`),
    /// then the final read-back of every block.
    pub verified_bytes: u64,
    /// When the cable was cut (µs after the timed I/O started).
    pub cut_at_us: f64,
    /// When the program gave up on the primary (µs).
    pub detected_at_us: f64,
    /// What told it: `"link event"` or `"timeout"`.
    pub detected_by: String,
    /// When the first I/O completed on the backup (µs).
    pub resumed_at_us: f64,
    /// From the cut to the first completion on the backup (µs): how long I/O stood still.
    pub interruption_us: f64,
    /// Latency of the I/Os before the cut (ns).
    pub before_ns: LatencySummary,
    /// Latency of the I/Os after the resumption (ns).
    pub after_ns: LatencySummary,
    /// Every I/O, in completion order.
    pub timeline: Vec<Completed>,
}

/// One path: a client through one adapter, with its queue pair.
struct Path {
    client: Client,
    queue: Rc<ClientQueue>,
}

/// Runs `config` on `cluster`.
pub fn failover(
    cluster: &Cluster,
    config: &FailoverConfig,
) -> Result<FailoverResult, FailoverError> {
    if config.ops == 0 || config.bs == 0 || config.blocks == 0 {
        return Err(FailoverError::NotPositive);
    }
    let (booted, fdid) = Booted::with_device(cluster, &config.device)?;
    let (mos, cos) = (booted.host(&config.manager)?, booted.host(&config.client)?);
    let Booted { smartio, .. } = booted;
    let primary_cable = cable_of(&cluster.machine, cos.id(), 0)?;
    cable_of(&cluster.machine, cos.id(), 1)?;
    let cfg = config.clone();
    let machine = cluster.machine.clone();
    run_workload(&cluster.machine, async move {
        let run = async {
            let manager = Manager::start(&smartio, &mos, fdid).await?;
            let paths = open_paths(&smartio, &cos, fdid, &manager, cfg.bs).await?;
            let io = block_io(&manager, &machine, &cos, &cfg)?;
            let rig = Rig {
                io: &io,
                paths: &paths,
                machine: &machine,
                os: &cos,
                primary_cable,
                cfg: &cfg,
            };
            let mut program = Program::new(&cfg);
            // Every block starts at version 0 (untimed).
            for b in 0..cfg.blocks {
                io.write(&paths[0], b, 0, std::future::pending())
                    .await
                    .map_err(|failure| FailoverError::InitialWrite { block: b, failure })?;
            }
            let before = manager.io_commands().await?;
            let start = cos.cpu().now();
            machine.schedule_link_state(primary_cable, false, start + cfg.cut_after);
            for i in 0..cfg.ops {
                program.one_io(&rig, i, start).await?;
            }
            let after = manager.io_commands().await?;
            let stale_blocks = program.read_back(&rig).await?;
            let result = program.result(&cfg, start, (before, after), stale_blocks);
            for path in paths {
                path.client.leave().await?;
            }
            if !manager.owners().is_empty() {
                return Err(FailoverError::QueuePairsLeft {
                    owners: manager.owners(),
                });
            }
            Ok(result)
        };
        run.await
    })
}

/// The program's two paths: a client through each of the host's adapters, with a queue
/// pair.
async fn open_paths(
    smartio: &smartio_smartio::SmartIo,
    os: &HostOs,
    fdid: smartio_smartio::Fdid,
    manager: &Rc<Manager>,
    bs: u64,
) -> Result<Vec<Path>, FailoverError> {
    let mut paths = Vec::new();
    for adapter in [0, 1] {
        let client = Client::connect_via(smartio, os, fdid, manager, bs, Some(adapter))
            .await
            .map_err(|source| FailoverError::Path {
                step: "client",
                adapter,
                source,
            })?;
        let queue = client
            .create_queue(4, SqPlacement::ClientRam)
            .await
            .map_err(|source| FailoverError::Path {
                step: "queue",
                adapter,
                source,
            })?;
        paths.push(Path { client, queue });
    }
    Ok(paths)
}

/// The block I/O on the manager's first namespace, refused when `cfg`'s blocks do not fit
/// it.
fn block_io(
    manager: &Manager,
    machine: &Machine,
    os: &HostOs,
    cfg: &FailoverConfig,
) -> Result<Io, FailoverError> {
    let ns = *manager
        .namespaces()
        .first()
        .ok_or(FailoverError::NoNamespace)?;
    let lba_size = u64::from(ns.lba_size);
    if !cfg.bs.is_multiple_of(lba_size) || cfg.blocks * cfg.bs > ns.blocks * lba_size {
        return Err(FailoverError::DoesNotFit {
            blocks: cfg.blocks,
            bs: cfg.bs,
            nsid: ns.nsid,
            ns_blocks: ns.blocks,
            lba_size,
        });
    }
    Ok(Io {
        machine: machine.clone(),
        os: os.clone(),
        nsid: ns.nsid,
        per_io: (cfg.bs / lba_size) as u32,
        bs: cfg.bs,
        seed: cfg.seed,
    })
}

/// What the program runs on.
struct Rig<'a> {
    io: &'a Io,
    /// Primary, backup.
    paths: &'a [Path],
    machine: &'a Machine,
    /// The program's host.
    os: &'a HostOs,
    primary_cable: LinkId,
    cfg: &'a FailoverConfig,
}

/// The program's state: the version each block holds, the path it is on, what it did.
struct Program {
    rng: ChaCha8Rng,
    versions: Vec<u32>,
    /// 0: the primary, 1: the backup.
    on: usize,
    timeline: Vec<Completed>,
    reads: u64,
    writes: u64,
    verified: u64,
    reissued: u64,
    confirmed: u64,
    given_up_writes: u64,
    /// When it gave up on the primary, and what told it.
    detected: Option<(SimTime, String)>,
    /// When the first I/O completed on the backup.
    resumed: Option<SimTime>,
}

impl Program {
    fn new(cfg: &FailoverConfig) -> Program {
        Program {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            versions: vec![0u32; cfg.blocks as usize],
            on: 0,
            timeline: Vec::with_capacity(cfg.ops.min(1 << 20) as usize),
            reads: 0,
            writes: 0,
            verified: 0,
            reissued: 0,
            confirmed: 0,
            given_up_writes: 0,
            detected: None,
            resumed: None,
        }
    }

    /// I/O number `i`: a read or write of a random block, until it completes (on the
    /// backup after the primary is given up on); recorded in the timeline (times after
    /// `start`).
    async fn one_io(&mut self, rig: &Rig<'_>, i: u64, start: SimTime) -> Result<(), FailoverError> {
        let cfg = rig.cfg;
        let b = self.rng.random_range(0..cfg.blocks);
        let write = self.rng.random_bool(0.5);
        let version = self.versions[b as usize] + u32::from(write);
        let t0 = rig.os.cpu().now();
        loop {
            let give_up = give_up(rig.machine, rig.os, rig.primary_cable, self.on, cfg);
            let on = &rig.paths[self.on];
            let result = if write {
                rig.io.write(on, b, version, give_up).await
            } else {
                rig.io
                    .read(on, b, cfg.verify.then_some(version), give_up)
                    .await
            };
            match result {
                Ok(bytes) => {
                    self.verified += bytes;
                    *(if write {
                        &mut self.writes
                    } else {
                        &mut self.reads
                    }) += 1;
                    break;
                }
                Err(IoFailure::PathLost(lost)) if self.on == 0 => {
                    if self.fail_over(rig, lost, b, write, version).await? {
                        break;
                    }
                }
                Err(failure) => {
                    return Err(FailoverError::Io {
                        index: i,
                        block: b,
                        failure,
                    });
                }
            }
        }
        let now = rig.os.cpu().now();
        if self.on == 1 && self.resumed.is_none() {
            self.resumed = Some(now);
        }
        self.versions[b as usize] = version;
        self.timeline.push(Completed {
            at_us: now.since(start).as_ps() as f64 / 1e6,
            latency_ns: now.since(t0).as_ps() as f64 / 1e3,
            path: self.on as u8,
        });
        Ok(())
    }

    /// The primary is `lost`: the program moves to the backup. The I/O in flight (a write
    /// of block `b` at `version`, or a read) is done if the fault drops the given-up write,
    /// or if the write is found to have landed (`true`); else it is issued again.
    async fn fail_over(
        &mut self,
        rig: &Rig<'_>,
        lost: PathLost,
        b: u64,
        write: bool,
        version: u32,
    ) -> Result<bool, FailoverError> {
        self.detected = Some((rig.os.cpu().now(), lost.to_string()));
        self.on = 1;
        self.given_up_writes += u64::from(write);
        // Once the manager has deleted the lost pair, the controller has finished with the
        // command given up on: a write may have landed.
        let primary = &rig.paths[0];
        primary
            .client
            .abandon_queue(&primary.queue)
            .await
            .map_err(FailoverError::Abandon)?;
        if write && rig.cfg.fault == RecoveryFault::DropGivenUpWrite {
            self.writes += 1;
            return Ok(true);
        }
        if write && rig.cfg.fault == RecoveryFault::None {
            let landed = rig
                .io
                .read(&rig.paths[1], b, Some(version), std::future::pending())
                .await
                .is_ok();
            if landed {
                self.confirmed += 1;
                self.writes += 1;
                return Ok(true);
            }
        }
        self.reissued += 1;
        Ok(false)
    }

    /// Reads every block back on the surviving path and compares it with the version the
    /// program last wrote; the blocks that hold an older one.
    async fn read_back(&mut self, rig: &Rig<'_>) -> Result<u64, FailoverError> {
        let mut stale_blocks = 0u64;
        for (b, &v) in self.versions.iter().enumerate() {
            match rig
                .io
                .read_back(&rig.paths[self.on], b as u64, v)
                .await
                .map_err(|failure| FailoverError::ReadBack {
                    block: b as u64,
                    failure,
                })? {
                Held::Expected => self.verified += rig.cfg.bs,
                Held::Older => stale_blocks += 1,
            }
        }
        Ok(stale_blocks)
    }

    /// What the run found, with the controller's read and write counts `before` and
    /// `after` the timed I/O.
    fn result(
        self,
        cfg: &FailoverConfig,
        start: SimTime,
        (before, after): ((u64, u64), (u64, u64)),
        stale_blocks: u64,
    ) -> FailoverResult {
        let (device_reads, device_writes) = (after.0 - before.0, after.1 - before.1);
        let us = |t: SimTime| t.since(start).as_ps() as f64 / 1e6;
        let cut_us = us(start + cfg.cut_after);
        let (detected_at, detected_by) = self
            .detected
            .map(|(t, why)| (us(t), why))
            .unwrap_or((f64::NAN, "never (the run ended before the cut)".into()));
        let resumed_at = self.resumed.map_or(f64::NAN, us);
        let timeline = self.timeline;
        let summary = |keep: &dyn Fn(&Completed) -> bool| {
            let ps: Vec<u64> = timeline
                .iter()
                .filter(|c| keep(c))
                .map(|c| (c.latency_ns * 1000.0) as u64)
                .collect();
            LatencySummary::from_ps(&ps)
        };
        let (reads, writes) = (self.reads, self.writes);
        let writes_missing = writes.saturating_sub(device_writes);
        FailoverResult {
            ops: cfg.ops,
            completed: reads + writes,
            lost: writes_missing.max(stale_blocks),
            writes_missing,
            stale_blocks,
            duplicated: device_writes.saturating_sub(writes),
            reads_rerun: device_reads.saturating_sub(reads),
            device_commands: device_reads + device_writes,
            on_primary: timeline.iter().filter(|c| c.path == 0).count() as u64,
            on_backup: timeline.iter().filter(|c| c.path == 1).count() as u64,
            given_up_writes: self.given_up_writes,
            reissued: self.reissued,
            confirmed: self.confirmed,
            verified_bytes: self.verified,
            cut_at_us: cut_us,
            detected_at_us: detected_at,
            detected_by,
            resumed_at_us: resumed_at,
            interruption_us: resumed_at - cut_us,
            before_ns: summary(&|c| c.at_us < cut_us),
            after_ns: summary(&|c| c.at_us > resumed_at),
            timeline,
        }
    }
}

/// The cable of `host`'s NTB adapter `number`.
fn cable_of(machine: &Machine, host: HostId, number: u32) -> Result<LinkId, FailoverError> {
    let f = machine.fabric();
    let name = &f.host(host).name;
    let adapter = f
        .host_adapter(host, number)
        .ok_or_else(|| FailoverError::NoAdapter {
            host: name.clone(),
            number,
        })?;
    f.adapter(adapter)
        .cable
        .ok_or_else(|| FailoverError::NoCable {
            host: name.clone(),
            number,
        })
}

/// What makes the program give up on a command on path `on`: the command's timeout, or —
/// on the primary, when the program watches link events — the adapter reporting its cable
/// down (delivered as an interrupt).
fn give_up(
    machine: &Machine,
    os: &HostOs,
    primary_cable: LinkId,
    on: usize,
    cfg: &FailoverConfig,
) -> impl std::future::Future<Output = String> + 'static {
    let (machine, cpu, timeout) = (machine.clone(), os.cpu(), cfg.timeout);
    let watch = cfg.link_events && on == 0;
    async move {
        let timed_out = {
            let cpu = cpu.clone();
            async move {
                cpu.sleep(timeout).await;
                "timeout".to_string()
            }
        };
        let link_down = async move {
            if !watch {
                return std::future::pending::<String>().await;
            }
            let mut seen = 0;
            loop {
                let e = machine.next_link_event(seen).await;
                seen += 1;
                if e.link == primary_cable && !e.up {
                    // The adapter's link-down interrupt reaches the program.
                    let t = machine.cpu_timing();
                    cpu.spend(
                        "link-down interrupt and the program woken",
                        t.interrupt_delivery.typical + t.wakeup,
                    )
                    .await;
                    return "link event".to_string();
                }
            }
        };
        match race(timed_out, link_down).await {
            Either::Left(why) | Either::Right(why) => why,
        }
    }
}

impl From<DistError> for IoFailure {
    fn from(e: DistError) -> IoFailure {
        match e {
            DistError::Abandoned { qid, what, why } => {
                IoFailure::PathLost(PathLost::GaveUp { qid, what, why })
            }
            // A doorbell or CQ-head write that met the cut itself.
            DistError::Access {
                what,
                source: source @ AccessError::LinkDown { .. },
            } => IoFailure::PathLost(PathLost::Cut { what, source }),
            other => IoFailure::Dist(other),
        }
    }
}

/// What a block held when it was read back after the run.
enum Held {
    /// The version the program last wrote.
    Expected,
    /// An older version: a write to it was lost (or an old one landed last).
    Older,
}

/// Block I/O of one program: patterns in, patterns checked.
struct Io {
    machine: Machine,
    os: HostOs,
    nsid: u32,
    per_io: u32,
    bs: u64,
    seed: u64,
}

impl Io {
    /// Writes block `b` at `version` through `path`; returns 0 (bytes verified).
    async fn write(
        &self,
        path: &Path,
        b: u64,
        version: u32,
        give_up: impl std::future::Future<Output = String>,
    ) -> Result<u64, IoFailure> {
        let buf = self.block(b, version);
        let (data, _) = path.client.data();
        self.os
            .cpu()
            .write(BusAddr(data.get()), &buf)
            .await
            .map_err(IoFailure::FillBuffer)?;
        path.client
            .io_within(
                &path.queue,
                BlockOp::Write,
                self.nsid,
                b * u64::from(self.per_io),
                self.per_io,
                0,
                give_up,
            )
            .await?;
        Ok(0)
    }

    /// Reads block `b` through `path` and checks it holds `version`, if given; returns the
    /// bytes checked.
    async fn read(
        &self,
        path: &Path,
        b: u64,
        version: Option<u32>,
        give_up: impl std::future::Future<Output = String>,
    ) -> Result<u64, IoFailure> {
        let got = self.read_block(path, b, give_up).await?;
        let Some(version) = version else {
            return Ok(0);
        };
        let want = self.block(b, version);
        if let Some(at) = got.iter().zip(&want).position(|(g, w)| g != w) {
            return Err(IoFailure::WrongData {
                block: b,
                at,
                got: got[at],
                version,
                want: want[at],
            });
        }
        Ok(self.bs)
    }

    /// Reads block `b` through `path` after the run and says which version it holds:
    /// `version` (the one last written), or an older one. Content that matches no version
    /// ever written is an error.
    async fn read_back(&self, path: &Path, b: u64, version: u32) -> Result<Held, IoFailure> {
        let got = self.read_block(path, b, std::future::pending()).await?;
        if got == self.block(b, version) {
            return Ok(Held::Expected);
        }
        if (0..version).any(|v| got == self.block(b, v)) {
            return Ok(Held::Older);
        }
        Err(IoFailure::Unrecognized { block: b, version })
    }

    /// Block `b`'s content at `version`.
    fn block(&self, b: u64, version: u32) -> Vec<u8> {
        let mut buf = vec![0u8; self.bs as usize];
        pattern(self.seed, b, version, &mut buf);
        buf
    }

    /// Reads block `b` through `path` into the client's buffer and returns what arrived.
    async fn read_block(
        &self,
        path: &Path,
        b: u64,
        give_up: impl std::future::Future<Output = String>,
    ) -> Result<Vec<u8>, IoFailure> {
        let (data, _) = path.client.data();
        // Stale bytes from an earlier read must not pass for this one.
        self.machine
            .poke_memory(self.os.id(), data, &vec![0u8; self.bs as usize]);
        path.client
            .io_within(
                &path.queue,
                BlockOp::Read,
                self.nsid,
                b * u64::from(self.per_io),
                self.per_io,
                0,
                give_up,
            )
            .await?;
        let mut got = vec![0u8; self.bs as usize];
        self.machine.peek_memory(self.os.id(), data, &mut got);
        Ok(got)
    }
}
