//! The daemon's answers to the requests a SISCI program sends, one kind at a time, and the
//! daemon serving programs on its socket until one asks it to shut down.

mod common;

use common::{ask, daemon, handle, hello, socket_path};
use smartio_calibration::Calibration;
use smartio_live::protocol::{self, Connection, Reply, Request, MAX_NAME};
use smartio_live::Daemon;

use smartio_smartio::SciErrorClass;
use std::os::fd::AsFd;

/// The SISCI code a `Reply::Error` carries for `class`.
fn sci(class: SciErrorClass) -> Option<u32> {
    Some(class.code())
}

/// `SCI_ERR_TIMEOUT`.
const TIMEOUT: u32 = 0x4000_090A;

fn code(reply: &Reply) -> Option<u32> {
    match reply {
        Reply::Error { code, .. } => Some(*code),
        _ => None,
    }
}

#[test]
fn programs_on_the_socket_get_their_answers_until_one_asks_for_a_shutdown() {
    let path = socket_path("socket");
    let mut d = Daemon::up("back-to-back", &Calibration::default_embedded(), &path)
        .expect("the daemon starts");
    let socket = path.clone();
    let client = std::thread::spawn(move || {
        let call = |c: &Connection, r: Request| c.call(&r).map(|(reply, _)| reply);
        let a = Connection::open(&path).expect("connects");
        let b = Connection::open(&path).expect("connects");
        let lender = Request::Hello {
            host: "lender".into(),
            attach: None,
        };
        let replies = [
            call(&a, lender.clone()),
            call(&a, lender),
            call(&b, Request::LocalNodeId { adapter: 0 }),
            call(&a, Request::LocalNodeId { adapter: 0 }),
        ];
        // A message that is no request: answered, and the connection goes on.
        let raw = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            None,
        )
        .expect("a socket");
        let at = rustix::net::SocketAddrUnix::new(path.as_str()).expect("a path");
        rustix::net::connect(&raw, &at).expect("connects");
        rustix::net::send(&raw, b"{not json", rustix::net::SendFlags::empty()).expect("sent");
        let malformed = protocol::receive::<Reply>(raw.as_fd()).map(|(r, _)| r);
        let hello = Request::Hello {
            host: "borrower".into(),
            attach: None,
        };
        protocol::send(raw.as_fd(), &hello, None).expect("sent");
        let after = protocol::receive::<Reply>(raw.as_fd()).map(|(r, _)| r);
        drop(b);
        let done = call(&a, Request::Shutdown);
        (replies, malformed, after, done)
    });
    let lender_id = d.hosts()[1].1[0];
    let served = d.run();
    // Gone with the daemon: the socket, so a client left waiting gets an error, not a hang.
    drop(d);
    assert!(
        !std::path::Path::new(&socket).exists(),
        "the socket file went with the daemon"
    );
    let (replies, malformed, after, done) = client.join().expect("the client ran");
    served.expect("served until the shutdown");
    let [hello, again, no_hello, node] = replies.map(|r| r.expect("an answer"));
    assert!(matches!(hello, Reply::Hello { .. }), "{hello:?}");
    assert_eq!(
        code(&again),
        sci(SciErrorClass::IllegalParameter),
        "a second hello: {again:?}"
    );
    assert_eq!(
        code(&no_hello),
        sci(SciErrorClass::IllegalParameter),
        "no hello: {no_hello:?}"
    );
    assert_eq!(node, Reply::Value(u64::from(lender_id)));
    let malformed = malformed.expect("an answer");
    assert_eq!(
        code(&malformed),
        sci(SciErrorClass::IllegalParameter),
        "{malformed:?}"
    );
    let after = after.expect("an answer");
    assert!(
        matches!(after, Reply::Hello { .. }),
        "the connection goes on: {after:?}"
    );
    assert_eq!(done.expect("an answer"), Reply::Done);
}

#[test]
fn node_ids_by_host_adapter_and_name() {
    let mut d = daemon("nodes");
    let hosts = d.hosts();
    let names: Vec<&str> = hosts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["borrower", "lender"]);
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    for (session, (_, ids)) in [borrower, lender].into_iter().zip(&hosts) {
        assert_eq!(ids.len(), 1, "{hosts:?}");
        let node = ask(&mut d, session, Request::LocalNodeId { adapter: 0 });
        assert_eq!(node, Reply::Value(u64::from(ids[0])));
    }
    assert_ne!(hosts[0].1, hosts[1].1);
    let by_name =
        |d: &mut Daemon, name: &str| ask(d, borrower, Request::NodeIdsByName { name: name.into() });
    assert_eq!(
        by_name(&mut d, "lender"),
        Reply::NodeIds(hosts[1].1.clone())
    );
    assert_eq!(
        by_name(&mut d, "lender.ntb0"),
        Reply::NodeIds(hosts[1].1.clone())
    );
    assert_eq!(
        by_name(&mut d, "borrower.ntb0"),
        Reply::NodeIds(hosts[0].1.clone())
    );
    assert_eq!(by_name(&mut d, "nobody"), Reply::NodeIds(Vec::new()));
    assert_eq!(
        by_name(&mut d, &"x".repeat(MAX_NAME)),
        Reply::NodeIds(Vec::new())
    );
    let long = by_name(&mut d, &"x".repeat(MAX_NAME + 1));
    assert!(
        code(&long).is_some(),
        "a name past {MAX_NAME} bytes: {long:?}"
    );
    // The lender's node answers a probe from the borrower; a node nobody has does not.
    let probe = |d: &mut Daemon, node_id: u32| {
        ask(
            d,
            borrower,
            Request::ProbeNode {
                adapter: 0,
                node_id,
            },
        )
    };
    assert_eq!(probe(&mut d, hosts[1].1[0]), Reply::Value(1));
    assert!(code(&probe(&mut d, 1000)).is_some());
}

