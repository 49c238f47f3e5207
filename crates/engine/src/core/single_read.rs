//! Reads of one request and one completion, run in place without a transaction.
//!
//! A device fetching a submission queue entry, a driver reading a register-sized value from
//! another host's memory: most non-posted reads are one request answered by one completion.
//! As a transaction such a read takes a slot, takes a tag, sends its request, steps to its
//! arrival (the memory is read then), sends its completion, steps to that, gives the tag
//! back and wakes its reader — and the reader's poll takes the bytes and gives the slot back.
//! When its first step is the run's next event ([`Core::step_in_place`]'s case) and both
//! later steps come before anything queued (nothing else can happen in between), the whole
//! read is done at once instead ([`Core::read_in_place`]): the same tag taken and given
//! back, the same two crossings booked and drawn in the same order, the memory read at the
//! request's arrival, the clock at the completion's, the same steps counted — and the bytes
//! handed to the reader as a local read's are.
//!
//! Only what cannot differ goes this way: one segment of memory (no BAR handler, no abort),
//! unicast, through no IOMMU, nothing recorded, a tag free. When something queued comes
//! before the request's arrival or the completion's, the read goes on from there as the
//! transaction it stands for, made in the state its steps would have left it in, so the
//! run goes on as it would (`Sim::set_reads_alone(false)` runs every read as a
//! transaction; a test compares).

use super::{before_queued, Core, Event};
use crate::record::NONE;
use crate::txn::{next_chunk, InFlight, Segment, TxnKind};
use smartio_fabric::{Requester, Target};
use smartio_platform::{SimDuration, SimTime};
use std::rc::Rc;

/// How [`Core::read_in_place`] went.
pub enum ReadInPlace {
    /// Done: the bytes are the reader's.
    Done,
    /// It goes on as the transaction with this id and serial number (queued at its next
    /// step).
    Txn(u32, u32),
    /// Not a read it takes: start it as a transaction, of these segments (its route).
    No(Rc<[Segment]>),
}

impl Core {
    /// Reads `len` bytes at `addr` for `requester`, a read whose first step, due at `start`,
    /// is the run's next event (the caller knows: see [`Core::step_in_place`]) and that
    /// nothing records: at once, its bytes appended to `out`, if it is one request answered
    /// by one completion from memory and nothing queued comes before its steps (see the
    /// module's notes). Routed as a transaction is, so an address that routes nowhere fails
    /// the same way.
    #[inline(never)]
    pub fn read_in_place(
        &mut self,
        requester: Requester,
        addr: smartio_platform::BusAddr,
        len: u64,
        start: SimTime,
        out: &mut Vec<u8>,
    ) -> Result<ReadInPlace, smartio_platform::AccessError> {
        let segments = self.segments(requester, addr, len, smartio_fabric::Access::Read)?;
        let Some((host, pa)) = self.single_read(requester, &segments) else {
            return Ok(ReadInPlace::No(segments));
        };
        let path = Rc::clone(&segments[0].path);
        // Its first step (`step_in_place`): the request takes a tag and leaves (`issue`).
        self.pass_to(start);
        self.woke = false;
        self.tag_pool(requester, path.forwarded_by).free -= 1;
        let crossing = self.cross_alone(&path.forward, start, 0, self.booking(requester));
        let request_at = crossing.arrival + SimDuration(path.arrive_ps);
        let next_issue = crossing.first_link_done.max(start);
        // What is queued stays so until the read is done: it starts nothing, wakes nobody.
        let queued = self.next_due();
        if !before_queued(request_at, queued) {
            let (id, serial) = self.read_as_transaction(requester, segments, next_issue);
            let request = on_its_way(request_at, len, false);
            self.go_on_as_transaction(id, |t| t.requests.insert(request), request_at);
            return Ok(ReadInPlace::Txn(id, serial));
        }
        // The request reaches memory, which is read and answered (`answer_read`).
        self.step_in_burst(request_at);
        self.counters.tlp_arrivals += 1;
        let mark = out.len();
        self.settle_range(host, pa, len);
        self.memory[host.index()].read_append(pa, len as usize, out);
        let answer = self.now + SimDuration(path.read_ps);
        let crossing = self.cross_alone(&path.backward, answer, len, self.booking(requester));
        let completion_at = crossing.arrival + SimDuration(path.return_ps);
        if !before_queued(completion_at, queued) {
            let (id, serial) = self.read_as_transaction(requester, segments, next_issue);
            let completion = on_its_way(completion_at, len, true);
            let data = out.split_off(mark);
            self.go_on_as_transaction(
                id,
                |t| {
                    t.data.extend_from_slice(&data);
                    t.completions.insert(completion);
                },
                completion_at,
            );
            return Ok(ReadInPlace::Txn(id, serial));
        }
        // Its completion comes back: the tag is given back (no transaction waits for one),
        // the reader has its bytes.
        self.step_in_burst(completion_at);
        self.counters.tlp_arrivals += 1;
        self.tag_pool(requester, path.forwarded_by).free += 1;
        self.reads_in_place += 1;
        Ok(ReadInPlace::Done)
    }

