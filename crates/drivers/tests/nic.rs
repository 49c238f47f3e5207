//! The NIC driver on the NIC model (timed engine), over an Ethernet network between hosts
//! that share no PCIe fabric: frames arrive byte-identical and in order, a burst beyond the
//! posted buffers is dropped and counted, a frame to a function of the same NIC crosses its
//! internal switch and never the wire, a long stream of jumbo frames is bounded by the line
//! rate, and a NIC borrowed by Device Lending passes the same transfer test as a local one.
//!
//! ```text
//!   pair:      alpha ── nic0 ═══ cable "lan" ═══ nic0 ── beta          (no PCIe between them)
//!
//!   lending:   borrower ══ NTB ══ lender ── chassis ── nic0 ═╗
//!                                                            ╠═ cable "lan"
//!              receiver ── nic0 ═════════════════════════════╝
//! ```

use crate::common;
use common::pattern;
use common::rig::Rig;

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_devices::ethernet::{FrameHeader, MacAddr, HEADER_BYTES, JUMBO_MTU};
use smartio_drivers::net::{FrameLink, LinkError};
use smartio_drivers::nic::{NicDriver, NicDriverConfig, NicError};
use smartio_fabric::{parse_scenario, Fabric};
use smartio_platform::{Clock, SimTime};
use smartio_smartio::BorrowOptions;
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

const ETHERTYPE: u16 = 0x88b5;

fn host(name: &str, nic_params: &str) -> String {
    format!(
        "\n[[host]]\nname = \"{name}\"\nram = \"16 GiB\"\niommu = false\ncores = 8\n\n\
         [[host.device]]\nname = \"nic0\"\nkind = \"nic\"\nparent = \"root\"\n\
         link = \"gen3 x16\"\nparams = {{ {nic_params} }}\n"
    )
}

/// Two hosts, each with a NIC on segment `lan`, no PCIe link between them.
fn pair(nic_params: &str) -> String {
    format!(
        "name = \"nic-pair\"\ndescription = \"two hosts joined by Ethernet only\"\n{}{}",
        host("alpha", nic_params),
        host("beta", nic_params)
    )
}

/// back-to-back with a NIC in the lender's chassis, and a receiver on the same segment.
fn lending(nic_params: &str) -> String {
    format!(
        "{}\n[[host.device]]\nname = \"nic0\"\nkind = \"nic\"\nparent = \"chassis\"\n\
         link = \"gen3 x16\"\nparams = {{ {nic_params} }}\n{}",
        include_str!("../../../scenarios/back-to-back.toml"),
        host("receiver", nic_params)
    )
}

fn rig(text: &str) -> Rig {
    let cal = Calibration::default_embedded();
    let spec = parse_scenario("nic-test.toml", text).expect("scenario parses");
    let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("fabric builds");
    Rig::new(
        Cluster::from_fabric(fabric, &cal, &ClusterOptions::default()).expect("cluster starts"),
    )
}

impl Rig {
    /// Binds the NIC `spec` as host `on` reaches it: its own by name, a lender's
    /// (`lender:nic0`) borrowed by Device Lending first.
    fn open_nic(
        &self,
        on: &str,
        spec: &str,
        config: NicDriverConfig,
    ) -> impl Future<Output = Result<NicDriver, NicError>> + 'static {
        let host = self.host(on);
        let smartio = self.smartio.clone();
        let spec = spec.to_string();
        async move {
            let name = if spec.contains(':') {
                let fdid = smartio.find(&spec).expect("registered");
                smartio
                    .borrow(host.id(), fdid, &BorrowOptions::default())
                    .await
                    .expect("borrow")
                    .device
            } else {
                spec
            };
            let handle = host.device(&name).expect("device in the host's tree");
            NicDriver::probe(handle, config).await
        }
    }
}

/// Frame `n` from `src` to `dst`: its sequence number, then pattern bytes, `payload` long.
fn frame(dst: MacAddr, src: MacAddr, n: u64, payload: usize) -> Vec<u8> {
    let mut body = pattern(n, payload.max(8));
    body[..8].copy_from_slice(&n.to_le_bytes());
    body.truncate(payload.max(8));
    FrameHeader {
        dst,
        src,
        ethertype: ETHERTYPE,
    }
    .frame(&body)
}