#[test]
fn a_local_map_lies_at_its_offset_in_the_segment_and_one_outside_it_is_refused() {
    let mut d = daemon("maps");
    let lender = hello(&mut d, "lender");
    let size = 1 << 20;
    let segment = ask(&mut d, lender, Request::CreateSegment { id: Some(9), size });
    let Reply::Segment { handle: seg, .. } = segment else {
        panic!("{segment:?}")
    };
    let map = |d: &mut Daemon, offset: u64, size: u64| {
        ask(
            d,
            lender,
            Request::MapLocal {
                segment: seg,
                offset,
                size,
            },
        )
    };
    let inside = map(&mut d, 4096, 8192);
    let Reply::Mapped {
        handle: m,
        offset,
        len,
    } = inside
    else {
        panic!("{inside:?}")
    };
    let first = map(&mut d, 0, 4096);
    let Reply::Mapped { offset: base, .. } = first else {
        panic!("{first:?}")
    };
    assert_eq!(
        (offset - base, len),
        (4096, 8192),
        "the map starts at its offset"
    );
    assert_eq!(ask(&mut d, lender, Request::Flush { map: m }), Reply::Done);
    assert_eq!(ask(&mut d, lender, Request::Unmap { map: m }), Reply::Done);
    assert_eq!(
        code(&ask(&mut d, lender, Request::Unmap { map: m })),
        sci(SciErrorClass::IllegalParameter)
    );
    for (offset, len) in [(0, 0), (size - 4096, 8192), (size, 1)] {
        let out = map(&mut d, offset, len);
        assert_eq!(
            code(&out),
            sci(SciErrorClass::OutOfRange),
            "{len} bytes at {offset}: {out:?}"
        );
    }
    // Made unavailable, the segment takes no new connection.
    let borrower = hello(&mut d, "borrower");
    let node = d.hosts()[1].1[0];
    let connect = |d: &mut Daemon| {
        ask(
            d,
            borrower,
            Request::ConnectSegment {
                node_id: node,
                segment_id: 9,
                adapter: 0,
            },
        )
    };
    for r in [
        Request::PrepareSegment {
            segment: seg,
            adapter: 0,
        },
        Request::SetAvailable {
            segment: seg,
            adapter: 0,
        },
    ] {
        assert_eq!(ask(&mut d, lender, r), Reply::Done);
    }
    let remote = handle(connect(&mut d));
    let mapped = handle(ask(
        &mut d,
        borrower,
        Request::MapRemote {
            remote,
            offset: 0,
            size: 4096,
        },
    ));
    assert_eq!(
        ask(&mut d, borrower, Request::Flush { map: mapped }),
        Reply::Done
    );
    assert_eq!(
        ask(
            &mut d,
            lender,
            Request::SetUnavailable {
                segment: seg,
                adapter: 0
            }
        ),
        Reply::Done
    );
    assert!(code(&connect(&mut d)).is_some(), "unavailable");
}

