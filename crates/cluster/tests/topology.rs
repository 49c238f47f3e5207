//! Scenario-level tests of the fabric model: enumeration of every shipped scenario (BAR
//! placement, bridge windows, bus numbers, requester ids) and address routing (peer-to-peer,
//! to RAM, unclaimed addresses, the IOMMU, clipping at the end of a target).

use smartio_cluster::{load_fabric, SHIPPED};
use smartio_fabric::iommu::{FaultReason, PAGE_SIZE};
use smartio_fabric::topology::BridgeRole;
use smartio_fabric::{
    parse_scenario, Access, Dir, EndpointId, Fabric, HostId, LutTarget, Requester, Route,
    RouteError, Target,
};
use smartio_platform::{BusAddr, PhysAddr};
use std::collections::BTreeSet;
use std::ops::Range;

use crate::common;
use common::{bridges_above, host_ids};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn shipped_fabrics() -> Vec<Fabric> {
    SHIPPED
        .iter()
        .map(|s| load_fabric(s.name).unwrap_or_else(|e| panic!("{}: {e}", s.name)))
        .collect()
}

fn host(fabric: &Fabric, name: &str) -> HostId {
    fabric
        .host_by_name(name)
        .unwrap_or_else(|| panic!("{}: no host {name:?}", fabric.name))
}

fn endpoint(fabric: &Fabric, host: HostId, name: &str) -> EndpointId {
    fabric
        .endpoint_by_name(host, name)
        .unwrap_or_else(|| panic!("{}: no endpoint {name:?}", fabric.name))
}

/// The range of BAR `index` of `endpoint`.
fn bar(fabric: &Fabric, endpoint: EndpointId, index: u8) -> Range<u64> {
    let ep = fabric.endpoint(endpoint);
    ep.bars
        .iter()
        .find(|b| b.index == index)
        .unwrap_or_else(|| panic!("{} has no BAR{index}", ep.name))
        .range()
}

/// Names of the nodes a route arrives at, with the direction it crosses each link.
fn path(fabric: &Fabric, route: &Route) -> Vec<(Dir, String)> {
    route
        .hops
        .iter()
        .map(|h| (h.dir, fabric.node(h.node).name.clone()))
        .collect()
}

fn unsupported(fabric: &Fabric, host: HostId, addr: u64) -> RouteError {
    RouteError::UnsupportedRequest {
        host: fabric.host(host).name.clone(),
        addr: BusAddr(addr),
    }
}

/// local-chassis with the host IOMMU switched on.
fn local_chassis_with_iommu() -> Fabric {
    let shipped = SHIPPED
        .iter()
        .find(|s| s.name == "local-chassis")
        .expect("local-chassis ships");
    let text = shipped.text.replace("iommu = false", "iommu = true");
    assert_ne!(
        text, shipped.text,
        "local-chassis no longer says `iommu = false`"
    );
    let spec = parse_scenario("local-chassis-iommu.toml", &text).expect("valid scenario");
    let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("enumerates");
    assert!(fabric.host(host(&fabric, "local")).iommu.enabled());
    fabric
}

/// What the host's address map says an access at `addr` reaches, and where that target ends.
fn expected_target(fabric: &Fabric, host: HostId, addr: u64) -> Option<(Target, u64)> {
    let h = fabric.host(host);
    if let Some(r) = h.ram.iter().find(|r| r.contains(&addr)) {
        return Some((
            Target::Memory {
                host,
                addr: PhysAddr(addr),
            },
            r.end,
        ));
    }
    if h.msi.contains(&addr) {
        return Some((
            Target::Interrupt {
                host,
                addr: PhysAddr(addr),
            },
            h.msi.end,
        ));
    }
    h.endpoints.iter().find_map(|&e| {
        let b = fabric
            .endpoint(e)
            .bars
            .iter()
            .find(|b| b.range().contains(&addr))?;
        let target = Target::Bar {
            endpoint: e,
            bar: b.index,
            offset: addr - b.base.get(),
        };
        Some((target, b.range().end))
    })
}

