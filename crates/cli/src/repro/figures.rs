//! The reproduced figures: each states the paper's claim and its source line, runs what
//! measures it, and computes its verdict by the rule it states.
//!
//! Sources: "thesis" is `000_*.txt` in the seeds (Paper V is its last paper, Paper IV the
//! ICPP'18 journal version, Paper II the EIR demo, Paper III the NOSSDAV'16 paper); "seed
//! 003"/"seed 004" are the distributed-driver paper and the NVMe-oF white paper.

use super::{Ctx, Figure, Finding};
use crate::exp::{Bar, Chart, ExpName, Plot};
use serde_json::Value;
use smartio_cluster::Cluster;
use smartio_workloads::apps::video::{video, VideoConfig};
use smartio_workloads::{
    bench_gpu_bandwidth, bench_gpu_p2p, gpu_pingpong, pingpong, CounterPlace, DmaSample,
    GpuBandwidthConfig, GpuCopyDirection, GpuP2pConfig, GpuPingPongConfig, P2pDirection,
    PingPongConfig,
};

/// Every figure, in the papers' order.
pub fn all() -> Vec<Figure> {
    let paper_i = super::paper1::figures();
    paper_i.into_iter().chain([
        Figure {
            id: "III-rtt",
            paper: "Paper III §5 (PXH830)",
            claim: "RAM-to-RAM latency over a back-to-back NTB link is 550-580 ns one way",
            source: "thesis line 4281",
            run: ram_to_ram,
        },
        Figure {
            id: "II-3",
            paper: "Paper II Fig. 3",
            claim: "three local GPUs keep up with up to 7 full-HD streams; more need the borrowed GPU",
            source: "thesis lines 3517-3518",
            run: video_crossover,
        },
        Figure {
            id: "IV-21",
            paper: "Paper IV Fig. 21",
            claim: "training is slower with the GPUs remote, natively and in a VM, and the local VM is slower than the native remote",
            source: "thesis lines 7184-7187",
            run: keras_vms,
        },
        Figure {
            id: "V-18",
            paper: "Paper V Fig. 18",
            claim: "a GPU kernel operates the NVMe through queues in GPU memory without the CPU, as fast as the CPU does",
            source: "thesis line 8467",
            run: gpu_nvme,
        },
        Figure {
            id: "V-22",
            paper: "Paper V Fig. 22",
            claim: "a borrowed GPU's DMA bandwidth is the same as the local baseline's",
            source: "thesis line 8716",
            run: gpu_local_equals_borrowed,
        },
        Figure {
            id: "V-23",
            paper: "Paper V Fig. 23",
            claim: "one more hop lowers the GPU's DMA reads (link utilization); writes are not affected",
            source: "thesis line 8771",
            run: gpu_extra_hop,
        },
        Figure {
            id: "V-24",
            paper: "Paper V Fig. 24",
            claim: "peer-to-peer throughput between two borrowed GPUs of one lender equals local (shortest path)",
            source: "thesis line 8838",
            run: p2p_same_lender,
        },
        Figure {
            id: "V-25",
            paper: "Paper V Fig. 25",
            claim: "GPU-to-GPU ping-pong latency of two borrowed GPUs equals local",
            source: "thesis line 8841",
            run: pingpong_same_lender,
        },
        Figure {
            id: "V-25s",
            paper: "Paper V Fig. 25(b)",
            claim: "the ping-pong latency distribution has three distinct steps with no measurements falling in between, alike for local and borrowed GPUs",
            source: "thesis lines 8847-8849",
            run: pingpong_steps,
        },
        Figure {
            id: "V-26",
            paper: "Paper V Fig. 26",
            claim: "GPUs in different lenders: peer-to-peer throughput drops for small transfers, not for large",
            source: "thesis line 8872",
            run: p2p_two_lenders,
        },
        Figure {
            id: "V-27",
            paper: "Paper V Fig. 27",
            claim: "GPUs in different lenders add ping-pong latency, less than the chips' worst-case sum (132+170+132+150 = 584 ns)",
            source: "thesis lines 8873-8881",
            run: pingpong_two_lenders,
        },
        Figure {
            id: "V-28",
            paper: "Paper V Fig. 28",
            claim: "a borrowed SR-IOV virtual function sends as fast as one used locally",
            source: "thesis line 8960",
            run: sriov_lent,
        },
        Figure {
            id: "V-29",
            paper: "Paper V Fig. 29",
            claim: "the lender and a borrower share one SR-IOV adapter simultaneously, each with a VF",
            source: "thesis line 8971",
            run: sriov_shared,
        },
        Figure {
            id: "V-30",
            paper: "Paper V Fig. 30",
            claim: "training with every device on one lender takes about as long as local; two lenders slightly longer",
            source: "thesis lines 9021-9037",
            run: keras_lenders,
        },
        Figure {
            id: "V-31",
            paper: "Paper V Fig. 31",
            claim: "with the lender IOMMU, DMA reads drop from 10.2 GB/s to a little over 1.5 GB/s; writes drop less",
            source: "thesis line 9132",
            run: iommu_penalty,
        },
        Figure {
            id: "V-34",
            paper: "Paper V Fig. 34",
            claim: "moving the SQ closer to the NVMe lowers the command completion latency",
            source: "thesis line 9291",
            run: sq_placement,
        },
        Figure {
            id: "V-35",
            paper: "Paper V §7.4.2 (Fig. 35)",
            claim: "30 hosts each operate one NVMe through their own queue pair, independently of each other",
            source: "thesis lines 9360-9367",
            run: share_30,
        },
        Figure {
            id: "V-35s",
            paper: "Paper V §7.4.2",
            claim: "under the controller's round-robin arbitration some of the 30 borrowers starve: their commands wait significantly longer",
            source: "thesis lines 9379-9382",
            run: share_30_starvation,
        },
        Figure {
            id: "V-mc",
            paper: "Paper V §7.4.2",
            claim: "one NVMe Identify into a multicast segment replicates 4 kB to the memory of all 59 other nodes in a single operation",
            source: "thesis lines 9369-9372",
            run: multicast,
        },
        Figure {
            id: "IV-7",
            paper: "Paper IV (ICPP'18) Fig. 7",
            claim: "the physical borrower adds a little less than 1 µs over local (two NTB crossings, 700-730 ns); a VM on the borrower only slightly more",
            source: "seed 001 line 226",
            run: vm_nvme,
        },
        Figure {
            id: "003-lat",
            paper: "seed 003 §VI, Fig. 10",
            claim: "the distributed driver's block device on a remote NVMe adds around 1 µs to the minimum read latency over the same driver on a local one (NVMe-oF: 7.7 µs)",
            source: "seed 003 lines 164, 168",
            run: super::seed003::reads,
        },
        Figure {
            id: "003-write",
            paper: "seed 003 §VI, Fig. 10",
            claim: "for writes the distributed driver's block device adds around 2 µs to the minimum latency (NVMe-oF: 7.5 µs)",
            source: "seed 003 line 170",
            run: super::seed003::writes,
        },
        Figure {
            id: "003-base",
            paper: "seed 003 Fig. 10",
            claim: "the distributed driver, not as mature as the kernel's NVMe driver (polling, a bounce-buffer copy), has a higher baseline latency",
            source: "seed 003 lines 160, 168",
            run: super::seed003::baseline,
        },
        Figure {
            id: "003-10",
            paper: "seed 003 Fig. 10",
            claim: "with the stock Linux drivers (kernel NVMe-oF initiator, SPDK target), NVMe-oF adds 7.7 µs to the minimum read latency over the local NVMe",
            source: "seed 003 line 168",
            run: nvmeof_kernel_read,
        },
        Figure {
            id: "003-10w",
            paper: "seed 003 Fig. 10",
            claim: "with the stock Linux drivers, NVMe-oF adds 7.5 µs to the minimum write latency over the local NVMe",
            source: "seed 003 line 170",
            run: nvmeof_kernel_write,
        },
        Figure {
            id: "004-10",
            paper: "seed 004 Fig. 10",
            claim: "SPDK's NVMe-oF over RDMA adds about 7.5 µs to a read (99th percentile) over SPDK on the local NVMe; SmartIO remote adds (almost) nothing",
            source: "seed 004 line 172",
            run: nvmeof,
        },
    ]).chain(super::paper3::figures()).chain(super::paper5::figures()).collect()
}

