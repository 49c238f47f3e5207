//! The daemon's side of SISCI's own calls: node ids, segments, connections, maps and data
//! interrupts. Each request is checked (its handles resolved to the caller's objects, its
//! values against what the call takes) before the SISCI layer carries it out.

use crate::answer::{mapped, Answer, FileOf};
use crate::daemon::{check_range, Daemon};
use crate::handles::Scope;
use crate::landing::Landing;
use crate::objects::Object;
use crate::protocol::{self, Handle, Reply, Request};
use crate::refusal::{Refused, RequestError};
use smartio_fabric::{ClusterNodeId, HostId, LutTarget};
use smartio_platform::SimDuration;
use smartio_smartio::sisci::{LocalSegment, RemoteSegment, Sisci};
use smartio_smartio::{SciError, Segment};

/// A reply with no memory file.
pub(crate) fn done(reply: Reply) -> Result<Answer, RequestError> {
    Ok(Some((reply, None)))
}

impl Daemon {
    /// Node ids: `NodeIdsByName`, `ProbeNode`, `LocalNodeId`.
    pub(crate) fn dispatch_node(
        &mut self,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        let sisci = self.smartio.sisci().clone();
        match request {
            Request::NodeIdsByName { name } => {
                if name.len() > protocol::MAX_NAME {
                    return Err(Refused::NameTooLong {
                        len: name.len(),
                        max: protocol::MAX_NAME,
                    }
                    .into());
                }
                done(Reply::NodeIds(self.node_ids_named(&name)))
            }
            Request::ProbeNode { adapter, node_id } => {
                sisci.probe_node(host, adapter, ClusterNodeId(node_id))?;
                done(Reply::Value(1))
            }
            Request::LocalNodeId { adapter } => {
                done(Reply::Value(u64::from(sisci.node_id(host, adapter)?.0)))
            }
            _ => unreachable!("dispatch sends only node-id requests here"),
        }
    }

    /// Local segments: `CreateSegment`, `PrepareSegment`, `SetAvailable`, `SetUnavailable`,
    /// `RemoveSegment`, `MapLocal`.
    pub(crate) fn dispatch_segment(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        let sisci = self.smartio.sisci().clone();
        match request {
            Request::CreateSegment { id, size } => {
                let seg = sisci.create_segment(host, id, size)?;
                let handle = self.keep(conn, Object::Segment(seg));
                done(Reply::Segment {
                    handle,
                    id: seg.id,
                    size: seg.size,
                    phys: seg.phys.get(),
                })
            }
            Request::PrepareSegment { segment, adapter } => {
                sisci.prepare_segment(&self.segment(conn, segment)?, adapter)?;
                done(Reply::Done)
            }
            Request::SetAvailable { segment, adapter } => {
                sisci.set_available(&self.segment(conn, segment)?, adapter)?;
                done(Reply::Done)
            }
            Request::SetUnavailable { segment, adapter } => {
                sisci.set_unavailable(&self.segment(conn, segment)?, adapter)?;
                done(Reply::Done)
            }
            Request::RemoveSegment { segment } => self.remove_segment(conn, segment),
            Request::MapLocal {
                segment,
                offset,
                size,
            } => {
                let seg = self.segment(conn, segment)?;
                check_range("segment", offset, size, seg.size)?;
                let map = sisci.map_local(&seg)?;
                let handle = self.keep(conn, Object::LocalMap(map));
                Ok(mapped(
                    handle,
                    seg.phys.get() + offset,
                    size,
                    FileOf::Ram(host),
                ))
            }
            _ => unreachable!("dispatch sends only segment requests here"),
        }
    }

