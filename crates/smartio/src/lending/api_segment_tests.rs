//! The device API's segments are SISCI segments: one record, one id space per host, one
//! allocator per host, one error type.

use super::*;
use crate::sisci::Sisci;
use crate::{SciError, SciErrorClass};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_host::HostOs;
use smartio_machine::Machine;

/// The back-to-back cluster booted, SmartIO started and every function registered, with
/// the borrower holding `lender:dma0` shared.
fn rig() -> (Cluster, Vec<HostOs>, SmartIo, DeviceBorrow) {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    let dma = smartio.find("lender:dma0").expect("registered");
    let hold = smartio
        .borrow_device(hosts[0].id(), dma, false)
        .expect("borrow");
    (cluster, hosts, smartio, hold)
}

fn tables(machine: &Machine) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
    machine.fabric().tables_in_use()
}

#[test]
fn a_device_api_segment_is_connected_and_mapped_through_sisci_calls() {
    let (cluster, hosts, smartio, hold) = rig();
    let (borrower, lender) = (hosts[0].id(), hosts[1].id());
    let shared = Hints {
        multi_host: true,
        ..Hints::default()
    };
    let seg = smartio
        .create_segment(&hold, 1 << 20, shared)
        .expect("segment");
    let sci = smartio.sisci();
    let local = smartio.sisci_segment(&seg).expect("a SISCI segment");
    assert_eq!(
        (local.host, local.id, local.size),
        (lender, seg.id, seg.size)
    );
    sci.prepare_segment(&local, 0).expect("prepare");
    sci.set_available(&local, 0).expect("available");
    let node = sci.node_id(lender, 0).expect("node id");
    let remote = sci
        .connect_segment(borrower, 0, node, seg.id)
        .expect("connect by the device API's id");
    let map = sci.map_remote(&remote, 0, seg.size).expect("map");
    let busy = smartio.remove_segment(seg).expect_err("connected");
    assert_eq!(busy.class(), SciErrorClass::Busy, "{busy}");

    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let m = map.clone();
    let d = data.clone();
    cluster.machine.spawn(async move {
        m.store(64, &d).await.expect("in range");
    });
    cluster.machine.run();
    let mut direct = vec![0u8; data.len()];
    let SegmentLocation::Ram { phys, .. } = seg.location else {
        panic!("a multi-host segment is in the lender's RAM: {seg:?}");
    };
    cluster
        .machine
        .peek_memory(lender, PhysAddr(phys.get() + 64), &mut direct);
    assert_eq!(
        direct, data,
        "the borrower's stores land in the device-API segment"
    );

    sci.unmap(&map).expect("unmap");
    sci.disconnect_segment(&remote).expect("disconnect");
    smartio.remove_segment(seg).expect("free once SISCI let go");
    assert!(!sci.is_live(&local), "one record: gone for SISCI too");
}

#[test]
fn a_sisci_segment_is_mapped_for_a_device_and_busy_until_unmapped() {
    let (cluster, hosts, smartio, hold) = rig();
    let borrower = hosts[0].id();
    let before = tables(&cluster.machine);
    let sci = smartio.sisci();
    let local = sci
        .create_segment(borrower, Some(5), 64 << 10)
        .expect("segment");
    let seg = Segment::from(local);
    let addr = smartio.map_for_device(&hold, &seg).expect("map for dma0");
    assert_ne!(addr.get(), 0);
    assert_eq!(
        smartio.map_for_device(&hold, &seg).expect("again"),
        addr,
        "mapping twice is the same mapping"
    );
    let busy = sci.remove_segment(&local).expect_err("mapped for a device");
    assert!(
        matches!(&busy, SciError::Busy { users, .. } if users.contains("1 devices")),
        "{busy}"
    );
    smartio.unmap_device(&hold, &seg).expect("unmap");
    sci.remove_segment(&local).expect("remove through SISCI");
    assert_eq!(tables(&cluster.machine), before, "every entry given back");
    let stale = smartio.map_for_device(&hold, &seg).expect_err("removed");
    assert_eq!(stale.class(), SciErrorClass::IllegalParameter, "{stale}");
}

