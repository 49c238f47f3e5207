//! CUDA `bandwidthTest` on the GPU model (Paper V §7.1.2, Fig. 22; §7.1.3, Fig. 23): pinned
//! host memory, `copies` copies of one size queued on a stream between two events, and the
//! throughput computed from the GPU-side elapsed time, as `bandwidthTest` computes it from
//! `cudaEventElapsedTime`. Queueing lets the GPU's front end run the copies back to back;
//! the host's calls and doorbells overlap with them.

use super::{
    check_count, gpu_endpoint, host_memory, open, pattern_differs, write_pattern, write_zeros,
    GpuWorkloadError,
};
use super::{GpuSizeLimit, Mismatch};
use crate::attach::Workbench;
use crate::dma_bench::DmaSample;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::gpu::{GpuContext, RuntimeCosts};

/// Which way the data moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GpuCopyDirection {
    /// Pinned host memory to GPU memory (the GPU reads host RAM).
    #[serde(rename = "h2d")]
    HostToDevice,
    /// GPU memory to pinned host memory (the GPU writes host RAM).
    #[serde(rename = "d2h")]
    DeviceToHost,
    /// GPU memory to GPU memory (no bus traffic).
    #[serde(rename = "d2d")]
    DeviceToDevice,
}

impl GpuCopyDirection {
    /// The name `--direction` takes.
    pub fn name(self) -> &'static str {
        match self {
            GpuCopyDirection::HostToDevice => "h2d",
            GpuCopyDirection::DeviceToHost => "d2h",
            GpuCopyDirection::DeviceToDevice => "d2d",
        }
    }
}

/// The seed of the bytes the copies move.
const SEED: u64 = 0x5eed;

