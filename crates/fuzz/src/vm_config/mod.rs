//! The `vm_config` target: a VM on the shipped `vm-back-to-back` scenario whose guest does
//! anything to its passed-through functions' configuration space and BARs.
//!
//! The input decodes into a [`ops::Setup`] — VFIO (a VM on the lender, its own functions) or
//! SmartIO's MDEV parent (a VM on the borrower, the lender's functions); nvme0, dma0, or
//! dma0 and dma1; a VM of 1 MiB to 1 GiB — and up to [`ops::MAX_OPS`] guest operations
//! ([`ops::Op`]): configuration reads and writes of any width at any offset, BAR sizing and
//! placing anywhere, Bus Master toggled, MSI-X enabled, disabled and written raw, loads and
//! stores at guest BARs (where the scan put them, or where the guest moved them) and at any
//! guest-physical address, DMA test copies between guest RAM, device memory and guest BARs.
//! The guest drives the raw handles (no driver), or the NVMe driver is bound.
//!
//! Checked: nothing panics; the VM starts (an MDEV device is then held by the VM); sizing a
//! guest BAR reads back the real BAR's size and type, and a base reads back masked to it;
//! read-only MSI-X Table and PBA registers stay; a DMA test copy that completed put its
//! bytes where the guest reads them (`copy`); the run finishes before a virtual-time
//! deadline (no task of the workload left waiting); and after the VM is shut down (powered
//! off, when the guest's own driver hangs in its unbind):
//! - the real functions' BARs are where they were, in the fabric and in their own BAR
//!   registers as their host reads them, and their Command register has Bus Master and
//!   Memory Space off;
//! - every NTB look-up table and requester-id table, every IOMMU domain, and every host's
//!   RAM allocator is as before (VFIO leaves the domain it created behind, empty: the
//!   IOMMU model does not delete domains);
//! - MDEV: SmartIO lists the devices with no borrower; VFIO: the host has no driver bound to
//!   them.

mod copy;
mod guest;
pub mod ops;

use crate::input::Input;
use crate::Outcome;
use guest::{Function, Guest};
use ops::{Backend, Setup};
use smartio_calibration::Calibration;
use smartio_cluster::{load_fabric, Cluster, ClusterOptions};
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{DomainId, EndpointId, Fabric, HostId};
use smartio_host::{Driver, HostOs, PassThrough, Vfio, Vm, VmConfig, VmError};
use smartio_machine::Machine;
use smartio_platform::pci::{self, command};
use smartio_platform::{race, AccessError, Clock, Either, SimDuration, SimTime};
use smartio_smartio::{Fdid, SmartIo};
use smartio_workloads::Booted;
use std::cell::RefCell;
use std::rc::Rc;

/// The scenario the VM runs on.
const SCENARIO: &str = "vm-back-to-back";
/// How long the guest's shutdown may take before the VM is powered off (Linux's NVMe admin
/// command timeout, `nvme_admin_timeout`: a driver still waiting after that has given up).
const SHUTDOWN_GRACE: SimDuration = SimDuration::from_us(60_000_000); // 60 s
/// Virtual time an input may take: VM start, 64 operations and a shutdown take well under
/// 100 ms, or [`SHUTDOWN_GRACE`] more when the guest's driver hangs in its unbind.
const DEADLINE: SimTime = SimTime(120_000_000_000_000); // 120 s
/// Bytes of BAR registers in a type-0 header (BAR0 to BAR5).
const BAR_REGISTERS: usize = 4 * pci::BAR_COUNT as usize;

/// The shipped scenario, enumerated once per thread.
fn fabric() -> Fabric {
    crate::cached_fabric(SCENARIO, || {
        load_fabric(SCENARIO).map_err(|e| e.to_string())
    })
}

/// Every table SmartIO and VFIO touch: (per adapter (LUT entries, requester ids), per host
/// IOMMU pages per domain).
type Tables = (Vec<(usize, usize)>, Vec<Vec<usize>>);

fn tables(machine: &Machine) -> Tables {
    machine.fabric().tables_in_use()
}

