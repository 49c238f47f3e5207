//! The executor and the engine's waiting primitives: memory watches armed when created, slots
//! of finished tasks, timers and watches given back, and the report of tasks that never
//! finish.

use crate::common;
use common::sim;

use smartio_engine::Sim;
use smartio_fabric::HostId;
use smartio_platform::{race, BusAddr, Clock, MemoryWatch, Notify, PhysAddr, Port, SimDuration};
use std::cell::Cell;
use std::rc::Rc;

const WORD: PhysAddr = PhysAddr(0x1000_0000);

fn dev0(sim: &Sim) -> smartio_engine::Agent {
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    sim.device(dev)
}

/// A CPU polls a word the way a driver polls a completion queue — arm a watch, read the
/// word, wait for the watch if the word is stale — while a device writes the word once. The
/// reads follow each other without a gap, so the device's write lands while one of them is
/// in flight: the read returns the stale value, and only a watch armed *before* the read
/// can report the write. (Armed when first polled, after the read, the watch missed it and
/// the poller waited forever: the cause of issue 13's stuck `fio --method nvme-client`.)
#[test]
fn a_write_that_lands_while_the_poller_reads_the_word_still_wakes_it() {
    for delay_ns in [0, 13, 57, 90, 131, 400, 1234] {
        let (sim, _) = sim();
        let cpu = sim.cpu(HostId(0));
        let dev = dev0(&sim);
        let seen = Rc::new(Cell::new(None));
        let stale_reads = Rc::new(Cell::new(0u32));
        let (s, stale) = (seen.clone(), stale_reads.clone());
        sim.spawn(async move {
            loop {
                let landed = cpu.written(WORD, 8);
                let mut word = [0u8; 8];
                cpu.read(BusAddr(WORD.get()), &mut word)
                    .await
                    .expect("local read");
                if u64::from_le_bytes(word) == 0xfeed {
                    s.set(Some(cpu.now()));
                    return;
                }
                stale.set(stale.get() + 1);
                landed.await;
            }
        });
        sim.spawn(async move {
            dev.sleep(SimDuration::from_ns(delay_ns)).await;
            dev.write(BusAddr(WORD.get()), &0xfeed_u64.to_le_bytes())
                .await
                .expect("device write");
        });
        let summary = sim.run();
        assert_eq!(
            summary.blocked_tasks,
            0,
            "delay {delay_ns} ns: {}",
            sim.blocked_summary()
        );
        assert!(seen.get().is_some(), "delay {delay_ns} ns: never saw it");
        assert_eq!(
            stale_reads.get(),
            1,
            "delay {delay_ns} ns: one stale read, then the watch, then the value"
        );
    }
}

#[test]
fn a_watch_armed_before_a_write_and_awaited_after_it_resolves_at_once() {
    let (sim, _) = sim();
    let cpu = sim.cpu(HostId(0));
    let done = Rc::new(Cell::new(false));
    let d = done.clone();
    sim.spawn(async move {
        let landed = cpu.written(WORD, 8);
        cpu.write(BusAddr(WORD.get()), &[1; 8])
            .await
            .expect("store");
        cpu.sleep(SimDuration::from_ns(500)).await;
        let before = cpu.now();
        landed.await;
        assert_eq!(
            cpu.now(),
            before,
            "no time passes: the write already landed"
        );
        d.set(true);
    });
    sim.run();
    assert!(done.get());
}

#[test]
fn a_run_that_ends_with_tasks_waiting_says_where_they_were_spawned_and_for_what() {
    let (sim, _) = sim();
    let cpu = sim.cpu(HostId(0));
    let c = cpu.clone();
    sim.spawn(async move { c.interrupt(7).await });
    let c = cpu.clone();
    sim.spawn(async move { c.written(PhysAddr(0x2000), 16).await });
    let doorbell = Rc::new(Notify::new());
    let d = doorbell.clone();
    sim.spawn(async move { d.notified().await });
    let summary = sim.run();
    assert_eq!(summary.blocked_tasks, 3);
    let blocked = sim.blocked_tasks();
    let here = file!();
    assert!(
        blocked.iter().all(|t| t.spawned_at.starts_with(here)),
        "{blocked:?}"
    );
    let waits: Vec<&str> = blocked.iter().map(|t| t.waits[0].as_str()).collect();
    assert_eq!(
        waits,
        [
            "interrupt vector 7 of h",
            "a write into h memory 0x2000..+16",
            "a notification (a device's doorbell or a driver's signal)",
        ]
    );
    let text = sim.blocked_summary();
    assert!(text.contains("wait"), "{text}");
    assert!(text.contains("interrupt vector 7 of h"), "{text}");
}

/// A million sleeps, a hundred thousand short-lived tasks and as many watches dropped unused
/// leave nothing behind: slots are reused, so memory does not grow with a run's length.
#[test]
fn timers_watches_and_task_slots_are_given_back_so_long_runs_do_not_grow() {
    let (sim, _) = sim();
    let cpu = sim.cpu(HostId(0));
    let c = cpu.clone();
    let s = sim.clone();
    sim.spawn(async move {
        for i in 0..100_000u64 {
            let inner = c.clone();
            s.spawn(async move { inner.sleep(SimDuration::from_ps(1)).await });
            // A race whose loser is a watch and a timer that are then dropped.
            let _ = race(
                c.sleep(SimDuration::from_ps(2)),
                c.written(PhysAddr(0x3000 + (i % 64) * 8), 8),
            )
            .await;
            for _ in 0..10 {
                c.sleep(SimDuration::from_ps(1)).await;
            }
        }
    });
    let summary = sim.run();
    assert_eq!(summary.blocked_tasks, 0);
    assert_eq!(sim.armed_waiters(), (0, 0), "timers, watches");
    assert_eq!(sim.live_operations(), 0, "operations under way");
    assert!(
        sim.task_slots() <= 3,
        "{} task slots for at most 3 tasks alive at once",
        sim.task_slots()
    );
}

