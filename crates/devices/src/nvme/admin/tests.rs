//! The admin command set on a controller driven through its BAR and queues
//! ([`crate::nvme::testing::Rig`]): what each command answers, writes and changes.

use crate::nvme::spec::admin::{
    Abort, AdminCommand, CreateIoCq, CreateIoSq, DeleteQueue, GetFeatures, GetLogPage, Identify,
    SetFeatures,
};
use crate::nvme::spec::io::{BlockRange, IoCommand};
use crate::nvme::spec::{async_event, cns, feature, log, Command, Status};
use crate::nvme::testing::{self, io_cq, io_sq, Rig, DATA, READ_LATENCY};
use crate::testing::MEMORY_END;

const PAGE: usize = 4096;

fn identify(nsid: u32, cns: u8) -> Command {
    Command::from(AdminCommand::Identify(Identify { nsid, cns })).with_prps(DATA, 0)
}

fn create_cq(qid: u16, qsize: u16, base: u64) -> CreateIoCq {
    CreateIoCq {
        qid,
        qsize,
        base,
        pc: true,
        ien: false,
        iv: 0,
    }
}

fn create_sq(qid: u16, qsize: u16, base: u64, cqid: u16) -> CreateIoSq {
    CreateIoSq {
        qid,
        qsize,
        base,
        pc: true,
        qprio: 0,
        cqid,
    }
}

fn delete_sq(qid: u16) -> AdminCommand {
    AdminCommand::DeleteIoSq(DeleteQueue { qid })
}

fn delete_cq(qid: u16) -> AdminCommand {
    AdminCommand::DeleteIoCq(DeleteQueue { qid })
}

fn set_feature(fid: u8, value: u32) -> AdminCommand {
    AdminCommand::SetFeatures(SetFeatures {
        fid,
        save: false,
        value,
    })
}

fn get_feature(fid: u8) -> AdminCommand {
    AdminCommand::GetFeatures(GetFeatures { fid, sel: 0 })
}

/// Get Log Page of `len` bytes (a multiple of 4) from `offset`, into [`DATA`].
fn get_log(rig: &Rig, lid: u8, rae: bool, len: u64, offset: u64) -> Command {
    let (prp1, prp2) = rig.data_prps(len);
    Command::from(AdminCommand::GetLogPage(GetLogPage {
        nsid: 0xffff_ffff,
        lid,
        rae,
        numd: (len / 4 - 1) as u32,
        offset,
    }))
    .with_prps(prp1, prp2)
}

fn abort(sqid: u16, cid: u16) -> AdminCommand {
    AdminCommand::Abort(Abort { sqid, cid })
}

fn flush() -> Command {
    Command::from(IoCommand::Flush { nsid: 1 })
}

/// A Write of `blocks` 512-byte blocks at `slba` of namespace 1, its data at [`DATA`].
fn write(rig: &Rig, slba: u64, blocks: u32) -> Command {
    let (prp1, prp2) = rig.data_prps(u64::from(blocks) * 512);
    Command::from(IoCommand::Write(BlockRange::new(1, slba, blocks))).with_prps(prp1, prp2)
}

/// A Read of `blocks` 512-byte blocks at `slba` of namespace 1, into [`DATA`].
fn read(rig: &Rig, slba: u64, blocks: u32) -> Command {
    let (prp1, prp2) = rig.data_prps(u64::from(blocks) * 512);
    Command::from(IoCommand::Read(BlockRange::new(1, slba, blocks))).with_prps(prp1, prp2)
}

fn put(page: &mut [u8], at: usize, bytes: &[u8]) {
    page[at..at + bytes.len()].copy_from_slice(bytes);
}

/// `text` padded with spaces to `width` (an Identify string field).
fn field(text: &str, width: usize) -> Vec<u8> {
    let mut f = vec![b' '; width];
    let n = text.len().min(width);
    f[..n].copy_from_slice(&text.as_bytes()[..n]);
    f
}

fn dwords_at(rig: &Rig, addr: u64, n: usize) -> Vec<u32> {
    rig.world
        .peek(addr, 4 * n)
        .chunks_exact(4)
        .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
        .collect()
}

#[test]
fn an_unknown_opcode_is_an_invalid_opcode_with_dword_0_clear() {
    let mut rig = Rig::enabled();
    let c = rig.admin(Command {
        opcode: 0x7f,
        ..Command::default()
    });
    assert_eq!((c.status, c.result), (Status::INVALID_OPCODE, 0));
}

#[test]
fn identify_controller_fills_the_page_field_by_field_and_nothing_else() {
    let mut rig = Rig::enabled();
    rig.world.poke(DATA, &[0xaa; PAGE]);
    let c = rig.admin(identify(0, cns::CONTROLLER));
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    let mut want = vec![0u8; PAGE];
    put(&mut want, 0, &0x1b36u16.to_le_bytes()); // VID
    put(&mut want, 2, &0x1b36u16.to_le_bytes()); // SSVID
    put(&mut want, 4, &field("SN-TEST-0001", 20));
    put(&mut want, 24, &field("smartio emulated NVMe (test)", 40));
    put(&mut want, 64, &field("1.0", 8));
    want[77] = 5; // MDTS: 2^5 pages
    put(&mut want, 78, &1u16.to_le_bytes()); // CNTLID
    put(&mut want, 80, &0x0001_0400u32.to_le_bytes()); // VER 1.4
    want[258] = 3; // ACL
    want[259] = 3; // AERL: four requests
    want[262] = 63; // ELPE: 64 entries
    want[512] = 0x66; // SQES
    want[513] = 0x44; // CQES
    put(&mut want, 514, &4096u16.to_le_bytes()); // MAXCMD
    put(&mut want, 516, &2u32.to_le_bytes()); // NN
    put(&mut want, 520, &0x000cu16.to_le_bytes()); // ONCS: Write Zeroes, DSM
    assert_eq!(rig.world.peek(DATA, PAGE), want);
}

