//! [`Machine`]: the handle software holds on whichever engine runs it.

use crate::agent::Agent;
use crate::engine::{AgentPort, Engine};
use crate::explain::{CriticalPath, RecordingOptions, StepRef, Trace};
use crate::records::{Counters, FaultRecord, IdleReadCost, LinkEvent, RunSummary};
use smartio_calibration::CpuTiming;
use smartio_fabric::{EndpointId, Fabric, HostId, LinkId, Requester};
use smartio_platform::{
    AccessError, BarHandler, BusAddr, ConfigHandler, FunctionBarHandler, FunctionId, OneFunction,
    PhysAddr, SimDuration, SimTime,
};
use std::cell::{Ref, RefCell};
use std::future::Future;
use std::panic::Location;
use std::rc::{Rc, Weak};

/// A handle to the machine: an engine behind the platform contract. Cheap to clone; not
/// `Send` (see the crate's threading note).
#[derive(Clone)]
pub struct Machine {
    engine: Rc<dyn Engine>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine").field("now", &self.now()).finish()
    }
}

/// A handle to a machine that does not keep it alive ([`Machine::downgrade`]): it tells
/// whether anything still holds the machine, and reaches it while something does.
#[derive(Clone)]
pub struct WeakMachine {
    engine: Weak<dyn Engine>,
}

impl std::fmt::Debug for WeakMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakMachine")
            .field("alive", &(self.engine.strong_count() > 0))
            .finish()
    }
}

impl WeakMachine {
    /// The machine, unless every handle to it (the owner's, agents', tasks') is gone and
    /// its engine freed.
    pub fn upgrade(&self) -> Option<Machine> {
        self.engine.upgrade().map(|engine| Machine { engine })
    }
}

