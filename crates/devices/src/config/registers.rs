//! A block of configuration registers: values plus, per byte, which bits software may change
//! and which it clears by writing one. The whole configuration space is one block; each
//! capability builds its own and the capability list places it.
//!
//! Every write goes through [`RegisterBlock::write`], so the read-only, read-write and
//! write-one-to-clear rules live here and nowhere else (PCI Express Base Specification
//! §7.4, "Configuration Register Types": RO, RW, RW1C). A register may also accept only
//! some values ([`Accept`]): where the specification leaves other values undefined (SR-IOV's
//! System Page Size, NumVFs above TotalVFs), the function keeps the value it had.

/// The values a register takes from a write; a write that would leave it holding anything
/// else leaves the register as it was (the other registers the write touched still change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// Exactly one bit set, and that bit among these (a choice among supported sizes).
    OneBitOf(u32),
    /// At most this value.
    AtMost(u32),
}

impl Accept {
    fn allows(self, v: u32) -> bool {
        match self {
            Accept::OneBitOf(bits) => v.is_power_of_two() && v & bits != 0,
            Accept::AtMost(max) => v <= max,
        }
    }
}

/// An [`Accept`] rule on the register of `len` bytes (2 or 4) at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Check {
    at: u16,
    len: u16,
    accept: Accept,
}

/// Register values and their access rules.
///
/// Invariant: `value`, `writable` and `clear_on_one` have the same length, and no bit is both
/// writable and write-one-to-clear; every check lies inside the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBlock {
    value: Vec<u8>,
    writable: Vec<u8>,
    clear_on_one: Vec<u8>,
    checks: Vec<Check>,
}

