//! A fio-like block workload on an NVMe namespace: sequential or random reads, writes or a
//! mix, at a queue depth per job, with latency percentiles from an HdrHistogram and optional
//! verification of every byte read. The I/O goes through the native driver bound on the
//! workload's host, through a client of the distributed NVMe driver, or through the disk its
//! kernel-space block client registers ([`FioMethod`]); the loop is the same, only the
//! backend that does one I/O differs (`backend`).
//!
//! Verification: every `bs`-sized block in the range has a version; a write stores the
//! block's pattern for its next version, a read compares against the current one. While a
//! block has an I/O in flight no other I/O picks it (fio's `serialize_overlap`), so the
//! expected content is always defined. A workload that reads first writes version 0 over the
//! whole range (not timed).

pub(crate) mod backend;
mod bad_parameter;
mod config;

pub use bad_parameter::{BadParameter, NamespaceError};
pub use config::{
    Amount, FioConfig, FioMethod, FioResult, LatencyNs, RwMode, UnknownRwMode, MAX_BUFFER_BYTES,
    MAX_IODEPTH, MAX_JOBS, MAX_OPS, MAX_RUNTIME, MAX_VERIFY_BYTES,
};

use crate::attach::{AttachError, NameOption, Workbench};
use crate::booted::{BootError, Stuck, UnknownHost};
use crate::explain::{ExplainSpec, Explainer, Explanation, Operation};
use crate::progress;
use backend::{Backend, Buffer, ClientBench};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::{BlockOp, NvmeDevice, NvmeDriver, NvmeDriverConfig, NvmeError};
use smartio_drivers::nvme_dist::{BlockClientError, DistError};
use smartio_host::{BlockError, HostError, RamError};
use smartio_platform::{Clock, Notify, SimDuration, SimTime};
use smartio_smartio::SmartIoError;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use thiserror::Error;

