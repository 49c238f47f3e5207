//! A cost a task spends passes in place, and an access it starts takes its first steps in
//! place, when nothing else could happen meanwhile; the run's results are those of the
//! timers and events they replace, bit for bit: the same times, counters, link occupancy
//! and memory, with DMA streams of other requesters falling inside some costs and accesses
//! and not others. Neither happens inside a race (the other future may be ready first),
//! past a run's deadline, or while recording.

use crate::common;

use smartio_engine::{Calibration, Counters, LinkState, Sim};
use smartio_fabric::HostId;
use smartio_platform::{race, BusAddr, Clock, Either, Port, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

const BUF: u64 = 0x20_0000;

/// Everything a run leaves that a cost passed in place could get wrong.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// When each task reached each of its marks, in order.
    times: Vec<(&'static str, SimTime)>,
    /// Who won each race.
    races: Vec<bool>,
    /// A digest of what each of the CPU's loads saw.
    loads: Vec<u64>,
    end: SimTime,
    counters: Counters,
    links: Vec<LinkState>,
    /// The buffer's first line (the CPU's stores) and an FNV-1a digest of all of it.
    first_line: Vec<u8>,
    memory_digest: u64,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(7).wrapping_add(seed) % 253) as u8)
        .collect()
}

fn agent(sim: &Sim, name: &str) -> smartio_engine::Agent {
    let id = sim
        .fabric()
        .endpoint_by_name(HostId(0), name)
        .expect("device");
    sim.device(id)
}

/// A CPU that spends costs of many lengths (alone, and while a device's DMA stream is on
/// its way) and writes between them, a device whose DMA writes and costs overlap the CPU's,
/// and a task that races a cost against a future that is ready at once.
fn run(in_place: bool) -> (Outcome, u64, u64) {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.set_in_place(in_place);
    let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
    let races: Rc<RefCell<Vec<bool>>> = Rc::default();
    let loads: Rc<RefCell<Vec<u64>>> = Rc::default();

    let (cpu, log, log_digest) = (sim.cpu(HostId(0)), times.clone(), loads.clone());
    sim.spawn(async move {
        for round in 0..40u64 {
            cpu.spend("work", SimDuration::from_ns(50 + 37 * (round % 7)))
                .await;
            log.borrow_mut().push(("cpu", cpu.now()));
            let data = pattern(64, round as u32);
            cpu.write(BusAddr(BUF + 64 * (round % 8)), &data)
                .await
                .expect("CPU store");
            cpu.spend("nothing", SimDuration::ZERO).await;
            // A load of its own RAM that dev0's DMA may be writing.
            let mut seen = [0u8; 64];
            let from = BUF + 0x1000 * (1 + round % 3) + 8 * round;
            cpu.read(BusAddr(from), &mut seen).await.expect("CPU load");
            log.borrow_mut().push(("cpu load", cpu.now()));
            log_digest.borrow_mut().push(fnv1a(&seen));
        }
    });
    let (dev, log) = (agent(&sim, "dev0"), times.clone());
    sim.spawn(async move {
        for round in 0..6u32 {
            dev.spend("DMA setup", SimDuration::from_ns(400)).await;
            let data = pattern(4096, 100 + round);
            let at = BUF + 0x1000 * (1 + u64::from(round % 3));
            dev.write(BusAddr(at), &data).await.expect("DMA write");
            log.borrow_mut().push(("dev0", dev.now()));
        }
    });
    let (dev, log) = (agent(&sim, "dev1"), times.clone());
    sim.spawn(async move {
        for round in 0..12u64 {
            let mut seen = vec![0u8; 512];
            let from = BUF + 0x1000 * (1 + round % 3) + 64 * round;
            dev.read(BusAddr(from), &mut seen).await.expect("DMA read");
            log.borrow_mut().push(("dev1 read", dev.now()));
            let line = pattern(64, fnv1a(&seen) as u32);
            dev.write(BusAddr(BUF + 0x3000 + 64 * round), &line)
                .await
                .expect("DMA write");
            log.borrow_mut().push(("dev1 write", dev.now()));
            dev.spend("think", SimDuration::from_ns(90 * (round % 4)))
                .await;
        }
    });
    let (dev, won) = (agent(&sim, "dev1"), races.clone());
    sim.spawn(async move {
        for round in 0..5u64 {
            // Some while the others run, some once all else is done (nothing queued).
            let pause = if round < 3 { 1_500 } else { 30_000 };
            dev.sleep(SimDuration::from_ns(pause + 100 * round)).await;
            let mut lost = [0u8; 64];
            let raced = race(
                async {
                    dev.read(BusAddr(BUF), &mut lost).await.expect("DMA read");
                    1
                },
                async { 2 },
            )
            .await;
            won.borrow_mut().push(matches!(raced, Either::Right(2)));
        }
    });
    let (racer, won) = (sim.cpu(HostId(0)), races.clone());
    sim.spawn(async move {
        for _ in 0..5 {
            let raced = race(
                async {
                    racer.spend("raced", SimDuration::from_ns(10)).await;
                    1
                },
                async { 2 },
            )
            .await;
            won.borrow_mut().push(matches!(raced, Either::Right(2)));
            racer.sleep(SimDuration::from_ns(900)).await;
        }
    });
    let summary = sim.run();
    let mut memory = vec![0u8; 0x4000];
    sim.peek_memory(HostId(0), smartio_platform::PhysAddr(BUF), &mut memory);
    let outcome = Outcome {
        times: times.take(),
        races: races.take(),
        loads: loads.take(),
        end: summary.end,
        counters: summary.counters,
        links: sim.link_states(),
        first_line: memory[..64].to_vec(),
        memory_digest: fnv1a(&memory),
    };
    (outcome, sim.passed_in_place(), sim.ran_to_own())
}

