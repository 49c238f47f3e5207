//! The daemon's side of SISCI's SmartIO extension: borrowing devices, their segments (BARs
//! and memory SmartIO places for them), maps for the program and for the device, and
//! requester-id registrations. A BAR a program maps is a register page ([`crate::pages`]).

use crate::daemon::{check_range, mapped, Answer, Daemon, FileOf, Landing, Object};
use crate::pages::MAX_PAGE_BYTES;
use crate::protocol::{DeviceEntry, Handle, Reply, Request};
use smartio_fabric::HostId;
use smartio_smartio::{DeviceBorrow, Fdid, Hints, SciError, Segment};
use std::rc::Rc;

/// `SCI_MEMTYPE_*`.
const MEMTYPE_BAR: u32 = 1;
const MEMTYPE_PRIVATE: u32 = 2;
const MEMTYPE_SHARED: u32 = 4;

/// `SCI_MEMACCESS_*` bits.
const DEVICE_READ: u32 = 0x1;
const DEVICE_WRITE: u32 = 0x2;
const HOST_READ: u32 = 0x4;
const HOST_WRITE: u32 = 0x8;
const MULTIHOST: u32 = 0x10;
const P2P: u32 = 0x20;
const ALL_HINTS: u32 = DEVICE_READ | DEVICE_WRITE | HOST_READ | HOST_WRITE | MULTIHOST | P2P;

fn illegal(what: String) -> SciError {
    SciError::Illegal(what)
}

