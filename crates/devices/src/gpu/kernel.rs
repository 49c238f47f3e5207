//! Kernels: code that runs on the GPU as agents in the emulated cluster.
//!
//! A kernel is a Rust closure loaded into a [`KernelLibrary`] under a name; a ring's LAUNCH
//! names it by [`KernelId`]. The GPU runs one task per thread, each with a [`ThreadContext`]
//! (its index, the launch's parameter bytes) through which it touches memory:
//!
//! - [`GpuAddr::Device`] offsets reach device memory directly: no bus transaction, each access
//!   costs the profile's `memory_access`; an access outside device memory faults
//!   ([`FaultReason::OutsideMemory`]). A store wakes the waiters of the words it touches;
//!   [`ThreadContext::atomic_add_u64`] is a read-modify-write no other thread can split.
//! - [`GpuAddr::Bus`] addresses go on the fabric through the GPU's own port (its requester
//!   id): a load completes when its data arrived, a store (posted) once issued. An address at
//!   or above `1 << dma_bits` faults ([`FaultReason::AddressLimit`]) without touching the
//!   bus; a fabric error faults with [`FaultReason::Bus`].
//!
//! A thread that returns `Err` stops its launch's channel with `ErrorCode::KernelFault`
//! (info: the fault's address).

use super::memory::DeviceMemory;
use super::spec::{GpuAddr, KernelId};
use smartio_platform::{AccessError, BusAddr, Clock, Port, SimDuration};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use thiserror::Error;

/// What one kernel thread runs to.
pub type KernelFuture = Pin<Box<dyn Future<Output = Result<(), KernelFault>>>>;

/// A kernel's code: called once per thread.
pub type KernelFn<P> = Rc<dyn Fn(ThreadContext<P>) -> KernelFuture>;

/// The kernels a GPU (or every GPU of a cluster) can launch, by name and id.
///
/// Invariant: ids are indices into the list, handed out in load order and never reused;
/// loading a name again keeps its id and replaces its code.
pub struct KernelLibrary<P> {
    kernels: RefCell<Vec<(String, KernelFn<P>)>>,
}

impl<P> Default for KernelLibrary<P> {
    fn default() -> Self {
        Self {
            kernels: RefCell::new(Vec::new()),
        }
    }
}

impl<P> std::fmt::Debug for KernelLibrary<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .kernels
            .borrow()
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        f.debug_struct("KernelLibrary")
            .field("kernels", &names)
            .finish()
    }
}

impl<P> KernelLibrary<P> {
    /// An empty library.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads `kernel` under `name`: a new id, or the name's id if it was loaded before (its
    /// code is replaced).
    pub fn load(&self, name: &str, kernel: KernelFn<P>) -> KernelId {
        let mut kernels = self.kernels.borrow_mut();
        if let Some(i) = kernels.iter().position(|(n, _)| n == name) {
            kernels[i].1 = kernel;
            return KernelId(i as u32);
        }
        kernels.push((name.to_string(), kernel));
        KernelId((kernels.len() - 1) as u32)
    }

    /// The id of the kernel loaded as `name`.
    pub fn id(&self, name: &str) -> Option<KernelId> {
        self.kernels
            .borrow()
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| KernelId(i as u32))
    }

    /// The name kernel `id` was loaded as.
    pub fn name(&self, id: KernelId) -> Option<String> {
        self.kernels
            .borrow()
            .get(id.0 as usize)
            .map(|(n, _)| n.clone())
    }

    /// Kernel `id`'s code.
    pub fn get(&self, id: KernelId) -> Option<KernelFn<P>> {
        self.kernels
            .borrow()
            .get(id.0 as usize)
            .map(|(_, k)| k.clone())
    }
}

/// Why a kernel thread's access failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FaultReason {
    /// The fabric refused a bus access.
    #[error("bus access failed: {0}")]
    Bus(AccessError),
    /// A device-memory access past the end of device memory.
    #[error("outside device memory ({memory:#x} bytes)")]
    OutsideMemory {
        /// Bytes of device memory.
        memory: u64,
    },
    /// A bus address the GPU cannot put on the bus.
    #[error("beyond the GPU's {bits}-bit DMA address limit")]
    AddressLimit {
        /// The GPU's address bits.
        bits: u8,
    },
}

/// A kernel thread's failed access.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("kernel fault at {address:?}: {reason}")]
pub struct KernelFault {
    /// The address the access started at.
    pub address: GpuAddr,
    /// Why it failed.
    pub reason: FaultReason,
}

