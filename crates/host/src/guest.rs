//! A virtual machine's guest-physical address space: RAM as the VM's OS sees it, backed by
//! scattered pages of the host's RAM.
//!
//! The hypervisor maps runs of guest-physical pages onto host-physical pages; an OS model
//! running inside the VM names memory by [`GuestPhysAddr`], and every access to real memory
//! (or a DMA mapping of it) goes through [`GuestMemory::translate`], which returns the host
//! pieces a guest range covers. A guest range that is contiguous is generally not contiguous
//! on the host, so translation yields a list, never one address.

use smartio_platform::PAGE_SIZE;
use smartio_platform::{GuestPhysAddr, PhysAddr};
use std::collections::BTreeMap;
use thiserror::Error;

/// Why a guest range cannot be mapped or translated. Caused by the emulated software (a
/// guest touching memory it has not got) or by the hypervisor's set-up, never fatal to the
/// emulator.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GuestMemoryError {
    /// A guest-physical address no run maps (the first such byte of the range).
    #[error("guest-physical address {addr} is not backed by host memory")]
    Unmapped {
        /// The first unmapped byte.
        addr: GuestPhysAddr,
    },
    /// The range runs past the end of the 64-bit address space.
    #[error("guest range of {len} bytes at {addr} wraps the address space")]
    Overflow {
        /// Start of the range.
        addr: GuestPhysAddr,
        /// Its length.
        len: u64,
    },
    /// A mapping whose guest address, host address or length is not page-aligned.
    #[error("mapping {len} bytes at guest {guest} to host {host} is not page-aligned")]
    Unaligned {
        /// Guest start.
        guest: GuestPhysAddr,
        /// Host start.
        host: PhysAddr,
        /// Length.
        len: u64,
    },
    /// A mapping over guest pages that are already mapped.
    #[error("guest range of {len} bytes at {guest} overlaps a mapped run")]
    Overlap {
        /// Guest start.
        guest: GuestPhysAddr,
        /// Length.
        len: u64,
    },
}

/// A piece of host memory a guest range covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPiece {
    /// Where the piece starts on the host.
    pub addr: PhysAddr,
    /// Its length in bytes.
    pub len: u64,
}

/// One guest run: `len` bytes from its guest start are backed by host memory from `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    len: u64,
    host: PhysAddr,
}

/// A guest-physical address space.
///
/// Invariants: runs are page-aligned, non-empty, disjoint in guest space, and two runs that
/// touch in guest space are not contiguous on the host (they are merged), so translation
/// returns the fewest pieces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestMemory {
    /// Runs by guest start.
    runs: BTreeMap<u64, Run>,
}

impl GuestMemory {
    /// An address space with nothing mapped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Guest RAM from guest address 0, one page per host page in `pages`, in order: the
    /// layout a hypervisor gives a VM whose RAM it allocated page by page.
    pub fn from_host_pages(pages: &[PhysAddr]) -> Result<Self, GuestMemoryError> {
        let mut g = Self::new();
        let mut guest = GuestPhysAddr(0);
        for &host in pages {
            g.map(guest, host, PAGE_SIZE)?;
            guest = guest
                .checked_add(PAGE_SIZE)
                .ok_or(GuestMemoryError::Overflow {
                    addr: guest,
                    len: PAGE_SIZE,
                })?;
        }
        Ok(g)
    }

    /// Maps `len` bytes of guest space at `guest` onto host memory at `host`. All three must
    /// be page-aligned, and the guest range must not be mapped already.
    pub fn map(
        &mut self,
        guest: GuestPhysAddr,
        host: PhysAddr,
        len: u64,
    ) -> Result<(), GuestMemoryError> {
        if len == 0
            || !guest.get().is_multiple_of(PAGE_SIZE)
            || !host.get().is_multiple_of(PAGE_SIZE)
            || !len.is_multiple_of(PAGE_SIZE)
        {
            return Err(GuestMemoryError::Unaligned { guest, host, len });
        }
        let end = guest
            .get()
            .checked_add(len)
            .ok_or(GuestMemoryError::Overflow { addr: guest, len })?;
        host.get()
            .checked_add(len)
            .ok_or(GuestMemoryError::Overflow { addr: guest, len })?;
        let overlaps_before = self.run_containing(guest.get()).is_some();
        let overlaps_after = self.runs.range(guest.get()..end).next().is_some();
        if overlaps_before || overlaps_after {
            return Err(GuestMemoryError::Overlap { guest, len });
        }
        let mut start = guest.get();
        let mut run = Run { len, host };
        // Merge with the run ending where this one starts, if the host side continues too.
        if let Some((&s, &prev)) = self.runs.range(..start).next_back() {
            if s + prev.len == start && prev.host.get() + prev.len == host.get() {
                self.runs.remove(&s);
                start = s;
                run = Run {
                    len: prev.len + len,
                    host: prev.host,
                };
            }
        }
        // And with the run starting where this one ends.
        if let Some(&next) = self.runs.get(&end) {
            if run.host.get() + run.len == next.host.get() {
                self.runs.remove(&end);
                run.len += next.len;
            }
        }
        self.runs.insert(start, run);
        Ok(())
    }

