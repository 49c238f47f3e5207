//! Recording where time goes (see `smartio_machine::explain`): every step the engine makes
//! — a task's timer (a software or device cost), a CPU's path to its root port, a TLP's
//! crossing hop by hop, a completer's read, the root complex into memory, an interrupt's
//! delivery — with its start, its end and the step that caused it.
//!
//! Causes are tracked the way the work flows: a task woken by a step (a timer firing, a
//! write landing in a watched word, a doorbell's handler notifying the device's task, an
//! interrupt) acts with that step as its cause, and so does any task it wakes; a TLP after
//! the first of a transfer is caused by whatever let it leave (the previous TLP clearing the
//! requester's link, a tag or credit given back). Every step's end is known when it is made
//! (the engine costs a whole path at once), so a step is complete when recorded.
//!
//! The critical path of an operation walks the causes back from the step that announced its
//! end; each step covers the time from its cause's end to its own end, so the steps tile the
//! operation and their durations sum to its latency exactly. The steps are kept in a ring
//! (the last `RING_STEPS`); a walk that reaches a step no longer kept says so.

use crate::timing::Timing;
use smartio_fabric::{Dir, Fabric, HostId, NodeKind, Requester, Target};
use smartio_machine::{
    CriticalPath, PathStep, StepClass, Trace, TraceEvent, TraceTrack, TrackKind,
};
use smartio_platform::{SimDuration, SimTime};

/// A recorded step's number; [`NONE`] is no step. Numbers count up from 1.
pub(crate) type StepId = u32;

/// No step (not recording, or a cause from before the recording).
pub(crate) const NONE: StepId = 0;

/// Steps kept for critical paths (the most recent ones).
pub(crate) const RING_STEPS: usize = 1 << 18;

/// Timers of one CPU between two looks of a polling loop, at most (a poll interval, and
/// perhaps a named cost or two).
const POLL_LOOP_STEPS: usize = 4;

/// Hops kept for the TLP steps in the ring.
const RING_HOPS: usize = 1 << 20;

/// What a TLP is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlpKind {
    /// A posted write (an MSI is one).
    Write,
    /// A read request.
    ReadRequest,
    /// A completion with data.
    Completion,
}

impl TlpKind {
    fn name(self) -> &'static str {
        match self {
            TlpKind::Write => "write",
            TlpKind::ReadRequest => "read request",
            TlpKind::Completion => "completion",
        }
    }
}

/// What a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A task's timer: a software or device cost, a polling interval, a sleep.
    Sleep { requester: Requester },
    /// A CPU's load or store in its own RAM.
    LocalMemory { host: HostId, write: bool },
    /// A CPU's MMIO access from the core to the root port it leaves by.
    CpuIssue { host: HostId },
    /// A page walk after an IOTLB miss, before a TLP leaves.
    IotlbMiss { host: HostId },
    /// A TLP crossing its path; its hops are `hops..hops + nhops` of the hop ring.
    Tlp {
        tlp: TlpKind,
        requester: Requester,
        payload: u32,
        target: Target,
        hops: u32,
        nhops: u16,
    },
    /// A TLP leaving its requester: waiting for the first link, then serialized onto it
    /// (the next TLP of the transfer may go after it); `hop` is the TLP's first hop.
    Send {
        tlp: TlpKind,
        requester: Requester,
        payload: u32,
        target: Target,
        hop: u32,
    },
    /// A TLP's last leg at its target: the root complex into memory, or to the interrupt
    /// controller (an MSI).
    IntoMemory { host: HostId, interrupt: bool },
    /// A completer reading what a read request asked.
    CompleterRead { target: Target },
    /// A completion from the root complex back to the core.
    ReturnToCore { host: HostId },
    /// An interrupt's delivery to its handler.
    InterruptDelivery { host: HostId, vector: u32 },
}

/// One recorded step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    pub kind: Kind,
    pub start: SimTime,
    pub end: SimTime,
    pub cause: StepId,
    /// What the software said it was doing (`smartio_platform::activity`).
    pub label: Option<&'static str>,
}

