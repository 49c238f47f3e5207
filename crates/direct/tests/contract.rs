//! The direct engine keeps the platform contract: accesses land where the fabric routes
//! them, only sleeps move the clock, watches, interrupts, configuration requests and faults
//! behave as the contract says.

use smartio_calibration::Calibration;
use smartio_direct::DirectEngine;
use smartio_fabric::{parse_scenario, Fabric, HostId};
use smartio_machine::{Agent, Machine};
use smartio_platform::{
    race, AccessError, BusAddr, Clock, Either, MemoryWatch, PhysAddr, Port, SimDuration, SimTime,
};
use std::cell::RefCell;
use std::rc::Rc;

const ONE_HOST: &str = r#"
[[host]]
name = "h"
ram = "4 GiB"
[[host.device]]
name = "dev0"
kind = "dma"
parent = "root"
link = "gen3 x16"
"#;

fn machine() -> Machine {
    let spec = parse_scenario("one-host", ONE_HOST).expect("valid scenario");
    let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("enumerates");
    DirectEngine::new(fabric, &Calibration::default_embedded()).machine()
}

fn dev0(m: &Machine) -> Agent {
    let ep = m
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0 exists");
    m.device(ep)
}

#[test]
fn bytes_written_by_a_device_are_read_back_by_the_cpu_and_take_no_time() {
    let m = machine();
    let (dev, cpu) = (dev0(&m), m.cpu(HostId(0)));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let out = Rc::clone(&seen);
    m.spawn(async move {
        dev.write(BusAddr(0x1000), b"smartio")
            .await
            .expect("lands in RAM");
        let mut buf = [0u8; 7];
        cpu.read(BusAddr(0x1000), &mut buf)
            .await
            .expect("reads RAM");
        out.borrow_mut().extend_from_slice(&buf);
    });
    let summary = m.run();
    assert_eq!(seen.borrow().as_slice(), b"smartio");
    assert_eq!(summary.end, SimTime::ZERO);
    assert_eq!(summary.blocked_tasks, 0);
    let mut direct = [0u8; 7];
    m.peek_memory(HostId(0), PhysAddr(0x1000), &mut direct);
    assert_eq!(&direct, b"smartio");
}

#[test]
fn sleeps_fire_in_time_order_and_move_the_clock() {
    let m = machine();
    let order = Rc::new(RefCell::new(Vec::new()));
    for (name, ns) in [("late", 20u64), ("early", 10)] {
        let (cpu, order) = (m.cpu(HostId(0)), Rc::clone(&order));
        m.spawn(async move {
            cpu.sleep(SimDuration::from_ns(ns)).await;
            order.borrow_mut().push((name, cpu.now()));
        });
    }
    let end = m.run().end;
    assert_eq!(
        order.borrow().as_slice(),
        [
            ("early", SimTime::ZERO + SimDuration::from_ns(10)),
            ("late", SimTime::ZERO + SimDuration::from_ns(20))
        ]
    );
    assert_eq!(end, SimTime::ZERO + SimDuration::from_ns(20));
}

#[test]
fn a_sleep_that_loses_a_race_does_not_move_the_clock() {
    let m = machine();
    let (cpu, dev) = (m.cpu(HostId(0)), dev0(&m));
    let won = Rc::new(RefCell::new(None));
    let out = Rc::clone(&won);
    m.spawn(async move {
        let watch = cpu.written(PhysAddr(0x2000), 8);
        let timeout = cpu.sleep(SimDuration::from_ns(1_000_000));
        let r = race(watch, timeout).await;
        *out.borrow_mut() = Some(matches!(r, Either::Left(())));
    });
    m.spawn(async move {
        dev.write(BusAddr(0x2004), &[1]).await.expect("lands");
    });
    let end = m.run().end;
    assert_eq!(
        *won.borrow(),
        Some(true),
        "the write came before the timeout"
    );
    assert_eq!(end, SimTime::ZERO, "the dropped timeout never fired");
}

#[test]
fn a_watch_ignores_writes_outside_its_range_and_fires_on_an_overlap() {
    let m = machine();
    let cpu = m.cpu(HostId(0));
    let woke = Rc::new(RefCell::new(None));
    let out = Rc::clone(&woke);
    m.spawn(async move {
        cpu.written(PhysAddr(0x3000), 16).await;
        *out.borrow_mut() = Some(cpu.now());
    });
    m.run();
    m.poke_memory(HostId(0), PhysAddr(0x3010), &[1]);
    m.run();
    assert_eq!(*woke.borrow(), None, "0x3010 is past the watched range");
    m.poke_memory(HostId(0), PhysAddr(0x300f), &[1]);
    m.run();
    assert_eq!(*woke.borrow(), Some(SimTime::ZERO));
}

#[test]
fn an_access_nobody_claims_is_an_unsupported_request_and_a_fault() {
    let m = machine();
    let dev = dev0(&m);
    let result = Rc::new(RefCell::new(None));
    let out = Rc::clone(&result);
    m.spawn(async move {
        let mut buf = [0u8; 4];
        *out.borrow_mut() = Some(dev.read(BusAddr(0xF000_0000_0000), &mut buf).await);
    });
    m.run();
    let got = result.borrow_mut().take().expect("the task ran");
    assert!(
        matches!(got, Err(AccessError::UnsupportedRequest { .. })),
        "{got:?}"
    );
    assert_eq!(m.faults().len(), 1);
}