    /// The run containing guest byte `at`: its guest start and the run.
    fn run_containing(&self, at: u64) -> Option<(u64, Run)> {
        let (&start, &run) = self.runs.range(..=at).next_back()?;
        (at - start < run.len).then_some((start, run))
    }

    /// How many bytes from `addr` on resolve to host memory without a gap (0 if `addr`
    /// itself does not): what a hypervisor learns by probing guest-physical addresses one
    /// after the other from a base until one does not resolve.
    pub fn resolvable_from(&self, addr: GuestPhysAddr) -> u64 {
        let mut at = addr.get();
        while let Some((start, run)) = self.run_containing(at) {
            at = start + run.len;
        }
        at - addr.get()
    }

    /// The host memory behind `len` guest bytes at `addr`, in guest order, adjacent pieces
    /// merged when the host side is contiguous. An empty range translates to no pieces.
    pub fn translate(
        &self,
        addr: GuestPhysAddr,
        len: u64,
    ) -> Result<Vec<HostPiece>, GuestMemoryError> {
        let end = addr
            .get()
            .checked_add(len)
            .ok_or(GuestMemoryError::Overflow { addr, len })?;
        let mut pieces: Vec<HostPiece> = Vec::new();
        let mut at = addr.get();
        while at < end {
            let (start, run) = self.run_containing(at).ok_or(GuestMemoryError::Unmapped {
                addr: GuestPhysAddr(at),
            })?;
            let offset = at - start;
            let take = (run.len - offset).min(end - at);
            // Runs next to each other in the guest are never contiguous in the host too
            // (`map` merges those), so every run is a piece of its own.
            pieces.push(HostPiece {
                addr: run.host.offset(offset),
                len: take,
            });
            at += take;
        }
        Ok(pieces)
    }

    /// The host address of one guest byte.
    pub fn translate_addr(&self, addr: GuestPhysAddr) -> Result<PhysAddr, GuestMemoryError> {
        let (start, run) = self
            .run_containing(addr.get())
            .ok_or(GuestMemoryError::Unmapped { addr })?;
        Ok(run.host.offset(addr.get() - start))
    }

    /// Bytes of guest space that are mapped.
    pub fn mapped_bytes(&self) -> u64 {
        self.runs.values().map(|r| r.len).sum()
    }

