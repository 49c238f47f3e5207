//! Per-host enumeration: bus numbers, requester ids, BAR addresses and bridge windows, the way
//! firmware and Linux do it on an x86 host.
//!
//! BARs go into the regions of the host's address map ([`crate::address_map`]). A scenario
//! may say where the host's firmware starts the 64-bit MMIO region (`mmio64`, a multiple of
//! 1 GiB at or above the top of RAM): firmware that places 64-bit BARs right above RAM lets
//! a device that addresses 40 bits (a Kepler GPU) reach them.
//!
//! BARs are naturally aligned (a BAR's base is a multiple of its size). Bridge windows have
//! 1 MiB granularity and contain all windows and BARs below them. Items are placed in order of
//! decreasing alignment, which leaves no holes between power-of-two BARs.
//!
//! Every address and size computed here uses checked arithmetic: a BAR larger than its whole
//! region, or a set of BARs that does not fit, is an error naming the host, the device and the
//! sizes — never a wrapped address. RAM is at most [`MAX_RAM`], so the map itself always fits.

use crate::address_map::align_up;
use crate::fabric::Fabric;
use crate::functions::vf_bdf;
use crate::ids::{Bdf, EndpointId, HostId, LinkId, NodeId};
use crate::layout::AssignedBar;
use crate::spec::ScenarioError;
use crate::topology::{Bridge, BridgeRole, NodeKind};
use crate::units::format_size;
use smartio_platform::BusAddr;
use std::ops::Range;

pub use crate::address_map::{
    ram_top, AddressMap, MAX_RAM, MIN_RAM, MMIO64_GRANULE, MMIO64_MAX_BASE, MMIO64_SIZE,
};

const WINDOW_GRANULE: u64 = 1 << 20;

#[derive(Debug, Clone, Copy)]
enum Resource {
    Bar {
        endpoint: EndpointId,
        slot: usize,
    },
    /// The whole region (slice × TotalVFs) of a PF's VF BAR `slot` (index into its
    /// `SriovSpec::vf_bars`).
    VfRegion {
        endpoint: EndpointId,
        slot: usize,
    },
    Window {
        bridge: usize,
    },
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
        let mut items = Vec::new();
        for &b in &root_ports {
            items.extend(e.window_item(b, class)?);
        }
        let end = e.place(&items, region.start, class)?;
        if end > region.end {
            return Err(e.host_error(format!(
                "{name} space exhausted: devices need {} (natural alignment included) but the \
                 region holds {}{}",
                format_size(end - region.start),
                format_size(region.end - region.start),
                e.largest_bar(class)
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
                self.visit_endpoint(endpoint, bus)
            }
            NodeKind::Switch { .. } => self.visit_switch(node, bus),
            NodeKind::RootComplex | NodeKind::ClusterSwitch { .. } => Ok((Vec::new(), Vec::new())),
        }
    }

    /// The host's 32-bit and 64-bit MMIO region sizes.
    fn regions(&self) -> (u64, u64) {
        let h = &self.fabric.hosts[self.host.index()];
        (h.mmio32.end - h.mmio32.start, h.mmio64.end - h.mmio64.start)
    }

    /// Places `endpoint` on `bus`; its BARs (and VF BAR regions) are the items its port's
    /// windows must hold.
    fn visit_endpoint(
        &mut self,
        endpoint: EndpointId,
        bus: u8,
    ) -> Result<(Vec<Item>, Vec<Item>), ScenarioError> {
        let region = self.regions();
        let ep = &mut self.fabric.endpoints[endpoint.index()];
        ep.bdf = Bdf::new(bus, 0, 0);
        for bar in &ep.layout.bars {
            let (size, name) = region_of(bar.kind.is_prefetchable(), region);
            if bar.size > size {
                let message = format!(
                    "device {:?} BAR{} of {} is larger than the whole {name} region \
                     ({})",
                    ep.name,
                    bar.index,
                    format_size(bar.size),
                    format_size(size)
                );
                return Err(self.host_error(message));
            }
        }
        let ep = &self.fabric.endpoints[endpoint.index()];
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
        if let Some(sriov) = ep.layout.sriov.clone() {
            self.reserve_vf_buses(endpoint, bus, &sriov)?;
            self.vf_regions(endpoint, &sriov, region, &mut mem, &mut pref)?;
        }
        Ok((mem, pref))
    }

    /// The VF BAR regions of `endpoint`'s SR-IOV capability, each checked against its MMIO
    /// region (`region`), into `mem` and `pref`.
    fn vf_regions(
        &self,
        endpoint: EndpointId,
        sriov: &crate::layout::SriovSpec,
        region: (u64, u64),
        mem: &mut Vec<Item>,
        pref: &mut Vec<Item>,
    ) -> Result<(), ScenarioError> {
        for (slot, bar) in sriov.vf_bars.iter().enumerate() {
            // Validated: slice × TotalVFs fits in 2^63.
            let item = Item {
                size: bar.size * u64::from(sriov.total_vfs),
                align: bar.size,
                resource: Resource::VfRegion { endpoint, slot },
            };
            let (limit, name) = region_of(bar.kind.is_prefetchable(), region);
            if item.size > limit {
                let message = format!(
                    "device {:?} VF BAR{} region of {} ({} VFs × {}) is larger \
                     than the whole {name} region ({})",
                    self.fabric.endpoints[endpoint.index()].name,
                    bar.index,
                    format_size(item.size),
                    sriov.total_vfs,
                    format_size(bar.size),
                    format_size(limit)
                );
                return Err(self.host_error(message));
            }
            if bar.kind.is_prefetchable() {
                pref.push(item)
            } else {
                mem.push(item)
            }
        }
        Ok(())
    }

    /// Numbers switch `node` (its upstream port on `bus`), its downstream ports and what is
    /// below them; its upstream port's windows are the items its parent must hold.
    fn visit_switch(
        &mut self,
        node: NodeId,
        bus: u8,
    ) -> Result<(Vec<Item>, Vec<Item>), ScenarioError> {
        let up = self.add_bridge(node, BridgeRole::SwitchUpstream, Bdf::new(bus, 0, 0), None)?;
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
            mem.extend(self.window_item(down, Class::Mem)?);
            pref.extend(self.window_item(down, Class::Pref)?);
        }
        self.finish_bridge(up, mem, pref);
        Ok((
            self.window_item(up, Class::Mem)?.into_iter().collect(),
            self.window_item(up, Class::Pref)?.into_iter().collect(),
        ))
    }

