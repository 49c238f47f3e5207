//! Address spaces. One newtype per space so that one kind cannot be passed for another.
//!
//! - [`BusAddr`]: an address as a requester puts it into a TLP inside one host's PCIe domain.
//!   For a CPU it is the physical address; for a device it is an I/O virtual address when the
//!   host IOMMU is on, otherwise also a physical address.
//! - [`PhysAddr`]: a host-physical address, after IOMMU translation.
//! - [`GuestPhysAddr`]: a guest-physical address, as the OS of a virtual machine sees its RAM.
//!   It names a place in the VM's address space only; which host page backs it is known to
//!   the hypervisor's translation (`smartio_host::guest::GuestMemory`), never to the address.
//!
//! Conversions between them are explicit and live where the translation is modelled (the
//! IOMMU in the fabric, a VM's guest memory in the host OS model); there is no `From` between
//! two address spaces.

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
address_type!(
    /// A guest-physical address: RAM as a virtual machine's OS sees it. Becomes a
    /// [`PhysAddr`] only through the VM's guest-memory translation.
    GuestPhysAddr
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_space_formats_with_its_name_in_debug_and_bare_hex_in_display() {
        assert_eq!(
            format!("{:?}", GuestPhysAddr(0x1000)),
            "GuestPhysAddr(0x1000)"
        );
        assert_eq!(format!("{}", GuestPhysAddr(0x1000)), "0x1000");
        assert_eq!(format!("{:?}", PhysAddr(0x20)), "PhysAddr(0x20)");
        assert_eq!(format!("{:?}", BusAddr(0x20)), "BusAddr(0x20)");
    }

    #[test]
    fn checked_add_reports_overflow_instead_of_wrapping() {
        assert_eq!(GuestPhysAddr(u64::MAX).checked_add(1), None);
        assert_eq!(GuestPhysAddr(8).checked_add(8), Some(GuestPhysAddr(16)));
    }
}
