//! The harness of the NVMe conformance tests: a local chassis whose controller the native
//! driver has probed, ways to reach the controller directly (BAR0, hand-built queues), and
//! builders for raw commands. Used by `nvme_conformance.rs` and `nvme_registers.rs`; each
//! test binary uses only part of it.
#![allow(dead_code, unused_imports)]

pub use smartio_calibration::Calibration;
pub use smartio_cluster::{Cluster, EngineKind};
pub use smartio_devices::nvme::spec::{
    self, admin, cap, cc, cns, csts, feature, id_ctrl, id_ns, io, log, reg, Command, Completion,
    Status, CQE_SIZE, SQE_SIZE,
};
pub use smartio_devices::nvme::NvmeController;
pub use smartio_drivers::nvme::{
    BlockOp, CompletionMode, NvmeDevice, NvmeDriver, NvmeDriverConfig,
};
pub use smartio_host::{DmaBuffer, HostOs, Mmio};
pub use smartio_machine::Agent;
pub use smartio_platform::{AccessError, BusAddr, Clock, Port, SimDuration, PAGE_SIZE};
pub use std::cell::Cell;
pub use std::future::{poll_fn, Future};
pub use std::pin::Pin;
pub use std::rc::Rc;
pub use std::task::Poll;

/// 64 MiB namespaces of 512-byte blocks.
pub const BLOCKS_64M: u64 = (64 << 20) / 512;
/// An address no one in the local host claims.
pub const UNCLAIMED: u64 = 0x7000_0000_0000;

// ---------------------------------------------------------------------------------------
// Set-up
// ---------------------------------------------------------------------------------------

/// How a test's cluster and driver are built.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// The nvme device's `params` inline table contents.
    pub params: &'static str,
    /// Whether the host IOMMU is on.
    pub iommu: bool,
    pub mode: CompletionMode,
    /// I/O queue pairs the driver creates (qids 1..=n; the controller grants exactly n).
    pub io_queues: u16,
    /// A text replacement in the default calibration, `(from, to)`, if any.
    pub calibration: Option<(&'static str, &'static str)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            params: r#"profile = "ramdisk", capacity = "64M""#,
            iommu: false,
            mode: CompletionMode::Poll,
            io_queues: 2,
            calibration: None,
        }
    }
}

/// What a test body gets: the probed driver and ways to reach the controller directly.
pub struct Ctx {
    pub os: HostOs,
    pub dev: Rc<NvmeDevice>,
    pub bar: Mmio,
    pub cpu: Agent,
    pub ctrl: Rc<NvmeController>,
}

