//! The NVM command set's I/O commands (NVM Command Set 1.4 §6): opcodes, and Read, Write,
//! Flush, Write Zeroes and Dataset Management with their fields named.
//!
//! As for admin commands, [`IoCommand`] is built by drivers and decoded by the controller;
//! decoding is total and range checks are the controller's. Bits not used here (FUA, LR,
//! protection information, Dataset Management's access hints and context attributes) are dropped.

use super::command::Command;

/// Flush.
pub const FLUSH: u8 = 0x00;
/// Write.
pub const WRITE: u8 = 0x01;
/// Read.
pub const READ: u8 = 0x02;
/// Write Zeroes.
pub const WRITE_ZEROES: u8 = 0x08;
/// Dataset Management.
pub const DATASET_MANAGEMENT: u8 = 0x09;

/// Most ranges one Dataset Management command names (its 8-bit, 0-based Number of Ranges).
pub const MAX_DSM_RANGES: u16 = 256;

/// Flush's namespace id meaning every namespace.
pub const ALL_NAMESPACES: u32 = 0xffff_ffff;

/// The block range of a Read, Write or Write Zeroes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRange {
    /// Namespace id (dword 1).
    pub nsid: u32,
    /// Starting LBA: CDW10 (low) and CDW11 (high).
    pub slba: u64,
    /// Number of Logical Blocks, 0-based (CDW12 15:0).
    pub nlb: u16,
}

impl BlockRange {
    /// `blocks` blocks (1..=65536) at `slba` of `nsid`; `blocks` outside that range is
    /// clamped into it, so a caller checks it first.
    pub fn new(nsid: u32, slba: u64, blocks: u32) -> BlockRange {
        BlockRange {
            nsid,
            slba,
            nlb: blocks.clamp(1, 1 << 16).saturating_sub(1) as u16,
        }
    }

    /// Blocks in the range (NLB + 1).
    pub fn blocks(&self) -> u64 {
        u64::from(self.nlb) + 1
    }
}

/// An I/O command with its fields named. Read and Write move data through the command's
/// data pointer (set with [`Command::with_prps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCommand {
    /// Read.
    Read(BlockRange),
    /// Write.
    Write(BlockRange),
    /// Flush the volatile write cache of a namespace (or [`ALL_NAMESPACES`]).
    Flush {
        /// Namespace id.
        nsid: u32,
    },
    /// Write Zeroes (no data pointer).
    WriteZeroes(BlockRange),
    /// Dataset Management: the data pointer holds `ranges` [`DsmRange`]s; with `deallocate`
    /// (the AD attribute) their blocks are deallocated.
    DatasetManagement {
        /// Namespace id.
        nsid: u32,
        /// Ranges in the list, 1..=[`MAX_DSM_RANGES`] (CDW10 7:0 holds it 0-based; a
        /// caller's value outside is clamped into it).
        ranges: u16,
        /// Attribute – Deallocate (CDW11 bit 2).
        deallocate: bool,
    },
    /// An opcode this controller does not implement (Invalid Command Opcode).
    Unsupported(u8),
}

impl IoCommand {
    /// The opcode.
    pub fn opcode(&self) -> u8 {
        match self {
            IoCommand::Read(_) => READ,
            IoCommand::Write(_) => WRITE,
            IoCommand::Flush { .. } => FLUSH,
            IoCommand::WriteZeroes(_) => WRITE_ZEROES,
            IoCommand::DatasetManagement { .. } => DATASET_MANAGEMENT,
            IoCommand::Unsupported(op) => *op,
        }
    }
}

impl From<IoCommand> for Command {
    /// The command's dwords (command id 0, data pointer clear).
    fn from(io: IoCommand) -> Command {
        let c = Command {
            opcode: io.opcode(),
            ..Command::default()
        };
        match io {
            IoCommand::Read(r) | IoCommand::Write(r) | IoCommand::WriteZeroes(r) => Command {
                nsid: r.nsid,
                cdw: [
                    r.slba as u32,
                    (r.slba >> 32) as u32,
                    u32::from(r.nlb),
                    0,
                    0,
                    0,
                ],
                ..c
            },
            IoCommand::Flush { nsid } => Command { nsid, ..c },
            IoCommand::DatasetManagement {
                nsid,
                ranges,
                deallocate,
            } => Command {
                nsid,
                cdw: [
                    u32::from(ranges.clamp(1, MAX_DSM_RANGES) - 1),
                    u32::from(deallocate) << 2,
                    0,
                    0,
                    0,
                    0,
                ],
                ..c
            },
            IoCommand::Unsupported(_) => c,
        }
    }
}

impl From<&Command> for IoCommand {
    fn from(c: &Command) -> IoCommand {
        let range = || BlockRange {
            nsid: c.nsid,
            slba: c.cdw10_11(),
            nlb: (c.cdw(12) & 0xffff) as u16,
        };
        match c.opcode {
            READ => IoCommand::Read(range()),
            WRITE => IoCommand::Write(range()),
            FLUSH => IoCommand::Flush { nsid: c.nsid },
            WRITE_ZEROES => IoCommand::WriteZeroes(range()),
            DATASET_MANAGEMENT => IoCommand::DatasetManagement {
                nsid: c.nsid,
                ranges: (c.cdw(10) & 0xff) as u16 + 1,
                deallocate: c.cdw(11) & (1 << 2) != 0,
            },
            op => IoCommand::Unsupported(op),
        }
    }
}

