//! iperf over the NIC model (scenario `sriov`, Paper V Fig. 28): the lender's NIC used
//! locally and lent to the borrower reach the same throughput, bounded by the 100 GbE link;
//! every byte is checked at the receiver.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_net::{
    iperf, IperfConfig, IperfEnd, IperfError, IperfResult, IperfTiming, DEFAULT_WRITE_BYTES,
};
use smartio_platform::SimDuration;

fn end(host: &str, device: &str) -> IperfEnd {
    IperfEnd {
        host: host.into(),
        device: device.into(),
    }
}

fn run(client: IperfEnd, streams: u32) -> IperfResult {
    let cluster = Cluster::new("sriov", &Calibration::default_embedded()).expect("scenario");
    run_on(&cluster, end("receiver", "nic0"), vec![(client, streams)])
}

const TIMING: IperfTiming = IperfTiming {
    duration: SimDuration::from_us(2000),
    interval: SimDuration::from_us(500),
    write_bytes: DEFAULT_WRITE_BYTES,
};

fn run_on(cluster: &Cluster, server: IperfEnd, clients: Vec<(IperfEnd, u32)>) -> IperfResult {
    iperf(
        cluster,
        &IperfConfig {
            server,
            clients,
            timing: TIMING,
        },
    )
    .expect("iperf runs")
}

/// What the NIC of `host` counted on its port: (frames on the wire out, in, through the
/// internal switch).
fn port(cluster: &Cluster, host: &str) -> (u64, u64, u64) {
    let f = cluster.machine.fabric();
    let (_, nic) = cluster
        .nics()
        .find(|(ep, _)| f.host(f.endpoint(*ep).host).name == host)
        .unwrap_or_else(|| panic!("no NIC in {host}"));
    let c = nic.port().counters();
    (c.wire_tx, c.wire_rx, c.eswitch)
}

fn checked(r: &IperfResult) {
    let written: u64 = r.report.streams.iter().map(|s| s.bytes).sum();
    assert!(written > 0);
    assert_eq!(r.report.verified_bytes, written, "every byte checked");
}

/// The goodput bound of 100 GbE with 9000-byte frames carrying 40 bytes of headers:
/// 8960 payload bytes per 9038 bytes of line time.
const BOUND_GBIT: f64 = 100.0 * 8960.0 / 9038.0;

fn steady(r: &IperfResult) -> f64 {
    // The second report: past the handshakes and slow start, before the drain.
    r.report
        .streams
        .iter()
        .map(|s| s.intervals[1].received_gbit_per_s)
        .sum()
}

#[test]
fn a_lent_nic_sends_as_fast_as_the_lenders_own_and_both_fill_the_link() {
    let local = run(end("lender", "nic0"), 4);
    let lent = run(end("borrower", "lender:nic0"), 4);
    let (l, b) = (steady(&local), steady(&lent));
    eprintln!(
        "4 streams, steady: lender's own NIC {l:.2} Gb/s, borrowed {b:.2} Gb/s (bound {BOUND_GBIT:.2}); whole runs {:.2} / {:.2}",
        local.report.server_gbit_per_s, lent.report.server_gbit_per_s
    );
    for r in [&local, &lent] {
        let written: u64 = r.report.streams.iter().map(|s| s.bytes).sum();
        assert_eq!(r.report.verified_bytes, written, "every byte checked");
        assert_eq!(r.mss, 8960);
    }
    assert!((l - b).abs() <= 0.02 * l, "local {l} vs lent {b}");
    for g in [l, b] {
        assert!(g <= BOUND_GBIT * 1.001 && g > 0.95 * BOUND_GBIT, "{g}");
    }
}

/// Paper V Fig. 28: a virtual function lent to another host performs like the physical
/// function used by its own host; both are bounded by the link.
#[test]
fn a_lent_virtual_function_sends_as_fast_as_the_local_physical_function() {
    let pf = run(end("lender", "nic0"), 4);
    let vf_local = run(end("lender", "nic0.vf1"), 4);
    let vf_lent = run(end("borrower", "lender:nic0.vf1"), 4);
    let (p, l, b) = (steady(&pf), steady(&vf_local), steady(&vf_lent));
    eprintln!(
        "4 streams, steady: PF local {p:.2}, VF local {l:.2}, VF lent {b:.2} Gb/s (bound {BOUND_GBIT:.2})"
    );
    for r in [&pf, &vf_local, &vf_lent] {
        checked(r);
    }
    assert!((b - p).abs() <= 0.02 * p, "VF lent {b} vs PF local {p}");
    for g in [p, l, b] {
        assert!(g <= BOUND_GBIT * 1.001 && g > 0.95 * BOUND_GBIT, "{g}");
    }
}

