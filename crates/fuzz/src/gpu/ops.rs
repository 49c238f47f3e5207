//! What the host does to the two GPUs, decoded from fuzzer bytes.
//!
//! Every operation names a GPU (`gpu0` or `gpu1`) and most a channel. Ring entries are
//! structured commands whose addresses come from a menu ([`Place`]) — device offsets inside
//! and beyond the aperture, at the end of and past device memory, the host's source,
//! destination and word buffers, the peer GPU's aperture, an unclaimed bus address, past the
//! GPU's DMA limit, next to `u64::MAX` — or 64 raw bytes. Register and BAR1 accesses take any
//! offset and width.
//!
//! Encoding: one byte picks the operation (`% 16`), then its fields in order; past the end of
//! the input every byte reads 0.

use crate::input::Input;

/// At most this many operations per input.
pub const MAX_OPS: usize = 48;
/// Most bytes one structured copy moves.
pub const MAX_COPY: u64 = 64 << 10;
/// Most threads a structured launch asks for.
pub const MAX_THREADS: u32 = 8;
/// Longest a `wait` kernel waits (ns of virtual time).
pub const MAX_WAIT_NS: u64 = 100_000;

/// Where an address of a command points (resolved by the host for the GPU that runs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Device offset in the first MiB (inside the aperture).
    Low(u32),
    /// Device offset 1 GiB + (below 1 MiB): beyond the aperture, only the GPU reaches it.
    High(u32),
    /// Device offset `memory - n` (`n` below 128 KiB): a copy may run past the end.
    End(u32),
    /// Any device offset.
    AnyDevice(u64),
    /// The host's source buffer (a known pattern) at this offset (below 128 KiB).
    Src(u32),
    /// The host's destination buffer at this offset (below 128 KiB).
    Dst(u32),
    /// The host's word buffer at this offset (below 4 KiB).
    Words(u16),
    /// The peer GPU's aperture at this offset (below 1 MiB).
    Peer(u32),
    /// The peer GPU's aperture `APERTURE - n`: an access may cross its end.
    PeerEnd(u32),
    /// An unclaimed bus address (plus an offset below 1 MiB).
    Nowhere(u32),
    /// `1 << 47` minus an offset below 64: at or past the GPU's DMA limit.
    Beyond(u8),
    /// `u64::MAX` minus an offset below 256: lengths overflow.
    Top(u8),
}

/// How many bytes a copy moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    /// Exactly this (0 is a bad command; bounded by [`MAX_COPY`]).
    Bytes(u32),
    /// More than any memory: fails its checks before moving a byte.
    Huge(u64),
}

/// A kernel the target loads, or an id nothing is loaded under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Thread `t` stores `value + t` at `at + 8 t`.
    Store {
        /// Where thread 0 stores.
        at: Place,
        /// Its value.
        value: u64,
    },
    /// Waits until the device word at `at` reaches `value`, at most `bound_ns`.
    Wait {
        /// The word (a device place).
        at: Place,
        /// The value.
        value: u64,
        /// The bound.
        bound_ns: u32,
    },
    /// Loads a word from `at` (a fault where `at` is not memory).
    Load {
        /// The address.
        at: Place,
    },
    /// A kernel id beyond those loaded.
    Unknown(u32),
}

/// One ring entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// NOP.
    Nop,
    /// COPY.
    Copy {
        /// Source.
        src: Place,
        /// Destination.
        dst: Place,
        /// Bytes.
        len: Len,
    },
    /// LAUNCH, followed by its parameter entries.
    Launch {
        /// The kernel and its parameters.
        kernel: Kernel,
        /// Threads (0 and above 1024 are bad commands).
        threads: u32,
        /// `param_bytes` when not the parameters' own length (above 4096: a bad command).
        param_bytes: Option<u16>,
    },
    /// TIMESTAMP.
    Timestamp {
        /// Where the timer goes.
        dst: Place,
    },
    /// RELEASE.
    Release {
        /// Where the value goes.
        dst: Place,
        /// The value.
        value: u64,
        /// Raise the channel's vector.
        interrupt: bool,
    },
    /// ACQUIRE of a word of the GPU's own memory.
    Acquire {
        /// The word (a device place; an unaligned offset is a bad command).
        at: Place,
        /// The value.
        value: u64,
    },
    /// Any 64 bytes.
    Raw([u8; 64]),
}

/// A `RING_BASE` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingBase {
    /// The channel's own ring slot in host RAM.
    Slot,
    /// The slot plus this (not 64-byte aligned when not a multiple of 64).
    SlotPlus(u8),
    /// Another place (unclaimed, past the DMA limit, the peer's aperture, ...).
    At(Place),
    /// Any value.
    Any(u64),
}

