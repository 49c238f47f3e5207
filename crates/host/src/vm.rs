//! A virtual machine's memory as an x86 hypervisor lays it out, backed by pages of its host's
//! RAM: the first piece of the VM support MDEV needs (Paper IV; Paper V §4.5).
//!
//! Guest RAM starts at guest-physical 0 and runs up to the PCI hole, where the guest's BARs
//! are placed; what does not fit below the hole continues from 4 GiB ("low" and "high"
//! memory — the two bases SmartIO's MDEV parent probes from). The hypervisor backs it with
//! pages of the host's RAM, 4 KiB or 2 MiB (huge pages), each allocated on its own, so the
//! guest's contiguous memory is scattered in the host whenever the host's RAM is.

use crate::guest::{GuestMemory, GuestMemoryError};
use crate::memory::RamError;
use crate::os::HostOs;
use smartio_platform::{GuestPhysAddr, PhysAddr, PAGE_SIZE};
use std::ops::Range;
use thiserror::Error;

/// Where the PCI hole starts: guest RAM below it is "low" memory (QEMU's i440fx machine puts
/// the hole at 3 GiB for guests with more than 3.5 GiB of RAM).
pub const PCI_HOLE_START: u64 = 0xC000_0000;

/// Where "high" memory starts: RAM that did not fit below the PCI hole continues here.
pub const HIGH_MEMORY_BASE: u64 = 1 << 32;

/// The size of the host pages that back a VM's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestPageSize {
    /// 4 KiB pages.
    Small,
    /// 2 MiB huge pages.
    Huge,
}

impl GuestPageSize {
    /// Bytes per page.
    pub fn bytes(self) -> u64 {
        match self {
            GuestPageSize::Small => PAGE_SIZE,
            GuestPageSize::Huge => 2 << 20,
        }
    }
}

/// Why a VM's memory cannot be laid out or backed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VmMemoryError {
    /// A memory size the layout cannot hold: zero, not a whole number of pages, or past the
    /// end of the guest-physical space.
    #[error(
        "VM memory of {size} bytes: must be a positive multiple of the {page}-byte page and \
         fit below 2^64 from 4 GiB"
    )]
    Size {
        /// The size asked for.
        size: u64,
        /// The page size.
        page: u64,
    },
    /// The host has no RAM left for the next page.
    #[error("backing VM memory on host {host}: {source}")]
    HostRam {
        /// The host.
        host: String,
        /// The host allocator's refusal.
        source: RamError,
    },
    /// The pages could not be mapped (an emulator bug: the layout's ranges are disjoint and
    /// aligned).
    #[error("mapping VM memory: {0}")]
    Map(#[from] GuestMemoryError),
}

/// A VM's guest-physical RAM: `low` from 0 below the PCI hole, and `high` from 4 GiB for the
/// rest (empty when everything fits below the hole), in whole pages of `page`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmMemoryLayout {
    /// Low memory, starting at guest-physical 0.
    pub low: Range<u64>,
    /// High memory, starting at [`HIGH_MEMORY_BASE`] (empty if none).
    pub high: Range<u64>,
    /// The host pages that back it.
    pub page: GuestPageSize,
}

impl VmMemoryLayout {
    /// The x86 layout of `size` bytes of guest RAM in pages of `page`.
    pub fn x86(size: u64, page: GuestPageSize) -> Result<VmMemoryLayout, VmMemoryError> {
        let err = VmMemoryError::Size {
            size,
            page: page.bytes(),
        };
        if size == 0 || !size.is_multiple_of(page.bytes()) {
            return Err(err);
        }
        let low = size.min(PCI_HOLE_START);
        let high_end = HIGH_MEMORY_BASE.checked_add(size - low).ok_or(err)?;
        Ok(VmMemoryLayout {
            low: 0..low,
            high: HIGH_MEMORY_BASE..high_end,
            page,
        })
    }

    /// Guest RAM in bytes.
    pub fn size(&self) -> u64 {
        (self.low.end - self.low.start) + (self.high.end - self.high.start)
    }

    /// The non-empty ranges of guest RAM, low first.
    pub fn ranges(&self) -> impl Iterator<Item = Range<u64>> {
        [self.low.clone(), self.high.clone()]
            .into_iter()
            .filter(|r| !r.is_empty())
    }

