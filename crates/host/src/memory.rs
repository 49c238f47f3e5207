//! Physical RAM allocation for one host: contiguous, aligned ranges, first fit.
//!
//! The lowest [`RESERVED_LOW`] bytes belong to firmware, the kernel and the fixed buffers of
//! the DMA bandwidth test; they are never handed out.

use smartio_platform::PAGE_SIZE;
use std::collections::BTreeMap;
use std::ops::Range;
use thiserror::Error;

/// Bytes at the bottom of RAM that are never allocated.
pub const RESERVED_LOW: u64 = 512 << 20;

/// Why an allocation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RamError {
    /// No free range is large enough.
    #[error("out of memory: no free contiguous range of {size} bytes (aligned to {align}); {free} bytes free in total")]
    OutOfMemory {
        /// Bytes asked for.
        size: u64,
        /// Alignment asked for.
        align: u64,
        /// Free bytes, not necessarily contiguous.
        free: u64,
    },
    /// A zero-sized allocation or an alignment that is not a power of two.
    #[error("invalid allocation: {size} bytes aligned to {align}")]
    Invalid {
        /// Bytes asked for.
        size: u64,
        /// Alignment asked for.
        align: u64,
    },
    /// Freeing something that was not allocated.
    #[error("{addr:#x} is not the start of an allocation")]
    NotAllocated {
        /// The address.
        addr: u64,
    },
}

/// Free and allocated ranges of a host's RAM.
///
/// Invariant: free ranges are disjoint, sorted, never adjacent (they are merged) and lie inside
/// the RAM ranges given at creation; allocated ranges are disjoint from them.
#[derive(Debug, Clone)]
pub struct RamAllocator {
    free: BTreeMap<u64, u64>,
    allocated: BTreeMap<u64, u64>,
}

impl RamAllocator {
    /// An allocator over `ram` (the host's RAM ranges), minus the reserved low memory.
    pub fn new(ram: &[Range<u64>]) -> RamAllocator {
        Self::reserving(ram, RESERVED_LOW)
    }

    /// An allocator over `ram` minus its lowest `reserved` bytes (a guest kernel's own
    /// reservation is smaller than a host's).
    pub fn reserving(ram: &[Range<u64>], reserved: u64) -> RamAllocator {
        let mut free = BTreeMap::new();
        for r in ram {
            let start = r.start.max(reserved).next_multiple_of(PAGE_SIZE);
            let end = r.end - r.end % PAGE_SIZE;
            if start < end {
                free.insert(start, end - start);
            }
        }
        RamAllocator {
            free,
            allocated: BTreeMap::new(),
        }
    }

    /// An allocator over the whole of `range`, nothing reserved: for address spaces that are
    /// not RAM (I/O virtual address ranges, device memory).
    pub fn space(range: Range<u64>) -> RamAllocator {
        let mut free = BTreeMap::new();
        let start = range.start.next_multiple_of(PAGE_SIZE);
        let end = range.end - range.end % PAGE_SIZE;
        if start < end {
            free.insert(start, end - start);
        }
        RamAllocator {
            free,
            allocated: BTreeMap::new(),
        }
    }

