//! The run of [`super::video`]: the GPUs opened (borrowed ones borrowed) and given their
//! buffers, streams and ticket lock; then three kinds of task on the emulated host —
//!
//! - the **capture** task, which at `k / fps` captures frame `k` of every stream and hands
//!   each to the scheduler ([`Run::pick`]), which appends it to one GPU's queue;
//! - one **feeder** per GPU, which takes its queue's frames in order, each once one of the
//!   GPU's two buffers is free and then a CPU core ([`Cores`], first come first served);
//! - one **frame** task per frame: decode into the buffer, copy in, kernel, copy back,
//!   synchronize, check — then the buffer is free again.
//!
//! Every time is virtual; the run's results are the same on every run.

mod summary;

use super::frame::{self, Features, FrameId, KernelParams, FEATURE_BYTES, FRAME_BYTES, LOCK_BYTES};
use super::{
    LeftOut, OutOfReach, PoolGpu, VideoConfig, VideoError, VideoResult, IN_FLIGHT_PER_GPU,
};
use crate::gpu_profile;
use smartio_cluster::Cluster;
use smartio_devices::gpu::spec::KernelId;
use smartio_devices::gpu::Gpu;
use smartio_drivers::gpu::{DeviceBuffer, GpuContext, GpuError, HostBuffer, RuntimeCosts, Stream};
use smartio_host::HostOs;
use smartio_machine::{Agent, Machine};
use smartio_platform::{Clock, Notify, PhysAddr, SimDuration, SimTime};
use smartio_workloads::attach::Workbench;
use smartio_workloads::gpu::{close_all, host_memory, open_all, GpuWorkloadError};
use smartio_workloads::progress::{self, Phase, Unit};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// One of a GPU's frame buffers: pinned host memory the decoder writes, its copy in device
/// memory, the features in device memory and their copy in host memory, and the stream
/// that moves them.
struct Slot {
    stream: Stream,
    host_in: HostBuffer,
    dev_in: DeviceBuffer,
    dev_out: DeviceBuffer,
    host_out: HostBuffer,
}

/// What a GPU of the pool is given before the first frame.
struct Resources {
    kernel: KernelId,
    lock: DeviceBuffer,
    slots: Vec<Slot>,
}

/// A GPU of the pool during the run.
struct Member {
    spec: String,
    borrowed: bool,
    profile: String,
    /// The profile's time per frame.
    compute: SimDuration,
    ctx: GpuContext,
    /// The model, for the test hook that spoils a frame in device memory.
    model: Option<Rc<Gpu<Agent>>>,
    res: Resources,
    /// Buffers not holding a frame, in the order they were freed.
    free: RefCell<VecDeque<usize>>,
    freed: Notify,
    /// Frames given to this GPU, not yet decoding.
    queue: RefCell<VecDeque<FrameId>>,
    queued: Notify,
    /// When the frames given to it are done, by the scheduler's reckoning.
    reckoned: Cell<SimTime>,
}

/// A GPU of the pool with its profile, before it is set up.
struct Profiled {
    /// The profile's name.
    profile: String,
    /// The profile's time per frame.
    compute: SimDuration,
    /// The model, for the test hook that spoils a frame in device memory.
    model: Option<Rc<Gpu<Agent>>>,
}

/// The host's CPU cores as decoders: handed out first come, first served.
///
/// Invariant: a core released while someone waits goes straight to the first waiter, so
/// `free` is non-zero only when nobody waits.
struct Cores {
    free: Cell<u32>,
    waiting: RefCell<VecDeque<Rc<Notify>>>,
}

impl Cores {
    async fn acquire(&self) {
        if self.free.get() > 0 && self.waiting.borrow().is_empty() {
            self.free.set(self.free.get() - 1);
            return;
        }
        let turn = Rc::new(Notify::new());
        self.waiting.borrow_mut().push_back(turn.clone());
        turn.notified().await;
    }

    fn release(&self) {
        let next = self.waiting.borrow_mut().pop_front();
        match next {
            Some(turn) => turn.notify(),
            None => self.free.set(self.free.get() + 1),
        }
    }
}

