//! QD1 reads through a client of the distributed NVMe driver: a manager on one host, a
//! client on another, one queue pair whose SQ is placed where the experiment says (Paper V
//! Fig. 34, seed 003 §5). Each read is timed from the client's submission to the completion
//! it polls in its own RAM.

use crate::booted::{run_workload, BootError, Booted, Stuck};
use crate::stats::{LatencyRecorder, LatencySummary};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, DistError, Manager, SqPlacement};
use smartio_fabric::Requester;
use smartio_platform::Clock;
use smartio_platform::{AccessError, BusAddr};
use smartio_smartio::{Fdid, SegmentLocation, SmartIo, SmartIoError};
use thiserror::Error;

/// Why [`client_qd1`] could not run or did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientQd1Error {
    /// `--ops 0`: there would be nothing to measure.
    #[error("--ops 0: at least one read")]
    NoOps,
    /// The hosts did not boot, or the device or a host is unknown.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The distributed driver failed (no manager, no queue pair, a failed read).
    #[error(transparent)]
    Dist(#[from] DistError),
    /// SmartIO refused (unknown `--sq-device`, a hold it cannot give or take back).
    #[error(transparent)]
    SmartIo(#[from] SmartIoError),
    /// The controller reports no namespace to read from.
    #[error("the controller has no namespace")]
    NoNamespace,
    /// The controller is not among SmartIO's registered functions (an emulator bug).
    #[error("fdid {0} is not registered")]
    NotRegistered(Fdid),
    /// A registered function is missing from the fabric (an emulator bug).
    #[error("{device} is not in the fabric")]
    NotInFabric {
        /// The function, `lender:device`.
        device: String,
    },
    /// The timing model found no route for the controller's SQE fetch.
    #[error("the SQ fetch does not route: {0}")]
    SqFetchDoesNotRoute(#[source] AccessError),
    /// The run ended before the workload finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ClientQd1Config {
    /// Host running the manager.
    pub manager: String,
    /// Host running the client.
    pub client: String,
    /// The controller, `lender:device`.
    pub device: String,
    /// Where the client's SQ goes.
    pub placement: SqPlacement,
    /// A device (`lender:device`, e.g. a GPU next to the controller) whose memory takes the
    /// SQ instead: the client borrows it shared and places the SQ there
    /// ([`SqPlacement::Peer`]); `placement` is then ignored.
    pub sq_device: Option<String>,
    /// Reads.
    pub ops: u64,
    /// Block size in bytes.
    pub bs: u64,
    /// Random-offset seed.
    pub seed: u64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientQd1Result {
    /// Where the SQ ended up: a host's RAM, the controller's memory or another device's.
    pub sq_in: String,
    /// What the controller's 64-byte SQE fetch passes on its way to the SQ: every chip
    /// (switches, NTBs, root complexes) as `name (chip)`, the node holding the SQ excluded
    /// (for RAM that is its host's root complex); empty for the controller's own memory.
    pub sq_fetch_chips: Vec<String>,
    /// The timing model's round trip for that fetch over idle links, path only: link
    /// propagation, chip latency and TLP serialization both ways (the read request, then
    /// its 64-byte completion), without the completer's time.
    pub sq_fetch_path_ns: f64,
    /// The timing model's time for whatever holds the SQ to answer the fetch: the root
    /// complex and DRAM for RAM, a BAR read for device memory, nothing for the controller's
    /// own buffer.
    pub sq_completer_ns: f64,
    /// What storing one SQE costs the client's CPU in the timing model: a store into its
    /// own RAM, or an uncached store sent through its root complex.
    pub sq_store_ns: f64,
    /// Reads done.
    pub ops: u64,
    /// Latency in nanoseconds.
    pub lat_ns: LatencySummary,
}

/// Runs `config` on `cluster`.
pub fn client_qd1(
    cluster: &Cluster,
    config: &ClientQd1Config,
) -> Result<ClientQd1Result, ClientQd1Error> {
    if config.ops == 0 {
        return Err(ClientQd1Error::NoOps);
    }
    let (booted, fdid) = Booted::with_device(cluster, &config.device)?;
    let (mos, cos) = (booted.host(&config.manager)?, booted.host(&config.client)?);
    let names = booted.names();
    let Booted { smartio, .. } = booted;
    let cfg = config.clone();
    run_workload(&cluster.machine, async move {
        let run = async {
            let manager = Manager::start(&smartio, &mos, fdid).await?;
            let client = Client::connect(&smartio, &cos, fdid, &manager, cfg.bs).await?;
            let peer = match &cfg.sq_device {
                Some(spec) => {
                    let peer = smartio.find(spec)?;
                    Some(smartio.borrow_device(cos.id(), peer, false)?)
                }
                None => None,
            };
            let placement = peer.map_or(cfg.placement, SqPlacement::Peer);
            let q = client.create_queue(4, placement).await?;
            let sq_in = match q.sq_location() {
                SegmentLocation::Ram { host, .. } => format!("{} RAM", names[host.index()]),
                SegmentLocation::Device { fdid, .. } if fdid == client.hold().fdid => {
                    "controller memory".to_string()
                }
                SegmentLocation::Device { .. } => {
                    format!("{} memory", cfg.sq_device.as_deref().unwrap_or("device"))
                }
                SegmentLocation::LocalDevice { host, .. } => {
                    format!("{} device memory", names[host.index()])
                }
            };
            let fetch = match q.sq_location() {
                // The controller reads its own memory buffer internally.
                SegmentLocation::Device { fdid: at, .. } if at == fdid => SqFetch::default(),
                _ => fetch_path(&smartio, fdid, q.sq_device_addr())?,
            };
            let sq_store_ns = {
                let local = matches!(q.sq_location(), SegmentLocation::Ram { host, .. } if host == cos.id());
                smartio
                    .machine()
                    .cpu_store_cost(local)
                    .map_or(0.0, |d| d.as_ps() as f64 / 1000.0)
            };
            let ns = *manager
                .namespaces()
                .first()
                .ok_or(ClientQd1Error::NoNamespace)?;
            let blocks_per_io = (cfg.bs / u64::from(ns.lba_size)).max(1);
            let span = (ns.blocks / blocks_per_io).clamp(1, 1 << 20);
            let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
            let cpu = cos.cpu();
            let mut samples = LatencyRecorder::new();
            let mut phase =
                crate::progress::begin("QD1 reads", cfg.ops, crate::progress::Unit::Items("reads"));
            for done in 1..=cfg.ops {
                phase.set(done);
                let lba = rng.random_range(0..span) * blocks_per_io;
                let t0 = cpu.now();
                client
                    .io(&q, BlockOp::Read, ns.nsid, lba, blocks_per_io as u32, 0)
                    .await?;
                samples.record(cpu.now().since(t0).as_ps());
            }
            client.leave().await?;
            if let Some(peer) = peer {
                smartio.return_device(peer)?;
            }
            Ok(ClientQd1Result {
                sq_in,
                sq_fetch_chips: fetch.chips,
                sq_fetch_path_ns: fetch.path_ns,
                sq_completer_ns: fetch.completer_ns,
                sq_store_ns,
                ops: samples.count(),
                lat_ns: LatencySummary::of(&samples),
            })
        };
        run.await
    })
}

/// The timing model's account of one SQE fetch.
#[derive(Debug, Default)]
struct SqFetch {
    chips: Vec<String>,
    path_ns: f64,
    completer_ns: f64,
}

/// The chips a 64-byte read by the controller `fdid` at `addr` (its SQ) passes, the timing
/// model's idle round trip over that path, and the completer's time (see
/// [`ClientQd1Result`]).
fn fetch_path(smartio: &SmartIo, fdid: Fdid, addr: BusAddr) -> Result<SqFetch, ClientQd1Error> {
    let info = smartio
        .devices()
        .into_iter()
        .find(|d| d.fdid == fdid)
        .ok_or(ClientQd1Error::NotRegistered(fdid))?;
    let machine = smartio.machine();
    let fabric = machine.fabric();
    let lender = smartio.host_by_name(&info.lender)?;
    let endpoint = fabric
        .endpoint_by_name(lender, &info.device)
        .ok_or_else(|| ClientQd1Error::NotInFabric {
            device: info.qualified(),
        })?;
    drop(fabric);
    let cost = match machine.idle_read_cost(Requester::Device(endpoint), addr, 64) {
        Some(cost) => cost.map_err(ClientQd1Error::SqFetchDoesNotRoute)?,
        // An engine without a timing model has nothing to explain.
        None => return Ok(SqFetch::default()),
    };
    Ok(SqFetch {
        chips: cost.chips,
        path_ns: cost.path_ps as f64 / 1000.0,
        completer_ns: cost.completer_ps as f64 / 1000.0,
    })
}
