//! Address routing: where an access lands and which links and chips it crosses.
//!
//! Rules (PCIe base specification, address routing):
//! - A device's request goes upstream until a switch has a downstream port whose window
//!   claims the address (peer-to-peer through the lowest common switch), else to the root
//!   complex.
//! - With the host IOMMU on, ACS redirects every device request to the root complex, where the
//!   IOMMU translates it (except in the MSI range, which x86 IOMMUs leave to interrupt
//!   remapping); the translated address is then routed like a CPU access.
//! - At the root complex an address is RAM, the MSI range, claimed by a root port, or nobody's
//!   (Unsupported Request).
//! - Going downstream, a switch with no port claiming the address answers Unsupported Request;
//!   so does an endpoint with no BAR containing it.

use crate::ids::{EndpointId, HostId, LinkId, NodeId, Requester};
use crate::iommu::FaultReason;
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
    /// Whether the host IOMMU translated the address.
    pub translated: bool,
}

impl Route {
    /// Whether the path reaches `node` at any hop, the final one (the target's node) included.
    pub fn crosses(&self, node: NodeId) -> bool {
        self.hops.iter().any(|h| h.node == node)
    }
}

/// Whether an access reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        }
    }
}

impl Fabric {
    /// Routes an access of up to `len` bytes by `requester` at `addr` in its host's domain.
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
        let (host, start, device) = match requester {
            Requester::Cpu(h) => (h, self.hosts[h.index()].root, None),
            Requester::Device(e) => {
                let ep = &self.endpoints[e.index()];
                (ep.host, ep.node, Some(e))
            }
        };
        let h = &self.hosts[host.index()];
        let unsupported = |a: u64| RouteError::UnsupportedRequest {
            host: h.name.clone(),
            addr: BusAddr(a),
        };
        let mut hops = Vec::new();
        let mut node = start;
        let mut a = addr.get();
        let mut limit = len;
        let mut translated = false;

        // Upstream phase (devices only).
        if device.is_some() {
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
                    .translate(e, BusAddr(a), len, access == Access::Write)
                    .map_err(|reason| RouteError::IommuFault {
                        host: h.name.clone(),
                        requester: self.endpoints[e.index()].name.clone(),
                        addr: BusAddr(a),
                        access: access.name(),
                        reason,
                    })?;
                a = pa.get();
                limit = run;
                translated = true;
            }
            if let Some(r) = h.ram.iter().find(|r| r.contains(&a)) {
                return Ok(Route {
                    target: Target::Memory {
                        host,
                        addr: PhysAddr(a),
                    },
                    len: limit.min(r.end - a),
                    hops,
                    translated,
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
                    translated,
                });
            }
        }

        // Downstream phase.
        loop {
            match &self.nodes[node.index()].kind {
                NodeKind::Device { endpoint } | NodeKind::Ntb { endpoint, .. } => {
                    let ep = &self.endpoints[endpoint.index()];
                    let bar = ep
                        .bars
                        .iter()
                        .find(|b| b.range().contains(&a))
                        .ok_or_else(|| unsupported(a))?;
                    return Ok(Route {
                        target: Target::Bar {
                            endpoint: *endpoint,
                            bar: bar.index,
                            offset: a - bar.base.get(),
                        },
                        len: limit.min(bar.range().end - a),
                        hops,
                        translated,
                    });
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

    /// The child link of `node` whose window contains `addr`.
    fn claim(&self, node: NodeId, addr: u64) -> Option<LinkId> {
        self.nodes[node.index()]
            .claims
            .iter()
            .find(|(r, _)| r.contains(&addr))
            .map(|&(_, l)| l)
    }
}
