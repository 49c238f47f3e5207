//! The GPU model on the shipped `local-chassis` scenario, driven with raw MMIO from a CPU
//! agent (no runtime): rings in host RAM, channel registers written through BAR0 over the
//! fabric, PUT rung, RELEASE words polled in RAM. Copies in every direction (host, device,
//! the peer GPU's aperture), kernels that talk to each other through apertures, timestamps,
//! MSI-X, every error code with its notice, RESET, and determinism.
//!
//! ```text
//!   local (64 GiB, IOMMU off: bus address = physical) ── hib68-host ══ hib68-target ── chassis
//!                                                                          ├─ gpu0 ──┐ peer-to-peer
//!                                                                          └─ gpu1 <─┘ below the switch
//! ```

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, DeviceKind};
use smartio_devices::gpu::spec::{
    self, channel, reg, status, Command, ErrorCode, ErrorNotice, GpuAddr, KernelId, ENTRY_SIZE,
    GPU_MAGIC,
};
use smartio_devices::gpu::{KernelFn, KernelFuture, ThreadContext};
use smartio_fabric::{EndpointId, HostId};
use smartio_machine::Agent;
use smartio_platform::pci::{self, command, msix};
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

/// Host RAM the tests use (well inside the host's 64 GiB).
const RINGS: u64 = 0x0100_0000;
const NOTICES: u64 = 0x0200_0000;
const WORDS: u64 = 0x0300_0000;
const MSI_WORD: u64 = 0x0380_0000;
const DATA: u64 = 0x0400_0000;
const OUT: u64 = 0x0800_0000;
/// A bus address no target claims (below every profile's DMA limit).
const NOWHERE: u64 = 0x4000_0000_0000;

struct Rig {
    cluster: Cluster,
    host: HostId,
    gpu0: EndpointId,
    gpu1: EndpointId,
}

fn rig_with(calibration: &Calibration) -> Rig {
    let cluster = Cluster::new("local-chassis", calibration).expect("scenario loads");
    let (host, gpu0, gpu1) = {
        let fabric = cluster.machine.fabric();
        let host = fabric.host_by_name("local").expect("host local");
        let ep = |name| fabric.endpoint_by_name(host, name).expect("endpoint");
        (host, ep("gpu0"), ep("gpu1"))
    };
    Rig {
        cluster,
        host,
        gpu0,
        gpu1,
    }
}

fn rig() -> Rig {
    rig_with(&Calibration::default_embedded())
}

impl Rig {
    fn bar(&self, endpoint: EndpointId, index: u8) -> BusAddr {
        let fabric = self.cluster.machine.fabric();
        fabric
            .endpoint(endpoint)
            .bars
            .iter()
            .find(|b| b.index == index)
            .unwrap_or_else(|| panic!("no BAR{index}"))
            .base
    }

    fn cpu(&self) -> Agent {
        self.cluster.machine.cpu(self.host)
    }

    fn poke(&self, addr: u64, data: &[u8]) {
        self.cluster
            .machine
            .poke_memory(self.host, PhysAddr(addr), data);
    }

    fn peek(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        self.cluster
            .machine
            .peek_memory(self.host, PhysAddr(addr), &mut buf);
        buf
    }

    fn peek_u64(&self, addr: u64) -> u64 {
        let b = self.peek(addr, 8);
        u64::from_le_bytes(b.try_into().expect("8 bytes"))
    }

