//! The DMA bandwidth test: the DMA test device copies between its own memory and a buffer in
//! host RAM, driven by the CPU through the DMA test driver, like CUDA's `bandwidthTest`
//! (Paper V §7.1.2). Each copy is timed from the first register write to the moment the CPU
//! sees the completion word; throughput = bytes / that time.
//!
//! Recorded ([`bench_dma_explained`]), each copy is an operation of the kind
//! [`copy_kind`] names (its size), reported to an [`Explainer`] by the driving CPU's task.

use crate::attach::{AttachError, NameOption, Workbench};
use crate::booted::Stuck;
use crate::booted::UnknownHost;
use crate::counts::BadCount;
use crate::driver_failure::DriverFailure;
use crate::explain::{ExplainSpec, Explainer, Explanation, Operation};
use crate::stats::median;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::{DmaTestDriver, Location};
use smartio_host::{DmaDirection as HostDmaDirection, HostError};
use smartio_machine::Agent;
use smartio_platform::{BusAddr, Clock, PhysAddr};
use thiserror::Error;

/// Which way the data moves, seen from the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DmaDirection {
    /// Device memory to host RAM (posted writes).
    Write,
    /// Host RAM to device memory (reads with completions).
    Read,
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct DmaBenchConfig {
    /// Host whose CPU drives the device and whose RAM holds the buffer.
    pub host: String,
    /// The DMA test device (in the same host).
    pub device: String,
    /// Direction.
    pub direction: DmaDirection,
    /// Transfer sizes in bytes.
    pub sizes: Vec<u64>,
    /// Copies per size.
    pub repeat: u32,
}

/// Throughput for one transfer size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DmaSample {
    /// Transfer size.
    pub size_bytes: u64,
    /// Median throughput over the repeats.
    pub median_bytes_per_s: f64,
    /// Lowest throughput.
    pub min_bytes_per_s: f64,
    /// Highest throughput.
    pub max_bytes_per_s: f64,
    /// Median time per copy in nanoseconds.
    pub median_ns: f64,
}

impl DmaSample {
    /// The sample of `size`-byte copies that took `seconds` each.
    pub fn from_seconds(size: u64, seconds: &[f64]) -> DmaSample {
        let mut rates: Vec<f64> = seconds.iter().map(|&t| size as f64 / t).collect();
        let mut ns: Vec<f64> = seconds.iter().map(|&t| t * 1e9).collect();
        DmaSample {
            size_bytes: size,
            min_bytes_per_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
            max_bytes_per_s: rates.iter().copied().fold(0.0, f64::max),
            median_bytes_per_s: median(&mut rates),
            median_ns: median(&mut ns),
        }
    }
}

/// Why the benchmark could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaBenchError {
    /// No host of that name.
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
    /// No such device in the host.
    #[error("host {host:?} has no device {device:?} (devices: {known})")]
    UnknownDevice {
        /// Host.
        host: String,
        /// Asked for.
        device: String,
        /// Available.
        known: String,
    },
    /// The device is not a DMA test device.
    #[error("{device:?} is a \"class {class:#08x}\" device, not a DMA test device (kind \"dma\")")]
    NotDma {
        /// Device.
        device: String,
        /// Its PCI class code.
        class: u32,
    },
    /// A size is zero or does not fit the device memory or host RAM.
    #[error("--sizes: transfer size {size} does not fit: {why}")]
    BadSize {
        /// The size.
        size: u64,
        /// What it does not fit in.
        why: SizeLimit,
    },
    /// A count given by the user is out of range.
    #[error("{0}")]
    BadParameter(#[from] BadCount),
    /// A device or VM name that names nothing.
    #[error("{0}")]
    Name(#[from] NameOption),
    /// The driver failed.
    #[error("driver error: {0}")]
    Driver(#[from] DriverFailure),
    /// The run ended with the benchmark unfinished (an emulator bug); reported, as before
    /// it had a type, as a driver error.
    #[error("driver error: {0}")]
    Stuck(#[from] Stuck),
}

/// What a transfer size must fit in.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeLimit {
    /// Half the host's RAM (the buffer and room for everything else).
    #[error("host {host} has {bytes} bytes of RAM")]
    HostRam {
        /// The host.
        host: String,
        /// Its RAM.
        bytes: u64,
    },
    /// The device's memory (BAR 2); zero fits nothing.
    #[error("the device has {bytes} bytes of memory")]
    DeviceMemory {
        /// Its size.
        bytes: u64,
    },
}

/// Class code of the DMA test device.
const DMA_CLASS: u32 = 0x08_80_00;

impl From<AttachError> for DmaBenchError {
    fn from(e: AttachError) -> Self {
        match e {
            AttachError::UnknownHost(e) => DmaBenchError::UnknownHost(e),
            AttachError::Host(HostError::UnknownDevice {
                host,
                device,
                known,
            }) => DmaBenchError::UnknownDevice {
                host,
                device,
                known,
            },
            other => match NameOption::of(other) {
                Ok(name) => DmaBenchError::Name(name),
                Err(AttachError::Host(e)) => DriverFailure::Host(e).into(),
                Err(e) => DriverFailure::Attach(Box::new(e)).into(),
            },
        }
    }
}

/// The bytes a read-direction run puts in the host buffer before the device reads it.
pub fn host_pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(0x9e37_79b9) >> 11) as u8)
        .collect()
}

