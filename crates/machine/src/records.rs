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

/// What one direction of a link carried: TLPs, bytes and the time it was busy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LaneTraffic {
    /// TLPs sent.
    pub tlps: u64,
    /// Bytes on the wire (payload plus each TLP's framing, header and CRC).
    pub wire_bytes: u64,
    /// Payload bytes.
    pub payload_bytes: u64,
    /// Time the direction was busy sending, in picoseconds.
    pub busy_ps: u64,
}

/// What a link carried each way so far (see [`crate::Engine::link_traffic`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LinkTraffic {
    /// The link, `a -> b` as the fabric names it.
    pub link: String,
    /// From `a` to `b`.
    pub down: LaneTraffic,
    /// From `b` to `a`.
    pub up: LaneTraffic,
}

impl LaneTraffic {
    /// What was carried after `before` was counted.
    fn since(self, before: LaneTraffic) -> LaneTraffic {
        LaneTraffic {
            tlps: self.tlps.saturating_sub(before.tlps),
            wire_bytes: self.wire_bytes.saturating_sub(before.wire_bytes),
            payload_bytes: self.payload_bytes.saturating_sub(before.payload_bytes),
            busy_ps: self.busy_ps.saturating_sub(before.busy_ps),
        }
    }
}

impl LinkTraffic {
    /// What each link of `now` carried after `before` was taken (both in the fabric's link
    /// order), keeping only the links that carried a TLP either way: a report's links.
    pub fn carried_since(before: &[LinkTraffic], now: Vec<LinkTraffic>) -> Vec<LinkTraffic> {
        now.into_iter()
            .enumerate()
            .map(|(i, l)| match before.get(i) {
                Some(b) => LinkTraffic {
                    down: l.down.since(b.down),
                    up: l.up.since(b.up),
                    link: l.link,
                },
                None => l,
            })
            .filter(|l| l.down.tlps + l.up.tlps > 0)
            .collect()
    }
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

#[cfg(test)]
mod traffic_tests {
    use super::*;

    fn link(name: &str, down: u64, up: u64) -> LinkTraffic {
        let lane = |n: u64| LaneTraffic {
            tlps: n,
            wire_bytes: 90 * n,
            payload_bytes: 64 * n,
            busy_ps: 100 * n,
        };
        LinkTraffic {
            link: name.into(),
            down: lane(down),
            up: lane(up),
        }
    }

    #[test]
    fn what_links_carried_since_a_snapshot_leaves_out_the_idle_ones() {
        let before = [link("a", 2, 0), link("b", 5, 5), link("c", 0, 0)];
        let now = vec![link("a", 3, 1), link("b", 5, 5), link("c", 0, 4)];
        let carried = LinkTraffic::carried_since(&before, now);
        assert_eq!(carried, [link("a", 1, 1), link("c", 0, 4)]);
        assert_eq!(carried[0].down.wire_bytes, 90);
        assert!(LinkTraffic::carried_since(&[], vec![link("d", 0, 0)]).is_empty());
    }
}
