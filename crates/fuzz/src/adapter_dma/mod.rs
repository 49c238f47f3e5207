//! The `adapter_dma` target: the DMA engine of an NTB adapter driven by its host doing
//! arbitrary things — BAR0 loads and stores at any offset, width and value; rings set up
//! right or wrong (misaligned, any size, past the end of RAM, unclaimed); done words anywhere;
//! descriptors of every length and flag whose local side lies in the harness's area, at the
//! end of RAM, nowhere or anywhere, and whose remote side is the window onto the peer's area,
//! a window entry that maps nothing, nowhere or anywhere; doorbells valid, behind, too far;
//! aborts while the engine works.
//!
//! ```text
//!   alpha (CPU, RAM: ring, area) ── ntb0 (DMA engine) ══ cable ══ ntb0 ── beta (RAM: area)
//! ```
//!
//! After each operation the simulation settles (within 20 ms) and is checked against a
//! reference model ([`model`]) and the fabric's routes: every register access gives the
//! `CompleterError` the access rules predict and the value a load must return; ERROR, STATE,
//! HEAD and TAIL are as predicted; every descriptor run ends with the status its fields and
//! the reachability of its two sides predict (a descriptor after a failure `NotRun`; after
//! an abort a prefix as predicted and the rest `Aborted`); the done word says HEAD and the
//! failure, abort and halt flags; a ring or done word that cannot be reached halts the queue;
//! each done transfer's bytes land at the destination and nothing else of the tracked memory
//! (the areas, 64 KiB around them, the end of RAM, the ring's surroundings) changes; never
//! more reads in flight than the engine takes, and none left over. Where a transfer's bytes
//! touch the ring or the done word the statuses are only checked to be real (the outcome
//! counts `chaos`).

pub mod model;
pub mod ops;

use crate::Outcome;
use model::{done_word, fields, Fields, Regs, FETCH};
use ops::{DoneAt, Len, Local, Op, Remote, RingAt, Tail};
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_devices::ntb_dma::spec::{
    control, done, reg, DescriptorStatus, QueueState, RegisterError, BLOCK, DESCRIPTOR_BYTES,
    MAX_RING_ENTRIES, MAX_TRANSFER_BYTES,
};
use smartio_devices::ntb_dma::AdapterDma;
use smartio_fabric::{Access, Fabric, HostId, LutTarget, Requester, Target};
use smartio_machine::{Agent, Machine};
use smartio_platform::{BarHandler, BusAddr, Clock, PhysAddr, SimDuration, SimTime};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Virtual time a run may take.
const DEADLINE: SimTime = SimTime(2_000_000_000_000); // 2 s
/// The local area in alpha's RAM.
const LOCAL: u64 = 0x0200_0000;
/// The ring slot (room for the largest ring) and the done word's slot after it.
const RING: u64 = 0x0100_0000;
const DONE: u64 = RING + MAX_RING_ENTRIES * DESCRIPTOR_BYTES;
/// The area in beta's RAM the window maps (one look-up-table entry).
const REMOTE: u64 = 0x1000_0000;
/// Bytes of each area, and of the guard bands around.
const AREA: u64 = 256 << 10;
const GUARD: u64 = 64 << 10;
/// A bus address no target claims.
const NOWHERE: u64 = 0x4000_0000_0000;
const STEP: SimDuration = SimDuration::from_us(1);
const SETTLE_STEPS: u32 = 20_000;

fn scenario() -> String {
    let host = |name: &str, cable: &str| {
        format!(
            "\n[[host]]\nname = \"{name}\"\nram = \"1 GiB\"\niommu = false\ncores = 2\n\n\
             [[host.ntb]]\nname = \"ntb0\"\nchip = \"PEX8733\"\nparent = \"root\"\n\
             link = \"gen3 x8\"\nwindow = \"64 MiB\"\n{cable}"
        )
    };
    format!(
        "name = \"adapter-dma-fuzz\"\ndescription = \"two hosts back to back, x8\"\n\
         [pcie]\nmax_payload_size = 128\n{}{}",
        host("alpha", ""),
        host("beta", "connect = \"alpha.ntb0\"\ncable = \"gen3 x8\"\n")
    )
}

