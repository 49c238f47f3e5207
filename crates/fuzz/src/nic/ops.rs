//! What the two hosts do to their NICs, decoded from fuzzer bytes.
//!
//! Every operation names a NIC (`0`: alpha's, `1`: beta's) and most a queue pair. Addresses
//! come from a menu ([`Buffer`], [`Base`]) — the harness's area of host RAM, an unclaimed bus
//! address, the end of RAM (an access may run past it), any value — and lengths from another
//! ([`Len`], [`Capacity`]): zero, shorter than a header, exactly a header, the largest frame,
//! one byte too long, small, any. Register accesses take any offset, width and value.
//!
//! Encoding: one byte picks the operation (`% 8`), then its fields in order; past the end of
//! the input every byte reads 0.

use crate::input::Input;

/// At most this many operations per input.
pub const MAX_OPS: usize = 40;
/// Most descriptors one [`Op::WriteTx`] or [`Op::PostRx`] writes.
pub const MAX_DESCRIPTORS: usize = 16;
/// Buffers of each kind in the harness's area (16 KiB each).
pub const BUFFERS: u8 = 16;

/// Where a ring's base points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The queue's own slot in the harness's area (aligned).
    Slot,
    /// The slot plus `n` bytes (`1..=127`: misaligned).
    Misaligned(u8),
    /// An unclaimed bus address.
    Unmapped,
    /// `n * 128` bytes before the end of RAM: descriptors run past it.
    EndOfRam(u8),
    /// Any value (one that lands in RAM is moved to an unclaimed address by the harness).
    Any(u64),
}

/// Where a descriptor's buffer points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffer {
    /// Buffer `index % BUFFERS` of the harness's area, at `offset` (below 1 KiB).
    Area(u8, u16),
    /// An unclaimed bus address.
    Unmapped(u16),
    /// `n` bytes before the end of RAM.
    EndOfRam(u16),
    /// Any value (one that lands in RAM is moved to an unclaimed address by the harness).
    Any(u64),
}

/// A transmit descriptor's length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    /// 0.
    Zero,
    /// 1 to 13: shorter than a header.
    Short(u8),
    /// Exactly a header (14).
    Header,
    /// The largest frame the MTU allows.
    Max,
    /// The largest frame plus `1 + n`.
    TooLong(u8),
    /// 14 plus up to 1 KiB.
    Small(u16),
    /// Any value.
    Any(u32),
}

/// Whom a frame is for (its destination address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dst {
    /// The other NIC.
    Peer,
    /// The sending NIC itself (its eswitch delivers it, not the wire).
    Own,
    /// Broadcast.
    Broadcast,
    /// Six fuzzed bytes.
    Raw([u8; 6]),
}

/// One transmit descriptor and the frame the harness writes into its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tx {
    /// The buffer.
    pub buffer: Buffer,
    /// The length field.
    pub len: Len,
    /// The frame's destination.
    pub dst: Dst,
    /// Seed of the frame's payload bytes.
    pub seed: u8,
}

/// A receive descriptor's capacity field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// 0.
    Zero,
    /// The largest frame the MTU allows.
    Max,
    /// Up to 2 KiB.
    Small(u16),
    /// Any value.
    Any(u32),
}

/// One receive descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rx {
    /// The buffer.
    pub buffer: Buffer,
    /// Its capacity.
    pub capacity: Capacity,
}

/// A doorbell's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// `TAIL + n`: valid while the ring has room.
    Ahead(u16),
    /// `HEAD - 1 - n` (wrapping): behind the head.
    Behind(u8),
    /// `HEAD + SIZE + 1 + n`: too far ahead.
    Beyond(u8),
    /// Any value.
    Any(u64),
}

