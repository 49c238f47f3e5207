//! The reference model: what each channel of both GPUs should do with what the host wrote,
//! executed in order on [`Shadow`]s of host RAM and device memory, independently of the
//! device model (the spec's rules restated: ring validation, `PUT` checks, fetch batches,
//! decode, copies, launches of the target's kernels, releases, acquires, notices).
//!
//! The harness lets the simulation settle after every operation, so channels run one at a
//! time — except when one channel's write wakes another blocked on an acquire while it still
//! has entries to run. Their order is then the simulation's to choose, and the model gives up
//! exact predictions for the rest of the input (`chaos`), as it does when an address lands
//! somewhere it cannot predict (another device's registers, across the end of an aperture).

use super::shadow::Shadow;
use smartio_devices::gpu::spec::{
    self, status, Command, ErrorCode, GpuAddr, ENTRY_SIZE, FETCH_ENTRIES,
};
use std::collections::VecDeque;

/// Channels per GPU the harness drives.
pub const CHANNELS: usize = spec::CHANNELS as usize;

/// Where a bus access by a GPU lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// Host RAM at this physical address (the whole range).
    Host(u64),
    /// GPU `g`'s memory through its aperture, at this offset (the whole range).
    Gpu(usize, u64),
    /// Nobody claims it: the access fails.
    Unmapped,
    /// Somewhere the model does not follow.
    Uncertain,
}

/// Says where a bus access of `len` bytes by GPU `g` lands (the fabric's routing).
pub type Classify = Box<dyn Fn(usize, u64, u64) -> Where>;

/// The kernels the target loads, in load order (their ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// `store`: thread `t` stores `value + t` at `address + 8 t`.
    Store,
    /// `wait`: waits for a device word to reach a value, bounded.
    Wait,
    /// `load`: loads a word.
    Load,
}

/// The kernels by id.
pub const KERNELS: [(&str, KernelKind); 3] = [
    ("store", KernelKind::Store),
    ("wait", KernelKind::Wait),
    ("load", KernelKind::Load),
];

/// Word `i` of a launch's parameters (zero-padded).
pub fn param_word(params: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    for (k, b) in w.iter_mut().enumerate() {
        *b = params.get(i * 8 + k).copied().unwrap_or(0);
    }
    u64::from_le_bytes(w)
}

/// A kernel's address from its parameters: word `i`, device offset when word `i + 1` is 1.
pub fn param_addr(params: &[u8], i: usize) -> GpuAddr {
    let a = param_word(params, i);
    if param_word(params, i + 1) == 1 {
        GpuAddr::Device(a)
    } else {
        GpuAddr::Bus(smartio_platform::BusAddr(a))
    }
}

/// What a blocked channel waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// An acquire: the device word at `offset` to reach `value`.
    Acquire {
        /// Offset.
        offset: u64,
        /// Value.
        value: u64,
    },
    /// A `PUT` covering a launch's parameter entries.
    Params,
    /// Nothing any more: the acquire at `GET` was satisfied and completes when the channel
    /// next runs, whatever `PUT` says by then (the entry is already fetched).
    Satisfied,
}

/// One channel as the model sees it.
#[derive(Debug, Clone, Default)]
pub struct Chan {
    /// `RING_BASE`.
    pub ring_base: u64,
    /// `RING_ENTRIES`.
    pub ring_entries: u64,
    /// `NOTIFIER`.
    pub notifier: u64,
    /// `PUT`.
    pub put: u64,
    /// `GET`.
    pub get: u64,
    /// `STATUS`.
    pub status: u64,
    /// `ERROR`.
    pub error: u64,
    /// `ERROR_INFO`.
    pub error_info: u64,
    ring: Option<(u64, u64)>,
    front: VecDeque<[u8; ENTRY_SIZE as usize]>,
    next: u64,
    /// What it is blocked on.
    pub wait: Option<Wait>,
    /// The host's tail: entries pushed since the last reset.
    pub tail: u64,
    /// The largest `PUT` written since the last reset.
    pub max_put: u64,
    /// `RING_BASE` and `RING_ENTRIES` at the first `PUT` since the last reset (the ring the
    /// GPU latched, if valid); `None` until a `PUT` is written.
    pub latched: Option<(u64, u64)>,
}

