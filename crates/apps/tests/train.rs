//! The training application (`apps::train`) on local and lent devices (Paper V Fig. 30):
//! every image verified on the GPUs, the all-reduced weights checked, epoch times compared
//! across placements and explained by their breakdown.
//!
//! ```text
//!   local-chassis:  local ── hib68 ══ hib68 ── chassis ─┬─ gpu0, gpu1, nvme0
//!   back-to-back:   borrower ── ntb0 ══ lender.ntb0 ── lender.chassis ─┬─ gpu0, gpu1, nvme0
//!   cluster-switch: borrower ── ntb0 ══ mxs824 ══ lender … gpu0, nvme0
//!                                            ╚══ lender2 … gpu2
//! ```

use smartio_apps::train::{train, ExchangeRoute, Storage, TrainConfig, TrainResult};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::gpu::Mismatch;
use smartio_workloads::GpuWorkloadError;

fn cluster(scenario: &str) -> Cluster {
    Cluster::new(scenario, &Calibration::default_embedded()).expect("scenario loads")
}

fn small(host: &str, gpus: &[&str], nvme: &str) -> TrainConfig {
    TrainConfig {
        host: host.into(),
        gpus: gpus.iter().map(|g| g.to_string()).collect(),
        nvme: nvme.into(),
        storage: Storage::Native,
        images: 64,
        batch: 16,
        epochs: 2,
        seed: 3,
        spoil_image: None,
    }
}

fn local() -> TrainConfig {
    small("local", &["gpu0", "gpu1"], "nvme0")
}

fn single_lender() -> TrainConfig {
    small("borrower", &["lender:gpu0", "lender:gpu1"], "lender:nvme0")
}

fn two_lenders() -> TrainConfig {
    small("borrower", &["lender:gpu0", "lender2:gpu2"], "lender:nvme0")
}

fn run(scenario: &str, config: &TrainConfig) -> TrainResult {
    train(&cluster(scenario), config).expect("trains")
}

#[test]
fn every_image_and_every_weight_is_checked_and_the_gradients_go_peer_to_peer() {
    let r = run("local-chassis", &local());
    assert_eq!(r.verified_images, 64 * 2, "each image once per epoch");
    assert_eq!(r.verified_weight_bytes, 2 * r.gradient_bytes, "both GPUs");
    assert_eq!(r.exchange, ExchangeRoute::PeerToPeer);
    assert_eq!(r.steps, 4);
    assert_eq!(r.epochs.len(), 2);
    // The kernels' time is the calibrated figure: 4 steps × 8 images × 14.79 ms, plus
    // launches and read-backs.
    let compute = r.epochs[1].compute_ns;
    assert!(
        (473.28e6..473.7e6).contains(&compute),
        "compute {compute} ns per epoch"
    );
    for e in &r.epochs {
        let sum = e.io_wait_ns + e.copy_ns + e.compute_ns + e.exchange_ns + e.update_ns;
        assert_eq!(e.total_ns, sum, "an epoch is the sum of its phases");
        assert!(e.reads_ns > 0.0 && e.exchange_ns > 0.0 && e.copy_ns > 0.0);
    }
    assert_eq!(
        r.gpus[0].exchange_path,
        ["local.chassis", "local.gpu1"],
        "gradients turn at the chassis switch"
    );
}

#[test]
fn a_run_is_bit_identical_when_repeated() {
    let a = serde_json::to_string(&run("back-to-back", &single_lender())).expect("json");
    let b = serde_json::to_string(&run("back-to-back", &single_lender())).expect("json");
    assert_eq!(a, b);
}

