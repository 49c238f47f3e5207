//! The requests the distributed driver refuses before anything reaches the controller
//! ([`super::DistError::BadRequest`]): each with the values that make it wrong.

use crate::nvme::BlockOp;
use smartio_devices::nvme::prp::PrpError;
use smartio_platform::BusAddr;
use thiserror::Error;

/// A request the driver refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadRequest {
    /// The block client's queue-size choice never ran (an emulator bug).
    #[error("the block client has no plan")]
    NoPlan,
    /// Identify on behalf of a borrow that has given the device back.
    #[error("Identify for borrow {borrow}, which no longer holds the device")]
    NotHeld {
        /// The borrow's id.
        borrow: u32,
    },
    /// Identify data that is not page-aligned.
    #[error("Identify data must be page-aligned, not at {data}")]
    UnalignedIdentify {
        /// Where the data was asked for.
        data: BusAddr,
    },
    /// A queue size outside what the controller takes.
    #[error("a queue needs 2..={max} entries, not {entries}")]
    QueueEntries {
        /// Entries asked for.
        entries: u16,
        /// The controller's largest queue (CAP.MQES + 1).
        max: u32,
    },
    /// A transfer of no bytes, over MDTS, or outside the data segment.
    #[error(
        "{blocks} blocks at data offset {offset}: the transfer must be 1..={max_transfer} bytes \
         inside the {segment}-byte data segment"
    )]
    Transfer {
        /// Blocks asked for.
        blocks: u32,
        /// Offset in the data segment.
        offset: u64,
        /// The largest transfer (MDTS).
        max_transfer: u64,
        /// Bytes of the data segment.
        segment: u64,
    },
    /// Write Zeroes or Deallocate of a block count the command cannot carry.
    #[error("{op:?} of {blocks} blocks: must be 1..={max}")]
    RangeBlocks {
        /// The operation.
        op: BlockOp,
        /// Blocks asked for.
        blocks: u32,
        /// The most one command carries.
        max: u32,
    },
    /// The PRPs of a transfer could not be built.
    #[error("{len} bytes at {bus:#x}: {source}")]
    Prps {
        /// Bytes.
        len: u64,
        /// The buffer's bus address.
        bus: u64,
        /// Why.
        source: PrpError,
    },
    /// A bounce slot's PRP list could not be built.
    #[error("PRPs of bounce slot {slot} at {bus:#x}: {source}")]
    SlotList {
        /// The slot.
        slot: u32,
        /// Its bus address.
        bus: u64,
        /// Why.
        source: PrpError,
    },
    /// A transfer's PRPs inside a bounce slot could not be built.
    #[error("{len} bytes in bounce slot {slot}: {source}")]
    SlotPrps {
        /// Bytes.
        len: u64,
        /// The slot.
        slot: u32,
        /// Why.
        source: PrpError,
    },
}
