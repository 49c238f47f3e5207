//! Ping-pong and remote-store throughput over NTB-mapped segments.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{bench_pio, pingpong, PingPongConfig, PioBenchConfig, ShmError};

fn run(scenario: &str, from: &str, to: &str) -> smartio_workloads::PingPongResult {
    let cal = Calibration::default_embedded();
    let cluster = Cluster::new(scenario, &cal).expect("scenario loads");
    pingpong(
        &cluster,
        &PingPongConfig {
            from: from.to_string(),
            to: to.to_string(),
            iterations: 50,
        },
    )
    .expect("runs")
}

#[test]
fn the_cluster_switch_adds_its_chip_and_cable_once_each_way() {
    let b2b = run("back-to-back", "borrower", "lender");
    let sw = run("cluster-switch", "borrower", "lender");
    assert_eq!(b2b.iterations, 50);
    let cal = Calibration::default_embedded();
    // One PM8536 and one more cable on the way there, and again on the way back.
    let predicted =
        2.0 * (cal.chips["PM8536"].latency_ns.value + cal.pcie.cable_propagation_ns.value);
    let measured = sw.rtt_ns.p50 - b2b.rtt_ns.p50;
    assert!(
        (measured - predicted).abs() <= 0.05 * predicted,
        "cluster-switch {} ns - back-to-back {} ns = {measured} ns, predicted {predicted} ns",
        sw.rtt_ns.p50,
        b2b.rtt_ns.p50
    );
    // A round trip crosses two NTB adapters per direction and the lender's chassis: it takes
    // microseconds, not nanoseconds, and it is deterministic.
    assert!(
        b2b.rtt_ns.p50 > 1000.0 && b2b.rtt_ns.p50 < 10_000.0,
        "{:?}",
        b2b.rtt_ns
    );
    assert_eq!(run("back-to-back", "borrower", "lender"), b2b);
}

#[test]
fn pingpong_names_unknown_or_identical_hosts() {
    let cal = Calibration::default_embedded();
    let cluster = Cluster::new("back-to-back", &cal).expect("loads");
    let cfg = |from: &str, to: &str| PingPongConfig {
        from: from.to_string(),
        to: to.to_string(),
        iterations: 1,
    };
    assert!(matches!(
        pingpong(&cluster, &cfg("nobody", "lender")),
        Err(ShmError::UnknownHost(_))
    ));
    assert!(matches!(
        pingpong(&cluster, &cfg("lender", "lender")),
        Err(ShmError::SameHost { .. })
    ));
    let local = Cluster::new("local-chassis", &cal).expect("loads");
    let err = pingpong(&local, &cfg("local", "local")).expect_err("one host");
    assert!(matches!(err, ShmError::SameHost { .. }));
}

#[test]
fn remote_stores_approach_the_link_rate_for_large_blocks() {
    let cal = Calibration::default_embedded();
    let cluster = Cluster::new("back-to-back", &cal).expect("loads");
    let samples = bench_pio(
        &cluster,
        &PioBenchConfig {
            from: "borrower".to_string(),
            to: "lender".to_string(),
            sizes: vec![64, 4096, 1 << 20],
            repeat: 3,
        },
    )
    .expect("runs");
    let bw: Vec<f64> = samples.iter().map(|s| s.median_bytes_per_s).collect();
    assert!(bw[0] < bw[1] && bw[1] < bw[2], "{bw:?}");
    // 64-byte TLPs carry 64 of every 90 wire bytes (+4% DLLPs) on a Gen3 x16 link.
    let ceiling = 15.754e9 * 64.0 / 90.0 / 1.04;
    assert!(
        bw[2] < ceiling && bw[2] > 0.9 * ceiling,
        "{} vs {ceiling}",
        bw[2]
    );
}

#[test]
fn the_demo_walk_shows_the_message_arriving_and_one_entry_taken() {
    let cal = Calibration::default_embedded();
    let cluster = Cluster::new("back-to-back", &cal).expect("loads");
    let r = smartio_workloads::shm_demo(&cluster, "borrower", "lender").expect("runs");
    assert_eq!(r.read_by_owner, r.message);
    assert_eq!((r.lut_before, r.lut_after, r.lut_entries), (0, 1, 64));
    assert_eq!(r.owner_node_id, 8);
    assert!(
        (r.window_base..r.window_base + r.window_bytes).contains(&r.mapped_bus_addr),
        "{r:?}"
    );
    assert_eq!(r.entry_bytes, r.window_bytes / 64);
    assert!(r.store_to_seen_ns > 500.0, "{r:?}");
}
