//! A write's rest booked ahead, its steps taken without the queue while nothing else books
//! where it goes.
//!
//! A device's DMA write into host memory (thirty clients of one NVMe each getting their 4
//! KiB) sends its TLPs one after another, and the step loop cuts it at each event due before
//! its next step — most often an event of another flow on other links: the write is queued,
//! and when it comes up it sends its next TLP, booking its path then, and is cut again. What
//! it books cannot change until something else books on its links. So when such a write is
//! cut with all its TLPs left fitting its credits ([`Core::go_ahead`]), the rest of it is
//! booked *now*, as a train, provisionally (each lane of its path held: [`crate::timing::Lane::hold`]), and
//! it is not queued: its steps — TLPs leaving, TLPs landing — are taken by the run in their
//! place among the queued events ([`Core::cross_ahead`]), each as the step loop would take
//! it: the TLPs that leave then are the transaction's own, those due land (in memory at
//! once, in order with everything else), the clock and the counters move; at its last
//! leaving it goes on as any transaction (its writer wakes). Steps taken without the queue
//! elsewhere stop at its next step as at a queued event ([`Core::next_due`]).
//!
//! Anything about to book on one of its lanes takes the provisional bookings back first
//! ([`Core::booking_on`], [`Core::rollback_ahead`]): the lanes are restored, the TLPs that
//! have left are booked again as the step loop booked them (the same inputs give the same
//! intervals), and the transaction is queued at its next step as the step loop queued it
//! when it last stepped. So does what else could tell the difference: a watch armed on its
//! bytes (its landings there must wake it), the recording starting, the fabric changing,
//! the link statistics asked. So the results are the step loop's, bit for bit
//! (`Sim::set_aheads(false)`; tests compare). A single TLP sent alone onto its lanes (a
//! device's completion entry or queue-entry fetch between its data TLPs: [`Core::cross_alone`])
//! takes it back without queueing it; once that TLP has booked, the write goes ahead again at
//! once if it may ([`Core::ahead_again`]): its rest booked after the TLP as its steps would
//! book it, its steps keeping their place among the queued events (the same `Ahead::seq`).
//!
//! Ties. The queue orders events of one time by the sequence number they were queued with.
//! The step loop queues a cut transaction at its next step with the next number when it
//! steps; a step taken ahead has no entry, so the run keeps the number it had given last
//! when the transaction last stepped (`Ahead::seq`): its next step comes after the events
//! queued by then and before those queued after ([`Core::ahead_due`]). Numbers go up by two
//! ([`Core::schedule`]), so the step's own is the odd one between (`seq + 1`), and the entry
//! queued for it when it is taken back gets that number
//! ([`crate::events::EventQueue::push_behind`]).
//!
//! Invariant: while a transaction is ahead, it is a write in its slot, not queued, of one
//! unicast segment into unwatched memory, not recorded, whose TLPs left fit its credits;
//! every lane of its path is held and nothing but its provisional bookings was made on it
//! since; its provisional TLPs are `Ahead::parts` from `(part, within)` on, its issue cursor
//! is at the first of them, and `Ahead::next` is its next step ([`Core::horizon`] is at most
//! that).

use super::burst::{Destination, TrainPart, WriteCursor};
use super::{flow_of, Core, Event};
use crate::timing::{HopCost, Lane, LaneMark};
use crate::txn::Txn;
use smartio_fabric::HostId;
use smartio_platform::SimTime;
use std::rc::Rc;

/// The transaction ahead, if any, and its provisional TLPs (kept for their capacity).
#[derive(Debug)]
pub(crate) struct Ahead {
    /// The transaction ahead.
    id: Option<u32>,
    /// Where its writes land, and how many bytes.
    dest: Option<Destination>,
    len: u64,
    /// Its lanes, held, and how each was before.
    marks: Vec<(u32, LaneMark)>,
    /// Its lanes, one bit each (lane modulo 64): a quick test that a path misses them.
    mask: u64,
    /// Its TLPs booked ahead, in parts; those from `part`'s TLP `within` on have not left.
    parts: Vec<TrainPart>,
    part: usize,
    within: u64,
    /// Its issue cursor when it went ahead (to book again the TLPs that left).
    start_offset: u64,
    start_issue: SimTime,
    /// When its next TLP could leave after the last booked ahead.
    end_issue: SimTime,
    /// The sequence number the run had given last when the transaction last stepped.
    seq: u64,
    /// Its next step ([`SimTime::NEVER`] when none is ahead).
    next: SimTime,
}

