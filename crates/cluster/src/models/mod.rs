//! The device-model registry: for every [`DeviceKind`] the factory that builds its model from
//! the endpoint, the calibration and the command-line options, attaches the model's handlers
//! and starts its engine. The cluster assembly walks this table and knows no kind by name, so
//! a new kind plugs in with one entry here (and its factory).
//!
//! Invariant: models start kind by kind in `REGISTRY` order, and within a kind in fabric
//! endpoint order. Starting spawns the model's engine, and the spawn order is part of what
//! makes a run deterministic — append new kinds at the end, never reorder.

pub mod adapter_dma;
mod copy_engine;
mod gpu;
mod nic;
mod nvme;

pub use gpu::gpu_timing;
pub use nic::{network_timing, nic_timing};
pub use nvme::media_profile;

use crate::ClusterOptions;
use smartio_calibration::Calibration;
use smartio_devices::config::ConfigSpace;
use smartio_devices::dma::DmaDevice;
use smartio_devices::gpu::{Gpu, KernelLibrary};
use smartio_devices::nic::{Network, Nic};
use smartio_devices::nvme::NvmeController;
use smartio_devices::DeviceKind;
use smartio_fabric::{Endpoint, EndpointId};
use smartio_machine::{Agent, Machine};
use std::collections::BTreeMap;
use std::rc::Rc;
use thiserror::Error;

/// Why a device model could not be built: a value of the scenario or the calibration (never
/// an emulator bug). The cluster adds the device's name and scenario line.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The device's `params` in the scenario (the device layer's error, boxed: it is large).
    #[error("{0}")]
    Params(Box<smartio_devices::ParamError>),
    /// The calibration has no such NVMe, GPU or NIC profile (its message lists the known
    /// ones).
    #[error("{0}")]
    Profile(#[from] smartio_calibration::UnknownProfile),
    /// A NIC names an Ethernet segment, but the calibration has no `[network]` to time it.
    #[error(
        "network = {segment:?}: the calibration has no [network] section (switch_hop_ns, \
         wire_propagation_ns) to time Ethernet segments"
    )]
    NoNetwork {
        /// The segment the NIC named.
        segment: String,
    },
    /// The profile's queue-pair count cannot be an NVMe controller's.
    #[error(
        "calibration [nvme.{profile}] queue_pairs = {value}: not a whole number from 2 to 256"
    )]
    QueuePairs {
        /// The `[nvme.*]` profile.
        profile: String,
        /// Its `queue_pairs`.
        value: f64,
    },
    /// The profile's capacity holds no whole logical block.
    #[error(
        "calibration [nvme.{profile}] capacity = {capacity}: smaller than one logical block \
         of lba_size = {lba} (allowed: at least {lba} bytes)"
    )]
    Capacity {
        /// The `[nvme.*]` profile.
        profile: String,
        /// Its `capacity` in bytes.
        capacity: f64,
        /// The namespace's logical block size.
        lba: u64,
    },
    /// The namespace backing file cannot be used (the OS's message, with the path).
    #[error(transparent)]
    Backing(#[from] smartio_devices::nvme::BackingError),
}

/// A device model attached to an endpoint.
#[derive(Debug, Clone)]
pub enum DeviceModel {
    /// A copy engine: the DMA test device.
    CopyEngine(Rc<DmaDevice>),
    /// An NVMe controller.
    Nvme(Rc<NvmeController>),
    /// A GPU.
    Gpu(Rc<Gpu<Agent>>),
    /// A NIC.
    Nic(Rc<Nic<Agent>>),
}

impl DeviceModel {
    /// The copy engine, if this model is one.
    pub fn copy_engine(&self) -> Option<&Rc<DmaDevice>> {
        match self {
            DeviceModel::CopyEngine(d) => Some(d),
            DeviceModel::Nvme(_) | DeviceModel::Gpu(_) | DeviceModel::Nic(_) => None,
        }
    }

    /// The NVMe controller, if this model is one.
    pub fn nvme(&self) -> Option<&Rc<NvmeController>> {
        match self {
            DeviceModel::Nvme(c) => Some(c),
            DeviceModel::CopyEngine(_) | DeviceModel::Gpu(_) | DeviceModel::Nic(_) => None,
        }
    }

    /// The GPU, if this model is one.
    pub fn gpu(&self) -> Option<&Rc<Gpu<Agent>>> {
        match self {
            DeviceModel::Gpu(g) => Some(g),
            DeviceModel::CopyEngine(_) | DeviceModel::Nvme(_) | DeviceModel::Nic(_) => None,
        }
    }

    /// The NIC, if this model is one.
    pub fn nic(&self) -> Option<&Rc<Nic<Agent>>> {
        match self {
            DeviceModel::Nic(n) => Some(n),
            DeviceModel::CopyEngine(_) | DeviceModel::Nvme(_) | DeviceModel::Gpu(_) => None,
        }
    }

    /// The models of the VFs of PF `ep` by VF endpoint (a VF's own view of its PF's model:
    /// the DMA test device's VF copy engines); empty for a model without VFs.
    fn virtual_functions(&self, ep: &Endpoint) -> Vec<(EndpointId, DeviceModel)> {
        let (Some(v), DeviceModel::CopyEngine(d)) = (&ep.sriov, self) else {
            return Vec::new();
        };
        v.vfs
            .iter()
            .zip(1..)
            .filter_map(|(&vf, n)| {
                let engine = d.virtual_function(n)?;
                Some((vf, DeviceModel::CopyEngine(engine.clone())))
            })
            .collect()
    }

