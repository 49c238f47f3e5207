//! The timed engine's handle: spawn agents, run, and give agents their ports.
//!
//! Agents are `async` tasks (drivers, workloads, device engines) polled by a small
//! single-threaded executor ([`crate::executor`]). The run loop alternates: poll every ready
//! task at the current time, then advance to the next event. Nothing reads the wall clock.
//! When a run ends with tasks still waiting, [`Sim::blocked_tasks`] says where each was
//! spawned and what it waits for.

use crate::calibration::Calibration;
use crate::core::{Core, Counters, Event, FaultRecord, LinkEvent};
use crate::executor::Executor;
use crate::record;
use crate::timing::{LinkState, Timing, TimingError};
use crate::wait::{BlockedTask, Wait};
use crate::waiters::{TimerKey, WatchKey, WatchState};
use smartio_fabric::{EndpointId, Fabric, HostId, Requester};
use smartio_platform::{AccessError, BarHandler, BusAddr, PhysAddr, SimDuration, SimTime};
use std::cell::{Ref, RefCell};
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

struct Inner {
    core: RefCell<Core>,
    exec: Executor,
    /// The core's time, readable while the core is borrowed (by a BAR handler).
    now: Rc<std::cell::Cell<SimTime>>,
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
                core: RefCell::new(core),
                exec,
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
        loop {
            self.poll_ready();
            let mut core = self.inner.core.borrow_mut();
            match core.peek_time() {
                Some(t) if t <= deadline => {}
                _ => break,
            }
            let Some((at, event)) = core.pop() else { break };
            core.now = at;
            core.shared_now.set(at);
            core.counters.events += 1;
            match event {
                Event::Txn(id) => core.on_txn_event(id, at),
                Event::Timer(key) => core.fire_timer(key),
                Event::LinkState { link, up } => core.set_link(smartio_fabric::LinkId(link), up),
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
        let core = self.inner.core.borrow();
        let blocked = self.inner.exec.live();
        RunSummary {
            end: core.now,
            counters: core.counters,
            blocked_tasks: blocked,
        }
    }

    fn poll_ready(&self) {
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
            if taken.task.as_mut().poll(&mut cx).is_pending() {
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
        self.inner.core.borrow().counters
    }

    /// Per-link occupancy and statistics.
    pub fn link_states(&self) -> Vec<LinkState> {
        LinkState::of_lanes(&self.inner.core.borrow().lanes)
    }

    /// Faults recorded so far (IOMMU faults, unsupported requests, completer aborts).
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.inner.core.borrow().faults.clone()
    }

    /// Reads host memory directly, taking no time (for set-up and verification).
    pub fn peek_memory(&self, host: HostId, addr: PhysAddr, buf: &mut [u8]) {
        self.inner.core.borrow().memory[host.index()].read(addr.get(), buf);
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

    fn start(
        &self,
        requester: Requester,
        write: Option<Vec<u8>>,
        addr: BusAddr,
        len: u64,
    ) -> Result<Started, AccessError> {
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
            return Ok(Started::Local {
                timer: core.add_timer(now, cause),
                data: Vec::new(),
            });
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
            return Ok(match write {
                Some(data) => {
                    core.write_memory(host, pa, &data);
                    Started::Local {
                        timer: core.add_timer(at, step),
                        data: Vec::new(),
                    }
                }
                None => {
                    let mut data = Vec::new();
                    core.memory[host.index()].read_append(pa.get(), len as usize, &mut data);
                    Started::Local {
                        timer: core.add_timer(at, step),
                        data,
                    }
                }
            });
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
        let id = match write {
            Some(data) => core.start_write(requester, addr, data, start, (gate, label))?,
            None => core.start_read(requester, addr, len, start, (gate, label))?,
        };
        Ok(Started::Txn(id))
    }

    /// Waits for what [`Sim::start`] began.
    fn completion(&self, started: Started, wait: Wait) -> Completion {
        Completion {
            sim: self.clone(),
            started,
            wait,
            done: false,
        }
    }
}

enum Started {
    Txn(u32),
    Local { timer: TimerKey, data: Vec<u8> },
}

/// Waits for a transaction (or a local memory access) and returns its data. Dropped before
/// it is done, it gives its timer back, or leaves its transaction to finish on its own.
struct Completion {
    sim: Sim,
    started: Started,
    /// What the waiting task is told to wait for.
    wait: Wait,
    done: bool,
}

impl Future for Completion {
    type Output = Result<Vec<u8>, AccessError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let sim = self.sim.clone();
        let mut core = sim.inner.core.borrow_mut();
        let wait = self.wait;
        match &mut self.started {
            Started::Local { timer, data } => {
                if core.timers.poll(*timer, cx.waker()) {
                    let data = std::mem::take(data);
                    core.timers.remove(*timer);
                    self.done = true;
                    Poll::Ready(Ok(data))
                } else {
                    core.waits.push(wait);
                    Poll::Pending
                }
            }
            Started::Txn(id) => {
                let id = *id;
                let done = core.txn(id).is_some_and(|t| t.result.is_some());
                if !done {
                    if let Some(t) = core.txn_mut(id) {
                        if !t.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            t.waker = Some(cx.waker().clone());
                        }
                    }
                    core.waits.push(wait);
                    return Poll::Pending;
                }
                self.done = true;
                let finished = core.txn(id).is_some_and(|t| t.finished());
                let result = if finished {
                    core.take_txn(id)
                        .and_then(|(result, data)| result.map(|r| r.map(|()| data)))
                } else {
                    // A posted write: the requester is done; the TLPs still travel.
                    core.txn_mut(id).and_then(|t| {
                        t.detached = true;
                        t.result.clone().map(|r| r.map(|()| Vec::new()))
                    })
                };
                Poll::Ready(result.unwrap_or(Ok(Vec::new())))
            }
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Dropped while waiting (the other side of a race won): give back what it holds.
        let Ok(mut core) = self.sim.inner.core.try_borrow_mut() else {
            return;
        };
        match self.started {
            Started::Local { timer, .. } => core.timers.remove(timer),
            Started::Txn(id) => {
                if core.txn(id).is_some_and(|t| t.finished()) {
                    core.take_txn(id);
                } else if let Some(t) = core.txn_mut(id) {
                    t.detached = true;
                    t.waker = None;
                }
            }
        }
    }
}

/// Sleeps until a timer fires; dropped early, it gives the timer back.
pub(crate) struct Sleep {
    sim: Sim,
    timer: TimerKey,
    done: bool,
}

impl Sleep {
    pub(crate) fn new(sim: &Sim, duration: SimDuration, requester: Requester) -> Sleep {
        let timer = {
            let mut core = sim.inner.core.borrow_mut();
            let now = core.now;
            let at = now + duration;
            let step = if core.recording() {
                let (cause, label) = (core.context(), smartio_platform::activity::take());
                core.record(record::Kind::Sleep { requester }, now, at, cause, label)
            } else {
                record::NONE
            };
            core.add_timer(at, step)
        };
        Sleep {
            sim: sim.clone(),
            timer,
            done: false,
        }
    }