#[test]
fn a_data_interrupt_triggered_on_one_host_is_waited_for_on_the_other_with_its_data() {
    let mut d = daemon("interrupts");
    let lender = hello(&mut d, "lender");
    let borrower = hello(&mut d, "borrower");
    let made = ask(
        &mut d,
        lender,
        Request::CreateDataInterrupt {
            adapter: 0,
            number: Some(5),
        },
    );
    let Reply::Interrupt {
        handle: interrupt,
        number,
    } = made
    else {
        panic!("{made:?}")
    };
    assert_eq!(number, 5);
    let node = d.hosts()[1].1[0];
    let remote = handle(ask(
        &mut d,
        borrower,
        Request::ConnectDataInterrupt {
            node_id: node,
            adapter: 0,
            number: 5,
        },
    ));
    let data = b"from the borrower".to_vec();
    assert_eq!(
        ask(
            &mut d,
            borrower,
            Request::TriggerDataInterrupt {
                remote,
                data: data.clone()
            }
        ),
        Reply::Done
    );
    let got = ask(
        &mut d,
        lender,
        Request::WaitDataInterrupt {
            interrupt,
            timeout_ms: Some(1000),
        },
    );
    assert_eq!(got, Reply::Data(data));
    // Nothing more was triggered: the next wait times out, after longer than the daemon
    // takes between looks whether the waiting program is still there.
    let none = ask(
        &mut d,
        lender,
        Request::WaitDataInterrupt {
            interrupt,
            timeout_ms: Some(100),
        },
    );
    assert_eq!(code(&none), Some(TIMEOUT), "{none:?}");
    assert_eq!(
        ask(
            &mut d,
            borrower,
            Request::DisconnectDataInterrupt { remote }
        ),
        Reply::Done
    );
    assert_eq!(
        ask(&mut d, lender, Request::RemoveDataInterrupt { interrupt }),
        Reply::Done
    );
    let gone = ask(
        &mut d,
        borrower,
        Request::ConnectDataInterrupt {
            node_id: node,
            adapter: 0,
            number: 5,
        },
    );
    assert!(code(&gone).is_some(), "removed: {gone:?}");
}

/// lender:dma0's fdid, from the device list `session` gets.
fn fdid_of(d: &mut Daemon, session: u64, name: &str) -> u32 {
    match ask(d, session, Request::DeviceList) {
        Reply::Devices(list) => list.iter().find(|e| e.name == name).expect("listed").fdid,
        other => panic!("{other:?}"),
    }
}

fn borrow(d: &mut Daemon, session: u64, fdid: u32) -> u64 {
    handle(ask(
        d,
        session,
        Request::BorrowDevice {
            fdid,
            exclusive: false,
        },
    ))
}

