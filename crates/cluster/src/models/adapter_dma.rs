//! Every NTB adapter's own DMA engine (`devices::ntb_dma`): attached to the adapter's
//! endpoint (its registers are a block of the adapter's BAR0) and running on the endpoint's
//! own port, so its requests carry the adapter's requester id. Its figures come from the
//! calibration's `[devices.ntb]` (reads in flight, start-up) and the read request size in
//! force (the scenario's `[pcie]`, else the calibration's).
//!
//! Adapters have no `DeviceKind` (they are not scenario devices), so they are not in the
//! kind registry: the engines start after every kind's models, in endpoint order, which
//! keeps the spawn order of every existing model as it was.

use super::ModelContext;
use smartio_devices::ntb_dma::{AdapterDma, AdapterDmaConfig};
use smartio_fabric::{EndpointId, NodeKind};
use smartio_platform::SimDuration;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The kind name of an adapter's function in the fabric and the calibration.
pub const NTB_KIND: &str = "ntb";

/// The engine's figures from the calibration in force.
pub fn adapter_dma_config(calibration: &smartio_calibration::Calibration) -> AdapterDmaConfig {
    let params = calibration.device(NTB_KIND);
    AdapterDmaConfig {
        // Whole numbers 1..=16384 by validation.
        max_outstanding_reads: params.max_outstanding_reads.value as u32,
        // A power of two 128..=4096 by validation (or the scenario's check).
        read_request_bytes: calibration.pcie.max_read_request_size.value as u64,
        setup: calibration
            .device_extra(NTB_KIND, "setup_ns")
            .map_or(SimDuration::ZERO, |p| SimDuration::from_ns_f64(p.value)),
    }
}

/// Starts the DMA engine of every NTB adapter of the fabric.
pub(crate) fn start_all(cx: &ModelContext<'_>) -> BTreeMap<EndpointId, Rc<AdapterDma>> {
    let endpoints: Vec<EndpointId> = {
        let fabric = cx.machine.fabric();
        let mut e: Vec<EndpointId> = fabric
            .nodes()
            .iter()
            .filter_map(|n| match n.kind {
                NodeKind::Ntb { endpoint, .. } => Some(endpoint),
                _ => None,
            })
            .collect();
        e.sort();
        e
    };
    let config = adapter_dma_config(cx.calibration);
    endpoints
        .into_iter()
        .map(|endpoint| {
            let engine = Rc::new(AdapterDma::new(config));
            cx.machine.attach_bar_handler(endpoint, engine.clone());
            let port = cx.machine.device(endpoint);
            let running = engine.clone();
            cx.machine.spawn(async move { running.run(port).await });
            (endpoint, engine)
        })
        .collect()
}
