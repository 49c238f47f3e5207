//! `share-30`: thirty hosts of the 60-host cascade share node00's Optane through the
//! distributed driver, a queue pair each; every byte read is checked, the service is fair,
//! the 32nd queue pair is refused, and everything is given back.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{
    share_clients, BootError, ShareConfig, ShareError, ShareResult, UnknownHost,
};

fn run(config: &ShareConfig) -> Result<ShareResult, ShareError> {
    let cluster = Cluster::new("cascade-60", &Calibration::default_embedded()).expect("cluster");
    share_clients(&cluster, config)
}

fn share_30(ops: u64) -> ShareConfig {
    ShareConfig {
        ops,
        ..ShareConfig::default()
    }
}

#[test]
fn thirty_clients_read_back_their_own_data_fairly_and_the_32nd_queue_pair_is_refused() {
    let r = run(&share_30(500)).expect("runs");
    assert_eq!(r.granted, 31, "the P4800X gives 31 I/O queue pairs");
    assert_eq!(r.clients.len(), 30);
    assert_eq!(r.written_bytes, 30 << 20);
    let mut qids: Vec<u16> = r.clients.iter().map(|c| c.qid).collect();
    qids.sort_unstable();
    assert_eq!(
        qids,
        (1..=30).collect::<Vec<u16>>(),
        "a pair of its own each"
    );
    for (i, c) in r.clients.iter().enumerate() {
        assert_eq!(c.host, format!("node{:02}", i + 1));
        assert_eq!(c.first_lba, i as u64 * (1 << 20) / 512, "{}", c.host);
        assert_eq!(c.ops, 500);
        assert_eq!(c.verified_bytes, 500 * 4096, "{}", c.host);
        assert!(
            c.lat_ns.min > 0.0 && c.lat_ns.min <= c.lat_ns.p50 && c.lat_ns.p50 <= c.lat_ns.max,
            "{}: {:?}",
            c.host,
            c.lat_ns
        );
        assert!(c.iops > 0.0, "{}", c.host);
    }
    assert_eq!(r.verified_bytes, 30 * 500 * 4096);
    // Thirty QD1 readers would ask for ~3M IOPS; the P4800X serves 550K, round robin over
    // the submission queues, so each gets a thirtieth and waits 30 / 550K s = 54.5 us.
    let total: f64 = r.clients.iter().map(|c| c.iops).sum();
    assert!(
        (530_000.0..=551_000.0).contains(&total),
        "{total} IOPS in all is not the device's 550K"
    );
    assert!(r.fairness > 0.999, "Jain's index {}", r.fairness);
    assert!(
        r.p50_min_ns > 50_000.0 && r.p50_max_ns < 60_000.0 && r.p50_min_ns <= r.p50_max_ns,
        "p50 {}..{} ns",
        r.p50_min_ns,
        r.p50_max_ns
    );
    // The queue limit: one more client gets the 31st pair, and the next request is refused.
    assert_eq!(r.extra_qids, vec![31]);
    assert_eq!(r.held_at_refusal, 31);
    let refused = r.refused.as_deref().unwrap_or("no refusal");
    assert!(
        refused.starts_with("no I/O queue pair left: all 31 the controller granted are in use"),
        "{refused}"
    );
    assert!(
        refused.contains("31 hosts with 1 each (node01, node02, …, node31)"),
        "{refused}"
    );
    assert!(
        r.owners_after_leave.is_empty(),
        "left behind: {:?}",
        r.owners_after_leave
    );
    assert_eq!(
        r.holders_after_leave,
        vec!["node00".to_string()],
        "only the manager"
    );
}

#[test]
fn share_results_are_identical_across_runs() {
    let a = run(&share_30(100)).expect("first run");
    let b = run(&share_30(100)).expect("second run");
    assert_eq!(a, b);
}

#[test]
fn more_clients_than_queue_pairs_is_a_specific_error() {
    let config = ShareConfig {
        clients: (1..=32).map(|i| format!("node{i:02}")).collect(),
        ops: 1,
        ..ShareConfig::default()
    };
    let e = run(&config).expect_err("32 clients, 31 pairs");
    assert!(
        matches!(
            e,
            ShareError::TooManyClients {
                clients: 32,
                granted: 31,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("granted only 31"), "{e}");
    let config = ShareConfig {
        clients: vec!["node01".into(), "node99".into()],
        ..ShareConfig::default()
    };
    let e = run(&config).expect_err("unknown host");
    assert!(
        matches!(&e, ShareError::Boot(BootError::UnknownHost(UnknownHost { host, .. })) if host == "node99"),
        "{e:?}"
    );
    assert!(e.to_string().contains("unknown host \"node99\""), "{e}");
}
