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

use crate::answer::Answer;
use crate::daemon::Daemon;
use crate::objects::Object;
use crate::protocol::{Handle, Reply};
use crate::reflective::{Group, Window, MAX_WINDOW_BYTES};
use crate::refusal::{Refused, RequestError};
use smartio_fabric::{HostId, LutTarget};
use smartio_smartio::sisci::{LocalSegment, RemoteMap, RemoteSegment};
use smartio_smartio::SciError;

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
