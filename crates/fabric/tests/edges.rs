//! Edges of enumeration and of the IOMMU that mutation testing found unobserved
//! (`docs/mutants.md`): bus numbers handed out one by one up to the 256th, a switch of at
//! most 32 downstream ports, a 64-bit MMIO region filled to its last byte, and the IOMMU's
//! alignment rules checked one argument at a time, translations across adjacent mappings.

use smartio_fabric::iommu::FaultReason;
use smartio_fabric::topology::BridgeRole;
use smartio_fabric::{
    parse_scenario, BarKind, BarSpec, ClusterNodeId, DomainId, EndpointId, EndpointLayout, Fabric,
    Iommu, IommuError, ScenarioError,
};
use smartio_platform::{BusAddr, PhysAddr};
use std::collections::BTreeSet;

/// 16 TiB: the size of a host's 64-bit MMIO region.
const MMIO64: u64 = 1 << 44;

/// A 16 KiB BAR per device, except kind `huge` (one 64-bit prefetchable BAR of `size`
/// bytes, from the device's params).
fn layout(kind: &str, params: &toml::Table) -> Result<EndpointLayout, String> {
    let (size, bar_kind) = if kind == "huge" {
        let size = params
            .get("size")
            .and_then(toml::Value::as_integer)
            .ok_or("huge needs size")?;
        (size as u64, BarKind::Mem64Prefetch)
    } else {
        (16 << 10, BarKind::Mem64)
    };
    Ok(EndpointLayout {
        vendor_id: 0x1234,
        device_id: 0x0001,
        class_code: 0,
        description: "test device".into(),
        bars: vec![BarSpec {
            index: 0,
            size,
            kind: bar_kind,
        }],
        sriov: None,
    })
}

/// One host whose root complex has a switch per entry of `ports`, each with that many
/// devices below it.
fn switches(ports: &[usize]) -> String {
    let mut t = String::from(
        "name = \"edges\"\ndescription = \"test\"\n\n[[host]]\nname = \"h\"\nram = \"4 GiB\"\niommu = false\n",
    );
    for (s, &n) in ports.iter().enumerate() {
        t += &format!(
            "\n[[host.switch]]\nname = \"sw{s}\"\nchip = \"PEX8796\"\nparent = \"root\"\nlink = \"gen3 x16\"\n"
        );
        for d in 0..n {
            t += &format!(
                "\n[[host.device]]\nname = \"d{s}_{d}\"\nkind = \"dma\"\nparent = \"sw{s}\"\nlink = \"gen3 x1\"\n"
            );
        }
    }
    t
}

fn build(text: &str) -> Result<Fabric, ScenarioError> {
    let spec = parse_scenario("edges", text).expect("parses");
    Fabric::build(&spec, &layout)
}

#[test]
fn every_bridge_gets_the_next_bus_number_up_to_the_256th_bus() {
    // Bus 0 is the root complex's; each root port, switch upstream port and downstream
    // port takes one more: 7 switches of 32 devices (34 bridges each) and one of 15 (17)
    // use buses 1..=255 exactly.
    let mut ports = vec![32; 7];
    ports.push(15);
    let fabric = build(&switches(&ports)).expect("256 buses fit");
    let bridges = &fabric.hosts()[0].bridges;
    assert_eq!(bridges.len(), 255);
    let secondaries: Vec<u8> = bridges.iter().map(|b| b.secondary).collect();
    let mut sorted = secondaries.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=255).collect::<Vec<u8>>(), "each bus once");
    let device_buses: BTreeSet<u8> = fabric.endpoints().iter().map(|e| e.bdf.bus).collect();
    assert_eq!(device_buses.len(), 239, "a bus of its own per device");
    // Each root port's subordinate bus is the last bus below it: its switch's upstream
    // port and 32 downstream ports (15 for the last switch).
    let root_ports: Vec<(u8, u8)> = bridges
        .iter()
        .filter(|b| b.role == BridgeRole::RootPort)
        .map(|b| (b.secondary, b.subordinate))
        .collect();
    let expected: Vec<(u8, u8)> = (0..8u8)
        .map(|i| (1 + 34 * i, if i < 7 { 34 * (i + 1) } else { 255 }))
        .collect();
    assert_eq!(
        root_ports, expected,
        "(secondary, subordinate) of each root port"
    );
    // One more device needs a 257th bus.
    *ports.last_mut().expect("sw7") = 16;
    let err = build(&switches(&ports)).expect_err("257 buses");
    assert!(
        err.to_string().contains("more than 256 buses needed"),
        "{err}"
    );
}

#[test]
fn a_switch_takes_32_downstream_ports_and_not_33() {
    let fabric = build(&switches(&[32])).expect("32 ports");
    assert_eq!(fabric.endpoints().len(), 32);
    let err = build(&switches(&[33])).expect_err("33 ports");
    assert!(
        err.to_string()
            .contains("switch h.sw0 has 33 downstream ports, at most 32"),
        "{err}"
    );
}

