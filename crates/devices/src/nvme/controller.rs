//! The NVMe controller: BAR0 registers and doorbells, the MSI-X table, controller
//! enable/reset, submission-queue arbitration and fetching, and posting completions.
//!
//! The controller runs as a task of its own (fetch and arbitration) and one task per command
//! it executes, so commands from many queues are in flight at once and complete in the order
//! the media finishes them.
//!
//! Invariants:
//! - A submission queue's head only advances when its entries have been fetched; an entry
//!   between head and tail is owned by the host until then.
//! - A completion is posted only into a free slot (`tail + 1 != head`); a poster waits for
//!   the host to move the head otherwise.
//! - Everything a command does after a reset is discarded: tasks compare the controller
//!   generation they started in with the current one.

use super::buffers::Buffers;
use super::media::{Media, MediaProfile};
use super::namespace::NamespaceStore;
use super::prp::Segment;
use super::queues::SubmissionQueues;
use super::spec::{
    self, aqa, async_event, cap, cc, cmbsz, csts, log, reg, vs, Command, Completion, Status,
    CQE_SIZE, SQE_SIZE,
};
use crate::config::{ConfigSpace, MsixLayout};
use crate::msix::{self, MsixTable};
use smartio_platform::activity;
use smartio_platform::{
    task_of, AccessError, BarHandler, BusAddr, Clock, CompleterError, Notify, Port, SimDuration,
    SparseMemory, Spawner, Stream, PAGE_SIZE,
};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// BAR0 size: registers, doorbells, MSI-X table (0x2000) and PBA (0x3000).
pub const BAR0_SIZE: u64 = 16 << 10;
/// BAR holding the controller memory buffer, when there is one.
pub const CMB_BAR: u8 = 2;
const MSIX_TABLE: u64 = 0x2000;
const MSIX_PBA: u64 = 0x3000;
/// Maximum queue entries supported (0-based in CAP.MQES).
pub const MAX_QUEUE_ENTRIES: u32 = 4096;
/// Maximum data transfer size exponent (of 4 KiB pages): 2^5 × 4 KiB = 128 KiB.
pub const MDTS: u8 = 5;
/// Error log entries kept.
pub const ERROR_LOG_ENTRIES: usize = 64;
/// Asynchronous Event Request commands outstanding at once (Identify AERL + 1).
pub const MAX_AERS: u16 = 4;

/// How one controller is built.
#[derive(Debug, Clone)]
pub struct NvmeConfig {
    /// Media timing.
    pub profile: MediaProfile,
    /// Queue pairs including the admin pair (2..=256).
    pub queue_pairs: u16,
    /// Number of namespaces (ids 1..=n).
    pub namespaces: u32,
    /// Bytes per namespace.
    pub capacity: u64,
    /// Logical block size (512 or 4096).
    pub lba_size: u32,
    /// Controller memory buffer size in BAR2 (0 = none).
    pub cmb_size: u64,
    /// CC.EN to CSTS.RDY delay.
    pub ready_delay: SimDuration,
    /// Serial number reported by Identify.
    pub serial: String,
    /// PCI vendor id reported by Identify.
    pub vendor_id: u16,
    /// The stream the media's latencies are drawn from (the run's seed and this
    /// controller's own index: see [`smartio_platform::variation`]).
    pub media_stream: Stream,
}

/// A fetch of submission queue entries: `count` from slot `head` of queue `qid`, in the
/// controller's `generation` (a reset since makes it stale).
#[derive(Debug, Clone, Copy)]
struct Fetched {
    qid: u16,
    head: u16,
    count: u16,
    generation: u64,
}

#[derive(Debug, Clone)]
pub(super) struct SubQueue {
    pub base: u64,
    pub entries: u16,
    pub head: u16,
    pub tail: u16,
    pub cqid: u16,
    pub fetching: bool,
    /// Command ids an Abort asked to cancel before they are fetched.
    pub aborted: Vec<u16>,
}

