//! Recording where time goes: a critical path tiles its operation exactly, names each chip,
//! link, root-complex leg and software cost it crossed, follows causes across tasks, and
//! recording changes nothing about the run. The trace holds one slice per TLP per link.

use smartio_engine::{Calibration, Sim};
use smartio_fabric::HostId;
use smartio_machine::{CriticalPath, StepClass, TrackKind};
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use common::{sim, sim_of, TWO_SWITCHES};

/// What a task saw at an operation's end: when, and the step that woke it.
type Seen = Rc<RefCell<Option<(SimTime, u32)>>>;

fn seen() -> Seen {
    Rc::new(RefCell::new(None))
}

fn path(sim: &Sim, seen: &Seen, start: SimTime) -> CriticalPath {
    let (end, step) = seen.borrow().expect("the operation ended");
    sim.critical_path(step, start, end)
        .expect("recording is on")
}

fn assert_tiles(p: &CriticalPath) {
    assert_eq!(
        p.total(),
        p.end.since(p.start),
        "the steps sum to the latency exactly: {p:#?}"
    );
    let mut at = p.start;
    for s in &p.steps {
        assert_eq!(s.start, at, "no gap and no overlap before {s:?}");
        at = s.start + s.duration;
    }
    assert_eq!(at, p.end);
}

/// A device's 64-byte write into RAM, seen by a CPU watching the word: every hop of the
/// fabric's path is a row, with the chips' latencies from the calibration.
#[test]
fn a_devices_write_is_explained_hop_by_hop_and_sums_to_its_latency() {
    let (sim, cal) = sim();
    sim.start_recording(None);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let cpu = sim.cpu(HostId(0));
    let s = seen();
    let out = s.clone();
    let sim2 = sim.clone();
    sim.spawn(async move {
        cpu.written(PhysAddr(0x1000), 64).await;
        *out.borrow_mut() = Some((cpu.now(), sim2.current_step().expect("recording")));
    });
    let port = sim.device(dev);
    sim.spawn(async move {
        port.write(BusAddr(0x1000), &[0xab; 64])
            .await
            .expect("write lands in RAM");
    });
    sim.run();
    let p = path(&sim, &s, SimTime::ZERO);
    assert_tiles(&p);
    assert_eq!(p.end, SimTime(325_941), "as the timing test computes it");
    let chips: Vec<(&str, SimDuration)> = p
        .steps
        .iter()
        .filter(|s| s.class == StepClass::Chip)
        .map(|s| (s.what.as_str(), s.duration))
        .collect();
    let ns = |v: f64| SimDuration::from_ns_f64(v);
    assert_eq!(
        chips,
        vec![
            ("h.sw2 (PEX8733)", ns(cal.chips["PEX8733"].latency_ns.value)),
            ("h.sw1 (PEX8796)", ns(cal.chips["PEX8796"].latency_ns.value)),
        ]
    );
    let into_memory = p
        .steps
        .iter()
        .find(|s| s.class == StepClass::RootComplex)
        .expect("the root complex's last leg");
    assert_eq!(into_memory.duration, ns(cal.root_complex.latency_ns.value));
    assert!(
        p.steps.iter().all(|s| s.class == StepClass::Chip
            || s.class == StepClass::Link
            || s.class == StepClass::RootComplex),
        "nothing else is on this path: {p:#?}"
    );
    assert!(p.steps[0].part_of.contains("h.dev0 write 64 B → h RAM"));
}

