//! QD1 reads through a client of the distributed NVMe driver: a manager on one host, a
//! client on another, one queue pair whose SQ is placed where the experiment says (Paper V
//! Fig. 34, seed 003 §5). Each read is timed from the client's submission to the completion
//! it polls in its own RAM.

use crate::stats::LatencySummary;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, Manager, SqPlacement};
use smartio_fabric::{Access, NodeKind, Requester};
use smartio_host::HostOs;
use smartio_platform::BusAddr;
use smartio_platform::Clock;
use smartio_smartio::{Fdid, SegmentLocation, SmartIo};
use std::cell::RefCell;
use std::rc::Rc;

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
    /// propagation and chip latency both ways (no serialization, no completer time).
    pub sq_fetch_path_ns: f64,
    /// Reads done.
    pub ops: u64,
    /// Latency in nanoseconds.
    pub lat_ns: LatencySummary,
}

/// Runs `config` on `cluster`.
pub fn client_qd1(cluster: &Cluster, config: &ClientQd1Config) -> Result<ClientQd1Result, String> {
    let hosts = HostOs::boot_all(&cluster.sim).map_err(|e| e.to_string())?;
    let smartio = SmartIo::new(&cluster.sim, &hosts, &cluster.calibration);
    smartio.register_all().map_err(|e| e.to_string())?;
    let fdid = smartio.find(&config.device).map_err(|e| e.to_string())?;
    let host = |name: &str| {
        hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .ok_or_else(|| format!("unknown host {name:?}"))
    };
    let (mos, cos) = (host(&config.manager)?, host(&config.client)?);
    let out = Rc::new(RefCell::new(None));
    let slot = out.clone();
    let cfg = config.clone();
    let names: Vec<String> = hosts.iter().map(|h| h.name().to_string()).collect();
    cluster.sim.spawn(async move {
        let run = async {
            let manager = Manager::start(&smartio, &mos, fdid)
                .await
                .map_err(|e| e.to_string())?;
            let client = Client::connect(&smartio, &cos, fdid, &manager, cfg.bs)
                .await
                .map_err(|e| e.to_string())?;
            let peer = match &cfg.sq_device {
                Some(spec) => {
                    let peer = smartio.find(spec).map_err(|e| e.to_string())?;
                    Some(
                        smartio
                            .borrow_device(cos.id(), peer, false)
                            .map_err(|e| e.to_string())?,
                    )
                }
                None => None,
            };
            let placement = peer.map_or(cfg.placement, SqPlacement::Peer);
            let q = client
                .create_queue(4, placement)
                .await
                .map_err(|e| e.to_string())?;
            let sq_in = match q.sq_location() {
                SegmentLocation::Ram { host, .. } => format!("{} RAM", names[host.index()]),
                SegmentLocation::Device { fdid, .. } if fdid == client.hold().fdid => {
                    "controller memory".to_string()
                }
                SegmentLocation::Device { .. } => {
                    format!("{} memory", cfg.sq_device.as_deref().unwrap_or("device"))
                }
            };
            let (sq_fetch_chips, sq_fetch_path_ns) = match q.sq_location() {
                // The controller reads its own memory buffer internally.
                SegmentLocation::Device { fdid: at, .. } if at == fdid => (Vec::new(), 0.0),
                _ => fetch_path(&smartio, fdid, q.sq_device_addr())?,
            };
            let ns = *manager
                .namespaces()
                .first()
                .ok_or_else(|| "the controller has no namespace".to_string())?;
            let blocks_per_io = (cfg.bs / u64::from(ns.lba_size)).max(1);
            let span = (ns.blocks / blocks_per_io).clamp(1, 1 << 20);
            let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
            let cpu = cos.cpu();
            let mut samples = Vec::with_capacity(cfg.ops as usize);
            for _ in 0..cfg.ops.max(1) {
                let lba = rng.random_range(0..span) * blocks_per_io;
                let t0 = cpu.now();
                client
                    .io(&q, BlockOp::Read, ns.nsid, lba, blocks_per_io as u32, 0)
                    .await
                    .map_err(|e| e.to_string())?;
                samples.push(cpu.now().since(t0).as_ps());
            }
            client.leave().await.map_err(|e| e.to_string())?;
            if let Some(peer) = peer {
                smartio.return_device(peer).map_err(|e| e.to_string())?;
            }
            Ok(ClientQd1Result {
                sq_in,
                sq_fetch_chips,
                sq_fetch_path_ns,
                ops: samples.len() as u64,
                lat_ns: LatencySummary::from_ps(&samples),
            })
        };
        *slot.borrow_mut() = Some(run.await);
    });
    cluster.sim.run();
    let r = out.borrow_mut().take();
    r.unwrap_or_else(|| Err("the run did not finish (a task is stuck)".into()))
}

/// The chips a 64-byte read by the controller `fdid` at `addr` (its SQ) passes, and the
/// timing model's idle round trip over that path (see [`ClientQd1Result::sq_fetch_path_ns`]).
fn fetch_path(smartio: &SmartIo, fdid: Fdid, addr: BusAddr) -> Result<(Vec<String>, f64), String> {
    let info = smartio
        .devices()
        .into_iter()
        .find(|d| d.fdid == fdid)
        .ok_or_else(|| format!("fdid {fdid} is not registered"))?;
    let sim = smartio.sim();
    let fabric = sim.fabric();
    let lender = smartio
        .host_by_name(&info.lender)
        .map_err(|e| e.to_string())?;
    let endpoint = fabric
        .endpoint_by_name(lender, &info.device)
        .ok_or_else(|| format!("{} is not in the fabric", info.qualified()))?;
    let route = fabric
        .route(Requester::Device(endpoint), addr, 64, Access::Read)
        .map_err(|e| format!("the SQ fetch does not route: {e}"))?;
    let timing = sim.timing();
    let mut chips = Vec::new();
    let mut one_way_ps = 0;
    for (i, hop) in route.hops.iter().enumerate() {
        one_way_ps += timing.links[hop.link.index()].prop_ps;
        if i + 1 == route.hops.len() {
            break;
        }
        one_way_ps += timing.node_latency_ps[hop.node.index()];
        let node = fabric.node(hop.node);
        let chip = match &node.kind {
            NodeKind::Switch { chip } | NodeKind::ClusterSwitch { chip } => chip.clone(),
            NodeKind::Ntb { spec, .. } => spec.chip.clone(),
            NodeKind::RootComplex => "root complex".to_string(),
            NodeKind::Device { .. } => continue,
        };
        chips.push(format!("{} ({chip})", node.name));
    }
    Ok((chips, 2.0 * one_way_ps as f64 / 1000.0))
}
