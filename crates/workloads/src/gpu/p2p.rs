//! Device-to-device copies between two GPUs (Paper V §7.1.4–7.1.5, Figs. 24 and 26): the
//! source GPU's copy engine moves data into (or out of) the target GPU's memory through the
//! target's BAR1 aperture, by the address SmartIO resolves for the pair (shortest path).
//! Each copy is timed on the GPU by two events around it, and a dummy kernel is launched
//! between copies so they do not run back to back (the papers' program did the same). The
//! copies are queued first and released together, so the measured intervals hold the GPU's
//! work only.

use super::{
    check_count, host_memory, on_two_gpus, path, pattern_differs, write_pattern, write_zeros,
    GpuWorkloadError,
};
use super::{GpuSizeLimit, Mismatch};
use crate::attach::Workbench;
use crate::dma_bench::DmaSample;
use crate::p2p::P2pDirection;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_devices::gpu::kernel::{KernelFn, KernelFuture};
use smartio_devices::gpu::spec::GpuAddr;
use smartio_drivers::gpu::{GpuContext, HostBuffer};
use smartio_host::HostOs;
use smartio_machine::{Agent, Machine};
use std::rc::Rc;

/// The seed of the bytes the copies move.
const SEED: u64 = 0xd2d;

/// Most copies per size.
pub const MAX_REPEAT: u32 = 1000;

/// Copies queued behind one gate: their entries (four each, and the gate's) must fit the
/// stream's ring, or the host would wait for room the gated GPU never frees.
const GATED_COPIES: usize = 128;