#[test]
fn identify_cuts_a_long_serial_to_its_field() {
    let mut config = testing::config();
    config.serial = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".into();
    let mut rig = Rig::with(config);
    rig.enable();
    assert_eq!(
        rig.admin_status(identify(0, cns::CONTROLLER)),
        Status::SUCCESS
    );
    assert_eq!(rig.world.peek(DATA + 4, 20), b"ABCDEFGHIJKLMNOPQRST");
    assert_eq!(
        rig.world.peek(DATA + 24, 8),
        b"smartio ",
        "the model follows"
    );
}

/// The Identify Namespace page of a namespace of `blocks` blocks of `2^lbads` bytes.
fn namespace_page(blocks: u64, lbads: u32) -> Vec<u8> {
    let mut want = vec![0u8; PAGE];
    for at in [0, 8, 16] {
        put(&mut want, at, &blocks.to_le_bytes()); // NSZE, NCAP, NUSE
    }
    want[33] = 1; // DLFEAT: deallocated blocks read as zeroes
    put(&mut want, 128, &(lbads << 16).to_le_bytes()); // LBAF0
    want
}

#[test]
fn identify_namespace_gives_its_size_and_block_format_after_a_media_read() {
    let mut rig = Rig::enabled();
    for nsid in [1, 2] {
        rig.world.poke(DATA, &[0xaa; PAGE]);
        let before = rig.world.now();
        let c = rig.admin(identify(nsid, cns::NAMESPACE));
        assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
        assert_eq!(rig.world.now() - before, READ_LATENCY, "a small media read");
        assert_eq!(
            rig.world.peek(DATA, PAGE),
            namespace_page(128, 9),
            "ns {nsid}"
        );
    }
    let mut config = testing::config();
    config.lba_size = 4096;
    let mut rig = Rig::with(config);
    rig.enable();
    assert_eq!(
        rig.admin_status(identify(1, cns::NAMESPACE)),
        Status::SUCCESS
    );
    assert_eq!(rig.world.peek(DATA, PAGE), namespace_page(16, 12));
}

#[test]
fn identify_namespace_refuses_ids_outside_the_namespaces_and_writes_nothing() {
    let mut rig = Rig::enabled();
    for nsid in [0, 3, 0xffff_ffff] {
        let c = rig.admin(identify(nsid, cns::NAMESPACE));
        assert_eq!(
            (c.status, c.result),
            (Status::INVALID_NAMESPACE, 0),
            "{nsid}"
        );
    }
    assert!(
        rig.world.writes().iter().all(|(a, _)| *a < DATA),
        "no data written"
    );
}

#[test]
fn the_active_namespace_list_starts_after_the_given_id() {
    let mut rig = Rig::enabled();
    for (nsid, ids) in [
        (0, vec![1, 2]),
        (1, vec![2]),
        (2, vec![]),
        (0xffff_fffd, vec![]),
    ] {
        rig.world.poke(DATA, &[0xaa; PAGE]);
        assert_eq!(
            rig.admin_status(identify(nsid, cns::ACTIVE_NAMESPACES)),
            Status::SUCCESS
        );
        let mut want = ids.clone();
        want.resize(PAGE / 4, 0);
        assert_eq!(dwords_at(&rig, DATA, PAGE / 4), want, "after {nsid}");
    }
    for nsid in [0xffff_fffe, 0xffff_ffff] {
        assert_eq!(
            rig.admin_status(identify(nsid, cns::ACTIVE_NAMESPACES)),
            Status::INVALID_NAMESPACE
        );
    }
}

#[test]
fn the_active_namespace_list_holds_at_most_1024_ids() {
    let mut config = testing::config();
    config.namespaces = 1030;
    config.capacity = 4096;
    let mut rig = Rig::with(config);
    rig.enable();
    assert_eq!(
        rig.admin_status(identify(0, cns::ACTIVE_NAMESPACES)),
        Status::SUCCESS
    );
    let want: Vec<u32> = (1..=1024).collect();
    assert_eq!(dwords_at(&rig, DATA, 1024), want);
    assert_eq!(
        rig.admin_status(identify(1024, cns::ACTIVE_NAMESPACES)),
        Status::SUCCESS
    );
    assert_eq!(
        dwords_at(&rig, DATA, 7),
        [1025, 1026, 1027, 1028, 1029, 1030, 0]
    );
}

#[test]
fn an_unknown_identify_structure_is_an_invalid_field() {
    let mut rig = Rig::enabled();
    for c in [0x03, 0x10, 0xff] {
        assert_eq!(
            rig.admin_status(identify(1, c)),
            Status::INVALID_FIELD,
            "CNS {c}"
        );
    }
}

