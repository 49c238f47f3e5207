//! Invariants every enumerated fabric must satisfy, shared by the scenario tests
//! (`topology.rs`, on the shipped scenarios) and the property test (`valid_scenarios.rs`, on
//! random valid ones). Each check panics with the fabric, host and item that break it, and
//! returns how many relations it checked where a test wants to see that it checked some.

#![allow(dead_code)] // each test binary uses its own subset

use smartio_fabric::ntb::CPU_RESERVED_REQUESTER_IDS;
use smartio_fabric::topology::{Bridge, BridgeRole};
use smartio_fabric::{Bdf, EndpointId, Fabric, HostId, NodeId, NodeKind, Requester};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

pub fn host_ids(fabric: &Fabric) -> impl Iterator<Item = HostId> {
    (0..fabric.hosts().len() as u32).map(HostId)
}

pub fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

pub fn contains(outer: &Range<u64>, inner: &Range<u64>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// The bridges above `node`, nearest first: for each link towards the root, the port the link
/// hangs from (root port or switch downstream port) and, for a switch, its upstream port.
pub fn bridges_above(fabric: &Fabric, node: NodeId) -> Vec<&Bridge> {
    let h = fabric.host(fabric.node(node).host.expect("a node inside a host"));
    let mut above = Vec::new();
    let mut node = node;
    while let Some(up) = fabric.node(node).up {
        let parent = fabric.link(up).a;
        let port = h
            .bridges
            .iter()
            .find(|b| b.child_link == Some(up))
            .unwrap_or_else(|| panic!("no port leads to {}", fabric.node(node).name));
        assert_eq!(
            port.node,
            parent,
            "the port leading to {} is not on its parent",
            fabric.node(node).name
        );
        above.push(port);
        if let NodeKind::Switch { .. } = fabric.node(parent).kind {
            let upstream = h
                .bridges
                .iter()
                .find(|b| b.node == parent && b.role == BridgeRole::SwitchUpstream)
                .unwrap_or_else(|| {
                    panic!("switch {} has no upstream port", fabric.node(parent).name)
                });
            above.push(upstream);
        }
        node = parent;
    }
    assert_eq!(
        node, h.root,
        "the walk up from a node must end at its host's root complex"
    );
    above
}

pub fn check_bars(fabric: &Fabric) {
    for id in host_ids(fabric) {
        let h = fabric.host(id);
        let mut bars = Vec::new();
        for &e in &h.endpoints {
            let ep = fabric.endpoint(e);
            assert_eq!(
                ep.bars.len(),
                ep.layout.bars.len(),
                "{}: {}.{} did not get every BAR it asked for",
                fabric.name,
                h.name,
                ep.name
            );
            for b in &ep.bars {
                let what = format!(
                    "{}: {}.{} BAR{} {:#x?}",
                    fabric.name,
                    h.name,
                    ep.name,
                    b.index,
                    b.range()
                );
                assert!(
                    b.size.is_power_of_two(),
                    "{what} has a size that is not a power of two"
                );
                assert_eq!(b.base.get() % b.size, 0, "{what} is not naturally aligned");
                let region = if b.kind.is_prefetchable() {
                    &h.mmio64
                } else {
                    &h.mmio32
                };
                assert!(
                    contains(region, &b.range()),
                    "{what} is outside {region:#x?}"
                );
                for ram in &h.ram {
                    assert!(!overlaps(ram, &b.range()), "{what} overlaps RAM {ram:#x?}");
                }
                assert!(
                    !overlaps(&h.msi, &b.range()),
                    "{what} overlaps the MSI range"
                );
                bars.push((b.range(), what));
            }
        }
        bars.sort_by_key(|(r, _)| r.start);
        for pair in bars.windows(2) {
            assert!(
                pair[0].0.end <= pair[1].0.start,
                "{} overlaps {}",
                pair[0].1,
                pair[1].1
            );
        }
    }
}

pub fn check_bars_inside_bridge_windows(fabric: &Fabric) -> usize {
    let mut checked = 0;
    for id in host_ids(fabric) {
        for &e in &fabric.host(id).endpoints {
            let ep = fabric.endpoint(e);
            let above = bridges_above(fabric, ep.node);
            assert!(
                !above.is_empty(),
                "{}: {} has no root port above it",
                fabric.name,
                ep.name
            );
            for b in &ep.bars {
                for bridge in &above {
                    let window = if b.kind.is_prefetchable() {
                        &bridge.pref
                    } else {
                        &bridge.mem
                    };
                    let window = window.as_ref().unwrap_or_else(|| {
                        panic!(
                            "{}: bridge {} above {} has no window for BAR{}",
                            fabric.name, bridge.bdf, ep.name, b.index
                        )
                    });
                    assert!(
                        contains(window, &b.range()),
                        "{}: {} BAR{} {:#x?} is outside the window {window:#x?} of bridge {} above it",
                        fabric.name,
                        ep.name,
                        b.index,
                        b.range(),
                        bridge.bdf
                    );
                    checked += 1;
                }
            }
        }
    }
    checked
}

pub fn check_bridge_nesting(fabric: &Fabric) -> usize {
    const WINDOW_GRANULE: u64 = 1 << 20;
    let mut nested = 0;
    for id in host_ids(fabric) {
        let h = fabric.host(id);
        for bridge in &h.bridges {
            let mut above = match bridge.role {
                BridgeRole::RootPort => Vec::new(),
                BridgeRole::SwitchUpstream => bridges_above(fabric, bridge.node),
                BridgeRole::SwitchDownstream => {
                    let upstream = h
                        .bridges
                        .iter()
                        .find(|b| b.node == bridge.node && b.role == BridgeRole::SwitchUpstream)
                        .expect("a switch has an upstream port");
                    vec![upstream]
                }
            };
            if bridge.role == BridgeRole::SwitchDownstream {
                above.extend(bridges_above(fabric, bridge.node));
            }
            let what = format!(
                "{}: bridge {} of {}",
                fabric.name,
                bridge.bdf,
                fabric.node(bridge.node).name
            );
            for (window, region) in [(&bridge.mem, &h.mmio32), (&bridge.pref, &h.mmio64)] {
                let Some(window) = window else { continue };
                assert!(
                    contains(region, window),
                    "{what}: window {window:#x?} is outside {region:#x?}"
                );
                assert!(
                    window.start % WINDOW_GRANULE == 0 && window.end % WINDOW_GRANULE == 0,
                    "{what}: window {window:#x?} is not on 1 MiB boundaries"
                );
            }
            for parent in above {
                for (inner, outer) in [(&bridge.mem, &parent.mem), (&bridge.pref, &parent.pref)] {
                    if let Some(inner) = inner {
                        let outer = outer.as_ref().unwrap_or_else(|| {
                            panic!("{what}: {} above it has no window", parent.bdf)
                        });
                        assert!(
                            contains(outer, inner),
                            "{what}: window {inner:#x?} is outside {outer:#x?} of {}",
                            parent.bdf
                        );
                    }
                }
                assert!(
                    parent.secondary <= bridge.bdf.bus && bridge.subordinate <= parent.subordinate,
                    "{what}: buses [{}-{}] are outside [{}-{}] of {}",
                    bridge.secondary,
                    bridge.subordinate,
                    parent.secondary,
                    parent.subordinate,
                    parent.bdf
                );
                nested += 1;
            }
        }
    }
    nested
}

pub fn check_foreign_windows(fabric: &Fabric) {
    for id in host_ids(fabric) {
        let h = fabric.host(id);
        for &e in &h.endpoints {
            let ep = fabric.endpoint(e);
            let above: Vec<Bdf> = bridges_above(fabric, ep.node)
                .iter()
                .map(|b| b.bdf)
                .collect();
            for bridge in h.bridges.iter().filter(|b| !above.contains(&b.bdf)) {
                for window in bridge.mem.iter().chain(&bridge.pref) {
                    for b in &ep.bars {
                        assert!(
                            !overlaps(window, &b.range()),
                            "{}: {} BAR{} overlaps the window {window:#x?} of bridge {}, which is not above it",
                            fabric.name,
                            ep.name,
                            b.index,
                            bridge.bdf
                        );
                    }
                }
            }
        }
    }
}

pub fn check_bus_ranges(fabric: &Fabric) {
    for id in host_ids(fabric) {
        let h = fabric.host(id);
        let mut below: BTreeMap<Bdf, BTreeSet<EndpointId>> =
            h.bridges.iter().map(|b| (b.bdf, BTreeSet::new())).collect();
        for &e in &h.endpoints {
            let ep = fabric.endpoint(e);
            let above = bridges_above(fabric, ep.node);
            assert_eq!(
                above[0].secondary, ep.bdf.bus,
                "{}: {} is not on the secondary bus of the port it hangs from",
                fabric.name, ep.name
            );
            for bridge in above {
                below
                    .get_mut(&bridge.bdf)
                    .expect("bridge of this host")
                    .insert(e);
            }
        }
        for bridge in &h.bridges {
            assert!(
                bridge.secondary <= bridge.subordinate,
                "{}: bridge {} has an empty bus range",
                fabric.name,
                bridge.bdf
            );
            let in_range: BTreeSet<EndpointId> = h
                .endpoints
                .iter()
                .copied()
                .filter(|&e| {
                    (bridge.secondary..=bridge.subordinate).contains(&fabric.endpoint(e).bdf.bus)
                })
                .collect();
            assert_eq!(
                in_range, below[&bridge.bdf],
                "{}: bridge {} [{}-{}] decodes buses of other endpoints than those below it",
                fabric.name, bridge.bdf, bridge.secondary, bridge.subordinate
            );
        }
    }
}

pub fn check_sibling_ports(fabric: &Fabric) -> usize {
    let mut pairs = 0;
    for id in host_ids(fabric) {
        let ports: Vec<&Bridge> = fabric
            .host(id)
            .bridges
            .iter()
            .filter(|b| matches!(b.role, BridgeRole::RootPort | BridgeRole::SwitchDownstream))
            .collect();
        for (i, a) in ports.iter().enumerate() {
            for b in ports[i + 1..].iter().filter(|b| b.node == a.node) {
                let what = format!("{}: sibling ports {} and {}", fabric.name, a.bdf, b.bdf);
                for (wa, wb) in [(&a.mem, &b.mem), (&a.pref, &b.pref)] {
                    if let (Some(wa), Some(wb)) = (wa, wb) {
                        assert!(
                            !overlaps(wa, wb),
                            "{what} have overlapping windows {wa:#x?} and {wb:#x?}"
                        );
                    }
                }
                assert!(
                    a.subordinate < b.secondary || b.subordinate < a.secondary,
                    "{what} have overlapping bus ranges"
                );
                pairs += 1;
            }
        }
    }
    pairs
}

pub fn check_requester_ids(fabric: &Fabric) {
    for id in host_ids(fabric) {
        let h = fabric.host(id);
        // The root complex itself answers as 00:00.0.
        let mut seen: BTreeMap<u16, String> =
            BTreeMap::from([(Bdf::new(0, 0, 0).requester_id(), h.name.clone())]);
        let functions = h
            .bridges
            .iter()
            .map(|b| (b.bdf, format!("bridge of {}", fabric.node(b.node).name)))
            .chain(h.endpoints.iter().map(|&e| {
                let ep = fabric.endpoint(e);
                (ep.bdf, ep.name.clone())
            }));
        for (bdf, who) in functions {
            assert!(
                bdf.dev < 32 && bdf.func < 8,
                "{}: {who} has an invalid BDF {bdf}",
                fabric.name
            );
            if let Some(other) = seen.insert(bdf.requester_id(), who.clone()) {
                panic!(
                    "{}: {who} and {other} share the requester id {bdf} in {}",
                    fabric.name, h.name
                );
            }
        }
        assert_eq!(seen.len(), 1 + h.bridges.len() + h.endpoints.len());
    }
}

/// Every NTB adapter's tables fit its window: the window is BAR2, entries are a power of two
/// in size, the table covers no more than the window, and the CPU holds its reserved
/// requester ids. Returns the number of adapters checked.
pub fn check_ntb_tables(fabric: &Fabric) -> usize {
    for a in fabric.adapters() {
        let ep = fabric.endpoint(a.endpoint);
        let what = format!(
            "{}: adapter {}.{}",
            fabric.name,
            fabric.host(a.host).name,
            ep.name
        );
        let bar2 = ep
            .bars
            .iter()
            .find(|b| b.index == 2)
            .unwrap_or_else(|| panic!("{what} has no window BAR"));
        assert_eq!(a.window, bar2.range(), "{what}: window is not its BAR2");
        assert!(
            a.entry_size.is_power_of_two(),
            "{what}: entry size {}",
            a.entry_size
        );
        assert!(!a.lut().is_empty(), "{what}: an empty look-up table");
        let covered = a.entry_size * a.lut().len() as u64;
        assert!(
            covered <= a.window.end - a.window.start,
            "{what}: {} entries of {} cover more than the window",
            a.lut().len(),
            a.entry_size
        );
        assert!(
            a.requester_ids() >= CPU_RESERVED_REQUESTER_IDS as usize,
            "{what}"
        );
        assert!(
            a.has_requester(Requester::Cpu(a.host)),
            "{what}: the CPU has no entry"
        );
    }
    fabric.adapters().len()
}

/// Every cable path between two adapters ends at the far adapter and passes only cluster
/// switches on the way. Returns the number of connected pairs.
pub fn check_cable_paths(fabric: &Fabric) -> usize {
    let n = fabric.adapters().len() as u32;
    let mut connected = 0;
    for from in (0..n).map(smartio_fabric::AdapterId) {
        for to in (0..n).map(smartio_fabric::AdapterId).filter(|&t| t != from) {
            let Some(path) = fabric.cable_path(from, to) else {
                continue;
            };
            let (last, transit) = path.split_last().expect("a path between two adapters");
            assert_eq!(last.node, fabric.adapter(to).node, "{}", fabric.name);
            assert!(transit
                .iter()
                .all(|h| matches!(fabric.node(h.node).kind, NodeKind::ClusterSwitch { .. })));
            connected += 1;
        }
    }
    connected
}

/// Every check above.
pub fn check_all(fabric: &Fabric) {
    check_bars(fabric);
    check_bars_inside_bridge_windows(fabric);
    check_bridge_nesting(fabric);
    check_foreign_windows(fabric);
    check_bus_ranges(fabric);
    check_sibling_ports(fabric);
    check_requester_ids(fabric);
    check_ntb_tables(fabric);
    check_cable_paths(fabric);
}
