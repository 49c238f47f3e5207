//! The fuzzing host: carries out [`Op`]s from the CPU of `local-chassis` — ring entries
//! written to host RAM, channel registers and `PUT` written over the fabric, BAR1 words
//! stored over the fabric, any register or BAR1 access made straight at a GPU's BAR handler
//! (to see its exact [`CompleterError`]) — and after each one lets the simulation settle and
//! compares every channel with the [`World`].

use super::model::{Where, World, CHANNELS};
use super::ops::{Entry, Kernel, Len, Op, Place, Put, RingBase};
use smartio_devices::gpu::spec::{self, channel, reg, status, Command, ErrorCode, GpuAddr};
use smartio_devices::gpu::Gpu;
use smartio_machine::{Agent, Machine};
use smartio_platform::{BarHandler, BusAddr, Clock, CompleterError, Port, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

/// Room per channel's ring in host RAM (256 entries).
pub const SLOT: u64 = 0x4000;
/// Offsets in the harness's host RAM area.
pub const NOTICES: u64 = 0x4_0000;
/// Words releases and timestamps write.
pub const WORDS: u64 = 0x4_1000;
/// The source buffer (a known pattern).
pub const SRC: u64 = 0x5_0000;
/// The destination buffer.
pub const DST: u64 = 0x7_0000;
/// Bytes of source and destination buffers.
pub const BUFFER: u64 = 0x2_0000;
/// The whole area (compared at the end, with [`GUARD`] bytes either side).
pub const REGION: u64 = 0x10_0000;
/// Bytes around the area that nothing may write.
pub const GUARD: u64 = 0x1_0000;
/// A bus address no target claims (below every profile's DMA limit).
pub const NOWHERE: u64 = 0x4000_0000_0000;

/// Steps of [`SETTLE_STEP`] the simulation gets to settle after one operation.
const SETTLE_STEPS: u32 = 4000;
const SETTLE_STEP: SimDuration = SimDuration::from_us(5);
/// Time for posted writes (releases, notices) to land after the channels settled. A notice
/// after a copy whose write ran past the end of the peer's BAR1 takes 10 to 50 µs.
const LAND: SimDuration = SimDuration::from_us(50);

/// Where things are.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The harness's host RAM area.
    pub host: u64,
    /// BAR0 of gpu0 and gpu1.
    pub bar0: [u64; 2],
    /// BAR1 of gpu0 and gpu1.
    pub bar1: [u64; 2],
    /// Bytes of BAR1.
    pub aperture: u64,
    /// Bytes of device memory.
    pub memory: u64,
}

impl Layout {
    /// Channel `c` of GPU `g`'s ring slot.
    pub fn slot(&self, g: usize, c: usize) -> u64 {
        self.host + (g * CHANNELS + c) as u64 * SLOT
    }

    /// Its notice slot.
    pub fn notice(&self, g: usize, c: usize) -> u64 {
        self.host + NOTICES + (g * CHANNELS + c) as u64 * 64
    }

    /// `p` as GPU `g` names it.
    pub fn place(&self, g: usize, p: Place) -> GpuAddr {
        let bus = |a: u64| GpuAddr::Bus(BusAddr(a));
        match p {
            Place::Low(o) => GpuAddr::Device(u64::from(o)),
            Place::High(o) => GpuAddr::Device((1 << 30) + u64::from(o)),
            Place::End(n) => GpuAddr::Device(self.memory.saturating_sub(u64::from(n))),
            Place::AnyDevice(o) => GpuAddr::Device(o),
            Place::Src(o) => bus(self.host + SRC + u64::from(o)),
            Place::Dst(o) => bus(self.host + DST + u64::from(o)),
            Place::Words(o) => bus(self.host + WORDS + u64::from(o)),
            Place::Peer(o) => bus(self.bar1[1 - g] + u64::from(o)),
            Place::PeerEnd(n) => bus(self.bar1[1 - g] + self.aperture - u64::from(n)),
            Place::Nowhere(o) => bus(NOWHERE + u64::from(o)),
            Place::Beyond(n) => bus((1 << 47) - u64::from(n)),
            Place::Top(n) => bus(u64::MAX - u64::from(n)),
        }
    }

    /// The raw value of `p` (a device offset, or a bus address).
    pub fn raw(&self, g: usize, p: Place) -> u64 {
        match self.place(g, p) {
            GpuAddr::Device(o) => o,
            GpuAddr::Bus(a) => a.get(),
        }
    }
}

