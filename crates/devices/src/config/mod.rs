//! A function's configuration space: the type-0 header built from its layout and assigned
//! BARs, and capability lists built from capability types (by default a PCI Express
//! capability and, optionally, MSI-X).
//!
//! - [`registers`]: values with a write mask and a write-one-to-clear mask per byte; every
//!   write goes through it.
//! - [`bar`]: BAR registers whose masks answer sizing (all-ones reads back the size).
//! - [`capability`]: the [`Capability`] / [`ExtendedCapability`] traits, the
//!   [`CapabilityList`] builder that lays them out and links them, and the list walks.
//! - [`caps`]: the capability types — [`PciExpress`], [`Msix`], [`Msi`],
//!   [`PowerManagement`], [`DeviceSerialNumber`], [`SrIov`] (in [`sriov`], with the
//!   routing-id and VF BAR arithmetic a PF's VFs need).
//! - [`functions`]: the configuration spaces of an SR-IOV device's PF and VFs, with the VF
//!   rules, and the handlers that make VFs exist when the PF enables them.
//!
//! Invariant: only the bits a real function lets software change are writable — in the
//! header the command register's memory-space, bus-master and INTx-disable bits, the
//! interrupt line, the BARs' address bits above their size, and the Status register's error
//! bits (write one to clear); in capabilities what each type declares. BARs start at the
//! addresses firmware (the fabric's enumeration) assigned; routing keeps using those (see
//! [`bar`]).

pub mod bar;
pub mod capability;
pub mod caps;
pub mod functions;
pub mod registers;
pub mod sriov;

pub use bar::VirtualBars;
pub use capability::{
    walk, walk_extended, Capability, CapabilityError, CapabilityList, ExtendedCapability,
};
pub use caps::{
    DeviceSerialNumber, Msi, Msix, MsixLayout, PciExpress, PowerManagement, SrIov, SrIovLayout,
};
pub use functions::{FunctionSpace, PfConfig, SrIovFunctions, VfConfig};
pub use registers::{Accept, RegisterBlock};
pub use sriov::{SrIovSettings, VfBar};

use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{BarKind, EndpointLayout};
use smartio_platform::pci::{self, cap, command, ext_cap, msix};
use smartio_platform::ConfigHandler;
use std::cell::RefCell;

/// A function's configuration space.
#[derive(Debug)]
pub struct ConfigSpace {
    registers: RefCell<RegisterBlock>,
    /// The BARs the function implements: (index, kind).
    bars: Vec<(u8, BarKind)>,
    /// Where the MSI-X capability is, if the function has one.
    msix_at: Option<u16>,
}

impl ConfigSpace {
    /// The configuration space of a function with `layout`, whose BARs were assigned `bars`:
    /// a PCI Express capability followed, when `msix` is given, by an MSI-X capability.
    pub fn new(layout: &EndpointLayout, bars: &[AssignedBar], msix: Option<MsixLayout>) -> Self {
        let mut list = CapabilityList::new().with(PciExpress);
        if let Some(m) = msix {
            list = list.with(Msix(m));
        }
        // Two capabilities of 60 and 12 bytes always fit in the 192 bytes of the list.
        Self::with_capabilities(layout, bars, &list)
            .expect("a PCI Express and an MSI-X capability fit in the standard capability space")
    }

    /// The configuration space of a function with `layout`, whose BARs were assigned `bars`,
    /// exposing the capabilities of `list` in that order.
    pub fn with_capabilities(
        layout: &EndpointLayout,
        bars: &[AssignedBar],
        list: &CapabilityList,
    ) -> Result<Self, CapabilityError> {
        let mut r = RegisterBlock::new(usize::from(pci::CONFIG_SPACE_SIZE));
        r.set16(pci::VENDOR_ID, layout.vendor_id);
        r.set16(pci::DEVICE_ID, layout.device_id);
        r.writable16(
            pci::COMMAND,
            command::MEMORY_SPACE | command::BUS_MASTER | command::INTX_DISABLE,
        );
        r.clear_on_one16(pci::STATUS, pci::STATUS_ERRORS);
        r.set(pci::REVISION, &[1]);
        r.set(pci::CLASS, &layout.class_code.to_le_bytes()[..3]);
        r.set16(pci::SUBSYSTEM_VENDOR_ID, layout.vendor_id);
        r.set16(pci::SUBSYSTEM_ID, layout.device_id);
        for b in bars {
            bar::lay(&mut r, b);
        }
        r.writable8(pci::INTERRUPT_LINE, u8::MAX);
        // Legacy INTx: every function has pin INTA (read-only); drivers here use MSI-X.
        r.set(pci::INTERRUPT_PIN, &[1]);
        let placement = list.lay_out(&mut r)?;
        Ok(Self {
            registers: RefCell::new(r),
            bars: bars.iter().map(|b| (b.index, b.kind)).collect(),
            msix_at: placement.find(cap::MSIX),
        })
    }

