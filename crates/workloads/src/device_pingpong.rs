//! Ping-pong between two devices' kernels, the model of the papers' CUDA ping-pong between
//! GPUs (Paper V §7.2, Figs. 26–27): no CPU and no host RAM on the data path.
//!
//! ```text
//!   kernel A (on device A)                         kernel B (on device B)
//!   store i ──► B memory[0]  (A's peer address)    wait B memory[0] == i
//!   wait A memory[0] == i                     ◄──  store i ──► A memory[0] (B's peer address)
//! ```
//!
//! Both devices are attached to one host (borrowed by Device Lending when written
//! `lender:device`), and each one's memory BAR is mapped for the other with
//! `dma_map_peer`, so SmartIO picks the shortest path (Paper V §4.4): inside the lender's
//! switch for two devices of the same lender, through the NTBs and the cluster switch for
//! devices of different lenders. A kernel is a device-side task: it stores with the
//! device's own requester id ([`smartio_machine::Machine::device`]) and spins on a word of its
//! own memory ([`DmaDevice::wait_word`]). Kernel A times each round trip with its clock;
//! the one-way latency is half of it.
//!
//! Recorded ([`device_pingpong_explained`]), kernel A reports each round trip's end to an
//! [`Explainer`].

use crate::attach::{AttachError, Workbench};
use crate::counts::BadCount;
use crate::driver_failure::DriverFailure;
use crate::explain::{ExplainSpec, Explainer, Explanation};
use crate::p2p::{copy_engine_pair, P2pError};
use crate::stats::{LatencyRecorder, LatencySummary};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_devices::dma::DmaDevice;
use smartio_fabric::{Access, EndpointId, Requester};
use smartio_machine::{Agent, Machine};
use smartio_platform::{AccessError, BarHandler, BusAddr, Clock, Port};
use std::cell::RefCell;
use std::rc::Rc;

/// The word of device memory each kernel polls (and the other one stores to).
const FLAG_OFFSET: u64 = 0;

/// What to measure.
#[derive(Debug, Clone)]
pub struct DevicePingPongConfig {
    /// Host the devices are attached to (it sets the kernels up; its CPU takes no part).
    pub host: String,
    /// The pinging device (`gpu0` or `lender:gpu0`); a GPU or DMA test device.
    pub a: String,
    /// The echoing device.
    pub b: String,
    /// Round trips.
    pub iterations: u32,
}

/// Device-to-device latency and the paths the stores take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DevicePingPongResult {
    /// Scenario name.
    pub scenario: String,
    /// Host the devices were attached to.
    pub host: String,
    /// The pinging device, as given.
    pub a: String,
    /// The echoing device, as given.
    pub b: String,
    /// Round trips measured.
    pub iterations: u32,
    /// Half the round-trip time, in nanoseconds.
    pub one_way_ns: LatencySummary,
    /// Round-trip time measured by kernel A, in nanoseconds.
    pub rtt_ns: LatencySummary,
    /// Nodes (chips, adapters, switches, the target) an 8-byte store from A to B reaches,
    /// in order.
    pub path_a_to_b: Vec<String>,
    /// Likewise from B to A.
    pub path_b_to_a: Vec<String>,
}

/// Runs the ping-pong on `cluster` (which it leaves at a later virtual time) and gives
/// borrowed devices back at the end.
pub fn device_pingpong(
    cluster: &Cluster,
    config: &DevicePingPongConfig,
) -> Result<DevicePingPongResult, P2pError> {
    device_pingpong_explained(cluster, config, None).map(|(result, _)| result)
}

