//! When a device's DMA write lands in host memory: each TLP's bytes are there for whoever its
//! arrival wakes, the first as much as the last, however the engine gathers the copies.

use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use common::sim;

const BUFFER: u64 = 0x20_0000;
/// Three pages: 48 TLPs of 256 bytes, more than the engine copies at once.
const LEN: usize = 12 * 1024;

/// What a task woken by a watched write saw: when it woke and the bytes it read then.
type Seen = Rc<RefCell<Option<(SimTime, Vec<u8>)>>>;

/// A CPU task that watches `len` bytes at `at`, then reads `read` bytes from `BUFFER` (spawned
/// before the writer, it arms its watch first).
fn watcher(sim: &smartio_engine::Sim, at: u64, len: u64, read: usize) -> Seen {
    let seen: Seen = Rc::default();
    let (cpu, out) = (sim.cpu(HostId(0)), seen.clone());
    sim.spawn(async move {
        cpu.written(PhysAddr(at), len).await;
        let woke = cpu.now();
        let mut buf = vec![0u8; read];
        cpu.read(BusAddr(BUFFER), &mut buf).await.expect("own RAM");
        *out.borrow_mut() = Some((woke, buf));
    });
    seen
}

#[test]
fn every_tlp_of_a_dma_write_is_in_memory_for_the_task_its_arrival_wakes() {
    let (sim, _) = sim();
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let pattern: Vec<u8> = (0..LEN as u32).map(|i| (i % 251) as u8 + 1).collect();
    // Woken by the first TLP (its first bytes) and by the last (its last bytes).
    let first = watcher(&sim, BUFFER, 4, 256);
    let last = watcher(&sim, BUFFER + LEN as u64 - 4, 4, LEN);
    let port = sim.device(dev);
    let data = pattern.clone();
    sim.spawn(async move {
        port.write(BusAddr(BUFFER), &data).await.expect("DMA write");
    });
    sim.run();

    let (first_woke, first_saw) = first.borrow_mut().take().expect("the first TLP woke it");
    let (last_woke, last_saw) = last.borrow_mut().take().expect("the last TLP woke it");
    assert!(
        first_woke < last_woke,
        "the first TLP lands before the last: {first_woke:?} vs {last_woke:?}"
    );
    assert_eq!(
        first_saw,
        pattern[..256],
        "the first TLP's bytes, as it landed"
    );
    assert_eq!(last_saw, pattern, "every byte once the last has landed");
    let mut after = vec![0u8; LEN];
    sim.peek_memory(HostId(0), PhysAddr(BUFFER), &mut after);
    assert_eq!(after, pattern);
}

/// `sim` behind the machine's contract: its machine, dev0's agent and host 0's CPU's.
fn through_the_machine(
    sim: &smartio_engine::Sim,
) -> (
    smartio_machine::Machine,
    smartio_machine::Agent,
    smartio_machine::Agent,
) {
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let machine = smartio_machine::Machine::new(Rc::new(sim.clone()));
    let (device, cpu) = (machine.device(dev), machine.cpu(HostId(0)));
    (machine, device, cpu)
}