impl Default for Ahead {
    fn default() -> Ahead {
        Ahead {
            id: None,
            dest: None,
            len: 0,
            marks: Vec::new(),
            mask: 0,
            parts: Vec::new(),
            part: 0,
            within: 0,
            start_offset: 0,
            start_issue: SimTime::ZERO,
            end_issue: SimTime::ZERO,
            seq: 0,
            next: SimTime::NEVER,
        }
    }
}

impl Ahead {
    /// The next step of the transaction ahead ([`SimTime::NEVER`] when none is).
    #[inline(always)]
    pub(crate) fn next(&self) -> SimTime {
        self.next
    }

    /// Its next TLP to leave, if any is left.
    #[inline]
    fn next_leaving(&self) -> Option<(SimTime, TrainPart)> {
        let p = *self.parts.get(self.part)?;
        Some((p.leaving(self.within), p))
    }

    /// Whether `hops` book on one of its lanes.
    #[inline]
    fn books_on(&self, hops: &[HopCost]) -> bool {
        hops.iter().any(|h| {
            self.mask & lane_bit(h.lane) != 0 && self.marks.iter().any(|(l, _)| *l == h.lane)
        })
    }

    /// Whether its writes land in any of `start..end` of `host`.
    fn lands_in(&self, host: HostId, start: u64, end: u64) -> bool {
        self.dest
            .is_some_and(|d| d.host == host && d.addr < end && start < d.addr + self.len)
    }

    /// Takes its provisional bookings back: its lanes as they were when it went ahead.
    fn restore_lanes(&self, lanes: &mut [Lane]) {
        for (l, mark) in &self.marks {
            lanes[*l as usize].restore(mark);
        }
    }

    /// Forgets the transaction ahead (its lanes are restored or released already).
    fn clear(&mut self) {
        self.id = None;
        self.dest = None;
        self.mask = 0;
        self.next = SimTime::NEVER;
    }
}

/// Lane `lane`'s bit in [`Ahead::mask`].
#[inline(always)]
fn lane_bit(lane: u32) -> u64 {
    1u64 << (lane % 64)
}

impl Core {
    /// Whether a transaction is ahead.
    #[inline(always)]
    pub(crate) fn is_ahead(&self) -> bool {
        self.ahead.id.is_some()
    }

    /// Something is about to book on `hops`: a transaction ahead on any of them is taken
    /// back first.
    #[inline(always)]
    pub(super) fn booking_on(&mut self, hops: &[HopCost]) {
        if let Some((id, seq)) = self.taking_back_on(hops) {
            self.queue_taken_back(id, seq);
        }
    }

    /// Transaction `id` (`txn`, out of its slot), a write with TLPs left to send, is cut:
    /// books the rest of it ahead if it may go ahead (see the module's documentation), and
    /// answers whether it did (it is then not queued).
    #[inline(never)]
    pub(super) fn go_ahead(&mut self, id: u32, txn: &mut Txn) -> bool {
        if self.is_ahead() || !self.bursts || !self.trains {
            return false;
        }
        let Some(dest) = self.burst_destination(txn) else {
            return false;
        };
        let limit = self.write_limit(txn.requester);
        // Room in its window for all its TLPs left (else the step loop's wait for credits):
        // at most one more than whole TLPs of the limit (where the bytes left are cut).
        let room = txn.window.saturating_sub(txn.requests.len());
        let left = txn.segments[0].len - txn.issue_offset;
        if left.div_ceil(limit.max(1)) + 1 > room as u64 {
            return false;
        }
        let path = Rc::clone(&txn.segments[0].path);
        let flow = flow_of(txn.requester);
        let (mut marks, mut parts) = (
            std::mem::take(&mut self.ahead.marks),
            std::mem::take(&mut self.ahead.parts),
        );
        marks.clear();
        let mut mask = 0;
        for h in &path.forward {
            marks.push((h.lane, self.lanes[h.lane as usize].hold()));
            mask |= lane_bit(h.lane);
        }
        let mut cursor = WriteCursor::of(txn);
        let chips = txn.chips.of(0, false, &path.forward, &mut self.chip_stream);
        parts.clear();
        self.book_train(
            &mut cursor,
            chips,
            &path,
            limit,
            flow,
            room,
            None,
            &mut parts,
        );
        // None put in a gap (else the provisional bookings cannot be taken back by
        // truncating), and all of it sent (the window's room was enough).
        let spoiled = marks.iter().any(|(l, _)| self.lanes[*l as usize].spoiled());
        let ahead = &mut self.ahead;
        ahead.marks = marks;
        ahead.parts = parts;
        if spoiled || !cursor.sent_all() {
            ahead.restore_lanes(&mut self.lanes);
            return false;
        }
        ahead.id = Some(id);
        ahead.dest = Some(dest);
        ahead.len = txn.segments[0].len;
        ahead.mask = mask;
        ahead.part = 0;
        ahead.within = 0;
        ahead.start_offset = txn.issue_offset;
        ahead.start_issue = txn.next_issue;
        ahead.end_issue = cursor.end_issue();
        ahead.seq = self.seq;
        ahead.next = txn.next_step(true);
        self.aheads += 1;
        txn.scheduled = None;
        self.set_horizon();
        true
    }

