//! Applications on local and lent devices, the way the papers ran them: data-parallel CNN
//! training on two GPUs and an NVMe (Paper V §7.2, Fig. 30; Paper IV Fig. 21) and
//! multi-stream video analysis on a pool of GPUs (Paper II). What is not derived from the
//! fabric — the GPU's compute per training image or per video frame, from the calibration's
//! `[gpu.*]` profile of each GPU, and the CPU's decode of a video frame (`[video]`) — comes
//! from the calibration; everything else (copies, exchanges, I/O) runs on the emulated
//! devices and paths.

pub mod train;
pub mod video;

use crate::gpu::{BadParameter, GpuWorkloadError};
use smartio_cluster::Cluster;
use smartio_devices::gpu::GpuParams;
use smartio_fabric::EndpointId;

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
