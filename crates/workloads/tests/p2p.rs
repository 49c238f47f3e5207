//! Peer-to-peer between borrowed devices on the cluster-switch scenario (Paper V §4.4,
//! §7.2): copies between GPUs land exactly, and the device-to-device ping-pong costs what
//! the timing model says the hops on its path cost.
//!
//! ```text
//!   borrower ── ntb0 ══ mxs824 (PM8536) ══ lender.ntb0 ── lender.chassis ─┬─ gpu0, gpu1
//!                          ║                                              └─ nvme0, dma0
//!                          ╚═══════════ lender2.ntb0 ── lender2.chassis ─── gpu2
//! ```

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_fabric::{EndpointId, NodeId, NodeKind};
use smartio_platform::BarHandler;
use smartio_workloads::{
    bench_p2p, device_pingpong, DevicePingPongConfig, DevicePingPongResult, P2pConfig,
    P2pDirection, P2pError,
};

const SCENARIO: &str = "cluster-switch";
const HOST: &str = "borrower";
/// Bytes copied in the exactness checks: more than one TLP, and not a whole number of them.
const COPY_BYTES: u64 = (1 << 20) + 100;
/// Where a GPU keeps its memory.
const GPU_MEMORY_BAR: u8 = smartio_devices::dma::GPU_MEMORY_BAR;

fn cluster() -> Cluster {
    Cluster::new(SCENARIO, &Calibration::default_embedded()).expect("scenario loads")
}

/// The fabric endpoint of `host:device`.
fn endpoint(cluster: &Cluster, qualified: &str) -> EndpointId {
    let (host, device) = qualified.split_once(':').expect("host:device");
    let fabric = cluster.machine.fabric();
    let index = fabric
        .endpoints()
        .iter()
        .position(|e| e.name == device && fabric.host(e.host).name == host)
        .unwrap_or_else(|| panic!("no endpoint {qualified}"));
    EndpointId(index as u32)
}

/// Distinct non-zero-heavy bytes, so a missing or shifted byte shows.
fn pattern(len: u64, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn fill(cluster: &Cluster, device: &str, data: &[u8]) {
    let engine = cluster
        .copy_engine(endpoint(cluster, device))
        .expect("a copy engine");
    engine
        .mmio_write(GPU_MEMORY_BAR, 0, data)
        .expect("fits the memory");
}

fn contents(cluster: &Cluster, device: &str, len: u64) -> Vec<u8> {
    let engine = cluster
        .copy_engine(endpoint(cluster, device))
        .expect("a copy engine");
    let mut buf = vec![0u8; len as usize];
    engine.read_memory(0, &mut buf);
    buf
}

fn p2p(source: &str, target: &str, direction: P2pDirection, sizes: &[u64]) -> P2pConfig {
    P2pConfig {
        host: HOST.into(),
        source: source.into(),
        target: target.into(),
        direction,
        sizes: sizes.to_vec(),
        repeat: 2,
    }
}

/// Copies `COPY_BYTES` from `source` to `target` memory with `source`'s engine (write) or
/// from `target` into `source` (read), and checks the receiving memory byte for byte.
fn copy_lands_exactly(source: &str, target: &str, direction: P2pDirection) {
    let cluster = cluster();
    let (from, to) = match direction {
        P2pDirection::Write => (source, target),
        P2pDirection::Read => (target, source),
    };
    let data = pattern(COPY_BYTES, 7);
    fill(&cluster, from, &data);
    assert_ne!(contents(&cluster, to, COPY_BYTES), data, "not there before");
    let samples = bench_p2p(
        &cluster,
        &p2p(source, target, direction, &[4 << 10, COPY_BYTES]),
    )
    .expect("runs");
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(|s| s.median_bytes_per_s > 0.0));
    let got = contents(&cluster, to, COPY_BYTES);
    let first_bad = got.iter().zip(&data).position(|(g, d)| g != d);
    assert_eq!(first_bad, None, "{source} {direction:?} {target}");
}

#[test]
fn peer_writes_between_gpus_of_one_lender_arrive_exactly() {
    copy_lands_exactly("lender:gpu0", "lender:gpu1", P2pDirection::Write);
}

#[test]
fn peer_reads_between_gpus_of_one_lender_arrive_exactly() {
    copy_lands_exactly("lender:gpu0", "lender:gpu1", P2pDirection::Read);
}

#[test]
fn peer_copies_between_gpus_of_different_lenders_arrive_exactly() {
    copy_lands_exactly("lender:gpu0", "lender2:gpu2", P2pDirection::Write);
    copy_lands_exactly("lender:gpu0", "lender2:gpu2", P2pDirection::Read);
}

