//! The pure model of a PCIe cluster: topology, per-host enumeration, address routing, IOMMU.
//!
//! Given "requester R issues an access of n bytes at address A", the fabric answers where it
//! lands (RAM, a BAR, an interrupt, or an error) and which links and chips it crosses. It knows
//! nothing about time, device behaviour or SmartIO.
//!
//! # Inside this crate
//!
//! Given "requester R issues an access of n bytes at address A", the fabric answers where it lands
//! (RAM, a BAR, the MSI range, or an error) and which links and chips it crosses. It has no notion
//! of time, device behaviour or SmartIO.
//!
//! - `spec` (`raw` the TOML shape, `model` the validated `ClusterSpec`, `limits` every range and
//!   the name rules with the reason for each bound, `template` the `{i}`/`{i:02}`/`{i/10}` name
//!   templates), `units` (sizes parsed exactly, without floating point; links): scenario files
//!   parsed and validated into a `ClusterSpec`. Every error names the file, the line, the key,
//!   the value and what is allowed (`scenarios/x.toml:16: ram = 1.5: expected a size ...`);
//!   `lines` finds a value's line by binary search in the offsets of the text's newlines
//!   (`LineIndex`, shared with the calibration), since validation locates nearly every value.
//!   `repeat = [a, b]` expands a host entry into one host per index (used by `cascade-60`).
//!   `[[host.vm]]` declares a virtual machine of the host (`name`, `memory`, `pages` = 4 KiB or
//!   2 MiB, `devices` it is assigned: `lender:device` or a device of its own host, checked to
//!   exist once every host is known): software on the host, so it is carried on the `Host` for
//!   `topo`, `devices` and the workloads that run in it (`--host host/vm`), but is no node of
//!   the fabric. `[pcie]` states the Max_Payload_Size and Max_Read_Request_Size the scenario's
//!   firmware configured for the whole cluster (powers of two 128 B to 4 KiB, kept with their
//!   lines as the `PcieSpec` of the `ClusterSpec` and the `Fabric`); the cluster puts them in
//!   force over the calibration's (`Calibration::configured_by`), so the engine times them with
//!   no change of its own (`pxh810-back-to-back`: Paper I's MPS 128). A host's `mmio64`
//!   says where its firmware starts the 64-bit MMIO region (a multiple of 1 GiB from the top of
//!   RAM; `HostSpec::mmio64`, `AddressMap::for_host`); without it the region starts at the
//!   first 1 TiB boundary, beyond a 40-bit device's reach (`mesh-3` starts it right above RAM
//!   so its Kepler K420s reach the NTB windows and each other, as the papers' did).
//!   Address arithmetic in enumeration and placement is checked: what cannot be placed is an
//!   error naming the device and the sizes, never a wrap.
//! - `cables`: the shortest cable route between two adapters through cluster switches, from
//!   per-switch search trees, each made the first time a route leaves its switch (building is
//!   linear in the cables; 10,000 hosts parse, build and start in ~0.15 s).
//! - `topology`: the parts of the graph — root complexes, switch chips, endpoints, NTB
//!   adapters, cluster switches; tree links and cables; the hops of a path.
//! - `fabric`: the `Fabric` that holds the graph and the chips' tables, and its look-ups.
//! - `build`: a `Fabric` from a validated scenario. Device layouts (ids, class, BARs) come from
//!   a callback (`LayoutSource`, generic over the device layer's error type, which the fabric
//!   only shows at the device's scenario line), so the fabric does not depend on the device
//!   crate.
//! - `enumerate`: per-host enumeration as firmware and Linux do it: bus numbers, requester ids,
//!   naturally aligned BARs, bridge windows with 1 MiB granularity, in the regions of the
//!   host's address map (`address_map`, below).
//!
//! The state the fabric keeps for NTB adapters (`adapter`), multicast groups
//! (`multicast_groups`) and virtual functions (`functions`) is in modules of its own that name
//! no `Fabric`, below `fabric`; what the fabric does with it is in `ntb`, `multicast` and
//! `sriov`, above it, so no two modules import each other.
//! - `route`: address routing. A device's request goes upstream until a switch port's window
//!   claims the address (peer-to-peer through the lowest common switch), else to the root complex.
//!   With the host IOMMU on, ACS redirects every device request to the root complex, where the
//!   IOMMU translates it (the MSI range is not remapped). Unclaimed addresses are Unsupported
//!   Request; the route is clipped where the target ends. An NTB adapter's own requests (its
//!   DMA engine) to its own BARs stay inside its chip: into its window they cross the NTB
//!   straight away instead of going up the adapter's link and back down (which would cost the
//!   link twice and the root complex).
//! - `iommu`: per-device translation domains of 4 KiB pages, kept as runs (a window of many GiB
//!   is one entry); a missing or read-only mapping is a fault and the access does not happen.
//! - `report`: the serializable picture of an enumerated fabric that `smartio topo` prints.
//!
//! - `ntb`: NTB adapters. Each is an endpoint with a register BAR and a window BAR (BAR2); the
//!   window is split into equal look-up-table entries (count from the scenario or the
//!   calibration, entry size = window / count rounded down to a power of two). An entry maps its
//!   slice onto an aligned region of a far address space: the host behind another adapter, or a
//!   multicast group. Every adapter has a requester-id table (the host CPU holds two reserved
//!   entries; devices need one to read across). Adapters get cluster-wide node ids (4, 8, 12, ...)
//!   and per-host numbers. `cable_path` finds the shortest cable route between two adapters
//!   through cluster switches (adapters do not forward between cables). Link state (up/down) is
//!   kept per link.
//! - `multicast`: groups of the cluster switches (a limited number, from the calibration); each
//!   member is an adapter whose overlay BAR maps group offsets into its host.
//!
//! Routing across an NTB: the downstream walk reaches the window BAR of an adapter; the entry
//! translates the address (no valid entry: Unsupported Request naming the adapter; a read by a
//! requester without a requester-id entry: likewise), the path continues over the cables to the
//! far adapter, and routing starts again in the far host as if that adapter had issued the
//! request (its IOMMU domain applies there). A multicast write returns one branch per member
//! except the sending adapter. A path over a link that is down fails with `LinkDown`.
//!
//! Address map of every host (physical addresses):
//!
//! ```text
//! 0x0000_0000 .. min(RAM, 2 GiB)    RAM
//! 0x8000_0000 .. 0xFEC0_0000        32-bit MMIO: non-prefetchable BARs, bridge memory windows
//! 0xFEE0_0000 .. 0xFEF0_0000        MSI range: a write here is an interrupt
//! 0x1_0000_0000 ..                  RAM above 2 GiB continues here (above 4 GiB)
//! next 1 TiB boundary, 16 TiB       64-bit MMIO: prefetchable BARs and windows
//! ```
//!
//! # SR-IOV end to end
//!
//! SR-IOV (issue 17; PCI Express Base Specification §9) is split by who owns what:
//!
//! - **devices** declares the capability in the PF's layout (`fabric::SriovSpec`: TotalVFs,
//!   First VF Offset, VF Stride, VF Device ID, the VF BARs' per-VF slice sizes) and builds the
//!   configuration spaces: the PF's with the SR-IOV capability (its VF BAR registers hold the
//!   bases enumeration chose), and one per VF with the VF rules — Vendor ID reads 0xFFFF,
//!   Device ID is the VF Device ID, Command.Memory Space is hard-wired to 0 (the PF's VF MSE
//!   governs), no INTx, its own MSI-X capability when the model gives VFs one, no SR-IOV
//!   capability; clearing VF Enable resets them.
//! - **fabric** (`sriov`) reserves the bus numbers of all TotalVFs routing ids below the PF's
//!   port, places each VF BAR as one region of slice × TotalVFs in the bridge windows, and
//!   creates one endpoint per possible VF after the scenario's endpoints (no existing id moves;
//!   VFs are in no host's endpoint list, so firmware and `topo` do not see them). It keeps each
//!   PF's SR-IOV Control and NumVFs (`set_sriov_control`) and routes by them: VF n's slice
//!   reaches VF n while VF Enable and VF MSE are set and n ≤ NumVFs, else it is an
//!   Unsupported Request; `function_present` says which VFs exist. A VF is a requester of its
//!   own, so IOMMU domains and NTB requester-id entries see the VF, not the PF.
//! - **engines** (both) ask a function's `ConfigHandler::sriov_control` after every
//!   configuration write and give it to the fabric, so a write that sets VF Enable makes the
//!   VFs exist for the next request; configuration requests to a VF that does not exist read
//!   all-ones and are not delivered. BAR accesses need nothing new: they are dispatched by
//!   endpoint.
//! - **the device-side seam** (`platform::function`, `machine`): a model serving several
//!   functions implements `FunctionBarHandler` (accesses arrive with `FunctionId::Physical` or
//!   `Virtual(n)` and the function's own BAR index and offset); its factory lists them with
//!   `Machine::functions(pf)`, attaches them with `Machine::attach_function_handlers` (one
//!   `OneFunction` adapter per function's endpoint), takes one DMA port per function
//!   (`Machine::device` of its endpoint) and keeps one MSI-X table per function (signalled
//!   through that function's configuration space, `SrIovFunctions::with_vf`). The DMA test
//!   device is the first model to use it.
//! - **host** (`sriov`): the PF driver's `DeviceHandle::enable_sriov(n)` checks NumVFs against
//!   TotalVFs (`TooManyVfs`; the capability itself keeps its old NumVFs on a refused write, so
//!   the driver reads it back), sets VF Enable and VF MSE, and hot-adds a handle per VF (a
//!   local function with its own IOMMU domain) where drivers bind; `disable_sriov` unbinds and
//!   removes them. A handle on a VF that is gone — removed here, or lent and removed on its
//!   lender — answers `FunctionGone`; a BAR mapping taken before reads all-ones.
//! - **smartio** lends VFs like any device: they register with fdids of their own, each lent
//!   VF takes its own requester-id entry on the lender's adapter (so at most 30 are lent
//!   through a 32-entry PXH830-class table), and `workloads::Booted` enables every VF of every
//!   SR-IOV PF at boot (as a boot script writing `sriov_numvfs` does), so `smartio devices`
//!   lists them and any workload borrows them (`bench dma --device lender:dma0.vf1`).

