//! Seed 003's Fig. 10 (§VI): the distributed NVMe driver's kernel-space block client on a
//! local and on a remote NVMe, next to the stock kernel driver on the local one.
//!
//! Seed 003 compares each driver with its own local baseline (Fig. 9): NVMe-oF with the stock
//! Linux driver on the local NVMe (Fig. 9a), its own driver remote with its own driver local
//! (Fig. 9b: "we first used our own driver for a local NVMe device to get a local baseline.
//! Then [...] repeated the experiment for a remote NVMe"), and says the ~1 µs (read) and ~2 µs
//! (write) it measures for its driver "corresponds with the increased distance between CPU and
//! device". So the added latency here is the block client remote minus the block client
//! local, on `nvme-cluster` (Fig. 9b's two hosts, adapters and cluster switch); each finding
//! also shows the block client remote minus the stock driver local (interrupts), and the
//! baseline statement compares the two local drivers. Every run is fio at QD1, 4 KiB random,
//! the same seed.

use super::figure::{Ctx, Finding};
use super::rules::{near, near_rule};
use crate::error::CliError;
use crate::exp::plot::{Bar, Chart, Plot};
use smartio_drivers::nvme::CompletionMode;
use smartio_workloads::fio::LatencyNs;
use smartio_workloads::fio::{run_fio, Amount, FioConfig, FioMethod, RwMode};
use std::rc::Rc;

/// The scenario of Fig. 9b.
const SCENARIO: &str = "nvme-cluster";

/// I/Os per run: QD1 4 KiB reads or writes.
const OPS: u64 = 2000;

/// Who runs the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// The stock kernel driver, interrupts, on the NVMe's own host.
    StockLocal,
    /// The block client on the NVMe's own host (the manager there too).
    BlockLocal,
    /// The block client on the other host.
    BlockRemote,
}

impl Who {
    fn label(self) -> &'static str {
        match self {
            Who::StockLocal => "stock driver, local",
            Who::BlockLocal => "block client, local",
            Who::BlockRemote => "block client, remote",
        }
    }
}

/// One QD1 4 KiB run's latencies.
fn qd1(ctx: &Ctx, who: Who, rw: RwMode) -> Result<LatencyNs, CliError> {
    let cluster = ctx.cluster(SCENARIO)?;
    let manager = FioMethod::NvmeBlock {
        manager: "lender".into(),
    };
    let (host, device, method) = match who {
        Who::StockLocal => ("lender", "nvme0", FioMethod::Native),
        Who::BlockLocal => ("lender", "nvme0", manager),
        Who::BlockRemote => ("borrower", "lender:nvme0", manager),
    };
    let config = FioConfig {
        rw,
        amount: Amount::Ops(OPS),
        mode: CompletionMode::Interrupt,
        method,
        ..FioConfig::new(host, device)
    };
    run_fio(&cluster, &config)
        .map(|r| r.lat_ns)
        .map_err(|e| CliError::run(format!("{} {rw:?}", who.label()), e))
}

/// The three runs of one direction.
struct Runs {
    stock: LatencyNs,
    local: LatencyNs,
    remote: LatencyNs,
}

impl Runs {
    /// The three runs doing `rw`, made once per repro: the baseline statement reads the
    /// runs of the read and write statements.
    fn of(ctx: &Ctx, rw: RwMode) -> Result<Rc<Runs>, CliError> {
        ctx.once(&format!("seed 003 QD1 {rw:?}"), || {
            Ok(Runs {
                stock: qd1(ctx, Who::StockLocal, rw)?,
                local: qd1(ctx, Who::BlockLocal, rw)?,
                remote: qd1(ctx, Who::BlockRemote, rw)?,
            })
        })
    }

