//! `smartio demo`: a short tour of the shipped scenarios — DMA bandwidth, shared memory
//! through an NTB, the native NVMe driver, Device Lending, the distributed NVMe driver and
//! NVMe-oF — each step printed as it runs.

use crate::render;
use smartio_cluster::Cluster;
use smartio_drivers::CompletionMode;
use smartio_engine::Calibration;
use smartio_workloads::{
    bench_dma, nvme_demo, nvmeof_compare, pingpong, run_fio, share_clients, shm_demo, Amount,
    DmaBenchConfig, DmaDirection, FioConfig, FioResult, LatencySummary, NvmeofConfig,
    PingPongConfig, ShareConfig,
};

pub fn demo(calibration: &Calibration) -> Result<(), String> {
    println!("smartio demo — scenario local-chassis\n");
    let fabric = smartio_cluster::load_fabric("local-chassis").map_err(|e| e.to_string())?;
    print!("{}", render::topology(&fabric.report()));
    println!();
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let cluster = Cluster::new("local-chassis", calibration).map_err(|e| e.to_string())?;
        let config = DmaBenchConfig {
            host: "local".into(),
            device: "dma0".into(),
            direction,
            sizes: vec![4 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20],
            repeat: 3,
        };
        let samples = bench_dma(&cluster, &config).map_err(|e| e.to_string())?;
        println!(
            "dma0 DMA {} through PEX8796 + 2 x PEX8733 (Gen3 x16):",
            if matches!(direction, DmaDirection::Write) {
                "writes to host RAM"
            } else {
                "reads from host RAM"
            }
        );
        println!("{}\n", render::dma_table(&samples));
    }
    let timing =
        smartio_engine::Timing::resolve(&fabric, calibration).map_err(|e| e.to_string())?;
    let mps = timing.sizes.mps;
    if let Some(link) = timing.links.first() {
        println!(
            "Model: Gen3 x16 with MPS {mps} B carries {:.2} GB/s of payload ({} B overhead per TLP, DLLP share {:.0}%).",
            link.payload_bandwidth(mps) / 1e9,
            link.overhead,
            calibration.pcie.dllp_overhead_fraction.value * 100.0
        );
    }
    println!();
    shared_memory_demo(calibration)?;
    let local = nvme_demo_step(calibration)?;
    lending_demo_step(calibration, &local)?;
    shared_nvme_demo_step(calibration)?;
    nvmeof_demo_step(calibration)?;
    println!("Next: `smartio devices --scenario cluster-switch`, `smartio topo --scenario back-to-back`, `smartio pingpong --scenario cluster-switch --from borrower --to lender`, `smartio bench dma --scenario local-chassis-extra-hop`, `smartio fio --scenario local-chassis --host local --device nvme0 --rw randrw --iodepth 8 --size 64M --verify`, `smartio fio --scenario cluster-switch --host borrower --device lender:nvme0 --method nvme-client --manager lender --verify`, `smartio exp sq-placement` (also share-30, multicast, failover --verify, nvmeof-compare).");
    Ok(())
}

/// The demo's distributed-driver step: three hosts share one NVMe, each with its own queue
/// pair, reading concurrently with every byte checked.
fn shared_nvme_demo_step(calibration: &Calibration) -> Result<(), String> {
    println!(
        "Three hosts share one NVMe through the distributed driver — scenario cluster-switch\n"
    );
    let cluster = Cluster::new("cluster-switch", calibration).map_err(|e| e.to_string())?;
    let config = ShareConfig {
        manager: "lender".into(),
        device: "lender:nvme0".into(),
        clients: vec!["borrower".into(), "lender2".into(), "lender".into()],
        extra_client: "borrower".into(),
        ops: 200,
        ..ShareConfig::default()
    };
    let r = share_clients(&cluster, &config)?;
    println!(
        "1. The manager on {} resets {}, owns the admin queues and gets {} I/O queue pairs.",
        r.manager, r.device, r.granted
    );
    println!(
        "2. Each client gets a queue pair from it, writes its own {} KiB, then reads {} random 4 KiB blocks of it at QD1 and checks them, submitting, ringing and polling by itself:",
        config.range_bytes >> 10,
        config.ops
    );
    let rows: Vec<(String, LatencySummary)> = r
        .clients
        .iter()
        .map(|c| {
            (
                format!(
                    "{} (queue {}, {} bytes verified)",
                    c.host, c.qid, c.verified_bytes
                ),
                c.lat_ns,
            )
        })
        .collect();
    println!("{}", render::latency_rows(&rows));
    println!(
        "3. Queue pairs are the limit: once all {} are out, the next request is refused:\n   {}\n",
        r.granted, r.refused
    );
    Ok(())
}

