//! `nvmeof-compare`: QD1 random reads of one NVMe three ways (Paper V §7.4.3, Figs. 36–38;
//! seed 003 §VI) — the distributed driver with its client next to the controller, the same
//! driver with its client across the NTB, and NVMe-oF over RDMA with the initiator on the
//! far host.
//!
//! ```text
//!   local SmartIO    client (lender) ───────────────────────────── nvme0 (lender)
//!   remote SmartIO   client (borrower) ══ NTB ══ PEX8733 ── PEX8796 ── nvme0
//!   NVMe-oF / RDMA   initiator (borrower) ══ HCA ══ HCA ── target software (lender) ── nvme0
//! ```
//!
//! An NVMe-oF read (Paper V Fig. 36), each step with its own cost:
//!
//! 1. The initiator builds the 64-byte command capsule and posts a send (software).
//! 2. The HCAs carry the capsule into the target's receive buffer (one-way HCA latency plus
//!    serialization at the link rate; the bytes really land in target RAM).
//! 3. The target's poller finds the receive completion and loads the capsule (software, plus
//!    a real CPU load of the capsule from target RAM).
//! 4. The target hands the command to its NVMe driver (software).
//! 5. The NVMe read itself, on the target's own distributed-driver queue pair: SQE store,
//!    doorbell, the controller's fetch, media time, DMA of the data into *target* memory, the
//!    CQE and the target's poll of it — all the emulated device and fabric, no number. (In
//!    Fig. 36 the target HCA writes the capsule straight into the bound NVMe SQ; here it
//!    lands in a receive buffer and the target's driver stores the SQE itself, a 64-byte
//!    store to local RAM that costs a few nanoseconds.)
//! 6. The target sees the NVMe completion and posts an RDMA write and the response (software).
//! 7. The RDMA write: the target HCA reads the data from target memory (the bytes the NVMe
//!    wrote), serializes them at the link rate, the initiator HCA writes them into initiator
//!    RAM.
//! 8. The 16-byte response capsule follows the data on the same queue pair (ordered, so it
//!    trails the data by its own serialization only).
//! 9. The initiator loads the response from its RAM and completes the read (software).
//!
//! The HCAs are not devices of the emulated PCIe fabric: their PCIe work is inside the
//! calibrated one-way latency (`[nvmeof]` in the calibration). Every byte still moves: the
//! namespace is written with a known pattern first (untimed), and every read's bytes are
//! checked where the reader ends up with them — the client's data segment for the SmartIO
//! rows, the initiator's buffer for NVMe-oF.

use crate::booted::{run_workload, BootError, Booted, Stuck};
use crate::fio::pattern;
use crate::stats::{LatencyRecorder, LatencySummary};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use smartio_calibration::NvmeofParams;
use smartio_cluster::Cluster;
use smartio_devices::nvme::spec::{io, Command, Completion, Status, CQE_SIZE, SQE_SIZE};
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, ClientQueue, DistError, Manager, SqPlacement};
use smartio_fabric::HostId;
use smartio_host::{HostOs, RamError};
use smartio_machine::{Agent, Machine};
use smartio_platform::{AccessError, BusAddr, Clock, PhysAddr, Port, SimDuration, SimTime};
use smartio_smartio::SegmentLocation;
use thiserror::Error;

