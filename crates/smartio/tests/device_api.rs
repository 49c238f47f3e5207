//! The device-oriented API (Paper V §6.1): shared and exclusive holds, BARs as segments,
//! segments placed by access hints, mapped for a device and for CPUs — and a device driven
//! by programs on two hosts at once through nothing else.

use crate::common;

use common::tables;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_drivers::{DmaTestDriver, Location};
use smartio_host::HostOs;
use smartio_platform::{pci, BusAddr, Clock, SimDuration};
use smartio_smartio::{BorrowOptions, Hints, SegmentLocation, SmartIo, SmartIoError};
use std::cell::RefCell;
use std::rc::Rc;

fn setup(scenario: &str) -> (Cluster, Vec<HostOs>, SmartIo) {
    let cluster = Cluster::new(scenario, &Calibration::default_embedded()).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    (cluster, hosts, smartio)
}

#[test]
fn exclusive_shared_and_downgraded_holds_follow_the_rules() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let (borrower, lender2) = (hosts[0].id(), hosts[2].id());
    let dma = smartio.find("lender:dma0").expect("registered");
    let before = tables(&cluster.machine);

    let manager = smartio
        .borrow_device(borrower, dma, true)
        .expect("exclusive");
    match smartio.borrow_device(lender2, dma, false) {
        Err(SmartIoError::Borrowed { borrower, .. }) => assert_eq!(borrower, "borrower"),
        other => panic!("expected Busy, got {other:?}"),
    }
    smartio.downgrade(&manager).expect("downgrade");
    let client = smartio
        .borrow_device(lender2, dma, false)
        .expect("shared now");
    assert!(matches!(
        smartio.borrow_device(lender2, dma, true),
        Err(SmartIoError::Borrowed { .. })
    ));
    // Device Lending needs the device to itself.
    let (svc, host) = (smartio.clone(), lender2);
    let lent = Rc::new(RefCell::new(None));
    let out = lent.clone();
    cluster.machine.spawn(async move {
        *out.borrow_mut() = Some(svc.borrow(host, dma, &BorrowOptions::default()).await);
    });
    cluster.machine.run();
    assert!(matches!(
        lent.borrow_mut().take(),
        Some(Err(SmartIoError::Borrowed { .. }))
    ));
    let listed = smartio
        .devices()
        .into_iter()
        .find(|d| d.fdid == dma)
        .expect("listed");
    let holders: Vec<_> = listed
        .borrowers
        .iter()
        .map(|b| (b.host.as_str(), b.method.name(), b.exclusive))
        .collect();
    assert_eq!(
        holders,
        [("borrower", "api", false), ("lender2", "api", false)]
    );

    smartio.return_device(client).expect("return");
    smartio.return_device(manager).expect("return");
    assert!(
        smartio.return_device(manager).is_err(),
        "a hold returns once"
    );
    assert_eq!(before, tables(&cluster.machine));
}

