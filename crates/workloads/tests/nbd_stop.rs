//! Stopping the NBD export under load (what Ctrl-C or SIGTERM does to `serve nbd`): the
//! crate's NBD client, through the server's own connection loop, has many requests in
//! flight when the stop comes and sends more after it (once one of them is answered
//! `ESHUTDOWN`: the server has seen the stop). Every request is answered — done, or
//! `ESHUTDOWN` —, and the figures count exactly what the client saw: its successes are the
//! requests done, its `ESHUTDOWN`s the dropped ones, and nothing is left unanswered; a
//! client that stays connected and silent is hung up on once everything is written.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_nbd::client::Client;
use smartio_nbd::wire::write_request;
use smartio_nbd::{serve_unix_connection, Command, Errno, Request};
use smartio_workloads::nbd::{NbdConfig, NbdExport, NbdStats, ServeControl, STOP_QUIET};
use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// Requests sent before the stop, and as many after it.
const BURST: u64 = 64;

/// What the client saw: replies done, replies with each error, and requests it had no
/// reply to when the connection ended.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    done: u64,
    errors: HashMap<u32, u64>,
    unanswered: u64,
}

fn write(cookie: u64) -> Request {
    Request {
        flags: 0,
        command: Command::Write(vec![cookie as u8; 4096]),
        cookie,
        offset: (cookie % 1024) * 4096,
        len: 4096,
    }
}

/// Serves one client that sends [`BURST`] writes, waits for the first reply, asks the
/// server to stop, sends [`BURST`] more — one at a time until one is answered `ESHUTDOWN`,
/// then the rest at once — and reads replies until it has one for each or the server hangs
/// up; then it disconnects if `leaves`, or stays silent. Returns what the
/// client saw, the server's figures, and how long the server took to end after the
/// client's last reply.
fn stop_under_load(leaves: bool) -> (Seen, NbdStats, Duration) {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("loads");
    let cfg = NbdConfig {
        host: "borrower".into(),
        device: "lender:nvme0".into(),
        size: Some(16 << 20),
        ..NbdConfig::default()
    };
    let export = NbdExport::start(&cluster, &cfg).expect("starts");
    let (theirs, ours) = UnixStream::pair().expect("a socket pair");
    let (tx, rx) = mpsc::channel();
    let description = export.export();
    let conn = thread::spawn(move || serve_unix_connection(0, ours, &description, &tx));
    let stop = Arc::new(AtomicBool::new(false));
    let asks = stop.clone();
    let client = thread::spawn(move || {
        // A server that never answers fails the test instead of hanging it.
        theirs
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("a read timeout");
        let mut sending = theirs.try_clone().expect("a second handle");
        let mut c = Client::connect(theirs, "", true).expect("the handshake");
        for cookie in 1..=BURST {
            write_request(&mut sending, &write(cookie)).expect("sent");
        }
        let mut seen = Seen::default();
        let count = |r: Result<Vec<u8>, (u32, String)>, seen: &mut Seen| match r {
            Ok(_) => seen.done += 1,
            Err((errno, _)) => *seen.errors.entry(errno).or_default() += 1,
        };
        let first = c.receive(|_| 0).expect("the first reply");
        count(first.result, &mut seen);
        let mut replies = 1;
        // Under load: the other requests of the first burst are in flight or on their way.
        asks.store(true, Ordering::SeqCst);
        // One request at a time until one is answered ESHUTDOWN: the server has seen the
        // stop (one read with the flag just set may still be served), and everything
        // sent after that comes after it.
        let shutdown = Errno::Shutdown.code();
        let mut sent = BURST;
        while sent < 2 * BURST && !seen.errors.contains_key(&shutdown) {
            sent += 1;
            write_request(&mut sending, &write(sent)).expect("sent");
            loop {
                let r = c.receive(|_| 0).expect("a reply");
                count(r.result, &mut seen);
                replies += 1;
                if r.cookie == sent {
                    break;
                }
            }
        }
        assert!(
            seen.errors.contains_key(&shutdown),
            "no request answered ESHUTDOWN after the stop: {seen:?}"
        );
        for cookie in sent + 1..=2 * BURST {
            write_request(&mut sending, &write(cookie)).expect("sent");
        }
        while replies < 2 * BURST {
            match c.receive(|_| 0) {
                Ok(r) => count(r.result, &mut seen),
                Err(_) => break,
            }
            replies += 1;
        }
        seen.unanswered = 2 * BURST - replies;
        let answered = Instant::now();
        if leaves {
            c.disconnect().expect("goodbye");
        } else {
            // Silent: the server hangs up on it.
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut sending, &mut rest);
            assert!(rest.is_empty(), "bytes after the last reply: {rest:?}");
        }
        (seen, answered)
    });
    let control = ServeControl {
        stop: Some(&stop),
        ..ServeControl::default()
    };
    let stats = export.serve(&rx, control, |_| {}).expect("serves");
    let ended = Instant::now();
    let (seen, answered) = client
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    conn.join().expect("the connection's thread");
    (seen, stats, ended.saturating_duration_since(answered))
}

/// The figures count what the client saw, and the stop dropped some requests.
fn check(seen: &Seen, stats: &NbdStats) {
    let shutdown = Errno::Shutdown.code();
    let dropped_answered = stats.dropped - stats.dropped_unanswered;
    assert_eq!(
        (
            seen.done,
            seen.errors.get(&shutdown).copied().unwrap_or(0),
            seen.unanswered
        ),
        (stats.ops(), dropped_answered, stats.dropped_unanswered),
        "the client saw (done, ESHUTDOWN, unanswered) {seen:?}"
    );
    assert_eq!(seen.errors.len(), usize::from(dropped_answered > 0));
    assert_eq!((stats.failed, stats.refused), (0, 0));
    assert_eq!(seen.done + dropped_answered + seen.unanswered, 2 * BURST);
    assert_eq!(
        seen.unanswered, 0,
        "every request the client sent is answered"
    );
    assert!(
        seen.done >= 1,
        "the requests in flight at the stop were done"
    );
    assert!(
        stats.dropped > 0,
        "the requests sent after the stop were dropped"
    );
    assert!(
        dropped_answered >= BURST / 2,
        "only {dropped_answered} of the {BURST} requests sent after the stop were dropped"
    );
}

#[test]
fn a_stop_under_load_answers_every_request_and_counts_what_the_client_saw() {
    let (seen, stats, _) = stop_under_load(true);
    eprintln!("the client saw {seen:?}; dropped {}", stats.dropped);
    check(&seen, &stats);
}

#[test]
fn a_client_that_stays_silent_after_the_stop_is_hung_up_on_once_its_answers_are_written() {
    let (seen, stats, after) = stop_under_load(false);
    check(&seen, &stats);
    assert!(
        after >= STOP_QUIET / 2,
        "the server waited for a quiet client only {after:?}"
    );
}