/// Why an entry stopped its channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stop(ErrorCode, u64);

/// Both GPUs, their channels and every memory they touch, as they should be.
pub struct World {
    /// Host RAM.
    pub host: Shadow,
    /// Device memory of gpu0 and gpu1.
    pub gpus: [Shadow; 2],
    /// The channels.
    pub chans: [[Chan; CHANNELS]; 2],
    /// Bytes of device memory.
    pub memory: u64,
    /// The GPUs' DMA address bits.
    pub dma_bits: u8,
    /// Exact predictions were given up (and why).
    pub chaos: Option<String>,
    /// Entries executed (for the outcome).
    pub executed: u64,
    /// Errors per code (for the outcome).
    pub errors: [u32; 9],
    classify: Classify,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("chans", &self.chans)
            .field("chaos", &self.chaos)
            .finish()
    }
}

/// What one step of a channel did.
enum Step {
    /// Nothing to do.
    Idle,
    /// Executed an entry.
    Ran,
    /// Blocked.
    Blocked(Wait),
    /// Stopped on an error.
    Stopped(Stop),
}

impl World {
    /// Fresh memories and channels.
    pub fn new(memory: u64, dma_bits: u8, classify: Classify) -> Self {
        World {
            host: Shadow::default(),
            gpus: [Shadow::default(), Shadow::default()],
            chans: Default::default(),
            memory,
            dma_bits,
            chaos: None,
            executed: 0,
            errors: [0; 9],
            classify,
        }
    }

    /// Gives up exact predictions.
    pub fn give_up(&mut self, why: impl Into<String>) {
        if self.chaos.is_none() {
            self.chaos = Some(why.into());
        }
    }

    fn below_limit(&self, addr: u64, len: u64) -> bool {
        if self.dma_bits >= 64 {
            return true;
        }
        let limit = 1u64 << self.dma_bits;
        let last = addr.saturating_add(len.saturating_sub(1));
        addr < limit && last < limit
    }

