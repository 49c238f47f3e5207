//! An NVMe controller on the device harness ([`crate::testing::World`]), driven the way a
//! driver drives it: registers and doorbells through BAR0, queues and data in the world's
//! memory, completions read back from it. The controller's costs are its own (the world's
//! bus answers at once), so a test can read off the clock what a command took.
//!
//! Memory map: the admin submission queue at [`ASQ`], its completion queue at [`ACQ`], I/O
//! queue pair `q`'s submission queue at [`io_sq`]`(q)` and completion queue at
//! [`io_cq`]`(q)`, data buffers from [`DATA`].

use super::controller::{doorbell, NvmeConfig, NvmeController};
use super::media::MediaProfile;
use super::namespace::NamespaceStore;
use super::spec::admin::{AdminCommand, CreateIoCq, CreateIoSq};
use super::spec::{aqa, cc, reg, Command, Completion, Status, CQE_SIZE, SQE_SIZE};
use crate::config::ConfigSpace;
use crate::kinds::layout_for;
use crate::testing::{assigned_bars, World};
use smartio_platform::pci::{self, cap, command, msix};
use smartio_platform::{BarHandler, Cause, ConfigHandler, LocalTask, SimDuration, Spread, Stream};
use std::rc::Rc;

/// The admin submission queue.
pub(crate) const ASQ: u64 = 0x10_000;
/// The admin completion queue.
pub(crate) const ACQ: u64 = 0x20_000;
/// Entries in each admin queue.
pub(crate) const ADMIN_ENTRIES: u16 = 16;
/// Where data buffers start (page aligned; tests use pages from here on).
pub(crate) const DATA: u64 = 0x100_000;
/// Where BAR0 is (the controller memory buffer's BAR follows it).
pub(crate) const BAR0: u64 = 1 << 40;
/// Where BAR 2, the controller memory buffer, is when the controller has one (BAR `i` is at
/// `BAR0 + (i << 32)`): past [`crate::testing::MEMORY_END`], so only the controller answers
/// there.
pub(crate) const CMB: u64 = BAR0 + (2 << 32);

/// I/O submission queue `qid`'s base.
pub(crate) fn io_sq(qid: u16) -> u64 {
    0x40_000 + u64::from(qid) * 0x20_000
}

/// I/O completion queue `qid`'s base.
pub(crate) fn io_cq(qid: u16) -> u64 {
    io_sq(qid) + 0x10_000
}

/// Read latency of the test profile (Identify and log pages take it too).
pub(crate) const READ_LATENCY: SimDuration = SimDuration::from_us(10);
/// Write latency of the test profile.
pub(crate) const WRITE_LATENCY: SimDuration = SimDuration::from_us(20);
/// CC.EN to CSTS.RDY.
pub(crate) const READY_DELAY: SimDuration = SimDuration::from_us(1);

/// A media profile with fixed latencies and no throughput limit worth the name.
pub(crate) fn profile() -> MediaProfile {
    MediaProfile {
        name: "test".into(),
        read_latency: Spread::fixed(READ_LATENCY),
        write_latency: Spread::fixed(WRITE_LATENCY),
        flush_latency: SimDuration::from_us(1),
        max_read_iops: 1e9,
        max_write_iops: 1e9,
        read_bandwidth: 1e15,
        write_bandwidth: 1e15,
        parallel_units: 64,
    }
}

/// Four queue pairs (the admin pair and three I/O pairs), two namespaces of 128 blocks of
/// 512 bytes, no memory buffer.
pub(crate) fn config() -> NvmeConfig {
    NvmeConfig {
        profile: profile(),
        queue_pairs: 4,
        namespaces: 2,
        capacity: 128 * 512,
        lba_size: 512,
        cmb_size: 0,
        ready_delay: READY_DELAY,
        serial: "SN-TEST-0001".into(),
        vendor_id: 0x1b36,
        media_stream: Stream::new(1, Cause::Media, 0),
    }
}