#[test]
fn one_lender_is_within_two_percent_of_local_and_two_lenders_are_slower_where_the_path_is_longer() {
    let l = run("local-chassis", &local());
    let one = run("back-to-back", &single_lender());
    let two = run("cluster-switch", &two_lenders());
    assert!(one.gpus.iter().all(|g| g.borrowed) && one.nvme_borrowed);
    let ratio = one.mean_epoch_ns / l.mean_epoch_ns;
    assert!(
        (0.98..1.02).contains(&ratio),
        "single lender / local = {ratio}"
    );
    assert!(two.mean_epoch_ns > one.mean_epoch_ns);
    // The breakdown explains the difference: the exchange between GPUs in two hosts and
    // the copies over the cluster switch grew, and the growth of the phases is the growth
    // of the epoch.
    let phases = |r: &TrainResult| {
        let e = &r.epochs[1];
        [
            e.io_wait_ns,
            e.copy_ns,
            e.compute_ns,
            e.exchange_ns,
            e.update_ns,
        ]
    };
    let (p1, p2) = (phases(&one), phases(&two));
    assert!(p2[3] > p1[3], "exchange: {} vs {}", p2[3], p1[3]);
    assert!(p2[1] > p1[1], "copies: {} vs {}", p2[1], p1[1]);
    let grown: f64 = p2.iter().zip(&p1).map(|(a, b)| a - b).sum();
    let epoch = two.epochs[1].total_ns - one.epochs[1].total_ns;
    assert!((grown - epoch).abs() < 1.0, "{grown} vs {epoch}");
    assert!(two.gpus[0].exchange_path.len() > one.gpus[0].exchange_path.len());
    assert!(two.gpus[0].exchange_path.contains(&"mxs824".to_string()));
}

#[test]
fn one_gpu_trains_alone_with_nothing_to_exchange() {
    let mut c = local();
    c.gpus = vec!["gpu1".into()];
    let r = run("local-chassis", &c);
    assert_eq!(r.exchange, ExchangeRoute::None);
    assert!(r.epochs.iter().all(|e| e.exchange_ns == 0.0));
    assert_eq!(r.verified_images, 128);
}

#[test]
fn a_damaged_image_on_the_disk_is_caught_by_the_gpu_that_trains_on_it() {
    let mut c = local();
    c.spoil_image = Some(5);
    let e = train(&cluster("local-chassis"), &c).expect_err("image 5 is damaged");
    match e {
        GpuWorkloadError::Verify(m) => {
            assert!(
                matches!(
                    &m,
                    Mismatch::Damaged {
                        wrong: 1,
                        first: 5,
                        ..
                    }
                ),
                "{m}"
            );
        }
        other => panic!("{other}"),
    }
}

#[test]
fn bad_requests_get_specific_errors() {
    let cl = cluster("local-chassis");
    let mut c = local();
    c.gpus = vec!["gpu0".into(), "gpu0".into()];
    assert!(matches!(
        train(&cl, &c),
        Err(GpuWorkloadError::SameDevice { .. })
    ));
    let mut c = local();
    c.gpus = vec!["dma0".into(), "gpu1".into()];
    assert!(matches!(
        train(&cl, &c),
        Err(GpuWorkloadError::NotAGpu { .. })
    ));
    let mut c = local();
    c.nvme = "gpu0".into();
    let e = train(&cl, &c).expect_err("not an NVMe").to_string();
    assert_eq!(e, "--nvme gpu0: not an NVMe controller (a gpu device)");
    let mut c = local();
    c.storage = Storage::Client {
        manager: "nowhere".into(),
    };
    let e = train(&cl, &c).expect_err("no such manager").to_string();
    assert!(e.contains("unknown host \"nowhere\""), "{e}");
    let mut c = local();
    c.host = "nowhere".into();
    let e = train(&cl, &c).expect_err("no such host").to_string();
    assert!(e.contains("unknown host \"nowhere\""), "{e}");
}

