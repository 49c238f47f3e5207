//! `failover` (Paper V §6.3): a client with two NTB adapters keeps a queue pair on each; the
//! primary cable is cut mid-run, the client learns it and carries on over the backup.

use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Chart, Plot, Series};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::table;
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_platform::SimDuration;
use smartio_workloads::{failover, FailoverConfig, FailoverResult};

/// `exp failover`.
pub struct Failover;

impl Experiment for Failover {
    fn name(&self) -> &'static str {
        "failover"
    }

    fn help(&self) -> &'static str {
        "A client with a queue pair on each of two NTB paths; the primary cable is cut mid-run \
         and the client carries on over the backup"
    }

    fn default_scenario(&self) -> &'static str {
        "dual-path"
    }

    fn takes(&self) -> Takes {
        Takes {
            checking: None,
            ..Takes::COMMON
        }
    }

    fn cost(&self) -> ExpModel {
        ExpModel::new(2000, "I/Os through the failover", 1.0, 60e-6, 64, 2 << 10)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// One table cell from a run's result.
type Cell = dyn Fn(&FailoverResult) -> String;

/// I/Os unless `--ops` says otherwise.
const OPS: u64 = 2000;

fn run(setup: &Setup) -> Result<Report, CliError> {
    let config = config(setup, setup.verify)?;
    let ops = config.ops;
    let by_event = failover(&*setup.cluster()?, &config)?;
    let by_timeout = failover(
        &*setup.cluster()?,
        &FailoverConfig {
            link_events: false,
            ..config.clone()
        },
    )?;
    let runs = [("link event", &by_event), ("timeout only", &by_timeout)];
    let t = runs_table(&runs);
    let notes = notes(setup, &config, &by_event, &by_timeout);
    check(&runs)?;
    Ok(Report {
        title: format!("failover: a cut cable under {ops} QD1 I/Os"),
        table: t,
        notes,
        plots: vec![timeline(&by_event), timeline(&by_timeout)],
        json: serde_json::json!({
            "link_event": without_timeline(&by_event)?,
            "timeout": without_timeline(&by_timeout)?,
        }),
    })
}

/// The run: the manager where the first NVMe is, the program on a host with two paths to
/// it, the primary cable cut about a third of the way in.
fn config(setup: &Setup, verify: bool) -> Result<FailoverConfig, CliError> {
    let probe = setup.fabric()?;
    let (lender, nvme) =
        names::first_device(&probe, DeviceKind::Nvme, None).ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some(
                "failover needs one, and another host with two cabled NTB adapters (such as \
             dual-path)",
            ),
        })?;
    let client =
        names::host_with_two_paths(&probe, &lender).ok_or_else(|| ExpError::NoDualPathHost {
            scenario: setup.scenario.clone(),
            lender: lender.clone(),
        })?;
    drop(probe);
    let ops = setup.ops.unwrap_or(OPS);
    let base = FailoverConfig {
        device: format!("{lender}:{nvme}"),
        manager: lender,
        client,
        ops,
        verify,
        seed: setup.seed,
        ..FailoverConfig::default()
    };
    // Cut about a third of the way in (a QD1 I/O takes ~9 us), half an I/O past the third
    // so that the cut tends to fall in a command's media time, where only the link event or
    // the timeout can reveal it (a cut that meets a doorbell or CQ-head write is revealed by
    // that access failing, in both runs alike).
    Ok(FailoverConfig {
        cut_after: SimDuration::from_ns_f64(ops as f64 * 9_000.0 / 3.0 + 4_500.0),
        ..base
    })
}

/// One row per figure, one column per run.
fn runs_table(runs: &[(&str, &FailoverResult); 2]) -> comfy_table::Table {
    // Fits 100 columns; everything else is in `--json`.
    let mut t = table(&["detected by", "link event", "timeout only"]);
    fn us(v: f64) -> String {
        format!("{v:.3}")
    }
    let rows: [(&str, &Cell); 9] = [
        // What the controller ran (SMART): the I/Os plus any check or re-run read.
        ("commands the device ran", &|r| {
            format!("{} for {} I/Os", r.device_commands, r.ops)
        }),
        ("lost (read-back, SMART)", &|r| {
            format!(
                "{} ({} stale, {} missing)",
                r.lost, r.stale_blocks, r.writes_missing
            )
        }),
        ("written twice (SMART)", &|r| r.duplicated.to_string()),
        ("on primary / backup", &|r| {
            format!("{} / {}", r.on_primary, r.on_backup)
        }),
        ("re-issued / found landed", &|r| {
            format!("{} / {}", r.reissued, r.confirmed)
        }),
        ("cut / detected (us)", &|r| {
            format!("{} / {}", us(r.cut_at_us), us(r.detected_at_us))
        }),
        ("resumed (us)", &|r| us(r.resumed_at_us)),
        ("I/O stood still (us)", &|r| us(r.interruption_us)),
        ("p50 before / after (us)", &|r| {
            format!(
                "{} / {}",
                us(r.before_ns.p50 / 1e3),
                us(r.after_ns.p50 / 1e3)
            )
        }),
    ];
    for (what, cell) in rows {
        let mut row = vec![what.to_string()];
        row.extend(runs.iter().map(|(_, r)| cell(r)));
        t.add_row(row);
    }
    t
}

