//! The copy-engine factory: the DMA test device (`dma`: registers in BAR0, memory in BAR2).
//! Device-side tasks of tests use the device's own port and its memory.
//!
//! A DMA test device with SR-IOV (`params.vfs`) is one model serving its PF and every VF:
//! the PF's and VFs' configuration spaces (`SrIovFunctions`: the PF's handler reports VF
//! Enable to the engine), one `OneFunction` BAR handler per function
//! (`Machine::attach_function_handlers`), and one copy engine per VF running on the VF's
//! own port (its DMA carries the VF's requester id).

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
    let mut device = DmaDevice::with_bars(memory, setup, dma::REGISTER_BAR, memory_bar);
    let vfs: Vec<EndpointId> = ep.sriov.as_ref().map_or(Vec::new(), |v| v.vfs.clone());
    if vfs.is_empty() {
        // Without SR-IOV, exactly as before: the device answers its own BARs.
        let device = Rc::new(device);
        cx.machine.attach_bar_handler(endpoint, device.clone());
        let port = cx.machine.device(endpoint);
        let engine = device.clone();
        cx.machine.spawn(async move { engine.run(port).await });
        return Ok(DeviceModel::CopyEngine(device));
    }
    if let Ok(total) = u16::try_from(vfs.len()) {
        device = device.with_virtual_functions(total);
    }
    let device = Rc::new(device);
    cx.machine
        .attach_function_handlers(endpoint, device.clone());
    let port = cx.machine.device(endpoint);
    let engine = device.clone();
    cx.machine.spawn(async move { engine.run(port).await });
    start_virtual_functions(cx, &device, endpoint, ep);
    Ok(DeviceModel::CopyEngine(device))
}

/// Attaches the PF's and VFs' configuration spaces and starts each VF's copy engine on the
/// VF's own port (the BAR handlers are attached by `Machine::attach_function_handlers`).
fn start_virtual_functions(
    cx: &ModelContext<'_>,
    device: &Rc<DmaDevice>,
    pf: EndpointId,
    ep: &Endpoint,
) {
    super::attach_sriov_config(cx, pf, ep, None);
    for (function, vf) in cx.machine.functions(pf) {
        let Some(n) = function.vf_number() else {
            continue;
        };
        if let Some(engine) = device.virtual_function(n).cloned() {
            let port = cx.machine.device(vf);
            cx.machine.spawn(async move { engine.run(port).await });
        }
    }
}