fn setup() -> (Fabric, Calibration) {
    let fabric = crate::cached_scenario("adapter-dma-fuzz.toml", scenario);
    (fabric, crate::calibration_default())
}

/// A stretch of host memory the model knows byte for byte.
struct Region {
    host: HostId,
    base: u64,
    bytes: Vec<u8>,
}

/// What one doorbell must lead to.
#[derive(Debug, Default)]
struct Batch {
    /// Descriptor numbers and their predicted statuses (two when the order of two failures is
    /// the engine's).
    statuses: Vec<(u64, DescriptorStatus, Option<DescriptorStatus>)>,
    /// The done word, where it can be read back.
    done: Option<u64>,
    /// A transfer touched the ring or the done word.
    chaos: bool,
    /// Destination ranges whose bytes are not predicted (host, address, length).
    unknown: Vec<(u64, u64)>,
}

/// What the runs did, for the outcome.
#[derive(Debug, Default)]
struct Stats {
    statuses: [u32; 10],
    halts: u32,
    aborts: u32,
    refusals: u32,
    chaos: u32,
}

struct Harness {
    machine: Machine,
    clock: Agent,
    engine: Rc<AdapterDma>,
    requester: Requester,
    alpha: HostId,
    window: u64,
    ram_end: u64,
    regions: RefCell<Vec<Region>>,
    model: RefCell<Regs>,
    stats: RefCell<Stats>,
}

fn pattern(seed: u64, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i.wrapping_add(seed << 20)).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

impl Harness {
    fn peek(&self, host: HostId, addr: u64, len: u64) -> Vec<u8> {
        let mut b = vec![0u8; len as usize];
        self.machine.peek_memory(host, PhysAddr(addr), &mut b);
        b
    }

    /// Where `[addr, addr + len)` leads for the engine: `None` if any byte fails to route,
    /// else its pieces in RAM (`(host, physical address, length)`; an empty list when some
    /// piece lands elsewhere than RAM).
    fn reach(&self, addr: u64, len: u64, access: Access) -> Option<Vec<(HostId, u64, u64)>> {
        let f = self.machine.fabric();
        let mut pieces = Vec::new();
        let mut other = false;
        let mut done = 0;
        while done < len {
            let route = f
                .route(
                    self.requester,
                    BusAddr(addr.checked_add(done)?),
                    len - done,
                    access,
                )
                .ok()?;
            match route.target {
                Target::Memory { host, addr } => pieces.push((host, addr.get(), route.len)),
                _ => other = true,
            }
            done += route.len.max(1);
        }
        if other {
            pieces.clear();
        }
        Some(pieces)
    }

    fn reachable(&self, addr: u64, len: u64, access: Access) -> bool {
        self.reach(addr, len, access).is_some()
    }

    /// `v` if the engine reaches nothing there, else an unclaimed address.
    fn nowhere(&self, v: u64, salt: u64) -> u64 {
        if self.reachable(v, 1, Access::Read) || self.reachable(v, 1, Access::Write) {
            NOWHERE + salt + (v & 0xfff)
        } else {
            v
        }
    }

    fn local(&self, l: Local) -> u64 {
        match l {
            Local::Area(o) => LOCAL + u64::from(o),
            Local::EndOfRam(n) => self.ram_end - u64::from(n),
            Local::Unclaimed(o) => NOWHERE + u64::from(o),
            Local::Any(v) => self.nowhere(v, 0x1_0000),
        }
    }

