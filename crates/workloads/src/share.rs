//! `share-30`: one NVMe shared at the queue level by many hosts through the distributed
//! driver (Paper V §8.6, the shared-NVMe experiment on the 60-host cascade).
//!
//! ```text
//!   node00: manager ── admin queues ── nvme0 (31 I/O queue pairs)
//!   node01 .. node30: one client each, one queue pair each, one LBA range each
//!
//!   LBA space:  | node01 1 MiB | node02 1 MiB | ... | node30 1 MiB |
//! ```
//!
//! 1. Set-up (untimed): every client connects, gets its own queue pair and writes its own
//!    pattern over its own range, all at once.
//! 2. Measured: every client does `ops` QD1 random reads of `bs` bytes in its own range at
//!    the same time and checks every byte against its pattern.
//! 3. The queue limit: with the clients still holding their pairs, one more client asks for
//!    pairs until the manager has granted every pair the controller gave it; the next
//!    request is refused, and the refusal is reported.
//! 4. Everyone leaves; the manager's owner table is reported (empty when all went well).

use crate::booted::{run_workload, BootError, Booted, Stuck};
use crate::fio::{pattern, pattern_difference};
use crate::progress;
use crate::stats::{LatencyRecorder, LatencySummary};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, ClientQueue, DistError, Manager, SqPlacement};
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_platform::Clock;
use smartio_smartio::{Fdid, SmartIo};
use std::rc::Rc;
use thiserror::Error;

/// Why [`share_clients`] could not run or did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShareError {
    /// No client host given.
    #[error("share: at least one client")]
    NoClients,
    /// `--ops 0`: nothing to measure.
    #[error("--ops 0: at least one read per client")]
    NoOps,
    /// A block size of 0.
    #[error("share: a block size of at least one LBA")]
    ZeroBlockSize,
    /// Each client's range must hold whole blocks, at least one.
    #[error("share: the range per client ({range} bytes) must be a positive multiple of the block size {bs}")]
    RangeNotMultiple {
        /// Bytes per client.
        range: u64,
        /// Block size.
        bs: u64,
    },
    /// The hosts did not boot, or the device or a host is unknown.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The manager did not start.
    #[error("manager on {host}: {source}")]
    Manager {
        /// Its host.
        host: String,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The namespace asked for does not exist.
    #[error("{device} has no namespace {nsid}")]
    NoSuchNamespace {
        /// The controller, `lender:device`.
        device: String,
        /// The namespace asked for.
        nsid: u32,
    },
    /// The block size is not whole LBAs or exceeds the controller's largest transfer.
    #[error("share: the block size {bs} must be a multiple of the LBA size {lba_size} and at most the largest transfer {max_transfer}")]
    BadBlockSize {
        /// Block size asked for.
        bs: u64,
        /// The namespace's LBA size.
        lba_size: u64,
        /// The controller's largest transfer (MDTS), in bytes.
        max_transfer: u64,
    },
    /// The clients' ranges together exceed the namespace.
    #[error("share: {clients} clients of {range} bytes need {total} bytes; namespace {nsid} has {capacity}")]
    RangesTooLarge {
        /// Clients.
        clients: usize,
        /// Bytes per client.
        range: u64,
        /// Bytes needed.
        total: u64,
        /// The namespace.
        nsid: u32,
        /// Its size in bytes.
        capacity: u64,
    },
    /// More clients than queue pairs the manager holds.
    #[error("share: {clients} clients want a queue pair each, but {device} granted only {granted} (give it more with params queues in the scenario, or use fewer hosts)")]
    TooManyClients {
        /// Clients.
        clients: usize,
        /// The controller, `lender:device`.
        device: String,
        /// I/O queue pairs the controller granted.
        granted: u16,
    },
    /// A client's step failed in the driver.
    #[error("{who}: {step}: {source}")]
    Client {
        /// Which client.
        who: ClientName,
        /// What it was doing.
        step: ClientStep,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// A block read back differs from the client's pattern.
    #[error("client {index} on {host}: verify failed at LBA {lba}, byte offset {at}: read {got:#04x}, wrote {want:#04x}")]
    VerifyFailed {
        /// The client's index.
        index: usize,
        /// Its host.
        host: String,
        /// The LBA read.
        lba: u64,
        /// First differing byte.
        at: usize,
        /// What was read there.
        got: u8,
        /// What was written there.
        want: u8,
    },
    /// The manager handed out a queue pair beyond what the controller granted it (a bug
    /// in the distributed driver).
    #[error("the manager granted queue pair {qid} beyond the {granted} the controller gave it")]
    OverGranted {
        /// The pair handed out.
        qid: u16,
        /// Pairs the controller granted.
        granted: u16,
    },
    /// The run ended before the workload finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// Which client the driver refused ([`ShareError::Client`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientName {
    /// One of the run's clients.
    #[error("client {index} on {host}")]
    Numbered {
        /// Its index among the clients.
        index: usize,
        /// Its host.
        host: String,
    },
    /// The client that asks for one queue pair more than the controller granted.
    #[error("extra client on {host}")]
    Extra {
        /// Its host.
        host: String,
    },
}

/// What a client was doing when the driver refused ([`ShareError::Client`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ClientStep {
    /// Joining the manager.
    #[error("connect")]
    Connect,
    /// Creating its queue pair.
    #[error("queue pair")]
    QueuePair,
    /// Creating its `n`-th queue pair counting every client's (the extra client).
    #[error("queue pair {0}")]
    NthQueuePair(usize),
    /// Writing its pattern.
    #[error("write at LBA {0}")]
    Write(u64),
    /// A measured read.
    #[error("read at LBA {0}")]
    Read(u64),
    /// Leaving.
    #[error("leave")]
    Leave,
}