/// The bytes of the source buffer.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The host side of one run.
pub struct Harness {
    cpu: Agent,
    gpus: [Rc<Gpu<Agent>>; 2],
    layout: Layout,
    /// What should be.
    pub world: RefCell<World>,
    /// Register accesses made, and refused.
    pub registers: RefCell<(u32, u32)>,
    /// Per channel in ERROR: `NOTIFIER` when the first settle saw the error (where its
    /// notice went; the host may change the register afterwards).
    stopped: RefCell<[[Option<u64>; CHANNELS]; 2]>,
}

fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

impl Harness {
    /// A host on `machine`'s host 0 driving `gpus` laid out as `layout`.
    pub fn new(machine: &Machine, gpus: [Rc<Gpu<Agent>>; 2], layout: Layout, world: World) -> Self {
        Harness {
            cpu: machine.cpu(smartio_fabric::HostId(0)),
            gpus,
            layout,
            world: RefCell::new(world),
            registers: RefCell::new((0, 0)),
            stopped: RefCell::new([[None; CHANNELS]; 2]),
        }
    }

    /// The two GPUs.
    pub fn gpus(&self) -> &[Rc<Gpu<Agent>>; 2] {
        &self.gpus
    }

    /// A channel register, read straight from the model (no time, no fabric).
    fn reg(&self, g: usize, c: usize, r: u64) -> u64 {
        let mut b = [0u8; 8];
        match self.gpus[g].mmio_read(spec::REGISTER_BAR, channel::base(c as u16) + r, &mut b) {
            Ok(()) => u64::from_le_bytes(b),
            Err(e) => panic!("gpu{g} channel {c} register {r:#x} refused a load: {e}"),
        }
    }

    /// A channel register store over the fabric, made visible by a load behind it.
    async fn set(&self, g: usize, c: usize, r: u64, value: u64) {
        let at = BusAddr(self.layout.bar0[g] + channel::base(c as u16) + r);
        if let Err(e) = self.cpu.write(at, &value.to_le_bytes()).await {
            panic!("gpu{g} channel {c}: the store to register {r:#x} failed: {e}");
        }
        let mut b = [0u8; 8];
        let get = BusAddr(self.layout.bar0[g] + channel::base(c as u16) + channel::GET);
        if let Err(e) = self.cpu.read(get, &mut b).await {
            panic!("gpu{g} channel {c}: reading GET failed: {e}");
        }
        self.world.borrow_mut().set_register(g, c, r, value);
    }

    /// Runs every operation, letting the simulation settle after each.
    pub async fn run(&self, ops: Vec<Op>) {
        for op in ops {
            self.apply(op).await;
            self.settle().await;
        }
    }

    async fn apply(&self, op: Op) {
        match op {
            Op::SetRing {
                gpu,
                channel: c,
                base,
                entries,
                notices,
                notifier,
            } => {
                let (g, c) = (usize::from(gpu), usize::from(c));
                let slot = self.layout.slot(g, c);
                let base = match base {
                    RingBase::Slot => slot,
                    RingBase::SlotPlus(n) => slot + u64::from(n),
                    RingBase::At(p) => self.layout.raw(g, p),
                    RingBase::Any(v) => v,
                };
                let notifier = match (notices, notifier) {
                    (true, _) => self.layout.notice(g, c),
                    (false, Some(p)) => self.layout.raw(g, p),
                    (false, None) => 0,
                };
                self.set(g, c, channel::RING_BASE, base).await;
                self.set(g, c, channel::RING_ENTRIES, entries).await;
                self.set(g, c, channel::NOTIFIER, notifier).await;
            }
            Op::Push {
                gpu,
                channel: c,
                entry,
            } => {
                let (g, c) = (usize::from(gpu), usize::from(c));
                for e in self.encode(g, entry) {
                    self.push(g, c, e).await;
                }
            }
            Op::Put {
                gpu,
                channel: c,
                put,
            } => {
                let (g, c) = (usize::from(gpu), usize::from(c));
                let tail = self.world.borrow().chans[g][c].tail;
                let value = match put {
                    Put::Tail => tail,
                    Put::Behind(n) => tail.saturating_sub(u64::from(n)),
                    Put::Ahead(n) => tail + u64::from(n),
                    Put::Any(v) => v,
                };
                self.set(g, c, channel::PUT, value).await;
            }
            Op::Reset { gpu, channel: c } => {
                let (g, c) = (usize::from(gpu), usize::from(c));
                self.set(g, c, channel::RESET, 1).await;
                self.check_reset(g, c);
                let notice = self.layout.notice(g, c);
                let _ = self.cpu.write(BusAddr(notice), &[0u8; 24]).await;
                self.world.borrow_mut().host.write(notice, &[0u8; 24]);
            }
            Op::Register {
                gpu,
                bar,
                offset,
                width,
                store,
            } => self.register(usize::from(gpu), bar, offset, usize::from(width), store),
            Op::Poke { gpu, offset, value } => {
                let g = usize::from(gpu);
                let at = BusAddr(self.layout.bar1[g] + u64::from(offset));
                if let Err(e) = self.cpu.write(at, &value.to_le_bytes()).await {
                    panic!("gpu{g}: a store through BAR1 at {offset:#x} failed: {e}");
                }
                let mut b = [0u8; 8];
                if let Err(e) = self.cpu.read(at, &mut b).await {
                    panic!("gpu{g}: a load through BAR1 at {offset:#x} failed: {e}");
                }
                self.world
                    .borrow_mut()
                    .device_write(g, u64::from(offset), &value.to_le_bytes());
            }
            Op::Wait(us) => self.cpu.sleep(SimDuration::from_us(u64::from(us))).await,
        }
    }

