//! Timing of single transactions against hand-derived expectations from the calibration
//! formulas, data exactness, contention and determinism.

use smartio_engine::Calibration;
use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimTime};
use std::cell::Cell;
use std::rc::Rc;

use crate::common;
use common::sim;

/// Hand computation of the calibration formulas for a Gen3 x16 link.
struct Gen3x16 {
    fs_per_byte: u64,
    overhead: u64,
}

impl Gen3x16 {
    fn new(cal: &Calibration) -> Self {
        // 8 GT/s x 16 lanes x 128/130 / 8 bits = 15.754 GB/s, plus the DLLP share.
        let bytes_per_s = 8e9 * 16.0 * 128.0 / 130.0 / 8.0;
        let fs = 1e15 / bytes_per_s * (1.0 + cal.pcie.dllp_overhead_fraction.value);
        Gen3x16 {
            fs_per_byte: fs.round() as u64,
            overhead: cal.pcie.tlp_overhead_bytes_gen3.value as u64,
        }
    }

    fn ser(&self, payload: u64) -> u64 {
        ((payload + self.overhead) * self.fs_per_byte + 500) / 1000
    }
}

fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

#[test]
fn a_64_byte_write_costs_serialization_once_plus_every_hop() {
    let (sim, cal) = sim();
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let landed = Rc::new(Cell::new(None));
    let cpu = sim.cpu(HostId(0));
    let l = landed.clone();
    sim.spawn(async move {
        cpu.written(PhysAddr(0x1000), 64).await;
        l.set(Some(cpu.now()));
    });
    let port = sim.device(dev);
    sim.spawn(async move {
        port.write(BusAddr(0x1000), &[0xab; 64])
            .await
            .expect("write lands in RAM");
    });
    sim.run();

    let link = Gen3x16::new(&cal);
    let prop = ps(cal.pcie.link_propagation_ns.value);
    let expected = 3 * prop
        + ps(cal.chips["PEX8733"].latency_ns.value)
        + ps(cal.chips["PEX8796"].latency_ns.value)
        + link.ser(64)
        + ps(cal.root_complex.latency_ns.value);
    assert_eq!(landed.get(), Some(SimTime(expected)));
    assert_eq!(expected, 325_941, "the documented hand calculation");
    let mut back = [0u8; 64];
    sim.peek_memory(HostId(0), PhysAddr(0x1000), &mut back);
    assert_eq!(back, [0xab; 64]);
}

#[test]
fn a_4k_read_on_a_two_switch_path_is_request_latency_plus_link_bound_completions() {
    let (sim, cal) = sim();
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    sim.poke_memory(HostId(0), PhysAddr(0x10_0000), &pattern);
    let done = Rc::new(Cell::new(None));
    let port = sim.device(dev);
    let d = done.clone();
    let expect_data = pattern.clone();
    sim.spawn(async move {
        let mut buf = vec![0u8; 4096];
        port.read(BusAddr(0x10_0000), &mut buf)
            .await
            .expect("RAM answers");
        assert_eq!(buf, expect_data);
        d.set(Some(port.now()));
    });
    sim.run();

    // 8 read requests of MRRS 512 B leave back to back (header-only TLPs); the first reaches
    // memory after 3 hops, 2 chips and the root complex, memory answers after its latency,
    // and the 16 completions of 256 B then stream back limited by the link.
    let link = Gen3x16::new(&cal);
    let prop = ps(cal.pcie.link_propagation_ns.value);
    let chips =
        ps(cal.chips["PEX8733"].latency_ns.value) + ps(cal.chips["PEX8796"].latency_ns.value);
    let request_arrives = 3 * prop + chips + link.ser(0) + ps(cal.root_complex.latency_ns.value);
    let answer_starts = request_arrives + ps(cal.root_complex.memory_read_ns.value);
    let first_completion = answer_starts + 3 * prop + chips + link.ser(256);
    let expected = first_completion + 15 * link.ser(256);
    assert_eq!(done.get(), Some(SimTime(expected)));
    assert_eq!(expected, 919_588, "the documented hand calculation");
}