/// Why [`nvmeof_compare`] could not run or did not finish.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NvmeofError {
    /// An `[nvmeof]` calibration value the RDMA model cannot use.
    #[error("calibration [nvmeof] {key} = {value}: must be {must}")]
    Calibration {
        /// The key.
        key: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        must: &'static str,
    },
    /// The device is not written `lender:device`.
    #[error("device {device:?}: write it as lender:device")]
    NotQualified {
        /// As given.
        device: String,
    },
    /// The target is not the host with the controller.
    #[error("the NVMe-oF target must be the host with the controller: {device} is in {lender}, the target is {target}")]
    TargetNotLender {
        /// The controller, `lender:device`.
        device: String,
        /// Its host.
        lender: String,
        /// The target asked for.
        target: String,
    },
    /// Initiator and target are one host.
    #[error("the initiator and the target must be different hosts (both are {host})")]
    SameHost {
        /// The host.
        host: String,
    },
    /// `--ops 0`: nothing to measure.
    #[error("--ops 0: at least one read per row")]
    NoOps,
    /// A block size of 0.
    #[error("nvmeof-compare: a block size of at least one LBA")]
    ZeroBlockSize,
    /// The hosts did not boot, or the device or a host is unknown.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The distributed driver's manager did not start.
    #[error("start the manager on {host}: {source}")]
    Manager {
        /// The target host.
        host: String,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// A client (local, remote, or the NVMe-oF target's) could not connect.
    #[error("connect the {who} on {host}: {source}")]
    Connect {
        /// `local client`, `remote client`, `NVMe-oF target`.
        who: &'static str,
        /// Its host.
        host: String,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// A client got no queue pair.
    #[error("queue pair for the {who}: {source}")]
    QueuePair {
        /// As in [`NvmeofError::Connect`].
        who: &'static str,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The controller reports no namespace.
    #[error("the controller has no namespace")]
    NoNamespace,
    /// The block size is not whole LBAs.
    #[error("bs {bs} is not a multiple of the namespace's {lba_size}-byte blocks")]
    BsNotMultiple {
        /// Block size asked for.
        bs: u64,
        /// The namespace's LBA size.
        lba_size: u64,
    },
    /// The block size needs more LBAs than one command can carry.
    #[error("bs {0} is too large for one command")]
    BsTooLarge(u64),
    /// Writing the pattern (set-up) failed.
    #[error("write the pattern to LBA {lba}: {source}")]
    WritePattern {
        /// The LBA.
        lba: u64,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// A SmartIO client's read failed.
    #[error("{read} of LBA {lba}: {source}")]
    SmartIoRead {
        /// Which read: `local SmartIO read 3`.
        read: String,
        /// Its LBA.
        lba: u64,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The bytes a read delivered differ from the namespace's.
    #[error("{read} of LBA {lba}: byte {at} is {got:#04x}, the namespace holds {want:#04x}")]
    WrongData {
        /// Which read: `remote SmartIO read 3`, `NVMe-oF read 7`.
        read: String,
        /// Its LBA.
        lba: u64,
        /// First differing byte.
        at: usize,
        /// What arrived there.
        got: u8,
        /// What the namespace holds there.
        want: u8,
    },
    /// An NVMe-oF buffer could not be allocated.
    #[error("NVMe-oF {what} in {host} RAM: {source}")]
    Alloc {
        /// Which buffer.
        what: &'static str,
        /// Its host.
        host: String,
        /// The allocator's refusal.
        source: RamError,
    },
    /// A CPU load of the NVMe-oF read failed.
    #[error("{read}: the {what}: {source}")]
    Load {
        /// Which read: `NVMe-oF read 7`.
        read: String,
        /// `target loading the capsule`, `initiator loading the response`.
        what: &'static str,
        /// What the fabric answered.
        source: AccessError,
    },
    /// The target received another command than the initiator sent (an emulator bug).
    #[error("{read}: the target received opcode {opcode:#04x}, flags {flags:#04x}, cid {cid} (sent a read, cid {sent})")]
    WrongCapsule {
        /// Which read.
        read: String,
        /// Opcode received.
        opcode: u8,
        /// Flags received.
        flags: u8,
        /// Command id received.
        cid: u16,
        /// Command id sent.
        sent: u16,
    },
    /// The target's NVMe read failed.
    #[error("{read}: the target's NVMe read of LBA {lba}: {source}")]
    TargetRead {
        /// Which read.
        read: String,
        /// Its LBA.
        lba: u64,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The response capsule is not the success for this command.
    #[error(
        "{read}: response for cid {cid} with status {status} (expected cid {expected}, success)"
    )]
    WrongResponse {
        /// Which read.
        read: String,
        /// Command id in the response.
        cid: u16,
        /// Its status.
        status: Status,
        /// The command id sent.
        expected: u16,
    },
    /// A client did not leave cleanly.
    #[error("the {who} client leaving: {source}")]
    Leave {
        /// `local`, `remote`, `target`.
        who: &'static str,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The run ended before the workload finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
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

/// How many steps an NVMe-oF read is split into.
const STEP_COUNT: usize = 9;

/// The steps of an NVMe-oF read, in order (Paper V Fig. 36).
const STEPS: [&str; STEP_COUNT] = [
    "initiator builds the command capsule and posts the send",
    "command capsule: initiator HCA, wire, target HCA writes target memory",
    "target polls the receive completion and loads the capsule",
    "target hands the command to its NVMe driver",
    "NVMe read into target memory (emulated controller, target polls the CQE)",
    "target posts the RDMA write and the response",
    "RDMA write: target HCA reads target memory, wire, initiator HCA writes initiator memory",
    "response capsule behind the data on the same queue pair",
    "initiator polls the response capsule and completes the read",
];

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct NvmeofConfig {
    /// The controller, `lender:device`.
    pub device: String,
    /// The host that has the controller: it runs the distributed driver's manager, the local
    /// client and the NVMe-oF target.
    pub target: String,
    /// The far host: it runs the remote client and the NVMe-oF initiator.
    pub initiator: String,
    /// Reads per row.
    pub ops: u64,
    /// Bytes per read (a multiple of the namespace's LBA size).
    pub bs: u64,
    /// Seed of the random offsets and of the data pattern.
    pub seed: u64,
}

impl Default for NvmeofConfig {
    /// `lender:nvme0` on `back-to-back`: target `lender`, initiator `borrower`, 1000 reads
    /// of 4 KiB.
    fn default() -> Self {
        NvmeofConfig {
            device: "lender:nvme0".into(),
            target: "lender".into(),
            initiator: "borrower".into(),
            ops: 1000,
            bs: 4096,
            seed: 1,
        }
    }
}

/// One step of the NVMe-oF read and its median time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmeofStep {
    /// What happens.
    pub step: String,
    /// Median over the reads, in nanoseconds.
    pub median_ns: f64,
}

/// What `nvmeof-compare` measured: one latency row per access method, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmeofCompare {
    /// Reads per row.
    pub ops: u64,
    /// Bytes per read.
    pub bs: u64,
    /// The distributed driver with manager and client on the target host.
    pub local: LatencySummary,
    /// The distributed driver with the manager on the target and the client on the
    /// initiator host.
    pub remote: LatencySummary,
    /// Where the remote client's SQ ended up.
    pub remote_sq_in: String,
    /// NVMe-oF over RDMA, initiator on the initiator host, target on the target host.
    pub nvmeof: LatencySummary,
    /// The NVMe-oF read step by step (medians; their sum is close to, not exactly, the
    /// median of the whole).
    pub nvmeof_steps: Vec<NvmeofStep>,
}

/// Runs `config` on `cluster`: boots every host, starts SmartIO and the distributed driver's
/// manager on the target, writes the pattern to the blocks the reads will touch (untimed),
/// then measures the three rows one after the other with the same offsets.
pub fn nvmeof_compare(
    cluster: &Cluster,
    config: &NvmeofConfig,
) -> Result<NvmeofCompare, NvmeofError> {
    let costs = RdmaCosts::from_calibration(&cluster.calibration.nvmeof)?;
    let lender = config
        .device
        .split_once(':')
        .map(|(host, _)| host)
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
        let run = async {
            let manager = Manager::start(&smartio, &tos, fdid)
                .await
                .map_err(|source| NvmeofError::Manager {
                    host: cfg.target.clone(),
                    source: Box::new(source),
                })?;
            let bs = cfg.bs;
            let connect =
                |os: HostOs, who: &'static str| {
                    let (smartio, manager) = (smartio.clone(), manager.clone());
                    async move {
                        let client = Client::connect(&smartio, &os, fdid, &manager, bs)
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
                        let q = client.create_queue(QD1_ENTRIES, placement).await.map_err(
                            |source| NvmeofError::QueuePair {
                                who,
                                source: Box::new(source),
                            },
                        )?;
                        Ok::<_, NvmeofError>((client, q))
                    }
                };
            let (local, lq) = connect(tos.clone(), "local client").await?;
            let (remote, rq) = connect(ios.clone(), "remote client").await?;
            let (target, tq) = connect(tos.clone(), "NVMe-oF target").await?;
            let remote_sq_in = match rq.sq_location() {
                SegmentLocation::Ram { host, .. } => format!(
                    "{} RAM",
                    names
                        .get(host.index())
                        .map_or("an unknown host's", String::as_str)
                ),
                SegmentLocation::Device { .. } => "controller memory".to_string(),
                SegmentLocation::LocalDevice { .. } => "a host's device memory".to_string(),
            };
            let ns = *manager
                .namespaces()
                .first()
                .ok_or(NvmeofError::NoNamespace)?;
            let lba_size = u64::from(ns.lba_size);
            if !cfg.bs.is_multiple_of(lba_size) {
                return Err(NvmeofError::BsNotMultiple {
                    bs: cfg.bs,
                    lba_size,
                });
            }
            let blocks =
                u32::try_from(cfg.bs / lba_size).map_err(|_| NvmeofError::BsTooLarge(cfg.bs))?;
            let lbas = Offsets {
                seed: cfg.seed,
                span: (ns.blocks / u64::from(blocks)).clamp(1, MAX_SPAN),
                blocks,
                ops: cfg.ops,
            };
            let reads = Reads {
                machine: &machine,
                nsid: ns.nsid,
                blocks,
                bs: cfg.bs,
                seed: cfg.seed,
            };
            reads.write_pattern(&local, &lq, lbas).await?;
            let local_ps = reads.smartio(&local, &lq, lbas, "local").await?;
            let remote_ps = reads.smartio(&remote, &rq, lbas, "remote").await?;
            let rdma = Rdma::new(&machine, costs, &ios, &tos, &target, &tq, cfg.bs)?;
            let laps = rdma.reads(&reads, lbas).await;
            rdma.free(&ios, &tos);
            let laps = laps?;
            for (client, who) in [(local, "local"), (remote, "remote"), (target, "target")] {
                client.leave().await.map_err(|source| NvmeofError::Leave {
                    who,
                    source: Box::new(source),
                })?;
            }
            let nvmeof_steps = STEPS
                .iter()
                .zip(&laps.steps)
                .map(|(step, r)| {
                    let (a, b) = r.middle();
                    NvmeofStep {
                        step: (*step).to_string(),
                        median_ns: (a as f64 / 1000.0 + b as f64 / 1000.0) / 2.0,
                    }
                })
                .collect();
            Ok(NvmeofCompare {
                ops: cfg.ops,
                bs: cfg.bs,
                local: LatencySummary::of(&local_ps),
                remote: LatencySummary::of(&remote_ps),
                remote_sq_in,
                nvmeof: LatencySummary::of(&laps.total),
                nvmeof_steps,
            })
        };
        run.await
    })
}