/// The host's side of a queue pair: where its queues are and how far it got.
#[derive(Debug, Clone, Copy)]
struct HostPair {
    sq: u64,
    sq_entries: u16,
    sq_tail: u16,
    cq: u64,
    cq_entries: u16,
    cq_head: u16,
    phase: bool,
}

/// A controller in a world, and a driver's view of its queues.
pub(crate) struct Rig {
    pub world: World,
    pub nvme: Rc<NvmeController>,
    pub pci: Rc<ConfigSpace>,
    tasks: Vec<LocalTask>,
    pairs: Vec<Option<HostPair>>,
    next_cid: u16,
}

impl Rig {
    /// A controller with [`config`], not enabled, bus mastering on.
    pub fn new() -> Rig {
        Rig::with(config())
    }

    /// A controller with `config`, not enabled, bus mastering on; its memory buffer, when
    /// `config.cmb_size > 0`, in BAR 2 at [`CMB`].
    pub fn with(config: NvmeConfig) -> Rig {
        let store = NamespaceStore::sparse(config.namespaces, config.capacity);
        Rig::with_store(config, store)
    }

    /// [`Rig::with`] whose namespaces live in `store`.
    pub fn with_store(config: NvmeConfig, store: NamespaceStore) -> Rig {
        let mut params = toml::Table::new();
        if config.cmb_size > 0 {
            let size = i64::try_from(config.cmb_size).expect("a memory buffer size");
            params.insert("cmb".into(), toml::Value::Integer(size));
        }
        let layout = layout_for("nvme", &params).expect("the layout");
        let bars = assigned_bars(&layout, |index| BAR0 + (u64::from(index) << 32));
        let pci = Rc::new(ConfigSpace::new(
            &layout,
            &bars,
            Some(NvmeController::msix_layout(config.queue_pairs)),
        ));
        pci.config_write(pci::COMMAND, &command::BUS_MASTER.to_le_bytes());
        let pairs = vec![None; usize::from(config.queue_pairs)];
        let nvme = Rc::new(NvmeController::new(config, store, pci.clone()));
        let world = World::default();
        let tasks: Vec<LocalTask> = vec![Box::pin(nvme.clone().run(world.clone()))];
        Rig {
            world,
            nvme,
            pci,
            tasks,
            pairs,
            next_cid: 1,
        }
    }

    /// [`Rig::new`], enabled with its admin queues in place.
    pub fn enabled() -> Rig {
        let mut rig = Rig::new();
        rig.enable();
        rig
    }

    /// Runs the controller until it waits for the host.
    pub fn settle(&mut self) {
        self.world.settle(&mut self.tasks);
    }

    /// Register `offset` of BAR0, read 4 or 8 bytes wide.
    pub fn reg(&self, offset: u64, width: usize) -> u64 {
        let mut b = [0u8; 8];
        self.nvme
            .mmio_read(0, offset, &mut b[..width])
            .expect("a register read");
        u64::from_le_bytes(b)
    }

    /// Writes register `offset` of BAR0 with the low `width` bytes of `value`.
    pub fn set_reg(&self, offset: u64, value: u64, width: usize) {
        self.nvme
            .mmio_write(0, offset, &value.to_le_bytes()[..width])
            .expect("a register write");
    }

    /// Writes a doorbell: queue `qid`'s submission tail or (`completion`) completion head.
    pub fn ring(&self, qid: u16, completion: bool, value: u16) {
        self.set_reg(doorbell(qid, completion), u64::from(value), 4);
    }

    /// Puts the admin queues in place, enables the controller with 64-byte submission and
    /// 16-byte completion entries, and waits until it is ready.
    pub fn enable(&mut self) {
        self.set_reg(
            reg::AQA,
            u64::from(aqa::new(ADMIN_ENTRIES, ADMIN_ENTRIES)),
            4,
        );
        self.set_reg(reg::ASQ, ASQ, 8);
        self.set_reg(reg::ACQ, ACQ, 8);
        self.enable_with(cc::EN | cc::IOSQES_64 | cc::IOCQES_16);
        assert_eq!(self.reg(reg::CSTS, 4) & 1, 1, "CSTS.RDY after the enable");
    }

