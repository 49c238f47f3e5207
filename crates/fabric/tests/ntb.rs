//! NTB translation, requester-id tables, cable paths, link state and multicast, tested through
//! the fabric's public API on the scenario files that have NTBs.
//!
//! ```text
//!   back-to-back     borrower.ntb0 ════════════════ lender.ntb0
//!   cluster-switch   borrower.ntb0 ══ mxs824 ══ lender.ntb0, lender2.ntb0
//!   cascade-60       nodeNN.ntb0 ══ sub(NN/10) ══ top
//! ```

use proptest::prelude::*;
use smartio_fabric::{
    parse_scenario, Access, AdapterId, BarKind, BarSpec, ClusterNodeId, EndpointId, EndpointLayout,
    Fabric, GroupId, HostId, LutTarget, MulticastError, NodeKind, NtbError, NtbMapping,
    NtbTableSizes, Requester, Route, RouteError, Target,
};
use smartio_platform::{BusAddr, PhysAddr};
use std::collections::BTreeSet;

const BACK_TO_BACK: &str = include_str!("../../../scenarios/back-to-back.toml");
const CLUSTER_SWITCH: &str = include_str!("../../../scenarios/cluster-switch.toml");
const CASCADE_60: &str = include_str!("../../../scenarios/cascade-60.toml");

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Every device gets one 16 KiB BAR0; the fabric never looks further.
fn layout(_: &str, _: &toml::Table) -> Result<EndpointLayout, String> {
    Ok(EndpointLayout {
        vendor_id: 0x1234,
        device_id: 0x0001,
        class_code: 0,
        description: "test device".into(),
        bars: vec![BarSpec {
            index: 0,
            size: 16 * KIB,
            kind: BarKind::Mem64,
        }],
        sriov: None,
    })
}

fn build(name: &str, text: &str) -> Fabric {
    let spec = parse_scenario(name, text).expect("valid scenario");
    Fabric::build(&spec, &layout).expect("enumerates")
}

fn host(fabric: &Fabric, name: &str) -> HostId {
    fabric.host_by_name(name).expect("host exists")
}

/// Adapter `ntb<number>` of the named host.
fn adapter(fabric: &Fabric, host_name: &str, number: u32) -> AdapterId {
    fabric
        .host_adapter(host(fabric, host_name), number)
        .expect("adapter exists")
}

fn device(fabric: &Fabric, host_name: &str, name: &str) -> EndpointId {
    fabric
        .endpoint_by_name(host(fabric, host_name), name)
        .expect("device exists")
}

fn cpu_write(fabric: &Fabric, from: HostId, addr: u64, len: u64) -> Result<Route, RouteError> {
    fabric.route(Requester::Cpu(from), BusAddr(addr), len, Access::Write)
}