/// What to measure.
#[derive(Debug, Clone)]
pub struct GpuP2pConfig {
    /// Host whose CPU runs the program (it borrows what is remote).
    pub host: String,
    /// The GPU whose copy engine moves the data (`gpu0` or `lender:gpu0`).
    pub source: String,
    /// The GPU whose memory is written or read (`gpu1` or `lender2:gpu2`).
    pub target: String,
    /// Write: source memory to target memory; read: target memory to source memory.
    pub direction: P2pDirection,
    /// Transfer sizes in bytes.
    pub sizes: Vec<u64>,
    /// Copies per size.
    pub repeat: u32,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuP2pResult {
    /// Scenario name.
    pub scenario: String,
    /// Host, as given.
    pub host: String,
    /// Source GPU, as given.
    pub source: String,
    /// Target GPU, as given.
    pub target: String,
    /// Direction.
    pub direction: P2pDirection,
    /// Copies per size.
    pub repeat: u32,
    /// Throughput per size, each copy timed by GPU events.
    pub samples: Vec<DmaSample>,
    /// Nodes a write from the source GPU to the target's memory reaches, in order.
    pub path: Vec<String>,
    /// Bytes read back from the destination and compared after the run.
    pub verified_bytes: u64,
}

/// A kernel that does nothing: launched between copies so they do not pipeline.
fn dummy() -> KernelFn<Agent> {
    Rc::new(|_thread| -> KernelFuture { Box::pin(async { Ok(()) }) })
}

/// Runs the test on `cluster` (which it leaves at a later virtual time); borrowed GPUs are
/// given back at the end.
pub fn bench_gpu_p2p(
    cluster: &Cluster,
    config: &GpuP2pConfig,
) -> Result<GpuP2pResult, GpuWorkloadError> {
    check_count("--repeat", config.repeat, MAX_REPEAT)?;
    if let Some(&size) = config.sizes.iter().find(|&&s| s == 0) {
        return Err(GpuWorkloadError::BadSize {
            size,
            why: GpuSizeLimit::Empty,
        });
    }
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    let config = config.clone();
    let (host, source, target) = (
        config.host.clone(),
        config.source.clone(),
        config.target.clone(),
    );
    on_two_gpus(
        cluster,
        &host,
        &source,
        &target,
        async move |machine, bench, ga, gb| measure(machine, bench, ga, gb, &config, largest).await,
    )
}

async fn measure(
    machine: &Machine,
    bench: &Workbench,
    source: &GpuContext,
    target: &GpuContext,
    config: &GpuP2pConfig,
    largest: u64,
) -> Result<GpuP2pResult, GpuWorkloadError> {
    check_room(config, source, target, largest)?;
    let local = source.malloc(largest)?;
    let remote = target.malloc(largest)?;
    let peer = source.enable_peer_access(target)?;
    let remote_addr = peer.addr(&remote)?;
    let (src, dst) = match config.direction {
        P2pDirection::Write => (local.addr(), remote_addr),
        P2pDirection::Read => (remote_addr, local.addr()),
    };
    // What the copies move, put in place before the timed part.
    let staging = source.host_alloc(largest)?;
    write_pattern(&bench.os, staging.cpu, largest, SEED).map_err(host_memory("host buffer"))?;
    match config.direction {
        P2pDirection::Write => source.memcpy(local.addr(), staging.addr(), largest).await?,
        P2pDirection::Read => source.memcpy(remote_addr, staging.addr(), largest).await?,
    }
    let dummy = source.load_kernel("smartio.dummy", dummy());
    let stream = source.create_stream().await?;
    let mut events = Vec::with_capacity(2 * config.repeat as usize);
    for _ in 0..2 * config.repeat {
        events.push(source.create_event()?);
    }
    // The copies of a size are queued behind a gate and started together, so the host's
    // calls and doorbells (and the GPU's fetch of each entry over the host's path) stay out
    // of the intervals the events measure: the GPU runs them back to back.
    let gate = source.malloc(8)?;
    let opener = source.host_alloc(8)?;
    let mut generation = 0u64;
    let mut samples = Vec::with_capacity(config.sizes.len());
    let total = config.sizes.iter().fold(0u64, |t, s| {
        t.saturating_add(s.saturating_mul(u64::from(config.repeat)))
    });
    let mut phase = crate::progress::begin("GPU peer copies", total, crate::progress::Unit::Bytes);
    let mut moved = 0u64;
    for &size in &config.sizes {
        for batch in events.chunks(2 * GATED_COPIES) {
            generation += 1;
            stream.wait_value(&gate, 0, generation).await?;
            for pair in batch.chunks(2) {
                stream.record(&pair[0]).await?;
                stream.memcpy_async(dst, src, size).await?;
                stream.record(&pair[1]).await?;
                stream.launch(dummy, 1, &[]).await?;
            }
            bench
                .os
                .write_memory(opener.cpu, &generation.to_le_bytes())
                .map_err(host_memory("host buffer"))?;
            source.memcpy(gate.addr(), opener.addr(), 8).await?;
        }
        stream.synchronize().await?;
        moved = moved.saturating_add(size.saturating_mul(u64::from(config.repeat)));
        phase.set(moved);
        let mut seconds = Vec::with_capacity(config.repeat as usize);
        for pair in events.chunks(2) {
            seconds.push(source.elapsed(&pair[0], &pair[1]).await?.as_secs_f64());
        }
        samples.push(DmaSample::from_seconds(size, &seconds));
    }
    stream.destroy().await?;
    // The destination holds the first `last` bytes of the pattern.
    let last = *config.sizes.last().unwrap_or(&largest);
    verify_destination(&bench.os, source, &staging, dst, last).await?;
    let route = path(machine, source, remote_addr);
    source.host_free(staging)?;
    source.host_free(opener)?;
    source.free(&gate)?;
    source.free(&local)?;
    target.free(&remote)?;
    Ok(GpuP2pResult {
        scenario: machine.fabric().name.clone(),
        host: config.host.clone(),
        source: config.source.clone(),
        target: config.target.clone(),
        direction: config.direction,
        repeat: config.repeat,
        samples,
        path: route,
        verified_bytes: last,
    })
}

/// Checks that the largest copy fits in the source's memory and the target's BAR1
/// aperture: the target's buffer must lie in it to be reachable by the peer.
fn check_room(
    config: &GpuP2pConfig,
    source: &GpuContext,
    target: &GpuContext,
    largest: u64,
) -> Result<(), GpuWorkloadError> {
    let room = source.properties().memory.min(target.properties().aperture);
    if largest > room {
        return Err(GpuWorkloadError::BadSize {
            size: largest,
            why: GpuSizeLimit::PeerAperture {
                from: config.source.clone(),
                memory: source.properties().memory,
                to: config.target.clone(),
                aperture: target.properties().aperture,
            },
        });
    }
    Ok(())
}

/// Copies the destination's first `last` bytes back through `staging` (zeroed first) and
/// checks they are the pattern.
async fn verify_destination(
    os: &HostOs,
    source: &GpuContext,
    staging: &HostBuffer,
    dst: GpuAddr,
    last: u64,
) -> Result<(), GpuWorkloadError> {
    write_zeros(os, staging.cpu, last).map_err(host_memory("host buffer"))?;
    source.memcpy(staging.addr(), dst, last).await?;
    let differs =
        pattern_differs(os, staging.cpu, last, SEED).map_err(host_memory("host buffer"))?;
    if let Some(at) = differs {
        return Err(Mismatch::Copy {
            direction: "peer",
            len: last,
            at,
        }
        .into());
    }
    Ok(())
}
