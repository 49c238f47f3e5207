//! Controller behaviour the conformance suite left unobserved, found by mutation testing
//! (`docs/mutants.md`): register halves and masks, the rules CC.EN checks, shutdown,
//! features and log-page limits, data gathered from scattered pages, a full completion
//! queue, 64-bit LBAs, SMART counts, a fatal fetch, the controller memory buffer's edges,
//! and commands still waiting in a submission queue when it is deleted.
//!
//! Same harness as `nvme_conformance.rs`: a local chassis whose controller the native driver
//! has probed; raw commands through the driver's passthrough or through queues the test
//! builds itself.

use crate::common;
use common::nvme::*;
use common::pattern;
use smartio_platform::pci;

/// CSTS.SHST (bits 3:2): shutdown processing complete.
const SHST_COMPLETE: u32 = 2 << 2;
/// CC.SHN (bits 15:14): normal shutdown notification.
const SHN_NORMAL: u32 = 1 << 14;
/// CC.CSS (bits 6:4) = 1: a command set the controller does not support.
const CSS_OTHER: u32 = 1 << 4;
/// CC.MPS (bits 10:7) = 1: 8 KiB pages, which the controller does not support.
const MPS_8K: u32 = 1 << 7;

/// Disables the controller (the driver's admin queue goes with it) and waits for RDY = 0.
async fn disable(ctx: &Ctx) {
    ctx.bar.write32(reg::CC, 0).await.expect("CC.EN = 0");
    ctx.wait_ready(false).await;
}

/// I/O queue pair 2 made (after the driver's was freed): a CQ of `cq_entries` and an SQ of
/// `sq_entries` in host memory, both created successfully.
async fn make_pair_2(ctx: &Ctx, cq_entries: u16, sq_entries: u16) -> (RawCq, RawSq) {
    let cq = RawCq::new(ctx, 2, cq_entries);
    let c = ctx
        .admin(create_cq(2, cq_entries - 1, cq.buf.bus.get(), None))
        .await;
    assert_eq!(c.status, Status::SUCCESS, "create CQ 2");
    let sq = RawSq::host(ctx, 2, sq_entries);
    let c = ctx.admin(create_sq(2, sq_entries - 1, sq.bus(), 2)).await;
    assert_eq!(c.status, Status::SUCCESS, "create SQ 2");
    (cq, sq)
}

#[test]
fn admin_queue_bases_take_a_64_bit_store_or_two_32_bit_halves_and_read_back_either_way() {
    run("reg-halves", Setup::default(), |ctx| async move {
        disable(&ctx).await;
        let (asq, acq) = (0x1234_5678_9abc_d000u64, 0x0fed_cba9_8765_4000u64);
        for (at, value) in [(reg::ASQ, asq), (reg::ACQ, acq)] {
            ctx.bar.write32(at, value as u32).await.expect("low half");
            ctx.bar
                .write32(at + 4, (value >> 32) as u32)
                .await
                .expect("high half");
            assert_eq!(ctx.reg64(at).await, value, "{at:#x} as 64 bits");
            assert_eq!(ctx.reg32(at).await, value as u32, "{at:#x} low half");
            assert_eq!(
                ctx.reg32(at + 4).await,
                (value >> 32) as u32,
                "{at:#x} high"
            );
            // A store to one half keeps the other.
            ctx.bar.write32(at, 0x3000).await.expect("low half again");
            assert_eq!(ctx.reg64(at).await, (value & !0xffff_ffff) | 0x3000);
            ctx.bar.write32(at + 4, 7).await.expect("high half again");
            assert_eq!(ctx.reg64(at).await, 7 << 32 | 0x3000);
            ctx.bar.write64(at, 0x5000).await.expect("64-bit store");
            assert_eq!(ctx.reg64(at).await, 0x5000, "{at:#x} after a 64-bit store");
        }
    });
}

#[test]
fn interrupt_mask_set_and_clear_change_only_the_bits_written() {
    run("intms", Setup::default(), |ctx| async move {
        assert_eq!(ctx.reg32(reg::INTMS).await, 0, "nothing masked after probe");
        ctx.bar.write32(reg::INTMS, 0b101).await.expect("INTMS");
        assert_eq!(ctx.reg32(reg::INTMS).await, 0b101);
        ctx.bar.write32(reg::INTMS, 0b010).await.expect("INTMS");
        assert_eq!(ctx.reg32(reg::INTMS).await, 0b111, "set adds bits");
        ctx.bar.write32(reg::INTMC, 0b001).await.expect("INTMC");
        assert_eq!(
            ctx.reg32(reg::INTMC).await,
            0b110,
            "clear removes only bit 0"
        );
        assert_eq!(ctx.reg32(reg::INTMS).await, 0b110, "both read the mask");
    });
}

