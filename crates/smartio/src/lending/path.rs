//! Path choice: which pair of NTB adapters joins two hosts (optionally pinned to one adapter
//! number), and how a lent device reaches memory or a BAR in another host over the shortest
//! path (Paper V §4.4) — its own lender directly, any other host through a look-up-table
//! window on the lender's NTB.

use super::grants::Taker;
use super::{Fdid, Service, SmartIoError};
use smartio_fabric::{AdapterId, DomainId, EndpointId, HostId, Requester};
use smartio_host::PeerBar;
use smartio_machine::Machine;
use smartio_platform::PAGE_SIZE;
use std::rc::Rc;

/// A path constraint: the NTB adapter (by number) a host's end of a path must use. A program
/// with two adapters keeps one queue pair on each, so a cut cable leaves the other working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Via {
    pub host: HostId,
    pub adapter: u32,
}

/// A pair of adapters, one in each host, with a working cable path between them.
pub(super) fn ntb_pair(
    machine: &Machine,
    from: HostId,
    to: HostId,
) -> Result<(AdapterId, AdapterId), SmartIoError> {
    ntb_pair_via(machine, from, to, None)
}

/// Like [`ntb_pair`], with `via`'s host using its adapter `via.adapter`.
pub(crate) fn ntb_pair_via(
    machine: &Machine,
    from: HostId,
    to: HostId,
    via: Option<Via>,
) -> Result<(AdapterId, AdapterId), SmartIoError> {
    let f = machine.fabric();
    let allowed = |a: AdapterId| {
        let a = f.adapter(a);
        via.is_none_or(|v| v.host != a.host || v.adapter == a.number)
    };
    let adapters = |h: HostId| {
        f.adapters()
            .iter()
            .enumerate()
            .filter(move |(_, a)| a.host == h)
            .map(|(i, _)| AdapterId(i as u32))
    };
    adapters(from)
        .flat_map(|a| adapters(to).map(move |b| (a, b)))
        .find(|&(a, b)| allowed(a) && allowed(b) && f.ntb_path_up(a, b))
        .ok_or_else(|| SmartIoError::NoPath {
            from: f.host(from).name.clone(),
            to: f.host(to).name.clone(),
        })
}

/// Where a lent device reaches a window: the lender side of a borrow.
pub(super) struct DeviceSide {
    pub(super) lender: HostId,
    pub(super) fdid: Fdid,
    pub(super) domain: Option<DomainId>,
    pub(super) limit: u64,
    pub(super) qualified: String,
    /// The adapter a path to the holder's host must use, if the holder chose one.
    pub(super) via: Option<Via>,
}

impl DeviceSide {
    /// Makes `len` bytes at address `addr` of host `host` (RAM or a BAR there) reachable by
    /// the lent function `endpoint` over the shortest path, and returns the device's address
    /// for them (Paper V §4.4): in the lender itself, the address as it is; in another host
    /// (the borrower or another lender), a window on the lender's NTB towards that host, with
    /// the device in the adapter's requester-id table for reads and the range mapped in the
    /// far adapter's IOMMU domain when that host's IOMMU is on.
    pub(super) fn reach(
        &self,
        taker: &mut Taker<'_>,
        endpoint: EndpointId,
        host: HostId,
        addr: u64,
        len: u64,
        what: &str,
    ) -> Result<u64, SmartIoError> {
        let lender_bus = self.towards(taker, endpoint, host, addr, len)?;
        self.expose(taker, lender_bus, len, what)
    }

