//! `smartio app train`: data-parallel CNN training on GPUs and an NVMe (Paper V Fig. 30),
//! with the epoch times and where each epoch's time went.

use crate::cells::{ms, table};
use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::value_error::ValueError;
use crate::values::{device, whole};
use smartio_apps::train::{
    train, ExchangeRoute, Storage, TrainConfig, TrainResult, MAX_BATCH, MAX_EPOCHS, MAX_GPUS,
    MAX_IMAGES,
};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;

/// `smartio app train` arguments.
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Host whose CPU runs the program (`host/vm` for a VM the scenario declares).
    #[arg(long)]
    pub host: String,
    /// The GPUs, comma-separated: devices of the host (`gpu0`) or `lender:gpu0` (borrowed
    /// for the run); 1 to 8.
    #[arg(long, value_name = "G,...", value_parser = gpu_list)]
    pub gpus: GpuList,
    /// The NVMe holding the training set: `nvme0` or `lender:nvme0`.
    #[arg(long, value_parser = device)]
    pub nvme: String,
    /// Which driver reads it: `native` (the NVMe driver bound to it, borrowing it if remote)
    /// or `nvme-client` (a client of the distributed NVMe driver; needs --manager).
    #[arg(long, value_enum, default_value = "native")]
    pub method: Method,
    /// Host running the distributed driver's manager (with --method nvme-client).
    #[arg(long, value_name = "HOST")]
    pub manager: Option<String>,
    /// Images in the training set, 1 to 8000 (Kvasir v2's size), a whole number of
    /// batches.
    #[arg(long, default_value = "512", value_name = "N", value_parser = images)]
    pub images: u64,
    /// Images per step over all GPUs, 1 to 1024, a multiple of the number of GPUs.
    #[arg(long, default_value = "32", value_name = "N", value_parser = batch)]
    pub batch: u64,
    /// Passes over the training set, 1 to 1000.
    #[arg(long, default_value = "2", value_name = "N", value_parser = epochs)]
    pub epochs: u64,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// the epochs' shuffles: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// The native NVMe driver.
    Native,
    /// A client of the distributed NVMe driver.
    NvmeClient,
}

/// `--gpus`: 1 to [`MAX_GPUS`] device names.
#[derive(Debug, Clone)]
pub struct GpuList(pub Vec<String>);

fn gpu_list(text: &str) -> Result<GpuList, ValueError> {
    let names: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
    if names.iter().any(String::is_empty) {
        return Err(ValueError::EmptyGpuName);
    }
    for name in &names {
        device(name)?;
    }
    if names.len() > MAX_GPUS {
        return Err(ValueError::TooManyGpus {
            count: names.len(),
            max: MAX_GPUS,
        });
    }
    Ok(GpuList(names))
}

fn images(text: &str) -> Result<u64, ValueError> {
    whole(text, 1, MAX_IMAGES, "images in the training set")
}

fn batch(text: &str) -> Result<u64, ValueError> {
    whole(text, 1, MAX_BATCH, "images per step over all GPUs")
}

fn epochs(text: &str) -> Result<u64, ValueError> {
    whole(text, 1, MAX_EPOCHS, "passes over the training set")
}

/// Runs `smartio app train`.
pub fn run(calibration: &Calibration, args: TrainArgs) -> Result<(), CliError> {
    let storage = match (args.method, args.manager) {
        (Method::Native, None) => Storage::Native,
        (Method::Native, Some(manager)) => {
            return Err(Usage::TrainManagerWithNative { manager }.into())
        }
        (Method::NvmeClient, Some(manager)) => Storage::Client { manager },
        (Method::NvmeClient, None) => return Err(Usage::TrainNoManager.into()),
    };
    let cluster = Cluster::seeded(&args.scenario, calibration, args.seed)?;
    let config = TrainConfig {
        host: args.host,
        gpus: args.gpus.0,
        nvme: args.nvme,
        storage,
        images: args.images,
        batch: args.batch,
        epochs: args.epochs,
        seed: args.seed,
        spoil_image: None,
    };
    let result = train(&cluster, &config)?;
    if args.json {
        return print_json(&result);
    }
    print!("{}", render::wrapped(&title(&result), "", "  "));
    println!("{}", epoch_table(&result));
    for note in notes(&result) {
        print!("{}", render::wrapped(&note, "- ", "  "));
    }
    Ok(())
}