#[test]
fn without_a_memory_buffer_cmbloc_and_cmbsz_read_zero() {
    run("no-cmb", Setup::default(), |ctx| async move {
        assert_eq!(ctx.reg32(reg::CMBLOC).await, 0, "CMBLOC");
        assert_eq!(ctx.reg32(reg::CMBSZ).await, 0, "CMBSZ");
    });
}

#[test]
fn a_normal_shutdown_reports_complete_and_cc_keeps_its_other_fields_while_enabled() {
    run("shutdown", Setup::default(), |ctx| async move {
        let cc0 = ctx.reg32(reg::CC).await;
        assert_eq!(
            cc0,
            cc::EN | cc::IOSQES_64 | cc::IOCQES_16,
            "CC after probe"
        );
        // While enabled only SHN (and EN) may change: the MPS change is ignored.
        ctx.bar
            .write32(reg::CC, cc0 | SHN_NORMAL | MPS_8K)
            .await
            .expect("CC.SHN");
        assert_eq!(ctx.reg32(reg::CC).await, cc0 | SHN_NORMAL);
        assert_eq!(
            ctx.reg32(reg::CSTS).await,
            csts::RDY | SHST_COMPLETE,
            "CSTS.SHST: shutdown complete, still ready"
        );
    });
}

#[test]
fn enabling_refuses_each_invalid_admin_configuration_alone_with_cfs() {
    run("enable-rules", Setup::default(), |ctx| async move {
        let delay = ctx.ctrl.config().ready_delay;
        disable(&ctx).await;
        let (asq, acq) = (ctx.dma(PAGE_SIZE), ctx.dma(PAGE_SIZE));
        let good_cc = cc::EN | cc::IOSQES_64 | cc::IOCQES_16;
        let (good_aqa, base_sq, base_cq) = (7 | 7 << 16, asq.bus.get(), acq.bus.get());
        let configure = |cc: u32, aqa: u32, sq: u64, cq: u64| {
            let ctx = &ctx;
            async move {
                ctx.bar.write32(reg::AQA, aqa).await.expect("AQA");
                ctx.bar.write64(reg::ASQ, sq).await.expect("ASQ");
                ctx.bar.write64(reg::ACQ, cq).await.expect("ACQ");
                ctx.bar.write32(reg::CC, cc).await.expect("CC");
                ctx.cpu.sleep(delay + delay).await;
                ctx.reg32(reg::CSTS).await
            }
        };
        let cases = [
            ("CC.CSS", good_cc | CSS_OTHER, good_aqa, base_sq, base_cq),
            ("CC.MPS", good_cc | MPS_8K, good_aqa, base_sq, base_cq),
            ("AQA.ASQS of 1 entry", good_cc, 7 << 16, base_sq, base_cq),
            ("AQA.ACQS of 1 entry", good_cc, 7, base_sq, base_cq),
            ("ASQ off a page", good_cc, good_aqa, base_sq + 64, base_cq),
            ("ACQ off a page", good_cc, good_aqa, base_sq, base_cq + 64),
        ];
        for (what, cc, aqa, sq, cq) in cases {
            assert_eq!(
                configure(cc, aqa, sq, cq).await,
                csts::CFS,
                "{what}: CFS, not RDY"
            );
            // A valid enable clears CFS (a reset alone does not: the controller never
            // became enabled), then a reset, before the next case.
            let valid = configure(good_cc, good_aqa, base_sq, base_cq).await;
            assert_eq!(valid, csts::RDY, "{what}: then a valid enable");
            disable(&ctx).await;
            assert_eq!(ctx.reg32(reg::CSTS).await, 0, "{what}: reset");
        }
        // A refused enable is tried again on the next CC write: with the smallest valid
        // admin queues (two entries each) it succeeds and CFS clears.
        assert_eq!(
            configure(good_cc, 1 << 16, base_sq, base_cq).await,
            csts::CFS
        );
        assert_eq!(
            configure(good_cc, 1 | 1 << 16, base_sq, base_cq).await,
            csts::RDY,
            "two-entry admin queues are valid"
        );
        // And they work: one Identify through them.
        let (sq, cq) = (
            RawSq {
                qid: 0,
                entries: 2,
                memory: SqMemory::Host(asq),
                tail: std::cell::Cell::new(0),
            },
            RawCq {
                qid: 0,
                entries: 2,
                buf: acq,
                head: std::cell::Cell::new(0),
                phase: std::cell::Cell::new(true),
            },
        );
        let page = ctx.dma(PAGE_SIZE);
        sq.push(&ctx, identify(cns::CONTROLLER, 0, page.bus.get()))
            .await;
        sq.ring(&ctx).await;
        let c = cq.next(&ctx).await;
        assert_eq!((c.status, c.sq_head), (Status::SUCCESS, 1));
        assert_eq!(ctx.fetch(&page, id_ctrl::MDTS as u64, 1).await, [5], "MDTS");
    });
}