    /// Whether the model answers configuration requests itself (else the endpoint gets a
    /// configuration space built from its layout).
    fn has_config_space(&self) -> bool {
        matches!(
            self,
            DeviceModel::Nvme(_) | DeviceModel::Gpu(_) | DeviceModel::Nic(_)
        )
    }
}

/// A model attached to its endpoint.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// Its kind.
    pub kind: DeviceKind,
    /// The model.
    pub model: DeviceModel,
}

/// What a factory builds a model from.
pub struct ModelContext<'a> {
    /// The machine the model joins.
    pub machine: &'a Machine,
    /// The calibration in force.
    pub calibration: &'a Calibration,
    /// Command-line choices.
    pub options: &'a ClusterOptions,
    /// The kernels every GPU of the cluster launches.
    pub gpu_kernels: &'a Rc<KernelLibrary<Agent>>,
    /// The Ethernet segments every NIC's port may join (`None` when the calibration has no
    /// `[network]`).
    pub network: Option<&'a Rc<Network>>,
}

/// Builds a kind's model for `endpoint` (described by `ep`, named `host.device` by `name`),
/// attaches its handlers and spawns its engine.
type Factory = fn(
    &ModelContext<'_>,
    DeviceKind,
    EndpointId,
    &Endpoint,
    &str,
) -> Result<DeviceModel, ModelError>;

/// Every kind's factory, in start order (see the module's invariant).
const REGISTRY: [(DeviceKind, Factory); 4] = [
    (DeviceKind::Dma, copy_engine::start),
    (DeviceKind::Gpu, gpu::start),
    (DeviceKind::Nvme, nvme::start),
    (DeviceKind::Nic, nic::start),
];

/// A model that could not be started: the device (`host.device`) and why.
#[derive(Debug)]
pub(crate) struct StartError {
    pub device: String,
    pub error: ModelError,
}

/// The models attached to a cluster's endpoints, keyed by endpoint.
pub(crate) type Models = BTreeMap<EndpointId, Attached>;

/// Starts a model on every endpoint whose kind the registry knows, then gives every other
/// endpoint a configuration space from its layout. On an error the models already started
/// stay attached (the caller shuts the simulation down).
/// The configuration spaces of SR-IOV device `pf` (layout `ep`) and of its VFs, attached to
/// their endpoints (the PF's reports VF Enable to the engine); every function gets MSI-X
/// `msix`. A device whose layout declares SR-IOV always fits its capabilities (PCI Express,
/// MSI-X, SR-IOV): anything else is an emulator bug.
pub(super) fn attach_sriov_config(
    cx: &ModelContext<'_>,
    pf: EndpointId,
    ep: &Endpoint,
    msix: Option<smartio_devices::config::MsixLayout>,
) -> Rc<smartio_devices::config::SrIovFunctions> {
    use smartio_devices::config::{PfConfig, SrIovFunctions, VfConfig};
    let vfs: Vec<(u16, EndpointId)> = cx
        .machine
        .functions(pf)
        .into_iter()
        .filter_map(|(function, vf)| Some((function.vf_number()?, vf)))
        .collect();
    let functions = {
        let f = cx.machine.fabric();
        let refs: Vec<&Endpoint> = vfs.iter().map(|&(_, v)| f.endpoint(v)).collect();
        match SrIovFunctions::new(ep, msix, &refs, msix) {
            Ok(Some(functions)) => Rc::new(functions),
            Ok(None) => unreachable!("{}: an SR-IOV layout without SR-IOV", ep.name),
            Err(e) => unreachable!("{}: its capabilities do not fit: {e}", ep.name),
        }
    };
    cx.machine
        .attach_config_handler(pf, Rc::new(PfConfig(functions.clone())));
    for (n, vf) in vfs {
        cx.machine
            .attach_config_handler(vf, Rc::new(VfConfig::new(functions.clone(), n)));
    }
    functions
}

pub(crate) fn start_all(cx: &ModelContext<'_>) -> Result<Models, StartError> {
    let endpoints: Vec<(EndpointId, Endpoint, String)> = {
        let fabric = cx.machine.fabric();
        fabric
            .endpoints()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let name = format!("{}.{}", fabric.host(e.host).name, e.name);
                (EndpointId(i as u32), e.clone(), name)
            })
            .collect()
    };
    let mut models = Models::new();
    for (kind, factory) in REGISTRY {
        for (id, ep, name) in &endpoints {
            // A VF is served by its PF's model, which attaches its handlers.
            if DeviceKind::of(ep) != Some(kind) || ep.is_virtual() {
                continue;
            }
            let model = factory(cx, kind, *id, ep, name).map_err(|error| StartError {
                device: name.clone(),
                error,
            })?;
            for (vf, vf_model) in model.virtual_functions(ep) {
                models.insert(
                    vf,
                    Attached {
                        endpoint: vf,
                        kind,
                        model: vf_model,
                    },
                );
            }
            models.insert(
                *id,
                Attached {
                    endpoint: *id,
                    kind,
                    model,
                },
            );
        }
    }
    for (id, ep, _) in &endpoints {
        // A PF with SR-IOV and its VFs got their configuration spaces from their model.
        let own = ep.sriov.is_some() || ep.is_virtual();
        if own || models.get(id).is_some_and(|a| a.model.has_config_space()) {
            continue;
        }
        cx.machine
            .attach_config_handler(*id, Rc::new(ConfigSpace::new(&ep.layout, &ep.bars, None)));
    }
    Ok(models)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_exactly_one_factory() {
        for kind in DeviceKind::ALL {
            let entries = REGISTRY.iter().filter(|(k, _)| *k == kind).count();
            assert_eq!(entries, 1, "{kind}");
        }
    }
}
