//! The programming interface of the NTB adapter's DMA engine, shared by the model and its
//! driver: the registers in the adapter's BAR0, the descriptor ring's format, the status a
//! descriptor is completed with, the queue's done word, and the codes a refused register
//! write leaves in ERROR.
//!
//! Dolphin's adapters carry a DMA engine that SISCI drives through DMA queues (Paper I §6.1:
//! "we used Dolphin's SISCI API for programming the DMA engine on the NTB itself"); its real
//! registers are not public, so this interface is the model's own, shaped after what a SISCI
//! DMA queue needs: a vector of transfers (local address, remote address, length, direction)
//! posted at once, a status per transfer, and a word that says the queue is done.
//!
//! Registers (BAR0 from [`BLOCK`], 64-bit little-endian, 8-byte aligned; a store may cover
//! several consecutive registers):
//!
//! | offset | name         | access | meaning                                                  |
//! |--------|--------------|--------|----------------------------------------------------------|
//! | 0x00   | ID           | RO     | [`MAGIC`]                                                |
//! | 0x08   | CAPS         | RO     | reads in flight (bits 0-31), most ring entries (32-63)   |
//! | 0x10   | RING_BASE    | RW     | bus address of the descriptor ring (32-byte aligned)     |
//! | 0x18   | RING_ENTRIES | RW     | descriptors in the ring, 1 to [`MAX_RING_ENTRIES`]       |
//! | 0x20   | DONE_ADDR    | RW     | bus address of the done word (8-byte aligned)            |
//! | 0x28   | CONTROL      | RW     | [`control::ENABLE`], [`control::ABORT`]                  |
//! | 0x30   | TAIL         | RW     | descriptors posted since enable (the doorbell)           |
//! | 0x38   | HEAD         | RO     | descriptors completed since enable                       |
//! | 0x40   | STATE        | RO     | a [`QueueState`]                                         |
//! | 0x48   | ERROR        | W-clr  | the last refused write's [`RegisterError`]; a store clears |
//!
//! RING_BASE, RING_ENTRIES and DONE_ADDR are written while the queue is disabled; setting
//! ENABLE checks them and starts HEAD and TAIL at 0. TAIL and HEAD count on without wrapping;
//! descriptor `n` lives in ring slot `n % RING_ENTRIES`, and TAIL may run at most RING_ENTRIES
//! ahead of HEAD. After the last descriptor posted, the engine writes the done word
//! ([`done`]): HEAD, with [`done::FAILED`] when a descriptor since the previous done word
//! failed and [`done::ABORTED`] when they were aborted; a queue that halts writes it with
//! [`done::HALTED`] if it still can.

use smartio_platform::BusAddr;

/// The BAR the registers are in (the adapter's register BAR).
pub const REGISTER_BAR: u8 = 0;
/// Where the DMA engine's registers start in BAR0. The NTB's own registers (look-up table,
/// doorbells, scratchpads) are not modelled: the rest of BAR0 answers nothing.
pub const BLOCK: u64 = 0x1_0000;
/// Bytes of the register block.
pub const BLOCK_BYTES: u64 = 0x50;
/// Value of ID: "SMIODMAQ" read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SMIODMAQ");
/// Bytes of one descriptor in the ring.
pub const DESCRIPTOR_BYTES: u64 = 32;
/// Most descriptors a ring holds (SISCI's `maxEntries` of a DMA queue).
pub const MAX_RING_ENTRIES: u64 = 4096;
/// Longest transfer one descriptor moves: 1 GiB, what the benchmarks allow a copy.
pub const MAX_TRANSFER_BYTES: u64 = 1 << 30;

/// Register offsets from [`BLOCK`].
pub mod reg {
    /// Identification.
    pub const ID: u64 = 0x00;
    /// Capabilities: reads in flight, most ring entries.
    pub const CAPS: u64 = 0x08;
    /// Descriptor ring base.
    pub const RING_BASE: u64 = 0x10;
    /// Descriptors in the ring.
    pub const RING_ENTRIES: u64 = 0x18;
    /// Done word address.
    pub const DONE_ADDR: u64 = 0x20;
    /// Enable and abort.
    pub const CONTROL: u64 = 0x28;
    /// Descriptors posted (doorbell).
    pub const TAIL: u64 = 0x30;
    /// Descriptors completed.
    pub const HEAD: u64 = 0x38;
    /// Queue state.
    pub const STATE: u64 = 0x40;
    /// Last register error.
    pub const ERROR: u64 = 0x48;
}

