//! The training program as it runs on the emulated host: open the GPUs, lay out their
//! buffers, start the loader, run the steps, check the weights, give everything back.

use super::dataset::{epoch_order, Layout};
use super::kernels::{self, StepParams};
use super::{EpochTime, ExchangeRoute, TrainConfig, TrainGpu, TrainResult, GRADIENT_BYTES};
use crate::attach::Workbench;
use crate::fio::FioError;
use crate::gpu::{host_memory, open, path, GpuWorkloadError};
use crate::progress;
use smartio_devices::gpu::kernel::KernelLibrary;
use smartio_devices::gpu::spec::{GpuAddr, KernelId};
use smartio_drivers::gpu::{DeviceBuffer, GpuContext, HostBuffer, RuntimeCosts, Stream};
use smartio_drivers::nvme::{BlockOp, NvmeDevice};
use smartio_drivers::nvme_dist::{Client, ClientQueue, Manager, SqPlacement};
use smartio_host::HostOs;
use smartio_machine::{Agent, Machine};
use smartio_platform::{BusAddr, Clock, Notify, PhysAddr, Port, SimTime};
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
    /// The manager's host, for a client of the distributed driver.
    pub manager: Option<HostOs>,
    /// The NVMe's id, for a client of the distributed driver.
    pub fdid: Option<smartio_smartio::Fdid>,
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
                .map_err(|e| GpuWorkloadError::Storage(FioError::from(e))),
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
                    .map_err(|e| GpuWorkloadError::Verify(format!("copying a record: {e}")))?;
                cpu.write(BusAddr(dest.get()), &bytes)
                    .await
                    .map_err(|e| GpuWorkloadError::Verify(format!("copying a record: {e}")))
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
    /// The next GPU's `recv` and `grad` as this GPU's copy engine addresses them, when it
    /// reaches them peer-to-peer.
    next: Option<(GpuAddr, GpuAddr)>,
    /// Pinned staging for chunks through host memory: what this GPU sends, and what its
    /// predecessor sent it.
    staging: Option<(HostBuffer, HostBuffer)>,
    compute_ps: u64,
    bandwidth: f64,
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
    let (reader, first_gpu) = match (&s.manager, s.fdid) {
        (Some(manager_os), Some(fdid)) => {
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
        _ => (Reader::Native(crate::fio::bind_nvme(bench).await?.0), 1),
    };
    let mut contexts = Vec::new();
    for i in 0..s.gpus.len() {
        match open(&s.kernels, s.costs, bench, first_gpu + i).await {
            Ok(ctx) => contexts.push(ctx),
            Err(e) => {
                for ctx in contexts {
                    let _ = ctx.close().await;
                }
                return Err(e);
            }
        }
    }
    let result = train_on(bench, &s, reader.clone(), &contexts).await;
    let mut closed = Ok(());
    for ctx in contexts {
        if let Err(e) = ctx.close().await {
            closed = closed.and(Err(e));
        }
    }
    let left = match reader {
        Reader::Native(_) => Ok(()),
        Reader::Client { client, queue, .. } => {
            drop(queue);
            match Rc::try_unwrap(client) {
                Ok(client) => client.leave().await.map_err(GpuWorkloadError::from),
                Err(_) => Err(GpuWorkloadError::Verify(
                    "the loader still holds the client at the end".into(),
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
) -> Result<(Vec<Replica<'a>>, ExchangeRoute), GpuWorkloadError> {
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
            next: None,
            staging: None,
            compute_ps: (s.gpus[i].forward_image_ns * 1e3).round() as u64,
            bandwidth: s.bandwidth[i],
        });
    }
    let g = out.len();
    if g == 1 {
        return Ok((out, ExchangeRoute::None));
    }
    let mut peers = Vec::new();
    for i in 0..g {
        let next = &out[(i + 1) % g];
        let reach = out[i]
            .ctx
            .enable_peer_access(next.ctx)
            .and_then(|p| Ok((p.addr(&next.recv)?, p.addr(&next.grad)?)));
        match reach {
            Ok(a) => peers.push(a),
            Err(_) => break,
        }
    }
    if peers.len() == g {
        for (r, a) in out.iter_mut().zip(peers) {
            r.next = Some(a);
        }
        return Ok((out, ExchangeRoute::PeerToPeer));
    }
    for r in &mut out {
        let len = chunk(0, g).1 + 4;
        r.staging = Some((r.ctx.host_alloc(len)?, r.ctx.host_alloc(len)?));
    }
    Ok((out, ExchangeRoute::HostMemory))
}

/// What the loader and the steps share.
#[derive(Default)]
struct Loader {
    /// Batches whose images are in their slots.
    ready: Cell<u64>,
    ready_signal: Notify,
    /// Batches whose slots were copied out (free again).
    freed: Cell<u64>,
    freed_signal: Notify,
    /// Per epoch: nanoseconds of reads.
    reads_ns: RefCell<Vec<f64>>,
    failed: RefCell<Option<GpuWorkloadError>>,
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
    let mut order = Vec::new();
    for b in 0..config.epochs * steps {
        if b % steps == 0 {
            order = epoch_order(config.images, config.seed, b / steps);
        }
        while b >= SLOTS as u64 && shared.freed.get() + (SLOTS as u64) <= b {
            shared.freed_signal.notified().await;
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
            crate::booted::join_all(&machine, workers).await;
        if let Some(Err(e)) = outcomes.into_iter().find(Result::is_err) {
            *shared.failed.borrow_mut() = Some(e);
            shared.ready.set(u64::MAX);
            shared.ready_signal.notify();
            return;
        }
        let epoch = (b / steps) as usize;
        {
            let mut reads_ns = shared.reads_ns.borrow_mut();
            if reads_ns.len() <= epoch {
                reads_ns.resize(epoch + 1, 0.0);
            }
            reads_ns[epoch] += ns_since(&cpu, t0);
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
    let (reps, route) = replicas(s, contexts).await?;
    let g = reps.len();
    let os = bench.os.clone();
    let cpu = os.cpu().clone();
    let step_k = contexts[0].load_kernel(kernels::STEP, kernels::step());
    let reduce_k = contexts[0].load_kernel(kernels::REDUCE, kernels::reduce());
    let update_k = contexts[0].load_kernel(kernels::UPDATE, kernels::update());
    // Every replica starts from the same weights (untimed: the model is loaded before).
    let words = GRADIENT_BYTES / 4;
    let w0: Vec<u8> = (0..words)
        .flat_map(|k| kernels::initial_weight(k).to_le_bytes())
        .collect();
    for r in &reps {
        os.write_memory(r.readback.cpu, &w0)
            .map_err(host_memory("weights"))?;
        r.ctx
            .memcpy(r.weights.addr(), r.readback.addr(), GRADIENT_BYTES)
            .await?;
    }
    let mut gpus = s.gpus.clone();
    for (i, r) in reps.iter().enumerate() {
        gpus[i].copy_path = path(&s.machine, r.ctx, r.slots[0].addr());
        if let Some((next_recv, _)) = r.next {
            gpus[i].exchange_path = path(&s.machine, r.ctx, next_recv);
        }
    }
    let loader = Rc::new(Loader::default());
    s.machine.spawn(load(
        s.machine.clone(),
        os.clone(),
        reader,
        config.clone(),
        s.layout,
        reps.iter().map(|r| r.slots.clone()).collect(),
        loader.clone(),
    ));
    let steps = config.steps();
    let total = config.epochs * steps;
    let sub = config.sub_batch();
    let mut phase = progress::begin("training", total, progress::Unit::Items("steps"));
    let mut epochs = vec![EpochTime::default(); config.epochs as usize];
    let mut seed_sum = 0u32;
    let mut verified = 0u64;
    let mut order = Vec::new();
    for b in 0..total {
        let e = (b / steps) as usize;
        if b % steps == 0 {
            order = epoch_order(config.images, config.seed, b / steps);
        }
        let slot = (b as usize) % SLOTS;
        let t = cpu.now();
        while loader.ready.get() <= b {
            loader.ready_signal.notified().await;
        }
        if let Some(err) = loader.failed.borrow_mut().take() {
            return Err(err);
        }
        epochs[e].io_wait_ns += ns_since(&cpu, t);

        let t = cpu.now();
        for r in &reps {
            r.stream
                .memcpy_async(
                    r.images.addr(),
                    r.slots[slot].addr(),
                    sub * s.layout.record(),
                )
                .await?;
        }
        sync_all(&reps).await?;
        loader.freed.set(b + 1);
        loader.freed_signal.notify();
        epochs[e].copy_ns += ns_since(&cpu, t);

        let t = cpu.now();
        for (i, r) in reps.iter().enumerate() {
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
            r.stream.launch(step_k, 1, &params.encode()).await?;
            r.stream
                .memcpy_async(
                    r.readback.addr(),
                    r.result.addr(),
                    kernels::result_bytes(sub),
                )
                .await?;
        }
        sync_all(&reps).await?;
        for (i, r) in reps.iter().enumerate() {
            let mut got = vec![0u8; kernels::result_bytes(sub) as usize];
            r.ctx.read_host(&r.readback, 0, &mut got).await?;
            let want = ids_of(&order, config, b, i);
            let wrong = crate::gpu::get_u64(&got, 0).unwrap_or(u64::MAX);
            let found: Vec<u64> = (0..sub as usize)
                .map(|j| crate::gpu::get_u64(&got, 8 * (j + 1)).unwrap_or(u64::MAX))
                .collect();
            if wrong != 0 || found != want {
                return Err(GpuWorkloadError::Verify(format!(
                    "step {b}: {} trained on {found:?} with {wrong} damaged records; the \
                     loader read {want:?}",
                    s.gpus[i].name
                )));
            }
            let id_sum = want.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            seed_sum = seed_sum.wrapping_add(kernels::gradient_seed(b, i as u64, id_sum));
            verified += sub;
        }
        epochs[e].compute_ns += ns_since(&cpu, t);

        let t = cpu.now();
        if g > 1 {
            all_reduce(&reps, reduce_k).await?;
        }
        epochs[e].exchange_ns += ns_since(&cpu, t);

        let t = cpu.now();
        for r in &reps {
            let ps = elementwise_ps(GRADIENT_BYTES, r.bandwidth);
            let params =
                kernels::elementwise_params(r.weights.offset, r.grad.offset, GRADIENT_BYTES, ps);
            r.stream.launch(update_k, 1, &params).await?;
        }
        sync_all(&reps).await?;
        epochs[e].update_ns += ns_since(&cpu, t);
        phase.set(b + 1);
    }
    drop(phase);
    for (e, time) in epochs.iter_mut().enumerate() {
        time.reads_ns = loader.reads_ns.borrow().get(e).copied().unwrap_or(0.0);
        time.total_ns =
            time.io_wait_ns + time.copy_ns + time.compute_ns + time.exchange_ns + time.update_ns;
    }
    // Every replica's weights: w0 - (sum of seeds) - (steps x GPUs) x k, word by word.
    let updates = (total as u32).wrapping_mul(g as u32);
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
                return Err(GpuWorkloadError::Verify(format!(
                    "{}: weight {k} is not what the gradients sum to",
                    s.gpus[i].name
                )));
            }
        }
        verified_weights += GRADIENT_BYTES;
    }
    for r in reps {
        r.stream.destroy().await?;
    }
    let mean = epochs.iter().map(|e| e.total_ns).sum::<f64>() / epochs.len().max(1) as f64;
    Ok(TrainResult {
        scenario: s.scenario.clone(),
        host: config.host.clone(),
        nvme: config.nvme.clone(),
        nvme_borrowed: config.nvme.contains(':') && s.manager.is_none(),
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
        steps,
        record_bytes: s.layout.record(),
        gradient_bytes: GRADIENT_BYTES,
        exchange: route,
        epochs,
        mean_epoch_ns: mean,
        verified_images: verified,
        verified_weight_bytes: verified_weights,
    })
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
/// next replica; returns once all arrived.
async fn pass_on(
    reps: &[Replica<'_>],
    sends: &[(usize, u64, u64)],
    dest: Dest,
) -> Result<(), GpuWorkloadError> {
    let g = reps.len();
    let landing = |to: &Replica<'_>, off: u64| match dest {
        Dest::Receive => to.recv.addr(),
        Dest::Gradient => to.grad.at(off),
    };
    if reps.iter().all(|r| r.next.is_some()) {
        for &(i, off, len) in sends {
            let (next_recv, next_grad) = reps[i]
                .next
                .unwrap_or((GpuAddr::Device(0), GpuAddr::Device(0)));
            let dst = match dest {
                Dest::Receive => next_recv,
                Dest::Gradient => offset(next_grad, off),
            };
            reps[i]
                .stream
                .memcpy_async(dst, reps[i].grad.at(off), len)
                .await?;
        }
        return sync_all(reps).await;
    }
    // Through host memory: out to each sender's outgoing staging, across by the CPU into the
    // receiver's incoming staging, in from there.
    let staging = |r: &Replica<'_>| {
        r.staging.ok_or_else(|| {
            GpuWorkloadError::Verify("no staging buffer for a host-memory exchange".into())
        })
    };
    for &(i, off, len) in sends {
        reps[i]
            .stream
            .memcpy_async(staging(&reps[i])?.0.addr(), reps[i].grad.at(off), len)
            .await?;
    }
    sync_all(reps).await?;
    for &(i, _, len) in sends {
        let to = &reps[(i + 1) % g];
        let mut bytes = vec![0u8; len as usize];
        reps[i]
            .ctx
            .read_host(&staging(&reps[i])?.0, 0, &mut bytes)
            .await?;
        to.ctx.write_host(&staging(to)?.1, 0, &bytes).await?;
    }
    for &(i, off, len) in sends {
        let to = &reps[(i + 1) % g];
        to.stream
            .memcpy_async(landing(to, off), staging(to)?.1.addr(), len)
            .await?;
    }
    sync_all(reps).await
}

/// `addr` moved by `by` bytes.
fn offset(addr: GpuAddr, by: u64) -> GpuAddr {
    match addr {
        GpuAddr::Device(o) => GpuAddr::Device(o + by),
        GpuAddr::Bus(a) => GpuAddr::Bus(a.offset(by)),
    }
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
