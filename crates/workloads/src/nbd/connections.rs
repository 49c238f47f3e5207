//! The export's connections as its serving loop sees them, and how serving stops so that
//! every request a connection read is either carried out and answered, or counted as
//! dropped.
//!
//! When the stop is asked for (a signal), requests in flight are finished and answered;
//! every request read after that is answered `ESHUTDOWN` (the NBD specification's error for
//! a server being shut down) and counted as dropped. The connections stay open while their
//! clients react: until every client has left, or none has sent anything for
//! [`STOP_QUIET`], or [`STOP_GRACE`] has passed. Then each connection is closed once the
//! answers handed to it are written; what its reader still takes off the socket (the bytes
//! its client sent before the close) is counted as dropped and unanswered; and serving
//! returns only when every connection's writer has ended, so no answer handed over is lost
//! when the process exits.

use super::NbdStats;
use smartio_nbd::server::{Event, Replier, WriterEnded, WRITE_TIMEOUT};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a stopping server waits, with nothing in flight, for a client's next request
/// before it closes the connections: a client answered `ESHUTDOWN` leaves or sends its
/// next request within milliseconds; one that stays silent (a mounted `nbdfuse`) is not
/// waited for longer.
pub const STOP_QUIET: Duration = Duration::from_millis(250);

/// The longest a stopping server keeps answering `ESHUTDOWN` to a client that goes on
/// sending.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// The open connections, the writers of every connection not known to have ended, and
/// whether serving is stopping.
#[derive(Debug, Default)]
pub(super) struct Connections {
    open: HashMap<u64, Replier>,
    writers: Vec<WriterEnded>,
    seen: bool,
    stopping: Option<Instant>,
}

impl Connections {
    /// A client finished the handshake.
    pub(super) fn opened(&mut self, conn: u64, replier: Replier) {
        self.seen = true;
        self.writers.retain(|w| !w.has_ended());
        self.writers.push(replier.writer());
        self.open.insert(conn, replier);
    }

    /// A connection's reader ended (its writer may still be writing).
    pub(super) fn closed(&mut self, conn: u64) {
        self.open.remove(&conn);
    }

    /// Where connection `conn`'s answers go, while it is open.
    pub(super) fn replier(&self, conn: u64) -> Option<&Replier> {
        self.open.get(&conn)
    }

    /// Whether a client came and every client has left.
    pub(super) fn all_left(&self) -> bool {
        self.seen && self.open.is_empty()
    }

    /// Serving stops from now on (if it was not already).
    pub(super) fn stop(&mut self) {
        self.stopping.get_or_insert_with(Instant::now);
    }

    /// Whether serving is stopping.
    pub(super) fn stopping(&self) -> bool {
        self.stopping.is_some()
    }

    /// Whether a stopping server, with nothing in flight and last busy at `last_busy`,
    /// may close its connections: nobody is connected, or nobody sent anything for
    /// [`STOP_QUIET`], or [`STOP_GRACE`] has passed since the stop.
    pub(super) fn drained(&self, last_busy: Instant) -> bool {
        let Some(since) = self.stopping else {
            return false;
        };
        self.open.is_empty()
            || last_busy.max(since).elapsed() >= STOP_QUIET
            || since.elapsed() >= STOP_GRACE
    }

    /// Closes every open connection once the answers handed to it are written, counts in
    /// `stats` what their readers still hand on (requests as dropped and unanswered, a
    /// refusal as refused), and waits for every writer to end. Bounded: a writer gives up
    /// on a client that takes nothing for [`WRITE_TIMEOUT`].
    pub(super) fn hang_up(self, events: &Receiver<Event>, stats: &mut NbdStats) {
        let Connections { open, writers, .. } = self;
        let deadline = Instant::now() + WRITE_TIMEOUT + Duration::from_secs(1);
        let mut readers: HashSet<u64> = open.keys().copied().collect();
        for replier in open.values() {
            replier.close();
        }
        drop(open);
        let mut writers = writers;
        while !readers.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match events.recv_timeout(left) {
                Ok(Event::Closed { conn, .. }) => {
                    readers.remove(&conn);
                }
                Ok(Event::Request { conn, request, .. }) => {
                    stats.dropped += 1;
                    stats.dropped_unanswered += 1;
                    eprintln!(
                        "nbd: connection {conn}: {} of {} bytes at {} dropped unanswered: the connection was closing",
                        request.command.name(),
                        request.len,
                        request.offset
                    );
                }
                Ok(Event::Refused { .. }) => stats.refused += 1,
                Ok(Event::Opened { conn, replier }) => {
                    stats.connections += 1;
                    replier.close();
                    writers.push(replier.writer());
                    readers.insert(conn);
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        for writer in &writers {
            writer.wait(deadline.saturating_duration_since(Instant::now()));
        }
    }
}