fn cluster(ctx: &Ctx, scenario: &str) -> Result<Cluster, String> {
    Cluster::seeded(scenario, ctx.calibration(), ctx.seed()).map_err(|e| e.to_string())
}

/// `a` relative to `b`, in percent.
fn pct(a: f64, b: f64) -> f64 {
    (a / b - 1.0) * 100.0
}

fn gbs(bytes_per_s: f64) -> String {
    format!("{:.2} GB/s", bytes_per_s / 1e9)
}

/// The median throughput of the `size`-byte sample.
fn at(samples: &[DmaSample], size: u64) -> f64 {
    samples
        .iter()
        .find(|s| s.size_bytes == size)
        .map_or(0.0, |s| s.median_bytes_per_s)
}

/// The finding that `lent` runs within `bound` % of `local` at every size of `sizes`.
fn same_at_sizes(
    what: &str,
    local: &[DmaSample],
    lent: &[DmaSample],
    sizes: &[u64],
    bound: f64,
) -> Finding {
    let worst = sizes
        .iter()
        .map(|&s| pct(at(lent, s), at(local, s)).abs())
        .fold(0.0, f64::max);
    let each: Vec<String> = sizes
        .iter()
        .map(|&s| {
            format!(
                "{} {} / {}",
                crate::render::iec_size(s),
                gbs(at(local, s)),
                gbs(at(lent, s))
            )
        })
        .collect();
    Finding {
        measured: format!("{what}, local / borrowed: {}", each.join(", ")),
        rule: format!("borrowed within {bound} % of local at every size"),
        holds: worst <= bound,
        plots: Vec::new(),
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn bars(file: &str, title: &str, y: &str, bars: Vec<(String, f64)>) -> Plot {
    Plot {
        file: file.into(),
        title: title.into(),
        x_label: String::new(),
        y_label: y.into(),
        chart: Chart::Bars(
            bars.into_iter()
                .map(|(label, value)| Bar {
                    label,
                    value,
                    range: None,
                })
                .collect(),
        ),
    }
}

fn ram_to_ram(ctx: &Ctx) -> Result<Finding, String> {
    let r = pingpong(
        &cluster(ctx, "vm-back-to-back")?,
        &PingPongConfig {
            from: "borrower".into(),
            to: "lender".into(),
            iterations: 200,
        },
    )
    .map_err(|e| e.to_string())?;
    let one_way = r.rtt_ns.p50 / 2.0;
    Ok(Finding {
        measured: format!("{one_way:.0} ns one way (p50), borrower ↔ lender on vm-back-to-back"),
        rule: "550 ≤ one way ≤ 580 ns".into(),
        holds: (550.0..=580.0).contains(&one_way),
        plots: Vec::new(),
    })
}

fn video_crossover(ctx: &Ctx) -> Result<Finding, String> {
    let local = ["gpu0", "gpu1", "gpu2"];
    let pool = ["gpu0", "gpu1", "gpu2", "machine-b:gpu0"];
    let total = |streams: u32, gpus: &[&str]| -> Result<f64, String> {
        let config = VideoConfig {
            host: "machine-a".into(),
            gpus: gpus.iter().map(|g| g.to_string()).collect(),
            streams,
            fps: 30,
            frames: 24,
            spoil: None,
        };
        video(&cluster(ctx, "video-lending")?, &config)
            .map(|r| r.total_fps)
            .map_err(|e| e.to_string())
    };
    let (l7, p7) = (total(7, &local)?, total(7, &pool)?);
    let (l8, p8) = (total(8, &local)?, total(8, &pool)?);
    let (g7, g8) = (pct(p7, l7), pct(p8, l8));
    Ok(Finding {
        measured: format!(
            "7 streams: {l7:.1} frames/s local, {p7:.1} with the borrowed K40c ({g7:+.1} %); \
             8 streams: {l8:.1} and {p8:.1} ({g8:+.1} %)"
        ),
        rule: "the borrowed GPU adds at most 1 % at 7 streams and more than 1 % at 8".into(),
        holds: g7 <= 1.0 && g8 > 1.0,
        plots: vec![bars(
            "ii-3.svg",
            "Total frames/s at 7 and 8 streams",
            "frames/s",
            vec![
                ("7, local".into(), l7),
                ("7, +borrowed".into(), p7),
                ("8, local".into(), l8),
                ("8, +borrowed".into(), p8),
            ],
        )],
    })
}

/// Each placement of `exp train` and its mean epoch time.
type Epochs = Vec<(String, f64)>;

/// The mean epoch time of each placement of `exp train`, by label, and its plots that no
/// earlier figure showed (IV-21 and V-30 read one run and one plot).
fn train_epochs(ctx: &Ctx) -> Result<(Epochs, Vec<Plot>), String> {
    let report = ctx.exp(ExpName::Train, Some(1))?;
    let rows = report
        .json
        .as_array()
        .ok_or("exp train gave no rows")?
        .iter()
        .map(|r| {
            (
                r["placement"].as_str().unwrap_or("").to_string(),
                num(&r["run"]["mean_epoch_ns"]),
            )
        })
        .collect();
    Ok((rows, ctx.unshown(&report.plots)))
}

fn epoch(rows: &[(String, f64)], label: &str) -> f64 {
    rows.iter()
        .find(|(l, _)| l == label)
        .map_or(f64::NAN, |r| r.1)
}

fn keras_vms(ctx: &Ctx) -> Result<Finding, String> {
    let (rows, plots) = train_epochs(ctx)?;
    let (nat_loc, nat_rem) = (epoch(&rows, "NatLoc"), epoch(&rows, "NatRem-IOMMU"));
    let (vm_loc, vm_rem) = (epoch(&rows, "VMLoc (VFIO)"), epoch(&rows, "VMRem (MDEV)"));
    let nat_rem_sw = epoch(&rows, "single lender");
    Ok(Finding {
        measured: format!(
            "epoch: NatLoc {:.1} ms, NatRem-IOMMU {:+.2} %, VMLoc {:+.4} %, VMRem {:+.2} %, \
             NatRem-SW {:+.4} % (against NatLoc)",
            nat_loc / 1e6,
            pct(nat_rem, nat_loc),
            pct(vm_loc, nat_loc),
            pct(vm_rem, nat_loc),
            pct(nat_rem_sw, nat_loc)
        ),
        rule: "NatRem-IOMMU > NatLoc, VMRem > VMLoc, VMLoc > NatRem-SW".into(),
        holds: nat_rem > nat_loc && vm_rem > vm_loc && vm_loc > nat_rem_sw,
        plots,
    })
}

fn keras_lenders(ctx: &Ctx) -> Result<Finding, String> {
    let (rows, plots) = train_epochs(ctx)?;
    let local = epoch(&rows, "local devices");
    let one = epoch(&rows, "single lender");
    let two = epoch(&rows, "two lenders");
    Ok(Finding {
        measured: format!(
            "epoch: local {:.1} ms, single lender {:+.4} %, two lenders {:+.4} %",
            local / 1e6,
            pct(one, local),
            pct(two, local)
        ),
        rule: "single lender within 2 % of local; two lenders slower than one, within 5 %".into(),
        holds: pct(one, local).abs() <= 2.0 && two > one && pct(two, local) <= 5.0,
        plots,
    })
}

fn gpu_nvme(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::GpuNvme, Some(512))?;
    let rows = report.json.as_array().ok_or("exp gpu-nvme gave no rows")?;
    let mut worst: f64 = 0.0;
    let mut measured = Vec::new();
    for r in rows {
        let (g, c) = (
            num(&r["gpu_driven"]["mib_s"]),
            num(&r["cpu_driven"]["mib_s"]),
        );
        worst = worst.max(pct(g, c).abs());
        measured.push(format!(
            "{}:{} kernel {g:.0} MiB/s, CPU {c:.0} MiB/s",
            r["host"].as_str().unwrap_or(""),
            r["gpu"].as_str().unwrap_or("")
        ));
    }
    Ok(Finding {
        measured: measured.join("; "),
        rule: "GPU-driven within 5 % of CPU-driven for every GPU".into(),
        holds: !rows.is_empty() && worst <= 5.0,
        plots: ctx.unshown(&report.plots),
    })
}

fn gpu_bw(
    ctx: &Ctx,
    scenario: &str,
    host: &str,
    device: &str,
    direction: GpuCopyDirection,
    sizes: &[u64],
) -> Result<Vec<DmaSample>, String> {
    let config = GpuBandwidthConfig {
        host: host.into(),
        device: device.into(),
        direction,
        sizes: sizes.to_vec(),
        copies: 4,
        repeat: 2,
    };
    bench_gpu_bandwidth(&cluster(ctx, scenario)?, &config)
        .map(|r| r.samples)
        .map_err(|e| e.to_string())
}

const KIB4: u64 = 4 << 10;
const MIB1: u64 = 1 << 20;
const MIB16: u64 = 16 << 20;

fn gpu_local_equals_borrowed(ctx: &Ctx) -> Result<Finding, String> {
    let sizes = [KIB4, MIB1, MIB16];
    let h2d = GpuCopyDirection::HostToDevice;
    let local = gpu_bw(ctx, "local-chassis", "local", "gpu0", h2d, &sizes)?;
    let lent = gpu_bw(ctx, "back-to-back", "borrower", "lender:gpu0", h2d, &sizes)?;
    Ok(same_at_sizes("host to GPU", &local, &lent, &sizes, 2.0))
}

fn gpu_extra_hop(ctx: &Ctx) -> Result<Finding, String> {
    let sizes = [MIB1, MIB16];
    let (h2d, d2h) = (
        GpuCopyDirection::HostToDevice,
        GpuCopyDirection::DeviceToHost,
    );
    let local_r = gpu_bw(ctx, "local-chassis", "local", "gpu0", h2d, &sizes)?;
    let far_r = gpu_bw(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        h2d,
        &sizes,
    )?;
    let local_w = gpu_bw(ctx, "local-chassis", "local", "gpu0", d2h, &sizes)?;
    let far_w = gpu_bw(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        d2h,
        &sizes,
    )?;
    let read_drop = pct(at(&far_r, MIB1), at(&local_r, MIB1));
    let write_drop = pct(at(&far_w, MIB16), at(&local_w, MIB16));
    Ok(Finding {
        measured: format!(
            "reads (host to GPU) at 1 MiB: {} local, {} over the cluster switch ({read_drop:+.1} \
             %); writes at 16 MiB: {} and {} ({write_drop:+.1} %)",
            gbs(at(&local_r, MIB1)),
            gbs(at(&far_r, MIB1)),
            gbs(at(&local_w, MIB16)),
            gbs(at(&far_w, MIB16))
        ),
        rule: "reads lower by more than 2 %, writes within 2 %".into(),
        holds: read_drop < -2.0 && write_drop.abs() <= 2.0,
        plots: Vec::new(),
    })
}

fn p2p(
    ctx: &Ctx,
    scenario: &str,
    host: &str,
    source: &str,
    target: &str,
    sizes: &[u64],
) -> Result<Vec<DmaSample>, String> {
    let config = GpuP2pConfig {
        host: host.into(),
        source: source.into(),
        target: target.into(),
        direction: P2pDirection::Write,
        sizes: sizes.to_vec(),
        repeat: 3,
    };
    bench_gpu_p2p(&cluster(ctx, scenario)?, &config)
        .map(|r| r.samples)
        .map_err(|e| e.to_string())
}

fn p2p_same_lender(ctx: &Ctx) -> Result<Finding, String> {
    let sizes = [KIB4, MIB1];
    let local = p2p(ctx, "local-chassis", "local", "gpu0", "gpu1", &sizes)?;
    let lent = p2p(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        "lender:gpu1",
        &sizes,
    )?;
    Ok(same_at_sizes(
        "gpu0 → gpu1, borrowed from one lender",
        &local,
        &lent,
        &sizes,
        1.0,
    ))
}

fn p2p_two_lenders(ctx: &Ctx) -> Result<Finding, String> {
    let sizes = [KIB4, MIB16];
    let near = p2p(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        "lender:gpu1",
        &sizes,
    )?;
    let far = p2p(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        "lender2:gpu2",
        &sizes,
    )?;
    let (small, large) = (
        pct(at(&far, KIB4), at(&near, KIB4)),
        pct(at(&far, MIB16), at(&near, MIB16)),
    );
    Ok(Finding {
        measured: format!(
            "same lender / different lenders: 4 KiB {} / {} ({small:+.1} %), 16 MiB {} / {} \
             ({large:+.1} %)",
            gbs(at(&near, KIB4)),
            gbs(at(&far, KIB4)),
            gbs(at(&near, MIB16)),
            gbs(at(&far, MIB16))
        ),
        rule: "more than 10 % lower at 4 KiB, within 5 % at 16 MiB".into(),
        holds: small < -10.0 && large.abs() <= 5.0,
        plots: Vec::new(),
    })
}

/// `iterations` GPU ping-pong round trips between `a` and `b` on `scenario`.
fn gpu_round_trips(
    ctx: &Ctx,
    (scenario, host): (&str, &str),
    a: &str,
    b: &str,
    iterations: u32,
) -> Result<smartio_workloads::GpuPingPongResult, String> {
    let config = GpuPingPongConfig {
        host: host.into(),
        a: a.into(),
        b: b.into(),
        iterations,
        counters: CounterPlace::Gpu,
    };
    gpu_pingpong(&cluster(ctx, scenario)?, &config).map_err(|e| e.to_string())
}

fn gpu_one_way(ctx: &Ctx, scenario: &str, host: &str, a: &str, b: &str) -> Result<f64, String> {
    gpu_round_trips(ctx, (scenario, host), a, b, 1000).map(|r| r.one_way_ns.p50)
}

/// `measure` on the local GPU pair (local-chassis) and on the lent one (back-to-back, from
/// the borrower), as Paper V Fig. 25 compares them.
fn local_and_lent<R>(
    ctx: &Ctx,
    measure: impl Fn(&Ctx, &str, &str, &str, &str) -> Result<R, String>,
) -> Result<(R, R), String> {
    let local = measure(ctx, "local-chassis", "local", "gpu0", "gpu1")?;
    let lent = measure(
        ctx,
        "back-to-back",
        "borrower",
        "lender:gpu0",
        "lender:gpu1",
    )?;
    Ok((local, lent))
}

fn pingpong_same_lender(ctx: &Ctx) -> Result<Finding, String> {
    let (local, lent) = local_and_lent(ctx, gpu_one_way)?;
    Ok(Finding {
        measured: format!("one way (p50): local {local:.1} ns, borrowed {lent:.1} ns"),
        rule: "borrowed within 1 % of local".into(),
        holds: pct(lent, local).abs() <= 1.0,
        plots: Vec::new(),
    })
}

/// The steps of 100,000 round trips (the paper's count) between `a` and `b`.
fn gpu_steps(
    ctx: &Ctx,
    scenario: &str,
    host: &str,
    a: &str,
    b: &str,
) -> Result<Vec<smartio_workloads::RttStep>, String> {
    gpu_round_trips(ctx, (scenario, host), a, b, 100_000).map(|r| r.steps)
}

fn pingpong_steps(ctx: &Ctx) -> Result<Finding, String> {
    let (local, lent) = local_and_lent(ctx, gpu_steps)?;
    // A step holding at least 1 % of the round trips counts.
    let major = |s: &[smartio_workloads::RttStep]| {
        let total: u64 = s.iter().map(|x| x.count).sum();
        s.iter()
            .filter(|x| x.count * 100 >= total.max(1))
            .map(|x| x.rtt_ns)
            .collect::<Vec<_>>()
    };
    let (l, b) = (major(&local), major(&lent));
    let show = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(Finding {
        measured: format!(
            "round trips (ns) with at least 1 % of 100,000 each: local {} ({} steps in all), borrowed {} ({} in all)",
            show(&l),
            local.len(),
            show(&b),
            lent.len()
        ),
        rule: "at least 3 steps each holding 1 % or more, on both; the same steps local and borrowed"
            .into(),
        holds: l.len() >= 3 && b.len() >= 3 && l == b,
        plots: Vec::new(),
    })
}

fn pingpong_two_lenders(ctx: &Ctx) -> Result<Finding, String> {
    let near = gpu_one_way(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        "lender:gpu1",
    )?;
    let far = gpu_one_way(
        ctx,
        "cluster-switch",
        "borrower",
        "lender:gpu0",
        "lender2:gpu2",
    )?;
    let added = far - near;
    Ok(Finding {
        measured: format!(
            "one way (p50): same lender {near:.1} ns, different lenders {far:.1} ns: +{added:.1} ns"
        ),
        rule: "0 < added < 584 ns".into(),
        holds: added > 0.0 && added < 584.0,
        plots: Vec::new(),
    })
}

fn sriov_lent(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::Sriov, Some(2))?;
    let rows = report.json.as_array().ok_or("exp sriov gave no rows")?;
    let steady = |function: &str, how: &str| {
        rows.iter()
            .find(|r| r["function"] == function && r["how"] == how)
            .map_or(f64::NAN, |r| num(&r["steady_gbit_per_s"]))
    };
    let (local, lent) = (steady("VF", "local"), steady("VF", "lent"));
    Ok(Finding {
        measured: format!(
            "a VF's steady throughput: used locally {local:.2} Gbit/s, lent {lent:.2} Gbit/s"
        ),
        rule: "lent within 1 % of local".into(),
        holds: pct(lent, local).abs() <= 1.0,
        plots: ctx.unshown(&report.plots),
    })
}

