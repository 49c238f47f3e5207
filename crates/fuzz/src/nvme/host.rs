//! The fuzzing host: carries out [`Op`]s from the host's CPU — register and doorbell stores
//! through BAR0, queue entries written to its RAM (or the controller memory buffer) — and
//! reaps and checks completions after each one.

use super::model::{
    changes_queues, dnr_expected, expect_dsm, expect_io, pattern_byte, queue_id, unmasks, Content,
    DsmList, Kind, Model, Pending, Queue, BLOCKS, LBA, MAX_ENTRIES,
};
use super::ops::{Op, PrpShape};
use smartio_devices::nvme::spec::{
    self, admin, async_event, cc, csts, io, io::DsmRange, log, reg, Command, Completion, Status,
    CQE_SIZE, SQE_SIZE,
};
use smartio_fabric::HostId;
use smartio_machine::{Agent, Machine};
use smartio_platform::{BusAddr, Clock, PhysAddr, Port, SimDuration, PAGE_SIZE};
use std::cell::RefCell;

/// Room for the largest queue of each kind.
const SQ_ROOM: u64 = MAX_ENTRIES as u64 * SQE_SIZE as u64;
const CQ_ROOM: u64 = MAX_ENTRIES as u64 * CQE_SIZE as u64;
/// Queue ids whose memory the harness lays out.
const MANAGED_QIDS: u16 = 8;
/// Room per data buffer: the largest transfer, an offset into the first page, a PRP list.
const SLOT: u64 = 256 << 10;
const SCRATCH: u64 = 1 << 20;

/// Where everything the harness uses lives in host RAM, and the controller's BARs.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// BAR0 (registers, doorbells).
    pub bar0: u64,
    /// The controller memory buffer (BAR2) and its size, if any.
    pub cmb: Option<(u64, u64)>,
    /// Start of the harness's RAM area.
    pub ram: u64,
}

impl Layout {
    fn sq(&self, qid: u16) -> u64 {
        self.ram + u64::from(qid) * SQ_ROOM
    }
    fn cq(&self, qid: u16) -> u64 {
        self.ram + u64::from(MANAGED_QIDS) * SQ_ROOM + u64::from(qid) * CQ_ROOM
    }
    fn scratch(&self) -> u64 {
        self.cq(MANAGED_QIDS)
    }
    fn slot(&self, n: usize) -> u64 {
        self.scratch() + SCRATCH + n as u64 * SLOT
    }
    /// Whether a queue at `base` of `bytes` is memory the harness manages for `qid`.
    fn managed(&self, base: u64, qid: u16, sq: bool, bytes: u64) -> bool {
        if qid < MANAGED_QIDS {
            let (at, room) = if sq {
                (self.sq(qid), SQ_ROOM)
            } else {
                (self.cq(qid), CQ_ROOM)
            };
            if base == at && bytes <= room {
                return true;
            }
        }
        sq && self.cmb.is_some_and(|(b, size)| base == b && bytes <= size)
    }
}

/// The host side of one fuzzing run.
pub struct Harness {
    pub(super) machine: Machine,
    cpu: Agent,
    layout: Layout,
    /// What the host knows.
    pub model: RefCell<Model>,
    /// Operation counter (data buffer slot of the current one).
    op: std::cell::Cell<usize>,
}

impl Harness {
    /// A host on `machine`'s host 0 driving a controller laid out as `layout`.
    pub fn new(machine: &Machine, layout: Layout) -> Self {
        Harness {
            machine: machine.clone(),
            cpu: machine.cpu(HostId(0)),
            layout,
            model: RefCell::new(Model::default()),
            op: std::cell::Cell::new(0),
        }
    }

    async fn store32(&self, offset: u64, value: u32) {
        // Posted: a store the controller refuses is dropped, as on real hardware.
        let _ = self
            .cpu
            .write(BusAddr(self.layout.bar0 + offset), &value.to_le_bytes())
            .await;
    }

    async fn load32(&self, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        match self
            .cpu
            .read(BusAddr(self.layout.bar0 + offset), &mut b)
            .await
        {
            Ok(()) => u32::from_le_bytes(b),
            Err(_) => u32::MAX,
        }
    }

    async fn load64(&self, offset: u64) -> u64 {
        let mut b = [0u8; 8];
        match self
            .cpu
            .read(BusAddr(self.layout.bar0 + offset), &mut b)
            .await
        {
            Ok(()) => u64::from_le_bytes(b),
            Err(_) => u64::MAX,
        }
    }

    fn poke(&self, addr: u64, data: &[u8]) {
        self.machine.poke_memory(HostId(0), PhysAddr(addr), data);
    }

    fn peek(&self, addr: u64, buf: &mut [u8]) {
        self.machine.peek_memory(HostId(0), PhysAddr(addr), buf);
    }

