//! Memory the runtime hands out: device memory ([`DeviceBuffer`], `cudaMalloc`) from a
//! first-fit allocator over the GPU's memory, and pinned host memory ([`HostBuffer`],
//! `cudaHostAlloc`) from the DMA API.
//!
//! Invariants of [`DeviceAllocator`]: allocations are [`GRANULE`]-aligned and a multiple of
//! it long, never overlap, and lie inside `[0, size)`; the lowest free range that fits is
//! taken (first fit from offset 0), so small allocations land at low offsets — inside the
//! BAR1 aperture, where peers and CPUs reach them.

use smartio_devices::gpu::spec::GpuAddr;
use smartio_platform::{BusAddr, PhysAddr};
use std::collections::BTreeMap;

/// Alignment and size granule of device allocations (as `cudaMalloc`'s 256 bytes).
pub const GRANULE: u64 = 256;

/// A range of device memory (`cudaMalloc`'s pointer, as an offset into device memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceBuffer {
    /// Offset into device memory ([`GRANULE`]-aligned).
    pub offset: u64,
    /// Bytes asked for.
    pub len: u64,
}

impl DeviceBuffer {
    /// The buffer's first byte, as the GPU addresses it.
    pub fn addr(&self) -> GpuAddr {
        GpuAddr::Device(self.offset)
    }

    /// Byte `offset` of the buffer, as the GPU addresses it (not checked against `len`).
    pub fn at(&self, offset: u64) -> GpuAddr {
        GpuAddr::Device(self.offset.saturating_add(offset))
    }
}

/// Pinned host memory mapped for the GPU (`cudaHostAlloc` with `cudaHostAllocMapped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostBuffer {
    /// Where the CPU reaches it.
    pub cpu: PhysAddr,
    /// Where the GPU reaches it.
    pub bus: BusAddr,
    /// Bytes asked for.
    pub len: u64,
}

impl HostBuffer {
    /// The buffer's first byte, as the GPU addresses it.
    pub fn addr(&self) -> GpuAddr {
        GpuAddr::Bus(self.bus)
    }

    /// Byte `offset` of the buffer, as the GPU addresses it (not checked against `len`).
    pub fn at(&self, offset: u64) -> GpuAddr {
        GpuAddr::Bus(self.bus.offset(offset))
    }
}

/// Why the allocator refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// A zero-length allocation.
    Empty,
    /// No free range of `asked` bytes; the largest has `free`.
    Full {
        /// Bytes asked for, rounded up to the granule.
        asked: u64,
        /// Bytes of the largest free range.
        free: u64,
    },
    /// A free of a range that is not an allocation.
    NotAllocated {
        /// Its offset.
        offset: u64,
    },
}

/// First-fit allocator over `[0, size)` of device memory.
#[derive(Debug, Clone)]
pub struct DeviceAllocator {
    size: u64,
    /// offset → rounded length of every allocation.
    used: BTreeMap<u64, u64>,
}

impl DeviceAllocator {
    /// An allocator over `size` bytes (rounded down to the granule), all free.
    pub fn new(size: u64) -> DeviceAllocator {
        DeviceAllocator {
            size: size - size % GRANULE,
            used: BTreeMap::new(),
        }
    }

    /// The free ranges, lowest first, as `(offset, len)`.
    fn holes(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut at = 0;
        self.used
            .iter()
            .map(|(&o, &l)| (o, o + l))
            .chain(std::iter::once((self.size, self.size)))
            .filter_map(move |(start, end)| {
                let hole = (at, start - at);
                at = end;
                (hole.1 > 0).then_some(hole)
            })
    }

    /// Takes the lowest free range of `len` bytes (rounded up to the granule).
    pub fn alloc(&mut self, len: u64) -> Result<u64, AllocError> {
        if len == 0 {
            return Err(AllocError::Empty);
        }
        let asked = len
            .checked_next_multiple_of(GRANULE)
            .unwrap_or(u64::MAX - GRANULE + 1);
        let fit = self.holes().find(|&(_, l)| l >= asked);
        match fit {
            Some((offset, _)) => {
                self.used.insert(offset, asked);
                Ok(offset)
            }
            None => Err(AllocError::Full {
                asked,
                free: self.largest_free(),
            }),
        }
    }

    /// Gives back the allocation at `offset`.
    pub fn free(&mut self, offset: u64) -> Result<(), AllocError> {
        self.used
            .remove(&offset)
            .map(|_| ())
            .ok_or(AllocError::NotAllocated { offset })
    }

    /// Bytes of the largest free range.
    pub fn largest_free(&self) -> u64 {
        self.holes().map(|(_, l)| l).max().unwrap_or(0)
    }

    /// Bytes free in all.
    pub fn free_bytes(&self) -> u64 {
        self.size - self.used.values().sum::<u64>()
    }

    /// Every allocation is given back.
    pub fn clear(&mut self) {
        self.used.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_rounded_and_placed_first_fit_from_zero() {
        let mut a = DeviceAllocator::new(1 << 20);
        assert_eq!(a.alloc(1), Ok(0));
        assert_eq!(a.alloc(300), Ok(256));
        assert_eq!(a.alloc(256), Ok(768));
        assert_eq!(a.free_bytes(), (1 << 20) - 1024);
    }

    #[test]
    fn a_freed_range_is_reused_by_the_next_allocation_that_fits() {
        let mut a = DeviceAllocator::new(1 << 20);
        let x = a.alloc(4096).expect("x");
        let y = a.alloc(4096).expect("y");
        a.free(x).expect("free x");
        assert_eq!(a.alloc(8192), Ok(8192), "too big for the hole at 0");
        assert_eq!(a.alloc(1024), Ok(0), "the hole at 0 is the first fit");
        assert_eq!(a.alloc(3072), Ok(1024), "the rest of the hole");
        assert_eq!(y, 4096);
    }

    #[test]
    fn a_full_allocator_says_what_was_asked_and_the_largest_free_range() {
        let mut a = DeviceAllocator::new(4096);
        a.alloc(1024).expect("first");
        let mid = a.alloc(1024).expect("second");
        a.alloc(1024).expect("third");
        a.free(mid).expect("free");
        assert_eq!(
            a.alloc(1500),
            Err(AllocError::Full {
                asked: 1536,
                free: 1024
            })
        );
        assert_eq!(a.free_bytes(), 2048);
    }

    #[test]
    fn zero_lengths_double_frees_and_huge_asks_are_refused() {
        let mut a = DeviceAllocator::new(1 << 20);
        assert_eq!(a.alloc(0), Err(AllocError::Empty));
        let x = a.alloc(10).expect("x");
        a.free(x).expect("free");
        assert_eq!(a.free(x), Err(AllocError::NotAllocated { offset: 0 }));
        assert!(matches!(a.alloc(u64::MAX), Err(AllocError::Full { .. })));
        assert_eq!(a.largest_free(), 1 << 20);
    }

    #[test]
    fn the_whole_memory_can_be_taken_and_clear_gives_it_back() {
        let mut a = DeviceAllocator::new(1 << 20);
        assert_eq!(a.alloc(1 << 20), Ok(0));
        assert!(matches!(a.alloc(1), Err(AllocError::Full { free: 0, .. })));
        a.clear();
        assert_eq!(a.alloc(1), Ok(0));
    }
}