#[test]
fn interrupt_coalescing_keeps_the_low_16_bits_it_was_set_to() {
    run("coalescing", Setup::default(), |ctx| async move {
        let c = ctx
            .admin(features(
                admin::SET_FEATURES,
                feature::INTERRUPT_COALESCING,
                0x1234_5678,
            ))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "set");
        let c = ctx
            .admin(features(
                admin::GET_FEATURES,
                feature::INTERRUPT_COALESCING,
                0,
            ))
            .await;
        assert_eq!((c.status, c.result), (Status::SUCCESS, 0x5678), "get");
    });
}

#[test]
fn a_log_page_may_be_exactly_the_largest_transfer_long_and_no_longer() {
    run("log-mdts", Setup::default(), |ctx| async move {
        let max = 32 * PAGE_SIZE; // 4 KiB << MDTS 5
        let buf = ctx.dma(max + PAGE_SIZE);
        ctx.fill(&buf, 0, &vec![0xee; (max + PAGE_SIZE) as usize])
            .await;
        let list = ctx.dma(PAGE_SIZE);
        let entries: Vec<u8> = (1..33)
            .flat_map(|i| (buf.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &entries).await;
        let mut cmd = get_log(log::SMART_HEALTH, max as u32, buf.bus.get());
        cmd.prp2 = list.bus.get();
        let c = ctx.admin(cmd).await;
        assert_eq!(c.status, Status::SUCCESS, "128 KiB: exactly MDTS");
        let got = ctx.fetch(&buf, 0, (max + PAGE_SIZE) as usize).await;
        assert_eq!(got[3], 100, "the SMART page's available spare");
        assert!(
            got[log::SMART_SIZE..max as usize].iter().all(|&b| b == 0),
            "beyond the page: zeros"
        );
        assert!(
            got[max as usize..].iter().all(|&b| b == 0xee),
            "nothing past"
        );
        let mut cmd = get_log(log::SMART_HEALTH, max as u32 + 4, buf.bus.get());
        cmd.prp2 = list.bus.get();
        assert_eq!(
            ctx.admin(cmd).await.status,
            Status::INVALID_FIELD,
            "4 bytes more"
        );
        // NUMDU (dword 11) counts too: 64 Ki dwords more than its low half says.
        let mut cmd = get_log(log::SMART_HEALTH, 512, buf.bus.get());
        cmd.cdw[1] = 1;
        assert_eq!(
            ctx.admin(cmd).await.status,
            Status::INVALID_FIELD,
            "NUMDU = 1"
        );
    });
}

#[test]
fn a_write_gathers_its_data_from_pages_listed_in_reverse_order() {
    run("gather", Setup::default(), |ctx| async move {
        let data = pattern(31, 4 * PAGE_SIZE as usize);
        let src = ctx.dma(4 * PAGE_SIZE);
        ctx.fill(&src, 0, &data).await;
        // PRP1 = page 3, then pages 2, 1, 0: the data on disk is the pages reversed.
        let list = ctx.dma(PAGE_SIZE);
        let entries: Vec<u8> = [2u64, 1, 0]
            .iter()
            .flat_map(|i| (src.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &entries).await;
        let c = ctx
            .io(rw(
                io::WRITE,
                1,
                400,
                32,
                src.bus.get() + 3 * PAGE_SIZE,
                list.bus.get(),
            ))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "gathered write");
        let dst = ctx.dma(4 * PAGE_SIZE);
        let plain: Vec<u8> = (1..4u64)
            .flat_map(|i| (dst.bus.get() + i * PAGE_SIZE).to_le_bytes())
            .collect();
        ctx.fill(&list, 0, &plain).await;
        let c = ctx
            .io(rw(io::READ, 1, 400, 32, dst.bus.get(), list.bus.get()))
            .await;
        assert_eq!(c.status, Status::SUCCESS, "plain read");
        let page = |i: usize| &data[i * PAGE_SIZE as usize..(i + 1) * PAGE_SIZE as usize];
        let expected: Vec<u8> = [3, 2, 1, 0]
            .iter()
            .flat_map(|&i| page(i).to_vec())
            .collect();
        assert_bytes(
            &ctx.fetch(&dst, 0, 4 * PAGE_SIZE as usize).await,
            &expected,
            "pages",
        );
    });
}

#[test]
fn a_full_completion_queue_holds_the_next_completion_until_its_head_moves() {
    run("cq-full", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        // A 4-entry CQ holds 3 completions; the SQ takes 4 commands.
        let (cq, sq) = make_pair_2(&ctx, 4, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        for cid in 0..4u16 {
            let mut cmd = rw(io::READ, 1, u64::from(cid), 1, buf.bus.get(), 0);
            cmd.cid = 0x40 + cid;
            sq.push(&ctx, cmd).await;
        }
        sq.ring(&ctx).await;
        ctx.cpu.sleep(SimDuration::from_us(100)).await;
        let slot = |i: u64| ctx.fetch(&cq.buf, i * CQE_SIZE as u64, CQE_SIZE);
        for i in 0..3 {
            assert!(
                Completion::from_bytes(&slot(i).await).phase,
                "slot {i} posted"
            );
        }
        assert!(
            slot(3).await.iter().all(|&b| b == 0),
            "the fourth completion waits: the queue is full"
        );
        let mut cids = Vec::new();
        for _ in 0..4 {
            let c = cq.next(&ctx).await;
            assert_eq!(c.status, Status::SUCCESS);
            cids.push(c.cid);
        }
        cids.sort_unstable();
        assert_eq!(cids, [0x40, 0x41, 0x42, 0x43], "each completed once");
    });
}

/// Reading a doorbell is vendor specific; this controller answers with the pointer last
/// written, and 0 for a queue that does not exist (so a deleted queue's doorbells read 0).
#[test]
fn a_doorbell_reads_its_last_pointer_and_zero_once_its_queue_is_deleted() {
    run("doorbell-read", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (sq_bell, cq_bell) = (
            spec::doorbell_offset(2, false, 0),
            spec::doorbell_offset(2, true, 0),
        );
        assert_eq!(ctx.reg32(sq_bell).await, 0, "no SQ 2");
        assert_eq!(ctx.reg32(cq_bell).await, 0, "no CQ 2");
        let (cq, sq) = make_pair_2(&ctx, 4, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        for lba in 0..3u64 {
            sq.push(&ctx, rw(io::READ, 1, lba, 1, buf.bus.get(), 0))
                .await;
        }
        sq.ring(&ctx).await;
        for _ in 0..3 {
            assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS);
        }
        assert_eq!(ctx.reg32(sq_bell).await, 3, "the SQ tail written");
        assert_eq!(ctx.reg32(cq_bell).await, 3, "the CQ head written");
        ctx.free_pair(2).await;
        assert_eq!(ctx.reg32(sq_bell).await, 0, "SQ 2 deleted");
        assert_eq!(ctx.reg32(cq_bell).await, 0, "CQ 2 deleted");
    });
}

