//! The transport over a test wire, in virtual time: bytes arrive as written, losses are
//! repaired, the wire's rate bounds a stream, and connection errors are the specific ones.

use super::stack::{NetError, NetStack, StackCosts};
use super::wire::{wire, WireConfig, WireEnd};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::ethernet::{MacAddr, JUMBO_MTU};
use smartio_fabric::HostId;
use smartio_machine::Agent;
use smartio_platform::{Clock, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const PORT: u16 = 5001;

type Stack = NetStack<WireEnd<Agent>, Agent>;

struct Bench {
    cluster: Cluster,
    a: Stack,
    b: Stack,
}

fn bench(lose_every: Option<u64>) -> Bench {
    bench_on(lose_every, None)
}

/// A bench whose wire loses every `lose_every`-th frame from A, and every frame A sends after
/// its first `cut_after`.
fn bench_on(lose_every: Option<u64>, cut_after: Option<u64>) -> Bench {
    let cal = Calibration::default_embedded();
    let cluster = Cluster::new("back-to-back", &cal).expect("scenario");
    let cpu = cluster.machine.cpu(HostId(0));
    let config = WireConfig {
        gbit_per_s: 100.0,
        latency: SimDuration::from_ns(500),
        mtu: JUMBO_MTU,
        lose_every,
        cut_after,
    };
    let (end_a, end_b) = wire(config, cpu.clone(), A, B);
    let costs = StackCosts::from_calibration(&cal);
    let a = NetStack::new(end_a, cpu.clone(), costs);
    let b = NetStack::new(end_b, cpu, costs);
    for s in [&a, &b] {
        let s = s.clone();
        cluster.machine.spawn(async move {
            s.run().await;
        });
    }
    Bench { cluster, a, b }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 131 + u64::from(seed)) as u8)
        .collect()
}

/// What the server received on each of `streams` connections from A to B, each writing
/// `bytes`, and the virtual time the transfer took.
fn transfer(bench: &Bench, streams: u8, bytes: usize) -> (Vec<Vec<u8>>, SimDuration, u64) {
    let listener = bench.b.listen(PORT).expect("listen");
    let received = Rc::new(RefCell::new(vec![Vec::new(); usize::from(streams)]));
    let retransmissions = Rc::new(RefCell::new(0));
    let cpu = bench.cluster.machine.cpu(HostId(0));
    let start = cpu.now();
    let end = Rc::new(RefCell::new(start));
    let got = received.clone();
    let finished = end.clone();
    let clock = cpu.clone();
    let machine = bench.cluster.machine.clone();
    bench.cluster.machine.spawn(async move {
        for _ in 0..streams {
            let stream = listener.accept().await.expect("accept");
            let got = got.clone();
            let finished = finished.clone();
            let clock = clock.clone();
            machine.spawn(async move {
                let mut data = Vec::new();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = stream.read(&mut buf).await.expect("read");
                    if n == 0 {
                        break;
                    }
                    data.extend_from_slice(&buf[..n]);
                }
                let seed = data.first().copied().unwrap_or(0);
                got.borrow_mut()[usize::from(seed)] = data;
                let now = clock.now();
                if now > *finished.borrow() {
                    *finished.borrow_mut() = now;
                }
            });
        }
    });
    for s in 0..streams {
        let a = bench.a.clone();
        let retransmissions = retransmissions.clone();
        bench.cluster.machine.spawn(async move {
            let stream = a.connect(B, PORT).await.expect("connect");
            // The first byte names the stream.
            let mut data = pattern(bytes, 0);
            data[0] = s;
            for chunk in data.chunks(128 * 1024) {
                stream.write(chunk).await.expect("write");
            }
            stream.close().await.expect("close");
            *retransmissions.borrow_mut() += stream.retransmissions();
        });
    }
    bench.cluster.machine.run();
    let took = end.borrow().since(start);
    let r = received.borrow().clone();
    let n = *retransmissions.borrow();
    (r, took, n)
}

fn expected(stream: u8, bytes: usize) -> Vec<u8> {
    let mut data = pattern(bytes, 0);
    data[0] = stream;
    data
}

#[test]
fn a_stream_delivers_every_byte_in_order_and_ends_with_the_fin() {
    let bench = bench(None);
    let (got, took, retransmissions) = transfer(&bench, 1, 4 << 20);
    assert_eq!(got[0], expected(0, 4 << 20));
    assert_eq!(retransmissions, 0);
    assert!(took > SimDuration::ZERO);
}

#[test]
fn four_streams_fill_the_wire_and_no_more() {
    let bench = bench(None);
    let bytes = 8 << 20;
    let (got, took, _) = transfer(&bench, 4, bytes);
    for (s, data) in got.iter().enumerate() {
        assert_eq!(*data, expected(s as u8, bytes), "stream {s}");
    }
    // Goodput against the wire's: 8960 payload bytes of every 9000 + 14 + 24 on the wire.
    let gbit = (4 * bytes) as f64 * 8.0 / (took.as_ps() as f64 / 1000.0);
    let bound = 100.0 * 8960.0 / 9038.0;
    eprintln!("4 streams: {gbit:.2} Gb/s of goodput (the wire allows {bound:.2})");
    assert!(gbit < bound, "{gbit} Gb/s beats the wire");
    assert!(
        gbit > 0.9 * bound,
        "{gbit} Gb/s: the wire, not the stack, bounds four streams"
    );
}

