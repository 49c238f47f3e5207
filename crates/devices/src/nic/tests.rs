//! The NIC's data path on a stand-in engine: functions whose DMA ports reach one flat memory,
//! a clock that sleeps by advancing, and a tiny executor that polls every task until none
//! can progress. Enough to check what reaches memory and what the counters say; timing is
//! checked on the timed engine by the driver's tests.

use super::spec::{queue, reg, RingError, RxDescriptor, Status, TxDescriptor, STATUS_OFFSET};
use super::*;
use crate::config::{ConfigSpace, FunctionSpace};
use crate::ethernet::{FrameHeader, HEADER_BYTES};
use crate::kinds::layout_for;
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
    /// Every DMA access the NIC started, in the order started.
    log: Rc<RefCell<Vec<Dma>>>,
    /// Accesses to addresses in this range wait until the test lets them go (the range is
    /// taken away and the world settled again).
    held: Rc<Cell<Option<(u64, u64)>>>,
    /// Writes (not reads) to addresses in this range wait the same way.
    held_writes: Rc<Cell<Option<(u64, u64)>>>,
}

/// A DMA access: a read or a write of so many bytes at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dma {
    Read(u64, usize),
    Write(u64, usize),
}

impl Dma {
    fn addr(&self) -> u64 {
        match *self {
            Dma::Read(a, _) | Dma::Write(a, _) => a,
        }
    }
}

impl World {
    /// Waits while accesses at `addr` (a write when `write`) are held (the settling loop
    /// polls it again).
    fn until_let_go(&self, addr: u64, write: bool) -> impl Future<Output = ()> {
        let (held, held_writes) = (self.held.clone(), self.held_writes.clone());
        std::future::poll_fn(move |_| {
            let holds =
                |range: Option<(u64, u64)>| range.is_some_and(|(s, e)| (s..e).contains(&addr));
            if holds(held.get()) || (write && holds(held_writes.get())) {
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(())
            }
        })
    }

    /// The accesses started in `[start, end)`, in order.
    fn accesses_in(&self, start: u64, end: u64) -> Vec<Dma> {
        let log = self.log.borrow();
        log.iter()
            .filter(|a| (start..end).contains(&a.addr()))
            .copied()
            .collect()
    }
}

impl Port for World {
    fn read(&self, addr: BusAddr, buf: &mut [u8]) -> impl Future<Output = Result<(), AccessError>> {
        self.log.borrow_mut().push(Dma::Read(addr.get(), buf.len()));
        let world = self.clone();
        async move {
            world.until_let_go(addr.get(), false).await;
            if addr.get() + buf.len() as u64 <= MEMORY_END {
                world.memory.borrow().read(addr.get(), buf);
                Ok(())
            } else {
                Err(AccessError::UnsupportedRequest {
                    host: "test".into(),
                    addr,
                })
            }
        }
    }

    fn write(&self, addr: BusAddr, data: &[u8]) -> impl Future<Output = Result<(), AccessError>> {
        self.log
            .borrow_mut()
            .push(Dma::Write(addr.get(), data.len()));
        let world = self.clone();
        async move {
            world.until_let_go(addr.get(), true).await;
            if addr.get() + data.len() as u64 <= MEMORY_END {
                world.memory.borrow_mut().write(addr.get(), data);
                Ok(())
            } else {
                Err(AccessError::UnsupportedRequest {
                    host: "test".into(),
                    addr,
                })
            }
        }
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
    let bars = crate::testing::assigned_bars(&layout, |_| 1 << 40);
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
        let i = self.post(f, frame, len);
        self.doorbell(f);
        i
    }

    /// Function `f` writes `frame` and its descriptor (of `len` bytes when given) into its
    /// transmit ring without telling the NIC yet; the descriptor's index.
    fn post(&mut self, f: usize, frame: &[u8], len: Option<u32>) -> u64 {
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
        i
    }

    /// Function `f` tells the NIC of every descriptor posted (writes `TX_TAIL`), then the
    /// world settles.
    fn doorbell(&mut self, f: usize) {
        let tail = self.tx_tail[f];
        write_reg(&self.functions[f], queue::base(0) + queue::TX_TAIL, tail);
        self.world.settle(&mut self.tasks);
    }

