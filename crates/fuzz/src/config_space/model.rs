//! What software may change in the configuration space of a decoded function, written from
//! the specifications rather than from the device crate, and the checks that hold a
//! `ConfigSpace` to it.
//!
//! Per byte of the 4 KiB space the model knows:
//! - *fixed* bits no write may change (ids, class code, header type, capability ids and next
//!   pointers, BAR type bits and address bits below the BAR's size, MSI-X table locations,
//!   serial numbers, every byte outside a register);
//! - *write-one-to-clear* bits (Status errors, PCI Express Device Status, PME_Status) that no
//!   write may set;
//! - for BARs and vendor-specific capabilities, the exact rule (read-write and
//!   write-one-to-clear bits), so each write's result is known to the bit;
//! - the reset value of the bits it knows.
//!
//! Whatever the rule, a write may change only the bytes it covers, and a bit only to the
//! value written or, for a one written, from one to zero.

use super::layout::{Device, Extended, Placement, Standard};
use super::vendor::{Rules, LENGTH as VENDOR_LENGTH};
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::BarKind;
use smartio_platform::pci::{self, bar, ext_cap, msi, msix, pcie, pm};

/// Bytes of a function's configuration space.
pub const SPACE: usize = pci::CONFIG_SPACE_SIZE as usize;

/// The rules of one function's configuration space.
#[derive(Debug, Clone)]
pub struct Model {
    fixed: Vec<u8>,
    clear_on_one: Vec<u8>,
    /// (writable, write-one-to-clear) of bytes whose rule is known exactly.
    exact: Vec<Option<(u8, u8)>>,
    reset_mask: Vec<u8>,
    reset_value: Vec<u8>,
    /// The register each byte belongs to, for messages.
    what: Vec<&'static str>,
    bars: Vec<AssignedBar>,
}

impl Model {
    /// The rules of `device` with its capabilities at `placement`.
    pub fn new(device: &Device, placement: &Placement) -> Self {
        let mut m = Model {
            fixed: vec![0; SPACE],
            clear_on_one: vec![0; SPACE],
            exact: vec![None; SPACE],
            reset_mask: vec![0; SPACE],
            reset_value: vec![0; SPACE],
            what: vec!["no register"; SPACE],
            bars: device.bars.clone(),
        };
        // Outside the header, every byte is a gap (read-only zero) until a capability claims it.
        m.fixed(0x40, SPACE - 0x40, "no register");
        for a in 0x40..SPACE {
            m.reset_mask[a] = 0xff;
        }
        m.header(device, placement);
        for (i, (c, &at)) in device.standard.iter().zip(&placement.standard).enumerate() {
            let next = placement.standard.get(i + 1).copied().unwrap_or(0);
            m.standard(c, at, next);
        }
        for (i, (c, &at)) in device.extended.iter().zip(&placement.extended).enumerate() {
            let next = placement.extended.get(i + 1).copied().unwrap_or(0);
            m.extended(c, at, next);
        }
        m
    }

    /// The BAR whose first register is slot `slot`.
    pub fn bar(&self, slot: u8) -> Option<&AssignedBar> {
        self.bars.iter().find(|b| b.index == slot)
    }

    fn header(&mut self, d: &Device, p: &Placement) {
        let l = &d.layout;
        self.fixed_reset(pci::VENDOR_ID, 2, u32::from(l.vendor_id), "Vendor ID");
        self.fixed_reset(pci::DEVICE_ID, 2, u32::from(l.device_id), "Device ID");
        let errors = u32::from(pci::STATUS_ERRORS);
        self.name(pci::STATUS, 2, "Status");
        self.fixed_bits(pci::STATUS, 2, !errors);
        self.clear_bits(pci::STATUS, 2, errors);
        let cap_list = u32::from(pci::STATUS_CAP_LIST);
        let listed = if d.standard.is_empty() { 0 } else { cap_list };
        self.reset(pci::STATUS, 2, errors | cap_list, listed);
        self.fixed_reset(pci::CLASS, 3, l.class_code, "Class Code");
        self.fixed_reset(pci::HEADER_TYPE, 1, 0, "Header Type");
        for slot in 0..pci::BAR_COUNT {
            let at = pci::BAR0 + 4 * u16::from(slot);
            self.exact_u32(at, 0, 0, "BAR (not implemented)");
            self.reset(at, 4, u32::MAX, 0);
        }
        for b in &d.bars {
            self.bar_rules(b);
        }
        self.fixed_reset(0x28, 4, 0, "CardBus CIS Pointer");
        self.fixed(pci::SUBSYSTEM_VENDOR_ID, 4, "Subsystem IDs");
        self.fixed_reset(0x30, 4, 0, "Expansion ROM (not implemented)");
        let first = p.standard.first().map_or(0, |&at| u32::from(at));
        self.fixed_reset(pci::CAPABILITIES, 1, first, "Capabilities Pointer");
        self.fixed_reset(pci::CAPABILITIES + 1, 7, 0, "reserved");
        self.fixed_reset(pci::INTERRUPT_PIN, 1, 1, "Interrupt Pin");
        self.fixed(pci::INTERRUPT_PIN + 1, 2, "Min_Gnt/Max_Lat");
    }

