//! The watch thread: asks the daemon for its figures every [`POLL`] over its Unix socket (as
//! `cluster stats` does) and keeps the latest [`Update`] — the figures, or why the daemon did
//! not answer, and the scenario's picture with the devices borrowed now, drawn again only
//! when the borrowings change. Readers wait for a newer one ([`Latest::wait_newer`]).

use smartio_live::protocol::{Connection, Reply, Request, WireError};
use smartio_live::stats::ClusterStats;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the daemon is asked.
pub const POLL: Duration = Duration::from_millis(100);

/// What the view shows, as of one poll.
#[derive(Debug, Clone, Default)]
pub struct Update {
    /// Bumped whenever the figures, the daemon's state or the picture change.
    pub version: u64,
    /// Polls made so far.
    pub polls: u64,
    /// When the last poll was answered (or failed), in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The daemon's figures, from the last poll that got an answer.
    pub stats: Option<ClusterStats>,
    /// Why the last poll got no answer, if it did not.
    pub error: Option<String>,
    /// The picture (an inline `<svg>` element) or why it could not be drawn.
    pub picture: Arc<String>,
    /// Bumped whenever the picture changes.
    pub picture_version: u64,
}

/// The latest update, shared between the watch thread and the HTTP threads.
#[derive(Clone, Default)]
pub struct Latest(Arc<(Mutex<Update>, Condvar)>);

impl Latest {
    pub fn new() -> Latest {
        Latest::default()
    }

    fn lock(&self) -> MutexGuard<'_, Update> {
        // A thread that panicked while holding it left a whole `Update` behind: use it.
        self.0 .0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The latest update now.
    pub fn now(&self) -> Update {
        self.lock().clone()
    }

    /// The latest update once its version is past `seen`, or after `patience` whatever it is.
    pub fn wait_newer(&self, seen: u64, patience: Duration) -> Update {
        let guard = self.lock();
        let (guard, _) = self
            .0
             .1
            .wait_timeout_while(guard, patience, |u| u.version <= seen)
            .unwrap_or_else(|e| e.into_inner());
        guard.clone()
    }

    /// Records a poll: `answer` is the figures or why there were none, `picture` a newly
    /// drawn picture (if the borrowings changed).
    fn record(&self, answer: Result<ClusterStats, AskError>, picture: Option<String>) {
        let mut u = self.lock();
        u.polls += 1;
        u.at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut changed = false;
        match answer {
            Ok(stats) => {
                changed |= u.error.take().is_some();
                if u.stats.as_ref() != Some(&stats) {
                    u.stats = Some(stats);
                    changed = true;
                }
            }
            Err(why) => {
                // What the page shows.
                let why = why.to_string();
                if u.error.as_ref() != Some(&why) {
                    u.error = Some(why);
                    changed = true;
                }
            }
        }
        if let Some(picture) = picture {
            u.picture = Arc::new(picture);
            u.picture_version += 1;
            changed = true;
        }
        if changed {
            u.version += 1;
            self.0 .1.notify_all();
        }
    }
}

/// Starts the watch thread on the daemon at `socket`, which runs `scenario`.
pub fn start(socket: &str, scenario: &str, latest: Latest) -> Result<(), super::error::WebError> {
    let (socket, scenario) = (socket.to_string(), scenario.to_string());
    std::thread::Builder::new()
        .name("web-watch".into())
        .spawn(move || watch(&socket, &scenario, &latest))
        .map(|_| ())
        .map_err(|source| super::error::WebError::Thread {
            what: "watch",
            source,
        })
}

/// Each device borrowed and by whom, `(lender:device, borrower)`, in order.
pub fn borrowings(stats: &ClusterStats) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = stats
        .devices
        .iter()
        .flat_map(|d| d.borrowers.iter().map(|b| (d.device.clone(), b.clone())))
        .collect();
    out.sort();
    out
}

fn watch(socket: &str, scenario: &str, latest: &Latest) {
    let fabric = smartio_cluster::load_fabric(scenario);
    let mut conn: Option<Connection> = None;
    let mut drawn: Option<Vec<(String, String)>> = None;
    loop {
        let started = Instant::now();
        let answer = ask(&mut conn, socket);
        let mut picture = None;
        if let Ok(stats) = &answer {
            let now = borrowings(stats);
            if drawn.as_ref() != Some(&now) {
                picture = Some(draw(&fabric, scenario, stats, &now));
                drawn = Some(now);
            }
        }
        latest.record(answer, picture);
        std::thread::sleep(POLL.saturating_sub(started.elapsed()));
    }
}