#[test]
fn identify_data_follows_prp2_across_a_page_boundary() {
    let mut rig = Rig::enabled();
    assert_eq!(
        rig.admin_status(identify(0, cns::CONTROLLER)),
        Status::SUCCESS
    );
    let whole = rig.world.peek(DATA, PAGE);
    rig.world.poke(DATA, &[0; 4 * PAGE]);
    let split = identify(0, cns::CONTROLLER).with_prps(DATA + 0x800, DATA + 0x3000);
    assert_eq!(rig.admin_status(split), Status::SUCCESS);
    assert_eq!(rig.world.peek(DATA + 0x800, 0x800), whole[..0x800]);
    assert_eq!(rig.world.peek(DATA + 0x3000, 0x800), whole[0x800..]);
    assert_eq!(rig.world.peek(DATA + 0x1000, 0x2000), vec![0; 0x2000]);
    assert_eq!(rig.world.peek(DATA + 0x3800, 0x800), vec![0; 0x800]);
}

#[test]
fn identify_into_memory_that_is_not_there_is_a_data_transfer_error() {
    let mut rig = Rig::enabled();
    let c = identify(0, cns::CONTROLLER).with_prps(MEMORY_END, 0);
    assert_eq!(rig.admin_status(c), Status::DATA_TRANSFER_ERROR);
}

#[test]
fn creating_a_queue_checks_its_id_size_contiguity_alignment_and_end() {
    let mut rig = Rig::enabled();
    let top = 0xffff_ffff_ffff_f000;
    let refused = [
        (create_cq(0, 3, io_cq(1)), Status::INVALID_QUEUE_ID),
        (create_cq(4, 3, io_cq(1)), Status::INVALID_QUEUE_ID),
        (create_cq(1, 0, io_cq(1)), Status::INVALID_QUEUE_SIZE),
        (create_cq(1, 4096, io_cq(1)), Status::INVALID_QUEUE_SIZE),
        (
            CreateIoCq {
                pc: false,
                ..create_cq(1, 3, io_cq(1))
            },
            Status::INVALID_FIELD,
        ),
        (create_cq(1, 3, io_cq(1) + 16), Status::INVALID_FIELD),
        (create_cq(1, 63, top), Status::INVALID_FIELD),
    ];
    for (q, status) in refused {
        assert_eq!(
            rig.admin_status(AdminCommand::CreateIoCq(q)),
            status,
            "{q:?}"
        );
    }
    for q in [
        create_cq(3, 62, top),
        create_cq(2, 4095, io_cq(2)),
        create_cq(1, 1, io_cq(1)),
    ] {
        let c = rig.admin(AdminCommand::CreateIoCq(q));
        assert_eq!((c.status, c.result), (Status::SUCCESS, 0), "{q:?}");
    }
    let refused = [
        (create_sq(0, 3, io_sq(1), 1), Status::INVALID_QUEUE_ID),
        (create_sq(4, 3, io_sq(1), 1), Status::INVALID_QUEUE_ID),
        (create_sq(1, 0, io_sq(1), 1), Status::INVALID_QUEUE_SIZE),
        (create_sq(1, 4096, io_sq(1), 1), Status::INVALID_QUEUE_SIZE),
        (
            CreateIoSq {
                pc: false,
                ..create_sq(1, 3, io_sq(1), 1)
            },
            Status::INVALID_FIELD,
        ),
        (create_sq(1, 3, io_sq(1) + 64, 1), Status::INVALID_FIELD),
        (create_sq(1, 63, top, 1), Status::INVALID_FIELD),
    ];
    for (q, status) in refused {
        assert_eq!(
            rig.admin_status(AdminCommand::CreateIoSq(q)),
            status,
            "{q:?}"
        );
    }
    for q in [
        create_sq(3, 62, top, 3),
        create_sq(2, 4095, io_sq(2), 2),
        create_sq(1, 1, io_sq(1), 1),
    ] {
        let c = rig.admin(AdminCommand::CreateIoSq(q));
        assert_eq!((c.status, c.result), (Status::SUCCESS, 0), "{q:?}");
    }
}

#[test]
fn a_queue_holds_qsize_plus_one_entries() {
    use crate::nvme::controller::doorbell;
    let mut rig = Rig::enabled();
    rig.create_pair(1, 4);
    rig.post_many(1, flush(), 3);
    rig.kick(1);
    assert_eq!(rig.reg(doorbell(1, false), 4), 3, "the last slot");
    rig.settle();
    assert_eq!(rig.reap(1).len(), 3);
    rig.ring(1, false, 4);
    assert_eq!(
        rig.reg(doorbell(1, false), 4),
        3,
        "a tail past the queue is ignored"
    );
    // Six more go round the queues of four entries, the host's and the controller's
    // views of where each is agreeing.
    for i in 0..6 {
        let c = rig.run(1, flush());
        assert_eq!(c.status, Status::SUCCESS, "flush {i}");
        assert_eq!(c.sq_head, (3 + i + 1) % 4, "flush {i}");
    }
}

#[test]
fn create_cq_refuses_an_existing_id_and_a_vector_past_the_table() {
    let mut rig = Rig::enabled();
    let cq = |qid, ien, iv| {
        AdminCommand::CreateIoCq(CreateIoCq {
            ien,
            iv,
            ..create_cq(qid, 3, io_cq(qid))
        })
    };
    assert_eq!(
        rig.admin_status(cq(1, true, 4)),
        Status::INVALID_INTERRUPT_VECTOR
    );
    assert_eq!(rig.admin_status(cq(1, true, 3)), Status::SUCCESS);
    assert_eq!(rig.admin_status(cq(1, false, 0)), Status::INVALID_QUEUE_ID);
    assert_eq!(
        rig.admin_status(cq(2, false, 100)),
        Status::SUCCESS,
        "no interrupts"
    );
}

