//! Writes booked ahead (`core::ahead`): a DMA write cut by an event books the rest of it at
//! once and takes its steps in their place among the queued events, and is taken back when
//! something else books on its links. Every result is the step loop's, bit for bit.

use super::{bursts, common, deferred, posted};
use smartio_engine::Calibration;
use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

/// Page writes of one device, a second device writing onto the same links now and then and
/// a CPU whose timers fall between their TLPs (what cuts a write): the same times, memory,
/// counters and link statistics with writes booked ahead as without (and as without bursts,
/// the step loop itself) — and writes did go ahead, took steps ahead and were taken back
/// when the other device booked on their links.
#[test]
fn writes_booked_ahead_give_the_step_by_step_results_bit_for_bit() {
    let run = |bursts: bool, aheads: bool| -> (bursts::Outcome, (u64, u64, u64)) {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_bursts(bursts);
        sim.set_aheads(aheads);
        let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
        let (dev0, dev1) = bursts::devices(&sim);
        let log = times.clone();
        sim.spawn(async move {
            for round in 0..8u32 {
                let at = bursts::BUF_A + u64::from(round % 4) * 4096;
                dev0.write(BusAddr(at), &bursts::pattern(4096, round))
                    .await
                    .expect("dev0 DMA");
                log.borrow_mut().push(("dev0", dev0.now()));
                dev0.sleep(SimDuration::from_ns(300)).await;
            }
        });
        let log = times.clone();
        sim.spawn(async move {
            for round in 0..12u32 {
                dev1.sleep(SimDuration::from_ns(700)).await;
                dev1.write(BusAddr(bursts::BUF_B), &bursts::pattern(64, round))
                    .await
                    .expect("dev1 DMA");
                log.borrow_mut().push(("dev1", dev1.now()));
            }
        });
        let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
        sim.spawn(async move {
            for _ in 0..200 {
                cpu.sleep(SimDuration::from_ns(41)).await;
            }
            log.borrow_mut().push(("cpu", cpu.now()));
        });
        let outcome = bursts::run_to_the_end(&sim, &times, &RefCell::default(), (4 * 4096, 64));
        (outcome, sim.ahead_counts())
    };
    let (queued, none) = run(true, false);
    let (ahead, (aheads, steps, rollbacks)) = run(true, true);
    let (stepped, _) = run(false, true);
    assert_eq!(none, (0, 0, 0), "off: no write goes ahead");
    assert!(aheads > 0, "writes went ahead");
    assert!(steps > aheads, "and took their steps ahead: {steps}");
    assert!(
        rollbacks > 0,
        "some were taken back: {rollbacks} of {aheads}"
    );
    assert_eq!(queued.times.len(), 8 + 12 + 1, "every task finished");
    assert_eq!(ahead, queued);
    assert_eq!(ahead, stepped);
}

/// A CPU's doorbells and a device's entries and MSIs, each one TLP sent alone, meeting a
/// device's DMA stream on its links (the posted writes test's run): with writes booked
/// ahead as without, the same results but for which steps ran in bursts (those taken ahead
/// are not) — alone and in place or not.
#[test]
fn single_writes_meeting_a_write_ahead_take_it_back_first() {
    for (alone, in_place) in [(true, true), (false, true), (true, false)] {
        let ((mut queued, _), _) = posted::run_with(alone, in_place, false);
        let ((mut ahead, _), (aheads, _, rollbacks)) = posted::run_with(alone, in_place, true);
        assert!(aheads > 0, "writes went ahead");
        assert!(rollbacks > 0, "and the single writes took some back");
        queued.burst_steps = 0;
        ahead.burst_steps = 0;
        assert_eq!(ahead, queued, "alone {alone}, in place {in_place}");
    }
}

/// A device writing pages while it also sends single TLPs of its own — 16-byte entries
/// (posted, alone) and queue-entry reads — onto the first links of its pages' path, as an
/// NVMe posts completions and fetches commands while it moves data: a write ahead is taken
/// back for each and goes ahead again at once, its rest booked after the single TLP. The
/// same results as without writes ahead, and as without bursts.
#[test]
fn a_write_ahead_taken_back_for_a_single_tlp_of_its_device_goes_ahead_again() {
    for exact in [false, true] {
        single_tlps_of_a_writing_device(exact);
    }
}