    /// Takes the bus numbers a PF at `bus` needs for its VFs' routing ids (PF + First VF
    /// Offset + (n − 1) · VF Stride for n up to TotalVFs), as Linux reserves them: the buses
    /// after the PF's own, so the bridge above forwards configuration requests to them.
    fn reserve_vf_buses(
        &mut self,
        endpoint: EndpointId,
        bus: u8,
        sriov: &crate::layout::SriovSpec,
    ) -> Result<(), ScenarioError> {
        let pf = Bdf::new(bus, 0, 0);
        let Some(last) = vf_bdf(pf, sriov, sriov.total_vfs) else {
            let name = self.fabric.endpoints[endpoint.index()].name.clone();
            return Err(self.host_error(format!(
                "device {name:?} at bus {bus}: the routing id of VF {} would pass bus 255 \
                 (First VF Offset {}, VF Stride {})",
                sriov.total_vfs, sriov.first_vf_offset, sriov.vf_stride
            )));
        };
        for _ in bus..last.bus {
            self.take_bus()?;
        }
        Ok(())
    }

    /// The window a bridge needs for `class`, as an item for its parent, if any.
    fn window_item(&self, bridge: usize, class: Class) -> Result<Option<Item>, ScenarioError> {
        let items = self.contents[bridge].items(class);
        if items.is_empty() {
            return Ok(None);
        }
        let sorted = sorted(items);
        let mut offset = 0u64;
        let mut align = WINDOW_GRANULE;
        for item in &sorted {
            offset = align_up(offset, item.align)
                .and_then(|o| o.checked_add(item.size))
                .ok_or_else(|| self.overflow(item))?;
            align = align.max(item.align);
        }
        let size = align_up(offset, WINDOW_GRANULE).ok_or_else(|| self.overflow(&sorted[0]))?;
        Ok(Some(Item {
            size,
            align,
            resource: Resource::Window { bridge },
        }))
    }

