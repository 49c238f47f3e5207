//! Scenario-level tests of SISCI segments over the emulated NTB fabric.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_fabric::{HostId, MulticastError, NtbError};
use smartio_machine::Machine;
use smartio_platform::{PhysAddr, SimDuration, SimTime};
use smartio_smartio::sisci::{SciError, Sisci};
use std::cell::RefCell;
use std::rc::Rc;

/// A cluster of `scenario` (kept by the caller: dropping it ends its simulation) and SISCI
/// on it.
fn cluster(scenario: &str) -> (Cluster, Sisci) {
    let c = Cluster::new(scenario, &Calibration::default_embedded()).expect("scenario loads");
    let sci = Sisci::new(&c.machine);
    (c, sci)
}

fn host(machine: &Machine, name: &str) -> HostId {
    machine.fabric().host_by_name(name).expect("host exists")
}

/// Random-looking but reproducible bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn bytes_stored_through_a_remote_map_are_read_back_equal_by_the_owner() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let seg = sci
        .create_segment(lender, Some(7), 1 << 20)
        .expect("segment");
    sci.prepare_segment(&seg, 0).expect("prepare");
    sci.set_available(&seg, 0).expect("available");
    let node = sci.node_id(lender, 0).expect("node id");
    let remote = sci.connect_segment(borrower, 0, node, 7).expect("connect");
    let map = sci.map_remote(&remote, 0, 1 << 20).expect("map");

    let data = pattern(300_000, 1);
    let read_back = Rc::new(RefCell::new(Vec::new()));
    let (m, d, out) = (map.clone(), data.clone(), read_back.clone());
    let local = sci.map_local(&seg).expect("local map");
    machine.spawn(async move {
        m.store(4096 + 3, &d).await.expect("in range");
        // The borrower reads it back through the NTB, too.
        let mut buf = vec![0u8; 64];
        m.load(4096 + 3, &mut buf).await.expect("in range");
        assert_eq!(buf, d[..64]);
        let mut own = vec![0u8; d.len()];
        local.load(4096 + 3, &mut own).await.expect("in range");
        *out.borrow_mut() = own;
    });
    machine.run();
    assert_eq!(*read_back.borrow(), data);
    let mut direct = vec![0u8; data.len()];
    machine.peek_memory(lender, PhysAddr(seg.phys.get() + 4096 + 3), &mut direct);
    assert_eq!(direct, data);
    assert!(
        machine.now() > SimTime::ZERO,
        "stores through the NTB take time"
    );
}

#[test]
fn the_lut_limit_is_an_error_naming_the_adapter_and_unmapping_frees_entries() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let adapter = sci.adapter(borrower, 0).expect("adapter");
    let (used0, limit) = sci.lut_usage(adapter);
    assert_eq!(used0, 0);
    assert_eq!(limit, 64, "PXH830-class default from the calibration");

    let seg = sci.create_segment(lender, None, 64 << 10).expect("segment");
    sci.prepare_segment(&seg, 0).expect("prepare");
    sci.set_available(&seg, 0).expect("available");
    let remote = sci
        .connect_segment(borrower, 0, sci.node_id(lender, 0).expect("id"), seg.id)
        .expect("connect");
    let maps: Vec<_> = (0..limit)
        .map(|_| sci.map_remote(&remote, 0, 4096).expect("fits"))
        .collect();
    assert_eq!(sci.lut_usage(adapter).0, limit);

    let err = sci.map_remote(&remote, 0, 4096).expect_err("table full");
    let message = err.to_string();
    assert!(
        matches!(err, SciError::Ntb(NtbError::LutFull { limit: 64, .. })),
        "{err:?}"
    );
    assert!(message.contains("borrower.ntb0"), "{message}");
    assert!(message.contains("of 64 free"), "{message}");

    for m in &maps[..10] {
        sci.unmap(m).expect("mapped");
    }
    assert_eq!(sci.lut_usage(adapter).0, limit - 10);
    assert!(matches!(sci.unmap(&maps[0]), Err(SciError::Stale { .. })));
    let again = sci
        .map_remote(&remote, 0, 4096)
        .expect("entries were freed");
    assert_eq!(sci.lut_usage(adapter).0, limit - 9);

    // Teardown order is enforced.
    assert!(matches!(
        sci.disconnect_segment(&remote),
        Err(SciError::Busy { .. })
    ));
    assert!(matches!(
        sci.remove_segment(&seg),
        Err(SciError::Busy { .. })
    ));
    sci.unmap(&again).expect("mapped");
    for m in &maps[10..] {
        sci.unmap(m).expect("mapped");
    }
    assert_eq!(sci.lut_usage(adapter).0, 0);
    sci.disconnect_segment(&remote).expect("no maps left");
    sci.remove_segment(&seg).expect("no connections left");
}

