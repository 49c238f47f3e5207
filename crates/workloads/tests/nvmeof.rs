//! `nvmeof-compare` (Paper V §7.4.3, Figs. 36–38): the distributed driver reads a remote NVMe
//! almost as fast as a local one, while NVMe-oF over RDMA adds several microseconds of HCAs,
//! wire and target software — none of it set directly, all of it from component costs.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{nvmeof_compare, NvmeofCompare, NvmeofConfig, NvmeofError};

fn config() -> NvmeofConfig {
    NvmeofConfig {
        device: "lender:nvme0".into(),
        target: "lender".into(),
        initiator: "borrower".into(),
        ops: 200,
        bs: 4096,
        seed: 7,
    }
}

fn run(config: &NvmeofConfig) -> Result<NvmeofCompare, NvmeofError> {
    let cluster =
        Cluster::new("back-to-back", &Calibration::default_embedded()).expect("scenario loads");
    nvmeof_compare(&cluster, config)
}

#[test]
fn nvmeof_adds_microseconds_where_the_remote_smartio_driver_adds_almost_nothing() {
    let r = run(&config()).expect("runs (every read's bytes checked against the namespace)");
    let (local, remote, nvmeof) = (r.local.p50, r.remote.p50, r.nvmeof.p50);
    eprintln!("{}", serde_json::to_string_pretty(&r).expect("serializes"));
    assert_eq!(r.ops, 200);
    assert_eq!(r.remote_sq_in, "borrower RAM");
    assert!(
        local < remote && remote < nvmeof,
        "local {local} < remote {remote} < NVMe-oF {nvmeof}"
    );
    // Back-to-back puts as many switch chips between the controller and borrower RAM as
    // between it and lender RAM: the remote client pays the cable and the NTB path only.
    assert!(
        remote - local < 1500.0,
        "remote − local = {} ns (local {local}, remote {remote})",
        remote - local
    );
    // Two HCA crossings, 4 KiB on a 100 Gb/s wire and software on both hosts.
    let gap = nvmeof - local;
    assert!(
        (3000.0..12000.0).contains(&gap),
        "NVMe-oF − local = {gap} ns (local {local}, NVMe-oF {nvmeof})"
    );

    // The step breakdown accounts for the whole read, and its NVMe step is the real device
    // doing what the local client sees it do.
    assert_eq!(r.nvmeof_steps.len(), 9);
    let sum: f64 = r.nvmeof_steps.iter().map(|s| s.median_ns).sum();
    assert!(
        (sum - nvmeof).abs() < 200.0,
        "steps sum to {sum} ns, the median read is {nvmeof} ns"
    );
    let nvme = r
        .nvmeof_steps
        .iter()
        .find(|s| s.step.starts_with("NVMe read"))
        .expect("an NVMe step")
        .median_ns;
    assert!(
        (nvme - local).abs() < 200.0,
        "the target's NVMe read {nvme} ns vs the local client's read {local} ns"
    );
    let rdma = r
        .nvmeof_steps
        .iter()
        .find(|s| s.step.starts_with("RDMA write"))
        .expect("an RDMA-write step")
        .median_ns;
    let cal = Calibration::default_embedded().nvmeof;
    let wire_ns = 4096.0 * 8.0 / cal.link_gbps.value;
    assert!(
        (rdma - (cal.hca_latency_ns.value + wire_ns)).abs() < 0.01,
        "RDMA write {rdma} ns = HCA latency + 4 KiB at the link rate"
    );

    let again = run(&config()).expect("runs again");
    assert_eq!(
        serde_json::to_string(&r).expect("serializes"),
        serde_json::to_string(&again).expect("serializes"),
        "same scenario, same seed: bit-identical"
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