#[test]
fn an_lba_with_high_bits_set_is_out_of_range_not_wrapped() {
    run("lba-64", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        for slba in [1u64 << 32, (1 << 32) | 5, 1 << 63] {
            let c = ctx.io(rw(io::READ, 1, slba, 1, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::LBA_OUT_OF_RANGE, "read at LBA {slba:#x}");
        }
    });
}

#[test]
fn write_zeroes_counts_as_a_host_write_command() {
    run("wz-smart", Setup::default(), |ctx| async move {
        let writes = |p: &[u8]| le128(p, 80);
        let smart = || ctx.dev.log_page(log::SMART_HEALTH, log::SMART_SIZE as u32);
        let before = smart().await.expect("SMART log");
        let c = ctx.io(rw(io::WRITE_ZEROES, 1, 0, 8, 0, 0)).await;
        assert_eq!(c.status, Status::SUCCESS);
        let after = smart().await.expect("SMART log");
        assert_eq!(writes(&after), writes(&before) + 1, "Host Write Commands");
    });
}

#[test]
fn a_submission_queue_the_controller_cannot_fetch_is_a_fatal_status() {
    run("sq-unreachable", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let cq = RawCq::new(&ctx, 2, 4);
        let c = ctx.admin(create_cq(2, 3, cq.buf.bus.get(), None)).await;
        assert_eq!(c.status, Status::SUCCESS, "create CQ 2");
        let c = ctx.admin(create_sq(2, 3, UNCLAIMED, 2)).await;
        assert_eq!(
            c.status,
            Status::SUCCESS,
            "create SQ 2 where nothing answers"
        );
        assert_eq!(ctx.reg32(reg::CSTS).await, csts::RDY);
        ctx.bar
            .write32(spec::doorbell_offset(2, false, 0), 1)
            .await
            .expect("SQ 2 tail doorbell");
        ctx.cpu.sleep(SimDuration::from_us(50)).await;
        assert_eq!(
            ctx.reg32(reg::CSTS).await,
            csts::RDY | csts::CFS,
            "CSTS.CFS"
        );
    });
}