#[test]
fn hints_place_segments_in_device_memory_the_callers_ram_or_the_lenders() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let gpu = smartio.find("lender:gpu0").expect("registered");
    let hold = smartio
        .borrow_device(hosts[0].id(), gpu, false)
        .expect("shared");
    let sq_like = Hints {
        device_reads: true,
        host_writes: true,
        ..Hints::default()
    };
    let cq_like = Hints {
        device_writes: true,
        host_reads: true,
        ..Hints::default()
    };
    let shared = Hints {
        device_writes: true,
        host_reads: true,
        multi_host: true,
        ..Hints::default()
    };
    let a = smartio
        .create_segment(&hold, 64 << 10, sq_like)
        .expect("sq");
    let b = smartio
        .create_segment(&hold, 64 << 10, cq_like)
        .expect("cq");
    let c = smartio
        .create_segment(&hold, 64 << 10, shared)
        .expect("shared");
    assert!(
        matches!(a.location, SegmentLocation::Device { fdid, bar: 1, .. } if fdid == gpu),
        "{a:?}"
    );
    assert!(
        matches!(b.location, SegmentLocation::Ram { host, .. } if host == hosts[0].id()),
        "{b:?}"
    );
    assert!(
        matches!(c.location, SegmentLocation::Ram { host, .. } if host == hosts[1].id()),
        "{c:?}"
    );
    // Read by the caller's CPU but reached by other devices too: near the device, not in the
    // caller's RAM.
    let p2p = smartio
        .create_segment(
            &hold,
            64 << 10,
            Hints {
                peer_to_peer: true,
                ..cq_like
            },
        )
        .expect("peer to peer");
    assert!(
        matches!(p2p.location, SegmentLocation::Ram { host, .. } if host == hosts[1].id()),
        "{p2p:?}"
    );
    // A DMA engine without room in device memory falls back to RAM, near the device.
    let second = smartio
        .create_segment(&hold, 64 << 10, sq_like)
        .expect("sq 2");
    assert_ne!(second.location, a.location, "separate device memory");
    // Mapped for the device: its own memory at its BAR address, lender RAM as it is.
    let bar1 = {
        let f = cluster.machine.fabric();
        let ep = f.endpoint_by_name(hosts[1].id(), "gpu0").expect("gpu0");
        f.endpoint(ep).bars[1].base
    };
    let SegmentLocation::Device { offset, .. } = a.location else {
        unreachable!()
    };
    assert_eq!(
        smartio.map_for_device(&hold, &a).expect("map"),
        bar1.offset(offset)
    );
    let SegmentLocation::Ram { phys, .. } = c.location else {
        unreachable!()
    };
    assert_eq!(
        smartio.map_for_device(&hold, &c).expect("map"),
        BusAddr(phys.get())
    );
    assert!(
        smartio.remove_segment(c).is_err(),
        "still mapped for the device"
    );
    smartio.return_device(hold).expect("return");
    smartio.remove_segment(c).expect("free after return");
}

/// One host's program: maps dma0's registers and two segments of its own RAM, copies the
/// device's memory into one of them and returns what arrived.
///
/// The DMA test engine runs one copy at a time (it has one register set), so the programs
/// take turns: each starts its copy `delay` after taking its hold.
async fn program(
    smartio: SmartIo,
    host: HostOs,
    fdid: smartio_smartio::Fdid,
    at: u64,
    delay: SimDuration,
) -> Vec<u8> {
    let hold = smartio
        .borrow_device(host.id(), fdid, false)
        .expect("shared hold");
    let regs = smartio.bar_segment(&hold, 0).expect("BAR0");
    let regs = smartio.map_for_cpu(host.id(), &regs).expect("registers");
    let hints = Hints {
        device_writes: true,
        host_reads: true,
        ..Hints::default()
    };
    let data = smartio.create_segment(&hold, 8192, hints).expect("data");
    let done = smartio
        .create_segment(&hold, 4096, hints)
        .expect("completion");
    let (
        SegmentLocation::Ram {
            phys: data_phys, ..
        },
        SegmentLocation::Ram {
            phys: done_phys, ..
        },
    ) = (data.location, done.location)
    else {
        panic!("RAM segments expected");
    };
    let data_dev = smartio.map_for_device(&hold, &data).expect("map data");
    let done_dev = smartio
        .map_for_device(&hold, &done)
        .expect("map completion");
    host.cpu().sleep(delay).await;
    let driver = DmaTestDriver::probe(host.cpu(), regs.addr, done_phys, done_dev)
        .await
        .expect("probe");
    driver
        .copy(Location::DeviceMemory(at), Location::Bus(data_dev), 8192)
        .await
        .expect("copy");
    let mut got = vec![0u8; 8192];
    host.machine().peek_memory(host.id(), data_phys, &mut got);
    smartio.unmap_cpu(regs).expect("unmap");
    smartio.return_device(hold).expect("return");
    got
}