/// A core held for one frame's decode; given back when dropped, however the frame's task
/// ends.
struct CoreHold(Rc<Run>);

impl Drop for CoreHold {
    fn drop(&mut self) {
        self.0.cores.release();
    }
}

/// The moments of one frame's life.
#[derive(Debug, Clone, Copy, Default)]
struct Record {
    gpu: usize,
    captured: SimTime,
    decode_start: SimTime,
    decode_end: SimTime,
    kernel_entry: SimTime,
    kernel_start: SimTime,
    kernel_end: SimTime,
    done: SimTime,
    /// Its features came back and matched.
    verified: bool,
}

/// Everything the tasks share.
struct Run {
    machine: Machine,
    os: HostOs,
    cpu: Agent,
    config: VideoConfig,
    decode: SimDuration,
    gpus: Vec<Member>,
    cores: Cores,
    /// By `stream * frames + frame`.
    records: RefCell<Vec<Record>>,
    captured_all: Cell<bool>,
    finished: Cell<u64>,
    all_done: Notify,
    /// Frames whose features did not match, and why, in the order they were found.
    mismatches: RefCell<Vec<String>>,
    /// The first failure of the GPU runtime or host memory.
    error: RefCell<Option<VideoError>>,
    /// GPUs of a default pool left out: they cannot reach the host's memory.
    left_out: Vec<LeftOut>,
    progress: RefCell<Phase>,
}

impl Run {
    fn total(&self) -> u64 {
        u64::from(self.config.streams) * u64::from(self.config.frames)
    }

    fn index(&self, id: FrameId) -> usize {
        id.stream as usize * self.config.frames as usize + id.frame as usize
    }

    fn update(&self, id: FrameId, f: impl FnOnce(&mut Record)) {
        let i = self.index(id);
        if let Some(r) = self.records.borrow_mut().get_mut(i) {
            f(r);
        }
    }

    /// The scheduler: the GPU that would finish the frame first — the later of "decoded"
    /// (`now` plus the decode time) and the end of the work already given to the GPU, plus
    /// the GPU's time per frame — ties to the GPU listed first. The choice moves that GPU's
    /// reckoned end.
    fn pick(&self, now: SimTime) -> usize {
        let decoded = now + self.decode;
        let mut best = (0, SimTime::NEVER);
        for (i, g) in self.gpus.iter().enumerate() {
            let done = decoded.max(g.reckoned.get()) + g.compute;
            if done < best.1 {
                best = (i, done);
            }
        }
        if let Some(g) = self.gpus.get(best.0) {
            g.reckoned.set(best.1);
        }
        best.0
    }
}

/// Opens the pool, runs the streams and gives everything back.
pub(super) fn run(
    cluster: &Cluster,
    config: &VideoConfig,
    cores: u32,
    pool: Vec<PoolGpu>,
) -> Result<VideoResult, VideoError> {
    let specs: Vec<&str> = pool.iter().map(|g| g.spec.as_str()).collect();
    let bench = Workbench::with_devices(cluster, &config.host, &specs)?;
    let mut profiles = Vec::new();
    for g in &pool {
        let (name, profile) = gpu_profile(cluster, g.endpoint)?;
        profiles.push(Profiled {
            profile: name,
            compute: SimDuration::from_ns_f64(profile.eir_frame_ns.value),
            model: cluster.gpu(g.endpoint),
        });
    }
    let decode = SimDuration::from_ns_f64(cluster.calibration.video.decode_frame_ns.value);
    let kernels = cluster.gpu_kernels().clone();
    let costs = RuntimeCosts::from_calibration(&cluster.calibration.gpu_runtime);
    let machine = cluster.machine.clone();
    let scenario = machine.fabric().name.clone();
    let config = config.clone();
    smartio_workloads::booted::run_workload(&cluster.machine, async move {
        let work = async {
            let contexts = open_all(&kernels, costs, &bench, 0..pool.len()).await?;
            let (members, left_out) = enlist(contexts, pool, profiles, &config).await?;
            let run = Rc::new(Run {
                machine: machine.clone(),
                cpu: bench.os.cpu(),
                os: bench.os.clone(),
                decode,
                gpus: members,
                cores: Cores {
                    free: Cell::new(cores),
                    waiting: RefCell::default(),
                },
                records: RefCell::new(vec![
                    Record::default();
                    config.streams as usize * config.frames as usize
                ]),
                captured_all: Cell::new(false),
                finished: Cell::new(0),
                all_done: Notify::new(),
                mismatches: RefCell::default(),
                error: RefCell::default(),
                left_out,
                progress: RefCell::new(progress::begin(
                    "video frames",
                    u64::from(config.streams) * u64::from(config.frames),
                    Unit::Items("frames"),
                )),
                config: config.clone(),
            });
            let start = run.cpu.now();
            machine.spawn(capture(run.clone(), start));
            for g in 0..run.gpus.len() {
                machine.spawn(feed(run.clone(), g));
            }
            run.all_done.notified().await;
            let outcome = summary::summarize(&run, &scenario, cores, start);
            let run = Rc::try_unwrap(run).map_err(|_| {
                GpuWorkloadError::Internal(
                    "the video tasks still hold the GPUs after the last frame",
                )
            })?;
            let closed = close_all(run.gpus.into_iter().map(|m| m.ctx)).await;
            let result = outcome?;
            closed?;
            Ok(result)
        };
        bench.detach_after(work).await
    })
}

