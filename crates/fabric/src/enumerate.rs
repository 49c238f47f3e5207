//! Per-host enumeration: bus numbers, requester ids, BAR addresses and bridge windows, the way
//! firmware and Linux do it on an x86 host.
//!
//! Address map of every host (physical addresses):
//!
//! ```text
//! 0                     RAM (up to 2 GiB)
//! 0x8000_0000           32-bit MMIO: non-prefetchable BARs and bridge memory windows
//! 0xFEE0_0000           MSI range: writes here are interrupts
//! 0x1_0000_0000         RAM above 2 GiB continues here
//! 1 TiB-aligned         64-bit MMIO: prefetchable BARs and bridge prefetchable windows
//! ```
//!
//! BARs are naturally aligned (a BAR's base is a multiple of its size). Bridge windows have
//! 1 MiB granularity and contain all windows and BARs below them. Items are placed in order of
//! decreasing alignment, which leaves no holes between power-of-two BARs.

use crate::ids::{Bdf, EndpointId, HostId, LinkId, NodeId};
use crate::spec::ScenarioError;
use crate::topology::{Bridge, BridgeRole, Fabric, NodeKind};
use crate::units::format_size;
use smartio_platform::BusAddr;
use std::ops::Range;

const LOW_RAM_LIMIT: u64 = 0x8000_0000;
const MMIO32: Range<u64> = 0x8000_0000..0xFEC0_0000;
const MSI: Range<u64> = 0xFEE0_0000..0xFEF0_0000;
const HIGH_RAM_BASE: u64 = 1 << 32;
const MMIO64_ALIGN: u64 = 1 << 40;
const MMIO64_SIZE: u64 = 1 << 44;
const WINDOW_GRANULE: u64 = 1 << 20;

/// The fixed parts of a host's physical address map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressMap {
    /// Ranges backed by RAM.
    pub ram: Vec<Range<u64>>,
    /// 32-bit MMIO region.
    pub mmio32: Range<u64>,
    /// 64-bit MMIO region.
    pub mmio64: Range<u64>,
    /// MSI range.
    pub msi: Range<u64>,
}

impl AddressMap {
    /// The map for a host with `ram` bytes of memory.
    pub fn for_ram(ram: u64) -> AddressMap {
        let low: Range<u64> = 0..ram.min(LOW_RAM_LIMIT);
        let mut ranges = Vec::from([low]);
        let mut top = ram.min(LOW_RAM_LIMIT);
        if ram > LOW_RAM_LIMIT {
            top = HIGH_RAM_BASE + (ram - LOW_RAM_LIMIT);
            ranges.push(HIGH_RAM_BASE..top);
        }
        let base = align_up(top.max(HIGH_RAM_BASE), MMIO64_ALIGN);
        AddressMap {
            ram: ranges,
            mmio32: MMIO32,
            mmio64: base..base + MMIO64_SIZE,
            msi: MSI,
        }
    }
}

fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

#[derive(Debug, Clone, Copy)]
enum Resource {
    Bar { endpoint: EndpointId, slot: usize },
    Window { bridge: usize },
}

#[derive(Debug, Clone, Copy)]
struct Item {
    size: u64,
    align: u64,
    resource: Resource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Mem,
    Pref,
}

/// Items each bridge's windows must hold, indexed like `Host::bridges`.
#[derive(Default)]
struct Contents {
    mem: Vec<Item>,
    pref: Vec<Item>,
}

impl Contents {
    fn items(&self, class: Class) -> &[Item] {
        match class {
            Class::Mem => &self.mem,
            Class::Pref => &self.pref,
        }
    }
}

struct Enumerator<'f> {
    fabric: &'f mut Fabric,
    host: HostId,
    next_bus: u16,
    contents: Vec<Contents>,
}