#![forbid(unsafe_code)]

pub mod adapter;
pub mod address_map;
pub mod build;
mod cables;
pub mod device_ref;
pub mod enumerate;
pub mod fabric;
pub mod functions;
pub mod ids;
pub mod iommu;
pub mod layout;
pub mod multicast;
pub mod multicast_groups;
pub mod ntb;
pub mod report;
pub mod route;
pub mod spec;
pub mod sriov;
pub mod topology;
pub mod units;

pub use build::LayoutSource;
pub use device_ref::{DeviceRef, DeviceRefError};
pub use fabric::Fabric;
pub use ids::{AdapterId, Bdf, EndpointId, GroupId, HostId, LinkId, NodeId, Requester};
pub use iommu::{DomainId, Iommu, IommuError};
pub use layout::{BarKind, BarSpec, EndpointLayout, LayoutError, SriovSpec};
pub use multicast::MulticastError;
pub use ntb::{ClusterNodeId, LutTarget, NtbAdapter, NtbError, NtbMapping, NtbTableSizes};
pub use route::{Access, Branch, Route, RouteError, Target, Translation};
pub use spec::{parse_scenario, ClusterSpec, ConfiguredSize, PcieSpec, ScenarioError};
pub use sriov::{vf_name, Function, SriovError, VirtualFunctions};
pub use topology::{Dir, Endpoint, Hop, Host, Link, LinkKind, Node, NodeKind};
pub use units::{LinkError, LinkSpec, SizeError, SizeValueError};