    /// Runs `task` on the machine to the end of the simulation and returns its output.
    fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        let out = Rc::new(RefCell::new(None));
        let slot = out.clone();
        self.cluster.machine.spawn(async move {
            let v = task.await;
            *slot.borrow_mut() = Some(v);
        });
        self.cluster.machine.run();
        let v = out.borrow_mut().take();
        v.unwrap_or_else(|| {
            panic!(
                "the driver did not finish: {}",
                self.cluster.machine.blocked_summary()
            )
        })
    }

    fn load(&self, name: &str, kernel: KernelFn<Agent>) -> KernelId {
        self.cluster.gpu_kernels().load(name, kernel)
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// Turns on memory decoding and bus mastering of `endpoint`.
async fn enable(cpu: &Agent, endpoint: EndpointId) {
    let cmd = command::MEMORY_SPACE | command::BUS_MASTER;
    cpu.config_write(endpoint, pci::COMMAND, &cmd.to_le_bytes())
        .await
        .expect("command register");
}

/// Waits until the u64 at RAM address `addr` satisfies `cond`; returns it.
async fn wait_ram(cpu: &Agent, addr: u64, cond: impl Fn(u64) -> bool) -> u64 {
    loop {
        let watch = cpu.written(PhysAddr(addr), 8);
        let mut b = [0u8; 8];
        cpu.read(BusAddr(addr), &mut b).await.expect("RAM");
        let v = u64::from_le_bytes(b);
        if cond(v) {
            return v;
        }
        watch.await;
    }
}

/// A CPU driving one channel with loads and stores: the ring in RAM at
/// `RINGS + c * 1 MiB`, the notifier at `NOTICES + c * 64`.
struct Driver {
    cpu: Agent,
    bar0: BusAddr,
    c: u16,
    ring: u64,
    entries: u64,
    put: u64,
}

impl Driver {
    /// Programs channel `c` of the GPU whose BAR0 is at `bar0` (after enabling the GPU).
    async fn open(cpu: Agent, gpu: EndpointId, bar0: BusAddr, c: u16, entries: u64) -> Driver {
        enable(&cpu, gpu).await;
        let d = Driver {
            cpu,
            bar0,
            c,
            ring: RINGS + u64::from(c) * (1 << 20),
            entries,
            put: 0,
        };
        d.set(channel::RESET, 1).await;
        d.set(channel::RING_BASE, d.ring).await;
        d.set(channel::RING_ENTRIES, entries).await;
        d.set(channel::NOTIFIER, d.notice_addr()).await;
        d.cpu
            .write(BusAddr(d.notice_addr()), &[0u8; ErrorNotice::SIZE])
            .await
            .expect("notice");
        d
    }

    fn notice_addr(&self) -> u64 {
        NOTICES + u64::from(self.c) * 64
    }

    fn reg_addr(&self, r: u64) -> BusAddr {
        self.bar0.offset(channel::base(self.c) + r)
    }

    async fn reg(&self, r: u64) -> u64 {
        let mut b = [0u8; 8];
        self.cpu
            .read(self.reg_addr(r), &mut b)
            .await
            .expect("register read");
        u64::from_le_bytes(b)
    }

    async fn set(&self, r: u64, value: u64) {
        self.cpu
            .write(self.reg_addr(r), &value.to_le_bytes())
            .await
            .expect("register write");
    }

    async fn push_raw(&mut self, entry: [u8; ENTRY_SIZE as usize]) {
        let at = self.ring + (self.put % self.entries) * ENTRY_SIZE;
        self.cpu
            .write(BusAddr(at), &entry)
            .await
            .expect("ring entry");
        self.put += 1;
    }

    async fn push(&mut self, command: Command) {
        self.push_raw(command.encode()).await;
    }

    /// A launch of `kernel` with `params` (its parameter entries follow it).
    async fn launch(&mut self, kernel: KernelId, threads: u32, params: &[u8]) {
        self.push(Command::Launch {
            kernel,
            threads,
            param_bytes: params.len() as u64,
        })
        .await;
        for chunk in params.chunks(ENTRY_SIZE as usize) {
            let mut e = [0u8; ENTRY_SIZE as usize];
            e[..chunk.len()].copy_from_slice(chunk);
            self.push_raw(e).await;
        }
    }

    /// A release of `value` into RAM at `addr`.
    async fn release(&mut self, addr: u64, value: u64) {
        self.push(Command::Release {
            dst: GpuAddr::Bus(BusAddr(addr)),
            value,
            interrupt: false,
        })
        .await;
    }

    /// Rings the doorbell: `PUT` = entries pushed.
    async fn submit(&self) {
        self.set(channel::PUT, self.put).await;
    }

    /// Pushes a release of `value` at `WORDS + 8 * c`, submits, and waits for it.
    async fn sync(&mut self, value: u64) {
        let at = WORDS + 8 * u64::from(self.c);
        self.cpu.write(BusAddr(at), &[0u8; 8]).await.expect("RAM");
        self.release(at, value).await;
        self.submit().await;
        wait_ram(&self.cpu, at, |v| v == value).await;
    }

    /// Waits for the channel's error notice; returns it with `STATUS`, `ERROR`,
    /// `ERROR_INFO` and `GET`.
    async fn stopped(&self) -> (ErrorNotice, [u64; 4]) {
        wait_ram(&self.cpu, self.notice_addr(), |v| v != 0).await;
        let mut b = [0u8; ErrorNotice::SIZE];
        self.cpu
            .read(BusAddr(self.notice_addr()), &mut b)
            .await
            .expect("notice");
        let notice = ErrorNotice::decode(&b).expect("a notice");
        let regs = [
            self.reg(channel::STATUS).await,
            self.reg(channel::ERROR).await,
            self.reg(channel::ERROR_INFO).await,
            self.reg(channel::GET).await,
        ];
        (notice, regs)
    }

    /// `RESET`, and the local view of the ring back to entry 0; clears the notice.
    async fn reset(&mut self) {
        self.set(channel::RESET, 1).await;
        self.put = 0;
        self.cpu
            .write(BusAddr(self.notice_addr()), &[0u8; ErrorNotice::SIZE])
            .await
            .expect("notice");
    }
}

#[test]
fn gpus_are_built_from_their_profile_and_answer_their_registers_over_the_fabric() {
    let r = rig();
    assert_eq!(r.cluster.models_of(DeviceKind::Gpu).count(), 2);
    let gpus: Vec<EndpointId> = r.cluster.gpus().map(|(e, _)| e).collect();
    assert_eq!(gpus, vec![r.gpu0, r.gpu1]);
    let g0 = r.cluster.gpu(r.gpu0).expect("gpu0");
    let g1 = r.cluster.gpu(r.gpu1).expect("gpu1");
    assert!(
        Rc::ptr_eq(g0.kernels(), g1.kernels()) && Rc::ptr_eq(g0.kernels(), r.cluster.gpu_kernels()),
        "one kernel library per cluster"
    );
    assert!(
        r.cluster.copy_engine(r.gpu0).is_none(),
        "no stand-in any more"
    );
    let bar1 = r.cluster.machine.fabric().endpoint(r.gpu0).bars[1];
    assert_eq!((bar1.index, bar1.size), (spec::APERTURE_BAR, 256 << 20));
    assert_eq!(g0.aperture_size(), 256 << 20);
    assert_eq!(g0.memory_size(), 8 << 30);

    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    let regs = r.run(async move {
        let mut id = [0u8; 4];
        cpu.config_read(gpu0, 0, &mut id).await.expect("config");
        let mut values = vec![u64::from(u32::from_le_bytes(id))];
        for offset in [
            reg::ID,
            reg::MEMORY_SIZE,
            reg::APERTURE_SIZE,
            reg::COPY_ENGINES,
            reg::SM_COUNT,
            reg::CLOCK_KHZ,
            reg::DMA_BITS,
            reg::CHANNELS,
            reg::TIMER,
        ] {
            let mut b = [0u8; 8];
            cpu.read(bar0.offset(offset), &mut b)
                .await
                .expect("register");
            values.push(u64::from_le_bytes(b));
        }
        values.push(cpu.now().as_ps() / 1000);
        values
    });
    assert_eq!(regs[0] & 0xffff, u64::from(spec::VENDOR_ID));
    assert_eq!(
        regs[1..9],
        [GPU_MAGIC, 8 << 30, 256 << 20, 2, 14, 1_480_000, 47, 8],
        "the p4000 profile"
    );
    assert!(
        regs[9] > 0 && regs[9] <= regs[10],
        "TIMER is virtual time in ns"
    );
}

#[test]
fn host_to_device_and_device_to_host_copies_move_the_bytes_exactly() {
    let r = rig();
    const LEN: usize = 300_007; // not a multiple of any payload size
    const DEVICE: u64 = 1 << 30; // beyond the aperture: only the GPU reaches it
    let data = pattern(LEN, 7);
    r.poke(DATA, &data);
    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    r.run(async move {
        let mut d = Driver::open(cpu, gpu0, bar0, 0, 64).await;
        d.push(Command::Copy {
            src: GpuAddr::Bus(BusAddr(DATA)),
            dst: GpuAddr::Device(DEVICE),
            len: LEN as u64,
        })
        .await;
        d.push(Command::Copy {
            src: GpuAddr::Device(DEVICE),
            dst: GpuAddr::Bus(BusAddr(OUT)),
            len: LEN as u64,
        })
        .await;
        d.sync(1).await;
        assert_eq!(d.reg(channel::GET).await, 3);
        assert_eq!(d.reg(channel::STATUS).await, status::IDLE);
    });
    let g0 = r.cluster.gpu(r.gpu0).expect("gpu0");
    let mut landed = vec![0u8; LEN];
    g0.peek(DEVICE, &mut landed).expect("device memory");
    assert!(landed == data, "host bytes arrived in device memory");
    assert!(r.peek(OUT, LEN) == data, "and came back to the host");
    assert_eq!(r.peek(OUT + LEN as u64, 8), [0; 8], "nothing after them");
    assert!(r.cluster.machine.faults().is_empty());
}

#[test]
fn gpu0_copies_into_gpu1_through_gpu1s_aperture_and_within_its_own_memory() {
    let r = rig();
    const LEN: usize = 200_003;
    const AT: u64 = 4096;
    let data = pattern(LEN, 3);
    let g0 = r.cluster.gpu(r.gpu0).expect("gpu0");
    let g1 = r.cluster.gpu(r.gpu1).expect("gpu1");
    g0.poke(0, &data).expect("gpu0 memory");
    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    let peer = r.bar(r.gpu1, spec::APERTURE_BAR);
    r.run(async move {
        let mut d = Driver::open(cpu, gpu0, bar0, 1, 64).await;
        d.push(Command::Copy {
            src: GpuAddr::Device(0),
            dst: GpuAddr::Bus(peer.offset(AT)),
            len: LEN as u64,
        })
        .await;
        d.push(Command::Copy {
            src: GpuAddr::Device(0),
            dst: GpuAddr::Device(3 << 30),
            len: LEN as u64,
        })
        .await;
        d.sync(1).await;
    });
    let mut landed = vec![0u8; LEN];
    g1.peek(AT, &mut landed).expect("gpu1 memory");
    assert!(landed == data, "peer-to-peer into gpu1");
    let mut around = [0u8; 8];
    g1.peek(AT - 8, &mut around).expect("gpu1 memory");
    assert_eq!(around, [0; 8], "nothing before the destination");
    g0.peek(3 << 30, &mut landed).expect("gpu0 memory");
    assert!(landed == data, "device to device");
    assert!(r.cluster.machine.faults().is_empty());
}

/// Timestamps of: before and after a copy of `small`, after a copy of `large` bytes (host to
/// device), after a device-to-device copy of `large`, and after a launch of an empty kernel.
fn timestamps(small: u64, large: u64) -> Vec<u64> {
    let r = rig();
    let nothing = r.load("nothing", Rc::new(|_| Box::pin(async { Ok(()) })));
    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    r.run(async move {
        let mut d = Driver::open(cpu, gpu0, bar0, 2, 64).await;
        let ts = |i: u64| Command::Timestamp {
            dst: GpuAddr::Bus(BusAddr(OUT + 8 * i)),
        };
        d.push(ts(0)).await;
        for (i, len) in [small, large].into_iter().enumerate() {
            d.push(Command::Copy {
                src: GpuAddr::Bus(BusAddr(DATA)),
                dst: GpuAddr::Device(0),
                len,
            })
            .await;
            d.push(ts(i as u64 + 1)).await;
        }
        d.push(Command::Copy {
            src: GpuAddr::Device(0),
            dst: GpuAddr::Device(1 << 30),
            len: large,
        })
        .await;
        d.push(ts(3)).await;
        d.launch(nothing, 32, &[]).await;
        d.push(ts(4)).await;
        d.sync(1).await;
    });
    (0..5).map(|i| r.peek_u64(OUT + 8 * i)).collect()
}

#[test]
fn timestamps_increase_and_the_time_around_a_copy_grows_with_its_size() {
    let t = timestamps(4096, 1 << 20);
    assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    let (small, large) = (t[1] - t[0], t[2] - t[1]);
    assert!(
        large > 10 * small,
        "4 KiB took {small} ns, 1 MiB {large} ns"
    );
    // At most 16 GB/s on Gen3 x16: 1 MiB takes at least 65 µs.
    assert!(large > 65_000, "{large} ns");
    // Device to device at 243 GB/s: 1 MiB in about 4.3 µs, plus the start-up.
    let local = t[3] - t[2];
    assert!((4_000..7_000).contains(&local), "{local} ns");
    let launch = t[4] - t[3];
    assert!(
        launch >= 1_500,
        "a launch costs at least launch_ns: {launch} ns"
    );
}

#[test]
fn the_same_run_twice_gives_identical_timestamps() {
    assert_eq!(timestamps(512, 65536), timestamps(512, 65536));
}

/// The ping-pong kernel's parameters: where to write the peer's flag (a bus address in its
/// aperture), the offset of this GPU's own flag, rounds, whether this side serves first.
fn pingpong_params(peer_flag: BusAddr, own_flag: u64, rounds: u64, first: bool) -> Vec<u8> {
    [peer_flag.get(), own_flag, rounds, u64::from(first)]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

fn pingpong_kernel() -> KernelFn<Agent> {
    Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let p = ctx.params().to_vec();
            let (peer, own, rounds, first) = (
                BusAddr(word(&p, 0)),
                word(&p, 1),
                word(&p, 2),
                word(&p, 3) == 1,
            );
            let start = ctx.clock64().await;
            for i in 1..=rounds {
                if first {
                    ctx.store_u64(GpuAddr::Bus(peer), i).await?;
                    ctx.wait_until(own, |v| v >= i).await?;
                } else {
                    ctx.wait_until(own, |v| v >= i).await?;
                    ctx.store_u64(GpuAddr::Bus(peer), i).await?;
                }
            }
            let cycles = ctx.clock64().await - start;
            ctx.store_u64(GpuAddr::Device(own + 8), cycles).await
        })
    })
}

