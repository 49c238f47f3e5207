//! Seeded variation with causes (issue 19, item 1): distributions that mean something, the same
//! bytes for the same seed, another sample for another seed, and nothing at all when the
//! calibration closes every spread.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_workloads::{
    gpu_pingpong, run_fio, share_clients, Amount, CounterPlace, FioConfig, FioResult,
    GpuPingPongConfig, GpuPingPongResult, ShareConfig, ShareResult,
};

fn cluster(scenario: &str, calibration: &Calibration, seed: u64) -> Cluster {
    let options = ClusterOptions {
        seed,
        ..ClusterOptions::default()
    };
    Cluster::with_options(scenario, calibration, &options).expect("scenario loads")
}

fn fio(calibration: &Calibration, seed: u64) -> FioResult {
    let cfg = FioConfig {
        amount: Amount::Ops(5000),
        seed,
        ..FioConfig::new("borrower", "lender:nvme0")
    };
    run_fio(&cluster("back-to-back", calibration, seed), &cfg).expect("fio runs")
}

#[test]
fn qd1_reads_of_an_nvme_have_a_tail_that_repeats_per_seed_and_moves_with_it() {
    let cal = Calibration::default_embedded();
    let a = fio(&cal, 1);
    let l = &a.lat_ns;
    assert!(l.p99 > l.p50 && l.p50 > l.min && l.max > l.p99, "{l:?}");
    // The tail is the media's (P4800X: 1 us from median to p99) plus interrupt delivery's.
    assert!(l.p99 - l.p50 > 500.0 && l.p99 - l.p50 < 3000.0, "{l:?}");
    let again = fio(&cal, 1);
    assert_eq!(
        serde_json::to_string(&a).expect("json"),
        serde_json::to_string(&again).expect("json"),
        "the same seed gives the same bytes"
    );
    let other = fio(&cal, 2);
    assert_ne!(a.lat_ns, other.lat_ns, "another seed draws another sample");
    // Medians of two samples of one distribution agree closely.
    assert!((a.lat_ns.p50 - other.lat_ns.p50).abs() < 0.02 * a.lat_ns.p50);
}

#[test]
fn with_every_spread_closed_qd1_reads_all_take_the_same_time() {
    let closed = Calibration::default_embedded().without_variation();
    let a = fio(&closed, 1);
    let b = fio(&closed, 2);
    // The first reads warm nothing up in the model: every read takes the typical path.
    assert!(
        a.lat_ns.max - a.lat_ns.min < 0.002 * a.lat_ns.p50,
        "{:?}",
        a.lat_ns
    );
    assert_eq!(
        a.lat_ns, b.lat_ns,
        "without variation the seed only moves offsets"
    );
}

fn share(calibration: &Calibration, seed: u64) -> ShareResult {
    let cfg = ShareConfig {
        ops: 200,
        seed,
        extra_client: None,
        ..ShareConfig::default()
    };
    share_clients(&cluster("cascade-60", calibration, seed), &cfg).expect("share runs")
}

#[test]
fn thirty_sharing_clients_are_unequal_with_variation_and_share_the_same_total() {
    let varied = share(&Calibration::default_embedded(), 1);
    let closed = share(&Calibration::default_embedded().without_variation(), 1);
    let iops = |r: &ShareResult| r.clients.iter().map(|c| c.iops).collect::<Vec<_>>();
    let total = |r: &ShareResult| iops(r).iter().sum::<f64>();
    let spread = |r: &ShareResult| {
        let xs = iops(r);
        let max = xs.iter().copied().fold(0.0, f64::max);
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        (max - min) / max
    };
    assert!(varied.fairness < 1.0, "{}", varied.fairness);
    assert!(
        spread(&varied) > spread(&closed),
        "varied {} closed {}",
        spread(&varied),
        spread(&closed)
    );
    assert!(varied.p50_max_ns > varied.p50_min_ns);
    // The controller's admission bounds the total either way.
    let (t_varied, t_closed) = (total(&varied), total(&closed));
    assert!(
        (t_varied - t_closed).abs() < 0.01 * t_closed,
        "{t_varied} vs {t_closed}"
    );
    assert_eq!(varied.verified_bytes, 30 * 200 * 4096, "every read checked");
    let again = share(&Calibration::default_embedded(), 1);
    assert_eq!(
        serde_json::to_string(&varied).expect("json"),
        serde_json::to_string(&again).expect("json")
    );
}

fn pingpong(seed: u64) -> GpuPingPongResult {
    let cfg = GpuPingPongConfig {
        host: "local".into(),
        a: "gpu0".into(),
        b: "gpu1".into(),
        iterations: 20_000,
        counters: CounterPlace::Gpu,
    };
    let cal = Calibration::default_embedded();
    gpu_pingpong(&cluster("local-chassis", &cal, seed), &cfg).expect("ping-pong runs")
}

#[test]
fn the_gpu_ping_pong_falls_on_steps_a_poll_period_apart() {
    let r = pingpong(1);
    assert!(r.steps.len() >= 3, "{:?}", r.steps);
    let total: u64 = r.steps.iter().map(|s| s.count).sum();
    assert_eq!(total, 20_000);
    // Steps lie one polling-loop read (the P4000's 15 ns memory access) apart, give or take
    // a cycle of the counter; nothing falls between them.
    let poll = Calibration::default_embedded().gpu["p4000"]
        .memory_access_ns
        .value;
    let cycle = 1e6 / r.clock_khz as f64;
    for w in r.steps.windows(2) {
        let gap = w[1].rtt_ns - w[0].rtt_ns;
        assert!(
            (gap - poll).abs() <= 2.0 * cycle,
            "gap {gap} ns: {:?}",
            r.steps
        );
    }
    // At least three steps each hold a real share of the round trips.
    assert!(
        r.steps.iter().filter(|s| s.count >= 200).count() >= 3,
        "{:?}",
        r.steps
    );
    assert_eq!(r, pingpong(1), "the same seed, the same round trips");
    assert_ne!(r.steps, pingpong(2).steps, "another seed, another sample");
}
