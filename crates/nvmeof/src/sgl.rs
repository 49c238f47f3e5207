//! The data pointer of an NVMe-oF command: an SGL descriptor in place of PRP1 and PRP2
//! (NVMe 1.4 §4.4; NVMe over Fabrics 1.1 §2.3). A read, or a write too large for the
//! capsule, names registered initiator memory with a keyed descriptor; a small write names
//! the data in the capsule by offset.

/// SGL Identifier of a Keyed SGL Data Block descriptor with subtype Invalidate Key (NVMe 1.4
/// §4.4, Figure 117: type 4h, subtype Fh), as Linux nvme-rdma sends for registered memory.
const SGL_KEYED_INVALIDATE: u8 = 0x4f;
/// SGL Identifier of an SGL Data Block descriptor with subtype Offset (type 0h, subtype 1h):
/// data in the capsule.
const SGL_DATA_OFFSET: u8 = 0x01;
/// PSDT 01b: SGLs describe the data (NVMe-oF requires SGLs; Linux sets
/// `NVME_CMD_SGL_METABUF`).
pub(super) const PSDT_SGL: u8 = 0b01;

/// SGL1 of a fabrics command: where the data is (bytes 24..40 of the command, which a
/// PCIe command uses for PRP1 and PRP2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sgl {
    /// `len` bytes at `addr` of the initiator's memory, registered under `key`; the target
    /// invalidates the key with its response.
    Keyed {
        /// Initiator address.
        addr: u64,
        /// Bytes (24 bits on the wire).
        len: u32,
        /// The remote key.
        key: u32,
    },
    /// `len` bytes at `offset` of the capsule's data.
    InCapsule {
        /// Offset in the capsule's data.
        offset: u64,
        /// Bytes.
        len: u32,
    },
}

impl Sgl {
    /// The descriptor as the command's two quadwords.
    pub fn encode(self) -> (u64, u64) {
        match self {
            Sgl::Keyed { addr, len, key } => (
                addr,
                u64::from(len & 0x00ff_ffff)
                    | u64::from(key) << 24
                    | u64::from(SGL_KEYED_INVALIDATE) << 56,
            ),
            Sgl::InCapsule { offset, len } => {
                (offset, u64::from(len) | u64::from(SGL_DATA_OFFSET) << 56)
            }
        }
    }

    /// The descriptor in `(qw0, qw1)`, if it is one of the two kinds sent here.
    pub fn decode(qw0: u64, qw1: u64) -> Option<Sgl> {
        match (qw1 >> 56) as u8 {
            SGL_KEYED_INVALIDATE => Some(Sgl::Keyed {
                addr: qw0,
                len: (qw1 & 0x00ff_ffff) as u32,
                key: (qw1 >> 24) as u32,
            }),
            SGL_DATA_OFFSET => Some(Sgl::InCapsule {
                offset: qw0,
                len: qw1 as u32,
            }),
            _ => None,
        }
    }
}

/// Largest length a keyed descriptor carries (24 bits).
pub(super) const KEYED_MAX_LEN: u64 = 0x00ff_ffff;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgl_descriptors_round_trip_and_carry_their_identifier_in_the_last_byte() {
        let keyed = Sgl::Keyed {
            addr: 0x1234_5000,
            len: 4096,
            key: 0x5a00_0007,
        };
        let (qw0, qw1) = keyed.encode();
        assert_eq!(qw0, 0x1234_5000);
        assert_eq!(qw1 >> 56, 0x4f);
        assert_eq!(qw1 & 0xff_ffff, 4096);
        assert_eq!(Sgl::decode(qw0, qw1), Some(keyed));
        let inline = Sgl::InCapsule {
            offset: 0,
            len: 4096,
        };
        let (qw0, qw1) = inline.encode();
        assert_eq!((qw0, qw1 >> 56, qw1 & 0xffff_ffff), (0, 0x01, 4096));
        assert_eq!(Sgl::decode(qw0, qw1), Some(inline));
        assert_eq!(Sgl::decode(0, 0x2000_0000_0000_0000), None);
    }
}
