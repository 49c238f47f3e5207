//! The topology graph: hosts, nodes (chips and endpoints), links, bridges and endpoints,
//! built from a validated [`ClusterSpec`].
//!
//! ```text
//!   RootComplex ──root port── Switch ──downstream port── Endpoint
//!        │                     (chip)  └─downstream port── Ntb ══cable══ Ntb / ClusterSwitch
//!       RAM
//! ```
//!
//! Links are directed from upstream (`a`) to downstream (`b`); cables from the side that
//! declared the connection. Enumeration ([`crate::enumerate`]) fills in bus numbers, BAR
//! addresses and bridge windows.

use crate::ids::{Bdf, EndpointId, HostId, LinkId, NodeId};
use crate::iommu::Iommu;
use crate::layout::{BarKind, EndpointLayout};
use crate::spec::{
    CableEnd, ClusterSpec, ComponentKind, ComponentSpec, HostSpec, NtbSpec, Parent, ScenarioError,
    SourceLoc,
};
use crate::units::LinkSpec;
use smartio_platform::BusAddr;
use std::ops::Range;

/// What a node is.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A host's root complex (CPU, memory controller, root ports).
    RootComplex,
    /// A transparent switch chip.
    Switch {
        /// Chip model.
        chip: String,
    },
    /// An endpoint device.
    Device {
        /// The endpoint function.
        endpoint: EndpointId,
    },
    /// An NTB adapter: an endpoint function in its host plus a cable port.
    Ntb {
        /// The adapter's endpoint function.
        endpoint: EndpointId,
        /// Its resources.
        spec: NtbSpec,
    },
    /// A cluster switch, outside any host.
    ClusterSwitch {
        /// Chip model.
        chip: String,
    },
}

/// A vertex of the topology graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Qualified name: `host` for a root complex, `host.component`, or the cluster switch name.
    pub name: String,
    /// The host whose PCIe domain the node is in (`None` for cluster switches).
    pub host: Option<HostId>,
    /// What it is.
    pub kind: NodeKind,
    /// The link towards the root complex (`None` for root complexes and cluster switches).
    pub up: Option<LinkId>,
    /// Links towards children, in enumeration order.
    pub down: Vec<LinkId>,
    /// Cables (NTB adapters and cluster switches).
    pub cables: Vec<LinkId>,
    /// Address ranges claimed below each child link (bridge windows, or BARs for endpoints).
    pub(crate) claims: Vec<(Range<u64>, LinkId)>,
}

/// Whether a link is inside a host's tree or an external cable between NTB ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A slot, a chassis cable of a transparent adapter pair, or a chip-internal connection.
    Tree,
    /// An NTB cable (adapter to adapter, adapter to cluster switch, switch to switch).
    Cable,
}

/// An edge of the topology graph.
#[derive(Debug, Clone)]
pub struct Link {
    /// Upstream end (or the declaring end of a cable).
    pub a: NodeId,
    /// Downstream end.
    pub b: NodeId,
    /// Generation and width.
    pub spec: LinkSpec,
    /// Tree link or NTB cable.
    pub kind: LinkKind,
    /// A tree link over an external cable (a transparent adapter pair).
    pub cabled: bool,
    /// A readable name, `a -> b`.
    pub name: String,
}

/// Which way a transaction crosses a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Dir {
    /// From `a` to `b` (downstream).
    Down = 0,
    /// From `b` to `a` (upstream).
    Up = 1,
}

impl Dir {
    /// The opposite direction.
    pub const fn reverse(self) -> Dir {
        match self {
            Dir::Down => Dir::Up,
            Dir::Up => Dir::Down,
        }
    }
}

/// A BAR after enumeration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct AssignedBar {
    /// BAR index.
    pub index: u8,
    /// Decoding kind.
    pub kind: BarKind,
    /// Base address in the host's PCIe domain.
    pub base: BusAddr,
    /// Size in bytes.
    pub size: u64,
}

impl AssignedBar {
    /// The address range the BAR decodes.
    pub fn range(&self) -> Range<u64> {
        self.base.get()..self.base.get() + self.size
    }
}

