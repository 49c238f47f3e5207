//! `vm-p2p` (Paper V §7.3.2, Figs. 32–33; its journal companion's Table 2 and Figs. 15–18):
//! two devices of one host moving data between each other, passed through to a VM on that
//! host by local VFIO, passed through to a VM on another host by SmartIO's MDEV, and
//! borrowed by a bare-metal host with Device Lending.
//!
//! ```text
//!   local VFIO   lender/vm0     dma0, dma1          (the lender's own, by VFIO)
//!   MDEV         borrower/vm0   lender:dma0, lender:dma1   (SmartIO's MDEV parent)
//!   bare metal   borrower       lender:dma0, lender:dma1   (Device Lending)
//!
//!   borrower ── ntb0 ══ cable ══ lender.ntb0 ── lender root complex (+ IOMMU) ─┬─ dma0
//!   (CPU, RAM: MDEV and bare metal drive the copies from here)                  └─ dma1
//! ```
//!
//! Measured per row: `bench p2p` (dma0's engine writing its memory into dma1's, and reading
//! dma1's into its own) over transfer sizes, and `pingpong --device-a --device-b` (kernels
//! on the two devices storing a counter into each other's memory). The hosts and devices
//! come from the scenario: the first host with two DMA test devices and a VM is the lender,
//! the first other host with a VM the borrower.

use super::bandwidth::{self, Curve, Difference};
use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::{ns, table};
use crate::error::CliError;
use comfy_table::Table;
use serde::Serialize;
use smartio_cluster::DeviceKind;
use smartio_fabric::NodeKind;
use smartio_workloads::{
    bench_p2p, device_pingpong, DevicePingPongConfig, DevicePingPongResult, DmaSample, P2pConfig,
    P2pDirection,
};

/// `exp vm-p2p`.
pub struct VmP2p;

impl Experiment for VmP2p {
    fn name(&self) -> &'static str {
        "vm-p2p"
    }

    fn help(&self) -> &'static str {
        "Device-to-device throughput and ping-pong latency with two devices passed through to \
         a VM by local VFIO, by MDEV, and borrowed by a bare-metal host (Paper V Figs. 32-33)"
    }

    fn default_scenario(&self) -> &'static str {
        "vm-back-to-back"
    }

    fn takes(&self) -> Takes {
        Takes {
            checking: Some("times its copies without checking them"),
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(1000, "round trips in each of 3 rows", 15.0, 21e-6, 640, 0)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// Ping-pong round trips per row unless `--ops` says otherwise.
const ROUND_TRIPS: u32 = 1000;

/// One configuration: where the workload runs and how it names the devices.
struct Config {
    name: &'static str,
    host: String,
    a: String,
    b: String,
    how: &'static str,
}

/// One configuration's results.
#[derive(Debug, Clone, Serialize)]
struct Row {
    name: String,
    host: String,
    a: String,
    b: String,
    /// a's engine: a's memory into b's memory BAR.
    write: Vec<DmaSample>,
    /// a's engine: b's memory BAR into a's memory.
    read: Vec<DmaSample>,
    pingpong: DevicePingPongResult,
    /// Root complexes a store from a to b passes through (not counting its target).
    roots: Vec<String>,
    /// Nodes between a and b (chips and root complexes), as Table 2 counts hops.
    hops: usize,
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let repeat = bandwidth::REPEAT;
    let iterations = match setup.ops {
        None => ROUND_TRIPS,
        Some(n) => u32::try_from(n).map_err(|source| ExpError::RoundTrips { ops: n, source })?,
    };
    let probe = setup.fabric()?;
    let (lender, a, b) =
        names::device_pair(&probe, DeviceKind::Dma).ok_or_else(|| ExpError::NoDmaPair {
            scenario: setup.scenario.clone(),
        })?;
    let lender_vm = names::first_vm(&probe, &lender).ok_or_else(|| ExpError::NoLenderVm {
        scenario: setup.scenario.clone(),
        lender: lender.clone(),
        a: a.clone(),
        b: b.clone(),
    })?;
    let (borrower, borrower_vm) =
        names::other_host_with_vm(&probe, &lender).ok_or_else(|| ExpError::NoBorrowerVm {
            scenario: setup.scenario.clone(),
            lender: lender.clone(),
        })?;
    let lender_iommu = probe
        .hosts()
        .iter()
        .any(|h| h.name == lender && h.iommu.enabled());
    let root_complexes: Vec<String> = probe
        .nodes()
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::RootComplex))
        .map(|n| n.name.clone())
        .collect();
    drop(probe);
    let configs = configs(&lender, &lender_vm, &borrower, &borrower_vm, &a, &b);
    let mut rows = Vec::new();
    for c in &configs {
        rows.push(measure(setup, c, repeat, iterations, &root_complexes)?);
    }
    let curves = |pick: fn(&Row) -> &Vec<DmaSample>| -> Vec<Curve> {
        rows.iter()
            .map(|r| Curve {
                name: r.name.clone(),
                samples: pick(r).clone(),
            })
            .collect()
    };
    let (write, read) = (curves(|r| &r.write), curves(|r| &r.read));
    let (write_diff, read_diff) = (
        bandwidth::differences(&write[1], &write[2]),
        bandwidth::differences(&read[1], &read[2]),
    );
    let mut t = table(&bandwidth::header(
        &["local VFIO", "MDEV", "bare metal"],
        "MDEV vs bare metal %",
    ));
    bandwidth::add_rows(&mut t, "write GB/s", &write, &write_diff);
    bandwidth::add_rows(&mut t, "read GB/s", &read, &read_diff);
    add_latency_rows(&mut t, &rows);
    let notes = notes(
        setup,
        &configs,
        &rows,
        lender_iommu,
        &lender,
        [&write_diff, &read_diff],
    );
    let plots = plots(&a, &b, &write, &read, &rows);
    Ok(Report {
        title: format!(
            "vm-p2p: {a} and {b} of {lender} by local VFIO, by MDEV and borrowed bare metal"
        ),
        table: t,
        notes,
        plots,
        json: serde_json::json!({
            "repeat": repeat,
            "iterations": iterations,
            "rows": rows,
            "mdev_vs_bare_metal_percent": { "write": write_diff, "read": read_diff },
        }),
    })
}