#[test]
fn two_hosts_drive_one_device_through_the_api_and_each_gets_its_own_data() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let before = tables(&cluster.machine);
    let dma = smartio.find("lender:dma0").expect("registered");
    let ep = hosts[1].endpoint_of("dma0").expect("dma0");
    let device = cluster.copy_engine(ep).expect("model");
    let pattern = |seed: u8| -> Vec<u8> { (0..8192u32).map(|i| (i as u8) ^ seed).collect() };
    for (at, seed) in [(0u64, 0x11u8), (65536, 0x77)] {
        smartio_platform::BarHandler::mmio_write(device.as_ref(), 2, at, &pattern(seed))
            .expect("device memory");
    }
    let results = Rc::new(RefCell::new(Vec::new()));
    let turns = [
        (hosts[0].clone(), 0u64, SimDuration::ZERO),
        (hosts[2].clone(), 65536, SimDuration::from_ns_f64(100_000.0)),
    ];
    for (host, at, delay) in turns {
        let (svc, out) = (smartio.clone(), results.clone());
        cluster.machine.spawn(async move {
            let got = program(svc, host.clone(), dma, at, delay).await;
            out.borrow_mut().push((host.name().to_string(), got));
        });
    }
    cluster.machine.run();
    let mut results = results.borrow_mut().clone();
    results.sort();
    assert_eq!(results.len(), 2, "both programs finished");
    assert_eq!(results[0], ("borrower".to_string(), pattern(0x11)));
    assert_eq!(results[1], ("lender2".to_string(), pattern(0x77)));
    assert_eq!(before, tables(&cluster.machine), "every window given back");
}

#[test]
fn a_local_device_reads_through_the_ntb_only_once_registered_as_a_peer_requester() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let (borrower, lender) = (hosts[0].clone(), hosts[1].clone());
    let before = tables(&cluster.machine);
    // A segment in borrower RAM (placed through a shared hold on another device), reached by
    // the lender through its NTB.
    let gpu = smartio.find("lender:gpu0").expect("registered");
    let hold = smartio
        .borrow_device(borrower.id(), gpu, false)
        .expect("hold");
    let seg = smartio
        .create_segment(
            &hold,
            8192,
            Hints {
                host_reads: true,
                ..Hints::default()
            },
        )
        .expect("segment");
    let SegmentLocation::Ram { phys, .. } = seg.location else {
        panic!("borrower RAM expected");
    };
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    cluster.machine.poke_memory(borrower.id(), phys, &data);
    let window = smartio.map_for_cpu(lender.id(), &seg).expect("window");

    // The lender's own dma0, driven locally, copies the remote segment into its memory.
    let ep = lender.endpoint_of("dma0").expect("dma0");
    let regs = cluster
        .machine
        .fabric()
        .endpoint(ep)
        .bars
        .iter()
        .find(|b| b.index == 0)
        .map(|b| b.base)
        .expect("BAR0");
    let done = lender.alloc(4096).expect("RAM");
    let copy = |at: u64| {
        let (cpu, out) = (lender.cpu(), Rc::new(RefCell::new(None)));
        let slot = out.clone();
        cluster.machine.spawn(async move {
            let driver = DmaTestDriver::probe(cpu, BusAddr(regs.get()), done, BusAddr(done.get()))
                .await
                .expect("probe");
            let r = driver
                .copy(Location::Bus(window.addr), Location::DeviceMemory(at), 8192)
                .await;
            *slot.borrow_mut() = Some(r.map_err(|e| e.to_string()));
        });
        cluster.machine.run();
        let r = out.borrow_mut().take();
        r.expect("finished")
    };
    let err = copy(0).expect_err("no requester id: the completions cannot come back");
    let faults = format!("{:?}", cluster.machine.faults());
    assert!(faults.contains("NoRequesterId"), "{err}; faults: {faults}");

    let reg = smartio
        .register_peer_requester(lender.id(), "dma0")
        .expect("registers");
    copy(65536).expect("copies once registered");
    let device = cluster.copy_engine(ep).expect("model");
    let mut got = vec![0u8; 8192];
    smartio_platform::BarHandler::mmio_read(device.as_ref(), 2, 65536, &mut got)
        .expect("device memory");
    assert_eq!(got, data);

    smartio.unregister_peer_requester(reg).expect("unregisters");
    smartio.unmap_cpu(window).expect("unmap");
    smartio.return_device(hold).expect("return");
    smartio.remove_segment(seg).expect("remove");
    lender.free(done);
    assert_eq!(
        before,
        tables(&cluster.machine),
        "every table entry given back"
    );
}

