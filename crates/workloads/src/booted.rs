//! Where the device-API workloads start — every host booted, SmartIO over them with every
//! function registered — and how a workload's task is run to its end.

use smartio_cluster::Cluster;
use smartio_host::{HostError, HostOs};
use smartio_machine::Machine;
use smartio_platform::{Notify, SimTime};
use smartio_smartio::{Fdid, SmartIo, SmartIoError};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use thiserror::Error;

/// A host name the scenario does not have.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown host {host:?} (hosts: {known})")]
pub struct UnknownHost {
    /// Asked for.
    pub host: String,
    /// The hosts, in scenario order.
    pub known: String,
}

impl UnknownHost {
    /// `name` is not one of the hosts `known` (comma-separated). A VM's name (`host/vm`)
    /// where only a host's own CPU will do (SISCI segments, the distributed driver's
    /// clients) says which workloads a VM runs.
    pub fn named(name: &str, known: String) -> UnknownHost {
        let mut known = known;
        if name.contains('/') {
            known.push_str(
                "; a VM (host/vm) runs the native drivers' workloads only: fio with the native \
                 method, bench dma, bench p2p and device pingpong",
            );
        }
        UnknownHost {
            host: name.to_string(),
            known,
        }
    }
}

/// Why a cluster's hosts could not be booted with SmartIO, or a host not found.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BootError {
    /// No host of that name.
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
    /// A host's OS did not boot.
    #[error("{0}")]
    Host(#[from] HostError),
    /// SmartIO refused to register a function.
    #[error("{0}")]
    SmartIo(#[from] SmartIoError),
    /// Enabling the VFs never finished (an emulator bug).
    #[error("{0}")]
    Stuck(#[from] Stuck),
}

/// A cluster with its hosts booted and SmartIO started: the one way every workload (and the
/// device-API fuzz target) gets there.
#[derive(Debug)]
pub struct Booted {
    /// Every host, in scenario order.
    pub hosts: Vec<HostOs>,
    /// SmartIO over them, every lendable function registered.
    pub smartio: SmartIo,
    /// The registered functions, in host and tree order.
    pub fdids: Vec<Fdid>,
}

impl Booted {
    /// Boots every host of `cluster`, starts SmartIO over them and registers every function
    /// but the NTB adapters. The PF driver of every SR-IOV function first enables all its
    /// VFs (as a boot script writing TotalVFs to `sriov_numvfs` does), so the VFs are
    /// registered with fdids of their own and lendable; a cluster without SR-IOV boots
    /// exactly as before (no configuration request, no virtual time).
    pub fn boot(cluster: &Cluster) -> Result<Booted, BootError> {
        let hosts = HostOs::boot_all(&cluster.machine)?;
        enable_all_vfs(&cluster.machine, &hosts)?;
        let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
        let fdids = smartio.register_all()?;
        Ok(Booted {
            hosts,
            smartio,
            fdids,
        })
    }

    /// [`Booted::boot`], and the fdid of `device` (`lender:device`).
    pub fn with_device(cluster: &Cluster, device: &str) -> Result<(Booted, Fdid), BootError> {
        let booted = Self::boot(cluster)?;
        let fdid = booted.smartio.find(device)?;
        Ok((booted, fdid))
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> Result<HostOs, BootError> {
        self.hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .ok_or_else(|| BootError::from(UnknownHost::named(name, self.names().join(", "))))
    }

    /// Every host's name, in scenario order.
    pub fn names(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.name().to_string()).collect()
    }
}

/// Enables every VF of every SR-IOV PF in `hosts`, in host and tree order.
fn enable_all_vfs(machine: &Machine, hosts: &[HostOs]) -> Result<(), BootError> {
    let pfs: Vec<(smartio_host::DeviceHandle, u16)> = {
        let f = machine.fabric();
        hosts
            .iter()
            .flat_map(|os| {
                os.devices().into_iter().filter_map(|d| {
                    let ep = os.endpoint_of(d.name())?;
                    let total = f.virtual_functions(ep)?.spec.total_vfs;
                    Some((d, total))
                })
            })
            .collect()
    };
    if pfs.is_empty() {
        return Ok(());
    }
    let enabled = run_task(machine, async move {
        for (pf, total) in pfs {
            pf.enable_sriov(total).await?;
        }
        Ok::<(), HostError>(())
    });
    match enabled {
        Ok(result) => Ok(result?),
        Err(stuck) => Err(stuck.into()),
    }
}

/// A run that ended with its workload unfinished (always an emulator bug): the simulation ran
/// out of events while tasks still waited. Fatal for the run; the engine's account says where
/// each waiting task was spawned and for what (device engines waiting for their next doorbell
/// are listed too — they always wait).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the simulation ran out of events at {at} before the workload finished (an emulator bug); still waiting: {waiting}")]
pub struct Stuck {
    /// When the events ran out.
    pub at: SimTime,
    /// Every task still waiting, where it was spawned and what it waits for.
    pub waiting: String,
}

/// Spawns `task` on `machine` and runs the simulation until nothing is left to do; the task's
/// output, or — if it never finished, waiting for something that cannot happen — what every
/// task still waiting waits for (`stuck`).
pub fn run_task<T: 'static>(
    machine: &Machine,
    task: impl Future<Output = T> + 'static,
) -> Result<T, Stuck> {
    machine.run_task(task).ok_or_else(|| stuck(machine))
}

/// [`run_task`] for a workload that returns its own error, which can say it was [`Stuck`].
pub fn run_workload<T: 'static, E: From<Stuck> + 'static>(
    machine: &Machine,
    task: impl Future<Output = Result<T, E>> + 'static,
) -> Result<T, E> {
    run_task(machine, task).unwrap_or_else(|stuck| Err(stuck.into()))
}

/// Why a run ended with its workload unfinished, now: see [`Stuck`].
pub(crate) fn stuck(machine: &Machine) -> Stuck {
    Stuck {
        at: machine.now(),
        waiting: machine.blocked_summary(),
    }
}

/// Runs `tasks` as concurrent agents of `machine` and waits for all of them; their outputs in
/// order.
pub async fn join_all<T: 'static, F: Future<Output = T> + 'static>(
    machine: &Machine,
    tasks: Vec<F>,
) -> Vec<T> {
    let n = tasks.len();
    let slots: Rc<RefCell<Vec<Option<T>>>> = Rc::new(RefCell::new((0..n).map(|_| None).collect()));
    let left = Rc::new(Cell::new(n));
    let done = Rc::new(Notify::new());
    for (i, task) in tasks.into_iter().enumerate() {
        let (slots, left, done) = (slots.clone(), left.clone(), done.clone());
        machine.spawn(async move {
            let out = task.await;
            slots.borrow_mut()[i] = Some(out);
            left.set(left.get() - 1);
            if left.get() == 0 {
                done.notify();
            }
        });
    }
    if n > 0 {
        done.notified().await;
    }
    let outs = slots.take();
    outs.into_iter().flatten().collect()
}