#[test]
fn peer_copies_within_one_lender_are_faster_than_across_the_cluster_switch() {
    let small = [4 << 10];
    let near = bench_p2p(
        &cluster(),
        &p2p("lender:gpu0", "lender:gpu1", P2pDirection::Read, &small),
    )
    .expect("runs");
    let far = bench_p2p(
        &cluster(),
        &p2p("lender:gpu0", "lender2:gpu2", P2pDirection::Read, &small),
    )
    .expect("runs");
    assert!(
        far[0].median_ns > near[0].median_ns,
        "reads across the cluster switch ({} ns) vs inside the lender ({} ns)",
        far[0].median_ns,
        near[0].median_ns
    );
}

#[test]
fn bench_p2p_refuses_devices_without_a_copy_engine_sizes_that_do_not_fit_and_one_device_twice() {
    let cluster = cluster();
    let err = bench_p2p(
        &cluster,
        &p2p("lender:gpu0", "lender:nvme0", P2pDirection::Write, &[4096]),
    )
    .expect_err("an NVMe has no copy engine");
    assert!(
        matches!(&err, P2pError::NotCopyEngine { device, kind } if device == "lender:nvme0" && kind == "nvme"),
        "{err}"
    );
    let err = bench_p2p(
        &cluster,
        &p2p(
            "lender:gpu0",
            "lender:gpu1",
            P2pDirection::Write,
            &[1 << 30],
        ),
    )
    .expect_err("1 GiB does not fit 256 MiB of GPU memory");
    assert!(
        matches!(err, P2pError::BadSize { size, .. } if size == 1 << 30),
        "{err}"
    );
    let err = bench_p2p(
        &cluster,
        &p2p("lender:gpu0", "lender:gpu0", P2pDirection::Write, &[4096]),
    )
    .expect_err("one device twice");
    assert!(matches!(err, P2pError::SameDevice { .. }), "{err}");
    let err = bench_p2p(
        &cluster,
        &p2p("lender:gpu0", "lender:gpu9", P2pDirection::Write, &[4096]),
    )
    .expect_err("no such device");
    assert!(err.to_string().contains("gpu9"), "{err}");
}

fn pingpong(a: &str, b: &str) -> DevicePingPongResult {
    device_pingpong(
        &cluster(),
        &DevicePingPongConfig {
            host: HOST.into(),
            a: a.into(),
            b: b.into(),
            iterations: 50,
        },
    )
    .expect("ping-pong runs")
}

