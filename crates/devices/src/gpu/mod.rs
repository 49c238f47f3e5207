//! The GPU: registers and channels in BAR0, an aperture onto device memory in BAR1, copy
//! engines, and streaming multiprocessors that run kernels as agents on the device.
//!
//! [`spec`] is the programming interface the model and the GPU runtime share; [`kernel`] is
//! how kernels are written and loaded. The model is split by job:
//!
//! - [`memory`]: device memory and its waiters (every write wakes all of them);
//! - `regs`: BAR0 registers, the MSI-X table, BAR1 (the [`BarHandler`] side);
//! - `channel`: each channel's front end — fetch ring entries by DMA, decode, execute in
//!   order, stop on an error;
//! - `copy`: copy engines shared by channels (FIFO per engine) and the copies themselves;
//! - `launch`: a launch's threads as tasks on the GPU's own port.
//!
//! Every cost is virtual time from [`GpuTiming`] (a calibration `[gpu.*]` profile). Failures
//! of what the front end itself touches are reported as the spec's error codes: a device
//! offset outside device memory or a failed bus access of a copy, a timestamp, a release or
//! an acquire is [`spec::ErrorCode::CopyFailed`] (info: the address), a bus address at or
//! above `1 << dma_bits` is [`spec::ErrorCode::AddressLimit`], checked before any bus access.
//!
//! Invariants: `aperture <= memory` and at least one copy engine ([`Gpu::new`] clamps); a
//! channel's work after a `RESET` is discarded (its task drops the in-flight work and the
//! threads of its launch are aborted); channels' entries execute in order, one at a time.
//!
//! [`BarHandler`]: smartio_platform::BarHandler

mod channel;
mod copy;
pub mod kernel;
mod launch;
pub mod memory;
pub mod params;
mod regs;
pub mod spec;

pub use kernel::{FaultReason, KernelFault, KernelFn, KernelFuture, KernelLibrary, ThreadContext};
pub use memory::{DeviceMemory, OutsideMemory};
pub use params::GpuParams;

use crate::config::{ConfigSpace, MsixLayout};
use crate::msix::MsixTable;
use channel::Channel;
use copy::CopyEngine;
use kernel::ThreadEnv;
use smartio_platform::{Clock, Notify, Port, SimDuration, SimTime, Spawner};
use std::cell::RefCell;
use std::rc::Rc;

/// A GPU's engines and costs (a calibration `[gpu.*]` profile).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuTiming {
    /// Copy engines channels share (channel `c` uses engine `c % copy_engines`).
    pub copy_engines: u16,
    /// Streaming multiprocessors (reported in `SM_COUNT`).
    pub sm_count: u32,
    /// Frequency of the cycle counter kernels read, in kHz.
    pub clock_khz: u64,
    /// Bus address bits the GPU can put on the bus.
    pub dma_bits: u8,
    /// Device-memory bandwidth in bytes per second (device-to-device copies).
    pub memory_bandwidth: f64,
    /// The most one copy engine moves between the bus and device memory, in bytes per
    /// second (`None`: no limit of its own, the path's links and tags decide).
    pub copy_bus_bandwidth: Option<f64>,
    /// The front end decoding one ring entry.
    pub command: SimDuration,
    /// A copy engine starting one copy, before its first access.
    pub copy_start: SimDuration,
    /// From a launch entry to its threads running.
    pub launch: SimDuration,
    /// One read of the cycle counter by a kernel.
    pub clock_read: SimDuration,
    /// One device-memory access by a kernel thread.
    pub memory_access: SimDuration,
}

/// How one GPU is built.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuConfig {
    /// Bytes of device memory.
    pub memory: u64,
    /// Bytes of device memory reachable through BAR1 (from offset 0; the BAR's size).
    pub aperture: u64,
    /// Engines and costs.
    pub timing: GpuTiming,
}

/// An emulated GPU running kernels from a [`KernelLibrary`] of `P` (the port type its
/// engine hands it).
pub struct Gpu<P> {
    config: GpuConfig,
    pci: Rc<ConfigSpace>,
    kernels: Rc<KernelLibrary<P>>,
    memory: Rc<DeviceMemory>,
    msix: MsixTable,
    channels: Vec<Channel>,
    engines: Vec<Rc<CopyEngine>>,
    env: Rc<ThreadEnv>,
    /// The GPU's port once [`Gpu::run`] started: the clock `TIMER` reads.
    clock: RefCell<Option<P>>,
    /// The MSI-X table was written (a vector may have been unmasked).
    wake: Notify,
}

impl<P> std::fmt::Debug for Gpu<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("memory", &self.config.memory)
            .field("aperture", &self.config.aperture)
            .field("timing", &self.config.timing)
            .finish()
    }
}