/// Every start and end of a range in the host's address map.
fn boundaries(fabric: &Fabric, host: HostId) -> BTreeSet<u64> {
    let h = fabric.host(host);
    let mut ranges: Vec<Range<u64>> = h.ram.clone();
    ranges.extend([h.mmio32.clone(), h.mmio64.clone(), h.msi.clone()]);
    for b in &h.bridges {
        ranges.extend(b.mem.iter().chain(&b.pref).cloned());
    }
    for &e in &h.endpoints {
        ranges.extend(fabric.endpoint(e).bars.iter().map(|b| b.range()));
    }
    ranges.iter().flat_map(|r| [r.start, r.end]).collect()
}

// ---------------------------------------------------------------------------------------------
// Enumeration
// ---------------------------------------------------------------------------------------------

#[test]
fn bars_are_naturally_aligned_disjoint_and_inside_their_mmio_region() {
    for fabric in shipped_fabrics() {
        common::check_bars(&fabric);
    }
}

#[test]
fn every_bar_lies_inside_the_windows_of_every_bridge_above_it() {
    let checked: usize = shipped_fabrics()
        .iter()
        .map(common::check_bars_inside_bridge_windows)
        .sum();
    assert!(checked > 0);
}

#[test]
fn bridge_windows_and_bus_ranges_nest_inside_the_bridges_above_them() {
    let nested: usize = shipped_fabrics()
        .iter()
        .map(common::check_bridge_nesting)
        .sum();
    assert!(nested > 0);
}

#[test]
fn a_bridge_window_holds_no_bar_of_a_device_outside_its_subtree() {
    for fabric in shipped_fabrics() {
        common::check_foreign_windows(&fabric);
    }
}

#[test]
fn bus_ranges_of_bridges_hold_exactly_the_endpoints_below_them() {
    for fabric in shipped_fabrics() {
        common::check_bus_ranges(&fabric);
    }
}

#[test]
fn windows_and_bus_ranges_of_sibling_ports_do_not_overlap() {
    let pairs: usize = shipped_fabrics()
        .iter()
        .map(common::check_sibling_ports)
        .sum();
    assert!(
        pairs > 0,
        "no shipped scenario has a switch with two downstream ports"
    );
}

#[test]
fn requester_ids_are_unique_within_each_host() {
    for fabric in shipped_fabrics() {
        common::check_requester_ids(&fabric);
    }
}

