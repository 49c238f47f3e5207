//! Building a fabric from a validated scenario: the hosts with their address maps and
//! components, the cluster switches and cables, then per-host enumeration
//! ([`crate::enumerate`]), the SR-IOV virtual functions ([`crate::sriov`]) and the NTB
//! adapters' tables ([`crate::ntb`]). Device layouts come from a callback
//! ([`LayoutSource`]), so the fabric does not depend on the device crate.

use crate::address_map::{AddressMap, MAX_RAM, MIN_RAM};
use crate::cables::CablePaths;
use crate::enumerate::enumerate_host;
use crate::fabric::Fabric;
use crate::functions::{Function, VirtualFunctions};
use crate::ids::{Bdf, EndpointId, HostId, LinkId, NodeId};
use crate::iommu::Iommu;
use crate::layout::{BarKind, BarSpec, EndpointLayout};
use crate::multicast_groups::{Multicast, DEFAULT_GROUPS};
use crate::spec::{
    CableEnd, ClusterSpec, ComponentKind, ComponentSpec, HostSpec, NtbSpec, Parent, ScenarioError,
    SourceLoc,
};
use crate::topology::{Endpoint, Host, Link, LinkKind, Node, NodeKind};
use crate::units::{format_size, LinkSpec};

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
            BarSpec {
                index: 0,
                size: 256 << 10,
                kind: BarKind::Mem64,
            },
            BarSpec {
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
            multicast: Multicast::new(DEFAULT_GROUPS),
            next_mapping: 0,
            adapter_by_endpoint: Vec::new(),
            cable_paths: CablePaths::default(),
            pcie: spec.pcie.clone(),
        };
        let mut component_nodes: Vec<Vec<NodeId>> = Vec::new();
        for (hi, h) in spec.hosts.iter().enumerate() {
            component_nodes.push(fabric.add_host(HostId(hi as u32), h, layouts)?);
        }
        fabric.add_cables(spec, &component_nodes);
        for hi in 0..fabric.hosts.len() {
            enumerate_host(&mut fabric, HostId(hi as u32))?;
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
        let map = AddressMap::for_host(h.ram, h.mmio64).ok_or_else(|| {
            h.loc.error(format!(
                "host {:?}: ram of {} bytes leaves no room for the address map (allowed: {} \
                 to {})",
                h.name,
                h.ram,
                format_size(MIN_RAM),
                format_size(MAX_RAM)
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
        let sriov = layout.sriov.clone().map(VirtualFunctions::new);
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
            function: Function::Physical,
            sriov,
        });
        self.hosts[host.index()].endpoints.push(id);
        id
    }
}
