//! A borrowed SR-IOV virtual function is used like any device (issue 17): the DMA bandwidth
//! test on VF 1 of the lender's dma0, borrowed over the cluster switch, measures what the
//! borrowed PF measures — the same path, a copy engine of the same kind — and a VF the PF
//! has not got is an unknown device.
//!
//! Scenario: `crates/smartio/tests/scenarios/sriov-lending.toml`.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{bench_dma, DmaBenchConfig, DmaDirection, DmaSample};

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../smartio/tests/scenarios/sriov-lending.toml"
);

fn dma(device: &str, direction: DmaDirection) -> Result<Vec<DmaSample>, String> {
    let cluster = Cluster::new(SCENARIO, &Calibration::default_embedded()).expect("scenario loads");
    let config = DmaBenchConfig {
        host: "borrower-a".into(),
        device: device.into(),
        direction,
        sizes: vec![4 << 10, 64 << 10, 1 << 20],
        repeat: 2,
    };
    bench_dma(&cluster, &config).map_err(|e| e.to_string())
}

#[test]
fn a_borrowed_vf_moves_data_as_fast_as_the_borrowed_pf_on_the_same_path() {
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let pf = dma("lender:dma0", direction).expect("the PF");
        let vf = dma("lender:dma0.vf1", direction).expect("VF 1");
        assert_eq!(pf.len(), 3);
        for (p, v) in pf.iter().zip(&vf) {
            assert_eq!(p.size_bytes, v.size_bytes);
            assert_eq!(
                p.median_ns, v.median_ns,
                "{direction:?} {} B: a VF's copy engine on the PF's path",
                p.size_bytes
            );
        }
    }
}

#[test]
fn a_vf_past_totalvfs_is_an_unknown_device_naming_what_the_lender_lends() {
    let err = dma("lender:dma0.vf9", DmaDirection::Write).expect_err("8 VFs");
    assert!(err.contains("dma0.vf8"), "{err}");
    assert!(err.contains("lender:dma0.vf9"), "{err}");
}
