//! GPU-initiated NVMe reads (Paper V §6.4, Fig. 18): a program on host H opens a GPU of H,
//! joins the distributed NVMe driver (manager on the NVMe's host), places a queue pair and
//! its data buffers in the GPU's memory, and launches a kernel that reads `bytes` of the
//! namespace in `chunk`-byte commands, `queue_depth` at a time, checking every byte in GPU
//! memory — no CPU in the data path ([`smartio_drivers::nvme_gpu`]). The same read is then
//! driven by H's CPU through an ordinary client queue pair at the same depth and chunk, for
//! comparison.
//!
//! Before the measured part the namespace is filled with a known pattern, untimed
//! ([`smartio_devices::nvme::NvmeController::namespaces`]). The GPU's time is taken by GPU
//! events around the launch; the CPU's from its first submission to its last completion.

use super::{gpu_endpoint, open, path, BadParameter, ChunkFailure, GpuWorkloadError, Mismatch};
use crate::attach::{AttachError, Workbench};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_devices::gpu::spec::{GpuAddr, MAX_THREADS};
use smartio_devices::nvme::NvmeController;
use smartio_drivers::gpu::{GpuContext, RuntimeCosts};
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, Manager, SqPlacement};
use smartio_drivers::nvme_gpu::{ctl, pattern, read_kernel, GpuQueue, KERNEL_NAME};
use smartio_fabric::EndpointId;
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_platform::{Clock, Notify, PhysAddr};
use smartio_smartio::SmartIo;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Most bytes one run reads (the CLI's limit too).
pub const MAX_BYTES: u64 = 64 << 30;

/// What to read.
#[derive(Debug, Clone)]
pub struct GpuNvmeConfig {
    /// Host of the program (its CPU sets up; its GPU reads).
    pub host: String,
    /// The GPU: a device of `host` (`gpu2`).
    pub gpu: String,
    /// The NVMe, `lender:device`.
    pub device: String,
    /// Host running the driver's manager.
    pub manager: String,
    /// Bytes to read (a multiple of `chunk`).
    pub bytes: u64,
    /// Bytes per command.
    pub chunk: u64,
    /// Commands in flight (GPU worker threads, CPU tasks).
    pub queue_depth: u32,
    /// Namespace.
    pub nsid: u32,
    /// Seed of the namespace's pattern.
    pub seed: u64,
}

impl GpuNvmeConfig {
    /// 1 GiB in 64 KiB commands at QD 32 on `cluster-switch`: the program on `lender2`
    /// with its `gpu2`, the NVMe `lender:nvme0` and its manager on `lender`.
    pub fn remote_default() -> GpuNvmeConfig {
        GpuNvmeConfig {
            host: "lender2".into(),
            gpu: "gpu2".into(),
            device: "lender:nvme0".into(),
            manager: "lender".into(),
            bytes: 1 << 30,
            chunk: 64 << 10,
            queue_depth: 32,
            nsid: 1,
            seed: 1,
        }
    }
}

/// One way of driving the read, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrivenRead {
    /// Virtual time of the read in nanoseconds (GPU events, or the CPU's clock).
    pub elapsed_ns: f64,
    /// MiB/s over that time.
    pub mib_s: f64,
    /// Bytes read and found equal to the pattern.
    pub verified_bytes: u64,
    /// Chunks that failed (an error status or a differing byte): 0 when all went well.
    pub errors: u64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuNvmeResult {
    /// Scenario name.
    pub scenario: String,
    /// Host of the program.
    pub host: String,
    /// The GPU, as given.
    pub gpu: String,
    /// The NVMe, as given.
    pub device: String,
    /// Host of the manager.
    pub manager: String,
    /// Bytes read (each way).
    pub bytes: u64,
    /// Bytes per command.
    pub chunk: u64,
    /// Commands in flight.
    pub queue_depth: u32,
    /// Entries of each queue.
    pub entries: u16,
    /// Commands per read.
    pub commands: u64,
    /// Driven by the GPU (queues and data in GPU memory).
    pub gpu_driven: DrivenRead,
    /// Driven by the host's CPU (queues placed by hints, data in its RAM).
    pub cpu_driven: DrivenRead,
    /// Nodes the GPU's SQ doorbell store passes, in order.
    pub doorbell_path: Vec<String>,
}

/// Checks what can be checked before anything runs.
fn check(config: &GpuNvmeConfig) -> Result<(), GpuWorkloadError> {
    let max_qd = MAX_THREADS - 1;
    if config.queue_depth == 0 || config.queue_depth > max_qd {
        return Err(BadParameter::QueueDepth {
            qd: config.queue_depth,
            max: max_qd,
            threads: MAX_THREADS,
        }
        .into());
    }
    if config.chunk == 0 || config.bytes == 0 || !config.bytes.is_multiple_of(config.chunk) {
        return Err(BadParameter::Chunks {
            bytes: config.bytes,
            chunk: config.chunk,
        }
        .into());
    }
    if config.bytes > MAX_BYTES {
        return Err(BadParameter::Bytes {
            bytes: config.bytes,
            max: MAX_BYTES,
        }
        .into());
    }
    if config.gpu.contains(':') {
        return Err(BadParameter::LentGpu {
            gpu: config.gpu.clone(),
            host: config.host.clone(),
        }
        .into());
    }
    Ok(())
}

/// The fabric endpoint of `lender:device`.
fn endpoint_of(machine: &Machine, qualified: &str) -> Option<EndpointId> {
    let (host, device) = qualified.split_once(':')?;
    let f = machine.fabric();
    f.endpoints()
        .iter()
        .position(|e| e.name == device && f.host(e.host).name == host)
        .map(|i| EndpointId(i as u32))
}

/// Runs the GPU-driven read, then the CPU-driven one, on `cluster` (which it leaves at a
/// later virtual time).
pub fn gpu_nvme_read(
    cluster: &Cluster,
    config: &GpuNvmeConfig,
) -> Result<GpuNvmeResult, GpuWorkloadError> {
    check(config)?;
    let bench =
        Workbench::with_devices(cluster, &config.host, &[&config.gpu]).map_err(|e| match e {
            AttachError::Host(source) => GpuWorkloadError::from(BadParameter::NotHostGpu {
                gpu: config.gpu.clone(),
                host: config.host.clone(),
                source: Box::new(source),
            }),
            other => GpuWorkloadError::from(other),
        })?;
    gpu_endpoint(cluster, &bench, &config.gpu)?;
    let fdid = bench
        .smartio
        .find(&config.device)
        .map_err(AttachError::from)?;
    let nvme = endpoint_of(&cluster.machine, &config.device)
        .and_then(|ep| cluster.nvme(ep))
        .ok_or_else(|| BadParameter::NotNvme {
            device: config.device.clone(),
        })?;
    let lba_size = check_namespace(config, &nvme)?;
    fill(config, &nvme)?;
    let manager_os = bench.host(&config.manager)?;
    let kernels = cluster.gpu_kernels().clone();
    let costs = RuntimeCosts::from_calibration(&cluster.calibration.gpu_runtime);
    let config = config.clone();
    let machine = cluster.machine.clone();
    crate::booted::run_workload(&cluster.machine, async move {
        let run = async {
            let smartio = bench.smartio.clone();
            let manager = Manager::start(&smartio, &manager_os, fdid).await?;
            let entries = queue_entries(&config, &manager)?;
            let data = u64::from(config.queue_depth) * config.chunk;
            let client = Rc::new(Client::connect(&smartio, &bench.os, fdid, &manager, data).await?);
            let gpu = open(&kernels, costs, &bench, 0).await?;
            let driven = gpu_read(
                &machine, &smartio, &client, &gpu, &config, entries, lba_size,
            )
            .await;
            let closed = gpu.close().await;
            let (gpu_driven, doorbell_path) = driven?;
            closed?;
            let cpu_driven =
                cpu_read(&machine, &client, &bench.os, &config, entries, lba_size).await?;
            let client = Rc::try_unwrap(client).map_err(|_| {
                GpuWorkloadError::Internal("the CPU-driven read's tasks still hold the client")
            })?;
            client.leave().await?;
            Ok(GpuNvmeResult {
                scenario: machine.fabric().name.clone(),
                host: config.host.clone(),
                gpu: config.gpu.clone(),
                device: config.device.clone(),
                manager: config.manager.clone(),
                bytes: config.bytes,
                chunk: config.chunk,
                queue_depth: config.queue_depth,
                entries,
                commands: config.bytes / config.chunk,
                gpu_driven,
                cpu_driven,
                doorbell_path,
            })
        };
        bench.detach_after(run).await
    })
}

/// Checks that `config`'s chunk is whole blocks of the controller and its bytes fit in the
/// namespace it names; the block size.
fn check_namespace(config: &GpuNvmeConfig, nvme: &NvmeController) -> Result<u64, GpuWorkloadError> {
    let lba_size = u64::from(nvme.config().lba_size);
    let capacity = nvme.namespaces().capacity();
    if !config.chunk.is_multiple_of(lba_size) {
        return Err(BadParameter::ChunkBlocks {
            chunk: config.chunk,
            lba: lba_size,
        }
        .into());
    }
    if config.nsid == 0 || config.nsid > nvme.namespaces().count() || config.bytes > capacity {
        return Err(BadParameter::Namespace {
            bytes: config.bytes,
            nsid: config.nsid,
            device: config.device.clone(),
            namespaces: nvme.namespaces().count(),
            capacity,
        }
        .into());
    }
    Ok(lba_size)
}

/// Set-up, untimed: the namespace holds the pattern.
fn fill(config: &GpuNvmeConfig, nvme: &NvmeController) -> Result<(), GpuWorkloadError> {
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < config.bytes {
        let n = (config.bytes - at).min(buf.len() as u64) as usize;
        pattern(config.seed, at, &mut buf[..n]);
        nvme.namespaces()
            .write(config.nsid, at, &buf[..n])
            .map_err(BadParameter::Fill)?;
        at += n as u64;
    }
    Ok(())
}

/// The entries of each queue: twice the queue depth, as the manager allows; refused when a
/// chunk is over the controller's largest transfer or the queue cannot hold the depth.
fn queue_entries(config: &GpuNvmeConfig, manager: &Manager) -> Result<u16, GpuWorkloadError> {
    if config.chunk > manager.max_transfer() {
        return Err(BadParameter::ChunkOverMdts {
            chunk: config.chunk,
            max: manager.max_transfer(),
        }
        .into());
    }
    let max_entries = manager.max_entries.min(u32::from(u16::MAX));
    let entries = (2 * config.queue_depth).min(max_entries);
    if config.queue_depth >= entries {
        return Err(BadParameter::QueueTooSmall {
            qd: config.queue_depth,
            most: max_entries - 1,
            entries: max_entries,
        }
        .into());
    }
    Ok(entries as u16)
}

fn mib_s(bytes: u64, ns: f64) -> f64 {
    if ns > 0.0 {
        bytes as f64 / (1 << 20) as f64 / (ns * 1e-9)
    } else {
        0.0
    }
}

/// The GPU-driven read: queues in GPU memory, one launch.
async fn gpu_read(
    machine: &Machine,
    smartio: &SmartIo,
    client: &Client,
    gpu: &GpuContext,
    config: &GpuNvmeConfig,
    entries: u16,
    lba_size: u64,
) -> Result<(DrivenRead, Vec<String>), GpuWorkloadError> {
    let q = GpuQueue::create(smartio, client, gpu, &config.gpu, entries, config.chunk).await?;
    let l = q.layout;
    // The control page, slot words and CQ start zeroed (a cudaMemset).
    let zero = gpu.host_alloc(l.zeroed_len())?;
    gpu.memcpy(GpuAddr::Device(l.base), zero.addr(), l.zeroed_len())
        .await?;
    gpu.host_free(zero)?;
    let params = q.read_params(
        client,
        config.bytes / config.chunk,
        config.nsid,
        0,
        lba_size,
        config.seed,
        config.queue_depth,
    );
    let kernel = gpu.load_kernel(KERNEL_NAME, read_kernel());
    let stream = gpu.create_stream().await?;
    let (start, end) = (gpu.create_event()?, gpu.create_event()?);
    stream.record(&start).await?;
    stream
        .launch(kernel, config.queue_depth + 1, &params.encode())
        .await?;
    stream.record(&end).await?;
    stream.synchronize().await?;
    let elapsed = gpu.elapsed(&start, &end).await?;
    stream.destroy().await?;
    // The kernel's counters, read back (a cudaMemcpy of the control page).
    let back = gpu.host_alloc(64)?;
    gpu.memcpy(back.addr(), GpuAddr::Device(l.base), 64).await?;
    let mut words = [0u8; 64];
    gpu.read_host(&back, 0, &mut words).await?;
    gpu.host_free(back)?;
    let word = |at: u64| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&words[at as usize..at as usize + 8]);
        u64::from_le_bytes(w)
    };
    let doorbell_path = path(machine, gpu, GpuAddr::Bus(q.sq_doorbell(client)));
    q.destroy(smartio, client, gpu).await?;
    let ns = elapsed.as_ps() as f64 / 1e3;
    let errors = word(ctl::ERRORS);
    if errors > 0 || word(ctl::REAPED) != config.bytes / config.chunk {
        return Err(Mismatch::GpuRead {
            errors,
            first: word(ctl::FIRST_ERROR),
            reaped: word(ctl::REAPED),
            expected: config.bytes / config.chunk,
        }
        .into());
    }
    Ok((
        DrivenRead {
            elapsed_ns: ns,
            mib_s: mib_s(config.bytes, ns),
            verified_bytes: word(ctl::VERIFIED),
            errors,
        },
        doorbell_path,
    ))
}