fn node_names(fabric: &Fabric, hops: &[smartio_fabric::Hop]) -> Vec<String> {
    hops.iter()
        .map(|h| fabric.node(h.node).name.clone())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. Translation round trip (property)
// ---------------------------------------------------------------------------------------------

/// A mapping request: where in the far host's RAM (as fractions, so the strategy does not need
/// the fabric), how long, and which offsets inside it to probe.
#[derive(Debug, Clone)]
struct MapRequest {
    range_pick: prop::sample::Index,
    start_pick: prop::sample::Index,
    len: u64,
    probes: Vec<prop::sample::Index>,
}

fn map_request() -> impl Strategy<Value = MapRequest> {
    (
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        1..=64 * MIB,
        prop::collection::vec(any::<prop::sample::Index>(), 1..6),
    )
        .prop_map(|(range_pick, start_pick, len, probes)| MapRequest {
            range_pick,
            start_pick,
            len,
            probes,
        })
}

/// Scenario text, local adapter (host, number) and far adapter (host, number).
fn adapter_pair() -> impl Strategy<Value = (&'static str, &'static str, &'static str)> {
    prop_oneof![
        Just(("back-to-back", "borrower", "lender")),
        Just(("back-to-back", "lender", "borrower")),
        Just(("cluster-switch", "borrower", "lender")),
        Just(("cluster-switch", "borrower", "lender2")),
        Just(("cluster-switch", "lender", "borrower")),
        Just(("cluster-switch", "lender", "lender2")),
        Just(("cluster-switch", "lender2", "borrower")),
        Just(("cluster-switch", "lender2", "lender")),
    ]
}

/// Every sampled offset of a mapping: the first and last byte and the probes.
fn offsets(m: &NtbMapping, probes: &[prop::sample::Index]) -> Vec<u64> {
    let mut v = vec![0, m.len - 1];
    v.extend(probes.iter().map(|p| p.index(m.len as usize) as u64));
    v
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mapped_bytes_translate_to_their_remote_address_and_back(
        (scenario, local_host, far_host) in adapter_pair(),
        requests in prop::collection::vec(map_request(), 1..=16),
        unmap_mask in prop::collection::vec(any::<bool>(), 16),
        hole_probe in any::<prop::sample::Index>(),
        skip in 0..=32u32,
    ) {
        let text = if scenario == "back-to-back" { BACK_TO_BACK } else { CLUSTER_SWITCH };
        let mut fabric = build(scenario, text);
        let local = adapter(&fabric, local_host, 0);
        let far = adapter(&fabric, far_host, 0);
        let local_h = host(&fabric, local_host);
        let far_h = host(&fabric, far_host);
        let target = LutTarget::Adapter(far);
        let (window, entry_size) = {
            let a = fabric.adapter(local);
            (a.window.clone(), a.entry_size)
        };
        // 128 GiB window over the default 64 entries.
        prop_assert_eq!(window.end - window.start, 128 * GIB);
        prop_assert_eq!(entry_size, 2 * GIB);

        // A filler run, unmapped again below, pushes the mappings up to the table's end.
        let filler = (skip > 0).then(|| {
            fabric.ntb_map(local, target, 0, u64::from(skip) * entry_size).expect("fits")
        });

        let ram = fabric.host(far_h).ram.clone();
        let mut mappings = Vec::new();
        for r in &requests {
            let range = &ram[r.range_pick.index(ram.len())];
            let room = range.end - range.start - r.len + 1;
            let remote = range.start + r.start_pick.index(room as usize) as u64;
            let used_before = fabric.adapter(local).lut_used();
            let m = fabric.ntb_map(local, target, remote, r.len).expect("fits in 64 entries");
            let expected_entries = if remote / entry_size == (remote + r.len - 1) / entry_size {
                1
            } else {
                2
            };
            prop_assert_eq!(m.entries, expected_entries);
            prop_assert_eq!(m.adapter, local);
            prop_assert_eq!(m.len, r.len);
            prop_assert_eq!(
                m.bus_addr,
                window.start + u64::from(m.first_entry) * entry_size + remote % entry_size
            );
            prop_assert_eq!(fabric.adapter(local).lut_used(), used_before + m.entries as usize);
            mappings.push((m, remote, r));
        }

        let a = fabric.adapter(local);
        for (m, remote, r) in &mappings {
            for off in offsets(m, &r.probes) {
                let bus = m.bus_addr + off;
                let slot = ((bus - window.start) / entry_size) as u32;
                prop_assert!((m.first_entry..m.first_entry + m.entries).contains(&slot));
                prop_assert_eq!(a.translate(bus), Some((slot, target, remote + off)));
                let back = a.reverse_translate(target, remote + off);
                prop_assert!(back.contains(&bus), "{:#x} not in {:x?}", bus, back);

                let route = cpu_write(&fabric, local_h, bus, m.len - off).expect("routes");
                prop_assert_eq!(
                    route.target,
                    Target::Memory { host: far_h, addr: PhysAddr(remote + off) }
                );
                let to_entry_end = entry_size - (bus - window.start) % entry_size;
                prop_assert_eq!(route.len, (m.len - off).min(to_entry_end));
                prop_assert!(route.crosses(fabric.adapter(far).node));
                prop_assert!(route.branches.is_empty());
            }
        }

        if let Some(f) = &filler {
            prop_assert_eq!((f.first_entry, f.entries), (0, skip));
            fabric.ntb_unmap(f).expect("mapped");
        }

        // Entries no mapping took never translate.
        let taken: BTreeSet<u32> = mappings
            .iter()
            .flat_map(|(m, _, _)| m.first_entry..m.first_entry + m.entries)
            .collect();
        let adapter_name = format!("{local_host}.ntb0");
        let check_hole = |fabric: &Fabric, slot: u32| -> Result<(), TestCaseError> {
            let bus = window.start
                + u64::from(slot) * entry_size
                + hole_probe.index(entry_size as usize) as u64;
            prop_assert_eq!(fabric.adapter(local).translate(bus), None);
            prop_assert_eq!(
                cpu_write(fabric, local_h, bus, 8),
                Err(RouteError::NtbNoTranslation {
                    adapter: adapter_name.clone(),
                    addr: BusAddr(bus),
                })
            );
            Ok(())
        };
        for slot in (0..64).filter(|s| !taken.contains(s)) {
            check_hole(&fabric, slot)?;
        }

        // Unmapped ones stop translating; the others are untouched.
        for ((m, _, _), &unmap) in mappings.iter().zip(&unmap_mask) {
            if unmap {
                fabric.ntb_unmap(m).expect("mapped");
            }
        }
        for ((m, remote, r), &unmapped) in mappings.iter().zip(&unmap_mask) {
            for off in offsets(m, &r.probes) {
                let bus = m.bus_addr + off;
                let got = fabric.adapter(local).translate(bus).map(|(_, _, remote)| remote);
                if unmapped {
                    prop_assert_eq!(got, None);
                    let back = fabric.adapter(local).reverse_translate(target, remote + off);
                    prop_assert!(!back.contains(&bus), "{:#x} still in {:x?}", bus, back);
                } else {
                    prop_assert_eq!(got, Some(remote + off));
                }
            }
            if unmapped {
                for slot in m.first_entry..m.first_entry + m.entries {
                    check_hole(&fabric, slot)?;
                }
            }
        }
    }
}

#[test]
fn addresses_outside_the_window_do_not_translate() {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    let (b, l) = (
        adapter(&fabric, "borrower", 0),
        adapter(&fabric, "lender", 0),
    );
    fabric
        .ntb_map(b, LutTarget::Adapter(l), 0, 64 * MIB)
        .expect("maps");
    let a = fabric.adapter(b);
    assert_eq!(a.translate(a.window.start - 1), None);
    assert_eq!(a.translate(a.window.end), None);
    assert_eq!(
        a.translate(a.window.start),
        Some((0, LutTarget::Adapter(l), 0))
    );
    // Entry granularity: the whole first entry translates, not only the 64 MiB asked for.
    assert_eq!(
        a.translate(a.window.start + 2 * GIB - 1),
        Some((0, LutTarget::Adapter(l), 2 * GIB - 1))
    );
    assert_eq!(a.translate(a.window.start + 2 * GIB), None);

    // The last byte of the window goes through the last entry.
    fabric
        .ntb_map(b, LutTarget::Adapter(l), 1 << 40, 62 * 2 * GIB)
        .expect("entries 1..63");
    let last = fabric
        .ntb_map(b, LutTarget::Adapter(l), 6 * GIB + 5, 1)
        .expect("entry 63");
    let a = fabric.adapter(b);
    assert_eq!((last.first_entry, a.lut_used()), (63, 64));
    assert_eq!(last.bus_addr, a.window.end - 2 * GIB + 5);
    assert_eq!(
        a.translate(a.window.end - 1),
        Some((63, LutTarget::Adapter(l), 8 * GIB - 1))
    );
    assert_eq!(
        a.reverse_translate(LutTarget::Adapter(l), 8 * GIB - 1),
        [a.window.end - 1]
    );
}

#[test]
fn zero_length_and_unknown_adapters_are_refused() {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    let b = adapter(&fabric, "borrower", 0);
    let l = LutTarget::Adapter(adapter(&fabric, "lender", 0));
    assert_eq!(fabric.ntb_map(b, l, 0, 0), Err(NtbError::Empty));
    assert_eq!(
        fabric.ntb_map(AdapterId(9), LutTarget::Multicast(GroupId(0)), 0, 4096),
        Err(NtbError::UnknownAdapter(AdapterId(9)))
    );
    assert_eq!(
        fabric.ntb_map(b, LutTarget::Adapter(AdapterId(7)), 0, 4096),
        Err(NtbError::UnknownAdapter(AdapterId(7)))
    );
    assert_eq!(fabric.adapter(b).lut_used(), 0);
}

/// An unknown local adapter is `UnknownAdapter` whatever the target, not a missing cable.
#[test]
fn mapping_through_an_unknown_adapter_is_unknown_adapter() {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    let l = LutTarget::Adapter(adapter(&fabric, "lender", 0));
    assert_eq!(
        fabric.ntb_map(AdapterId(9), l, 0, 4096),
        Err(NtbError::UnknownAdapter(AdapterId(9)))
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Look-up-table exhaustion
// ---------------------------------------------------------------------------------------------

/// back-to-back with 8 look-up-table entries: 16 GiB each over the 128 GiB window.
fn eight_entry_fabric() -> (Fabric, AdapterId, LutTarget) {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    fabric.configure_ntb_tables(|_| NtbTableSizes {
        lut_entries: 8,
        requester_ids: 32,
    });
    let b = adapter(&fabric, "borrower", 0);
    let l = LutTarget::Adapter(adapter(&fabric, "lender", 0));
    assert_eq!(fabric.adapter(b).lut().len(), 8);
    assert_eq!(fabric.adapter(b).entry_size, 16 * GIB);
    (fabric, b, l)
}

#[test]
fn one_mapping_more_than_the_table_holds_is_lut_full_until_one_is_unmapped() {
    let (mut fabric, b, l) = eight_entry_fabric();
    let mut maps = Vec::new();
    for k in 0..8u32 {
        assert_eq!(fabric.adapter(b).lut_used(), k as usize);
        let m = fabric.ntb_map(b, l, 0x1000, 4096).expect("fits");
        assert_eq!((m.first_entry, m.entries), (k, 1));
        maps.push(m);
    }
    assert_eq!(fabric.adapter(b).lut_used(), 8);

    let err = fabric.ntb_map(b, l, 0x1000, 4096).unwrap_err();
    assert_eq!(
        err,
        NtbError::LutFull {
            adapter: "borrower.ntb0".into(),
            node_id: ClusterNodeId(4),
            needed: 1,
            free: 0,
            limit: 8,
            entry_size: "16G".into(),
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("borrower.ntb0"), "{msg}");
    assert!(msg.contains("of 8 free"), "{msg}");
    assert_eq!(fabric.adapter(b).lut_used(), 8);

    fabric.ntb_unmap(&maps[5]).expect("mapped");
    assert_eq!(fabric.adapter(b).lut_used(), 7);
    let again = fabric.ntb_map(b, l, 0x1000, 4096).expect("a freed entry");
    assert_eq!((again.first_entry, again.entries), (5, 1));
    assert_eq!(fabric.adapter(b).lut_used(), 8);
}

#[test]
fn a_mapping_across_an_entry_boundary_takes_two_entries() {
    let (mut fabric, b, l) = eight_entry_fabric();
    let remote = 16 * GIB - 4 * KIB;
    let m = fabric.ntb_map(b, l, remote, 8 * KIB).expect("fits");
    assert_eq!((m.first_entry, m.entries), (0, 2));
    assert_eq!(fabric.adapter(b).lut_used(), 2);
    let a = fabric.adapter(b);
    assert_eq!(m.bus_addr, a.window.start + 16 * GIB - 4 * KIB);
    assert_eq!(
        a.translate(m.bus_addr + 4 * KIB - 1),
        Some((0, l, 16 * GIB - 1))
    );
    assert_eq!(a.translate(m.bus_addr + 4 * KIB), Some((1, l, 16 * GIB)));
    assert_eq!(
        a.translate(m.bus_addr + 8 * KIB),
        Some((1, l, 16 * GIB + 4 * KIB))
    );

    // Ending exactly on the boundary stays in one entry.
    let n = fabric.ntb_map(b, l, remote, 4 * KIB).expect("fits");
    assert_eq!((n.first_entry, n.entries), (2, 1));

    fabric.ntb_unmap(&m).expect("mapped");
    assert_eq!(fabric.adapter(b).lut_used(), 1);
    assert_eq!(fabric.adapter(b).translate(m.bus_addr), None);
}

#[test]
fn free_entries_that_are_not_consecutive_do_not_fit_a_two_entry_run() {
    let (mut fabric, b, l) = eight_entry_fabric();
    let maps: Vec<_> = (0..8)
        .map(|_| fabric.ntb_map(b, l, 0, 4096).expect("fits"))
        .collect();
    fabric.ntb_unmap(&maps[1]).expect("mapped");
    fabric.ntb_unmap(&maps[3]).expect("mapped");
    assert_eq!(
        fabric.ntb_map(b, l, 16 * GIB - 1, 2),
        Err(NtbError::LutFull {
            adapter: "borrower.ntb0".into(),
            node_id: ClusterNodeId(4),
            needed: 2,
            free: 2,
            limit: 8,
            entry_size: "16G".into(),
        })
    );
    fabric.ntb_unmap(&maps[2]).expect("mapped");
    let m = fabric
        .ntb_map(b, l, 16 * GIB - 1, 2)
        .expect("entries 1..3 free");
    assert_eq!((m.first_entry, m.entries), (1, 2));
    assert_eq!(fabric.adapter(b).lut_used(), 7);
}

#[test]
fn a_mapping_larger_than_the_table_is_lut_full() {
    let (mut fabric, b, l) = eight_entry_fabric();
    assert_eq!(
        fabric.ntb_map(b, l, 0, 9 * 16 * GIB),
        Err(NtbError::LutFull {
            adapter: "borrower.ntb0".into(),
            node_id: ClusterNodeId(4),
            needed: 9,
            free: 8,
            limit: 8,
            entry_size: "16G".into(),
        })
    );
    let whole = fabric.ntb_map(b, l, 0, 8 * 16 * GIB).expect("exactly fits");
    assert_eq!((whole.first_entry, whole.entries), (0, 8));
}

#[test]
fn a_mapping_past_the_end_of_the_address_space_is_refused_and_one_ending_at_it_fits() {
    let (mut fabric, b, l) = eight_entry_fabric();
    let err = fabric.ntb_map(b, l, u64::MAX, 2).unwrap_err();
    assert_eq!(
        err,
        NtbError::BeyondAddressSpace {
            adapter: "borrower.ntb0".into(),
            remote: u64::MAX,
            len: 2,
        }
    );
    assert!(err.to_string().contains("0xffffffffffffffff"), "{err}");
    assert_eq!(fabric.adapter(b).lut_used(), 0);

    let m = fabric
        .ntb_map(b, l, u64::MAX - 4095, 4096)
        .expect("ends at 2^64 exactly");
    assert_eq!(m.entries, 1);
    let a = fabric.adapter(b);
    assert_eq!(
        a.translate(m.bus_addr + 4095),
        Some((m.first_entry, l, u64::MAX))
    );
    assert_eq!(a.reverse_translate(l, u64::MAX), vec![m.bus_addr + 4095]);

    // The whole address space needs 2^30 entries of 16 GiB: a full table, not a wrap.
    let err = fabric.ntb_map(b, l, 0, u64::MAX).unwrap_err();
    assert!(
        matches!(err, NtbError::LutFull { needed, limit: 8, .. } if needed == 1 << 30),
        "{err}"
    );
}

#[test]
fn unmapping_twice_is_not_mapped() {
    let (mut fabric, b, l) = eight_entry_fabric();
    let m = fabric.ntb_map(b, l, 0, 4096).expect("fits");
    fabric.ntb_unmap(&m).expect("mapped");
    assert_eq!(
        fabric.ntb_unmap(&m),
        Err(NtbError::NotMapped {
            adapter: "borrower.ntb0".into(),
            first: 0,
            end: 1,
        })
    );
}

/// A stale mapping handle must not remove entries that later mappings took over
/// (`NtbError::NotMapped` says "entries .. are not one mapping").
#[test]
fn unmapping_a_stale_mapping_leaves_newer_mappings_alone() {
    let (mut fabric, b, l) = eight_entry_fabric();
    let old = fabric.ntb_map(b, l, 16 * GIB - 1, 2).expect("fits");
    assert_eq!((old.first_entry, old.entries), (0, 2));
    fabric.ntb_unmap(&old).expect("mapped");
    let first = fabric.ntb_map(b, l, 0, 4096).expect("fits");
    let second = fabric.ntb_map(b, l, 32 * GIB, 4096).expect("fits");
    assert_eq!((first.first_entry, second.first_entry), (0, 1));
    assert_eq!(
        fabric.ntb_unmap(&old),
        Err(NtbError::NotMapped {
            adapter: "borrower.ntb0".into(),
            first: 0,
            end: 2,
        })
    );
    assert_eq!(fabric.adapter(b).lut_used(), 2);
}

#[test]
fn table_sizes_from_the_scenario_win_over_the_calibration() {
    let text = BACK_TO_BACK.replacen(
        "window = \"128 GiB\"\n",
        "window = \"128 GiB\"\nlut_entries = 16\nrequester_ids = 4\n",
        1,
    );
    let mut fabric = build("back-to-back", &text);
    fabric.configure_ntb_tables(|_| NtbTableSizes {
        lut_entries: 8,
        requester_ids: 32,
    });
    let b = fabric.adapter(adapter(&fabric, "borrower", 0));
    assert_eq!(
        (b.lut().len(), b.entry_size, b.requester_ids()),
        (16, 8 * GIB, 4)
    );
    let l = fabric.adapter(adapter(&fabric, "lender", 0));
    assert_eq!(
        (l.lut().len(), l.entry_size, l.requester_ids()),
        (8, 16 * GIB, 32)
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Requester ids
// ---------------------------------------------------------------------------------------------

/// back-to-back with lender.ntb0's window entry 0 mapped onto borrower RAM at 0x10_0000.
fn lender_to_borrower() -> (Fabric, AdapterId, NtbMapping) {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    let l = adapter(&fabric, "lender", 0);
    let b = adapter(&fabric, "borrower", 0);
    let m = fabric
        .ntb_map(l, LutTarget::Adapter(b), 0x10_0000, 64 * KIB)
        .expect("maps");
    (fabric, l, m)
}

fn borrower_ram(fabric: &Fabric, addr: u64) -> Target {
    Target::Memory {
        host: host(fabric, "borrower"),
        addr: PhysAddr(addr),
    }
}

#[test]
fn a_device_read_needs_a_requester_id_entry_but_its_write_does_not() {
    let (mut fabric, l, m) = lender_to_borrower();
    let dma = Requester::Device(device(&fabric, "lender", "dma0"));
    let read = |f: &Fabric| f.route(dma, BusAddr(m.bus_addr + 64), 64, Access::Read);
    assert_eq!(
        read(&fabric),
        Err(RouteError::NtbNoRequesterId {
            adapter: "lender.ntb0".into(),
            requester: "lender.dma0".into(),
        })
    );
    let write = fabric
        .route(dma, BusAddr(m.bus_addr + 64), 64, Access::Write)
        .expect("posted writes need no requester id");
    assert_eq!(write.target, borrower_ram(&fabric, 0x10_0040));

    fabric.ntb_add_requester(l, dma).expect("room");
    assert!(fabric.adapter(l).has_requester(dma));
    assert_eq!(fabric.adapter(l).requester_ids_used(), 3);
    let route = read(&fabric).expect("routes");
    assert_eq!(route.target, borrower_ram(&fabric, 0x10_0040));
    assert_eq!(route.len, 64);
    assert!(route.crosses(fabric.adapter(adapter(&fabric, "borrower", 0)).node));
}

#[test]
fn the_cpu_can_always_read_through_its_own_adapter() {
    let (mut fabric, l, m) = lender_to_borrower();
    let cpu = Requester::Cpu(host(&fabric, "lender"));
    assert_eq!(fabric.adapter(l).requester_ids(), 32);
    assert_eq!(fabric.adapter(l).requester_ids_used(), 2);
    assert!(fabric.adapter(l).has_requester(cpu));
    let route = fabric
        .route(cpu, BusAddr(m.bus_addr), 8, Access::Read)
        .expect("routes");
    assert_eq!(route.target, borrower_ram(&fabric, 0x10_0000));

    // Adding or removing the CPU changes nothing: its two entries are reserved for good.
    fabric.ntb_add_requester(l, cpu).expect("reserved");
    fabric.ntb_remove_requester(l, cpu).expect("reserved");
    fabric.ntb_remove_requester(l, cpu).expect("reserved");
    assert_eq!(fabric.adapter(l).requester_ids_used(), 2);
    assert!(fabric.adapter(l).has_requester(cpu));
}

#[test]
fn a_full_requester_table_refuses_one_more() {
    let (mut fabric, l, _) = lender_to_borrower();
    let first = 100;
    for k in 0..30 {
        fabric
            .ntb_add_requester(l, Requester::Device(EndpointId(first + k)))
            .expect("room");
    }
    assert_eq!(fabric.adapter(l).requester_ids_used(), 32);
    let extra = Requester::Device(EndpointId(first + 30));
    assert_eq!(
        fabric.ntb_add_requester(l, extra),
        Err(NtbError::RequesterTableFull {
            adapter: "lender.ntb0".into(),
            limit: 32,
        })
    );
    // A requester already present only gains a reference.
    fabric
        .ntb_add_requester(l, Requester::Device(EndpointId(first)))
        .expect("refcounted");
    fabric
        .ntb_remove_requester(l, Requester::Device(EndpointId(first + 7)))
        .expect("present");
    fabric.ntb_add_requester(l, extra).expect("a freed entry");
    assert!(fabric.adapter(l).has_requester(extra));
    assert_eq!(fabric.adapter(l).requester_ids_used(), 32);
}

#[test]
fn requester_entries_are_reference_counted() {
    let (mut fabric, l, m) = lender_to_borrower();
    let dma = Requester::Device(device(&fabric, "lender", "dma0"));
    let read = |f: &Fabric| f.route(dma, BusAddr(m.bus_addr), 4, Access::Read);
    fabric.ntb_add_requester(l, dma).expect("room");
    fabric.ntb_add_requester(l, dma).expect("refcounted");
    assert_eq!(fabric.adapter(l).requester_ids_used(), 3);

    fabric.ntb_remove_requester(l, dma).expect("present");
    assert!(fabric.adapter(l).has_requester(dma));
    assert_eq!(fabric.adapter(l).requester_ids_used(), 3);
    assert!(read(&fabric).is_ok());

    fabric.ntb_remove_requester(l, dma).expect("present");
    assert!(!fabric.adapter(l).has_requester(dma));
    assert_eq!(fabric.adapter(l).requester_ids_used(), 2);
    assert!(matches!(
        read(&fabric),
        Err(RouteError::NtbNoRequesterId { .. })
    ));
    assert_eq!(
        fabric.ntb_remove_requester(l, dma),
        Err(NtbError::UnknownRequester {
            adapter: "lender.ntb0".into(),
            requester: dma,
        })
    );
}

#[test]
fn an_adapters_own_dma_into_its_window_goes_straight_over_the_ntb() {
    let (mut fabric, l, m) = lender_to_borrower();
    let own = Requester::Device(fabric.adapter(l).endpoint);
    let write = fabric
        .route(own, BusAddr(m.bus_addr + 64), 64, Access::Write)
        .expect("routes");
    assert_eq!(write.target, borrower_ram(&fabric, 0x10_0040));
    // Inside the chip, then the cable, the far adapter and its link to the far root: the
    // adapter's own link to its host is not crossed, nor is the lender's root.
    assert_eq!(
        node_names(&fabric, &write.hops),
        ["borrower.ntb0", "borrower"]
    );
    assert_eq!(
        fabric.route(own, BusAddr(m.bus_addr), 8, Access::Read),
        Err(RouteError::NtbNoRequesterId {
            adapter: "lender.ntb0".into(),
            requester: "lender.ntb0".into(),
        }),
        "its reads need a requester-id entry like any device's"
    );
    fabric.ntb_add_requester(l, own).expect("room");
    let read = fabric
        .route(own, BusAddr(m.bus_addr), 8, Access::Read)
        .expect("routes");
    assert_eq!(read.hops, write.hops);
}

#[test]
fn an_adapters_own_dma_to_its_host_ram_goes_up_its_link() {
    let (fabric, l, _) = lender_to_borrower();
    let own = Requester::Device(fabric.adapter(l).endpoint);
    let read = fabric
        .route(own, BusAddr(0x20_0000), 512, Access::Read)
        .expect("routes");
    assert_eq!(
        read.target,
        Target::Memory {
            host: host(&fabric, "lender"),
            addr: PhysAddr(0x20_0000),
        }
    );
    assert_eq!(
        node_names(&fabric, &read.hops),
        [
            "lender.chassis",
            "lender.hib68-target",
            "lender.hib68-host",
            "lender"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Cable paths and node ids
// ---------------------------------------------------------------------------------------------

#[test]
fn back_to_back_adapters_are_one_cable_apart() {
    let fabric = build("back-to-back", BACK_TO_BACK);
    let (b, l) = (
        adapter(&fabric, "borrower", 0),
        adapter(&fabric, "lender", 0),
    );
    let ids: Vec<_> = fabric.adapters().iter().map(|a| a.node_id).collect();
    assert_eq!(ids, [ClusterNodeId(4), ClusterNodeId(8)]);
    let path = fabric.cable_path(b, l).expect("cabled");
    assert_eq!(node_names(&fabric, &path), ["lender.ntb0"]);
    assert_eq!(
        fabric.link(path[0].link).name,
        "lender.ntb0 -> borrower.ntb0"
    );
    assert_eq!(Some(path[0].link), fabric.adapter(b).cable);
    assert_eq!(fabric.cable_path(b, b), Some(Vec::new()));
}

#[test]
fn cluster_switch_paths_cross_the_switch() {
    let fabric = build("cluster-switch", CLUSTER_SWITCH);
    let names = ["borrower", "lender", "lender2"];
    for (i, name) in names.iter().enumerate() {
        let id = adapter(&fabric, name, 0);
        assert_eq!(id, AdapterId(i as u32));
        let a = fabric.adapter(id);
        assert_eq!(a.node_id, ClusterNodeId(4 * (i as u32 + 1)));
        assert_eq!(a.number, 0);
        assert_eq!(fabric.adapter_by_node_id(a.node_id), Some(id));
        assert_eq!(fabric.adapter_name(id), format!("{name}.ntb0"));
    }
    let (b, l) = (AdapterId(0), AdapterId(1));
    let path = fabric.cable_path(b, l).expect("through mxs824");
    assert_eq!(node_names(&fabric, &path), ["mxs824", "lender.ntb0"]);
    let links: Vec<_> = path.iter().map(|h| &fabric.link(h.link).name).collect();
    assert_eq!(links, ["borrower.ntb0 -> mxs824", "lender.ntb0 -> mxs824"]);
    assert!(matches!(
        fabric.node(path[0].node).kind,
        NodeKind::ClusterSwitch { .. }
    ));

    // The reverse path is the same cables the other way.
    let back = fabric.cable_path(l, b).expect("through mxs824");
    assert_eq!(node_names(&fabric, &back), ["mxs824", "borrower.ntb0"]);
    assert_eq!(back[0].dir, path[1].dir.reverse());
    assert_eq!(back[1].dir, path[0].dir.reverse());
}

#[test]
fn cascade_paths_cross_the_top_switch_only_between_sub_switches() {
    let fabric = build("cascade-60", CASCADE_60);
    assert_eq!(fabric.adapters().len(), 60);
    for (i, a) in fabric.adapters().iter().enumerate() {
        assert_eq!(a.node_id, ClusterNodeId(4 * (i as u32 + 1)));
        assert_eq!(a.number, 0);
        assert_eq!(fabric.host(a.host).name, format!("node{i:02}"));
    }
    let n = |k: u32| adapter(&fabric, &format!("node{k:02}"), 0);
    let across = fabric.cable_path(n(5), n(15)).expect("connected");
    assert_eq!(
        node_names(&fabric, &across),
        ["sub0", "top", "sub1", "node15.ntb0"]
    );
    let within = fabric.cable_path(n(1), n(2)).expect("connected");
    assert_eq!(node_names(&fabric, &within), ["sub0", "node02.ntb0"]);
    let far = fabric.cable_path(n(59), n(0)).expect("connected");
    assert_eq!(
        node_names(&fabric, &far),
        ["sub5", "top", "sub0", "node00.ntb0"]
    );
}

#[test]
fn adapters_are_never_transit_nodes() {
    let fabric = build("cascade-60", CASCADE_60);
    let top = fabric
        .nodes()
        .iter()
        .position(|n| n.name == "top")
        .expect("top switch");
    for from in 0..60u32 {
        for to in (0..60u32).filter(|&t| t != from) {
            let path = fabric
                .cable_path(AdapterId(from), AdapterId(to))
                .expect("connected");
            let (last, transit) = path.split_last().expect("not empty");
            assert_eq!(last.node, fabric.adapter(AdapterId(to)).node);
            assert!(transit
                .iter()
                .all(|h| matches!(fabric.node(h.node).kind, NodeKind::ClusterSwitch { .. })));
            let crosses_top = path.iter().any(|h| h.node.index() == top);
            assert_eq!(crosses_top, from / 10 != to / 10, "{from} -> {to}");
            assert_eq!(path.len(), if from / 10 == to / 10 { 2 } else { 4 });
        }
    }
}

/// Two back-to-back pairs; `a` has two adapters.
const TWO_PAIRS: &str = r#"
[[host]]
name = "a"
ram = "4 GiB"
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x8"
window = "1 GiB"
[[host.ntb]]
name = "ntb1"
chip = "PEX8733"
parent = "root"
link = "gen3 x8"
window = "1 GiB"
[[host]]
name = "b"
ram = "4 GiB"
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x8"
window = "1 GiB"
connect = "a.ntb0"
[[host]]
name = "c"
ram = "4 GiB"
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x8"
window = "1 GiB"
connect = "a.ntb1"
"#;

#[test]
fn adapter_numbers_count_per_host_and_disconnected_adapters_have_no_path() {
    let mut fabric = build("two-pairs", TWO_PAIRS);
    let numbers: Vec<_> = fabric
        .adapters()
        .iter()
        .map(|a| (fabric.host(a.host).name.as_str(), a.number, a.node_id.0))
        .collect();
    assert_eq!(
        numbers,
        [("a", 0, 4), ("a", 1, 8), ("b", 0, 12), ("c", 0, 16)]
    );
    let (a1, b0, c0) = (
        adapter(&fabric, "a", 1),
        adapter(&fabric, "b", 0),
        adapter(&fabric, "c", 0),
    );
    assert_eq!(fabric.adapter_name(a1), "a.ntb1");
    // b and c both reach host a, but a's adapters do not forward between their cables.
    assert_eq!(fabric.cable_path(b0, c0), None);
    assert!(!fabric.ntb_path_up(b0, c0));
    assert_eq!(
        fabric.ntb_map(b0, LutTarget::Adapter(c0), 0, 4096),
        Err(NtbError::NoPath {
            from: "b.ntb0".into(),
            to: "c.ntb0".into(),
        })
    );
    assert_eq!(fabric.adapter(b0).lut_used(), 0);
    let path = fabric.cable_path(c0, a1).expect("cabled");
    assert_eq!(node_names(&fabric, &path), ["a.ntb1"]);
}

// ---------------------------------------------------------------------------------------------
// 5. Link state
// ---------------------------------------------------------------------------------------------

#[test]
fn a_down_cable_fails_routes_across_it_until_it_comes_back() {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    let (b, l) = (
        adapter(&fabric, "borrower", 0),
        adapter(&fabric, "lender", 0),
    );
    let m = fabric
        .ntb_map(b, LutTarget::Adapter(l), 0x2000, 4096)
        .expect("maps");
    let borrower = host(&fabric, "borrower");
    let cable = fabric.adapter(b).cable.expect("cabled");
    assert_eq!(fabric.adapter(l).cable, Some(cable));
    assert!(fabric.ntb_path_up(b, l));

    fabric.set_link_up(cable, false);
    assert!(!fabric.link_is_up(cable));
    assert!(!fabric.ntb_path_up(b, l));
    assert!(!fabric.ntb_path_up(l, b));
    let down = Err(RouteError::LinkDown {
        link: "lender.ntb0 -> borrower.ntb0".into(),
    });
    assert_eq!(cpu_write(&fabric, borrower, m.bus_addr, 64), down);
    assert_eq!(
        fabric.route(
            Requester::Cpu(borrower),
            BusAddr(m.bus_addr),
            64,
            Access::Read
        ),
        down
    );

    fabric.set_link_up(cable, true);
    assert!(fabric.ntb_path_up(b, l));
    let route = cpu_write(&fabric, borrower, m.bus_addr, 64).expect("routes again");
    assert_eq!(
        route.target,
        Target::Memory {
            host: host(&fabric, "lender"),
            addr: PhysAddr(0x2000),
        }
    );
}

#[test]
fn a_down_cable_behind_the_cluster_switch_fails_only_paths_over_it() {
    let mut fabric = build("cluster-switch", CLUSTER_SWITCH);
    let (b, l, l2) = (AdapterId(0), AdapterId(1), AdapterId(2));
    let to_lender = fabric
        .ntb_map(b, LutTarget::Adapter(l), 0x4000, 4096)
        .expect("maps");
    let to_lender2 = fabric
        .ntb_map(b, LutTarget::Adapter(l2), 0x4000, 4096)
        .expect("maps");
    let borrower = host(&fabric, "borrower");
    fabric.set_link_up(fabric.adapter(l2).cable.expect("cabled"), false);

    assert!(fabric.ntb_path_up(b, l));
    assert!(!fabric.ntb_path_up(b, l2));
    assert!(!fabric.ntb_path_up(l, l2));
    let ok = cpu_write(&fabric, borrower, to_lender.bus_addr, 8).expect("routes");
    assert_eq!(
        ok.target,
        Target::Memory {
            host: host(&fabric, "lender"),
            addr: PhysAddr(0x4000),
        }
    );
    assert_eq!(
        cpu_write(&fabric, borrower, to_lender2.bus_addr, 8),
        Err(RouteError::LinkDown {
            link: "lender2.ntb0 -> mxs824".into(),
        })
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Multicast
// ---------------------------------------------------------------------------------------------

const GROUP_SIZE: u64 = MIB;

/// Where member `k`'s overlay puts group offset 0 in its host (distinct per host).
fn overlay_base(k: u32) -> u64 {
    0x1000_0000 + u64::from(k) * 0x20_0000
}

/// cascade-60 with one group joined by every host but `outsider`.
fn cascade_group(outsider: u32) -> (Fabric, GroupId) {
    let mut fabric = build("cascade-60", CASCADE_60);
    let g = fabric.multicast_create(GROUP_SIZE).expect("a group");
    for k in (0..60).filter(|&k| k != outsider) {
        fabric
            .multicast_join(g, AdapterId(k), overlay_base(k), GROUP_SIZE)
            .expect("joins");
    }
    assert_eq!(
        fabric.multicast().group(g).expect("exists").members.len(),
        59
    );
    (fabric, g)
}

/// Maps the group through entry 0 of `sender`'s window; the group's bus address there.
fn map_group(fabric: &mut Fabric, sender: u32, g: GroupId) -> u64 {
    let m = fabric
        .ntb_map(AdapterId(sender), LutTarget::Multicast(g), 0, GROUP_SIZE)
        .expect("maps");
    assert_eq!(m.first_entry, 0);
    m.bus_addr
}

/// Checks a multicast write at group `offset` reached exactly the hosts `receivers`.
fn assert_branches(fabric: &Fabric, route: &Route, offset: u64, receivers: &[u32]) {
    let got: Vec<(String, u64)> = route
        .branches
        .iter()
        .map(|b| match b.target {
            Target::Memory { host, addr } => (fabric.host(host).name.clone(), addr.get()),
            other => panic!("branch lands on {other:?}"),
        })
        .collect();
    let want: Vec<(String, u64)> = receivers
        .iter()
        .map(|&k| (format!("node{k:02}"), overlay_base(k) + offset))
        .collect();
    assert_eq!(got, want);
    for (b, &k) in route.branches.iter().zip(receivers) {
        assert!(b.hops.starts_with(&route.hops));
        assert!(b
            .hops
            .iter()
            .any(|h| h.node == fabric.adapter(AdapterId(k)).node));
    }
}

#[test]
fn a_multicast_write_reaches_every_member_but_the_sender() {
    let outsider = 7;
    let (mut fabric, g) = cascade_group(outsider);
    let bus = map_group(&mut fabric, outsider, g);
    let sender = host(&fabric, "node07");
    let route = cpu_write(&fabric, sender, bus + 0x100, 64).expect("routes");
    assert_eq!(
        route.target,
        Target::Multicast {
            group: g,
            offset: 0x100
        }
    );
    assert_eq!(route.len, 64);
    assert_eq!(
        route.hops.last().map(|h| h.node),
        Some(fabric.adapter(AdapterId(outsider)).node)
    );
    let members: Vec<u32> = (0..60).filter(|&k| k != outsider).collect();
    assert_branches(&fabric, &route, 0x100, &members);
    // A member on another sub-switch is reached over the top switch.
    let top = fabric.nodes().iter().position(|n| n.name == "top");
    let to_node30 = &route.branches[29];
    assert!(to_node30.hops.iter().any(|h| Some(h.node.index()) == top));

    // A member sending leaves itself out.
    let member = 3;
    let bus3 = map_group(&mut fabric, member, g);
    let route = cpu_write(&fabric, host(&fabric, "node03"), bus3, 8).expect("routes");
    let others: Vec<u32> = members.iter().copied().filter(|&k| k != member).collect();
    assert_branches(&fabric, &route, 0, &others);

    // A member that leaves stops receiving.
    fabric.multicast_leave(g, AdapterId(40)).expect("member");
    let route = cpu_write(&fabric, sender, bus, 8).expect("routes");
    let left: Vec<u32> = members.iter().copied().filter(|&k| k != 40).collect();
    assert_branches(&fabric, &route, 0, &left);
}

#[test]
fn multicast_writes_are_cut_at_the_group_end_and_reads_are_refused() {
    let (mut fabric, g) = cascade_group(7);
    let bus = map_group(&mut fabric, 7, g);
    let sender = host(&fabric, "node07");
    let route = cpu_write(&fabric, sender, bus + GROUP_SIZE - 16, 64).expect("routes");
    assert_eq!(route.len, 16);
    assert_eq!(route.branches.len(), 59);
    assert_eq!(
        cpu_write(&fabric, sender, bus + GROUP_SIZE, 8),
        Err(RouteError::UnsupportedRequest {
            host: "node07".into(),
            addr: BusAddr(bus + GROUP_SIZE),
        })
    );
    assert_eq!(
        fabric.route(Requester::Cpu(sender), BusAddr(bus), 8, Access::Read),
        Err(RouteError::UnsupportedRequest {
            host: "node07".into(),
            addr: BusAddr(bus),
        })
    );

    // A group nobody joined still takes the write, cut at its end, and delivers it nowhere.
    let empty = fabric.multicast_create(GROUP_SIZE).expect("a group");
    let bus8 = map_group(&mut fabric, 8, empty);
    let route =
        cpu_write(&fabric, host(&fabric, "node08"), bus8 + GROUP_SIZE - 16, 64).expect("routes");
    assert_eq!(
        route.target,
        Target::Multicast {
            group: empty,
            offset: GROUP_SIZE - 16
        }
    );
    assert_eq!((route.len, route.branches.len()), (16, 0));
}

/// `multicast.rs` says a member behind a down link "simply misses" the write.
#[test]
fn a_member_behind_a_down_cable_misses_the_write() {
    let (mut fabric, g) = cascade_group(7);
    let bus = map_group(&mut fabric, 7, g);
    let cable = fabric.adapter(AdapterId(9)).cable.expect("cabled");
    fabric.set_link_up(cable, false);
    assert!(!fabric.ntb_path_up(AdapterId(7), AdapterId(9)));
    let route = cpu_write(&fabric, host(&fabric, "node07"), bus, 8).expect("routes");
    let reached: Vec<u32> = (0..60).filter(|&k| k != 7 && k != 9).collect();
    assert_branches(&fabric, &route, 0, &reached);
}

#[test]
fn groups_are_limited_and_busy_while_they_have_members() {
    let mut fabric = build("cascade-60", CASCADE_60);
    fabric.set_multicast_groups(3);
    assert_eq!(fabric.multicast().limit(), 3);
    let groups: Vec<GroupId> = (0..3)
        .map(|_| fabric.multicast_create(GROUP_SIZE).expect("a group"))
        .collect();
    assert_eq!(groups, [GroupId(0), GroupId(1), GroupId(2)]);
    assert_eq!(fabric.multicast().used(), 3);
    let err = fabric.multicast_create(GROUP_SIZE).unwrap_err();
    assert_eq!(err, MulticastError::GroupsExhausted { limit: 3 });
    assert!(err.to_string().contains("all 3 groups"), "{err}");

    let g = groups[1];
    fabric
        .multicast_join(g, AdapterId(1), overlay_base(1), GROUP_SIZE)
        .expect("joins");
    fabric
        .multicast_join(g, AdapterId(2), overlay_base(2), 4 * GROUP_SIZE)
        .expect("joins");
    assert_eq!(
        fabric.multicast().group(g).expect("exists").members[1].len,
        GROUP_SIZE
    );
    assert_eq!(
        fabric.multicast_join(g, AdapterId(1), overlay_base(1), GROUP_SIZE),
        Err(MulticastError::AlreadyMember {
            adapter: "node01.ntb0".into(),
            group: g,
        })
    );
    assert_eq!(
        fabric.multicast_remove(g),
        Err(MulticastError::Busy {
            group: g,
            members: 2
        })
    );
    fabric.multicast_leave(g, AdapterId(1)).expect("member");
    assert_eq!(
        fabric.multicast_leave(g, AdapterId(1)),
        Err(MulticastError::NotMember {
            adapter: "node01.ntb0".into(),
            group: g,
        })
    );
    fabric.multicast_leave(g, AdapterId(2)).expect("member");
    fabric.multicast_remove(g).expect("empty");
    assert_eq!(fabric.multicast().used(), 2);
    assert_eq!(
        fabric.multicast_remove(g),
        Err(MulticastError::UnknownGroup(g))
    );
    assert_eq!(
        fabric.multicast_join(g, AdapterId(1), 0, GROUP_SIZE),
        Err(MulticastError::UnknownGroup(g))
    );
    // The freed slot is reused.
    assert_eq!(fabric.multicast_create(GROUP_SIZE), Ok(g));
    assert_eq!(
        fabric.multicast_create(GROUP_SIZE),
        Err(MulticastError::GroupsExhausted { limit: 3 })
    );
}

#[test]
fn a_multicast_overlay_past_the_end_of_the_address_space_is_refused() {
    let mut fabric = build("cascade-60", CASCADE_60);
    let g = fabric.multicast_create(GROUP_SIZE).expect("a group");
    let base = u64::MAX - GROUP_SIZE + 2;
    assert_eq!(
        fabric.multicast_join(g, AdapterId(1), base, GROUP_SIZE),
        Err(MulticastError::BeyondAddressSpace {
            adapter: "node01.ntb0".into(),
            base,
            len: GROUP_SIZE,
        })
    );
    assert!(fabric
        .multicast()
        .group(g)
        .expect("exists")
        .members
        .is_empty());
    fabric
        .multicast_join(g, AdapterId(1), base - 1, GROUP_SIZE)
        .expect("ends at 2^64 exactly");
}

/// Nothing leaves an adapter whose own cable is down: the write fails like a unicast one.
#[test]
fn a_multicast_write_from_an_adapter_with_its_cable_down_is_link_down() {
    let (mut fabric, g) = cascade_group(7);
    let bus = map_group(&mut fabric, 7, g);
    let cable = fabric.adapter(AdapterId(7)).cable.expect("cabled");
    fabric.set_link_up(cable, false);
    assert_eq!(
        cpu_write(&fabric, host(&fabric, "node07"), bus, 8),
        Err(RouteError::LinkDown {
            link: "node07.ntb0 -> sub0".into(),
        })
    );
}

/// Found by the device-API fuzzer: a map of `u64::MAX` bytes used to overflow while counting
/// the entries it needs. It is an error, to an adapter or to a multicast group.
#[test]
fn a_map_of_the_whole_address_space_is_refused_not_wrapped() {
    let mut fabric = build("back-to-back", BACK_TO_BACK);
    let (b, l) = (
        adapter(&fabric, "borrower", 0),
        adapter(&fabric, "lender", 0),
    );
    for (remote, len) in [
        (0, u64::MAX),
        (1, u64::MAX),
        (u64::MAX, 2),
        (1 << 63, 1 << 63),
    ] {
        let r = fabric.ntb_map(b, LutTarget::Adapter(l), remote, len);
        assert!(r.is_err(), "{remote:#x}+{len:#x}: {r:?}");
    }
    let g = fabric.multicast_create(1 << 20).expect("a group");
    let r = fabric.ntb_map(b, LutTarget::Multicast(g), 0, u64::MAX);
    assert!(r.is_err(), "{r:?}");
    let a = fabric.adapter(b);
    assert_eq!(a.lut_used(), 0, "nothing mapped");
}
