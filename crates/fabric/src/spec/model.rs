//! The validated description of a cluster that [`super::parse_scenario`] produces, and the
//! error it reports.

use crate::units::LinkSpec;
use thiserror::Error;

/// A scenario that failed to parse or validate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}{}: {message}", line.map_or_else(String::new, |l| format!(":{l}")))]
pub struct ScenarioError {
    /// The scenario file (or shipped scenario name).
    pub file: String,
    /// 1-based line of the offending entry, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Where in a scenario file an entry was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceLoc {
    /// The file (or shipped scenario name).
    pub file: String,
    /// 1-based line.
    pub line: usize,
}

impl SourceLoc {
    /// An error at this location. The message is kept as text: a scenario error is a
    /// message at a file and line, whatever check (a size, a range, a name) made it.
    pub fn error(&self, message: impl std::fmt::Display) -> ScenarioError {
        ScenarioError {
            file: self.file.clone(),
            line: Some(self.line),
            message: message.to_string(),
        }
    }
}

/// A validated cluster description.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    /// Scenario name.
    pub name: String,
    /// One line saying what the scenario is.
    pub description: String,
    /// Hosts, in file order (repeated hosts expanded in index order).
    pub hosts: Vec<HostSpec>,
    /// Cluster switches.
    pub cluster_switches: Vec<ClusterSwitchSpec>,
    /// Cables between NTB adapters and cluster switches.
    pub cables: Vec<CableSpec>,
    /// Transaction-layer sizes the scenario configures (`[pcie]`), if any.
    pub pcie: PcieSpec,
}

/// Transaction-layer sizes a scenario configures for its whole cluster (`[pcie]`): what the
/// firmware of the system it describes programmed into every function's Device Control
/// register (PCIe base spec §7.5.3.4). Where a size is not given, the calibration's applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PcieSpec {
    /// Max_Payload_Size: the largest payload of a write or a completion.
    pub max_payload_size: Option<ConfiguredSize>,
    /// Max_Read_Request_Size: the largest read request.
    pub max_read_request_size: Option<ConfiguredSize>,
}

/// A size in bytes as a scenario configures it, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredSize {
    /// Bytes: a power of two in [`super::limits::TLP_SIZE`].
    pub bytes: u64,
    /// Where the scenario gives it.
    pub loc: SourceLoc,
}

/// A host: a root complex with RAM and an optional IOMMU, and the components below it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpec {
    /// Unique host name.
    pub name: String,
    /// Installed RAM in bytes.
    pub ram: u64,
    /// Whether the host IOMMU translates device DMA.
    pub iommu: bool,
    /// CPU cores available to agents.
    pub cores: u32,
    /// Where the host's firmware starts the 64-bit MMIO region (`mmio64`); `None`: the
    /// first 1 TiB boundary above RAM.
    pub mmio64: Option<u64>,
    /// Components, ordered so that every parent comes before its children.
    pub components: Vec<ComponentSpec>,
    /// Virtual machines the host runs, in scenario order (named `host/vm`).
    pub vms: Vec<VmSpec>,
    /// Where the host was declared.
    pub loc: SourceLoc,
}

/// A virtual machine of a host: guest RAM backed by pages of the host's RAM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSpec {
    /// Name, unique among the host's VMs.
    pub name: String,
    /// Guest RAM in bytes: a whole number of pages, at most the host's RAM.
    pub memory: u64,
    /// Bytes per host page backing it: 4 KiB or 2 MiB.
    pub page_bytes: u64,
    /// The functions passed through to it, as `lender:device` (by SmartIO's MDEV parent)
    /// or `device` of the VM's own host (by VFIO), each with the line it is written on.
    pub devices: Vec<(String, SourceLoc)>,
    /// Where the VM was declared.
    pub loc: SourceLoc,
}

/// Where a component is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// A root port of the host's root complex (one root port per such component).
    RootPort,
    /// A downstream port of the switch at this index in [`HostSpec::components`].
    Switch(usize),
}

/// A PCIe component inside a host.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentSpec {
    /// Name, unique within the host.
    pub name: String,
    /// Attachment point.
    pub parent: Parent,
    /// The link to the parent.
    pub link: LinkSpec,
    /// Whether that link is an external cable (a transparent target adapter cabled to its
    /// host adapter, as the papers' HIB68 pair): it then propagates as the NTB cables do.
    pub cabled: bool,
    /// What it is.
    pub kind: ComponentKind,
    /// Where it was declared.
    pub loc: SourceLoc,
}

/// The kinds of component.
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentKind {
    /// A transparent switch chip (expansion-chassis switch, transparent adapter card).
    Switch {
        /// Chip model, looked up in the calibration.
        chip: String,
    },
    /// An endpoint device.
    Device {
        /// Device kind (`nvme`, `dma`, `gpu`, ...), interpreted by the device layer.
        kind: String,
        /// Kind-specific parameters.
        params: toml::Table,
        /// The SmartIO id the scenario gives it (`fdid = 0xc0c00`); SmartIO numbers the
        /// others itself. Unique in the scenario.
        fdid: Option<u32>,
    },
    /// A non-transparent bridge adapter.
    Ntb(NtbSpec),
}

/// An NTB adapter's resources.
#[derive(Debug, Clone, PartialEq)]
pub struct NtbSpec {
    /// Chip model.
    pub chip: String,
    /// Size of the BAR window through which remote memory is reached.
    pub window: u64,
    /// Look-up-table entries the window is split into (default from calibration).
    pub lut_entries: Option<u32>,
    /// Requester-id table entries (default from calibration).
    pub requester_ids: Option<u32>,
}

/// A cluster switch (e.g. an MXS824-like box).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSwitchSpec {
    /// Unique name.
    pub name: String,
    /// Chip model.
    pub chip: String,
    /// Port count.
    pub ports: u32,
    /// Where it was declared.
    pub loc: SourceLoc,
}

/// One end of a cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CableEnd {
    /// An NTB adapter: host index and component index.
    Ntb { host: usize, component: usize },
    /// A cluster switch index.
    ClusterSwitch(usize),
}

/// An external PCIe cable.
#[derive(Debug, Clone, PartialEq)]
pub struct CableSpec {
    /// One end.
    pub a: CableEnd,
    /// The other end.
    pub b: CableEnd,
    /// Link generation and width.
    pub link: LinkSpec,
    /// Where it was declared.
    pub loc: SourceLoc,
}
