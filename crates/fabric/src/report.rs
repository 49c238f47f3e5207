//! A serializable picture of an enumerated fabric: what `smartio topo` prints.

use crate::adapter::{ClusterNodeId, NtbAdapter};
use crate::fabric::Fabric;
use crate::ids::AdapterId;
use crate::ids::HostId;
use crate::topology::{BridgeRole, LinkKind, NodeKind};
use crate::units::format_size;
use serde::Serialize;

/// The whole cluster.
#[derive(Debug, Clone, Serialize)]
pub struct TopologyReport {
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: String,
    /// One entry per host.
    pub hosts: Vec<HostReport>,
    /// Cluster switches.
    pub cluster_switches: Vec<ClusterSwitchReport>,
    /// NTB cables.
    pub cables: Vec<CableReport>,
    /// Every NTB adapter in the cluster, in node-id order.
    pub adapters: Vec<AdapterReport>,
    /// Multicast groups of the cluster switches.
    pub multicast_groups: MulticastReport,
}

/// One host's tree and address map.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    /// Host name.
    pub name: String,
    /// RAM in bytes.
    pub ram_bytes: u64,
    /// Whether the IOMMU is on.
    pub iommu: bool,
    /// CPU cores.
    pub cores: u32,
    /// The PCI tree, root complex first.
    pub tree: TreeNode,
    /// The physical address map, sorted by address.
    pub address_map: Vec<MapEntry>,
    /// Virtual machines, in scenario order (left out of JSON when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<VmReport>,
}

/// A virtual machine of a host.
#[derive(Debug, Clone, Serialize)]
pub struct VmReport {
    /// `host/vm`.
    pub name: String,
    /// Guest RAM in bytes.
    pub memory: u64,
    /// Bytes per host page backing it.
    pub page_bytes: u64,
    /// Functions passed through to it (`lender:device` by MDEV, `device` by VFIO); left out
    /// when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

/// A node of a host's PCI tree.
#[derive(Debug, Clone, Serialize)]
pub struct TreeNode {
    /// Name (`host.component`).
    pub name: String,
    /// `root-complex`, `root-port`, `switch`, `device` or `ntb`.
    pub kind: String,
    /// Bus/device/function, or `None` for the root complex.
    pub bdf: Option<String>,
    /// Chip model or device kind.
    pub model: String,
    /// Link to the parent, e.g. `Gen3 x16`.
    pub link: Option<String>,
    /// For bridges: `[secondary-subordinate]`.
    pub buses: Option<String>,
    /// Children.
    pub children: Vec<TreeNode>,
}

/// One range of a host's address map.
#[derive(Debug, Clone, Serialize)]
pub struct MapEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `ram`, `mmio32`, `mmio64`, `msi`, `bar`, `bridge-mem`, `bridge-pref`.
    pub kind: String,
    /// Who owns it.
    pub owner: String,
}

/// A cluster switch.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterSwitchReport {
    /// Name.
    pub name: String,
    /// Chip model.
    pub chip: String,
}

/// An NTB cable.
#[derive(Debug, Clone, Serialize)]
pub struct CableReport {
    /// One end.
    pub a: String,
    /// Other end.
    pub b: String,
    /// Generation and width.
    pub link: String,
}

/// One NTB adapter: where it sits, its window and how full its tables are.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterReport {
    /// Cluster-wide node id (4, 8, 12, ...).
    pub node_id: ClusterNodeId,
    /// Its host.
    pub host: String,
    /// Adapter number within the host.
    pub adapter: u32,
    /// Qualified name (`host.component`).
    pub name: String,
    /// Chip model.
    pub chip: String,
    /// Bus address of the window BAR in the host.
    pub window_base: u64,
    /// Window size in bytes.
    pub window_size: u64,
    /// Bytes each look-up-table entry translates.
    pub entry_size: u64,
    /// Valid look-up-table entries.
    pub lut_used: usize,
    /// Look-up-table size.
    pub lut_entries: usize,
    /// Requester-id entries in use (the CPU's reserved ones included).
    pub requester_ids_used: usize,
    /// Requester-id table size.
    pub requester_ids: usize,
    /// The adapter's cable, `None` when it is not connected.
    pub cable: Option<AdapterCableReport>,
}