/// Random offsets are drawn from at most this many `bs`-sized blocks at the start of the
/// namespace (64 MiB of 4 KiB blocks). The set-up writes every block a read will touch, and
/// the emulated namespace keeps what is written in memory, so this bounds the run's memory
/// whatever `--ops` is (a span of 4 GiB took 3.4 GB at 100 000 reads). Where a block is does
/// not change the time a read takes in the model.
const MAX_SPAN: u64 = 1 << 14;

/// The LBAs every row reads, in order: drawn again from the seed for each row, so nothing is
/// kept per read.
#[derive(Debug, Clone, Copy)]
struct Offsets {
    seed: u64,
    /// Blocks of `blocks` LBAs to draw from (at most [`MAX_SPAN`]).
    span: u64,
    blocks: u32,
    ops: u64,
}

impl Offsets {
    /// The LBAs, in read order.
    fn iter(self) -> impl Iterator<Item = u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        (0..self.ops).map(move |_| rng.random_range(0..self.span) * u64::from(self.blocks))
    }

    /// The distinct LBAs, ascending (a bit per block of the span).
    fn distinct(self) -> impl Iterator<Item = u64> {
        let mut seen = vec![0u64; self.span.div_ceil(64) as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        for _ in 0..self.ops {
            let block = rng.random_range(0..self.span);
            if let Some(word) = seen.get_mut((block / 64) as usize) {
                *word |= 1 << (block % 64);
            }
        }
        let blocks = u64::from(self.blocks);
        (0..self.span)
            .filter(move |b| {
                seen.get((b / 64) as usize)
                    .is_some_and(|w| w >> (b % 64) & 1 == 1)
            })
            .map(move |b| b * blocks)
    }
}