#[derive(Debug, Clone)]
pub(super) struct CompQueue {
    pub base: u64,
    pub entries: u16,
    pub head: u16,
    pub tail: u16,
    pub phase: bool,
    pub interrupts: bool,
    pub vector: u16,
}

/// One error-log entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct ErrorEntry {
    pub count: u64,
    pub sqid: u16,
    pub cid: u16,
    pub status: Status,
    pub lba: u64,
    pub nsid: u32,
}

/// SMART / health counters.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Health {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_commands: u64,
    pub write_commands: u64,
    pub media_errors: u64,
}

#[derive(Debug)]
pub(super) struct State {
    pub cc: u32,
    pub csts: u32,
    pub aqa: u32,
    pub asq: u64,
    pub acq: u64,
    pub intms: u32,
    pub enabled: bool,
    pub generation: u64,
    pub sqs: SubmissionQueues,
    pub cqs: Vec<Option<CompQueue>>,
    /// Granted I/O submission and completion queues (Set Features, Number of Queues).
    pub granted: (u16, u16),
    pub io_queue_created: bool,
    pub burst: u16,
    pub coalescing: u32,
    pub rr_next: usize,
    pub errors: VecDeque<ErrorEntry>,
    pub error_count: u64,
    pub health: Health,
    /// Commands fetched from each submission queue whose completion is not yet posted.
    pub inflight: Vec<u32>,
    /// Submission queues being deleted (by id, with their completion queue): a Delete SQ
    /// removes the queue at once but completes only once its commands have; until then its
    /// id cannot be reused and its completion queue cannot be deleted.
    pub deleting: Vec<(u16, u16)>,
    /// Asynchronous events not yet reported (completion dword 0 of each).
    pub events: VecDeque<u32>,
    /// Error events are masked from when one is reported until the host reads the Error
    /// Information log page (NVMe 1.4 §5.2).
    pub errors_masked: bool,
    /// Asynchronous Event Request commands outstanding.
    pub aers: u16,
}

/// An emulated NVMe controller.
pub struct NvmeController {
    pub(super) config: NvmeConfig,
    pub(super) pci: Rc<ConfigSpace>,
    pub(super) msix: MsixTable,
    pub(super) media: Media,
    pub(super) store: NamespaceStore,
    cmb: RefCell<SparseMemory>,
    /// Buffers for media data and submission queue entries, reused.
    pub(super) buffers: Buffers,
    /// Lists of a command's PRP segments, reused.
    pub(super) segment_lists: Buffers<Segment>,
    pub(super) state: RefCell<State>,
    wake: Notify,
    cq_space: RefCell<Vec<Waker>>,
    /// Waiting for a submission queue's in-flight commands to finish (Delete I/O SQ).
    drained: RefCell<Vec<Waker>>,
    /// Asynchronous Event Request commands waiting for an event.
    pub(super) event_waiters: RefCell<Vec<Waker>>,
}

impl std::fmt::Debug for NvmeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmeController")
            .field("profile", &self.config.profile.name)
            .field("queue_pairs", &self.config.queue_pairs)
            .finish()
    }
}

impl NvmeController {
    /// A controller with `config` whose namespaces live in `store`, answering configuration
    /// requests through `pci` (built with [`NvmeController::msix_layout`]).
    pub fn new(config: NvmeConfig, store: NamespaceStore, pci: Rc<ConfigSpace>) -> Self {
        let pairs = config.queue_pairs as usize;
        let io = config.queue_pairs.saturating_sub(1);
        Self {
            msix: MsixTable::new(config.queue_pairs),
            media: Media::new(config.profile.clone(), config.media_stream.clone()),
            store,
            cmb: RefCell::new(SparseMemory::new()),
            buffers: Buffers::default(),
            segment_lists: Buffers::default(),
            state: RefCell::new(State {
                cc: 0,
                csts: 0,
                aqa: 0,
                asq: 0,
                acq: 0,
                intms: 0,
                enabled: false,
                generation: 0,
                sqs: SubmissionQueues::new(pairs),
                cqs: vec![None; pairs],
                granted: (io, io),
                io_queue_created: false,
                burst: 8,
                coalescing: 0,
                rr_next: 0,
                errors: VecDeque::new(),
                error_count: 0,
                health: Health::default(),
                inflight: vec![0; pairs],
                deleting: Vec::new(),
                events: VecDeque::new(),
                errors_masked: false,
                aers: 0,
            }),
            wake: Notify::new(),
            cq_space: RefCell::new(Vec::new()),
            drained: RefCell::new(Vec::new()),
            event_waiters: RefCell::new(Vec::new()),
            config,
            pci,
        }
    }

