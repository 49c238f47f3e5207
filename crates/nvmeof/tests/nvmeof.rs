//! `nvmeof-compare` (Paper V §7.4.3, Figs. 36–38; seed 003 Fig. 10; seed 004 Figs. 9–10):
//! the distributed driver reads and writes a remote NVMe almost as fast as a local one,
//! while NVMe-oF over RDMA adds microseconds of HCAs, wire and target software — with a
//! polled initiator against the polled local driver, and with the kernel's initiator against
//! the native driver under the block layer. None of it is set directly; every byte is
//! checked.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, DeviceKind};
use smartio_nvmeof::{
    nvmeof_compare, InitiatorChoice, IoChoice, IoPath, NvmeofCompare, NvmeofConfig, NvmeofError,
    NvmeofIo, NvmeofRow, TargetMode,
};
use smartio_workloads::fio::pattern;

fn config() -> NvmeofConfig {
    NvmeofConfig {
        device: "lender:nvme0".into(),
        target: "lender".into(),
        initiator: "borrower".into(),
        ops: 200,
        bs: 4096,
        seed: 7,
        ..NvmeofConfig::default()
    }
}

fn cluster() -> Cluster {
    Cluster::new("back-to-back", &Calibration::default_embedded()).expect("scenario loads")
}

fn run(config: &NvmeofConfig) -> Result<NvmeofCompare, NvmeofError> {
    nvmeof_compare(&cluster(), config)
}

fn row(r: &NvmeofCompare, path: IoPath, io: NvmeofIo) -> &NvmeofRow {
    r.row(path, io)
        .unwrap_or_else(|| panic!("a {path:?} {io:?} row"))
}

/// The medians of a row's steps but its NVMe command, summed.
fn around_the_nvme(row: &NvmeofRow) -> f64 {
    row.steps
        .iter()
        .filter(|s| !s.step.starts_with("NVMe "))
        .map(|s| s.median_ns)
        .sum()
}

/// The median of the step whose text starts with `start`.
fn step(row: &NvmeofRow, start: &str) -> f64 {
    row.steps
        .iter()
        .find(|s| s.step.starts_with(start))
        .unwrap_or_else(|| panic!("{:?} {:?} has no step {start:?}", row.path, row.io))
        .median_ns
}

