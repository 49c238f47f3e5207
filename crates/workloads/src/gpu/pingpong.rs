//! Ping-pong between kernels on two GPUs (Paper V §7.1.4–7.1.5, Figs. 25 and 27; Paper IV
//! Fig. 11): a thread on GPU A stores a counter into a word GPU B polls, B's thread stores it
//! back into a word A polls, and A times every round trip with its cycle counter
//! (`clock64()`), as the papers' CUDA program did — no CPU on the data path and no CPU clock
//! in the measurement. The counters live in the GPUs' memories (each store crosses to the
//! peer's BAR1 aperture) or in the host's RAM (each poll is then a read on the bus).
//!
//! ```text
//!   GPU A (ping)                                   GPU B (pong)
//!   t0 = clock64()
//!   store i ──► B's counter                         wait own counter == i
//!   wait own counter == i                      ◄──  store i ──► A's counter
//!   t1 = clock64(); results[i] = t1 - t0
//! ```
//!
//! Recorded ([`gpu_pingpong_explained`]), the ping kernel reports each round trip's end to
//! an [`Explainer`], in the simulation's time from its first `clock64()` to its second
//! (what the cycle counter rounds to whole cycles).

use super::{
    check_count, get_addr, get_u64, host_memory, on_two_gpus, path, put_addr, GpuWorkloadError,
};
use crate::attach::Workbench;
use crate::explain::{ExplainSpec, Explainer, Explanation, Operation};
use crate::stats::{LatencyRecorder, LatencySummary};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_devices::gpu::kernel::{
    FaultReason, KernelFault, KernelFn, KernelFuture, ThreadContext,
};
use smartio_devices::gpu::spec::GpuAddr;
use smartio_drivers::gpu::GpuContext;
use smartio_host::DmaDirection;
use smartio_machine::{Agent, Machine};
use smartio_platform::SimDuration;
use std::cell::RefCell;
use std::rc::Rc;

/// Most round trips (the CLI's limit too).
pub const MAX_ITERATIONS: u32 = 100_000_000;

/// Where the two counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CounterPlace {
    /// Each in its poller's GPU memory: stores cross to the peer's aperture.
    Gpu,
    /// Both in the host's RAM: stores and polls go to host memory.
    Host,
}

/// Most distinct round trips reported as steps.
pub const MAX_STEPS: usize = 32;

/// One step of the round trips' distribution: distinct values each within `STEP_CYCLES` of
/// the next (the cycle counter's own rounding) form one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RttStep {
    /// The step's shortest round trip, in nanoseconds.
    pub rtt_ns: f64,
    /// Round trips in the step.
    pub count: u64,
}

/// Distinct cycle counts at most this far apart belong to one step.
const STEP_CYCLES: u64 = 2;

