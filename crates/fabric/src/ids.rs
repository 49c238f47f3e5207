//! Identifiers of fabric objects and PCI requester ids.

use serde::Serialize;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index into the fabric's table.
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_type!(
    /// A host (root complex, RAM, IOMMU and the PCIe tree below it).
    HostId
);
index_type!(
    /// A node of the topology graph: root complex, switch chip, endpoint, NTB, cluster switch.
    NodeId
);
index_type!(
    /// A link between two nodes (a slot, a cable, a chip-internal connection).
    LinkId
);
index_type!(
    /// An endpoint function (a device or an NTB adapter's function).
    EndpointId
);
index_type!(
    /// An NTB adapter: the index in the fabric's adapter table.
    AdapterId
);

/// A multicast group of the cluster switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct GroupId(pub u32);

/// A PCI bus/device/function triple, defined with the platform contract (device models name
/// functions by it too) and re-exported here where the fabric assigns them.
pub use smartio_platform::Bdf;

/// Who issues a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Requester {
    /// A CPU core of a host: its loads and stores enter the fabric at the root complex.
    Cpu(HostId),
    /// An endpoint's DMA engine.
    Device(EndpointId),
}
