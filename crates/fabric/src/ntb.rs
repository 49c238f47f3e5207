//! Non-transparent bridges: the look-up tables that translate one host's addresses into
//! another's, the requester-id tables that let completions find their way back, cluster-wide
//! node ids. (The cable paths between adapters are in `crate::cables`.)
//!
//! An adapter's window BAR is split into equally sized look-up-table entries. An entry maps its
//! slice of the window onto an equally sized, aligned region of a far-side address space: the
//! address space of the host behind another adapter, or a multicast group. An access to an
//! entry that maps nothing is an Unsupported Request; so is a read by a requester that has no
//! entry in the adapter's requester-id table (its completion could not be routed back).
//!
//! ```text
//!   local window  [ entry 0 | entry 1 | entry 2 | ... ]      entry_size = window / entries
//!                             │
//!                             └──► far address space: remote_base .. remote_base + entry_size
//! ```

use crate::ids::{EndpointId, HostId, LinkId, NodeId, Requester};
use crate::multicast::GroupId;
use crate::topology::{Fabric, NodeKind};
use crate::units::format_size;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use thiserror::Error;

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

/// The index of an adapter in the fabric's adapter table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct AdapterId(pub u32);

impl AdapterId {
    /// The index into the adapter table.
    pub const fn index(self) -> usize {
        self.0 as usize
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

/// A run of consecutive entries set up by one [`Fabric::ntb_map`] call.
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
    lut: Vec<Option<LutEntry>>,
    requesters: Vec<Option<(Requester, u32)>>,
    sizes_from_scenario: (bool, bool),
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
}

/// Why an NTB table operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NtbError {
    /// The look-up table has no run of free entries long enough.
    #[error("NTB adapter {adapter} (node id {node_id}): look-up table full: {needed} more entries of {entry_size} needed, {free} of {limit} free")]
    LutFull {
        /// Adapter name (`host.component`).
        adapter: String,
        /// Its node id.
        node_id: ClusterNodeId,
        /// Entries the mapping needs.
        needed: u64,
        /// Entries free (not necessarily consecutive).
        free: u32,
        /// Table size.
        limit: u32,
        /// Entry size, formatted.
        entry_size: String,
    },
    /// The requester-id table is full.
    #[error("NTB adapter {adapter}: requester-id table full ({limit} entries)")]
    RequesterTableFull {
        /// Adapter name.
        adapter: String,
        /// Table size.
        limit: u32,
    },
    /// The requester has no entry to remove.
    #[error("NTB adapter {adapter}: requester {requester:?} has no entry")]
    UnknownRequester {
        /// Adapter name.
        adapter: String,
        /// The requester.
        requester: Requester,
    },
    /// No adapter with this id.
    #[error("no NTB adapter {0:?}")]
    UnknownAdapter(AdapterId),
    /// The mapping is not (or no longer) in the table.
    #[error("NTB adapter {adapter}: entries {first}..{end} are not one mapping")]
    NotMapped {
        /// Adapter name.
        adapter: String,
        /// First entry.
        first: u32,
        /// One past the last entry.
        end: u32,
    },
    /// The two adapters are not connected by cables (and cluster switches).
    #[error("NTB adapters {from} and {to} are not connected")]
    NoPath {
        /// Local adapter.
        from: String,
        /// Far adapter.
        to: String,
    },
    /// A zero-length mapping.
    #[error("zero-length NTB mapping")]
    Empty,
    /// The far range runs past the end of the 64-bit address space.
    #[error("NTB adapter {adapter}: {len} bytes at {remote:#x} run past the end of the 64-bit address space")]
    BeyondAddressSpace {
        /// Adapter name.
        adapter: String,
        /// Far-side start address.
        remote: u64,
        /// Length in bytes.
        len: u64,
    },
}