/// Why the daemon gave no figures.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// Nothing listens at the socket (the daemon is down, or not up yet).
    #[error("no cluster daemon answers at {socket}: {source}")]
    Connect {
        socket: String,
        #[source]
        source: WireError,
    },
    /// The connection failed during the request.
    #[error("the daemon at {socket}: {source}")]
    Wire {
        socket: String,
        #[source]
        source: WireError,
    },
    /// It answered something else (a daemon of another version).
    #[error("the daemon at {socket} answered {reply} instead of its figures")]
    Unexpected { socket: String, reply: String },
}

/// The daemon's figures, on a connection of their own (what a scrape asks).
pub fn ask_once(socket: &str) -> Result<ClusterStats, AskError> {
    let conn = Connection::open(socket).map_err(|source| AskError::Connect {
        socket: socket.to_string(),
        source,
    })?;
    stats_on(&conn, socket)
}

fn stats_on(conn: &Connection, socket: &str) -> Result<ClusterStats, AskError> {
    match conn.call(&Request::Stats) {
        Ok((Reply::Stats(stats), _)) => Ok(*stats),
        Ok((other, _)) => Err(AskError::Unexpected {
            socket: socket.to_string(),
            reply: format!("{other:?}"),
        }),
        Err(source) => Err(AskError::Wire {
            socket: socket.to_string(),
            source,
        }),
    }
}

/// The daemon's figures, on the connection kept (opened again after a failure).
fn ask(conn: &mut Option<Connection>, socket: &str) -> Result<ClusterStats, AskError> {
    let kept = match conn.take() {
        Some(c) => c,
        None => Connection::open(socket).map_err(|source| AskError::Connect {
            socket: socket.to_string(),
            source,
        })?,
    };
    let answer = stats_on(&kept, socket);
    if answer.is_ok() {
        *conn = Some(kept);
    }
    answer
}

/// The picture with `borrowed`, or a paragraph saying why there is none.
fn draw(
    fabric: &Result<smartio_fabric::Fabric, smartio_fabric::ScenarioError>,
    scenario: &str,
    stats: &ClusterStats,
    borrowed: &[(String, String)],
) -> String {
    let drawn = match fabric {
        Ok(fabric) => {
            let ids = stats.devices.iter().filter_map(|d| {
                let (lender, device) = d.device.split_once(':')?;
                Some((lender.to_string(), device.to_string(), d.fdid))
            });
            crate::picture::live_element(fabric, scenario, ids, borrowed).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    match drawn {
        Ok(svg) => svg,
        Err(why) => format!(
            "<p class=\"error\">no picture: {}</p>",
            crate::picture::svg::escape(&why)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_waits_for_a_change_and_an_unchanged_poll_is_no_change() {
        let latest = Latest::new();
        let stats = |n: usize| ClusterStats {
            scenario: "s".into(),
            descriptors: n,
            segments: 0,
            segment_list: Vec::new(),
            devices: Vec::new(),
            adapters: Vec::new(),
            accesses: 0,
            links: Vec::new(),
            not_counted: String::new(),
        };
        latest.record(Ok(stats(0)), Some("<svg/>".into()));
        let first = latest.now();
        assert_eq!(
            (first.version, first.polls, first.picture_version),
            (1, 1, 1)
        );
        latest.record(Ok(stats(0)), None);
        let same = latest.wait_newer(1, Duration::from_millis(10));
        assert_eq!(
            (same.version, same.polls),
            (1, 2),
            "no change, one more poll"
        );
        let reader = {
            let latest = latest.clone();
            std::thread::spawn(move || latest.wait_newer(1, Duration::from_secs(10)))
        };
        latest.record(Ok(stats(1)), None);
        let seen = reader.join().expect("the reader");
        assert_eq!(seen.version, 2);
        assert_eq!(seen.stats.map(|s| s.descriptors), Some(1));
        let gone = AskError::Unexpected {
            socket: "s".into(),
            reply: "Done".into(),
        };
        latest.record(Err(gone), None);
        let gone = latest.now();
        assert_eq!(
            (gone.version, gone.error.as_deref()),
            (
                3,
                Some("the daemon at s answered Done instead of its figures")
            )
        );
        assert!(
            gone.stats.is_some(),
            "the last figures are kept, marked by the error"
        );
    }
}
