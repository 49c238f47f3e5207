//! The papers' Device Lending measurements, reproduced: a borrowed device performs like a
//! local one when the paths have the same chips (Paper V Figs. 21–22), and a lender IOMMU
//! costs DMA reads dearly (Paper V Fig. 31, ICPP'18 companion Fig. 6).

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{
    bench_dma, run_fio, Amount, DmaBenchConfig, DmaDirection, DmaSample, FioConfig, RwMode,
};

fn cluster(scenario: &str) -> Cluster {
    Cluster::new(scenario, &Calibration::default_embedded()).expect("loads")
}

const SIZES: [u64; 6] = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 128 << 20];

fn dma(scenario: &str, host: &str, device: &str, direction: DmaDirection) -> Vec<DmaSample> {
    let config = DmaBenchConfig {
        host: host.into(),
        device: device.into(),
        direction,
        sizes: SIZES.to_vec(),
        repeat: 2,
    };
    bench_dma(&cluster(scenario), &config).expect("runs")
}

#[test]
fn a_borrowed_dma_engine_matches_the_local_one_within_one_percent_at_every_size() {
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let local = dma("local-chassis", "local", "dma0", direction);
        let lent = dma("back-to-back", "borrower", "lender:dma0", direction);
        for (l, b) in local.iter().zip(&lent) {
            let diff = (b.median_bytes_per_s / l.median_bytes_per_s - 1.0).abs();
            assert!(
                diff < 0.01,
                "{direction:?} {} bytes: local {:.3} GB/s, borrowed {:.3} GB/s ({:.2}%)",
                l.size_bytes,
                l.median_bytes_per_s / 1e9,
                b.median_bytes_per_s / 1e9,
                diff * 100.0
            );
        }
    }
}

#[test]
fn through_the_lenders_root_complex_reads_collapse_and_writes_drop_less() {
    let shortest = dma(
        "back-to-back",
        "borrower",
        "lender:dma0",
        DmaDirection::Read,
    );
    let via_root = dma(
        "back-to-back-lender-iommu",
        "borrower",
        "lender:dma0",
        DmaDirection::Read,
    );
    for (s, r) in shortest.iter().zip(&via_root).skip(2) {
        assert!(
            r.median_bytes_per_s * 5.0 < s.median_bytes_per_s,
            "{} bytes: {:.3} GB/s through the root vs {:.3} GB/s shortest path",
            s.size_bytes,
            r.median_bytes_per_s / 1e9,
            s.median_bytes_per_s / 1e9
        );
    }
    // Writes are posted: the longer path costs latency, not throughput, on large copies; what
    // they lose is the lender IOMMU's page walk for every new 4 KiB page (an IOTLB miss),
    // which holds the page's writes behind it — far less than reads lose.
    let shortest = dma(
        "back-to-back",
        "borrower",
        "lender:dma0",
        DmaDirection::Write,
    );
    let via_root = dma(
        "back-to-back-lender-iommu",
        "borrower",
        "lender:dma0",
        DmaDirection::Write,
    );
    let (s, r) = (&shortest[5], &via_root[5]);
    assert!(
        r.median_bytes_per_s < 0.99 * s.median_bytes_per_s
            && r.median_bytes_per_s > 0.5 * s.median_bytes_per_s,
        "{r:?} vs {s:?}"
    );
    assert!(
        via_root[0].median_ns > shortest[0].median_ns,
        "a 4 KiB copy takes longer"
    );
}

fn qd1(scenario: &str, host: &str, device: &str) -> smartio_workloads::FioResult {
    let mut cfg = FioConfig::new(host, device);
    cfg.rw = RwMode::RandRead;
    cfg.amount = Amount::Ops(2000);
    run_fio(&cluster(scenario), &cfg).expect("runs")
}

#[test]
fn the_native_nvme_driver_on_a_borrowed_controller_verifies_and_matches_local_latency() {
    let mut cfg = FioConfig::new("borrower", "lender:nvme0");
    cfg.rw = RwMode::RandRw;
    cfg.iodepth = 8;
    cfg.jobs = 2;
    cfg.verify = true;
    cfg.size = Some(16 << 20);
    cfg.amount = Amount::Ops(4000);
    let r = run_fio(&cluster("back-to-back"), &cfg).expect("verified run");
    assert_eq!(r.reads + r.writes, 4000, "{r:?}");
    assert!(r.reads > 1500 && r.writes > 1500, "{r:?}");
    assert_eq!(r.verified_bytes, r.reads * 4096, "every read checked");

    let local = qd1("local-chassis", "local", "nvme0");
    let lent = qd1("back-to-back", "borrower", "lender:nvme0");
    let diff = (lent.lat_ns.p50 / local.lat_ns.p50 - 1.0).abs();
    assert!(
        diff < 0.01,
        "QD1 p50 local {} ns, borrowed {} ns",
        local.lat_ns.p50,
        lent.lat_ns.p50
    );
    assert!(
        lent.lat_ns.p50 >= local.lat_ns.p50,
        "the cable adds a little"
    );
}