    /// The PF posts `count` frames for the VF and rings its doorbell while reads of its
    /// transmit buffers are held (the NIC starts reading and waits); the held range.
    fn post_while_reading(&mut self, count: usize) -> (u64, u64) {
        let (start, end) = tx_buffers(0);
        self.world.held.set(Some((start, end)));
        for n in 0..count {
            self.post(0, &frame(VF, PF, 100 + n), None);
        }
        self.doorbell(0);
        (start, end)
    }

    /// The PF sends a frame to the VF while writes of the VF's receive buffers are held (the
    /// NIC starts writing the frame and waits).
    fn send_while_receiving(&mut self) {
        let (start, end) = rx_buffers(1);
        self.world.held.set(Some((start, end)));
        self.send(0, &frame(VF, PF, 100), None);
    }

    /// Lets every held access go and settles.
    fn let_go(&mut self) {
        self.world.held.set(None);
        self.world.held_writes.set(None);
        self.world.settle(&mut self.tasks);
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

/// Turns on MSI-X for function `f` and points its vector 0 (queue pair 0's) at `message`
/// with `data`, unmasked.
fn enable_vector0(f: &NicFunction, message: u64, data: u32) {
    use smartio_platform::pci::{cap, msix};
    use smartio_platform::ConfigHandler;
    f.pci
        .with(|c| {
            let at = c.capability(cap::MSIX).expect("MSI-X capability");
            c.config_write(at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        })
        .expect("its own configuration space");
    let entry = spec::MSIX_TABLE;
    f.mmio_write(0, entry, &(message as u32).to_le_bytes())
        .expect("address");
    f.mmio_write(0, entry + 8, &data.to_le_bytes())
        .expect("data");
    f.mmio_write(0, entry + 12, &0u32.to_le_bytes())
        .expect("unmask");
}

/// Function `f` sets a ring up again in place: its size register (`size_reg`) to 0, then
/// to 8 again.
fn set_up_in_place(f: &NicFunction, size_reg: u64) {
    write_reg(f, size_reg, 0);
    write_reg(f, size_reg, 8);
}

/// Writes `count` receive descriptors at `ring`, descriptor `n`'s buffer at `buffer(n)`.
fn write_rx_descriptors(r: &Rig, ring: u64, count: u64, buffer: impl Fn(u64) -> u64) {
    for n in 0..count {
        let d = RxDescriptor {
            buffer: BusAddr(buffer(n)),
            len: 2048,
            status: 0,
        };
        r.world
            .memory
            .borrow_mut()
            .write(ring + n * 16, &d.to_bytes());
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
    assert_eq!(read_reg(&r.functions[0], reg::WIRE_RX_FRAMES), 2);
    assert_eq!(read_reg(&r.functions[0], reg::RX_FRAMES), 0);
}

#[test]
fn a_received_frame_raises_the_queue_pairs_msix_vector_when_enabled() {
    let mut r = rig(4);
    let vf = r.functions[1].clone();
    let message = 0x3000_0000u64;
    enable_vector0(&vf, message, 0xabcd);
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
    set_up_in_place(&pf, queue::base(0) + queue::TX_SIZE);
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_HEAD), 0);
    r.tx_tail[0] = 0;
    let f = frame(VF, PF, 300);
    let i = r.send(0, &f, None);
    assert_eq!((i, r.tx_status(0, 0)), (0, Some(Status::Ok)));
    assert_eq!(r.received(1, 2).1, f, "the third frame the VF got");
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_HEAD), 1);
}

/// Function `f`'s transmit buffers (2 KiB each, eight of them).
fn tx_buffers(f: usize) -> (u64, u64) {
    (buffer(f, false, 0), buffer(f, false, 0) + 8 * 0x800)
}

/// Function `f`'s receive buffers.
fn rx_buffers(f: usize) -> (u64, u64) {
    (buffer(f, true, 0), buffer(f, true, 0) + 8 * 0x800)
}

