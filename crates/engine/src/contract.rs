//! The timed engine behind the platform contract: [`Sim`] is a [`smartio_machine::Engine`]
//! and its [`Agent`]s are [`AgentPort`]s, so the OS model, SmartIO, drivers and workloads
//! run on it through a [`Machine`] without naming it.

use crate::core::{Swapped, WriteBytes, Zeroes};
use crate::sim::{Agent, Sim};
use crate::timing::{LinkTiming, Timing};
use smartio_fabric::{Access, EndpointId, Fabric, HostId, LinkId, NodeKind, Requester, Target};
use smartio_machine::{
    AgentPort, Counters, CpuTiming, CriticalPath, Engine, FabricControl, FaultRecord, IdleReadCost,
    LinkEvent, LocalFuture, Machine, PayloadAccess, RecordingOptions, RunSummary, Started, StepRef,
    Ticket, Trace,
};
use smartio_platform::{
    AccessError, BarHandler, BusAddr, ConfigHandler, LocalTask, PhysAddr, SimDuration, SimTime,
};
use std::cell::Ref;
use std::panic::Location;
use std::rc::Rc;
use std::task::{Context, Poll};

impl Sim {
    /// This simulation behind the platform contract.
    pub fn machine(&self) -> Machine {
        Machine::new(Rc::new(self.clone()))
    }
}

impl FabricControl for Sim {
    fn fabric(&self) -> Ref<'_, Fabric> {
        Sim::fabric(self)
    }

    fn change_fabric(&self, change: &mut dyn FnMut(&mut Fabric)) {
        self.with_fabric_mut(change)
    }

    fn schedule_link_state(&self, link: LinkId, up: bool, at: SimTime) {
        Sim::schedule_link_state(self, link, up, at)
    }

    fn link_events(&self) -> Vec<LinkEvent> {
        Sim::link_events(self)
    }

    fn next_link_event(&self, seen: usize) -> LocalFuture<LinkEvent> {
        let sim = self.clone();
        Box::pin(async move { sim.next_link_event(seen).await })
    }

    fn faults(&self) -> Vec<FaultRecord> {
        Sim::faults(self)
    }
}

impl PayloadAccess for Sim {
    fn peek_memory(&self, host: HostId, addr: PhysAddr, buf: &mut [u8]) {
        Sim::peek_memory(self, host, addr, buf)
    }

    fn peek_memory_append(&self, host: HostId, addr: PhysAddr, len: usize, out: &mut Vec<u8>) {
        Sim::peek_memory_append(self, host, addr, len, out)
    }

    fn inspect_memory(
        &self,
        host: HostId,
        addr: PhysAddr,
        len: usize,
        look: &mut dyn FnMut(&[u8]),
    ) {
        Sim::inspect_memory(self, host, addr, len, look)
    }

    fn poke_memory(&self, host: HostId, addr: PhysAddr, data: &[u8]) {
        Sim::poke_memory(self, host, addr, data)
    }

    fn zero_memory(&self, host: HostId, addr: PhysAddr, len: u64) {
        Sim::zero_memory(self, host, addr, len)
    }
}

impl Engine for Sim {
    fn now(&self) -> SimTime {
        Sim::now(self)
    }

    fn spawn(&self, task: LocalTask, at: &'static Location<'static>) {
        self.spawn_at(task, at);
    }

    fn attach_bar_handler(&self, endpoint: EndpointId, handler: Rc<dyn BarHandler>) {
        Sim::attach_bar_handler(self, endpoint, handler)
    }

    fn attach_config_handler(&self, endpoint: EndpointId, handler: Rc<dyn ConfigHandler>) {
        Sim::attach_config_handler(self, endpoint, handler)
    }

    fn agent(&self, requester: Requester) -> Rc<dyn AgentPort> {
        Rc::new(match requester {
            Requester::Cpu(host) => self.cpu(host),
            Requester::Device(endpoint) => self.device(endpoint),
        })
    }

    fn run(&self) -> RunSummary {
        Sim::run(self)
    }

    fn run_until(&self, deadline: SimTime) -> RunSummary {
        Sim::run_until(self, deadline)
    }

    fn shutdown(&self) {
        Sim::shutdown(self)
    }

    fn blocked_summary(&self) -> String {
        Sim::blocked_summary(self)
    }

    fn counters(&self) -> Counters {
        Sim::counters(self)
    }

