//! The controller itself, driven through BAR0 ([`crate::nvme::testing::Rig`]): its registers
//! and doorbells, enable and reset, arbitration and fetching, posting completions, MSI-X
//! and the controller memory buffer. (The admin commands are tested in `admin/tests.rs`.)

use super::{doorbell, NvmeConfig, NvmeController, BAR0_SIZE, CMB_BAR};
use crate::nvme::spec::admin::{AdminCommand, CreateIoCq, CreateIoSq, GetLogPage};
use crate::nvme::spec::io::IoCommand;
use crate::nvme::spec::{
    aqa, async_event, cc, log, reg, Command, Completion, Flags, Status, CQE_SIZE, SQE_SIZE,
};
use crate::nvme::testing::{self, io_cq, io_sq, Rig, ACQ, ASQ, CMB, READY_DELAY};
use crate::testing::MEMORY_END;
use smartio_platform::pci::{self, command};
use smartio_platform::{BarHandler, Clock, CompleterError, ConfigHandler, SimDuration, Spawner};
use std::cell::RefCell;
use std::rc::Rc;

/// CC as [`Rig::enable`] writes it: enabled, 64-byte submission and 16-byte completion
/// entries.
const CC_ON: u32 = cc::EN | cc::IOSQES_64 | cc::IOCQES_16;
/// CSTS.RDY.
const RDY: u64 = 1;
/// CSTS.CFS.
const CFS: u64 = 2;
/// CSTS.SHST = shutdown processing complete.
const SHST_COMPLETE: u64 = 2 << 2;
/// A memory buffer size for the tests that want one: 64 KiB.
const CMB_SIZE: u64 = 64 << 10;

/// An admin command with an opcode no command set has.
fn unknown() -> Command {
    Command {
        opcode: 0x7f,
        ..Command::default()
    }
}

fn flush() -> Command {
    Command::from(IoCommand::Flush { nsid: 1 })
}

fn create_cq(qid: u16, entries: u16, base: u64, ien: bool, iv: u16) -> AdminCommand {
    AdminCommand::CreateIoCq(CreateIoCq {
        qid,
        qsize: entries - 1,
        base,
        pc: true,
        ien,
        iv,
    })
}

fn create_sq(qid: u16, entries: u16, base: u64) -> AdminCommand {
    AdminCommand::CreateIoSq(CreateIoSq {
        qid,
        qsize: entries - 1,
        base,
        pc: true,
        qprio: 0,
        cqid: qid,
    })
}

/// A controller like [`testing::config`]'s with `ready_delay` and a memory buffer of
/// `cmb_size` bytes.
fn config_with(ready_delay: SimDuration, cmb_size: u64) -> NvmeConfig {
    NvmeConfig {
        ready_delay,
        cmb_size,
        ..testing::config()
    }
}

/// Sets the admin queue registers to `aqa`, `asq` and `acq`, writes `cc` and settles; CSTS
/// then.
fn try_enable(rig: &mut Rig, aqa: u32, asq: u64, acq: u64, cc: u32) -> u64 {
    rig.set_reg(reg::AQA, u64::from(aqa), 4);
    rig.set_reg(reg::ASQ, asq, 8);
    rig.set_reg(reg::ACQ, acq, 8);
    rig.set_reg(reg::CC, u64::from(cc), 4);
    rig.settle();
    rig.reg(reg::CSTS, 4)
}

/// Every doorbell of the controller's four queue pairs, read back: (SQ tail, CQ head) of
/// each.
fn doorbells(rig: &Rig) -> Vec<(u64, u64)> {
    (0..4)
        .map(|q| {
            (
                rig.reg(doorbell(q, false), 4),
                rig.reg(doorbell(q, true), 4),
            )
        })
        .collect()
}

/// The fetches of I/O submission queue entries since the world's read log had `from`
/// reads, in order: (queue id, first slot, entries).
fn fetches(rig: &Rig, from: usize) -> Vec<(u16, u64, usize)> {
    rig.world.reads()[from..]
        .iter()
        .filter_map(|&(addr, len)| {
            let qid = (1..4).find(|&q| (io_sq(q)..io_sq(q) + 0x10_000).contains(&addr))?;
            let slot = (addr - io_sq(qid)) / SQE_SIZE as u64;
            Some((qid, slot, len / SQE_SIZE))
        })
        .collect()
}

/// One entry of the Error Information log: (error count, SQ id, command id, status field).
type ErrorEntry = (u64, u16, u16, u16);

/// The first `n` entries of the Error Information log page, read with Get Log Page (which
/// unmasks error events).
fn error_log(rig: &mut Rig, n: usize) -> Vec<ErrorEntry> {
    let len = n as u64 * log::ERROR_ENTRY_SIZE as u64;
    let (prp1, prp2) = rig.data_prps(len);
    let page = Command::from(AdminCommand::GetLogPage(GetLogPage {
        nsid: 0xffff_ffff,
        lid: log::ERROR_INFORMATION,
        rae: false,
        numd: (len / 4 - 1) as u32,
        offset: 0,
    }))
    .with_prps(prp1, prp2);
    assert_eq!(rig.admin_status(page), Status::SUCCESS, "Get Log Page");
    let bytes = rig.world.peek(testing::DATA, len as usize);
    bytes
        .chunks_exact(log::ERROR_ENTRY_SIZE)
        .map(|e| {
            let u16_at = |at: usize| u16::from_le_bytes([e[at], e[at + 1]]);
            let count = u64::from_le_bytes(e[..8].try_into().expect("eight bytes"));
            (count, u16_at(8), u16_at(10), u16_at(12))
        })
        .collect()
}

/// The error log entry of the `count`th error, a refused doorbell of queue `qid`.
fn doorbell_error(count: u64, qid: u16) -> ErrorEntry {
    let status = Status::INVALID_QUEUE_ID.with_phase(false);
    (count, qid, 0xffff, status)
}

