//! A cluster with every host booted and SmartIO registering every function: the set-up of
//! the GPU runtime and NIC driver tests, and a way to run one task to the end of the
//! simulation. Each test binary uses only part of it.
#![allow(dead_code)]

use smartio_cluster::Cluster;
use smartio_host::HostOs;
use smartio_smartio::SmartIo;
use std::future::Future;

/// The cluster, its booted hosts and SmartIO.
pub struct Rig {
    pub cluster: Cluster,
    pub hosts: Vec<HostOs>,
    pub smartio: SmartIo,
}

impl Rig {
    /// Boots every host of `cluster` and registers every function with SmartIO.
    pub fn new(cluster: Cluster) -> Rig {
        let hosts = HostOs::boot_all(&cluster.machine).expect("hosts boot");
        let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
        smartio.register_all().expect("devices register");
        Rig {
            cluster,
            hosts,
            smartio,
        }
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> HostOs {
        self.hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// Runs `task` to the end of the simulation and returns its output.
    pub fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        self.cluster
            .machine
            .run_task(task)
            .expect("the test task ran to the end")
    }
}
