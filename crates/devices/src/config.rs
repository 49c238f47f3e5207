//! A function's configuration space: the type-0 header built from its layout and assigned
//! BARs, a PCI Express capability, and optionally an MSI-X capability.
//!
//! Invariant: only the bits a real function lets software change are writable — the command
//! register's memory-space, bus-master and INTx-disable bits, the interrupt line, and MSI-X's
//! enable and function-mask bits. BARs read back the addresses the firmware (the fabric's
//! enumeration) assigned; sizing writes are ignored.

use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{BarKind, EndpointLayout};
use smartio_platform::pci::{self, cap, command, msix};
use smartio_platform::ConfigHandler;
use std::cell::RefCell;

const SIZE: usize = 4096;
const PCIE_CAP: u16 = 0x40;
const MSIX_CAP: u16 = 0x60;

/// Where a function keeps its MSI-X table and pending-bit array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsixLayout {
    /// Number of vectors (1..=2048).
    pub vectors: u16,
    /// BAR holding the table.
    pub table_bar: u8,
    /// Offset of the table in that BAR (8-byte aligned).
    pub table_offset: u32,
    /// BAR holding the pending-bit array.
    pub pba_bar: u8,
    /// Offset of the pending-bit array (8-byte aligned).
    pub pba_offset: u32,
}

/// A function's configuration space.
#[derive(Debug)]
pub struct ConfigSpace {
    bytes: RefCell<Vec<u8>>,
    msix: Option<MsixLayout>,
}

impl ConfigSpace {
    /// The configuration space of a function with `layout`, whose BARs were assigned `bars`.
    pub fn new(layout: &EndpointLayout, bars: &[AssignedBar], msix: Option<MsixLayout>) -> Self {
        let mut b = vec![0u8; SIZE];
        put16(&mut b, pci::VENDOR_ID, layout.vendor_id);
        put16(&mut b, pci::DEVICE_ID, layout.device_id);
        put16(&mut b, pci::STATUS, pci::STATUS_CAP_LIST);
        b[pci::REVISION as usize] = 1;
        let class = layout.class_code.to_le_bytes();
        b[pci::CLASS as usize..pci::CLASS as usize + 3].copy_from_slice(&class[..3]);
        put16(&mut b, pci::SUBSYSTEM_VENDOR_ID, layout.vendor_id);
        put16(&mut b, pci::SUBSYSTEM_ID, layout.device_id);
        for bar in bars {
            let at = pci::BAR0 + 4 * u16::from(bar.index);
            let flags: u64 = match bar.kind {
                BarKind::Mem32 => 0,
                BarKind::Mem64 => 0b100,
                BarKind::Mem64Prefetch => 0b1100,
            };
            let value = bar.base.get() | flags;
            put32(&mut b, at, value as u32);
            if !matches!(bar.kind, BarKind::Mem32) {
                put32(&mut b, at + 4, (value >> 32) as u32);
            }
        }
        // Legacy INTx: every function has pin INTA (read-only); drivers here use MSI-X.
        b[pci::INTERRUPT_PIN as usize] = 1;
        b[pci::CAPABILITIES as usize] = PCIE_CAP as u8;
        // PCI Express capability v2, endpoint; next capability MSI-X (if any).
        b[PCIE_CAP as usize] = cap::PCIE;
        b[PCIE_CAP as usize + 1] = if msix.is_some() { MSIX_CAP as u8 } else { 0 };
        put16(&mut b, PCIE_CAP + 2, 0x0002);
        if let Some(m) = msix {
            b[MSIX_CAP as usize] = cap::MSIX;
            put16(
                &mut b,
                MSIX_CAP + msix::CONTROL,
                m.vectors.saturating_sub(1) & 0x7ff,
            );
            put32(
                &mut b,
                MSIX_CAP + msix::TABLE,
                m.table_offset | u32::from(m.table_bar),
            );
            put32(
                &mut b,
                MSIX_CAP + msix::PBA,
                m.pba_offset | u32::from(m.pba_bar),
            );
        }
        Self {
            bytes: RefCell::new(b),
            msix,
        }
    }

    fn get16(&self, at: u16) -> u16 {
        let b = self.bytes.borrow();
        u16::from_le_bytes([b[at as usize], b[at as usize + 1]])
    }

    /// The command register.
    pub fn command(&self) -> u16 {
        self.get16(pci::COMMAND)
    }

    /// Whether software allowed the function to issue DMA.
    pub fn bus_master(&self) -> bool {
        self.command() & command::BUS_MASTER != 0
    }

