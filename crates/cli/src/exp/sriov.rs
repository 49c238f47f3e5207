//! `sriov` (Paper V §7.1.6, Fig. 28): iperf throughput from a 100 GbE NIC's physical function
//! and one of its SR-IOV virtual functions, each used by the NIC's own host (the local
//! baseline) and lent to another host by Device Lending, to a receiver joined to the NIC by
//! Ethernet only. The paper's settings: four parallel streams, jumbo frames, a report every
//! half second.
//!
//! ```text
//!   PF local   lender   ── nic0 (its own)          ══ Ethernet ══ receiver
//!   PF lent    borrower ── lender:nic0 (Device Lending through the NTBs) ══ ... ══ receiver
//!   VF local   lender   ── nic0.vf1                ══ ...
//!   VF lent    borrower ── lender:nic0.vf1         ══ ...
//! ```
//!
//! The NIC's host is the first host with a NIC and another host to lend it to; the receiver
//! is the first host with a NIC on the same network that is neither; `--ops` is the virtual
//! run time in milliseconds (default 4).

use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::table;
use crate::error::CliError;
use serde::Serialize;
use smartio_cluster::DeviceKind;
use smartio_net::{iperf, IperfConfig, IperfEnd, IperfResult, IperfTiming, DEFAULT_WRITE_BYTES};
use smartio_platform::SimDuration;

/// `exp sriov`.
pub struct Sriov;

