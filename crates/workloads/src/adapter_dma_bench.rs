//! The NTB adapter's DMA engine moving RAM to remote RAM and back (Paper I Fig. 4a, thesis
//! lines 3106-3130): the host's CPU creates a DMA queue on its adapter 0 (the driver
//! `drivers::ntb_dma`, the way SISCI's DMA queues drive the engine), a segment in its own
//! RAM and one in the RAM of the peer host, connects to the peer's and maps it through the
//! adapter's window, and posts one transfer per copy — `write` pushes local RAM into the
//! peer's, `read` pulls the peer's into local RAM. Each copy is timed from the CPU's first
//! descriptor store until it has seen the done word and the transfer's status, as `bench
//! dma` times the DMA test device; throughput = bytes / that time. After the run, the
//! largest copy's destination is compared byte for byte with its source.
//!
//! The peer is the first other host (in scenario order) whose adapter the host's adapter 0
//! reaches over its cable. The adapter's own function gets an entry in its requester-id
//! table for the run (its reads through the window need one, as any device's do).

use crate::booted::Stuck;
use crate::booted::UnknownHost;
use crate::dma_bench::{host_pattern, DmaDirection, DmaSample};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::ntb_dma::{
    queue_memory_bytes, AdapterDmaError, AdapterDmaQueue, Descriptor, DescriptorStatus, Direction,
    QueueMemory,
};
use smartio_fabric::{AdapterId, HostId, NtbError, Requester};
use smartio_platform::{BusAddr, Clock};
use smartio_smartio::sisci::{SciError, Sisci};
use thiserror::Error;

/// Ring entries of the benchmark's queue (one transfer is posted at a time).
const QUEUE_ENTRIES: u64 = 16;

/// What to measure.
#[derive(Debug, Clone)]
pub struct AdapterDmaBenchConfig {
    /// The host whose adapter's engine moves the data (its CPU drives it).
    pub host: String,
    /// `Write`: local RAM to the peer's RAM (push); `Read`: the peer's RAM to local RAM
    /// (pull).
    pub direction: DmaDirection,
    /// Transfer sizes in bytes.
    pub sizes: Vec<u64>,
    /// Copies per size.
    pub repeat: u32,
}

/// What was measured, and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdapterDmaBenchRun {
    /// The host driving the engine.
    pub host: String,
    /// Its adapter (`host.ntb0`).
    pub adapter: String,
    /// The host whose RAM is the remote side.
    pub peer: String,
    /// Direction.
    pub direction: DmaDirection,
    /// Throughput per size.
    pub samples: Vec<DmaSample>,
    /// Bytes compared after the run (the largest size, once).
    pub verified_bytes: u64,
    /// The timing model's account of one read request of the read request size from the
    /// engine to the remote side on an idle fabric (request out, completions back and the
    /// completer's time), in ns; `None` on an engine without timing.
    pub read_round_trip_ns: Option<f64>,
}

