//! How long a large cluster takes to come up: a three-level cascade of 24-port PM8536
//! cluster switches with `hosts` hosts (23 per leaf switch, 23 leaves per middle switch under
//! one top switch), each host an NTB adapter on its root port, and one more host that lends
//! an NVMe — parsed, built (enumeration, address maps, routing tables) and started (timing,
//! devices, SmartIO's view of the fabric) as every command does before it runs anything.

use serde::Serialize;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterError, ClusterOptions};
use smartio_fabric::Fabric;
use std::time::Instant;

/// Hosts a cascade may have, the lender included (the scenario limit).
pub const MAX_HOSTS: u64 = smartio_fabric::spec::limits::MAX_HOSTS;

/// Hosts behind one leaf switch (its 24th port is the uplink).
const PER_SWITCH: u64 = 23;

/// What building the cascade took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopoBenchResult {
    /// Hosts, the lender included.
    pub hosts: u64,
    /// Cluster switches: the top, the middle and the leaf ones.
    pub cluster_switches: u64,
    /// Fabric nodes (root complexes, switch chips, adapters, devices, cluster switches).
    pub nodes: usize,
    /// Wall seconds parsing the scenario text.
    pub parse_seconds: f64,
    /// Wall seconds building the fabric (enumeration, address maps, routing tables).
    pub build_seconds: f64,
    /// Wall seconds starting the cluster (timing, device models).
    pub start_seconds: f64,
    /// Their sum.
    pub total_seconds: f64,
    /// The process's peak resident memory afterwards, in bytes (Linux; `None` elsewhere).
    pub peak_memory_bytes: Option<u64>,
}

/// Why the cascade could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TopoBenchError {
    /// Fewer than two or more than [`MAX_HOSTS`] hosts.
    #[error("--hosts {0}: a cascade has 2 to {MAX_HOSTS} hosts (the lender included)")]
    Hosts(u64),
    /// The generated scenario failed (a bug: the generator writes only valid scenarios).
    #[error("the generated cascade: {0}")]
    Scenario(#[from] ClusterError),
}

/// The cascade's scenario text: `lender` (an NVMe, on leaf0) and `hosts - 1` borrowers.
pub fn cascade_scenario(hosts: u64) -> String {
    let leaves = hosts.div_ceil(PER_SWITCH);
    let mids = leaves.div_ceil(PER_SWITCH);
    let mut out = format!(
        "name = \"cascade-{hosts}\"\ndescription = \"{hosts} hosts under three levels of \
         cluster switches\"\n\n[[cluster_switch]]\nname = \"top\"\nchip = \"PM8536\"\n\
         ports = 24\n"
    );
    for m in 0..mids {
        out += &format!(
            "\n[[cluster_switch]]\nname = \"mid{m}\"\nchip = \"PM8536\"\nuplink = \"top\"\n"
        );
    }
    for l in 0..leaves {
        out += &format!(
            "\n[[cluster_switch]]\nname = \"leaf{l}\"\nchip = \"PM8536\"\nuplink = \"mid{}\"\n",
            l / PER_SWITCH
        );
    }
    let adapter = |leaf: u64| {
        format!(
            "\n[[host.ntb]]\nname = \"ntb0\"\nchip = \"PEX8733\"\nparent = \"root\"\n\
             link = \"gen3 x16\"\nwindow = \"64 GiB\"\nconnect = \"leaf{leaf}\"\n"
        )
    };
    out += "\n[[host]]\nname = \"lender\"\nram = \"32 GiB\"\ncores = 8\n\n[[host.device]]\n\
            name = \"nvme0\"\nkind = \"nvme\"\nparent = \"root\"\nlink = \"gen3 x4\"\n\
            params = { profile = \"optane-p4800x\" }\n";
    out += &adapter(0);
    // Host i (1-based among all) sits on leaf i / 23: the lender is host 0 on leaf0.
    for l in 0..leaves {
        let first = (l * PER_SWITCH).max(1);
        let last = ((l + 1) * PER_SWITCH).min(hosts) - 1;
        if first > last {
            continue;
        }
        out += &format!(
            "\n[[host]]\nname = \"node{{i:05}}\"\nrepeat = [{first}, {last}]\n\
             ram = \"32 GiB\"\ncores = 8\n"
        );
        out += &adapter(l);
    }
    out
}

/// Builds the cascade of `hosts` hosts and times each phase.
pub fn bench_topo(
    calibration: &Calibration,
    hosts: u64,
) -> Result<TopoBenchResult, TopoBenchError> {
    if !(2..=MAX_HOSTS).contains(&hosts) {
        return Err(TopoBenchError::Hosts(hosts));
    }
    let text = cascade_scenario(hosts);
    let t0 = Instant::now();
    let spec = smartio_fabric::parse_scenario(&format!("cascade-{hosts}.toml"), &text)
        .map_err(ClusterError::from)?;
    let t1 = Instant::now();
    let fabric = Fabric::build(&spec, &smartio_devices::layout_for).map_err(ClusterError::from)?;
    let nodes = fabric.nodes().len();
    let t2 = Instant::now();
    let cluster = Cluster::from_fabric(fabric, calibration, &ClusterOptions::default())?;
    let t3 = Instant::now();
    let cluster_switches = (spec.cluster_switches.len()) as u64;
    drop(cluster);
    Ok(TopoBenchResult {
        hosts,
        cluster_switches,
        nodes,
        parse_seconds: (t1 - t0).as_secs_f64(),
        build_seconds: (t2 - t1).as_secs_f64(),
        start_seconds: (t3 - t2).as_secs_f64(),
        total_seconds: (t3 - t0).as_secs_f64(),
        peak_memory_bytes: peak_memory(),
    })
}

/// `VmHWM` of `/proc/self/status`, in bytes.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cascade_has_every_host_once_under_switches_of_24_ports() {
        for hosts in [2, 23, 24, 530, 1000] {
            let spec = smartio_fabric::parse_scenario("c.toml", &cascade_scenario(hosts))
                .expect("a valid scenario");
            let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("builds");
            assert_eq!(fabric.hosts().len() as u64, hosts, "{hosts} hosts");
            let leaves = hosts.div_ceil(23);
            assert_eq!(
                spec.cluster_switches.len() as u64,
                1 + leaves.div_ceil(23) + leaves,
                "{hosts} hosts"
            );
        }
    }

    #[test]
    fn too_few_or_too_many_hosts_are_refused_by_name() {
        let cal = Calibration::default_embedded();
        for hosts in [0, 1, MAX_HOSTS + 1] {
            let e = bench_topo(&cal, hosts).expect_err("refused").to_string();
            assert!(e.starts_with(&format!("--hosts {hosts}: ")), "{e}");
        }
    }
}
