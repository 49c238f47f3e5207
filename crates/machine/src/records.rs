//! What engines report: link events, faults, counters, the outcome of a run.

use smartio_fabric::LinkId;
use smartio_platform::{AccessError, SimTime};

/// A link going down or coming up, as recorded by the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEvent {
    /// When.
    pub at: SimTime,
    /// Which link.
    pub link: LinkId,
    /// Its new state.
    pub up: bool,
}

/// A fault seen in the fabric (an IOMMU fault, an unsupported request from a posted write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRecord {
    /// When.
    pub at: SimTime,
    /// What.
    pub error: AccessError,
}

/// Engine counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// TLPs delivered to their destination (writes, read requests, completions). An engine
    /// that moves whole accesses at once counts one per access.
    pub tlp_arrivals: u64,
    /// Events processed.
    pub events: u64,
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    /// Virtual time at the end.
    pub end: SimTime,
    /// Counters at the end.
    pub counters: Counters,
    /// Tasks that never finished (waiting on something that will not happen).
    pub blocked_tasks: usize,
}

/// How a timing model costs one read on an idle fabric: what a report shows next to a
/// measured latency to explain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleReadCost {
    /// The chips the request crosses before its target, as `name (model)`.
    pub chips: Vec<String>,
    /// Request out and completion back over the path, in picoseconds.
    pub path_ps: u64,
    /// What the completer takes to answer, in picoseconds.
    pub completer_ps: u64,
}