/// The completion dword 0 of an Error event with `info`.
fn error_event(info: u8) -> u32 {
    async_event::dword0(async_event::TYPE_ERROR, info, log::ERROR_INFORMATION)
}

/// Reads CSTS at each time in `at` (from now) while the controller runs: what it read, in
/// order, once the rig has settled.
fn probe_csts(rig: &Rig, at: &[SimDuration]) -> Rc<RefCell<Vec<u64>>> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    for &after in at {
        let (world, nvme, seen) = (rig.world.clone(), rig.nvme.clone(), seen.clone());
        rig.world.spawn_task(Box::pin(async move {
            world.sleep(after).await;
            let mut b = [0u8; 4];
            nvme.mmio_read(0, reg::CSTS, &mut b).expect("CSTS");
            seen.borrow_mut().push(u64::from(u32::from_le_bytes(b)));
        }));
    }
    seen
}

#[test]
fn doorbells_are_four_bytes_apart_from_0x1000_tail_then_head() {
    assert_eq!(doorbell(0, false), 0x1000);
    assert_eq!(doorbell(0, true), 0x1004);
    assert_eq!(doorbell(1, false), 0x1008);
    assert_eq!(doorbell(3, true), 0x101c);
    assert_eq!(doorbell(255, true), 0x1000 + 511 * 4);
}

#[test]
fn bar0_holds_registers_doorbells_the_msix_table_and_its_pba() {
    assert_eq!(BAR0_SIZE, 0x4000);
    let layout = NvmeController::msix_layout(4);
    assert_eq!(
        (layout.vectors, layout.table_bar, layout.table_offset),
        (4, 0, 0x2000)
    );
    assert_eq!((layout.pba_bar, layout.pba_offset), (0, 0x3000));
    let rig = Rig::new();
    assert_eq!(
        rig.pci.msix_layout(),
        Some(layout),
        "as the function reports"
    );
    assert_eq!(
        format!("{:?}", rig.nvme),
        r#"NvmeController { profile: "test", queue_pairs: 4 }"#
    );
}

/// CAP with MQES 4095, CQR and the NVM command set, and no timeout.
const CAP_FIXED: u64 = 4095 | 1 << 16 | 1 << 37;

#[test]
fn cap_gives_mqes_cqr_nvm_and_the_ready_delay_in_500_ms_units_rounded_up() {
    let ms = |ms: u64| SimDuration::from_us(1000 * ms);
    for (delay, to) in [
        (SimDuration::from_ps(0), 1),
        (READY_DELAY, 1),
        (SimDuration::from_ps(500_000_000_000 - 1), 1),
        (ms(500), 2),
        (ms(1_200), 3),
        (ms(127_000), 255),
        (ms(127_500), 255),
        (ms(300_000), 255),
    ] {
        let rig = Rig::with(config_with(delay, 0));
        assert_eq!(rig.reg(reg::CAP, 8), CAP_FIXED | to << 24, "{delay:?}");
    }
    let rig = Rig::new();
    assert_eq!(rig.reg(reg::CAP, 4), 4095 | 1 << 16 | 1 << 24, "low half");
    assert_eq!(rig.reg(reg::CAP_HI, 4), 1 << 5, "high half: CSS bit 37");
    let rig = Rig::with(config_with(READY_DELAY, CMB_SIZE));
    let cmbs = 1 << 57;
    assert_eq!(rig.reg(reg::CAP, 8), CAP_FIXED | 1 << 24 | cmbs);
    assert_eq!(rig.reg(reg::CAP_HI, 4), (1 << 5) | (1 << 25));
}

#[test]
fn the_memory_buffer_registers_read_zero_without_one() {
    let rig = Rig::new();
    assert_eq!((rig.reg(reg::CMBLOC, 4), rig.reg(reg::CMBSZ, 4)), (0, 0));
    let rig = Rig::with(config_with(READY_DELAY, CMB_SIZE));
    assert_eq!(
        rig.reg(reg::CMBLOC, 4),
        u64::from(CMB_BAR),
        "BIR 2, offset 0"
    );
    assert_eq!(
        rig.reg(reg::CMBSZ, 4),
        1 | (16 << 12),
        "SQS, 16 units of 4 KiB"
    );
    let rig = Rig::with(config_with(READY_DELAY, 1 << 20));
    assert_eq!(rig.reg(reg::CMBSZ, 4), 1 | (256 << 12));
}

#[test]
fn version_interrupt_masks_and_aqa_read_back_as_written() {
    let rig = Rig::new();
    assert_eq!(rig.reg(reg::VS, 4), 0x0001_0400, "NVMe 1.4");
    assert_eq!(rig.reg(reg::INTMS, 4), 0);
    rig.set_reg(reg::INTMS, 0b101, 4);
    assert_eq!((rig.reg(reg::INTMS, 4), rig.reg(reg::INTMC, 4)), (5, 5));
    rig.set_reg(reg::INTMS, 0b010, 4);
    assert_eq!(rig.reg(reg::INTMS, 4), 0b111, "setting adds to the mask");
    rig.set_reg(reg::INTMC, 0b001, 4);
    assert_eq!(
        (rig.reg(reg::INTMS, 4), rig.reg(reg::INTMC, 4)),
        (0b110, 0b110),
        "clearing takes those bits only"
    );
    rig.set_reg(reg::AQA, 0xffff_ffff, 4);
    assert_eq!(rig.reg(reg::AQA, 4), 0x0fff_0fff, "ASQS and ACQS only");
    rig.set_reg(reg::AQA, 0x0123_0456, 4);
    assert_eq!(rig.reg(reg::AQA, 4), 0x0123_0456);
}

