//! `nvmeof-compare` (Paper V §7.4, Fig. 36): the SmartIO driver on the NVMe's own host, the
//! same driver on another host over the NTB, and NVMe-oF over RDMA, each QD1 4 KiB reads.
//!
//! The hosts come from the scenario: the target is the host of the first NVMe, the
//! initiator the first other host (on `back-to-back`, lender and borrower).

use super::{names, ns, table, Bar, Chart, Plot, Report, Setup};
use smartio_cluster::DeviceKind;
use smartio_workloads::{nvmeof_compare, NvmeofConfig};

pub fn run(setup: &Setup) -> Result<Report, String> {
    let probe = setup.fabric()?;
    let (target, nvme) = names::first_device(&probe, DeviceKind::Nvme, None).ok_or_else(|| {
        format!(
            "{} has no NVMe controller; nvmeof-compare needs one, and another host to read it from",
            setup.scenario
        )
    })?;
    let initiator = names::other_hosts(&probe, &target)
        .into_iter()
        .next()
        .ok_or_else(|| {
            format!(
                "{} has no host besides {target}, which has the NVMe; nvmeof-compare needs another host for the remote reader",
                setup.scenario
            )
        })?;
    drop(probe);
    let config = NvmeofConfig {
        device: format!("{target}:{nvme}"),
        target,
        initiator,
        ops: setup.ops.unwrap_or(NvmeofConfig::default().ops),
        seed: setup.seed,
        ..NvmeofConfig::default()
    };
    let r = nvmeof_compare(&setup.cluster()?, &config).map_err(|e| e.to_string())?;
    let rows = [
        (format!("local SmartIO driver ({})", config.target), r.local),
        (
            format!(
                "remote SmartIO driver ({}, SQ in {})",
                config.initiator, r.remote_sq_in
            ),
            r.remote,
        ),
        (
            format!(
                "NVMe-oF over RDMA ({} → {})",
                config.initiator, config.target
            ),
            r.nvmeof,
        ),
    ];
    let mut t = table(&["", "p50 (ns)", "p99 (ns)", "p50 − local (ns)"]);
    for (what, l) in &rows {
        t.add_row(vec![
            what.clone(),
            ns(l.p50),
            ns(l.p99),
            ns(l.p50 - r.local.p50),
        ]);
    }
    let mut notes = vec![
        format!(
            "{} QD1 {}-byte random reads of {} per row, every byte checked",
            r.ops, r.bs, config.device
        ),
        format!(
            "remote − local = {} ns (the NTB path's extra links and chips); NVMe-oF − local = {} ns",
            ns(r.remote.p50 - r.local.p50),
            ns(r.nvmeof.p50 - r.local.p50)
        ),
        "neither gap is set: the SmartIO rows are the emulated fabric and controller; the \
         NVMe-oF row adds the [nvmeof] calibration's steps (hca_latency_ns, link_gbps, \
         initiator_post_ns, target_poll_ns, target_submit_ns, target_complete_ns, \
         initiator_complete_ns) around the same emulated NVMe read on the target"
            .to_string(),
        "NVMe-oF steps (medians):".to_string(),
    ];
    for s in &r.nvmeof_steps {
        notes.push(format!("  {}: {} ns", s.step, ns(s.median_ns)));
    }
    let plots = vec![
        Plot {
            file: "nvmeof-compare.svg".into(),
            title: "QD1 4 KiB read latency (p50; whiskers min to p99)".into(),
            x_label: "".into(),
            y_label: "latency (ns)".into(),
            chart: Chart::Bars(
                ["local SmartIO", "remote SmartIO", "NVMe-oF / RDMA"]
                    .iter()
                    .zip(&rows)
                    .map(|(label, (_, l))| Bar {
                        label: label.to_string(),
                        value: l.p50,
                        range: Some((l.min, l.p99)),
                    })
                    .collect(),
            ),
        },
        Plot {
            file: "nvmeof-steps.svg".into(),
            title: "NVMe-oF over RDMA, step by step (medians)".into(),
            x_label: "step".into(),
            y_label: "time (ns)".into(),
            chart: Chart::Bars(
                r.nvmeof_steps
                    .iter()
                    .map(|s| Bar {
                        label: s.step.clone(),
                        value: s.median_ns,
                        range: None,
                    })
                    .collect(),
            ),
        },
    ];
    Ok(Report {
        title: "nvmeof-compare: local vs remote SmartIO vs NVMe-oF".into(),
        table: t,
        notes,
        plots,
        json: serde_json::to_value(&r).map_err(|e| e.to_string())?,
    })
}