/// A `PUT` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The entries the host has pushed since the last reset.
    Tail,
    /// `tail - n` (behind `GET` when it went past).
    Behind(u8),
    /// `tail + n`: entries the host never wrote (whatever the ring holds).
    Ahead(u8),
    /// Any value.
    Any(u64),
}

/// One thing the host does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Writes `RING_BASE`, `RING_ENTRIES` and `NOTIFIER` of a channel.
    SetRing {
        /// GPU (0 or 1).
        gpu: u8,
        /// Channel.
        channel: u16,
        /// `RING_BASE`.
        base: RingBase,
        /// `RING_ENTRIES`.
        entries: u64,
        /// Notices to the channel's notice slot in host RAM (else `NOTIFIER` = `notifier`).
        notices: bool,
        /// `NOTIFIER` when not the notice slot.
        notifier: Option<Place>,
    },
    /// Writes an entry at the host's tail of the channel's ring (and advances it).
    Push {
        /// GPU.
        gpu: u8,
        /// Channel.
        channel: u16,
        /// The entry.
        entry: Entry,
    },
    /// Writes `PUT`.
    Put {
        /// GPU.
        gpu: u8,
        /// Channel.
        channel: u16,
        /// The value.
        put: Put,
    },
    /// Writes `RESET`.
    Reset {
        /// GPU.
        gpu: u8,
        /// Channel.
        channel: u16,
    },
    /// A load or store at any BAR, offset and width, straight at the GPU's BAR handler.
    Register {
        /// GPU.
        gpu: u8,
        /// BAR.
        bar: u8,
        /// Offset.
        offset: u64,
        /// Bytes (1 to 16).
        width: u8,
        /// The stored value's bytes (repeated), or a load.
        store: Option<u64>,
    },
    /// A word stored through BAR1 by the CPU over the fabric (to satisfy an acquire).
    Poke {
        /// GPU.
        gpu: u8,
        /// Offset in the aperture.
        offset: u32,
        /// The value.
        value: u64,
    },
    /// Let virtual time pass (µs).
    Wait(u8),
}

/// Decodes up to [`MAX_OPS`] operations.
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut input = Input::new(data);
    let mut ops = Vec::new();
    while !input.is_empty() && ops.len() < MAX_OPS {
        ops.push(decode_one(&mut input));
    }
    ops
}

fn gpu_channel(i: &mut Input) -> (u8, u16) {
    let b = i.u8();
    (b >> 7, u16::from(b & 7))
}

fn place(i: &mut Input) -> Place {
    match i.u8() % 16 {
        0..=2 => Place::Low(i.u32() % (1 << 20)),
        3 => Place::High(i.u32() % (1 << 20)),
        4 => Place::End(i.u32() % (128 << 10)),
        5 => Place::AnyDevice(i.u64()),
        6 | 7 => Place::Src(i.u32() % (128 << 10)),
        8 | 9 => Place::Dst(i.u32() % (128 << 10)),
        10 => Place::Words(i.u16() % 4096),
        11 => Place::Peer(i.u32() % (1 << 20)),
        12 => Place::PeerEnd(i.u32() % (128 << 10)),
        13 => Place::Nowhere(i.u32() % (1 << 20)),
        14 => Place::Beyond(i.u8() % 64),
        _ => Place::Top(i.u8()),
    }
}

/// A device place for acquires and waits, usually 8-byte aligned.
fn word_place(i: &mut Input) -> Place {
    match i.u8() % 8 {
        0..=4 => Place::Low((i.u32() % (1 << 20)) & !7),
        5 => Place::High((i.u32() % (1 << 20)) & !7),
        6 => Place::End((i.u32() % 64) & !7),
        _ => place(i),
    }
}

fn len(i: &mut Input) -> Len {
    match i.u8() % 12 {
        0 => Len::Bytes(1),
        1 => Len::Bytes(8),
        2 => Len::Bytes(64),
        3 => Len::Bytes(4096),
        4 => Len::Bytes(4097),
        5 => Len::Bytes(MAX_COPY as u32),
        6 => Len::Bytes(0),
        7 => Len::Huge(1 << 47 | u64::from(i.u32())),
        8 => Len::Huge(u64::MAX - u64::from(i.u8())),
        _ => Len::Bytes(u32::from(i.u16()) % (MAX_COPY as u32 + 1)),
    }
}

