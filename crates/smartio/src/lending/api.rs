//! The device-oriented API (Paper V §6.1, the SISCI SmartIO extension): programs on any host
//! borrow devices — exclusively or shared — without a shadow device, and drive them
//! themselves through segments.
//!
//! - A device's BARs are exported as segments ([`SmartIo::bar_segment`]).
//! - [`SmartIo::create_segment`] allocates a segment *for a device* where its access-pattern
//!   hints say it is best placed (see [`Hints`] for the policy).
//! - [`SmartIo::map_for_device`] returns a segment's address *as the device sees it*,
//!   setting up the shortest path (the lender's NTB when the memory is elsewhere).
//! - [`SmartIo::map_for_cpu`] returns where a host's CPU reaches a segment (its own RAM, or a
//!   window of its NTB).
//!
//! Segments here are SISCI segments ([`crate::sisci`]): `create_segment` and `bar_segment`
//! make a record in the owning host's segment table (same ids, same record as
//! [`crate::sisci::Sisci::create_segment`]), RAM comes from the host's one segment
//! allocator, and [`SmartIo::sisci_segment`] / `Segment::from(LocalSegment)` go between the
//! two handles. A segment is busy while mapped for a device, connected or mapped through
//! SISCI: neither API frees it under the other.
//!
//! Control operations take no virtual time (like [`crate::sisci`]); each one that involves
//! the lender counts as a lender interaction.

use super::grants::{release, Grant, Taker};
use super::path::{ntb_pair_via, DeviceSide, Via};
use super::{Fdid, SmartIo, SmartIoError};
use crate::sisci::{Backing, LocalSegment};
use smartio_devices::DeviceKind;
use smartio_fabric::{AdapterId, EndpointId, GroupId, HostId, LutTarget};
use smartio_host::RamAllocator;
use smartio_platform::pci::{self, command};
use smartio_platform::PAGE_SIZE;
use smartio_platform::{BusAddr, Clock, PhysAddr};
use std::collections::BTreeMap;

/// Alignment (and size granule) of the memory of device-API segments.
const SEGMENT_ALIGN: u64 = PAGE_SIZE;

/// A hold on a device through the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceBorrow {
    /// Identity of this hold.
    pub id: u32,
    /// The device.
    pub fdid: Fdid,
    /// The host whose program holds it.
    pub host: HostId,
}

/// How a segment will be used; SmartIO places it accordingly.
///
/// Placement policy, first match wins:
/// 1. `device_reads` without `host_reads`, and the device has device memory (an NVMe
///    controller memory buffer, GPU memory) with room: **device memory** — the device reads
///    it without crossing a link (an SQ written by one host and fetched by the device).
/// 2. `host_reads`, and neither `multi_host` nor `peer_to_peer`: **the calling host's RAM** —
///    CPU loads are local, and the device's writes are posted, so their distance costs little
///    (a CQ the host polls).
/// 3. Otherwise: **the lender's RAM**, the memory closest to the device that every host can
///    reach (shared buffers, `multi_host`, `peer_to_peer`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// The device reads the segment.
    pub device_reads: bool,
    /// The device writes the segment.
    pub device_writes: bool,
    /// A host CPU reads it.
    pub host_reads: bool,
    /// A host CPU writes it.
    pub host_writes: bool,
    /// Several hosts use it.
    pub multi_host: bool,
    /// Other devices reach it peer to peer.
    pub peer_to_peer: bool,
}

/// Where a segment's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentLocation {
    /// RAM of a host.
    Ram {
        /// The host.
        host: HostId,
        /// Physical address.
        phys: PhysAddr,
    },
    /// Part of a BAR of a device of `host` itself, attached by
    /// [`SmartIo::local_device_segment`] (the device need not be registered).
    LocalDevice {
        /// The host the device is installed in.
        host: HostId,
        /// The device.
        endpoint: EndpointId,
        /// The BAR.
        bar: u8,
        /// Offset of the segment in the BAR.
        offset: u64,
    },
    /// A BAR of a registered device.
    Device {
        /// The device.
        fdid: Fdid,
        /// The BAR.
        bar: u8,
        /// Offset of the segment in the BAR.
        offset: u64,
    },
}

/// A segment of the device API: a SISCI segment of the host that owns its memory (the
/// RAM's host, or the device's lender), seen with where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Its SISCI segment id, unique on the owning host.
    pub id: u32,
    /// Bytes.
    pub size: u64,
    /// Where its memory is.
    pub location: SegmentLocation,
}

