//! A host IOMMU: per-device translation domains mapping I/O virtual pages to physical pages.
//!
//! When the IOMMU is on, every DMA from an endpoint is translated at the root complex through
//! the domain the endpoint is attached to; an address without a mapping (or a write to a
//! read-only mapping) is a fault and the access does not happen. Pages are 4 KiB.

use crate::ids::EndpointId;
use smartio_platform::{BusAddr, PhysAddr};
use std::collections::BTreeMap;
use thiserror::Error;

/// The IOMMU page size (the host's page).
pub use smartio_platform::PAGE_SIZE;

/// A translation domain of one IOMMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct DomainId(pub u32);

/// A run of consecutive I/O pages mapped to consecutive physical pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    pages: u64,
    phys_page: u64,
    writable: bool,
}

/// A domain's page table, kept as runs so that a window of many GiB is one entry.
///
/// Invariant: runs never overlap; `pages` is the sum of their lengths.
#[derive(Debug, Clone, Default)]
struct Domain {
    runs: BTreeMap<u64, Run>,
    pages: u64,
}

impl Domain {
    /// The run containing I/O page `page`: its first page and the run.
    fn run_at(&self, page: u64) -> Option<(u64, Run)> {
        self.runs
            .range(..=page)
            .next_back()
            .filter(|(&start, r)| page < start + r.pages)
            .map(|(&start, &r)| (start, r))
    }

    /// The first mapped page in `first..first + count`, if any.
    fn first_mapped(&self, first: u64, count: u64) -> Option<u64> {
        if self.run_at(first).is_some() {
            return Some(first);
        }
        self.runs
            .range(first..first + count)
            .next()
            .map(|(&p, _)| p)
    }

    /// The first unmapped page in `first..first + count`, if any.
    fn first_unmapped(&self, first: u64, count: u64) -> Option<u64> {
        let mut at = first;
        while at < first + count {
            match self.run_at(at) {
                Some((start, run)) => at = start + run.pages,
                None => return Some(at),
            }
        }
        None
    }
}

/// Errors from managing or using IOMMU mappings.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IommuError {
    /// The IOMMU is disabled on this host.
    #[error("the IOMMU is disabled on this host")]
    Disabled,
    /// The domain id is not one of this IOMMU's.
    #[error("unknown IOMMU domain {0:?}")]
    UnknownDomain(DomainId),
    /// Addresses and lengths must be page-aligned.
    #[error("mapping {iova} -> {phys} of {len} bytes is not 4 KiB-aligned")]
    Misaligned {
        iova: BusAddr,
        phys: PhysAddr,
        len: u64,
    },
    /// The I/O virtual page is already mapped.
    #[error("I/O virtual address {0} is already mapped")]
    AlreadyMapped(BusAddr),
    /// The I/O virtual page is not mapped.
    #[error("I/O virtual address {0} is not mapped")]
    NotMapped(BusAddr),
    /// The I/O virtual or the physical range runs past the end of the 64-bit address space.
    #[error(
        "mapping {iova} -> {phys} of {len} bytes runs past the end of the 64-bit address space"
    )]
    BeyondAddressSpace {
        iova: BusAddr,
        phys: PhysAddr,
        len: u64,
    },
}

/// Why a DMA could not be translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultReason {
    /// The endpoint is not attached to any domain.
    NoDomain,
    /// No mapping for the page.
    NotMapped,
    /// A write to a read-only page.
    ReadOnly,
}

/// A host's IOMMU.
#[derive(Debug, Clone)]
pub struct Iommu {
    enabled: bool,
    domains: Vec<Domain>,
    attached: BTreeMap<EndpointId, DomainId>,
    /// Unmaps so far: each invalidates what an IOTLB cached (flushed in batches).
    invalidations: u64,
    /// Re-attachments so far: a device moved to another domain flushes at once.
    forced_flushes: u64,
}

