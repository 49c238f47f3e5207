//! The GPU factory: parameters from the scenario (`params.profile`, `memory`, `aperture`),
//! engines and costs from the calibration's `[gpu.*]` profile, kernels from the cluster's
//! one [`KernelLibrary`]. The GPU answers configuration requests itself (its MSI-X table has
//! a vector per channel) and runs on its endpoint's own port.

use super::{DeviceModel, ModelContext, ModelError};
use smartio_calibration::GpuProfileParams;
use smartio_devices::config::ConfigSpace;
use smartio_devices::gpu::{Gpu, GpuConfig, GpuParams, GpuTiming, KernelLibrary};
use smartio_devices::DeviceKind;
use smartio_fabric::{Endpoint, EndpointId};
use smartio_machine::Agent;
use smartio_platform::SimDuration;
use std::rc::Rc;

/// The timing of calibration profile `p`. The calibration admits only whole numbers for the
/// counts (copy engines 1–16, SMs 1–1024, DMA bits 32–64) and 100–5000 MHz for the clock,
/// so every conversion is exact.
pub fn gpu_timing(p: &GpuProfileParams) -> GpuTiming {
    let ns = |p: &smartio_calibration::Param| SimDuration::from_ns_f64(p.value);
    GpuTiming {
        copy_engines: p.copy_engines.value as u16,
        sm_count: p.sm_count.value as u32,
        clock_khz: (p.clock_mhz.value * 1000.0).round() as u64,
        dma_bits: p.dma_bits.value as u8,
        memory_bandwidth: p.memory_bandwidth.value,
        // Validation admits 0 (no limit) or 1e9..=1e12 bytes/s.
        copy_bus_bandwidth: (p.copy_bus_bandwidth.value > 0.0)
            .then_some(p.copy_bus_bandwidth.value),
        command: ns(&p.command_ns),
        copy_start: ns(&p.copy_start_ns),
        launch: ns(&p.launch_ns),
        clock_read: ns(&p.clock_read_ns),
        memory_access: ns(&p.memory_access_ns),
    }
}

/// Builds the GPU of `id`, attaches its BAR and configuration handlers and spawns it.
pub(super) fn start(
    cx: &ModelContext<'_>,
    _kind: DeviceKind,
    id: EndpointId,
    ep: &Endpoint,
    _name: &str,
) -> Result<DeviceModel, ModelError> {
    let params = GpuParams::parse(&ep.params).map_err(|e| ModelError::Params(Box::new(e)))?;
    let profile = cx.calibration.gpu_profile(&params.profile)?;
    let pci = Rc::new(ConfigSpace::new(
        &ep.layout,
        &ep.bars,
        Some(Gpu::<Agent>::msix_layout()),
    ));
    let config = GpuConfig {
        memory: params.memory,
        aperture: params.aperture,
        timing: gpu_timing(profile),
    };
    let kernels: Rc<KernelLibrary<Agent>> = cx.gpu_kernels.clone();
    let gpu = Rc::new(Gpu::new(config, pci.clone(), kernels));
    cx.machine.attach_bar_handler(id, gpu.clone());
    cx.machine.attach_config_handler(id, pci);
    let port = cx.machine.device(id);
    cx.machine.spawn(gpu.clone().run(port));
    Ok(DeviceModel::Gpu(gpu))
}