impl Machine {
    /// The machine an engine implements.
    pub fn new(engine: Rc<dyn Engine>) -> Machine {
        Machine { engine }
    }

    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.engine.now()
    }

    /// The fabric (read-only view). Do not hold it across an `await`.
    pub fn fabric(&self) -> Ref<'_, Fabric> {
        self.engine.fabric()
    }

    /// Changes the fabric's tables (NTB look-up-table and requester-id entries, IOMMU
    /// mappings, multicast groups) and returns what `change` returns.
    pub fn with_fabric_mut<R>(&self, change: impl FnOnce(&mut Fabric) -> R) -> R {
        let mut change = Some(change);
        let mut out = None;
        self.engine.change_fabric(&mut |fabric| {
            if let Some(change) = change.take() {
                out = Some(change(fabric));
            }
        });
        match out {
            Some(out) => out,
            None => unreachable!("an engine's change_fabric calls its closure exactly once"),
        }
    }

    /// Starts a task; it first runs at the current time. The caller's location is kept for
    /// the report of tasks that never finish.
    #[track_caller]
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.engine.spawn(Box::pin(task), Location::caller());
    }

    /// [`Machine::spawn`] for a task already boxed, spawned at `at`.
    pub(crate) fn spawn_boxed(
        &self,
        task: smartio_platform::LocalTask,
        at: &'static Location<'static>,
    ) {
        self.engine.spawn(task, at);
    }

    /// Makes `handler` answer loads and stores to `endpoint`'s BARs (cluster assembly).
    pub fn attach_bar_handler(&self, endpoint: EndpointId, handler: Rc<dyn BarHandler>) {
        self.engine.attach_bar_handler(endpoint, handler)
    }

    /// Makes `handler` answer configuration requests to `endpoint` (cluster assembly).
    pub fn attach_config_handler(&self, endpoint: EndpointId, handler: Rc<dyn ConfigHandler>) {
        self.engine.attach_config_handler(endpoint, handler)
    }

    /// The functions of the device whose physical function is `pf`: the PF first, then
    /// every possible VF (VF 1 to TotalVFs, present or not) with its endpoint. A device
    /// without SR-IOV has only `(FunctionId::Physical, pf)`. A model serving several
    /// functions takes each one's DMA port with [`Machine::device`] of its endpoint (its
    /// TLPs then carry that function's requester id) and keeps one MSI-X table per function.
    pub fn functions(&self, pf: EndpointId) -> Vec<(FunctionId, EndpointId)> {
        let f = self.fabric();
        let vfs = f
            .virtual_functions(pf)
            .map(|v| v.vfs.as_slice())
            .unwrap_or(&[]);
        std::iter::once((FunctionId::Physical, pf))
            .chain(
                vfs.iter()
                    .zip(1u16..)
                    .filter_map(|(&vf, n)| Some((FunctionId::vf(n)?, vf))),
            )
            .collect()
    }

    /// Makes `model` answer the BAR accesses of every function of `pf`'s device
    /// ([`Machine::functions`]): one [`OneFunction`] adapter per function's endpoint, so
    /// each access reaches the model with the function it targets and that function's own
    /// BAR index and offset (an access to a VF that does not exist, or whose PF has VF MSE
    /// clear, never reaches it: the fabric answers Unsupported Request).
    pub fn attach_function_handlers<H: FunctionBarHandler + 'static>(
        &self,
        pf: EndpointId,
        model: Rc<H>,
    ) {
        for (function, endpoint) in self.functions(pf) {
            let handler = OneFunction::new(model.clone(), function);
            self.engine.attach_bar_handler(endpoint, Rc::new(handler));
        }
    }

    /// A CPU of `host`.
    pub fn cpu(&self, host: HostId) -> Agent {
        self.agent(Requester::Cpu(host))
    }

    /// A device's DMA engine.
    pub fn device(&self, endpoint: EndpointId) -> Agent {
        self.agent(Requester::Device(endpoint))
    }

    /// The agent of `requester`.
    pub fn agent(&self, requester: Requester) -> Agent {
        Agent::new(self.engine.agent(requester), self.clone())
    }

    /// An agent whose accesses go through `port`: a port that changes them on the way to an
    /// engine's own (a VM's vCPU, whose guest-physical addresses the hypervisor translates
    /// before they reach its host CPU's port — see [`Agent::port`]).
    pub fn agent_with_port(&self, port: Rc<dyn AgentPort>) -> Agent {
        Agent::new(port, self.clone())
    }

    /// Runs until no task is ready and nothing is pending.
    pub fn run(&self) -> RunSummary {
        self.engine.run()
    }

    /// Spawns `task`, runs until nothing is pending, and returns its output, or `None` if it
    /// never finished (it waits for something that will not come).
    #[track_caller]
    pub fn run_task<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> Option<T> {
        let out = Rc::new(RefCell::new(None));
        let slot = out.clone();
        self.spawn(async move {
            *slot.borrow_mut() = Some(task.await);
        });
        self.run();
        let r = out.borrow_mut().take();
        r
    }

    /// Runs until `deadline`: what is due later stays pending.
    pub fn run_until(&self, deadline: SimTime) -> RunSummary {
        self.engine.run_until(deadline)
    }

    /// A handle that does not keep this machine alive.
    pub fn downgrade(&self) -> WeakMachine {
        WeakMachine {
            engine: Rc::downgrade(&self.engine),
        }
    }

    /// Drops every task (see [`Engine::shutdown`]).
    pub fn shutdown(&self) {
        self.engine.shutdown()
    }

    /// The tasks that have not finished and what each waits for, in one line.
    pub fn blocked_summary(&self) -> String {
        self.engine.blocked_summary()
    }

    /// What the engine has counted so far.
    pub fn counters(&self) -> Counters {
        self.engine.counters()
    }

    /// What each link carried so far (see [`Engine::link_traffic`]).
    pub fn link_traffic(&self) -> Vec<crate::LinkTraffic> {
        self.engine.link_traffic()
    }

    /// Reads host memory directly, taking no time (set-up and verification).
    pub fn peek_memory(&self, host: HostId, addr: PhysAddr, buf: &mut [u8]) {
        self.engine.peek_memory(host, addr, buf)
    }

    /// Hands `len` bytes of host memory at `addr` to `look`, taking no time (see
    /// [`crate::PayloadAccess::inspect_memory`]: in place where the engine can; `look`
    /// must not use the engine).
    pub fn inspect_memory(
        &self,
        host: HostId,
        addr: PhysAddr,
        len: usize,
        look: &mut dyn FnMut(&[u8]),
    ) {
        self.engine.inspect_memory(host, addr, len, look)
    }

    /// Appends `len` bytes of host memory at `addr` to `out`, taking no time (see
    /// [`Machine::peek_memory`]).
    pub fn peek_memory_append(&self, host: HostId, addr: PhysAddr, len: usize, out: &mut Vec<u8>) {
        self.engine.peek_memory_append(host, addr, len, out)
    }

    /// Writes host memory directly, taking no time (set-up).
    pub fn poke_memory(&self, host: HostId, addr: PhysAddr, data: &[u8]) {
        self.engine.poke_memory(host, addr, data)
    }

    /// Zeroes host memory directly, taking no time (freshly allocated memory).
    pub fn zero_memory(&self, host: HostId, addr: PhysAddr, len: u64) {
        self.engine.zero_memory(host, addr, len)
    }

    /// Takes a link down or brings it up at `at`.
    pub fn schedule_link_state(&self, link: LinkId, up: bool, at: SimTime) {
        self.engine.schedule_link_state(link, up, at)
    }

    /// Link state changes so far, in order.
    pub fn link_events(&self) -> Vec<LinkEvent> {
        self.engine.link_events()
    }

    /// Waits until more than `seen` link state changes have happened; returns the next one.
    pub async fn next_link_event(&self, seen: usize) -> LinkEvent {
        self.engine.next_link_event(seen).await
    }

    /// Faults recorded so far.
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.engine.faults()
    }

    /// The CPU's and the host software's costs.
    pub fn cpu_timing(&self) -> &CpuTiming {
        self.engine.cpu_timing()
    }

    /// How the timing model costs a read on an idle fabric (`None` without a timing model).
    pub fn idle_read_cost(
        &self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
    ) -> Option<Result<IdleReadCost, AccessError>> {
        self.engine.idle_read_cost(requester, addr, len)
    }

    /// What a CPU store costs the core before it leaves (`None` without a timing model).
    pub fn cpu_store_cost(&self, local: bool) -> Option<SimDuration> {
        self.engine.cpu_store_cost(local)
    }

    /// Raises interrupt `vector` on `host`'s CPUs from software on that host (an
    /// inter-processor interrupt): it reaches a handler after the interrupt delivery, and no
    /// TLP crosses the fabric.
    pub fn raise_interrupt(&self, host: HostId, vector: u32) {
        self.engine.raise_interrupt(host, vector)
    }

    /// Starts recording where time goes (see [`crate::explain`]); `false` on an engine
    /// without a timing model.
    pub fn start_recording(&self, options: RecordingOptions) -> bool {
        self.engine.start_recording(options)
    }

    /// What woke the running task, while recording: hand it to [`Machine::critical_path`]
    /// when an operation has ended.
    pub fn current_step(&self) -> Option<StepRef> {
        self.engine.current_step()
    }

    /// The critical path of an operation from `start` to `end` whose end `last` announced
    /// (the [`Machine::current_step`] of the task that saw it end).
    pub fn critical_path(
        &self,
        last: StepRef,
        start: SimTime,
        end: SimTime,
    ) -> Option<CriticalPath> {
        self.engine.critical_path(last, start, end)
    }

    /// Adds a workload's operation to the trace as a slice of track `track`.
    pub fn trace_span(&self, track: &str, name: &str, start: SimTime, end: SimTime) {
        self.engine.trace_span(track, name, start, end)
    }

    /// The trace recorded so far, taken (`None` unless recording keeps one).
    pub fn take_trace(&self) -> Option<Trace> {
        self.engine.take_trace()
    }
}
