//! NVMe 1.4 conformance of the emulated controller, driven from the host through the native
//! driver's passthrough paths (`admin_raw`, `io_raw`) and through queues these tests build
//! and ring themselves. Every case asserts the exact completion status, and the data where
//! data moves.

use crate::common;
use common::nvme::*;
use common::pattern;
use smartio_devices::nvme::spec::io::DsmRange;
use smartio_devices::nvme::spec::IoCommand;
use smartio_platform::pci;

// ---------------------------------------------------------------------------------------
// Identify
// ---------------------------------------------------------------------------------------

#[test]
fn identify_controller_reports_the_controller() {
    run("id-ctrl", Setup::default(), |ctx| async move {
        let d = ctx
            .dev
            .identify(cns::CONTROLLER, 0)
            .await
            .expect("identify controller");
        assert_eq!(le16(&d, id_ctrl::VID), 0x8086, "VID");
        assert_eq!(d[id_ctrl::MDTS], 5, "MDTS");
        assert_eq!(le32(&d, id_ctrl::NN), 1, "NN");
        assert_eq!(d[id_ctrl::SQES], 0x66, "SQES");
        assert_eq!(d[id_ctrl::CQES], 0x44, "CQES");
        assert_eq!(le32(&d, id_ctrl::VER), 0x0001_0400, "VER");
        assert_eq!(d[id_ctrl::ACL], 3, "ACL: 4 Aborts at once (0's based)");
        assert_eq!(
            d[id_ctrl::ELPE],
            63,
            "ELPE: 64 error-log entries (0's based)"
        );
        let mut model = [b' '; 40];
        let text = b"smartio emulated NVMe (ramdisk)";
        model[..text.len()].copy_from_slice(text);
        assert_bytes(&d[id_ctrl::MN..id_ctrl::MN + 40], &model, "MN");
        let serial = String::from_utf8_lossy(&d[id_ctrl::SN..id_ctrl::SN + 20]);
        assert!(serial.starts_with("SMARTIO"), "SN {serial:?}");
        assert_eq!(
            le16(&d, id_ctrl::ONCS) & (1 << 2 | 1 << 3),
            1 << 2 | 1 << 3,
            "ONCS Dataset Management and Write Zeroes"
        );
        assert_eq!(ctx.dev.info().max_transfer, 128 << 10);
    });
}

#[test]
fn identify_namespace_reports_size_and_lba_format() {
    run("id-ns", Setup::default(), |ctx| async move {
        let d = ctx
            .dev
            .identify(cns::NAMESPACE, 1)
            .await
            .expect("identify namespace 1");
        assert_eq!(le64(&d, id_ns::NSZE), BLOCKS_64M, "NSZE");
        assert_eq!(le64(&d, id_ns::NCAP), BLOCKS_64M, "NCAP");
        assert_eq!(d[id_ns::NLBAF], 0, "NLBAF");
        assert_eq!(d[id_ns::FLBAS] & 0xf, 0, "FLBAS");
        assert_eq!((le32(&d, id_ns::LBAF0) >> 16) & 0xff, 9, "LBAF0.LBADS");
        assert_eq!(
            d[id_ns::DLFEAT] & 0b111,
            0b001,
            "DLFEAT: deallocated blocks read as zeroes"
        );
    });
}

#[test]
fn identify_namespace_with_4k_blocks() {
    let setup = Setup {
        params: r#"profile = "ramdisk", capacity = "64M", lba_size = 4096"#,
        ..Setup::default()
    };
    run("id-ns-4k", setup, |ctx| async move {
        let d = ctx
            .dev
            .identify(cns::NAMESPACE, 1)
            .await
            .expect("identify namespace 1");
        assert_eq!(le64(&d, id_ns::NSZE), (64 << 20) / 4096, "NSZE");
        assert_eq!((le32(&d, id_ns::LBAF0) >> 16) & 0xff, 12, "LBAF0.LBADS");
        // MDTS is 128 KiB: 32 blocks of 4 KiB fit, 33 do not.
        let buf = ctx.dma(33 * PAGE_SIZE);
        let list = ctx.dma(PAGE_SIZE);
        let pages: Vec<u8> = (1..33)
            .flat_map(|i| (buf.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &pages).await;
        let c = ctx
            .io(rw(io::READ, 1, 0, 32, buf.bus.get(), list.bus.get()))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "32 x 4 KiB read");
        let c = ctx
            .io(rw(io::READ, 1, 0, 33, buf.bus.get(), list.bus.get()))
            .await;
        assert_eq!(c.status, Status::INVALID_FIELD, "33 x 4 KiB read > MDTS");
    });
}

#[test]
fn identify_active_namespace_list() {
    let setup = Setup {
        params: r#"profile = "ramdisk", namespaces = 3, capacity = "64M""#,
        ..Setup::default()
    };
    run("id-active", setup, |ctx| async move {
        let ids = |d: &[u8]| -> Vec<u32> { (0..8).map(|i| le32(d, 4 * i)).collect() };
        let d = ctx
            .dev
            .identify(cns::ACTIVE_NAMESPACES, 0)
            .await
            .expect("active list from 0");
        assert_eq!(ids(&d), [1, 2, 3, 0, 0, 0, 0, 0]);
        let d = ctx
            .dev
            .identify(cns::ACTIVE_NAMESPACES, 2)
            .await
            .expect("active list from 2");
        assert_eq!(ids(&d), [3, 0, 0, 0, 0, 0, 0, 0]);
        let d = ctx
            .dev
            .identify(cns::ACTIVE_NAMESPACES, 3)
            .await
            .expect("active list from 3");
        assert!(d.iter().all(|&b| b == 0), "nothing above the last id");
        let c = ctx
            .dev
            .identify(cns::CONTROLLER, 0)
            .await
            .expect("identify controller");
        assert_eq!(le32(&c, id_ctrl::NN), 3, "NN");
        let buf = ctx.dma(PAGE_SIZE);
        let c = ctx
            .admin(identify(cns::ACTIVE_NAMESPACES, 0xffff_fffe, buf.bus.get()))
            .await;
        assert_eq!(c.status, Status::INVALID_NAMESPACE, "list above FFFFFFFEh");
    });
}

#[test]
fn identify_data_through_prp1_with_offset_and_prp2() {
    run("id-prp2", Setup::default(), |ctx| async move {
        let whole = ctx
            .dev
            .identify(cns::CONTROLLER, 0)
            .await
            .expect("identify controller");
        let a = ctx.dma(PAGE_SIZE);
        let b = ctx.dma(PAGE_SIZE);
        let mut cmd = identify(cns::CONTROLLER, 0, a.bus.get() + 512);
        cmd.prp2 = b.bus.get();
        let c = ctx.admin(cmd).await;
        assert_eq!(c.status, Status::SUCCESS);
        let mut got = ctx.fetch(&a, 512, 4096 - 512).await;
        got.extend(ctx.fetch(&b, 0, 512).await);
        assert_bytes(&got, &whole, "identify split over PRP1+512 and PRP2");
        // PRP2 must be page aligned.
        cmd.prp2 = b.bus.get() + 8;
        let c = ctx.admin(cmd).await;
        assert_eq!(c.status, Status::PRP_OFFSET_INVALID, "PRP2 with an offset");
        // PRP1 must be dword aligned.
        let c = ctx
            .admin(identify(cns::CONTROLLER, 0, a.bus.get() + 2))
            .await;
        assert_eq!(
            c.status,
            Status::PRP_OFFSET_INVALID,
            "PRP1 not dword aligned"
        );
    });
}

// ---------------------------------------------------------------------------------------
// Queues
// ---------------------------------------------------------------------------------------