#[test]
fn an_msi_write_is_an_interrupt_and_a_wait_without_one_times_out() {
    let m = machine();
    let (cpu, dev) = (m.cpu(HostId(0)), dev0(&m));
    let got = Rc::new(RefCell::new(Vec::new()));
    let out = Rc::clone(&got);
    m.spawn(async move {
        let came = cpu.interrupt_timeout(7, SimDuration::from_ns(500)).await;
        out.borrow_mut().push((came, cpu.now()));
        let came = cpu.interrupt_timeout(9, SimDuration::from_ns(500)).await;
        out.borrow_mut().push((came, cpu.now()));
    });
    m.spawn(async move {
        dev.sleep(SimDuration::from_ns(100)).await;
        dev.write(BusAddr(0xFEE0_0000), &7u32.to_le_bytes())
            .await
            .expect("the MSI range takes writes");
    });
    m.run();
    let ns = |n| SimTime::ZERO + SimDuration::from_ns(n);
    assert_eq!(got.borrow().as_slice(), [(true, ns(100)), (false, ns(600))]);
}

#[test]
fn configuration_requests_stay_in_the_functions_host() {
    let m = machine();
    let (cpu, dev) = (m.cpu(HostId(0)), dev0(&m));
    let ep = dev0(&m).requester();
    let smartio_fabric::Requester::Device(ep) = ep else {
        panic!("a device agent")
    };
    let got = Rc::new(RefCell::new(None));
    let out = Rc::clone(&got);
    m.spawn(async move {
        let mut id = [0u8; 4];
        cpu.config_read(ep, 0, &mut id).await.expect("own host");
        let from_device = dev.config_read(ep, 0, &mut [0u8; 4]).await;
        *out.borrow_mut() = Some((id, from_device));
    });
    m.run();
    let (id, from_device) = got.borrow_mut().take().expect("the task ran");
    assert_eq!(
        id, [0xff; 4],
        "no configuration handler: an absent function"
    );
    assert!(matches!(
        from_device,
        Err(AccessError::UnsupportedRequest { .. })
    ));
}

/// The engine on the wall clock over memory the caller gives: the live engine's core.
fn wall_clock() -> (DirectEngine, Machine) {
    let spec = parse_scenario("one-host", ONE_HOST).expect("valid scenario");
    let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("enumerates");
    let memory: Vec<Box<dyn smartio_platform::HostMemory>> =
        vec![Box::new(smartio_platform::SparseMemory::new())];
    let engine = DirectEngine::on_wall_clock(fabric, &Calibration::default_embedded(), memory);
    let machine = engine.machine();
    (engine, machine)
}

#[test]
fn on_the_wall_clock_a_sleep_lasts_its_time_and_advance_says_when_the_next_timer_is_due() {
    let (engine, m) = wall_clock();
    let cpu = m.cpu(HostId(0));
    let woke = Rc::new(RefCell::new(None));
    let out = Rc::clone(&woke);
    let started = std::time::Instant::now();
    m.spawn(async move {
        cpu.sleep(SimDuration::from_us(20_000)).await;
        *out.borrow_mut() = Some(cpu.now());
    });
    // Nothing is due yet: advance runs the task up to its sleep and names the deadline.
    let next = engine.advance().expect("a timer is armed");
    assert!(
        next >= SimTime::ZERO + SimDuration::from_us(20_000),
        "{next:?}"
    );
    assert!(woke.borrow().is_none());
    m.run();
    let at = woke.borrow().expect("the task woke");
    assert!(at >= SimTime::ZERO + SimDuration::from_us(20_000), "{at:?}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(20));
    assert_eq!(engine.advance(), None, "no timer left");
}

#[test]
fn on_the_wall_clock_accesses_land_in_the_memory_given() {
    let (_engine, m) = wall_clock();
    let dev = dev0(&m);
    m.spawn(async move {
        dev.write(BusAddr(0x2000), b"live")
            .await
            .expect("lands in RAM");
    });
    m.run();
    let mut buf = [0u8; 4];
    m.peek_memory(HostId(0), PhysAddr(0x2000), &mut buf);
    assert_eq!(&buf, b"live");
}

/// The direct engine moves whole accesses, and counts them per link: a device's write of
/// 4 KiB and its read of 100 bytes are one access each up its link (the write's bytes; the
/// read's request carries none), the read's answer one access of 100 bytes down. The CPU's
/// own RAM crosses no link.
#[test]
fn each_link_counts_the_accesses_and_bytes_it_carried_each_way() {
    let m = machine();
    let (dev, cpu) = (dev0(&m), m.cpu(HostId(0)));
    m.spawn(async move {
        dev.write(BusAddr(0x1000), &[7; 4096])
            .await
            .expect("lands in RAM");
        let mut buf = [0u8; 100];
        dev.read(BusAddr(0x1000), &mut buf).await.expect("RAM");
        cpu.write(BusAddr(0x9000), &[1; 64]).await.expect("RAM");
    });
    m.run();
    let links = m.link_traffic();
    assert_eq!(links.len(), 1);
    let l = &links[0];
    assert_eq!(l.link, "h -> h.dev0");
    assert_eq!((l.up.tlps, l.up.payload_bytes), (2, 4096));
    assert_eq!((l.down.tlps, l.down.payload_bytes), (1, 100));
    assert_eq!(
        (l.up.wire_bytes, l.up.busy_ps, l.down.busy_ps),
        (4096, 0, 0),
        "no framing and no time in this engine"
    );
}
