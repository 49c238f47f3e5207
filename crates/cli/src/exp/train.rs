//! `train`: the training application where the papers ran it. Paper V §7.2, Fig. 30: both
//! GPUs and the NVMe local (`local-chassis`), all three borrowed from one lender over a
//! back-to-back NTB link (`back-to-back`), and borrowed from two lenders through a cluster
//! switch so the GPUs sit in different hosts (`cluster-switch`). Then Paper IV Fig. 21's rows
//! on `vm-chassis`, where every IOMMU is on and the lender's devices sit behind the same
//! switch as its NTB (the worst case for remote VMs: their traffic climbs to the lender's
//! root complex for translation): native on the lender (NatLoc), native on the borrower
//! (NatRem-IOMMU), in a VM on the lender with the devices passed through by VFIO (VMLoc) and
//! in a VM on the borrower by MDEV (VMRem); the papers' NatRem-SW is the single-lender row.
//!
//! Each epoch time is compared with its group's first row and each difference is split by
//! phase: the phases whose transfers crossed more hops are the ones that grew.

use super::experiment::{Experiment, Takes};
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::{ms, table};
use crate::error::CliError;
use smartio_apps::train::{train, EpochTime, Storage, TrainConfig, TrainResult, MAX_EPOCHS};

/// `exp train`.
pub struct Train;