fn sriov_shared(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::SriovShare, Some(2))?;
    let rows = report
        .json
        .as_array()
        .ok_or("exp sriov-share gave no rows")?;
    let row = rows
        .iter()
        .find(|r| r["name"] == "lender and borrower")
        .ok_or("exp sriov-share has no lender-and-borrower row")?;
    let streams = row["result"]["report"]["streams"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = num(&row["result"]["report"]["server_gbit_per_s"]);
    let mut bytes: Vec<(String, f64)> = Vec::new();
    for s in &streams {
        let client = s["client"].as_str().unwrap_or("").to_string();
        let b = num(&s["bytes"]);
        match bytes.iter_mut().find(|(c, _)| *c == client) {
            Some(e) => e.1 += b,
            None => bytes.push((client, b)),
        }
    }
    let all: f64 = bytes.iter().map(|b| b.1).sum();
    let least = bytes
        .iter()
        .map(|b| b.1 / all)
        .fold(f64::INFINITY, f64::min);
    Ok(Finding {
        measured: format!(
            "receiver {total:.2} Gbit/s from {} clients; the smallest share {:.0} %",
            bytes.len(),
            least * 100.0
        ),
        rule: "two clients, each at least 25 % of the bytes, together at least 90 Gbit/s".into(),
        holds: bytes.len() == 2 && least >= 0.25 && total >= 90.0,
        plots: ctx.unshown(&report.plots),
    })
}

