//! What an engine implements. Every trait here is dyn-compatible: software holds an engine
//! as `Rc<dyn Engine>` and its agents as `Rc<dyn AgentPort>`.

use crate::explain::{CriticalPath, RecordingOptions, StepRef, Trace};
use crate::records::{Counters, FaultRecord, IdleReadCost, LinkEvent, RunSummary};
use smartio_calibration::CpuTiming;
use smartio_fabric::{EndpointId, Fabric, HostId, LinkId, Requester};
use smartio_platform::{
    AccessError, BarHandler, BusAddr, ConfigHandler, LocalTask, PhysAddr, SimDuration, SimTime,
};
use std::cell::Ref;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// A boxed, `!Send` future: what the dyn-compatible traits return.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// Reading and changing the fabric model the engine routes by: look-up-table and
/// requester-id entries of NTB adapters, IOMMU domains, multicast groups, link state.
///
/// The fabric model is the same for every engine; an engine owns the one instance its
/// accesses are routed by, so a change made here applies to the next access.
pub trait FabricControl {
    /// The fabric, read-only. Do not hold the borrow across an `await`.
    fn fabric(&self) -> Ref<'_, Fabric>;

    /// Calls `change` exactly once with the fabric, mutable.
    fn change_fabric(&self, change: &mut dyn FnMut(&mut Fabric));

    /// Takes `link` down (`up = false`) or brings it up at time `at`. Until it comes back,
    /// posted writes over it are dropped and reads over it fail.
    fn schedule_link_state(&self, link: LinkId, up: bool, at: SimTime);

    /// Link state changes so far, in order.
    fn link_events(&self) -> Vec<LinkEvent>;

    /// Waits until more than `seen` link state changes have happened; returns the next one.
    fn next_link_event(&self, seen: usize) -> LocalFuture<LinkEvent>;

    /// Faults recorded so far (IOMMU faults, unsupported requests, completer aborts).
    fn faults(&self) -> Vec<FaultRecord>;
}

/// Direct access to hosts' memory, taking no time: set-up (a payload to write, freshly
/// allocated memory to zero) and verification (the bytes that landed).
pub trait PayloadAccess {
    /// Reads host memory.
    fn peek_memory(&self, host: HostId, addr: PhysAddr, buf: &mut [u8]);

    /// Appends `len` bytes of host memory at `addr` to `out` ([`PayloadAccess::peek_memory`]
    /// into a buffer that is not zeroed first).
    fn peek_memory_append(&self, host: HostId, addr: PhysAddr, len: usize, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + len, 0);
        self.peek_memory(host, addr, &mut out[at..]);
    }

    /// Hands `len` bytes of host memory at `addr` to `look`, as [`PayloadAccess::peek_memory`]
    /// reads them: in place where the engine holds them in one piece, else copied first.
    /// `look` must not use the engine.
    fn inspect_memory(
        &self,
        host: HostId,
        addr: PhysAddr,
        len: usize,
        look: &mut dyn FnMut(&[u8]),
    ) {
        let mut buf = vec![0u8; len];
        self.peek_memory(host, addr, &mut buf);
        look(&buf);
    }

    /// Writes host memory; memory watches of the range fire.
    fn poke_memory(&self, host: HostId, addr: PhysAddr, data: &[u8]);

    /// Zeroes host memory; memory watches of the range fire.
    fn zero_memory(&self, host: HostId, addr: PhysAddr, len: u64);
}

/// An engine: the clock, the tasks, the agents, the fabric and memory.
pub trait Engine: FabricControl + PayloadAccess {
    /// The current virtual time.
    fn now(&self) -> SimTime;

    /// Starts a task; it first runs at the current time. `at` is where it was spawned, for
    /// the report of tasks that never finish.
    fn spawn(&self, task: LocalTask, at: &'static Location<'static>);

    /// Makes `handler` answer loads and stores to `endpoint`'s BARs (cluster assembly).
    fn attach_bar_handler(&self, endpoint: EndpointId, handler: Rc<dyn BarHandler>);

