//! The multicast groups of the cluster switches as state: each group's size and members (the
//! overlay BARs that receive it), and how many groups the switches support. Creating, joining
//! and leaving groups is in [`crate::multicast`]; this module names no `Fabric`.

use crate::ids::{AdapterId, GroupId};
use serde::Serialize;

/// Multicast groups available when neither the scenario nor the calibration says otherwise.
pub const DEFAULT_GROUPS: u32 = 64;

/// One member of a group: the overlay BAR of an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Member {
    /// The adapter whose overlay receives the group's writes.
    pub adapter: AdapterId,
    /// Where group offset 0 lands in the member's host (a bus address there).
    pub overlay_base: u64,
    /// Bytes of the group the overlay covers.
    pub len: u64,
}

/// A group's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// Its id.
    pub id: GroupId,
    /// Group size in bytes (writes beyond it are not replicated).
    pub size: u64,
    /// Members, in join order.
    pub members: Vec<Member>,
}

/// The cluster's multicast groups.
#[derive(Debug, Clone, Default)]
pub struct Multicast {
    /// How many groups the switches support.
    pub(crate) limit: u32,
    /// Groups by id; `None` for a free slot. Invariant: at most `limit` slots.
    pub(crate) groups: Vec<Option<Group>>,
}

impl Multicast {
    /// A table of `limit` groups.
    pub fn new(limit: u32) -> Multicast {
        Multicast {
            limit,
            groups: Vec::new(),
        }
    }

    /// How many groups exist at most.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Groups in use.
    pub fn used(&self) -> usize {
        self.groups.iter().flatten().count()
    }

    /// A group by id.
    pub fn group(&self, id: GroupId) -> Option<&Group> {
        self.groups.get(id.0 as usize).and_then(Option::as_ref)
    }
}
