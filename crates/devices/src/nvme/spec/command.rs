//! The submission queue entry (NVMe 1.4 §4.2): 64 bytes, sixteen little-endian dwords.
//!
//! ```text
//! dword 0    opcode 7:0, FUSE 9:8, PSDT 15:14, command identifier 31:16
//! dword 1    namespace id
//! dwords 6-7 PRP entry 1 (data pointer, or a queue's base)
//! dwords 8-9 PRP entry 2 (a page, or a PRP list pointer)
//! dwords 10-15 command specific (CDW10..CDW15)
//! ```
//!
//! [`Command`] is the entry by its dwords; the typed commands in [`super::admin`] and
//! [`super::io`] give the command-specific dwords their names.

/// Bytes per submission queue entry.
pub const SQE_SIZE: usize = 64;

/// A submission queue entry (command), by its dwords.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Command {
    /// Opcode.
    pub opcode: u8,
    /// Command identifier, echoed in the completion.
    pub cid: u16,
    /// Namespace id.
    pub nsid: u32,
    /// PRP entry 1.
    pub prp1: u64,
    /// PRP entry 2 (a page or a PRP list pointer).
    pub prp2: u64,
    /// Command dwords 10..=15.
    pub cdw: [u32; 6],
}

/// The bits of dword 0 beside opcode and command id: FUSE (9:8) and PSDT (15:14). Non-zero
/// means the host asked for something this controller does not do (fused operations,
/// SGLs); the reserved bits 13:10 are ignored, as the specification allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// Fused Operation (0 = normal).
    pub fuse: u8,
    /// PRP or SGL for Data Transfer (0 = PRPs).
    pub psdt: u8,
}

impl Flags {
    /// A plain command: not fused, data described by PRPs.
    pub fn is_plain(self) -> bool {
        self.fuse == 0 && self.psdt == 0
    }

    /// The flags of byte 1 of dword 0.
    pub fn from_byte(byte: u8) -> Flags {
        Flags {
            fuse: byte & 3,
            psdt: byte >> 6,
        }
    }

    /// Byte 1 of dword 0 with these flags (reserved bits clear).
    pub fn byte(self) -> u8 {
        (self.fuse & 3) | ((self.psdt & 3) << 6)
    }
}

impl Command {
    /// Command dword `n` (10..=15).
    pub fn cdw(&self, n: usize) -> u32 {
        self.cdw[n - 10]
    }

    /// CDW10 and CDW11 as one quadword (low, high): a Read's or Write's SLBA, and what an
    /// error log entry reports as the LBA of any failed command.
    pub fn cdw10_11(&self) -> u64 {
        u64::from(self.cdw[0]) | (u64::from(self.cdw[1]) << 32)
    }

    /// This command with its data pointer set to `prp1`/`prp2`.
    #[must_use]
    pub fn with_prps(self, prp1: u64, prp2: u64) -> Command {
        Command { prp1, prp2, ..self }
    }

    /// The 64-byte wire format (FUSE and PSDT clear).
    pub fn encode(&self) -> [u8; SQE_SIZE] {
        self.encode_with(Flags::default())
    }

    /// The 64-byte wire format with `flags` in dword 0.
    pub fn encode_with(&self, flags: Flags) -> [u8; SQE_SIZE] {
        let mut b = [0u8; SQE_SIZE];
        let dw0 =
            u32::from(self.opcode) | (u32::from(flags.byte()) << 8) | (u32::from(self.cid) << 16);
        b[0..4].copy_from_slice(&dw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.nsid.to_le_bytes());
        b[24..32].copy_from_slice(&self.prp1.to_le_bytes());
        b[32..40].copy_from_slice(&self.prp2.to_le_bytes());
        for (i, dw) in self.cdw.iter().enumerate() {
            b[40 + 4 * i..44 + 4 * i].copy_from_slice(&dw.to_le_bytes());
        }
        b
    }

    /// Decodes the wire format. Dwords 2–5 (reserved, metadata pointer) are not kept.
    pub fn decode(b: &[u8; SQE_SIZE]) -> (Command, Flags) {
        let dw =
            |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        let qw = |i: usize| u64::from(dw(i)) | (u64::from(dw(i + 1)) << 32);
        let dw0 = dw(0);
        (
            Command {
                opcode: dw0 as u8,
                cid: (dw0 >> 16) as u16,
                nsid: dw(1),
                prp1: qw(6),
                prp2: qw(8),
                cdw: [dw(10), dw(11), dw(12), dw(13), dw(14), dw(15)],
            },
            Flags::from_byte((dw0 >> 8) as u8),
        )
    }