#[test]
fn kernels_on_two_gpus_ping_pong_through_each_others_apertures() {
    let r = rig();
    const FLAG: u64 = 1 << 16;
    const ROUNDS: u64 = 20;
    let kernel = r.load("pingpong", pingpong_kernel());
    let (a0, a1) = (r.bar(r.gpu0, 1), r.bar(r.gpu1, 1));
    let (b0, b1) = (r.bar(r.gpu0, 0), r.bar(r.gpu1, 0));
    let (cpu, gpu0, gpu1) = (r.cpu(), r.gpu0, r.gpu1);
    let elapsed = r.run(async move {
        let mut d0 = Driver::open(cpu.clone(), gpu0, b0, 0, 16).await;
        let mut d1 = Driver::open(cpu.clone(), gpu1, b1, 1, 16).await;
        d1.launch(
            kernel,
            1,
            &pingpong_params(a0.offset(FLAG), FLAG, ROUNDS, false),
        )
        .await;
        d1.release(WORDS + 8, 1).await;
        d1.submit().await;
        let start = cpu.now();
        d0.launch(
            kernel,
            1,
            &pingpong_params(a1.offset(FLAG), FLAG, ROUNDS, true),
        )
        .await;
        d0.sync(1).await;
        wait_ram(&cpu, WORDS + 8, |v| v == 1).await;
        cpu.now().since(start)
    });
    let mut flag = [0u8; 16];
    for g in [r.gpu0, r.gpu1] {
        r.cluster
            .gpu(g)
            .expect("gpu")
            .peek(FLAG, &mut flag)
            .expect("memory");
        assert_eq!(word(&flag, 0), ROUNDS, "each side saw every round");
        // At 1.48 GHz: a round trip is two posted writes through the chassis switch and
        // the waiting side's reads of its flag, well over 200 ns; and the kernels ran
        // within the time the CPU waited.
        let cycles = word(&flag, 1);
        assert!(cycles > ROUNDS * 300, "{cycles} cycles");
        assert!(
            cycles < elapsed.as_ps() * 148 / 100_000,
            "{cycles} cycles in {elapsed:?}"
        );
    }
    assert!(r.cluster.machine.faults().is_empty());
}