    /// Whether the step of the transaction ahead comes before the queue's next event (or
    /// the run's deadline, when nothing is queued by then: its steps by the deadline are
    /// the run's).
    #[inline(always)]
    pub(crate) fn ahead_due(&self, deadline: SimTime) -> bool {
        let next = self.ahead.next;
        if next == SimTime::NEVER || next > deadline {
            return false;
        }
        match self.queue.peek_key() {
            None => true,
            Some((t, s)) => next < t || (next == t && self.ahead.seq + 1 < s),
        }
    }

    /// Takes the steps of the transaction ahead that come before the queue's next event and
    /// by `deadline`, each as the step loop would (see the module's documentation); at its
    /// last leaving it goes on as any transaction.
    #[inline(never)]
    pub(crate) fn cross_ahead(&mut self, deadline: SimTime) {
        let (Some(id), Some(dest)) = (self.ahead.id, self.ahead.dest) else {
            return;
        };
        let Some(mut txn) = self.txns.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        // Its steps queue nothing (their landings go into unwatched memory), so the queue's
        // next event stays what it is now throughout (as [`Core::ahead_due`] asks).
        let queued = self.queue.peek_key();
        let due = |next: SimTime, seq: u64| {
            next != SimTime::NEVER
                && next <= deadline
                && queued.is_none_or(|(t, s)| next < t || (next == t && seq + 1 < s))
        };
        while due(self.ahead.next, self.ahead.seq) {
            let at = self.ahead.next;
            self.step_to(at);
            self.ahead_steps += 1;
            // It steps now: its next step comes after the events queued by now.
            self.ahead.seq = self.seq;
            while let Some(r) = txn.requests.pop_due(at) {
                let addr = dest.addr + (r.offset - dest.offset);
                self.land(&txn, dest.host, addr, r.offset, u64::from(r.len));
                self.counters.tlp_arrivals += 1;
            }
            // Its TLPs leaving now are its own.
            let mut leaving = self.ahead.next_leaving();
            while let Some((t, p)) = leaving {
                if t != at {
                    break;
                }
                txn.requests
                    .push_following(p.one_on_its_way(self.ahead.within));
                txn.issue_offset += u64::from(p.len);
                self.ahead.within += 1;
                if self.ahead.within == p.count {
                    self.ahead.part += 1;
                    self.ahead.within = 0;
                }
                leaving = self.ahead.next_leaving();
                txn.next_issue = match leaving {
                    Some((t, _)) => t,
                    None => self.ahead.end_issue,
                };
            }
            if leaving.is_none() {
                // The last one has left: the bookings are its own, and it goes on as any
                // transaction from this step (its writer wakes).
                self.end_ahead();
                txn.issue_segment += 1;
                txn.issue_offset = 0;
                self.copy_landed(&txn);
                txn.scheduled = Some(at);
                self.txns[id as usize] = Some(txn);
                self.on_txn_event(id, at);
                return;
            }
            self.ahead.next = txn.next_step(true);
        }
        // Its landed bytes in memory before anything else looks.
        self.copy_landed(&txn);
        self.txns[id as usize] = Some(txn);
        self.set_horizon();
    }

    /// The transaction ahead has sent its last TLP: its bookings are kept as they are.
    fn end_ahead(&mut self) {
        for (l, mark) in &self.ahead.marks {
            self.lanes[*l as usize].release(mark);
        }
        self.ahead.clear();
        self.set_horizon();
    }