impl From<LocalSegment> for Segment {
    /// A segment created through SISCI, as the device API names it: memory of its host (so
    /// it can be mapped for a device or another host's CPU).
    fn from(seg: LocalSegment) -> Segment {
        Segment {
            id: seg.id,
            size: seg.size,
            location: SegmentLocation::Ram {
                host: seg.host,
                phys: seg.phys,
            },
        }
    }
}

/// A segment as a host's CPU reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMap {
    /// Identity.
    pub id: u32,
    /// The host.
    pub host: HostId,
    /// The address of the segment's first byte for that CPU.
    pub addr: BusAddr,
    /// Bytes.
    pub size: u64,
}

/// A device of a host registered to reach memory through that host's NTBs (see
/// [`SmartIo::register_peer_requester`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRequester {
    /// Identity of the registration.
    pub id: u32,
    /// The host.
    pub host: HostId,
    /// The device, by its name in the host.
    pub device: String,
}

#[derive(Debug)]
pub(super) struct Hold {
    pub fdid: Fdid,
    pub host: HostId,
    pub exclusive: bool,
    /// The holder's NTB adapter its paths use, if it chose one.
    via: Option<u32>,
    grants: Vec<Grant>,
    /// Segments mapped for the device, by (owning host, segment id): the SISCI segment,
    /// its device address and what the mapping took (given back by
    /// [`SmartIo::unmap_device`] or with the hold).
    mapped: BTreeMap<(HostId, u32), DeviceMap>,
}

/// One segment mapped for a held device.
#[derive(Debug)]
struct DeviceMap {
    seg: LocalSegment,
    addr: u64,
    grants: Vec<Grant>,
}

#[derive(Debug)]
pub(super) struct ApiState {
    pub holds: BTreeMap<u32, Hold>,
    /// Free and used space of each device memory BAR, by device and BAR.
    device_memory: BTreeMap<(Fdid, u8), RamAllocator>,
    /// CPU maps by id, with what each took.
    cpu_maps: BTreeMap<u32, (CpuMap, Vec<Grant>, LocalSegment)>,
    /// Peer requesters by id, with what each took.
    requesters: BTreeMap<u32, (PeerRequester, Vec<Grant>)>,
    published: BTreeMap<(Fdid, String), Segment>,
    next: u32,
}

impl Default for ApiState {
    fn default() -> Self {
        Self {
            holds: BTreeMap::new(),
            device_memory: BTreeMap::new(),
            cpu_maps: BTreeMap::new(),
            requesters: BTreeMap::new(),
            published: BTreeMap::new(),
            next: 1,
        }
    }
}

impl ApiState {
    fn id(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    /// Hosts holding `fdid` through the API, and whether one holds it exclusively.
    pub fn holders(&self, fdid: Fdid) -> impl Iterator<Item = &Hold> {
        self.holds.values().filter(move |h| h.fdid == fdid)
    }
}

impl Hold {
    /// Whether `borrow` names this hold: its id, device and host all agree (a handle with a
    /// live id but another device or host is not this hold).
    fn is(&self, borrow: &DeviceBorrow) -> bool {
        self.fdid == borrow.fdid && self.host == borrow.host
    }
}

/// The BAR of a device kind that holds device memory, if the device has it (an NTB adapter,
/// no kind, has none).
fn memory_bar(kind: Option<DeviceKind>, bars: &[u8]) -> Option<u8> {
    let bar = kind?.memory_bar();
    bars.contains(&bar).then_some(bar)
}

impl SmartIo {
    fn stale(&self, what: String) -> SmartIoError {
        SmartIoError::UnknownDevice {
            spec: what,
            why: "it was returned or removed".into(),
        }
    }

    /// Borrows `fdid` for a program on `host`: `exclusive` (nobody else, e.g. to reset and
    /// set the device up) or shared with other API borrowers.
    pub fn borrow_device(
        &self,
        host: HostId,
        fdid: Fdid,
        exclusive: bool,
    ) -> Result<DeviceBorrow, SmartIoError> {
        self.borrow_device_via(host, fdid, exclusive, None)
    }