#[test]
fn create_and_delete_io_queues_and_submit_through_them() {
    run("queues", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (sq, cq) = raw_pair(&ctx, 2, 8).await;
        // Write a block through the new queue, then read it back through it.
        let data = pattern(7, 4096);
        let src = ctx.dma(PAGE_SIZE);
        let dst = ctx.dma(PAGE_SIZE);
        ctx.fill(&src, 0, &data).await;
        let mut w = rw(io::WRITE, 1, 40, 8, src.bus.get(), 0);
        w.cid = 0x1111;
        let mut r = rw(io::READ, 1, 40, 8, dst.bus.get(), 0);
        r.cid = 0x2222;
        assert_eq!(sq.push(&ctx, w).await, 0);
        sq.ring(&ctx).await;
        let c = cq.next(&ctx).await;
        assert_eq!(c.status, Status::SUCCESS, "write");
        assert!(c.phase, "phase tag 1 on the first pass");
        assert_eq!((c.cid, c.sq_id, c.sq_head), (0x1111, 2, 1));
        assert_eq!(sq.push(&ctx, r).await, 1);
        sq.ring(&ctx).await;
        let c = cq.next(&ctx).await;
        assert_eq!(c.status, Status::SUCCESS, "read");
        assert!(c.phase, "phase tag 1 on the first pass");
        assert_eq!((c.cid, c.sq_id, c.sq_head), (0x2222, 2, 2));
        assert_bytes(&ctx.fetch(&dst, 0, 4096).await, &data, "read back");
        // Both CQ entries of the first pass were written with phase 1; the rest untouched.
        let raw = ctx.fetch(&cq.buf, 2 * CQE_SIZE as u64, CQE_SIZE).await;
        assert!(raw.iter().all(|&b| b == 0), "slot 2 not yet written");
        // The queues go away in order.
        let c = ctx.admin(delete(admin::DELETE_IO_SQ, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete SQ 2");
        let c = ctx.admin(delete(admin::DELETE_IO_CQ, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete CQ 2");
        // The driver's queue 1 is unaffected.
        let c = ctx.io(rw(io::READ, 1, 40, 8, dst.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "queue 1 still works");
    });
}

#[test]
fn delete_sq_completes_after_the_commands_it_already_fetched() {
    // NAND reads take 80 us: long enough to delete the queue while one is in flight.
    let setup = Setup {
        params: r#"profile = "nand", capacity = "64M""#,
        ..Setup::default()
    };
    run("delete-inflight", setup, |ctx| async move {
        ctx.free_pair(2).await;
        let (sq, cq) = raw_pair(&ctx, 2, 8).await;
        let data = pattern(21, 4096);
        let src = ctx.dma(PAGE_SIZE);
        let dst = ctx.dma(PAGE_SIZE);
        ctx.fill(&src, 0, &data).await;
        sq.push(&ctx, rw(io::WRITE, 1, 8, 8, src.bus.get(), 0))
            .await;
        sq.ring(&ctx).await;
        assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS, "write");
        let mut r = rw(io::READ, 1, 8, 8, dst.bus.get(), 0);
        r.cid = 0x77;
        sq.push(&ctx, r).await;
        sq.ring(&ctx).await;
        // Let the controller fetch it; the media is still busy afterwards.
        ctx.cpu.sleep(SimDuration::from_us(10)).await;
        let slot1 = || ctx.fetch(&cq.buf, CQE_SIZE as u64, CQE_SIZE);
        assert!(
            slot1().await.iter().all(|&b| b == 0),
            "the read is still in flight"
        );
        let c = ctx.admin(delete(admin::DELETE_IO_SQ, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete SQ 2");
        // NVMe 1.4 5.6: the deletion completes after the queue's commands completed (or
        // were aborted); this one was already fetched, so it completes normally.
        let e = Completion::from_bytes(&slot1().await);
        assert!(
            e.phase,
            "the read's completion was posted before the deletion's"
        );
        assert_eq!(
            (e.cid, e.sq_id, e.sq_head, e.status),
            (0x77, 2, 2, Status::SUCCESS)
        );
        assert_bytes(&ctx.fetch(&dst, 0, 4096).await, &data, "read data");
        let c = ctx.admin(delete(admin::DELETE_IO_CQ, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete CQ 2");
    });
}

#[test]
fn completion_queue_wraps_and_flips_the_phase_tag() {
    run("cq-wrap", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (sq, cq) = raw_pair(&ctx, 2, 4).await;
        let buf = ctx.dma(PAGE_SIZE);
        // 4 entries hold 3 outstanding commands; 11 commands wrap the CQ twice and more.
        for i in 0..11u16 {
            let mut cmd = rw(io::READ, 1, u64::from(i), 1, buf.bus.get(), 0);
            cmd.cid = 0x100 + i;
            sq.push(&ctx, cmd).await;
            sq.ring(&ctx).await;
            let c = cq.next(&ctx).await;
            assert_eq!(c.status, Status::SUCCESS, "command {i}");
            assert_eq!(c.cid, 0x100 + i);
            assert_eq!(c.sq_head, (i + 1) % 4, "SQ head after command {i}");
            assert_eq!(c.phase, (i / 4) % 2 == 0, "phase tag of command {i}");
        }
    });
}

#[test]
fn admin_queue_wraps_more_than_its_32_entries() {
    run("admin-wrap", Setup::default(), |ctx| async move {
        let nq = features(admin::GET_FEATURES, feature::NUMBER_OF_QUEUES, 0);
        // Sequential: the phase flips exactly when the CQ (and SQ) wrap to slot 0.
        let first = ctx.admin(nq).await;
        let mut expected = first.phase;
        let mut flips = 0;
        for i in 0..70 {
            let c = ctx.admin(nq).await;
            assert_eq!(c.status, Status::SUCCESS, "command {i}");
            assert_eq!(c.result, 0x0001_0001, "command {i}: granted queues");
            if c.sq_head == 1 {
                expected = !expected;
                flips += 1;
            }
            assert_eq!(c.phase, expected, "command {i} (SQ head {})", c.sq_head);
        }
        assert!(flips >= 2, "70 commands wrap a 32-entry queue twice");
        // Concurrent: more commands than entries, the driver waits for tags.
        let futs: Vec<Pin<Box<dyn Future<Output = Completion> + '_>>> =
            (0..40).map(|_| Box::pin(ctx.admin(nq)) as _).collect();
        let all = join_all(futs).await;
        assert_eq!(all.len(), 40);
        for c in all {
            assert_eq!((c.status, c.result), (Status::SUCCESS, 0x0001_0001));
        }
    });
}

#[test]
fn round_robin_arbitration_interleaves_two_loaded_queues() {
    let setup = Setup {
        io_queues: 3,
        ..Setup::default()
    };
    run("arbitration", setup, |ctx| async move {
        ctx.free_pair(2).await;
        ctx.free_pair(3).await;
        // Burst of one command per queue per round.
        let c = ctx
            .admin(features(admin::SET_FEATURES, feature::ARBITRATION, 0))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "set arbitration");
        let c = ctx
            .admin(features(admin::GET_FEATURES, feature::ARBITRATION, 0))
            .await;
        assert_eq!((c.status, c.result & 7), (Status::SUCCESS, 0), "AB");
        // Two SQs sharing one CQ, so the CQ order is the completion order.
        let cq = RawCq::new(&ctx, 2, 64);
        let c = ctx.admin(create_cq(2, 63, cq.buf.bus.get(), None)).await;
        assert_eq!(c.status, Status::SUCCESS, "create CQ 2");
        let sqs = [RawSq::host(&ctx, 2, 32), RawSq::host(&ctx, 3, 32)];
        for sq in &sqs {
            let c = ctx.admin(create_sq(sq.qid, 31, sq.bus(), 2)).await;
            assert_eq!(c.status, Status::SUCCESS, "create SQ {}", sq.qid);
        }
        let buf = ctx.dma(PAGE_SIZE);
        const PER_QUEUE: u16 = 16;
        for sq in &sqs {
            for i in 0..PER_QUEUE {
                let mut cmd = rw(io::READ, 1, u64::from(i) * 8, 8, buf.bus.get(), 0);
                cmd.cid = sq.qid * 100 + i;
                sq.push(&ctx, cmd).await;
            }
        }
        for sq in &sqs {
            sq.ring(&ctx).await;
        }
        let mut order = Vec::new();
        for _ in 0..2 * PER_QUEUE {
            let c = cq.next(&ctx).await;
            assert_eq!(c.status, Status::SUCCESS, "cid {}", c.cid);
            assert_eq!(c.cid / 100, c.sq_id, "cid belongs to its SQ");
            order.push(c.sq_id);
        }
        let last = |q: u16| {
            order
                .iter()
                .rposition(|&s| s == q)
                .expect("queue completed")
        };
        let first = |q: u16| order.iter().position(|&s| s == q).expect("queue completed");
        assert_eq!(
            order.iter().filter(|&&s| s == 2).count(),
            PER_QUEUE as usize
        );
        assert_eq!(
            order.iter().filter(|&&s| s == 3).count(),
            PER_QUEUE as usize
        );
        let finished = last(2).min(last(3));
        assert!(
            first(2) < finished && first(3) < finished,
            "both queues progress before either finishes: {order:?}"
        );
        let longest_run = order
            .chunk_by(|a, b| a == b)
            .map(<[u16]>::len)
            .max()
            .expect("non-empty");
        assert!(longest_run <= 4, "one queue ran ahead: {order:?}");
    });
}

#[test]
fn queue_creation_errors() {
    run("queue-errors", Setup::default(), |ctx| async move {
        let cqm = ctx.dma(64 << 10).bus.get();
        let sqm = ctx.dma(PAGE_SIZE).bus.get();
        let cases = [
            (
                create_cq(0, 7, cqm, None),
                Status::INVALID_QUEUE_ID,
                "CQ qid 0",
            ),
            (
                create_cq(3, 7, cqm, None),
                Status::INVALID_QUEUE_ID,
                "CQ qid beyond granted",
            ),
            (
                create_cq(1, 7, cqm, None),
                Status::INVALID_QUEUE_ID,
                "CQ qid exists",
            ),
            (
                create_sq(0, 7, sqm, 1),
                Status::INVALID_QUEUE_ID,
                "SQ qid 0",
            ),
            (
                create_sq(3, 7, sqm, 1),
                Status::INVALID_QUEUE_ID,
                "SQ qid beyond granted",
            ),
            (
                create_sq(1, 7, sqm, 1),
                Status::INVALID_QUEUE_ID,
                "SQ qid exists",
            ),
            (
                delete(admin::DELETE_IO_SQ, 0),
                Status::INVALID_QUEUE_ID,
                "delete SQ 0",
            ),
            (
                delete(admin::DELETE_IO_CQ, 0),
                Status::INVALID_QUEUE_ID,
                "delete CQ 0",
            ),
            (
                delete(admin::DELETE_IO_SQ, 9),
                Status::INVALID_QUEUE_ID,
                "delete SQ 9",
            ),
            (
                delete(admin::DELETE_IO_CQ, 1),
                Status::INVALID_QUEUE_DELETION,
                "CQ 1 has SQ 1",
            ),
        ];
        for (cmd, status, what) in cases {
            assert_eq!(ctx.admin(cmd).await.status, status, "{what}");
        }
        ctx.free_pair(2).await;
        let c = ctx.admin(delete(admin::DELETE_IO_SQ, 2)).await;
        assert_eq!(c.status, Status::INVALID_QUEUE_ID, "delete SQ 2 twice");
        let c = ctx.admin(delete(admin::DELETE_IO_CQ, 2)).await;
        assert_eq!(c.status, Status::INVALID_QUEUE_ID, "delete CQ 2 twice");
        let cases = [
            (
                create_cq(2, 0, cqm, None),
                Status::INVALID_QUEUE_SIZE,
                "CQ qsize 0",
            ),
            (
                create_cq(2, 4096, cqm, None),
                Status::INVALID_QUEUE_SIZE,
                "CQ qsize 4096",
            ),
            (
                create_cq(2, 7, cqm, Some(999)),
                Status::INVALID_INTERRUPT_VECTOR,
                "IV 999",
            ),
            (
                create_sq(2, 7, sqm, 0),
                Status::COMPLETION_QUEUE_INVALID,
                "SQ on CQ 0",
            ),
            (
                create_sq(2, 7, sqm, 2),
                Status::COMPLETION_QUEUE_INVALID,
                "SQ on missing CQ",
            ),
            (
                create_sq(2, 7, sqm, 99),
                Status::COMPLETION_QUEUE_INVALID,
                "SQ on CQ 99",
            ),
        ];
        for (cmd, status, what) in cases {
            assert_eq!(ctx.admin(cmd).await.status, status, "{what}");
        }
        // CAP.CQR: a queue that is not physically contiguous is an invalid field.
        let mut cmd = create_cq(2, 7, cqm, None);
        cmd.cdw[1] &= !1;
        assert_eq!(ctx.admin(cmd).await.status, Status::INVALID_FIELD, "PC = 0");
        // CAP.MQES = 4095 (0's based): a 4096-entry queue is allowed.
        let c = ctx.admin(create_cq(2, 4095, cqm, None)).await;
        assert_eq!(c.status, Status::SUCCESS, "CQ of MQES + 1 = 4096 entries");
        let c = ctx.admin(create_sq(2, 0, sqm, 2)).await;
        assert_eq!(c.status, Status::INVALID_QUEUE_SIZE, "SQ qsize 0");
        let c = ctx.admin(create_sq(2, 4096, sqm, 2)).await;
        assert_eq!(c.status, Status::INVALID_QUEUE_SIZE, "SQ qsize 4096");
        let c = ctx.admin(create_sq(2, 7, sqm, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "SQ 2 on the 4096-entry CQ 2");
    });
}

#[test]
fn number_of_queues_feature() {
    run("nq", Setup::default(), |ctx| async move {
        let c = ctx
            .admin(features(admin::GET_FEATURES, feature::NUMBER_OF_QUEUES, 0))
            .await;
        assert_eq!(c.status, Status::SUCCESS);
        // The driver asked for and got 2 SQs and 2 CQs (0's based counts).
        assert_eq!(c.result, 0x0001_0001, "NSQA | NCQA << 16");
        // I/O queues exist after probe: changing the count is out of sequence.
        let c = ctx
            .admin(features(
                admin::SET_FEATURES,
                feature::NUMBER_OF_QUEUES,
                0x0003_0003,
            ))
            .await;
        assert_eq!(c.status, Status::COMMAND_SEQUENCE_ERROR);
        let c = ctx
            .admin(features(
                admin::SET_FEATURES,
                feature::NUMBER_OF_QUEUES,
                0xffff_0000,
            ))
            .await;
        assert_eq!(c.status, Status::INVALID_FIELD, "NCQR = 65535");
        let c = ctx.admin(features(admin::GET_FEATURES, 0x7e, 0)).await;
        assert_eq!(c.status, Status::INVALID_FIELD, "unknown feature");
    });
}

#[test]
fn abort_of_a_command_not_outstanding() {
    run("abort", Setup::default(), |ctx| async move {
        let c = ctx
            .admin(Command {
                opcode: admin::ABORT,
                cdw: [1 | (0x1234 << 16), 0, 0, 0, 0, 0],
                ..Command::default()
            })
            .await;
        assert_eq!(c.status, Status::SUCCESS);
        assert_eq!(c.result & 1, 1, "dword 0 bit 0: command not aborted");
    });
}

// ---------------------------------------------------------------------------------------
// Log pages
// ---------------------------------------------------------------------------------------

#[test]
fn error_information_log_records_failed_commands() {
    run("error-log", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        let io_fail = ctx
            .io(rw(io::READ, 1, BLOCKS_64M - 1, 2, buf.bus.get(), 0))
            .await;
        assert_eq!(io_fail.status, Status::LBA_OUT_OF_RANGE);
        let admin_fail = ctx
            .admin(Command {
                opcode: 0x03,
                ..Command::default()
            })
            .await;
        assert_eq!(admin_fail.status, Status::INVALID_OPCODE);
        let page = ctx
            .dev
            .log_page(log::ERROR_INFORMATION, 2 * log::ERROR_ENTRY_SIZE as u32)
            .await
            .expect("error information log");
        let entry = |i: usize| &page[i * 64..(i + 1) * 64];
        let status = |e: &[u8]| Status::from_field(le16(e, 12) >> 1);
        // Newest first.
        let e0 = entry(0);
        assert_eq!(le16(e0, 8), 0, "entry 0 SQID");
        assert_eq!(le16(e0, 10), admin_fail.cid, "entry 0 CID");
        assert_eq!(status(e0), Status::INVALID_OPCODE, "entry 0 status");
        let e1 = entry(1);
        assert_eq!(le16(e1, 8), 1, "entry 1 SQID");
        assert_eq!(le16(e1, 10), io_fail.cid, "entry 1 CID");
        assert_eq!(status(e1), Status::LBA_OUT_OF_RANGE, "entry 1 status");
        assert_eq!(le64(e1, 16), BLOCKS_64M - 1, "entry 1 LBA");
        assert_eq!(le32(e1, 24), 1, "entry 1 NSID");
        assert_eq!(
            le64(e1, 0),
            1,
            "error count: the first error since the reset"
        );
        assert_eq!(le64(e0, 0), le64(e1, 0) + 1, "error counts increase");
    });
}

#[test]
fn smart_log_counts_host_commands() {
    run("smart", Setup::default(), |ctx| async move {
        let counters = |p: &[u8]| (le128(p, 32), le128(p, 48), le128(p, 64), le128(p, 80));
        let before = ctx
            .dev
            .log_page(log::SMART_HEALTH, log::SMART_SIZE as u32)
            .await
            .expect("SMART log");
        assert_eq!(counters(&before), (0, 0, 0, 0), "no I/O before");
        let buf = ctx.os.alloc(PAGE_SIZE).expect("alloc");
        for lba in [0, 8, 16] {
            ctx.dev
                .submit(0, BlockOp::Write, 1, lba, 8, buf)
                .await
                .expect("write");
        }
        for lba in [0, 8] {
            ctx.dev
                .submit(0, BlockOp::Read, 1, lba, 8, buf)
                .await
                .expect("read");
        }
        let after = ctx
            .dev
            .log_page(log::SMART_HEALTH, log::SMART_SIZE as u32)
            .await
            .expect("SMART log");
        // Data units are thousands of 512-byte units, rounded up.
        assert_eq!(
            counters(&after),
            (1, 1, 2, 3),
            "units read/written, commands"
        );
        assert_eq!(le16(&after, 1), 313, "composite temperature in kelvin");
    });
}

#[test]
fn get_log_page_errors() {
    run("log-errors", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        let c = ctx.admin(get_log(0x7f, 512, buf.bus.get())).await;
        assert_eq!(c.status, Status::INVALID_LOG_PAGE, "LID 0x7f");
        let mut cmd = get_log(log::SMART_HEALTH, 512, buf.bus.get());
        cmd.cdw[2] = 2; // offset not dword aligned
        assert_eq!(ctx.admin(cmd).await.status, Status::INVALID_FIELD, "LPOL 2");
    });
}

// ---------------------------------------------------------------------------------------
// I/O
// ---------------------------------------------------------------------------------------

#[test]
fn read_write_128k_through_prp_lists() {
    run("prp-lists", Setup::default(), |ctx| async move {
        let len = 128usize << 10;
        let data = pattern(1, len);
        let first = PAGE_SIZE as usize - 512;
        // Write: PRP1 at offset 512 of a contiguous buffer, the rest in a PRP list.
        let src = ctx.dma(33 * PAGE_SIZE);
        ctx.fill(&src, 512, &data).await;
        let list = ctx.dma(PAGE_SIZE);
        let entries: Vec<u8> = (1..33)
            .flat_map(|i| (src.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &entries).await;
        let c = ctx
            .io(rw(
                io::WRITE,
                1,
                1000,
                256,
                src.bus.get() + 512,
                list.bus.get(),
            ))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "128 KiB write");
        // Read: the same layout but pages in reverse order (nothing adjacent).
        let dst = ctx.dma(33 * PAGE_SIZE);
        let pages: Vec<u64> = (1..33)
            .rev()
            .map(|i| dst.bus.get() + i * PAGE_SIZE)
            .collect();
        let entries: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
        ctx.fill(&list, 0, &entries).await;
        let c = ctx
            .io(rw(
                io::READ,
                1,
                1000,
                256,
                dst.bus.get() + 512,
                list.bus.get(),
            ))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "128 KiB read");
        let mut got = ctx.fetch(&dst, 512, first).await;
        for p in &pages {
            got.extend(ctx.fetch(&dst, p - dst.bus.get(), PAGE_SIZE as usize).await);
        }
        assert_bytes(&got[..len], &data, "scattered read");
        // Read again through a chained list: 3 entries and a pointer at the end of a page.
        let dst2 = ctx.dma(33 * PAGE_SIZE);
        let lists = ctx.dma(2 * PAGE_SIZE);
        let at = PAGE_SIZE - 32;
        let mut head: Vec<u8> = (1..4)
            .flat_map(|i| (dst2.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        head.extend((lists.bus.get() + PAGE_SIZE).to_le_bytes());
        ctx.fill(&lists, at, &head).await;
        let rest: Vec<u8> = (4..33)
            .flat_map(|i| (dst2.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&lists, PAGE_SIZE, &rest).await;
        let c = ctx
            .io(rw(
                io::READ,
                1,
                1000,
                256,
                dst2.bus.get() + 512,
                lists.bus.get() + at,
            ))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "read through a chained PRP list");
        assert_bytes(&ctx.fetch(&dst2, 512, len).await, &data, "chained read");
    });
}

#[test]
fn a_prp_list_starting_inside_its_page_that_exactly_fills_it_or_needs_a_chain_entry() {
    run("prp-exact-fill", Setup::default(), |ctx| async move {
        let len = 128usize << 10;
        let lba = 2000;
        // Three list pages. The lists start 31 entries before the end of the first; the
        // second, right after it, holds decoys pointing at a trap page (a walker that reads
        // past the end of the first page, or takes its last entry for a chain pointer,
        // moves data to or from the trap); the third takes a chained remainder.
        let lists = ctx.dma(3 * PAGE_SIZE);
        let trap = ctx.dma(PAGE_SIZE);
        let decoys: Vec<u8> = (0..PAGE_SIZE / 8)
            .flat_map(|_| trap.bus.get().to_le_bytes())
            .collect();
        ctx.fill(&lists, PAGE_SIZE, &decoys).await;
        let at = PAGE_SIZE - 31 * 8;
        let entries = |pages: &mut dyn Iterator<Item = u64>| -> Vec<u8> {
            pages.flat_map(|p| p.to_le_bytes()).collect()
        };
        // A plain list at the start of its own page, to check what the others moved.
        let reference = ctx.dma(PAGE_SIZE);
        let read_plain = |slba: u64| {
            let ctx = &ctx;
            let reference = &reference;
            async move {
                let dst = ctx.dma(32 * PAGE_SIZE);
                let list = entries(&mut (1..32).map(|i| dst.bus.get() + i * PAGE_SIZE));
                ctx.fill(reference, 0, &list).await;
                let c = ctx
                    .io(rw(
                        io::READ,
                        1,
                        slba,
                        256,
                        dst.bus.get(),
                        reference.bus.get(),
                    ))
                    .await;
                assert_eq!(c.status, Status::SUCCESS, "read through a plain list");
                ctx.fetch(&dst, 0, len).await
            }
        };

        // 1. A page-aligned 128 KiB write: PRP1 is its first page and the other 31 entries
        //    fill the list exactly to the end of its page, so it has no chain entry.
        let data = pattern(11, len);
        let src = ctx.dma(32 * PAGE_SIZE);
        ctx.fill(&src, 0, &data).await;
        ctx.fill(
            &lists,
            at,
            &entries(&mut (1..32).map(|i| src.bus.get() + i * PAGE_SIZE)),
        )
        .await;
        let c = ctx
            .io(rw(
                io::WRITE,
                1,
                lba,
                256,
                src.bus.get(),
                lists.bus.get() + at,
            ))
            .await;
        assert_eq!(
            c.status,
            Status::SUCCESS,
            "write, list exactly filling its page"
        );
        assert_bytes(
            &read_plain(lba).await,
            &data,
            "what the exact-fill write stored",
        );

        // 2. The same list shape for a read into pages in reverse order.
        let dst = ctx.dma(32 * PAGE_SIZE);
        let pages: Vec<u64> = (1..32)
            .rev()
            .map(|i| dst.bus.get() + i * PAGE_SIZE)
            .collect();
        ctx.fill(&lists, at, &entries(&mut pages.iter().copied()))
            .await;
        let c = ctx
            .io(rw(
                io::READ,
                1,
                lba,
                256,
                dst.bus.get(),
                lists.bus.get() + at,
            ))
            .await;
        assert_eq!(
            c.status,
            Status::SUCCESS,
            "read, list exactly filling its page"
        );
        let mut got = ctx.fetch(&dst, 0, PAGE_SIZE as usize).await;
        for p in &pages {
            got.extend(ctx.fetch(&dst, p - dst.bus.get(), PAGE_SIZE as usize).await);
        }
        assert_bytes(&got, &data, "exact-fill read");

        // 3. 128 KiB from offset 512 of its first page touches 33 pages: 32 entries, one
        //    more than the 31 slots left, so the last slot chains to the third list page.
        let chained = |buf: &DmaBuffer| {
            let mut head = entries(&mut (1..31).map(|i| buf.bus.get() + i * PAGE_SIZE));
            head.extend((lists.bus.get() + 2 * PAGE_SIZE).to_le_bytes());
            let tail = entries(&mut (31..33).map(|i| buf.bus.get() + i * PAGE_SIZE));
            (head, tail)
        };
        let data2 = pattern(12, len);
        let src2 = ctx.dma(33 * PAGE_SIZE);
        ctx.fill(&src2, 512, &data2).await;
        let (head, tail) = chained(&src2);
        ctx.fill(&lists, at, &head).await;
        ctx.fill(&lists, 2 * PAGE_SIZE, &tail).await;
        let c = ctx
            .io(rw(
                io::WRITE,
                1,
                lba + 256,
                256,
                src2.bus.get() + 512,
                lists.bus.get() + at,
            ))
            .await;
        assert_eq!(
            c.status,
            Status::SUCCESS,
            "write through a list chained from an offset"
        );
        assert_bytes(
            &read_plain(lba + 256).await,
            &data2,
            "what the chained write stored",
        );
        let dst2 = ctx.dma(33 * PAGE_SIZE);
        let (head, tail) = chained(&dst2);
        ctx.fill(&lists, at, &head).await;
        ctx.fill(&lists, 2 * PAGE_SIZE, &tail).await;
        let c = ctx
            .io(rw(
                io::READ,
                1,
                lba + 256,
                256,
                dst2.bus.get() + 512,
                lists.bus.get() + at,
            ))
            .await;
        assert_eq!(
            c.status,
            Status::SUCCESS,
            "read through a list chained from an offset"
        );
        assert_bytes(&ctx.fetch(&dst2, 512, len).await, &data2, "chained read");
        assert_bytes(
            &ctx.fetch(&trap, 0, PAGE_SIZE as usize).await,
            &[0u8; PAGE_SIZE as usize],
            "the trap page (no decoy was followed)",
        );
    });
}

/// A read or write of 16 blocks at `slba` of namespace 1 through `buf`'s first two pages.
fn sixteen_blocks(opcode: u8, slba: u64, buf: &DmaBuffer) -> Command {
    rw(
        opcode,
        1,
        slba,
        16,
        buf.bus.get(),
        buf.bus.get() + PAGE_SIZE,
    )
}

#[test]
fn write_zeroes_reads_back_zero_and_spares_neighbours() {
    run("write-zeroes", Setup::default(), |ctx| async move {
        let data = pattern(3, 16 * 512);
        let buf = ctx.dma(2 * PAGE_SIZE);
        ctx.fill(&buf, 0, &data).await;
        let c = ctx.io(sixteen_blocks(io::WRITE, 64, &buf)).await;
        assert_eq!(c.status, Status::SUCCESS, "write");
        let c = ctx.io(rw(io::WRITE_ZEROES, 1, 68, 4, 0, 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "write zeroes");
        let out = ctx.dma(4 * PAGE_SIZE);
        let c = ctx.io(sixteen_blocks(io::READ, 64, &out)).await;
        assert_eq!(c.status, Status::SUCCESS, "read");
        let mut expected = data.clone();
        expected[4 * 512..8 * 512].fill(0);
        assert_bytes(
            &ctx.fetch(&out, 0, 16 * 512).await,
            &expected,
            "after write zeroes",
        );
        // No data moves, so MDTS does not limit Write Zeroes.
        let c = ctx.io(rw(io::WRITE_ZEROES, 1, 0, 65536, 0, 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "32 MiB write zeroes");
        let c = ctx
            .io(rw(io::WRITE_ZEROES, 1, BLOCKS_64M - 1, 2, 0, 0))
            .await;
        assert_eq!(
            c.status,
            Status::LBA_OUT_OF_RANGE,
            "write zeroes past the end"
        );
    });
}

#[test]
fn dataset_management_deallocates_its_ranges_and_checks_them_all_first() {
    run("dsm", Setup::default(), |ctx| async move {
        let data = pattern(5, 16 * 512);
        let buf = ctx.dma(2 * PAGE_SIZE);
        ctx.fill(&buf, 0, &data).await;
        let c = ctx.io(sixteen_blocks(io::WRITE, 64, &buf)).await;
        assert_eq!(c.status, Status::SUCCESS, "write");
        let list = ctx.dma(PAGE_SIZE);
        let dsm = |ranges: &[(u64, u32)], deallocate: bool| {
            let bytes: Vec<u8> = ranges
                .iter()
                .flat_map(|&(slba, blocks)| DsmRange { slba, blocks }.encode())
                .collect();
            let cmd = Command::from(IoCommand::DatasetManagement {
                nsid: 1,
                ranges: ranges.len() as u16,
                deallocate,
            })
            .with_prps(list.bus.get(), 0);
            (bytes, cmd)
        };
        // Hints alone change nothing; a range past the end fails the whole command, and
        // the range before it (76..78, which nothing below deallocates) is left alone too.
        for (ranges, deallocate, status) in [
            (&[(64, 16)][..], false, Status::SUCCESS),
            (
                &[(76, 2), (BLOCKS_64M - 1, 2)][..],
                true,
                Status::LBA_OUT_OF_RANGE,
            ),
        ] {
            let (bytes, cmd) = dsm(ranges, deallocate);
            ctx.fill(&list, 0, &bytes).await;
            assert_eq!(ctx.io(cmd).await.status, status, "{ranges:?}");
        }
        let (bytes, cmd) = dsm(&[(66, 2), (72, 3)], true);
        ctx.fill(&list, 0, &bytes).await;
        assert_eq!(ctx.io(cmd).await.status, Status::SUCCESS, "deallocate");
        let out = ctx.dma(2 * PAGE_SIZE);
        let c = ctx.io(sixteen_blocks(io::READ, 64, &out)).await;
        assert_eq!(c.status, Status::SUCCESS, "read");
        let mut expected = data.clone();
        expected[2 * 512..4 * 512].fill(0);
        expected[8 * 512..11 * 512].fill(0);
        assert_bytes(
            &ctx.fetch(&out, 0, 16 * 512).await,
            &expected,
            "after deallocation",
        );
        let (_, cmd) = dsm(&[(0, 1)], true);
        let wrong_ns = Command { nsid: 2, ..cmd };
        assert_eq!(
            ctx.io(wrong_ns).await.status,
            Status::INVALID_NAMESPACE,
            "namespace 2"
        );
    });
}

#[test]
fn flush() {
    run("flush", Setup::default(), |ctx| async move {
        let mut cmd = Command {
            opcode: io::FLUSH,
            nsid: 1,
            ..Command::default()
        };
        assert_eq!(
            ctx.io(cmd).await.status,
            Status::SUCCESS,
            "flush namespace 1"
        );
        cmd.nsid = 0xffff_ffff;
        assert_eq!(ctx.io(cmd).await.status, Status::SUCCESS, "flush all");
        cmd.nsid = 0;
        assert_eq!(
            ctx.io(cmd).await.status,
            Status::INVALID_NAMESPACE,
            "flush 0"
        );
        cmd.nsid = 2;
        assert_eq!(
            ctx.io(cmd).await.status,
            Status::INVALID_NAMESPACE,
            "flush 2"
        );
        ctx.dev
            .submit(
                0,
                BlockOp::Flush,
                1,
                0,
                0,
                ctx.os.alloc(PAGE_SIZE).expect("alloc"),
            )
            .await
            .expect("block layer flush");
    });
}

#[test]
fn namespaces_keep_their_data_separate() {
    let setup = Setup {
        params: r#"profile = "ramdisk", namespaces = 3, capacity = "64M""#,
        ..Setup::default()
    };
    run("namespaces", setup, |ctx| async move {
        assert_eq!(ctx.dev.namespaces().len(), 3);
        let buf = ctx.dma(PAGE_SIZE);
        for nsid in 1..=3u32 {
            ctx.fill(&buf, 0, &pattern(u64::from(nsid), 4096)).await;
            let c = ctx.io(rw(io::WRITE, nsid, 0, 8, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::SUCCESS, "write namespace {nsid}");
        }
        for nsid in 1..=3u32 {
            let c = ctx.io(rw(io::READ, nsid, 0, 8, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::SUCCESS, "read namespace {nsid}");
            assert_bytes(
                &ctx.fetch(&buf, 0, 4096).await,
                &pattern(u64::from(nsid), 4096),
                &format!("namespace {nsid}"),
            );
        }
        // The last block of namespace 1 and the first of namespace 2 do not overlap.
        ctx.fill(&buf, 0, &[0xaa; 512]).await;
        let c = ctx
            .io(rw(io::WRITE, 1, BLOCKS_64M - 1, 1, buf.bus.get(), 0))
            .await;
        assert_eq!(
            c.status,
            Status::SUCCESS,
            "write the last block of namespace 1"
        );
        let c = ctx.io(rw(io::READ, 2, 0, 8, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS);
        assert_bytes(
            &ctx.fetch(&buf, 0, 4096).await,
            &pattern(2, 4096),
            "namespace 2",
        );
        let c = ctx.io(rw(io::READ, 4, 0, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::INVALID_NAMESPACE, "namespace 4 of 3");
    });
}

// ---------------------------------------------------------------------------------------
// Error statuses
// ---------------------------------------------------------------------------------------

#[test]
fn invalid_opcodes() {
    run("opcodes", Setup::default(), |ctx| async move {
        for opcode in [0x03u8, 0x7f, 0xc5] {
            let c = ctx
                .admin(Command {
                    opcode,
                    ..Command::default()
                })
                .await;
            assert_eq!(c.status, Status::INVALID_OPCODE, "admin opcode {opcode:#x}");
        }
        for opcode in [0x05u8, 0x7f, 0xc5] {
            let c = ctx
                .io(Command {
                    opcode,
                    nsid: 1,
                    ..Command::default()
                })
                .await;
            assert_eq!(c.status, Status::INVALID_OPCODE, "I/O opcode {opcode:#x}");
        }
    });
}

#[test]
fn invalid_fields() {
    run("fields", Setup::default(), |ctx| async move {
        let buf = ctx.dma(33 * PAGE_SIZE);
        let c = ctx.admin(identify(0x55, 0, buf.bus.get())).await;
        assert_eq!(c.status, Status::INVALID_FIELD, "Identify CNS 0x55");
        let list = ctx.dma(PAGE_SIZE);
        let entries: Vec<u8> = (1..33)
            .flat_map(|i| (buf.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &entries).await;
        // 257 blocks of 512 B = 128.5 KiB > MDTS.
        let c = ctx
            .io(rw(io::READ, 1, 0, 257, buf.bus.get(), list.bus.get()))
            .await;
        assert_eq!(c.status, Status::INVALID_FIELD, "read > MDTS");
        let c = ctx
            .io(rw(io::WRITE, 1, 0, 257, buf.bus.get(), list.bus.get()))
            .await;
        assert_eq!(c.status, Status::INVALID_FIELD, "write > MDTS");
        let c = ctx
            .io(rw(io::READ, 1, 0, 256, buf.bus.get(), list.bus.get()))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "read = MDTS");
    });
}

#[test]
fn sgl_and_fused_commands_are_invalid_fields() {
    run("psdt-fuse", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (sq, cq) = raw_pair(&ctx, 2, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        for (flags, what) in [(0x40u8, "PSDT = 01 (SGL)"), (0x01, "FUSE = 01")] {
            let mut e = rw(io::READ, 1, 0, 1, buf.bus.get(), 0).to_bytes();
            e[1] = flags;
            sq.push_bytes(&ctx, e).await;
            sq.ring(&ctx).await;
            let c = cq.next(&ctx).await;
            assert_eq!(c.status, Status::INVALID_FIELD, "{what}");
        }
        sq.push(&ctx, rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
        sq.ring(&ctx).await;
        assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS, "plain read");
    });
}

#[test]
fn invalid_namespaces() {
    run("namespace-errors", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        for nsid in [0, 2, 0xffff_ffff] {
            let c = ctx.io(rw(io::READ, nsid, 0, 1, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::INVALID_NAMESPACE, "read nsid {nsid:#x}");
            let c = ctx.io(rw(io::WRITE, nsid, 0, 1, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::INVALID_NAMESPACE, "write nsid {nsid:#x}");
            let c = ctx
                .admin(identify(cns::NAMESPACE, nsid, buf.bus.get()))
                .await;
            assert_eq!(
                c.status,
                Status::INVALID_NAMESPACE,
                "identify nsid {nsid:#x}"
            );
        }
    });
}

#[test]
fn lba_out_of_range() {
    run("lba-range", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        let last = BLOCKS_64M - 1;
        let c = ctx.io(rw(io::READ, 1, last, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "the last block");
        let c = ctx.io(rw(io::READ, 1, last, 2, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::LBA_OUT_OF_RANGE, "read last + 1");
        let c = ctx.io(rw(io::WRITE, 1, last, 2, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::LBA_OUT_OF_RANGE, "write last + 1");
        let c = ctx
            .io(rw(io::READ, 1, BLOCKS_64M, 1, buf.bus.get(), 0))
            .await;
        assert_eq!(c.status, Status::LBA_OUT_OF_RANGE, "read NSZE");
        let c = ctx.io(rw(io::READ, 1, u64::MAX, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::LBA_OUT_OF_RANGE, "SLBA that overflows");
    });
}

#[test]
fn data_transfer_errors_on_unclaimed_addresses() {
    let cluster = run("dte", Setup::default(), |ctx| async move {
        let c = ctx.io(rw(io::READ, 1, 0, 1, UNCLAIMED, 0)).await;
        assert_eq!(c.status, Status::DATA_TRANSFER_ERROR, "read into nowhere");
        let c = ctx.io(rw(io::WRITE, 1, 0, 1, UNCLAIMED, 0)).await;
        assert_eq!(c.status, Status::DATA_TRANSFER_ERROR, "write from nowhere");
        // A PRP list the controller cannot fetch.
        let buf = ctx.dma(4 * PAGE_SIZE);
        let c = ctx
            .io(rw(io::READ, 1, 0, 24, buf.bus.get(), UNCLAIMED))
            .await;
        assert_eq!(c.status, Status::DATA_TRANSFER_ERROR, "PRP list in nowhere");
        let c = ctx.admin(identify(cns::CONTROLLER, 0, UNCLAIMED)).await;
        assert_eq!(
            c.status,
            Status::DATA_TRANSFER_ERROR,
            "identify into nowhere"
        );
        // The controller is still healthy.
        assert_eq!(ctx.reg32(reg::CSTS).await & csts::CFS, 0, "CSTS.CFS");
        let c = ctx.io(rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "a good read afterwards");
    });
    let faults = cluster.machine.faults();
    assert!(
        faults.iter().any(|f| matches!(
            f.error,
            AccessError::UnsupportedRequest { addr, .. } if addr.get() == UNCLAIMED
        )),
        "an unsupported request is recorded: {faults:?}"
    );
}

#[test]
fn data_transfer_error_on_an_iommu_fault() {
    const IOVA: u64 = 1 << 39;
    let setup = Setup {
        iommu: true,
        ..Setup::default()
    };
    let cluster = run("iommu", setup, |ctx| async move {
        // Mapped memory works.
        let buf = ctx.dma(PAGE_SIZE);
        assert_ne!(buf.bus.get(), buf.cpu.get(), "the IOMMU translates");
        ctx.fill(&buf, 0, &pattern(9, 512)).await;
        let c = ctx.io(rw(io::WRITE, 1, 5, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "write from mapped memory");
        // An IOVA nothing is mapped at.
        let c = ctx.io(rw(io::READ, 1, 5, 1, IOVA, 0)).await;
        assert_eq!(
            c.status,
            Status::DATA_TRANSFER_ERROR,
            "read into unmapped IOVA"
        );
        // The physical address of mapped memory is not a device address.
        let c = ctx.io(rw(io::READ, 1, 5, 1, buf.cpu.get(), 0)).await;
        assert_eq!(c.status, Status::DATA_TRANSFER_ERROR, "read into a raw PA");
        let c = ctx.io(rw(io::READ, 1, 5, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "read into mapped memory");
        assert_bytes(
            &ctx.fetch(&buf, 0, 512).await,
            &pattern(9, 512),
            "read back",
        );
    });
    let faults = cluster.machine.faults();
    assert!(
        faults.iter().any(|f| matches!(
            f.error,
            AccessError::IommuFault { addr, access: "write", .. } if addr.get() == IOVA
        )),
        "an IOMMU fault on the IOVA is recorded: {faults:?}"
    );
}

#[test]
fn prp_list_entry_with_an_offset() {
    run("prp-offset", Setup::default(), |ctx| async move {
        let buf = ctx.dma(4 * PAGE_SIZE);
        let list = ctx.dma(PAGE_SIZE);
        let entries: Vec<u8> = [PAGE_SIZE, 2 * PAGE_SIZE + 512, 3 * PAGE_SIZE]
            .iter()
            .flat_map(|o| (buf.bus.get() + o).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &entries).await;
        let c = ctx
            .io(rw(io::READ, 1, 0, 32, buf.bus.get(), list.bus.get()))
            .await;
        assert_eq!(
            c.status,
            Status::PRP_OFFSET_INVALID,
            "list entry 2 has an offset"
        );
        // Two pages: PRP2 is the second page itself and must not have an offset.
        let c = ctx
            .io(rw(
                io::READ,
                1,
                0,
                16,
                buf.bus.get(),
                buf.bus.get() + PAGE_SIZE + 8,
            ))
            .await;
        assert_eq!(c.status, Status::PRP_OFFSET_INVALID, "PRP2 with an offset");
        let c = ctx.io(rw(io::READ, 1, 0, 1, buf.bus.get() + 2, 0)).await;
        assert_eq!(
            c.status,
            Status::PRP_OFFSET_INVALID,
            "PRP1 not dword aligned"
        );
    });
}

// ---------------------------------------------------------------------------------------
// Registers
// ---------------------------------------------------------------------------------------

#[test]
fn capability_and_version_registers() {
    run("cap", Setup::default(), |ctx| async move {
        let c = ctx.reg64(reg::CAP).await;
        assert_eq!(cap::mqes(c), 4095, "MQES");
        assert!(cap::cqr(c), "CQR");
        assert_eq!(cap::dstrd(c), 0, "DSTRD");
        assert_eq!(cap::css(c) & 1, 1, "CSS: NVM command set");
        assert!(cap::to(c) >= 1, "TO");
        assert_eq!(cap::mpsmin(c), 0, "MPSMIN: 4 KiB");
        assert!(!cap::cmbs(c), "CMBS without a CMB");
        let lo = u64::from(ctx.reg32(reg::CAP).await);
        let hi = u64::from(ctx.reg32(reg::CAP + 4).await);
        assert_eq!(lo | hi << 32, c, "CAP as two dwords");
        assert_eq!(ctx.reg32(reg::VS).await, 0x0001_0400, "VS 1.4.0");
        assert_eq!(ctx.reg32(reg::CMBSZ).await, 0, "CMBSZ without a CMB");
        let cc = ctx.reg32(reg::CC).await;
        assert_eq!(cc & cc::EN, cc::EN, "CC.EN after probe");
        assert_eq!((cc::iosqes(cc), cc::iocqes(cc)), (6, 4), "IOSQES, IOCQES");
        assert_eq!(ctx.reg32(reg::CSTS).await, csts::RDY, "CSTS");
        assert_eq!(ctx.reg32(reg::AQA).await, 31 | (31 << 16), "AQA");
        // CAP is read-only: a (posted) store to it changes nothing.
        let _ = ctx.bar.write32(reg::CAP, 0).await;
        assert_eq!(ctx.reg64(reg::CAP).await, c, "CAP unchanged");
    });
}

#[test]
fn reset_follows_cc_en_after_a_delay_and_drops_io_queues() {
    run("reset", Setup::default(), |ctx| async move {
        let delay = ctx.ctrl.config().ready_delay;
        let buf = ctx.dma(PAGE_SIZE);
        ctx.fill(&buf, 0, &pattern(5, 512)).await;
        let c = ctx.io(rw(io::WRITE, 1, 77, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "write before reset");

        let cc0 = ctx.reg32(reg::CC).await;
        ctx.bar
            .write32(reg::CC, cc0 & !cc::EN)
            .await
            .expect("CC.EN = 0");
        assert_eq!(
            ctx.reg32(reg::CSTS).await & csts::RDY,
            csts::RDY,
            "RDY still set right after CC.EN = 0"
        );
        let took = ctx.wait_ready(false).await;
        assert!(
            took.as_ps() >= delay.as_ps() / 2,
            "RDY dropped after {took:?}, delay {delay:?}"
        );

        // A fresh admin queue pair, as a driver re-initialising would.
        let asq = RawSq::host(&ctx, 0, 8);
        let acq = RawCq::new(&ctx, 0, 8);
        ctx.bar.write32(reg::AQA, 7 | (7 << 16)).await.expect("AQA");
        ctx.bar.write64(reg::ASQ, asq.bus()).await.expect("ASQ");
        ctx.bar
            .write64(reg::ACQ, acq.buf.bus.get())
            .await
            .expect("ACQ");
        ctx.bar
            .write32(reg::CC, cc::EN | cc::IOSQES_64 | cc::IOCQES_16)
            .await
            .expect("CC.EN = 1");
        assert_eq!(ctx.reg32(reg::CSTS).await & csts::RDY, 0, "RDY not yet set");
        let took = ctx.wait_ready(true).await;
        assert!(
            took.as_ps() >= delay.as_ps() / 2,
            "RDY set after {took:?}, delay {delay:?}"
        );
        assert_eq!(ctx.reg32(reg::CSTS).await & csts::CFS, 0, "no fatal status");

        let admin = |cmd: Command| {
            let (asq, acq, ctx) = (&asq, &acq, &ctx);
            async move {
                asq.push(ctx, cmd).await;
                asq.ring(ctx).await;
                acq.next(ctx).await
            }
        };
        // The old I/O queues are gone: SQ 1 cannot be created on the old CQ 1.
        let c = admin(create_sq(1, 255, buf.bus.get(), 1)).await;
        assert_eq!(
            c.status,
            Status::COMPLETION_QUEUE_INVALID,
            "old CQ 1 is gone"
        );
        assert!(c.phase, "first pass of the new admin CQ");
        assert_eq!((c.sq_id, c.sq_head), (0, 1));
        let c = admin(delete(admin::DELETE_IO_SQ, 1)).await;
        assert_eq!(c.status, Status::INVALID_QUEUE_ID, "old SQ 1 is gone");
        // With no I/O queue, Number of Queues may be set again; grants are capped.
        let c = admin(features(
            admin::SET_FEATURES,
            feature::NUMBER_OF_QUEUES,
            99 | (99 << 16),
        ))
        .await;
        let max = u32::from(ctx.ctrl.config().queue_pairs - 2);
        assert_eq!((c.status, c.result), (Status::SUCCESS, max | (max << 16)));
        // New I/O queues work, and the namespace kept its data across the reset.
        let cq = RawCq::new(&ctx, 1, 4);
        let c = admin(create_cq(1, 3, cq.buf.bus.get(), None)).await;
        assert_eq!(c.status, Status::SUCCESS, "create CQ 1");
        let sq = RawSq::host(&ctx, 1, 4);
        let c = admin(create_sq(1, 3, sq.bus(), 1)).await;
        assert_eq!(c.status, Status::SUCCESS, "create SQ 1");
        let out = ctx.dma(PAGE_SIZE);
        sq.push(&ctx, rw(io::READ, 1, 77, 1, out.bus.get(), 0))
            .await;
        sq.ring(&ctx).await;
        assert_eq!(
            cq.next(&ctx).await.status,
            Status::SUCCESS,
            "read after reset"
        );
        assert_bytes(
            &ctx.fetch(&out, 0, 512).await,
            &pattern(5, 512),
            "data survives",
        );
    });
}

#[test]
fn invalid_doorbell_writes_are_ignored() {
    run("doorbells", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        // Queue 1 has 256 entries.
        for (offset, value, what) in [
            (
                spec::doorbell_offset(1, false, 0),
                5000,
                "SQ 1 tail beyond the queue",
            ),
            (
                spec::doorbell_offset(1, false, 0),
                256,
                "SQ 1 tail = entries",
            ),
            (
                spec::doorbell_offset(1, true, 0),
                4000,
                "CQ 1 head beyond the queue",
            ),
            (
                spec::doorbell_offset(20, false, 0),
                1,
                "SQ 20 does not exist",
            ),
        ] {
            ctx.bar.write32(offset, value).await.expect(what);
            assert_eq!(ctx.reg32(reg::CSTS).await, csts::RDY, "{what}: CSTS");
            let c = ctx.io(rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::SUCCESS, "{what}: queue 1 keeps working");
        }
        let c = ctx
            .admin(features(admin::GET_FEATURES, feature::NUMBER_OF_QUEUES, 0))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "admin queue keeps working");
    });
}

#[test]
fn interrupt_mode_completes_through_msix() {
    let setup = Setup {
        mode: CompletionMode::Interrupt,
        ..Setup::default()
    };
    run("msix", setup, |ctx| async move {
        let msix = NvmeController::msix_layout(ctx.ctrl.config().queue_pairs);
        let (table, pba) = (u64::from(msix.table_offset), u64::from(msix.pba_offset));
        // MSI-X table entries: address (8 bytes), data (4), vector control (4).
        let entry = |v: u64| table + pci::msix::ENTRY_SIZE * v;
        let control = |v: u64| entry(v) + 12;
        const MASKED: u32 = pci::msix::VECTOR_MASKED;
        let buf = ctx.dma(PAGE_SIZE);
        let c = ctx.io(rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
        assert_eq!(c.status, Status::SUCCESS, "I/O in interrupt mode");
        let c = ctx
            .admin(features(admin::GET_FEATURES, feature::NUMBER_OF_QUEUES, 0))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "admin in interrupt mode");
        // Table entries 0..=2 are programmed and unmasked.
        for v in 0..3u64 {
            let addr = ctx.reg64(entry(v)).await;
            assert_ne!(addr, 0, "vector {v} address");
            assert_eq!(
                ctx.reg32(control(v)).await & MASKED,
                0,
                "vector {v} unmasked"
            );
        }
        assert_eq!(ctx.reg32(pba).await & 0b111, 0, "nothing pending");

        // Mask queue 1's vector: the controller posts the completion but holds the
        // message as a pending bit, and the driver — which only learns of completions from
        // the interrupt — does not see the command finish until the vector is unmasked.
        ctx.bar
            .write32(control(1), MASKED)
            .await
            .expect("mask vector 1");
        let done: Rc<Cell<Option<(Status, smartio_platform::SimTime)>>> = Rc::new(Cell::new(None));
        let (dev, cpu, flag) = (ctx.dev.clone(), ctx.cpu.clone(), done.clone());
        let prp = buf.bus.get();
        ctx.os.machine().spawn(async move {
            let c = dev
                .io_raw(0, rw(io::READ, 1, 8, 1, prp, 0))
                .await
                .expect("I/O command delivered");
            flag.set(Some((c.status, cpu.now())));
        });
        ctx.cpu.sleep(SimDuration::from_us(200)).await;
        assert_eq!(done.get(), None, "no completion while the vector is masked");
        assert_eq!(
            ctx.reg32(pba).await & 0b111,
            0b010,
            "the controller holds vector 1's message as pending"
        );
        let unmasked_at = ctx.cpu.now();
        ctx.bar
            .write32(control(1), 0)
            .await
            .expect("unmask vector 1");
        ctx.cpu.sleep(SimDuration::from_us(20)).await;
        let (status, at) = done.get().expect("the completion arrived after the unmask");
        assert_eq!(status, Status::SUCCESS);
        // Not before the unmask (on an engine without timing, at the same instant).
        assert!(
            at >= unmasked_at,
            "completed at {at:?}, unmasked at {unmasked_at:?}"
        );
        assert_eq!(ctx.reg32(pba).await & 0b111, 0, "the pending bit was sent");
    });
}

// ---------------------------------------------------------------------------------------
// Controller memory buffer
// ---------------------------------------------------------------------------------------

#[test]
fn submission_queue_in_the_controller_memory_buffer() {
    let setup = Setup {
        params: r#"profile = "ramdisk", capacity = "64M", cmb = "1M""#,
        ..Setup::default()
    };
    run("cmb", setup, |ctx| async move {
        let c = ctx.reg64(reg::CAP).await;
        assert!(cap::cmbs(c), "CAP.CMBS");
        let sz = ctx.reg32(reg::CMBSZ).await;
        assert_eq!(sz & 1, 1, "CMBSZ.SQS");
        assert_eq!(
            sz & 0b1_1110,
            0,
            "CMBSZ: no CQ, PRP lists, read or write data"
        );
        assert_eq!((sz >> 8) & 0xf, 0, "CMBSZ.SZU: 4 KiB");
        assert_eq!(sz >> 12, 256, "CMBSZ.SZ: 1 MiB");
        let loc = ctx.reg32(reg::CMBLOC).await;
        assert_eq!((loc & 7, loc >> 12), (2, 0), "CMBLOC: BAR2, offset 0");

        let handle = ctx.os.device("nvme0").expect("nvme0 device");
        let bar2 = handle.map_bar(2).expect("map BAR2");
        let base = handle
            .bars()
            .iter()
            .find(|b| b.index == 2)
            .expect("BAR2")
            .base;
        assert_eq!(bar2.window().size, 1 << 20);

        ctx.free_pair(2).await;
        let cq = RawCq::new(&ctx, 2, 8);
        let c = ctx.admin(create_cq(2, 7, cq.buf.bus.get(), None)).await;
        assert_eq!(c.status, Status::SUCCESS, "create CQ 2 in host memory");
        let sq = RawSq {
            qid: 2,
            entries: 8,
            memory: SqMemory::Cmb(bar2, 0x1000),
            tail: Cell::new(0),
        };
        assert_eq!(sq.bus(), base.get() + 0x1000);
        let c = ctx.admin(create_sq(2, 7, sq.bus(), 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "create SQ 2 in the CMB");

        let data = pattern(11, 8192);
        let src = ctx.dma(2 * PAGE_SIZE);
        let dst = ctx.dma(2 * PAGE_SIZE);
        ctx.fill(&src, 0, &data).await;
        sq.push(
            &ctx,
            rw(
                io::WRITE,
                1,
                300,
                16,
                src.bus.get(),
                src.bus.get() + PAGE_SIZE,
            ),
        )
        .await;
        sq.push(
            &ctx,
            rw(
                io::READ,
                1,
                300,
                16,
                dst.bus.get(),
                dst.bus.get() + PAGE_SIZE,
            ),
        )
        .await;
        // Ring once for both; they may complete in either order.
        sq.ring(&ctx).await;
        let a = cq.next(&ctx).await;
        let b = cq.next(&ctx).await;
        assert_eq!((a.status, b.status), (Status::SUCCESS, Status::SUCCESS));
        assert_eq!((a.sq_id, b.sq_id), (2, 2));
        // The read ran after the write only if fetched after it: check data with a second read.
        sq.push(
            &ctx,
            rw(
                io::READ,
                1,
                300,
                16,
                dst.bus.get(),
                dst.bus.get() + PAGE_SIZE,
            ),
        )
        .await;
        sq.ring(&ctx).await;
        let c = cq.next(&ctx).await;
        assert_eq!((c.status, c.sq_head), (Status::SUCCESS, 3));
        assert_bytes(
            &ctx.fetch(&dst, 0, 8192).await,
            &data,
            "data via a CMB queue",
        );
        // The host can read back what it stored in the CMB.
        let mut raw = [0u8; SQE_SIZE];
        match &sq.memory {
            SqMemory::Cmb(m, off) => m.read(*off, &mut raw).await.expect("CMB load"),
            SqMemory::Host(_) => unreachable!("the SQ is in the CMB"),
        }
        assert_eq!(Command::from_bytes(&raw).0.opcode, io::WRITE);
    });
}