/// Through the machine's contract, a write of a buffer given away (`Port::write_owned`, what
/// DMA engines use for large data: kept as the transaction's bytes, not copied) and one of a
/// buffer swapped (`Port::write_swapped`, what an NVMe uses for a read's data: kept as the
/// transaction's bytes, a spare buffer left in its place) land what a write of a slice
/// (copied) lands, when it lands: a device's stream of many TLPs, a device's write of one TLP
/// (sent alone: copied still) and a CPU's store to its own RAM.
#[test]
fn a_write_of_a_buffer_given_away_or_swapped_lands_what_a_copied_write_lands_and_when() {
    #[derive(Clone, Copy, PartialEq)]
    enum How {
        Copied,
        Owned,
        Swapped,
    }
    let pieces: [(u64, usize, bool); 3] = [
        (BUFFER, LEN, true),
        (BUFFER + 0x1_0000, 64, true),
        (BUFFER + 0x2_0000, 200, false),
    ];
    let bytes = |i: usize, len: usize| -> Vec<u8> {
        (0..len).map(|k| (k * 7 + i * 31) as u8 | 1).collect()
    };
    let run = |how: How| {
        let (sim, _) = sim();
        let (machine, device, cpu) = through_the_machine(&sim);
        let done: Rc<RefCell<Vec<SimTime>>> = Rc::default();
        let left: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
        let (out, out_left) = (done.clone(), left.clone());
        machine.spawn(async move {
            for (i, &(at, len, by_device)) in pieces.iter().enumerate() {
                let agent = if by_device { &device } else { &cpu };
                let mut data = bytes(i, len);
                let written = match how {
                    How::Copied => agent.write(BusAddr(at), &data).await,
                    How::Owned => agent.write_owned(BusAddr(at), data.clone()).await,
                    How::Swapped => agent.write_swapped(BusAddr(at), &mut data).await,
                };
                written.expect("write");
                out.borrow_mut().push(agent.now());
                out_left.borrow_mut().push(data);
            }
        });
        machine.run();
        let mut memory = vec![0u8; 0x2_0000 + 200];
        sim.peek_memory(HostId(0), PhysAddr(BUFFER), &mut memory);
        let done = done.borrow().clone();
        let left = left.borrow().clone();
        ((done, memory, sim.now()), left)
    };
    let (copied, _) = run(How::Copied);
    assert_eq!(copied.0.len(), 3, "every write finished");
    for how in [How::Owned, How::Swapped] {
        let (written, left) = run(how);
        for (i, &(at, len, _)) in pieces.iter().enumerate() {
            let from = (at - BUFFER) as usize;
            assert_eq!(
                written.1[from..from + len],
                bytes(i, len),
                "write {i} landed"
            );
        }
        assert_eq!(written, copied, "the same bytes, done at the same times");
        if how == How::Swapped {
            // The stream's bytes were taken, a spare buffer left; the single TLP and the
            // store were copied, their buffers left as they were.
            assert!(left[0].is_empty(), "the stream's buffer was swapped");
            assert_eq!(left[1], bytes(1, 64), "a single TLP's buffer is left");
            assert_eq!(left[2], bytes(2, 200), "a store's buffer is left");
        }
    }
}

/// A write of zeroes (`Port::write_zeroes`: kept in no buffer, landed by zeroing memory,
/// whole pages given back) lands what a write of a zeroed slice lands, when it lands, over
/// bytes written before: a device's stream over parts of pages and a whole page (in bursts
/// and step by step), a device's write of one TLP, a CPU's stores to its own RAM (one
/// smaller and one larger than a TLP may carry). Around them the bytes written before stay.
#[test]
fn a_write_of_zeroes_lands_what_a_write_of_a_zeroed_slice_lands_and_when() {
    const SPAN: usize = 0x3_0000 + 3 * 4096;
    let pieces: [(u64, usize, bool); 4] = [
        (BUFFER + 100, 2 * 4096 + 300, true),
        (BUFFER + 0x1_0000, 64, true),
        (BUFFER + 0x2_0000, 200, false),
        (BUFFER + 0x3_0000, 2 * 4096, false),
    ];
    let run = |zeroes: bool, bursts: bool| {
        let (sim, _) = sim();
        sim.set_bursts(bursts);
        sim.poke_memory(HostId(0), PhysAddr(BUFFER), &vec![0xa5; SPAN]);
        let (machine, device, cpu) = through_the_machine(&sim);
        let done: Rc<RefCell<Vec<SimTime>>> = Rc::default();
        let out = done.clone();
        machine.spawn(async move {
            for &(at, len, by_device) in &pieces {
                let agent = if by_device { &device } else { &cpu };
                let written = if zeroes {
                    agent.write_zeroes(BusAddr(at), len).await
                } else {
                    agent.write(BusAddr(at), &vec![0u8; len]).await
                };
                written.expect("write");
                out.borrow_mut().push(agent.now());
            }
        });
        machine.run();
        let mut memory = vec![0u8; SPAN];
        sim.peek_memory(HostId(0), PhysAddr(BUFFER), &mut memory);
        let done = done.borrow().clone();
        (done, memory, sim.now())
    };
    let mut want = vec![0xa5u8; SPAN];
    for &(at, len, _) in &pieces {
        let from = (at - BUFFER) as usize;
        want[from..from + len].fill(0);
    }
    for bursts in [true, false] {
        let (slice, zeroes) = (run(false, bursts), run(true, bursts));
        assert_eq!(slice.0.len(), 4, "every write finished");
        assert!(zeroes.1 == want, "zeroes where written, the rest kept");
        assert_eq!(
            zeroes, slice,
            "bursts {bursts}: the same bytes, at the same times"
        );
    }
}
