//! The daemon's side of SISCI's SmartIO extension: borrowing devices, their segments (BARs
//! and memory SmartIO places for them), maps for the program and for the device, and
//! requester-id registrations. A BAR a program maps is a register page ([`crate::pages`]).

use crate::answer::{mapped, Answer, FileOf};
use crate::calls::done;
use crate::daemon::{check_range, Daemon};
use crate::handles::Scope;
use crate::landing::Landing;
use crate::objects::Object;
use crate::pages::MAX_PAGE_BYTES;
use crate::protocol::{DeviceEntry, Handle, Reply, Request};
use crate::refusal::{Refused, RequestError};
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

/// The memory a device segment request names (`SCI_MEMTYPE_*`), checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemType {
    /// One of the device's BARs.
    Bar,
    /// Memory SmartIO places for the device, for the borrower that made it alone.
    Private,
    /// Memory SmartIO places for the device, for every borrower.
    Shared,
}

impl MemType {
    /// Decodes `SCI_MEMTYPE_*`.
    fn decode(memtype: u32) -> Option<MemType> {
        match memtype {
            MEMTYPE_BAR => Some(MemType::Bar),
            MEMTYPE_PRIVATE => Some(MemType::Private),
            MEMTYPE_SHARED => Some(MemType::Shared),
            _ => None,
        }
    }
}

impl Daemon {
    pub(crate) fn dispatch_device(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        match request {
            Request::DeviceList => done(Reply::Devices(self.device_entries())),
            Request::BorrowDevice { fdid, exclusive } => {
                self.borrow_device(conn, host, Fdid(fdid), exclusive)
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
            } => self.create_device_segment(conn, device, id, size, memtype, hints),
            Request::ConnectDeviceSegment {
                device,
                id,
                memtype,
            } => self.connect_device_segment(conn, device, id, memtype),
            Request::MapForDevice {
                device,
                segment,
                offset,
                size,
            } => self.map_for_device(conn, device, segment, offset, size),
            Request::UnmapForDevice { device, segment } => {
                self.unmap_for_device(conn, device, segment)
            }
            Request::RegisterRequester { bus, devfn } => {
                let name = self.function_at(host, bus, devfn)?;
                let r = self.smartio.register_peer_requester(host, &name)?;
                let handle = self.keep(conn, Object::Requester(r));
                done(Reply::Made(handle))
            }
            Request::UnregisterRequester { requester } => {
                Ok(self.end(conn, requester, "requester handle", |o| {
                    matches!(o, Object::Requester(_))
                })?)
            }
            _ => unreachable!("only device requests come here"),
        }
    }

    /// `BorrowDevice`: a borrowed device decodes its BARs and masters the bus (the
    /// lender's configuration write), as SmartIO's driver does on a borrow; a task answers.
    fn borrow_device(
        &mut self,
        conn: u64,
        host: HostId,
        fdid: Fdid,
        exclusive: bool,
    ) -> Result<Answer, RequestError> {
        let borrow = self.smartio.borrow_device(host, fdid, exclusive)?;
        let handle = self.keep(conn, Object::Device(borrow));
        let (smartio, table) = (self.smartio.clone(), Rc::clone(&self.table));
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

    /// `CreateDeviceSegment`: memory SmartIO places for the device, private or shared.
    fn create_device_segment(
        &mut self,
        conn: u64,
        device: Handle,
        id: u32,
        size: u64,
        memtype: u32,
        hints: u32,
    ) -> Result<Answer, RequestError> {
        let borrow = self.borrow(conn, device)?;
        let shared = match MemType::decode(memtype) {
            Some(MemType::Private) => false,
            Some(MemType::Shared) => true,
            Some(MemType::Bar) | None => return Err(Refused::DeviceSegmentType { memtype }.into()),
        };
        if hints & !ALL_HINTS != 0 {
            return Err(Refused::Hints { hints }.into());
        }
        if self.created(borrow.fdid.0, id).is_some() {
            return Err(SciError::SegmentIdInUse {
                host: format!("device {}", borrow.fdid),
                id,
            }
            .into());
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
                shared,
            },
        );
        done(Reply::Done)
    }

    /// `ConnectDeviceSegment`: a BAR of the device, or memory made for it (another
    /// borrower's only if shared).
    fn connect_device_segment(
        &mut self,
        conn: u64,
        device: Handle,
        id: u32,
        memtype: u32,
    ) -> Result<Answer, RequestError> {
        let borrow = self.borrow(conn, device)?;
        let kind = MemType::decode(memtype).ok_or(Refused::MemoryType { memtype })?;
        let seg = match kind {
            MemType::Bar => {
                let bar = u8::try_from(id).map_err(|_| Refused::NoSuchBar {
                    id,
                    fdid: borrow.fdid,
                })?;
                self.smartio.bar_segment(&borrow, bar)?
            }
            MemType::Private | MemType::Shared => {
                let (owner, seg, shared) =
                    self.created(borrow.fdid.0, id)
                        .ok_or(Refused::NoDeviceSegment {
                            fdid: borrow.fdid,
                            id,
                        })?;
                let mine = self.table.borrow().owner_of(conn) == owner;
                if !shared && !mine {
                    return Err(Refused::PrivateSegment {
                        id,
                        fdid: borrow.fdid,
                    }
                    .into());
                }
                seg
            }
        };
        let bar = kind == MemType::Bar;
        let handle = self.keep(conn, Object::DeviceRemote { device, seg, bar });
        done(Reply::Remote {
            handle,
            size: seg.size,
        })
    }

