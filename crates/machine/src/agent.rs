//! [`Agent`]: a requester's handle (a host's CPU or a device's DMA engine), and the two
//! traits above the platform's that it implements.

use crate::engine::AgentPort;
use crate::machine::Machine;
use crate::ops::{
    Armed, InterruptWait, Read, ReadOwned, Spend, Write, WriteOwned, WriteSwapped, WriteZeroes,
};
use smartio_fabric::{EndpointId, Requester};
use smartio_platform::{
    AccessError, BusAddr, Clock, LocalTask, MemoryWatch, PhysAddr, Port, SimDuration, SimTime,
    Spawner,
};
use std::future::Future;
use std::panic::Location;
use std::rc::Rc;

/// Waiting for interrupts: what an interrupt handler thread or a driver's probe does.
pub trait Interrupts {
    /// Waits for interrupt `vector` on this agent's host, consuming one.
    fn interrupt(&self, vector: u32) -> impl Future<Output = ()>;

    /// Waits for interrupt `vector` for at most `timeout`: `true` if it came (and was
    /// consumed), `false` on timeout.
    fn interrupt_timeout(&self, vector: u32, timeout: SimDuration) -> impl Future<Output = bool>;
}

/// Configuration requests, routed by bus/device/function inside one host's PCIe domain.
pub trait ConfigAccess {
    /// Reads `buf.len()` bytes at `offset` of `function`'s configuration space.
    fn config_read(
        &self,
        function: EndpointId,
        offset: u16,
        buf: &mut [u8],
    ) -> impl Future<Output = Result<(), AccessError>>;

    /// Writes `data` at `offset` of `function`'s configuration space.
    fn config_write(
        &self,
        function: EndpointId,
        offset: u16,
        data: &[u8],
    ) -> impl Future<Output = Result<(), AccessError>>;
}

/// A requester's view of the machine. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    port: Rc<dyn AgentPort>,
    machine: Machine,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("requester", &self.port.requester())
            .finish()
    }
}

impl Agent {
    pub(crate) fn new(port: Rc<dyn AgentPort>, machine: Machine) -> Agent {
        Agent { port, machine }
    }

    /// Who this agent is.
    pub fn requester(&self) -> Requester {
        self.port.requester()
    }

    /// The port its accesses go through (to wrap it: [`Machine::agent_with_port`]).
    pub fn port(&self) -> Rc<dyn AgentPort> {
        self.port.clone()
    }

    /// The machine it belongs to.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// [`ConfigAccess::config_read`], callable without importing the trait.
    pub async fn config_read(
        &self,
        function: EndpointId,
        offset: u16,
        buf: &mut [u8],
    ) -> Result<(), AccessError> {
        ConfigAccess::config_read(self, function, offset, buf).await
    }

    /// [`ConfigAccess::config_write`], callable without importing the trait.
    pub async fn config_write(
        &self,
        function: EndpointId,
        offset: u16,
        data: &[u8],
    ) -> Result<(), AccessError> {
        ConfigAccess::config_write(self, function, offset, data).await
    }

    /// [`MemoryWatch::written`] as a named future (armed now), for a caller that keeps it.
    pub fn watch(&self, addr: PhysAddr, len: u64) -> Armed {
        Armed::written(self.port.clone(), addr, len)
    }

    /// [`Interrupts::interrupt`], callable without importing the trait.
    pub async fn interrupt(&self, vector: u32) {
        Interrupts::interrupt(self, vector).await
    }

    /// [`Interrupts::interrupt_timeout`], callable without importing the trait.
    pub async fn interrupt_timeout(&self, vector: u32, timeout: SimDuration) -> bool {
        Interrupts::interrupt_timeout(self, vector, timeout).await
    }
}

impl Port for Agent {
    fn read<'s, 'b>(
        &'s self,
        addr: BusAddr,
        buf: &'b mut [u8],
    ) -> impl Future<Output = Result<(), AccessError>> + use<'s, 'b> {
        Read::new(&*self.port, addr, buf)
    }

    fn write<'s, 'b>(
        &'s self,
        addr: BusAddr,
        data: &'b [u8],
    ) -> impl Future<Output = Result<(), AccessError>> + use<'s, 'b> {
        Write::new(&*self.port, addr, data)
    }

    fn read_owned(
        &self,
        addr: BusAddr,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, AccessError>> {
        ReadOwned::new(self.port.clone(), addr, len)
    }

    fn write_owned(
        &self,
        addr: BusAddr,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<(), AccessError>> {
        WriteOwned::new(self.port.clone(), addr, data)
    }

    fn write_swapped<'s, 'b>(
        &'s self,
        addr: BusAddr,
        data: &'b mut Vec<u8>,
    ) -> impl Future<Output = Result<(), AccessError>> + use<'s, 'b> {
        WriteSwapped::new(&*self.port, addr, data)
    }

    fn write_zeroes(
        &self,
        addr: BusAddr,
        len: usize,
    ) -> impl Future<Output = Result<(), AccessError>> {
        WriteZeroes::new(self.port.clone(), addr, len)
    }
}

impl Clock for Agent {
    #[inline]
    fn now(&self) -> SimTime {
        self.machine.now()
    }

    fn sleep(&self, duration: SimDuration) -> impl Future<Output = ()> {
        Armed::sleep(self.port.clone(), duration)
    }

    /// The engine may let the cost pass in place ([`AgentPort::spend`]).
    fn spend(&self, what: &'static str, duration: SimDuration) -> impl Future<Output = ()> {
        smartio_platform::activity::doing(what);
        Spend::new(&self.port, duration)
    }
}

impl MemoryWatch for Agent {
    /// Armed now, before the returned future is polled (the trait's contract).
    fn written(&self, addr: PhysAddr, len: u64) -> impl Future<Output = ()> {
        self.watch(addr, len)
    }
}

impl Spawner for Agent {
    #[track_caller]
    fn spawn_task(&self, task: LocalTask) {
        self.machine.spawn_boxed(task, Location::caller());
    }
}

impl Interrupts for Agent {
    async fn interrupt(&self, vector: u32) {
        InterruptWait::new(self.port.clone(), vector, None).await;
    }

    fn interrupt_timeout(&self, vector: u32, timeout: SimDuration) -> impl Future<Output = bool> {
        InterruptWait::new(self.port.clone(), vector, Some(timeout))
    }
}

impl ConfigAccess for Agent {
    async fn config_read(
        &self,
        function: EndpointId,
        offset: u16,
        buf: &mut [u8],
    ) -> Result<(), AccessError> {
        let data = self.port.config_read(function, offset, buf.len()).await?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    fn config_write(
        &self,
        function: EndpointId,
        offset: u16,
        data: &[u8],
    ) -> impl Future<Output = Result<(), AccessError>> {
        self.port.config_write(function, offset, data.to_vec())
    }
}
