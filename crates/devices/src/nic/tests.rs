//! The NIC's data path on a stand-in engine: functions whose DMA ports reach one flat memory,
//! a clock that sleeps by advancing, and a tiny executor that polls every task until none
//! can progress. Enough to check what reaches memory and what the counters say; timing is
//! checked on the timed engine by the driver's tests.

use super::spec::{queue, reg, RingError, RxDescriptor, Status, TxDescriptor, STATUS_OFFSET};
use super::*;
use crate::config::{ConfigSpace, FunctionSpace};
use crate::ethernet::{FrameHeader, HEADER_BYTES};
use crate::kinds::layout_for;
use smartio_fabric::topology::AssignedBar;
use smartio_platform::{AccessError, BarHandler, BusAddr, LocalTask, SimTime, SparseMemory};
use std::cell::{Cell, RefCell};
use std::future::{ready, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

/// Memory below this bus address exists; above it accesses fail.
const MEMORY_END: u64 = 1 << 30;

#[derive(Clone, Default)]
struct World {
    memory: Rc<RefCell<SparseMemory>>,
    now: Rc<Cell<SimTime>>,
    spawned: Rc<RefCell<Vec<LocalTask>>>,
}

impl Port for World {
    fn read(&self, addr: BusAddr, buf: &mut [u8]) -> impl Future<Output = Result<(), AccessError>> {
        let r = if addr.get() + buf.len() as u64 <= MEMORY_END {
            self.memory.borrow().read(addr.get(), buf);
            Ok(())
        } else {
            Err(AccessError::UnsupportedRequest {
                host: "test".into(),
                addr,
            })
        };
        ready(r)
    }

    fn write(&self, addr: BusAddr, data: &[u8]) -> impl Future<Output = Result<(), AccessError>> {
        let r = if addr.get() + data.len() as u64 <= MEMORY_END {
            self.memory.borrow_mut().write(addr.get(), data);
            Ok(())
        } else {
            Err(AccessError::UnsupportedRequest {
                host: "test".into(),
                addr,
            })
        };
        ready(r)
    }
}

impl Clock for World {
    fn now(&self) -> SimTime {
        self.now.get()
    }

    fn sleep(&self, d: SimDuration) -> impl Future<Output = ()> {
        self.now.set(self.now.get() + d);
        ready(())
    }
}

impl Spawner for World {
    fn spawn_task(&self, task: LocalTask) {
        self.spawned.borrow_mut().push(task);
    }
}

#[derive(Default)]
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl World {
    /// Polls every task until a whole round wakes nothing and spawns nothing.
    fn settle(&self, tasks: &mut Vec<Pin<Box<dyn Future<Output = ()>>>>) {
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..100_000 {
            tasks.append(&mut self.spawned.borrow_mut());
            woken.0.store(false, Ordering::SeqCst);
            let before = tasks.len();
            tasks.retain_mut(|t| t.as_mut().poll(&mut cx).is_pending());
            let quiet = !woken.0.load(Ordering::SeqCst)
                && self.spawned.borrow().is_empty()
                && tasks.len() == before;
            if quiet {
                return;
            }
        }
        panic!("the NIC's tasks never settled");
    }
}

const TIMING: NicTiming = NicTiming {
    line_rate_bps: 100e9,
    per_frame: SimDuration::from_ns(50),
    eswitch: SimDuration::from_ns(100),
    fetch_batch: 8,
    tx_pipeline: 4,
};

const PF: MacAddr = MacAddr([2, 0, 0, 0, 0, 0]);
const VF: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const FAR: MacAddr = MacAddr([2, 9, 9, 9, 9, 9]);

fn pci() -> FunctionSpace {
    let layout = layout_for("nic", &toml::Table::new()).expect("layout");
    let bars: Vec<AssignedBar> = layout
        .bars
        .iter()
        .map(|b| AssignedBar {
            index: b.index,
            kind: b.kind,
            base: BusAddr(1 << 40),
            size: b.size,
        })
        .collect();
    FunctionSpace::Own(Rc::new(ConfigSpace::new(
        &layout,
        &bars,
        Some(NicFunction::msix_layout()),
    )))
}

/// A NIC with a PF and a second function, both started, their rings set up in memory:
/// function `f`'s rings at `0x10000 * (f + 1)` (TX) and `+ 0x8000` (RX), 8 descriptors each,
/// buffers of 2 KiB from `0x100000 * (f + 1)`.
struct Rig {
    world: World,
    nic: Rc<Nic<World>>,
    functions: Vec<Rc<NicFunction>>,
    tasks: Vec<Pin<Box<dyn Future<Output = ()>>>>,
    tx_tail: Vec<u64>,
}

fn tx_ring(f: usize) -> u64 {
    0x10000 * (f as u64 + 1)
}
fn rx_ring(f: usize) -> u64 {
    tx_ring(f) + 0x8000
}
fn buffer(f: usize, rx: bool, i: u64) -> u64 {
    0x100000 * (f as u64 + 1) + u64::from(rx) * 0x80000 + (i % 8) * 0x800
}

fn write_reg(f: &NicFunction, offset: u64, value: u64) {
    f.mmio_write(0, offset, &value.to_le_bytes())
        .expect("register write");
}

fn read_reg(f: &NicFunction, offset: u64) -> u64 {
    let mut b = [0u8; 8];
    f.mmio_read(0, offset, &mut b).expect("register read");
    u64::from_le_bytes(b)
}

fn rig(posted: u64) -> Rig {
    let world = World::default();
    let nic = Rc::new(Nic::<World>::new(NicConfig {
        mtu: 1500,
        timing: TIMING,
    }));
    let functions = vec![nic.add_function(PF, pci()), nic.add_function(VF, pci())];
    let mut tasks: Vec<Pin<Box<dyn Future<Output = ()>>>> =
        vec![Box::pin(nic.clone().run(world.clone()))];
    nic.start_function(1, world.clone());
    for (i, f) in functions.iter().enumerate() {
        let q = queue::base(0);
        write_reg(f, q + queue::TX_BASE, tx_ring(i));
        write_reg(f, q + queue::TX_SIZE, 8);
        write_reg(f, q + queue::RX_BASE, rx_ring(i));
        write_reg(f, q + queue::RX_SIZE, 8);
        for n in 0..posted {
            let d = RxDescriptor {
                buffer: BusAddr(buffer(i, true, n)),
                len: 2048,
                status: 0,
            };
            world
                .memory
                .borrow_mut()
                .write(rx_ring(i) + n * 16, &d.to_bytes());
        }
        write_reg(f, q + queue::RX_TAIL, posted);
    }
    world.settle(&mut tasks);
    Rig {
        world,
        nic,
        functions,
        tasks,
        tx_tail: vec![0, 0],
    }
}

impl Rig {
    /// Function `f` sends `frame` (or a descriptor of `len` bytes when given).
    fn send(&mut self, f: usize, frame: &[u8], len: Option<u32>) -> u64 {
        let i = self.tx_tail[f];
        let addr = buffer(f, false, i);
        self.world.memory.borrow_mut().write(addr, frame);
        let d = TxDescriptor {
            buffer: BusAddr(addr),
            len: len.unwrap_or(frame.len() as u32),
            status: 0,
        };
        self.world
            .memory
            .borrow_mut()
            .write(tx_ring(f) + (i % 8) * 16, &d.to_bytes());
        self.tx_tail[f] = i + 1;
        write_reg(&self.functions[f], queue::base(0) + queue::TX_TAIL, i + 1);
        self.world.settle(&mut self.tasks);
        i
    }

    fn tx_status(&self, f: usize, i: u64) -> Option<Status> {
        let mut b = [0u8; 2];
        self.world
            .memory
            .borrow()
            .read(tx_ring(f) + (i % 8) * 16 + STATUS_OFFSET, &mut b);
        Status::from_code(u16::from_le_bytes(b))
    }

    /// Function `f`'s received descriptor `i` and its frame.
    fn received(&self, f: usize, i: u64) -> (RxDescriptor, Vec<u8>) {
        let mut d = [0u8; 16];
        self.world
            .memory
            .borrow()
            .read(rx_ring(f) + (i % 8) * 16, &mut d);
        let d = RxDescriptor::from_bytes(&d);
        let mut frame = vec![0u8; d.len as usize];
        self.world.memory.borrow().read(d.buffer.get(), &mut frame);
        (d, frame)
    }
}

fn frame(dst: MacAddr, src: MacAddr, payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7 + 3) as u8).collect();
    FrameHeader {
        dst,
        src,
        ethertype: 0x88b5,
    }
    .frame(&payload)
}