/// The Command register of `device` as its own host's configuration access reads it.
fn command_register(cluster: &Cluster, lender: &HostOs, device: &str) -> u16 {
    let handle = lender
        .device(device)
        .expect("the lender's own view of the device");
    let out = Rc::new(RefCell::new(None));
    let slot = out.clone();
    cluster.machine.spawn(async move {
        let b = handle
            .config_read(pci::COMMAND, 2)
            .await
            .expect("config read");
        *slot.borrow_mut() = Some(u16::from_le_bytes([b[0], b[1]]));
    });
    cluster.machine.run();
    let v = out.borrow_mut().take();
    v.expect("read")
}

#[test]
fn enabling_a_held_device_turns_on_memory_and_bus_mastering_and_a_hold_ends_at_return() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let dma = smartio.find("lender:dma0").expect("registered");
    let on = pci::command::MEMORY_SPACE | pci::command::BUS_MASTER;
    assert_eq!(
        command_register(&cluster, &hosts[1], "dma0") & on,
        0,
        "off at first"
    );
    let hold = smartio
        .borrow_device(hosts[0].id(), dma, true)
        .expect("exclusive");
    assert!(smartio.is_held(&hold));
    let (svc, h) = (smartio.clone(), hold);
    cluster
        .machine
        .spawn(async move { svc.enable_device(&h).await.expect("enable") });
    cluster.machine.run();
    assert_eq!(command_register(&cluster, &hosts[1], "dma0") & on, on);
    // Someone else's hold is refused with the device and its fdid named.
    let busy = smartio
        .borrow_device(hosts[2].id(), dma, false)
        .expect_err("busy");
    assert_eq!(
        busy.to_string(),
        format!(
            "lender:dma0 (fdid {}) is borrowed exclusively by borrower",
            dma.0
        )
    );
    smartio.return_device(hold).expect("return");
    assert!(!smartio.is_held(&hold), "returned");
}

#[test]
fn unmapping_a_segment_for_a_device_gives_back_exactly_what_mapping_took() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let dma = smartio.find("lender:dma0").expect("registered");
    let hold = smartio
        .borrow_device(hosts[0].id(), dma, false)
        .expect("shared");
    let seg = smartio
        .create_segment(
            &hold,
            64 << 10,
            Hints {
                device_writes: true,
                host_reads: true,
                ..Hints::default()
            },
        )
        .expect("segment in the borrower's RAM");
    let before = tables(&cluster.machine);
    smartio.map_for_device(&hold, &seg).expect("map");
    assert_ne!(
        tables(&cluster.machine),
        before,
        "the map takes table entries"
    );
    smartio.unmap_device(&hold, &seg).expect("unmap");
    assert_eq!(
        tables(&cluster.machine),
        before,
        "the unmap gives them back"
    );
    smartio.remove_segment(seg).expect("remove");
    smartio.return_device(hold).expect("return");
}

/// dual-path, or (`crossed`) with the cables crossed: borrower.ntb0 to lender.ntb1 and
/// borrower.ntb1 to lender.ntb0.
fn dual_path(crossed: bool) -> String {
    let text = include_str!("../../../scenarios/dual-path.toml");
    if !crossed {
        return "dual-path".into();
    }
    let (a, b) = ("connect = \"borrower.ntb0\"", "connect = \"borrower.ntb1\"");
    assert!(
        text.contains(a) && text.contains(b),
        "dual-path changed its cables"
    );
    let crossed = text.replace(a, "@0").replace(b, a).replace("@0", b);
    // Tests run in parallel: each load gets its own file.
    static LOADS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "smartio-device-api-{}-{}-dual-path-crossed.toml",
        std::process::id(),
        LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, crossed).expect("temp file");
    path.to_str().expect("utf-8").to_string()
}

