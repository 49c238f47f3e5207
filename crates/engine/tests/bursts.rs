//! Transactions run in bursts give the results of the step-by-step loop, bit for bit: the
//! same completion times, counters, link occupancy, memory and read data, with chip
//! latencies varying, two devices contending for the same links, a CPU's timers falling
//! between the TLPs, a watched buffer, more TLPs than a stream's posted credits and reads of
//! a buffer being written.

use smartio_engine::{Calibration, Counters, LinkState};
use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;

pub(crate) const BUF_A: u64 = 0x20_0000;
pub(crate) const BUF_B: u64 = 0x40_0000;
/// dev0's writes: 40 KiB, 160 TLPs, more than a stream's posted credits.
const LONG: usize = 40 * 1024;
/// Posted TLPs a write stream may have on their way (the default is more than these
/// paths ever hold).
const CREDITS: f64 = 6.0;
/// dev1's writes: 8 KiB.
const SHORT: usize = 8 * 1024;

/// Everything a run leaves that a burst (or a deferred landing: `deferred`) could get wrong.
#[derive(Debug, PartialEq)]
pub(crate) struct Outcome {
    /// When each write and each wake-up finished, by task, in order.
    pub times: Vec<(&'static str, SimTime)>,
    /// What the tasks' reads of the buffers saw.
    pub reads: Vec<Vec<u8>>,
    pub end: SimTime,
    pub counters: Counters,
    pub links: Vec<LinkState>,
    pub buf_a: Vec<u8>,
    pub buf_b: Vec<u8>,
}

pub(crate) fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8)
        .collect()
}

pub(crate) fn run(bursts: bool, trains: bool) -> (Outcome, u64, u64) {
    run_with(bursts, trains, false).0
}

/// [`run`], with writes booked ahead or not (`Sim::set_aheads`); also the counts of
/// `Sim::ahead_counts`.
pub(crate) fn run_with(
    bursts: bool,
    trains: bool,
    aheads: bool,
) -> ((Outcome, u64, u64), (u64, u64, u64)) {
    // Chip latencies vary (the default calibration): each TLP draws its own. Few posted
    // credits: a stream waits for its earlier TLPs to land before it sends more.
    let mut cal = Calibration::default_embedded();
    cal.pcie.posted_credits_tlps.value = CREDITS;
    // Few read tags: two reads of one device wait for each other's.
    if let Some(device) = cal.devices.get_mut("default") {
        device.max_outstanding_reads.value = 2.0;
    }
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, cal);
    sim.set_bursts(bursts);
    sim.set_trains(trains);
    sim.set_aheads(aheads);
    let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
    let seen: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let (dev0, dev1) = devices(&sim);
    let log = times.clone();
    sim.spawn(async move {
        for round in 0..3u32 {
            let data = pattern(LONG, round);
            dev0.write(BusAddr(BUF_A), &data).await.expect("dev0 DMA");
            log.borrow_mut().push(("dev0", dev0.now()));
            dev0.sleep(SimDuration::from_ns(150)).await;
        }
    });
    let (log, reads) = (times.clone(), seen.clone());
    sim.spawn(async move {
        dev1.sleep(SimDuration::from_ns(700)).await;
        for round in 0..6u32 {
            let at = BUF_B + (round as u64 % 3) * SHORT as u64;
            let data = pattern(SHORT, 100 + round);
            dev1.write(BusAddr(at), &data).await.expect("dev1 DMA");
            log.borrow_mut().push(("dev1", dev1.now()));
            // A read of the buffer dev0 is writing: what it sees depends on when each
            // request reaches memory.
            let mut seen = vec![0u8; SHORT];
            let from = BUF_A + u64::from(round) * 4096;
            dev1.read(BusAddr(from), &mut seen)
                .await
                .expect("dev1 DMA read");
            log.borrow_mut().push(("dev1 read", dev1.now()));
            reads.borrow_mut().push(seen);
            dev1.sleep(SimDuration::from_ns(40)).await;
        }
    });
    // Two reads of dev1's buffer by dev0 at once, sharing its tags, once all else is done;
    // the second starts off a read-completion boundary (its completions differ in size).
    for half in 0..2u64 {
        let (port, reads, log) = (devices(&sim).0, seen.clone(), times.clone());
        sim.spawn(async move {
            port.sleep(SimDuration::from_ns(30_000 + 10 * half)).await;
            let mut got = vec![0u8; LONG];
            let from = BUF_B + half * (SHORT as u64 + 100);
            port.read(BusAddr(from), &mut got)
                .await
                .expect("dev0 DMA read");
            log.borrow_mut().push(("dev0 read", port.now()));
            reads.borrow_mut().push(got);
        });
    }
    // A CPU whose timers fall between the TLPs for a while (the bursts before and after run
    // long), and which watches the middle of dev1's buffer (writes there go step by step
    // and wake it).
    let (cpu, watcher) = (sim.cpu(HostId(0)), sim.cpu(HostId(0)));
    let log = times.clone();
    sim.spawn(async move {
        cpu.sleep(SimDuration::from_ns(2_000)).await;
        for _ in 0..60 {
            cpu.sleep(SimDuration::from_ns(37)).await;
        }
        log.borrow_mut().push(("cpu", cpu.now()));
    });
    let log = times.clone();
    sim.spawn(async move {
        watcher
            .written(PhysAddr(BUF_B + SHORT as u64 + 512), 64)
            .await;
        log.borrow_mut().push(("watcher", watcher.now()));
    });
    let outcome = run_to_the_end(&sim, &times, &seen, (LONG, 3 * SHORT));
    (
        (outcome, sim.burst_steps(), sim.train_tlps()),
        sim.ahead_counts(),
    )
}

