//! Data-parallel CNN training on GPUs and an NVMe, shaped like the papers' Keras run (Paper V
//! §7.2, Fig. 30; Paper IV Fig. 21): VGG19 transfer learning on an image set read from an
//! NVMe by the native NVMe driver, the model replicated on every GPU.
//!
//! One step of a global batch of `batch` images, `batch / G` per GPU:
//!
//! 1. **copy** — each GPU copies its sub-batch from pinned host memory, where the NVMe put
//!    it, into device memory (the GPUs at once);
//! 2. **compute** — each GPU's step kernel checks every image it received, runs the forward
//!    pass and the new classification block's backward pass (the calibrated per-image
//!    figure of its profile, `[gpu.*] vgg19_forward_image_ns`: the one number not derived
//!    from the fabric) and writes its gradient; the host reads back which images each GPU
//!    trained on;
//! 3. **exchange** — the gradients are summed across the GPUs by a ring all-reduce: `G - 1`
//!    rounds in which each GPU's copy engine writes a chunk into the next GPU's memory
//!    peer-to-peer and the receiver adds it, then `G - 1` rounds handing the summed chunks
//!    on. Where a GPU cannot reach the next one (`cudaDeviceEnablePeerAccess` refused), its
//!    chunks go through host memory instead: a copy out, the CPU's copy between the two GPUs'
//!    pinned buffers, a copy in;
//! 4. **update** — each GPU subtracts the summed gradient from its weights.
//!
//! The images are read by the native NVMe driver bound to the NVMe (the host's own, or
//! borrowed by Device Lending), straight into the pinned buffers; or by a client of the
//! distributed NVMe driver ([`Storage::Client`]: the manager on another host, the client's
//! queue pair and data segment on the program's host, the device never borrowed), each
//! record then copied by the CPU from the client's data segment into the pinned buffer, as a
//! read through its block device would be.
//!
//! The NVMe reads are not a phase of their own: a loader reads the next batches ahead into
//! the other pinned buffers (two per GPU) while the GPUs work, as Keras' data generator
//! does; a step waits only if its batch is not there yet (**I/O wait**). Each phase is timed
//! on the host CPU's clock from its first call to the last GPU's synchronize (the compute
//! phase also to the host's check of what each GPU trained on), so an epoch is the sum of its
//! steps' phases and the breakdown explains any difference between placements: a phase that
//! crossed more hops takes longer.
//!
//! Everything is real data: the images on the namespace carry their ids, the step kernels
//! check every byte of every record, the host checks that each GPU trained on exactly the
//! images the shuffled order gave it, and at the end every GPU's weights must equal what the
//! host computes from the gradients' closed form — the all-reduce lost or doubled nothing.

mod dataset;
mod kernels;
mod run;

pub use dataset::{Layout, IMAGE_BYTES};

use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_devices::nvme::NvmeController;
use smartio_drivers::nvme::{CompletionMode, NvmeDriver, NvmeDriverConfig};
use smartio_workloads::attach::Workbench;
use smartio_workloads::gpu::{gpu_endpoint, BadParameter, GpuWorkloadError};
use std::rc::Rc;

/// Bytes of the gradient the GPUs exchange every step: the new classification block of
/// Keras' transfer-learning recipe on VGG19's 512 feature maps — global average pooling, a
/// 1024-unit dense layer and an 8-class output (Kvasir's 8 classes): (512 × 1024 + 1024) +
/// (1024 × 8 + 8) = 533,512 `f32` parameters.
pub const GRADIENT_BYTES: u64 = 4 * (512 * 1024 + 1024 + 1024 * 8 + 8);

/// Most GPUs one run trains on.
pub const MAX_GPUS: usize = 8;
/// Largest global batch.
pub const MAX_BATCH: u64 = 1024;
/// Most images in the training set: Kvasir v2's 8,000 (the papers' set). Each image's
/// 147 KiB is held in this process's memory, on the emulated disk.
pub const MAX_IMAGES: u64 = 8_000;
/// Most epochs.
pub const MAX_EPOCHS: u64 = 1000;
/// NVMe reads the loader keeps in flight.
pub const READS_IN_FLIGHT: u16 = 32;