fn kernel(i: &mut Input) -> Kernel {
    match i.u8() % 8 {
        0..=2 => Kernel::Store {
            at: place(i),
            value: i.u64(),
        },
        3 | 4 => Kernel::Wait {
            at: word_place(i),
            value: u64::from(i.u8()),
            bound_ns: i.u32() % (MAX_WAIT_NS as u32 + 1),
        },
        5 | 6 => Kernel::Load { at: place(i) },
        _ => Kernel::Unknown(match i.u8() {
            0..=0xef => 3,
            _ => i.u32(),
        }),
    }
}

fn entry(i: &mut Input) -> Entry {
    match i.u8() % 16 {
        0 => Entry::Nop,
        1..=4 => Entry::Copy {
            src: place(i),
            dst: place(i),
            len: len(i),
        },
        5..=7 => {
            let kernel = kernel(i);
            let threads = match i.u8() % 11 {
                0 => 0,
                9 => 1025,
                10 => 1,
                n => u32::from(n).min(MAX_THREADS),
            };
            let param_bytes = match i.u8() % 6 {
                0 => Some(i.u16() % 4098),
                1 => Some(u16::from(i.u8() % 24)),
                _ => None,
            };
            Entry::Launch {
                kernel,
                threads,
                param_bytes,
            }
        }
        8 => Entry::Timestamp { dst: place(i) },
        9..=11 => Entry::Release {
            dst: place(i),
            value: u64::from(i.u16()),
            interrupt: i.bool(),
        },
        12 | 13 => Entry::Acquire {
            at: word_place(i),
            value: u64::from(i.u8() % 4),
        },
        _ => Entry::Raw(i.bytes::<64>()),
    }
}

fn decode_one(i: &mut Input) -> Op {
    match i.u8() % 16 {
        0 | 1 => {
            let (gpu, channel) = gpu_channel(i);
            let base = match i.u8() % 10 {
                0 => RingBase::SlotPlus(i.u8()),
                1 => RingBase::At(place(i)),
                2 => RingBase::Any(i.u64()),
                _ => RingBase::Slot,
            };
            let entries = match i.u8() % 10 {
                0 => 2,
                1 => 4,
                2 => 8,
                3 | 4 => 16,
                5 => 64,
                6 => 256,
                7 => 3,
                8 => 0,
                _ => i.u64(),
            };
            let flags = i.u8();
            Op::SetRing {
                gpu,
                channel,
                base,
                entries,
                notices: flags & 1 == 0,
                notifier: (flags & 3 == 1).then(|| place(i)),
            }
        }
        2..=7 => {
            let (gpu, channel) = gpu_channel(i);
            Op::Push {
                gpu,
                channel,
                entry: entry(i),
            }
        }
        8 | 9 => {
            let (gpu, channel) = gpu_channel(i);
            let put = match i.u8() % 8 {
                0 => Put::Behind(i.u8() % 4 + 1),
                1 => Put::Ahead(i.u8()),
                2 => Put::Any(i.u64()),
                _ => Put::Tail,
            };
            Op::Put { gpu, channel, put }
        }
        10 => {
            let (gpu, channel) = gpu_channel(i);
            Op::Reset { gpu, channel }
        }
        11 | 12 => {
            let gpu = i.u8() & 1;
            let bar = match i.u8() % 8 {
                0..=3 => 0,
                4..=6 => 1,
                n => n,
            };
            let offset = match i.u8() % 4 {
                0 => u64::from(i.u8()),
                1 => 0x1000 + u64::from(i.u16() % 0x900),
                2 => 0x8000 + u64::from(i.u16() % 0x1100),
                _ => i.u64() % (1 << 29),
            };
            let width = i.u8() % 16 + 1;
            let store = i.bool().then(|| i.u64());
            Op::Register {
                gpu,
                bar,
                offset,
                width,
                store,
            }
        }
        13 | 14 => Op::Poke {
            gpu: i.u8() & 1,
            offset: (i.u32() % (1 << 20)) & !7,
            value: u64::from(i.u8() % 4),
        },
        _ => Op::Wait(i.u8()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_decodes_to_no_operation() {
        assert!(decode(&[]).is_empty());
    }

    #[test]
    fn decoding_is_bounded_by_max_ops() {
        let ops = decode(&[15u8; 10_000]);
        assert_eq!(ops.len(), MAX_OPS);
        assert!(ops.iter().all(|o| *o == Op::Wait(15)));
    }

    #[test]
    fn a_push_takes_its_channel_and_entry_from_the_input() {
        assert_eq!(
            decode(&[2, 0x83, 0]),
            [Op::Push {
                gpu: 1,
                channel: 3,
                entry: Entry::Nop
            }]
        );
    }
}
