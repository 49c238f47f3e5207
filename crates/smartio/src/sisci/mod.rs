//! SISCI-shaped shared memory over NTBs (Paper V §3.3).
//!
//! A host creates a *local segment* in its RAM, *prepares* it on one of its NTB adapters and
//! makes it *available*. Another host *connects* to it by the owner adapter's node id and the
//! segment id, then *maps* it: the map takes look-up-table entries on the connecting host's
//! adapter, and CPU loads and stores through it are timed transactions across the fabric.
//!
//! ```text
//!   owner:      create_segment ─► prepare_segment(adapter) ─► set_available(adapter)
//!   user:       connect_segment(adapter, node id, segment id) ─► map_remote ─► store / load
//!   teardown:   unmap ─► disconnect_segment ─► (owner) remove_segment
//! ```
//!
//! Every object is torn down explicitly, in that order: removing a segment that is still
//! connected or mapped, or disconnecting one that is still mapped, is [`SciError::Busy`].
//!
//! One [`Sisci`] value stands for the SISCI drivers of all hosts (they would keep each other
//! informed over the fabric); control operations take no virtual time, data operations do.
//!
//! It is also the segment system of the device API ([`crate::SmartIo`]): a segment created
//! there (with access hints, maybe in device memory) or a device's BAR exported as a segment
//! is a record here too — same id space per host — so it can be prepared, connected and
//! mapped with these calls, and a segment created here can be mapped for a device. All
//! segment memory of a host comes from one allocator (`ram`).

mod interrupt;
mod map;
mod multicast;
mod ram;

pub use crate::error::{SciError, SciErrorClass};
pub use interrupt::{LocalDataInterrupt, RemoteDataInterrupt, MAX_PAYLOAD};
pub use map::{LocalMap, RemoteMap, Sequence, SequenceStatus};

use ram::SegmentRam;
use smartio_fabric::{AdapterId, ClusterNodeId, GroupId, HostId, LinkId, LutTarget, NtbMapping};
use smartio_host::{HostOs, RamAllocator};
use smartio_machine::Machine;
use smartio_platform::PAGE_SIZE;
use smartio_platform::{BusAddr, PhysAddr};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// Segment ids chosen automatically start here (explicit ids are usually small).
pub const AUTO_ID_BASE: u32 = 0x8000_0000;

/// Alignment of the memory of segments created through [`Sisci::create_segment`] (the
/// device API places its segments on page boundaries).
pub const SEGMENT_ALIGN: u64 = 64 << 10;

/// A segment in the creating host's RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSegment {
    /// Owning host.
    pub host: HostId,
    /// Segment id, unique per host.
    pub id: u32,
    /// Physical address of its memory.
    pub phys: PhysAddr,
    /// Size in bytes.
    pub size: u64,
}

/// What backs a segment, as [`Sisci::segments`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// The owner's RAM.
    Ram,
    /// A device's BAR exported as a segment.
    Bar,
    /// Memory of a device that the device API allocated for a segment.
    DeviceMemory,
}

impl SegmentKind {
    /// `ram`, `bar` or `device memory`.
    pub fn name(self) -> &'static str {
        match self {
            SegmentKind::Ram => "ram",
            SegmentKind::Bar => "bar",
            SegmentKind::DeviceMemory => "device memory",
        }
    }
}

/// One segment and what is made of it ([`Sisci::segments`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The segment: owner, id, size.
    pub segment: LocalSegment,
    /// What backs it.
    pub kind: SegmentKind,
    /// The owner's adapters (indices) it is available on.
    pub available_on: Vec<u32>,
    /// The host of each connection to it (a host connected twice is there twice).
    pub connected: Vec<HostId>,
    /// Devices it is mapped for.
    pub device_maps: u32,
}

/// A connection to a segment of another host (or to a multicast group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteSegment {
    /// Connection id.
    pub id: u32,
    /// The connecting host.
    pub host: HostId,
    /// The connecting host's adapter.
    pub adapter: AdapterId,
    /// What the connection reaches.
    pub target: LutTarget,
    /// Bytes.
    pub size: u64,
}

/// A change on the path of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentEvent {
    /// A link on the path went down: the segment is unreachable.
    ConnectionLost {
        /// The link.
        link: LinkId,
    },
    /// The path is whole again.
    Operational,
}