/// A benchmark run: the samples and where the host buffer was.
#[derive(Debug, Clone, PartialEq)]
pub struct DmaBenchRun {
    /// Throughput per size.
    pub samples: Vec<DmaSample>,
    /// The host buffer the device copied to or from (freed after the run; the data stays).
    pub buffer: PhysAddr,
}

/// Runs the benchmark on `cluster` (which it leaves at a later virtual time); see
/// [`bench_dma_run`].
pub fn bench_dma(
    cluster: &Cluster,
    config: &DmaBenchConfig,
) -> Result<Vec<DmaSample>, DmaBenchError> {
    bench_dma_run(cluster, config).map(|r| r.samples)
}

/// Runs the benchmark on `cluster` (which it leaves at a later virtual time). The device is
/// the host's own, or `lender:device` borrowed by Device Lending; either way the test driver
/// reaches it through its device handle: registers through the BAR mapping, buffers through
/// the DMA API.
pub fn bench_dma_run(
    cluster: &Cluster,
    config: &DmaBenchConfig,
) -> Result<DmaBenchRun, DmaBenchError> {
    bench_dma_explained(cluster, config, None).map(|(run, _)| run)
}

/// Each size's copies, `config.repeat` of each, between the device memory and the host
/// buffer at `buffer_bus` in `config`'s direction, each timed on the driver's CPU (and
/// reported to `explainer`).
async fn copies(
    driver: &DmaTestDriver<Agent>,
    cpu: &Agent,
    config: &DmaBenchConfig,
    buffer_bus: BusAddr,
    explainer: Option<&Explainer>,
) -> Result<Vec<DmaSample>, DmaBenchError> {
    let mut samples = Vec::new();
    let total = config.sizes.iter().fold(0u64, |t, s| {
        t.saturating_add(s.saturating_mul(u64::from(config.repeat)))
    });
    let mut phase = crate::progress::begin("DMA", total, crate::progress::Unit::Bytes);
    let mut moved = 0u64;
    for &size in &config.sizes {
        let kind = copy_kind(size);
        let mut times = Vec::new();
        for copy in 1..=config.repeat {
            moved = moved.saturating_add(size);
            phase.set(moved);
            let (src, dst) = match config.direction {
                DmaDirection::Write => (Location::DeviceMemory(0), Location::Bus(buffer_bus)),
                DmaDirection::Read => (Location::Bus(buffer_bus), Location::DeviceMemory(0)),
            };
            let start = cpu.now();
            driver
                .copy(src, dst, size)
                .await
                .map_err(DriverFailure::Device)?;
            let end = cpu.now();
            if let Some(explainer) = explainer {
                let what = || {
                    format!(
                        "copy {copy} of {size} B ({})",
                        match config.direction {
                            DmaDirection::Write => "device memory -> host RAM",
                            DmaDirection::Read => "host RAM -> device memory",
                        }
                    )
                };
                explainer.report(&Operation {
                    kind: Some(&kind),
                    track: "DMA copies",
                    what: &what,
                    start,
                    end,
                    recorded: end.since(start),
                });
            }
            times.push(end.since(start).as_secs_f64());
        }
        samples.push(DmaSample::from_seconds(size, &times));
    }
    Ok(samples)
}