    /// Makes `handler` answer configuration requests to `endpoint` (cluster assembly).
    fn attach_config_handler(&self, endpoint: EndpointId, handler: Rc<dyn ConfigHandler>);

    /// The port of a requester: a host's CPU or a device's DMA engine.
    fn agent(&self, requester: Requester) -> Rc<dyn AgentPort>;

    /// Runs until no task is ready and nothing is pending.
    fn run(&self) -> RunSummary;

    /// Runs until `deadline`: what is due later stays pending.
    fn run_until(&self, deadline: SimTime) -> RunSummary;

    /// Drops every task, ready or waiting (tasks hold handles to their engine, so an engine
    /// with tasks left is never freed).
    fn shutdown(&self);

    /// The tasks that have not finished and what each waits for, in one line.
    fn blocked_summary(&self) -> String;

    /// What the engine has counted so far.
    fn counters(&self) -> Counters;

    /// What each link of the fabric carried so far, in the fabric's link order. An engine
    /// that moves whole accesses counts one per access, its bytes as payload and on the wire,
    /// and no busy time; the default, for an engine with no links to count, is empty.
    fn link_traffic(&self) -> Vec<crate::LinkTraffic> {
        Vec::new()
    }

    /// The CPU's and the host software's costs (block layer, interrupt delivery, ...), which
    /// the OS model and drivers charge themselves.
    fn cpu_timing(&self) -> &CpuTiming;

    /// How the timing model costs a read of `len` bytes at `addr` by `requester` on an idle
    /// fabric; `None` from an engine without a timing model.
    fn idle_read_cost(
        &self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
    ) -> Option<Result<IdleReadCost, AccessError>>;

    /// What a CPU store costs the core before it leaves: into its own RAM (`local`) or
    /// uncached through the root complex. `None` from an engine without a timing model.
    fn cpu_store_cost(&self, local: bool) -> Option<SimDuration>;

    /// Raises interrupt `vector` on `host`'s CPUs from software on that host (an
    /// inter-processor interrupt, a hypervisor's posted interrupt): it reaches a handler
    /// after the interrupt delivery, without a TLP.
    fn raise_interrupt(&self, host: HostId, vector: u32);

    /// Starts recording every step from now on (see [`crate::explain`]); `false` from an
    /// engine without a timing model, which records nothing.
    fn start_recording(&self, _options: RecordingOptions) -> bool {
        false
    }

    /// The step that woke the running task (its last wake-up's cause), while recording.
    fn current_step(&self) -> Option<StepRef> {
        None
    }

    /// The critical path of an operation that started at `start` and ended at `end`, when
    /// `last` woke the task that saw it end; `None` without a recording.
    fn critical_path(
        &self,
        _last: StepRef,
        _start: SimTime,
        _end: SimTime,
    ) -> Option<CriticalPath> {
        None
    }

    /// Adds a workload's operation to the trace, as a slice on the track `track`.
    fn trace_span(&self, _track: &str, _name: &str, _start: SimTime, _end: SimTime) {}

    /// The trace recorded so far (kept when recording started with a trace limit), taken;
    /// `None` without one.
    fn take_trace(&self) -> Option<Trace> {
        None
    }
}

/// An operation an engine has under way for one of its agents (an access, a timer, a memory
/// watch, an interrupt wait), named by the port that started it. Only that port can poll it
/// or give it back; what the number means is the engine's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(pub u64);

/// What starting an operation of an [`AgentPort`] gives.
pub enum Started<T> {
    /// Finished at once with this outcome (an access refused before it left).
    Ready(T),
    /// Under way in the engine: polled with the port's [`AgentPort::poll_access`] or
    /// [`AgentPort::poll_wait`], and given back with [`AgentPort::cancel`] if it is dropped
    /// before it finished. A ticket is held by one future, and not used after the poll that
    /// returned ready.
    Ticket(Ticket),
    /// A future of its own, for a port that composes other operations (a vCPU's access split
    /// across host pages) or an engine that keeps no operations.
    Boxed(LocalFuture<T>),
}