/// Where an adapter's cable leads.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterCableReport {
    /// The cable's name (`a -> b`).
    pub name: String,
    /// Generation and width.
    pub link: String,
    /// Whether the cable is up.
    pub up: bool,
    /// The node at the far end: an adapter (`host.component`) or a cluster switch.
    pub peer: String,
    /// `ntb` or `cluster-switch`.
    pub peer_kind: String,
}

/// Multicast group usage.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MulticastReport {
    /// Groups in use.
    pub used: usize,
    /// Groups the switches support.
    pub limit: u32,
}

impl Fabric {
    /// A snapshot of the topology for printing.
    pub fn report(&self) -> TopologyReport {
        TopologyReport {
            scenario: self.name.clone(),
            description: self.description.clone(),
            hosts: (0..self.hosts.len())
                .map(|i| self.host_report(HostId(i as u32)))
                .collect(),
            cluster_switches: self
                .nodes
                .iter()
                .filter_map(|n| match &n.kind {
                    NodeKind::ClusterSwitch { chip } => Some(ClusterSwitchReport {
                        name: n.name.clone(),
                        chip: chip.clone(),
                    }),
                    _ => None,
                })
                .collect(),
            cables: self
                .links
                .iter()
                .filter(|l| l.kind == LinkKind::Cable)
                .map(|l| CableReport {
                    a: self.nodes[l.a.index()].name.clone(),
                    b: self.nodes[l.b.index()].name.clone(),
                    link: l.spec.to_string(),
                })
                .collect(),
            adapters: self
                .adapters()
                .iter()
                .enumerate()
                .map(|(i, a)| self.adapter_report(AdapterId(i as u32), a))
                .collect(),
            multicast_groups: MulticastReport {
                used: self.multicast().used(),
                limit: self.multicast().limit(),
            },
        }
    }

    fn adapter_report(&self, id: AdapterId, a: &NtbAdapter) -> AdapterReport {
        let cable = a.cable.map(|link| {
            let l = &self.links[link.index()];
            let far = if l.a == a.node { l.b } else { l.a };
            let peer = &self.nodes[far.index()];
            AdapterCableReport {
                name: l.name.clone(),
                link: l.spec.to_string(),
                up: self.link_is_up(link),
                peer: peer.name.clone(),
                peer_kind: match peer.kind {
                    NodeKind::ClusterSwitch { .. } => "cluster-switch",
                    NodeKind::Ntb { .. } => "ntb",
                    _ => "other",
                }
                .into(),
            }
        });
        AdapterReport {
            node_id: a.node_id,
            host: self.hosts[a.host.index()].name.clone(),
            adapter: a.number,
            name: self.adapter_name(id),
            chip: a.chip.clone(),
            window_base: a.window.start,
            window_size: a.window.end - a.window.start,
            entry_size: a.entry_size,
            lut_used: a.lut_used(),
            lut_entries: a.lut().len(),
            requester_ids_used: a.requester_ids_used(),
            requester_ids: a.requester_ids(),
            cable,
        }
    }