    fn remote(&self, r: Remote) -> u64 {
        match r {
            Remote::Window(o) => self.window + u64::from(o),
            Remote::Unmapped(o) => self.window + (5 << 20) + u64::from(o),
            Remote::Unclaimed(o) => NOWHERE + 0x10_0000 + u64::from(o),
            Remote::Any(v) => self.nowhere(v, 0x2_0000),
        }
    }

    /// The model's bytes at `(host, addr, len)` if it knows them all.
    fn known(&self, host: HostId, addr: u64, len: u64) -> Option<Vec<u8>> {
        let regions = self.regions.borrow();
        let r = regions.iter().find(|r| {
            r.host == host && addr >= r.base && addr + len <= r.base + r.bytes.len() as u64
        })?;
        let at = (addr - r.base) as usize;
        Some(r.bytes[at..at + len as usize].to_vec())
    }

    /// Writes `data` into the model at `(host, addr)`; false if it is not all tracked.
    fn learn(&self, host: HostId, addr: u64, data: &[u8]) -> bool {
        let mut regions = self.regions.borrow_mut();
        let Some(r) = regions.iter_mut().find(|r| {
            r.host == host
                && addr >= r.base
                && addr + data.len() as u64 <= r.base + r.bytes.len() as u64
        }) else {
            return false;
        };
        let at = (addr - r.base) as usize;
        r.bytes[at..at + data.len()].copy_from_slice(data);
        true
    }

    /// The model takes what the simulation holds in the tracked part of a bus range of the
    /// engine's (whatever it leads to).
    fn resync(&self, addr: u64, len: u64) {
        let f = self.machine.fabric();
        let mut done = 0;
        while done < len {
            let Some(at) = addr.checked_add(done) else {
                break;
            };
            let Ok(route) = f.route(self.requester, BusAddr(at), len - done, Access::Write) else {
                // An unrouted byte: skip a page's worth.
                done += 4096 - at % 4096;
                continue;
            };
            if let Target::Memory { host, addr } = route.target {
                let mut regions = self.regions.borrow_mut();
                for r in regions.iter_mut().filter(|r| r.host == host) {
                    let lo = addr.get().max(r.base);
                    let hi = (addr.get() + route.len).min(r.base + r.bytes.len() as u64);
                    if lo < hi {
                        let mut b = vec![0u8; (hi - lo) as usize];
                        self.machine.peek_memory(host, PhysAddr(lo), &mut b);
                        let at = (lo - r.base) as usize;
                        r.bytes[at..at + b.len()].copy_from_slice(&b);
                    }
                }
            }
            done += route.len.max(1);
        }
    }

    /// Stores `data` at BAR0 `offset` straight at the engine and checks the result and every
    /// register against the model.
    fn store(&self, offset: u64, data: &[u8]) {
        let got = self.engine.mmio_write(0, offset, data);
        let want = {
            let mut m = self.model.borrow_mut();
            Regs::offset(offset, data.len()).and_then(|first| {
                for (i, w) in data.chunks_exact(8).enumerate() {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(w);
                    m.store(first + 8 * i as u64, u64::from_le_bytes(b))?;
                }
                Ok(())
            })
        };
        assert_eq!(
            got,
            want,
            "a store of {} bytes at BAR0 {offset:#x}",
            data.len()
        );
        if got.is_err() {
            self.stats.borrow_mut().refusals += 1;
        }
        self.check_registers(&format!("after a store at {offset:#x}"));
    }

    fn store_reg(&self, r: u64, value: u64) {
        self.store(BLOCK + r, &value.to_le_bytes());
    }

    fn load(&self, offset: u64, width: usize) {
        let mut buf = vec![0u8; width];
        let got = self.engine.mmio_read(0, offset, &mut buf);
        let m = *self.model.borrow();
        match Regs::offset(offset, width) {
            Err(e) => assert_eq!(got, Err(e), "a load of {width} bytes at BAR0 {offset:#x}"),
            Ok(first) => {
                assert_eq!(got, Ok(()), "a load of {width} bytes at BAR0 {offset:#x}");
                for (i, w) in buf.chunks_exact(8).enumerate() {
                    let r = first + 8 * i as u64;
                    let mut b = [0u8; 8];
                    b.copy_from_slice(w);
                    assert_eq!(u64::from_le_bytes(b), m.load(r), "register {r:#x}");
                }
            }
        }
    }