/// Which driver reads the training set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// The native NVMe driver, bound to the NVMe (borrowed if it is `lender:nvme0`).
    Native,
    /// A client of the distributed NVMe driver whose manager runs on host `manager`.
    Client {
        /// Host of the manager.
        manager: String,
    },
}

/// What to train on.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// Host whose CPU runs the program (it borrows what is remote).
    pub host: String,
    /// The GPUs: devices of the host (`gpu0`) or `lender:gpu0`, borrowed for the run.
    pub gpus: Vec<String>,
    /// The NVMe holding the images: `nvme0` or `lender:nvme0`.
    pub nvme: String,
    /// Which driver reads them.
    pub storage: Storage,
    /// Images in the training set.
    pub images: u64,
    /// Images per step over all GPUs (a multiple of the number of GPUs).
    pub batch: u64,
    /// Passes over the training set.
    pub epochs: u64,
    /// Seed of the epochs' shuffles.
    pub seed: u64,
    /// Fault injection: after the training set is written, one byte in the middle of this
    /// image's record is changed on the disk, as a silent media error would (the run must
    /// then fail when a GPU checks the image).
    pub spoil_image: Option<u64>,
}

impl TrainConfig {
    /// Two GPUs and the NVMe of `local-chassis`, 512 images in batches of 32, two epochs.
    pub fn local_default() -> TrainConfig {
        TrainConfig {
            host: "local".into(),
            gpus: vec!["gpu0".into(), "gpu1".into()],
            nvme: "nvme0".into(),
            storage: Storage::Native,
            images: 512,
            batch: 32,
            epochs: 2,
            seed: 1,
            spoil_image: None,
        }
    }

    /// Images per GPU per step.
    pub fn sub_batch(&self) -> u64 {
        self.batch / self.gpus.len().max(1) as u64
    }

    /// Steps per epoch.
    pub fn steps(&self) -> u64 {
        self.images / self.batch.max(1)
    }
}

/// How the gradients travelled between the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExchangeRoute {
    /// One GPU only: nothing to exchange.
    None,
    /// Each GPU's copy engine wrote into the next GPU's memory.
    PeerToPeer,
    /// Through pinned host memory (no GPU could reach the next one).
    HostMemory,
    /// Peer-to-peer where a GPU reaches the next one, through host memory where it does not.
    Mixed,
}

/// One GPU of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainGpu {
    /// As given.
    pub name: String,
    /// Calibration profile.
    pub profile: String,
    /// The profile's forward pass per image in nanoseconds (from the calibration).
    pub forward_image_ns: f64,
    /// Borrowed by Device Lending.
    pub borrowed: bool,
    /// Nodes a copy from the host's pinned memory crosses (the GPU reads them), in order.
    pub copy_path: Vec<String>,
    /// Nodes the GPU's writes into the next GPU's memory cross (empty with one GPU).
    pub exchange_path: Vec<String>,
}

/// Where one epoch's time went, in nanoseconds of virtual time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EpochTime {
    /// The whole epoch (the sum of the phases below, but `reads_ns`).
    pub total_ns: f64,
    /// Steps waiting for their batch's NVMe reads.
    pub io_wait_ns: f64,
    /// Sub-batches copied into the GPUs.
    pub copy_ns: f64,
    /// Forward and backward kernels, and reading back what they trained on.
    pub compute_ns: f64,
    /// The gradients' all-reduce.
    pub exchange_ns: f64,
    /// The weights' update.
    pub update_ns: f64,
    /// The loader's NVMe reads for the epoch, first submission to last completion per batch,
    /// summed (overlapped with the phases above).
    pub reads_ns: f64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainResult {
    /// Scenario name.
    pub scenario: String,
    /// Host of the program.
    pub host: String,
    /// The NVMe, as given.
    pub nvme: String,
    /// Whether the NVMe was borrowed (the native driver on a lent NVMe).
    pub nvme_borrowed: bool,
    /// Which driver read the images: `native` or `nvme-client`.
    pub storage: String,
    /// The distributed driver's manager host (with `nvme-client`).
    pub manager: Option<String>,
    /// The GPUs.
    pub gpus: Vec<TrainGpu>,
    /// Images in the training set.
    pub images: u64,
    /// Global batch.
    pub batch: u64,
    /// Steps per epoch.
    pub steps: u64,
    /// Bytes of an image record on the namespace.
    pub record_bytes: u64,
    /// Bytes of the gradient each GPU contributes per step.
    pub gradient_bytes: u64,
    /// How the gradients travelled.
    pub exchange: ExchangeRoute,
    /// Per epoch.
    pub epochs: Vec<EpochTime>,
    /// Mean epoch time in nanoseconds.
    pub mean_epoch_ns: f64,
    /// Images trained on and found intact (each counted once per epoch).
    pub verified_images: u64,
    /// Bytes of final weights, over all GPUs, found equal to the host's reckoning from the
    /// gradients (a difference fails the run).
    pub verified_weight_bytes: u64,
}