/// One hop of a TLP: when its head reached the link, when the link took it, and what the
/// hop cost after that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HopRec {
    /// The link's index.
    pub link: u32,
    /// The direction (0 down, 1 up).
    pub dir: u8,
    /// The head reached the link.
    pub head: u64,
    /// The link started sending it (later than `head` when the link was busy).
    pub begin: u64,
    /// Serialization on this link.
    pub ser: u64,
    /// The link's propagation delay.
    pub prop: u64,
    /// The latency of the node reached (0 for the last hop).
    pub node: u64,
    /// The wait for a slower link's tail before the next link (cut-through rate mismatch).
    pub mismatch: u64,
}

/// A ring of the most recent items, numbered from 1.
#[derive(Debug)]
struct Ring<T> {
    items: Vec<T>,
    capacity: usize,
    /// Number of the next item.
    next: u32,
}

impl<T: Copy> Ring<T> {
    fn new(capacity: usize) -> Ring<T> {
        Ring {
            items: Vec::new(),
            capacity,
            next: 1,
        }
    }

    /// Adds an item; `None` once the numbers are used up.
    fn push(&mut self, item: T) -> Option<u32> {
        let id = self.next;
        self.next = self.next.checked_add(1)?;
        let at = (id as usize - 1) % self.capacity;
        if at < self.items.len() {
            self.items[at] = item;
        } else {
            self.items.push(item);
        }
        Some(id)
    }

    fn get(&self, id: u32) -> Option<&T> {
        if id == 0 || id >= self.next || (self.next - id) as usize > self.capacity {
            return None;
        }
        self.items.get((id as usize - 1) % self.capacity)
    }
}

/// The recording.
#[derive(Debug)]
pub(crate) struct Recorder {
    steps: Ring<Step>,
    hops: Ring<HopRec>,
    /// The first steps of the run, with their hops, while the trace limit allows.
    trace: Option<TraceBuffer>,
    /// Workloads' operations for the trace.
    spans: Vec<(String, String, SimTime, SimTime)>,
}

#[derive(Debug)]
struct TraceBuffer {
    /// Most slices the trace may hold (a TLP is one slice, plus one per link it crossed;
    /// any other step or a workload's operation is one).
    limit: usize,
    /// Slices the kept steps and operations make.
    slices: usize,
    steps: Vec<Step>,
    hops: Vec<HopRec>,
    dropped: u64,
}

impl Recorder {
    pub fn new(trace_limit: Option<usize>) -> Recorder {
        Recorder {
            steps: Ring::new(RING_STEPS),
            hops: Ring::new(RING_HOPS),
            trace: trace_limit.map(|limit| TraceBuffer {
                limit,
                slices: 0,
                steps: Vec::new(),
                hops: Vec::new(),
                dropped: 0,
            }),
            spans: Vec::new(),
        }
    }

    /// Records a step (a TLP's hops come with it); returns its number.
    pub fn step(&mut self, mut step: Step, hops: &[HopRec]) -> StepId {
        if let Kind::Tlp {
            hops: first, nhops, ..
        } = &mut step.kind
        {
            *first = 0;
            *nhops = 0;
            for (i, h) in hops.iter().enumerate() {
                match self.hops.push(*h) {
                    Some(id) if i == 0 => *first = id,
                    Some(_) => {}
                    None => return NONE,
                }
            }
            *nhops = u16::try_from(hops.len()).unwrap_or(u16::MAX);
        }
        if let Some(t) = &mut self.trace {
            // A TLP's slice and one per link; a step of any other kind is one slice.
            let slices = match step.kind {
                Kind::Tlp { .. } => 1 + hops.len(),
                _ => 1,
            };
            // The trace is the run's beginning: once a step is left out, so is every later
            // one.
            if t.dropped == 0 && t.slices + slices <= t.limit {
                t.slices += slices;
                let mut kept = step;
                if let Kind::Tlp { hops: first, .. } = &mut kept.kind {
                    *first = u32::try_from(t.hops.len()).unwrap_or(u32::MAX);
                    t.hops.extend_from_slice(hops);
                }
                t.steps.push(kept);
            } else {
                t.dropped += 1;
            }
        }
        self.steps.push(step).unwrap_or(NONE)
    }