/// One range of a Dataset Management command's list (16 bytes in the host's memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DsmRange {
    /// Starting LBA (bytes 15:8).
    pub slba: u64,
    /// Length in logical blocks, not 0-based (bytes 7:4); 0 names no block.
    pub blocks: u32,
}

impl DsmRange {
    /// Bytes of one range in the list.
    pub const SIZE: usize = 16;

    /// The range as it sits in the list (context attributes 0).
    pub fn encode(&self) -> [u8; DsmRange::SIZE] {
        let mut b = [0u8; DsmRange::SIZE];
        b[4..8].copy_from_slice(&self.blocks.to_le_bytes());
        b[8..16].copy_from_slice(&self.slba.to_le_bytes());
        b
    }

    /// The range in `b`'s 16 bytes (the context attributes are dropped).
    pub fn decode(b: &[u8; DsmRange::SIZE]) -> DsmRange {
        let mut blocks = [0u8; 4];
        let mut slba = [0u8; 8];
        blocks.copy_from_slice(&b[4..8]);
        slba.copy_from_slice(&b[8..16]);
        DsmRange {
            slba: u64::from_le_bytes(slba),
            blocks: u32::from_le_bytes(blocks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_read_names_its_range_in_cdw10_to_cdw12() {
        let c = Command::from(IoCommand::Read(BlockRange::new(1, 0x1_0000_0007, 8)));
        assert_eq!((c.opcode, c.nsid), (READ, 1));
        assert_eq!(c.cdw, [7, 1, 7, 0, 0, 0]);
        let flush = Command::from(IoCommand::Flush {
            nsid: ALL_NAMESPACES,
        });
        assert_eq!(
            (flush.opcode, flush.nsid, flush.cdw),
            (FLUSH, u32::MAX, [0; 6])
        );
    }

    #[test]
    fn dataset_management_counts_ranges_zero_based_and_deallocate_is_cdw11_bit_2() {
        let c = Command::from(IoCommand::DatasetManagement {
            nsid: 1,
            ranges: 256,
            deallocate: true,
        });
        assert_eq!((c.opcode, c.nsid), (DATASET_MANAGEMENT, 1));
        assert_eq!(c.cdw, [255, 4, 0, 0, 0, 0]);
        let hints_only = Command {
            cdw: [0, 0b11, 0, 0, 0, 0], // IDR and IDW, no AD
            ..c
        };
        assert_eq!(
            IoCommand::from(&hints_only),
            IoCommand::DatasetManagement {
                nsid: 1,
                ranges: 1,
                deallocate: false
            }
        );
        let r = DsmRange {
            slba: 0x1122_3344_5566_7788,
            blocks: 8,
        };
        let b = r.encode();
        assert_eq!(&b[..8], &[0, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(DsmRange::decode(&b), r);
    }

    #[test]
    fn block_counts_are_zero_based_and_upper_cdw12_bits_are_not_the_count() {
        assert_eq!(BlockRange::new(1, 0, 65536).nlb, 0xffff);
        assert_eq!(BlockRange::new(1, 0, 1).blocks(), 1);
        let c = Command {
            opcode: WRITE,
            nsid: 1,
            cdw: [0, 0, (1 << 30) | 3, 0, 0, 0], // FUA and NLB 3
            ..Command::default()
        };
        let IoCommand::Write(r) = IoCommand::from(&c) else {
            panic!("a write");
        };
        assert_eq!(r.blocks(), 4);
    }

    fn any_io() -> impl Strategy<Value = IoCommand> {
        let range = (any::<u32>(), any::<u64>(), any::<u16>())
            .prop_map(|(nsid, slba, nlb)| BlockRange { nsid, slba, nlb });
        prop_oneof![
            range.clone().prop_map(IoCommand::Read),
            range.clone().prop_map(IoCommand::Write),
            range.prop_map(IoCommand::WriteZeroes),
            any::<u32>().prop_map(|nsid| IoCommand::Flush { nsid }),
            (any::<u32>(), 1..=MAX_DSM_RANGES, any::<bool>()).prop_map(
                |(nsid, ranges, deallocate)| IoCommand::DatasetManagement {
                    nsid,
                    ranges,
                    deallocate
                }
            ),
            any::<u8>()
                .prop_filter("not an implemented opcode", |op| {
                    ![READ, WRITE, FLUSH, WRITE_ZEROES, DATASET_MANAGEMENT].contains(op)
                })
                .prop_map(IoCommand::Unsupported),
        ]
    }

    proptest! {
        #[test]
        fn io_commands_round_trip_through_their_wire_format(io in any_io(), cid in any::<u16>()) {
            let c = Command { cid, ..Command::from(io) };
            let (wire, _) = Command::decode(&c.encode());
            prop_assert_eq!(wire.cid, cid);
            prop_assert_eq!(IoCommand::from(&wire), io);
        }
    }
}