/// Two clients of `scenario`, a VF of the lender's NIC each, sending to the receiver at once:
/// every byte checked, the receiver's rate is the sum of theirs and fills the link, and they
/// share it about equally.
fn two_clients_share_the_link(scenario: &str, a: IperfEnd, b: IperfEnd) {
    let cluster = Cluster::new(scenario, &Calibration::default_embedded()).expect("scenario");
    let r = run_on(&cluster, end("receiver", "nic0"), vec![(a, 2), (b, 2)]);
    checked(&r);
    let clients = r.report.client_gbit_per_s();
    let sum: f64 = clients.iter().map(|(_, g)| g).sum();
    eprintln!(
        "{clients:?}: sum {sum:.2}, server {:.2} Gb/s",
        r.report.server_gbit_per_s
    );
    assert_eq!(clients.len(), 2);
    assert!((sum - r.report.server_gbit_per_s).abs() < 1e-6 * sum);
    assert!(r.report.server_gbit_per_s > 0.95 * BOUND_GBIT);
    for (_, g) in &clients {
        assert!((g - sum / 2.0).abs() < 0.1 * sum, "{clients:?}");
    }
}

/// Paper V Fig. 29: the lender and a borrower each use a VF of one NIC at the same time.
#[test]
fn two_hosts_share_one_nic_through_two_virtual_functions() {
    two_clients_share_the_link(
        "sriov",
        end("lender", "nic0.vf1"),
        end("borrower", "lender:nic0.vf2"),
    );
}

/// Issue 17: two borrowers on different hosts use two VFs of one NIC at the same time.
#[test]
fn two_borrowers_on_different_hosts_send_through_two_vfs_of_one_nic_at_once() {
    two_clients_share_the_link(
        "sriov-share",
        end("borrower-a", "lender:nic0.vf1"),
        end("borrower-b", "lender:nic0.vf2"),
    );
}

/// Paper V §7.1.6: the lender and a borrower using two VFs of one NIC reach each other
/// through its internal switch, without a frame on the wire.
#[test]
fn lender_and_borrower_talk_through_the_nics_internal_switch_not_the_wire() {
    let cluster = Cluster::new("sriov", &Calibration::default_embedded()).expect("scenario");
    let r = run_on(
        &cluster,
        end("lender", "nic0.vf1"),
        vec![(end("borrower", "lender:nic0.vf2"), 2)],
    );
    checked(&r);
    let (tx, rx, switched) = port(&cluster, "lender");
    eprintln!(
        "lender's NIC: wire out {tx}, wire in {rx}, internal switch {switched}; {:.2} Gb/s",
        r.report.server_gbit_per_s
    );
    assert_eq!((tx, rx), (0, 0), "nothing on the wire");
    assert!(switched > 1000, "{switched}");
    assert_eq!(port(&cluster, "receiver"), (0, 0, 0));
}

#[test]
fn bad_stream_counts_and_unknown_nics_are_refused_clearly() {
    let cluster = Cluster::new("sriov", &Calibration::default_embedded()).expect("scenario");
    let timing = IperfTiming {
        duration: SimDuration::from_us(100),
        interval: SimDuration::from_us(50),
        write_bytes: DEFAULT_WRITE_BYTES,
    };
    let config = |client: IperfEnd, streams| IperfConfig {
        server: end("receiver", "nic0"),
        clients: vec![(client, streams)],
        timing,
    };
    let e = iperf(&cluster, &config(end("lender", "nic0"), 0)).expect_err("zero streams");
    assert_eq!(
        e,
        IperfError::Parallel {
            streams: 0,
            host: "lender".into(),
            max: 64
        }
    );
    assert_eq!(e.to_string(), "--parallel 0 for lender: 1 to 64 streams");
    let e = iperf(&cluster, &config(end("borrower", "lender:nic9"), 1)).expect_err("no nic9");
    assert!(e.to_string().contains("nic9"), "{e}");
    let e = iperf(
        &cluster,
        &IperfConfig {
            clients: vec![
                (end("borrower", "lender:nic0"), 1),
                (end("lender", "nic0"), 1),
            ],
            ..config(end("lender", "nic0"), 1)
        },
    )
    .expect_err("one NIC function for two ends");
    assert_eq!(
        e.to_string(),
        "borrower and lender both use lender:nic0: each end needs a NIC function of its own (a VF of an SR-IOV NIC, or another NIC)"
    );
}