/// What each link carried for one 4 KiB read by dev0: 8 read requests (no payload) up each
/// of the three links, 16 completions of 256 B down; wire bytes add each TLP's overhead, and
/// each direction was busy one serialization per TLP. Links dev1 never used carried nothing.
#[test]
fn each_link_counts_the_tlps_bytes_and_busy_time_a_read_put_on_it() {
    use smartio_machine::Engine;
    let (sim, cal) = sim();
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let port = sim.device(dev);
    sim.spawn(async move {
        let mut buf = vec![0u8; 4096];
        port.read(BusAddr(0x10_0000), &mut buf)
            .await
            .expect("RAM answers");
    });
    let before = sim.link_traffic();
    sim.run();
    let link = Gen3x16::new(&cal);
    let traffic = smartio_machine::LinkTraffic::carried_since(&before, sim.link_traffic());
    let names: Vec<&str> = traffic.iter().map(|l| l.link.as_str()).collect();
    assert_eq!(names, ["h -> h.sw1", "h.sw1 -> h.sw2", "h.sw2 -> h.dev0"]);
    for l in &traffic {
        let (requests, completions) = (l.up, l.down);
        assert_eq!(requests.tlps, 8, "{}", l.link);
        assert_eq!(requests.payload_bytes, 0);
        assert_eq!(requests.wire_bytes, 8 * link.overhead);
        assert_eq!(requests.busy_ps, 8 * link.ser(0));
        assert_eq!(completions.tlps, 16, "{}", l.link);
        assert_eq!(completions.payload_bytes, 4096);
        assert_eq!(completions.wire_bytes, 4096 + 16 * link.overhead);
        assert_eq!(completions.busy_ps, 16 * link.ser(256));
    }
}

#[test]
fn two_writers_sharing_an_upstream_link_take_twice_as_long() {
    let size = 1 << 20;
    let finish = |writers: usize| {
        let (sim, _) = sim();
        let ends = Rc::new(Cell::new(SimTime::ZERO));
        for (i, name) in ["dev0", "dev1"].iter().take(writers).enumerate() {
            let dev = sim
                .fabric()
                .endpoint_by_name(HostId(0), name)
                .expect("device");
            let port = sim.device(dev);
            let e = ends.clone();
            sim.spawn(async move {
                port.write(BusAddr(0x100_0000 * (i as u64 + 1)), &vec![i as u8; size])
                    .await
                    .expect("write");
                e.set(e.get().max(port.now()));
            });
        }
        sim.run();
        ends.get().as_ps() as f64
    };
    let one = finish(1);
    let two = finish(2);
    let ratio = two / one;
    assert!((1.9..2.1).contains(&ratio), "ratio {ratio}");
}

#[test]
fn an_unclaimed_address_is_an_unsupported_request_and_is_recorded() {
    let (sim, _) = sim();
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let port = sim.device(dev);
    let seen = Rc::new(Cell::new(false));
    let s = seen.clone();
    sim.spawn(async move {
        let err = port
            .write(BusAddr(0xF000_0000), &[1; 8])
            .await
            .expect_err("nobody claims it");
        assert!(
            matches!(
                err,
                smartio_platform::AccessError::UnsupportedRequest { .. }
            ),
            "{err}"
        );
        s.set(true);
    });
    sim.run();
    assert!(seen.get());
    assert_eq!(sim.faults().len(), 1);
}

#[test]
fn the_same_run_twice_gives_identical_times_and_link_statistics() {
    let run = || {
        let (sim, _) = sim();
        for name in ["dev0", "dev1"] {
            let dev = sim
                .fabric()
                .endpoint_by_name(HostId(0), name)
                .expect("device");
            let port = sim.device(dev);
            sim.spawn(async move {
                let mut buf = vec![0u8; 300_000];
                port.read(BusAddr(0x1234), &mut buf).await.expect("read");
                port.write(BusAddr(0x80_0000), &buf).await.expect("write");
            });
        }
        let summary = sim.run();
        (summary.end, summary.counters, sim.link_states())
    };
    assert_eq!(run(), run());
}

#[test]
fn a_cabled_link_costs_the_cables_propagation_instead_of_a_traces() {
    // The same 64-byte write as above, once with sw2's link to sw1 an external cable.
    fn landed(text: &str) -> SimTime {
        let sim = common::sim_of(text, Calibration::default_embedded().without_variation()).0;
        let dev = sim
            .fabric()
            .endpoint_by_name(HostId(0), "dev0")
            .expect("dev0");
        let at = Rc::new(Cell::new(None));
        let cpu = sim.cpu(HostId(0));
        let a = at.clone();
        sim.spawn(async move {
            cpu.written(PhysAddr(0x1000), 64).await;
            a.set(Some(cpu.now()));
        });
        let port = sim.device(dev);
        sim.spawn(async move {
            port.write(BusAddr(0x1000), &[0x5a; 64])
                .await
                .expect("write lands in RAM");
        });
        sim.run();
        at.get().expect("the write landed")
    }
    let cal = Calibration::default_embedded();
    let board = landed(common::TWO_SWITCHES);
    let cabled_text = common::TWO_SWITCHES.replace(
        "parent = \"sw1\"\nlink = \"gen3 x16\"",
        "parent = \"sw1\"\nlink = \"gen3 x16\"\ncabled = true",
    );
    assert_ne!(cabled_text, common::TWO_SWITCHES, "the edit found sw2");
    let cable = landed(&cabled_text);
    let extra = ps(cal.pcie.cable_propagation_ns.value) - ps(cal.pcie.link_propagation_ns.value);
    assert!(extra > 0, "a cable is longer than a board trace");
    assert_eq!(cable.0 - board.0, extra);
}