    /// The ring entries `entry` takes (a launch: itself and its parameters).
    fn encode(&self, g: usize, entry: Entry) -> Vec<[u8; 64]> {
        let l = &self.layout;
        let command = match entry {
            Entry::Nop => Command::Nop,
            Entry::Copy { src, dst, len } => Command::Copy {
                src: l.place(g, src),
                dst: l.place(g, dst),
                len: match len {
                    Len::Bytes(n) => u64::from(n),
                    Len::Huge(n) => n,
                },
            },
            Entry::Timestamp { dst } => Command::Timestamp {
                dst: l.place(g, dst),
            },
            Entry::Release {
                dst,
                value,
                interrupt,
            } => Command::Release {
                dst: l.place(g, dst),
                value,
                interrupt,
            },
            Entry::Acquire { at, value } => Command::Acquire {
                offset: l.raw(g, at),
                value,
            },
            Entry::Raw(bytes) => return vec![sanitize(bytes)],
            Entry::Launch {
                kernel,
                threads,
                param_bytes,
            } => {
                let addr = |p: Place| match l.place(g, p) {
                    GpuAddr::Device(o) => [o, 1],
                    GpuAddr::Bus(a) => [a.get(), 0],
                };
                let (id, words): (u32, Vec<u64>) = match kernel {
                    Kernel::Store { at, value } => (0, [&addr(at)[..], &[value]].concat()),
                    Kernel::Wait {
                        at,
                        value,
                        bound_ns,
                    } => (1, vec![l.raw(g, at), value, u64::from(bound_ns)]),
                    Kernel::Load { at } => (2, addr(at).to_vec()),
                    Kernel::Unknown(id) => (id, Vec::new()),
                };
                let params: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                let launch = Command::Launch {
                    kernel: spec::KernelId(id),
                    threads,
                    param_bytes: param_bytes.map_or(params.len() as u64, u64::from),
                }
                .encode();
                let mut out = vec![launch];
                for chunk in params.chunks(64) {
                    let mut e = [0u8; 64];
                    e[..chunk.len()].copy_from_slice(chunk);
                    out.push(e);
                }
                return out;
            }
        };
        vec![command.encode()]
    }

    /// Writes `entry` at the host's tail of the channel's ring and advances the tail.
    async fn push(&self, g: usize, c: usize, entry: [u8; 64]) {
        let at = {
            let w = self.world.borrow();
            let ch = &w.chans[g][c];
            let slot = self.layout.slot(g, c);
            let entries = ch.ring_entries;
            let ours = (slot..slot + 256).contains(&ch.ring_base)
                && entries.is_power_of_two()
                && (2..=256).contains(&entries);
            if ours {
                ch.ring_base + (ch.tail % entries) * 64
            } else {
                slot + (ch.tail % 256) * 64
            }
        };
        if let Err(e) = self.cpu.write(BusAddr(at), &entry).await {
            panic!("a ring entry store to host RAM at {at:#x} failed: {e}");
        }
        let mut w = self.world.borrow_mut();
        w.host.write(at, &entry);
        w.chans[g][c].tail += 1;
    }