#[test]
fn io_queues_need_the_entry_sizes_set_in_cc() {
    use crate::nvme::spec::cc;
    let mut rig = Rig::new();
    rig.set_reg(crate::nvme::spec::reg::AQA, 0x000f_000f, 4);
    rig.set_reg(crate::nvme::spec::reg::ASQ, testing::ASQ, 8);
    rig.set_reg(crate::nvme::spec::reg::ACQ, testing::ACQ, 8);
    rig.enable_with(cc::EN | cc::IOSQES_64);
    let cq = AdminCommand::CreateIoCq(create_cq(1, 3, io_cq(1)));
    assert_eq!(rig.admin_status(cq), Status::INVALID_QUEUE_SIZE);
    let mut rig = Rig::new();
    rig.set_reg(crate::nvme::spec::reg::AQA, 0x000f_000f, 4);
    rig.set_reg(crate::nvme::spec::reg::ASQ, testing::ASQ, 8);
    rig.set_reg(crate::nvme::spec::reg::ACQ, testing::ACQ, 8);
    rig.enable_with(cc::EN | cc::IOCQES_16);
    assert_eq!(rig.admin_status(cq), Status::SUCCESS);
    let sq = AdminCommand::CreateIoSq(create_sq(1, 3, io_sq(1), 1));
    assert_eq!(rig.admin_status(sq), Status::INVALID_QUEUE_SIZE);
}

#[test]
fn create_sq_refuses_an_existing_id_and_a_completion_queue_that_is_not_there() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 4);
    let sq = |qid, cqid| AdminCommand::CreateIoSq(create_sq(qid, 3, io_sq(qid), cqid));
    assert_eq!(rig.admin_status(sq(1, 1)), Status::INVALID_QUEUE_ID);
    for cqid in [0, 2, 200] {
        assert_eq!(
            rig.admin_status(sq(2, cqid)),
            Status::COMPLETION_QUEUE_INVALID,
            "CQ {cqid}"
        );
    }
    assert_eq!(
        rig.admin_status(sq(2, 1)),
        Status::SUCCESS,
        "two SQs may share a CQ"
    );
}

#[test]
fn completions_signal_the_queues_vector_only_when_it_has_interrupts() {
    let mut rig = Rig::enabled();
    rig.enable_vector(2, 0xfee0_2000, 0x42);
    rig.enable_vector(3, 0xfee0_3000, 0x43);
    let cq = |qid, ien, iv| {
        AdminCommand::CreateIoCq(CreateIoCq {
            ien,
            iv,
            ..create_cq(qid, 3, io_cq(qid))
        })
    };
    assert_eq!(rig.admin_status(cq(1, true, 2)), Status::SUCCESS);
    assert_eq!(rig.admin_status(cq(2, false, 3)), Status::SUCCESS);
    for q in [1, 2] {
        let sq = AdminCommand::CreateIoSq(create_sq(q, 3, io_sq(q), q));
        assert_eq!(rig.admin_status(sq), Status::SUCCESS);
        rig.adopt(q, 4, 4);
    }
    let messages = |rig: &Rig| -> Vec<(u64, Vec<u8>)> {
        let writes = rig.world.writes();
        let vectors = [0xfee0_2000, 0xfee0_3000];
        writes
            .into_iter()
            .filter(|(a, _)| vectors.contains(a))
            .collect()
    };
    assert_eq!(rig.run(1, flush()).status, Status::SUCCESS);
    assert_eq!(
        messages(&rig),
        [(0xfee0_2000, 0x42u32.to_le_bytes().to_vec())]
    );
    assert_eq!(rig.run(2, flush()).status, Status::SUCCESS);
    assert_eq!(messages(&rig).len(), 1, "queue 2 has interrupts off");
}

#[test]
fn deleting_queues_checks_ids_and_the_order_sq_before_cq() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 4);
    for qid in [0, 2, 200] {
        assert_eq!(rig.admin_status(delete_sq(qid)), Status::INVALID_QUEUE_ID);
        assert_eq!(rig.admin_status(delete_cq(qid)), Status::INVALID_QUEUE_ID);
    }
    assert_eq!(
        rig.admin_status(delete_cq(1)),
        Status::INVALID_QUEUE_DELETION
    );
    let c = rig.admin(delete_sq(1));
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(
        rig.admin_status(delete_sq(1)),
        Status::INVALID_QUEUE_ID,
        "gone"
    );
    let c = rig.admin(delete_cq(1));
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(
        rig.admin_status(delete_cq(1)),
        Status::INVALID_QUEUE_ID,
        "gone"
    );
    let sq = AdminCommand::CreateIoSq(create_sq(1, 3, io_sq(1), 1));
    assert_eq!(rig.admin_status(sq), Status::COMPLETION_QUEUE_INVALID);
    rig.forget(1);
    rig.create_pair(1, 4);
    assert_eq!(rig.run(1, flush()).status, Status::SUCCESS, "made again");
}

