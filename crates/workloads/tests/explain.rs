//! Explained operations on every kind of path — a local NVMe, a borrowed one, one passed
//! through to a VM by MDEV, and two devices of a lender pinging each other — tile their
//! latency exactly, are the operations the workload counted at the percentile asked for,
//! have every step's cause recorded, and come from a recorded run that measured exactly
//! what an unrecorded one did.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_drivers::CompletionMode;
use smartio_machine::{CriticalPath, StepClass};
use smartio_platform::SimDuration;
use smartio_workloads::fio::run_fio_explained;
use smartio_workloads::{
    device_pingpong, device_pingpong_explained, run_fio, Amount, DevicePingPongConfig, ExplainSpec,
    Explained, FioConfig, FioResult, Target,
};

fn cluster(scenario: &str) -> Cluster {
    Cluster::new(scenario, &Calibration::default_embedded()).expect("the scenario starts")
}

/// The p50 and p99 operations, with a trace kept.
fn spec(p50_ns: f64, p99_ns: f64) -> ExplainSpec {
    ExplainSpec {
        targets: vec![Target::at_ns("p50", p50_ns), Target::at_ns("p99", p99_ns)],
        trace_limit: Some(10_000),
    }
}

/// The steps start at the operation's start, each where the one before ended, the last
/// ends at its end, and their durations sum to its latency exactly; none is a wait for
/// something the recording did not follow.
fn assert_fully_explained(e: &Explained) {
    let p: &CriticalPath = &e.path;
    assert_eq!(
        p.total(),
        p.end.since(p.start),
        "{}: the steps sum to the latency",
        e.name
    );
    let mut at = p.start;
    for s in &p.steps {
        assert_eq!(s.start, at, "{}: no gap or overlap before {s:?}", e.name);
        at = s.start + s.duration;
    }
    assert_eq!(at, p.end, "{}: the last step ends the operation", e.name);
    assert_eq!(e.latency_ns, p.end.since(p.start).as_ps() / 1000);
    for s in &p.steps {
        if s.class == StepClass::Waiting {
            assert!(
                !matches!(
                    s.waited_for.as_str(),
                    "something not recorded"
                        | "what came before the recording started"
                        | "earlier steps (no longer kept)"
                ),
                "{}: every cause is tracked, but {s:?}",
                e.name
            );
        }
    }
}

/// fio's latency histogram (as `run_fio` makes it): the value its percentiles give for a
/// latency of `ns`.
fn counted_as(ns: u64) -> u64 {
    let h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("a histogram");
    h.highest_equivalent(ns.max(1))
}

/// Runs `cfg` unrecorded and recorded on fresh clusters of `scenario`; checks the two
/// results are the same bytes and the p50 and p99 I/Os are explained fully, each one fio
/// counted at that percentile.
fn fio_is_explained(scenario: &str, cfg: &FioConfig) -> Vec<Explained> {
    let plain = run_fio(&cluster(scenario), cfg).expect("fio runs");
    let spec = spec(plain.lat_ns.p50, plain.lat_ns.p99);
    let (recorded, explanation) =
        run_fio_explained(&cluster(scenario), cfg, Some(&spec)).expect("fio runs recorded");
    let json = |r: &FioResult| serde_json::to_string(r).expect("JSON");
    assert_eq!(json(&recorded), json(&plain), "recording changed the run");
    let explained = explanation.explained;
    assert_eq!(
        explained
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        vec!["p50", "p99"]
    );
    for (e, p) in explained.iter().zip([plain.lat_ns.p50, plain.lat_ns.p99]) {
        assert_fully_explained(e);
        // The workload's own count of this I/O is the percentile, and its latency falls in
        // that bucket.
        assert_eq!(e.recorded, SimDuration::from_ns(p as u64), "{}", e.name);
        assert_eq!(counted_as(e.latency_ns), p as u64, "{}", e.name);
    }
    let trace = explanation.trace.expect("a trace was kept");
    assert!(!trace.events.is_empty() && trace.events.len() <= 10_000);
    explained
}

fn qd1(host: &str, device: &str) -> FioConfig {
    FioConfig {
        amount: Amount::Ops(400),
        mode: CompletionMode::Interrupt,
        ..FioConfig::new(host, device)
    }
}

/// The `what` of every step, for a search.
fn whats(e: &Explained) -> Vec<&str> {
    e.path.steps.iter().map(|s| s.what.as_str()).collect()
}

#[test]
fn a_local_nvme_read_is_explained_to_the_picosecond() {
    let explained = fio_is_explained("local-chassis", &qd1("local", "nvme0"));
    let w = whats(&explained[0]);
    assert!(w.iter().any(|w| w.starts_with("local.nvme0: media: read")));
    assert!(w.iter().any(|w| w.contains("interrupt delivery")));
}

#[test]
fn a_borrowed_nvme_read_crosses_both_ntb_adapters_and_is_explained_exactly() {
    let explained = fio_is_explained("back-to-back", &qd1("borrower", "lender:nvme0"));
    let w = whats(&explained[0]);
    for adapter in ["borrower.ntb0 (PEX8733)", "lender.ntb0 (PEX8733)"] {
        assert!(w.contains(&adapter), "{adapter} is on the path: {w:?}");
    }
}

#[test]
fn a_vm_borrowers_read_with_interrupts_is_explained_through_the_mdev_relay() {
    let explained = fio_is_explained("vm-back-to-back", &qd1("borrower/vm0", "lender:nvme0"));
    let w = whats(&explained[0]);
    for relay in [
        "lender CPU: lender: MDEV interrupt handler",
        "borrower CPU: KVM: inject the interrupt",
    ] {
        assert!(w.contains(&relay), "{relay} is on the path: {w:?}");
    }
}

#[test]
fn a_ping_pong_between_two_borrowed_devices_is_explained_exactly() {
    let scenario = "vm-back-to-back";
    let config = DevicePingPongConfig {
        host: "borrower".into(),
        a: "lender:dma0".into(),
        b: "lender:dma1".into(),
        iterations: 200,
    };
    let plain = device_pingpong(&cluster(scenario), &config).expect("runs");
    let spec = spec(plain.rtt_ns.p50, plain.rtt_ns.p99);
    let (recorded, explanation) =
        device_pingpong_explained(&cluster(scenario), &config, Some(&spec)).expect("runs recorded");
    assert_eq!(
        serde_json::to_string(&recorded).expect("JSON"),
        serde_json::to_string(&plain).expect("JSON"),
        "recording changed the run"
    );
    assert_eq!(explanation.explained.len(), 2);
    for (e, p) in explanation
        .explained
        .iter()
        .zip([plain.rtt_ns.p50, plain.rtt_ns.p99])
    {
        assert_fully_explained(e);
        // Round trips are recorded in picoseconds: the explained one is the percentile.
        let latency = e.path.end.since(e.path.start);
        assert_eq!(e.recorded, latency);
        assert_eq!(latency, SimDuration::from_ns_f64(p), "{}", e.name);
        // Both stores, and nothing of the host's CPU.
        let parts: Vec<&str> = e.path.steps.iter().map(|s| s.part_of.as_str()).collect();
        assert!(parts
            .iter()
            .any(|p| p.starts_with("lender.dma0 write 8 B → lender.dma1")));
        assert!(parts
            .iter()
            .any(|p| p.starts_with("lender.dma1 write 8 B → lender.dma0")));
        assert!(!e.path.steps.iter().any(|s| s.class == StepClass::Software));
    }
}