/// Most copies queued per sample (bandwidthTest's own default is 100).
pub const MAX_COPIES: u32 = 1000;
/// Most samples per size.
pub const MAX_REPEAT: u32 = 1000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct GpuBandwidthConfig {
    /// Host whose CPU runs the program (a VM is `host/vm`).
    pub host: String,
    /// The GPU (`gpu0`, or `lender:gpu0` to borrow it).
    pub device: String,
    /// Direction.
    pub direction: GpuCopyDirection,
    /// Transfer sizes in bytes.
    pub sizes: Vec<u64>,
    /// Copies queued between the two events of one sample.
    pub copies: u32,
    /// Samples per size.
    pub repeat: u32,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuBandwidthResult {
    /// Scenario name.
    pub scenario: String,
    /// Host, as given.
    pub host: String,
    /// GPU, as given.
    pub device: String,
    /// Direction.
    pub direction: GpuCopyDirection,
    /// Copies per sample.
    pub copies: u32,
    /// Samples per size.
    pub repeat: u32,
    /// Throughput per size (each sample: bytes of all copies / GPU-side elapsed time; the
    /// time is per copy).
    pub samples: Vec<DmaSample>,
    /// Bytes read back and compared after the run (the largest size, once).
    pub verified_bytes: u64,
}

/// Runs the test on `cluster` (which it leaves at a later virtual time); a borrowed GPU is
/// given back at the end.
pub fn bench_gpu_bandwidth(
    cluster: &Cluster,
    config: &GpuBandwidthConfig,
) -> Result<GpuBandwidthResult, GpuWorkloadError> {
    check_count("--copies", config.copies, MAX_COPIES)?;
    check_count("--repeat", config.repeat, MAX_REPEAT)?;
    let bench = Workbench::new(cluster, &config.host, &config.device)?;
    gpu_endpoint(cluster, &bench, &config.device)?;
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    if let Some(&size) = config.sizes.iter().find(|&&s| s == 0) {
        return Err(GpuWorkloadError::BadSize {
            size,
            why: GpuSizeLimit::Empty,
        });
    }
    let ram = cluster.machine.fabric().host(bench.home.id()).ram_bytes;
    if largest > ram / 4 {
        return Err(GpuWorkloadError::BadSize {
            size: largest,
            why: GpuSizeLimit::HostRam {
                host: bench.home.name().to_string(),
                bytes: ram,
            },
        });
    }
    let kernels = cluster.gpu_kernels().clone();
    let costs = RuntimeCosts::from_calibration(&cluster.calibration.gpu_runtime);
    let config = config.clone();
    let scenario = cluster.machine.fabric().name.clone();
    crate::booted::run_workload(&cluster.machine, async move {
        let run = async {
            let ctx = open(&kernels, costs, &bench, 0).await?;
            let result = measure(&ctx, &bench, &config, largest).await;
            let closed = ctx.close().await.map_err(GpuWorkloadError::from);
            let (samples, verified_bytes) = result?;
            closed?;
            Ok(GpuBandwidthResult {
                scenario,
                host: config.host.clone(),
                device: config.device.clone(),
                direction: config.direction,
                copies: config.copies,
                repeat: config.repeat,
                samples,
                verified_bytes,
            })
        };
        bench.detach_after(run).await
    })
}

/// The timed part: buffers, samples per size, and one verification of the largest size.
async fn measure(
    ctx: &GpuContext,
    bench: &Workbench,
    config: &GpuBandwidthConfig,
    largest: u64,
) -> Result<(Vec<DmaSample>, u64), GpuWorkloadError> {
    let memory = ctx.properties().memory;
    let needed = match config.direction {
        GpuCopyDirection::DeviceToDevice => largest.saturating_mul(2),
        _ => largest,
    };
    if needed > memory {
        return Err(GpuWorkloadError::BadSize {
            size: largest,
            why: GpuSizeLimit::DeviceMemory {
                device: config.device.clone(),
                bytes: memory,
                twice: config.direction == GpuCopyDirection::DeviceToDevice,
            },
        });
    }
    let host = ctx.host_alloc(largest)?;
    let device = ctx.malloc(needed)?;
    let (src, dst) = match config.direction {
        GpuCopyDirection::HostToDevice => (host.addr(), device.addr()),
        GpuCopyDirection::DeviceToHost => (device.addr(), host.addr()),
        GpuCopyDirection::DeviceToDevice => (device.addr(), device.at(largest)),
    };
    // What the copies move, set up untimed as bandwidthTest initialises its buffers.
    write_pattern(&bench.os, host.cpu, largest, SEED).map_err(host_memory("host buffer"))?;
    if config.direction != GpuCopyDirection::HostToDevice {
        ctx.memcpy(device.addr(), host.addr(), largest).await?;
    }
    let stream = ctx.create_stream().await?;
    let start = ctx.create_event()?;
    let end = ctx.create_event()?;
    let total = config.sizes.iter().fold(0u64, |t, s| {
        t.saturating_add(s.saturating_mul(u64::from(config.repeat) * u64::from(config.copies)))
    });
    let mut phase = crate::progress::begin("GPU copies", total, crate::progress::Unit::Bytes);
    let mut moved = 0u64;
    let mut samples = Vec::with_capacity(config.sizes.len());
    for &size in &config.sizes {
        let mut per_copy = Vec::with_capacity(config.repeat as usize);
        for _ in 0..config.repeat {
            stream.record(&start).await?;
            for _ in 0..config.copies {
                stream.memcpy_async(dst, src, size).await?;
            }
            stream.record(&end).await?;
            stream.synchronize().await?;
            let elapsed = ctx.elapsed(&start, &end).await?;
            per_copy.push(elapsed.as_secs_f64() / f64::from(config.copies));
            moved = moved.saturating_add(size * u64::from(config.copies));
            phase.set(moved);
        }
        samples.push(DmaSample::from_seconds(size, &per_copy));
    }
    stream.destroy().await?;
    // The last copy of the largest size moved `largest` bytes: check them.
    let verified = verify(ctx, bench, config, &host, &device, largest).await?;
    ctx.free(&device)?;
    ctx.host_free(host)?;
    Ok((samples, verified))
}

/// Reads back what the last copy of the largest size wrote and compares it with the pattern.
async fn verify(
    ctx: &GpuContext,
    bench: &Workbench,
    config: &GpuBandwidthConfig,
    host: &smartio_drivers::gpu::HostBuffer,
    device: &smartio_drivers::gpu::DeviceBuffer,
    largest: u64,
) -> Result<u64, GpuWorkloadError> {
    let last = *config.sizes.last().unwrap_or(&largest);
    if last != largest {
        // The final copy was not the largest: only its bytes are known to have moved.
        return Ok(0);
    }
    let written = match config.direction {
        GpuCopyDirection::DeviceToHost => None,
        GpuCopyDirection::HostToDevice => Some(device.addr()),
        GpuCopyDirection::DeviceToDevice => Some(device.at(largest)),
    };
    if let Some(from) = written {
        // Clear the host buffer, then bring the device copy back into it.
        write_zeros(&bench.os, host.cpu, largest).map_err(host_memory("host buffer"))?;
        ctx.memcpy(host.addr(), from, largest).await?;
    }
    let differs =
        pattern_differs(&bench.os, host.cpu, largest, SEED).map_err(host_memory("host buffer"))?;
    if let Some(at) = differs {
        return Err(Mismatch::Copy {
            direction: config.direction.name(),
            len: largest,
            at,
        }
        .into());
    }
    Ok(largest)
}