/// One thing a host does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A register read of BAR0 at any offset and width.
    Read { nic: u8, offset: u64, width: u8 },
    /// A register write of BAR0 at any offset and width.
    Write {
        nic: u8,
        offset: u64,
        width: u8,
        value: u64,
    },
    /// `BASE` then `SIZE` of a ring.
    SetRing {
        nic: u8,
        queue: u16,
        rx: bool,
        base: Base,
        size: u64,
    },
    /// Transmit descriptors written at `TAIL + skip` on (and their frames into their buffers).
    WriteTx {
        nic: u8,
        queue: u16,
        skip: u8,
        descriptors: Vec<Tx>,
    },
    /// Receive descriptors written at `TAIL` on (never into descriptors the NIC owns).
    PostRx {
        nic: u8,
        queue: u16,
        descriptors: Vec<Rx>,
    },
    /// A doorbell; without `drain` the next operation follows 300 ns later, while the NIC is
    /// still at work (the checks of that drain are then only the ones that need no count).
    Doorbell {
        nic: u8,
        queue: u16,
        rx: bool,
        drain: bool,
        tail: Tail,
    },
    /// The queue's `IRQ` register.
    Irq { nic: u8, queue: u16, value: u64 },
}

impl Op {
    /// A doorbell with the direction (bit 0: receive) and drain (bits 1 and 2 set: no drain) of
    /// `flags`.
    fn with_flags(self, flags: u8) -> Op {
        match self {
            Op::Doorbell {
                nic, queue, tail, ..
            } => Op::Doorbell {
                nic,
                queue,
                rx: flags & 1 != 0,
                drain: flags & 6 != 6,
                tail,
            },
            other => other,
        }
    }

    /// A doorbell with `tail`.
    fn with_tail(self, tail: Tail) -> Op {
        match self {
            Op::Doorbell {
                nic,
                queue,
                rx,
                drain,
                ..
            } => Op::Doorbell {
                nic,
                queue,
                rx,
                drain,
                tail,
            },
            other => other,
        }
    }
}

fn queue(i: &mut Input) -> u16 {
    // Mostly queue pair 0 (the one the receive path uses first), sometimes any.
    match i.u8() {
        n @ 0..=191 => u16::from(n % 2),
        n => u16::from(n % 8),
    }
}

fn buffer(i: &mut Input) -> Buffer {
    match i.u8() % 8 {
        0..=4 => Buffer::Area(i.u8(), i.u16() % 1024),
        5 => Buffer::Unmapped(i.u16()),
        6 => Buffer::EndOfRam(i.u16() % 64),
        _ => Buffer::Any(i.u64()),
    }
}

fn dst(i: &mut Input) -> Dst {
    match i.u8() % 6 {
        0..=2 => Dst::Peer,
        3 => Dst::Own,
        4 => Dst::Broadcast,
        _ => Dst::Raw(i.bytes()),
    }
}

fn len(i: &mut Input) -> Len {
    match i.u8() % 10 {
        0 => Len::Zero,
        1 => Len::Short(1 + i.u8() % 13),
        2 => Len::Header,
        3 => Len::Max,
        4 => Len::TooLong(i.u8()),
        5 => Len::Any(i.u32()),
        _ => Len::Small(i.u16() % 1024),
    }
}

fn capacity(i: &mut Input) -> Capacity {
    match i.u8() % 6 {
        0 => Capacity::Zero,
        1 | 2 => Capacity::Max,
        3 => Capacity::Any(i.u32()),
        _ => Capacity::Small(i.u16() % 2048),
    }
}

fn size(i: &mut Input) -> u64 {
    match i.u8() % 12 {
        0 => 0,
        1..=3 => 8,
        4 | 5 => 16,
        6 => 64,
        7 => 4096,
        8 => 8192,
        9 => 3,
        10 => 4,
        _ => i.u64(),
    }
}

fn offset(i: &mut Input) -> u64 {
    match i.u8() % 6 {
        0 => u64::from(i.u8() % 0x60),
        1 | 2 => 0x1000 + u64::from(i.u8() % 9) * 0x100 + u64::from(i.u8() % 0x60),
        3 => 0x8000 + u64::from(i.u8()),
        4 => 0x9000 + u64::from(i.u8() % 16),
        _ => u64::from(i.u32() % 0x2_0000),
    }
}

fn width(i: &mut Input) -> u8 {
    match i.u8() % 8 {
        0..=3 => 8,
        4 => 4,
        5 => 2,
        6 => 1,
        _ => 16,
    }
}

