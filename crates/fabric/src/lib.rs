//! The pure model of a PCIe cluster: topology, per-host enumeration, address routing, IOMMU.
//!
//! Given "requester R issues an access of n bytes at address A", the fabric answers where it
//! lands (RAM, a BAR, an interrupt, or an error) and which links and chips it crosses. It knows
//! nothing about time, device behaviour or SmartIO.

#![forbid(unsafe_code)]

mod cables;
pub mod device_ref;
pub mod enumerate;
pub mod ids;
pub mod iommu;
pub mod layout;
pub mod multicast;
pub mod ntb;
pub mod report;
pub mod route;
pub mod spec;
pub mod sriov;
pub mod topology;
pub mod units;

pub use device_ref::{DeviceRef, DeviceRefError};
pub use ids::{Bdf, EndpointId, HostId, LinkId, NodeId, Requester};
pub use iommu::{DomainId, Iommu, IommuError};
pub use layout::{BarKind, BarSpec, EndpointLayout, LayoutError, SriovSpec};
pub use multicast::{GroupId, MulticastError};
pub use ntb::{
    AdapterId, ClusterNodeId, LutTarget, NtbAdapter, NtbError, NtbMapping, NtbTableSizes,
};
pub use route::{Access, Branch, Hop, Route, RouteError, Target, Translation};
pub use spec::{parse_scenario, ClusterSpec, ConfiguredSize, PcieSpec, ScenarioError};
pub use sriov::{vf_name, Function, SriovError, VirtualFunctions};
pub use topology::{Dir, Endpoint, Fabric, Host, Link, LinkKind, Node, NodeKind};
pub use units::{LinkError, LinkSpec, SizeError, SizeValueError};
