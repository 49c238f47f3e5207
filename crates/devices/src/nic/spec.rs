//! The NIC's programming interface: what a driver writes and reads. Shared by the device model
//! ([`super::Nic`]) and the NIC driver in the drivers crate, so both sides agree on every
//! offset and encoding; nothing here has behaviour beyond encoding and decoding.
//!
//! The shape follows ConnectX-/e1000-style Ethernet controllers in a reduced form, per
//! function (a physical or virtual function has the same BAR0):
//!
//! - **BAR0** holds registers: identification, the function's MAC address, the port's MTU and
//!   link state, counters, one register block per **queue pair**, and the MSI-X table and
//!   pending-bit array (one vector per queue pair).
//! - A queue pair is a **transmit ring** and a **receive ring** of 16-byte descriptors in
//!   memory the NIC reaches by DMA (normally coherent host RAM). The driver programs a ring's
//!   base (aligned to [`RING_ALIGN`]) and then its size (a power of two in [`RING_ENTRIES`]);
//!   writing the size validates the ring and enables it, or leaves it disabled with the
//!   queue's `ERROR` register set ([`RingError`]).
//! - Indices are free-running 64-bit descriptor counts: descriptor `n` lives at
//!   `BASE + (n % SIZE) * 16`. The driver writes `TAIL` (the doorbell) after filling
//!   descriptors; the NIC advances `HEAD` as it consumes them. `TAIL - HEAD` must not exceed
//!   `SIZE`: a doorbell that would is refused ([`RingError::BadTail`]) and ignored.
//! - **Transmit**: a [`TxDescriptor`] names a buffer (bus address, length of the whole frame
//!   including its 14-byte header). The NIC reads the buffer, sends the frame and writes the
//!   descriptor back with a [`Status`]: [`Status::Ok`], or why the frame was not sent.
//! - **Receive**: an [`RxDescriptor`] posts a buffer (bus address, capacity). The NIC fills
//!   the next posted buffer with an arriving frame and writes the descriptor back with the
//!   frame's length and a [`Status`]. A frame arriving with no posted buffer is dropped and
//!   counted in [`reg::RX_NO_BUFFER`].
//! - After a write-back the NIC raises the queue pair's MSI-X vector when the queue's
//!   `IRQ` register enables it for that direction.
//!
//! Registers are 64-bit little-endian; accesses must be 8 bytes wide and aligned (the MSI-X
//! table excepted, which follows the PCI specification).

use crate::ethernet::{MacAddr, HEADER_BYTES};
use smartio_platform::BusAddr;
use std::ops::RangeInclusive;
use thiserror::Error;

/// PCI vendor id (Mellanox's, as the papers' ConnectX-5 has).
pub const VENDOR_ID: u16 = 0x15b3;
/// PCI device id of the physical function (ConnectX-5).
pub const DEVICE_ID: u16 = 0x1017;
/// PCI device id of its virtual functions (ConnectX-5 Virtual Function).
pub const VF_DEVICE_ID: u16 = 0x1018;
/// PCI class code: network controller, Ethernet.
pub const CLASS_CODE: u32 = 0x02_00_00;
/// Value of the [`reg::ID`] register.
pub const NIC_MAGIC: u64 = 0x5350_4e49_4345_5448;
/// Size of BAR0.
pub const BAR0_SIZE: u64 = 64 << 10;
/// The BAR holding the registers.
pub const REGISTER_BAR: u8 = 0;
/// Queue pairs per function (one MSI-X vector each).
pub const QUEUE_PAIRS: u16 = 8;
/// Bytes per descriptor.
pub const DESCRIPTOR_BYTES: u64 = 16;
/// Ring sizes: a power of two in this range.
pub const RING_ENTRIES: RangeInclusive<u64> = 8..=4096;
/// Alignment of a ring's base address.
pub const RING_ALIGN: u64 = 128;
/// Offset of the MSI-X table in BAR0.
pub const MSIX_TABLE: u64 = 0x8000;
/// Offset of the MSI-X pending-bit array in BAR0.
pub const MSIX_PBA: u64 = 0x9000;
/// Line rate reported in [`reg::LINK`] is in Mb/s in bits 32..64.
pub const LINK_SPEED_SHIFT: u32 = 32;
/// [`reg::LINK`] bit 0: the port has a link partner (a cable or a switch).
pub const LINK_UP: u64 = 1;

