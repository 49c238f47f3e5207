//! The `gpu_commands` target: the GPU model driven with raw MMIO by a host doing arbitrary
//! things — rings set up right or wrong, ring entries that copy between device memory, host
//! RAM, the peer GPU's aperture, unclaimed addresses and past every limit, launches of the
//! target's kernels, timestamps, releases, acquires, raw garbage; `PUT` values in and out of
//! range; `RESET`; register and BAR1 accesses at any offset and width — on the shipped
//! `local-chassis` scenario (gpu0, gpu1, host RAM with the IOMMU off, so bus = physical).
//!
//! ```text
//!   local (CPU, RAM: rings, notices, source, destination, words) ── hib68 ══ hib68 ── chassis
//!                                                                        ├─ gpu0 ─┐ peer
//!                                                                        └─ gpu1 ─┘ apertures
//! ```
//!
//! The input decodes into at most [`ops::MAX_OPS`] operations ([`ops::Op`]); after each the
//! simulation settles and every channel is compared with the reference [`model::World`].
//! Checked: nothing panics; the simulation settles (a channel RUNNING for good sits in an
//! acquire nothing satisfied, or a launch whose parameters `PUT` does not cover) and comes
//! to rest; a stopped channel has a known `ErrorCode`, its notice at `NOTIFIER` and `GET` at
//! the failed entry; a bad command's info is its opcode; after `RESET` the channel is IDLE
//! with `GET` = `PUT` = 0 and runs again; `GET` never passes `PUT`; registers and BAR1 give
//! the exact `CompleterError` the rules predict; and, while the model can follow the run,
//! every channel register and every byte of host RAM and device memory it touched equals
//! the model's, with nothing written around the harness's area of host RAM.

pub mod host;
pub mod model;
pub mod ops;
pub mod shadow;

use crate::Outcome;
use host::{Harness, Layout, BUFFER, GUARD, REGION, SRC};
use model::{param_addr, param_word, Where, World, KERNELS};
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_devices::gpu::spec::{self, ErrorCode};
use smartio_devices::gpu::{KernelFn, KernelFuture, ThreadContext};
use smartio_fabric::{Access, EndpointId, Fabric, HostId, Requester, Target};
use smartio_machine::{Agent, Machine};
use smartio_platform::pci::{self, command};
use smartio_platform::{race, BusAddr, Either, PhysAddr, SimDuration, SimTime};
use std::cell::Cell;
use std::rc::Rc;

/// Virtual time a run may take (each operation settles within 20 ms).
const DEADLINE: SimTime = SimTime(10_000_000_000_000); // 10 s

/// `local-chassis`, enumerated once per thread.
fn setup() -> (Fabric, Calibration) {
    let fabric = crate::cached_scenario("local-chassis.toml", || {
        crate::shipped("local-chassis").to_string()
    });
    (fabric, crate::calibration_default())
}

/// `store`: thread `t` stores `value + t` at `address + 8 t`.
fn store_kernel() -> KernelFn<Agent> {
    Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let p = ctx.params().to_vec();
            let t = u64::from(ctx.thread());
            let at = param_addr(&p, 0).offset(8 * t);
            ctx.store_u64(at, param_word(&p, 2).wrapping_add(t)).await
        })
    })
}

/// `wait`: waits for the device word at `offset` to reach `value`, at most `bound_ns`.
fn wait_kernel() -> KernelFn<Agent> {
    Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let p = ctx.params().to_vec();
            let (offset, value) = (param_word(&p, 0), param_word(&p, 1));
            let bound = SimDuration::from_ns(param_word(&p, 2).min(ops::MAX_WAIT_NS));
            match race(ctx.wait_until(offset, |v| v >= value), ctx.nanosleep(bound)).await {
                Either::Left(r) => r.map(|_| ()),
                Either::Right(()) => Ok(()),
            }
        })
    })
}

/// `load`: loads a word.
fn load_kernel() -> KernelFn<Agent> {
    Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let p = ctx.params().to_vec();
            ctx.load_u64(param_addr(&p, 0)).await.map(|_| ())
        })
    })
}