    /// Where `requester`'s read of `segments` reads memory if it may go in place: one
    /// segment of memory, unicast, through no IOMMU, one request and one completion, a tag
    /// free and no transaction waiting for one, reads alone allowed and nothing recorded.
    #[inline(always)]
    fn single_read(
        &mut self,
        requester: Requester,
        segments: &[Segment],
    ) -> Option<(smartio_fabric::HostId, u64)> {
        if !self.reads_alone || self.recording() {
            return None;
        }
        let [seg] = segments else {
            return None;
        };
        let Target::Memory { host, addr } = seg.target else {
            return None;
        };
        let completion_max = self.timing.sizes.completion_max.max(self.timing.sizes.rcb);
        let single = seg.fanout.is_empty()
            && seg.translations.is_empty()
            && next_chunk(seg.bus_addr, seg.len, seg.path.max_read_request) == seg.len
            && next_chunk(seg.bus_addr, seg.len, completion_max) == seg.len;
        // A tag free and no transaction waiting for one: the tag it gives back goes back
        // to the pool as the transaction's would (nothing runs in between to wait).
        let pool = self.tag_pool(requester, seg.path.forwarded_by);
        let tag_free = pool.free > 0 && pool.waiting.is_empty();
        (single && tag_free).then_some((host, addr.get()))
    }

    /// Moves the clock to the read's next step at `at` (before anything queued), counted as
    /// the step loop counts it — and as its read burst does, which takes such a read's steps
    /// when bursts are on (see [`super::burst`]).
    #[inline(always)]
    fn step_in_burst(&mut self, at: SimTime) {
        self.step_to(at);
        if self.bursts {
            self.burst_steps += 1;
        }
    }

    /// The transaction the read in place stands for, its one request issued (its tag taken,
    /// the next issue at `next_issue`): nothing on its way yet.
    fn read_as_transaction(
        &mut self,
        requester: Requester,
        segments: Rc<[Segment]>,
        next_issue: SimTime,
    ) -> (u32, u32) {
        let data = self.spare_data();
        let now = self.now;
        let (id, serial) = self.new_txn(TxnKind::Read, requester, segments, data, now, NONE, None);
        if let Some(t) = self.txn_mut(id) {
            t.issue_segment = 1;
            t.next_issue = next_issue;
        }
        (id, serial)
    }

    /// Puts what transaction `id` has on its way (`fill`) and queues its next step at `at`,
    /// as its step loop would when that comes after something queued.
    fn go_on_as_transaction(
        &mut self,
        id: u32,
        fill: impl FnOnce(&mut crate::txn::Txn),
        at: SimTime,
    ) {
        if let Some(t) = self.txn_mut(id) {
            fill(t);
            t.scheduled = Some(at);
        }
        self.schedule(at, Event::Txn(id));
    }
}

/// The read's request (or, `last`, its completion) of `len` bytes on its way, arriving at
/// `at`, as its transaction keeps it (its one segment, nothing recorded).
fn on_its_way(at: SimTime, len: u64, last: bool) -> InFlight {
    InFlight {
        at,
        segment: 0,
        offset: 0,
        len: len as u32,
        last,
        copy: 0,
        step: NONE,
    }
}
