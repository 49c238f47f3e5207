//! The engine's state and event processing: the clock, the event queue, memory backing,
//! link occupancy, transactions, timers, memory watches and interrupts.
//!
//! Events are ordered by `(time, sequence)`, so ties resolve first-in-first-out and a run is
//! deterministic. Device BAR handlers are called while the core is borrowed: they must only
//! touch their own state and wake tasks (see [`smartio_platform::BarHandler`]).

use crate::events::EventQueue;
use crate::executor::Ready;
use crate::iotlb::Iotlb;
use crate::record::{HopRec, Kind, Recorder, Step, StepId, TlpKind, NONE};
use crate::timing::{lane, traverse, traverse_tree, Booking, Flow, Lane, Timing};
use crate::txn::{next_chunk, CostedPath, Flights, InFlight, Segment, Txn, TxnChips, TxnKind};
use crate::wait::Wait;
use crate::waiters::{TimerKey, Timers, Watches};
use rustc_hash::FxHashMap;
use smartio_fabric::{Access, EndpointId, Fabric, HostId, Requester, Target};
pub use smartio_machine::{Counters, FaultRecord, LinkEvent};
use smartio_platform::{
    AccessError, BarHandler, BusAddr, Cause, PhysAddr, SimDuration, SimTime, SparseMemory, Stream,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

mod ahead;
mod burst;
mod deferred;
mod posted;
mod single_read;

pub(crate) use single_read::ReadInPlace;

/// A scheduled event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Event {
    /// A transaction has something to do.
    Txn(u32),
    /// A timer fires.
    Timer(TimerKey),
    /// An interrupt reaches its handler (`step`: its recorded delivery).
    Interrupt {
        host: u32,
        vector: u32,
        step: StepId,
    },
    /// A link goes down or comes up.
    LinkState { link: u32, up: bool },
    /// A posted write of one TLP that travels without a transaction leaves or lands (its
    /// slot in [`Core::posted`]).
    Posted(u32),
}

/// The bytes of a write as its requester hands them over: a slice to be copied (its buffer
/// is free once the write has started), a buffer given away (kept as the transaction's, no
/// copy), or zeroes ([`Zeroes`]: no bytes kept). Generic, not an enum, so the usual copy
/// costs what it did alone.
pub(crate) trait WriteBytes {
    /// How many bytes.
    fn len(&self) -> usize;

    /// The bytes (for zeroes, borrowed from [`ZERO_TLP`] when it holds as many).
    fn bytes(&self) -> Cow<'_, [u8]>;

    /// The bytes as a transaction's buffer: copied into a spare one of `core`'s, this one,
    /// or none (zeroes).
    fn into_buffer(self, core: &mut Core) -> Vec<u8>;

    /// Whether they are all zeroes, kept in no buffer.
    fn zeroes(&self) -> bool {
        false
    }
}

impl WriteBytes for &[u8] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    #[inline(always)]
    fn bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }

    #[inline(always)]
    fn into_buffer(self, core: &mut Core) -> Vec<u8> {
        let mut buf = core.spare_data();
        buf.extend_from_slice(self);
        buf
    }
}

impl WriteBytes for Vec<u8> {
    #[inline(always)]
    fn len(&self) -> usize {
        Vec::len(self)
    }

    #[inline(always)]
    fn bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }

    #[inline(always)]
    fn into_buffer(self, _: &mut Core) -> Vec<u8> {
        self
    }
}

/// A caller's buffer whose bytes a transaction takes as they are, leaving a spare buffer of
/// the engine's in their place ([`smartio_machine::AgentPort::write_swapped`]).
pub(crate) struct Swapped<'a>(pub(crate) &'a mut Vec<u8>);

impl WriteBytes for Swapped<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.0.len()
    }

    #[inline(always)]
    fn bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.0)
    }

    #[inline(always)]
    fn into_buffer(self, core: &mut Core) -> Vec<u8> {
        let spare = core.spare_data();
        std::mem::replace(self.0, spare)
    }
}

/// PCIe's largest payload: no TLP carries more bytes.
pub(crate) const MAX_PAYLOAD: usize = 4096;

/// A TLP's payload of zeroes, borrowed for a write of [`Zeroes`].
static ZERO_TLP: [u8; MAX_PAYLOAD] = [0; MAX_PAYLOAD];

/// `len` zeroes to write ([`smartio_machine::AgentPort::write_zeroes`]): a transaction of
/// them keeps no bytes ([`Txn::zeroes`]), and lands them by zeroing memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Zeroes(pub usize);

impl WriteBytes for Zeroes {
    #[inline(always)]
    fn len(&self) -> usize {
        self.0
    }

    fn bytes(&self) -> Cow<'_, [u8]> {
        match ZERO_TLP.get(..self.0) {
            Some(zeroes) => Cow::Borrowed(zeroes),
            None => Cow::Owned(vec![0; self.0]),
        }
    }

    #[inline(always)]
    fn into_buffer(self, _: &mut Core) -> Vec<u8> {
        Vec::new()
    }

    fn zeroes(&self) -> bool {
        true
    }
}

#[derive(Debug, Default)]
pub(crate) struct IrqLine {
    pub pending: u32,
    pub waker: Option<Waker>,
}

#[derive(Debug)]
struct TagPool {
    free: u32,
    waiting: VecDeque<u32>,
}

/// Most routed accesses [`Core`] remembers before it starts over (a few hundred bytes each).
const ROUTE_CACHE_ENTRIES: usize = 4096;

/// A costed path's key: requester, hops, and the root complex that cuts its reads.
type PathKey = (Requester, Vec<smartio_fabric::Hop>, Option<HostId>);