/// The steps of `cycles` (round trips in A's clock cycles) at `khz`, with counts; empty
/// when the values form more than [`MAX_STEPS`] steps (no step structure to speak of).
fn steps(cycles: &[u64], khz: u64) -> Vec<RttStep> {
    let mut counts = std::collections::BTreeMap::new();
    for &c in cycles {
        *counts.entry(c).or_insert(0u64) += 1;
    }
    let mut out: Vec<(u64, u64, u64)> = Vec::new(); // (first, last, count)
    for (c, count) in counts {
        match out.last_mut() {
            Some(step) if c - step.1 <= STEP_CYCLES => {
                step.1 = c;
                step.2 += count;
            }
            _ => out.push((c, c, count)),
        }
        if out.len() > MAX_STEPS {
            return Vec::new();
        }
    }
    out.into_iter()
        .map(|(first, _, count)| RttStep {
            rtt_ns: first as f64 * 1e6 / khz as f64,
            count,
        })
        .collect()
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct GpuPingPongConfig {
    /// Host that sets the kernels up (its CPU takes no part in the measurement).
    pub host: String,
    /// The pinging GPU (`gpu0` or `lender:gpu0`).
    pub a: String,
    /// The echoing GPU.
    pub b: String,
    /// Round trips.
    pub iterations: u32,
    /// Where the counters live.
    pub counters: CounterPlace,
}

/// What the kernels measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuPingPongResult {
    /// Scenario name.
    pub scenario: String,
    /// Host, as given.
    pub host: String,
    /// Pinging GPU, as given.
    pub a: String,
    /// Echoing GPU, as given.
    pub b: String,
    /// Round trips.
    pub iterations: u32,
    /// Where the counters lived.
    pub counters: CounterPlace,
    /// A's cycle counter frequency in kHz (cycles are converted to time with it).
    pub clock_khz: u64,
    /// Half the round trip, in nanoseconds.
    pub one_way_ns: LatencySummary,
    /// The round trip measured by A's cycle counter, in nanoseconds.
    pub rtt_ns: LatencySummary,
    /// The distinct round trips A measured, shortest first, with how often each occurred —
    /// the distribution's steps (the polling loops notice a store only at their next
    /// read, so round trips fall on a few values with none between); empty when they form
    /// more than [`MAX_STEPS`] steps.
    pub steps: Vec<RttStep>,
    /// Nodes A's store to B's counter reaches, in order.
    pub path_a_to_b: Vec<String>,
    /// Nodes B's store to A's counter reaches, in order.
    pub path_b_to_a: Vec<String>,
}

/// A fault for a parameter block the kernel cannot read (the workload wrote it: a bug).
fn bad_params(t: &ThreadContext<Agent>) -> KernelFault {
    KernelFault {
        address: GpuAddr::Device(u64::MAX),
        reason: FaultReason::OutsideMemory {
            memory: t.memory_size(),
        },
    }
}

/// Waits until the counter at `own` reaches `i`.
async fn wait_counter(t: &ThreadContext<Agent>, own: GpuAddr, i: u64) -> Result<(), KernelFault> {
    match own {
        GpuAddr::Device(o) => t.wait_until(o, |v| v >= i).await.map(|_| ()),
        GpuAddr::Bus(a) => t.poll_bus_until(a, |v| v >= i).await.map(|_| ()),
    }
}

/// Where the ping kernel reports its round trips while the run is recorded. The kernel
/// stays loaded after the run (in the cluster's registry, which the GPUs' models hold), so
/// it holds the explainer — and through it the machine — only until the slot is emptied,
/// at the latest when the run's [`Reporting`] guard is dropped.
type ReportSlot = Rc<RefCell<Option<Rc<Explainer>>>>;

/// Empties a [`ReportSlot`] when dropped, whichever way the run ends.
struct Reporting(ReportSlot);

impl Drop for Reporting {
    fn drop(&mut self) {
        self.0.borrow_mut().take();
    }
}

/// `cycles` of a clock of `khz` kHz, in picoseconds (rounded down).
fn cycles_to_ps(cycles: u64, khz: u64) -> u64 {
    u64::try_from(u128::from(cycles) * 1_000_000_000 / u128::from(khz.max(1))).unwrap_or(u64::MAX)
}

/// The ping kernel. Parameters: peer counter, own counter, results offset, iterations.
/// Each round trip's end goes to the explainer in `report`, if any.
fn ping(report: ReportSlot) -> KernelFn<Agent> {
    Rc::new(move |t: ThreadContext<Agent>| -> KernelFuture {
        let explainer = report.borrow().clone();
        Box::pin(async move {
            let p = t.params();
            let (Some(peer), Some(own), Some(results), Some(n)) = (
                get_addr(p, 0),
                get_addr(p, 16),
                get_u64(p, 32),
                get_u64(p, 40),
            ) else {
                return Err(bad_params(&t));
            };
            for i in 1..=n {
                let t0 = t.clock64().await;
                let start = t.now();
                t.store_u64(peer, i).await?;
                wait_counter(&t, own, i).await?;
                let t1 = t.clock64().await;
                if let Some(explainer) = &explainer {
                    let what = || format!("round trip {i} (clock64 {t0} -> {t1})");
                    explainer.report(&Operation {
                        kind: None,
                        track: "ping-pong",
                        what: &what,
                        start,
                        end: t.now(),
                        // As `measure` converts the cycles.
                        recorded: SimDuration::from_ps(cycles_to_ps(t1 - t0, t.clock_khz())),
                    });
                }
                t.store_u64(GpuAddr::Device(results + 8 * (i - 1)), t1 - t0)
                    .await?;
            }
            Ok(())
        })
    })
}

