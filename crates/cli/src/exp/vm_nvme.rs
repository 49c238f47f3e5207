//! `vm-nvme` (ICPP'18 companion §7, Fig. 7; Paper IV Fig. 19): one NVMe read by the same
//! native driver locally, from a local VFIO VM, from a bare-metal borrower (Device Lending)
//! and from a VM borrower (MDEV pass-through), on the same fabric.
//!
//! QD1 4 KiB random reads in interrupt and polling mode, and sequential 128 KiB reads for
//! bandwidth. Polling takes interrupts out: a VM borrower then costs what a bare-metal one
//! does (the data path is the same hardware). With interrupts the VM pays the software relay
//! (lender handler, a notification over the NTB, the borrower's handler, an eventfd, KVM's
//! injection, the guest's interrupt entry) where the bare-metal borrower's MSI crosses the
//! NTB itself.
//!
//! With `--breakdown` ([`run_explained`]), each row's QD1 interrupt-mode run is done again
//! recorded, and its p50 read's critical path is shown, with one table comparing the rows
//! by kind of step: where the VM and the borrower spend what local does not.

use super::experiment::{Experiment, Takes};
use super::plot::{Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::{ns, table};
use crate::error::CliError;
use crate::explain::{self, ExplainArgs, Recorded};
use smartio_drivers::CompletionMode;
use smartio_machine::{StepClass, Trace};
use smartio_platform::SimDuration;
use smartio_workloads::fio::run_fio_explained;
use smartio_workloads::{
    pingpong, run_fio, Amount, Explained, FioConfig, FioResult, PingPongConfig, RwMode, Target,
};

/// `exp vm-nvme`.
pub struct VmNvme;

impl Experiment for VmNvme {
    fn name(&self) -> &'static str {
        "vm-nvme"
    }

    fn help(&self) -> &'static str {
        "One NVMe read locally, from a local VFIO VM, a bare-metal borrower and an MDEV VM \
         borrower, with interrupts and polling, and sequential bandwidth (ICPP'18 Fig. 7)"
    }

    fn default_scenario(&self) -> &'static str {
        "vm-back-to-back"
    }

    fn takes(&self) -> Takes {
        Takes {
            explain: true,
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(2000, "QD1 reads in each of 4 rows", 1.0, 200e-6, 64, 0)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }

    fn run_explained(
        &self,
        setup: &Setup,
        explain: &ExplainArgs,
    ) -> Result<(Report, String), CliError> {
        run_explained(setup, explain)
    }
}

/// QD1 reads per row unless `--ops` says otherwise.
const OPS: u64 = 2000;

/// Sequential reads per row for bandwidth.
const SEQ_OPS: u64 = 400;

/// One way of reaching the NVMe.
struct Row {
    label: &'static str,
    host: String,
    device: String,
}

/// What each row measured.
#[derive(serde::Serialize)]
struct Measured {
    row: &'static str,
    host: String,
    device: String,
    qd1_interrupt: FioResult,
    qd1_poll: FioResult,
    sequential: FioResult,
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    measure(setup, &ExplainArgs::default()).map(|(report, _)| report)
}

/// One row's explained p50 QD1 read (interrupt mode), and its recorded run's trace.
pub struct RowBreakdown {
    /// The row's label ("local", "VM borrower (MDEV)").
    pub row: &'static str,
    /// The host it ran on.
    pub host: String,
    /// The p50 read, if it was explained.
    pub explained: Option<Explained>,
    /// The recorded run's trace (with `--trace`).
    pub trace: Option<Trace>,
}