#[test]
fn a_launch_of_many_threads_waits_for_a_flag_written_through_bar1() {
    let r = rig();
    const FLAG: u64 = 0;
    const THREADS: u32 = spec::MAX_THREADS;
    let kernel = r.load(
        "waiters",
        Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
            Box::pin(async move {
                let v = ctx.wait_until(FLAG, |v| v == 7).await?;
                let slot = 4096 + 8 * u64::from(ctx.thread());
                ctx.store_u64(GpuAddr::Device(slot), v + u64::from(ctx.thread()))
                    .await
            })
        }),
    );
    let (cpu, gpu0, bar0, bar1) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0), r.bar(r.gpu0, 1));
    r.run(async move {
        let mut d = Driver::open(cpu.clone(), gpu0, bar0, 3, 64).await;
        d.launch(kernel, THREADS, &[]).await;
        d.release(WORDS, 1).await;
        d.submit().await;
        cpu.sleep(SimDuration::from_us(50)).await;
        assert_eq!(
            d.reg(channel::GET).await,
            0,
            "the threads are still waiting"
        );
        cpu.write(bar1.offset(FLAG), &6u64.to_le_bytes())
            .await
            .expect("BAR1");
        cpu.sleep(SimDuration::from_us(5)).await;
        assert_eq!(d.reg(channel::GET).await, 0, "6 is not 7");
        cpu.write(bar1.offset(FLAG), &7u64.to_le_bytes())
            .await
            .expect("BAR1");
        wait_ram(&cpu, WORDS, |v| v == 1).await;
    });
    let g0 = r.cluster.gpu(r.gpu0).expect("gpu0");
    let mut slots = vec![0u8; 8 * THREADS as usize];
    g0.peek(4096, &mut slots).expect("memory");
    for t in 0..THREADS as usize {
        assert_eq!(word(&slots, t), 7 + t as u64, "thread {t}");
    }
}

