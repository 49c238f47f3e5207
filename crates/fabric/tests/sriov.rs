//! SR-IOV in the fabric: a PF's VFs get routing ids and reserved bus numbers, each VF BAR
//! is one region of slice × TotalVFs inside the bridge windows above the PF, and routing
//! reaches VF n's slice only while the PF's VF Enable and VF MSE are set and n ≤ NumVFs; a
//! VF is a requester of its own (an NTB's requester-id table must hold it, not its PF).

use smartio_fabric::route::Access;
use smartio_fabric::LutTarget;
use smartio_fabric::{
    parse_scenario, BarKind, BarSpec, Bdf, EndpointId, EndpointLayout, Fabric, Function, Requester,
    RouteError, SriovError, SriovSpec, Target,
};
use smartio_platform::{BusAddr, SrIovControl};

/// Kind `pf` (or any kind given `params.vfs`) has a 16 KiB BAR0 and `vfs` (from params) VFs
/// with a 64 KiB VF BAR0 and a 1 MiB prefetchable VF BAR2, First VF Offset 1 and VF Stride 1
/// unless `stride` is given.
fn layout(kind: &str, params: &toml::Table) -> Result<EndpointLayout, String> {
    let int = |key: &str, default: i64| {
        params
            .get(key)
            .and_then(|v| v.as_integer())
            .unwrap_or(default)
    };
    let sriov = (kind == "pf" || params.contains_key("vfs")).then(|| SriovSpec {
        total_vfs: int("vfs", 8) as u16,
        first_vf_offset: int("offset", 1) as u16,
        vf_stride: int("stride", 1) as u16,
        vf_device_id: 0xbeef,
        vf_bars: vec![
            BarSpec {
                index: 0,
                size: 64 << 10,
                kind: BarKind::Mem64,
            },
            BarSpec {
                index: 2,
                size: 1 << 20,
                kind: BarKind::Mem64Prefetch,
            },
        ],
    });
    Ok(EndpointLayout {
        vendor_id: 0x1234,
        device_id: 0x0001,
        class_code: 0x08_80_00,
        description: "test device".into(),
        bars: vec![BarSpec {
            index: 0,
            size: 16 << 10,
            kind: BarKind::Mem64,
        }],
        sriov,
    })
}

fn build(params: &str) -> Result<Fabric, String> {
    let text = format!(
        "name = \"vf\"\ndescription = \"t\"\n[[host]]\nname = \"h\"\nram = \"4G\"\niommu = false\n\
         [[host.switch]]\nname = \"sw\"\nchip = \"PEX8796\"\nparent = \"root\"\nlink = \"gen3 x16\"\n\
         [[host.device]]\nname = \"a\"\nkind = \"pf\"\nparent = \"sw\"\nlink = \"gen3 x8\"\n{params}\n\
         [[host.device]]\nname = \"b\"\nkind = \"plain\"\nparent = \"sw\"\nlink = \"gen3 x8\"\n"
    );
    let spec = parse_scenario("vf.toml", &text).map_err(|e| e.to_string())?;
    Fabric::build(&spec, &layout).map_err(|e| e.to_string())
}

fn pf(f: &Fabric) -> EndpointId {
    f.endpoint_by_name(f.host_by_name("h").expect("host"), "a")
        .expect("the PF")
}

#[test]
fn vfs_follow_the_scenario_endpoints_with_their_routing_ids_and_names() {
    let f = build("params = { vfs = 8 }").expect("builds");
    let pf = pf(&f);
    let v = f.virtual_functions(pf).expect("a PF");
    assert_eq!(v.vfs.len(), 8);
    // Scenario endpoints keep their ids; VFs come after them.
    assert_eq!(v.vfs[0], EndpointId(2));
    let pf_bdf = f.endpoint(pf).bdf;
    for (i, &vf) in v.vfs.iter().enumerate() {
        let ep = f.endpoint(vf);
        let n = i as u16 + 1;
        assert_eq!(ep.function, Function::Virtual { pf, n });
        assert_eq!(ep.name, format!("a.vf{n}"));
        assert_eq!(ep.bdf.requester_id(), pf_bdf.requester_id() + n);
        assert_eq!(ep.layout.device_id, 0xbeef);
        assert_eq!(ep.node, f.endpoint(pf).node);
    }
    // VF 8 is function 0 of device 1 on the PF's bus (no ARI needed for routing).
    assert_eq!(f.endpoint(v.vfs[7]).bdf, Bdf::new(pf_bdf.bus, 1, 0));
    // The host's own list (what firmware shows the OS) has no VF.
    assert_eq!(f.hosts()[0].endpoints.len(), 2);
}

