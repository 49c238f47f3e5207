//! Where the device-API workloads start — every host booted, SmartIO over them with every
//! function registered, the device resolved — and how a workload's task is run to its end.

use smartio_cluster::Cluster;
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_smartio::{Fdid, SmartIo};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

/// A cluster with its hosts booted and SmartIO started.
pub(crate) struct Booted {
    /// Every host, in scenario order.
    pub hosts: Vec<HostOs>,
    /// SmartIO over them, every lendable function registered.
    pub smartio: SmartIo,
    /// The device the workload uses (`lender:device`).
    pub fdid: Fdid,
}

impl Booted {
    /// Boots `cluster`'s hosts, starts SmartIO and resolves `device`.
    pub fn new(cluster: &Cluster, device: &str) -> Result<Booted, String> {
        let hosts = HostOs::boot_all(&cluster.machine).map_err(|e| e.to_string())?;
        let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
        smartio.register_all().map_err(|e| e.to_string())?;
        let fdid = smartio.find(device).map_err(|e| e.to_string())?;
        Ok(Booted {
            hosts,
            smartio,
            fdid,
        })
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> Result<HostOs, String> {
        self.hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.hosts.iter().map(|h| h.name()).collect();
                format!("unknown host {name:?} (hosts: {})", known.join(", "))
            })
    }

    /// Every host's name, in scenario order.
    pub fn names(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.name().to_string()).collect()
    }
}

/// Spawns `task` on `machine` and runs the simulation until nothing is left to do; the task's
/// output, or — if it never finished, waiting for something that cannot happen — what every
/// task still waiting waits for ([`stuck`]).
pub(crate) fn run_task<T: 'static>(
    machine: &Machine,
    task: impl Future<Output = T> + 'static,
) -> Result<T, String> {
    let outcome = Rc::new(RefCell::new(None));
    let out = outcome.clone();
    machine.spawn(async move {
        let r = task.await;
        *out.borrow_mut() = Some(r);
    });
    machine.run();
    let r = outcome.borrow_mut().take();
    r.ok_or_else(|| stuck(machine))
}

/// [`run_task`] for a workload whose errors are strings.
pub(crate) fn run_workload<T: 'static>(
    machine: &Machine,
    task: impl Future<Output = Result<T, String>> + 'static,
) -> Result<T, String> {
    run_task(machine, task).and_then(|r| r)
}

/// Why a run ended with its workload unfinished (always an emulator bug): the simulation
/// ran out of events while tasks still waited; says where each was spawned and for what.
/// Device engines waiting for their next doorbell are listed too — they always wait.
pub(crate) fn stuck(machine: &Machine) -> String {
    format!(
        "the simulation ran out of events at {} before the workload finished (an emulator bug); still waiting: {}",
        machine.now(),
        machine.blocked_summary()
    )
}
