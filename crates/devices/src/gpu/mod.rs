//! The GPU: registers and channels in BAR0, an aperture onto device memory in BAR1, copy
//! engines, and streaming multiprocessors that run kernels as agents on the device.
//!
//! [`spec`] is the programming interface the model and the GPU runtime share; [`kernel`] is
//! how kernels are written and loaded.

pub mod kernel;
pub mod memory;
pub mod spec;

pub use kernel::{FaultReason, KernelFault, KernelFn, KernelFuture, KernelLibrary, ThreadContext};
pub use memory::{DeviceMemory, OutsideMemory};
