//! The configuration accesses a `config_space` input makes after its layout.
//!
//! Encoding: each access starts with a tag byte — bits 2:0 the kind (0–2 read, 3–6 write,
//! 7 BAR sizing), bits 4:3 the width (1, 2, 4, 4 bytes), bits 7:5 the region the offset is
//! drawn from (header, standard capabilities, BARs, extended space, the last bytes of the
//! space, past its end, the 0x100 boundary, anywhere). A write then takes a value byte
//! (`% 4`: all-ones, zero, or the next `width` bytes). A sizing takes a slot byte and a
//! restore byte (even: write the assigned base back; odd: a u64 from the input).
//! Offsets may be unaligned, cross dwords, the 0x100 boundary, the end of the 4 KiB space,
//! or lie past it.

use crate::input::Input;
use smartio_platform::pci;

/// At most this many accesses per input.
pub const MAX_ACCESSES: usize = 256;

/// One configuration access by software.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A read of `width` bytes at `offset`.
    Read {
        /// Offset in configuration space (anything a u16 holds).
        offset: u16,
        /// 1, 2 or 4.
        width: u8,
    },
    /// A write of the low `width` bytes of `value` at `offset`.
    Write {
        /// Offset in configuration space.
        offset: u16,
        /// 1, 2 or 4.
        width: u8,
        /// Value, little-endian.
        value: u32,
    },
    /// BAR sizing as an OS does it: all-ones to BAR `slot` (and the next dword for a 64-bit
    /// BAR), read back, then write `restore` (or the assigned base) and read back.
    SizeBar {
        /// BAR slot 0..=5 (a slot without a BAR, or the upper half of one, is sized too).
        slot: u8,
        /// What to write back; `None` for the base enumeration assigned.
        restore: Option<u64>,
    },
}

/// Decodes up to [`MAX_ACCESSES`] accesses from what is left of `input`.
pub fn decode(i: &mut Input) -> Vec<Access> {
    let mut out = Vec::new();
    while !i.is_empty() && out.len() < MAX_ACCESSES {
        out.push(decode_one(i));
    }
    out
}

fn decode_one(i: &mut Input) -> Access {
    let tag = i.u8();
    let width = [1u8, 2, 4, 4][usize::from(tag >> 3 & 3)];
    if tag & 7 == 7 {
        let slot = i.u8() % pci::BAR_COUNT;
        let restore = (i.u8() & 1 == 1).then(|| i.u64());
        return Access::SizeBar { slot, restore };
    }
    let offset = offset(i, tag >> 5);
    if tag & 7 < 3 {
        return Access::Read { offset, width };
    }
    let value = match i.u8() % 4 {
        0 => u32::MAX,
        1 => 0,
        _ => match width {
            1 => u32::from(i.u8()),
            2 => u32::from(i.u16()),
            _ => i.u32(),
        },
    };
    Access::Write {
        offset,
        width,
        value,
    }
}

fn offset(i: &mut Input, region: u8) -> u16 {
    match region {
        0 => u16::from(i.u8()) % 0x40,
        1 => 0x40 + u16::from(i.u8()) % 0xc0,
        2 => pci::BAR0 + u16::from(i.u8()) % (4 * u16::from(pci::BAR_COUNT)),
        3 => pci::EXTENDED_CAPABILITIES + i.u16() % 0xf00,
        4 => pci::CONFIG_SPACE_SIZE - 8 + u16::from(i.u8() % 16),
        5 => pci::CONFIG_SPACE_SIZE + i.u16() % (u16::MAX - pci::CONFIG_SPACE_SIZE + 1),
        6 => pci::EXTENDED_CAPABILITIES - 4 + u16::from(i.u8() % 8),
        _ => i.u16(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_chooses_kind_width_and_region() {
        let mut i = Input::new(&[0b0000_1000, 0x45, 0b0101_0011, 0x08, 0x00, 0x07, 6, 2]);
        assert_eq!(
            decode(&mut i),
            [
                Access::Read {
                    offset: 0x05,
                    width: 2
                },
                Access::Write {
                    offset: 0x18,
                    width: 4,
                    value: u32::MAX
                },
                Access::SizeBar {
                    slot: 0,
                    restore: None
                }
            ]
        );
    }

    #[test]
    fn offsets_reach_past_the_end_of_the_space() {
        let mut i = Input::new(&[0b1110_0000, 0xff, 0xff, 0b1000_0000, 15]);
        assert_eq!(
            decode(&mut i),
            [
                Access::Read {
                    offset: u16::MAX,
                    width: 1
                },
                Access::Read {
                    offset: 0x1007,
                    width: 1
                }
            ]
        );
    }

    #[test]
    fn decoding_is_bounded() {
        let data = vec![0u8; 4 * MAX_ACCESSES];
        assert_eq!(decode(&mut Input::new(&data)).len(), MAX_ACCESSES);
    }
}