#[test]
fn admin_queue_bases_are_written_whole_or_by_halves() {
    let rig = Rig::new();
    for (lo, hi, q) in [
        (reg::ASQ, reg::ASQ_HI, 0x1234_5678_9abc_d000),
        (reg::ACQ, reg::ACQ_HI, 0x0fed_cba9_8765_4000),
    ] {
        rig.set_reg(lo, q, 8);
        assert_eq!(rig.reg(lo, 8), q);
        assert_eq!((rig.reg(lo, 4), rig.reg(hi, 4)), (q & 0xffff_ffff, q >> 32));
        rig.set_reg(lo, 0xaaaa_b000, 4);
        assert_eq!(
            rig.reg(lo, 8),
            (q & !0xffff_ffff) | 0xaaaa_b000,
            "the low half alone"
        );
        rig.set_reg(hi, 0x42, 4);
        assert_eq!(rig.reg(lo, 8), 0x42_aaaa_b000, "the high half alone");
    }
    assert_eq!(rig.reg(reg::ASQ, 8), 0x42_aaaa_b000, "each its own");
}

#[test]
fn reserved_registers_read_zero_and_read_only_ones_refuse_writes() {
    let rig = Rig::new();
    for offset in [0x18, 0x20, 0x38, 0x3c, 0x40, 0xe00, 0xffc] {
        assert_eq!(rig.reg(offset, 4), 0, "{offset:#x}");
    }
    rig.set_reg(reg::CC, u64::from(cc::IOSQES_64), 4);
    rig.set_reg(reg::AQA, 0x000f_000f, 4);
    let cap = rig.reg(reg::CAP, 8);
    for offset in [reg::CAP, reg::CAP_HI, reg::VS, reg::CSTS, reg::CMBLOC, 0x18] {
        let w = rig.nvme.mmio_write(0, offset, &[0xff; 4]);
        assert_eq!(w, Err(CompleterError::ReadOnly), "{offset:#x}");
    }
    assert_eq!(rig.reg(reg::CAP, 8), cap);
    assert_eq!(rig.reg(reg::VS, 4), 0x0001_0400);
    assert_eq!(rig.reg(reg::CSTS, 4), 0);
    assert_eq!(rig.reg(reg::CC, 4), u64::from(cc::IOSQES_64), "CC kept");
    assert_eq!(rig.reg(reg::AQA, 4), 0x000f_000f, "AQA kept");
}

#[test]
fn registers_take_4_or_8_bytes_and_doorbells_multiples_of_4() {
    let rig = Rig::new();
    for width in [1, 2, 3, 16] {
        let mut b = vec![0u8; width];
        let bad = Err(CompleterError::BadWidth(width));
        assert_eq!(rig.nvme.mmio_read(0, reg::CC, &mut b), bad);
        assert_eq!(rig.nvme.mmio_write(0, reg::CC, &b), bad);
        if width % 4 != 0 {
            assert_eq!(rig.nvme.mmio_write(0, doorbell(0, false), &b), bad);
        }
    }
    let mut b = [0u8; 4];
    assert_eq!(
        rig.nvme.mmio_read(0, 0x3008, &mut b),
        Err(CompleterError::OutOfRange),
        "past the pending bits"
    );
    assert_eq!(
        rig.nvme.mmio_read(0, BAR0_SIZE, &mut b),
        Err(CompleterError::OutOfRange)
    );
    assert_eq!(
        rig.nvme.mmio_write(0, 0x3000, &[0; 8]),
        Err(CompleterError::ReadOnly),
        "the pending bits"
    );
    for bar in [1, 2, 3] {
        assert_eq!(
            rig.nvme.mmio_read(bar, 0, &mut b),
            Err(CompleterError::OutOfRange),
            "BAR {bar}"
        );
        assert_eq!(
            rig.nvme.mmio_write(bar, 0, &b),
            Err(CompleterError::OutOfRange)
        );
    }
    assert_eq!(
        rig.nvme.mmio_read(2, 0, &mut []),
        Err(CompleterError::OutOfRange),
        "no memory buffer, not even an empty access"
    );
    assert_eq!(
        rig.nvme.mmio_write(2, 0, &[]),
        Err(CompleterError::OutOfRange)
    );
}

#[test]
fn rdy_follows_cc_en_after_exactly_the_ready_delay_both_ways() {
    let delay = SimDuration::from_us(7);
    let mut rig = Rig::with(config_with(delay, 0));
    rig.set_reg(reg::AQA, u64::from(aqa::new(16, 16)), 4);
    rig.set_reg(reg::ASQ, ASQ, 8);
    rig.set_reg(reg::ACQ, ACQ, 8);
    let start = rig.world.now();
    rig.set_reg(reg::CC, u64::from(CC_ON), 4);
    assert_eq!(rig.reg(reg::CSTS, 4), 0, "not ready at once");
    let seen = probe_csts(&rig, &[SimDuration::from_ps(delay.as_ps() - 1), delay]);
    rig.settle();
    assert_eq!(*seen.borrow(), [0, RDY]);
    assert_eq!(rig.world.now() - start, delay);
    assert_eq!(rig.reg(reg::CSTS, 4), RDY, "nothing else in CSTS");
    assert_eq!(rig.reg(reg::CC, 4), u64::from(CC_ON));

    let start = rig.world.now();
    rig.set_reg(reg::CC, 0, 4);
    assert_eq!(rig.reg(reg::CSTS, 4), RDY, "a reset takes its time");
    let seen = probe_csts(&rig, &[SimDuration::from_ps(delay.as_ps() - 1), delay]);
    rig.settle();
    assert_eq!(*seen.borrow(), [RDY, 0]);
    assert_eq!(rig.world.now() - start, delay);
    assert_eq!(rig.reg(reg::CSTS, 4), 0);
}

