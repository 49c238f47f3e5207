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