impl KernelFault {
    /// The raw value of the faulting address (the channel's `ERROR_INFO`).
    pub fn info(&self) -> u64 {
        match self.address {
            GpuAddr::Device(o) => o,
            GpuAddr::Bus(a) => a.get(),
        }
    }
}

/// What every thread of a GPU shares: device memory and the costs of touching it.
#[derive(Debug)]
pub(crate) struct ThreadEnv {
    /// The GPU's memory.
    pub memory: Rc<DeviceMemory>,
    /// Cost of one device-memory access.
    pub memory_access: SimDuration,
    /// Cost of reading the cycle counter.
    pub clock_read: SimDuration,
    /// Cycle counter frequency.
    pub clock_khz: u64,
    /// Bus address bits the GPU reaches.
    pub dma_bits: u8,
}

impl ThreadEnv {
    /// Whether `len` bytes at bus address `addr` are below the DMA address limit.
    pub fn check_bus(&self, addr: BusAddr, len: u64) -> Result<(), FaultReason> {
        let limit = 1u64
            .checked_shl(u32::from(self.dma_bits))
            .unwrap_or(u64::MAX);
        let last = addr.get().saturating_add(len.saturating_sub(1));
        if self.dma_bits < 64 && (addr.get() >= limit || last >= limit) {
            return Err(FaultReason::AddressLimit {
                bits: self.dma_bits,
            });
        }
        Ok(())
    }
}

/// One kernel thread's view of the GPU: who it is, its launch's parameters, and memory.
#[derive(Clone)]
pub struct ThreadContext<P> {
    thread: u32,
    threads: u32,
    params: Rc<[u8]>,
    port: P,
    env: Rc<ThreadEnv>,
}

impl<P> ThreadContext<P> {
    /// Thread `thread` of `threads`, with the launch's parameter bytes.
    pub(crate) fn new(
        thread: u32,
        threads: u32,
        params: Rc<[u8]>,
        port: P,
        env: Rc<ThreadEnv>,
    ) -> Self {
        Self {
            thread,
            threads,
            params,
            port,
            env,
        }
    }
}

