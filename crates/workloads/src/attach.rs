//! The device a workload runs on: a function of the host itself (`nvme0`), or one borrowed
//! from another host by Device Lending (`lender:nvme0`). Either way the workload then drives
//! it through the same device handle and the same native driver.
//!
//! The host may be a VM (`borrower/vm0`, declared in the scenario): the workload then runs on
//! the guest kernel, and its devices are passed through — a function of the VM's own host by
//! VFIO (`nvme0`), a remote one by SmartIO's MDEV parent (`lender:nvme0`). The VM is powered
//! on when the first device is attached and shut down by [`Workbench::detach`].

use crate::booted::UnknownHost;
use crate::booted::{BootError, Booted};
use smartio_cluster::Cluster;
use smartio_fabric::{DeviceRef, DeviceRefError, EndpointId};
use smartio_host::vm::GuestPageSize;
use smartio_host::{HostError, HostOs, PassThrough, Vfio, Vm, VmConfig, VmError};
use smartio_smartio::{BorrowOptions, Fdid, SmartIo, SmartIoError};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use thiserror::Error;

/// Why a device could not be attached.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AttachError {
    /// No host of that name.
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
    /// The host's OS refused (unknown device, driver failure).
    #[error("{0}")]
    Host(#[from] HostError),
    /// SmartIO refused (unknown or busy device, windows exhausted).
    #[error("{0}")]
    SmartIo(#[from] SmartIoError),
    /// A device name that is not `device`, `device.vfN`, `lender:device` or
    /// `lender:device.vfN` ([`DeviceRef`]).
    #[error("device {source}")]
    BadName {
        /// What is wrong with it.
        #[from]
        source: DeviceRefError,
    },
    /// A VM named without its host (`host/vm`).
    #[error("{name:?}: write a VM as host/vm (borrower/vm0)")]
    NotAVm {
        /// As given.
        name: String,
    },
    /// `host/vm` names a VM the scenario does not declare.
    #[error("host {host} has no VM {vm:?} (its VMs: {known}); declare one with [[host.vm]]")]
    UnknownVm {
        /// The host.
        host: String,
        /// The VM asked for.
        vm: String,
        /// The host's VMs.
        known: String,
    },
    /// The VM could not be created, powered on or shut down.
    #[error("{0}")]
    Vm(#[from] VmError),
    /// A device the workbench does not have (an emulator bug: workloads ask by index).
    #[error("no device {index} in the workbench")]
    NoDevice {
        /// The index asked for.
        index: usize,
    },
    /// A VM that did not show a function passed through to it.
    #[error("{vm} did not show the guest function {index}")]
    NoGuestFunction {
        /// The VM.
        vm: String,
        /// The function's index.
        index: usize,
    },
    /// Enabling VFs at boot never finished (an emulator bug).
    #[error("{0}")]
    Stuck(#[from] crate::booted::Stuck),
}

impl From<BootError> for AttachError {
    fn from(e: BootError) -> Self {
        match e {
            BootError::UnknownHost(e) => AttachError::UnknownHost(e),
            BootError::Host(e) => AttachError::Host(e),
            BootError::SmartIo(e) => AttachError::SmartIo(e),
            BootError::Stuck(e) => AttachError::Stuck(e),
        }
    }
}

/// An attach error a name the user gave caused, with the option it came from.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameOption {
    /// The device name (`--device`, ...).
    #[error("--{0}")]
    Device(#[source] Box<AttachError>),
    /// The VM named as the host.
    #[error("--host: {0}")]
    Host(#[source] Box<AttachError>),
}

impl NameOption {
    /// The option `e` came from, if a name the user gave caused it; else `e` back.
    pub fn of(e: AttachError) -> Result<NameOption, AttachError> {
        match e {
            e @ AttachError::BadName { .. } => Ok(NameOption::Device(Box::new(e))),
            e @ (AttachError::UnknownVm { .. } | AttachError::NotAVm { .. }) => {
                Ok(NameOption::Host(Box::new(e)))
            }
            e => Err(e),
        }
    }
}

/// Checks the form of a device name given by the user: `device`, `device.vfN`,
/// `lender:device` or `lender:device.vfN` (the one parser, [`DeviceRef::parse`]).
pub fn check_device_name(device: &str) -> Result<DeviceRef, AttachError> {
    Ok(DeviceRef::parse(device)?)
}

/// One device a workload uses, as named on the command line.
#[derive(Debug, Clone)]
struct Wanted {
    name: String,
    remote: Option<Fdid>,
    class: u32,
}

/// A VM a workload runs in, and the functions to pass through to it.
struct VmBench {
    vm: Vm,
    devices: Vec<Rc<dyn PassThrough>>,
    powered: Cell<bool>,
}

impl std::fmt::Debug for VmBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmBench")
            .field("vm", &self.vm)
            .field("powered", &self.powered.get())
            .finish()
    }
}

/// A workload's host and devices, ready to attach inside the simulation.
#[derive(Debug, Clone)]
pub struct Workbench {
    /// The host the workload runs on (a VM's guest kernel, for `host/vm`).
    pub os: HostOs,
    /// The physical host whose own functions are named without a lender (`dma0`): `os`
    /// itself, or the VM's host for `host/vm` (which passes them through by VFIO).
    pub home: HostOs,
    /// Every host's OS (in host order).
    pub hosts: Vec<HostOs>,
    /// The SmartIO service (every function registered).
    pub smartio: SmartIo,
    devices: Vec<Wanted>,
    /// Devices borrowed so far, in order.
    borrowed: Rc<RefCell<Vec<Fdid>>>,
    /// The VM, when the workload runs in one.
    vm: Option<Rc<VmBench>>,
}

impl Workbench {
    /// Boots every host of `cluster`, starts SmartIO with every function registered, and
    /// resolves `device` for `host`: a name in the host's own tree, or `lender:device`.
    pub fn new(cluster: &Cluster, host: &str, device: &str) -> Result<Workbench, AttachError> {
        Self::with_devices(cluster, host, &[device])
    }

    /// [`Workbench::new`] for several devices (device `i` is attached with
    /// [`Workbench::attach_nth`]).
    pub fn with_devices(
        cluster: &Cluster,
        host: &str,
        devices: &[&str],
    ) -> Result<Workbench, AttachError> {
        for &device in devices {
            check_device_name(device)?;
        }
        let booted = Booted::boot(cluster)?;
        if let Some((host, vm)) = host.split_once('/') {
            return Self::in_vm(cluster, booted, host, vm, devices);
        }
        let os = booted.host(host)?;
        let Booted { hosts, smartio, .. } = booted;
        let mut wanted = Vec::new();
        for &device in devices {
            let (remote, class) = if device.contains(':') {
                let fdid = smartio.find(device)?;
                (Some(fdid), class_of_fdid(&smartio, fdid)?)
            } else {
                (None, os.device(device)?.id().class)
            };
            wanted.push(Wanted {
                name: device.to_string(),
                remote,
                class,
            });
        }
        Ok(Workbench {
            home: os.clone(),
            os,
            hosts,
            smartio,
            devices: wanted,
            borrowed: Rc::default(),
            vm: None,
        })
    }

    /// A workbench inside VM `vm` of `host`: the VM is created (memory backed, guest kernel
    /// booted); `lender:device` is passed through by MDEV, a device of `host` by VFIO.
    fn in_vm(
        cluster: &Cluster,
        booted: Booted,
        host: &str,
        vm: &str,
        devices: &[&str],
    ) -> Result<Workbench, AttachError> {
        let (host_os, config) = vm_config(cluster, &booted, &format!("{host}/{vm}"))?;
        let Booted { hosts, smartio, .. } = booted;
        let vm_name = format!("{host}/{vm}");
        let mut wanted = Vec::new();
        let mut pass: Vec<Rc<dyn PassThrough>> = Vec::new();
        for &device in devices {
            let (remote, class) = if device.contains(':') {
                let fdid = smartio.find(device)?;
                pass.push(smartio.assign_to_vm(fdid, &vm_name)?);
                (Some(fdid), class_of_fdid(&smartio, fdid)?)
            } else {
                pass.push(Vfio::new(&host_os, device)?);
                (None, host_os.device(device)?.id().class)
            };
            wanted.push(Wanted {
                name: device.to_string(),
                remote,
                class,
            });
        }
        let vm = Vm::create(&host_os, &config, &[])?;
        Ok(Workbench {
            os: vm.guest().clone(),
            home: host_os,
            hosts,
            smartio,
            devices: wanted,
            borrowed: Rc::default(),
            vm: Some(Rc::new(VmBench {
                vm,
                devices: pass,
                powered: Cell::new(false),
            })),
        })
    }

    /// The OS of host `name` (another host than the workbench's, for a manager, say).
    pub fn host(&self, name: &str) -> Result<HostOs, AttachError> {
        self.hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .ok_or_else(|| {
                AttachError::from(UnknownHost::named(
                    name,
                    self.os.machine().fabric().host_names(),
                ))
            })
    }

    /// The fabric endpoint of `spec` — a function of the workbench's home host (the VM's
    /// host in a VM) or `lender:device` — without attaching it.
    pub fn endpoint_of(&self, spec: &str) -> Result<EndpointId, AttachError> {
        let (host, device) = spec.split_once(':').unwrap_or((self.home.name(), spec));
        Ok(self.host(host)?.device(device)?.function().1)
    }

    /// The first device's 24-bit class code (known before anything is borrowed).
    pub fn class(&self) -> u32 {
        self.class_of(0)
    }

    /// Device `i`'s class code (0 if there is no such device).
    pub fn class_of(&self, i: usize) -> u32 {
        self.devices.get(i).map_or(0, |d| d.class)
    }

    /// Whether the first device is borrowed from another host.
    pub fn is_remote(&self) -> bool {
        self.devices.first().is_some_and(|d| d.remote.is_some())
    }

    /// Makes the first device appear in the host's tree; see [`Workbench::attach_nth`].
    pub async fn attach(&self) -> Result<String, AttachError> {
        self.attach_nth(0).await
    }

    /// Makes device `i` appear in the host's tree (borrowing it if remote, which binds the
    /// host's registered drivers to it) and returns its name there.
    pub async fn attach_nth(&self, i: usize) -> Result<String, AttachError> {
        let d = self
            .devices
            .get(i)
            .ok_or(AttachError::NoDevice { index: i })?;
        if let Some(v) = &self.vm {
            if !v.powered.replace(true) {
                v.vm.power_on(v.devices.clone()).await?;
            }
            return v.vm.device_names().get(i).cloned().ok_or_else(|| {
                AttachError::NoGuestFunction {
                    vm: v.vm.name().to_string(),
                    index: i,
                }
            });
        }
        match d.remote {
            None => Ok(d.name.clone()),
            Some(fdid) => {
                let lent = self
                    .smartio
                    .borrow(self.os.id(), fdid, &BorrowOptions::default())
                    .await?;
                self.borrowed.borrow_mut().push(fdid);
                Ok(lent.device)
            }
        }
    }

    /// Runs `work`, then gives back what the workbench borrowed (or shuts its VM down) even
    /// when `work` failed half-way; `work`'s error comes first.
    pub async fn detach_after<T, E: From<AttachError>>(
        &self,
        work: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let result = work.await;
        let returned = self.detach().await.map_err(E::from);
        result.and_then(|r| returned.map(|()| r))
    }

    /// Gives every device borrowed so far back, last first (nothing for local ones); in a
    /// VM, shuts the VM down (which returns its devices).
    pub async fn detach(&self) -> Result<(), AttachError> {
        if let Some(v) = &self.vm {
            if v.powered.replace(false) {
                v.vm.shutdown_in_place().await?;
            }
            return Ok(());
        }
        loop {
            let Some(fdid) = self.borrowed.borrow_mut().pop() else {
                return Ok(());
            };
            self.smartio.give_back(self.os.id(), fdid).await?;
        }
    }
}

/// The class code of registered device `fdid`.
fn class_of_fdid(smartio: &SmartIo, fdid: Fdid) -> Result<u32, AttachError> {
    smartio
        .devices()
        .into_iter()
        .find(|d| d.fdid == fdid)
        .map(|d| d.class_code)
        .ok_or(AttachError::SmartIo(SmartIoError::UnknownFdid(fdid)))
}

/// The host and the configuration of VM `name` (`host/vm`), as the scenario declares it.
pub(crate) fn vm_config(
    cluster: &Cluster,
    booted: &Booted,
    name: &str,
) -> Result<(HostOs, VmConfig), AttachError> {
    let (host, vm) = name.split_once('/').ok_or_else(|| AttachError::NotAVm {
        name: name.to_string(),
    })?;
    let host_os = booted.host(host)?;
    let f = cluster.machine.fabric();
    let vms = &f.host(host_os.id()).vms;
    let spec = vms
        .iter()
        .find(|v| v.name == vm)
        .ok_or_else(|| AttachError::UnknownVm {
            host: host.to_string(),
            vm: vm.to_string(),
            known: if vms.is_empty() {
                "none".to_string()
            } else {
                vms.iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })?;
    let page = if spec.page_bytes == GuestPageSize::Huge.bytes() {
        GuestPageSize::Huge
    } else {
        GuestPageSize::Small
    };
    let config = VmConfig {
        name: spec.name.clone(),
        memory: spec.memory,
        page,
    };
    Ok((host_os, config))
}
