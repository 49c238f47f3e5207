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
use smartio_host::HostOs;
use smartio_platform::Clock;
use smartio_smartio::{SegmentLocation, SmartIo};
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
    /// Where the SQ ended up: a host's RAM or the controller's memory.
    pub sq_in: String,
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
            let q = client
                .create_queue(4, cfg.placement)
                .await
                .map_err(|e| e.to_string())?;
            let sq_in = match q.sq_location() {
                SegmentLocation::Ram { host, .. } => format!("{} RAM", names[host.index()]),
                SegmentLocation::Device { .. } => "controller memory".to_string(),
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
            Ok(ClientQd1Result {
                sq_in,
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
