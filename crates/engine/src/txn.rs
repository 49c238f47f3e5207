//! Transactions in flight: a posted write stream or a non-posted read, split into TLPs.
//!
//! A transaction keeps two queues of TLPs on their way (requests towards the completer,
//! completions back), each in arrival order, and an issue cursor. The engine asks it for its
//! next event time and steps it; between steps nothing about it changes.

use crate::timing::{draw_chips, HopCost};
use smartio_fabric::{Requester, Target};
use smartio_platform::{AccessError, SimTime, SparseMemory, Stream};
use std::rc::Rc;
use std::task::Waker;

/// A costed forward and backward path to one target.
#[derive(Debug)]
pub struct CostedPath {
    /// Requester to target.
    pub forward: Vec<HopCost>,
    /// Target back to requester (completions).
    pub backward: Vec<HopCost>,
    /// Added when a write lands or a read request reaches the target (root complex).
    pub arrive_ps: u64,
    /// Added before a read is answered (DRAM access, device register read).
    pub read_ps: u64,
    /// Added when a completion reaches the requester (root complex back to the core).
    pub return_ps: u64,
    /// Largest read request on this path: the MRRS, or what a root complex forwarding the
    /// request to another port cuts it into.
    pub max_read_request: u64,
    /// The host whose root complex forwards read requests on this path to another port
    /// (and cuts them): those requests hold one of that root complex's slots for forwarded
    /// non-posted requests while they are open, not one of the requester's tags.
    pub forwarded_by: Option<usize>,
}

/// A contiguous piece of a transaction that lands in one target.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Offset of the piece within the transaction.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Bus address of the first byte (decides TLP boundaries).
    pub bus_addr: u64,
    /// Where the first byte lands.
    pub target: Target,
    /// The path.
    pub path: Rc<CostedPath>,
    /// A multicast write's copies: where each lands and its path (empty for unicast).
    pub fanout: Rc<[(Target, Rc<CostedPath>)]>,
    /// The IOMMU translations of this piece (each TLP looks up those IOMMUs' IOTLBs).
    pub translations: Rc<[smartio_fabric::Translation]>,
}

impl Segment {
    /// The target address `delta` bytes into this segment.
    pub fn target_at(&self, delta: u64) -> Target {
        shift(self.target, delta)
    }

    /// Where copy `copy` lands `delta` bytes into the segment (the segment's own target for a
    /// unicast segment).
    pub fn copy_target_at(&self, copy: u32, delta: u64) -> Target {
        match self.fanout.get(copy as usize) {
            Some((t, _)) => shift(*t, delta),
            None => self.target_at(delta),
        }
    }
}

/// `target` moved `delta` bytes on.
fn shift(target: Target, delta: u64) -> Target {
    match target {
        Target::Memory { host, addr } => Target::Memory {
            host,
            addr: addr.offset(delta),
        },
        Target::Bar {
            endpoint,
            bar,
            offset,
        } => Target::Bar {
            endpoint,
            bar,
            offset: offset + delta,
        },
        Target::Interrupt { host, addr } => Target::Interrupt {
            host,
            addr: addr.offset(delta),
        },
        Target::Multicast { group, offset } => Target::Multicast {
            group,
            offset: offset + delta,
        },
    }
}