/// Sets each opened GPU up as a member of the pool (`profiles` in the pool's order): one
/// out of the host's reach is left out when the configuration says so; on the first other
/// failure, or with no member, every context is closed and the run refused. The GPUs left
/// out give their channels back before the streams start.
async fn enlist(
    contexts: Vec<GpuContext>,
    pool: Vec<PoolGpu>,
    profiles: Vec<Profiled>,
    config: &VideoConfig,
) -> Result<(Vec<Member>, Vec<LeftOut>), VideoError> {
    let mut members = Vec::new();
    let mut failed = None;
    let mut unused = Vec::new();
    let mut left_out = Vec::new();
    for (
        (ctx, g),
        Profiled {
            profile,
            compute,
            model,
        },
    ) in contexts.into_iter().zip(pool).zip(profiles)
    {
        if failed.is_some() {
            unused.push(ctx);
            continue;
        }
        match set_up(&ctx, &g.spec, &config.host).await {
            Err(VideoError::OutOfReach {
                device, bits, addr, ..
            }) if config.out_of_reach == OutOfReach::LeaveOut => {
                left_out.push(LeftOut { device, bits, addr });
                unused.push(ctx);
            }
            Ok(res) => members.push(Member {
                spec: g.spec,
                borrowed: g.borrowed,
                profile,
                compute,
                model,
                free: RefCell::new((0..res.slots.len()).collect()),
                freed: Notify::new(),
                queue: RefCell::default(),
                queued: Notify::new(),
                reckoned: Cell::new(SimTime::ZERO),
                res,
                ctx,
            }),
            Err(e) => {
                failed = Some(e);
                unused.push(ctx);
            }
        }
    }
    if members.is_empty() && failed.is_none() {
        failed = Some(VideoError::NoGpuInReach {
            host: config.host.clone(),
            left_out: left_out.clone(),
        });
    }
    if let Some(e) = failed {
        let _ = close_all(members.into_iter().map(|m| m.ctx).chain(unused)).await;
        return Err(e);
    }
    // The GPUs left out give their channels back before the streams start.
    close_all(unused).await?;
    Ok((members, left_out))
}