    /// Runs every operation, reaping after each, then waits for what is outstanding.
    pub async fn run(&self, ops: Vec<Op>) {
        for (n, op) in ops.into_iter().enumerate() {
            self.op.set(n);
            self.apply(op).await;
            self.reap().await;
        }
        self.drain().await;
    }

    async fn apply(&self, op: Op) {
        match op {
            Op::Enable {
                asqs,
                acqs,
                cc_extra,
            } => self.enable(asqs, acqs, cc_extra).await,
            Op::Disable => self.disable().await,
            Op::WriteRegister {
                offset,
                value,
                wide,
            } => self.write_register(offset, value, wide).await,
            Op::CreateCq {
                qid,
                qsize,
                vector,
                managed,
                base,
                contiguous,
            } => {
                let base = if managed && qid < MANAGED_QIDS {
                    self.layout.cq(qid)
                } else {
                    base
                };
                let (ien, iv) = vector.map_or((0, 0), |v| (2u32, u32::from(v)));
                let cmd = Command {
                    opcode: admin::CREATE_IO_CQ,
                    prp1: base,
                    cdw: [
                        u32::from(qid) | (u32::from(qsize) << 16),
                        u32::from(contiguous) | ien | (iv << 16),
                        0,
                        0,
                        0,
                        0,
                    ],
                    ..Command::default()
                };
                self.admin(cmd, Kind::Chosen { expect: vec![] }).await;
            }
            Op::CreateSq {
                qid,
                qsize,
                cqid,
                place,
                base,
            } => {
                let base = match place {
                    0 if qid < MANAGED_QIDS => self.layout.sq(qid),
                    1 => self.layout.cmb.map_or(base, |(b, _)| b),
                    _ => base,
                };
                let cmd = Command {
                    opcode: admin::CREATE_IO_SQ,
                    prp1: base,
                    cdw: [
                        u32::from(qid) | (u32::from(qsize) << 16),
                        1 | (u32::from(cqid) << 16),
                        0,
                        0,
                        0,
                        0,
                    ],
                    ..Command::default()
                };
                self.admin(cmd, Kind::Chosen { expect: vec![] }).await;
            }
            Op::DeleteSq(qid) | Op::DeleteCq(qid) => {
                let sq = matches!(op, Op::DeleteSq(_));
                let exists = {
                    let m = self.model.borrow();
                    qid != 0 && if sq { &m.sqs } else { &m.cqs }.contains_key(&qid)
                };
                let expect = if exists {
                    vec![]
                } else {
                    vec![Status::INVALID_QUEUE_ID]
                };
                let cmd = Command {
                    opcode: if sq {
                        admin::DELETE_IO_SQ
                    } else {
                        admin::DELETE_IO_CQ
                    },
                    cdw: [u32::from(qid), 0, 0, 0, 0, 0],
                    ..Command::default()
                };
                if sq {
                    self.model.borrow_mut().closing.push(qid);
                }
                self.admin(cmd, Kind::Chosen { expect }).await;
            }
            Op::Rw {
                queue,
                opcode,
                nsid,
                slba,
                nlb,
                prp,
                seed,
            } => self.rw(queue, opcode, nsid, slba, nlb, prp, seed).await,
            Op::Admin { opcode, nsid, cdw } => {
                let buffer = self.layout.slot(self.op.get());
                let cmd = Command {
                    opcode,
                    nsid,
                    prp1: buffer,
                    prp2: buffer + PAGE_SIZE,
                    cdw: [cdw[0], cdw[1], cdw[2], 0, 0, 0],
                    ..Command::default()
                };
                self.admin(cmd, Kind::Chosen { expect: vec![] }).await;
            }
            Op::RawSqe {
                queue,
                mut entry,
                scratch_prps,
            } => {
                let (cmd, flags) = Command::from_bytes(&entry);
                // Pointers into scratch RAM (the controller moves real data), or arbitrary
                // ones kept off what the harness checks.
                let (p1, p2) = if scratch_prps {
                    let scratch = self.layout.scratch();
                    (scratch + cmd.prp1 % SCRATCH, scratch + cmd.prp2 % SCRATCH)
                } else {
                    (self.away(cmd.prp1), self.away(cmd.prp2))
                };
                entry[24..32].copy_from_slice(&p1.to_le_bytes());
                entry[32..40].copy_from_slice(&p2.to_le_bytes());
                let (cmd, _) = Command::from_bytes(&entry);
                let sqid = self.pick_queue(queue, true);
                let _ = self.submit(sqid, cmd, flags, Kind::Raw).await;
            }
            Op::Doorbell { index, value } => self.doorbell(index, value).await,
            Op::Poke {
                offset,
                value,
                pointer,
            } => {
                let scratch = self.layout.scratch();
                let offset = u64::from(offset) % (SCRATCH - 8);
                let value = if pointer {
                    scratch + value % SCRATCH
                } else {
                    value
                };
                self.poke(scratch + offset, &value.to_le_bytes());
            }
            Op::Wait(us) => self.cpu.sleep(SimDuration::from_us(u64::from(us))).await,
        }
    }