    fn link_traffic(&self) -> Vec<smartio_machine::LinkTraffic> {
        let states = self.link_states();
        let fabric = self.fabric();
        states
            .iter()
            .zip(fabric.links())
            .map(|(s, l)| {
                let lane = |d: usize| smartio_machine::LaneTraffic {
                    tlps: s.tlps[d],
                    wire_bytes: s.wire_bytes[d],
                    payload_bytes: s.payload_bytes[d],
                    busy_ps: s.busy_ps[d],
                };
                smartio_machine::LinkTraffic {
                    link: l.name.clone(),
                    down: lane(0),
                    up: lane(1),
                }
            })
            .collect()
    }

    fn cpu_timing(&self) -> &CpuTiming {
        self.cpu_costs()
    }

    fn idle_read_cost(
        &self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
    ) -> Option<Result<IdleReadCost, AccessError>> {
        Some(idle_read_cost(
            &Sim::fabric(self),
            &self.timing(),
            requester,
            addr,
            len,
        ))
    }

    fn cpu_store_cost(&self, local: bool) -> Option<SimDuration> {
        let timing = self.timing();
        Some(if local {
            timing.cpu.memory_write
        } else {
            timing.cpu.mmio_issue + SimDuration(timing.root_complex_ps)
        })
    }

    fn raise_interrupt(&self, host: HostId, vector: u32) {
        Sim::raise_interrupt(self, host, vector)
    }

    fn start_recording(&self, options: RecordingOptions) -> bool {
        Sim::start_recording(self, options.trace_limit);
        true
    }

    fn current_step(&self) -> Option<StepRef> {
        Sim::current_step(self).map(StepRef)
    }

    fn critical_path(&self, last: StepRef, start: SimTime, end: SimTime) -> Option<CriticalPath> {
        Sim::critical_path(self, last.0, start, end)
    }

    fn trace_span(&self, track: &str, name: &str, start: SimTime, end: SimTime) {
        Sim::trace_span(self, track, name, start, end)
    }

    fn take_trace(&self) -> Option<Trace> {
        Sim::take_trace(self)
    }
}

impl Agent {
    /// Starts a posted write of `data` ([`AgentPort::write`] and [`AgentPort::write_owned`]).
    fn start_write(
        &self,
        addr: BusAddr,
        data: impl WriteBytes,
    ) -> Started<Result<(), AccessError>> {
        match self.sim().start_write(self.requester(), data, addr) {
            Ok(Some(ticket)) => Started::Ticket(ticket),
            Ok(None) => Started::Ready(Ok(())),
            Err(e) => Started::Ready(Err(e)),
        }
    }
}

impl AgentPort for Agent {
    fn requester(&self) -> Requester {
        Agent::requester(self)
    }

    fn read(&self, addr: BusAddr, len: usize) -> Started<Result<Vec<u8>, AccessError>> {
        match self.sim().start_read(self.requester(), addr, len as u64) {
            Ok(ticket) => Started::Ticket(ticket),
            Err(e) => Started::Ready(Err(e)),
        }
    }

    fn write(&self, addr: BusAddr, data: &[u8]) -> Started<Result<(), AccessError>> {
        self.start_write(addr, data)
    }

    /// Kept as the write's transaction's bytes, not copied (a write of one TLP, which goes
    /// without a transaction, copies it still).
    fn write_owned(&self, addr: BusAddr, data: Vec<u8>) -> Started<Result<(), AccessError>> {
        self.start_write(addr, data)
    }

    /// Kept as the write's transaction's bytes, not copied, `data` left holding a spare
    /// transaction buffer (a write of one TLP, which goes without a transaction, copies it
    /// and leaves `data` as it was).
    fn write_swapped(&self, addr: BusAddr, data: &mut Vec<u8>) -> Started<Result<(), AccessError>> {
        self.start_write(addr, Swapped(data))
    }

    /// Kept in no buffer: its TLPs land by zeroing memory (whole pages given back).
    fn write_zeroes(&self, addr: BusAddr, len: usize) -> Started<Result<(), AccessError>> {
        self.start_write(addr, Zeroes(len))
    }

    fn sleep(&self, duration: SimDuration) -> Started<()> {
        Started::Ticket(self.sim().arm_sleep(duration, self.requester()))
    }

