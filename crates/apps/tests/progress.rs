//! Training says how far it is to a progress sink, and the sink never changes its result.

use smartio_apps::train::{train, TrainConfig};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::progress::{install, Recorder};
use std::rc::Rc;

#[test]
fn training_reports_every_step_and_the_result_is_unchanged() {
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