#[test]
fn lost_frames_are_sent_again_and_nothing_arrives_twice_or_out_of_order() {
    let bench = bench(Some(97));
    let (got, _, retransmissions) = transfer(&bench, 2, 2 << 20);
    assert_eq!(got[0], expected(0, 2 << 20));
    assert_eq!(got[1], expected(1, 2 << 20));
    assert!(
        retransmissions > 0,
        "frames were lost, so some were sent again"
    );
}

#[test]
fn a_transfer_is_identical_across_runs() {
    let run = || {
        let bench = bench(Some(50));
        let (got, took, retransmissions) = transfer(&bench, 2, 1 << 20);
        (
            got,
            took,
            retransmissions,
            bench.a.counters(),
            bench.b.counters(),
        )
    };
    assert_eq!(run(), run());
}

#[test]
fn connecting_to_a_port_nobody_listens_on_is_refused() {
    let bench = bench(None);
    let result = Rc::new(RefCell::new(None));
    let (a, r) = (bench.a.clone(), result.clone());
    bench.cluster.machine.spawn(async move {
        *r.borrow_mut() = Some(a.connect(B, 9).await.map(|_| ()));
    });
    bench.cluster.machine.run();
    assert_eq!(
        result.borrow_mut().take(),
        Some(Err(NetError::Refused { peer: B, port: 9 }))
    );
    assert_eq!(bench.b.counters().no_connection, 1);
}

#[test]
fn connecting_to_an_address_nobody_has_times_out_after_six_syns() {
    let bench = bench(None);
    let nobody = MacAddr([0x02, 0, 0, 0, 0, 0xee]);
    let result = Rc::new(RefCell::new(None));
    let (a, r) = (bench.a.clone(), result.clone());
    bench.cluster.machine.spawn(async move {
        *r.borrow_mut() = Some(a.connect(nobody, PORT).await.map(|_| ()));
    });
    bench.cluster.machine.run();
    assert_eq!(
        result.borrow_mut().take(),
        Some(Err(NetError::ConnectTimeout {
            peer: nobody,
            port: PORT,
            attempts: 6
        }))
    );
}

#[test]
fn a_port_is_listened_on_once() {
    let bench = bench(None);
    let _first = bench.b.listen(PORT).expect("free");
    assert_eq!(
        bench.b.listen(PORT).err(),
        Some(NetError::PortInUse { port: PORT })
    );
}

/// RFC 8985's tail-loss probe: a lost last segment (here the FIN, the 4th frame: SYN, two
/// data segments, FIN) has no later segment to make duplicate acknowledgements, so only a
/// timer can repair it; the probe fires after max(2 × SRTT, 10 ms), well before the 200 ms
/// minimum retransmission timeout.
#[test]
fn a_lost_tail_is_repaired_by_the_probe_long_before_the_retransmission_timeout() {
    let bench = bench(Some(4));
    let mss = bench.a.mss() as usize;
    let (got, took, retransmissions) = transfer(&bench, 1, 2 * mss);
    assert_eq!(got[0], expected(0, 2 * mss));
    assert_eq!(retransmissions, 1);
    let ms = took.as_ps() as f64 / 1e9;
    assert!(ms > 10.0 && ms < 20.0, "{ms} ms");
}

/// A path that loses every segment once the connection is up (here: every frame after A's
/// SYN) must not keep a sender retransmitting for ever: after 15 timeouts in a row with
/// nothing heard back (Linux's tcp_retries2), the next one gives the connection up, some 8.7
/// minutes of virtual time later with the timeout doubling from 200 ms to 60 s.
#[test]
fn a_connection_whose_segments_all_vanish_is_given_up_after_fifteen_retransmissions() {
    let bench = bench_on(None, Some(1));
    let listener = bench.b.listen(PORT).expect("listen");
    bench.cluster.machine.spawn(async move {
        let _accepted = listener.accept().await;
        std::future::pending::<()>().await;
    });
    let result = Rc::new(RefCell::new(None));
    let (a, r) = (bench.a.clone(), result.clone());
    let cpu = bench.cluster.machine.cpu(HostId(0));
    let clock = cpu.clone();
    bench.cluster.machine.spawn(async move {
        let outcome = async {
            let stream = a.connect(B, PORT).await?;
            stream.write(&pattern(100_000, 1)).await?;
            stream.close().await
        }
        .await;
        *r.borrow_mut() = Some((outcome, clock.now()));
    });
    bench.cluster.machine.run();
    let (outcome, at) = result.borrow_mut().take().expect("the writer ended");
    let mss = bench.a.mss();
    match outcome {
        Err(NetError::Unacknowledged {
            peer,
            port,
            retransmissions,
            bytes,
            mss: m,
        }) => {
            assert_eq!((peer, port, retransmissions, m), (B, PORT, 15, mss));
            assert!(bytes > 0 && bytes <= 100_000, "{bytes} bytes out");
        }
        other => panic!("expected the connection to be given up, got {other:?}"),
    }
    let seconds = at.as_ps() as f64 / 1e12;
    assert!(
        (500.0..560.0).contains(&seconds),
        "given up after {seconds} s"
    );
}
