//! `multicast` (Paper V §6.5, §8.6): one Identify whose data buffer is a multicast group
//! lands in the memory of every other host; compared with one Identify per host.

use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::table;
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_workloads::{multicast_identify, MulticastIdentifyConfig};
use std::collections::BTreeMap;

/// `exp multicast`.
pub struct Multicast;

impl Experiment for Multicast {
    fn name(&self) -> &'static str {
        "multicast"
    }

    fn help(&self) -> &'static str {
        "One Identify whose data buffer is a multicast group lands in every other host"
    }

    fn default_scenario(&self) -> &'static str {
        "cascade-60"
    }

    fn takes(&self) -> Takes {
        Takes {
            no_ops: Some(
                "multicast does one Identify through a multicast group and one per host; it has \
                 no I/O count to set",
            ),
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(0, "I/Os (none: one Identify per host)", 1.0, 0.0, 64, 0)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let cluster = setup.cluster()?;
    let (lender, nvme) = names::first_device(&cluster.machine.fabric(), DeviceKind::Nvme, None)
        .ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: None,
        })?;
    let r = multicast_identify(
        &cluster,
        &MulticastIdentifyConfig {
            device: format!("{lender}:{nvme}"),
            manager: lender.clone(),
            unicast: true,
        },
    )?;
    let mut per_switch: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for x in &r.receivers {
        let e = per_switch.entry(x.switch.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(x.verified);
    }
    let mut t = table(&["member hosts behind", "hosts", "4 KiB page verified"]);
    for (switch, (hosts, ok)) in &per_switch {
        t.add_row(vec![switch.to_string(), hosts.to_string(), ok.to_string()]);
    }
    t.add_row(vec![
        "all".to_string(),
        r.receivers.len().to_string(),
        r.verified.to_string(),
    ]);
    let us = |ns: f64| format!("{:.1} us", ns / 1000.0);
    let notes = vec![
        format!(
            "{}: one Identify (controller data, {} bytes) relayed by the manager on {lender}, data buffer = a multicast group mapped for the controller through {lender}'s NTB",
            r.device, r.bytes
        ),
        format!(
            "multicast: {} command, {} from request to answer; {} of {} hosts hold the exact page",
            r.multicast_commands,
            us(r.multicast_ns),
            r.verified,
            r.receivers.len()
        ),
        format!(
            "one host at a time: {} commands, {}; {} of {} exact",
            r.unicast_commands,
            us(r.unicast_ns),
            r.unicast_verified,
            r.receivers.len()
        ),
        "the switches replicate the controller's write out of every port with a member; the \
         sender's own adapter gets no copy, so the lender is not among the members"
            .to_string(),
    ];
    let plot = Plot {
        file: "multicast.svg".into(),
        title: format!(
            "Delivering one Identify page to {} hosts",
            r.receivers.len()
        ),
        x_label: "delivery".into(),
        y_label: "time (us)".into(),
        chart: Chart::Bars(vec![
            Bar {
                label: "1 command, multicast buffer".into(),
                value: r.multicast_ns / 1000.0,
                range: None,
            },
            Bar {
                label: format!("{} commands, one per host", r.unicast_commands),
                value: r.unicast_ns / 1000.0,
                range: None,
            },
        ]),
    };
    Ok(Report {
        title: format!("multicast: one Identify into {} hosts", r.receivers.len()),
        table: t,
        notes,
        plots: vec![plot],
        json: serde_json::to_value(&r)?,
    })
}
