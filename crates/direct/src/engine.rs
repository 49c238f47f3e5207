//! [`DirectEngine`]: state, accesses and the run loop.

use crate::accesses::Accesses;
use crate::executor::Executor;
use crate::timers::{Awaited, Due, Signal, Timers};
use smartio_calibration::{Calibration, CpuTiming};
use smartio_fabric::{Access, EndpointId, Fabric, HostId, LinkId, Requester, Route, Target};
use smartio_machine::{
    AgentPort, Counters, Engine, FabricControl, FaultRecord, IdleReadCost, LinkEvent, LocalFuture,
    Machine, PayloadAccess, RunSummary, Started, Ticket,
};
use smartio_platform::{
    AccessError, BarHandler, BusAddr, CompleterError, ConfigHandler, HostMemory, LocalTask,
    PhysAddr, SimDuration, SimTime, SparseMemory,
};
use std::cell::{Ref, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// An untimed engine behind the platform contract. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct DirectEngine {
    inner: Rc<Inner>,
}

struct Inner {
    state: RefCell<State>,
    /// The CPU and software costs, fixed for the engine's life (outside `state`: the OS
    /// model and drivers ask for them on every I/O).
    cpu: CpuTiming,
    /// Accesses done and not yet handed out, named by tickets.
    accesses: RefCell<Accesses>,
    exec: RefCell<Executor>,
    /// `state.now`, readable while the state is borrowed (by a BAR handler).
    now: std::cell::Cell<SimTime>,
    /// What moves the clock.
    clock: Timekeeping,
}

/// What moves an engine's clock.
#[derive(Clone, Copy)]
enum Timekeeping {
    /// Only sleeps: when no task is ready, the clock jumps to the earliest timer.
    Virtual,
    /// The wall clock, since `start` (the live engine): a timer fires when its time has
    /// really come, and what happens outside the engine (a program's store into a register
    /// page, a request on a socket) is fed in between [`DirectEngine::advance`] calls.
    Wall { start: Instant },
}

/// A memory watch: armed by `written`, fired by the first write that overlaps it.
struct Watch {
    host: HostId,
    start: u64,
    end: u64,
    signal: Rc<Signal>,
}

#[derive(Default)]
struct IrqLine {
    pending: u64,
    waker: Option<Waker>,
}

struct State {
    now: SimTime,
    fabric: Fabric,
    memory: Vec<Box<dyn HostMemory>>,
    bar_handlers: Vec<Option<Rc<dyn BarHandler>>>,
    config_handlers: Vec<Option<Rc<dyn ConfigHandler>>>,
    timers: Timers,
    watches: Vec<Watch>,
    irqs: Vec<BTreeMap<u32, IrqLine>>,
    link_log: Vec<LinkEvent>,
    link_waiters: Vec<Waker>,
    faults: Vec<FaultRecord>,
    counters: Counters,
    /// What each link carried, by link and direction (see [`State::count_route`]).
    links: Vec<[smartio_machine::LaneTraffic; 2]>,
}

impl DirectEngine {
    /// An engine for `fabric`; the calibration configures the fabric's tables (look-up-table
    /// entries, multicast groups) and gives the software costs the OS model charges.
    pub fn new(fabric: Fabric, calibration: &Calibration) -> DirectEngine {
        let memory = fabric
            .hosts()
            .iter()
            .map(|_| Box::new(SparseMemory::new()) as Box<dyn HostMemory>)
            .collect();
        Self::build(fabric, calibration, memory, Timekeeping::Virtual)
    }

    /// The same engine on the wall clock, over the given memory of each host (in the
    /// fabric's host order): the core of the live engine. Its time is the time since it was
    /// made; a sleep lasts as long as it says. Drive it with [`DirectEngine::advance`].
    ///
    /// # Panics
    /// If `memory` does not hold one entry per host of `fabric` (a caller's bug).
    pub fn on_wall_clock(
        fabric: Fabric,
        calibration: &Calibration,
        memory: Vec<Box<dyn HostMemory>>,
    ) -> DirectEngine {
        assert_eq!(
            memory.len(),
            fabric.hosts().len(),
            "one memory per host of the fabric"
        );
        let start = Instant::now();
        Self::build(fabric, calibration, memory, Timekeeping::Wall { start })
    }

