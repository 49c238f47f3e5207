//! The timed engine's handle: spawn agents, run, and give agents their ports.
//!
//! Agents are `async` tasks (drivers, workloads, device engines) polled by a small
//! single-threaded executor (`crate::executor`). The run loop alternates: poll every ready
//! task at the current time, then advance to the next event. Nothing reads the wall clock.
//! When a run ends with tasks still waiting, [`Sim::blocked_tasks`] says where each was
//! spawned and what it waits for.

use crate::calibration::Calibration;
use crate::core::{
    Core, Counters, Event, FaultRecord, LinkEvent, ReadInPlace, WriteBytes, Zeroes, MAX_PAYLOAD,
};
use crate::executor::Executor;
use crate::ops::{Access, AccessOp, Begun, InterruptOp, Op, Ops, TimerOp, WatchOp};
use crate::record;
use crate::timing::{CpuTiming, LinkState, Timing, TimingError};
use crate::wait::{BlockedTask, Wait};
use crate::waiters::TimerKey;
use smartio_fabric::{EndpointId, Fabric, HostId, Requester};
use smartio_machine::Ticket;
use smartio_platform::{AccessError, BarHandler, BusAddr, PhysAddr, SimDuration, SimTime};
use std::cell::{Cell, Ref, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::panic::Location;
use std::rc::Rc;
use std::task::{Context, Poll};

struct Inner {
    core: RefCell<Core>,
    /// The operations agents have under way, named by tickets.
    ops: RefCell<Ops>,
    exec: Executor,
    /// The core's time, readable while the core is borrowed (by a BAR handler).
    now: Rc<std::cell::Cell<SimTime>>,
    /// The CPU costs of the core's timing, which never change during a run: kept apart so
    /// that the OS model and drivers, which ask for them on every I/O, borrow nothing.
    cpu: CpuTiming,
    /// While a run polls a task: the latest time the run may reach (its deadline). `None`
    /// otherwise: no cost passes in place outside a task's poll ([`Sim::pass_in_place`]).
    /// Apart from the core, so that setting it around each poll borrows nothing.
    horizon: Cell<Option<SimTime>>,
}

/// A handle to one timed simulation. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct Sim {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim").field("now", &self.now()).finish()
    }
}

pub use smartio_machine::RunSummary;

impl Sim {
    /// A simulation of `fabric` timed by `calibration`, its varying times drawn under the
    /// default seed.
    pub fn new(fabric: Fabric, calibration: &Calibration) -> Result<Sim, TimingError> {
        Self::seeded(
            fabric,
            calibration,
            smartio_platform::variation::DEFAULT_SEED,
        )
    }

    /// A simulation of `fabric` timed by `calibration` whose varying times (chip latencies
    /// per TLP, interrupt delivery) are drawn from streams of `seed`.
    pub fn seeded(
        mut fabric: Fabric,
        calibration: &Calibration,
        seed: u64,
    ) -> Result<Sim, TimingError> {
        calibration.configure_fabric(&mut fabric);
        let timing = Timing::resolve(&fabric, calibration)?;
        let exec = Executor::new();
        let core = Core::new(fabric, timing, seed, exec.ready());
        Ok(Sim {
            inner: Rc::new(Inner {
                now: core.shared_now.clone(),
                cpu: core.timing.cpu,
                core: RefCell::new(core),
                ops: RefCell::new(Ops::default()),
                exec,
                horizon: Cell::new(None),
            }),
        })
    }

    /// The current virtual time (readable from inside a BAR handler too).
    pub fn now(&self) -> SimTime {
        self.inner.now.get()
    }

