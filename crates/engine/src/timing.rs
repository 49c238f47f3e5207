//! The timing model: what one TLP costs on each link and chip of its path.
//!
//! For each hop the TLP waits for the link direction to be free (occupancy, which is where
//! contention comes from), occupies it for its serialization time, and its head reaches the
//! next chip after the link's propagation delay plus the chip's cut-through latency:
//!
//! ```text
//! start     = the earliest time >= head at which the link direction is free for
//!             wire_bytes * time_per_byte (and not before the same requester's previous TLP
//!             on this link has left: PCIe keeps one requester's TLPs in order)
//! head'     = start + propagation + chip_latency (+ any rate mismatch to the next link)
//! arrival   = start_last + serialization_last + propagation_last
//! ```
//!
//! A whole path is costed when the TLP is issued, so a link is booked in the order TLPs are
//! *issued*, not the order they *reach* it: a TLP issued earlier on a long path may hold a
//! link later than one issued afterwards on a short path. Each link direction therefore keeps
//! the intervals booked on it (`Timeline`), and a TLP takes the first gap that fits from its
//! arrival — as the port's arbiter would send it — instead of queueing behind every earlier
//! booking (which once made a 64-byte read wait 840 ns on an idle link).
//!
//! `time_per_byte` comes from the generation's signalling rate, encoding, width and a DLLP
//! overhead fraction; wire bytes are payload plus per-TLP overhead (framing, header, CRC).

use crate::calibration::Calibration;
use crate::record::HopRec;
use smartio_fabric::{Fabric, Hop, NodeKind};
use smartio_platform::{SimDuration, SimTime, Stream};
use thiserror::Error;

/// A scenario names something the calibration does not cover.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimingError {
    /// A chip model without an entry in `[chips]`.
    #[error("{node}: chip model {chip:?} has no [chips.{chip}] entry in the calibration (known: {known})")]
    UnknownChip {
        /// The node using it.
        node: String,
        /// The chip model.
        chip: String,
        /// Calibrated chip models.
        known: String,
    },
}

/// Transaction-layer sizes in force (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlpSizes {
    /// Maximum payload size of a write or completion TLP.
    pub mps: u64,
    /// Maximum read request size.
    pub mrrs: u64,
    /// Read completion boundary.
    pub rcb: u64,
    /// Largest completion a completer returns.
    pub completion_max: u64,
    /// Size a root complex cuts a read request into when it forwards it to another port
    /// (0: unchanged).
    pub forwarded_read_request: u64,
}

/// Cost parameters of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkTiming {
    /// Femtoseconds per wire byte, DLLP overhead included.
    pub fs_per_byte: u64,
    /// Per-TLP overhead bytes on this link.
    pub overhead: u32,
    /// Propagation delay.
    pub prop_ps: u64,
}

impl LinkTiming {
    /// Serialization time of a TLP with `payload` bytes.
    pub fn serialization_ps(&self, payload: u64) -> u64 {
        ((payload + self.overhead as u64) * self.fs_per_byte + 500) / 1000
    }

    /// Whether a TLP takes as long to serialize on `other` as on this link (same rate and
    /// per-TLP overhead; the propagation delay may differ, say a cable after a board link).
    pub fn same_rate(&self, other: &LinkTiming) -> bool {
        self.fs_per_byte == other.fs_per_byte && self.overhead == other.overhead
    }

    /// Effective payload bandwidth in bytes per second for TLPs of `payload` bytes.
    pub fn payload_bandwidth(&self, payload: u64) -> f64 {
        payload as f64 / (self.serialization_ps(payload) as f64 * 1e-12)
    }
}

/// All resolved timing of a fabric.
#[derive(Debug, Clone)]
pub struct Timing {
    /// Per link.
    pub links: Vec<LinkTiming>,
    /// Per node: latency a TLP spends crossing it (chips, root complex as a forwarder),
    /// typical.
    pub node_latency_ps: Vec<u64>,
    /// Per node: how far one TLP's latency may lie from the typical, either way (the chip's
    /// worst case minus its typical latency; 0 for the root complex and devices).
    pub node_jitter_ps: Vec<u64>,
    /// TLP sizes.
    pub sizes: TlpSizes,
    /// Root complex latency.
    pub root_complex_ps: u64,
    /// DRAM read latency behind the root complex.
    pub memory_read_ps: u64,
    /// Per endpoint: register/memory read latency inside the device.
    pub endpoint_read_ps: Vec<u64>,
    /// Per endpoint: non-posted requests it may keep open.
    pub endpoint_tags: Vec<u32>,
    /// Non-posted requests a host's CPUs may keep open.
    pub cpu_tags: Vec<u32>,
    /// Read requests a root complex keeps open on behalf of the requests it forwards to
    /// another port (one pool per root complex, shared by every requester).
    pub forwarded_reads: u32,
    /// Translations each host IOMMU's IOTLB caches.
    pub iotlb_entries: usize,
    /// A page walk after an IOTLB miss (ps).
    pub iotlb_miss_ps: u64,
    /// IOMMU unmaps per IOTLB flush (1: strict).
    pub iotlb_flush_batch: u64,
    /// CPU costs.
    pub cpu: CpuTiming,
    /// Posted TLPs one write stream may have on their way (flow-control backpressure).
    pub posted_credits: usize,
}

/// CPU and software costs (defined with the calibration they come from).
pub use smartio_calibration::CpuTiming;

fn ns(p: &crate::calibration::Param) -> u64 {
    SimDuration::from_ns_f64(p.value).as_ps()
}

impl Timing {
    /// Resolves every link and chip of `fabric` against `cal`.
    pub fn resolve(fabric: &Fabric, cal: &Calibration) -> Result<Timing, TimingError> {
        let links = fabric
            .links()
            .iter()
            .map(|l| {
                let (gt, enc) = cal.lane_rate(l.spec.gen);
                let bytes_per_s = gt * 1e9 * enc * l.spec.width as f64 / 8.0;
                let fs = 1e15 / bytes_per_s * (1.0 + cal.pcie.dllp_overhead_fraction.value);
                LinkTiming {
                    fs_per_byte: fs.round() as u64,
                    overhead: cal.tlp_overhead(l.spec.gen),
                    // NTB cables, and tree links over an external cable.
                    prop_ps: if l.cabled {
                        ns(&cal.pcie.cable_propagation_ns)
                    } else {
                        ns(&cal.pcie.link_propagation_ns)
                    },
                }
            })
            .collect();
        let root_complex_ps = ns(&cal.root_complex.latency_ns);
        let peer_forward_ps = ns(&cal.root_complex.peer_forward_ns);
        let mut node_latency_ps = Vec::with_capacity(fabric.nodes().len());
        let mut node_jitter_ps = Vec::with_capacity(fabric.nodes().len());
        for (i, n) in fabric.nodes().iter().enumerate() {
            let (lat, jitter) = match &n.kind {
                // In the middle of a path a root complex forwards between its ports.
                NodeKind::RootComplex => (peer_forward_ps, 0),
                NodeKind::Device { .. } => (0, 0),
                _ => {
                    let chip = fabric
                        .chip_of(smartio_fabric::NodeId(i as u32))
                        .unwrap_or_default();
                    let params = cal
                        .chips
                        .get(chip)
                        .ok_or_else(|| TimingError::UnknownChip {
                            node: n.name.clone(),
                            chip: chip.to_string(),
                            known: cal.chips.keys().cloned().collect::<Vec<_>>().join(", "),
                        })?;
                    let typical = ns(&params.latency_ns);
                    // A TLP's latency lies within the spread either side of the typical,
                    // never past the chip's worst case (validation keeps that at or above
                    // the typical) nor below zero.
                    let jitter = ns(&cal.pcie.chip_latency_spread_ns)
                        .min(ns(&params.latency_max_ns).saturating_sub(typical))
                        .min(typical);
                    (typical, jitter)
                }
            };
            node_latency_ps.push(lat);
            node_jitter_ps.push(jitter);
        }
        let endpoint_read_ps = fabric
            .endpoints()
            .iter()
            .map(|e| ns(&cal.device(&e.kind).mmio_read_ns))
            .collect();
        let endpoint_tags = fabric
            .endpoints()
            .iter()
            .map(|e| cal.device(&e.kind).max_outstanding_reads.value.max(1.0) as u32)
            .collect();
        let cpu_tags = fabric
            .hosts()
            .iter()
            .map(|h| (cal.cpu.max_outstanding_reads.value.max(1.0) as u32) * h.cores)
            .collect();
        Ok(Timing {
            links,
            node_latency_ps,
            node_jitter_ps,
            sizes: TlpSizes {
                mps: cal.pcie.max_payload_size.value as u64,
                mrrs: cal.pcie.max_read_request_size.value as u64,
                rcb: cal.pcie.read_completion_boundary.value as u64,
                completion_max: cal.pcie.completion_max_payload.value as u64,
                forwarded_read_request: cal.root_complex.forwarded_read_request_bytes.value as u64,
            },
            root_complex_ps,
            memory_read_ps: ns(&cal.root_complex.memory_read_ns),
            endpoint_read_ps,
            endpoint_tags,
            cpu_tags,
            forwarded_reads: cal.root_complex.forwarded_reads_outstanding.value.max(1.0) as u32,
            // In range: validation admits whole numbers 0..=65536.
            iotlb_entries: cal.root_complex.iotlb_entries.value as usize,
            iotlb_miss_ps: ns(&cal.root_complex.iotlb_miss_ns),
            // In range: validation admits whole numbers 1..=65536.
            iotlb_flush_batch: cal.root_complex.iotlb_flush_batch.value as u64,
            posted_credits: cal.pcie.posted_credits_tlps.value.max(1.0) as usize,
            cpu: cal.cpu_timing(),
        })
    }

