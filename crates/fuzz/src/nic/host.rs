//! The fuzzing hosts: carry out [`Op`]s on the two NICs — registers written and read straight
//! at a function's BAR handler (to see its exact [`CompleterError`] and `ERROR` code at once),
//! descriptors and frames written into each host's RAM — and after each operation let the
//! simulation settle and check what the NICs did: every transmit descriptor consumed has the
//! status its fault predicts, every receive descriptor consumed holds the next frame sent to
//! that NIC byte for byte (or the status saying why not), and the counters add up.

use super::ops::{Base, Buffer, Capacity, Dst, Len, Op, Rx, Tail, Tx, BUFFERS};
use smartio_devices::ethernet::{MacAddr, HEADER_BYTES};
use smartio_devices::nic::spec::{
    self, queue, reg, RingError, RxDescriptor, TxDescriptor, MSIX_PBA, MSIX_TABLE, RING_ALIGN,
    RING_ENTRIES,
};
use smartio_devices::nic::{Nic, NicFunction};
use smartio_fabric::{Access, EndpointId, HostId, Requester, Target};
use smartio_machine::{Agent, Machine};
use smartio_platform::{BarHandler, BusAddr, Clock, CompleterError, PhysAddr, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

/// Room per ring in the harness's area (4096 descriptors).
pub const SLOT: u64 = 0x1_0000;
/// Transmit buffers (after 16 ring slots).
pub const TX_BUFFERS: u64 = 0x10_0000;
/// Receive buffers.
pub const RX_BUFFERS: u64 = 0x14_0000;
/// Bytes per buffer.
pub const BUFFER: u64 = 0x4000;
/// The whole area.
pub const REGION: u64 = 0x18_0000;
/// Bytes either side of the area that nothing may write.
pub const GUARD: u64 = 0x1_0000;
/// A bus address no target claims.
pub const NOWHERE: u64 = 0x4000_0000_0000;

const STEP: SimDuration = SimDuration::from_us(1);
/// Steps the simulation gets to drain after one operation (20 ms of virtual time).
const SETTLE_STEPS: u32 = 20_000;
/// How long the next operation follows a doorbell without a drain.
const NO_DRAIN: SimDuration = SimDuration::from_ns(300);
/// Quiet steps in a row that count as settled.
const QUIET: u32 = 3;

/// One NIC and where its host keeps things.
pub struct Side {
    /// Its fabric endpoint.
    pub endpoint: EndpointId,
    /// Its host.
    pub host: HostId,
    /// The model.
    pub nic: Rc<Nic<Agent>>,
    /// Its physical function.
    pub function: Rc<NicFunction>,
    /// The harness's area of its host's RAM.
    pub area: u64,
    /// The end of its host's RAM.
    pub ram_end: u64,
}

/// Where a DMA of the NIC lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Where {
    /// Wholly in its host's RAM at this physical address.
    Ram(u64),
    /// Nowhere: the access fails.
    Unmapped,
    /// Somewhere else, or partly: the outcome is not predicted.
    Other,
}

/// A ring's registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Ring {
    pub(super) base: u64,
    pub(super) size: u64,
    pub(super) head: u64,
    pub(super) tail: u64,
}

impl Ring {
    pub(super) fn descriptor(&self, index: u64) -> u64 {
        self.base
            .wrapping_add((index % self.size.max(1)) * spec::DESCRIPTOR_BYTES)
    }
}

/// Counters of one NIC (its function's and its port's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Counters {
    pub(super) tx_frames: u64,
    pub(super) rx_frames: u64,
    pub(super) rx_no_buffer: u64,
    pub(super) wire_tx: u64,
    pub(super) wire_rx: u64,
    pub(super) overflow: u64,
    pub(super) filtered: u64,
}

/// The receive ring a NIC fills (its queue pair) and the descriptors posted on it when a drain
/// began (`None`: not in RAM).
pub(super) type Posted = Option<(usize, Vec<Option<RxDescriptor>>)>;

/// What the runs did, for the outcome.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Transmit write-backs by status code.
    pub tx: [u32; 8],
    /// Receive write-backs by status code.
    pub rx: [u32; 8],
    /// Ring errors seen by code.
    pub ring_errors: [u32; 8],
    /// Register accesses, and those refused.
    pub registers: (u32, u32),
    /// Settles where receive matching was skipped (a ring changed, a frame of unknown bytes).
    pub unmatched: u32,
}