/// Global registers of a function in BAR0 (read-only).
pub mod reg {
    /// [`super::NIC_MAGIC`].
    pub const ID: u64 = 0x00;
    /// The function's MAC address in the low 48 bits (first octet most significant).
    pub const MAC: u64 = 0x08;
    /// The port's MTU: payload bytes per frame (1500 or 9000).
    pub const MTU: u64 = 0x10;
    /// Bit 0 [`super::LINK_UP`]; line rate in Mb/s in bits 32..64.
    pub const LINK: u64 = 0x18;
    /// Queue pairs of the function.
    pub const QUEUE_PAIRS: u64 = 0x20;
    /// Frames for this function dropped because no receive buffer was posted.
    pub const RX_NO_BUFFER: u64 = 0x28;
    /// Frames this function sent (transmit descriptors written back [`super::Status::Ok`]).
    pub const TX_FRAMES: u64 = 0x30;
    /// Frames this function received into posted buffers.
    pub const RX_FRAMES: u64 = 0x38;
    /// Frames the port put on the wire (all functions; frames the internal switch delivered
    /// between functions are not among them).
    pub const WIRE_TX_FRAMES: u64 = 0x40;
    /// Frames the port took off the wire (all functions).
    pub const WIRE_RX_FRAMES: u64 = 0x48;
    /// End of the global registers.
    pub const END: u64 = 0x50;
}

/// Per-queue-pair registers: queue pair `q`'s block starts at [`queue::base`]`(q)`.
pub mod queue {
    /// First queue block.
    pub const FIRST: u64 = 0x1000;
    /// Bytes per queue block.
    pub const STRIDE: u64 = 0x100;
    /// Transmit ring base (bus address; aligned to [`super::RING_ALIGN`]).
    pub const TX_BASE: u64 = 0x00;
    /// Transmit ring size in descriptors; writing it validates and enables (0 disables).
    pub const TX_SIZE: u64 = 0x08;
    /// Transmit doorbell: descriptors up to (not including) this index are ready.
    pub const TX_TAIL: u64 = 0x10;
    /// Next transmit descriptor the NIC consumes (read-only).
    pub const TX_HEAD: u64 = 0x18;
    /// Receive ring base.
    pub const RX_BASE: u64 = 0x20;
    /// Receive ring size; writing it validates and enables (0 disables).
    pub const RX_SIZE: u64 = 0x28;
    /// Receive doorbell: buffers up to (not including) this index are posted.
    pub const RX_TAIL: u64 = 0x30;
    /// Next receive descriptor the NIC fills (read-only).
    pub const RX_HEAD: u64 = 0x38;
    /// Interrupt enables: [`super::irq::TX`], [`super::irq::RX`].
    pub const IRQ: u64 = 0x40;
    /// The last [`super::RingError`] code of this queue pair, 0 for none (read-only).
    pub const ERROR: u64 = 0x48;
    /// End of a block's registers.
    pub const END: u64 = 0x50;

    /// Offset of queue pair `q`'s block in BAR0.
    pub const fn base(q: u16) -> u64 {
        FIRST + q as u64 * STRIDE
    }
}

/// Bits of a queue's `IRQ` register.
pub mod irq {
    /// Raise the vector after transmit write-backs.
    pub const TX: u64 = 1 << 0;
    /// Raise the vector after receive write-backs.
    pub const RX: u64 = 1 << 1;
}

// The register blocks do not overlap each other or the MSI-X table, and all fit in BAR0.
const _: () = assert!(reg::END <= queue::FIRST);
const _: () = assert!(queue::END <= queue::STRIDE);
const _: () = assert!(queue::base(QUEUE_PAIRS) <= MSIX_TABLE);
const _: () = assert!(MSIX_TABLE + QUEUE_PAIRS as u64 * 16 <= MSIX_PBA);
const _: () = assert!(MSIX_PBA + 8 <= BAR0_SIZE);

/// Largest frame (header + payload) a port with `mtu` sends or accepts.
pub const fn max_frame(mtu: usize) -> usize {
    mtu + HEADER_BYTES
}

