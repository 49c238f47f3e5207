//! What the layout's modules share: the picture's margin, the ids SmartIO's registry gave the
//! devices, the devices the scenario passes through to VMs (and those a running cluster's
//! hosts borrow), and a line drawn under the boxes.
//! A leaf that takes only the geometry, so the layout, the host drawings, the grid and the
//! cluster switches all take from it and none takes from another in a loop.

use super::geometry::{Course, Layer, Line, LineKind};
use smartio_fabric::{EndpointId, Fabric, HostId};
use std::collections::BTreeMap;

/// Around the whole picture.
pub const MARGIN: i64 = 16;

/// The fdid SmartIO's registry gave each device, by lender and device name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceIds(BTreeMap<(String, String), u32>);

impl DeviceIds {
    /// From `(lender, device, fdid)` triples.
    pub fn new(entries: impl IntoIterator<Item = (String, String, u32)>) -> DeviceIds {
        DeviceIds(
            entries
                .into_iter()
                .map(|(host, device, fdid)| ((host, device), fdid))
                .collect(),
        )
    }

    /// The fdid of `device` of `host`, if it is registered.
    pub fn get(&self, host: &str, device: &str) -> Option<u32> {
        self.0.get(&(host.to_string(), device.to_string())).copied()
    }
}

/// A device the scenario passes through to a VM (`[[host.vm]] devices`), or one a running
/// cluster's host borrows ([`borrowings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lending {
    pub device: EndpointId,
    pub lender: HostId,
    /// The VM's host, or the borrowing host.
    pub borrower: HostId,
    /// The VM, an index into its host's VMs; `None`: the host itself (its programs).
    pub vm: Option<usize>,
    /// [`LineKind::Mdev`] (`lender:device`), [`LineKind::Vfio`] (a device of its own host)
    /// or [`LineKind::Borrow`] (borrowed by a host's programs).
    pub kind: LineKind,
}

/// Every device the scenario's VMs are given, in host, VM and entry order (entries naming
/// nothing the fabric has are left out: the scenario's validation refuses them anyway).
pub fn lendings(fabric: &Fabric) -> Vec<Lending> {
    let mut out = Vec::new();
    for (hi, h) in fabric.hosts().iter().enumerate() {
        let borrower = HostId(u32::try_from(hi).unwrap_or(u32::MAX));
        for (vm, v) in h.vms.iter().enumerate() {
            for (entry, _) in &v.devices {
                let (lender, device, kind) = match entry.split_once(':') {
                    Some((lender, device)) => (lender, device, LineKind::Mdev),
                    None => (h.name.as_str(), entry.as_str(), LineKind::Vfio),
                };
                let Some(lender) = fabric.host_by_name(lender) else {
                    continue;
                };
                let Some(device) = fabric
                    .endpoints()
                    .iter()
                    .position(|e| e.host == lender && e.name == device)
                else {
                    continue;
                };
                out.push(Lending {
                    device: EndpointId(u32::try_from(device).unwrap_or(u32::MAX)),
                    lender,
                    borrower,
                    vm: Some(vm),
                    kind,
                });
            }
        }
    }
    out
}

/// The endpoint `device` of host `lender`, if the fabric has it.
fn endpoint_of(fabric: &Fabric, lender: HostId, device: &str) -> Option<EndpointId> {
    fabric
        .endpoints()
        .iter()
        .position(|e| e.host == lender && e.name == device)
        .and_then(|i| u32::try_from(i).ok())
        .map(EndpointId)
}

/// The lendings of a running cluster: each `(device, borrower)` pair, the device as
/// `lender:device` and the borrower as `host` (its programs: [`LineKind::Borrow`]) or
/// `host/vm` (a VM of it: [`LineKind::Mdev`]), as the daemon's figures name them. Pairs naming
/// nothing the fabric has are left out.
pub fn borrowings(fabric: &Fabric, borrowed: &[(String, String)]) -> Vec<Lending> {
    let mut out = Vec::new();
    for (device, borrower) in borrowed {
        let Some((lender, name)) = device.split_once(':') else {
            continue;
        };
        let Some(lender) = fabric.host_by_name(lender) else {
            continue;
        };
        let Some(device) = endpoint_of(fabric, lender, name) else {
            continue;
        };
        let (host, vm) = match borrower.split_once('/') {
            Some((host, vm)) => (host, Some(vm)),
            None => (borrower.as_str(), None),
        };
        let Some(borrower) = fabric.host_by_name(host) else {
            continue;
        };
        let vm = vm.and_then(|vm| fabric.host(borrower).vms.iter().position(|v| v.name == vm));
        out.push(Lending {
            device,
            lender,
            borrower,
            vm,
            kind: if vm.is_some() {
                LineKind::Mdev
            } else {
                LineKind::Borrow
            },
        });
    }
    out
}

/// A line of `kind` along `course`, drawn under the boxes.
pub fn under_line(kind: LineKind, course: Course) -> Line {
    Line {
        kind,
        layer: Layer::Under,
        course,
        arrow: false,
        lending: None,
    }
}

/// What a lending's lines are marked with: the device (`lender:device`) and its borrower
/// (`host`, or `host/vm`).
pub fn lending_names(fabric: &Fabric, l: &Lending) -> (String, String) {
    let e = fabric.endpoint(l.device);
    let host = &fabric.host(l.borrower).name;
    let borrower = match l.vm.and_then(|vm| fabric.host(l.borrower).vms.get(vm)) {
        Some(vm) => format!("{host}/{}", vm.name),
        None => host.clone(),
    };
    (
        format!("{}:{}", fabric.host(l.lender).name, e.name),
        borrower,
    )
}
