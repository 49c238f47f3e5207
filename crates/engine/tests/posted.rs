//! A posted write of one TLP to one target travels without a transaction: sent at once when
//! its first step is the run's next event, else at its queued leaving, its landing queued
//! where the transaction's would be. The run's results are the transactions', bit for bit,
//! whatever it lands on — a device's BAR (a doorbell), memory a task watches (a completion
//! queue entry), the interrupt controller (an MSI) — with other requesters' DMA under way
//! around it, in place on or off, and when its writer stops waiting before it leaves (the
//! loser of a race: the write still goes).

use crate::common;

use smartio_engine::{Calibration, Counters, LinkState};
use smartio_fabric::HostId;
use smartio_platform::{
    race, BarHandler, BusAddr, Clock, CompleterError, MemoryWatch, PhysAddr, Port, SimDuration,
    SimTime,
};
use std::cell::RefCell;
use std::rc::Rc;

/// Where dev0 writes its 16-byte entries in host memory, one after another.
const ENTRIES: u64 = 0x40_0000;
/// Where dev1's DMA stream lands, and the lines it writes after each piece.
const STREAM: u64 = 0x80_0000;
const LINES: u64 = STREAM + 6 * 8192;
const ROUNDS: u64 = 24;

/// dev1's BAR: every write it takes, in order.
#[derive(Default)]
struct Doorbells(RefCell<Vec<(u64, Vec<u8>)>>);

impl BarHandler for Doorbells {
    fn mmio_read(&self, _: u8, _: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        buf.fill(0);
        Ok(())
    }

    fn mmio_write(&self, _: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        self.0.borrow_mut().push((offset, data.to_vec()));
        Ok(())
    }
}

