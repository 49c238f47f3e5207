//! iperf says how far it is to a progress sink, in virtual time up to `-t`, and the sink
//! never changes its result.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_net::{iperf, IperfConfig, IperfEnd, IperfTiming};
use smartio_platform::SimDuration;
use smartio_workloads::progress::{install, Recorder};
use std::rc::Rc;

#[test]
fn iperf_reports_its_progress_and_the_result_is_unchanged() {
    let cal = Calibration::default_embedded();
    let run_iperf = || {
        let cluster = Cluster::new("sriov", &cal).expect("cluster");
        let config = IperfConfig {
            server: IperfEnd {
                host: "receiver".into(),
                device: "nic0".into(),
            },
            clients: vec![(
                IperfEnd {
                    host: "lender".into(),
                    device: "nic0".into(),
                },
                2,
            )],
            timing: IperfTiming {
                duration: SimDuration::from_us(200),
                interval: SimDuration::from_us(50),
                write_bytes: 128 << 10,
            },
        };
        iperf(&cluster, &config).expect("iperf runs")
    };
    let quiet = run_iperf();
    let recorder = Rc::new(Recorder::default());
    let guard = install(recorder.clone());
    let watched = run_iperf();
    drop(guard);
    assert_eq!(quiet, watched);
    let events = recorder.events.borrow();
    let phases: Vec<&String> = events.iter().filter(|e| e.starts_with("begin")).collect();
    assert_eq!(phases, ["begin iperf 200000000"]);
    // The last report is at or past -t (a write ends after it).
    let sets: Vec<u64> = events
        .iter()
        .filter_map(|e| e.strip_prefix("set ")?.parse().ok())
        .collect();
    assert!(sets.iter().any(|&s| s >= 200_000_000), "{sets:?}");
}
