//! The daemon without programs: sessions send the requests a program would, and closing a
//! session gives back everything it held — look-up-table and requester-id entries, IOMMU
//! pages, borrowed devices — whatever state it was left in.

mod common;

use common::{ask, daemon, handle, hello};
use smartio_calibration::Calibration;
use smartio_live::protocol::{Reply, Request};
use smartio_live::Daemon;
use std::time::Duration;

#[test]
fn a_session_closed_mid_way_gives_back_every_entry_and_device() {
    let mut d = daemon("closed");
    let before = d.resources_in_use();
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let seg = handle(ask(
        &mut d,
        lender,
        Request::CreateSegment {
            id: Some(3),
            size: 1 << 20,
        },
    ));
    assert_eq!(
        ask(
            &mut d,
            lender,
            Request::PrepareSegment {
                segment: seg,
                adapter: 0
            }
        ),
        Reply::Done
    );
    assert_eq!(
        ask(
            &mut d,
            lender,
            Request::SetAvailable {
                segment: seg,
                adapter: 0
            }
        ),
        Reply::Done
    );
    let remote = handle(ask(
        &mut d,
        borrower,
        Request::ConnectSegment {
            node_id: 8,
            segment_id: 3,
            adapter: 0,
        },
    ));
    for _ in 0..3 {
        handle(ask(
            &mut d,
            borrower,
            Request::MapRemote {
                remote,
                offset: 0,
                size: 1 << 20,
            },
        ));
    }
    let devices = match ask(&mut d, borrower, Request::DeviceList) {
        Reply::Devices(list) => list,
        other => panic!("{other:?}"),
    };
    let nvme = devices
        .iter()
        .find(|e| e.name == "lender:nvme0")
        .expect("lender:nvme0 is lent");
    let device = handle(ask(
        &mut d,
        borrower,
        Request::BorrowDevice {
            fdid: nvme.fdid,
            exclusive: true,
        },
    ));
    let local = handle(ask(
        &mut d,
        borrower,
        Request::CreateSegment {
            id: None,
            size: 65536,
        },
    ));
    let addr = ask(
        &mut d,
        borrower,
        Request::MapForDevice {
            device,
            segment: local,
            offset: 0,
            size: 65536,
        },
    );
    assert!(matches!(addr, Reply::Value(a) if a != 0), "{addr:?}");
    assert_ne!(
        d.resources_in_use(),
        before,
        "maps and a borrow take entries"
    );
    // The borrower exits with everything in place; then the lender.
    d.close_session(borrower);
    d.close_session(lender);
    assert_eq!(d.resources_in_use(), before);
}

#[test]
fn requests_out_of_order_or_on_strangers_handles_are_sisci_errors() {
    let mut d = daemon("refused");
    let s = d.open_session().unwrap();
    let first = ask(&mut d, s, Request::LocalNodeId { adapter: 0 });
    assert!(
        matches!(&first, Reply::Error { code, .. } if *code == 0x4000_0912),
        "{first:?}"
    );
    let a = hello(&mut d, "lender");
    let b = hello(&mut d, "borrower");
    let seg = handle(ask(
        &mut d,
        a,
        Request::CreateSegment {
            id: None,
            size: 4096,
        },
    ));
    // Another program's handle names nothing for it: neither to end the object nor to
    // act on it.
    let stranger = ask(&mut d, b, Request::RemoveSegment { segment: seg });
    assert!(
        matches!(&stranger, Reply::Error { code, .. } if *code == 0x4000_0912),
        "{stranger:?}"
    );
    for request in [
        Request::PrepareSegment {
            segment: seg,
            adapter: 0,
        },
        Request::SetAvailable {
            segment: seg,
            adapter: 0,
        },
    ] {
        let acted = ask(&mut d, b, request.clone());
        assert!(
            matches!(&acted, Reply::Error { code, .. } if *code == 0x4000_0912),
            "{request:?} by a stranger: {acted:?}"
        );
    }
    // The owner's segment was not touched: it still has to be prepared before it is made
    // available.
    let unprepared = ask(
        &mut d,
        a,
        Request::SetAvailable {
            segment: seg,
            adapter: 0,
        },
    );
    assert!(matches!(&unprepared, Reply::Error { .. }), "{unprepared:?}");
    let no_node = ask(
        &mut d,
        b,
        Request::ConnectSegment {
            node_id: 99,
            segment_id: 1,
            adapter: 0,
        },
    );
    assert!(
        matches!(&no_node, Reply::Error { code, .. } if *code == 0x4000_0A00),
        "{no_node:?}"
    );
    assert_eq!(
        ask(&mut d, a, Request::RemoveSegment { segment: seg }),
        Reply::Done
    );
}