    /// Writes CC (with the admin queues in place, the completion queue cleared as a driver
    /// clears new queue memory) and settles.
    pub fn enable_with(&mut self, cc: u32) {
        let entries = usize::from(ADMIN_ENTRIES);
        self.world.poke(ACQ, &vec![0; entries * CQE_SIZE]);
        self.pairs[0] = Some(HostPair {
            sq: ASQ,
            sq_entries: ADMIN_ENTRIES,
            sq_tail: 0,
            cq: ACQ,
            cq_entries: ADMIN_ENTRIES,
            cq_head: 0,
            phase: true,
        });
        self.set_reg(reg::CC, u64::from(cc), 4);
        self.settle();
    }

    /// A fresh command id.
    pub fn cid(&mut self) -> u16 {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1).max(1);
        cid
    }

    fn pair(&mut self, qid: u16) -> &mut HostPair {
        self.pairs[usize::from(qid)]
            .as_mut()
            .expect("a queue pair the test created")
    }

    /// Writes `cmd` at queue `qid`'s tail and moves the host's tail past it, without
    /// ringing the doorbell. Returns the slot written.
    pub fn post(&mut self, qid: u16, cmd: Command) -> u16 {
        let p = self.pair(qid);
        let slot = p.sq_tail;
        let addr = p.sq + u64::from(slot) * SQE_SIZE as u64;
        p.sq_tail = (p.sq_tail + 1) % p.sq_entries;
        self.world.poke(addr, &cmd.to_bytes());
        slot
    }

    /// Posts `n` copies of `cmd` on queue `qid`, each with a fresh command id, without
    /// ringing the doorbell; their ids.
    pub fn post_many(&mut self, qid: u16, cmd: Command, n: usize) -> Vec<u16> {
        (0..n)
            .map(|_| {
                let cid = self.cid();
                self.post(qid, Command { cid, ..cmd });
                cid
            })
            .collect()
    }

    /// Rings queue `qid`'s submission doorbell with the host's tail.
    pub fn kick(&mut self, qid: u16) {
        let tail = self.pair(qid).sq_tail;
        self.ring(qid, false, tail);
    }

    /// Posts `cmd` on queue `qid` with a fresh command id and rings the doorbell (no
    /// settling); the command id.
    pub fn submit(&mut self, qid: u16, cmd: Command) -> u16 {
        let cid = self.cid();
        self.post(qid, Command { cid, ..cmd });
        self.kick(qid);
        cid
    }

    /// The completions queue `qid` holds that the host has not consumed, in order; moves
    /// the host's head past them and rings the completion doorbell if there were any.
    pub fn reap(&mut self, qid: u16) -> Vec<Completion> {
        let world = self.world.clone();
        let p = self.pair(qid);
        let mut out = Vec::new();
        loop {
            let addr = p.cq + u64::from(p.cq_head) * CQE_SIZE as u64;
            let c = Completion::from_bytes(&world.peek(addr, CQE_SIZE));
            if c.phase != p.phase {
                break;
            }
            out.push(c);
            p.cq_head = (p.cq_head + 1) % p.cq_entries;
            if p.cq_head == 0 {
                p.phase = !p.phase;
            }
        }
        let head = p.cq_head;
        if !out.is_empty() {
            self.ring(qid, true, head);
        }
        out
    }

    /// Submits `cmd` on queue `qid`, settles, and returns its one completion (checking it
    /// answers this command).
    pub fn run(&mut self, qid: u16, cmd: impl Into<Command>) -> Completion {
        let cid = self.submit(qid, cmd.into());
        self.settle();
        let done = self.reap(qid);
        assert_eq!(done.len(), 1, "one completion for one command: {done:?}");
        assert_eq!(
            (done[0].cid, done[0].sq_id),
            (cid, qid),
            "it answers the command"
        );
        done[0]
    }

    /// [`Rig::run`] on the admin queue.
    pub fn admin(&mut self, cmd: impl Into<Command>) -> Completion {
        self.run(0, cmd)
    }

    /// The status of [`Rig::admin`].
    pub fn admin_status(&mut self, cmd: impl Into<Command>) -> Status {
        self.admin(cmd).status
    }

    /// Creates I/O completion queue and submission queue `qid` (`entries` each, interrupts
    /// off) and checks both succeed.
    pub fn create_pair(&mut self, qid: u16, entries: u16) {
        let cq = AdminCommand::CreateIoCq(CreateIoCq {
            qid,
            qsize: entries - 1,
            base: io_cq(qid),
            pc: true,
            ien: false,
            iv: 0,
        });
        assert_eq!(
            self.admin_status(cq),
            Status::SUCCESS,
            "Create I/O CQ {qid}"
        );
        self.adopt(qid, entries, entries);
        let sq = AdminCommand::CreateIoSq(CreateIoSq {
            qid,
            qsize: entries - 1,
            base: io_sq(qid),
            pc: true,
            qprio: 0,
            cqid: qid,
        });
        assert_eq!(
            self.admin_status(sq),
            Status::SUCCESS,
            "Create I/O SQ {qid}"
        );
    }

    /// Takes queue pair `qid` (at [`io_sq`] and [`io_cq`]) into the host's view, empty: for
    /// queues a test created by hand.
    pub fn adopt(&mut self, qid: u16, sq_entries: u16, cq_entries: u16) {
        self.pairs[usize::from(qid)] = Some(HostPair {
            sq: io_sq(qid),
            sq_entries,
            sq_tail: 0,
            cq: io_cq(qid),
            cq_entries,
            cq_head: 0,
            phase: true,
        });
    }

    /// Forgets the host's view of queue pair `qid` (after deleting it), so it can be
    /// created again from empty queues.
    pub fn forget(&mut self, qid: u16) {
        self.pairs[usize::from(qid)] = None;
        self.world.poke(io_sq(qid), &[0; 0x10_000]);
        self.world.poke(io_cq(qid), &[0; 0x10_000]);
    }

    /// Turns MSI-X on and points vector `v` at `address` with `data`, unmasked.
    pub fn enable_vector(&mut self, v: u16, address: u64, data: u32) {
        let at = self.pci.capability(cap::MSIX).expect("an MSI-X capability");
        self.pci
            .config_write(at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        let entry = 0x2000 + u64::from(v) * 16;
        let write = |off: u64, value: u32| {
            self.nvme
                .mmio_write(0, entry + off, &value.to_le_bytes())
                .expect("an MSI-X table write");
        };
        write(0, address as u32);
        write(4, (address >> 32) as u32);
        write(8, data);
        write(12, 0);
        self.settle();
    }
}

/// Where [`Rig::data_prps`] puts a PRP list.
pub(crate) const PRP_LIST: u64 = 0x30_000;

impl Rig {
    /// PRP entries for `len` bytes of contiguous data at [`DATA`] (a list at [`PRP_LIST`]
    /// when it spans more than two pages).
    pub fn data_prps(&self, len: u64) -> (u64, u64) {
        const PAGE: u64 = 4096;
        let pages = len.div_ceil(PAGE).max(1);
        match pages {
            1 => (DATA, 0),
            2 => (DATA, DATA + PAGE),
            n => {
                let list: Vec<u8> = (1..n)
                    .flat_map(|i| (DATA + i * PAGE).to_le_bytes())
                    .collect();
                self.world.poke(PRP_LIST, &list);
                (DATA, PRP_LIST)
            }
        }
    }
}
