//! Where the time went: what an engine with a timing model records when asked, and the two
//! views it gives of the recording.
//!
//! - A [`CriticalPath`] explains one operation (an I/O, a ping-pong): the chain of steps
//!   that decided when it ended — a software cost, a CPU store's path to its root port,
//!   each link and chip a TLP crossed, a completer's read, the media, an interrupt's
//!   delivery — each with its start, its duration and what it waited for. The steps tile the
//!   operation from its start to its end, so their durations sum to its latency exactly.
//! - A [`Trace`] is the run's timeline: every recorded step as a slice on the track of the
//!   link, device, host or workload it happened on (Chrome/Perfetto trace events).
//!
//! Recording is off unless [`Engine::start_recording`](crate::Engine::start_recording) turns
//! it on, and a run that does not record costs what it did before.

use smartio_platform::{SimDuration, SimTime};

/// What a recording keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordingOptions {
    /// Keep the run's first steps as a trace ([`Engine::take_trace`](crate::Engine)), up to
    /// this many slices (a TLP is one, plus one per link it crosses; any other step, or a
    /// workload's operation, is one); `None`: keep no trace, only what critical paths need.
    pub trace_limit: Option<usize>,
}

/// A recorded step, by the engine's reckoning: what woke the running task, to ask for the
/// critical path that ends with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepRef(pub u32);

/// What kind of thing a step of a critical path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepClass {
    /// Host software: a system call, the block layer, a driver, a hypervisor's relay.
    Software,
    /// A CPU's own costs: its path to the root port, its loads and stores of local RAM.
    Cpu,
    /// A TLP on a link: propagation, serialization.
    Link,
    /// A TLP inside a switch chip or an NTB adapter (cut-through latency).
    Chip,
    /// A root complex: forwarding between root ports, into memory, back to the core.
    RootComplex,
    /// A completer's read: DRAM, a device's register or memory.
    Memory,
    /// A device's own work: media, a copy engine, a command's processing.
    Device,
    /// An interrupt's delivery to its handler.
    Interrupt,
    /// An IOMMU: a page walk after an IOTLB miss.
    Iommu,
    /// Waiting: for a busy link, or for something the recording does not name.
    Waiting,
}

impl StepClass {
    /// A short lower-case name (`software`, `link`, ...).
    pub fn name(self) -> &'static str {
        match self {
            StepClass::Software => "software",
            StepClass::Cpu => "cpu",
            StepClass::Link => "link",
            StepClass::Chip => "chip",
            StepClass::RootComplex => "root complex",
            StepClass::Memory => "memory",
            StepClass::Device => "device",
            StepClass::Interrupt => "interrupt",
            StepClass::Iommu => "iommu",
            StepClass::Waiting => "waiting",
        }
    }
}

/// One step of a critical path (or several equal ones in a row, `count` of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathStep {
    /// When it started.
    pub start: SimTime,
    /// How long it took (all `count` of them).
    pub duration: SimDuration,
    /// What kind of step.
    pub class: StepClass,
    /// The transfer or cost it is part of, in words: "borrower CPU write 4 B →
    /// lender.nvme0 BAR0 +0x1008 (ring the SQ tail doorbell)"; empty for a step on its own.
    pub part_of: String,
    /// Where and what, in words: "lender.ntb0 (PEX8733)", "borrower CPU: block layer submit".
    pub what: String,
    /// What it waited for, if anything but its own work ("the link (busy with other TLPs)").
    pub waited_for: String,
    /// Equal steps back to back merged into this one (serialized TLPs of one transfer).
    pub count: u32,
}

/// The chain of steps that decided when an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriticalPath {
    /// When the operation started.
    pub start: SimTime,
    /// When it ended.
    pub end: SimTime,
    /// The steps in time order; they tile `start..end` without gaps or overlaps.
    pub steps: Vec<PathStep>,
}

impl CriticalPath {
    /// The sum of the steps' durations: the operation's latency.
    pub fn total(&self) -> SimDuration {
        SimDuration(self.steps.iter().map(|s| s.duration.as_ps()).sum())
    }

    /// The summed duration of the steps of each class, in class order (classes with no
    /// step left out).
    pub fn by_class(&self) -> Vec<(StepClass, SimDuration)> {
        let mut sums: Vec<(StepClass, SimDuration)> = Vec::new();
        for s in &self.steps {
            match sums.iter_mut().find(|(c, _)| *c == s.class) {
                Some((_, d)) => *d += s.duration,
                None => sums.push((s.class, s.duration)),
            }
        }
        sums.sort_by_key(|(c, _)| *c);
        sums
    }
}

/// Which timeline a trace slice belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackKind {
    /// A host: its CPU's software costs and accesses, interrupts delivered to it.
    Host,
    /// A VM running on a host.
    Vm,
    /// A device (or an NTB adapter's function): its own work and the TLPs it issues.
    Device,
    /// One direction of a link: the TLPs occupying it.
    Link,
    /// A workload's operations (fio's commands, ping-pong rounds).
    Workload,
}

/// A timeline of the trace: a kind and a name ("borrower", "lender.nvme0",
/// "borrower.rc → borrower.ntb0").
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceTrack {
    /// What it is.
    pub kind: TrackKind,
    /// Its name.
    pub name: String,
}

/// One slice of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// Where.
    pub track: TraceTrack,
    /// What ("TLP write 256 B", "block layer: submit").
    pub name: String,
    /// A category ([`StepClass::name`], or `workload`).
    pub category: &'static str,
    /// When it started.
    pub start: SimTime,
    /// How long it lasted.
    pub duration: SimDuration,
    /// Further facts (requester, target, bytes).
    pub args: Vec<(&'static str, String)>,
}

/// A run's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trace {
    /// The slices, in the order they were recorded.
    pub events: Vec<TraceEvent>,
    /// Steps not kept because the limit was reached.
    pub dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(start: u64, ps: u64, class: StepClass) -> PathStep {
        PathStep {
            start: SimTime(start),
            duration: SimDuration(ps),
            class,
            part_of: String::new(),
            what: String::new(),
            waited_for: String::new(),
            count: 1,
        }
    }

    #[test]
    fn a_paths_total_is_the_sum_of_its_steps_and_classes_add_up() {
        let path = CriticalPath {
            start: SimTime(0),
            end: SimTime(600),
            steps: vec![
                step(0, 100, StepClass::Software),
                step(100, 200, StepClass::Link),
                step(300, 250, StepClass::Software),
                step(550, 50, StepClass::Chip),
            ],
        };
        assert_eq!(path.total(), SimDuration(600));
        assert_eq!(
            path.by_class(),
            vec![
                (StepClass::Software, SimDuration(350)),
                (StepClass::Link, SimDuration(200)),
                (StepClass::Chip, SimDuration(50)),
            ]
        );
    }
}
