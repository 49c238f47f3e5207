//! A transaction's steps that nothing else can come between, run as one burst.
//!
//! A write stream into memory (a device's DMA to a host buffer, say) and a read of memory
//! are most of a run's TLPs, and between two of their steps — a TLP leaving, a TLP landing,
//! a request answered, a completion received — nothing else happens when no event is due
//! before the next one and the steps wake no one (a write's landings: no watch on its
//! bytes; a read's steps wake only its reader, at its last completion). The generic
//! step loop ([`Core::on_txn_event`]) then goes on from step to step anyway, asking at each
//! one everything any transaction may need (completions, tags, BAR and interrupt targets,
//! IOMMUs, watches, the recording). A burst asks those questions once, for the stretch of
//! steps before the next event, and does the same steps in the same order: the same TLPs
//! leave at the same times and are booked the same way, the same bytes land, the same
//! counters count (each distinct time the transaction steps to is one event, as in the
//! loop). So a run's results are those of the step loop, bit for bit.

use super::{before_queued, flow_of, Core, Landed};
use crate::record::NONE;
use crate::timing::{
    first_serialization, traverse_serialized, traverse_shaped, Booking, Crossing, Flow, HopCost,
    TrainRun,
};
use crate::txn::{next_chunk, CostedPath, FlightRun, InFlight, Segment, Txn, TxnKind};
use smartio_fabric::{HostId, Target};
use smartio_platform::{SimDuration, SimTime};
use std::rc::Rc;

/// TLPs of a train ([`Core::issue_train`]) that leave one after another a fixed time apart
/// and land a fixed time apart (one TLP, or a [`TrainRun`]'s followers sent as a batch), and
/// their pieces of the transaction, one after another: each in closed form.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrainPart {
    /// When the first leaves, and the time from one leaving to the next.
    pub(super) issued: SimTime,
    leave_ps: u64,
    /// When the first lands, and the time from one landing to the next.
    at: SimTime,
    land_ps: u64,
    /// The first one's offset in the transaction (each next one's follows it).
    offset: u64,
    pub(super) len: u32,
    /// How many (at least one).
    pub(super) count: u64,
}

impl TrainPart {
    /// When its TLP `i` leaves.
    #[inline(always)]
    pub(super) fn leaving(&self, i: u64) -> SimTime {
        SimTime(self.issued.as_ps() + i * self.leave_ps)
    }

    /// When its TLP `i` lands.
    #[inline(always)]
    fn landing(&self, i: u64) -> SimTime {
        SimTime(self.at.as_ps() + i * self.land_ps)
    }

    /// How many of its TLPs have landed by `t`.
    #[inline(always)]
    fn landed_by(&self, t: SimTime) -> u64 {
        match t.as_ps().checked_sub(self.at.as_ps()) {
            None => 0,
            Some(_) if self.land_ps == 0 => self.count,
            Some(after) => (after / self.land_ps + 1).min(self.count),
        }
    }

    /// Whether `next` continues it: TLPs of its size that leave and land a period after its
    /// last, at its periods, and follow it in the transaction.
    #[inline(always)]
    fn continued_by(&self, next: &TrainPart) -> bool {
        self.len == next.len
            && self.leave_ps == next.leave_ps
            && self.land_ps == next.land_ps
            && self.leaving(self.count) == next.issued
            && self.landing(self.count) == next.at
            && self.offset + self.count * u64::from(self.len) == next.offset
    }

    /// Its TLPs from `i` on, on their way as one run.
    #[inline(always)]
    fn on_their_way(&self, i: u64) -> FlightRun {
        FlightRun {
            at: self.landing(i),
            period: self.land_ps,
            offset: self.offset + i * u64::from(self.len),
            len: self.len,
            count: self.count - i,
        }
    }

    /// Its TLP `i` alone on its way, as a run of one at its landings' period
    /// ([`crate::txn::Flights::push_following`]).
    #[inline(always)]
    pub(super) fn one_on_its_way(&self, i: u64) -> FlightRun {
        FlightRun {
            count: 1,
            ..self.on_their_way(i)
        }
    }

    /// Its TLP `i` on its way, as the transaction keeps it (a unicast write of its one
    /// segment).
    #[inline(always)]
    pub(super) fn in_flight(&self, i: u64) -> InFlight {
        self.on_their_way(i).first()
    }
}

/// Where a burst's write is in its one segment: the segment's addresses and how far it has
/// been sent, kept in locals while its TLPs leave one after another and put back in the
/// transaction after ([`WriteCursor::put_back`]).
pub(super) struct WriteCursor {
    bus_addr: u64,
    len: u64,
    /// The segment's offset in the transaction.
    offset: u64,
    /// Bytes of the segment sent.
    issued: u64,
    /// When the next TLP may leave.
    next_issue: SimTime,
}

