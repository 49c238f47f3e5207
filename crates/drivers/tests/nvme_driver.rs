//! The native NVMe driver on the emulated controller: probe, data integrity through PRP
//! lists, both completion modes, unbind.

use crate::common;
use common::pattern;

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::{BlockOp, CompletionMode, NvmeDevice, NvmeDriver, NvmeDriverConfig};
use smartio_host::HostOs;
use smartio_platform::{BusAddr, Clock, Port};
use std::cell::RefCell;
use std::rc::Rc;

fn boot(mode: CompletionMode) -> (Cluster, HostOs) {
    let cluster = Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
    let os = HostOs::boot_all(&cluster.machine).expect("boot").remove(0);
    os.register_driver(Rc::new(NvmeDriver {
        config: NvmeDriverConfig {
            mode,
            ..NvmeDriverConfig::default()
        },
    }));
    (cluster, os)
}

fn write_read_round_trip(mode: CompletionMode) -> Vec<u64> {
    let (cluster, os) = boot(mode);
    let latencies = Rc::new(RefCell::new(Vec::new()));
    let out = latencies.clone();
    let os2 = os.clone();
    cluster.machine.spawn(async move {
        os2.probe("nvme0").await.expect("probe");
        let dev = os2.driver_data::<NvmeDevice>("nvme0").expect("bound");
        assert_eq!(dev.namespaces().len(), 1);
        let cpu = os2.cpu();
        for (i, len) in [512usize, 4096, 8192, 12288, 65536, 131072, 4096 * 3 + 512]
            .into_iter()
            .enumerate()
        {
            let data = pattern(i as u64, len);
            let src = os2.alloc(len as u64).expect("alloc");
            let dst = os2.alloc(len as u64).expect("alloc");
            cpu.write(BusAddr(src.get()), &data).await.expect("fill");
            let blocks = (len / 512) as u32;
            let lba = 1000 * i as u64;
            let t0 = cpu.now();
            dev.submit(0, BlockOp::Write, 1, lba, blocks, src)
                .await
                .expect("write");
            let t1 = cpu.now();
            dev.submit(1, BlockOp::Read, 1, lba, blocks, dst)
                .await
                .expect("read");
            let t2 = cpu.now();
            out.borrow_mut().push(t1.since(t0).as_ps());
            out.borrow_mut().push(t2.since(t1).as_ps());
            let back = cpu
                .read_owned(BusAddr(dst.get()), len)
                .await
                .expect("read back");
            assert!(back == data, "{len} bytes differ after the round trip");
        }
    });
    cluster.machine.run();
    let l = latencies.borrow().clone();
    assert_eq!(l.len(), 14, "the task did not finish");
    l
}

#[test]
fn data_through_prp_lists_reads_back_identical_in_both_modes_and_polling_is_faster() {
    let irq = write_read_round_trip(CompletionMode::Interrupt);
    let poll = write_read_round_trip(CompletionMode::Poll);
    // Same transfers, same media: polling only saves the interrupt path. (Later requests
    // may queue behind the media's write pipeline, which either mode reaches at other times.)
    for i in 0..4 {
        assert!(poll[i] < irq[i], "request {i}: polling saved nothing");
    }
}

#[test]
fn unbinding_deletes_the_queues_and_rebinding_works() {
    let (cluster, os) = boot(CompletionMode::Interrupt);
    let done = Rc::new(std::cell::Cell::new(false));
    let flag = done.clone();
    let os2 = os.clone();
    cluster.machine.spawn(async move {
        os2.probe("nvme0").await.expect("probe");
        os2.unbind("nvme0").await.expect("unbind");
        assert_eq!(os2.bound_driver("nvme0"), None);
        assert!(os2.driver_data::<NvmeDevice>("nvme0").is_none());
        os2.probe("nvme0")
            .await
            .expect("probe again after a clean unbind");
        let dev = os2.driver_data::<NvmeDevice>("nvme0").expect("bound");
        let buf = os2.alloc(4096).expect("alloc");
        dev.submit(0, BlockOp::Read, 1, 0, 8, buf)
            .await
            .expect("I/O after rebind");
        flag.set(true);
    });
    cluster.machine.run();
    assert!(done.get(), "the task did not finish");
}

#[test]
fn buffers_starting_inside_a_page_move_exactly_their_bytes_whatever_the_prp_shape() {
    let (cluster, os) = boot(CompletionMode::Poll);
    let done = Rc::new(std::cell::Cell::new(0usize));
    let count = done.clone();
    let os2 = os.clone();
    cluster.machine.spawn(async move {
        os2.probe("nvme0").await.expect("probe");
        let dev = os2.driver_data::<NvmeDevice>("nvme0").expect("bound");
        let cpu = os2.cpu();
        const SENTINEL: u8 = 0xa5;
        // (offset of the source, offset of the destination, bytes): PRP2 a page or a
        // list, the list of 2, 31 or 32 entries, one or both buffers off a page boundary.
        let cases: [(u64, u64, usize); 6] = [
            (0x200, 0xe00, 4096),
            (0, 0x200, 8192),
            (0xe00, 0x600, 8192),
            (0x200, 0, 128 << 10),
            (0, 0xa00, 128 << 10),
            (0x800, 0x400, (128 << 10) - 2048),
        ];
        for (i, &(src_off, dst_off, len)) in cases.iter().enumerate() {
            let span = len as u64 + 2 * 4096;
            let (src_base, dst_base) = (
                os2.alloc(span).expect("alloc"),
                os2.alloc(span).expect("alloc"),
            );
            let (src, dst) = (src_base.get() + src_off, dst_base.get() + dst_off);
            cpu.write(BusAddr(dst_base.get()), &vec![SENTINEL; span as usize])
                .await
                .expect("sentinel");
            let data = pattern(100 + i as u64, len);
            cpu.write(BusAddr(src), &data).await.expect("fill");
            let blocks = (len / 512) as u32;
            let lba = 5000 + 300 * i as u64;
            dev.submit(
                0,
                BlockOp::Write,
                1,
                lba,
                blocks,
                smartio_platform::PhysAddr(src),
            )
            .await
            .expect("write");
            dev.submit(
                1,
                BlockOp::Read,
                1,
                lba,
                blocks,
                smartio_platform::PhysAddr(dst),
            )
            .await
            .expect("read");
            let back = cpu
                .read_owned(BusAddr(dst_base.get()), span as usize)
                .await
                .expect("read back");
            let (before, rest) = back.split_at(dst_off as usize);
            let (landed, after) = rest.split_at(len);
            assert!(
                before.iter().chain(after).all(|&b| b == SENTINEL),
                "case {i}: bytes outside the destination changed"
            );
            assert!(
                landed == data,
                "case {i}: {len} bytes differ after the round trip"
            );
            count.set(count.get() + 1);
        }
    });
    cluster.machine.run();
    assert_eq!(done.get(), 6, "every case ran");
}