    /// Whether `len` bytes at `addr` are guest RAM (a DMA outside it is the guest's error).
    pub fn contains(&self, addr: GuestPhysAddr, len: u64) -> bool {
        let Some(end) = addr.get().checked_add(len) else {
            return false;
        };
        self.ranges().any(|r| r.start <= addr.get() && end <= r.end)
    }
}

/// A VM's RAM backed by its host: the layout, the guest-to-host translation, and the host
/// pages to give back when the VM is shut down.
#[derive(Debug)]
pub struct VmMemory {
    layout: VmMemoryLayout,
    memory: GuestMemory,
    /// Emptied when the pages go back to the host.
    pages: std::cell::RefCell<Vec<PhysAddr>>,
}

impl VmMemory {
    /// Allocates the pages of `layout` from `os`, one at a time, in guest order. On failure
    /// every page taken so far is given back.
    pub fn back(os: &HostOs, layout: VmMemoryLayout) -> Result<VmMemory, VmMemoryError> {
        let page = layout.page;
        let mut vm = VmMemory {
            layout,
            memory: GuestMemory::new(),
            pages: std::cell::RefCell::new(Vec::new()),
        };
        let ranges: Vec<_> = vm.layout.ranges().collect();
        for range in ranges {
            for guest in range.step_by(page.bytes() as usize) {
                let host = match os.alloc_aligned(page.bytes(), page.bytes()) {
                    Ok(host) => host,
                    Err(source) => {
                        vm.release(os);
                        return Err(VmMemoryError::HostRam {
                            host: os.name().to_string(),
                            source,
                        });
                    }
                };
                vm.pages.borrow_mut().push(host);
                if let Err(e) = vm.memory.map(GuestPhysAddr(guest), host, page.bytes()) {
                    vm.release(os);
                    return Err(e.into());
                }
            }
        }
        Ok(vm)
    }

    /// The guest-physical layout.
    pub fn layout(&self) -> &VmMemoryLayout {
        &self.layout
    }

    /// The guest-to-host translation.
    pub fn memory(&self) -> &GuestMemory {
        &self.memory
    }

    /// The host pages behind the VM, in guest order (none once released).
    pub fn host_pages(&self) -> Vec<PhysAddr> {
        self.pages.borrow().clone()
    }

    /// Gives every host page back (the VM is shut down).
    pub fn release(self, os: &HostOs) {
        self.release_pages(os);
    }

    /// Gives every host page back, keeping the record of the layout (a VM shut down while
    /// its hypervisor state is still shared). Releasing twice gives nothing back twice.
    pub fn release_pages(&self, os: &HostOs) {
        for page in self.pages.borrow_mut().drain(..) {
            os.free(page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn memory_that_fits_below_the_hole_is_all_low() {
        let l = VmMemoryLayout::x86(2 * GIB, GuestPageSize::Huge).expect("valid");
        assert_eq!(l.low, 0..2 * GIB);
        assert!(l.high.is_empty());
        assert_eq!(l.ranges().count(), 1);
        assert_eq!(l.size(), 2 * GIB);
    }

    #[test]
    fn memory_past_the_hole_continues_at_4_gib() {
        let l = VmMemoryLayout::x86(5 * GIB, GuestPageSize::Small).expect("valid");
        assert_eq!(l.low, 0..3 * GIB);
        assert_eq!(l.high, 4 * GIB..6 * GIB);
        assert_eq!(l.size(), 5 * GIB);
        assert!(l.contains(GuestPhysAddr(3 * GIB - 8), 8));
        assert!(
            !l.contains(GuestPhysAddr(3 * GIB - 8), 16),
            "into the PCI hole"
        );
        assert!(!l.contains(GuestPhysAddr(3 * GIB), 1));
        assert!(l.contains(GuestPhysAddr(6 * GIB - 1), 1));
        assert!(!l.contains(GuestPhysAddr(6 * GIB), 1));
        assert!(!l.contains(GuestPhysAddr(u64::MAX), 2), "wraps");
    }

    #[test]
    fn sizes_that_are_not_whole_pages_or_do_not_fit_are_refused() {
        for (size, page) in [
            (0, GuestPageSize::Small),
            (4097, GuestPageSize::Small),
            (3 << 20, GuestPageSize::Huge),
            (u64::MAX - 4095, GuestPageSize::Small),
        ] {
            assert_eq!(
                VmMemoryLayout::x86(size, page),
                Err(VmMemoryError::Size {
                    size,
                    page: page.bytes()
                }),
                "{size} in {page:?} pages"
            );
        }
    }
}
