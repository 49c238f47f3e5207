//! Write streams run in bursts give the results of the step-by-step loop, bit for bit: the
//! same completion times, counters, link occupancy and memory, with chip latencies varying,
//! two devices contending for the same links, a CPU's timers falling between the TLPs, a
//! watched buffer and more TLPs than a stream's posted credits.

use smartio_engine::{Calibration, Counters, LinkState};
use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;

const BUF_A: u64 = 0x20_0000;
const BUF_B: u64 = 0x40_0000;
/// dev0's writes: 40 KiB, 160 TLPs, more than a stream's posted credits.
const LONG: usize = 40 * 1024;
/// Posted TLPs a write stream may have on their way (the default is more than these
/// paths ever hold).
const CREDITS: f64 = 6.0;
/// dev1's writes: 8 KiB.
const SHORT: usize = 8 * 1024;

/// Everything a run leaves that a burst could get wrong.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// When each write and each wake-up finished, by task, in order.
    times: Vec<(&'static str, SimTime)>,
    end: SimTime,
    counters: Counters,
    links: Vec<LinkState>,
    buf_a: Vec<u8>,
    buf_b: Vec<u8>,
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8)
        .collect()
}

fn run(bursts: bool) -> (Outcome, u64) {
    // Chip latencies vary (the default calibration): each TLP draws its own. Few posted
    // credits: a stream waits for its earlier TLPs to land before it sends more.
    let mut cal = Calibration::default_embedded();
    cal.pcie.posted_credits_tlps.value = CREDITS;
    let (sim, _) = common::sim_of(common::TWO_SWITCHES, cal);
    sim.set_bursts(bursts);
    let times: Rc<RefCell<Vec<(&'static str, SimTime)>>> = Rc::default();
    let endpoint = |name: &str| {
        sim.fabric()
            .endpoint_by_name(HostId(0), name)
            .expect("device")
    };
    let (dev0, dev1) = (sim.device(endpoint("dev0")), sim.device(endpoint("dev1")));
    let log = times.clone();
    sim.spawn(async move {
        for round in 0..3u32 {
            let data = pattern(LONG, round);
            dev0.write(BusAddr(BUF_A), &data).await.expect("dev0 DMA");
            log.borrow_mut().push(("dev0", dev0.now()));
            dev0.sleep(SimDuration::from_ns(150)).await;
        }
    });
    let log = times.clone();
    sim.spawn(async move {
        dev1.sleep(SimDuration::from_ns(700)).await;
        for round in 0..6u32 {
            let at = BUF_B + (round as u64 % 3) * SHORT as u64;
            let data = pattern(SHORT, 100 + round);
            dev1.write(BusAddr(at), &data).await.expect("dev1 DMA");
            log.borrow_mut().push(("dev1", dev1.now()));
            dev1.sleep(SimDuration::from_ns(40)).await;
        }
    });
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
    let summary = sim.run();
    let mut buf_a = vec![0u8; LONG];
    let mut buf_b = vec![0u8; 3 * SHORT];
    sim.peek_memory(HostId(0), PhysAddr(BUF_A), &mut buf_a);
    sim.peek_memory(HostId(0), PhysAddr(BUF_B), &mut buf_b);
    let times = times.borrow().clone();
    let outcome = Outcome {
        times,
        end: summary.end,
        counters: summary.counters,
        links: sim.link_states(),
        buf_a,
        buf_b,
    };
    (outcome, sim.burst_steps())
}

#[test]
fn write_streams_run_in_bursts_give_the_step_by_step_results_bit_for_bit() {
    let (stepped, none) = run(false);
    let (burst, steps) = run(true);
    assert_eq!(none, 0, "bursts off: every step goes through the loop");
    assert!(
        steps * 3 > burst.counters.events,
        "a good part of the run's {} steps ran in bursts: {steps}",
        burst.counters.events
    );
    assert_eq!(stepped.times.len(), 3 + 6 + 2, "every task finished");
    assert_eq!(
        burst.buf_a,
        pattern(LONG, 2),
        "dev0's last write is in memory"
    );
    assert_eq!(burst, stepped);
}