pub(crate) struct Core {
    pub now: SimTime,
    /// `now`, readable while the core is borrowed (a BAR handler reading a clock register
    /// runs inside the core). Set wherever `now` moves.
    pub shared_now: Rc<std::cell::Cell<SimTime>>,
    seq: u64,
    queue: EventQueue<Event>,
    pub fabric: Fabric,
    pub timing: Timing,
    /// Every link's two directions ([`lane`]).
    pub lanes: Vec<Lane>,
    pub memory: Vec<SparseMemory>,
    pub bar_handlers: Vec<Option<Rc<dyn BarHandler>>>,
    pub config_handlers: Vec<Option<Rc<dyn smartio_platform::ConfigHandler>>>,
    txns: Vec<Option<Box<Txn>>>,
    free_txns: Vec<u32>,
    /// The serial number of the last transaction started (see [`Txn::serial`]).
    txn_serial: u32,
    /// Finished transactions kept for the next ones (their queues keep their capacity), at
    /// most [`SPARE_TXNS`]. Invariant: each has empty queues, empty data (its capacity
    /// kept, up to [`SPARE_DATA_BYTES`]), no waker and `empty_segments` for its segments.
    // Boxed: a spare is the very allocation `txns` holds, moved back without a copy.
    #[allow(clippy::vec_box)]
    spare_txns: Vec<Box<Txn>>,
    /// The segments of a spare transaction (shared, so parking one allocates nothing).
    empty_segments: Rc<[Segment]>,
    /// Posted writes of one TLP on their way without a transaction (see [`posted`]).
    posted: posted::PostedWrites,
    /// Whether a posted write of one TLP to one target may go without a transaction (see
    /// [`posted`]); off, every write is a transaction, to the same results.
    pub posts_alone: bool,
    /// Posted writes that went without a transaction so far.
    pub posted_alone: u64,
    /// Whether a read of one request and one completion may run in place without a
    /// transaction (see [`single_read`]); off, every read is a transaction, to the same
    /// results.
    pub reads_alone: bool,
    /// Reads that ran in place without a transaction so far.
    pub reads_in_place: u64,
    pub timers: Timers,
    pub watches: Watches,
    /// What the task being polled waits for (filled by the engine's futures, moved into the
    /// task's slot when its poll returns pending).
    pub waits: Vec<Wait>,
    pub irqs: Vec<BTreeMap<u32, IrqLine>>,
    /// Tag pools: hosts' CPUs first, then endpoints, then each host's root complex (its
    /// slots for forwarded reads).
    tags: Vec<Option<TagPool>>,
    /// Costed paths by requester, hops and the root complex that cuts their reads (if any).
    path_cache: FxHashMap<PathKey, Rc<CostedPath>>,
    /// Routed accesses by requester, address, length and kind. The fabric answers the same
    /// question the same way until it changes, so a repeated access (a doorbell, a queue
    /// entry, a driver's buffer) is routed once. Invariant: emptied whenever the fabric
    /// changes ([`Core::fabric_changed`]); at most [`ROUTE_CACHE_ENTRIES`] entries, so that
    /// memory does not grow with a run's length.
    route_cache: FxHashMap<(Requester, u64, u64, Access), Rc<[Segment]>>,
    /// Whether a CPU's access lands in its own host's RAM without crossing a link, by host,
    /// address and length ([`Core::local_memory`]); kept like `route_cache`.
    local_cache: FxHashMap<(HostId, u64, u64), Option<PhysAddr>>,
    pub faults: Vec<FaultRecord>,
    /// Link state changes so far, in order.
    pub link_log: Vec<LinkEvent>,
    /// Tasks waiting for the next link state change.
    pub link_waiters: Vec<Waker>,
    pub counters: Counters,
    /// Set whenever something may have made a task ready; the fast path then stops so that
    /// tasks run before time advances.
    pub woke: bool,
    /// Where the chips' per-TLP latencies are drawn from.
    chip_stream: Stream,
    /// Per requester (hosts' CPUs, then endpoints): where the delivery times of the
    /// interrupts it raises are drawn from — so a device's interrupts draw the same times
    /// whichever host they reach.
    interrupt_streams: Vec<Stream>,
    /// Per host: its IOMMU's translation cache.
    iotlbs: Vec<Iotlb>,
    /// Where wake-ups learn their cause (the executor's ready queue).
    ready: Arc<Ready>,
    /// The recording of where time goes, when on.
    pub recorder: Option<Box<Recorder>>,
    /// A TLP's hops while it is costed (recording only).
    hop_scratch: Vec<HopRec>,
    /// Write TLPs of the transaction being stepped that have landed in memory but whose
    /// bytes are not copied yet (see [`Landed`]); copied before anything else can look.
    landed: Option<Landed>,
    /// Whether writes into memory and reads of memory may run in bursts (see [`burst`]);
    /// off, every transaction goes step by step, to the same results.
    pub bursts: bool,
    /// Whether the landings of a write that has sent all its TLPs may wait until someone
    /// looks (see [`deferred`]); off, each is a step, to the same results.
    pub defers: bool,
    /// Writes whose landings wait (see [`deferred`]).
    deferred: deferred::Deferred,
    /// The moment after the deadline of the run going on (see [`Core::next_due`]).
    after_deadline: SimTime,
    /// What a transaction's steps taken without the queue must come before besides the
    /// queue's next event: the moment after the run's deadline, or the next step of the
    /// transaction ahead if sooner (see [`Core::set_horizon`]).
    horizon: SimTime,
    /// Whether a write cut by an event may book its rest ahead (see [`ahead`]); off, it is
    /// queued at its next step, to the same results.
    pub ahead_on: bool,
    /// The transaction ahead (see [`ahead`]).
    ahead: ahead::Ahead,
    /// Writes that went ahead so far, steps they took ahead, and how many were taken back.
    pub aheads: u64,
    pub ahead_steps: u64,
    pub ahead_rollbacks: u64,
    /// Of those taken back, how many went ahead again at once (see `Core::ahead_again`).
    pub aheads_again: u64,
    /// Landing steps deferred so far (each distinct time one, as the step loop counts).
    pub deferred_steps: u64,
    /// Per host: the write transactions in their slots that land in its memory (see
    /// `Core::count_writes_into`), so a deferral looks for another one only when there is.
    writes_into: Vec<u32>,
    /// Whether a burst's write TLPs that leave one after another are sent as a train, their
    /// steps taken at once (see `burst`'s `issue_train`); off, one step at a time, to the
    /// same results.
    pub trains: bool,
    /// The TLPs of the train being sent, in parts (kept for its capacity).
    train: Vec<burst::TrainPart>,
    /// The hops of a train's TLP that others follow (see [`crate::timing::TrainRun`]).
    train_shape: Vec<crate::timing::HopShape>,
    /// TLPs sent in trains so far.
    pub train_tlps: u64,
    /// Steps run in bursts so far.
    pub burst_steps: u64,
    /// Whether a cost a task spends may pass in place and an access it starts take its
    /// first steps in place (see [`crate::Sim::set_in_place`]); off, every cost is a timer
    /// and every step an event, to the same results.
    pub in_place: bool,
    /// Costs that passed in place so far, and accesses whose first steps ran in place.
    pub passed_in_place: u64,
    /// Of those, CPU accesses of their own RAM and posted writes that went on in place
    /// once the run's next steps, taken from their task's poll, came to their own (see
    /// `Sim::run_to_own_timer`).
    pub ran_to_own: u64,
    /// The transaction an access is stepping in place ([`Core::step_in_place`]): its
    /// requester, though it holds no waker yet, counts as woken when it completes.
    in_place_access: Option<u32>,
    /// While recording: the step that last wrote each 64-byte line of host memory, by host
    /// and line, and whether a CPU has loaded the line since (what a polling load that sees
    /// new data was waiting for).
    last_writer: FxHashMap<(u32, u64), (StepId, bool)>,
}

/// How a transaction ended, once it has (`None` before).
pub(crate) type TxnResult = Option<Result<(), AccessError>>;

/// Finished transactions [`Core`] keeps for reuse, at most.
const SPARE_TXNS: usize = 64;

/// A spare transaction keeps its data buffer up to this capacity (a larger one is freed, so
/// that the spares of big DMA transfers do not hold memory for the run).
const SPARE_DATA_BYTES: usize = 64 * 1024;

/// Lines of host memory whose last writer the recording keeps, at most (then it starts
/// over: a poll that looks at a line forgotten is explained by the poller's own chain).
const LAST_WRITERS: usize = 1 << 20;

/// The granule of [`Core::last_writer`].
const LINE: u64 = 64;

impl Core {
    /// A core for `fabric` whose varying times are drawn from streams of `seed`.
    pub fn new(fabric: Fabric, timing: Timing, seed: u64, ready: Arc<Ready>) -> Core {
        let hosts = fabric.hosts().len();
        let endpoints = fabric.endpoints().len();
        Core {
            chip_stream: Stream::new(seed, Cause::Chip, 0),
            iotlbs: (0..hosts)
                .map(|_| Iotlb::new(timing.iotlb_entries, timing.iotlb_flush_batch))
                .collect(),
            interrupt_streams: (0..(hosts + endpoints) as u64)
                .map(|i| Stream::new(seed, Cause::Interrupt, i))
                .collect(),
            now: SimTime::ZERO,
            shared_now: Rc::new(std::cell::Cell::new(SimTime::ZERO)),
            seq: 0,
            queue: EventQueue::default(),
            lanes: vec![Lane::default(); 2 * fabric.links().len()],
            memory: (0..hosts).map(|_| SparseMemory::new()).collect(),
            bar_handlers: (0..endpoints).map(|_| None).collect(),
            config_handlers: (0..endpoints).map(|_| None).collect(),
            irqs: (0..hosts).map(|_| BTreeMap::new()).collect(),
            fabric,
            timing,
            txns: Vec::new(),
            free_txns: Vec::new(),
            txn_serial: 0,
            spare_txns: Vec::new(),
            empty_segments: Rc::from(Vec::new()),
            posted: posted::PostedWrites::default(),
            posts_alone: true,
            posted_alone: 0,
            reads_alone: true,
            reads_in_place: 0,
            timers: Timers::default(),
            watches: Watches::default(),
            waits: Vec::new(),
            tags: (0..2 * hosts + endpoints).map(|_| None).collect(),
            path_cache: FxHashMap::default(),
            route_cache: FxHashMap::default(),
            local_cache: FxHashMap::default(),
            faults: Vec::new(),
            link_log: Vec::new(),
            link_waiters: Vec::new(),
            counters: Counters::default(),
            woke: false,
            ready,
            recorder: None,
            hop_scratch: Vec::new(),
            landed: None,
            bursts: true,
            defers: true,
            deferred: deferred::Deferred::default(),
            after_deadline: SimTime::NEVER,
            horizon: SimTime::NEVER,
            ahead_on: true,
            ahead: ahead::Ahead::default(),
            aheads: 0,
            ahead_steps: 0,
            ahead_rollbacks: 0,
            aheads_again: 0,
            deferred_steps: 0,
            writes_into: vec![0; hosts],
            trains: true,
            train: Vec::new(),
            train_shape: Vec::new(),
            train_tlps: 0,
            burst_steps: 0,
            in_place: true,
            passed_in_place: 0,
            ran_to_own: 0,
            in_place_access: None,
            last_writer: FxHashMap::default(),
        }
    }

