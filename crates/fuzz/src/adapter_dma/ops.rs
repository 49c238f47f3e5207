//! What the host does to its adapter's DMA engine, decoded from fuzzer bytes.
//!
//! Addresses come from menus — the harness's areas, the last bytes of RAM (a transfer may run
//! past them), the adapter's window mapped onto the peer's area or an entry that maps
//! nothing, an unclaimed address, any value — and so do lengths (0, small, up to 64 KiB, one
//! past the engine's largest, any) and ring sizes (0, small, the most, one more, any).
//! Register accesses take any offset, width and value.
//!
//! Encoding: one byte picks the operation (`% 7`), then its fields in order; past the end of
//! the input every byte reads 0.

use crate::input::Input;

/// At most this many operations per input.
pub const MAX_OPS: usize = 24;
/// Most descriptors one [`Op::Post`] writes.
pub const MAX_DESCRIPTORS: usize = 8;

/// Where the ring's base points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingAt {
    /// The harness's ring slot (aligned).
    Slot,
    /// The slot plus `1..=31` bytes.
    Misaligned(u8),
    /// `n` descriptors (1 to 8) before the end of RAM: the ring runs past it.
    EndOfRam(u8),
    /// An unclaimed address.
    Unclaimed,
    /// Any value.
    Any(u64),
}

/// RING_ENTRIES.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entries {
    /// 1 to 16.
    Small(u8),
    /// 0.
    Zero,
    /// The most the engine takes.
    Most,
    /// One more.
    TooMany,
    /// Any value.
    Any(u64),
}

/// Where the done word goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoneAt {
    /// The harness's slot.
    Slot,
    /// The slot plus `1..=7`.
    Misaligned(u8),
    /// An unclaimed address.
    Unclaimed,
    /// Any value.
    Any(u64),
}

/// A descriptor's local side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// The harness's local area at this offset (below 128 KiB).
    Area(u32),
    /// `n` bytes (1 to 4096) before the end of RAM.
    EndOfRam(u16),
    /// An unclaimed address plus this.
    Unclaimed(u16),
    /// Any value.
    Any(u64),
}

/// A descriptor's remote side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remote {
    /// The window onto the peer's area at this offset (below 128 KiB).
    Window(u32),
    /// A window entry that maps nothing, at this offset.
    Unmapped(u16),
    /// An unclaimed address plus this.
    Unclaimed(u16),
    /// Any value.
    Any(u64),
}

/// A descriptor's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    /// 0.
    Zero,
    /// 1 to 256.
    Small(u8),
    /// 1 to 65536.
    Medium(u16),
    /// One past the engine's largest transfer.
    TooLong,
    /// Any value.
    Any(u64),
}

/// One transfer as the host writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    /// Local side.
    pub local: Local,
    /// Remote side.
    pub remote: Remote,
    /// Length.
    pub len: Len,
    /// FLAGS: bit 0 read (pull), and any other bits.
    pub flags: u32,
}

/// The TAIL written after the descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Past the descriptors written.
    Posted,
    /// One below the current TAIL.
    Behind,
    /// Past a full ring.
    TooFar,
    /// Any value.
    Any(u64),
}

/// An operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Writes RING_BASE, RING_ENTRIES and DONE_ADDR, then CONTROL (`enable`: ENABLE, else 0).
    Setup {
        /// Ring base.
        ring: RingAt,
        /// Ring size.
        entries: Entries,
        /// Done word.
        done: DoneAt,
        /// Set ENABLE.
        enable: bool,
    },
    /// Writes descriptors into the ring from TAIL on and writes TAIL; `abort` writes ABORT
    /// 1 µs later, before the engine is done.
    Post {
        /// The descriptors.
        descs: Vec<Desc>,
        /// TAIL.
        tail: Tail,
        /// Abort while it runs.
        abort: bool,
    },
    /// A load (`write` false) or store at any offset of BAR0 and width.
    Register {
        /// Store.
        write: bool,
        /// Offset in BAR0.
        offset: u64,
        /// Bytes.
        width: usize,
        /// What a store writes (each 8-byte word).
        value: u64,
    },
    /// CONTROL = 0.
    Disable,
    /// A store to ERROR.
    ClearError,
    /// CONTROL = ENABLE | ABORT with nothing running.
    Abort,
    /// CONTROL with an undefined bit.
    BadControl(u8),
}

