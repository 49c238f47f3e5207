//! Address spaces. One newtype per space so that one kind cannot be passed for another.
//!
//! - [`BusAddr`]: an address as a requester puts it into a TLP inside one host's PCIe domain.
//!   For a CPU it is the physical address; for a device it is an I/O virtual address when the
//!   host IOMMU is on, otherwise also a physical address.
//! - [`PhysAddr`]: a host-physical address, after IOMMU translation.
//!
//! Conversions between the two are explicit and live where the translation is modelled
//! (the IOMMU in the fabric).

use serde::Serialize;
use std::fmt;

/// The 4 KiB page of host memory: the granule of RAM allocation and of IOMMU mappings, and
/// NVMe's memory page size as the drivers configure it (CC.MPS = 0, 4 KiB << 0).
pub const PAGE_SIZE: u64 = 4096;

macro_rules! address_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// The raw 64-bit value.
            pub const fn get(self) -> u64 {
                self.0
            }

            /// This address plus `bytes`, or `None` on overflow.
            pub fn checked_add(self, bytes: u64) -> Option<Self> {
                self.0.checked_add(bytes).map(Self)
            }

            /// This address plus `bytes`. Panics on overflow, which would be an emulator bug.
            #[must_use]
            pub const fn offset(self, bytes: u64) -> Self {
                Self(self.0 + bytes)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#x})"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

address_type!(
    /// An address in a host's PCIe domain as a requester issues it.
    BusAddr
);
address_type!(
    /// A host-physical address (RAM or MMIO), after any IOMMU translation.
    PhysAddr
);
