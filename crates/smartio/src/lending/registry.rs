//! The device registry: lenders register their functions, each gets a cluster-wide id
//! ([`Fdid`]), and any host lists them, finds one by `lender:device` or reads the faults a
//! device caused. Registration takes no resources; borrowing does (`borrow`).

use super::borrow::Borrow;
use super::{SmartIo, SmartIoError};
use serde::Serialize;
use smartio_fabric::{EndpointId, HostId};
use smartio_host::PciId;
use smartio_machine::FaultRecord;
use smartio_platform::AccessError;
use std::fmt;

/// A cluster-wide device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Fdid(pub u32);

impl fmt::Display for Fdid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a device is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharingMethod {
    /// Hot-added into the borrower as a shadow device (exclusive).
    DeviceLending,
    /// Held by a program through the device API (exclusive or shared).
    Api,
    /// Passed through to a VM by the MDEV parent (exclusive).
    Mdev,
}

impl SharingMethod {
    /// The name shown in listings.
    pub fn name(self) -> &'static str {
        match self {
            SharingMethod::DeviceLending => "device-lending",
            SharingMethod::Api => "api",
            SharingMethod::Mdev => "mdev",
        }
    }
}

/// A host using a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BorrowerInfo {
    /// The borrowing host.
    pub host: String,
    /// How.
    pub method: SharingMethod,
    /// Whether no one else may use the device.
    pub exclusive: bool,
    /// The shadow device's name in the borrower's tree.
    pub shadow: String,
}

/// A registered device, as any host lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// Cluster-wide id.
    pub fdid: Fdid,
    /// The lender.
    pub lender: String,
    /// Name in the lender's tree.
    pub device: String,
    /// Device kind (`nvme`, `gpu`, `dma`).
    pub kind: String,
    /// What the class code says.
    pub class: String,
    /// The 24-bit class code.
    pub class_code: u32,
    /// Who uses it (empty: available).
    pub borrowers: Vec<BorrowerInfo>,
    /// VMs it is assigned to for pass-through (`host/vm`), borrowed or not yet.
    pub assigned: Vec<String>,
}

impl DeviceInfo {
    /// `lender:device`.
    pub fn qualified(&self) -> String {
        format!("{}:{}", self.lender, self.device)
    }
}

#[derive(Debug)]
pub(super) struct Registered {
    pub(super) lender: HostId,
    pub(super) endpoint: EndpointId,
    pub(super) name: String,
    pub(super) qualified: String,
    pub(super) id: PciId,
    pub(super) kind: String,
    pub(super) class: String,
    pub(super) borrow: Option<Borrow>,
    /// A VM's borrow through the MDEV parent.
    pub(super) mdev: Option<super::mdev::MdevBorrow>,
    /// VMs the device is assigned to (`host/vm`), borrowed or not.
    pub(super) assigned: Vec<String>,
}

impl SmartIo {
    /// Registers `device` of `lender` for sharing.
    pub fn register(&self, lender: HostId, device: &str) -> Result<Fdid, SmartIoError> {
        self.inner.check_host(lender)?;
        let os = self.host(lender);
        let handle = os.device(device)?;
        let endpoint = os
            .endpoint_of(device)
            .ok_or_else(|| SmartIoError::UnknownDevice {
                spec: format!("{}:{device}", os.name()),
                why: "only functions installed in the lender can be registered".into(),
            })?;
        let (kind, class, chosen, reserved) = {
            let f = self.inner.machine.fabric();
            let ep = f.endpoint(endpoint);
            // The fdids the scenario gives devices are theirs: the numbering skips them.
            let reserved: Vec<u32> = f.endpoints().iter().filter_map(|e| e.fdid).collect();
            (
                ep.kind.clone(),
                ep.layout.description.clone(),
                ep.fdid,
                reserved,
            )
        };
        let qualified = format!("{}:{device}", os.name());
        let mut st = self.inner.state.borrow_mut();
        if let Some((&fdid, _)) = st
            .devices
            .iter()
            .find(|(_, d)| d.lender == lender && d.endpoint == endpoint)
        {
            return Err(SmartIoError::AlreadyRegistered {
                device: qualified,
                fdid,
            });
        }
        let fdid = match chosen {
            Some(chosen) => Fdid(chosen),
            None => {
                while reserved.contains(&st.next) || st.devices.contains_key(&Fdid(st.next)) {
                    st.next += 1;
                }
                st.next += 1;
                Fdid(st.next - 1)
            }
        };
        st.devices.insert(
            fdid,
            Registered {
                lender,
                endpoint,
                name: device.to_string(),
                qualified,
                id: handle.id(),
                kind,
                class,
                borrow: None,
                mdev: None,
                assigned: Vec::new(),
            },
        );
        Ok(fdid)
    }