/// Through the platform contract every operation is a ticket (into one slab, or a sleep's
/// timer itself, or an access's transaction itself), and every one is given back: reads that
/// lose a race (their transactions finish, and are freed, on their own), interrupt waits
/// that time out and watches dropped unused all give their slots back, and a read's data
/// lands in the caller's buffer — a DMA read's and a CPU's read of its own RAM alike.
#[test]
fn operations_through_the_contract_are_given_back_whether_they_finish_or_lose_a_race() {
    let (sim, _) = sim();
    let machine = sim.machine();
    let cpu = machine.cpu(HostId(0));
    let dev = machine.device(
        sim.fabric()
            .endpoint_by_name(HostId(0), "dev0")
            .expect("dev0"),
    );
    let pattern: Vec<u8> = (0..64u8).collect();
    sim.poke_memory(HostId(0), PhysAddr(0x4000), &pattern);
    let rounds = Rc::new(Cell::new(0u32));
    let r = rounds.clone();
    machine.spawn(async move {
        for i in 0..1000u64 {
            let mut lost = [0u8; 64];
            let raced = race(
                dev.read(BusAddr(0x4000), &mut lost),
                cpu.sleep(SimDuration::from_ps(1)),
            )
            .await;
            assert!(matches!(raced, smartio_platform::Either::Right(())));
            let mut dma = [0u8; 64];
            dev.read(BusAddr(0x4000), &mut dma).await.expect("DMA read");
            let mut local = [0u8; 64];
            cpu.read(BusAddr(0x4000), &mut local)
                .await
                .expect("local read");
            assert_eq!((&dma[..], &local[..]), (&pattern[..], &pattern[..]));
            assert!(!cpu.interrupt_timeout(3, SimDuration::from_ns(1)).await);
            let _ = race(
                cpu.written(PhysAddr(0x5000 + (i % 8) * 8), 8),
                dev.write(BusAddr(0x6000), &[i as u8; 16]),
            )
            .await;
            r.set(r.get() + 1);
        }
    });
    assert_eq!(machine.run().blocked_tasks, 0);
    assert_eq!(rounds.get(), 1000);
    assert_eq!(sim.live_operations(), 0, "operations under way");
    assert_eq!(sim.live_transactions(), 0, "transactions under way");
    assert_eq!(sim.armed_waiters(), (0, 0), "timers, watches");
}

#[test]
fn a_sleep_past_the_end_of_time_never_fires_instead_of_wrapping_to_now() {
    let (sim, _) = sim();
    let cpu = sim.cpu(HostId(0));
    let woke = Rc::new(Cell::new(false));
    let w = woke.clone();
    sim.spawn(async move {
        cpu.sleep(SimDuration::from_ns(5)).await;
        cpu.sleep(SimDuration(u64::MAX)).await;
        w.set(true);
    });
    let summary = sim.run();
    assert!(!woke.get());
    assert_eq!(summary.blocked_tasks, 1);
    assert_eq!(
        summary.end.as_ps(),
        5_000,
        "time stopped at the last real event"
    );
    assert!(sim.blocked_summary().contains("a timer due at"));
}

#[test]
fn shutdown_drops_every_waiting_task_and_frees_their_slots() {
    let (sim, _) = sim();
    let cpu = sim.cpu(HostId(0));
    for vector in 0..5 {
        let c = cpu.clone();
        sim.spawn(async move { c.interrupt(vector).await });
    }
    assert_eq!(sim.run().blocked_tasks, 5);
    sim.shutdown();
    assert!(sim.blocked_tasks().is_empty());
    assert_eq!(sim.run().blocked_tasks, 0);
    let c = cpu.clone();
    sim.spawn(async move { c.sleep(SimDuration::from_ns(1)).await });
    assert_eq!(sim.run().blocked_tasks, 0);
    assert_eq!(sim.task_slots(), 5, "the freed slots are reused");
}

#[test]
fn a_zero_length_access_completes_at_once_without_traffic() {
    let (sim, _) = sim();
    let cpu = sim.cpu(HostId(0));
    let dev = dev0(&sim);
    let done = Rc::new(Cell::new(0));
    let d = done.clone();
    sim.spawn(async move {
        cpu.write(BusAddr(WORD.get()), &[])
            .await
            .expect("empty store");
        let mut nothing = [0u8; 0];
        cpu.read(BusAddr(0x8000_0000), &mut nothing)
            .await
            .expect("empty load");
        dev.write(BusAddr(WORD.get()), &[])
            .await
            .expect("empty DMA");
        assert_eq!(cpu.now().as_ps(), 0, "no time passes");
        d.set(3);
    });
    let summary = sim.run();
    assert_eq!((done.get(), summary.blocked_tasks), (3, 0));
    assert_eq!(sim.counters().tlp_arrivals, 0);
}
