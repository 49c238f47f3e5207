//! The training program as it runs on the emulated host: open the GPUs, lay out their
//! buffers, start the loader, run the steps, check the weights, give everything back.

use super::dataset::{epoch_order, Layout};
use super::kernels::{self, StepParams};
use super::{EpochTime, ExchangeRoute, TrainConfig, TrainGpu, TrainResult, GRADIENT_BYTES};
use smartio_devices::gpu::kernel::KernelLibrary;
use smartio_devices::gpu::spec::{GpuAddr, KernelId};
use smartio_drivers::gpu::{DeviceBuffer, GpuContext, HostBuffer, RuntimeCosts, Stream};
use smartio_drivers::nvme::{BlockOp, NvmeDevice};
use smartio_drivers::nvme_dist::{Client, ClientQueue, Manager, SqPlacement};
use smartio_host::HostOs;
use smartio_machine::{Agent, Machine};
use smartio_platform::{BusAddr, Clock, Notify, PhysAddr, Port, SimTime};
use smartio_workloads::attach::Workbench;
use smartio_workloads::fio::FioError;
use smartio_workloads::gpu::Mismatch;
use smartio_workloads::gpu::{close_all, host_memory, open_all, path, GpuWorkloadError};
use smartio_workloads::progress;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Pinned buffers per GPU the loader fills in turn: one being copied, one being read.
const SLOTS: usize = 2;

/// What [`super::train`] resolved before the simulation runs.
pub(super) struct Setup {
    pub config: TrainConfig,
    pub gpus: Vec<TrainGpu>,
    /// Device-memory bandwidth of each GPU's profile, bytes per second.
    pub bandwidth: Vec<f64>,
    pub layout: Layout,
    pub kernels: Rc<KernelLibrary<Agent>>,
    pub costs: RuntimeCosts,
    pub scenario: String,
    pub machine: Machine,
    /// For a client of the distributed driver: the manager's host and the NVMe's id.
    pub client: Option<(HostOs, smartio_smartio::Fdid)>,
}

/// What reads the images.
#[derive(Clone)]
enum Reader {
    /// The native driver, straight into the pinned buffers.
    Native(Rc<NvmeDevice>),
    /// A client's queue pair into its data segment, `slot` bytes per read in flight; the
    /// CPU copies each record on into the pinned buffer.
    Client {
        client: Rc<Client>,
        queue: Rc<ClientQueue>,
        slot: u64,
    },
}

impl Reader {
    /// The largest transfer of one command.
    fn max_transfer(&self) -> u64 {
        match self {
            Reader::Native(dev) => dev.info().max_transfer,
            Reader::Client { slot, .. } => *slot,
        }
    }

    /// Reads `blocks` at `lba` into host memory at `dest`; `worker` (one of
    /// [`super::READS_IN_FLIGHT`]) says which part of a client's data segment to use.
    async fn read(
        &self,
        cpu: &Agent,
        worker: u64,
        lba: u64,
        blocks: u32,
        dest: PhysAddr,
        lba_size: u64,
    ) -> Result<(), GpuWorkloadError> {
        match self {
            Reader::Native(dev) => dev
                .submit(0, BlockOp::Read, 1, lba, blocks, dest)
                .await
                .map_err(|e| GpuWorkloadError::from(FioError::from(e))),
            Reader::Client {
                client,
                queue,
                slot,
            } => {
                let offset = worker * slot;
                client
                    .io(queue, BlockOp::Read, 1, lba, blocks, offset)
                    .await?;
                let (base, _) = client.data();
                let mut bytes = vec![0u8; (u64::from(blocks) * lba_size) as usize];
                cpu.read(BusAddr(base.get() + offset), &mut bytes)
                    .await
                    .map_err(GpuWorkloadError::CpuCopy)?;
                cpu.write(BusAddr(dest.get()), &bytes)
                    .await
                    .map_err(GpuWorkloadError::CpuCopy)
            }
        }
    }
}

/// One GPU's model replica and its buffers.
struct Replica<'a> {
    ctx: &'a GpuContext,
    stream: Stream,
    grad: DeviceBuffer,
    recv: DeviceBuffer,
    weights: DeviceBuffer,
    images: DeviceBuffer,
    result: DeviceBuffer,
    /// Where the step's result is read back, and (at the end) the weights.
    readback: HostBuffer,
    slots: Vec<HostBuffer>,
    /// How its gradient chunks reach the next replica (none with one GPU).
    link: Option<Link>,
    compute_ps: u64,
    bandwidth: f64,
}