    fn build(
        mut fabric: Fabric,
        calibration: &Calibration,
        memory: Vec<Box<dyn HostMemory>>,
        clock: Timekeeping,
    ) -> DirectEngine {
        calibration.configure_fabric(&mut fabric);
        let hosts = fabric.hosts().len();
        let endpoints = fabric.endpoints().len();
        DirectEngine {
            inner: Rc::new(Inner {
                accesses: RefCell::new(Accesses::default()),
                cpu: calibration.cpu_timing(),
                state: RefCell::new(State {
                    now: SimTime::ZERO,
                    fabric,
                    memory,
                    bar_handlers: vec![None; endpoints],
                    config_handlers: vec![None; endpoints],
                    timers: Timers::default(),
                    watches: Vec::new(),
                    irqs: (0..hosts).map(|_| BTreeMap::new()).collect(),
                    link_log: Vec::new(),
                    link_waiters: Vec::new(),
                    faults: Vec::new(),
                    counters: Counters::default(),
                    links: Vec::new(),
                }),
                exec: RefCell::new(Executor::default()),
                now: std::cell::Cell::new(SimTime::ZERO),
                clock,
            }),
        }
    }

    /// On the wall clock: fires every timer whose time has come, runs every task that is
    /// ready, again until neither is left, and returns when the next timer is due (`None`:
    /// none is armed). On the virtual clock it does the same at the current time.
    pub fn advance(&self) -> Option<SimTime> {
        loop {
            self.poll_ready();
            let now = self.current_time();
            let next = self.inner.state.borrow_mut().timers.pop_due(now);
            match next {
                Some((_, due)) => self.fire(due),
                None => return self.inner.state.borrow_mut().timers.next_due(),
            }
        }
    }

    /// A store of `data` at `offset` of `endpoint`'s BAR `bar` that reached the device from
    /// outside the engine's transactions (the live engine finds a program's stores in a
    /// register page): the device model answers it as any store; a refusal is logged as a
    /// fault and returned.
    pub fn store_to_bar(
        &self,
        endpoint: EndpointId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), AccessError> {
        let handler = self.inner.state.borrow().bar_handler(endpoint);
        let result = handler.and_then(|h| h.mmio_write(bar, offset, data));
        result.map_err(|reason| {
            self.inner
                .state
                .borrow_mut()
                .refused(endpoint, bar, offset, reason)
        })
    }

    /// A load of `buf.len()` bytes at `offset` of `endpoint`'s BAR `bar` from outside the
    /// engine's transactions (the live engine refreshing a register page). A refusal is
    /// returned, not logged: reading what a page shows is not an access of the program.
    pub fn load_from_bar(
        &self,
        endpoint: EndpointId,
        bar: u8,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), CompleterError> {
        let handler = self.inner.state.borrow().bar_handler(endpoint)?;
        handler.mmio_read(bar, offset, buf)
    }

    /// The current time: on the wall clock, read now (never earlier than a time already
    /// seen).
    fn current_time(&self) -> SimTime {
        if let Timekeeping::Wall { start } = self.inner.clock {
            let elapsed = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let wall = SimTime(elapsed.saturating_mul(1_000));
            let now = self.inner.now.get().max(wall);
            self.inner.now.set(now);
            if let Ok(mut s) = self.inner.state.try_borrow_mut() {
                s.now = now;
            }
        }
        self.inner.now.get()
    }

    /// Fires one timer that is due.
    fn fire(&self, due: Due) {
        self.inner.state.borrow_mut().counters.events += 1;
        match due {
            Due::Wake(signal) => {
                if let Some(w) = signal.fire() {
                    w.wake();
                }
            }
            Due::Link { link, up } => self.set_link(link, up),
        }
    }

    /// This engine behind the platform contract.
    pub fn machine(&self) -> Machine {
        Machine::new(Rc::new(self.clone()))
    }