#[test]
fn ready_transmit_descriptors_are_fetched_in_batches_with_one_read_each() {
    let mut r = rig(8);
    let frames: Vec<Vec<u8>> = (0..3).map(|n| frame(VF, PF, 100 + n)).collect();
    for f in &frames {
        r.post(0, f, None);
    }
    r.doorbell(0);
    // Three descriptors, one read of all three; no read of nothing.
    assert_eq!(
        r.world.accesses_in(tx_ring(0), tx_ring(0) + 8 * 16),
        [
            Dma::Read(tx_ring(0), 48),
            Dma::Write(tx_ring(0) + STATUS_OFFSET, 2),
            Dma::Write(tx_ring(0) + 16 + STATUS_OFFSET, 2),
            Dma::Write(tx_ring(0) + 32 + STATUS_OFFSET, 2),
        ]
    );
    for (n, f) in frames.iter().enumerate() {
        assert_eq!(r.tx_status(0, n as u64), Some(Status::Ok));
        assert_eq!(&r.received(1, n as u64).1, f, "frame {n}, in order");
    }
    assert_eq!(
        read_reg(&r.functions[0], queue::base(0) + queue::TX_HEAD),
        3
    );
    // Five more: the ring's last five slots, then three across its end (one read each side).
    r.world.log.borrow_mut().clear();
    for n in 0..8 {
        r.post(0, &frame(FAR, PF, 60 + n), None);
    }
    r.doorbell(0);
    let reads: Vec<Dma> = r
        .world
        .accesses_in(tx_ring(0), tx_ring(0) + 8 * 16)
        .into_iter()
        .filter(|a| matches!(a, Dma::Read(..)))
        .collect();
    assert_eq!(
        reads,
        [Dma::Read(tx_ring(0) + 48, 80), Dma::Read(tx_ring(0), 48)]
    );
    assert_eq!(read_reg(&r.functions[0], reg::WIRE_TX_FRAMES), 8);
    assert_eq!(
        read_reg(&r.functions[0], queue::base(0) + queue::TX_HEAD),
        11
    );
}

#[test]
fn at_most_tx_pipeline_frame_buffers_are_read_at_once() {
    let mut r = rig(8);
    let (start, end) = r.post_while_reading(7);
    assert_eq!(
        r.world.accesses_in(start, end).len(),
        TIMING.tx_pipeline,
        "buffer reads started while none has finished"
    );
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 0);
    r.let_go();
    assert_eq!(r.world.accesses_in(start, end).len(), 7);
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 7);
    assert_eq!(r.received(1, 6).1, frame(VF, PF, 106));
}

#[test]
fn a_lowered_transmit_tail_takes_back_the_descriptors_not_yet_sent() {
    let mut r = rig(8);
    r.post_while_reading(6);
    // The driver takes back descriptors 2..6 while the first buffers are being read.
    write_reg(&r.functions[0], queue::base(0) + queue::TX_TAIL, 2);
    r.let_go();
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 2);
    assert_eq!(read_reg(&r.functions[0], reg::TX_FRAMES), 2);
    assert_eq!(
        read_reg(&r.functions[0], queue::base(0) + queue::TX_HEAD),
        2
    );
    for i in 2..6 {
        assert_eq!(
            r.tx_status(0, i),
            None,
            "descriptor {i} is the driver's again"
        );
    }
    // Only the buffers of frames it still sends are read after the tail came down.
    assert_eq!(r.received(1, 1).1, frame(VF, PF, 101));
}

#[test]
fn a_transmit_ring_disabled_while_buffers_are_read_sends_nothing_of_it() {
    let mut r = rig(8);
    r.post_while_reading(3);
    let pf = r.functions[0].clone();
    write_reg(&pf, queue::base(0) + queue::TX_SIZE, 0);
    r.let_go();
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 0);
    assert_eq!(read_reg(&pf, reg::TX_FRAMES), 0);
    for i in 0..3 {
        assert_eq!(
            r.tx_status(0, i),
            None,
            "nothing written back to a disabled ring"
        );
    }
}

