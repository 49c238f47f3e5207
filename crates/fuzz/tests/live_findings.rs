//! What writing the `live_requests` fuzzer found in the live cluster daemon, as tests that
//! read as the behaviour a SISCI program may count on. The target's end-of-input check
//! compares `Daemon::resources_in_use` (look-up-table and requester-id entries, borrowed
//! devices), which does not count segment memory, so the target alone cannot see the first
//! two: the tests drive the daemon the way the regression inputs do
//! (`crates/fuzz/regressions/live_requests/`; `smartio-fuzz decode live_requests FILE` prints
//! them) and look at the addresses its replies give.

use smartio_live::protocol::{Reply, Request};
use smartio_live::Daemon;
use std::time::Duration;

/// `SCI_MEMTYPE_SHARED`.
const MEMTYPE_SHARED: u32 = 4;
/// `SCI_MEMACCESS_HOST_READ`: SmartIO places the segment in the borrower's RAM.
const HOST_READ: u32 = 0x4;
const SIZE: u64 = 64 << 10;

fn daemon(name: &str) -> Daemon {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("live-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the socket");
    let sock = dir.join("c.sock");
    Daemon::up(
        "back-to-back",
        &smartio_calibration::Calibration::default_embedded(),
        sock.to_str().expect("a UTF-8 path"),
    )
    .expect("the daemon starts")
}

fn ask(d: &mut Daemon, session: u64, request: Request) -> Reply {
    d.request(session, request, Duration::from_secs(5))
        .expect("an answer in time")
}

fn hello(d: &mut Daemon, host: &str) -> u64 {
    let s = d.open_session().expect("a session");
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
        | Reply::Made(handle) => handle,
        other => panic!("no handle in {other:?}"),
    }
}

/// Where the borrower's next 64 KiB segment goes (made and removed again).
fn next_borrower_segment(d: &mut Daemon) -> u64 {
    let s = hello(d, "borrower");
    let (seg, phys) = match ask(
        d,
        s,
        Request::CreateSegment {
            id: None,
            size: SIZE,
        },
    ) {
        Reply::Segment { handle, phys, .. } => (handle, phys),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        ask(d, s, Request::RemoveSegment { segment: seg }),
        Reply::Done
    );
    d.close_session(s);
    phys
}

/// Two borrowers `a` and `b` each holding lender:nvme0 (shared); `a` has made device segment
/// 1 (shared, in the borrower's RAM) and `b` has connected to it. Returns (a, its hold, b, its
/// hold, b's connection).
fn shared_device_segment(d: &mut Daemon) -> (u64, u64, u64, u64, u64) {
    let (a, b) = (hello(d, "borrower"), hello(d, "borrower"));
    let fdid = match ask(d, a, Request::DeviceList) {
        Reply::Devices(list) => {
            list.iter()
                .find(|e| e.name == "lender:nvme0")
                .expect("lender:nvme0 is lent")
                .fdid
        }
        other => panic!("{other:?}"),
    };
    let borrow = |d: &mut Daemon, s| {
        handle(ask(
            d,
            s,
            Request::BorrowDevice {
                fdid,
                exclusive: false,
            },
        ))
    };
    let (da, db) = (borrow(d, a), borrow(d, b));
    assert_eq!(
        ask(
            d,
            a,
            Request::CreateDeviceSegment {
                device: da,
                id: 1,
                size: SIZE,
                memtype: MEMTYPE_SHARED,
                hints: HOST_READ,
            }
        ),
        Reply::Done
    );
    let conn = handle(ask(
        d,
        b,
        Request::ConnectDeviceSegment {
            device: db,
            id: 1,
            memtype: MEMTYPE_SHARED,
        },
    ));
    (a, da, b, db, conn)
}

#[test]
fn a_shared_device_segment_mapped_for_another_borrowers_device_is_freed_once_both_return() {
    // regressions/live_requests/shared-device-segment-mapped-for-another-borrowers-device-is-never-freed.bin
    let mut d = daemon("never-freed");
    let first = next_borrower_segment(&mut d);
    let (a, da, b, db, conn) = shared_device_segment(&mut d);
    let addr = ask(
        &mut d,
        b,
        Request::MapForDevice {
            device: db,
            segment: conn,
            offset: 0,
            size: SIZE,
        },
    );
    assert!(matches!(addr, Reply::Value(_)), "{addr:?}");
    // The maker returns its hold while the other borrower's device maps the segment (the
    // segment cannot go yet), then the other disconnects and returns its own.
    assert_eq!(
        ask(&mut d, a, Request::ReturnDevice { device: da }),
        Reply::Done
    );
    assert_eq!(
        ask(&mut d, b, Request::DisconnectSegment { remote: conn }),
        Reply::Done
    );
    assert_eq!(
        ask(&mut d, b, Request::ReturnDevice { device: db }),
        Reply::Done
    );
    d.close_session(a);
    d.close_session(b);
    assert_eq!(
        next_borrower_segment(&mut d),
        first,
        "nobody uses the device segment any more: its memory is the borrower's next segment's"
    );
}

#[test]
fn a_shared_device_segment_another_borrower_maps_is_not_given_to_a_new_segment() {
    // regressions/live_requests/shared-device-segment-freed-while-another-borrower-maps-it.bin
    let mut d = daemon("freed-while-mapped");
    let (a, da, b, _, conn) = shared_device_segment(&mut d);
    let mapped = match ask(
        &mut d,
        b,
        Request::MapRemote {
            remote: conn,
            offset: 0,
            size: SIZE,
        },
    ) {
        Reply::Mapped { offset, len, .. } => offset..offset + len,
        other => panic!("{other:?}"),
    };
    // Refused (the segment is in use) or done with the segment kept: either way its memory
    // stays the segment's while b maps it.
    let _ = ask(&mut d, a, Request::ReturnDevice { device: da });
    let phys = match ask(
        &mut d,
        a,
        Request::CreateSegment {
            id: None,
            size: SIZE,
        },
    ) {
        Reply::Segment { phys, .. } => phys,
        other => panic!("{other:?}"),
    };
    assert!(
        phys + SIZE <= mapped.start || phys >= mapped.end,
        "a new segment at {phys:#x} overlaps the memory {mapped:#x?} another program still maps"
    );
}

#[test]
fn a_refusal_says_what_was_wrong_and_nothing_else() {
    let mut d = daemon("messages");
    let s = d.open_session().expect("a session");
    let no_hello = ask(&mut d, s, Request::LocalNodeId { adapter: 0 });
    let s = hello(&mut d, "lender");
    let again = ask(
        &mut d,
        s,
        Request::Hello {
            host: "lender".into(),
            attach: None,
        },
    );
    for reply in [no_hello, again] {
        match reply {
            Reply::Error { message, .. } => assert!(
                !message.contains("does not exist"),
                "{message:?} is not about something that does not exist"
            ),
            other => panic!("{other:?}"),
        }
    }
}
