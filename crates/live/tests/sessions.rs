//! The daemon without programs: sessions send the requests a program would, and closing a
//! session gives back everything it held — look-up-table and requester-id entries, IOMMU
//! pages, borrowed devices — whatever state it was left in.

use smartio_calibration::Calibration;
use smartio_live::protocol::{Reply, Request};
use smartio_live::Daemon;
use std::time::Duration;

fn daemon(name: &str) -> Daemon {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("live-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("cluster.sock");
    Daemon::up(
        "back-to-back",
        &Calibration::default_embedded(),
        sock.to_str().unwrap(),
    )
    .expect("the daemon starts")
}

fn ask(d: &mut Daemon, session: u64, request: Request) -> Reply {
    d.request(session, request, Duration::from_secs(5))
        .expect("an answer in time")
}

fn hello(d: &mut Daemon, host: &str) -> u64 {
    let s = d.open_session().unwrap();
    let reply = ask(
        d,
        s,
        Request::Hello {
            host: host.into(),
            attach: None,
        },
    );
    assert!(matches!(reply, Reply::Hello { .. }), "{reply:?}");
    s
}

fn handle(reply: Reply) -> u64 {
    match reply {
        Reply::Segment { handle, .. }
        | Reply::Remote { handle, .. }
        | Reply::Mapped { handle, .. }
        | Reply::Interrupt { handle, .. }
        | Reply::Made(handle) => handle,
        other => panic!("no handle in {other:?}"),
    }
}

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
    // Another program's handle names nothing for it.
    let stranger = ask(&mut d, b, Request::RemoveSegment { segment: seg });
    assert!(
        matches!(&stranger, Reply::Error { code, .. } if *code == 0x4000_0912),
        "{stranger:?}"
    );
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