/// The two DMA devices of the two-switch fabric.
pub(crate) fn devices(sim: &smartio_engine::Sim) -> (smartio_engine::Agent, smartio_engine::Agent) {
    let endpoint = |name: &str| {
        sim.fabric()
            .endpoint_by_name(HostId(0), name)
            .expect("device")
    };
    (sim.device(endpoint("dev0")), sim.device(endpoint("dev1")))
}

/// Runs `sim` to its end; what it left (the times and reads its tasks logged), with the
/// first `lens` bytes of each buffer.
pub(crate) fn run_to_the_end(
    sim: &smartio_engine::Sim,
    times: &RefCell<Vec<(&'static str, SimTime)>>,
    reads: &RefCell<Vec<Vec<u8>>>,
    lens: (usize, usize),
) -> Outcome {
    let summary = sim.run();
    let mut buf_a = vec![0u8; lens.0];
    let mut buf_b = vec![0u8; lens.1];
    sim.peek_memory(HostId(0), PhysAddr(BUF_A), &mut buf_a);
    sim.peek_memory(HostId(0), PhysAddr(BUF_B), &mut buf_b);
    Outcome {
        times: times.borrow().clone(),
        reads: reads.take(),
        end: summary.end,
        counters: summary.counters,
        links: sim.link_states(),
        buf_a,
        buf_b,
    }
}

#[test]
fn transactions_run_in_bursts_give_the_step_by_step_results_bit_for_bit() {
    let (stepped, none, _) = run(false, true);
    let (burst, steps, _) = run(true, false);
    let (train, train_steps, train_tlps) = run(true, true);
    assert_eq!(none, 0, "bursts off: every step goes through the loop");
    assert!(
        steps * 5 > burst.counters.events,
        "a good part of the run's {} steps ran in bursts: {steps}",
        burst.counters.events
    );
    assert_eq!(
        stepped.times.len(),
        3 + 2 * 6 + 2 + 2,
        "every task finished"
    );
    assert!(
        stepped.reads.iter().any(|r| r.iter().any(|&b| b != 0)),
        "dev1's reads saw some of dev0's bytes"
    );
    assert_eq!(
        burst.buf_a,
        pattern(LONG, 2),
        "dev0's last write is in memory"
    );
    assert_eq!(burst, stepped);
    // Trains: a stream's TLPs sent one after another with the steps between them taken at
    // once, the same again (the trains stop at the CPU's timers and at the credits, and
    // are sent only where several TLPs can go before the next event).
    assert!(
        train_tlps >= 64,
        "some of the {} written TLPs went in trains: {train_tlps}",
        (LONG * 3 + SHORT * 6) / 256
    );
    assert_eq!(
        train_steps, steps,
        "the same steps, counted as the burst counts them"
    );
    assert_eq!(train, stepped);
}

/// Where the long stream of [`trains_stop_before_the_next_event_and_change_nothing`] starts
/// in its buffer, and its length: TLPs of 156, 256 and, last, 56 bytes.
const SKEW: u64 = 100;
const SKEWED: usize = 4 * LONG - 300;

/// A long write stream with room for all its TLPs goes in trains, each stopping before the
/// next event: a CPU's timers and another device's write onto the same links fall inside
/// the stream. With trains and without, the same results bit for bit; also with a largest
/// payload that is not a power of two (its TLPs are cut at each 4 KiB boundary, so a train's
/// TLPs of the whole payload do not simply follow each other to its end).
#[test]
fn trains_stop_before_the_next_event_and_change_nothing() {
    for mps in [256, 384] {
        trains_change_nothing_with(mps);
    }
}

fn trains_change_nothing_with(mps: u64) {
    let run = |trains: bool| -> (Outcome, u64) {
        let mut cal = Calibration::default_embedded();
        cal.pcie.max_payload_size.value = mps as f64;
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, cal);
        sim.set_trains(trains);
        let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
        let (dev0, dev1) = devices(&sim);
        let log = times.clone();
        sim.spawn(async move {
            // Off a TLP boundary: its first and last TLPs are shorter than the others.
            dev0.write(BusAddr(BUF_A + SKEW), &pattern(SKEWED, 7))
                .await
                .expect("dev0 DMA");
            log.borrow_mut().push(("dev0", dev0.now()));
        });
        let log = times.clone();
        sim.spawn(async move {
            dev1.sleep(SimDuration::from_ns(3_000)).await;
            dev1.write(BusAddr(BUF_B), &pattern(SHORT, 9))
                .await
                .expect("dev1 DMA");
            log.borrow_mut().push(("dev1", dev1.now()));
        });
        let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
        sim.spawn(async move {
            for ns in [1_000, 2_500, 4_000] {
                cpu.sleep(SimDuration::from_ns(ns)).await;
                log.borrow_mut().push(("cpu", cpu.now()));
            }
        });
        let outcome = run_to_the_end(&sim, &times, &RefCell::default(), (4 * LONG, SHORT));
        (outcome, sim.train_tlps())
    };
    let (one_by_one, none) = run(false);
    let (trains, tlps) = run(true);
    assert_eq!(none, 0);
    assert!(
        tlps * 2 > 4 * LONG as u64 / mps,
        "most of dev0's TLPs ({mps}-byte payloads): {tlps}"
    );
    assert_eq!(one_by_one.times.len(), 5, "every task finished");
    assert_eq!(trains.buf_a[SKEW as usize..][..SKEWED], pattern(SKEWED, 7));
    assert_eq!(trains, one_by_one);
}

