//! The hardware resources a borrow takes — look-up-table entries, requester-id entries,
//! IOMMU mappings, window address space — recorded as [`Grant`]s so that a return (or a
//! borrow failing half-way) gives back exactly what was taken, in reverse order.
//!
//! Windows that every device lent from one lender adapter to one borrower can share (the
//! mapping of the borrower's whole RAM, the MSI window, identity mappings of a BAR in an
//! adapter's domain) are reference counted: the first borrow maps them, the last return
//! unmaps them.

use super::{Fdid, SmartIoError};
use crate::DeviceIommuFailure;
use smartio_fabric::{
    AdapterId, DomainId, HostId, IommuError, LutTarget, NtbError, NtbMapping, Requester,
};
use smartio_host::dma::pages;
use smartio_host::{RamAllocator, RamError};
use smartio_machine::Machine;
use smartio_platform::PAGE_SIZE;
use smartio_platform::{BusAddr, PhysAddr};
use std::collections::BTreeMap;
use thiserror::Error;

/// Where DMA windows live in a borrower adapter's IOMMU domain: far above any RAM, so they
/// never meet the identity mappings of shared-memory segments in the same domain.
const WINDOW_SPACE: std::ops::Range<u64> = (1 << 44)..(1 << 45);

/// Where remapped-low windows live in a lender device's domain (below 4 GiB, above the
/// first 256 MiB, short of the MSI range).
pub(crate) const LOW_SPACE: std::ops::Range<u64> = 0x1000_0000..0xf000_0000;

/// Something shared between borrows and reference counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SharedKey {
    /// A look-up-table mapping on `adapter` of `len` bytes at `remote` behind `far`.
    Lut {
        /// The adapter whose table holds it.
        adapter: AdapterId,
        /// The adapter it reaches.
        far: AdapterId,
        /// The address behind `far`.
        remote: u64,
        /// Bytes.
        len: u64,
    },
    /// An identity mapping of `len` bytes at `base` in an IOMMU domain.
    Identity {
        /// The IOMMU's host.
        host: HostId,
        /// The domain.
        domain: DomainId,
        /// The address, mapped to itself.
        base: u64,
        /// Bytes.
        len: u64,
    },
}

#[derive(Debug)]
struct Shared {
    mapping: Option<NtbMapping>,
    refs: u32,
}

/// One resource taken for a borrow.
#[derive(Debug, Clone)]
pub(crate) enum Grant {
    /// Look-up-table entries of one mapping.
    Lut(NtbMapping),
    /// One reference to a shared window.
    Shared(SharedKey),
    /// A requester-id entry (reference counted by the adapter itself).
    Requester(AdapterId, Requester),
    /// An IOMMU mapping owned by this borrow alone.
    Iommu {
        host: HostId,
        domain: DomainId,
        iova: u64,
        len: u64,
    },
    /// A range of a borrower adapter's DMA-window address space.
    WindowSpace { adapter: AdapterId, iova: u64 },
    /// A range of a lent device's low remap space.
    LowSpace { fdid: Fdid, iova: u64 },
}

/// The bookkeeping behind grants, kept by the service.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    shared: BTreeMap<SharedKey, Shared>,
    window_space: BTreeMap<AdapterId, RamAllocator>,
    low_space: BTreeMap<Fdid, RamAllocator>,
}

/// Takes resources for one borrow of one device and records them.
pub(crate) struct Taker<'a> {
    pub machine: &'a Machine,
    pub ledger: &'a mut Ledger,
    pub grants: &'a mut Vec<Grant>,
    /// `lender:device`, for errors.
    pub device: &'a str,
}