impl WriteCursor {
    /// The cursor of `txn`, a write of one segment with bytes left to send.
    #[inline(always)]
    pub(super) fn of(txn: &Txn) -> WriteCursor {
        let seg = &txn.segments[0];
        WriteCursor {
            bus_addr: seg.bus_addr,
            len: seg.len,
            offset: seg.offset,
            issued: txn.issue_offset,
            next_issue: txn.next_issue,
        }
    }

    /// Whether the whole segment has been sent.
    #[inline(always)]
    pub(super) fn sent_all(&self) -> bool {
        self.issued >= self.len
    }

    /// How many TLPs of `len` bytes come next, one after another (at least the next one,
    /// which the caller knows is of that size): all that are left of it when `len` is the
    /// limit and a power of two, else that one. A TLP of the whole limit starts at a
    /// multiple of it (else [`next_chunk`] cuts it there), and a power of two no larger than
    /// a page divides the page, so every TLP after it is of the whole limit too.
    #[inline(always)]
    fn more_of_size(&self, len: u64, limit: u64) -> u64 {
        if len == limit && len.is_power_of_two() {
            (self.len - self.issued) / len
        } else {
            1
        }
    }

    /// The length of the next TLP: at most `limit` bytes, cut where [`next_chunk`] cuts.
    #[inline(always)]
    fn next_len(&self, limit: u64) -> u64 {
        next_chunk(self.bus_addr + self.issued, self.len - self.issued, limit)
    }

    /// The next TLP, of `len` bytes, left at `start` and crossed its path as `crossing`
    /// tells (landing `arrive_ps` after its arrival): moves past it and returns it.
    #[inline(always)]
    fn sent(&mut self, len: u64, start: SimTime, crossing: Crossing, arrive_ps: u64) -> TrainPart {
        let tlp = TrainPart {
            issued: start,
            leave_ps: 0,
            at: crossing.arrival + SimDuration(arrive_ps),
            land_ps: 0,
            offset: self.offset + self.issued,
            len: len as u32,
            count: 1,
        };
        self.next_issue = crossing.first_link_done.max(start);
        self.issued += len;
        tlp
    }

    /// The next `k` TLPs, of `len` bytes each, followers of `run` leaving one after another
    /// from the next issue time (landing `arrive_ps` after they arrive): moves past them and
    /// returns them.
    #[inline(always)]
    fn sent_followers(
        &mut self,
        run: &mut TrainRun,
        len: u64,
        k: u64,
        arrive_ps: u64,
    ) -> TrainPart {
        let start = self.next_issue;
        let (arrival, done) = run.follow_batch(start, k);
        let part = TrainPart {
            issued: start,
            leave_ps: run.leave_ps(),
            at: arrival + SimDuration(arrive_ps),
            land_ps: run.land_ps(),
            offset: self.offset + self.issued,
            len: len as u32,
            count: k,
        };
        self.next_issue = done;
        self.issued += k * len;
        part
    }

    /// When the TLP after the last one sent may leave.
    pub(super) fn end_issue(&self) -> SimTime {
        self.next_issue
    }

    /// Moves it back to `issued` bytes of the segment sent, the next TLP leaving at
    /// `next_issue`.
    pub(super) fn rewind(&mut self, issued: u64, next_issue: SimTime) {
        self.issued = issued;
        self.next_issue = next_issue;
    }

    /// Moves `txn`'s issue cursor to this one (past the segment once it is all sent).
    #[inline(always)]
    fn put_back(self, txn: &mut Txn) {
        txn.next_issue = self.next_issue;
        txn.issue_offset = self.issued;
        if self.sent_all() {
            txn.issue_segment += 1;
            txn.issue_offset = 0;
        }
    }
}

/// A TLP's serialization on the first link of a burst's path, kept for the last length asked
/// (a train's TLPs are of one size but for the first and last): asked per TLP, computed per
/// size.
#[derive(Default)]
struct FirstLink {
    /// The payload length and its serialization last computed (`len` 0: none yet).
    len: u64,
    ser: u64,
}

impl FirstLink {
    /// The serialization of `len` payload bytes on `path`'s first link (0 for an empty path).
    #[inline(always)]
    fn serialization(&mut self, path: &[HopCost], len: u64) -> u64 {
        if len != self.len {
            self.len = len;
            self.ser = first_serialization(path, len);
        }
        self.ser
    }
}

/// Times one after another a fixed time apart: `count` of them from `first`, each `step`
/// after the one before (`step` 0 for one). What a train's leavings and landings are, per
/// part ([`TrainPart`]), so that its steps are counted in closed form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Progression {
    first: u64,
    step: u64,
    count: u64,
}

