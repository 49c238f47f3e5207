//! VMs: functions passed through by local VFIO and by SmartIO's MDEV parent, driven by the
//! same native drivers inside the guest (Paper V §5, §7.3).

mod common;

use common::tables;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind, SHIPPED};
use smartio_drivers::{BlockOp, NvmeDevice, NvmeDriver};
use smartio_host::vm::GuestPageSize;
use smartio_host::{Driver, HostOs, PassThrough, Vfio, Vm, VmConfig, VmError};
use smartio_smartio::{BorrowOptions, Fdid, SmartIo, SmartIoError};
use std::cell::RefCell;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;

struct Setup {
    cluster: Cluster,
    hosts: Vec<HostOs>,
    smartio: SmartIo,
}

fn setup(scenario: &str) -> Setup {
    let engine = EngineKind::for_test_target(env!("CARGO_CRATE_NAME"));
    let cluster = Cluster::on(engine, scenario, &Calibration::default_embedded()).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    Setup {
        cluster,
        hosts,
        smartio,
    }
}

/// Shipped scenario `name` with the `nth` occurrence (0-based) of each `from` replaced by
/// `to`, and `extra` appended, written to a file of its own.
fn edited(name: &str, edits: &[(usize, &str, &str)], extra: &str) -> PathBuf {
    let mut text = SHIPPED
        .iter()
        .find(|s| s.name == name)
        .expect("shipped")
        .text
        .to_string();
    for &(nth, from, to) in edits {
        let at = text
            .match_indices(from)
            .nth(nth)
            .map(|(i, _)| i)
            .expect("the text to edit is there");
        text.replace_range(at..at + from.len(), to);
    }
    text.push_str(extra);
    // Tests run in parallel: each edited scenario gets its own file.
    static LOADS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "smartio-vm-{}-{}-{name}.toml",
        std::process::id(),
        LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, text).expect("temp file");
    path
}

fn setup_edited(name: &str, edits: &[(usize, &str, &str)], extra: &str) -> Setup {
    let path = edited(name, edits, extra);
    setup(path.to_str().expect("utf-8"))
}

impl Setup {
    fn fdid(&self, spec: &str) -> Fdid {
        self.smartio.find(spec).expect("registered")
    }

    /// `spec` assigned to VM `vm` (`host/vm`) for the MDEV parent.
    fn mdev(&self, spec: &str, vm: &str) -> Rc<dyn PassThrough> {
        self.smartio
            .assign_to_vm(self.fdid(spec), vm)
            .expect("assigned")
    }

    /// Who holds `spec`, as SmartIO lists its borrowers.
    fn holders(&self, spec: &str) -> Vec<String> {
        let fdid = self.fdid(spec);
        self.smartio
            .devices()
            .into_iter()
            .find(|d| d.fdid == fdid)
            .expect("listed")
            .borrowers
            .into_iter()
            .map(|b| b.host)
            .collect()
    }

    fn host(&self, name: &str) -> HostOs {
        self.hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .expect("host")
    }

    fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        let out = Rc::new(RefCell::new(None));
        let slot = out.clone();
        self.cluster.machine.spawn(async move {
            *slot.borrow_mut() = Some(task.await);
        });
        self.cluster.machine.run();
        let r = out.borrow_mut().take();
        r.expect("the task finished")
    }
}

const GIB: u64 = 1 << 30;

fn vm0() -> VmConfig {
    config("vm0", GIB, GuestPageSize::Huge)
}

fn config(name: &str, memory: u64, page: GuestPageSize) -> VmConfig {
    VmConfig {
        name: name.into(),
        memory,
        page,
    }
}

fn nvme() -> Vec<Rc<dyn Driver>> {
    vec![Rc::new(NvmeDriver::default())]
}

/// Writes `data` at `lba` and reads it back through the NVMe driver bound to `device` of
/// the (guest) kernel `os`.
async fn round_trip(os: HostOs, device: String, lba: u64, data: Vec<u8>) -> Vec<u8> {
    let len = data.len();
    write_blocks(os.clone(), device.clone(), lba, data).await;
    read_blocks(os, device, lba, len).await
}

