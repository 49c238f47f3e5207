//! Where segment memory comes from: one allocator per host, for every segment of that host
//! whichever API creates it (SISCI's `create_segment`, the device API's `create_segment`,
//! data-interrupt inboxes).
//!
//! On booted hosts that is the kernel's allocator ([`HostOs`]), shared with drivers and
//! programs, so a segment never overlaps their buffers. On hosts without kernels it is one
//! fallback [`RamAllocator`] per host over the host's RAM, owned here.

use smartio_fabric::HostId;
use smartio_host::{HostOs, RamAllocator, RamError};
use smartio_platform::PhysAddr;

/// The allocators of every host's segment memory, indexed by host.
///
/// Invariant: exactly one source per host, chosen when the service starts; every segment
/// allocation and free of the SmartIO layer goes through it.
#[derive(Debug)]
pub(crate) enum SegmentRam {
    /// Allocators of their own over each host's RAM (a cluster without host kernels).
    Fallback(Vec<RamAllocator>),
    /// Each host kernel's allocator, shared with its drivers and programs.
    Kernel(Vec<HostOs>),
}

impl SegmentRam {
    /// `size` bytes (rounded up to whole pages) of `host`'s RAM aligned to `align`.
    ///
    /// The caller has checked `host` against the cluster.
    pub fn alloc(&mut self, host: HostId, size: u64, align: u64) -> Result<PhysAddr, RamError> {
        match self {
            SegmentRam::Fallback(ram) => ram[host.index()].alloc(size, align).map(PhysAddr),
            SegmentRam::Kernel(hosts) => hosts[host.index()].alloc_aligned(size, align),
        }
    }

    /// Whether [`SegmentRam::alloc`] hands out memory already zeroed (the kernel's allocator
    /// zeroes what it allocates; the fallback allocators only book addresses).
    pub fn zeroes(&self) -> bool {
        matches!(self, SegmentRam::Kernel(_))
    }

    /// Gives back what [`SegmentRam::alloc`] returned at `addr`.
    pub fn free(&mut self, host: HostId, addr: PhysAddr) -> Result<(), RamError> {
        match self {
            SegmentRam::Fallback(ram) => ram[host.index()].free(addr.get()),
            SegmentRam::Kernel(hosts) => {
                hosts[host.index()].free(addr);
                Ok(())
            }
        }
    }
}