/// Enumerates one host: bus numbers, BARs, bridge windows, and routing claims.
pub(crate) fn enumerate_host(fabric: &mut Fabric, host: HostId) -> Result<(), ScenarioError> {
    let root = fabric.hosts[host.index()].root;
    let mut e = Enumerator {
        fabric,
        host,
        next_bus: 1,
        contents: Vec::new(),
    };
    let children = e.fabric.nodes[root.index()].down.clone();
    if children.len() > 31 {
        return Err(e.host_error(format!(
            "{} root ports needed, a root complex has at most 31",
            children.len()
        )));
    }
    let mut root_ports = Vec::new();
    for (i, &link) in children.iter().enumerate() {
        let bridge = e.add_bridge(
            root,
            BridgeRole::RootPort,
            Bdf::new(0, i as u8 + 1, 0),
            Some(link),
        )?;
        let child = e.fabric.links[link.index()].b;
        let (mem, pref) = e.visit(
            child,
            e.fabric.hosts[host.index()].bridges[bridge].secondary,
        )?;
        e.finish_bridge(bridge, mem, pref);
        root_ports.push(bridge);
    }
    let map = {
        let h = &e.fabric.hosts[host.index()];
        (h.mmio32.clone(), h.mmio64.clone())
    };
    for (class, region, name) in [
        (Class::Mem, map.0, "32-bit MMIO"),
        (Class::Pref, map.1, "64-bit MMIO"),
    ] {
        let items: Vec<Item> = root_ports
            .iter()
            .filter_map(|&b| e.window_item(b, class))
            .collect();
        let end = e.place(&items, region.start, class);
        if end > region.end {
            return Err(e.host_error(format!(
                "{name} space exhausted: devices need {} but the region holds {}",
                format_size(end - region.start),
                format_size(region.end - region.start)
            )));
        }
    }
    e.record_claims();
    Ok(())
}

