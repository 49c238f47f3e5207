//! The parts of the topology graph: hosts, nodes (chips and endpoints), links, bridges,
//! endpoints and the hops of a path. The [`Fabric`](crate::Fabric) holds them
//! ([`crate::fabric`]); [`crate::build`] makes them from a validated
//! [`ClusterSpec`](crate::ClusterSpec). This module names no `Fabric`.
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

use crate::functions::{Function, VirtualFunctions};
use crate::ids::{Bdf, EndpointId, HostId, LinkId, NodeId};
use crate::iommu::Iommu;
use crate::layout::EndpointLayout;
use crate::spec::{NtbSpec, SourceLoc, VmSpec};
use crate::units::LinkSpec;
use std::ops::Range;

pub use crate::layout::AssignedBar;

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

/// One step of a path: cross `link` in `dir`, arriving at `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Hop {
    /// The link crossed.
    pub link: LinkId,
    /// The direction.
    pub dir: Dir,
    /// The node reached.
    pub node: NodeId,
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
    pub function: Function,
    /// For a PF with the SR-IOV capability: its VFs.
    pub sriov: Option<VirtualFunctions>,
}

impl Endpoint {
    /// Whether the endpoint is a virtual function.
    pub fn is_virtual(&self) -> bool {
        matches!(self.function, Function::Virtual { .. })
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
    pub vms: Vec<VmSpec>,
    /// Where the scenario declared it.
    pub loc: SourceLoc,
}