#[test]
fn connecting_needs_an_available_segment_and_a_known_node() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let node = sci.node_id(lender, 0).expect("node id");
    assert!(matches!(
        sci.connect_segment(borrower, 0, node, 99),
        Err(SciError::NoSuchSegment { id: 99, .. })
    ));
    let seg = sci.create_segment(lender, Some(99), 4096).expect("segment");
    assert!(matches!(
        sci.set_available(&seg, 0),
        Err(SciError::NotPrepared { .. })
    ));
    sci.prepare_segment(&seg, 0).expect("prepare");
    assert!(matches!(
        sci.connect_segment(borrower, 0, node, 99),
        Err(SciError::NotAvailable { .. })
    ));
    assert!(matches!(
        sci.create_segment(lender, Some(99), 4096),
        Err(SciError::SegmentIdInUse { id: 99, .. })
    ));
    assert!(matches!(
        sci.connect_segment(borrower, 0, smartio_fabric::ClusterNodeId(1000), 99),
        Err(SciError::UnknownNodeId(_))
    ));
    assert!(matches!(
        sci.connect_segment(borrower, 3, node, 99),
        Err(SciError::UnknownAdapter { number: 3, .. })
    ));
}

#[test]
fn link_down_loses_stores_reads_all_ones_and_sequences_report_it_until_link_up() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let seg = sci.create_segment(lender, Some(1), 4096).expect("segment");
    sci.prepare_segment(&seg, 0).expect("prepare");
    sci.set_available(&seg, 0).expect("available");
    let remote = sci
        .connect_segment(borrower, 0, sci.node_id(lender, 0).expect("id"), 1)
        .expect("connect");
    let map = sci.map_remote(&remote, 0, 4096).expect("map");
    let cable = machine
        .fabric()
        .adapter(sci.adapter(borrower, 0).expect("adapter"))
        .cable
        .expect("cabled");
    machine.schedule_link_state(cable, false, SimTime::ZERO + SimDuration::from_us(10));
    machine.schedule_link_state(cable, true, SimTime::ZERO + SimDuration::from_us(20));

    let log = Rc::new(RefCell::new(Vec::new()));
    let (m, l, s, r) = (map.clone(), log.clone(), sci.clone(), remote);
    machine.spawn(async move {
        let cpu = s.machine().cpu(r.host);
        let seq = m.start_sequence();
        m.store(0, &[1; 8]).await.expect("in range");
        let mut buf = [0u8; 8];
        m.load(0, &mut buf).await.expect("in range");
        l.borrow_mut()
            .push(format!("before: {buf:?} {:?}", m.check_sequence(&seq)));

        smartio_platform::Clock::sleep(&cpu, SimDuration::from_us(12)).await;
        let seq = m.start_sequence();
        m.store(0, &[2; 8]).await.expect("in range");
        m.load(0, &mut buf).await.expect("in range");
        l.borrow_mut().push(format!(
            "down: {buf:?} {:?} {:?}",
            seq.status,
            m.check_sequence(&seq)
        ));

        smartio_platform::Clock::sleep(&cpu, SimDuration::from_us(10)).await;
        let retry = m.check_sequence(&seq);
        let seq = m.start_sequence();
        m.store(0, &[3; 8]).await.expect("in range");
        m.load(0, &mut buf).await.expect("in range");
        l.borrow_mut().push(format!(
            "up: {buf:?} old {retry:?} new {:?}",
            m.check_sequence(&seq)
        ));
    });
    let events = Rc::new(RefCell::new(Vec::new()));
    let (s, e) = (sci.clone(), events.clone());
    machine.spawn(async move {
        let (first, seen) = s.next_event(&remote, 0).await;
        let (second, _) = s.next_event(&remote, seen).await;
        e.borrow_mut().push((first, second));
    });
    machine.run();
    assert_eq!(
        *log.borrow(),
        [
            "before: [1, 1, 1, 1, 1, 1, 1, 1] Ok",
            "down: [255, 255, 255, 255, 255, 255, 255, 255] NotRetriable NotRetriable",
            "up: [3, 3, 3, 3, 3, 3, 3, 3] old Retriable new Ok",
        ]
    );
    let mut owner = [0u8; 8];
    machine.peek_memory(lender, seg.phys, &mut owner);
    assert_eq!(
        owner, [3; 8],
        "the store while down was lost, the one after landed"
    );
    assert_eq!(
        *events.borrow(),
        [(
            smartio_smartio::sisci::SegmentEvent::ConnectionLost { link: cable },
            smartio_smartio::sisci::SegmentEvent::Operational
        )]
    );
}

