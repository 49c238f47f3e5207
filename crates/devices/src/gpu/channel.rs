//! A channel's front end: the ring registers, and the task that fetches entries by DMA,
//! decodes them and executes them in order (spec: [`super::spec::channel`]).
//!
//! The pipeline per entry is decode → validate → execute → advance `GET`:
//!
//! 1. On the first `PUT` after a reset the ring (`RING_BASE`, `RING_ENTRIES`) is validated
//!    and latched ([`ErrorCode::BadRing`]); every `PUT` is checked against `GET`
//!    ([`ErrorCode::BadPut`]).
//! 2. Entries `[GET, PUT)` are fetched with one DMA read per batch of at most
//!    [`FETCH_ENTRIES`], never across the ring's wrap ([`ErrorCode::FetchFailed`]).
//! 3. Each entry costs `command`, is decoded ([`ErrorCode::BadCommand`], info: the opcode),
//!    then executed; a launch's parameter entries follow it (fetched when the batch ended
//!    before them; the front end waits for a `PUT` that covers them).
//! 4. An error stops the channel: `STATUS`, `ERROR`, `ERROR_INFO` are set, the notice goes
//!    to `NOTIFIER` (when non-zero) and the channel's vector is signalled; nothing more runs
//!    until `RESET`.
//!
//! Invariant: a reset wins. The channel task races its work against the channel's reset
//! signal, checked first, so work in flight when `RESET` is written is dropped before it can
//! touch the reset registers.

use super::spec::{
    self, status, Command, ErrorCode, ErrorNotice, GpuAddr, ENTRY_SIZE, FETCH_ENTRIES,
};
use super::Gpu;
use smartio_platform::Broadcast;
use smartio_platform::{race, BusAddr, Clock, Notify, Port, Spawner};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// A validated ring: where it is and how many entries it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ring {
    /// Bus address of entry 0 (64-byte aligned).
    pub base: u64,
    /// Entries (a power of two in [`spec::RING_ENTRIES`]).
    pub entries: u64,
}

/// A channel's registers as software sees them, and what the front end latched.
#[derive(Debug, Default, Clone)]
pub(super) struct ChannelRegs {
    /// `RING_BASE`.
    pub ring_base: u64,
    /// `RING_ENTRIES`.
    pub ring_entries: u64,
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
    /// `NOTIFIER`.
    pub notifier: u64,
    /// A `PUT` was written since the last reset.
    pub put_written: bool,
    /// The ring validated at the first `PUT` after the last reset.
    pub ring: Option<Ring>,
}

impl ChannelRegs {
    /// The state after a `RESET`: the ring set-up and the notifier stay, everything else is
    /// cleared.
    pub fn after_reset(&self) -> ChannelRegs {
        ChannelRegs {
            ring_base: self.ring_base,
            ring_entries: self.ring_entries,
            notifier: self.notifier,
            ..ChannelRegs::default()
        }
    }
}

/// One channel: registers, its doorbell and its reset signal.
#[derive(Debug)]
pub(super) struct Channel {
    pub regs: RefCell<ChannelRegs>,
    /// `PUT` was written.
    pub doorbell: Notify,
    /// `RESET` was written (every waiter — the channel task, its launch's threads — sees it).
    pub reset: Broadcast,
}

impl Channel {
    pub fn new() -> Self {
        Self {
            regs: RefCell::new(ChannelRegs::default()),
            doorbell: Notify::new(),
            reset: Broadcast::new("a reset of the GPU channel"),
        }
    }

    /// A `PUT` write: records it and rings the doorbell.
    pub fn put(&self, value: u64) {
        {
            let mut r = self.regs.borrow_mut();
            r.put = value;
            r.put_written = true;
            if r.status != status::ERROR && value != r.get {
                r.status = status::RUNNING;
            }
        }
        self.doorbell.notify();
    }

    /// A `RESET` write: stops the channel and drops its work.
    pub fn reset(&self) {
        let after = self.regs.borrow().after_reset();
        *self.regs.borrow_mut() = after;
        self.reset.fire();
        self.doorbell.notify();
    }
}

/// Why a channel stops: the code and its detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stop {
    pub code: ErrorCode,
    pub info: u64,
}

impl Stop {
    pub fn new(code: ErrorCode, info: u64) -> Self {
        Self { code, info }
    }
}

/// Entries fetched but not yet executed, and where the next fetch starts.
#[derive(Debug, Default)]
struct Front {
    entries: VecDeque<[u8; ENTRY_SIZE as usize]>,
    next: u64,
}

