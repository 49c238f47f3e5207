//! Ping-pong between two hosts' CPUs through NTB-mapped segments, like the papers' ping-pong
//! and Linux `ntb_pingpong`: host A stores a counter into B's segment; B polls its own memory,
//! sees it and stores it back into A's segment; A polls and sees the echo. The round trip is
//! timed at A from its store to the load that sees the echo.
//!
//! Recorded ([`pingpong_explained`]), A reports each round trip's end to an [`Explainer`].

use crate::explain::{ExplainSpec, Explainer, Explanation};
use crate::shm::{find_host, pair, ShmError};
use crate::stats::{LatencyRecorder, LatencySummary};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_platform::Clock;
use smartio_smartio::sisci::Sisci;
use std::cell::RefCell;
use std::rc::Rc;

/// What to measure.
#[derive(Debug, Clone)]
pub struct PingPongConfig {
    /// The host that pings.
    pub from: String,
    /// The host that echoes.
    pub to: String,
    /// Round trips.
    pub iterations: u32,
}

/// Round-trip times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PingPongResult {
    /// Scenario name.
    pub scenario: String,
    /// Pinging host.
    pub from: String,
    /// Echoing host.
    pub to: String,
    /// Round trips measured.
    pub iterations: u32,
    /// Round-trip time in nanoseconds.
    pub rtt_ns: LatencySummary,
}

/// Runs the ping-pong on `cluster`.
pub fn pingpong(cluster: &Cluster, config: &PingPongConfig) -> Result<PingPongResult, ShmError> {
    pingpong_explained(cluster, config, None).map(|(result, _)| result)
}

/// [`pingpong`], recording the round trips to explain those `explain` asks for (and to keep
/// the trace); without `explain`, or on an engine that records nothing, the explanation is
/// empty.
pub fn pingpong_explained(
    cluster: &Cluster,
    config: &PingPongConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(PingPongResult, Explanation), ShmError> {
    let a = find_host(cluster, &config.from)?;
    let b = find_host(cluster, &config.to)?;
    if a == b {
        return Err(ShmError::SameHost {
            host: config.from.clone(),
            workload: "ping-pong",
        });
    }
    let sci = Sisci::new(&cluster.machine);
    let (ping, pong) = pair(&sci, a, b, 4096)?;
    if config.iterations == 0 {
        return Err(crate::counts::BadCount::NoIterations.into());
    }
    let n = u64::from(config.iterations);
    let samples = Rc::new(RefCell::new(LatencyRecorder::new()));

    let out = samples.clone();
    let cpu = cluster.machine.cpu(a);
    // Recorded from the first round trip on (the segments' set-up is not explained).
    let explainer = explain.and_then(|spec| Explainer::start(&cluster.machine, spec));
    let reporter = explainer.clone();
    let route = format!("{} -> {} -> {}", config.from, config.to, config.from);
    cluster.machine.spawn(async move {
        let mut phase = crate::progress::begin(
            "round trips",
            n,
            crate::progress::Unit::Items("round trips"),
        );
        for i in 1..=n {
            phase.set(i);
            let t0 = cpu.now();
            let _ = ping.remote.store(0, &i.to_le_bytes()).await;
            let _ = ping.local.poll_until(0, 8, |b| b == i.to_le_bytes()).await;
            let t1 = cpu.now();
            if let Some(explainer) = &reporter {
                let what = || format!("round trip {i} ({route})");
                explainer.done("ping-pong", &what, t0, t1);
            }
            out.borrow_mut().record(t1.since(t0).as_ps());
        }
    });
    cluster.machine.spawn(async move {
        for i in 1..=n {
            let _ = pong.local.poll_until(0, 8, |b| b == i.to_le_bytes()).await;
            let _ = pong.remote.store(0, &i.to_le_bytes()).await;
        }
    });
    cluster.machine.run();
    let samples = samples.borrow();
    if samples.count() != n {
        return Err(ShmError::DidNotFinish {
            done: samples.count(),
            expected: n,
            stuck: crate::booted::stuck(&cluster.machine),
        });
    }
    let result = PingPongResult {
        scenario: cluster.machine.fabric().name.clone(),
        from: config.from.clone(),
        to: config.to.clone(),
        iterations: config.iterations,
        rtt_ns: LatencySummary::of(&samples),
    };
    Ok((result, explainer.map(|e| e.finish()).unwrap_or_default()))
}