fn iommu_penalty(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::IommuPenalty, Some(2))?;
    let rows = report.json["rows"]
        .as_array()
        .ok_or("exp iommu-penalty gave no rows")?;
    let largest = |name: &str, way: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r[way].as_array())
            .and_then(|s| s.last())
            .map_or(f64::NAN, |s| num(&s["median_bytes_per_s"]))
    };
    let base = "bare metal, no lender IOMMU";
    let iommu = "bare metal, lender IOMMU";
    let (r0, r1) = (largest(base, "read"), largest(iommu, "read"));
    let (w0, w1) = (largest(base, "write"), largest(iommu, "write"));
    let (rd, wd) = (r1 / r0, w1 / w0);
    Ok(Finding {
        measured: format!(
            "largest reads {} → {} with the lender IOMMU, writes {} → {}; causes: the \
             K40c's own copy rate ([gpu.k40c] copy_bus_bandwidth) bounds the baseline; with \
             the IOMMU each read crosses the lender's root complex twice and is cut into \
             64-byte requests sharing its open-request slots, each write waits for IOTLB \
             walks on new pages",
            gbs(r0),
            gbs(r1),
            gbs(w0),
            gbs(w1)
        ),
        rule: "baseline reads 9-11.5 GB/s, with the IOMMU 1.2-2.0 GB/s; writes keep a larger share"
            .into(),
        holds: (9e9..=11.5e9).contains(&r0) && (1.2e9..=2.0e9).contains(&r1) && wd > rd,
        plots: ctx.unshown(&report.plots),
    })
}