#[test]
fn device_segments_private_and_shared_bars_and_maps_for_the_device() {
    let mut d = daemon("device-api");
    assert!(
        !d.resources_in_use().contains("lender:dma0"),
        "nothing borrowed yet"
    );
    let a = hello(&mut d, "borrower");
    let b = hello(&mut d, "borrower");
    let fdid = fdid_of(&mut d, a, "lender:dma0");
    let (dev_a, dev_b) = (borrow(&mut d, a, fdid), borrow(&mut d, b, fdid));
    let create = |d: &mut Daemon, id: u32, memtype: u32, hints: u32| {
        ask(
            d,
            a,
            Request::CreateDeviceSegment {
                device: dev_a,
                id,
                size: 65536,
                memtype,
                hints,
            },
        )
    };
    let (private, shared) = (2, 4);
    // Written by the device, read by the host: placed in the borrower's RAM.
    assert_eq!(create(&mut d, 1, private, 0x2 | 0x4), Reply::Done);
    assert_eq!(create(&mut d, 2, shared, 0x3f), Reply::Done);
    let refused = [
        create(&mut d, 1, private, 0),
        create(&mut d, 3, 1, 0),
        create(&mut d, 3, 3, 0),
        create(&mut d, 3, private, 0x40),
    ];
    for r in &refused {
        assert!(code(r).is_some(), "{r:?}");
    }
    let connect = |d: &mut Daemon, s: u64, device: u64, id: u32, memtype: u32| {
        ask(
            d,
            s,
            Request::ConnectDeviceSegment {
                device,
                id,
                memtype,
            },
        )
    };
    // The maker reaches its private segment and the shared one; another program only the
    // shared one.
    let mine = connect(&mut d, a, dev_a, 1, private);
    assert!(
        matches!(mine, Reply::Remote { size: 65536, .. }),
        "{mine:?}"
    );
    let theirs = connect(&mut d, b, dev_b, 1, private);
    assert!(
        code(&theirs).is_some(),
        "another borrower's private memory: {theirs:?}"
    );
    let shared_seg = connect(&mut d, b, dev_b, 2, shared);
    assert!(
        matches!(shared_seg, Reply::Remote { size: 65536, .. }),
        "{shared_seg:?}"
    );
    for (id, memtype) in [(9, private), (0, 7), (300, 1)] {
        let r = connect(&mut d, a, dev_a, id, memtype);
        assert!(code(&r).is_some(), "segment {id} of type {memtype}: {r:?}");
    }
    // BAR0 (64 KiB of registers) is a register page; BAR2 (256 MiB) is past what the live
    // engine maps.
    let bar0 = handle(connect(&mut d, a, dev_a, 0, 1));
    let regs = map_first_page(&mut d, a, bar0);
    // A connection is not let go while the program maps it.
    let disconnect = |d: &mut Daemon| ask(d, a, Request::DisconnectSegment { remote: bar0 });
    assert!(code(&disconnect(&mut d)).is_some(), "mapped");
    assert_eq!(
        ask(&mut d, a, Request::Unmap { map: handle(regs) }),
        Reply::Done
    );
    assert_eq!(disconnect(&mut d), Reply::Done);
    assert!(
        d.resources_in_use().contains("lender:dma0"),
        "borrowed: {}",
        d.resources_in_use()
    );
    let bar2 = handle(connect(&mut d, a, dev_a, 2, 1));
    let big = ask(
        &mut d,
        a,
        Request::MapRemote {
            remote: bar2,
            offset: 0,
            size: 4096,
        },
    );
    assert!(code(&big).is_some(), "{big:?}");
    let ram = handle(mine);
    let in_ram = ask(
        &mut d,
        a,
        Request::MapRemote {
            remote: ram,
            offset: 4096,
            size: 4096,
        },
    );
    let start = ask(
        &mut d,
        a,
        Request::MapRemote {
            remote: ram,
            offset: 0,
            size: 4096,
        },
    );
    match (&start, &in_ram) {
        (
            Reply::Mapped { offset: at0, .. },
            Reply::Mapped {
                offset: at1,
                len: 4096,
                ..
            },
        ) => {
            assert_eq!(
                at1 - at0,
                4096,
                "the map starts at its offset in the segment"
            )
        }
        other => panic!("{other:?}"),
    }
    let let_go = ask(&mut d, a, Request::DisconnectSegment { remote: ram });
    assert!(
        code(&let_go).is_some(),
        "device memory mapped by the program: {let_go:?}"
    );
    let past = ask(
        &mut d,
        a,
        Request::MapRemote {
            remote: ram,
            offset: 65536,
            size: 1,
        },
    );
    assert!(code(&past).is_some(), "{past:?}");

    // A segment of the program's own RAM, mapped for the device: the device's address of an
    // offset is the segment's plus the offset, the same each time.
    let local = handle(ask(
        &mut d,
        a,
        Request::CreateSegment {
            id: None,
            size: 65536,
        },
    ));
    let for_device = |d: &mut Daemon, offset: u64| {
        ask(
            d,
            a,
            Request::MapForDevice {
                device: dev_a,
                segment: local,
                offset,
                size: 4096,
            },
        )
    };
    let (Reply::Value(at0), Reply::Value(at1)) = (for_device(&mut d, 0), for_device(&mut d, 8192))
    else {
        panic!("device addresses")
    };
    assert_eq!(at1 - at0, 8192);
    assert_eq!(for_device(&mut d, 0), Reply::Value(at0));
    let unmap = |d: &mut Daemon| {
        ask(
            d,
            a,
            Request::UnmapForDevice {
                device: dev_a,
                segment: local,
            },
        )
    };
    assert_eq!(unmap(&mut d), Reply::Done);
    assert!(code(&unmap(&mut d)).is_some(), "not mapped any more");

    // Returned only once nothing of it is connected.
    let give_back =
        |d: &mut Daemon, s: u64, device: u64| ask(d, s, Request::ReturnDevice { device });
    assert!(
        code(&give_back(&mut d, b, dev_b)).is_some(),
        "b is connected to segment 2"
    );
    let remote = handle(shared_seg);
    assert_eq!(
        ask(&mut d, b, Request::DisconnectSegment { remote }),
        Reply::Done
    );
    assert_eq!(give_back(&mut d, b, dev_b), Reply::Done);
    assert!(
        code(&give_back(&mut d, b, dev_b)).is_some(),
        "returned already"
    );
}

#[test]
fn a_requester_is_registered_by_the_bus_and_devfn_of_a_function_of_the_programs_host() {
    let mut d = daemon("requester");
    let s = hello(&mut d, "borrower");
    // The borrower's only function is its NTB adapter: found at its bus and devfn, nothing
    // at the devfn next to it.
    let cluster = smartio_cluster::Cluster::new("back-to-back", &Calibration::default_embedded())
        .expect("the scenario loads");
    let fabric = cluster.machine.fabric();
    let ntb = fabric
        .endpoints()
        .iter()
        .find(|e| e.host.0 == 0 && e.name == "ntb0")
        .expect("the borrower's adapter");
    let (bus, devfn) = (
        u32::from(ntb.bdf.bus),
        u32::from(ntb.bdf.dev) << 3 | u32::from(ntb.bdf.func),
    );
    drop(fabric);
    let register = |d: &mut Daemon, bus: u32, devfn: u32| match ask(
        d,
        s,
        Request::RegisterRequester { bus, devfn },
    ) {
        Reply::Error { message, .. } => message,
        other => panic!("{other:?}"),
    };
    let found = ask(&mut d, s, Request::RegisterRequester { bus, devfn });
    let requester = handle(found);
    let missing = register(&mut d, bus, devfn + 1);
    assert!(
        missing.contains(&format!(
            "no function at bus {bus:#x} devfn {:#x}",
            devfn + 1
        )),
        "{missing}"
    );
    let unregister = |d: &mut Daemon| ask(d, s, Request::UnregisterRequester { requester });
    assert_eq!(unregister(&mut d), Reply::Done);
    assert!(code(&unregister(&mut d)).is_some(), "unregistered already");
}