/// The three ways the pair is used: by a VM on the lender (VFIO), by a VM on the borrower
/// (MDEV) and by the borrower itself (Device Lending).
fn configs(
    lender: &str,
    lender_vm: &str,
    borrower: &str,
    borrower_vm: &str,
    a: &str,
    b: &str,
) -> [Config; 3] {
    let remote = |d: &str| format!("{lender}:{d}");
    [
        Config {
            name: "local VFIO",
            host: format!("{lender}/{lender_vm}"),
            a: a.to_string(),
            b: b.to_string(),
            how: "its host's own, by VFIO",
        },
        Config {
            name: "MDEV",
            host: format!("{borrower}/{borrower_vm}"),
            a: remote(a),
            b: remote(b),
            how: "by SmartIO's MDEV parent",
        },
        Config {
            name: "bare metal",
            host: borrower.to_string(),
            a: remote(a),
            b: remote(b),
            how: "by Device Lending",
        },
    ]
}

/// One configuration's peer-to-peer writes and reads and its ping-pong, each on a fresh
/// cluster, with the root complexes (of `root_complexes`) and hops between the devices.
fn measure(
    setup: &Setup,
    c: &Config,
    repeat: u32,
    iterations: u32,
    root_complexes: &[String],
) -> Result<Row, CliError> {
    let failed = |e: CliError| {
        CliError::run(
            format!("{} ({} with {} and {})", c.name, c.host, c.a, c.b),
            e,
        )
    };
    let copies = |direction| {
        let config = P2pConfig {
            host: c.host.clone(),
            source: c.a.clone(),
            target: c.b.clone(),
            direction,
            sizes: bandwidth::SIZES.to_vec(),
            repeat,
        };
        let cluster = setup.cluster()?;
        bench_p2p(&cluster, &config).map_err(|e| failed(e.into()))
    };
    let write = copies(P2pDirection::Write)?;
    let read = copies(P2pDirection::Read)?;
    let pingpong = device_pingpong(
        &*setup.cluster()?,
        &DevicePingPongConfig {
            host: c.host.clone(),
            a: c.a.clone(),
            b: c.b.clone(),
            iterations,
        },
    )
    .map_err(|e| failed(e.into()))?;
    let between = pingpong
        .path_a_to_b
        .split_last()
        .map_or(&[][..], |(_, before)| before);
    Ok(Row {
        name: c.name.into(),
        host: c.host.clone(),
        a: c.a.clone(),
        b: c.b.clone(),
        write,
        read,
        roots: between
            .iter()
            .filter(|n| root_complexes.contains(n))
            .cloned()
            .collect(),
        hops: between.len(),
        pingpong,
    })
}