/// A TLP on its way.
#[derive(Debug, Clone, Copy)]
pub struct InFlight {
    /// When it is fully received.
    pub at: SimTime,
    /// Segment index.
    pub segment: u32,
    /// Offset within the transaction.
    pub offset: u64,
    /// Payload length (for read requests: the length asked).
    pub len: u32,
    /// For completions: the last one of its request frees a tag.
    pub last: bool,
    /// For multicast writes: which copy (index into the segment's fanout).
    pub copy: u32,
    /// The recorded step that brings it (`record::NONE` unless recording).
    pub step: crate::record::StepId,
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnKind {
    /// Posted memory write.
    Write,
    /// Non-posted memory read.
    Read,
}

/// One transaction.
#[derive(Debug)]
pub struct Txn {
    /// Read or write.
    pub kind: TxnKind,
    /// Who issued it.
    pub requester: Requester,
    /// Where it lands, in order (shared with the route cache).
    pub segments: Rc<[Segment]>,
    /// Write data, or the read buffer being filled.
    pub data: Vec<u8>,
    /// Whether a write's bytes are all zeroes, kept in no buffer (`data` empty): its TLPs
    /// land by zeroing memory.
    pub zeroes: bool,
    /// Next segment to issue from.
    pub issue_segment: usize,
    /// Bytes of that segment already issued.
    pub issue_offset: u64,
    /// Earliest time the next TLP may leave the requester.
    pub next_issue: SimTime,
    /// Writes and read requests on their way to the target.
    pub requests: Flights,
    /// Completions on their way back.
    pub completions: Flights,
    /// Read requests waiting for a free tag.
    pub waiting_for_tag: bool,
    /// The task waiting on it.
    pub waker: Option<Waker>,
    /// Set when the requester's side is finished.
    pub result: Option<Result<(), AccessError>>,
    /// Whether the event queue holds an entry for it.
    pub scheduled: Option<SimTime>,
    /// The requester no longer waits (a posted write still travelling); drop it when done.
    pub detached: bool,
    /// Whether its landings are deferred (see `core::deferred`).
    pub deferred: bool,
    /// Posted TLPs that may be on their way at once (flow-control credits); reads use tags.
    pub window: usize,
    /// While recording: the step that let the next TLP leave (what set `next_issue`).
    pub gate: crate::record::StepId,
    /// While recording: what the requester said it was doing when it started this.
    pub label: Option<&'static str>,
    /// While recording: what let the last TLP issued leave (a writer goes on after it).
    pub issued_after: crate::record::StepId,
    /// Its number among the transactions started (wrapping): an access's ticket names its
    /// transaction by slot and this (`ops::txn_ticket`).
    pub serial: u32,
    /// The latency of each chip on the paths its TLPs have crossed.
    pub chips: TxnChips,
}

/// The latency of each chip on the paths a transaction's TLPs cross, drawn when its first
/// TLP crosses a path (`timing::draw_chips`): all its TLPs along one path cross each chip with the
/// same latency.
///
/// Drawn at the first crossing, not when the transaction starts, so a transaction draws as
/// its TLPs go, wherever they are sent from (the step loop, a burst, a train): the same draws
/// in the same order whichever sends them.
#[derive(Debug, Default)]
pub struct TxnChips {
    /// The latencies, path after path.
    ps: Vec<u64>,
    /// Which path each run of `ps` is for (its segment, shifted left, and 1 for the way
    /// back), and where the run starts.
    paths: Vec<(u32, u32)>,
}

impl TxnChips {
    /// Forgets every path's latencies (a new transaction).
    pub fn clear(&mut self) {
        self.ps.clear();
        self.paths.clear();
    }

    /// The latencies of `path`'s chips, the way there (or back, `back`) of segment
    /// `segment`: drawn from `stream` when its first TLP crosses it, the same ones after.
    #[inline(always)]
    pub fn of(
        &mut self,
        segment: u32,
        back: bool,
        path: &[HopCost],
        stream: &mut Stream,
    ) -> &[u64] {
        let key = (segment << 1) | u32::from(back);
        // Most transactions cross one path: it is the first asked. A transaction of many
        // segments crosses them in order: the one asked is among the last drawn.
        let start = match self.paths.first() {
            Some(&(first, start)) if first == key => start as usize,
            _ => match self.paths.iter().rev().find(|p| p.0 == key) {
                Some(&(_, start)) => start as usize,
                None => self.draw(key, path, stream),
            },
        };
        let chips = path.len().saturating_sub(1);
        &self.ps[start..start + chips]
    }

    /// Draws `path`'s latencies for `key`; where they start in `ps`.
    #[inline(never)]
    fn draw(&mut self, key: u32, path: &[HopCost], stream: &mut Stream) -> usize {
        let start = self.ps.len();
        draw_chips(path, stream, &mut self.ps);
        self.paths.push((key, start as u32));
        start
    }
}

impl Txn {
    /// Whether all of it has been issued.
    pub fn issued_all(&self) -> bool {
        self.issue_segment >= self.segments.len()
    }