#[test]
fn an_auxiliary_connection_attaches_to_its_descriptor_by_token_on_the_same_host_only() {
    let mut d = daemon("attach");
    let a = hello(&mut d, "borrower");
    let attach = |d: &mut Daemon, host: &str, token: u64| {
        let s = d.open_session().expect("a session");
        let reply = ask(
            d,
            s,
            Request::Hello {
                host: host.into(),
                attach: Some(token),
            },
        );
        (s, reply)
    };
    let (b, joined) = attach(&mut d, "borrower", a);
    let Reply::Hello { token: b_token, .. } = joined else {
        panic!("attached: {joined:?}")
    };
    // What the auxiliary makes is its descriptor's: the descriptor's own connection ends it.
    let seg = handle(ask(
        &mut d,
        b,
        Request::CreateSegment {
            id: None,
            size: 4096,
        },
    ));
    assert_eq!(
        ask(&mut d, a, Request::RemoveSegment { segment: seg }),
        Reply::Done
    );
    // Refused: another host's descriptor, an auxiliary's own token, a token nobody has.
    for (host, token) in [("lender", a), ("borrower", b_token), ("borrower", 9999)] {
        let (_, reply) = attach(&mut d, host, token);
        assert!(
            code(&reply).is_some(),
            "{host} attaching to {token}: {reply:?}"
        );
    }
}

#[test]
fn a_bar_connection_records_a_segment_its_disconnect_removes_while_memory_made_for_the_device_stays(
) {
    let mut d = daemon("device-records");
    let a = hello(&mut d, "borrower");
    let fdid = fdid_of(&mut d, a, "lender:dma0");
    let device = borrow(&mut d, a, fdid);
    let segments = |d: &Daemon| d.stats().segments;
    let idle = segments(&d);
    let connect = |d: &mut Daemon, id: u32, memtype: u32| {
        ask(
            d,
            a,
            Request::ConnectDeviceSegment {
                device,
                id,
                memtype,
            },
        )
    };
    let disconnect = |d: &mut Daemon, remote: u64| {
        assert_eq!(
            ask(d, a, Request::DisconnectSegment { remote }),
            Reply::Done
        );
    };
    let (bar, private) = (1, 2);
    // A BAR's connection makes its segment record, and its disconnect removes it.
    let bar0 = handle(connect(&mut d, 0, bar));
    assert_eq!(segments(&d), idle + 1, "BAR0's record");
    disconnect(&mut d, bar0);
    assert_eq!(segments(&d), idle, "BAR0's record removed");
    // Memory made for the device stays after a disconnect, and is there to map again.
    let made = ask(
        &mut d,
        a,
        Request::CreateDeviceSegment {
            device,
            id: 1,
            size: 65536,
            memtype: private,
            hints: 0x2 | 0x4,
        },
    );
    assert_eq!(made, Reply::Done);
    assert_eq!(segments(&d), idle + 1, "the device's memory");
    let first = handle(connect(&mut d, 1, private));
    disconnect(&mut d, first);
    assert_eq!(segments(&d), idle + 1, "kept after the disconnect");
    let again = handle(connect(&mut d, 1, private));
    let map = ask(
        &mut d,
        a,
        Request::MapRemote {
            remote: again,
            offset: 0,
            size: 4096,
        },
    );
    assert!(matches!(map, Reply::Mapped { len: 4096, .. }), "{map:?}");
    assert_eq!(
        ask(&mut d, a, Request::Unmap { map: handle(map) }),
        Reply::Done
    );
    disconnect(&mut d, again);
    // Returning the device gives its memory back.
    assert_eq!(
        ask(&mut d, a, Request::ReturnDevice { device }),
        Reply::Done
    );
    assert_eq!(segments(&d), idle, "given back with the device");
}

/// A program's socket to the daemon at `path`, for requests it sends without waiting for
/// the answer.
fn program_socket(path: &str) -> std::os::fd::OwnedFd {
    let socket = rustix::net::socket(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        None,
    )
    .expect("a socket");
    let at = rustix::net::SocketAddrUnix::new(path).expect("a path");
    rustix::net::connect(&socket, &at).expect("connects");
    socket
}

/// `request`'s answer on `socket`.
fn call_on(socket: &std::os::fd::OwnedFd, request: &Request) -> Reply {
    protocol::send(socket.as_fd(), request, None).expect("sent");
    protocol::receive::<Reply>(socket.as_fd())
        .expect("an answer")
        .0
}

/// Two programs on the daemon at `path`: one on the lender (the segments' owner), one on
/// the borrower (their user), each past its hello.
fn owner_and_user(path: &str) -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    let owner = program_socket(path);
    let user = program_socket(path);
    for (socket, host) in [(&owner, "lender"), (&user, "borrower")] {
        let hello = Request::Hello {
            host: host.into(),
            attach: None,
        };
        assert!(matches!(call_on(socket, &hello), Reply::Hello { .. }));
    }
    (owner, user)
}