    /// The fabric (read-only view).
    pub fn fabric(&self) -> Ref<'_, Fabric> {
        Ref::map(self.inner.core.borrow(), |c| &c.fabric)
    }

    /// Changes the fabric (IOMMU mappings), e.g. from a driver's DMA API.
    pub fn with_fabric_mut<R>(&self, f: impl FnOnce(&mut Fabric) -> R) -> R {
        let mut core = self.inner.core.borrow_mut();
        let out = f(&mut core.fabric);
        core.fabric_changed();
        out
    }

    /// The CPU and software costs of the resolved timing (the same as `timing().cpu`,
    /// without borrowing the core).
    pub(crate) fn cpu_costs(&self) -> &CpuTiming {
        &self.inner.cpu
    }

    /// The resolved timing.
    pub fn timing(&self) -> Ref<'_, Timing> {
        Ref::map(self.inner.core.borrow(), |c| &c.timing)
    }

    /// Starts an agent. It first runs at the current time. The caller's location is kept
    /// for [`Sim::blocked_tasks`].
    #[track_caller]
    pub fn spawn(&self, future: impl Future<Output = ()> + 'static) {
        self.inner.exec.spawn(Box::pin(future), Location::caller());
    }

    /// Starts a boxed task spawned at `at`.
    pub(crate) fn spawn_at(
        &self,
        task: smartio_platform::LocalTask,
        at: &'static Location<'static>,
    ) {
        self.inner.exec.spawn(task, at);
    }

    /// Drops every task, ready or waiting. Tasks hold handles to their simulation (every
    /// agent does), so a simulation with tasks left is never freed: a process that builds
    /// many (tests, fuzzers) calls this when it is done with one.
    pub fn shutdown(&self) {
        self.inner.exec.clear();
    }

    /// Makes `handler` answer accesses to the endpoint's BARs.
    pub fn attach_bar_handler(&self, endpoint: EndpointId, handler: Rc<dyn BarHandler>) {
        self.inner.core.borrow_mut().bar_handlers[endpoint.index()] = Some(handler);
    }

    /// Makes `handler` answer configuration requests to the endpoint.
    pub fn attach_config_handler(
        &self,
        endpoint: EndpointId,
        handler: Rc<dyn smartio_platform::ConfigHandler>,
    ) {
        self.inner.core.borrow_mut().config_handlers[endpoint.index()] = Some(handler);
    }

    /// Runs until no task is ready and no event is pending.
    pub fn run(&self) -> RunSummary {
        self.run_until(SimTime(u64::MAX))
    }

    /// Runs until `deadline` (events after it stay pending).
    pub fn run_until(&self, deadline: SimTime) -> RunSummary {
        self.inner.core.borrow_mut().set_deadline(deadline);
        loop {
            self.poll_ready(deadline);
            let mut core = self.inner.core.borrow_mut();
            if core.ahead_due(deadline) {
                // The write ahead's steps come first (see `core::ahead`).
                core.cross_ahead(deadline);
                continue;
            }
            match core.peek_time() {
                Some(t) if t <= deadline => {}
                _ => break,
            }
            let Some((at, event)) = core.pop() else { break };
            take_event(&mut core, at, event);
        }
        let mut core = self.inner.core.borrow_mut();
        core.settle_to_deadline(deadline);
        let blocked = self.inner.exec.live();
        RunSummary {
            end: core.now,
            counters: core.counters,
            blocked_tasks: blocked,
        }
    }

    /// Takes the run's next steps from inside the poll of a task that just armed `timer`
    /// (due at `at`) for an access of its own RAM, in their order, up to that timer, while
    /// none of them wakes a task: `true` when the timer came up, given back (the access is
    /// done in place: the task goes on at once, as it would have when the timer woke it,
    /// since all that happened meanwhile involved no task). `false` when a step woke a task,
    /// or nothing may run in place now (see [`Sim::next_in_place`]): the timer stays, and a
    /// woken task is polled next, at its time, as the run would have polled it.
    fn run_to_own_timer(&self, core: &mut Core, timer: TimerKey, at: SimTime) -> bool {
        if !self.may_run_in_place(core, at) {
            return false;
        }
        loop {
            match step_to_own(
                core,
                at,
                |e| matches!(e, Event::Timer(key) if *key == timer),
            ) {
                InPoll::Own(t) => {
                    core.pass_to(t);
                    core.timers.remove(timer);
                    core.ran_to_own += 1;
                    return true;
                }
                // The timer is queued at `at`: the queue holds an entry by then.
                InPoll::Empty => return false,
                InPoll::Stepped if self.inner.exec.any_ready() => return false,
                InPoll::Stepped => {}
            }
        }
    }

    /// [`Sim::run_to_own_timer`] for a posted write the task being polled has just queued
    /// (`slot`, leaving at `at`): `true` when it has left with no task woken meanwhile (the
    /// writer goes on at once, as it would have when woken by its leaving), `false` with it
    /// still to leave or a task woken (the writer waits for it as usual).
    fn run_to_posted_leaving(&self, core: &mut Core, slot: (u32, u32), at: SimTime) -> bool {
        if !self.may_run_in_place(core, at) {
            return false;
        }
        core.wait_posted_in_place(slot);
        loop {
            match step_to_own(core, at, |_| false) {
                // Its leaving is queued at `at`: the queue holds an entry by then.
                InPoll::Own(_) | InPoll::Empty => return false,
                InPoll::Stepped if self.inner.exec.any_ready() => return false,
                InPoll::Stepped if core.posted_left(slot) => {
                    core.passed_in_place += 1;
                    core.ran_to_own += 1;
                    return true;
                }
                InPoll::Stepped => {}
            }
        }
    }

    /// Whether the task being polled may take the run's next steps up to `at` from inside
    /// its poll (see [`Sim::run_to_own_timer`]): in place allowed, `at` a time, not recording
    /// (the recording keeps each step), a task's poll within the run's deadline, no other
    /// task ready, not inside a race (the other future may be ready first).
    #[inline]
    fn may_run_in_place(&self, core: &Core, at: SimTime) -> bool {
        core.in_place
            && at != SimTime::NEVER
            && !core.recording()
            && self.inner.horizon.get().is_some_and(|h| at <= h)
            && !self.inner.exec.any_ready()
            && !smartio_platform::race::racing()
    }

    /// Polls the ready tasks, each once, in the order they woke, and those they wake; a cost
    /// one spends may pass in place up to `deadline` ([`Sim::pass_in_place`]).
    fn poll_ready(&self, deadline: SimTime) {
        if !self.inner.exec.any_ready() {
            return;
        }
        while let Some(mut taken) = self.inner.exec.take_ready() {
            {
                let mut core = self.inner.core.borrow_mut();
                core.waits.clear();
                if core.recording() {
                    // The task acts on what woke it.
                    core.set_context(taken.cause);
                    smartio_platform::activity::clear();
                }
            }
            smartio_platform::waiting::clear();
            let mut cx = Context::from_waker(&taken.waker);
            self.inner.horizon.set(Some(deadline));
            let pending = taken.task.as_mut().poll(&mut cx).is_pending();
            self.inner.horizon.set(None);
            if pending {
                // What it waits for goes to its slot (the slot's old list comes back, to be
                // cleared before the next poll).
                let mut core = self.inner.core.borrow_mut();
                smartio_platform::waiting::drain(|n| core.waits.push(Wait::Note(n)));
                self.inner.exec.put_back(taken, &mut core.waits);
            } else {
                self.inner.exec.finish(taken);
            }
        }
    }

    /// The tasks that have not finished: where each was spawned and what it waits for.
    /// After [`Sim::run`] these wait for something that will not happen (device engines
    /// waiting for their next doorbell are among them, by design).
    pub fn blocked_tasks(&self) -> Vec<BlockedTask> {
        let fabric = self.fabric();
        self.inner
            .exec
            .blocked()
            .into_iter()
            .map(|(at, waits)| BlockedTask {
                spawned_at: format!("{}:{}", at.file(), at.line()),
                waits: waits.iter().map(|w| w.describe(&fabric)).collect(),
            })
            .collect()
    }

    /// [`Sim::blocked_tasks`] in one line, grouped, for an error message.
    pub fn blocked_summary(&self) -> String {
        crate::wait::summarize(&self.blocked_tasks(), 8)
    }

    /// Timers and memory watches armed and not yet given back (a run's memory must not grow
    /// with its length; tests check these stay bounded).
    pub fn armed_waiters(&self) -> (usize, usize) {
        let core = self.inner.core.borrow();
        (core.timers.live(), core.watches.len())
    }

    /// Transactions started and not freed yet (an access dropped before it was done leaves
    /// its transaction to finish, and be freed, on its own).
    pub fn live_transactions(&self) -> usize {
        self.inner.core.borrow().live_txns()
    }

    /// Task slots the executor holds: the most tasks ever alive at once, not the number
    /// ever spawned (finished tasks' slots are reused).
    pub fn task_slots(&self) -> usize {
        self.inner.exec.slots()
    }

    /// Takes a link down (`up = false`) or brings it up at virtual time `at`. Until it comes
    /// back, posted writes over it are dropped and reads over it fail (the requester sees
    /// all-ones).
    pub fn schedule_link_state(&self, link: smartio_fabric::LinkId, up: bool, at: SimTime) {
        self.inner
            .core
            .borrow_mut()
            .schedule(at, Event::LinkState { link: link.0, up });
    }

    /// Link state changes so far, in order.
    pub fn link_events(&self) -> Vec<LinkEvent> {
        self.inner.core.borrow().link_log.clone()
    }

    /// Waits until more than `seen` link state changes have happened; returns the next one.
    pub async fn next_link_event(&self, seen: usize) -> LinkEvent {
        std::future::poll_fn(|cx| {
            let mut core = self.inner.core.borrow_mut();
            match core.link_log.get(seen) {
                Some(e) => Poll::Ready(e.clone()),
                None => {
                    if !core.link_waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        core.link_waiters.push(cx.waker().clone());
                    }
                    core.waits.push(Wait::LinkEvent);
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Raises interrupt `vector` on `host` from its own CPUs (an inter-processor interrupt):
    /// delivered after the interrupt delivery time, no TLP.
    pub fn raise_interrupt(&self, host: HostId, vector: u32) {
        self.inner.core.borrow_mut().raise_interrupt(host, vector);
    }

    /// Whether a posted write into memory or a read of memory may run its steps in bursts
    /// when nothing else can come between them (on by default). Off, every transaction goes
    /// step by step: the results are the same, bit for bit, the run slower (for comparisons
    /// and tests).
    pub fn set_bursts(&self, on: bool) {
        self.inner.core.borrow_mut().bursts = on;
    }

    /// Whether a burst's write TLPs that leave one after another may be sent as a train, the
    /// steps between them taken at once (on by default; only within bursts). Off, one step at
    /// a time: the results are the same, bit for bit, the run slower (for comparisons and
    /// tests).
    pub fn set_trains(&self, on: bool) {
        self.inner.core.borrow_mut().trains = on;
    }

    /// Whether a cost a task spends ([`smartio_platform::Clock::spend`]) may pass in place,
    /// and an access it starts take its first steps in place, when nothing else could happen
    /// meanwhile (on by default; see `Sim::pass_in_place` and `Core::step_in_place`; a
    /// posted write of one TLP is then sent at once: see [`Sim::set_posted_alone`]).
    /// Off, every cost is a timer and every step an event: the results are the same, bit for
    /// bit, the run slower (for comparisons and tests).
    pub fn set_in_place(&self, on: bool) {
        self.inner.core.borrow_mut().in_place = on;
    }

    /// How many costs and accesses so far passed in place (see [`Sim::set_in_place`]).
    pub fn passed_in_place(&self) -> u64 {
        self.inner.core.borrow().passed_in_place
    }

    /// How many of those went on once the steps their task took from its poll came to
    /// their own (CPU accesses of their own RAM and posted writes with events due before
    /// their end; see `Sim::run_to_own_timer`).
    pub fn ran_to_own(&self) -> u64 {
        self.inner.core.borrow().ran_to_own
    }

    /// Lets a cost of `duration`, which the task being polled spends now and awaits at once,
    /// pass in place: moves the clock to its end and returns `true` when that is what its
    /// timer would come to. The timer's event would be the next one (nothing queued is due
    /// at or before its end, and no other task is ready to run first), and it would wake
    /// only this task, whose next poll would go on from the await; so the task goes on in
    /// this poll instead, the event counted as the timer's would be. Not while recording
    /// (the recording keeps each sleep as a step), not past the run's deadline, not outside
    /// a task's poll, not inside a race, and never when the cost has no end. `false`, and
    /// nothing changed, otherwise: the caller arms the timer.
    #[inline]
    pub(crate) fn pass_in_place(&self, duration: SimDuration) -> bool {
        let mut core = self.inner.core.borrow_mut();
        let end = core.now + duration;
        let passes = end != SimTime::NEVER && self.next_in_place(&core, end);
        if passes {
            core.pass_to(end);
        }
        passes
    }

    /// Whether what the task being polled starts now, due at `at`, would be the run's next
    /// event: it may run in place up to `at` ([`Sim::may_run_in_place`]) and nothing queued
    /// is due by then.
    #[inline]
    fn next_in_place(&self, core: &Core, at: SimTime) -> bool {
        // The queue asked first: with other flows under way it is what most often says no.
        core.next_time().is_none_or(|next| next > at) && self.may_run_in_place(core, at)
    }

    /// Whether a write cut by an event may book the rest of it ahead, its steps taken in
    /// their place among the queued events until something else books on its links (on by
    /// default; see `core::ahead`). Off, it is queued at each next step: the results are
    /// the same, bit for bit, the run slower (for comparisons and tests).
    pub fn set_aheads(&self, on: bool) {
        let mut core = self.inner.core.borrow_mut();
        core.rollback_ahead();
        core.ahead_on = on;
    }

    /// Writes that went ahead so far, the steps they took ahead, and how many of them were
    /// taken back (see [`Sim::set_aheads`]).
    pub fn ahead_counts(&self) -> (u64, u64, u64) {
        let core = self.inner.core.borrow();
        (core.aheads, core.ahead_steps, core.ahead_rollbacks)
    }

    /// Of the writes ahead taken back for a lone TLP of another flow on their links, how
    /// many went ahead again once it had booked (see [`Sim::set_aheads`]).
    pub fn aheads_again(&self) -> u64 {
        self.inner.core.borrow().aheads_again
    }

    /// How many of the run's steps so far ran in bursts (see [`Sim::set_bursts`]).
    pub fn burst_steps(&self) -> u64 {
        self.inner.core.borrow().burst_steps
    }

    /// Whether a posted write of one TLP to one target may go without a transaction (on by
    /// default; see `core::posted`). Off, every write is a transaction: the results are the
    /// same, bit for bit, the run slower (for comparisons and tests).
    pub fn set_posted_alone(&self, on: bool) {
        self.inner.core.borrow_mut().posts_alone = on;
    }

    /// Whether a read of one request answered by one completion may run in place without a
    /// transaction (on by default; see `core::single_read`). Off, every read is a
    /// transaction: the results are the same, bit for bit, the run slower (for comparisons
    /// and tests).
    pub fn set_reads_alone(&self, on: bool) {
        self.inner.core.borrow_mut().reads_alone = on;
    }

    /// How many reads so far ran in place without a transaction (see
    /// [`Sim::set_reads_alone`]).
    pub fn reads_in_place(&self) -> u64 {
        self.inner.core.borrow().reads_in_place
    }

    /// How many posted writes so far went without a transaction (see
    /// [`Sim::set_posted_alone`]).
    pub fn posted_alone(&self) -> u64 {
        self.inner.core.borrow().posted_alone
    }

    /// Whether the landings of a posted write into memory that has sent all its TLPs may
    /// wait until someone looks at those bytes, the engine's counters or the end of the run
    /// (on by default; see `core::deferred`). Off, each landing is a step: the results are
    /// the same, bit for bit, the run slower (for comparisons and tests).
    pub fn set_deferred_landings(&self, on: bool) {
        let mut core = self.inner.core.borrow_mut();
        if !on {
            core.undefer_overlapping(None);
        }
        core.defers = on;
    }

    /// How many landing steps so far were deferred (see [`Sim::set_deferred_landings`]).
    pub fn deferred_steps(&self) -> u64 {
        self.inner.core.borrow().deferred_steps
    }

    /// How many TLPs so far were sent in trains (see [`Sim::set_trains`]).
    pub fn train_tlps(&self) -> u64 {
        self.inner.core.borrow().train_tlps
    }

    /// Starts recording where time goes from now on; with `trace_limit`, the run's first
    /// steps, up to that many trace slices, are also kept for [`Sim::take_trace`].
    pub fn start_recording(&self, trace_limit: Option<usize>) {
        self.inner.core.borrow_mut().start_recording(trace_limit);
    }

    /// While recording: the step that woke the running task.
    pub fn current_step(&self) -> Option<record::StepId> {
        let core = self.inner.core.borrow();
        core.recording().then(|| core.context())
    }

    /// While recording: the critical path of an operation from `start` to `end` whose end
    /// step `last` announced.
    pub fn critical_path(
        &self,
        last: record::StepId,
        start: SimTime,
        end: SimTime,
    ) -> Option<smartio_machine::CriticalPath> {
        let core = self.inner.core.borrow();
        let names = record::Names {
            fabric: &core.fabric,
            timing: &core.timing,
        };
        Some(core.recorder()?.critical_path(&names, last, start, end))
    }

    /// Adds a workload's operation to the trace.
    pub fn trace_span(&self, track: &str, name: &str, start: SimTime, end: SimTime) {
        if let Some(r) = self.inner.core.borrow_mut().recorder_mut() {
            r.span(track, name, start, end);
        }
    }

    /// The trace kept so far, taken.
    pub fn take_trace(&self) -> Option<smartio_machine::Trace> {
        let mut core = self.inner.core.borrow_mut();
        let core = &mut *core;
        let names = record::Names {
            fabric: &core.fabric,
            timing: &core.timing,
        };
        core.recorder.as_deref_mut()?.take_trace(&names)
    }

    /// Engine counters so far.
    pub fn counters(&self) -> Counters {
        self.inner.core.borrow().counters_now()
    }

    /// Per-link occupancy and statistics.
    pub fn link_states(&self) -> Vec<LinkState> {
        if let Ok(mut core) = self.inner.core.try_borrow_mut() {
            // Booked ahead is not booked yet (see `core::ahead`).
            core.rollback_ahead();
        }
        let core = self.inner.core.borrow();
        debug_assert!(
            !core.is_ahead(),
            "link statistics asked while the core is borrowed during a run"
        );
        LinkState::of_lanes(&core.lanes, &core.timing.links)
    }

    /// Faults recorded so far (IOMMU faults, unsupported requests, completer aborts).
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.inner.core.borrow().faults.clone()
    }

    /// Reads host memory directly, taking no time (for set-up and verification).
    pub fn peek_memory(&self, host: HostId, addr: PhysAddr, buf: &mut [u8]) {
        // Shared: a caller may hold the fabric meanwhile.
        let core = self.inner.core.borrow();
        core.memory[host.index()].read(addr.get(), buf);
        core.overlay_deferred(host, addr.get(), buf);
    }

    /// Hands `len` bytes of host memory at `addr` to `look`, taking no time: in place when
    /// they lie in one backed page and no deferred landing falls in them, else as
    /// [`Sim::peek_memory`] reads them. `look` must not use the simulation.
    pub fn inspect_memory(
        &self,
        host: HostId,
        addr: PhysAddr,
        len: usize,
        look: &mut dyn FnMut(&[u8]),
    ) {
        {
            let core = self.inner.core.borrow();
            if !core.deferred_over(host, addr.get(), len as u64) {
                if let Some(bytes) = core.memory[host.index()].backed(addr.get(), len) {
                    look(bytes);
                    return;
                }
            }
        }
        let mut buf = vec![0u8; len];
        self.peek_memory(host, addr, &mut buf);
        look(&buf);
    }

    /// Appends `len` bytes of host memory at `addr` to `out`, taking no time (not zeroed
    /// first: unwritten bytes append as zeroes).
    pub fn peek_memory_append(&self, host: HostId, addr: PhysAddr, len: usize, out: &mut Vec<u8>) {
        let core = self.inner.core.borrow();
        let mark = out.len();
        core.memory[host.index()].read_append(addr.get(), len, out);
        core.overlay_deferred(host, addr.get(), &mut out[mark..]);
    }

    /// Zeroes host memory directly, taking no time (freshly allocated memory); costs no
    /// memory for whole pages.
    pub fn zero_memory(&self, host: HostId, addr: PhysAddr, len: u64) {
        self.inner.core.borrow_mut().zero_memory(host, addr, len);
    }

    /// Writes host memory directly, taking no time (for set-up).
    pub fn poke_memory(&self, host: HostId, addr: PhysAddr, data: &[u8]) {
        self.inner.core.borrow_mut().write_memory(host, addr, data);
    }

    /// A CPU agent's port on `host`.
    pub fn cpu(&self, host: HostId) -> Agent {
        Agent {
            sim: self.clone(),
            requester: Requester::Cpu(host),
        }
    }

    /// A device's DMA port.
    pub fn device(&self, endpoint: EndpointId) -> Agent {
        Agent {
            sim: self.clone(),
            requester: Requester::Device(endpoint),
        }
    }

    /// Starts an access of `len` bytes at `addr` (a write of `write`, else a read). A CPU's
    /// access to its own RAM takes a read's data now, into `local`.
    fn start(
        &self,
        requester: Requester,
        write: Option<impl WriteBytes>,
        addr: BusAddr,
        len: u64,
        local: &mut Vec<u8>,
    ) -> Result<Access, AccessError> {
        let mut core = self.inner.core.borrow_mut();
        let cpu = core.timing.cpu;
        let recording = core.recording();
        let (cause, label) = if recording {
            (core.context(), smartio_platform::activity::take())
        } else {
            (record::NONE, None)
        };
        if len == 0 {
            // Nothing to move: no TLP leaves, and the access is done at once.
            let now = core.now;
            return Ok(Access::Local(Some(core.add_timer(now, cause))));
        }
        if let Some(pa) = core.local_memory(requester, addr, len) {
            let Requester::Cpu(host) = requester else {
                unreachable!("local memory is a CPU path")
            };
            let now = core.now;
            let write_it = write.is_some();
            let at = now
                + if write_it {
                    cpu.memory_write
                } else {
                    cpu.memory_read
                };
            let mut step = record::NONE;
            if recording {
                // A load that finds what was written after its task last woke (a poll that
                // sees new data) waited for that write.
                let cause = if write_it {
                    cause
                } else {
                    core.load_cause(host, pa, len, cause)
                };
                let kind = record::Kind::LocalMemory {
                    host,
                    write: write_it,
                };
                step = core.record(kind, now, at, cause, label);
            }
            match &write {
                Some(data) => core.write_memory(host, pa, &data.bytes()),
                None => {
                    core.settle_range(host, pa.get(), len);
                    core.memory[host.index()].read_append(pa.get(), len as usize, local)
                }
            }
            // Its time passes in place when its timer's event would be the next thing to
            // happen (asked after the write, which may have woken a watcher).
            if self.next_in_place(&core, at) {
                core.pass_to(at);
                return Ok(Access::Local(None));
            }
            let timer = core.add_timer(at, step);
            if self.run_to_own_timer(&mut core, timer, at) {
                return Ok(Access::Local(None));
            }
            return Ok(Access::Local(Some(timer)));
        }
        let mut start = core.now;
        let mut gate = cause;
        if let Requester::Cpu(host) = requester {
            start += cpu.mmio_issue + SimDuration(core.timing.root_complex_ps);
            if recording {
                let now = core.now;
                gate = core.record(record::Kind::CpuIssue { host }, now, start, cause, label);
            }
        }
        // Whether its first step will be the run's next event (see `Core::step_in_place`).
        let in_place = self.next_in_place(&core, start);
        // One TLP to one target goes without a transaction (see `core::posted`): no more
        // bytes than a TLP's largest payload.
        if let Some(data) = write.as_ref().filter(|d| d.len() <= MAX_PAYLOAD) {
            let data = &data.bytes();
            if in_place {
                if core.post_in_place(requester, addr, data, start)? {
                    // Sent: a posted write's requester goes on at once.
                    return Ok(Access::Local(None));
                }
            } else if let Some(slot) = core.post_queued(requester, addr, data, start)? {
                if self.run_to_posted_leaving(&mut core, slot, start) {
                    return Ok(Access::Local(None));
                }
                return Ok(Access::Txn(crate::ops::posted_ticket(slot)));
            }
        }
        let (id, serial) = match write {
            Some(data) => core.start_write(requester, addr, data, start, (gate, label))?,
            // One request answered by one completion runs in place without a transaction
            // (see `core::single_read`).
            None if in_place => match core.read_in_place(requester, addr, len, start, local)? {
                ReadInPlace::Done => return Ok(Access::Local(None)),
                ReadInPlace::Txn(id, serial) => {
                    return Ok(Access::Txn(crate::ops::txn_ticket(id, serial)))
                }
                ReadInPlace::No(segments) => {
                    core.start_read_routed(requester, segments, len, start, (gate, label))
                }
            },
            None => core.start_read(requester, addr, len, start, (gate, label))?,
        };
        if in_place {
            core.step_in_place(id, start);
        }
        Ok(Access::Txn(crate::ops::txn_ticket(id, serial)))
    }

    /// Starts a read of `len` bytes at `addr` by `requester`.
    #[inline]
    pub(crate) fn start_read(
        &self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
    ) -> Result<Ticket, AccessError> {
        self.inner.ops.borrow_mut().start(|local| {
            match self.start(requester, None::<&[u8]>, addr, len, local)? {
                // All it holds is its transaction, which its ticket names.
                Access::Txn(ticket) => Ok(Begun::Named(ticket)),
                // Its data waits in the slot's buffer until it is polled, done or not.
                Access::Local(timer) => Ok(Begun::Slot(Op::Access(AccessOp {
                    timer,
                    wait: Wait::Access {
                        requester,
                        addr,
                        len,
                        write: false,
                    },
                }))),
            }
        })
    }

    /// Starts a write of `data` at `addr` by `requester`. One done at once (its time
    /// passed in place, or a posted write sent) answers `None`: it holds nothing, and
    /// there is nothing to poll.
    pub(crate) fn start_write(
        &self,
        requester: Requester,
        data: impl WriteBytes,
        addr: BusAddr,
    ) -> Result<Option<Ticket>, AccessError> {
        let len = data.len() as u64;
        // A write takes no data now: it needs no slot's buffer to start.
        Ok(
            match self.start(requester, Some(data), addr, len, &mut Vec::new())? {
                Access::Txn(ticket) => Some(ticket),
                Access::Local(None) => None,
                Access::Local(timer) => Some(self.started(Op::Access(AccessOp {
                    timer,
                    wait: Wait::Access {
                        requester,
                        addr,
                        len,
                        write: true,
                    },
                }))),
            },
        )
    }

    /// Arms a timer `duration` after now for `requester`.
    pub(crate) fn arm_sleep(&self, duration: SimDuration, requester: Requester) -> Ticket {
        crate::ops::arm_sleep(&mut self.inner.core.borrow_mut(), duration, requester)
    }

    /// Arms a watch on `len` bytes at `addr` of `host`'s memory.
    pub(crate) fn arm_watch(&self, host: HostId, addr: PhysAddr, len: u64) -> Ticket {
        let mut core = self.inner.core.borrow_mut();
        let op = Op::Watch(WatchOp::arm(&mut core, host, addr, len));
        self.started(op)
    }

    /// Starts waiting for interrupt `vector` on `host`, for at most `timeout` (armed now).
    pub(crate) fn wait_interrupt(
        &self,
        requester: Requester,
        host: HostId,
        vector: u32,
        timeout: Option<SimDuration>,
    ) -> Ticket {
        let mut core = self.inner.core.borrow_mut();
        let timeout = timeout.map(|t| TimerOp::arm(&mut core, t, requester));
        self.started(Op::Interrupt(InterruptOp::new(host, vector, timeout)))
    }

    #[inline]
    fn started(&self, op: Op) -> Ticket {
        let started = self
            .inner
            .ops
            .borrow_mut()
            .start(|_| Ok::<_, Infallible>(Begun::Slot(op)));
        match started {
            Ok(ticket) => ticket,
            Err(never) => match never {},
        }
    }

    /// Polls an access (see [`smartio_machine::AgentPort::poll_access`]).
    #[inline]
    pub(crate) fn poll_access(
        &self,
        ticket: Ticket,
        buf: &mut [u8],
        cx: &Context<'_>,
    ) -> Poll<Result<(), AccessError>> {
        let mut core = self.inner.core.borrow_mut();
        if let Some(txn) = crate::ops::txn_of(ticket) {
            return crate::ops::poll_txn(&mut core, txn, cx, buf);
        }
        if let Some(slot) = crate::ops::posted_of(ticket) {
            return core.poll_posted(slot, cx).map(Ok);
        }
        self.inner
            .ops
            .borrow_mut()
            .poll_read(&mut core, ticket, buf, cx)
    }

    /// Polls a read, handing its bytes over in a buffer of their own (see
    /// [`smartio_machine::AgentPort::poll_read_owned`]).
    pub(crate) fn poll_read_owned(
        &self,
        ticket: Ticket,
        cx: &Context<'_>,
    ) -> Poll<Result<Vec<u8>, AccessError>> {
        let mut core = self.inner.core.borrow_mut();
        let mut data = Vec::new();
        if let Some(txn) = crate::ops::txn_of(ticket) {
            return crate::ops::poll_txn(&mut core, txn, cx, &mut data)
                .map(|result| result.map(|()| data));
        }
        let ops = &mut self.inner.ops.borrow_mut();
        ops.poll_read(&mut core, ticket, &mut data, cx)
            .map(|result| result.map(|()| data))
    }

    /// Polls a sleep, a watch or an interrupt wait (see
    /// [`smartio_machine::AgentPort::poll_wait`]).
    #[inline]
    pub(crate) fn poll_wait(&self, ticket: Ticket, cx: &Context<'_>) -> Poll<bool> {
        let mut core = self.inner.core.borrow_mut();
        if let Some(timer) = crate::ops::sleep_timer(ticket) {
            return crate::ops::poll_sleep(&mut core, timer, cx);
        }
        self.inner.ops.borrow_mut().poll_wait(&mut core, ticket, cx)
    }

    /// Gives back an operation dropped before it was ready. Dropped while the engine is
    /// busy (a task dropped from inside the engine), it is left as it is.
    pub(crate) fn cancel(&self, ticket: Ticket) {
        if let Some(timer) = crate::ops::sleep_timer(ticket) {
            if let Ok(mut core) = self.inner.core.try_borrow_mut() {
                crate::ops::cancel_sleep(&mut core, timer);
            }
            return;
        }
        if let Some(txn) = crate::ops::txn_of(ticket) {
            if let Ok(mut core) = self.inner.core.try_borrow_mut() {
                crate::ops::cancel_txn(&mut core, txn);
            }
            return;
        }
        if let Some(slot) = crate::ops::posted_of(ticket) {
            if let Ok(mut core) = self.inner.core.try_borrow_mut() {
                core.cancel_posted(slot);
            }
            return;
        }
        let (Ok(mut core), Ok(mut ops)) = (
            self.inner.core.try_borrow_mut(),
            self.inner.ops.try_borrow_mut(),
        ) else {
            return;
        };
        ops.cancel(&mut core, ticket);
    }

    /// Operations under way that a ticket names (a run's memory must not grow with its
    /// length; tests check this stays bounded).
    pub fn live_operations(&self) -> usize {
        self.inner.ops.borrow().live()
    }
}

/// An engine operation's future, polled through its ticket; dropped before it is ready, it
/// gives the ticket back. A read's data lands in `buf`.
/// What [`step_to_own`] did.
enum InPoll {
    /// It took the run's next step.
    Stepped,
    /// The next event is the task's own, due at this time: taken from the queue, not done.
    Own(SimTime),
    /// Nothing is queued.
    Empty,
}

/// Takes the run's next step by `at` from inside a task's poll, as [`Sim::run_until`] would:
/// the steps of a write ahead due first, else the next queued event — unless `own` says it
/// is the task's own (then only taken from the queue).
#[inline(always)]
fn step_to_own(core: &mut Core, at: SimTime, own: impl Fn(&Event) -> bool) -> InPoll {
    if core.ahead_due(at) {
        core.cross_ahead(at);
        return InPoll::Stepped;
    }
    let Some((t, event)) = core.pop() else {
        return InPoll::Empty;
    };
    if own(&event) {
        return InPoll::Own(t);
    }
    take_event(core, t, event);
    InPoll::Stepped
}

/// Takes the queued `event`, due at `at`: the clock moves there, and what it stands for
/// happens.
#[inline(always)]
fn take_event(core: &mut Core, at: SimTime, event: Event) {
    // Everything before `at` has been done: nothing ran ahead of the queue.
    assert!(
        at >= core.now,
        "emulator bug: an event at {at:?} comes after the clock reached {:?}",
        core.now
    );
    core.now = at;
    core.shared_now.set(at);
    core.counters.events += 1;
    match event {
        Event::Txn(id) => core.on_txn_event(id, at),
        Event::Timer(key) => core.fire_timer(key),
        Event::LinkState { link, up } => core.set_link(smartio_fabric::LinkId(link), up),
        Event::Posted(slot) => core.on_posted(slot),
        Event::Interrupt { host, vector, step } => {
            core.set_context(step);
            let line = core.irqs[host as usize].entry(vector).or_default();
            line.pending += 1;
            if let Some(w) = line.waker.take() {
                w.wake();
            }
        }
    }
}

struct Pending<'a> {
    sim: &'a Sim,
    ticket: Option<Ticket>,
    buf: &'a mut [u8],
}

impl<'a> Pending<'a> {
    fn new(sim: &'a Sim, ticket: Ticket, buf: &'a mut [u8]) -> Pending<'a> {
        Pending {
            sim,
            ticket: Some(ticket),
            buf,
        }
    }

    /// An access's outcome.
    fn access(mut self) -> impl Future<Output = Result<(), AccessError>> + 'a {
        std::future::poll_fn(move |cx| {
            let ticket = self.ticket();
            let out = std::task::ready!(self.sim.poll_access(ticket, self.buf, cx));
            self.ticket = None;
            Poll::Ready(out)
        })
    }

    /// A wait's outcome (`false`: an interrupt wait timed out).
    fn wait(mut self) -> impl Future<Output = bool> + 'a {
        std::future::poll_fn(move |cx| {
            let ticket = self.ticket();
            let out = std::task::ready!(self.sim.poll_wait(ticket, cx));
            self.ticket = None;
            Poll::Ready(out)
        })
    }

    fn ticket(&self) -> Ticket {
        match self.ticket {
            Some(t) => t,
            None => panic!("emulator bug: an engine future was polled after it completed"),
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            self.sim.cancel(ticket);
        }
    }
}