impl<P> Gpu<P> {
    /// A GPU with `config`, answering configuration requests through `pci` (built with
    /// [`Gpu::msix_layout`]) and launching kernels from `kernels`. An aperture larger than
    /// memory is cut to it; zero copy engines count as one.
    pub fn new(mut config: GpuConfig, pci: Rc<ConfigSpace>, kernels: Rc<KernelLibrary<P>>) -> Self {
        config.aperture = config.aperture.min(config.memory);
        config.timing.copy_engines = config.timing.copy_engines.max(1);
        let memory = Rc::new(DeviceMemory::new(config.memory));
        let t = &config.timing;
        let env = Rc::new(ThreadEnv {
            memory: memory.clone(),
            memory_access: t.memory_access,
            clock_read: t.clock_read,
            clock_khz: t.clock_khz,
            dma_bits: t.dma_bits,
        });
        Self {
            msix: MsixTable::new(spec::CHANNELS),
            channels: (0..spec::CHANNELS).map(|_| Channel::new()).collect(),
            engines: (0..t.copy_engines)
                .map(|_| Rc::new(CopyEngine::new(copy::ENGINE_BUSY)))
                .collect(),
            env,
            memory,
            kernels,
            pci,
            config,
            clock: RefCell::new(None),
            wake: Notify::new(),
        }
    }

    /// Where the MSI-X table lives: BAR0, one vector per channel.
    pub fn msix_layout() -> MsixLayout {
        MsixLayout {
            vectors: spec::CHANNELS,
            table_bar: spec::REGISTER_BAR,
            table_offset: spec::MSIX_TABLE as u32,
            pba_bar: spec::REGISTER_BAR,
            pba_offset: spec::MSIX_PBA as u32,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GpuConfig {
        &self.config
    }

    /// Bytes of device memory.
    pub fn memory_size(&self) -> u64 {
        self.config.memory
    }

    /// Bytes of device memory reachable through BAR1.
    pub fn aperture_size(&self) -> u64 {
        self.config.aperture
    }

    /// The kernels this GPU launches.
    pub fn kernels(&self) -> &Rc<KernelLibrary<P>> {
        &self.kernels
    }

    /// Untimed read of device memory (set-up and verification).
    pub fn peek(&self, offset: u64, buf: &mut [u8]) -> Result<(), OutsideMemory> {
        self.memory.read(offset, buf)
    }

    /// Untimed write of device memory (set-up); wakes every waiter.
    pub fn poke(&self, offset: u64, data: &[u8]) -> Result<(), OutsideMemory> {
        self.memory.write(offset, data)
    }

    /// Device memory (for tests of waiters).
    #[cfg(test)]
    pub(crate) fn memory(&self) -> &DeviceMemory {
        &self.memory
    }
}

impl<P: Clock> Gpu<P> {
    /// The GPU timer: virtual time in nanoseconds (0 before [`Gpu::run`]).
    fn timer_ns(&self) -> u64 {
        self.clock
            .borrow()
            .as_ref()
            .map_or(SimTime::ZERO, |c| c.now())
            .as_ps()
            / 1_000
    }
}

impl<P: Port + Clock + Spawner + Clone + 'static> Gpu<P> {
    /// The GPU's main task: starts one task per channel, then sends MSI-X messages that
    /// software unmasked while pending. Runs forever.
    pub async fn run(self: Rc<Self>, port: P) {
        *self.clock.borrow_mut() = Some(port.clone());
        // The port leads back to the engine, which holds this GPU as a BAR handler: when
        // the engine drops this task (a shutdown), the port must go too, or neither is freed.
        let _forget = ForgetClock(&self.clock);
        for c in 0..spec::CHANNELS {
            let task = self.clone().channel_task(c, port.clone());
            port.spawn_task(Box::pin(task));
        }
        loop {
            self.wake.notified().await;
            for m in self.msix.take_unmasked_pending() {
                let _ = port.write(m.address, &m.payload()).await;
            }
        }
    }

    /// Signals channel `c`'s vector: an MSI-X message (held pending while masked), or the
    /// INTx line when MSI-X is off and INTx routed, as the NVMe controller does.
    async fn interrupt(&self, c: u16, port: &P) {
        if let Some(m) = crate::msix::interrupt_message(&self.pci, &self.msix, c) {
            let _ = port.write(m.address, &m.payload()).await;
        }
    }
}

/// Clears the GPU's clock when [`Gpu::run`] ends or is dropped.
struct ForgetClock<'a, P>(&'a RefCell<Option<P>>);

impl<P> Drop for ForgetClock<'_, P> {
    fn drop(&mut self) {
        self.0.borrow_mut().take();
    }
}

#[cfg(test)]
pub(crate) mod testing;
