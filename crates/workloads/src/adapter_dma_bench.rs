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
use crate::counts::BadCount;
use crate::dma_bench::{host_pattern, DmaDirection, DmaSample};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::ntb_dma::{engine_registers, queue_memory_bytes, QueueMemory};
use smartio_drivers::sisci_dma::{
    flag, QueueState, SisciDmaError, SisciDmaQueue, VecEntry, Vector,
};
use smartio_fabric::{AdapterId, EndpointId, HostId, NtbError, Requester};
use smartio_machine::Agent;
use smartio_platform::{BusAddr, Clock};
use smartio_smartio::sisci::{LocalSegment, RemoteMap, RemoteSegment, SciError, Sisci};
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
    BadParameter(#[from] BadCount),
    /// A transfer whose end lies past 2^64 bytes.
    #[error("{size} bytes past offset {offset}")]
    Span {
        /// Bytes.
        size: u64,
        /// The larger of its offsets.
        offset: u64,
    },
    /// A segment could not be made, connected or mapped.
    #[error("setting up the segments failed")]
    Segment(#[source] SciError),
    /// The adapter's requester-id table has no room for its own DMA engine.
    #[error("giving the adapter's DMA engine a requester id failed")]
    RequesterId(#[source] NtbError),
    /// The DMA queue refused or failed.
    #[error("the adapter's DMA queue failed")]
    Queue(#[source] SisciDmaError),
    /// The queue ended a transfer without moving it (its state says how).
    #[error("the {size}-byte transfer left the DMA queue {state:?}")]
    TransferFailed {
        /// Its size.
        size: u64,
        /// The queue's state after the wait.
        state: QueueState,
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

/// A host's adapter DMA engine set up for copies of up to `size` bytes between a segment of
/// the host's RAM and one of its peer's, as a SISCI program sets it up: both segments (the
/// local one prepared on the adapter, the remote one connected and mapped through the
/// adapter's window), the queue's ring in a local segment, and the adapter's own function in
/// its requester-id table. [`AdapterDmaSetup::tear_down`] undoes it.
pub struct AdapterDmaSetup {
    sci: Sisci,
    /// The host driving the engine.
    pub host: HostId,
    /// Its peer.
    pub peer: HostId,
    adapter: AdapterId,
    endpoint: EndpointId,
    /// The adapter's name (`host.ntb0`).
    pub adapter_name: String,
    /// The peer's name.
    pub peer_name: String,
    bar0: BusAddr,
    /// The local segment.
    pub local: LocalSegment,
    /// The peer's segment.
    pub remote: LocalSegment,
    ring: LocalSegment,
    connection: RemoteSegment,
    window: RemoteMap,
}

impl AdapterDmaSetup {
    /// Sets up `host`'s adapter 0 for copies of `size` bytes with its first peer.
    pub fn new(
        cluster: &Cluster,
        host_name: &str,
        size: u64,
    ) -> Result<Self, AdapterDmaBenchError> {
        let machine = &cluster.machine;
        let host = {
            let f = machine.fabric();
            f.host_by_name(host_name)
                .ok_or_else(|| UnknownHost::named(host_name, f.host_names()))?
        };
        let (adapter, peer, peer_adapter) = adapter_and_peer(cluster, host, host_name)?;
        let (endpoint, adapter_name, peer_name, bar0) = {
            let f = machine.fabric();
            let (endpoint, bar0) = engine_registers(&f, adapter);
            (
                endpoint,
                f.adapter_name(adapter),
                f.host(peer).name.clone(),
                bar0,
            )
        };
        let Some(bar0) = bar0 else {
            return Err(AdapterDmaBenchError::NoAdapter {
                host: host_name.to_string(),
            });
        };
        let number = machine.fabric().adapter(adapter).number;
        // Segments: the data on both sides, the queue's ring in local RAM (prepared on the
        // adapter, so that with the IOMMU on the adapter's domain maps them).
        let sci = Sisci::new(machine);
        let seg = AdapterDmaBenchError::Segment;
        let local = sci.create_segment(host, None, size).map_err(seg)?;
        let ring = sci
            .create_segment(host, None, queue_memory_bytes(QUEUE_ENTRIES))
            .map_err(seg)?;
        let remote = sci.create_segment(peer, None, size).map_err(seg)?;
        for s in [&local, &ring] {
            sci.prepare_segment(s, number).map_err(seg)?;
        }
        sci.prepare_segment(&remote, peer_adapter).map_err(seg)?;
        sci.set_available(&remote, peer_adapter).map_err(seg)?;
        let node = sci.node_id(peer, peer_adapter).map_err(seg)?;
        let connection = sci
            .connect_segment(host, number, node, remote.id)
            .map_err(seg)?;
        let window = sci.map_remote(&connection, 0, size).map_err(seg)?;
        machine
            .with_fabric_mut(|f| f.ntb_add_requester(adapter, Requester::Device(endpoint)))
            .map_err(AdapterDmaBenchError::RequesterId)?;
        Ok(AdapterDmaSetup {
            sci,
            host,
            peer,
            adapter,
            endpoint,
            adapter_name,
            peer_name,
            bar0,
            local,
            remote,
            ring,
            connection,
            window,
        })
    }

    /// Creates the SISCI DMA queue on the adapter (`SCICreateDMAQueue`), driven by `cpu`.
    pub async fn queue(&self, cpu: Agent) -> Result<SisciDmaQueue<Agent>, AdapterDmaBenchError> {
        let memory = QueueMemory {
            cpu: self.ring.phys,
            bus: BusAddr(self.ring.phys.get()),
        };
        SisciDmaQueue::create(cpu, self.bar0, memory, QUEUE_ENTRIES)
            .await
            .map_err(AdapterDmaBenchError::Queue)
    }

    /// Starts one copy of `size` bytes from `local_offset` / `remote_offset` (a read when
    /// `direction` is [`DmaDirection::Read`]) and waits for it (`SCIStartDmaTransfer`,
    /// `SCIWaitForDMAQueue`); refused as SISCI refuses a bad transfer.
    pub async fn copy(
        &self,
        queue: &SisciDmaQueue<Agent>,
        direction: DmaDirection,
        size: u64,
        local_offset: u64,
        remote_offset: u64,
    ) -> Result<(), AdapterDmaBenchError> {
        let flags = match direction {
            DmaDirection::Write => 0,
            DmaDirection::Read => flag::DMA_READ,
        };
        let entry = VecEntry {
            size,
            local_offset,
            remote_offset,
            flags: 0,
        };
        let vector = Vector::check(&[entry], flags, self.local.size, self.remote.size)
            .map_err(AdapterDmaBenchError::Queue)?;
        let local_bus = BusAddr(self.local.phys.get());
        let window = self.window.bus_addr().offset(vector.remote_start);
        let batch = queue
            .start(&vector, local_bus, window)
            .await
            .map_err(AdapterDmaBenchError::Queue)?;
        match queue.wait(Some(batch.end)).await {
            Ok(QueueState::Done) => Ok(()),
            Ok(state) => Err(AdapterDmaBenchError::TransferFailed { size, state }),
            Err(e) => Err(AdapterDmaBenchError::Queue(e)),
        }
    }

    /// The timing model's account of one read request of `bytes` from the engine to the
    /// remote side on an idle fabric, in ns.
    fn read_round_trip_ns(&self, cluster: &Cluster, bytes: u64) -> Option<f64> {
        cluster
            .machine
            .idle_read_cost(
                Requester::Device(self.endpoint),
                self.window.bus_addr(),
                bytes,
            )
            .and_then(Result::ok)
            .map(|c| (c.path_ps + c.completer_ps) as f64 / 1000.0)
    }

    /// Undoes [`AdapterDmaSetup::new`].
    pub fn tear_down(&self, cluster: &Cluster) -> Result<(), AdapterDmaBenchError> {
        let seg = AdapterDmaBenchError::Segment;
        cluster
            .machine
            .with_fabric_mut(|f| {
                f.ntb_remove_requester(self.adapter, Requester::Device(self.endpoint))
            })
            .map_err(AdapterDmaBenchError::RequesterId)?;
        self.sci.unmap(&self.window).map_err(seg)?;
        self.sci.disconnect_segment(&self.connection).map_err(seg)?;
        for s in [&self.local, &self.ring, &self.remote] {
            self.sci.remove_segment(s).map_err(seg)?;
        }
        Ok(())
    }
}

/// Runs the benchmark on `cluster` (which it leaves at a later virtual time).
pub fn bench_adapter_dma(
    cluster: &Cluster,
    config: &AdapterDmaBenchConfig,
) -> Result<AdapterDmaBenchRun, AdapterDmaBenchError> {
    if config.repeat == 0 {
        return Err(BadCount::NoRepeat { per: "copy" }.into());
    }
    if let Some(&size) = config.sizes.iter().find(|&&s| s == 0) {
        return Err(BadCount::ZeroSize {
            what: "transfer",
            size,
        }
        .into());
    }
    let largest = config.sizes.iter().copied().max().unwrap_or(0);
    let machine = &cluster.machine;
    let setup = std::rc::Rc::new(AdapterDmaSetup::new(cluster, &config.host, largest)?);
    let read_round_trip_ns = setup.read_round_trip_ns(
        cluster,
        cluster.calibration.pcie.max_read_request_size.value as u64,
    );

    // What the engine reads: the source side's pattern, set up untimed.
    let pattern = host_pattern(largest);
    let (source, dest) = match config.direction {
        DmaDirection::Write => (setup.local, setup.remote),
        DmaDirection::Read => (setup.remote, setup.local),
    };
    machine.poke_memory(source.host, source.phys, &pattern);

    let cpu = machine.cpu(setup.host);
    let sizes = config.sizes.clone();
    let repeat = config.repeat;
    let direction = config.direction;
    let on_task = std::rc::Rc::clone(&setup);
    let samples = crate::booted::run_workload(machine, async move {
        let setup = on_task;
        let queue = setup.queue(cpu.clone()).await?;
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
                let start = cpu.now();
                setup.copy(&queue, direction, size, 0, 0).await?;
                seconds.push(cpu.now().since(start).as_secs_f64());
            }
            samples.push(DmaSample::from_seconds(size, &seconds));
        }
        queue.remove().await.map_err(AdapterDmaBenchError::Queue)?;
        Ok::<_, AdapterDmaBenchError>(samples)
    })?;

    let mut landed = vec![0u8; largest as usize];
    machine.peek_memory(dest.host, dest.phys, &mut landed);
    if let Some(offset) = crate::verify::first_difference(&landed, &pattern) {
        return Err(AdapterDmaBenchError::Mismatch {
            offset: offset as u64,
            size: largest,
        });
    }
    let run = AdapterDmaBenchRun {
        host: config.host.clone(),
        adapter: setup.adapter_name.clone(),
        peer: setup.peer_name.clone(),
        direction: config.direction,
        samples,
        verified_bytes: largest,
        read_round_trip_ns,
    };
    setup.tear_down(cluster)?;
    Ok(run)
}

/// One transfer of a SISCI DMA-queue program, as `examples/c/dma.c` makes it on the live
/// engine: segments of `size` bytes past the offsets on the host and its peer, a queue on
/// the host's adapter, one `SCIStartDmaTransfer` of `size` bytes at the offsets, and
/// `SCIWaitForDMAQueue`.
#[derive(Debug, Clone)]
pub struct DmaQueueTransfer {
    /// The host whose adapter moves the bytes.
    pub host: String,
    /// Push (write) or pull (read).
    pub direction: DmaDirection,
    /// Bytes.
    pub size: u64,
    /// Where the bytes start in the local segment.
    pub local_offset: u64,
    /// Where the bytes start in the remote segment.
    pub remote_offset: u64,
}

/// What the transfer took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DmaQueueTransferRun {
    /// From the start call until the wait returned, in seconds of virtual time.
    pub seconds: f64,
    /// Bytes compared at the destination after the transfer.
    pub verified_bytes: u64,
}

/// Runs a DMA-queue program's transfer on `cluster`'s engine and checks its bytes landed.
pub fn dma_queue_transfer(
    cluster: &Cluster,
    t: &DmaQueueTransfer,
) -> Result<DmaQueueTransferRun, AdapterDmaBenchError> {
    let span = t
        .size
        .checked_add(t.local_offset.max(t.remote_offset))
        .ok_or(AdapterDmaBenchError::Span {
            size: t.size,
            offset: t.local_offset.max(t.remote_offset),
        })?;
    let setup = std::rc::Rc::new(AdapterDmaSetup::new(cluster, &t.host, span)?);
    let pattern = host_pattern(t.size);
    let ((source, source_offset), (dest, dest_offset)) = match t.direction {
        DmaDirection::Write => (
            (setup.local, t.local_offset),
            (setup.remote, t.remote_offset),
        ),
        DmaDirection::Read => (
            (setup.remote, t.remote_offset),
            (setup.local, t.local_offset),
        ),
    };
    let machine = &cluster.machine;
    machine.poke_memory(source.host, source.phys.offset(source_offset), &pattern);
    let cpu = machine.cpu(setup.host);
    let on_task = std::rc::Rc::clone(&setup);
    let transfer = t.clone();
    let seconds = crate::booted::run_workload(machine, async move {
        let queue = on_task.queue(cpu.clone()).await?;
        let start = cpu.now();
        on_task
            .copy(
                &queue,
                transfer.direction,
                transfer.size,
                transfer.local_offset,
                transfer.remote_offset,
            )
            .await?;
        let seconds = cpu.now().since(start).as_secs_f64();
        queue.remove().await.map_err(AdapterDmaBenchError::Queue)?;
        Ok::<f64, AdapterDmaBenchError>(seconds)
    })?;
    let mut landed = vec![0u8; t.size as usize];
    machine.peek_memory(dest.host, dest.phys.offset(dest_offset), &mut landed);
    if let Some(offset) = crate::verify::first_difference(&landed, &pattern) {
        return Err(AdapterDmaBenchError::Mismatch {
            offset: offset as u64,
            size: t.size,
        });
    }
    setup.tear_down(cluster)?;
    Ok(DmaQueueTransferRun {
        seconds,
        verified_bytes: t.size,
    })
}