fn sq_placement(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::SqPlacement, Some(500))?;
    let rows = report
        .json
        .as_array()
        .ok_or("exp sq-placement gave no rows")?;
    let p50: Vec<(String, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["sq_in"].as_str().unwrap_or("").to_string(),
                num(&r["lat_ns"]["p50"]),
            )
        })
        .collect();
    let ordered = p50.len() >= 2 && p50.windows(2).all(|w| w[0].1 > w[1].1);
    Ok(Finding {
        measured: p50
            .iter()
            .map(|(at, ns)| format!("SQ in {at}: {ns:.0} ns"))
            .collect::<Vec<_>>()
            .join(", "),
        rule: "medians strictly decrease as the SQ moves closer to the NVMe".into(),
        holds: ordered,
        plots: ctx.unshown(&report.plots),
    })
}

fn share_30(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::Share30, Some(100))?;
    let j = &report.json;
    let clients = j["clients"].as_array().cloned().unwrap_or_default();
    let each = clients
        .iter()
        .map(|c| num(&c["verified_bytes"]))
        .fold(f64::INFINITY, f64::min);
    let refused = j["refused"].as_str().is_some();
    Ok(Finding {
        measured: format!(
            "{} clients on {} hosts, each with its own queue pair; the least verified {:.0} bytes; another queue pair refused: {refused}",
            clients.len(),
            clients.len(),
            each
        ),
        rule: "30 clients, every one read and verified data, and one more queue pair is refused"
            .into(),
        holds: clients.len() == 30 && each > 0.0 && refused,
        plots: ctx.unshown(&report.plots),
    })
}