/// CONTROL bits.
pub mod control {
    /// The queue is enabled (set: check the ring and start; clear: stop, refused while busy).
    pub const ENABLE: u64 = 1 << 0;
    /// Abort what is posted: stop issuing reads, complete the descriptors with
    /// [`super::DescriptorStatus::Aborted`]. Ignored when nothing runs.
    pub const ABORT: u64 = 1 << 1;
    /// Every defined bit.
    pub const ALL: u64 = ENABLE | ABORT;
}

/// Byte offsets inside a descriptor.
pub mod desc {
    /// Local side: a bus address as the adapter reaches it (its host's RAM, a local BAR).
    pub const LOCAL: usize = 0;
    /// Remote side: a bus address, usually in the adapter's window.
    pub const REMOTE: usize = 8;
    /// Bytes to move.
    pub const LENGTH: usize = 16;
    /// [`super::flags`] (u32).
    pub const FLAGS: usize = 24;
    /// The [`super::DescriptorStatus`] the engine writes back (u32); software posts 0.
    pub const STATUS: usize = 28;
}

/// Descriptor FLAGS bits.
pub mod flags {
    /// Read (pull): remote to local. Clear: write (push), local to remote. SISCI's
    /// `SCI_FLAG_DMA_READ`.
    pub const READ: u32 = 1 << 0;
    /// Every defined bit.
    pub const ALL: u32 = READ;
}

/// The done word the engine writes to DONE_ADDR.
pub mod done {
    /// A descriptor since the previous done word failed (its status says how).
    pub const FAILED: u64 = 1 << 63;
    /// The descriptors since the previous done word were aborted.
    pub const ABORTED: u64 = 1 << 62;
    /// The queue halted (a status could not be written back); written if the done word is
    /// still reachable.
    pub const HALTED: u64 = 1 << 61;
    /// The completed count (HEAD) in the low bits.
    pub const COUNT: u64 = (1 << 61) - 1;
}

/// Which way a descriptor moves its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Push: local to remote (posted writes over the NTB).
    Write,
    /// Pull: remote to local (reads over the NTB, then writes into local memory).
    Read,
}

/// One transfer as software posts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// The local side.
    pub local: BusAddr,
    /// The remote side.
    pub remote: BusAddr,
    /// Bytes.
    pub length: u64,
    /// Which way.
    pub direction: Direction,
}

impl Descriptor {
    /// The descriptor's bytes as software writes them into the ring (status 0, pending).
    pub fn encode(&self) -> [u8; DESCRIPTOR_BYTES as usize] {
        let mut b = [0u8; DESCRIPTOR_BYTES as usize];
        b[desc::LOCAL..desc::LOCAL + 8].copy_from_slice(&self.local.get().to_le_bytes());
        b[desc::REMOTE..desc::REMOTE + 8].copy_from_slice(&self.remote.get().to_le_bytes());
        b[desc::LENGTH..desc::LENGTH + 8].copy_from_slice(&self.length.to_le_bytes());
        let f = match self.direction {
            Direction::Write => 0,
            Direction::Read => flags::READ,
        };
        b[desc::FLAGS..desc::FLAGS + 4].copy_from_slice(&f.to_le_bytes());
        b
    }

    /// Decodes and validates a ring entry (the first [`DESCRIPTOR_BYTES`] of `bytes`): the
    /// status a descriptor that cannot run is completed with, in the order checked — unknown
    /// flags, no bytes, more than [`MAX_TRANSFER_BYTES`], an end past the address space.
    pub fn decode(bytes: &[u8]) -> Result<Descriptor, DescriptorStatus> {
        let u64_at = |o: usize| {
            let mut w = [0u8; 8];
            if let Some(s) = bytes.get(o..o + 8) {
                w.copy_from_slice(s);
            }
            u64::from_le_bytes(w)
        };
        let mut f = [0u8; 4];
        if let Some(s) = bytes.get(desc::FLAGS..desc::FLAGS + 4) {
            f.copy_from_slice(s);
        }
        let f = u32::from_le_bytes(f);
        let (local, remote, length) = (
            u64_at(desc::LOCAL),
            u64_at(desc::REMOTE),
            u64_at(desc::LENGTH),
        );
        if f & !flags::ALL != 0 {
            return Err(DescriptorStatus::UnknownFlags);
        }
        if length == 0 {
            return Err(DescriptorStatus::ZeroLength);
        }
        if length > MAX_TRANSFER_BYTES {
            return Err(DescriptorStatus::TooLong);
        }
        if local.checked_add(length).is_none() || remote.checked_add(length).is_none() {
            return Err(DescriptorStatus::AddressOverflow);
        }
        Ok(Descriptor {
            local: BusAddr(local),
            remote: BusAddr(remote),
            length,
            direction: if f & flags::READ != 0 {
                Direction::Read
            } else {
                Direction::Write
            },
        })
    }