    fn device_fits(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|e| e <= self.memory)
    }

    /// Reads `len` bytes at bus address `addr` for GPU `g`; `None` on a failed access.
    fn bus_read(&mut self, g: usize, addr: u64, len: u64) -> Option<Vec<Option<u8>>> {
        match (self.classify)(g, addr, len) {
            Where::Host(a) => Some(self.host.read_maybe(a, len)),
            Where::Gpu(p, o) => Some(self.gpus[p].read_maybe(o, len)),
            Where::Unmapped => None,
            Where::Uncertain => {
                self.give_up(format!("gpu{g} read {len} bytes at {addr:#x}"));
                Some(vec![None; len as usize])
            }
        }
    }

    /// Writes at bus address `addr` for GPU `g`; false on a failed access.
    fn bus_write(&mut self, g: usize, addr: u64, data: &[Option<u8>]) -> bool {
        let len = data.len() as u64;
        match (self.classify)(g, addr, len) {
            Where::Host(a) => {
                self.host.write_maybe(a, data);
                true
            }
            Where::Gpu(p, o) => {
                self.gpus[p].write_maybe(o, data);
                true
            }
            Where::Unmapped => false,
            Where::Uncertain => {
                self.give_up(format!("gpu{g} wrote {len} bytes at {addr:#x}"));
                true
            }
        }
    }

    /// A register write the host made (direct or over the fabric), then what follows.
    pub fn set_register(&mut self, g: usize, c: usize, reg: u64, value: u64) {
        let ch = &mut self.chans[g][c];
        match reg {
            spec::channel::RING_BASE => ch.ring_base = value,
            spec::channel::RING_ENTRIES => ch.ring_entries = value,
            spec::channel::NOTIFIER => ch.notifier = value,
            spec::channel::PUT => {
                ch.put = value;
                if ch.latched.is_none() {
                    ch.latched = Some((ch.ring_base, ch.ring_entries));
                }
                ch.max_put = ch.max_put.max(value);
                if ch.status != status::ERROR && value != ch.get {
                    ch.status = status::RUNNING;
                }
            }
            spec::channel::RESET => {
                *ch = Chan {
                    ring_base: ch.ring_base,
                    ring_entries: ch.ring_entries,
                    notifier: ch.notifier,
                    ..Chan::default()
                };
            }
            _ => {}
        }
        self.progress();
    }

    /// A write to GPU `g`'s memory from outside a channel (BAR1), then what follows.
    pub fn device_write(&mut self, g: usize, offset: u64, data: &[u8]) {
        self.gpus[g].write(offset, data);
        self.wake(g, None);
        self.progress();
    }

    /// Unblocks GPU `g`'s channels whose acquire is now satisfied. When `running` (a channel
    /// that still has entries after this one) exists, the order is no longer the model's.
    fn wake(&mut self, g: usize, running: Option<usize>) {
        for c in 0..CHANNELS {
            let Some(Wait::Acquire { offset, value }) = self.chans[g][c].wait else {
                continue;
            };
            match self.gpus[g].read_u64(offset) {
                Some(v) if v >= value => {
                    self.chans[g][c].wait = Some(Wait::Satisfied);
                    if let Some(r) = running {
                        self.give_up(format!(
                            "gpu{g} channel {c} woken while channel {r} still runs"
                        ));
                    }
                }
                Some(_) => {}
                None => self.give_up(format!(
                    "gpu{g} channel {c} waits on an unknown word at {offset:#x}"
                )),
            }
        }
    }

    /// Runs every channel that can run until none can.
    pub fn progress(&mut self) {
        let mut budget = 1_000_000u32;
        loop {
            let mut ran = false;
            for g in 0..2 {
                for c in 0..CHANNELS {
                    while self.chaos.is_none() && budget > 0 {
                        budget -= 1;
                        match self.step(g, c) {
                            Step::Idle => break,
                            Step::Ran => ran = true,
                            Step::Blocked(w) => {
                                self.chans[g][c].wait = Some(w);
                                break;
                            }
                            Step::Stopped(stop) => {
                                self.halt(g, c, stop);
                                ran = true;
                                break;
                            }
                        }
                    }
                }
            }
            if !ran || self.chaos.is_some() || budget == 0 {
                break;
            }
        }
        if budget == 0 {
            self.give_up("more than a million entries");
        }
    }

    fn halt(&mut self, g: usize, c: usize, Stop(code, info): Stop) {
        self.errors[code as usize] += 1;
        let ch = &mut self.chans[g][c];
        ch.status = status::ERROR;
        ch.error = code as u64;
        ch.error_info = info;
        ch.wait = None;
        let (notifier, entry) = (ch.notifier, ch.get);
        if notifier != 0 && self.below_limit(notifier, spec::ErrorNotice::SIZE as u64) {
            let notice = spec::ErrorNotice { code, info, entry }.encode();
            let data: Vec<Option<u8>> = notice.iter().map(|&b| Some(b)).collect();
            // A notice that cannot be delivered is dropped.
            let _ = self.bus_write(g, notifier, &data);
        }
    }

    fn ring(&mut self, g: usize, c: usize) -> Result<Option<(u64, u64)>, Stop> {
        let ch = &mut self.chans[g][c];
        if let Some(r) = ch.ring {
            return Ok(Some(r));
        }
        if ch.latched.is_none() {
            return Ok(None);
        }
        let entries = ch.ring_entries;
        if !entries.is_power_of_two() || !spec::RING_ENTRIES.contains(&entries) {
            return Err(Stop(ErrorCode::BadRing, entries));
        }
        let base = ch.ring_base;
        if !base.is_multiple_of(ENTRY_SIZE) || base.checked_add(entries * ENTRY_SIZE).is_none() {
            return Err(Stop(ErrorCode::BadRing, base));
        }
        ch.ring = Some((base, entries));
        Ok(Some((base, entries)))
    }

    fn get_put(&self, g: usize, c: usize, entries: u64) -> Result<(u64, u64), Stop> {
        let ch = &self.chans[g][c];
        if ch.put < ch.get || ch.put - ch.get > entries {
            return Err(Stop(ErrorCode::BadPut, ch.put));
        }
        Ok((ch.get, ch.put))
    }

    /// One fetch batch from the channel's `next`, not past `put` nor across the wrap.
    fn fetch(&mut self, g: usize, c: usize, ring: (u64, u64), put: u64) -> Result<(), Stop> {
        let (base, entries) = ring;
        let from = self.chans[g][c].next;
        let slot = from % entries;
        let n = (put - from).min(FETCH_ENTRIES).min(entries - slot);
        let addr = base + slot * ENTRY_SIZE;
        if !self.below_limit(addr, n * ENTRY_SIZE) {
            return Err(Stop(ErrorCode::AddressLimit, addr));
        }
        let Some(bytes) = self.bus_read(g, addr, n * ENTRY_SIZE) else {
            return Err(Stop(ErrorCode::FetchFailed, addr));
        };
        if bytes.iter().any(Option::is_none) {
            self.give_up(format!("gpu{g} channel {c} fetched unknown ring bytes"));
        }
        let ch = &mut self.chans[g][c];
        for chunk in bytes.chunks_exact(ENTRY_SIZE as usize) {
            let mut e = [0u8; ENTRY_SIZE as usize];
            for (d, s) in e.iter_mut().zip(chunk) {
                *d = s.unwrap_or(0);
            }
            ch.front.push_back(e);
        }
        ch.next = from + n;
        Ok(())
    }

    fn step(&mut self, g: usize, c: usize) -> Step {
        let ch = &self.chans[g][c];
        if ch.status == status::ERROR {
            return Step::Idle;
        }
        match ch.wait {
            Some(Wait::Acquire { .. }) => return Step::Idle,
            // A launch waiting for its parameters checks each PUT (a bad one stops it) and
            // goes on once one covers the next entry to fetch — even a PUT moved back to
            // GET leaves it waiting, its launch entry already fetched.
            Some(Wait::Params) => match ch.ring {
                Some((_, entries)) => match self.get_put(g, c, entries) {
                    Err(stop) => return Step::Stopped(stop),
                    Ok((_, put)) if put <= ch.next => return Step::Idle,
                    Ok(_) => self.chans[g][c].wait = None,
                },
                None => return Step::Idle,
            },
            Some(Wait::Satisfied) => {
                let ch = &mut self.chans[g][c];
                ch.wait = None;
                ch.front.pop_front();
                ch.get += 1;
                if ch.get == ch.put {
                    ch.status = status::IDLE;
                }
                self.executed += 1;
                return Step::Ran;
            }
            None => {}
        }
        match self.try_step(g, c) {
            Ok(s) => s,
            Err(stop) => Step::Stopped(stop),
        }
    }

    fn try_step(&mut self, g: usize, c: usize) -> Result<Step, Stop> {
        let Some(ring) = self.ring(g, c)? else {
            return Ok(Step::Idle);
        };
        let (get, put) = self.get_put(g, c, ring.1)?;
        if get == put {
            self.chans[g][c].status = status::IDLE;
            return Ok(Step::Idle);
        }
        self.chans[g][c].status = status::RUNNING;
        if self.chans[g][c].front.is_empty() {
            self.chans[g][c].next = get;
            self.fetch(g, c, ring, put)?;
        }
        let Some(&entry) = self.chans[g][c].front.front() else {
            return Ok(Step::Idle);
        };
        let opcode = u64::from(u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]));
        let command = Command::decode(&entry).map_err(|_| Stop(ErrorCode::BadCommand, opcode))?;
        let mut params = Vec::new();
        let mut extra = 0;
        if let Command::Launch { param_bytes, .. } = command {
            extra = Command::param_entries(param_bytes);
            while (self.chans[g][c].front.len() as u64) < 1 + extra {
                let (_, put) = self.get_put(g, c, ring.1)?;
                if put <= self.chans[g][c].next {
                    return Ok(Step::Blocked(Wait::Params));
                }
                self.fetch(g, c, ring, put)?;
            }
            for e in self.chans[g][c].front.iter().skip(1).take(extra as usize) {
                params.extend_from_slice(e);
            }
            params.truncate(param_bytes as usize);
        }
        if let Command::Acquire { offset, value } = command {
            if !self.device_fits(offset, 8) {
                return Err(Stop(ErrorCode::CopyFailed, offset));
            }
            match self.gpus[g].read_u64(offset) {
                Some(v) if v >= value => {}
                Some(_) => return Ok(Step::Blocked(Wait::Acquire { offset, value })),
                None => {
                    self.give_up(format!("gpu{g} acquires an unknown word at {offset:#x}"));
                    return Ok(Step::Idle);
                }
            }
        }
        let more = get + 1 + extra < put;
        self.execute(g, c, command, &params, more)?;
        let ch = &mut self.chans[g][c];
        ch.front.drain(..1 + extra as usize);
        ch.get = get + 1 + extra;
        if ch.get == ch.put {
            ch.status = status::IDLE;
        }
        self.executed += 1;
        Ok(Step::Ran)
    }

    /// Writes at a GPU address for channel `c` of GPU `g`; `more`: the channel has entries
    /// after this one (a woken channel then runs alongside it).
    fn write_at(
        &mut self,
        g: usize,
        c: usize,
        at: GpuAddr,
        data: &[Option<u8>],
        more: bool,
    ) -> Result<(), Stop> {
        let len = data.len() as u64;
        match at {
            GpuAddr::Device(o) => {
                if !self.device_fits(o, len) {
                    return Err(Stop(ErrorCode::CopyFailed, o));
                }
                self.gpus[g].write_maybe(o, data);
                self.wake(g, more.then_some(c));
            }
            GpuAddr::Bus(a) => {
                let a = a.get();
                if !self.below_limit(a, len) {
                    return Err(Stop(ErrorCode::AddressLimit, a));
                }
                if !self.bus_write(g, a, data) {
                    return Err(Stop(ErrorCode::CopyFailed, a));
                }
                if let Where::Gpu(p, _) = (self.classify)(g, a, len) {
                    self.wake(p, more.then_some(c));
                }
            }
        }
        Ok(())
    }

    fn execute(
        &mut self,
        g: usize,
        c: usize,
        command: Command,
        params: &[u8],
        more: bool,
    ) -> Result<(), Stop> {
        match command {
            Command::Nop | Command::Acquire { .. } => Ok(()),
            Command::Copy { src, dst, len } => self.copy(g, c, src, dst, len, more),
            Command::Timestamp { dst } => {
                let data = [None; 8];
                self.write_at(g, c, dst, &data, more)
            }
            Command::Release { dst, value, .. } => {
                let data: Vec<Option<u8>> = value.to_le_bytes().iter().map(|&b| Some(b)).collect();
                self.write_at(g, c, dst, &data, more)
            }
            Command::Launch {
                kernel, threads, ..
            } => {
                let Some(&(_, kind)) = KERNELS.get(kernel.0 as usize) else {
                    return Err(Stop(ErrorCode::UnknownKernel, u64::from(kernel.0)));
                };
                self.launch(g, c, kind, threads, params, more)
            }
        }
    }

    fn check_end(&self, at: GpuAddr, len: u64) -> Result<(), Stop> {
        match at {
            GpuAddr::Device(o) if !self.device_fits(o, len) => Err(Stop(ErrorCode::CopyFailed, o)),
            GpuAddr::Device(_) => Ok(()),
            GpuAddr::Bus(a) if !self.below_limit(a.get(), len) => {
                Err(Stop(ErrorCode::AddressLimit, a.get()))
            }
            GpuAddr::Bus(a) if a.get().checked_add(len).is_none() => {
                Err(Stop(ErrorCode::CopyFailed, a.get()))
            }
            GpuAddr::Bus(_) => Ok(()),
        }
    }

    fn copy(
        &mut self,
        g: usize,
        c: usize,
        src: GpuAddr,
        dst: GpuAddr,
        len: u64,
        more: bool,
    ) -> Result<(), Stop> {
        self.check_end(src, len)?;
        self.check_end(dst, len)?;
        if len > super::ops::MAX_COPY {
            self.give_up(format!("a copy of {len} bytes passed its checks"));
            return Ok(());
        }
        let data = match src {
            GpuAddr::Device(o) => self.gpus[g].read_maybe(o, len),
            GpuAddr::Bus(a) => self
                .bus_read(g, a.get(), len)
                .ok_or(Stop(ErrorCode::CopyFailed, a.get()))?,
        };
        self.write_at(g, c, dst, &data, more)
    }

    fn launch(
        &mut self,
        g: usize,
        c: usize,
        kind: KernelKind,
        threads: u32,
        params: &[u8],
        more: bool,
    ) -> Result<(), Stop> {
        match kind {
            KernelKind::Store => {
                let at = param_addr(params, 0);
                let value = param_word(params, 2);
                // Threads start in order; the first to fault aborts the rest before their
                // device stores (each waits `memory_access` first); bus stores already
                // issued by earlier threads may land.
                let fault = (0..u64::from(threads)).find_map(|t| {
                    self.thread_store(g, at.offset(8 * t))
                        .err()
                        .map(|s| (t, s.1))
                });
                if let Some((failed, info)) = fault {
                    for t in 0..failed {
                        if let GpuAddr::Bus(a) = at.offset(8 * t) {
                            match (self.classify)(g, a.get(), 8) {
                                Where::Host(h) => self.host.forget(h, 8),
                                Where::Gpu(p, o) => {
                                    self.gpus[p].forget(o, 8);
                                    self.wake(p, None);
                                }
                                _ => {}
                            }
                        }
                    }
                    return Err(Stop(ErrorCode::KernelFault, info));
                }
                for t in 0..u64::from(threads) {
                    let addr = at.offset(8 * t);
                    let data: Vec<Option<u8>> = value
                        .wrapping_add(t)
                        .to_le_bytes()
                        .iter()
                        .map(|&b| Some(b))
                        .collect();
                    self.write_at(g, c, addr, &data, more)
                        .map_err(|s| Stop(ErrorCode::KernelFault, s.1))?;
                }
                Ok(())
            }
            KernelKind::Wait => {
                let offset = param_word(params, 0);
                if !self.device_fits(offset, 8) {
                    return Err(Stop(ErrorCode::KernelFault, offset));
                }
                Ok(())
            }
            KernelKind::Load => {
                let at = param_addr(params, 0);
                match at {
                    GpuAddr::Device(o) if !self.device_fits(o, 8) => {
                        Err(Stop(ErrorCode::KernelFault, o))
                    }
                    GpuAddr::Device(_) => Ok(()),
                    GpuAddr::Bus(a) => {
                        if !self.below_limit(a.get(), 8) || self.bus_read(g, a.get(), 8).is_none() {
                            return Err(Stop(ErrorCode::KernelFault, a.get()));
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// Whether one thread's 8-byte store at `addr` can be made (without making it).
    fn thread_store(&mut self, g: usize, addr: GpuAddr) -> Result<(), Stop> {
        match addr {
            GpuAddr::Device(o) if !self.device_fits(o, 8) => Err(Stop(ErrorCode::KernelFault, o)),
            GpuAddr::Device(_) => Ok(()),
            GpuAddr::Bus(a) => {
                let a = a.get();
                if !self.below_limit(a, 8) {
                    return Err(Stop(ErrorCode::KernelFault, a));
                }
                match (self.classify)(g, a, 8) {
                    Where::Unmapped => Err(Stop(ErrorCode::KernelFault, a)),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Where a bus access of `len` bytes by GPU `g` lands.
    pub fn classify(&self, g: usize, addr: u64, len: u64) -> Where {
        (self.classify)(g, addr, len)
    }

    /// The channel's pending work is a wait the simulation may also sit in forever.
    pub fn waiting(&self, g: usize, c: usize) -> Option<Wait> {
        self.chans[g][c].wait
    }
}