#[test]
fn a_cpu_map_through_a_chosen_adapter_uses_that_adapters_window() {
    for crossed in [false, true] {
        cpu_map_via_each_adapter(&dual_path(crossed));
    }
}

fn cpu_map_via_each_adapter(scenario: &str) {
    let (cluster, hosts, smartio) = setup(scenario);
    let nvme = smartio.find("lender:nvme0").expect("registered");
    let (borrower, lender) = (hosts[0].id(), hosts[1].id());
    let hold = smartio
        .borrow_device(borrower, nvme, false)
        .expect("shared");
    let seg = smartio
        .create_segment(
            &hold,
            64 << 10,
            Hints {
                host_reads: true,
                multi_host: true,
                ..Hints::default()
            },
        )
        .expect("segment");
    assert!(
        matches!(seg.location, SegmentLocation::Ram { host, .. } if host == lender),
        "{seg:?}"
    );
    let window = |number: u32| {
        let f = cluster.machine.fabric();
        let a = f.host_adapter(borrower, number).expect("adapter");
        f.adapter(a).window.clone()
    };
    for number in [1, 0] {
        let map = smartio
            .map_for_cpu_via(borrower, &seg, Some(number))
            .expect("map");
        let (w, other) = (window(number), window(1 - number));
        assert!(
            w.contains(&map.addr.get()) && !other.contains(&map.addr.get()),
            "{scenario}: via ntb{number}: {} in {w:x?}, not {other:x?}",
            map.addr
        );
        smartio.unmap_cpu(map).expect("unmap");
    }
    smartio.remove_segment(seg).expect("remove");
    smartio.return_device(hold).expect("return");
}

#[test]
fn bar_segments_are_the_bars_asked_for_and_a_published_segment_is_found_by_name() {
    let (_cluster, hosts, smartio) = setup("cluster-switch");
    let dma = smartio.find("lender:dma0").expect("registered");
    let hold = smartio
        .borrow_device(hosts[0].id(), dma, false)
        .expect("shared");
    let sizes: Vec<(u8, u64)> = [0u8, 2]
        .iter()
        .map(|&bar| {
            let seg = smartio.bar_segment(&hold, bar).expect("bar segment");
            match seg.location {
                SegmentLocation::Device { bar: b, offset, .. } => {
                    assert_eq!(offset, 0, "BAR{bar} from its start");
                    (b, seg.size)
                }
                other => panic!("BAR{bar} as {other:?}"),
            }
        })
        .collect();
    assert_eq!(sizes, [(0, 64 << 10), (2, 256 << 20)], "(BAR, size)");
    assert!(smartio.published(dma, "test-segment").is_none());
    let seg = smartio
        .create_segment(&hold, 4096, Hints::default())
        .expect("segment");
    smartio.publish(dma, "test-segment", seg);
    assert_eq!(smartio.published(dma, "test-segment"), Some(seg));
    assert!(smartio.published(dma, "other").is_none());
}