#[test]
fn vf_bar_regions_are_slice_times_total_vfs_inside_the_bridge_windows_above_the_pf() {
    let f = build("params = { vfs = 8 }").expect("builds");
    let pf = pf(&f);
    let v = f.virtual_functions(pf).expect("a PF");
    let sizes: Vec<(u8, u64)> = v.regions.iter().map(|r| (r.index, r.size)).collect();
    assert_eq!(sizes, vec![(0, 8 * (64 << 10)), (2, 8 << 20)]);
    let port = f.hosts()[0]
        .bridges
        .iter()
        .find(|b| b.secondary == f.endpoint(pf).bdf.bus)
        .expect("the PF's downstream port");
    let (mem, pref) = (
        port.mem.clone().expect("mem"),
        port.pref.clone().expect("pref"),
    );
    let r0 = v.regions[0].range();
    let r2 = v.regions[2 - 1].range();
    assert!(
        mem.start <= r0.start && r0.end <= mem.end,
        "{r0:x?} in {mem:x?}"
    );
    assert!(
        pref.start <= r2.start && r2.end <= pref.end,
        "{r2:x?} in {pref:x?}"
    );
    // Each VF's BARs are its slices.
    let vf3 = f.endpoint(v.vfs[2]);
    assert_eq!(vf3.bars[0].base.get(), r0.start + 2 * (64 << 10));
    assert_eq!(vf3.bars[1].base.get(), r2.start + 2 * (1 << 20));
}

#[test]
fn the_buses_of_far_vf_routing_ids_are_reserved_below_the_pfs_port() {
    // VF 8 at offset 1 + 7 · 256 is three buses past the PF's.
    let f = build("params = { vfs = 8, stride = 256 }").expect("builds");
    let pf = pf(&f);
    let pf_bus = f.endpoint(pf).bdf.bus;
    let last = f.endpoint(
        *f.virtual_functions(pf)
            .expect("PF")
            .vfs
            .last()
            .expect("VF 8"),
    );
    assert_eq!(last.bdf.bus, pf_bus + 7);
    let port = f.hosts()[0]
        .bridges
        .iter()
        .find(|b| b.secondary == pf_bus)
        .expect("the PF's port");
    assert_eq!(port.subordinate, pf_bus + 7);
    // The next port (and the device on its secondary bus) comes after the reserved buses.
    let b = f.endpoint(
        f.endpoint_by_name(f.host_by_name("h").expect("h"), "b")
            .expect("b"),
    );
    assert_eq!(b.bdf.bus, pf_bus + 8);
}

#[test]
fn a_vf_past_bus_255_is_an_error_naming_the_device() {
    let err = build("params = { vfs = 8, stride = 65535 }").expect_err("past bus 255");
    assert!(
        err.contains("device \"a\" at bus 3: the routing id of VF 8 would pass bus 255"),
        "{err}"
    );
}

#[test]
fn a_vf_slice_routes_to_the_vf_only_while_it_is_enabled_and_decoding() {
    let mut f = build("params = { vfs = 8 }").expect("builds");
    let pf = pf(&f);
    let vfs = f.virtual_functions(pf).expect("PF").vfs.clone();
    let vf3_bar2 = f.endpoint(vfs[2]).bars[1].base;
    let cpu = Requester::Cpu(f.host_by_name("h").expect("h"));
    let at = BusAddr(vf3_bar2.get() + 0x40);
    let unsupported = |f: &Fabric| {
        matches!(
            f.route(cpu, at, 8, Access::Read),
            Err(RouteError::UnsupportedRequest { .. })
        )
    };
    assert!(unsupported(&f), "no VF before VF Enable");
    assert!(!f.function_present(vfs[2]));
    let enable = |num_vfs, vf_mse| SrIovControl {
        vf_enable: true,
        vf_mse,
        num_vfs,
    };
    f.set_sriov_control(pf, enable(4, false)).expect("a PF");
    assert!(f.function_present(vfs[2]), "VF Enable makes VF 3 exist");
    assert!(unsupported(&f), "but without VF MSE it decodes nothing");
    f.set_sriov_control(pf, enable(4, true)).expect("a PF");
    let route = f.route(cpu, at, 1 << 21, Access::Read).expect("routes");
    assert_eq!(
        route.target,
        Target::Bar {
            endpoint: vfs[2],
            bar: 2,
            offset: 0x40
        }
    );
    assert_eq!(
        route.len,
        (1 << 20) - 0x40,
        "clipped at the end of VF 3's slice"
    );
    // VF 5 is past NumVFs = 4.
    let vf5 = f.endpoint(vfs[4]).bars[0].base;
    assert!(matches!(
        f.route(cpu, vf5, 8, Access::Write),
        Err(RouteError::UnsupportedRequest { .. })
    ));
    assert!(!f.function_present(vfs[4]));
    // Clearing VF Enable removes them again.
    f.set_sriov_control(pf, SrIovControl::default())
        .expect("a PF");
    assert!(unsupported(&f));
    assert!(!f.function_present(vfs[2]));
    assert!(f.function_present(pf));
}

