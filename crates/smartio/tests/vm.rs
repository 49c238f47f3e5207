//! VMs: functions passed through by local VFIO and by SmartIO's MDEV parent, driven by the
//! same native drivers inside the guest (Paper V §5, §7.3).

use crate::common;

use common::tables;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind};
use smartio_devices::dma::{MEMORY_BAR, REGISTER_BAR};
use smartio_drivers::{BlockOp, DmaTestDriver, DriverError, Location, NvmeDevice, NvmeDriver};
use smartio_host::vm::GuestPageSize;
use smartio_host::DeviceHandle;
use smartio_host::{Driver, HostOs, PassThrough, Refusal, Vfio, Vm, VmConfig, VmError};
use smartio_platform::{AccessError, BusAddr, PhysAddr};
use smartio_smartio::{BorrowOptions, Fdid, SmartIo, SmartIoError};
use std::future::Future;
use std::rc::Rc;

/// SmartIO's own error inside an MDEV pass-through refusal.
fn smartio_refusal(err: &VmError) -> &SmartIoError {
    match err {
        VmError::PassThrough { source, .. } => source
            .backend_error::<SmartIoError>()
            .unwrap_or_else(|| panic!("not SmartIO's refusal: {err:?}")),
        other => panic!("a pass-through refusal: {other:?}"),
    }
}

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

fn setup_edited(name: &str, edits: &[(usize, &str, &str)], extra: &str) -> Setup {
    let path = common::edited(name, edits, extra);
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
        self.cluster
            .machine
            .run_task(task)
            .expect("the task finished")
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
    assert!(
        matches!(&refused, VmError::PassThrough { vm, device, .. }
            if vm == "borrower/vm1" && device == "lender:nvme0"),
        "{refused:?}"
    );
    assert_eq!(smartio_refusal(&refused), &held);
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

/// `err` is borrower/vm0's refusal of lender:nvme0 for want of `host`'s IOMMU.
fn assert_needs_iommu(err: &VmError, host: &str) {
    let needs = SmartIoError::MdevNeedsIommu {
        device: "lender:nvme0".into(),
        vm: "borrower/vm0".into(),
        host: host.into(),
    };
    assert!(
        matches!(err, VmError::PassThrough { vm, device, .. }
            if vm == "borrower/vm0" && device == "lender:nvme0"),
        "{err:?}"
    );
    assert_eq!(smartio_refusal(err), &needs);
    assert!(
        err.to_string()
            .contains(&format!("MDEV needs the IOMMU of {host}")),
        "{err}"
    );
}

#[test]
fn mdev_without_the_lender_iommu_refuses_the_vm_naming_the_lender_and_takes_nothing() {
    let s = setup_edited("back-to-back", &[(0, "iommu = false", "iommu = true")], "");
    let err = refused_mdev_start(&s, "borrower", "lender:nvme0", vm0());
    assert_needs_iommu(&err, "lender");
}

#[test]
fn mdev_without_the_borrower_iommu_refuses_the_vm_naming_the_borrower_and_takes_nothing() {
    let s = setup("back-to-back-lender-iommu");
    let err = refused_mdev_start(&s, "borrower", "lender:nvme0", vm0());
    assert_needs_iommu(&err, "borrower");
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
        entry: 16 << 20,
    };
    assert_eq!(smartio_refusal(&err), &small);
    assert_eq!(
        small.to_string(),
        "lender:nvme0: VM borrower/vm0 has 2G of memory, but lender.ntb0's NTB window is only 1G; MDEV maps all of it, and an entry of 16M for the interrupts it relays"
    );
}

/// Binds the DMA test driver to the guest's `dev` (memory decoding and Bus Master on, as a
/// guest driver's probe does), with its completion word in guest RAM.
async fn bind_dma_test(dev: &DeviceHandle) -> DmaTestDriver<smartio_machine::Agent> {
    dev.enable().await.expect("enabled");
    let regs = dev.map_bar(REGISTER_BAR).expect("BAR0").window().base;
    let completion = dev.dma_alloc_coherent(4096).expect("guest RAM");
    DmaTestDriver::probe(dev.cpu().clone(), regs, completion.cpu, completion.bus)
        .await
        .expect("a DMA test device")
}

/// Guest-physical addresses a 2 GiB VM has no RAM and no BAR at: the first byte past its RAM
/// (below the PCI hole), one in the PCI hole above its BARs, one above 4 GiB past its BARs.
const STRAY: [u64; 3] = [2 * GIB, 0xF000_0000, 8 * GIB];
const SENTINEL: u8 = 0xa5;

/// What a guest's stray copies did.
#[derive(Debug)]
struct Stray {
    /// What the legitimate copy put in guest RAM: a page of sentinel, the payload, a page of
    /// sentinel.
    legit: Vec<u8>,
    /// The last page of guest RAM (sentinel before), after the stray copies.
    last_page: Vec<u8>,
    /// Each stray copy's outcome.
    results: Vec<Result<(), DriverError>>,
    /// Lender RAM at the stray addresses, before and after the stray copies (where a write
    /// the IOMMU did not stop would land).
    lender_ram: Vec<(Vec<u8>, Vec<u8>)>,
    /// Guest BARs of every passed-through function.
    bars: Vec<(u64, u64)>,
}