    /// Where the bytes come from and where they go.
    pub fn source_and_destination(&self) -> (BusAddr, BusAddr) {
        match self.direction {
            Direction::Write => (self.local, self.remote),
            Direction::Read => (self.remote, self.local),
        }
    }
}

/// How a descriptor ended, as the engine writes it into the descriptor's STATUS field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DescriptorStatus {
    /// Not completed yet (what software posts).
    Pending,
    /// Every byte moved and landed.
    Done,
    /// LENGTH is 0.
    ZeroLength,
    /// LENGTH is more than [`MAX_TRANSFER_BYTES`].
    TooLong,
    /// LOCAL or REMOTE plus LENGTH passes the end of the 64-bit address space.
    AddressOverflow,
    /// FLAGS has a bit that is not defined.
    UnknownFlags,
    /// A read of the source failed (unsupported request, completer abort, IOMMU fault,
    /// no look-up-table entry or requester id, link down): what was read before may have
    /// been written.
    ReadFailed,
    /// A write to the destination, or the read that proves the writes landed, failed.
    WriteFailed,
    /// Software aborted the queue before the descriptor finished.
    Aborted,
    /// Not carried out: an earlier descriptor since the last done word failed.
    NotRun,
}

impl DescriptorStatus {
    /// Every status, in code order.
    pub const ALL: [DescriptorStatus; 10] = [
        DescriptorStatus::Pending,
        DescriptorStatus::Done,
        DescriptorStatus::ZeroLength,
        DescriptorStatus::TooLong,
        DescriptorStatus::AddressOverflow,
        DescriptorStatus::UnknownFlags,
        DescriptorStatus::ReadFailed,
        DescriptorStatus::WriteFailed,
        DescriptorStatus::Aborted,
        DescriptorStatus::NotRun,
    ];

    /// The value in the STATUS field.
    pub fn code(self) -> u32 {
        match self {
            DescriptorStatus::Pending => 0,
            DescriptorStatus::Done => 1,
            DescriptorStatus::ZeroLength => 2,
            DescriptorStatus::TooLong => 3,
            DescriptorStatus::AddressOverflow => 4,
            DescriptorStatus::UnknownFlags => 5,
            DescriptorStatus::ReadFailed => 6,
            DescriptorStatus::WriteFailed => 7,
            DescriptorStatus::Aborted => 8,
            DescriptorStatus::NotRun => 9,
        }
    }

    /// The status with STATUS field value `code`, if any.
    pub fn from_code(code: u32) -> Option<DescriptorStatus> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Whether the descriptor ended without moving its bytes.
    pub fn is_failure(self) -> bool {
        !matches!(self, DescriptorStatus::Pending | DescriptorStatus::Done)
    }

    /// What it means, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            DescriptorStatus::Pending => "pending",
            DescriptorStatus::Done => "done",
            DescriptorStatus::ZeroLength => "refused: the length is 0",
            DescriptorStatus::TooLong => "refused: longer than the engine moves in one descriptor",
            DescriptorStatus::AddressOverflow => "refused: an address plus the length wraps",
            DescriptorStatus::UnknownFlags => "refused: undefined flag bits",
            DescriptorStatus::ReadFailed => "a read of the source failed",
            DescriptorStatus::WriteFailed => "a write to the destination failed",
            DescriptorStatus::Aborted => "aborted",
            DescriptorStatus::NotRun => "not run: an earlier descriptor failed",
        }
    }
}

/// The queue's state (STATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueState {
    /// ENABLE is clear.
    Disabled,
    /// Enabled, nothing to do.
    Idle,
    /// Working through posted descriptors.
    Busy,
    /// Stopped because the ring or the done word could not be reached; clear ENABLE and set
    /// it again to start over.
    Halted,
}

impl QueueState {
    /// The value of STATE.
    pub fn code(self) -> u64 {
        match self {
            QueueState::Disabled => 0,
            QueueState::Idle => 1,
            QueueState::Busy => 2,
            QueueState::Halted => 3,
        }
    }

    /// The state with STATE value `code`, if any.
    pub fn from_code(code: u64) -> Option<QueueState> {
        [
            QueueState::Disabled,
            QueueState::Idle,
            QueueState::Busy,
            QueueState::Halted,
        ]
        .into_iter()
        .find(|s| s.code() == code)
    }
}

