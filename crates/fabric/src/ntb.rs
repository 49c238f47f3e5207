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

use crate::cables::CablePaths;
use crate::fabric::Fabric;
use crate::ids::{EndpointId, HostId, LinkId, NodeId, Requester};
use crate::topology::{Hop, NodeKind};
use crate::units::format_size;
use std::collections::BTreeMap;
use thiserror::Error;

pub use crate::adapter::{
    ClusterNodeId, LutEntry, LutTarget, NtbAdapter, NtbMapping, NtbTableSizes,
    CPU_RESERVED_REQUESTER_IDS, DEFAULT_TABLE_SIZES, WINDOW_BAR,
};
pub use crate::ids::AdapterId;

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
        self.cable_paths = CablePaths::build(&self.nodes, &self.links);
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

    /// The hops from adapter `from` over cables (and cluster switches) to adapter `to`,
    /// shortest first; `None` if they are not connected. Adapters do not forward between
    /// cables; cluster switches do.
    pub fn cable_path(&self, from: AdapterId, to: AdapterId) -> Option<Vec<Hop>> {
        let a = self.adapters.get(from.index())?;
        if from == to {
            return Some(Vec::new());
        }
        let b = self.adapters.get(to.index())?;
        self.cable_paths
            .path(&self.nodes, &self.links, a.node, b.node)
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