/// The BAR0 offsets a register access picks from (`% 8`), before `Any`.
const OFFSETS: [u64; 6] = [0x1_0000, 0x1_0030, 0x1_0048, 0x1_0050, 0x0_fff8, 0];
/// The widths a register access picks from.
const WIDTHS: [usize; 8] = [8, 16, 24, 4, 2, 1, 0, 12];

fn desc(i: &mut Input<'_>) -> Desc {
    let local = match i.u8() % 4 {
        0 => Local::Area(u32::from(i.u16()) * 2 % (128 << 10)),
        1 => Local::EndOfRam(i.u16() % 4096 + 1),
        2 => Local::Unclaimed(i.u16()),
        _ => Local::Any(i.u64()),
    };
    let remote = match i.u8() % 4 {
        0 => Remote::Window(u32::from(i.u16()) * 2 % (128 << 10)),
        1 => Remote::Unmapped(i.u16()),
        2 => Remote::Unclaimed(i.u16()),
        _ => Remote::Any(i.u64()),
    };
    let len = match i.u8() % 6 {
        0 => Len::Zero,
        1 | 2 => Len::Small(i.u8()),
        3 => Len::Medium(i.u16()),
        4 => Len::TooLong,
        _ => Len::Any(i.u64()),
    };
    let flags = match i.u8() % 4 {
        0 | 1 => 0,
        2 => 1,
        _ => i.u32(),
    };
    Desc {
        local,
        remote,
        len,
        flags,
    }
}

/// Decodes at most [`MAX_OPS`] operations.
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut i = Input::new(data);
    let mut ops = Vec::new();
    while !i.is_empty() && ops.len() < MAX_OPS {
        let op = match i.u8() % 7 {
            0 => Op::Setup {
                ring: match i.u8() % 5 {
                    0 | 1 => RingAt::Slot,
                    2 => RingAt::Misaligned(i.u8() % 31 + 1),
                    3 => RingAt::EndOfRam(i.u8() % 8 + 1),
                    _ => match i.bool() {
                        true => RingAt::Unclaimed,
                        false => RingAt::Any(i.u64()),
                    },
                },
                entries: match i.u8() % 6 {
                    0..=2 => Entries::Small(i.u8() % 16 + 1),
                    3 => Entries::Zero,
                    4 => match i.bool() {
                        true => Entries::Most,
                        false => Entries::TooMany,
                    },
                    _ => Entries::Any(i.u64()),
                },
                done: match i.u8() % 5 {
                    0..=2 => DoneAt::Slot,
                    3 => DoneAt::Misaligned(i.u8() % 7 + 1),
                    _ => match i.bool() {
                        true => DoneAt::Unclaimed,
                        false => DoneAt::Any(i.u64()),
                    },
                },
                enable: !i.u8().is_multiple_of(4),
            },
            1 | 2 => {
                let n = i.below(MAX_DESCRIPTORS) + 1;
                let descs = (0..n).map(|_| desc(&mut i)).collect();
                let tail = match i.u8() % 6 {
                    0..=2 => Tail::Posted,
                    3 => Tail::Behind,
                    4 => Tail::TooFar,
                    _ => Tail::Any(i.u64()),
                };
                Op::Post {
                    descs,
                    tail,
                    abort: i.u8().is_multiple_of(5),
                }
            }
            3 => {
                let write = i.bool();
                let k = i.u8();
                let offset = match OFFSETS.get(usize::from(k % 8)) {
                    Some(&o) => o + u64::from(i.u8() % 0x58),
                    None => i.u64() % (256 << 10),
                };
                let width = WIDTHS[i.below(WIDTHS.len())];
                Op::Register {
                    write,
                    offset,
                    width,
                    value: i.u64(),
                }
            }
            4 => Op::Disable,
            5 => match i.u8() % 3 {
                0 => Op::ClearError,
                1 => Op::Abort,
                _ => Op::BadControl(i.u8()),
            },
            _ => Op::Post {
                descs: vec![desc(&mut i)],
                tail: Tail::Posted,
                abort: false,
            },
        };
        ops.push(op);
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_decodes_to_a_bounded_list() {
        assert!(decode(&[]).is_empty());
        assert_eq!(decode(&[0xff; 4096]).len(), MAX_OPS);
        assert_eq!(
            decode(&[4, 5, 1]),
            [Op::Disable, Op::Abort],
            "one byte an operation where it has no fields"
        );
    }
}
