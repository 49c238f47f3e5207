//! The NBD export's serving loop, fed events directly: many bursts of one request each (an
//! earlier loop let the clock's horizon drift ahead of it by a slice per burst and then
//! called the idle server stuck), what a burst of many requests at once does to the
//! buffers and queue pairs, and how many NVMe commands requests become (the controller's
//! SMART counts) with the bytes read back.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_nbd::server::{Event, Replier};
use smartio_nbd::{Command, Request};
use smartio_workloads::nbd::{NbdConfig, NbdExport, ServeControl};
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Instant;

/// An export of the borrowed NVMe with its cluster, which the caller keeps while it serves
/// (dropping a cluster ends its simulation).
fn export(queues: u32, depth: u32) -> (Cluster, NbdExport) {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("loads");
    let cfg = NbdConfig {
        host: "borrower".into(),
        device: "lender:nvme0".into(),
        size: Some(16 << 20),
        queues,
        depth,
        ..NbdConfig::default()
    };
    let export = NbdExport::start(&cluster, &cfg).expect("starts");
    (cluster, export)
}

fn read(cookie: u64, offset: u64, len: u32) -> Event {
    Event::Request {
        conn: 0,
        request: Request {
            flags: 0,
            command: Command::Read,
            cookie,
            offset,
            len,
        },
        received: Instant::now(),
    }
}

/// A channel of events with connection 0 opened on it (simple replies), and the client's
/// end of that connection.
fn opened() -> (mpsc::Sender<Event>, mpsc::Receiver<Event>, UnixStream) {
    let (tx, rx) = mpsc::channel();
    let (ours, theirs) = UnixStream::pair().unwrap();
    tx.send(Event::Opened {
        conn: 0,
        replier: Replier::over_unix(ours, false).unwrap(),
    })
    .unwrap();
    (tx, rx, theirs)
}

/// Reads `n` simple replies of `len` data bytes each off `s`; their cookies.
fn replies(s: &mut UnixStream, n: usize, len: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let mut head = [0u8; 16];
            s.read_exact(&mut head).unwrap();
            assert_eq!(head[4..8], [0, 0, 0, 0], "an error reply");
            let mut data = vec![0u8; len];
            s.read_exact(&mut data).unwrap();
            u64::from_be_bytes(head[8..16].try_into().unwrap())
        })
        .collect()
}

/// The client of connection 0 hangs up.
fn hang_up(tx: &mpsc::Sender<Event>) {
    tx.send(Event::Closed {
        conn: 0,
        error: None,
    })
    .unwrap();
}

/// Serve one connection, then return.
fn serve_once() -> ServeControl<'static> {
    ServeControl {
        once: true,
        ..ServeControl::default()
    }
}

#[test]
fn thousands_of_one_request_bursts_are_each_served_and_timed() {
    let (_cluster, export) = export(1, 4);
    let (tx, rx, mut theirs) = opened();
    // One request at a time: each is a burst of its own, of a slice or two.
    const N: u64 = 20_000;
    let client = std::thread::spawn(move || {
        for i in 0..N {
            tx.send(read(i, (i % 4096) * 4096, 4096)).unwrap();
            assert_eq!(replies(&mut theirs, 1, 4096), vec![i]);
        }
        hang_up(&tx);
    });
    let control = serve_once();
    let stats = export
        .serve(&rx, control, |_| {})
        .expect("serves every burst");
    client.join().unwrap();
    assert_eq!(stats.reads, N);
    assert_eq!(stats.failed, 0);
    // Virtual time ran only while a request was in flight: about N single reads' latency.
    let per_read = stats.virtual_elapsed.as_ps() as f64 / N as f64 / 1e6;
    assert!(
        (5.0..30.0).contains(&per_read),
        "{per_read} µs of virtual time per read"
    );
}

#[test]
fn a_burst_larger_than_the_buffers_waits_and_every_request_is_answered() {
    // Two queue pairs of two: four buffers for sixty-four requests at once.
    let (_cluster, export) = export(2, 2);
    let (tx, rx, mut theirs) = opened();
    for i in 0..64 {
        tx.send(read(i, i * 8192, 8192)).unwrap();
    }
    let client = std::thread::spawn(move || {
        let mut got = replies(&mut theirs, 64, 8192);
        hang_up(&tx);
        got.sort_unstable();
        got
    });
    let control = serve_once();
    let stats = export.serve(&rx, control, |_| {}).expect("serves");
    assert_eq!(client.join().unwrap(), (0..64).collect::<Vec<u64>>());
    assert_eq!(stats.reads, 64);
    // Four at a time: the last waited for fifteen rounds of others, but not for ever.
    let max_us = stats.virtual_latency.max() as f64 / 1e6;
    let min_us = stats.virtual_latency.min() as f64 / 1e6;
    assert!(max_us > 8.0 * min_us, "max {max_us} µs, min {min_us} µs");
}

