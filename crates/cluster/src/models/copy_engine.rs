//! The copy-engine factory: the DMA test device (`dma`: registers in BAR0, memory in BAR2).
//! Device-side tasks of tests use the device's own port and its memory.

use super::{DeviceModel, ModelContext, ModelError};
use smartio_devices::dma::{self, DmaDevice};
use smartio_devices::DeviceKind;
use smartio_fabric::{Endpoint, EndpointId};
use smartio_platform::SimDuration;
use std::rc::Rc;

/// Starts a copy engine on `endpoint`: registers in BAR0, memory of the size of the kind's
/// memory BAR, the engine running on the endpoint's own port. The per-copy start-up cost is
/// the calibration's `setup_ns` for `kind`, else the DMA test device's. Cannot fail.
pub(super) fn start(
    cx: &ModelContext<'_>,
    kind: DeviceKind,
    endpoint: EndpointId,
    ep: &Endpoint,
    _name: &str,
) -> Result<DeviceModel, ModelError> {
    let memory_bar = kind.memory_bar();
    let memory = ep
        .bars
        .iter()
        .find(|b| b.index == memory_bar)
        .map_or(0, |b| b.size);
    let setup = cx
        .calibration
        .device_extra(kind.name(), "setup_ns")
        .or_else(|| {
            cx.calibration
                .device_extra(DeviceKind::Dma.name(), "setup_ns")
        })
        .map_or(SimDuration::ZERO, |p| SimDuration::from_ns_f64(p.value));
    let device = Rc::new(DmaDevice::with_bars(
        memory,
        setup,
        dma::REGISTER_BAR,
        memory_bar,
    ));
    cx.machine.attach_bar_handler(endpoint, device.clone());
    let port = cx.machine.device(endpoint);
    let engine = device.clone();
    cx.machine.spawn(async move { engine.run(port).await });
    Ok(DeviceModel::CopyEngine(device))
}