/// The demo's last step: local SmartIO driver, remote SmartIO driver, NVMe-oF over RDMA.
fn nvmeof_demo_step(calibration: &Calibration) -> Result<(), String> {
    println!("Local vs remote vs NVMe-oF — scenario back-to-back\n");
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let r = nvmeof_compare(
        &cluster,
        &NvmeofConfig {
            ops: 200,
            ..NvmeofConfig::default()
        },
    )?;
    let rows = [
        ("SmartIO driver on the lender".to_string(), r.local),
        ("SmartIO driver on the borrower".to_string(), r.remote),
        (
            "NVMe-oF over RDMA, borrower -> lender".to_string(),
            r.nvmeof,
        ),
    ];
    println!("{}", render::latency_rows(&rows));
    println!(
        "   Remote SmartIO adds {:.0} ns at the median (the NTB path); NVMe-oF adds {:.1} us (HCAs, network and target software, from the [nvmeof] calibration).\n",
        r.remote.p50 - r.local.p50,
        (r.nvmeof.p50 - r.local.p50) / 1000.0
    );
    Ok(())
}

/// The demo's NVMe step: the native driver binds a local controller, Identify, a 64 KiB
/// write and read through a PRP list, then a short QD1 random-read run (returned).
fn nvme_demo_step(calibration: &Calibration) -> Result<FioResult, String> {
    println!("Native NVMe driver — scenario local-chassis\n");
    let cluster = Cluster::new("local-chassis", calibration).map_err(|e| e.to_string())?;
    let r = nvme_demo(&cluster, "local", "nvme0", CompletionMode::Interrupt)
        .map_err(|e| e.to_string())?;
    let size = smartio_fabric::units::format_size;
    println!(
        "1. {} boots, enumerates its tree and binds driver {} to {} ({} completions).",
        r.host, r.driver, r.device, r.mode
    );
    println!(
        "2. Identify Controller: model {:?}, serial {}, firmware {}, NVMe {}, maximum transfer {}.",
        r.model,
        r.serial,
        r.firmware,
        r.version,
        size(r.max_transfer)
    );
    for ns in &r.namespaces {
        println!(
            "   Identify Namespace {}: {:.1} GB ({} blocks of {} B).",
            ns.nsid,
            ns.bytes as f64 / 1e9,
            ns.blocks,
            ns.lba_size
        );
    }
    println!(
        "   I/O queue pairs: {} granted ({} asked for).",
        r.io_queues_granted, r.io_queues_requested
    );
    let kib = r.bytes / 1024;
    println!(
        "3. {kib} KiB of random data written at LBA {} of namespace {} (PRP1 + a PRP list of {} entries) in {:.2} us, read into a second buffer in {:.2} us: {kib} KiB written and read back identical.\n",
        r.lba,
        r.nsid,
        r.prp_list_entries,
        r.write_ns / 1e3,
        r.read_ns / 1e3
    );
    let cluster = Cluster::new("local-chassis", calibration).map_err(|e| e.to_string())?;
    let config = FioConfig {
        amount: Amount::Ops(2000),
        ..FioConfig::new("local", "nvme0")
    };
    let f = run_fio(&cluster, &config).map_err(|e| e.to_string())?;
    println!(
        "4. QD1 4 KiB random reads, {} I/Os ({:.0} IOPS), submission to completion:",
        f.reads, f.iops
    );
    println!(
        "{}\n",
        render::latency_table("4 KiB randread", &fio_summary(&f))
    );
    Ok(f)
}

/// A fio result's latency as a summary row.
fn fio_summary(f: &FioResult) -> LatencySummary {
    let l = &f.lat_ns;
    LatencySummary {
        min: l.min,
        p50: l.p50,
        p99: l.p99,
        max: l.max,
        mean: l.mean,
    }
}

