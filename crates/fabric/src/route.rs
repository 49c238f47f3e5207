//! Address routing: where an access lands and which links and chips it crosses.
//!
//! Rules (PCIe base specification, address routing):
//! - A device's request goes upstream until a switch has a downstream port whose window
//!   claims the address (peer-to-peer through the lowest common switch), else to the root
//!   complex. An NTB adapter's own requests (its DMA engine) to its own BARs stay inside its
//!   chip: into its window they go straight over the NTB.
//! - With the host IOMMU on, ACS redirects every device request to the root complex, where the
//!   IOMMU translates it (except in the MSI range, which x86 IOMMUs leave to interrupt
//!   remapping); the translated address is then routed like a CPU access.
//! - At the root complex an address is RAM, the MSI range, claimed by a root port, or nobody's
//!   (Unsupported Request).
//! - Going downstream, a switch with no port claiming the address answers Unsupported Request;
//!   so does an endpoint with no BAR containing it.

use crate::adapter::{LutTarget, WINDOW_BAR};
use crate::fabric::Fabric;
use crate::ids::{AdapterId, EndpointId, GroupId, HostId, LinkId, NodeId, Requester};
use crate::iommu::FaultReason;
use crate::layout::AssignedBar;
use crate::topology::{Dir, Endpoint, NodeKind};
use smartio_platform::{AccessError, BusAddr, PhysAddr};
use thiserror::Error;

pub use crate::topology::Hop;

/// What an access reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Target {
    /// Host RAM.
    Memory {
        /// Whose RAM.
        host: HostId,
        /// Physical address.
        addr: PhysAddr,
    },
    /// A BAR of an endpoint (device registers or memory, or an NTB window).
    Bar {
        /// The endpoint.
        endpoint: EndpointId,
        /// BAR index.
        bar: u8,
        /// Offset into the BAR.
        offset: u64,
    },
    /// The MSI range of a host's interrupt controller.
    Interrupt {
        /// Whose interrupt controller.
        host: HostId,
        /// The MSI address written.
        addr: PhysAddr,
    },
    /// A multicast group: the write is replicated to the route's branches.
    Multicast {
        /// The group.
        group: GroupId,
        /// Offset into the group.
        offset: u64,
    },
}

/// How many NTBs one access may cross before routing gives up (a mapping loop).
pub const MAX_NTB_CROSSINGS: usize = 8;

/// One copy of a multicast write: where it lands and its whole path from the requester.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// Where this copy lands.
    pub target: Target,
    /// Links and chips from the requester to `target`; branches share their common prefix.
    pub hops: Vec<Hop>,
}

/// The outcome of routing one access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Where it lands.
    pub target: Target,
    /// How many bytes from the start land contiguously in `target` (at most the length asked).
    pub len: u64,
    /// Links and chips crossed from the requester to the target, in order.
    pub hops: Vec<Hop>,
    /// The IOMMU translations on the way, in order (a device's DMA through an IOMMU that is
    /// on, and again in a far host whose IOMMU translates what its NTB adapter forwards);
    /// empty when nothing translated the address.
    pub translations: Vec<Translation>,
    /// For a multicast write, one branch per receiving member (`hops` then ends at the
    /// sending adapter); empty otherwise.
    pub branches: Vec<Branch>,
}

/// One IOMMU translation on a route: whose IOMMU, the requester as that IOMMU sees it (the
/// device, or the NTB adapter that forwarded the request into its host), and the I/O virtual
/// address at which the routed piece starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translation {
    /// The host whose IOMMU translated.
    pub host: HostId,
    /// The requester it translated for.
    pub requester: EndpointId,
    /// The piece's first byte before translation.
    pub iova: BusAddr,
}

impl Route {
    /// Whether the path reaches `node` at any hop, the final one (the target's node) included.
    pub fn crosses(&self, node: NodeId) -> bool {
        self.hops.iter().any(|h| h.node == node)
    }
}