#[test]
fn a_frame_to_the_other_function_crosses_the_eswitch_and_never_the_wire() {
    let mut r = rig(4);
    let f = frame(VF, PF, 1000);
    let i = r.send(0, &f, None);
    assert_eq!(r.tx_status(0, i), Some(Status::Ok));
    let (d, got) = r.received(1, 0);
    assert_eq!(d.status, Status::Ok.code());
    assert_eq!(got, f, "byte-identical");
    assert_eq!(read_reg(&r.functions[0], reg::WIRE_TX_FRAMES), 0);
    assert_eq!(r.nic.port().counters().eswitch, 1);
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 1);
    assert_eq!(read_reg(&r.functions[0], reg::TX_FRAMES), 1);
    assert_eq!(
        read_reg(&r.functions[0], queue::base(0) + queue::TX_HEAD),
        1
    );
}

#[test]
fn a_frame_to_a_foreign_address_goes_out_of_the_port_only() {
    let mut r = rig(4);
    r.send(1, &frame(FAR, VF, 64), None);
    assert_eq!(read_reg(&r.functions[0], reg::WIRE_TX_FRAMES), 1);
    assert_eq!(read_reg(&r.functions[0], reg::RX_FRAMES), 0);
}

#[test]
fn a_broadcast_reaches_the_other_function_and_the_wire() {
    let mut r = rig(4);
    r.send(0, &frame(MacAddr::BROADCAST, PF, 64), None);
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 1);
    assert_eq!(
        read_reg(&r.functions[0], reg::RX_FRAMES),
        0,
        "not back to the sender"
    );
    assert_eq!(read_reg(&r.functions[0], reg::WIRE_TX_FRAMES), 1);
}

