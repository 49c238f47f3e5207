//! `smartio fio --method nvme-block`: seed 003's kernel-space block client under the fio
//! workload on `nvme-cluster` (its Fig. 9b) — bytes verified through the bounce buffer at
//! depth and with several jobs, determinism, and the latencies that emerge from the block
//! layer, the copy, polling and the fabric.

use crate::common;

use common::{json, smartio};

/// `fio` on nvme-cluster with `extra` options, as JSON.
fn fio(host: &str, device: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "fio",
        "--scenario",
        "nvme-cluster",
        "--host",
        host,
        "--device",
        device,
        "--json",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = smartio(&args);
    assert!(ok, "{args:?}: {err}");
    json(&out)
}

const BLOCK: [&str; 4] = ["--method", "nvme-block", "--manager", "lender"];
const CLIENT: [&str; 4] = ["--method", "nvme-client", "--manager", "lender"];

/// QD1 4 KiB `rw` latencies (min, p50) of `host` reaching `device` by `method`.
fn qd1(host: &str, device: &str, method: &[&str], rw: &str) -> (f64, f64) {
    let mut extra = method.to_vec();
    extra.extend_from_slice(&["--rw", rw, "--ops", "1000"]);
    let v = fio(host, device, &extra);
    let lat = &v["lat_ns"];
    (
        lat["min"].as_f64().expect("min"),
        lat["p50"].as_f64().expect("p50"),
    )
}

fn remote(method: &[&str], rw: &str) -> (f64, f64) {
    qd1("borrower", "lender:nvme0", method, rw)
}

fn local(method: &[&str], rw: &str) -> (f64, f64) {
    qd1("lender", "nvme0", method, rw)
}

/// `a − b` of (min, p50) pairs.
fn minus(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 - b.0, a.1 - b.1)
}

fn within(what: &str, d: (f64, f64), lo: f64, hi: f64) {
    assert!(
        (lo..=hi).contains(&d.0) && (lo..=hi).contains(&d.1),
        "{what}: {:+.0} ns (min), {:+.0} ns (p50), expected {lo}..={hi}",
        d.0,
        d.1
    );
}

#[test]
fn reads_and_writes_at_depth_on_three_jobs_verify_every_byte_through_the_bounce_buffer() {
    let mut extra = BLOCK.to_vec();
    extra.extend_from_slice(&[
        "--rw",
        "randrw",
        "--iodepth",
        "8",
        "--jobs",
        "3",
        "--verify",
        "--size",
        "64M",
        "--ops",
        "3000",
    ]);
    let v = fio("borrower", "lender:nvme0", &extra);
    let (reads, writes) = (
        v["reads"].as_u64().expect("reads"),
        v["writes"].as_u64().expect("writes"),
    );
    assert_eq!(reads + writes, 3000);
    assert!(
        reads > 1000 && writes > 1000,
        "{reads} reads, {writes} writes"
    );
    assert_eq!(
        v["verified_bytes"].as_u64(),
        Some(reads * 4096),
        "every byte read was checked"
    );
    assert_eq!(v["queues"], 3, "a hardware queue and queue pair per job");
    assert_eq!(v["mode"], "poll");
}

#[test]
fn the_same_seed_gives_the_same_output_byte_for_byte_and_another_seed_another_run() {
    let run = |seed: &str| {
        let args = [
            "fio",
            "--scenario",
            "nvme-cluster",
            "--host",
            "borrower",
            "--device",
            "lender:nvme0",
            "--method",
            "nvme-block",
            "--manager",
            "lender",
            "--rw",
            "randrw",
            "--iodepth",
            "4",
            "--verify",
            "--size",
            "16M",
            "--ops",
            "1500",
            "--seed",
            seed,
            "--json",
        ];
        let (ok, out, err) = smartio(&args);
        assert!(ok, "{err}");
        out
    };
    let first = run("7");
    assert_eq!(first, run("7"));
    let other = json(&run("8"));
    assert_ne!(
        json(&first)["reads"],
        other["reads"],
        "another seed mixes otherwise"
    );
}

#[test]
fn a_remote_nvme_adds_the_fabric_to_reads_and_a_round_trip_more_to_writes() {
    let reads = minus(remote(&BLOCK, "randread"), local(&BLOCK, "randread"));
    let writes = minus(remote(&BLOCK, "randwrite"), local(&BLOCK, "randwrite"));
    // Seed 003: around 1 µs for reads. Reads cross the fabric twice (the doorbell there,
    // the data and completion back).
    within("block client remote − local, reads", reads, 500.0, 1500.0);
    // Writes also wait for the controller to read the data across it: a round trip more.
    // (Seed 003: around 2 µs; the model gives ~2.6 µs, shown failing in `repro 003-write`.)
    within(
        "block client remote − local, writes",
        writes,
        1500.0,
        3000.0,
    );
    assert!(writes.0 > reads.0 + 500.0, "{writes:?} vs {reads:?}");
}

#[test]
fn the_remote_block_client_is_slower_than_the_stock_driver_on_the_local_nvme() {
    // Against the stock driver (interrupts) on the local NVMe: +0.5 to 1.5 µs for reads,
    // +1.5 to 2.5 µs for writes (seed 003 Fig. 10: the block client's higher baseline, a
    // copy, plus the distance).
    let stock = ["--mode", "interrupt"];
    let reads = minus(remote(&BLOCK, "randread"), local(&stock, "randread"));
    let writes = minus(remote(&BLOCK, "randwrite"), local(&stock, "randwrite"));
    within(
        "block client remote − stock local, reads",
        reads,
        500.0,
        1500.0,
    );
    within(
        "block client remote − stock local, writes",
        writes,
        1500.0,
        2500.0,
    );
}

#[test]
fn the_block_client_costs_the_block_layer_one_copy_and_a_wakeup_over_the_bare_client() {
    // syscall + block submit + complete + a 4 KiB copy (a line's load, then the bytes at the
    // copy rate) + the wake-up of the thread the poller completes the request for; the bare
    // client's own CQ handling (a second CQ read and the head doorbell, ~0.2 µs) is not on
    // the block client's request path.
    let cal = smartio_calibration::Calibration::default_embedded();
    let c = &cal.cpu;
    let steps = c.syscall_ns.value
        + c.block_submit_ns.value
        + c.block_complete_ns.value
        + c.memory_read_ns.value
        + 4096.0 / c.memcpy_bytes_per_ns.value
        + c.wakeup_ns.value;
    for rw in ["randread", "randwrite"] {
        let d = minus(local(&BLOCK, rw), local(&CLIENT, rw));
        within(
            &format!("block client − bare client, {rw}"),
            d,
            steps - 300.0,
            steps + 100.0,
        );
    }
}