#[test]
fn deleting_an_sq_aborts_what_it_still_holds_and_completes_after_what_runs() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    // A Write whose data the controller is reading, then two Flushes being fetched.
    rig.world.hold_reads(DATA, DATA + 512);
    let w = write(&rig, 0, 1);
    let a = rig.submit(1, w);
    rig.settle();
    rig.world.hold_reads(io_sq(1), io_sq(1) + 0x1000);
    let b = rig.submit(1, flush());
    let c = rig.submit(1, flush());
    rig.settle();
    let del = rig.submit(0, delete_sq(1).into());
    rig.settle();
    assert!(
        rig.reap(0).is_empty(),
        "the deletion waits for the queue's commands"
    );
    // Meanwhile the queue is neither there nor gone.
    assert_eq!(
        rig.admin_status(delete_cq(1)),
        Status::INVALID_QUEUE_DELETION
    );
    let sq = AdminCommand::CreateIoSq(create_sq(1, 7, io_sq(1), 1));
    assert_eq!(rig.admin_status(sq), Status::INVALID_QUEUE_ID);
    rig.world.let_go();
    rig.settle();
    let done: Vec<_> = rig
        .reap(1)
        .iter()
        .map(|c| (c.cid, c.status, c.sq_head))
        .collect();
    assert_eq!(
        done,
        [
            (b, Status::ABORTED_SQ_DELETION, 2),
            (c, Status::ABORTED_SQ_DELETION, 3),
            (a, Status::SUCCESS, 1),
        ]
    );
    let deleted = rig.reap(0);
    assert_eq!(deleted.len(), 1);
    assert_eq!((deleted[0].cid, deleted[0].status), (del, Status::SUCCESS));
    let writes = rig.world.writes();
    let at = |addr: u64| writes.iter().position(|(a, _)| *a == addr);
    let deletion_posted = at(testing::ACQ + 16 * 4).expect("the deletion's completion");
    let write_posted = at(io_cq(1) + 16 * 2).expect("the write's completion");
    assert!(write_posted < deletion_posted);
    assert_eq!(rig.admin_status(delete_cq(1)), Status::SUCCESS);
    rig.forget(1);
    rig.create_pair(1, 8);
    assert_eq!(
        rig.run(1, flush()).status,
        Status::SUCCESS,
        "the id is free again"
    );
}

#[test]
fn number_of_queues_grants_what_was_asked_up_to_what_the_controller_has() {
    let mut rig = Rig::enabled();
    let c = rig.admin(get_feature(feature::NUMBER_OF_QUEUES));
    assert_eq!(
        (c.status, c.result),
        (Status::SUCCESS, feature::queues(2, 2))
    );
    for bad in [feature::queues(0xffff, 0), feature::queues(0, 0xffff)] {
        let s = rig.admin_status(set_feature(feature::NUMBER_OF_QUEUES, bad));
        assert_eq!(s, Status::INVALID_FIELD);
    }
    let c = rig.admin(set_feature(
        feature::NUMBER_OF_QUEUES,
        feature::queues(0, 1),
    ));
    assert_eq!(
        (c.status, c.result),
        (Status::SUCCESS, feature::queues(0, 1))
    );
    let c = rig.admin(get_feature(feature::NUMBER_OF_QUEUES));
    assert_eq!(c.result, feature::queues(0, 1));
    let cq = |qid| AdminCommand::CreateIoCq(create_cq(qid, 3, io_cq(qid)));
    let sq = |qid| AdminCommand::CreateIoSq(create_sq(qid, 3, io_sq(qid), qid));
    assert_eq!(rig.admin_status(cq(3)), Status::INVALID_QUEUE_ID);
    assert_eq!(rig.admin_status(cq(2)), Status::SUCCESS);
    assert_eq!(rig.admin_status(sq(2)), Status::INVALID_QUEUE_ID);
    assert_eq!(rig.admin_status(cq(1)), Status::SUCCESS);
    assert_eq!(rig.admin_status(sq(1)), Status::SUCCESS);
    let again = set_feature(feature::NUMBER_OF_QUEUES, feature::queues(2, 2));
    assert_eq!(rig.admin_status(again), Status::COMMAND_SEQUENCE_ERROR);

    let mut rig = Rig::enabled();
    let c = rig.admin(set_feature(
        feature::NUMBER_OF_QUEUES,
        feature::queues(9, 1),
    ));
    assert_eq!(
        c.result,
        feature::queues(2, 1),
        "capped at the three I/O pairs"
    );
    let c = rig.admin(set_feature(
        feature::NUMBER_OF_QUEUES,
        feature::queues(1, 0xfffe),
    ));
    assert_eq!(
        c.result,
        feature::queues(1, 2),
        "asked again before any queue exists"
    );
}

#[test]
fn a_reset_grants_every_queue_again() {
    let mut rig = Rig::enabled();
    let set = set_feature(feature::NUMBER_OF_QUEUES, feature::queues(0, 0));
    assert_eq!(rig.admin_status(set), Status::SUCCESS);
    rig.create_pair(1, 4);
    rig.set_reg(crate::nvme::spec::reg::CC, 0, 4);
    rig.settle();
    rig.enable();
    let c = rig.admin(get_feature(feature::NUMBER_OF_QUEUES));
    assert_eq!(c.result, feature::queues(2, 2));
    let set = set_feature(feature::NUMBER_OF_QUEUES, feature::queues(1, 1));
    assert_eq!(
        rig.admin_status(set),
        Status::SUCCESS,
        "no I/O queue exists now"
    );
}

/// The lengths of the reads of queue 1's entries since the log had `from` reads.
fn fetches(rig: &Rig, from: usize) -> Vec<usize> {
    let sq = io_sq(1)..io_sq(1) + 0x10_000;
    rig.world.reads()[from..]
        .iter()
        .filter(|(a, _)| sq.contains(a))
        .map(|&(_, n)| n)
        .collect()
}