#[test]
fn a_vf_requester_is_named_as_itself_and_numvfs_past_totalvfs_is_refused() {
    let mut f = build("params = { vfs = 2 }").expect("builds");
    let pf = pf(&f);
    let vf2 = f.virtual_functions(pf).expect("PF").vfs[1];
    assert_eq!(f.requester_name(Requester::Device(vf2)), "h.a.vf2");
    let err = f
        .set_sriov_control(
            pf,
            SrIovControl {
                vf_enable: true,
                vf_mse: true,
                num_vfs: 3,
            },
        )
        .expect_err("3 > TotalVFs");
    assert_eq!(
        err,
        SriovError::TooManyVfs {
            endpoint: "a".into(),
            num_vfs: 3,
            total_vfs: 2
        }
    );
    let plain = f
        .endpoint_by_name(f.host_by_name("h").expect("h"), "b")
        .expect("b");
    assert!(matches!(
        f.set_sriov_control(plain, SrIovControl::default()),
        Err(SriovError::NotAPhysicalFunction { .. })
    ));
}

#[test]
fn a_vf_reading_across_an_ntb_needs_a_requester_id_entry_of_its_own() {
    // With the lender's IOMMU off, a device's read goes straight to the NTB window.
    let text = include_str!("../../smartio/tests/scenarios/sriov-lending.toml")
        .replace("iommu = true", "iommu = false");
    let spec = parse_scenario("sriov-lending.toml", &text).expect("valid");
    let mut f = Fabric::build(&spec, &layout).expect("builds");
    let lender = f.host_by_name("lender").expect("lender");
    let borrower = f.host_by_name("borrower-a").expect("borrower-a");
    let (l, b) = (
        f.host_adapter(lender, 0).expect("lender.ntb0"),
        f.host_adapter(borrower, 0).expect("borrower-a.ntb0"),
    );
    let m = f
        .ntb_map(l, LutTarget::Adapter(b), 0x10_0000, 64 << 10)
        .expect("maps");
    let pf = f.endpoint_by_name(lender, "dma0").expect("the PF");
    let vf1 = f.virtual_functions(pf).expect("a PF").vfs[0];
    f.set_sriov_control(
        pf,
        SrIovControl {
            vf_enable: true,
            vf_mse: true,
            num_vfs: 1,
        },
    )
    .expect("a PF");
    f.ntb_add_requester(l, Requester::Device(pf)).expect("room");
    let read = |f: &Fabric, who| {
        f.route(
            Requester::Device(who),
            BusAddr(m.bus_addr),
            64,
            Access::Read,
        )
    };
    assert!(read(&f, pf).is_ok(), "the PF has its entry");
    assert_eq!(
        read(&f, vf1),
        Err(RouteError::NtbNoRequesterId {
            adapter: "lender.ntb0".into(),
            requester: "lender.dma0.vf1".into()
        }),
        "the PF's entry does not cover its VF"
    );
    // Its writes need none; with an entry of its own, its reads complete.
    assert!(f
        .route(
            Requester::Device(vf1),
            BusAddr(m.bus_addr),
            64,
            Access::Write
        )
        .is_ok());
    f.ntb_add_requester(l, Requester::Device(vf1))
        .expect("room");
    assert!(read(&f, vf1).is_ok());
}

/// `h` with PF `a` (4 VFs) and plain `b`, and a VM listing `devices`.
fn build_with_vm(devices: &str) -> Result<Fabric, String> {
    let text = format!(
        "name = \"vf\"\ndescription = \"t\"\n[[host]]\nname = \"h\"\nram = \"4G\"\niommu = true\n\
         [[host.vm]]\nname = \"vm0\"\nmemory = \"1G\"\ndevices = {devices}\n\
         [[host.device]]\nname = \"a\"\nkind = \"pf\"\nparent = \"root\"\nlink = \"gen3 x8\"\n\
         params = {{ vfs = 4 }}\n\
         [[host.device]]\nname = \"b\"\nkind = \"plain\"\nparent = \"root\"\nlink = \"gen3 x8\"\n"
    );
    let spec = parse_scenario("vf.toml", &text).map_err(|e| e.to_string())?;
    Fabric::build(&spec, &layout).map_err(|e| e.to_string())
}

/// A VM may list a virtual function by the name `smartio devices` shows (`a.vf2`, or
/// `h:a.vf2` through SmartIO), and one its PF does not have is refused at its line.
#[test]
fn a_vm_lists_virtual_functions_by_their_names_and_only_those_that_exist() {
    let f = build_with_vm("[\"a.vf4\", \"h:a.vf1\", \"a\"]").expect("VFs 1 and 4 of a exist");
    let vm = &f.hosts()[0].vms[0];
    let names: Vec<&str> = vm.devices.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(names, ["a.vf4", "h:a.vf1", "a"]);
    let e = build_with_vm("[\"a.vf5\"]").expect_err("a has 4 VFs");
    assert_eq!(
        e,
        "vf.toml:10: VM h/vm0: devices entry \"a.vf5\": h's a has 4 virtual functions (a.vf1 to a.vf4)"
    );
    let e = build_with_vm("[\"b.vf1\"]").expect_err("b has no SR-IOV");
    assert!(
        e.starts_with("vf.toml:10:") && e.contains("h's b has no virtual functions"),
        "{e}"
    );
    let e = build_with_vm("[\"c.vf1\"]").expect_err("no c");
    assert!(e.contains("host h has no device \"c\""), "{e}");
}
