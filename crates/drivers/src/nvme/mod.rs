//! The native NVMe driver: resets and enables the controller, identifies it and its
//! namespaces, creates I/O queue pairs (one per CPU, up to what the controller grants), and
//! runs a small block layer over them — tags, queue depth, interrupt-driven or polled
//! completions.
//!
//! It uses only the host OS model's device handle (configuration space, BAR0, the DMA API,
//! MSI-X), so it runs unchanged on a local controller and on one lent by another host.

mod error;
mod probe;
mod queue;

pub use error::{BadRequest, NvmeError};
pub use queue::QueuePair;

use smartio_devices::nvme::prp;
use smartio_devices::nvme::spec::admin::{self, AdminCommand, DeleteQueue, GetLogPage, Identify};
use smartio_devices::nvme::spec::io::{BlockRange, DsmRange, IoCommand};
use smartio_devices::nvme::spec::{self, csts, id_ns, reg, Command, Completion};
use smartio_host::{DeviceHandle, DmaBuffer, DmaDirection, Driver, PciId};
use smartio_platform::{AccessError, BusAddr, Clock, PhysAddr, Port, SimDuration, PAGE_SIZE};
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;
use thiserror::Error;

/// How the driver learns that commands completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionMode {
    /// MSI-X per completion queue; a handler reaps the queue.
    Interrupt,
    /// The submitting CPU polls its completion queue.
    Poll,
}

impl CompletionMode {
    /// The name `FromStr` accepts: `interrupt` or `poll`.
    pub fn name(self) -> &'static str {
        match self {
            CompletionMode::Interrupt => "interrupt",
            CompletionMode::Poll => "poll",
        }
    }
}

/// A completion mode name the driver does not know.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown completion mode {0:?} (interrupt, poll)")]
pub struct UnknownCompletionMode(pub String);

impl std::str::FromStr for CompletionMode {
    type Err = UnknownCompletionMode;
    fn from_str(s: &str) -> Result<Self, UnknownCompletionMode> {
        match s {
            "interrupt" | "irq" => Ok(CompletionMode::Interrupt),
            "poll" | "polled" => Ok(CompletionMode::Poll),
            _ => Err(UnknownCompletionMode(s.to_string())),
        }
    }
}

/// Driver settings (module parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvmeDriverConfig {
    /// Interrupts or polling.
    pub mode: CompletionMode,
    /// I/O queue pairs wanted (one per CPU); the controller may grant fewer.
    pub io_queues: u16,
    /// Entries per I/O queue (the queue depth is one less).
    pub queue_entries: u16,
    /// With interrupts: use the function's legacy INTx (one interrupt for every queue)
    /// instead of MSI-X.
    pub intx: bool,
}

impl Default for NvmeDriverConfig {
    fn default() -> Self {
        Self {
            mode: CompletionMode::Interrupt,
            io_queues: 8,
            queue_entries: 256,
            intx: false,
        }
    }
}

/// What Identify Controller said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerInfo {
    /// Vendor id.
    pub vendor: u16,
    /// Serial number.
    pub serial: String,
    /// Model number.
    pub model: String,
    /// Firmware revision.
    pub firmware: String,
    /// Largest transfer in bytes.
    pub max_transfer: u64,
    /// Number of namespaces.
    pub namespaces: u32,
    /// Version register.
    pub version: u32,
    /// Queue pairs the controller granted (I/O only).
    pub io_queues: u16,
}

/// An active namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceInfo {
    /// Namespace id.
    pub nsid: u32,
    /// Size in logical blocks.
    pub blocks: u64,
    /// Bytes per logical block.
    pub lba_size: u32,
}

impl NamespaceInfo {
    /// The namespace `nsid` as its Identify Namespace page describes it (size, and the LBA
    /// format in use).
    pub fn from_identify(nsid: u32, page: &[u8]) -> NamespaceInfo {
        let format = (page[id_ns::FLBAS] & 0xf) as usize;
        let lbaf = le32(page, id_ns::LBAF0 + 4 * format);
        NamespaceInfo {
            nsid,
            blocks: page
                .get(id_ns::NSZE..id_ns::NSZE + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes),
            lba_size: 1 << ((lbaf >> 16) & 0xff),
        }
    }
}

