//! The timed engine: a deterministic discrete-event simulation in virtual time (picoseconds).
//!
//! It costs every access on its fabric path — TLP splitting by MPS / MRRS / RCB, per-TLP
//! overhead bytes, per-link per-direction FIFO occupancy, per-chip latency, root-complex and
//! memory latency, a limit on outstanding non-posted requests per requester — and keeps
//! byte-exact sparse memory for every host. Agents (drivers, workloads, device engines) are
//! `async` tasks that use the [`smartio_platform`] traits through an [`Agent`].
//!
//! Same scenario, same calibration, same inputs ⇒ bit-identical results.

#![forbid(unsafe_code)]

/// The calibration file, re-exported: the engine resolves its timing from it.
pub use smartio_calibration as calibration;
mod contract;
mod core;
mod events;
mod executor;
pub mod iotlb;
mod ops;
pub mod record;
pub mod sim;
pub mod timing;
pub mod txn;
pub mod wait;
mod waiters;

pub use crate::core::{Counters, FaultRecord, LinkEvent};
pub use calibration::{Calibration, CalibrationError};
pub use sim::{Agent, RunSummary, Sim};
pub use timing::{LinkState, Timing, TimingError};
pub use wait::{BlockedTask, Wait};