    /// Records that TLP step `tlp` has left its requester's first link at `until`; returns
    /// that step (or `cause` when the TLP is no longer kept).
    pub fn send(&mut self, tlp: StepId, until: SimTime, cause: StepId) -> StepId {
        let Some(s) = self.get(tlp).copied() else {
            return cause;
        };
        let Kind::Tlp {
            tlp: kind,
            requester,
            payload,
            target,
            hops,
            ..
        } = s.kind
        else {
            return cause;
        };
        let step = Step {
            kind: Kind::Send {
                tlp: kind,
                requester,
                payload,
                target,
                hop: hops,
            },
            start: s.start,
            end: until,
            cause,
            label: s.label,
        };
        // Not a slice of its own in the trace: the TLP's link slices show it.
        self.steps.push(step).unwrap_or(NONE)
    }

    /// Whether step `id`, the context of a CPU of `host` about to load from its memory,
    /// is a polling loop's wait: a timer of that CPU, back through its own timers (at most
    /// a few), to its previous look at its memory.
    pub fn polling(&self, host: HostId, id: StepId) -> bool {
        let mut cur = id;
        for _ in 0..POLL_LOOP_STEPS {
            let Some(step) = self.get(cur) else {
                return false;
            };
            match step.kind {
                Kind::Sleep {
                    requester: Requester::Cpu(h),
                } if h == host => cur = step.cause,
                // A look right before is not a loop's wait (a handler reading one entry
                // after another); a look, a timer, a look is.
                Kind::LocalMemory {
                    host: h,
                    write: false,
                } if h == host && cur != id => return true,
                _ => return false,
            }
        }
        false
    }

    /// A workload's operation, for the trace.
    pub fn span(&mut self, track: &str, name: &str, start: SimTime, end: SimTime) {
        let Some(t) = &mut self.trace else {
            return;
        };
        if t.dropped == 0 && t.slices < t.limit {
            t.slices += 1;
            self.spans
                .push((track.to_string(), name.to_string(), start, end));
        } else {
            t.dropped += 1;
        }
    }

    fn get(&self, id: StepId) -> Option<&Step> {
        self.steps.get(id)
    }

    /// When step `id` ended ([`SimTime::ZERO`] for no step or one no longer kept).
    pub fn end_of(&self, id: StepId) -> SimTime {
        self.get(id).map_or(SimTime::ZERO, |s| s.end)
    }