impl RegisterBlock {
    /// `len` bytes of read-only zeroes.
    pub fn new(len: usize) -> Self {
        Self {
            value: vec![0; len],
            writable: vec![0; len],
            clear_on_one: vec![0; len],
            checks: Vec::new(),
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    /// Whether the block has no bytes.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// Sets the value of the bytes at `at` (as the function resets them), whatever the rules.
    /// Bytes past the end are dropped: a layout bug, caught by the tests of each layout.
    pub fn set(&mut self, at: u16, bytes: &[u8]) {
        copy_into(&mut self.value, at, bytes);
    }

    /// Sets a 16-bit register's value.
    pub fn set16(&mut self, at: u16, v: u16) {
        self.set(at, &v.to_le_bytes());
    }

    /// Sets a 32-bit register's value.
    pub fn set32(&mut self, at: u16, v: u32) {
        self.set(at, &v.to_le_bytes());
    }

    /// Makes the bits `mask` of the 8-bit register at `at` read-write.
    pub fn writable8(&mut self, at: u16, mask: u8) {
        self.rule(at, &[mask], false);
    }

    /// Makes the bits `mask` of the 16-bit register at `at` read-write.
    pub fn writable16(&mut self, at: u16, mask: u16) {
        self.rule(at, &mask.to_le_bytes(), false);
    }

    /// Makes the bits `mask` of the 32-bit register at `at` read-write.
    pub fn writable32(&mut self, at: u16, mask: u32) {
        self.rule(at, &mask.to_le_bytes(), false);
    }

    /// Makes the bits `mask` of the 16-bit register at `at` write-one-to-clear (status bits
    /// the function sets and software acknowledges).
    pub fn clear_on_one16(&mut self, at: u16, mask: u16) {
        self.rule(at, &mask.to_le_bytes(), true);
    }

    /// Lets the 16-bit register at `at` take only the values `accept` allows (its writable
    /// bits still say which bits a write reaches). Past the end it is ignored.
    pub fn accept16(&mut self, at: u16, accept: Accept) {
        self.check(at, 2, accept);
    }

    /// Lets the 32-bit register at `at` take only the values `accept` allows.
    pub fn accept32(&mut self, at: u16, accept: Accept) {
        self.check(at, 4, accept);
    }

    fn check(&mut self, at: u16, len: u16, accept: Accept) {
        if usize::from(at) + usize::from(len) <= self.len() {
            self.checks.retain(|c| c.at != at);
            self.checks.push(Check { at, len, accept });
        }
    }

    fn register(&self, at: u16, len: u16) -> u32 {
        if len == 2 {
            u32::from(self.get16(at))
        } else {
            self.get32(at)
        }
    }

    /// Makes the `len` bytes at `at` read-only, whatever rules they had (bytes past the end
    /// are ignored).
    pub fn read_only(&mut self, at: u16, len: usize) {
        let at = usize::from(at);
        for rules in [&mut self.writable, &mut self.clear_on_one] {
            if let Some(bytes) = rules.get_mut(at..) {
                let n = bytes.len().min(len);
                bytes[..n].fill(0);
            }
        }
    }

    fn rule(&mut self, at: u16, mask: &[u8], clear: bool) {
        let (set, other) = if clear {
            (&mut self.clear_on_one, &mut self.writable)
        } else {
            (&mut self.writable, &mut self.clear_on_one)
        };
        copy_into(set, at, mask);
        // Keep the invariant: a bit has one rule.
        for (i, m) in mask.iter().enumerate() {
            if let Some(o) = other.get_mut(usize::from(at) + i) {
                *o &= !m;
            }
        }
    }

    /// Copies `block` (values and rules) to offset `at`; bytes past the end are dropped.
    pub fn place(&mut self, at: u16, block: &RegisterBlock) {
        copy_into(&mut self.value, at, &block.value);
        copy_into(&mut self.writable, at, &block.writable);
        copy_into(&mut self.clear_on_one, at, &block.clear_on_one);
        for c in &block.checks {
            if let Some(moved) = at.checked_add(c.at) {
                self.check(moved, c.len, c.accept);
            }
        }
    }

    /// Reads `buf.len()` bytes at `at`; bytes past the end read as zero.
    pub fn read(&self, at: u16, buf: &mut [u8]) {
        for (i, out) in buf.iter_mut().enumerate() {
            *out = self.value.get(usize::from(at) + i).copied().unwrap_or(0);
        }
    }

    /// A byte's value (zero past the end).
    pub fn get8(&self, at: u16) -> u8 {
        let mut b = [0u8; 1];
        self.read(at, &mut b);
        b[0]
    }

    /// A 16-bit register's value (zero past the end).
    pub fn get16(&self, at: u16) -> u16 {
        let mut b = [0u8; 2];
        self.read(at, &mut b);
        u16::from_le_bytes(b)
    }

    /// A 32-bit register's value (zero past the end).
    pub fn get32(&self, at: u16) -> u32 {
        let mut b = [0u8; 4];
        self.read(at, &mut b);
        u32::from_le_bytes(b)
    }

    /// The bits of the 32-bit register at `at` that software may change (zero past the end).
    pub fn writable_bits32(&self, at: u16) -> u32 {
        let mut b = [0u8; 4];
        for (i, out) in b.iter_mut().enumerate() {
            *out = self.writable.get(usize::from(at) + i).copied().unwrap_or(0);
        }
        u32::from_le_bytes(b)
    }

    /// A write by software: writable bits take the new value, write-one-to-clear bits written
    /// as one become zero, every other bit keeps its value. Then each register with an
    /// [`Accept`] rule that the write touched and left holding a value the rule refuses gets
    /// its old value back. Bytes past the end are ignored.
    pub fn write(&mut self, at: u16, data: &[u8]) {
        let end = usize::from(at) + data.len();
        let touched: Vec<(Check, u32)> = self
            .checks
            .iter()
            .filter(|c| usize::from(c.at) < end && usize::from(c.at + c.len) > usize::from(at))
            .map(|&c| (c, self.register(c.at, c.len)))
            .collect();
        self.masked_write(at, data);
        for (c, old) in touched {
            if !c.accept.allows(self.register(c.at, c.len)) {
                let bytes = old.to_le_bytes();
                self.set(c.at, &bytes[..usize::from(c.len)]);
            }
        }
    }

    fn masked_write(&mut self, at: u16, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let at = usize::from(at) + i;
            let (Some(old), Some(&w), Some(&c)) = (
                self.value.get_mut(at),
                self.writable.get(at),
                self.clear_on_one.get(at),
            ) else {
                break;
            };
            *old = ((*old & !w) | (v & w)) & !(v & c);
        }
    }
}

fn copy_into(dst: &mut [u8], at: u16, src: &[u8]) {
    let at = usize::from(at);
    let Some(tail) = dst.get_mut(at..) else {
        return;
    };
    let n = tail.len().min(src.len());
    tail[..n].copy_from_slice(&src[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_change_only_writable_bits() {
        let mut r = RegisterBlock::new(4);
        r.set16(0, 0xa5a5);
        r.writable16(0, 0x00f0);
        r.write(0, &[0x0f, 0xff]);
        assert_eq!(r.get16(0), 0xa505);
    }

    #[test]
    fn write_one_to_clear_bits_clear_on_one_and_keep_on_zero() {
        let mut r = RegisterBlock::new(2);
        r.set16(0, 0xf900);
        r.clear_on_one16(0, 0xf900);
        r.write(0, &0x0100u16.to_le_bytes());
        assert_eq!(r.get16(0), 0xf800);
        r.write(0, &0u16.to_le_bytes());
        assert_eq!(r.get16(0), 0xf800, "writing zero leaves status bits alone");
        r.write(0, &0xffffu16.to_le_bytes());
        assert_eq!(r.get16(0), 0);
    }

    #[test]
    fn a_bit_has_one_rule() {
        let mut r = RegisterBlock::new(2);
        r.clear_on_one16(0, 0x0003);
        r.writable16(0, 0x0001);
        r.write(0, &[0x03]);
        assert_eq!(
            r.get16(0),
            0x0001,
            "bit 0 became read-write, bit 1 stayed RW1C"
        );
    }

    #[test]
    fn read_only_bytes_lose_both_rules_and_keep_their_value() {
        let mut r = RegisterBlock::new(4);
        r.set32(0, 0x0000_ff00);
        r.writable16(0, 0x00ff);
        r.clear_on_one16(0, 0xff00);
        r.writable16(2, 0xffff);
        r.read_only(0, 2);
        r.write(0, &[0xff; 4]);
        assert_eq!(
            r.get32(0),
            0xffff_ff00,
            "bytes 0-1 kept, bytes 2-3 still writable"
        );
        r.read_only(3, 8);
        r.write(2, &[0, 0]);
        assert_eq!(
            r.get32(0),
            0xff00_ff00,
            "byte 3 is read-only, the rest past the end ignored"
        );
    }

    #[test]
    fn a_register_refuses_a_value_its_rule_does_not_accept() {
        let mut r = RegisterBlock::new(8);
        r.set32(0, 0b0001);
        r.writable32(0, u32::MAX);
        r.accept32(0, Accept::OneBitOf(0b0101));
        r.writable16(4, u16::MAX);
        r.accept16(4, Accept::AtMost(7));
        r.write(0, &0b0100u32.to_le_bytes());
        assert_eq!(r.get32(0), 0b0100, "a supported bit");
        r.write(0, &0b0101u32.to_le_bytes());
        assert_eq!(r.get32(0), 0b0100, "two bits at once are refused");
        r.write(0, &0b0010u32.to_le_bytes());
        assert_eq!(r.get32(0), 0b0100, "an unsupported bit is refused");
        r.write(0, &[0u8; 4]);
        assert_eq!(r.get32(0), 0b0100, "no bit is refused");
        r.write(2, &[0, 0, 7, 0]);
        assert_eq!(r.get16(4), 7, "a write spanning two registers");
        r.write(4, &[8, 0]);
        assert_eq!(r.get16(4), 7, "above the bound");
        let mut placed = RegisterBlock::new(16);
        placed.place(8, &r);
        placed.write(12, &[9, 0]);
        assert_eq!(placed.get16(12), 7, "the rule moved with the block");
        placed.write(12, &[3, 0]);
        assert_eq!(placed.get16(12), 3);
    }

    #[test]
    fn accesses_past_the_end_are_dropped_or_read_as_zero() {
        let mut r = RegisterBlock::new(4);
        r.writable32(0, u32::MAX);
        r.write(2, &[1, 2, 3, 4]);
        assert_eq!(r.get32(0), 0x0201_0000);
        assert_eq!(r.get32(2), 0x0201);
        r.set32(3, u32::MAX);
        assert_eq!(r.get8(3), 0xff);
        let mut placed = RegisterBlock::new(4);
        placed.place(2, &r);
        assert_eq!(placed.get32(0), 0, "only r's first two bytes (zero) fit");
        placed.write(2, &[0xff, 0xff]);
        assert_eq!(placed.get16(2), 0xffff, "their write rules came along");
    }

    #[test]
    fn an_empty_block_is_empty_and_a_later_rule_replaces_an_earlier_one_where_it_lies() {
        assert!(RegisterBlock::new(0).is_empty());
        assert!(!RegisterBlock::new(4).is_empty());
        // Byte 5 writable, then its low bit write-one-to-clear: that bit is RW1C only.
        let mut r = RegisterBlock::new(8);
        r.writable8(5, 0xff);
        r.clear_on_one16(4, 0x0100);
        r.set(5, &[0x01]);
        r.write(5, &[0x00]);
        assert_eq!(r.get8(5), 0x01, "a zero written leaves an RW1C bit set");
        r.write(5, &[0x01]);
        assert_eq!(r.get8(5), 0x00, "a one written clears it");
        r.write(5, &[0x80]);
        assert_eq!(r.get8(5), 0x80, "the other bits stay writable");
    }
}
