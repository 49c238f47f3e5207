//! Runs that once went wrong, kept exactly as they failed.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::fio::FioMethod;
use smartio_workloads::{run_fio, Amount, FioConfig, RwMode};

/// The README's distributed-driver example — `fio --scenario cluster-switch --host borrower
/// --device lender:nvme0 --method nvme-client --manager lender --rw randrw --iodepth 4
/// --verify` — stopped with "a task is stuck" at `--ops 9999` and `10000` (seed 1): four
/// workers poll one completion queue, and a completion that landed while a poller was
/// reading its slot was never reported to it (issue 13). Once the engine armed watches when
/// created but the poller still armed its watch after reading, the same runs with `--size
/// 8M` stopped at exactly these counts (the README's own command is run by the CLI's README
/// test). Every run must now finish, verify every byte it read, and do exactly the I/Os
/// asked for.
#[test]
fn nvme_client_randrw_runs_finish_at_the_op_counts_that_hung() {
    for ops in [1_083, 1_090] {
        let cluster =
            Cluster::new("cluster-switch", &Calibration::default_embedded()).expect("cluster");
        let cfg = FioConfig {
            rw: RwMode::RandRw,
            iodepth: 4,
            verify: true,
            size: Some(8 << 20),
            amount: Amount::Ops(ops),
            method: FioMethod::NvmeClient {
                manager: "lender".into(),
            },
            ..FioConfig::new("borrower", "lender:nvme0")
        };
        let r = run_fio(&cluster, &cfg).unwrap_or_else(|e| panic!("--ops {ops}: {e}"));
        assert_eq!(r.reads + r.writes, ops, "--ops {ops}");
        assert_eq!(r.verified_bytes, r.reads * 4096, "--ops {ops}");
        assert!(r.reads > 400 && r.writes > 400, "--ops {ops}: a mix");
    }
}

/// `smartio repro` once held 4 GB: every cluster it ran stayed alive to the end of the
/// process, because the tasks left on a machine when a workload ends (device engines
/// waiting for their next doorbell, interrupt handlers, a VM's hypervisor) hold handles to
/// it. A dropped cluster must free its simulation, host RAM and device memory, whatever ran
/// on it: here a GPU borrowed through SmartIO's MDEV by a VM, and a borrowed NVMe.
#[test]
fn a_dropped_cluster_frees_its_simulation_after_workloads_ran_on_it() {
    let cal = Calibration::default_embedded();
    let gpu = Cluster::new("vm-chassis", &cal).expect("cluster");
    let config = smartio_workloads::GpuBandwidthConfig {
        host: "borrower/vm0".into(),
        device: "lender:gpu2".into(),
        direction: smartio_workloads::GpuCopyDirection::HostToDevice,
        sizes: vec![64 << 10, 1 << 20],
        copies: 1,
        repeat: 1,
    };
    let r = smartio_workloads::bench_gpu_bandwidth(&gpu, &config).expect("runs");
    assert_eq!(r.verified_bytes, 1 << 20);
    let weak = gpu.machine.downgrade();
    drop(gpu);
    assert!(
        weak.upgrade().is_none(),
        "the GPU run's cluster is still alive"
    );

    let nvme = Cluster::new("back-to-back", &cal).expect("cluster");
    let cfg = FioConfig {
        rw: RwMode::RandRead,
        verify: true,
        amount: Amount::Ops(50),
        ..FioConfig::new("borrower", "lender:nvme0")
    };
    let r = run_fio(&nvme, &cfg).expect("runs");
    assert_eq!(r.reads, 50);
    let weak = nvme.machine.downgrade();
    drop(nvme);
    assert!(
        weak.upgrade().is_none(),
        "the fio run's cluster is still alive"
    );
}