    /// The costed form of a fabric path.
    pub fn costed(&self, hops: &[Hop]) -> Vec<HopCost> {
        let mut path: Vec<HopCost> = hops
            .iter()
            .enumerate()
            .map(|(i, h)| HopCost {
                link: h.link.0,
                dir: h.dir as u8,
                lane: lane(h.link.0, h.dir as u8) as u32,
                timing: self.links[h.link.index()],
                // The last node is the target; its cost is the transaction's business.
                node_latency_ps: if i + 1 == hops.len() {
                    0
                } else {
                    self.node_latency_ps[h.node.index()]
                },
                node_jitter_ps: if i + 1 == hops.len() {
                    0
                } else {
                    self.node_jitter_ps[h.node.index()]
                },
                same_rate_next: false,
            })
            .collect();
        for i in 1..path.len() {
            path[i - 1].same_rate_next = path[i - 1].timing.same_rate(&path[i].timing);
        }
        path
    }
}

/// One hop of a costed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopCost {
    /// Link index.
    pub link: u32,
    /// Direction index (0 down, 1 up).
    pub dir: u8,
    /// Where that direction is in the engine's list of `Lane`s (`lane``(link, dir)`).
    pub lane: u32,
    /// The link's timing.
    pub timing: LinkTiming,
    /// Typical latency of the node reached (0 for the final node).
    pub node_latency_ps: u64,
    /// How far one TLP's latency at that node may lie from the typical, either way.
    pub node_jitter_ps: u64,
    /// Whether the next hop's link has the same rate and overhead (a TLP's serialization
    /// there is the same, and there is no rate mismatch); false for the last hop.
    pub same_rate_next: bool,
}

impl HopCost {
    /// This hop as the recording keeps it: the head reached the link at `head`, the link
    /// sent the TLP from `begin` for `ser`, then `node` at the node reached and `mismatch`
    /// for a slower link's tail.
    fn record(&self, head: u64, begin: u64, ser: u64, node: u64, mismatch: u64) -> HopRec {
        HopRec {
            link: self.link,
            dir: self.dir,
            head,
            begin,
            ser,
            prop: self.timing.prop_ps,
            node,
            mismatch,
        }
    }
}

/// Per-link, per-direction occupancy and statistics (a snapshot of a link's two `Lane`s).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkState {
    /// The end of the latest interval booked in each direction.
    pub busy_until: [u64; 2],
    /// TLPs sent per direction.
    pub tlps: [u64; 2],
    /// Wire bytes per direction.
    pub wire_bytes: [u64; 2],
    /// Payload bytes per direction.
    pub payload_bytes: [u64; 2],
    /// Time busy per direction (ps).
    pub busy_ps: [u64; 2],
}

impl LinkState {
    /// The statistics of each link, from its lanes (see [`lane`]) and timings (a TLP's wire
    /// bytes are its payload plus the link's per-TLP overhead).
    pub(crate) fn of_lanes(lanes: &[Lane], links: &[LinkTiming]) -> Vec<LinkState> {
        lanes
            .chunks(2)
            .zip(links)
            .map(|(pair, timing)| {
                let both = |f: &dyn Fn(&Lane) -> u64| [f(&pair[0]), pair.get(1).map_or(0, f)];
                LinkState {
                    busy_until: both(&|l| l.busy_until()),
                    tlps: both(&|l| l.tlps),
                    wire_bytes: both(&|l| l.payload_bytes + l.tlps * timing.overhead as u64),
                    payload_bytes: both(&|l| l.payload_bytes),
                    busy_ps: both(&|l| l.busy_ps),
                }
            })
            .collect()
    }
}

/// One direction of a link: its occupancy and statistics. A fabric's lanes are in one
/// list, link `l`'s direction `d` at [`lane`]`(l, d)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lane {
    /// The intervals booked that have not ended yet.
    booked: Timeline,
    /// TLPs sent.
    pub tlps: u64,
    /// Payload bytes (wire bytes add the link's per-TLP overhead to each TLP).
    pub payload_bytes: u64,
    /// Time busy (ps).
    pub busy_ps: u64,
}

impl Lane {
    /// Books `ser` picoseconds for `who`'s TLP of `payload` bytes whose head arrives at
    /// `head` (see [`Timeline::book`]) and counts it; returns when it starts.
    #[inline(always)]
    fn send(&mut self, who: Booking, head: u64, ser: u64, payload: u64) -> u64 {
        let begin = self.booked.book(who, head, ser);
        self.tlps += 1;
        self.payload_bytes += payload;
        self.busy_ps += ser;
        begin
    }

    /// The end of the latest interval booked.
    pub fn busy_until(&self) -> u64 {
        self.booked.end
    }

    /// Makes the bookings from now on provisional: each is appended (none dropped, none
    /// put in a gap: one that would be spoils them), so that [`Lane::restore`] with the
    /// mark returned takes them all back, statistics included.
    pub(crate) fn hold(&mut self) -> LaneMark {
        let t = &mut self.booked;
        let mark = LaneMark {
            slots: t.slots.len(),
            periodic: t.periodic.len(),
            end: t.end,
            last_flow: t.last_flow,
            compact_at: t.compact_at,
            tlps: self.tlps,
            payload_bytes: self.payload_bytes,
            busy_ps: self.busy_ps,
        };
        t.compact_at = usize::MAX;
        t.held = true;
        t.spoiled = false;
        mark
    }

    /// Whether a provisional booking would have gone in a gap (see [`Lane::hold`]).
    pub(crate) fn spoiled(&self) -> bool {
        self.booked.spoiled
    }

    /// Keeps the provisional bookings made since `mark` as they are.
    pub(crate) fn release(&mut self, mark: &LaneMark) {
        self.booked.compact_at = mark.compact_at;
        self.booked.held = false;
    }

    /// Takes back the provisional bookings made since `mark`: the lane is as it was then.
    pub(crate) fn restore(&mut self, mark: &LaneMark) {
        let t = &mut self.booked;
        t.slots.truncate(mark.slots);
        t.periodic.truncate(mark.periodic);
        t.end = mark.end;
        t.last_flow = mark.last_flow;
        t.compact_at = mark.compact_at;
        t.held = false;
        t.spoiled = false;
        self.tlps = mark.tlps;
        self.payload_bytes = mark.payload_bytes;
        self.busy_ps = mark.busy_ps;
    }
}

/// A lane as it was before provisional bookings ([`Lane::hold`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaneMark {
    slots: usize,
    periodic: usize,
    end: u64,
    last_flow: Flow,
    compact_at: usize,
    tlps: u64,
    payload_bytes: u64,
    busy_ps: u64,
}

/// Where direction `dir` (0 down, 1 up) of link `link` is in a list of [`Lane`]s.
#[inline(always)]
pub(crate) fn lane(link: u32, dir: u8) -> usize {
    ((link as usize) << 1) | (dir as usize & 1)
}

/// Which TLPs must stay in order on a link: those of one requester (a CPU, a device). TLPs
/// of different requesters may pass each other (PCIe ID-based ordering).
pub type Flow = u32;

/// Who is booking, and when the booking is made (no interval ends before `now` matters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Booking {
    /// The current time, in picoseconds.
    pub now: u64,
    /// The requester whose order is kept.
    pub flow: Flow,
}

/// Where a TLP's crossing ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    /// When its last byte is received at the final node.
    pub arrival: SimTime,
    /// When its last byte has left the first link (the requester may send the next TLP).
    pub first_link_done: SimTime,
}