/// The reads every row does, and the pattern they are checked against.
struct Reads<'a> {
    machine: &'a Machine,
    nsid: u32,
    blocks: u32,
    bs: u64,
    seed: u64,
}

impl Reads<'_> {
    /// The bytes the namespace holds at `lba` once the pattern is written.
    fn expected(&self, lba: u64) -> Vec<u8> {
        let mut buf = vec![0u8; self.bs as usize];
        pattern(self.seed, lba, 0, &mut buf);
        buf
    }

    /// Zeroes the `bs` bytes at `addr` of `host`'s RAM (untimed), so a read that moves
    /// nothing cannot pass its check on stale bytes.
    fn clear(&self, host: HostId, addr: PhysAddr) {
        self.machine
            .poke_memory(host, addr, &vec![0u8; self.bs as usize]);
    }

    /// Checks the `bs` bytes at `addr` of `host`'s RAM against the pattern of `lba`.
    fn check(&self, host: HostId, addr: PhysAddr, lba: u64, read: &str) -> Result<(), NvmeofError> {
        let mut got = vec![0u8; self.bs as usize];
        self.machine.peek_memory(host, addr, &mut got);
        let want = self.expected(lba);
        match got.iter().zip(&want).position(|(g, w)| g != w) {
            None => Ok(()),
            Some(at) => Err(NvmeofError::WrongData {
                read: read.to_string(),
                lba,
                at,
                got: got[at],
                want: want[at],
            }),
        }
    }

    /// Writes the pattern to every block in `lbas` through `client` (set-up, untimed).
    async fn write_pattern(
        &self,
        client: &Client,
        q: &ClientQueue,
        lbas: Offsets,
    ) -> Result<(), NvmeofError> {
        let (data, _) = client.data();
        for lba in lbas.distinct() {
            self.machine
                .poke_memory(client.os().id(), data, &self.expected(lba));
            client
                .io(q, BlockOp::Write, self.nsid, lba, self.blocks, 0)
                .await
                .map_err(|source| NvmeofError::WritePattern {
                    lba,
                    source: Box::new(source),
                })?;
        }
        Ok(())
    }

    /// QD1 reads of `lbas` through a distributed-driver client, each timed from submission to
    /// the polled completion and checked in the client's data segment. Picoseconds per read.
    async fn smartio(
        &self,
        client: &Client,
        q: &ClientQueue,
        lbas: Offsets,
        row: &str,
    ) -> Result<LatencyRecorder, NvmeofError> {
        let cpu = client.os().cpu();
        let (data, _) = client.data();
        let mut samples = LatencyRecorder::new();
        let mut phase = crate::progress::begin(
            &format!("{row} SmartIO reads"),
            lbas.ops,
            crate::progress::Unit::Items("reads"),
        );
        for (i, lba) in lbas.iter().enumerate() {
            phase.set(i as u64 + 1);
            self.clear(client.os().id(), data);
            let t0 = cpu.now();
            client
                .io(q, BlockOp::Read, self.nsid, lba, self.blocks, 0)
                .await
                .map_err(|source| NvmeofError::SmartIoRead {
                    read: format!("{row} SmartIO read {i}"),
                    lba,
                    source: Box::new(source),
                })?;
            samples.record(cpu.now().since(t0).as_ps());
            self.check(
                client.os().id(),
                data,
                lba,
                &format!("{row} SmartIO read {i}"),
            )?;
        }
        Ok(samples)
    }
}