#[test]
fn the_arbitration_burst_sets_how_many_entries_a_fetch_takes() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 64);
    let c = rig.admin(get_feature(feature::ARBITRATION));
    assert_eq!(c.result, 3, "a burst of 8 after reset");
    for (value, reported, posted, reads) in [
        (0, 0, 3, vec![64, 64, 64]),
        (0xf9, 1, 3, vec![128, 64]),
        (7, 7, 9, vec![9 * 64]),
        (3, 3, 10, vec![8 * 64, 2 * 64]),
    ] {
        let c = rig.admin(set_feature(feature::ARBITRATION, value));
        assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
        let c = rig.admin(get_feature(feature::ARBITRATION));
        assert_eq!(c.result, reported, "after {value:#x}");
        let from = rig.world.reads().len();
        rig.post_many(1, flush(), posted);
        rig.kick(1);
        rig.settle();
        assert_eq!(rig.reap(1).len(), posted);
        assert_eq!(fetches(&rig, from), reads, "after {value:#x}");
    }
}

#[test]
fn interrupt_coalescing_keeps_its_low_16_bits() {
    let mut rig = Rig::enabled();
    assert_eq!(
        rig.admin(get_feature(feature::INTERRUPT_COALESCING)).result,
        0
    );
    let set = set_feature(feature::INTERRUPT_COALESCING, 0x1234_5678);
    assert_eq!(rig.admin_status(set), Status::SUCCESS);
    let c = rig.admin(get_feature(feature::INTERRUPT_COALESCING));
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0x5678));
}

#[test]
fn an_unknown_feature_is_an_invalid_field() {
    let mut rig = Rig::enabled();
    for fid in [0x00, 0x02, 0x0b, 0x80] {
        assert_eq!(rig.admin_status(set_feature(fid, 1)), Status::INVALID_FIELD);
        assert_eq!(rig.admin_status(get_feature(fid)), Status::INVALID_FIELD);
    }
}

/// One Error Information entry as the log page holds it.
fn error_entry(count: u64, sqid: u16, cid: u16, status: Status, lba: u64, nsid: u32) -> Vec<u8> {
    let mut e = vec![0u8; 64];
    put(&mut e, 0, &count.to_le_bytes());
    put(&mut e, 8, &sqid.to_le_bytes());
    put(&mut e, 10, &cid.to_le_bytes());
    put(&mut e, 12, &status.with_phase(false).to_le_bytes());
    put(&mut e, 14, &0xffffu16.to_le_bytes());
    put(&mut e, 16, &lba.to_le_bytes());
    put(&mut e, 24, &nsid.to_le_bytes());
    e
}

#[test]
fn the_error_log_lists_failed_commands_newest_first() {
    let mut rig = Rig::enabled();
    let first = rig.admin(Command {
        opcode: 0x7f,
        nsid: 5,
        cdw: [0x1111_2222, 0x3333_4444, 0, 0, 0, 0],
        ..Command::default()
    });
    let second = rig.admin(identify(9, cns::NAMESPACE));
    let before = rig.world.now();
    let page = get_log(&rig, log::ERROR_INFORMATION, false, 192, 0);
    let c = rig.admin(page);
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(rig.world.now() - before, READ_LATENCY, "a small media read");
    let mut want = error_entry(2, 0, second.cid, Status::INVALID_NAMESPACE, 0, 9);
    want.extend(error_entry(
        1,
        0,
        first.cid,
        Status::INVALID_OPCODE,
        0x3333_4444_1111_2222,
        5,
    ));
    want.extend([0; 64]);
    assert_eq!(rig.world.peek(DATA, 192), want);
    // From an offset: the older entry first.
    let page = get_log(&rig, log::ERROR_INFORMATION, false, 64, 64);
    assert_eq!(rig.admin_status(page), Status::SUCCESS);
    assert_eq!(rig.world.peek(DATA, 64), want[64..128]);
}

#[test]
fn the_error_log_keeps_the_newest_64_and_counts_them_all() {
    let mut rig = Rig::enabled();
    for _ in 0..66 {
        assert_eq!(
            rig.admin_status(identify(9, cns::NAMESPACE)),
            Status::INVALID_NAMESPACE
        );
    }
    let page = get_log(&rig, log::ERROR_INFORMATION, false, 4096, 0);
    assert_eq!(rig.admin_status(page), Status::SUCCESS);
    let counts: Vec<u64> = (0..64)
        .map(|i| {
            let e = rig.world.peek(DATA + i * 64, 8);
            u64::from_le_bytes(e.try_into().expect("eight bytes"))
        })
        .collect();
    assert_eq!(counts, (3..=66).rev().collect::<Vec<u64>>());
}