    /// The 64-byte wire format (as [`Command::encode`]).
    pub fn to_bytes(&self) -> [u8; SQE_SIZE] {
        self.encode()
    }

    /// Decodes the first 64 bytes of `b`; byte 1 of dword 0 (FUSE, PSDT and the reserved
    /// bits) is returned as the second value. Panics if `b` is shorter than an entry, which
    /// is a caller's bug: entries are read whole.
    pub fn from_bytes(b: &[u8]) -> (Command, u8) {
        let mut raw = [0u8; SQE_SIZE];
        raw.copy_from_slice(&b[..SQE_SIZE]);
        (Command::decode(&raw).0, raw[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_sit_where_the_specification_puts_them() {
        let c = Command {
            opcode: 0x02,
            cid: 0xbeef,
            nsid: 1,
            prp1: 0x1234_5000,
            prp2: 0x6789_a000,
            cdw: [7, 0, 15, 0, 0, 0xdead_0000],
        };
        let b = c.encode();
        assert_eq!(&b[0..4], &[0x02, 0, 0xef, 0xbe]);
        assert_eq!(&b[4..8], &1u32.to_le_bytes());
        assert_eq!(&b[24..32], &0x1234_5000u64.to_le_bytes());
        assert_eq!(&b[32..40], &0x6789_a000u64.to_le_bytes());
        assert_eq!(&b[40..44], &7u32.to_le_bytes());
        assert_eq!(&b[48..52], &15u32.to_le_bytes());
        assert_eq!(&b[60..64], &0xdead_0000u32.to_le_bytes());
        assert_eq!(Command::decode(&b), (c, Flags::default()));
        assert_eq!(Command::from_bytes(&b), (c, 0));
    }

    #[test]
    fn fused_and_sgl_flags_are_decoded_apart_from_reserved_bits() {
        let mut b = Command::default().encode();
        b[1] = 0b0011_1100; // reserved bits 13:10 only
        assert!(Command::decode(&b).1.is_plain());
        b[1] = 0x01;
        assert_eq!(Command::decode(&b).1, Flags { fuse: 1, psdt: 0 });
        b[1] = 0x40;
        assert_eq!(Command::decode(&b).1, Flags { fuse: 0, psdt: 1 });
        let f = Flags { fuse: 2, psdt: 1 };
        assert_eq!(Command::decode(&Command::default().encode_with(f)).1, f);
    }

    #[test]
    fn a_command_is_plain_only_with_neither_fuse_nor_psdt() {
        for (fuse, psdt, plain) in [(0, 0, true), (1, 0, false), (0, 1, false), (3, 2, false)] {
            assert_eq!(Flags { fuse, psdt }.is_plain(), plain, "{fuse} {psdt}");
        }
    }

    #[test]
    fn with_prps_sets_both_pointers_and_keeps_the_rest() {
        let c = Command {
            opcode: 2,
            cid: 9,
            nsid: 1,
            prp1: 1,
            prp2: 2,
            cdw: [3, 4, 5, 6, 7, 8],
        };
        let moved = c.with_prps(0x1000, 0x2000);
        assert_eq!(
            moved,
            Command {
                prp1: 0x1000,
                prp2: 0x2000,
                ..c
            }
        );
        assert_eq!(moved.to_bytes(), moved.encode());
        assert_eq!(Command::from_bytes(&moved.to_bytes()).0, moved);
    }

    fn any_command() -> impl Strategy<Value = Command> {
        (
            any::<u8>(),
            any::<u16>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<[u32; 6]>(),
        )
            .prop_map(|(opcode, cid, nsid, prp1, prp2, cdw)| Command {
                opcode,
                cid,
                nsid,
                prp1,
                prp2,
                cdw,
            })
    }

    proptest! {
        #[test]
        fn every_command_round_trips_through_its_wire_format(c in any_command(), fuse in 0u8..4, psdt in 0u8..4) {
            let flags = Flags { fuse, psdt };
            prop_assert_eq!(Command::decode(&c.encode_with(flags)), (c, flags));
        }

        #[test]
        fn every_entry_round_trips_apart_from_reserved_dwords(raw in any::<[u8; 64]>()) {
            let (c, flags) = Command::decode(&raw);
            let again = c.encode_with(flags);
            // Dwords 2..=5 (reserved and the metadata pointer) and bits 13:10 are dropped.
            prop_assert_eq!(&again[0..1], &raw[0..1]);
            prop_assert_eq!(again[1], raw[1] & 0xc3);
            prop_assert_eq!(&again[2..8], &raw[2..8]);
            prop_assert_eq!(&again[24..], &raw[24..]);
        }
    }
}