/// An endpoint function (a device, or an NTB adapter's function).
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Owning host.
    pub host: HostId,
    /// Graph node.
    pub node: NodeId,
    /// Component name within the host.
    pub name: String,
    /// Device kind (`nvme`, `dma`, ..., or `ntb`).
    pub kind: String,
    /// Device parameters from the scenario.
    pub params: toml::Table,
    /// The SmartIO id the scenario gives it, if it gives one.
    pub fdid: Option<u32>,
    /// Ids, class and BAR requirements.
    pub layout: EndpointLayout,
    /// Bus/device/function, which is also its requester id.
    pub bdf: Bdf,
    /// BARs with their assigned addresses.
    pub bars: Vec<AssignedBar>,
    /// Where the scenario declared it (a VF: where its PF was declared).
    pub loc: SourceLoc,
    /// A physical function, or which VF of which PF (see [`crate::sriov`]).
    pub function: crate::sriov::Function,
    /// For a PF with the SR-IOV capability: its VFs.
    pub sriov: Option<crate::sriov::VirtualFunctions>,
}

impl Endpoint {
    /// Whether the endpoint is a virtual function.
    pub fn is_virtual(&self) -> bool {
        matches!(self.function, crate::sriov::Function::Virtual { .. })
    }
}

/// The role of a PCI-to-PCI bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum BridgeRole {
    /// A root port of the root complex.
    RootPort,
    /// A switch's upstream port.
    SwitchUpstream,
    /// A switch's downstream port.
    SwitchDownstream,
}

/// A PCI-to-PCI bridge (root port or switch port) after enumeration.
#[derive(Debug, Clone)]
pub struct Bridge {
    /// Owning host.
    pub host: HostId,
    /// The chip (root complex or switch) the port belongs to.
    pub node: NodeId,
    /// Role.
    pub role: BridgeRole,
    /// Its own bus/device/function.
    pub bdf: Bdf,
    /// Secondary bus number.
    pub secondary: u8,
    /// Highest bus number below it.
    pub subordinate: u8,
    /// Non-prefetchable memory window (32-bit), if anything below needs one.
    pub mem: Option<Range<u64>>,
    /// Prefetchable memory window (64-bit), if anything below needs one.
    pub pref: Option<Range<u64>>,
    /// For root ports and downstream ports: the link to the child below.
    pub child_link: Option<LinkId>,
}

/// A host: root complex, RAM, address map and IOMMU.
#[derive(Debug, Clone)]
pub struct Host {
    /// Host name.
    pub name: String,
    /// Root complex node.
    pub root: NodeId,
    /// Installed RAM in bytes.
    pub ram_bytes: u64,
    /// Physical ranges backed by RAM.
    pub ram: Vec<Range<u64>>,
    /// The 32-bit MMIO region (non-prefetchable BARs).
    pub mmio32: Range<u64>,
    /// The 64-bit MMIO region (prefetchable BARs).
    pub mmio64: Range<u64>,
    /// The range where memory writes are message-signalled interrupts.
    pub msi: Range<u64>,
    /// CPU cores available to agents.
    pub cores: u32,
    /// The host IOMMU.
    pub iommu: Iommu,
    /// Bridges in enumeration order.
    pub bridges: Vec<Bridge>,
    /// Endpoints in enumeration order.
    pub endpoints: Vec<EndpointId>,
    /// Virtual machines the host runs (software on the host: no fabric node of their own).
    pub vms: Vec<crate::spec::VmSpec>,
    /// Where the scenario declared it.
    pub loc: SourceLoc,
}

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
    pub(crate) adapters: Vec<crate::ntb::NtbAdapter>,
    /// Link state, indexed like `links`.
    pub(crate) link_up: Vec<bool>,
    /// Multicast groups of the cluster switches.
    pub(crate) multicast: crate::multicast::Multicast,
    /// The last NTB mapping id handed out.
    pub(crate) next_mapping: u64,
    /// The adapter of each endpoint (routing looks it up on every NTB crossing).
    pub(crate) adapter_by_endpoint: Vec<Option<crate::ntb::AdapterId>>,
    /// Shortest cable paths between cluster switches (see [`crate::cables`]).
    pub(crate) cable_paths: crate::cables::CablePaths,
    /// Transaction-layer sizes the scenario configures (`[pcie]`).
    pub(crate) pcie: crate::spec::PcieSpec,
}