/// What backs a segment, and so who gives its memory back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backing {
    /// Host RAM from the host's segment allocator, of this alignment; freed on removal.
    Ram {
        /// Alignment of the allocation.
        align: u64,
    },
    /// A device's BAR (or part of one) at this address of the host: nothing is allocated,
    /// removal only drops the record.
    Bar(PhysAddr),
    /// Device memory at this address that the device API allocated from the device's own
    /// space; only the device API removes the segment (it gives the memory back).
    DeviceMemory(PhysAddr),
}

/// The one record of a segment, whichever API created it.
#[derive(Debug)]
struct SegmentState {
    seg: LocalSegment,
    backing: Backing,
    prepared: BTreeSet<u32>,
    available: BTreeSet<u32>,
    connections: u32,
    /// Ids of the local maps of the segment.
    local_maps: BTreeSet<u32>,
    groups: BTreeSet<(GroupId, AdapterId)>,
    /// Devices the device API has mapped the segment for.
    device_maps: u32,
    /// CPU maps the device API made of it (`SmartIo::map_for_cpu`).
    cpu_maps: u32,
}

#[derive(Debug)]
struct Connection {
    /// The handle given out: a call with a handle that differs in any field is refused.
    remote: RemoteSegment,
    /// The owner's segment (host, id) for a segment connection.
    segment: Option<(HostId, u32)>,
    /// Far-side bus address of byte 0 (the owner's memory as the owner adapter sees it).
    remote_base: u64,
    maps: u32,
}

#[derive(Debug)]
struct MapState {
    connection: u32,
    mapping: NtbMapping,
}