/// The hosts of one run.
pub struct Harness {
    pub(super) machine: Machine,
    pub(super) clock: Agent,
    pub(super) sides: [Side; 2],
    pub(super) mtu: usize,
    /// What happened.
    pub stats: RefCell<Stats>,
}

fn le(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    for (d, s) in w.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(w)
}

/// The bytes of a frame's payload from `seed`.
pub(super) fn payload(seed: u8, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| {
            (i.wrapping_add(u32::from(seed) << 8)
                .wrapping_mul(2_654_435_761)
                >> 13) as u8
        })
        .collect()
}

impl Harness {
    /// Hosts driving `sides` (both NICs' ports with MTU `mtu`).
    pub fn new(machine: &Machine, sides: [Side; 2], mtu: usize) -> Self {
        Harness {
            machine: machine.clone(),
            clock: machine.cpu(sides[0].host),
            sides,
            mtu,
            stats: RefCell::new(Stats::default()),
        }
    }

    /// The two NICs.
    pub fn sides(&self) -> &[Side; 2] {
        &self.sides
    }

    pub(super) fn mac(&self, n: usize) -> MacAddr {
        self.sides[n].function.mac()
    }

    pub(super) fn classify(&self, n: usize, addr: u64, len: u64, access: Access) -> Where {
        let s = &self.sides[n];
        let f = self.machine.fabric();
        let Ok(route) = f.route(Requester::Device(s.endpoint), BusAddr(addr), len, access) else {
            return Where::Unmapped;
        };
        match route.target {
            Target::Memory { host, addr } if host == s.host && route.len >= len => {
                Where::Ram(addr.get())
            }
            _ => Where::Other,
        }
    }

    /// `addr` if the NIC does not reach host RAM there, else an unclaimed address.
    fn not_ram(&self, n: usize, addr: u64) -> u64 {
        match self.classify(n, addr, 1, Access::Read) {
            Where::Unmapped => addr,
            _ => NOWHERE + (addr & 0xffff),
        }
    }

    fn buffer(&self, n: usize, b: Buffer, area: u64) -> u64 {
        let s = &self.sides[n];
        match b {
            Buffer::Area(i, o) => area + u64::from(i % BUFFERS) * BUFFER + u64::from(o),
            Buffer::Unmapped(o) => NOWHERE + u64::from(o),
            Buffer::EndOfRam(back) => s.ram_end - u64::from(back),
            Buffer::Any(v) => self.not_ram(n, v),
        }
    }

    pub(super) fn peek(&self, n: usize, addr: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.machine
            .peek_memory(self.sides[n].host, PhysAddr(addr), &mut b);
        b
    }

    pub(super) fn poke(&self, n: usize, addr: u64, data: &[u8]) {
        self.machine
            .poke_memory(self.sides[n].host, PhysAddr(addr), data);
    }

    /// A register of queue pair `q`, read straight from the model.
    fn reg(&self, n: usize, offset: u64) -> u64 {
        let mut b = [0u8; 8];
        match self.sides[n].function.mmio_read(0, offset, &mut b) {
            Ok(()) => u64::from_le_bytes(b),
            Err(e) => panic!("nic{n}: register {offset:#x} refused a load: {e}"),
        }
    }

    fn ring(&self, n: usize, q: u16, rx: bool) -> Ring {
        let b = queue::base(q);
        let (base, size, tail, head) = if rx {
            (
                queue::RX_BASE,
                queue::RX_SIZE,
                queue::RX_TAIL,
                queue::RX_HEAD,
            )
        } else {
            (
                queue::TX_BASE,
                queue::TX_SIZE,
                queue::TX_TAIL,
                queue::TX_HEAD,
            )
        };
        Ring {
            base: self.reg(n, b + base),
            size: self.reg(n, b + size),
            head: self.reg(n, b + head),
            tail: self.reg(n, b + tail),
        }
    }

    pub(super) fn rings(&self, n: usize, rx: bool) -> Vec<Ring> {
        (0..spec::QUEUE_PAIRS)
            .map(|q| self.ring(n, q, rx))
            .collect()
    }

    pub(super) fn counters(&self, n: usize) -> Counters {
        let f = &self.sides[n].function;
        let p = self.sides[n].nic.port().counters();
        Counters {
            tx_frames: f.tx_frames(),
            rx_frames: f.rx_frames(),
            rx_no_buffer: f.rx_no_buffer(),
            wire_tx: p.wire_tx,
            wire_rx: p.wire_rx,
            overflow: p.overflow,
            filtered: p.filtered,
        }
    }

