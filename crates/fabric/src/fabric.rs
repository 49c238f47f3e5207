//! The fabric: the topology graph of a cluster with the tables its chips keep — NTB adapters'
//! look-up and requester-id tables, multicast groups, link state, cable paths — and the
//! look-ups every other module starts from. [`crate::build`] makes one from a scenario; the
//! feature modules (`enumerate`, `ntb`, `multicast`, `sriov`, `route`, `cables`) act on it.
//!
//! Invariant: the ids in the graph (`HostId`, `NodeId`, `LinkId`, `EndpointId`, `AdapterId`)
//! index the vectors here; they are filled while the fabric is built and nothing is removed
//! from them afterwards.

use crate::adapter::NtbAdapter;
use crate::cables::CablePaths;
use crate::ids::{AdapterId, EndpointId, HostId, LinkId, NodeId};
use crate::iommu::Iommu;
use crate::multicast_groups::Multicast;
use crate::spec::PcieSpec;
use crate::topology::{Endpoint, Host, Link, Node, NodeKind};

/// The whole cluster's PCIe fabric.
#[derive(Debug, Clone)]
pub struct Fabric {
    /// Scenario name.
    pub name: String,
    /// Scenario description.
    pub description: String,
    pub(crate) hosts: Vec<Host>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) links: Vec<Link>,
    pub(crate) endpoints: Vec<Endpoint>,
    /// NTB adapters with their tables, in node-id order.
    pub(crate) adapters: Vec<NtbAdapter>,
    /// Link state, indexed like `links`.
    pub(crate) link_up: Vec<bool>,
    /// Multicast groups of the cluster switches.
    pub(crate) multicast: Multicast,
    /// The last NTB mapping id handed out.
    pub(crate) next_mapping: u64,
    /// The adapter of each endpoint (routing looks it up on every NTB crossing).
    pub(crate) adapter_by_endpoint: Vec<Option<AdapterId>>,
    /// Shortest cable paths between cluster switches (see [`crate::cables`]).
    pub(crate) cable_paths: CablePaths,
    /// Transaction-layer sizes the scenario configures (`[pcie]`).
    pub(crate) pcie: PcieSpec,
}

impl Fabric {
    /// All hosts.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// One host.
    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.index()]
    }

    /// A host's IOMMU, to create domains and map pages.
    pub fn iommu_mut(&mut self, id: HostId) -> &mut Iommu {
        &mut self.hosts[id.index()].iommu
    }

    /// Every host's name in scenario order, comma-separated (for an "unknown host" message).
    pub fn host_names(&self) -> String {
        let names: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        names.join(", ")
    }

    /// Looks a host up by name.
    pub fn host_by_name(&self, name: &str) -> Option<HostId> {
        self.hosts
            .iter()
            .position(|h| h.name == name)
            .map(|i| HostId(i as u32))
    }

    /// All nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// All links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// One link.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.index()]
    }

    /// All endpoints.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// One endpoint.
    pub fn endpoint(&self, id: EndpointId) -> &Endpoint {
        &self.endpoints[id.index()]
    }

    /// The transaction-layer sizes the scenario configures (`[pcie]`; where none is given,
    /// the calibration's apply).
    pub fn pcie(&self) -> &PcieSpec {
        &self.pcie
    }

    /// Finds the endpoint `name` in `host`.
    pub fn endpoint_by_name(&self, host: HostId, name: &str) -> Option<EndpointId> {
        self.hosts[host.index()]
            .endpoints
            .iter()
            .copied()
            .find(|&e| self.endpoints[e.index()].name == name)
    }

    /// The chip model of a node that forwards transactions (switch, NTB, cluster switch).
    pub fn chip_of(&self, node: NodeId) -> Option<&str> {
        match &self.nodes[node.index()].kind {
            NodeKind::Switch { chip } | NodeKind::ClusterSwitch { chip } => Some(chip),
            NodeKind::Ntb { spec, .. } => Some(&spec.chip),
            NodeKind::RootComplex | NodeKind::Device { .. } => None,
        }
    }
}