/// How a replica's gradient chunks reach the next replica in the ring.
#[derive(Clone, Copy)]
enum Link {
    /// Its copy engine writes into the next GPU's `recv` and `grad`, as it addresses them
    /// through the next GPU's aperture.
    Peer { recv: GpuAddr, grad: GpuAddr },
    /// Through pinned host memory (the GPU cannot reach the next one): out to `out` (this
    /// GPU's), across by the CPU into `inc` (the next GPU's), in from there.
    Staged { out: HostBuffer, inc: HostBuffer },
}

/// Byte range of ring chunk `c` of `g`.
fn chunk(c: usize, g: usize) -> (u64, u64) {
    let words = GRADIENT_BYTES / 4;
    let (g, c) = (g as u64, c as u64);
    let start = c * words / g;
    let end = (c + 1) * words / g;
    (4 * start, 4 * (end - start))
}

/// Picoseconds for a GPU with `bandwidth` bytes/s to read two buffers of `bytes` and write
/// one.
fn elementwise_ps(bytes: u64, bandwidth: f64) -> u64 {
    (3.0 * bytes as f64 / bandwidth * 1e12).round() as u64
}

fn ns_since(cpu: &Agent, t: SimTime) -> f64 {
    cpu.now().since(t).as_ps() as f64 / 1e3
}

/// The ids GPU `replica` trains on in global batch `b`.
fn ids_of(order: &[u64], config: &TrainConfig, b: u64, replica: usize) -> Vec<u64> {
    let steps = config.steps();
    let sub = config.sub_batch();
    let start = ((b % steps) * config.batch + replica as u64 * sub) as usize;
    order
        .get(start..start + sub as usize)
        .map(<[u64]>::to_vec)
        .unwrap_or_default()
}

/// Runs the program; borrowed devices are given back by the caller.
pub(super) async fn run(bench: &Workbench, s: Setup) -> Result<TrainResult, GpuWorkloadError> {
    let (reader, first_gpu) = match &s.client {
        Some((manager_os, fdid)) => {
            let fdid = *fdid;
            let smartio = &bench.smartio;
            let manager = Manager::start(smartio, manager_os, fdid).await?;
            let slot = manager.max_transfer().min(s.layout.record());
            let data = u64::from(super::READS_IN_FLIGHT) * slot;
            let client = Client::connect(smartio, &bench.os, fdid, &manager, data).await?;
            let entries = (u32::from(super::READS_IN_FLIGHT) + 1).min(manager.max_entries);
            let queue = client
                .create_queue(entries as u16, SqPlacement::Hints)
                .await?;
            let client = Rc::new(client);
            (
                Reader::Client {
                    client,
                    queue,
                    slot,
                },
                0,
            )
        }
        None => (
            Reader::Native(smartio_workloads::fio::bind_nvme(bench).await?.0),
            1,
        ),
    };
    let contexts = open_all(
        &s.kernels,
        s.costs,
        bench,
        first_gpu..first_gpu + s.gpus.len(),
    )
    .await?;
    let result = train_on(bench, &s, reader.clone(), &contexts).await;
    let closed = close_all(contexts).await;
    let left = match reader {
        Reader::Native(_) => Ok(()),
        Reader::Client { client, queue, .. } => {
            drop(queue);
            match Rc::try_unwrap(client) {
                Ok(client) => client.leave().await.map_err(GpuWorkloadError::from),
                Err(_) => Err(GpuWorkloadError::Internal(
                    "the loader still holds the distributed driver's client at the end",
                )),
            }
        }
    };
    let r = result?;
    closed?;
    left?;
    Ok(r)
}