#[test]
fn nvmeof_adds_microseconds_over_its_own_baseline_where_the_remote_smartio_driver_adds_almost_nothing(
) {
    let r = run(&config()).expect("runs (every read checked, every write read back)");
    eprintln!("{}", serde_json::to_string_pretty(&r).expect("serializes"));
    assert_eq!((r.ops, r.bs), (200, 4096));
    assert_eq!(r.remote_sq_in, "borrower RAM");
    assert_eq!(r.target_mode, TargetMode::Spdk);
    // Five ways, reads then writes.
    let order: Vec<(NvmeofIo, IoPath)> = r.rows.iter().map(|x| (x.io, x.path)).collect();
    let ways = [
        IoPath::LocalNative,
        IoPath::LocalSmartio,
        IoPath::RemoteSmartio,
        IoPath::NvmeofPolled,
        IoPath::NvmeofKernel,
    ];
    let want: Vec<(NvmeofIo, IoPath)> = [NvmeofIo::Read, NvmeofIo::Write]
        .iter()
        .flat_map(|io| ways.iter().map(move |p| (*io, *p)))
        .collect();
    assert_eq!(order, want);

    let cal = Calibration::default_embedded();
    // Two HCA crossings at least, and seed 004's bound: NVMe-oF adds no more than 10 µs.
    let crossings = 2.0 * cal.nvmeof.hca_latency_ns.value;
    for io in [NvmeofIo::Read, NvmeofIo::Write] {
        let remote = row(&r, IoPath::RemoteSmartio, io);
        assert_eq!(remote.baseline, IoPath::LocalSmartio);
        // The medians of two varied samples (media, interrupts, chips): equal paths may come
        // out a little either way.
        assert!(
            (-100.0..1500.0).contains(&remote.added.p50),
            "{io:?}: remote SmartIO − local = {} ns",
            remote.added.p50
        );
        for path in [IoPath::NvmeofPolled, IoPath::NvmeofKernel] {
            let of = row(&r, path, io);
            for (what, added) in [("min", of.added.min), ("p50", of.added.p50)] {
                assert!(
                    added > crossings && added < 10_000.0,
                    "{path:?} {io:?}: {what} − baseline = {added} ns"
                );
            }
            // The steps account for the whole I/O.
            let sum: f64 = of.steps.iter().map(|s| s.median_ns).sum();
            assert!(
                (sum - of.latency.p50).abs() < 200.0,
                "{path:?} {io:?}: steps sum to {sum} ns, the median is {} ns",
                of.latency.p50
            );
        }
        assert_eq!(
            row(&r, IoPath::NvmeofKernel, io).baseline,
            IoPath::LocalNative
        );
        assert_eq!(
            row(&r, IoPath::NvmeofPolled, io).baseline,
            IoPath::LocalSmartio
        );
    }

    // The NVMe step is the target's polled queue pair doing what the local client does.
    let local = row(&r, IoPath::LocalSmartio, NvmeofIo::Read).latency.p50;
    let kernel_read = row(&r, IoPath::NvmeofKernel, NvmeofIo::Read);
    let nvme = step(kernel_read, "NVMe read");
    assert!(
        (nvme - local).abs() < 0.05 * local,
        "{nvme} ns vs {local} ns"
    );

    // The read's data comes back by RDMA write: the HCAs' latency and 4 KiB stored and
    // forwarded through two PCIe links and the wire.
    let n = &cal.nvmeof;
    let want = n.hca_latency_ns.value
        + 4096.0 * 8.0 / n.link_gbps.value
        + 2.0 * 4096.0 * 8.0 / n.hca_pcie_gbps.value;
    let got = step(kernel_read, "RDMA write");
    assert!(
        (got - want).abs() < 0.01,
        "RDMA write {got} ns vs {want} ns"
    );

    // A 4 KiB write travels inside the capsule: no registration, no RDMA, the capsule
    // carries 4 KiB more than a read's.
    let kernel_write = row(&r, IoPath::NvmeofKernel, NvmeofIo::Write);
    assert!(kernel_write
        .steps
        .iter()
        .all(|s| !s.step.contains("RDMA") && !s.step.contains("registers")));
    let capsule = step(kernel_write, "command capsule with the write's data")
        - step(kernel_read, "command capsule");
    let data = 4096.0 * (8.0 / n.link_gbps.value + 2.0 * 8.0 / n.hca_pcie_gbps.value);
    assert!((capsule - data).abs() < 0.01, "{capsule} ns vs {data} ns");

    // The kernel initiator differs from the polled one by its own steps only (compared
    // without the NVMe command, which is the device's and may vary from one I/O to the next),
    // one of them its HCA's fetch of the work requests: the kernel's mlx5 driver rings the
    // doorbell only, where a user-space post of one request writes it into the HCA's BAR.
    let cpu = &cal.cpu;
    let fetch = step(kernel_read, "initiator HCA fetches the work requests");
    let want = n.hca_wqe_fetch_ns.value;
    assert!((fetch - want).abs() < 0.01, "{fetch} ns vs {want} ns");
    let kernel_only = cpu.block_submit_ns.value
        + n.kernel_reg_mr_ns.value
        + fetch
        + cpu.interrupt_delivery_ns.value
        + cpu.wakeup_ns.value
        + n.kernel_initiator_complete_ns.value
        + cpu.block_complete_ns.value
        - n.initiator_complete_ns.value;
    let difference = around_the_nvme(kernel_read)
        - around_the_nvme(row(&r, IoPath::NvmeofPolled, NvmeofIo::Read));
    assert!(
        (difference - kernel_only).abs() < 0.05 * kernel_only,
        "kernel − polled = {difference} ns, its own steps {kernel_only} ns"
    );
}

#[test]
fn the_same_seed_gives_byte_identical_results() {
    let cfg = NvmeofConfig {
        ops: 50,
        ..config()
    };
    let (a, b) = (run(&cfg).expect("runs"), run(&cfg).expect("runs again"));
    assert_eq!(
        serde_json::to_string(&a).expect("serializes"),
        serde_json::to_string(&b).expect("serializes"),
    );
}

#[test]
fn the_kernel_initiators_writes_leave_their_bytes_in_the_namespace() {
    let cluster = cluster();
    let cfg = NvmeofConfig {
        io: IoChoice::Writes,
        initiators: InitiatorChoice::Kernel,
        ops: 100,
        ..config()
    };
    let r = nvmeof_compare(&cluster, &cfg).expect("runs");
    let paths: Vec<IoPath> = r.rows.iter().map(|x| x.path).collect();
    assert_eq!(
        paths,
        [
            IoPath::LocalNative,
            IoPath::LocalSmartio,
            IoPath::RemoteSmartio,
            IoPath::NvmeofKernel
        ]
    );
    assert!(r.rows.iter().all(|x| x.io == NvmeofIo::Write));
    // The k-th write row writes version k of the pattern; the last is NVMe-oF's. Every block
    // of the span is either untouched or holds it, byte for byte.
    let nvme = cluster
        .models_of(DeviceKind::Nvme)
        .find_map(|a| a.model.nvme().cloned())
        .expect("the lender's NVMe");
    let (mut touched, mut got, mut want) = (0, vec![0u8; 4096], vec![0u8; 4096]);
    for block in 0..1u64 << 14 {
        nvme.namespaces()
            .read(1, block * 4096, &mut got)
            .expect("reads");
        if got.iter().all(|&b| b == 0) {
            continue;
        }
        // The pattern is keyed by the first LBA (512 bytes each on this namespace).
        pattern(cfg.seed, block * 8, 4, &mut want);
        assert!(got == want, "block {block} does not hold the last write");
        touched += 1;
    }
    assert!(
        (90..=100).contains(&touched),
        "{touched} blocks written by 100 random writes"
    );
}