/// Sends `frames` from host `from`'s NIC and receives as many on `to`'s (`to_spec` as `to`
/// reaches it); returns what arrived, the sender's counters' wire frames, and the virtual
/// time from the first send to the last frame received.
fn transfer(
    text: &str,
    (from, from_spec): (&str, &str),
    (to, to_spec): (&str, &str),
    count: u64,
    payload: impl Fn(u64) -> usize + 'static,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, u64, f64) {
    let r = rig(text);
    let tx = r.open_nic(from, from_spec, NicDriverConfig::default());
    let rx = r.open_nic(to, to_spec, NicDriverConfig::default());
    let cpu = r.host(from).cpu();
    r.run(async move {
        let (tx, rx) = (
            tx.await.expect("sender binds"),
            rx.await.expect("receiver binds"),
        );
        let sent: Vec<Vec<u8>> = (0..count)
            .map(|n| frame(rx.mac(), tx.mac(), n, payload(n)))
            .collect();
        let got = Rc::new(RefCell::new(Vec::new()));
        let done = Rc::new(RefCell::new(SimTime::ZERO));
        let (g, d, c, rx2) = (got.clone(), done.clone(), cpu.clone(), rx.clone());
        rx.handle().spawn(async move {
            for _ in 0..count {
                let f = rx2.recv().await.expect("received");
                g.borrow_mut().push(f);
            }
            *d.borrow_mut() = c.now();
        });
        let start = cpu.now();
        for f in &sent {
            tx.send(f.clone()).await.expect("sent");
        }
        // Let the receiver finish: it ends when the last frame is in (or give up after a
        // virtual second, and let the assertions say what is missing).
        for _ in 0..100_000 {
            if got.borrow().len() == count as usize {
                break;
            }
            cpu.sleep(smartio_platform::SimDuration::from_us(10)).await;
        }
        let wire = tx.counters().await.expect("counters").wire_tx_frames;
        let elapsed = done.borrow().since(start).as_secs_f64();
        let got = got.borrow().clone();
        (sent, got, wire, elapsed)
    })
}

#[test]
fn frames_sent_one_way_arrive_byte_identical_and_in_order() {
    let (sent, got, wire, _) = transfer(
        &pair("network = \"lan\""),
        ("alpha", "nic0"),
        ("beta", "nic0"),
        600,
        |n| 46 + (n as usize * 37) % 1455,
    );
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "frames changed or reordered");
    assert_eq!(wire, 600);
}

#[test]
fn a_burst_larger_than_the_posted_buffers_is_dropped_and_counted() {
    let r = rig(&pair("network = \"lan\""));
    let small = NicDriverConfig {
        queue_pairs: 1,
        ring_entries: 8,
    };
    let tx = r.open_nic("alpha", "nic0", NicDriverConfig::default());
    let rx = r.open_nic("beta", "nic0", small);
    let (dropped, first, counters) = r.run(async move {
        let (tx, rx) = (tx.await.expect("binds"), rx.await.expect("binds"));
        for n in 0..20 {
            tx.send(frame(rx.mac(), tx.mac(), n, 1000))
                .await
                .expect("sent");
        }
        // Nobody receives until the burst is over: 8 buffers were posted.
        let cpu = rx.handle().cpu().clone();
        cpu.sleep(smartio_platform::SimDuration::from_us(100)).await;
        let dropped = rx.rx_dropped().await.expect("counter");
        let mut first = Vec::new();
        for _ in 0..8 {
            first.push(rx.recv().await.expect("one of the 8"));
        }
        (dropped, first, rx.counters().await.expect("counters"))
    });
    assert_eq!(dropped, 12);
    assert_eq!(counters.rx_frames, 8);
    assert_eq!(counters.wire_rx_frames, 20);
    let seq: Vec<u64> = first
        .iter()
        .map(|f| u64::from_le_bytes(f[HEADER_BYTES..HEADER_BYTES + 8].try_into().expect("8")))
        .collect();
    assert_eq!(seq, (0..8).collect::<Vec<_>>(), "the first 8, in order");
}

#[test]
fn a_frame_to_a_function_of_the_same_nic_crosses_the_eswitch_and_never_the_wire() {
    // The NIC has its physical function only (virtual functions come with SR-IOV): a frame to
    // its own address is one to a function of the same NIC. Two functions are the model's
    // unit test `a_frame_to_the_other_function_crosses_the_eswitch_and_never_the_wire`.
    let r = rig(&pair("network = \"lan\""));
    let a = r.open_nic("alpha", "nic0", NicDriverConfig::default());
    let b = r.open_nic("beta", "nic0", NicDriverConfig::default());
    let (sent, got, ca, cb) = r.run(async move {
        let (a, b) = (a.await.expect("binds"), b.await.expect("binds"));
        let f = frame(a.mac(), a.mac(), 7, 1400);
        a.send(f.clone()).await.expect("sent");
        let got = a.recv().await.expect("looped back");
        let ca = a.counters().await.expect("counters");
        let cb = b.counters().await.expect("counters");
        (f, got, ca, cb)
    });
    assert_eq!(got, sent);
    assert_eq!((ca.tx_frames, ca.rx_frames), (1, 1));
    assert_eq!(ca.wire_tx_frames, 0, "nothing went on the wire");
    assert_eq!(cb.wire_rx_frames, 0, "nothing came off the wire");
}

