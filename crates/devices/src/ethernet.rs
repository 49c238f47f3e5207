//! Ethernet frames as NICs and their drivers exchange them (IEEE 802.3 §3.1): a 14-byte
//! header — destination MAC, source MAC, EtherType — and a payload of up to the MTU. On the
//! wire a frame also carries a preamble and start delimiter (8 bytes), a frame check sequence
//! (4 bytes) and an inter-frame gap (12 byte times); those cost line time but are never in a
//! buffer, so they appear here only as [`WIRE_OVERHEAD_BYTES`].

use std::fmt;
use thiserror::Error;

/// Bytes of the Ethernet header: destination (6), source (6), EtherType (2).
pub const HEADER_BYTES: usize = 14;

/// Line time a frame costs beyond its header and payload: preamble + start-of-frame delimiter
/// (8), frame check sequence (4), inter-frame gap (12).
pub const WIRE_OVERHEAD_BYTES: usize = 24;

/// The smallest frame on the wire without FCS: shorter payloads are padded (IEEE 802.3 §3.2.8).
pub const MIN_FRAME_BYTES: usize = 60;

/// The standard MTU (payload bytes per frame) and the jumbo-frame MTU the papers' iperf runs
/// used (Paper V §7.1.6: "setting the Ethernet maximum transfer unit to 9,000 bytes").
pub const STANDARD_MTU: usize = 1500;
/// See [`STANDARD_MTU`].
pub const JUMBO_MTU: usize = 9000;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address, ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Whether frames to this address go to every port (group bit, the least significant bit
    /// of the first octet).
    pub const fn is_group(self) -> bool {
        self.0[0] & 1 == 1
    }

    /// The address as the low 48 bits of a `u64` (first octet most significant), the way a
    /// NIC register holds it.
    pub fn to_u64(self) -> u64 {
        self.0.iter().fold(0, |acc, &b| acc << 8 | u64::from(b))
    }

    /// The address held in the low 48 bits of `value` (the inverse of [`MacAddr::to_u64`];
    /// higher bits are ignored).
    pub fn from_u64(value: u64) -> MacAddr {
        let b = value.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why bytes are not an Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    /// Fewer bytes than a header.
    #[error("{len} bytes: shorter than the {HEADER_BYTES}-byte Ethernet header")]
    Truncated {
        /// Bytes given.
        len: usize,
    },
}

/// The header of an Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Destination.
    pub dst: MacAddr,
    /// Source.
    pub src: MacAddr,
    /// What the payload is (e.g. 0x0800 IPv4; this project's transport uses its own).
    pub ethertype: u16,
}

impl FrameHeader {
    /// The header at the start of `frame`.
    pub fn parse(frame: &[u8]) -> Result<FrameHeader, FrameError> {
        let header = frame
            .get(..HEADER_BYTES)
            .ok_or(FrameError::Truncated { len: frame.len() })?;
        let mac = |at: usize| {
            let mut m = [0u8; 6];
            m.copy_from_slice(&header[at..at + 6]);
            MacAddr(m)
        };
        Ok(FrameHeader {
            dst: mac(0),
            src: mac(6),
            ethertype: u16::from_be_bytes([header[12], header[13]]),
        })
    }

    /// The header's 14 bytes, EtherType in network order.
    pub fn to_bytes(self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[..6].copy_from_slice(&self.dst.0);
        out[6..12].copy_from_slice(&self.src.0);
        out[12..].copy_from_slice(&self.ethertype.to_be_bytes());
        out
    }

    /// A whole frame: this header followed by `payload`.
    pub fn frame(self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
        out.extend_from_slice(&self.to_bytes());
        out.extend_from_slice(payload);
        out
    }
}

/// Bytes of line time a frame of `len` buffer bytes (header + payload) occupies on the wire:
/// padded to the minimum frame, plus [`WIRE_OVERHEAD_BYTES`].
pub fn wire_bytes(len: usize) -> usize {
    len.max(MIN_FRAME_BYTES) + WIRE_OVERHEAD_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_header_round_trips_through_its_bytes() {
        let h = FrameHeader {
            dst: MacAddr([0x02, 0, 0, 0, 0, 1]),
            src: MacAddr([0x02, 0, 0, 0, 0, 2]),
            ethertype: 0x88b5,
        };
        let frame = h.frame(b"payload");
        assert_eq!(FrameHeader::parse(&frame), Ok(h));
        assert_eq!(&frame[HEADER_BYTES..], b"payload");
        assert_eq!(frame[12..14], [0x88, 0xb5]);
    }

    #[test]
    fn a_short_buffer_is_not_a_frame() {
        assert_eq!(
            FrameHeader::parse(&[0u8; 13]),
            Err(FrameError::Truncated { len: 13 })
        );
    }

    #[test]
    fn mac_addresses_print_and_pack_like_hardware() {
        let m = MacAddr([0x02, 0x1b, 0x21, 0xaa, 0xbb, 0x0c]);
        assert_eq!(m.to_string(), "02:1b:21:aa:bb:0c");
        assert_eq!(
            format!("{m:?}"),
            "02:1b:21:aa:bb:0c",
            "the same in a Debug print"
        );
        assert_eq!(m.to_u64(), 0x021b_21aa_bb0c);
        assert_eq!(MacAddr::from_u64(m.to_u64()), m);
        assert!(MacAddr::BROADCAST.is_group());
        assert!(!m.is_group());
    }

    #[test]
    fn line_time_pads_short_frames_and_adds_preamble_fcs_and_gap() {
        assert_eq!(wire_bytes(20), 84);
        assert_eq!(wire_bytes(HEADER_BYTES + JUMBO_MTU), 9038);
    }

    proptest! {
        #[test]
        fn any_frame_parses_back_to_its_header(dst: [u8; 6], src: [u8; 6], ethertype: u16,
                                               payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let h = FrameHeader { dst: MacAddr(dst), src: MacAddr(src), ethertype };
            prop_assert_eq!(FrameHeader::parse(&h.frame(&payload)), Ok(h));
        }
    }
}