/// Starts a 2 GiB VM on `host` with DMA test device `device` passed through, copies
/// `payload` from the device's memory to guest RAM, then to each of [`STRAY`].
fn stray_copies(s: &Setup, host: &str, device: Rc<dyn PassThrough>, payload: Vec<u8>) -> Stray {
    let os = s.host(host);
    let lender = s.host("lender").id();
    s.run(async move {
        let vm = Vm::start(
            &os,
            &config("vm0", 2 * GIB, GuestPageSize::Huge),
            vec![device],
            &[],
        )
        .await
        .expect("the VM starts");
        let guest = vm.guest().clone();
        let dev = guest.device("dma0").expect("passed through");
        let driver = bind_dma_test(&dev).await;
        // The payload goes into the device's memory through the guest's mapping of BAR2.
        dev.map_bar(MEMORY_BAR)
            .expect("BAR2")
            .write(0, &payload)
            .await
            .expect("guest store to device memory");
        let buf = guest.alloc(3 * 4096).expect("guest RAM");
        guest
            .write_memory(buf, &[SENTINEL; 3 * 4096])
            .expect("guest RAM");
        let last = PhysAddr(2 * GIB - 4096);
        guest
            .write_memory(last, &[SENTINEL; 4096])
            .expect("guest RAM");
        driver
            .copy(
                Location::DeviceMemory(0),
                Location::Bus(BusAddr(buf.get() + 4096)),
                4096,
            )
            .await
            .expect("a copy into guest RAM");
        let mut legit = vec![0u8; 3 * 4096];
        guest.read_memory(buf, &mut legit).expect("guest RAM");

        let peek = |addr: u64| {
            let mut b = vec![0u8; 4096];
            os.machine().peek_memory(lender, PhysAddr(addr), &mut b);
            b
        };
        let lender_before: Vec<_> = STRAY.iter().map(|&a| peek(a)).collect();
        let mut results = Vec::new();
        for target in STRAY {
            results.push(
                driver
                    .copy(
                        Location::DeviceMemory(0),
                        Location::Bus(BusAddr(target)),
                        4096,
                    )
                    .await,
            );
        }
        let lender_ram = lender_before
            .into_iter()
            .zip(STRAY.iter().map(|&a| peek(a)))
            .collect();
        let mut last_page = vec![0u8; 4096];
        guest.read_memory(last, &mut last_page).expect("guest RAM");
        let bars = guest
            .devices()
            .iter()
            .flat_map(|d| d.bars().to_vec())
            .map(|b| (b.base.get(), b.size))
            .collect();
        vm.shutdown().await.expect("shuts down");
        Stray {
            legit,
            last_page,
            results,
            lender_ram,
            bars,
        }
    })
}

/// Checks what [`stray_copies`] did: each stray copy failed on the device and was one IOMMU
/// fault of the lender naming dma0 and the address (`faults`), and no memory changed.
fn check_stray(stray: &Stray, payload: &[u8], faults: &[AccessError]) {
    for &target in &STRAY {
        assert!(
            stray
                .bars
                .iter()
                .all(|&(base, size)| target < base || target >= base + size),
            "{target:#x} is no BAR: {:x?}",
            stray.bars
        );
    }
    assert_eq!(
        &stray.legit[..4096],
        &[SENTINEL; 4096][..],
        "before the buffer"
    );
    assert_eq!(
        &stray.legit[4096..8192],
        payload,
        "the legitimate copy landed"
    );
    assert_eq!(
        &stray.legit[8192..],
        &[SENTINEL; 4096][..],
        "after the buffer"
    );
    assert_eq!(
        stray.results,
        [2, 3, 4].map(|sequence| Err(DriverError::CopyFailed { sequence })),
        "every stray copy failed on the device"
    );
    let expected: Vec<BusAddr> = STRAY.iter().map(|&a| BusAddr(a)).collect();
    let got: Vec<BusAddr> = faults
        .iter()
        .map(|f| match f {
            AccessError::IommuFault {
                host,
                requester,
                addr,
                ..
            } => {
                assert_eq!((host.as_str(), requester.as_str()), ("lender", "dma0"));
                *addr
            }
            other => panic!("an IOMMU fault, not {other:?}"),
        })
        .collect();
    assert_eq!(got, expected, "one fault per stray copy, at its address");
    assert_eq!(
        stray.last_page, [SENTINEL; 4096],
        "the last page of guest RAM, next to the first stray address, is untouched"
    );
    for ((before, after), target) in stray.lender_ram.iter().zip(STRAY) {
        assert!(before == after, "lender RAM at {target:#x} is untouched");
        assert!(
            after[..] != payload[..],
            "the payload is not at {target:#x}"
        );
    }
}

#[test]
fn a_guest_dma_outside_the_vm_memory_through_mdev_is_a_lender_iommu_fault_and_changes_nothing() {
    let s = setup("vm-back-to-back");
    let fdid = s.fdid("lender:dma0");
    let before = tables(&s.cluster.machine);
    let dma0 = s.mdev("lender:dma0", "borrower/vm0");
    let payload = pattern(4096, 0x3c);
    let stray = stray_copies(&s, "borrower", dma0, payload.clone());
    let faults: Vec<AccessError> = s
        .smartio
        .device_faults(fdid)
        .expect("known")
        .into_iter()
        .map(|f| f.error)
        .collect();
    check_stray(&stray, &payload, &faults);
    assert_eq!(
        s.cluster.machine.faults().len(),
        STRAY.len(),
        "no other fault anywhere"
    );
    assert_eq!(before, tables(&s.cluster.machine), "everything returned");
}