    /// Connections and maps: `ConnectSegment`, `DisconnectSegment`, `MapRemote`, `Unmap`,
    /// `Flush`.
    pub(crate) fn dispatch_connection(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        match request {
            Request::ConnectSegment {
                node_id,
                segment_id,
                adapter,
            } => {
                let remote = self.smartio.sisci().connect_segment(
                    host,
                    adapter,
                    ClusterNodeId(node_id),
                    segment_id,
                )?;
                let handle = self.keep(conn, Object::Remote(remote));
                self.note_connected(&remote);
                done(Reply::Remote {
                    handle,
                    size: remote.size,
                })
            }
            Request::DisconnectSegment { remote } => self.disconnect_segment(conn, remote),
            Request::MapRemote {
                remote,
                offset,
                size,
            } => self.map_remote(conn, host, remote, offset, size),
            Request::Unmap { map } => Ok(self.end(conn, map, "map handle", |o| {
                matches!(
                    o,
                    Object::LocalMap(_) | Object::RemoteMap(_) | Object::CpuMap { .. }
                )
            })?),
            Request::Flush { map } => self.flush(conn, map),
            _ => unreachable!("dispatch sends only connection requests here"),
        }
    }

    /// Data interrupts: `CreateDataInterrupt`, `RemoveDataInterrupt`,
    /// `ConnectDataInterrupt`, `DisconnectDataInterrupt`, `TriggerDataInterrupt`,
    /// `WaitDataInterrupt`.
    pub(crate) fn dispatch_interrupt(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        let sisci = self.smartio.sisci().clone();
        match request {
            Request::CreateDataInterrupt { adapter, number } => {
                let intr = sisci.create_data_interrupt(host, adapter, number)?;
                let handle = self.keep(conn, Object::Interrupt(intr));
                done(Reply::Interrupt {
                    handle,
                    number: intr.id,
                })
            }
            Request::RemoveDataInterrupt { interrupt } => {
                Ok(self.end(conn, interrupt, "interrupt handle", |o| {
                    matches!(o, Object::Interrupt(_))
                })?)
            }
            Request::ConnectDataInterrupt {
                node_id,
                adapter,
                number,
            } => {
                let remote =
                    sisci.connect_data_interrupt(host, adapter, ClusterNodeId(node_id), number)?;
                let handle = self.keep(conn, Object::RemoteInterrupt(remote));
                done(Reply::Interrupt { handle, number })
            }
            Request::DisconnectDataInterrupt { remote } => {
                Ok(self.end(conn, remote, "interrupt handle", |o| {
                    matches!(o, Object::RemoteInterrupt(_))
                })?)
            }
            Request::TriggerDataInterrupt { remote, data } => {
                let r =
                    self.resolve(
                        conn,
                        remote,
                        Scope::Descriptor,
                        "interrupt handle",
                        |o| match o {
                            Object::RemoteInterrupt(r) => Some(r.clone()),
                            _ => None,
                        },
                    )?;
                self.answer_later(conn, None, async move {
                    r.trigger(&data).await.map(|()| Reply::Done)
                });
                Ok(None)
            }
            Request::WaitDataInterrupt {
                interrupt,
                timeout_ms,
            } => self.wait_data_interrupt(conn, &sisci, interrupt, timeout_ms),
            _ => unreachable!("dispatch sends only data-interrupt requests here"),
        }
    }

    /// The local segment `handle` of `conn`'s descriptor.
    pub(crate) fn segment(&self, conn: u64, handle: Handle) -> Result<LocalSegment, SciError> {
        self.resolve(
            conn,
            handle,
            Scope::Descriptor,
            "segment handle",
            |o| match o {
                Object::Segment(s) => Some(*s),
                _ => None,
            },
        )
    }

    /// `RemoveSegment`: a broadcast segment leaves its group as it goes.
    fn remove_segment(&mut self, conn: u64, segment: Handle) -> Result<Answer, RequestError> {
        let seg = self.segment(conn, segment)?;
        let memberships: Vec<Handle> = self
            .table
            .borrow()
            .objects
            .iter()
            .filter(|(_, (_, o))| matches!(o, Object::Member { seg: s, .. } if *s == seg))
            .map(|(h, _)| *h)
            .collect();
        for m in memberships {
            self.end(conn, m, "membership handle", |o| {
                matches!(o, Object::Member { .. })
            })?;
        }
        Ok(self.end(conn, segment, "segment handle", |o| {
            matches!(o, Object::Segment(_))
        })?)
    }