    fn check_registers(&self, when: &str) {
        let m = *self.model.borrow();
        assert_eq!(self.engine.state(), m.state, "STATE {when}");
        assert_eq!(self.engine.error(), m.error, "ERROR {when}");
        assert_eq!(
            self.engine.head_and_tail(),
            (m.head, m.tail),
            "HEAD, TAIL {when}"
        );
    }

    /// Predicts the run a doorbell starts, moving the model to its end.
    fn predict(&self) -> Batch {
        let mut out = Batch::default();
        let mut m = self.model.borrow_mut();
        if m.state != QueueState::Idle || m.head == m.tail {
            return out;
        }
        let ring_bytes = m.entries * DESCRIPTOR_BYTES;
        let touches = |a: u64, len: u64| {
            let hits = |b: u64, blen: u64| a < b.saturating_add(blen) && b < a.saturating_add(len);
            hits(m.ring_base, ring_bytes) || hits(m.done_addr, 8)
        };
        let mut failed = false;
        // A halt says so in the done word, if that can be written.
        let halt = |m: &mut Regs, out: &mut Batch, head: u64| {
            m.state = QueueState::Halted;
            m.error = RegisterError::RingUnreachable;
            m.head = head;
            if self.reachable(m.done_addr, 8, Access::Write) {
                out.done = Some(done_word(head, true, false, true));
            }
            self.stats.borrow_mut().halts += 1;
        };
        let mut head = m.head;
        while head < m.tail {
            let first = head % m.entries;
            let n = (m.tail - head).min(m.entries - first).min(FETCH);
            let fetch = m.ring_base.checked_add(first * DESCRIPTOR_BYTES);
            let Some(pieces) =
                fetch.and_then(|a| self.reach(a, n * DESCRIPTOR_BYTES, Access::Read))
            else {
                halt(&mut m, &mut out, head);
                return out;
            };
            // The ring is in alpha's RAM (anything else was moved to nowhere): read it.
            let ring = match pieces.as_slice() {
                [(host, phys, len)] if *len == n * DESCRIPTOR_BYTES => {
                    self.peek(*host, *phys, *len)
                }
                _ => {
                    out.chaos = true;
                    vec![0u8; (n * DESCRIPTOR_BYTES) as usize]
                }
            };
            for i in 0..n {
                let at = (i * DESCRIPTOR_BYTES) as usize;
                let mut entry = [0u8; 32];
                entry.copy_from_slice(&ring[at..at + 32]);
                let (status, or) = if failed {
                    (DescriptorStatus::NotRun, None)
                } else {
                    match fields(&entry) {
                        Fields::Refused(s) => (s, None),
                        Fields::Runs { from, to, len } => {
                            if touches(from, len) || touches(to, len) {
                                out.chaos = true;
                            }
                            self.run_one(from, to, len, &mut out)
                        }
                    }
                };
                if status.is_failure() {
                    failed = true;
                }
                out.statuses.push((head, status, or));
                let status_at = m.ring_base + (first + i) * DESCRIPTOR_BYTES + 28;
                if !self.reachable(status_at, 4, Access::Write) {
                    halt(&mut m, &mut out, head);
                    return out;
                }
                head += 1;
            }
        }
        m.head = head;
        if self.reachable(m.done_addr, 8, Access::Write) {
            out.done = Some(done_word(head, failed, false, false));
        } else {
            m.state = QueueState::Halted;
            m.error = RegisterError::RingUnreachable;
            self.stats.borrow_mut().halts += 1;
        }
        out
    }