    /// Whether it has TLPs left to issue and no tag to wait for first (the window aside).
    #[inline]
    pub fn can_issue_ever(&self) -> bool {
        !self.issued_all() && !self.waiting_for_tag
    }

    /// Whether another TLP may be issued once its time comes.
    pub fn can_issue(&self) -> bool {
        self.can_issue_ever() && self.requests.len() < self.window
    }

    /// Whether it has nothing left to do.
    pub fn finished(&self) -> bool {
        self.issued_all() && self.requests.is_empty() && self.completions.is_empty()
    }

    /// The next time it has something to do, if any.
    #[inline]
    pub fn next_time(&self) -> Option<SimTime> {
        let next = self.next_step(self.can_issue());
        (next != SimTime::NEVER).then_some(next)
    }

    /// When its next TLP arrives, or its next one leaves if `may_issue` (what
    /// [`Txn::can_issue`] answers, or a burst that keeps the answer); [`SimTime::NEVER`]
    /// when neither.
    #[inline(always)]
    pub fn next_step(&self, may_issue: bool) -> SimTime {
        let arriving = self.requests.next().min(self.completions.next());
        if may_issue {
            arriving.min(self.next_issue)
        } else {
            arriving
        }
    }

    /// Lands `len` of a write's bytes from `offset` (zeroes for a write of them: see
    /// [`Txn::zeroes`]) at `addr` of `memory`.
    #[inline(always)]
    pub fn land_in(&self, memory: &mut SparseMemory, addr: u64, offset: u64, len: u64) {
        if self.zeroes {
            memory.zero(addr, len);
        } else {
            memory.write(addr, &self.data[offset as usize..(offset + len) as usize]);
        }
    }

    /// Moves the issue cursor past a TLP of `len` bytes just sent (to the next segment once
    /// this one is all sent).
    #[inline(always)]
    pub fn issued(&mut self, len: u64) {
        self.issue_offset += len;
        if self.issue_offset >= self.segments[self.issue_segment].len {
            self.issue_segment += 1;
            self.issue_offset = 0;
        }
    }
}

/// Write TLPs of one segment that arrive one after another a fixed time apart, one piece of
/// the transaction after another (the rest of a train: `core::burst`), kept in closed form
/// by [`Flights`] until taken. None when `count` is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlightRun {
    /// When the first arrives, and the time from one arrival to the next (not 0 for more
    /// than one).
    pub at: SimTime,
    pub period: u64,
    /// The first one's offset in the transaction, and each one's length.
    pub offset: u64,
    pub len: u32,
    pub count: u64,
}

impl FlightRun {
    /// Its first TLP, as [`Flights`] holds one (a unicast write of segment 0).
    #[inline(always)]
    pub fn first(&self) -> InFlight {
        InFlight {
            at: self.at,
            segment: 0,
            offset: self.offset,
            len: self.len,
            last: false,
            copy: 0,
            step: crate::record::NONE,
        }
    }

    /// When its last TLP arrives.
    #[inline(always)]
    pub fn last_at(&self) -> SimTime {
        SimTime(self.at.as_ps() + (self.count - 1) * self.period)
    }

    /// Its first `k` TLPs, and itself without them.
    #[inline(always)]
    fn split(self, k: u64) -> (FlightRun, FlightRun) {
        let rest = FlightRun {
            at: SimTime(self.at.as_ps() + k * self.period),
            offset: self.offset + k * u64::from(self.len),
            count: self.count - k,
            ..self
        };
        (FlightRun { count: k, ..self }, rest)
    }
}

/// TLPs on their way, in arrival order (equal times in the order inserted).
///
/// Invariant: `items[head..]` are the TLPs on their way, ordered by `at`, then the `run`'s
/// (each arriving after every one of `items`); `items[..head]` have arrived and are dropped
/// once all have (so `items` is empty when none of them is on its way), or on an append
/// once they are most of `items` (a long stream's queue may never empty), so taking the
/// first is an index step and the usual insert an append.
#[derive(Debug)]
pub struct Flights {
    items: Vec<InFlight>,
    head: usize,
    /// TLPs after those of `items`, in closed form (see [`Flights::set_run`]).
    run: FlightRun,
    /// When the first arrives (`items[head].at`, else the run's first; [`SimTime::NEVER`]
    /// when none is on its way), kept apart: it is asked at every step.
    next: SimTime,
}