/// Why the benchmark could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AdapterDmaBenchError {
    /// No host of that name.
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
    /// The host has no NTB adapter.
    #[error("--host {host}: the host has no NTB adapter, so no adapter DMA engine")]
    NoAdapter {
        /// The host.
        host: String,
    },
    /// The host's adapter reaches no other host.
    #[error("--host {host}: its adapter {adapter} is cabled to no other host's adapter")]
    NoPeer {
        /// The host.
        host: String,
        /// Its adapter.
        adapter: String,
    },
    /// A count or size given by the user is out of range.
    #[error("{0}")]
    BadParameter(String),
    /// A segment could not be made, connected or mapped.
    #[error("setting up the segments failed")]
    Segment(#[source] SciError),
    /// The adapter's requester-id table has no room for its own DMA engine.
    #[error("giving the adapter's DMA engine a requester id failed")]
    RequesterId(#[source] NtbError),
    /// The DMA queue refused or failed.
    #[error("the adapter's DMA queue failed")]
    Queue(#[source] AdapterDmaError),
    /// The engine completed a transfer without moving it.
    #[error("the {size}-byte transfer ended \"{}\"", status.describe())]
    TransferFailed {
        /// Its size.
        size: u64,
        /// Its status.
        status: DescriptorStatus,
    },
    /// The destination does not hold the source's bytes (an emulator bug).
    #[error("the destination differs from the source at byte {offset} of {size}")]
    Mismatch {
        /// The first byte that differs.
        offset: u64,
        /// The bytes compared.
        size: u64,
    },
    /// The run ended with the benchmark unfinished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// The host's adapter 0, and the first other host it reaches with the number of that host's
/// adapter it reaches.
fn adapter_and_peer(
    cluster: &Cluster,
    host: HostId,
    name: &str,
) -> Result<(AdapterId, HostId, u32), AdapterDmaBenchError> {
    let f = cluster.machine.fabric();
    let ours = f
        .host_adapter(host, 0)
        .ok_or_else(|| AdapterDmaBenchError::NoAdapter {
            host: name.to_string(),
        })?;
    let (peer, number) = f
        .adapters()
        .iter()
        .enumerate()
        .filter(|(_, a)| a.host != host)
        .filter(|(i, _)| f.cable_path(ours, AdapterId(*i as u32)).is_some())
        .map(|(_, a)| (a.host, a.number))
        .min()
        .ok_or_else(|| AdapterDmaBenchError::NoPeer {
            host: name.to_string(),
            adapter: f.adapter_name(ours),
        })?;
    Ok((ours, peer, number))
}

/// Runs the benchmark on `cluster` (which it leaves at a later virtual time).
pub fn bench_adapter_dma(
    cluster: &Cluster,
    config: &AdapterDmaBenchConfig,
) -> Result<AdapterDmaBenchRun, AdapterDmaBenchError> {
    if config.repeat == 0 {
        return Err(AdapterDmaBenchError::BadParameter(
            "--repeat 0: at least one copy per size".into(),
        ));
    }
    if let Some(bad) = config.sizes.iter().find(|&&s| s == 0) {
        return Err(AdapterDmaBenchError::BadParameter(format!(
            "--sizes: transfer size {bad} is not allowed; give sizes of 1 byte or more"
        )));
    }
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    let machine = &cluster.machine;
    let host = {
        let f = machine.fabric();
        f.host_by_name(&config.host)
            .ok_or_else(|| UnknownHost::named(&config.host, f.host_names()))?
    };
    let (adapter, peer, peer_adapter) = adapter_and_peer(cluster, host, &config.host)?;
    let (endpoint, adapter_name, peer_name, bar0) = {
        let f = machine.fabric();
        let endpoint = f.adapter(adapter).endpoint;
        let bar0 = f
            .endpoint(endpoint)
            .bars
            .iter()
            .find(|b| b.index == smartio_devices::ntb_dma::spec::REGISTER_BAR)
            .map(|b| b.base);
        (
            endpoint,
            f.adapter_name(adapter),
            f.host(peer).name.clone(),
            bar0,
        )
    };
    let Some(bar0) = bar0 else {
        return Err(AdapterDmaBenchError::NoAdapter {
            host: config.host.clone(),
        });
    };
    let number = machine.fabric().adapter(adapter).number;

    // Segments: the data on both sides, the queue's ring in local RAM (prepared on the
    // adapter, so that with the IOMMU on the adapter's domain maps them).
    let sci = Sisci::new(machine);
    let seg = AdapterDmaBenchError::Segment;
    let local = sci.create_segment(host, None, largest).map_err(seg)?;
    let ring = sci
        .create_segment(host, None, queue_memory_bytes(QUEUE_ENTRIES))
        .map_err(seg)?;
    let remote = sci.create_segment(peer, None, largest).map_err(seg)?;
    for s in [&local, &ring] {
        sci.prepare_segment(s, number).map_err(seg)?;
    }
    sci.prepare_segment(&remote, peer_adapter).map_err(seg)?;
    sci.set_available(&remote, peer_adapter).map_err(seg)?;
    let node = sci.node_id(peer, peer_adapter).map_err(seg)?;
    let connection = sci
        .connect_segment(host, number, node, remote.id)
        .map_err(seg)?;
    let window = sci.map_remote(&connection, 0, largest).map_err(seg)?;
    machine
        .with_fabric_mut(|f| f.ntb_add_requester(adapter, Requester::Device(endpoint)))
        .map_err(AdapterDmaBenchError::RequesterId)?;

    let read_round_trip_ns = machine
        .idle_read_cost(
            Requester::Device(endpoint),
            window.bus_addr(),
            cluster.calibration.pcie.max_read_request_size.value as u64,
        )
        .and_then(Result::ok)
        .map(|c| (c.path_ps + c.completer_ps) as f64 / 1000.0);

    // What the engine reads: the source side's pattern, set up untimed.
    let pattern = host_pattern(largest);
    let (source_host, source_phys, dest_host, dest_phys) = match config.direction {
        DmaDirection::Write => (host, local.phys, peer, remote.phys),
        DmaDirection::Read => (peer, remote.phys, host, local.phys),
    };
    machine.poke_memory(source_host, source_phys, &pattern);

    let cpu = machine.cpu(host);
    let memory = QueueMemory {
        cpu: ring.phys,
        bus: BusAddr(ring.phys.get()),
    };
    let (local_bus, remote_bus) = (BusAddr(local.phys.get()), window.bus_addr());
    let direction = match config.direction {
        DmaDirection::Write => Direction::Write,
        DmaDirection::Read => Direction::Read,
    };
    let sizes = config.sizes.clone();
    let repeat = config.repeat;
    let samples = crate::booted::run_workload(machine, async move {
        let queue = AdapterDmaQueue::create(cpu.clone(), bar0, memory, QUEUE_ENTRIES)
            .await
            .map_err(AdapterDmaBenchError::Queue)?;
        let total = sizes.iter().fold(0u64, |t, s| {
            t.saturating_add(s.saturating_mul(u64::from(repeat)))
        });
        let mut phase = crate::progress::begin("adapter DMA", total, crate::progress::Unit::Bytes);
        let mut moved = 0u64;
        let mut samples = Vec::with_capacity(sizes.len());
        for &size in &sizes {
            let mut seconds = Vec::with_capacity(repeat as usize);
            for _ in 0..repeat {
                moved = moved.saturating_add(size);
                phase.set(moved);
                let transfer = Descriptor {
                    local: local_bus,
                    remote: remote_bus,
                    length: size,
                    direction,
                };
                let start = cpu.now();
                let batch = queue
                    .post(&[transfer])
                    .await
                    .map_err(AdapterDmaBenchError::Queue)?;
                let statuses = queue
                    .wait(batch)
                    .await
                    .map_err(AdapterDmaBenchError::Queue)?;
                seconds.push(cpu.now().since(start).as_secs_f64());
                if let Some(&status) = statuses.iter().find(|s| s.is_failure()) {
                    return Err(AdapterDmaBenchError::TransferFailed { size, status });
                }
            }
            samples.push(DmaSample::from_seconds(size, &seconds));
        }
        queue.remove().await.map_err(AdapterDmaBenchError::Queue)?;
        Ok(samples)
    })?;

    let mut landed = vec![0u8; largest as usize];
    machine.peek_memory(dest_host, dest_phys, &mut landed);
    if let Some(offset) = crate::verify::first_difference(&landed, &pattern) {
        return Err(AdapterDmaBenchError::Mismatch {
            offset: offset as u64,
            size: largest,
        });
    }
    machine
        .with_fabric_mut(|f| f.ntb_remove_requester(adapter, Requester::Device(endpoint)))
        .map_err(AdapterDmaBenchError::RequesterId)?;
    sci.unmap(&window).map_err(seg)?;
    sci.disconnect_segment(&connection).map_err(seg)?;
    for s in [&local, &ring, &remote] {
        sci.remove_segment(s).map_err(seg)?;
    }
    Ok(AdapterDmaBenchRun {
        host: config.host.clone(),
        adapter: adapter_name,
        peer: peer_name,
        direction: config.direction,
        samples,
        verified_bytes: largest,
        read_round_trip_ns,
    })
}
