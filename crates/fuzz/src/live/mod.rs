//! The `live_requests` target: programs' requests to the live engine's cluster daemon
//! (`smartio_live::Daemon`), through its program-less sessions, on the shipped `back-to-back`
//! scenario (borrower, node id 4; lender, node id 8, with nvme0, gpu0..2 and dma0).
//!
//! An input is two or three sessions, each starting with a Hello (as the lender, the
//! borrower or a host the cluster does not have) or without one, then up to 64 requests
//! (every kind but `Shutdown`) or closes of a session mid-way ([`ops`]). Handles come mostly
//! from earlier replies — the session's own, another session's, or of the wrong kind —
//! sometimes near the latest or arbitrary numbers.
//!
//! Checked ([`check`]): every request is answered within [`PATIENCE`] (no answer is a hang);
//! an error's code is one of SISCI's (`SciErrorClass::code`) and its message says something;
//! a request of a session that has no host (no Hello, a refused one, closed, or attached to
//! a descriptor that closed) fails, and so does one naming a handle another descriptor was
//! given; a Hello that names a real host on a fresh session (attached to a live descriptor
//! of the same host, or not at all) succeeds, a second one fails; a success has its
//! request's kind of reply; `LocalNodeId` is the host's node id; a map is as long as asked;
//! a segment or interrupt gets the id or number asked; a message waited for is one a
//! trigger sent to that interrupt; a DMA queue's state is a `sci_dma_queue_state_t`; and
//! when every session is closed at the end (and closed programs' DMA queues drained), the
//! fabric's tables and the borrowed devices (`Daemon::resources_in_use`) are as they were
//! before the first session opened.
//!
//! A daemon takes far longer to build than an input takes to run, so each thread keeps one
//! and reuses it across inputs: the last check is what makes that sound (each input leaves
//! it as it found it). An input that panics drops it; the next builds another. After
//! `REUSES` inputs it is rebuilt all the same, so that what the check cannot see (memory
//! of segments nobody can reach any more) does not pile up over a long run. The outcome counts replies by kind, never
//! handle numbers (they keep growing in a reused daemon) nor whether a wait found a message
//! or timed out (that is the wall clock's to decide).

pub mod check;
pub mod ops;

use crate::Outcome;
use check::World;
use ops::{Action, Ask, Greeting, HostName};
use smartio_live::Daemon;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The scenario the daemon runs.
const SCENARIO: &str = "back-to-back";

/// Longest a request may take to be answered (a wait takes at most 5 ms).
pub const PATIENCE: Duration = Duration::from_secs(2);

/// Inputs one daemon serves before it is rebuilt.
const REUSES: u32 = 1000;

thread_local! {
    /// This thread's daemon between inputs, and how many it has served.
    static DAEMON: RefCell<Option<(Daemon, u32)>> = const { RefCell::new(None) };
}

/// A socket path no other daemon uses, short enough for `sockaddr_un` (108 bytes).
fn socket_path() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "smartio-fuzz-live-{}-{}.sock",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    match std::env::temp_dir().join(&name).to_str() {
        Some(p) if p.len() < 100 => p.to_string(),
        _ => format!("/tmp/{name}"),
    }
}

/// This thread's daemon and how many inputs it served, built the first time, after an
/// input that panicked and after [`REUSES`] inputs.
fn daemon() -> (Daemon, u32) {
    if let Some((d, served)) = DAEMON.with(|d| d.borrow_mut().take()) {
        if served < REUSES {
            return (d, served);
        }
    }
    let path = socket_path();
    match Daemon::up(SCENARIO, &crate::calibration_default(), &path) {
        Ok(d) => (d, 0),
        Err(e) => panic!("the {SCENARIO} daemon does not start at {path}: {e}"),
    }
}

/// Runs the sessions and requests `data` decodes to, closes every session and checks that
/// the daemon is as it was.
pub fn live_requests(data: &[u8]) -> Outcome {
    let plan = ops::decode(data);
    let (mut d, served) = daemon();
    let before = d.resources_in_use();
    let mut w = World::new(d.hosts());
    for greeting in &plan.sessions {
        let id = match d.open_session() {
            Ok(id) => id,
            Err(e) => panic!("a session does not open: {e}"),
        };
        let s = w.add_session(id);
        let name = match greeting {
            Greeting::Lender => HostName::Lender,
            Greeting::Borrower => HostName::Borrower,
            Greeting::Stranger => HostName::Nobody,
            Greeting::Silent => continue,
        };
        w.ask(&mut d, s, &Ask::Hello(name, None));
    }
    let mut closed = 0;
    for op in &plan.ops {
        let s = usize::from(op.session) % plan.sessions.len();
        match &op.action {
            Action::Ask(ask) => w.ask(&mut d, s, ask),
            Action::Close => {
                if w.close(&mut d, s) {
                    closed += 1;
                }
            }
        }
    }
    for s in 0..plan.sessions.len() {
        w.close(&mut d, s);
    }
    // A closed program's DMA queue drains before its ring and windows go.
    assert!(
        d.settle(PATIENCE),
        "a closed program's DMA queue did not drain within {PATIENCE:?}"
    );
    let after = d.resources_in_use();
    assert_eq!(
        before, after,
        "after every session closed, the fabric's tables (LUT and requester-id entries per adapter) and borrowed devices differ"
    );
    DAEMON.with(|cell| *cell.borrow_mut() = Some((d, served + 1)));
    Outcome::accepted(format!(
        "{} sessions, {} operations, {closed} sessions closed mid-way; {}",
        plan.sessions.len(),
        plan.ops.len(),
        w.summary()
    ))
}
