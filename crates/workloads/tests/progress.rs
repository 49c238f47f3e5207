//! Long runs say how far they are to a progress sink, and the sink never changes a result.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::progress::{install, Recorder};
use smartio_workloads::{run_fio, Amount, FioConfig, RwMode};
use std::rc::Rc;

fn fio(ops: u64) -> smartio_workloads::FioResult {
    let cluster = Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
    let cfg = FioConfig {
        rw: RwMode::RandRw,
        verify: true,
        size: Some(1 << 20),
        amount: Amount::Ops(ops),
        ..FioConfig::new("local", "nvme0")
    };
    run_fio(&cluster, &cfg).expect("runs")
}

#[test]
fn fio_reports_its_verify_prefill_and_every_io_and_the_result_is_unchanged() {
    let quiet = fio(3000);
    let recorder = Rc::new(Recorder::default());
    let guard = install(recorder.clone());
    let watched = fio(3000);
    drop(guard);
    assert_eq!(
        quiet, watched,
        "progress observes, it does not change the run"
    );
    let events = recorder.events.borrow();
    let phases: Vec<&String> = events.iter().filter(|e| e.starts_with("begin")).collect();
    assert_eq!(
        phases,
        [
            "begin writing the verify pattern 1048576",
            "begin I/Os 3000"
        ]
    );
    let last_set = events.iter().rev().find(|e| e.starts_with("set"));
    assert_eq!(last_set.map(String::as_str), Some("set 3000"));
    assert_eq!(events.iter().filter(|e| *e == "end").count(), 2);
}

/// The runs whose length the budget reckons by bytes say how far they are too: remote stores
/// in bytes up to every block's (iperf, in virtual time, is tested in `smartio-net`).
#[test]
fn remote_stores_report_their_progress_and_the_result_is_unchanged() {
    use smartio_workloads::{bench_pio, PioBenchConfig};
    let cal = Calibration::default_embedded();
    let run_pio = || {
        let cluster = Cluster::new("back-to-back", &cal).expect("cluster");
        let config = PioBenchConfig {
            from: "borrower".into(),
            to: "lender".into(),
            sizes: vec![4096, 65536],
            repeat: 3,
        };
        bench_pio(&cluster, &config).expect("stores")
    };
    let quiet = run_pio();
    let recorder = Rc::new(Recorder::default());
    let guard = install(recorder.clone());
    let watched = run_pio();
    drop(guard);
    assert_eq!(quiet, watched);
    let events = recorder.events.borrow();
    let phases: Vec<&String> = events.iter().filter(|e| e.starts_with("begin")).collect();
    assert_eq!(phases, ["begin remote stores 208896"]);
    // The stores reach their total exactly.
    let sets: Vec<u64> = events
        .iter()
        .filter_map(|e| e.strip_prefix("set ")?.parse().ok())
        .collect();
    assert_eq!(sets.last(), Some(&208_896), "{sets:?}");
}
