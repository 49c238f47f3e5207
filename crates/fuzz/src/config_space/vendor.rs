//! Vendor-specific capabilities whose registers the input chooses: reset values, read-write
//! bits and write-one-to-clear bits, byte by byte (PCI Local Bus 3.0 §6.7 id 0x09; PCI
//! Express Base Specification §7.9.5, extended id 0x000b).
//!
//! The shipped capability types reset their status bits to zero and never raise them, so
//! they cannot show that a write-one-to-clear bit *clears*; these can, because their bits
//! start as the input says. They also mark header bytes writable when the input says so:
//! the capability list must keep every header read-only whatever a type declares.
//!
//! Invariant: [`Rules::writable`] and [`Rules::clear_on_one`] never share a bit, as
//! `RegisterBlock` requires.

use crate::mutate::Rng;
use smartio_devices::config::{Capability, ExtendedCapability, RegisterBlock};

/// The vendor-specific capability id.
pub const VENDOR_SPECIFIC: u8 = 0x09;
/// The vendor-specific extended capability id.
pub const VENDOR_SPECIFIC_EXTENDED: u16 = 0x000b;
/// Offset of a vendor-specific capability's length byte (read-only).
pub const LENGTH: usize = 2;

/// Reset values and write rules of each byte of a vendor-specific capability, header included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Reset values.
    pub value: Vec<u8>,
    /// Read-write bits.
    pub writable: Vec<u8>,
    /// Write-one-to-clear bits.
    pub clear_on_one: Vec<u8>,
}

impl Rules {
    /// `len` bytes of rules drawn from `seed`. Bits are read-write, write-one-to-clear or
    /// read-only with about equal odds.
    pub fn new(len: usize, seed: u32) -> Self {
        let mut rng = Rng::new(u64::from(seed) | 1 << 40);
        let mut rules = Rules {
            value: Vec::with_capacity(len),
            writable: Vec::with_capacity(len),
            clear_on_one: Vec::with_capacity(len),
        };
        for _ in 0..len {
            let [value, a, b, ..] = rng.next_u64().to_le_bytes();
            rules.value.push(value);
            rules.clear_on_one.push(a & b);
            rules.writable.push(a & !b);
        }
        rules
    }

    /// The registers as `RegisterBlock` holds them.
    pub fn registers(&self) -> RegisterBlock {
        let mut r = RegisterBlock::new(self.value.len());
        for (at, ((&v, &w), &c)) in self
            .value
            .iter()
            .zip(&self.writable)
            .zip(&self.clear_on_one)
            .enumerate()
        {
            // Lengths are at most 64 bytes (see `layout`), so offsets fit.
            let at = at as u16;
            r.set(at, &[v]);
            r.writable8(at, w);
            // There is no 8-bit RW1C rule: set this byte's with the next one's left alone
            // (the next byte sets its own; a byte past the end is dropped).
            r.clear_on_one16(at, u16::from(c));
        }
        r
    }
}

/// A vendor-specific capability (id 0x09) with input-chosen rules; byte 2 holds its length
/// and is read-only, as the specification has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vendor(pub Rules);

impl Vendor {
    /// A capability of `len` bytes (3 ..= 64) from `seed`.
    pub fn new(len: usize, seed: u32) -> Self {
        let mut rules = Rules::new(len, seed);
        if let (Some(v), Some(w), Some(c)) = (
            rules.value.get_mut(LENGTH),
            rules.writable.get_mut(LENGTH),
            rules.clear_on_one.get_mut(LENGTH),
        ) {
            *v = len as u8;
            *w = 0;
            *c = 0;
        }
        Vendor(rules)
    }
}

impl Capability for Vendor {
    fn id(&self) -> u8 {
        VENDOR_SPECIFIC
    }

    fn registers(&self) -> RegisterBlock {
        self.0.registers()
    }
}

/// A vendor-specific extended capability (id 0x000b, version 1) with input-chosen rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorExtended(pub Rules);

impl ExtendedCapability for VendorExtended {
    fn id(&self) -> u16 {
        VENDOR_SPECIFIC_EXTENDED
    }

    fn version(&self) -> u8 {
        1
    }

    fn registers(&self) -> RegisterBlock {
        self.0.registers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_never_give_a_bit_two_kinds() {
        let r = Rules::new(64, 7);
        assert!(r
            .writable
            .iter()
            .zip(&r.clear_on_one)
            .all(|(w, c)| w & c == 0));
        assert!(r.writable.iter().any(|&w| w != 0));
        assert!(r.clear_on_one.iter().any(|&c| c != 0));
    }

    #[test]
    fn the_register_block_follows_the_rules() {
        let v = Vendor::new(9, 3);
        let mut block = v.registers();
        let ones = [0xff; 9];
        block.write(0, &ones);
        for at in 0..9u16 {
            let i = usize::from(at);
            let (old, w, c) = (v.0.value[i], v.0.writable[i], v.0.clear_on_one[i]);
            assert_eq!(block.get8(at), ((old & !w) | w) & !c, "byte {at}");
        }
        assert_eq!(block.get8(LENGTH as u16), 9, "the length byte is read-only");
    }
}