#[test]
fn an_enable_fails_with_cfs_for_a_bad_cc_or_admin_queues() {
    const TOP: u64 = 0xffff_ffff_ffff_f000;
    let ok = aqa::new(16, 16);
    let cases = [
        ("as the rig enables", ok, ASQ, ACQ, CC_ON, RDY),
        ("two-entry queues", aqa::new(2, 2), ASQ, ACQ, CC_ON, RDY),
        ("CSS 1", ok, ASQ, ACQ, CC_ON | 1 << 4, CFS),
        ("CSS 4", ok, ASQ, ACQ, CC_ON | 4 << 4, CFS),
        ("MPS 1", ok, ASQ, ACQ, CC_ON | 1 << 7, CFS),
        ("MPS 8", ok, ASQ, ACQ, CC_ON | 8 << 7, CFS),
        ("a one-entry CQ", aqa::new(16, 1), ASQ, ACQ, CC_ON, CFS),
        ("a one-entry SQ", aqa::new(1, 16), ASQ, ACQ, CC_ON, CFS),
        ("ASQ in a page", ok, ASQ + 0x800, ACQ, CC_ON, CFS),
        ("ASQ off by 4", ok, ASQ + 4, ACQ, CC_ON, CFS),
        ("ACQ in a page", ok, ASQ, ACQ + 0x800, CC_ON, CFS),
        ("ACQ off by 4", ok, ASQ, ACQ + 4, CC_ON, CFS),
        (
            "63 SQ entries at the top",
            aqa::new(63, 16),
            TOP,
            ACQ,
            CC_ON,
            RDY,
        ),
        (
            "65 SQ entries at the top",
            aqa::new(65, 16),
            TOP,
            ACQ,
            CC_ON,
            CFS,
        ),
        (
            "255 CQ entries at the top",
            aqa::new(16, 255),
            ASQ,
            TOP,
            CC_ON,
            RDY,
        ),
        (
            "257 CQ entries at the top",
            aqa::new(16, 257),
            ASQ,
            TOP,
            CC_ON,
            CFS,
        ),
    ];
    for (what, aqa, asq, acq, cc, csts) in cases {
        let mut rig = Rig::new();
        assert_eq!(try_enable(&mut rig, aqa, asq, acq, cc), csts, "{what}");
        let fetched = !rig.world.reads().is_empty();
        rig.ring(0, false, 1);
        rig.settle();
        assert_eq!(
            !rig.world.reads().is_empty(),
            csts == RDY,
            "{what}: an admin queue only when ready"
        );
        assert!(!fetched, "{what}");
    }
}

#[test]
fn a_failed_enable_resets_at_once_and_a_good_one_clears_cfs() {
    let mut rig = Rig::new();
    let bad = try_enable(&mut rig, aqa::new(16, 16), ASQ, ACQ, CC_ON | 1 << 4);
    assert_eq!(bad, CFS);
    rig.set_reg(reg::CC, 0, 4);
    assert_eq!(rig.reg(reg::CSTS, 4), 0, "at once: nothing was running");
    let now = rig.world.now();
    rig.settle();
    assert_eq!(rig.world.now(), now, "and nothing to wait for");
    assert_eq!(try_enable(&mut rig, 0, ASQ, ACQ, CC_ON), CFS, "AQA 0");
    // Enabled again with AQA mended, without clearing CC.EN first.
    rig.set_reg(reg::AQA, u64::from(aqa::new(16, 16)), 4);
    rig.enable_with(CC_ON);
    assert_eq!(rig.reg(reg::CSTS, 4), RDY, "CFS cleared");
    assert_eq!(rig.admin_status(unknown()), Status::INVALID_OPCODE);
}

#[test]
fn clearing_cc_en_while_getting_ready_leaves_the_controller_off() {
    let delay = SimDuration::from_us(10);
    let mut rig = Rig::with(config_with(delay, 0));
    rig.set_reg(reg::AQA, u64::from(aqa::new(16, 16)), 4);
    rig.set_reg(reg::ASQ, ASQ, 8);
    rig.set_reg(reg::ACQ, ACQ, 8);
    rig.set_reg(reg::CC, u64::from(CC_ON), 4);
    let (world, nvme) = (rig.world.clone(), rig.nvme.clone());
    rig.world.spawn_task(Box::pin(async move {
        world.sleep(SimDuration::from_us(4)).await;
        nvme.mmio_write(0, reg::CC, &[0; 4]).expect("CC");
    }));
    let seen = probe_csts(&rig, &[delay, SimDuration::from_us(15)]);
    let start = rig.world.now();
    rig.settle();
    assert_eq!(*seen.borrow(), [0, 0], "never ready");
    assert_eq!(
        rig.world.now() - start,
        SimDuration::from_us(15),
        "no reset to wait for after the last probe"
    );
    rig.ring(0, false, 1);
    rig.settle();
    assert!(rig.world.reads().is_empty(), "no admin queue to fetch from");
}

#[test]
fn while_enabled_cc_changes_only_en_and_shn_and_a_shutdown_completes_at_once() {
    let mut rig = Rig::enabled();
    assert_eq!(rig.reg(reg::CSTS, 4), RDY);
    let others = 1 << 4 | 3 << 7 | 7 << 16 | 2 << 20;
    rig.set_reg(reg::CC, u64::from(cc::EN | others), 4);
    rig.settle();
    assert_eq!(
        rig.reg(reg::CC, 4),
        u64::from(CC_ON),
        "CSS, MPS, IOSQES, IOCQES kept"
    );
    assert_eq!(rig.reg(reg::CSTS, 4), RDY, "no shutdown asked");
    let shn = 1 << 14;
    rig.set_reg(reg::CC, u64::from(cc::EN | shn | others), 4);
    assert_eq!(rig.reg(reg::CC, 4), u64::from(CC_ON | shn));
    assert_eq!(
        rig.reg(reg::CSTS, 4),
        RDY | SHST_COMPLETE,
        "shutdown complete"
    );
    rig.settle();
    let abrupt = 2 << 14;
    rig.set_reg(reg::CC, u64::from(cc::EN | abrupt), 4);
    assert_eq!(
        rig.reg(reg::CC, 4),
        u64::from(CC_ON | abrupt),
        "SHN replaced"
    );
    assert_eq!(rig.reg(reg::CSTS, 4), RDY | SHST_COMPLETE);
}