/// A block request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockOp {
    /// Read into the buffer.
    Read,
    /// Write from the buffer.
    Write,
    /// Flush the namespace.
    Flush,
    /// Zero the blocks (no buffer).
    WriteZeroes,
    /// Deallocate the blocks (a discard or trim: Dataset Management with the Deallocate
    /// attribute, its one range written by the driver to the tag's list page; no buffer).
    /// Up to `u32::MAX` blocks at once; afterwards they read as zeroes.
    Deallocate,
}

impl BlockOp {
    /// The NVMe command for this request on `range` (Flush and Deallocate name only its
    /// namespace: a deallocation's range travels in its list, see [`BlockOp::Deallocate`]).
    pub fn command(self, range: BlockRange) -> IoCommand {
        match self {
            BlockOp::Read => IoCommand::Read(range),
            BlockOp::Write => IoCommand::Write(range),
            BlockOp::Flush => IoCommand::Flush { nsid: range.nsid },
            BlockOp::WriteZeroes => IoCommand::WriteZeroes(range),
            BlockOp::Deallocate => IoCommand::DatasetManagement {
                nsid: range.nsid,
                ranges: 1,
                deallocate: true,
            },
        }
    }

    /// Whether the request moves data through a buffer.
    pub fn moves_data(self) -> bool {
        matches!(self, BlockOp::Read | BlockOp::Write)
    }

    /// The most blocks one request of this kind names: Write Zeroes' 16-bit count, a
    /// deallocation range's 32-bit one (reads and writes are bounded by MDTS as well).
    pub fn max_blocks(self) -> u32 {
        match self {
            BlockOp::Deallocate => u32::MAX,
            _ => 1 << 16,
        }
    }
}

/// The driver, for registration with a host.
#[derive(Debug, Clone, Copy, Default)]
pub struct NvmeDriver {
    /// Settings used for every device it binds.
    pub config: NvmeDriverConfig,
}

impl Driver for NvmeDriver {
    fn name(&self) -> &str {
        "nvme"
    }

    fn matches(&self, id: &PciId) -> bool {
        id.class == spec::CLASS_CODE
    }

    fn probe(
        &self,
        device: DeviceHandle,
    ) -> smartio_host::BoxFuture<Result<Rc<dyn Any>, smartio_host::ProbeError>> {
        let config = self.config;
        Box::pin(async move {
            let dev = NvmeDevice::probe(device, config).await?;
            Ok(Rc::new(dev) as Rc<dyn Any>)
        })
    }

    fn remove(&self, state: Rc<dyn Any>) -> smartio_host::BoxFuture<()> {
        Box::pin(async move {
            if let Ok(dev) = state.downcast::<NvmeDevice>() {
                let _ = dev.shutdown().await;
            }
        })
    }
}

const ADMIN_ENTRIES: u16 = 32;

/// A bound NVMe controller.
#[derive(Debug)]
pub struct NvmeDevice {
    handle: DeviceHandle,
    bar: smartio_host::Mmio,
    mode: CompletionMode,
    info: ControllerInfo,
    namespaces: Vec<NamespaceInfo>,
    admin: Rc<QueuePair>,
    io: Vec<Rc<QueuePair>>,
    timeout_ms: u64,
}