impl Default for Flights {
    fn default() -> Flights {
        Flights {
            items: Vec::new(),
            head: 0,
            run: FlightRun::default(),
            next: SimTime::NEVER,
        }
    }
}

impl Flights {
    /// The first to arrive.
    #[cfg(test)]
    fn front(&self) -> Option<InFlight> {
        match self.items.get(self.head) {
            Some(&first) => Some(first),
            None => (self.run.count > 0).then(|| self.run.first()),
        }
    }

    /// When the run's first arrives, [`SimTime::NEVER`] without one.
    #[inline(always)]
    fn run_next(&self) -> SimTime {
        if self.run.count > 0 {
            self.run.at
        } else {
            SimTime::NEVER
        }
    }

    /// Adds `run` (`count` at least 2) after every TLP on its way (it arrives after them,
    /// as a train's rest does): kept in closed form while it is the only run and arrives
    /// last, else one by one.
    pub fn set_run(&mut self, run: FlightRun) {
        let last = self.items[self.head..].last().map(|l| l.at);
        if self.run.count > 0 || last.is_some_and(|l| l > run.at) {
            self.spill_run();
            for i in 0..run.count {
                self.insert(run.split(i).1.first());
            }
            return;
        }
        self.run = run;
        if last.is_none() {
            self.next = run.at;
        }
    }

    /// Takes the run's first TLPs, those arriving before `queued` (all without it), if no
    /// other TLP is on its way before them: their run.
    #[inline]
    pub fn take_run_before(&mut self, queued: Option<SimTime>) -> Option<FlightRun> {
        if self.run.count == 0 || self.head != self.items.len() {
            return None;
        }
        let k = match queued {
            None => self.run.count,
            Some(q) if q > self.run.at => {
                ((q.as_ps() - 1 - self.run.at.as_ps()) / self.run.period.max(1) + 1)
                    .min(self.run.count)
            }
            Some(_) => return None,
        };
        let (taken, rest) = self.run.split(k);
        self.run = rest;
        self.next = self.run_next();
        Some(taken)
    }

    /// Makes the run's TLPs items (before another TLP is inserted).
    #[cold]
    fn spill_run(&mut self) {
        let run = std::mem::take(&mut self.run);
        self.items
            .extend((0..run.count).map(|i| run.split(i).1.first()));
        if self.head == self.items.len() {
            self.next = SimTime::NEVER;
        } else {
            self.next = self.items[self.head].at;
        }
    }

    /// When the last arrives, if any is on its way.
    pub fn last_at(&self) -> Option<SimTime> {
        if self.run.count > 0 {
            Some(self.run.last_at())
        } else {
            self.items[self.head..].last().map(|l| l.at)
        }
    }

    /// When the first arrives, [`SimTime::NEVER`] when none is on its way (a TLP arriving
    /// then would never be taken anyway).
    #[inline]
    pub fn next(&self) -> SimTime {
        self.next
    }

    /// Those arrived by `through` before the run (one by one), in arrival order: still on
    /// their way until [`Flights::skip`] takes them.
    #[inline]
    pub fn due(&self, through: SimTime) -> &[InFlight] {
        let waiting = &self.items[self.head..];
        let n = waiting.iter().take_while(|r| r.at <= through).count();
        &waiting[..n]
    }

    /// Takes the first `n` of those one by one (what [`Flights::due`] answered, or fewer).
    #[inline]
    pub fn skip(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let head = self.head + n;
        debug_assert!(head <= self.items.len());
        if head == self.items.len() {
            self.items.clear();
            self.head = 0;
            self.next = self.run_next();
        } else {
            self.head = head;
            self.next = self.items[head].at;
        }
    }