    /// A load or store straight at the BAR handler: the exact [`CompleterError`] the rules
    /// give, and for stores that take, what they do.
    fn register(&self, g: usize, bar: u8, offset: u64, width: usize, store: Option<u64>) {
        let expected = expect_access(bar, offset, width, store.is_some(), self.layout.aperture);
        let mut regs = self.registers.borrow_mut();
        regs.0 += 1;
        let gpu = &self.gpus[g];
        let result = match store {
            Some(v) => {
                let data: Vec<u8> = v
                    .to_le_bytes()
                    .iter()
                    .copied()
                    .cycle()
                    .take(width)
                    .collect();
                let r = gpu.mmio_write(bar, offset, &data);
                if r.is_ok() {
                    drop(regs);
                    self.stored(g, bar, offset, &data);
                    regs = self.registers.borrow_mut();
                }
                r.map(|()| data)
            }
            None => {
                let mut buf = vec![0u8; width];
                gpu.mmio_read(bar, offset, &mut buf).map(|()| buf)
            }
        };
        if result.is_err() {
            regs.1 += 1;
        }
        drop(regs);
        let got = result.as_ref().map(|_| ()).map_err(|e| *e);
        match expected {
            Expected::Msix => {}
            Expected::Done(e) => assert_eq!(
                got,
                e,
                "gpu{g} BAR{bar} {} of {width} bytes at {offset:#x}",
                if store.is_some() { "store" } else { "load" }
            ),
        }
        if let (Ok(bytes), None) = (&result, store) {
            self.check_load(g, bar, offset, bytes);
        }
    }

    /// What a store the handler took does.
    fn stored(&self, g: usize, bar: u8, offset: u64, data: &[u8]) {
        if bar == spec::APERTURE_BAR {
            self.world.borrow_mut().device_write(g, offset, data);
            return;
        }
        let first = channel::FIRST;
        let end = channel::base(spec::CHANNELS);
        if (first..end).contains(&offset) {
            let c = ((offset - first) / channel::STRIDE) as usize;
            let r = (offset - first) % channel::STRIDE;
            self.world.borrow_mut().set_register(g, c, r, word(data));
            if r == channel::RESET {
                self.check_reset(g, c);
            }
        }
    }