#[test]
fn invalid_transmit_descriptors_are_written_back_with_their_status() {
    let mut r = rig(4);
    let f = frame(VF, PF, 100);
    let zero = r.send(0, &f, Some(0));
    let short = r.send(0, &f, Some(10));
    let long = r.send(0, &f, Some(1515));
    assert_eq!(r.tx_status(0, zero), Some(Status::ZeroLength));
    assert_eq!(r.tx_status(0, short), Some(Status::TooShort));
    assert_eq!(r.tx_status(0, long), Some(Status::TooLong));
    // A buffer the NIC cannot read.
    let i = r.tx_tail[0];
    let d = TxDescriptor {
        buffer: BusAddr(MEMORY_END),
        len: 100,
        status: 0,
    };
    r.world
        .memory
        .borrow_mut()
        .write(tx_ring(0) + (i % 8) * 16, &d.to_bytes());
    r.tx_tail[0] = i + 1;
    write_reg(&r.functions[0], queue::base(0) + queue::TX_TAIL, i + 1);
    r.world.settle(&mut r.tasks);
    assert_eq!(r.tx_status(0, i), Some(Status::DmaFailed));
    assert_eq!(read_reg(&r.functions[0], reg::TX_FRAMES), 0);
    assert_eq!(
        read_reg(&r.functions[0], queue::base(0) + queue::TX_HEAD),
        4
    );
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 0);
}

#[test]
fn frames_beyond_the_posted_buffers_are_dropped_and_counted() {
    let mut r = rig(2);
    for n in 0..5 {
        r.send(0, &frame(VF, PF, 100 + n), None);
    }
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 2);
    assert_eq!(read_reg(&r.functions[1], reg::RX_NO_BUFFER), 3);
    assert_eq!(r.received(1, 1).1.len(), HEADER_BYTES + 101, "in order");
}