    /// `DisconnectSegment`: refused while the program maps the connection. A device
    /// segment's maps are the daemon's (a SISCI connection's maps are counted by the model,
    /// which refuses the same way).
    fn disconnect_segment(&mut self, conn: u64, remote: Handle) -> Result<Answer, RequestError> {
        let mapped = self
            .table
            .borrow()
            .objects
            .values()
            .filter(|(_, o)| matches!(o, Object::CpuMap { via, .. } if *via == remote))
            .count();
        if mapped > 0 {
            return Err(SciError::Busy {
                what: format!("connection {remote}"),
                users: format!("{mapped} maps"),
            }
            .into());
        }
        Ok(self.end(conn, remote, "connection handle", |o| {
            matches!(o, Object::Remote(_) | Object::DeviceRemote { .. })
        })?)
    }

    /// `MapRemote`: a SISCI connection's map lands in RAM (or is a broadcast window); a
    /// device segment's is [`Daemon::map_device_segment`]'s.
    fn map_remote(
        &mut self,
        conn: u64,
        host: HostId,
        remote: Handle,
        offset: u64,
        size: u64,
    ) -> Result<Answer, RequestError> {
        /// What a connection handle names.
        enum Connected {
            Sisci(RemoteSegment),
            Device(Segment),
        }
        let target = self.resolve(
            conn,
            remote,
            Scope::Descriptor,
            "connection handle",
            |o| match o {
                Object::Remote(r) => Some(Connected::Sisci(*r)),
                Object::DeviceRemote { seg, .. } => Some(Connected::Device(*seg)),
                _ => None,
            },
        )?;
        let r = match target {
            Connected::Sisci(r) => r,
            Connected::Device(seg) => {
                return self.map_device_segment(conn, host, remote, seg, offset, size)
            }
        };
        let sisci = self.smartio.sisci().clone();
        let map = sisci.map_remote(&r, offset, size)?;
        if matches!(r.target, LutTarget::Multicast(_)) {
            if let Err(e) = self.open_window(host, &map, size) {
                sisci.unmap(&map)?;
                return Err(e);
            }
            let id = map.id();
            let handle = self.keep(conn, Object::RemoteMap(map));
            return Ok(mapped(handle, 0, size, FileOf::Window(id)));
        }
        let landing = match self.landing(host, map.bus_addr(), size) {
            Ok(Landing::Ram { host, phys }) => Ok((FileOf::Ram(host), phys)),
            Ok(Landing::Bar { .. }) => Err(Refused::ConnectionToBar),
            Err(e) => Err(e),
        };
        let (file, at) = match landing {
            Ok(placed) => placed,
            Err(e) => {
                sisci.unmap(&map)?;
                return Err(e.into());
            }
        };
        let handle = self.keep(conn, Object::RemoteMap(map));
        Ok(mapped(handle, at, size, file))
    }

    /// `Flush`: a broadcast map's window delivers what it holds.
    fn flush(&mut self, conn: u64, map: Handle) -> Result<Answer, RequestError> {
        let id = self.resolve(conn, map, Scope::Descriptor, "map handle", |o| match o {
            Object::RemoteMap(m) => Some(Some(m.id())),
            Object::LocalMap(_) | Object::CpuMap { .. } => Some(None),
            _ => None,
        })?;
        if let Some(id) = id {
            if self.reflective.flush(id, &self.cluster.machine) {
                self.engine.advance();
            }
        }
        done(Reply::Done)
    }

    /// `WaitDataInterrupt`: answered by a task when a message arrives or the wait times out.
    fn wait_data_interrupt(
        &mut self,
        conn: u64,
        sisci: &Sisci,
        interrupt: Handle,
        timeout_ms: Option<u32>,
    ) -> Result<Answer, RequestError> {
        let intr = self.resolve(
            conn,
            interrupt,
            Scope::Descriptor,
            "interrupt handle",
            |o| match o {
                Object::Interrupt(i) => Some(*i),
                _ => None,
            },
        )?;
        // No timeout: the longest wait there is (durations saturate at ~213 days).
        let timeout = timeout_ms.map_or(SimDuration(u64::MAX), |ms| {
            SimDuration::from_us(u64::from(ms).saturating_mul(1_000))
        });
        let sisci = sisci.clone();
        self.answer_later(conn, Some(interrupt), async move {
            sisci
                .wait_data_interrupt(&intr, timeout)
                .await
                .map(Reply::Data)
        });
        Ok(None)
    }
}
