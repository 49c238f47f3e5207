//! A write's landings deferred until someone looks give the results of landing each at its
//! own step, bit for bit: the same times, counters, link occupancy, memory, reads between
//! the landings and the wake of a watch armed on bytes still landing; a write started onto
//! bytes whose landings wait; a run stopped at deadlines between the landings (its clock
//! and counters at each stop).

use smartio_engine::{Calibration, Counters, Sim};
use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

use crate::bursts::{run_to_the_end, Outcome};
use crate::common;

const BUF_A: u64 = 0x20_0000;
const BUF_B: u64 = 0x40_0000;
const PAGE: usize = 4096;
const ROUNDS: u32 = 6;

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(29).wrapping_add(seed) % 253) as u8)
        .collect()
}

type Log = Rc<RefCell<Vec<(&'static str, SimTime)>>>;

/// Two devices writing pages into host memory at once, their TLPs on the same links, a
/// CPU's timers falling between the landings, and the CPU reading the pages being written;
/// a watch armed on a page while it lands, and a device writing onto a page the other one
/// has just written. Returns the simulation (not run yet) and what its tasks log.
fn scenario(defers: bool) -> (Sim, Log, Rc<RefCell<Vec<Vec<u8>>>>) {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.set_deferred_landings(defers);
    let times: Log = Rc::default();
    let seen: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let endpoint = |name: &str| {
        sim.fabric()
            .endpoint_by_name(HostId(0), name)
            .expect("device")
    };
    let (dev0, dev1) = (sim.device(endpoint("dev0")), sim.device(endpoint("dev1")));
    let log = times.clone();
    sim.spawn(async move {
        for round in 0..ROUNDS {
            let at = BUF_A + u64::from(round) * PAGE as u64;
            dev0.write(BusAddr(at), &pattern(PAGE, round))
                .await
                .expect("dev0 DMA");
            log.borrow_mut().push(("dev0", dev0.now()));
            dev0.sleep(SimDuration::from_ns(300)).await;
        }
    });
    let log = times.clone();
    sim.spawn(async move {
        dev1.sleep(SimDuration::from_ns(90)).await;
        for round in 0..ROUNDS {
            let at = BUF_B + u64::from(round) * PAGE as u64;
            dev1.write(BusAddr(at), &pattern(PAGE, 50 + round))
                .await
                .expect("dev1 DMA");
            log.borrow_mut().push(("dev1", dev1.now()));
            dev1.sleep(SimDuration::from_ns(250)).await;
        }
    });
    // The CPU looks at the pages being written every so often (its timers fall between the
    // landings, and its reads see some landed and some not).
    let (cpu, log, reads) = (sim.cpu(HostId(0)), times.clone(), seen.clone());
    sim.spawn(async move {
        for i in 0..40u64 {
            cpu.sleep(SimDuration::from_ns(97)).await;
            let mut got = vec![0u8; 256];
            let page = (i % u64::from(ROUNDS)) * PAGE as u64;
            let from = if i % 2 == 0 { BUF_A } else { BUF_B } + page + 3840;
            cpu.read(BusAddr(from), &mut got).await.expect("CPU read");
            reads.borrow_mut().push(got);
        }
        log.borrow_mut().push(("cpu", cpu.now()));
    });
    // While dev0's pages land (the first from about 0.34 to 0.83 us, the second from 0.94
    // to 1.46 us, the fifth from 2.84 to 3.34 us; each landing deferred): the CPU reads the
    // middle of the first, a watch is armed on bytes of the second still to land, and dev1
    // writes onto the middle of the fifth.
    let (cpu, log, reads, peeker) = (sim.cpu(HostId(0)), times.clone(), seen.clone(), sim.clone());
    sim.spawn(async move {
        cpu.sleep(SimDuration::from_ns(670)).await;
        // A peek (taking no time, the fabric held meanwhile) sees what is in memory now.
        let fabric = peeker.fabric();
        let mut peeked = vec![0u8; 2048];
        peeker.peek_memory(HostId(0), PhysAddr(BUF_A + 1024), &mut peeked);
        drop(fabric);
        let mut got = vec![0u8; 2048];
        cpu.read(BusAddr(BUF_A + 1024), &mut got)
            .await
            .expect("CPU read");
        reads.borrow_mut().push(peeked);
        reads.borrow_mut().push(got);
        log.borrow_mut().push(("cpu in the first page", cpu.now()));
    });
    let (watcher, log) = (sim.cpu(HostId(0)), times.clone());
    sim.spawn(async move {
        watcher.sleep(SimDuration::from_ns(1_200)).await;
        watcher
            .written(PhysAddr(BUF_A + PAGE as u64 + 3072), 64)
            .await;
        log.borrow_mut().push(("watcher", watcher.now()));
    });
    let (dev1, log) = (sim.device(endpoint("dev1")), times.clone());
    sim.spawn(async move {
        dev1.sleep(SimDuration::from_ns(3_000)).await;
        dev1.write(BusAddr(BUF_A + 4 * PAGE as u64 + 1024), &pattern(512, 99))
            .await
            .expect("dev1 DMA onto dev0's page");
        log.borrow_mut().push(("dev1 onto dev0's", dev1.now()));
    });
    (sim, times, seen)
}

/// The buffers' bytes now.
fn buffers(sim: &Sim) -> (Vec<u8>, Vec<u8>) {
    let len = ROUNDS as usize * PAGE;
    let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
    sim.peek_memory(HostId(0), PhysAddr(BUF_A), &mut a);
    sim.peek_memory(HostId(0), PhysAddr(BUF_B), &mut b);
    (a, b)
}

fn run(defers: bool) -> (Outcome, u64) {
    let (sim, times, seen) = scenario(defers);
    let len = ROUNDS as usize * PAGE;
    let outcome = run_to_the_end(&sim, &times, &seen, (len, len));
    (outcome, sim.deferred_steps())
}

#[test]
fn deferred_landings_give_the_step_by_step_results_bit_for_bit() {
    let (stepped, none) = run(false);
    let (deferred, steps) = run(true);
    assert_eq!(none, 0, "off: every landing is a step of the loop");
    assert!(
        steps > 20,
        "landings were deferred: {steps} of the run's {} steps",
        deferred.counters.events
    );
    assert_eq!(
        stepped.times.len(),
        2 * ROUNDS as usize + 4,
        "every task finished"
    );
    let midway = stepped
        .reads
        .iter()
        .find(|r| r.len() == 2048)
        .expect("the peek midway");
    assert!(
        midway[..1024] == pattern(PAGE, 0)[1024..2048] && midway[1024..].contains(&0),
        "the peek midway saw the first page's first half landed, not all of its second"
    );
    let mut dev0_page_4 = pattern(PAGE, 4);
    dev0_page_4[1024..1536].copy_from_slice(&pattern(512, 99));
    assert_eq!(
        deferred.buf_a[4 * PAGE..5 * PAGE],
        dev0_page_4,
        "dev1's later write onto dev0's page is on top"
    );
    assert_eq!(deferred.buf_b[..PAGE], pattern(PAGE, 50));
    assert_eq!(deferred, stepped);
}

/// What a run stopped at a deadline shows: its clock, its counters and the buffers' bytes.
type Stop = (SimTime, Counters, Vec<u8>, Vec<u8>);

fn stops(defers: bool) -> Vec<Stop> {
    let (sim, _, _) = scenario(defers);
    let mut stops = Vec::new();
    let mut deadline = SimTime::ZERO;
    loop {
        deadline += SimDuration::from_ns(61);
        let summary = sim.run_until(deadline);
        let (a, b) = buffers(&sim);
        stops.push((summary.end, summary.counters, a, b));
        if summary.blocked_tasks == 0 || deadline > SimTime::ZERO + SimDuration::from_ns(20_000) {
            return stops;
        }
    }
}

/// A run stopped at a deadline between a deferred write's landings lands those due by then
/// and ends its clock where the step loop's would be: at each of many stops, the same clock,
/// counters and memory as a run that lands each at its own step.
#[test]
fn a_run_stopped_between_deferred_landings_shows_what_the_step_loop_shows() {
    let stepped = stops(false);
    let deferred = stops(true);
    assert!(stepped.len() > 50, "stopped often: {}", stepped.len());
    assert_eq!(deferred.len(), stepped.len());
    for (i, (d, s)) in deferred.iter().zip(&stepped).enumerate() {
        assert_eq!((d.0, d.1), (s.0, s.1), "stop {i}: clock and counters");
        assert!(d.2 == s.2 && d.3 == s.3, "stop {i}: the buffers' bytes");
    }
}

/// A peek at memory (taking no time, with the fabric held meanwhile, as a harness may) between
/// a deferred write's landings sees those landed by then and no others, and the counters
/// count them: a CPU peeking at the page and the counters every 13 ns while it lands sees
/// what it sees when each landing is a step.
#[test]
fn a_peek_between_deferred_landings_sees_those_landed_by_then() {
    type Peek = (Vec<u8>, Counters);
    let run = |defers: bool| -> (Vec<Peek>, u64) {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_deferred_landings(defers);
        // Zeroes written first, so the page is held in memory while it lands (what an
        // inspection hands over in place, but for the deferred landings).
        sim.poke_memory(HostId(0), PhysAddr(BUF_A), &[0; PAGE]);
        let dev0 = sim.device(
            sim.fabric()
                .endpoint_by_name(HostId(0), "dev0")
                .expect("device"),
        );
        sim.spawn(async move {
            dev0.write(BusAddr(BUF_A), &pattern(PAGE, 1))
                .await
                .expect("dev0 DMA");
        });
        let seen: Rc<RefCell<Vec<Peek>>> = Rc::default();
        let (cpu, peeker, log) = (sim.cpu(HostId(0)), sim.clone(), seen.clone());
        sim.spawn(async move {
            for _ in 0..100 {
                cpu.sleep(SimDuration::from_ns(13)).await;
                let _fabric = peeker.fabric();
                let mut page = vec![0u8; PAGE];
                peeker.peek_memory(HostId(0), PhysAddr(BUF_A), &mut page);
                // Handed over in place where nothing deferred falls in it: the same bytes.
                let mut inspected = Vec::new();
                peeker.inspect_memory(HostId(0), PhysAddr(BUF_A), PAGE, &mut |bytes| {
                    inspected = bytes.to_vec()
                });
                assert_eq!(inspected, page, "an inspection sees what a peek sees");
                log.borrow_mut().push((page, peeker.counters()));
            }
        });
        sim.run();
        (seen.take(), sim.deferred_steps())
    };
    let (stepped, _) = run(false);
    let (deferred, steps) = run(true);
    assert!(
        steps > 4,
        "the page's landings were deferred: {steps} steps"
    );
    let partial = |p: &Vec<u8>| p.iter().any(|&b| b != 0) && p[PAGE - 16..].iter().all(|&b| b == 0);
    assert!(
        stepped.iter().filter(|(p, _)| partial(p)).count() > 4,
        "many peeks saw the page partly landed"
    );
    assert_eq!(stepped.last().map(|(p, _)| p), Some(&pattern(PAGE, 1)));
    for (i, (d, s)) in deferred.iter().zip(&stepped).enumerate() {
        assert!(d.0 == s.0, "peek {i}: the same bytes");
        assert_eq!(d.1, s.1, "peek {i}: the same counters");
    }
    assert_eq!(deferred.len(), stepped.len());
}

/// The two-switch fabric with dev1 moved onto a root port of its own: its writes into memory
/// and dev0's meet in no link, so a later write of dev1's can land on bytes of dev0's write
/// after them while dev0's other TLPs still land.
pub(crate) fn two_ports() -> String {
    let dev1 = "name = \"dev1\"\nkind = \"test\"\nparent = \"sw2\"";
    assert!(common::TWO_SWITCHES.contains(dev1));
    common::TWO_SWITCHES.replace(dev1, "name = \"dev1\"\nkind = \"test\"\nparent = \"root\"")
}

/// A write started onto the bytes of a write whose landings are deferred ends the deferral:
/// dev1, on a path of its own, writes onto the start of the page dev0 has just sent, its
/// bytes landing after dev0's there and before dev0's last ones. Whatever the moment dev1
/// starts, memory and the counters end as when each landing is a step (the later write on
/// top).
#[test]
fn a_write_onto_bytes_whose_landings_wait_lands_in_order_with_them() {
    let run = |defers: bool, start_ns: u64| -> (Vec<u8>, Counters, u64) {
        let (sim, _) = common::sim_of(&two_ports(), Calibration::default_embedded());
        sim.set_deferred_landings(defers);
        let endpoint = |name: &str| {
            sim.fabric()
                .endpoint_by_name(HostId(0), name)
                .expect("device")
        };
        let (dev0, dev1) = (sim.device(endpoint("dev0")), sim.device(endpoint("dev1")));
        sim.spawn(async move {
            dev0.write(BusAddr(BUF_A), &pattern(PAGE, 3))
                .await
                .expect("dev0 DMA");
        });
        sim.spawn(async move {
            dev1.sleep(SimDuration::from_ns(start_ns)).await;
            dev1.write(BusAddr(BUF_A), &pattern(1024, 77))
                .await
                .expect("dev1 DMA");
        });
        // Timers between the landings, so that they are deferred.
        let cpu = sim.cpu(HostId(0));
        sim.spawn(async move {
            for _ in 0..60 {
                cpu.sleep(SimDuration::from_ns(17)).await;
            }
        });
        let summary = sim.run();
        let mut page = vec![0u8; PAGE];
        sim.peek_memory(HostId(0), PhysAddr(BUF_A), &mut page);
        (page, summary.counters, sim.deferred_steps())
    };
    let mut deferred_any = 0;
    let (mut dev1_on_top, mut dev0_on_top) = (0, 0);
    for start_ns in (150..600).step_by(25) {
        let (stepped, counters, _) = run(false, start_ns);
        let (deferred, deferred_counters, steps) = run(true, start_ns);
        deferred_any += steps;
        dev1_on_top += u64::from(stepped[..1024] == pattern(1024, 77)[..]);
        dev0_on_top += u64::from(stepped[..1024] == pattern(PAGE, 3)[..1024]);
        assert!(
            deferred == stepped,
            "dev1 starting at {start_ns} ns: the same page"
        );
        assert_eq!(
            deferred_counters, counters,
            "dev1 starting at {start_ns} ns"
        );
    }
    assert!(deferred_any > 0, "dev0's landings were deferred");
    assert!(
        dev1_on_top > 0 && dev0_on_top > 0,
        "dev1's bytes land before dev0's there at some starts, after them at others"
    );
}