/// [`run`] with `--breakdown` / `--trace`: the report (its JSON with a `breakdown` field
/// when breaking down), the text to print after it, and what each row's recorded run
/// explained. The traces of the four recorded runs are written to one file, a process per
/// row and kind of track.
fn run_explained(setup: &Setup, explain: &ExplainArgs) -> Result<(Report, String), CliError> {
    explain.check()?;
    let (mut report, rows) = measure(setup, explain)?;
    if let Some(path) = &explain.trace {
        let runs: Vec<(Option<&str>, &Trace)> = rows
            .iter()
            .filter_map(|r| r.trace.as_ref().map(|t| (Some(r.row), t)))
            .collect();
        explain::write_traces(path, &runs)?;
    }
    if !explain.breakdown {
        return Ok((report, String::new()));
    }
    let mut text = String::new();
    for r in &rows {
        if let Some(e) = &r.explained {
            let e = Explained {
                name: format!("{} ({}):", r.row, r.host),
                ..e.clone()
            };
            text.push_str(&explain::render(
                std::slice::from_ref(&e),
                "p50 QD1 4 KiB read with interrupts",
            ));
        }
    }
    let (table, by_class) = compare_by_class(&rows);
    text.push_str(&crate::render::wrapped(
        "where the rows' p50 reads spent their time, by kind of step (ns; in brackets the difference from local):",
        "",
        "  ",
    ));
    text.push_str(&format!("{table}\n"));
    if let Some(json) = report.json.as_object_mut() {
        let rows_json: Vec<serde_json::Value> = rows
            .iter()
            .filter_map(|r| {
                let e = r.explained.as_ref()?;
                let mut v = serde_json::to_value(explain::to_json(std::slice::from_ref(e)))
                    .ok()?
                    .as_array_mut()?
                    .pop()?;
                let o = v.as_object_mut()?;
                o.insert("row".into(), r.row.into());
                o.insert("host".into(), r.host.clone().into());
                Some(v)
            })
            .collect();
        json.insert(
            "breakdown".into(),
            serde_json::json!({"rows": rows_json, "by_class": by_class}),
        );
    }
    Ok((report, text))
}

/// The rows' p50 reads side by side, a line per kind of step (and the total); the JSON
/// form maps each kind to each row's nanoseconds.
fn compare_by_class(rows: &[RowBreakdown]) -> (comfy_table::Table, serde_json::Value) {
    let explained: Vec<(&RowBreakdown, &Explained)> = rows
        .iter()
        .filter_map(|r| r.explained.as_ref().map(|e| (r, e)))
        .collect();
    let sums: Vec<Vec<(StepClass, SimDuration)>> =
        explained.iter().map(|(_, e)| e.path.by_class()).collect();
    let mut classes: Vec<StepClass> = sums.iter().flatten().map(|(c, _)| *c).collect();
    classes.sort();
    classes.dedup();
    let of = |i: usize, c: StepClass| {
        sums[i]
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(0, |(_, d)| d.as_ps())
    };
    let mut header = vec!["kind of step"];
    header.extend(explained.iter().map(|(r, _)| r.row));
    let mut t = table(&header);
    let cell = |i: usize, ps: u64, local: u64| {
        let v = explain::fmt_ns(ps);
        if i == 0 {
            v
        } else {
            let d = ps as i128 - local as i128;
            let sign = if d < 0 { "-" } else { "+" };
            format!("{v} ({sign}{})", explain::fmt_ns(d.unsigned_abs() as u64))
        }
    };
    let mut json = serde_json::Map::new();
    for c in &classes {
        let local = of(0, *c);
        let mut line = vec![c.name().to_string()];
        let mut per_row = serde_json::Map::new();
        for (i, (r, _)) in explained.iter().enumerate() {
            let ps = of(i, *c);
            line.push(cell(i, ps, local));
            per_row.insert(r.row.to_string(), (ps as f64 / 1000.0).into());
        }
        t.add_row(line);
        json.insert(c.name().to_string(), per_row.into());
    }
    let totals: Vec<u64> = explained
        .iter()
        .map(|(_, e)| e.path.total().as_ps())
        .collect();
    let mut line = vec!["total".to_string()];
    for (i, ps) in totals.iter().enumerate() {
        line.push(cell(i, *ps, totals.first().copied().unwrap_or(0)));
    }
    t.add_row(line);
    (t, json.into())
}

/// Runs the experiment; with `explain` asking, each row's QD1 interrupt-mode run goes
/// through [`ExplainArgs::run`] (its p50 read explained).
fn measure(setup: &Setup, explain: &ExplainArgs) -> Result<(Report, Vec<RowBreakdown>), CliError> {
    let (rows, notify_one_way_ns) = rows(setup)?;
    let (measured, breakdowns) = measure_rows(setup, explain, &rows)?;
    let report = report(setup, &measured, notify_one_way_ns)?;
    Ok((report, breakdowns))
}

