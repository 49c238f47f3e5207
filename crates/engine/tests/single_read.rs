//! A read of one request answered by one completion runs in place without a transaction when
//! its first step is the run's next event and nothing queued comes before its other steps;
//! when something does, it goes on as its transaction from that step. Either way the run's
//! results are the transactions', bit for bit — the bytes read (memory as it was when the
//! request reached it), when each task went on, the counters, the burst steps and the links —
//! with a CPU rewriting what is read, another device's DMA under way, the reader's own large
//! reads holding its tags, reads given up on, reads of two completions and reads of a BAR.

use crate::common;

use smartio_engine::{Calibration, Counters, LinkState};
use smartio_fabric::HostId;
use smartio_platform::{
    race, BarHandler, BusAddr, Clock, CompleterError, PhysAddr, Port, SimDuration, SimTime,
};
use std::cell::RefCell;
use std::rc::Rc;

/// The 64-byte entries dev0 reads, one per round, each rewritten by a CPU now and then.
const ENTRIES: u64 = 0x40_0000;
/// Where dev1's DMA stream lands.
const STREAM: u64 = 0x80_0000;
/// What dev0's second task reads in large pieces (each holds all of dev0's 32 tags a while).
const LARGE: u64 = 0xc0_0000;
const ROUNDS: u64 = 48;

/// dev1's BAR: reads as its offset's low byte.
struct Registers;

impl BarHandler for Registers {
    fn mmio_read(&self, _: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        buf.fill(offset as u8);
        Ok(())
    }

    fn mmio_write(&self, _: u8, _: u64, _: &[u8]) -> Result<(), CompleterError> {
        Ok(())
    }
}

/// When each task reached each of its marks (which, in which round), in order.
type Marks = Vec<(&'static str, u64, SimTime)>;

/// Everything a run leaves that a read done without its transaction could get wrong.
#[derive(Debug, PartialEq)]
struct Outcome {
    times: Marks,
    /// What dev0's reads returned, in order.
    read: Vec<Vec<u8>>,
    /// A digest (FNV-1a) of what its large reads returned.
    large_digest: u64,
    end: SimTime,
    counters: Counters,
    burst_steps: u64,
    links: Vec<LinkState>,
}

fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// dev0 reads an entry a round (some given up on in a race, some of two completions, some of
/// dev1's BAR) between costs of its own, while a CPU rewrites entries, dev0's second task
/// reads 64 KiB pieces (128 requests for 32 tags) and dev1 streams DMA writes into memory:
/// some reads start with nothing else due, some with something due before their request
/// arrives or before their completion does, some with no tag free. Variation on: the chips'
/// latencies are drawn.
fn run(alone: bool, bursts: bool) -> (Outcome, u64) {
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, Calibration::default_embedded());
    sim.set_reads_alone(alone);
    sim.set_bursts(bursts);
    let (dev0, dev1) = common::two_devices(&sim);
    sim.attach_bar_handler(dev1, Rc::new(Registers));
    let bar = sim.fabric().endpoint(dev1).bars[0].base;
    let first: Vec<u8> = (0..64 * ROUNDS).map(|i| (i % 251) as u8).collect();
    sim.poke_memory(HostId(0), PhysAddr(ENTRIES), &first);
    let large: Vec<u8> = (0..65536u64).map(|i| (i * 13 % 249) as u8).collect();
    sim.poke_memory(HostId(0), PhysAddr(LARGE), &large);
    let times: Rc<RefCell<Marks>> = Rc::default();
    let read: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let large_digest = Rc::new(RefCell::new(0xcbf2_9ce4_8422_2325u64));

    let (dev, log, out) = (sim.device(dev0), times.clone(), read.clone());
    sim.spawn(async move {
        for round in 0..ROUNDS {
            dev.spend("work", SimDuration::from_ns(90 + 137 * (round % 7)))
                .await;
            // Mostly a 64-byte entry; 16 bytes off its start it crosses a completion
            // boundary now and then (two completions); now and then a register.
            let (addr, len) = match round % 9 {
                4 => (bar.offset(8 * round), 8),
                6 => (BusAddr(ENTRIES + 64 * round + 16), 64),
                _ => (BusAddr(ENTRIES + 64 * round), 64),
            };
            let mut bytes = vec![0u8; len];
            if round % 5 == 3 {
                // Given up at once: the read still goes, its bytes unseen.
                race(dev.read(addr, &mut bytes), async {}).await;
            } else {
                dev.read(addr, &mut bytes).await.expect("entry");
            }
            log.borrow_mut().push(("read", round, dev.now()));
            out.borrow_mut().push(bytes);
        }
    });
    let (dev, log, digest) = (sim.device(dev0), times.clone(), large_digest.clone());
    sim.spawn(async move {
        for piece in 0..4u64 {
            dev.sleep(SimDuration::from_ns(2_000 + 3_100 * piece)).await;
            let mut bytes = vec![0u8; 16384 * (piece as usize + 1)];
            dev.read(BusAddr(LARGE), &mut bytes).await.expect("large");
            let h = *digest.borrow();
            *digest.borrow_mut() = fnv(h, &bytes);
            log.borrow_mut().push(("large", piece, dev.now()));
        }
    });
    let (cpu, log) = (sim.cpu(HostId(0)), times.clone());
    sim.spawn(async move {
        for round in 0..ROUNDS {
            cpu.spend("rewrite", SimDuration::from_ns(71 + 113 * (round % 4)))
                .await;
            let entry = [round as u8 ^ 0x5a; 64];
            cpu.write(BusAddr(ENTRIES + 64 * ((round * 5) % ROUNDS)), &entry)
                .await
                .expect("RAM");
            log.borrow_mut().push(("rewrote", round, cpu.now()));
        }
    });
    let (dev, log) = (sim.device(dev1), times.clone());
    sim.spawn(async move {
        for round in 0..8u64 {
            let data: Vec<u8> = (0..8192u64).map(|i| (i * 7 + round) as u8).collect();
            dev.write(BusAddr(STREAM + 8192 * round), &data)
                .await
                .expect("DMA stream");
            log.borrow_mut().push(("streamed", round, dev.now()));
            dev.sleep(SimDuration::from_ns(900 + 400 * (round % 3)))
                .await;
        }
    });
    let summary = sim.run();
    let large_digest = *large_digest.borrow();
    let outcome = Outcome {
        times: times.take(),
        read: read.take(),
        large_digest,
        end: summary.end,
        counters: summary.counters,
        burst_steps: sim.burst_steps(),
        links: sim.link_states(),
    };
    (outcome, sim.reads_in_place())
}

#[test]
fn reads_run_in_place_without_a_transaction_return_what_transactions_do() {
    for bursts in [true, false] {
        let (stepped, none) = run(false, bursts);
        let (alone, done) = run(true, bursts);
        assert_eq!(none, 0, "off: every read is a transaction");
        assert!(done > 0, "some reads ran in place (bursts {bursts})");
        assert_eq!(
            stepped.times.len(),
            (2 * ROUNDS + 4 + 8) as usize,
            "every task finished"
        );
        assert_eq!(
            stepped.read[1],
            (64..128).map(|i| (i % 251) as u8).collect::<Vec<_>>(),
            "an entry not rewritten yet reads as first written"
        );
        assert_eq!(
            stepped.read[4],
            vec![8 * 4; 8],
            "a register reads its offset"
        );
        assert_eq!(alone, stepped, "bursts {bursts}");
    }
}