#[test]
fn a_guest_dma_outside_the_vm_memory_through_vfio_is_an_iommu_fault_and_changes_nothing() {
    let s = setup("vm-back-to-back");
    let dma0: Rc<dyn PassThrough> = Vfio::new(&s.host("lender"), "dma0").expect("a function");
    let payload = pattern(4096, 0x4d);
    let stray = stray_copies(&s, "lender", dma0, payload.clone());
    let faults: Vec<AccessError> = s
        .cluster
        .machine
        .faults()
        .into_iter()
        .map(|f| f.error)
        .collect();
    check_stray(&stray, &payload, &faults);
}

/// What peer-to-peer between dma0 and dma1 of one VM did, as the guest saw it.
#[derive(Debug)]
struct Peers {
    /// Where dma0 reaches dma1's memory, and dma1's BAR2 in the guest.
    to_dma1: (BusAddr, BusAddr),
    /// Where dma1 reaches dma0's memory, and dma0's BAR2 in the guest.
    to_dma0: (BusAddr, BusAddr),
    /// dma1's memory at 0x1000 (written by dma0) and at 0x8000 (read by dma1 from dma0),
    /// through the guest's mapping of its BAR2.
    seen: (Vec<u8>, Vec<u8>),
}

/// Starts a VM on `host` with `devices` (dma0 and dma1) passed through. dma0 writes `push`
/// (from its memory at 0) into dma1's memory at 0x1000; dma1 reads `pull` from dma0's
/// memory at 0x2000 into its own at 0x8000.
fn peer_copies(
    s: &Setup,
    host: &str,
    devices: Vec<Rc<dyn PassThrough>>,
    push: Vec<u8>,
    pull: Vec<u8>,
) -> Peers {
    let os = s.host(host);
    s.run(async move {
        let vm = Vm::start(&os, &vm0(), devices, &[])
            .await
            .expect("the VM starts");
        assert_eq!(vm.device_names(), ["dma0", "dma1"]);
        let guest = vm.guest().clone();
        let a = guest.device("dma0").expect("passed through");
        let b = guest.device("dma1").expect("passed through");
        let (driver_a, driver_b) = (bind_dma_test(&a).await, bind_dma_test(&b).await);
        let a_mem = a.map_bar(MEMORY_BAR).expect("BAR2");
        let b_mem = b.map_bar(MEMORY_BAR).expect("BAR2");
        a_mem.write(0, &push).await.expect("guest store");
        a_mem.write(0x2000, &pull).await.expect("guest store");
        let to_dma1 = a.dma_map_peer(&b, MEMORY_BAR).expect("peer");
        let to_dma0 = b.dma_map_peer(&a, MEMORY_BAR).expect("peer");
        driver_a
            .copy(
                Location::DeviceMemory(0),
                Location::Bus(to_dma1.offset(0x1000)),
                push.len() as u64,
            )
            .await
            .expect("dma0 writes into dma1");
        driver_b
            .copy(
                Location::Bus(to_dma0.offset(0x2000)),
                Location::DeviceMemory(0x8000),
                pull.len() as u64,
            )
            .await
            .expect("dma1 reads from dma0");
        let mut pushed = vec![0u8; push.len()];
        b_mem.read(0x1000, &mut pushed).await.expect("guest load");
        let mut pulled = vec![0u8; pull.len()];
        b_mem.read(0x8000, &mut pulled).await.expect("guest load");
        vm.shutdown().await.expect("shuts down");
        Peers {
            to_dma1: (to_dma1, b_mem.window().base),
            to_dma0: (to_dma0, a_mem.window().base),
            seen: (pushed, pulled),
        }
    })
}

/// Checks what [`peer_copies`] did: peers are reached at their guest BAR addresses, the
/// bytes arrived in dma1's real memory at the lender, and nothing faulted.
fn check_peers(s: &Setup, peers: &Peers, push: &[u8], pull: &[u8]) {
    assert_eq!(
        peers.to_dma1.0, peers.to_dma1.1,
        "dma0 reaches dma1 at its guest-physical BAR"
    );
    assert_eq!(
        peers.to_dma0.0, peers.to_dma0.1,
        "dma1 reaches dma0 at its guest-physical BAR"
    );
    assert!(
        peers.seen.0 == push,
        "the guest sees what dma0 wrote into dma1"
    );
    assert!(
        peers.seen.1 == pull,
        "the guest sees what dma1 read from dma0"
    );
    let lender = s.host("lender");
    let model = s
        .cluster
        .copy_engine(lender.endpoint_of("dma1").expect("dma1"))
        .expect("a copy engine");
    let (mut pushed, mut pulled) = (vec![0u8; push.len()], vec![0u8; pull.len()]);
    model.read_memory(0x1000, &mut pushed);
    model.read_memory(0x8000, &mut pulled);
    assert!(pushed == push, "dma1's memory holds what dma0 wrote");
    assert!(pulled == pull, "dma1's memory holds what it read from dma0");
    assert!(
        s.cluster.machine.faults().is_empty(),
        "{:?}",
        s.cluster.machine.faults()
    );
}

