//! The DMA bandwidth test: the DMA test device copies between its own memory and a buffer in
//! host RAM, driven by the CPU through the DMA test driver, like CUDA's `bandwidthTest`
//! (Paper V §7.1.2). Each copy is timed from the first register write to the moment the CPU
//! sees the completion word; throughput = bytes / that time.

use crate::stats::median;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::{DmaTestDriver, Location};
use smartio_fabric::{EndpointId, HostId};
use smartio_platform::{BusAddr, Clock, PhysAddr};
use std::cell::RefCell;
use std::rc::Rc;
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

/// Why the benchmark could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaBenchError {
    /// No such host.
    #[error("unknown host {host:?} (hosts: {known})")]
    UnknownHost {
        /// Asked for.
        host: String,
        /// Available.
        known: String,
    },
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
    #[error("{device:?} is a {kind:?} device, not a DMA test device (kind \"dma\")")]
    NotDma {
        /// Device.
        device: String,
        /// Its kind.
        kind: String,
    },
    /// A size is zero or does not fit the device memory or host RAM.
    #[error("transfer size {size} does not fit: {why}")]
    BadSize {
        /// The size.
        size: u64,
        /// Why.
        why: String,
    },
    /// The driver failed.
    #[error("driver error: {0}")]
    Driver(String),
}

/// Where the benchmark puts its buffers in host RAM.
const COMPLETION_WORD: u64 = 0x0010_0000;
const BUFFER_BASE: u64 = 0x0100_0000;

/// Resolves host and device names.
pub fn find_dma_device(
    cluster: &Cluster,
    host: &str,
    device: &str,
) -> Result<(HostId, EndpointId), DmaBenchError> {
    let fabric = cluster.sim.fabric();
    let host_id = fabric
        .host_by_name(host)
        .ok_or_else(|| DmaBenchError::UnknownHost {
            host: host.to_string(),
            known: fabric
                .hosts()
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let endpoint =
        fabric
            .endpoint_by_name(host_id, device)
            .ok_or_else(|| DmaBenchError::UnknownDevice {
                host: host.to_string(),
                device: device.to_string(),
                known: fabric
                    .host(host_id)
                    .endpoints
                    .iter()
                    .map(|&e| fabric.endpoint(e).name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
    let kind = &fabric.endpoint(endpoint).kind;
    if kind != "dma" {
        return Err(DmaBenchError::NotDma {
            device: device.to_string(),
            kind: kind.clone(),
        });
    }
    Ok((host_id, endpoint))
}

/// Runs the benchmark on `cluster` (which it leaves at a later virtual time).
pub fn bench_dma(
    cluster: &Cluster,
    config: &DmaBenchConfig,
) -> Result<Vec<DmaSample>, DmaBenchError> {
    let (host, endpoint) = find_dma_device(cluster, &config.host, &config.device)?;
    let (registers, device_memory, low_ram_end, iommu) = {
        let fabric = cluster.sim.fabric();
        let ep = fabric.endpoint(endpoint);
        let bar = |i: u8| ep.bars.iter().find(|b| b.index == i).copied();
        let (Some(regs), Some(mem)) = (bar(0), bar(2)) else {
            return Err(DmaBenchError::Driver(
                "the device lacks BAR0 or BAR2".into(),
            ));
        };
        let h = fabric.host(host);
        (regs.base, mem.size, h.ram[0].end, h.iommu.enabled())
    };
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    for &size in &config.sizes {
        if size == 0 || size > device_memory {
            return Err(DmaBenchError::BadSize {
                size,
                why: format!("the device has {device_memory} bytes of memory"),
            });
        }
        if BUFFER_BASE + size > low_ram_end {
            return Err(DmaBenchError::BadSize {
                size,
                why: format!("host RAM below 2 GiB ends at {low_ram_end:#x}"),
            });
        }
    }
    if iommu {
        // Identity-map the buffer and the completion word for the device.
        cluster.sim.with_fabric_mut(|f| {
            let iommu = f.iommu_mut(host);
            let domain = iommu
                .create_domain()
                .map_err(|e| DmaBenchError::Driver(e.to_string()))?;
            iommu
                .attach(endpoint, domain)
                .map_err(|e| DmaBenchError::Driver(e.to_string()))?;
            let span = (largest.div_ceil(4096) * 4096).max(4096);
            iommu
                .map(
                    domain,
                    BusAddr(COMPLETION_WORD),
                    PhysAddr(COMPLETION_WORD),
                    4096,
                    true,
                )
                .and_then(|()| {
                    iommu.map(
                        domain,
                        BusAddr(BUFFER_BASE),
                        PhysAddr(BUFFER_BASE),
                        span,
                        true,
                    )
                })
                .map_err(|e| DmaBenchError::Driver(e.to_string()))
        })?;
    }

    let results: Rc<RefCell<Result<Vec<DmaSample>, DmaBenchError>>> =
        Rc::new(RefCell::new(Ok(Vec::new())));
    let out = results.clone();
    let cpu = cluster.sim.cpu(host);
    let config = config.clone();
    cluster.sim.spawn(async move {
        let run = async {
            let driver = DmaTestDriver::probe(
                cpu.clone(),
                registers,
                PhysAddr(COMPLETION_WORD),
                BusAddr(COMPLETION_WORD),
            )
            .await
            .map_err(|e| DmaBenchError::Driver(e.to_string()))?;
            let mut samples = Vec::new();
            for &size in &config.sizes {
                let mut rates = Vec::new();
                let mut times = Vec::new();
                for _ in 0..config.repeat.max(1) {
                    let (src, dst) = match config.direction {
                        DmaDirection::Write => (
                            Location::DeviceMemory(0),
                            Location::Bus(BusAddr(BUFFER_BASE)),
                        ),
                        DmaDirection::Read => (
                            Location::Bus(BusAddr(BUFFER_BASE)),
                            Location::DeviceMemory(0),
                        ),
                    };
                    let start = cpu.now();
                    driver
                        .copy(src, dst, size)
                        .await
                        .map_err(|e| DmaBenchError::Driver(e.to_string()))?;
                    let elapsed = cpu.now().since(start).as_secs_f64();
                    rates.push(size as f64 / elapsed);
                    times.push(elapsed * 1e9);
                }
                let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
                let max = rates.iter().copied().fold(0.0, f64::max);
                samples.push(DmaSample {
                    size_bytes: size,
                    median_bytes_per_s: median(&mut rates),
                    min_bytes_per_s: min,
                    max_bytes_per_s: max,
                    median_ns: median(&mut times),
                });
            }
            Ok(samples)
        };
        *out.borrow_mut() = run.await;
    });
    cluster.sim.run();
    results.replace(Ok(Vec::new()))
}
