//! The first host, device and other names an experiment needs, read from the scenario.

use smartio_cluster::DeviceKind;
use smartio_fabric::Fabric;

/// `(host, device)` of the first endpoint of `kind`, optionally only in host `in_host`.
pub fn first_device(
    f: &Fabric,
    kind: DeviceKind,
    in_host: Option<&str>,
) -> Option<(String, String)> {
    f.endpoints().iter().find_map(|ep| {
        let host = &f.host(ep.host).name;
        (DeviceKind::of(ep) == Some(kind) && in_host.is_none_or(|h| h == host))
            .then(|| (host.clone(), ep.name.clone()))
    })
}

/// The first host but `except`, in scenario order, with two cabled NTB adapters.
pub fn host_with_two_paths(f: &Fabric, except: &str) -> Option<String> {
    f.hosts().iter().enumerate().find_map(|(i, h)| {
        let id = smartio_fabric::HostId(u32::try_from(i).ok()?);
        let cabled = |n| {
            f.host_adapter(id, n)
                .is_some_and(|a| f.adapter(a).cable.is_some())
        };
        (h.name != except && cabled(0) && cabled(1)).then(|| h.name.clone())
    })
}

/// `(host, first, second)`: the first host with two endpoints of `kind`, and their names.
pub fn device_pair(f: &Fabric, kind: DeviceKind) -> Option<(String, String, String)> {
    f.hosts().iter().find_map(|h| {
        let mut of_kind = f
            .endpoints()
            .iter()
            .filter(|ep| f.host(ep.host).name == h.name && DeviceKind::of(ep) == Some(kind));
        let (a, b) = (of_kind.next()?, of_kind.next()?);
        Some((h.name.clone(), a.name.clone(), b.name.clone()))
    })
}

/// The first VM `host` declares.
pub fn first_vm(f: &Fabric, host: &str) -> Option<String> {
    f.hosts()
        .iter()
        .find(|h| h.name == host)?
        .vms
        .first()
        .map(|v| v.name.clone())
}

/// `(host, vm)`: the first host but `except` that declares a VM, and its first VM.
pub fn other_host_with_vm(f: &Fabric, except: &str) -> Option<(String, String)> {
    f.hosts().iter().find_map(|h| {
        let vm = h.vms.first()?;
        (h.name != except).then(|| (h.name.clone(), vm.name.clone()))
    })
}

/// Every host name but `except`, in scenario order.
pub fn other_hosts(f: &Fabric, except: &str) -> Vec<String> {
    f.hosts()
        .iter()
        .map(|h| h.name.clone())
        .filter(|h| h != except)
        .collect()
}
