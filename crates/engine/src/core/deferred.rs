//! A write's last landings, deferred until someone looks.
//!
//! Once a posted write into memory has sent its last TLP, what is left of it is its TLPs
//! landing, each at its own time: bytes written into memory that nothing watches. The step
//! loop takes each landing as an event, and with many flows on the way (thirty clients of
//! one NVMe) each is one, cut from the next by others' events. But a landing nobody
//! watches changes nothing anyone sees until someone reads or writes those bytes, asks
//! whether the write is done, or asks the engine's counters or its clock at the end of a
//! run. So when an event is due before such a write's last landing, its landings are
//! *deferred* ([`Core::defer_landings`]): its transaction is queued once, at its last
//! landing, and whoever looks first lands what is due by then:
//!
//! - a read of memory (a CPU's load, a device's read answered) and a write of it applied at
//!   once (a CPU's store, a posted write landing) land the deferred TLPs due in that range
//!   first ([`Core::settle_range`]): the bytes landed by then are in memory, the later ones
//!   are not; a peek reads them without landing them ([`Core::overlay_deferred`]);
//! - a writer polling its access lands its own ([`Core::settle_txn`]: the access is
//!   finished once all has landed);
//! - the counters count those due by then ([`Core::counters_now`]), and a run that stops at
//!   a deadline lands what is due by then, its clock ending where the step loop's would
//!   ([`Core::settle_to_deadline`]);
//! - a write transaction started onto the bytes of a deferred one, a memory watch armed on
//!   them, or the recording started end the deferral ([`Core::undefer_overlapping`]): the
//!   deferred write's landings due by then land and the rest go step by step again (a
//!   transaction's landings are copied when its steps end, a watch must wake at the
//!   landing it waits for, and the recording keeps each step).
//!
//! The counters count what the step loop would: each landing a TLP arrival and each
//! distinct landing time one event (the last is the queued event itself; the entry a
//! deferral ended early leaves behind is not counted). So the results are the step loop's,
//! bit for bit (`Sim::set_deferred_landings(false)` lands each at its step; a test
//! compares).
//!
//! Invariant: a deferred transaction is a write in its slot that has sent all its TLPs, of
//! one unicast segment into one host's memory, not recorded, that no watch covers and whose
//! bytes no other write on its way covers; its queue entry is at its last landing
//! (`Txn::scheduled`).

use super::{Core, Event, LANDED_BYTES};
use crate::txn::{Segment, Txn, TxnKind};
use smartio_fabric::{HostId, Target};
use smartio_machine::Counters;
use smartio_platform::{SimTime, SparseMemory};

/// A deferred write: its transaction, the host and bytes it lands in, and when its next TLP
/// lands.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u32,
    host: HostId,
    start: u64,
    end: u64,
    next: SimTime,
}

impl Entry {
    /// Whether it lands in any of `start..end` of `host`.
    fn overlaps(&self, host: HostId, start: u64, end: u64) -> bool {
        self.host == host && self.start < end && start < self.end
    }
}

/// The writes whose landings are deferred.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    entries: Vec<Entry>,
    /// Queue entries left behind by a deferral that ended early (a transaction's entry at
    /// its last landing, once it steps again): not counted as events when they come up, as
    /// the step loop never queued them.
    uncounted: Vec<(u32, SimTime)>,
}

impl Deferred {
    /// Whether no write is deferred.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Core {
    /// A watch is armed on `len` bytes of `host`'s memory at `addr`: it wakes at the landing
    /// it waits for, so a deferred write onto those bytes lands step by step again.
    #[inline(always)]
    pub(crate) fn watch_armed(&mut self, host: HostId, addr: u64, len: u64) {
        if !self.deferred.is_empty() {
            self.undefer_overlapping(Some((host, addr, addr.saturating_add(len))));
        }
        if self.is_ahead() {
            self.ahead_touched(host, addr, len);
        }
    }