    /// While recording: the cause of a CPU's load of `len` bytes at `addr` of `host`'s
    /// memory made with `cause` as its context. A load that is the first to see bytes
    /// written since they were last read may have waited for that write:
    ///
    /// - in a polling loop (the task's context is its own timer, back through its own
    ///   timers to its previous look at memory), the look that finds new data is the one
    ///   after the write landed, so the latest such writer is the cause (the critical path
    ///   shows the wait for the loop's next look);
    /// - otherwise the task was woken by something (an interrupt, a watched write, another
    ///   task): what ended last, that wake-up or the write, is the cause. An interrupt
    ///   handler reading a completion entry waited for the interrupt, which came after the
    ///   entry.
    ///
    /// A load that finds nothing new is caused by its task's own chain.
    pub fn load_cause(&mut self, host: HostId, addr: PhysAddr, len: u64, cause: StepId) -> StepId {
        let Some(r) = self.recorder.as_deref() else {
            return cause;
        };
        let mut best: Option<(SimTime, StepId)> = None;
        let first = addr.get() / LINE;
        let last = (addr.get() + len.max(1) - 1) / LINE;
        for line in first..=last.min(first + 64) {
            if let Some((w, seen)) = self.last_writer.get_mut(&(host.0, line)) {
                if !*seen {
                    *seen = true;
                    let end = r.end_of(*w);
                    if best.is_none_or(|(e, _)| end > e) {
                        best = Some((end, *w));
                    }
                }
            }
        }
        match best {
            None => cause,
            Some((_, w)) if r.polling(host, cause) => w,
            Some((end, w)) if end >= r.end_of(cause) => w,
            Some(_) => cause,
        }
    }

    /// Starts recording (see [`crate::record`]).
    pub fn start_recording(&mut self, trace_limit: Option<usize>) {
        smartio_platform::activity::wanted();
        self.rollback_ahead();
        self.recorder = Some(Box::new(Recorder::new(trace_limit)));
        // Every landing from now on is recorded as a step.
        if !self.deferred.is_empty() {
            self.undefer_overlapping(None);
        }
    }