/// [`a_write_ahead_taken_back_for_a_single_tlp_of_its_device_goes_ahead_again`]'s run,
/// with the chips' latencies drawn or `exact` (every step on a grid: ties between a write's
/// steps and queued events, which come in the order the step loop queued them).
fn single_tlps_of_a_writing_device(exact: bool) {
    let run = |bursts: bool, aheads: bool| -> (bursts::Outcome, (u64, u64, u64), u64) {
        let calibration = if exact {
            Calibration::default_embedded().without_variation()
        } else {
            Calibration::default_embedded()
        };
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, calibration);
        sim.set_bursts(bursts);
        sim.set_aheads(aheads);
        let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
        let reads: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
        let (dev0, _) = bursts::devices(&sim);
        let (pages, log) = (dev0.clone(), times.clone());
        sim.spawn(async move {
            for round in 0..10u32 {
                let at = bursts::BUF_A + u64::from(round % 4) * 4096;
                pages
                    .write(BusAddr(at), &bursts::pattern(4096, round))
                    .await
                    .expect("page");
                log.borrow_mut().push(("pages", pages.now()));
                pages.sleep(SimDuration::from_ns(150)).await;
            }
        });
        let (single, log, seen) = (dev0, times.clone(), reads.clone());
        sim.spawn(async move {
            for round in 0..40u64 {
                single
                    .sleep(SimDuration::from_ns(97 + 13 * (round % 5)))
                    .await;
                if round % 3 == 0 {
                    let mut entry = vec![0u8; 64];
                    single
                        .read(BusAddr(bursts::BUF_A + 64 * (round % 8)), &mut entry)
                        .await
                        .expect("entry read");
                    seen.borrow_mut().push(entry);
                } else {
                    single
                        .write(
                            BusAddr(bursts::BUF_B + 16 * round),
                            &bursts::pattern(16, round as u32),
                        )
                        .await
                        .expect("entry");
                }
                log.borrow_mut().push(("single", single.now()));
            }
        });
        let outcome = bursts::run_to_the_end(&sim, &times, &reads, (4 * 4096, 16 * 40));
        (outcome, sim.ahead_counts(), sim.aheads_again())
    };
    let (queued, none, none_again) = run(true, false);
    let (ahead, (aheads, _, rollbacks), again) = run(true, true);
    let (stepped, _, _) = run(false, true);
    assert_eq!(
        (none, none_again),
        ((0, 0, 0), 0),
        "off: no write goes ahead"
    );
    assert!(
        rollbacks > 0,
        "single TLPs took writes back: {rollbacks} of {aheads}"
    );
    assert!(
        again > 0,
        "and some went ahead again at once: {again} of {rollbacks}"
    );
    assert_eq!(queued.times.len(), 10 + 40, "every task finished");
    assert_eq!(ahead, queued, "exact: {exact}");
    assert_eq!(ahead, stepped, "exact: {exact}");
}

/// Two devices sending pages at the same moments on paths of one shape, so that their steps
/// fall at the same picoseconds (ties, ordered by when each was queued), a CPU's timers
/// cutting them: the same results with writes booked ahead as without.
#[test]
fn steps_at_the_same_time_as_queued_events_come_in_the_step_loops_order() {
    let run = |aheads: bool| -> (bursts::Outcome, (u64, u64, u64)) {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_aheads(aheads);
        let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
        let (dev0, dev1) = bursts::devices(&sim);
        for (name, dev, buf) in [("dev0", dev0, bursts::BUF_A), ("dev1", dev1, bursts::BUF_B)] {
            let log = times.clone();
            sim.spawn(async move {
                for round in 0..6u32 {
                    dev.write(BusAddr(buf), &bursts::pattern(4096, round))
                        .await
                        .expect("DMA");
                    log.borrow_mut().push((name, dev.now()));
                    dev.sleep(SimDuration::from_ns(1_000)).await;
                }
            });
        }
        let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
        sim.spawn(async move {
            for _ in 0..300 {
                cpu.sleep(SimDuration::from_ns(29)).await;
            }
            log.borrow_mut().push(("cpu", cpu.now()));
        });
        let outcome = bursts::run_to_the_end(&sim, &times, &RefCell::default(), (4096, 4096));
        (outcome, sim.ahead_counts())
    };
    let (queued, _) = run(false);
    let (ahead, (aheads, _, _)) = run(true);
    assert!(aheads > 0, "writes went ahead");
    assert_eq!(queued.times.len(), 13, "every task finished");
    assert_eq!(ahead, queued);
}

/// The bursts test's run (few credits: a stream waits for its TLPs to land before it sends
/// more): a write whose rest does not fit its credits does not go ahead, and the results
/// are the same with writes booked ahead as without.
#[test]
fn a_write_whose_rest_waits_for_credits_is_queued_as_before() {
    let ((queued, _, _), _) = bursts::run_with(true, true, false);
    let ((ahead, _, _), _) = bursts::run_with(true, true, true);
    assert_eq!(ahead, queued);
}