impl Enumerator<'_> {
    fn host_error(&self, message: String) -> ScenarioError {
        let h = &self.fabric.hosts[self.host.index()];
        h.loc.error(format!("host {:?}: {message}", h.name))
    }

    fn take_bus(&mut self) -> Result<u8, ScenarioError> {
        let bus = self.next_bus;
        if bus > 255 {
            return Err(self.host_error("more than 256 buses needed".to_string()));
        }
        self.next_bus += 1;
        Ok(bus as u8)
    }

    fn add_bridge(
        &mut self,
        node: NodeId,
        role: BridgeRole,
        bdf: Bdf,
        child_link: Option<LinkId>,
    ) -> Result<usize, ScenarioError> {
        let secondary = self.take_bus()?;
        let bridges = &mut self.fabric.hosts[self.host.index()].bridges;
        bridges.push(Bridge {
            host: self.host,
            node,
            role,
            bdf,
            secondary,
            subordinate: secondary,
            mem: None,
            pref: None,
            child_link,
        });
        self.contents.push(Contents::default());
        Ok(bridges.len() - 1)
    }

    fn finish_bridge(&mut self, bridge: usize, mem: Vec<Item>, pref: Vec<Item>) {
        let last_bus = (self.next_bus - 1) as u8;
        self.fabric.hosts[self.host.index()].bridges[bridge].subordinate = last_bus;
        self.contents[bridge] = Contents { mem, pref };
    }

    /// Numbers `node` (placed on `bus`) and everything below it; returns the items its parent
    /// port's windows must hold.
    fn visit(&mut self, node: NodeId, bus: u8) -> Result<(Vec<Item>, Vec<Item>), ScenarioError> {
        match self.fabric.nodes[node.index()].kind.clone() {
            NodeKind::Device { endpoint } | NodeKind::Ntb { endpoint, .. } => {
                let ep = &mut self.fabric.endpoints[endpoint.index()];
                ep.bdf = Bdf::new(bus, 0, 0);
                let (mut mem, mut pref) = (Vec::new(), Vec::new());
                for (slot, bar) in ep.layout.bars.iter().enumerate() {
                    let item = Item {
                        size: bar.size,
                        align: bar.size,
                        resource: Resource::Bar { endpoint, slot },
                    };
                    if bar.kind.is_prefetchable() {
                        pref.push(item)
                    } else {
                        mem.push(item)
                    }
                }
                Ok((mem, pref))
            }
            NodeKind::Switch { .. } => {
                let up =
                    self.add_bridge(node, BridgeRole::SwitchUpstream, Bdf::new(bus, 0, 0), None)?;
                let internal = self.fabric.hosts[self.host.index()].bridges[up].secondary;
                let children = self.fabric.nodes[node.index()].down.clone();
                if children.len() > 32 {
                    let name = self.fabric.nodes[node.index()].name.clone();
                    return Err(self.host_error(format!(
                        "switch {name} has {} downstream ports, at most 32",
                        children.len()
                    )));
                }
                let (mut mem, mut pref) = (Vec::new(), Vec::new());
                for (d, &link) in children.iter().enumerate() {
                    let down = self.add_bridge(
                        node,
                        BridgeRole::SwitchDownstream,
                        Bdf::new(internal, d as u8, 0),
                        Some(link),
                    )?;
                    let secondary = self.fabric.hosts[self.host.index()].bridges[down].secondary;
                    let child = self.fabric.links[link.index()].b;
                    let (m, p) = self.visit(child, secondary)?;
                    self.finish_bridge(down, m, p);
                    mem.extend(self.window_item(down, Class::Mem));
                    pref.extend(self.window_item(down, Class::Pref));
                }
                self.finish_bridge(up, mem, pref);
                Ok((
                    self.window_item(up, Class::Mem).into_iter().collect(),
                    self.window_item(up, Class::Pref).into_iter().collect(),
                ))
            }
            NodeKind::RootComplex | NodeKind::ClusterSwitch { .. } => Ok((Vec::new(), Vec::new())),
        }
    }

    /// The window a bridge needs for `class`, as an item for its parent, if any.
    fn window_item(&self, bridge: usize, class: Class) -> Option<Item> {
        let items = self.contents[bridge].items(class);
        if items.is_empty() {
            return None;
        }
        let sorted = sorted(items);
        let mut offset = 0;
        let mut align = WINDOW_GRANULE;
        for item in &sorted {
            offset = align_up(offset, item.align) + item.size;
            align = align.max(item.align);
        }
        Some(Item {
            size: align_up(offset, WINDOW_GRANULE),
            align,
            resource: Resource::Window { bridge },
        })
    }

    /// Places `items` from `base` on; returns the end address.
    fn place(&mut self, items: &[Item], base: u64, class: Class) -> u64 {
        let mut addr = base;
        for item in sorted(items) {
            addr = align_up(addr, item.align);
            match item.resource {
                Resource::Bar { endpoint, slot } => {
                    let ep = &mut self.fabric.endpoints[endpoint.index()];
                    let spec = ep.layout.bars[slot];
                    ep.bars.push(crate::topology::AssignedBar {
                        index: spec.index,
                        kind: spec.kind,
                        base: BusAddr(addr),
                        size: spec.size,
                    });
                    ep.bars.sort_by_key(|b| b.index);
                }
                Resource::Window { bridge } => {
                    let range = Some(addr..addr + item.size);
                    let b = &mut self.fabric.hosts[self.host.index()].bridges[bridge];
                    match class {
                        Class::Mem => b.mem = range,
                        Class::Pref => b.pref = range,
                    }
                    let inner = self.contents[bridge].items(class).to_vec();
                    self.place(&inner, addr, class);
                }
            }
            addr += item.size;
        }
        addr
    }

    /// Records, on each root complex and switch node, which child link claims which ranges.
    fn record_claims(&mut self) {
        let h = &self.fabric.hosts[self.host.index()];
        let mut claims: Vec<(NodeId, Range<u64>, LinkId)> = Vec::new();
        for b in &h.bridges {
            if let Some(link) = b.child_link {
                for r in [&b.mem, &b.pref].into_iter().flatten() {
                    claims.push((b.node, r.clone(), link));
                }
            }
        }
        for (node, range, link) in claims {
            self.fabric.nodes[node.index()].claims.push((range, link));
        }
    }
}

fn sorted(items: &[Item]) -> Vec<Item> {
    let mut v = items.to_vec();
    v.sort_by(|a, b| b.align.cmp(&a.align).then(b.size.cmp(&a.size)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_hosts_keep_all_ram_low() {
        let map = AddressMap::for_ram(1 << 30);
        assert_eq!(map.ram, vec![0..1 << 30]);
        assert_eq!(map.mmio64.start, 1 << 40);
    }

    #[test]
    fn large_hosts_continue_ram_above_4_gib() {
        let map = AddressMap::for_ram(64 << 30);
        assert_eq!(
            map.ram,
            vec![0..LOW_RAM_LIMIT, HIGH_RAM_BASE..HIGH_RAM_BASE + (62 << 30)]
        );
        assert!(map.ram.iter().all(|r| r.end <= map.mmio64.start));
        assert!(map
            .ram
            .iter()
            .all(|r| r.end <= MMIO32.start || r.start >= MMIO32.end));
    }
}