#[test]
fn two_devices_passed_through_by_mdev_copy_to_and_from_each_other_at_guest_bar_addresses() {
    let s = setup("vm-back-to-back");
    let before = tables(&s.cluster.machine);
    let devices = vec![
        s.mdev("lender:dma0", "borrower/vm0"),
        s.mdev("lender:dma1", "borrower/vm0"),
    ];
    let (push, pull) = (pattern(8192, 0x11), pattern(4096, 0x22));
    let peers = peer_copies(&s, "borrower", devices, push.clone(), pull.clone());
    check_peers(&s, &peers, &push, &pull);
    assert_eq!(before, tables(&s.cluster.machine), "everything returned");
}

#[test]
fn two_devices_passed_through_by_vfio_copy_to_and_from_each_other_at_guest_bar_addresses() {
    let s = setup("vm-back-to-back");
    let lender = s.host("lender");
    let devices: Vec<Rc<dyn PassThrough>> = vec![
        Vfio::new(&lender, "dma0").expect("a function"),
        Vfio::new(&lender, "dma1").expect("a function"),
    ];
    let (push, pull) = (pattern(8192, 0x33), pattern(4096, 0x44));
    let peers = peer_copies(&s, "lender", devices, push.clone(), pull.clone());
    check_peers(&s, &peers, &push, &pull);
}

/// What a guest can learn of its nvme0.
#[derive(Debug, PartialEq, Eq)]
struct NvmeView {
    name: String,
    id: smartio_host::PciId,
    bars: Vec<smartio_host::BarWindow>,
    /// The configuration header and capabilities (256 bytes).
    config: Vec<u8>,
    /// Identify Controller.
    controller: Vec<u8>,
    /// Identify Namespace 1.
    namespace: Vec<u8>,
}

/// Starts `vm0` on `host` with `nvme0` passed through and returns what its guest sees.
fn nvme_as_the_guest_sees_it(s: &Setup, host: &str, nvme0: Rc<dyn PassThrough>) -> NvmeView {
    let os = s.host(host);
    s.run(async move {
        let vm = Vm::start(&os, &vm0(), vec![nvme0], &nvme())
            .await
            .expect("the VM starts");
        let handle = vm.device("nvme0").expect("in the guest's tree");
        let dev = vm
            .guest()
            .driver_data::<NvmeDevice>("nvme0")
            .expect("bound");
        let view = NvmeView {
            name: handle.name().to_string(),
            id: handle.id(),
            bars: handle.bars().to_vec(),
            config: handle
                .config_read(0, 256)
                .await
                .expect("configuration space"),
            controller: dev.identify(1, 0).await.expect("Identify Controller"),
            namespace: dev.identify(0, 1).await.expect("Identify Namespace"),
        };
        vm.shutdown().await.expect("shuts down");
        view
    })
}

#[test]
fn a_guest_cannot_tell_an_nvme_passed_through_by_vfio_from_one_passed_through_by_mdev() {
    let s = setup("vm-back-to-back");
    let local = nvme_as_the_guest_sees_it(
        &s,
        "lender",
        Vfio::new(&s.host("lender"), "nvme0").expect("a function"),
    );
    let remote = nvme_as_the_guest_sees_it(&s, "borrower", s.mdev("lender:nvme0", "borrower/vm0"));
    assert_eq!(local.name, "nvme0");
    assert_eq!(
        local.id.class,
        smartio_devices::nvme::spec::CLASS_CODE,
        "an NVMe controller"
    );
    assert!(!local.bars.is_empty(), "BARs placed");
    assert!(
        local.controller.iter().any(|&b| b != 0) && local.namespace.iter().any(|&b| b != 0),
        "identify data is there"
    );
    assert_eq!(local.name, remote.name, "the name");
    assert_eq!(local.id, remote.id, "vendor, device and class");
    assert_eq!(
        local.bars, remote.bars,
        "BAR indices, guest addresses and sizes"
    );
    assert_eq!(local.config, remote.config, "configuration space");
    assert!(local.controller == remote.controller, "Identify Controller");
    assert!(local.namespace == remote.namespace, "Identify Namespace");
}

/// vm-chassis with a second borrower, cabled to a second NTB adapter in the lender's
/// chassis:
///
/// ```text
///   borrower ── ntb0 ═══ lender.ntb0 ─┐
///                                    chassis (nvme0, dma0, dma1)
///   borrower2 ── ntb0 ═══ lender.ntb1 ┘
/// ```
const SECOND_BORROWER: &str = r#"
[[host.ntb]]
name = "ntb1"
chip = "PEX8733"
parent = "chassis"
link = "gen3 x16"
window = "128 GiB"
connect = "borrower2.ntb0"
cable = "gen3 x16"

[[host]]
name = "borrower2"
ram = "64 GiB"
iommu = true
cores = 8