#[test]
fn the_64_bit_mmio_region_can_be_filled_to_its_last_byte_and_no_further() {
    // `n` devices on root ports of their own, each with one 1 TiB BAR: the region starts on
    // a 1 TiB boundary, so 16 fill its 16 TiB exactly.
    let huge = |n: usize| {
        let mut t = String::from(
            "name = \"edges\"\ndescription = \"test\"\n\n[[host]]\nname = \"h\"\nram = \"4 GiB\"\niommu = false\n",
        );
        for d in 0..n {
            t += &format!(
                "\n[[host.device]]\nname = \"big{d}\"\nkind = \"huge\"\nparent = \"root\"\nlink = \"gen3 x16\"\nparams = {{ size = {} }}\n",
                MMIO64 / 16
            );
        }
        t
    };
    let fabric = build(&huge(16)).expect("16 TiB of BARs in the 16 TiB region");
    let host = &fabric.hosts()[0];
    let end = fabric
        .endpoints()
        .iter()
        .map(|e| e.bars[0].base.get() + e.bars[0].size)
        .max();
    assert_eq!(
        end,
        Some(host.mmio64.end),
        "the last BAR ends where the region does"
    );
    assert_eq!(host.mmio64.end - host.mmio64.start, MMIO64);
    let err = build(&huge(17)).expect_err("one more");
    assert!(
        err.to_string()
            .contains("64-bit MMIO space exhausted: devices need 17T (natural alignment included) but the region holds 16T (the largest BAR is device \"big0\" BAR0, 1T)"),
        "{err}"
    );
}

#[test]
fn an_iommu_reports_whether_it_is_on() {
    assert!(Iommu::new(true).enabled());
    assert!(!Iommu::new(false).enabled());
}

#[test]
fn iommu_map_and_unmap_check_each_argument_for_alignment() {
    let mut iommu = Iommu::new(true);
    let d = iommu.create_domain().expect("domain");
    let page = 4096;
    let misaligned = |e: Result<(), IommuError>| matches!(e, Err(IommuError::Misaligned { .. }));
    for (iova, phys, len, what) in [
        (page + 8, 0, page, "iova"),
        (page, 8, page, "phys"),
        (page, 0, page + 8, "len"),
        (page, 0, 0, "zero length"),
    ] {
        let r = iommu.map(d, BusAddr(iova), PhysAddr(phys), len, true);
        assert!(misaligned(r), "map with a misaligned {what}");
    }
    assert_eq!(iommu.mapped_pages(d), Ok(0), "nothing was mapped");
    iommu
        .map(d, BusAddr(page), PhysAddr(0), 4 * page, true)
        .expect("map 4 pages");
    assert!(
        misaligned(iommu.unmap(d, BusAddr(page + 8), page)),
        "unmap iova"
    );
    assert!(
        misaligned(iommu.unmap(d, BusAddr(page), page + 8)),
        "unmap len"
    );
    assert_eq!(iommu.mapped_pages(d), Ok(4), "nothing was unmapped");
    // Cutting the middle out of a run leaves both ends mapped where they were.
    let ep = EndpointId(1);
    iommu.attach(ep, d).expect("attach");
    assert_eq!(iommu.domain_of(ep), Some(d));
    assert_eq!(iommu.domain_of(EndpointId(2)), None);
    iommu
        .unmap(d, BusAddr(2 * page), 2 * page)
        .expect("unmap the middle");
    assert_eq!(iommu.mapped_pages(d), Ok(2));
    let t = |iova: u64| iommu.translate(ep, BusAddr(iova), 4 * page, false);
    assert_eq!(
        t(page),
        Ok((PhysAddr(0), page)),
        "the first page, alone now"
    );
    assert_eq!(t(2 * page), Err(FaultReason::NotMapped), "the cut");
    assert_eq!(t(4 * page), Ok((PhysAddr(3 * page), page)), "the last page");
    let unknown = DomainId(7);
    assert_eq!(
        iommu.map(unknown, BusAddr(0), PhysAddr(0), page, true),
        Err(IommuError::UnknownDomain(unknown))
    );
}

#[test]
fn a_translation_runs_on_through_mappings_that_continue_it_and_stops_where_one_does_not() {
    let mut iommu = Iommu::new(true);
    let d = iommu.create_domain().expect("domain");
    let ep = EndpointId(3);
    iommu.attach(ep, d).expect("attach");
    let page = 4096;
    let phys = 0x10_0000;
    // Three writable runs continuing each other in both spaces, a read-only fourth that
    // continues them, and a fifth that continues the I/O virtual range but not the physical.
    for (i, (pages, writable)) in [(2, true), (1, true), (3, true), (2, false)]
        .iter()
        .enumerate()
    {
        let at: u64 = [0, 2, 3, 6][i];
        iommu
            .map(
                d,
                BusAddr(at * page),
                PhysAddr(phys + at * page),
                pages * page,
                *writable,
            )
            .expect("map");
    }
    iommu
        .map(d, BusAddr(8 * page), PhysAddr(0x90_0000), page, true)
        .expect("map");
    let t = |iova: u64, len: u64, write: bool| iommu.translate(ep, BusAddr(iova), len, write);
    // A write from inside the first page runs through the writable runs (6 pages) and stops
    // at the read-only one.
    assert_eq!(
        t(100, 16 * page, true),
        Ok((PhysAddr(phys + 100), 6 * page - 100))
    );
    // A read goes on through the read-only run and stops where physical contiguity ends.
    assert_eq!(
        t(100, 16 * page, false),
        Ok((PhysAddr(phys + 100), 8 * page - 100))
    );
    // Shorter than what is contiguous: just the length asked.
    assert_eq!(
        t(page, 3 * page, true),
        Ok((PhysAddr(phys + page), 3 * page))
    );
    assert_eq!(
        t(8 * page + 8, 2 * page, true),
        Ok((PhysAddr(0x90_0008), page - 8))
    );
}

#[test]
fn a_cluster_node_id_displays_as_its_number() {
    assert_eq!(ClusterNodeId(12).to_string(), "12");
}