    /// [`SmartIo::borrow_device`] for a holder that chooses its path: every mapping made for
    /// this hold between the device and `host` goes through `host`'s NTB adapter `adapter`
    /// (a program with two adapters borrows twice, once per adapter, and so survives a cut
    /// cable on one of them).
    pub fn borrow_device_via(
        &self,
        host: HostId,
        fdid: Fdid,
        exclusive: bool,
        adapter: Option<u32>,
    ) -> Result<DeviceBorrow, SmartIoError> {
        let svc = &self.inner;
        svc.check_host(host)?;
        if let Some(number) = adapter {
            let f = svc.machine.fabric();
            if f.host_adapter(host, number).is_none() {
                return Err(SmartIoError::NoPath {
                    from: f.host(host).name.clone(),
                    to: format!("anywhere through adapter {number}: the host has no such adapter"),
                });
            }
        }
        let mut st = svc.state.borrow_mut();
        let d = st
            .devices
            .get(&fdid)
            .ok_or(SmartIoError::UnknownFdid(fdid))?;
        let busy = |holder: HostId| SmartIoError::Borrowed {
            device: d.qualified.clone(),
            fdid,
            borrower: svc.hosts[holder.index()].name().to_string(),
        };
        if let Some(b) = &d.borrow {
            return Err(busy(b.borrower));
        }
        if let Some(m) = &d.mdev {
            return Err(SmartIoError::Borrowed {
                device: d.qualified.clone(),
                fdid,
                borrower: m.vm.clone(),
            });
        }
        if let Some(h) = st.api.holders(fdid).find(|h| exclusive || h.exclusive) {
            return Err(busy(h.host));
        }
        if let Some(driver) = svc.lender_user(d.lender, &d.name) {
            return Err(SmartIoError::InUseByLender {
                device: d.qualified.clone(),
                driver,
            });
        }
        svc.check_present(d.endpoint, &d.qualified)?;
        svc.count_lender_interaction();
        svc.claim(d.lender, &d.name);
        let id = st.api.id();
        st.api.holds.insert(
            id,
            Hold {
                fdid,
                host,
                exclusive,
                via: adapter,
                grants: Vec::new(),
                mapped: BTreeMap::new(),
            },
        );
        Ok(DeviceBorrow { id, fdid, host })
    }

    /// Turns an exclusive hold into a shared one, letting others borrow the device too.
    pub fn downgrade(&self, borrow: &DeviceBorrow) -> Result<(), SmartIoError> {
        let mut st = self.inner.state.borrow_mut();
        let h = st
            .api
            .holds
            .get_mut(&borrow.id)
            .filter(|h| h.is(borrow))
            .ok_or_else(|| self.stale(format!("borrow {}", borrow.id)))?;
        h.exclusive = false;
        Ok(())
    }

    /// Returns a device borrowed through the API; every mapping made for it goes.
    pub fn return_device(&self, borrow: DeviceBorrow) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        if !st.api.holds.get(&borrow.id).is_some_and(|h| h.is(&borrow)) {
            return Err(self.stale(format!("borrow {}", borrow.id)));
        }
        let h = st
            .api
            .holds
            .remove(&borrow.id)
            .ok_or_else(|| self.stale(format!("borrow {}", borrow.id)))?;
        svc.count_lender_interaction();
        if st.api.holders(h.fdid).next().is_none() {
            if let Some(d) = st.devices.get(&h.fdid) {
                svc.unclaim(d.lender, &d.name);
            }
        }
        // Mappings first (they were taken after the hold's own grants), newest first.
        let mut grants = h.grants;
        for (_, m) in h.mapped {
            svc.sisci.note_device_map(&m.seg, false);
            grants.extend(m.grants);
        }
        svc.release_for(
            &mut st.ledger,
            grants,
            format!("fdid {}", borrow.fdid),
            borrow.host,
        )
    }