#[test]
fn a_data_interrupt_carries_a_payload_and_times_out_when_nothing_comes() {
    let (c, sci) = cluster("cluster-switch");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let intr = sci
        .create_data_interrupt(lender, 0, Some(5))
        .expect("interrupt");
    let remote = sci
        .connect_data_interrupt(borrower, 0, sci.node_id(lender, 0).expect("id"), 5)
        .expect("connect");
    let r = remote.clone();
    assert!(matches!(
        async move { r.trigger(&[0; 249]).await }.await_blocking(&machine),
        Err(SciError::PayloadTooLarge { len: 249, max: 248 })
    ));
    let got = Rc::new(RefCell::new(Vec::new()));
    let (s, g) = (sci.clone(), got.clone());
    machine.spawn(async move {
        let first = s
            .wait_data_interrupt(&intr, SimDuration::from_us(100))
            .await;
        let t = s.machine().now();
        let second = s.wait_data_interrupt(&intr, SimDuration::from_us(5)).await;
        g.borrow_mut().push(format!(
            "{first:?} at>{} {second:?}",
            t > (SimTime::ZERO + SimDuration::from_us(2))
        ));
    });
    let r = remote.clone();
    machine.spawn(async move {
        r.trigger(b"hello manager").await.expect("fits");
    });
    machine.run();
    assert_eq!(
        *got.borrow(),
        [format!(
            "Ok({:?}) at>true Err(Timeout(5.000 us))",
            b"hello manager".to_vec()
        )]
    );
    assert!(matches!(
        sci.remove_data_interrupt(&intr),
        Err(SciError::Busy { .. })
    ));
    sci.disconnect_data_interrupt(&remote).expect("connected");
    sci.remove_data_interrupt(&intr).expect("no senders");
}

#[test]
fn a_sender_that_reconnects_to_its_slot_is_heard_every_time_with_libnvms_message_sizes() {
    let (c, sci) = cluster("cluster-switch");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let node = sci.node_id(lender, 0).expect("id");
    let intr = sci
        .create_data_interrupt(lender, 0, Some(9))
        .expect("interrupt");
    // libnvm's RPC server connects, sends one 80-byte completion and disconnects, each time:
    // every message takes the same slot and must still be a new one.
    for round in 0..3u8 {
        let remote = sci
            .connect_data_interrupt(borrower, 0, node, 9)
            .expect("connect");
        let message = vec![round; 80];
        let r = remote.clone();
        let m = message.clone();
        machine.spawn(async move { r.trigger(&m).await.expect("fits") });
        let got = Rc::new(RefCell::new(None));
        let (s, g) = (sci.clone(), got.clone());
        machine.spawn(async move {
            *g.borrow_mut() = Some(
                s.wait_data_interrupt(&intr, SimDuration::from_us(100))
                    .await,
            );
        });
        machine.run();
        let heard = got.borrow_mut().take().expect("the wait ended");
        assert_eq!(
            heard.expect("a message, not a timeout"),
            message,
            "round {round}"
        );
        sci.disconnect_data_interrupt(&remote).expect("connected");
    }
    sci.remove_data_interrupt(&intr).expect("no senders");
}