    /// Takes the first to arrive if it has arrived by `now`.
    #[inline]
    pub fn pop_due(&mut self, now: SimTime) -> Option<InFlight> {
        if self.next <= now {
            self.pop_front()
        } else {
            None
        }
    }

    /// Takes the first to arrive.
    #[inline]
    pub fn pop_front(&mut self) -> Option<InFlight> {
        let Some(&first) = self.items.get(self.head) else {
            return self.pop_run();
        };
        self.head += 1;
        if self.head == self.items.len() {
            self.items.clear();
            self.head = 0;
            self.next = self.run_next();
        } else {
            self.next = self.items[self.head].at;
        }
        Some(first)
    }

    /// Takes the run's first TLP, if it has one.
    #[inline]
    fn pop_run(&mut self) -> Option<InFlight> {
        if self.run.count == 0 {
            return None;
        }
        let first = self.run.first();
        self.run = self.run.split(1).1;
        self.next = self.run_next();
        Some(first)
    }

    /// How many are on their way.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len() - self.head + self.run.count as usize
    }

    /// Whether none is on its way.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.items.len() && self.run.count == 0
    }

    /// Forgets them all (keeps the capacity).
    pub fn clear(&mut self) {
        self.items.clear();
        self.head = 0;
        self.run = FlightRun::default();
        self.next = SimTime::NEVER;
    }

    /// Inserts keeping arrival order (nearly always an append).
    #[inline(always)]
    pub fn insert(&mut self, item: InFlight) {
        if self.run.count > 0 {
            self.spill_run();
        }
        match self.items.last() {
            Some(last) if last.at > item.at => self.insert_before_later(item),
            Some(_) => {
                // A long stream may never drain: drop the arrived ones once they are most.
                if self.head >= 64 && self.head * 2 >= self.items.len() {
                    self.items.drain(..self.head);
                    self.head = 0;
                }
                self.items.push(item)
            }
            None => {
                self.next = item.at;
                self.items.push(item)
            }
        }
    }

    /// Adds a TLP on its way, given as a run of one at the period its own run goes on at
    /// (a train's TLPs leaving one by one): it extends the run when it follows it there (no
    /// item kept), starts it when nothing on its way arrives later, else is inserted.
    #[inline]
    pub fn push_following(&mut self, tlp: FlightRun) {
        debug_assert_eq!(tlp.count, 1, "one TLP");
        let run = &mut self.run;
        if run.count > 0 {
            if run.period > 0
                && run.period == tlp.period
                && run.len == tlp.len
                && run.at.as_ps() + run.count * run.period == tlp.at.as_ps()
                && run.offset + run.count * u64::from(run.len) == tlp.offset
            {
                run.count += 1;
                return;
            }
        } else {
            match self.items[self.head..].last() {
                None => {
                    self.run = tlp;
                    self.next = tlp.at;
                    return;
                }
                Some(last) if last.at <= tlp.at => {
                    self.run = tlp;
                    return;
                }
                Some(_) => {}
            }
        }
        self.insert(tlp.first());
    }

    /// [`Flights::insert`] when the item arrives before the last one queued.
    #[cold]
    fn insert_before_later(&mut self, item: InFlight) {
        let pos = self.items[self.head..]
            .iter()
            .rposition(|q| q.at <= item.at)
            .map_or(self.head, |p| self.head + p + 1);
        self.items.insert(pos, item);
        self.next = self.items[self.head].at;
    }

    /// Those on their way, in order.
    pub fn iter(&self) -> impl Iterator<Item = InFlight> + '_ {
        let run = self.run;
        self.items[self.head..]
            .iter()
            .copied()
            .chain((0..run.count).map(move |i| run.split(i).1.first()))
    }
}