#[test]
fn a_local_device_segment_over_gpu_memory_is_reached_by_a_device_of_another_host() {
    let (cluster, hosts, smartio) = setup("cluster-switch");
    let (lender, lender2) = (hosts[1].clone(), hosts[2].clone());
    let before = tables(&cluster.machine);
    const AT: u64 = 0x10000;
    const LEN: u64 = 0x4000;
    // gpu2's memory behind BAR1 (the aperture), as the CUDA driver pins it for GPUDirect.
    let seg = smartio
        .local_device_segment(lender2.id(), "gpu2", 1, AT, LEN)
        .expect("a segment over BAR1");
    let gpu2 = lender2.endpoint_of("gpu2").expect("gpu2");
    assert_eq!(
        seg.location,
        SegmentLocation::LocalDevice {
            host: lender2.id(),
            endpoint: gpu2,
            bar: 1,
            offset: AT
        }
    );
    // The lender's dma0, held by a program on lender2, writes into it through the NTBs.
    let dma = smartio.find("lender:dma0").expect("registered");
    let hold = smartio
        .borrow_device(lender2.id(), dma, false)
        .expect("hold");
    let addr = smartio
        .map_for_device(&hold, &seg)
        .expect("mapped for dma0");
    let ep = lender.endpoint_of("dma0").expect("dma0");
    let regs = cluster
        .machine
        .fabric()
        .endpoint(ep)
        .bars
        .iter()
        .find(|b| b.index == 0)
        .map(|b| b.base)
        .expect("BAR0");
    let data: Vec<u8> = (0..LEN as u32).map(|i| (i % 253) as u8).collect();
    let device = cluster.copy_engine(ep).expect("model");
    smartio_platform::BarHandler::mmio_write(device.as_ref(), 2, 0, &data).expect("fits");
    let done = lender.alloc(4096).expect("RAM");
    let (cpu, out) = (lender.cpu(), Rc::new(RefCell::new(None)));
    let slot = out.clone();
    let (svc, h) = (smartio.clone(), hold);
    cluster.machine.spawn(async move {
        svc.enable_device(&h).await.expect("bus mastering");
        let driver = DmaTestDriver::probe(cpu, BusAddr(regs.get()), done, BusAddr(done.get()))
            .await
            .expect("probe");
        let r = driver
            .copy(Location::DeviceMemory(0), Location::Bus(addr), LEN)
            .await;
        *slot.borrow_mut() = Some(r.map_err(|e| e.to_string()));
    });
    cluster.machine.run();
    out.borrow_mut().take().expect("finished").expect("copied");
    let mut got = vec![0u8; LEN as usize];
    cluster
        .gpu(gpu2)
        .expect("a GPU model")
        .peek(AT, &mut got)
        .expect("inside memory");
    assert_eq!(
        got, data,
        "the bytes landed in gpu2's memory at the segment's offset"
    );

    smartio.return_device(hold).expect("return");
    smartio.remove_segment(seg).expect("remove");
    lender.free(done);
    assert_eq!(
        before,
        tables(&cluster.machine),
        "every table entry given back"
    );
}

#[test]
fn a_local_device_segment_names_what_is_wrong() {
    let (_cluster, hosts, smartio) = setup("cluster-switch");
    let lender2 = hosts[2].id();
    let refusal = |device: &str, bar: u8, offset: u64, size: u64| {
        let e = smartio
            .local_device_segment(lender2, device, bar, offset, size)
            .expect_err("refused");
        assert!(matches!(e, SmartIoError::LocalDevice { .. }), "{e:?}");
        e.to_string()
    };
    assert_eq!(
        refusal("gpu9", 1, 0, 4096),
        "lender2:gpu9 BAR1: lender2 has no such device"
    );
    let other = refusal("gpu0", 1, 0, 4096);
    assert!(
        other.contains("not a device of lender2") && other.contains("lender:gpu0 is elsewhere"),
        "{other}"
    );
    assert!(refusal("lender:gpu0", 1, 0, 4096).contains("not a device of lender2"));
    assert!(refusal("gpu2", 5, 0, 4096).contains("no such BAR (it has BAR0, BAR1"));
    let bar1 = 256 << 20;
    let outside = refusal("gpu2", 1, bar1 - 4096, 8192);
    assert!(
        outside.contains("not inside the 0x10000000-byte BAR"),
        "{outside}"
    );
    assert!(refusal("gpu2", 1, 0, 0).contains("0 bytes"));
    assert!(refusal("gpu2", 1, u64::MAX, 2).contains("not inside"));
}