#[test]
fn one_multicast_store_lands_in_the_segments_of_all_59_other_hosts() {
    let c = Cluster::new("cascade-60", &Calibration::default_embedded()).expect("scenario loads");
    let (machine, sci) = (c.machine.clone(), Sisci::new(&c.machine));
    let hosts: Vec<HostId> = (0..machine.fabric().hosts().len() as u32)
        .map(HostId)
        .collect();
    assert_eq!(hosts.len(), 60);
    let sender = hosts[0];
    let group = sci.create_multicast_group(64 << 10).expect("group");
    let segments: Vec<_> = hosts[1..]
        .iter()
        .map(|&h| {
            let seg = sci.create_segment(h, Some(42), 64 << 10).expect("segment");
            sci.join_multicast(&seg, 0, group).expect("join");
            seg
        })
        .collect();
    let remote = sci.connect_multicast(sender, 0, group).expect("connect");
    let map = sci.map_remote(&remote, 0, 4096).expect("map");
    let data = pattern(4096, 9);
    let d = data.clone();
    machine.spawn(async move {
        map.store(0, &d).await.expect("in range");
    });
    machine.run();
    for seg in &segments {
        let mut got = vec![0u8; 4096];
        machine.peek_memory(seg.host, seg.phys, &mut got);
        assert_eq!(got, data, "host {:?}", seg.host);
    }
    // The sender's own link carried each TLP once (64-byte CPU stores: 64 TLPs).
    let adapter = machine.fabric().adapter(remote.adapter).clone();
    let cable = adapter.cable.expect("cabled");
    let timed = c.timed().expect("the timed engine counts TLPs per link");
    let stats = timed.link_states()[cable.index()].clone();
    assert_eq!(stats.tlps.iter().sum::<u64>(), 64);
}

#[test]
fn only_the_segment_that_joined_a_group_can_leave_it() {
    let (_cluster, sci) = cluster("cascade-60");
    let group = sci.create_multicast_group(64 << 10).expect("group");
    let joined = sci.create_segment(HostId(1), Some(1), 64 << 10).expect("1");
    let other = sci.create_segment(HostId(1), Some(2), 64 << 10).expect("2");
    sci.join_multicast(&joined, 0, group).expect("join");
    let err = sci
        .leave_multicast(&other, 0, group)
        .expect_err("the other segment never joined");
    assert!(
        matches!(
            err,
            SciError::NotMember {
                id: 2,
                adapter: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .ends_with("segment 2 does not receive multicast group 0 through adapter 0"),
        "{err}"
    );
    // The adapter is still a member: the group cannot go, and the segment that joined leaves.
    assert!(
        sci.remove_multicast_group(group).is_err(),
        "still has a member"
    );
    sci.leave_multicast(&joined, 0, group).expect("leave");
    sci.remove_multicast_group(group).expect("empty");
}

#[test]
fn multicast_groups_are_limited() {
    let (c, sci) = cluster("cascade-60");
    let machine = c.machine.clone();
    let limit = machine.fabric().multicast().limit();
    assert_eq!(limit, 64);
    for _ in 0..limit {
        sci.create_multicast_group(4096).expect("below the limit");
    }
    assert_eq!(
        sci.create_multicast_group(4096),
        Err(SciError::Multicast(MulticastError::GroupsExhausted {
            limit
        }))
    );
}

/// Runs a future to completion on the simulation (for calls that fail before any I/O).
trait AwaitBlocking: std::future::Future + Sized + 'static {
    fn await_blocking(self, machine: &Machine) -> Self::Output
    where
        Self::Output: 'static,
    {
        let out = Rc::new(RefCell::new(None));
        let o = out.clone();
        machine.spawn(async move {
            *o.borrow_mut() = Some(self.await);
        });
        machine.run();
        let v = out.borrow_mut().take();
        v.expect("finished")
    }
}
impl<F: std::future::Future + 'static> AwaitBlocking for F {}

#[test]
fn a_removed_segments_automatic_id_is_not_handed_out_again() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let lender = host(&machine, "lender");
    let first = sci.create_segment(lender, None, 4096).expect("segment");
    sci.remove_segment(&first).expect("removed");
    let second = sci.create_segment(lender, None, 4096).expect("segment");
    assert_ne!(
        first.id, second.id,
        "a stale handle would name the new segment"
    );
    let stale = sci.remove_segment(&first);
    assert!(
        matches!(stale, Err(SciError::Stale { .. })),
        "the removed segment's handle is stale: {stale:?}"
    );
    sci.remove_segment(&second)
        .expect("the live one is removed");
}