/// Descriptor `a` maps the first page of its connection `remote`, which must succeed; the
/// reply.
fn map_first_page(d: &mut Daemon, a: u64, remote: u64) -> Reply {
    let request = Request::MapRemote {
        remote,
        offset: 0,
        size: 4096,
    };
    let regs = ask(d, a, request);
    assert!(matches!(regs, Reply::Mapped { len: 4096, .. }), "{regs:?}");
    regs
}

#[test]
fn a_program_that_dies_while_it_waits_is_let_go_and_connections_to_its_segment_are_lost() {
    let path = socket_path("dies-waiting");
    let mut d = Daemon::up("back-to-back", &Calibration::default_embedded(), &path)
        .expect("the daemon starts");
    let lender_node = d.hosts()[1].1[0];
    let client = std::thread::spawn(move || {
        let (owner, user) = owner_and_user(&path);
        let made = call_on(
            &owner,
            &Request::CreateSegment {
                id: None,
                size: 1 << 16,
            },
        );
        let Reply::Segment {
            handle: segment,
            id,
            ..
        } = made
        else {
            panic!("{made:?}")
        };
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
            assert_eq!(call_on(&owner, &r), Reply::Done);
        }
        let remote = handle(call_on(
            &user,
            &Request::ConnectSegment {
                node_id: lender_node,
                segment_id: id,
                adapter: 0,
            },
        ));
        let made = call_on(
            &owner,
            &Request::CreateDataInterrupt {
                adapter: 0,
                number: None,
            },
        );
        let Reply::Interrupt {
            handle: interrupt, ..
        } = made
        else {
            panic!("{made:?}")
        };
        // The user waits for its connection's events; a while later the owner waits for an
        // interrupt nobody triggers, and dies meanwhile.
        let heard = Request::WaitSegmentEvent {
            segment: remote,
            timeout_ms: Some(5_000),
        };
        protocol::send(user.as_fd(), &heard, None).expect("sent");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let wait = Request::WaitDataInterrupt {
            interrupt,
            timeout_ms: None,
        };
        protocol::send(owner.as_fd(), &wait, None).expect("sent");
        drop(owner);
        let lost = protocol::receive::<Reply>(user.as_fd())
            .expect("an answer")
            .0;
        let done = call_on(&user, &Request::Shutdown);
        (lost, done)
    });
    let served = d.run();
    let (lost, done) = client.join().expect("the client ran");
    served.expect("served until the shutdown");
    let Reply::SegmentEvent {
        reason, node_id, ..
    } = lost
    else {
        panic!("the owner's leaving is not heard: {lost:?}")
    };
    // `SCI_CB_LOST`, from the lender's node.
    assert_eq!((reason, node_id), (5, lender_node));
    assert_eq!(done, Reply::Done);
}

#[test]
fn a_device_maps_connections_and_device_segments_and_returning_another_device_leaves_its_own() {
    let mut d = daemon("two-devices");
    let lender = hello(&mut d, "lender");
    let a = hello(&mut d, "borrower");
    let (dma, nvme) = (
        fdid_of(&mut d, a, "lender:dma0"),
        fdid_of(&mut d, a, "lender:nvme0"),
    );
    let (first, second) = (borrow(&mut d, a, dma), borrow(&mut d, a, nvme));
    // A connection to the lender's segment.
    let Reply::Segment {
        handle: far, id, ..
    } = ask(
        &mut d,
        lender,
        Request::CreateSegment {
            id: None,
            size: 1 << 16,
        },
    )
    else {
        panic!("no segment")
    };
    for r in [
        Request::PrepareSegment {
            segment: far,
            adapter: 0,
        },
        Request::SetAvailable {
            segment: far,
            adapter: 0,
        },
    ] {
        assert_eq!(ask(&mut d, lender, r), Reply::Done);
    }
    let node = d.hosts()[1].1[0];
    let remote = handle(ask(
        &mut d,
        a,
        Request::ConnectSegment {
            node_id: node,
            segment_id: id,
            adapter: 0,
        },
    ));
    // Memory made for the first device, connected.
    let made = Request::CreateDeviceSegment {
        device: first,
        id: 1,
        size: 65536,
        memtype: 2,
        hints: 0x2 | 0x4,
    };
    assert_eq!(ask(&mut d, a, made), Reply::Done);
    let memory = handle(ask(
        &mut d,
        a,
        Request::ConnectDeviceSegment {
            device: first,
            id: 1,
            memtype: 2,
        },
    ));
    // The second device maps both for itself.
    let map_for = |d: &mut Daemon, segment| {
        ask(
            d,
            a,
            Request::MapForDevice {
                device: second,
                segment,
                offset: 0,
                size: 4096,
            },
        )
    };
    let unmap_for = |d: &mut Daemon, segment| {
        ask(
            d,
            a,
            Request::UnmapForDevice {
                device: second,
                segment,
            },
        )
    };
    for (segment, what) in [(remote, "a connection"), (memory, "a device segment")] {
        let mapped = map_for(&mut d, segment);
        assert!(matches!(mapped, Reply::Value(_)), "{what}: {mapped:?}");
    }
    assert_eq!(unmap_for(&mut d, memory), Reply::Done);
    // The second device's BAR0 connection; then the first device is returned.
    let bar0 = handle(ask(
        &mut d,
        a,
        Request::ConnectDeviceSegment {
            device: second,
            id: 0,
            memtype: 1,
        },
    ));
    assert_eq!(
        ask(&mut d, a, Request::DisconnectSegment { remote: memory }),
        Reply::Done
    );
    assert_eq!(
        ask(&mut d, a, Request::ReturnDevice { device: first }),
        Reply::Done
    );
    // What the second device has is untouched.
    map_first_page(&mut d, a, bar0);
    assert_eq!(unmap_for(&mut d, remote), Reply::Done);
}