/// What the NIC writes back into a descriptor. 0 means the descriptor is still the NIC's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Status {
    /// Sent (transmit) or received (receive).
    Ok = 1,
    /// Transmit: the descriptor's length is 0.
    ZeroLength = 2,
    /// Transmit: longer than the MTU plus the header.
    TooLong = 3,
    /// Transmit: shorter than an Ethernet header (14 bytes).
    TooShort = 4,
    /// The buffer could not be read or written by DMA (an unmapped address, a link down).
    DmaFailed = 5,
    /// Receive: the posted buffer is smaller than the frame (the frame is dropped).
    BufferTooSmall = 6,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::ZeroLength,
        Status::TooLong,
        Status::TooShort,
        Status::DmaFailed,
        Status::BufferTooSmall,
    ];

    /// The code written back.
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// The status of a written-back code; `None` for 0 (not written back yet) and for codes
    /// no NIC writes.
    pub fn from_code(code: u16) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.code() == code)
    }
}

/// Why a ring could not be enabled or a doorbell was refused (the queue's `ERROR` code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[repr(u64)]
pub enum RingError {
    /// The base is not aligned to [`RING_ALIGN`].
    #[error("ring base is not aligned to {RING_ALIGN} bytes")]
    Misaligned = 1,
    /// The size is not a power of two in [`RING_ENTRIES`].
    #[error("ring size is not a power of two from 8 to 4096")]
    BadSize = 2,
    /// A doorbell below the head or more than the ring's size ahead of it.
    #[error("doorbell index is below the head or more than the ring size ahead of it")]
    BadTail = 3,
    /// A doorbell on a ring that is not enabled.
    #[error("doorbell on a ring that is not enabled")]
    Disabled = 4,
    /// A descriptor could not be read or written by DMA; the ring was disabled.
    #[error("a descriptor could not be read or written by DMA; the ring was disabled")]
    DescriptorDma = 5,
}

impl RingError {
    /// Every error, in code order.
    pub const ALL: [RingError; 5] = [
        RingError::Misaligned,
        RingError::BadSize,
        RingError::BadTail,
        RingError::Disabled,
        RingError::DescriptorDma,
    ];

    /// The `ERROR` register's value.
    pub const fn code(self) -> u64 {
        self as u64
    }

    /// The error of an `ERROR` value; `None` for 0 and unknown codes.
    pub fn from_code(code: u64) -> Option<RingError> {
        RingError::ALL.into_iter().find(|e| e.code() == code)
    }
}

/// A transmit descriptor: `[0..8)` buffer bus address, `[8..12)` frame length (header
/// included), `[12..14)` reserved, `[14..16)` status (the driver writes 0, the NIC writes
/// back a [`Status`] code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxDescriptor {
    /// Where the frame is.
    pub buffer: BusAddr,
    /// Bytes of the frame.
    pub len: u32,
    /// The status code (0 while the NIC owns it).
    pub status: u16,
}

/// A receive descriptor: `[0..8)` buffer bus address, `[8..12)` the buffer's capacity as the
/// driver posts it and the frame's length as the NIC writes it back, `[12..14)` reserved,
/// `[14..16)` status (0 while posted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxDescriptor {
    /// Where the frame goes.
    pub buffer: BusAddr,
    /// Capacity (posted) or frame length (written back).
    pub len: u32,
    /// The status code (0 while posted).
    pub status: u16,
}

/// Offset of the status field in a descriptor (what a driver polls).
pub const STATUS_OFFSET: u64 = 14;

fn encode(buffer: BusAddr, len: u32, status: u16) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&buffer.get().to_le_bytes());
    out[8..12].copy_from_slice(&len.to_le_bytes());
    out[14..16].copy_from_slice(&status.to_le_bytes());
    out
}

fn decode(bytes: &[u8; 16]) -> (BusAddr, u32, u16) {
    let mut a = [0u8; 8];
    a.copy_from_slice(&bytes[..8]);
    (
        BusAddr(u64::from_le_bytes(a)),
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
        u16::from_le_bytes([bytes[14], bytes[15]]),
    )
}

impl TxDescriptor {
    /// The 16 bytes in memory.
    pub fn to_bytes(self) -> [u8; 16] {
        encode(self.buffer, self.len, self.status)
    }

    /// The descriptor in 16 bytes of memory.
    pub fn from_bytes(bytes: &[u8; 16]) -> TxDescriptor {
        let (buffer, len, status) = decode(bytes);
        TxDescriptor {
            buffer,
            len,
            status,
        }
    }

