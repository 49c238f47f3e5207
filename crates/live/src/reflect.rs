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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Request;
    use crate::shm::Mapping;
    use smartio_calibration::Calibration;
    use std::time::Duration;

    /// The broadcast segment id and the members' size: larger than the largest window.
    const ID: u32 = 21;
    const SIZE: u64 = 8 << 20;

    fn ask(d: &mut Daemon, session: u64, request: Request) -> Reply {
        d.request(session, request, Duration::from_secs(5))
            .expect("an answer in time")
    }

    fn hello(d: &mut Daemon, host: &str) -> u64 {
        let s = d.open_session().expect("a session");
        let hello = Request::Hello {
            host: host.into(),
            attach: None,
        };
        assert!(matches!(ask(d, s, hello), Reply::Hello { .. }));
        s
    }

    /// A broadcast segment of `size` bytes made on `session`'s host: its handle and address.
    fn broadcast_segment(d: &mut Daemon, session: u64, size: u64) -> (Handle, u64) {
        match ask(d, session, Request::CreateSegment { id: Some(ID), size }) {
            Reply::Segment { handle, phys, .. } => (handle, phys),
            other => panic!("no segment: {other:?}"),
        }
    }

    /// Lets the engine run what is due (the CPU writes a delivery started).
    fn let_run(d: &Daemon) {
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(1));
            d.engine.advance();
        }
    }

    fn member_reads(d: &Daemon, host: &str, at: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        d.peek_ram(host, at, &mut buf).expect("a host");
        buf
    }

    #[test]
    fn stores_in_a_senders_window_reach_every_member_and_the_group_goes_with_its_last_user() {
        let dir = std::env::temp_dir().join(format!("smartio-live-reflect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory");
        let mut d = Daemon::up(
            "cluster-switch",
            &Calibration::default_embedded(),
            dir.join("cluster.sock").to_str().expect("utf-8"),
        )
        .expect("the daemon starts");
        let join = |segment| Request::JoinReflective {
            segment,
            adapter: 0,
        };
        let mut members = Vec::new();
        for host in ["lender", "lender2"] {
            let s = hello(&mut d, host);
            let (seg, phys) = broadcast_segment(&mut d, s, SIZE);
            assert_eq!(ask(&mut d, s, join(seg)), Reply::Done);
            members.push((host, s, seg, phys));
        }
        let sender = hello(&mut d, "borrower");
        let (other_size, _) = broadcast_segment(&mut d, sender, 2 * SIZE);
        assert!(
            matches!(ask(&mut d, sender, join(other_size)), Reply::Error { .. }),
            "a member of another size"
        );
        let connect = Request::ConnectReflective {
            segment_id: ID,
            adapter: 0,
        };
        let Reply::Remote {
            handle: remote,
            size,
        } = ask(&mut d, sender, connect.clone())
        else {
            panic!("not connected")
        };
        assert_eq!(size, SIZE);
        let map = |len| Request::MapRemote {
            remote,
            offset: 0,
            size: len,
        };
        assert!(
            matches!(
                ask(&mut d, sender, map(MAX_WINDOW_BYTES + 4096)),
                Reply::Error { .. }
            ),
            "a window larger than the daemon watches"
        );
        assert!(!d.reflective.watched());
        let Reply::Mapped { handle: map, .. } = ask(&mut d, sender, map(MAX_WINDOW_BYTES)) else {
            panic!("not mapped")
        };
        let id = match d.table.borrow().objects.get(&map) {
            Some((_, Object::RemoteMap(m))) => m.id(),
            _ => panic!("no map"),
        };
        let window = Mapping::new(
            d.reflective.fd(id).expect("the window's file"),
            0,
            MAX_WINDOW_BYTES,
        )
        .expect("maps");
        assert!(d.reflective.watched());

        // Two runs of stores with two untouched 64-byte chunks between them, where lender2
        // wrote into its own copy: that stays.
        let (first, gap, second) = (130, 200, 330);
        d.poke_ram("lender2", members[1].3 + gap, b"lender2's own")
            .expect("a host");
        window.write(first, b"the first run");
        window.write(second, b"the second run");
        assert!(d.reflective.poll(&d.cluster.machine), "stores delivered");
        assert!(!d.reflective.poll(&d.cluster.machine), "nothing new");
        let_run(&d);
        for &(host, _, _, phys) in &members {
            assert_eq!(member_reads(&d, host, phys + first, 13), b"the first run");
            assert_eq!(member_reads(&d, host, phys + second, 14), b"the second run");
        }
        assert_eq!(
            member_reads(&d, "lender2", members[1].3 + gap, 13),
            b"lender2's own"
        );
        // A store barrier delivers at once; unmapping delivers what is left.
        let near_end = MAX_WINDOW_BYTES - 100;
        window.write(near_end, b"before the barrier");
        assert_eq!(ask(&mut d, sender, Request::Flush { map }), Reply::Done);
        let_run(&d);
        for &(host, _, _, phys) in &members {
            assert_eq!(
                member_reads(&d, host, phys + near_end, 18),
                b"before the barrier"
            );
        }
        window.write(1000, b"before the unmap");
        assert_eq!(ask(&mut d, sender, Request::Unmap { map }), Reply::Done);
        let_run(&d);
        for &(host, _, _, phys) in &members {
            assert_eq!(member_reads(&d, host, phys + 1000, 16), b"before the unmap");
        }
        assert!(!d.reflective.watched(), "no window left");

        // The group stays while a member or a sender is left.
        let disconnect = |d: &mut Daemon, remote| {
            assert_eq!(
                ask(d, sender, Request::DisconnectSegment { remote }),
                Reply::Done
            );
        };
        disconnect(&mut d, remote);
        let groups = |d: &Daemon| d.cluster.machine.fabric().multicast().used();
        assert_eq!(groups(&d), 1, "two members left");
        let Reply::Remote { handle: again, .. } = ask(&mut d, sender, connect.clone()) else {
            panic!("the group is still there to connect to")
        };
        let (host, s, seg, _) = members[0];
        assert_eq!(
            ask(&mut d, s, Request::RemoveSegment { segment: seg }),
            Reply::Done,
            "{host}"
        );
        assert_eq!(groups(&d), 1, "a member left");
        let (_, s, seg, _) = members[1];
        assert_eq!(
            ask(&mut d, s, Request::RemoveSegment { segment: seg }),
            Reply::Done
        );
        assert_eq!(groups(&d), 1, "a sender left");
        disconnect(&mut d, again);
        assert_eq!(groups(&d), 0, "gone with its last user");
        assert!(
            matches!(ask(&mut d, sender, connect.clone()), Reply::Error { .. }),
            "no group to connect to"
        );
        // The id's next member makes a group anew.
        let s = hello(&mut d, "lender");
        let (seg, _) = broadcast_segment(&mut d, s, SIZE);
        assert_eq!(ask(&mut d, s, join(seg)), Reply::Done);
        assert_eq!(groups(&d), 1);
        assert!(
            matches!(ask(&mut d, sender, connect), Reply::Remote { .. }),
            "a sender of the new group"
        );
    }
}
