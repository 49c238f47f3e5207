//! `train` (Paper V §7.2, Fig. 30): the training application with both GPUs and the NVMe
//! local (`local-chassis`), all three borrowed from one lender over a back-to-back NTB link
//! (`back-to-back`), and borrowed from two lenders through a cluster switch so the GPUs sit
//! in different hosts (`cluster-switch`). The epoch times are compared with the local run,
//! and each difference is split by phase — the phases whose transfers crossed more hops
//! are the ones that grew.

use super::{table, Bar, Chart, Plot, Report, Setup};
use smartio_cluster::Cluster;
use smartio_workloads::apps::train::{train, Storage, TrainConfig, TrainResult, MAX_EPOCHS};

/// Epochs per placement unless `--ops` says otherwise.
const EPOCHS: u64 = 2;

/// A placement of the devices: its label, scenario, host, GPUs and NVMe.
struct Placement {
    label: &'static str,
    scenario: &'static str,
    host: &'static str,
    gpus: [&'static str; 2],
    nvme: &'static str,
}

const PLACEMENTS: [Placement; 3] = [
    Placement {
        label: "local devices",
        scenario: "local-chassis",
        host: "local",
        gpus: ["gpu0", "gpu1"],
        nvme: "nvme0",
    },
    Placement {
        label: "single lender",
        scenario: "back-to-back",
        host: "borrower",
        gpus: ["lender:gpu0", "lender:gpu1"],
        nvme: "lender:nvme0",
    },
    Placement {
        label: "two lenders",
        scenario: "cluster-switch",
        host: "borrower",
        gpus: ["lender:gpu0", "lender2:gpu2"],
        nvme: "lender:nvme0",
    },
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

fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn us_diff(a: f64, b: f64) -> String {
    format!("{:+.1} µs", (a - b) / 1e3)
}

pub fn run(setup: &Setup) -> Result<Report, String> {
    let epochs = setup.ops.unwrap_or(EPOCHS);
    if epochs > MAX_EPOCHS {
        return Err(format!(
            "--ops {epochs}: train's --ops is epochs per placement, at most {MAX_EPOCHS}"
        ));
    }
    let mut results: Vec<(&Placement, TrainResult)> = Vec::new();
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
        let cluster = Cluster::new(p.scenario, setup.calibration).map_err(|e| e.to_string())?;
        results.push((p, train(&cluster, &config).map_err(|e| e.to_string())?));
    }
    let local = results[0].1.mean_epoch_ns;
    let mut t = table(&[
        "placement",
        "scenario",
        "epoch (ms)",
        "vs local",
        "I/O wait",
        "copies",
        "compute",
        "exchange",
        "update",
    ]);
    let mut bars = Vec::new();
    for (p, r) in &results {
        let n = r.epochs.len().max(1) as f64;
        let mean = |f: fn(&smartio_workloads::apps::train::EpochTime) -> f64| {
            r.epochs.iter().map(f).sum::<f64>() / n
        };
        t.add_row(vec![
            p.label.to_string(),
            p.scenario.to_string(),
            ms(r.mean_epoch_ns),
            format!("{:+.4} %", (r.mean_epoch_ns / local - 1.0) * 100.0),
            ms(mean(|e| e.io_wait_ns)),
            ms(mean(|e| e.copy_ns)),
            ms(mean(|e| e.compute_ns)),
            ms(mean(|e| e.exchange_ns)),
            ms(mean(|e| e.update_ns)),
        ]);
        bars.push(Bar {
            label: p.label.to_string(),
            value: r.mean_epoch_ns / 1e9,
            range: None,
        });
    }
    let first = &results[0].1;
    let mut notes = vec![format!(
        "{} epochs of {} images in batches of {} on two GPUs per placement (times in ms, the \
         phases are each epoch's sum, averaged over epochs); compute per image from the \
         calibration: {}",
        epochs,
        first.images,
        first.batch,
        first
            .gpus
            .iter()
            .map(|g| format!("{} {:.2} ms", g.profile, g.forward_image_ns / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for (p, r) in results.iter().skip(1) {
        let d = |f: fn(&smartio_workloads::apps::train::EpochTime) -> f64| {
            let n = r.epochs.len().max(1) as f64;
            let m = first.epochs.len().max(1) as f64;
            us_diff(
                r.epochs.iter().map(f).sum::<f64>() / n,
                first.epochs.iter().map(f).sum::<f64>() / m,
            )
        };
        notes.push(format!(
            "{}: epoch {} than local ({:+.4} %): copies {}, compute {}, exchange {}, update {}, \
             I/O wait {}; a GPU's copies pass {} nodes (local: {}), its gradient chunks {} \
             (local: {}); the kernels' calibrated time is the same everywhere, so what the \
             compute and update phases gained is their launches and read-backs crossing the \
             longer path",
            p.label,
            if r.mean_epoch_ns >= local {
                "slower"
            } else {
                "faster"
            },
            (r.mean_epoch_ns / local - 1.0) * 100.0,
            d(|e| e.copy_ns),
            d(|e| e.compute_ns),
            d(|e| e.exchange_ns),
            d(|e| e.update_ns),
            d(|e| e.io_wait_ns),
            r.gpus.iter().map(|g| g.copy_path.len()).max().unwrap_or(0),
            first
                .gpus
                .iter()
                .map(|g| g.copy_path.len())
                .max()
                .unwrap_or(0),
            r.gpus
                .iter()
                .map(|g| g.exchange_path.len())
                .max()
                .unwrap_or(0),
            first
                .gpus
                .iter()
                .map(|g| g.exchange_path.len())
                .max()
                .unwrap_or(0),
        ));
    }
    notes.push(format!(
        "every image of every epoch checked on the GPUs and every GPU's final weights equal \
         to the sum of all gradients ({} images, {} weight bytes per placement)",
        first.verified_images, first.verified_weight_bytes
    ));
    for (p, _) in &results {
        notes.push(format!("{}: {}", p.label, command(p, epochs, setup.seed)));
    }
    let plot = Plot {
        file: "train.svg".into(),
        title: "VGG19 transfer learning: epoch time by device placement".into(),
        x_label: "placement".into(),
        y_label: "epoch time (s)".into(),
        chart: Chart::Bars(bars),
    };
    let json: Vec<serde_json::Value> = results
        .iter()
        .map(|(p, r)| serde_json::json!({ "placement": p.label, "run": r }))
        .collect();
    Ok(Report {
        title: "train: VGG19 transfer learning with local devices, one lender, two lenders".into(),
        table: t,
        notes,
        plots: vec![plot],
        json: serde_json::Value::Array(json),
    })
}