    /// `MapForDevice`: the device's address of `offset` in the segment.
    fn map_for_device(
        &mut self,
        conn: u64,
        device: Handle,
        segment: Handle,
        offset: u64,
        size: u64,
    ) -> Result<Answer, RequestError> {
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

    /// `UnmapForDevice`: refused for a segment not mapped for the device.
    fn unmap_for_device(
        &mut self,
        conn: u64,
        device: Handle,
        segment: Handle,
    ) -> Result<Answer, RequestError> {
        let borrow = self.borrow(conn, device)?;
        let seg = self.segment_of(conn, segment)?;
        let handle = self
            .find(conn, |o| {
                matches!(o, Object::DeviceMap { device: d, seg: s } if *d == device && *s == seg)
            })
            .ok_or(Refused::NotMappedForDevice { fdid: borrow.fdid })?;
        self.smartio.unmap_device(&borrow, &seg)?;
        self.forget(handle);
        done(Reply::Done)
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
    ) -> Result<Answer, RequestError> {
        check_range("segment", offset, size, seg.size)?;
        let map = self.smartio.map_for_cpu(host, &seg)?;
        let landing = self.landing(
            host,
            smartio_platform::BusAddr(map.addr.get() + offset),
            size,
        );
        let placed = match landing.map_err(RequestError::from) {
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
                    Err(Refused::BarTooLarge {
                        bar,
                        size: bar_size,
                        max: MAX_PAGE_BYTES,
                    }
                    .into())
                } else {
                    self.pages
                        .open(&self.engine, endpoint, bar, bar_size)
                        .map(|_| (FileOf::Page(endpoint, bar), offset, Some((endpoint, bar))))
                        .map_err(|e| Refused::Page(e).into())
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
        self.resolve(
            conn,
            device,
            Scope::Descriptor,
            "device handle",
            |o| match o {
                Object::Device(b) => Some(*b),
                _ => None,
            },
        )
    }

    /// The device-API segment a handle names: a local segment, a connection to another
    /// host's segment, or a device segment — of any descriptor of the program.
    fn segment_of(&self, conn: u64, handle: Handle) -> Result<Segment, RequestError> {
        let sisci = self.smartio.sisci().clone();
        let seg = self.resolve(
            conn,
            handle,
            Scope::Process,
            "segment handle",
            |o| match o {
                Object::Segment(s) => Some(Some(Segment::from(*s))),
                Object::Remote(r) => Some(sisci.connected_segment(r).map(Segment::from)),
                Object::DeviceRemote { seg, .. } => Some(Some(*seg)),
                _ => None,
            },
        )?;
        Ok(seg.ok_or(Refused::Unconnected { handle })?)
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
    fn function_at(&self, host: HostId, bus: u32, devfn: u32) -> Result<String, Refused> {
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
            .ok_or_else(|| Refused::NoFunction {
                host: fabric.host(host).name.clone(),
                bus,
                devfn,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_memory_type_decodes_to_its_own_and_no_other_number_does() {
        assert_eq!(MemType::decode(1), Some(MemType::Bar));
        assert_eq!(MemType::decode(2), Some(MemType::Private));
        assert_eq!(MemType::decode(4), Some(MemType::Shared));
        for other in [0, 3, 5, 6, 8, u32::MAX] {
            assert_eq!(MemType::decode(other), None, "{other}");
        }
    }

    #[test]
    fn each_access_hint_bit_sets_its_own_hint_alone() {
        let none = Hints {
            device_reads: false,
            device_writes: false,
            host_reads: false,
            host_writes: false,
            multi_host: false,
            peer_to_peer: false,
        };
        assert_eq!(hints_of(0), none);
        let each: [(u32, Hints); 6] = [
            (
                0x1,
                Hints {
                    device_reads: true,
                    ..none
                },
            ),
            (
                0x2,
                Hints {
                    device_writes: true,
                    ..none
                },
            ),
            (
                0x4,
                Hints {
                    host_reads: true,
                    ..none
                },
            ),
            (
                0x8,
                Hints {
                    host_writes: true,
                    ..none
                },
            ),
            (
                0x10,
                Hints {
                    multi_host: true,
                    ..none
                },
            ),
            (
                0x20,
                Hints {
                    peer_to_peer: true,
                    ..none
                },
            ),
        ];
        for (bit, hints) in each {
            assert_eq!(hints_of(bit), hints, "{bit:#x}");
        }
        // The six bits are every hint SISCI defines, and nothing else.
        assert_eq!(ALL_HINTS, 0x3f);
        let all = hints_of(ALL_HINTS);
        assert!(
            all.device_reads
                && all.device_writes
                && all.host_reads
                && all.host_writes
                && all.multi_host
                && all.peer_to_peer
        );
    }
}
