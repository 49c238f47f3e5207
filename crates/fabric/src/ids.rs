//! Identifiers of fabric objects and PCI requester ids.

use serde::Serialize;
use std::fmt;

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

/// A PCI bus/device/function triple; as a requester id it names the source of a TLP.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Bdf {
    /// Bus number.
    pub bus: u8,
    /// Device number, 0 to 31.
    pub dev: u8,
    /// Function number, 0 to 7.
    pub func: u8,
}

impl Bdf {
    /// Bus/device/function.
    pub const fn new(bus: u8, dev: u8, func: u8) -> Self {
        Self { bus, dev, func }
    }

    /// The 16-bit requester id (bus << 8 | dev << 3 | func).
    pub const fn requester_id(self) -> u16 {
        (self.bus as u16) << 8 | (self.dev as u16) << 3 | self.func as u16
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.dev, self.func)
    }
}

impl fmt::Debug for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Who issues a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Requester {
    /// A CPU core of a host: its loads and stores enter the fabric at the root complex.
    Cpu(HostId),
    /// An endpoint's DMA engine.
    Device(EndpointId),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requester_id_packs_bus_device_function() {
        assert_eq!(Bdf::new(0x02, 0x1f, 7).requester_id(), 0x02ff);
        assert_eq!(Bdf::new(1, 0, 0).to_string(), "01:00.0");
    }
}