    fn get16(&self, at: u16) -> u16 {
        self.registers.borrow().get16(at)
    }

    fn get32(&self, at: u16) -> u32 {
        self.registers.borrow().get32(at)
    }

    /// The command register.
    pub fn command(&self) -> u16 {
        self.get16(pci::COMMAND)
    }

    /// Whether software allowed the function to issue DMA.
    pub fn bus_master(&self) -> bool {
        self.command() & command::BUS_MASTER != 0
    }

    /// The MSI-X layout, if the function has the capability (read from its registers).
    pub fn msix_layout(&self) -> Option<MsixLayout> {
        let at = self.msix_at?;
        let table = self.get32(at + msix::TABLE);
        let pba = self.get32(at + msix::PBA);
        Some(MsixLayout {
            vectors: (self.get16(at + msix::CONTROL) & msix::TABLE_SIZE) + 1,
            table_bar: (table & msix::BIR) as u8,
            table_offset: table & !msix::BIR,
            pba_bar: (pba & msix::BIR) as u8,
            pba_offset: pba & !msix::BIR,
        })
    }

    /// The interrupt line software routed the function's INTx to, when INTx is how it
    /// interrupts: MSI-X off, Command.INTX_DISABLE clear, and a line written (0xFF means
    /// none, the reset value of INTERRUPT_LINE is 0 — also none here).
    pub fn intx_line(&self) -> Option<u8> {
        if self.msix_active() || self.command() & command::INTX_DISABLE != 0 {
            return None;
        }
        let line = self.registers.borrow().get8(pci::INTERRUPT_LINE);
        smartio_platform::msi::INTX_LINES
            .contains(&line)
            .then_some(line)
    }

    /// Whether MSI-X is enabled and not function-masked.
    pub fn msix_active(&self) -> bool {
        self.msix_at.is_some_and(|at| {
            let c = self.get16(at + msix::CONTROL);
            c & msix::ENABLE != 0 && c & msix::FUNCTION_MASK == 0
        })
    }

    /// The base address BAR `index` holds, if the function implements it. While software
    /// sizes the BAR this is the size mask, as the function's decoder would see it.
    pub fn bar_base(&self, index: u8) -> Option<u64> {
        let &(_, kind) = self.bars.iter().find(|(i, _)| *i == index)?;
        Some(bar::base(&self.registers.borrow(), index, kind))
    }

    /// The offset of the first standard capability with `id`, found by walking the list.
    pub fn capability(&self, id: u8) -> Option<u16> {
        let r = self.registers.borrow();
        walk(|at| r.get8(at))
            .into_iter()
            .find(|(i, _)| *i == id)
            .map(|(_, at)| at)
    }

    /// The SR-IOV capability as software programmed it (NumVFs, VF Enable, VF MSE, the VF
    /// BARs' bases), if the function is a PF with one; found by walking the extended list.
    pub fn sriov(&self) -> Option<SrIovSettings> {
        let at = self.extended_capability(ext_cap::SRIOV)?;
        Some(SrIovSettings::read(&self.registers.borrow(), at))
    }

    /// The offset of the first extended capability with `id`, found by walking the list.
    pub fn extended_capability(&self, id: u16) -> Option<u16> {
        let r = self.registers.borrow();
        walk_extended(|at| r.get32(at))
            .into_iter()
            .find(|(i, _)| *i == id)
            .map(|(_, at)| at)
    }
}

impl ConfigHandler for ConfigSpace {
    fn config_read(&self, offset: u16, buf: &mut [u8]) {
        self.registers.borrow().read(offset, buf);
    }