/// Checks what can be checked before anything runs (the counts; the devices need the
/// cluster).
pub fn check(config: &TrainConfig) -> Result<(), GpuWorkloadError> {
    let g = config.gpus.len();
    if g == 0 || g > MAX_GPUS {
        return Err(BadParameter::Gpus {
            given: g,
            max: MAX_GPUS,
        }
        .into());
    }
    if config.batch == 0 || config.batch > MAX_BATCH || !config.batch.is_multiple_of(g as u64) {
        return Err(BadParameter::Batch {
            batch: config.batch,
            max: MAX_BATCH,
            gpus: g,
        }
        .into());
    }
    if config.images == 0
        || config.images > MAX_IMAGES
        || !config.images.is_multiple_of(config.batch)
    {
        return Err(BadParameter::Images {
            images: config.images,
            max: MAX_IMAGES,
            batch: config.batch,
        }
        .into());
    }
    if config.epochs == 0 || config.epochs > MAX_EPOCHS {
        return Err(BadParameter::Epochs {
            epochs: config.epochs,
            max: MAX_EPOCHS,
        }
        .into());
    }
    Ok(())
}

/// Trains on `cluster` (which it leaves at a later virtual time); borrowed devices are
/// given back at the end, also when the run fails.
pub fn train(cluster: &Cluster, config: &TrainConfig) -> Result<TrainResult, GpuWorkloadError> {
    check(config)?;
    // The native driver binds to the NVMe, attached first (borrowed if remote); a client
    // of the distributed driver never attaches it.
    let mut wanted: Vec<&str> = Vec::new();
    if config.storage == Storage::Native {
        wanted.push(config.nvme.as_str());
    }
    wanted.extend(config.gpus.iter().map(String::as_str));
    smartio_workloads::attach::check_device_name(&config.nvme)?;
    let bench = Workbench::with_devices(cluster, &config.host, &wanted)?;
    let nvme_ep = bench.endpoint_of(&config.nvme)?;
    let controller = cluster
        .nvme(nvme_ep)
        .ok_or_else(|| BadParameter::NotNvmeController {
            nvme: config.nvme.clone(),
            kind: cluster.machine.fabric().endpoint(nvme_ep).kind.clone(),
        })?;
    let manager = match &config.storage {
        Storage::Native => None,
        Storage::Client { manager } => Some(bench.host(manager)?),
    };
    let (gpus, bandwidth) = profile_gpus(cluster, &bench, config)?;
    let layout = Layout::new(u64::from(controller.config().lba_size));
    let capacity = controller.namespaces().capacity();
    let needed = config.images * layout.record();
    if needed > capacity {
        return Err(BadParameter::DatasetTooLarge {
            images: config.images,
            needed,
            nvme: config.nvme.clone(),
            capacity,
        }
        .into());
    }
    stage_dataset(&controller, &layout, config)?;
    if config.storage == Storage::Native {
        bench.os.register_driver(Rc::new(NvmeDriver {
            config: NvmeDriverConfig {
                mode: CompletionMode::Interrupt,
                io_queues: 1,
                queue_entries: READS_IN_FLIGHT + 1,
                intx: false,
            },
        }));
    }
    let setup = run::Setup {
        config: config.clone(),
        gpus,
        bandwidth,
        layout,
        kernels: cluster.gpu_kernels().clone(),
        costs: smartio_drivers::gpu::RuntimeCosts::from_calibration(
            &cluster.calibration.gpu_runtime,
        ),
        scenario: cluster.machine.fabric().name.clone(),
        machine: cluster.machine.clone(),
        client: match manager {
            None => None,
            Some(manager) => {
                let qualified = if config.nvme.contains(':') {
                    config.nvme.clone()
                } else {
                    format!("{}:{}", bench.home.name(), config.nvme)
                };
                let fdid = bench
                    .smartio
                    .find(&qualified)
                    .map_err(smartio_workloads::attach::AttachError::from)?;
                Some((manager, fdid))
            }
        },
    };
    let b = bench.clone();
    smartio_workloads::booted::run_workload(&cluster.machine, async move {
        b.detach_after(run::run(&b, setup)).await
    })
}