    /// The recording, if on.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.recorder.as_deref()
    }

    /// The recording, if on.
    pub fn recorder_mut(&mut self) -> Option<&mut Recorder> {
        self.recorder.as_deref_mut()
    }

    /// Whether steps are recorded.
    #[inline(always)]
    pub fn recording(&self) -> bool {
        self.recorder.is_some()
    }

    /// The step the engine acts on now: what wake-ups and new steps are caused by.
    pub fn context(&self) -> StepId {
        if self.recording() {
            self.ready.context()
        } else {
            NONE
        }
    }

    /// Makes `step` what wake-ups and new steps are caused by (while recording).
    #[inline(always)]
    pub fn set_context(&self, step: StepId) {
        if self.recording() {
            self.ready.set_context(step);
        }
    }

    /// Records that the TLP of step `tlp` has left its requester's first link at `until`
    /// (what lets the transfer's next TLP go); returns that step, or `cause` if it took no
    /// time.
    fn record_send(&mut self, tlp: StepId, until: SimTime, cause: StepId) -> StepId {
        match &mut self.recorder {
            Some(r) => r.send(tlp, until, cause),
            None => NONE,
        }
    }

    /// Records a step (while recording; [`NONE`] otherwise).
    pub fn record(
        &mut self,
        kind: Kind,
        start: SimTime,
        end: SimTime,
        cause: StepId,
        label: Option<&'static str>,
    ) -> StepId {
        match &mut self.recorder {
            Some(r) => r.step(
                Step {
                    kind,
                    start,
                    end,
                    cause,
                    label,
                },
                &self.hop_scratch,
            ),
            None => NONE,
        }
    }

    /// Queues `event` at `at` (not before now). Sequence numbers go up by two: the odd one
    /// between two is a step taken ahead's (see [`ahead`]).
    pub fn schedule(&mut self, at: SimTime, event: Event) {
        self.seq += 2;
        self.queue.push(at.max(self.now), self.seq, event);
    }

    pub fn peek_time(&self) -> Option<SimTime> {
        self.queue.peek_time()
    }

    /// What a transaction's steps taken without the queue must come before: the queue's
    /// next event, or the moment after the run's deadline (a run until a deadline takes no
    /// step after it).
    #[inline(always)]
    pub fn next_due(&self) -> Option<SimTime> {
        match self.queue.peek_time() {
            Some(next) => Some(next.min(self.horizon)),
            None => (self.horizon != SimTime::NEVER).then_some(self.horizon),
        }
    }

    /// The next thing the run does: the queue's next event or the next step of the
    /// transaction ahead, whichever comes first.
    #[inline(always)]
    pub fn next_time(&self) -> Option<SimTime> {
        let ahead = self.ahead.next();
        match self.queue.peek_time() {
            Some(next) => Some(next.min(ahead)),
            None => (ahead != SimTime::NEVER).then_some(ahead),
        }
    }

    /// Sets the deadline of the run going on: no step is taken without the queue after it.
    pub fn set_deadline(&mut self, deadline: SimTime) {
        self.after_deadline = deadline + SimDuration(1);
        self.set_horizon();
    }

    /// Keeps [`Core::horizon`] the sooner of the moment after the deadline and the next
    /// step of the transaction ahead.
    #[inline(always)]
    fn set_horizon(&mut self) {
        self.horizon = self.after_deadline.min(self.ahead.next());
    }

    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        self.queue.pop()
    }

    /// Arms a timer due at `at` that ends recorded step `step`. A timer at
    /// [`SimTime::NEVER`] gets no event: it never fires.
    pub fn add_timer(&mut self, at: SimTime, step: StepId) -> TimerKey {
        let key = self.timers.add(at, step);
        if at != SimTime::NEVER {
            self.schedule(at, Event::Timer(key));
        }
        key
    }

    pub fn fire_timer(&mut self, key: TimerKey) {
        if self.recording() {
            self.set_context(self.timers.step(key));
        }
        if let Some(w) = self.timers.fire(key) {
            w.wake();
            self.woke = true;
        }
    }

    /// Forgets every routed access: the fabric changed (a mapping, a link, a group).
    pub fn fabric_changed(&mut self) {
        self.rollback_ahead();
        self.route_cache.clear();
        self.local_cache.clear();
    }

    /// Applies a link state change and tells the waiting tasks.
    pub fn set_link(&mut self, link: smartio_fabric::LinkId, up: bool) {
        self.fabric.set_link_up(link, up);
        self.fabric_changed();
        self.link_log.push(LinkEvent {
            at: self.now,
            link,
            up,
        });
        for w in self.link_waiters.drain(..) {
            w.wake();
            self.woke = true;
        }
    }

    /// Writes host memory and wakes the watchers of the range.
    pub fn write_memory(&mut self, host: HostId, addr: PhysAddr, data: &[u8]) {
        self.settle_range(host, addr.get(), data.len() as u64);
        if self.recording() && !data.is_empty() {
            let step = self.context();
            if self.last_writer.len() >= LAST_WRITERS {
                self.last_writer.clear();
            }
            let first = addr.get() / LINE;
            let last = (addr.get() + data.len() as u64 - 1) / LINE;
            for line in first..=last {
                self.last_writer.insert((host.0, line), (step, false));
            }
        }
        self.memory[host.index()].write(addr.get(), data);
        self.memory_changed(host, addr, data.len() as u64);
    }

    /// Zeroes host memory (sparse: whole pages are dropped) and wakes the range's watchers.
    pub fn zero_memory(&mut self, host: HostId, addr: PhysAddr, len: u64) {
        self.settle_range(host, addr.get(), len);
        self.memory[host.index()].zero(addr.get(), len);
        self.memory_changed(host, addr, len);
    }

    #[inline]
    fn memory_changed(&mut self, host: HostId, addr: PhysAddr, len: u64) {
        let end = addr.get().saturating_add(len);
        if self.watches.written(host, addr.get(), end) {
            self.woke = true;
        }
    }

    /// Transactions started and not freed yet.
    pub fn live_txns(&self) -> usize {
        self.txns.len() - self.free_txns.len()
    }

    pub fn txn(&self, id: u32) -> Option<&Txn> {
        self.txns.get(id as usize).and_then(|t| t.as_deref())
    }

    pub fn txn_mut(&mut self, id: u32) -> Option<&mut Txn> {
        self.txns
            .get_mut(id as usize)
            .and_then(|t| t.as_deref_mut())
    }

    /// Removes a finished transaction, returning its result (if it has one); a successful
    /// read's data is copied into `buf` (as long as the read; bytes no request answered,
    /// none unless it was cut short, read as zeroes).
    pub fn take_txn(&mut self, id: u32, buf: &mut [u8]) -> Option<TxnResult> {
        self.take_txn_with(id, |data, _| {
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            buf[n..].fill(0);
        })
    }

    /// [`Core::take_txn`], with a successful read's buffer moved into `out` (no copy).
    pub fn take_txn_data(&mut self, id: u32, out: &mut Vec<u8>) -> Option<TxnResult> {
        self.take_txn_with(id, |data, len| {
            *out = std::mem::take(data);
            out.resize(len, 0);
        })
    }

    /// Removes a finished transaction and parks it; a successful read's data buffer and
    /// the read's length go to `read` first.
    fn take_txn_with(
        &mut self,
        id: u32,
        read: impl FnOnce(&mut Vec<u8>, usize),
    ) -> Option<TxnResult> {
        let mut t = self.txns.get_mut(id as usize)?.take()?;
        self.free_txns.push(id);
        if t.kind == TxnKind::Write {
            self.count_writes_into(&t.segments, false);
        }
        if t.deferred {
            // Taken once all has landed (its queue entry at its last landing still to come).
            self.forget_deferral(id);
        }
        if t.kind == TxnKind::Read && matches!(t.result, Some(Ok(()))) {
            let len = t.segments.last().map_or(0, |s| s.offset + s.len) as usize;
            read(&mut t.data, len);
        }
        let result = t.result.take();
        self.park(t);
        Some(result)
    }

    /// A data buffer for the next transaction: the spare's that [`Core::new_txn`] will
    /// take, emptied, so that its capacity is reused.
    fn spare_data(&mut self) -> Vec<u8> {
        self.spare_txns
            .last_mut()
            .map(|t| std::mem::take(&mut t.data))
            .unwrap_or_default()
    }

    /// Keeps a finished transaction for reuse (see [`Core::spare_txns`]).
    #[inline]
    fn park(&mut self, mut t: Box<Txn>) {
        if self.spare_txns.len() < SPARE_TXNS {
            t.requests.clear();
            t.completions.clear();
            t.data.clear();
            if t.data.capacity() > SPARE_DATA_BYTES {
                t.data = Vec::new();
            }
            t.waker = None;
            t.segments = self.empty_segments.clone();
            self.spare_txns.push(t);
        }
    }

    /// The pool a read request takes its tag from: the requester's own, or that of the root
    /// complex forwarding it (`forwarded_by`, its path's [`CostedPath::forwarded_by`]).
    fn tag_pool(&mut self, requester: Requester, forwarded_by: Option<usize>) -> &mut TagPool {
        let hosts = self.timing.cpu_tags.len();
        let (slot, limit) = match (forwarded_by, requester) {
            (Some(root), _) => (
                hosts + self.timing.endpoint_tags.len() + root,
                self.timing.forwarded_reads,
            ),
            (None, Requester::Cpu(h)) => (h.index(), self.timing.cpu_tags[h.index()]),
            (None, Requester::Device(e)) => {
                (hosts + e.index(), self.timing.endpoint_tags[e.index()])
            }
        };
        self.tags[slot].get_or_insert_with(|| TagPool {
            free: limit,
            waiting: VecDeque::new(),
        })
    }

    /// The costed form of a route's `hops`. `translated_by` lists the hosts whose IOMMU
    /// translated the route: a root complex in the middle of the path cuts the reads it
    /// forwards only if it translated them (see below).
    fn costed_path(
        &mut self,
        requester: Requester,
        hops: &[smartio_fabric::Hop],
        target: Target,
        translated_by: &[smartio_fabric::Translation],
    ) -> Rc<CostedPath> {
        // A root complex in the middle of the path forwards the request to another port.
        // Xeon root complexes re-emit the read requests their IOMMU translated as smaller
        // ones (Paper V §7.3.1: "on the other side of the IOMMU"); what one forwards
        // untranslated, peer to peer, goes on as it came (the papers saw no cutting there).
        // The first such root that translated cuts.
        let cuts = hops.split_last().and_then(|(_, before)| {
            before.iter().find_map(|h| {
                let node = self.fabric.node(h.node);
                let host = node.host?;
                let translated = translated_by.iter().any(|t| t.host == host);
                (matches!(node.kind, smartio_fabric::NodeKind::RootComplex) && translated)
                    .then_some(host)
            })
        });
        let key = (requester, hops.to_vec(), cuts);
        if let Some(p) = self.path_cache.get(&key) {
            return p.clone();
        }
        let forward = self.timing.costed(hops);
        // The way back: the same links in reverse, ending at the requester.
        let start_node = match requester {
            Requester::Cpu(h) => self.fabric.host(h).root,
            Requester::Device(e) => self.fabric.endpoint(e).node,
        };
        let mut back_hops = Vec::with_capacity(hops.len());
        for (i, h) in hops.iter().enumerate().rev() {
            let node = if i == 0 { start_node } else { hops[i - 1].node };
            back_hops.push(smartio_fabric::Hop {
                link: h.link,
                dir: h.dir.reverse(),
                node,
            });
        }
        let backward = self.timing.costed(&back_hops);
        let rc = self.timing.root_complex_ps;
        let (arrive_ps, read_ps) = match target {
            Target::Memory { .. } | Target::Interrupt { .. } => (rc, self.timing.memory_read_ps),
            Target::Bar { endpoint, .. } => (0, self.timing.endpoint_read_ps[endpoint.index()]),
            Target::Multicast { .. } => (0, 0),
        };
        let return_ps = if matches!(requester, Requester::Cpu(_)) {
            rc
        } else {
            0
        };
        let sizes = self.timing.sizes;
        let forwarded_by = cuts
            .filter(|_| sizes.forwarded_read_request > 0)
            .map(|h| h.index());
        let max_read_request = if forwarded_by.is_some() {
            sizes.mrrs.min(sizes.forwarded_read_request)
        } else {
            sizes.mrrs
        };
        let path = Rc::new(CostedPath {
            forward,
            backward,
            arrive_ps,
            read_ps,
            return_ps,
            max_read_request,
            forwarded_by,
        });
        self.path_cache.insert(key, path.clone());
        path
    }

    /// Routes every byte of an access into segments, or fails without side effects.
    #[inline(always)]
    fn segments(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
        access: Access,
    ) -> Result<Rc<[Segment]>, AccessError> {
        let key = (requester, addr.get(), len, access);
        match self.route_cache.get(&key) {
            Some(hit) => Ok(hit.clone()),
            None => self.segments_routed(key),
        }
    }

    /// [`Core::segments`] for an access not routed before: routed, costed and remembered.
    #[inline(never)]
    fn segments_routed(
        &mut self,
        key: (Requester, u64, u64, Access),
    ) -> Result<Rc<[Segment]>, AccessError> {
        let (requester, addr, len, access) = key;
        let segments: Rc<[Segment]> = self
            .route_segments(requester, BusAddr(addr), len, access)?
            .into();
        if self.route_cache.len() >= ROUTE_CACHE_ENTRIES {
            self.route_cache.clear();
        }
        self.route_cache.insert(key, segments.clone());
        Ok(segments)
    }

    /// [`Core::segments`] without the cache.
    fn route_segments(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
        access: Access,
    ) -> Result<Vec<Segment>, AccessError> {
        let mut segments = Vec::new();
        let mut done = 0;
        while done < len {
            let at = addr.get() + done;
            let route = self
                .fabric
                .route(requester, BusAddr(at), len - done, access)
                .map_err(|e| {
                    let err: AccessError = e.into();
                    self.faults.push(FaultRecord {
                        at: self.now,
                        error: err.clone(),
                    });
                    err
                })?;
            let path = self.costed_path(requester, &route.hops, route.target, &route.translations);
            let fanout: Vec<_> = route
                .branches
                .iter()
                .map(|b| {
                    let p = self.costed_path(requester, &b.hops, b.target, &route.translations);
                    (b.target, p)
                })
                .collect();
            segments.push(Segment {
                offset: done,
                len: route.len,
                bus_addr: at,
                target: route.target,
                path,
                fanout: fanout.into(),
                translations: route.translations.into(),
            });
            done += route.len;
        }
        Ok(segments)
    }

    /// Starts a posted write; returns the transaction's id and serial number (what an
    /// access's ticket names). While recording, `cause` is the step its first TLP waits for
    /// and `label` what the requester said it was doing.
    pub fn start_write(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        data: impl WriteBytes,
        start: SimTime,
        (cause, label): (StepId, Option<&'static str>),
    ) -> Result<(u32, u32), AccessError> {
        let len = data.len() as u64;
        let segments = self.segments(requester, addr, len, Access::Write)?;
        let zeroes = data.zeroes();
        let data = data.into_buffer(self);
        let (id, serial) = self.new_txn(
            TxnKind::Write,
            requester,
            segments,
            data,
            start,
            cause,
            label,
        );
        if zeroes {
            if let Some(t) = self.txn_mut(id) {
                t.zeroes = true;
            }
        }
        self.reschedule(id);
        Ok((id, serial))
    }

    /// Starts a non-posted read of `len` bytes (what it returns, `cause` and `label` as for a
    /// write).
    pub fn start_read(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
        start: SimTime,
        step: (StepId, Option<&'static str>),
    ) -> Result<(u32, u32), AccessError> {
        let segments = self.segments(requester, addr, len, Access::Read)?;
        Ok(self.start_read_routed(requester, segments, len, start, step))
    }

    /// [`Core::start_read`] of the access `segments` are the route of.
    pub fn start_read_routed(
        &mut self,
        requester: Requester,
        segments: Rc<[Segment]>,
        len: u64,
        start: SimTime,
        (cause, label): (StepId, Option<&'static str>),
    ) -> (u32, u32) {
        // Filled as the requests are answered (see `answer_read`), to `len` when taken.
        let mut data = self.spare_data();
        data.reserve(len as usize);
        let (id, serial) = self.new_txn(
            TxnKind::Read,
            requester,
            segments,
            data,
            start,
            cause,
            label,
        );
        self.reschedule(id);
        (id, serial)
    }

    /// Resolves an access that lands in the requester's own host RAM without crossing a link
    /// (a CPU touching local memory): `Some(phys)` if so.
    #[inline]
    pub fn local_memory(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
    ) -> Option<PhysAddr> {
        let Requester::Cpu(h) = requester else {
            return None;
        };
        let key = (h, addr.get(), len);
        match self.local_cache.get(&key) {
            Some(hit) => *hit,
            None => self.local_memory_routed(key),
        }
    }

    /// [`Core::local_memory`] for an access not asked before: routed, and remembered.
    #[inline(never)]
    fn local_memory_routed(&mut self, key: (HostId, u64, u64)) -> Option<PhysAddr> {
        let (h, addr, len) = key;
        let requester = Requester::Cpu(h);
        let local = match self
            .fabric
            .route(requester, BusAddr(addr), len, Access::Read)
        {
            Ok(route) => match route.target {
                Target::Memory { host, addr }
                    if host == h && route.hops.is_empty() && route.len == len =>
                {
                    Some(addr)
                }
                _ => None,
            },
            Err(_) => None,
        };
        if self.local_cache.len() >= ROUTE_CACHE_ENTRIES {
            self.local_cache.clear();
        }
        self.local_cache.insert(key, local);
        local
    }

    /// Makes a transaction of `kind` whose first step is due at `start`, in a slot of its own
    /// (a spare's if one is parked); its id and serial number. Nothing is queued: the caller
    /// queues its first step ([`Core::reschedule`]) or takes it at once.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn new_txn(
        &mut self,
        kind: TxnKind,
        requester: Requester,
        segments: Rc<[Segment]>,
        data: Vec<u8>,
        start: SimTime,
        gate: StepId,
        label: Option<&'static str>,
    ) -> (u32, u32) {
        if kind == TxnKind::Write {
            if !self.deferred.is_empty() {
                // Its landings are copied when its steps end: a deferred write onto its
                // bytes must land its own in order with them, step by step.
                self.undefer_segments(&segments);
            }
            self.count_writes_into(&segments, true);
        }
        let path_links = segments.first().map_or(1, |s| s.path.forward.len().max(1));
        // Flow control is per link: every link on the path buffers its own share of posted
        // TLPs, so a longer path holds more of them in flight.
        let window = match kind {
            TxnKind::Write => self.timing.posted_credits * path_links,
            TxnKind::Read => usize::MAX,
        };
        self.txn_serial = self.txn_serial.wrapping_add(1);
        let serial = self.txn_serial;
        let txn = match self.spare_txns.pop() {
            // Set field by field: a spare's queues are empty (see `park`) and keep their
            // capacity, and no whole transaction is built to be copied over it.
            Some(mut t) => {
                t.kind = kind;
                t.requester = requester;
                t.segments = segments;
                t.data = data;
                t.zeroes = false;
                t.issue_segment = 0;
                t.issue_offset = 0;
                t.next_issue = start;
                t.waiting_for_tag = false;
                t.waker = None;
                t.result = None;
                t.scheduled = None;
                t.detached = false;
                t.deferred = false;
                t.window = window;
                t.gate = gate;
                t.label = label;
                t.issued_after = gate;
                t.serial = serial;
                t.chips.clear();
                t
            }
            None => Box::new(Txn {
                kind,
                requester,
                segments,
                data,
                zeroes: false,
                issue_segment: 0,
                issue_offset: 0,
                next_issue: start,
                requests: Flights::default(),
                completions: Flights::default(),
                waiting_for_tag: false,
                waker: None,
                result: None,
                scheduled: None,
                detached: false,
                deferred: false,
                window,
                gate,
                label,
                issued_after: gate,
                serial,
                chips: TxnChips::default(),
            }),
        };
        let id = match self.free_txns.pop() {
            Some(id) => {
                self.txns[id as usize] = Some(txn);
                id
            }
            None => {
                self.txns.push(Some(txn));
                self.txns.len() as u32 - 1
            }
        };
        (id, serial)
    }

    /// Makes sure the queue holds an entry at the transaction's next time.
    pub fn reschedule(&mut self, id: u32) {
        let Some(t) = self.txn_mut(id) else { return };
        let next = t.next_time();
        if next.is_some() && (t.scheduled.is_none() || next < t.scheduled) {
            t.scheduled = next;
            if let Some(at) = next {
                self.schedule(at, Event::Txn(id));
            }
        }
    }

    /// Handles a queue entry for a transaction; stale entries are ignored. The transaction
    /// is taken out of its slot while it runs, and goes on without the queue while nothing
    /// else can come first (no task woke, no event is due before its next time).
    pub fn on_txn_event(&mut self, id: u32, at: SimTime) {
        self.woke = false;
        let Some(mut txn) = self.txns.get_mut(id as usize).and_then(Option::take) else {
            self.uncounted_entry(id, at);
            return;
        };
        if txn.scheduled != Some(at) {
            self.txns[id as usize] = Some(txn);
            self.uncounted_entry(id, at);
            return;
        }
        if txn.deferred {
            self.end_deferral(id, &mut txn, at);
        }
        txn.scheduled = None;
        if self.bursts && txn.issue_offset == 0 && txn.issue_segment == 0 {
            // A write's first step, and those after it before the next event, as a burst
            // when it may run in bursts (a device's DMA of a page goes as one train); once
            // it is under way, the generic step costs less when an event cuts it after one.
            let queued = self.next_due();
            let _ = self.write_burst(&mut txn, queued, true);
        }
        loop {
            self.step_txn(id, &mut txn);
            if txn.detached && txn.finished() {
                self.copy_landed(&txn);
                self.free_txns.push(id);
                if txn.kind == TxnKind::Write {
                    self.count_writes_into(&txn.segments, false);
                }
                self.park(txn);
                return;
            }
            let Some(next) = txn.next_time() else { break };
            let queued = self.next_due();
            if self.woke || !before_queued(next, queued) {
                let mut next = next;
                if self.defers && txn.kind == TxnKind::Write && txn.issued_all() {
                    if let Some(last) = self.defer_landings(id, &mut txn, queued) {
                        next = last;
                    }
                } else if self.ahead_on
                    && !self.woke
                    && txn.kind == TxnKind::Write
                    && !txn.issued_all()
                    && self.go_ahead(id, &mut txn)
                {
                    break;
                }
                txn.scheduled = Some(next);
                self.schedule(next, Event::Txn(id));
                break;
            }
            if self.bursts
                && (self.write_burst(&mut txn, queued, false)
                    || self.read_burst(id, &mut txn, queued))
            {
                continue;
            }
            self.step_to(next);
        }
        self.copy_landed(&txn);
        self.txns[id as usize] = Some(txn);
    }

    /// Moves the clock to `at` in place of the next event, which would have been due then
    /// (a timer, an access's first step), counting it as the run counts its events.
    pub fn pass_to(&mut self, at: SimTime) {
        self.step_to(at);
        self.passed_in_place += 1;
    }

    /// Moves the clock to `at`, a step taken without the queue, counted as the run counts
    /// the events it takes from it.
    #[inline(always)]
    fn step_to(&mut self, at: SimTime) {
        self.now = at;
        self.shared_now.set(at);
        self.counters.events += 1;
    }

    /// Runs the first steps of transaction `id`, just started by a task being polled, now:
    /// what the run would do next, when its first step at `at` is the next event (nothing
    /// else queued is due by then, no other task is ready, and `at` is within the run's
    /// deadline — the caller knows). Its steps go on as [`Core::on_txn_event`] takes them,
    /// until the access completes (its requester, which holds no waker yet, counts as woken
    /// and goes on in its poll, at the clock's new time, as the run would have woken it
    /// there) or something else must come first (it then waits as usual). Nothing is done
    /// when its first step is not queued at `at` (a read waiting for a tag).
    pub fn step_in_place(&mut self, id: u32, at: SimTime) {
        let first = self.txn(id).and_then(|t| t.scheduled);
        if first != Some(at) || self.peek_time() != Some(at) || self.ahead.next() <= at {
            return;
        }
        // Its event is the next one: nothing else was due by `at`, and it was queued last.
        let _ = self.queue.pop();
        self.pass_to(at);
        self.in_place_access = Some(id);
        self.on_txn_event(id, at);
        self.in_place_access = None;
    }

    /// Copies the bytes of the write TLPs that have landed in memory but were left in
    /// `txn`'s buffer (see [`Landed`]).
    #[inline]
    fn copy_landed(&mut self, txn: &Txn) {
        if let Some(l) = self.landed.take() {
            txn.land_in(&mut self.memory[l.host.index()], l.addr, l.offset, l.len);
        }
    }

    /// Does everything transaction `id` has due at `now` (it is out of its slot meanwhile).
    #[inline(always)]
    fn step_txn(&mut self, id: u32, txn: &mut Txn) {
        let now = self.now;
        loop {
            if let Some(c) = txn.completions.pop_due(now) {
                self.counters.tlp_arrivals += 1;
                self.set_context(c.step);
                if c.last {
                    let forwarded_by = txn.segments[c.segment as usize].path.forwarded_by;
                    self.free_tag(txn.requester, forwarded_by, id, txn);
                }
                continue;
            }
            if let Some(r) = txn.requests.pop_due(now) {
                self.counters.tlp_arrivals += 1;
                self.set_context(r.step);
                match txn.kind {
                    TxnKind::Write => {
                        self.deliver_write(txn, r);
                        // A credit came back: the next TLP may go now.
                        if self.recording() && txn.requests.len() + 1 == txn.window {
                            txn.gate = r.step;
                        }
                        txn.next_issue = txn.next_issue.max(now);
                    }
                    TxnKind::Read => self.answer_read(txn, r),
                }
                continue;
            }
            if txn.can_issue() && txn.next_issue <= now {
                self.issue(id, txn);
                continue;
            }
            break;
        }
        let complete = match txn.kind {
            TxnKind::Write => txn.issued_all(),
            TxnKind::Read => txn.finished(),
        };
        if complete {
            // A completer abort has already set the result; the reader must still wake.
            txn.result.get_or_insert(Ok(()));
            if let Some(w) = txn.waker.take() {
                // A writer goes on once its last TLP has left (what let that TLP leave is
                // the cause); a reader when its last completion has come (the context).
                if txn.kind == TxnKind::Write {
                    self.set_context(txn.issued_after);
                }
                w.wake();
                self.woke = true;
            } else if self.in_place_access == Some(id) {
                // Its requester goes on in place, as woken (see `step_in_place`).
                self.woke = true;
            }
        }
    }

    /// Sends transaction `id`'s next TLP (a write's next piece, or a read request once a tag
    /// is free), booking its whole path now. Kept out of line: the step loop that calls it
    /// is the engine's hottest code, and compiled worse with it inlined (share-30 +1,000
    /// instructions per I/O).
    #[inline(never)]
    fn issue(&mut self, id: u32, txn: &mut Txn) {
        let Some((len, payload)) = self.next_tlp(id, txn) else {
            return;
        };
        let seg = &txn.segments[txn.issue_segment];
        let path = seg.path.clone();
        let offset = seg.offset + txn.issue_offset;
        let mut cause = txn.gate;
        txn.issued_after = cause;
        let start = self.walk_iommus(txn, &mut cause);
        let tlp = Outgoing {
            segment: txn.issue_segment as u32,
            offset,
            len,
            payload,
            start,
            cause,
        };
        let first_link_done = if seg.fanout.is_empty() {
            self.send_unicast(txn, &path, tlp)
        } else {
            self.send_multicast(txn, &path, tlp)
        };
        // The next TLP may leave once this one has left the requester's link.
        txn.next_issue = first_link_done.max(start);
        txn.issued(len);
    }

    /// The length and payload of transaction `id`'s next TLP: a write's next piece, or a read
    /// request's length once it has a tag (`None`, and the transaction waits, when none is
    /// free).
    #[inline(always)]
    fn next_tlp(&mut self, id: u32, txn: &mut Txn) -> Option<(u64, u64)> {
        let seg = &txn.segments[txn.issue_segment];
        let addr = seg.bus_addr + txn.issue_offset;
        let remaining = seg.len - txn.issue_offset;
        match txn.kind {
            TxnKind::Write => {
                let n = next_chunk(addr, remaining, self.write_limit(txn.requester));
                Some((n, n))
            }
            TxnKind::Read => {
                let (max_read_request, forwarded_by) =
                    (seg.path.max_read_request, seg.path.forwarded_by);
                self.take_tag(id, txn, forwarded_by)
                    .then(|| (next_chunk(addr, remaining, max_read_request), 0))
            }
        }
    }

    /// Takes a tag for transaction `id`'s next read request (from the pool of its requester,
    /// or of the root complex `forwarded_by`); when none is free, the transaction waits for
    /// one (see [`Core::free_tag`]) and this answers false.
    #[inline(always)]
    pub(super) fn take_tag(&mut self, id: u32, txn: &mut Txn, forwarded_by: Option<usize>) -> bool {
        let pool = self.tag_pool(txn.requester, forwarded_by);
        if pool.free == 0 {
            pool.waiting.push_back(id);
            txn.waiting_for_tag = true;
            return false;
        }
        pool.free -= 1;
        true
    }

    /// The largest write TLP `requester` sends: the MPS, and for a CPU at most what its
    /// write combining gathers.
    #[inline(always)]
    fn write_limit(&self, requester: Requester) -> u64 {
        match requester {
            Requester::Cpu(_) => self.timing.sizes.mps.min(self.timing.cpu.max_store_bytes),
            Requester::Device(_) => self.timing.sizes.mps,
        }
    }

    /// When the next TLP of `txn` may leave: after a page walk at each IOMMU whose IOTLB
    /// misses its page (each walk recorded as the cause of what follows).
    #[inline(always)]
    fn walk_iommus(&mut self, txn: &Txn, cause: &mut StepId) -> SimTime {
        let mut start = txn.next_issue;
        let seg = &txn.segments[txn.issue_segment];
        for t in seg.translations.iter() {
            let iommu = &self.fabric.host(t.host).iommu;
            let (invalidations, forced) = (iommu.invalidations(), iommu.forced_flushes());
            let page = (t.iova.get() + txn.issue_offset) / smartio_platform::PAGE_SIZE;
            if let Some(iotlb) = self.iotlbs.get_mut(t.host.index()) {
                if !iotlb.look_up(t.requester, page, invalidations, forced) {
                    let walk = start + SimDuration(self.timing.iotlb_miss_ps);
                    if self.recording() {
                        self.hop_scratch.clear();
                        *cause = self.record(
                            Kind::IotlbMiss { host: t.host },
                            start,
                            walk,
                            *cause,
                            None,
                        );
                    }
                    start = walk;
                }
            }
        }
        start
    }

    /// Sends one TLP of `payload` bytes along `hops` from `start` for `who`, its chips'
    /// latencies those drawn in `chips` (see [`traverse`]); while recording, its hops are
    /// kept in the scratch list for the step that records it.
    #[inline(always)]
    fn cross(
        &mut self,
        hops: &[crate::timing::HopCost],
        start: SimTime,
        payload: u64,
        who: Booking,
        recording: bool,
        chips: &[u64],
    ) -> crate::timing::Crossing {
        self.booking_on(hops);
        let record = if recording {
            self.hop_scratch.clear();
            Some(&mut self.hop_scratch)
        } else {
            None
        };
        traverse(
            &mut self.lanes,
            hops,
            start,
            payload,
            who,
            Some(chips),
            record,
        )
    }

    /// [`Core::cross`] for a TLP sent without a transaction (a lone posted write, a read in
    /// place), not recorded: its chips' latencies drawn as it reaches them, what a
    /// transaction of that one TLP would draw for them.
    #[inline(always)]
    pub(super) fn cross_alone(
        &mut self,
        hops: &[crate::timing::HopCost],
        start: SimTime,
        payload: u64,
        who: Booking,
    ) -> crate::timing::Crossing {
        let taken_back = self.taking_back_on(hops);
        let crossing = crate::timing::traverse_alone(
            &mut self.lanes,
            hops,
            start,
            payload,
            who,
            &mut self.chip_stream,
        );
        if let Some((id, seq)) = taken_back {
            self.ahead_again(id, seq);
        }
        crossing
    }

    /// Sends `tlp` along `path` to the one target of its segment; returns when it has left
    /// the requester's link.
    #[inline(always)]
    fn send_unicast(&mut self, txn: &mut Txn, path: &CostedPath, tlp: Outgoing) -> SimTime {
        let recording = self.recording();
        let who = self.booking(txn.requester);
        let chips = txn
            .chips
            .of(tlp.segment, false, &path.forward, &mut self.chip_stream);
        let crossing = self.cross(&path.forward, tlp.start, tlp.payload, who, recording, chips);
        let at = crossing.arrival + SimDuration(path.arrive_ps);
        let mut step = NONE;
        if recording {
            let seg = &txn.segments[tlp.segment as usize];
            let target = seg.target_at(tlp.offset - seg.offset);
            let kind = Kind::Tlp {
                tlp: tlp_kind(txn.kind),
                requester: txn.requester,
                payload: tlp.len as u32,
                target,
                hops: 0,
                nhops: 0,
            };
            step = self.record(kind, tlp.start, crossing.arrival, tlp.cause, txn.label);
            let left = crossing.first_link_done.max(tlp.start);
            let send = self.record_send(step, left, tlp.cause);
            if path.arrive_ps > 0 {
                self.hop_scratch.clear();
                let host = memory_host(&target);
                let interrupt = matches!(target, Target::Interrupt { .. });
                let kind = Kind::IntoMemory { host, interrupt };
                step = self.record(kind, crossing.arrival, at, step, None);
            }
            txn.gate = send;
        }
        txn.requests.insert(tlp.in_flight(at, 0, step));
        crossing.first_link_done
    }

    /// Sends `tlp`, a multicast write, to every copy of its segment: the switches replicate
    /// it and shared links carry it once. Returns when it has left the requester's link.
    fn send_multicast(&mut self, txn: &mut Txn, path: &CostedPath, tlp: Outgoing) -> SimTime {
        let fanout = txn.segments[tlp.segment as usize].fanout.clone();
        for (_, p) in fanout.iter() {
            self.booking_on(&p.forward);
        }
        let paths: Vec<&[crate::timing::HopCost]> =
            fanout.iter().map(|(_, p)| p.forward.as_slice()).collect();
        let who = self.booking(txn.requester);
        let ends = traverse_tree(&mut self.lanes, &paths, tlp.start, tlp.payload, who);
        for (copy, (end, (target, p))) in ends.into_iter().zip(fanout.iter()).enumerate() {
            let at = end + SimDuration(p.arrive_ps);
            let mut step = NONE;
            if self.recording() {
                // The copies' hops are not kept: each is one step.
                self.hop_scratch.clear();
                let kind = Kind::Tlp {
                    tlp: tlp_kind(txn.kind),
                    requester: txn.requester,
                    payload: tlp.len as u32,
                    target: *target,
                    hops: 0,
                    nhops: 0,
                };
                step = self.record(kind, tlp.start, at, tlp.cause, txn.label);
            }
            txn.requests.insert(tlp.in_flight(at, copy as u32, step));
        }
        // The replicated TLP leaves the requester's link once, at its booked end.
        match path.forward.first() {
            Some(h) => SimTime(self.lanes[lane(h.link, h.dir)].busy_until()),
            None => tlp.start,
        }
    }

    fn free_tag(
        &mut self,
        requester: Requester,
        forwarded_by: Option<usize>,
        own: u32,
        txn: &mut Txn,
    ) {
        let now = self.now;
        let pool = self.tag_pool(requester, forwarded_by);
        pool.free += 1;
        // Wake one waiting transaction (possibly this one).
        if let Some(waiter) = pool.waiting.pop_front() {
            let freed_by = self.context();
            if waiter == own {
                txn.waiting_for_tag = false;
                txn.next_issue = txn.next_issue.max(now);
                txn.gate = freed_by;
            } else if let Some(t) = self.txn_mut(waiter) {
                t.waiting_for_tag = false;
                t.next_issue = t.next_issue.max(now);
                t.gate = freed_by;
                self.reschedule(waiter);
            }
        }
    }

    fn deliver_write(&mut self, txn: &Txn, r: InFlight) {
        let seg = &txn.segments[r.segment as usize];
        let target = seg.copy_target_at(r.copy, r.offset - seg.offset);
        if let Target::Memory { host, addr } = target {
            if !self.recording() {
                // Its watchers learn of it now; the bytes follow the transaction's earlier
                // ones in one copy when they continue them (see `Landed`).
                let len = u64::from(r.len);
                self.land(txn, host, addr.get(), r.offset, len);
                self.memory_changed(host, addr, len);
                return;
            }
        }
        self.copy_landed(txn);
        let data = if txn.zeroes {
            &ZERO_TLP[..r.len as usize]
        } else {
            &txn.data[r.offset as usize..r.offset as usize + r.len as usize]
        };
        self.deliver_bytes(txn.requester, target, data, r.step);
    }

    /// `requester`'s write TLP of `data` lands at `target` (`step`: the TLP's recorded step).
    fn deliver_bytes(&mut self, requester: Requester, target: Target, data: &[u8], step: StepId) {
        match target {
            // A multicast write with no member left to receive it.
            Target::Multicast { .. } => {}
            Target::Memory { host, addr } => self.write_memory(host, addr, data),
            Target::Bar {
                endpoint,
                bar,
                offset,
            } => {
                // A device may wake its own task from the handler.
                self.woke = true;
                if let Err(e) = self.bar_write(endpoint, bar, offset, data) {
                    self.faults.push(FaultRecord {
                        at: self.now,
                        error: e,
                    });
                }
            }
            Target::Interrupt { host, .. } => {
                let mut v = [0u8; 4];
                let n = data.len().min(4);
                v[..n].copy_from_slice(&data[..n]);
                let delivery = self.timing.cpu.interrupt_delivery;
                let raiser = match requester {
                    Requester::Cpu(h) => h.index(),
                    Requester::Device(e) => self.fabric.hosts().len() + e.index(),
                };
                let at = match self.interrupt_streams.get_mut(raiser) {
                    Some(stream) => self.now + delivery.sample(stream),
                    None => self.now + delivery.typical,
                };
                let vector = u32::from_le_bytes(v);
                let cause = step;
                let mut step = NONE;
                if self.recording() {
                    self.hop_scratch.clear();
                    let kind = Kind::InterruptDelivery { host, vector };
                    step = self.record(kind, self.now, at, cause, None);
                }
                self.schedule(
                    at,
                    Event::Interrupt {
                        host: host.0,
                        vector,
                        step,
                    },
                );
            }
        }
    }

    /// An interrupt raised by `host`'s own CPUs (no TLP): delivered after the interrupt
    /// delivery time, drawn from the host CPU's stream.
    pub fn raise_interrupt(&mut self, host: HostId, vector: u32) {
        let delivery = self.timing.cpu.interrupt_delivery;
        let at = match self.interrupt_streams.get_mut(host.index()) {
            Some(stream) => self.now + delivery.sample(stream),
            None => self.now + delivery.typical,
        };
        let mut step = NONE;
        if self.recording() {
            self.hop_scratch.clear();
            let cause = self.context();
            let kind = Kind::InterruptDelivery { host, vector };
            step = self.record(kind, self.now, at, cause, None);
        }
        self.schedule(
            at,
            Event::Interrupt {
                host: host.0,
                vector,
                step,
            },
        );
    }

    fn bar_write(
        &mut self,
        endpoint: EndpointId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), AccessError> {
        let name = || self.fabric.endpoint(endpoint).name.clone();
        match &self.bar_handlers[endpoint.index()] {
            Some(h) => {
                h.mmio_write(bar, offset, data)
                    .map_err(|reason| AccessError::CompleterAbort {
                        target: format!("{} BAR{bar}", name()),
                        offset,
                        reason,
                    })
            }
            None => Err(AccessError::CompleterAbort {
                target: format!("{} BAR{bar}", name()),
                offset,
                reason: smartio_platform::CompleterError::OutOfRange,
            }),
        }
    }

    /// Who books a link for `requester`'s TLPs, now: its read completions and requests keep
    /// their order, other requesters' TLPs may pass them.
    fn booking(&self, requester: Requester) -> Booking {
        self.booking_for(flow_of(requester))
    }

    /// [`Core::booking`] for a requester's `flow` already known.
    #[inline(always)]
    fn booking_for(&self, flow: Flow) -> Booking {
        Booking {
            now: self.now.as_ps(),
            flow,
        }
    }

    /// A read request reached its completer: the bytes asked are read into the transaction's
    /// buffer, then sent back as completions.
    #[inline(always)]
    fn answer_read(&mut self, txn: &mut Txn, r: InFlight) {
        self.read_completer(txn, r);
        self.send_completions(txn, r);
    }

    /// Reads request `r`'s bytes from its target into `txn`'s buffer: memory (appended when
    /// answered in order, the usual case), a BAR's handler (all ones and a completer abort
    /// when it refuses), or all ones for an interrupt or an empty group.
    #[inline(always)]
    pub(super) fn read_completer(&mut self, txn: &mut Txn, r: InFlight) {
        let seg = &txn.segments[r.segment as usize];
        let range = r.offset as usize..r.offset as usize + r.len as usize;
        let target = seg.target_at(r.offset - seg.offset);
        if let Target::Memory { host, addr } = target {
            self.settle_range(host, addr.get(), range.len() as u64);
            if txn.data.len() == range.start {
                // Answered in order (the usual case): the bytes are appended, never zeroed.
                self.memory[host.index()].read_append(addr.get(), range.len(), &mut txn.data);
            } else {
                if txn.data.len() < range.end {
                    txn.data.resize(range.end, 0);
                }
                self.memory[host.index()].read(addr.get(), &mut txn.data[range.clone()]);
            }
        } else if txn.data.len() < range.end {
            txn.data.resize(range.end, 0);
        }
        match target {
            Target::Memory { .. } => {}
            Target::Bar {
                endpoint,
                bar,
                offset,
            } => {
                let result = match &self.bar_handlers[endpoint.index()] {
                    Some(h) => h.mmio_read(bar, offset, &mut txn.data[range.clone()]),
                    None => Err(smartio_platform::CompleterError::OutOfRange),
                };
                if let Err(reason) = result {
                    txn.data[range].fill(0xff);
                    let err = AccessError::CompleterAbort {
                        target: format!("{} BAR{bar}", self.fabric.endpoint(endpoint).name),
                        offset,
                        reason,
                    };
                    self.faults.push(FaultRecord {
                        at: self.now,
                        error: err.clone(),
                    });
                    txn.result.get_or_insert(Err(err));
                }
            }
            Target::Interrupt { .. } | Target::Multicast { .. } => txn.data[range].fill(0xff),
        }
    }

    /// Sends request `r`'s completions back to the requester after the completer's read
    /// latency: split at read-completion boundaries, at most `completion_max` each.
    #[inline(always)]
    fn send_completions(&mut self, txn: &mut Txn, r: InFlight) {
        let seg = &txn.segments[r.segment as usize];
        let path = seg.path.clone();
        let sizes = self.timing.sizes;
        // The completer answers after its read latency; completions then queue on its link.
        let start = self.now + SimDuration(path.read_ps);
        let recording = self.recording();
        let mut read_step = NONE;
        if recording {
            self.hop_scratch.clear();
            let target = seg.target_at(r.offset - seg.offset);
            read_step = self.record(
                Kind::CompleterRead { target },
                self.now,
                start,
                r.step,
                None,
            );
        }
        let mut done = 0u64;
        let bus = seg.bus_addr + (r.offset - seg.offset);
        let who = self.booking(txn.requester);
        while done < r.len as u64 {
            let at_addr = bus + done;
            let n = next_chunk(
                at_addr,
                r.len as u64 - done,
                sizes.completion_max.max(sizes.rcb),
            );
            let chips = txn
                .chips
                .of(r.segment, true, &path.backward, &mut self.chip_stream);
            let arrival = self
                .cross(&path.backward, start, n, who, recording, chips)
                .arrival;
            let end = arrival + SimDuration(path.return_ps);
            let mut step = NONE;
            if recording {
                let kind = Kind::Tlp {
                    tlp: TlpKind::Completion,
                    requester: txn.requester,
                    payload: n as u32,
                    target: seg.target_at(r.offset - seg.offset + done),
                    hops: 0,
                    nhops: 0,
                };
                step = self.record(kind, start, arrival, read_step, txn.label);
                if path.return_ps > 0 {
                    self.hop_scratch.clear();
                    let host = match txn.requester {
                        Requester::Cpu(h) => h,
                        Requester::Device(e) => self.fabric.endpoint(e).host,
                    };
                    step = self.record(Kind::ReturnToCore { host }, arrival, end, step, None);
                }
            }
            let last = done + n >= r.len as u64;
            txn.completions.insert(InFlight {
                at: end,
                segment: r.segment,
                offset: r.offset + done,
                len: n as u32,
                last,
                copy: 0,
                step,
            });
            done += n;
        }
    }
}

/// The flow `requester`'s TLPs are booked in (see [`Core::booking`]).
#[inline(always)]
fn flow_of(requester: Requester) -> Flow {
    match requester {
        Requester::Cpu(h) => h.0.saturating_mul(2),
        Requester::Device(e) => e.0.saturating_mul(2).saturating_add(1),
    }
}

/// Whether a transaction's step at `at` comes before the first event `queued`, so that it
/// may run without the queue: at the same time the queued event comes first (ties resolve
/// first-in-first-out, and the step would be queued after it).
#[inline(always)]
fn before_queued(at: SimTime, queued: Option<SimTime>) -> bool {
    queued.is_none_or(|q| at < q)
}

/// Most bytes [`Landed`] gathers for one copy: a page. glibc copies that in a vector loop; from
/// about 16 KiB it uses `rep movsb`, no faster on hardware and counted by callgrind (this
/// project's yardstick, `scripts/instructions.sh`) as an instruction per byte.
const LANDED_BYTES: u64 = 4096;

/// Write TLPs of one transaction that landed in memory back to back (each one continuing the
/// last, in memory and in the transaction's buffer) while the transaction was stepped, whose
/// bytes are still only in the transaction's buffer: [`Core::copy_landed`] copies them all
/// at once when the run of steps ends, before anything else could look (a woken task runs
/// after the step, a BAR handler or another transaction's delivery after the copy), or when
/// the next write does not continue them. Their watchers were told as each landed.
#[derive(Debug, Clone, Copy)]
struct Landed {
    host: HostId,
    /// Where the first byte landed.
    addr: u64,
    /// Where the first byte is in the transaction's buffer.
    offset: u64,
    len: u64,
}

impl Landed {
    /// Whether a write of `len` bytes to `addr` of `host` from `offset` in the buffer
    /// continues these (up to [`LANDED_BYTES`] in all).
    #[inline]
    fn continued_by(&self, host: HostId, addr: u64, offset: u64, len: u64) -> bool {
        self.host == host
            && self.addr + self.len == addr
            && self.offset + self.len == offset
            && self.len + len <= LANDED_BYTES
    }
}

/// A TLP about to be sent: where it is in its transaction, its size, when it may leave and
/// (while recording) what it waited for.
#[derive(Debug, Clone, Copy)]
struct Outgoing {
    segment: u32,
    offset: u64,
    /// Its length (a read request's: the length asked).
    len: u64,
    /// Payload bytes on the wire (none for a read request).
    payload: u64,
    start: SimTime,
    cause: StepId,
}

impl Outgoing {
    /// This TLP on its way, arriving at `at` (`copy`: which copy of a multicast write;
    /// `step`: the recorded step that brings it).
    #[inline(always)]
    fn in_flight(&self, at: SimTime, copy: u32, step: StepId) -> InFlight {
        InFlight {
            at,
            segment: self.segment,
            offset: self.offset,
            len: self.len as u32,
            last: false,
            copy,
            step,
        }
    }
}

/// The kind of TLP a transaction sends.
fn tlp_kind(kind: TxnKind) -> TlpKind {
    match kind {
        TxnKind::Write => TlpKind::Write,
        TxnKind::Read => TlpKind::ReadRequest,
    }
}

/// The host whose memory (or interrupt controller) a target is in, for the root complex's
/// last leg; a BAR or a group has none (their paths add nothing at the target).
fn memory_host(target: &Target) -> HostId {
    match *target {
        Target::Memory { host, .. } | Target::Interrupt { host, .. } => host,
        Target::Bar { .. } | Target::Multicast { .. } => HostId(0),
    }
}