/// Whether an access reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A memory read request.
    Read,
    /// A memory write request.
    Write,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// Why an access cannot be routed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteError {
    /// Nobody claims the address.
    #[error("unsupported request: no target claims {addr} in host {host}")]
    UnsupportedRequest {
        /// Host name.
        host: String,
        /// The address.
        addr: BusAddr,
    },
    /// The IOMMU refused the access.
    #[error("IOMMU fault in host {host}: {requester} {access} at {addr}: {reason:?}")]
    IommuFault {
        /// Host name.
        host: String,
        /// The device.
        requester: String,
        /// The I/O virtual address.
        addr: BusAddr,
        /// Read or write.
        access: &'static str,
        /// Why.
        reason: FaultReason,
    },
    /// A zero-length access.
    #[error("zero-length access")]
    Empty,
    /// The NTB window's look-up-table entry for the address is not valid.
    #[error("NTB adapter {adapter}: no look-up-table entry translates {addr}")]
    NtbNoTranslation {
        /// Adapter name.
        adapter: String,
        /// The local bus address.
        addr: BusAddr,
    },
    /// A read through an NTB by a requester without a requester-id entry.
    #[error(
        "NTB adapter {adapter}: {requester} has no requester-id entry, so its read cannot complete"
    )]
    NtbNoRequesterId {
        /// Adapter name.
        adapter: String,
        /// The requester.
        requester: String,
    },
    /// A link on the path is down.
    #[error("link {link} is down")]
    LinkDown {
        /// Link name.
        link: String,
    },
    /// The access crossed NTBs more than [`MAX_NTB_CROSSINGS`] times (mappings form a loop).
    #[error(
        "access at {addr} crosses more than {MAX_NTB_CROSSINGS} NTBs; the mappings form a loop"
    )]
    TooManyCrossings {
        /// The address.
        addr: BusAddr,
    },
}

impl From<RouteError> for AccessError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::UnsupportedRequest { host, addr } => {
                AccessError::UnsupportedRequest { host, addr }
            }
            RouteError::IommuFault {
                host,
                requester,
                addr,
                access,
                ..
            } => AccessError::IommuFault {
                host,
                requester,
                addr,
                access,
            },
            RouteError::Empty => AccessError::UnsupportedRequest {
                host: String::new(),
                addr: BusAddr(0),
            },
            RouteError::NtbNoTranslation { adapter, addr } => {
                AccessError::NtbNoTranslation { adapter, addr }
            }
            RouteError::NtbNoRequesterId { adapter, requester } => {
                AccessError::NtbNoRequesterId { adapter, requester }
            }
            RouteError::LinkDown { link } => AccessError::LinkDown { link },
            RouteError::TooManyCrossings { addr } => AccessError::UnsupportedRequest {
                host: "(NTB mapping loop)".to_string(),
                addr,
            },
        }
    }
}

/// A route being walked: the requester, and where in which host's domain it stands, with
/// what it crossed so far.
struct Walk {
    requester: Requester,
    access: Access,
    /// The domain it is in.
    host: HostId,
    /// Where it is.
    node: NodeId,
    /// The device the request comes from in this domain (an NTB adapter after a crossing).
    device: Option<EndpointId>,
    /// The address in this domain.
    addr: u64,
    /// Bytes the route can still carry from `addr`.
    limit: u64,
    hops: Vec<Hop>,
    translations: Vec<Translation>,
}

impl Walk {
    /// The route ends at `target`, carrying `len` bytes.
    fn arrive(&mut self, target: Target, len: u64) -> Route {
        Route {
            target,
            len,
            hops: std::mem::take(&mut self.hops),
            translations: std::mem::take(&mut self.translations),
            branches: Vec::new(),
        }
    }
}

/// Where one domain's leg of a walk ended.
enum Leg {
    /// At the target.
    Arrived(Route),
    /// Over an NTB, into another host's domain.
    Crossed,
}