/// The shipped local-chassis scenario with the nvme params (and host IOMMU) replaced,
/// written to a temporary directory of its own (removed once the cluster is built).
pub fn scenario_file(tag: &str, setup: &Setup) -> std::path::PathBuf {
    let base = include_str!("../../../../scenarios/local-chassis.toml");
    let nvme = r#"params = { profile = "optane-p4800x" }"#;
    assert!(
        base.contains(nvme),
        "local-chassis.toml changed its nvme0 params line"
    );
    assert!(
        base.contains("iommu = false"),
        "local-chassis.toml changed its iommu line"
    );
    let text = base.replace(nvme, &format!("params = {{ {} }}", setup.params));
    let text = if setup.iommu {
        text.replace("iommu = false", "iommu = true")
    } else {
        text
    };
    let dir = std::env::temp_dir().join(format!(
        "smartio-nvme-conformance-{}-{tag}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("create the scenario temp dir");
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).expect("write the scenario file");
    path
}

/// The default calibration with `setup`'s replacement applied.
fn calibration(setup: &Setup) -> Calibration {
    let Some((from, to)) = setup.calibration else {
        return Calibration::default_embedded();
    };
    let text = include_str!("../../../../calibration/default.toml");
    assert!(
        text.contains(from),
        "the calibration no longer has {from:?}"
    );
    Calibration::parse("edited default.toml", &text.replacen(from, to, 1)).expect("valid edit")
}

/// Boots the scenario, probes `nvme0` with the native driver, runs `body` and checks that it
/// ran to the end. Returns the cluster for checks after the run.
pub fn run<F, Fut>(tag: &str, setup: Setup, body: F) -> Cluster
where
    F: FnOnce(Ctx) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let path = scenario_file(tag, &setup);
    let cluster = Cluster::on(
        EngineKind::for_test_target(env!("CARGO_CRATE_NAME")),
        path.to_str().expect("utf-8 temp path"),
        &calibration(&setup),
    )
    .expect("cluster from the scenario copy");
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let os = HostOs::boot_all(&cluster.machine).expect("boot").remove(0);
    os.register_driver(Rc::new(NvmeDriver {
        config: NvmeDriverConfig {
            mode: setup.mode,
            io_queues: setup.io_queues,
            ..NvmeDriverConfig::default()
        },
    }));
    let (_, ctrl) = cluster
        .nvme_controllers()
        .next()
        .expect("an nvme controller");
    let done = Rc::new(Cell::new(false));
    let flag = done.clone();
    cluster.machine.spawn(async move {
        os.probe("nvme0").await.expect("probe nvme0");
        let dev = os.driver_data::<NvmeDevice>("nvme0").expect("nvme0 bound");
        let bar = dev.handle().map_bar(0).expect("map BAR0");
        let cpu = os.cpu();
        body(Ctx {
            os,
            dev,
            bar,
            cpu,
            ctrl,
        })
        .await;
        flag.set(true);
    });
    cluster.machine.run();
    assert!(done.get(), "{tag}: the test task did not run to the end");
    cluster
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

#[track_caller]
pub fn assert_bytes(actual: &[u8], expected: &[u8], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    if let Some(i) = actual.iter().zip(expected).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i}: {:#04x} != expected {:#04x}",
            actual[i], expected[i]
        );
    }
}

pub fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub fn le128(b: &[u8], at: usize) -> u128 {
    u128::from_le_bytes(b[at..at + 16].try_into().expect("16 bytes"))
}

/// An I/O command with an LBA range (Read, Write, Write Zeroes).
pub fn rw(opcode: u8, nsid: u32, slba: u64, blocks: u32, prp1: u64, prp2: u64) -> Command {
    Command {
        opcode,
        nsid,
        prp1,
        prp2,
        cdw: [slba as u32, (slba >> 32) as u32, blocks - 1, 0, 0, 0],
        ..Command::default()
    }
}

/// Create I/O Completion Queue: `qsize` is the 0-based size field; `iv` enables interrupts.
pub fn create_cq(qid: u16, qsize: u16, prp1: u64, iv: Option<u16>) -> Command {
    let (ien, iv) = match iv {
        Some(v) => (2u32, u32::from(v)),
        None => (0, 0),
    };
    Command {
        opcode: admin::CREATE_IO_CQ,
        prp1,
        cdw: [
            u32::from(qid) | (u32::from(qsize) << 16),
            1 | ien | (iv << 16),
            0,
            0,
            0,
            0,
        ],
        ..Command::default()
    }
}

/// Create I/O Submission Queue on completion queue `cqid`.
pub fn create_sq(qid: u16, qsize: u16, prp1: u64, cqid: u16) -> Command {
    Command {
        opcode: admin::CREATE_IO_SQ,
        prp1,
        cdw: [
            u32::from(qid) | (u32::from(qsize) << 16),
            1 | (u32::from(cqid) << 16),
            0,
            0,
            0,
            0,
        ],
        ..Command::default()
    }
}

pub fn delete(opcode: u8, qid: u16) -> Command {
    Command {
        opcode,
        cdw: [u32::from(qid), 0, 0, 0, 0, 0],
        ..Command::default()
    }
}

