//! The engine's event queue: events in order of time, ties first-in-first-out.
//!
//! The earliest events (up to [`NEAR`], more than a run usually keeps) are kept in order in a
//! `Vec`, latest first, and only the rest in a heap: taking the next event is a `pop` from the
//! end, and scheduling one a push at the end when it is the next (a transaction's next step
//! while a task runs first), else a step back past the few earlier ones, or a binary search
//! and an insert that moves them. A heap's pop walks down its whole height each time: about
//! 165 instructions per event with 30 clients of one NVMe queueing 30 events.

use smartio_platform::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An event and its place in the order: time, then the sequence number it was scheduled
/// with. Both are one 128-bit key, time in the high half, so an ordering is one comparison.
#[derive(Debug, Clone, Copy)]
struct Queued<E> {
    key: u128,
    event: E,
}

impl<E> Queued<E> {
    fn time(&self) -> SimTime {
        SimTime((self.key >> 64) as u64)
    }
}

impl<E> PartialEq for Queued<E> {
    fn eq(&self, other: &Queued<E>) -> bool {
        self.key == other.key
    }
}

impl<E> Eq for Queued<E> {}

impl<E> PartialOrd for Queued<E> {
    fn partial_cmp(&self, other: &Queued<E>) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Queued<E> {
    /// Reversed, so that `BinaryHeap` (a max-heap) yields the earliest key first.
    fn cmp(&self, other: &Queued<E>) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// Events the queue keeps in order in [`EventQueue::near`], at most: more than a run keeps
/// queued at once as a rule (30 clients of one NVMe keep about 30, at most 90); past it the
/// latest ones wait in a heap.
const NEAR: usize = 256;

/// A new event that is not the next one looks for its place among this many of the nearest
/// first (most are due soon), then by a binary search among the rest.
const FEW: usize = 8;

/// Events by `(time, sequence)`, earliest first.
///
/// Invariant: `near` is sorted latest first and every event in `far` comes after every
/// event in `near`, so the next event is `near`'s last, or `far`'s first when `near` is empty.
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    /// The earliest events, latest first (the next one is the last), at most [`NEAR`].
    near: Vec<Queued<E>>,
    /// The others, each after every event in `near`.
    far: BinaryHeap<Queued<E>>,
    /// The last sequence number given (checked to increase in debug builds).
    #[cfg(debug_assertions)]
    last_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> EventQueue<E> {
        EventQueue {
            near: Vec::new(),
            far: BinaryHeap::new(),
            #[cfg(debug_assertions)]
            last_seq: 0,
        }
    }
}

impl<E: Copy> EventQueue<E> {
    /// Queues `event` at `at`; `seq` orders events of equal time.
    ///
    /// Callers give increasing numbers, so a new event comes after every queued one of its
    /// time: its place is found by comparing times alone (one word, not the whole key).
    #[inline]
    pub fn push(&mut self, at: SimTime, seq: u64, event: E) {
        let entry = Queued {
            key: (u128::from(at.as_ps()) << 64) | u128::from(seq),
            event,
        };
        #[cfg(debug_assertions)]
        {
            assert!(seq > self.last_seq, "sequence numbers must increase");
            self.last_seq = seq;
        }
        if self.far.peek().is_some_and(|first| first.time() <= at) {
            self.far.push(entry);
            return;
        }
        // Earlier than everything in the heap: its place is among the near ones (at the end,
        // moving nothing, when it is the next — the usual case).
        match self.near.last() {
            Some(next) if next.time() <= at => {
                // Soon after the next one, usually: looked for among the last few first.
                let later = |q: &Queued<E>| q.time() > at;
                let n = self.near.len();
                let few = n.saturating_sub(FEW);
                let place = match self.near[few..].iter().rposition(later) {
                    Some(i) => few + i + 1,
                    None if few == 0 => 0,
                    None => self.near[..few].partition_point(later),
                };
                self.near.insert(place, entry);
                if self.near.len() > NEAR {
                    // The latest near one is still earlier than the whole heap.
                    self.far.push(self.near.remove(0));
                }
            }
            _ => self.near.push(entry),
        }
    }