#[test]
fn a_posted_buffer_smaller_than_the_frame_is_written_back_as_too_small() {
    let mut r = rig(0);
    let d = RxDescriptor {
        buffer: BusAddr(buffer(1, true, 0)),
        len: 64,
        status: 0,
    };
    r.world.memory.borrow_mut().write(rx_ring(1), &d.to_bytes());
    write_reg(&r.functions[1], queue::base(0) + queue::RX_TAIL, 1);
    r.send(0, &frame(VF, PF, 100), None);
    let (d, _) = r.received(1, 0);
    assert_eq!(
        (Status::from_code(d.status), d.len),
        (Some(Status::BufferTooSmall), 0)
    );
}

#[test]
fn a_misaligned_ring_is_refused_with_an_error_the_driver_reads() {
    let r = rig(0);
    let f = &r.functions[0];
    let q = queue::base(1);
    write_reg(f, q + queue::RX_BASE, 0x2000 + 64);
    write_reg(f, q + queue::RX_SIZE, 8);
    assert_eq!(
        RingError::from_code(read_reg(f, q + queue::ERROR)),
        Some(RingError::Misaligned)
    );
}

#[test]
fn frames_from_the_wire_reach_the_function_they_are_addressed_to() {
    let mut r = rig(4);
    let f = frame(VF, FAR, 300);
    r.nic.port().inbound().push(
        r.world.now(),
        port::Arrival {
            frame: f.clone(),
            delivery: port::Delivery::Wire,
        },
    );
    r.nic.port().inbound().push(
        r.world.now(),
        port::Arrival {
            frame: frame(FAR, FAR, 10),
            delivery: port::Delivery::Wire,
        },
    );
    r.world.settle(&mut r.tasks);
    assert_eq!(r.received(1, 0).1, f);
    let c = r.nic.port().counters();
    assert_eq!((c.wire_rx, c.filtered), (2, 1));
    assert_eq!(read_reg(&r.functions[0], reg::RX_FRAMES), 0);
}

#[test]
fn a_received_frame_raises_the_queue_pairs_msix_vector_when_enabled() {
    use smartio_platform::pci::{cap, msix};
    use smartio_platform::ConfigHandler;
    let mut r = rig(4);
    let vf = r.functions[1].clone();
    vf.pci
        .with(|c| {
            let at = c.capability(cap::MSIX).expect("MSI-X capability");
            c.config_write(at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        })
        .expect("its own configuration space");
    let message = 0x3000_0000u64;
    let entry = spec::MSIX_TABLE; // vector 0 = queue pair 0
    vf.mmio_write(0, entry, &(message as u32).to_le_bytes())
        .expect("address");
    vf.mmio_write(0, entry + 8, &0xabcdu32.to_le_bytes())
        .expect("data");
    vf.mmio_write(0, entry + 12, &0u32.to_le_bytes())
        .expect("unmask");
    r.send(0, &frame(VF, PF, 64), None);
    let read_word = |r: &Rig| {
        let mut b = [0u8; 4];
        r.world.memory.borrow().read(message, &mut b);
        u32::from_le_bytes(b)
    };
    assert_eq!(read_word(&r), 0, "RX interrupts are off");
    write_reg(&vf, queue::base(0) + queue::IRQ, spec::irq::RX);
    r.send(0, &frame(VF, PF, 64), None);
    assert_eq!(read_word(&r), 0xabcd, "the vector's message was written");
}

#[test]
fn a_transmit_ring_set_up_again_starts_over_at_descriptor_zero() {
    let mut r = rig(8);
    r.send(0, &frame(VF, PF, 100), None);
    r.send(0, &frame(VF, PF, 101), None);
    let pf = r.functions[0].clone();
    write_reg(&pf, queue::base(0) + queue::TX_SIZE, 0);
    write_reg(&pf, queue::base(0) + queue::TX_SIZE, 8);
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_HEAD), 0);
    r.tx_tail[0] = 0;
    let f = frame(VF, PF, 300);
    let i = r.send(0, &f, None);
    assert_eq!((i, r.tx_status(0, 0)), (0, Some(Status::Ok)));
    assert_eq!(r.received(1, 2).1, f, "the third frame the VF got");
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_HEAD), 1);
}
