//! An NTB adapter's state: its window, its look-up table and its requester-id table, and the
//! constants and sizes they are made with. What the fabric does with them (mapping, routing
//! across, cable paths) is in [`crate::ntb`]; this module names no `Fabric`.

use crate::ids::{AdapterId, EndpointId, GroupId, HostId, LinkId, NodeId, Requester};
use serde::Serialize;
use std::fmt;
use std::ops::Range;

/// The BAR of an NTB adapter's function that holds the translation window.
pub const WINDOW_BAR: u8 = 2;

/// Requester-id entries every adapter reserves for its own host's CPU: one for requests and
/// one for the shared-memory driver's own traffic (Paper V §8.6: "two mappings are reserved
/// for each of the CPUs").
pub const CPU_RESERVED_REQUESTER_IDS: u32 = 2;

/// A cluster-wide NTB node id, as SISCI numbers adapters (4, 8, 12, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ClusterNodeId(pub u32);

impl fmt::Display for ClusterNodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Sizes of an adapter's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NtbTableSizes {
    /// Look-up-table entries the window is split into.
    pub lut_entries: u32,
    /// Requester-id table entries.
    pub requester_ids: u32,
}

/// Table sizes used when neither the scenario nor the calibration gives them (PXH830-like).
pub const DEFAULT_TABLE_SIZES: NtbTableSizes = NtbTableSizes {
    lut_entries: 64,
    requester_ids: 32,
};

/// What a look-up-table entry translates to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LutTarget {
    /// The address space of the host behind another adapter (the far side of the cable).
    Adapter(AdapterId),
    /// A multicast group: the switch replicates writes to every member.
    Multicast(GroupId),
}

/// One valid look-up-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LutEntry {
    /// Where it points.
    pub target: LutTarget,
    /// Far-side base address, aligned to the entry size.
    pub remote_base: u64,
    /// The mapping that owns the entry (see [`NtbMapping::id`]).
    pub mapping: u64,
}

/// A run of consecutive entries set up by one [`Fabric::ntb_map`](crate::Fabric::ntb_map) call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NtbMapping {
    /// Identity, unique within the fabric: a stale handle cannot remove newer entries.
    pub id: u64,
    /// The adapter whose table holds it.
    pub adapter: AdapterId,
    /// First entry.
    pub first_entry: u32,
    /// Number of entries.
    pub entries: u32,
    /// Local bus address of the first mapped byte (inside the adapter's window).
    pub bus_addr: u64,
    /// Mapped length in bytes.
    pub len: u64,
}

/// An NTB adapter: its function in the host, its cable, and its tables.
///
/// Invariant: `lut.len()` is the entry count and `entry_size * lut.len() <= window.len()`;
/// `requesters.len()` is the requester-id table size and the first
/// [`CPU_RESERVED_REQUESTER_IDS`] entries belong to the host CPU.
#[derive(Debug, Clone)]
pub struct NtbAdapter {
    /// The adapter's endpoint function.
    pub endpoint: EndpointId,
    /// Its graph node.
    pub node: NodeId,
    /// Its host.
    pub host: HostId,
    /// Cluster-wide node id.
    pub node_id: ClusterNodeId,
    /// Adapter number within its host (0, 1, ... in declaration order).
    pub number: u32,
    /// Chip model.
    pub chip: String,
    /// The window's bus addresses in the host.
    pub window: Range<u64>,
    /// Bytes each look-up-table entry translates.
    pub entry_size: u64,
    /// The cable, if connected.
    pub cable: Option<LinkId>,
    pub(crate) lut: Vec<Option<LutEntry>>,
    pub(crate) requesters: Vec<Option<(Requester, u32)>>,
    /// Whether the scenario gave the look-up-table and the requester-id table sizes (the
    /// calibration does not override those).
    pub(crate) sizes_from_scenario: (bool, bool),
}

impl NtbAdapter {
    /// The look-up table.
    pub fn lut(&self) -> &[Option<LutEntry>] {
        &self.lut
    }

    /// Valid look-up-table entries.
    pub fn lut_used(&self) -> usize {
        self.lut.iter().filter(|e| e.is_some()).count()
    }

    /// Requester-id table size.
    pub fn requester_ids(&self) -> usize {
        self.requesters.len()
    }

    /// Requester-id entries in use (the CPU's reserved ones included).
    pub fn requester_ids_used(&self) -> usize {
        self.requesters.iter().filter(|e| e.is_some()).count()
    }

    /// Whether `requester` may send non-posted requests through this adapter.
    pub fn has_requester(&self, requester: Requester) -> bool {
        self.requesters
            .iter()
            .flatten()
            .any(|&(r, _)| r == requester)
    }

    /// Translates a local bus address inside the window: the entry, its target and the
    /// far-side address, or `None` when the address is outside the window or its entry is not
    /// valid.
    pub fn translate(&self, bus_addr: u64) -> Option<(u32, LutTarget, u64)> {
        if !self.window.contains(&bus_addr) {
            return None;
        }
        let offset = bus_addr - self.window.start;
        let slot = offset / self.entry_size;
        let entry = self.lut.get(slot as usize)?.as_ref()?;
        Some((
            slot as u32,
            entry.target,
            entry.remote_base + offset % self.entry_size,
        ))
    }

    /// The local bus addresses that map onto `remote` through `target`: the reverse of
    /// [`NtbAdapter::translate`], one per valid entry covering it.
    pub fn reverse_translate(&self, target: LutTarget, remote: u64) -> Vec<u64> {
        self.lut
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let e = e.as_ref()?;
                // `remote - remote_base < entry_size`, written so that an entry ending at 2^64
                // does not overflow.
                let covers = e.target == target
                    && remote >= e.remote_base
                    && remote - e.remote_base < self.entry_size;
                covers.then(|| {
                    self.window.start + i as u64 * self.entry_size + (remote - e.remote_base)
                })
            })
            .collect()
    }

    /// Sizes the tables. The sizes come from a validated scenario or calibration (at least
    /// one entry, at most 4096; at least the CPU's reserved requester ids), so the `max`
    /// calls below change nothing for them; they only keep a hand-made call well-defined.
    pub(crate) fn resize(&mut self, sizes: NtbTableSizes) {
        let entries = sizes.lut_entries.max(1) as u64;
        let window = self.window.end - self.window.start;
        // Entries are a power of two in size (the low bits pass through untranslated).
        let raw = (window / entries).max(1);
        self.entry_size = 1 << (63 - raw.leading_zeros());
        self.lut = vec![None; entries as usize];
        self.requesters = vec![None; sizes.requester_ids.max(CPU_RESERVED_REQUESTER_IDS) as usize];
        for slot in &mut self.requesters[..CPU_RESERVED_REQUESTER_IDS as usize] {
            *slot = Some((Requester::Cpu(self.host), 1));
        }
    }
}