#[test]
fn a_program_that_stops_reading_its_answers_loses_its_connection_and_the_others_are_served() {
    let path = socket_path("stops-reading");
    let mut d = Daemon::up("back-to-back", &Calibration::default_embedded(), &path)
        .expect("the daemon starts");
    let client = std::thread::spawn(move || {
        let deaf = program_socket(&path);
        // Requests whose answers it never reads, until the daemon lets it go (its answers
        // fill the socket); while the daemon has not read the last ones, it tries again.
        let mut sent = 0u32;
        let gone = loop {
            match protocol::send_now(deaf.as_fd(), &Request::Stats, None) {
                Ok(()) => sent += 1,
                Err(protocol::WireError::Socket(e)) if e == rustix::io::Errno::AGAIN => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => break e,
            }
        };
        let other = Connection::open(&path).expect("connects");
        let hello = Request::Hello {
            host: "lender".into(),
            attach: None,
        };
        let answered = other.call(&hello).map(|(r, _)| r);
        let done = other.call(&Request::Shutdown).map(|(r, _)| r);
        (sent, gone.to_string(), answered, done)
    });
    let served = d.run();
    let (sent, gone, answered, done) = client.join().expect("the client ran");
    served.expect("served until the shutdown");
    assert!(sent > 0, "{gone}");
    assert!(
        matches!(answered, Ok(Reply::Hello { .. })),
        "after {sent} unread answers ({gone}): {answered:?}"
    );
    assert_eq!(done.expect("an answer"), Reply::Done);
}

#[test]
fn a_connection_a_dead_programs_dma_queue_kept_busy_goes_once_the_queue_drains() {
    let path = socket_path("drained");
    let mut d = Daemon::up("back-to-back", &Calibration::default_embedded(), &path)
        .expect("the daemon starts");
    let lender_node = d.hosts()[1].1[0];
    let client = std::thread::spawn(move || {
        let (owner, user) = owner_and_user(&path);
        let create = Request::CreateSegment {
            id: None,
            size: 1 << 20,
        };
        let Reply::Segment {
            handle: segment,
            id,
            ..
        } = call_on(&owner, &create)
        else {
            panic!("no segment")
        };
        let Reply::Segment { handle: local, .. } = call_on(&user, &create) else {
            panic!("no segment")
        };
        let prepare = |segment| Request::PrepareSegment {
            segment,
            adapter: 0,
        };
        assert_eq!(call_on(&owner, &prepare(segment)), Reply::Done);
        let available = Request::SetAvailable {
            segment,
            adapter: 0,
        };
        assert_eq!(call_on(&owner, &available), Reply::Done);
        assert_eq!(call_on(&user, &prepare(local)), Reply::Done);
        let remote = handle(call_on(
            &user,
            &Request::ConnectSegment {
                node_id: lender_node,
                segment_id: id,
                adapter: 0,
            },
        ));
        let heard = Request::WaitSegmentEvent {
            segment,
            timeout_ms: Some(5_000),
        };
        let connected = call_on(&owner, &heard);
        let queue = handle(call_on(
            &user,
            &Request::CreateDmaQueue {
                adapter: 0,
                entries: 8,
            },
        ));
        let start = Request::StartDma {
            queue,
            local,
            remote,
            entries: vec![protocol::DmaEntry {
                size: 1 << 20,
                local_offset: 0,
                remote_offset: 0,
                flags: 0,
            }],
            flags: 0,
        };
        assert!(matches!(call_on(&user, &start), Reply::Value(_)));
        // The owner waits for its segment's next event; a while later the user dies with its
        // transfer not waited for, which keeps its connection until the queue has drained.
        protocol::send(owner.as_fd(), &heard, None).expect("sent");
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(user);
        let disconnected = protocol::receive::<Reply>(owner.as_fd())
            .expect("an answer")
            .0;
        let done = call_on(&owner, &Request::Shutdown);
        (connected, disconnected, done)
    });
    let served = d.run();
    let (connected, disconnected, done) = client.join().expect("the client ran");
    served.expect("served until the shutdown");
    let reason = |r: &Reply| match r {
        Reply::SegmentEvent { reason, .. } => *reason,
        other => panic!("no event: {other:?}"),
    };
    // `SCI_CB_CONNECT`, then `SCI_CB_DISCONNECT` with no other request to the daemon.
    assert_eq!(reason(&connected), 1);
    assert_eq!(reason(&disconnected), 2);
    assert_eq!(done, Reply::Done);
}