/// Why a register write was refused (ERROR). The write changes nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegisterError {
    /// No error since ERROR was last cleared.
    None,
    /// RING_BASE, RING_ENTRIES or DONE_ADDR written while enabled, or ENABLE cleared while
    /// busy.
    Busy,
    /// ENABLE set with RING_BASE not 32-byte aligned.
    RingMisaligned,
    /// ENABLE set with RING_ENTRIES 0 or more than [`MAX_RING_ENTRIES`].
    RingSize,
    /// ENABLE set with DONE_ADDR not 8-byte aligned.
    DoneMisaligned,
    /// TAIL written below its value, or more than RING_ENTRIES ahead of HEAD.
    TailOutOfRange,
    /// TAIL written while the queue is disabled or halted.
    NotRunning,
    /// CONTROL written with undefined bits.
    UnknownControl,
    /// The engine could not read the ring, write a status back or write the done word: the
    /// queue halted.
    RingUnreachable,
}

impl RegisterError {
    /// Every error, in code order.
    pub const ALL: [RegisterError; 9] = [
        RegisterError::None,
        RegisterError::Busy,
        RegisterError::RingMisaligned,
        RegisterError::RingSize,
        RegisterError::DoneMisaligned,
        RegisterError::TailOutOfRange,
        RegisterError::NotRunning,
        RegisterError::UnknownControl,
        RegisterError::RingUnreachable,
    ];

    /// The value of ERROR.
    pub fn code(self) -> u64 {
        match self {
            RegisterError::None => 0,
            RegisterError::Busy => 1,
            RegisterError::RingMisaligned => 2,
            RegisterError::RingSize => 3,
            RegisterError::DoneMisaligned => 4,
            RegisterError::TailOutOfRange => 5,
            RegisterError::NotRunning => 6,
            RegisterError::UnknownControl => 7,
            RegisterError::RingUnreachable => 8,
        }
    }

    /// The error with ERROR value `code`, if any.
    pub fn from_code(code: u64) -> Option<RegisterError> {
        Self::ALL.into_iter().find(|e| e.code() == code)
    }

    /// What it means, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            RegisterError::None => "no error",
            RegisterError::Busy => "the ring was changed or the queue disabled while in use",
            RegisterError::RingMisaligned => "the ring is not 32-byte aligned",
            RegisterError::RingSize => "the ring holds no entry or more than the engine takes",
            RegisterError::DoneMisaligned => "the done word is not 8-byte aligned",
            RegisterError::TailOutOfRange => "TAIL went backwards or past a full ring",
            RegisterError::NotRunning => "TAIL was written while the queue is not running",
            RegisterError::UnknownControl => "CONTROL was written with undefined bits",
            RegisterError::RingUnreachable => "the ring or the done word could not be reached",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_encodes_and_decodes_to_itself() {
        for direction in [Direction::Write, Direction::Read] {
            let d = Descriptor {
                local: BusAddr(0x1000),
                remote: BusAddr(0x80_0000_0000),
                length: 4096,
                direction,
            };
            assert_eq!(Descriptor::decode(&d.encode()), Ok(d));
        }
    }

    #[test]
    fn a_bad_descriptor_decodes_to_the_status_of_its_first_problem() {
        let good = Descriptor {
            local: BusAddr(0),
            remote: BusAddr(0),
            length: 8,
            direction: Direction::Write,
        };
        let with = |f: &dyn Fn(&mut [u8; 32])| {
            let mut b = good.encode();
            f(&mut b);
            Descriptor::decode(&b)
        };
        assert_eq!(
            with(&|b| b[desc::FLAGS] = 0x80),
            Err(DescriptorStatus::UnknownFlags)
        );
        assert_eq!(
            with(&|b| b[desc::LENGTH..desc::LENGTH + 8].fill(0)),
            Err(DescriptorStatus::ZeroLength)
        );
        assert_eq!(
            with(&|b| b[desc::LENGTH..desc::LENGTH + 8]
                .copy_from_slice(&(MAX_TRANSFER_BYTES + 1).to_le_bytes())),
            Err(DescriptorStatus::TooLong)
        );
        assert_eq!(
            with(&|b| b[desc::REMOTE..desc::REMOTE + 8].copy_from_slice(&u64::MAX.to_le_bytes())),
            Err(DescriptorStatus::AddressOverflow)
        );
        assert_eq!(
            Descriptor::decode(&[0u8; 5]),
            Err(DescriptorStatus::ZeroLength),
            "a short entry reads as zeroes, never panics"
        );
    }

    #[test]
    fn every_code_names_one_status_state_and_error() {
        for s in DescriptorStatus::ALL {
            assert_eq!(DescriptorStatus::from_code(s.code()), Some(s));
        }
        assert_eq!(DescriptorStatus::from_code(10), None);
        for e in RegisterError::ALL {
            assert_eq!(RegisterError::from_code(e.code()), Some(e));
        }
        for code in 0..4 {
            assert_eq!(
                QueueState::from_code(code).map(QueueState::code),
                Some(code)
            );
        }
        assert_eq!(QueueState::from_code(4), None);
    }
}