#[test]
fn costs_passed_in_place_give_the_timers_results_bit_for_bit() {
    let (timed, none, none_ran) = run(false);
    let (placed, passed, ran) = run(true);
    assert_eq!((none, none_ran), (0, 0), "off: every cost is a timer");
    assert!(
        passed >= 20,
        "many of the CPU's costs passed in place: {passed}"
    );
    // Some of the CPU's loads and stores and of dev1's posted writes had dev0's DMA stream
    // due before their end, and went on once the steps their task took came to their own.
    assert!(ran >= 5, "accesses ran to their own event in place: {ran}");
    assert_eq!(
        timed.times.len(),
        2 * 40 + 6 + 2 * 12,
        "every task finished"
    );
    assert!(
        timed
            .loads
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 3,
        "the CPU's loads saw dev0's writes land"
    );
    assert_eq!(
        timed.races,
        vec![true; 10],
        "the future ready at once wins each race"
    );
    assert_eq!(
        placed.first_line,
        pattern(64, 32),
        "the CPU's last store there"
    );
    assert_eq!(placed, timed);
}

#[test]
fn a_cost_does_not_pass_in_place_past_the_runs_deadline() {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    let cpu = sim.cpu(HostId(0));
    let done: Rc<RefCell<Option<SimTime>>> = Rc::default();
    let mark = done.clone();
    sim.spawn(async move {
        cpu.spend("long", SimDuration::from_ns(1_000)).await;
        *mark.borrow_mut() = Some(cpu.now());
    });
    let summary = sim.run_until(SimTime::ZERO + SimDuration::from_ns(500));
    assert!(
        summary.end <= SimTime::ZERO + SimDuration::from_ns(500),
        "{:?}",
        summary.end
    );
    assert_eq!(
        *done.borrow(),
        None,
        "the cost has not passed by the deadline"
    );
    assert_eq!(sim.passed_in_place(), 0);
    sim.run();
    assert_eq!(
        *done.borrow(),
        Some(SimTime::ZERO + SimDuration::from_ns(1_000))
    );
}

#[test]
fn a_cost_does_not_pass_in_place_while_recording() {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.start_recording(None);
    let cpu = sim.cpu(HostId(0));
    sim.spawn(async move {
        for _ in 0..3 {
            cpu.spend("recorded", SimDuration::from_ns(100)).await;
        }
    });
    let summary = sim.run();
    assert_eq!(summary.end, SimTime::ZERO + SimDuration::from_ns(300));
    assert_eq!(sim.passed_in_place(), 0, "each cost is a recorded sleep");
}

/// A cost that ends just when another task's timer is due does not pass in place: the
/// timer, queued first, runs first (ties go in the order scheduled).
#[test]
fn a_cost_ending_with_a_queued_event_waits_its_turn() {
    for in_place in [false, true] {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_in_place(in_place);
        let order: Rc<RefCell<Vec<&'static str>>> = Rc::default();
        let (sleeper, log) = (sim.cpu(HostId(0)), order.clone());
        sim.spawn(async move {
            sleeper.sleep(SimDuration::from_ns(100)).await;
            log.borrow_mut().push("timer");
        });
        let (cpu, log) = (sim.cpu(HostId(0)), order.clone());
        sim.spawn(async move {
            cpu.spend("until the timer", SimDuration::from_ns(100))
                .await;
            log.borrow_mut().push("cost");
            cpu.spend("alone", SimDuration::from_ns(5)).await;
            log.borrow_mut().push("after");
        });
        sim.run();
        assert_eq!(
            *order.borrow(),
            ["timer", "cost", "after"],
            "in place: {in_place}"
        );
        let passed = sim.passed_in_place();
        assert_eq!(
            passed,
            u64::from(in_place),
            "only the last cost passes in place"
        );
    }
}

/// Through the machine's agents (what the OS model, drivers and workloads hold), a CPU's
/// costs pass in place to the timers' times, and a cost inside a race is a timer: the other
/// future, ready at once, wins. (The raced cost's timer, dropped with the race, leaves its
/// event queued: nothing passes in place across it.)
#[test]
fn a_machine_agents_costs_pass_in_place_except_in_a_race() {
    for in_place in [false, true] {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_in_place(in_place);
        let machine = sim.machine();
        let cpu = machine.cpu(HostId(0));
        let seen: Rc<RefCell<Vec<(SimTime, bool)>>> = Rc::default();
        let log = seen.clone();
        machine.spawn(async move {
            for n in 1..=4u64 {
                cpu.spend("work", SimDuration::from_ns(10 * n)).await;
                log.borrow_mut().push((cpu.now(), false));
            }
            for _ in 0..2 {
                let raced = race(
                    async {
                        cpu.spend("raced", SimDuration::from_ns(3)).await;
                        1
                    },
                    async { 2 },
                )
                .await;
                log.borrow_mut()
                    .push((cpu.now(), matches!(raced, Either::Right(2))));
                cpu.spend("after a race", SimDuration::from_ns(5)).await;
            }
        });
        sim.run();
        let at = |ns: u64| SimTime::ZERO + SimDuration::from_ns(ns);
        assert_eq!(
            *seen.borrow(),
            [
                (at(10), false),
                (at(30), false),
                (at(60), false),
                (at(100), false),
                (at(100), true),
                (at(105), true)
            ],
            "in place: {in_place}"
        );
        assert_eq!(sim.passed_in_place(), if in_place { 4 } else { 0 });
    }
}
