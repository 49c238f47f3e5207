//! `sriov-share` (Paper V §7.1.6, Fig. 29): one SR-IOV NIC shared by several hosts at once,
//! a virtual function each, all sending to a receiver joined to the NIC by Ethernet only;
//! each client's rate and the receiver's over time. Then the lender and a borrower reach each
//! other through the NIC's internal switch, without a frame on the wire.
//!
//! ```text
//!   lender + borrower   lender ── nic0.vf1, borrower-a ── lender:nic0.vf2  → receiver
//!   two borrowers       borrower-a ── lender:nic0.vf1, borrower-b ── lender:nic0.vf2 → receiver
//!   internal switch     borrower-a ── lender:nic0.vf2  → lender ── nic0.vf1 (no wire)
//! ```
//!
//! Hosts come from the scenario (default `sriov-share`): the lender is the first host with a
//! NIC that has two VFs, the receiver the first other host with a NIC, the borrowers the
//! others. `--ops` is milliseconds of virtual time (default 4).

use super::experiment::{Experiment, Takes};
use super::plot::{Chart, Plot, Series};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::table;
use crate::error::CliError;
use serde::Serialize;
use smartio_cluster::DeviceKind;
use smartio_net::{iperf, IperfConfig, IperfEnd, IperfResult, IperfTiming, DEFAULT_WRITE_BYTES};
use smartio_platform::SimDuration;

/// `exp sriov-share`.
pub struct SriovShare;

