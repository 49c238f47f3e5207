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
//!
//! # Inside this crate
//!
//! What software running on the cluster sees of it, stated once for every engine.
//!
//! - `Engine` (with `FabricControl` — read the fabric, change its look-up-table, requester-id,
//!   IOMMU and multicast tables, schedule link state changes, wait for link events, read the
//!   fault log — and `PayloadAccess` — peek, poke and zero host memory for set-up and
//!   verification) and `AgentPort` (one requester: read, write, sleep, memory watch,
//!   configuration read and write, interrupt wait with an optional timeout) are what an engine
//!   implements. Both are dyn-compatible. The everyday operations of an `AgentPort` — read,
//!   write, sleep, memory watch, interrupt wait — are poll-style: the port starts one and
//!   gives what it `Started` (a `Ticket`, or a boxed future from a port that composes others,
//!   such as a vCPU's access split across host pages), and the `Agent`'s futures (`ops`:
//!   `Read` into the caller's buffer, `ReadOwned` into a buffer of its own — `Port::read_owned`,
//!   for large DMA data: `poll_read_owned` hands the engine's buffer over, no zeroing, no copy
//!   (the timed engine moves the transaction's; the default zero-fills one) — `Write` from the
//!   caller's slice, `WriteOwned` of a buffer given away — `Port::write_owned`: the timed
//!   engine keeps it as the transaction's, no copy (the default copies) —, `WriteSwapped` of
//!   the caller's buffer taken in exchange for a spare one — `Port::write_swapped`: the timed
//!   engine keeps it as the transaction's and leaves a spare transaction buffer, no copy and
//!   no allocation (the default copies) —, `WriteZeroes` —
//!   `Port::write_zeroes`: the timed engine keeps no bytes, and zeroes whole pages of memory
//!   by giving them back —, `Armed`, `InterruptWait`) poll the ticket through the port and give it
//!   back when dropped early. A cost (`Clock::spend` → `AgentPort::spend`, a sleep by
//!   default) may be `Started::Ready` at once: the engine let it pass in place (`Spend`, which
//!   then holds nothing; never inside a `race`).
//!   So an engine can run them without allocating per call (the timed engine does); the other
//!   futures are boxed (`LocalFuture`).
//! - `Machine` and `Agent` are the handles software holds: a `Machine` spawns tasks, runs, gives
//!   the `Agent` of a CPU or a device, and wraps fabric changes in a typed closure
//!   (`with_fabric_mut`); an `Agent` implements the platform traits (`Port`, `Clock`,
//!   `MemoryWatch`, `Spawner`) and this crate's `Interrupts` and `ConfigAccess`, so drivers
//!   written against traits run on either engine.
//! - Reports: `LinkEvent`, `FaultRecord`, `Counters`, `RunSummary`, `LinkTraffic` (what each link
//!   carried each way: the timed engine's per-lane counts, kept as it books each hop, so
//!   reporting them costs nothing per TLP; the `links` of `fio`, `bench engine` and `exp`
//!   JSON; the direct engine counts one per access, no busy time); and for engines with a timing
//!   model, `idle_read_cost` (the chips a read crosses and its idle round trip, which `exp
//!   sq-placement` prints next to a measured latency) and `cpu_store_cost`. An engine without
//!   timing answers `None`.
//!
//! **Threading model (the live engine).** A `Machine`, its `Agent`s and every future they return
//! are `!Send` (`Rc`, `RefCell`): one engine instance runs its tasks on one thread. The live
//! engine keeps that rule instead of sharing handles across threads: programs of the emulated
//! hosts are processes of their own (their memory is the hosts' RAM, memfd-backed, mapped), and
//! the cluster daemon runs one engine on one thread — the fabric, the SmartIO service and every
//! device model — so device models and drivers stay as written (no `Send` bounds, no locks).
//! Programs and device models meet only in shared memory (segments, and BARs as register pages
//! the daemon's thread watches) and on the daemon's socket, as the hardware's agents meet only
//! on the fabric; the one fabric instance accesses are routed by is the daemon's, so a table
//! change by SmartIO applies to the next device access. Built as planned except one point: the
//! plan gave each device model a thread (and `Machine`) of its own, polling its doorbell page
//! through its own `Port`. One engine thread serves the examples and tests with room to spare
//! (an NVMe command from C completes in tens of microseconds) and needs no cross-thread fabric;
//! device threads would need the fabric behind a lock or its changes sent to them, and are
//! worth it only when several devices must run at once at full speed.

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
pub use ops::{
    Armed, InterruptWait, Read, ReadOwned, Spend, Write, WriteOwned, WriteSwapped, WriteZeroes,
};
pub use records::{
    Counters, FaultRecord, IdleReadCost, LaneTraffic, LinkEvent, LinkTraffic, RunSummary,
};
pub use smartio_calibration::CpuTiming;