async fn replicas<'a>(
    s: &Setup,
    contexts: &'a [GpuContext],
) -> Result<Vec<Replica<'a>>, GpuWorkloadError> {
    let sub = s.config.sub_batch();
    let record = s.layout.record();
    let mut out = Vec::new();
    for (i, ctx) in contexts.iter().enumerate() {
        // Gradient and receive buffer first: low offsets, inside the aperture peers reach.
        let grad = ctx.malloc(GRADIENT_BYTES)?;
        let recv = ctx.malloc(chunk(0, contexts.len()).1 + 4)?;
        let weights = ctx.malloc(GRADIENT_BYTES)?;
        let result = ctx.malloc(kernels::result_bytes(sub))?;
        let images = ctx.malloc(sub * record)?;
        let readback = ctx.host_alloc(GRADIENT_BYTES.max(kernels::result_bytes(sub)))?;
        let mut slots = Vec::new();
        for _ in 0..SLOTS {
            slots.push(ctx.host_alloc(sub * record)?);
        }
        out.push(Replica {
            stream: ctx.create_stream().await?,
            ctx,
            grad,
            recv,
            weights,
            images,
            result,
            readback,
            slots,
            link: None,
            compute_ps: (s.gpus[i].forward_image_ns * 1e3).round() as u64,
            bandwidth: s.bandwidth[i],
        });
    }
    let g = out.len();
    if g == 1 {
        return Ok(out);
    }
    for i in 0..g {
        let (from, next) = (out[i].ctx, &out[(i + 1) % g]);
        // Peer access refused (no path, or an aperture the GPU cannot address): stage.
        let link = match from
            .enable_peer_access(next.ctx)
            .and_then(|p| Ok((p.addr(&next.recv)?, p.addr(&next.grad)?)))
        {
            Ok((recv, grad)) => Link::Peer { recv, grad },
            Err(_) => {
                let len = chunk(0, g).1 + 4;
                Link::Staged {
                    out: from.host_alloc(len)?,
                    inc: next.ctx.host_alloc(len)?,
                }
            }
        };
        out[i].link = Some(link);
    }
    Ok(out)
}