pub fn features(opcode: u8, fid: u8, value: u32) -> Command {
    Command {
        opcode,
        cdw: [u32::from(fid), value, 0, 0, 0, 0],
        ..Command::default()
    }
}

pub fn get_log(lid: u8, len: u32, prp1: u64) -> Command {
    let numd = len / 4 - 1;
    Command {
        opcode: admin::GET_LOG_PAGE,
        nsid: 0xffff_ffff,
        prp1,
        cdw: [
            u32::from(lid) | ((numd & 0xffff) << 16),
            numd >> 16,
            0,
            0,
            0,
            0,
        ],
        ..Command::default()
    }
}

pub fn identify(cns: u8, nsid: u32, prp1: u64) -> Command {
    Command {
        opcode: admin::IDENTIFY,
        nsid,
        prp1,
        cdw: [u32::from(cns), 0, 0, 0, 0, 0],
        ..Command::default()
    }
}

impl Ctx {
    /// Sends an admin command through the driver's admin queue; any status.
    pub async fn admin(&self, cmd: Command) -> Completion {
        self.dev
            .admin_raw(cmd)
            .await
            .expect("admin command delivered")
    }

    /// Sends an I/O command on the driver's first I/O queue (qid 1); any status.
    pub async fn io(&self, cmd: Command) -> Completion {
        self.dev
            .io_raw(0, cmd)
            .await
            .expect("I/O command delivered")
    }

    /// Zeroed host memory mapped for the device (page aligned).
    pub fn dma(&self, len: u64) -> DmaBuffer {
        self.dev
            .handle()
            .dma_alloc_coherent(len)
            .expect("dma_alloc_coherent")
    }

    pub async fn fill(&self, buf: &DmaBuffer, offset: u64, data: &[u8]) {
        self.cpu
            .write(BusAddr(buf.cpu.get() + offset), data)
            .await
            .expect("CPU write to host memory");
    }

    pub async fn fetch(&self, buf: &DmaBuffer, offset: u64, len: usize) -> Vec<u8> {
        self.cpu
            .read_owned(BusAddr(buf.cpu.get() + offset), len)
            .await
            .expect("CPU read of host memory")
    }

    pub async fn reg32(&self, offset: u64) -> u32 {
        self.bar.read32(offset).await.expect("BAR0 read32")
    }

    pub async fn reg64(&self, offset: u64) -> u64 {
        self.bar.read64(offset).await.expect("BAR0 read64")
    }