/// The demo's Device Lending step: the borrower borrows the lender's NVMe, which appears
/// hot-added in its tree; the same native driver and the same short workload run on it, and
/// the two QD1 summaries are printed side by side.
fn lending_demo_step(calibration: &Calibration, local: &FioResult) -> Result<(), String> {
    println!("Device Lending — scenario back-to-back\n");
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let r = nvme_demo(
        &cluster,
        "borrower",
        "lender:nvme0",
        CompletionMode::Interrupt,
    )
    .map_err(|e| e.to_string())?;
    println!(
        "1. The lender registers its devices with SmartIO; {} borrows lender:nvme0 and SmartIO maps its BARs, a DMA window and an MSI window through the NTBs.",
        r.host
    );
    println!("2. {}'s PCI tree now holds:", r.host);
    for t in &r.tree {
        let origin = match &t.lender {
            Some(l) => format!("hot-added, borrowed from {l}"),
            None => "local".to_string(),
        };
        println!("     {:<8} class {:06x}  {origin}", t.name, t.class);
    }
    println!(
        "3. The unchanged native driver {} bound to {}: Identify says {:?}; {} KiB written and read back identical ({:.2} us write, {:.2} us read).",
        r.driver,
        r.device,
        r.model,
        r.bytes / 1024,
        r.write_ns / 1e3,
        r.read_ns / 1e3
    );
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let config = FioConfig {
        amount: Amount::Ops(local.reads),
        ..FioConfig::new("borrower", "lender:nvme0")
    };
    let f = run_fio(&cluster, &config).map_err(|e| e.to_string())?;
    println!(
        "4. The same QD1 4 KiB random reads, local and borrowed ({:.0} and {:.0} IOPS):",
        local.iops, f.iops
    );
    let rows = [
        ("local-chassis local:nvme0".to_string(), fio_summary(local)),
        (
            "back-to-back borrower:lender:nvme0".to_string(),
            fio_summary(&f),
        ),
    ];
    println!("{}", render::latency_rows(&rows));
    println!(
        "   Both paths cross the same three switch chips, so the medians differ by {:+.2}% (the external cable's propagation).\n",
        (f.lat_ns.p50 / local.lat_ns.p50 - 1.0) * 100.0
    );
    Ok(())
}

fn shared_memory_demo(calibration: &Calibration) -> Result<(), String> {
    println!("Shared memory through an NTB — scenario back-to-back\n");
    let cluster = Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?;
    let r = shm_demo(&cluster, "borrower", "lender").map_err(|e| e.to_string())?;
    let size = smartio_fabric::units::format_size;
    println!(
        "1. {} creates segment {} ({}) in its RAM at {:#x}, prepares it on adapter 0 (node id {}) and makes it available.",
        r.owner, r.segment_id, size(r.segment_bytes), r.segment_phys, r.owner_node_id
    );
    println!(
        "2. {} connects to node {} segment {} and maps it: its adapter's window is {} at {:#x}, split into {} look-up-table entries of {}.",
        r.user, r.owner_node_id, r.segment_id, size(r.window_bytes), r.window_base, r.lut_entries, size(r.entry_bytes)
    );
    println!(
        "   Look-up-table entries in use: {} before, {} after (of {}); requester ids in use: {} of {} (the CPU's reserved pair).",
        r.lut_before, r.lut_after, r.lut_entries, r.requester_ids_used, r.requester_ids
    );
    println!(
        "3. {}'s CPU stores {:?} at bus address {:#x} (inside its NTB window).",
        r.user, r.message, r.mapped_bus_addr
    );
    println!(
        "4. {} polls its own RAM and reads {:?}, {:.0} ns after the store.\n",
        r.owner, r.read_by_owner, r.store_to_seen_ns
    );
    let pp = pingpong(
        &Cluster::new("back-to-back", calibration).map_err(|e| e.to_string())?,
        &PingPongConfig {
            from: "borrower".into(),
            to: "lender".into(),
            iterations: 100,
        },
    )
    .map_err(|e| e.to_string())?;
    println!("Ping-pong borrower -> lender -> borrower, 100 round trips:");
    println!("{}\n", render::latency_table("round trip", &pp.rtt_ns));
    Ok(())
}