#[test]
fn a_transmit_ring_moved_while_buffers_are_read_sends_only_the_new_rings_frames() {
    let mut r = rig(8);
    r.post_while_reading(6);
    // The driver sets the ring up again elsewhere (an empty ring) while buffers are read.
    let pf = r.functions[0].clone();
    let moved = tx_ring(0) + 0x4000;
    write_reg(&pf, queue::base(0) + queue::TX_SIZE, 0);
    write_reg(&pf, queue::base(0) + queue::TX_BASE, moved);
    write_reg(&pf, queue::base(0) + queue::TX_SIZE, 8);
    r.let_go();
    // None of the old ring's descriptors is sent or written back.
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 0);
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_HEAD), 0);
    for i in 0..6 {
        assert_eq!(r.tx_status(0, i), None, "descriptor {i} of the old ring");
    }
}

#[test]
fn a_sent_frame_raises_the_queue_pairs_vector_only_with_transmit_interrupts_on() {
    let mut r = rig(8);
    let pf = r.functions[0].clone();
    let message = 0x3000_0000u64;
    enable_vector0(&pf, message, 0x5150);
    let messages = |r: &Rig| r.world.accesses_in(message, message + 4).len();
    r.send(0, &frame(VF, PF, 64), None);
    assert_eq!(messages(&r), 0, "interrupts off");
    write_reg(&pf, queue::base(0) + queue::IRQ, spec::irq::RX);
    r.send(0, &frame(VF, PF, 64), None);
    assert_eq!(messages(&r), 0, "receive interrupts only");
    write_reg(&pf, queue::base(0) + queue::IRQ, spec::irq::TX);
    r.send(0, &frame(VF, PF, 64), None);
    assert_eq!(messages(&r), 1, "the vector's message for the frame sent");
    let mut b = [0u8; 4];
    r.world.memory.borrow().read(message, &mut b);
    assert_eq!(u32::from_le_bytes(b), 0x5150);
}

#[test]
fn frames_for_the_wire_wait_for_the_transmitter() {
    let mut r = rig(8);
    let t0 = r.world.now();
    let f = frame(FAR, PF, 1500 - HEADER_BYTES);
    for _ in 0..3 {
        r.post(0, &f, None);
    }
    r.doorbell(0);
    // The first starts after its per-frame cost; each next one when the one before has
    // left (the line time of a full frame is longer than the per-frame cost).
    let line = port::line_time(f.len(), TIMING.line_rate_bps);
    assert!(line > TIMING.per_frame);
    assert_eq!(r.world.now(), t0 + TIMING.per_frame + line + line);
    assert_eq!(read_reg(&r.functions[0], reg::WIRE_TX_FRAMES), 3);
}

#[test]
fn a_frame_exactly_as_long_as_the_posted_buffer_is_taken() {
    let mut r = rig(0);
    let f = frame(VF, PF, 100);
    let d = RxDescriptor {
        buffer: BusAddr(buffer(1, true, 0)),
        len: f.len() as u32,
        status: 0,
    };
    r.world.memory.borrow_mut().write(rx_ring(1), &d.to_bytes());
    write_reg(&r.functions[1], queue::base(0) + queue::RX_TAIL, 1);
    r.send(0, &f, None);
    let (d, got) = r.received(1, 0);
    assert_eq!(Status::from_code(d.status), Some(Status::Ok));
    assert_eq!(got, f);
}

#[test]
fn posted_receive_descriptors_are_fetched_in_batches_with_one_read_each() {
    let mut r = rig(8);
    for n in 0..3 {
        r.send(0, &frame(VF, PF, 100 + n), None);
    }
    let reads: Vec<Dma> = r
        .world
        .accesses_in(rx_ring(1), rx_ring(1) + 8 * 16)
        .into_iter()
        .filter(|a| matches!(a, Dma::Read(..)))
        .collect();
    assert_eq!(
        reads,
        [Dma::Read(rx_ring(1), 8 * 16)],
        "one read for all eight"
    );
    for n in 0..3u64 {
        let (d, got) = r.received(1, n);
        assert_eq!(d.buffer, BusAddr(buffer(1, true, n)));
        assert_eq!(got, frame(VF, PF, 100 + n as usize));
    }
}