/// The offset of the MSI-X capability of `endpoint`, found by walking the list.
async fn msix_capability(cpu: &Agent, endpoint: EndpointId) -> u16 {
    let mut b = [0u8; 2];
    cpu.config_read(endpoint, pci::CAPABILITIES, &mut b[..1])
        .await
        .expect("config");
    let mut at = u16::from(b[0]);
    while at != 0 {
        cpu.config_read(endpoint, at, &mut b).await.expect("config");
        if b[0] == pci::cap::MSIX {
            return at;
        }
        at = u16::from(b[1]);
    }
    panic!("no MSI-X capability");
}

#[test]
fn a_release_with_interrupt_sends_the_channels_msix_message_held_while_masked() {
    let r = rig();
    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    let (first, pending, later) = r.run(async move {
        const C: u16 = 5;
        let mut d = Driver::open(cpu.clone(), gpu0, bar0, C, 16).await;
        let cap = msix_capability(&cpu, gpu0).await;
        let mut ctl = [0u8; 2];
        cpu.config_read(gpu0, cap + msix::CONTROL, &mut ctl)
            .await
            .expect("config");
        let ctl = u16::from_le_bytes(ctl);
        assert_eq!(ctl & msix::TABLE_SIZE, spec::CHANNELS - 1);
        cpu.config_write(
            gpu0,
            cap + msix::CONTROL,
            &(ctl | msix::ENABLE).to_le_bytes(),
        )
        .await
        .expect("config");
        // Vector C: the message lands in RAM, so the test can see it.
        let entry = bar0.offset(spec::MSIX_TABLE + u64::from(C) * msix::ENTRY_SIZE);
        let mut e = Vec::new();
        for v in [MSI_WORD as u32, 0, 0x4000 + u32::from(C), 0] {
            e.extend_from_slice(&v.to_le_bytes());
        }
        cpu.write(entry, &e).await.expect("MSI-X entry");
        let irq = |v| Command::Release {
            dst: GpuAddr::Bus(BusAddr(WORDS)),
            value: v,
            interrupt: true,
        };
        d.push(irq(1)).await;
        d.submit().await;
        let first = wait_ram(&cpu, MSI_WORD, |v| v != 0).await;
        assert_eq!(r_u64(&cpu, WORDS).await, 1, "the value before the message");

        // Masked: the message waits as a pending bit until software unmasks the vector.
        cpu.write(BusAddr(MSI_WORD), &[0u8; 8]).await.expect("RAM");
        cpu.write(entry.offset(12), &msix::VECTOR_MASKED.to_le_bytes())
            .await
            .expect("mask");
        d.push(irq(2)).await;
        d.submit().await;
        wait_ram(&cpu, WORDS, |v| v == 2).await;
        cpu.sleep(SimDuration::from_us(2)).await;
        let pending = r_u64(&cpu, bar0.get() + spec::MSIX_PBA).await;
        assert_eq!(r_u64(&cpu, MSI_WORD).await, 0, "no message while masked");
        cpu.write(entry.offset(12), &0u32.to_le_bytes())
            .await
            .expect("unmask");
        let later = wait_ram(&cpu, MSI_WORD, |v| v != 0).await;
        (first, pending, later)
    });
    assert_eq!(first, 0x4005);
    assert_eq!(pending, 1 << 5, "vector 5 pending");
    assert_eq!(later, 0x4005);
}