    fn config_write(&self, offset: u16, data: &[u8]) {
        self.registers.borrow_mut().write(offset, data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_fabric::BarSpec;
    use smartio_platform::BusAddr;

    fn layout() -> EndpointLayout {
        EndpointLayout {
            vendor_id: 0x8086,
            device_id: 0x2701,
            class_code: crate::nvme::spec::CLASS_CODE,
            description: String::new(),
            bars: vec![BarSpec {
                index: 0,
                size: 16 << 10,
                kind: BarKind::Mem64,
            }],
            sriov: None,
        }
    }

    fn bars() -> [AssignedBar; 1] {
        [AssignedBar {
            index: 0,
            kind: BarKind::Mem64,
            base: BusAddr(0x38_0000_4000),
            size: 16 << 10,
        }]
    }

    const MSIX: MsixLayout = MsixLayout {
        vectors: 32,
        table_bar: 0,
        table_offset: 0x2000,
        pba_bar: 0,
        pba_offset: 0x3000,
    };

    fn space() -> ConfigSpace {
        ConfigSpace::new(&layout(), &bars(), Some(MSIX))
    }

    #[test]
    fn header_reports_ids_class_and_assigned_bar() {
        let c = space();
        let mut b = [0u8; 4];
        c.config_read(pci::VENDOR_ID, &mut b);
        assert_eq!(b, [0x86, 0x80, 0x01, 0x27]);
        c.config_read(pci::CLASS, &mut b[..3]);
        assert_eq!(&b[..3], &[0x02, 0x08, 0x01]);
        assert_eq!(c.bar_base(0), Some(0x38_0000_4000));
        assert_eq!(c.bar_base(1), None, "the upper half of BAR0 is not a BAR");
        assert_eq!(c.bar_base(2), None);
    }

    #[test]
    fn sizing_a_bar_reads_back_its_size_and_writing_the_base_back_restores_it() {
        let c = space();
        c.config_write(pci::BAR0, &[0xff; 8]);
        let mut b = [0u8; 8];
        c.config_read(pci::BAR0, &mut b);
        assert_eq!(u64::from_le_bytes(b), !((16u64 << 10) - 1) | 0b100);
        c.config_write(pci::BAR0, &0x38_0000_4000u64.to_le_bytes());
        assert_eq!(c.bar_base(0), Some(0x38_0000_4000));
    }

    #[test]
    fn bus_mastering_is_off_until_software_sets_its_bit_and_off_again_once_cleared() {
        let c = space();
        assert!(!c.bus_master(), "off after reset");
        c.config_write(pci::COMMAND, &command::MEMORY_SPACE.to_le_bytes());
        assert!(!c.bus_master(), "memory decoding alone does not allow DMA");
        c.config_write(
            pci::COMMAND,
            &(command::MEMORY_SPACE | command::BUS_MASTER).to_le_bytes(),
        );
        assert!(c.bus_master());
        c.config_write(pci::COMMAND, &command::INTX_DISABLE.to_le_bytes());
        assert!(!c.bus_master(), "cleared again");
    }

    #[test]
    fn intx_is_the_routed_line_only_while_neither_disabled_nor_replaced_by_msix() {
        let c = space();
        let route = |line: u8| c.config_write(pci::INTERRUPT_LINE, &[line]);
        assert_eq!(c.intx_line(), None, "no line routed after reset");
        route(20);
        assert_eq!(c.intx_line(), Some(20));
        route(0xff);
        assert_eq!(c.intx_line(), None, "0xFF: no line");
        route(15);
        assert_eq!(c.intx_line(), None, "below the lines the platform routes");
        route(20);
        c.config_write(pci::COMMAND, &command::INTX_DISABLE.to_le_bytes());
        assert_eq!(c.intx_line(), None, "disabled in the command register");
        c.config_write(pci::COMMAND, &0u16.to_le_bytes());
        assert_eq!(c.intx_line(), Some(20));
        let at = c.capability(cap::MSIX).expect("MSI-X");
        c.config_write(at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        assert_eq!(c.intx_line(), None, "MSI-X on");
    }

    #[test]
    fn only_command_and_msix_control_bits_are_writable() {
        let c = space();
        let at = c.capability(cap::MSIX).expect("MSI-X");
        c.config_write(pci::COMMAND, &0xffffu16.to_le_bytes());
        assert_eq!(
            c.command(),
            command::MEMORY_SPACE | command::BUS_MASTER | command::INTX_DISABLE
        );
        assert!(c.bus_master());
        assert!(!c.msix_active());
        c.config_write(at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        assert!(c.msix_active());
        let mut ctl = [0u8; 2];
        c.config_read(at + msix::CONTROL, &mut ctl);
        assert_eq!(
            u16::from_le_bytes(ctl),
            msix::ENABLE | 31,
            "table size is read-only"
        );
        c.config_write(
            at + msix::CONTROL,
            &(msix::ENABLE | msix::FUNCTION_MASK).to_le_bytes(),
        );
        assert!(!c.msix_active());
        c.config_write(pci::VENDOR_ID, &[0, 0]);
        assert_eq!(c.get16(pci::VENDOR_ID), 0x8086);
        c.config_write(pci::STATUS, &[0xff, 0xff]);
        assert_eq!(
            c.get16(pci::STATUS),
            pci::STATUS_CAP_LIST,
            "CapList is read-only"
        );
    }

    #[test]
    fn the_default_list_is_pci_express_then_msix_found_by_walking() {
        let c = space();
        let r = c.registers.borrow();
        let found: Vec<u8> = walk(|at| r.get8(at))
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(found, vec![cap::PCIE, cap::MSIX]);
        drop(r);
        assert_eq!(c.msix_layout(), Some(MSIX));
        let plain = ConfigSpace::new(&layout(), &bars(), None);
        assert_eq!(plain.capability(cap::MSIX), None);
        assert_eq!(plain.msix_layout(), None);
        assert!(!plain.msix_active());
    }

    #[test]
    fn a_function_with_more_capabilities_exposes_them_all() {
        let list = CapabilityList::new()
            .with(PciExpress)
            .with(PowerManagement)
            .with(Msi {
                vectors: 8,
                address_64: true,
                per_vector_mask: false,
            })
            .with(Msix(MSIX))
            .with_extended(DeviceSerialNumber(0x0123_4567_89ab_cdef));
        let c = ConfigSpace::with_capabilities(&layout(), &bars(), &list).expect("fits");
        for id in [cap::PCIE, cap::POWER_MANAGEMENT, cap::MSI, cap::MSIX] {
            assert!(c.capability(id).is_some(), "capability {id:#x}");
        }
        let dsn = c
            .extended_capability(ext_cap::DEVICE_SERIAL_NUMBER)
            .expect("DSN");
        let mut serial = [0u8; 8];
        c.config_read(dsn + 4, &mut serial);
        assert_eq!(u64::from_le_bytes(serial), 0x0123_4567_89ab_cdef);
        let at = c.capability(cap::MSIX).expect("MSI-X");
        c.config_write(at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        assert!(c.msix_active(), "MSI-X found wherever the list put it");
    }

    #[test]
    fn a_pf_driver_reads_back_what_it_programmed_in_the_sriov_capability() {
        use smartio_fabric::sriov::vf_bdf as sriov_vf;
        use smartio_platform::pci::sriov;
        use smartio_platform::Bdf;
        let list = CapabilityList::new()
            .with(PciExpress)
            .with(Msix(MSIX))
            .with_extended(DeviceSerialNumber(7))
            .with_extended(SrIov(SrIovLayout {
                total_vfs: 4,
                first_vf_offset: 4,
                vf_stride: 2,
                vf_device_id: 0x2702,
                vf_bars: vec![BarSpec {
                    index: 0,
                    size: 16 << 10,
                    kind: BarKind::Mem64,
                }],
            }));
        let c = ConfigSpace::with_capabilities(&layout(), &bars(), &list).expect("fits");
        assert_eq!(space().sriov(), None, "not a PF");
        let at = c.extended_capability(ext_cap::SRIOV).expect("SR-IOV");
        c.config_write(at + sriov::NUM_VFS, &3u16.to_le_bytes());
        c.config_write(at + sriov::VF_BAR0, &0x38_0100_0000u64.to_le_bytes());
        c.config_write(
            at + sriov::CONTROL,
            &(sriov::VF_ENABLE | sriov::VF_MSE).to_le_bytes(),
        );
        let s = c.sriov().expect("a PF");
        assert_eq!(
            (s.enabled_vfs(), s.total_vfs, s.vf_device_id),
            (3, 4, 0x2702)
        );
        let bar0 = s.vf_bar(0).expect("VF BAR0");
        assert_eq!((bar0.base, bar0.size), (BusAddr(0x38_0100_0000), 16 << 10));
        // What the registers say, the fabric's arithmetic turns into routing ids.
        let read = smartio_fabric::SriovSpec {
            total_vfs: s.total_vfs,
            first_vf_offset: s.first_vf_offset,
            vf_stride: s.vf_stride,
            vf_device_id: s.vf_device_id,
            vf_bars: Vec::new(),
        };
        let pf = Bdf::new(2, 0, 0);
        assert_eq!(sriov_vf(pf, &read, 1), Some(Bdf::new(2, 0, 4)));
        assert_eq!(sriov_vf(pf, &read, 3), Some(Bdf::new(2, 1, 0)));
        assert_eq!(
            c.bar_base(0),
            Some(0x38_0000_4000),
            "the PF's own BAR is apart"
        );
    }
}