/// Drives both GPUs with the operations `data` decodes to and checks the outcome.
pub fn gpu_commands(data: &[u8]) -> Outcome {
    let ops = ops::decode(data);
    let count = ops.len();
    let (fabric, calibration) = setup();
    let cluster = match Cluster::from_fabric(fabric, &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("local-chassis does not build: {e}"),
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    for (i, (name, kind)) in KERNELS.iter().enumerate() {
        let code = match kind {
            model::KernelKind::Store => store_kernel(),
            model::KernelKind::Wait => wait_kernel(),
            model::KernelKind::Load => load_kernel(),
        };
        let id = cluster.gpu_kernels().load(name, code);
        assert_eq!(
            id,
            spec::KernelId(i as u32),
            "kernel {name} loaded out of order"
        );
    }
    let gpus: Vec<_> = cluster.gpus().collect();
    let [(ep0, g0), (ep1, g1)] = <[_; 2]>::try_from(gpus).unwrap_or_else(|g| {
        panic!("local-chassis has {} GPUs, not 2", g.len());
    });
    let machine = cluster.machine.clone();
    let layout = layout(&machine, [ep0, ep1], g0.memory_size(), g0.aperture_size());
    let world = World::new(
        layout.memory,
        g0.config().timing.dma_bits,
        classifier(&machine, [ep0, ep1], layout.aperture),
    );
    let harness = Rc::new(Harness::new(&machine, [g0, g1], layout, world));
    let src = pattern_for(&layout);
    machine.poke_memory(HostId(0), PhysAddr(layout.host + SRC), &src);
    harness
        .world
        .borrow_mut()
        .host
        .write(layout.host + SRC, &src);

    let done = Rc::new(Cell::new(false));
    let (h, flag, cpu) = (harness.clone(), done.clone(), machine.cpu(HostId(0)));
    machine.spawn(async move {
        let on = (command::MEMORY_SPACE | command::BUS_MASTER).to_le_bytes();
        for ep in [ep0, ep1] {
            if let Err(e) = cpu.config_write(ep, pci::COMMAND, &on).await {
                panic!("enabling a GPU failed: {e}");
            }
        }
        h.run(ops).await;
        flag.set(true);
    });
    let end = machine.run_until(DEADLINE);
    assert!(
        done.get(),
        "the host did not finish its {count} operations by {} ps of virtual time: {}",
        DEADLINE.as_ps(),
        machine.blocked_summary()
    );
    let rest = DEADLINE.as_ps() - end.end.as_ps();
    assert!(
        rest > DEADLINE.as_ps() / 2,
        "the simulation did not come to rest: events until {} ps",
        end.end.as_ps()
    );
    let world = harness.world.borrow();
    if world.chaos.is_none() {
        compare_memory(&machine, &harness, &layout);
    }
    let errors: Vec<String> = world
        .errors
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .filter_map(|(code, n)| {
            ErrorCode::from_register(code as u64).map(|c| format!("{c:?} x{n}"))
        })
        .collect();
    let waiting = world
        .chans
        .iter()
        .flatten()
        .filter(|c| c.wait.is_some())
        .count();
    let (registers, refused) = *harness.registers.borrow();
    Outcome::accepted(format!(
        "{count} ops, ended at {} ps; {} entries, {waiting} waiting, {registers} register \
         accesses ({refused} refused){}; {}",
        end.end.as_ps(),
        world.executed,
        world.chaos.as_ref().map_or(String::new(), |why| format!(
            ", chaos: {}",
            strip_digits(why)
        )),
        errors.join(", ")
    ))
}

/// `why` with its numbers dropped (the outcome's shape keeps the kind of reason only).
fn strip_digits(why: &str) -> String {
    why.split_whitespace()
        .filter(|w| !w.starts_with("0x") && !w.chars().all(|c| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn pattern_for(_layout: &Layout) -> Vec<u8> {
    host::pattern(BUFFER as usize)
}

/// Every byte the model knows of host RAM (the harness's area with its guards, and every
/// page it touched) and of both GPUs' memory equals the simulation's.
fn compare_memory(machine: &Machine, harness: &Harness, layout: &Layout) {
    let world = harness.world.borrow();
    let start = layout.host - GUARD;
    let mut actual = vec![0u8; (REGION + 2 * GUARD) as usize];
    machine.peek_memory(HostId(0), PhysAddr(start), &mut actual);
    if let Some((at, e, a)) = world.host.first_difference(start, &actual) {
        panic!(
            "host RAM at {at:#x} (area {:+#x}) is {a:#04x}, expected {e:#04x}",
            at as i64 - layout.host as i64
        );
    }
    let mut page = vec![0u8; 4096];
    for (addr, _, _) in world.host.touched() {
        machine.peek_memory(HostId(0), PhysAddr(addr), &mut page);
        if let Some((at, e, a)) = world.host.first_difference(addr, &page) {
            panic!("host RAM at {at:#x} is {a:#04x}, expected {e:#04x}");
        }
    }
    for (g, gpu) in harness.gpus().iter().enumerate() {
        for (addr, _, _) in world.gpus[g].touched() {
            let n = 4096.min(layout.memory.saturating_sub(addr)) as usize;
            if gpu.peek(addr, &mut page[..n]).is_err() {
                continue;
            }
            if let Some((at, e, a)) = world.gpus[g].first_difference(addr, &page[..n]) {
                panic!("gpu{g} memory at {at:#x} is {a:#04x}, expected {e:#04x}");
            }
        }
    }
}

fn layout(machine: &Machine, gpus: [EndpointId; 2], memory: u64, aperture: u64) -> Layout {
    let f = machine.fabric();
    let bar = |ep: EndpointId, index: u8| {
        f.endpoint(ep)
            .bars
            .iter()
            .find(|b| b.index == index)
            .map_or(0, |b| b.base.get())
    };
    let ram = f.host(HostId(0)).ram.first().map_or(0, |r| r.start);
    Layout {
        host: ram + (256 << 20),
        bar0: gpus.map(|ep| bar(ep, spec::REGISTER_BAR)),
        bar1: gpus.map(|ep| bar(ep, spec::APERTURE_BAR)),
        aperture,
        memory,
    }
}

/// Where a GPU's bus access lands, by the fabric's own routing.
fn classifier(machine: &Machine, gpus: [EndpointId; 2], aperture: u64) -> model::Classify {
    let machine = machine.clone();
    Box::new(move |g, addr, len| {
        let f = machine.fabric();
        let Ok(route) = f.route(
            Requester::Device(gpus[g]),
            BusAddr(addr),
            len,
            Access::Write,
        ) else {
            return Where::Unmapped;
        };
        if route.len < len {
            return Where::Uncertain;
        }
        match route.target {
            Target::Memory {
                host: HostId(0),
                addr,
            } => Where::Host(addr.get()),
            Target::Bar {
                endpoint,
                bar,
                offset,
            } if bar == spec::APERTURE_BAR
                && endpoint == gpus[1 - g]
                && offset.checked_add(len).is_some_and(|e| e <= aperture) =>
            {
                Where::Gpu(1 - g, offset)
            }
            _ => Where::Uncertain,
        }
    })
}