/// The CPU-driven read: one client queue pair, `queue_depth` tasks taking chunks in turn.
async fn cpu_read(
    machine: &Machine,
    client: &Rc<Client>,
    os: &HostOs,
    config: &GpuNvmeConfig,
    entries: u16,
    lba_size: u64,
) -> Result<DrivenRead, GpuWorkloadError> {
    let q = client.create_queue(entries, SqPlacement::Hints).await?;
    let commands = config.bytes / config.chunk;
    let blocks = (config.chunk / lba_size) as u32;
    let next = Rc::new(Cell::new(0u64));
    let verified = Rc::new(Cell::new(0u64));
    let failed: Rc<RefCell<Vec<ChunkFailure>>> = Rc::default();
    let left = Rc::new(Cell::new(config.queue_depth));
    let done = Rc::new(Notify::new());
    let cpu = os.cpu();
    let t0 = cpu.now();
    let (data, _) = client.data();
    for task in 0..u64::from(config.queue_depth) {
        let (client, q, os) = (client.clone(), q.clone(), os.clone());
        let (next, verified, failed, left, done) = (
            next.clone(),
            verified.clone(),
            failed.clone(),
            left.clone(),
            done.clone(),
        );
        let (nsid, chunk, seed) = (config.nsid, config.chunk, config.seed);
        machine.spawn(async move {
            let offset = task * chunk;
            let mut got = vec![0u8; chunk as usize];
            let mut want = vec![0u8; chunk as usize];
            loop {
                let ticket = next.get();
                if ticket >= commands {
                    break;
                }
                next.set(ticket + 1);
                let lba = ticket * u64::from(blocks);
                let read = client
                    .io(&q, BlockOp::Read, nsid, lba, blocks, offset)
                    .await;
                if let Err(e) = read {
                    failed
                        .borrow_mut()
                        .push(ChunkFailure::Read { lba, source: e });
                    continue;
                }
                // Checked untimed: the measurement is of the I/O, as on the GPU side.
                let checked = os.read_memory(PhysAddr(data.get() + offset), &mut got);
                pattern(seed, lba * chunk / u64::from(blocks), &mut want);
                match checked {
                    Ok(()) if got == want => verified.set(verified.get() + chunk),
                    Ok(()) => failed.borrow_mut().push(ChunkFailure::Differs { lba }),
                    Err(e) => failed
                        .borrow_mut()
                        .push(ChunkFailure::Memory { lba, source: e }),
                }
            }
            left.set(left.get() - 1);
            if left.get() == 0 {
                done.notify();
            }
        });
    }
    done.notified().await;
    let ns = cpu.now().since(t0).as_ps() as f64 / 1e3;
    client.abandon_queue(&q).await?;
    let failed = failed.take();
    if let Some(first) = failed.first() {
        return Err(Mismatch::CpuRead {
            failed: failed.len(),
            first: first.clone(),
        }
        .into());
    }
    Ok(DrivenRead {
        elapsed_ns: ns,
        mib_s: mib_s(config.bytes, ns),
        verified_bytes: verified.get(),
        errors: 0,
    })
}