#[test]
fn target_offload_replaces_the_target_software_by_the_hcas_steps() {
    let cfg = NvmeofConfig {
        initiators: InitiatorChoice::Kernel,
        target_mode: TargetMode::Offload,
        ops: 50,
        ..config()
    };
    let r = run(&cfg).expect("runs");
    let spdk = run(&NvmeofConfig {
        target_mode: TargetMode::Spdk,
        ..cfg.clone()
    })
    .expect("runs");
    assert_eq!(r.target_mode, TargetMode::Offload);
    let n = Calibration::default_embedded().nvmeof;
    for io in [NvmeofIo::Read, NvmeofIo::Write] {
        let off = row(&r, IoPath::NvmeofKernel, io);
        for key in ["target_poll_ns", "target_submit_ns", "target_complete_ns"] {
            assert!(off.steps.iter().all(|s| !s.step.contains(key)), "{key}");
        }
        assert!(step(off, "target HCA writes the SQE") > 0.0);
        // What offload saves: the target's software and its load of the capsule (compared
        // around the NVMe command, the device's own time).
        let soft = row(&spdk, IoPath::NvmeofKernel, io);
        let saved = around_the_nvme(soft) - around_the_nvme(off);
        // A read's completion is two work requests in one post (the data's RDMA write and
        // the response), which the software target's HCA fetches; the offloading HCA has
        // them at hand.
        let fetch = soft
            .steps
            .iter()
            .find(|s| {
                s.step
                    .starts_with("target HCA fetches the two work requests")
            })
            .map(|s| s.median_ns);
        assert_eq!(fetch.is_some(), io == NvmeofIo::Read, "{io:?}: {fetch:?}");
        let software = step(soft, "target polls")
            + step(soft, "target hands")
            + step(soft, "target posts")
            + fetch.unwrap_or(0.0)
            - n.offload_submit_ns.value
            - n.offload_complete_ns.value;
        assert!(
            (saved - software).abs() < 0.05 * software,
            "{io:?}: offload saves {saved} ns; the software steps less the HCA's are {software} ns"
        );
    }
}

#[test]
fn a_write_larger_than_the_capsule_is_fetched_by_rdma_read_and_lands_whole() {
    let r = run(&NvmeofConfig {
        io: IoChoice::Writes,
        initiators: InitiatorChoice::Both,
        bs: 16384,
        ops: 30,
        ..config()
    })
    .expect("runs (the writes read back)");
    for path in [IoPath::NvmeofPolled, IoPath::NvmeofKernel] {
        let w = row(&r, path, NvmeofIo::Write);
        assert!(step(w, "RDMA READ") > 0.0);
        assert!(w
            .steps
            .iter()
            .any(|s| s.step.starts_with("command capsule:")));
    }
    assert!(
        step(
            row(&r, IoPath::NvmeofKernel, NvmeofIo::Write),
            "nvme-rdma maps and registers"
        ) > 0.0
    );
}

#[test]
fn a_target_without_the_controller_is_refused_by_name() {
    let err = run(&NvmeofConfig {
        target: "borrower".into(),
        initiator: "lender".into(),
        ..config()
    })
    .expect_err("the borrower has no NVMe");
    assert_eq!(
        err,
        NvmeofError::TargetNotLender {
            device: "lender:nvme0".into(),
            lender: "lender".into(),
            target: "borrower".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "the NVMe-oF target must be the host with the controller: lender:nvme0 is in lender, the target is borrower"
    );
}

#[test]
fn a_block_size_off_the_lba_size_is_refused() {
    let err = run(&NvmeofConfig {
        bs: 1000,
        ..config()
    })
    .expect_err("1000 is not a multiple of the LBA size");
    assert!(
        matches!(err, NvmeofError::BsNotMultiple { bs: 1000, .. }),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("bs 1000 "), "{err}");
}

#[test]
fn a_block_size_past_the_controllers_largest_transfer_is_refused_with_it() {
    let err = run(&NvmeofConfig {
        bs: 1 << 30,
        ..config()
    })
    .expect_err("1 GiB is more than one command");
    match err {
        NvmeofError::BsTooLarge { bs, most } => {
            assert_eq!(bs, 1 << 30);
            assert!(most < bs, "{most}");
        }
        e => panic!("{e:?}"),
    }
}