impl Fabric {
    /// Collects the NTB adapters after enumeration: node ids, numbers, windows, tables.
    pub(crate) fn collect_adapters(&mut self) {
        let mut per_host: BTreeMap<HostId, u32> = BTreeMap::new();
        let mut adapters = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let NodeKind::Ntb { endpoint, spec } = &node.kind else {
                continue;
            };
            let ep = &self.endpoints[endpoint.index()];
            let window = ep
                .bars
                .iter()
                .find(|b| b.index == WINDOW_BAR)
                .map_or(0..0, |b| b.range());
            let number = per_host.entry(ep.host).or_default();
            let sizes = NtbTableSizes {
                lut_entries: spec.lut_entries.unwrap_or(DEFAULT_TABLE_SIZES.lut_entries),
                requester_ids: spec
                    .requester_ids
                    .unwrap_or(DEFAULT_TABLE_SIZES.requester_ids),
            };
            let mut a = NtbAdapter {
                endpoint: *endpoint,
                node: NodeId(i as u32),
                host: ep.host,
                node_id: ClusterNodeId(4 * (adapters.len() as u32 + 1)),
                number: *number,
                chip: spec.chip.clone(),
                window,
                entry_size: 0,
                cable: node.cables.first().copied(),
                lut: Vec::new(),
                requesters: Vec::new(),
                sizes_from_scenario: (spec.lut_entries.is_some(), spec.requester_ids.is_some()),
            };
            a.resize(sizes);
            *number += 1;
            adapters.push(a);
        }
        self.adapter_by_endpoint = vec![None; self.endpoints.len()];
        for (i, a) in adapters.iter().enumerate() {
            self.adapter_by_endpoint[a.endpoint.index()] = Some(AdapterId(i as u32));
        }
        self.adapters = adapters;
        self.link_up = vec![true; self.links.len()];
        self.cable_paths = crate::cables::CablePaths::build(self);
    }

    /// Sets table sizes from the calibration for every adapter whose scenario entry left them
    /// out. Call before any mapping is made; existing entries are dropped.
    pub fn configure_ntb_tables(&mut self, sizes: impl Fn(&str) -> NtbTableSizes) {
        for a in &mut self.adapters {
            let from_cal = sizes(&a.chip);
            let mut s = NtbTableSizes {
                lut_entries: a.lut.len() as u32,
                requester_ids: a.requesters.len() as u32,
            };
            if !a.sizes_from_scenario.0 {
                s.lut_entries = from_cal.lut_entries;
            }
            if !a.sizes_from_scenario.1 {
                s.requester_ids = from_cal.requester_ids;
            }
            a.resize(s);
        }
    }

    /// All NTB adapters, in node-id order.
    pub fn adapters(&self) -> &[NtbAdapter] {
        &self.adapters
    }

    /// How much of every table SmartIO takes from is in use: per adapter (look-up-table
    /// entries, requester ids), and per host the pages mapped in each IOMMU domain. Equal
    /// snapshots mean nothing was left taken in between.
    pub fn tables_in_use(&self) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
        let adapters = self
            .adapters
            .iter()
            .map(|a| (a.lut_used(), a.requester_ids_used()))
            .collect();
        let iommu = self
            .hosts()
            .iter()
            .map(|h| {
                (0..)
                    .map_while(|d| h.iommu.mapped_pages(crate::DomainId(d)).ok())
                    .collect()
            })
            .collect();
        (adapters, iommu)
    }

    /// One adapter.
    pub fn adapter(&self, id: AdapterId) -> &NtbAdapter {
        &self.adapters[id.index()]
    }

    /// The adapter of an NTB endpoint.
    pub fn adapter_of(&self, endpoint: EndpointId) -> Option<AdapterId> {
        self.adapter_by_endpoint
            .get(endpoint.index())
            .copied()
            .flatten()
    }

    /// The adapter with a cluster-wide node id.
    pub fn adapter_by_node_id(&self, node_id: ClusterNodeId) -> Option<AdapterId> {
        self.adapters
            .iter()
            .position(|a| a.node_id == node_id)
            .map(|i| AdapterId(i as u32))
    }

    /// Adapter `number` of `host`.
    pub fn host_adapter(&self, host: HostId, number: u32) -> Option<AdapterId> {
        self.adapters
            .iter()
            .position(|a| a.host == host && a.number == number)
            .map(|i| AdapterId(i as u32))
    }

    /// An adapter's qualified name (`host.component`).
    pub fn adapter_name(&self, id: AdapterId) -> String {
        self.adapters.get(id.index()).map_or_else(
            || format!("{id:?}"),
            |a| self.nodes[a.node.index()].name.clone(),
        )
    }

    fn adapter_checked(&mut self, id: AdapterId) -> Result<&mut NtbAdapter, NtbError> {
        self.adapters
            .get_mut(id.index())
            .ok_or(NtbError::UnknownAdapter(id))
    }

    /// Maps `len` bytes of a far-side address space, starting at `remote`, through the
    /// adapter's window: takes the fewest consecutive free entries that cover the range.
    pub fn ntb_map(
        &mut self,
        adapter: AdapterId,
        target: LutTarget,
        remote: u64,
        len: u64,
    ) -> Result<NtbMapping, NtbError> {
        if len == 0 {
            return Err(NtbError::Empty);
        }
        self.adapter_checked(adapter)?;
        if let LutTarget::Adapter(far) = target {
            if far.index() >= self.adapters.len() {
                return Err(NtbError::UnknownAdapter(far));
            }
            if self.cable_path(adapter, far).is_none() {
                return Err(NtbError::NoPath {
                    from: self.adapter_name(adapter),
                    to: self.adapter_name(far),
                });
            }
        }
        let name = self.adapter_name(adapter);
        let a = self.adapter_checked(adapter)?;
        let size = a.entry_size;
        let base = remote - remote % size;
        // `end - base` bytes from the entry-aligned base: the range may end at 2^64 exactly
        // (u128), never beyond it.
        let end = u128::from(remote) + u128::from(len);
        if end > 1u128 << 64 {
            return Err(NtbError::BeyondAddressSpace {
                adapter: name,
                remote,
                len,
            });
        }
        let free = a.lut.iter().filter(|e| e.is_none()).count() as u32;
        let limit = a.lut.len() as u32;
        let needed_wide = (end - u128::from(base)).div_ceil(u128::from(size));
        let lut_full = |needed: u64| NtbError::LutFull {
            adapter: name.clone(),
            node_id: a.node_id,
            needed,
            free,
            limit,
            entry_size: format_size(size),
        };
        // At most the table size (a `u32`) from here on.
        let needed = match u32::try_from(needed_wide) {
            Ok(n) if n <= limit => n,
            _ => return Err(lut_full(u64::try_from(needed_wide).unwrap_or(u64::MAX))),
        };
        let first = (0..=limit - needed)
            .find(|&s| {
                a.lut[s as usize..(s + needed) as usize]
                    .iter()
                    .all(Option::is_none)
            })
            .ok_or_else(|| lut_full(u64::from(needed)))?;
        self.next_mapping += 1;
        let id = self.next_mapping;
        let a = self.adapter_checked(adapter)?;
        for k in 0..needed {
            a.lut[(first + k) as usize] = Some(LutEntry {
                target,
                // Below `remote + len`, so below 2^64.
                remote_base: base + u64::from(k) * size,
                mapping: id,
            });
        }
        Ok(NtbMapping {
            id,
            adapter,
            first_entry: first,
            entries: needed,
            // Inside the window: `first + needed <= limit` and `limit * size <= window`.
            bus_addr: a.window.start + u64::from(first) * size + (remote - base),
            len,
        })
    }

    /// Removes a mapping made by [`Fabric::ntb_map`], freeing its entries.
    pub fn ntb_unmap(&mut self, mapping: &NtbMapping) -> Result<(), NtbError> {
        let name = self.adapter_name(mapping.adapter);
        let a = self.adapter_checked(mapping.adapter)?;
        let range = mapping.first_entry as usize..(mapping.first_entry + mapping.entries) as usize;
        let valid = a
            .lut
            .get(range.clone())
            .is_some_and(|r| r.iter().all(|e| e.is_some_and(|e| e.mapping == mapping.id)));
        if !valid {
            return Err(NtbError::NotMapped {
                adapter: name,
                first: mapping.first_entry,
                end: mapping.first_entry + mapping.entries,
            });
        }
        a.lut[range].fill(None);
        Ok(())
    }

    /// Gives `requester` an entry in the adapter's requester-id table (reference counted:
    /// adding a requester twice takes one entry).
    pub fn ntb_add_requester(
        &mut self,
        adapter: AdapterId,
        requester: Requester,
    ) -> Result<(), NtbError> {
        let name = self.adapter_name(adapter);
        let a = self.adapter_checked(adapter)?;
        if requester == Requester::Cpu(a.host) {
            return Ok(()); // reserved at reset
        }
        if let Some((_, refs)) = a
            .requesters
            .iter_mut()
            .flatten()
            .find(|(r, _)| *r == requester)
        {
            *refs += 1;
            return Ok(());
        }
        let limit = a.requesters.len() as u32;
        let slot =
            a.requesters
                .iter_mut()
                .find(|e| e.is_none())
                .ok_or(NtbError::RequesterTableFull {
                    adapter: name,
                    limit,
                })?;
        *slot = Some((requester, 1));
        Ok(())
    }

    /// Drops one reference to `requester`'s entry; the entry is freed with the last one.
    pub fn ntb_remove_requester(
        &mut self,
        adapter: AdapterId,
        requester: Requester,
    ) -> Result<(), NtbError> {
        let name = self.adapter_name(adapter);
        let a = self.adapter_checked(adapter)?;
        if requester == Requester::Cpu(a.host) {
            return Ok(()); // reserved for good
        }
        let slot = a
            .requesters
            .iter_mut()
            .skip(CPU_RESERVED_REQUESTER_IDS as usize)
            .find(|e| e.is_some_and(|(r, _)| r == requester))
            .ok_or(NtbError::UnknownRequester {
                adapter: name,
                requester,
            })?;
        if let Some((_, refs)) = slot {
            *refs -= 1;
            if *refs == 0 {
                *slot = None;
            }
        }
        Ok(())
    }

    /// Whether every link is up.
    pub fn link_is_up(&self, link: LinkId) -> bool {
        self.link_up.get(link.index()).copied().unwrap_or(true)
    }

    /// Brings a link (typically a cable) down or up. Down links drop posted writes and fail
    /// reads (the requester sees all-ones).
    pub fn set_link_up(&mut self, link: LinkId, up: bool) {
        if let Some(s) = self.link_up.get_mut(link.index()) {
            *s = up;
        }
    }

    /// Whether the cable path between two adapters is connected and every link on it is up.
    pub fn ntb_path_up(&self, from: AdapterId, to: AdapterId) -> bool {
        self.cable_path(from, to)
            .is_some_and(|hops| hops.iter().all(|h| self.link_is_up(h.link)))
    }
}

impl NtbAdapter {
    /// Sizes the tables. The sizes come from a validated scenario or calibration (at least
    /// one entry, at most 4096; at least the CPU's reserved requester ids), so the `max`
    /// calls below change nothing for them; they only keep a hand-made call well-defined.
    fn resize(&mut self, sizes: NtbTableSizes) {
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
