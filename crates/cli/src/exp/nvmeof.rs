//! `nvmeof-compare` (Paper V §7.4, Figs. 36–38; seed 003 Fig. 10; seed 004 Figs. 9–10):
//! QD1 random reads and writes of one NVMe by the native driver and the SmartIO driver on
//! the NVMe's own host, the SmartIO driver on another host over the NTB, and NVMe-oF over
//! RDMA from that host with a polled user-space initiator and with the kernel's.
//!
//! The hosts come from the scenario: the target is the host of the first NVMe, the
//! initiator the first other host (on `back-to-back`, lender and borrower).

use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::{ns, table};
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_nvmeof::{
    nvmeof_compare, IoPath, NvmeofCompare as Compared, NvmeofConfig, NvmeofIo, TargetMode,
};

/// `exp nvmeof-compare`.
pub struct NvmeofCompare;

impl Experiment for NvmeofCompare {
    fn name(&self) -> &'static str {
        "nvmeof-compare"
    }

    fn help(&self) -> &'static str {
        "The SmartIO driver local and remote against NVMe-oF over RDMA (Paper V Fig. 36)"
    }

    fn default_scenario(&self) -> &'static str {
        "back-to-back"
    }

    fn takes(&self) -> Takes {
        Takes {
            nvmeof: true,
            checking: Some("checks every byte it reads anyway"),
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(1000, "I/Os in each row", 1.0, 200e-6, 64, 4 << 10)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// A short name for a bar.
fn short(path: IoPath) -> &'static str {
    match path {
        IoPath::LocalNative => "local native",
        IoPath::LocalSmartio => "local SmartIO",
        IoPath::RemoteSmartio => "remote SmartIO",
        IoPath::NvmeofPolled => "NVMe-oF polled",
        IoPath::NvmeofKernel => "NVMe-oF kernel",
    }
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let probe = setup.fabric()?;
    let (target, nvme) =
        names::first_device(&probe, DeviceKind::Nvme, None).ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some("nvmeof-compare needs one, and another host to read it from"),
        })?;
    let initiator = names::other_hosts(&probe, &target)
        .into_iter()
        .next()
        .ok_or_else(|| ExpError::NoReader {
            scenario: setup.scenario.clone(),
            target: target.clone(),
        })?;
    drop(probe);
    let options = setup.nvmeof;
    let config = NvmeofConfig {
        device: format!("{target}:{nvme}"),
        target,
        initiator,
        ops: setup.ops.unwrap_or(NvmeofConfig::default().ops),
        seed: setup.seed,
        io: options.io(),
        initiators: options.initiators(),
        target_mode: options.target_mode(),
        ..NvmeofConfig::default()
    };
    let r = nvmeof_compare(&*setup.cluster()?, &config)?;
    Ok(Report {
        title: "nvmeof-compare: the native and SmartIO drivers, local and remote, vs NVMe-oF"
            .into(),
        table: rows_table(&r, &config),
        notes: notes(&r, &config),
        plots: plots(&r),
        json: serde_json::to_value(&r)?,
    })
}

/// A row's short name and the host whose CPU issues its I/O.
fn label(path: IoPath, config: &NvmeofConfig) -> String {
    let host = if path.remote() {
        &config.initiator
    } else {
        &config.target
    };
    format!("{} ({host})", short(path))
}

/// What the rows of `r` are, in words.
fn legend(r: &Compared, config: &NvmeofConfig) -> String {
    let mut paths: Vec<IoPath> = r.rows.iter().map(|x| x.path).collect();
    paths.sort();
    paths.dedup();
    let each: Vec<String> = paths
        .iter()
        .map(|&p| {
            let what = match p {
                IoPath::RemoteSmartio => {
                    format!("{}, its SQ in {}", p.describe(), r.remote_sq_in)
                }
                IoPath::NvmeofPolled | IoPath::NvmeofKernel => format!(
                    "{}, {} → {} over RDMA, {}",
                    p.describe(),
                    config.initiator,
                    config.target,
                    match r.target_mode {
                        TargetMode::Spdk => "SPDK target",
                        TargetMode::Offload => "target offload",
                    }
                ),
                _ => p.describe().to_string(),
            };
            format!("{} = {what}", short(p))
        })
        .collect();
    format!("rows: {}", each.join("; "))
}

fn rows_table(r: &Compared, config: &NvmeofConfig) -> comfy_table::Table {
    let mut t = table(&[
        "",
        "I/O",
        "min (ns)",
        "p50 (ns)",
        "p99 (ns)",
        "compared with",
        "+min (ns)",
        "+p50 (ns)",
    ]);
    for row in &r.rows {
        let base = row.path != row.baseline;
        t.add_row(vec![
            label(row.path, config),
            row.io.name().to_string(),
            ns(row.latency.min),
            ns(row.latency.p50),
            ns(row.latency.p99),
            if base { short(row.baseline) } else { "" }.to_string(),
            if base {
                ns(row.added.min)
            } else {
                String::new()
            },
            if base {
                ns(row.added.p50)
            } else {
                String::new()
            },
        ]);
    }
    t
}