/// Sends one TLP of `payload` bytes along `path` starting at `start`; each chip's latency is
/// the one drawn for it in `chips` when given ([`draw_chips`]; the typical latency otherwise). A TLP drawn faster than
/// the one before it in its flow still leaves each link after it (the timeline keeps a
/// flow's order), so variation never reorders one requester's TLPs.
///
/// With `record`, each hop's timing is appended to it (for the engine's recording).
#[inline(always)]
pub(crate) fn traverse(
    links: &mut [Lane],
    path: &[HopCost],
    start: SimTime,
    payload: u64,
    who: Booking,
    chips: Option<&[u64]>,
    record: Option<&mut Vec<HopRec>>,
) -> Crossing {
    let Some(h) = path.first() else {
        return Crossing {
            arrival: start,
            first_link_done: start,
        };
    };
    let ser = h.timing.serialization_ps(payload);
    let head = start.as_ps();
    // One loop per combination, each without the checks the others need.
    let (arrival, first_begin) = match (chips, record) {
        (Some(chips), None) => {
            let drawn = &mut Drawn(chips.iter());
            run_hops(links, path, 0, head, ser, payload, who, drawn, &mut ())
        }
        (None, None) => run_hops(links, path, 0, head, ser, payload, who, &mut (), &mut ()),
        (Some(chips), Some(r)) => run_hops(
            links,
            path,
            0,
            head,
            ser,
            payload,
            who,
            &mut Drawn(chips.iter()),
            r,
        ),
        (None, Some(r)) => run_hops(links, path, 0, head, ser, payload, who, &mut (), r),
    };
    Crossing {
        arrival: SimTime(arrival),
        first_link_done: SimTime(first_begin + ser),
    }
}

/// [`traverse`] for a TLP whose serialization on the path's first link, `ser`, the caller
/// has (a train's TLPs are of one size but for the first and last), chip latencies as drawn
/// in `chips`, not recorded. Written apart from `traverse` rather than under it: with
/// `traverse` calling it, the other crossings compiled ~160 instructions per share-30 I/O
/// slower.
#[inline(always)]
pub(crate) fn traverse_serialized(
    links: &mut [Lane],
    path: &[HopCost],
    start: SimTime,
    payload: u64,
    ser: u64,
    who: Booking,
    chips: &[u64],
) -> Crossing {
    let drawn = &mut Drawn(chips.iter());
    cross_path(links, path, start, payload, ser, who, drawn, &mut ())
}

/// Crosses all of `path` from `start` with serialization `ser` on its first link (`start`
/// itself for an empty path), chip latencies from `chips`, each hop kept in `log`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn cross_path(
    links: &mut [Lane],
    path: &[HopCost],
    start: SimTime,
    payload: u64,
    ser: u64,
    who: Booking,
    chips: &mut impl ChipDraw,
    log: &mut impl HopLog,
) -> Crossing {
    if path.is_empty() {
        return Crossing {
            arrival: start,
            first_link_done: start,
        };
    }
    let head = start.as_ps();
    let (arrival, first_begin) = run_hops(links, path, 0, head, ser, payload, who, chips, log);
    Crossing {
        arrival: SimTime(arrival),
        first_link_done: SimTime(first_begin + ser),
    }
}

/// The serialization of a TLP of `payload` bytes on `path`'s first link (0 for an empty
/// path, which it crosses at once).
#[inline(always)]
pub(crate) fn first_serialization(path: &[HopCost], payload: u64) -> u64 {
    path.first()
        .map_or(0, |h| h.timing.serialization_ps(payload))
}

/// One hop of a train's first TLP, as its followers repeat it ([`TrainRun`]): when its head
/// reached the link, when the link started sending it, and its serialization there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HopShape {
    head: u64,
    begin: u64,
    ser: u64,
}

impl HopLog for Vec<HopShape> {
    #[inline(always)]
    fn hop(&mut self, _: u64, rec: impl FnOnce() -> HopRec) {
        let r = rec();
        self.push(HopShape {
            head: r.head,
            begin: r.begin,
            ser: r.ser,
        });
    }
}

/// [`traverse_serialized`] keeping each hop's shape in `shape` (for a [`TrainRun`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn traverse_shaped(
    links: &mut [Lane],
    path: &[HopCost],
    start: SimTime,
    payload: u64,
    ser: u64,
    who: Booking,
    chips: &[u64],
    shape: &mut Vec<HopShape>,
) -> Crossing {
    shape.clear();
    let drawn = &mut Drawn(chips.iter());
    cross_path(links, path, start, payload, ser, who, drawn, shape)
}

/// TLPs of one size that follow a train's TLP (its first) along its path, each leaving its
/// first link as the one before has left it, their chips' latencies the same (one
/// transaction's): each crosses every link exactly one period after the one before, so
/// they are costed in closed form and their links booked at once ([`TrainRun::book`]).
///
/// A link's period is the largest serialization up to it (the first link's is the time
/// between two leavings): a TLP that reaches a link no sooner than one period after the one
/// before leaves it one period after it, back to back when the link is the slowest so far.
/// That holds when, on every link, the first was booked last (nothing of another flow after
/// it: nothing else is booked while a train leaves) and either did not wait or waits on a
/// link it fills (period equal to its serialization there, so each follower waits as long).
/// The step loop books each follower to the same intervals, one TLP at a time.
#[derive(Debug)]
pub(crate) struct TrainRun {
    /// The followers' payload, the first's.
    pub len: u64,
    /// The first link's serialization: between two leavings.
    first_ser: u64,
    /// When the first's last byte reached the final node.
    arrival: u64,
    /// The period on the last link.
    last_period: u64,
    /// Followers so far.
    followers: u64,
    /// When the next follower leaves: as the one before has left the first link.
    next_leaving: SimTime,
}

impl TrainRun {
    /// A run after the TLP of `len` bytes that has just crossed `path` as `shape` and
    /// `crossing` tell, if its followers may be costed in closed form.
    #[inline]
    pub(crate) fn after(
        links: &[Lane],
        path: &[HopCost],
        shape: &[HopShape],
        len: u64,
        crossing: Crossing,
    ) -> Option<TrainRun> {
        let first_ser = shape.first()?.ser;
        let mut period = first_ser;
        for (hop, s) in path.iter().zip(shape) {
            period = period.max(s.ser);
            let t = &links[hop.lane as usize].booked;
            // Booked last: the link's last interval ends where its does (a TLP put in a gap
            // ends before the next interval begins).
            let last = t.end == s.begin + s.ser;
            if !last || (s.begin != s.head && period != s.ser) {
                return None;
            }
        }
        Some(TrainRun {
            len,
            first_ser,
            arrival: crossing.arrival.as_ps(),
            last_period: period,
            followers: 0,
            next_leaving: crossing.first_link_done,
        })
    }

    /// The next follower, leaving `now` (as the one before has left the first link): when
    /// its last byte reaches the final node, and when it has left the first link.
    #[cfg(test)]
    pub(crate) fn follow(&mut self, now: SimTime) -> Crossing {
        let (arrival, first_link_done) = self.follow_batch(now, 1);
        Crossing {
            arrival,
            first_link_done,
        }
    }

    /// The next `k` followers, leaving one after another from `now` (as the one before has
    /// left the first link), each [`TrainRun::leave_ps`] after the one before: when the
    /// first's last byte reaches the final node (each next one's [`TrainRun::land_ps`]
    /// later), and when the last has left the first link.
    #[inline(always)]
    pub(crate) fn follow_batch(&mut self, now: SimTime, k: u64) -> (SimTime, SimTime) {
        debug_assert_eq!(
            now, self.next_leaving,
            "a follower leaves right after the one before"
        );
        let arrival = SimTime(self.arrival + (self.followers + 1) * self.last_period);
        self.followers += k;
        self.next_leaving = now + SimDuration(k * self.first_ser);
        (arrival, self.next_leaving)
    }

    /// The time from one follower's leaving to the next one's: the first link's
    /// serialization.
    #[inline(always)]
    pub(crate) fn leave_ps(&self) -> u64 {
        self.first_ser
    }

    /// The time from one follower's arrival to the next one's: the last link's period.
    #[inline(always)]
    pub(crate) fn land_ps(&self) -> u64 {
        self.last_period
    }

    /// How many followers, the next leaving at `now` and each a first-link serialization
    /// after the one before, leave before the first event `queued` (the next one counted
    /// whatever: it is leaving now).
    #[inline(always)]
    pub(crate) fn leavings_before(&self, now: SimTime, queued: Option<SimTime>) -> u64 {
        match queued {
            None => u64::MAX,
            Some(q) if q.as_ps() > now.as_ps() => match self.first_ser {
                0 => u64::MAX,
                ser => 1 + (q.as_ps() - now.as_ps() - 1) / ser,
            },
            Some(_) => 1,
        }
    }