#[test]
fn a_long_stream_of_jumbo_frames_is_bounded_by_the_line_rate() {
    let count = 3000;
    let (sent, got, _, elapsed) = transfer(
        &pair("network = \"lan\", mtu = 9000"),
        ("alpha", "nic0"),
        ("beta", "nic0"),
        count,
        |_| JUMBO_MTU,
    );
    assert!(got == sent, "jumbo frames changed");
    // The bound: 100 Gb/s of line time, each frame 9014 buffer bytes + 24 of preamble, FCS
    // and gap; payload goodput at most 100e9 / 8 * 9000 / 9038 bytes/s (12.448 GB/s).
    let bound = 100e9 / 8.0 * JUMBO_MTU as f64 / 9038.0;
    let measured = (count as f64 * JUMBO_MTU as f64) / elapsed;
    println!(
        "jumbo stream: {count} frames in {:.3} us: {:.3} GB/s of payload (bound {:.3} GB/s, {:.1}%)",
        elapsed * 1e6,
        measured / 1e9,
        bound / 1e9,
        100.0 * measured / bound
    );
    assert!(measured <= bound * 1.000_001, "faster than the wire");
    assert!(
        measured >= bound * 0.95,
        "not link-bound: {measured} < 95% of {bound}"
    );
}

#[test]
fn a_borrowed_nic_passes_the_same_transfer_test_as_a_local_one() {
    let text = lending("network = \"lan\", mtu = 9000");
    let payload = |n: u64| 46 + (n as usize * 997) % (JUMBO_MTU - 45);
    let (sent_l, got_l, _, t_local) = transfer(
        &text,
        ("lender", "nic0"),
        ("receiver", "nic0"),
        400,
        payload,
    );
    let (sent_b, got_b, _, t_borrowed) = transfer(
        &text,
        ("borrower", "lender:nic0"),
        ("receiver", "nic0"),
        400,
        payload,
    );
    assert!(got_l == sent_l, "local: frames changed or reordered");
    assert!(got_b == sent_b, "borrowed: frames changed or reordered");
    println!("400 frames: local {t_local:.6e} s, borrowed {t_borrowed:.6e} s");
    assert!(
        (t_borrowed - t_local).abs() <= 0.02 * t_local,
        "borrowed {t_borrowed} s is not within 2% of local {t_local} s"
    );
}

#[test]
fn the_same_stream_takes_the_same_virtual_time_in_every_run() {
    let run = || {
        transfer(
            &pair("network = \"lan\", mtu = 9000"),
            ("alpha", "nic0"),
            ("beta", "nic0"),
            200,
            |n| 46 + (n as usize * 131) % 8000,
        )
    };
    let (a, b) = (run(), run());
    assert!(a.1 == b.1, "different frames");
    assert_eq!(a.3.to_bits(), b.3.to_bits(), "different virtual times");
}

#[test]
fn a_returned_nic_fails_as_gone() {
    let r = rig(&lending("network = \"lan\""));
    let nic = r.open_nic("borrower", "lender:nic0", NicDriverConfig::default());
    let smartio = r.smartio.clone();
    let borrower = r.host("borrower");
    let (before, after, again) = r.run(async move {
        let nic = nic.await.expect("binds");
        let dst = MacAddr([2, 0, 0, 0, 0, 9]);
        let before = nic.send(frame(dst, nic.mac(), 0, 100)).await;
        let fdid = smartio.find("lender:nic0").expect("registered");
        smartio
            .give_back(borrower.id(), fdid)
            .await
            .expect("returned");
        let after = nic.send(frame(dst, nic.mac(), 1, 100)).await;
        let again = nic.recv().await;
        (before, after, again)
    });
    assert_eq!(before, Ok(()));
    assert!(
        matches!(after, Err(LinkError::Gone { ref interface, .. }) if interface == "nic0"),
        "{after:?}"
    );
    assert_eq!(again, after.map(|_| Vec::new()), "gone from then on");
}

#[test]
fn a_frame_larger_than_the_mtu_is_refused_before_it_reaches_the_ring() {
    let r = rig(&pair("network = \"lan\""));
    let nic = r.open_nic("alpha", "nic0", NicDriverConfig::default());
    let result = r.run(async move {
        let nic = nic.await.expect("binds");
        nic.send(frame(MacAddr::BROADCAST, nic.mac(), 0, 1501))
            .await
    });
    assert_eq!(
        result,
        Err(LinkError::TooLarge {
            len: 1501,
            mtu: 1500
        })
    );
}

#[test]
fn driver_settings_out_of_range_are_refused_with_their_key() {
    let r = rig(&pair("network = \"lan\""));
    let bad = r.open_nic(
        "alpha",
        "nic0",
        NicDriverConfig {
            queue_pairs: 1,
            ring_entries: 100,
        },
    );
    let err = r.run(async move { bad.await.map(|_| ()) });
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err(
            "nic0: ring_entries = 100: out of range (allowed: a power of two from 8 to 4096)"
                .into()
        )
    );
}