/// Entries of every client queue: one command in flight (QD1) needs two, as an SQ of `n`
/// entries holds `n - 1` commands.
const QD1_ENTRIES: u16 = 2;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareConfig {
    /// Host running the manager.
    pub manager: String,
    /// The controller, `lender:device`.
    pub device: String,
    /// Hosts running a client, one client (and one queue pair) each; client `i` owns the
    /// `i`-th range of `range_bytes` from the start of the namespace.
    pub clients: Vec<String>,
    /// Host of the client that asks for the remaining queue pairs in the queue-limit phase
    /// (`None`: no such phase).
    pub extra_client: Option<String>,
    /// Bytes of the namespace each client writes and then reads (a multiple of `bs`).
    pub range_bytes: u64,
    /// Bytes per read (a multiple of the namespace's LBA size).
    pub bs: u64,
    /// Measured reads per client.
    pub ops: u64,
    /// Seed of the patterns and the random offsets.
    pub seed: u64,
    /// Namespace id.
    pub nsid: u32,
    /// Where the clients' SQs go.
    pub placement: SqPlacement,
}

impl Default for ShareConfig {
    /// `share-30` on `cascade-60`: the manager on node00 (which lends nvme0), clients on
    /// node01..node30 with 1 MiB each, node31 asking for the rest; 1000 reads of 4 KiB each.
    fn default() -> Self {
        ShareConfig {
            manager: "node00".into(),
            device: "node00:nvme0".into(),
            clients: (1..=30).map(|i| format!("node{i:02}")).collect(),
            extra_client: Some("node31".into()),
            range_bytes: 1 << 20,
            bs: 4096,
            ops: 1000,
            seed: 1,
            nsid: 1,
            placement: SqPlacement::Hints,
        }
    }
}

/// One client's measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareClient {
    /// Its host.
    pub host: String,
    /// The queue pair the manager gave it.
    pub qid: u16,
    /// First LBA of its range.
    pub first_lba: u64,
    /// Reads done.
    pub ops: u64,
    /// Bytes read and checked against its pattern.
    pub verified_bytes: u64,
    /// Read latency (submission to the completion it polls) in nanoseconds.
    pub lat_ns: LatencySummary,
    /// Virtual time from its first submission to its last completion, in ns.
    pub elapsed_ns: f64,
    /// Reads per second over its own elapsed time.
    pub iops: f64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareResult {
    /// The controller.
    pub device: String,
    /// Its model (Identify).
    pub model: String,
    /// The manager's host.
    pub manager: String,
    /// I/O queue pairs the controller granted the manager.
    pub granted: u16,
    /// Bytes written in the set-up phase (all clients).
    pub written_bytes: u64,
    /// Every client, in configuration order.
    pub clients: Vec<ShareClient>,
    /// Jain's fairness index over the clients' IOPS: 1 when all are equal, `1/n` when one
    /// gets everything.
    pub fairness: f64,
    /// Smallest per-client median latency, ns.
    pub p50_min_ns: f64,
    /// Largest per-client median latency, ns.
    pub p50_max_ns: f64,
    /// Bytes read and verified (all clients).
    pub verified_bytes: u64,
    /// Queue ids the extra client got in the queue-limit phase.
    pub extra_qids: Vec<u16>,
    /// Queue pairs in use when the manager refused (0 without a queue-limit phase).
    pub held_at_refusal: usize,
    /// The manager's refusal of the request after the last pair was granted (`None`
    /// without a queue-limit phase).
    pub refused: Option<String>,
    /// The manager's owner table after everyone left: `(qid, host)`.
    pub owners_after_leave: Vec<(u16, String)>,
    /// Hosts holding the controller after everyone left (the manager's own).
    pub holders_after_leave: Vec<String>,
}