/// [`device_pingpong`], recording the round trips to explain those `explain` asks for (and
/// to keep the trace); without `explain`, or on an engine that records nothing, the
/// explanation is empty.
pub fn device_pingpong_explained(
    cluster: &Cluster,
    config: &DevicePingPongConfig,
    explain: Option<&ExplainSpec>,
) -> Result<(DevicePingPongResult, Explanation), P2pError> {
    let bench = Workbench::with_devices(cluster, &config.host, &[&config.a, &config.b])?;
    let (a, b) = copy_engine_pair(cluster, &bench, &config.a, &config.b)?;
    if config.iterations == 0 {
        return Err(BadCount::NoIterations.into());
    }
    let n = u64::from(config.iterations);
    let machine = cluster.machine.clone();
    let results = Rc::new(RefCell::new(None::<Result<Measured, P2pError>>));
    let echo_failed = Rc::new(RefCell::new(None::<P2pError>));
    let out = results.clone();
    let echo_out = echo_failed.clone();
    let explain = explain.cloned();
    let explanation = Rc::new(RefCell::new(Explanation::default()));
    let explained = explanation.clone();
    let route = format!("{} -> {} -> {}", config.a, config.b, config.a);
    cluster.machine.spawn(async move {
        let run = async {
            let name_a = bench.attach_nth(0).await?;
            let name_b = bench.attach_nth(1).await?;
            let handle_a = bench.os.device(&name_a).map_err(AttachError::Host)?;
            let handle_b = bench.os.device(&name_b).map_err(AttachError::Host)?;
            let dma_error = DriverFailure::Dma;
            // pci_enable_device + pci_set_master, as any driver does first.
            for h in [&handle_a, &handle_b] {
                h.enable().await.map_err(DriverFailure::Access)?;
            }
            // Where each device reaches the other's memory.
            let a_to_b = handle_a
                .dma_map_peer(&handle_b, b.model.memory_bar())
                .map_err(dma_error)?;
            let b_to_a = handle_b
                .dma_map_peer(&handle_a, a.model.memory_bar())
                .map_err(dma_error)?;
            let (_, endpoint_a) = handle_a.function();
            let (_, endpoint_b) = handle_b.function();
            let path_a_to_b = path(&machine, Requester::Device(endpoint_a), a_to_b)?;
            let path_b_to_a = path(&machine, Requester::Device(endpoint_b), b_to_a)?;
            // Untimed set-up, as a cudaMemset before the kernels start: clear both flags so
            // a word left by an earlier run cannot echo early.
            clear_flag(&a.model)?;
            clear_flag(&b.model)?;

            spawn_echo(&machine, endpoint_b, b.model.clone(), b_to_a, n, echo_out);
            let kernel_a = machine.device(endpoint_a);
            // Recorded from the first round trip on (attaching and mapping are not
            // explained).
            let explainer = explain
                .as_ref()
                .and_then(|spec| Explainer::start(&machine, spec));
            let rtt_ps = ping(&kernel_a, &a.model, a_to_b, n, explainer.as_deref(), &route).await?;
            if let Some(explainer) = explainer {
                *explained.borrow_mut() = explainer.finish();
            }
            handle_a.dma_unmap(a_to_b).map_err(dma_error)?;
            handle_b.dma_unmap(b_to_a).map_err(dma_error)?;
            Ok(Measured {
                rtt_ps,
                path_a_to_b,
                path_b_to_a,
            })
        };
        *out.borrow_mut() = Some(bench.detach_after(run).await);
    });
    let faults_before = cluster.machine.faults().len();
    cluster.machine.run();
    let measured = match results.take() {
        Some(r) => r?,
        // A kernel waits forever for a store that could not be sent or was lost on the way.
        None => {
            return Err(echo_failed
                .take()
                .unwrap_or_else(|| lost(cluster, faults_before)))
        }
    };
    let rtt_ns = LatencySummary::of(&measured.rtt_ps);
    let result = DevicePingPongResult {
        scenario: cluster.machine.fabric().name.clone(),
        host: config.host.clone(),
        a: config.a.clone(),
        b: config.b.clone(),
        iterations: config.iterations,
        one_way_ns: rtt_ns.halved(),
        rtt_ns,
        path_a_to_b: measured.path_a_to_b,
        path_b_to_a: measured.path_b_to_a,
    };
    Ok((result, explanation.take()))
}