    /// Routes every byte of an access, or fails without side effects (the fault is recorded).
    fn routes(
        state: &mut State,
        requester: Requester,
        addr: BusAddr,
        len: u64,
        access: Access,
    ) -> Result<Vec<(u64, Route)>, AccessError> {
        let mut pieces = Vec::new();
        let mut done = 0;
        while done < len {
            match state
                .fabric
                .route(requester, BusAddr(addr.get() + done), len - done, access)
            {
                Ok(route) if route.len > 0 => {
                    done += route.len;
                    pieces.push((done - route.len, route));
                }
                Ok(_) => unreachable!("a route covers at least one byte"),
                Err(e) => {
                    let error: AccessError = e.into();
                    state.fault(error.clone());
                    return Err(error);
                }
            }
        }
        Ok(pieces)
    }

    /// A posted write, landed now. A completer's refusal is a fault the requester does not
    /// see, as for a posted write on PCIe.
    fn write_now(
        &self,
        requester: Requester,
        addr: BusAddr,
        data: &[u8],
    ) -> Result<(), AccessError> {
        let mut wakers = Vec::new();
        {
            let mut state = self.inner.state.borrow_mut();
            let pieces = Self::routes(
                &mut state,
                requester,
                addr,
                data.len() as u64,
                Access::Write,
            )?;
            for (offset, route) in pieces {
                let piece = &data[offset as usize..(offset + route.len) as usize];
                state.count_route(&route.hops, route.len, false);
                if route.branches.is_empty() {
                    state.deliver(route.target, piece, &mut wakers);
                } else {
                    for branch in &route.branches {
                        state.deliver(branch.target, piece, &mut wakers);
                    }
                }
            }
        }
        wakers.into_iter().for_each(Waker::wake);
        Ok(())
    }

