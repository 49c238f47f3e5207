//! Virtual functions in the fabric (PCI Express Base Specification §9, SR-IOV): which
//! endpoints are VFs of which physical function, where their BAR slices are, and which of
//! them exist now.
//!
//! Who owns what:
//! - The device layer declares the capability in the PF's layout
//!   ([`SriovSpec`](crate::SriovSpec)).
//! - Enumeration ([`crate::enumerate`]) reserves the bus numbers of every TotalVFs routing
//!   id (as Linux does) and places each VF BAR as one region of slice × TotalVFs in the
//!   bridge windows above the PF.
//! - [`Fabric::build`] then creates one endpoint per possible VF, after every scenario
//!   endpoint (so no existing endpoint id moves): the PF's host and graph node, the routing
//!   id PF + First VF Offset + (n − 1) · VF Stride, its BAR slices, and the name
//!   `pf.vf<n>`. VF endpoints are in no host's endpoint list: firmware does not see them;
//!   the OS hot-adds them when the PF driver enables SR-IOV.
//! - The PF's configuration space (the device model) holds SR-IOV Control and NumVFs; the
//!   engine copies them here after every configuration write to the PF
//!   ([`Fabric::set_sriov_control`]), and routing obeys them: an access to a VF's slice
//!   reaches the VF only while VF Enable and VF MSE are set and n ≤ NumVFs, else it is an
//!   Unsupported Request; configuration requests to a VF that does not exist read all-ones
//!   ([`Fabric::function_present`]).
//! - A VF is a requester of its own: IOMMU domains and NTB requester-id entries are kept per
//!   endpoint, so they see the VF, not the PF.

use crate::fabric::Fabric;
use crate::ids::EndpointId;
use crate::layout::EndpointLayout;
use crate::spec::ScenarioError;
use crate::topology::Endpoint;
use smartio_platform::SrIovControl;
use thiserror::Error;

pub use crate::functions::{vf_bdf, vf_name, Function, VirtualFunctions};

/// Why the fabric refused an SR-IOV change (an emulator bug in the caller: the engine or a
/// test passed an endpoint that is no PF with SR-IOV, or a NumVFs past TotalVFs).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SriovError {
    /// The endpoint has no SR-IOV capability.
    #[error("{endpoint} has no SR-IOV capability")]
    NotAPhysicalFunction {
        /// The endpoint's name.
        endpoint: String,
    },
    /// NumVFs past TotalVFs (the capability refuses such a write, so a handler never
    /// reports one).
    #[error("{endpoint}: NumVFs {num_vfs} is more than TotalVFs {total_vfs}")]
    TooManyVfs {
        /// The PF's name.
        endpoint: String,
        /// NumVFs reported.
        num_vfs: u16,
        /// TotalVFs.
        total_vfs: u16,
    },
}

impl Fabric {
    /// The virtual functions of `pf`, if it is a PF with the SR-IOV capability.
    pub fn virtual_functions(&self, pf: EndpointId) -> Option<&VirtualFunctions> {
        self.endpoints[pf.index()].sriov.as_ref()
    }

    /// Whether `endpoint` exists as a function now: a PF always, a VF while its PF's VF
    /// Enable is set and its number is at most NumVFs.
    pub fn function_present(&self, endpoint: EndpointId) -> bool {
        match self.endpoints[endpoint.index()].function {
            Function::Physical => true,
            Function::Virtual { pf, n } => self
                .virtual_functions(pf)
                .is_some_and(|v| v.control.vf_exists(n)),
        }
    }

    /// Records what `pf`'s SR-IOV Control and NumVFs hold (the engine calls this after every
    /// configuration write to a PF). Routing to the VFs follows at once.
    pub fn set_sriov_control(
        &mut self,
        pf: EndpointId,
        control: SrIovControl,
    ) -> Result<(), SriovError> {
        let ep = &mut self.endpoints[pf.index()];
        let name = ep.name.clone();
        let Some(v) = ep.sriov.as_mut() else {
            return Err(SriovError::NotAPhysicalFunction { endpoint: name });
        };
        if control.num_vfs > v.spec.total_vfs {
            return Err(SriovError::TooManyVfs {
                endpoint: name,
                num_vfs: control.num_vfs,
                total_vfs: v.spec.total_vfs,
            });
        }
        v.control = control;
        Ok(())
    }

    /// Checks that every VM `devices` entry naming a virtual function (`nic0.vf2`,
    /// `lender:nic0.vf2`) names one its physical function has: its number is at most the
    /// PF's TotalVFs. (The scenario checked the PF exists; the TotalVFs come from the
    /// device's layout, known only now.)
    pub(crate) fn check_vm_functions(&self) -> Result<(), ScenarioError> {
        for h in &self.hosts {
            for vm in &h.vms {
                for (name, loc) in &vm.devices {
                    let Ok(r) = crate::DeviceRef::parse(name) else {
                        continue; // refused when the scenario was parsed
                    };
                    let Some(n) = r.vf else {
                        continue;
                    };
                    let lender = r.lender.as_deref().unwrap_or(&h.name);
                    let total = self
                        .endpoints
                        .iter()
                        .enumerate()
                        .find(|(_, e)| {
                            e.name == r.device
                                && e.function == Function::Physical
                                && self.hosts[e.host.index()].name == lender
                        })
                        .and_then(|(i, _)| self.endpoints[i].sriov.as_ref())
                        .map(|v| v.spec.total_vfs);
                    let why = match total {
                        Some(t) if n <= t => continue,
                        Some(t) => format!(
                            "{lender}'s {} has {t} virtual functions ({} to {})",
                            r.device,
                            vf_name(&r.device, 1),
                            vf_name(&r.device, t)
                        ),
                        None => format!(
                            "{lender}'s {} has no virtual functions (no SR-IOV capability; a \
                             NIC or DMA test device gets them with params.vfs)",
                            r.device
                        ),
                    };
                    return Err(loc.error(format!(
                        "VM {}/{}: devices entry {name:?}: {why}",
                        h.name, vm.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// Creates the VF endpoints of every enumerated PF (all TotalVFs of each), after the
    /// scenario's endpoints.
    pub(crate) fn create_virtual_functions(&mut self) {
        for pf_index in 0..self.endpoints.len() {
            let pf = EndpointId(pf_index as u32);
            let Some(v) = self.endpoints[pf_index].sriov.clone() else {
                continue;
            };
            let mut vfs = Vec::new();
            for n in 1..=v.spec.total_vfs {
                let parent = &self.endpoints[pf_index];
                // Enumeration reserved every routing id, so each one exists.
                let Some(bdf) = vf_bdf(parent.bdf, &v.spec, n) else {
                    continue;
                };
                let layout = EndpointLayout {
                    vendor_id: parent.layout.vendor_id,
                    device_id: v.spec.vf_device_id,
                    class_code: parent.layout.class_code,
                    description: format!("{} (VF)", parent.layout.description),
                    bars: v.spec.vf_bars.clone(),
                    sriov: None,
                };
                let vf = Endpoint {
                    host: parent.host,
                    node: parent.node,
                    name: vf_name(&parent.name, n),
                    kind: parent.kind.clone(),
                    params: toml::Table::new(),
                    fdid: None,
                    layout,
                    bdf,
                    bars: v.slices_of(n),
                    loc: parent.loc.clone(),
                    function: Function::Virtual { pf, n },
                    sriov: None,
                };
                vfs.push(EndpointId(self.endpoints.len() as u32));
                self.endpoints.push(vf);
            }
            if let Some(s) = self.endpoints[pf_index].sriov.as_mut() {
                s.vfs = vfs;
            }
        }
    }
}
