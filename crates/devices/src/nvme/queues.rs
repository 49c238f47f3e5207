//! The controller's submission queue slots, with the ids of those that exist kept in order
//! so that arbitration visits only them (a controller has up to 65,536 slots; a driver
//! creates a few).

use super::controller::SubQueue;

/// Submission queues by id.
///
/// Invariant: `created` holds, in increasing order, exactly the ids whose slot is `Some`.
/// Only [`SubmissionQueues::put`], [`SubmissionQueues::take`] and
/// [`SubmissionQueues::remove_all`] change which slots are filled.
#[derive(Debug)]
pub(super) struct SubmissionQueues {
    slots: Vec<Option<SubQueue>>,
    created: Vec<u16>,
}

impl SubmissionQueues {
    /// `count` empty slots (ids `0..count`).
    pub fn new(count: usize) -> SubmissionQueues {
        SubmissionQueues {
            slots: vec![None; count],
            created: Vec::new(),
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
    }

    /// The queues that exist.
    pub fn iter(&self) -> impl Iterator<Item = &SubQueue> {
        self.created
            .iter()
            .filter_map(|&qid| self.get(qid as usize))
    }

    /// How many queues exist.
    pub fn count(&self) -> usize {
        self.created.len()
    }

    /// Where round-robin order from id `start` begins among the existing queues: the
    /// position of the first existing id at or after `start` (wrapping). With
    /// [`SubmissionQueues::nth`], positions `from..from + count()` are that order.
    pub fn round_robin_from(&self, start: usize) -> usize {
        self.created.partition_point(|&c| (c as usize) < start)
    }

    /// The id of the existing queue at position `at` (wrapping; `None` when none exists).
    pub fn nth(&self, at: usize) -> Option<u16> {
        match self.created.len() {
            0 => None,
            n => self.created.get(at % n).copied(),
        }
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
    fn round_robin_visits_existing_queues_in_id_order_from_start_wrapping() {
        let mut qs = SubmissionQueues::new(8);
        for qid in [5, 1, 3] {
            assert!(qs.put(qid, queue(qid as u64)));
        }
        assert!(!qs.put(8, queue(8)), "no slot 8");
        fn order(qs: &SubmissionQueues, start: usize) -> Vec<u16> {
            let from = qs.round_robin_from(start);
            (from..from + qs.count())
                .filter_map(|at| qs.nth(at))
                .collect()
        }
        assert_eq!(order(&qs, 0), [1, 3, 5]);
        assert_eq!(order(&qs, 2), [3, 5, 1]);
        assert_eq!(order(&qs, 5), [5, 1, 3]);
        assert_eq!(order(&qs, 6), [1, 3, 5]);
        assert_eq!(qs.take(3).map(|q| q.base), Some(3));
        assert!(qs.take(3).is_none());
        assert_eq!(order(&qs, 2), [5, 1]);
        assert!(qs.put(1, queue(10)), "replacing keeps one entry");
        assert_eq!(qs.count(), 2);
        assert_eq!(qs.get(1).map(|q| q.base), Some(10));
        qs.remove_all();
        assert_eq!(qs.count(), 0);
        assert!(!qs.exists(1) && !qs.exists(5));
        assert_eq!(qs.nth(qs.round_robin_from(0)), None);
    }
}