/// The node called `name`.
fn node(cluster: &Cluster, name: &str) -> NodeId {
    let fabric = cluster.machine.fabric();
    let index = fabric
        .nodes()
        .iter()
        .position(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"));
    NodeId(index as u32)
}

/// What the timing model says one 8-byte store from `from` along `path` (the node names
/// reached, the target last) costs on idle links, in picoseconds. This is the engine's
/// cut-through rule (crates/engine/src/timing.rs): every link's propagation delay, every
/// chip's latency but the target's, the serialization of the TLP on the last link, and on
/// the way any extra time a slower link takes to serialize it than the next one.
fn modelled_store_ps(cluster: &Cluster, from: &str, path: &[String]) -> u64 {
    let fabric = cluster.machine.fabric();
    let timing = cluster.timed().expect("the timed engine").timing();
    let mut at = fabric.endpoint(endpoint(cluster, from)).node;
    let mut hops = Vec::new();
    for name in path {
        let next = node(cluster, name);
        let link = fabric
            .links()
            .iter()
            .position(|l| (l.a, l.b) == (at, next) || (l.a, l.b) == (next, at))
            .unwrap_or_else(|| panic!("no link between consecutive path nodes at {name}"));
        hops.push((timing.links[link], next));
        at = next;
    }
    let serialization = |i: usize| hops[i].0.serialization_ps(8);
    let last = hops.len() - 1;
    let mut ps = serialization(last);
    for (i, (link, reached)) in hops.iter().enumerate() {
        ps += link.prop_ps;
        if i < last {
            ps += timing.node_latency_ps[reached.index()];
            ps += serialization(i).saturating_sub(serialization(i + 1));
        }
    }
    ps
}

/// The modelled one-way latency (half the round trip) of a ping-pong, in nanoseconds.
fn modelled_one_way_ns(cluster: &Cluster, r: &DevicePingPongResult) -> f64 {
    let round_trip = modelled_store_ps(cluster, &r.a, &r.path_a_to_b)
        + modelled_store_ps(cluster, &r.b, &r.path_b_to_a);
    round_trip as f64 / 2.0 / 1000.0
}

fn is_ntb(cluster: &Cluster, name: &str) -> bool {
    let id = node(cluster, name);
    matches!(cluster.machine.fabric().node(id).kind, NodeKind::Ntb { .. })
}

#[test]
fn gpus_of_one_lender_ping_pong_inside_its_switch_without_the_borrower_or_an_ntb() {
    let cluster = cluster();
    let r = pingpong("lender:gpu0", "lender:gpu1");
    assert_eq!(
        r.path_a_to_b.last().map(String::as_str),
        Some("lender.gpu1")
    );
    assert_eq!(
        r.path_b_to_a.last().map(String::as_str),
        Some("lender.gpu0")
    );
    for name in r.path_a_to_b.iter().chain(&r.path_b_to_a) {
        assert!(
            name != "borrower" && !name.starts_with("borrower."),
            "crosses {name}: {:?}",
            r.path_a_to_b
        );
        assert!(!is_ntb(&cluster, name), "crosses NTB {name}");
        assert_ne!(name, "mxs824");
    }
}

#[test]
fn gpus_of_different_lenders_ping_pong_through_the_cluster_switch_without_the_borrower() {
    let r = pingpong("lender:gpu0", "lender2:gpu2");
    assert_eq!(
        r.path_a_to_b.last().map(String::as_str),
        Some("lender2.gpu2")
    );
    assert_eq!(
        r.path_b_to_a.last().map(String::as_str),
        Some("lender.gpu0")
    );
    for path in [&r.path_a_to_b, &r.path_b_to_a] {
        assert!(path.iter().any(|n| n == "mxs824"), "{path:?}");
        assert!(
            path.iter()
                .all(|n| n != "borrower" && !n.starts_with("borrower.")),
            "{path:?}"
        );
    }
}

#[test]
fn a_different_lender_adds_exactly_the_modelled_latency_of_the_extra_hops() {
    let cluster = cluster();
    let near = pingpong("lender:gpu0", "lender:gpu1");
    let far = pingpong("lender:gpu0", "lender2:gpu2");
    assert_eq!((near.iterations, far.iterations), (50, 50));
    let predicted = modelled_one_way_ns(&cluster, &far) - modelled_one_way_ns(&cluster, &near);
    let measured = far.one_way_ns.p50 - near.one_way_ns.p50;
    eprintln!(
        "one-way p50: same lender {:.3} ns, different lenders {:.3} ns; difference {measured:.3} ns, modelled {predicted:.3} ns",
        near.one_way_ns.p50, far.one_way_ns.p50
    );
    assert!(
        predicted > 100.0,
        "the extra hops cost something: {predicted} ns"
    );
    // Links are idle between stores (each waits for the echo), so nothing queues and the
    // model is exact: the tolerance only absorbs float rounding of the halved picoseconds.
    assert!(
        (measured - predicted).abs() < 0.01,
        "measured {measured} ns vs modelled {predicted} ns"
    );
    // Every round trip is the same on idle links.
    for r in [&near, &far] {
        assert_eq!(r.rtt_ns.min, r.rtt_ns.max, "{r:?}");
        assert!(
            (r.one_way_ns.p50 - modelled_one_way_ns(&cluster, r)).abs() < 0.01,
            "{r:?}"
        );
    }
}

#[test]
fn device_pingpong_is_deterministic() {
    let first = pingpong("lender:gpu0", "lender2:gpu2");
    let second = pingpong("lender:gpu0", "lender2:gpu2");
    assert_eq!(first, second);
}

#[test]
fn device_pingpong_refuses_a_device_without_memory_to_poll() {
    let err = device_pingpong(
        &cluster(),
        &DevicePingPongConfig {
            host: HOST.into(),
            a: "lender:gpu0".into(),
            b: "lender:nvme0".into(),
            iterations: 3,
        },
    )
    .expect_err("an NVMe runs no kernel");
    assert!(matches!(err, P2pError::NotCopyEngine { .. }), "{err}");
}

#[test]
fn a_vm_names_its_own_hosts_devices_without_a_lender_in_peer_workloads() {
    // lender/vm0 gets dma0 and dma1 by local VFIO: `dma0` means the lender's own function,
    // not a host called "lender/vm0".
    let cluster =
        Cluster::new("vm-back-to-back", &Calibration::default_embedded()).expect("scenario loads");
    let samples = bench_p2p(
        &cluster,
        &P2pConfig {
            host: "lender/vm0".into(),
            ..p2p("dma0", "dma1", P2pDirection::Write, &[4096])
        },
    )
    .expect("the copy runs in the VM");
    assert_eq!(samples.len(), 1);
    let r = device_pingpong(
        &cluster,
        &DevicePingPongConfig {
            host: "lender/vm0".into(),
            a: "dma0".into(),
            b: "dma1".into(),
            iterations: 5,
        },
    )
    .expect("the kernels ping-pong in the VM");
    assert_eq!(
        r.path_a_to_b.last().map(String::as_str),
        Some("lender.dma1")
    );
}
