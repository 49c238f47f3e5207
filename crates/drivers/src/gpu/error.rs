//! The GPU runtime's one error type: every refusal and every failure a call can meet, each
//! with the context needed to act on it (the channel and entry of a channel error, the sizes
//! of a refused allocation or copy).
//!
//! Errors the GPU reports (a channel stopped on a kernel fault, a failed copy) arrive as
//! [`GpuError::Channel`] when the stream that queued the work synchronizes; errors of the
//! calling program (a zero-length copy, a launch of too many threads) are refused before
//! anything is queued; a device that went away under the runtime (returned to its lender,
//! hot-removed) is [`GpuError::DeviceGone`] from the first access that notices it on.

use smartio_devices::gpu::spec::ErrorCode;
use smartio_host::{DmaError, HostError};
use smartio_platform::AccessError;
use thiserror::Error;

/// A GPU runtime failure.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GpuError {
    /// The device's ID register does not hold the GPU's magic (not this kind of device).
    #[error("not a GPU: ID register reads {0:#x}")]
    NotAGpu(u64),
    /// A register or host-memory access failed (and the device is not known to be gone).
    #[error("access failed: {0}")]
    Access(AccessError),
    /// The host OS refused (mapping a BAR).
    #[error("{0}")]
    Host(String),
    /// The DMA API refused (pinned memory, a peer mapping).
    #[error("DMA API: {0}")]
    Dma(String),
    /// Device memory has no free range of the size asked for.
    #[error("out of device memory: asked for {asked} bytes, the largest free range has {free}")]
    OutOfMemory {
        /// Bytes asked for (after rounding to the allocation granule).
        asked: u64,
        /// Bytes of the largest free range.
        free: u64,
    },
    /// Every channel of the GPU is taken by a stream of this context.
    #[error("no free channel: all {channels} channels are in use by streams")]
    NoFreeChannel {
        /// Channels the GPU has.
        channels: u16,
    },
    /// The GPU stopped a stream's channel on an error (reported when the stream
    /// synchronizes; the runtime has reset the channel, so the stream is usable again and
    /// the work queued after the failing entry was dropped).
    #[error("channel {channel}: {}", describe(*code, *info, *entry))]
    Channel {
        /// The channel.
        channel: u16,
        /// What the GPU reported.
        code: ErrorCode,
        /// Its detail: the faulting address, the opcode, the kernel id.
        info: u64,
        /// Ring index of the entry that failed.
        entry: u64,
    },
    /// A peer's device buffer that its BAR1 aperture does not cover.
    #[error("device memory {offset:#x}..{end:#x} is outside the peer's aperture of {aperture:#x} bytes", end = offset.saturating_add(*len))]
    NotInAperture {
        /// Offset of the buffer in the peer's memory.
        offset: u64,
        /// Its length.
        len: u64,
        /// Bytes of the peer's memory its aperture covers (from offset 0).
        aperture: u64,
    },
    /// Pinned host memory (for a ring, a semaphore or a buffer) appears to the GPU at an
    /// address beyond its addressing limit: the GPU could never reach it (a GPU borrowed
    /// through an NTB window high in the borrower's address space, say).
    #[error(
        "host memory appears to the GPU at {bus:#x}..{end:#x}, beyond its {bits}-bit reach",
        end = bus.saturating_add(*len)
    )]
    HostOutOfReach {
        /// The buffer's bus address as the GPU would use it.
        bus: u64,
        /// Its length.
        len: u64,
        /// The GPU's address bits.
        bits: u8,
    },
    /// Peer access to a GPU whose aperture lies beyond this GPU's addressing limit.
    #[error(
        "{peer}'s memory is at {base:#x} as this GPU sees it, beyond its {bits}-bit reach: no \
         path for peer access"
    )]
    PeerOutOfReach {
        /// The peer GPU's name in the host.
        peer: String,
        /// Where its aperture starts, as this GPU would reach it.
        base: u64,
        /// This GPU's address bits.
        bits: u8,
    },
    /// `elapsed` of an event that was never recorded.
    #[error("event was never recorded")]
    EventNotRecorded,
    /// The device is no longer reachable: returned to its lender or hot-removed. Every later
    /// call of the context fails the same way.
    #[error("{device}: the device is gone (returned or removed): {cause}")]
    DeviceGone {
        /// The device's name in the host.
        device: String,
        /// The access that noticed it.
        cause: String,
    },
    /// The context was closed; its streams, events and buffers are no longer usable.
    #[error("the GPU context was closed")]
    Closed,
    /// A copy larger than the device's memory (refused before it is queued).
    #[error("copy of {len} bytes is larger than the device memory of {memory} bytes")]
    CopyTooLarge {
        /// Bytes asked for.
        len: u64,
        /// Bytes of device memory.
        memory: u64,
    },
    /// An argument the call cannot take (said which, and why).
    #[error("bad parameter: {0}")]
    BadParameter(String),
}

impl From<DmaError> for GpuError {
    fn from(e: DmaError) -> Self {
        GpuError::Dma(e.to_string())
    }
}

impl From<HostError> for GpuError {
    fn from(e: HostError) -> Self {
        GpuError::Host(e.to_string())
    }
}

/// The message of a channel error: what failed, and where.
fn describe(code: ErrorCode, info: u64, entry: u64) -> String {
    let what = match code {
        ErrorCode::BadCommand => format!("bad command (opcode {info})"),
        ErrorCode::FetchFailed => format!("fetching ring entries failed at {info:#x}"),
        ErrorCode::CopyFailed => format!("copy failed at {info:#x}"),
        ErrorCode::KernelFault => format!("kernel fault at {info:#x}"),
        ErrorCode::AddressLimit => {
            format!("address {info:#x} is beyond what the GPU can address")
        }
        ErrorCode::BadPut => format!("bad PUT {info}"),
        ErrorCode::UnknownKernel => format!("unknown kernel {info}"),
        ErrorCode::BadRing => format!("bad ring set-up ({info:#x})"),
    };
    format!("{what} (entry {entry})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_error_names_the_channel_the_fault_address_and_the_entry() {
        let e = GpuError::Channel {
            channel: 3,
            code: ErrorCode::KernelFault,
            info: 0xdead_0000,
            entry: 7,
        };
        assert_eq!(
            e.to_string(),
            "channel 3: kernel fault at 0xdead0000 (entry 7)"
        );
    }

    #[test]
    fn an_aperture_miss_names_the_range_and_the_aperture() {
        let e = GpuError::NotInAperture {
            offset: 0x1000_0000,
            len: 0x100,
            aperture: 0x1000_0000,
        };
        assert_eq!(
            e.to_string(),
            "device memory 0x10000000..0x10000100 is outside the peer's aperture of 0x10000000 bytes"
        );
    }
}