impl Daemon {
    pub(crate) fn dispatch_device(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, SciError> {
        let done = |reply| Ok(Some((reply, None)));
        match request {
            Request::DeviceList => done(Reply::Devices(self.device_entries())),
            Request::BorrowDevice { fdid, exclusive } => {
                let borrow = self.smartio.borrow_device(host, Fdid(fdid), exclusive)?;
                let handle = self.keep(conn, Object::Device(borrow));
                let (smartio, table) = (self.smartio.clone(), Rc::clone(&self.table));
                // A borrowed device decodes its BARs and masters the bus (the lender's
                // configuration write), as SmartIO's driver does on a borrow.
                self.answer_later(conn, None, async move {
                    match smartio.enable_device(&borrow).await {
                        Ok(()) => Ok(Reply::Made(handle)),
                        Err(e) => {
                            table.borrow_mut().objects.remove(&handle);
                            let _ = smartio.return_device(borrow);
                            Err(e)
                        }
                    }
                });
                Ok(None)
            }
            Request::ReturnDevice { device } => {
                let borrow = self.borrow(conn, device)?;
                self.return_device(conn, device, borrow)?;
                done(Reply::Done)
            }
            Request::CreateDeviceSegment {
                device,
                id,
                size,
                memtype,
                hints,
            } => {
                let borrow = self.borrow(conn, device)?;
                if memtype != MEMTYPE_PRIVATE && memtype != MEMTYPE_SHARED {
                    return Err(illegal(format!(
                        "memory type {memtype} for a device segment (SCI_MEMTYPE_PRIVATE or SCI_MEMTYPE_SHARED)"
                    )));
                }
                if hints & !ALL_HINTS != 0 {
                    return Err(illegal(format!("access hints {hints:#x}")));
                }
                if self.created(borrow.fdid.0, id).is_some() {
                    return Err(SciError::SegmentIdInUse {
                        host: format!("device {}", borrow.fdid),
                        id,
                    });
                }
                let seg = self
                    .smartio
                    .create_segment(&borrow, size, hints_of(hints))?;
                self.keep(
                    conn,
                    Object::Created {
                        fdid: borrow.fdid.0,
                        id,
                        seg,
                        shared: memtype == MEMTYPE_SHARED,
                    },
                );
                done(Reply::Done)
            }
            Request::ConnectDeviceSegment {
                device,
                id,
                memtype,
            } => {
                let borrow = self.borrow(conn, device)?;
                let seg = match memtype {
                    MEMTYPE_BAR => {
                        let bar = u8::try_from(id)
                            .map_err(|_| illegal(format!("BAR {id} of device {}", borrow.fdid)))?;
                        self.smartio.bar_segment(&borrow, bar)?
                    }
                    MEMTYPE_PRIVATE | MEMTYPE_SHARED => {
                        let (owner, seg, shared) =
                            self.created(borrow.fdid.0, id).ok_or_else(|| {
                                illegal(format!("device {} has no segment {id}", borrow.fdid))
                            })?;
                        let mine = self.table.borrow().owner_of(conn) == owner;
                        if !shared && !mine {
                            return Err(illegal(format!(
                                "segment {id} of device {} is another borrower's private memory",
                                borrow.fdid
                            )));
                        }
                        seg
                    }
                    other => return Err(illegal(format!("memory type {other}"))),
                };
                let bar = memtype == MEMTYPE_BAR;
                let handle = self.keep(conn, Object::DeviceRemote { device, seg, bar });
                done(Reply::Remote {
                    handle,
                    size: seg.size,
                })
            }
            Request::MapForDevice {
                device,
                segment,
                offset,
                size,
            } => {
                let borrow = self.borrow(conn, device)?;
                let seg = self.segment_of(conn, segment)?;
                check_range("segment", offset, size, seg.size)?;
                let addr = self.smartio.map_for_device(&borrow, &seg)?;
                let known = self.table.borrow().objects.values().any(|(_, o)| {
                    matches!(o, Object::DeviceMap { device: d, seg: s } if *d == device && *s == seg)
                });
                if !known {
                    self.keep(conn, Object::DeviceMap { device, seg });
                }
                done(Reply::Value(addr.get() + offset))
            }
            Request::UnmapForDevice { device, segment } => {
                let borrow = self.borrow(conn, device)?;
                let seg = self.segment_of(conn, segment)?;
                let handle = self.find(conn, |o| {
                    matches!(o, Object::DeviceMap { device: d, seg: s } if *d == device && *s == seg)
                });
                let handle = handle.ok_or_else(|| {
                    illegal(format!(
                        "the segment is not mapped for device {}",
                        borrow.fdid
                    ))
                })?;
                self.smartio.unmap_device(&borrow, &seg)?;
                self.forget(handle);
                done(Reply::Done)
            }
            Request::RegisterRequester { bus, devfn } => {
                let name = self.function_at(host, bus, devfn)?;
                let r = self.smartio.register_peer_requester(host, &name)?;
                let handle = self.keep(conn, Object::Requester(r));
                done(Reply::Made(handle))
            }
            Request::UnregisterRequester { requester } => {
                self.end(conn, requester, "requester", |o| {
                    matches!(o, Object::Requester(_))
                })
            }
            _ => unreachable!("only device requests come here"),
        }
    }

    /// Maps a device segment for the program: RAM, or a BAR as its register page.
    pub(crate) fn map_device_segment(
        &mut self,
        conn: u64,
        host: HostId,
        via: Handle,
        seg: Segment,
        offset: u64,
        size: u64,
    ) -> Result<Answer, SciError> {
        check_range("segment", offset, size, seg.size)?;
        let map = self.smartio.map_for_cpu(host, &seg)?;
        let landing = self.landing(
            host,
            smartio_platform::BusAddr(map.addr.get() + offset),
            size,
        );
        let placed = match landing {
            Ok(Landing::Ram { host, phys }) => Ok((FileOf::Ram(host), phys, None)),
            Ok(Landing::Bar {
                endpoint,
                bar,
                offset,
            }) => {
                let bar_size = self
                    .cluster
                    .machine
                    .fabric()
                    .endpoint(endpoint)
                    .bars
                    .iter()
                    .find(|b| b.index == bar)
                    .map_or(0, |b| b.size);
                if bar_size > MAX_PAGE_BYTES {
                    Err(illegal(format!(
                        "BAR{bar} of {bar_size} bytes: the live engine maps BARs of up to {MAX_PAGE_BYTES} bytes"
                    )))
                } else {
                    self.pages
                        .open(&self.engine, endpoint, bar, bar_size)
                        .map(|_| (FileOf::Page(endpoint, bar), offset, Some((endpoint, bar))))
                        .map_err(|e| illegal(e.to_string()))
                }
            }
            Err(e) => Err(e),
        };
        let (file, at, page) = match placed {
            Ok(p) => p,
            Err(e) => {
                self.smartio.unmap_cpu(map)?;
                return Err(e);
            }
        };
        let handle = self.keep(conn, Object::CpuMap { map, via, page });
        Ok(mapped(handle, at, size, file))
    }

    /// Returns `borrow`: refused while the program is still connected to one of its segments
    /// (as the library still holds those handles); what was mapped for it or made for it
    /// through this descriptor goes with it.
    fn return_device(
        &mut self,
        conn: u64,
        device: Handle,
        borrow: DeviceBorrow,
    ) -> Result<(), SciError> {
        let connections: Vec<Handle> = self.handles(
            conn,
            |o| matches!(o, Object::DeviceRemote { device: d, .. } if *d == device),
        );
        let mapped = self.handles(
            conn,
            |o| matches!(o, Object::CpuMap { via, .. } if connections.contains(via)),
        );
        if !mapped.is_empty() || !connections.is_empty() {
            return Err(SciError::Busy {
                what: format!("device {}", borrow.fdid),
                users: format!(
                    "{} connections to its segments, {} maps of them (disconnect first)",
                    connections.len(),
                    mapped.len()
                ),
            });
        }
        self.smartio.return_device(borrow)?;
        let gone: Vec<Object> = self
            .handles(conn, |o| match o {
                Object::DeviceRemote { device: d, .. } | Object::DeviceMap { device: d, .. } => {
                    *d == device
                }
                Object::Created { fdid, .. } => *fdid == borrow.fdid.0,
                _ => false,
            })
            .into_iter()
            .filter_map(|h| self.forget(h))
            .collect();
        self.forget(device);
        // BAR segments go with the device, and memory made for it — once nobody else maps it.
        let made: Vec<Object> = gone
            .into_iter()
            .filter(|o| {
                matches!(
                    o,
                    Object::Created { .. } | Object::DeviceRemote { bar: true, .. }
                )
            })
            .collect();
        self.release_all(made);
        Ok(())
    }

    fn borrow(&self, conn: u64, device: Handle) -> Result<DeviceBorrow, SciError> {
        self.with(conn, device, |o| match o {
            Object::Device(b) => Ok(*b),
            _ => Err(SciError::Stale(format!("device handle {device}"))),
        })
    }

    /// The device-API segment a handle names: a local segment, a connection to another
    /// host's segment, or a device segment — of any descriptor of the program.
    fn segment_of(&self, conn: u64, handle: Handle) -> Result<Segment, SciError> {
        let sisci = self.smartio.sisci().clone();
        self.with_in_process(conn, handle, |o| match o {
            Object::Segment(s) => Ok(Segment::from(*s)),
            Object::Remote(r) => sisci
                .connected_segment(r)
                .map(Segment::from)
                .ok_or_else(|| illegal(format!("connection {handle} reaches no segment"))),
            Object::DeviceRemote { seg, .. } => Ok(*seg),
            _ => Err(SciError::Stale(format!("segment handle {handle}"))),
        })
    }

    /// The segment `id` made for device `fdid`: its owner, the segment, whether shared.
    fn created(&self, fdid: u32, id: u32) -> Option<(u64, Segment, bool)> {
        self.table
            .borrow()
            .objects
            .values()
            .find_map(|(owner, o)| match o {
                Object::Created {
                    fdid: f,
                    id: i,
                    seg,
                    shared,
                } if *f == fdid && *i == id => Some((*owner, *seg, *shared)),
                _ => None,
            })
    }

    /// Handles of the descriptor's objects that `wanted` picks.
    fn handles(&self, conn: u64, wanted: impl Fn(&Object) -> bool) -> Vec<Handle> {
        let t = self.table.borrow();
        let owner = t.owner_of(conn);
        t.objects
            .iter()
            .filter(|(_, (o, object))| *o == owner && wanted(object))
            .map(|(h, _)| *h)
            .collect()
    }

    fn find(&self, conn: u64, wanted: impl Fn(&Object) -> bool) -> Option<Handle> {
        self.handles(conn, wanted).into_iter().next()
    }

    /// The devices SmartIO lends, with their PCI identity and the lender's node id.
    fn device_entries(&self) -> Vec<DeviceEntry> {
        let fabric = self.cluster.machine.fabric();
        self.smartio
            .devices()
            .into_iter()
            .filter_map(|d| {
                let lender = fabric.hosts().iter().position(|h| h.name == d.lender)?;
                let lender = HostId(lender as u32);
                let endpoint = fabric.endpoint(fabric.endpoint_by_name(lender, &d.device)?);
                let node_id = fabric
                    .host_adapter(lender, 0)
                    .map_or(0, |a| fabric.adapter(a).node_id.0);
                Some(DeviceEntry {
                    fdid: d.fdid.0,
                    node_id,
                    class: d.class_code,
                    vendor: endpoint.layout.vendor_id,
                    device: endpoint.layout.device_id,
                    name: d.qualified(),
                })
            })
            .collect()
    }

    /// The name of `host`'s function at bus `bus`, device/function `devfn`.
    fn function_at(&self, host: HostId, bus: u32, devfn: u32) -> Result<String, SciError> {
        let fabric = self.cluster.machine.fabric();
        fabric
            .endpoints()
            .iter()
            .find(|e| {
                e.host == host
                    && u32::from(e.bdf.bus) == bus
                    && (u32::from(e.bdf.dev) << 3 | u32::from(e.bdf.func)) == devfn
            })
            .map(|e| e.name.clone())
            .ok_or_else(|| {
                illegal(format!(
                    "host {} has no function at bus {bus:#x} devfn {devfn:#x}",
                    fabric.host(host).name
                ))
            })
    }
}

/// SmartIO's placement hints from `SCI_MEMACCESS_*` bits.
fn hints_of(bits: u32) -> Hints {
    Hints {
        device_reads: bits & DEVICE_READ != 0,
        device_writes: bits & DEVICE_WRITE != 0,
        host_reads: bits & HOST_READ != 0,
        host_writes: bits & HOST_WRITE != 0,
        multi_host: bits & MULTIHOST != 0,
        peer_to_peer: bits & P2P != 0,
    }
}
