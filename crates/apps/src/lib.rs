//! Applications on local and lent devices, the way the papers ran them: data-parallel CNN
//! training on two GPUs and an NVMe (Paper V §7.2, Fig. 30; Paper IV Fig. 21) and
//! multi-stream video analysis on a pool of GPUs (Paper II). What is not derived from the
//! fabric — the GPU's compute per training image or per video frame, from the calibration's
//! `[gpu.*]` profile of each GPU, and the CPU's decode of a video frame (`[video]`) — comes
//! from the calibration; everything else (copies, exchanges, I/O) runs on the emulated
//! devices and paths.
//!
//! # Inside this crate
//!
//! This crate holds the applications a user of a composable cluster runs on lent devices. What
//! is not derived from the fabric is the compute: the GPU's per item, a `[gpu.*]` calibration
//! figure of each GPU's profile (`gpu_profile`), and for video the CPU's decode per frame
//! (`[video]`); everything else runs on the emulated devices and paths. [`train`] is data-parallel CNN training as Paper V §7.2 ran
//! it: a loader task reads batches of image records from the NVMe (native driver, or a client of
//! the distributed driver) into pinned buffers ahead of the steps; each step copies the sub-batches into the GPUs, runs step kernels
//! that check every image and write a gradient derived from the images they saw, sums the
//! gradients by a ring all-reduce (copy engines writing into the next GPU's aperture, or through
//! host memory from a GPU whose peer access is refused) and applies them; phases are timed on the host's
//! clock between synchronizes so an epoch's breakdown sums to the epoch, and the final weights
//! are checked against the closed form of all gradients. [`video`] is Paper II's video
//! analysis: live streams captured at their frame rate, an earliest-finish scheduler over the
//! pool of local and borrowed GPUs (by each profile's `eir_frame_ns`), decodes on the host's
//! cores into the chosen GPU's pinned buffers (two frames in flight per GPU), a feature kernel
//! that takes the GPU's ticket lock (the GPU model charges no contention between channels'
//! launches), digests the frame in GPU memory and works the profile's figure, and every frame
//! verified against the decoded bytes.

#![forbid(unsafe_code)]

pub mod train;
pub mod video;

use smartio_cluster::Cluster;
use smartio_devices::gpu::GpuParams;
use smartio_fabric::EndpointId;
use smartio_workloads::gpu::{BadParameter, GpuWorkloadError};

/// The calibration profile of the GPU at `endpoint` (its scenario `params.profile`) and the
/// profile's name: where an application's compute figures come from.
pub(crate) fn gpu_profile(
    cluster: &Cluster,
    endpoint: EndpointId,
) -> Result<(String, smartio_calibration::GpuProfileParams), GpuWorkloadError> {
    let fabric = cluster.machine.fabric();
    let ep = fabric.endpoint(endpoint);
    // The model started with these parameters, so they parse and the profile exists; the
    // errors are reported rather than assumed away.
    let params = GpuParams::parse(&ep.params).map_err(|source| BadParameter::GpuParams {
        gpu: ep.name.clone(),
        source: Box::new(source),
    })?;
    let profile = cluster
        .calibration
        .gpu_profile(&params.profile)
        .map_err(|source| BadParameter::GpuProfile {
            gpu: ep.name.clone(),
            source,
        })?
        .clone();
    Ok((params.profile, profile))
}