    /// An arbitrary address, moved into the scratch area if it falls on the queues or data
    /// buffers the harness checks (a stray DMA there is not the controller's fault).
    fn away(&self, addr: u64) -> u64 {
        let (start, end) = (self.layout.ram, self.layout.slot(super::ops::MAX_OPS + 1));
        let scratch = self.layout.scratch();
        if (start..end).contains(&addr) && !(scratch..scratch + SCRATCH).contains(&addr) {
            self.layout.scratch() + addr % SCRATCH
        } else {
            addr
        }
    }

    /// A known queue: 0 (admin) or one of the created I/O submission queues.
    fn pick_queue(&self, choice: u8, admin_too: bool) -> u16 {
        let m = self.model.borrow();
        let io: Vec<u16> = m.sqs.keys().copied().filter(|&q| q != 0).collect();
        if admin_too && (choice & 0x80 != 0 || io.is_empty()) {
            return 0;
        }
        // No I/O queue yet: a queue id no queue has (the submission is skipped).
        io.get(usize::from(choice) % io.len().max(1))
            .copied()
            .unwrap_or(u16::MAX)
    }

    /// Waits (bounded) for CSTS.RDY to become `ready`; waiting for 1 also ends at CFS. A
    /// reset (RDY to 0) is waited for whatever CFS says: enabling again before it completes
    /// is not allowed.
    async fn wait_status(&self, ready: bool) {
        for _ in 0..40 {
            let s = self.load32(reg::CSTS).await;
            let fatal = ready && s & csts::CFS != 0;
            if s == u32::MAX || fatal || (s & csts::RDY != 0) == ready {
                return;
            }
            self.cpu.sleep(SimDuration::from_us(10)).await;
        }
    }

    async fn enable(&self, asqs: u16, acqs: u16, cc_extra: u32) {
        // A driver resets first unless the controller is idle: CC.EN = 0 and no RDY or CFS.
        let busy = self.load32(reg::CC).await & cc::EN != 0
            || self.load32(reg::CSTS).await & (csts::RDY | csts::CFS) != 0;
        if self.model.borrow().enabled || busy {
            self.disable().await;
        }
        self.store32(reg::AQA, u32::from(asqs) | (u32::from(acqs) << 16))
            .await;
        let (asq, acq) = (self.layout.sq(0), self.layout.cq(0));
        self.store32(reg::ASQ, asq as u32).await;
        self.store32(reg::ASQ + 4, (asq >> 32) as u32).await;
        self.store32(reg::ACQ, acq as u32).await;
        self.store32(reg::ACQ + 4, (acq >> 32) as u32).await;
        self.store32(
            reg::CC,
            cc::EN | cc::IOSQES_64 | cc::IOCQES_16 | (cc_extra & !cc::EN),
        )
        .await;
        self.after_enable().await;
    }

    /// Waits for the controller to follow CC.EN = 1 and takes the admin queues it uses.
    async fn after_enable(&self) {
        self.wait_status(true).await;
        let status = self.load32(reg::CSTS).await;
        let aqa = self.load32(reg::AQA).await;
        let asq = self.load64(reg::ASQ).await;
        let acq = self.load64(reg::ACQ).await;
        // The queues are cleared before the controller is enabled; fresh ones read as empty.
        let mut m = self.model.borrow_mut();
        m.reset();
        if status & csts::CFS != 0 {
            m.fatal = true;
            return;
        }
        if status & csts::RDY == 0 {
            return;
        }
        m.enabled = true;
        let sq_entries = (aqa & 0xfff) as u16 + 1;
        let cq_entries = ((aqa >> 16) & 0xfff) as u16 + 1;
        let sq_managed = self
            .layout
            .managed(asq, 0, true, u64::from(sq_entries) * SQE_SIZE as u64);
        let cq_managed =
            self.layout
                .managed(acq, 0, false, u64::from(cq_entries) * CQE_SIZE as u64);
        if cq_managed {
            self.poke(acq, &vec![0u8; usize::from(cq_entries) * CQE_SIZE]);
        }
        m.sqs.insert(
            0,
            Queue {
                base: asq,
                entries: sq_entries,
                host_index: 0,
                other: 0,
                cqid: 0,
                managed: sq_managed,
            },
        );
        m.cqs.insert(
            0,
            Queue {
                base: acq,
                entries: cq_entries,
                host_index: 0,
                other: 1,
                cqid: 0,
                managed: cq_managed,
            },
        );
    }