fn write(cookie: u64, offset: u64, data: Vec<u8>) -> Event {
    Event::Request {
        conn: 0,
        request: Request {
            flags: 0,
            len: u32::try_from(data.len()).unwrap(),
            command: Command::Write(data),
            cookie,
            offset,
        },
        received: Instant::now(),
    }
}

/// Reads one simple reply of `len` data bytes off `s`: its cookie and data.
fn reply(s: &mut UnixStream, len: usize) -> (u64, Vec<u8>) {
    let mut head = [0u8; 16];
    s.read_exact(&mut head).unwrap();
    assert_eq!(head[4..8], [0, 0, 0, 0], "an error reply");
    let mut data = vec![0u8; len];
    s.read_exact(&mut data).unwrap();
    (u64::from_be_bytes(head[8..16].try_into().unwrap()), data)
}

#[test]
fn a_4_kib_write_is_one_nvme_write_and_its_read_back_one_read_with_the_same_bytes() {
    let (_cluster, export) = export(4, 32);
    let (reads0, writes0) = export.io_commands().expect("the SMART log");
    let (tx, rx, mut theirs) = opened();
    const N: u64 = 64;
    let block = |i: u64| -> Vec<u8> { (0..4096).map(|b| (i * 131 + b * 7) as u8).collect() };
    // Written in bursts of 32, as fio at queue depth 32 would, then read back the same way.
    let client = std::thread::spawn(move || {
        let offset = |i: u64| (i * 37 % 4096) * 4096;
        for burst in 0..N / 32 {
            for i in burst * 32..(burst + 1) * 32 {
                tx.send(write(i, offset(i), block(i))).unwrap();
            }
            let mut got: Vec<u64> = (0..32).map(|_| reply(&mut theirs, 0).0).collect();
            got.sort_unstable();
            assert_eq!(got, (burst * 32..(burst + 1) * 32).collect::<Vec<_>>());
        }
        for burst in 0..N / 32 {
            for i in burst * 32..(burst + 1) * 32 {
                tx.send(read(N + i, offset(i), 4096)).unwrap();
            }
            for _ in 0..32 {
                let (cookie, data) = reply(&mut theirs, 4096);
                assert_eq!(data, block(cookie - N), "block {} read back", cookie - N);
            }
        }
        hang_up(&tx);
    });
    let control = serve_once();
    let stats = export.serve(&rx, control, |_| {}).expect("serves");
    client.join().unwrap();
    assert_eq!((stats.writes, stats.reads, stats.failed), (N, N, 0));
    let (reads, writes) = export.io_commands().expect("the SMART log");
    assert_eq!(
        (reads - reads0, writes - writes0),
        (N, N),
        "NVMe Read and Write commands for {N} NBD reads and writes of 4 KiB"
    );
}

#[test]
fn a_write_larger_than_the_controllers_largest_transfer_is_cut_into_that_many_commands() {
    let (_cluster, export) = export(1, 4);
    let mdts = export.max_transfer();
    let (_, writes0) = export.io_commands().expect("the SMART log");
    let (tx, rx, mut theirs) = opened();
    let len = 3 * mdts + 4096;
    let data: Vec<u8> = (0..len).map(|b| (b % 251) as u8).collect();
    let expected = data.clone();
    let client = std::thread::spawn(move || {
        tx.send(write(1, 8192, data)).unwrap();
        assert_eq!(reply(&mut theirs, 0).0, 1);
        tx.send(read(2, 8192, u32::try_from(len).unwrap())).unwrap();
        let (cookie, back) = reply(&mut theirs, len as usize);
        assert_eq!(cookie, 2);
        assert!(back == expected, "the bytes read back differ");
        hang_up(&tx);
    });
    let control = serve_once();
    export.serve(&rx, control, |_| {}).expect("serves");
    client.join().unwrap();
    let (_, writes) = export.io_commands().expect("the SMART log");
    assert_eq!(
        writes - writes0,
        4,
        "{len} bytes in writes of at most {mdts}"
    );
}
