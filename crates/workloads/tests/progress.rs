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

#[test]
fn training_reports_every_step_and_the_result_is_unchanged() {
    use smartio_workloads::apps::train::{train, TrainConfig};
    let run = || {
        let cluster =
            Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
        let config = TrainConfig {
            images: 64,
            batch: 16,
            ..TrainConfig::local_default()
        };
        serde_json::to_string(&train(&cluster, &config).expect("trains")).expect("json")
    };
    let quiet = run();
    let recorder = Rc::new(Recorder::default());
    let guard = install(recorder.clone());
    let watched = run();
    drop(guard);
    assert_eq!(
        quiet, watched,
        "progress observes, it does not change the run"
    );
    let events = recorder.events.borrow();
    let phases: Vec<&String> = events.iter().filter(|e| e.starts_with("begin")).collect();
    assert_eq!(phases, ["begin training 8"], "4 steps per epoch, 2 epochs");
    let last_set = events.iter().rev().find(|e| e.starts_with("set"));
    assert_eq!(last_set.map(String::as_str), Some("set 8"));
    assert_eq!(events.iter().filter(|e| *e == "end").count(), 1);
}