fn notes(r: &Compared, config: &NvmeofConfig) -> Vec<String> {
    let ios: Vec<&str> = {
        let mut v: Vec<NvmeofIo> = r.rows.iter().map(|x| x.io).collect();
        v.dedup();
        v.iter()
            .map(|io| match io {
                NvmeofIo::Read => "reads",
                NvmeofIo::Write => "writes",
            })
            .collect()
    };
    let mut notes = vec![format!(
        "{} QD1 {}-byte random {} of {} per row; every read is checked where its reader gets \
         it, and the blocks each write row wrote are read back and checked",
        r.ops,
        r.bs,
        ios.join(" and "),
        config.device
    )];
    notes.push(legend(r, config));
    for io in [NvmeofIo::Read, NvmeofIo::Write] {
        let gaps: Vec<String> = r
            .rows
            .iter()
            .filter(|x| x.io == io && x.path.remote())
            .map(|x| {
                format!(
                    "{} − {} = {} ns min, {} ns p50",
                    short(x.path),
                    short(x.baseline),
                    ns(x.added.min),
                    ns(x.added.p50)
                )
            })
            .collect();
        if !gaps.is_empty() {
            notes.push(format!("{}s: {}", io.name(), gaps.join("; ")));
        }
    }
    notes.push(
        "like for like, as the seeds measured: the kernel initiator against the native driver \
         with interrupts and the block layer (seed 003 Fig. 10: 7.7 µs more at the minimum for \
         reads, 7.5 µs for writes), the polled initiator against the polled SmartIO driver \
         (seed 004 Fig. 10: SPDK on both sides, 7.5 µs more at the 99th percentile)"
            .to_string(),
    );
    notes.push(format!(
        "a write of at most [nvmeof] in_capsule_data_bytes travels inside the command capsule \
         (SPDK's target takes 4096 bytes; Linux nvme-rdma sends such a write inline), a larger \
         one is fetched by the target with an RDMA READ; target: {}",
        match r.target_mode {
            TargetMode::Spdk => "SPDK's software target, polling",
            TargetMode::Offload =>
                "offload, the HCA writes the SQE, rings the doorbell and answers (no target software)",
        }
    ));
    notes.push(
        "no gap is set: the SmartIO and native rows are the emulated fabric, controller and \
         host costs; the NVMe-oF rows add the [nvmeof] calibration's steps (HCA latency and \
         store-and-forward serialization, initiator and target software, the kernel \
         initiator's registration and completion), an HCA's DMA read of work requests \
         announced by a doorbell only (the kernel's posts, and the target's two-request \
         post of a read's data and response; [nvmeof] hca_wqe_fetch_ns) and the [cpu] \
         block layer and interrupt around the same emulated NVMe \
         command on the target"
            .to_string(),
    );
    for row in r.rows.iter().filter(|x| !x.steps.is_empty()) {
        notes.push(format!(
            "{} {}, steps (medians):",
            short(row.path),
            row.io.name()
        ));
        for s in &row.steps {
            notes.push(format!("  {}: {} ns", s.step, ns(s.median_ns)));
        }
    }
    notes
}

fn plots(r: &Compared) -> Vec<Plot> {
    let mut plots = vec![Plot {
        file: "nvmeof-compare.svg".into(),
        title: format!(
            "QD1 {} KiB latency (p50; whiskers min to p99)",
            r.bs as f64 / 1024.0
        ),
        x_label: String::new(),
        y_label: "latency (ns)".into(),
        chart: Chart::Bars(
            r.rows
                .iter()
                .map(|x| Bar {
                    label: format!("{}: {}", x.io.name(), short(x.path)),
                    value: x.latency.p50,
                    range: Some((x.latency.min, x.latency.p99)),
                })
                .collect(),
        ),
    }];
    for row in r.rows.iter().filter(|x| !x.steps.is_empty()) {
        let who = match row.path {
            IoPath::NvmeofKernel => "kernel",
            _ => "polled",
        };
        plots.push(Plot {
            file: format!("nvmeof-steps-{who}-{}.svg", row.io.name()),
            title: format!(
                "NVMe-oF {}, {} initiator, step by step (medians)",
                row.io.name(),
                who
            ),
            x_label: "step".into(),
            y_label: "time (ns)".into(),
            chart: Chart::Bars(
                row.steps
                    .iter()
                    .map(|s| Bar {
                        label: s.step.clone(),
                        value: s.median_ns,
                        range: None,
                    })
                    .collect(),
            ),
        });
    }
    plots
}
