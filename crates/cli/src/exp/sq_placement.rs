//! `sq-placement` (Paper V Fig. 34): where a distributed-driver client puts its submission
//! queue decides how far the controller goes for every command it fetches. The CQ and the
//! data stay in the client's RAM; only the SQ moves.

use super::experiment::Experiment;
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::{ns, table};
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_drivers::nvme_dist::SqPlacement as Placement;
use smartio_workloads::{client_qd1, ClientQd1Config, ClientQd1Result};

/// `exp sq-placement`.
pub struct SqPlacement;

impl Experiment for SqPlacement {
    fn name(&self) -> &'static str {
        "sq-placement"
    }

    fn help(&self) -> &'static str {
        "QD1 4 KiB reads by a distributed-driver client with its SQ in borrower RAM, lender \
         RAM, a GPU next to the controller, or the controller's memory (Paper V Fig. 34)"
    }

    fn default_scenario(&self) -> &'static str {
        "cluster-switch"
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(2000, "QD1 reads in each of 4 rows", 1.0, 100e-6, 64, 0)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// QD1 reads per placement unless `--ops` says otherwise.
const OPS: u64 = 2000;

fn run(setup: &Setup) -> Result<Report, CliError> {
    let (runs, nvme) = placements(setup)?;
    let base = &runs[0];
    let (lender, client) = (&base.manager, &base.client);
    let results = measure(setup, &runs)?;
    let mut notes = vec![format!(
        "manager on {lender}, client on {client}; {} QD1 4 KiB random reads per row; CQ and data in {client} RAM",
        base.ops
    )];
    if !results.iter().any(|r| r.sq_in == "controller memory") {
        notes.push(format!(
            "{lender}:{nvme} has no controller memory buffer (give it params cmb = \"1M\" in a scenario file to add that row)"
        ));
    }
    let t = rows(&results, &mut notes);
    let ordered = results
        .windows(2)
        .all(|w| w[0].lat_ns.p50 > w[1].lat_ns.p50);
    notes.push(format!(
        "medians {} ordered from the farthest SQ to the nearest; a row's gap is its p50 minus the next row's; chips are those the SQE fetch crosses",
        if ordered { "are" } else { "are NOT" }
    ));
    notes.push(
        "model: the fetch path is the SQE read request and its 64-byte completion on idle \
         links (propagation, chip latency, serialization; the engine's cut-through rule); \
         the completer is the root complex and DRAM for RAM, a BAR read for GPU memory, \
         nothing for the controller's own buffer; an SQE store into the client's own RAM \
         costs its CPU a store-buffer write, anywhere else an uncached store through its \
         root complex. The rest of a read (doorbell, data, completion) is the same in every \
         row, so the gaps between rows are the model's prediction"
            .to_string(),
    );
    let plot = Plot {
        file: "sq-placement.svg".into(),
        title: "QD1 4 KiB read latency by SQ placement (bars p50, whiskers min to p99)".into(),
        x_label: "where the SQ is".into(),
        y_label: "latency (ns)".into(),
        chart: Chart::Bars(
            results
                .iter()
                .map(|r| Bar {
                    label: r.sq_in.clone(),
                    value: r.lat_ns.p50,
                    range: Some((r.lat_ns.min, r.lat_ns.p99)),
                })
                .collect(),
        ),
    };
    Ok(Report {
        title: format!("sq-placement: QD1 4 KiB reads through a client on {client}"),
        table: t,
        notes,
        plots: vec![plot],
        json: serde_json::to_value(&results)?,
    })
}

/// The placements to measure, farthest first: the client's RAM, the lender's RAM, a GPU's
/// memory on the lender if it has one, the controller's memory buffer; with the NVMe's
/// name on the lender.
fn placements(setup: &Setup) -> Result<(Vec<ClientQd1Config>, String), CliError> {
    let probe = setup.fabric()?;
    let (lender, nvme) =
        names::first_device(&probe, DeviceKind::Nvme, None).ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some("sq-placement needs one, and another host for the client"),
        })?;
    let client = names::other_hosts(&probe, &lender)
        .into_iter()
        .next()
        .ok_or_else(|| ExpError::NoPlacementClient {
            scenario: setup.scenario.clone(),
            lender: lender.clone(),
        })?;
    let gpu = names::first_device(&probe, DeviceKind::Gpu, Some(&lender))
        .map(|(h, g)| format!("{h}:{g}"));
    drop(probe);
    let base = ClientQd1Config {
        manager: lender.clone(),
        client: client.clone(),
        device: format!("{lender}:{nvme}"),
        placement: Placement::ClientRam,
        sq_device: None,
        ops: setup.ops.unwrap_or(OPS),
        bs: 4096,
        seed: setup.seed,
    };
    let mut runs = vec![
        base.clone(),
        ClientQd1Config {
            placement: Placement::LenderRam,
            ..base.clone()
        },
    ];
    if let Some(gpu) = &gpu {
        runs.push(ClientQd1Config {
            sq_device: Some(gpu.clone()),
            ..base.clone()
        });
    }
    runs.push(ClientQd1Config {
        placement: Placement::DeviceMemory,
        ..base.clone()
    });
    Ok((runs, nvme))
}

/// Each placement's QD1 reads on a fresh cluster; a placement that falls back to one
/// already measured (device memory without a controller memory buffer) is left out.
fn measure(setup: &Setup, runs: &[ClientQd1Config]) -> Result<Vec<ClientQd1Result>, CliError> {
    let mut results: Vec<ClientQd1Result> = Vec::new();
    for config in runs {
        let r = client_qd1(&*setup.cluster()?, config)?;
        // Without a controller memory buffer, "device memory" falls back to lender RAM,
        // which is already measured.
        if results.iter().all(|seen| seen.sq_in != r.sq_in) {
            results.push(r);
        }
    }
    Ok(results)
}

/// The table of the placements, each with its gap to the next and the model's; each row's
/// details go to `notes`.
fn rows(results: &[ClientQd1Result], notes: &mut Vec<String>) -> comfy_table::Table {
    let model = |r: &ClientQd1Result| r.sq_fetch_path_ns + r.sq_completer_ns + r.sq_store_ns;
    let mut t = table(&[
        "SQ in",
        "chips",
        "model ns",
        "p50 ns",
        "p99 ns",
        "gap ns",
        "model gap ns",
    ]);
    for (i, r) in results.iter().enumerate() {
        let next = results.get(i + 1);
        t.add_row(vec![
            r.sq_in.clone(),
            r.sq_fetch_chips.len().to_string(),
            ns(model(r)),
            ns(r.lat_ns.p50),
            ns(r.lat_ns.p99),
            next.map_or_else(String::new, |n| ns(r.lat_ns.p50 - n.lat_ns.p50)),
            next.map_or_else(String::new, |n| ns(model(r) - model(n))),
        ]);
        // The details of each row, below the table.
        notes.push(format!(
            "{}: the SQE fetch crosses {}; model = fetch path {} + completer {} + SQE store {} ns",
            r.sq_in,
            if r.sq_fetch_chips.is_empty() {
                "no chip (it stays inside the controller)".to_string()
            } else {
                r.sq_fetch_chips.join(", ")
            },
            ns(r.sq_fetch_path_ns),
            ns(r.sq_completer_ns),
            ns(r.sq_store_ns),
        ));
    }
    t
}