    /// A non-posted read of `len` bytes, answered now into `data`.
    fn read_now(
        &self,
        requester: Requester,
        addr: BusAddr,
        len: usize,
        data: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        let mut state = self.inner.state.borrow_mut();
        let pieces = Self::routes(&mut state, requester, addr, len as u64, Access::Read)?;
        data.clear();
        data.resize(len, 0);
        let mut result = Ok(());
        for (offset, route) in pieces {
            state.count_route(&route.hops, route.len, true);
            let buf = &mut data[offset as usize..(offset + route.len) as usize];
            if let Err(e) = state.answer(route.target, buf) {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// Arms a memory watch now.
    fn arm_watch(&self, host: HostId, addr: PhysAddr, len: u64) -> Awaited {
        let signal = Rc::new(Signal::default());
        let mut s = self.inner.state.borrow_mut();
        if s.watches.len() >= 64 {
            s.watches.retain(|w| !w.signal.abandoned());
        }
        s.watches.push(Watch {
            host,
            start: addr.get(),
            end: addr.get().saturating_add(len),
            signal: Rc::clone(&signal),
        });
        Awaited(signal)
    }

    /// Arms a sleep now.
    fn arm_sleep(&self, duration: SimDuration) -> Awaited {
        let signal = Rc::new(Signal::default());
        let now = self.current_time();
        let mut s = self.inner.state.borrow_mut();
        let at = now + duration;
        s.timers.add(at, Due::Wake(Rc::clone(&signal)));
        Awaited(signal)
    }

    /// The host a requester's requests start in.
    fn host_of(&self, requester: Requester) -> HostId {
        match requester {
            Requester::Cpu(h) => h,
            Requester::Device(e) => self.inner.state.borrow().fabric.endpoint(e).host,
        }
    }

    /// The configuration handler of `function`, if `requester` may reach it: only a CPU of
    /// the function's own host can.
    fn config_target(
        &self,
        requester: Requester,
        function: EndpointId,
    ) -> Result<Option<Rc<dyn ConfigHandler>>, AccessError> {
        let state = self.inner.state.borrow();
        let ep = state.fabric.endpoint(function);
        match requester {
            // A VF that does not exist (VF Enable clear, or past NumVFs) is an absent
            // function.
            Requester::Cpu(h) if h == ep.host && !state.fabric.function_present(function) => {
                Ok(None)
            }
            Requester::Cpu(h) if h == ep.host => {
                Ok(state.config_handlers[function.index()].clone())
            }
            _ => {
                let from = match requester {
                    Requester::Cpu(h) => h,
                    Requester::Device(e) => state.fabric.endpoint(e).host,
                };
                Err(AccessError::UnsupportedRequest {
                    host: state.fabric.host(from).name.clone(),
                    addr: BusAddr(u64::from(ep.bdf.requester_id())),
                })
            }
        }
    }

    fn set_link(&self, link: LinkId, up: bool) {
        let waiters = {
            let mut s = self.inner.state.borrow_mut();
            s.fabric.set_link_up(link, up);
            let at = s.now;
            s.link_log.push(LinkEvent { at, link, up });
            std::mem::take(&mut s.link_waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    fn poll_ready(&self) {
        loop {
            let Some(mut taken) = self.inner.exec.borrow_mut().take_ready() else {
                return;
            };
            let waker = self.inner.exec.borrow().waker(&taken);
            let finished = Executor::poll(&mut taken, &waker);
            let done = self.inner.exec.borrow_mut().put_back(taken, finished);
            // A finished task is dropped here, outside the executor's borrow.
            drop(done);
        }
    }
}

type ReadResult = Result<Vec<u8>, AccessError>;

impl State {
    /// Counts one access of `bytes` on every link `hops` crosses (the way they go), and with
    /// `answered`, its answer of those bytes the other way (a read's request carries none).
    /// The direct engine moves whole accesses: one per access, its bytes as payload and on
    /// the wire alike, no time busy.
    fn count_route(&mut self, hops: &[smartio_fabric::Hop], bytes: u64, answered: bool) {
        for hop in hops {
            let link = hop.link.index();
            if self.links.len() <= link {
                self.links.resize(link + 1, Default::default());
            }
            let dir = hop.dir as usize;
            let lanes = &mut self.links[link];
            lanes[dir].tlps += 1;
            let carrying = if answered {
                lanes[1 - dir].tlps += 1;
                &mut lanes[1 - dir]
            } else {
                &mut lanes[dir]
            };
            carrying.payload_bytes += bytes;
            carrying.wire_bytes += bytes;
        }
    }

    /// Lands `data` at `target`, collecting the wakers to call once the state is released.
    fn deliver(&mut self, target: Target, data: &[u8], wakers: &mut Vec<Waker>) {
        self.counters.tlp_arrivals += 1;
        match target {
            Target::Memory { host, addr } => self.write_memory(host, addr, data, wakers),
            Target::Bar {
                endpoint,
                bar,
                offset,
            } => {
                let result = self
                    .bar_handler(endpoint)
                    .and_then(|h| h.mmio_write(bar, offset, data));
                if let Err(reason) = result {
                    self.refused(endpoint, bar, offset, reason);
                }
            }
            Target::Interrupt { host, .. } => {
                let mut v = [0u8; 4];
                let n = data.len().min(4);
                v[..n].copy_from_slice(&data[..n]);
                let line = self.irqs[host.index()]
                    .entry(u32::from_le_bytes(v))
                    .or_default();
                line.pending += 1;
                wakers.extend(line.waker.take());
            }
            // A multicast write with no member left to receive it.
            Target::Multicast { .. } => {}
        }
    }

    /// Answers a read of `buf.len()` bytes at `target`.
    fn answer(&mut self, target: Target, buf: &mut [u8]) -> Result<(), AccessError> {
        self.counters.tlp_arrivals += 1;
        match target {
            Target::Memory { host, addr } => {
                self.memory[host.index()].read(addr.get(), buf);
                Ok(())
            }
            Target::Bar {
                endpoint,
                bar,
                offset,
            } => {
                let result = self
                    .bar_handler(endpoint)
                    .and_then(|h| h.mmio_read(bar, offset, buf));
                result.map_err(|reason| {
                    buf.fill(0xff);
                    self.refused(endpoint, bar, offset, reason)
                })
            }
            Target::Interrupt { .. } | Target::Multicast { .. } => {
                buf.fill(0xff);
                Ok(())
            }
        }
    }

    /// The model answering `endpoint`'s BARs; none answers as an address outside them.
    fn bar_handler(&self, endpoint: EndpointId) -> Result<Rc<dyn BarHandler>, CompleterError> {
        self.bar_handlers[endpoint.index()]
            .clone()
            .ok_or(CompleterError::OutOfRange)
    }

    /// A BAR access the completer refused: logged as a fault, returned as the access's error.
    fn refused(
        &mut self,
        endpoint: EndpointId,
        bar: u8,
        offset: u64,
        reason: CompleterError,
    ) -> AccessError {
        let error = AccessError::CompleterAbort {
            target: format!("{} BAR{bar}", self.fabric.endpoint(endpoint).name),
            offset,
            reason,
        };
        self.fault(error.clone());
        error
    }

    /// Logs a fault at the current time.
    fn fault(&mut self, error: AccessError) {
        let at = self.now;
        self.faults.push(FaultRecord { at, error });
    }

    fn write_memory(&mut self, host: HostId, addr: PhysAddr, data: &[u8], wakers: &mut Vec<Waker>) {
        self.memory[host.index()].write(addr.get(), data);
        self.memory_changed(host, addr, data.len() as u64, wakers);
    }

    /// Fires (and forgets) every watch of `host` that overlaps the range.
    fn memory_changed(&mut self, host: HostId, addr: PhysAddr, len: u64, wakers: &mut Vec<Waker>) {
        let (start, end) = (addr.get(), addr.get().saturating_add(len));
        self.watches.retain(|w| {
            if w.signal.abandoned() {
                return false;
            }
            if w.host == host && w.start < end && start < w.end {
                wakers.extend(w.signal.fire());
                return false;
            }
            true
        });
    }
}

/// Returns `Pending` once (waking itself), then `Ready`: an access done at once still lets
/// the other ready tasks run before its requester goes on.
#[derive(Default)]
struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl FabricControl for DirectEngine {
    fn fabric(&self) -> Ref<'_, Fabric> {
        Ref::map(self.inner.state.borrow(), |s| &s.fabric)
    }

    fn change_fabric(&self, change: &mut dyn FnMut(&mut Fabric)) {
        change(&mut self.inner.state.borrow_mut().fabric)
    }

    fn schedule_link_state(&self, link: LinkId, up: bool, at: SimTime) {
        let mut s = self.inner.state.borrow_mut();
        let at = at.max(s.now);
        s.timers.add(at, Due::Link { link, up });
    }

    fn link_events(&self) -> Vec<LinkEvent> {
        self.inner.state.borrow().link_log.clone()
    }

    fn next_link_event(&self, seen: usize) -> LocalFuture<LinkEvent> {
        let engine = self.clone();
        Box::pin(std::future::poll_fn(move |cx| {
            let mut s = engine.inner.state.borrow_mut();
            match s.link_log.get(seen) {
                Some(e) => Poll::Ready(e.clone()),
                None => {
                    if !s.link_waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        s.link_waiters.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        }))
    }

    fn faults(&self) -> Vec<FaultRecord> {
        self.inner.state.borrow().faults.clone()
    }
}

impl PayloadAccess for DirectEngine {
    fn peek_memory(&self, host: HostId, addr: PhysAddr, buf: &mut [u8]) {
        self.inner.state.borrow().memory[host.index()].read(addr.get(), buf);
    }

    fn poke_memory(&self, host: HostId, addr: PhysAddr, data: &[u8]) {
        let mut wakers = Vec::new();
        self.inner
            .state
            .borrow_mut()
            .write_memory(host, addr, data, &mut wakers);
        wakers.into_iter().for_each(Waker::wake);
    }

    fn zero_memory(&self, host: HostId, addr: PhysAddr, len: u64) {
        let mut wakers = Vec::new();
        {
            let mut s = self.inner.state.borrow_mut();
            s.memory[host.index()].zero(addr.get(), len);
            s.memory_changed(host, addr, len, &mut wakers);
        }
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl Engine for DirectEngine {
    fn now(&self) -> SimTime {
        self.current_time()
    }

    fn raise_interrupt(&self, host: HostId, vector: u32) {
        let waker = {
            let mut s = self.inner.state.borrow_mut();
            let line = s.irqs[host.index()].entry(vector).or_default();
            line.pending += 1;
            line.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn spawn(&self, task: LocalTask, at: &'static Location<'static>) {
        self.inner.exec.borrow_mut().spawn(task, at);
    }

    fn attach_bar_handler(&self, endpoint: EndpointId, handler: Rc<dyn BarHandler>) {
        self.inner.state.borrow_mut().bar_handlers[endpoint.index()] = Some(handler);
    }

    fn attach_config_handler(&self, endpoint: EndpointId, handler: Rc<dyn ConfigHandler>) {
        self.inner.state.borrow_mut().config_handlers[endpoint.index()] = Some(handler);
    }

    fn agent(&self, requester: Requester) -> Rc<dyn AgentPort> {
        Rc::new(DirectAgent {
            engine: self.clone(),
            requester,
        })
    }

    fn run(&self) -> RunSummary {
        self.run_until(SimTime::NEVER)
    }

    fn run_until(&self, deadline: SimTime) -> RunSummary {
        match self.inner.clock {
            Timekeeping::Virtual => loop {
                self.poll_ready();
                let next = self.inner.state.borrow_mut().timers.pop_due(deadline);
                let Some((at, due)) = next else { break };
                {
                    let mut s = self.inner.state.borrow_mut();
                    s.now = s.now.max(at);
                    self.inner.now.set(s.now);
                }
                self.fire(due);
            },
            // Time passes by itself: wait (really) for each timer up to the deadline.
            Timekeeping::Wall { .. } => {
                while let Some(next) = self.advance().filter(|&t| t <= deadline) {
                    let wait = next.since(self.current_time());
                    std::thread::sleep(Duration::from_nanos(wait.as_ps() / 1_000));
                }
            }
        }
        let s = self.inner.state.borrow();
        RunSummary {
            end: s.now,
            counters: s.counters,
            blocked_tasks: self.inner.exec.borrow().live().len(),
        }
    }

    fn shutdown(&self) {
        let dropped = self.inner.exec.borrow_mut().clear();
        drop(dropped);
    }

    fn blocked_summary(&self) -> String {
        let mut by_place: BTreeMap<String, usize> = BTreeMap::new();
        for at in self.inner.exec.borrow().live() {
            *by_place
                .entry(format!("{}:{}", at.file(), at.line()))
                .or_default() += 1;
        }
        if by_place.is_empty() {
            return "no task waits".to_string();
        }
        by_place
            .iter()
            .map(|(at, n)| format!("{n} task(s) spawned at {at} wait"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn counters(&self) -> Counters {
        self.inner.state.borrow().counters
    }

    fn link_traffic(&self) -> Vec<smartio_machine::LinkTraffic> {
        let s = self.inner.state.borrow();
        s.fabric
            .links()
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let [down, up] = s.links.get(i).copied().unwrap_or_default();
                smartio_machine::LinkTraffic {
                    link: l.name.clone(),
                    down,
                    up,
                }
            })
            .collect()
    }

    fn cpu_timing(&self) -> &CpuTiming {
        &self.inner.cpu
    }

    fn idle_read_cost(
        &self,
        _requester: Requester,
        _addr: BusAddr,
        _len: u64,
    ) -> Option<Result<IdleReadCost, AccessError>> {
        None
    }

    fn cpu_store_cost(&self, _local: bool) -> Option<SimDuration> {
        None
    }
}

/// A requester of the direct engine.
struct DirectAgent {
    engine: DirectEngine,
    requester: Requester,
}

impl AgentPort for DirectAgent {
    fn requester(&self) -> Requester {
        self.requester
    }

    /// Answered now (the machine's future calls this when first polled); the outcome is
    /// handed out after one yield, so that the other ready tasks run before the requester
    /// goes on.
    fn read(&self, addr: BusAddr, len: usize) -> Started<ReadResult> {
        let ticket = self
            .engine
            .inner
            .accesses
            .borrow_mut()
            .start(|data| self.engine.read_now(self.requester, addr, len, data));
        Started::Ticket(ticket)
    }

    /// Landed now, then handed out after one yield, as a read.
    fn write(&self, addr: BusAddr, data: &[u8]) -> Started<Result<(), AccessError>> {
        let ticket = self
            .engine
            .inner
            .accesses
            .borrow_mut()
            .start(|_| self.engine.write_now(self.requester, addr, data));
        Started::Ticket(ticket)
    }

    fn sleep(&self, duration: SimDuration) -> Started<()> {
        Started::Boxed(Box::pin(self.engine.arm_sleep(duration)))
    }

    fn written(&self, addr: PhysAddr, len: u64) -> Started<()> {
        let host = self.engine.host_of(self.requester);
        Started::Boxed(Box::pin(self.engine.arm_watch(host, addr, len)))
    }

    fn interrupt(&self, vector: u32, timeout: Option<SimDuration>) -> Started<bool> {
        let engine = self.engine.clone();
        let host = engine.host_of(self.requester);
        let mut timer = timeout.map(|t| engine.arm_sleep(t));
        Started::Boxed(Box::pin(std::future::poll_fn(move |cx| {
            {
                let mut s = engine.inner.state.borrow_mut();
                let line = s.irqs[host.index()].entry(vector).or_default();
                if line.pending > 0 {
                    line.pending -= 1;
                    return Poll::Ready(true);
                }
                line.waker = Some(cx.waker().clone());
            }
            let timed_out = timer
                .as_mut()
                .is_some_and(|sleep| Pin::new(sleep).poll(cx).is_ready());
            if timed_out {
                Poll::Ready(false)
            } else {
                Poll::Pending
            }
        })))
    }

    fn poll_access(
        &self,
        ticket: Ticket,
        buf: &mut [u8],
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AccessError>> {
        self.engine
            .inner
            .accesses
            .borrow_mut()
            .poll(ticket, buf, cx)
    }

    /// Sleeps, watches and interrupt waits are futures of their own: no ticket names one.
    fn poll_wait(&self, ticket: Ticket, _cx: &mut Context<'_>) -> Poll<bool> {
        no_tickets(ticket)
    }

    fn cancel(&self, ticket: Ticket) {
        if let Ok(mut accesses) = self.engine.inner.accesses.try_borrow_mut() {
            accesses.release(ticket);
        }
    }

    fn config_read(
        &self,
        function: EndpointId,
        offset: u16,
        len: usize,
    ) -> LocalFuture<ReadResult> {
        let (engine, requester) = (self.engine.clone(), self.requester);
        Box::pin(async move {
            let handler = engine.config_target(requester, function)?;
            let mut buf = vec![0xffu8; len];
            if let Some(h) = handler {
                h.config_read(offset, &mut buf);
            }
            YieldOnce::default().await;
            Ok(buf)
        })
    }

    fn config_write(
        &self,
        function: EndpointId,
        offset: u16,
        data: Vec<u8>,
    ) -> LocalFuture<Result<(), AccessError>> {
        let (engine, requester) = (self.engine.clone(), self.requester);
        Box::pin(async move {
            if let Some(h) = engine.config_target(requester, function)? {
                h.config_write(offset, &data);
                // A PF's SR-IOV Control decides which VFs exist: the fabric routes by it.
                if let Some(control) = h.sriov_control() {
                    let mut state = engine.inner.state.borrow_mut();
                    // Only a PF's capability reports a control, and it refuses NumVFs
                    // past TotalVFs: an error here is a bug in the device model.
                    if let Err(bug) = state.fabric.set_sriov_control(function, control) {
                        panic!("emulator bug: a configuration handler reported {bug}");
                    }
                }
            }
            YieldOnce::default().await;
            Ok(())
        })
    }
}

/// A ticket polled as a wait: the direct engine issues tickets only for accesses.
fn no_tickets(ticket: Ticket) -> ! {
    panic!("emulator bug: {ticket:?} polled as a wait names a direct engine's access")
}