#[test]
fn a_data_interrupt_on_an_adapter_the_host_lacks_is_refused_and_leaves_no_inbox() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let lender = host(&machine, "lender");
    let before = sci.segment_count();
    let refused = sci
        .create_data_interrupt(lender, 1, Some(3))
        .expect_err("the lender has one adapter");
    assert!(
        matches!(refused, SciError::UnknownAdapter { number: 1, .. }),
        "{refused}"
    );
    assert_eq!(sci.segment_count(), before, "the inbox segment went again");
    // The number is still free.
    sci.create_data_interrupt(lender, 0, Some(3))
        .expect("adapter 0 exists");
}

#[test]
fn probing_a_node_answers_whether_its_adapter_is_reachable_now() {
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    let far = sci.node_id(lender, 0).expect("id");
    assert_eq!(sci.probe_node(borrower, 0, far), Ok(()));
    assert_eq!(
        sci.probe_node(borrower, 0, sci.node_id(borrower, 0).expect("id")),
        Ok(()),
        "an adapter reaches itself"
    );
    let unknown = sci
        .probe_node(borrower, 0, smartio_fabric::ClusterNodeId(200))
        .expect_err("no such node");
    assert_eq!(
        unknown.class(),
        smartio_smartio::SciErrorClass::NoSuchNodeId
    );
    let no_adapter = sci.probe_node(borrower, 3, far).expect_err("no adapter 3");
    assert_eq!(
        no_adapter.class(),
        smartio_smartio::SciErrorClass::NoSuchAdapterNo
    );
    let cable = machine
        .fabric()
        .adapter(sci.adapter(borrower, 0).expect("adapter"))
        .cable
        .expect("cabled");
    machine.with_fabric_mut(|f| f.set_link_up(cable, false));
    let down = sci.probe_node(borrower, 0, far).expect_err("link down");
    assert_eq!(down.class(), smartio_smartio::SciErrorClass::NoLinkAccess);
    machine.with_fabric_mut(|f| f.set_link_up(cable, true));
    assert_eq!(sci.probe_node(borrower, 0, far), Ok(()));
}

#[test]
fn the_segment_list_names_each_segments_owner_size_adapters_and_connected_hosts() {
    use smartio_smartio::sisci::SegmentKind;
    let (c, sci) = cluster("back-to-back");
    let machine = c.machine.clone();
    let (borrower, lender) = (host(&machine, "borrower"), host(&machine, "lender"));
    assert_eq!(sci.segments(), []);
    let seg = sci
        .create_segment(lender, Some(3), 1 << 16)
        .expect("segment");
    sci.prepare_segment(&seg, 0).expect("prepare");
    sci.set_available(&seg, 0).expect("available");
    let node = sci.node_id(lender, 0).expect("node id");
    let first = sci.connect_segment(borrower, 0, node, 3).expect("connect");
    let _second = sci.connect_segment(borrower, 0, node, 3).expect("connect");
    let list = sci.segments();
    assert_eq!(list.len(), 1);
    let s = &list[0];
    assert_eq!((s.segment, s.kind), (seg, SegmentKind::Ram));
    assert_eq!(s.available_on, [0]);
    assert_eq!(s.connected, [borrower, borrower]);
    assert_eq!(s.device_maps, 0);
    sci.disconnect_segment(&first).expect("disconnect");
    assert_eq!(sci.segments()[0].connected, [borrower]);
    assert_eq!(sci.segments().len(), sci.segment_count());
}