/// A timer queued long before falls at the very picosecond a write ahead sends its last TLP
/// (and its writer wakes): queued first, it comes first, as in the step loop — the task it
/// wakes logs before the writer; queued after the write's step before that, it comes after.
#[test]
fn an_event_at_a_step_ahead_comes_in_the_order_it_was_queued() {
    // The timer is queued at the first time and due at the second.
    let run =
        |aheads: bool, at: Option<(SimTime, SimTime)>| -> (Vec<(&'static str, SimTime)>, u64) {
            let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
            sim.set_aheads(aheads);
            let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
            let (dev0, _) = bursts::devices(&sim);
            let log = times.clone();
            sim.spawn(async move {
                dev0.write(BusAddr(bursts::BUF_A), &bursts::pattern(4096, 1))
                    .await
                    .expect("DMA");
                log.borrow_mut().push(("dev0", dev0.now()));
            });
            // A timer that cuts the write early on.
            let cpu = sim.cpu(HostId(0));
            sim.spawn(async move { cpu.sleep(SimDuration::from_ns(60)).await });
            if let Some((queued, due)) = at {
                let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
                sim.spawn(async move {
                    cpu.sleep(SimDuration(queued.as_ps())).await;
                    cpu.sleep(SimDuration(due.as_ps() - queued.as_ps())).await;
                    log.borrow_mut().push(("cpu", cpu.now()));
                });
            }
            sim.run();
            let aheads = sim.ahead_counts().0;
            (times.take(), aheads)
        };
    let (alone, _) = run(false, None);
    let done = alone[0].1;
    let (queued, _) = run(false, Some((SimTime::ZERO, done)));
    let (ahead, aheads) = run(true, Some((SimTime::ZERO, done)));
    assert!(aheads > 0, "the write went ahead");
    assert_eq!(
        queued,
        vec![("cpu", done), ("dev0", done)],
        "the timer first"
    );
    assert_eq!(ahead, queued);
    // Queued a picosecond before (after the write's step before its last): the write's
    // step first.
    let just_before = SimTime(done.as_ps() - 1);
    let (queued, _) = run(false, Some((just_before, done)));
    let (ahead, _) = run(true, Some((just_before, done)));
    assert_eq!(
        queued,
        vec![("dev0", done), ("cpu", done)],
        "the write first"
    );
    assert_eq!(ahead, queued);
}

/// A watch armed on the bytes of a write ahead wakes at the landing it waits for, and a
/// write started onto them (dev1, on a path of its own, so it takes nothing back) lands in
/// order with its TLPs: at many moments, the same times, memory and counters as without
/// writes booked ahead.
#[test]
fn a_watch_or_a_write_onto_the_bytes_of_a_write_ahead_takes_it_back() {
    let run = |aheads: bool, start_ns: u64| -> (bursts::Outcome, u64) {
        let (sim, _) = common::sim_of(&deferred::two_ports(), Calibration::default_embedded());
        sim.set_aheads(aheads);
        let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
        let (dev0, dev1) = bursts::devices(&sim);
        let log = times.clone();
        sim.spawn(async move {
            dev0.write(BusAddr(bursts::BUF_A), &bursts::pattern(8192, 3))
                .await
                .expect("dev0 DMA");
            log.borrow_mut().push(("dev0", dev0.now()));
        });
        let log = times.clone();
        sim.spawn(async move {
            dev1.sleep(SimDuration::from_ns(start_ns)).await;
            dev1.write(BusAddr(bursts::BUF_A + 2048), &bursts::pattern(512, 77))
                .await
                .expect("dev1 DMA");
            log.borrow_mut().push(("dev1", dev1.now()));
        });
        let (watcher, log) = (sim.cpu(HostId(0)), times.clone());
        sim.spawn(async move {
            watcher.sleep(SimDuration::from_ns(start_ns / 2)).await;
            watcher.written(PhysAddr(bursts::BUF_A + 1024), 8).await;
            log.borrow_mut().push(("watcher", watcher.now()));
        });
        // Timers between the TLPs, so that the write is cut.
        let cpu = sim.cpu(HostId(0));
        sim.spawn(async move {
            for _ in 0..60 {
                cpu.sleep(SimDuration::from_ns(17)).await;
            }
        });
        let outcome = bursts::run_to_the_end(&sim, &times, &RefCell::default(), (8192, 0));
        (outcome, sim.ahead_counts().2)
    };
    let mut rollbacks = 0;
    for start_ns in (20..800).step_by(30) {
        let (queued, _) = run(false, start_ns);
        let (ahead, taken_back) = run(true, start_ns);
        rollbacks += taken_back;
        assert_eq!(ahead, queued, "dev1 starting at {start_ns} ns");
    }
    assert!(rollbacks > 0, "writes ahead were taken back");
}