async fn r_u64(cpu: &Agent, addr: u64) -> u64 {
    let mut b = [0u8; 8];
    cpu.read(BusAddr(addr), &mut b).await.expect("read");
    u64::from_le_bytes(b)
}

/// How a channel is made to fail.
struct Failing {
    /// Entries before the failing one (each must succeed).
    before: Vec<Command>,
    /// The failing entry.
    entry: [u8; ENTRY_SIZE as usize],
    /// Entries after it (parameters of a launch).
    after: Vec<[u8; ENTRY_SIZE as usize]>,
    /// `RING_ENTRIES` (64 unless a test breaks it).
    ring_entries: u64,
    /// `RING_BASE` (the driver's unless a test breaks it).
    ring_base: Option<u64>,
    /// `PUT` (entries pushed unless a test breaks it).
    put: Option<u64>,
}

impl Failing {
    fn entry(entry: [u8; ENTRY_SIZE as usize]) -> Self {
        Failing {
            before: Vec::new(),
            entry,
            after: Vec::new(),
            ring_entries: 64,
            ring_base: None,
            put: None,
        }
    }

    fn command(c: Command) -> Self {
        Self::entry(c.encode())
    }
}

/// Runs `case` on channel 6 of gpu0; returns the notice and `[STATUS, ERROR, ERROR_INFO,
/// GET]`, after checking that a RESET recovers the channel.
fn fail(r: &Rig, case: Failing) -> (ErrorNotice, [u64; 4]) {
    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    r.run(async move {
        let mut d = Driver::open(cpu, gpu0, bar0, 6, case.ring_entries).await;
        if let Some(base) = case.ring_base {
            d.set(channel::RING_BASE, base).await;
        }
        for c in case.before {
            d.push(c).await;
        }
        d.push_raw(case.entry).await;
        for e in case.after {
            d.push_raw(e).await;
        }
        match case.put {
            Some(put) => d.set(channel::PUT, put).await,
            None => d.submit().await,
        }
        let stopped = d.stopped().await;
        // Stopped: a later doorbell does nothing.
        d.set(channel::PUT, d.put).await;
        assert_eq!(d.reg(channel::STATUS).await, status::ERROR);

        // RESET recovers the channel.
        d.reset().await;
        assert_eq!(
            [
                d.reg(channel::STATUS).await,
                d.reg(channel::ERROR).await,
                d.reg(channel::GET).await,
                d.reg(channel::PUT).await,
            ],
            [status::IDLE, 0, 0, 0]
        );
        d.set(channel::RING_BASE, d.ring).await;
        d.set(channel::RING_ENTRIES, 64).await;
        d.entries = 64;
        d.sync(0xfeed).await;
        assert_eq!(d.reg(channel::GET).await, 1, "the channel runs again");
        stopped
    })
}

fn assert_stopped(got: (ErrorNotice, [u64; 4]), code: ErrorCode, info: u64, entry: u64) {
    let (notice, [st, error, error_info, get]) = got;
    assert_eq!(notice, ErrorNotice { code, info, entry });
    assert_eq!(st, status::ERROR);
    assert_eq!(error, code as u64);
    assert_eq!(error_info, info);
    assert_eq!(get, entry, "GET stays at the failed entry");
}

#[test]
fn a_bad_command_stops_the_channel_with_its_opcode() {
    let r = rig();
    let mut e = Command::Nop.encode();
    e[0] = 9;
    let case = Failing {
        before: vec![Command::Nop, Command::Nop],
        ..Failing::entry(e)
    };
    assert_stopped(fail(&r, case), ErrorCode::BadCommand, 9, 2);
    let mut e = Command::Nop.encode();
    e[4] = spec::flags::INTERRUPT as u8; // a flag NOP does not take
    assert_stopped(
        fail(&r, Failing::entry(e)),
        ErrorCode::BadCommand,
        u64::from(spec::opcode::NOP),
        0,
    );
}

