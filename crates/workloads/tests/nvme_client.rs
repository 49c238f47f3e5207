//! The distributed driver's SQ placement (Paper V Fig. 34): the farther the device has to go
//! for each command it fetches, the longer a QD1 read takes.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, SHIPPED};
use smartio_drivers::nvme_dist::SqPlacement;
use smartio_workloads::{client_qd1, ClientQd1Config, ClientQd1Result};
use std::sync::atomic::{AtomicU32, Ordering};

/// cluster-switch with a 1 MiB controller memory buffer on the lender's NVMe.
fn cluster_with_cmb() -> Cluster {
    let text = SHIPPED
        .iter()
        .find(|s| s.name == "cluster-switch")
        .expect("shipped")
        .text
        .replacen(
            "params = { profile = \"optane-p4800x\" }",
            "params = { profile = \"optane-p4800x\", cmb = \"1M\" }",
            1,
        );
    // Tests run in parallel: each load gets its own file.
    static LOADS: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "smartio-nvme-client-{}-{}-cluster-switch-cmb.toml",
        std::process::id(),
        LOADS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, text).expect("temp file");
    // Variation closed: the tests compare measured gaps with the model's typical figures.
    Cluster::new(
        path.to_str().expect("utf-8"),
        &Calibration::default_embedded().without_variation(),
    )
    .expect("loads")
}

fn config(placement: SqPlacement) -> ClientQd1Config {
    ClientQd1Config {
        manager: "lender2".into(),
        client: "borrower".into(),
        device: "lender:nvme0".into(),
        placement,
        sq_device: None,
        ops: 200,
        bs: 4096,
        seed: 7,
    }
}

fn run(placement: SqPlacement) -> ClientQd1Result {
    client_qd1(&cluster_with_cmb(), &config(placement)).expect("runs")
}

#[test]
fn an_sq_in_gpu_memory_sits_between_lender_ram_and_the_cmb_and_every_gap_is_the_models() {
    let gpu = client_qd1(
        &cluster_with_cmb(),
        &ClientQd1Config {
            sq_device: Some("lender:gpu0".into()),
            ..config(SqPlacement::ClientRam)
        },
    )
    .expect("runs");
    let lender = run(SqPlacement::LenderRam);
    let cmb = run(SqPlacement::DeviceMemory);
    assert_eq!(gpu.sq_in, "lender:gpu0 memory");
    assert_eq!(gpu.sq_fetch_chips, ["lender.chassis (PEX8796)"]);
    assert!(cmb.sq_fetch_chips.is_empty(), "{:?}", cmb.sq_fetch_chips);
    assert_eq!(
        lender.sq_fetch_chips,
        [
            "lender.chassis (PEX8796)",
            "lender.hib68-target (PEX8733)",
            "lender.hib68-host (PEX8733)",
        ]
    );
    let (l, g, d) = (lender.lat_ns.p50, gpu.lat_ns.p50, cmb.lat_ns.p50);
    assert!(
        l > g && g > d,
        "lender RAM {l} > GPU {g} > controller memory {d}"
    );
    // Everything else in a read is the same wherever the SQ is, so the gaps are exactly
    // the model's: fetch path, completer and SQE store.
    let borrower = run(SqPlacement::ClientRam);
    let model = |r: &ClientQd1Result| r.sq_fetch_path_ns + r.sq_completer_ns + r.sq_store_ns;
    for (far, near) in [(&borrower, &lender), (&lender, &gpu), (&gpu, &cmb)] {
        let measured = far.lat_ns.p50 - near.lat_ns.p50;
        let predicted = model(far) - model(near);
        assert!(
            (measured - predicted).abs() < 0.5,
            "{} − {}: measured {measured} ns, model {predicted} ns",
            far.sq_in,
            near.sq_in
        );
    }
}

#[test]
fn qd1_latency_follows_where_the_sq_is() {
    let borrower = run(SqPlacement::ClientRam);
    let lender = run(SqPlacement::LenderRam);
    let device = run(SqPlacement::DeviceMemory);
    assert_eq!(borrower.sq_in, "borrower RAM");
    assert_eq!(lender.sq_in, "lender RAM");
    assert_eq!(device.sq_in, "controller memory");
    let (b, l, d) = (borrower.lat_ns.p50, lender.lat_ns.p50, device.lat_ns.p50);
    assert!(
        b > l && l > d,
        "borrower RAM {b} > lender RAM {l} > device memory {d}"
    );
    // Model: a 64-byte fetch from borrower RAM crosses the PM8536 both ways on top of the
    // lender-RAM path (+2 x 170 ns, +2 x 18 ns of cable) = +376 ns, while the client's SQE
    // store into lender RAM costs its CPU 145 ns more than a local store: 231 ns in all.
    // The fetch from lender RAM crosses three chips (PEX8796, PEX8733, PEX8733: 414 ns)
    // both ways that a fetch from device memory does not.
    assert!(b - l > 170.0, "borrower − lender {} (b {b}, l {l})", b - l);
    assert!(
        l - d > 2.0 * 414.0,
        "lender − device {} (l {l}, d {d})",
        l - d
    );
    assert_eq!(client_qd1_twice(), (b, l), "deterministic");
}

fn client_qd1_twice() -> (f64, f64) {
    (
        run(SqPlacement::ClientRam).lat_ns.p50,
        run(SqPlacement::LenderRam).lat_ns.p50,
    )
}
