//! A connection's budget: how many of its requests, and how many bytes of them, are on their
//! way at once — read off the socket and not yet answered on it. The connection's reading
//! thread admits a request (and waits while it does not fit); its writing thread releases the
//! ones whose replies it has written, so memory stays bounded whatever a client sends or
//! however slowly it reads, and the device's thread never touches the budget.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex};

/// Most requests of one connection on their way to the device at once: the connection's
/// thread reads no further until some are answered (memory stays bounded whatever a client
/// sends).
pub const MAX_IN_FLIGHT: usize = 512;

/// Most request bytes (reads' and writes' lengths) of one connection on their way at once;
/// a request larger than what is left waits, unless nothing is in flight.
pub const MAX_IN_FLIGHT_BYTES: u64 = 128 << 20;

/// The requests admitted and not answered yet.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    requests: usize,
    bytes: u64,
    /// The length of the oldest admitted request of each cookie.
    lengths: HashMap<u64, u64>,
    /// Lengths of younger requests whose cookie was already in flight (a client may reuse
    /// one), oldest first: kept apart so the usual request allocates nothing.
    reused: HashMap<u64, VecDeque<u64>>,
    /// Readers waiting for room (only they need a wake-up).
    waiting: usize,
    /// The writer is gone: nothing will be released again, so nothing waits.
    closed: bool,
}

impl Budget {
    /// Waits until a request of `len` bytes fits (or the writer is gone), then counts it.
    pub(crate) fn admit(&self, cookie: u64, len: u64) {
        let Ok(mut s) = self.state.lock() else { return };
        while !s.closed
            && s.requests > 0
            && (s.requests >= MAX_IN_FLIGHT || s.bytes.saturating_add(len) > MAX_IN_FLIGHT_BYTES)
        {
            s.waiting += 1;
            s = match self.freed.wait(s) {
                Ok(s) => s,
                Err(_) => return,
            };
            s.waiting -= 1;
        }
        s.requests += 1;
        s.bytes = s.bytes.saturating_add(len);
        match s.lengths.entry(cookie) {
            Entry::Vacant(v) => {
                v.insert(len);
            }
            Entry::Occupied(_) => s.reused.entry(cookie).or_default().push_back(len),
        }
    }

    /// Forgets the answered requests (the oldest of each cookie); cookies never admitted
    /// are ignored.
    pub(crate) fn release(&self, cookies: impl Iterator<Item = u64>) {
        let Ok(mut s) = self.state.lock() else { return };
        let mut freed = false;
        for cookie in cookies {
            let State {
                lengths, reused, ..
            } = &mut *s;
            let Some(first) = lengths.get_mut(&cookie) else {
                continue;
            };
            let len = *first;
            match reused.get_mut(&cookie).and_then(VecDeque::pop_front) {
                Some(next) => {
                    *first = next;
                    if reused.get(&cookie).is_some_and(VecDeque::is_empty) {
                        reused.remove(&cookie);
                    }
                }
                None => {
                    lengths.remove(&cookie);
                }
            }
            s.requests -= 1;
            s.bytes -= len;
            freed = true;
        }
        if freed && s.waiting > 0 {
            self.freed.notify_all();
        }
    }

    /// The writer is gone: a reader waiting for room goes on (and finds the connection
    /// closed).
    pub(crate) fn close(&self) {
        let Ok(mut s) = self.state.lock() else { return };
        s.closed = true;
        if s.waiting > 0 {
            self.freed.notify_all();
        }
    }

    /// Requests and bytes admitted and not released.
    #[cfg(test)]
    fn held(&self) -> (usize, u64) {
        let s = self.state.lock().unwrap();
        (s.requests, s.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{mpsc, Arc};
    use std::thread;
    use std::time::Duration;

    #[test]
    fn a_connection_admits_no_more_than_its_budget_until_answers_come_back() {
        let budget = Arc::new(Budget::default());
        for cookie in 0..MAX_IN_FLIGHT as u64 {
            budget.admit(cookie, 4096);
        }
        let b = budget.clone();
        let (tx, rx) = mpsc::channel();
        let waiting = thread::spawn(move || {
            b.admit(9999, 4096);
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "one more than the budget got in"
        );
        budget.release([0u64].into_iter());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("an answer lets the next request in");
        waiting.join().unwrap();
        // Bytes: a 100 MiB request waits while 64 MiB are out, not when nothing is.
        let bytes = Arc::new(Budget::default());
        bytes.admit(1, 64 << 20);
        let b = bytes.clone();
        let (tx, rx) = mpsc::channel();
        let big = thread::spawn(move || {
            b.admit(2, 100 << 20);
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        bytes.release([1u64].into_iter());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("alone, it fits");
        big.join().unwrap();
        assert_eq!(bytes.held(), (1, 100 << 20));
    }

    /// Runs `admit` on a thread of its own; whether it returned within a second.
    fn admits_at_once(budget: &Arc<Budget>, cookie: u64, len: u64) -> bool {
        let b = budget.clone();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            b.admit(cookie, len);
            let _ = tx.send(());
        });
        let admitted = rx.recv_timeout(Duration::from_secs(1)).is_ok();
        if !admitted {
            // Let the waiting thread go so it does not outlive the test.
            budget.close();
        }
        admitted
    }

    #[test]
    fn a_request_that_exactly_fills_the_byte_budget_fits_and_one_alone_always_does() {
        let budget = Arc::new(Budget::default());
        assert!(admits_at_once(&budget, 1, MAX_IN_FLIGHT_BYTES / 2));
        assert!(
            admits_at_once(&budget, 2, MAX_IN_FLIGHT_BYTES / 2),
            "the two halves make exactly the budget"
        );
        assert_eq!(budget.held(), (2, MAX_IN_FLIGHT_BYTES));
        let empty = Arc::new(Budget::default());
        assert!(
            admits_at_once(&empty, 3, 2 * MAX_IN_FLIGHT_BYTES),
            "with nothing in flight, a request larger than the budget goes in alone"
        );
        assert_eq!(empty.held(), (1, 2 * MAX_IN_FLIGHT_BYTES));
    }

    #[test]
    fn a_reused_cookie_releases_its_requests_oldest_first_and_unknown_cookies_nothing() {
        let budget = Budget::default();
        budget.admit(7, 4096);
        budget.admit(7, 512);
        budget.admit(7, 1024);
        budget.admit(8, 8192);
        assert_eq!(budget.held(), (4, 4096 + 512 + 1024 + 8192));
        budget.release([7u64, 99].into_iter());
        assert_eq!(budget.held(), (3, 512 + 1024 + 8192));
        budget.release([7u64].into_iter());
        assert_eq!(budget.held(), (2, 1024 + 8192));
        budget.release([7u64, 7, 8].into_iter());
        assert_eq!(budget.held(), (0, 0), "the third 7 was never admitted");
        let s = budget.state.lock().unwrap();
        assert!(s.lengths.is_empty() && s.reused.is_empty());
    }

    #[test]
    fn a_reader_waiting_for_room_goes_on_when_the_writer_is_gone() {
        let budget = Arc::new(Budget::default());
        budget.admit(1, MAX_IN_FLIGHT_BYTES);
        let b = budget.clone();
        let (tx, rx) = mpsc::channel();
        let waiting = thread::spawn(move || {
            b.admit(2, 4096);
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        budget.close();
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a closed budget holds nobody");
        waiting.join().unwrap();
    }
}