impl<T> std::fmt::Debug for Started<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Started::Ready(_) => f.write_str("Ready"),
            Started::Ticket(t) => f.debug_tuple("Ticket").field(&t.0).finish(),
            Started::Boxed(_) => f.write_str("Boxed"),
        }
    }
}

/// One requester's view of an engine: a host's CPU or a device's DMA engine.
///
/// The everyday operations — [`read`](AgentPort::read), [`write`](AgentPort::write),
/// [`sleep`](AgentPort::sleep), [`written`](AgentPort::written),
/// [`interrupt`](AgentPort::interrupt) — are poll-style, so that an engine can run them
/// without a future allocated per call: the port starts one and returns what it
/// [`Started`] (usually a [`Ticket`]), and the futures of [`crate::Agent`] poll the ticket
/// through the port and cancel it when dropped. Those futures call `read`, `write` and
/// `interrupt` when first polled (an access starts when first polled); `sleep` and
/// `written` are armed when called. Configuration requests are rare and stay futures
/// (`'static`, owning what they need).
pub trait AgentPort {
    /// Who this agent is.
    fn requester(&self) -> Requester;

    /// Starts a non-posted read of `len` bytes; its data is copied into the caller's buffer
    /// by [`AgentPort::poll_access`] (a boxed future returns it instead).
    fn read(&self, addr: BusAddr, len: usize) -> Started<Result<Vec<u8>, AccessError>>;

    /// Starts a posted write of `data` (copied: the caller's buffer is free once this
    /// returns). Done when its last TLP has left the requester.
    fn write(&self, addr: BusAddr, data: &[u8]) -> Started<Result<(), AccessError>>;

    /// [`AgentPort::write`] of a buffer the caller gives away: an engine that keeps a
    /// write's bytes until they land may keep this buffer instead of a copy (large DMA
    /// data). By default, copied as `write` copies it.
    fn write_owned(&self, addr: BusAddr, data: Vec<u8>) -> Started<Result<(), AccessError>> {
        self.write(addr, &data)
    }

    /// [`AgentPort::write`] of `data`'s bytes, which an engine that keeps a write's bytes
    /// until they land may take as they are, leaving in `data` an empty buffer of its own
    /// ([`smartio_platform::Port::write_swapped`]). By default, copied as `write` copies them.
    fn write_swapped(&self, addr: BusAddr, data: &mut Vec<u8>) -> Started<Result<(), AccessError>> {
        self.write(addr, data)
    }

    /// [`AgentPort::write`] of `len` zeroes: an engine that keeps a write's bytes until they
    /// land may keep none. By default, written from a zeroed buffer.
    fn write_zeroes(&self, addr: BusAddr, len: usize) -> Started<Result<(), AccessError>> {
        self.write(addr, &vec![0u8; len])
    }

    /// Arms a timer that completes `duration` after now.
    fn sleep(&self, duration: SimDuration) -> Started<()>;

    /// [`AgentPort::sleep`] for a cost the caller awaits at once ([`smartio_platform::Clock::spend`]'s
    /// contract): an engine may let it pass in place (the clock moved on by `duration` now,
    /// and [`Started::Ready`]) when nothing else could happen meanwhile, with the same
    /// outcome as the timer — never inside a race ([`smartio_platform::race::racing`]), where
    /// the other future may be ready first. By default, the timer.
    fn spend(&self, duration: SimDuration) -> Started<()> {
        self.sleep(duration)
    }

    /// Arms a watch that completes when `len` bytes at `addr` of the agent's host memory are
    /// next written (armed now, not when polled).
    fn written(&self, addr: PhysAddr, len: u64) -> Started<()>;

    /// Starts waiting for interrupt `vector` on the agent's host; completes when it came
    /// (consuming it) with `true`, or with `false` when `timeout` passed first (never,
    /// without a timeout).
    fn interrupt(&self, vector: u32, timeout: Option<SimDuration>) -> Started<bool>;