impl<P: Port + Clock + Clone + 'static> ThreadContext<P> {
    /// This thread's index, `0..threads()`.
    pub fn thread(&self) -> u32 {
        self.thread
    }

    /// Threads in the launch.
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// The launch's parameter bytes (exactly `param_bytes` of them).
    pub fn params(&self) -> &[u8] {
        &self.params
    }

    /// Bytes of device memory.
    pub fn memory_size(&self) -> u64 {
        self.env.memory.size()
    }

    /// Frequency of [`ThreadContext::clock64`] in kHz.
    pub fn clock_khz(&self) -> u64 {
        self.env.clock_khz
    }

    fn outside(&self, address: GpuAddr) -> KernelFault {
        KernelFault {
            address,
            reason: FaultReason::OutsideMemory {
                memory: self.env.memory.size(),
            },
        }
    }

    fn bus_check(&self, addr: BusAddr, len: u64) -> Result<(), KernelFault> {
        self.env.check_bus(addr, len).map_err(|reason| KernelFault {
            address: GpuAddr::Bus(addr),
            reason,
        })
    }

    fn bus_fault(addr: BusAddr, e: AccessError) -> KernelFault {
        KernelFault {
            address: GpuAddr::Bus(addr),
            reason: FaultReason::Bus(e),
        }
    }

    /// Reads `buf.len()` bytes at `addr`.
    pub async fn load(&self, addr: GpuAddr, buf: &mut [u8]) -> Result<(), KernelFault> {
        match addr {
            GpuAddr::Device(o) => {
                self.env
                    .memory
                    .check(o, buf.len() as u64)
                    .map_err(|_| self.outside(addr))?;
                self.port
                    .spend("kernel: load from device memory", self.env.memory_access)
                    .await;
                self.env.memory.read(o, buf).map_err(|_| self.outside(addr))
            }
            GpuAddr::Bus(a) => {
                self.bus_check(a, buf.len() as u64)?;
                self.port
                    .read(a, buf)
                    .await
                    .map_err(|e| Self::bus_fault(a, e))
            }
        }
    }

    /// Writes `data` at `addr` (a bus store is posted: it returns once issued).
    pub async fn store(&self, addr: GpuAddr, data: &[u8]) -> Result<(), KernelFault> {
        match addr {
            GpuAddr::Device(o) => {
                self.env
                    .memory
                    .check(o, data.len() as u64)
                    .map_err(|_| self.outside(addr))?;
                self.port
                    .spend("kernel: store to device memory", self.env.memory_access)
                    .await;
                self.env
                    .memory
                    .write(o, data)
                    .map_err(|_| self.outside(addr))
            }
            GpuAddr::Bus(a) => {
                self.bus_check(a, data.len() as u64)?;
                self.port
                    .write(a, data)
                    .await
                    .map_err(|e| Self::bus_fault(a, e))
            }
        }
    }

    /// The little-endian u64 at `addr`.
    pub async fn load_u64(&self, addr: GpuAddr) -> Result<u64, KernelFault> {
        let mut b = [0u8; 8];
        self.load(addr, &mut b).await?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes `value` as a little-endian u64 at `addr`.
    pub async fn store_u64(&self, addr: GpuAddr, value: u64) -> Result<(), KernelFault> {
        self.store(addr, &value.to_le_bytes()).await
    }

    /// Adds `value` to the u64 at device-memory `offset` (wrapping) and returns the old
    /// value (`atomicAdd`); costs `memory_access` and wakes waiters like a store. Atomic by
    /// construction: the engine is single-threaded and nothing awaits between the read and
    /// the write, so no other thread's access falls between them.
    pub async fn atomic_add_u64(&self, offset: u64, value: u64) -> Result<u64, KernelFault> {
        let address = GpuAddr::Device(offset);
        self.env
            .memory
            .check(offset, 8)
            .map_err(|_| self.outside(address))?;
        self.port
            .spend("kernel: atomicAdd in device memory", self.env.memory_access)
            .await;
        self.env
            .memory
            .fetch_add_u64(offset, value)
            .map_err(|_| self.outside(address))
    }

    /// Spins on the u64 at device-memory `offset` until `cond` holds; returns the value.
    ///
    /// The thread checks back to back, each check costing `memory_access`: the k-th check
    /// reads the word at `start + k × memory_access`. A store that lands between two reads is
    /// seen by the next one, so the time to notice it depends on where in the loop it falls —
    /// which is what quantizes a spinning ping-pong's round trips into steps. Between writes
    /// the thread sleeps until the next one touching that word (no busy loop in virtual
    /// time), then resumes at the loop's next read.
    pub async fn wait_until(
        &self,
        offset: u64,
        cond: impl Fn(u64) -> bool,
    ) -> Result<u64, KernelFault> {
        let address = GpuAddr::Device(offset);
        self.env
            .memory
            .check(offset, 8)
            .map_err(|_| self.outside(address))?;
        let period = self.env.memory_access.as_ps();
        let mut next_read = self.port.now().as_ps() + period;
        loop {
            let written = self.env.memory.word_written(offset);
            let now = self.port.now().as_ps();
            self.port
                .spend(
                    "kernel: the spin loop's next read of the word",
                    SimDuration::from_ps(next_read.saturating_sub(now)),
                )
                .await;
            let v = self
                .env
                .memory
                .read_u64(offset)
                .map_err(|_| self.outside(address))?;
            if cond(v) {
                return Ok(v);
            }
            written.await;
            // The first read of the loop at or after the store.
            let now = self.port.now().as_ps();
            if period == 0 {
                next_read = now;
            } else if now >= next_read {
                // The read at `next_read` (if it is now) already happened and missed: the
                // loop's next read is a period on at least.
                next_read += (now - next_read).div_ceil(period).max(1) * period;
            }
        }
    }

    /// Spins on the u64 at bus address `addr` until `cond` holds; returns the value. Each
    /// check is a read on the bus, issued as soon as the previous one completed.
    pub async fn poll_bus_until(
        &self,
        addr: BusAddr,
        cond: impl Fn(u64) -> bool,
    ) -> Result<u64, KernelFault> {
        self.bus_check(addr, 8)?;
        loop {
            let mut b = [0u8; 8];
            self.port
                .read(addr, &mut b)
                .await
                .map_err(|e| Self::bus_fault(addr, e))?;
            let v = u64::from_le_bytes(b);
            if cond(v) {
                return Ok(v);
            }
        }
    }

    /// The cycle counter (`now × clock`); reading it costs `clock_read`.
    pub async fn clock64(&self) -> u64 {
        self.port
            .spend("kernel: clock64()", self.env.clock_read)
            .await;
        let ps = u128::from(self.port.now().as_ps());
        let cycles = ps * u128::from(self.env.clock_khz) / 1_000_000_000;
        u64::try_from(cycles).unwrap_or(u64::MAX)
    }

    /// Sleeps `d` of virtual time.
    pub async fn nanosleep(&self, d: SimDuration) {
        self.port.spend("kernel: __nanosleep()", d).await;
    }

    /// The simulation's time. Not something a CUDA kernel can read (it has
    /// [`ThreadContext::clock64`]): for a workload that reports its operations' start and
    /// end to explain where their time went.
    pub fn now(&self) -> smartio_platform::SimTime {
        self.port.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::World;
    use smartio_platform::{LocalTask, SimTime};

    fn nothing() -> KernelFn<()> {
        Rc::new(|_| Box::pin(async { Ok(()) }))
    }

    #[test]
    fn loading_a_name_again_keeps_its_id_and_replaces_the_code() {
        let lib = KernelLibrary::<()>::new();
        let a = lib.load("a", nothing());
        let b = lib.load("b", nothing());
        assert_ne!(a, b);
        let first = lib.get(a).unwrap();
        assert_eq!(lib.load("a", nothing()), a);
        assert!(!Rc::ptr_eq(&first, &lib.get(a).unwrap()));
        assert_eq!(lib.id("b"), Some(b));
        assert_eq!(lib.name(b).as_deref(), Some("b"));
        assert_eq!(lib.id("c"), None);
        assert!(lib.get(KernelId(7)).is_none());
        assert!(lib.name(KernelId(7)).is_none());
    }

    #[test]
    fn the_address_limit_covers_the_last_byte_and_64_bits_has_none() {
        let env = |dma_bits| ThreadEnv {
            memory: Rc::new(DeviceMemory::new(1 << 20)),
            memory_access: SimDuration::ZERO,
            clock_read: SimDuration::ZERO,
            clock_khz: 1,
            dma_bits,
        };
        let e = env(32);
        assert!(e.check_bus(BusAddr((1 << 32) - 8), 8).is_ok());
        assert_eq!(
            e.check_bus(BusAddr((1 << 32) - 4), 8),
            Err(FaultReason::AddressLimit { bits: 32 })
        );
        assert!(e.check_bus(BusAddr(1 << 32), 1).is_err());
        assert!(env(64).check_bus(BusAddr(u64::MAX - 7), 8).is_ok());
    }

    fn thread(env: &Rc<ThreadEnv>, i: u32) -> ThreadContext<super::super::testing::Stub> {
        ThreadContext::new(i, 64, Rc::from(&[][..]), Default::default(), env.clone())
    }

    fn run<T>(f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the stub engine never waits"),
        }
    }

    #[test]
    fn atomic_adds_hand_out_distinct_tickets_and_wake_a_thread_waiting_on_the_word() {
        let env = Rc::new(ThreadEnv {
            memory: Rc::new(DeviceMemory::new(4096)),
            memory_access: SimDuration::from_ns(15),
            clock_read: SimDuration::ZERO,
            clock_khz: 1,
            dma_bits: 47,
        });
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let waiter = thread(&env, 63);
        let mut wait = Box::pin(waiter.wait_until(64, |v| v == 64));
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        let tickets: Vec<u64> = (0..64)
            .map(|i| run(thread(&env, i).atomic_add_u64(64, 1)).expect("inside memory"))
            .collect();
        assert_eq!(tickets, (0..64).collect::<Vec<u64>>());
        assert_eq!(
            wait.as_mut().poll(&mut cx),
            std::task::Poll::Ready(Ok(64)),
            "woken by the adds"
        );
        let fault = run(thread(&env, 0).atomic_add_u64(4092, 1)).expect_err("past the end");
        assert_eq!(fault.address, GpuAddr::Device(4092));
    }

    #[test]
    fn a_library_shows_its_kernels_by_name() {
        let lib = KernelLibrary::<()>::new();
        lib.load("ping", nothing());
        lib.load("pong", nothing());
        assert_eq!(
            format!("{lib:?}"),
            r#"KernelLibrary { kernels: ["ping", "pong"] }"#
        );
    }

    #[test]
    fn a_fault_reports_the_address_it_started_at() {
        let fault = |address| KernelFault {
            address,
            reason: FaultReason::OutsideMemory { memory: 4096 },
        };
        assert_eq!(fault(GpuAddr::Device(0x1238)).info(), 0x1238);
        assert_eq!(
            fault(GpuAddr::Bus(BusAddr(0xfee0_0000))).info(),
            0xfee0_0000
        );
    }

    #[test]
    fn a_thread_knows_its_index_its_launch_and_the_gpu_it_runs_on() {
        let env = Rc::new(ThreadEnv {
            memory: Rc::new(DeviceMemory::new(3 << 20)),
            memory_access: SimDuration::ZERO,
            clock_read: SimDuration::ZERO,
            clock_khz: 1_480_000,
            dma_bits: 47,
        });
        let params: Rc<[u8]> = Rc::from(&[7u8, 5, 3][..]);
        let t = ThreadContext::new(5, 9, params, super::super::testing::Stub::default(), env);
        assert_eq!((t.thread(), t.threads()), (5, 9));
        assert_eq!(t.params(), [7, 5, 3]);
        assert_eq!(t.memory_size(), 3 << 20);
        assert_eq!(t.clock_khz(), 1_480_000);
    }

    /// A GPU's thread environment: `memory` bytes, accesses costing `access`, a 32 ns clock
    /// read at 1.48 GHz, 47 address bits.
    fn env_of(memory: u64, access: SimDuration) -> Rc<ThreadEnv> {
        Rc::new(ThreadEnv {
            memory: Rc::new(DeviceMemory::new(memory)),
            memory_access: access,
            clock_read: SimDuration::from_ns(32),
            clock_khz: 1_480_000,
            dma_bits: 47,
        })
    }

    /// Thread 0 of 1 on `world`'s port.
    fn on(world: &World, env: &Rc<ThreadEnv>) -> ThreadContext<World> {
        ThreadContext::new(0, 1, Rc::from(&[][..]), world.clone(), env.clone())
    }

    fn at_ns(ns: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_ns(ns)
    }

    #[test]
    fn loads_and_stores_reach_device_memory_and_the_bus_byte_exact() {
        let world = World::default();
        let env = env_of(1 << 20, SimDuration::from_ns(15));
        let t = on(&world, &env);
        world.poke(0x3000, &0x1122_3344_5566_7788u64.to_le_bytes());
        let w = world.clone();
        let (values, at) = world
            .block_on(
                async move {
                    t.store(GpuAddr::Device(16), &[1, 2, 3, 4, 5]).await?;
                    let mut back = [0u8; 5];
                    t.load(GpuAddr::Device(16), &mut back).await?;
                    t.store_u64(GpuAddr::Device(64), 0x0807_0605_0403_0201)
                        .await?;
                    let device = t.load_u64(GpuAddr::Device(64)).await?;
                    let bus = t.load_u64(GpuAddr::Bus(BusAddr(0x3000))).await?;
                    t.store_u64(GpuAddr::Bus(BusAddr(0x4000)), device).await?;
                    t.store(GpuAddr::Bus(BusAddr(0x4008)), &back).await?;
                    let mut tail = [0u8; 3];
                    t.load(GpuAddr::Bus(BusAddr(0x400a)), &mut tail).await?;
                    Ok::<_, KernelFault>(((back, device, bus, tail), w.now()))
                },
                [],
            )
            .expect("every access in range");
        assert_eq!(
            values,
            (
                [1, 2, 3, 4, 5],
                0x0807_0605_0403_0201,
                0x1122_3344_5566_7788,
                [3, 4, 5]
            )
        );
        let mut stored = [0u8; 8];
        env.memory.read(64, &mut stored).expect("inside memory");
        assert_eq!(stored, [1, 2, 3, 4, 5, 6, 7, 8], "little-endian");
        assert_eq!(
            world.writes(),
            [
                (0x4000, vec![1, 2, 3, 4, 5, 6, 7, 8]),
                (0x4008, vec![1, 2, 3, 4, 5])
            ]
        );
        assert_eq!(
            at,
            at_ns(4 * 15),
            "four device-memory accesses, the bus's free"
        );
    }

    #[test]
    fn an_access_outside_memory_or_past_the_address_limit_faults_without_touching_the_bus() {
        let world = World::default();
        let env = env_of(4096, SimDuration::from_ns(15));
        let t = on(&world, &env);
        let beyond = BusAddr(1 << 47);
        let nothing_there = BusAddr(crate::testing::MEMORY_END);
        let faults = world.block_on(
            async move {
                let mut b = [0u8; 8];
                vec![
                    t.load(GpuAddr::Device(4092), &mut b).await,
                    t.store(GpuAddr::Device(4096), &[1]).await,
                    t.load(GpuAddr::Bus(beyond), &mut b).await,
                    t.store(GpuAddr::Bus(BusAddr((1 << 47) - 4)), &b).await,
                    t.poll_bus_until(beyond, |_| true).await.map(|_| ()),
                    t.load(GpuAddr::Bus(nothing_there), &mut b).await,
                ]
            },
            [],
        );
        let outside = FaultReason::OutsideMemory { memory: 4096 };
        let limit = FaultReason::AddressLimit { bits: 47 };
        let refused = FaultReason::Bus(AccessError::UnsupportedRequest {
            host: "test world".into(),
            addr: nothing_there,
        });
        let fault = |address, reason| Err(KernelFault { address, reason });
        assert_eq!(
            faults,
            [
                fault(GpuAddr::Device(4092), outside.clone()),
                fault(GpuAddr::Device(4096), outside),
                fault(GpuAddr::Bus(beyond), limit.clone()),
                fault(GpuAddr::Bus(BusAddr((1 << 47) - 4)), limit.clone()),
                fault(GpuAddr::Bus(beyond), limit),
                fault(GpuAddr::Bus(nothing_there), refused),
            ]
        );
        assert_eq!(
            world.reads(),
            [(nothing_there.get(), 8)],
            "only the address below the limit went on the bus"
        );
        assert_eq!(world.writes(), []);
        assert_eq!(world.now(), SimTime::ZERO, "no access was made");
    }

    /// A thread that starts spinning at 10 ns on device-memory word 64 until it is 7, while
    /// another thread stores 3 there at 50 ns and 7 at 101 ns: the value it returns and when.
    fn spin_on_stores(access: SimDuration) -> (Result<u64, KernelFault>, SimTime) {
        let world = World::default();
        let env = env_of(4096, access);
        let (t, w) = (on(&world, &env), world.clone());
        let memory = env.memory.clone();
        let writer: LocalTask = Box::pin({
            let w = world.clone();
            async move {
                for (ns, v) in [(50, 3u64), (101, 7)] {
                    w.sleep(at_ns(ns).since(w.now())).await;
                    memory.write(64, &v.to_le_bytes()).expect("inside memory");
                }
            }
        });
        world.block_on(
            async move {
                w.sleep(SimDuration::from_ns(10)).await;
                let v = t.wait_until(64, |v| v == 7).await;
                (v, w.now())
            },
            [writer],
        )
    }

    #[test]
    fn a_spinning_thread_reads_its_word_every_memory_access_from_when_it_started() {
        // Reads at 25, 40, 55 (sees 3), then 70, 85, 100, 115: the store at 101 is seen at 115.
        assert_eq!(
            spin_on_stores(SimDuration::from_ns(15)),
            (Ok(7), at_ns(115))
        );
        // Free accesses: the store is seen the moment it lands.
        assert_eq!(spin_on_stores(SimDuration::ZERO), (Ok(7), at_ns(101)));
    }

    #[test]
    fn a_thread_polling_the_bus_reads_again_as_soon_as_a_read_completes() {
        let world = World::default();
        world.set_read_latency(SimDuration::from_ns(300));
        let env = env_of(4096, SimDuration::from_ns(15));
        let (t, w) = (on(&world, &env), world.clone());
        let host: LocalTask = Box::pin({
            let w = world.clone();
            async move {
                w.sleep(SimDuration::from_ns(1000)).await;
                w.poke(0x5000, &0x77u64.to_le_bytes());
            }
        });
        let got = world.block_on(
            async move {
                let v = t.poll_bus_until(BusAddr(0x5000), |v| v == 0x77).await;
                (v, w.now())
            },
            [host],
        );
        assert_eq!(
            got,
            (Ok(0x77), at_ns(1200)),
            "reads done at 300, 600, 900, 1200"
        );
        assert_eq!(world.reads(), [(0x5000, 8); 4]);
    }

    #[test]
    fn the_cycle_counter_counts_the_clock_from_time_zero_after_its_read_cost() {
        let world = World::default();
        let env = env_of(4096, SimDuration::ZERO);
        let (t, w) = (on(&world, &env), world.clone());
        let (cycles, at) = world.block_on(
            async move {
                w.sleep(SimDuration::from_us(1000)).await;
                let c = t.clock64().await;
                (c, w.now())
            },
            [],
        );
        assert_eq!(at, at_ns(1_000_032), "the read costs 32 ns");
        assert_eq!(cycles, 1_480_047, "1,000,032 ns at 1.48 GHz");
        assert_eq!(on(&world, &env).now(), at, "the simulation's time");
    }
}