#[test]
fn cascade_60_has_sixty_hosts_under_seven_cluster_switches() {
    let fabric = load_fabric("cascade-60").expect("builds");
    let names: Vec<&str> = fabric.hosts().iter().map(|h| h.name.as_str()).collect();
    let expected: Vec<String> = (0..60).map(|i| format!("node{i:02}")).collect();
    assert_eq!(names, expected);

    let report = fabric.report();
    let mut switches: Vec<&str> = report
        .cluster_switches
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    switches.sort_unstable();
    assert_eq!(
        switches,
        ["sub0", "sub1", "sub2", "sub3", "sub4", "sub5", "top"]
    );

    assert_eq!(report.cables.len(), 60 + 6);
    let cables: BTreeSet<(&str, &str)> = report
        .cables
        .iter()
        .map(|c| (c.a.as_str(), c.b.as_str()))
        .collect();
    for i in 0..60 {
        let (ntb, sub) = (format!("node{i:02}.ntb0"), format!("sub{}", i / 10));
        assert!(
            cables.contains(&(ntb.as_str(), sub.as_str())),
            "no cable from {ntb} to {sub}"
        );
    }
    for s in 0..6 {
        let sub = format!("sub{s}");
        assert!(
            cables.contains(&(sub.as_str(), "top")),
            "no uplink from {sub} to top"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------

#[test]
fn peer_to_peer_under_one_switch_never_reaches_the_root_complex() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    let (dma0, gpu0) = (
        endpoint(&fabric, local, "dma0"),
        endpoint(&fabric, local, "gpu0"),
    );
    let bar1 = bar(&fabric, gpu0, 1);

    let route = fabric
        .route(
            Requester::Device(dma0),
            BusAddr(bar1.start + 0x1230),
            256,
            Access::Write,
        )
        .expect("gpu0 BAR1 is reachable from dma0");

    assert_eq!(
        route.target,
        Target::Bar {
            endpoint: gpu0,
            bar: 1,
            offset: 0x1230
        }
    );
    assert_eq!(route.len, 256);
    assert!(route.translations.is_empty());
    assert!(
        !route.crosses(fabric.host(local).root),
        "{:?}",
        path(&fabric, &route)
    );
    assert_eq!(
        path(&fabric, &route),
        [
            (Dir::Up, "local.chassis".to_string()),
            (Dir::Down, "local.gpu0".to_string())
        ]
    );
}

#[test]
fn a_dma_write_to_ram_climbs_four_links_to_the_root_complex() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    let dma0 = endpoint(&fabric, local, "dma0");

    let route = fabric
        .route(
            Requester::Device(dma0),
            BusAddr(0x10_0000),
            4096,
            Access::Write,
        )
        .expect("RAM is reachable");

    assert_eq!(
        route.target,
        Target::Memory {
            host: local,
            addr: PhysAddr(0x10_0000)
        }
    );
    assert_eq!(route.len, 4096);
    assert_eq!(
        path(&fabric, &route),
        [
            (Dir::Up, "local.chassis".to_string()),
            (Dir::Up, "local.hib68-target".to_string()),
            (Dir::Up, "local.hib68-host".to_string()),
            (Dir::Up, "local".to_string()),
        ]
    );
    assert_eq!(
        route.hops.last().map(|h| h.node),
        Some(fabric.host(local).root)
    );
}

#[test]
fn the_extra_hop_scenario_adds_one_link_to_the_path_to_ram() {
    let lengths: Vec<usize> = ["local-chassis", "local-chassis-extra-hop"]
        .iter()
        .map(|name| {
            let fabric = load_fabric(name).expect("builds");
            let dma0 = endpoint(&fabric, host(&fabric, "local"), "dma0");
            let route = fabric
                .route(Requester::Device(dma0), BusAddr(0), 64, Access::Write)
                .expect("RAM");
            assert!(
                matches!(route.target, Target::Memory { .. }),
                "{name}: {:?}",
                route.target
            );
            route.hops.len()
        })
        .collect();
    assert_eq!(lengths, [4, 5]);
}

#[test]
fn a_cpu_access_to_a_bar_walks_down_from_the_root_complex() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    let nvme0 = endpoint(&fabric, local, "nvme0");
    let regs = bar(&fabric, nvme0, 0);

    let route = fabric
        .route(
            Requester::Cpu(local),
            BusAddr(regs.start + 0x1000),
            4,
            Access::Write,
        )
        .expect("BAR0");

    assert_eq!(
        route.target,
        Target::Bar {
            endpoint: nvme0,
            bar: 0,
            offset: 0x1000
        }
    );
    assert_eq!(
        path(&fabric, &route),
        [
            (Dir::Down, "local.hib68-host".to_string()),
            (Dir::Down, "local.hib68-target".to_string()),
            (Dir::Down, "local.chassis".to_string()),
            (Dir::Down, "local.nvme0".to_string()),
        ]
    );
}

#[test]
fn addresses_nobody_claims_are_unsupported_requests_from_cpu_and_device() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    let h = fabric.host(local);
    let (dma0, nvme0) = (
        endpoint(&fabric, local, "dma0"),
        endpoint(&fabric, local, "nvme0"),
    );
    let root_port = h
        .bridges
        .iter()
        .find(|b| b.role == BridgeRole::RootPort)
        .expect("a root port");
    let (mem, pref) = (
        root_port.mem.clone().expect("mem window"),
        root_port.pref.clone().expect("pref window"),
    );
    let ram_end = h.ram.iter().map(|r| r.end).max().expect("RAM");
    let nvme_regs = bar(&fabric, nvme0, 0);
    let nvme_port = bridges_above(&fabric, fabric.endpoint(nvme0).node)[0];
    assert!(
        nvme_port
            .mem
            .as_ref()
            .is_some_and(|w| w.contains(&nvme_regs.end)),
        "test bug: the gap after nvme0's BAR should lie inside its port's window"
    );

    let unclaimed = [
        ("in 32-bit MMIO above every window", mem.end),
        ("at the last byte of 32-bit MMIO", h.mmio32.end - 1),
        ("between 32-bit MMIO and the MSI range", h.mmio32.end),
        ("right after the MSI range", h.msi.end),
        ("right after the end of RAM", ram_end),
        ("just below 64-bit MMIO", h.mmio64.start - 1),
        ("in 64-bit MMIO above every window", pref.end),
        ("in nvme0's port window past its BAR", nvme_regs.end),
    ];
    for (what, addr) in unclaimed {
        assert!(
            expected_target(&fabric, local, addr).is_none(),
            "test bug: {addr:#x} ({what}) is claimed in the address map"
        );
        for requester in [Requester::Cpu(local), Requester::Device(dma0)] {
            for access in [Access::Read, Access::Write] {
                assert_eq!(
                    fabric.route(requester, BusAddr(addr), 4, access),
                    Err(unsupported(&fabric, local, addr)),
                    "{requester:?} {access:?} at {addr:#x} ({what})"
                );
            }
        }
    }
}

