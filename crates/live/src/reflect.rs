//! Reflective memory (SISCI's broadcast segments) on the live engine, over the fabric's
//! multicast groups (Paper V §6.5, `fabric::multicast`, `smartio::sisci::multicast`).
//!
//! ```text
//!   member:  SCICreateSegment(id, SCI_FLAG_BROADCAST) ─► SCIPrepareSegment   (JoinReflective)
//!   sender:  SCIConnectSegment(DIS_BROADCAST_NODEID_GROUP_ALL, id, SCI_FLAG_BROADCAST)
//!            (ConnectReflective) ─► SCIMapRemoteSegment ─► stores ─► every member's copy
//! ```
//!
//! Every broadcast segment with one id is a member of one group, made when the first member
//! joins and removed when the last member and the last sender are gone; members have the
//! group's size. A sender's map is a *window*: a memory file the program maps, which the
//! daemon watches (as it watches register pages, [`crate::pages`]). Whatever the program
//! stored there since the last look is written by the sender host's CPU through its map —
//! the adapter's look-up table sends it to the group, the switches replicate it to every
//! member but the sender's own adapter, each member's overlay puts it in its segment — so a
//! member behind a link that is down misses it, as on the timed engine. A store barrier
//! (`Flush`) delivers what the window holds at once, so stores after it arrive after those
//! before it; between two looks, stores arrive in address order, and a store of the value
//! the window already shows is not seen.

use crate::daemon::{Answer, Daemon, Object};
use crate::protocol::{Handle, Reply};
use crate::refusal::{Refused, RequestError};
use crate::shm::{Mapping, ShmError};
use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
use smartio_fabric::{GroupId, HostId, LutTarget};
use smartio_machine::Machine;
use smartio_platform::{BusAddr, Port};
use smartio_smartio::sisci::{LocalSegment, RemoteMap, RemoteSegment};
use smartio_smartio::SciError;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The largest window a sender maps (the daemon compares it with what it last saw at every
/// look).
pub const MAX_WINDOW_BYTES: u64 = 4 << 20;

/// Bytes compared at a time; a run of changed chunks is one write.
const CHUNK: usize = 64;

/// The group of one broadcast segment id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub(crate) group: GroupId,
    pub(crate) size: u64,
    members: u32,
    senders: u32,
}

/// A sender's map, as a memory file.
struct Window {
    file: OwnedFd,
    map: Mapping,
    /// What the daemon last saw.
    shadow: Vec<u8>,
    host: HostId,
    /// The map's bus address (the sender's window onto the group).
    bus: BusAddr,
}

/// The cluster's broadcast groups and senders' windows.
#[derive(Default)]
pub(crate) struct Reflective {
    groups: BTreeMap<u32, Group>,
    /// Windows by the id of the sender's map.
    windows: BTreeMap<u32, Window>,
}

impl Reflective {
    /// The group of broadcast segment `id`, if one exists.
    pub(crate) fn group(&self, id: u32) -> Option<Group> {
        self.groups.get(&id).copied()
    }

    /// The memory file of a window.
    pub(crate) fn fd(&self, map: u32) -> Option<BorrowedFd<'_>> {
        self.windows.get(&map).map(|w| w.file.as_fd())
    }

    /// Whether a window is watched (the daemon then looks often).
    pub(crate) fn watched(&self) -> bool {
        !self.windows.is_empty()
    }

    /// Delivers what every window holds that the daemon has not seen; whether anything was.
    pub(crate) fn poll(&mut self, machine: &Machine) -> bool {
        let mut any = false;
        for w in self.windows.values_mut() {
            any |= w.deliver(machine);
        }
        any
    }

    /// Delivers what one window holds now.
    pub(crate) fn flush(&mut self, map: u32, machine: &Machine) -> bool {
        self.windows
            .get_mut(&map)
            .is_some_and(|w| w.deliver(machine))
    }
}

impl Window {
    fn new(host: HostId, bus: BusAddr, len: u64) -> Result<Window, ShmError> {
        let size = len.max(4096).next_multiple_of(4096);
        let error = |source| ShmError::Create {
            name: "broadcast window".into(),
            size,
            source,
        };
        let file = memfd_create("smartio-broadcast", MemfdFlags::CLOEXEC).map_err(error)?;
        ftruncate(&file, size).map_err(error)?;
        let map = Mapping::new(file.as_fd(), 0, size)?;
        Ok(Window {
            file,
            map,
            shadow: vec![0; len as usize],
            host,
            bus,
        })
    }

    /// Writes every run of changed bytes through the sender's map, in address order.
    fn deliver(&mut self, machine: &Machine) -> bool {
        let mut now = vec![0u8; self.shadow.len()];
        self.map.read(0, &mut now);
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, (a, b)) in now.chunks(CHUNK).zip(self.shadow.chunks(CHUNK)).enumerate() {
            if a == b {
                continue;
            }
            let start = i * CHUNK;
            let end = start + a.len();
            match runs.last_mut() {
                Some((_, e)) if *e == start => *e = end,
                _ => runs.push((start, end)),
            }
        }
        if runs.is_empty() {
            return false;
        }
        let cpu = machine.cpu(self.host);
        let writes: Vec<(BusAddr, Vec<u8>)> = runs
            .iter()
            .map(|&(s, e)| (self.bus.offset(s as u64), now[s..e].to_vec()))
            .collect();
        self.shadow = now;
        machine.spawn(async move {
            for (at, bytes) in writes {
                // A member that cannot take it misses it; the sender is not told (posted).
                let _ = cpu.write(at, &bytes).await;
            }
        });
        true
    }
}