    fn plot(&self, file: &str, what: &str) -> Plot {
        let bar = |who: Who, l: &LatencyNs| Bar {
            label: who.label().into(),
            value: l.p50 / 1000.0,
            range: Some((l.min / 1000.0, l.p99 / 1000.0)),
        };
        Plot {
            file: file.into(),
            title: format!("seed 003 Fig. 10: QD1 4 KiB {what} on {SCENARIO} (p50, min to p99)"),
            x_label: String::new(),
            y_label: "latency (µs)".into(),
            chart: Chart::Bars(vec![
                bar(Who::StockLocal, &self.stock),
                bar(Who::BlockLocal, &self.local),
                bar(Who::BlockRemote, &self.remote),
            ]),
        }
    }
}

/// The finding that the block client remote adds around `stated` ns over itself local, by
/// the difference of the minima (what seed 003 compares), within ±10 %.
fn added(runs: &Runs, what: &str, stated: f64, file: &str) -> Finding {
    let (l, r, s) = (&runs.local, &runs.remote, &runs.stock);
    let (min, p50) = (r.min - l.min, r.p50 - l.p50);
    let mut finding = Finding {
        measured: format!(
            "QD1 4 KiB {what}, block client remote − local: {min:+.0} ns (min), {p50:+.0} ns (p50); \
             local {:.0} ns min. Remote − stock driver local (interrupts): {:+.0} ns (min), {:+.0} ns (p50)",
            l.min,
            r.min - s.min,
            r.p50 - s.p50
        ),
        rule: near_rule(
            "block client remote − local, by the minima,",
            &format!("around {:.0} µs", stated / 1000.0),
            stated,
            stated,
            "ns",
        ),
        holds: near(min, stated, stated),
        plots: vec![runs.plot(file, what)],
    };
    if !finding.holds {
        let crossings = if stated > 1500.0 { 4.0 } else { 2.0 };
        finding.measured = format!(
            "{}. Why it fails: a remote {} crosses the NTB {crossings:.0} more times than a \
             local one (the doorbell with its SQ entry, {}the completion entry), each through \
             two PEX8733 adapters, the PM8536 cluster switch, two cables and the lender's root \
             complex: ~{:.0} ns a crossing here (see `smartio fio --scenario {SCENARIO} --host \
             borrower --device lender:nvme0 --method nvme-block --manager lender --rw rand{} \
             --breakdown`); \
             around {:.0} µs would need ~{:.0} ns. Seed 003's Gen4 MXH932 adapters and MXS924 \
             switch are not calibrated; the Gen3 chips stand in for them",
            finding.measured,
            what.trim_end_matches('s'),
            if crossings > 2.0 {
                "the data read's request and completion, "
            } else {
                ""
            },
            min / crossings,
            what.trim_end_matches('s'),
            stated / 1000.0,
            stated / crossings
        );
    }
    finding
}

/// Seed 003 line 168: reads, around 1 µs.
pub fn reads(ctx: &Ctx) -> Result<Finding, CliError> {
    let runs = Runs::of(ctx, RwMode::RandRead)?;
    Ok(added(&runs, "reads", 1000.0, "seed003-reads.svg"))
}

/// Seed 003 line 170: writes, around 2 µs.
pub fn writes(ctx: &Ctx) -> Result<Finding, CliError> {
    let runs = Runs::of(ctx, RwMode::RandWrite)?;
    Ok(added(&runs, "writes", 2000.0, "seed003-writes.svg"))
}

/// Seed 003 line 160: the block client's local baseline is above the stock driver's.
pub fn baseline(ctx: &Ctx) -> Result<Finding, CliError> {
    let reads = Runs::of(ctx, RwMode::RandRead)?;
    let writes = Runs::of(ctx, RwMode::RandWrite)?;
    let gap = |r: &Runs| r.local.min - r.stock.min;
    let (read, write) = (gap(&reads), gap(&writes));
    Ok(Finding {
        measured: format!(
            "QD1 4 KiB, block client local − stock driver local (interrupts), minima: reads {read:+.0} ns, writes {write:+.0} ns \
             (the block client pays the system call, a {} B copy and polling; the stock driver an interrupt)",
            4096
        ),
        rule: "block client local above the stock driver local, reads and writes (minima)".into(),
        holds: read > 0.0 && write > 0.0,
        plots: Vec::new(),
    })
}