/// Each GPU of `config` (none named twice) with its profile, and its memory bandwidth.
fn profile_gpus(
    cluster: &Cluster,
    bench: &Workbench,
    config: &TrainConfig,
) -> Result<(Vec<TrainGpu>, Vec<f64>), GpuWorkloadError> {
    let mut endpoints = Vec::new();
    let mut gpus = Vec::new();
    let mut bandwidth = Vec::new();
    for name in &config.gpus {
        let ep = gpu_endpoint(cluster, bench, name)?;
        if let Some(i) = endpoints.iter().position(|&e| e == ep) {
            return Err(GpuWorkloadError::SameDevice {
                a: config.gpus[i].clone(),
                b: name.clone(),
            });
        }
        endpoints.push(ep);
        let (profile, params) = super::gpu_profile(cluster, ep)?;
        bandwidth.push(params.memory_bandwidth.value);
        gpus.push(TrainGpu {
            name: name.clone(),
            profile,
            forward_image_ns: params.vgg19_forward_image_ns.value,
            borrowed: name.contains(':'),
            copy_path: Vec::new(),
            exchange_path: Vec::new(),
        });
    }
    Ok((gpus, bandwidth))
}

/// Writes the dataset to the disk before the program starts (and spoils the image the
/// configuration names, if any).
fn stage_dataset(
    controller: &NvmeController,
    layout: &Layout,
    config: &TrainConfig,
) -> Result<(), GpuWorkloadError> {
    for id in 0..config.images {
        let data = kernels::image(id, IMAGE_BYTES as usize);
        controller
            .namespaces()
            .write(1, layout.lba(id) * layout.lba_size, &data)
            .map_err(|source| BadParameter::WriteDataset {
                nvme: config.nvme.clone(),
                source,
            })?;
    }
    if let Some(id) = config.spoil_image.filter(|&id| id < config.images) {
        let at = layout.lba(id) * layout.lba_size + IMAGE_BYTES / 2;
        let mut byte = [0u8];
        controller
            .namespaces()
            .read(1, at, &mut byte)
            .and_then(|()| controller.namespaces().write(1, at, &[!byte[0]]))
            .map_err(|source| BadParameter::Spoil { id, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainConfig {
        TrainConfig::local_default()
    }

    #[test]
    fn the_gradient_is_the_classification_block() {
        assert_eq!(GRADIENT_BYTES, 2_134_048);
        assert!(GRADIENT_BYTES.is_multiple_of(4));
    }

    #[test]
    fn out_of_range_options_are_refused_with_the_option_and_range() {
        let mut c = config();
        c.batch = 33;
        let e = check(&c).expect_err("odd batch on two GPUs");
        assert!(
            e.to_string()
                .starts_with("--batch 33: allowed 1 to 1024, a multiple of the 2 GPUs"),
            "{e}"
        );
        let mut c = config();
        c.images = 500;
        let e = check(&c).expect_err("partial batch");
        assert!(e.to_string().starts_with("--images 500:"), "{e}");
        let mut c = config();
        c.epochs = 0;
        assert_eq!(
            check(&c).expect_err("no epochs").to_string(),
            "--epochs 0: allowed 1 to 1000"
        );
        let mut c = config();
        c.gpus = vec![];
        assert_eq!(
            check(&c).expect_err("no GPUs").to_string(),
            "--gpus: 0 GPUs given; allowed 1 to 8"
        );
        assert!(check(&config()).is_ok());
    }
}