/// Gives a GPU (`spec`, of the pool of `host`) its kernel, its zeroed ticket lock and its
/// frame buffers with their streams. A GPU that cannot address the host's pinned memory — a
/// GPU with 40 address bits borrowed through an NTB window above 1 TiB — is refused by name.
async fn set_up(ctx: &GpuContext, spec: &str, host: &str) -> Result<Resources, VideoError> {
    let gpu = |e| match e {
        GpuError::HostOutOfReach { bus, bits, .. } => VideoError::OutOfReach {
            device: spec.to_string(),
            bits,
            host: host.to_string(),
            addr: bus,
        },
        e => VideoError::from(GpuWorkloadError::from(e)),
    };
    let kernel = ctx.load_kernel(frame::KERNEL_NAME, frame::feature_kernel());
    let lock = ctx.malloc(LOCK_BYTES).map_err(gpu)?;
    // The lock starts at zero (a cudaMemset, as a copy from zeroed pinned memory).
    let zero = ctx.host_alloc(LOCK_BYTES).map_err(gpu)?;
    ctx.memcpy(lock.addr(), zero.addr(), LOCK_BYTES)
        .await
        .map_err(gpu)?;
    ctx.host_free(zero).map_err(gpu)?;
    let mut slots = Vec::with_capacity(IN_FLIGHT_PER_GPU);
    for _ in 0..IN_FLIGHT_PER_GPU {
        slots.push(Slot {
            stream: ctx.create_stream().await.map_err(gpu)?,
            host_in: ctx.host_alloc(FRAME_BYTES).map_err(gpu)?,
            dev_in: ctx.malloc(FRAME_BYTES).map_err(gpu)?,
            dev_out: ctx.malloc(FEATURE_BYTES).map_err(gpu)?,
            host_out: ctx.host_alloc(FEATURE_BYTES).map_err(gpu)?,
        });
    }
    Ok(Resources {
        kernel,
        lock,
        slots,
    })
}

/// Captures frame `k` of every stream at `start + k / fps` and schedules it.
async fn capture(run: Rc<Run>, start: SimTime) {
    let (streams, frames, fps) = (run.config.streams, run.config.frames, run.config.fps);
    for k in 0..frames {
        let at = start + SimDuration::from_ps(u64::from(k) * 1_000_000_000_000 / u64::from(fps));
        let now = run.cpu.now();
        if at > now {
            run.cpu.sleep(at.since(now)).await;
        }
        for stream in 0..streams {
            let id = FrameId { stream, frame: k };
            let g = run.pick(at);
            run.update(id, |r| {
                r.captured = at;
                r.gpu = g;
            });
            if let Some(gpu) = run.gpus.get(g) {
                gpu.queue.borrow_mut().push_back(id);
                gpu.queued.notify();
            }
        }
    }
    run.captured_all.set(true);
    for g in &run.gpus {
        g.queued.notify();
    }
}

/// Starts GPU `g`'s frames in order, each once a buffer and a core are free.
async fn feed(run: Rc<Run>, g: usize) {
    let Some(gpu) = run.gpus.get(g) else {
        return;
    };
    loop {
        let id = loop {
            let next = gpu.queue.borrow_mut().pop_front();
            if let Some(id) = next {
                break id;
            }
            if run.captured_all.get() {
                return;
            }
            gpu.queued.notified().await;
        };
        let slot = loop {
            let free = gpu.free.borrow_mut().pop_front();
            if let Some(s) = free {
                break s;
            }
            gpu.freed.notified().await;
        };
        run.cores.acquire().await;
        let core = CoreHold(run.clone());
        run.machine
            .spawn(frame_task(run.clone(), g, slot, id, core));
    }
}

/// One frame, start to end; its buffer is free again afterwards, whatever happened.
async fn frame_task(run: Rc<Run>, g: usize, slot: usize, id: FrameId, core: CoreHold) {
    match process(&run, g, slot, id, core).await {
        Ok(None) => {}
        Ok(Some(why)) => run.mismatches.borrow_mut().push(format!("{id}: {why}")),
        Err(e) => {
            run.error.borrow_mut().get_or_insert(e);
        }
    }
    if let Some(gpu) = run.gpus.get(g) {
        gpu.free.borrow_mut().push_back(slot);
        gpu.freed.notify();
    }
    let finished = run.finished.get() + 1;
    run.finished.set(finished);
    run.progress.borrow_mut().set(finished);
    if finished == run.total() {
        run.all_done.notify();
    }
}