/// What the program does, how lost and written twice are measured, and what was verified.
fn notes(
    setup: &Setup,
    config: &FailoverConfig,
    by_event: &FailoverResult,
    by_timeout: &FailoverResult,
) -> Vec<String> {
    let (ops, verify) = (config.ops, config.verify);
    let mut notes = vec![
        format!(
            "{} on {}: manager on {}, the program on {} with a client (and a queue pair) through each of its two NTB adapters; {} QD1 4 KiB I/Os, half writes; times in us after the timed I/O started",
            config.device, setup.scenario, config.manager, config.client, ops
        ),
        "on detection the program asks the manager to delete the lost queue pair (the \
         controller finishes what it had taken first), then checks whether a write given up \
         on had landed before issuing it again, so no write runs twice"
            .to_string(),
        format!(
            "lost and written twice are measured: after the run every one of the {} blocks is read back and compared with the version last written (stale), and the controller's SMART counts of write commands are compared with the program's writes (missing: fewer ran; twice: more ran)",
            config.blocks
        ),
        "commands the device ran: its SMART counts of reads and writes during the I/O: the \
         I/Os, plus reads whose data died in the cable or that checked a write"
            .to_string(),
    ];
    notes.push(if verify {
        format!(
            "--verify: every read during the run checked too; {} and {} bytes verified",
            by_event.verified_bytes, by_timeout.verified_bytes
        )
    } else {
        format!(
            "reads during the run are not checked (give --verify to check them); the read-back verified {} and {} bytes",
            by_event.verified_bytes, by_timeout.verified_bytes
        )
    });
    notes
}

/// Refuses a run that lost a write or ran one twice.
fn check(runs: &[(&'static str, &FailoverResult); 2]) -> Result<(), ExpError> {
    let lost_or_twice = runs.iter().any(|(_, r)| r.lost + r.duplicated > 0);
    if lost_or_twice {
        return Err(ExpError::LostOrTwice {
            runs: runs
                .iter()
                .map(|(w, r)| (*w, r.lost, r.duplicated))
                .collect(),
        });
    }
    Ok(())
}

/// Latency against time, one series per path, with the cut visible as the gap.
fn timeline(r: &FailoverResult) -> Plot {
    let series = |path: u8, name: &str| Series {
        name: name.to_string(),
        points: r
            .timeline
            .iter()
            .filter(|c| c.path == path)
            .map(|c| (c.at_us, c.latency_ns / 1000.0))
            .collect(),
    };
    let by = if r.detected_by == "timeout" {
        "timeout"
    } else {
        "link-event"
    };
    Plot {
        file: format!("failover-{by}.svg"),
        title: format!(
            "I/O latency over time; cable cut at {:.0} us, detected by {}, {:.1} us without I/O",
            r.cut_at_us, r.detected_by, r.interruption_us
        ),
        x_label: "completion time (us)".into(),
        y_label: "latency (us)".into(),
        chart: Chart::Lines(vec![
            series(0, "primary path (adapter 0)"),
            series(1, "backup path (adapter 1)"),
        ]),
    }
}

/// The result for JSON, without the per-I/O timeline (which is in the plot).
fn without_timeline(r: &FailoverResult) -> Result<serde_json::Value, CliError> {
    let mut v = serde_json::to_value(r)?;
    if let Some(o) = v.as_object_mut() {
        o.remove("timeline");
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_calibration::Calibration;

    #[test]
    fn the_table_fits_100_columns_and_shows_each_measured_figure() {
        let calibration = Calibration::default_embedded();
        let setup = Setup {
            ops: Some(200),
            ..Setup::new("dual-path".into(), &calibration, 1)
        };
        let report = run(&setup).expect("runs");
        let text = report.table.to_string();
        let widest = text.lines().map(|l| l.chars().count()).max();
        assert!(
            widest.is_some_and(|w| w <= 100),
            "{widest:?} columns:\n{text}"
        );
        for row in [
            "lost (read-back, SMART)",
            "written twice (SMART)",
            "0 (0 stale, 0 missing)",
        ] {
            assert!(text.contains(row), "{row} missing:\n{text}");
        }
        assert_eq!(report.json["link_event"]["stale_blocks"], 0);
        assert_eq!(report.json["timeout"]["writes_missing"], 0);
    }
}