    /// Places `items` from `base` on; returns the end address.
    fn place(&mut self, items: &[Item], base: u64, class: Class) -> Result<u64, ScenarioError> {
        let mut addr = base;
        for item in sorted(items) {
            let start = align_up(addr, item.align).ok_or_else(|| self.overflow(&item))?;
            let end = start
                .checked_add(item.size)
                .ok_or_else(|| self.overflow(&item))?;
            match item.resource {
                Resource::Bar { endpoint, slot } => {
                    let ep = &mut self.fabric.endpoints[endpoint.index()];
                    let spec = ep.layout.bars[slot];
                    ep.bars.push(AssignedBar {
                        index: spec.index,
                        kind: spec.kind,
                        base: BusAddr(start),
                        size: spec.size,
                    });
                    ep.bars.sort_by_key(|b| b.index);
                }
                Resource::VfRegion { endpoint, slot } => {
                    let ep = &mut self.fabric.endpoints[endpoint.index()];
                    let spec = ep.layout.sriov.as_ref().and_then(|s| s.vf_bars.get(slot));
                    if let (Some(spec), Some(v)) = (spec.copied(), ep.sriov.as_mut()) {
                        v.regions.push(AssignedBar {
                            index: spec.index,
                            kind: spec.kind,
                            base: BusAddr(start),
                            size: item.size,
                        });
                        v.regions.sort_by_key(|b| b.index);
                    }
                }
                Resource::Window { bridge } => {
                    let range = Some(start..end);
                    let b = &mut self.fabric.hosts[self.host.index()].bridges[bridge];
                    match class {
                        Class::Mem => b.mem = range,
                        Class::Pref => b.pref = range,
                    }
                    let inner = self.contents[bridge].items(class).to_vec();
                    self.place(&inner, start, class)?;
                }
            }
            addr = end;
        }
        Ok(addr)
    }

    /// What an item is, for messages: `device "nvme0" BAR2` or `the window of bridge 01:00.0`.
    fn describe(&self, item: &Item) -> String {
        match item.resource {
            Resource::Bar { endpoint, slot } => {
                let ep = &self.fabric.endpoints[endpoint.index()];
                let index = ep.layout.bars.get(slot).map_or(0, |b| b.index);
                format!("device {:?} BAR{index}", ep.name)
            }
            Resource::VfRegion { endpoint, slot } => {
                let ep = &self.fabric.endpoints[endpoint.index()];
                let index = ep
                    .layout
                    .sriov
                    .as_ref()
                    .and_then(|s| s.vf_bars.get(slot))
                    .map_or(0, |b| b.index);
                format!("device {:?} VF BAR{index}", ep.name)
            }
            Resource::Window { bridge } => {
                let b = &self.fabric.hosts[self.host.index()].bridges[bridge];
                format!(
                    "the window of bridge {} ({})",
                    b.bdf,
                    self.fabric.nodes[b.node.index()].name
                )
            }
        }
    }

    /// The error for an item whose address or size cannot be represented in 64 bits.
    fn overflow(&self, item: &Item) -> ScenarioError {
        self.host_error(format!(
            "{} of {} cannot be placed: its address would pass 2^64",
            self.describe(item),
            format_size(item.size)
        ))
    }

