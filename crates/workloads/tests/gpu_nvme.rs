//! GPU-initiated NVMe reads (Paper V §6.4): queues and data in GPU memory, a kernel that
//! submits, rings, reaps and checks every byte on the GPU; the same read driven by the CPU.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{gpu_nvme_read, GpuNvmeConfig, GpuWorkloadError};

fn cluster() -> Cluster {
    Cluster::new("cluster-switch", &Calibration::default_embedded()).expect("scenario loads")
}

fn small(host: &str, gpu: &str) -> GpuNvmeConfig {
    GpuNvmeConfig {
        host: host.into(),
        gpu: gpu.into(),
        bytes: 8 << 20,
        ..GpuNvmeConfig::remote_default()
    }
}

#[test]
fn a_gpu_in_another_host_reads_through_its_own_queues_and_checks_every_byte() {
    let r = gpu_nvme_read(&cluster(), &small("lender2", "gpu2")).expect("runs");
    assert_eq!(r.commands, 128);
    assert_eq!(r.queue_depth, 32);
    assert!(r.entries > 32);
    assert_eq!(r.gpu_driven.errors, 0);
    assert_eq!(r.gpu_driven.verified_bytes, 8 << 20);
    assert_eq!(r.cpu_driven.verified_bytes, 8 << 20);
    assert!(r.gpu_driven.mib_s > 0.0 && r.cpu_driven.mib_s > 0.0);
    assert!(
        r.doorbell_path.iter().any(|n| n.contains("ntb")),
        "the doorbell crosses the NTB: {:?}",
        r.doorbell_path
    );
    eprintln!("{r:#?}");
}

#[test]
fn a_gpu_next_to_the_nvme_reads_through_its_own_queues() {
    let mut c = small("lender", "gpu0");
    c.bytes = 4 << 20;
    let r = gpu_nvme_read(&cluster(), &c).expect("runs");
    assert_eq!(r.gpu_driven.verified_bytes, 4 << 20);
    assert!(
        !r.doorbell_path.iter().any(|n| n.contains("ntb")),
        "{:?}",
        r.doorbell_path
    );
    eprintln!("{r:#?}");
}

/// The brief's figure: 1 GiB at QD 32 in 64 KiB commands, every byte checked in GPU memory.
#[test]
fn one_gib_through_gpu_resident_queues_at_qd32_is_verified_byte_for_byte() {
    let started = std::time::Instant::now();
    let r = gpu_nvme_read(&cluster(), &GpuNvmeConfig::remote_default()).expect("runs");
    assert_eq!(r.bytes, 1 << 30);
    assert_eq!(r.commands, 16384);
    assert_eq!(r.gpu_driven.verified_bytes, 1 << 30);
    assert_eq!(r.gpu_driven.errors, 0);
    assert_eq!(r.cpu_driven.verified_bytes, 1 << 30);
    eprintln!(
        "1 GiB: GPU-driven {:.0} MiB/s, CPU-driven {:.0} MiB/s, wall {:?}",
        r.gpu_driven.mib_s,
        r.cpu_driven.mib_s,
        started.elapsed()
    );
}

fn refusal(c: &GpuNvmeConfig) -> String {
    match gpu_nvme_read(&cluster(), c) {
        Err(e @ GpuWorkloadError::BadParameter(_)) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn bad_depths_chunks_and_gpus_are_refused_with_what_is_allowed() {
    let base = small("lender2", "gpu2");
    let e = refusal(&GpuNvmeConfig {
        queue_depth: 1024,
        ..base.clone()
    });
    assert!(e.contains("--qd 1024: allowed 1 to 1023"), "{e}");
    let e = refusal(&GpuNvmeConfig {
        queue_depth: 0,
        ..base.clone()
    });
    assert!(e.contains("--qd 0"), "{e}");
    let e = refusal(&GpuNvmeConfig {
        chunk: 256 << 10,
        bytes: 1 << 20,
        ..base.clone()
    });
    assert!(
        e.contains("above the controller's largest transfer (MDTS) of 131072"),
        "{e}"
    );
    let e = refusal(&GpuNvmeConfig {
        chunk: 1000,
        bytes: 1000,
        ..base.clone()
    });
    assert!(e.contains("whole number of 512-byte blocks"), "{e}");
    let e = refusal(&GpuNvmeConfig {
        gpu: "gpu0".into(),
        ..base.clone()
    });
    assert!(
        e.contains("not a device of the program's host lender2"),
        "{e}"
    );
    let e = refusal(&GpuNvmeConfig {
        gpu: "lender:gpu0".into(),
        ..base.clone()
    });
    assert!(
        e.contains("must be a device of the program's host lender2"),
        "{e}"
    );
    let e = refusal(&GpuNvmeConfig {
        bytes: 3 << 16,
        chunk: 1 << 17,
        ..base
    });
    assert!(e.contains("whole number of chunks"), "{e}");
}