impl<P: Port + Clock + Spawner + Clone + 'static> Gpu<P> {
    /// Channel `c`'s task: serves its ring until a reset, then starts over. Runs forever.
    pub(super) async fn channel_task(self: Rc<Self>, c: u16, port: P) {
        let ch = &self.channels[usize::from(c)];
        loop {
            let epoch = ch.reset.generation();
            // The reset is polled first: work it interrupts is never resumed.
            let _ = race(ch.reset.fired_since(epoch), self.serve(c, &port)).await;
        }
    }

    async fn serve(&self, c: u16, port: &P) {
        let ch = &self.channels[usize::from(c)];
        let mut front = Front::default();
        loop {
            match self.step(c, port, &mut front).await {
                Ok(true) => {}
                Ok(false) => {
                    {
                        let mut r = ch.regs.borrow_mut();
                        if r.status == status::RUNNING && r.put == r.get {
                            r.status = status::IDLE;
                        }
                    }
                    ch.doorbell.notified().await;
                }
                Err(stop) => {
                    self.halt(c, stop, port).await;
                    loop {
                        ch.doorbell.notified().await;
                    }
                }
            }
        }
    }

    /// The latched ring, validating it on the first `PUT` after a reset; `None` before it.
    fn ring(&self, c: u16) -> Result<Option<Ring>, Stop> {
        let mut r = self.channels[usize::from(c)].regs.borrow_mut();
        if let Some(ring) = r.ring {
            return Ok(Some(ring));
        }
        if !r.put_written {
            return Ok(None);
        }
        let entries = r.ring_entries;
        if !entries.is_power_of_two() || !spec::RING_ENTRIES.contains(&entries) {
            return Err(Stop::new(ErrorCode::BadRing, entries));
        }
        let base = r.ring_base;
        let fits = base.checked_add(entries * ENTRY_SIZE).is_some();
        if !base.is_multiple_of(ENTRY_SIZE) || !fits {
            return Err(Stop::new(ErrorCode::BadRing, base));
        }
        let ring = Ring { base, entries };
        r.ring = Some(ring);
        Ok(Some(ring))
    }

    /// `(GET, PUT)`, or [`ErrorCode::BadPut`] when `PUT` is behind `GET` or more than a ring
    /// ahead of it.
    fn get_put(&self, c: u16, ring: Ring) -> Result<(u64, u64), Stop> {
        let r = self.channels[usize::from(c)].regs.borrow();
        if r.put < r.get || r.put - r.get > ring.entries {
            return Err(Stop::new(ErrorCode::BadPut, r.put));
        }
        Ok((r.get, r.put))
    }

    /// Executes the entry at `GET` if there is one; `Ok(false)` when there is nothing to do.
    async fn step(&self, c: u16, port: &P, front: &mut Front) -> Result<bool, Stop> {
        let ch = &self.channels[usize::from(c)];
        let Some(ring) = self.ring(c)? else {
            return Ok(false);
        };
        let (get, put) = self.get_put(c, ring)?;
        if get == put {
            return Ok(false);
        }
        ch.regs.borrow_mut().status = status::RUNNING;
        if front.entries.is_empty() {
            front.next = get;
            self.fetch(ring, put, front, port).await?;
        }
        let Some(entry) = front.entries.pop_front() else {
            return Ok(false); // unreachable: a fetch of at least one entry succeeded
        };
        port.spend("channel: decode a command", self.config.timing.command)
            .await;
        let command = Command::decode(&entry)
            .map_err(|e| Stop::new(ErrorCode::BadCommand, e.opcode().into()))?;
        let (extra, params) = match command {
            Command::Launch { param_bytes, .. } => {
                let extra = Command::param_entries(param_bytes);
                self.fetch_params(c, ring, get, extra, front, port).await?;
                let mut params = Vec::with_capacity(extra as usize * ENTRY_SIZE as usize);
                for e in front.entries.drain(..extra as usize) {
                    params.extend_from_slice(&e);
                }
                params.truncate(param_bytes as usize);
                (extra, params)
            }
            _ => (0, Vec::new()),
        };
        self.execute(c, command, params, port).await?;
        ch.regs.borrow_mut().get = get + 1 + extra;
        Ok(true)
    }

    /// Makes sure the `extra` parameter entries after the launch at `get` are fetched,
    /// waiting for a `PUT` that covers them.
    async fn fetch_params(
        &self,
        c: u16,
        ring: Ring,
        get: u64,
        extra: u64,
        front: &mut Front,
        port: &P,
    ) -> Result<(), Stop> {
        let ch = &self.channels[usize::from(c)];
        while (front.entries.len() as u64) < extra {
            let (_, put) = self.get_put(c, ring)?;
            if put <= front.next {
                ch.doorbell.notified().await;
                continue;
            }
            debug_assert!(front.next > get);
            self.fetch(ring, put, front, port).await?;
        }
        Ok(())
    }

    /// One DMA read of up to [`FETCH_ENTRIES`] entries from `front.next`, not past `put` nor
    /// across the ring's wrap.
    async fn fetch(&self, ring: Ring, put: u64, front: &mut Front, port: &P) -> Result<(), Stop> {
        let from = front.next;
        let slot = from % ring.entries;
        let n = (put - from).min(FETCH_ENTRIES).min(ring.entries - slot);
        // In range: the ring was validated to fit below 2^64.
        let addr = ring.base + slot * ENTRY_SIZE;
        if !self.pci.bus_master() {
            return Err(Stop::new(ErrorCode::FetchFailed, addr));
        }
        self.env
            .check_bus(BusAddr(addr), n * ENTRY_SIZE)
            .map_err(|_| Stop::new(ErrorCode::AddressLimit, addr))?;
        let bytes = port
            .read_owned(BusAddr(addr), (n * ENTRY_SIZE) as usize)
            .await
            .map_err(|_| Stop::new(ErrorCode::FetchFailed, addr))?;
        for chunk in bytes.chunks_exact(ENTRY_SIZE as usize) {
            let mut e = [0u8; ENTRY_SIZE as usize];
            e.copy_from_slice(chunk);
            front.entries.push_back(e);
        }
        front.next = from + n;
        Ok(())
    }

    async fn execute(
        &self,
        c: u16,
        command: Command,
        params: Vec<u8>,
        port: &P,
    ) -> Result<(), Stop> {
        match command {
            Command::Nop => Ok(()),
            Command::Copy { src, dst, len } => self.copy(c, src, dst, len, port).await,
            Command::Launch {
                kernel, threads, ..
            } => self.launch(kernel, threads, params, port).await,
            Command::Timestamp { dst } => {
                let now = port.now().as_ps() / 1_000;
                self.write_word(dst, now, port).await
            }
            Command::Release {
                dst,
                value,
                interrupt,
            } => {
                self.write_word(dst, value, port).await?;
                if interrupt {
                    self.interrupt(c, port).await;
                }
                Ok(())
            }
            Command::Acquire { offset, value } => loop {
                let written = self.memory.word_written(offset);
                let v = self
                    .memory
                    .read_u64(offset)
                    .map_err(|_| Stop::new(ErrorCode::CopyFailed, offset))?;
                if v >= value {
                    return Ok(());
                }
                written.await;
            },
        }
    }

    /// Writes `value` (a little-endian u64) to `dst` for a timestamp or a release.
    async fn write_word(&self, dst: GpuAddr, value: u64, port: &P) -> Result<(), Stop> {
        let bytes = value.to_le_bytes();
        match dst {
            GpuAddr::Device(o) => self
                .memory
                .write(o, &bytes)
                .map_err(|_| Stop::new(ErrorCode::CopyFailed, o)),
            GpuAddr::Bus(a) => {
                self.env
                    .check_bus(a, 8)
                    .map_err(|_| Stop::new(ErrorCode::AddressLimit, a.get()))?;
                port.write(a, &bytes)
                    .await
                    .map_err(|_| Stop::new(ErrorCode::CopyFailed, a.get()))
            }
        }
    }

    /// Stops channel `c` on `stop`: registers, notice, vector.
    async fn halt(&self, c: u16, stop: Stop, port: &P) {
        let (notifier, entry) = {
            let mut r = self.channels[usize::from(c)].regs.borrow_mut();
            r.status = status::ERROR;
            r.error = stop.code as u64;
            r.error_info = stop.info;
            (r.notifier, r.get)
        };
        if notifier != 0 {
            let notice = ErrorNotice {
                code: stop.code,
                info: stop.info,
                entry,
            };
            let at = BusAddr(notifier);
            if self.env.check_bus(at, ErrorNotice::SIZE as u64).is_ok() {
                let _ = port.write(at, &notice.encode()).await;
            }
        }
        self.interrupt(c, port).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{
        self, channel, status, Command, ErrorCode, GpuAddr, KernelId, ENTRY_SIZE,
    };
    use super::super::testing::gpu_on;
    use super::super::{Gpu, ThreadContext};
    use crate::testing::World;
    use smartio_platform::pci::{self, command};
    use smartio_platform::{BarHandler, BusAddr, ConfigHandler, LocalTask, SimDuration};
    use std::rc::Rc;

    const RING: u64 = 0x10_0000;
    const NOTIFIER: u64 = 0x20_0000;

    fn store(gpu: &Gpu<World>, c: u16, register: u64, value: u64) {
        gpu.mmio_write(
            spec::REGISTER_BAR,
            channel::base(c) + register,
            &value.to_le_bytes(),
        )
        .expect("a channel register");
    }

    fn load(gpu: &Gpu<World>, c: u16, register: u64) -> u64 {
        let mut b = [0u8; 8];
        gpu.mmio_read(spec::REGISTER_BAR, channel::base(c) + register, &mut b)
            .expect("a channel register");
        u64::from_le_bytes(b)
    }

    /// Writes `entries` into the ring at [`RING`] from its first slot on.
    fn write_ring<E: AsRef<[u8]>>(world: &World, entries: impl IntoIterator<Item = E>) {
        for (i, e) in entries.into_iter().enumerate() {
            world.poke(RING + i as u64 * ENTRY_SIZE, e.as_ref());
        }
    }

    /// A GPU in `world` with channel `c`'s ring of `entries` at [`RING`] holding `commands`,
    /// and the channel's task running beside.
    fn channel(
        world: &World,
        c: u16,
        entries: u64,
        commands: &[Command],
    ) -> (Rc<Gpu<World>>, LocalTask) {
        let gpu = Rc::new(gpu_on::<World>(1 << 24));
        write_ring(world, commands.iter().map(Command::encode));
        store(&gpu, c, channel::RING_BASE, RING);
        store(&gpu, c, channel::RING_ENTRIES, entries);
        store(&gpu, c, channel::NOTIFIER, NOTIFIER);
        gpu.pci
            .config_write(pci::COMMAND, &command::BUS_MASTER.to_le_bytes());
        let task: LocalTask = Box::pin(gpu.clone().channel_task(c, world.clone()));
        (gpu, task)
    }

    fn release(at: u64, value: u64) -> Command {
        Command::Release {
            dst: GpuAddr::Bus(BusAddr(at)),
            value,
            interrupt: false,
        }
    }

    #[test]
    fn a_channel_runs_what_put_posts_then_goes_idle_with_get_at_put() {
        let world = World::default();
        let cmds = [release(0x1000, 11), Command::Nop, release(0x1008, 22)];
        let (gpu, task) = channel(&world, 3, 4, &cmds);
        assert_eq!(load(&gpu, 3, channel::STATUS), status::IDLE);
        store(&gpu, 3, channel::PUT, 3);
        assert_eq!(
            load(&gpu, 3, channel::STATUS),
            status::RUNNING,
            "work posted"
        );
        world.run([task]);
        assert_eq!(world.peek(0x1000, 8), 11u64.to_le_bytes());
        assert_eq!(world.peek(0x1008, 8), 22u64.to_le_bytes());
        assert_eq!(load(&gpu, 3, channel::GET), 3);
        assert_eq!(load(&gpu, 3, channel::STATUS), status::IDLE);
    }

    #[test]
    fn a_put_equal_to_get_is_no_work_and_a_reset_keeps_the_ring_and_notifier() {
        let world = World::default();
        let (gpu, task) = channel(&world, 0, 4, &[release(0x1000, 5)]);
        store(&gpu, 0, channel::PUT, 0);
        assert_eq!(
            load(&gpu, 0, channel::STATUS),
            status::IDLE,
            "nothing posted"
        );
        // Without Bus Master the channel cannot fetch what is posted.
        gpu.pci.config_write(pci::COMMAND, &0u16.to_le_bytes());
        store(&gpu, 0, channel::PUT, 1);
        world.run([task]);
        assert_eq!(world.peek(0x1000, 8), [0; 8]);
        assert_eq!(
            (
                load(&gpu, 0, channel::STATUS),
                load(&gpu, 0, channel::ERROR)
            ),
            (status::ERROR, ErrorCode::FetchFailed as u64)
        );
        assert_eq!(
            load(&gpu, 0, channel::ERROR_INFO),
            RING,
            "where it could not fetch"
        );
        store(&gpu, 0, channel::RESET, 1);
        assert_eq!(
            (
                load(&gpu, 0, channel::RING_BASE),
                load(&gpu, 0, channel::RING_ENTRIES),
                load(&gpu, 0, channel::NOTIFIER)
            ),
            (RING, 4, NOTIFIER)
        );
    }

    #[test]
    fn a_ring_that_is_no_power_of_two_or_misplaced_stops_the_channel_at_the_first_put() {
        for (entries, base, info) in [(3, RING, 3), (1, RING, 1), (4, RING + 8, RING + 8)] {
            let world = World::default();
            let (gpu, task) = channel(&world, 1, entries, &[release(0x1000, 5)]);
            store(&gpu, 1, channel::RING_BASE, base);
            store(&gpu, 1, channel::PUT, 1);
            world.run([task]);
            assert_eq!(
                load(&gpu, 1, channel::STATUS),
                status::ERROR,
                "{entries} at {base:#x}"
            );
            assert_eq!(load(&gpu, 1, channel::ERROR), ErrorCode::BadRing as u64);
            assert_eq!(load(&gpu, 1, channel::ERROR_INFO), info);
            assert_eq!(world.peek(0x1000, 8), [0; 8], "nothing run");
        }
    }

    /// Writes `put` to channel `c`'s PUT, then waits (in virtual time) until the channel
    /// has nothing left to run: GET at PUT, or stopped.
    async fn post_and_settle(gpu: &Gpu<World>, world: &World, c: u16, put: u64) {
        use smartio_platform::Clock;
        store(gpu, c, channel::PUT, put);
        for _ in 0..10_000 {
            world.sleep(SimDuration::from_us(1)).await;
            let (get, state) = (load(gpu, c, channel::GET), load(gpu, c, channel::STATUS));
            if get == put || state == status::ERROR {
                return;
            }
        }
        panic!("the channel never settled");
    }

    #[test]
    fn the_ring_wraps_and_a_put_behind_get_or_past_a_ring_stops_the_channel_with_a_notice() {
        // Six releases through a ring of four: two posts, the second wrapping; then a PUT
        // more than a ring ahead of GET.
        let world = World::default();
        let cmds: Vec<Command> = (0..4).map(|i| release(0x1000 + 8 * i, 100 + i)).collect();
        let (gpu, task) = channel(&world, 2, 4, &cmds);
        let (g, w) = (gpu.clone(), world.clone());
        let gets = world.block_on(
            async move {
                post_and_settle(&g, &w, 2, 3).await;
                let first = load(&g, 2, channel::GET);
                // Slots 3, 0 and 1 now hold entries 3, 4 and 5.
                w.poke(RING + 3 * ENTRY_SIZE, &release(0x1018, 103).encode());
                w.poke(RING, &release(0x1020, 104).encode());
                w.poke(RING + ENTRY_SIZE, &release(0x1028, 105).encode());
                post_and_settle(&g, &w, 2, 6).await;
                let second = load(&g, 2, channel::GET);
                post_and_settle(&g, &w, 2, 11).await;
                (first, second)
            },
            [task],
        );
        assert_eq!(gets, (3, 6));
        for i in 0..6u64 {
            assert_eq!(
                world.peek(0x1000 + 8 * i, 8),
                (100 + i).to_le_bytes(),
                "entry {i}"
            );
        }
        assert_eq!(load(&gpu, 2, channel::STATUS), status::ERROR);
        assert_eq!(load(&gpu, 2, channel::ERROR), ErrorCode::BadPut as u64);
        assert_eq!(load(&gpu, 2, channel::ERROR_INFO), 11);
        let mut notice = [0u8; spec::ErrorNotice::SIZE];
        notice.copy_from_slice(&world.peek(NOTIFIER, spec::ErrorNotice::SIZE));
        assert_eq!(
            spec::ErrorNotice::decode(&notice),
            Some(spec::ErrorNotice {
                code: ErrorCode::BadPut,
                info: 11,
                entry: 6
            }),
            "said in the notifier, with the entry it stopped at"
        );
        // A PUT of a whole ring is taken; one behind GET is not.
        let world = World::default();
        let (gpu, task) = channel(&world, 2, 4, &cmds);
        let (g, w) = (gpu.clone(), world.clone());
        let whole = world.block_on(
            async move {
                post_and_settle(&g, &w, 2, 4).await;
                let whole = load(&g, 2, channel::GET);
                post_and_settle(&g, &w, 2, 3).await;
                whole
            },
            [task],
        );
        assert_eq!(whole, 4, "a whole ring");
        assert_eq!(
            load(&gpu, 2, channel::ERROR),
            ErrorCode::BadPut as u64,
            "behind GET"
        );
    }

    /// A kernel that writes, for each thread `t`, `(t, threads)` as two u64 at device offset
    /// `16 t`, and (thread 0) its launch's parameter bytes at [`PARAMS_AT`].
    fn tell_who_runs(gpu: &Gpu<World>) -> KernelId {
        gpu.kernels().load(
            "tell_who_runs",
            Rc::new(|t: ThreadContext<World>| {
                Box::pin(async move {
                    let at = 16 * u64::from(t.thread());
                    t.store_u64(GpuAddr::Device(at), u64::from(t.thread()))
                        .await?;
                    t.store_u64(GpuAddr::Device(at + 8), u64::from(t.threads()))
                        .await?;
                    if t.thread() == 0 {
                        t.store(GpuAddr::Device(PARAMS_AT), t.params()).await?;
                    }
                    Ok(())
                })
            }),
        )
    }

    /// Where [`tell_who_runs`] puts its parameters.
    const PARAMS_AT: u64 = 0x10_0000;

    /// A launch of 4 threads with 100 parameter bytes (two entries, the second padded),
    /// then a release: the ring's first four entries, and the parameters.
    fn launch_then_release(gpu: &Gpu<World>) -> (Vec<[u8; ENTRY_SIZE as usize]>, Vec<u8>) {
        let kernel = tell_who_runs(gpu);
        let params: Vec<u8> = (0..100u8).map(|i| i ^ 0x5a).collect();
        let launch = Command::Launch {
            kernel,
            threads: 4,
            param_bytes: 100,
        };
        let mut entries = vec![launch.encode()];
        for chunk in params.chunks(ENTRY_SIZE as usize) {
            let mut e = [0xeeu8; ENTRY_SIZE as usize];
            e[..chunk.len()].copy_from_slice(chunk);
            entries.push(e);
        }
        entries.push(release(0x1000, 77).encode());
        (entries, params)
    }

    /// What [`tell_who_runs`] left in `gpu`'s memory: each thread's `(t, threads)` and
    /// `len` parameter bytes.
    fn who_ran(gpu: &Gpu<World>, len: usize) -> (Vec<(u64, u64)>, Vec<u8>) {
        let word = |at| {
            let mut b = [0u8; 8];
            gpu.peek(at, &mut b).expect("inside memory");
            u64::from_le_bytes(b)
        };
        let threads = (0..4).map(|t| (word(16 * t), word(16 * t + 8))).collect();
        let mut params = vec![0u8; len];
        gpu.peek(PARAMS_AT, &mut params).expect("inside memory");
        (threads, params)
    }

    #[test]
    fn a_launch_runs_its_threads_with_the_parameters_that_follow_it_and_get_skips_them() {
        let world = World::default();
        let (gpu, task) = channel(&world, 1, 8, &[]);
        let (entries, params) = launch_then_release(&gpu);
        write_ring(&world, &entries);
        let (g, w) = (gpu.clone(), world.clone());
        world.block_on(async move { post_and_settle(&g, &w, 1, 4).await }, [task]);
        assert_eq!(load(&gpu, 1, channel::STATUS), status::IDLE);
        assert_eq!(load(&gpu, 1, channel::GET), 4);
        assert_eq!(
            world.peek(0x1000, 8),
            77u64.to_le_bytes(),
            "the release ran"
        );
        let (threads, seen) = who_ran(&gpu, 128);
        assert_eq!(threads, [(0, 4), (1, 4), (2, 4), (3, 4)]);
        assert_eq!(seen[..100], params[..], "exactly the parameter bytes");
        assert_eq!(seen[100..], [0; 28], "not the padding");
        assert_eq!(
            world.reads(),
            [(RING, 4 * ENTRY_SIZE as usize)],
            "one fetch"
        );
    }

    #[test]
    fn a_launch_whose_parameters_are_not_posted_yet_waits_for_a_put_that_covers_them() {
        use smartio_platform::Clock;
        let world = World::default();
        let (gpu, task) = channel(&world, 1, 8, &[]);
        let (entries, params) = launch_then_release(&gpu);
        write_ring(&world, &entries);
        let (g, w) = (gpu.clone(), world.clone());
        let waiting = world.block_on(
            async move {
                // The launch and its first parameter entry, then its second, then the release.
                store(&g, 1, channel::PUT, 2);
                w.sleep(SimDuration::from_us(100)).await;
                let first = (load(&g, 1, channel::GET), load(&g, 1, channel::STATUS));
                store(&g, 1, channel::PUT, 3);
                w.sleep(SimDuration::from_us(100)).await;
                let second = load(&g, 1, channel::GET);
                post_and_settle(&g, &w, 1, 4).await;
                (first, second)
            },
            [task],
        );
        assert_eq!(
            waiting,
            ((0, status::RUNNING), 3),
            "the launch waited for its parameters, then ran"
        );
        assert_eq!(load(&gpu, 1, channel::GET), 4);
        assert_eq!(world.peek(0x1000, 8), 77u64.to_le_bytes());
        let (threads, seen) = who_ran(&gpu, 100);
        assert_eq!(threads, [(0, 4), (1, 4), (2, 4), (3, 4)]);
        assert_eq!(seen, params);
        let e = ENTRY_SIZE as usize;
        assert_eq!(
            world.reads(),
            [
                (RING, 2 * e),
                (RING + 2 * ENTRY_SIZE, e),
                (RING + 3 * ENTRY_SIZE, e)
            ],
            "each fetch from where the last ended, up to PUT"
        );
    }

    #[test]
    fn the_front_end_fetches_at_most_64_entries_a_read_and_never_across_the_wrap() {
        let world = World::default();
        let (gpu, task) = channel(&world, 4, 128, &[]);
        // Entry i releases i at 0x1000 + 8 (i mod 128); 70 entries, then 60 more (wrapping).
        for i in 0..128u64 {
            world.poke(RING + i * ENTRY_SIZE, &release(0x1000 + 8 * i, i).encode());
        }
        let (g, w) = (gpu.clone(), world.clone());
        let gets = world.block_on(
            async move {
                post_and_settle(&g, &w, 4, 70).await;
                let first = load(&g, 4, channel::GET);
                w.poke(RING, &release(0x1000, 128).encode());
                w.poke(RING + ENTRY_SIZE, &release(0x1008, 129).encode());
                post_and_settle(&g, &w, 4, 130).await;
                (first, load(&g, 4, channel::GET))
            },
            [task],
        );
        assert_eq!(gets, (70, 130));
        let e = ENTRY_SIZE as usize;
        assert_eq!(
            world.reads(),
            [
                (RING, 64 * e),
                (RING + 64 * ENTRY_SIZE, 6 * e),
                (RING + 70 * ENTRY_SIZE, 58 * e),
                (RING, 2 * e),
            ]
        );
        for i in 0..128u64 {
            let want = if i < 2 { 128 + i } else { i };
            assert_eq!(
                world.peek(0x1000 + 8 * i, 8),
                want.to_le_bytes(),
                "slot {i}"
            );
        }
        assert_eq!(load(&gpu, 4, channel::STATUS), status::IDLE);
    }

    #[test]
    fn an_acquire_holds_the_channel_until_its_word_reaches_the_value() {
        use smartio_platform::Clock;
        let world = World::default();
        let acquire = Command::Acquire {
            offset: 64,
            value: 5,
        };
        let (gpu, task) = channel(&world, 0, 4, &[acquire, release(0x1000, 9)]);
        let (g, w) = (gpu.clone(), world.clone());
        let held = world.block_on(
            async move {
                store(&g, 0, channel::PUT, 2);
                let mut held = Vec::new();
                for v in [0u64, 4, 5] {
                    g.poke(64, &v.to_le_bytes()).expect("inside memory");
                    w.sleep(SimDuration::from_us(10)).await;
                    held.push((v, load(&g, 0, channel::GET)));
                }
                held
            },
            [task],
        );
        assert_eq!(held, [(0, 0), (4, 0), (5, 2)]);
        assert_eq!(world.peek(0x1000, 8), 9u64.to_le_bytes());
    }

    #[test]
    fn a_timestamp_is_the_gpu_timer_in_nanoseconds_when_it_runs() {
        let world = World::default();
        let cmds = [
            Command::Timestamp {
                dst: GpuAddr::Bus(BusAddr(0x1000)),
            },
            Command::Timestamp {
                dst: GpuAddr::Device(0x40),
            },
        ];
        let (gpu, task) = channel(&world, 0, 4, &cmds);
        let (g, w) = (gpu.clone(), world.clone());
        world.block_on(async move { post_and_settle(&g, &w, 0, 2).await }, [task]);
        let command = super::super::testing::timing().command.as_ps() / 1_000;
        assert_eq!(command, 100);
        assert_eq!(
            world.peek(0x1000, 8),
            command.to_le_bytes(),
            "after one entry's decoding"
        );
        let mut device = [0u8; 8];
        gpu.peek(0x40, &mut device).expect("inside memory");
        assert_eq!(u64::from_le_bytes(device), 2 * command, "after two");
    }

    #[test]
    fn a_release_or_acquire_outside_reach_stops_the_channel_with_its_address() {
        let beyond = 1u64 << super::super::testing::timing().dma_bits;
        for (cmd, code, info) in [
            (
                Command::Release {
                    dst: GpuAddr::Device(1 << 24),
                    value: 1,
                    interrupt: false,
                },
                ErrorCode::CopyFailed,
                1 << 24,
            ),
            (release(beyond, 1), ErrorCode::AddressLimit, beyond),
            (
                release(crate::testing::MEMORY_END, 1),
                ErrorCode::CopyFailed,
                crate::testing::MEMORY_END,
            ),
            (
                Command::Acquire {
                    offset: 1 << 24,
                    value: 1,
                },
                ErrorCode::CopyFailed,
                1 << 24,
            ),
        ] {
            let world = World::default();
            let (gpu, task) = channel(&world, 0, 4, &[cmd, release(0x1000, 9)]);
            let (g, w) = (gpu.clone(), world.clone());
            world.block_on(async move { post_and_settle(&g, &w, 0, 2).await }, [task]);
            assert_eq!(
                (
                    load(&gpu, 0, channel::STATUS),
                    load(&gpu, 0, channel::ERROR),
                    load(&gpu, 0, channel::ERROR_INFO),
                    load(&gpu, 0, channel::GET)
                ),
                (status::ERROR, code as u64, info, 0),
                "{cmd:?}"
            );
            assert_eq!(
                world.peek(0x1000, 8),
                [0; 8],
                "{cmd:?}: nothing after it ran"
            );
        }
    }

    #[test]
    fn a_channel_without_a_notifier_stops_without_writing_anywhere() {
        let world = World::default();
        let (gpu, task) = channel(&world, 1, 3, &[release(0x1000, 5)]);
        store(&gpu, 1, channel::NOTIFIER, 0);
        store(&gpu, 1, channel::PUT, 1);
        world.run([task]);
        assert_eq!(load(&gpu, 1, channel::ERROR), ErrorCode::BadRing as u64);
        assert_eq!(world.writes(), [], "no notice");
    }

    #[test]
    fn a_ring_that_would_end_past_the_top_of_the_address_space_is_refused() {
        let world = World::default();
        let (gpu, task) = channel(&world, 1, 4, &[]);
        let base = 0u64.wrapping_sub(4 * ENTRY_SIZE);
        store(&gpu, 1, channel::RING_BASE, base);
        store(&gpu, 1, channel::PUT, 1);
        world.run([task]);
        assert_eq!(
            (
                load(&gpu, 1, channel::ERROR),
                load(&gpu, 1, channel::ERROR_INFO)
            ),
            (ErrorCode::BadRing as u64, base)
        );
    }

    #[test]
    fn a_fetch_reaching_past_the_dma_address_limit_stops_the_channel_with_address_limit() {
        // Entries 0 and 1 below the limit, 2 and 3 above: one fetch of all four crosses it.
        let limit = 1u64 << super::super::testing::timing().dma_bits;
        let world = World::default();
        let (gpu, task) = channel(&world, 1, 4, &[]);
        store(&gpu, 1, channel::RING_BASE, limit - 2 * ENTRY_SIZE);
        store(&gpu, 1, channel::PUT, 4);
        world.run([task]);
        assert_eq!(
            (
                load(&gpu, 1, channel::ERROR),
                load(&gpu, 1, channel::ERROR_INFO)
            ),
            (ErrorCode::AddressLimit as u64, limit - 2 * ENTRY_SIZE)
        );
        assert_eq!(world.reads(), [], "nothing went on the bus");
    }

    /// A kernel whose thread `t` sleeps `(t + 1) × step`, then stores `t + 1` at device
    /// offset `at + 8 t`.
    fn sleep_then_store(gpu: &Gpu<World>, step: SimDuration, at: u64) -> KernelId {
        gpu.kernels().load(
            "sleep_then_store",
            Rc::new(move |t: ThreadContext<World>| {
                Box::pin(async move {
                    let i = u64::from(t.thread());
                    t.nanosleep(SimDuration::from_ps(step.as_ps() * (i + 1)))
                        .await;
                    t.store_u64(GpuAddr::Device(at + 8 * i), i + 1).await
                })
            }),
        )
    }

    #[test]
    fn a_launch_ends_when_its_slowest_thread_returns() {
        let world = World::default();
        let (gpu, task) = channel(&world, 2, 4, &[]);
        let kernel = sleep_then_store(&gpu, SimDuration::from_us(1), 0x100);
        let launch = Command::Launch {
            kernel,
            threads: 4,
            param_bytes: 0,
        };
        let stamp = Command::Timestamp {
            dst: GpuAddr::Bus(BusAddr(0x1000)),
        };
        world.poke(RING, &launch.encode());
        world.poke(RING + ENTRY_SIZE, &stamp.encode());
        let (g, w) = (gpu.clone(), world.clone());
        world.block_on(async move { post_and_settle(&g, &w, 2, 2).await }, [task]);
        let t = super::super::testing::timing();
        let slowest = SimDuration::from_us(4) + t.memory_access;
        let after = t.command + t.launch + slowest + t.command;
        assert_eq!(
            world.peek(0x1000, 8),
            (after.as_ps() / 1_000).to_le_bytes(),
            "the timestamp behind the launch: decoded after the last thread returned"
        );
        let mut stored = [0u8; 32];
        gpu.peek(0x100, &mut stored).expect("inside memory");
        let want: Vec<u8> = (1..=4u64).flat_map(u64::to_le_bytes).collect();
        assert_eq!(stored[..], want[..], "every thread ran");
    }

    #[test]
    fn a_reset_during_a_launch_aborts_its_threads() {
        use smartio_platform::Clock;
        let world = World::default();
        let (gpu, task) = channel(&world, 2, 4, &[]);
        let kernel = sleep_then_store(&gpu, SimDuration::from_us(10), 0x100);
        let launch = Command::Launch {
            kernel,
            threads: 2,
            param_bytes: 0,
        };
        world.poke(RING, &launch.encode());
        let (g, w) = (gpu.clone(), world.clone());
        let during = world.block_on(
            async move {
                store(&g, 2, channel::PUT, 1);
                w.sleep(SimDuration::from_us(5)).await;
                let during = load(&g, 2, channel::STATUS);
                store(&g, 2, channel::RESET, 1);
                w.sleep(SimDuration::from_us(50)).await;
                during
            },
            [task],
        );
        assert_eq!(during, status::RUNNING, "the threads were sleeping");
        let mut stored = [0u8; 16];
        gpu.peek(0x100, &mut stored).expect("inside memory");
        assert_eq!(stored, [0; 16], "no thread ran on after the reset");
        assert_eq!(
            (load(&gpu, 2, channel::GET), load(&gpu, 2, channel::STATUS)),
            (0, status::IDLE)
        );
    }

    #[test]
    fn an_entry_that_does_not_decode_stops_the_channel_with_its_opcode() {
        let mut unknown = Command::Nop.encode();
        unknown[0] = 9;
        let mut flagged = release(0x1000, 1).encode();
        flagged[4] = 1 << 6;
        for (entry, opcode) in [(unknown, 9), (flagged, 4)] {
            let world = World::default();
            let (gpu, task) = channel(&world, 0, 4, &[]);
            world.poke(RING, &entry);
            let (g, w) = (gpu.clone(), world.clone());
            world.block_on(async move { post_and_settle(&g, &w, 0, 1).await }, [task]);
            assert_eq!(
                (
                    load(&gpu, 0, channel::ERROR),
                    load(&gpu, 0, channel::ERROR_INFO),
                    load(&gpu, 0, channel::GET)
                ),
                (ErrorCode::BadCommand as u64, opcode, 0)
            );
            assert_eq!(world.peek(0x1000, 8), [0; 8], "nothing run");
        }
    }
}