/// The kind of operation a copy of `size` bytes is, for an [`ExplainSpec`]'s targets.
pub fn copy_kind(size: u64) -> String {
    format!("{size} B")
}

/// [`bench_dma_run`], recording the copies to explain those `explain` asks for (a target
/// of kind [`copy_kind`] picks among copies of that size), and to keep the trace; without
/// `explain`, or on an engine that records nothing, the explanation is empty.
pub fn bench_dma_explained(
    cluster: &Cluster,
    config: &DmaBenchConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(DmaBenchRun, Explanation), DmaBenchError> {
    if config.repeat == 0 {
        return Err(BadCount::NoRepeat { per: "copy" }.into());
    }
    let bench = Workbench::new(cluster, &config.host, &config.device)?;
    if bench.class() != DMA_CLASS {
        return Err(DmaBenchError::NotDma {
            device: config.device.clone(),
            class: bench.class(),
        });
    }
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    let ram = cluster.machine.fabric().host(bench.os.id()).ram.clone();
    let ram_bytes: u64 = ram.iter().map(|r| r.end - r.start).sum();
    if largest > ram_bytes / 2 {
        return Err(DmaBenchError::BadSize {
            size: largest,
            why: SizeLimit::HostRam {
                host: config.host.clone(),
                bytes: ram_bytes,
            },
        });
    }
    let config = config.clone();
    let explain = explain.cloned();
    let machine = cluster.machine.clone();
    crate::booted::run_workload(&cluster.machine, async move {
        let run = async {
            let name = bench.attach().await?;
            let handle = bench.os.device(&name).map_err(AttachError::Host)?;
            // pci_enable_device + pci_set_master, as any driver does first.
            handle.enable().await.map_err(DriverFailure::Access)?;
            let registers = handle.map_bar(0).map_err(AttachError::Host)?.window().base;
            let device_memory = handle.map_bar(2).map_err(AttachError::Host)?.window().size;
            if let Some(&size) = config.sizes.iter().find(|&&s| s == 0 || s > device_memory) {
                return Err(DmaBenchError::BadSize {
                    size,
                    why: SizeLimit::DeviceMemory {
                        bytes: device_memory,
                    },
                });
            }
            let driver_error = |e: smartio_host::DmaError| DriverFailure::Dma(e);
            let completion = handle.dma_alloc_coherent(4096).map_err(driver_error)?;
            let buffer = bench.os.alloc(largest).map_err(DriverFailure::Ram)?;
            let buffer_bus = handle
                .dma_map(buffer, largest, HostDmaDirection::Bidirectional)
                .map_err(driver_error)?;
            if config.direction == DmaDirection::Read {
                // What the device will read (set up untimed, as bandwidthTest does).
                bench
                    .os
                    .write_memory(buffer, &host_pattern(largest))
                    .map_err(DriverFailure::Memory)?;
            }
            let cpu = handle.cpu().clone();
            let driver =
                DmaTestDriver::probe(cpu.clone(), registers, completion.cpu, completion.bus)
                    .await
                    .map_err(DriverFailure::Device)?;
            // Recorded from the first copy on (attaching and probing are not explained).
            let explainer = explain
                .as_ref()
                .and_then(|spec| Explainer::start(&machine, spec));
            let samples = copies(&driver, &cpu, &config, buffer_bus, explainer.as_deref()).await?;
            let explanation = explainer.map(|e| e.finish()).unwrap_or_default();
            handle.dma_unmap(buffer_bus).map_err(driver_error)?;
            handle.dma_free_coherent(completion).map_err(driver_error)?;
            bench.os.free(buffer);
            bench.detach().await?;
            Ok((DmaBenchRun { samples, buffer }, explanation))
        };
        run.await
    })
}