    /// Books the followers on every link of `path` for `flow` (booked as of `now`), after
    /// the first (`shape`), and counts them in each link's statistics: one interval grown on
    /// a link they fill, one interval each where they leave gaps.
    pub(crate) fn book(
        &self,
        links: &mut [Lane],
        path: &[HopCost],
        shape: &[HopShape],
        flow: Flow,
        now: u64,
    ) {
        let n = self.followers;
        if n == 0 {
            return;
        }
        let mut period = self.first_ser;
        for (hop, s) in path.iter().zip(shape) {
            period = period.max(s.ser);
            let lane = &mut links[hop.lane as usize];
            lane.booked.book_followers(s, period, n, flow, now);
            lane.tlps += n;
            lane.payload_bytes += n * self.len;
            lane.busy_ps += n * s.ser;
        }
    }
}

/// Sends one TLP along several paths that share prefixes (a multicast write replicated by
/// the switches): a shared link carries the TLP once, and each path continues from the time
/// the head reached the point where it branches off. Returns each path's arrival time.
pub(crate) fn traverse_tree(
    links: &mut [Lane],
    paths: &[&[HopCost]],
    start: SimTime,
    payload: u64,
    who: Booking,
) -> Vec<SimTime> {
    let mut begins: Vec<Vec<u64>> = Vec::with_capacity(paths.len());
    let mut out: Vec<SimTime> = Vec::with_capacity(paths.len());
    for (i, path) in paths.iter().enumerate() {
        let mut shared = (0, 0);
        for (j, earlier) in paths[..i].iter().enumerate() {
            let k = path
                .iter()
                .zip(earlier.iter())
                .take_while(|(a, b)| a.link == b.link && a.dir == b.dir)
                .count();
            if k > shared.0 {
                shared = (k, j);
            }
        }
        let (k, j) = shared;
        if path.is_empty() || k == path.len() {
            // Nothing new to cross: it arrives with the earlier copy.
            out.push(if path.is_empty() { start } else { out[j] });
            begins.push(if path.is_empty() {
                Vec::new()
            } else {
                begins[j].clone()
            });
            continue;
        }
        let mut b = Begins(Vec::with_capacity(path.len()));
        let ser = path[k].timing.serialization_ps(payload);
        let head = if k == 0 {
            start.as_ps()
        } else {
            b.0.extend_from_slice(&begins[j][..k]);
            let prev = &path[k - 1];
            let prev_ser = prev.timing.serialization_ps(payload);
            begins[j][k - 1]
                + prev.timing.prop_ps
                + prev.node_latency_ps
                + prev_ser.saturating_sub(ser)
        };
        // The copies of a multicast write cross their chips at the typical latency (the
        // branches re-derive the shared prefix's timing from it).
        let (end, _) = run_hops(links, path, k, head, ser, payload, who, &mut (), &mut b);
        out.push(SimTime(end));
        begins.push(b.0);
    }
    out
}

/// Where a node's latency for one TLP comes from: the latencies drawn for the chips of its
/// path ([`Drawn`]), or `()` for the typical latency.
trait ChipDraw: Clone {
    /// The latency of the node `hop` reaches.
    fn latency(&mut self, hop: &HopCost) -> u64;
}

impl ChipDraw for () {
    #[inline(always)]
    fn latency(&mut self, hop: &HopCost) -> u64 {
        hop.node_latency_ps
    }
}

impl ChipDraw for Stream {
    /// Drawn as it is reached: what [`draw_chips`] draws for the path, one by one.
    #[inline(always)]
    fn latency(&mut self, hop: &HopCost) -> u64 {
        chip_latency(hop, self)
    }
}

/// The latencies drawn for the chips of a path ([`draw_chips`]), in path order; a chip past
/// them (none, when they were drawn for this path) has its typical latency.
#[derive(Clone)]
struct Drawn<'a>(std::slice::Iter<'a, u64>);

impl ChipDraw for Drawn<'_> {
    #[inline(always)]
    fn latency(&mut self, hop: &HopCost) -> u64 {
        match self.0.next() {
            Some(&ps) => ps,
            None => hop.node_latency_ps,
        }
    }
}

/// Draws from `stream` the latency of each chip on `path` (the node each hop but the last
/// reaches), in path order, onto `out`: uniform within typical ± jitter, and the typical
/// value without a draw when the chip has no jitter.
///
/// A transaction draws them once per path, when its first TLP crosses it, and each of its
/// TLPs along that path crosses each chip with the same latency (`txn::TxnChips`): TLPs of
/// one transfer follow each other through a chip at one phase of its clocks and arbiter, and
/// the latency varies from one transfer to the next.
pub(crate) fn draw_chips(path: &[HopCost], stream: &mut Stream, out: &mut Vec<u64>) {
    let chips = path.len().saturating_sub(1);
    out.extend(path[..chips].iter().map(|hop| chip_latency(hop, stream)));
}

/// The latency of the chip `hop` reaches, drawn from `stream`.
#[inline(always)]
fn chip_latency(hop: &HopCost, stream: &mut Stream) -> u64 {
    if hop.node_jitter_ps > 0 {
        hop.node_latency_ps - hop.node_jitter_ps + stream.up_to(2 * hop.node_jitter_ps)
    } else {
        hop.node_latency_ps
    }
}

/// [`traverse`] for a TLP sent without a transaction, not recorded: each chip's latency
/// drawn from `chips` as the TLP reaches it (what [`draw_chips`] would draw for the path).
pub(crate) fn traverse_alone(
    links: &mut [Lane],
    path: &[HopCost],
    start: SimTime,
    payload: u64,
    who: Booking,
    chips: &mut Stream,
) -> Crossing {
    let ser = first_serialization(path, payload);
    cross_path(links, path, start, payload, ser, who, chips, &mut ())
}

/// What a crossing keeps of each hop: nothing (`()`), the hops' timing for the recording
/// (a `Vec<HopRec>`), or when each hop's link started sending ([`Begins`]).
trait HopLog {
    /// The TLP started on `hop`'s link at `begin`; `rec` describes the whole hop.
    fn hop(&mut self, begin: u64, rec: impl FnOnce() -> HopRec);
}

impl HopLog for () {
    #[inline(always)]
    fn hop(&mut self, _: u64, _: impl FnOnce() -> HopRec) {}
}

impl HopLog for Vec<HopRec> {
    #[inline(always)]
    fn hop(&mut self, _: u64, rec: impl FnOnce() -> HopRec) {
        self.push(rec());
    }
}

/// When each hop's link started sending the TLP, in path order.
struct Begins(Vec<u64>);

impl HopLog for Begins {
    #[inline(always)]
    fn hop(&mut self, begin: u64, _: impl FnOnce() -> HopRec) {
        self.0.push(begin);
    }
}

/// Crosses `path[from..]` with the head at `head` and serialization `ser` on the first of
/// those links, drawing chip latencies from `chips` and keeping each hop in `log`. Returns
/// the arrival at the final node and when the TLP started on the first of those links.
#[allow(clippy::too_many_arguments)]
#[inline]
fn run_hops(
    links: &mut [Lane],
    path: &[HopCost],
    from: usize,
    mut head: u64,
    mut ser: u64,
    payload: u64,
    who: Booking,
    chips: &mut impl ChipDraw,
    log: &mut impl HopLog,
) -> (u64, u64) {
    let Some((mut hop, rest)) = path[from..].split_first() else {
        return (head, head);
    };
    // The generator's state in a local for the loop (put back at its end).
    let mut draws = chips.clone();
    let first = links[hop.lane as usize].send(who, head, ser, payload);
    let mut begin = first;
    for next in rest {
        // Through `hop`'s far node (a chip) onto the next link.
        let next_ser = if hop.same_rate_next {
            ser
        } else {
            next.timing.serialization_ps(payload)
        };
        let node = draws.latency(hop);
        let mismatch = ser.saturating_sub(next_ser);
        log.hop(begin, || hop.record(head, begin, ser, node, mismatch));
        head = begin + hop.timing.prop_ps + node + mismatch;
        ser = next_ser;
        begin = links[next.lane as usize].send(who, head, ser, payload);
        hop = next;
    }
    log.hop(begin, || hop.record(head, begin, ser, 0, 0));
    *chips = draws;
    (begin + ser + hop.timing.prop_ps, first)
}