#[test]
fn a_launch_of_an_unknown_kernel_stops_the_channel_with_its_id() {
    let r = rig();
    let case = Failing::command(Command::Launch {
        kernel: KernelId(99),
        threads: 1,
        param_bytes: 0,
    });
    assert_stopped(fail(&r, case), ErrorCode::UnknownKernel, 99, 0);
}

#[test]
fn addresses_beyond_the_dma_limit_stop_the_channel_before_touching_the_bus() {
    // A P4000 that reaches 40 bits only, as a K420 does.
    let mut cal = Calibration::default_embedded();
    cal.gpu.get_mut("p4000").expect("p4000").dma_bits.value = 40.0;
    let r = rig_with(&cal);
    let far = 1u64 << 40;
    let case = Failing::command(Command::Copy {
        src: GpuAddr::Device(0),
        dst: GpuAddr::Bus(BusAddr(far)),
        len: 8,
    });
    assert_stopped(fail(&r, case), ErrorCode::AddressLimit, far, 0);
    let case = Failing::command(Command::Release {
        dst: GpuAddr::Bus(BusAddr(far - 4)),
        value: 1,
        interrupt: false,
    });
    assert_stopped(fail(&r, case), ErrorCode::AddressLimit, far - 4, 0);
    assert!(
        r.cluster.machine.faults().is_empty(),
        "nothing reached the fabric: {:?}",
        r.cluster.machine.faults()
    );
}

#[test]
fn the_k420_profile_reaches_40_bits_only() {
    let spec_text = smartio_cluster::SHIPPED
        .iter()
        .find(|s| s.name == "local-chassis")
        .expect("shipped")
        .text;
    let text = spec_text.replacen(
        "name = \"gpu0\"\nkind = \"gpu\"",
        "name = \"gpu0\"\nkind = \"gpu\"\nparams = { profile = \"k420\", memory = \"2G\" }",
        1,
    );
    assert_ne!(text, spec_text);
    let spec = smartio_fabric::spec::parse_scenario("k420.toml", &text).expect("spec");
    let fabric =
        smartio_fabric::Fabric::build(&spec, &smartio_devices::layout_for).expect("fabric");
    let cluster = Cluster::from_fabric(
        fabric,
        &Calibration::default_embedded(),
        &Default::default(),
    )
    .expect("cluster");
    let ep = {
        let f = cluster.machine.fabric();
        let host = f.host_by_name("local").expect("host");
        f.endpoint_by_name(host, "gpu0").expect("gpu0")
    };
    let g = cluster.gpu(ep).expect("gpu0");
    assert_eq!(g.config().timing.dma_bits, 40);
    assert_eq!(g.config().timing.copy_engines, 1);
    assert_eq!((g.memory_size(), g.aperture_size()), (2 << 30, 256 << 20));
}

#[test]
fn a_kernel_fault_at_an_unmapped_bus_address_stops_the_launch_and_the_channel() {
    let r = rig();
    let kernel = r.load(
        "faulty",
        Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
            Box::pin(async move {
                if ctx.thread() == 0 {
                    ctx.nanosleep(SimDuration::from_us(1)).await;
                    ctx.load_u64(GpuAddr::Bus(BusAddr(NOWHERE))).await?;
                } else {
                    // Would wait forever: the fault aborts these threads.
                    ctx.wait_until(0, |v| v == u64::MAX).await?;
                }
                Ok(())
            })
        }),
    );
    let mut params = [0u8; 64];
    params[0] = 1;
    let case = Failing {
        before: vec![Command::Nop],
        after: vec![params],
        ..Failing::command(Command::Launch {
            kernel,
            threads: 4,
            param_bytes: 1,
        })
    };
    assert_stopped(fail(&r, case), ErrorCode::KernelFault, NOWHERE, 1);
}

#[test]
fn a_copy_beyond_device_memory_or_from_nowhere_stops_the_channel_with_the_address() {
    let r = rig();
    let memory = 8u64 << 30;
    let case = Failing::command(Command::Copy {
        src: GpuAddr::Bus(BusAddr(DATA)),
        dst: GpuAddr::Device(memory - 16),
        len: 64,
    });
    assert_stopped(fail(&r, case), ErrorCode::CopyFailed, memory - 16, 0);
    let case = Failing::command(Command::Copy {
        src: GpuAddr::Bus(BusAddr(NOWHERE)),
        dst: GpuAddr::Device(0),
        len: 64,
    });
    assert_stopped(fail(&r, case), ErrorCode::CopyFailed, NOWHERE, 0);
}