#[test]
fn a_receive_ring_set_up_again_takes_its_new_descriptors() {
    let mut r = rig(8);
    r.send(0, &frame(VF, PF, 100), None);
    // The VF's ring again, at the same place, with buffers elsewhere.
    let vf = r.functions[1].clone();
    let q = queue::base(0);
    write_reg(&vf, q + queue::RX_SIZE, 0);
    let elsewhere = |n: u64| 0x700000 + n * 0x800;
    write_rx_descriptors(&r, rx_ring(1), 4, elsewhere);
    write_reg(&vf, q + queue::RX_SIZE, 8);
    write_reg(&vf, q + queue::RX_TAIL, 4);
    let f = frame(VF, PF, 200);
    r.send(0, &f, None);
    let (d, got) = r.received(1, 0);
    assert_eq!(d.buffer, BusAddr(elsewhere(0)));
    assert_eq!(got, f);
    assert_eq!(read_reg(&vf, q + queue::RX_HEAD), 1);
}

#[test]
fn a_receive_ring_moved_while_a_frame_is_written_gets_no_descriptor_back() {
    let mut r = rig(8);
    r.send_while_receiving();
    let vf = r.functions[1].clone();
    let q = queue::base(0);
    let moved = rx_ring(1) + 0x4000;
    write_reg(&vf, q + queue::RX_SIZE, 0);
    write_reg(&vf, q + queue::RX_BASE, moved);
    write_reg(&vf, q + queue::RX_SIZE, 8);
    r.world.log.borrow_mut().clear();
    r.let_go();
    assert_eq!(
        r.world.accesses_in(rx_ring(1), rx_ring(1) + 8 * 16),
        [],
        "nothing written back to the old ring"
    );
    assert_eq!(
        r.world.accesses_in(moved, moved + 8 * 16),
        [],
        "nor the new"
    );
    assert_eq!(read_reg(&vf, q + queue::RX_HEAD), 0);
    assert_eq!(read_reg(&vf, reg::RX_FRAMES), 0);
}

#[test]
fn a_receive_ring_disabled_while_a_frame_is_written_gets_no_descriptor_back() {
    let mut r = rig(8);
    r.send_while_receiving();
    let vf = r.functions[1].clone();
    write_reg(&vf, queue::base(0) + queue::RX_SIZE, 0);
    r.world.log.borrow_mut().clear();
    r.let_go();
    assert_eq!(r.world.accesses_in(rx_ring(1), rx_ring(1) + 8 * 16), []);
    assert_eq!(read_reg(&vf, reg::RX_FRAMES), 0);
}

#[test]
fn a_receive_ring_set_up_again_in_place_while_a_frame_is_written_gets_no_descriptor_back() {
    let mut r = rig(8);
    r.send_while_receiving();
    let vf = r.functions[1].clone();
    let q = queue::base(0);
    set_up_in_place(&vf, q + queue::RX_SIZE);
    r.world.log.borrow_mut().clear();
    r.let_go();
    assert_eq!(r.world.accesses_in(rx_ring(1), rx_ring(1) + 8 * 16), []);
    assert_eq!(read_reg(&vf, q + queue::RX_HEAD), 0);
    assert_eq!(read_reg(&vf, q + queue::RX_TAIL), 0);
    assert_eq!(read_reg(&vf, reg::RX_FRAMES), 0);
}

#[test]
fn a_transmit_ring_set_up_again_in_place_while_buffers_are_read_keeps_its_new_descriptors() {
    let mut r = rig(8);
    r.post_while_reading(4);
    // Set up again in place, and two new frames posted, while the old buffers are read.
    let pf = r.functions[0].clone();
    set_up_in_place(&pf, queue::base(0) + queue::TX_SIZE);
    r.tx_tail[0] = 0;
    let new: Vec<Vec<u8>> = (0..2).map(|n| frame(VF, PF, 300 + n)).collect();
    for f in &new {
        r.post(0, f, None);
    }
    r.world.held.set(None);
    r.doorbell(0);
    // Both new frames go out, in order, and none of the old ring's.
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_HEAD), 2);
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 2);
    assert_eq!(r.received(1, 0).1, new[0]);
    assert_eq!(r.received(1, 1).1, new[1]);
    assert_eq!(r.tx_status(0, 0), Some(Status::Ok));
    assert_eq!(r.tx_status(0, 1), Some(Status::Ok));
}