/// Why a workload could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FioError {
    /// No host of that name.
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
    /// The host OS refused (unknown device, no driver, probe failure).
    #[error("{0}")]
    Host(#[from] HostError),
    /// The device is not an NVMe controller.
    #[error("{device} on {host} is not an NVMe controller (class {class:#08x})")]
    NotNvme {
        /// Host.
        host: String,
        /// Device.
        device: String,
        /// Its class code.
        class: u32,
    },
    /// A parameter makes no sense for this device.
    #[error("{0}")]
    BadParameter(#[from] BadParameter),
    /// The NVMe driver failed a request (its status, or the path's error).
    #[error(transparent)]
    Driver(#[from] NvmeError),
    /// Host memory for the I/O buffers ran out.
    #[error("buffer: {0}")]
    Buffer(#[from] RamError),
    /// A client's data segment cannot hold the buffers the jobs need.
    #[error(
        "buffer: {len} bytes at offset {offset} do not fit the client's {size}-byte data segment"
    )]
    SegmentFull {
        /// Bytes asked for.
        len: u64,
        /// Where in the segment they would start.
        offset: u64,
        /// The segment's size.
        size: u64,
    },
    /// The latency histogram could not be made.
    #[error("histogram: {0}")]
    Histogram(#[from] hdrhistogram::errors::CreationError),
    /// The workload's own bookkeeping went wrong (an emulator bug).
    #[error("{0}")]
    Internal(&'static str),
    /// Data read back differs from what was written.
    #[error("verify failed: block {block} (byte offset {offset}) of namespace {nsid}: first difference at byte {at}")]
    VerifyFailed {
        /// Block index (of `bs` bytes).
        block: u64,
        /// Byte offset of the block in the namespace.
        offset: u64,
        /// Namespace.
        nsid: u32,
        /// First differing byte within the block.
        at: usize,
    },
    /// Another job would need a queue pair the controller did not grant.
    #[error("--jobs {jobs}: every job needs its own I/O queue pair, and {what} granted {granted}; use --jobs {granted} or fewer")]
    TooManyJobs {
        /// Jobs asked for.
        jobs: u32,
        /// Pairs granted.
        granted: usize,
        /// Who granted them ("the controller", "the manager").
        what: &'static str,
    },
    /// The simulation ran out of events before the workload finished (an emulator bug); what
    /// every waiting task waited for.
    #[error(transparent)]
    DidNotFinish(#[from] Stuck),
    /// SmartIO could not lend the device.
    #[error("{0}")]
    SmartIo(#[from] SmartIoError),
    /// The VM the workload runs in could not be created, powered on or shut down.
    #[error("{0}")]
    Vm(#[from] smartio_host::VmError),
    /// The distributed NVMe driver refused (no manager, no queue pair left).
    #[error("{0}")]
    Dist(#[from] DistError),
    /// The distributed driver's block client could not start or stop.
    #[error("{0}")]
    BlockClient(#[from] BlockClientError),
    /// The host's block layer refused or failed a request.
    #[error("{0}")]
    Disk(#[from] BlockError),
    /// The workbench could not attach a device (an emulator bug).
    #[error("{0}")]
    Attach(#[source] Box<AttachError>),
}

impl From<BootError> for FioError {
    fn from(e: BootError) -> Self {
        AttachError::from(e).into()
    }
}

impl From<AttachError> for FioError {
    fn from(e: AttachError) -> Self {
        match e {
            AttachError::UnknownHost(e) => FioError::UnknownHost(e),
            AttachError::Host(e) => FioError::Host(e),
            AttachError::SmartIo(e) => FioError::SmartIo(e),
            e @ (AttachError::BadName { .. }
            | AttachError::UnknownVm { .. }
            | AttachError::NotAVm { .. }) => match NameOption::of(e) {
                Ok(name) => BadParameter::Name(name).into(),
                Err(e) => FioError::Attach(Box::new(e)),
            },
            AttachError::Vm(e) => FioError::Vm(e),
            e @ (AttachError::NoDevice { .. } | AttachError::NoGuestFunction { .. }) => {
                FioError::Attach(Box::new(e))
            }
            AttachError::Stuck(e) => FioError::DidNotFinish(e),
        }
    }
}

/// Fills `buf` with the pattern of `block` at `version`: each 8-byte word differs from
/// every other word of the block and from the words of other blocks, seeds and versions,
/// so a misplaced, stale or torn block is caught.
///
/// The block's start is one splitmix64 draw from `seed`, `block` and `version`; word `i` is
/// that start stepped `i` times by an odd constant (a bijection of `i`, so the words of a
/// block differ): a few instructions a word to make or check, since verifying workloads check
/// every block they read against it ([`pattern_difference`]). The last word is cut to what
/// is left.
pub fn pattern(seed: u64, block: u64, version: u32, buf: &mut [u8]) {
    let mut x = pattern_start(seed, block, version);
    let mut words = buf.chunks_exact_mut(8);
    for word in &mut words {
        word.copy_from_slice(&x.to_le_bytes());
        x = x.wrapping_add(PATTERN_STEP);
    }
    let rest = words.into_remainder();
    if !rest.is_empty() {
        let n = rest.len();
        rest.copy_from_slice(&x.to_le_bytes()[..n]);
    }
}

/// Where `got` first differs from the pattern [`pattern`] writes over its length (`block`
/// at `version` from `seed`): `None` when it holds the pattern.
///
/// Checked word by word against the pattern as it is generated, with no buffer of the
/// expected bytes and no branch per word: eight words at a time, each against its own lane of
/// the pattern (lane `j` holds word `i + j`, stepped eight words at once), the differences
/// or-ed together, so the loop is vectorised; the differing byte is searched for only when
/// there is one.
pub fn pattern_difference(seed: u64, block: u64, version: u32, got: &[u8]) -> Option<usize> {
    let start = pattern_start(seed, block, version);
    let mut lanes: [u64; LANES] =
        std::array::from_fn(|j| start.wrapping_add(PATTERN_STEP.wrapping_mul(j as u64)));
    let mut differ = [0u64; LANES];
    let mut runs = got.chunks_exact(8 * LANES);
    for run in &mut runs {
        for (j, word) in run.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            differ[j] |= u64::from_le_bytes(bytes) ^ lanes[j];
            lanes[j] = lanes[j].wrapping_add(LANE_STEP);
        }
    }
    // The words after the last whole run, from lane 0's word on.
    let mut x = lanes[0];
    let mut any = differ.iter().fold(0, |a, d| a | d);
    let mut words = runs.remainder().chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        any |= u64::from_le_bytes(bytes) ^ x;
        x = x.wrapping_add(PATTERN_STEP);
    }
    let rest = words.remainder();
    if any == 0 && rest == &x.to_le_bytes()[..rest.len()] {
        return None;
    }
    let mut want = vec![0u8; got.len()];
    pattern(seed, block, version, &mut want);
    crate::verify::first_difference(got, &want)
}

/// Words [`pattern_difference`] checks at a time.
const LANES: usize = 8;

/// A lane's step: [`LANES`] words.
const LANE_STEP: u64 = PATTERN_STEP.wrapping_mul(LANES as u64);

/// The odd constant a block's pattern steps by from word to word (and mixes the block into
/// its start with).
const PATTERN_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// The state of a block's first pattern word: one splitmix64 draw from `seed`, `block` and
/// `version`.
fn pattern_start(seed: u64, block: u64, version: u32) -> u64 {
    let mut z = seed ^ block.wrapping_mul(PATTERN_STEP) ^ (u64::from(version) << 48);
    z = z.wrapping_add(PATTERN_STEP);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Job {
    rng: ChaCha8Rng,
    cursor: u64,
    issued: u64,
    quota: u64,
}

struct Shared {
    cfg: FioConfig,
    blocks: u64,
    lba_size: u64,
    versions: RefCell<Vec<u32>>,
    /// What a verifying worker writes or reads back: one buffer for all workers, used
    /// only between two awaits.
    scratch: RefCell<Vec<u8>>,
    /// The blocks with an I/O under way, kept while verifying only (a verifying worker
    /// picks none of them: see `next_op`); see [`Shared::release`].
    in_flight: RefCell<HashSet<u64>>,
    hist: RefCell<Histogram<u64>>,
    sum_ns: Cell<f64>,
    reads: Cell<u64>,
    writes: Cell<u64>,
    verified: Cell<u64>,
    deadline: Cell<Option<SimTime>>,
    last: Cell<SimTime>,
    error: RefCell<Option<FioError>>,
    /// I/Os done, or virtual time spent, for a terminal's progress bar.
    progress: RefCell<Option<(SimTime, progress::Phase)>>,
    /// While the run is recorded: where each I/O's end is reported.
    explainer: RefCell<Option<Rc<Explainer>>>,
}

impl Shared {
    /// `block`'s I/O is over (or never started): a verifying worker may pick it again.
    fn release(&self, block: u64) {
        if self.cfg.verify {
            self.in_flight.borrow_mut().remove(&block);
        }
    }
}

/// Runs `cfg` on `cluster`. The cluster's hosts are booted, the NVMe driver bound to the
/// device, and the workload run to its end.
pub fn run_fio(cluster: &Cluster, cfg: &FioConfig) -> Result<FioResult, FioError> {
    run_fio_explained(cluster, cfg, None).map(|(result, _)| result)
}

/// [`run_fio`], recording the run to explain the I/Os `explain` asks for (and to keep its
/// trace); without `explain`, or on an engine that records nothing, the explanation is
/// empty.
pub fn run_fio_explained(
    cluster: &Cluster,
    cfg: &FioConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(FioResult, Explanation), FioError> {
    cfg.check()?;
    let cfg = cfg.clone();
    let explain = explain.cloned();
    match &cfg.method {
        FioMethod::Native => {
            // Both fit: `check` bounds jobs by MAX_JOBS and iodepth by MAX_IODEPTH.
            let driver = NvmeDriverConfig {
                mode: cfg.mode,
                io_queues: u16::try_from(cfg.jobs).unwrap_or(u16::MAX),
                queue_entries: u16::try_from(cfg.iodepth + 1).unwrap_or(u16::MAX),
                intx: false,
            };
            let bench = nvme_host(cluster, &cfg.host, &cfg.device, driver)?;
            crate::booted::run_workload(&cluster.machine, async move {
                let (dev, _) = bind_nvme(&bench).await?;
                let backend = Backend::Native {
                    os: bench.os.clone(),
                    dev,
                };
                run_on(backend, cfg, explain).await
            })
        }
        FioMethod::NvmeBlock { manager } => {
            let bench = ClientBench::new(cluster, &cfg.host, &cfg.device, manager)?;
            crate::booted::run_workload(&cluster.machine, async move {
                let backend = bench.start_block(&cfg).await?;
                run_on(backend, cfg, explain).await
            })
        }
        FioMethod::NvmeClient { manager } => {
            let bench = ClientBench::new(cluster, &cfg.host, &cfg.device, manager)?;
            crate::booted::run_workload(&cluster.machine, async move {
                // Room for every worker's buffer and for the verify prefill's transfers.
                let workers = u64::from(cfg.jobs) * u64::from(cfg.iodepth) * cfg.bs;
                let bs = cfg.bs;
                let backend = bench
                    .start(cfg.jobs, cfg.iodepth + 1, |mdts| {
                        workers.max((mdts / bs).max(1) * bs)
                    })
                    .await?;
                run_on(backend, cfg, explain).await
            })
        }
    }
}

/// Boots the cluster's hosts, resolves `device` for `host` (local, or `lender:device` to
/// borrow), checks that it is an NVMe controller, and registers the native NVMe driver with
/// `config` (binding happens in [`bind_nvme`]).
pub(crate) fn nvme_host(
    cluster: &Cluster,
    host: &str,
    device: &str,
    config: NvmeDriverConfig,
) -> Result<Workbench, FioError> {
    let bench = Workbench::new(cluster, host, device)?;
    if bench.class() != smartio_devices::nvme::spec::CLASS_CODE {
        return Err(FioError::NotNvme {
            host: host.to_string(),
            device: device.to_string(),
            class: bench.class(),
        });
    }
    bench.os.register_driver(Rc::new(NvmeDriver { config }));
    Ok(bench)
}

/// Attaches the bench's device (borrowing it if remote) and binds the registered NVMe
/// driver to it; returns the bound controller and its name in the host's tree.
pub async fn bind_nvme(bench: &Workbench) -> Result<(Rc<NvmeDevice>, String), FioError> {
    let device = bench.attach().await?;
    bench.os.probe(&device).await?;
    let dev = bench
        .os
        .driver_data::<NvmeDevice>(&device)
        .ok_or(FioError::Internal("the NVMe driver did not bind"))?;
    Ok((dev, device))
}

/// Runs the workload on `backend`, then closes it (a client leaves).
async fn run_on(
    backend: Backend,
    cfg: FioConfig,
    explain: Option<ExplainSpec>,
) -> Result<(FioResult, Explanation), FioError> {
    let backend = Rc::new(backend);
    let result = measure(&backend, &cfg, explain.as_ref()).await;
    match Rc::try_unwrap(backend) {
        Ok(backend) => {
            let closed = backend.close().await;
            let result = result?;
            closed?;
            Ok(result)
        }
        Err(_) => result.and(Err(FioError::Internal(
            "a worker still holds the NVMe backend after the run",
        ))),
    }
}

async fn measure(
    backend: &Rc<Backend>,
    cfg: &FioConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(FioResult, Explanation), FioError> {
    let os = backend.os().clone();
    let (lba, blocks) = check_against(backend, cfg)?;
    let cpu = os.cpu();
    let shared = Rc::new(Shared {
        blocks,
        lba_size: lba,
        // At most MAX_VERIFY_BYTES / 512 entries (`check`); with the default range, 1 GiB.
        versions: RefCell::new(if cfg.verify {
            vec![0; usize::try_from(blocks).unwrap_or(0)]
        } else {
            Vec::new()
        }),
        scratch: RefCell::new(Vec::new()),
        in_flight: RefCell::new(HashSet::new()),
        hist: RefCell::new(
            Histogram::new_with_bounds(1, 3_600_000_000_000, 3).map_err(FioError::from)?,
        ),
        sum_ns: Cell::new(0.0),
        reads: Cell::new(0),
        writes: Cell::new(0),
        verified: Cell::new(0),
        deadline: Cell::new(None),
        last: Cell::new(cpu.now()),
        error: RefCell::new(None),
        progress: RefCell::new(None),
        explainer: RefCell::new(None),
        cfg: cfg.clone(),
    });
    if cfg.verify && cfg.rw.reads() {
        prefill(backend, &shared).await?;
    }
    let start = cpu.now();
    let traffic_before = os.machine().link_traffic();
    shared.start(start)?;
    // Every buffer before any worker starts, so a failure leaves no worker running.
    let mut buffers = Vec::new();
    for _ in 0..cfg.jobs * cfg.iodepth {
        buffers.push(backend.buffer(cfg.bs)?);
    }
    // Recorded from the first I/O on (set-up and the verify prefill are not explained).
    *shared.explainer.borrow_mut() = explain.and_then(|spec| Explainer::start(os.machine(), spec));
    let finished = spawn_workers(backend, &shared, buffers)?;
    // Wait for every worker.
    finished.notified().await;
    shared.progress.borrow_mut().take();
    if let Some(e) = shared.error.borrow_mut().take() {
        return Err(e);
    }
    let explanation = shared
        .explainer
        .borrow_mut()
        .take()
        .map(|e| e.finish())
        .unwrap_or_default();
    let links =
        smartio_machine::LinkTraffic::carried_since(&traffic_before, os.machine().link_traffic());
    Ok((fio_result(backend, &shared, start, links), explanation))
}

/// Checks `cfg` against the namespace and controller `backend` reaches (the block size, the
/// range, the queue pairs); the namespace's block size and the range's blocks of `bs`.
fn check_against(backend: &Backend, cfg: &FioConfig) -> Result<(u64, u64), FioError> {
    let ns = backend.namespace(cfg.nsid)?;
    let lba = u64::from(ns.lba_size);
    if !cfg.bs.is_multiple_of(lba) {
        return Err(BadParameter::BsNotBlocks { bs: cfg.bs, lba }.into());
    }
    if cfg.bs > backend.max_transfer() {
        return Err(BadParameter::BsOverMdts {
            bs: cfg.bs,
            max: backend.max_transfer(),
        }
        .into());
    }
    let capacity = ns.blocks.saturating_mul(lba);
    let size = cfg.size.unwrap_or(capacity.min(1 << 30));
    if size > capacity || size < cfg.bs {
        return Err(BadParameter::Size {
            size,
            bs: cfg.bs,
            capacity,
        }
        .into());
    }
    backend.check_queues(cfg.jobs)?;
    Ok((lba, size / cfg.bs))
}

impl Shared {
    /// The timed run starts at `start`: its deadline (a runtime), and the progress shown.
    fn start(&self, start: SimTime) -> Result<(), FioError> {
        let cfg = &self.cfg;
        let deadline = match cfg.amount {
            Amount::Runtime(d) => Some(
                start
                    .as_ps()
                    .checked_add(d.as_ps())
                    .map(SimTime)
                    .ok_or(BadParameter::RuntimePastClock { runtime: d })?,
            ),
            Amount::Ops(_) => None,
        };
        self.deadline.set(deadline);
        self.last.set(start);
        *self.progress.borrow_mut() = Some((
            start,
            match cfg.amount {
                Amount::Ops(n) => progress::begin("I/Os", n, progress::Unit::Items("I/Os")),
                Amount::Runtime(d) => progress::begin("I/Os", d.as_ps(), progress::Unit::VirtualPs),
            },
        ));
        Ok(())
    }
}

/// Starts `iodepth` workers for each job, each with one of `buffers`; notified when the
/// last worker is done.
fn spawn_workers(
    backend: &Rc<Backend>,
    shared: &Rc<Shared>,
    buffers: Vec<Buffer>,
) -> Result<Rc<Notify>, FioError> {
    let cfg = &shared.cfg;
    let os = backend.os();
    let mut buffers = buffers.into_iter();
    let running = Rc::new(Cell::new(cfg.jobs * cfg.iodepth));
    let finished = Rc::new(Notify::new());
    for j in 0..cfg.jobs {
        let quota = match cfg.amount {
            Amount::Ops(n) => {
                n / u64::from(cfg.jobs) + u64::from(u64::from(j) < n % u64::from(cfg.jobs))
            }
            Amount::Runtime(_) => u64::MAX,
        };
        let job = Rc::new(RefCell::new(Job {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed.wrapping_add(u64::from(j))),
            cursor: 0,
            issued: 0,
            quota,
        }));
        for _ in 0..cfg.iodepth {
            let buffer = buffers
                .next()
                .ok_or(FioError::Internal("fewer buffers than workers"))?;
            let (backend, shared, job, running, finished) = (
                backend.clone(),
                shared.clone(),
                job.clone(),
                running.clone(),
                finished.clone(),
            );
            os.machine().clone().spawn(async move {
                worker(&backend, &shared, &job, j as usize, buffer).await;
                running.set(running.get() - 1);
                if running.get() == 0 {
                    finished.notify();
                }
            });
        }
    }
    Ok(finished)
}

/// What the run measured (from `start`), with the links' traffic.
fn fio_result(
    backend: &Backend,
    shared: &Shared,
    start: SimTime,
    links: Vec<smartio_machine::LinkTraffic>,
) -> FioResult {
    let cfg = &shared.cfg;
    let hist = shared.hist.borrow();
    let ops = shared.reads.get() + shared.writes.get();
    let runtime = shared.last.get().since(start).as_ps() as f64 / 1000.0;
    let q = |p: f64| hist.value_at_quantile(p) as f64;
    let secs = runtime / 1e9;
    FioResult {
        host: cfg.host.clone(),
        device: cfg.device.clone(),
        model: backend.model(),
        mode: backend.mode().into(),
        rw: cfg.rw,
        bs: cfg.bs,
        iodepth: cfg.iodepth,
        jobs: cfg.jobs,
        queues: backend.queues(),
        reads: shared.reads.get(),
        writes: shared.writes.get(),
        bytes: ops * cfg.bs,
        runtime_ns: runtime,
        iops: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
        bw_bytes_per_s: if secs > 0.0 {
            (ops * cfg.bs) as f64 / secs
        } else {
            0.0
        },
        lat_ns: LatencyNs {
            min: hist.min() as f64,
            mean: if ops > 0 {
                shared.sum_ns.get() / ops as f64
            } else {
                0.0
            },
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: hist.max() as f64,
        },
        verified_bytes: shared.verified.get(),
        links,
    }
}

/// Writes version 0 of every block in the range, in transfers of up to the controller's
/// maximum, before a verifying workload reads.
async fn prefill(backend: &Backend, s: &Shared) -> Result<(), FioError> {
    let os = backend.os();
    let bs = s.cfg.bs;
    let per = (backend.max_transfer() / bs).max(1);
    let buffer = backend.buffer(per * bs)?;
    let mut block = 0;
    let mut data = vec![0u8; (per * bs) as usize];
    let mut phase = progress::begin(
        "writing the verify pattern",
        s.blocks * bs,
        progress::Unit::Bytes,
    );
    while block < s.blocks {
        phase.set(block * bs);
        let n = per.min(s.blocks - block);
        for i in 0..n {
            let at = (i * bs) as usize;
            pattern(s.cfg.seed, block + i, 0, &mut data[at..at + bs as usize]);
        }
        os.write_memory(buffer.cpu, &data[..(n * bs) as usize])
            .map_err(|_| OUTSIDE_MEMORY)?;
        let lba = block * bs / s.lba_size;
        let count = (n * bs / s.lba_size) as u32;
        backend
            .submit(0, BlockOp::Write, s.cfg.nsid, lba, count, buffer)
            .await?;
        block += n;
    }
    backend.free(buffer);
    Ok(())
}

/// Picks the next block and direction for a job, or `None` when the job is done.
fn next_op(s: &Shared, job: &RefCell<Job>, now: SimTime) -> Option<(u64, bool)> {
    let mut j = job.borrow_mut();
    if j.issued >= j.quota
        || s.deadline.get().is_some_and(|d| now >= d)
        || s.error.borrow().is_some()
    {
        return None;
    }
    let cfg = &s.cfg;
    let read = match cfg.rw {
        RwMode::Read | RwMode::RandRead => true,
        RwMode::Write | RwMode::RandWrite => false,
        RwMode::RandRw => j.rng.random_range(0..100) < cfg.rwmixread,
    };
    let mut in_flight = s.in_flight.borrow_mut();
    let mut block;
    let mut tries = 0;
    loop {
        block = if cfg.rw.random() {
            j.rng.random_range(0..s.blocks)
        } else {
            let b = j.cursor % s.blocks;
            j.cursor += 1;
            b
        };
        tries += 1;
        if !cfg.verify || !in_flight.contains(&block) || tries > 64 {
            break;
        }
    }
    if cfg.verify && in_flight.contains(&block) {
        return None; // more workers than blocks: this one rests
    }
    if cfg.verify {
        in_flight.insert(block);
    }
    j.issued += 1;
    Some((block, read))
}

/// An I/O buffer the kernel allocated is always its memory; if not, it is an emulator bug.
const OUTSIDE_MEMORY: FioError = FioError::Internal("an I/O buffer is not in the kernel's memory");

async fn worker(backend: &Backend, s: &Shared, job: &RefCell<Job>, index: usize, buffer: Buffer) {
    let os = backend.os();
    let cpu = os.cpu();
    let bs = s.cfg.bs;
    let len = bs as usize; // at most MAX_BUFFER_BYTES (`FioConfig::check`)
    while let Some((block, read)) = next_op(s, job, cpu.now()) {
        if !read {
            // Writes carry the block's next pattern (fio writes non-zero buffers too).
            let v = if s.cfg.verify {
                version(s, block).wrapping_add(1)
            } else {
                1
            };
            let data = &mut *s.scratch.borrow_mut();
            data.resize(len, 0);
            pattern(s.cfg.seed, block, v, data);
            if os.write_memory(buffer.cpu, data).is_err() {
                s.error.borrow_mut().get_or_insert(OUTSIDE_MEMORY);
                s.release(block);
                return;
            }
        }
        let lba = block * bs / s.lba_size;
        let count = (bs / s.lba_size) as u32;
        let op = if read { BlockOp::Read } else { BlockOp::Write };
        let t0 = cpu.now();
        let r = backend
            .submit(index, op, s.cfg.nsid, lba, count, buffer)
            .await;
        let t1 = cpu.now();
        if let Err(e) = r {
            s.error.borrow_mut().get_or_insert(e);
            s.release(block);
            return;
        }
        let ns = t1.since(t0).as_ps() / 1000;
        if let Some(explainer) = &*s.explainer.borrow() {
            let what = || {
                format!(
                    "{} {bs} B at LBA {lba} (job {index})",
                    if read { "read" } else { "write" }
                )
            };
            explainer.report(&Operation {
                kind: None,
                track: &format!("fio job {index}"),
                what: &what,
                start: t0,
                end: t1,
                // As the percentiles count it: the top of its histogram bucket.
                recorded: SimDuration::from_ns(s.hist.borrow().highest_equivalent(ns.max(1))),
            });
        }
        let _ = s.hist.borrow_mut().record(ns.max(1));
        s.sum_ns.set(s.sum_ns.get() + ns as f64);
        if t1 > s.last.get() {
            s.last.set(t1);
        }
        if let Some((start, phase)) = &mut *s.progress.borrow_mut() {
            phase.set(match s.cfg.amount {
                Amount::Ops(_) => s.reads.get() + s.writes.get() + 1,
                Amount::Runtime(_) => t1.since(*start).as_ps(),
            });
        }
        if read {
            s.reads.set(s.reads.get() + 1);
            if s.cfg.verify {
                let data = &mut *s.scratch.borrow_mut();
                data.resize(len, 0);
                if os.read_memory(buffer.cpu, data).is_err() {
                    s.error.borrow_mut().get_or_insert(OUTSIDE_MEMORY);
                }
                if let Some(at) = pattern_difference(s.cfg.seed, block, version(s, block), data) {
                    s.error.borrow_mut().get_or_insert(FioError::VerifyFailed {
                        block,
                        offset: block * bs,
                        nsid: s.cfg.nsid,
                        at,
                    });
                }
                s.verified.set(s.verified.get() + bs);
            }
        } else {
            s.writes.set(s.writes.get() + 1);
            if s.cfg.verify {
                if let Some(v) = s.versions.borrow_mut().get_mut(block as usize) {
                    *v = v.wrapping_add(1);
                }
            }
        }
        s.release(block);
    }
}

/// The version `block` holds now (blocks are below `Shared::blocks`, the versions' length).
fn version(s: &Shared, block: u64) -> u32 {
    s.versions
        .borrow()
        .get(block as usize)
        .copied()
        .unwrap_or_default()
}

/// Reads `len` bytes at byte `offset` of namespace `nsid` through the native driver (in
/// transfers of the controller's maximum) — to look at what a namespace holds.
pub fn read_back(
    cluster: &Cluster,
    host: &str,
    device: &str,
    nsid: u32,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, FioError> {
    let bench = nvme_host(cluster, host, device, NvmeDriverConfig::default())?;
    crate::booted::run_workload(&cluster.machine, async move {
        let (dev, _) = bind_nvme(&bench).await?;
        let os = &bench.os;
        let lba = u64::from(dev.namespace(nsid)?.lba_size);
        if !offset.is_multiple_of(lba) || !len.is_multiple_of(lba) {
            return Err(BadParameter::Unaligned { offset, len, lba }.into());
        }
        let chunk = dev.info().max_transfer;
        let buffer = os.alloc(chunk)?;
        let mut data = Vec::with_capacity(len as usize);
        let mut at = 0;
        while at < len {
            let n = chunk.min(len - at);
            dev.submit(
                0,
                BlockOp::Read,
                nsid,
                (offset + at) / lba,
                (n / lba) as u32,
                buffer,
            )
            .await?;
            let mut part = vec![0u8; n as usize];
            os.read_memory(buffer, &mut part)
                .map_err(|_| OUTSIDE_MEMORY)?;
            data.extend_from_slice(&part);
            at += n;
        }
        os.free(buffer);
        Ok(data)
    })
}

#[cfg(test)]
mod tests {
    use super::{pattern, pattern_difference};

    #[test]
    fn the_pattern_steps_a_splitmix64_start_in_little_endian_words_cut_to_the_buffer() {
        // Computed independently from the definition for seed 7, block 3, version 2.
        let mut buf = [0u8; 13];
        pattern(7, 3, 2, &mut buf);
        let want: [u8; 13] = [
            0x2a, 0x2c, 0x8d, 0xcd, 0x57, 0x56, 0x33, 0xe5, 0x3f, 0xa8, 0xd7, 0x4c, 0x11,
        ];
        assert_eq!(buf, want);
        // A shorter buffer gets the same bytes, cut.
        let mut short = [0u8; 5];
        pattern(7, 3, 2, &mut short);
        assert_eq!(short, want[..5]);
        // A block's words: its first word's start stepped by the constant once per word
        // (each word, not only the first few, and the cut last one).
        let mut long = vec![0u8; 4096 + 3];
        pattern(7, 3, 2, &mut long);
        let first = u64::from_le_bytes(want[..8].try_into().unwrap_or_default());
        let mut x = first;
        for (i, bytes) in long.chunks(8).enumerate() {
            let word = x.to_le_bytes();
            assert_eq!(bytes, &word[..bytes.len()], "word {i}");
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        }
    }

    #[test]
    fn a_block_is_checked_against_its_pattern_to_the_first_differing_byte() {
        for len in [0usize, 1, 5, 8, 13, 16, 63, 64, 72, 130, 4096, 4099] {
            let mut buf = vec![0u8; len];
            pattern(7, 3, 2, &mut buf);
            assert_eq!(pattern_difference(7, 3, 2, &buf), None, "{len} bytes");
            // Another block, version or seed is caught at its first byte.
            if len > 0 {
                assert_eq!(pattern_difference(7, 4, 2, &buf), Some(0), "{len} bytes");
                assert_eq!(pattern_difference(7, 3, 3, &buf), Some(0), "{len} bytes");
                assert_eq!(pattern_difference(8, 3, 2, &buf), Some(0), "{len} bytes");
            }
            // One bit flipped anywhere — in any of the eight words checked at a time, the
            // words after the last eight and the cut last one alike; with a second flip after
            // it, the first is found.
            let lanes = (0..8).map(|j| 8 * j + 3);
            let after = [
                0, 1, 7, 8, 63, 64, 71, 100, 129, 2048, 4090, 4095, 4096, 4098,
            ];
            for at in lanes.chain(after) {
                if at >= len {
                    continue;
                }
                let mut bad = buf.clone();
                bad[at] ^= 0x10;
                assert_eq!(
                    pattern_difference(7, 3, 2, &bad),
                    Some(at),
                    "{len} bytes, {at}"
                );
                if at + 1 < len {
                    bad[len - 1] ^= 0x01;
                    assert_eq!(
                        pattern_difference(7, 3, 2, &bad),
                        Some(at),
                        "{len} bytes, {at} and the last"
                    );
                }
            }
        }
    }

    #[test]
    fn no_word_of_a_block_repeats_within_it_or_in_a_neighbouring_block_or_version() {
        let words = |block: u64, version: u32| -> Vec<u64> {
            let mut buf = vec![0u8; 64 << 10];
            pattern(11, block, version, &mut buf);
            buf.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .collect()
        };
        let mut seen = std::collections::HashSet::new();
        for (block, version) in [(0, 0), (1, 0), (2, 0), (0, 1)] {
            for w in words(block, version) {
                assert!(
                    seen.insert(w),
                    "word {w:#x} repeats (block {block}, v{version})"
                );
            }
        }
    }
}