    /// Defers the landings of `txn` (transaction `id`, a write that has sent all its TLPs,
    /// out of its slot), if it may be deferred and an event is due (`queued`) before its
    /// last landing (else its landings go on as one burst anyway): answers the time of its
    /// last landing, where its one queue entry goes.
    #[inline(never)]
    pub(super) fn defer_landings(
        &mut self,
        id: u32,
        txn: &mut Txn,
        queued: Option<SimTime>,
    ) -> Option<SimTime> {
        let last = txn.requests.last_at()?;
        if queued.is_none_or(|q| q > last) || txn.requests.next() == last {
            return None;
        }
        let dest = self.burst_destination(txn)?;
        let (start, end) = (dest.addr, dest.addr + txn.segments[0].len);
        // Another write onto these bytes lands its own in order with them, step by step (a
        // transaction's landings are copied when its steps end): none may be on its way (a
        // deferred one is among them, its transaction in its slot). Looked for only when
        // another write lands in this host at all.
        let others = self.writes_into[dest.host.index()] > 1;
        let other_write = others
            && self.txns.iter().flatten().any(|t| {
                t.kind == TxnKind::Write
                    && !t.finished()
                    && t.segments
                        .iter()
                        .any(|s| lands_in(s, |h, a, b| h == dest.host && a < end && start < b))
            });
        if other_write {
            return None;
        }
        txn.deferred = true;
        self.deferred.entries.push(Entry {
            id,
            host: dest.host,
            start,
            end,
            next: txn.requests.next(),
        });
        Some(last)
    }

    /// Whether a deferred landing may fall in `len` bytes of `host`'s memory at `addr`.
    pub(crate) fn deferred_over(&self, host: HostId, addr: u64, len: u64) -> bool {
        let end = addr.saturating_add(len);
        self.deferred
            .entries
            .iter()
            .any(|e| e.overlaps(host, addr, end))
    }

    /// Puts into `buf`, `buf.len()` bytes of `host`'s memory at `addr` as read from it, the
    /// deferred landings due by now there (without landing them: the core may be shared), so
    /// that it holds those bytes as they are now.
    pub(crate) fn overlay_deferred(&self, host: HostId, addr: u64, buf: &mut [u8]) {
        let end = addr.saturating_add(buf.len() as u64);
        for e in &self.deferred.entries {
            if !e.overlaps(host, addr, end) {
                continue;
            }
            let Some(txn) = self.txns[e.id as usize].as_deref() else {
                continue;
            };
            let seg = &txn.segments[0];
            let Target::Memory { addr: base, .. } = seg.target else {
                continue;
            };
            for r in txn.requests.iter().take_while(|r| r.at <= self.now) {
                // The TLP's bytes in memory, and those of them `buf` holds.
                let at = base.get() + (r.offset - seg.offset);
                let (lo, hi) = (at.max(addr), (at + u64::from(r.len)).min(end));
                if lo >= hi {
                    continue;
                }
                let to = &mut buf[(lo - addr) as usize..(hi - addr) as usize];
                if txn.zeroes {
                    to.fill(0);
                } else {
                    let from = (r.offset + (lo - at)) as usize;
                    to.copy_from_slice(&txn.data[from..from + to.len()]);
                }
            }
        }
    }

    /// The counters as they are now: the deferred landings due by now counted as they will
    /// be when they land (without landing them: the core may be shared).
    pub(crate) fn counters_now(&self) -> Counters {
        let mut counters = self.counters;
        for e in self.deferred.entries.iter().filter(|e| e.next <= self.now) {
            let Some(txn) = self.txns[e.id as usize].as_deref() else {
                continue;
            };
            // Counted as `land_due` will count them.
            let mut tally = Tally::of(txn);
            for r in txn.requests.iter().take_while(|r| r.at <= self.now) {
                tally.add(r.at, r.at, 1, r.offset, u64::from(r.len));
            }
            counters.tlp_arrivals += tally.tlps;
            counters.events += tally.steps;
        }
        counters
    }

    /// Lands the deferred TLPs due by now that land in `len` bytes of `host`'s memory at
    /// `addr`: before they are read, or written at once.
    #[inline(always)]
    pub(crate) fn settle_range(&mut self, host: HostId, addr: u64, len: u64) {
        if !self.deferred.is_empty() {
            let range = (host, addr, addr.saturating_add(len));
            self.settle_through(self.now, Some(range));
        }
    }

    /// Lands the deferred TLPs of transaction `id` due by now, if it is deferred (before its
    /// writer asks whether it is finished).
    #[inline(always)]
    pub(crate) fn settle_txn(&mut self, id: u32) {
        if !self.deferred.is_empty() && self.txn(id).is_some_and(|t| t.deferred) {
            self.settle_entries(self.now, |e| e.id == id);
        }
    }

    /// Lands the deferred TLPs due by `through` that land in `range` (host, first byte, end;
    /// all without one); answers the time of the last one landed, if any.
    #[inline(never)]
    fn settle_through(
        &mut self,
        through: SimTime,
        range: Option<(HostId, u64, u64)>,
    ) -> Option<SimTime> {
        self.settle_entries(through, |e| {
            range.is_none_or(|(host, start, end)| e.overlaps(host, start, end))
        })
    }

