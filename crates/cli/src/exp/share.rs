//! `share-30` (Paper V §7.4, §8.6): thirty hosts share one NVMe, each client with its own
//! queue pair, reading concurrently with every byte checked; the 32nd queue pair is refused.
//!
//! The hosts come from the scenario: the manager runs where the first NVMe is, the clients
//! on the next 30 hosts in scenario order (all of them if there are fewer), and the client
//! that takes the remaining queue pairs on the host after them (or the first client's host).
//! On `cascade-60` that is node00, node01..node30 and node31.

use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::{ns, table};
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_workloads::{share_clients, ShareConfig, ShareResult};

/// `exp share-30`.
pub struct Share30;

impl Experiment for Share30 {
    fn name(&self) -> &'static str {
        "share-30"
    }

    fn help(&self) -> &'static str {
        "Thirty clients on thirty hosts, a queue pair each, reading one NVMe concurrently with \
         verification; the 32nd queue pair is refused"
    }

    fn default_scenario(&self) -> &'static str {
        "cascade-60"
    }

    fn takes(&self) -> Takes {
        Takes {
            checking: Some("checks every byte it reads anyway"),
            ..Takes::COMMON
        }
    }

    /// Measured: 1000 reads 0.8 s, 10 000 5.8 s.
    fn cost(&self) -> ExpModel {
        ExpModel::new(1000, "reads on each of 30 clients", 1.0, 0.8e-3, 128, 0)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// Clients the experiment wants: one per host.
const CLIENTS: usize = 30;

fn run(setup: &Setup) -> Result<Report, CliError> {
    let (config, others) = config(setup)?;
    let r = share_clients(&*setup.cluster()?, &config)?;
    let refused = check(&r, &config)?;
    let t = clients_table(&r);
    let total_iops: f64 = r.clients.iter().map(|c| c.iops).sum();
    let mut notes = vec![
        format!(
            "{} ({}), manager on {}: {} I/O queue pairs granted; {} clients on {} hosts, one pair each",
            r.device,
            r.model,
            r.manager,
            r.granted,
            r.clients.len(),
            r.clients.len()
        ),
        format!(
            "{} bytes written, {} bytes read back and verified; total {:.0} IOPS",
            r.written_bytes, r.verified_bytes, total_iops
        ),
        format!(
            "fairness (Jain's index over per-client IOPS) {:.6}; per-client p50 {} .. {} ns",
            r.fairness,
            ns(r.p50_min_ns),
            ns(r.p50_max_ns)
        ),
        format!(
            "queue limit: {} took qids {:?}; with {} pairs in use the next request was refused: {refused}",
            config.extra_client.as_deref().unwrap_or("-"), r.extra_qids, r.held_at_refusal
        ),
        format!(
            "after everyone left the manager's owner table is empty; the device is held by {:?} (the manager)",
            r.holders_after_leave
        ),
    ];
    if r.clients.len() < CLIENTS {
        notes.push(format!(
            "{} has {} hosts besides {}: {} clients instead of {CLIENTS}",
            setup.scenario,
            others.len(),
            r.manager,
            r.clients.len()
        ));
    }
    let plots = plots(&r);
    Ok(Report {
        title: format!("share-30: {} clients, one NVMe", r.clients.len()),
        table: t,
        notes,
        plots,
        json: serde_json::to_value(&r)?,
    })
}

/// The sharing to run: the manager where the first NVMe is, a client on each of the next
/// [`CLIENTS`] hosts, and the one taking the remaining queue pairs after them (or on the
/// first client's host); with the hosts other than the manager's.
fn config(setup: &Setup) -> Result<(ShareConfig, Vec<String>), CliError> {
    let probe = setup.fabric()?;
    let (lender, nvme) =
        names::first_device(&probe, DeviceKind::Nvme, None).ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some("share-30 needs one, and other hosts for its clients"),
        })?;
    let others = names::other_hosts(&probe, &lender);
    drop(probe);
    let clients: Vec<String> = others.iter().take(CLIENTS).cloned().collect();
    let Some(first) = clients.first() else {
        return Err(ExpError::NoClientHost {
            scenario: setup.scenario.clone(),
            lender,
        }
        .into());
    };
    let extra_client = Some(others.get(CLIENTS).unwrap_or(first).clone());
    let config = ShareConfig {
        manager: lender.clone(),
        device: format!("{lender}:{nvme}"),
        clients,
        extra_client,
        ops: setup.ops.unwrap_or(ShareConfig::default().ops),
        seed: setup.seed,
        ..ShareConfig::default()
    };
    Ok((config, others))
}

/// Checks the run: every client read back all it wrote, the queue pair over the limit was
/// refused (the refusal), and no queue pair is owned after everyone left.
fn check<'r>(r: &'r ShareResult, config: &ShareConfig) -> Result<&'r str, ExpError> {
    let expected = config.ops * config.bs;
    if let Some(c) = r.clients.iter().find(|c| c.verified_bytes != expected) {
        return Err(ExpError::Unverified {
            host: c.host.clone(),
            verified: c.verified_bytes,
            expected,
        });
    }
    let Some(refused) = &r.refused else {
        return Err(ExpError::NotRefused);
    };
    if !r.owners_after_leave.is_empty() {
        return Err(ExpError::StillOwned {
            owners: r.owners_after_leave.clone(),
        });
    }
    Ok(refused)
}

/// Each client's queue pair, reads, verified bytes, latency and IOPS.
fn clients_table(r: &ShareResult) -> comfy_table::Table {
    let mut t = table(&[
        "client",
        "qid",
        "reads",
        "verified bytes",
        "p50 (ns)",
        "p99 (ns)",
        "IOPS",
    ]);
    for c in &r.clients {
        t.add_row(vec![
            c.host.clone(),
            c.qid.to_string(),
            c.ops.to_string(),
            c.verified_bytes.to_string(),
            ns(c.lat_ns.p50),
            ns(c.lat_ns.p99),
            format!("{:.0}", c.iops),
        ]);
    }
    t
}

/// Each client's p50 latency and IOPS, as bars.
fn plots(r: &ShareResult) -> Vec<Plot> {
    let bars = |value: &dyn Fn(&smartio_workloads::ShareClient) -> f64| {
        r.clients
            .iter()
            .map(|c| Bar {
                label: c.host.clone(),
                value: value(c),
                range: None,
            })
            .collect()
    };
    vec![
        Plot {
            file: "share-30-latency.svg".into(),
            title: format!(
                "{} clients sharing {}: QD1 4 KiB read p50 per client",
                r.clients.len(),
                r.device
            ),
            x_label: "client".into(),
            y_label: "p50 latency (ns)".into(),
            chart: Chart::Bars(bars(&|c| c.lat_ns.p50)),
        },
        Plot {
            file: "share-30-iops.svg".into(),
            title: format!("IOPS per client (Jain's fairness {:.4})", r.fairness),
            x_label: "client".into(),
            y_label: "IOPS".into(),
            chart: Chart::Bars(bars(&|c| c.iops)),
        },
    ]
}