    /// The status one transfer must end with, and the model's memory after it.
    fn run_one(
        &self,
        from: u64,
        to: u64,
        len: u64,
        out: &mut Batch,
    ) -> (DescriptorStatus, Option<DescriptorStatus>) {
        let flush = len.min(4);
        let source = self.reach(from, len, Access::Read);
        let written = self.reach(to, len, Access::Write).is_some()
            && self.reachable(to + len - flush, flush, Access::Read);
        match (source, written) {
            (Some(src), true) => {
                let dst = self.reach(to, len, Access::Write).unwrap_or_default();
                let copied = match (src.as_slice(), dst.as_slice()) {
                    ([(sh, sa, sl)], [(dh, da, dl)]) if *sl == len && *dl == len => self
                        .known(*sh, *sa, len)
                        .is_some_and(|bytes| self.learn(*dh, *da, &bytes)),
                    _ => false,
                };
                if !copied {
                    out.unknown.push((to, len));
                }
                (DescriptorStatus::Done, None)
            }
            (None, true) => {
                out.unknown.push((to, len));
                (DescriptorStatus::ReadFailed, None)
            }
            (Some(_), false) => {
                out.unknown.push((to, len));
                (DescriptorStatus::WriteFailed, None)
            }
            (None, false) => {
                out.unknown.push((to, len));
                (
                    DescriptorStatus::ReadFailed,
                    Some(DescriptorStatus::WriteFailed),
                )
            }
        }
    }

    /// Lets the engine work until it has been idle for three steps.
    async fn settle(&self) {
        let mut quiet = 0;
        for _ in 0..SETTLE_STEPS {
            self.clock.sleep(STEP).await;
            if self.engine.state() == QueueState::Busy || self.engine.reads_in_flight() > 0 {
                quiet = 0;
            } else {
                quiet += 1;
                if quiet >= 3 {
                    return;
                }
            }
        }
        panic!(
            "the engine did not finish in {SETTLE_STEPS} µs of virtual time: {:?}, HEAD/TAIL {:?}",
            self.engine.state(),
            self.engine.head_and_tail()
        );
    }