/// The ways of reaching the scenario's first NVMe (locally, from a local VM if its lender
/// has one, from a bare-metal borrower and from that borrower's VM), and the one-way time
/// of a store between the lender and the borrower (the relay's notification).
fn rows(setup: &Setup) -> Result<(Vec<Row>, f64), CliError> {
    let probe = setup.fabric()?;
    let nvme = probe
        .endpoints()
        .iter()
        .find(|e| smartio_cluster::DeviceKind::of(e) == Some(smartio_cluster::DeviceKind::Nvme))
        .ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some("vm-nvme needs one"),
        })?;
    let lender = probe.host(nvme.host).name.clone();
    let device = nvme.name.clone();
    let vm_of = |host: &str| {
        probe
            .hosts()
            .iter()
            .find(|h| h.name == host)
            .and_then(|h| h.vms.first())
            .map(|v| format!("{host}/{}", v.name))
    };
    let borrower = probe
        .hosts()
        .iter()
        .find(|h| h.name != lender && !h.vms.is_empty())
        .map(|h| h.name.clone())
        .ok_or_else(|| ExpError::NoVmBorrower {
            scenario: setup.scenario.clone(),
            lender: lender.clone(),
        })?;
    let borrower_vm = vm_of(&borrower).unwrap_or_default();
    let mut rows = vec![Row {
        label: "local",
        host: lender.clone(),
        device: device.clone(),
    }];
    if let Some(vm) = vm_of(&lender) {
        rows.push(Row {
            label: "local VFIO VM",
            host: vm,
            device: device.clone(),
        });
    }
    let remote = format!("{lender}:{device}");
    rows.push(Row {
        label: "bare-metal borrower",
        host: borrower.clone(),
        device: remote.clone(),
    });
    rows.push(Row {
        label: "VM borrower (MDEV)",
        host: borrower_vm,
        device: remote,
    });
    let notify_one_way_ns = {
        let cluster = setup.cluster()?;
        let r = pingpong(
            &cluster,
            &PingPongConfig {
                from: lender.clone(),
                to: borrower.clone(),
                iterations: 10,
            },
        )?;
        r.rtt_ns.p50 / 2.0
    };
    drop(probe);
    Ok((rows, notify_one_way_ns))
}

/// Each row's QD1 reads with interrupts (explained when asked), polled, and its sequential
/// reads; with each row's breakdown.
fn measure_rows(
    setup: &Setup,
    explain: &ExplainArgs,
    rows: &[Row],
) -> Result<(Vec<Measured>, Vec<RowBreakdown>), CliError> {
    let ops = setup.ops.unwrap_or(OPS);
    let fio = |row: &Row, mode: CompletionMode, rw: RwMode, bs: u64, iodepth: u32, n: u64| {
        let cfg = FioConfig {
            rw,
            bs,
            iodepth,
            amount: Amount::Ops(n),
            seed: setup.seed,
            mode,
            ..FioConfig::new(&row.host, &row.device)
        };
        run_fio(&*setup.cluster()?, &cfg)
            .map_err(|e| CliError::run(format!("{} ({})", row.label, row.host), e))
    };
    let qd1_interrupt = |row: &Row| FioConfig {
        rw: RwMode::RandRead,
        bs: 4096,
        iodepth: 1,
        amount: Amount::Ops(ops),
        seed: setup.seed,
        mode: CompletionMode::Interrupt,
        ..FioConfig::new(&row.host, &row.device)
    };
    let mut measured = Vec::new();
    let mut breakdowns = Vec::new();
    for row in rows {
        let Recorded {
            result: qd1,
            explained,
            trace,
        } = explain.run(
            || {
                fio(
                    row,
                    CompletionMode::Interrupt,
                    RwMode::RandRead,
                    4096,
                    1,
                    ops,
                )
            },
            |r| vec![Target::at_ns("p50", r.lat_ns.p50)],
            |spec| {
                run_fio_explained(&*setup.cluster()?, &qd1_interrupt(row), Some(spec))
                    .map_err(|e| CliError::run(format!("{} ({})", row.label, row.host), e))
            },
        )?;
        breakdowns.push(RowBreakdown {
            row: row.label,
            host: row.host.clone(),
            explained: explained.into_iter().next(),
            trace,
        });
        measured.push(Measured {
            row: row.label,
            host: row.host.clone(),
            device: row.device.clone(),
            qd1_interrupt: qd1,
            qd1_poll: fio(row, CompletionMode::Poll, RwMode::RandRead, 4096, 1, ops)?,
            sequential: fio(
                row,
                CompletionMode::Interrupt,
                RwMode::Read,
                128 << 10,
                4,
                SEQ_OPS,
            )?,
        });
    }
    Ok((measured, breakdowns))
}