/// How the replicas' links carried the gradients.
fn route(reps: &[Replica<'_>]) -> ExchangeRoute {
    let peer = reps
        .iter()
        .filter(|r| matches!(r.link, Some(Link::Peer { .. })))
        .count();
    let staged = reps
        .iter()
        .filter(|r| matches!(r.link, Some(Link::Staged { .. })))
        .count();
    match (peer, staged) {
        (0, 0) => ExchangeRoute::None,
        (_, 0) => ExchangeRoute::PeerToPeer,
        (0, _) => ExchangeRoute::HostMemory,
        _ => ExchangeRoute::Mixed,
    }
}

/// What the loader and the steps share.
struct Loader {
    /// Batches whose images are in their slots.
    ready: Cell<u64>,
    ready_signal: Notify,
    /// Batches whose slots were copied out (free again).
    freed: Cell<u64>,
    freed_signal: Notify,
    /// The steps stopped early (an error): the loader stops too, giving back what it holds.
    stopped: Cell<bool>,
    /// Each epoch's order of the images, as the loader shuffled it.
    orders: RefCell<Vec<Rc<Vec<u64>>>>,
    /// Per epoch: nanoseconds of reads.
    reads_ns: RefCell<Vec<f64>>,
    failed: RefCell<Option<GpuWorkloadError>>,
}

impl Loader {
    fn new(config: &TrainConfig) -> Loader {
        Loader {
            ready: Cell::new(0),
            ready_signal: Notify::new(),
            freed: Cell::new(0),
            freed_signal: Notify::new(),
            stopped: Cell::new(false),
            orders: RefCell::new(
                (0..config.epochs)
                    .map(|e| Rc::new(epoch_order(config.images, config.seed, e)))
                    .collect(),
            ),
            reads_ns: RefCell::new(vec![0.0; config.epochs as usize]),
            failed: RefCell::new(None),
        }
    }

    /// Epoch `e`'s order.
    fn order(&self, e: u64) -> Rc<Vec<u64>> {
        self.orders
            .borrow()
            .get(e as usize)
            .cloned()
            .unwrap_or_default()
    }
}

/// Stops the loader when the steps end, however they end.
struct StopLoader(Rc<Loader>);

impl Drop for StopLoader {
    fn drop(&mut self) {
        self.0.stopped.set(true);
        self.0.freed_signal.notify();
    }
}

/// Reads every batch of the run into the slots, two ahead at most.
async fn load(
    machine: Machine,
    os: HostOs,
    reader: Reader,
    config: TrainConfig,
    layout: Layout,
    slots: Vec<Vec<HostBuffer>>,
    shared: Rc<Loader>,
) {
    let steps = config.steps();
    let cpu = os.cpu().clone();
    let max_blocks = (reader.max_transfer() / layout.lba_size).max(1);
    for b in 0..config.epochs * steps {
        let order = shared.order(b / steps);
        while !shared.stopped.get() && b >= SLOTS as u64 && shared.freed.get() + (SLOTS as u64) <= b
        {
            shared.freed_signal.notified().await;
        }
        if shared.stopped.get() {
            return;
        }
        let slot = (b as usize) % SLOTS;
        // Every read of the batch: (lba, blocks, destination).
        let mut reads = Vec::new();
        for (r, bufs) in slots.iter().enumerate() {
            for (j, id) in ids_of(&order, &config, b, r).into_iter().enumerate() {
                let dest = bufs[slot].cpu.get() + j as u64 * layout.record();
                let mut done = 0;
                while done < layout.blocks {
                    let n = max_blocks.min(layout.blocks - done);
                    reads.push((
                        layout.lba(id) + done,
                        n as u32,
                        PhysAddr(dest + done * layout.lba_size),
                    ));
                    done += n;
                }
            }
        }
        let t0 = cpu.now();
        let reads = Rc::new(reads);
        let next = Rc::new(Cell::new(0usize));
        let workers = (0..usize::from(super::READS_IN_FLIGHT).min(reads.len()))
            .map(|w| {
                let (reader, reads, next, cpu) =
                    (reader.clone(), reads.clone(), next.clone(), cpu.clone());
                async move {
                    loop {
                        let i = next.get();
                        let Some(&(lba, blocks, buf)) = reads.get(i) else {
                            return Ok(());
                        };
                        next.set(i + 1);
                        reader
                            .read(&cpu, w as u64, lba, blocks, buf, layout.lba_size)
                            .await?;
                    }
                }
            })
            .collect();
        let outcomes: Vec<Result<(), GpuWorkloadError>> =
            smartio_workloads::booted::join_all(&machine, workers).await;
        if let Some(Err(e)) = outcomes.into_iter().find(Result::is_err) {
            *shared.failed.borrow_mut() = Some(e);
            shared.ready.set(u64::MAX);
            shared.ready_signal.notify();
            return;
        }
        if let Some(ns) = shared.reads_ns.borrow_mut().get_mut((b / steps) as usize) {
            *ns += ns_since(&cpu, t0);
        }
        shared.ready.set(b + 1);
        shared.ready_signal.notify();
    }
}

/// Waits for every replica's stream.
async fn sync_all(replicas: &[Replica<'_>]) -> Result<(), GpuWorkloadError> {
    for r in replicas {
        r.stream.synchronize().await?;
    }
    Ok(())
}

async fn train_on(
    bench: &Workbench,
    s: &Setup,
    reader: Reader,
    contexts: &[GpuContext],
) -> Result<TrainResult, GpuWorkloadError> {
    let config = &s.config;
    let reps = replicas(s, contexts).await?;
    let os = bench.os.clone();
    let kernels = Kernels {
        step: contexts[0].load_kernel(kernels::STEP, kernels::step()),
        reduce: contexts[0].load_kernel(kernels::REDUCE, kernels::reduce()),
        update: contexts[0].load_kernel(kernels::UPDATE, kernels::update()),
    };
    load_weights(&os, &reps).await?;
    let mut gpus = s.gpus.clone();
    for (i, r) in reps.iter().enumerate() {
        gpus[i].copy_path = path(&s.machine, r.ctx, r.slots[0].addr());
        if let Some(Link::Peer { recv, .. }) = r.link {
            gpus[i].exchange_path = path(&s.machine, r.ctx, recv);
        }
    }
    let loader = Rc::new(Loader::new(config));
    let _stop = StopLoader(loader.clone());
    s.machine.spawn(load(
        s.machine.clone(),
        os.clone(),
        reader,
        config.clone(),
        s.layout,
        reps.iter().map(|r| r.slots.clone()).collect(),
        loader.clone(),
    ));
    let mut run = Steps {
        s,
        reps: &reps,
        kernels,
        loader: &loader,
        cpu: os.cpu().clone(),
        epochs: vec![EpochTime::default(); config.epochs as usize],
        seed_sum: 0,
        verified: 0,
    };
    let total = config.epochs * config.steps();
    let mut phase = progress::begin("training", total, progress::Unit::Items("steps"));
    for b in 0..total {
        run.step(b).await?;
        phase.set(b + 1);
    }
    drop(phase);
    let Steps {
        mut epochs,
        seed_sum,
        verified,
        ..
    } = run;
    for (time, reads) in epochs.iter_mut().zip(loader.reads_ns.borrow().iter()) {
        time.reads_ns = *reads;
    }
    for time in &mut epochs {
        time.total_ns =
            time.io_wait_ns + time.copy_ns + time.compute_ns + time.exchange_ns + time.update_ns;
    }
    let updates = (total as u32).wrapping_mul(reps.len() as u32);
    let verified_weights = check_weights(s, &os, &reps, seed_sum, updates).await?;
    let reps_route = route(&reps);
    for r in reps {
        r.stream.destroy().await?;
    }
    Ok(result(
        s,
        gpus,
        epochs,
        reps_route,
        verified,
        verified_weights,
    ))
}

/// The training kernels, loaded.
#[derive(Clone, Copy)]
struct Kernels {
    step: KernelId,
    reduce: KernelId,
    update: KernelId,
}

/// Every replica starts from the same weights (untimed: the model is loaded before).
async fn load_weights(os: &HostOs, reps: &[Replica<'_>]) -> Result<(), GpuWorkloadError> {
    let words = GRADIENT_BYTES / 4;
    let w0: Vec<u8> = (0..words)
        .flat_map(|k| kernels::initial_weight(k).to_le_bytes())
        .collect();
    for r in reps {
        os.write_memory(r.readback.cpu, &w0)
            .map_err(host_memory("weights"))?;
        r.ctx
            .memcpy(r.weights.addr(), r.readback.addr(), GRADIENT_BYTES)
            .await?;
    }
    Ok(())
}

/// The training steps as they run: the replicas, what each epoch's phases took, and what
/// the replicas were checked to have trained on.
struct Steps<'a, 'r> {
    s: &'a Setup,
    reps: &'a [Replica<'r>],
    kernels: Kernels,
    loader: &'a Loader,
    cpu: Agent,
    epochs: Vec<EpochTime>,
    /// The sum of every gradient's seed: what the weights end up short of.
    seed_sum: u32,
    /// Images the replicas were checked to have trained on.
    verified: u64,
}

impl Steps<'_, '_> {
    /// Step `b`: wait for its batch, copy each replica's share in, compute and check the
    /// replicas' results, exchange the gradients, update the weights; each phase timed.
    async fn step(&mut self, b: u64) -> Result<(), GpuWorkloadError> {
        let config = &self.s.config;
        let steps = config.steps();
        let e = (b / steps) as usize;
        let order = self.loader.order(b / steps);
        let slot = (b as usize) % SLOTS;
        let t = self.cpu.now();
        while self.loader.ready.get() <= b {
            self.loader.ready_signal.notified().await;
        }
        if let Some(err) = self.loader.failed.borrow_mut().take() {
            return Err(err);
        }
        self.epochs[e].io_wait_ns += ns_since(&self.cpu, t);

        let t = self.cpu.now();
        self.copy_in(b, slot).await?;
        self.epochs[e].copy_ns += ns_since(&self.cpu, t);

        let t = self.cpu.now();
        self.compute(b, &order).await?;
        self.epochs[e].compute_ns += ns_since(&self.cpu, t);

        let t = self.cpu.now();
        if self.reps.len() > 1 {
            all_reduce(self.reps, self.kernels.reduce).await?;
        }
        self.epochs[e].exchange_ns += ns_since(&self.cpu, t);

        let t = self.cpu.now();
        for r in self.reps {
            let ps = elementwise_ps(GRADIENT_BYTES, r.bandwidth);
            let params =
                kernels::elementwise_params(r.weights.offset, r.grad.offset, GRADIENT_BYTES, ps);
            r.stream.launch(self.kernels.update, 1, &params).await?;
        }
        sync_all(self.reps).await?;
        self.epochs[e].update_ns += ns_since(&self.cpu, t);
        Ok(())
    }

    /// Copies each replica's share of step `b`'s batch from loader slot `slot` into its
    /// device memory, then frees the slot.
    async fn copy_in(&self, b: u64, slot: usize) -> Result<(), GpuWorkloadError> {
        let sub = self.s.config.sub_batch();
        for r in self.reps {
            r.stream
                .memcpy_async(
                    r.images.addr(),
                    r.slots[slot].addr(),
                    sub * self.s.layout.record(),
                )
                .await?;
        }
        sync_all(self.reps).await?;
        self.loader.freed.set(b + 1);
        self.loader.freed_signal.notify();
        Ok(())
    }

    /// Runs step `b`'s kernel on each replica and checks what it trained on against the
    /// images the loader read (`order`: the epoch's order).
    async fn compute(&mut self, b: u64, order: &[u64]) -> Result<(), GpuWorkloadError> {
        let s = self.s;
        let sub = s.config.sub_batch();
        for (i, r) in self.reps.iter().enumerate() {
            let params = StepParams {
                images: r.images.offset,
                count: sub,
                record: s.layout.record(),
                image: super::IMAGE_BYTES,
                compute_ps: r.compute_ps,
                gradient: r.grad.offset,
                gradient_bytes: GRADIENT_BYTES,
                result: r.result.offset,
                step: b,
                replica: i as u64,
            };
            r.stream
                .launch(self.kernels.step, 1, &params.encode())
                .await?;
            r.stream
                .memcpy_async(
                    r.readback.addr(),
                    r.result.addr(),
                    kernels::result_bytes(sub),
                )
                .await?;
        }
        sync_all(self.reps).await?;
        for (i, r) in self.reps.iter().enumerate() {
            let mut got = vec![0u8; kernels::result_bytes(sub) as usize];
            r.ctx.read_host(&r.readback, 0, &mut got).await?;
            let want = ids_of(order, &s.config, b, i);
            let word = |j: usize| smartio_workloads::gpu::get_u64(&got, 8 * j).unwrap_or(u64::MAX);
            let (wrong, first_wrong) = (word(0), word(1));
            let found: Vec<u64> = (0..sub as usize).map(|j| word(j + 2)).collect();
            if wrong != 0 {
                return Err(Mismatch::Damaged {
                    step: b,
                    gpu: s.gpus[i].name.clone(),
                    wrong,
                    first: first_wrong,
                }
                .into());
            }
            if found != want {
                return Err(Mismatch::Trained {
                    step: b,
                    gpu: s.gpus[i].name.clone(),
                    found,
                    want,
                }
                .into());
            }
            let id_sum = want.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            self.seed_sum = self
                .seed_sum
                .wrapping_add(kernels::gradient_seed(b, i as u64, id_sum));
            self.verified += sub;
        }
        Ok(())
    }
}

/// Every replica's weights: w0 - (sum of seeds) - (steps x GPUs) x k, word by word; the
/// bytes checked.
async fn check_weights(
    s: &Setup,
    os: &HostOs,
    reps: &[Replica<'_>],
    seed_sum: u32,
    updates: u32,
) -> Result<u64, GpuWorkloadError> {
    let mut verified_weights = 0u64;
    for (i, r) in reps.iter().enumerate() {
        r.ctx
            .memcpy(r.readback.addr(), r.weights.addr(), GRADIENT_BYTES)
            .await?;
        let mut got = vec![0u8; GRADIENT_BYTES as usize];
        os.read_memory(r.readback.cpu, &mut got)
            .map_err(host_memory("weights"))?;
        for (k, w) in got.chunks_exact(4).enumerate() {
            let want = kernels::initial_weight(k as u64)
                .wrapping_sub(seed_sum)
                .wrapping_sub(updates.wrapping_mul(k as u32));
            if u32::from_le_bytes([w[0], w[1], w[2], w[3]]) != want {
                return Err(Mismatch::Weight {
                    gpu: s.gpus[i].name.clone(),
                    index: k,
                }
                .into());
            }
        }
        verified_weights += GRADIENT_BYTES;
    }
    Ok(verified_weights)
}

/// What the training found.
fn result(
    s: &Setup,
    gpus: Vec<TrainGpu>,
    epochs: Vec<EpochTime>,
    exchange: ExchangeRoute,
    verified: u64,
    verified_weights: u64,
) -> TrainResult {
    let config = &s.config;
    let mean = epochs.iter().map(|e| e.total_ns).sum::<f64>() / epochs.len().max(1) as f64;
    TrainResult {
        scenario: s.scenario.clone(),
        host: config.host.clone(),
        nvme: config.nvme.clone(),
        nvme_borrowed: config.nvme.contains(':') && s.client.is_none(),
        storage: match &config.storage {
            super::Storage::Native => "native",
            super::Storage::Client { .. } => "nvme-client",
        }
        .to_string(),
        manager: match &config.storage {
            super::Storage::Native => None,
            super::Storage::Client { manager } => Some(manager.clone()),
        },
        gpus,
        images: config.images,
        batch: config.batch,
        steps: config.steps(),
        record_bytes: s.layout.record(),
        gradient_bytes: GRADIENT_BYTES,
        exchange,
        epochs,
        mean_epoch_ns: mean,
        verified_images: verified,
        verified_weight_bytes: verified_weights,
    }
}

/// Sums the replicas' gradients in place by a ring: reduce-scatter, then all-gather.
async fn all_reduce(reps: &[Replica<'_>], reduce_k: KernelId) -> Result<(), GpuWorkloadError> {
    let g = reps.len();
    for round in 0..g - 1 {
        // Replica i sends chunk (i - round) to i + 1, which adds it into its own.
        let sends: Vec<(usize, u64, u64)> = (0..g)
            .map(|i| {
                let (off, len) = chunk((i + g - round) % g, g);
                (i, off, len)
            })
            .collect();
        pass_on(reps, &sends, Dest::Receive).await?;
        for (i, off, len) in &sends {
            let to = &reps[(i + 1) % g];
            let ps = elementwise_ps(*len, to.bandwidth);
            let params =
                kernels::elementwise_params(to.grad.offset + off, to.recv.offset, *len, ps);
            to.stream.launch(reduce_k, 1, &params).await?;
        }
        sync_all(reps).await?;
    }
    for round in 0..g - 1 {
        // Replica i holds the sum of chunk (i + 1 - round) and hands it to i + 1.
        let sends: Vec<(usize, u64, u64)> = (0..g)
            .map(|i| {
                let (off, len) = chunk((i + 1 + g - round) % g, g);
                (i, off, len)
            })
            .collect();
        pass_on(reps, &sends, Dest::Gradient).await?;
    }
    Ok(())
}

/// Where a chunk lands in the next replica.
#[derive(Clone, Copy)]
enum Dest {
    /// Its receive buffer, to be added.
    Receive,
    /// Its gradient at the chunk's own offset, replacing it.
    Gradient,
}

/// Each `(i, offset, len)`: replica `i` sends `len` bytes of its gradient at `offset` to the
/// next replica, over its link; returns once all arrived.
async fn pass_on(
    reps: &[Replica<'_>],
    sends: &[(usize, u64, u64)],
    dest: Dest,
) -> Result<(), GpuWorkloadError> {
    let g = reps.len();
    let landing = |recv: GpuAddr, grad: GpuAddr, off: u64| match dest {
        Dest::Receive => recv,
        Dest::Gradient => grad.offset(off),
    };
    let mut staged = Vec::new();
    for &(i, off, len) in sends {
        let from = &reps[i];
        match from.link {
            Some(Link::Peer { recv, grad }) => {
                from.stream
                    .memcpy_async(landing(recv, grad, off), from.grad.at(off), len)
                    .await?
            }
            Some(Link::Staged { out, inc }) => {
                from.stream
                    .memcpy_async(out.addr(), from.grad.at(off), len)
                    .await?;
                staged.push((i, off, len, out, inc));
            }
            None => {}
        }
    }
    sync_all(reps).await?;
    if staged.is_empty() {
        return Ok(());
    }
    for &(i, off, len, out, inc) in &staged {
        let to = &reps[(i + 1) % g];
        let mut bytes = vec![0u8; len as usize];
        reps[i].ctx.read_host(&out, 0, &mut bytes).await?;
        to.ctx.write_host(&inc, 0, &bytes).await?;
        to.stream
            .memcpy_async(
                landing(to.recv.addr(), to.grad.addr(), off),
                inc.addr(),
                len,
            )
            .await?;
    }
    sync_all(reps).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_chunks_cover_the_gradient_once() {
        for g in 1..=8 {
            let mut next = 0;
            for c in 0..g {
                let (off, len) = chunk(c, g);
                assert_eq!(off, next, "{g} GPUs, chunk {c}");
                next = off + len;
            }
            assert_eq!(next, GRADIENT_BYTES);
        }
    }

    #[test]
    fn an_elementwise_pass_costs_three_buffers_of_memory_traffic() {
        assert_eq!(elementwise_ps(1_000_000, 3e11), 10_000_000);
    }
}