/// Supplies an endpoint's layout from its device kind and parameters. The fabric does not
/// know the device layer, so it takes the layer's own error type `E` and only shows it, at
/// the scenario line of the device.
pub type LayoutSource<'a, E> = dyn Fn(&str, &toml::Table) -> Result<EndpointLayout, E> + 'a;

/// The layout of an NTB adapter's endpoint function: registers and the translation window.
pub fn ntb_layout(spec: &NtbSpec) -> EndpointLayout {
    EndpointLayout {
        vendor_id: 0x10b5,
        device_id: 0x8733,
        class_code: 0x06_80_00,
        description: format!("Non-Transparent Bridge ({})", spec.chip),
        bars: vec![
            crate::layout::BarSpec {
                index: 0,
                size: 256 << 10,
                kind: BarKind::Mem64,
            },
            crate::layout::BarSpec {
                index: 2,
                size: spec.window,
                kind: BarKind::Mem64Prefetch,
            },
        ],
        sriov: None,
    }
}

impl Fabric {
    /// Builds and enumerates the fabric described by `spec`.
    pub fn build<E: std::fmt::Display>(
        spec: &ClusterSpec,
        layouts: &LayoutSource<'_, E>,
    ) -> Result<Fabric, ScenarioError> {
        let mut fabric = Fabric {
            name: spec.name.clone(),
            description: spec.description.clone(),
            hosts: Vec::new(),
            nodes: Vec::new(),
            links: Vec::new(),
            endpoints: Vec::new(),
            adapters: Vec::new(),
            link_up: Vec::new(),
            multicast: crate::multicast::Multicast::new(crate::multicast::DEFAULT_GROUPS),
            next_mapping: 0,
            adapter_by_endpoint: Vec::new(),
            cable_paths: crate::cables::CablePaths::default(),
            pcie: spec.pcie.clone(),
        };
        let mut component_nodes: Vec<Vec<NodeId>> = Vec::new();
        for (hi, h) in spec.hosts.iter().enumerate() {
            component_nodes.push(fabric.add_host(HostId(hi as u32), h, layouts)?);
        }
        fabric.add_cables(spec, &component_nodes);
        for hi in 0..fabric.hosts.len() {
            crate::enumerate::enumerate_host(&mut fabric, HostId(hi as u32))?;
        }
        fabric.create_virtual_functions();
        fabric.check_vm_functions()?;
        fabric.collect_adapters();
        Ok(fabric)
    }

    /// Adds host `host` as `h` declares it: its root complex, its address map and its
    /// components in tree order; the components' nodes, in `h`'s order.
    fn add_host<E: std::fmt::Display>(
        &mut self,
        host: HostId,
        h: &HostSpec,
        layouts: &LayoutSource<'_, E>,
    ) -> Result<Vec<NodeId>, ScenarioError> {
        let root = self.add_node(h.name.clone(), Some(host), NodeKind::RootComplex);
        let map = crate::enumerate::AddressMap::for_host(h.ram, h.mmio64).ok_or_else(|| {
            h.loc.error(format!(
                "host {:?}: ram of {} bytes leaves no room for the address map (allowed: {} \
                 to {})",
                h.name,
                h.ram,
                crate::units::format_size(crate::enumerate::MIN_RAM),
                crate::units::format_size(crate::enumerate::MAX_RAM)
            ))
        })?;
        self.hosts.push(Host {
            name: h.name.clone(),
            root,
            ram_bytes: h.ram,
            ram: map.ram,
            mmio32: map.mmio32,
            mmio64: map.mmio64,
            msi: map.msi,
            cores: h.cores,
            iommu: Iommu::new(h.iommu),
            bridges: Vec::new(),
            endpoints: Vec::new(),
            vms: h.vms.clone(),
            loc: h.loc.clone(),
        });
        let mut nodes = Vec::with_capacity(h.components.len());
        for c in &h.components {
            let kind = self.component_kind(host, c, layouts)?;
            let node = self.add_node(format!("{}.{}", h.name, c.name), Some(host), kind);
            if let NodeKind::Device { endpoint } | NodeKind::Ntb { endpoint, .. } =
                self.nodes[node.index()].kind
            {
                self.endpoints[endpoint.index()].node = node;
            }
            let parent = match c.parent {
                Parent::RootPort => root,
                Parent::Switch(i) => nodes[i],
            };
            let link = self.add_link(parent, node, c.link, LinkKind::Tree);
            self.links[link.index()].cabled = c.cabled;
            self.nodes[node.index()].up = Some(link);
            self.nodes[parent.index()].down.push(link);
            nodes.push(node);
        }
        Ok(nodes)
    }