#[test]
fn doorbells_read_back_the_last_pointer_of_queues_that_exist() {
    let mut rig = Rig::new();
    rig.ring(0, false, 3);
    assert_eq!(doorbells(&rig), [(0, 0); 4], "disabled: no queues");
    rig.enable();
    rig.create_pair(1, 8);
    let cq = create_cq(3, 4, io_cq(3), false, 0);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    for _ in 0..3 {
        rig.run(1, flush());
    }
    assert_eq!(
        doorbells(&rig),
        [(3, 3), (3, 3), (0, 0), (0, 0)],
        "admin: 3 commands; queue 1: 3; 2 not created; 3 a CQ alone"
    );
    assert_eq!(rig.reg(doorbell(200, false), 4), 0, "past the queues");
    assert_eq!(rig.reg(0x1ffc, 4), 0, "the last doorbell offset");
    // A store of 8 bytes rings two doorbells: queue 1's CQ head and queue 2's SQ tail.
    rig.create_pair(2, 8);
    let cid = rig.cid();
    rig.post(1, Command { cid, ..flush() });
    rig.kick(1);
    rig.settle();
    let both = 4 | 1 << 32;
    rig.post(
        2,
        Command {
            cid: 0x77,
            ..flush()
        },
    );
    rig.set_reg(doorbell(1, true), both, 8);
    assert_eq!(
        doorbells(&rig)[1..3],
        [(4, 4), (1, 0)],
        "queue 1 head 4, queue 2 tail 1"
    );
    rig.settle();
    let done = rig.reap(2);
    assert_eq!((done.len(), done[0].cid), (1, 0x77));
    rig.set_reg(reg::CC, 0, 4);
    rig.settle();
    assert_eq!(doorbells(&rig), [(0, 0); 4], "a reset deletes every queue");
}

#[test]
fn doorbells_rung_while_disabled_are_ignored_without_an_error() {
    let mut rig = Rig::new();
    rig.ring(0, false, 1);
    rig.ring(0, true, 1);
    rig.ring(3, false, 1);
    rig.settle();
    rig.enable();
    assert_eq!(doorbells(&rig), [(0, 0); 4]);
    let aer = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    assert!(rig.reap(0).is_empty(), "no event: {aer}");
    assert_eq!(error_log(&mut rig, 1), [(0, 0, 0, 0)], "nothing logged");
}

#[test]
fn an_sq_tail_past_the_queue_is_refused_and_reported() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    rig.run(1, flush());
    let from = rig.world.reads().len();
    rig.ring(1, false, 8);
    rig.settle();
    assert_eq!(rig.reg(doorbell(1, false), 4), 1, "the tail stays");
    assert_eq!(fetches(&rig, from), [], "nothing fetched");
    let aer = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    let done = rig.reap(0);
    assert_eq!(
        (done[0].cid, done[0].result),
        (aer, error_event(async_event::INVALID_DOORBELL_VALUE))
    );
    assert_eq!(error_log(&mut rig, 2), [doorbell_error(1, 1), (0, 0, 0, 0)]);
    rig.ring(1, false, 7);
    assert_eq!(rig.reg(doorbell(1, false), 4), 7, "the last slot is a tail");
}

#[test]
fn a_cq_head_past_the_queue_or_freeing_unposted_entries_is_refused_and_reported() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    for _ in 0..5 {
        rig.run(1, flush());
    }
    // Four more: posted in slots 5, 6, 7 and 0, the host's head at 5.
    rig.post_many(1, flush(), 4);
    rig.kick(1);
    rig.settle();
    for (head, why) in [
        (8, "past the queue"),
        (9, "past the queue"),
        (0xffff, "past the queue"),
        (2, "frees slot 1, not posted"),
        (4, "frees slots 1 to 3"),
    ] {
        rig.ring(1, true, head);
        assert_eq!(rig.reg(doorbell(1, true), 4), 5, "head {head}: {why}");
    }
    rig.ring(1, true, 5);
    assert_eq!(rig.reg(doorbell(1, true), 4), 5, "frees nothing: fine");
    let first = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    let second = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    let done: Vec<_> = rig.reap(0).iter().map(|c| (c.cid, c.result)).collect();
    assert_eq!(
        done,
        [(first, error_event(async_event::INVALID_DOORBELL_VALUE))],
        "one error event for five errors: {second} waits"
    );
    let want: Vec<_> = (1..=5).rev().map(|n| doorbell_error(n, 1)).collect();
    assert_eq!(error_log(&mut rig, 5), want);
    let done = rig.reap(1);
    let heads: Vec<u16> = done.iter().map(|c| c.sq_head).collect();
    assert_eq!(heads, [6, 7, 0, 1], "the four, freed by head 1");
    assert_eq!(rig.reg(doorbell(1, true), 4), 1);
}

#[test]
fn a_cq_of_n_entries_holds_n_minus_1_completions_until_the_head_moves() {
    let mut rig = Rig::enabled();
    assert_eq!(
        rig.admin_status(create_cq(1, 4, io_cq(1), false, 0)),
        Status::SUCCESS
    );
    assert_eq!(rig.admin_status(create_sq(1, 8, io_sq(1))), Status::SUCCESS);
    rig.adopt(1, 8, 4);
    let cids = rig.post_many(1, flush(), 4);
    rig.kick(1);
    rig.settle();
    let first = rig.reap(1);
    let got: Vec<(u16, u16)> = first.iter().map(|c| (c.cid, c.sq_head)).collect();
    assert_eq!(
        got,
        [(cids[0], 1), (cids[1], 2), (cids[2], 3)],
        "room for 3"
    );
    rig.settle();
    let last = rig.reap(1);
    assert_eq!(last.len(), 1, "posted once the head moved");
    assert_eq!((last[0].cid, last[0].sq_head), (cids[3], 4));
    let raw = Completion::from_bytes(&rig.world.peek(io_cq(1) + 3 * CQE_SIZE as u64, 16));
    assert_eq!((raw.cid, raw.phase), (cids[3], true), "in the last slot");
}