    /// A BAR: type bits and address bits below the size read-only, those above read-write
    /// (PCI Local Bus 3.0 §6.2.5.1).
    fn bar_rules(&mut self, b: &AssignedBar) {
        let at = pci::BAR0 + 4 * u16::from(b.index);
        let mask = !(b.size - 1);
        let flags = bar_flags(b.kind);
        let value = b.base.get() | u64::from(flags);
        self.exact_u32(at, mask as u32 & !bar::FLAGS, 0, "BAR");
        self.reset(at, 4, u32::MAX, value as u32);
        if b.kind != BarKind::Mem32 {
            self.exact_u32(at + 4, (mask >> 32) as u32, 0, "BAR (upper dword)");
            self.reset(at + 4, 4, u32::MAX, (value >> 32) as u32);
        }
    }

    fn standard(&mut self, c: &Standard, at: u16, next: u16) {
        self.fixed_reset(at, 1, u32::from(c.id()), "capability id");
        self.fixed_reset(at + 1, 1, u32::from(next), "next capability pointer");
        let body = c.length() - 2;
        self.unfix(at + 2, body);
        match c {
            Standard::PciExpress => {
                self.fixed_reset(at + pcie::FLAGS, 2, 0x0002, "PCI Express Capabilities");
                self.fixed(at + pcie::DEVICE_CAPABILITIES, 4, "Device Capabilities");
                self.name(at + pcie::DEVICE_STATUS, 2, "Device Status");
                self.fixed_bits(at + pcie::DEVICE_STATUS, 2, !0x000f);
                self.clear_bits(at + pcie::DEVICE_STATUS, 2, 0x000f);
                self.reset(at + pcie::DEVICE_STATUS, 2, 0x000f, 0);
                self.fixed(at + pcie::LINK_CAPABILITIES, 4, "Link Capabilities");
                self.fixed(at + pcie::LINK_STATUS, 2, "Link Status");
                self.fixed(at + 0x24, 4, "Device Capabilities 2");
            }
            Standard::Msix(l) => {
                let rw = u32::from(msix::ENABLE | msix::FUNCTION_MASK);
                self.name(at + msix::CONTROL, 2, "MSI-X Message Control");
                self.fixed_bits(at + msix::CONTROL, 2, !rw);
                let size = u32::from(l.vectors - 1);
                self.reset(at + msix::CONTROL, 2, u32::from(u16::MAX), size);
                let table = l.table_offset | u32::from(l.table_bar);
                let pba = l.pba_offset | u32::from(l.pba_bar);
                self.fixed_reset(at + msix::TABLE, 4, table, "MSI-X Table Offset/BIR");
                self.fixed_reset(at + msix::PBA, 4, pba, "MSI-X PBA Offset/BIR");
            }
            Standard::Msi(m) => {
                let rw = u32::from(msi::ENABLE | msi::MULTIPLE_ENABLE);
                self.name(at + msi::CONTROL, 2, "MSI Message Control");
                self.fixed_bits(at + msi::CONTROL, 2, !rw);
                // Multiple Message Capable: log2 of the vectors asked for, rounded up to a
                // power of two and capped at 32 (a request for none asks for one).
                let log2 = u32::from(m.vectors.clamp(1, 32))
                    .next_power_of_two()
                    .trailing_zeros();
                let flags = log2 << msi::MULTIPLE_CAPABLE_SHIFT
                    | if m.address_64 {
                        u32::from(msi::ADDRESS_64)
                    } else {
                        0
                    }
                    | if m.per_vector_mask {
                        u32::from(msi::PER_VECTOR_MASK)
                    } else {
                        0
                    };
                self.reset(at + msi::CONTROL, 2, u32::from(u16::MAX), flags);
                self.name(at + msi::ADDRESS, 4, "MSI Message Address");
                self.fixed_bits(at + msi::ADDRESS, 1, 0b11);
                if m.per_vector_mask {
                    let pending = if m.address_64 { 0x14 } else { 0x10 };
                    self.fixed(at + pending, 4, "MSI Pending Bits");
                }
            }
            Standard::PowerManagement => {
                self.fixed(at + pm::CAPABILITIES, 2, "Power Management Capabilities");
                self.name(at + pm::CONTROL_STATUS, 2, "PMCSR");
                self.fixed_bits(at + pm::CONTROL_STATUS, 2, u32::from(pm::NO_SOFT_RESET));
                self.clear_bits(at + pm::CONTROL_STATUS, 2, u32::from(pm::PME_STATUS));
                self.reset(at + pm::CONTROL_STATUS, 2, u32::from(pm::PME_STATUS), 0);
            }
            Standard::Vendor(v) => self.vendor(&v.0, at, VENDOR_LENGTH, "vendor-specific"),
        }
    }

