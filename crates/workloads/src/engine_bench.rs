//! How fast the engine simulates: TLP arrivals per wall-clock second on one core, for a
//! long DMA write stream and a long DMA read stream on `local-chassis`.

use crate::dma_bench::{bench_dma, DmaBenchConfig, DmaBenchError, DmaDirection};
use serde::Serialize;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterError};
use std::time::Instant;
use thiserror::Error;

/// The engine's measured speed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineBenchResult {
    /// TLPs delivered (writes, read requests, completions).
    pub tlp_arrivals: u64,
    /// Events taken from the queue or processed on the fast path.
    pub events: u64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Simulated TLP arrivals per wall second.
    pub tlp_arrivals_per_s: f64,
    /// Simulated time covered, in seconds.
    pub simulated_seconds: f64,
    /// What each link carried (links that carried nothing left out).
    pub links: Vec<smartio_machine::LinkTraffic>,
}

/// Why the engine benchmark could not run.
#[derive(Debug, Error)]
pub enum EngineBenchError {
    /// The shipped scenario it runs on would not start (an emulator bug).
    #[error("driver error: {0}")]
    Cluster(#[from] ClusterError),
    /// `--bytes` that is not a whole number of copies each way.
    #[error(
        "--bytes {bytes}: a positive multiple of {pair} (one 4 MiB copy each way), at most {} \
         copies each way",
        u32::MAX
    )]
    Bytes {
        /// As given.
        bytes: u64,
        /// Bytes of one copy each way.
        pair: u64,
    },
    /// The DMA benchmark failed.
    #[error(transparent)]
    Dma(#[from] DmaBenchError),
}

/// Streams `bytes` of DMA writes and reads through the engine and times it.
pub fn bench_engine(
    calibration: &Calibration,
    bytes: u64,
) -> Result<EngineBenchResult, EngineBenchError> {
    let cluster = Cluster::new("local-chassis", calibration)?;
    // 4 MiB copies: large enough to stream, small enough for the allocator to reuse buffers,
    // so the figure measures the engine rather than page faults.
    let chunk: u64 = 4 << 20;
    let repeat = bytes
        .is_multiple_of(2 * chunk)
        .then_some(bytes / 2 / chunk)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or(EngineBenchError::Bytes {
            bytes,
            pair: 2 * chunk,
        })?;
    let started = Instant::now();
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let config = DmaBenchConfig {
            host: "local".into(),
            device: "dma0".into(),
            direction,
            sizes: vec![chunk],
            repeat,
        };
        bench_dma(&cluster, &config)?;
    }
    let wall = started.elapsed().as_secs_f64();
    let counters = cluster.machine.counters();
    Ok(EngineBenchResult {
        tlp_arrivals: counters.tlp_arrivals,
        events: counters.events,
        wall_seconds: wall,
        tlp_arrivals_per_s: counters.tlp_arrivals as f64 / wall,
        simulated_seconds: cluster.machine.now().as_ps() as f64 * 1e-12,
        links: smartio_machine::LinkTraffic::carried_since(&[], cluster.machine.link_traffic()),
    })
}