    /// The MSI-X layout, if the function has the capability.
    pub fn msix_layout(&self) -> Option<MsixLayout> {
        self.msix
    }

    /// Whether MSI-X is enabled and not function-masked.
    pub fn msix_active(&self) -> bool {
        self.msix.is_some() && {
            let c = self.get16(MSIX_CAP + msix::CONTROL);
            c & msix::ENABLE != 0 && c & msix::FUNCTION_MASK == 0
        }
    }

    /// The base address assigned to BAR `index`, if the function has it.
    pub fn bar_base(&self, index: u8) -> Option<u64> {
        let b = self.bytes.borrow();
        let at = (pci::BAR0 + 4 * u16::from(index)) as usize;
        let lo = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if lo == 0 {
            return None;
        }
        let mut base = u64::from(lo & !0xf);
        if lo & 0b100 != 0 {
            let hi = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]);
            base |= u64::from(hi) << 32;
        }
        Some(base)
    }

    /// The write mask of one byte: which bits software may change.
    fn writable(&self, at: u16) -> u8 {
        let cmd = pci::COMMAND;
        let ctl = MSIX_CAP + msix::CONTROL;
        match at {
            a if a == cmd => (command::MEMORY_SPACE | command::BUS_MASTER) as u8,
            a if a == cmd + 1 => (command::INTX_DISABLE >> 8) as u8,
            pci::INTERRUPT_LINE => 0xff,
            a if self.msix.is_some() && a == ctl + 1 => {
                ((msix::ENABLE | msix::FUNCTION_MASK) >> 8) as u8
            }
            _ => 0,
        }
    }
}

impl ConfigHandler for ConfigSpace {
    fn config_read(&self, offset: u16, buf: &mut [u8]) {
        let b = self.bytes.borrow();
        for (i, out) in buf.iter_mut().enumerate() {
            *out = b.get(offset as usize + i).copied().unwrap_or(0);
        }
    }

    fn config_write(&self, offset: u16, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let at = offset as usize + i;
            if at >= SIZE {
                break;
            }
            let mask = self.writable(at as u16);
            let mut b = self.bytes.borrow_mut();
            b[at] = (b[at] & !mask) | (v & mask);
        }
    }
}

fn put16(b: &mut [u8], at: u16, v: u16) {
    b[at as usize..at as usize + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: u16, v: u32) {
    b[at as usize..at as usize + 4].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_fabric::BarSpec;
    use smartio_platform::BusAddr;

    fn space() -> ConfigSpace {
        let layout = EndpointLayout {
            vendor_id: 0x8086,
            device_id: 0x2701,
            class_code: crate::nvme::spec::CLASS_CODE,
            description: String::new(),
            bars: vec![BarSpec {
                index: 0,
                size: 16 << 10,
                kind: BarKind::Mem64,
            }],
        };
        let bars = [AssignedBar {
            index: 0,
            kind: BarKind::Mem64,
            base: BusAddr(0x38_0000_4000),
            size: 16 << 10,
        }];
        let msix = MsixLayout {
            vectors: 32,
            table_bar: 0,
            table_offset: 0x2000,
            pba_bar: 0,
            pba_offset: 0x3000,
        };
        ConfigSpace::new(&layout, &bars, Some(msix))
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
        assert_eq!(c.bar_base(2), None);
        // Sizing writes do not move a firmware-assigned BAR.
        c.config_write(pci::BAR0, &[0xff; 4]);
        assert_eq!(c.bar_base(0), Some(0x38_0000_4000));
    }

    #[test]
    fn only_command_and_msix_control_bits_are_writable() {
        let c = space();
        c.config_write(pci::COMMAND, &0xffffu16.to_le_bytes());
        assert_eq!(
            c.command(),
            command::MEMORY_SPACE | command::BUS_MASTER | command::INTX_DISABLE
        );
        assert!(c.bus_master());
        assert!(!c.msix_active());
        c.config_write(MSIX_CAP + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        assert!(c.msix_active());
        let mut ctl = [0u8; 2];
        c.config_read(MSIX_CAP + msix::CONTROL, &mut ctl);
        assert_eq!(
            u16::from_le_bytes(ctl),
            msix::ENABLE | 31,
            "table size is read-only"
        );
        c.config_write(
            MSIX_CAP + msix::CONTROL,
            &(msix::ENABLE | msix::FUNCTION_MASK).to_le_bytes(),
        );
        assert!(!c.msix_active());
        c.config_write(pci::VENDOR_ID, &[0, 0]);
        assert_eq!(c.get16(pci::VENDOR_ID), 0x8086);
    }
}