impl NvmeDevice {
    fn access(&self) -> impl Fn(AccessError) -> NvmeError + '_ {
        |source| NvmeError::Access {
            device: self.handle.name().to_string(),
            source,
        }
    }

    /// The device handle.
    pub fn handle(&self) -> &DeviceHandle {
        &self.handle
    }

    /// What Identify Controller reported.
    pub fn info(&self) -> &ControllerInfo {
        &self.info
    }

    /// Active namespaces.
    pub fn namespaces(&self) -> &[NamespaceInfo] {
        &self.namespaces
    }

    /// One namespace.
    pub fn namespace(&self, nsid: u32) -> Result<NamespaceInfo, NvmeError> {
        self.namespaces
            .iter()
            .find(|n| n.nsid == nsid)
            .copied()
            .ok_or_else(|| NvmeError::NoNamespace {
                device: self.handle.name().to_string(),
                nsid,
                known: self.namespaces.iter().map(|n| n.nsid).collect(),
            })
    }

    /// Completion mode.
    pub fn mode(&self) -> CompletionMode {
        self.mode
    }

    /// Number of I/O queue pairs.
    pub fn io_queue_count(&self) -> usize {
        self.io.len()
    }

    async fn wait(&self, q: &QueuePair, tag: u16) -> Result<Completion, NvmeError> {
        match self.mode {
            CompletionMode::Interrupt => {
                let c = q.wait_interrupt(tag).await;
                // The handler completed it; the thread that sleeps on it runs again.
                let wakeup = self.handle.cpu().machine().cpu_timing().wakeup;
                self.handle
                    .cpu()
                    .spend("scheduler: wake the waiting thread", wakeup)
                    .await;
                Ok(c)
            }
            CompletionMode::Poll => q.wait_polled(tag).await.map_err(self.access()),
        }
    }

    /// Sends an admin command and waits for it; an error status is an error. Data buffers
    /// are the caller's (PRP1/PRP2 already set).
    pub async fn admin_command(&self, cmd: Command) -> Result<Completion, NvmeError> {
        let c = self.admin_raw(cmd).await?;
        if !c.status.is_success() {
            return Err(NvmeError::Command {
                device: self.handle.name().to_string(),
                command: admin_name(cmd.opcode),
                status: c.status,
            });
        }
        Ok(c)
    }

    /// Sends an admin command and returns its completion whatever the status.
    pub async fn admin_raw(&self, cmd: Command) -> Result<Completion, NvmeError> {
        let tag = self.admin.acquire().await;
        let r = async {
            self.admin.submit(tag, cmd).await.map_err(self.access())?;
            self.wait(&self.admin, tag).await
        }
        .await;
        self.admin.release(tag);
        r
    }

    /// Sends `cmd` as-is on the I/O queue of `cpu` (its `cid` is replaced by a tag) and
    /// returns the completion whatever the status — the passthrough path (`nvme io-passthru`)
    /// for tools and conformance tests. PRPs are the caller's.
    pub async fn io_raw(&self, cpu: usize, cmd: Command) -> Result<Completion, NvmeError> {
        let q = &self.io[cpu % self.io.len()];
        let tag = q.acquire().await;
        let r = async {
            q.submit(tag, cmd).await.map_err(self.access())?;
            self.wait(q, tag).await
        }
        .await;
        q.release(tag);
        r
    }

    /// Identify with `cns` for `nsid`; returns the 4 KiB data structure.
    pub async fn identify(&self, cns: u8, nsid: u32) -> Result<Vec<u8>, NvmeError> {
        let cmd = AdminCommand::Identify(Identify { nsid, cns }).into();
        self.admin_read(cmd, PAGE_SIZE).await
    }

    /// Runs an admin command that returns `len` bytes (at most two pages) into a coherent
    /// buffer, and returns them.
    async fn admin_read(&self, cmd: Command, len: u64) -> Result<Vec<u8>, NvmeError> {
        let buf = self.handle.dma_alloc_coherent(len)?;
        // A page-aligned buffer of at most two pages: PRP1 and PRP2, no list.
        let r = match prp::build(buf.bus.get(), len, &[]) {
            Ok(p) => self.admin_command(cmd.with_prps(p.prp1, p.prp2)).await,
            Err(e) => Err(NvmeError::BadRequest {
                device: self.handle.name().to_string(),
                why: e.into(),
            }),
        };
        let data = self
            .handle
            .cpu()
            .read_owned(BusAddr(buf.cpu.get()), len as usize)
            .await
            .map_err(self.access());
        self.handle.dma_free_coherent(buf)?;
        r?;
        data
    }

    /// Reads log page `lid` (`len` bytes, a multiple of 4, at most two pages: PRP1 and PRP2
    /// without a list).
    pub async fn log_page(&self, lid: u8, len: u32) -> Result<Vec<u8>, NvmeError> {
        if len == 0 || !len.is_multiple_of(4) || u64::from(len) > 2 * PAGE_SIZE {
            return Err(NvmeError::BadRequest {
                device: self.handle.name().to_string(),
                why: BadRequest::LogPageLength {
                    len,
                    max: 2 * PAGE_SIZE,
                },
            });
        }
        let cmd = AdminCommand::GetLogPage(GetLogPage {
            nsid: 0xffff_ffff,
            lid,
            rae: false,
            numd: len / 4 - 1,
            offset: 0,
        })
        .into();
        self.admin_read(cmd, u64::from(len)).await
    }

    /// Performs one block request on the queue of `cpu` and waits for it. `buffer` is host
    /// memory of `blocks × lba_size` bytes (unused for Flush, Write Zeroes and Deallocate); the driver
    /// maps it for the device for the duration of the request.
    pub async fn submit(
        &self,
        cpu: usize,
        op: BlockOp,
        nsid: u32,
        lba: u64,
        blocks: u32,
        buffer: PhysAddr,
    ) -> Result<(), NvmeError> {
        let costs = self.handle.costs();
        self.handle
            .cpu()
            .spend("block layer: submit", costs.block_submit)
            .await;
        let ns = self.namespace(nsid)?;
        let len = u64::from(blocks) * u64::from(ns.lba_size);
        let bad = |why: BadRequest| NvmeError::BadRequest {
            device: self.handle.name().to_string(),
            why,
        };
        let data = op.moves_data();
        if !matches!(op, BlockOp::Flush) && (blocks == 0 || blocks > op.max_blocks()) {
            return Err(bad(BadRequest::Blocks {
                op,
                blocks,
                max: op.max_blocks(),
            }));
        }
        if data && len > self.info.max_transfer {
            return Err(bad(BadRequest::Transfer {
                len,
                max: self.info.max_transfer,
            }));
        }
        let q = &self.io[cpu % self.io.len()];
        let tag = q.acquire().await;
        let r = self
            .request(q, tag, op, nsid, lba, blocks, buffer, len)
            .await;
        q.release(tag);
        self.handle
            .cpu()
            .spend("block layer: complete", costs.block_complete)
            .await;
        r
    }

    #[allow(clippy::too_many_arguments)]
    async fn request(
        &self,
        q: &QueuePair,
        tag: u16,
        op: BlockOp,
        nsid: u32,
        lba: u64,
        blocks: u32,
        buffer: PhysAddr,
        len: u64,
    ) -> Result<(), NvmeError> {
        let dir = match op {
            BlockOp::Read => Some(DmaDirection::FromDevice),
            BlockOp::Write => Some(DmaDirection::ToDevice),
            BlockOp::Flush | BlockOp::WriteZeroes | BlockOp::Deallocate => None,
        };
        let mut cmd = Command::from(op.command(BlockRange::new(nsid, lba, blocks)));
        if op == BlockOp::Deallocate {
            let list = self.prp_list(q, tag)?;
            self.handle
                .cpu()
                .write(
                    BusAddr(list.cpu.get()),
                    &DsmRange { slba: lba, blocks }.encode(),
                )
                .await
                .map_err(self.access())?;
            cmd = cmd.with_prps(list.bus.get(), 0);
        }
        let mapped = match dir {
            Some(dir) => Some(self.handle.dma_map_timed(buffer, len, dir).await?),
            None => None,
        };
        if let Some(bus) = mapped {
            let (prp1, prp2) = self.prps(q, tag, bus, len).await?;
            cmd = cmd.with_prps(prp1, prp2);
        }
        let r = async {
            q.submit(tag, cmd).await.map_err(self.access())?;
            self.wait(q, tag).await
        }
        .await;
        if let Some(bus) = mapped {
            self.handle.dma_unmap_timed(bus).await?;
        }
        let c = r?;
        if !c.status.is_success() {
            return Err(NvmeError::Command {
                device: self.handle.name().to_string(),
                command: format!("{op:?} of {blocks} blocks at LBA {lba} (namespace {nsid})"),
                status: c.status,
            });
        }
        Ok(())
    }

    /// PRP1/PRP2 for `len` bytes at device address `bus` (contiguous), building a PRP list in
    /// the tag's list page when more than two pages are touched.
    async fn prps(
        &self,
        q: &QueuePair,
        tag: u16,
        bus: BusAddr,
        len: u64,
    ) -> Result<(u64, u64), NvmeError> {
        let bad = |why: BadRequest| NvmeError::BadRequest {
            device: self.handle.name().to_string(),
            why,
        };
        let start = bus.get();
        let list = match prp::list_pages_needed(start, len) {
            0 => None,
            1 => Some(self.prp_list(q, tag)?),
            _ => return Err(bad(BadRequest::ChainedPrpList { len })),
        };
        let lists = list.as_ref().map(|l| l.bus.get());
        let prps = prp::build(start, len, lists.as_slice()).map_err(|e| bad(e.into()))?;
        if let (Some(list), Some(entries)) = (list, prps.lists.first()) {
            self.handle
                .cpu()
                .write(BusAddr(list.cpu.get()), &entries.bytes())
                .await
                .map_err(self.access())?;
        }
        Ok((prps.prp1, prps.prp2))
    }

    /// The PRP list page of `tag` on `q`, allocated on first use.
    fn prp_list(&self, q: &QueuePair, tag: u16) -> Result<DmaBuffer, NvmeError> {
        let existing = q.prp_lists.borrow()[tag as usize];
        match existing {
            Some(l) => Ok(l),
            None => {
                let l = self.handle.dma_alloc_coherent(PAGE_SIZE)?;
                q.prp_lists.borrow_mut()[tag as usize] = Some(l);
                Ok(l)
            }
        }
    }

    /// Deletes the I/O queues and disables the controller (driver unbind).
    pub async fn shutdown(&self) -> Result<(), NvmeError> {
        for q in &self.io {
            let queue = DeleteQueue { qid: q.qid };
            self.admin_command(AdminCommand::DeleteIoSq(queue).into())
                .await?;
            self.admin_command(AdminCommand::DeleteIoCq(queue).into())
                .await?;
        }
        self.bar.write32(reg::CC, 0).await.map_err(self.access())?;
        wait_ready(&self.handle, &self.bar, false, self.timeout_ms).await?;
        for q in self.io.iter().chain(std::iter::once(&self.admin)) {
            self.handle.dma_free_coherent(q.sq)?;
            self.handle.dma_free_coherent(q.cq)?;
            for l in q.prp_lists.borrow().iter().flatten() {
                self.handle.dma_free_coherent(*l)?;
            }
        }
        if self.mode == CompletionMode::Interrupt {
            self.handle.disable_msix().await?;
        }
        self.handle.disable().await.map_err(self.access())
    }
}

