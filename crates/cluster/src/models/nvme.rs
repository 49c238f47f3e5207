//! The NVMe controller factory: parameters from the scenario (`params`), the media profile
//! and defaults from the calibration's `[nvme.*]`, the namespace backing from the scenario or
//! [`ClusterOptions`](crate::ClusterOptions). The controller answers configuration requests
//! itself (its MSI-X table sized by its queue pairs).

use super::{DeviceModel, ModelContext, ModelError};
use smartio_calibration::Calibration;
use smartio_devices::config::ConfigSpace;
use smartio_devices::nvme::{MediaProfile, NamespaceStore, NvmeConfig, NvmeController, NvmeParams};
use smartio_devices::DeviceKind;
use smartio_fabric::{Endpoint, EndpointId};
use smartio_platform::{Cause, SimDuration, Spread, Stream};
use std::rc::Rc;

/// The media profile of calibration profile `name`.
pub fn media_profile(calibration: &Calibration, name: &str) -> Result<MediaProfile, ModelError> {
    let p = calibration.nvme_profile(name)?;
    let ns = |p: &smartio_calibration::Param| SimDuration::from_ns_f64(p.value);
    Ok(MediaProfile {
        name: name.to_string(),
        read_latency: Spread {
            typical: ns(&p.read_latency_ns),
            p99: ns(&p.read_latency_p99_ns),
        },
        write_latency: Spread {
            typical: ns(&p.write_latency_ns),
            p99: ns(&p.write_latency_p99_ns),
        },
        flush_latency: ns(&p.flush_latency_ns),
        max_read_iops: p.max_read_iops.value,
        max_write_iops: p.max_write_iops.value,
        read_bandwidth: p.read_bandwidth.value,
        write_bandwidth: p.write_bandwidth.value,
        // In range: the calibration admits only whole numbers from 1 to 4096.
        parallel_units: p.parallel_units.value as u32,
    })
}

/// Builds the NVMe controller of `id` (named `host.device` by `name`), attaches its BAR and
/// configuration handlers and spawns it.
pub(super) fn start(
    cx: &ModelContext<'_>,
    _kind: DeviceKind,
    id: EndpointId,
    ep: &Endpoint,
    name: &str,
) -> Result<DeviceModel, ModelError> {
    let calibration = cx.calibration;
    let params = NvmeParams::parse(&ep.params).map_err(|e| ModelError::Params(Box::new(e)))?;
    let profile = media_profile(calibration, &params.profile)?;
    let cal = calibration.nvme_profile(&params.profile)?;
    // The calibration admits only whole numbers from 2 to 256 (the controller's MSI-X
    // table holds 256 vectors), so the conversion is exact for any parsed calibration.
    let queue_pairs = match params.queues {
        Some(q) => q,
        None => {
            let v = cal.queue_pairs.value;
            if !(v.fract() == 0.0 && (2.0..=256.0).contains(&v)) {
                return Err(ModelError::QueuePairs {
                    profile: params.profile.clone(),
                    value: v,
                });
            }
            v as u16
        }
    };
    let lba = u64::from(params.lba_size);
    // The profile's capacity (whole 512-byte sectors up to 1 PiB after validation, so the
    // cast is exact) in whole logical blocks: with 4 KiB blocks the last partial block
    // of a profile is not addressable, as on a drive formatted that way.
    let capacity = match params.capacity {
        Some(c) => c,
        None => {
            let c = (cal.capacity.value as u64) / lba * lba;
            if c == 0 {
                return Err(ModelError::Capacity {
                    profile: params.profile.clone(),
                    capacity: cal.capacity.value,
                    lba,
                });
            }
            c
        }
    };
    let backing = cx
        .options
        .nvme_backing
        .iter()
        .find(|(d, _)| *d == name)
        .map(|(_, p)| p.clone())
        .or(params.backing.clone());
    let store = match backing {
        Some(path) => NamespaceStore::file(&path, params.namespaces, capacity)?,
        None => NamespaceStore::sparse(params.namespaces, capacity),
    };
    let pci = Rc::new(ConfigSpace::new(
        &ep.layout,
        &ep.bars,
        Some(NvmeController::msix_layout(queue_pairs)),
    ));
    let config = NvmeConfig {
        profile,
        queue_pairs,
        namespaces: params.namespaces,
        capacity,
        lba_size: params.lba_size,
        cmb_size: params.cmb,
        ready_delay: SimDuration::from_ns_f64(cal.ready_delay_ns.value),
        serial: format!("SMARTIO{:04}", id.0),
        vendor_id: ep.layout.vendor_id,
        media_stream: Stream::new(cx.options.seed, Cause::Media, u64::from(id.0)),
    };
    let controller = Rc::new(NvmeController::new(config, store, pci.clone()));
    cx.machine.attach_bar_handler(id, controller.clone());
    cx.machine.attach_config_handler(id, pci);
    let port = cx.machine.device(id);
    cx.machine.spawn(controller.clone().run(port));
    Ok(DeviceModel::Nvme(controller))
}