impl Fabric {
    /// Routes an access of up to `len` bytes by `requester` at `addr` in its host's domain.
    ///
    /// Crossing an NTB window translates the address through the adapter's look-up table and
    /// continues in the far host's domain from the far adapter, as if that adapter had issued
    /// the request. A path over a link that is down fails with [`RouteError::LinkDown`].
    pub fn route(
        &self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
        access: Access,
    ) -> Result<Route, RouteError> {
        if len == 0 {
            return Err(RouteError::Empty);
        }
        let route = self.route_unchecked(requester, addr.get(), len, access)?;
        if let Some(h) = route.hops.iter().find(|h| !self.link_is_up(h.link)) {
            return Err(RouteError::LinkDown {
                link: self.links[h.link.index()].name.clone(),
            });
        }
        Ok(route)
    }

    fn route_unchecked(
        &self,
        requester: Requester,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<Route, RouteError> {
        let (host, node, device) = match requester {
            Requester::Cpu(h) => (h, self.hosts[h.index()].root, None),
            Requester::Device(e) => {
                let ep = &self.endpoints[e.index()];
                (ep.host, ep.node, Some(e))
            }
        };
        let mut walk = Walk {
            requester,
            access,
            host,
            node,
            device,
            addr,
            limit: len,
            hops: Vec::new(),
            translations: Vec::new(),
        };
        // Each pass routes in one host's domain; an NTB window hands over to the next.
        for _ in 0..=MAX_NTB_CROSSINGS {
            self.climb(&mut walk);
            if walk.node == self.hosts[walk.host.index()].root {
                if let Some(route) = self.at_root(&mut walk)? {
                    return Ok(route);
                }
            }
            match self.descend(&mut walk)? {
                Leg::Arrived(route) => return Ok(route),
                Leg::Crossed => {}
            }
        }
        Err(RouteError::TooManyCrossings {
            addr: BusAddr(addr),
        })
    }

    /// The upstream phase (devices only): up to the root complex, or — without the IOMMU's
    /// ACS redirect — to the first switch with a port claiming the address. An NTB adapter's
    /// own DMA engine sits inside the adapter's chip: what it sends to the adapter's own BARs
    /// (its window, its registers) is switched inside the chip and never crosses the
    /// adapter's link.
    fn climb(&self, w: &mut Walk) {
        if w.device.is_none() || (w.hops.is_empty() && self.own_bar_of_adapter(w.node, w.addr)) {
            return;
        }
        let h = &self.hosts[w.host.index()];
        let acs_redirect = h.iommu.enabled();
        while let Some(up) = self.nodes[w.node.index()].up {
            w.node = self.links[up.index()].a;
            w.hops.push(Hop {
                link: up,
                dir: Dir::Up,
                node: w.node,
            });
            if w.node == h.root {
                break;
            }
            if !acs_redirect && self.claim(w.node, w.addr).is_some() {
                break;
            }
        }
    }

    /// At the root complex: translate a device's address through the IOMMU, then land in
    /// RAM or the MSI range (`None`: a root port's business). As on x86 (VT-d, AMD-Vi), the
    /// MSI range is not remapped: a device write there is an interrupt.
    fn at_root(&self, w: &mut Walk) -> Result<Option<Route>, RouteError> {
        let host = w.host;
        let h = &self.hosts[host.index()];
        if let (Some(e), true) = (w.device, h.iommu.enabled() && !h.msi.contains(&w.addr)) {
            let (pa, run) = h
                .iommu
                .translate(e, BusAddr(w.addr), w.limit, w.access == Access::Write)
                .map_err(|reason| RouteError::IommuFault {
                    host: h.name.clone(),
                    requester: self.endpoints[e.index()].name.clone(),
                    addr: BusAddr(w.addr),
                    access: w.access.name(),
                    reason,
                })?;
            w.translations.push(Translation {
                host,
                requester: e,
                iova: BusAddr(w.addr),
            });
            w.addr = pa.get();
            w.limit = w.limit.min(run);
        }
        let a = w.addr;
        if let Some(r) = h.ram.iter().find(|r| r.contains(&a)) {
            let len = w.limit.min(r.end - a);
            return Ok(Some(w.arrive(
                Target::Memory {
                    host,
                    addr: PhysAddr(a),
                },
                len,
            )));
        }
        if h.msi.contains(&a) {
            let len = w.limit.min(h.msi.end - a);
            return Ok(Some(w.arrive(
                Target::Interrupt {
                    host,
                    addr: PhysAddr(a),
                },
                len,
            )));
        }
        Ok(None)
    }

    /// The downstream phase: through switches to the endpoint whose BAR claims the address;
    /// an NTB window hands the walk over to the far host ([`Leg::Crossed`]).
    fn descend(&self, w: &mut Walk) -> Result<Leg, RouteError> {
        loop {
            match &self.nodes[w.node.index()].kind {
                NodeKind::Device { endpoint } | NodeKind::Ntb { endpoint, .. } => {
                    return self.at_endpoint(w, *endpoint);
                }
                NodeKind::RootComplex | NodeKind::Switch { .. } => {
                    let link = self
                        .claim(w.node, w.addr)
                        .ok_or_else(|| self.unsupported(w))?;
                    w.node = self.links[link.index()].b;
                    w.hops.push(Hop {
                        link,
                        dir: Dir::Down,
                        node: w.node,
                    });
                }
                NodeKind::ClusterSwitch { .. } => return Err(self.unsupported(w)),
            }
        }
    }

    /// At `endpoint`: the PF's own BARs, else a present VF's slice of a VF BAR region; an
    /// NTB adapter's window goes on through the adapter.
    fn at_endpoint(&self, w: &mut Walk, endpoint: EndpointId) -> Result<Leg, RouteError> {
        let a = w.addr;
        let ep = &self.endpoints[endpoint.index()];
        let (function, bar) = match ep.bars.iter().find(|b| b.range().contains(&a)) {
            Some(bar) => (endpoint, *bar),
            None => self.vf_slice_at(ep, a).ok_or_else(|| self.unsupported(w))?,
        };
        let adapter = match self.nodes[w.node.index()].kind {
            NodeKind::Ntb { .. } if bar.index == WINDOW_BAR => self.adapter_of(endpoint),
            _ => None,
        };
        match adapter {
            Some(aid) => self.through_ntb(w, aid),
            None => {
                let len = w.limit.min(bar.range().end - a);
                Ok(Leg::Arrived(w.arrive(
                    Target::Bar {
                        endpoint: function,
                        bar: bar.index,
                        offset: a - bar.base.get(),
                    },
                    len,
                )))
            }
        }
    }

    /// Through adapter `aid`'s NTB window: the look-up table decides where it goes — on
    /// over the cable into the far adapter's host, or to a multicast group.
    fn through_ntb(&self, w: &mut Walk, aid: AdapterId) -> Result<Leg, RouteError> {
        let a = w.addr;
        let ad = &self.adapters[aid.index()];
        let (_, target, remote) = ad
            .translate(a)
            .ok_or_else(|| RouteError::NtbNoTranslation {
                adapter: self.adapter_name(aid),
                addr: BusAddr(a),
            })?;
        if w.access == Access::Read && !ad.has_requester(w.requester) {
            return Err(RouteError::NtbNoRequesterId {
                adapter: self.adapter_name(aid),
                requester: self.requester_name(w.requester),
            });
        }
        w.limit = w
            .limit
            .min(ad.entry_size - (a - ad.window.start) % ad.entry_size);
        match target {
            LutTarget::Adapter(far) => {
                let cable = self
                    .cable_path(aid, far)
                    .ok_or_else(|| self.unsupported(w))?;
                w.hops.extend(cable);
                let f = &self.adapters[far.index()];
                (w.host, w.node, w.device) = (f.host, f.node, Some(f.endpoint));
                w.addr = remote;
                Ok(Leg::Crossed)
            }
            LutTarget::Multicast(group) => {
                let unsupported = self.unsupported(w);
                self.multicast_route(aid, group, remote, w, unsupported)
                    .map(Leg::Arrived)
            }
        }
    }

    /// Unsupported Request at the walk's address in its host.
    fn unsupported(&self, w: &Walk) -> RouteError {
        RouteError::UnsupportedRequest {
            host: self.hosts[w.host.index()].name.clone(),
            addr: BusAddr(w.addr),
        }
    }

    /// A write into a multicast group: one branch per member other than the sending adapter,
    /// each through the member's overlay into its host.
    fn multicast_route(
        &self,
        from: AdapterId,
        group: GroupId,
        offset: u64,
        w: &mut Walk,
        unsupported: RouteError,
    ) -> Result<Route, RouteError> {
        let (access, mut limit) = (w.access, w.limit);
        let hops = std::mem::take(&mut w.hops);
        let translations = std::mem::take(&mut w.translations);
        let g = match self.multicast.group(group) {
            Some(g) if access == Access::Write && offset < g.size => g,
            _ => return Err(unsupported),
        };
        limit = limit.min(g.size - offset);
        // The sender's own cable carries every copy.
        if let Some(cable) = self.adapters[from.index()].cable {
            if !self.link_is_up(cable) {
                return Err(RouteError::LinkDown {
                    link: self.links[cable.index()].name.clone(),
                });
            }
        }
        let mut branches = Vec::new();
        for m in g
            .members
            .iter()
            .filter(|m| m.adapter != from && offset < m.len)
        {
            // A member behind a link that is down misses the write.
            let Some(cable) = self
                .cable_path(from, m.adapter)
                .filter(|hops| hops.iter().all(|h| self.link_is_up(h.link)))
            else {
                continue;
            };
            let endpoint = self.adapters[m.adapter.index()].endpoint;
            let run = limit.min(m.len - offset);
            // A member that cannot take the write (fault, link down) simply misses it.
            let Ok(inner) = self.route(
                Requester::Device(endpoint),
                BusAddr(m.overlay_base + offset),
                run,
                Access::Write,
            ) else {
                continue;
            };
            limit = limit.min(inner.len);
            let mut path = hops.clone();
            path.extend(cable);
            path.extend(inner.hops);
            branches.push(Branch {
                target: inner.target,
                hops: path,
            });
        }
        Ok(Route {
            target: Target::Multicast { group, offset },
            len: limit,
            hops,
            translations,
            branches,
        })
    }

    /// A readable name for a requester.
    pub fn requester_name(&self, requester: Requester) -> String {
        match requester {
            Requester::Cpu(h) => format!("{} CPU", self.hosts[h.index()].name),
            Requester::Device(e) => {
                let ep = &self.endpoints[e.index()];
                format!("{}.{}", self.hosts[ep.host.index()].name, ep.name)
            }
        }
    }

    /// The VF of PF `ep` whose BAR slice holds `addr`, with that slice, if the VF decodes it
    /// now (VF Enable and VF MSE set, n ≤ NumVFs); otherwise nobody claims the address.
    fn vf_slice_at(&self, ep: &Endpoint, addr: u64) -> Option<(EndpointId, AssignedBar)> {
        let v = ep.sriov.as_ref()?;
        let (n, bar) = v.slice_at(addr)?;
        let vf = *v.vfs.get(usize::from(n).checked_sub(1)?)?;
        v.control.vf_decodes(n).then_some((vf, bar))
    }

    /// Whether `node` is an NTB adapter and `addr` lies in one of its own BARs.
    fn own_bar_of_adapter(&self, node: NodeId, addr: u64) -> bool {
        match self.nodes[node.index()].kind {
            NodeKind::Ntb { endpoint, .. } => self.endpoints[endpoint.index()]
                .bars
                .iter()
                .any(|b| b.range().contains(&addr)),
            _ => false,
        }
    }

    /// The child link of `node` whose window contains `addr`.
    fn claim(&self, node: NodeId, addr: u64) -> Option<LinkId> {
        self.nodes[node.index()]
            .claims
            .iter()
            .find(|(r, _)| r.contains(&addr))
            .map(|&(_, l)| l)
    }
}