    /// A load's value against what the model knows.
    fn check_load(&self, g: usize, bar: u8, offset: u64, bytes: &[u8]) {
        let w = self.world.borrow();
        if bar == spec::APERTURE_BAR {
            if w.chaos.is_none() {
                if let Some((at, e, a)) = w.gpus[g].first_difference(offset, bytes) {
                    panic!("gpu{g} BAR1 load at {offset:#x}: byte {at:#x} is {a:#04x}, expected {e:#04x}");
                }
            }
            return;
        }
        if bytes.len() != 8 {
            return; // the MSI-X table and PBA (dword loads)
        }
        let value = word(bytes);
        let config = self.gpus[g].config();
        let expected = match offset {
            reg::ID => Some(spec::GPU_MAGIC),
            reg::MEMORY_SIZE => Some(self.layout.memory),
            reg::APERTURE_SIZE => Some(self.layout.aperture),
            reg::COPY_ENGINES => Some(u64::from(config.timing.copy_engines)),
            reg::DMA_BITS => Some(u64::from(w.dma_bits)),
            reg::CHANNELS => Some(u64::from(spec::CHANNELS)),
            o if (channel::FIRST..channel::base(spec::CHANNELS)).contains(&o) => {
                let c = ((o - channel::FIRST) / channel::STRIDE) as usize;
                let ch = &w.chans[g][c];
                match (o - channel::FIRST) % channel::STRIDE {
                    channel::RESET => Some(0),
                    channel::RING_BASE => Some(ch.ring_base),
                    channel::RING_ENTRIES => Some(ch.ring_entries),
                    channel::NOTIFIER => Some(ch.notifier),
                    channel::PUT => Some(ch.put),
                    _ if w.chaos.is_some() => None,
                    channel::GET => Some(ch.get),
                    channel::STATUS => Some(ch.status),
                    channel::ERROR => Some(ch.error),
                    channel::ERROR_INFO => Some(ch.error_info),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(e) = expected {
            assert_eq!(value, e, "gpu{g} register load at {offset:#x}");
        }
    }

    /// Right after a `RESET`: idle, `GET` = `PUT` = 0, no error.
    fn check_reset(&self, g: usize, c: usize) {
        let got = [
            self.reg(g, c, channel::STATUS),
            self.reg(g, c, channel::GET),
            self.reg(g, c, channel::PUT),
            self.reg(g, c, channel::ERROR),
            self.reg(g, c, channel::ERROR_INFO),
        ];
        assert_eq!(
            got,
            [status::IDLE, 0, 0, 0, 0],
            "gpu{g} channel {c} after RESET: [STATUS, GET, PUT, ERROR, ERROR_INFO]"
        );
    }

    /// Whether channel `c` of GPU `g`, RUNNING, sits in a wait that may last forever.
    fn waits(&self, g: usize, c: usize) -> bool {
        let w = self.world.borrow();
        if w.chaos.is_none() {
            return w.waiting(g, c).is_some() && self.reg(g, c, channel::GET) == w.chans[g][c].get;
        }
        // Without exact predictions: the entry at GET, read back, is an acquire of a word
        // below its value or a launch whose parameters PUT does not cover.
        let (get, put) = (self.reg(g, c, channel::GET), self.reg(g, c, channel::PUT));
        let Some((base, entries)) = w.chans[g][c].latched else {
            return false;
        };
        if !entries.is_power_of_two() {
            return false;
        }
        let at = base.wrapping_add((get % entries) * 64);
        let mut e = [0u8; 64];
        match w.classify(g, at, 64) {
            Where::Host(a) => self.cpu.machine().peek_memory(
                smartio_fabric::HostId(0),
                smartio_platform::PhysAddr(a),
                &mut e,
            ),
            Where::Gpu(p, o) => {
                if self.gpus[p].peek(o, &mut e).is_err() {
                    return true;
                }
            }
            _ => return true, // where the model cannot look: given the benefit of the doubt
        }
        match Command::decode(&e) {
            Ok(Command::Acquire { offset, value }) => {
                let mut b = [0u8; 8];
                self.gpus[g].peek(offset, &mut b).is_ok() && u64::from_le_bytes(b) < value
            }
            Ok(Command::Launch { param_bytes, .. }) => {
                get + 1 + Command::param_entries(param_bytes) > put
            }
            // The entry may have been rewritten since it was fetched.
            _ => true,
        }
    }

    /// Lets the simulation run until every channel is idle, stopped, or in a wait that only
    /// the host can end; then compares every channel with the model.
    async fn settle(&self) {
        for step in 0..=SETTLE_STEPS {
            let busy: Vec<(usize, usize)> = (0..2)
                .flat_map(|g| (0..CHANNELS).map(move |c| (g, c)))
                .filter(|&(g, c)| {
                    self.reg(g, c, channel::STATUS) == status::RUNNING && !self.waits(g, c)
                })
                .collect();
            if busy.is_empty() {
                break;
            }
            if step == SETTLE_STEPS {
                let (g, c) = busy[0];
                let w = self.world.borrow();
                panic!(
                    "gpu{g} channel {c} still RUNNING after {} µs with nothing to wait for: \
                     GET {} PUT {} (model: {:?})",
                    SETTLE_STEPS * 5,
                    self.reg(g, c, channel::GET),
                    self.reg(g, c, channel::PUT),
                    w.chans[g][c]
                );
            }
            self.cpu.sleep(SETTLE_STEP).await;
        }
        self.cpu.sleep(LAND).await;
        for g in 0..2 {
            for c in 0..CHANNELS {
                self.check_channel(g, c);
            }
        }
    }

    fn check_channel(&self, g: usize, c: usize) {
        let regs = [
            channel::RING_BASE,
            channel::RING_ENTRIES,
            channel::PUT,
            channel::GET,
            channel::STATUS,
            channel::ERROR,
            channel::ERROR_INFO,
            channel::NOTIFIER,
        ]
        .map(|r| self.reg(g, c, r));
        // A PUT written behind GET later (a stopped or blocked channel) leaves GET ahead of
        // it; GET itself never moves past a PUT the host wrote.
        let [_, _, _, get, st, error, info, notifier] = regs;
        let w = self.world.borrow();
        let ch = &w.chans[g][c];
        let at = format!("gpu{g} channel {c}");
        assert!(
            [status::IDLE, status::RUNNING, status::ERROR].contains(&st),
            "{at}: STATUS {st}"
        );
        if st == status::ERROR {
            let Some(code) = ErrorCode::from_register(error) else {
                panic!("{at}: ERROR holds {error}, no error code");
            };
            let notified = *self.stopped.borrow_mut()[g][c].get_or_insert(notifier);
            if notified == self.layout.notice(g, c) {
                let mut b = [0u8; spec::ErrorNotice::SIZE];
                self.cpu.machine().peek_memory(
                    smartio_fabric::HostId(0),
                    smartio_platform::PhysAddr(notified),
                    &mut b,
                );
                let notice = spec::ErrorNotice::decode(&b);
                let expected = spec::ErrorNotice {
                    code,
                    info,
                    entry: get,
                };
                assert_eq!(notice, Some(expected), "{at}: the notice at NOTIFIER");
            }
        } else {
            self.stopped.borrow_mut()[g][c] = None;
            assert_eq!(
                (error, info),
                (0, 0),
                "{at}: ERROR and ERROR_INFO without an error"
            );
        }
        let bad_put = st == status::ERROR && error == ErrorCode::BadPut as u64;
        assert!(
            get <= ch.max_put || bad_put,
            "{at}: GET {get} passed every PUT written since the reset (at most {})",
            ch.max_put
        );
        if w.chaos.is_some() {
            return;
        }
        let expected = [
            ch.ring_base,
            ch.ring_entries,
            ch.put,
            ch.get,
            ch.status,
            ch.error,
            ch.error_info,
            ch.notifier,
        ];
        assert_eq!(
            regs, expected,
            "{at}: [RING_BASE, RING_ENTRIES, PUT, GET, STATUS, ERROR, ERROR_INFO, NOTIFIER] \
             differ from the model"
        );
    }
}

/// A raw entry that decodes to a command beyond the target's bounds (a copy of more than
/// 64 KiB that could pass its checks, a launch of more than 8 threads) gets a non-zero
/// unused argument, which makes it a bad command with the same opcode.
fn sanitize(mut e: [u8; 64]) -> [u8; 64] {
    let too_big = match Command::decode(&e) {
        Ok(Command::Copy { len, .. }) => len > super::ops::MAX_COPY && len < 1 << 47,
        Ok(Command::Launch { threads, .. }) => threads > super::ops::MAX_THREADS,
        _ => false,
    };
    if too_big {
        e[63] = 1;
    }
    e
}

/// What an access at a BAR should give.
enum Expected {
    /// The MSI-X table or PBA (the PCI rules of `msix.rs`, not restated here).
    Msix,
    /// This result.
    Done(Result<(), CompleterError>),
}

/// The BAR rules of the spec: registers 8 bytes wide and aligned; global registers and
/// `GET`, `STATUS`, `ERROR`, `ERROR_INFO` read-only; BAR1 up to the aperture.
fn expect_access(bar: u8, offset: u64, width: usize, store: bool, aperture: u64) -> Expected {
    use CompleterError::*;
    let done = Expected::Done;
    match bar {
        spec::REGISTER_BAR => {
            let table = spec::MSIX_TABLE..spec::MSIX_TABLE + u64::from(spec::CHANNELS) * 16;
            if table.contains(&offset) {
                return Expected::Msix;
            }
            if (spec::MSIX_PBA..spec::MSIX_PBA + 8).contains(&offset) {
                return if store {
                    done(Err(ReadOnly))
                } else {
                    Expected::Msix
                };
            }
            let width_ok = width == 8 && offset.is_multiple_of(8);
            if offset <= reg::CHANNELS {
                return done(match (width_ok, store) {
                    (false, _) => Err(BadWidth(width)),
                    (true, true) => Err(ReadOnly),
                    (true, false) => Ok(()),
                });
            }
            if !(channel::FIRST..channel::base(spec::CHANNELS)).contains(&offset) {
                return done(Err(OutOfRange));
            }
            if !width_ok {
                return done(Err(BadWidth(width)));
            }
            let r = (offset - channel::FIRST) % channel::STRIDE;
            done(match r {
                channel::GET | channel::STATUS | channel::ERROR | channel::ERROR_INFO if store => {
                    Err(ReadOnly)
                }
                r if r <= channel::RESET => Ok(()),
                _ => Err(OutOfRange),
            })
        }
        spec::APERTURE_BAR => done(match offset.checked_add(width as u64) {
            Some(end) if end <= aperture => Ok(()),
            _ => Err(OutOfRange),
        }),
        _ => done(Err(OutOfRange)),
    }
}