/// Decodes `data` into at most [`MAX_OPS`] operations.
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut i = Input::new(data);
    let mut ops = Vec::new();
    while !i.is_empty() && ops.len() < MAX_OPS {
        let kind = i.u8() % 8;
        let nic = i.u8() % 2;
        let op = match kind {
            0 => Op::Read {
                nic,
                offset: offset(&mut i),
                width: width(&mut i),
            },
            1 => Op::Write {
                nic,
                offset: offset(&mut i),
                width: width(&mut i),
                value: match i.u8() % 4 {
                    0 => u64::from(i.u8()),
                    _ => i.u64(),
                },
            },
            2 => Op::SetRing {
                nic,
                queue: queue(&mut i),
                rx: i.bool(),
                base: match i.u8() % 8 {
                    0..=4 => Base::Slot,
                    5 => Base::Misaligned(1 + i.u8() % 127),
                    6 => Base::Unmapped,
                    _ => match i.bool() {
                        true => Base::EndOfRam(i.u8() % 4),
                        false => Base::Any(i.u64()),
                    },
                },
                size: size(&mut i),
            },
            3 | 4 => {
                let (queue, skip) = (queue(&mut i), i.u8() % 4);
                let n = 1 + i.below(MAX_DESCRIPTORS);
                let descriptors = (0..n)
                    .map(|_| Tx {
                        buffer: buffer(&mut i),
                        len: len(&mut i),
                        dst: dst(&mut i),
                        seed: i.u8(),
                    })
                    .collect();
                Op::WriteTx {
                    nic,
                    queue,
                    skip,
                    descriptors,
                }
            }
            5 => {
                let queue = queue(&mut i);
                let n = 1 + i.below(MAX_DESCRIPTORS);
                let descriptors = (0..n)
                    .map(|_| Rx {
                        buffer: buffer(&mut i),
                        capacity: capacity(&mut i),
                    })
                    .collect();
                Op::PostRx {
                    nic,
                    queue,
                    descriptors,
                }
            }
            6 => Op::Doorbell {
                nic,
                queue: queue(&mut i),
                rx: false,
                drain: true,
                tail: Tail::Any(0),
            }
            .with_flags(i.u8())
            .with_tail(match i.u8() % 8 {
                0..=4 => Tail::Ahead(u16::from(i.u8() % 20)),
                5 => Tail::Behind(i.u8()),
                6 => Tail::Beyond(i.u8()),
                _ => Tail::Any(i.u64()),
            }),
            _ => Op::Irq {
                nic,
                queue: queue(&mut i),
                value: u64::from(i.u8() % 4),
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
    fn the_empty_input_decodes_to_no_operations() {
        assert!(decode(&[]).is_empty());
    }

    #[test]
    fn operations_are_bounded_in_number_and_descriptors() {
        let ops = decode(&[0xff; 4096]);
        assert!(ops.len() <= MAX_OPS);
        for op in ops {
            if let Op::WriteTx { descriptors, .. } = op {
                assert!(descriptors.len() <= MAX_DESCRIPTORS);
            }
        }
    }

    #[test]
    fn a_doorbell_skips_its_drain_only_with_bits_1_and_2_of_its_flags() {
        let bell = |flags| match decode(&[6, 0, 0, flags, 0, 3]).first() {
            Some(Op::Doorbell {
                rx, drain, tail, ..
            }) => (*rx, *drain, *tail),
            other => panic!("not a doorbell: {other:?}"),
        };
        assert_eq!(bell(0), (false, true, Tail::Ahead(3)));
        assert_eq!(bell(1), (true, true, Tail::Ahead(3)));
        assert_eq!(bell(2), (false, true, Tail::Ahead(3)));
        assert_eq!(bell(7), (true, false, Tail::Ahead(3)));
    }

    #[test]
    fn a_ring_set_up_decodes_its_fields_in_order() {
        // kind 2, nic 1, queue byte 0 (pair 0), rx, base Slot, size byte 1 (8 entries).
        assert_eq!(
            decode(&[2, 1, 0, 1, 0, 1]),
            vec![Op::SetRing {
                nic: 1,
                queue: 0,
                rx: true,
                base: Base::Slot,
                size: 8
            }]
        );
    }
}