impl Experiment for SriovShare {
    fn name(&self) -> &'static str {
        "sriov-share"
    }

    fn help(&self) -> &'static str {
        "One SR-IOV NIC shared by several hosts at once, a VF each (Paper V Fig. 29), and \
         lender ↔ borrower through its internal switch; `--ops` is milliseconds (default 4)"
    }

    fn default_scenario(&self) -> &'static str {
        "sriov-share"
    }

    fn takes(&self) -> Takes {
        Takes {
            checking: Some("checks every byte the server reads anyway"),
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(4, "ms of iperf in each of 3 rows", 1.0, 0.3, 256, 0)
            .within(1..=super::sriov::MAX_MILLISECONDS)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// Streams per client (the paper: two threads per client).
const STREAMS: u32 = 2;

/// One run.
#[derive(Debug, Clone, Serialize)]
struct Run {
    name: String,
    /// Frames the lender's NIC put on the wire and took off it, and carried between its
    /// functions, during the run.
    wire_tx: u64,
    wire_rx: u64,
    internal_switch: u64,
    result: IperfResult,
}

fn end(host: &str, device: &str) -> IperfEnd {
    IperfEnd {
        host: host.into(),
        device: device.into(),
    }
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let Cast {
        lender,
        receiver,
        a,
        b,
    } = cast(setup)?;
    let (a, b) = (&a, &b);
    let ms = super::sriov::milliseconds(setup, "sriov-share")?;
    let timing = IperfTiming {
        duration: SimDuration::from_us(ms * 1000),
        interval: SimDuration::from_us(500),
        write_bytes: DEFAULT_WRITE_BYTES,
    };
    let (lh, nic) = (&lender.0, &lender.1);
    let vf = |n: u16| smartio_fabric::vf_name(nic, n);
    let lent = |n: u16| format!("{lh}:{}", vf(n));
    let receiver_end = end(&receiver.0, &receiver.1);
    let runs = [
        (
            "lender and borrower",
            receiver_end.clone(),
            vec![(end(lh, &vf(1)), STREAMS), (end(a, &lent(2)), STREAMS)],
        ),
        (
            "two borrowers",
            receiver_end,
            vec![(end(a, &lent(1)), STREAMS), (end(b, &lent(2)), STREAMS)],
        ),
        (
            "borrower to lender, internal switch",
            end(lh, &vf(1)),
            vec![(end(a, &lent(2)), STREAMS)],
        ),
    ];
    let mut out = Vec::new();
    for (name, server, clients) in runs {
        out.push(one_run(setup, lh, name, server, clients, timing)?);
    }
    let t = runs_table(&out);
    let notes = vec![
        format!(
            "{STREAMS} streams per client for {ms} ms of virtual time, reports every 0.5 ms; the \
             clients' rates are over the run (first connect to last byte read), every byte \
             checked at the server"
        ),
        "the clients share the 100 GbE port: the receiver's rate is their sum, and they \
         converge on equal shares as the NIC's transmit queues take turns"
            .to_string(),
        format!(
            "through the internal switch the lender's NIC carried {} frames between its two VFs \
             and put {} on the wire; no line rate bounds it, so the {STREAMS} streams' CPU costs \
             do ([net_stack]; one stream alone reaches about a third of 100 Gbit/s)",
            out[2].internal_switch, out[2].wire_tx
        ),
    ];
    let plots = plots(&out);
    Ok(Report {
        title: "sriov-share: one SR-IOV NIC, a virtual function per host".into(),
        table: t,
        notes,
        plots,
        json: serde_json::to_value(&out)?,
    })
}

/// Who plays which part: the lender (its host and NIC with two VFs), the receiver (its
/// host and NIC) and the two borrowers.
struct Cast {
    lender: (String, String),
    receiver: (String, String),
    a: String,
    b: String,
}

/// Picks the cast from the scenario: the first host with a NIC that has two VFs lends,
/// the first other host with a NIC receives, the others borrow.
fn cast(setup: &Setup) -> Result<Cast, CliError> {
    let f = setup.fabric()?;
    let nic_of = |h: &str| super::names::first_device(&f, DeviceKind::Nic, Some(h));
    let lender = f
        .hosts()
        .iter()
        .find_map(|h| {
            let (_, nic) = nic_of(&h.name)?;
            let has = |n: u16| {
                let want = smartio_fabric::vf_name(&nic, n);
                f.endpoints().iter().any(|e| e.name == want)
            };
            (has(1) && has(2)).then(|| (h.name.clone(), nic))
        })
        .ok_or_else(|| ExpError::NoTwoVfs {
            scenario: setup.scenario.clone(),
        })?;
    let receiver = f
        .hosts()
        .iter()
        .filter(|h| h.name != lender.0)
        .find_map(|h| nic_of(&h.name))
        .ok_or_else(|| ExpError::NoReceiver {
            scenario: setup.scenario.clone(),
        })?;
    let borrowers: Vec<String> = super::names::other_hosts(&f, &lender.0)
        .into_iter()
        .filter(|h| *h != receiver.0)
        .collect();
    drop(f);
    let mut borrowers = borrowers.into_iter();
    let (Some(a), Some(b)) = (borrowers.next(), borrowers.next()) else {
        return Err(ExpError::TooFewVfBorrowers {
            scenario: setup.scenario.clone(),
        }
        .into());
    };
    Ok(Cast {
        lender,
        receiver,
        a,
        b,
    })
}

/// One run on a fresh cluster: the clients' streams to the server, and what the lender's
/// (`lh`) NIC carried.
fn one_run(
    setup: &Setup,
    lh: &str,
    name: &str,
    server: IperfEnd,
    clients: Vec<(IperfEnd, u32)>,
    timing: IperfTiming,
) -> Result<Run, CliError> {
    let cluster = setup.cluster()?;
    let config = IperfConfig {
        server,
        clients,
        timing,
    };
    let result = iperf(&cluster, &config)?;
    let counters = {
        let fab = cluster.machine.fabric();
        cluster
            .nics()
            .find(|(ep, _)| fab.host(fab.endpoint(*ep).host).name == *lh)
            .map(|(_, n)| n.port().counters())
    }
    .ok_or_else(|| ExpError::NoNicModel {
        host: lh.to_string(),
    })?;
    Ok(Run {
        name: name.into(),
        wire_tx: counters.wire_tx,
        wire_rx: counters.wire_rx,
        internal_switch: counters.eswitch,
        result,
    })
}

/// Each run's clients with their rates, the server's steady rate and the lender's NIC's
/// frame counts.
fn runs_table(out: &[Run]) -> comfy_table::Table {
    let mut t = table(&[
        "run",
        "client",
        "Gbit/s",
        "server Gbit/s (steady)",
        "lender's NIC: wire out / in / internal switch (frames)",
    ]);
    for r in out {
        for (i, (client, g)) in r.result.report.client_gbit_per_s().iter().enumerate() {
            let first = i == 0;
            t.add_row(vec![
                if first { r.name.clone() } else { String::new() },
                format!(
                    "{client}: {}",
                    r.result
                        .clients
                        .iter()
                        .find(|c| c.starts_with(&format!("{client}:")))
                        .map_or("", |c| c.split_once(": ").map_or("", |x| x.1))
                ),
                format!("{g:.2}"),
                if first {
                    format!("{:.2}", super::sriov::steady(&r.result))
                } else {
                    String::new()
                },
                if first {
                    format!("{} / {} / {}", r.wire_tx, r.wire_rx, r.internal_switch)
                } else {
                    String::new()
                },
            ]);
        }
    }
    t
}

/// The first two runs' throughput over time, per client and at the server.
fn plots(out: &[Run]) -> Vec<Plot> {
    out.iter()
        .take(2)
        .enumerate()
        .map(|(i, r)| {
            let rep = &r.result.report;
            let mut series: Vec<Series> = Vec::new();
            for (client, _) in rep.client_gbit_per_s() {
                let points = rep.streams[0]
                    .intervals
                    .iter()
                    .enumerate()
                    .map(|(k, iv)| {
                        let g: f64 = rep
                            .streams
                            .iter()
                            .filter(|s| s.client == client)
                            .map(|s| s.intervals[k].received_gbit_per_s)
                            .sum();
                        (iv.end_s * 1e3, g / 8.0)
                    })
                    .collect();
                series.push(Series {
                    name: format!("client on {client}"),
                    points,
                });
            }
            series.push(Series {
                name: "server".into(),
                points: rep.streams[0]
                    .intervals
                    .iter()
                    .enumerate()
                    .map(|(k, iv)| {
                        let g: f64 = rep
                            .streams
                            .iter()
                            .map(|s| s.intervals[k].received_gbit_per_s)
                            .sum();
                        (iv.end_s * 1e3, g / 8.0)
                    })
                    .collect(),
            });
            Plot {
                file: format!("sriov-share-{}.svg", i + 1),
                title: format!(
                    "one NIC, {}: throughput over time (Paper V Fig. 29)",
                    r.name
                ),
                x_label: "ms of virtual time".into(),
                y_label: "GB/s".into(),
                chart: Chart::Lines(series),
            }
        })
        .collect()
}
