//! The controller's submission queue slots, with the ids of those that exist kept in order,
//! and a mark on each queue that may have entries to fetch, so that arbitration visits only
//! those (a controller has up to 65,536 slots; a driver creates a few, and few of them have
//! work at any moment).

use super::controller::SubQueue;

/// Submission queues by id.
///
/// Invariant: `created` holds, in increasing order, exactly the ids whose slot is `Some`.
/// Only [`SubmissionQueues::put`], [`SubmissionQueues::take`] and
/// [`SubmissionQueues::remove_all`] change which slots are filled.
///
/// `noted` has a bit per slot. The controller keeps this invariant: every queue with
/// entries to fetch (`head != tail`) and no fetch in flight has its bit set — it notes a
/// queue ([`SubmissionQueues::note`]) whenever its tail moves or a fetch from it ends. A bit
/// may be set on a queue without work (arbitration clears it when it looks).
#[derive(Debug)]
pub(super) struct SubmissionQueues {
    slots: Vec<Option<SubQueue>>,
    created: Vec<u16>,
    noted: Vec<u64>,
}

impl SubmissionQueues {
    /// `count` empty slots (ids `0..count`).
    pub fn new(count: usize) -> SubmissionQueues {
        SubmissionQueues {
            slots: vec![None; count],
            created: Vec::new(),
            noted: vec![0; count.div_ceil(64)],
        }
    }

    /// Slots, created or not.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Queue `qid`, if it exists.
    pub fn get(&self, qid: usize) -> Option<&SubQueue> {
        self.slots.get(qid).and_then(Option::as_ref)
    }

    /// Queue `qid`, if it exists.
    pub fn get_mut(&mut self, qid: usize) -> Option<&mut SubQueue> {
        self.slots.get_mut(qid).and_then(Option::as_mut)
    }

    /// Whether queue `qid` exists.
    pub fn exists(&self, qid: usize) -> bool {
        self.get(qid).is_some()
    }

    /// Makes `q` queue `qid` (replacing one there); false if there is no such slot.
    pub fn put(&mut self, qid: u16, q: SubQueue) -> bool {
        let Some(slot) = self.slots.get_mut(qid as usize) else {
            return false;
        };
        if slot.replace(q).is_none() {
            let at = self.created.partition_point(|&c| c < qid);
            self.created.insert(at, qid);
        }
        true
    }

    /// Removes queue `qid`, returning it.
    pub fn take(&mut self, qid: u16) -> Option<SubQueue> {
        let q = self.slots.get_mut(qid as usize)?.take()?;
        if let Ok(at) = self.created.binary_search(&qid) {
            self.created.remove(at);
        }
        Some(q)
    }

    /// Removes every queue (a controller reset).
    pub fn remove_all(&mut self) {
        for &qid in &self.created {
            self.slots[qid as usize] = None;
        }
        self.created.clear();
        self.noted.fill(0);
    }

    /// The queues that exist.
    pub fn iter(&self) -> impl Iterator<Item = &SubQueue> {
        self.created
            .iter()
            .filter_map(|&qid| self.get(qid as usize))
    }

    /// How many queues exist.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.created.len()
    }

    /// Marks queue `qid` as one that may have entries to fetch.
    pub fn note(&mut self, qid: usize) {
        if qid < self.slots.len() {
            self.noted[qid / 64] |= 1 << (qid % 64);
        }
    }

    /// Takes the mark of the first noted queue id in `from..to`, returning that id.
    pub fn take_noted(&mut self, from: usize, to: usize) -> Option<usize> {
        let mut at = from;
        while at < to {
            let (w, bit) = (at / 64, at % 64);
            let word = *self.noted.get(w)? >> bit;
            if word == 0 {
                at = (w + 1) * 64;
                continue;
            }
            let qid = at + word.trailing_zeros() as usize;
            if qid >= to {
                return None;
            }
            self.noted[w] &= !(1 << (qid % 64));
            return Some(qid);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(base: u64) -> SubQueue {
        SubQueue {
            base,
            entries: 2,
            head: 0,
            tail: 0,
            cqid: 0,
            fetching: false,
            aborted: Vec::new(),
        }
    }

    #[test]
    fn existing_queues_are_kept_in_id_order_and_replaced_in_place() {
        let mut qs = SubmissionQueues::new(8);
        for qid in [5, 1, 3] {
            assert!(qs.put(qid, queue(qid as u64)));
        }
        assert!(!qs.put(8, queue(8)), "no slot 8");
        let bases = |qs: &SubmissionQueues| qs.iter().map(|q| q.base).collect::<Vec<_>>();
        assert_eq!(bases(&qs), [1, 3, 5]);
        assert_eq!(qs.take(3).map(|q| q.base), Some(3));
        assert!(qs.take(3).is_none());
        assert!(qs.put(1, queue(10)), "replacing keeps one entry");
        assert_eq!(qs.count(), 2);
        assert_eq!(bases(&qs), [10, 5]);
        qs.remove_all();
        assert_eq!(qs.count(), 0);
        assert!(!qs.exists(1) && !qs.exists(5));
    }

    #[test]
    fn noted_queues_are_taken_in_id_order_within_a_range_once_each() {
        let mut qs = SubmissionQueues::new(200);
        for qid in [130, 3, 64, 63, 199, 3] {
            qs.note(qid);
        }
        qs.note(200); // no such slot: ignored
        assert_eq!(qs.take_noted(4, 130), Some(63));
        assert_eq!(qs.take_noted(4, 130), Some(64));
        assert_eq!(qs.take_noted(4, 130), None, "130 is past the range");
        assert_eq!(qs.take_noted(0, 200), Some(3), "noted twice, taken once");
        assert_eq!(qs.take_noted(0, 200), Some(130));
        assert_eq!(qs.take_noted(0, 200), Some(199));
        assert_eq!(qs.take_noted(0, 200), None);
        assert_eq!(qs.take_noted(0, 1000), None, "a range past the slots");
        qs.note(7);
        qs.remove_all();
        assert_eq!(qs.take_noted(0, 200), None, "a reset forgets the marks");
    }
}