impl Daemon {
    /// `JoinReflective`: the broadcast segment `handle` receives its id's group through
    /// `adapter` (the group is made by its first member, with that member's size).
    pub(crate) fn join_reflective(
        &mut self,
        conn: u64,
        handle: Handle,
        adapter: u32,
    ) -> Result<Answer, RequestError> {
        let seg: LocalSegment = self.segment(conn, handle)?;
        let sisci = self.smartio.sisci().clone();
        let existing = self.reflective.group(seg.id);
        let group = match existing {
            Some(g) if g.size != seg.size => {
                return Err(Refused::GroupSize {
                    segment: seg.id,
                    size: seg.size,
                    group: g.size,
                }
                .into())
            }
            Some(g) => g.group,
            None => sisci.create_multicast_group(seg.size)?,
        };
        if let Err(e) = sisci.join_multicast(&seg, adapter, group) {
            if existing.is_none() {
                let _ = sisci.remove_multicast_group(group);
            }
            return Err(e.into());
        }
        self.reflective
            .groups
            .entry(seg.id)
            .or_insert(Group {
                group,
                size: seg.size,
                members: 0,
                senders: 0,
            })
            .members += 1;
        self.keep(
            conn,
            Object::Member {
                seg,
                adapter,
                id: seg.id,
            },
        );
        Ok(Some((Reply::Done, None)))
    }

    /// `ConnectReflective`: `host`'s adapter `adapter` sends to broadcast segment `id`'s
    /// group.
    pub(crate) fn connect_reflective(
        &mut self,
        conn: u64,
        host: HostId,
        id: u32,
        adapter: u32,
    ) -> Result<Answer, RequestError> {
        let g = self
            .reflective
            .group(id)
            .ok_or_else(|| SciError::NoSuchSegment {
                node_id: smartio_fabric::ClusterNodeId(BROADCAST_NODE_ID),
                host: "the broadcast group".into(),
                id,
            })?;
        let remote = self
            .smartio
            .sisci()
            .connect_multicast(host, adapter, g.group)?;
        if let Some(g) = self.reflective.groups.get_mut(&id) {
            g.senders += 1;
        }
        let handle = self.keep(conn, Object::Remote(remote));
        Ok(Some((
            Reply::Remote {
                handle,
                size: remote.size,
            },
            None,
        )))
    }

    /// A sender's map of `size` bytes: a window the daemon watches.
    pub(crate) fn open_window(
        &mut self,
        host: HostId,
        map: &RemoteMap,
        size: u64,
    ) -> Result<(), RequestError> {
        if size > MAX_WINDOW_BYTES {
            return Err(SciError::OutOfRange {
                what: "broadcast map (the live engine watches at most 4 MiB of one)",
                offset: 0,
                len: size,
                size: MAX_WINDOW_BYTES,
            }
            .into());
        }
        let w = Window::new(host, map.bus_addr(), size).map_err(Refused::WindowFile)?;
        self.reflective.windows.insert(map.id(), w);
        Ok(())
    }

    /// Closes the window of `map` (if it has one), delivering what it holds first.
    pub(crate) fn close_window(&mut self, map: &RemoteMap) {
        let w = self.reflective.windows.remove(&map.id());
        if let Some(mut w) = w {
            if w.deliver(&self.cluster.machine) {
                // Run the writes now, while the map still routes.
                self.engine.advance();
            }
        }
    }

    /// A member leaves (its segment is removed or its program left); the group goes with
    /// its last member and sender.
    pub(crate) fn leave_reflective(
        &mut self,
        seg: &LocalSegment,
        adapter: u32,
        id: u32,
    ) -> Result<(), SciError> {
        let Some(g) = self.reflective.group(id) else {
            return Ok(());
        };
        self.smartio
            .sisci()
            .leave_multicast(seg, adapter, g.group)?;
        self.forget_group_user(id, true);
        Ok(())
    }

    /// A sender's connection ended.
    pub(crate) fn sender_gone(&mut self, remote: &RemoteSegment) {
        let LutTarget::Multicast(group) = remote.target else {
            return;
        };
        let id = self
            .reflective
            .groups
            .iter()
            .find(|(_, g)| g.group == group)
            .map(|(id, _)| *id);
        if let Some(id) = id {
            self.forget_group_user(id, false);
        }
    }

    fn forget_group_user(&mut self, id: u32, member: bool) {
        let r = &mut self.reflective;
        let Some(g) = r.groups.get_mut(&id) else {
            return;
        };
        if member {
            g.members = g.members.saturating_sub(1);
        } else {
            g.senders = g.senders.saturating_sub(1);
        }
        if g.members == 0 && g.senders == 0 {
            let group = g.group;
            r.groups.remove(&id);
            let _ = self.smartio.sisci().remove_multicast_group(group);
        }
    }
}

/// `DIS_BROADCAST_NODEID_GROUP_ALL`: the node id a broadcast connection names.
pub const BROADCAST_NODE_ID: u32 = 252;