impl Progression {
    /// Whether `t` is one of its times.
    #[inline(always)]
    fn contains(&self, t: u64) -> bool {
        let Some(after) = t.checked_sub(self.first) else {
            return false;
        };
        match self.step {
            0 => after == 0 && self.count > 0,
            step => after % step == 0 && after / step < self.count,
        }
    }

    /// How many of its times are also `other`'s.
    fn common(&self, other: &Progression) -> u64 {
        let (a, b) = (self, other);
        if a.count == 0 || b.count == 0 {
            return 0;
        }
        if a.count == 1 {
            return u64::from(b.contains(a.first));
        }
        if b.count == 1 {
            return u64::from(a.contains(b.first));
        }
        if a.step == b.step {
            // The later one's time j is the earlier one's time j + shift, when they meet.
            let (early, late) = if a.first <= b.first { (a, b) } else { (b, a) };
            let d = late.first - early.first;
            if d % a.step != 0 {
                return 0;
            }
            let shift = d / a.step;
            return late.count.min(early.count.saturating_sub(shift));
        }
        // Different periods (a link slower than the first on the way): one by one.
        let (few, many) = if a.count <= b.count { (a, b) } else { (b, a) };
        (0..few.count)
            .filter(|&i| many.contains(few.first + i * few.step))
            .count() as u64
    }
}

impl TrainPart {
    /// Its leavings.
    #[inline(always)]
    fn leavings(&self) -> Progression {
        Progression {
            first: self.issued.as_ps(),
            step: self.leave_ps,
            count: self.count,
        }
    }

    /// Its first `n` landings.
    #[inline(always)]
    fn landings(&self, n: u64) -> Progression {
        Progression {
            first: self.at.as_ps(),
            step: self.land_ps,
            count: n,
        }
    }
}

/// How many of `landings` are at the time of a leaving of `train`.
#[inline(always)]
fn at_leavings(landings: &Progression, train: &[TrainPart]) -> u64 {
    train.iter().map(|p| p.leavings().common(landings)).sum()
}

/// The steps a train stands for after its first leaving (which the burst counted), up to its
/// last leaving `last`: each distinct time of a leaving, or of a landing by `last` — of the
/// TLPs on their way before it (`earlier`, the sum of their [`earlier_step`]s), then of its
/// own first ones — once, as the step loop takes them (a landing and a leaving at one time
/// are one step). The leavings after the first are as many distinct times, all later than
/// it; so are the landings (those on their way before the train land first, later than its
/// first leaving, which came after they were due); so a landing adds a step unless a
/// leaving is at its time.
#[inline(always)]
fn train_steps(train: &[TrainPart], earlier: u64, last: SimTime) -> u64 {
    let leavings = train.iter().map(|p| p.count).sum::<u64>() - 1;
    let own: u64 = train
        .iter()
        .map(|p| match p.landed_by(last) {
            0 => 0,
            n => n - at_leavings(&p.landings(n), train),
        })
        .sum();
    leavings + earlier + own
}

/// The step a TLP on its way before `train` adds to it, landing at `at` (by its last
/// leaving): one, unless a leaving of the train is at that time.
#[inline(always)]
fn earlier_step(at: SimTime, train: &[TrainPart]) -> u64 {
    let one = Progression {
        first: at.as_ps(),
        step: 0,
        count: 1,
    };
    1 - at_leavings(&one, train)
}

/// The fewest TLPs a train is sent for: a shorter one costs more to set up and take apart
/// than its steps would cost one by one.
const TRAIN_MIN: u64 = 8;

/// Whether `txn`'s next TLPs, due to leave at `at` along `path` in TLPs of at most `limit`
/// bytes, would make a train of [`TRAIN_MIN`] or more: that many are left, the window has
/// room for them, and that many full TLPs' serializations on the first link end before the
/// first event `queued`. (An estimate: either way the results are the same.)
#[inline(always)]
fn train_worth_it(
    txn: &Txn,
    path: &CostedPath,
    limit: u64,
    window: usize,
    at: SimTime,
    queued: Option<SimTime>,
) -> bool {
    let Some(first) = path.forward.first() else {
        return false;
    };
    let left = txn.segments[0].len - txn.issue_offset;
    let room = (window - txn.requests.len()) as u64;
    let time = queued.map_or(u64::MAX, |q| q.as_ps().saturating_sub(at.as_ps()));
    left >= TRAIN_MIN * limit
        && room >= TRAIN_MIN
        && time / first.timing.serialization_ps(limit).max(1) >= TRAIN_MIN
}

/// Where a burst's writes land: one contiguous range of one host's memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct Destination {
    pub(super) host: HostId,
    /// Where the transaction's first byte lands.
    pub(super) addr: u64,
    /// The transaction's offset of that byte.
    pub(super) offset: u64,
}