    /// Checks the descriptor against the port's `mtu`: the status to write back without
    /// sending, or `Ok(len)` for a frame that may be read and sent.
    pub fn validate(&self, mtu: usize) -> Result<usize, Status> {
        let len = self.len as usize;
        if len == 0 {
            Err(Status::ZeroLength)
        } else if len < HEADER_BYTES {
            Err(Status::TooShort)
        } else if len > max_frame(mtu) {
            Err(Status::TooLong)
        } else {
            Ok(len)
        }
    }
}

impl RxDescriptor {
    /// The 16 bytes in memory.
    pub fn to_bytes(self) -> [u8; 16] {
        encode(self.buffer, self.len, self.status)
    }

    /// The descriptor in 16 bytes of memory.
    pub fn from_bytes(bytes: &[u8; 16]) -> RxDescriptor {
        let (buffer, len, status) = decode(bytes);
        RxDescriptor {
            buffer,
            len,
            status,
        }
    }
}

/// The MAC address of function `function` of the NIC at fabric endpoint `endpoint` when the
/// scenario gives none: locally administered (`02:`), unique in a cluster.
pub fn default_mac(endpoint: u32, function: u16) -> MacAddr {
    let [_, _, e1, e0] = endpoint.to_be_bytes();
    let [f1, f0] = function.to_be_bytes();
    MacAddr([0x02, 0x4e, e1, e0, f1, f0])
}

/// The SR-IOV capability of a NIC with `total_vfs` virtual functions: First VF Offset 1, VF
/// Stride 1, and each VF the PF's BAR0 layout (registers, eight queue pairs, MSI-X), so the
/// same driver binds to either.
pub fn sriov_spec(total_vfs: u16) -> smartio_fabric::SriovSpec {
    smartio_fabric::SriovSpec {
        total_vfs,
        first_vf_offset: 1,
        vf_stride: 1,
        vf_device_id: VF_DEVICE_ID,
        vf_bars: vec![smartio_fabric::BarSpec {
            index: REGISTER_BAR,
            size: BAR0_SIZE,
            kind: smartio_fabric::BarKind::Mem64,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_transmit_descriptor_of_exactly_a_header_is_sent() {
        let d = |len: u32| TxDescriptor {
            buffer: BusAddr(0x1000),
            len,
            status: 0,
        };
        let header = HEADER_BYTES as u32;
        assert_eq!(d(header).validate(1500), Ok(HEADER_BYTES));
        assert_eq!(d(header - 1).validate(1500), Err(Status::TooShort));
    }

    #[test]
    fn a_transmit_descriptor_is_checked_against_the_mtu() {
        let d = |len| TxDescriptor {
            buffer: BusAddr(0x1000),
            len,
            status: 0,
        };
        assert_eq!(d(0).validate(1500), Err(Status::ZeroLength));
        assert_eq!(d(13).validate(1500), Err(Status::TooShort));
        assert_eq!(d(1514).validate(1500), Ok(1514));
        assert_eq!(d(1515).validate(1500), Err(Status::TooLong));
        assert_eq!(d(9014).validate(9000), Ok(9014));
    }

    #[test]
    fn status_and_ring_error_codes_decode_to_themselves_and_zero_to_none() {
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
        }
        assert_eq!(Status::from_code(0), None);
        assert_eq!(Status::from_code(99), None);
        for e in RingError::ALL {
            assert_eq!(RingError::from_code(e.code()), Some(e));
        }
        assert_eq!(RingError::from_code(0), None);
    }

    #[test]
    fn default_macs_are_locally_administered_unicast_and_distinct() {
        let a = default_mac(3, 0);
        let b = default_mac(3, 1);
        let c = default_mac(4, 0);
        assert_ne!(a, b);
        assert_ne!(a, c);
        for m in [a, b, c] {
            assert!(!m.is_group());
            assert_eq!(m.0[0] & 2, 2, "locally administered");
        }
    }

    proptest! {
        #[test]
        fn descriptors_round_trip_through_their_bytes(addr: u64, len: u32, status: u16) {
            let t = TxDescriptor { buffer: BusAddr(addr), len, status };
            prop_assert_eq!(TxDescriptor::from_bytes(&t.to_bytes()), t);
            let r = RxDescriptor { buffer: BusAddr(addr), len, status };
            prop_assert_eq!(RxDescriptor::from_bytes(&r.to_bytes()), r);
            prop_assert_eq!(
                u16::from_le_bytes([t.to_bytes()[14], t.to_bytes()[15]]),
                status
            );
        }
    }
}