    async fn disable(&self) {
        let cc0 = self.load32(reg::CC).await;
        self.store32(reg::CC, cc0 & !cc::EN).await;
        self.wait_status(false).await;
        self.model.borrow_mut().reset();
    }

    async fn write_register(&self, offset: u64, value: u64, wide: bool) {
        let was_enabled = self.load32(reg::CC).await & cc::EN != 0;
        let data = value.to_le_bytes();
        let data = if wide { &data[..] } else { &data[..4] };
        if offset + data.len() as u64 > reg::DOORBELLS {
            // A wide write at the last register reaches the admin SQ's tail doorbell with an
            // arbitrary value: the host's view of that queue (and whether an Error event is
            // owed) is no longer certain.
            let mut m = self.model.borrow_mut();
            m.chaos = true;
            m.events_uncertain = true;
        }
        let _ = self
            .cpu
            .write(BusAddr(self.layout.bar0 + offset), data)
            .await;
        if offset != reg::CC {
            return;
        }
        let now_enabled = value as u32 & cc::EN != 0;
        match (was_enabled, now_enabled) {
            (true, false) => {
                self.wait_status(false).await;
                self.model.borrow_mut().reset();
            }
            (false, true) => self.after_enable().await,
            _ => {}
        }
    }

    /// An admin command with chosen fields, waited for as a driver waits for its admin
    /// commands (bounded: a command that does not complete is caught at the end).
    async fn admin(&self, cmd: Command, kind: Kind) {
        let opcode = cmd.opcode;
        let Some(cid) = self.submit(0, cmd, 0, kind).await else {
            return;
        };
        if opcode == admin::ASYNC_EVENT_REQUEST {
            return; // completes only when an event occurs
        }
        for _ in 0..100 {
            self.reap().await;
            if !self.model.borrow().pending.contains_key(&cid) {
                return;
            }
            self.cpu.sleep(SimDuration::from_us(2)).await;
        }
    }

    /// Writes `cmd` (with a fresh command id) at SQ `sqid`'s tail and rings its doorbell;
    /// returns the command id, or `None` when the host cannot submit there now.
    async fn submit(&self, sqid: u16, mut cmd: Command, flags: u8, kind: Kind) -> Option<u16> {
        let (addr, tail, entries) = {
            let mut m = self.model.borrow_mut();
            let Some(q) = m.sqs.get(&sqid).copied() else {
                m.skipped += 1;
                return None;
            };
            let cq_managed = m.cqs.get(&q.cqid).is_some_and(|c| c.managed);
            let full = (q.host_index + 1) % q.entries == q.other;
            let closing = m.closing.contains(&sqid);
            if !m.enabled || m.fatal || !q.managed || !cq_managed || full || closing {
                m.skipped += 1;
                return None;
            }
            cmd.cid = m.cid();
            if matches!(kind, Kind::Raw) {
                m.raw_submitted += 1;
                m.raw_outstanding += 1;
                if sqid != 0 {
                    m.shadow_lost = true;
                }
            }
            if sqid != 0 && kind.writes(&cmd) {
                let (slba, n) = kind.extent(&cmd);
                m.unknown(cmd.nsid, slba, n);
                // Commands are not ordered: a read still outstanding may see this write.
                m.forget_reads(cmd.nsid, slba, n);
            }
            m.pending.insert(cmd.cid, Pending { sqid, cmd, kind });
            (
                q.base + u64::from(q.host_index) * SQE_SIZE as u64,
                (q.host_index + 1) % q.entries,
                q.entries,
            )
        };
        let mut entry = cmd.to_bytes();
        entry[1] = flags;
        if self
            .layout
            .cmb
            .is_some_and(|(b, size)| (b..b + size).contains(&addr))
        {
            let _ = self.cpu.write(BusAddr(addr), &entry).await;
        } else {
            self.poke(addr, &entry);
        }
        if let Some(q) = self.model.borrow_mut().sqs.get_mut(&sqid) {
            if q.entries == entries {
                q.host_index = tail;
            }
        }
        self.store32(spec::doorbell_offset(sqid, false, 0), u32::from(tail))
            .await;
        Some(cmd.cid)
    }