    /// Deletes the driver's I/O queue pair `qid` so a test can create its own there.
    pub async fn free_pair(&self, qid: u16) {
        let c = self.admin(delete(admin::DELETE_IO_SQ, qid)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete SQ {qid}");
        let c = self.admin(delete(admin::DELETE_IO_CQ, qid)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete CQ {qid}");
    }

    /// Polls CSTS.RDY until it equals `ready`; returns how long that took.
    pub async fn wait_ready(&self, ready: bool) -> SimDuration {
        let start = self.cpu.now();
        for _ in 0..100_000 {
            if (self.reg32(reg::CSTS).await & csts::RDY != 0) == ready {
                return self.cpu.now().since(start);
            }
            self.cpu.sleep(SimDuration::from_us(1)).await;
        }
        panic!("CSTS.RDY never became {ready}");
    }
}

/// Runs futures concurrently on the current task; outputs in input order.
pub async fn join_all<'a, T>(futs: Vec<Pin<Box<dyn Future<Output = T> + 'a>>>) -> Vec<T> {
    let mut futs: Vec<_> = futs.into_iter().map(Some).collect();
    let mut out: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for (slot, f) in out.iter_mut().zip(futs.iter_mut()) {
            if let Some(fut) = f {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *slot = Some(v);
                        *f = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

/// Where a hand-built submission queue lives.
pub enum SqMemory {
    Host(DmaBuffer),
    /// BAR2 (controller memory buffer) at this offset.
    Cmb(Mmio, u64),
}

/// A submission queue the test writes and rings itself.
pub struct RawSq {
    pub qid: u16,
    pub entries: u16,
    pub memory: SqMemory,
    pub tail: Cell<u16>,
}

impl RawSq {
    pub fn host(ctx: &Ctx, qid: u16, entries: u16) -> RawSq {
        RawSq {
            qid,
            entries,
            memory: SqMemory::Host(ctx.dma(u64::from(entries) * SQE_SIZE as u64)),
            tail: Cell::new(0),
        }
    }

    /// The address the controller fetches from.
    pub fn bus(&self) -> u64 {
        match &self.memory {
            SqMemory::Host(b) => b.bus.get(),
            SqMemory::Cmb(m, off) => m.window().base.get() + off,
        }
    }

    /// Writes an entry at the tail without ringing the doorbell; returns its slot.
    pub async fn push_bytes(&self, ctx: &Ctx, entry: [u8; SQE_SIZE]) -> u16 {
        let slot = self.tail.get();
        let at = u64::from(slot) * SQE_SIZE as u64;
        match &self.memory {
            SqMemory::Host(b) => ctx.fill(b, at, &entry).await,
            SqMemory::Cmb(m, off) => m.write(off + at, &entry).await.expect("CMB store"),
        }
        self.tail.set((slot + 1) % self.entries);
        slot
    }

    pub async fn push(&self, ctx: &Ctx, cmd: Command) -> u16 {
        self.push_bytes(ctx, cmd.to_bytes()).await
    }

    pub async fn ring(&self, ctx: &Ctx) {
        ctx.bar
            .write32(
                spec::doorbell_offset(self.qid, false, 0),
                u32::from(self.tail.get()),
            )
            .await
            .expect("SQ tail doorbell");
    }
}

/// A completion queue the test polls itself.
pub struct RawCq {
    pub qid: u16,
    pub entries: u16,
    pub buf: DmaBuffer,
    pub head: Cell<u16>,
    pub phase: Cell<bool>,
}

impl RawCq {
    pub fn new(ctx: &Ctx, qid: u16, entries: u16) -> RawCq {
        RawCq {
            qid,
            entries,
            buf: ctx.dma(u64::from(entries) * CQE_SIZE as u64),
            head: Cell::new(0),
            phase: Cell::new(true),
        }
    }

    /// Waits for the next entry (by its phase tag), consumes it and rings the head doorbell.
    pub async fn next(&self, ctx: &Ctx) -> Completion {
        let head = self.head.get();
        let at = u64::from(head) * CQE_SIZE as u64;
        for _ in 0..100_000 {
            let e = Completion::from_bytes(&ctx.fetch(&self.buf, at, CQE_SIZE).await);
            if e.phase == self.phase.get() {
                let next = (head + 1) % self.entries;
                self.head.set(next);
                if next == 0 {
                    self.phase.set(!self.phase.get());
                }
                ctx.bar
                    .write32(spec::doorbell_offset(self.qid, true, 0), u32::from(next))
                    .await
                    .expect("CQ head doorbell");
                return e;
            }
            ctx.cpu.sleep(SimDuration::from_us(1)).await;
        }
        panic!("CQ {}: no completion at slot {head}", self.qid);
    }
}

/// Creates CQ `qid` and SQ `qid` on it (host memory) through the driver's admin queue.
pub async fn raw_pair(ctx: &Ctx, qid: u16, entries: u16) -> (RawSq, RawCq) {
    let cq = RawCq::new(ctx, qid, entries);
    let c = ctx
        .admin(create_cq(qid, entries - 1, cq.buf.bus.get(), None))
        .await;
    assert_eq!(c.status, Status::SUCCESS, "create CQ {qid}");
    let sq = RawSq::host(ctx, qid, entries);
    let c = ctx.admin(create_sq(qid, entries - 1, sq.bus(), qid)).await;
    assert_eq!(c.status, Status::SUCCESS, "create SQ {qid}");
    (sq, cq)
}
