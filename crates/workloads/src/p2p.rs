//! The GPU-to-GPU bandwidth test of Paper V §7.2 (like CUDA's `p2pBandwidthLatencyTest`):
//! one device's copy engine moves data between its own memory and another device's memory
//! BAR, with no host RAM on the data path.
//!
//! ```text
//!   host CPU ── registers (BAR0) ──► source copy engine
//!                                      │  write: source memory ──► target memory BAR
//!                                      │  read:  target memory BAR ──► source memory
//!                                      ▼
//!                      address from source.dma_map_peer(target, memory BAR)
//! ```
//!
//! Either device may be the host's own (`gpu0`) or borrowed by Device Lending
//! (`lender:gpu0`). The peer address is whatever SmartIO resolves for the pair (Paper V
//! §4.4): for two devices of the same lender it is the target's own bus address, so the
//! copy never leaves the lender's switch; for devices of different hosts it is a window of
//! the source's NTB. Timing is as in [`crate::dma_bench`]: from the first register write to
//! the moment the CPU sees the completion word; the median over the repeats is reported.

use crate::attach::{AttachError, Workbench};
use crate::booted::Stuck;
use crate::counts::BadCount;
use crate::dma_bench::DmaSample;
use crate::driver_failure::DriverFailure;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_devices::dma::DmaDevice;
use smartio_drivers::{DmaTestDriver, DriverError, Location};
use smartio_fabric::EndpointId;
use smartio_machine::Machine;
use smartio_platform::{AccessError, Clock};
use std::rc::Rc;
use thiserror::Error;

/// Which way the data moves, seen from the source's copy engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum P2pDirection {
    /// Source memory to the target's memory BAR (posted writes across the fabric).
    Write,
    /// The target's memory BAR to source memory (reads with completions).
    Read,
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct P2pConfig {
    /// Host whose CPU drives the source's copy engine.
    pub host: String,
    /// The device whose copy engine moves the data (`gpu0` or `lender:gpu0`).
    pub source: String,
    /// The device whose memory BAR is read or written (`gpu1` or `lender2:gpu2`).
    pub target: String,
    /// Direction.
    pub direction: P2pDirection,
    /// Transfer sizes in bytes.
    pub sizes: Vec<u64>,
    /// Copies per size.
    pub repeat: u32,
}