/// The report of what the rows measured: the table, the notes comparing the rows with the
/// interrupt relay's steps, the plots and the JSON.
fn report(
    setup: &Setup,
    measured: &[Measured],
    notify_one_way_ns: f64,
) -> Result<Report, CliError> {
    let ops = setup.ops.unwrap_or(OPS);
    let get = |label: &str| measured.iter().find(|m| m.row == label);
    let (Some(local), Some(bare), Some(vm)) = (
        get("local"),
        get("bare-metal borrower"),
        get("VM borrower (MDEV)"),
    ) else {
        return Err(ExpError::MissingRow.into());
    };
    let cal = setup.calibration;
    let step = |p: &smartio_calibration::Param| p.value;
    let relay_steps = relay_steps(cal, notify_one_way_ns);
    let relay: f64 = relay_steps.iter().map(|(_, v)| v).sum();
    let mut t = table(&[
        "",
        "host",
        "QD1 interrupt p50 (ns)",
        "QD1 poll p50 (ns)",
        "sequential 128 KiB (MB/s)",
    ]);
    for m in measured {
        t.add_row(vec![
            m.row.to_string(),
            m.host.clone(),
            ns(m.qd1_interrupt.lat_ns.p50),
            ns(m.qd1_poll.lat_ns.p50),
            format!("{:.0}", m.sequential.bw_bytes_per_s / 1e6),
        ]);
    }
    let vm_vs_bare_irq = vm.qd1_interrupt.lat_ns.p50 - bare.qd1_interrupt.lat_ns.p50;
    let vm_vs_bare_poll = vm.qd1_poll.lat_ns.p50 - bare.qd1_poll.lat_ns.p50;
    let remote_poll = bare.qd1_poll.lat_ns.p50 - local.qd1_poll.lat_ns.p50;
    let remote_irq = bare.qd1_interrupt.lat_ns.p50 - local.qd1_interrupt.lat_ns.p50;
    let mut notes = vec![
        format!(
            "{ops} QD1 4 KiB random reads per row and mode, {SEQ_OPS} sequential 128 KiB reads at queue depth 4; the same native NVMe driver everywhere"
        ),
        format!(
            "VM borrower − bare-metal borrower: {} ns with interrupts, {} ns polling; the interrupt relay costs {} ns: {}",
            ns(vm_vs_bare_irq),
            ns(vm_vs_bare_poll),
            ns(relay),
            relay_steps
                .iter()
                .map(|(what, v)| format!("{what} {}", ns(*v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "the VM's extra is less than the relay because the bare-metal borrower's MSI crosses the NTB itself, where the VM's device interrupts its own lender".to_string(),
        format!(
            "polling, the VM is faster by what its DMA API does not do per I/O: the guest has no IOMMU and maps a buffer by its address (MDEV mapped the VM's memory once), where the bare-metal borrower's driver maps each buffer through the shadow's DMA window into its IOMMU and unmaps it: window hook {} + page-table entry {} + unmap {} = {} ns ([smartio], [cpu])",
            ns(step(&cal.smartio.dma_window_map_ns)),
            ns(step(&cal.cpu.iommu_map_page_ns)),
            ns(step(&cal.cpu.iommu_unmap_ns)),
            ns(step(&cal.smartio.dma_window_map_ns) + step(&cal.cpu.iommu_map_page_ns) + step(&cal.cpu.iommu_unmap_ns))
        ),
        format!(
            "remote − local (bare-metal borrower − local): {} ns polling, {} ns with interrupts: the doorbell, the command fetch (a read, there and back) and the data and completion each cross the NTB once more",
            ns(remote_poll),
            ns(remote_irq)
        ),
        "nothing here is set end to end: the rows differ by the emulated fabric and the [vm] and [cpu] calibration steps".to_string(),
    ];
    if let Some(vfio) = get("local VFIO VM") {
        notes.push(format!(
            "local VFIO VM − local: {} ns with interrupts (host handler, eventfd, injection, guest entry), {} ns polling",
            ns(vfio.qd1_interrupt.lat_ns.p50 - local.qd1_interrupt.lat_ns.p50),
            ns(vfio.qd1_poll.lat_ns.p50 - local.qd1_poll.lat_ns.p50)
        ));
    }
    let plots = plots(measured);
    let report = Report {
        title: "vm-nvme: local, local VFIO VM, bare-metal borrower and MDEV VM borrower".into(),
        table: t,
        notes,
        plots,
        json: serde_json::json!({
            "rows": measured,
            "relay_ns": relay,
            "relay_steps": relay_steps.iter().map(|(w, v)| serde_json::json!({"step": w, "ns": v})).collect::<Vec<_>>(),
            "vm_minus_bare_interrupt_ns": vm_vs_bare_irq,
            "vm_minus_bare_poll_ns": vm_vs_bare_poll,
            "remote_minus_local_poll_ns": remote_poll,
            "remote_minus_local_interrupt_ns": remote_irq,
        }),
    };
    Ok(report)
}

/// The steps of the interrupt relay from the lender's MDEV handler to the guest's
/// interrupt entry, each with its calibrated (or, the notification, measured) time.
fn relay_steps(
    cal: &smartio_calibration::Calibration,
    notify_one_way_ns: f64,
) -> [(&'static str, f64); 7] {
    let step = |p: &smartio_calibration::Param| p.value;
    [
        ("lender's MDEV handler", step(&cal.vm.irq_handler_ns)),
        (
            "notification over the NTB (one-way store, measured)",
            notify_one_way_ns,
        ),
        (
            "borrower's interrupt entry",
            step(&cal.cpu.interrupt_delivery_ns),
        ),
        ("borrower's SmartIO handler", step(&cal.vm.irq_handler_ns)),
        ("eventfd signal", step(&cal.vm.eventfd_signal_ns)),
        ("KVM injection", step(&cal.vm.irq_injection_ns)),
        (
            "guest's interrupt entry",
            step(&cal.cpu.interrupt_delivery_ns),
        ),
    ]
}

/// The rows' latencies with interrupts and polled, and their bandwidth, as bars.
fn plots(measured: &[Measured]) -> Vec<Plot> {
    let bars = |f: fn(&Measured) -> f64| {
        Chart::Bars(
            measured
                .iter()
                .map(|m| super::plot::Bar {
                    label: m.row.to_string(),
                    value: f(m),
                    range: None,
                })
                .collect(),
        )
    };
    vec![
        Plot {
            file: "vm-nvme-latency.svg".into(),
            title: "QD1 4 KiB read latency (p50), interrupt completions".into(),
            x_label: "".into(),
            y_label: "latency (ns)".into(),
            chart: bars(|m| m.qd1_interrupt.lat_ns.p50),
        },
        Plot {
            file: "vm-nvme-latency-poll.svg".into(),
            title: "QD1 4 KiB read latency (p50), polled completions".into(),
            x_label: "".into(),
            y_label: "latency (ns)".into(),
            chart: bars(|m| m.qd1_poll.lat_ns.p50),
        },
        Plot {
            file: "vm-nvme-bandwidth.svg".into(),
            title: "sequential 128 KiB reads, queue depth 4".into(),
            x_label: "".into(),
            y_label: "MB/s".into(),
            chart: bars(|m| m.sequential.bw_bytes_per_s / 1e6),
        },
    ]
}
