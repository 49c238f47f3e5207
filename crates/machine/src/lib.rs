//! The platform contract above the fabric: the machine that the host OS model, SmartIO,
//! drivers and workloads run on.
//!
//! [`smartio_platform`] holds the traits device models need (ports, clock, memory watches,
//! BAR and configuration handlers, spawning); it sits below the fabric and cannot name a
//! host, an endpoint or the fabric itself. Software above the devices needs more: a CPU of a
//! given host, a device's DMA engine, configuration requests routed to a function, interrupts
//! with a timeout, changes to the fabric's tables (look-up-table and requester-id entries,
//! IOMMU mappings, multicast groups, link state), and direct access to payload memory for
//! set-up and verification. This crate states all of that once:
//!
//! - [`Engine`] (with [`FabricControl`] and [`PayloadAccess`]) and [`AgentPort`] are what an
//!   engine implements. Both are dyn-compatible: software holds an engine as
//!   `Rc<dyn Engine>` and never learns which one it is.
//! - [`Machine`] and [`Agent`] are the handles software uses. An [`Agent`] implements the
//!   platform traits ([`Port`](smartio_platform::Port), [`Clock`](smartio_platform::Clock),
//!   [`MemoryWatch`](smartio_platform::MemoryWatch), [`Spawner`](smartio_platform::Spawner))
//!   and this crate's [`Interrupts`] and [`ConfigAccess`], so a driver written against them
//!   runs unchanged on every engine.
//!
//! Threading: a machine and its agents are `!Send` (`Rc`), and every future they return is
//! `!Send`. Each engine runs its tasks on one thread. The live engine keeps that rule per
//! thread rather than sharing handles between threads: every device model thread and every
//! emulated host process runs its own single-threaded executor with its own `Machine`, and
//! they meet only in shared memory (segments, doorbell pages) and the cluster daemon's
//! socket — the way the hardware's agents meet only on the fabric. See
//! `docs/architecture.md`, "How to add an engine".

#![forbid(unsafe_code)]

mod agent;
mod engine;
pub mod explain;
mod machine;
mod ops;
mod records;

pub use agent::{Agent, ConfigAccess, Interrupts};
pub use engine::{AgentPort, Engine, FabricControl, LocalFuture, PayloadAccess, Started, Ticket};
pub use explain::{
    CriticalPath, PathStep, RecordingOptions, StepClass, StepRef, Trace, TraceEvent, TraceTrack,
    TrackKind,
};
pub use machine::{Machine, WeakMachine};
pub use ops::{Armed, InterruptWait, Read, ReadOwned, Write};
pub use records::{
    Counters, FaultRecord, IdleReadCost, LaneTraffic, LinkEvent, LinkTraffic, RunSummary,
};
pub use smartio_calibration::CpuTiming;