impl Iommu {
    /// An IOMMU, on or off.
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            domains: Vec::new(),
            attached: BTreeMap::new(),
            invalidations: 0,
            forced_flushes: 0,
        }
    }

    /// How many unmaps the IOMMU has had (a translation cache flushes after a batch of them).
    pub fn invalidations(&self) -> u64 {
        self.invalidations
    }

    /// How many times a device was moved to another domain (a translation cache that saw a
    /// smaller count must forget what it holds at once).
    pub fn forced_flushes(&self) -> u64 {
        self.forced_flushes
    }

    /// Whether DMA is translated.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Creates an empty domain.
    pub fn create_domain(&mut self) -> Result<DomainId, IommuError> {
        if !self.enabled {
            return Err(IommuError::Disabled);
        }
        self.domains.push(Domain::default());
        Ok(DomainId(self.domains.len() as u32 - 1))
    }

    /// Attaches an endpoint to a domain (replacing an earlier attachment).
    pub fn attach(&mut self, endpoint: EndpointId, domain: DomainId) -> Result<(), IommuError> {
        self.domain(domain)?;
        if self.attached.insert(endpoint, domain).is_some() {
            self.forced_flushes += 1;
        }
        Ok(())
    }

    /// The domain an endpoint is attached to.
    pub fn domain_of(&self, endpoint: EndpointId) -> Option<DomainId> {
        self.attached.get(&endpoint).copied()
    }

    fn domain(&self, id: DomainId) -> Result<&Domain, IommuError> {
        self.domains
            .get(id.0 as usize)
            .ok_or(IommuError::UnknownDomain(id))
    }

    /// Maps `len` bytes at `iova` to `phys`. All three must be page-aligned; nothing is mapped
    /// if any page is already mapped.
    pub fn map(
        &mut self,
        domain: DomainId,
        iova: BusAddr,
        phys: PhysAddr,
        len: u64,
        writable: bool,
    ) -> Result<(), IommuError> {
        if !iova.get().is_multiple_of(PAGE_SIZE)
            || !phys.get().is_multiple_of(PAGE_SIZE)
            || !len.is_multiple_of(PAGE_SIZE)
            || len == 0
        {
            return Err(IommuError::Misaligned { iova, phys, len });
        }
        // Both ranges end at 2^64 at the latest, so page numbers stay below 2^52 and byte
        // counts computed from them (translate) below 2^64.
        let end = |start: u64| u128::from(start) + u128::from(len);
        if end(iova.get()) > 1 << 64 || end(phys.get()) > 1 << 64 {
            return Err(IommuError::BeyondAddressSpace { iova, phys, len });
        }
        self.domain(domain)?;
        let d = &mut self.domains[domain.0 as usize];
        let first = iova.get() / PAGE_SIZE;
        let count = len / PAGE_SIZE;
        if let Some(page) = d.first_mapped(first, count) {
            return Err(IommuError::AlreadyMapped(BusAddr(page * PAGE_SIZE)));
        }
        d.runs.insert(
            first,
            Run {
                pages: count,
                phys_page: phys.get() / PAGE_SIZE,
                writable,
            },
        );
        d.pages += count;
        Ok(())
    }

    /// Removes the mapping of `len` bytes at `iova`; every page must be mapped.
    pub fn unmap(&mut self, domain: DomainId, iova: BusAddr, len: u64) -> Result<(), IommuError> {
        if !iova.get().is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) {
            return Err(IommuError::Misaligned {
                iova,
                phys: PhysAddr(0),
                len,
            });
        }
        self.domain(domain)?;
        let d = &mut self.domains[domain.0 as usize];
        let first = iova.get() / PAGE_SIZE;
        let count = len / PAGE_SIZE;
        if let Some(missing) = d.first_unmapped(first, count) {
            return Err(IommuError::NotMapped(BusAddr(missing * PAGE_SIZE)));
        }
        // Cut the runs at both ends, then drop everything in between.
        let end = first + count;
        let mut at = first;
        while at < end {
            let Some((start, run)) = d.run_at(at) else {
                break;
            };
            d.runs.remove(&start);
            if start < first {
                d.runs.insert(
                    start,
                    Run {
                        pages: first - start,
                        ..run
                    },
                );
            }
            let run_end = start + run.pages;
            if run_end > end {
                d.runs.insert(
                    end,
                    Run {
                        pages: run_end - end,
                        phys_page: run.phys_page + (end - start),
                        writable: run.writable,
                    },
                );
            }
            at = run_end;
        }
        d.pages -= count;
        self.invalidations += 1;
        Ok(())
    }

    /// Number of mapped pages in a domain.
    pub fn mapped_pages(&self, domain: DomainId) -> Result<usize, IommuError> {
        Ok(self.domain(domain)?.pages as usize)
    }

    /// Translates a DMA of up to `len` bytes. Returns the physical address and how many bytes
    /// from it are physically contiguous (at most `len`).
    pub fn translate(
        &self,
        endpoint: EndpointId,
        iova: BusAddr,
        len: u64,
        write: bool,
    ) -> Result<(PhysAddr, u64), FaultReason> {
        let domain = self.attached.get(&endpoint).ok_or(FaultReason::NoDomain)?;
        let d = &self.domains[domain.0 as usize];
        let page = iova.get() / PAGE_SIZE;
        let offset = iova.get() % PAGE_SIZE;
        let (start, run) = d.run_at(page).ok_or(FaultReason::NotMapped)?;
        if write && !run.writable {
            return Err(FaultReason::ReadOnly);
        }
        let phys_page = run.phys_page + (page - start);
        // Contiguous to the end of this run, and on through runs that continue it.
        let mut contiguous = (start + run.pages - page) * PAGE_SIZE - offset;
        let mut next = start + run.pages;
        while contiguous < len {
            match d.runs.get(&next) {
                Some(r) if r.phys_page == phys_page + (next - page) && (r.writable || !write) => {
                    contiguous += r.pages * PAGE_SIZE;
                    next += r.pages;
                }
                _ => break,
            }
        }
        Ok((
            PhysAddr(phys_page * PAGE_SIZE + offset),
            contiguous.min(len),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn iommu_with_domain() -> (Iommu, DomainId) {
        let mut iommu = Iommu::new(true);
        let d = iommu.create_domain().expect("enabled");
        iommu.attach(EndpointId(0), d).expect("domain exists");
        (iommu, d)
    }

    #[test]
    fn a_mapping_past_the_end_of_the_address_space_is_refused_and_one_ending_at_it_works() {
        let (mut iommu, d) = iommu_with_domain();
        let top = u64::MAX - (PAGE_SIZE - 1); // the last page
        let err = iommu
            .map(d, BusAddr(top), PhysAddr(0), 2 * PAGE_SIZE, true)
            .expect_err("past 2^64");
        assert_eq!(
            err,
            IommuError::BeyondAddressSpace {
                iova: BusAddr(top),
                phys: PhysAddr(0),
                len: 2 * PAGE_SIZE
            }
        );
        assert!(err
            .to_string()
            .contains("past the end of the 64-bit address space"));
        assert!(iommu
            .map(d, BusAddr(0), PhysAddr(top), 2 * PAGE_SIZE, true)
            .is_err());
        iommu
            .map(
                d,
                BusAddr(top - PAGE_SIZE),
                PhysAddr(0),
                2 * PAGE_SIZE,
                true,
            )
            .expect("ends at 2^64 exactly");
        assert_eq!(
            iommu.translate(EndpointId(0), BusAddr(u64::MAX), 1, true),
            Ok((PhysAddr(2 * PAGE_SIZE - 1), 1))
        );
    }

    #[test]
    fn a_disabled_iommu_has_no_domains() {
        assert_eq!(Iommu::new(false).create_domain(), Err(IommuError::Disabled));
    }

    #[test]
    fn translation_follows_the_page_table_and_stops_at_discontinuities() {
        let (mut iommu, d) = iommu_with_domain();
        iommu
            .map(d, BusAddr(0x10_0000), PhysAddr(0x5000), 2 * PAGE_SIZE, true)
            .expect("map");
        iommu
            .map(d, BusAddr(0x10_2000), PhysAddr(0x9000), PAGE_SIZE, true)
            .expect("map");
        let (pa, run) = iommu
            .translate(EndpointId(0), BusAddr(0x10_0010), 3 * PAGE_SIZE, false)
            .expect("mapped");
        assert_eq!(pa, PhysAddr(0x5010));
        assert_eq!(run, 2 * PAGE_SIZE - 0x10);
        assert_eq!(
            iommu.translate(EndpointId(0), BusAddr(0x10_3000), 4, false),
            Err(FaultReason::NotMapped)
        );
        assert_eq!(
            iommu.translate(EndpointId(1), BusAddr(0x10_0000), 4, false),
            Err(FaultReason::NoDomain)
        );
    }

    #[test]
    fn writes_to_read_only_pages_fault() {
        let (mut iommu, d) = iommu_with_domain();
        iommu
            .map(d, BusAddr(0), PhysAddr(0x1000), PAGE_SIZE, false)
            .expect("map");
        assert!(iommu.translate(EndpointId(0), BusAddr(8), 8, false).is_ok());
        assert_eq!(
            iommu.translate(EndpointId(0), BusAddr(8), 8, true),
            Err(FaultReason::ReadOnly)
        );
    }

    #[test]
    fn double_mapping_and_unmapping_unmapped_pages_are_errors() {
        let (mut iommu, d) = iommu_with_domain();
        iommu
            .map(d, BusAddr(0x2000), PhysAddr(0), PAGE_SIZE, true)
            .expect("map");
        assert_eq!(
            iommu.map(d, BusAddr(0x1000), PhysAddr(0), 2 * PAGE_SIZE, true),
            Err(IommuError::AlreadyMapped(BusAddr(0x2000)))
        );
        assert_eq!(
            iommu.unmap(d, BusAddr(0x3000), PAGE_SIZE),
            Err(IommuError::NotMapped(BusAddr(0x3000)))
        );
        iommu.unmap(d, BusAddr(0x2000), PAGE_SIZE).expect("unmap");
        assert_eq!(iommu.mapped_pages(d), Ok(0));
    }

    #[test]
    fn unmapping_the_middle_of_a_run_keeps_both_ends() {
        let (mut iommu, d) = iommu_with_domain();
        iommu
            .map(d, BusAddr(0), PhysAddr(0x10_0000), 8 * PAGE_SIZE, true)
            .expect("map");
        iommu
            .unmap(d, BusAddr(2 * PAGE_SIZE), 3 * PAGE_SIZE)
            .expect("unmap the middle");
        assert_eq!(iommu.mapped_pages(d), Ok(5));
        assert_eq!(
            iommu.translate(EndpointId(0), BusAddr(0x1ff0), 64, false),
            Ok((PhysAddr(0x10_1ff0), 16))
        );
        assert_eq!(
            iommu.translate(EndpointId(0), BusAddr(3 * PAGE_SIZE), 4, false),
            Err(FaultReason::NotMapped)
        );
        assert_eq!(
            iommu.translate(EndpointId(0), BusAddr(5 * PAGE_SIZE + 8), 4, false),
            Ok((PhysAddr(0x10_5008), 4))
        );
        assert_eq!(
            iommu.unmap(d, BusAddr(PAGE_SIZE), 2 * PAGE_SIZE),
            Err(IommuError::NotMapped(BusAddr(2 * PAGE_SIZE)))
        );
        iommu.unmap(d, BusAddr(0), 2 * PAGE_SIZE).expect("head");
        iommu
            .unmap(d, BusAddr(5 * PAGE_SIZE), 3 * PAGE_SIZE)
            .expect("tail");
        assert_eq!(iommu.mapped_pages(d), Ok(0));
    }

    proptest! {
        #[test]
        fn every_mapped_byte_translates_and_unmapped_never_does(
            pages in proptest::collection::btree_set(0u64..64, 1..16),
            probe in 0u64..(64 * PAGE_SIZE),
        ) {
            let (mut iommu, d) = iommu_with_domain();
            for &p in &pages {
                iommu.map(d, BusAddr(p * PAGE_SIZE), PhysAddr((p + 100) * PAGE_SIZE), PAGE_SIZE, true).expect("map");
            }
            let result = iommu.translate(EndpointId(0), BusAddr(probe), 1, true);
            if pages.contains(&(probe / PAGE_SIZE)) {
                prop_assert_eq!(result, Ok((PhysAddr(probe + 100 * PAGE_SIZE), 1)));
            } else {
                prop_assert_eq!(result, Err(FaultReason::NotMapped));
            }
        }
    }
}