/// One line saying what ran.
pub fn title(r: &TrainResult) -> String {
    let gpus: Vec<String> = r.gpus.iter().map(|g| g.name.clone()).collect();
    format!(
        "VGG19 transfer learning on {} from {}: GPUs {}, training set of {} images on {} read \
         by {}, batch {} ({} per GPU), {} steps per epoch",
        r.scenario,
        r.host,
        gpus.join(", "),
        r.images,
        r.nvme,
        match &r.manager {
            Some(m) => format!("a client of the distributed NVMe driver (manager on {m})"),
            None => "the native NVMe driver".to_string(),
        },
        r.batch,
        r.batch / r.gpus.len().max(1) as u64,
        r.steps
    )
}

/// A row per epoch: its time and each phase's share, in milliseconds.
pub fn epoch_table(r: &TrainResult) -> comfy_table::Table {
    let mut t = table(&[
        "epoch",
        "time (ms)",
        "I/O wait",
        "copies",
        "compute",
        "exchange",
        "update",
        "NVMe reads (overlapped)",
    ]);
    for (i, e) in r.epochs.iter().enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            ms(e.total_ns),
            ms(e.io_wait_ns),
            ms(e.copy_ns),
            ms(e.compute_ns),
            ms(e.exchange_ns),
            ms(e.update_ns),
            ms(e.reads_ns),
        ]);
    }
    t
}

/// Where the figures come from, what was checked, the paths the data took.
pub fn notes(r: &TrainResult) -> Vec<String> {
    let mut out = Vec::new();
    let compute: Vec<String> = r
        .gpus
        .iter()
        .map(|g| {
            format!(
                "{} ({}): {:.2} ms",
                g.name,
                g.profile,
                g.forward_image_ns / 1e6
            )
        })
        .collect();
    out.push(format!(
        "compute per image from the calibration ([gpu.*] vgg19_forward_image_ns, derived from \
         VGG19's 19.6 billion multiply-adds per image and each GPU's FP32 peak, not from the \
         fabric): {}; everything else ran on the emulated devices and paths",
        compute.join(", ")
    ));
    out.push(format!(
        "mean epoch {} ms; {} images trained on and checked byte for byte on the GPUs; {} \
         bytes of final weights equal to the host's sum of every gradient",
        ms(r.mean_epoch_ns),
        r.verified_images,
        r.verified_weight_bytes
    ));
    let exchange = match r.exchange {
        ExchangeRoute::None => "none (one GPU)".to_string(),
        ExchangeRoute::PeerToPeer => format!(
            "{} bytes of gradient per GPU per step, ring all-reduce peer-to-peer",
            r.gradient_bytes
        ),
        ExchangeRoute::HostMemory => format!(
            "{} bytes of gradient per GPU per step, ring all-reduce through host memory (no GPU \
             reaches the next one)",
            r.gradient_bytes
        ),
        ExchangeRoute::Mixed => format!(
            "{} bytes of gradient per GPU per step, ring all-reduce peer-to-peer where a GPU \
             reaches the next one, through host memory where it does not",
            r.gradient_bytes
        ),
    };
    out.push(format!("exchange: {exchange}"));
    for g in &r.gpus {
        let mut line = format!(
            "{}{}: its copies from {}'s memory pass {} nodes ({})",
            g.name,
            if g.borrowed { " (borrowed)" } else { "" },
            r.host,
            g.copy_path.len(),
            g.copy_path.join(" > ")
        );
        if !g.exchange_path.is_empty() {
            line.push_str(&format!(
                "; its gradient chunks to the next GPU pass {} ({})",
                g.exchange_path.len(),
                g.exchange_path.join(" > ")
            ));
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_list_is_refused_when_empty_or_too_long() {
        assert_eq!(gpu_list("gpu0, lender:gpu1").map(|l| l.0.len()), Ok(2));
        assert!(gpu_list("gpu0,,gpu1").is_err());
        let nine = ["g"; 9].join(",");
        assert_eq!(
            gpu_list(&nine).map(|l| l.0).expect_err("nine").to_string(),
            "9 GPUs; must be 1..=8 (one model replica per GPU)"
        );
    }
}
