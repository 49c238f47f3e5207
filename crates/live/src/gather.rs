//! Gathering the daemon's figures (`smartio cluster stats`) into the wire form of
//! [`crate::stats`]: what it holds now and what it has carried over each link.

use crate::daemon::Daemon;
use crate::stats::{
    AdapterStats, Carried, ClusterStats, DeviceStats, LinkStats, SegmentStats, NOT_COUNTED,
};
use smartio_fabric::{AdapterId, HostId};

impl Daemon {
    /// The daemon's figures now.
    pub fn stats(&self) -> ClusterStats {
        let machine = &self.cluster.machine;
        let fabric = machine.fabric();
        let host_name = |h: HostId| fabric.host(h).name.clone();
        let adapters = (0..fabric.adapters().len() as u32)
            .map(AdapterId)
            .map(|id| {
                let a = fabric.adapter(id);
                AdapterStats {
                    adapter: fabric.adapter_name(id),
                    host: host_name(a.host),
                    node_id: a.node_id.0,
                    lut_used: a.lut_used(),
                    lut_entries: a.lut().len(),
                    requester_ids_used: a.requester_ids_used(),
                    requester_ids: a.requester_ids(),
                }
            })
            .collect();
        let devices = self
            .smartio
            .devices()
            .into_iter()
            .map(|d| DeviceStats {
                device: d.qualified(),
                fdid: d.fdid.0,
                kind: d.kind.clone(),
                borrowers: d.borrowers.iter().map(|b| b.host.clone()).collect(),
            })
            .collect();
        let links = smartio_machine::LinkTraffic::carried_since(&[], machine.link_traffic())
            .into_iter()
            .map(|l| {
                let carried = |t: smartio_machine::LaneTraffic| Carried {
                    accesses: t.tlps,
                    bytes: t.payload_bytes,
                };
                LinkStats {
                    link: l.link,
                    down: carried(l.down),
                    up: carried(l.up),
                }
            })
            .collect();
        let segment_list: Vec<SegmentStats> = self
            .smartio
            .sisci()
            .segments()
            .into_iter()
            .map(|s| SegmentStats {
                host: host_name(s.segment.host),
                id: s.segment.id,
                size: s.segment.size,
                kind: s.kind.name().to_string(),
                available_on: s
                    .available_on
                    .iter()
                    .filter_map(|&n| fabric.host_adapter(s.segment.host, n))
                    .map(|a| fabric.adapter_name(a))
                    .collect(),
                connected: s.connected.into_iter().map(host_name).collect(),
                device_maps: s.device_maps,
            })
            .collect();
        ClusterStats {
            scenario: self.scenario.clone(),
            descriptors: self.descriptors(),
            segments: segment_list.len(),
            segment_list,
            devices,
            adapters,
            accesses: machine.counters().tlp_arrivals,
            links,
            not_counted: NOT_COUNTED.into(),
        }
    }
}