#[test]
fn the_memory_buffer_takes_its_last_bytes_and_drops_a_store_past_its_end() {
    let setup = Setup {
        params: r#"profile = "ramdisk", capacity = "64M", cmb = "1M""#,
        ..Setup::default()
    };
    run("cmb-edges", setup, |ctx| async move {
        let size = 1u64 << 20;
        let handle = ctx.os.device("nvme0").expect("nvme0 device");
        let bar2 = handle.map_bar(2).expect("map BAR2");
        let base = bar2.window().base.get();
        // The last 8 bytes, stored by the CPU directly (no host-side bounds check).
        ctx.cpu
            .write(BusAddr(base + size - 8), &[1, 2, 3, 4, 5, 6, 7, 8])
            .await
            .expect("store of the last 8 bytes");
        let mut got = [0u8; 8];
        bar2.read(size - 8, &mut got).await.expect("load");
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8], "the last 8 bytes");
        // A store that starts 4 bytes before the end and runs past it is refused whole.
        let _ = ctx
            .cpu
            .write(BusAddr(base + size - 4), &[9, 9, 9, 9, 9, 9, 9, 9])
            .await;
        let mut got = [0u8; 4];
        bar2.read(size - 4, &mut got).await.expect("load");
        assert_eq!(got, [5, 6, 7, 8], "nothing of the straddling store landed");
        // A load that runs past the end never reaches the controller: the fabric refuses
        // the bytes beyond the BAR (so the controller's own bound on loads is unreachable).
        let mut over = [0u8; 8];
        let load = ctx.cpu.read(BusAddr(base + size - 4), &mut over).await;
        assert!(
            matches!(load, Err(AccessError::UnsupportedRequest { addr, .. }) if addr.get() == base + size),
            "a straddling load: {load:?}"
        );
    });
}