/// Kernel B: waits for each store `1..=n` in its own memory and echoes it to A's
/// (`b_to_a`); a store it cannot send ends it, with its failure in `failed`.
fn spawn_echo(
    machine: &Machine,
    endpoint_b: EndpointId,
    model_b: Rc<DmaDevice>,
    b_to_a: BusAddr,
    n: u64,
    failed: Rc<RefCell<Option<P2pError>>>,
) {
    let kernel_b = machine.device(endpoint_b);
    machine.spawn(async move {
        for i in 1..=n {
            model_b.wait_word(FLAG_OFFSET, i).await;
            if let Err(e) = kernel_b
                .write(b_to_a.offset(FLAG_OFFSET), &i.to_le_bytes())
                .await
            {
                *failed.borrow_mut() = Some(DriverFailure::Access(e).into());
                return;
            }
        }
    });
}

/// Kernel A: stores `1..=n` to B's memory (`a_to_b`), each time waiting for the echo in
/// its own, and times each round trip (reporting its end to `explainer`).
async fn ping(
    kernel_a: &Agent,
    model_a: &DmaDevice,
    a_to_b: BusAddr,
    n: u64,
    explainer: Option<&Explainer>,
    route: &str,
) -> Result<LatencyRecorder, P2pError> {
    let mut rtt_ps = LatencyRecorder::new();
    let mut phase =
        crate::progress::begin("ping-pong", n, crate::progress::Unit::Items("round trips"));
    for i in 1..=n {
        phase.set(i);
        let t0 = kernel_a.now();
        kernel_a
            .write(a_to_b.offset(FLAG_OFFSET), &i.to_le_bytes())
            .await
            .map_err(DriverFailure::Access)?;
        model_a.wait_word(FLAG_OFFSET, i).await;
        let t1 = kernel_a.now();
        if let Some(explainer) = explainer {
            let what = || format!("round trip {i} ({route})");
            explainer.done("ping-pong", &what, t0, t1);
        }
        rtt_ps.record(t1.since(t0).as_ps());
    }
    Ok(rtt_ps)
}

/// What the kernels measured.
struct Measured {
    rtt_ps: LatencyRecorder,
    path_a_to_b: Vec<String>,
    path_b_to_a: Vec<String>,
}

/// The names of the nodes an 8-byte write from `requester` to `addr` reaches.
fn path(
    machine: &smartio_machine::Machine,
    requester: Requester,
    addr: BusAddr,
) -> Result<Vec<String>, P2pError> {
    let fabric = machine.fabric();
    let route = fabric
        .route(requester, addr, 8, Access::Write)
        .map_err(|source| DriverFailure::NoPath { addr, source })?;
    Ok(route
        .hops
        .iter()
        .map(|h| fabric.node(h.node).name.clone())
        .collect())
}

/// Why a kernel never saw the other's store: what the fabric recorded since fault number
/// `seen` (a posted write that faults is not reported to the kernel that issued it).
fn lost(cluster: &Cluster, seen: usize) -> P2pError {
    let faults: Vec<AccessError> = cluster
        .machine
        .faults()
        .into_iter()
        .skip(seen)
        .map(|f| f.error)
        .collect();
    if faults.is_empty() {
        P2pError::Stuck(crate::booted::stuck(&cluster.machine))
    } else {
        DriverFailure::Lost { faults }.into()
    }
}

/// Zeroes the polled word of a device's memory (no bus transaction, no virtual time).
fn clear_flag(model: &DmaDevice) -> Result<(), P2pError> {
    model
        .mmio_write(model.memory_bar(), FLAG_OFFSET, &0u64.to_le_bytes())
        .map_err(|e| DriverFailure::ClearFlag(e).into())
}