#[test]
fn segment_ids_are_one_space_per_host_across_both_apis() {
    let (_cluster, hosts, smartio, hold) = rig();
    let lender = hosts[1].id();
    let shared = Hints {
        multi_host: true,
        ..Hints::default()
    };
    let seg = smartio
        .create_segment(&hold, 4096, shared)
        .expect("segment");
    let taken = smartio
        .sisci()
        .create_segment(lender, Some(seg.id), 4096)
        .expect_err("the id is the device API segment's");
    assert_eq!(taken.class(), SciErrorClass::SegmentIdUsed, "{taken}");
    let other = smartio
        .sisci()
        .create_segment(lender, None, 4096)
        .expect("next free id");
    assert_ne!(other.id, seg.id);
    let bar = smartio.bar_segment(&hold, 0).expect("BAR0");
    assert!(
        bar.id != seg.id && bar.id != other.id,
        "a BAR segment has an id too"
    );
}

#[test]
fn both_apis_draw_from_one_allocator_and_exhaust_it_with_one_error() {
    let (_cluster, hosts, smartio, hold) = rig();
    let lender = hosts[1].id();
    let before = hosts[1].ram_in_use();
    let sci: Sisci = smartio.sisci().clone();
    let shared = Hints {
        multi_host: true,
        ..Hints::default()
    };
    let chunk = 4 << 30;
    let (mut api_segs, mut sci_segs) = (Vec::new(), Vec::new());
    let error = loop {
        match smartio.create_segment(&hold, chunk, shared) {
            Ok(s) => api_segs.push(s),
            Err(e) => break e,
        }
        match sci.create_segment(lender, None, chunk) {
            Ok(s) => sci_segs.push(s),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(&error, SciError::Memory { host, .. } if host == "lender"),
        "{error:?}"
    );
    assert_eq!(error.class(), SciErrorClass::Nospc);
    assert!(error.to_string().contains("out of memory"), "{error}");
    // Neither API finds room the other left: the same error class from both.
    let again_api = smartio
        .create_segment(&hold, chunk, shared)
        .expect_err("full");
    let again_sci = sci.create_segment(lender, None, chunk).expect_err("full");
    assert_eq!(again_api.class(), SciErrorClass::Nospc, "{again_api}");
    assert_eq!(again_sci.class(), SciErrorClass::Nospc, "{again_sci}");
    let used = hosts[1].ram_in_use() - before;
    let made = (api_segs.len() + sci_segs.len()) as u64 * chunk;
    assert!(
        used >= made,
        "the kernel's allocator accounts for every segment"
    );
    for s in api_segs {
        smartio.remove_segment(s).expect("remove");
    }
    for s in &sci_segs {
        sci.remove_segment(s).expect("remove");
    }
    assert_eq!(hosts[1].ram_in_use(), before, "everything given back");
}

#[test]
fn device_memory_is_given_back_only_by_the_device_api() {
    let cluster = Cluster::new("local-chassis", &Calibration::default_embedded()).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    let gpu = smartio.find("local:gpu0").expect("registered");
    let hold = smartio
        .borrow_device(hosts[0].id(), gpu, false)
        .expect("borrow");
    let reads = Hints {
        device_reads: true,
        ..Hints::default()
    };
    let seg = smartio.create_segment(&hold, 4096, reads).expect("segment");
    assert!(
        matches!(seg.location, SegmentLocation::Device { .. }),
        "{seg:?}"
    );
    let local = smartio.sisci_segment(&seg).expect("a SISCI segment");
    let refused = smartio
        .sisci()
        .remove_segment(&local)
        .expect_err("device memory");
    assert!(matches!(refused, SciError::NotOwner { .. }), "{refused}");
    assert_eq!(refused.class(), SciErrorClass::IllegalOperation);
    smartio
        .remove_segment(seg)
        .expect("the device API frees it");
    let again = smartio
        .create_segment(&hold, 4096, reads)
        .expect("room again");
    assert_eq!(
        again.location, seg.location,
        "the device memory was given back"
    );
}

#[test]
fn a_device_api_segment_mapped_locally_through_sisci_cannot_be_removed_by_the_device_api() {
    let (_cluster, hosts, smartio, hold) = rig();
    let seg = smartio
        .create_segment(&hold, 4096, Hints::default())
        .expect("segment");
    let local = smartio.sisci_segment(&seg).expect("SISCI");
    let map = smartio.sisci().map_local(&local).expect("local map");
    let busy = smartio.remove_segment(seg).expect_err("mapped locally");
    assert!(matches!(busy, SciError::Busy { .. }), "{busy}");
    smartio.sisci().unmap_local(&map).expect("unmap");
    smartio.remove_segment(seg).expect("remove");
    assert_eq!(local.host, hosts[1].id(), "no hints: the lender's RAM");
}