#[test]
fn a_zero_length_access_is_refused() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    assert_eq!(
        fabric.route(Requester::Cpu(local), BusAddr(0), 0, Access::Read),
        Err(RouteError::Empty)
    );
}

#[test]
fn every_boundary_of_the_address_map_routes_where_the_map_says() {
    const LEN: u64 = 8;
    let mut routed = 0;
    for fabric in shipped_fabrics() {
        for id in host_ids(&fabric) {
            let h = fabric.host(id);
            // With the IOMMU on, a device's request is translated first (and, with nothing
            // mapped yet, faults); only the CPU's requests follow the address map directly.
            let devices = if h.iommu.enabled() {
                &[][..]
            } else {
                &h.endpoints[..]
            };
            let requesters = std::iter::once(Requester::Cpu(id))
                .chain(devices.iter().map(|&e| Requester::Device(e)));
            let addresses: BTreeSet<u64> = boundaries(&fabric, id)
                .into_iter()
                .flat_map(|b| [b.saturating_sub(LEN), b.saturating_sub(1), b, b + 1])
                .collect();
            for requester in requesters {
                for &addr in &addresses {
                    let expected = expected_target(&fabric, id, addr);
                    // Left out: a device's request for its own BAR. A real downstream port
                    // rejects an upstream request inside its own window (inverse decode); the
                    // model turns it around at the switch instead.
                    if let (Requester::Device(me), Some((Target::Bar { endpoint, .. }, _))) =
                        (requester, expected)
                    {
                        if endpoint == me {
                            continue;
                        }
                    }
                    let got = fabric.route(requester, BusAddr(addr), LEN, Access::Write);
                    let what = format!("{}: {requester:?} write at {addr:#x}", fabric.name);
                    let ntb_window = matches!(expected, Some((Target::Bar { endpoint, bar: 2, .. }, _))
                        if fabric.endpoint(endpoint).kind == "ntb");
                    match expected {
                        // Nothing is mapped yet: every window entry is invalid.
                        Some(_) if ntb_window => assert!(
                            matches!(got, Err(RouteError::NtbNoTranslation { .. })),
                            "{what}: {got:?}"
                        ),
                        Some((target, end)) => {
                            let route = got.unwrap_or_else(|e| panic!("{what}: {e}"));
                            assert_eq!(route.target, target, "{what}");
                            assert_eq!(route.len, LEN.min(end - addr), "{what}");
                        }
                        None => assert_eq!(got, Err(unsupported(&fabric, id, addr)), "{what}"),
                    }
                    routed += 1;
                }
            }
        }
    }
    assert!(routed > 1000, "only {routed} routes checked");
}

#[test]
fn a_route_is_clipped_at_the_end_of_its_bar() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    let (dma0, gpu0) = (
        endpoint(&fabric, local, "dma0"),
        endpoint(&fabric, local, "gpu0"),
    );
    let bar0 = bar(&fabric, gpu0, 0);
    let bar1 = bar(&fabric, gpu0, 1);

    let cpu = fabric
        .route(
            Requester::Cpu(local),
            BusAddr(bar0.end - 16),
            4096,
            Access::Read,
        )
        .expect("BAR0");
    assert_eq!(
        cpu.target,
        Target::Bar {
            endpoint: gpu0,
            bar: 0,
            offset: bar0.end - bar0.start - 16
        }
    );
    assert_eq!(cpu.len, 16);

    // BAR1 is followed directly by BAR3: the rest of the access is a separate route.
    let first = fabric
        .route(
            Requester::Device(dma0),
            BusAddr(bar1.end - 100),
            1000,
            Access::Write,
        )
        .expect("BAR1");
    assert_eq!(
        first.target,
        Target::Bar {
            endpoint: gpu0,
            bar: 1,
            offset: bar1.end - bar1.start - 100
        }
    );
    assert_eq!(first.len, 100);
    let rest = fabric
        .route(
            Requester::Device(dma0),
            BusAddr(bar1.end),
            900,
            Access::Write,
        )
        .expect("BAR3");
    assert_eq!(
        rest.target,
        Target::Bar {
            endpoint: gpu0,
            bar: 3,
            offset: 0
        }
    );
    assert_eq!(rest.len, 900);
}

