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

use crate::ids::{EndpointId, HostId, LinkId, NodeId, Requester};
use crate::iommu::FaultReason;
use crate::multicast::GroupId;
use crate::ntb::{AdapterId, LutTarget, WINDOW_BAR};
use crate::topology::{Dir, Fabric, NodeKind};
use smartio_platform::{AccessError, BusAddr, PhysAddr};
use thiserror::Error;

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

/// One step of a path: cross `link` in `dir`, arriving at `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Hop {
    /// The link crossed.
    pub link: LinkId,
    /// The direction.
    pub dir: Dir,
    /// The node reached.
    pub node: NodeId,
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
        let (mut host, mut node, mut device) = match requester {
            Requester::Cpu(h) => (h, self.hosts[h.index()].root, None),
            Requester::Device(e) => {
                let ep = &self.endpoints[e.index()];
                (ep.host, ep.node, Some(e))
            }
        };
        let mut hops = Vec::new();
        let mut a = addr;
        let mut limit = len;
        let mut translations = Vec::new();
        // Each pass routes in one host's domain; an NTB window hands over to the next.
        'domains: for _ in 0..=MAX_NTB_CROSSINGS {
            let h = &self.hosts[host.index()];
            let unsupported = |a: u64| RouteError::UnsupportedRequest {
                host: h.name.clone(),
                addr: BusAddr(a),
            };

            // Upstream phase (devices only). An NTB adapter's own DMA engine sits inside the
            // adapter's chip: what it sends to the adapter's own BARs (its window, its
            // registers) is switched inside the chip and never crosses the adapter's link.
            if device.is_some() && !(hops.is_empty() && self.own_bar_of_adapter(node, a)) {
                let acs_redirect = h.iommu.enabled();
                while let Some(up) = self.nodes[node.index()].up {
                    node = self.links[up.index()].a;
                    hops.push(Hop {
                        link: up,
                        dir: Dir::Up,
                        node,
                    });
                    if node == h.root {
                        break;
                    }
                    if !acs_redirect && self.claim(node, a).is_some() {
                        break;
                    }
                }
            }

            // At the root complex: translate, then RAM / MSI / a root port. As on x86 (VT-d,
            // AMD-Vi), the MSI range is not remapped: a device write there is an interrupt.
            if node == h.root {
                if let (Some(e), true) = (device, h.iommu.enabled() && !h.msi.contains(&a)) {
                    let (pa, run) = h
                        .iommu
                        .translate(e, BusAddr(a), limit, access == Access::Write)
                        .map_err(|reason| RouteError::IommuFault {
                            host: h.name.clone(),
                            requester: self.endpoints[e.index()].name.clone(),
                            addr: BusAddr(a),
                            access: access.name(),
                            reason,
                        })?;
                    translations.push(Translation {
                        host,
                        requester: e,
                        iova: BusAddr(a),
                    });
                    a = pa.get();
                    limit = limit.min(run);
                }
                if let Some(r) = h.ram.iter().find(|r| r.contains(&a)) {
                    return Ok(Route {
                        target: Target::Memory {
                            host,
                            addr: PhysAddr(a),
                        },
                        len: limit.min(r.end - a),
                        hops,
                        translations,
                        branches: Vec::new(),
                    });
                }
                if h.msi.contains(&a) {
                    return Ok(Route {
                        target: Target::Interrupt {
                            host,
                            addr: PhysAddr(a),
                        },
                        len: limit.min(h.msi.end - a),
                        hops,
                        translations,
                        branches: Vec::new(),
                    });
                }
            }

            // Downstream phase.
            loop {
                match &self.nodes[node.index()].kind {
                    NodeKind::Device { endpoint } | NodeKind::Ntb { endpoint, .. } => {
                        let ep = &self.endpoints[endpoint.index()];
                        // The PF's own BARs, else a present VF's slice of a VF BAR region.
                        let (function, bar) = match ep.bars.iter().find(|b| b.range().contains(&a))
                        {
                            Some(bar) => (*endpoint, *bar),
                            None => self.vf_slice_at(ep, a).ok_or_else(|| unsupported(a))?,
                        };
                        let adapter = match self.nodes[node.index()].kind {
                            NodeKind::Ntb { .. } if bar.index == WINDOW_BAR => {
                                self.adapter_of(*endpoint)
                            }
                            _ => None,
                        };
                        let Some(aid) = adapter else {
                            return Ok(Route {
                                target: Target::Bar {
                                    endpoint: function,
                                    bar: bar.index,
                                    offset: a - bar.base.get(),
                                },
                                len: limit.min(bar.range().end - a),
                                hops,
                                translations,
                                branches: Vec::new(),
                            });
                        };
                        // Through the NTB: the look-up table decides where it goes.
                        let ad = &self.adapters[aid.index()];
                        let (_, target, remote) =
                            ad.translate(a)
                                .ok_or_else(|| RouteError::NtbNoTranslation {
                                    adapter: self.adapter_name(aid),
                                    addr: BusAddr(a),
                                })?;
                        if access == Access::Read && !ad.has_requester(requester) {
                            return Err(RouteError::NtbNoRequesterId {
                                adapter: self.adapter_name(aid),
                                requester: self.requester_name(requester),
                            });
                        }
                        limit = limit.min(ad.entry_size - (a - ad.window.start) % ad.entry_size);
                        match target {
                            LutTarget::Adapter(far) => {
                                let cable = self.cable_path(aid, far).ok_or_else(|| {
                                    RouteError::UnsupportedRequest {
                                        host: h.name.clone(),
                                        addr: BusAddr(a),
                                    }
                                })?;
                                hops.extend(cable);
                                let f = &self.adapters[far.index()];
                                (host, node, device) = (f.host, f.node, Some(f.endpoint));
                                a = remote;
                                continue 'domains;
                            }
                            LutTarget::Multicast(group) => {
                                return self.multicast_route(
                                    aid,
                                    group,
                                    remote,
                                    limit,
                                    access,
                                    hops,
                                    translations,
                                    unsupported(a),
                                );
                            }
                        }
                    }
                    NodeKind::RootComplex | NodeKind::Switch { .. } => {
                        let link = self.claim(node, a).ok_or_else(|| unsupported(a))?;
                        node = self.links[link.index()].b;
                        hops.push(Hop {
                            link,
                            dir: Dir::Down,
                            node,
                        });
                    }
                    NodeKind::ClusterSwitch { .. } => return Err(unsupported(a)),
                }
            }
        }
        Err(RouteError::TooManyCrossings {
            addr: BusAddr(addr),
        })
    }

    /// A write into a multicast group: one branch per member other than the sending adapter,
    /// each through the member's overlay into its host.
    #[allow(clippy::too_many_arguments)]
    fn multicast_route(
        &self,
        from: AdapterId,
        group: GroupId,
        offset: u64,
        mut limit: u64,
        access: Access,
        hops: Vec<Hop>,
        translations: Vec<Translation>,
        unsupported: RouteError,
    ) -> Result<Route, RouteError> {
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
    fn vf_slice_at(
        &self,
        ep: &crate::topology::Endpoint,
        addr: u64,
    ) -> Option<(EndpointId, crate::topology::AssignedBar)> {
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