#[test]
fn completions_carry_the_sq_head_and_flip_the_phase_tag_on_each_wrap() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 4);
    let mut seen = Vec::new();
    for _ in 0..9 {
        let c = rig.run(1, flush());
        seen.push((c.sq_head, c.phase, c.status));
    }
    let ok = Status::SUCCESS;
    assert_eq!(
        seen,
        [
            (1, true, ok),
            (2, true, ok),
            (3, true, ok),
            (0, true, ok),
            (1, false, ok),
            (2, false, ok),
            (3, false, ok),
            (0, false, ok),
            (1, true, ok),
        ]
    );
    let phases: Vec<bool> = (0..4)
        .map(|slot| {
            let at = io_cq(1) + slot * CQE_SIZE as u64;
            Completion::from_bytes(&rig.world.peek(at, CQE_SIZE)).phase
        })
        .collect();
    assert_eq!(phases, [true, false, false, false], "as left in memory");
}

#[test]
fn a_reset_deletes_the_queues_and_drops_what_was_fetched_before_it() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    rig.run(1, flush());
    // An admin command whose fetch is still reading when the controller resets.
    rig.world.hold_reads(ASQ, ASQ + 0x1000);
    let stale = rig.submit(0, unknown());
    rig.settle();
    assert_eq!(rig.reg(doorbell(0, false), 4), 3);
    let start = rig.world.now();
    rig.set_reg(reg::CC, 0, 4);
    rig.settle();
    assert_eq!(rig.world.now() - start, READY_DELAY);
    assert_eq!(rig.reg(reg::CSTS, 4), 0);
    assert_eq!(doorbells(&rig), [(0, 0); 4]);
    rig.enable();
    rig.world.let_go();
    rig.settle();
    assert!(
        rig.reap(0).is_empty(),
        "the fetch from before the reset ({stale}) is dropped"
    );
    let from = rig.world.reads().len();
    let c = rig.admin(unknown());
    assert_eq!((c.status, c.sq_head), (Status::INVALID_OPCODE, 1), "slot 0");
    assert_eq!(rig.world.reads()[from..], [(ASQ, SQE_SIZE)]);
    rig.ring(1, false, 1);
    rig.settle();
    assert_eq!(doorbells(&rig)[1], (0, 0), "queue 1 is gone");
}

#[test]
fn without_bus_mastering_nothing_is_fetched_until_it_is_back_and_rung() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    rig.pci.config_write(pci::COMMAND, &0u16.to_le_bytes());
    let from = rig.world.reads().len();
    let cid = rig.submit(1, flush());
    let admin = rig.submit(0, unknown());
    rig.settle();
    assert_eq!(rig.world.reads().len(), from, "no DMA at all");
    assert!(rig.reap(1).is_empty() && rig.reap(0).is_empty());
    rig.pci
        .config_write(pci::COMMAND, &command::BUS_MASTER.to_le_bytes());
    rig.kick(1);
    rig.settle();
    let done = rig.reap(1);
    assert_eq!((done.len(), done[0].cid), (1, cid));
    let done = rig.reap(0);
    assert_eq!((done.len(), done[0].cid), (1, admin), "every noted queue");
}

#[test]
fn arbitration_visits_the_queues_round_robin_from_the_one_after_the_last() {
    let mut rig = Rig::enabled();
    for q in 1..4 {
        rig.create_pair(q, 4);
    }
    let round = |rig: &mut Rig, queues: &[u16]| -> Vec<u16> {
        let from = rig.world.reads().len();
        for &q in queues {
            rig.post_many(q, flush(), 1);
        }
        for &q in queues {
            rig.kick(q);
        }
        rig.settle();
        for &q in queues {
            assert_eq!(rig.reap(q).len(), 1, "queue {q}");
        }
        fetches(rig, from).iter().map(|f| f.0).collect()
    };
    assert_eq!(
        round(&mut rig, &[3, 2, 1]),
        [1, 2, 3],
        "after the admin queue"
    );
    assert_eq!(round(&mut rig, &[2]), [2]);
    assert_eq!(round(&mut rig, &[1, 2, 3]), [3, 1, 2], "after queue 2");
    assert_eq!(round(&mut rig, &[1]), [1]);
    assert_eq!(round(&mut rig, &[3, 1, 2]), [2, 3, 1], "after queue 1");
}

#[test]
fn a_fetch_takes_the_entries_up_to_the_tail_or_the_queue_end() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    let batch = |rig: &mut Rig, n: usize| -> (Vec<(u16, u64, usize)>, Vec<u16>) {
        let from = rig.world.reads().len();
        let cids = rig.post_many(1, flush(), n);
        rig.kick(1);
        rig.settle();
        let mut done: Vec<_> = rig.reap(1).iter().map(|c| (c.cid, c.sq_head)).collect();
        done.sort_unstable();
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), cids);
        (fetches(rig, from), done.iter().map(|d| d.1).collect())
    };
    assert_eq!(batch(&mut rig, 2), (vec![(1, 0, 2)], vec![1, 2]));
    assert_eq!(batch(&mut rig, 3), (vec![(1, 2, 3)], vec![3, 4, 5]));
    assert_eq!(
        batch(&mut rig, 4),
        (vec![(1, 5, 3), (1, 0, 1)], vec![6, 7, 0, 1]),
        "to the end of the queue, then from its start"
    );
    assert_eq!(
        batch(&mut rig, 7),
        (vec![(1, 1, 7)], vec![2, 3, 4, 5, 6, 7, 0])
    );
}