/// A chain across tasks: a device task spends a named cost, then writes a word a CPU task
/// waits for; the CPU task then reads a device register. The CPU's read is explained from
/// the device's cost on: the named step, the write's crossing, the read request, the
/// completer's read, the completion and the way back to the core.
#[test]
fn a_chain_of_tasks_is_followed_back_through_named_costs_writes_and_reads() {
    let (sim, _) = sim();
    sim.start_recording(None);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let bar = sim.fabric().endpoint(dev).bars[0].base;
    let cpu = sim.cpu(HostId(0));
    let s = seen();
    let out = s.clone();
    let sim2 = sim.clone();
    sim.spawn(async move {
        cpu.written(PhysAddr(0x2000), 8).await;
        let mut reg = [0u8; 4];
        // No handler: the read completes with a completer abort, after its round trip.
        let _ = cpu.read(BusAddr(bar.get()), &mut reg).await;
        *out.borrow_mut() = Some((cpu.now(), sim2.current_step().expect("recording")));
    });
    let port = sim.device(dev);
    sim.spawn(async move {
        port.spend("media: read", SimDuration::from_ns(5_000)).await;
        port.write(BusAddr(0x2000), &[1; 8]).await.expect("lands");
    });
    sim.run();
    let p = path(&sim, &s, SimTime::ZERO);
    assert_tiles(&p);
    let first = &p.steps[0];
    assert_eq!(
        (first.class, first.what.as_str(), first.duration),
        (
            StepClass::Device,
            "h.dev0: media: read",
            SimDuration::from_ns(5_000)
        )
    );
    let parts: Vec<&str> = p
        .steps
        .iter()
        .map(|s| s.part_of.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    assert!(parts.iter().any(|s| s.starts_with("h.dev0 write 8 B")));
    assert!(parts
        .iter()
        .any(|s| s.starts_with("h CPU read request 4 B → h.dev0 BAR0")));
    assert!(parts.iter().any(|s| s.starts_with("h CPU completion 4 B")));
    let whats: Vec<&str> = p.steps.iter().map(|s| s.what.as_str()).collect();
    assert!(whats.iter().any(|w| w.starts_with("read of h.dev0 BAR0")));
    assert!(whats.contains(&"h root complex: completion back to the core"));
    assert!(whats
        .iter()
        .any(|w| w.starts_with("h CPU: MMIO access leaves the core")));
}

/// A 4 KiB write leaves its device in 16 TLPs; what the watcher of its last bytes waited
/// for includes the TLPs serialized before the last one, merged into one row.
#[test]
fn a_transfers_tlps_sent_back_to_back_are_one_row_with_their_count() {
    let (sim, _) = sim();
    sim.start_recording(None);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let cpu = sim.cpu(HostId(0));
    let s = seen();
    let out = s.clone();
    let sim2 = sim.clone();
    sim.spawn(async move {
        // The last 256 bytes: the last TLP.
        cpu.written(PhysAddr(0x10_0000 + 3840), 256).await;
        *out.borrow_mut() = Some((cpu.now(), sim2.current_step().expect("recording")));
    });
    let port = sim.device(dev);
    sim.spawn(async move {
        port.write(BusAddr(0x10_0000), &[7; 4096])
            .await
            .expect("lands");
    });
    sim.run();
    let p = path(&sim, &s, SimTime::ZERO);
    assert_tiles(&p);
    let sent = p
        .steps
        .iter()
        .find(|s| s.what.starts_with("sent on link"))
        .expect("the earlier TLPs leaving the device");
    assert_eq!(sent.count, 15, "{p:#?}");
}

/// The same run with and without recording ends at the same time, having done the same.
#[test]
fn recording_changes_nothing_about_the_run() {
    let run = |record: bool| {
        // With variation: chips' latencies are drawn per transaction and path.
        let (sim, _) = sim_of(TWO_SWITCHES, Calibration::default_embedded());
        if record {
            sim.start_recording(Some(1_000));
        }
        let dev = sim
            .fabric()
            .endpoint_by_name(HostId(0), "dev0")
            .expect("dev0");
        let port = sim.device(dev);
        sim.spawn(async move {
            for i in 0..20u64 {
                port.spend("work", SimDuration::from_ns(100 + i)).await;
                let _ = port.write(BusAddr(0x1000 + 64 * i), &[i as u8; 64]).await;
                let mut b = [0u8; 64];
                let _ = port.read(BusAddr(0x1000 + 64 * i), &mut b).await;
            }
        });
        let summary = sim.run();
        (summary.end, sim.counters(), sim.link_states())
    };
    assert_eq!(run(false), run(true));
}

/// The trace keeps every TLP as a slice on its requester's track and one per link it
/// crossed, inside the TLP's own slice; the limit on slices is kept and what is left out
/// counted.
#[test]
fn a_trace_has_a_slice_per_tlp_per_link_within_the_tlp_and_respects_its_limit() {
    let (sim, _) = sim();
    sim.start_recording(Some(10));
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let port = sim.device(dev);
    sim.spawn(async move {
        port.write(BusAddr(0x1000), &[1; 4096])
            .await
            .expect("lands");
    });
    sim.run();
    let trace = sim.take_trace().expect("a trace was kept");
    assert!(
        trace.dropped > 0,
        "16 TLPs and their links exceed 10 slices"
    );
    assert!(
        trace.events.len() <= 10,
        "the limit counts slices: {}",
        trace.events.len()
    );
    let tlps: Vec<_> = trace
        .events
        .iter()
        .filter(|e| e.category == "tlp")
        .collect();
    assert!(!tlps.is_empty() && tlps.len() <= 10);
    for tlp in &tlps {
        let end = tlp.start + tlp.duration;
        let on_links = trace
            .events
            .iter()
            .filter(|e| {
                e.track.kind == TrackKind::Link
                    && e.start >= tlp.start
                    && e.start + e.duration <= end
                    && e.args == tlp.args
            })
            .count();
        assert!(
            on_links >= 3,
            "dev0 → sw2 → sw1 → root: {on_links} link slices"
        );
    }
    assert!(
        sim.take_trace().is_some_and(|t| t.events.is_empty()),
        "taken"
    );
}

/// A device writes a word into RAM, then signals an MSI; the CPU's handler, woken by the
/// interrupt, reads the word. The handler waited for the interrupt, which came after the
/// word: the path crosses the MSI and its delivery, and has no wait for a polling loop.
#[test]
fn a_handler_reading_a_word_written_before_its_interrupt_waited_for_the_interrupt() {
    let (sim, _) = sim();
    sim.start_recording(None);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let msi = sim.fabric().host(HostId(0)).msi.start;
    let cpu = sim.cpu(HostId(0));
    let s = seen();
    let out = s.clone();
    let sim2 = sim.clone();
    sim.spawn(async move {
        cpu.interrupt(5).await;
        let mut word = [0u8; 8];
        cpu.read(BusAddr(0x3000), &mut word).await.expect("RAM");
        *out.borrow_mut() = Some((cpu.now(), sim2.current_step().expect("recording")));
    });
    let port = sim.device(dev);
    sim.spawn(async move {
        port.spend("media: read", SimDuration::from_ns(2_000)).await;
        port.write(BusAddr(0x3000), &[9; 8]).await.expect("lands");
        port.write(BusAddr(msi), &5u32.to_le_bytes())
            .await
            .expect("an MSI");
    });
    sim.run();
    let p = path(&sim, &s, SimTime::ZERO);
    assert_tiles(&p);
    assert!(
        p.steps
            .iter()
            .all(|s| s.class != StepClass::Waiting
                || s.waited_for == "the link, busy with other TLPs"),
        "no polling wait, nothing unrecorded: {p:#?}"
    );
    let delivery = p
        .steps
        .iter()
        .position(|s| s.class == StepClass::Interrupt)
        .expect("the interrupt's delivery is on the path");
    assert!(p.steps[..delivery]
        .iter()
        .any(|s| s.part_of.starts_with("h.dev0 write 4 B → h interrupt")));
    assert_eq!(
        p.steps[delivery - 1].what,
        "h root complex: from the root port to the interrupt controller"
    );
    let load = p.steps.last().expect("steps");
    assert_eq!(load.class, StepClass::Cpu, "the handler's load ends it");
    assert_eq!(p.steps[0].what, "h.dev0: media: read");
}

/// A CPU looks at a word, sleeps a poll interval, looks again: the look that finds the
/// device's write waited for that write, and the rest of the interval is the loop's wait.
#[test]
fn a_polling_loops_look_that_finds_new_data_waited_for_the_write() {
    let (sim, _) = sim();
    sim.start_recording(None);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let cpu = sim.cpu(HostId(0));
    let s = seen();
    let out = s.clone();
    let sim2 = sim.clone();
    sim.spawn(async move {
        loop {
            let mut word = [0u8; 8];
            cpu.read(BusAddr(0x4000), &mut word).await.expect("RAM");
            if word == [3; 8] {
                break;
            }
            cpu.spend("poll interval", SimDuration::from_ns(1_000))
                .await;
        }
        *out.borrow_mut() = Some((cpu.now(), sim2.current_step().expect("recording")));
    });
    let port = sim.device(dev);
    sim.spawn(async move {
        port.spend("media: read", SimDuration::from_ns(2_500)).await;
        port.write(BusAddr(0x4000), &[3; 8]).await.expect("lands");
    });
    sim.run();
    let p = path(&sim, &s, SimTime::ZERO);
    assert_tiles(&p);
    assert_eq!(p.steps[0].what, "h.dev0: media: read", "{p:#?}");
    let n = p.steps.len();
    assert_eq!(
        (p.steps[n - 2].class, p.steps[n - 2].waited_for.as_str()),
        (
            StepClass::Waiting,
            "the polling loop's next look at the word"
        )
    );
    assert_eq!(p.steps[n - 1].class, StepClass::Cpu);
    assert!(
        !p.steps.iter().any(|s| s.what.contains("poll interval")),
        "the intervals are not what it waited for: {p:#?}"
    );
}
