//! Cold migration of a VM with a device passed through by MDEV (Paper V §5.5): start the VM
//! on one host, write through its guest NVMe driver, shut it down (the device goes back to
//! its lender and every table entry the first host's VM took is released), start the same VM
//! on another host with the same assignment (the device is borrowed again) and read back
//! what was written. Every step is timed in simulated time.

use crate::attach::{vm_config, AttachError};
use crate::booted::{run_workload, Booted, Stuck};
use crate::fio::pattern;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::{BlockOp, NvmeDevice, NvmeDriver, NvmeError};
use smartio_host::{Driver, HostOs, PassThrough, Vm, VmConfig, VmError};
use smartio_machine::Machine;
use smartio_smartio::{Fdid, SmartIo, SmartIoError};
use std::rc::Rc;
use thiserror::Error;

/// What to migrate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateConfig {
    /// The VM's first home (`host/vm`).
    pub from: String,
    /// Its second home (`host/vm`, the same VM declared on another host).
    pub to: String,
    /// The NVMe passed through (`lender:nvme0`).
    pub device: String,
    /// Bytes written before the migration and read back after it (whole 512-byte blocks,
    /// at most 64 MiB).
    pub bytes: u64,
    /// Seed of the data written.
    pub seed: u64,
}

impl Default for MigrateConfig {
    fn default() -> Self {
        Self {
            from: "host-a/vm0".into(),
            to: "host-b/vm0".into(),
            device: "lender:nvme0".into(),
            bytes: 1 << 20,
            seed: 1,
        }
    }
}

/// Largest amount of data a migration run writes and checks.
pub const MAX_MIGRATE_BYTES: u64 = 64 << 20;