fn share_30_starvation(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::Share30, Some(100))?;
    let j = &report.json;
    let (lo, hi) = (num(&j["p50_min_ns"]), num(&j["p50_max_ns"]));
    let fairness = num(&j["fairness"]);
    Ok(Finding {
        measured: format!(
            "clients' median latencies {lo:.0} to {hi:.0} ns; Jain's index of their rates {fairness:.4}"
        ),
        rule: "the slowest client's median at least 10 % above the fastest's".into(),
        holds: hi > 1.1 * lo,
        plots: Vec::new(),
    })
}

fn multicast(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::Multicast, None)?;
    let j = &report.json;
    let (verified, commands) = (num(&j["verified"]), num(&j["multicast_commands"]));
    Ok(Finding {
        measured: format!(
            "{commands:.0} Identify command; {verified:.0} receivers found the {:.0} bytes in their memory ({:.1} µs, against {:.1} µs for {:.0} unicast commands)",
            num(&j["bytes"]),
            num(&j["multicast_ns"]) / 1e3,
            num(&j["unicast_ns"]) / 1e3,
            num(&j["unicast_commands"])
        ),
        rule: "one command, 59 receivers verified".into(),
        holds: commands == 1.0 && verified == 59.0,
        plots: ctx.unshown(&report.plots),
    })
}