    /// Takes back the transaction ahead, if any: its provisional bookings undone, the TLPs
    /// that have left booked again as the step loop booked them, and the transaction queued
    /// at its next step as the step loop queued it when it last stepped.
    #[cold]
    pub(crate) fn rollback_ahead(&mut self) {
        if let Some((id, seq)) = self.take_back_ahead() {
            self.queue_taken_back(id, seq);
        }
    }

    /// A lone TLP is about to book on `hops` (see [`Core::cross_alone`]): a transaction ahead
    /// on any of them is taken back, but not queued yet — [`Core::ahead_again`] does, or
    /// sends it ahead again, once the lone TLP has booked. What to give it.
    #[inline(always)]
    pub(super) fn taking_back_on(&mut self, hops: &[HopCost]) -> Option<(u32, u64)> {
        if self.ahead.mask != 0 && self.ahead.books_on(hops) {
            return self.take_back_ahead();
        }
        None
    }

    /// Transaction `id`, taken back (`seq`: the sequence number of the run when it last
    /// stepped) for a lone TLP that has now booked on its lanes, goes ahead again at once if
    /// it may — its rest booked after that TLP, as its steps would book it, and its steps
    /// ordered among the queued events as they were — else it is queued at its next step as
    /// [`Core::rollback_ahead`] queues it. (Having been ahead, it is a write with TLPs left
    /// to send, and writes may go ahead.)
    #[cold]
    pub(super) fn ahead_again(&mut self, id: u32, seq: u64) {
        let Some(mut txn) = self.txns.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        let again = self.go_ahead(id, &mut txn);
        self.txns[id as usize] = Some(txn);
        if again {
            self.ahead.seq = seq;
            self.aheads_again += 1;
        } else {
            self.queue_taken_back(id, seq);
        }
    }

    /// Queues transaction `id`, taken back, at its next step, as the step loop queued it
    /// when it last stepped (`seq`: the run's sequence number then).
    fn queue_taken_back(&mut self, id: u32, seq: u64) {
        let now = self.now;
        let Some(txn) = self.txn_mut(id) else { return };
        if let Some(next) = txn.next_time() {
            txn.scheduled = Some(next);
            self.queue
                .push_behind(next.max(now), seq + 1, Event::Txn(id));
        }
    }

    /// [`Core::rollback_ahead`] but for the queueing: the transaction taken back and the
    /// run's sequence number when it last stepped, if one was ahead.
    fn take_back_ahead(&mut self) -> Option<(u32, u64)> {
        let id = self.ahead.id?;
        self.ahead.restore_lanes(&mut self.lanes);
        let seq = self.ahead.seq;
        let left: u64 = self.ahead.parts[..self.ahead.part]
            .iter()
            .map(|p| p.count)
            .sum::<u64>()
            + self.ahead.within;
        self.ahead.clear();
        self.set_horizon();
        self.ahead_rollbacks += 1;
        let mut txn = self.txns.get_mut(id as usize).and_then(Option::take)?;
        if left > 0 {
            let path = Rc::clone(&txn.segments[0].path);
            let limit = self.write_limit(txn.requester);
            let flow = flow_of(txn.requester);
            let mut cursor = WriteCursor::of(&txn);
            cursor.rewind(self.ahead.start_offset, self.ahead.start_issue);
            let chips = txn.chips.of(0, false, &path.forward, &mut self.chip_stream);
            let mut parts = std::mem::take(&mut self.train);
            parts.clear();
            let sent = self.book_train(
                &mut cursor,
                chips,
                &path,
                limit,
                flow,
                left as usize,
                None,
                &mut parts,
            );
            self.train = parts;
            debug_assert_eq!(sent as u64, left, "the TLPs that left are booked again");
        }
        self.txns[id as usize] = Some(txn);
        Some((id, seq))
    }

    /// A watch is armed on `len` bytes of `host` at `addr`: a transaction ahead landing
    /// there goes step by step again (its landings there wake the watch).
    #[inline(always)]
    pub(crate) fn ahead_touched(&mut self, host: HostId, addr: u64, len: u64) {
        if self.ahead.lands_in(host, addr, addr.saturating_add(len)) {
            self.rollback_ahead();
        }
    }
}