/// A requester's view of the simulation: a CPU of a host, or a device's DMA engine.
/// Implements [`smartio_platform::Port`], [`smartio_platform::Clock`] and
/// [`smartio_platform::MemoryWatch`].
#[derive(Clone, Debug)]
pub struct Agent {
    sim: Sim,
    requester: Requester,
}

impl Agent {
    /// Who this agent is.
    pub fn requester(&self) -> Requester {
        self.requester
    }

    /// The simulation.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The host this agent's requests start in.
    pub(crate) fn host(&self) -> HostId {
        match self.requester {
            Requester::Cpu(h) => h,
            Requester::Device(e) => self.sim.fabric().endpoint(e).host,
        }
    }

    /// A configuration read of `buf.len()` bytes at `offset` of `endpoint`'s configuration
    /// space. Only a CPU of the endpoint's own host can issue one (configuration requests are
    /// routed by bus number inside one PCIe domain); a function without a configuration
    /// handler reads as all-ones, as an absent function does.
    pub async fn config_read(
        &self,
        endpoint: EndpointId,
        offset: u16,
        buf: &mut [u8],
    ) -> Result<(), AccessError> {
        let handler = self.config_target(endpoint)?;
        let cost = self.sim.timing().cpu.config_access;
        smartio_platform::Clock::sleep(self, cost).await;
        match handler {
            Some(h) => h.config_read(offset, buf),
            None => buf.fill(0xff),
        }
        Ok(())
    }

