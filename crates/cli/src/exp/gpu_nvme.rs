//! `gpu-nvme` (Paper V §6.4, Fig. 18): a GPU reads an NVMe through a queue pair of the
//! distributed driver that lives in its own memory — its kernel writes the commands, rings
//! the doorbells, polls the completions and checks every byte, with no CPU in the data path
//! — against the same read driven by the host's CPU. One row with the GPU in another host
//! than the NVMe (doorbells and data cross the NTBs), one with the GPU next to it.

use super::experiment::{Experiment, Takes};
use super::names;
use super::plot::{Bar, Chart, Plot};
use super::refusal::ExpError;
use super::setup::{Report, Setup};
use crate::budget::ExpModel;
use crate::cells::table;
use crate::error::CliError;
use smartio_cluster::DeviceKind;
use smartio_workloads::{gpu_nvme_read, GpuNvmeConfig, GpuNvmeResult, MAX_GPU_NVME_BYTES};

/// `exp gpu-nvme`.
pub struct GpuNvme;

impl Experiment for GpuNvme {
    fn name(&self) -> &'static str {
        "gpu-nvme"
    }

    fn help(&self) -> &'static str {
        "A GPU reads an NVMe through a queue pair in its own memory, its kernel submitting, \
         ringing and reaping with no CPU in the data path, against the CPU driving the same \
         read (Paper V §6.4, Fig. 18); `--ops` is commands of 64 KiB (default 1 GiB)"
    }

    fn default_scenario(&self) -> &'static str {
        "cluster-switch"
    }

    fn takes(&self) -> Takes {
        Takes {
            checking: Some("checks every byte it reads anyway"),
            ..Takes::COMMON
        }
    }

    /// Measured: 16 384 commands 20 s and 1.1 GB, 65 536 63 s and 4.2 GB.
    fn cost(&self) -> ExpModel {
        ExpModel::new(
            16_384,
            "64 KiB commands read twice",
            6.0,
            0.9e-3,
            64,
            64 << 10,
        )
        .within(1..=smartio_workloads::MAX_GPU_NVME_BYTES / (64 << 10))
    }

    fn run(&self, setup: &Setup) -> Result<Report, CliError> {
        run(setup)
    }
}

/// Commands per read unless `--ops` says otherwise: 1 GiB in 64 KiB commands.
const COMMANDS: u64 = 16384;
/// Bytes per command.
const CHUNK: u64 = 64 << 10;
/// Commands in flight.
const QUEUE_DEPTH: u32 = 32;

fn run(setup: &Setup) -> Result<Report, CliError> {
    let (base, gpus) = plan(setup)?;
    let commands = base.bytes / CHUNK;
    let mut results: Vec<GpuNvmeResult> = Vec::new();
    for (host, gpu) in gpus {
        let config = GpuNvmeConfig {
            host,
            gpu,
            ..base.clone()
        };
        results.push(gpu_nvme_read(&*setup.cluster()?, &config)?);
    }
    let (t, bars) = rows(&results);
    let mut notes = vec![format!(
        "{} of namespace 1 of {} per row and way, {} commands of {} KiB, QD {QUEUE_DEPTH}; manager on {}",
        mib(base.bytes),
        base.device,
        commands,
        CHUNK >> 10,
        base.manager
    )];
    for r in &results {
        notes.push(format!(
            "{}:{}: queues ({} entries), PRP lists and data buffers in GPU memory (BAR1), mapped for the NVMe; the SQ doorbell store passes {}",
            r.host,
            r.gpu,
            r.entries,
            r.doorbell_path.join(" → ")
        ));
    }
    notes.push(
        "GPU-driven: one launch of QD worker threads and a reaper, timed by GPU events around \
         it; every byte checked in GPU memory by the kernel. CPU-driven: an ordinary client \
         queue pair (SQ placed by hints, CQ and data in the host's RAM), QD tasks, timed by \
         the host's clock from the first submission to the last completion; data checked \
         untimed"
            .to_string(),
    );
    let plot = Plot {
        file: "gpu-nvme.svg".into(),
        title: format!(
            "Reads of {} KiB at QD {QUEUE_DEPTH}: driven by the GPU vs the CPU",
            CHUNK >> 10
        ),
        x_label: "GPU, driven by".into(),
        y_label: "MiB/s".into(),
        chart: Chart::Bars(bars),
    };
    Ok(Report {
        title: format!(
            "gpu-nvme: GPU-initiated reads of {} through queues in GPU memory",
            base.device
        ),
        table: t,
        notes,
        plots: vec![plot],
        json: serde_json::to_value(&results)?,
    })
}

/// The read every row does (its GPU left to fill in) and the GPUs doing it: the first in
/// a host other than the NVMe's, then the first next to it; the commands checked.
fn plan(setup: &Setup) -> Result<(GpuNvmeConfig, Vec<(String, String)>), CliError> {
    let probe = setup.fabric()?;
    let (lender, nvme) =
        names::first_device(&probe, DeviceKind::Nvme, None).ok_or_else(|| ExpError::NoNvme {
            scenario: setup.scenario.clone(),
            needs: Some("gpu-nvme needs one and a GPU"),
        })?;
    let remote = names::other_hosts(&probe, &lender)
        .into_iter()
        .find_map(|h| names::first_device(&probe, DeviceKind::Gpu, Some(&h)));
    let local = names::first_device(&probe, DeviceKind::Gpu, Some(&lender));
    drop(probe);
    if remote.is_none() && local.is_none() {
        return Err(ExpError::NoGpu {
            scenario: setup.scenario.clone(),
            lender,
        }
        .into());
    }
    let commands = setup.ops.unwrap_or(COMMANDS);
    let max_commands = MAX_GPU_NVME_BYTES / CHUNK;
    if commands > max_commands {
        return Err(ExpError::Commands {
            ops: commands,
            max: max_commands,
        }
        .into());
    }
    let base = GpuNvmeConfig {
        host: String::new(),
        gpu: String::new(),
        device: format!("{lender}:{nvme}"),
        manager: lender.clone(),
        bytes: commands * CHUNK,
        chunk: CHUNK,
        queue_depth: QUEUE_DEPTH,
        nsid: 1,
        seed: setup.seed,
    };
    Ok((base, remote.into_iter().chain(local).collect()))
}

/// Each GPU's rows, driven by its kernel and by its host's CPU, with their bars.
fn rows(results: &[GpuNvmeResult]) -> (comfy_table::Table, Vec<Bar>) {
    let mut t = table(&[
        "GPU",
        "NVMe",
        "driven by",
        "MiB/s",
        "elapsed ms",
        "verified MiB",
        "errors",
    ]);
    let mut bars = Vec::new();
    for r in results {
        let gpu = format!("{}:{}", r.host, r.gpu);
        for (by, d) in [("GPU", &r.gpu_driven), ("CPU", &r.cpu_driven)] {
            t.add_row(vec![
                gpu.clone(),
                r.device.clone(),
                if by == "GPU" {
                    format!("{gpu} kernel")
                } else {
                    format!("{} CPU", r.host)
                },
                format!("{:.0}", d.mib_s),
                format!("{:.3}", d.elapsed_ns / 1e6),
                format!("{:.0}", d.verified_bytes as f64 / (1 << 20) as f64),
                d.errors.to_string(),
            ]);
            bars.push(Bar {
                label: format!("{gpu}, {by}"),
                value: d.mib_s,
                range: None,
            });
        }
    }
    (t, bars)
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
    }
}