    /// The node kind of component `c` of `host`, adding its endpoint (a device, whose layout
    /// `layouts` gives and which is checked, or an NTB adapter).
    fn component_kind<E: std::fmt::Display>(
        &mut self,
        host: HostId,
        c: &ComponentSpec,
        layouts: &LayoutSource<'_, E>,
    ) -> Result<NodeKind, ScenarioError> {
        Ok(match &c.kind {
            ComponentKind::Switch { chip } => NodeKind::Switch { chip: chip.clone() },
            ComponentKind::Device { kind, params, fdid } => {
                let refused = |m: &dyn std::fmt::Display| {
                    c.loc
                        .error(format!("device {:?} (kind {kind:?}): {m}", c.name))
                };
                let layout = layouts(kind, params).map_err(|m| refused(&m))?;
                layout.validate().map_err(|m| refused(&m))?;
                let endpoint =
                    self.add_endpoint(host, &c.name, kind, params.clone(), layout, &c.loc);
                self.endpoints[endpoint.index()].fdid = *fdid;
                NodeKind::Device { endpoint }
            }
            ComponentKind::Ntb(ntb) => {
                let layout = ntb_layout(ntb);
                let endpoint =
                    self.add_endpoint(host, &c.name, "ntb", toml::Table::new(), layout, &c.loc);
                NodeKind::Ntb {
                    endpoint,
                    spec: ntb.clone(),
                }
            }
        })
    }

    /// Adds the cluster switches and the cables between them and the hosts' NTB adapters
    /// (`component_nodes`: each host's components' nodes).
    fn add_cables(&mut self, spec: &ClusterSpec, component_nodes: &[Vec<NodeId>]) {
        let switch_nodes: Vec<NodeId> = spec
            .cluster_switches
            .iter()
            .map(|s| {
                self.add_node(
                    s.name.clone(),
                    None,
                    NodeKind::ClusterSwitch {
                        chip: s.chip.clone(),
                    },
                )
            })
            .collect();
        for cable in &spec.cables {
            let end = |e: CableEnd| match e {
                CableEnd::Ntb { host, component } => component_nodes[host][component],
                CableEnd::ClusterSwitch(i) => switch_nodes[i],
            };
            let (a, b) = (end(cable.a), end(cable.b));
            let link = self.add_link(a, b, cable.link, LinkKind::Cable);
            self.nodes[a.index()].cables.push(link);
            self.nodes[b.index()].cables.push(link);
        }
    }

    fn add_node(&mut self, name: String, host: Option<HostId>, kind: NodeKind) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node {
            name,
            host,
            kind,
            up: None,
            down: Vec::new(),
            cables: Vec::new(),
            claims: Vec::new(),
        });
        id
    }

    fn add_link(&mut self, a: NodeId, b: NodeId, spec: LinkSpec, kind: LinkKind) -> LinkId {
        let id = LinkId(self.links.len() as u32);
        let name = format!(
            "{} -> {}",
            self.nodes[a.index()].name,
            self.nodes[b.index()].name
        );
        self.links.push(Link {
            a,
            b,
            spec,
            kind,
            cabled: kind == LinkKind::Cable,
            name,
        });
        id
    }

    fn add_endpoint(
        &mut self,
        host: HostId,
        name: &str,
        kind: &str,
        params: toml::Table,
        layout: EndpointLayout,
        loc: &SourceLoc,
    ) -> EndpointId {
        let id = EndpointId(self.endpoints.len() as u32);
        let sriov = layout
            .sriov
            .clone()
            .map(crate::sriov::VirtualFunctions::new);
        self.endpoints.push(Endpoint {
            host,
            node: NodeId(u32::MAX),
            name: name.to_string(),
            kind: kind.to_string(),
            params,
            fdid: None,
            layout,
            bdf: Bdf::new(0, 0, 0),
            bars: Vec::new(),
            loc: loc.clone(),
            function: crate::sriov::Function::Physical,
            sriov,
        });
        self.hosts[host.index()].endpoints.push(id);
        id
    }

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
    pub fn pcie(&self) -> &crate::spec::PcieSpec {
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