/// The one-way ping-pong latencies (p50, p99) of each configuration, and MDEV's against
/// bare metal.
fn add_latency_rows(t: &mut Table, rows: &[Row]) {
    for (measure, pick) in [
        (
            "one-way p50 ns",
            (|r: &Row| r.pingpong.one_way_ns.p50) as fn(&Row) -> f64,
        ),
        ("one-way p99 ns", |r: &Row| r.pingpong.one_way_ns.p99),
    ] {
        let mut row = vec![measure.to_string(), "8 B".to_string()];
        row.extend(rows.iter().map(|r| ns(pick(r))));
        row.push(format!(
            "{:+.1}",
            (pick(&rows[1]) - pick(&rows[2])) / pick(&rows[2]) * 100.0
        ));
        t.add_row(row);
    }
}

/// The write and read bandwidth curves, and the ping-pong's one-way latency as bars.
fn plots(a: &str, b: &str, write: &[Curve], read: &[Curve], rows: &[Row]) -> Vec<Plot> {
    vec![
        bandwidth::plot(
            "vm-p2p-write.svg",
            &format!("peer-to-peer writes, {a} memory to {b} memory"),
            write,
        ),
        bandwidth::plot(
            "vm-p2p-read.svg",
            &format!("peer-to-peer reads, {b} memory to {a} memory"),
            read,
        ),
        Plot {
            file: "vm-p2p-pingpong.svg".into(),
            title: format!("{a} <-> {b} ping-pong, one-way latency (p50; whiskers min to p99)"),
            x_label: "".into(),
            y_label: "one-way latency (ns)".into(),
            chart: Chart::Bars(
                rows.iter()
                    .map(|r| Bar {
                        label: r.name.clone(),
                        value: r.pingpong.one_way_ns.p50,
                        range: Some((r.pingpong.one_way_ns.min, r.pingpong.one_way_ns.p99)),
                    })
                    .collect(),
            ),
        },
    ]
}

/// A configuration's device-to-device path: through which root complexes, in how many hops.
fn path_note(c: &Config, r: &Row) -> String {
    format!(
        "{} ({}; {} and {} {}): device to device through {} root complex{} ({}) and {} \
         hop{}: {} -> {}",
        r.name,
        r.host,
        r.a,
        r.b,
        c.how,
        r.roots.len(),
        if r.roots.len() == 1 { "" } else { "es" },
        if r.roots.is_empty() {
            "shortest path".to_string()
        } else {
            r.roots.join(", ")
        },
        r.hops,
        if r.hops == 1 { "" } else { "s" },
        r.a,
        r.pingpong.path_a_to_b.join(" -> "),
    )
}

/// Whether the lender's IOMMU is on (and so where peer-to-peer goes), and whether the rows'
/// paths are the same.
fn iommu_note(rows: &[Row], lender_iommu: bool, lender: &str) -> String {
    let same_path = rows
        .windows(2)
        .all(|w| w[0].pingpong.path_a_to_b == w[1].pingpong.path_a_to_b);
    format!(
        "{lender}'s IOMMU is {}; the three rows' device-to-device paths are {}",
        if lender_iommu {
            "on, so peer-to-peer goes up through its root complex to be translated in every \
             row (local VFIO too: the VM's devices are in an IOMMU domain of the lender's own)"
        } else {
            "off (MDEV needs it on)"
        },
        if same_path {
            "the same"
        } else {
            "NOT the same"
        }
    )
}

