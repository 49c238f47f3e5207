//! The host a command runs on when its options name none: the scenario's first host, or the
//! one host that has the device named.

use crate::usage::Usage;
use smartio_cluster::Cluster;

/// The scenario's first host (where commands run when no host is named).
pub fn first_host(cluster: &Cluster) -> Result<String, Usage> {
    cluster
        .machine
        .fabric()
        .hosts()
        .first()
        .map(|h| h.name.clone())
        .ok_or(Usage::NoHost)
}

/// The one host of the scenario that has a device named `device`; refused when none or
/// several have one.
pub fn host_of_device(cluster: &Cluster, device: &str) -> Result<String, Usage> {
    let fabric = cluster.machine.fabric();
    let owners: Vec<&str> = fabric
        .endpoints()
        .iter()
        .filter(|e| e.name == device)
        .map(|e| fabric.host(e.host).name.as_str())
        .collect();
    match owners.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(Usage::NoOwner {
            device: device.into(),
        }),
        many => Err(Usage::SeveralOwners {
            device: device.into(),
            owners: many.iter().map(|h| h.to_string()).collect(),
        }),
    }
}
