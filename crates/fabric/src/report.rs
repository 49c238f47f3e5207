//! A serializable picture of an enumerated fabric: what `smartio topo` prints.

use crate::ids::HostId;
use crate::topology::{BridgeRole, Fabric, LinkKind, NodeKind};
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