    /// The outcome the access rules predict for a BAR0 access; `None` in the MSI-X table and
    /// pending-bit array (their rules are the PCI specification's, checked elsewhere).
    fn predict(offset: u64, width: usize, write: bool) -> Option<Result<(), CompleterError>> {
        let table = MSIX_TABLE..MSIX_TABLE + u64::from(spec::QUEUE_PAIRS) * 16;
        if table.contains(&offset) || (MSIX_PBA..MSIX_PBA + 8).contains(&offset) {
            return None;
        }
        let global = offset < reg::END;
        let in_queue = offset
            .checked_sub(queue::FIRST)
            .is_some_and(|rel| rel / queue::STRIDE < u64::from(spec::QUEUE_PAIRS))
            && (offset - queue::FIRST) % queue::STRIDE < queue::END;
        if !global && !in_queue {
            return Some(Err(CompleterError::OutOfRange));
        }
        if write && global {
            return Some(Err(CompleterError::ReadOnly));
        }
        if width != 8 || !offset.is_multiple_of(8) {
            return Some(Err(CompleterError::BadWidth(width)));
        }
        let r = if in_queue {
            (offset - queue::FIRST) % queue::STRIDE
        } else {
            0
        };
        if write && [queue::TX_HEAD, queue::RX_HEAD, queue::ERROR].contains(&r) {
            return Some(Err(CompleterError::ReadOnly));
        }
        Some(Ok(()))
    }

    /// The ring error a write of `value` to register `r` of queue pair `q` must record.
    fn ring_error(&self, n: usize, q: u16, r: u64, value: u64) -> Option<RingError> {
        let check_size = |ring: Ring| {
            if value == 0 {
                None
            } else if !ring.base.is_multiple_of(RING_ALIGN) {
                Some(RingError::Misaligned)
            } else if !value.is_power_of_two() || !RING_ENTRIES.contains(&value) {
                Some(RingError::BadSize)
            } else {
                None
            }
        };
        let check_tail = |ring: Ring| {
            if ring.size == 0 {
                Some(RingError::Disabled)
            } else if value < ring.head || value - ring.head > ring.size {
                Some(RingError::BadTail)
            } else {
                None
            }
        };
        match r {
            queue::TX_SIZE => check_size(self.ring(n, q, false)),
            queue::RX_SIZE => check_size(self.ring(n, q, true)),
            queue::TX_TAIL => check_tail(self.ring(n, q, false)),
            queue::RX_TAIL => check_tail(self.ring(n, q, true)),
            _ => None,
        }
    }

    /// A BAR0 write straight at the function: its completion is the one predicted, and a
    /// queue register write leaves `ERROR` as the rules say.
    fn write(&self, n: usize, offset: u64, data: &[u8]) {
        let predicted = Self::predict(offset, data.len(), true);
        let in_queue = matches!(predicted, Some(Ok(()))) && offset >= queue::FIRST;
        let q = (offset.saturating_sub(queue::FIRST) / queue::STRIDE) as u16;
        let r = offset.saturating_sub(queue::FIRST) % queue::STRIDE;
        let error_reg = queue::base(q) + queue::ERROR;
        let (before, expected) = if in_queue {
            (self.reg(n, error_reg), self.ring_error(n, q, r, le(data)))
        } else {
            (0, None)
        };
        let got = self.sides[n].function.mmio_write(0, offset, data);
        let mut stats = self.stats.borrow_mut();
        stats.registers.0 += 1;
        if got.is_err() {
            stats.registers.1 += 1;
        }
        if let Some(p) = predicted {
            assert_eq!(
                got, p,
                "nic{n}: a {}-byte write at BAR0 {offset:#x} completed {got:?}, the rules say {p:?}",
                data.len()
            );
        }
        if in_queue {
            let after = self.reg(n, error_reg);
            let want = expected.map_or(before, RingError::code);
            assert_eq!(
                after,
                want,
                "nic{n} queue {q}: after writing {:#x} to register {r:#x} ERROR is {after}, \
                 expected {want} ({expected:?})",
                le(data)
            );
            if let Some(e) = expected {
                stats.ring_errors[e.code() as usize] += 1;
            }
        }
    }

    fn queue_write(&self, n: usize, q: u16, r: u64, value: u64) {
        self.write(n, queue::base(q) + r, &value.to_le_bytes());
    }