#[test]
fn a_queue_is_not_fetched_again_while_a_fetch_from_it_is_in_flight() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    rig.world.hold_reads(io_sq(1), io_sq(1) + 0x1000);
    let a = rig.submit(1, flush());
    rig.settle();
    let b = rig.submit(1, flush());
    rig.settle();
    assert_eq!(fetches(&rig, 0), [], "held");
    rig.world.let_go();
    rig.settle();
    assert_eq!(fetches(&rig, 0), [(1, 0, 1), (1, 1, 1)]);
    let done: Vec<_> = rig.reap(1).iter().map(|c| (c.cid, c.sq_head)).collect();
    assert_eq!(done, [(a, 1), (b, 2)]);
}

#[test]
fn fused_commands_and_sgls_complete_with_invalid_field() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    let flags = [
        Flags { fuse: 1, psdt: 0 },
        Flags { fuse: 2, psdt: 0 },
        Flags { fuse: 0, psdt: 1 },
        Flags { fuse: 0, psdt: 2 },
        Flags::default(),
    ];
    for f in flags {
        let cmd = Command {
            cid: 0x40 + u16::from(f.byte()),
            ..flush()
        };
        let slot = rig.post(1, cmd);
        rig.world
            .poke(io_sq(1) + u64::from(slot) * 64, &cmd.encode_with(f));
    }
    rig.kick(1);
    rig.settle();
    let mut done: Vec<_> = rig.reap(1).iter().map(|c| (c.cid, c.status)).collect();
    done.sort_unstable_by_key(|d| d.0);
    let bad = Status::INVALID_FIELD;
    assert_eq!(
        done,
        [
            (0x40, Status::SUCCESS),
            (0x41, bad),
            (0x42, bad),
            (0x80, bad),
            (0xc0, bad)
        ]
    );
    let log = error_log(&mut rig, 5);
    let logged: Vec<_> = log.iter().map(|e| (e.0, e.1, e.3)).collect();
    let field = bad.with_phase(false);
    let want: Vec<_> = (1..=4).rev().map(|n| (n, 1, field)).collect();
    assert_eq!(logged[..4], want, "the four refused, logged");
    assert_eq!(log[4], (0, 0, 0, 0), "the plain one is not");
}

#[test]
fn a_queue_where_memory_is_not_is_a_controller_fatal_status() {
    let mut rig = Rig::enabled();
    let cq = create_cq(1, 4, io_cq(1), false, 0);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    let sq = create_sq(1, 4, MEMORY_END);
    assert_eq!(rig.admin_status(sq), Status::SUCCESS);
    rig.ring(1, false, 1);
    rig.settle();
    assert_eq!(
        rig.reg(reg::CSTS, 4),
        RDY | CFS,
        "an SQ that cannot be read"
    );
    assert_eq!(rig.world.reads().last(), Some(&(MEMORY_END, SQE_SIZE)));

    let mut rig = Rig::enabled();
    let cq = create_cq(1, 4, MEMORY_END, false, 0);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    assert_eq!(rig.admin_status(create_sq(1, 4, io_sq(1))), Status::SUCCESS);
    rig.adopt(1, 4, 4);
    let writes = rig.world.writes().len();
    rig.submit(1, flush());
    rig.settle();
    assert_eq!(
        rig.reg(reg::CSTS, 4),
        RDY | CFS,
        "a CQ that cannot be written"
    );
    assert_eq!(rig.world.writes().len(), writes, "nothing written");
}

/// Reads `width` bytes of BAR0 at `offset` (the MSI-X table or its pending bits).
fn bar0(rig: &Rig, offset: u64, width: usize) -> u64 {
    let mut b = [0u8; 8];
    rig.nvme
        .mmio_read(0, offset, &mut b[..width])
        .expect("a BAR0 read");
    u64::from_le_bytes(b)
}

#[test]
fn a_masked_vector_holds_its_message_pending_until_unmasked() {
    let mut rig = Rig::enabled();
    let (address, data) = (0xfee0_1000u64, 0x51u32);
    rig.enable_vector(1, address, data);
    assert_eq!(bar0(&rig, 0x2010, 8), address, "the table through BAR0");
    assert_eq!((bar0(&rig, 0x2018, 4), bar0(&rig, 0x201c, 4)), (0x51, 0));
    assert_eq!(bar0(&rig, 0x200c, 4), 1, "vector 0 masked since reset");
    let control = 0x2000 + 16 + 12;
    rig.nvme
        .mmio_write(0, control, &1u32.to_le_bytes())
        .expect("mask vector 1");
    assert_eq!(bar0(&rig, control, 4), 1);
    let cq = create_cq(1, 4, io_cq(1), true, 1);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    assert_eq!(rig.admin_status(create_sq(1, 4, io_sq(1))), Status::SUCCESS);
    rig.adopt(1, 4, 4);
    assert_eq!(bar0(&rig, 0x3000, 8), 0b01, "admin completions: vector 0");
    assert_eq!(rig.run(1, flush()).status, Status::SUCCESS);
    let messages = |rig: &Rig| {
        let w = rig.world.writes();
        w.into_iter().filter(|(a, _)| *a == address).count()
    };
    assert_eq!(messages(&rig), 0, "masked");
    assert_eq!(bar0(&rig, 0x3000, 4), 0b11, "pending");
    rig.nvme
        .mmio_write(0, control, &0u32.to_le_bytes())
        .expect("unmask vector 1");
    rig.settle();
    let last = rig.world.writes().pop().expect("a write");
    assert_eq!(
        last,
        (address, data.to_le_bytes().to_vec()),
        "sent on unmask"
    );
    assert_eq!(messages(&rig), 1);
    assert_eq!(bar0(&rig, 0x3000, 4), 0b01, "no longer pending");
    assert_eq!(rig.run(1, flush()).status, Status::SUCCESS);
    assert_eq!(messages(&rig), 2, "unmasked: sent at once");
}