impl Taker<'_> {
    fn ntb_error(&self, source: smartio_fabric::NtbError) -> SmartIoError {
        SmartIoError::DeviceNtb {
            device: self.device.to_string(),
            source,
        }
    }

    fn iommu_error(&self, host: HostId, why: IommuError) -> SmartIoError {
        SmartIoError::DeviceIommu {
            device: self.device.to_string(),
            host: self.machine.fabric().host(host).name.clone(),
            why: Box::new(why.into()),
        }
    }

    /// Maps `len` bytes at `remote` behind adapter `far` through `adapter`, for this borrow.
    pub fn lut(
        &mut self,
        adapter: AdapterId,
        far: AdapterId,
        remote: u64,
        len: u64,
    ) -> Result<NtbMapping, SmartIoError> {
        self.lut_to(adapter, LutTarget::Adapter(far), remote, len)
    }

    /// Takes look-up-table entries of `adapter` for `len` bytes at `remote` of `target` (a
    /// far host's address space, or a multicast group).
    pub fn lut_to(
        &mut self,
        adapter: AdapterId,
        target: LutTarget,
        remote: u64,
        len: u64,
    ) -> Result<NtbMapping, SmartIoError> {
        let m = self
            .machine
            .with_fabric_mut(|f| f.ntb_map(adapter, target, remote, len))
            .map_err(|e| self.ntb_error(e))?;
        self.grants.push(Grant::Lut(m));
        Ok(m)
    }

    /// Takes one reference to the shared resource `key`, making it with `make` if nobody
    /// holds it yet; returns its look-up-table mapping, if it is one.
    fn share(
        &mut self,
        key: SharedKey,
        make: impl FnOnce(&mut Self) -> Result<Option<NtbMapping>, SmartIoError>,
    ) -> Result<Option<NtbMapping>, SmartIoError> {
        let mapping = match self.ledger.shared.get_mut(&key) {
            Some(s) => {
                s.refs += 1;
                s.mapping
            }
            None => {
                let mapping = make(self)?;
                self.ledger.shared.insert(key, Shared { mapping, refs: 1 });
                mapping
            }
        };
        self.grants.push(Grant::Shared(key));
        Ok(mapping)
    }

    /// Like [`Taker::lut`], shared with every other use of the same look-up-table entries:
    /// the range is widened to whole entries (they translate whole entries anyway), so
    /// everything one entry covers — many small segments of one host — takes it once.
    /// The returned mapping's address is that of `remote`.
    pub fn shared_lut(
        &mut self,
        adapter: AdapterId,
        far: AdapterId,
        remote: u64,
        len: u64,
    ) -> Result<NtbMapping, SmartIoError> {
        let entry = self.machine.fabric().adapter(adapter).entry_size.max(1);
        let base = remote - remote % entry;
        let span = (remote + len.max(1)).next_multiple_of(entry) - base;
        let key = SharedKey::Lut {
            adapter,
            far,
            remote: base,
            len: span,
        };
        let mapping = self.share(key, |t| {
            t.machine
                .with_fabric_mut(|f| f.ntb_map(adapter, LutTarget::Adapter(far), base, span))
                .map(Some)
                .map_err(|e| t.ntb_error(e))
        })?;
        let m = mapping.ok_or_else(|| self.ntb_error(smartio_fabric::NtbError::Empty))?;
        Ok(NtbMapping {
            bus_addr: m.bus_addr + (remote - base),
            len,
            ..m
        })
    }

    /// Lets `requester` send reads through `adapter`.
    pub fn requester(
        &mut self,
        adapter: AdapterId,
        requester: Requester,
    ) -> Result<(), SmartIoError> {
        self.machine
            .with_fabric_mut(|f| f.ntb_add_requester(adapter, requester))
            .map_err(|e| self.ntb_error(e))?;
        self.grants.push(Grant::Requester(adapter, requester));
        Ok(())
    }

    /// Maps `len` bytes at `iova` to `target` in a domain, for this borrow alone.
    pub fn iommu(
        &mut self,
        host: HostId,
        domain: DomainId,
        iova: u64,
        target: u64,
        len: u64,
    ) -> Result<(), SmartIoError> {
        let (iova, len) = pages(iova, len);
        let target = target & !(PAGE_SIZE - 1);
        self.machine
            .with_fabric_mut(|f| {
                f.iommu_mut(host)
                    .map(domain, BusAddr(iova), PhysAddr(target), len, true)
            })
            .map_err(|e| self.iommu_error(host, e))?;
        self.grants.push(Grant::Iommu {
            host,
            domain,
            iova,
            len,
        });
        Ok(())
    }

    /// Gives back the mapping of `len` bytes at `iova` in a domain that [`Taker::iommu`]
    /// made for this borrow (nothing if it holds none there).
    pub fn unmap_iommu(
        &mut self,
        host: HostId,
        domain: DomainId,
        iova: u64,
        len: u64,
    ) -> Result<(), ReleaseError> {
        let (iova, len) = pages(iova, len);
        let held = self.grants.iter().position(|g| {
            matches!(g, Grant::Iommu { host: h, domain: d, iova: i, len: l }
                if *h == host && *d == domain && *i == iova && *l == len)
        });
        match held {
            Some(k) => {
                let g = self.grants.remove(k);
                release(self.machine, self.ledger, vec![g])
            }
            None => Ok(()),
        }
    }

    /// Maps `len` bytes at `base` to themselves in a domain, shared with other borrows.
    pub fn identity(
        &mut self,
        host: HostId,
        domain: DomainId,
        base: u64,
        len: u64,
    ) -> Result<(), SmartIoError> {
        let (base, len) = pages(base, len);
        let key = SharedKey::Identity {
            host,
            domain,
            base,
            len,
        };
        self.share(key, |t| {
            t.machine
                .with_fabric_mut(|f| {
                    f.iommu_mut(host)
                        .map(domain, BusAddr(base), PhysAddr(base), len, true)
                })
                .map(|()| None)
                .map_err(|e| t.iommu_error(host, e))
        })?;
        Ok(())
    }

    /// The domain `endpoint` of `host` is translated in, created and attached if the host's
    /// IOMMU is on and it has none; `None` when the IOMMU is off.
    pub fn domain_of(
        &mut self,
        host: HostId,
        endpoint: smartio_fabric::EndpointId,
    ) -> Result<Option<DomainId>, SmartIoError> {
        self.machine
            .with_fabric_mut(|f| {
                let iommu = f.iommu_mut(host);
                if !iommu.enabled() {
                    return Ok(None);
                }
                if let Some(d) = iommu.domain_of(endpoint) {
                    return Ok(Some(d));
                }
                let d = iommu.create_domain()?;
                iommu.attach(endpoint, d)?;
                Ok(Some(d))
            })
            .map_err(|e: smartio_fabric::IommuError| self.iommu_error(host, e))
    }

    /// A range of `len` bytes (aligned to `align`) of the DMA-window space of borrower
    /// adapter `adapter`.
    pub fn window_space(
        &mut self,
        adapter: AdapterId,
        len: u64,
        align: u64,
    ) -> Result<u64, SmartIoError> {
        let space = self
            .ledger
            .window_space
            .entry(adapter)
            .or_insert_with(|| RamAllocator::space(WINDOW_SPACE));
        let iova = space.alloc(len, align.max(PAGE_SIZE)).map_err(|source| {
            let f = self.machine.fabric();
            SmartIoError::DeviceIommu {
                device: self.device.to_string(),
                host: f.host(f.adapter(adapter).host).name.clone(),
                why: Box::new(DeviceIommuFailure::WindowSpace {
                    adapter: f.adapter_name(adapter),
                    source,
                }),
            }
        })?;
        self.grants.push(Grant::WindowSpace { adapter, iova });
        Ok(iova)
    }

    /// A range of `len` bytes of the low remap space of device `fdid`, or `None` if full.
    pub fn low_space(&mut self, fdid: Fdid, len: u64) -> Option<u64> {
        let space = self
            .ledger
            .low_space
            .entry(fdid)
            .or_insert_with(|| RamAllocator::space(LOW_SPACE));
        let iova = space
            .alloc(len.next_multiple_of(PAGE_SIZE), PAGE_SIZE)
            .ok()?;
        self.grants.push(Grant::LowSpace { fdid, iova });
        Some(iova)
    }
}

