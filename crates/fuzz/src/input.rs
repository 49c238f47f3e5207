//! Reading structured choices out of a fuzzer's byte string.
//!
//! The targets that drive a simulation (`nvme_commands`, `device_api`) decode their input into
//! a bounded list of operations. [`Input`] hands out integers little-endian from the front of
//! the bytes and zeroes once they run out, so every byte string — empty included — decodes to
//! something, and a mutation of one byte changes one choice.

/// A cursor over fuzzer input.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, at: 0 }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.at)
    }

    /// The next byte, or 0 past the end.
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at = self.at.saturating_add(1);
        b
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// A boolean from the low bit of the next byte.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    /// A number in `0..n` (`n` ≥ 1) from the next byte; uniform enough for `n` ≤ 256.
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.u8()) % n.max(1)
    }

    /// One of `items` (which must not be empty; the first one when it is reached past the end).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        let i = self.below(items.len());
        items.get(i).copied()
    }

    /// The next `n` bytes (zeroes past the end).
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.u8();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_little_endian_and_zero_past_the_end() {
        let mut i = Input::new(&[0x34, 0x12, 0x78, 0x56, 0x34]);
        assert_eq!(i.u16(), 0x1234);
        assert_eq!(i.u32(), 0x0034_5678);
        assert!(i.is_empty());
        assert_eq!(i.u64(), 0);
        assert_eq!(i.remaining(), 0);
    }

    #[test]
    fn below_and_pick_stay_in_range() {
        let mut i = Input::new(&[255, 7, 9]);
        assert_eq!(i.below(10), 5);
        assert_eq!(i.pick(&['a', 'b', 'c']), Some('b'));
        assert_eq!(i.below(0), 0, "a zero bound is treated as one");
        assert_eq!(i.bytes::<3>(), [0, 0, 0]);
    }
}