/// A client whose port sends jumbo frames to a server whose port takes only standard ones
/// could never get a full segment through: the run is refused, naming both MTUs, before a
/// byte is written (it used to retransmit for ever, and its reports grew without bound).
#[test]
fn ports_whose_mtus_differ_are_refused_naming_both() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios/mtu-mismatch.toml"
    );
    let cluster = Cluster::new(path, &Calibration::default_embedded()).expect("scenario");
    let e = iperf(
        &cluster,
        &IperfConfig {
            server: end("receiver", "nic0"),
            clients: vec![(end("lender", "nic0"), 1)],
            timing: TIMING,
        },
    )
    .expect_err("a 9000-byte port cannot send to a 1500-byte one");
    assert_eq!(
        e,
        IperfError::MtuMismatch {
            client: "lender".into(),
            client_mtu: 9000,
            server_mtu: 1500
        }
    );
    assert!(
        e.to_string().contains("give both ports the same mtu"),
        "{e}"
    );
    // The other way round works: the server's acknowledgements are small.
    let cluster = Cluster::new(path, &Calibration::default_embedded()).expect("scenario");
    let r = iperf(
        &cluster,
        &IperfConfig {
            server: end("lender", "nic0"),
            clients: vec![(end("receiver", "nic0"), 1)],
            timing: TIMING,
        },
    )
    .expect("standard frames to a jumbo port");
    checked(&r);
}

/// A run whose clients stop writing before their connection is even set up moves no byte:
/// that is an error saying so and how long the set-up took, not a table of zeroes.
#[test]
fn a_run_shorter_than_its_connection_set_up_measured_nothing_and_says_so() {
    let cluster = Cluster::new("sriov", &Calibration::default_embedded()).expect("scenario");
    let duration = SimDuration::from_ns(1);
    let e = iperf(
        &cluster,
        &IperfConfig {
            server: end("receiver", "nic0"),
            clients: vec![(end("lender", "nic0"), 1)],
            timing: IperfTiming {
                duration,
                interval: SimDuration::from_ps(250),
                write_bytes: DEFAULT_WRITE_BYTES,
            },
        },
    )
    .expect_err("nothing measured");
    match &e {
        IperfError::NothingMeasured {
            duration: d,
            connected: Some(c),
        } => {
            assert_eq!(*d, duration);
            assert!(c.as_ps() > 1_000_000, "connected after {} ps", c.as_ps());
        }
        other => panic!("expected NothingMeasured, got {other:?}"),
    }
    assert!(e.to_string().contains("give -t longer than"), "{e}");
}

/// Reports come every interval within the duration, and one more at the run's end: however
/// long connecting and draining take, a run makes at most duration / interval + 1 of them
/// (a 20 µs run reported every 2 ns used to sample until its streams drained, and a
/// picosecond interval grew to gigabytes).
#[test]
fn reports_stop_at_the_duration_however_long_the_streams_take() {
    let cluster = Cluster::new("sriov", &Calibration::default_embedded()).expect("scenario");
    let r = iperf(
        &cluster,
        &IperfConfig {
            server: end("receiver", "nic0"),
            clients: vec![(end("lender", "nic0"), 2)],
            timing: IperfTiming {
                duration: SimDuration::from_us(20),
                interval: SimDuration::from_ns(2),
                write_bytes: DEFAULT_WRITE_BYTES,
            },
        },
    )
    .expect("iperf runs");
    checked(&r);
    for s in &r.report.streams {
        assert_eq!(s.intervals.len(), 10_001, "stream {}", s.stream);
        let last = s.intervals.last().expect("intervals");
        assert_eq!(last.end_s, r.report.elapsed_s);
    }
}