fn vm_nvme(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::VmNvme, Some(500))?;
    let rows = report.json["rows"]
        .as_array()
        .ok_or("exp vm-nvme gave no rows")?;
    let p50 = |row: &str| {
        rows.iter()
            .find(|r| r["row"] == row)
            .map_or(f64::NAN, |r| num(&r["qd1_interrupt"]["lat_ns"]["p50"]))
    };
    let (local, phys, vm) = (
        p50("local"),
        p50("bare-metal borrower"),
        p50("VM borrower (MDEV)"),
    );
    Ok(Finding {
        measured: format!(
            "QD1 read p50: local {local:.0} ns, physical borrower {:+.0} ns, VM borrower {:+.0} ns over local",
            phys - local,
            vm - local
        ),
        rule: "physical borrower adds 0 to 1000 ns; the VM borrower adds more, by under 1 µs"
            .into(),
        holds: (0.0..1000.0).contains(&(phys - local)) && vm > phys && vm - phys < 1000.0,
        plots: ctx.unshown(&report.plots),
    })
}

/// The row of `path` (`local-native`, `nvmeof-kernel`, …) doing `io` (`read`, `write`) in
/// nvmeof-compare's JSON; null if it did not run.
fn nvmeof_row<'a>(j: &'a Value, path: &str, io: &str) -> &'a Value {
    j["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["path"] == path && r["io"] == io))
        .unwrap_or(&Value::Null)
}