    /// Where the harness writes descriptor `k` from `TAIL` of a ring (the ring's own place
    /// if it lies in the area, else the queue's slot), or `None` when the ring is full.
    fn descriptor_at(&self, n: usize, ring: Ring, slot: u64, k: u64) -> Option<u64> {
        if ring.size == 0 {
            return (k < RING_ENTRIES.end() / 2).then_some(slot + k * spec::DESCRIPTOR_BYTES);
        }
        if ring.tail - ring.head + k >= ring.size {
            return None;
        }
        let at = ring.descriptor(ring.tail + k);
        let area = self.sides[n].area;
        (at >= area && at.saturating_add(spec::DESCRIPTOR_BYTES) <= area + REGION).then_some(at)
    }

    fn slot(&self, n: usize, q: u16, rx: bool) -> u64 {
        self.sides[n].area + (u64::from(q) * 2 + u64::from(rx)) * SLOT
    }

    fn write_tx(&self, n: usize, q: u16, skip: u8, descriptors: &[Tx]) {
        let ring = self.ring(n, q, false);
        let slot = self.slot(n, q, false);
        let area = self.sides[n].area;
        for (k, d) in descriptors.iter().enumerate() {
            let Some(at) = self.descriptor_at(n, ring, slot, u64::from(skip) + k as u64) else {
                break;
            };
            let max = spec::max_frame(self.mtu) as u32;
            let len = match d.len {
                Len::Zero => 0,
                Len::Short(l) => u32::from(l),
                Len::Header => HEADER_BYTES as u32,
                Len::Max => max,
                Len::TooLong(x) => max + 1 + u32::from(x),
                Len::Small(x) => HEADER_BYTES as u32 + u32::from(x),
                Len::Any(v) => v,
            };
            let buffer = self.buffer(n, d.buffer, area + TX_BUFFERS);
            if let Buffer::Area(..) = d.buffer {
                let dst = match d.dst {
                    Dst::Peer => self.mac(1 - n),
                    Dst::Own => self.mac(n),
                    Dst::Broadcast => MacAddr::BROADCAST,
                    Dst::Raw(b) => MacAddr(b),
                };
                let mut frame = dst.0.to_vec();
                frame.extend_from_slice(&self.mac(n).0);
                frame.extend_from_slice(&[0x88, d.seed]);
                let room = (area + REGION).saturating_sub(buffer) as usize;
                let body = (len as usize).min(room).saturating_sub(HEADER_BYTES);
                frame.extend(payload(d.seed, body));
                frame.truncate((len as usize).min(room));
                self.poke(n, buffer, &frame);
            }
            let desc = TxDescriptor {
                buffer: BusAddr(buffer),
                len,
                status: 0,
            };
            self.poke(n, at, &desc.to_bytes());
        }
    }

    fn post_rx(&self, n: usize, q: u16, descriptors: &[Rx]) {
        let ring = self.ring(n, q, true);
        let slot = self.slot(n, q, true);
        let area = self.sides[n].area;
        for (k, d) in descriptors.iter().enumerate() {
            let Some(at) = self.descriptor_at(n, ring, slot, k as u64) else {
                break;
            };
            let len = match d.capacity {
                Capacity::Zero => 0,
                Capacity::Max => spec::max_frame(self.mtu) as u32,
                Capacity::Small(x) => u32::from(x),
                Capacity::Any(v) => v,
            };
            let mut buffer = self.buffer(n, d.buffer, area + RX_BUFFERS);
            if let Buffer::Area(..) = d.buffer {
                // A receive buffer in the area must leave room for what it may take.
                let end = area + REGION;
                if buffer + u64::from(len) > end {
                    buffer = NOWHERE;
                }
            }
            let desc = RxDescriptor {
                buffer: BusAddr(buffer),
                len,
                status: 0,
            };
            self.poke(n, at, &desc.to_bytes());
        }
    }