    fn extended(&mut self, c: &Extended, at: u16, next: u16) {
        // Both types here are version 1.
        let header = u32::from(c.id()) | 1 << 16 | u32::from(next) << ext_cap::NEXT_SHIFT;
        self.fixed_reset(at, 4, header, "extended capability header");
        self.unfix(at + 4, c.length() - 4);
        match c {
            Extended::SerialNumber(serial) => {
                self.fixed_reset(at + 4, 4, *serial as u32, "serial number");
                self.fixed_reset(at + 8, 4, (serial >> 32) as u32, "serial number");
            }
            Extended::Vendor(v) => self.vendor(&v.0, at, 4, "vendor-specific extended"),
        }
    }

    /// A vendor-specific capability's body (from `from`) follows its rules exactly.
    fn vendor(&mut self, rules: &Rules, at: u16, from: usize, what: &'static str) {
        for i in from..rules.value.len() {
            let a = usize::from(at) + i;
            self.exact[a] = Some((rules.writable[i], rules.clear_on_one[i]));
            self.reset_mask[a] = 0xff;
            self.reset_value[a] = rules.value[i];
            self.what[a] = what;
        }
    }

    fn bytes(at: u16, len: usize) -> std::ops::Range<usize> {
        let at = usize::from(at);
        at.min(SPACE)..(at + len).min(SPACE)
    }

    fn name(&mut self, at: u16, len: usize, what: &'static str) {
        for a in Self::bytes(at, len) {
            self.what[a] = what;
        }
    }

    fn fixed(&mut self, at: u16, len: usize, what: &'static str) {
        self.name(at, len, what);
        for a in Self::bytes(at, len) {
            self.fixed[a] = 0xff;
        }
    }

    fn unfix(&mut self, at: u16, len: usize) {
        for a in Self::bytes(at, len) {
            self.fixed[a] = 0;
            self.reset_mask[a] = 0;
            self.what[a] = "capability register";
        }
    }

    fn fixed_bits(&mut self, at: u16, len: usize, mask: u32) {
        for (a, m) in Self::bytes(at, len).zip(mask.to_le_bytes()) {
            self.fixed[a] |= m;
        }
    }

    fn clear_bits(&mut self, at: u16, len: usize, mask: u32) {
        for (a, m) in Self::bytes(at, len).zip(mask.to_le_bytes()) {
            self.clear_on_one[a] |= m;
        }
    }

    fn reset(&mut self, at: u16, len: usize, mask: u32, value: u32) {
        let bytes =
            Self::bytes(at, len).zip(mask.to_le_bytes().into_iter().zip(value.to_le_bytes()));
        for (a, (m, v)) in bytes {
            self.reset_mask[a] |= m;
            self.reset_value[a] = (self.reset_value[a] & !m) | (v & m);
        }
    }

    fn fixed_reset(&mut self, at: u16, len: usize, value: u32, what: &'static str) {
        self.fixed(at, len, what);
        self.reset(at, len, u32::MAX, value);
    }

    fn exact_u32(&mut self, at: u16, writable: u32, clear: u32, what: &'static str) {
        self.name(at, 4, what);
        let rules = writable.to_le_bytes().into_iter().zip(clear.to_le_bytes());
        for (a, (w, c)) in Self::bytes(at, 4).zip(rules) {
            self.exact[a] = Some((w, c));
            self.fixed[a] = !(w | c);
        }
    }