/// The pong kernel. Parameters: peer counter, own counter, iterations.
fn pong() -> KernelFn<Agent> {
    Rc::new(|t: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let p = t.params();
            let (Some(peer), Some(own), Some(n)) =
                (get_addr(p, 0), get_addr(p, 16), get_u64(p, 32))
            else {
                return Err(bad_params(&t));
            };
            for i in 1..=n {
                wait_counter(&t, own, i).await?;
                t.store_u64(peer, i).await?;
            }
            Ok(())
        })
    })
}

/// Runs the ping-pong on `cluster` (which it leaves at a later virtual time); borrowed GPUs
/// are given back at the end.
pub fn gpu_pingpong(
    cluster: &Cluster,
    config: &GpuPingPongConfig,
) -> Result<GpuPingPongResult, GpuWorkloadError> {
    gpu_pingpong_explained(cluster, config, None).map(|(result, _)| result)
}

/// [`gpu_pingpong`], recording the round trips to explain those `explain` asks for (and to
/// keep the trace); without `explain`, or on an engine that records nothing, the
/// explanation is empty.
pub fn gpu_pingpong_explained(
    cluster: &Cluster,
    config: &GpuPingPongConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(GpuPingPongResult, Explanation), GpuWorkloadError> {
    check_count("--iterations", config.iterations, MAX_ITERATIONS)?;
    let config = config.clone();
    let explain = explain.cloned();
    let (host, a, b) = (config.host.clone(), config.a.clone(), config.b.clone());
    on_two_gpus(
        cluster,
        &host,
        &a,
        &b,
        async move |machine, bench, ga, gb| {
            measure(machine, bench, ga, gb, &config, explain.as_ref()).await
        },
    )
}

/// Where each kernel's counters are: (A's own, B's own, A's address of B's, B's address of
/// A's), and what to undo afterwards.
struct Counters {
    a_own: GpuAddr,
    b_own: GpuAddr,
    a_to_b: GpuAddr,
    b_to_a: GpuAddr,
    /// B's mapping of host counters, undone afterwards.
    unmap: Option<(smartio_host::DeviceHandle, smartio_platform::BusAddr)>,
}

async fn counters(
    bench: &Workbench,
    ga: &GpuContext,
    gb: &GpuContext,
    place: CounterPlace,
) -> Result<(Counters, Vec<smartio_drivers::gpu::HostBuffer>), GpuWorkloadError> {
    match place {
        CounterPlace::Gpu => {
            let fa = ga.malloc(8)?;
            let fb = gb.malloc(8)?;
            let a_to_b = ga.enable_peer_access(gb)?.addr(&fb)?;
            let b_to_a = gb.enable_peer_access(ga)?.addr(&fa)?;
            // Cleared before the kernels start, as a cudaMemset would.
            let zero = ga.host_alloc(8)?;
            ga.memcpy(fa.addr(), zero.addr(), 8).await?;
            ga.memcpy(a_to_b, zero.addr(), 8).await?;
            Ok((
                Counters {
                    a_own: fa.addr(),
                    b_own: fb.addr(),
                    a_to_b,
                    b_to_a,
                    unmap: None,
                },
                vec![zero],
            ))
        }
        CounterPlace::Host => {
            // Both counters in one pinned page of the host, mapped for each GPU.
            let page = ga.host_alloc(16)?;
            bench
                .os
                .write_memory(page.cpu, &[0u8; 16])
                .map_err(host_memory("counters"))?;
            let b_sees = gb
                .handle()
                .dma_map(page.cpu, 16, DmaDirection::Bidirectional)?;
            Ok((
                Counters {
                    a_own: page.addr(),
                    b_own: GpuAddr::Bus(b_sees.offset(8)),
                    a_to_b: page.addr().offset(8),
                    b_to_a: GpuAddr::Bus(b_sees),
                    unmap: Some((gb.handle().clone(), b_sees)),
                },
                vec![page],
            ))
        }
    }
}

async fn measure(
    machine: &Machine,
    bench: &Workbench,
    ga: &GpuContext,
    gb: &GpuContext,
    config: &GpuPingPongConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(GpuPingPongResult, Explanation), GpuWorkloadError> {
    let n = u64::from(config.iterations);
    let (c, host_buffers) = counters(bench, ga, gb, config.counters).await?;
    let results = ga.malloc(8 * n)?;
    // Recorded from the kernels' launch on (opening the GPUs and the counters' set-up are
    // not explained).
    let report = Reporting(Rc::new(RefCell::new(
        explain.and_then(|spec| Explainer::start(machine, spec)),
    )));
    let ping = ga.load_kernel("smartio.pingpong.ping", ping(report.0.clone()));
    let pong = gb.load_kernel("smartio.pingpong.pong", pong());
    let mut ping_params = Vec::new();
    put_addr(&mut ping_params, c.a_to_b);
    put_addr(&mut ping_params, c.a_own);
    ping_params.extend_from_slice(&results.offset.to_le_bytes());
    ping_params.extend_from_slice(&n.to_le_bytes());
    let mut pong_params = Vec::new();
    put_addr(&mut pong_params, c.b_to_a);
    put_addr(&mut pong_params, c.b_own);
    pong_params.extend_from_slice(&n.to_le_bytes());
    let sa = ga.create_stream().await?;
    let sb = gb.create_stream().await?;
    sb.launch(pong, 1, &pong_params).await?;
    sa.launch(ping, 1, &ping_params).await?;
    sa.synchronize().await?;
    sb.synchronize().await?;
    sa.destroy().await?;
    sb.destroy().await?;
    let explanation = report
        .0
        .borrow_mut()
        .take()
        .map(|e| e.finish())
        .unwrap_or_default();
    // The round trips, as A's cycle counter saw them.
    let back = ga.host_alloc(8 * n)?;
    ga.memcpy(back.addr(), results.addr(), 8 * n).await?;
    let mut raw = vec![0u8; (8 * n) as usize];
    bench
        .os
        .read_memory(back.cpu, &mut raw)
        .map_err(host_memory("results"))?;
    let khz = ga.properties().clock_khz.max(1);
    let mut rtt_ps = LatencyRecorder::new();
    let mut all_cycles = Vec::with_capacity(n as usize);
    for w in raw.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let cycles = u64::from_le_bytes(b);
        all_cycles.push(cycles);
        rtt_ps.record(cycles_to_ps(cycles, khz));
    }
    let rtt_ns = LatencySummary::of(&rtt_ps);
    let result = GpuPingPongResult {
        scenario: machine.fabric().name.clone(),
        host: config.host.clone(),
        a: config.a.clone(),
        b: config.b.clone(),
        iterations: config.iterations,
        counters: config.counters,
        clock_khz: khz,
        one_way_ns: rtt_ns.halved(),
        rtt_ns,
        steps: steps(&all_cycles, khz),
        path_a_to_b: path(machine, ga, c.a_to_b),
        path_b_to_a: path(machine, gb, c.b_to_a),
    };
    ga.host_free(back)?;
    ga.free(&results)?;
    if let Some((handle, bus)) = c.unmap {
        handle.dma_unmap(bus)?;
    }
    for h in host_buffers {
        ga.host_free(h)?;
    }
    Ok((result, explanation))
}