/// The intervals booked on one direction of a link, in time order, that have not ended, and
/// some that have until they are dropped (a few at a time: see `compact_at`).
///
/// An interval may stand for several TLPs of one flow that follow each other back to back
/// (a train's, [`TrainRun`]): a TLP booked later finds no gap among them, and one that
/// reached the link after the first of them goes after all of them, as it would after each.
/// One may also stand for a train's TLPs that leave gaps, a period apart ([`Periodic`]):
/// the usual booking asks only when the last interval ends, and the slow path first makes
/// it one interval per TLP.
///
/// Invariant: `slots[head..]` holds, in time order, every interval that has not ended, and
/// perhaps some first ones that have (not dropped yet); `slots[..head]` have ended and are
/// dropped in one go once all have (or when they outnumber the others), so dropping one is
/// an index step and the common booking an append. `end` and `last_flow` are the end and
/// the flow of the last interval ever booked in time order (the last of `slots` while there
/// is one): the last interval ends last, so the usual booking asks these two fields and
/// nothing else.
///
/// An append drops the intervals that ended only once `compact_at` are kept: [`COMPACT_AT`],
/// or twice those still live after the last such dropping, so an idle link's bookings (each
/// after every earlier one ended) and a link with many TLPs booked ahead (a long stream)
/// alike pay for each dropping with as many appends as it keeps, instead of asking at every
/// append whether anything ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// When the last interval booked ends (0 before any).
    end: u64,
    /// Whose the last interval booked is.
    last_flow: Flow,
    slots: Vec<Slot>,
    /// What the slots of several TLPs stand for ([`PERIODIC`]), in time order: one per such
    /// slot in `slots` (live or not dropped yet).
    periodic: Vec<Periodic>,
    head: usize,
    compact_at: usize,
    /// Whether its latest intervals are provisional ([`Lane::hold`]): each booking is
    /// appended, so that they can be taken back by truncating (and one that would go in a
    /// gap spoils them: see [`Lane::spoiled`]).
    held: bool,
    /// Whether a booking since [`Lane::hold`] went in a gap (appended all the same).
    spoiled: bool,
}

impl Default for Timeline {
    fn default() -> Timeline {
        Timeline {
            end: 0,
            last_flow: 0,
            slots: Vec::new(),
            periodic: Vec::new(),
            head: 0,
            compact_at: COMPACT_AT,
            held: false,
            spoiled: false,
        }
    }
}

/// Intervals a [`Timeline`] keeps at least before an append drops those that ended.
const COMPACT_AT: usize = 64;

/// One TLP's occupancy of a link direction, or several TLPs' of one flow a period apart
/// (its `arrival` [`PERIODIC`]: see [`Periodic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// When its head reached the link.
    arrival: u64,
    begin: u64,
    end: u64,
    flow: Flow,
}

/// The `arrival` of a [`Slot`] that stands for the TLPs of a [`Periodic`] (no TLP arrives at
/// the end of time).
const PERIODIC: u64 = u64::MAX;

impl Slot {
    /// The interval of `ser` picoseconds from `begin` booked for `who`'s TLP arriving at `head`.
    fn booked(who: Booking, head: u64, begin: u64, ser: u64) -> Slot {
        Slot {
            arrival: head,
            begin,
            end: begin + ser,
            flow: who.flow,
        }
    }
}

/// TLPs of one flow that left gaps between them on a link, a period apart, each starting as
/// it arrived (a train's followers: see [`Timeline::book_followers`]): booked as one
/// [`Slot`] from the first one's begin to the last one's end, and made one slot each before
/// the slow path looks at the gaps ([`Timeline::expand_periodic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Periodic {
    /// Its slot's `begin`, the first TLP's.
    begin: u64,
    period: u64,
    /// Each one's serialization.
    ser: u64,
    /// How many after the first.
    more: u64,
}

impl Periodic {
    /// When its last TLP ends: its slot's `end`.
    fn end(&self) -> u64 {
        self.begin + self.more * self.period + self.ser
    }

    /// Its TLPs' slots, one each, in time order.
    fn each(self, flow: Flow) -> impl Iterator<Item = Slot> {
        (0..=self.more).map(move |i| {
            let begin = self.begin + i * self.period;
            Slot::booked(Booking { now: begin, flow }, begin, begin, self.ser)
        })
    }
}

impl Timeline {
    /// The live intervals.
    fn live(&self) -> &[Slot] {
        &self.slots[self.head..]
    }

    /// How many intervals are live.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.len() - self.head
    }

    /// Drops the intervals that ended by `now` (the first ones: intervals in time order
    /// that do not overlap end in that order too).
    #[inline]
    fn drop_ended(&mut self, now: u64) {
        self.head += self.live().partition_point(|s| s.end <= now);
        if self.head == self.slots.len() {
            self.slots.clear();
            self.periodic.clear();
            self.head = 0;
        } else if self.head > 32 && self.head * 2 > self.slots.len() {
            self.drain_dropped(now);
        }
    }

    /// Takes the intervals before `head`, which ended by `now`, out of `slots`, and the runs
    /// of those that stood for several TLPs with them (each ended when its slot did).
    fn drain_dropped(&mut self, now: u64) {
        self.slots.drain(..self.head);
        self.head = 0;
        if !self.periodic.is_empty() {
            self.periodic.retain(|p| p.end() > now);
        }
    }

    /// Drops the intervals that ended by `now`, all of them out of `slots`, and sets when the
    /// next append does so again.
    #[inline(never)]
    fn compact(&mut self, now: u64) {
        self.drop_ended(now);
        self.drain_dropped(now);
        self.compact_at = COMPACT_AT.max(2 * self.slots.len());
    }

    /// Books `n` TLPs of `flow` after the last interval booked, that of `first`, each
    /// `period` after the one before, as [`Timeline::book`] books them one by one (see
    /// [`TrainRun`]): back to back, the last interval grows (an interval may stand for
    /// several TLPs of one flow that follow each other: a TLP booked later finds no gap among
    /// them either way, and a TLP that reached the link after the first of them cannot go
    /// before the rest); with gaps, one interval for them all, a [`Periodic`] (a follower
    /// that leaves gaps did not wait: it started as it arrived).
    fn book_followers(&mut self, first: &HopShape, period: u64, n: u64, flow: Flow, now: u64) {
        let last_end = first.begin + n * period + first.ser;
        match self.slots.last_mut() {
            Some(last) if period == first.ser => last.end = last_end,
            _ => {
                if self.slots.len() >= self.compact_at {
                    self.compact(now);
                }
                let run = Periodic {
                    begin: first.begin + period,
                    period,
                    ser: first.ser,
                    more: n - 1,
                };
                self.slots.push(Slot {
                    arrival: PERIODIC,
                    begin: run.begin,
                    end: last_end,
                    flow,
                });
                self.periodic.push(run);
            }
        }
        self.end = last_end;
        self.last_flow = flow;
    }

    /// Books `ser` picoseconds for a TLP of `who` whose head arrives at `head`; returns when
    /// it starts: the first gap that fits it, not before it arrives, not before any TLP that
    /// reached the link before it has left (the port is a FIFO in arrival order: PCIe lets
    /// no request pass an earlier posted write), and not before the same flow's last TLP on
    /// this link has left.
    ///
    /// Intervals that ended are dropped lazily (by the slow path, or once `compact_at` are
    /// kept): the usual bookings look at the last interval only, and an ended one there
    /// answers them as dropping it would have.
    #[inline(always)]
    fn book(&mut self, who: Booking, head: u64, ser: u64) -> u64 {
        // The usual case: after everything booked (in order, as a FIFO would). The last
        // interval ends last; if it ended by now, so did all, and a TLP arriving after it
        // starts on arrival as it would on an empty timeline.
        let begin = if head >= self.end {
            head
        } else if self.last_flow == who.flow && self.end > who.now {
            // The same flow booked last (the next TLP of a transfer): right behind it.
            self.end
        } else {
            return self.book_in_gap(who, head, ser);
        };
        if self.slots.len() >= self.compact_at {
            self.compact(who.now);
        }
        self.slots.push(Slot::booked(who, head, begin, ser));
        self.end = begin + ser;
        self.last_flow = who.flow;
        begin
    }

    /// Makes each live slot of several TLPs ([`PERIODIC`]) one slot per TLP, as they would
    /// have been booked one by one.
    fn expand_periodic(&mut self) {
        let mut runs = std::mem::take(&mut self.periodic).into_iter();
        let mut slots = Vec::with_capacity(self.slots.len() - self.head);
        for &s in self.live() {
            if s.arrival != PERIODIC {
                slots.push(s);
                continue;
            }
            // Its run is the first left that begins with it: the runs are in time order,
            // and those before it whose slots were dropped are skipped.
            match runs.find(|r| r.begin == s.begin) {
                Some(run) => slots.extend(run.each(s.flow)),
                None => unreachable!("a periodic slot's run is kept while the slot is"),
            }
        }
        self.slots = slots;
        self.head = 0;
    }

    /// [`Timeline::book`] on the live intervals, when the last one booked may not let the TLP
    /// simply follow it: the general rule (an empty timeline, a TLP arriving after the last
    /// interval or behind its own flow's last one come out as in the usual case). Those of
    /// several TLPs are made one per TLP first, then those that ended by `who.now` dropped.
    #[cold]
    fn book_in_gap(&mut self, who: Booking, head: u64, ser: u64) -> u64 {
        if self.held {
            // Provisional: appended, and the provisional bookings spoiled (they are taken
            // back, and made again the usual way).
            self.spoiled = true;
            let begin = head.max(self.end);
            self.slots.push(Slot::booked(who, head, begin, ser));
            self.end = begin + ser;
            self.last_flow = who.flow;
            return begin;
        }
        if !self.periodic.is_empty() {
            self.expand_periodic();
        }
        self.drop_ended(who.now);
        let live = self.live();
        let after_earlier = live
            .iter()
            .filter(|s| s.flow == who.flow || s.arrival <= head)
            .map(|s| s.end)
            .max()
            .unwrap_or(0);
        let mut begin = head.max(after_earlier);
        let mut at = live.len();
        for (i, s) in live.iter().enumerate() {
            if s.end <= begin {
                continue;
            }
            if s.begin >= begin + ser {
                at = i;
                break;
            }
            begin = begin.max(s.end);
        }
        if at == live.len() {
            self.end = begin + ser;
            self.last_flow = who.flow;
        }
        self.slots
            .insert(self.head + at, Slot::booked(who, head, begin, ser));
        begin
    }
}