    /// Whether the timer fired; otherwise the task is woken when it does.
    fn fired(&mut self, core: &mut Core, cx: &Context<'_>) -> bool {
        if self.done || core.timers.poll(self.timer, cx.waker()) {
            if !self.done {
                core.timers.remove(self.timer);
                self.done = true;
            }
            return true;
        }
        if let Some(due) = core.timers.due(self.timer) {
            core.waits.push(Wait::Timer { due });
        }
        false
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let sim = self.sim.clone();
        let mut core = sim.inner.core.borrow_mut();
        if self.fired(&mut core, cx) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if !self.done {
            if let Ok(mut core) = self.sim.inner.core.try_borrow_mut() {
                core.timers.remove(self.timer);
            }
        }
    }
}

/// A memory watch armed at creation (see [`smartio_platform::MemoryWatch`]); dropped, it
/// disarms.
pub(crate) struct Watch {
    sim: Sim,
    key: WatchKey,
    state: Rc<WatchState>,
    wait: Wait,
}

impl Future for Watch {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.fired.get() {
            return Poll::Ready(());
        }
        *self.state.waker.borrow_mut() = Some(cx.waker().clone());
        self.sim.inner.core.borrow_mut().waits.push(self.wait);
        Poll::Pending
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.state.fired.get() {
            if let Ok(mut core) = self.sim.inner.core.try_borrow_mut() {
                core.watches.remove(self.key);
            }
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

    /// What a task waiting for this agent's access is told it waits for.
    fn access(&self, addr: BusAddr, len: u64, write: bool) -> Wait {
        Wait::Access {
            requester: self.requester,
            addr,
            len,
            write,
        }
    }

    /// The host this agent's requests start in.
    fn host(&self) -> HostId {
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
        let host = self.host();
        std::future::poll_fn(|cx| {
            let mut core = self.sim.inner.core.borrow_mut();
            let line = core.irqs[host.index()].entry(vector).or_default();
            if line.pending > 0 {
                line.pending -= 1;
                Poll::Ready(())
            } else {
                line.waker = Some(cx.waker().clone());
                core.waits.push(Wait::Interrupt { host, vector });
                Poll::Pending
            }
        })
        .await
    }

    /// Waits for interrupt `vector` for at most `timeout`; `true` if it came (and was
    /// consumed), `false` on timeout.
    pub async fn interrupt_timeout(&self, vector: u32, timeout: SimDuration) -> bool {
        let host = self.host();
        let mut timer = Sleep::new(&self.sim, timeout, self.requester);
        std::future::poll_fn(|cx| {
            let mut core = self.sim.inner.core.borrow_mut();
            let line = core.irqs[host.index()].entry(vector).or_default();
            if line.pending > 0 {
                line.pending -= 1;
                return Poll::Ready(true);
            }
            line.waker = Some(cx.waker().clone());
            core.waits.push(Wait::Interrupt { host, vector });
            if timer.fired(&mut core, cx) {
                Poll::Ready(false)
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

impl smartio_platform::Port for Agent {
    async fn read(&self, addr: BusAddr, buf: &mut [u8]) -> Result<(), AccessError> {
        let len = buf.len() as u64;
        let started = self.sim.start(self.requester, None, addr, len)?;
        let data = self
            .sim
            .completion(started, self.access(addr, len, false))
            .await?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    async fn write(&self, addr: BusAddr, data: &[u8]) -> Result<(), AccessError> {
        self.write_owned(addr, data.to_vec()).await
    }

    async fn write_owned(&self, addr: BusAddr, data: Vec<u8>) -> Result<(), AccessError> {
        let len = data.len() as u64;
        let started = self.sim.start(self.requester, Some(data), addr, len)?;
        self.sim
            .completion(started, self.access(addr, len, true))
            .await
            .map(|_| ())
    }

    async fn read_owned(&self, addr: BusAddr, len: usize) -> Result<Vec<u8>, AccessError> {
        let started = self.sim.start(self.requester, None, addr, len as u64)?;
        self.sim
            .completion(started, self.access(addr, len as u64, false))
            .await
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
        Sleep::new(&self.sim, duration, self.requester)
    }
}

impl Agent {
    /// [`MemoryWatch::written`](smartio_platform::MemoryWatch::written), owning its handle.
    pub(crate) fn watch(&self, addr: PhysAddr, len: u64) -> Watch {
        let host = self.host();
        let (key, state) = self
            .sim
            .inner
            .core
            .borrow_mut()
            .watches
            .add(host, addr, len);
        Watch {
            sim: self.sim.clone(),
            key,
            state,
            wait: Wait::MemoryWrite { host, addr, len },
        }
    }
}

impl smartio_platform::MemoryWatch for Agent {
    /// Armed now, before the returned future is polled (the trait's contract).
    fn written(&self, addr: PhysAddr, len: u64) -> impl Future<Output = ()> {
        self.watch(addr, len)
    }
}