/// Why a peer-to-peer workload (this bandwidth test or
/// [`crate::device_pingpong::device_pingpong`]) could not run. None is fatal to the
/// emulator: each is a bad request or a refusal of the emulated software.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum P2pError {
    /// Unknown host or device, or SmartIO / the host OS refused to attach it.
    #[error("{0}")]
    Attach(#[from] AttachError),
    /// The device has no copy engine (only GPUs and DMA test devices do).
    #[error("{device:?} is a {kind:?} device, not a copy engine (a GPU or a DMA test device)")]
    NotCopyEngine {
        /// Device as given.
        device: String,
        /// Its kind.
        kind: String,
    },
    /// Both ends name the same function.
    #[error("{a:?} and {b:?} are the same device; give two different devices")]
    SameDevice {
        /// First as given.
        a: String,
        /// Second as given.
        b: String,
    },
    /// A size is zero or does not fit a device memory.
    #[error("--sizes: transfer size {size} does not fit: {why}")]
    BadSize {
        /// The size.
        size: u64,
        /// The two devices' memories, the smaller of which is the room.
        why: P2pRoom,
    },
    /// The DMA API, the driver or the fabric failed.
    #[error("driver error: {0}")]
    Driver(#[from] DriverFailure),
    /// A count given by the user is out of range.
    #[error("{0}")]
    BadParameter(#[from] BadCount),
    /// The simulation ended with the workload still waiting (an emulator bug): what every
    /// waiting task waited for.
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// Two devices' memories, which a peer-to-peer size must fit ([`P2pError::BadSize`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{from} has {from_bytes} bytes of memory and {to} has {to_bytes}")]
pub struct P2pRoom {
    /// The source device as given.
    pub from: String,
    /// Its memory.
    pub from_bytes: u64,
    /// The target device as given.
    pub to: String,
    /// Its memory.
    pub to_bytes: u64,
}

/// A copy engine a peer-to-peer workload uses: the model behind a name given by the user.
#[derive(Debug, Clone)]
pub(crate) struct CopyEngine {
    /// The fabric endpoint (in its own host).
    pub endpoint: EndpointId,
    /// The device model.
    pub model: Rc<DmaDevice>,
}

/// Resolves `spec` (a function of `bench.home`, the VM's host in a VM, or `lender:device`)
/// to its copy engine.
pub(crate) fn copy_engine(
    cluster: &Cluster,
    bench: &Workbench,
    spec: &str,
) -> Result<CopyEngine, P2pError> {
    let endpoint = bench.endpoint_of(spec)?;
    let model = cluster
        .copy_engine(endpoint)
        .ok_or_else(|| P2pError::NotCopyEngine {
            device: spec.to_string(),
            kind: cluster.machine.fabric().endpoint(endpoint).kind.clone(),
        })?;
    Ok(CopyEngine { endpoint, model })
}

/// Resolves two different copy engines.
pub(crate) fn copy_engine_pair(
    cluster: &Cluster,
    bench: &Workbench,
    a: &str,
    b: &str,
) -> Result<(CopyEngine, CopyEngine), P2pError> {
    let first = copy_engine(cluster, bench, a)?;
    let second = copy_engine(cluster, bench, b)?;
    if first.endpoint == second.endpoint {
        return Err(P2pError::SameDevice {
            a: a.to_string(),
            b: b.to_string(),
        });
    }
    Ok((first, second))
}

/// Runs the benchmark on `cluster` (which it leaves at a later virtual time): attaches both
/// devices to `config.host` (borrowing what is remote), maps the target's memory BAR for the
/// source, and times copies of each size. Borrowed devices are given back at the end.
pub fn bench_p2p(cluster: &Cluster, config: &P2pConfig) -> Result<Vec<DmaSample>, P2pError> {
    if config.repeat == 0 {
        return Err(BadCount::NoRepeat { per: "copy" }.into());
    }
    let bench = Workbench::with_devices(
        cluster,
        &config.host,
        &[config.source.as_str(), config.target.as_str()],
    )?;
    let (source, target) = copy_engine_pair(cluster, &bench, &config.source, &config.target)?;
    let room = source.model.memory_size().min(target.model.memory_size());
    if let Some(&size) = config.sizes.iter().find(|&&s| s == 0 || s > room) {
        return Err(P2pError::BadSize {
            size,
            why: P2pRoom {
                from: config.source.clone(),
                from_bytes: source.model.memory_size(),
                to: config.target.clone(),
                to_bytes: target.model.memory_size(),
            },
        });
    }
    let target_bar = target.model.memory_bar();
    let config = config.clone();
    let machine = cluster.machine.clone();
    crate::booted::run_workload(&cluster.machine, async move {
        let run = async {
            let source_name = bench.attach_nth(0).await?;
            let target_name = bench.attach_nth(1).await?;
            let src = bench.os.device(&source_name).map_err(AttachError::Host)?;
            let dst = bench.os.device(&target_name).map_err(AttachError::Host)?;
            let dma_error = DriverFailure::Dma;
            // pci_enable_device + pci_set_master, as any driver does first.
            for h in [&src, &dst] {
                h.enable().await.map_err(DriverFailure::Access)?;
            }
            let peer = src.dma_map_peer(&dst, target_bar).map_err(dma_error)?;
            let registers = src.map_bar(0).map_err(AttachError::Host)?.window().base;
            let completion = src.dma_alloc_coherent(4096).map_err(dma_error)?;
            let cpu = src.cpu().clone();
            let driver =
                DmaTestDriver::probe(cpu.clone(), registers, completion.cpu, completion.bus)
                    .await
                    .map_err(DriverFailure::Device)?;
            let (from, to) = match config.direction {
                P2pDirection::Write => (Location::DeviceMemory(0), Location::Bus(peer)),
                P2pDirection::Read => (Location::Bus(peer), Location::DeviceMemory(0)),
            };
            let mut samples = Vec::with_capacity(config.sizes.len());
            let total = config.sizes.iter().fold(0u64, |t, s| {
                t.saturating_add(s.saturating_mul(u64::from(config.repeat)))
            });
            let mut phase =
                crate::progress::begin("peer-to-peer DMA", total, crate::progress::Unit::Bytes);
            let mut moved = 0u64;
            for &size in &config.sizes {
                let mut times = Vec::new();
                for _ in 0..config.repeat {
                    moved = moved.saturating_add(size);
                    phase.set(moved);
                    let faults = machine.faults().len();
                    let start = cpu.now();
                    driver
                        .copy(from, to, size)
                        .await
                        .map_err(|e| copy_failed(&machine, faults, &e))?;
                    times.push(cpu.now().since(start).as_secs_f64());
                }
                samples.push(DmaSample::from_seconds(size, &times));
            }
            src.dma_free_coherent(completion).map_err(dma_error)?;
            src.dma_unmap(peer).map_err(dma_error)?;
            Ok(samples)
        };
        bench.detach_after(run).await
    })
}

/// A failed copy, with what the fabric recorded since fault number `seen` (the device
/// itself only reports that the copy failed).
fn copy_failed(machine: &Machine, seen: usize, e: &DriverError) -> DriverFailure {
    let faults: Vec<AccessError> = machine
        .faults()
        .into_iter()
        .skip(seen)
        .map(|f| f.error)
        .collect();
    if faults.is_empty() {
        DriverFailure::Device(e.clone())
    } else {
        DriverFailure::Faulted {
            source: e.clone(),
            faults,
        }
    }
}