/// Why giving a grant back failed: the ledger and the fabric's tables disagree (an emulator
/// bug, reported rather than hidden).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReleaseError {
    /// The NTB adapter refused to drop an entry.
    #[error("{0}")]
    Ntb(#[from] NtbError),
    /// The IOMMU refused to drop a mapping.
    #[error("{0}")]
    Iommu(#[from] IommuError),
    /// An address-space allocator refused to take a range back.
    #[error("{0}")]
    Space(#[from] RamError),
    /// A shared grant the ledger does not hold.
    #[error("{key:?} is not held")]
    NotHeld {
        /// The grant's key.
        key: SharedKey,
    },
    /// A shared look-up-table grant without its mapping.
    #[error("{key:?} has no mapping")]
    NoMapping {
        /// The grant's key.
        key: SharedKey,
    },
    /// No allocator for a space the grant came from (`window` or `low`).
    #[error("no {0} space")]
    NoSpace(&'static str),
}

/// Gives back `grants` in reverse order. Keeps going past a failure (so that as much as
/// possible is released) and reports the first one.
pub(crate) fn release(
    machine: &Machine,
    ledger: &mut Ledger,
    grants: Vec<Grant>,
) -> Result<(), ReleaseError> {
    let mut first_error = None;
    let mut note = |r: Result<(), ReleaseError>| {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    };
    for g in grants.into_iter().rev() {
        match g {
            Grant::Lut(m) => note(
                machine
                    .with_fabric_mut(|f| f.ntb_unmap(&m))
                    .map_err(ReleaseError::from),
            ),
            Grant::Shared(key) => {
                let Some(s) = ledger.shared.get_mut(&key) else {
                    note(Err(ReleaseError::NotHeld { key }));
                    continue;
                };
                s.refs -= 1;
                if s.refs > 0 {
                    continue;
                }
                let s = ledger.shared.remove(&key);
                note(match (key, s.and_then(|s| s.mapping)) {
                    (SharedKey::Lut { .. }, Some(m)) => machine
                        .with_fabric_mut(|f| f.ntb_unmap(&m))
                        .map_err(ReleaseError::from),
                    (
                        SharedKey::Identity {
                            host,
                            domain,
                            base,
                            len,
                        },
                        _,
                    ) => machine
                        .with_fabric_mut(|f| f.iommu_mut(host).unmap(domain, BusAddr(base), len))
                        .map_err(ReleaseError::from),
                    (SharedKey::Lut { .. }, None) => Err(ReleaseError::NoMapping { key }),
                });
            }
            Grant::Requester(adapter, requester) => note(
                machine
                    .with_fabric_mut(|f| f.ntb_remove_requester(adapter, requester))
                    .map_err(ReleaseError::from),
            ),
            Grant::Iommu {
                host,
                domain,
                iova,
                len,
            } => note(
                machine
                    .with_fabric_mut(|f| f.iommu_mut(host).unmap(domain, BusAddr(iova), len))
                    .map_err(ReleaseError::from),
            ),
            Grant::WindowSpace { adapter, iova } => note(
                ledger
                    .window_space
                    .get_mut(&adapter)
                    .ok_or(ReleaseError::NoSpace("window"))
                    .and_then(|s| s.free(iova).map_err(ReleaseError::from)),
            ),
            Grant::LowSpace { fdid, iova } => note(
                ledger
                    .low_space
                    .get_mut(&fdid)
                    .ok_or(ReleaseError::NoSpace("low"))
                    .and_then(|s| s.free(iova).map_err(ReleaseError::from)),
            ),
        }
    }
    first_error.map_or(Ok(()), Err)
}