#[test]
fn a_route_is_clipped_at_the_end_of_ram() {
    let fabric = load_fabric("local-chassis").expect("builds");
    let local = host(&fabric, "local");
    let dma0 = endpoint(&fabric, local, "dma0");
    let low = fabric.host(local).ram[0].clone();

    let route = fabric
        .route(
            Requester::Device(dma0),
            BusAddr(low.end - 64),
            4096,
            Access::Write,
        )
        .expect("RAM");

    assert_eq!(
        route.target,
        Target::Memory {
            host: local,
            addr: PhysAddr(low.end - 64)
        }
    );
    assert_eq!(route.len, 64);
}

#[test]
fn a_borrower_cpu_access_to_its_ntb_window_crosses_to_the_lender_once_mapped() {
    let mut fabric = load_fabric("back-to-back").expect("builds");
    let (borrower, lender) = (host(&fabric, "borrower"), host(&fabric, "lender"));
    let ntb0 = endpoint(&fabric, borrower, "ntb0");
    let window = bar(&fabric, ntb0, 2);
    let addr = BusAddr(window.start + (1 << 30));

    let unmapped = fabric.route(Requester::Cpu(borrower), addr, 64, Access::Write);
    assert_eq!(
        unmapped,
        Err(RouteError::NtbNoTranslation {
            adapter: "borrower.ntb0".to_string(),
            addr
        })
    );

    let (local, far) = (
        fabric.host_adapter(borrower, 0).expect("adapter 0"),
        fabric.host_adapter(lender, 0).expect("adapter 0"),
    );
    let map = fabric
        .ntb_map(local, LutTarget::Adapter(far), 0x1234_5000, 4096)
        .expect("mapped");
    let route = fabric
        .route(
            Requester::Cpu(borrower),
            BusAddr(map.bus_addr),
            64,
            Access::Write,
        )
        .expect("routed");
    assert_eq!(
        route.target,
        Target::Memory {
            host: lender,
            addr: PhysAddr(0x1234_5000)
        }
    );
    assert_eq!(
        path(&fabric, &route),
        [
            (Dir::Down, "borrower.ntb0".to_string()),
            // The cable was declared on the lender's side, so it runs lender -> borrower.
            (Dir::Up, "lender.ntb0".to_string()),
            (Dir::Up, "lender.chassis".to_string()),
            (Dir::Up, "lender.hib68-target".to_string()),
            (Dir::Up, "lender.hib68-host".to_string()),
            (Dir::Up, "lender".to_string()),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Routing with the host IOMMU on
// ---------------------------------------------------------------------------------------------

#[test]
fn with_the_iommu_on_peer_to_peer_goes_through_the_root_complex_and_needs_a_mapping() {
    let mut fabric = local_chassis_with_iommu();
    let local = host(&fabric, "local");
    let root = fabric.host(local).root;
    let (dma0, gpu0) = (
        endpoint(&fabric, local, "dma0"),
        endpoint(&fabric, local, "gpu0"),
    );
    let bar1 = bar(&fabric, gpu0, 1);
    let iova = 0x4000_0000;

    // The physical address of the BAR is no longer reachable directly: ACS sends the request up.
    let fault = |reason, addr| RouteError::IommuFault {
        host: "local".to_string(),
        requester: "dma0".to_string(),
        addr: BusAddr(addr),
        access: "write",
        reason,
    };
    assert_eq!(
        fabric.route(
            Requester::Device(dma0),
            BusAddr(bar1.start),
            64,
            Access::Write
        ),
        Err(fault(FaultReason::NoDomain, bar1.start))
    );

    let iommu = fabric.iommu_mut(local);
    let domain = iommu.create_domain().expect("IOMMU is on");
    iommu.attach(dma0, domain).expect("domain exists");
    assert_eq!(
        fabric.route(Requester::Device(dma0), BusAddr(iova), 64, Access::Write),
        Err(fault(FaultReason::NotMapped, iova))
    );

    fabric
        .iommu_mut(local)
        .map(domain, BusAddr(iova), PhysAddr(bar1.start), PAGE_SIZE, true)
        .expect("map one page onto gpu0 BAR1");
    let route = fabric
        .route(
            Requester::Device(dma0),
            BusAddr(iova + 0x10),
            2 * PAGE_SIZE,
            Access::Write,
        )
        .expect("mapped");

    assert_eq!(
        route.target,
        Target::Bar {
            endpoint: gpu0,
            bar: 1,
            offset: 0x10
        }
    );
    assert!(!route.translations.is_empty());
    assert!(route.crosses(root));
    assert_eq!(route.len, PAGE_SIZE - 0x10, "only one page is mapped");
    assert_eq!(
        path(&fabric, &route),
        [
            (Dir::Up, "local.chassis".to_string()),
            (Dir::Up, "local.hib68-target".to_string()),
            (Dir::Up, "local.hib68-host".to_string()),
            (Dir::Up, "local".to_string()),
            (Dir::Down, "local.hib68-host".to_string()),
            (Dir::Down, "local.hib68-target".to_string()),
            (Dir::Down, "local.chassis".to_string()),
            (Dir::Down, "local.gpu0".to_string()),
        ]
    );
}

#[test]
fn with_the_iommu_on_a_read_only_mapping_refuses_writes_but_serves_reads() {
    let mut fabric = local_chassis_with_iommu();
    let local = host(&fabric, "local");
    let dma0 = endpoint(&fabric, local, "dma0");
    let iommu = fabric.iommu_mut(local);
    let domain = iommu.create_domain().expect("IOMMU is on");
    iommu.attach(dma0, domain).expect("domain exists");
    iommu
        .map(domain, BusAddr(0), PhysAddr(0x20_0000), PAGE_SIZE, false)
        .expect("map");

    let read = fabric
        .route(Requester::Device(dma0), BusAddr(8), 8, Access::Read)
        .expect("readable");
    assert_eq!(
        read.target,
        Target::Memory {
            host: local,
            addr: PhysAddr(0x20_0008)
        }
    );
    assert!(matches!(
        fabric.route(Requester::Device(dma0), BusAddr(8), 8, Access::Write),
        Err(RouteError::IommuFault {
            reason: FaultReason::ReadOnly,
            ..
        })
    ));
}

#[test]
fn with_the_iommu_on_cpu_accesses_are_not_translated() {
    let fabric = local_chassis_with_iommu();
    let local = host(&fabric, "local");
    let gpu0 = endpoint(&fabric, local, "gpu0");
    let bar1 = bar(&fabric, gpu0, 1);

    let route = fabric
        .route(
            Requester::Cpu(local),
            BusAddr(bar1.start + 0x40),
            64,
            Access::Write,
        )
        .expect("BAR1");

    assert_eq!(
        route.target,
        Target::Bar {
            endpoint: gpu0,
            bar: 1,
            offset: 0x40
        }
    );
    assert!(route.translations.is_empty());
    assert_eq!(route.hops.len(), 4);
    let ram = fabric
        .route(Requester::Cpu(local), BusAddr(0x1000), 64, Access::Read)
        .expect("RAM");
    assert_eq!(
        ram.target,
        Target::Memory {
            host: local,
            addr: PhysAddr(0x1000)
        }
    );
}

#[test]
fn with_the_iommu_on_a_device_msi_write_still_reaches_the_interrupt_controller() {
    // x86 IOMMUs (VT-d, AMD-Vi) do not DMA-remap the interrupt range 0xFEEx_xxxx: a write there
    // is an interrupt request, and Linux reserves that IOVA range (IOMMU_RESV_MSI).
    let fabric = local_chassis_with_iommu();
    let local = host(&fabric, "local");
    let dma0 = endpoint(&fabric, local, "dma0");
    let msi = fabric.host(local).msi.start;

    let route = fabric
        .route(Requester::Device(dma0), BusAddr(msi), 4, Access::Write)
        .expect("MSI");

    assert_eq!(
        route.target,
        Target::Interrupt {
            host: local,
            addr: PhysAddr(msi)
        }
    );
    assert!(route.translations.is_empty());
    assert_eq!(
        route.hops.last().map(|h| h.node),
        Some(fabric.host(local).root)
    );
}