    /// The lender bus address at which `len` bytes at `addr` of host `host` are reached over
    /// the shortest path (see [`DeviceSide::reach`]), before the device's own IOMMU domain.
    pub(super) fn towards(
        &self,
        taker: &mut Taker<'_>,
        endpoint: EndpointId,
        host: HostId,
        addr: u64,
        len: u64,
    ) -> Result<u64, SmartIoError> {
        Ok(if host == self.lender {
            addr
        } else {
            let (la, far) = ntb_pair_via(taker.machine, self.lender, host, self.via)?;
            let m = taker.shared_lut(la, far, addr, len)?;
            taker.requester(la, Requester::Device(endpoint))?;
            let far_ep = taker.machine.fabric().adapter(far).endpoint;
            if let Some(fd) = taker.domain_of(host, far_ep)? {
                taker.identity(host, fd, addr, len)?;
            }
            m.bus_addr
        })
    }

    /// Makes `len` bytes at lender bus address `bus` reachable by the device and returns the
    /// device's address for them: the same address, mapped one to one in its IOMMU domain
    /// when the lender's IOMMU is on, or remapped low when it lies beyond the device's reach.
    pub(super) fn expose(
        &self,
        taker: &mut Taker<'_>,
        bus: u64,
        len: u64,
        what: &str,
    ) -> Result<u64, SmartIoError> {
        let reachable = bus
            .checked_add(len - 1)
            .is_some_and(|end| end <= self.limit);
        match self.domain {
            None if reachable => Ok(bus),
            None => Err(SmartIoError::AddressLimit {
                device: self.qualified.clone(),
                limit: self.limit,
                what: what.to_string(),
                addr: bus,
            }),
            Some(d) if reachable => {
                taker.identity(self.lender, d, bus, len)?;
                Ok(bus)
            }
            Some(d) => {
                let page = bus & !(PAGE_SIZE - 1);
                let span = (bus + len).next_multiple_of(PAGE_SIZE) - page;
                let low = taker
                    .low_space(self.fdid, span)
                    .filter(|low| low + span - 1 <= self.limit)
                    .ok_or_else(|| SmartIoError::LowSpaceExhausted {
                        device: self.qualified.clone(),
                        limit: self.limit,
                        len: span,
                    })?;
                taker.iommu(self.lender, d, low, page, span)?;
                Ok(low + (bus - page))
            }
        }
    }
}

impl Service {
    /// Resolves a peer BAR for a borrowed device (Paper V §4.4): the address at which the
    /// device reaches it over the shortest path, set up by its lender.
    pub(crate) fn map_peer(
        self: &Rc<Self>,
        fdid: Fdid,
        bar: &PeerBar,
    ) -> Result<u64, SmartIoError> {
        let (target_base, target_size) = {
            let f = self.machine.fabric();
            let ep = f.endpoint(bar.endpoint);
            let real = ep
                .bars
                .iter()
                .find(|b| b.index == bar.index)
                .ok_or_else(|| SmartIoError::UnknownDevice {
                    spec: format!("{}:{} BAR{}", f.host(bar.host).name, ep.name, bar.index),
                    why: "the function has no such BAR".into(),
                })?;
            (real.base.get(), real.size)
        };
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        let d = st
            .devices
            .get_mut(&fdid)
            .ok_or(SmartIoError::UnknownFdid(fdid))?;
        let lender = d.lender;
        let endpoint = d.endpoint;
        let qualified = d.qualified.clone();
        let Some(b) = d.borrow.as_mut() else {
            return Err(SmartIoError::NotBorrowed {
                device: qualified,
                host: "anyone".into(),
            });
        };
        let key = (bar.host, bar.endpoint, bar.index);
        if let Some(&addr) = b.peers.get(&key) {
            return Ok(addr);
        }
        self.count_lender_interaction();
        let side = DeviceSide {
            lender,
            fdid,
            domain: b.domain,
            limit: b.limit,
            qualified: qualified.clone(),
            via: None,
        };
        let mut taker = Taker {
            machine: &self.machine,
            ledger: &mut st.ledger,
            grants: &mut b.grants,
            device: &qualified,
        };
        let addr = side.reach(
            &mut taker,
            endpoint,
            bar.host,
            target_base,
            target_size,
            "peer BAR",
        )?;
        b.peers.insert(key, addr);
        Ok(addr)
    }
}