    #[allow(clippy::too_many_arguments)]
    async fn rw(
        &self,
        queue: u8,
        opcode: u8,
        nsid: u32,
        slba: u64,
        nlb: u16,
        prp: PrpShape,
        seed: u8,
    ) {
        let sqid = self.pick_queue(queue, false);
        let blocks = u64::from(nlb) + 1;
        // A Dataset Management's list: 1..=4 contiguous ranges of `blocks` blocks each.
        let dsm = opcode == io::DATASET_MANAGEMENT;
        let ranges = u64::from(seed % 4) + 1;
        let len = if dsm {
            ranges * DsmRange::SIZE as u64
        } else {
            blocks * LBA
        };
        let slot = self.layout.slot(self.op.get());
        let offset = match prp {
            PrpShape::Offset(o) => u64::from(o) % PAGE_SIZE,
            _ => 0,
        };
        let data_at = slot + offset;
        let mut cmd = Command {
            opcode,
            nsid,
            cdw: [slba as u32, (slba >> 32) as u32, u32::from(nlb), 0, 0, 0],
            ..Command::default()
        };
        let moves_data = matches!(opcode, io::READ | io::WRITE);
        let fits = len <= super::model::MAX_TRANSFER;
        let (prp1, prp2, bad) = match prp {
            PrpShape::Aligned | PrpShape::Offset(_) => {
                let (p2, list) = self.prps(data_at, len.min(super::model::MAX_TRANSFER), slot);
                if let Some(list) = list {
                    self.poke(slot + SLOT - PAGE_SIZE, &list);
                }
                (data_at, p2, false)
            }
            PrpShape::Misaligned => (data_at | 2, data_at + PAGE_SIZE, true),
            PrpShape::Scratch(a, b) => {
                let s = self.layout.scratch();
                (
                    s + u64::from(a & !3) % SCRATCH,
                    s + u64::from(b) % SCRATCH,
                    true,
                )
            }
            PrpShape::Arbitrary(a, b) => (self.away(a), self.away(b), true),
        };
        cmd.prp1 = prp1;
        cmd.prp2 = prp2;
        // Deallocation is asked for only where the list read is the one the host wrote or
        // none at all (a misaligned PRP1 must fail before any block changes): one read from
        // other memory could name any blocks.
        let list = match prp {
            _ if !bad => DsmList::Written,
            PrpShape::Misaligned => DsmList::Misaligned,
            _ => DsmList::Elsewhere,
        };
        let deallocate = dsm && seed & 4 == 0 && list != DsmList::Elsewhere;
        if dsm {
            // Seed bits 7:3 go in CDW10's reserved bits 31:8, which change nothing.
            let nr = (ranges - 1) as u32 | u32::from(seed >> 3) << 8;
            cmd.cdw = [nr, u32::from(deallocate) << 2, 0, 0, 0, 0];
            if !bad {
                let list: Vec<u8> = (0..ranges)
                    .flat_map(|k| {
                        DsmRange {
                            slba: slba.wrapping_add(k * blocks),
                            blocks: blocks as u32,
                        }
                        .encode()
                    })
                    .collect();
                self.poke(data_at, &list);
            }
        }
        if opcode == io::READ {
            // Like a block layer, order a read after the writes it overlaps (bounded).
            for _ in 0..50 {
                if !self.model.borrow().overlapping_write(0, nsid, slba, blocks) {
                    break;
                }
                self.cpu.sleep(SimDuration::from_us(2)).await;
                self.reap().await;
            }
        }
        let expect = if dsm {
            expect_dsm(nsid, slba, blocks * ranges, list)
        } else {
            expect_io(&cmd, bad)
        };
        let kind = {
            let mut m = self.model.borrow_mut();
            match opcode {
                io::WRITE if moves_data && !bad && fits => {
                    m.next_write += 1;
                    let id = m.next_write;
                    drop(m);
                    let data: Vec<u8> = (0..len)
                        .map(|i| pattern_byte(id, slba.wrapping_add(i / LBA), i % LBA))
                        .collect();
                    self.poke(data_at, &data);
                    Kind::Write { id, expect }
                }
                io::READ if !bad && fits => {
                    self.poke(data_at, &vec![0xa5; len as usize]);
                    let expect_data =
                        if m.raw_outstanding == 0 && !m.overlapping_write(0, nsid, slba, blocks) {
                            m.known(nsid, slba, blocks)
                        } else {
                            None
                        };
                    Kind::Read {
                        buffer: data_at,
                        expect_data,
                        expect,
                        raw_mark: m.raw_submitted,
                    }
                }
                io::WRITE | io::WRITE_ZEROES => {
                    if expect != [Status::SUCCESS] || bad {
                        // A write that may or may not happen leaves its range unknown.
                        m.unknown(nsid, slba, blocks);
                    }
                    Kind::Chosen { expect }
                }
                io::DATASET_MANAGEMENT if deallocate => Kind::Deallocate {
                    slba,
                    blocks: blocks * ranges,
                    expect,
                },
                _ => Kind::Chosen { expect },
            }
        };
        let _ = self.submit(sqid, cmd, 0, kind).await;
    }

    /// PRP2 and, for transfers over two pages, the PRP list (stored in the slot's last page)
    /// for `len` contiguous bytes at `at`.
    fn prps(&self, at: u64, len: u64, slot: u64) -> (u64, Option<Vec<u8>>) {
        let first = PAGE_SIZE - at % PAGE_SIZE;
        if len <= first {
            return (0, None);
        }
        let next = at - at % PAGE_SIZE + PAGE_SIZE;
        if len - first <= PAGE_SIZE {
            return (next, None);
        }
        let pages = (len - first).div_ceil(PAGE_SIZE);
        let list: Vec<u8> = (0..pages)
            .flat_map(|k| (next + k * PAGE_SIZE).to_le_bytes())
            .collect();
        (slot + SLOT - PAGE_SIZE, Some(list))
    }

