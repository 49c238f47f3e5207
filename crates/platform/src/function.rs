//! Naming a PCI function: its bus/device/function triple, which is also its requester id
//! (PCI Express Base Specification §2.2.6.2, "Transaction Descriptor — Requester ID").
//!
//! Configuration requests are routed by this triple and every TLP a function issues carries
//! it, so SR-IOV's virtual functions and lent functions are told apart by it.
//!
//! # Serving several functions from one device model
//!
//! An SR-IOV device is one model behind several functions: its physical function (PF) and
//! virtual functions VF 1 to NumVFs (Base Specification §9). The seam a model uses:
//!
//! - **BAR accesses arrive with the function they target.** A model implements
//!   [`FunctionBarHandler`]; the cluster assembly attaches one [`OneFunction`] adapter per
//!   function (the PF's endpoint and each VF's), so the engine, which dispatches BAR
//!   accesses by endpoint, needs nothing new and the model is told [`FunctionId::Physical`]
//!   or [`FunctionId::Virtual`]`(n)` with the function's own BAR index and offset (for a VF,
//!   the offset into *its* slice of the VF BAR region). An access reaches a VF only while
//!   the PF's VF Enable and VF MSE are set and `n` is at most NumVFs: the fabric refuses the
//!   others with Unsupported Request before the model is asked.
//! - **One DMA port per function.** Each function is a requester of its own: a VF's port
//!   stamps the VF's requester id on every TLP, so the host IOMMU translates it in the VF's
//!   domain and an NTB's requester-id table must hold the VF, not the PF. A model takes the
//!   port of each function it serves (`Machine::device` of the function's endpoint) and
//!   issues a function's DMA on that function's port only.
//! - **One MSI-X table per function.** Every function has its own MSI-X capability and table
//!   (a VF's lives in one of its own BARs), programmed by the driver bound to it; a model
//!   keeps one table per function and signals a function's vectors through that function's
//!   port.
//! - **Configuration space per function.** The PF's configuration space holds the SR-IOV
//!   capability (and reports [`crate::config::SrIovControl`]); each VF has one of its own
//!   with the VF rules (Vendor ID reads 0xFFFF, Device ID is the VF Device ID, its
//!   Command.Memory Space is ignored, no SR-IOV capability). Configuration requests to a VF
//!   that does not exist read all-ones and are not delivered.

use crate::port::{BarHandler, CompleterError};
use serde::Serialize;
use std::fmt;
use std::num::NonZeroU16;
use std::rc::Rc;

/// Which function of a device a request targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum FunctionId {
    /// The physical function (every device has one; a device without SR-IOV has only it).
    Physical,
    /// Virtual function `n`, numbered from 1 as the SR-IOV capability numbers them.
    Virtual(NonZeroU16),
}

impl FunctionId {
    /// VF `n` (1-based); `None` for 0, which names no VF.
    pub fn vf(n: u16) -> Option<FunctionId> {
        NonZeroU16::new(n).map(FunctionId::Virtual)
    }

    /// The VF number, `None` for the PF.
    pub fn vf_number(self) -> Option<u16> {
        match self {
            FunctionId::Physical => None,
            FunctionId::Virtual(n) => Some(n.get()),
        }
    }
}

impl fmt::Display for FunctionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FunctionId::Physical => f.write_str("PF"),
            FunctionId::Virtual(n) => write!(f, "VF {n}"),
        }
    }
}

/// How a model that serves several functions answers the loads and stores reaching any of
/// their BARs: [`BarHandler`] with the function named. The same rules hold: the handler
/// runs inside the engine and must not wait.
pub trait FunctionBarHandler {
    /// A memory read of `buf.len()` bytes at `offset` into BAR `bar` of `function`.
    fn function_mmio_read(
        &self,
        function: FunctionId,
        bar: u8,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), CompleterError>;

    /// A memory write of `data` at `offset` into BAR `bar` of `function`.
    fn function_mmio_write(
        &self,
        function: FunctionId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), CompleterError>;
}

/// A [`BarHandler`] for one function of a multi-function model: what the cluster assembly
/// attaches to that function's endpoint.
pub struct OneFunction<H: ?Sized> {
    model: Rc<H>,
    function: FunctionId,
}

impl<H: ?Sized> OneFunction<H> {
    /// `model`'s handler for `function`.
    pub fn new(model: Rc<H>, function: FunctionId) -> Self {
        Self { model, function }
    }

    /// The function it answers for.
    pub fn function(&self) -> FunctionId {
        self.function
    }
}

impl<H: FunctionBarHandler + ?Sized> BarHandler for OneFunction<H> {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        self.model
            .function_mmio_read(self.function, bar, offset, buf)
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        self.model
            .function_mmio_write(self.function, bar, offset, data)
    }
}

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

    struct Echo;

    impl FunctionBarHandler for Echo {
        fn function_mmio_read(
            &self,
            function: FunctionId,
            bar: u8,
            offset: u64,
            buf: &mut [u8],
        ) -> Result<(), CompleterError> {
            buf[0] = function.vf_number().map_or(0, |n| n as u8);
            buf[1] = bar;
            buf[2] = offset as u8;
            Ok(())
        }

        fn function_mmio_write(
            &self,
            function: FunctionId,
            _bar: u8,
            _offset: u64,
            _data: &[u8],
        ) -> Result<(), CompleterError> {
            match function {
                FunctionId::Physical => Ok(()),
                FunctionId::Virtual(_) => Err(CompleterError::ReadOnly),
            }
        }
    }

    #[test]
    fn a_one_function_adapter_names_its_function_to_the_model() {
        let model = Rc::new(Echo);
        let vf3 = OneFunction::new(model.clone(), FunctionId::vf(3).expect("3 is a VF"));
        let mut buf = [0u8; 3];
        vf3.mmio_read(2, 0x40, &mut buf).expect("echo answers");
        assert_eq!(buf, [3, 2, 0x40]);
        assert_eq!(vf3.mmio_write(0, 0, &[0]), Err(CompleterError::ReadOnly));
        let pf = OneFunction::new(model, FunctionId::Physical);
        assert_eq!(pf.mmio_write(0, 0, &[0]), Ok(()));
        assert_eq!(FunctionId::vf(0), None);
        assert_eq!(pf.function().to_string(), "PF");
        assert_eq!(vf3.function().to_string(), "VF 3");
    }

    #[test]
    fn requester_id_packs_bus_device_function() {
        assert_eq!(Bdf::new(0x02, 0x1f, 7).requester_id(), 0x02ff);
        assert_eq!(Bdf::new(1, 0, 0).to_string(), "01:00.0");
        for id in [0, 0x02ff, 0x1234, u16::MAX] {
            assert_eq!(Bdf::from_requester_id(id).requester_id(), id);
        }
    }
}
