//! `migrate` (Paper V §5.5): cold migration of a VM with an NVMe passed through by MDEV —
//! started on one host, data written, shut down; started on another host with the same
//! assignment, data read back. The table is the time each step takes.
//!
//! The VM's two homes are the first two hosts of the scenario that declare a VM of the same
//! name; the device is the first NVMe.

use super::experiment::{Experiment, Takes};
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::table;
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_workloads::{migrate, MigrateConfig};

/// `exp migrate`.
pub struct Migrate;

impl Experiment for Migrate {
    fn name(&self) -> &'static str {
        "migrate"
    }

    fn help(&self) -> &'static str {
        "Cold migration of a VM with an NVMe passed through by MDEV, with verified data and \
         the time of each step (Paper V §5.5)"
    }

    fn default_scenario(&self) -> &'static str {
        "vm-cluster"
    }

    fn takes(&self) -> Takes {
        Takes {
            no_ops: Some(
                "migrate writes 1 MiB before the migration and reads it back after; it has no \
                 I/O count to set",
            ),
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(
            0,
            "I/Os (none: 1 MiB written and read back)",
            1.0,
            0.0,
            64,
            0,
        )
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let probe = setup.fabric()?;
    let nvme = probe
        .endpoints()
        .iter()
        .find(|e| DeviceKind::of(e) == Some(DeviceKind::Nvme))
        .map(|e| format!("{}:{}", probe.host(e.host).name, e.name))
        .ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some("migrate needs one"),
        })?;
    let homes: Vec<String> = probe
        .hosts()
        .iter()
        .filter_map(|h| h.vms.first().map(|v| format!("{}/{}", h.name, v.name)))
        .collect();
    let [from, to, ..] = homes.as_slice() else {
        return Err(ExpError::TooFewVmHosts {
            scenario: setup.scenario.clone(),
            homes: homes.len(),
        }
        .into());
    };
    let config = MigrateConfig {
        from: from.clone(),
        to: to.clone(),
        device: nvme,
        seed: setup.seed,
        ..MigrateConfig::default()
    };
    drop(probe);
    let r = migrate(&*setup.cluster()?, &config)?;
    let mut t = table(&["step", "time (µs)"]);
    for s in &r.steps {
        t.add_row(vec![s.step.clone(), format!("{:.1}", s.ns / 1000.0)]);
    }
    let notes = vec![
        format!(
            "{} was borrowed by {} while each VM ran",
            r.device,
            r.holders.join(", then by ")
        ),
        format!(
            "{} bytes written in {} read back equal in {}",
            r.verified_bytes, r.from, r.to
        ),
        format!(
            "after {} shut down every look-up-table entry, requester id and IOMMU page it took was free again: {}",
            r.from,
            if r.released_on_first_host { "yes" } else { "no" }
        ),
        "a start is the machine reset (SmartIO borrows the device: windows on both NTBs, a control-message round trip), the guest's PCI scan through trapped configuration cycles (each a round trip to the lender), and the NVMe driver's probe, whose Bus Master write makes SmartIO probe and pin the VM's memory and map its two DMA windows; the times are the model's".to_string(),
    ];
    let plots = vec![Plot {
        file: "migrate.svg".into(),
        title: "cold migration, step by step".into(),
        x_label: "step".into(),
        y_label: "time (µs)".into(),
        chart: Chart::Bars(
            r.steps
                .iter()
                .map(|s| Bar {
                    label: s.step.split(" (").next().unwrap_or(&s.step).to_string(),
                    value: s.ns / 1000.0,
                    range: None,
                })
                .collect(),
        ),
    }];
    Ok(Report {
        title: format!("migrate: {} from {} to {}", r.device, r.from, r.to),
        table: t,
        notes,
        plots,
        json: serde_json::to_value(&r)?,
    })
}