    async fn doorbell(&self, index: u16, value: u32) {
        let qid = index / 2;
        let cq = index % 2 == 1;
        {
            let mut m = self.model.borrow_mut();
            let q = if cq { m.cqs.get(&qid) } else { m.sqs.get(&qid) }.copied();
            // With nothing outstanding for a CQ the host has reaped all the controller
            // posted: any other head frees entries never posted.
            let cq_drained = cq
                && !m
                    .pending
                    .values()
                    .any(|p| m.sqs.get(&p.sqid).map_or(p.sqid == qid, |s| s.cqid == qid));
            match q {
                Some(q) if m.enabled && cq_drained && value != u32::from(q.host_index) => {
                    m.invalid_doorbell();
                }
                Some(q) if m.enabled && value < u32::from(q.entries) => m.chaos = true,
                _ if m.enabled => {
                    m.invalid_doorbell();
                }
                _ => {}
            }
        }
        self.store32(reg::DOORBELLS + u64::from(index) * 4, value)
            .await;
    }

    /// Consumes every new completion of every managed CQ, checking each.
    pub async fn reap(&self) {
        loop {
            let cqids: Vec<u16> = {
                let m = self.model.borrow();
                m.cqs
                    .iter()
                    .filter(|(_, q)| q.managed)
                    .map(|(&id, _)| id)
                    .collect()
            };
            let mut any = false;
            for cqid in cqids {
                any |= self.reap_cq(cqid).await;
            }
            if !any {
                break;
            }
        }
        let mut m = self.model.borrow_mut();
        let deleted = std::mem::take(&mut m.deleted_sqs);
        if m.chaos {
            return;
        }
        for qid in deleted {
            if let Some((cid, p)) = m.pending.iter().find(|(_, p)| p.sqid == qid) {
                panic!(
                    "the deletion of SQ {qid} completed before its command {cid} ({:#04x}) did",
                    p.cmd.opcode
                );
            }
        }
    }

    async fn reap_cq(&self, cqid: u16) -> bool {
        let mut consumed = false;
        loop {
            let (addr, phase) = {
                let m = self.model.borrow();
                let Some(q) = m.cqs.get(&cqid) else {
                    return consumed;
                };
                (
                    q.base + u64::from(q.host_index) * CQE_SIZE as u64,
                    q.other != 0,
                )
            };
            let mut raw = [0u8; CQE_SIZE];
            self.peek(addr, &mut raw);
            let e = Completion::from_bytes(&raw);
            if e.phase != phase {
                break;
            }
            let head = {
                let mut m = self.model.borrow_mut();
                let Some(q) = m.cqs.get_mut(&cqid) else {
                    break;
                };
                q.host_index = (q.host_index + 1) % q.entries;
                if q.host_index == 0 {
                    q.other ^= 1;
                }
                q.host_index
            };
            consumed = true;
            self.check(cqid, e);
            if !self.model.borrow().cqs.contains_key(&cqid) {
                return true;
            }
            self.store32(spec::doorbell_offset(cqid, true, 0), u32::from(head))
                .await;
        }
        consumed
    }

    /// Checks one completion and applies what it means to the model.
    fn check(&self, cqid: u16, e: Completion) {
        let mut m = self.model.borrow_mut();
        let name = e.status.name();
        *m.statuses.entry(name.to_string()).or_default() += 1;
        assert_ne!(
            name, "unknown status",
            "CQ {cqid}: a completion with a status no NVMe specification defines: {e:?}"
        );
        if let Some(want) = dnr_expected(e.status) {
            let dnr = e.status.dnr;
            assert_eq!(
                dnr, want,
                "CQ {cqid}: {} completed with DNR = {dnr}: {e:?}",
                e.status
            );
        }
        if m.chaos {
            if let Some(p) = m.pending.get(&e.cid) {
                if p.sqid == e.sq_id {
                    m.pending.remove(&e.cid);
                }
            }
            return;
        }
        let Some(p) = m.pending.remove(&e.cid) else {
            panic!(
                "CQ {cqid}: a completion for no outstanding command (duplicate or invented): {e:?}"
            );
        };
        assert_eq!(
            p.sqid, e.sq_id,
            "CQ {cqid}: command {} was submitted on SQ {} but completed for SQ {}",
            e.cid, p.sqid, e.sq_id
        );
        let sq = m.sqs.get(&p.sqid).copied();
        if let Some(sq) = sq {
            assert_eq!(
                sq.cqid, cqid,
                "command {} of SQ {} completed on CQ {cqid}, not its CQ {}",
                e.cid, p.sqid, sq.cqid
            );
            assert!(
                e.sq_head < sq.entries,
                "SQ head {} reported for a {}-entry SQ {}",
                e.sq_head,
                sq.entries,
                p.sqid
            );
            if let Some(q) = m.sqs.get_mut(&p.sqid) {
                q.other = e.sq_head;
            }
        }
        if matches!(p.kind, Kind::Raw) {
            m.raw_outstanding = m.raw_outstanding.saturating_sub(1);
        }
        self.settle(&mut m, &p, e);
    }