/// Writes `data` at `lba` through the NVMe driver bound to `device` of the kernel `os`.
async fn write_blocks(os: HostOs, device: String, lba: u64, data: Vec<u8>) {
    let dev = os.driver_data::<NvmeDevice>(&device).expect("bound");
    let buf = os.alloc(data.len() as u64).expect("ram");
    os.write_memory(buf, &data).expect("guest RAM");
    let blocks = (data.len() / 512) as u32;
    dev.submit(0, BlockOp::Write, 1, lba, blocks, buf)
        .await
        .expect("write");
    os.free(buf);
}

/// Reads `len` bytes at `lba` through the NVMe driver bound to `device` of the kernel `os`,
/// into a buffer that held zeroes.
async fn read_blocks(os: HostOs, device: String, lba: u64, len: usize) -> Vec<u8> {
    let dev = os.driver_data::<NvmeDevice>(&device).expect("bound");
    let buf = os.alloc(len as u64).expect("ram");
    os.write_memory(buf, &vec![0u8; len]).expect("guest RAM");
    dev.submit(0, BlockOp::Read, 1, lba, (len / 512) as u32, buf)
        .await
        .expect("read");
    let mut back = vec![0u8; len];
    os.read_memory(buf, &mut back).expect("guest RAM");
    os.free(buf);
    back
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn a_local_nvme_passed_through_by_vfio_reads_back_what_the_guest_wrote() {
    let s = setup("vm-back-to-back");
    let lender = s.host("lender");
    let ram_before = lender.ram_in_use();
    let nvme0: Rc<dyn PassThrough> = Vfio::new(&lender, "nvme0").expect("a function");
    let data = pattern(8192, 7);
    let expect = data.clone();
    let back = s.run(async move {
        let vm = Vm::start(&lender, &vm0(), vec![nvme0], &nvme())
            .await
            .expect("the VM starts");
        assert_eq!(vm.device_names(), ["nvme0"]);
        let dev = vm
            .guest()
            .driver_data::<NvmeDevice>("nvme0")
            .expect("bound");
        eprintln!("mode {:?} at {}", dev.mode(), vm.guest().machine().now());
        let t0 = vm.guest().machine().now();
        let back = round_trip(vm.guest().clone(), "nvme0".into(), 16, data).await;
        eprintln!("round trip {}", vm.guest().machine().now().since(t0));
        vm.shutdown().await.expect("shuts down");
        back
    });
    assert!(back == expect, "the bytes read back are the bytes written");
    assert_eq!(
        s.host("lender").ram_in_use(),
        ram_before,
        "the VM's memory went back"
    );
}

#[test]
fn a_remote_nvme_passed_through_by_mdev_reads_back_what_the_guest_wrote_and_returns_everything() {
    let s = setup("vm-back-to-back");
    let borrower = s.host("borrower");
    let ram_before = borrower.ram_in_use();
    let tables_before = s.cluster.machine.fabric().tables_in_use();
    let fdid = s.smartio.find("lender:nvme0").expect("registered");
    let nvme0 = s
        .smartio
        .assign_to_vm(fdid, "borrower/vm0")
        .expect("assigned");
    assert!(
        s.smartio.devices().iter().all(|d| d.borrowers.is_empty()),
        "assigning borrows nothing"
    );
    let data = pattern(8192, 9);
    let expect = data.clone();
    let smartio = s.smartio.clone();
    let back = s.run(async move {
        let vm = Vm::start(
            &borrower,
            &vm0(),
            vec![nvme0 as Rc<dyn PassThrough>],
            &nvme(),
        )
        .await
        .expect("the VM starts");
        let held = smartio
            .devices()
            .into_iter()
            .find(|d| d.fdid == fdid)
            .expect("listed");
        assert_eq!(held.borrowers.len(), 1, "the guest's reset borrowed it");
        assert_eq!(held.borrowers[0].host, "borrower/vm0");
        let back = round_trip(vm.guest().clone(), "nvme0".into(), 16, data).await;
        vm.shutdown().await.expect("shuts down");
        back
    });
    assert!(back == expect, "the bytes read back are the bytes written");
    assert_eq!(
        s.host("borrower").ram_in_use(),
        ram_before,
        "the VM's memory went back"
    );
    assert_eq!(
        s.cluster.machine.fabric().tables_in_use(),
        tables_before,
        "every table entry the VM took is released"
    );
    assert!(s.smartio.devices().iter().all(|d| d.borrowers.is_empty()));
}

#[test]
fn a_second_vm_resetting_a_device_the_first_holds_is_told_who_holds_it_until_the_first_shuts_down()
{
    let s = setup("vm-back-to-back");
    let borrower = s.host("borrower");
    let fdid = s.fdid("lender:nvme0");
    let first = s.mdev("lender:nvme0", "borrower/vm0");
    let second = s.mdev("lender:nvme0", "borrower/vm1");
    let before = (tables(&s.cluster.machine), borrower.ram_in_use());
    let held = SmartIoError::Borrowed {
        device: "lender:nvme0".into(),
        fdid,
        borrower: "borrower/vm0".into(),
    };
    let (os, smartio, retry) = (borrower.clone(), s.smartio.clone(), second.clone());
    let lender = s.host("lender").id();
    let data = pattern(4096, 3);
    let expect = data.clone();
    let (during, refused, after_refusal, lending, api, back) = s.run(async move {
        let vm = Vm::start(&os, &vm0(), vec![first], &nvme())
            .await
            .expect("the first VM starts");
        let during = (tables(os.machine()), os.ram_in_use());
        let refused = Vm::start(
            &os,
            &config("vm1", GIB, GuestPageSize::Huge),
            vec![second],
            &nvme(),
        )
        .await
        .expect_err("the device is held by the first VM");
        let after_refusal = (tables(os.machine()), os.ram_in_use());
        // Device Lending, and programs through the device API, are refused too.
        let lending = smartio
            .borrow(os.id(), fdid, &BorrowOptions::default())
            .await
            .map(|l| l.device);
        let api: Vec<_> = [(os.id(), false), (lender, true)]
            .into_iter()
            .map(|(host, exclusive)| smartio.borrow_device(host, fdid, exclusive).map(|b| b.fdid))
            .collect();
        // The first VM is not disturbed by any of this.
        let back = round_trip(vm.guest().clone(), "nvme0".into(), 8, data).await;
        vm.shutdown().await.expect("shuts down");
        (during, refused, after_refusal, lending, api, back)
    });
    assert_eq!(
        refused,
        VmError::PassThrough {
            vm: "borrower/vm1".into(),
            device: "lender:nvme0".into(),
            message: held.to_string(),
        }
    );
    assert!(refused.to_string().contains("borrower/vm0"), "{refused}");
    assert_eq!(
        after_refusal, during,
        "the refused VM left no table entry and no memory taken"
    );
    assert_eq!(lending, Err(held.clone()), "Device Lending names the VM");
    assert_eq!(
        api,
        [Err(held.clone()), Err(held)],
        "the device API names the VM, shared or exclusive"
    );
    assert!(
        back == expect,
        "the first VM still reads back what it wrote"
    );
    assert_eq!(
        (tables(&s.cluster.machine), borrower.ram_in_use()),
        before,
        "the first VM's shutdown returned everything"
    );
    assert!(s.holders("lender:nvme0").is_empty());

    // Free again: Device Lending may borrow it, and after that the second VM may have it.
    let (smartio, host) = (s.smartio.clone(), borrower.id());
    let name = s
        .run(async move {
            let name = smartio
                .borrow(host, fdid, &BorrowOptions::default())
                .await
                .map(|l| l.device)?;
            smartio.give_back(host, fdid).await.expect("given back");
            Ok::<_, SmartIoError>(name)
        })
        .expect("borrowed by Device Lending after the VM shut down");
    assert_eq!(name, "nvme0");
    let (os, smartio) = (borrower.clone(), s.smartio.clone());
    let holders = s.run(async move {
        let vm = Vm::start(
            &os,
            &config("vm1", GIB, GuestPageSize::Huge),
            vec![retry],
            &nvme(),
        )
        .await
        .expect("the second VM starts now");
        let holders: Vec<String> = smartio
            .devices()
            .into_iter()
            .find(|d| d.fdid == fdid)
            .expect("listed")
            .borrowers
            .into_iter()
            .map(|b| b.host)
            .collect();
        vm.shutdown().await.expect("shuts down");
        holders
    });
    assert_eq!(holders, ["borrower/vm1"]);
    assert_eq!((tables(&s.cluster.machine), borrower.ram_in_use()), before);
}

/// Starts VM `vm` on `host` with `spec` passed through by MDEV, expecting a refusal; checks
/// that nothing was left taken or held, and returns the refusal.
fn refused_mdev_start(s: &Setup, host: &str, spec: &str, vm: VmConfig) -> VmError {
    let os = s.host(host);
    let before = (tables(&s.cluster.machine), os.ram_in_use());
    let device = s.mdev(spec, &format!("{host}/{}", vm.name));
    let guest = os.clone();
    let err = s
        .run(async move {
            Vm::start(&guest, &vm, vec![device], &nvme())
                .await
                .map(|vm| vm.name().to_string())
        })
        .expect_err("refused");
    assert_eq!(
        (tables(&s.cluster.machine), os.ram_in_use()),
        before,
        "nothing left taken: {err}"
    );
    assert!(s.holders(spec).is_empty(), "nobody holds {spec}");
    let hold = s
        .smartio
        .borrow_device(os.id(), s.fdid(spec), true)
        .expect("free for an exclusive hold");
    s.smartio.return_device(hold).expect("returned");
    err
}

#[test]
fn mdev_without_the_lender_iommu_refuses_the_vm_naming_the_lender_and_takes_nothing() {
    let s = setup_edited("back-to-back", &[(0, "iommu = false", "iommu = true")], "");
    let err = refused_mdev_start(&s, "borrower", "lender:nvme0", vm0());
    let needs = SmartIoError::MdevNeedsIommu {
        device: "lender:nvme0".into(),
        vm: "borrower/vm0".into(),
        host: "lender".into(),
    };
    assert_eq!(
        err,
        VmError::PassThrough {
            vm: "borrower/vm0".into(),
            device: "lender:nvme0".into(),
            message: needs.to_string(),
        }
    );
    assert!(
        err.to_string().contains("MDEV needs the IOMMU of lender"),
        "{err}"
    );
}

#[test]
fn mdev_without_the_borrower_iommu_refuses_the_vm_naming_the_borrower_and_takes_nothing() {
    let s = setup("back-to-back-lender-iommu");
    let err = refused_mdev_start(&s, "borrower", "lender:nvme0", vm0());
    let needs = SmartIoError::MdevNeedsIommu {
        device: "lender:nvme0".into(),
        vm: "borrower/vm0".into(),
        host: "borrower".into(),
    };
    assert_eq!(
        err,
        VmError::PassThrough {
            vm: "borrower/vm0".into(),
            device: "lender:nvme0".into(),
            message: needs.to_string(),
        }
    );
    assert!(
        err.to_string().contains("MDEV needs the IOMMU of borrower"),
        "{err}"
    );
}

#[test]
fn a_vm_larger_than_the_lender_ntb_window_is_refused_with_both_sizes_and_takes_nothing() {
    let s = setup_edited(
        "vm-back-to-back",
        &[(1, "window = \"128 GiB\"", "window = \"1 GiB\"")],
        "",
    );
    let err = refused_mdev_start(
        &s,
        "borrower",
        "lender:nvme0",
        config("vm0", 2 * GIB, GuestPageSize::Huge),
    );
    let VmError::PassThrough { message, .. } = &err else {
        panic!("a pass-through refusal: {err:?}");
    };
    let adapter = s
        .cluster
        .machine
        .fabric()
        .adapter_name(smartio_fabric::AdapterId(1));
    let small = SmartIoError::VmWindowTooSmall {
        device: "lender:nvme0".into(),
        vm: "borrower/vm0".into(),
        adapter,
        window: GIB,
        memory: 2 * GIB,
    };
    assert_eq!(*message, small.to_string());
    assert_eq!(
        message,
        "lender:nvme0: VM borrower/vm0 has 2G of memory, but lender.ntb0's NTB window is only 1G; MDEV maps all of it"
    );
}