    /// Polls an access (a read or a write) this port started. When it is ready, a read's
    /// data has been copied into `buf`, which is as long as the read (a write passes an
    /// empty `buf`); the ticket is then spent.
    fn poll_access(
        &self,
        ticket: Ticket,
        buf: &mut [u8],
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AccessError>>;

    /// Polls a read this port started, handing its `len` bytes over as a buffer of their
    /// own (large DMA data: an engine that keeps the read's bytes in a buffer hands that
    /// over, with no zeroing and no copy). The default polls into a new zeroed buffer.
    fn poll_read_owned(
        &self,
        ticket: Ticket,
        len: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Vec<u8>, AccessError>> {
        let mut buf = vec![0u8; len];
        self.poll_access(ticket, &mut buf, cx)
            .map(|result| result.map(|()| buf))
    }

    /// Polls a sleep, a memory watch or an interrupt wait this port started: `true` when
    /// it completed (for an interrupt wait: the interrupt came), `false` when an interrupt
    /// wait's timeout passed first. When it is ready the ticket is spent.
    fn poll_wait(&self, ticket: Ticket, cx: &mut Context<'_>) -> Poll<bool>;

    /// Gives back an operation whose future was dropped before it was ready (the loser of
    /// a race): a timer, a watch or an interrupt wait is disarmed; an access goes on by
    /// itself (its TLPs still travel; a posted write still lands) and its result is
    /// dropped.
    fn cancel(&self, ticket: Ticket);

    /// A configuration read of `len` bytes at `offset` of `function`'s configuration space.
    /// Only a CPU of the function's own host can issue one; an absent function reads as
    /// all-ones.
    fn config_read(
        &self,
        function: EndpointId,
        offset: u16,
        len: usize,
    ) -> LocalFuture<Result<Vec<u8>, AccessError>>;

    /// A configuration write; the function may react before time moves on.
    fn config_write(
        &self,
        function: EndpointId,
        offset: u16,
        data: Vec<u8>,
    ) -> LocalFuture<Result<(), AccessError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Memory of one host, byte per byte: only what [`PayloadAccess`] requires.
    struct Bytes(RefCell<Vec<u8>>);

    impl PayloadAccess for Bytes {
        fn peek_memory(&self, _: HostId, addr: PhysAddr, buf: &mut [u8]) {
            let at = addr.get() as usize;
            buf.copy_from_slice(&self.0.borrow()[at..at + buf.len()]);
        }

        fn poke_memory(&self, _: HostId, addr: PhysAddr, data: &[u8]) {
            let at = addr.get() as usize;
            self.0.borrow_mut()[at..at + data.len()].copy_from_slice(data);
        }

        fn zero_memory(&self, _: HostId, addr: PhysAddr, len: u64) {
            let at = addr.get() as usize;
            self.0.borrow_mut()[at..at + len as usize].fill(0);
        }
    }

    /// An engine that does not say how to append a read gets one that reads into what it
    /// appends: the bytes peeked, after what the buffer held.
    #[test]
    fn appending_a_read_of_memory_by_default_appends_what_a_peek_reads() {
        let memory = Bytes(RefCell::new((0..64u8).collect()));
        let mut out = b"head".to_vec();
        memory.peek_memory_append(HostId(0), PhysAddr(10), 5, &mut out);
        memory.peek_memory_append(HostId(0), PhysAddr(60), 0, &mut out);
        assert_eq!(out, [b'h', b'e', b'a', b'd', 10, 11, 12, 13, 14]);
    }

    /// An engine that cannot hand memory over in place hands over what a peek reads.
    #[test]
    fn inspecting_memory_by_default_looks_at_what_a_peek_reads() {
        let memory = Bytes(RefCell::new((0..64u8).collect()));
        let mut seen = Vec::new();
        memory.inspect_memory(HostId(0), PhysAddr(20), 4, &mut |b| {
            seen.extend_from_slice(b)
        });
        memory.inspect_memory(HostId(0), PhysAddr(63), 0, &mut |b| {
            seen.extend_from_slice(b)
        });
        assert_eq!(seen, [20, 21, 22, 23]);
    }
}