/// A controller with a 64 KiB memory buffer, enabled.
fn with_cmb() -> Rig {
    let mut rig = Rig::with(config_with(READY_DELAY, CMB_SIZE));
    rig.enable();
    assert_eq!(
        rig.pci.bar_base(CMB_BAR),
        Some(CMB),
        "BAR 2 where the rig put it"
    );
    rig
}

#[test]
fn the_memory_buffer_is_byte_addressable_through_bar_2_up_to_its_size() {
    let rig = with_cmb();
    let nvme = &rig.nvme;
    nvme.mmio_write(2, 0x10, &[1, 2, 3]).expect("a write");
    nvme.mmio_write(2, CMB_SIZE - 4, &[9; 4])
        .expect("the last dword");
    let mut b = [0u8; 5];
    nvme.mmio_read(2, 0xf, &mut b).expect("a read");
    assert_eq!(b, [0, 1, 2, 3, 0]);
    let mut b = [0u8; 4];
    nvme.mmio_read(2, CMB_SIZE - 4, &mut b)
        .expect("the last dword");
    assert_eq!(b, [9; 4]);
    let past = Err(CompleterError::OutOfRange);
    assert_eq!(nvme.mmio_read(2, CMB_SIZE - 2, &mut b), past);
    assert_eq!(nvme.mmio_write(2, CMB_SIZE - 2, &b), past);
    assert_eq!(nvme.mmio_read(2, CMB_SIZE, &mut b), past, "just past it");
    assert_eq!(nvme.mmio_write(2, CMB_SIZE, &b), past);
    assert_eq!(nvme.mmio_read(1, 0, &mut b), past, "BAR 1");
    assert!(rig.world.writes().iter().all(|(a, _)| *a < MEMORY_END));
}

#[test]
fn an_sq_in_the_memory_buffer_is_fetched_without_dma() {
    let mut rig = with_cmb();
    let cq = create_cq(1, 8, io_cq(1), false, 0);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    let sq = create_sq(1, 8, CMB + 0x1000);
    assert_eq!(rig.admin_status(sq), Status::SUCCESS);
    rig.adopt(1, 8, 8);
    for (slot, cid) in [(0u64, 0x31u16), (1, 0x32)] {
        let cmd = Command { cid, ..flush() };
        rig.nvme
            .mmio_write(2, 0x1000 + slot * 64, &cmd.to_bytes())
            .expect("an entry in the buffer");
    }
    let from = rig.world.reads().len();
    rig.ring(1, false, 2);
    rig.settle();
    let done: Vec<_> = rig.reap(1).iter().map(|c| (c.cid, c.status)).collect();
    assert_eq!(done, [(0x31, Status::SUCCESS), (0x32, Status::SUCCESS)]);
    assert_eq!(rig.world.reads()[from..], [], "no DMA read");
    assert_eq!(rig.reg(reg::CSTS, 4), RDY);
    // The admin queue in host memory is still read by DMA.
    let from = rig.world.reads().len();
    assert_eq!(rig.admin_status(unknown()), Status::INVALID_OPCODE);
    assert_eq!(rig.world.reads()[from..], [(ASQ + 2 * 64, SQE_SIZE)]);
}

#[test]
fn entries_past_the_end_of_the_memory_buffer_are_read_by_dma() {
    let mut rig = with_cmb();
    let cq = create_cq(1, 128, io_cq(1), false, 0);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    // 128 entries (8 KiB) from the buffer's last page: slots 0 to 63 are in it.
    let offset = CMB_SIZE - 0x1000;
    let base = CMB + offset;
    assert_eq!(rig.admin_status(create_sq(1, 128, base)), Status::SUCCESS);
    rig.adopt(1, 128, 128);
    for slot in 0..64 {
        let cmd = Command {
            cid: 0x100 + slot,
            ..flush()
        };
        let at = offset + u64::from(slot) * 64;
        rig.nvme
            .mmio_write(2, at, &cmd.to_bytes())
            .expect("an entry");
    }
    let from = rig.world.reads().len();
    rig.ring(1, false, 64);
    rig.settle();
    assert_eq!(
        rig.reap(1).len(),
        64,
        "the last fetch ends at the buffer's end"
    );
    assert_eq!(rig.world.reads()[from..], []);
    rig.ring(1, false, 66);
    rig.settle();
    assert_eq!(rig.world.reads()[from..], [(CMB + CMB_SIZE, 2 * SQE_SIZE)]);
    assert_eq!(rig.reg(reg::CSTS, 4), RDY | CFS, "where nothing answers");
}

#[test]
fn refused_doorbells_keep_the_newest_64_log_entries_and_one_waiting_event() {
    let mut rig = Rig::enabled();
    for _ in 0..65 {
        rig.ring(3, false, 1);
    }
    let first = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    let second = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    let done: Vec<_> = rig.reap(0).iter().map(|c| (c.cid, c.result)).collect();
    let event = error_event(async_event::INVALID_DOORBELL_REGISTER);
    assert_eq!(
        done,
        [(first, event)],
        "one event waited, {second} waits on"
    );
    let want: Vec<_> = (2..=65).rev().map(|n| doorbell_error(n, 3)).collect();
    assert_eq!(error_log(&mut rig, 64), want);
    rig.ring(3, true, 1);
    rig.settle();
    let done: Vec<_> = rig.reap(0).iter().map(|c| (c.cid, c.result)).collect();
    assert_eq!(done, [(second, event)], "unmasked by reading the log");
    assert_eq!(error_log(&mut rig, 1), [doorbell_error(66, 3)]);
}