/// Writes of a page each, one at a time with a pause between them (what an NVMe's read data
/// is): each goes as a train that ends with TLPs still on their way, which then land one
/// after another with nothing else due (the rest of a train, kept in closed form and landed
/// at once), and a CPU that watches the last bytes sees them. With trains and without, the
/// same results bit for bit, steps counted alike.
#[test]
fn a_trains_tlps_still_on_their_way_land_as_one_by_one_they_would() {
    let run = |trains: bool| -> (Outcome, u64) {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_trains(trains);
        let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
        let (dev0, _) = devices(&sim);
        let log = times.clone();
        sim.spawn(async move {
            for round in 0..4u32 {
                let at = BUF_A + u64::from(round) * 4096;
                dev0.write(BusAddr(at), &pattern(4096, round))
                    .await
                    .expect("dev0 DMA");
                log.borrow_mut().push(("dev0", dev0.now()));
                dev0.sleep(SimDuration::from_ns(5_000)).await;
            }
        });
        let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
        sim.spawn(async move {
            cpu.written(PhysAddr(BUF_A + 4 * 4096 - 8), 8).await;
            log.borrow_mut().push(("cpu", cpu.now()));
        });
        let outcome = run_to_the_end(&sim, &times, &RefCell::default(), (4 * 4096, 0));
        (outcome, sim.train_tlps())
    };
    let (one_by_one, none) = run(false);
    let (trains, tlps) = run(true);
    assert_eq!(none, 0);
    assert!(tlps >= 4 * 8, "each page's TLPs went in a train: {tlps}");
    assert_eq!(one_by_one.times.len(), 5, "every task finished");
    let pages: Vec<u8> = (0..4).flat_map(|r| pattern(4096, r)).collect();
    assert_eq!(trains.buf_a, pages);
    assert_eq!(trains, one_by_one);
}
