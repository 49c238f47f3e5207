//! PCIe multicast across the cluster switches (Paper V §6.5).
//!
//! The multicast address range is divided into equally treated groups. A write that an
//! adapter's look-up table sends to a group is replicated by the switch hardware out of every
//! port with a member (never back out of the port it came in on). At each member adapter an
//! overlay BAR replaces the group address by a base in the member's own address space, so
//! endpoints without multicast support (host RAM, a GPU BAR) receive it as a plain write.

use crate::fabric::Fabric;
use crate::ids::AdapterId;
use thiserror::Error;

pub use crate::ids::GroupId;
pub use crate::multicast_groups::{Group, Member, Multicast, DEFAULT_GROUPS};

/// Why a multicast operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MulticastError {
    /// The member's overlay range runs past the end of the 64-bit address space.
    #[error("adapter {adapter}: an overlay of {len} bytes at {base:#x} runs past the end of the 64-bit address space")]
    BeyondAddressSpace {
        /// Adapter name.
        adapter: String,
        /// Overlay base address.
        base: u64,
        /// Overlay length (at most the group size).
        len: u64,
    },
    /// Every group is in use.
    #[error("multicast groups exhausted: all {limit} groups of the cluster switches are in use")]
    GroupsExhausted {
        /// How many groups the switches support.
        limit: u32,
    },
    /// No such group.
    #[error("multicast group {0:?} does not exist")]
    UnknownGroup(GroupId),
    /// The adapter already receives this group.
    #[error("adapter {adapter} is already a member of multicast group {group:?}")]
    AlreadyMember {
        /// Adapter name.
        adapter: String,
        /// The group.
        group: GroupId,
    },
    /// The adapter is not a member.
    #[error("adapter {adapter} is not a member of multicast group {group:?}")]
    NotMember {
        /// Adapter name.
        adapter: String,
        /// The group.
        group: GroupId,
    },
    /// The group still has members.
    #[error("multicast group {group:?} still has {members} members")]
    Busy {
        /// The group.
        group: GroupId,
        /// Members left.
        members: usize,
    },
}

impl Fabric {
    /// The cluster's multicast groups.
    pub fn multicast(&self) -> &Multicast {
        &self.multicast
    }

    /// Sets how many multicast groups the switches support (call before creating groups).
    pub fn set_multicast_groups(&mut self, limit: u32) {
        self.multicast = Multicast::new(limit);
    }

    /// Creates a group of `size` bytes.
    pub fn multicast_create(&mut self, size: u64) -> Result<GroupId, MulticastError> {
        let m = &mut self.multicast;
        let slot = match m.groups.iter().position(Option::is_none) {
            Some(i) => i,
            None if (m.groups.len() as u32) < m.limit => {
                m.groups.push(None);
                m.groups.len() - 1
            }
            None => return Err(MulticastError::GroupsExhausted { limit: m.limit }),
        };
        let id = GroupId(slot as u32);
        m.groups[slot] = Some(Group {
            id,
            size,
            members: Vec::new(),
        });
        Ok(id)
    }

    /// Removes an empty group.
    pub fn multicast_remove(&mut self, id: GroupId) -> Result<(), MulticastError> {
        let slot = self
            .multicast
            .groups
            .get_mut(id.0 as usize)
            .filter(|g| g.is_some())
            .ok_or(MulticastError::UnknownGroup(id))?;
        if let Some(g) = slot.as_ref().filter(|g| !g.members.is_empty()) {
            return Err(MulticastError::Busy {
                group: id,
                members: g.members.len(),
            });
        }
        *slot = None;
        Ok(())
    }

    /// Makes `adapter` receive the group: its overlay BAR maps group offset 0.. onto
    /// `overlay_base..overlay_base + len` of its host (a member receives at most the group's
    /// size, so `len` beyond it maps nothing more). The overlay must end by 2^64.
    pub fn multicast_join(
        &mut self,
        id: GroupId,
        adapter: AdapterId,
        overlay_base: u64,
        len: u64,
    ) -> Result<(), MulticastError> {
        let name = self.adapter_name(adapter);
        let g = self.group_mut(id)?;
        if g.members.iter().any(|m| m.adapter == adapter) {
            return Err(MulticastError::AlreadyMember {
                adapter: name,
                group: id,
            });
        }
        let len = len.min(g.size);
        if u128::from(overlay_base) + u128::from(len) > 1 << 64 {
            return Err(MulticastError::BeyondAddressSpace {
                adapter: name,
                base: overlay_base,
                len,
            });
        }
        g.members.push(Member {
            adapter,
            overlay_base,
            len,
        });
        Ok(())
    }

    /// Stops `adapter` receiving the group.
    pub fn multicast_leave(
        &mut self,
        id: GroupId,
        adapter: AdapterId,
    ) -> Result<(), MulticastError> {
        let name = self.adapter_name(adapter);
        let g = self.group_mut(id)?;
        let i = g.members.iter().position(|m| m.adapter == adapter).ok_or(
            MulticastError::NotMember {
                adapter: name,
                group: id,
            },
        )?;
        g.members.remove(i);
        Ok(())
    }

    fn group_mut(&mut self, id: GroupId) -> Result<&mut Group, MulticastError> {
        self.multicast
            .groups
            .get_mut(id.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(MulticastError::UnknownGroup(id))
    }
}
