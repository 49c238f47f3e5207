//! The iperf core over the test wire: the server checks every byte, four streams fill the
//! wire, reports come every interval, and runs are identical.

use super::*;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::ethernet::{MacAddr, JUMBO_MTU};
use smartio_drivers::net::stack::StackCosts;
use smartio_drivers::net::wire::{wire, WireConfig};
use smartio_fabric::HostId;

const CLIENT: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
const SERVER: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);

fn run(streams: u32, lose_every: Option<u64>) -> IperfReport {
    let cal = Calibration::default_embedded();
    let cluster = Cluster::new("back-to-back", &cal).expect("scenario");
    let cpu = cluster.machine.cpu(HostId(0));
    let config = WireConfig {
        gbit_per_s: 100.0,
        latency: SimDuration::from_ns(500),
        mtu: JUMBO_MTU,
        lose_every,
        cut_after: None,
    };
    let (a, b) = wire(config, cpu.clone(), CLIENT, SERVER);
    let costs = StackCosts::from_calibration(&cal);
    let client = NetStack::new(a, cpu.clone(), costs);
    let server = NetStack::new(b, cpu.clone(), costs);
    for s in [&client, &server] {
        let s = s.clone();
        cluster.machine.spawn(async move {
            s.run().await;
        });
    }
    let timing = IperfTiming {
        duration: SimDuration::from_us(4000),
        interval: SimDuration::from_us(1000),
        write_bytes: DEFAULT_WRITE_BYTES,
    };
    run_iperf(
        &cluster.machine,
        cpu,
        &server,
        &[("client".into(), client, streams)],
        timing,
    )
    .expect("iperf runs")
}

#[test]
fn the_server_reads_and_checks_every_byte_each_stream_wrote() {
    let r = run(2, None);
    let written: u64 = r.streams.iter().map(|s| s.bytes).sum();
    assert!(written > 0);
    assert_eq!(r.verified_bytes, written);
    assert!(r.streams.iter().all(|s| s.retransmissions == 0));
}

#[test]
fn four_streams_are_bounded_by_the_wire_and_reported_every_interval() {
    let r = run(4, None);
    let bound = 100.0 * 8960.0 / 9038.0;
    eprintln!(
        "4 streams: server {:.2} Gb/s (wire goodput bound {bound:.2}); intervals {:?}",
        r.server_gbit_per_s,
        r.streams[0]
            .intervals
            .iter()
            .map(|i| (i.end_s, i.received_gbit_per_s))
            .collect::<Vec<_>>()
    );
    assert!(r.server_gbit_per_s < bound);
    assert!(r.server_gbit_per_s > 0.9 * bound, "{}", r.server_gbit_per_s);
    // 4 ms of writing at 1 ms intervals, plus the drain.
    assert!(r.streams.iter().all(|s| s.intervals.len() >= 4));
    let total: f64 = r
        .streams
        .iter()
        .map(|s| s.intervals[1].received_gbit_per_s)
        .sum();
    assert!(total > 0.9 * bound && total < bound * 1.001, "{total}");
}

#[test]
fn losses_are_repaired_and_every_byte_still_checks() {
    let r = run(2, Some(101));
    let written: u64 = r.streams.iter().map(|s| s.bytes).sum();
    assert_eq!(r.verified_bytes, written);
    assert!(r.streams.iter().any(|s| s.retransmissions > 0));
}

#[test]
fn an_iperf_run_is_identical_across_runs() {
    assert_eq!(run(3, Some(77)), run(3, Some(77)));
}

#[test]
fn the_pattern_helpers_agree_byte_for_byte() {
    let table = pattern_table(5);
    let mut buf = vec![0u8; 1000];
    fill(&table, 12345, &mut buf);
    assert_eq!(first_wrong(&table, 12345, &buf), None);
    buf[777] ^= 1;
    assert_eq!(first_wrong(&table, 12345, &buf), Some(777));
    assert_ne!(pattern_table(5), pattern_table(6));
}

#[test]
fn the_last_interval_ends_with_the_run_and_its_rate_is_over_its_real_length() {
    let r = run(4, None);
    for s in &r.streams {
        let last = s.intervals.last().expect("intervals");
        assert_eq!(last.end_s, r.elapsed_s, "stream {}", s.stream);
        let before = s.intervals[s.intervals.len() - 2].end_s;
        assert!(before < last.end_s, "{before} then {}", last.end_s);
        // Every byte a stream's intervals count adds up to what it sent, whatever the lengths.
        let mut start = 0.0;
        let sent: f64 = s
            .intervals
            .iter()
            .map(|i| {
                let bytes = i.sent_gbit_per_s * 1e9 / 8.0 * (i.end_s - start);
                start = i.end_s;
                bytes
            })
            .sum();
        assert!(
            (sent - s.bytes as f64).abs() < 1.0,
            "stream {}: {sent} of {} bytes",
            s.stream,
            s.bytes
        );
    }
}