impl Experiment for Sriov {
    fn name(&self) -> &'static str {
        "sriov"
    }

    fn help(&self) -> &'static str {
        "iperf throughput from a 100 GbE NIC's function used by its own host and lent to \
         another (Paper V Fig. 28); `--ops` is milliseconds of virtual time (default 4)"
    }

    fn default_scenario(&self) -> &'static str {
        "sriov"
    }

    fn takes(&self) -> Takes {
        Takes {
            checking: Some("checks every byte the server reads anyway"),
            ..Takes::COMMON
        }
    }

    /// Measured: 4 ms 1.9 s, 40 ms 15 s.
    fn cost(&self) -> ExpModel {
        ExpModel::new(
            4,
            "ms of iperf with 4 streams in each of 4 rows",
            1.0,
            0.45,
            256,
            0,
        )
        .within(1..=MAX_MILLISECONDS)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// Streams per client (the paper's iperf2 runs used four).
const STREAMS: u32 = 4;
/// Milliseconds of writing per run unless `--ops` says otherwise.
const MILLISECONDS: u64 = 4;
/// The longest run `--ops` may ask for, in milliseconds.
pub const MAX_MILLISECONDS: u64 = 60_000;

/// One configuration's result.
#[derive(Debug, Clone, Serialize)]
struct Row {
    function: String,
    how: String,
    host: String,
    device: String,
    /// The server's rate over the run (first connect to last byte), Gbit/s of payload.
    gbit_per_s: f64,
    /// The server's rate in the reports between the first and the last (steady state).
    steady_gbit_per_s: f64,
    result: IperfResult,
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let Cast {
        lender,
        receiver,
        borrower,
        vf,
    } = cast(setup)?;
    let ms = milliseconds(setup, "sriov")?;
    let timing = IperfTiming {
        duration: SimDuration::from_us(ms * 1000),
        interval: SimDuration::from_us(500),
        write_bytes: DEFAULT_WRITE_BYTES,
    };
    let (lender_host, nic) = lender;
    let mut configs = vec![
        ("PF", "local", lender_host.clone(), nic.clone()),
        (
            "PF",
            "lent",
            borrower.clone(),
            format!("{lender_host}:{nic}"),
        ),
    ];
    if let Some(vf) = &vf {
        configs.push(("VF", "local", lender_host.clone(), vf.clone()));
        configs.push((
            "VF",
            "lent",
            borrower.clone(),
            format!("{lender_host}:{vf}"),
        ));
    }
    let mut rows = Vec::new();
    for (function, how, host, device) in configs {
        rows.push(one_row(
            setup, &receiver, function, how, host, device, timing,
        )?);
    }
    let t = rows_table(&rows);
    let notes = notes(&rows, ms, &receiver.0, &nic, vf.as_deref());
    let plots = vec![Plot {
        file: "sriov.svg".into(),
        title: "iperf throughput, local and lent (Paper V Fig. 28)".into(),
        x_label: "function, used".into(),
        y_label: "GB/s (steady)".into(),
        chart: Chart::Bars(
            rows.iter()
                .map(|r| Bar {
                    label: format!("{} {}", r.function, r.how),
                    value: r.steady_gbit_per_s / 8.0,
                    range: None,
                })
                .collect(),
        ),
    }];
    Ok(Report {
        title: format!("sriov: iperf, {STREAMS} streams, a NIC function used locally and lent"),
        table: t,
        notes,
        plots,
        json: serde_json::to_value(&rows)?,
    })
}

/// Who plays which part: the NIC's host and the NIC, the receiver (its host and NIC), the
/// borrower, and the NIC's first VF if it has SR-IOV.
struct Cast {
    lender: (String, String),
    receiver: (String, String),
    borrower: String,
    vf: Option<String>,
}

/// Picks the cast from the scenario: the first host with a NIC and two other hosts lends,
/// the first other host with a NIC receives, a host that is neither borrows.
fn cast(setup: &Setup) -> Result<Cast, CliError> {
    let f = setup.fabric()?;
    let nic_hosts: Vec<(String, String)> = f
        .hosts()
        .iter()
        .filter_map(|h| names::first_device(&f, DeviceKind::Nic, Some(&h.name)))
        .collect();
    let lender = nic_hosts
        .iter()
        .find(|(h, _)| names::other_hosts(&f, h).len() >= 2)
        .cloned()
        .ok_or_else(|| ExpError::NoNicLender {
            scenario: setup.scenario.clone(),
        })?;
    let receiver = nic_hosts
        .iter()
        .find(|(h, _)| *h != lender.0)
        .cloned()
        .ok_or_else(|| ExpError::NoReceiver {
            scenario: setup.scenario.clone(),
        })?;
    let borrower = names::other_hosts(&f, &lender.0)
        .into_iter()
        .find(|h| *h != receiver.0)
        .ok_or_else(|| ExpError::NoNicBorrower {
            scenario: setup.scenario.clone(),
        })?;
    // The first VF, if the NIC has SR-IOV (the scenario's `vfs`; enabled at boot).
    let first_vf = smartio_fabric::vf_name(&lender.1, 1);
    let vf = f
        .endpoints()
        .iter()
        .any(|e| e.name == first_vf)
        .then_some(first_vf);
    drop(f);
    Ok(Cast {
        lender,
        receiver,
        borrower,
        vf,
    })
}

/// The milliseconds of writing per run (`--ops`) of the experiment `exp`, checked.
pub(super) fn milliseconds(setup: &Setup, exp: &'static str) -> Result<u64, ExpError> {
    let ms = setup.ops.unwrap_or(MILLISECONDS);
    if ms > MAX_MILLISECONDS {
        return Err(ExpError::Milliseconds {
            ops: ms,
            exp,
            max: MAX_MILLISECONDS,
        });
    }
    Ok(ms)
}

/// One configuration's run on a fresh cluster: `STREAMS` streams from `device` on `host`
/// to the receiver.
fn one_row(
    setup: &Setup,
    receiver: &(String, String),
    function: &str,
    how: &str,
    host: String,
    device: String,
    timing: IperfTiming,
) -> Result<Row, CliError> {
    let config = IperfConfig {
        server: IperfEnd {
            host: receiver.0.clone(),
            device: receiver.1.clone(),
        },
        clients: vec![(
            IperfEnd {
                host: host.clone(),
                device: device.clone(),
            },
            STREAMS,
        )],
        timing,
    };
    let result = iperf(&*setup.cluster()?, &config)?;
    Ok(Row {
        function: function.into(),
        how: how.into(),
        host,
        device,
        gbit_per_s: result.report.server_gbit_per_s,
        steady_gbit_per_s: steady(&result),
        result,
    })
}

/// Each configuration's rates over the run and steady, and the bytes checked.
fn rows_table(rows: &[Row]) -> comfy_table::Table {
    let mut t = table(&[
        "function",
        "used",
        "client",
        "Gbit/s (run)",
        "Gbit/s (steady)",
        "GB/s (steady)",
        "bytes checked",
    ]);
    for r in rows {
        t.add_row(vec![
            r.function.clone(),
            r.how.clone(),
            format!("{}: {}", r.host, r.device),
            format!("{:.2}", r.gbit_per_s),
            format!("{:.2}", r.steady_gbit_per_s),
            format!("{:.3}", r.steady_gbit_per_s / 8.0),
            r.result.report.verified_bytes.to_string(),
        ]);
    }
    t
}

/// The run's settings, lent against local, the link's bound and what the VF is.
fn notes(rows: &[Row], ms: u64, receiver: &str, nic: &str, vf: Option<&str>) -> Vec<String> {
    let mss = rows.first().map_or(0, |r| r.result.mss);
    let bound = 100.0 * mss as f64 / (mss as f64 + 40.0 + 14.0 + 24.0);
    let pf_local = &rows[0];
    let lent = rows.last().unwrap_or(pf_local);
    let mut notes = vec![
        format!(
            "{STREAMS} streams to {} for {ms} ms of virtual time, reports every 0.5 ms; steady = \
             the reports between the first and the last (past slow start, before the drain)",
            receiver
        ),
        format!(
            "{} {} − PF local: {:+.2} Gbit/s ({:+.2} %) over the steady reports",
            lent.function,
            lent.how,
            lent.steady_gbit_per_s - pf_local.steady_gbit_per_s,
            (lent.steady_gbit_per_s - pf_local.steady_gbit_per_s) / pf_local.steady_gbit_per_s
                * 100.0
        ),
        format!(
            "the bound is the link: 100 Gbit/s × {mss} payload bytes per {} bytes of line time \
             (40 bytes of transport headers, the 14-byte Ethernet header, 24 bytes of preamble, \
             FCS and gap) = {bound:.2} Gbit/s; one stream alone is bounded by its host's CPU \
             ([net_stack] costs), which is why iperf runs several",
            mss + 40 + 14 + 24
        ),
    ];
    notes.push(match vf {
        Some(vf) => format!(
            "{vf} is a virtual function of {nic}: its own requester id, BAR and queues, lent \
             like any device; the same NIC driver binds to the PF and to the VF"
        ),
        None => format!("{nic} has no SR-IOV (give it params.vfs for VF rows)"),
    });
    notes
}

/// The server's rate over the reports between the first and the last.
pub(super) fn steady(r: &IperfResult) -> f64 {
    let n = r.report.streams.first().map_or(0, |s| s.intervals.len());
    if n < 3 {
        return r.report.server_gbit_per_s;
    }
    let per_report: Vec<f64> = (1..n - 1)
        .map(|i| {
            r.report
                .streams
                .iter()
                .map(|s| s.intervals[i].received_gbit_per_s)
                .sum()
        })
        .collect();
    per_report.iter().sum::<f64>() / per_report.len() as f64
}