#[test]
fn get_log_page_checks_its_page_offset_and_length() {
    let mut rig = Rig::enabled();
    let refused = [
        (get_log(&rig, 0x03, false, 64, 0), Status::INVALID_LOG_PAGE),
        (get_log(&rig, 0x00, false, 64, 0), Status::INVALID_LOG_PAGE),
        (
            get_log(&rig, log::ERROR_INFORMATION, false, 64, 2),
            Status::INVALID_FIELD,
        ),
        (
            get_log(&rig, log::ERROR_INFORMATION, false, 4, 4096),
            Status::INVALID_FIELD,
        ),
        (
            get_log(&rig, log::SMART_HEALTH, false, 4, 512),
            Status::INVALID_FIELD,
        ),
        (
            get_log(&rig, log::SMART_HEALTH, false, 4, 1 << 32),
            Status::INVALID_FIELD,
        ),
    ];
    for (c, status) in refused {
        let done = rig.admin(c);
        assert_eq!((done.status, done.result), (status, 0), "{c:?}");
    }
    let too_long = Command::from(AdminCommand::GetLogPage(GetLogPage {
        nsid: 0,
        lid: log::SMART_HEALTH,
        rae: false,
        numd: 32 * 1024,
        offset: 0,
    }))
    .with_prps(DATA, 0);
    assert_eq!(
        rig.admin_status(too_long),
        Status::INVALID_FIELD,
        "past MDTS"
    );
    // The last dword of each page, and the most one command moves: the page, then zeroes.
    rig.world.poke(DATA, &[0xaa; 4]);
    let last = get_log(&rig, log::SMART_HEALTH, false, 4, 508);
    assert_eq!(rig.admin_status(last), Status::SUCCESS);
    assert_eq!(rig.world.peek(DATA, 4), [0; 4]);
    let last = get_log(&rig, log::ERROR_INFORMATION, false, 4, 4092);
    assert_eq!(rig.admin_status(last), Status::SUCCESS);
    rig.world.poke(DATA, &[0xaa; 128 * 1024]);
    let most = get_log(&rig, log::SMART_HEALTH, false, 128 * 1024, 0);
    assert_eq!(rig.admin_status(most), Status::SUCCESS);
    let got = rig.world.peek(DATA, 128 * 1024);
    assert_eq!(got[1..3], 313u16.to_le_bytes(), "the page first");
    assert!(got[512..].iter().all(|&b| b == 0), "then zeroes");
}

#[test]
fn the_smart_log_counts_commands_data_units_and_errors() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 8);
    assert_eq!(rig.run(1, write(&rig, 0, 2)).status, Status::SUCCESS);
    for _ in 0..8 {
        assert_eq!(rig.run(1, read(&rig, 0, 128)).status, Status::SUCCESS);
    }
    let bad = Command::from(IoCommand::Read(BlockRange::new(1, 127, 2))).with_prps(DATA, 0);
    assert_eq!(rig.run(1, bad).status, Status::LBA_OUT_OF_RANGE);
    let page = get_log(&rig, log::SMART_HEALTH, false, 512, 0);
    assert_eq!(rig.admin_status(page), Status::SUCCESS);
    let mut want = vec![0u8; 512];
    put(&mut want, 1, &313u16.to_le_bytes()); // composite temperature, kelvin
    want[3] = 100; // available spare
    want[4] = 10; // its threshold
    put(&mut want, 32, &2u128.to_le_bytes()); // 1,024 blocks read: 2 units of 1,000
    put(&mut want, 48, &1u128.to_le_bytes()); // 2 blocks written: 1 unit
    put(&mut want, 64, &8u128.to_le_bytes()); // read commands
    put(&mut want, 80, &1u128.to_le_bytes()); // write commands
    put(&mut want, 112, &1u128.to_le_bytes()); // power cycles
    put(&mut want, 176, &1u128.to_le_bytes()); // error log entries
    assert_eq!(rig.world.peek(DATA, 512), want);
}

/// Dword 0 of an Error event completion: type 0 (Error) in bits 2:0, `info` in 15:8, the
/// Error Information log page (01h) in 23:16.
fn error_event(info: u8) -> u32 {
    0x0001_0000 | u32::from(info) << 8
}

#[test]
fn an_event_request_completes_when_a_doorbell_is_wrong() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 4);
    let aer = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    assert!(rig.reap(0).is_empty(), "waits for an event");
    rig.ring(3, false, 1);
    rig.settle();
    let done = rig.reap(0);
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].cid, done[0].status, done[0].result),
        (
            aer,
            Status::SUCCESS,
            error_event(async_event::INVALID_DOORBELL_REGISTER)
        )
    );
    let page = get_log(&rig, log::ERROR_INFORMATION, false, 64, 0);
    assert_eq!(rig.admin_status(page), Status::SUCCESS);
    let want = error_entry(1, 3, 0xffff, Status::INVALID_QUEUE_ID, 0, 0);
    assert_eq!(rig.world.peek(DATA, 64), want);
    // A tail past the queue is a wrong value.
    let aer = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.ring(1, false, 4);
    rig.settle();
    let done = rig.reap(0);
    assert_eq!(
        (done[0].cid, done[0].result),
        (aer, error_event(async_event::INVALID_DOORBELL_VALUE))
    );
}

#[test]
fn error_events_stay_masked_until_the_error_log_is_read_without_retain() {
    let mut rig = Rig::enabled();
    let first = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    let second = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    rig.ring(3, false, 1);
    rig.settle();
    let done: Vec<u16> = rig.reap(0).iter().map(|c| c.cid).collect();
    assert_eq!(done, [first], "one event, one request");
    rig.ring(3, false, 1);
    rig.settle();
    assert!(rig.reap(0).is_empty(), "masked");
    let retained = get_log(&rig, log::ERROR_INFORMATION, true, 64, 0);
    assert_eq!(rig.admin_status(retained), Status::SUCCESS);
    rig.ring(3, false, 1);
    rig.settle();
    assert!(
        rig.reap(0).is_empty(),
        "still masked: the host retained the event"
    );
    let smart = get_log(&rig, log::SMART_HEALTH, false, 64, 0);
    assert_eq!(rig.admin_status(smart), Status::SUCCESS);
    rig.ring(3, false, 1);
    rig.settle();
    assert!(rig.reap(0).is_empty(), "another page does not unmask");
    let read = get_log(&rig, log::ERROR_INFORMATION, false, 64, 0);
    assert_eq!(rig.admin_status(read), Status::SUCCESS);
    rig.ring(3, false, 1);
    rig.settle();
    let done: Vec<u16> = rig.reap(0).iter().map(|c| c.cid).collect();
    assert_eq!(done, [second], "unmasked");
}