    fn hops_of(&self, step: &Step) -> Vec<HopRec> {
        match step.kind {
            Kind::Tlp { hops, nhops, .. } => (0..u32::from(nhops))
                .filter_map(|i| self.hops.get(hops + i).copied())
                .collect(),
            Kind::Send { hop, .. } => self.hops.get(hop).copied().into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// The critical path of an operation from `start` to `end` whose end `last` announced.
    pub fn critical_path(
        &self,
        names: &Names,
        last: StepId,
        start: SimTime,
        end: SimTime,
    ) -> CriticalPath {
        let mut rows: Vec<PathStep> = Vec::new();
        let mut t = end;
        let mut cur = last;
        // What the step after the current one is (a gap before a poll's load is the
        // polling loop's wait for its next look).
        let mut polled = false;
        while t > start {
            let Some(step) = self.get(cur) else {
                let why = if cur == NONE {
                    "what came before the recording started"
                } else {
                    "earlier steps (no longer kept)"
                };
                rows.push(waiting(start, t, why));
                break;
            };
            if step.end < t {
                let why = if polled {
                    "the polling loop's next look at the word"
                } else {
                    "something not recorded"
                };
                rows.push(waiting(step.end.max(start), t, why));
                t = step.end.max(start);
                if t <= start {
                    break;
                }
            }
            let hops = self.hops_of(step);
            let mut own = names.expand(step, &hops);
            // Clip to the part of the step that is inside the operation and before `t`.
            own.retain_mut(|r| clip(r, start, t));
            rows.extend(own.into_iter().rev());
            t = step.start.max(start);
            cur = step.cause;
            polled = matches!(step.kind, Kind::LocalMemory { write: false, .. });
        }
        rows.reverse();
        CriticalPath {
            start,
            end,
            steps: merge(rows),
        }
    }

    /// The trace recorded so far, taken.
    pub fn take_trace(&mut self, names: &Names) -> Option<Trace> {
        let t = self.trace.as_mut()?;
        let steps = std::mem::take(&mut t.steps);
        let hops = std::mem::take(&mut t.hops);
        let dropped = std::mem::take(&mut t.dropped);
        let mut events = Vec::with_capacity(steps.len());
        for s in &steps {
            let own = match s.kind {
                Kind::Tlp {
                    hops: first, nhops, ..
                } => {
                    let from = first as usize;
                    hops.get(from..from + usize::from(nhops)).unwrap_or(&[])
                }
                _ => &[],
            };
            names.trace_events(s, own, &mut events);
        }
        for (track, name, start, end) in self.spans.drain(..) {
            events.push(TraceEvent {
                track: TraceTrack {
                    kind: TrackKind::Workload,
                    name: track,
                },
                name,
                category: "workload",
                start,
                duration: end.since(start),
                args: Vec::new(),
            });
        }
        Some(Trace { events, dropped })
    }
}

/// A waiting row.
fn waiting(from: SimTime, to: SimTime, why: &str) -> PathStep {
    PathStep {
        start: from,
        duration: to.since(from),
        class: StepClass::Waiting,
        part_of: String::new(),
        what: "waiting".to_string(),
        waited_for: why.to_string(),
        count: 1,
    }
}

/// Cuts a row to `lo..hi`; `false` if nothing of it is left.
fn clip(r: &mut PathStep, lo: SimTime, hi: SimTime) -> bool {
    let s = r.start.max(lo);
    let e = (r.start + r.duration).min(hi);
    if e <= s {
        return false;
    }
    r.start = s;
    r.duration = e.since(s);
    true
}

/// Merges rows that repeat back to back (the TLPs of one transfer serialized one after
/// another), keeping their time order.
fn merge(rows: Vec<PathStep>) -> Vec<PathStep> {
    let mut out: Vec<PathStep> = Vec::with_capacity(rows.len());
    for r in rows {
        if let Some(prev) = out.last_mut() {
            if prev.class == r.class
                && prev.part_of == r.part_of
                && prev.what == r.what
                && prev.waited_for == r.waited_for
                && prev.start + prev.duration == r.start
            {
                prev.duration += r.duration;
                prev.count += r.count;
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// What the rows of a step need from the fabric and the timing: names of hosts, devices,
/// nodes and links, and the CPU's split of its issue cost.
pub(crate) struct Names<'a> {
    pub fabric: &'a Fabric,
    pub timing: &'a Timing,
}

impl Names<'_> {
    fn host(&self, h: HostId) -> String {
        self.fabric
            .hosts()
            .get(h.index())
            .map_or_else(|| format!("host #{}", h.0), |x| x.name.clone())
    }

    fn requester(&self, r: Requester) -> String {
        match r {
            Requester::Cpu(h) => format!("{} CPU", self.host(h)),
            Requester::Device(e) => {
                let ep = self.fabric.endpoint(e);
                format!("{}.{}", self.host(ep.host), ep.name)
            }
        }
    }

    /// A TLP's first row: who sent what to where, and what the sender was doing.
    fn tlp_head(
        &self,
        tlp: TlpKind,
        requester: Requester,
        payload: u32,
        target: &Target,
        label: Option<&'static str>,
    ) -> String {
        format!(
            "{} {} {payload} B → {}{}",
            self.requester(requester),
            tlp.name(),
            self.target(target),
            label.map(|l| format!(" ({l})")).unwrap_or_default()
        )
    }

    fn target(&self, t: &Target) -> String {
        match *t {
            Target::Memory { host, .. } => format!("{} RAM", self.host(host)),
            Target::Bar {
                endpoint,
                bar,
                offset,
            } => {
                let ep = self.fabric.endpoint(endpoint);
                format!("{}.{} BAR{bar} +{offset:#x}", self.host(ep.host), ep.name)
            }
            Target::Interrupt { host, .. } => {
                format!("{} interrupt controller (MSI)", self.host(host))
            }
            Target::Multicast { group, offset } => {
                format!("multicast group {} +{offset:#x}", group.0)
            }
        }
    }

    /// The node a hop reaches.
    fn node_reached(&self, h: &HopRec) -> smartio_fabric::NodeId {
        let link = &self.fabric.links()[h.link as usize];
        if h.dir == Dir::Down as u8 {
            link.b
        } else {
            link.a
        }
    }

    fn link_name(&self, h: &HopRec) -> String {
        let link = &self.fabric.links()[h.link as usize];
        let (from, to) = if h.dir == Dir::Down as u8 {
            (link.a, link.b)
        } else {
            (link.b, link.a)
        };
        format!(
            "{} → {} (gen{} x{}{})",
            self.fabric.node(from).name,
            self.fabric.node(to).name,
            link.spec.gen,
            link.spec.width,
            if link.cabled { ", cable" } else { "" }
        )
    }

    fn node_row(&self, node: smartio_fabric::NodeId) -> (StepClass, String) {
        let n = self.fabric.node(node);
        match &n.kind {
            NodeKind::RootComplex => (
                StepClass::RootComplex,
                format!("{} root complex: forwards between its root ports", n.name),
            ),
            _ => (
                StepClass::Chip,
                format!(
                    "{} ({})",
                    n.name,
                    self.fabric.chip_of(node).unwrap_or("chip")
                ),
            ),
        }
    }

    /// The rows of one step, in time order, tiling `step.start..step.end`.
    fn expand(&self, step: &Step, hops: &[HopRec]) -> Vec<PathStep> {
        let row = |start: SimTime, end: SimTime, class, what: String| {
            part(start, end, class, "", what, "")
        };
        let whole = |class, what: String| vec![row(step.start, step.end, class, what)];
        let label = |default: &str| step.label.unwrap_or(default).to_string();
        match step.kind {
            Kind::Sleep { requester } => {
                let class = match requester {
                    Requester::Cpu(_) => StepClass::Software,
                    Requester::Device(_) => StepClass::Device,
                };
                whole(
                    class,
                    format!("{}: {}", self.requester(requester), label("a timer")),
                )
            }
            Kind::LocalMemory { host, write } => whole(
                StepClass::Cpu,
                format!(
                    "{} CPU: {} its own RAM{}",
                    self.host(host),
                    if write { "store into" } else { "load from" },
                    step.label.map(|l| format!(" ({l})")).unwrap_or_default()
                ),
            ),
            Kind::CpuIssue { host } => self.cpu_issue_rows(step, host),
            Kind::IotlbMiss { host } => whole(
                StepClass::Iommu,
                format!("{} IOMMU: IOTLB miss, page walk", self.host(host)),
            ),
            Kind::Tlp {
                tlp,
                requester,
                payload,
                target,
                ..
            } => {
                let head = self.tlp_head(tlp, requester, payload, &target, step.label);
                self.crossing_rows(step, hops, &head)
            }
            Kind::Send {
                tlp,
                requester,
                payload,
                target,
                ..
            } => {
                let head = self.tlp_head(tlp, requester, payload, &target, step.label);
                self.send_rows(step, hops, &head)
            }
            Kind::IntoMemory { host, interrupt } => whole(
                StepClass::RootComplex,
                format!(
                    "{} root complex: from the root port {}",
                    self.host(host),
                    if interrupt {
                        "to the interrupt controller"
                    } else {
                        "into memory"
                    }
                ),
            ),
            Kind::CompleterRead { target } => whole(
                match target {
                    Target::Bar { .. } => StepClass::Device,
                    _ => StepClass::Memory,
                },
                format!("read of {}", self.target(&target)),
            ),
            Kind::ReturnToCore { host } => whole(
                StepClass::RootComplex,
                format!(
                    "{} root complex: completion back to the core",
                    self.host(host)
                ),
            ),
            Kind::InterruptDelivery { host, vector } => whole(
                StepClass::Interrupt,
                format!(
                    "{} CPU: interrupt delivery to its handler (vector {vector})",
                    self.host(host)
                ),
            ),
        }
    }

    /// The rows of a CPU's MMIO access leaving `host`: the core's part first, then the root
    /// complex's (see `Sim::start`).
    fn cpu_issue_rows(&self, step: &Step, host: HostId) -> Vec<PathStep> {
        let core = self.timing.cpu.mmio_issue;
        let split = (step.start + core).min(step.end);
        let what = step.label.map(|l| format!(" ({l})")).unwrap_or_default();
        let host = self.host(host);
        vec![
            part(
                step.start,
                split,
                StepClass::Cpu,
                "",
                format!("{host} CPU: MMIO access leaves the core{what}"),
                "",
            ),
            part(
                split,
                step.end,
                StepClass::RootComplex,
                "",
                format!("{host} root complex: from the core to a root port"),
                "",
            ),
        ]
    }

    /// The rows of a TLP's crossing (`head` names it): for each hop, any wait for the link,
    /// the link, then the node reached and the tail of a slower link before.
    fn crossing_rows(&self, step: &Step, hops: &[HopRec], head: &str) -> Vec<PathStep> {
        let mut rows = Vec::with_capacity(hops.len() * 3 + 1);
        let mut at = step.start;
        for (i, h) in hops.iter().enumerate() {
            let last = i + 1 == hops.len();
            rows.extend(self.wait_row(h, head, "link"));
            let link_end = if last {
                h.begin + h.ser + h.prop
            } else {
                h.begin + h.prop
            };
            rows.push(part(
                SimTime(h.begin),
                SimTime(link_end),
                StepClass::Link,
                head,
                format!("link {}", self.link_name(h)),
                "",
            ));
            at = SimTime(link_end);
            if !last {
                let (class, what) = self.node_row(self.node_reached(h));
                rows.push(part(at, at + SimDuration(h.node), class, head, what, ""));
                at += SimDuration(h.node);
                if h.mismatch > 0 {
                    rows.push(part(
                        at,
                        at + SimDuration(h.mismatch),
                        StepClass::Link,
                        head,
                        "the tail on the slower link before".to_string(),
                        "",
                    ));
                    at += SimDuration(h.mismatch);
                }
            }
        }
        if hops.is_empty() {
            rows.push(part(
                step.start,
                step.end,
                StepClass::Link,
                head,
                "crossing".to_string(),
                "",
            ));
        } else if at < step.end {
            // Hops no longer kept in the ring: the rest as one row.
            rows.push(part(
                at,
                step.end,
                StepClass::Link,
                head,
                "the rest of its crossing".to_string(),
                "",
            ));
        }
        rows
    }

    /// The row of a TLP (`head` names it) waiting at hop `h` for the link, busy with other
    /// TLPs, if it waited: `what` and the link's name say where.
    fn wait_row(&self, h: &HopRec, head: &str, what: &str) -> Option<PathStep> {
        (h.begin > h.head).then(|| {
            part(
                SimTime(h.head),
                SimTime(h.begin),
                StepClass::Waiting,
                head,
                format!("{what} {}", self.link_name(h)),
                "the link, busy with other TLPs",
            )
        })
    }

    /// The rows of a TLP leaving its requester (`head` names it): any wait for the first
    /// link, then its sending.
    fn send_rows(&self, step: &Step, hops: &[HopRec], head: &str) -> Vec<PathStep> {
        let mut rows = Vec::with_capacity(2);
        let mut at = step.start;
        let Some(h) = hops.first() else {
            rows.push(part(
                at,
                step.end,
                StepClass::Link,
                head,
                "sent".to_string(),
                "",
            ));
            return rows;
        };
        if let Some(wait) = self.wait_row(h, head, "sent on link") {
            rows.push(wait);
            at = SimTime(h.begin);
        }
        rows.push(part(
            at,
            step.end,
            StepClass::Link,
            head,
            format!("sent on link {}", self.link_name(h)),
            "",
        ));
        rows
    }

    /// The trace slices of one step.
    fn trace_events(&self, step: &Step, hops: &[HopRec], out: &mut Vec<TraceEvent>) {
        let track = |kind, name: String| TraceTrack { kind, name };
        let requester_track = |r: Requester| match r {
            Requester::Cpu(h) => track(TrackKind::Host, self.host(h)),
            Requester::Device(_) => track(TrackKind::Device, self.requester(r)),
        };
        let event =
            |track, name: String, category, start: SimTime, end: SimTime, args| TraceEvent {
                track,
                name,
                category,
                start,
                duration: end.since(start),
                args,
            };
        let rows = self.expand(step, hops);
        let what = rows.first().map(|r| r.what.clone()).unwrap_or_default();
        match step.kind {
            Kind::Tlp {
                tlp,
                requester,
                payload,
                target,
                ..
            } => {
                let name = format!("TLP {} {payload} B", tlp.name());
                let args = vec![
                    ("requester", self.requester(requester)),
                    ("target", self.target(&target)),
                    ("bytes", payload.to_string()),
                ];
                out.push(event(
                    requester_track(requester),
                    name.clone(),
                    "tlp",
                    step.start,
                    step.end,
                    args.clone(),
                ));
                for h in hops {
                    out.push(event(
                        track(TrackKind::Link, self.link_name(h)),
                        name.clone(),
                        StepClass::Link.name(),
                        SimTime(h.begin),
                        SimTime(h.begin + h.ser),
                        args.clone(),
                    ));
                }
            }
            Kind::Sleep { requester } => out.push(event(
                requester_track(requester),
                step.label.unwrap_or("a timer").to_string(),
                match requester {
                    Requester::Cpu(_) => StepClass::Software.name(),
                    Requester::Device(_) => StepClass::Device.name(),
                },
                step.start,
                step.end,
                Vec::new(),
            )),
            Kind::Send { .. } => {}
            Kind::LocalMemory { host, .. }
            | Kind::CpuIssue { host }
            | Kind::IntoMemory { host, .. }
            | Kind::ReturnToCore { host }
            | Kind::IotlbMiss { host } => out.push(event(
                track(TrackKind::Host, self.host(host)),
                what,
                rows.first().map_or("cpu", |r| r.class.name()),
                step.start,
                step.end,
                Vec::new(),
            )),
            Kind::InterruptDelivery { host, vector } => out.push(event(
                track(TrackKind::Host, self.host(host)),
                format!("interrupt (vector {vector})"),
                StepClass::Interrupt.name(),
                step.start,
                step.end,
                vec![("vector", vector.to_string())],
            )),
            Kind::CompleterRead { target } => {
                let t = match target {
                    Target::Bar { endpoint, .. } => track(
                        TrackKind::Device,
                        self.requester(Requester::Device(endpoint)),
                    ),
                    Target::Memory { host, .. } | Target::Interrupt { host, .. } => {
                        track(TrackKind::Host, self.host(host))
                    }
                    Target::Multicast { .. } => track(TrackKind::Host, "multicast".to_string()),
                };
                out.push(event(t, what, "memory", step.start, step.end, Vec::new()));
            }
        }
    }
}

/// A row from `start` to `end`: `what`, of the TLP `part_of` names (empty for a step of its
/// own), waiting for `waited` (empty unless it waits).
fn part(
    start: SimTime,
    end: SimTime,
    class: StepClass,
    part_of: &str,
    what: String,
    waited: &str,
) -> PathStep {
    PathStep {
        start,
        duration: end.since(start),
        class,
        part_of: part_of.to_string(),
        what,
        waited_for: waited.to_string(),
        count: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_the_latest_items_and_forgets_older_ones() {
        let mut r: Ring<u32> = Ring::new(3);
        let ids: Vec<u32> = (10..15).map(|v| r.push(v).unwrap_or(0)).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        assert_eq!(r.get(1), None, "overwritten");
        assert_eq!(r.get(2), None);
        assert_eq!(r.get(3), Some(&12));
        assert_eq!(r.get(5), Some(&14));
        assert_eq!(r.get(6), None, "not yet");
        assert_eq!(r.get(0), None, "no step");
    }

    fn row(start: u64, ps: u64, what: &str) -> PathStep {
        PathStep {
            start: SimTime(start),
            duration: SimDuration(ps),
            class: StepClass::Link,
            part_of: String::new(),
            what: what.to_string(),
            waited_for: String::new(),
            count: 1,
        }
    }

    #[test]
    fn repeated_rows_back_to_back_merge_and_others_stay() {
        let rows = vec![
            row(0, 10, "a"),
            row(10, 10, "a"),
            row(20, 5, "b"),
            row(30, 10, "b"),
        ];
        let merged = merge(rows);
        assert_eq!(merged.len(), 3, "the gap before the last keeps it apart");
        assert_eq!((merged[0].duration, merged[0].count), (SimDuration(20), 2));
    }

    #[test]
    fn clipping_keeps_only_the_part_inside() {
        let mut r = row(10, 100, "x");
        assert!(clip(&mut r, SimTime(50), SimTime(80)));
        assert_eq!((r.start, r.duration), (SimTime(50), SimDuration(30)));
        let mut r = row(10, 10, "x");
        assert!(!clip(&mut r, SimTime(50), SimTime(80)));
    }
}