#[test]
fn a_transmit_ring_set_up_again_while_a_status_is_written_back_keeps_its_head_at_zero() {
    let mut r = rig(8);
    let status = tx_ring(0) + STATUS_OFFSET;
    r.world.held_writes.set(Some((status, status + 2)));
    r.send(0, &frame(VF, PF, 100), None);
    let pf = r.functions[0].clone();
    set_up_in_place(&pf, queue::base(0) + queue::TX_SIZE);
    r.let_go();
    assert_eq!(
        read_reg(&pf, queue::base(0) + queue::TX_HEAD),
        0,
        "the new setup's"
    );
    assert_eq!(read_reg(&pf, queue::base(0) + queue::TX_TAIL), 0);
}

#[test]
fn a_receive_ring_set_up_again_while_a_descriptor_is_written_back_keeps_its_head_at_zero() {
    let mut r = rig(8);
    r.world.held_writes.set(Some((rx_ring(1), rx_ring(1) + 16)));
    r.send(0, &frame(VF, PF, 100), None);
    let vf = r.functions[1].clone();
    let q = queue::base(0);
    set_up_in_place(&vf, q + queue::RX_SIZE);
    r.let_go();
    assert_eq!(read_reg(&vf, q + queue::RX_HEAD), 0, "the new setup's");
    assert_eq!(read_reg(&vf, q + queue::RX_TAIL), 0);
}

#[test]
fn a_receive_ring_moved_while_enabled_takes_its_descriptors_from_the_new_place() {
    let mut r = rig(8);
    r.send_while_receiving();
    // While the first frame is written, the driver points the enabled ring elsewhere.
    let vf = r.functions[1].clone();
    let q = queue::base(0);
    let moved = rx_ring(1) + 0x4000;
    let elsewhere = |n: u64| 0x700000 + n * 0x800;
    write_rx_descriptors(&r, moved, 8, elsewhere);
    write_reg(&vf, q + queue::RX_BASE, moved);
    r.let_go();
    let f = frame(VF, PF, 200);
    r.send(0, &f, None);
    let mut got = vec![0u8; f.len()];
    r.world.memory.borrow().read(elsewhere(0), &mut got);
    assert_eq!(got, f, "in the new ring's first buffer");
}

#[test]
fn a_lowered_transmit_tail_reads_no_buffer_of_the_descriptors_taken_back() {
    let mut r = rig(8);
    let (start, end) = r.post_while_reading(6);
    // Four buffers are being read and two descriptors wait; the driver takes those two back.
    write_reg(&r.functions[0], queue::base(0) + queue::TX_TAIL, 4);
    r.let_go();
    assert_eq!(r.world.accesses_in(start, end).len(), 4, "buffers read");
    assert_eq!(read_reg(&r.functions[1], reg::RX_FRAMES), 4);
    assert_eq!(
        read_reg(&r.functions[0], queue::base(0) + queue::TX_HEAD),
        4
    );
}

#[test]
fn receive_descriptors_fetched_ahead_above_a_lowered_tail_are_fetched_again() {
    let mut r = rig(8);
    r.send(0, &frame(VF, PF, 100), None);
    // Descriptors 1..8 were fetched ahead. The driver takes 2..8 back, puts a buffer
    // elsewhere in descriptor 2, and gives 2..4 again.
    let vf = r.functions[1].clone();
    let q = queue::base(0);
    write_reg(&vf, q + queue::RX_TAIL, 2);
    let elsewhere = 0x700000;
    let d = RxDescriptor {
        buffer: BusAddr(elsewhere),
        len: 2048,
        status: 0,
    };
    r.world
        .memory
        .borrow_mut()
        .write(rx_ring(1) + 2 * 16, &d.to_bytes());
    write_reg(&vf, q + queue::RX_TAIL, 4);
    r.send(0, &frame(VF, PF, 101), None);
    let f = frame(VF, PF, 102);
    r.send(0, &f, None);
    let (d, got) = r.received(1, 2);
    assert_eq!(
        d.buffer,
        BusAddr(elsewhere),
        "the descriptor as given again"
    );
    assert_eq!(got, f);
}