#[test]
fn a_client_of_the_distributed_driver_reads_the_same_images_and_leaves_the_nvme_unborrowed() {
    let mut c = single_lender();
    c.storage = Storage::Client {
        manager: "lender".into(),
    };
    // Variation closed: the GPUs' work is compared to the nanosecond.
    let steady = |cfg: &TrainConfig| {
        let cal = Calibration::default_embedded().without_variation();
        train(&Cluster::new("back-to-back", &cal).expect("loads"), cfg).expect("trains")
    };
    let client = steady(&c);
    let native = steady(&single_lender());
    assert_eq!(client.storage, "nvme-client");
    assert_eq!(client.manager.as_deref(), Some("lender"));
    assert!(!client.nvme_borrowed && native.nvme_borrowed);
    assert_eq!(client.verified_images, native.verified_images);
    assert_eq!(client.verified_weight_bytes, native.verified_weight_bytes);
    // The reads differ (the client's queue pair and the CPU's copy out of its data segment),
    // the GPUs' work does not.
    assert_ne!(client.epochs[1].reads_ns, native.epochs[1].reads_ns);
    assert_eq!(client.epochs[1].compute_ns, native.epochs[1].compute_ns);
}

/// A K420 addresses 40 bits and cannot reach its peer's BAR1 in the 64-bit MMIO region, so
/// the gradients go through host memory — and still sum to the same weights.
#[test]
fn gradients_go_through_host_memory_when_a_gpu_cannot_reach_its_peer() {
    let text = smartio_cluster::SHIPPED
        .iter()
        .find(|s| s.name == "local-chassis")
        .expect("shipped")
        .text;
    let marker = "name = \"gpu0\"\nkind = \"gpu\"\n";
    assert_eq!(text.matches(marker).count(), 1);
    let text = text.replace(
        marker,
        &format!("{marker}params = {{ profile = \"k420\" }}\n"),
    );
    let path = std::env::temp_dir().join(format!("train-k420-{}.toml", std::process::id()));
    std::fs::write(&path, text).expect("write the variant");
    let cl = Cluster::new(
        path.to_str().expect("utf-8"),
        &Calibration::default_embedded(),
    );
    let _ = std::fs::remove_file(&path);
    let staged = train(&cl.expect("variant loads"), &local()).expect("trains");
    let direct = run("local-chassis", &local());
    // The K420 cannot reach the P4000, the P4000 reaches the K420.
    assert_eq!(staged.exchange, ExchangeRoute::Mixed);
    assert!(staged.gpus[0].exchange_path.is_empty());
    assert_eq!(
        staged.gpus[1].exchange_path,
        ["local.chassis", "local.gpu0"]
    );
    assert_eq!(staged.gpus[0].profile, "k420");
    assert_eq!(staged.verified_weight_bytes, direct.verified_weight_bytes);
    // Out, across by the CPU, in: slower than one peer-to-peer copy.
    assert!(
        staged.epochs[1].exchange_ns > direct.epochs[1].exchange_ns,
        "{} vs {}",
        staged.epochs[1].exchange_ns,
        direct.epochs[1].exchange_ns
    );
    // The K420 computes 261 ms per image, the P4000 14.8: the step waits for the slower.
    assert!(staged.epochs[1].compute_ns > 4.0 * 8.0 * 261e6);
}

#[test]
fn three_gpus_in_two_lenders_sum_their_gradients_around_the_ring() {
    let mut c = small(
        "borrower",
        &["lender:gpu0", "lender:gpu1", "lender2:gpu2"],
        "lender:nvme0",
    );
    c.batch = 48;
    c.images = 96;
    let r = run("cluster-switch", &c);
    assert_eq!(r.exchange, ExchangeRoute::PeerToPeer);
    assert_eq!(r.verified_images, 2 * 96);
    assert_eq!(r.verified_weight_bytes, 3 * r.gradient_bytes);
    // The ring's hop from lender:gpu1 to lender2:gpu2 crosses the switch; gpu0 to gpu1 not.
    assert!(!r.gpus[0].exchange_path.contains(&"mxs824".to_string()));
    assert!(r.gpus[1].exchange_path.contains(&"mxs824".to_string()));
}