/// The NVMe-oF network, HCA and software costs, from the calibration's `[nvmeof]`.
#[derive(Debug, Clone, Copy)]
struct RdmaCosts {
    hca_latency: SimDuration,
    ns_per_byte: f64,
    initiator_post: SimDuration,
    target_poll: SimDuration,
    target_submit: SimDuration,
    target_complete: SimDuration,
    initiator_complete: SimDuration,
}

impl RdmaCosts {
    fn from_calibration(p: &NvmeofParams) -> Result<RdmaCosts, NvmeofError> {
        let ns = |key: &'static str, value: f64| {
            if value.is_finite() && value >= 0.0 {
                Ok(SimDuration::from_ns_f64(value))
            } else {
                Err(NvmeofError::Calibration {
                    key,
                    value,
                    must: "a time of 0 ns or more",
                })
            }
        };
        let gbps = p.link_gbps.value;
        if !(gbps.is_finite() && gbps > 0.0) {
            return Err(NvmeofError::Calibration {
                key: "link_gbps",
                value: gbps,
                must: "a positive rate",
            });
        }
        Ok(RdmaCosts {
            hca_latency: ns("hca_latency_ns", p.hca_latency_ns.value)?,
            ns_per_byte: 8.0 / gbps,
            initiator_post: ns("initiator_post_ns", p.initiator_post_ns.value)?,
            target_poll: ns("target_poll_ns", p.target_poll_ns.value)?,
            target_submit: ns("target_submit_ns", p.target_submit_ns.value)?,
            target_complete: ns("target_complete_ns", p.target_complete_ns.value)?,
            initiator_complete: ns("initiator_complete_ns", p.initiator_complete_ns.value)?,
        })
    }

    /// Time `bytes` of payload take on the wire.
    fn wire(&self, bytes: u64) -> SimDuration {
        SimDuration::from_ns_f64(bytes as f64 * self.ns_per_byte)
    }
}