    /// What a completed command means: its status is one it may have, and its effect.
    fn settle(&self, m: &mut Model, p: &Pending, e: Completion) {
        let ok = e.status == Status::SUCCESS;
        let what = format!(
            "command {:#04x} on SQ {} (nsid {}, cdw10 {:#x}, cdw11 {:#x}, cdw12 {:#x})",
            p.cmd.opcode,
            p.sqid,
            p.cmd.nsid,
            p.cmd.cdw(10),
            p.cmd.cdw(11),
            p.cmd.cdw(12)
        );
        match &p.kind {
            Kind::Chosen { expect }
            | Kind::Write { expect, .. }
            | Kind::Read { expect, .. }
            | Kind::Deallocate { expect, .. } => {
                // Any command may be aborted (Abort, or its queue deleted under it).
                let aborted =
                    e.status == Status::ABORT_REQUESTED || e.status == Status::ABORTED_SQ_DELETION;
                assert!(
                    expect.is_empty() || expect.contains(&e.status) || aborted,
                    "{what} completed with {}; expected one of {:?}",
                    e.status,
                    expect.iter().map(|s| s.name()).collect::<Vec<_>>()
                );
            }
            Kind::Raw => {}
        }
        if p.sqid == 0 && p.cmd.opcode == admin::DELETE_IO_SQ {
            let qid = queue_id(&p.cmd);
            if let Some(i) = m.closing.iter().position(|&q| q == qid) {
                m.closing.swap_remove(i);
            }
        }
        if p.sqid == 0 && ok && changes_queues(p.cmd.opcode) {
            self.queue_change(m, &p.cmd, &what);
        }
        if p.sqid == 0 && ok && unmasks(&p.cmd) {
            m.errors_masked = false;
        }
        if p.sqid == 0 && ok && p.cmd.opcode == admin::ASYNC_EVENT_REQUEST {
            let (kind, info, lid) = (
                (e.result & 7) as u8,
                (e.result >> 8) as u8,
                (e.result >> 16) as u8,
            );
            assert!(
                kind == async_event::TYPE_ERROR
                    && matches!(
                        info,
                        async_event::INVALID_DOORBELL_REGISTER
                            | async_event::INVALID_DOORBELL_VALUE
                    )
                    && lid == log::ERROR_INFORMATION,
                "an asynchronous event the host did not cause: dword 0 {:#x}",
                e.result
            );
            assert!(
                m.event_pending || m.events_uncertain || m.unmask_in_flight(),
                "an asynchronous event reported with no invalid doorbell write before it: {:#x}",
                e.result
            );
            m.event_pending = false;
            m.errors_masked = true;
            m.events_reported += 1;
        }
        if p.sqid == 0 {
            return;
        }
        let (slba, n) = p.kind.extent(&p.cmd);
        match &p.kind {
            Kind::Write { id, .. }
                if ok && !m.overlapping_write(p.cmd.cid, p.cmd.nsid, slba, n) =>
            {
                for lba in slba..slba + n {
                    m.shadow.insert((p.cmd.nsid, lba), Content::Pattern(*id));
                }
            }
            Kind::Chosen { .. }
                if ok
                    && p.cmd.opcode == io::WRITE_ZEROES
                    && !m.overlapping_write(p.cmd.cid, p.cmd.nsid, slba, n) =>
            {
                for lba in slba..(slba + n).min(BLOCKS) {
                    m.shadow.insert((p.cmd.nsid, lba), Content::Zero);
                }
            }
            // A deallocated block reads as zeroes (Identify Namespace's DLFEAT says so).
            Kind::Deallocate { .. }
                if ok && !m.overlapping_write(p.cmd.cid, p.cmd.nsid, slba, n) =>
            {
                for lba in slba..(slba + n).min(BLOCKS) {
                    m.shadow.insert((p.cmd.nsid, lba), Content::Zero);
                }
            }
            Kind::Read {
                buffer,
                expect_data: Some(expect_data),
                raw_mark,
                ..
            } if ok && *raw_mark == m.raw_submitted && m.raw_outstanding == 0 => {
                let mut got = vec![0u8; (n * LBA) as usize];
                self.peek(*buffer, &mut got);
                for (k, content) in expect_data.iter().enumerate() {
                    let lba = slba + k as u64;
                    let block = &got[k * LBA as usize..(k + 1) * LBA as usize];
                    let want: Vec<u8> = match content {
                        Content::Zero => vec![0; LBA as usize],
                        Content::Pattern(id) => {
                            (0..LBA).map(|i| pattern_byte(*id, lba, i)).collect()
                        }
                        Content::Unknown => continue,
                    };
                    if let Some(i) = block.iter().zip(&want).position(|(a, b)| a != b) {
                        panic!(
                            "{what}: block {lba} of namespace {} reads {:#04x} at byte {i}, \
                             expected {:#04x} ({content:?})",
                            p.cmd.nsid, block[i], want[i]
                        );
                    }
                }
                m.verified_reads += 1;
            }
            _ => {}
        }
    }