    /// A configuration write of `data` at `offset` of `endpoint`'s configuration space. A
    /// write to a PF with SR-IOV hands its SR-IOV Control and NumVFs to the fabric at once,
    /// so VFs exist (or are gone) for the next request.
    pub async fn config_write(
        &self,
        endpoint: EndpointId,
        offset: u16,
        data: &[u8],
    ) -> Result<(), AccessError> {
        let handler = self.config_target(endpoint)?;
        let cost = self.sim.timing().cpu.config_access;
        smartio_platform::Clock::sleep(self, cost).await;
        if let Some(h) = handler {
            h.config_write(offset, data);
            // A PF's SR-IOV Control decides which VFs exist: the fabric routes by it.
            if let Some(control) = h.sriov_control() {
                // Only a PF's capability reports a control, and it refuses NumVFs past
                // TotalVFs: an error here is a bug in the device model.
                if let Err(bug) = self
                    .sim
                    .with_fabric_mut(|f| f.set_sriov_control(endpoint, control))
                {
                    panic!("emulator bug: a configuration handler reported {bug}");
                }
            }
            // The function may react (MSI-X enabled): let its task run before time moves.
            self.sim.inner.core.borrow_mut().woke = true;
        }
        Ok(())
    }

    fn config_target(
        &self,
        endpoint: EndpointId,
    ) -> Result<Option<Rc<dyn smartio_platform::ConfigHandler>>, AccessError> {
        let fabric = self.sim.fabric();
        let ep = fabric.endpoint(endpoint);
        match self.requester {
            Requester::Cpu(h) if h == ep.host => {}
            _ => {
                return Err(AccessError::UnsupportedRequest {
                    host: fabric.host(self.host()).name.clone(),
                    addr: BusAddr(u64::from(ep.bdf.requester_id())),
                })
            }
        }
        // A VF that does not exist (VF Enable clear, or past NumVFs) is an absent function.
        let present = fabric.function_present(endpoint);
        drop(fabric);
        if !present {
            return Ok(None);
        }
        Ok(self.sim.inner.core.borrow().config_handlers[endpoint.index()].clone())
    }

