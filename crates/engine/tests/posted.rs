//! A posted write of one TLP whose first step is the run's next event travels without a
//! transaction: sent at once, its writer done, its landing queued where the transaction's
//! would be. The run's results are the transactions', bit for bit, whatever it lands on — a
//! device's BAR (a doorbell), memory a task watches (a completion queue entry), the
//! interrupt controller (an MSI) — with other requesters' DMA under way around it.

use crate::common;

use smartio_engine::{Calibration, Counters, LinkState};
use smartio_fabric::HostId;
use smartio_platform::{
    BarHandler, BusAddr, Clock, CompleterError, MemoryWatch, PhysAddr, Port, SimDuration, SimTime,
};
use std::cell::RefCell;
use std::rc::Rc;

/// Where dev0 writes its 16-byte entries in host memory, one after another.
const ENTRIES: u64 = 0x40_0000;
/// Where dev1's DMA stream lands.
const STREAM: u64 = 0x80_0000;
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
struct Outcome {
    times: Marks,
    /// What dev1's BAR took, in order.
    doorbells: Vec<(u64, Vec<u8>)>,
    /// The entries as the watching CPU read them.
    entries: Vec<Vec<u8>>,
    end: SimTime,
    counters: Counters,
    links: Vec<LinkState>,
    memory: Vec<u8>,
}

/// A CPU rings dev1's doorbell between costs; dev0 writes an entry into host memory and then
/// an MSI for each; a second CPU task waits for each entry (a memory watch) and each
/// interrupt; dev1 streams DMA writes into memory meanwhile, so that some single writes start
/// with nothing else due and some do not. Variation on: the chips' latencies are drawn.
fn run(in_place: bool) -> (Outcome, u64) {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.set_in_place(in_place);
    let (dev0, dev1) = {
        let f = sim.fabric();
        let by = |n| f.endpoint_by_name(HostId(0), n).expect("device");
        (by("dev0"), by("dev1"))
    };
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
            cpu.write(bar.offset(8 * (round % 4)), &tail)
                .await
                .expect("doorbell");
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
            dev.sleep(SimDuration::from_ns(700)).await;
        }
    });
    let summary = sim.run();
    let mut memory = vec![0u8; (16 * ROUNDS) as usize];
    sim.peek_memory(HostId(0), PhysAddr(ENTRIES), &mut memory);
    let mut stream = vec![0u8; 6 * 8192];
    sim.peek_memory(HostId(0), PhysAddr(STREAM), &mut stream);
    memory.extend_from_slice(&stream);
    let outcome = Outcome {
        times: times.take(),
        doorbells: doorbells.0.take(),
        entries: entries.take(),
        end: summary.end,
        counters: summary.counters,
        links: sim.link_states(),
        memory,
    };
    (outcome, sim.posted_alone())
}

#[test]
fn posted_writes_sent_without_a_transaction_land_as_transactions_do() {
    let (stepped, none) = run(false);
    let (alone, sent) = run(true);
    assert_eq!(none, 0, "in place off: every write is a transaction");
    assert!(
        sent >= ROUNDS,
        "many single writes went alone (doorbells, entries, MSIs): {sent}"
    );
    assert!(
        sent < 3 * ROUNDS,
        "some started with something else due, and went as transactions: {sent}"
    );
    assert_eq!(
        stepped.times.len(),
        (4 * ROUNDS + 6) as usize,
        "every task finished"
    );
    assert_eq!(stepped.doorbells.len(), ROUNDS as usize);
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
    assert_eq!(alone, stepped);
}