    /// Carries out `op`.
    pub fn apply(&self, op: &Op) {
        match *op {
            Op::Read { nic, offset, width } => {
                let n = usize::from(nic);
                let mut buf = vec![0u8; usize::from(width)];
                let got = self.sides[n].function.mmio_read(0, offset, &mut buf);
                let mut stats = self.stats.borrow_mut();
                stats.registers.0 += 1;
                if got.is_err() {
                    stats.registers.1 += 1;
                }
                if let Some(p) = Self::predict(offset, buf.len(), false) {
                    assert_eq!(
                        got, p,
                        "nic{n}: a {width}-byte read at BAR0 {offset:#x} completed {got:?}, \
                         the rules say {p:?}"
                    );
                }
            }
            Op::Write {
                nic,
                offset,
                width,
                value,
            } => {
                let n = usize::from(nic);
                // A ring base in RAM outside the area would have the NIC write there.
                let r = offset.wrapping_sub(queue::FIRST) % queue::STRIDE;
                let value = if offset >= queue::FIRST
                    && offset < queue::base(spec::QUEUE_PAIRS)
                    && (r == queue::TX_BASE || r == queue::RX_BASE)
                {
                    self.not_ram(n, value)
                } else {
                    value
                };
                let mut data = value.to_le_bytes().to_vec();
                data.resize(usize::from(width), 0xa5);
                self.write(n, offset, &data);
            }
            Op::SetRing {
                nic,
                queue: q,
                rx,
                base,
                size,
            } => {
                let n = usize::from(nic);
                let slot = self.slot(n, q, rx);
                let base = match base {
                    Base::Slot => slot,
                    Base::Misaligned(b) => slot + u64::from(b),
                    Base::Unmapped => NOWHERE,
                    Base::EndOfRam(k) => self.sides[n].ram_end - u64::from(k) * RING_ALIGN,
                    Base::Any(v) => self.not_ram(n, v),
                };
                let (b, s) = if rx {
                    (queue::RX_BASE, queue::RX_SIZE)
                } else {
                    (queue::TX_BASE, queue::TX_SIZE)
                };
                self.queue_write(n, q, b, base);
                self.queue_write(n, q, s, size);
            }
            Op::WriteTx {
                nic,
                queue: q,
                skip,
                ref descriptors,
            } => self.write_tx(usize::from(nic), q, skip, descriptors),
            Op::PostRx {
                nic,
                queue: q,
                ref descriptors,
            } => self.post_rx(usize::from(nic), q, descriptors),
            Op::Doorbell {
                nic,
                queue: q,
                rx,
                tail,
                ..
            } => {
                let n = usize::from(nic);
                let ring = self.ring(n, q, rx);
                let value = match tail {
                    Tail::Ahead(k) => ring.tail + u64::from(k),
                    Tail::Behind(k) => ring.head.wrapping_sub(1 + u64::from(k)),
                    Tail::Beyond(k) => ring.head + ring.size + 1 + u64::from(k),
                    Tail::Any(v) => v,
                };
                let r = if rx { queue::RX_TAIL } else { queue::TX_TAIL };
                self.queue_write(n, q, r, value);
            }
            Op::Irq {
                nic,
                queue: q,
                value,
            } => self.queue_write(usize::from(nic), q, queue::IRQ, value),
        }
    }

    fn busy(&self) -> bool {
        (0..2).any(|n| {
            !self.sides[n].nic.port().inbound().is_empty()
                || self
                    .rings(n, false)
                    .iter()
                    .any(|r| r.size != 0 && r.head != r.tail)
        })
    }

    /// Lets the simulation run until both NICs are idle.
    pub(super) async fn settle(&self) {
        let mut quiet = 0;
        for _ in 0..SETTLE_STEPS {
            self.clock.sleep(STEP).await;
            if self.busy() {
                quiet = 0;
            } else {
                quiet += 1;
                if quiet >= QUIET {
                    return;
                }
            }
        }
        let rings: Vec<String> = (0..2)
            .flat_map(|n| {
                self.rings(n, false)
                    .into_iter()
                    .enumerate()
                    .filter(|(_, r)| r.size != 0 && r.head != r.tail)
                    .map(move |(q, r)| format!("nic{n} queue {q} transmit {r:?}"))
            })
            .collect();
        panic!(
            "the NICs did not drain in {SETTLE_STEPS} µs of virtual time: {} inbound frames; {}",
            self.sides[0].nic.port().inbound().len() + self.sides[1].nic.port().inbound().len(),
            rings.join(", ")
        );
    }

    /// Runs every operation, checking after each.
    pub async fn run(&self, ops: Vec<Op>) {
        let mut loose = false;
        for op in ops.iter().chain([&Op::Irq {
            nic: 0,
            queue: 0,
            value: 0,
        }]) {
            let before = [self.counters(0), self.counters(1)];
            self.apply(op);
            if let Op::Doorbell { drain: false, .. } = op {
                self.clock.sleep(NO_DRAIN).await;
                loose = true;
                continue;
            }
            let rings = [
                [self.rings(0, false), self.rings(0, true)],
                [self.rings(1, false), self.rings(1, true)],
            ];
            let posted = [self.posted(0, &rings[0][1]), self.posted(1, &rings[1][1])];
            self.settle().await;
            self.check(op, before, &rings, &posted, loose);
            loose = false;
        }
    }
}