/// Length of the next TLP from `addr` given `remaining` bytes, a size limit and 4 KiB
/// boundaries (a TLP never crosses one).
#[inline]
pub fn next_chunk(addr: u64, remaining: u64, limit: u64) -> u64 {
    let to_boundary = 4096 - (addr % 4096);
    // PCIe's sizes are powers of two (a calibration may name others): a mask, not a division.
    let past_limit = if limit.is_power_of_two() {
        addr & (limit - 1)
    } else {
        addr % limit
    };
    remaining.min(to_boundary).min(limit - past_limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_platform::Cause;

    /// A path of `chips` chips of 100 ± 10 ns (and its last hop, to the final node).
    fn path(chips: usize) -> Vec<HopCost> {
        vec![crate::timing::chip_hop(100_000, 10_000); chips + 1]
    }

    /// A transaction draws a path's latencies at its first crossing, one per chip, and gives
    /// the same ones for every later TLP along it; each path (segment and way) its own, in
    /// the order first crossed; a new transaction draws anew.
    #[test]
    fn a_transactions_tlps_cross_a_path_with_the_latencies_drawn_at_its_first_crossing() {
        let (there, back) = (path(3), path(2));
        let mut stream = Stream::new(1, Cause::Chip, 0);
        let mut chips = TxnChips::default();
        let first = chips.of(0, false, &there, &mut stream).to_vec();
        assert_eq!(first.len(), 3);
        assert!(
            first.iter().all(|ps| (90_000..=110_000).contains(ps)),
            "{first:?}"
        );
        // The stream moved on by exactly those three draws.
        let mut expected = Stream::new(1, Cause::Chip, 0);
        let mut drawn = Vec::new();
        crate::timing::draw_chips(&there, &mut expected, &mut drawn);
        assert_eq!(drawn, first);
        for _ in 0..5 {
            assert_eq!(chips.of(0, false, &there, &mut stream), &first[..]);
        }
        let returning = chips.of(0, true, &back, &mut stream).to_vec();
        let second_segment = chips.of(1, false, &there, &mut stream).to_vec();
        let mut next = Vec::new();
        crate::timing::draw_chips(&back, &mut expected, &mut next);
        assert_eq!(next, returning, "the way back: the next draws");
        next.clear();
        crate::timing::draw_chips(&there, &mut expected, &mut next);
        assert_eq!(next, second_segment, "segment 1: the draws after");
        assert_eq!(chips.of(0, true, &back, &mut stream), &returning[..]);
        assert_eq!(chips.of(0, false, &there, &mut stream), &first[..]);
        chips.clear();
        let anew = chips.of(0, false, &there, &mut stream).to_vec();
        next.clear();
        crate::timing::draw_chips(&there, &mut expected, &mut next);
        assert_eq!(anew, next, "a new transaction draws again");
    }

    #[test]
    fn tlps_queue_in_arrival_order_and_equal_times_keep_their_issue_order() {
        let tlp = |at: u64, offset: u64| InFlight {
            at: SimTime(at),
            segment: 0,
            offset,
            len: 0,
            last: false,
            copy: 0,
            step: crate::record::NONE,
        };
        let mut q = Flights::default();
        for (at, offset) in [(10, 0), (30, 1), (20, 2), (30, 3), (5, 4), (20, 5)] {
            q.insert(tlp(at, offset));
        }
        let got: Vec<(u64, u64)> = q.iter().map(|t| (t.at.0, t.offset)).collect();
        assert_eq!(got, [(5, 4), (10, 0), (20, 2), (20, 5), (30, 1), (30, 3)]);
        // Arrived ones are gone; a later insert earlier than the rest goes before them.
        assert_eq!(q.pop_front().map(|t| t.offset), Some(4));
        assert_eq!(q.pop_front().map(|t| t.offset), Some(0));
        q.insert(tlp(15, 6));
        let got: Vec<u64> = q.iter().map(|t| t.offset).collect();
        assert_eq!(got, [6, 2, 5, 1, 3]);
        assert_eq!(q.len(), 5);
        while q.pop_front().is_some() {}
        assert!(q.is_empty());
        q.insert(tlp(1, 7));
        assert_eq!(q.front().map(|t| t.offset), Some(7));
        assert_eq!(q.next(), SimTime(1));
        assert!(q.pop_due(SimTime(0)).is_none(), "not yet arrived");
        assert_eq!(q.pop_due(SimTime(1)).map(|t| t.offset), Some(7));
        assert_eq!(q.next(), SimTime::NEVER, "none on its way");
    }

    /// A unicast write TLP of 100 bytes of segment 0 at `offset`, arriving at `at`.
    fn tlp(at: u64, offset: u64) -> InFlight {
        InFlight {
            at: SimTime(at),
            segment: 0,
            offset,
            len: 100,
            last: false,
            copy: 0,
            step: crate::record::NONE,
        }
    }

    /// Those due by a time are the first ones on their way by then, one by one (the run
    /// after them is taken apart), and skipping takes them as popping would.
    #[test]
    fn those_due_are_the_first_ones_by_then_before_the_run_and_skipping_takes_them() {
        let mut q = Flights::default();
        for (at, offset) in [(10, 0), (20, 100), (20, 200), (30, 300)] {
            q.insert(tlp(at, offset));
        }
        q.set_run(FlightRun {
            at: SimTime(40),
            period: 10,
            offset: 400,
            len: 100,
            count: 3,
        });
        let due = |q: &Flights, t: u64| -> Vec<u64> {
            q.due(SimTime(t)).iter().map(|r| r.offset).collect()
        };
        assert!(due(&q, 9).is_empty(), "none arrived by 9");
        assert_eq!(due(&q, 20), [0, 100, 200], "by 20, equal times included");
        assert_eq!(due(&q, 60), [0, 100, 200, 300], "not the run's");
        q.skip(2);
        assert_eq!((q.len(), q.next()), (5, SimTime(20)));
        assert_eq!(due(&q, 35), [200, 300]);
        q.skip(2);
        assert_eq!((q.len(), q.next()), (3, SimTime(40)), "the run is next");
        assert!(due(&q, 60).is_empty());
        q.skip(0);
        assert_eq!(
            q.take_run_before(Some(SimTime(61))).map(|r| r.count),
            Some(3)
        );
        assert!(q.is_empty());
    }

    /// TLPs pushed one by one as runs of one (a train's TLPs leaving one at a time) are on
    /// their way as if inserted: those that follow the run extend it (no item kept), one that
    /// does not (another length, a gap, an earlier arrival, a period of 0) goes in as an item,
    /// and all are taken in arrival order, equal times in the order pushed.
    #[test]
    fn tlps_pushed_one_by_one_are_on_their_way_as_if_inserted() {
        let one = |at: u64, offset: u64, len: u32, period: u64| FlightRun {
            at: SimTime(at),
            period,
            offset,
            len,
            count: 1,
        };
        let pushed = [
            one(40, 9_000, 100, 10), // before the item on its way
            one(50, 0, 100, 10),
            one(60, 100, 100, 10),
            one(70, 200, 100, 10),
            one(80, 300, 60, 10),  // another length
            one(95, 360, 60, 10),  // a gap
            one(105, 420, 60, 10), // follows again
            one(90, 480, 60, 10),  // arrives earlier than the last
            one(105, 540, 60, 0),  // a tie, period 0
            one(105, 600, 60, 0),  // period 0 never extends
        ];
        let (mut q, mut reference) = (Flights::default(), Flights::default());
        reference.insert(tlp(45, 7_000));
        q.insert(tlp(45, 7_000));
        for (i, t) in pushed.iter().enumerate() {
            q.push_following(*t);
            reference.insert(t.first());
            assert_eq!(
                (q.len(), q.next()),
                (reference.len(), reference.next()),
                "after {i}"
            );
            assert!(
                q.run.period > 0 || q.run.count <= 1,
                "a run of several has a period"
            );
            if i == 3 {
                assert_eq!(
                    q.run.count, 3,
                    "the three that follow each other make one run"
                );
            }
        }
        let drain = |q: &mut Flights| -> Vec<(u64, u64, u32)> {
            std::iter::from_fn(|| q.pop_front())
                .map(|t| (t.at.0, t.offset, t.len))
                .collect()
        };
        let got = drain(&mut q);
        assert_eq!(got, drain(&mut reference));
        assert_eq!(got.len(), pushed.len() + 1);
        // Alone, the first pushed starts the run and is next.
        let mut q = Flights::default();
        q.push_following(one(50, 0, 100, 10));
        q.push_following(one(60, 100, 100, 10));
        assert_eq!((q.len(), q.next(), q.items.len()), (2, SimTime(50), 0));
    }

    /// A run of TLPs one after another (a train's rest) queues after the others as they
    /// would one by one: taken in order, counted, made items when another is inserted, and
    /// taken at once as far as it arrives before a time.
    #[test]
    fn a_run_of_tlps_queues_after_the_others_as_its_tlps_one_by_one() {
        let run = FlightRun {
            at: SimTime(50),
            period: 10,
            offset: 1_000,
            len: 100,
            count: 4,
        };
        let listed =
            |q: &Flights| -> Vec<(u64, u64)> { q.iter().map(|t| (t.at.0, t.offset)).collect() };
        let mut q = Flights::default();
        q.set_run(run);
        assert_eq!(q.next(), SimTime(50), "alone, the run's first is next");
        let mut q = Flights::default();
        q.insert(tlp(40, 900));
        q.set_run(run);
        assert_eq!((q.len(), q.next()), (5, SimTime(40)));
        let all = [
            (40, 900),
            (50, 1_000),
            (60, 1_100),
            (70, 1_200),
            (80, 1_300),
        ];
        assert_eq!(listed(&q), all);
        assert_eq!(q.pop_due(SimTime(50)).map(|t| t.offset), Some(900));
        assert_eq!(q.pop_due(SimTime(50)).map(|t| t.offset), Some(1_000));
        assert!(q.pop_due(SimTime(59)).is_none(), "the next arrives at 60");
        // Taken at once: those arriving before 80 (not the one at 80: the event then first).
        let taken = q.take_run_before(Some(SimTime(80)));
        assert_eq!(
            taken.map(|r| (r.at, r.offset, r.count, r.last_at())),
            Some((SimTime(60), 1_100, 2, SimTime(70)))
        );
        assert_eq!((q.len(), q.next()), (1, SimTime(80)));
        assert!(
            q.take_run_before(Some(SimTime(80))).is_none(),
            "none before 80"
        );
        // Another inserted: the run's TLPs become items, in order.
        q.insert(tlp(85, 7));
        assert_eq!(listed(&q), [(80, 1_300), (85, 7)]);
        assert!(q.take_run_before(None).is_none(), "no run left");
        // A run arriving before the last on its way goes in one by one.
        q.set_run(FlightRun {
            at: SimTime(81),
            count: 2,
            ..run
        });
        assert_eq!(listed(&q), [(80, 1_300), (81, 1_000), (85, 7), (91, 1_100)]);
        q.clear();
        assert!(q.is_empty());
        assert_eq!((q.len(), q.next()), (0, SimTime::NEVER));
    }

    #[test]
    fn a_stream_that_never_drains_keeps_only_a_bounded_number_of_arrived_tlps() {
        let tlp = |at: u64| InFlight {
            at: SimTime(at),
            segment: 0,
            offset: at,
            len: 0,
            last: false,
            copy: 0,
            step: crate::record::NONE,
        };
        let mut q = Flights::default();
        q.insert(tlp(0));
        for at in 1..10_000 {
            q.insert(tlp(at));
            assert_eq!(q.pop_front().map(|t| t.offset), Some(at - 1));
            assert!(q.items.len() <= 130, "{} kept after {at}", q.items.len());
        }
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn tlps_never_cross_4k_or_the_size_limit() {
        assert_eq!(next_chunk(0, 10_000, 256), 256);
        assert_eq!(next_chunk(4000, 10_000, 256), 96);
        assert_eq!(next_chunk(4096 - 8, 100, 512), 8);
        assert_eq!(next_chunk(100, 50, 256), 50);
        assert_eq!(
            next_chunk(300, 10_000, 256),
            212,
            "to the next multiple of 256"
        );
        // A size that is not a power of two (a calibration may name one) cuts the same way.
        assert_eq!(next_chunk(0, 10_000, 300), 300);
        assert_eq!(next_chunk(350, 10_000, 300), 250);
        assert_eq!(
            next_chunk(3900, 10_000, 300),
            196,
            "the 4 KiB boundary first"
        );
    }
}