    /// Queues `event` at `at` with `seq`, a sequence number that may be older than some
    /// queued ones (given to a step the run took without the queue before those were
    /// queued: see `core::ahead`): it comes after the events of its time queued with
    /// smaller numbers and before those with larger ones.
    pub fn push_behind(&mut self, at: SimTime, seq: u64, event: E) {
        let entry = Queued {
            key: (u128::from(at.as_ps()) << 64) | u128::from(seq),
            event,
        };
        if self.far.peek().is_some_and(|first| first.key < entry.key) {
            self.far.push(entry);
            return;
        }
        // `near` is latest first: its place is after every later key.
        let place = self.near.partition_point(|q| q.key > entry.key);
        self.near.insert(place, entry);
        if self.near.len() > NEAR {
            self.far.push(self.near.remove(0));
        }
    }

    /// The next event's time and sequence number, if any.
    #[inline]
    pub fn peek_key(&self) -> Option<(SimTime, u64)> {
        let next = self.near.last().or_else(|| self.far.peek())?;
        Some((next.time(), next.key as u64))
    }

    /// The time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        match self.near.last() {
            Some(next) => Some(next.time()),
            None => self.far.peek().map(Queued::time),
        }
    }

    /// Takes the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let q = match self.near.pop() {
            Some(next) => next,
            None => self.far.pop()?,
        };
        Some((q.time(), q.event))
    }

    /// Events queued.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.near.len() + self.far.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_and_equal_times_in_the_order_scheduled() {
        let mut q = EventQueue::default();
        let scheduled = [
            (30, 'a'),
            (10, 'b'),
            (30, 'c'),
            (10, 'd'),
            (u64::MAX, 'e'),
            (0, 'f'),
        ];
        for (seq, (at, e)) in scheduled.into_iter().enumerate() {
            q.push(SimTime(at), seq as u64 + 1, e);
        }
        assert_eq!(q.len(), 6);
        let order: Vec<(u64, char)> =
            std::iter::from_fn(|| q.pop().map(|(t, e)| (t.0, e))).collect();
        assert_eq!(
            order,
            [
                (0, 'f'),
                (10, 'b'),
                (10, 'd'),
                (30, 'a'),
                (30, 'c'),
                (u64::MAX, 'e')
            ]
        );
        assert_eq!(q.peek_time(), None);
    }

    /// Interleaved pushes and pops give exactly what a plain heap of the same keys gives.
    #[test]
    fn any_interleaving_matches_a_plain_heap() {
        // Mostly pushes: the queue grows into the heap.
        matches_a_plain_heap(3, usize::MAX, 20_000);
        // As many pushes as pops with up to 200 queued (an NBD export at queue depth 32
        // keeps 100 to 250): events go in everywhere among the near ones.
        matches_a_plain_heap(2, 200, 50_000);
    }

    /// Runs `ops` random pushes and pops (one in `pop_one_in` a pop, and always one with
    /// `most` queued) on an [`EventQueue`] and a plain heap, comparing each pop, the next
    /// time and the length at every step.
    fn matches_a_plain_heap(pop_one_in: u64, most: usize, ops: usize) {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut draw = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut q = EventQueue::default();
        let mut plain = BinaryHeap::new();
        let (mut seq, mut now) = (0u64, 0u64);
        for _ in 0..ops {
            if draw(pop_one_in) == 0 || q.len() >= most {
                let got = q.pop();
                let want = plain.pop().map(|std::cmp::Reverse((t, s))| (SimTime(t), s));
                assert_eq!(got, want);
                if let Some((t, _)) = got {
                    now = t.0;
                }
            } else {
                seq += 1;
                // Mostly soon (often before everything queued), sometimes far, some ties.
                let at = now + [0, 1, draw(50), draw(5_000)][draw(4) as usize];
                q.push(SimTime(at), seq, seq);
                plain.push(std::cmp::Reverse((at, seq)));
            }
            assert_eq!(q.peek_time(), plain.peek().map(|r| SimTime(r.0 .0)));
            assert_eq!(q.len(), plain.len());
        }
    }
}