/// Jain's fairness index `(Σx)² / (n·Σx²)` of `xs` (1 for an empty or all-zero list).
pub fn jain_fairness(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

/// A client after the set-up phase.
struct Member {
    index: usize,
    client: Client,
    queue: Rc<ClientQueue>,
    first_block: u64,
}

/// What the workload needs to know about the namespace and the patterns.
#[derive(Clone, Copy)]
struct Layout {
    nsid: u32,
    lba_size: u64,
    bs: u64,
    /// `bs` blocks per client range.
    blocks: u64,
    /// Bytes per write in the set-up phase (the client's data segment).
    chunk: u64,
    seed: u64,
}

impl Layout {
    /// The pattern seed of client `i` (each client writes its own).
    fn seed_of(&self, i: usize) -> u64 {
        self.seed
            .wrapping_add((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    fn lba_of(&self, block: u64) -> u64 {
        block * self.bs / self.lba_size
    }

    /// Fills `buf` with what client `i` writes over `block` in the set-up: its pattern.
    fn fill(&self, i: usize, block: u64, buf: &mut [u8]) {
        pattern(self.seed_of(i), block, 0, buf);
    }

    /// Where `got`, read back by client `i` from `block`, first differs from what it wrote
    /// there ([`Layout::fill`]): the byte's offset, the byte read and the byte written.
    fn mismatch(&self, i: usize, block: u64, got: &[u8]) -> Option<(usize, u8, u8)> {
        let at = pattern_difference(self.seed_of(i), block, 0, got)?;
        let mut want = vec![0u8; got.len()];
        self.fill(i, block, &mut want);
        Some((at, got[at], want[at]))
    }
}

/// Runs `share-30` (or the variant `config` describes) on `cluster`.
pub fn share_clients(cluster: &Cluster, config: &ShareConfig) -> Result<ShareResult, ShareError> {
    if config.clients.is_empty() {
        return Err(ShareError::NoClients);
    }
    if config.ops == 0 {
        return Err(ShareError::NoOps);
    }
    if config.bs == 0 {
        return Err(ShareError::ZeroBlockSize);
    }
    if config.range_bytes < config.bs || !config.range_bytes.is_multiple_of(config.bs) {
        return Err(ShareError::RangeNotMultiple {
            range: config.range_bytes,
            bs: config.bs,
        });
    }
    let (booted, fdid) = Booted::with_device(cluster, &config.device)?;
    let host = |name: &str| booted.host(name);
    let manager_os = host(&config.manager)?;
    let client_os = config
        .clients
        .iter()
        .map(|c| host(c))
        .collect::<Result<Vec<_>, _>>()?;
    let extra_os = config.extra_client.as_deref().map(host).transpose()?;
    let Booted { smartio, .. } = booted;
    let (machine, cfg) = (cluster.machine.clone(), config.clone());
    run_workload(&cluster.machine, async move {
        run(
            &machine, &smartio, fdid, &cfg, manager_os, client_os, extra_os,
        )
        .await
    })
}

async fn run(
    machine: &Machine,
    smartio: &SmartIo,
    fdid: Fdid,
    cfg: &ShareConfig,
    manager_os: HostOs,
    client_os: Vec<HostOs>,
    extra_os: Option<HostOs>,
) -> Result<ShareResult, ShareError> {
    let manager = Manager::start(smartio, &manager_os, fdid)
        .await
        .map_err(|source| ShareError::Manager {
            host: cfg.manager.clone(),
            source: Box::new(source),
        })?;
    let layout = layout(&manager, cfg)?;
    let n = client_os.len();
    if n > usize::from(manager.granted()) {
        return Err(ShareError::TooManyClients {
            clients: n,
            device: cfg.device.clone(),
            granted: manager.granted(),
        });
    }

    // 1. Connect, create a queue pair, write the range: all clients at once.
    let setups = client_os.into_iter().enumerate().map(|(i, os)| {
        let (smartio, manager, placement) = (smartio.clone(), manager.clone(), cfg.placement);
        async move { set_up(&smartio, &manager, fdid, os, i, placement, layout).await }
    });
    let mut members = Vec::with_capacity(n);
    for m in crate::booted::join_all(machine, setups.collect()).await {
        members.push(m?);
    }
    let written_bytes = n as u64 * layout.blocks * layout.bs;

    // 2. The measured reads: all clients at once.
    let (members, clients) = measured_reads(machine, members, cfg, layout).await?;

    // 3. The queue limit: one more client takes what is left, then asks once more.
    let (extra_qids, held_at_refusal, refused) = match (&extra_os, &cfg.extra_client) {
        (Some(os), Some(name)) => {
            let (qids, held, refused) =
                queue_limit(smartio, os, name, fdid, &manager, layout, n, cfg.placement).await?;
            (qids, held, Some(refused))
        }
        _ => (Vec::new(), 0, None),
    };

    // 4. Everyone leaves.
    leave(members, cfg).await?;
    let owners_after_leave = manager
        .owners()
        .into_iter()
        .map(|(q, h)| (q, machine.fabric().host(h).name.clone()))
        .collect();
    let holders_after_leave = smartio
        .devices()
        .into_iter()
        .filter(|d| d.fdid == fdid)
        .flat_map(|d| d.borrowers)
        .map(|b| b.host)
        .collect();

    let iops: Vec<f64> = clients.iter().map(|c| c.iops).collect();
    let p50 = clients.iter().map(|c| c.lat_ns.p50);
    Ok(ShareResult {
        device: cfg.device.clone(),
        model: manager.model().to_string(),
        manager: cfg.manager.clone(),
        granted: manager.granted(),
        written_bytes,
        fairness: jain_fairness(&iops),
        p50_min_ns: p50.clone().fold(f64::INFINITY, f64::min),
        p50_max_ns: p50.fold(0.0, f64::max),
        verified_bytes: clients.iter().map(|c| c.verified_bytes).sum(),
        clients,
        extra_qids,
        held_at_refusal,
        refused,
        owners_after_leave,
        holders_after_leave,
    })
}

/// The measured reads, all clients at once, each verifying what it read; the members
/// back, with each one's figures.
async fn measured_reads(
    machine: &Machine,
    members: Vec<Member>,
    cfg: &ShareConfig,
    layout: Layout,
) -> Result<(Vec<Member>, Vec<ShareClient>), ShareError> {
    let n = members.len();
    let counter = progress::Counter::new(
        "verified reads",
        (n as u64).saturating_mul(cfg.ops),
        progress::Unit::Items("reads"),
    );
    let reads = members.into_iter().map(|m| {
        let (ops, counter) = (cfg.ops, counter.clone());
        async move { read_and_verify(m, ops, layout, counter).await }
    });
    let mut members = Vec::with_capacity(n);
    let mut clients = Vec::with_capacity(n);
    for r in crate::booted::join_all(machine, reads.collect()).await {
        let (m, c) = r?;
        members.push(m);
        clients.push(c);
    }
    drop(counter);
    Ok((members, clients))
}

/// Each member drops its queue pair and leaves, in order.
async fn leave(members: Vec<Member>, cfg: &ShareConfig) -> Result<(), ShareError> {
    for m in members {
        let host = &cfg.clients[m.index];
        drop(m.queue);
        m.client
            .leave()
            .await
            .map_err(|source| ShareError::Client {
                who: ClientName::Numbered {
                    index: m.index,
                    host: host.to_string(),
                },
                step: ClientStep::Leave,
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// The queue-limit phase: a client on `os` takes every queue pair the `n` clients left, then
/// asks once more; returns the pairs it got, the pairs in use at the refusal, and the
/// manager's refusal. The client leaves afterwards.
#[allow(clippy::too_many_arguments)]
async fn queue_limit(
    smartio: &SmartIo,
    os: &HostOs,
    name: &str,
    fdid: Fdid,
    manager: &Rc<Manager>,
    layout: Layout,
    n: usize,
    placement: SqPlacement,
) -> Result<(Vec<u16>, usize, String), ShareError> {
    let who = || ClientName::Extra {
        host: name.to_string(),
    };
    let extra = Client::connect(smartio, os, fdid, manager, layout.bs)
        .await
        .map_err(|source| ShareError::Client {
            who: who(),
            step: ClientStep::Connect,
            source: Box::new(source),
        })?;
    let mut extra_qids = Vec::new();
    let refused = loop {
        match extra.create_queue(QD1_ENTRIES, placement).await {
            Ok(q) if extra_qids.len() + n < usize::from(manager.granted()) => {
                extra_qids.push(q.qid());
            }
            Ok(q) => {
                return Err(ShareError::OverGranted {
                    qid: q.qid(),
                    granted: manager.granted(),
                })
            }
            Err(e @ DistError::NoQueues { .. }) => break e.to_string(),
            Err(source) => {
                return Err(ShareError::Client {
                    who: who(),
                    step: ClientStep::NthQueuePair(n + extra_qids.len() + 1),
                    source: Box::new(source),
                })
            }
        }
    };
    let held_at_refusal = manager.owners().len();
    extra.leave().await.map_err(|source| ShareError::Client {
        who: who(),
        step: ClientStep::Leave,
        source: Box::new(source),
    })?;
    Ok((extra_qids, held_at_refusal, refused))
}

/// Checks `cfg` against the namespace and the controller's largest transfer.
fn layout(manager: &Manager, cfg: &ShareConfig) -> Result<Layout, ShareError> {
    let ns = manager
        .namespaces()
        .iter()
        .find(|n| n.nsid == cfg.nsid)
        .copied()
        .ok_or_else(|| ShareError::NoSuchNamespace {
            device: cfg.device.clone(),
            nsid: cfg.nsid,
        })?;
    let lba_size = u64::from(ns.lba_size);
    if !cfg.bs.is_multiple_of(lba_size) || cfg.bs > manager.max_transfer() {
        return Err(ShareError::BadBlockSize {
            bs: cfg.bs,
            lba_size,
            max_transfer: manager.max_transfer(),
        });
    }
    let total = cfg.range_bytes * cfg.clients.len() as u64;
    if total > ns.blocks * lba_size {
        return Err(ShareError::RangesTooLarge {
            clients: cfg.clients.len(),
            range: cfg.range_bytes,
            total,
            nsid: cfg.nsid,
            capacity: ns.blocks * lba_size,
        });
    }
    // Whole blocks per write, as many as one transfer carries.
    let per_write = (manager.max_transfer() / cfg.bs).max(1) * cfg.bs;
    Ok(Layout {
        nsid: cfg.nsid,
        lba_size,
        bs: cfg.bs,
        blocks: cfg.range_bytes / cfg.bs,
        chunk: per_write.min(cfg.range_bytes),
        seed: cfg.seed,
    })
}

/// Client `i` on `os`: connects, gets a queue pair, writes its pattern over its range.
async fn set_up(
    smartio: &SmartIo,
    manager: &Rc<Manager>,
    fdid: Fdid,
    os: HostOs,
    i: usize,
    placement: SqPlacement,
    l: Layout,
) -> Result<Member, ShareError> {
    let refused = |step: ClientStep| {
        let who = ClientName::Numbered {
            index: i,
            host: os.name().to_string(),
        };
        move |source| ShareError::Client {
            who,
            step,
            source: Box::new(source),
        }
    };
    let client = Client::connect(smartio, &os, fdid, manager, l.chunk)
        .await
        .map_err(refused(ClientStep::Connect))?;
    let queue = client
        .create_queue(QD1_ENTRIES, placement)
        .await
        .map_err(refused(ClientStep::QueuePair))?;
    let first_block = i as u64 * l.blocks;
    let (buffer, _) = client.data();
    let per = l.chunk / l.bs;
    let mut data = vec![0u8; l.chunk as usize];
    let mut done = 0;
    while done < l.blocks {
        let count = per.min(l.blocks - done);
        for b in 0..count {
            let at = (b * l.bs) as usize;
            let block = first_block + done + b;
            l.fill(i, block, &mut data[at..at + l.bs as usize]);
        }
        let len = count * l.bs;
        os.machine()
            .poke_memory(os.id(), buffer, &data[..len as usize]);
        let lba = l.lba_of(first_block + done);
        client
            .io(
                &queue,
                BlockOp::Write,
                l.nsid,
                lba,
                (len / l.lba_size) as u32,
                0,
            )
            .await
            .map_err(refused(ClientStep::Write(lba)))?;
        done += count;
    }
    Ok(Member {
        index: i,
        client,
        queue,
        first_block,
    })
}

/// The measured phase of one client: `ops` QD1 random reads in its range, each checked.
async fn read_and_verify(
    m: Member,
    ops: u64,
    l: Layout,
    progress: progress::Counter,
) -> Result<(Member, ShareClient), ShareError> {
    let os = m.client.os().clone();
    let cpu = os.cpu();
    let (buffer, _) = m.client.data();
    let mut rng = ChaCha8Rng::seed_from_u64(l.seed_of(m.index) ^ 0x5ead);
    let mut samples = LatencyRecorder::new();
    let start = cpu.now();
    let mut last = start;
    for _ in 0..ops {
        let block = m.first_block + rng.random_range(0..l.blocks);
        let lba = l.lba_of(block);
        let t0 = cpu.now();
        m.client
            .io(
                &m.queue,
                BlockOp::Read,
                l.nsid,
                lba,
                (l.bs / l.lba_size) as u32,
                0,
            )
            .await
            .map_err(|source| ShareError::Client {
                who: ClientName::Numbered {
                    index: m.index,
                    host: os.name().to_string(),
                },
                step: ClientStep::Read(lba),
                source: Box::new(source),
            })?;
        last = cpu.now();
        samples.record(last.since(t0).as_ps());
        progress.add(1);
        let mut mismatch = None;
        let bs = l.bs as usize;
        os.machine()
            .inspect_memory(os.id(), buffer, bs, &mut |got| {
                mismatch = l.mismatch(m.index, block, got);
            });
        if let Some((at, got, want)) = mismatch {
            return Err(ShareError::VerifyFailed {
                index: m.index,
                host: os.name().to_string(),
                lba,
                at,
                got,
                want,
            });
        }
    }
    let elapsed_ns = last.since(start).as_ps() as f64 / 1000.0;
    let client = ShareClient {
        host: os.name().to_string(),
        qid: m.queue.qid(),
        first_lba: l.lba_of(m.first_block),
        ops,
        verified_bytes: ops.saturating_mul(l.bs),
        lat_ns: LatencySummary::of(&samples),
        elapsed_ns,
        iops: if elapsed_ns > 0.0 {
            ops as f64 / (elapsed_ns / 1e9)
        } else {
            0.0
        },
    };
    Ok((m, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_reads_back_what_it_wrote_and_nothing_else_passes() {
        let l = Layout {
            nsid: 1,
            lba_size: 512,
            bs: 4096,
            blocks: 256,
            chunk: 1 << 20,
            seed: 42,
        };
        let mut block = vec![0u8; 4096];
        l.fill(3, 17, &mut block);
        assert_eq!(l.mismatch(3, 17, &block), None);
        // Another client's data, or another block's, is caught at the first byte.
        assert!(l.mismatch(4, 17, &block).is_some_and(|(at, _, _)| at == 0));
        assert!(l.mismatch(3, 18, &block).is_some_and(|(at, _, _)| at == 0));
        // A torn byte is reported with what was read and what was written.
        let written = block[1000];
        block[1000] ^= 0x5a;
        assert_eq!(
            l.mismatch(3, 17, &block),
            Some((1000, written ^ 0x5a, written))
        );
    }

    #[test]
    fn jain_index_is_one_for_equal_shares_and_one_over_n_for_a_monopoly() {
        assert_eq!(jain_fairness(&[5.0, 5.0, 5.0, 5.0]), 1.0);
        assert_eq!(jain_fairness(&[8.0, 0.0, 0.0, 0.0]), 0.25);
        assert_eq!(jain_fairness(&[]), 1.0);
    }
}
