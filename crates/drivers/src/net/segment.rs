//! The transport's segment: what travels in one Ethernet frame's payload.
//!
//! The header is [`HEADER_BYTES`] = 40 bytes, as large as the IPv4 + TCP headers (20 + 20) it
//! stands for, so a segment costs the wire what a TCP segment would; its fields are TCP's
//! (RFC 9293 §3.1) in a simpler layout: ports, flags, an advertised receive window and 64-bit
//! byte sequence numbers (no wrap-around to handle). Frames carry it under the EtherType
//! [`ETHERTYPE`].

use thiserror::Error;

/// IEEE 802 "local experimental" EtherType 1, which carries this transport.
pub const ETHERTYPE: u16 = 0x88b5;

/// Bytes of a segment header (the IPv4 + TCP header size it stands for).
pub const HEADER_BYTES: usize = 40;

/// Segment flags, TCP's names.
pub mod flags {
    /// Opens a connection; takes one sequence number.
    pub const SYN: u8 = 1 << 0;
    /// `ack` is valid.
    pub const ACK: u8 = 1 << 1;
    /// The sender has no more data; takes one sequence number.
    pub const FIN: u8 = 1 << 2;
    /// No such connection.
    pub const RST: u8 = 1 << 3;
    /// Every flag this transport knows.
    pub const ALL: u8 = SYN | ACK | FIN | RST;
}

/// A segment: header fields and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The sender's port.
    pub src_port: u16,
    /// The receiver's port.
    pub dst_port: u16,
    /// [`flags`].
    pub flags: u8,
    /// Bytes the sender can still receive beyond `ack`.
    pub window: u32,
    /// Sequence number of the first payload byte (or of the SYN / FIN).
    pub seq: u64,
    /// Next sequence number the sender expects (with [`flags::ACK`]).
    pub ack: u64,
    /// Data.
    pub payload: Vec<u8>,
}

/// Why a frame payload is not a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SegmentError {
    /// Fewer bytes than a header.
    #[error("{len} bytes: shorter than the {HEADER_BYTES}-byte segment header")]
    Truncated {
        /// Bytes given.
        len: usize,
    },
    /// The length field disagrees with the bytes that follow the header.
    #[error("length field says {said} payload bytes, {present} follow the header")]
    BadLength {
        /// The length field.
        said: usize,
        /// Bytes after the header.
        present: usize,
    },
    /// Flag bits this transport does not define.
    #[error("unknown flag bits {0:#04x}")]
    UnknownFlags(u8),
}

// Header layout (byte offsets).
const SRC_PORT: usize = 0;
const DST_PORT: usize = 2;
const FLAGS: usize = 4;
const WINDOW: usize = 8;
const SEQ: usize = 12;
const ACK: usize = 20;
const LENGTH: usize = 28;

impl Segment {
    /// Sequence numbers the segment occupies: its payload, plus one each for SYN and FIN.
    pub fn seq_len(&self) -> u64 {
        let control =
            u64::from(self.flags & flags::SYN != 0) + u64::from(self.flags & flags::FIN != 0);
        self.payload.len() as u64 + control
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag == flag
    }

    /// The segment's bytes: header then payload.
    ///
    /// Invariant: payloads are at most an MTU (9000 bytes), so the length fits its 16 bits;
    /// the stack never builds a larger one.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.payload.len());
        out.resize(HEADER_BYTES, 0);
        out[SRC_PORT..SRC_PORT + 2].copy_from_slice(&self.src_port.to_be_bytes());
        out[DST_PORT..DST_PORT + 2].copy_from_slice(&self.dst_port.to_be_bytes());
        out[FLAGS] = self.flags;
        out[WINDOW..WINDOW + 4].copy_from_slice(&self.window.to_be_bytes());
        out[SEQ..SEQ + 8].copy_from_slice(&self.seq.to_be_bytes());
        out[ACK..ACK + 8].copy_from_slice(&self.ack.to_be_bytes());
        let len = u16::try_from(self.payload.len()).unwrap_or(u16::MAX);
        out[LENGTH..LENGTH + 2].copy_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// The segment in `bytes` (a frame's payload; bytes past the length field's count, such as
    /// Ethernet padding, are ignored).
    pub fn decode(bytes: &[u8]) -> Result<Segment, SegmentError> {
        if bytes.len() < HEADER_BYTES {
            return Err(SegmentError::Truncated { len: bytes.len() });
        }
        let u16_at = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_be_bytes(b)
        };
        let flag_bits = bytes[FLAGS];
        if flag_bits & !flags::ALL != 0 {
            return Err(SegmentError::UnknownFlags(flag_bits & !flags::ALL));
        }
        let said = usize::from(u16_at(LENGTH));
        let present = bytes.len() - HEADER_BYTES;
        if said > present {
            return Err(SegmentError::BadLength { said, present });
        }
        Ok(Segment {
            src_port: u16_at(SRC_PORT),
            dst_port: u16_at(DST_PORT),
            flags: flag_bits,
            window: u32_at(WINDOW),
            seq: u64_at(SEQ),
            ack: u64_at(ACK),
            payload: bytes[HEADER_BYTES..HEADER_BYTES + said].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data(seq: u64) -> Segment {
        Segment {
            src_port: 5001,
            dst_port: 40000,
            flags: flags::ACK,
            window: 1 << 20,
            seq,
            ack: 7,
            payload: b"iperf".to_vec(),
        }
    }

    #[test]
    fn a_segment_round_trips_and_ignores_ethernet_padding() {
        let s = data(1 << 40);
        let mut bytes = s.encode();
        assert_eq!(bytes.len(), HEADER_BYTES + 5);
        bytes.extend_from_slice(&[0; 11]);
        assert_eq!(Segment::decode(&bytes), Ok(s));
    }

    #[test]
    fn short_lying_and_unknown_flag_segments_are_refused() {
        assert_eq!(
            Segment::decode(&[0; 39]),
            Err(SegmentError::Truncated { len: 39 })
        );
        let mut bytes = data(0).encode();
        bytes.truncate(HEADER_BYTES + 2);
        assert_eq!(
            Segment::decode(&bytes),
            Err(SegmentError::BadLength {
                said: 5,
                present: 2
            })
        );
        let mut bytes = data(0).encode();
        bytes[FLAGS] |= 0x40;
        assert_eq!(
            Segment::decode(&bytes),
            Err(SegmentError::UnknownFlags(0x40))
        );
    }

    #[test]
    fn syn_and_fin_take_one_sequence_number_each() {
        let mut s = data(0);
        assert_eq!(s.seq_len(), 5);
        s.flags |= flags::SYN | flags::FIN;
        assert_eq!(s.seq_len(), 7);
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(s) = Segment::decode(&bytes) {
                prop_assert_eq!(Segment::decode(&s.encode()), Ok(s));
            }
        }
    }
}
