//! What the host does to the NVMe controller, decoded from fuzzer bytes.
//!
//! Most operations are the commands and register writes a driver issues, with fields the
//! input chooses (queue ids, sizes, namespaces, LBA ranges, PRP layouts); the rest are
//! arbitrary: a 64-byte submission queue entry, a doorbell write of any value at any
//! doorbell, a register write of any value, eight bytes poked into the PRP scratch area.

use crate::input::Input;

/// At most this many operations per input.
pub const MAX_OPS: usize = 200;

/// How the data buffer of a read or write is described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrpShape {
    /// PRP1 (page aligned), PRP2 or a PRP list as a driver builds them.
    Aligned,
    /// PRP1 with a dword-aligned offset into its page, then PRP2 or a list.
    Offset(u16),
    /// PRP1 not dword aligned (PRP Offset Invalid).
    Misaligned,
    /// PRP1/PRP2 point into the scratch area (whatever the input poked there).
    Scratch(u32, u32),
    /// PRP1 and PRP2 taken from the input.
    Arbitrary(u64, u64),
}

/// One thing the host does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Program the admin queues (sizes 0-based, as AQA holds them) and set CC.EN; wait for
    /// CSTS.RDY (or CFS). A running controller is reset first.
    Enable {
        /// AQA.ASQS.
        asqs: u16,
        /// AQA.ACQS.
        acqs: u16,
        /// Extra CC bits ORed in (CSS, MPS, AMS, SHN).
        cc_extra: u32,
    },
    /// CC.EN = 0; wait for CSTS.RDY = 0.
    Disable,
    /// A register store of any value (CC, AQA, ASQ, ACQ, INTMS/INTMC, read-only ones...).
    WriteRegister {
        /// Offset in BAR0 (below the doorbells).
        offset: u64,
        /// Value.
        value: u64,
        /// 4 or 8 bytes.
        wide: bool,
    },
    /// Create I/O Completion Queue.
    CreateCq {
        /// QID.
        qid: u16,
        /// QSIZE (0-based).
        qsize: u16,
        /// Interrupts enabled, with this vector.
        vector: Option<u16>,
        /// Use the harness's memory for it (else PRP1 from `base`).
        managed: bool,
        /// PRP1 when not managed.
        base: u64,
        /// Physically contiguous bit.
        contiguous: bool,
    },
    /// Create I/O Submission Queue.
    CreateSq {
        /// QID.
        qid: u16,
        /// QSIZE (0-based).
        qsize: u16,
        /// The completion queue.
        cqid: u16,
        /// Where: 0 host memory of the harness, 1 the controller memory buffer, 2 `base`.
        place: u8,
        /// PRP1 when placed arbitrarily.
        base: u64,
    },
    /// Delete I/O Submission Queue.
    DeleteSq(u16),
    /// Delete I/O Completion Queue.
    DeleteCq(u16),
    /// Write, Read or Write Zeroes of a range, through the input's I/O queue choice.
    Rw {
        /// Which known I/O queue (index among them), or SQ `qid` when none is known.
        queue: u8,
        /// `io::WRITE`, `io::READ`, `io::WRITE_ZEROES`, `io::FLUSH`, an unknown opcode, or
        /// `io::DATASET_MANAGEMENT` (its list of 1..=4 ranges chosen by `seed`).
        opcode: u8,
        /// Namespace.
        nsid: u32,
        /// First LBA.
        slba: u64,
        /// NLB (0-based).
        nlb: u16,
        /// Buffer description.
        prp: PrpShape,
        /// A Dataset Management's ranges less one (bits 1:0), with bit 2 clear its
        /// Deallocate attribute, and bits 7:3 for CDW10's reserved bits.
        seed: u8,
    },
    /// An admin command with chosen fields: Identify, Get Log Page, Get/Set Features, Abort.
    Admin {
        /// Opcode.
        opcode: u8,
        /// NSID.
        nsid: u32,
        /// CDW10..12.
        cdw: [u32; 3],
    },
    /// An arbitrary 64-byte entry (its command id replaced by the harness's) on SQ `qid`
    /// (0 = admin, else the index among known I/O queues).
    RawSqe {
        /// Queue choice.
        queue: u8,
        /// The entry.
        entry: [u8; 64],
        /// Point PRP1/PRP2 into the scratch area.
        scratch_prps: bool,
    },
    /// A store of `value` to doorbell `index` (SQ `index / 2` tail, or CQ head when odd).
    Doorbell {
        /// Doorbell number (0..1024 covers the doorbell page).
        index: u16,
        /// Value.
        value: u32,
    },
    /// Eight bytes into the PRP scratch area at `offset` (a PRP list entry, say).
    Poke {
        /// Offset in the scratch area.
        offset: u32,
        /// The bytes; when `pointer`, an address inside the scratch area instead.
        value: u64,
        /// Store a scratch address (`value` is then an offset) rather than `value`.
        pointer: bool,
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

fn small_qid(i: &mut Input) -> u16 {
    let b = i.u8();
    if b >= 0xf0 {
        i.u16()
    } else {
        u16::from(b % 6)
    }
}

fn qsize(i: &mut Input) -> u16 {
    match i.u8() % 8 {
        0 => 0,
        1 => 1,
        2 => 3,
        3 => 7,
        4 => 31,
        5 => 255,
        6 => 4095,
        _ => i.u16(),
    }
}

fn decode_one(i: &mut Input) -> Op {
    match i.u8() % 16 {
        0 => Op::Enable {
            asqs: qsize(i),
            acqs: qsize(i),
            cc_extra: if i.u8() >= 0xe0 { i.u32() } else { 0 },
        },
        1 => Op::Disable,
        2 => {
            let offset = match i.u8() % 10 {
                0 => 0x14, // CC
                1 => 0x24, // AQA
                2 => 0x28, // ASQ
                3 => 0x2c, // ASQ high
                4 => 0x30, // ACQ
                5 => 0x34, // ACQ high
                6 => 0x0c, // INTMS
                7 => 0x10, // INTMC
                8 => 0x00, // CAP (read-only)
                _ => u64::from(i.u16() & 0xffc),
            };
            Op::WriteRegister {
                offset,
                value: i.u64(),
                wide: i.bool(),
            }
        }
        3 => {
            let qid = small_qid(i);
            let qsize = qsize(i);
            let flags = i.u8();
            Op::CreateCq {
                qid,
                qsize,
                vector: (flags & 1 != 0).then(|| u16::from(i.u8())),
                managed: flags & 2 == 0,
                base: if flags & 2 == 0 { 0 } else { i.u64() },
                contiguous: flags & 4 == 0,
            }
        }
        4 => {
            let qid = small_qid(i);
            let qsize = qsize(i);
            let cqid = small_qid(i);
            let place = i.u8() % 3;
            Op::CreateSq {
                qid,
                qsize,
                cqid,
                place,
                base: if place == 2 { i.u64() } else { 0 },
            }
        }
        5 => Op::DeleteSq(small_qid(i)),
        6 => Op::DeleteCq(small_qid(i)),
        7..=9 => decode_rw(i),
        10 => {
            let opcode = i
                .pick(&[0x06, 0x02, 0x0a, 0x09, 0x08, 0x0c])
                .unwrap_or(0x06);
            Op::Admin {
                opcode,
                nsid: match i.u8() % 4 {
                    0 => 0,
                    1 => 1,
                    2 => u32::MAX,
                    _ => i.u32(),
                },
                cdw: [i.u32(), i.u32(), i.u32()],
            }
        }
        11 | 12 => Op::RawSqe {
            queue: i.u8(),
            entry: i.bytes::<64>(),
            scratch_prps: i.bool(),
        },
        13 => Op::Doorbell {
            index: i.u16() % 1024,
            value: match i.u8() % 4 {
                0 => u32::from(i.u8()),
                1 => u32::from(i.u16()),
                _ => i.u32(),
            },
        },
        14 => Op::Poke {
            offset: u32::from(i.u16()) * 8,
            value: i.u64(),
            pointer: i.bool(),
        },
        _ => Op::Wait(i.u8()),
    }
}

fn decode_rw(i: &mut Input) -> Op {
    let queue = i.u8();
    let opcode = i
        .pick(&[0x01, 0x02, 0x01, 0x02, 0x08, 0x00, 0x05, 0x09])
        .unwrap_or(0x02);
    let nsid = match i.u8() % 8 {
        0 => 0,
        1 => 2,
        2 => 3,
        3 => u32::MAX,
        _ => 1,
    };
    let slba = match i.u8() % 4 {
        0 => i.u64(),
        1 => u64::from(i.u32()),
        _ => u64::from(i.u8()),
    };
    let nlb = match i.u8() % 4 {
        0 => i.u16(),
        1 => u16::from(i.u8()),
        _ => u16::from(i.u8() % 16),
    };
    let prp = match i.u8() % 8 {
        0 => PrpShape::Offset(i.u16() & 0xffc),
        1 => PrpShape::Misaligned,
        2 => PrpShape::Scratch(i.u32(), i.u32()),
        3 => PrpShape::Arbitrary(i.u64(), i.u64()),
        _ => PrpShape::Aligned,
    };
    Op::Rw {
        queue,
        opcode,
        nsid,
        slba,
        nlb,
        prp,
        seed: i.u8(),
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
        let data = vec![1u8; 10_000]; // Disable, repeated
        let ops = decode(&data);
        assert_eq!(ops.len(), MAX_OPS);
        assert!(ops.iter().all(|o| *o == Op::Disable));
    }

    #[test]
    fn an_enable_takes_its_queue_sizes_from_the_input() {
        assert_eq!(
            decode(&[0, 3, 6, 0]),
            [Op::Enable {
                asqs: 7,
                acqs: 4095,
                cc_extra: 0
            }]
        );
    }
}