    /// Registers every function of every host except the NTB adapters, in host and tree
    /// order.
    pub fn register_all(&self) -> Result<Vec<Fdid>, SmartIoError> {
        let mut out = Vec::new();
        for os in &self.inner.hosts {
            for d in os.devices() {
                let Some(ep) = os.endpoint_of(d.name()) else {
                    continue;
                };
                if self.inner.machine.fabric().endpoint(ep).kind == "ntb" {
                    continue;
                }
                out.push(self.register(os.id(), d.name())?);
            }
        }
        Ok(out)
    }

    /// Every registered device, by fdid.
    pub fn devices(&self) -> Vec<DeviceInfo> {
        let st = self.inner.state.borrow();
        st.devices
            .iter()
            .map(|(&fdid, d)| DeviceInfo {
                fdid,
                lender: self.host(d.lender).name().to_string(),
                device: d.name.clone(),
                kind: d.kind.clone(),
                class: d.class.clone(),
                class_code: d.id.class,
                borrowers: d
                    .borrow
                    .iter()
                    .map(|b| BorrowerInfo {
                        host: self.host(b.borrower).name().to_string(),
                        method: SharingMethod::DeviceLending,
                        exclusive: true,
                        shadow: b.shadow.clone(),
                    })
                    .chain(d.mdev.iter().map(|m| BorrowerInfo {
                        host: m.vm.clone(),
                        method: SharingMethod::Mdev,
                        exclusive: true,
                        shadow: String::new(),
                    }))
                    .chain(st.api.holders(fdid).map(|h| BorrowerInfo {
                        host: self.host(h.host).name().to_string(),
                        method: SharingMethod::Api,
                        exclusive: h.exclusive,
                        shadow: String::new(),
                    }))
                    .collect(),
                assigned: d.assigned.clone(),
            })
            .collect()
    }

    /// The fdid of `lender:device`.
    pub fn find(&self, spec: &str) -> Result<Fdid, SmartIoError> {
        let unknown = |why: String| SmartIoError::UnknownDevice {
            spec: spec.to_string(),
            why,
        };
        let (host, device) = spec
            .split_once(':')
            .ok_or_else(|| unknown("write it as lender:device".into()))?;
        let lender = self.host_by_name(host)?;
        let st = self.inner.state.borrow();
        st.devices
            .iter()
            .find(|(_, d)| d.lender == lender && d.name == device)
            .map(|(&f, _)| f)
            .ok_or_else(|| {
                let known: Vec<_> = st
                    .devices
                    .values()
                    .filter(|d| d.lender == lender)
                    .map(|d| d.name.as_str())
                    .collect();
                unknown(format!("{host} lends: {}", known.join(", ")))
            })
    }

    /// Faults the device caused in its lender's fabric (IOMMU faults, unsupported requests).
    pub fn device_faults(&self, fdid: Fdid) -> Result<Vec<FaultRecord>, SmartIoError> {
        let (host, device) = {
            let st = self.inner.state.borrow();
            let d = st
                .devices
                .get(&fdid)
                .ok_or(SmartIoError::UnknownFdid(fdid))?;
            (self.host(d.lender).name().to_string(), d.name.clone())
        };
        Ok(self
            .inner
            .machine
            .faults()
            .into_iter()
            .filter(|f| match &f.error {
                AccessError::IommuFault {
                    host: h, requester, ..
                } => *h == host && *requester == device,
                _ => false,
            })
            .collect())
    }
}