#[test]
fn a_segment_a_closed_program_left_connected_goes_when_its_last_user_disconnects() {
    let mut d = daemon("orphan");
    let before = d.resources_in_use();
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let seg = handle(ask(
        &mut d,
        lender,
        Request::CreateSegment {
            id: Some(9),
            size: 65536,
        },
    ));
    for request in [
        Request::PrepareSegment {
            segment: seg,
            adapter: 0,
        },
        Request::SetAvailable {
            segment: seg,
            adapter: 0,
        },
    ] {
        assert_eq!(ask(&mut d, lender, request), Reply::Done);
    }
    let remote = handle(ask(
        &mut d,
        borrower,
        Request::ConnectSegment {
            node_id: 8,
            segment_id: 9,
            adapter: 0,
        },
    ));
    // The owner exits while the borrower is connected: the segment cannot go yet.
    d.close_session(lender);
    assert_ne!(d.resources_in_use(), before);
    // The borrower lets it go and keeps running: the segment goes now.
    assert_eq!(
        ask(&mut d, borrower, Request::DisconnectSegment { remote }),
        Reply::Done
    );
    assert_eq!(d.resources_in_use(), before);
    d.close_session(borrower);
}

/// `SCI_ERR_*` values the daemon answers with.
const SIZE_ALIGNMENT: u32 = 0x4000_0910;
const NOSPC: u32 = 0x4000_0904;
const ILLEGAL_PARAMETER: u32 = 0x4000_0912;