    /// Where the MSI-X table lives: BAR0, one vector per queue pair.
    pub fn msix_layout(queue_pairs: u16) -> MsixLayout {
        MsixLayout {
            vectors: queue_pairs,
            table_bar: 0,
            table_offset: MSIX_TABLE as u32,
            pba_bar: 0,
            pba_offset: MSIX_PBA as u32,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NvmeConfig {
        &self.config
    }

    /// The namespaces' blocks, for untimed set-up and checks (like `Gpu::poke`): a test or
    /// a workload fills a namespace with a known pattern before the measured part. Nothing
    /// here is seen by the bus or counted in the SMART log.
    pub fn namespaces(&self) -> &NamespaceStore {
        &self.store
    }

    /// The CAP register.
    pub fn cap(&self) -> u64 {
        let to = (self.config.ready_delay.as_ps() / 500_000_000_000 + 1).min(255);
        let mut value =
            u64::from(MAX_QUEUE_ENTRIES - 1) | cap::CQR | to << cap::TO_SHIFT | cap::CSS_NVM;
        if self.config.cmb_size > 0 {
            value |= cap::CMBS;
        }
        value
    }

    fn register(&self, offset: u64) -> Option<u64> {
        let s = self.state.borrow();
        Some(match offset {
            reg::CAP => self.cap(),
            reg::CAP_HI => self.cap() >> 32,
            reg::VS => u64::from(vs::V1_4),
            reg::INTMS | reg::INTMC => u64::from(s.intms),
            reg::CC => u64::from(s.cc),
            reg::CSTS => u64::from(s.csts),
            reg::AQA => u64::from(s.aqa),
            reg::ASQ => s.asq,
            reg::ASQ_HI => s.asq >> 32,
            reg::ACQ => s.acq,
            reg::ACQ_HI => s.acq >> 32,
            reg::CMBLOC if self.config.cmb_size > 0 => u64::from(CMB_BAR),
            reg::CMBSZ if self.config.cmb_size > 0 => {
                // Submission queues only; size in 4 KiB units.
                u64::from(cmbsz::SQS) | ((self.config.cmb_size / PAGE_SIZE) << cmbsz::SZ_SHIFT)
            }
            o if o < reg::DOORBELLS => 0,
            // Reading a doorbell is vendor specific (NVMe 1.4 §3.1.24): this controller
            // answers with the pointer last written, so a queue that does not exist (deleted,
            // or not created yet) reads 0. Shared pages of a BAR (the live engine) rely on it:
            // a deleted queue's doorbells read 0 again, so a new queue's first store is seen.
            o if o < MSIX_TABLE => {
                let index = (o - reg::DOORBELLS) / 4;
                let qid = (index / 2) as usize;
                let pointer = if !s.enabled {
                    None
                } else if index.is_multiple_of(2) {
                    s.sqs.get(qid).map(|q| q.tail)
                } else {
                    s.cqs.get(qid).and_then(Option::as_ref).map(|q| q.head)
                };
                u64::from(pointer.unwrap_or(0))
            }
            _ => return None,
        })
    }

    fn write_register(&self, offset: u64, value: u64, width: usize) -> Result<(), CompleterError> {
        let mut s = self.state.borrow_mut();
        let lo32 = |old: u64| (old & !0xffff_ffff) | (value & 0xffff_ffff);
        let hi32 = |old: u64| (old & 0xffff_ffff) | (value << 32);
        match offset {
            reg::INTMS => s.intms |= value as u32,
            reg::INTMC => s.intms &= !(value as u32),
            reg::CC => {
                let old = s.cc;
                let new = value as u32;
                // While enabled, only EN and SHN may change.
                s.cc = if s.enabled && new & cc::EN != 0 {
                    (old & !cc::SHN_MASK) | (new & cc::SHN_MASK)
                } else {
                    new
                };
                if new & cc::SHN_MASK != 0 {
                    s.csts = (s.csts & !csts::SHST_MASK) | csts::SHST_COMPLETE;
                }
                if new & cc::EN == 0 && !s.enabled {
                    // Not running (never enabled, or the enable failed with CFS): the reset
                    // completes at once.
                    s.csts &= !(csts::RDY | csts::CFS);
                }
                drop(s);
                self.wake.notify();
            }
            reg::AQA => s.aqa = value as u32 & aqa::WRITABLE,
            reg::ASQ if width == 8 => s.asq = value,
            reg::ASQ => s.asq = lo32(s.asq),
            reg::ASQ_HI => s.asq = hi32(s.asq),
            reg::ACQ if width == 8 => s.acq = value,
            reg::ACQ => s.acq = lo32(s.acq),
            reg::ACQ_HI => s.acq = hi32(s.acq),
            o if o >= reg::DOORBELLS => {
                drop(s);
                self.doorbell(o, value as u32);
            }
            _ => return Err(CompleterError::ReadOnly),
        }
        Ok(())
    }

    /// A doorbell write (NVMe 1.4 §3.1.24–25). An invalid one is ignored, logged, and
    /// reported as an asynchronous event of type Error: a doorbell of a queue that does not
    /// exist is "Invalid Doorbell Register"; a submission queue tail beyond the queue, or a
    /// completion queue head that is beyond the queue or frees entries the controller has
    /// not posted, is "Invalid Doorbell Write Value".
    fn doorbell(&self, offset: u64, value: u32) {
        let index = (offset - reg::DOORBELLS) / 4;
        let qid = (index / 2) as usize;
        let mut s = self.state.borrow_mut();
        if !s.enabled {
            return; // no queue exists while the controller is disabled
        }
        let outcome = if index.is_multiple_of(2) {
            match s.sqs.get_mut(qid) {
                Some(q) if value < u32::from(q.entries) => {
                    q.tail = value as u16;
                    s.sqs.note(qid);
                    None
                }
                Some(_) => Some(async_event::INVALID_DOORBELL_VALUE),
                None => Some(async_event::INVALID_DOORBELL_REGISTER),
            }
        } else {
            match s.cqs.get_mut(qid).and_then(Option::as_mut) {
                Some(q) if value < u32::from(q.entries) && q.frees_only_posted(value as u16) => {
                    q.head = value as u16;
                    for w in self.cq_space.borrow_mut().drain(..) {
                        w.wake();
                    }
                    None
                }
                Some(_) => Some(async_event::INVALID_DOORBELL_VALUE),
                None => Some(async_event::INVALID_DOORBELL_REGISTER),
            }
        };
        // A valid completion queue head is only news to commands waiting for room in it
        // (woken above): the arbiter has nothing new to fetch.
        let arbitrate = index.is_multiple_of(2) || outcome.is_some();
        if let Some(info) = outcome {
            s.log_error(qid as u16, 0xffff, Status::INVALID_QUEUE_ID, 0, 0);
            if s.raise_error_event(info) {
                for w in self.event_waiters.borrow_mut().drain(..) {
                    w.wake();
                }
            }
        }
        drop(s);
        if arbitrate {
            self.wake.notify();
        }
    }

    /// The controller's main task: follows CC.EN, sends MSI-X messages software unmasked, and
    /// arbitrates between submission queues. Runs forever.
    pub async fn run<P>(self: Rc<Self>, port: P)
    where
        P: Port + Clock + Spawner + Clone + 'static,
    {
        loop {
            self.wake.notified().await;
            self.follow_enable(&port).await;
            for m in self.msix.take_unmasked_pending() {
                let _ = port.write(m.address, &m.payload()).await;
            }
            self.arbitrate(&port);
        }
    }

    async fn follow_enable<P: Port + Clock>(&self, port: &P) {
        let (want, enabled) = {
            let s = self.state.borrow();
            (s.cc & cc::EN != 0, s.enabled)
        };
        if want == enabled {
            return;
        }
        if want {
            port.sleep(self.config.ready_delay).await;
            let mut s = self.state.borrow_mut();
            if s.cc & cc::EN == 0 {
                return; // CC.EN was cleared while the controller was getting ready
            }
            let acqs = aqa::cq_entries(s.aqa);
            let asqs = aqa::sq_entries(s.aqa);
            let bad = cc::css(s.cc) != 0
                || cc::mps(s.cc) != 0
                || acqs < 2
                || asqs < 2
                || s.asq & (PAGE_SIZE - 1) != 0
                || s.acq & (PAGE_SIZE - 1) != 0
                || s.asq
                    .checked_add(u64::from(asqs) * SQE_SIZE as u64)
                    .is_none()
                || s.acq
                    .checked_add(u64::from(acqs) * CQE_SIZE as u64)
                    .is_none();
            if bad {
                s.csts |= csts::CFS;
                return;
            }
            let admin = SubQueue {
                base: s.asq,
                entries: asqs as u16,
                head: 0,
                tail: 0,
                cqid: 0,
                fetching: false,
                aborted: Vec::new(),
            };
            // Slot 0 always exists (a controller has at least the admin queue pair).
            s.sqs.put(0, admin);
            s.cqs[0] = Some(CompQueue {
                base: s.acq,
                entries: acqs as u16,
                head: 0,
                tail: 0,
                phase: true,
                interrupts: true,
                vector: 0,
            });
            s.enabled = true;
            s.csts = (s.csts & !csts::CFS) | csts::RDY;
        } else {
            {
                let mut s = self.state.borrow_mut();
                s.enabled = false;
                s.generation += 1;
                s.sqs.remove_all();
                s.cqs.iter_mut().for_each(|q| *q = None);
                let io = self.config.queue_pairs.saturating_sub(1);
                s.granted = (io, io);
                s.io_queue_created = false;
                s.burst = 8;
                s.inflight.fill(0);
                s.deleting.clear();
                s.events.clear();
                s.errors_masked = false;
                s.aers = 0;
            }
            for w in self.drained.borrow_mut().drain(..) {
                w.wake();
            }
            for w in self.event_waiters.borrow_mut().drain(..) {
                w.wake();
            }
            self.media.reset(port.now());
            port.sleep(self.config.ready_delay).await;
            let mut s = self.state.borrow_mut();
            s.csts &= !(csts::RDY | csts::CFS);
        }
    }

    /// Round-robin over submission queues, starting one fetch of up to a burst of entries
    /// from each queue that has some and no fetch in flight.
    fn arbitrate<P>(self: &Rc<Self>, port: &P)
    where
        P: Port + Clock + Spawner + Clone + 'static,
    {
        if !self.pci.bus_master() {
            return; // a function without bus mastering cannot fetch
        }
        let mut s = self.state.borrow_mut();
        if !s.enabled {
            return;
        }
        let n = s.sqs.slots();
        let start = s.rr_next.min(n);
        let burst = s.burst;
        let generation = s.generation;
        // The noted queues in round-robin order from `rr_next` (those with entries to fetch
        // and no fetch in flight are among them; see `SubmissionQueues`).
        for (from, to) in [(start, n), (0, start)] {
            let mut at = from;
            while let Some(qid) = s.sqs.take_noted(at, to) {
                at = qid + 1;
                let Some(q) = s.sqs.get_mut(qid) else {
                    continue;
                };
                if q.fetching || q.head == q.tail {
                    continue;
                }
                let available = if q.tail > q.head {
                    q.tail - q.head
                } else {
                    q.entries - q.head
                };
                let count = available.min(burst);
                q.fetching = true;
                let (base, head) = (q.base, q.head);
                // Entries being fetched are in flight: a Delete SQ waits for them too.
                s.inflight[qid] += u32::from(count);
                s.rr_next = (qid + 1) % n;
                let me = self.clone();
                let p = port.clone();
                port.spawn_task(task_of(move || async move {
                    me.fetch(p, qid as u16, base, head, count, generation).await;
                }));
            }
        }
    }

    /// Whether `addr..addr+len` lies in this controller's memory buffer; its offset if so.
    pub(super) fn cmb_offset(&self, addr: u64, len: u64) -> Option<u64> {
        if self.config.cmb_size == 0 {
            return None;
        }
        let base = self.pci.bar_base(CMB_BAR)?;
        let end = addr.checked_add(len)?;
        (addr >= base && end <= base.saturating_add(self.config.cmb_size)).then(|| addr - base)
    }

    /// Reads `len` bytes of submission queue entries at `addr` into `out`: from the memory
    /// buffer when they are in it (the controller's own memory, no bus access), else by DMA.
    pub(super) async fn read_sq<P: Port>(
        &self,
        port: &P,
        addr: u64,
        len: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        out.resize(len as usize, 0);
        match self.cmb_offset(addr, len) {
            Some(off) => {
                self.cmb.borrow().read(off, out);
                Ok(())
            }
            None => {
                activity::doing("fetch submission queue entries");
                port.read(BusAddr(addr), out).await
            }
        }
    }

    async fn fetch<P>(
        self: Rc<Self>,
        port: P,
        qid: u16,
        base: u64,
        head: u16,
        count: u16,
        generation: u64,
    ) where
        P: Port + Clock + Spawner + Clone + 'static,
    {
        let addr = base + u64::from(head) * SQE_SIZE as u64;
        let len = u64::from(count) * SQE_SIZE as u64;
        let mut bytes = self.buffers.take();
        let read = self.read_sq(&port, addr, len, &mut bytes).await;
        let fetched = Fetched {
            qid,
            head,
            count,
            generation,
        };
        let more = self.start_fetched(&port, fetched, read.map(|()| &bytes[..]));
        self.buffers.give(bytes);
        if more {
            self.wake.notify();
        }
    }

    /// Decodes the entries a fetch read (`bytes`, or why it could not) and starts a task
    /// per command. Answers whether the queue has entries left to fetch, for the arbiter
    /// to fetch at once (new ones come with a doorbell, which wakes it); `false` when
    /// nothing was started (the queue was deleted or reset meanwhile, or is unreachable).
    fn start_fetched<P>(
        self: &Rc<Self>,
        port: &P,
        fetched: Fetched,
        bytes: Result<&[u8], AccessError>,
    ) -> bool
    where
        P: Port + Clock + Spawner + Clone + 'static,
    {
        let Fetched {
            qid,
            head,
            count,
            generation,
        } = fetched;
        let mut s = self.state.borrow_mut();
        if s.generation != generation {
            return false;
        }
        let unfetched = |s: &mut State| {
            let n = &mut s.inflight[qid as usize];
            *n = n.saturating_sub(u32::from(count));
        };
        let Some(q) = s.sqs.get_mut(qid as usize) else {
            // Deleted meanwhile: the deletion completed these entries as aborted.
            unfetched(&mut s);
            drop(s);
            for w in self.drained.borrow_mut().drain(..) {
                w.wake();
            }
            return false;
        };
        q.fetching = false;
        let Ok(bytes) = bytes else {
            // The queue is unreachable: nothing sensible can continue.
            unfetched(&mut s);
            s.csts |= csts::CFS;
            return false;
        };
        // Each command's task first runs after this fetch is done (spawning runs nothing).
        for (i, raw) in bytes.chunks_exact(SQE_SIZE).enumerate() {
            let mut entry = [0u8; SQE_SIZE];
            entry.copy_from_slice(raw);
            let (cmd, flags) = Command::decode(&entry);
            let sq_head = (head + i as u16 + 1) % q.entries;
            let aborted = match q.aborted.iter().position(|&c| c == cmd.cid) {
                Some(p) => {
                    q.aborted.swap_remove(p);
                    true
                }
                None => false,
            };
            let cqid = q.cqid;
            let me = self.clone();
            let p = port.clone();
            port.spawn_task(task_of(move || async move {
                let (status, result) = if aborted {
                    (Status::ABORT_REQUESTED, 0)
                } else if !flags.is_plain() {
                    // Fused operations and SGLs are not supported.
                    (Status::INVALID_FIELD, 0)
                } else if qid == 0 {
                    me.admin(&p, &cmd).await
                } else {
                    me.io(&p, &cmd).await
                };
                if !status.is_success() {
                    me.state
                        .borrow_mut()
                        .log_error(qid, cmd.cid, status, cmd.cdw10_11(), cmd.nsid);
                }
                me.complete(&p, generation, cqid, qid, sq_head, cmd.cid, status, result)
                    .await;
                me.retire(qid, generation);
            }));
        }
        q.head = (head + count) % q.entries;
        let more = q.head != q.tail;
        // No fetch in flight now: arbitration looks at it again.
        s.sqs.note(qid as usize);
        more
    }

    /// A command fetched from `sqid` has finished (its completion is posted or discarded).
    fn retire(&self, sqid: u16, generation: u64) {
        {
            let mut s = self.state.borrow_mut();
            if s.generation != generation {
                return;
            }
            let n = &mut s.inflight[sqid as usize];
            *n = n.saturating_sub(1);
        }
        for w in self.drained.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Waits until every command fetched from `sqid` has finished (or the controller reset).
    pub(super) async fn drain(&self, sqid: u16, generation: u64) {
        std::future::poll_fn(|cx| {
            let s = self.state.borrow();
            if s.generation != generation || s.inflight[sqid as usize] == 0 {
                return Poll::Ready(());
            }
            self.drained.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Posts a completion (waiting for a free slot) and signals the queue's vector.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn complete<P: Port>(
        &self,
        port: &P,
        generation: u64,
        cqid: u16,
        sqid: u16,
        sq_head: u16,
        cid: u16,
        status: Status,
        result: u32,
    ) {
        let slot = std::future::poll_fn(|cx| {
            let mut s = self.state.borrow_mut();
            if s.generation != generation {
                return Poll::Ready(None);
            }
            let Some(q) = s.cqs[cqid as usize].as_mut() else {
                return Poll::Ready(None);
            };
            if (q.tail + 1) % q.entries == q.head {
                self.cq_space.borrow_mut().push(cx.waker().clone());
                return Poll::Pending;
            }
            let slot = (q.base + u64::from(q.tail) * CQE_SIZE as u64, q.phase);
            q.tail += 1;
            if q.tail == q.entries {
                q.tail = 0;
                q.phase = !q.phase;
            }
            let vector = q.interrupts.then_some(q.vector);
            Poll::Ready(Some((slot, vector)))
        })
        .await;
        let Some(((addr, phase), vector)) = slot else {
            return;
        };
        let entry = Completion {
            result,
            sq_head,
            sq_id: sqid,
            cid,
            phase,
            status,
        };
        activity::doing("post the completion entry");
        if port.write(BusAddr(addr), &entry.to_bytes()).await.is_err() {
            self.state.borrow_mut().csts |= csts::CFS;
            return;
        }
        // MSI-X, or legacy INTx: an assertion reaches the root complex as the routed line.
        if let Some(m) = vector.and_then(|v| msix::interrupt_message(&self.pci, &self.msix, v)) {
            activity::doing("MSI-X message");
            let _ = port.write(m.address, &m.payload()).await;
        }
    }
}

impl CompQueue {
    /// Whether moving the head to `head` only frees entries the controller has posted
    /// (the new head lies between the old head and the tail, circularly).
    fn frees_only_posted(&self, head: u16) -> bool {
        let n = u32::from(self.entries);
        let posted = (u32::from(self.tail) + n - u32::from(self.head)) % n;
        let freed = (u32::from(head) + n - u32::from(self.head)) % n;
        freed <= posted
    }
}

impl State {
    /// Queues an Error event with `info` for the next Asynchronous Event Request, unless
    /// error events are masked or one is already waiting. Returns whether one was queued.
    pub(super) fn raise_error_event(&mut self, info: u8) -> bool {
        let is_error = |e: &u32| (e & 7) as u8 == async_event::TYPE_ERROR;
        if self.errors_masked || self.events.iter().any(is_error) {
            return false;
        }
        self.events.push_back(async_event::dword0(
            async_event::TYPE_ERROR,
            info,
            log::ERROR_INFORMATION,
        ));
        true
    }

    pub(super) fn log_error(&mut self, sqid: u16, cid: u16, status: Status, lba: u64, nsid: u32) {
        self.error_count += 1;
        if self.errors.len() == ERROR_LOG_ENTRIES {
            self.errors.pop_back();
        }
        self.errors.push_front(ErrorEntry {
            count: self.error_count,
            sqid,
            cid,
            status,
            lba,
            nsid,
        });
    }
}

impl BarHandler for NvmeController {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        match bar {
            0 if (MSIX_TABLE..MSIX_PBA).contains(&offset) => {
                self.msix.read_table(offset - MSIX_TABLE, buf)
            }
            0 if offset >= MSIX_PBA => self.msix.read_pba(offset - MSIX_PBA, buf),
            0 => {
                if buf.len() != 4 && buf.len() != 8 {
                    return Err(CompleterError::BadWidth(buf.len()));
                }
                let v = self.register(offset).ok_or(CompleterError::OutOfRange)?;
                let bytes = v.to_le_bytes();
                buf.copy_from_slice(&bytes[..buf.len()]);
                Ok(())
            }
            CMB_BAR if self.config.cmb_size > 0 => {
                if offset + buf.len() as u64 > self.config.cmb_size {
                    return Err(CompleterError::OutOfRange);
                }
                self.cmb.borrow().read(offset, buf);
                Ok(())
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        match bar {
            0 if (MSIX_TABLE..MSIX_PBA).contains(&offset) => {
                if self.msix.write_table(offset - MSIX_TABLE, data)? {
                    self.wake.notify();
                }
                Ok(())
            }
            0 if offset >= MSIX_PBA => Err(CompleterError::ReadOnly),
            0 => {
                if offset >= reg::DOORBELLS {
                    // Doorbells are 4 bytes; a wider store rings consecutive ones.
                    if !data.len().is_multiple_of(4) {
                        return Err(CompleterError::BadWidth(data.len()));
                    }
                    for (i, d) in data.chunks_exact(4).enumerate() {
                        let v = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                        self.write_register(offset + 4 * i as u64, u64::from(v), 4)?;
                    }
                    return Ok(());
                }
                let mut b = [0u8; 8];
                match data.len() {
                    4 | 8 => b[..data.len()].copy_from_slice(data),
                    n => return Err(CompleterError::BadWidth(n)),
                }
                self.write_register(offset, u64::from_le_bytes(b), data.len())
            }
            CMB_BAR if self.config.cmb_size > 0 => {
                if offset + data.len() as u64 > self.config.cmb_size {
                    return Err(CompleterError::OutOfRange);
                }
                self.cmb.borrow_mut().write(offset, data);
                Ok(())
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }
}

/// The doorbell stride the controller uses (CAP.DSTRD = 0: 4 bytes).
pub const DOORBELL_STRIDE: u32 = 0;

/// Offset of a doorbell in BAR0.
pub fn doorbell(qid: u16, completion: bool) -> u64 {
    spec::doorbell_offset(qid, completion, DOORBELL_STRIDE)
}

#[cfg(test)]
mod tests;