/// What the workload task reports back.
#[derive(Debug, Default)]
struct Report {
    /// The real functions' BAR registers and Command register as their host reads them,
    /// before the VM started and after it shut down.
    registers_before: Vec<Result<Vec<u8>, AccessError>>,
    registers_after: Vec<Result<Vec<u8>, AccessError>>,
    command_after: Vec<Result<Vec<u8>, AccessError>>,
    /// Who SmartIO listed as holding each device while the VM ran (None: it did not start).
    holders_while_running: Option<Vec<Vec<String>>>,
    shutdown: Option<Result<(), VmError>>,
    seen: Vec<String>,
    ops: u32,
    failed: u32,
    verified: u32,
}

/// Boots the scenario, starts the VM `data` describes, runs the guest's operations, shuts the
/// VM down and checks that everything is back.
pub fn vm_config(data: &[u8]) -> Outcome {
    let mut input = Input::new(data);
    let setup = match ops::setup(&mut input) {
        Ok(s) => s,
        Err(e) => return Outcome::rejected(e.to_string()),
    };
    let ops = ops::decode(&mut input);
    let calibration = Calibration::default_embedded();
    let cluster = match Cluster::from_fabric(fabric(), &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("{SCENARIO} does not build: {e}"),
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    let Booted { hosts, smartio, .. } = match Booted::boot(&cluster) {
        Ok(b) => b,
        Err(e) => panic!("{SCENARIO} does not boot with SmartIO: {e}"),
    };
    let host = |name: &str| match hosts.iter().find(|h| h.name() == name) {
        Some(h) => h.clone(),
        None => panic!("{SCENARIO} has no host {name}"),
    };
    let lender = host("lender");
    let vm_host = match setup.backend {
        Backend::Vfio => lender.clone(),
        Backend::Mdev => host("borrower"),
    };
    let vm_name = format!("{}/vm0", vm_host.name());
    let names = setup.functions.names();
    let mut fdids = Vec::new();
    let mut devices: Vec<Rc<dyn PassThrough>> = Vec::new();
    for name in names {
        match setup.backend {
            Backend::Vfio => match Vfio::new(&lender, name) {
                Ok(v) => devices.push(v),
                Err(e) => panic!("{name} cannot be passed through by VFIO: {e}"),
            },
            Backend::Mdev => {
                let assigned = smartio
                    .find(&format!("lender:{name}"))
                    .and_then(|f| Ok((f, smartio.assign_to_vm(f, &vm_name)?)));
                match assigned {
                    Ok((fdid, m)) => {
                        fdids.push(fdid);
                        devices.push(m);
                    }
                    Err(e) => panic!("lender:{name} cannot be assigned to {vm_name}: {e}"),
                }
            }
        }
    }
    let functions: Vec<(HostId, EndpointId)> = devices.iter().map(|d| d.function()).collect();
    let real_bars = |m: &Machine| -> Vec<Vec<AssignedBar>> {
        let f = m.fabric();
        functions
            .iter()
            .map(|&(_, ep)| f.endpoint(ep).bars.clone())
            .collect()
    };
    let domains = |m: &Machine| -> Vec<Option<DomainId>> {
        let f = m.fabric();
        functions
            .iter()
            .map(|&(h, ep)| f.host(h).iommu.domain_of(ep))
            .collect()
    };
    let domains_before = domains(&cluster.machine);
    let bars_before = real_bars(&cluster.machine);
    let tables_before = tables(&cluster.machine);
    let ram_before: Vec<u64> = hosts.iter().map(HostOs::ram_in_use).collect();
    let drivers_before: Vec<Option<String>> =
        names.iter().map(|n| lender.bound_driver(n)).collect();
    let drivers: Vec<Rc<dyn Driver>> = if setup.nvme_driver {
        vec![Rc::new(smartio_drivers::NvmeDriver::default())]
    } else {
        Vec::new()
    };
    let config = VmConfig {
        name: "vm0".into(),
        memory: setup.memory,
        page: setup.page,
    };
    let report: Rc<RefCell<Option<Report>>> = Rc::default();
    let task = Workload {
        vm_host,
        lender: lender.clone(),
        smartio: smartio.clone(),
        config,
        devices,
        drivers,
        functions: functions.clone(),
        bars: bars_before.clone(),
        fdids: fdids.clone(),
    };
    let out = report.clone();
    cluster.machine.spawn(async move {
        let r = task.run(ops).await;
        *out.borrow_mut() = Some(r);
    });
    cluster.machine.run_until(DEADLINE);
    let Some(report) = report.borrow_mut().take() else {
        panic!(
            "the VM's start, operations and shutdown did not finish by {} ps of virtual time: {}",
            DEADLINE.as_ps(),
            cluster.machine.blocked_summary()
        );
    };
    check(
        &setup,
        &report,
        &Before {
            bars: bars_before,
            tables: tables_before,
            ram: ram_before,
            drivers: drivers_before,
            domains: domains_before,
        },
        &After {
            bars: real_bars(&cluster.machine),
            tables: tables(&cluster.machine),
            ram: hosts.iter().map(HostOs::ram_in_use).collect(),
            drivers: names.iter().map(|n| lender.bound_driver(n)).collect(),
            holders: holders(&smartio, &fdids),
            domains: domains(&cluster.machine),
        },
    );
    Outcome::accepted(format!(
        "{:?} {} {} MiB in {} KiB pages{}: {} ops, {} failed, {} copies verified; {}",
        setup.backend,
        names.join("+"),
        setup.memory >> 20,
        setup.page.bytes() >> 10,
        if setup.nvme_driver {
            ", NVMe driver"
        } else {
            ""
        },
        report.ops,
        report.failed,
        report.verified,
        report.seen.join(" ")
    ))
}

/// Who SmartIO lists as holding each of `fdids`.
fn holders(smartio: &SmartIo, fdids: &[Fdid]) -> Vec<Vec<String>> {
    let devices = smartio.devices();
    fdids
        .iter()
        .map(|f| {
            devices
                .iter()
                .find(|d| d.fdid == *f)
                .map(|d| d.borrowers.iter().map(|b| b.host.clone()).collect())
                .unwrap_or_else(|| vec![format!("fdid {f:?} is no longer listed")])
        })
        .collect()
}

struct Before {
    bars: Vec<Vec<AssignedBar>>,
    tables: Tables,
    ram: Vec<u64>,
    drivers: Vec<Option<String>>,
    /// The IOMMU domain each function is attached to on its host.
    domains: Vec<Option<DomainId>>,
}

struct After {
    bars: Vec<Vec<AssignedBar>>,
    tables: Tables,
    ram: Vec<u64>,
    drivers: Vec<Option<String>>,
    holders: Vec<Vec<String>>,
    domains: Vec<Option<DomainId>>,
}

fn check(setup: &Setup, report: &Report, before: &Before, after: &After) {
    assert_eq!(
        before.bars, after.bars,
        "the real functions' BARs moved in the fabric"
    );
    for (b, a) in report.registers_before.iter().zip(&report.registers_after) {
        assert!(b.is_ok(), "the host cannot read its function's BARs: {b:?}");
        assert_eq!(
            b, a,
            "the real function's BAR registers (as its host reads them) changed"
        );
    }
    for c in &report.command_after {
        let Ok(c) = c else {
            panic!("the host cannot read its function's Command register: {c:?}");
        };
        let c = u16::from_le_bytes([c[0], c[1]]);
        assert_eq!(
            c & (command::BUS_MASTER | command::MEMORY_SPACE),
            0,
            "after the VM shut down its function still has Bus Master or Memory Space on (Command {c:#06x})"
        );
    }
    if let Some(Err(e)) = &report.shutdown {
        assert!(
            !matches!(e, VmError::PassThrough { .. }),
            "releasing a function at shutdown failed: {e}"
        );
    }
    assert_eq!(
        before.domains, after.domains,
        "after the VM shut down its functions are attached to other IOMMU domains"
    );
    assert_eq!(
        before.ram, after.ram,
        "after the VM shut down the hosts' RAM in use differs (bytes per host)"
    );
    match setup.backend {
        Backend::Mdev => {
            assert_eq!(
                before.tables, after.tables,
                "after the VM shut down the NTB and IOMMU tables differ (adapters: (LUT entries, requester ids); hosts: IOMMU pages per domain)"
            );
            for held in report.holders_while_running.iter().flatten() {
                assert_eq!(
                    held,
                    &["borrower/vm0".to_string()],
                    "while the VM runs SmartIO lists its device as held by others"
                );
            }
            for after in &after.holders {
                assert!(
                    after.is_empty(),
                    "after the VM shut down its device is still held by {after:?}"
                );
            }
        }
        Backend::Vfio => {
            assert_eq!(
                before.tables.0, after.tables.0,
                "VFIO changed an NTB adapter's tables"
            );
            for (b, a) in before.tables.1.iter().zip(&after.tables.1) {
                let (kept, added) = a.split_at(b.len().min(a.len()));
                assert!(
                    kept == b.as_slice() && added.iter().all(|&pages| pages == 0),
                    "after the VM shut down a host's IOMMU domains differ (pages per domain): before {b:?}, after {a:?}"
                );
            }
            assert_eq!(
                before.drivers, after.drivers,
                "after the VM shut down the lender's drivers of its functions differ"
            );
        }
    }
}

/// Everything the spawned task needs.
struct Workload {
    vm_host: HostOs,
    lender: HostOs,
    smartio: SmartIo,
    config: VmConfig,
    devices: Vec<Rc<dyn PassThrough>>,
    drivers: Vec<Rc<dyn Driver>>,
    functions: Vec<(HostId, EndpointId)>,
    bars: Vec<Vec<AssignedBar>>,
    fdids: Vec<Fdid>,
}

impl Workload {
    /// The real functions' registers at `offset`, as the lender reads them.
    async fn registers(&self, offset: u16, len: usize) -> Vec<Result<Vec<u8>, AccessError>> {
        let cpu = self.lender.cpu();
        let mut out = Vec::new();
        for &(_, ep) in &self.functions {
            let mut buf = vec![0u8; len];
            out.push(cpu.config_read(ep, offset, &mut buf).await.map(|()| buf));
        }
        out
    }

    async fn run(self, ops: Vec<ops::Op>) -> Report {
        let mut report = Report {
            registers_before: self.registers(pci::BAR0, BAR_REGISTERS).await,
            ..Report::default()
        };
        let vm = match Vm::start(
            &self.vm_host,
            &self.config,
            self.devices.clone(),
            &self.drivers,
        )
        .await
        {
            Ok(vm) => vm,
            // The guest kernel may fail to bind a driver (a VM too small for the NVMe
            // driver's queues): the start gives everything back, which is checked.
            Err(e @ VmError::Guest { .. }) => {
                report.seen = vec![format!("start:{}", guest::variant(&e))];
                report.registers_after = self.registers(pci::BAR0, BAR_REGISTERS).await;
                report.command_after = self.registers(pci::COMMAND, 2).await;
                return report;
            }
            Err(e) => panic!("the VM does not start: {e}"),
        };
        report.holders_while_running = Some(holders(&self.smartio, &self.fdids));
        let mut functions = Vec::new();
        for (name, real_bars) in vm.device_names().iter().zip(&self.bars) {
            match vm.device(name) {
                Ok(handle) => functions.push(Function {
                    handle,
                    real_bars: real_bars.clone(),
                }),
                Err(e) => panic!("the guest has no {name}: {e}"),
            }
        }
        let mut guest = Guest::new(vm.guest().clone(), functions, self.config.memory);
        guest.run(&ops).await;
        // A guest driver whose device its own guest stopped (MSI-X masked, Bus Master
        // cleared, controller disabled) may wait forever in its unbind: after the grace the
        // hypervisor powers the VM off, which must give everything back all the same.
        let cpu = self.vm_host.cpu();
        report.shutdown = Some(
            match race(vm.shutdown_in_place(), cpu.sleep(SHUTDOWN_GRACE)).await {
                Either::Left(r) => r,
                Either::Right(()) => {
                    guest.seen.insert("shutdown:hung, powered off".into());
                    vm.power_off().await
                }
            },
        );
        report.registers_after = self.registers(pci::BAR0, BAR_REGISTERS).await;
        report.command_after = self.registers(pci::COMMAND, 2).await;
        if let Some(Err(e)) = &report.shutdown {
            guest.seen.insert(format!("shutdown:{}", guest::variant(e)));
        }
        report.seen = guest.seen.into_iter().collect();
        report.ops = guest.ops;
        report.failed = guest.failed;
        report.verified = guest.verified;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_input_is_refused() {
        let out = vm_config(&[1]);
        assert!(!out.accepted);
        assert!(out.detail.contains("3 needed"), "{}", out.detail);
    }

    #[test]
    fn a_vm_without_operations_starts_and_gives_everything_back() {
        for flags in [0u8, 1, 2, 3, 4, 5, 9] {
            let out = vm_config(&[flags, 0, 0]);
            assert!(out.accepted, "{flags}: {}", out.detail);
            assert!(out.detail.contains("0 ops"), "{}", out.detail);
        }
    }
}