/// When each task reached each of its marks (which, in which round), in order.
type Marks = Vec<(&'static str, u64, SimTime)>;

/// Everything a run leaves that a write sent without its transaction could get wrong.
#[derive(Debug, PartialEq)]
pub(crate) struct Outcome {
    times: Marks,
    /// What dev1's BAR took, in order.
    doorbells: Vec<(u64, Vec<u8>)>,
    /// The entries as the watching CPU read them.
    entries: Vec<Vec<u8>>,
    end: SimTime,
    counters: Counters,
    /// Steps run in write bursts (a write whose writer gave up lands as in one).
    pub(crate) burst_steps: u64,
    links: Vec<LinkState>,
    /// The entries and lines in memory, and a digest (FNV-1a) of the stream.
    entries_memory: Vec<u8>,
    lines: Vec<u8>,
    stream_digest: u64,
}

/// A CPU rings dev1's doorbell between costs (some inside a race it loses); dev0 writes an
/// entry into host memory and then an MSI for each; a second CPU task waits for each entry
/// (a memory watch) and each interrupt; dev1 streams DMA writes into memory meanwhile and
/// writes a line after each (inside a race it loses), so that some single writes start with
/// nothing else due and some do not. Variation on: the chips' latencies are drawn.
fn run(alone: bool, in_place: bool) -> (Outcome, u64) {
    run_with(alone, in_place, false).0
}

/// [`run`], with writes booked ahead or not (`Sim::set_aheads`: the steps taken in bursts
/// are others then); also the counts of `Sim::ahead_counts`.
pub(crate) fn run_with(
    alone: bool,
    in_place: bool,
    aheads: bool,
) -> ((Outcome, u64), (u64, u64, u64)) {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.set_posted_alone(alone);
    sim.set_in_place(in_place);
    sim.set_aheads(aheads);
    let (dev0, dev1) = common::two_devices(&sim);
    let doorbells = Rc::new(Doorbells::default());
    sim.attach_bar_handler(dev1, doorbells.clone());
    let bar = sim.fabric().endpoint(dev1).bars[0].base;
    let msi = sim.fabric().host(HostId(0)).msi.start;
    let times: Rc<RefCell<Marks>> = Rc::default();
    let entries: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();

    let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
    sim.spawn(async move {
        for round in 0..ROUNDS {
            cpu.spend("work", SimDuration::from_ns(40 + 53 * (round % 5)))
                .await;
            let tail = (round as u32).to_le_bytes();
            let ring = cpu.write(bar.offset(8 * (round % 4)), &tail);
            if round % 5 == 2 {
                // Given up at once: the doorbell still rings.
                race(ring, async {}).await;
            } else {
                ring.await.expect("doorbell");
            }
            log.borrow_mut().push(("rang", round, cpu.now()));
        }
    });
    let (dev, log) = (sim.device(dev0), times.clone());
    sim.spawn(async move {
        for round in 0..ROUNDS {
            dev.spend("media", SimDuration::from_ns(300 + 211 * (round % 3)))
                .await;
            let entry: Vec<u8> = (0..16).map(|i| (round * 16 + i) as u8 ^ 0x5a).collect();
            dev.write(BusAddr(ENTRIES + 16 * round), &entry)
                .await
                .expect("entry");
            dev.write(BusAddr(msi), &((round % 3) as u32).to_le_bytes())
                .await
                .expect("MSI");
            log.borrow_mut().push(("posted", round, dev.now()));
        }
    });
    let (cpu, log, seen) = (sim.cpu(HostId(0)), times.clone(), entries.clone());
    sim.spawn(async move {
        for round in 0..ROUNDS {
            let at = ENTRIES + 16 * round;
            // Armed before the look, so an entry landing meanwhile is not missed.
            let landed = cpu.written(PhysAddr(at), 16);
            let mut entry = vec![0u8; 16];
            cpu.read(BusAddr(at), &mut entry).await.expect("RAM");
            if entry == [0; 16] {
                landed.await;
                cpu.read(BusAddr(at), &mut entry).await.expect("RAM");
            }
            log.borrow_mut().push(("entry seen", round, cpu.now()));
            seen.borrow_mut().push(entry);
            cpu.interrupt((round % 3) as u32).await;
            log.borrow_mut().push(("interrupted", round, cpu.now()));
        }
    });
    let (dev, log) = (sim.device(dev1), times.clone());
    sim.spawn(async move {
        for round in 0..6u64 {
            let data: Vec<u8> = (0..8192u64).map(|i| (i * 7 + round) as u8).collect();
            dev.write(BusAddr(STREAM + 8192 * round), &data)
                .await
                .expect("DMA stream");
            log.borrow_mut().push(("streamed", round, dev.now()));
            let line = [round as u8 ^ 0xa5; 64];
            race(dev.write(BusAddr(LINES + 64 * round), &line), async {}).await;
            dev.sleep(SimDuration::from_ns(700)).await;
        }
    });
    sim.run();
    // Then, with nothing else under way, a line and a doorbell given up on: nothing can come
    // before they land (nor wake anyone), so each lands as soon as it leaves.
    let (dev, cpu) = (sim.device(dev1), sim.cpu(HostId(0)));
    sim.spawn(async move {
        race(dev.write(BusAddr(LINES + 6 * 64), &[0x3c; 64]), async {}).await;
        dev.sleep(SimDuration::from_ns(1_000)).await;
        race(cpu.write(bar.offset(0x40), &[7; 4]), async {}).await;
    });
    let summary = sim.run();
    let mut entries_memory = vec![0u8; (16 * ROUNDS) as usize];
    sim.peek_memory(HostId(0), PhysAddr(ENTRIES), &mut entries_memory);
    let mut stream = vec![0u8; 6 * 8192 + 7 * 64];
    sim.peek_memory(HostId(0), PhysAddr(STREAM), &mut stream);
    let lines = stream.split_off(6 * 8192);
    let stream_digest = stream.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let outcome = Outcome {
        times: times.take(),
        doorbells: doorbells.0.take(),
        entries: entries.take(),
        end: summary.end,
        counters: summary.counters,
        burst_steps: sim.burst_steps(),
        links: sim.link_states(),
        entries_memory,
        lines,
        stream_digest,
    };
    ((outcome, sim.posted_alone()), sim.ahead_counts())
}

#[test]
fn posted_writes_sent_without_a_transaction_land_as_transactions_do() {
    let (stepped, none) = run(false, true);
    let (alone, sent) = run(true, true);
    let (queued, all) = run(true, false);
    assert_eq!(none, 0, "off: every write is a transaction");
    // 24 doorbells, 24 entries, 24 MSIs and 7 lines, and the last doorbell: each one TLP
    // to one target.
    assert_eq!(all, 3 * ROUNDS + 8, "each single write went alone");
    assert_eq!(sent, all, "in place or queued");
    assert_eq!(
        stepped.times.len(),
        (4 * ROUNDS + 6) as usize,
        "every task finished"
    );
    assert_eq!(stepped.doorbells.len(), ROUNDS as usize + 1);
    assert_eq!(
        stepped.doorbells[ROUNDS as usize],
        (0x40, vec![7; 4]),
        "the doorbell given up on with nothing else under way rang"
    );
    assert_eq!(
        stepped.doorbells[5],
        (8, 5u32.to_le_bytes().to_vec()),
        "each doorbell's value at its register"
    );
    let want: Vec<u8> = (0..16).map(|i| (3 * 16 + i) as u8 ^ 0x5a).collect();
    assert_eq!(
        stepped.entries[3], want,
        "the CPU read the entry dev0 wrote"
    );
    assert_eq!(
        stepped.lines[..64],
        [0xa5; 64],
        "a line given up on still landed"
    );
    assert_eq!(
        stepped.lines[6 * 64..],
        [0x3c; 64],
        "so did the one given up on with nothing else under way"
    );
    assert_eq!(alone, stepped);
    assert_eq!(queued, stepped);
}

/// A CPU rings dev1's doorbell while dev0's entry is on its way to memory, due to land before
/// the doorbell leaves and nothing after: the CPU goes on when its write has left, not when it
/// lands, whether the steps before the leaving are taken from the CPU's poll (in place: it goes
/// on in that poll) or as events (it waits). Costs of every length put the entry's landing
/// before and after the doorbell's leaving.
#[test]
fn a_doorbell_rung_behind_another_write_goes_on_when_it_leaves() {
    let ring = |in_place: bool| {
        let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
        sim.set_in_place(in_place);
        let (dev0, dev1) = common::two_devices(&sim);
        let doorbells = Rc::new(Doorbells::default());
        sim.attach_bar_handler(dev1, doorbells.clone());
        let bar = sim.fabric().endpoint(dev1).bars[0].base;
        let times: Rc<RefCell<Vec<SimTime>>> = Rc::default();
        let (cpu, dev, log) = (sim.cpu(HostId(0)), sim.device(dev0), times.clone());
        sim.spawn(async move {
            for round in 0..60u64 {
                // Nothing else under way when each round starts.
                cpu.sleep(SimDuration::from_ns(5_000)).await;
                dev.write(BusAddr(ENTRIES + 16 * round), &[round as u8; 16])
                    .await
                    .expect("entry");
                cpu.spend("work", SimDuration::from_ns(10 * round)).await;
                cpu.write(bar, &(round as u32).to_le_bytes())
                    .await
                    .expect("doorbell");
                log.borrow_mut().push(cpu.now());
            }
        });
        let end = sim.run().end;
        (
            times.take(),
            doorbells.0.take().len(),
            end,
            sim.ran_to_own(),
        )
    };
    let (timed, rung, end, none) = ring(false);
    let (placed, placed_rung, placed_end, ran) = ring(true);
    assert_eq!(
        (none, rung),
        (0, 60),
        "off: every doorbell waited; all rang"
    );
    assert!(
        ran >= 10,
        "doorbells went on in place behind the entry: {ran}"
    );
    assert_eq!((placed, placed_rung, placed_end), (timed, rung, end));
}

/// A posted write queued before recording starts and leaving after goes on as its
/// transaction, so the recording holds its steps as they would be: a CPU's doorbell waited
/// for, and a device's line given up on in a race that starts the recording.
fn recorded(alone: bool) -> (Option<smartio_machine::Trace>, Vec<SimTime>, Counters, u64) {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.set_posted_alone(alone);
    let (dev0, dev1) = common::two_devices(&sim);
    sim.attach_bar_handler(dev1, Rc::new(Doorbells::default()));
    let bar = sim.fabric().endpoint(dev1).bars[0].base;
    let times: Rc<RefCell<Vec<SimTime>>> = Rc::default();
    let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
    sim.spawn(async move {
        // Queued: the recording's start (below) is due before it leaves.
        cpu.write(bar, &[1; 4]).await.expect("doorbell");
        log.borrow_mut().push(cpu.now());
        cpu.write(bar.offset(8), &[2; 4]).await.expect("doorbell");
        log.borrow_mut().push(cpu.now());
    });
    let (starter, dev, recorder) = (sim.cpu(HostId(0)), sim.device(dev0), sim.clone());
    sim.spawn(async move {
        starter.sleep(SimDuration::from_ns(10)).await;
        race(dev.write(BusAddr(LINES), &[9; 64]), async {
            recorder.start_recording(Some(64));
        })
        .await;
    });
    let summary = sim.run();
    let end = times.take();
    (sim.take_trace(), end, summary.counters, sim.posted_alone())
}

#[test]
fn a_posted_write_queued_before_recording_starts_is_recorded_as_its_transaction() {
    let (stepped, stepped_times, stepped_counters, none) = recorded(false);
    let (alone, alone_times, alone_counters, sent) = recorded(true);
    assert_eq!(none, 0);
    assert_eq!(sent, 2, "the first doorbell and the line were queued alone");
    let trace = stepped.expect("a trace was kept");
    assert!(
        trace.events.iter().any(|e| e.name.contains("TLP")),
        "the recording holds the writes' TLPs: {:?}",
        trace.events
    );
    assert_eq!(alone_times, stepped_times);
    assert_eq!(alone_counters, stepped_counters);
    assert_eq!(alone, Some(trace));
}