/// Decode, copy in, kernel, copy back, check: `Some(why)` if the features do not match.
async fn process(
    run: &Run,
    g: usize,
    slot: usize,
    id: FrameId,
    core: CoreHold,
) -> Result<Option<String>, VideoError> {
    let Some((gpu, s)) = run
        .gpus
        .get(g)
        .and_then(|gpu| Some((gpu, gpu.res.slots.get(slot)?)))
    else {
        return Err(bug("a frame task was given a buffer its GPU does not have"));
    };
    // Decode on the core the feeder took (given back once decoded), straight into the GPU's
    // pinned buffer.
    let decode_start = run.cpu.now();
    run.cpu.sleep(run.decode).await;
    let (want, written) = decode_into(&run.os, id, s.host_in.cpu);
    let decode_end = run.cpu.now();
    drop(core);
    written?;
    run.update(id, |r| {
        r.decode_start = decode_start;
        r.decode_end = decode_end;
    });
    let rt = |e| VideoError::from(GpuWorkloadError::from(e));
    s.stream
        .memcpy_async(s.dev_in.addr(), s.host_in.addr(), FRAME_BYTES)
        .await
        .map_err(rt)?;
    if run.config.spoil == Some(id) {
        s.stream.synchronize().await.map_err(rt)?;
        spoil(gpu, s.dev_in.offset + FRAME_BYTES / 2)?;
    }
    let params = KernelParams {
        frame: s.dev_in.addr(),
        len: FRAME_BYTES,
        features: s.dev_out.addr(),
        lock: gpu.res.lock.offset,
        compute_ns: gpu.compute.as_ps() / 1000,
        id,
    };
    s.stream
        .launch(gpu.res.kernel, 1, &params.encode())
        .await
        .map_err(rt)?;
    s.stream
        .memcpy_async(s.host_out.addr(), s.dev_out.addr(), FEATURE_BYTES)
        .await
        .map_err(rt)?;
    s.stream.synchronize().await.map_err(rt)?;
    let mut out = [0u8; FEATURE_BYTES as usize];
    gpu.ctx
        .read_host(&s.host_out, 0, &mut out)
        .await
        .map_err(rt)?;
    let done = run.cpu.now();
    let features = Features::decode(&out).ok_or_else(|| bug("a short feature vector"))?;
    let at = |cycles: u64| {
        let khz = gpu.ctx.properties().clock_khz.max(1);
        let ps = u128::from(cycles) * 1_000_000_000 / u128::from(khz);
        SimTime(u64::try_from(ps).unwrap_or(u64::MAX))
    };
    let mismatch = features.mismatch(id, want, FRAME_BYTES);
    run.update(id, |r| {
        r.done = done;
        r.verified = mismatch.is_none();
        if mismatch.is_none() {
            r.kernel_entry = at(features.entry_cycles);
            r.kernel_start = at(features.start_cycles);
            r.kernel_end = at(features.end_cycles);
        }
    });
    Ok(mismatch)
}

/// Writes frame `id`'s decoded bytes at `at` in host memory, a piece at a time; returns
/// their digest and whether the writes succeeded.
fn decode_into(os: &HostOs, id: FrameId, at: PhysAddr) -> (u64, Result<(), VideoError>) {
    let mut piece = vec![0u8; frame::PIECE];
    let mut digest = frame::Digest::new();
    let mut done = 0u64;
    while done < FRAME_BYTES {
        let n = (FRAME_BYTES - done).min(frame::PIECE as u64) as usize;
        let buf = &mut piece[..n];
        frame::fill(id, done, buf);
        digest.update(buf);
        if let Err(e) = os.write_memory(PhysAddr(at.get() + done), buf) {
            return (0, Err(host_memory("decoded frame buffer")(e).into()));
        }
        done += n as u64;
    }
    (digest.finish(), Ok(()))
}

/// The test hook: flips one byte of the frame in GPU memory.
fn spoil(gpu: &Member, offset: u64) -> Result<(), VideoError> {
    let model = gpu
        .model
        .as_ref()
        .ok_or_else(|| bug("the GPU to spoil a frame in has no model"))?;
    let mut b = [0u8; 1];
    model
        .peek(offset, &mut b)
        .and_then(|()| model.poke(offset, &[!b[0]]))
        .map_err(|_| bug("the byte to spoil is outside the GPU's memory"))
}

/// An emulator bug: the workload broke one of its own invariants.
fn bug(what: &'static str) -> VideoError {
    GpuWorkloadError::Internal(what).into()
}