    /// Lands the deferred TLPs due by `through` of the entries `which` picks; answers the
    /// time of the last one landed, if any.
    #[inline(always)]
    fn settle_entries(
        &mut self,
        through: SimTime,
        which: impl Fn(&Entry) -> bool,
    ) -> Option<SimTime> {
        let mut latest = None;
        for e in self.deferred.entries.iter_mut() {
            if e.next > through || !which(e) {
                continue;
            }
            let Some(txn) = self.txns[e.id as usize].as_deref_mut() else {
                continue;
            };
            debug_assert!(txn.deferred, "a deferred write's slot holds it");
            let counts = (&mut self.counters, &mut self.deferred_steps);
            let landed = land_due(txn, through, &mut self.memory, counts);
            latest = latest.max(landed);
            e.next = txn.requests.next();
        }
        latest
    }

    /// A run stopping at `deadline` with writes deferred: what is due by then lands, and the
    /// clock moves to the last landing if that came after the last event (where the step
    /// loop's clock would be).
    pub(crate) fn settle_to_deadline(&mut self, deadline: SimTime) {
        if self.deferred.is_empty() {
            return;
        }
        if let Some(last) = self.settle_through(deadline, None) {
            if last > self.now {
                self.now = last;
                self.shared_now.set(last);
            }
        }
    }

    /// A queue entry of transaction `id` at `at` that has nothing to do has come up: if a
    /// deferral left one behind at that time, it is not counted. (When the transaction's
    /// own step is at that time too, whichever entry comes first takes it and the other
    /// is the one not counted.)
    #[inline(always)]
    pub(super) fn uncounted_entry(&mut self, id: u32, at: SimTime) {
        if self.deferred.uncounted.is_empty() {
            return;
        }
        if let Some(i) = self.deferred.uncounted.iter().position(|&u| u == (id, at)) {
            self.deferred.uncounted.swap_remove(i);
            self.counters.events -= 1;
        }
    }

    /// The deferred `txn` (transaction `id`, out of its slot) is at its last landing `at`:
    /// the landings before it land, and it steps as any transaction from here on.
    #[inline(never)]
    pub(super) fn end_deferral(&mut self, id: u32, txn: &mut Txn, at: SimTime) {
        txn.deferred = false;
        self.forget_deferral(id);
        if let Some(before) = at.as_ps().checked_sub(1) {
            let counts = (&mut self.counters, &mut self.deferred_steps);
            land_due(txn, SimTime(before), &mut self.memory, counts);
        }
    }

    /// Forgets the deferral of transaction `id`, which leaves its slot.
    pub(super) fn forget_deferral(&mut self, id: u32) {
        self.deferred.entries.retain(|e| e.id != id);
    }

    /// A write into `host`'s `start..end`, a watch on it or the recording (all hosts, all
    /// bytes: `None`) begins now: every deferred write landing there lands what is due and
    /// steps as any transaction again.
    #[cold]
    pub(crate) fn undefer_overlapping(&mut self, range: Option<(HostId, u64, u64)>) {
        let now = self.now;
        self.settle_through(now, range);
        let mut i = 0;
        while i < self.deferred.entries.len() {
            let e = self.deferred.entries[i];
            if range.is_some_and(|(host, start, end)| !e.overlaps(host, start, end)) {
                i += 1;
                continue;
            }
            self.deferred.entries.swap_remove(i);
            let Some(txn) = self.txns[e.id as usize].as_deref_mut() else {
                continue;
            };
            txn.deferred = false;
            let next = txn.requests.next();
            let Some(last) = txn.scheduled else { continue };
            debug_assert!(next > now, "what was due has landed");
            if next < last {
                txn.scheduled = Some(next);
                self.deferred.uncounted.push((e.id, last));
                self.schedule(next, Event::Txn(e.id));
            }
        }
    }

    /// Counts a write transaction whose route is `segments` into (`add`) or out of
    /// [`Core::writes_into`]: once per memory range it lands in, by host.
    #[inline(always)]
    pub(super) fn count_writes_into(&mut self, segments: &[Segment], add: bool) {
        for seg in segments {
            lands_in(seg, |host, _, _| {
                let n = &mut self.writes_into[host.index()];
                *n = if add { *n + 1 } else { *n - 1 };
                false
            });
        }
    }

    /// Ends the deferral of every write that lands in a memory target of `segments`, the
    /// route of a write starting now.
    #[cold]
    pub(super) fn undefer_segments(&mut self, segments: &[Segment]) {
        for seg in segments {
            lands_in(seg, |host, start, end| {
                self.undefer_overlapping(Some((host, start, end)));
                false
            });
        }
    }
}