[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "128 GiB"
"#;

#[test]
fn a_vm_cold_migrated_to_another_borrower_reads_what_it_wrote_on_the_first() {
    let s = setup_edited("vm-chassis", &[], SECOND_BORROWER);
    assert_eq!(
        s.hosts.iter().map(|h| h.name()).collect::<Vec<_>>(),
        ["borrower", "lender", "borrower2"]
    );
    let adapters: Vec<String> = (0..4)
        .map(|i| {
            s.cluster
                .machine
                .fabric()
                .adapter_name(smartio_fabric::AdapterId(i))
        })
        .collect();
    assert_eq!(
        adapters,
        [
            "borrower.ntb0",
            "lender.ntb0",
            "lender.ntb1",
            "borrower2.ntb0"
        ]
    );
    let fdid = s.fdid("lender:nvme0");
    let before = tables(&s.cluster.machine);
    let data = pattern(64 << 10, 0x6b);
    let expect = data.clone();

    let (first, host) = (s.mdev("lender:nvme0", "borrower/vm0"), s.host("borrower"));
    let during = s.run(async move {
        let vm = Vm::start(&host, &vm0(), vec![first], &nvme())
            .await
            .expect("starts on borrower");
        write_blocks(vm.guest().clone(), "nvme0".into(), 128, data).await;
        let during = tables(host.machine());
        vm.shutdown().await.expect("shuts down");
        during
    });
    // Taken for borrower/vm0: entries on borrower.ntb0 and lender.ntb0, borrower IOMMU
    // pages over the VM's memory; nothing on lender.ntb1 or borrower2.
    let used = |t: &(Vec<(usize, usize)>, Vec<Vec<usize>>)| {
        let pages = |host: usize| t.1[host].iter().sum::<usize>();
        (
            t.0.iter().map(|a| a.0).collect::<Vec<_>>(),
            pages(0),
            pages(2),
        )
    };
    let (luts, borrower_pages, borrower2_pages) = used(&during);
    let (idle_luts, idle_borrower, idle_borrower2) = used(&before);
    assert!(luts[0] > idle_luts[0] && luts[1] > idle_luts[1], "{luts:?}");
    assert_eq!(
        &luts[2..],
        &idle_luts[2..],
        "nothing through the other pair"
    );
    assert!(borrower_pages >= idle_borrower + (GIB / 4096) as usize);
    assert_eq!(borrower2_pages, idle_borrower2);
    assert_eq!(
        before,
        tables(&s.cluster.machine),
        "every entry taken for borrower/vm0 was released"
    );
    s.smartio
        .unassign_from_vm(fdid, "borrower/vm0")
        .expect("unassigned");

    let (second, host) = (s.mdev("lender:nvme0", "borrower2/vm0"), s.host("borrower2"));
    let smartio = s.smartio.clone();
    let (holders, back, during) = s.run(async move {
        let vm = Vm::start(&host, &vm0(), vec![second], &nvme())
            .await
            .expect("starts on borrower2");
        let during = tables(host.machine());
        let holders: Vec<String> = smartio
            .devices()
            .into_iter()
            .filter(|d| d.fdid == fdid)
            .flat_map(|d| d.borrowers)
            .map(|b| b.host)
            .collect();
        let back = read_blocks(vm.guest().clone(), "nvme0".into(), 128, 64 << 10).await;
        vm.shutdown().await.expect("shuts down");
        (holders, back, during)
    });
    assert_eq!(holders, ["borrower2/vm0"]);
    let (luts, borrower_pages, borrower2_pages) = used(&during);
    assert!(luts[2] > idle_luts[2] && luts[3] > idle_luts[3], "{luts:?}");
    assert_eq!(
        &luts[..2],
        &idle_luts[..2],
        "nothing through the first pair"
    );
    assert_eq!(borrower_pages, idle_borrower);
    assert!(borrower2_pages >= idle_borrower2 + (GIB / 4096) as usize);
    assert!(
        back == expect,
        "the migrated VM reads back what it wrote before"
    );
    let assigned: Vec<Vec<String>> = s
        .smartio
        .devices()
        .into_iter()
        .filter(|d| d.fdid == fdid)
        .map(|d| d.assigned)
        .collect();
    assert_eq!(assigned, [["borrower2/vm0"]]);
    assert_eq!(
        before,
        tables(&s.cluster.machine),
        "and again after the second"
    );
    assert!(s.cluster.machine.faults().is_empty());
}

/// In a fresh vm-back-to-back, an MDEV VM on the borrower writes and reads back 64 KiB and
/// shuts down: the simulated time at the end, the engine's counters and the bytes.
fn mdev_round_trip_from_scratch() -> (
    smartio_platform::SimTime,
    smartio_machine::Counters,
    Vec<u8>,
) {
    let s = setup("vm-back-to-back");
    let (nvme0, os) = (s.mdev("lender:nvme0", "borrower/vm0"), s.host("borrower"));
    let back = s.run(async move {
        let vm = Vm::start(&os, &vm0(), vec![nvme0], &nvme())
            .await
            .expect("the VM starts");
        let back = round_trip(vm.guest().clone(), "nvme0".into(), 64, pattern(64 << 10, 5)).await;
        vm.shutdown().await.expect("shuts down");
        back
    });
    (s.cluster.machine.now(), s.cluster.machine.counters(), back)
}

#[test]
fn an_mdev_round_trip_run_twice_from_scratch_ends_at_the_same_time_with_the_same_bytes() {
    let (t1, c1, b1) = mdev_round_trip_from_scratch();
    let (t2, c2, b2) = mdev_round_trip_from_scratch();
    assert!(t1.0 > 0, "time passed");
    assert_eq!(t1, t2, "the same simulated time");
    assert_eq!(c1, c2, "the same events and TLPs");
    assert!(b1 == pattern(64 << 10, 5), "the bytes written came back");
    assert!(b1 == b2, "the same bytes");
}

#[test]
fn a_vm_in_small_pages_scattered_over_host_ram_gets_its_bytes_through_mdev() {
    let s = setup("vm-back-to-back");
    let borrower = s.host("borrower");
    let before = (tables(&s.cluster.machine), borrower.ram_in_use());
    // Fragment the borrower's RAM: 8192 free 4 KiB holes, each between two taken pages, so
    // the VM's first pages land one per hole and no two are adjacent in the host.
    let pages: Vec<PhysAddr> = (0..2 * 8192)
        .map(|_| borrower.alloc(4096).expect("ram"))
        .collect();
    let (free, kept): (Vec<_>, Vec<_>) = pages.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    for (_, &p) in &free {
        borrower.free(p);
    }
    let nvme0 = s.mdev("lender:nvme0", "borrower/vm0");
    let small = config("vm0", 256 << 20, GuestPageSize::Small);
    let (os, smartio) = (borrower.clone(), s.smartio.clone());
    let data = pattern(64 << 10, 0x77);
    let expect = data.clone();
    let (pieces, holders, back) = s.run(async move {
        let vm = Vm::start(&os, &small, vec![nvme0], &nvme())
            .await
            .expect("the VM starts");
        // The guest's buffers (above its 16 MiB) are scattered in the host page by page.
        let pieces = vm
            .context()
            .memory()
            .memory()
            .translate(smartio_platform::GuestPhysAddr(16 << 20), 1 << 20)
            .expect("guest RAM")
            .len();
        let holders: Vec<String> = smartio
            .devices()
            .into_iter()
            .flat_map(|d| d.borrowers)
            .map(|b| b.host)
            .collect();
        let back = round_trip(vm.guest().clone(), "nvme0".into(), 32, data).await;
        vm.shutdown().await.expect("shuts down");
        (pieces, holders, back)
    });
    assert_eq!(pieces, 256, "one host piece per 4 KiB guest page");
    assert_eq!(holders, ["borrower/vm0"]);
    assert!(back == expect, "the bytes read back are the bytes written");
    for (_, &p) in &kept {
        borrower.free(p);
    }
    assert_eq!(
        (tables(&s.cluster.machine), borrower.ram_in_use()),
        before,
        "everything went back"
    );
}

/// Guest-physical pages at the edges of a 4 GiB VM's two ranges: the last page of low
/// memory, the first and the last page of high memory.
const EDGES: [u64; 3] = [3 * GIB - 4096, 4 * GIB, 5 * GIB - 4096];

/// Starts a 4 GiB VM on `host` with DMA test device `device` passed through and copies a
/// page from the device's memory to each of [`EDGES`]; returns what the guest reads there.
fn copies_to_the_edges(s: &Setup, host: &str, device: Rc<dyn PassThrough>) -> Vec<Vec<u8>> {
    let os = s.host(host);
    s.run(async move {
        let vm = Vm::start(
            &os,
            &config("vm0", 4 * GIB, GuestPageSize::Huge),
            vec![device],
            &[],
        )
        .await
        .expect("the VM starts");
        let layout = vm.context().layout().clone();
        assert_eq!((layout.low, layout.high), (0..3 * GIB, 4 * GIB..5 * GIB));
        let guest = vm.guest().clone();
        let dev = guest.device("dma0").expect("passed through");
        let driver = bind_dma_test(&dev).await;
        let memory = dev.map_bar(MEMORY_BAR).expect("BAR2");
        let mut seen = Vec::new();
        for (i, gpa) in EDGES.into_iter().enumerate() {
            memory
                .write(0, &pattern(4096, i as u8))
                .await
                .expect("guest store");
            driver
                .copy(Location::DeviceMemory(0), Location::Bus(BusAddr(gpa)), 4096)
                .await
                .expect("a copy into guest RAM");
            let mut page = vec![0u8; 4096];
            guest
                .read_memory(PhysAddr(gpa), &mut page)
                .expect("guest RAM");
            seen.push(page);
        }
        vm.shutdown().await.expect("shuts down");
        seen
    })
}

#[test]
fn guest_dma_reaches_both_ends_of_low_and_high_memory_through_mdev_and_vfio() {
    let s = setup("vm-back-to-back");
    let expect: Vec<Vec<u8>> = (0..EDGES.len()).map(|i| pattern(4096, i as u8)).collect();
    let before = tables(&s.cluster.machine);
    let mdev = copies_to_the_edges(&s, "borrower", s.mdev("lender:dma0", "borrower/vm0"));
    assert!(
        mdev == expect,
        "MDEV: each page landed where the guest reads it"
    );
    assert_eq!(
        before,
        tables(&s.cluster.machine),
        "MDEV returned everything"
    );
    let vfio = copies_to_the_edges(
        &s,
        "lender",
        Vfio::new(&s.host("lender"), "dma0").expect("a function"),
    );
    assert!(
        vfio == expect,
        "VFIO: each page landed where the guest reads it"
    );
    assert!(s.cluster.machine.faults().is_empty());
}

#[test]
fn a_vm_refused_its_second_device_gives_back_the_first_it_had_already_reset() {
    let s = setup("vm-back-to-back");
    let borrower = s.host("borrower");
    let first = s.mdev("lender:nvme0", "borrower/vm0");
    let (dma0, nvme0) = (
        s.mdev("lender:dma0", "borrower/vm1"),
        s.mdev("lender:nvme0", "borrower/vm1"),
    );
    let (os, smartio) = (borrower.clone(), s.smartio.clone());
    let (during, refused, after, dma0_holders) = s.run(async move {
        let vm = Vm::start(&os, &vm0(), vec![first], &nvme())
            .await
            .expect("the first VM starts");
        let during = (tables(os.machine()), os.ram_in_use());
        let refused = Vm::start(
            &os,
            &config("vm1", GIB, GuestPageSize::Huge),
            vec![dma0, nvme0],
            &nvme(),
        )
        .await
        .expect_err("nvme0 is held by the first VM");
        let after = (tables(os.machine()), os.ram_in_use());
        let dma0_holders: Vec<String> = smartio
            .devices()
            .into_iter()
            .filter(|d| d.device == "dma0")
            .flat_map(|d| d.borrowers)
            .map(|b| b.host)
            .collect();
        vm.shutdown().await.expect("shuts down");
        (during, refused, after, dma0_holders)
    });
    assert!(
        matches!(&refused, VmError::PassThrough { vm, device, .. }
            if vm == "borrower/vm1" && device == "lender:nvme0"),
        "{refused:?}"
    );
    assert!(
        matches!(smartio_refusal(&refused), SmartIoError::Borrowed { borrower, .. }
            if borrower == "borrower/vm0"),
        "{refused:?}"
    );
    assert!(dma0_holders.is_empty(), "dma0 went back: {dma0_holders:?}");
    assert_eq!(after, during, "the refused VM left nothing taken");
}

#[test]
fn a_function_passed_through_by_vfio_is_not_lent_and_a_lent_one_is_not_passed_through() {
    let s = setup("vm-back-to-back");
    let lender = s.host("lender");
    let borrower = s.host("borrower");
    let fdid = s.smartio.find("lender:nvme0").expect("registered");
    let smartio = s.smartio.clone();
    let (lent_refused, mdev_refused, after) = s.run({
        let (lender, borrower) = (lender.clone(), borrower.clone());
        async move {
            let vfio: Rc<dyn PassThrough> = Vfio::new(&lender, "nvme0").expect("a function");
            let vm = Vm::start(&lender, &vm0(), vec![vfio], &nvme())
                .await
                .expect("the VFIO VM starts");
            assert_eq!(lender.bound_driver("nvme0").as_deref(), Some("vfio-pci"));
            let lent_refused = smartio
                .borrow(borrower.id(), fdid, &BorrowOptions::default())
                .await;
            let mdev = smartio
                .assign_to_vm(fdid, "borrower/vm0")
                .expect("assigned");
            let mdev_refused = Vm::start(
                &borrower,
                &vm0(),
                vec![mdev as Rc<dyn PassThrough>],
                &nvme(),
            )
            .await
            .map(|_| ());
            vm.shutdown().await.expect("shuts down");
            let after = lender.bound_driver("nvme0");
            (lent_refused, mdev_refused, after)
        }
    });
    match lent_refused {
        Err(SmartIoError::InUseByLender { driver, .. }) => assert_eq!(driver, "vfio-pci"),
        other => panic!("expected InUseByLender, got {other:?}"),
    }
    match mdev_refused {
        Err(e) => assert!(
            matches!(smartio_refusal(&e), SmartIoError::InUseByLender { driver, .. } if driver == "vfio-pci"),
            "{e:?}"
        ),
        Ok(()) => panic!("expected a refused pass-through"),
    }
    assert_eq!(after, None, "VFIO let go of the function");

    // The other way round: a lent function is SmartIO's until it is returned.
    let smartio = s.smartio.clone();
    let (refused, after) = s.run(async move {
        smartio
            .borrow(borrower.id(), fdid, &BorrowOptions::default())
            .await
            .expect("lent");
        assert_eq!(lender.bound_driver("nvme0").as_deref(), Some("smartio"));
        let vfio: Rc<dyn PassThrough> = Vfio::new(&lender, "nvme0").expect("a function");
        let refused = Vm::start(&lender, &vm0(), vec![vfio], &nvme())
            .await
            .map(|_| ());
        smartio
            .give_back(borrower.id(), fdid)
            .await
            .expect("returned");
        (refused, lender.bound_driver("nvme0"))
    });
    match refused {
        Err(VmError::PassThrough { source, .. }) => {
            assert!(
                matches!(&*source, Refusal::InUse { driver, .. } if driver == "smartio"),
                "{source:?}"
            )
        }
        other => panic!("expected a refused pass-through, got {other:?}"),
    }
    assert_eq!(after, None, "the return gave the claim up");
}

/// `spec` for VM `vm0` of `os`: `lender:device` by MDEV, a device of `os` by VFIO.
fn pass_through(s: &Setup, os: &HostOs, spec: &str) -> Rc<dyn PassThrough> {
    if spec.contains(':') {
        let fdid = s.smartio.find(spec).expect("registered");
        s.smartio
            .assign_to_vm(fdid, &format!("{}/vm0", os.name()))
            .expect("assigned")
    } else {
        Vfio::new(os, spec).expect("a function")
    }
}

/// Tasks left waiting once everything a run started is over: device engines, and the NVMe
/// driver's interrupt handler threads (the same on bare metal and in a VM).
fn blocked_after(s: &Setup) -> usize {
    s.cluster.machine.run().blocked_tasks
}

#[test]
fn no_interrupt_relay_outlives_its_vm() {
    for (host, spec) in [("borrower", "lender:nvme0"), ("lender", "nvme0")] {
        // In a VM, then shut down.
        let s = setup("vm-back-to-back");
        let os = s.host(host);
        let device = pass_through(&s, &os, spec);
        let back = s.run(async move {
            let vm = Vm::start(&os, &vm0(), vec![device], &nvme())
                .await
                .expect("starts");
            let back = round_trip(vm.guest().clone(), "nvme0".into(), 8, pattern(4096, 3)).await;
            vm.shutdown().await.expect("shuts down");
            back
        });
        assert_eq!(back, pattern(4096, 3));
        let in_vm = blocked_after(&s);

        // The same driver on bare metal (borrowed, or the host's own), then let go.
        let s = setup("vm-back-to-back");
        let os = s.host(host);
        let (smartio, fdid) = (
            s.smartio.clone(),
            s.smartio.find("lender:nvme0").expect("registered"),
        );
        let remote = spec.contains(':');
        let back = s.run(async move {
            os.register_driver(Rc::new(NvmeDriver::default()));
            let name = if remote {
                smartio
                    .borrow(os.id(), fdid, &BorrowOptions::default())
                    .await
                    .expect("lent")
                    .device
            } else {
                os.probe("nvme0").await.expect("binds");
                "nvme0".to_string()
            };
            let back = round_trip(os.clone(), name.clone(), 8, pattern(4096, 3)).await;
            if remote {
                smartio.give_back(os.id(), fdid).await.expect("returned");
            } else {
                os.unbind(&name).await.expect("unbinds");
            }
            back
        });
        assert_eq!(back, pattern(4096, 3));
        assert_eq!(
            in_vm,
            blocked_after(&s),
            "{host}: tasks left after the VM beyond the bare-metal driver's own (a relay outlived its VM)"
        );
    }
}

/// The NVMe driver with legacy INTx instead of MSI-X.
fn nvme_intx() -> Vec<Rc<dyn Driver>> {
    vec![Rc::new(NvmeDriver {
        config: smartio_drivers::NvmeDriverConfig {
            intx: true,
            ..Default::default()
        },
    })]
}

#[test]
fn legacy_intx_works_in_vms_by_mdev_and_vfio_but_not_for_a_bare_metal_borrower() {
    // In VMs: the same driver, its one INTx relayed into the guest.
    for (host, spec) in [("borrower", "lender:nvme0"), ("lender", "nvme0")] {
        let s = setup("vm-back-to-back");
        let os = s.host(host);
        let device = pass_through(&s, &os, spec);
        let lender = s.host("lender");
        let endpoint = lender.endpoint_of("nvme0").expect("a function");
        let (back, line) = s.run(async move {
            let vm = Vm::start(&os, &vm0(), vec![device], &nvme_intx())
                .await
                .expect("starts with INTx");
            // The real function: MSI-X off, INTx enabled, routed to a line of its host.
            let mut cfg = [0u8; 0x40];
            lender
                .cpu()
                .config_read(endpoint, 0, &mut cfg)
                .await
                .expect("config");
            let cmd = u16::from_le_bytes([cfg[4], cfg[5]]);
            assert_eq!(cmd & smartio_platform::pci::command::INTX_DISABLE, 0);
            let line = cfg[usize::from(smartio_platform::pci::INTERRUPT_LINE)];
            let back = round_trip(vm.guest().clone(), "nvme0".into(), 32, pattern(8192, 5)).await;
            vm.shutdown().await.expect("shuts down");
            (back, line)
        });
        assert_eq!(back, pattern(8192, 5), "{host}: bytes through INTx");
        assert!(
            smartio_platform::msi::INTX_LINES.contains(&line),
            "{host}: routed to line {line}"
        );
    }

    // Bare metal: the host's own function takes INTx; a borrowed one cannot.
    let s = setup("vm-back-to-back");
    let lender = s.host("lender");
    let borrower = s.host("borrower");
    let fdid = s.smartio.find("lender:nvme0").expect("registered");
    let smartio = s.smartio.clone();
    let (local, lent) = s.run(async move {
        lender.register_driver(nvme_intx()[0].clone());
        lender.probe("nvme0").await.expect("binds with INTx");
        let local = round_trip(lender.clone(), "nvme0".into(), 64, pattern(4096, 6)).await;
        lender.unbind("nvme0").await.expect("unbinds");
        borrower.register_driver(nvme_intx()[0].clone());
        let lent = smartio
            .borrow(borrower.id(), fdid, &BorrowOptions::default())
            .await
            .map(|_| ());
        (local, lent)
    });
    assert_eq!(local, pattern(4096, 6));
    match lent {
        Err(SmartIoError::Host(smartio_host::HostError::ProbeFailed { source, .. })) => {
            // The driver's own error, kept typed: the host refused it INTx across the NTB.
            let driver_error = source.downcast_ref::<smartio_drivers::NvmeError>();
            assert!(
                matches!(
                    driver_error,
                    Some(smartio_drivers::NvmeError::Host(
                        smartio_host::HostError::NoIntx {
                            why: smartio_host::os::NoIntx::AcrossNtb,
                            ..
                        }
                    ))
                ),
                "{source:?}"
            );
            assert!(
                source
                    .to_string()
                    .contains("legacy interrupts cannot cross the NTB"),
                "{source}"
            );
        }
        other => panic!("expected the driver's probe to fail for want of INTx, got {other:?}"),
    }
}