/// Why a migration run failed.
#[derive(Debug, Error)]
pub enum MigrateError {
    /// A host, VM or device that does not resolve, or SmartIO refused.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// A VM did not start or shut down.
    #[error(transparent)]
    Vm(#[from] VmError),
    /// The guest's NVMe driver failed.
    #[error(transparent)]
    Nvme(#[from] NvmeError),
    /// `--bytes` that is not whole blocks in range.
    #[error("--bytes {bytes}: whole 512-byte blocks, 512 to {max}")]
    Bytes {
        /// As given.
        bytes: u64,
        /// The most a migration moves.
        max: u64,
    },
    /// Two homes on one host.
    #[error("{from} and {to} are on the same host; a migration moves a VM to another host")]
    SameHost {
        /// The first home.
        from: String,
        /// The second.
        to: String,
    },
    /// The VM shows no device.
    #[error("the VM shows no device")]
    NoDevice,
    /// The VM's device is not an NVMe its driver bound.
    #[error("{device} is not an NVMe the guest's driver bound")]
    NotNvme {
        /// The guest's name of the device.
        device: String,
    },
    /// The guest's RAM for the transfer buffer ran out.
    #[error("{0}")]
    Ram(#[from] smartio_host::RamError),
    /// The guest's memory could not be read or written.
    #[error("{0}")]
    Memory(#[from] smartio_host::GuestMemoryError),
    /// The data read back after the migration differs (first differing byte).
    #[error(
        "the data read back after the migration differs from what was written, first at byte {0}"
    )]
    Differs(u64),
    /// Something the first host's VM took is still taken after it shut down.
    #[error("after the VM left {host}: {what}")]
    Leftover {
        /// The host.
        host: String,
        /// What is still taken.
        what: Leftover,
    },
    /// The simulation ran out of events before the run finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

impl From<SmartIoError> for MigrateError {
    fn from(e: SmartIoError) -> Self {
        MigrateError::Attach(e.into())
    }
}

/// One step and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrateStep {
    /// What was done.
    pub step: String,
    /// Simulated nanoseconds.
    pub ns: f64,
}

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrateResult {
    /// The first home.
    pub from: String,
    /// The second home.
    pub to: String,
    /// The device.
    pub device: String,
    /// Bytes written before and checked after.
    pub verified_bytes: u64,
    /// The steps, in order.
    pub steps: Vec<MigrateStep>,
    /// Who held the device while each VM ran (`host/vm`).
    pub holders: Vec<String>,
    /// Whether every table entry (look-up tables, requester ids, IOMMU pages) was as before
    /// the first start once the first VM had shut down.
    pub released_on_first_host: bool,
}

/// What the first host's VM took and still holds after it shut down.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Leftover {
    /// Entries of the fabric's tables.
    #[error("look-up-table, requester-id or IOMMU entries")]
    Tables,
    /// RAM of the host.
    #[error("{bytes} bytes of RAM")]
    Ram {
        /// How much more is allocated than before the VM started.
        bytes: u64,
    },
    /// The device, still borrowed.
    #[error("the device is still held by {holder}")]
    Held {
        /// The host holding it.
        holder: String,
    },
}

/// Runs a cold migration on `cluster`.
pub fn migrate(cluster: &Cluster, config: &MigrateConfig) -> Result<MigrateResult, MigrateError> {
    if config.bytes == 0 || !config.bytes.is_multiple_of(512) || config.bytes > MAX_MIGRATE_BYTES {
        return Err(MigrateError::Bytes {
            bytes: config.bytes,
            max: MAX_MIGRATE_BYTES,
        });
    }
    let booted = Booted::boot(cluster).map_err(AttachError::from)?;
    let (from_os, from_vm) = vm_config(cluster, &booted, &config.from)?;
    let (to_os, to_vm) = vm_config(cluster, &booted, &config.to)?;
    if from_os.id() == to_os.id() {
        return Err(MigrateError::SameHost {
            from: config.from.clone(),
            to: config.to.clone(),
        });
    }
    let fdid = booted.smartio.find(&config.device)?;
    let config = config.clone();
    let smartio = booted.smartio.clone();
    let machine = cluster.machine.clone();
    run_workload(&cluster.machine, async move {
        let tables_before = machine.fabric().tables_in_use();
        let ram_before = from_os.ram_in_use();
        let mut steps = Vec::new();
        let mut holders = Vec::new();
        let data: Vec<u8> = {
            let mut d = vec![0u8; config.bytes as usize];
            pattern(config.seed, 0, 1, &mut d);
            d
        };
        let home = Home {
            smartio: &smartio,
            fdid,
        };

        let t = machine.now();
        let vm = home.start(&from_os, &from_vm).await?;
        steps.push(step(
            format!(
                "start {} (reset: borrow; guest scan; driver probe)",
                vm.name()
            ),
            t,
            machine.now(),
        ));
        holders.push(home.holder());
        let t = machine.now();
        transfer(vm.guest(), BlockOp::Write, &mut data.clone()).await?;
        steps.push(step(
            format!("write {} bytes in {}", config.bytes, vm.name()),
            t,
            machine.now(),
        ));
        let t = machine.now();
        let name = vm.name().to_string();
        vm.shutdown().await?;
        steps.push(step(
            format!("shut {name} down (device returned)"),
            t,
            machine.now(),
        ));
        check_released(&machine, &from_os, &home, &tables_before, ram_before)?;

        let t = machine.now();
        let vm = home.start(&to_os, &to_vm).await?;
        steps.push(step(
            format!("start {} (borrowed again)", vm.name()),
            t,
            machine.now(),
        ));
        holders.push(home.holder());
        let t = machine.now();
        let mut back = vec![0u8; data.len()];
        transfer(vm.guest(), BlockOp::Read, &mut back).await?;
        steps.push(step(
            format!("read {} bytes back in {}", config.bytes, vm.name()),
            t,
            machine.now(),
        ));
        if let Some(at) = crate::verify::first_difference(&back, &data) {
            return Err(MigrateError::Differs(at as u64));
        }
        let t = machine.now();
        let name = vm.name().to_string();
        vm.shutdown().await?;
        steps.push(step(format!("shut {name} down"), t, machine.now()));
        Ok(MigrateResult {
            from: config.from.clone(),
            to: config.to.clone(),
            device: config.device.clone(),
            verified_bytes: config.bytes,
            steps,
            holders,
            // Checked above: a leftover is an error.
            released_on_first_host: true,
        })
    })
}

/// Checks that the first host got back everything its VM took: the fabric's table entries
/// (`tables_before`), its RAM (`ram_before`) and the device.
fn check_released(
    machine: &Machine,
    from_os: &HostOs,
    home: &Home<'_>,
    tables_before: &TablesInUse,
    ram_before: u64,
) -> Result<(), MigrateError> {
    let leftover = |what| MigrateError::Leftover {
        host: from_os.name().to_string(),
        what,
    };
    if machine.fabric().tables_in_use() != *tables_before {
        return Err(leftover(Leftover::Tables));
    }
    if from_os.ram_in_use() != ram_before {
        return Err(leftover(Leftover::Ram {
            bytes: from_os.ram_in_use() - ram_before,
        }));
    }
    if let Some(holder) = home.holder_now() {
        return Err(leftover(Leftover::Held { holder }));
    }
    Ok(())
}

/// The fabric's table entries in use, as the fabric counts them (per adapter, then per
/// host's IOMMU).
type TablesInUse = (Vec<(usize, usize)>, Vec<Vec<usize>>);

fn step(
    step: String,
    from: smartio_platform::SimTime,
    to: smartio_platform::SimTime,
) -> MigrateStep {
    MigrateStep {
        step,
        ns: to.since(from).as_ns_f64(),
    }
}

/// The device's side of the migration: assigned to whichever VM runs.
struct Home<'a> {
    smartio: &'a SmartIo,
    fdid: Fdid,
}