impl Core {
    /// The one segment of `txn` if its steps may run in bursts: a transaction of `kind`
    /// with one unicast segment in memory, through no IOMMU, while nothing is recorded (the
    /// recording keeps each TLP's own steps).
    #[inline]
    fn burst_segment<'t>(&self, txn: &'t Txn, kind: TxnKind) -> Option<&'t Segment> {
        if txn.kind != kind || self.recording() {
            return None;
        }
        let [seg] = &txn.segments[..] else {
            return None;
        };
        let unicast = seg.fanout.is_empty() && seg.translations.is_empty();
        (unicast && matches!(seg.target, Target::Memory { .. })).then_some(seg)
    }

    /// Where `txn`'s writes land if the rest of it may run in bursts: a posted write of a
    /// [`Core::burst_segment`] onto bytes no memory watch covers.
    #[inline]
    pub(super) fn burst_destination(&self, txn: &Txn) -> Option<Destination> {
        self.unwatched_memory(self.burst_segment(txn, TxnKind::Write)?)
    }

    /// Where `seg`'s writes land if it is memory no watch covers (what a write burst also
    /// asks of its segment).
    #[inline]
    pub(super) fn unwatched_memory(&self, seg: &Segment) -> Option<Destination> {
        let Target::Memory { host, addr } = seg.target else {
            return None;
        };
        let (start, end) = (addr.get(), addr.get().saturating_add(seg.len));
        self.watches
            .none_on(host, start, end)
            .then_some(Destination {
                host,
                addr: start,
                offset: seg.offset,
            })
    }

    /// Moves the clock to a burst's next step at `at` if that comes before the first event
    /// `queued` (see [`before_queued`]), counting it as the step loop counts its steps. Each
    /// step is later than the last: everything due at a time is done at once.
    #[inline(always)]
    fn burst_step_to(&mut self, at: SimTime, queued: Option<SimTime>) -> bool {
        if !before_queued(at, queued) {
            return false;
        }
        self.step_to(at);
        self.burst_steps += 1;
        true
    }

    /// Runs the steps of `txn` (out of its slot) from now on while each comes before the
    /// first event `queued`, when it may run in bursts; stops after the step that issues its
    /// last TLP, which the step loop finishes (it wakes the writer). Returns whether it
    /// stepped at all; the step loop goes on from `self.now`, where nothing is left due.
    /// With `taken`, its step at `self.now` is one the run has taken already (its queue
    /// entry came up): the burst does it first, and does not count it again.
    pub(super) fn write_burst(
        &mut self,
        txn: &mut Txn,
        queued: Option<SimTime>,
        mut taken: bool,
    ) -> bool {
        let Some(dest) = self.burst_destination(txn) else {
            return false;
        };
        let path = Rc::clone(&txn.segments[0].path);
        self.booking_on(&path.forward);
        let limit = self.write_limit(txn.requester);
        let flow = flow_of(txn.requester);
        // What stays the same through the burst, asked once: a write waits for no tag, and
        // only its own issuing ends its issuing.
        let window = txn.window;
        let mut issuing = txn.can_issue_ever();
        // Whether to look for a train at the next issue: once a TLP goes alone, the rest of
        // this burst has less time before `queued`, so it is not asked again.
        let mut trains = self.trains;
        let mut stepped = false;
        loop {
            if !issuing && !taken {
                if let Some(run) = txn.requests.take_run_before(queued) {
                    // Only landings are left, the first of TLPs one after another (the rest
                    // of a train): each at its own time a step, landed as one piece.
                    self.land_run(txn, dest, run);
                    stepped = true;
                    continue;
                }
            }
            // A write's next step: a TLP lands, or the next one leaves (it has no completions).
            let at = txn.next_step(issuing && txn.requests.len() < window);
            if at == SimTime::NEVER {
                break;
            }
            if taken && at == self.now {
                // The run has taken this step already (its queue entry came up).
                taken = false;
            } else if !self.burst_step_to(at, queued) {
                break;
            }
            stepped = true;
            while let Some(r) = txn.requests.pop_due(at) {
                self.land_write(txn, dest, r.offset, u64::from(r.len));
                // A credit came back: the next TLP may go now.
                txn.next_issue = txn.next_issue.max(at);
            }
            if issuing && txn.next_issue <= at && txn.requests.len() < window {
                if trains && train_worth_it(txn, &path, limit, window, at, queued) {
                    self.issue_train(txn, dest, &path, limit, flow, queued);
                } else {
                    trains = false;
                    self.issue_in_burst(txn, &path, limit, flow);
                }
                if txn.issued_all() {
                    issuing = false;
                    if txn.result.is_none() {
                        // The step loop finishes this step: the writer wakes.
                        break;
                    }
                }
            }
        }
        stepped
    }

    /// Runs the steps of `txn` (out of its slot), a read, from now on while each comes
    /// before the first event queued, when it may run in bursts (a read of a
    /// [`Core::burst_segment`]). Each step does what the step loop's would, in its order
    /// (completions, then requests reaching the completer, then the next request); a tag
    /// given back to another transaction queues it, and the queue is asked again. Stops
    /// after the step that receives the last completion (it has nothing left to do), which
    /// the step loop finishes (it wakes the reader). Returns whether it stepped at all.
    ///
    /// Its requests and completions are sent by [`Core::request_in_burst`] and
    /// [`Core::complete_in_burst`]: the path, the flow and the serialization asked once per
    /// burst. Kept out of line, as `issue_train` is (inlined, share-30 +315 instructions
    /// per I/O).
    #[inline(never)]
    pub(super) fn read_burst(
        &mut self,
        id: u32,
        txn: &mut Txn,
        mut queued: Option<SimTime>,
    ) -> bool {
        let Some(seg) = self.burst_segment(txn, TxnKind::Read) else {
            return false;
        };
        let path = Rc::clone(&seg.path);
        self.booking_on(&path.forward);
        self.booking_on(&path.backward);
        let flow = flow_of(txn.requester);
        // A request carries no payload: one serialization for all of them.
        let request_ser = first_serialization(&path.forward, 0);
        let mut completion_first = FirstLink::default();
        // Whether requests are left to send and no tag to wait for (`Txn::can_issue_ever`),
        // asked again only when a request leaves or a tag comes back.
        let window = txn.window;
        let mut issuing = txn.can_issue_ever();
        let mut stepped = false;
        loop {
            let at = txn.next_step(issuing && txn.requests.len() < window);
            if at == SimTime::NEVER || !self.burst_step_to(at, queued) {
                break;
            }
            stepped = true;
            loop {
                if let Some(c) = txn.completions.pop_due(at) {
                    self.counters.tlp_arrivals += 1;
                    if c.last {
                        self.free_tag(txn.requester, path.forwarded_by, id, txn);
                        issuing = txn.can_issue_ever();
                        queued = self.next_due();
                    }
                    continue;
                }
                if let Some(r) = txn.requests.pop_due(at) {
                    self.counters.tlp_arrivals += 1;
                    self.read_completer(txn, r);
                    self.complete_in_burst(txn, &path, r, flow, &mut completion_first);
                    continue;
                }
                if issuing && txn.next_issue <= at && txn.requests.len() < window {
                    self.request_in_burst(id, txn, &path, flow, request_ser);
                    issuing = txn.can_issue_ever();
                    continue;
                }
                break;
            }
        }
        stepped
    }

    /// Sends the next read request of `txn`, a burst's read along `path` booked for `flow`
    /// (its requester's), `ser` its serialization on the first link, as [`Core::issue`] does
    /// for it (one segment, no IOMMU, no recording): once a tag is free (`Core::take_tag`),
    /// else the read waits for one.
    #[inline(always)]
    fn request_in_burst(
        &mut self,
        id: u32,
        txn: &mut Txn,
        path: &CostedPath,
        flow: Flow,
        ser: u64,
    ) {
        if !self.take_tag(id, txn, path.forwarded_by) {
            return;
        }
        let seg = &txn.segments[0];
        let len = next_chunk(
            seg.bus_addr + txn.issue_offset,
            seg.len - txn.issue_offset,
            path.max_read_request,
        );
        let offset = seg.offset + txn.issue_offset;
        let start = txn.next_issue;
        txn.issued_after = txn.gate;
        let who = self.booking_for(flow);
        let chips = txn.chips.of(0, false, &path.forward, &mut self.chip_stream);
        let crossing =
            traverse_serialized(&mut self.lanes, &path.forward, start, 0, ser, who, chips);
        txn.requests.insert(InFlight {
            at: crossing.arrival + SimDuration(path.arrive_ps),
            segment: 0,
            offset,
            len: len as u32,
            last: false,
            copy: 0,
            step: NONE,
        });
        txn.next_issue = crossing.first_link_done.max(start);
        txn.issued(len);
    }

    /// Sends request `r`'s completions back along `path` for `flow`, as
    /// [`Core::send_completions`] does for a burst's read (no recording); `first` keeps their
    /// serialization on the first link per size.
    #[inline(always)]
    fn complete_in_burst(
        &mut self,
        txn: &mut Txn,
        path: &CostedPath,
        r: InFlight,
        flow: Flow,
        first: &mut FirstLink,
    ) {
        let sizes = self.timing.sizes;
        let split = sizes.completion_max.max(sizes.rcb);
        let start = self.now + SimDuration(path.read_ps);
        let who = self.booking_for(flow);
        let seg = &txn.segments[r.segment as usize];
        let bus = seg.bus_addr + (r.offset - seg.offset);
        let len = u64::from(r.len);
        let mut done = 0u64;
        let chips = txn
            .chips
            .of(r.segment, true, &path.backward, &mut self.chip_stream);
        while done < len {
            let n = next_chunk(bus + done, len - done, split);
            let ser = first.serialization(&path.backward, n);
            let arrival =
                traverse_serialized(&mut self.lanes, &path.backward, start, n, ser, who, chips)
                    .arrival;
            txn.completions.insert(InFlight {
                at: arrival + SimDuration(path.return_ps),
                segment: r.segment,
                offset: r.offset + done,
                len: n as u32,
                last: done + n >= len,
                copy: 0,
                step: NONE,
            });
            done += n;
        }
    }

    /// Sends the next TLP of `txn`, a burst's write along `path` in TLPs of at most `limit`
    /// bytes, booked for `flow` (its requester's), as [`Core::issue`] does for it (one
    /// segment, no IOMMU, no recording).
    #[inline(always)]
    fn issue_in_burst(&mut self, txn: &mut Txn, path: &CostedPath, limit: u64, flow: Flow) {
        let who = self.booking_for(flow);
        let mut cursor = WriteCursor::of(txn);
        let chips = txn.chips.of(0, false, &path.forward, &mut self.chip_stream);
        let len = cursor.next_len(limit);
        let start = cursor.next_issue;
        let ser = first_serialization(&path.forward, len);
        let lanes = &mut self.lanes;
        let crossing = traverse_serialized(lanes, &path.forward, start, len, ser, who, chips);
        let t = cursor.sent(len, start, crossing, path.arrive_ps);
        cursor.put_back(txn);
        txn.requests.insert(t.in_flight(0));
    }

    /// Sends the next TLPs of `txn`, a burst's write to `dest` along `path` in TLPs of at most
    /// `limit` bytes booked for `flow`, as a train: the one due now and those that leave one
    /// after another at the burst's next steps, while each leaves before the first event
    /// `queued`, the window cannot close (fewer are on their way than it admits, counting the
    /// train's) and TLPs are left. Each is booked as [`Core::issue_in_burst`] books it, in
    /// turn: the first and any of another size crossing their path, the others after one of
    /// their size in closed form (a [`TrainRun`], booked when it ends), kept as parts of the
    /// train ([`TrainPart`]: a batch of followers is one part, its times arithmetic). Then
    /// the steps the burst would have taken until the last one left are taken at once: the
    /// TLPs due to land by then land, in time order (those already on their way first: they
    /// left earlier on the same path; the train's own as one piece), each distinct time
    /// counts as a step ([`train_steps`], in closed form), and the clock is at the last
    /// leaving. The train's TLPs still on their way join the transaction's. Kept out of
    /// line: the step loop that calls it is the engine's hottest code.
    #[inline(never)]
    fn issue_train(
        &mut self,
        txn: &mut Txn,
        dest: Destination,
        path: &CostedPath,
        limit: u64,
        flow: Flow,
        queued: Option<SimTime>,
    ) {
        let mut train = std::mem::take(&mut self.train);
        train.clear();
        let room = txn.window - txn.requests.len();
        // The issue cursor in locals while the train leaves, put back after.
        let mut cursor = WriteCursor::of(txn);
        // Its TLPs cross each chip with the transaction's latency for it.
        let chips = txn.chips.of(0, false, &path.forward, &mut self.chip_stream);
        let sent = self.book_train(
            &mut cursor,
            chips,
            path,
            limit,
            flow,
            room,
            queued,
            &mut train,
        );
        cursor.put_back(txn);
        // Those on their way before it that land by its last leaving land first.
        let tail = train[train.len() - 1];
        let last = tail.leaving(tail.count - 1);
        let mut earlier = 0;
        while let Some(r) = txn.requests.pop_due(last) {
            earlier += earlier_step(r.at, &train);
            self.land_write(txn, dest, r.offset, u64::from(r.len));
        }
        // The steps from the first leaving (taken already) to the last.
        let steps = train_steps(&train, earlier, last);
        // The train's TLPs that landed by then: the first ones (they land in the order they
        // left), in the buffer and at `dest` one after another, landed as one piece, as one
        // after another they would continue it.
        let (mut landed, mut bytes) = (0u64, 0u64);
        let mut on_their_way = train.len();
        for (i, p) in train.iter().enumerate() {
            let n = p.landed_by(last);
            landed += n;
            bytes += n * u64::from(p.len);
            if n < p.count {
                on_their_way = i;
                break;
            }
        }
        if landed > 0 {
            self.land_tlps(txn, dest, landed, train[0].offset, bytes);
        }
        // The rest join the transaction's TLPs on their way, the last part's in closed form.
        let parts = train.len();
        for (i, p) in train.iter().enumerate().skip(on_their_way) {
            let from = p.landed_by(last);
            if i + 1 == parts && p.count - from > 1 {
                txn.requests.set_run(p.on_their_way(from));
            } else {
                for j in from..p.count {
                    txn.requests.insert(p.in_flight(j));
                }
            }
        }
        self.took_steps(steps, last);
        self.train_tlps += sent as u64;
        self.train = train;
    }

    /// Books the next TLPs of a burst's write from `cursor` (moved past them) along `path`
    /// in TLPs of at most `limit` bytes for `flow`, their chips' latencies those of `chips`,
    /// as [`Core::issue_train`] sends them (at most `room`, while each leaves before the
    /// first event `queued`), into `train` as its parts; answers how many.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn book_train(
        &mut self,
        cursor: &mut WriteCursor,
        chips: &[u64],
        path: &CostedPath,
        limit: u64,
        flow: Flow,
        room: usize,
        queued: Option<SimTime>,
        train: &mut Vec<TrainPart>,
    ) -> usize {
        // TLPs in the train so far.
        let mut sent = 0usize;
        let mut first = FirstLink::default();
        // The first TLP's hops, and the TLPs of its size that follow it in closed form (see
        // `TrainRun`: booked when the run ends).
        let mut shape = std::mem::take(&mut self.train_shape);
        let mut run: Option<TrainRun> = None;
        let forward = &path.forward[..];
        loop {
            let len = cursor.next_len(limit);
            match &mut run {
                Some(r) if r.len == len => {
                    // Those of its size that leave one after another from now, before the
                    // loop would stop for room or the first event: one part.
                    let more = cursor.more_of_size(len, limit);
                    let fit = (room - sent) as u64;
                    let k = more
                        .min(fit)
                        .min(r.leavings_before(cursor.next_issue, queued));
                    let part = cursor.sent_followers(r, len, k, path.arrive_ps);
                    match train.last_mut() {
                        Some(last) if last.continued_by(&part) => last.count += k,
                        _ => train.push(part),
                    }
                    sent += k as usize;
                }
                _ => {
                    // It leaves as the step loop would send it at its step: booked as of then.
                    let start = cursor.next_issue;
                    let who = Booking {
                        now: start.as_ps(),
                        flow,
                    };
                    if let Some(r) = run.take() {
                        r.book(&mut self.lanes, forward, &shape, flow, who.now);
                    }
                    let ser = first.serialization(forward, len);
                    let lanes = &mut self.lanes;
                    let c =
                        traverse_shaped(lanes, forward, start, len, ser, who, chips, &mut shape);
                    run = TrainRun::after(&self.lanes, forward, &shape, len, c);
                    train.push(cursor.sent(len, start, c, path.arrive_ps));
                    sent += 1;
                }
            }
            if cursor.sent_all() || sent == room || !before_queued(cursor.next_issue, queued) {
                break;
            }
        }
        if let Some(r) = run {
            r.book(
                &mut self.lanes,
                forward,
                &shape,
                flow,
                cursor.next_issue.as_ps(),
            );
        }
        self.train_shape = shape;
        sent
    }

    /// The steps of a burst's write TLPs that land one after another (`run`, each later
    /// than now and before the first event queued), taken at once: each lands at its time,
    /// a step, as [`Core::write_burst`] would land it.
    fn land_run(&mut self, txn: &mut Txn, dest: Destination, run: FlightRun) {
        let last = run.last_at();
        self.took_steps(run.count, last);
        let bytes = run.count * u64::from(run.len);
        self.land_tlps(txn, dest, run.count, run.offset, bytes);
        // A credit came back with each.
        txn.next_issue = txn.next_issue.max(last);
    }

    /// `steps` steps of a burst taken at once, the last at `last` (each later than the one
    /// before), counted as the step loop counts them.
    #[inline(always)]
    fn took_steps(&mut self, steps: u64, last: SimTime) {
        self.counters.events += steps;
        self.burst_steps += steps;
        self.now = last;
        self.shared_now.set(last);
    }

    /// A burst's write TLP from `offset` of `txn`'s buffer, `len` bytes, landed at `dest`.
    #[inline(always)]
    fn land_write(&mut self, txn: &Txn, dest: Destination, offset: u64, len: u64) {
        self.land_tlps(txn, dest, 1, offset, len);
    }

    /// `tlps` of a burst's write TLPs, one after another from `offset` of `txn`'s buffer,
    /// `bytes` in all, landed at `dest`.
    #[inline(always)]
    fn land_tlps(&mut self, txn: &Txn, dest: Destination, tlps: u64, offset: u64, bytes: u64) {
        self.counters.tlp_arrivals += tlps;
        let addr = dest.addr + (offset - dest.offset);
        self.land(txn, dest.host, addr, offset, bytes);
    }

    /// A write TLP of `len` bytes from `offset` in `txn`'s buffer landed at `addr` of
    /// `host`'s memory: its bytes follow the transaction's earlier ones in one copy when
    /// they continue them (see [`Landed`]), else those are copied now.
    #[inline(always)]
    pub(super) fn land(&mut self, txn: &Txn, host: HostId, addr: u64, offset: u64, len: u64) {
        match &mut self.landed {
            Some(l) if l.continued_by(host, addr, offset, len) => l.len += len,
            _ => {
                self.copy_landed(txn);
                self.landed = Some(Landed {
                    host,
                    addr,
                    offset,
                    len,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The times of `p`, one by one.
    fn times(p: &Progression) -> Vec<u64> {
        (0..p.count).map(|i| p.first + i * p.step).collect()
    }

    fn progression() -> impl proptest::strategy::Strategy<Value = Progression> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..60).prop_map(|first| Progression {
                first,
                step: 0,
                count: 1,
            }),
            (0u64..60, 1u64..8, 0u64..12).prop_map(|(first, step, count)| Progression {
                first,
                step,
                count,
            }),
        ]
    }

    /// A train of `lens` parts: the first one TLP leaving at `first_leaving` and landing at
    /// `first_landing`, then parts of `count` TLPs leaving every `leave` and landing every
    /// `land`, each part after the one before.
    fn train(
        first_leaving: u64,
        first_landing: u64,
        rest: &[(u64, u64, u64, u64)],
    ) -> Vec<TrainPart> {
        let mut parts = vec![TrainPart {
            issued: SimTime(first_leaving),
            leave_ps: 0,
            at: SimTime(first_landing),
            land_ps: 0,
            offset: 0,
            len: 256,
            count: 1,
        }];
        for &(gap, leave, land, count) in rest {
            let p = parts[parts.len() - 1];
            let (left, landed) = (
                p.leaving(p.count - 1).as_ps(),
                p.landing(p.count - 1).as_ps(),
            );
            parts.push(TrainPart {
                issued: SimTime(left + gap + 1),
                leave_ps: leave,
                at: SimTime(landed + gap + 1),
                land_ps: land,
                offset: p.offset + p.count * 256,
                len: 256,
                count,
            });
        }
        parts
    }

    proptest::proptest! {
        /// A train's steps are its distinct times after its first leaving, up to its last:
        /// its leavings, the landings of TLPs on their way before it and its own landings by
        /// then, listed one by one (landings and leavings often at one time here).
        #[test]
        fn a_trains_steps_are_its_distinct_times_listed_one_by_one(
            first_landing in 1u64..40,
            rest in proptest::collection::vec((0u64..6, 1u64..6, 1u64..6, 1u64..8), 0..3),
            earlier in proptest::collection::btree_set(1u64..40, 0..4),
        ) {
            let parts = train(0, first_landing, &rest);
            let tail = parts[parts.len() - 1];
            let last = tail.leaving(tail.count - 1);
            // Those on their way before land before the train's own.
            let earlier: Vec<SimTime> = earlier
                .into_iter()
                .filter(|&t| t < first_landing && t <= last.as_ps())
                .map(SimTime)
                .collect();
            let mut listed: Vec<SimTime> = parts
                .iter()
                .flat_map(|p| (0..p.count).map(move |i| p.leaving(i)))
                .skip(1)
                .chain(earlier.iter().copied())
                .chain(
                    parts
                        .iter()
                        .flat_map(|p| (0..p.count).map(move |i| p.landing(i)))
                        .filter(|&t| t <= last),
                )
                .collect();
            listed.sort();
            listed.dedup();
            let before = earlier.iter().map(|&t| earlier_step(t, &parts)).sum();
            proptest::prop_assert_eq!(train_steps(&parts, before, last), listed.len() as u64);
        }

        /// Two progressions (one time, or several of one period, the same period or not)
        /// have as many times in common as their times listed one by one, and each contains
        /// exactly its listed times.
        #[test]
        fn progressions_have_in_common_the_times_they_list_alike(
            a in progression(),
            b in progression(),
        ) {
            let (ta, tb) = (times(&a), times(&b));
            let listed = ta.iter().filter(|t| tb.contains(t)).count() as u64;
            proptest::prop_assert_eq!(a.common(&b), listed);
            proptest::prop_assert_eq!(b.common(&a), listed);
            for t in 0..150 {
                proptest::prop_assert_eq!(a.contains(t), ta.contains(&t), "{}", t);
            }
        }
    }
}