impl Experiment for Train {
    fn name(&self) -> &'static str {
        "train"
    }

    fn help(&self) -> &'static str {
        "CNN training with its GPUs and NVMe local, on one lender, and on two lenders (Paper V \
         Fig. 30), and natively and in VMs with every IOMMU on (Paper IV Fig. 21); runs on \
         local-chassis, back-to-back, cluster-switch and vm-chassis; `--ops` is epochs \
         (default 2)"
    }

    fn default_scenario(&self) -> &'static str {
        "local-chassis"
    }

    fn takes(&self) -> Takes {
        Takes {
            own_scenarios: Some(
                "train compares its placements on local-chassis, back-to-back, cluster-switch and \
                 vm-chassis; it takes no --scenario (run `smartio app train` on another scenario)"
                    .to_string(),
            ),
            ..Takes::COMMON
        }
    }

    /// Measured: 2 epochs 21 s, 6 epochs 93 s.
    fn cost(&self) -> ExpModel {
        ExpModel::new(2, "epochs in each of 7 placements", 5.0, 16.0, 384, 0).within(1..=MAX_EPOCHS)
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// Epochs per placement unless `--ops` says otherwise.
const EPOCHS: u64 = 2;

/// A placement of the devices: its label, the row it is compared with, scenario, host, GPUs
/// and NVMe.
struct Placement {
    label: &'static str,
    baseline: usize,
    scenario: &'static str,
    host: &'static str,
    gpus: [&'static str; 2],
    nvme: &'static str,
}

const fn placement(
    label: &'static str,
    baseline: usize,
    scenario: &'static str,
    host: &'static str,
    gpus: [&'static str; 2],
    nvme: &'static str,
) -> Placement {
    Placement {
        label,
        baseline,
        scenario,
        host,
        gpus,
        nvme,
    }
}

const LENT: [&str; 2] = ["lender:gpu0", "lender:gpu1"];
const OWN: [&str; 2] = ["gpu0", "gpu1"];

const PLACEMENTS: [Placement; 7] = [
    placement("local devices", 0, "local-chassis", "local", OWN, "nvme0"),
    placement(
        "single lender",
        0,
        "back-to-back",
        "borrower",
        LENT,
        "lender:nvme0",
    ),
    placement(
        "two lenders",
        0,
        "cluster-switch",
        "borrower",
        ["lender:gpu0", "lender2:gpu2"],
        "lender:nvme0",
    ),
    placement("NatLoc", 3, "vm-chassis", "lender", OWN, "nvme0"),
    placement(
        "NatRem-IOMMU",
        3,
        "vm-chassis",
        "borrower",
        LENT,
        "lender:nvme0",
    ),
    placement("VMLoc (VFIO)", 3, "vm-chassis", "lender/vm0", OWN, "nvme0"),
    placement(
        "VMRem (MDEV)",
        3,
        "vm-chassis",
        "borrower/vm0",
        LENT,
        "lender:nvme0",
    ),
];

/// The `app train` command that runs `p` with `epochs`.
fn command(p: &Placement, epochs: u64, seed: u64) -> String {
    format!(
        "smartio app train --scenario {} --host {} --gpus {} --nvme {} --epochs {epochs} --seed {seed}",
        p.scenario,
        p.host,
        p.gpus.join(","),
        p.nvme
    )
}

/// The mean over `r`'s epochs of one phase.
fn mean(r: &TrainResult, phase: fn(&EpochTime) -> f64) -> f64 {
    r.epochs.iter().map(phase).sum::<f64>() / r.epochs.len().max(1) as f64
}

/// One phase of an epoch: its name and where its time is.
type Phase = (&'static str, fn(&EpochTime) -> f64);

/// The phases, named.
const PHASES: [Phase; 5] = [
    ("I/O wait", |e| e.io_wait_ns),
    ("copies", |e| e.copy_ns),
    ("compute", |e| e.compute_ns),
    ("exchange", |e| e.exchange_ns),
    ("update", |e| e.update_ns),
];

/// Nodes the longest copy path and the longest exchange path of `r`'s GPUs pass.
fn path_lengths(r: &TrainResult) -> (usize, usize) {
    let most =
        |f: fn(&smartio_apps::train::TrainGpu) -> usize| r.gpus.iter().map(f).max().unwrap_or(0);
    (most(|g| g.copy_path.len()), most(|g| g.exchange_path.len()))
}

/// What `r` (placement `p`) adds to its baseline `b` (`base`), phase by phase.
fn difference(p: &Placement, r: &TrainResult, b: &Placement, base: &TrainResult) -> String {
    let phases: Vec<String> = PHASES
        .iter()
        .map(|(name, f)| format!("{name} {:+.1} µs", (mean(r, *f) - mean(base, *f)) / 1e3))
        .collect();
    let ((copy, exchange), (base_copy, base_exchange)) = (path_lengths(r), path_lengths(base));
    format!(
        "{}: epoch {:+.4} % against {}: {}; a GPU's copies pass {copy} nodes ({}: {base_copy}), \
         its gradient chunks {exchange} ({}: {base_exchange})",
        p.label,
        (r.mean_epoch_ns / base.mean_epoch_ns - 1.0) * 100.0,
        b.label,
        phases.join(", "),
        b.label,
        b.label,
    )
}

fn run(setup: &Setup) -> Result<Report, CliError> {
    let epochs = setup.ops.unwrap_or(EPOCHS);
    if epochs > MAX_EPOCHS {
        return Err(ExpError::Epochs { ops: epochs }.into());
    }
    let mut results: Vec<TrainResult> = Vec::new();
    for p in &PLACEMENTS {
        let config = TrainConfig {
            host: p.host.into(),
            gpus: p.gpus.iter().map(|g| g.to_string()).collect(),
            nvme: p.nvme.into(),
            storage: Storage::Native,
            epochs,
            seed: setup.seed,
            ..TrainConfig::local_default()
        };
        let cluster = setup.cluster_of(p.scenario)?;
        results.push(train(&cluster, &config)?);
    }
    let (t, bars) = placements_table(&results);
    let first = &results[0];
    let mut notes = vec![format!(
        "{epochs} epoch{} of {} images in batches of {} on two GPUs per placement (times in ms, \
         each phase summed over an epoch, averaged over epochs; the base of the first three \
         rows is local devices, of the last four NatLoc; the scenarios are in the commands \
         below); compute per image from the \
         calibration ([gpu.*] vgg19_forward_image_ns): {:.2} ms on the {}",
        if epochs == 1 { "" } else { "s" },
        first.images,
        first.batch,
        first.gpus[0].forward_image_ns / 1e6,
        first.gpus[0].profile
    )];
    for (i, (p, r)) in PLACEMENTS.iter().zip(&results).enumerate() {
        if p.baseline != i {
            notes.push(difference(
                p,
                r,
                &PLACEMENTS[p.baseline],
                &results[p.baseline],
            ));
        }
    }
    notes.push(
        "the kernels' calibrated time is the same in every row, so what a compute or update \
         phase gained is its launches and read-backs crossing a longer path; with the lender's \
         IOMMU on, a GPU's reads of the borrower's memory are translated at the lender's root \
         complex, which is why NatRem-IOMMU's copies grow most; a VM's guest runs the same \
         program with no CPU virtualization cost modelled, so VMLoc and VMRem differ from \
         NatLoc and NatRem-IOMMU only by their paths (Paper IV also saw its Keras run's \
         virtualization overhead)"
            .to_string(),
    );
    notes.push(format!(
        "in every row every image of every epoch was checked on the GPUs and every GPU's final \
         weights equal the sum of all gradients ({} images, {} weight bytes per row)",
        first.verified_images, first.verified_weight_bytes
    ));
    for p in &PLACEMENTS {
        notes.push(format!("{}: {}", p.label, command(p, epochs, setup.seed)));
    }
    let plot = Plot {
        file: "train.svg".into(),
        title: "VGG19 transfer learning: epoch time by device placement".into(),
        x_label: "placement".into(),
        y_label: "epoch time (s)".into(),
        chart: Chart::Bars(bars),
    };
    let json: Vec<serde_json::Value> = PLACEMENTS
        .iter()
        .zip(&results)
        .map(|(p, r)| serde_json::json!({ "placement": p.label, "run": r }))
        .collect();
    Ok(Report {
        title: "train: VGG19 transfer learning with local devices, one lender and two lenders \
                (Paper V Fig. 30), and natively and in VMs with every IOMMU on (Paper IV Fig. 21)"
            .into(),
        table: t,
        notes,
        plots: vec![plot],
        json: serde_json::Value::Array(json),
    })
}

/// Each placement's epoch time against its base and its phases, with the epoch times as
/// bars.
fn placements_table(results: &[TrainResult]) -> (comfy_table::Table, Vec<Bar>) {
    let mut header = vec!["placement", "host", "epoch (ms)", "vs base"];
    header.extend(PHASES.iter().map(|(name, _)| *name));
    let mut t = table(&header);
    let mut bars = Vec::new();
    for (p, r) in PLACEMENTS.iter().zip(results) {
        let base = results[p.baseline].mean_epoch_ns;
        let mut row = vec![
            p.label.to_string(),
            p.host.to_string(),
            ms(r.mean_epoch_ns),
            format!("{:+.4} %", (r.mean_epoch_ns / base - 1.0) * 100.0),
        ];
        row.extend(PHASES.iter().map(|(_, f)| ms(mean(r, *f))));
        t.add_row(row);
        bars.push(Bar {
            label: p.label.to_string(),
            value: r.mean_epoch_ns / 1e9,
            range: None,
        });
    }
    (t, bars)
}
