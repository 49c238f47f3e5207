//! The engine's event queue: events in order of time, ties first-in-first-out.
//!
//! The earliest event is often the one just scheduled (a transaction's next step while a
//! task runs first), so the queue keeps its earliest entry apart from the heap: scheduling
//! an event earlier than everything queued, then taking it, touches no heap.

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

/// Events by `(time, sequence)`, earliest first.
///
/// Invariant: when `first` holds an entry, it is earlier than every entry in `heap`.
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    first: Option<Queued<E>>,
    heap: BinaryHeap<Queued<E>>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> EventQueue<E> {
        EventQueue {
            first: None,
            heap: BinaryHeap::new(),
        }
    }
}

impl<E: Copy> EventQueue<E> {
    /// Queues `event` at `at`; `seq` orders events of equal time (callers give increasing
    /// numbers).
    #[inline]
    pub fn push(&mut self, at: SimTime, seq: u64, event: E) {
        let entry = Queued {
            key: (u128::from(at.as_ps()) << 64) | u128::from(seq),
            event,
        };
        match self.first {
            // Earlier than the first (which is earlier than the heap): it is the new first.
            Some(first) if entry.key < first.key => {
                self.heap.push(first);
                self.first = Some(entry);
            }
            Some(_) => self.heap.push(entry),
            None => match self.heap.peek() {
                Some(top) if top.key < entry.key => self.heap.push(entry),
                _ => self.first = Some(entry),
            },
        }
    }

    /// The time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        match &self.first {
            Some(first) => Some(first.time()),
            None => self.heap.peek().map(Queued::time),
        }
    }

    /// Takes the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let q = match self.first.take() {
            Some(first) => first,
            None => self.heap.pop()?,
        };
        Some((q.time(), q.event))
    }

    /// Events queued.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.heap.len() + usize::from(self.first.is_some())
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
        for _ in 0..20_000 {
            if draw(3) == 0 {
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