/// Asks `f` of each range of memory `seg` lands in (its target's, or its copies' for a
/// multicast write) as host, first byte and end; whether it answered true for any.
fn lands_in(seg: &Segment, mut f: impl FnMut(HostId, u64, u64) -> bool) -> bool {
    let mut range = |target: &Target| match *target {
        Target::Memory { host, addr } => f(host, addr.get(), addr.get().saturating_add(seg.len)),
        _ => false,
    };
    range(&seg.target) | seg.fanout.iter().fold(false, |any, (t, _)| range(t) | any)
}

/// Lands the TLPs of `txn`, a deferred write, due by `through` into `memory`, counting each
/// as an arrival and each distinct time but that of its queue entry as an event (and a
/// deferred step, the second of `counts`); answers the time of the last one landed, if any.
/// Back-to-back ones are copied together (a train's rest, in closed form, at once).
fn land_due(
    txn: &mut Txn,
    through: SimTime,
    memory: &mut [SparseMemory],
    (counters, deferred_steps): (&mut Counters, &mut u64),
) -> Option<SimTime> {
    debug_assert_eq!(txn.kind, TxnKind::Write);
    let Target::Memory { host, addr } = txn.segments[0].target else {
        return None;
    };
    let memory = &mut memory[host.index()];
    // The transaction's offset `offset` lands at `at`.
    let at = |offset: u64| addr.get() + (offset - txn.segments[0].offset);
    let copy = |txn: &Txn, memory: &mut SparseMemory, (offset, len): (u64, u64)| {
        // A page at a time (see `LANDED_BYTES`).
        let mut done = 0;
        while done < len {
            let n = (len - done).min(LANDED_BYTES);
            txn.land_in(memory, at(offset + done), offset + done, n);
            done += n;
        }
    };
    let mut tally = Tally::of(txn);
    // The TLPs on their way one by one (each at its own time, in order, most often each
    // continuing the last in the transaction), then the run after them (a train's rest).
    let due = txn.requests.due(through);
    for r in due {
        if let Some(p) = tally.add(r.at, r.at, 1, r.offset, u64::from(r.len)) {
            copy(txn, memory, p);
        }
    }
    let taken = due.len();
    txn.requests.skip(taken);
    let after = SimTime(through.as_ps().saturating_add(1));
    if let Some(run) = txn.requests.take_run_before(Some(after)) {
        let bytes = run.count * u64::from(run.len);
        if let Some(p) = tally.add(run.at, run.last_at(), run.count, run.offset, bytes) {
            copy(txn, memory, p);
        }
    }
    if let Some(p) = tally.piece {
        copy(txn, memory, p);
    }
    counters.tlp_arrivals += tally.tlps;
    counters.events += tally.steps;
    *deferred_steps += tally.steps;
    tally.last
}

/// What [`land_due`] has taken so far: the TLPs, the steps they count (each distinct time
/// but that of the transaction's queue entry, `queued`), the time of the last one, and the
/// bytes landed back to back not copied yet (their offset in the transaction, length).
struct Tally {
    queued: Option<SimTime>,
    last: Option<SimTime>,
    steps: u64,
    tlps: u64,
    piece: Option<(u64, u64)>,
}

impl Tally {
    /// Nothing taken yet of `txn`, a deferred write.
    fn of(txn: &Txn) -> Tally {
        Tally {
            queued: txn.scheduled,
            last: None,
            steps: 0,
            tlps: 0,
            piece: None,
        }
    }

    /// `count` TLPs landing from `first` to `end` a period apart (each at its own time),
    /// `bytes` in all from `offset`: counted, and their bytes added to the piece; answers
    /// the piece to copy first when they do not continue it.
    #[inline(always)]
    fn add(
        &mut self,
        first: SimTime,
        end: SimTime,
        count: u64,
        offset: u64,
        bytes: u64,
    ) -> Option<(u64, u64)> {
        self.tlps += count;
        // One step each: not the one the first shares with the last landed, nor the queued.
        self.steps += count
            - u64::from(self.last == Some(first))
            - u64::from(self.queued == Some(end) && (count > 1 || self.last != Some(end)));
        self.last = Some(end);
        match self.piece {
            Some((o, n)) if o + n == offset => {
                self.piece = Some((o, n + bytes));
                None
            }
            done => {
                self.piece = Some((offset, bytes));
                done
            }
        }
    }
}