    /// Checks the space as built: every bit whose reset value the model knows has it.
    pub fn check_reset(&self, space: &[u8]) {
        for (a, &got) in space.iter().enumerate().take(SPACE) {
            let (m, want) = (self.reset_mask[a], self.reset_value[a]);
            assert!(
                (got ^ want) & m == 0,
                "byte {a:#05x} ({}) resets to {got:#04x}, expected {want:#04x} in bits {m:#04x}",
                self.what[a]
            );
        }
    }

    /// Checks the write of `data` at `offset` that turned `before` into `after` (both the
    /// whole space). Returns how many one bits it cleared by writing one.
    pub fn check_write(&self, before: &[u8], after: &[u8], offset: u16, data: &[u8]) -> u32 {
        assert!(
            before.len() == SPACE && after.len() == SPACE,
            "check_write takes whole spaces"
        );
        let covered = Self::bytes(offset, data.len());
        let outside = |range: std::ops::Range<usize>| {
            // One comparison of the untouched part; the byte only when it differs.
            if before.get(range.clone()) != after.get(range.clone()) {
                let a = range
                    .clone()
                    .find(|&a| before.get(a) != after.get(a))
                    .unwrap_or(range.start);
                panic!(
                    "a {}-byte write at {offset:#x} changed byte {a:#05x} ({}) outside it",
                    data.len(),
                    self.what.get(a).copied().unwrap_or("past the space")
                );
            }
        };
        outside(0..covered.start);
        outside(covered.end..SPACE);
        let mut cleared = 0;
        for (a, &v) in covered.zip(data) {
            let (old, new, what) = (before[a], after[a], self.what[a]);
            let changed = old ^ new;
            let lawless = changed & (new ^ v) & !(old & v & !new);
            assert!(
                lawless == 0,
                "writing {v:#04x} over {old:#04x} at {a:#05x} ({what}) gave {new:#04x}: bits \
                 {lawless:#04x} took neither the value written nor were cleared by a one"
            );
            assert!(
                changed & self.fixed[a] == 0,
                "writing {v:#04x} at {a:#05x} ({what}) changed read-only bits {:#04x}: \
                 {old:#04x} -> {new:#04x}",
                changed & self.fixed[a]
            );
            let set = !old & new & self.clear_on_one[a];
            assert!(
                set == 0,
                "writing {v:#04x} at {a:#05x} ({what}) set write-one-to-clear bits {set:#04x}"
            );
            if let Some((w, c)) = self.exact[a] {
                let want = ((old & !w) | (v & w)) & !(v & c);
                assert_eq!(
                    new, want,
                    "writing {v:#04x} over {old:#04x} at {a:#05x} ({what}, read-write {w:#04x}, \
                     write-one-to-clear {c:#04x}) gave {new:#04x}, expected {want:#04x}"
                );
            }
            cleared += (old & !new & v).count_ones();
        }
        cleared
    }
}

/// The read-only type bits of a BAR of `kind` (PCI Local Bus 3.0 §6.2.5.1).
pub fn bar_flags(kind: BarKind) -> u32 {
    match kind {
        BarKind::Mem32 => 0,
        BarKind::Mem64 => bar::MEM_64,
        BarKind::Mem64Prefetch => bar::MEM_64 | bar::PREFETCHABLE,
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::{decode, expected_placement};
    use super::*;
    use crate::input::Input;

    fn model() -> Model {
        let d = decode(&mut Input::new(&[]));
        let p = expected_placement(&d).unwrap_or_default();
        Model::new(&d, &p)
    }

    #[test]
    #[should_panic(expected = "changed read-only bits")]
    fn a_changed_vendor_id_is_a_finding() {
        let before = vec![0u8; SPACE];
        let mut after = before.clone();
        after[0] = 0x01;
        model().check_write(&before, &after, 0, &[0x01]);
    }

    #[test]
    #[should_panic(expected = "outside it")]
    fn a_write_reaching_past_its_bytes_is_a_finding() {
        let before = vec![0u8; SPACE];
        let mut after = before.clone();
        after[0x3d] = 7;
        model().check_write(&before, &after, 0x3c, &[7]);
    }

    #[test]
    fn a_write_to_the_interrupt_line_is_lawful() {
        let before = vec![0u8; SPACE];
        let mut after = before.clone();
        after[usize::from(pci::INTERRUPT_LINE)] = 0x0b;
        let cleared = model().check_write(&before, &after, pci::INTERRUPT_LINE, &[0x0b]);
        assert_eq!(cleared, 0);
    }
}