#[test]
fn a_put_more_than_a_ring_ahead_stops_the_channel() {
    let r = rig();
    let case = Failing {
        ring_entries: 16,
        put: Some(17),
        ..Failing::command(Command::Nop)
    };
    assert_stopped(fail(&r, case), ErrorCode::BadPut, 17, 0);
}

#[test]
fn a_ring_that_is_not_set_up_stops_the_channel_with_the_offending_value() {
    let r = rig();
    let case = Failing {
        ring_entries: 3,
        ..Failing::command(Command::Nop)
    };
    assert_stopped(fail(&r, case), ErrorCode::BadRing, 3, 0);
    let case = Failing {
        ring_base: Some(RINGS + 6 * (1 << 20) + 32),
        ..Failing::command(Command::Nop)
    };
    assert_stopped(
        fail(&r, case),
        ErrorCode::BadRing,
        RINGS + 6 * (1 << 20) + 32,
        0,
    );
    let case = Failing {
        ring_base: Some(NOWHERE),
        ..Failing::command(Command::Nop)
    };
    assert_stopped(fail(&r, case), ErrorCode::FetchFailed, NOWHERE, 0);
}

#[test]
fn a_ring_wraps_and_a_launchs_parameters_may_cross_a_fetch_batch() {
    let r = rig();
    let kernel = r.load(
        "sum",
        Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
            Box::pin(async move {
                let sum: u64 = ctx.params().iter().map(|&b| u64::from(b)).sum();
                ctx.store_u64(GpuAddr::Device(0), sum).await
            })
        }),
    );
    let (cpu, gpu0, bar0) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0));
    let g0 = r.cluster.gpu(r.gpu0).expect("gpu0");
    let sum = r.run(async move {
        // 8 entries: the launch at index 6 has parameters at 7, 8 (wrapped to 0) and 9.
        let mut d = Driver::open(cpu, gpu0, bar0, 7, 8).await;
        for _ in 0..5 {
            d.push(Command::Nop).await;
        }
        d.sync(1).await;
        let params: Vec<u8> = (0..150u32).map(|i| i as u8).collect();
        d.launch(kernel, 1, &params).await;
        d.sync(2).await;
        assert_eq!(d.reg(channel::GET).await, 11);
        let mut b = [0u8; 8];
        g0.peek(0, &mut b).expect("memory");
        u64::from_le_bytes(b)
    });
    assert_eq!(sum, (0..150u64).sum::<u64>());
}

#[test]
fn a_reset_drops_a_running_launch_and_the_channel_runs_again() {
    let r = rig();
    const FLAG: u64 = 64;
    let kernel = r.load(
        "stuck",
        Rc::new(|ctx: ThreadContext<Agent>| -> KernelFuture {
            Box::pin(async move {
                ctx.wait_until(FLAG, |v| v == 1).await?;
                let slot = 4096 + 8 * u64::from(ctx.thread());
                ctx.store_u64(GpuAddr::Device(slot), 0xdead).await
            })
        }),
    );
    let (cpu, gpu0, bar0, bar1) = (r.cpu(), r.gpu0, r.bar(r.gpu0, 0), r.bar(r.gpu0, 1));
    r.run(async move {
        let mut d = Driver::open(cpu.clone(), gpu0, bar0, 4, 64).await;
        d.launch(kernel, 16, &[]).await;
        d.release(WORDS, 1).await;
        d.submit().await;
        cpu.sleep(SimDuration::from_us(20)).await;
        assert_eq!(d.reg(channel::STATUS).await, status::RUNNING);
        assert_eq!(d.reg(channel::GET).await, 0);
        d.reset().await;
        assert_eq!(d.reg(channel::STATUS).await, status::IDLE);
        // The threads are gone: the flag they waited for no longer wakes them.
        cpu.write(bar1.offset(FLAG), &1u64.to_le_bytes())
            .await
            .expect("BAR1");
        d.sync(2).await;
        assert_eq!(d.reg(channel::GET).await, 1);
    });
    let mut slots = [0u8; 8 * 16];
    r.cluster
        .gpu(r.gpu0)
        .expect("gpu0")
        .peek(4096, &mut slots)
        .expect("memory");
    assert_eq!(slots, [0u8; 8 * 16], "no aborted thread ran on");
    assert_eq!(
        r.peek_u64(WORDS),
        0,
        "the release before the reset never ran"
    );
    assert_eq!(r.peek_u64(WORDS + 8 * 4), 2, "the one after it did");
}

#[test]
fn a_shut_down_cluster_frees_its_gpus() {
    // A started GPU keeps its port (the clock TIMER reads); the port leads to the engine,
    // which holds the GPU as a BAR handler. Found by the gpu_commands fuzzer: every cluster
    // leaked once its GPUs had run.
    let gpu = {
        let r = rig();
        let g = Rc::downgrade(&r.cluster.gpu(r.gpu0).expect("gpu0"));
        r.cluster.machine.run();
        r.cluster.machine.shutdown();
        g
    };
    assert!(gpu.upgrade().is_none(), "the GPU outlived its cluster");
}