/// TLPs that arrive anywhere while one read goes through `sq` (completing on `cq`).
async fn tlps_of_one_read(ctx: &Ctx, sq: &RawSq, cq: &RawCq, buf: &DmaBuffer) -> u64 {
    sq.push(ctx, rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
    let machine = ctx.os.machine();
    let before = machine.counters().tlp_arrivals;
    sq.ring(ctx).await;
    let c = cq.next(ctx).await;
    assert_eq!(c.status, Status::SUCCESS);
    machine.counters().tlp_arrivals - before
}

#[test]
fn a_fetch_from_the_memory_buffer_crosses_no_link() {
    let setup = Setup {
        params: r#"profile = "ramdisk", capacity = "64M", cmb = "1M""#,
        ..Setup::default()
    };
    run("cmb-fetch", setup, |ctx| async move {
        let handle = ctx.os.device("nvme0").expect("nvme0 device");
        let bar2 = handle.map_bar(2).expect("map BAR2");
        ctx.free_pair(2).await;
        let cq = RawCq::new(&ctx, 2, 8);
        let c = ctx.admin(create_cq(2, 7, cq.buf.bus.get(), None)).await;
        assert_eq!(c.status, Status::SUCCESS, "create CQ 2");
        let in_cmb = RawSq {
            qid: 2,
            entries: 8,
            memory: SqMemory::Cmb(bar2, 0),
            tail: std::cell::Cell::new(0),
        };
        let c = ctx.admin(create_sq(2, 7, in_cmb.bus(), 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "create SQ 2 in the CMB");
        let buf = ctx.dma(PAGE_SIZE);
        let cmb = tlps_of_one_read(&ctx, &in_cmb, &cq, &buf).await;
        let c = ctx.admin(delete(admin::DELETE_IO_SQ, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete SQ 2");
        let in_ram = RawSq::host(&ctx, 2, 8);
        let c = ctx.admin(create_sq(2, 7, in_ram.bus(), 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "create SQ 2 in host memory");
        let ram = tlps_of_one_read(&ctx, &in_ram, &cq, &buf).await;
        // The same command, doorbells and completion: only the SQE fetch differs. From host
        // memory it is one more TLP arrival in the engine's count; from the CMB, none.
        assert_eq!(ram, cmb + 1, "TLPs: SQ in host RAM {ram}, in the CMB {cmb}");
    });
}

#[test]
fn commands_still_in_a_deleted_submission_queue_complete_as_aborted_in_order() {
    run("delete-pending", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (cq, sq) = make_pair_2(&ctx, 8, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        // Move the queue's head near its end so the pending commands wrap.
        for lba in 0..6u64 {
            sq.push(&ctx, rw(io::READ, 1, lba, 1, buf.bus.get(), 0))
                .await;
            sq.ring(&ctx).await;
            assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS);
        }
        // With bus mastering off the controller fetches nothing: three commands wait in
        // slots 6, 7 and 0, and the deletion waits in the admin queue.
        let handle = ctx.dev.handle().clone();
        let command = |bits: u16| {
            let handle = handle.clone();
            async move {
                handle
                    .config_write(pci::COMMAND, &bits.to_le_bytes())
                    .await
                    .expect("config write")
            }
        };
        command(pci::command::MEMORY_SPACE).await;
        for cid in [0x60u16, 0x61, 0x62] {
            let mut cmd = rw(io::READ, 1, 0, 1, buf.bus.get(), 0);
            cmd.cid = cid;
            sq.push(&ctx, cmd).await;
        }
        sq.ring(&ctx).await;
        let delete_sq: std::pin::Pin<Box<dyn std::future::Future<Output = Status> + '_>> =
            Box::pin(async { ctx.admin(delete(admin::DELETE_IO_SQ, 2)).await.status });
        let resume: std::pin::Pin<Box<dyn std::future::Future<Output = Status> + '_>> =
            Box::pin(async {
                ctx.cpu.sleep(SimDuration::from_us(20)).await;
                command(pci::command::MEMORY_SPACE | pci::command::BUS_MASTER).await;
                // Any doorbell wakes the controller: the admin entry (64 bytes) is fetched
                // before SQ 2's three (192 bytes) arrive, so the deletion goes first.
                sq.ring(&ctx).await;
                Status::SUCCESS
            });
        let done = join_all(vec![delete_sq, resume]).await;
        assert_eq!(done[0], Status::SUCCESS, "delete SQ 2");
        let mut got = Vec::new();
        for _ in 0..3 {
            let c = cq.next(&ctx).await;
            got.push((c.cid, c.sq_head, c.status));
        }
        let aborted = Status::ABORTED_SQ_DELETION;
        assert_eq!(
            got,
            [(0x60, 7, aborted), (0x61, 0, aborted), (0x62, 1, aborted)],
            "each waiting command, in queue order, with the head after it"
        );
        let c = ctx.admin(delete(admin::DELETE_IO_CQ, 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "delete CQ 2");
    });
}

/// The controller's Abort scans the submission queue one DMA read per entry while the
/// fetcher takes the same entries: what it answers must agree with what the command did, and
/// an identifier it did not abort must not stay marked for a later command that reuses it.
#[test]
fn an_abort_agrees_with_what_the_command_did_and_spares_a_later_command_with_its_id() {
    run("abort-race", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (cq, sq) = make_pair_2(&ctx, 8, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        let handle = ctx.dev.handle().clone();
        let command = |bits: u16| {
            let handle = handle.clone();
            async move {
                handle
                    .config_write(pci::COMMAND, &bits.to_le_bytes())
                    .await
                    .expect("config write")
            }
        };
        // Six commands first, so the three below sit in slots 6, 7 and 0.
        for lba in 0..6u64 {
            sq.push(&ctx, rw(io::READ, 1, lba, 1, buf.bus.get(), 0))
                .await;
            sq.ring(&ctx).await;
            assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS);
        }
        // Three reads wait in SQ 2 (slots 6, 7, 0) with bus mastering off; an Abort of the
        // third waits in the admin queue.
        command(pci::command::MEMORY_SPACE).await;
        for cid in [0x70u16, 0x71, 0x72] {
            let mut cmd = rw(io::READ, 1, 0, 1, buf.bus.get(), 0);
            cmd.cid = cid;
            sq.push(&ctx, cmd).await;
        }
        sq.ring(&ctx).await;
        let abort = Command {
            opcode: admin::ABORT,
            cdw: [2 | (0x72 << 16), 0, 0, 0, 0, 0],
            ..Command::default()
        };
        let aborting: std::pin::Pin<Box<dyn std::future::Future<Output = Completion> + '_>> =
            Box::pin(ctx.admin(abort));
        let resume: std::pin::Pin<Box<dyn std::future::Future<Output = Completion> + '_>> =
            Box::pin(async {
                ctx.cpu.sleep(SimDuration::from_us(20)).await;
                command(pci::command::MEMORY_SPACE | pci::command::BUS_MASTER).await;
                sq.ring(&ctx).await;
                Completion::from_bytes(&[0; CQE_SIZE])
            });
        let abort = join_all(vec![aborting, resume]).await.remove(0);
        assert_eq!(abort.status, Status::SUCCESS, "abort");
        let mut third = None;
        for _ in 0..3 {
            let c = cq.next(&ctx).await;
            if c.cid == 0x72 {
                third = Some(c.status);
            }
        }
        let third = third.expect("the third read completed");
        // Dword 0 bit 0 clear means "aborted": it must agree with what the command did.
        let claimed = abort.result & 1 == 0;
        assert_eq!(
            claimed,
            third == Status::ABORT_REQUESTED,
            "abort result {:#x}, the command completed with {third:?}",
            abort.result
        );
        // A later command that reuses the identifier is not aborted.
        let mut cmd = rw(io::READ, 1, 0, 1, buf.bus.get(), 0);
        cmd.cid = 0x72;
        sq.push(&ctx, cmd).await;
        sq.ring(&ctx).await;
        assert_eq!(
            cq.next(&ctx).await.status,
            Status::SUCCESS,
            "cid 0x72 reused"
        );
    });
}

#[test]
fn a_completion_queue_created_without_interrupts_never_signals_its_vector() {
    let setup = Setup {
        mode: CompletionMode::Interrupt,
        ..Setup::default()
    };
    run("cq-no-ien", setup, |ctx| async move {
        let msix = NvmeController::msix_layout(ctx.ctrl.config().queue_pairs);
        let (table, pba) = (u64::from(msix.table_offset), u64::from(msix.pba_offset));
        let control = |v: u64| table + pci::msix::ENTRY_SIZE * v + 12;
        ctx.free_pair(2).await;
        // Vector 2 (the freed pair's) masked: a message for it would show as pending.
        ctx.bar
            .write32(control(2), pci::msix::VECTOR_MASKED)
            .await
            .expect("mask vector 2");
        let cq = RawCq::new(&ctx, 2, 4);
        // Physically contiguous, IEN clear, IV = 2.
        let mut cmd = create_cq(2, 3, cq.buf.bus.get(), None);
        cmd.cdw[1] = 1 | (2 << 16);
        assert_eq!(ctx.admin(cmd).await.status, Status::SUCCESS, "create CQ 2");
        let sq = RawSq::host(&ctx, 2, 4);
        let c = ctx.admin(create_sq(2, 3, sq.bus(), 2)).await;
        assert_eq!(c.status, Status::SUCCESS, "create SQ 2");
        let buf = ctx.dma(PAGE_SIZE);
        sq.push(&ctx, rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
        sq.ring(&ctx).await;
        assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS);
        assert_eq!(
            ctx.reg32(pba).await & 0b100,
            0,
            "nothing pending on vector 2"
        );
    });
}

#[test]
fn the_arbitration_burst_reads_back_as_set_and_queues_still_progress() {
    run("arbitration", Setup::default(), |ctx| async move {
        let buf = ctx.dma(PAGE_SIZE);
        for ab in [3u32, 7, 0] {
            let c = ctx
                .admin(features(admin::SET_FEATURES, feature::ARBITRATION, ab))
                .await;
            assert_eq!(c.status, Status::SUCCESS, "set AB = {ab}");
            let c = ctx
                .admin(features(admin::GET_FEATURES, feature::ARBITRATION, 0))
                .await;
            assert_eq!((c.status, c.result & 7), (Status::SUCCESS, ab), "get AB");
            let c = ctx.io(rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
            assert_eq!(c.status, Status::SUCCESS, "I/O with AB = {ab}");
        }
    });
}

#[test]
fn the_controller_debug_names_its_profile_and_queue_pairs() {
    run("ctrl-debug", Setup::default(), |ctx| async move {
        let text = format!("{:?}", ctx.ctrl);
        assert_eq!(
            text,
            format!(
                "NvmeController {{ profile: \"ramdisk\", queue_pairs: {} }}",
                ctx.ctrl.config().queue_pairs
            )
        );
    });
}

#[test]
fn a_submission_queue_wrapped_to_tail_0_delivers_exactly_its_commands() {
    run("sq-wrap-0", Setup::default(), |ctx| async move {
        ctx.free_pair(2).await;
        let (sq, cq) = raw_pair(&ctx, 2, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        // One command moves the head to slot 1.
        sq.push(&ctx, rw(io::READ, 1, 0, 1, buf.bus.get(), 0)).await;
        sq.ring(&ctx).await;
        assert_eq!(cq.next(&ctx).await.status, Status::SUCCESS);
        // Seven more fill slots 1..=7; the tail wraps to 0, behind the head.
        for cid in 0x21..0x28u16 {
            let mut cmd = rw(io::READ, 1, 0, 1, buf.bus.get(), 0);
            cmd.cid = cid;
            sq.push(&ctx, cmd).await;
        }
        assert_eq!(sq.tail.get(), 0);
        sq.ring(&ctx).await;
        let mut cids = Vec::new();
        for _ in 0..7 {
            let c = cq.next(&ctx).await;
            assert_eq!(c.status, Status::SUCCESS, "cid {:#x}", c.cid);
            cids.push(c.cid);
        }
        cids.sort_unstable();
        assert_eq!(cids, (0x21..0x28).collect::<Vec<u16>>());
        // Nothing more: slot 0 of the queue was not fetched again.
        ctx.cpu.sleep(SimDuration::from_us(50)).await;
        let next = cq.head.get();
        let raw = ctx
            .fetch(&cq.buf, u64::from(next) * CQE_SIZE as u64, CQE_SIZE)
            .await;
        assert_ne!(
            Completion::from_bytes(&raw).phase,
            cq.phase.get(),
            "no eighth completion"
        );
    });
}

#[test]
fn a_reset_discards_the_completion_of_a_command_still_in_flight() {
    // NAND reads take 80 us; this controller resets and becomes ready again in 10 us each,
    // so the read is still running when the new queues exist.
    let setup = Setup {
        params: r#"profile = "nand", capacity = "64M""#,
        calibration: Some((
            "ready_delay_ns = { value = 1000000,",
            "ready_delay_ns = { value = 10000,",
        )),
        ..Setup::default()
    };
    run("reset-inflight", setup, |ctx| async move {
        ctx.free_pair(2).await;
        let (sq, _old_cq) = raw_pair(&ctx, 2, 8).await;
        let buf = ctx.dma(PAGE_SIZE);
        let mut cmd = rw(io::READ, 1, 0, 8, buf.bus.get(), 0);
        cmd.cid = 0x99;
        sq.push(&ctx, cmd).await;
        sq.ring(&ctx).await;
        ctx.cpu.sleep(SimDuration::from_us(5)).await;
        disable(&ctx).await;
        // New admin queues, and a new CQ 2 where the old one was.
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
        ctx.wait_ready(true).await;
        let cq = RawCq::new(&ctx, 2, 8);
        asq.push(&ctx, create_cq(2, 7, cq.buf.bus.get(), None))
            .await;
        asq.ring(&ctx).await;
        assert_eq!(acq.next(&ctx).await.status, Status::SUCCESS, "new CQ 2");
        // Long after the old read would have finished, the new CQ 2 is still empty.
        ctx.cpu.sleep(SimDuration::from_us(300)).await;
        assert!(
            ctx.fetch(&cq.buf, 0, CQE_SIZE)
                .await
                .iter()
                .all(|&b| b == 0),
            "the old command's completion was dropped"
        );
    });
}