fn refused(reply: Reply) -> u32 {
    match reply {
        Reply::Error { code, .. } => code,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn segment_sizes_are_checked_first_and_a_huge_segment_commits_nothing() {
    let mut d = daemon("sizes");
    let s = hello(&mut d, "borrower");
    let create = |size| Request::CreateSegment { id: None, size };
    assert_eq!(refused(ask(&mut d, s, create(0))), SIZE_ALIGNMENT);
    assert_eq!(refused(ask(&mut d, s, create((64 << 30) + 1))), NOSPC);
    assert_eq!(refused(ask(&mut d, s, create(u64::MAX))), NOSPC);
    let before = d.committed_ram("borrower").expect("a host");
    let started = std::time::Instant::now();
    let seg = handle(ask(&mut d, s, create(6 << 30)));
    let took = started.elapsed();
    let after = d.committed_ram("borrower").expect("a host");
    assert!(
        after <= before + (1 << 20),
        "a 6 GiB segment committed {} bytes",
        after - before
    );
    assert_eq!(
        ask(&mut d, s, Request::RemoveSegment { segment: seg }),
        Reply::Done
    );
    eprintln!("a 6 GiB segment made in {took:?}");
}

#[test]
fn a_segment_of_one_descriptor_maps_for_a_device_borrowed_on_another_of_the_same_program() {
    let mut d = daemon("beside");
    let first = hello(&mut d, "borrower");
    let second = d.open_session_beside(first).unwrap();
    let reply = ask(
        &mut d,
        second,
        Request::Hello {
            host: "borrower".into(),
            attach: None,
        },
    );
    assert!(matches!(reply, Reply::Hello { .. }), "{reply:?}");
    let stranger = hello(&mut d, "borrower");
    let seg = handle(ask(
        &mut d,
        first,
        Request::CreateSegment {
            id: None,
            size: 1 << 16,
        },
    ));
    let device = handle(ask(
        &mut d,
        second,
        Request::BorrowDevice {
            fdid: 1,
            exclusive: false,
        },
    ));
    let map = |device| Request::MapForDevice {
        device,
        segment: seg,
        offset: 0,
        size: 1 << 16,
    };
    assert!(
        matches!(ask(&mut d, second, map(device)), Reply::Value(_)),
        "the device maps the other descriptor's segment"
    );
    let theirs = handle(ask(
        &mut d,
        stranger,
        Request::BorrowDevice {
            fdid: 1,
            exclusive: false,
        },
    ));
    assert_eq!(
        refused(ask(&mut d, stranger, map(theirs))),
        ILLEGAL_PARAMETER,
        "another program's segment stays out of reach"
    );
    let before = d.resources_in_use();
    for s in [stranger, second, first] {
        d.close_session(s);
    }
    assert!(
        d.resources_in_use().contains("; 0 segments;"),
        "{before} -> {}",
        d.resources_in_use()
    );
}

/// A daemon of one host, `wide`, with `adapters` NTB adapters and nothing at their other
/// ends, its files in a directory of test `name`'s.
fn wide_host(name: &str, adapters: u32) -> Result<Daemon, smartio_live::DaemonError> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("live-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut toml = format!(
        "name = \"wide\"\ndescription = \"a host with {adapters} NTB adapters\"\n\n\
         [[host]]\nname = \"wide\"\nram = \"1 GiB\"\niommu = false\ncores = 1\n",
    );
    for n in 0..adapters {
        toml += &format!(
            "\n[[host.ntb]]\nname = \"ntb{n}\"\nchip = \"PEX8733\"\nparent = \"root\"\n\
             link = \"gen3 x16\"\nwindow = \"1 GiB\"\n"
        );
    }
    let scenario = dir.join("wide.toml");
    std::fs::write(&scenario, toml).unwrap();
    let sock = dir.join("cluster.sock");
    Daemon::up(
        scenario.to_str().unwrap(),
        &Calibration::default_embedded(),
        sock.to_str().unwrap(),
    )
}

#[test]
fn a_host_with_more_adapters_than_dis_max_nscis_is_refused_with_its_name() {
    match wide_host("adapters", 5) {
        Err(smartio_live::DaemonError::TooManyAdapters {
            host,
            adapters: 5,
            max: 4,
        }) => assert_eq!(host, "wide"),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a host with five adapters was accepted"),
    }
}

#[test]
fn a_host_with_as_many_adapters_as_dis_max_nscis_is_served_with_each_ones_node_id() {
    let d = wide_host("four-adapters", 4).expect("four adapters are as many as SISCI names");
    let hosts = d.hosts();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(hosts[0].0, "wide");
    assert_eq!(hosts[0].1.len(), 4, "{hosts:?}");
}

/// More `SCI_ERR_*` values.
const ILLEGAL_FLAG: u32 = 0x4000_0902;
const OUT_OF_RANGE: u32 = 0x4000_090B;
const HW_NOSPC: u32 = 0x4000_0906;
const SEGMENT_NOT_PREPARED: u32 = 0x4000_0914;
const BUSY: u32 = 0x4000_0900;
/// `SCI_DMAQUEUE_DONE`.
const DMAQUEUE_DONE: u64 = 3;
/// `SCI_FLAG_DMA_READ`, `SCI_FLAG_DMA_SYSDMA`.
const DMA_READ: u32 = 0x10;
const DMA_SYSDMA: u32 = 0x100;

fn segment(d: &mut Daemon, s: u64, size: u64) -> (u64, u32, u64) {
    match ask(d, s, Request::CreateSegment { id: None, size }) {
        Reply::Segment {
            handle, id, phys, ..
        } => (handle, id, phys),
        other => panic!("no segment: {other:?}"),
    }
}

/// Prepares `segment` on adapter 0 and makes it available there.
fn offer(d: &mut Daemon, s: u64, segment: u64) {
    for r in [
        Request::PrepareSegment {
            segment,
            adapter: 0,
        },
        Request::SetAvailable {
            segment,
            adapter: 0,
        },
    ] {
        assert_eq!(ask(d, s, r), Reply::Done);
    }
}

fn entry(size: u64, local_offset: u64, remote_offset: u64) -> smartio_live::protocol::DmaEntry {
    smartio_live::protocol::DmaEntry {
        size,
        local_offset,
        remote_offset,
        flags: 0,
    }
}

#[test]
fn a_dma_queue_pushes_and_pulls_bytes_and_refuses_bad_vectors_with_their_codes() {
    let mut d = daemon("dma");
    let before = d.resources_in_use();
    let idle = d.stats();
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let (far, far_id, far_phys) = segment(&mut d, lender, 1 << 20);
    offer(&mut d, lender, far);
    let (near, _, near_phys) = segment(&mut d, borrower, 1 << 20);
    let (unprepared, _, _) = segment(&mut d, borrower, 4096);
    let prepare = Request::PrepareSegment {
        segment: near,
        adapter: 0,
    };
    assert_eq!(ask(&mut d, borrower, prepare), Reply::Done);
    let remote = handle(ask(
        &mut d,
        borrower,
        Request::ConnectSegment {
            node_id: 8,
            segment_id: far_id,
            adapter: 0,
        },
    ));
    let create = Request::CreateDmaQueue {
        adapter: 0,
        entries: 8,
    };
    let queue = handle(ask(&mut d, borrower, create.clone()));
    assert_eq!(refused(ask(&mut d, borrower, create)), HW_NOSPC);
    let data: Vec<u8> = (0..64 << 10).map(|i: u32| (i % 253) as u8).collect();
    d.poke_ram("borrower", near_phys, &data).expect("a host");
    d.poke_ram("lender", far_phys + (512 << 10), &data[..4096])
        .expect("a host");
    let start = |entries, flags, local| Request::StartDma {
        queue,
        local,
        remote,
        entries,
        flags,
    };
    let wait = Request::WaitDma {
        queue,
        until: None,
        timeout_ms: Some(5_000),
    };
    // Push 64 KiB to remote offset 4096, then pull 4 KiB from remote 512 KiB to local 128 KiB.
    assert!(matches!(
        ask(
            &mut d,
            borrower,
            start(vec![entry(64 << 10, 0, 4096)], 0, near)
        ),
        Reply::Value(_)
    ));
    assert_eq!(
        ask(&mut d, borrower, wait.clone()),
        Reply::Value(DMAQUEUE_DONE)
    );
    let pulled = vec![entry(4096, 128 << 10, 512 << 10)];
    assert!(matches!(
        ask(&mut d, borrower, start(pulled, DMA_READ, near)),
        Reply::Value(_)
    ));
    assert_eq!(
        ask(&mut d, borrower, wait.clone()),
        Reply::Value(DMAQUEUE_DONE)
    );
    let mut landed = vec![0u8; 64 << 10];
    d.peek_ram("lender", far_phys + 4096, &mut landed);
    assert_eq!(landed, data, "pushed bytes");
    let mut landed = vec![0u8; 4096];
    d.peek_ram("borrower", near_phys + (128 << 10), &mut landed);
    assert_eq!(landed, data[..4096], "pulled bytes");
    // The daemon's own figures: two descriptors, four segments (three of the program's and
    // the DMA queue's ring), the borrower's adapter a requester id more (its DMA engine's,
    // for the read requests of the pull it sends through), and the cable carried the push towards the
    // lender and the pull back.
    let stats = d.stats();
    assert_eq!((stats.descriptors, stats.segments), (2, 4));
    let ids = |s: &smartio_live::stats::ClusterStats| -> Vec<usize> {
        s.adapters.iter().map(|a| a.requester_ids_used).collect()
    };
    assert_eq!(ids(&idle), [2, 2], "the CPUs' own: {:?}", idle.adapters);
    assert_eq!(ids(&stats), [3, 2], "{:?}", stats.adapters);
    assert!(stats.accesses > 0);
    let cable = stats
        .links
        .iter()
        .find(|l| l.link == "lender.ntb0 -> borrower.ntb0")
        .expect("the cable carried the copies");
    assert!(cable.up.bytes >= 64 << 10, "{cable:?}");
    assert!(cable.down.bytes >= 4096, "{cable:?}");
    assert!(stats.not_counted.contains("CPU loads and stores"));
    // Refusals, each before anything is posted.
    for (entries, flags, local, code) in [
        (vec![entry(8, 0, 0)], DMA_SYSDMA, near, ILLEGAL_FLAG),
        (vec![entry(8, 0, (1 << 20) - 4)], 0, near, OUT_OF_RANGE),
        (vec![entry(8, 1 << 20, 0)], 0, near, OUT_OF_RANGE),
        (vec![], 0, near, ILLEGAL_PARAMETER),
        (vec![entry(8, 0, 0)], 0, unprepared, SEGMENT_NOT_PREPARED),
    ] {
        assert_eq!(
            refused(ask(&mut d, borrower, start(entries, flags, local))),
            code
        );
    }
    // A transfer in flight keeps the queue and its connection busy; a program that leaves
    // meanwhile gives everything back once the engine has stopped.
    assert!(matches!(
        ask(&mut d, borrower, start(vec![entry(1 << 20, 0, 0)], 0, near)),
        Reply::Value(_)
    ));
    assert_eq!(
        refused(ask(&mut d, borrower, Request::RemoveDmaQueue { queue })),
        BUSY
    );
    d.close_session(borrower);
    d.close_session(lender);
    assert_ne!(
        d.resources_in_use(),
        before,
        "the queue's ring and windows stay until its transfer is aborted and drained"
    );
    assert!(d.settle(Duration::from_secs(5)), "the queue drains");
    assert_eq!(d.resources_in_use(), before);
}

/// `sci_segment_cb_reason_t` values.
const CB_CONNECT: u32 = 1;
const CB_DISCONNECT: u32 = 2;
const CB_LOST: u32 = 5;
const TIMEOUT: u32 = 0x4000_090A;

fn event(d: &mut Daemon, s: u64, segment: u64) -> (u32, u32, u32) {
    match ask(
        d,
        s,
        Request::WaitSegmentEvent {
            segment,
            timeout_ms: Some(2_000),
        },
    ) {
        Reply::SegmentEvent {
            reason,
            node_id,
            adapter,
        } => (reason, node_id, adapter),
        other => panic!("no event: {other:?}"),
    }
}

#[test]
fn a_segment_sees_connects_and_disconnects_and_a_connection_sees_its_owner_leave() {
    let mut d = daemon("events");
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let (seg, id, _) = segment(&mut d, lender, 1 << 16);
    offer(&mut d, lender, seg);
    let quiet = Request::WaitSegmentEvent {
        segment: seg,
        timeout_ms: Some(5),
    };
    assert_eq!(refused(ask(&mut d, lender, quiet.clone())), TIMEOUT);
    let connect = Request::ConnectSegment {
        node_id: 8,
        segment_id: id,
        adapter: 0,
    };
    let remote = handle(ask(&mut d, borrower, connect.clone()));
    // The borrower's adapter is node 4; it came through the lender's adapter 0.
    assert_eq!(event(&mut d, lender, seg), (CB_CONNECT, 4, 0));
    // The daemon's figures name the segment's owner, size, adapter and who is connected.
    let listed = d.stats().segment_list;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let s = &listed[0];
    assert_eq!(
        (s.host.as_str(), s.id, s.size, s.kind.as_str()),
        ("lender", id, 1 << 16, "ram")
    );
    assert_eq!(s.available_on, ["lender.ntb0"]);
    assert_eq!(s.connected, ["borrower"]);
    assert_eq!(
        ask(&mut d, borrower, Request::DisconnectSegment { remote }),
        Reply::Done
    );
    assert_eq!(event(&mut d, lender, seg), (CB_DISCONNECT, 4, 0));
    // A program that dies while connected disconnects too.
    let again = hello(&mut d, "borrower");
    handle(ask(&mut d, again, connect.clone()));
    assert_eq!(event(&mut d, lender, seg), (CB_CONNECT, 4, 0));
    d.close_session(again);
    assert_eq!(event(&mut d, lender, seg), (CB_DISCONNECT, 4, 0));
    // The owner leaving while connected: the connection is lost; a connection to another
    // owner's segment hears nothing.
    let remote = handle(ask(&mut d, borrower, connect));
    let other_owner = hello(&mut d, "lender");
    let (other, other_id, _) = segment(&mut d, other_owner, 1 << 16);
    offer(&mut d, other_owner, other);
    let untouched = handle(ask(
        &mut d,
        borrower,
        Request::ConnectSegment {
            node_id: 8,
            segment_id: other_id,
            adapter: 0,
        },
    ));
    d.close_session(lender);
    assert_eq!(event(&mut d, borrower, remote), (CB_LOST, 8, 0));
    let quiet = Request::WaitSegmentEvent {
        segment: untouched,
        timeout_ms: Some(5),
    };
    assert_eq!(refused(ask(&mut d, borrower, quiet)), TIMEOUT);
    assert_eq!(
        refused(ask(
            &mut d,
            borrower,
            Request::WaitSegmentEvent {
                segment: 9999,
                timeout_ms: None
            }
        )),
        ILLEGAL_PARAMETER
    );
}

/// `cluster stats` follows a borrow: the device shows its borrower while it is borrowed, and
/// closing the program gives it and every table entry back.
#[test]
fn the_daemons_figures_follow_a_borrow_and_its_return() {
    let mut d = daemon("stats");
    let idle = d.stats();
    assert_eq!(
        (idle.scenario.as_str(), idle.descriptors),
        ("back-to-back", 0)
    );
    assert!(idle.devices.iter().all(|dev| dev.borrowers.is_empty()));
    let limits = |s: &smartio_live::stats::ClusterStats| {
        s.adapters
            .iter()
            .all(|a| a.lut_used <= a.lut_entries && a.requester_ids_used <= a.requester_ids)
    };
    assert!(limits(&idle));
    let borrower = hello(&mut d, "borrower");
    let nvme = d
        .stats()
        .devices
        .into_iter()
        .find(|dev| dev.device == "lender:nvme0")
        .expect("lent");
    assert_eq!(nvme.kind, "nvme");
    handle(ask(
        &mut d,
        borrower,
        Request::BorrowDevice {
            fdid: nvme.fdid,
            exclusive: true,
        },
    ));
    let lent = d.stats();
    assert_eq!(lent.descriptors, 1);
    let now = lent
        .devices
        .iter()
        .find(|dev| dev.device == "lender:nvme0")
        .expect("lent");
    assert_eq!(now.borrowers, ["borrower"]);
    assert!(limits(&lent));
    d.close_session(borrower);
    assert!(d.settle(Duration::from_secs(5)));
    let back = d.stats();
    assert_eq!(back.descriptors, 0);
    assert!(back.devices.iter().all(|dev| dev.borrowers.is_empty()));
    assert_eq!(back.adapters, idle.adapters, "every table entry given back");
}

#[test]
fn a_removed_segment_gives_its_memory_back_and_the_next_one_there_reads_zeroes() {
    let mut d = daemon("give-back");
    let s = hello(&mut d, "borrower");
    let committed = |d: &Daemon| {
        (
            d.committed_ram("borrower").expect("a host"),
            d.committed_ram("lender").expect("a host"),
        )
    };
    let (borrower_before, lender_before) = committed(&d);
    let size = 4 << 20;
    let (seg, _, phys) = segment(&mut d, s, size);
    let written: Vec<u8> = (0..size).map(|i| (i % 251) as u8 + 1).collect();
    d.poke_ram("borrower", phys, &written).expect("a host");
    let (borrower_written, lender_written) = committed(&d);
    assert!(
        borrower_written >= borrower_before + size,
        "{borrower_before} -> {borrower_written} bytes committed on the borrower"
    );
    assert_eq!(
        lender_written, lender_before,
        "nothing written on the lender"
    );
    assert_eq!(
        ask(&mut d, s, Request::RemoveSegment { segment: seg }),
        Reply::Done
    );
    let (borrower_removed, _) = committed(&d);
    assert!(
        borrower_removed < borrower_before + size,
        "{borrower_written} -> {borrower_removed} bytes committed after the removal"
    );
    let (_, _, again) = segment(&mut d, s, size);
    assert_eq!(again, phys, "made where the removed one was");
    let mut seen = vec![0xffu8; size as usize];
    d.peek_ram("borrower", again, &mut seen).expect("a host");
    assert!(seen.iter().all(|&b| b == 0), "the new segment reads zeroes");
    assert_eq!(d.committed_ram("nowhere"), None);
}

/// `SCI_DMAQUEUE_IDLE`, `SCI_DMAQUEUE_POSTED`, `SCI_DMAQUEUE_ABORTED`.
const DMAQUEUE_IDLE: u64 = 0;
const DMAQUEUE_POSTED: u64 = 2;
const DMAQUEUE_ABORTED: u64 = 4;
/// The most entries a DMA queue's ring has (the PXH830-class engine's ring).
const MAX_DMA_ENTRIES: u32 = 4096;

/// A connection of `borrower` to a new 1 MiB segment of `lender`'s, made available on
/// adapter 0.
fn connection(d: &mut Daemon, lender: u64, borrower: u64) -> u64 {
    let (far, far_id, _) = segment(d, lender, 1 << 20);
    offer(d, lender, far);
    handle(ask(
        d,
        borrower,
        Request::ConnectSegment {
            node_id: 8,
            segment_id: far_id,
            adapter: 0,
        },
    ))
}

#[test]
fn an_idle_dma_queue_goes_at_once_and_a_wait_gives_back_the_windows_of_what_it_waited_for() {
    let mut d = daemon("dma-windows");
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let (first, second) = (
        connection(&mut d, lender, borrower),
        connection(&mut d, lender, borrower),
    );
    let (near, _, _) = segment(&mut d, borrower, 1 << 20);
    let prepare = Request::PrepareSegment {
        segment: near,
        adapter: 0,
    };
    assert_eq!(ask(&mut d, borrower, prepare), Reply::Done);
    let connected = d.resources_in_use();
    // A ring of 1 to 4096 entries.
    let create = |entries| Request::CreateDmaQueue {
        adapter: 0,
        entries,
    };
    for entries in [0, MAX_DMA_ENTRIES + 1] {
        let reply = ask(&mut d, borrower, create(entries));
        assert!(matches!(reply, Reply::Error { .. }), "{entries}: {reply:?}");
    }
    let queue = handle(ask(&mut d, borrower, create(MAX_DMA_ENTRIES)));
    assert_eq!(
        ask(&mut d, borrower, Request::DmaQueueState { queue }),
        Reply::Value(DMAQUEUE_IDLE)
    );
    // Nothing started: removed at once, with its ring and the engine's requester id.
    assert_eq!(
        ask(&mut d, borrower, Request::RemoveDmaQueue { queue }),
        Reply::Done
    );
    assert_eq!(
        d.resources_in_use(),
        connected,
        "the queue gave everything back"
    );

    let queue = handle(ask(&mut d, borrower, create(8)));
    let start = |d: &mut Daemon, remote| match ask(
        d,
        borrower,
        Request::StartDma {
            queue,
            local: near,
            remote,
            entries: vec![entry(4096, 0, 0)],
            flags: 0,
        },
    ) {
        Reply::Value(end) => end,
        other => panic!("not started: {other:?}"),
    };
    let (end_first, end_second) = (start(&mut d, first), start(&mut d, second));
    let wait = |d: &mut Daemon, until| {
        ask(
            d,
            borrower,
            Request::WaitDma {
                queue,
                until,
                timeout_ms: Some(5_000),
            },
        )
    };
    let disconnect =
        |d: &mut Daemon, remote| ask(d, borrower, Request::DisconnectSegment { remote });
    // Waited for up to the first transfer (the queue is still POSTED: the second is not
    // waited for): its window goes, the second's stays.
    assert_eq!(wait(&mut d, Some(end_first)), Reply::Value(DMAQUEUE_POSTED));
    assert_eq!(
        refused(disconnect(&mut d, second)),
        BUSY,
        "the second transfer's window"
    );
    assert_eq!(disconnect(&mut d, first), Reply::Done);
    assert_eq!(wait(&mut d, Some(end_second)), Reply::Value(DMAQUEUE_DONE));
    assert_eq!(disconnect(&mut d, second), Reply::Done);
    // An abort is answered, and a queue with a transfer not waited for is refused removal.
    let third = connection(&mut d, lender, borrower);
    start(&mut d, third);
    assert_eq!(
        ask(&mut d, borrower, Request::AbortDma { queue }),
        Reply::Done
    );
    assert_eq!(
        refused(ask(&mut d, borrower, Request::RemoveDmaQueue { queue })),
        BUSY
    );
    let waited = wait(&mut d, None);
    assert!(
        [Reply::Value(DMAQUEUE_DONE), Reply::Value(DMAQUEUE_ABORTED)].contains(&waited),
        "{waited:?}"
    );
    assert_eq!(
        ask(&mut d, borrower, Request::RemoveDmaQueue { queue }),
        Reply::Done
    );
}

#[test]
fn a_dma_queue_moves_only_segments_of_its_own_host() {
    let mut d = daemon("dma-hosts");
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    // Another descriptor of the borrower's program, on the lender: its segment may be named,
    // and is prepared on the lender's adapter 0, but is not the borrower's memory.
    let beside = d.open_session_beside(borrower).expect("a session");
    let reply = ask(
        &mut d,
        beside,
        Request::Hello {
            host: "lender".into(),
            attach: None,
        },
    );
    assert!(matches!(reply, Reply::Hello { .. }), "{reply:?}");
    let remote = connection(&mut d, lender, borrower);
    let (elsewhere, _, _) = segment(&mut d, beside, 1 << 20);
    let prepare = Request::PrepareSegment {
        segment: elsewhere,
        adapter: 0,
    };
    assert_eq!(ask(&mut d, beside, prepare), Reply::Done);
    let queue = handle(ask(
        &mut d,
        borrower,
        Request::CreateDmaQueue {
            adapter: 0,
            entries: 8,
        },
    ));
    let started = ask(
        &mut d,
        borrower,
        Request::StartDma {
            queue,
            local: elsewhere,
            remote,
            entries: vec![entry(4096, 0, 0)],
            flags: 0,
        },
    );
    assert_eq!(refused(started), SEGMENT_NOT_PREPARED);
}

#[test]
fn a_handle_named_where_another_kind_is_asked_for_is_refused_and_its_object_stays() {
    let mut d = daemon("kinds");
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let remote = connection(&mut d, lender, borrower);
    let (local, _, _) = segment(&mut d, borrower, 1 << 16);
    assert_eq!(
        refused(ask(
            &mut d,
            borrower,
            Request::DisconnectSegment { remote: local }
        )),
        ILLEGAL_PARAMETER,
        "a segment is no connection"
    );
    assert_eq!(
        refused(ask(
            &mut d,
            borrower,
            Request::RemoveSegment { segment: remote }
        )),
        ILLEGAL_PARAMETER,
        "a connection is no segment"
    );
    assert_eq!(
        ask(&mut d, borrower, Request::DisconnectSegment { remote }),
        Reply::Done
    );
    assert_eq!(
        ask(&mut d, borrower, Request::RemoveSegment { segment: local }),
        Reply::Done
    );
}

#[test]
fn a_dma_queue_refuses_a_broadcast_connection_as_its_remote() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-dma-broadcast");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut d = Daemon::up(
        "cluster-switch",
        &Calibration::default_embedded(),
        dir.join("cluster.sock").to_str().unwrap(),
    )
    .expect("the daemon starts");
    let member = hello(&mut d, "lender");
    let sender = hello(&mut d, "borrower");
    let (broadcast, _) = match ask(
        &mut d,
        member,
        Request::CreateSegment {
            id: Some(21),
            size: 1 << 16,
        },
    ) {
        Reply::Segment { handle, phys, .. } => (handle, phys),
        other => panic!("{other:?}"),
    };
    let join = Request::JoinReflective {
        segment: broadcast,
        adapter: 0,
    };
    assert_eq!(ask(&mut d, member, join), Reply::Done);
    let group = handle(ask(
        &mut d,
        sender,
        Request::ConnectReflective {
            segment_id: 21,
            adapter: 0,
        },
    ));
    let (near, _, _) = segment(&mut d, sender, 1 << 16);
    let prepare = Request::PrepareSegment {
        segment: near,
        adapter: 0,
    };
    assert_eq!(ask(&mut d, sender, prepare), Reply::Done);
    let queue = handle(ask(
        &mut d,
        sender,
        Request::CreateDmaQueue {
            adapter: 0,
            entries: 8,
        },
    ));
    let started = ask(
        &mut d,
        sender,
        Request::StartDma {
            queue,
            local: near,
            remote: group,
            entries: vec![entry(4096, 0, 0)],
            flags: 0,
        },
    );
    assert_eq!(
        refused(started),
        ILLEGAL_PARAMETER,
        "a DMA queue moves to one host"
    );
}