    fn spend(&self, duration: SimDuration) -> Started<()> {
        if self.sim().pass_in_place(duration) {
            Started::Ready(())
        } else {
            self.sleep(duration)
        }
    }

    fn written(&self, addr: PhysAddr, len: u64) -> Started<()> {
        Started::Ticket(self.sim().arm_watch(self.host(), addr, len))
    }

    fn interrupt(&self, vector: u32, timeout: Option<SimDuration>) -> Started<bool> {
        let ticket = self
            .sim()
            .wait_interrupt(self.requester(), self.host(), vector, timeout);
        Started::Ticket(ticket)
    }

    fn poll_access(
        &self,
        ticket: Ticket,
        buf: &mut [u8],
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AccessError>> {
        self.sim().poll_access(ticket, buf, cx)
    }

    fn poll_read_owned(
        &self,
        ticket: Ticket,
        _len: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Vec<u8>, AccessError>> {
        self.sim().poll_read_owned(ticket, cx)
    }

    fn poll_wait(&self, ticket: Ticket, cx: &mut Context<'_>) -> Poll<bool> {
        self.sim().poll_wait(ticket, cx)
    }

    fn cancel(&self, ticket: Ticket) {
        self.sim().cancel(ticket)
    }

    fn config_read(
        &self,
        function: EndpointId,
        offset: u16,
        len: usize,
    ) -> LocalFuture<Result<Vec<u8>, AccessError>> {
        let agent = self.clone();
        Box::pin(async move {
            let mut buf = vec![0u8; len];
            agent
                .config_read(function, offset, &mut buf)
                .await
                .map(|()| buf)
        })
    }

    fn config_write(
        &self,
        function: EndpointId,
        offset: u16,
        data: Vec<u8>,
    ) -> LocalFuture<Result<(), AccessError>> {
        let agent = self.clone();
        Box::pin(async move { agent.config_write(function, offset, &data).await })
    }
}

/// The timing model's account of one read on idle links: the engine's cut-through rule —
/// every link's propagation, every chip's latency but the target's, the TLP's serialization
/// on the last link, and on the way whatever more a slower link takes to serialize it than
/// the next one — for the request out (no payload) and the completion back (`len` bytes),
/// plus the completer's own latency.
fn idle_read_cost(
    fabric: &Fabric,
    timing: &Timing,
    requester: Requester,
    addr: BusAddr,
    len: u64,
) -> Result<IdleReadCost, AccessError> {
    let route = fabric
        .route(requester, addr, len, Access::Read)
        .map_err(AccessError::from)?;
    let before_target = &route.hops[..route.hops.len().saturating_sub(1)];
    let mut chips = Vec::new();
    for hop in before_target {
        let node = fabric.node(hop.node);
        let chip = match &node.kind {
            NodeKind::Switch { chip } | NodeKind::ClusterSwitch { chip } => chip.clone(),
            NodeKind::Ntb { spec, .. } => spec.chip.clone(),
            NodeKind::RootComplex => "root complex".to_string(),
            NodeKind::Device { .. } => continue,
        };
        chips.push(format!("{} ({chip})", node.name));
    }
    let links: Vec<_> = route
        .hops
        .iter()
        .map(|h| timing.links[h.link.index()])
        .collect();
    let chips_ps: u64 = before_target
        .iter()
        .map(|h| timing.node_latency_ps[h.node.index()])
        .sum();
    let one_way = |links: &[LinkTiming], payload: u64| -> u64 {
        let ser = |i: usize| links[i].serialization_ps(payload);
        let last = links.len().saturating_sub(1);
        let slower: u64 = (0..last).map(|i| ser(i).saturating_sub(ser(i + 1))).sum();
        links.iter().map(|l| l.prop_ps).sum::<u64>()
            + chips_ps
            + slower
            + if links.is_empty() { 0 } else { ser(last) }
    };
    let back: Vec<_> = links.iter().rev().copied().collect();
    let completer_ps = match route.target {
        Target::Memory { .. } => timing.root_complex_ps + timing.memory_read_ps,
        Target::Bar { endpoint, .. } => timing.endpoint_read_ps[endpoint.index()],
        Target::Interrupt { .. } | Target::Multicast { .. } => 0,
    };
    Ok(IdleReadCost {
        chips,
        path_ps: one_way(&links, 0) + one_way(&back, len),
        completer_ps,
    })
}
