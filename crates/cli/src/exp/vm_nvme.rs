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

use super::{ns, table, Chart, Plot, Report, Setup};
use smartio_drivers::CompletionMode;
use smartio_workloads::{pingpong, run_fio, Amount, FioConfig, FioResult, PingPongConfig, RwMode};

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

pub fn run(setup: &Setup) -> Result<Report, String> {
    let probe = setup.fabric()?;
    let nvme = probe
        .endpoints()
        .iter()
        .find(|e| smartio_cluster::DeviceKind::of(e) == Some(smartio_cluster::DeviceKind::Nvme))
        .ok_or_else(|| {
            format!(
                "{} has no NVMe controller; vm-nvme needs one",
                setup.scenario
            )
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
        .ok_or_else(|| {
            format!(
                "{} has no host besides {lender} with a VM ([[host.vm]]); vm-nvme needs one to borrow into",
                setup.scenario
            )
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
        )
        .map_err(|e| e.to_string())?;
        r.rtt_ns.p50 / 2.0
    };
    drop(probe);
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
        run_fio(&setup.cluster()?, &cfg).map_err(|e| format!("{} ({}): {e}", row.label, row.host))
    };
    let mut measured = Vec::new();
    for row in &rows {
        measured.push(Measured {
            row: row.label,
            host: row.host.clone(),
            device: row.device.clone(),
            qd1_interrupt: fio(
                row,
                CompletionMode::Interrupt,
                RwMode::RandRead,
                4096,
                1,
                ops,
            )?,
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
    let get = |label: &str| measured.iter().find(|m| m.row == label);
    let (Some(local), Some(bare), Some(vm)) = (
        get("local"),
        get("bare-metal borrower"),
        get("VM borrower (MDEV)"),
    ) else {
        return Err("vm-nvme: a row is missing (an emulator bug)".into());
    };
    let cal = setup.calibration;
    let step = |p: &smartio_calibration::Param| p.value;
    let relay_steps = [
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
    ];
    let relay: f64 = relay_steps.iter().map(|(_, v)| v).sum();
    let mut t = table(&[
        "",
        "host",
        "QD1 interrupt p50 (ns)",
        "QD1 poll p50 (ns)",
        "sequential 128 KiB (MB/s)",
    ]);
    for m in &measured {
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
    let bars = |f: fn(&Measured) -> f64| {
        Chart::Bars(
            measured
                .iter()
                .map(|m| super::Bar {
                    label: m.row.to_string(),
                    value: f(m),
                    range: None,
                })
                .collect(),
        )
    };
    let plots = vec![
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
    ];
    Ok(Report {
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
    })
}