/// The NVMe-oF initiator and target: their buffers and the target's NVMe queue pair.
struct Rdma<'a> {
    machine: &'a Machine,
    costs: RdmaCosts,
    /// Initiator CPU and host.
    icpu: Agent,
    ihost: HostId,
    /// Initiator memory region the data is written to, and its response receive buffer.
    idata: PhysAddr,
    iresponse: PhysAddr,
    /// Target CPU and host.
    tcpu: Agent,
    thost: HostId,
    /// Target receive buffer the command capsule lands in.
    tcapsule: PhysAddr,
    target: &'a Client,
    tq: &'a ClientQueue,
}

impl<'a> Rdma<'a> {
    /// Registers (allocates) the initiator's data region and response buffer and the target's
    /// capsule receive buffer.
    fn new(
        machine: &'a Machine,
        costs: RdmaCosts,
        ios: &HostOs,
        tos: &HostOs,
        target: &'a Client,
        tq: &'a ClientQueue,
        bs: u64,
    ) -> Result<Rdma<'a>, NvmeofError> {
        let alloc = |os: &HostOs, len: u64, what: &'static str| {
            os.alloc(len).map_err(|source| NvmeofError::Alloc {
                what,
                host: os.name().to_string(),
                source,
            })
        };
        let idata = alloc(ios, bs, "initiator data region")?;
        let iresponse = alloc(ios, CQE_SIZE as u64, "initiator response buffer")?;
        let tcapsule = alloc(tos, SQE_SIZE as u64, "target receive buffer")?;
        Ok(Rdma {
            machine,
            costs,
            icpu: ios.cpu(),
            ihost: ios.id(),
            idata,
            iresponse,
            tcpu: tos.cpu(),
            thost: tos.id(),
            tcapsule,
            target,
            tq,
        })
    }

    /// Gives the buffers back.
    fn free(&self, ios: &HostOs, tos: &HostOs) {
        ios.free(self.idata);
        ios.free(self.iresponse);
        tos.free(self.tcapsule);
    }

    /// QD1 NVMe-oF reads of `lbas`, each checked in initiator memory; the times of every
    /// step and of the whole, in picoseconds.
    async fn reads(&self, reads: &Reads<'_>, lbas: Offsets) -> Result<StepTimes, NvmeofError> {
        let mut times = StepTimes {
            steps: std::array::from_fn(|_| LatencyRecorder::new()),
            total: LatencyRecorder::new(),
        };
        let mut phase = crate::progress::begin(
            "NVMe-oF reads",
            lbas.ops,
            crate::progress::Unit::Items("reads"),
        );
        for (i, lba) in lbas.iter().enumerate() {
            phase.set(i as u64 + 1);
            let what = format!("NVMe-oF read {i}");
            reads.clear(self.ihost, self.idata);
            // Command ids wrap: one read is in flight at a time.
            let laps = self.read(reads, i as u16, lba, &what).await?;
            reads.check(self.ihost, self.idata, lba, &what)?;
            for (r, &ps) in times.steps.iter_mut().zip(&laps) {
                r.record(ps);
            }
            times.total.record(laps.iter().sum());
        }
        Ok(times)
    }

    /// One NVMe-oF read of `reads.blocks` blocks at `lba` with command id `cid`.
    async fn read(
        &self,
        reads: &Reads<'_>,
        cid: u16,
        lba: u64,
        what: &str,
    ) -> Result<[u64; STEP_COUNT], NvmeofError> {
        let c = &self.costs;
        let mut laps = Laps::new(self.machine.now());

        // 1. The initiator builds the capsule. Its data pointer is a keyed SGL data block in
        //    NVMe-oF (same bytes as PRP1 / PRP2): the initiator's region and its length.
        let capsule = Command {
            opcode: io::READ,
            cid,
            nsid: reads.nsid,
            prp1: self.idata.get(),
            prp2: reads.bs,
            cdw: [lba as u32, (lba >> 32) as u32, reads.blocks - 1, 0, 0, 0],
        };
        self.icpu.sleep(c.initiator_post).await;
        laps.mark(self.machine.now());

        // 2. The HCAs carry it into the target's receive buffer.
        self.icpu
            .sleep(c.hca_latency + c.wire(SQE_SIZE as u64))
            .await;
        self.machine
            .poke_memory(self.thost, self.tcapsule, &capsule.to_bytes());
        laps.mark(self.machine.now());

        // 3. The target's poller finds it and loads it.
        self.tcpu.sleep(c.target_poll).await;
        let mut raw = [0u8; SQE_SIZE];
        self.tcpu
            .read(BusAddr(self.tcapsule.get()), &mut raw)
            .await
            .map_err(|source| NvmeofError::Load {
                read: what.to_string(),
                what: "target loading the capsule",
                source,
            })?;
        let (cmd, flags) = Command::from_bytes(&raw);
        let (slba, nlb) = (
            u64::from(cmd.cdw(10)) | u64::from(cmd.cdw(11)) << 32,
            cmd.cdw(12) + 1,
        );
        if cmd.opcode != io::READ || flags != 0 || cmd.cid != cid {
            return Err(NvmeofError::WrongCapsule {
                read: what.to_string(),
                opcode: cmd.opcode,
                flags,
                cid: cmd.cid,
                sent: cid,
            });
        }
        laps.mark(self.machine.now());

        // 4. Into the target's NVMe driver.
        self.tcpu.sleep(c.target_submit).await;
        laps.mark(self.machine.now());

        // 5. The NVMe read into target memory, on the target's own queue pair.
        self.target
            .io(self.tq, BlockOp::Read, cmd.nsid, slba, nlb, 0)
            .await
            .map_err(|source| NvmeofError::TargetRead {
                read: what.to_string(),
                lba: slba,
                source: Box::new(source),
            })?;
        laps.mark(self.machine.now());

        // 6. The target posts the RDMA write and the response.
        self.tcpu.sleep(c.target_complete).await;
        laps.mark(self.machine.now());

        // 7. The RDMA write: the target HCA reads what the NVMe wrote, the initiator HCA
        //    writes it where the capsule said.
        let (tdata, _) = self.target.data();
        let mut data = vec![0u8; cmd.prp2 as usize];
        self.machine.peek_memory(self.thost, tdata, &mut data);
        self.tcpu.sleep(c.hca_latency + c.wire(cmd.prp2)).await;
        self.machine
            .poke_memory(self.ihost, PhysAddr(cmd.prp1), &data);
        laps.mark(self.machine.now());

        // 8. The response capsule, ordered behind the data.
        let response = Completion {
            result: 0,
            sq_head: 0,
            sq_id: self.tq.qid(),
            cid: cmd.cid,
            phase: true,
            status: Status::SUCCESS,
        };
        self.tcpu.sleep(c.wire(CQE_SIZE as u64)).await;
        self.machine
            .poke_memory(self.ihost, self.iresponse, &response.to_bytes());
        laps.mark(self.machine.now());

        // 9. The initiator's poll finds the response and completes the read.
        let mut raw = [0u8; CQE_SIZE];
        self.icpu
            .read(BusAddr(self.iresponse.get()), &mut raw)
            .await
            .map_err(|source| NvmeofError::Load {
                read: what.to_string(),
                what: "initiator loading the response",
                source,
            })?;
        let got = Completion::from_bytes(&raw);
        if got.cid != cid || got.status != Status::SUCCESS {
            return Err(NvmeofError::WrongResponse {
                read: what.to_string(),
                cid: got.cid,
                status: got.status,
                expected: cid,
            });
        }
        self.icpu.sleep(c.initiator_complete).await;
        laps.mark(self.machine.now());
        Ok(laps.done())
    }
}