#[test]
fn at_most_four_event_requests_wait_at_once() {
    let mut rig = Rig::enabled();
    let waiting: Vec<u16> = (0..4)
        .map(|_| rig.submit(0, AdminCommand::AsyncEventRequest.into()))
        .collect();
    rig.settle();
    assert!(rig.reap(0).is_empty());
    let c = rig.admin(AdminCommand::AsyncEventRequest);
    assert_eq!((c.status, c.result), (Status::AER_LIMIT_EXCEEDED, 0));
    rig.ring(3, false, 1);
    rig.settle();
    let done: Vec<u16> = rig.reap(0).iter().map(|c| c.cid).collect();
    assert_eq!(done, [waiting[0]]);
    let fifth = rig.submit(0, AdminCommand::AsyncEventRequest.into());
    rig.settle();
    assert!(rig.reap(0).is_empty(), "room for one more");
    let c = rig.admin(AdminCommand::AsyncEventRequest);
    assert_eq!(c.status, Status::AER_LIMIT_EXCEEDED, "and no more");
    let _ = fifth;
}

#[test]
fn a_reset_ends_waiting_event_requests_without_completions() {
    let mut rig = Rig::enabled();
    for _ in 0..4 {
        rig.submit(0, AdminCommand::AsyncEventRequest.into());
    }
    rig.settle();
    rig.set_reg(crate::nvme::spec::reg::CC, 0, 4);
    rig.settle();
    rig.enable();
    assert!(
        rig.reap(0).is_empty(),
        "nothing posted for the old requests"
    );
    for _ in 0..4 {
        rig.submit(0, AdminCommand::AsyncEventRequest.into());
    }
    rig.settle();
    assert!(rig.reap(0).is_empty(), "four may wait again");
    let c = rig.admin(AdminCommand::AsyncEventRequest);
    assert_eq!(c.status, Status::AER_LIMIT_EXCEEDED);
}

#[test]
fn abort_of_a_queue_that_does_not_exist_is_an_invalid_field() {
    let mut rig = Rig::enabled();
    rig.create_pair(1, 4);
    for sqid in [2, 3, 9] {
        let c = rig.admin(abort(sqid, 1));
        assert_eq!(
            (c.status, c.result),
            (Status::INVALID_FIELD, 0),
            "SQ {sqid}"
        );
    }
    let c = rig.admin(abort(1, 77));
    assert_eq!(
        (c.status, c.result),
        (Status::SUCCESS, 1),
        "not found: not aborted"
    );
}

/// Queue 1 (8 entries) with fetches of one entry at a time and two Flushes posted from slot
/// `first` on (7: across the queue's wrap) while its entries cannot be read: the first being
/// fetched, the second waiting; their ids.
fn two_flushes_waiting(rig: &mut Rig, first: u16) -> (u16, u16) {
    rig.create_pair(1, 8);
    for _ in 0..first {
        assert_eq!(rig.run(1, flush()).status, Status::SUCCESS);
    }
    let one_at_a_time = set_feature(feature::ARBITRATION, 0);
    assert_eq!(rig.admin_status(one_at_a_time), Status::SUCCESS);
    rig.world.hold_reads(io_sq(1), io_sq(1) + 0x1000);
    let ids = rig.post_many(1, flush(), 2);
    rig.kick(1);
    rig.settle();
    (ids[0], ids[1])
}

/// [`two_flushes_waiting`] from slot `first`, then an Abort of the first (`second` false) or
/// the second, and the entries let go: the two ids, the Abort's dword 0, and the Flushes'
/// statuses by id.
fn abort_one_of_two(first: u16, second: bool) -> ((u16, u16), u32, Vec<(u16, Status)>) {
    let mut rig = Rig::enabled();
    let (a, b) = two_flushes_waiting(&mut rig, first);
    let target = if second { b } else { a };
    let abort = rig.submit(0, abort(1, target).into());
    rig.settle();
    rig.world.let_go();
    rig.settle();
    let done = rig.reap(0);
    assert_eq!((done[0].cid, done[0].status), (abort, Status::SUCCESS));
    let mut flushes: Vec<_> = rig.reap(1).iter().map(|c| (c.cid, c.status)).collect();
    flushes.sort_by_key(|d| d.0);
    ((a, b), done[0].result, flushes)
}

#[test]
fn abort_cancels_a_command_still_waiting_in_its_queue() {
    // Slots 6 and 7, and 7 and 0 (the queue's wrap).
    for first in [6, 7] {
        let ((a, b), result, flushes) = abort_one_of_two(first, true);
        assert_eq!(result, 0, "aborted");
        let want = [(a, Status::SUCCESS), (b, Status::ABORT_REQUESTED)];
        assert_eq!(flushes, want, "from slot {first}");
    }
}

#[test]
fn abort_leaves_a_command_the_controller_has_taken() {
    for first in [6, 7] {
        let ((a, b), result, flushes) = abort_one_of_two(first, false);
        assert_eq!(result, 1, "not aborted");
        let want = [(a, Status::SUCCESS), (b, Status::SUCCESS)];
        assert_eq!(flushes, want, "from slot {first}");
    }
}