/// The model's account of the table: each row's path (as Table 2 gives it), why the rows
/// differ where they do.
fn notes(
    setup: &Setup,
    configs: &[Config],
    rows: &[Row],
    lender_iommu: bool,
    lender: &str,
    [write_diff, read_diff]: [&[Difference]; 2],
) -> Vec<String> {
    let first = &rows[0];
    let mut notes = vec![format!(
        "{} copies per size: {a}'s copy engine writes its memory into {b}'s memory BAR \
         (write) or reads {b}'s memory into its own (read), no host RAM on the data path, each \
         copy timed from the driver's first register write to the CPU seeing the completion \
         word (written after the last byte landed: a copy that writes ends with a flushing \
         read); {} ping-pong round trips (kernels on {a} and {b} store a counter into each \
         other's memory; one way = half the round trip {a}'s kernel measures); every run on \
         a fresh cluster",
        bandwidth::REPEAT,
        first.pingpong.iterations,
        a = configs[0].a,
        b = configs[0].b,
    )];
    notes.extend(configs.iter().zip(rows).map(|(c, r)| path_note(c, r)));
    notes.push(iommu_note(rows, lender_iommu, lender));
    // The per-copy cost that separates the rows: constant over sizes, so it fades.
    let gap = |row: &Row, i: usize| {
        let (x, y) = (row.write.get(i), first.write.get(i));
        x.zip(y)
            .map_or(0.0, |(x, y)| (x.median_ns - y.median_ns) / 1e3)
    };
    let last = first.write.len().saturating_sub(1);
    let size = |i: usize| {
        first
            .write
            .get(i)
            .map_or_else(String::new, |s| crate::render::iec_size(s.size_bytes))
    };
    notes.push(format!(
        "writes per copy, minus local VFIO's: MDEV {:+.2} µs at {} and {:+.2} µs at {}, bare \
         metal {:+.2} and {:+.2}: a constant per copy, which fades from the throughput as \
         sizes grow. With local VFIO the driving CPU and the completion word are the \
         lender's; with MDEV and bare metal the descriptor store, the doorbell and the \
         completion-word write cross the NTB. Paper V §7.3.2 also saw local VFIO ahead at \
         small sizes and the rows converge, and suspected interrupt delivery to the VM; the \
         model's driver polls, so no interrupt is on its timed path",
        gap(&rows[1], 0),
        size(0),
        gap(&rows[1], last),
        size(last),
        gap(&rows[2], 0),
        gap(&rows[2], last),
    ));
    let top = |samples: &[DmaSample]| samples.last().map_or(0.0, |s| s.median_bytes_per_s / 1e9);
    if !first.roots.is_empty() {
        let cal = setup.calibration;
        notes.push(format!(
            "peer reads reach {:.3} GB/s at {} against {:.3} for writes: a read request from \
             {} crosses the root complex, which re-emits it as {:.0}-byte ones ([root_complex] \
             forwarded_read_request_bytes) and keeps {:.0} of them open ([root_complex] \
             forwarded_reads_outstanding)",
            top(&first.read),
            size(last),
            top(&first.write),
            first.a,
            cal.root_complex.forwarded_read_request_bytes.value,
            cal.root_complex.forwarded_reads_outstanding.value,
        ));
    }
    if lender_iommu {
        if let Some(note) = warm_iotlb(setup, first, &size(last)) {
            notes.push(note);
        }
    }
    let worst = |d: &[Difference]| d.iter().map(|d| d.percent.abs()).fold(0.0, f64::max);
    notes.push(format!(
        "MDEV vs bare metal: at most {:.1}% apart in writes and {:.1}% in reads at any size; \
         one-way ping-pong p50 {} ns against {} ns",
        worst(write_diff),
        worst(read_diff),
        ns(rows[1].pingpong.one_way_ns.p50),
        ns(rows[2].pingpong.one_way_ns.p50),
    ));
    notes.push(
        "for comparison only (nothing is fitted to it): Paper V Fig. 33 saw the three rows' \
         throughput converge as transfers grow, and MDEV's ping-pong latency distribution \
         like bare metal's"
            .to_string(),
    );
    notes
}

/// Why small copies run above the largest one's rate with the lender's IOMMU on, when they
/// do: from the second copy on, a copy that touches no more pages than the IOTLB holds finds
/// every translation there, while a larger one evicts its own pages and waits for a walk on
/// each of them in every copy. `None` when no size beats the largest.
fn warm_iotlb(setup: &Setup, row: &Row, largest: &str) -> Option<String> {
    let top = row.write.last()?;
    let peak = row
        .write
        .iter()
        .max_by(|a, b| a.median_bytes_per_s.total_cmp(&b.median_bytes_per_s))?;
    if peak.median_bytes_per_s <= top.median_bytes_per_s {
        return None;
    }
    let cal = &setup.calibration.root_complex;
    let entries = cal.iotlb_entries.value;
    Some(format!(
        "{} writes peak at {:.3} GB/s at {} (its first copy, with a cold IOTLB: {:.3}), above \
         the {:.3} GB/s of {largest}: the lender's IOTLB holds {entries:.0} translations of 4 \
         KiB ([root_complex] iotlb_entries, a reach of {}), so a copy that small finds all of \
         its pages there from its second copy on, while a copy of more pages evicts its own \
         and waits {:.0} ns ([root_complex] iotlb_miss_ns) for a walk on every page of every \
         copy; reads likewise",
        row.name,
        peak.median_bytes_per_s / 1e9,
        crate::render::iec_size(peak.size_bytes),
        peak.min_bytes_per_s / 1e9,
        top.median_bytes_per_s / 1e9,
        crate::render::iec_size((entries as u64).saturating_mul(4096)),
        cal.iotlb_miss_ns.value,
    ))
}