    /// Turns on memory decoding and bus mastering of the held device (its lender performs
    /// the configuration write); the program that sets a device up does this once.
    pub async fn enable_device(&self, borrow: &DeviceBorrow) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        let (endpoint, qualified) = self.held(borrow)?;
        let lender = svc.machine.fabric().endpoint(endpoint).host;
        let (cpu, lender_cpu) = (
            svc.hosts[borrow.host.index()].cpu(),
            svc.hosts[lender.index()].cpu(),
        );
        svc.count_lender_interaction();
        cpu.spend("SmartIO: control message", svc.message).await;
        let mut cmd = [0u8; 2];
        let result = async {
            lender_cpu
                .config_read(endpoint, pci::COMMAND, &mut cmd)
                .await?;
            let on = u16::from_le_bytes(cmd)
                | command::MEMORY_SPACE
                | command::BUS_MASTER
                | command::INTX_DISABLE;
            lender_cpu
                .config_write(endpoint, pci::COMMAND, &on.to_le_bytes())
                .await
        }
        .await;
        cpu.spend("SmartIO: control message", svc.message).await;
        result.map_err(|source| {
            SmartIoError::Host(smartio_host::HostError::Access {
                device: qualified,
                source,
            })
        })
    }

    /// Whether `borrow` is still held (a driver manager checks its clients with this).
    pub fn is_held(&self, borrow: &DeviceBorrow) -> bool {
        self.inner
            .state
            .borrow()
            .api
            .holds
            .get(&borrow.id)
            .is_some_and(|h| h.is(borrow))
    }

    /// The time one control message between two hosts' SmartIO software takes (what a
    /// program relaying requests over a message channel pays per message).
    pub fn control_message(&self) -> smartio_platform::SimDuration {
        self.inner.message
    }

    /// Publishes `seg` under `name` for the device, so other programs can find it (a driver
    /// manager publishes where it runs).
    pub fn publish(&self, fdid: Fdid, name: &str, seg: Segment) {
        self.inner
            .state
            .borrow_mut()
            .api
            .published
            .insert((fdid, name.to_string()), seg);
    }

    /// The segment published under `name` for the device, if any.
    pub fn published(&self, fdid: Fdid, name: &str) -> Option<Segment> {
        self.inner
            .state
            .borrow()
            .api
            .published
            .get(&(fdid, name.to_string()))
            .copied()
    }

    /// BAR `bar` of the borrowed device as a segment.
    pub fn bar_segment(&self, borrow: &DeviceBorrow, bar: u8) -> Result<Segment, SmartIoError> {
        let svc = &self.inner;
        let (endpoint, qualified) = self.held(borrow)?;
        let (lender, base, size) = {
            let f = svc.machine.fabric();
            let ep = f.endpoint(endpoint);
            let (base, size) = ep
                .bars
                .iter()
                .find(|b| b.index == bar)
                .map(|b| (b.base, b.size))
                .ok_or_else(|| SmartIoError::UnknownDevice {
                    spec: format!("{qualified} BAR{bar}"),
                    why: "the function has no such BAR".into(),
                })?;
            (ep.host, base, size)
        };
        let local = svc
            .sisci
            .create(lender, None, size, Backing::Bar(PhysAddr(base.get())))?;
        Ok(Segment {
            id: local.id,
            size,
            location: SegmentLocation::Device {
                fdid: borrow.fdid,
                bar,
                offset: 0,
            },
        })
    }

    /// A segment over `size` bytes at `offset` of BAR `bar` of `device`, a function installed
    /// in `host` itself (`SCIAttachPhysicalMemory`: the CUDA driver pins GPU memory in
    /// BAR1 and SISCI exports it, as GPUDirect needs). The device need not be registered
    /// with SmartIO nor borrowed: it is the host's own. The segment can then be mapped for
    /// a held device ([`SmartIo::map_for_device`]: an NVMe elsewhere reaches the memory over
    /// the NTB) or for another host's CPU. Removing it only drops the record.
    pub fn local_device_segment(
        &self,
        host: HostId,
        device: &str,
        bar: u8,
        offset: u64,
        size: u64,
    ) -> Result<Segment, SmartIoError> {
        let svc = &self.inner;
        svc.check_host(host)?;
        let os = &svc.hosts[host.index()];
        let refuse = |why: String| SmartIoError::LocalDevice {
            host: os.name().to_string(),
            device: device.to_string(),
            bar,
            why,
        };
        let endpoint = os.endpoint_of(device).ok_or_else(|| {
            let f = svc.machine.fabric();
            let elsewhere: Vec<String> = f
                .endpoints()
                .iter()
                .filter(|e| e.name == device && e.host != host)
                .map(|e| format!("{}:{}", f.host(e.host).name, e.name))
                .collect();
            if device.contains(':') || !elsewhere.is_empty() {
                refuse(format!(
                    "not a device of {} (a local segment is over a BAR of the host's own device{})",
                    os.name(),
                    if elsewhere.is_empty() {
                        String::new()
                    } else {
                        format!("; {} is elsewhere", elsewhere.join(", "))
                    }
                ))
            } else {
                refuse(format!("{} has no such device", os.name()))
            }
        })?;
        let (base, bar_size) = {
            let f = svc.machine.fabric();
            let ep = f.endpoint(endpoint);
            if ep.host != host {
                return Err(refuse(format!("the device is in {}", f.host(ep.host).name)));
            }
            let bars: Vec<String> = ep.bars.iter().map(|b| format!("BAR{}", b.index)).collect();
            ep.bars
                .iter()
                .find(|b| b.index == bar)
                .map(|b| (b.base.get(), b.size))
                .ok_or_else(|| {
                    refuse(format!(
                        "the device has no such BAR (it has {})",
                        if bars.is_empty() {
                            "none".to_string()
                        } else {
                            bars.join(", ")
                        }
                    ))
                })?
        };
        let fits = size > 0 && offset.checked_add(size).is_some_and(|end| end <= bar_size);
        if !fits {
            return Err(refuse(format!(
                "{size} bytes at offset {offset:#x} are not inside the {bar_size:#x}-byte BAR (at least 1 byte, ending at or before its end)"
            )));
        }
        let local = svc
            .sisci
            .create(host, None, size, Backing::Bar(PhysAddr(base + offset)))?;
        Ok(Segment {
            id: local.id,
            size,
            location: SegmentLocation::LocalDevice {
                host,
                endpoint,
                bar,
                offset,
            },
        })
    }

    /// The endpoint and name of a held device.
    fn held(&self, borrow: &DeviceBorrow) -> Result<(EndpointId, String), SmartIoError> {
        let st = self.inner.state.borrow();
        if !st.api.holds.get(&borrow.id).is_some_and(|h| h.is(borrow)) {
            return Err(self.stale(format!("borrow {}", borrow.id)));
        }
        let d = st
            .devices
            .get(&borrow.fdid)
            .ok_or(SmartIoError::UnknownFdid(borrow.fdid))?;
        Ok((d.endpoint, d.qualified.clone()))
    }

    /// Allocates a segment of `size` bytes for the borrowed device, placed by `hints` (see
    /// [`Hints`]): a SISCI segment of the host whose memory it is (the lender for device
    /// memory), with the lowest free automatic id. RAM comes from that host's one segment
    /// allocator and reads as zeroes; when it is exhausted the error is
    /// [`SmartIoError::Memory`], as for SISCI's own segments.
    pub fn create_segment(
        &self,
        borrow: &DeviceBorrow,
        size: u64,
        hints: Hints,
    ) -> Result<Segment, SmartIoError> {
        let svc = &self.inner;
        let (endpoint, qualified) = self.held(borrow)?;
        let size = size
            .max(1)
            .checked_next_multiple_of(SEGMENT_ALIGN)
            .ok_or_else(|| SmartIoError::SegmentSize {
                device: Some(qualified.clone()),
                size,
                why: "rounded up to whole 4 KiB pages it does not fit in 64 bits".into(),
            })?;
        let (lender, kind, bars) = {
            let f = svc.machine.fabric();
            let ep = f.endpoint(endpoint);
            (
                ep.host,
                DeviceKind::of(ep),
                ep.bars
                    .iter()
                    .map(|b| (b.index, b.base, b.size))
                    .collect::<Vec<_>>(),
            )
        };
        // 1. Device memory, when the device mostly reads it.
        if hints.device_reads && !hints.host_reads {
            let indices: Vec<u8> = bars.iter().map(|b| b.0).collect();
            if let Some(bar) = memory_bar(kind, &indices) {
                if let Some(seg) = self.create_in_device_memory(borrow, lender, &bars, bar, size)? {
                    return Ok(seg);
                }
            }
        }
        // 2. The caller's RAM when its CPU reads it; 3. otherwise the lender's.
        let host = if hints.host_reads && !hints.multi_host && !hints.peer_to_peer {
            borrow.host
        } else {
            lender
        };
        let ram = svc.machine.fabric().host(host).ram_bytes;
        if size > ram {
            return Err(SmartIoError::SegmentSize {
                device: Some(qualified),
                size,
                why: format!("{} has {ram} bytes of RAM", svc.hosts[host.index()].name()),
            });
        }
        let local = svc.sisci.create(
            host,
            None,
            size,
            Backing::Ram {
                align: SEGMENT_ALIGN,
            },
        )?;
        Ok(Segment {
            id: local.id,
            size,
            location: SegmentLocation::Ram {
                host,
                phys: local.phys,
            },
        })
    }

    /// A segment of `size` bytes in the device memory of BAR `bar` (one of `bars`: index,
    /// base, size) of the held device, or `None` when the BAR has no room for it.
    fn create_in_device_memory(
        &self,
        borrow: &DeviceBorrow,
        lender: HostId,
        bars: &[(u8, BusAddr, u64)],
        bar: u8,
        size: u64,
    ) -> Result<Option<Segment>, SmartIoError> {
        let svc = &self.inner;
        let Some(&(_, base, bar_size)) = bars.iter().find(|b| b.0 == bar) else {
            return Ok(None);
        };
        let mut st = svc.state.borrow_mut();
        let space = st
            .api
            .device_memory
            .entry((borrow.fdid, bar))
            .or_insert_with(|| RamAllocator::space(0..bar_size));
        let Some(offset) = (size <= bar_size)
            .then(|| space.alloc(size, SEGMENT_ALIGN).ok())
            .flatten()
        else {
            return Ok(None);
        };
        let at = PhysAddr(base.get() + offset);
        match svc
            .sisci
            .create(lender, None, size, Backing::DeviceMemory(at))
        {
            Ok(local) => Ok(Some(Segment {
                id: local.id,
                size,
                location: SegmentLocation::Device {
                    fdid: borrow.fdid,
                    bar,
                    offset,
                },
            })),
            Err(e) => {
                let _ = space.free(offset);
                Err(e)
            }
        }
    }

    /// Frees a segment made by [`SmartIo::create_segment`] (or by SISCI), or forgets a BAR
    /// segment. Mappings of it must be gone first — for devices (returning the device
    /// removes those), SISCI connections and maps, CPU maps ([`SmartIo::map_for_cpu`]): until
    /// then it is [`SmartIoError::Busy`].
    pub fn remove_segment(&self, seg: Segment) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        let local = self.sisci_segment(&seg)?;
        let backing = svc.sisci.remove(&local)?;
        let mut st = svc.state.borrow_mut();
        st.api.published.retain(|_, s| *s != seg);
        if let (Backing::DeviceMemory(_), SegmentLocation::Device { fdid, bar, offset }) =
            (backing, seg.location)
        {
            if let Some(space) = st.api.device_memory.get_mut(&(fdid, bar)) {
                let _ = space.free(offset);
            }
        }
        Ok(())
    }

    /// The host that owns `seg`'s memory and the address there (a device segment's is its
    /// lender, at the BAR's address), whether or not the segment is still live.
    fn owner(&self, seg: &Segment) -> Result<(HostId, u64), SmartIoError> {
        match seg.location {
            SegmentLocation::Ram { host, phys } => Ok((host, phys.get())),
            SegmentLocation::Device { fdid, bar, offset } => {
                let st = self.inner.state.borrow();
                let d = st
                    .devices
                    .get(&fdid)
                    .ok_or(SmartIoError::UnknownFdid(fdid))?;
                let f = self.inner.machine.fabric();
                let base = f
                    .endpoint(d.endpoint)
                    .bars
                    .iter()
                    .find(|b| b.index == bar)
                    .map(|b| b.base.get())
                    .ok_or_else(|| self.stale(format!("segment {}", seg.id)))?;
                Ok((d.lender, base + offset))
            }
            SegmentLocation::LocalDevice {
                host,
                endpoint,
                bar,
                offset,
            } => {
                let f = self.inner.machine.fabric();
                let base = f
                    .endpoint(endpoint)
                    .bars
                    .iter()
                    .find(|b| b.index == bar)
                    .map(|b| b.base.get())
                    .ok_or_else(|| self.stale(format!("segment {}", seg.id)))?;
                Ok((host, base + offset))
            }
        }
    }

    /// `seg` as the SISCI segment it is (its owner can prepare it and make it available,
    /// other hosts connect to it by the owner's node id and `seg.id`). A segment that was
    /// removed is refused.
    pub fn sisci_segment(&self, seg: &Segment) -> Result<LocalSegment, SmartIoError> {
        let (host, addr) = self.owner(seg)?;
        let local = LocalSegment {
            host,
            id: seg.id,
            phys: PhysAddr(addr),
            size: seg.size,
        };
        if self.inner.sisci.is_live(&local) {
            Ok(local)
        } else {
            Err(self.stale(format!("segment {}", seg.id)))
        }
    }

    /// Maps `seg` for the borrowed device and returns its address as the device sees it;
    /// the path is the shortest one (Paper V §4.4). Undone when the device is returned.
    pub fn map_for_device(
        &self,
        borrow: &DeviceBorrow,
        seg: &Segment,
    ) -> Result<BusAddr, SmartIoError> {
        let svc = &self.inner;
        let (endpoint, qualified) = self.held(borrow)?;
        let local = self.sisci_segment(seg)?;
        let (host, addr) = (local.host, local.phys.get());
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let lender = st
            .devices
            .get(&borrow.fdid)
            .map(|d| d.lender)
            .ok_or(SmartIoError::UnknownFdid(borrow.fdid))?;
        let h = st
            .api
            .holds
            .get_mut(&borrow.id)
            .filter(|h| h.is(borrow))
            .ok_or_else(|| self.stale(format!("borrow {}", borrow.id)))?;
        if let Some(m) = h.mapped.get(&(host, seg.id)) {
            return Ok(BusAddr(m.addr));
        }
        svc.count_lender_interaction();
        // The device's IOMMU domain belongs to the hold; what reaching the segment takes
        // belongs to this mapping.
        let domain = Taker {
            machine: &svc.machine,
            ledger: &mut st.ledger,
            grants: &mut h.grants,
            device: &qualified,
        }
        .domain_of(lender, endpoint)?;
        let mut grants = Vec::new();
        let mut taker = Taker {
            machine: &svc.machine,
            ledger: &mut st.ledger,
            grants: &mut grants,
            device: &qualified,
        };
        let side = DeviceSide {
            lender,
            fdid: borrow.fdid,
            domain,
            limit: u64::MAX,
            qualified: qualified.clone(),
            via: h.via.map(|adapter| Via {
                host: h.host,
                adapter,
            }),
        };
        match side.reach(&mut taker, endpoint, host, addr, seg.size, "segment") {
            Ok(a) => {
                h.mapped.insert(
                    (host, seg.id),
                    DeviceMap {
                        seg: local,
                        addr: a,
                        grants,
                    },
                );
                svc.sisci.note_device_map(&local, true);
                Ok(BusAddr(a))
            }
            Err(e) => {
                let _ = release(&svc.machine, &mut st.ledger, grants);
                Err(e)
            }
        }
    }

    /// Undoes [`SmartIo::map_for_device`] of `seg` for the held device: what the mapping
    /// took (look-up-table entries, IOMMU pages) is given back.
    pub fn unmap_device(&self, borrow: &DeviceBorrow, seg: &Segment) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        let (owner, _) = self.owner(seg)?;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let h = st
            .api
            .holds
            .get_mut(&borrow.id)
            .filter(|h| h.is(borrow))
            .ok_or_else(|| self.stale(format!("borrow {}", borrow.id)))?;
        let DeviceMap {
            seg: local, grants, ..
        } = h
            .mapped
            .remove(&(owner, seg.id))
            .ok_or_else(|| SmartIoError::UnknownDevice {
                spec: format!("segment {}", seg.id),
                why: format!("it is not mapped for fdid {}", borrow.fdid),
            })?;
        svc.sisci.note_device_map(&local, false);
        svc.count_lender_interaction();
        svc.release_for(
            &mut st.ledger,
            grants,
            format!("fdid {}", borrow.fdid),
            borrow.host,
        )
    }

    /// Maps the first `size` bytes of the SISCI multicast group `group` for the borrowed
    /// device and returns the address the device writes to: a look-up-table entry of its
    /// lender's NTB pointing at the group, so one write by the device is replicated by the
    /// cluster switches into every member's segment (Paper V §6.5). Only writes are
    /// replicated; a read of the address is an error. Undone when the device is returned.
    pub fn map_multicast_for_device(
        &self,
        borrow: &DeviceBorrow,
        group: GroupId,
        size: u64,
    ) -> Result<BusAddr, SmartIoError> {
        let svc = &self.inner;
        let (endpoint, qualified) = self.held(borrow)?;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let lender = st
            .devices
            .get(&borrow.fdid)
            .map(|d| d.lender)
            .ok_or(SmartIoError::UnknownFdid(borrow.fdid))?;
        let adapter = {
            let f = svc.machine.fabric();
            (0..)
                .map_while(|n| f.host_adapter(lender, n))
                .find(|&a| f.adapter(a).cable.is_some_and(|l| f.link_is_up(l)))
                .ok_or_else(|| SmartIoError::NoPath {
                    from: f.host(lender).name.clone(),
                    to: format!("multicast group {}", group.0),
                })?
        };
        let h = st
            .api
            .holds
            .get_mut(&borrow.id)
            .filter(|h| h.is(borrow))
            .ok_or_else(|| self.stale(format!("borrow {}", borrow.id)))?;
        svc.count_lender_interaction();
        let mut taker = Taker {
            machine: &svc.machine,
            ledger: &mut st.ledger,
            grants: &mut h.grants,
            device: &qualified,
        };
        let m = taker.lut_to(adapter, LutTarget::Multicast(group), 0, size)?;
        // With the lender's IOMMU on, the device's writes to the NTB window are translated
        // like any other DMA: the window must be in its domain.
        if let Some(d) = taker.domain_of(lender, endpoint)? {
            taker.identity(lender, d, m.bus_addr, size)?;
        }
        Ok(BusAddr(m.bus_addr))
    }

    /// Where `host`'s CPU reaches `seg`: its own memory directly, anything else through a
    /// window of its NTB.
    pub fn map_for_cpu(&self, host: HostId, seg: &Segment) -> Result<CpuMap, SmartIoError> {
        self.map_for_cpu_via(host, seg, None)
    }

    /// [`SmartIo::map_for_cpu`] through `host`'s NTB adapter `adapter` when the segment is
    /// elsewhere.
    pub fn map_for_cpu_via(
        &self,
        host: HostId,
        seg: &Segment,
        adapter: Option<u32>,
    ) -> Result<CpuMap, SmartIoError> {
        let svc = &self.inner;
        svc.check_host(host)?;
        let local = self.sisci_segment(seg)?;
        let (at, addr) = (local.host, local.phys.get());
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let id = st.api.id();
        let mut grants = Vec::new();
        let cpu_addr = if at == host {
            addr
        } else {
            let name = format!("segment {}", seg.id);
            let mut taker = Taker {
                machine: &svc.machine,
                ledger: &mut st.ledger,
                grants: &mut grants,
                device: &name,
            };
            let reached = (|| {
                let via = adapter.map(|adapter| Via { host, adapter });
                let (a, far): (AdapterId, AdapterId) = ntb_pair_via(&svc.machine, host, at, via)?;
                let m = taker.lut(a, far, addr, seg.size)?;
                let far_ep = svc.machine.fabric().adapter(far).endpoint;
                if let Some(d) = taker.domain_of(at, far_ep)? {
                    taker.identity(at, d, addr, seg.size)?;
                }
                Ok(m.bus_addr)
            })();
            match reached {
                Ok(a) => a,
                Err(e) => {
                    let _ = release(&svc.machine, &mut st.ledger, grants);
                    return Err(e);
                }
            }
        };
        let map = CpuMap {
            id,
            host,
            addr: BusAddr(cpu_addr),
            size: seg.size,
        };
        st.api.cpu_maps.insert(id, (map, grants, local));
        svc.sisci.note_cpu_map(&local, true);
        Ok(map)
    }

    /// Registers `device`, a function of `host` that SmartIO does not lend (it has a local
    /// driver, or is being used by a program of its own host), as a peer requester: its id
    /// goes into the requester-id table of every NTB adapter of `host`, so its reads through
    /// a window of that host's NTB — a remote segment as [`SmartIo::map_for_cpu`] gives it,
    /// another host's device memory — get their completions back (Paper V §6.1; without it
    /// the far side cannot route them). Undone by [`SmartIo::unregister_peer_requester`].
    pub fn register_peer_requester(
        &self,
        host: HostId,
        device: &str,
    ) -> Result<PeerRequester, SmartIoError> {
        let svc = &self.inner;
        svc.check_host(host)?;
        let os = &svc.hosts[host.index()];
        let endpoint = os
            .endpoint_of(device)
            .ok_or_else(|| SmartIoError::UnknownDevice {
                spec: format!("{}:{device}", os.name()),
                why: format!("{} has no such device", os.name()),
            })?;
        let adapters: Vec<AdapterId> = {
            let f = svc.machine.fabric();
            (0..).map_while(|n| f.host_adapter(host, n)).collect()
        };
        let qualified = format!("{}:{device}", os.name());
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let mut grants = Vec::new();
        let mut taker = Taker {
            machine: &svc.machine,
            ledger: &mut st.ledger,
            grants: &mut grants,
            device: &qualified,
        };
        for a in adapters {
            if let Err(e) = taker.requester(a, smartio_fabric::Requester::Device(endpoint)) {
                let _ = release(&svc.machine, &mut st.ledger, grants);
                return Err(e);
            }
        }
        let id = st.api.id();
        let r = PeerRequester {
            id,
            host,
            device: device.to_string(),
        };
        st.api.requesters.insert(id, (r.clone(), grants));
        Ok(r)
    }

    /// Undoes a [`SmartIo::register_peer_requester`].
    pub fn unregister_peer_requester(&self, r: PeerRequester) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        if !st.api.requesters.get(&r.id).is_some_and(|(k, _)| *k == r) {
            return Err(self.stale(format!("peer requester {}", r.id)));
        }
        let (_, grants) = st
            .api
            .requesters
            .remove(&r.id)
            .ok_or_else(|| self.stale(format!("peer requester {}", r.id)))?;
        svc.release_for(&mut st.ledger, grants, r.device, r.host)
    }

    /// Undoes a [`SmartIo::map_for_cpu`].
    pub fn unmap_cpu(&self, map: CpuMap) -> Result<(), SmartIoError> {
        let svc = &self.inner;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        if !st
            .api
            .cpu_maps
            .get(&map.id)
            .is_some_and(|(m, ..)| *m == map)
        {
            return Err(self.stale(format!("map {}", map.id)));
        }
        let (_, grants, local) = st
            .api
            .cpu_maps
            .remove(&map.id)
            .ok_or_else(|| self.stale(format!("map {}", map.id)))?;
        svc.sisci.note_cpu_map(&local, false);
        svc.release_for(&mut st.ledger, grants, format!("map {}", map.id), map.host)
    }
}

#[cfg(test)]
#[path = "api_segment_tests.rs"]
mod segment_tests;