    /// Waits for interrupt `vector` on this agent's host (CPU agents), consuming one.
    pub async fn interrupt(&self, vector: u32) {
        let ticket = self
            .sim
            .wait_interrupt(self.requester, self.host(), vector, None);
        Pending::new(&self.sim, ticket, &mut []).wait().await;
    }

    /// Waits for interrupt `vector` for at most `timeout`; `true` if it came (and was
    /// consumed), `false` on timeout.
    pub async fn interrupt_timeout(&self, vector: u32, timeout: SimDuration) -> bool {
        let host = self.host();
        let ticket = self
            .sim
            .wait_interrupt(self.requester, host, vector, Some(timeout));
        Pending::new(&self.sim, ticket, &mut []).wait().await
    }
}

impl Agent {
    /// The end of a write [`Sim::start_write`] started: at once when it was done then.
    async fn written(&self, started: Option<Ticket>) -> Result<(), AccessError> {
        match started {
            Some(ticket) => Pending::new(&self.sim, ticket, &mut []).access().await,
            None => Ok(()),
        }
    }
}

impl smartio_platform::Port for Agent {
    async fn read(&self, addr: BusAddr, buf: &mut [u8]) -> Result<(), AccessError> {
        let len = buf.len() as u64;
        let ticket = self.sim.start_read(self.requester, addr, len)?;
        Pending::new(&self.sim, ticket, buf).access().await
    }