    /// `" (the largest BAR is device "x" BAR1, 8T)"` for the host's BARs of `class`.
    fn largest_bar(&self, class: Class) -> String {
        let h = &self.fabric.hosts[self.host.index()];
        let largest = h
            .endpoints
            .iter()
            .flat_map(|&e| {
                let ep = &self.fabric.endpoints[e.index()];
                ep.layout
                    .bars
                    .iter()
                    .filter(|b| b.kind.is_prefetchable() == (class == Class::Pref))
                    .map(move |b| (b.size, &ep.name, b.index))
            })
            // The first of the largest, in declaration order.
            .fold(None, |best: Option<(u64, &String, u8)>, bar| match best {
                Some(b) if b.0 >= bar.0 => Some(b),
                _ => Some(bar),
            });
        largest.map_or_else(String::new, |(size, name, index)| {
            format!(
                " (the largest BAR is device {name:?} BAR{index}, {})",
                format_size(size)
            )
        })
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

/// The size and name of the MMIO region (of `region`: 32-bit, 64-bit) a BAR goes in.
fn region_of(prefetchable: bool, region: (u64, u64)) -> (u64, &'static str) {
    if prefetchable {
        (region.1, "64-bit MMIO")
    } else {
        (region.0, "32-bit MMIO")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_device_with(bar: crate::layout::BarSpec) -> Result<Fabric, ScenarioError> {
        let text = "[[host]]\nname = \"a\"\nram = \"1G\"\n[[host.device]]\nname = \"x\"\n\
                    kind = \"k\"\nparent = \"root\"\nlink = \"gen3 x4\"\n";
        let spec = crate::spec::parse_scenario("t.toml", text).map_err(|e| e.to_string());
        let Ok(spec) = spec else {
            panic!("the scenario is valid: {spec:?}")
        };
        Fabric::build::<String>(&spec, &move |_, _| {
            Ok(crate::layout::EndpointLayout {
                vendor_id: 1,
                device_id: 1,
                class_code: 0,
                description: String::new(),
                bars: vec![bar],
                sriov: None,
            })
        })
    }

    #[test]
    fn a_bar_larger_than_its_region_is_an_error_naming_the_device_and_the_sizes() {
        use crate::layout::{BarKind, BarSpec};
        for (size, shown) in [(1u64 << 63, "8388608T"), (32 << 40, "32T")] {
            let bar = BarSpec {
                index: 2,
                size,
                kind: BarKind::Mem64Prefetch,
            };
            let Err(err) = one_device_with(bar) else {
                panic!("a {shown} BAR was placed")
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "t.toml:2: host \"a\": device \"x\" BAR2 of {shown} is larger than the \
                     whole 64-bit MMIO region (16T)"
                )
            );
        }
        // The region of a small host starts at 1 TiB: an 8 TiB BAR, naturally aligned, sits
        // at 8 TiB; one of 16 TiB would end at 32 TiB, past the region's end at 17 TiB.
        let bar = |size| BarSpec {
            index: 2,
            size,
            kind: BarKind::Mem64Prefetch,
        };
        let fabric = one_device_with(bar(8 << 40)).expect("fits");
        assert_eq!(fabric.endpoints()[0].bars[0].range(), 8 << 40..16 << 40);
        let Err(err) = one_device_with(bar(16 << 40)) else {
            panic!("a 16T BAR was placed in 1T..17T")
        };
        assert_eq!(
            err.to_string(),
            "t.toml:2: host \"a\": 64-bit MMIO space exhausted: devices need 31T (natural \
             alignment included) but the region holds 16T (the largest BAR is device \"x\" \
             BAR2, 16T)"
        );
    }

    #[test]
    fn windows_that_together_overflow_the_64_bit_region_are_an_error_naming_the_largest() {
        let adapter = |i: u32| {
            format!(
                "[[host.ntb]]\nname = \"ntb{i}\"\nchip = \"PEX8733\"\nparent = \"root\"\n\
                 link = \"gen3 x16\"\nwindow = \"8T\"\n"
            )
        };
        let host = "[[host]]\nname = \"a\"\nram = \"1G\"\n".to_string();
        let build = |n: u32| {
            let text = (0..n).fold(host.clone(), |t, i| t + &adapter(i));
            let spec = crate::spec::parse_scenario("t.toml", &text).map_err(|e| e.to_string());
            let Ok(spec) = spec else {
                panic!("the scenario is valid: {spec:?}")
            };
            Fabric::build(&spec, &|_, _| Err("no devices".to_string()))
        };
        assert!(build(1).is_ok(), "one 8T window fits at 8T..16T");
        let Err(err) = build(2) else {
            panic!("two 8T windows were placed in 1T..17T")
        };
        assert_eq!(
            err.to_string(),
            "t.toml:2: host \"a\": 64-bit MMIO space exhausted: devices need 23T (natural \
             alignment included) but the region holds 16T (the largest BAR is device \"ntb0\" \
             BAR2, 8T)"
        );
    }
}
