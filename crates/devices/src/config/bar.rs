//! Base address registers and how software sizes them (PCI Local Bus 3.0 §6.2.5.1).
//!
//! A memory BAR's address bits below its size are hard-wired to zero and its low four bits
//! (memory space, type, prefetchable) are read-only. So the sizing sequence — write all-ones,
//! read back, write the base back — needs no special case: the write mask alone makes the
//! read-back `!(size − 1) | flags`, and for a 64-bit BAR the upper dword reads back the upper
//! half of the mask. Only memory BARs are modelled (no I/O BARs).
//!
//! Routing does not follow these registers: the fabric decodes the BAR addresses firmware
//! assigned at enumeration. Software that sizes a BAR and writes the same base back (what an
//! OS does) leaves both views equal; a BAR moved elsewhere is not modelled.

use super::registers::RegisterBlock;
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::BarKind;
use smartio_platform::pci::{self, bar};

/// The offset of BAR `index`'s (first) register.
pub(super) fn offset(index: u8) -> u16 {
    pci::BAR0 + 4 * u16::from(index)
}

/// The read-only type bits of a BAR of `kind`.
pub(super) fn flags(kind: BarKind) -> u32 {
    match kind {
        BarKind::Mem32 => 0,
        BarKind::Mem64 => bar::MEM_64,
        BarKind::Mem64Prefetch => bar::MEM_64 | bar::PREFETCHABLE,
    }
}

/// Whether a BAR of `kind` takes two registers.
pub(super) fn is_64(kind: BarKind) -> bool {
    !matches!(kind, BarKind::Mem32)
}

/// Lays `assigned`'s registers into `space`: the assigned base with the type bits, and the
/// write mask that makes sizing read back the size. A BAR whose index (or upper half) is
/// past BAR5 is left out: enumeration never assigns one.
pub(super) fn lay(space: &mut RegisterBlock, assigned: &AssignedBar) {
    let last = assigned.index + u8::from(is_64(assigned.kind));
    if last >= pci::BAR_COUNT {
        return;
    }
    lay_at(
        space,
        offset(assigned.index),
        assigned.kind,
        assigned.size,
        assigned.base.get(),
    );
}

/// Lays the registers of a BAR of `kind` and `size` holding `base` at offset `at` of `space`
/// (a header's BAR or another BAR-like register, such as an SR-IOV VF BAR): the base with the
/// read-only type bits, and address bits below the size hard-wired to zero, so writing
/// all-ones reads back `!(size − 1)` with the type bits — in both dwords of a 64-bit BAR.
pub(super) fn lay_at(space: &mut RegisterBlock, at: u16, kind: BarKind, size: u64, base: u64) {
    // Sizes are powers of two of at least 16 (the fabric checks layouts); rounding up keeps
    // the mask contiguous even if one were not.
    let size = size.max(16).next_power_of_two();
    let address_mask = !(size - 1);
    let value = base | u64::from(flags(kind));
    space.set32(at, value as u32);
    space.writable32(at, address_mask as u32 & !bar::FLAGS);
    if is_64(kind) {
        space.set32(at + 4, (value >> 32) as u32);
        space.writable32(at + 4, (address_mask >> 32) as u32);
    }
}

/// The base address in `space`'s registers of a BAR of `kind` at `index`.
pub(super) fn base(space: &RegisterBlock, index: u8, kind: BarKind) -> u64 {
    base_at(space, offset(index), kind)
}

/// The base address held by the registers of a BAR of `kind` at offset `at`.
pub(super) fn base_at(space: &RegisterBlock, at: u16, kind: BarKind) -> u64 {
    let mut base = u64::from(space.get32(at) & !bar::FLAGS);
    if is_64(kind) {
        base |= u64::from(space.get32(at + 4)) << 32;
    }
    base
}

/// BAR registers a hypervisor shows a guest in place of a passed-through function's real
/// ones (as VFIO does): the same indices, kinds and sizes, so a guest kernel sizes them with
/// the usual sequence, but the addresses are the guest's own — writing them never moves the
/// real function's BARs. Everything outside the BAR registers is not answered here.
#[derive(Debug, Clone)]
pub struct VirtualBars {
    registers: RegisterBlock,
    bars: Vec<(u8, BarKind)>,
}

impl VirtualBars {
    /// BAR registers for a function with `bars` (their bases are ignored: a guest's BARs
    /// start unassigned, at zero).
    pub fn new(bars: &[AssignedBar]) -> Self {
        let mut registers =
            RegisterBlock::new(usize::from(pci::BAR0 + 4 * u16::from(pci::BAR_COUNT)));
        for b in bars {
            lay(
                &mut registers,
                &AssignedBar {
                    base: smartio_platform::BusAddr(0),
                    ..*b
                },
            );
        }
        Self {
            registers,
            bars: bars.iter().map(|b| (b.index, b.kind)).collect(),
        }
    }

    /// Whether `len` bytes at `offset` touch the BAR registers.
    pub fn covers(offset: u16, len: usize) -> bool {
        let end = pci::BAR0 + 4 * u16::from(pci::BAR_COUNT);
        let last = u32::from(offset) + len as u32;
        u32::from(offset) < u32::from(end) && last > u32::from(pci::BAR0)
    }