impl State {
    /// The next automatic id free on `host`, counting on from the last one handed out and
    /// wrapping to [`AUTO_ID_BASE`] after `u32::MAX`. Ends: a host cannot hold 2^31 segments
    /// (each takes RAM).
    fn take_auto_id(&mut self, host: HostId) -> u32 {
        loop {
            let id = self.next_auto_id;
            self.next_auto_id = id.checked_add(1).unwrap_or(AUTO_ID_BASE);
            if !self.segments.contains_key(&(host, id)) {
                return id;
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct State {
    ram: SegmentRam,
    segments: BTreeMap<(HostId, u32), SegmentState>,
    connections: BTreeMap<u32, Connection>,
    maps: BTreeMap<u32, MapState>,
    next_id: u32,
    /// The next automatic segment id to try. Automatic ids are not reused until the range
    /// wraps, so a stale handle of a removed segment never names a newer one.
    next_auto_id: u32,
    /// Transfer errors seen through each adapter (what sequences compare).
    pub(crate) adapter_errors: Vec<u64>,
    pub(crate) interrupts: interrupt::Interrupts,
}

/// The SISCI drivers of the cluster.
#[derive(Debug, Clone)]
pub struct Sisci {
    machine: Machine,
    state: Rc<RefCell<State>>,
}

impl Sisci {
    /// The shared-memory service of the cluster simulated by `machine`, on hosts without
    /// kernels: it allocates segment memory from each host's RAM itself.
    pub fn new(machine: &Machine) -> Sisci {
        let ram = SegmentRam::Fallback(
            machine
                .fabric()
                .hosts()
                .iter()
                .map(|h| RamAllocator::new(&h.ram))
                .collect(),
        );
        Self::with_ram(machine, ram)
    }

    /// The shared-memory service on booted hosts (`hosts` in host order, as
    /// [`HostOs::boot_all`] returns them): segment memory comes from each kernel's allocator,
    /// so it never overlaps what drivers, SmartIO and programs allocate there.
    pub fn on_hosts(machine: &Machine, hosts: &[HostOs]) -> Sisci {
        Self::with_ram(machine, SegmentRam::Kernel(hosts.to_vec()))
    }

    fn with_ram(machine: &Machine, ram: SegmentRam) -> Sisci {
        let adapters = machine.fabric().adapters().len();
        Sisci {
            machine: machine.clone(),
            state: Rc::new(RefCell::new(State {
                ram,
                segments: BTreeMap::new(),
                connections: BTreeMap::new(),
                maps: BTreeMap::new(),
                next_id: 1,
                next_auto_id: AUTO_ID_BASE,
                adapter_errors: vec![0; adapters],
                interrupts: interrupt::Interrupts::default(),
            })),
        }
    }

    /// The simulation.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    fn host_name(&self, host: HostId) -> String {
        self.machine
            .fabric()
            .hosts()
            .get(host.index())
            .map_or_else(|| format!("with id {}", host.0), |h| h.name.clone())
    }

    /// `Ok` if `host` is a host of the cluster.
    fn check_host(&self, host: HostId) -> Result<(), SciError> {
        let hosts = self.machine.fabric().hosts().len();
        if host.index() < hosts {
            Ok(())
        } else {
            Err(SciError::NoSuchHostId { id: host.0, hosts })
        }
    }

    /// Adapter `number` of `host`.
    pub fn adapter(&self, host: HostId, number: u32) -> Result<AdapterId, SciError> {
        self.check_host(host)?;
        self.machine
            .fabric()
            .host_adapter(host, number)
            .ok_or_else(|| SciError::UnknownAdapter {
                host: self.host_name(host),
                number,
            })
    }

    /// The node id of adapter `number` of `host` (what other hosts connect to).
    pub fn node_id(&self, host: HostId, number: u32) -> Result<ClusterNodeId, SciError> {
        let a = self.adapter(host, number)?;
        Ok(self.machine.fabric().adapter(a).node_id)
    }

    fn next_id(&self) -> u32 {
        let mut st = self.state.borrow_mut();
        st.next_id += 1;
        st.next_id
    }

    /// Creates a segment of `size` bytes in `host`'s RAM, with id `id` or the lowest free
    /// automatic id. The memory reads as zeroes. Refused at once, before anything is
    /// allocated: no bytes ([`SciError::EmptySegment`]), more than the host's RAM
    /// ([`SciError::LargerThanRam`]).
    pub fn create_segment(
        &self,
        host: HostId,
        id: Option<u32>,
        size: u64,
    ) -> Result<LocalSegment, SciError> {
        self.check_host(host)?;
        if size == 0 {
            return Err(SciError::EmptySegment);
        }
        let ram = self.machine.fabric().host(host).ram_bytes;
        if size > ram {
            return Err(SciError::LargerThanRam {
                host: self.host_name(host),
                size,
                ram,
            });
        }
        self.create(
            host,
            id,
            size,
            Backing::Ram {
                align: SEGMENT_ALIGN,
            },
        )
    }

    /// Records a segment of `size` bytes of `host` with id `id` (or the next unused automatic
    /// id, never one a removed segment had until the range wraps) backed by `backing`: RAM is allocated from the host's one segment allocator and
    /// zeroed; device memory is only recorded. The caller has checked `host`.
    pub(crate) fn create(
        &self,
        host: HostId,
        id: Option<u32>,
        size: u64,
        backing: Backing,
    ) -> Result<LocalSegment, SciError> {
        let mut st = self.state.borrow_mut();
        let id = match id {
            Some(id) if st.segments.contains_key(&(host, id)) => {
                return Err(SciError::SegmentIdInUse {
                    host: self.host_name(host),
                    id,
                })
            }
            Some(id) => id,
            None => st.take_auto_id(host),
        };
        let phys = match backing {
            Backing::Ram { align } => {
                let phys = st
                    .ram
                    .alloc(host, size, align)
                    .map_err(|source| SciError::Memory {
                        host: self.host_name(host),
                        source,
                    })?;
                // Fresh memory reads as zeroes even if an earlier segment used it (sparse
                // memory: dropping the pages costs what is in use, not the segment's size);
                // a kernel's allocator has done it already.
                if !st.ram.zeroes() {
                    self.machine.zero_memory(host, phys, size);
                }
                phys
            }
            Backing::Bar(at) | Backing::DeviceMemory(at) => at,
        };
        let seg = LocalSegment {
            host,
            id,
            phys,
            size,
        };
        st.segments.insert(
            (host, id),
            SegmentState {
                seg,
                backing,
                prepared: BTreeSet::new(),
                available: BTreeSet::new(),
                connections: 0,
                local_maps: BTreeSet::new(),
                groups: BTreeSet::new(),
                device_maps: 0,
                cpu_maps: 0,
            },
        );
        Ok(seg)
    }

    /// Whether `seg` names a live segment (every field as recorded).
    pub(crate) fn is_live(&self, seg: &LocalSegment) -> bool {
        self.with_segment(seg, |_| Ok(())).is_ok()
    }

    /// Counts a mapping of `seg` for a device made (`true`) or undone (`false`) by the
    /// device API; a segment mapped for a device is busy.
    pub(crate) fn note_device_map(&self, seg: &LocalSegment, mapped: bool) {
        let _ = self.with_segment(seg, |s| {
            s.device_maps = if mapped {
                s.device_maps + 1
            } else {
                s.device_maps.saturating_sub(1)
            };
            Ok(())
        });
    }

    fn with_segment<R>(
        &self,
        seg: &LocalSegment,
        f: impl FnOnce(&mut SegmentState) -> Result<R, SciError>,
    ) -> Result<R, SciError> {
        let mut st = self.state.borrow_mut();
        let s = st
            .segments
            .get_mut(&(seg.host, seg.id))
            .filter(|s| s.seg == *seg)
            .ok_or_else(|| SciError::Stale {
                what: "segment",
                id: u64::from(seg.id),
            })?;
        f(s)
    }

    /// Makes the segment reachable through adapter `adapter` of its host (with the host IOMMU
    /// on, maps it for the adapter).
    pub fn prepare_segment(&self, seg: &LocalSegment, adapter: u32) -> Result<(), SciError> {
        let aid = self.adapter(seg.host, adapter)?;
        if self.with_segment(seg, |s| Ok(s.prepared.contains(&adapter)))? {
            return Ok(());
        }
        self.iommu_expose(seg, aid, true)?;
        self.with_segment(seg, |s| {
            s.prepared.insert(adapter);
            Ok(())
        })
    }

    /// With the owner's IOMMU on, the far adapter's requests are translated in its domain:
    /// give (or take away) the segment's pages there, at their physical addresses.
    fn iommu_expose(&self, seg: &LocalSegment, aid: AdapterId, map: bool) -> Result<(), SciError> {
        let host = self.host_name(seg.host);
        self.machine.with_fabric_mut(|f| {
            let ep = f.adapter(aid).endpoint;
            let iommu = f.iommu_mut(seg.host);
            if !iommu.enabled() {
                return Ok(());
            }
            let err = |source: smartio_fabric::IommuError| SciError::Iommu {
                host: host.clone(),
                source,
            };
            let domain = match iommu.domain_of(ep) {
                Some(d) => d,
                None => {
                    let d = iommu.create_domain().map_err(err)?;
                    iommu.attach(ep, d).map_err(err)?;
                    d
                }
            };
            let len = seg.size.next_multiple_of(PAGE_SIZE);
            let iova = BusAddr(seg.phys.get());
            if map {
                iommu.map(domain, iova, seg.phys, len, true).map_err(err)
            } else {
                iommu.unmap(domain, iova, len).map_err(err)
            }
        })
    }

    /// Whether the segment is prepared on its host's adapter `adapter` (what a DMA queue on
    /// that adapter needs of its local segment).
    pub fn is_prepared(&self, seg: &LocalSegment, adapter: u32) -> Result<bool, SciError> {
        self.with_segment(seg, |s| Ok(s.prepared.contains(&adapter)))
    }

    /// Lets other hosts connect through adapter `adapter` (it must be prepared there).
    pub fn set_available(&self, seg: &LocalSegment, adapter: u32) -> Result<(), SciError> {
        let host = self.host_name(seg.host);
        self.with_segment(seg, |s| {
            if !s.prepared.contains(&adapter) {
                return Err(SciError::NotPrepared {
                    host,
                    id: s.seg.id,
                    adapter,
                });
            }
            s.available.insert(adapter);
            Ok(())
        })
    }

    /// Refuses new connections through `adapter`; existing ones keep working.
    pub fn set_unavailable(&self, seg: &LocalSegment, adapter: u32) -> Result<(), SciError> {
        self.with_segment(seg, |s| {
            s.available.remove(&adapter);
            Ok(())
        })
    }

    /// Frees the segment. Fails with [`SciError::Busy`] while it is connected, mapped locally
    /// or for a device, or receiving a multicast group, and with [`SciError::NotOwner`] for
    /// device memory the device API allocated (it gives that back itself).
    pub fn remove_segment(&self, seg: &LocalSegment) -> Result<(), SciError> {
        if self.with_segment(seg, |s| Ok(matches!(s.backing, Backing::DeviceMemory(_))))? {
            return Err(SciError::NotOwner {
                host: self.host_name(seg.host),
                id: seg.id,
            });
        }
        self.remove(seg).map(|_| ())
    }

    /// Counts a CPU map of `seg` made (`true`) or undone (`false`) by the device API; a
    /// segment a CPU maps is busy.
    pub(crate) fn note_cpu_map(&self, seg: &LocalSegment, mapped: bool) {
        let _ = self.with_segment(seg, |s| {
            s.cpu_maps = if mapped {
                s.cpu_maps + 1
            } else {
                s.cpu_maps.saturating_sub(1)
            };
            Ok(())
        });
    }

    /// Removes the record of `seg` (refused with [`SciError::Busy`] while anything uses it),
    /// takes its pages out of adapters' IOMMU domains and frees its RAM if it has any.
    /// Returns how it was backed.
    pub(crate) fn remove(&self, seg: &LocalSegment) -> Result<Backing, SciError> {
        let (prepared, backing) = self.with_segment(seg, |s| {
            let users = s.connections + s.device_maps + s.cpu_maps;
            if users > 0 || !s.local_maps.is_empty() || !s.groups.is_empty() {
                let mut devices = String::new();
                if s.device_maps > 0 {
                    devices += &format!(", mapped for {} devices", s.device_maps);
                }
                if s.cpu_maps > 0 {
                    devices += &format!(", {} CPU maps", s.cpu_maps);
                }
                return Err(SciError::Busy {
                    what: format!("segment {}", s.seg.id),
                    users: format!(
                        "{} connections, {} local maps, {} multicast groups{devices}",
                        s.connections,
                        s.local_maps.len(),
                        s.groups.len()
                    ),
                });
            }
            Ok((s.prepared.clone(), s.backing))
        })?;
        for adapter in prepared {
            let aid = self.adapter(seg.host, adapter)?;
            self.iommu_expose(seg, aid, false)?;
        }
        let mut st = self.state.borrow_mut();
        st.segments.remove(&(seg.host, seg.id));
        if let Backing::Ram { .. } = backing {
            st.ram
                .free(seg.host, seg.phys)
                .map_err(|source| SciError::Memory {
                    host: self.host_name(seg.host),
                    source,
                })?;
        }
        Ok(backing)
    }

    /// Connects `host`, through its adapter `adapter`, to segment `segment_id` of the host
    /// behind node id `node_id`.
    pub fn connect_segment(
        &self,
        host: HostId,
        adapter: u32,
        node_id: ClusterNodeId,
        segment_id: u32,
    ) -> Result<RemoteSegment, SciError> {
        let local = self.adapter(host, adapter)?;
        let (far, far_host, far_number, path) = {
            let f = self.machine.fabric();
            let far = f
                .adapter_by_node_id(node_id)
                .ok_or(SciError::UnknownNodeId(node_id))?;
            let a = f.adapter(far);
            (far, a.host, a.number, f.cable_path(local, far))
        };
        if path.is_none() {
            let f = self.machine.fabric();
            return Err(smartio_fabric::NtbError::NoPath {
                from: f.adapter_name(local),
                to: f.adapter_name(far),
            }
            .into());
        }
        let id = self.next_id();
        let mut st = self.state.borrow_mut();
        let s = st
            .segments
            .get_mut(&(far_host, segment_id))
            .ok_or_else(|| SciError::NoSuchSegment {
                node_id,
                host: self.host_name(far_host),
                id: segment_id,
            })?;
        if !s.available.contains(&far_number) {
            return Err(SciError::NotAvailable {
                node_id,
                host: self.host_name(far_host),
                id: segment_id,
            });
        }
        s.connections += 1;
        let remote = RemoteSegment {
            id,
            host,
            adapter: local,
            target: LutTarget::Adapter(far),
            size: s.seg.size,
        };
        let remote_base = s.seg.phys.get();
        st.connections.insert(
            id,
            Connection {
                remote,
                segment: Some((far_host, segment_id)),
                remote_base,
                maps: 0,
            },
        );
        Ok(remote)
    }

    /// `SCIProbeNode`: whether `host`'s adapter `adapter` reaches the adapter with node id
    /// `node_id` now — over a cable path whose links are all up.
    pub fn probe_node(
        &self,
        host: HostId,
        adapter: u32,
        node_id: ClusterNodeId,
    ) -> Result<(), SciError> {
        let near = self.adapter(host, adapter)?;
        let f = self.machine.fabric();
        let far = f
            .adapter_by_node_id(node_id)
            .ok_or(SciError::UnknownNodeId(node_id))?;
        if far == near {
            return Ok(());
        }
        let path = f.cable_path(near, far).ok_or_else(|| {
            SciError::from(smartio_fabric::NtbError::NoPath {
                from: f.adapter_name(near),
                to: f.adapter_name(far),
            })
        })?;
        match path.iter().find(|h| !f.link_is_up(h.link)) {
            Some(down) => Err(SciError::LinkDown {
                from: f.adapter_name(near),
                to: f.adapter_name(far),
                link: f.link(down.link).name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// How many segments exist on all hosts (whichever API made them).
    pub fn segment_count(&self) -> usize {
        self.state.borrow().segments.len()
    }

    /// Every segment on all hosts, in host and id order, with what is made of it: the hosts
    /// connected to it (one entry per connection) and the devices it is mapped for.
    pub fn segments(&self) -> Vec<SegmentSummary> {
        let st = self.state.borrow();
        st.segments
            .iter()
            .map(|(key, s)| {
                let mut connected: Vec<HostId> = st
                    .connections
                    .values()
                    .filter(|c| c.segment == Some(*key))
                    .map(|c| c.remote.host)
                    .collect();
                connected.sort();
                SegmentSummary {
                    segment: s.seg,
                    kind: match s.backing {
                        Backing::Ram { .. } => SegmentKind::Ram,
                        Backing::Bar(_) => SegmentKind::Bar,
                        Backing::DeviceMemory(_) => SegmentKind::DeviceMemory,
                    },
                    available_on: s.available.iter().copied().collect(),
                    connected,
                    device_maps: s.device_maps,
                }
            })
            .collect()
    }

    /// The segment a connection reaches (`None` for a multicast group, or once it is gone):
    /// what the device API maps for a device when a program names a connected segment.
    pub fn connected_segment(&self, remote: &RemoteSegment) -> Option<LocalSegment> {
        let st = self.state.borrow();
        let c = st
            .connections
            .get(&remote.id)
            .filter(|c| c.remote == *remote)?;
        st.segments.get(&c.segment?).map(|s| s.seg)
    }

    /// Ends a connection. Fails with [`SciError::Busy`] while it is mapped.
    pub fn disconnect_segment(&self, remote: &RemoteSegment) -> Result<(), SciError> {
        let mut st = self.state.borrow_mut();
        let c = st
            .connections
            .get(&remote.id)
            .filter(|c| c.remote == *remote)
            .ok_or_else(|| SciError::Stale {
                what: "connection",
                id: u64::from(remote.id),
            })?;
        if c.maps > 0 {
            return Err(SciError::Busy {
                what: format!("connection {}", remote.id),
                users: format!("{} maps", c.maps),
            });
        }
        let segment = c.segment;
        st.connections.remove(&remote.id);
        if let Some(key) = segment {
            if let Some(s) = st.segments.get_mut(&key) {
                s.connections -= 1;
            }
        }
        Ok(())
    }

    /// Maps `size` bytes of a connected segment from `offset` for the connecting host's CPU.
    /// Takes look-up-table entries on the host's adapter; fails when the table is full.
    pub fn map_remote(
        &self,
        remote: &RemoteSegment,
        offset: u64,
        size: u64,
    ) -> Result<RemoteMap, SciError> {
        let base = {
            let st = self.state.borrow();
            let c = st
                .connections
                .get(&remote.id)
                .filter(|c| c.remote == *remote)
                .ok_or_else(|| SciError::Stale {
                    what: "connection",
                    id: u64::from(remote.id),
                })?;
            c.remote_base
        };
        if size == 0 {
            // A map covers at least one byte.
            return Err(SciError::OutOfRange {
                what: "segment",
                offset,
                len: 0,
                size: remote.size,
            });
        }
        crate::error::check_range("segment", offset, size, remote.size)?;
        let mapping = self
            .machine
            .with_fabric_mut(|f| f.ntb_map(remote.adapter, remote.target, base + offset, size))?;
        let id = self.next_id();
        let mut st = self.state.borrow_mut();
        if let Some(c) = st.connections.get_mut(&remote.id) {
            c.maps += 1;
        }
        st.maps.insert(
            id,
            MapState {
                connection: remote.id,
                mapping,
            },
        );
        Ok(RemoteMap::new(self.clone(), id, *remote, mapping))
    }

    /// Removes a map and frees its look-up-table entries.
    pub fn unmap(&self, map: &RemoteMap) -> Result<(), SciError> {
        let m = self
            .state
            .borrow_mut()
            .maps
            .remove(&map.id())
            .ok_or_else(|| SciError::Stale {
                what: "map",
                id: u64::from(map.id()),
            })?;
        self.machine.with_fabric_mut(|f| f.ntb_unmap(&m.mapping))?;
        if let Some(c) = self.state.borrow_mut().connections.get_mut(&m.connection) {
            c.maps -= 1;
        }
        Ok(())
    }

    /// Maps a local segment for its own host's CPU.
    pub fn map_local(&self, seg: &LocalSegment) -> Result<LocalMap, SciError> {
        let id = self.next_id();
        self.with_segment(seg, |s| {
            s.local_maps.insert(id);
            Ok(())
        })?;
        Ok(LocalMap::new(self.clone(), id, *seg))
    }

    /// Removes a local map; a map already removed is [`SciError::Stale`].
    pub fn unmap_local(&self, map: &LocalMap) -> Result<(), SciError> {
        self.with_segment(&map.segment(), |s| {
            if s.local_maps.remove(&map.id()) {
                Ok(())
            } else {
                Err(SciError::Stale {
                    what: "local map",
                    id: u64::from(map.id()),
                })
            }
        })
    }

    pub(crate) fn is_local_mapped(&self, seg: &LocalSegment, map_id: u32) -> bool {
        self.with_segment(seg, |s| Ok(s.local_maps.contains(&map_id)))
            .unwrap_or(false)
    }

    pub(crate) fn is_mapped(&self, map_id: u32) -> bool {
        self.state.borrow().maps.contains_key(&map_id)
    }

    pub(crate) fn count_error(&self, adapter: AdapterId) {
        if let Some(e) = self
            .state
            .borrow_mut()
            .adapter_errors
            .get_mut(adapter.index())
        {
            *e += 1;
        }
    }

    pub(crate) fn errors(&self, adapter: AdapterId) -> u64 {
        self.state
            .borrow()
            .adapter_errors
            .get(adapter.index())
            .copied()
            .unwrap_or(0)
    }

    /// The links between a connection's adapter and what it reaches; `None` for adapters
    /// the cluster does not have.
    fn path_links(&self, remote: &RemoteSegment) -> Option<Vec<LinkId>> {
        let f = self.machine.fabric();
        let adapters = f.adapters();
        let near = adapters.get(remote.adapter.index())?;
        Some(match remote.target {
            LutTarget::Adapter(far) => {
                adapters.get(far.index())?;
                f.cable_path(remote.adapter, far)
                    .map(|h| h.iter().map(|h| h.link).collect())
                    .unwrap_or_default()
            }
            LutTarget::Multicast(_) => near.cable.into_iter().collect(),
        })
    }

    /// Whether every link between the connection's adapter and its target is up (false for
    /// an adapter the cluster does not have).
    pub fn path_up(&self, remote: &RemoteSegment) -> bool {
        let Some(links) = self.path_links(remote) else {
            return false;
        };
        let f = self.machine.fabric();
        links.iter().all(|&l| f.link_is_up(l))
    }

    /// Waits for the next change on the connection's path after the first `seen` link events
    /// of the cluster; returns the event and how many link events have now been seen.
    pub async fn next_event(
        &self,
        remote: &RemoteSegment,
        mut seen: usize,
    ) -> (SegmentEvent, usize) {
        let links = self.path_links(remote).unwrap_or_default();
        loop {
            let e = self.machine.next_link_event(seen).await;
            seen += 1;
            if !links.contains(&e.link) {
                continue;
            }
            let event = if e.up {
                if self.path_up(remote) {
                    SegmentEvent::Operational
                } else {
                    continue;
                }
            } else {
                SegmentEvent::ConnectionLost { link: e.link }
            };
            return (event, seen);
        }
    }

    /// Look-up-table entries in use on an adapter, and its size.
    pub fn lut_usage(&self, adapter: AdapterId) -> (usize, usize) {
        let f = self.machine.fabric();
        let a = f.adapter(adapter);
        (a.lut_used(), a.lut().len())
    }
}