/// The INTx handler: one interrupt for every queue, so each one reaps them all.
fn spawn_intx_handler(
    handle: &DeviceHandle,
    irq: smartio_host::IrqVector,
    queues: Rc<RefCell<Vec<Rc<QueuePair>>>>,
) {
    handle.spawn(async move {
        loop {
            irq.wait().await;
            let all: Vec<_> = queues.borrow().clone();
            for q in all {
                if q.reap().await.is_err() {
                    return;
                }
            }
        }
    });
}

fn spawn_handler(handle: &DeviceHandle, q: Rc<QueuePair>) {
    let Some(irq) = q.irq.clone() else { return };
    handle.spawn(async move {
        loop {
            irq.wait().await;
            if q.reap().await.is_err() {
                return;
            }
        }
    });
}

async fn wait_ready(
    handle: &DeviceHandle,
    bar: &smartio_host::Mmio,
    ready: bool,
    timeout_ms: u64,
) -> Result<(), NvmeError> {
    let name = handle.name().to_string();
    let access = |source| NvmeError::Access {
        device: name.clone(),
        source,
    };
    let step = SimDuration::from_us(10);
    let start = handle.cpu().now();
    loop {
        let s = bar.read32(reg::CSTS).await.map_err(access)?;
        if ready && s & csts::CFS != 0 {
            return Err(NvmeError::Fatal { device: name });
        }
        if (s & csts::RDY != 0) == ready {
            return Ok(());
        }
        if handle.cpu().now().since(start) > SimDuration::from_us(timeout_ms * 1000) {
            return Err(NvmeError::Timeout {
                device: name,
                what: if ready { "become ready" } else { "reset" },
                timeout_ms,
            });
        }
        handle.cpu().sleep(step).await;
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn admin_name(opcode: u8) -> String {
    match admin::name(opcode) {
        Some(name) => name.to_string(),
        None => format!("admin opcode {opcode:#04x}"),
    }
}

/// The namespace ids an Identify Active Namespace ID list names, in order (the list ends at
/// its first 0).
pub(crate) fn active_nsids(list: &[u8]) -> impl Iterator<Item = u32> + '_ {
    list.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .take_while(|&nsid| nsid != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_modes_parse_by_name_and_an_unknown_one_is_refused_with_the_names() {
        assert_eq!("poll".parse(), Ok(CompletionMode::Poll));
        assert_eq!("irq".parse(), Ok(CompletionMode::Interrupt));
        let e = "psychic"
            .parse::<CompletionMode>()
            .expect_err("no such mode");
        assert_eq!(e, UnknownCompletionMode("psychic".into()));
        assert_eq!(
            e.to_string(),
            "unknown completion mode \"psychic\" (interrupt, poll)"
        );
    }
}
