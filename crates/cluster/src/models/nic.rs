//! The NIC factory: parameters from the scenario (`params.profile`, `mtu`, `network`, `mac`),
//! costs from the calibration's `[nic.*]` profile, and the port put on its Ethernet segment
//! of the cluster's one [`Network`] (built from `[network]`). Without SR-IOV the NIC has its
//! physical function, which answers configuration requests itself (an MSI-X vector per queue
//! pair) and DMAs through its endpoint's own port. With `params.vfs` the NIC is one model
//! serving its PF and every VF: the configuration spaces of all of them (`SrIovFunctions`:
//! the PF's handler reports VF Enable to the engine), one [`NicFunction`] per function — its
//! own MAC address, queues and MSI-X table — attached to the function's endpoint, its engines
//! running on that endpoint's port (its DMA carries the function's requester id); the
//! internal switch forwards between all of them by MAC address.

use super::{DeviceModel, ModelContext, ModelError};
use smartio_calibration::{NetworkParams, NicProfileParams};
use smartio_devices::config::{ConfigSpace, FunctionSpace};
use smartio_devices::nic::spec::default_mac;
use smartio_devices::nic::{
    Network, NetworkTiming, Nic, NicConfig, NicFunction, NicParams, NicTiming,
};
use smartio_devices::DeviceKind;
use smartio_fabric::{Endpoint, EndpointId};
use smartio_platform::SimDuration;
use std::rc::Rc;

/// The timing of calibration profile `p`. The calibration admits only whole numbers from 1
/// to 256 (`fetch_batch`) and 1 to 64 (`tx_pipeline`), and a finite positive line rate, so
/// every conversion is exact.
pub fn nic_timing(p: &NicProfileParams) -> NicTiming {
    NicTiming {
        line_rate_bps: p.line_rate_gbps.value * 1e9,
        per_frame: SimDuration::from_ns_f64(p.per_frame_ns.value),
        eswitch: SimDuration::from_ns_f64(p.eswitch_ns.value),
        fetch_batch: p.fetch_batch.value as u64,
        tx_pipeline: p.tx_pipeline.value as usize,
    }
}

/// The timing of the calibration's `[network]`.
pub fn network_timing(p: &NetworkParams) -> NetworkTiming {
    NetworkTiming {
        hop_latency: SimDuration::from_ns_f64(p.switch_hop_ns.value),
        propagation: SimDuration::from_ns_f64(p.wire_propagation_ns.value),
    }
}

/// Builds the NIC of `id`, puts its port on its segment, attaches its physical function's
/// BAR and configuration handlers and spawns it.
pub(super) fn start(
    cx: &ModelContext<'_>,
    _kind: DeviceKind,
    id: EndpointId,
    ep: &Endpoint,
    _name: &str,
) -> Result<DeviceModel, ModelError> {
    let params = NicParams::parse(&ep.params).map_err(|e| ModelError::Params(Box::new(e)))?;
    let profile = cx.calibration.nic_profile(&params.profile)?;
    let network: Option<&Rc<Network>> = match &params.network {
        None => None,
        Some(segment) => Some(cx.network.ok_or_else(|| ModelError::NoNetwork {
            segment: segment.clone(),
        })?),
    };
    let nic = Rc::new(Nic::new(NicConfig {
        mtu: params.mtu,
        timing: nic_timing(profile),
    }));
    let pf_mac = params.mac.unwrap_or(default_mac(id.0, 0));
    let vfs: Vec<EndpointId> = ep.sriov.as_ref().map_or(Vec::new(), |v| v.vfs.clone());
    if vfs.is_empty() {
        let pci = Rc::new(ConfigSpace::new(
            &ep.layout,
            &ep.bars,
            Some(NicFunction::msix_layout()),
        ));
        let pf = nic.add_function(pf_mac, FunctionSpace::Own(pci.clone()));
        cx.machine.attach_bar_handler(id, pf);
        cx.machine.attach_config_handler(id, pci);
    } else {
        add_virtual_functions(cx, &nic, id, ep, pf_mac);
    }
    if let (Some(network), Some(segment)) = (network, &params.network) {
        network.attach(segment, nic.port());
    }
    let port = cx.machine.device(id);
    cx.machine.spawn(nic.clone().run(port));
    for (function, vf) in cx.machine.functions(id) {
        if let Some(n) = function.vf_number() {
            nic.start_function(usize::from(n), cx.machine.device(vf));
        }
    }
    Ok(DeviceModel::Nic(nic))
}

/// The PF and every VF of an SR-IOV NIC: their configuration spaces, one function each
/// (VF `n` is function `n`, with the address `default_mac(pf, n)`), attached to their
/// endpoints.
fn add_virtual_functions(
    cx: &ModelContext<'_>,
    nic: &Rc<Nic<smartio_machine::Agent>>,
    pf: EndpointId,
    ep: &Endpoint,
    pf_mac: smartio_devices::ethernet::MacAddr,
) {
    let functions = super::attach_sriov_config(cx, pf, ep, Some(NicFunction::msix_layout()));
    let physical = nic.add_function(pf_mac, FunctionSpace::Physical(functions.clone()));
    cx.machine.attach_bar_handler(pf, physical);
    for (function, vf) in cx.machine.functions(pf) {
        let Some(n) = function.vf_number() else {
            continue;
        };
        let f = nic.add_function(
            default_mac(pf.0, n),
            FunctionSpace::Virtual(functions.clone(), n),
        );
        cx.machine.attach_bar_handler(vf, f);
    }
}