    fn queue_change(&self, m: &mut Model, cmd: &Command, what: &str) {
        let qid = queue_id(cmd);
        let entries = (cmd.cdw(10) >> 16) as u16;
        assert!(qid != 0, "{what}: succeeded on queue 0");
        match cmd.opcode {
            admin::CREATE_IO_CQ | admin::CREATE_IO_SQ => {
                let sq = cmd.opcode == admin::CREATE_IO_SQ;
                let entries = entries.checked_add(1).unwrap_or(0);
                assert!(
                    (2..=MAX_ENTRIES).contains(&u32::from(entries)),
                    "{what}: created a queue of {entries} entries"
                );
                assert!(
                    cmd.prp1.is_multiple_of(PAGE_SIZE),
                    "{what}: created a queue at an unaligned base {:#x}",
                    cmd.prp1
                );
                let exists = if sq { &m.sqs } else { &m.cqs }.contains_key(&qid);
                assert!(!exists, "{what}: created queue {qid}, which exists");
                let cqid = (cmd.cdw(11) >> 16) as u16;
                if sq {
                    assert!(
                        m.cqs.contains_key(&cqid),
                        "{what}: created SQ {qid} on CQ {cqid}, which does not exist"
                    );
                }
                let size = if sq { SQE_SIZE } else { CQE_SIZE } as u64;
                // Memory another live queue already uses (two SQs in the controller memory
                // buffer, say) is not the harness's to write.
                let shared = m
                    .sqs
                    .values()
                    .chain(m.cqs.values())
                    .any(|q| q.managed && q.base == cmd.prp1);
                let managed = !shared
                    && self
                        .layout
                        .managed(cmd.prp1, qid, sq, u64::from(entries) * size);
                if managed && !sq {
                    self.poke(cmd.prp1, &vec![0u8; usize::from(entries) * CQE_SIZE]);
                }
                let q = Queue {
                    base: cmd.prp1,
                    entries,
                    host_index: 0,
                    other: u16::from(!sq),
                    cqid: if sq { cqid } else { 0 },
                    managed,
                };
                if sq {
                    m.sqs.insert(qid, q);
                } else {
                    m.cqs.insert(qid, q);
                }
            }
            admin::DELETE_IO_SQ => {
                assert!(
                    m.sqs.remove(&qid).is_some(),
                    "{what}: deleted SQ {qid}, which does not exist"
                );
                // Its commands were completed (aborted) before the deletion completed; their
                // completions are on the I/O CQ: checked once the reaping pass is over.
                m.deleted_sqs.push(qid);
            }
            _ => {
                assert!(
                    m.cqs.remove(&qid).is_some(),
                    "{what}: deleted CQ {qid}, which does not exist"
                );
                assert!(
                    !m.sqs.values().any(|s| s.cqid == qid),
                    "{what}: deleted CQ {qid} while an SQ still uses it"
                );
            }
        }
    }

    /// Reaps until nothing that must complete is outstanding (or a bound is reached), then
    /// reads CSTS: a controller that reported a fatal status owes nothing.
    async fn drain(&self) {
        // Up to ~2 s of virtual time: a queue of large Write Zeroes keeps the media's write
        // pipeline busy for milliseconds each.
        let mut nap = SimDuration::from_us(5);
        for _ in 0..2400 {
            self.reap().await;
            let owed = {
                let m = self.model.borrow();
                let aer = |p: &Pending| p.sqid == 0 && p.cmd.opcode == admin::ASYNC_EVENT_REQUEST;
                m.pending.values().any(|p| !aer(p))
                    || (m.event_pending && !m.events_uncertain && m.pending.values().any(aer))
            };
            if !owed {
                break;
            }
            self.cpu.sleep(nap).await;
            nap = SimDuration::from_ps((nap.as_ps() * 2).min(1_000_000_000));
        }
        let status = self.load32(reg::CSTS).await;
        if status == u32::MAX || status & csts::CFS != 0 {
            self.model.borrow_mut().fatal = true;
        }
    }
}
