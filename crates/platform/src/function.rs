//! Naming a PCI function: its bus/device/function triple, which is also its requester id
//! (PCI Express Base Specification §2.2.6.2, "Transaction Descriptor — Requester ID").
//!
//! Configuration requests are routed by this triple and every TLP a function issues carries
//! it, so SR-IOV's virtual functions and lent functions are told apart by it.

use serde::Serialize;
use std::fmt;

/// A PCI bus/device/function triple; as a requester id it names the source of a TLP.
///
/// Invariant (kept by whoever builds one — enumeration): `dev` is at most 31 and `func` at
/// most 7, so [`Bdf::requester_id`] packs without overlap.
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

    /// The function a 16-bit requester id names (the inverse of [`Bdf::requester_id`]).
    pub const fn from_requester_id(id: u16) -> Self {
        Self {
            bus: (id >> 8) as u8,
            dev: (id >> 3) as u8 & 0x1f,
            func: id as u8 & 0x7,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requester_id_packs_bus_device_function() {
        assert_eq!(Bdf::new(0x02, 0x1f, 7).requester_id(), 0x02ff);
        assert_eq!(Bdf::new(1, 0, 0).to_string(), "01:00.0");
        for id in [0, 0x02ff, 0x1234, u16::MAX] {
            assert_eq!(Bdf::from_requester_id(id).requester_id(), id);
        }
    }
}
