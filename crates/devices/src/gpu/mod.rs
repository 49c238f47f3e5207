//! The GPU: registers and channels in BAR0, an aperture onto device memory in BAR1, copy
//! engines, and streaming multiprocessors that run kernels as agents on the device.
//!
//! [`spec`] is the programming interface the model and the GPU runtime share.

pub mod spec;