    /// The runs: (guest start, host start, length), by guest address.
    pub fn runs(&self) -> impl Iterator<Item = (GuestPhysAddr, PhysAddr, u64)> + '_ {
        self.runs
            .iter()
            .map(|(&g, r)| (GuestPhysAddr(g), r.host, r.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn piece(addr: u64, len: u64) -> HostPiece {
        HostPiece {
            addr: PhysAddr(addr),
            len,
        }
    }

    #[test]
    fn a_range_across_scattered_pages_translates_to_one_piece_per_host_run() {
        let g = GuestMemory::from_host_pages(&[
            PhysAddr(0x9000),
            PhysAddr(0xa000),
            PhysAddr(0x2000),
            PhysAddr(0x7000),
        ])
        .expect("aligned");
        assert_eq!(g.runs().count(), 3, "the first two host pages are one run");
        let got = g
            .translate(GuestPhysAddr(0x800), 3 * PAGE_SIZE)
            .expect("mapped");
        assert_eq!(
            got,
            vec![
                piece(0x9800, 0x1800),
                piece(0x2000, 0x1000),
                piece(0x7000, 0x800)
            ]
        );
        assert_eq!(
            g.translate_addr(GuestPhysAddr(0x2004)),
            Ok(PhysAddr(0x2004))
        );
        assert_eq!(g.mapped_bytes(), 4 * PAGE_SIZE);
    }

    #[test]
    fn an_unmapped_guest_address_is_an_error_naming_the_first_missing_byte() {
        let mut g = GuestMemory::new();
        g.map(GuestPhysAddr(0), PhysAddr(0x10_0000), PAGE_SIZE)
            .expect("aligned");
        g.map(GuestPhysAddr(2 * PAGE_SIZE), PhysAddr(0x20_0000), PAGE_SIZE)
            .expect("aligned");
        assert_eq!(
            g.translate(GuestPhysAddr(0x10), 2 * PAGE_SIZE),
            Err(GuestMemoryError::Unmapped {
                addr: GuestPhysAddr(PAGE_SIZE)
            })
        );
        assert_eq!(
            g.translate_addr(GuestPhysAddr(3 * PAGE_SIZE)),
            Err(GuestMemoryError::Unmapped {
                addr: GuestPhysAddr(3 * PAGE_SIZE)
            })
        );
        assert_eq!(g.translate(GuestPhysAddr(5 * PAGE_SIZE), 0), Ok(Vec::new()));
    }

    #[test]
    fn mappings_must_be_aligned_disjoint_and_inside_the_address_space() {
        let mut g = GuestMemory::new();
        g.map(GuestPhysAddr(PAGE_SIZE), PhysAddr(0), 2 * PAGE_SIZE)
            .expect("aligned");
        assert!(matches!(
            g.map(GuestPhysAddr(0x10), PhysAddr(0), PAGE_SIZE),
            Err(GuestMemoryError::Unaligned { .. })
        ));
        assert!(matches!(
            g.map(GuestPhysAddr(0), PhysAddr(0), 0),
            Err(GuestMemoryError::Unaligned { .. })
        ));
        for guest in [0, 2 * PAGE_SIZE] {
            assert_eq!(
                g.map(GuestPhysAddr(guest), PhysAddr(0x40_0000), 2 * PAGE_SIZE),
                Err(GuestMemoryError::Overlap {
                    guest: GuestPhysAddr(guest),
                    len: 2 * PAGE_SIZE
                })
            );
        }
        let top = GuestPhysAddr(u64::MAX - PAGE_SIZE + 1);
        assert!(matches!(
            g.map(top, PhysAddr(0), 2 * PAGE_SIZE),
            Err(GuestMemoryError::Overflow { .. })
        ));
        assert!(matches!(
            g.translate(top, PAGE_SIZE),
            Err(GuestMemoryError::Overflow { .. })
        ));
    }

    #[test]
    fn a_run_mapped_between_two_host_contiguous_runs_joins_them() {
        let mut g = GuestMemory::new();
        g.map(GuestPhysAddr(0), PhysAddr(0x10_0000), PAGE_SIZE)
            .expect("aligned");
        g.map(
            GuestPhysAddr(2 * PAGE_SIZE),
            PhysAddr(0x10_0000 + 2 * PAGE_SIZE),
            PAGE_SIZE,
        )
        .expect("aligned");
        g.map(
            GuestPhysAddr(PAGE_SIZE),
            PhysAddr(0x10_0000 + PAGE_SIZE),
            PAGE_SIZE,
        )
        .expect("aligned");
        assert_eq!(
            g.runs().collect::<Vec<_>>(),
            vec![(GuestPhysAddr(0), PhysAddr(0x10_0000), 3 * PAGE_SIZE)]
        );
    }

    proptest! {
        #[test]
        fn translation_agrees_with_a_page_by_page_model(
            pages in proptest::collection::vec(0u64..64, 1..32),
            start in 0u64..(40 * PAGE_SIZE),
            len in 0u64..(8 * PAGE_SIZE),
        ) {
            let host: Vec<PhysAddr> = pages.iter().map(|p| PhysAddr(p * PAGE_SIZE)).collect();
            let g = GuestMemory::from_host_pages(&host).expect("aligned");
            let mapped = host.len() as u64 * PAGE_SIZE;
            match g.translate(GuestPhysAddr(start), len) {
                Ok(pieces) => {
                    prop_assert!(len == 0 || start + len <= mapped);
                    prop_assert_eq!(pieces.iter().map(|p| p.len).sum::<u64>(), len);
                    // Byte by byte (sampled at piece starts and ends), the model agrees.
                    let mut at = start;
                    for (i, p) in pieces.iter().enumerate() {
                        prop_assert!(p.len > 0);
                        let page = host[(at / PAGE_SIZE) as usize];
                        prop_assert_eq!(p.addr, page.offset(at % PAGE_SIZE));
                        let last = at + p.len - 1;
                        let page = host[(last / PAGE_SIZE) as usize];
                        prop_assert_eq!(p.addr.offset(p.len - 1), page.offset(last % PAGE_SIZE));
                        if let Some(next) = pieces.get(i + 1) {
                            prop_assert_ne!(p.addr.offset(p.len), next.addr, "pieces are maximal");
                        }
                        at += p.len;
                    }
                }
                Err(GuestMemoryError::Unmapped { addr }) => {
                    prop_assert!(start + len > mapped);
                    prop_assert_eq!(addr, GuestPhysAddr(mapped.max(start)));
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }
    }
}