    /// Reads the part of `len` bytes at `offset` that lies in the BAR registers into the
    /// same place of `buf` (other bytes are left alone).
    pub fn read(&self, offset: u16, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            let at = offset + i as u16;
            if Self::covers(at, 1) {
                let mut one = [0u8];
                self.registers.read(at, &mut one);
                *b = one[0];
            }
        }
    }

    /// Writes the bytes of `data` (at `offset`) that fall in the BAR registers, through the
    /// write masks.
    pub fn write(&mut self, offset: u16, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let at = offset + i as u16;
            if Self::covers(at, 1) {
                self.registers.write(at, &[b]);
            }
        }
    }

    /// The address the guest gave BAR `index` (the size mask while it sizes it), if the
    /// function has that BAR.
    pub fn base(&self, index: u8) -> Option<u64> {
        let &(_, kind) = self.bars.iter().find(|(i, _)| *i == index)?;
        Some(base(&self.registers, index, kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_platform::BusAddr;

    fn space_with(index: u8, kind: BarKind, base: u64, size: u64) -> RegisterBlock {
        let mut space = RegisterBlock::new(0x40);
        lay(
            &mut space,
            &AssignedBar {
                index,
                kind,
                base: BusAddr(base),
                size,
            },
        );
        space
    }

    #[test]
    fn sizing_a_32_bit_bar_reads_back_its_size_and_the_base_restores() {
        let mut s = space_with(1, BarKind::Mem32, 0xfe00_0000, 1 << 20);
        let at = offset(1);
        s.write(at, &u32::MAX.to_le_bytes());
        assert_eq!(s.get32(at), 0xfff0_0000);
        s.write(at, &0xfe00_0000u32.to_le_bytes());
        assert_eq!(base(&s, 1, BarKind::Mem32), 0xfe00_0000);
    }

    #[test]
    fn sizing_a_64_bit_bar_reads_back_the_mask_in_both_dwords() {
        let mut s = space_with(0, BarKind::Mem64, 0x38_0000_4000, 16 << 10);
        s.write(offset(0), &u32::MAX.to_le_bytes());
        s.write(offset(0) + 4, &u32::MAX.to_le_bytes());
        assert_eq!(s.get32(offset(0)), 0xffff_c000 | bar::MEM_64);
        assert_eq!(s.get32(offset(0) + 4), u32::MAX);
        s.write(offset(0), &0x4000u32.to_le_bytes());
        s.write(offset(0) + 4, &0x38u32.to_le_bytes());
        assert_eq!(base(&s, 0, BarKind::Mem64), 0x38_0000_4000);
        assert_eq!(s.get32(offset(0)) & bar::FLAGS, bar::MEM_64);
    }

    #[test]
    fn a_bar_larger_than_4_gib_sizes_through_its_upper_dword() {
        let mut s = space_with(2, BarKind::Mem64Prefetch, 0x40_0000_0000, 64 << 30);
        s.write(offset(2), &u32::MAX.to_le_bytes());
        s.write(offset(2) + 4, &u32::MAX.to_le_bytes());
        assert_eq!(s.get32(offset(2)), bar::MEM_64 | bar::PREFETCHABLE);
        assert_eq!(s.get32(offset(2) + 4), 0xffff_fff0);
    }

    #[test]
    fn type_bits_are_read_only() {
        let mut s = space_with(0, BarKind::Mem64Prefetch, 0x8000_0000, 4096);
        s.write(offset(0), &0u32.to_le_bytes());
        assert_eq!(s.get32(offset(0)), bar::MEM_64 | bar::PREFETCHABLE);
    }

    #[test]
    fn unused_bar_size_probe_does_not_reprogram_previous_bar() {
        let mut s = space_with(0, BarKind::Mem32, 0xfe00_0000, 4096);
        s.write(offset(1), &u32::MAX.to_le_bytes());
        assert_eq!(s.get32(offset(1)), 0, "an unimplemented BAR reads zero");
        assert_eq!(base(&s, 0, BarKind::Mem32), 0xfe00_0000);
    }

    #[test]
    fn a_64_bit_bar_in_the_last_slot_is_left_out() {
        let s = space_with(5, BarKind::Mem64, 0x1000_0000, 4096);
        assert_eq!(s.get32(offset(5)), 0);
    }

    #[test]
    fn virtual_bars_size_like_real_ones_and_keep_the_guest_address() {
        let real = AssignedBar {
            index: 0,
            kind: BarKind::Mem64,
            base: BusAddr(0x38_0000_4000),
            size: 16 << 10,
        };
        let mut v = VirtualBars::new(&[real]);
        assert_eq!(v.base(0), Some(0), "a guest BAR starts unassigned");
        v.write(offset(0), &u32::MAX.to_le_bytes());
        v.write(offset(0) + 4, &u32::MAX.to_le_bytes());
        let mut lo = [0u8; 4];
        v.read(offset(0), &mut lo);
        assert_eq!(u32::from_le_bytes(lo), 0xffff_c000 | bar::MEM_64);
        v.write(offset(0), &0xc000_0000u32.to_le_bytes());
        v.write(offset(0) + 4, &0u32.to_le_bytes());
        assert_eq!(v.base(0), Some(0xc000_0000));
        assert_eq!(v.base(1), None);
        assert!(VirtualBars::covers(0x0c, 8) && !VirtualBars::covers(0x04, 2));
    }

    #[test]
    fn the_bar_registers_are_the_six_dwords_from_0x10() {
        // Touching them: any byte of 0x10..0x28.
        assert!(VirtualBars::covers(0x10, 1));
        assert!(VirtualBars::covers(0x27, 1));
        assert!(VirtualBars::covers(0x0c, 5), "a write ending in BAR0");
        assert!(VirtualBars::covers(0x24, 8), "a write starting in BAR5");
        // Not touching them: ending at 0x10, starting at 0x28.
        assert!(!VirtualBars::covers(0x0c, 4));
        assert!(!VirtualBars::covers(0x28, 4));
        assert!(!VirtualBars::covers(0x00, 16));
    }
}