impl Home<'_> {
    async fn start(&self, host: &HostOs, config: &VmConfig) -> Result<Vm, MigrateError> {
        let name = format!("{}/{}", host.name(), config.name);
        for d in self.smartio.devices() {
            for vm in d
                .assigned
                .iter()
                .filter(|vm| d.fdid == self.fdid && **vm != name)
            {
                self.smartio.unassign_from_vm(self.fdid, vm)?;
            }
        }
        let mdev = self.smartio.assign_to_vm(self.fdid, &name)?;
        let drivers: Vec<Rc<dyn Driver>> = vec![Rc::new(NvmeDriver::default())];
        Ok(Vm::start(host, config, vec![mdev as Rc<dyn PassThrough>], &drivers).await?)
    }

    fn holder_now(&self) -> Option<String> {
        self.smartio
            .devices()
            .into_iter()
            .find(|d| d.fdid == self.fdid)
            .and_then(|d| d.borrowers.first().map(|b| b.host.clone()))
    }

    fn holder(&self) -> String {
        self.holder_now().unwrap_or_default()
    }
}

/// Moves `data` between guest memory and namespace 1 from block 0 on, in transfers of the
/// controller's maximum size.
async fn transfer(guest: &HostOs, op: BlockOp, data: &mut [u8]) -> Result<(), MigrateError> {
    let Some(name) = guest.devices().first().map(|d| d.name().to_string()) else {
        return Err(MigrateError::NoDevice);
    };
    let dev = guest
        .driver_data::<NvmeDevice>(&name)
        .ok_or_else(|| MigrateError::NotNvme {
            device: name.clone(),
        })?;
    let chunk = dev.info().max_transfer.min(data.len() as u64) as usize;
    let buf = guest.alloc(chunk as u64)?;
    let memory = MigrateError::Memory;
    let mut at = 0usize;
    while at < data.len() {
        let n = chunk.min(data.len() - at);
        if op == BlockOp::Write {
            guest.write_memory(buf, &data[at..at + n]).map_err(memory)?;
        }
        dev.submit(0, op, 1, (at / 512) as u64, (n / 512) as u32, buf)
            .await?;
        if op == BlockOp::Read {
            guest
                .read_memory(buf, &mut data[at..at + n])
                .map_err(memory)?;
        }
        at += n;
    }
    guest.free(buf);
    Ok(())
}

/// What the demo shows of a VM with a device passed through by MDEV.
#[derive(Debug, Clone, PartialEq)]
pub struct VmGlance {
    /// Every registered device while the VM ran (who holds what, and how).
    pub devices_while_running: Vec<smartio_smartio::DeviceInfo>,
    /// Every registered device after the VM shut down.
    pub devices_after: Vec<smartio_smartio::DeviceInfo>,
    /// The guest's device tree.
    pub guest_tree: Vec<GuestDevice>,
}

/// A device in a guest's tree.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestDevice {
    /// Its name in the guest.
    pub name: String,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// BARs: (index, guest-physical address, size).
    pub bars: Vec<(u8, u64, u64)>,
}

/// Starts VM `vm` (`host/vm`) with `device` (`lender:device`) passed through by MDEV, looks
/// at the device listing and the guest's tree, and shuts the VM down.
pub fn vm_glance(cluster: &Cluster, vm: &str, device: &str) -> Result<VmGlance, MigrateError> {
    let booted = Booted::boot(cluster).map_err(AttachError::from)?;
    let (host, config) = vm_config(cluster, &booted, vm)?;
    let fdid = booted.smartio.find(device)?;
    let smartio = booted.smartio.clone();
    run_workload(&cluster.machine, async move {
        let home = Home {
            smartio: &smartio,
            fdid,
        };
        let vm = home.start(&host, &config).await?;
        let devices_while_running = smartio.devices();
        let guest_tree = vm
            .guest()
            .devices()
            .iter()
            .map(|d| {
                let id = d.id();
                GuestDevice {
                    name: d.name().to_string(),
                    vendor: id.vendor,
                    device: id.device,
                    bars: d
                        .bars()
                        .iter()
                        .map(|b| (b.index, b.base.get(), b.size))
                        .collect(),
                }
            })
            .collect();
        vm.shutdown().await?;
        Ok(VmGlance {
            devices_while_running,
            devices_after: smartio.devices(),
            guest_tree,
        })
    })
}