    fn host_report(&self, id: HostId) -> HostReport {
        let h = &self.hosts[id.index()];
        let mut map = Vec::new();
        for r in &h.ram {
            map.push(MapEntry {
                start: r.start,
                end: r.end,
                kind: "ram".into(),
                owner: h.name.clone(),
            });
        }
        map.push(MapEntry {
            start: h.mmio32.start,
            end: h.mmio32.end,
            kind: "mmio32".into(),
            owner: h.name.clone(),
        });
        map.push(MapEntry {
            start: h.msi.start,
            end: h.msi.end,
            kind: "msi".into(),
            owner: h.name.clone(),
        });
        map.push(MapEntry {
            start: h.mmio64.start,
            end: h.mmio64.end,
            kind: "mmio64".into(),
            owner: h.name.clone(),
        });
        for b in &h.bridges {
            let owner = format!("{} {}", b.bdf, self.nodes[b.node.index()].name);
            if let Some(r) = &b.mem {
                map.push(MapEntry {
                    start: r.start,
                    end: r.end,
                    kind: "bridge-mem".into(),
                    owner: owner.clone(),
                });
            }
            if let Some(r) = &b.pref {
                map.push(MapEntry {
                    start: r.start,
                    end: r.end,
                    kind: "bridge-pref".into(),
                    owner,
                });
            }
        }
        for &e in &h.endpoints {
            let ep = &self.endpoints[e.index()];
            for bar in &ep.bars {
                map.push(MapEntry {
                    start: bar.base.get(),
                    end: bar.base.get() + bar.size,
                    kind: "bar".into(),
                    owner: format!(
                        "{} {} BAR{} ({})",
                        ep.bdf,
                        ep.name,
                        bar.index,
                        format_size(bar.size)
                    ),
                });
            }
        }
        // Sort by start, larger (containing) ranges first.
        map.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        HostReport {
            name: h.name.clone(),
            ram_bytes: h.ram_bytes,
            iommu: h.iommu.enabled(),
            cores: h.cores,
            tree: self.tree_node(id, h.root, None),
            address_map: map,
            vms: h
                .vms
                .iter()
                .map(|v| VmReport {
                    name: format!("{}/{}", h.name, v.name),
                    memory: v.memory,
                    page_bytes: v.page_bytes,
                    devices: v.devices.iter().map(|(d, _)| d.clone()).collect(),
                })
                .collect(),
        }
    }

    fn tree_node(&self, host: HostId, node: crate::ids::NodeId, link: Option<String>) -> TreeNode {
        let n = &self.nodes[node.index()];
        let h = &self.hosts[host.index()];
        let bridge_of = |role: BridgeRole, child: Option<crate::ids::LinkId>| {
            h.bridges.iter().find(|b| {
                b.node == node && b.role == role && (child.is_none() || b.child_link == child)
            })
        };
        let child_nodes = |this: &Self| -> Vec<TreeNode> {
            n.down
                .iter()
                .map(|&l| {
                    let link = &this.links[l.index()];
                    let port = bridge_of(
                        if n.kind == NodeKind::RootComplex {
                            BridgeRole::RootPort
                        } else {
                            BridgeRole::SwitchDownstream
                        },
                        Some(l),
                    );
                    let child = this.tree_node(host, link.b, Some(link.spec.to_string()));
                    match port {
                        Some(p) => TreeNode {
                            name: format!("{} port {}", n.name, p.bdf),
                            kind: if n.kind == NodeKind::RootComplex {
                                "root-port"
                            } else {
                                "downstream-port"
                            }
                            .into(),
                            bdf: Some(p.bdf.to_string()),
                            model: String::new(),
                            link: None,
                            buses: Some(format!("[{:02x}-{:02x}]", p.secondary, p.subordinate)),
                            children: vec![child],
                        },
                        None => child,
                    }
                })
                .collect()
        };
        match &n.kind {
            NodeKind::RootComplex => TreeNode {
                name: n.name.clone(),
                kind: "root-complex".into(),
                bdf: Some("00:00.0".into()),
                model: "root complex".into(),
                link: None,
                buses: None,
                children: child_nodes(self),
            },
            NodeKind::Switch { chip } => {
                let up = bridge_of(BridgeRole::SwitchUpstream, None);
                TreeNode {
                    name: n.name.clone(),
                    kind: "switch".into(),
                    bdf: up.map(|b| b.bdf.to_string()),
                    model: chip.clone(),
                    link,
                    buses: up.map(|b| format!("[{:02x}-{:02x}]", b.secondary, b.subordinate)),
                    children: child_nodes(self),
                }
            }
            NodeKind::Device { endpoint } | NodeKind::Ntb { endpoint, .. } => {
                let ep = &self.endpoints[endpoint.index()];
                TreeNode {
                    name: n.name.clone(),
                    kind: if matches!(n.kind, NodeKind::Ntb { .. }) {
                        "ntb"
                    } else {
                        "device"
                    }
                    .into(),
                    bdf: Some(ep.bdf.to_string()),
                    model: ep.layout.description.clone(),
                    link,
                    buses: None,
                    children: Vec::new(),
                }
            }
            NodeKind::ClusterSwitch { chip } => TreeNode {
                name: n.name.clone(),
                kind: "cluster-switch".into(),
                bdf: None,
                model: chip.clone(),
                link,
                buses: None,
                children: Vec::new(),
            },
        }
    }
}