    /// The status field of descriptor `n` of the ring, if it is in alpha's RAM.
    fn status_of(&self, n: u64) -> Option<u32> {
        let m = *self.model.borrow();
        let at = m
            .ring_base
            .checked_add((n % m.entries.max(1)) * DESCRIPTOR_BYTES + 28)?;
        let pieces = self.reach(at, 4, Access::Read)?;
        let [(host, phys, 4)] = pieces.as_slice() else {
            return None;
        };
        let b = self.peek(*host, *phys, 4);
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Checks what a run did against `batch` (`aborted`: an abort came while it ran).
    fn check(&self, batch: &Batch, aborted: bool) {
        let c = self.engine.counters();
        let most = u32::try_from(self.model.borrow().reads).unwrap_or(u32::MAX);
        assert!(
            c.peak_reads_in_flight <= most,
            "{} reads in flight",
            c.peak_reads_in_flight
        );
        assert_eq!(self.engine.reads_in_flight(), 0, "reads left in flight");
        let mut first_aborted = None;
        for (k, &(n, want, or)) in batch.statuses.iter().enumerate() {
            let Some(code) = self.status_of(n) else {
                continue;
            };
            let got = DescriptorStatus::from_code(code);
            assert!(
                got.is_some_and(|s| s != DescriptorStatus::Pending),
                "descriptor {n}: status {code} is not a completion"
            );
            let got = got.unwrap_or(DescriptorStatus::Pending);
            self.stats.borrow_mut().statuses[got.code() as usize] += 1;
            if aborted && (first_aborted.is_some() || got == DescriptorStatus::Aborted) {
                first_aborted.get_or_insert(k);
                assert_eq!(
                    got,
                    DescriptorStatus::Aborted,
                    "descriptor {n} after an abort"
                );
                continue;
            }
            if !batch.chaos {
                assert!(
                    got == want || Some(got) == or,
                    "descriptor {n}: {got:?}, predicted {want:?}"
                );
            }
        }
        let m = *self.model.borrow();
        if let (Some(word), false) = (batch.done, batch.chaos) {
            let at = m.done_addr;
            if let Some([(host, phys, 8)]) = self.reach(at, 8, Access::Read).as_deref() {
                let b = self.peek(*host, *phys, 8);
                let mut got = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
                let mut want = word;
                if aborted {
                    // Whether the abort caught a descriptor is the engine's timing.
                    let flags = done::ABORTED | done::FAILED;
                    assert_eq!(
                        got & done::ABORTED != 0,
                        first_aborted.is_some(),
                        "the done word's abort flag"
                    );
                    got &= !flags;
                    want &= !flags;
                }
                assert_eq!(got, want, "the done word at {at:#x}");
            }
        }
        for &(to, len) in &batch.unknown {
            self.resync(to, len);
        }
        if batch.chaos || aborted {
            self.resync_all();
        }
        self.forget_ring();
        self.compare();
    }

    /// After an abort or chaos: the model takes the simulation's bytes wherever a transfer
    /// of the batch could have written (its areas), so later checks stay exact.
    fn resync_all(&self) {
        let mut regions = self.regions.borrow_mut();
        for r in regions.iter_mut() {
            let fresh = self.peek(r.host, r.base, r.bytes.len() as u64);
            r.bytes = fresh;
        }
    }

    /// The ring and the done word are written by the harness and the engine: the model takes
    /// them from the simulation.
    fn forget_ring(&self) {
        let m = *self.model.borrow();
        self.resync(
            m.ring_base,
            (m.entries.min(MAX_RING_ENTRIES)) * DESCRIPTOR_BYTES,
        );
        self.resync(m.done_addr, 8);
    }

    /// Every tracked byte is what the model says.
    fn compare(&self) {
        for r in self.regions.borrow().iter() {
            let got = self.peek(r.host, r.base, r.bytes.len() as u64);
            if let Some(p) = got.iter().zip(&r.bytes).position(|(g, w)| g != w) {
                panic!(
                    "host {:?} memory at {:#x} is {:#04x}, the model says {:#04x}",
                    r.host,
                    r.base + p as u64,
                    got[p],
                    r.bytes[p]
                );
            }
        }
    }

    /// Writes descriptors into the ring from TAIL on (where the ring is in alpha's RAM).
    fn write_descriptors(&self, descs: &[ops::Desc]) {
        let m = *self.model.borrow();
        if m.entries == 0 || m.entries > MAX_RING_ENTRIES {
            return;
        }
        for (i, d) in descs.iter().enumerate() {
            let Some(at) = m
                .ring_base
                .checked_add(((m.tail + i as u64) % m.entries) * DESCRIPTOR_BYTES)
            else {
                continue;
            };
            let Some(pieces) = self.reach(at, DESCRIPTOR_BYTES, Access::Write) else {
                continue;
            };
            let [(host, phys, DESCRIPTOR_BYTES)] = pieces.as_slice() else {
                continue;
            };
            if *host != self.alpha {
                continue;
            }
            let len = match d.len {
                Len::Zero => 0,
                Len::Small(b) => u64::from(b) + 1,
                Len::Medium(m) => u64::from(m) + 1,
                Len::TooLong => MAX_TRANSFER_BYTES + 1,
                // A length the engine takes is kept below 64 KiB (a run stays short).
                Len::Any(v) if v <= MAX_TRANSFER_BYTES => v % (64 << 10) + 1,
                Len::Any(v) => v,
            };
            let mut b = [0u8; 32];
            b[0..8].copy_from_slice(&self.local(d.local).to_le_bytes());
            b[8..16].copy_from_slice(&self.remote(d.remote).to_le_bytes());
            b[16..24].copy_from_slice(&len.to_le_bytes());
            b[24..28].copy_from_slice(&d.flags.to_le_bytes());
            self.machine.poke_memory(*host, PhysAddr(*phys), &b);
        }
    }

    fn ring_at(&self, r: RingAt) -> u64 {
        match r {
            RingAt::Slot => RING,
            RingAt::Misaligned(n) => RING + u64::from(n),
            RingAt::EndOfRam(k) => self.ram_end - u64::from(k) * DESCRIPTOR_BYTES,
            RingAt::Unclaimed => NOWHERE + 0x20_0000,
            RingAt::Any(v) => self.nowhere(v, 0x3_0000),
        }
    }

    fn done_at(&self, d: DoneAt) -> u64 {
        match d {
            DoneAt::Slot => DONE,
            DoneAt::Misaligned(n) => DONE + u64::from(n),
            DoneAt::Unclaimed => NOWHERE + 0x30_0000,
            DoneAt::Any(v) => self.nowhere(v, 0x4_0000),
        }
    }

    async fn run(&self, ops: Vec<Op>) {
        for op in &ops {
            let mut abort = false;
            match op {
                Op::Setup {
                    ring,
                    entries,
                    done,
                    enable,
                } => {
                    let entries = match *entries {
                        ops::Entries::Small(n) => u64::from(n),
                        ops::Entries::Zero => 0,
                        ops::Entries::Most => MAX_RING_ENTRIES,
                        ops::Entries::TooMany => MAX_RING_ENTRIES + 1,
                        ops::Entries::Any(v) => v,
                    };
                    let mut three = Vec::with_capacity(24);
                    for v in [self.ring_at(*ring), entries, self.done_at(*done)] {
                        three.extend_from_slice(&v.to_le_bytes());
                    }
                    self.store(BLOCK + reg::RING_BASE, &three);
                    let c = if *enable { control::ENABLE } else { 0 };
                    self.store_reg(reg::CONTROL, c);
                }
                Op::Post {
                    descs,
                    tail,
                    abort: a,
                } => {
                    self.write_descriptors(descs);
                    let m = *self.model.borrow();
                    let value = match tail {
                        Tail::Posted => m.tail + descs.len() as u64,
                        Tail::Behind => m.tail.wrapping_sub(1),
                        Tail::TooFar => m.head.wrapping_add(m.entries).wrapping_add(1),
                        Tail::Any(v) => *v,
                    };
                    self.store_reg(reg::TAIL, value);
                    abort = *a;
                }
                Op::Register {
                    write,
                    offset,
                    width,
                    value,
                } => {
                    if *write {
                        let data: Vec<u8> = value
                            .to_le_bytes()
                            .iter()
                            .copied()
                            .cycle()
                            .take(*width)
                            .collect();
                        self.store(*offset, &data);
                    } else {
                        self.load(*offset, *width);
                    }
                }
                Op::Disable => self.store_reg(reg::CONTROL, 0),
                Op::ClearError => self.store_reg(reg::ERROR, 0),
                Op::Abort => self.store_reg(reg::CONTROL, control::ENABLE | control::ABORT),
                Op::BadControl(b) => self.store_reg(reg::CONTROL, 1 << (2 + u64::from(*b) % 62)),
            }
            // A doorbell the model took starts a run: predict it before the engine moves.
            let batch = self.predict();
            let mut aborted = false;
            if abort {
                self.clock.sleep(STEP).await;
                if self.engine.state() == QueueState::Busy {
                    // Straight at the engine: the model's registers already stand at the run's
                    // end, so this store is not checked against them.
                    let _ = self.engine.mmio_write(
                        0,
                        BLOCK + reg::CONTROL,
                        &(control::ENABLE | control::ABORT).to_le_bytes(),
                    );
                    aborted = true;
                    self.stats.borrow_mut().aborts += 1;
                } else {
                    self.store_reg(reg::CONTROL, control::ENABLE | control::ABORT);
                }
            }
            self.settle().await;
            if batch.chaos {
                self.stats.borrow_mut().chaos += 1;
            }
            self.check_registers("after the engine settled");
            self.check(&batch, aborted);
        }
    }
}

/// Drives the adapter's DMA engine with the operations `data` decodes to and checks each.
pub fn adapter_dma(data: &[u8]) -> Outcome {
    let ops = ops::decode(data);
    let count = ops.len();
    let (fabric, calibration) = setup();
    let cluster = match Cluster::from_fabric(fabric, &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("the adapter DMA scenario does not build: {e}"),
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    let machine = cluster.machine.clone();
    let (alpha, beta, ours, theirs, endpoint, ram_end) = {
        let f = machine.fabric();
        let (a, b) = (
            f.host_by_name("alpha")
                .unwrap_or_else(|| panic!("no alpha")),
            f.host_by_name("beta").unwrap_or_else(|| panic!("no beta")),
        );
        let (ours, theirs) = (
            f.host_adapter(a, 0).unwrap_or_else(|| panic!("no adapter")),
            f.host_adapter(b, 0).unwrap_or_else(|| panic!("no adapter")),
        );
        let ram_end = f.host(a).ram.last().map_or(0, |r| r.end);
        (a, b, ours, theirs, f.adapter(ours).endpoint, ram_end)
    };
    let engine = cluster
        .adapter_dma(endpoint)
        .unwrap_or_else(|| panic!("the adapter has no DMA engine"));
    let requester = Requester::Device(endpoint);
    let window = machine.with_fabric_mut(|f| {
        let m = f
            .ntb_map(ours, LutTarget::Adapter(theirs), REMOTE, 1 << 20)
            .unwrap_or_else(|e| panic!("mapping the window: {e}"));
        f.ntb_add_requester(ours, requester)
            .unwrap_or_else(|e| panic!("the engine's requester id: {e}"));
        m.bus_addr
    });
    let regions: Vec<Region> = [
        (alpha, LOCAL - GUARD, AREA + 2 * GUARD),
        (alpha, ram_end - AREA, AREA),
        (alpha, RING - GUARD, DONE + 16 + GUARD - (RING - GUARD)),
        (beta, REMOTE - GUARD, AREA + 2 * GUARD),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (host, base, len))| {
        let bytes = pattern(i as u64 + 1, len);
        machine.poke_memory(host, PhysAddr(base), &bytes);
        Region { host, base, bytes }
    })
    .collect();
    let reads = u64::from(engine.config().max_outstanding_reads);
    let harness = Rc::new(Harness {
        machine: machine.clone(),
        clock: machine.cpu(alpha),
        engine,
        requester,
        alpha,
        window,
        ram_end,
        regions: RefCell::new(regions),
        model: RefCell::new(Regs::new(reads)),
        stats: RefCell::new(Stats::default()),
    });
    let finished = Rc::new(Cell::new(false));
    let (h, flag) = (harness.clone(), finished.clone());
    machine.spawn(async move {
        h.run(ops).await;
        flag.set(true);
    });
    let end = machine.run_until(DEADLINE);
    assert!(
        finished.get(),
        "the host did not finish its {count} operations: {}",
        machine.blocked_summary()
    );
    assert!(
        end.end.as_ps() < DEADLINE.as_ps() / 2,
        "the simulation did not come to rest"
    );
    let s = harness.stats.borrow();
    let statuses: Vec<String> = DescriptorStatus::ALL
        .iter()
        .filter(|st| s.statuses[st.code() as usize] > 0)
        .map(|st| format!("{st:?} {}", s.statuses[st.code() as usize]))
        .collect();
    Outcome::accepted(format!(
        "{count} operations; statuses: {}; halts {}, aborts {}, refused accesses {}, chaos {}",
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        },
        s.halts,
        s.aborts,
        s.refusals,
        s.chaos
    ))
}
