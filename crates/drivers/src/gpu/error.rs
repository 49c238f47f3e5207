//! The GPU runtime's one error type: every refusal and every failure a call can meet, each
//! with the context needed to act on it (the channel and entry of a channel error, the sizes
//! of a refused allocation or copy).
//!
//! Errors the GPU reports (a channel stopped on a kernel fault, a failed copy) arrive as
//! [`GpuError::Channel`] when the stream that queued the work synchronizes; errors of the
//! calling program (a zero-length copy, a launch of too many threads) are refused before
//! anything is queued; a device that went away under the runtime (returned to its lender,
//! hot-removed) is [`GpuError::DeviceGone`] from the first access that notices it on.

use smartio_devices::gpu::spec::{self, ErrorCode};
use smartio_host::{DmaError, HostError};
use smartio_platform::{AccessError, PhysAddr};
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
    Host(#[from] HostError),
    /// The DMA API refused (pinned memory, a peer mapping).
    #[error("DMA API: {0}")]
    Dma(#[from] DmaError),
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
        cause: AccessError,
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
    BadParameter(#[from] BadCall),
}

/// An argument a runtime call cannot take ([`GpuError::BadParameter`]): refused before
/// anything is queued.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadCall {
    /// `malloc(0)`.
    #[error("malloc of 0 bytes (ask for at least 1)")]
    EmptyMalloc,
    /// `free` of an offset `malloc` did not hand out.
    #[error("free of device memory at {offset:#x} that malloc did not hand out (or was freed)")]
    NotAllocated {
        /// The buffer's offset in device memory.
        offset: u64,
    },
    /// `host_alloc(0)`.
    #[error("host_alloc of 0 bytes (ask for at least 1)")]
    EmptyHostAlloc,
    /// `host_free` of memory `host_alloc` did not hand out.
    #[error("host_free of {cpu} that host_alloc did not hand out (or was freed)")]
    NotHostAllocated {
        /// The buffer's CPU address.
        cpu: PhysAddr,
    },
    /// `elapsed` with the end recorded before the start.
    #[error("the end event ({end} ns) was recorded before the start event ({start} ns)")]
    EventsReversed {
        /// The start event's timestamp.
        start: u64,
        /// The end event's timestamp.
        end: u64,
    },
    /// A host buffer that is not (or no longer) this context's pinned memory.
    #[error("{cpu} is not pinned memory of this context (freed, or another context's)")]
    NotPinned {
        /// The buffer's CPU address.
        cpu: PhysAddr,
    },
    /// A range past the end of a host buffer.
    #[error("{len} bytes at offset {offset} pass the end of a {size}-byte host buffer")]
    PastHostBuffer {
        /// Offset in the buffer.
        offset: u64,
        /// Bytes.
        len: u64,
        /// The buffer's size.
        size: u64,
    },
    /// An event of another context.
    #[error("event of another GPU context")]
    ForeignEvent,
    /// A call on a destroyed stream.
    #[error("stream on channel {channel} was destroyed")]
    StreamDestroyed {
        /// The stream's channel.
        channel: u16,
    },
    /// A copy of no bytes.
    #[error("copy of 0 bytes")]
    EmptyCopy,
    /// A launch of 0 or too many threads.
    #[error("launch of {threads} threads (1 to {max})", max = spec::MAX_THREADS)]
    Threads {
        /// Threads asked for.
        threads: u32,
    },
    /// Kernel parameters larger than a launch entry carries.
    #[error("{bytes} parameter bytes (at most {max})", max = spec::MAX_PARAM_BYTES)]
    ParamBytes {
        /// Bytes given.
        bytes: u64,
    },
    /// A launch of a kernel that is not loaded.
    #[error("kernel {kernel} is not loaded")]
    KernelNotLoaded {
        /// The kernel's id.
        kernel: u32,
    },
    /// `wait_value` at a word that is not an aligned u64 inside the buffer.
    #[error(
        "wait_value at byte {offset} of a {len}-byte buffer at {buffer:#x}: an aligned u64 \
         inside the buffer"
    )]
    FlagWord {
        /// Byte offset in the buffer.
        offset: u64,
        /// The buffer's length.
        len: u64,
        /// The buffer's offset in device memory.
        buffer: u64,
    },
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
