//! The GPU runtime, shaped like the CUDA runtime the papers' programs use: a context per GPU
//! (`GpuContext`), device and pinned host memory, streams (one GPU channel each), events
//! timed by the GPU, kernels launched from a [`KernelLibrary`], and peer-to-peer access to
//! another GPU's memory through its BAR1 aperture.
//!
//! It binds only through the host OS model's [`DeviceHandle`](smartio_host::DeviceHandle):
//! BAR0 through `map_bar`, rings, semaphores, notifiers and event slots in pinned host memory
//! from `dma_alloc_coherent`, peers through `dma_map_peer`. So the same runtime runs on a
//! local GPU and on one borrowed by Device Lending, and cannot tell them apart; what differs
//! is only how long its doorbells take to cross the fabric.
//!
//! How work reaches the GPU (the programming interface is `smartio_devices::gpu::spec`):
//!
//! 1. An asynchronous call (`memcpy_async`, `launch`, `record`) spends
//!    [`RuntimeCosts::call`] on the CPU, writes its 64-byte ring entries into the stream's
//!    ring in pinned host memory with CPU stores, then writes the channel's `PUT` register
//!    (the doorbell: a posted write through BAR0, across the NTB for a borrowed GPU).
//! 2. The GPU fetches the entries by DMA and executes them in order.
//! 3. `synchronize` queues a RELEASE of the ring position into the stream's semaphore in
//!    pinned host memory and waits for it with a memory watch (no interrupt, no MMIO read),
//!    or for the channel's error notice, then spends [`RuntimeCosts::sync`].
//!
//! Modules: [`context`] (the bound GPU, memory and peers), [`stream`] (rings and
//! synchronisation), [`event`] (GPU timestamps), [`memory`] (the device-memory allocator and
//! buffer types), [`error`].

pub mod context;
pub mod error;
pub mod event;
pub mod memory;
pub mod stream;

pub use context::{GpuContext, GpuProperties, PeerAccess};
pub use error::{BadCall, GpuError};
pub use event::Event;
pub use memory::{DeviceBuffer, HostBuffer};
pub use smartio_devices::gpu::spec::{ErrorCode, GpuAddr, KernelId};
pub use smartio_devices::gpu::{KernelFault, KernelFn, KernelLibrary, ThreadContext};
pub use stream::Stream;

use smartio_calibration::GpuRuntimeParams;
use smartio_platform::SimDuration;

/// What the runtime's calls cost on the host CPU (calibration `[gpu_runtime]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeCosts {
    /// One asynchronous call before its entries are in the ring.
    pub call: SimDuration,
    /// A synchronisation call's software path once the GPU's semaphore is seen.
    pub sync: SimDuration,
}

impl RuntimeCosts {
    /// The costs a calibration's `[gpu_runtime]` gives.
    pub fn from_calibration(params: &GpuRuntimeParams) -> RuntimeCosts {
        RuntimeCosts {
            call: SimDuration::from_ns_f64(params.call_ns.value),
            sync: SimDuration::from_ns_f64(params.sync_ns.value),
        }
    }
}
