//! iperf over the NIC model (scenario `sriov`, Paper V Fig. 28): the lender's NIC used
//! locally and lent to the borrower reach the same throughput, bounded by the 100 GbE link;
//! every byte is checked at the receiver.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_platform::SimDuration;
use smartio_workloads::{
    iperf, IperfConfig, IperfEnd, IperfError, IperfResult, IperfTiming, DEFAULT_WRITE_BYTES,
};

fn end(host: &str, device: &str) -> IperfEnd {
    IperfEnd {
        host: host.into(),
        device: device.into(),
    }
}

fn run(client: IperfEnd, streams: u32) -> IperfResult {
    let cluster = Cluster::new("sriov", &Calibration::default_embedded()).expect("scenario");
    iperf(
        &cluster,
        &IperfConfig {
            server: end("receiver", "nic0"),
            clients: vec![(client, streams)],
            timing: IperfTiming {
                duration: SimDuration::from_us(2000),
                interval: SimDuration::from_us(500),
                write_bytes: DEFAULT_WRITE_BYTES,
            },
        },
    )
    .expect("iperf runs")
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
        IperfError::BadParameter("--parallel 0 for lender: 1 to 64 streams".into())
    );
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