/// Of nvmeof-compare's plots, the overview and the step-by-step plots of the initiator and
/// I/O a figure is about (`steps` begins their file's part after `nvmeof-steps-`: `kernel-read`,
/// `polled-`), so each figure shows its own.
fn nvmeof_plots<'p>(plots: &'p [Plot], steps: &str) -> impl Iterator<Item = &'p Plot> {
    let steps = format!("nvmeof-steps-{steps}");
    plots
        .iter()
        .filter(move |p| p.file == "nvmeof-compare.svg" || p.file.starts_with(&steps))
}

/// Seed 003 Fig. 10: the kernel initiator against the native driver with interrupts and
/// the block layer, by the difference of the minimum latencies.
fn nvmeof_kernel(ctx: &Ctx, io: &str) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::NvmeofCompare, Some(500))?;
    let j = &report.json;
    let (native, kernel) = (
        nvmeof_row(j, "local-native", io),
        nvmeof_row(j, "nvmeof-kernel", io),
    );
    let (min, p50) = (num(&kernel["added"]["min"]), num(&kernel["added"]["p50"]));
    Ok(Finding {
        measured: format!(
            "4 KiB {io}: native driver (interrupts, block layer) min {:.0} ns; NVMe-oF with the kernel initiator {min:+.0} ns at the minimum, {p50:+.0} ns at the median",
            num(&native["latency"]["min"])
        ),
        rule: "NVMe-oF (kernel initiator) − local (native, interrupts) minimum latency 6.5-9 µs"
            .into(),
        holds: (6500.0..=9000.0).contains(&min),
        plots: ctx.unshown(nvmeof_plots(&report.plots, &format!("kernel-{io}"))),
    })
}

fn nvmeof_kernel_read(ctx: &Ctx) -> Result<Finding, String> {
    nvmeof_kernel(ctx, "read")
}

fn nvmeof_kernel_write(ctx: &Ctx) -> Result<Finding, String> {
    nvmeof_kernel(ctx, "write")
}

/// Seed 004 Fig. 10: SPDK on both sides, so the polled initiator against the polled local
/// driver, by the 99th percentiles.
fn nvmeof(ctx: &Ctx) -> Result<Finding, String> {
    let report = ctx.exp(ExpName::NvmeofCompare, Some(500))?;
    let j = &report.json;
    let local = num(&nvmeof_row(j, "local-smartio", "read")["latency"]["p99"]);
    let smartio = num(&nvmeof_row(j, "remote-smartio", "read")["added"]["p99"]);
    let added = num(&nvmeof_row(j, "nvmeof-polled", "read")["added"]["p99"]);
    Ok(Finding {
        measured: format!(
            "4 KiB read p99: local polled driver {local:.0} ns, SmartIO remote {smartio:+.0} ns, NVMe-oF with the polled initiator {added:+.0} ns"
        ),
        rule: "NVMe-oF (polled initiator) adds 6.5-9 µs at the 99th percentile; SmartIO remote adds less than 1 µs".into(),
        holds: (6500.0..=9000.0).contains(&added) && smartio < 1000.0,
        plots: ctx.unshown(nvmeof_plots(&report.plots, "polled-")),
    })
}