    async fn write(&self, addr: BusAddr, data: &[u8]) -> Result<(), AccessError> {
        let started = self.sim.start_write(self.requester, data, addr)?;
        self.written(started).await
    }

    async fn write_owned(&self, addr: BusAddr, data: Vec<u8>) -> Result<(), AccessError> {
        let started = self.sim.start_write(self.requester, data, addr)?;
        self.written(started).await
    }

    async fn write_zeroes(&self, addr: BusAddr, len: usize) -> Result<(), AccessError> {
        let started = self.sim.start_write(self.requester, Zeroes(len), addr)?;
        self.written(started).await
    }
}

impl smartio_platform::Spawner for Agent {
    #[track_caller]
    fn spawn_task(&self, task: smartio_platform::LocalTask) {
        self.sim.inner.exec.spawn(task, Location::caller());
    }
}

impl smartio_platform::Clock for Agent {
    fn now(&self) -> SimTime {
        self.sim.now()
    }

    fn sleep(&self, duration: SimDuration) -> impl Future<Output = ()> {
        let waiting = Pending::new(
            &self.sim,
            self.sim.arm_sleep(duration, self.requester),
            &mut [],
        );
        async move {
            waiting.wait().await;
        }
    }

    /// The cost may pass in place (`Sim::pass_in_place`; inside a race it is a timer).
    fn spend(&self, what: &'static str, duration: SimDuration) -> impl Future<Output = ()> {
        smartio_platform::activity::doing(what);
        let waiting = (!self.sim.pass_in_place(duration)).then(|| self.sleep(duration));
        async move {
            if let Some(waiting) = waiting {
                waiting.await;
            }
        }
    }
}

impl smartio_platform::MemoryWatch for Agent {
    /// Armed now, before the returned future is polled (the trait's contract).
    fn written(&self, addr: PhysAddr, len: u64) -> impl Future<Output = ()> {
        let ticket = self.sim.arm_watch(self.host(), addr, len);
        let waiting = Pending::new(&self.sim, ticket, &mut []);
        async move {
            waiting.wait().await;
        }
    }
}