#[test]
fn a_requester_is_found_at_a_device_number_past_zero() {
    // The lender's DMA device with nine VFs (routing ids PF + 1 ..= PF + 9): VF 9 sits at
    // device 1, function 1 of the PF's bus.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-vf-requester");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    let scenario = dir.join("vfs.toml");
    std::fs::write(
        &scenario,
        "name = \"vfs\"\ndescription = \"a host with a DMA device of nine VFs\"\n\n\
         [[host]]\nname = \"lender\"\nram = \"1 GiB\"\niommu = false\ncores = 1\n\n\
         [[host.device]]\nname = \"dma0\"\nkind = \"dma\"\nparent = \"root\"\n\
         link = \"gen3 x16\"\nparams = { vfs = 9 }\n",
    )
    .expect("written");
    let scenario = scenario.to_str().expect("utf-8").to_string();
    let cluster = smartio_cluster::Cluster::new(&scenario, &Calibration::default_embedded())
        .expect("the scenario loads");
    let (bus, devfn) = {
        let fabric = cluster.machine.fabric();
        let vf = fabric
            .endpoints()
            .iter()
            .find(|e| matches!(e.function, smartio_fabric::Function::Virtual { n: 9, .. }))
            .expect("VF 9");
        (
            u32::from(vf.bdf.bus),
            u32::from(vf.bdf.dev) << 3 | u32::from(vf.bdf.func),
        )
    };
    assert_eq!(devfn & 0b111, 1, "function 1");
    assert!(devfn >> 3 >= 1, "a device number past 0: {devfn:#x}");
    let mut d = Daemon::up(
        &scenario,
        &Calibration::default_embedded(),
        dir.join("cluster.sock").to_str().expect("utf-8"),
    )
    .expect("the daemon starts");
    let s = hello(&mut d, "lender");
    let reply = ask(&mut d, s, Request::RegisterRequester { bus, devfn });
    if let Reply::Error { message, .. } = &reply {
        assert!(
            !message.contains("no function at"),
            "VF 9 at bus {bus:#x} devfn {devfn:#x}: {message}"
        );
    }
}

/// Back-to-back with the lender's DMA device given `memory` bytes (its BAR2), written next to
/// `socket`; the scenario's path.
fn back_to_back_with_dma_memory(socket: &str, memory: &str) -> String {
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/back-to-back.toml"
    );
    let text = std::fs::read_to_string(shipped).expect("the shipped scenario");
    let dma = "name = \"dma0\"\nkind = \"dma\"\n";
    assert!(text.contains(dma), "back-to-back has a DMA device");
    let text = text.replace(dma, &format!("{dma}params = {{ memory = \"{memory}\" }}\n"));
    let path = std::path::Path::new(socket).with_file_name("scenario.toml");
    std::fs::write(&path, text).expect("the scenario written");
    path.to_str().expect("utf-8").to_string()
}

#[test]
fn a_bar_of_a_register_page_is_mapped_and_a_larger_one_is_refused() {
    for (memory, fits) in [("1 MiB", true), ("2 MiB", false)] {
        let socket = socket_path(&format!("bar-{}", memory.replace(' ', "")));
        let scenario = back_to_back_with_dma_memory(&socket, memory);
        let mut d = Daemon::up(&scenario, &Calibration::default_embedded(), &socket)
            .expect("the daemon starts");
        let a = hello(&mut d, "borrower");
        let fdid = fdid_of(&mut d, a, "lender:dma0");
        let device = borrow(&mut d, a, fdid);
        let bar2 = handle(ask(
            &mut d,
            a,
            Request::ConnectDeviceSegment {
                device,
                id: 2,
                memtype: 1,
            },
        ));
        let map = Request::MapRemote {
            remote: bar2,
            offset: 0,
            size: 4096,
        };
        let reply = ask(&mut d, a, map);
        if fits {
            assert!(
                matches!(reply, Reply::Mapped { len: 4096, .. }),
                "{reply:?}"
            );
        } else {
            assert_eq!(
                code(&reply),
                sci(SciErrorClass::IllegalParameter),
                "{reply:?}"
            );
            let Reply::Error { message, .. } = reply else {
                unreachable!("an error, checked above")
            };
            assert!(
                message.contains("BAR2 of 2097152 bytes") && message.contains("1048576"),
                "{message}"
            );
        }
    }
}