/// The NVMe-oF reads' times: per step, and of the whole read.
struct StepTimes {
    steps: [LatencyRecorder; STEP_COUNT],
    total: LatencyRecorder,
}

/// Times of consecutive steps.
struct Laps {
    last: SimTime,
    laps: [u64; STEP_COUNT],
    n: usize,
}

impl Laps {
    fn new(start: SimTime) -> Laps {
        Laps {
            last: start,
            laps: [0; STEP_COUNT],
            n: 0,
        }
    }

    /// Ends the current step at `now`.
    fn mark(&mut self, now: SimTime) {
        if let Some(l) = self.laps.get_mut(self.n) {
            *l = now.since(self.last).as_ps();
        }
        self.last = now;
        self.n += 1;
    }

    fn done(self) -> [u64; STEP_COUNT] {
        debug_assert_eq!(self.n, STEPS.len(), "every step marked once");
        self.laps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_calibration::Calibration;

    #[test]
    fn serialization_follows_the_link_rate() {
        let costs =
            RdmaCosts::from_calibration(&Calibration::default_embedded().nvmeof).expect("valid");
        // 4 KiB at 100 Gb/s: 327.68 ns.
        assert_eq!(costs.wire(4096).as_ps(), 327_680);
    }

    #[test]
    fn a_zero_link_rate_is_refused_by_name() {
        let mut p = Calibration::default_embedded().nvmeof;
        p.link_gbps.value = 0.0;
        let err = RdmaCosts::from_calibration(&p).expect_err("no rate");
        assert!(
            matches!(
                err,
                NvmeofError::Calibration {
                    key: "link_gbps",
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "calibration [nvmeof] link_gbps = 0: must be a positive rate"
        );
    }
}