    /// Allocates `size` bytes (rounded up to pages) aligned to `align`; returns the address.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64, RamError> {
        if size == 0 || !align.is_power_of_two() {
            return Err(RamError::Invalid { size, align });
        }
        let Some(size) = size.checked_next_multiple_of(PAGE_SIZE) else {
            return Err(RamError::Invalid { size, align });
        };
        let align = align.max(PAGE_SIZE);
        let found = self.free.iter().find_map(|(&start, &len)| {
            let at = start.checked_next_multiple_of(align)?;
            (at.checked_add(size)? <= start + len).then_some((start, len, at))
        });
        let Some((start, len, at)) = found else {
            return Err(RamError::OutOfMemory {
                size,
                align,
                free: self.free_bytes(),
            });
        };
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        if at + size < start + len {
            self.free.insert(at + size, start + len - at - size);
        }
        self.allocated.insert(at, size);
        Ok(at)
    }

    /// Frees an allocation made by [`RamAllocator::alloc`].
    pub fn free(&mut self, addr: u64) -> Result<(), RamError> {
        let size = self
            .allocated
            .remove(&addr)
            .ok_or(RamError::NotAllocated { addr })?;
        let (mut start, mut end) = (addr, addr + size);
        if let Some((&s, &l)) = self.free.range(..start).next_back() {
            if s + l == start {
                self.free.remove(&s);
                start = s;
            }
        }
        if let Some(l) = self.free.remove(&end) {
            end += l;
        }
        self.free.insert(start, end - start);
        Ok(())
    }

    /// Free bytes in total.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    /// Allocated bytes in total.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_and_alignments_past_the_address_space_are_refused_not_wrapped() {
        let mut ram = RamAllocator::new(&[0..1 << 31, 1 << 32..1 << 33]);
        let before = ram.allocated_bytes();
        for (size, align) in [(u64::MAX, 4096), (u64::MAX - 4095, 4096), (4096, 1 << 63)] {
            let r = ram.alloc(size, align);
            assert!(
                matches!(
                    r,
                    Err(RamError::Invalid { .. } | RamError::OutOfMemory { .. })
                ),
                "{size:#x} aligned {align:#x}: {r:?}"
            );
        }
        assert_eq!(ram.allocated_bytes(), before, "nothing was taken");
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_above_the_reserved_low_memory() {
        let mut ram = RamAllocator::new(&[0..1 << 31, 1 << 32..(1 << 32) + (1 << 30)]);
        let a = ram.alloc(5000, 4096).expect("fits");
        let b = ram.alloc(1 << 20, 1 << 20).expect("fits");
        assert_eq!(a, RESERVED_LOW);
        assert_eq!(b % (1 << 20), 0);
        assert!(b >= a + 8192);
    }

    #[test]
    fn an_address_space_allocator_reserves_nothing() {
        let mut a = RamAllocator::space(0..1 << 20);
        assert_eq!(a.alloc(4096, 4096), Ok(0));
        assert_eq!(a.free_bytes(), (1 << 20) - 4096);
    }

    #[test]
    fn exhaustion_is_an_error_and_freeing_merges_back() {
        let mut ram = RamAllocator::new(std::slice::from_ref(&(0..RESERVED_LOW + (1 << 20))));
        let total = ram.free_bytes();
        let a = ram.alloc(1 << 19, PAGE_SIZE).expect("half");
        let b = ram.alloc(1 << 19, PAGE_SIZE).expect("other half");
        assert!(matches!(
            ram.alloc(PAGE_SIZE, PAGE_SIZE),
            Err(RamError::OutOfMemory { free: 0, .. })
        ));
        ram.free(a).expect("allocated");
        ram.free(b).expect("allocated");
        assert_eq!(ram.free_bytes(), total);
        assert_eq!(ram.alloc(1 << 20, PAGE_SIZE), Ok(RESERVED_LOW));
        assert_eq!(ram.free(12345), Err(RamError::NotAllocated { addr: 12345 }));
    }

    proptest! {
        #[test]
        fn random_alloc_free_keeps_ranges_disjoint_and_accounted(
            ops in proptest::collection::vec((1u64..200_000, 0u32..6, any::<bool>()), 1..60)
        ) {
            let mut ram = RamAllocator::new(std::slice::from_ref(&(0..RESERVED_LOW + (16 << 20))));
            let total = ram.free_bytes();
            let mut live: Vec<(u64, u64)> = Vec::new();
            for (size, align_log, free_one) in ops {
                if free_one && !live.is_empty() {
                    let (addr, _) = live.remove(0);
                    prop_assert!(ram.free(addr).is_ok());
                } else if let Ok(addr) = ram.alloc(size, PAGE_SIZE << align_log) {
                    prop_assert_eq!(addr % (PAGE_SIZE << align_log), 0);
                    let len = size.next_multiple_of(PAGE_SIZE);
                    for &(o, l) in &live {
                        prop_assert!(addr + len <= o || o + l <= addr);
                    }
                    live.push((addr, len));
                }
                prop_assert_eq!(ram.free_bytes() + ram.allocated_bytes(), total);
            }
        }
    }
}
