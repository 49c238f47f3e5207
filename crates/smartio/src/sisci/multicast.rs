//! Multicast segments (Paper V §6.5): a group whose members are local segments of many hosts,
//! and connections that write to all of them at once.
//!
//! ```text
//!   create_multicast_group(size)
//!   every receiver:  join_multicast(segment, adapter, group)    overlay BAR -> its segment
//!   the sender:      connect_multicast(host, adapter, group) -> map_remote -> store
//! ```
//!
//! One store through the sender's map is replicated by the cluster switches into every
//! member's segment except the sender's own adapter.

use super::{Connection, LocalSegment, RemoteSegment, SciError, Sisci};
use smartio_fabric::{GroupId, HostId, LutTarget};

impl Sisci {
    /// Creates a multicast group of `size` bytes; fails when the switches' groups are used up.
    pub fn create_multicast_group(&self, size: u64) -> Result<GroupId, SciError> {
        Ok(self.machine.with_fabric_mut(|f| f.multicast_create(size))?)
    }

    /// Removes a group without members.
    pub fn remove_multicast_group(&self, group: GroupId) -> Result<(), SciError> {
        Ok(self
            .machine
            .with_fabric_mut(|f| f.multicast_remove(group))?)
    }

    /// Makes `seg` receive the group's writes through its host's adapter `adapter` (the
    /// segment is prepared there if it is not yet).
    pub fn join_multicast(
        &self,
        seg: &LocalSegment,
        adapter: u32,
        group: GroupId,
    ) -> Result<(), SciError> {
        self.prepare_segment(seg, adapter)?;
        let aid = self.adapter(seg.host, adapter)?;
        self.machine
            .with_fabric_mut(|f| f.multicast_join(group, aid, seg.phys.get(), seg.size))?;
        self.with_segment(seg, |s| {
            s.groups.insert((group, aid));
            Ok(())
        })
    }

    /// Stops `seg` receiving the group. Only the segment that joined through `adapter` can
    /// leave: another segment of the same host is [`SciError::NotMember`], and the adapter
    /// stays in the group.
    pub fn leave_multicast(
        &self,
        seg: &LocalSegment,
        adapter: u32,
        group: GroupId,
    ) -> Result<(), SciError> {
        let aid = self.adapter(seg.host, adapter)?;
        let host = self.host_name(seg.host);
        self.with_segment(seg, |s| {
            if s.groups.contains(&(group, aid)) {
                Ok(())
            } else {
                Err(SciError::NotMember {
                    host,
                    id: s.seg.id,
                    adapter,
                    group: group.0,
                })
            }
        })?;
        self.machine
            .with_fabric_mut(|f| f.multicast_leave(group, aid))?;
        self.with_segment(seg, |s| {
            s.groups.remove(&(group, aid));
            Ok(())
        })
    }

    /// Connects `host`'s adapter `adapter` to a group, for sending; map it with
    /// [`Sisci::map_remote`].
    pub fn connect_multicast(
        &self,
        host: HostId,
        adapter: u32,
        group: GroupId,
    ) -> Result<RemoteSegment, SciError> {
        let aid = self.adapter(host, adapter)?;
        let size = self
            .machine
            .fabric()
            .multicast()
            .group(group)
            .map(|g| g.size)
            .ok_or(smartio_fabric::MulticastError::UnknownGroup(group))?;
        let id = self.next_id();
        let remote = RemoteSegment {
            id,
            host,
            adapter: aid,
            target: LutTarget::Multicast(group),
            size,
        };
        self.state.borrow_mut().connections.insert(
            id,
            Connection {
                remote,
                segment: None,
                remote_base: 0,
                maps: 0,
            },
        );
        Ok(remote)
    }
}