/// A hop of 1 ps per byte on link 0's lane 0 reaching a chip of `latency_ps` ±
/// `jitter_ps` (tests' paths are made of these, moved to other lanes where they need).
#[cfg(test)]
pub(crate) fn chip_hop(latency_ps: u64, jitter_ps: u64) -> HopCost {
    HopCost {
        same_rate_next: false,
        link: 0,
        dir: 0,
        lane: 0,
        timing: LinkTiming {
            fs_per_byte: 1_000,
            overhead: 26,
            prop_ps: 0,
        },
        node_latency_ps: latency_ps,
        node_jitter_ps: jitter_ps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHO: Booking = Booking { now: 0, flow: 1 };

    /// `flow` booking at time `now`.
    fn at(now: u64, flow: Flow) -> Booking {
        Booking { now, flow }
    }

    fn link(fs_per_byte: u64) -> LinkTiming {
        LinkTiming {
            fs_per_byte,
            overhead: 26,
            prop_ps: 2_000,
        }
    }

    #[test]
    fn a_single_tlp_pays_serialization_once_plus_each_hops_latency() {
        let path = [
            HopCost {
                link: 0,
                dir: 1,
                lane: 1,
                timing: link(1000),
                node_latency_ps: 150_000,
                node_jitter_ps: 0,
                same_rate_next: false,
            },
            HopCost {
                link: 1,
                dir: 1,
                lane: 3,
                timing: link(1000),
                node_latency_ps: 0,
                node_jitter_ps: 0,
                same_rate_next: false,
            },
        ];
        let mut links = vec![Lane::default(); 4];
        let end = traverse(&mut links, &path, SimTime(0), 64, WHO, None, None).arrival;
        // 90 wire bytes at 1 ps each; cut-through: 2 ns + 150 ns, then 90 ps + 2 ns.
        assert_eq!(end, SimTime(2_000 + 150_000 + 90 + 2_000));
        assert_eq!(links[lane(1, 1)].busy_until(), 154_090 - 2_000);
        assert_eq!([links[lane(0, 0)].tlps, links[lane(0, 1)].tlps], [0, 1]);
    }

    #[test]
    fn back_to_back_tlps_queue_behind_each_other() {
        let path = [HopCost {
            link: 0,
            dir: 0,
            lane: 0,
            timing: link(1000),
            node_latency_ps: 0,
            node_jitter_ps: 0,
            same_rate_next: false,
        }];
        let mut links = vec![Lane::default(); 2];
        let a = traverse(&mut links, &path, SimTime(0), 100, WHO, None, None).arrival;
        let b = traverse(&mut links, &path, SimTime(0), 100, WHO, None, None).arrival;
        assert_eq!(b.as_ps() - a.as_ps(), 126);
    }

    #[test]
    fn a_slow_link_before_a_fast_one_delays_the_head_by_the_difference() {
        let path = [
            HopCost {
                link: 0,
                dir: 0,
                lane: 0,
                timing: link(4000),
                node_latency_ps: 0,
                node_jitter_ps: 0,
                same_rate_next: false,
            },
            HopCost {
                link: 1,
                dir: 0,
                lane: 2,
                timing: link(1000),
                node_latency_ps: 0,
                node_jitter_ps: 0,
                same_rate_next: false,
            },
        ];
        let mut links = vec![Lane::default(); 4];
        let end = traverse(&mut links, &path, SimTime(0), 74, WHO, None, None).arrival;
        // 100 wire bytes: 400 ps on the slow link, 100 on the fast one; the tail decides.
        assert_eq!(end, SimTime(2_000 + 300 + 100 + 2_000));
    }

    fn one_link() -> [HopCost; 1] {
        [HopCost {
            link: 0,
            dir: 0,
            lane: 0,
            timing: link(1000),
            node_latency_ps: 0,
            node_jitter_ps: 0,
            same_rate_next: false,
        }]
    }

    /// A TLP issued first on a long path books the link for later; one issued afterwards that
    /// reaches the link earlier takes the idle time before it, as the port would send it.
    #[test]
    fn a_tlp_reaching_an_idle_link_early_does_not_wait_behind_one_booked_for_later() {
        let mut links = vec![Lane::default(); 2];
        let path = one_link();
        let late = traverse(&mut links, &path, SimTime(1_000_000), 100, WHO, None, None);
        let early = traverse(
            &mut links,
            &path,
            SimTime(0),
            100,
            Booking { now: 0, flow: 2 },
            None,
            None,
        );
        assert_eq!(early.arrival, SimTime(126 + 2_000), "it went at once");
        assert_eq!(late.arrival, SimTime(1_000_000 + 126 + 2_000));
        // No gap fits: a third TLP arriving inside the first one queues behind it.
        let third = traverse(
            &mut links,
            &path,
            SimTime(1_000_050),
            100,
            Booking { now: 0, flow: 3 },
            None,
            None,
        );
        assert_eq!(third.arrival, SimTime(1_000_126 + 126 + 2_000));
        assert_eq!(links[lane(0, 0)].busy_until(), 1_000_252);
    }

    #[test]
    fn one_requesters_tlps_stay_in_order_even_when_a_gap_would_fit() {
        let mut links = vec![Lane::default(); 2];
        let path = one_link();
        let first = traverse(&mut links, &path, SimTime(1_000_000), 100, WHO, None, None);
        let second = traverse(&mut links, &path, SimTime(0), 100, WHO, None, None);
        assert!(
            second.arrival > first.arrival,
            "the same flow may not pass itself"
        );
    }

    /// Two links through a chip of 120 ± 12 ns: every TLP's latency lies in the range, the
    /// draws vary, and one requester's back-to-back TLPs still arrive in the order sent.
    #[test]
    fn chip_latencies_vary_within_their_range_without_reordering_a_flow() {
        let hop = chip_hop;
        let mut path = vec![hop(120_000, 12_000), hop(0, 0)];
        path[1].link = 1;
        path[1].lane = 2;
        let mut stream = Stream::new(1, smartio_platform::Cause::Chip, 0);
        let mut links = vec![Lane::default(); 4];
        let mut last = 0;
        let mut seen = std::collections::BTreeSet::new();
        let draw = |stream: &mut Stream| {
            let mut chips = Vec::new();
            draw_chips(&path, stream, &mut chips);
            assert_eq!(chips.len(), 1, "one chip between two links");
            chips
        };
        for i in 0..200u64 {
            // Alone on the links: the arrival is the chip's latency plus two serializations.
            let start = SimTime(i * 10_000_000);
            let chips = draw(&mut stream);
            let c = traverse(&mut links, &path, start, 4, WHO, Some(&chips), None);
            assert_eq!(c.arrival.as_ps() - start.as_ps() - 30, chips[0]);
            let chip = c.arrival.as_ps() - start.as_ps() - 30;
            assert!((108_000..=132_000).contains(&chip), "{chip} ps");
            seen.insert(chip);
            // Back to back: the second of a pair never arrives before the first.
            let a = traverse(
                &mut links,
                &path,
                start + SimDuration::from_ns(500),
                4,
                WHO,
                Some(&draw(&mut stream)),
                None,
            );
            let b = traverse(
                &mut links,
                &path,
                start + SimDuration::from_ns(501),
                4,
                WHO,
                Some(&draw(&mut stream)),
                None,
            );
            assert!(b.arrival > a.arrival && a.arrival.as_ps() > last);
            last = b.arrival.as_ps();
        }
        assert!(
            seen.len() > 100,
            "the latencies vary: {} distinct",
            seen.len()
        );
    }

    /// A chip without jitter takes no draw: the stream gives a path's later chips what it
    /// would give them alone.
    #[test]
    fn chips_without_jitter_draw_nothing() {
        let hop = chip_hop;
        let fixed_first = [hop(50_000, 0), hop(120_000, 12_000), hop(0, 7_000)];
        let alone = [hop(120_000, 12_000), hop(0, 0)];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        draw_chips(
            &fixed_first,
            &mut Stream::new(3, smartio_platform::Cause::Chip, 0),
            &mut a,
        );
        draw_chips(
            &alone,
            &mut Stream::new(3, smartio_platform::Cause::Chip, 0),
            &mut b,
        );
        // The last hop reaches the final node, not a chip: nothing is drawn for it.
        assert_eq!(a.len(), 2);
        assert_eq!(a[0], 50_000);
        assert_eq!(a[1..], b[..]);
        assert!((108_000..=132_000).contains(&b[0]), "{} ps", b[0]);
    }

    /// A train's followers costed in closed form ([`TrainRun`]) arrive, leave their first
    /// link and occupy every link exactly as booking them one by one does: same arrivals,
    /// same statistics, and a TLP of another flow booked afterwards at any time finds the
    /// same gaps. Links slower and faster than the first, with and without another flow's
    /// intervals in the way (where the run must not start, or must stop at them).
    #[test]
    fn a_trains_followers_in_closed_form_book_what_one_by_one_bookings_book() {
        let hop = |lane: u32, fs_per_byte: u64, same_rate_next: bool| HopCost {
            link: lane / 2,
            dir: (lane % 2) as u8,
            lane,
            timing: link(fs_per_byte),
            node_latency_ps: 100_000,
            node_jitter_ps: 0,
            same_rate_next,
        };
        // Links of about 2, 4 and 8 GB/s: a 256-byte TLP takes 141, 70 and 35 ns.
        let slow_first = vec![
            hop(0, 500_000, false),
            hop(2, 250_000, true),
            hop(4, 250_000, false),
            hop(6, 125_000, false),
        ];
        let fast_first = vec![
            hop(0, 125_000, false),
            hop(2, 250_000, false),
            hop(4, 500_000, false),
            hop(6, 250_000, false),
        ];
        /// Another flow's interval on a lane before the train: lane, head, serialization.
        type Busy = Vec<(u32, u64, u64)>;
        // The path, another flow's bookings before the train, and whether the first TLP's
        // followers may be costed in closed form.
        let cases: Vec<(Vec<HopCost>, Busy, bool)> = vec![
            (slow_first.clone(), vec![], true),
            (fast_first.clone(), vec![], true),
            // Busy before the train arrives: the first waits on a link it does not fill.
            (slow_first.clone(), vec![(4, 0, 3_000_000)], false),
            // Another flow booked ahead, in the middle of the train's time.
            (fast_first.clone(), vec![(4, 1_500_000, 200_000)], false),
            (slow_first, vec![(2, 2_000_000, 100_000)], false),
        ];
        let chips = [150_000, 120_000, 90_000];
        for (k, (path, busy, closed)) in cases.into_iter().enumerate() {
            let mut before = vec![Lane::default(); 8];
            for &(lane, head, ser) in &busy {
                before[lane as usize].send(at(0, 7), head, ser, 64);
            }
            let (n, len) = (12u64, 256u64);
            let ser = path[0].timing.serialization_ps(len);
            // One by one, as the step loop books them.
            let mut one = before.clone();
            let mut expected = Vec::new();
            let mut start = SimTime(10_000);
            for _ in 0..n {
                let who = at(start.as_ps(), 1);
                let c = traverse_serialized(&mut one, &path, start, len, ser, who, &chips);
                expected.push((c.arrival, c.first_link_done));
                start = c.first_link_done.max(start);
            }
            // The first as alone, the rest in closed form while they may be.
            let mut run_lanes = before.clone();
            let mut got = Vec::new();
            let mut shape = Vec::new();
            let mut run: Option<TrainRun> = None;
            let mut start = SimTime(10_000);
            let mut followed = 0;
            let mut from_first = None;
            for _ in 0..n {
                let who = at(start.as_ps(), 1);
                let c = match &mut run {
                    Some(r) => {
                        followed += 1;
                        r.follow(start)
                    }
                    None => {
                        let c = traverse_shaped(
                            &mut run_lanes,
                            &path,
                            start,
                            len,
                            ser,
                            who,
                            &chips,
                            &mut shape,
                        );
                        run = TrainRun::after(&run_lanes, &path, &shape, len, c);
                        from_first.get_or_insert(run.is_some());
                        c
                    }
                };
                got.push((c.arrival, c.first_link_done));
                start = c.first_link_done.max(start);
            }
            if let Some(r) = run {
                r.book(&mut run_lanes, &path, &shape, 1, start.as_ps());
            }
            assert_eq!(
                from_first,
                Some(closed),
                "case {k}: the run starts at the first"
            );
            if closed {
                assert_eq!(followed, n - 1, "case {k}: all follow the first");
            }
            assert_eq!(got, expected, "case {k}: arrivals and leavings");
            for (lane, (a, b)) in run_lanes.iter().zip(&one).enumerate() {
                assert_eq!(
                    (a.tlps, a.payload_bytes, a.busy_ps, a.busy_until()),
                    (b.tlps, b.payload_bytes, b.busy_ps, b.busy_until()),
                    "case {k}: lane {lane}'s statistics"
                );
                // Another flow's TLP arriving anywhere in the train's time starts alike: on a
                // grid, and at each TLP's arrival, start and end, and just before them.
                let edges =
                    b.booked.live().iter().flat_map(|s| {
                        [s.arrival, s.begin, s.end].map(|t| [t.saturating_sub(1), t])
                    });
                let heads: Vec<u64> = (0..5_000_000)
                    .step_by(7_001)
                    .chain(edges.flatten())
                    .collect();
                for head in heads {
                    for probe_ser in [10_000, 100_000] {
                        let probe = |l: &Lane| {
                            let mut l = l.clone();
                            l.booked.book(at(head, 2), head, probe_ser)
                        };
                        assert_eq!(probe(a), probe(b), "case {k}: lane {lane}, probe at {head}");
                    }
                }
            }
        }
    }

    /// Followers leave a first-link serialization apart from now: those strictly before the
    /// first event queued go (the next one whatever: it is leaving now).
    #[test]
    fn a_run_counts_the_followers_that_leave_before_the_first_event() {
        let run = |first_ser| TrainRun {
            len: 256,
            first_ser,
            arrival: 0,
            last_period: first_ser,
            followers: 0,
            next_leaving: SimTime(1_000),
        };
        let now = SimTime(1_000);
        let before = |q: Option<u64>, ser| run(ser).leavings_before(now, q.map(SimTime));
        assert_eq!(before(None, 100), u64::MAX);
        assert_eq!(
            before(Some(0), 100),
            1,
            "queued before now: only the one leaving now"
        );
        assert_eq!(before(Some(1_000), 100), 1);
        assert_eq!(before(Some(1_001), 100), 1);
        assert_eq!(
            before(Some(1_100), 100),
            1,
            "at the same time the event comes first"
        );
        assert_eq!(before(Some(1_101), 100), 2);
        assert_eq!(before(Some(1_350), 100), 4);
        assert_eq!(
            before(Some(1_001), 0),
            u64::MAX,
            "no serialization: all leave now"
        );
    }

    #[test]
    fn intervals_that_ended_are_dropped_and_gaps_between_bookings_are_used() {
        let mut t = Timeline::default();
        assert_eq!(t.book(at(0, 1), 100, 10), 100);
        assert_eq!(t.book(at(0, 2), 300, 10), 300);
        assert_eq!(
            t.book(at(0, 3), 105, 10),
            110,
            "after the first, before the second"
        );
        assert_eq!(
            t.book(at(0, 4), 105, 170),
            120,
            "the 180 ps gap before the second fits"
        );
        assert_eq!(
            t.book(at(0, 6), 105, 100),
            310,
            "no gap is left before the second"
        );
        // A TLP that reached the link before a waiting one is not passed by a later one.
        let mut q = Timeline::default();
        assert_eq!(q.book(at(0, 1), 0, 100), 0);
        assert_eq!(q.book(at(0, 2), 500, 100), 500, "booked for later");
        assert_eq!(
            q.book(at(0, 3), 50, 450),
            600,
            "arrived at 50: no 450 ps gap before 600"
        );
        assert_eq!(
            q.book(at(0, 4), 60, 10),
            1050,
            "arrived after it: may not pass it"
        );
        assert_eq!(t.len(), 5);
        // Ended intervals go once a booking needs the gaps, or once too many are kept.
        q.book(at(1_000, 9), 1_001, 1);
        q.book(at(1_000, 5), 1_000, 1);
        assert_eq!(
            q.len(),
            4,
            "the slow path dropped the two that ended by now"
        );
        let mut long = Timeline::default();
        for i in 0..1_000u64 {
            long.book(at(i * 10, 1), i * 10, 5);
            assert!(long.len() <= COMPACT_AT + 1, "{} kept", long.len());
        }
        // Each booking there came after every earlier one had ended: those go once
        // COMPACT_AT are kept, whatever the length of the run.
        assert!(long.slots.len() <= COMPACT_AT, "{} kept", long.slots.len());
    }

    /// The booking rule applied to every interval ever booked, none dropped: what
    /// [`Timeline::book`] must answer however it keeps its intervals. Said plainly: the
    /// earliest start, not before the TLP arrives nor before any interval of its flow or of
    /// a TLP that arrived no later than it ends, at which it overlaps no interval (a gap
    /// starts where the TLP may start or where an interval ends).
    fn book_by_rule(all: &mut Vec<Slot>, who: Booking, head: u64, ser: u64) -> u64 {
        let not_before = all
            .iter()
            .filter(|s| s.flow == who.flow || s.arrival <= head)
            .map(|s| s.end)
            .fold(head, u64::max);
        let fits = |t: u64| all.iter().all(|s| s.end <= t || s.begin >= t + ser);
        let begin = std::iter::once(not_before)
            .chain(all.iter().map(|s| s.end).filter(|&end| end > not_before))
            .filter(|&t| fits(t))
            .min()
            .expect("after the last interval there is room");
        all.push(Slot::booked(who, head, begin, ser));
        begin
    }

    /// Books `steps` (time advanced, flow, how far ahead of now the TLP arrives plus `early`,
    /// serialization) on a timeline and by the rule; the first booking they answer
    /// differently, or after which the timeline lacks an interval that has not ended (one
    /// dropped too early may not change an answer at once), if any.
    fn differ_from_rule(steps: &[(u64, u32, u64, u64)], early: u64) -> Option<String> {
        let steps: Vec<_> = steps
            .iter()
            .map(|&(a, f, h, s)| (a, f, h, s, 0, 0))
            .collect();
        differ_from_rule_with_trains(&steps, early)
    }

    /// [`differ_from_rule`] for steps that may be the first TLP of a train: `followers` more
    /// of its size, each `gap` after the one before has ended, booked at once
    /// ([`Timeline::book_followers`]) when the first was booked last and did not wait (or
    /// they follow back to back), as [`TrainRun`] books them; by the rule, one by one (each
    /// must start as it arrives). Every answer is compared; the intervals kept are compared
    /// when no train was booked at once (a timeline keeps one interval for several TLPs).
    fn differ_from_rule_with_trains(
        steps: &[(u64, u32, u64, u64, u64, u64)],
        early: u64,
    ) -> Option<String> {
        let (mut t, mut all, mut now, mut most_live) = (Timeline::default(), Vec::new(), 0, 0);
        let mut trains = false;
        for (i, &(advance, flow, ahead, ser, followers, gap)) in steps.iter().enumerate() {
            now += advance;
            let who = at(now, flow);
            let head = now + ahead.saturating_sub(early);
            let (booked, by_rule) = (
                t.book(who, head, ser),
                book_by_rule(&mut all, who, head, ser),
            );
            if booked != by_rule {
                return Some(format!("booking {i}: {booked}, by the rule {by_rule}"));
            }
            let last = t.end == booked + ser;
            if followers > 0 && last && (booked == head || gap == 0) {
                trains = true;
                let period = ser + gap;
                let first = HopShape {
                    head,
                    begin: booked,
                    ser,
                };
                t.book_followers(&first, period, followers, flow, now);
                for k in 1..=followers {
                    let arrives = booked + k * period;
                    let by_rule = book_by_rule(&mut all, who, arrives, ser);
                    if by_rule != arrives {
                        return Some(format!("booking {i}: follower {k} at {by_rule}"));
                    }
                }
            }
            let mut not_ended: Vec<Slot> = all.iter().filter(|s| s.end > now).copied().collect();
            not_ended.sort_by_key(|s| s.begin);
            let kept: Vec<Slot> = t.live().iter().filter(|s| s.end > now).copied().collect();
            if !trains && kept != not_ended {
                return Some(format!(
                    "after booking {i}: kept {kept:?}, not ended {not_ended:?}"
                ));
            }
            // Ended intervals are dropped in time: at most twice the most ever live are kept,
            // and the runs of several TLPs no more than their slots.
            most_live = most_live.max(not_ended.len());
            let most = COMPACT_AT.max(2 * most_live) + 1;
            let periodic = t.slots.iter().filter(|s| s.arrival == PERIODIC).count();
            if t.slots.len() > most || t.periodic.len() != periodic {
                return Some(format!(
                    "after booking {i}: {} kept, {} runs",
                    t.slots.len(),
                    t.periodic.len()
                ));
            }
        }
        None
    }

    /// A long stream of trains whose followers leave gaps, each after the last has ended: a
    /// timeline keeps one interval per train's followers and what it stands for only while
    /// that interval is kept (it forgets both when they are dropped), and another flow's TLP
    /// arriving in the last train's gaps is booked there, as the rule books it among them.
    #[test]
    fn a_stream_of_trains_keeps_what_their_intervals_stand_for_only_while_they_are_kept() {
        let steps: Vec<_> = (0..2_000u64)
            .map(|i| (400, 1, 0, 20, i % 6, 10 + i % 7))
            .chain([(0, 2, 30, 5, 0, 0), (1, 3, 80, 9, 0, 0)])
            .collect();
        assert_eq!(differ_from_rule_with_trains(&steps, 0), None);
    }

    proptest::proptest! {
        /// Bookings of a few flows, some back to back, some arriving early into gaps: the
        /// timeline (which answers most from its last interval and drops ended ones lazily)
        /// answers each as the rule does on all of them. A quarter arrive as they are booked
        /// (an interval ending just after now then still counts).
        #[test]
        fn bookings_follow_the_rule_whatever_has_been_dropped(
            steps in proptest::collection::vec((0u64..40, 0u32..3, 0u64..160, 1u64..40), 1..200)
        ) {
            proptest::prop_assert_eq!(differ_from_rule(&steps, 40), None);
        }

        /// Streams booked far ahead, so that more intervals are live than a timeline keeps
        /// before it first drops ended ones (it then waits for twice as many): the same.
        #[test]
        fn bookings_far_ahead_follow_the_rule_whatever_has_been_dropped(
            steps in proptest::collection::vec((0u64..60, 0u32..3, 0u64..3_000, 1u64..40), 1_000..1_500)
        ) {
            proptest::prop_assert_eq!(differ_from_rule(&steps, 200), None);
        }

        /// Trains' followers booked at once, back to back or a period apart (one interval
        /// for them all), among other flows' bookings that arrive early into their gaps or
        /// after them: every answer as the rule gives it on the TLPs one by one, whatever
        /// has been dropped.
        #[test]
        fn trains_booked_at_once_follow_the_rule_whatever_has_been_dropped(
            steps in proptest::collection::vec(
                (0u64..60, 0u32..3, 0u64..400, 1u64..40, 0u64..6, 0u64..30),
                1..400,
            )
        ) {
            proptest::prop_assert_eq!(differ_from_rule_with_trains(&steps, 200), None);
        }

        /// The same with bookings far ahead, so that intervals of several TLPs are live when
        /// a timeline drops the ended ones (it keeps what they stand for) and runs of them
        /// end meanwhile (it forgets those).
        #[test]
        fn trains_booked_far_ahead_follow_the_rule_whatever_has_been_dropped(
            steps in proptest::collection::vec(
                (0u64..60, 0u32..3, 0u64..3_000, 1u64..40, 0u64..6, 0u64..30),
                1_000..1_500,
            )
        ) {
            proptest::prop_assert_eq!(differ_from_rule_with_trains(&steps, 200), None);
        }
    }

    /// A cable after a board link at the same rate serializes a TLP in the same time (the
    /// crossing then skips recomputing it); another rate or per-TLP overhead does not.
    #[test]
    fn links_of_one_rate_serialize_alike_whatever_their_propagation() {
        let board = link(1000);
        let cable = LinkTiming {
            prop_ps: 5_000,
            ..board
        };
        assert!(board.same_rate(&cable));
        assert_eq!(board.serialization_ps(256), cable.serialization_ps(256));
        assert!(!board.same_rate(&link(2000)));
        assert!(!board.same_rate(&LinkTiming {
            overhead: 30,
            ..board
        }));
    }

    /// A TLP booked after everything by the slow path (it arrived early but found no gap)
    /// becomes the last interval: a later TLP arriving inside it is not started on arrival.
    #[test]
    fn a_tlp_booked_last_through_the_gap_search_is_what_later_tlps_follow() {
        let mut t = Timeline::default();
        assert_eq!(t.book(at(0, 1), 100, 10), 100);
        assert_eq!(
            t.book(at(0, 2), 50, 100),
            110,
            "no 100 ps gap before the first: after it"
        );
        assert_eq!(
            t.book(at(0, 3), 150, 10),
            210,
            "arrived after the second reached the link: behind it"
        );
        assert_eq!(t.end, 220);
        assert_eq!(t.last_flow, 3);
    }
}
