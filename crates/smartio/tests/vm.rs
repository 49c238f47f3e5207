//! VMs: functions passed through by local VFIO and by SmartIO's MDEV parent, driven by the
//! same native drivers inside the guest (Paper V §5, §7.3).

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind};
use smartio_drivers::{BlockOp, NvmeDevice, NvmeDriver};
use smartio_host::vm::GuestPageSize;
use smartio_host::{Driver, HostOs, PassThrough, Vfio, Vm, VmConfig};
use smartio_smartio::SmartIo;
use std::cell::RefCell;
use std::future::Future;
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

impl Setup {
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

fn vm0() -> VmConfig {
    VmConfig {
        name: "vm0".into(),
        memory: 1 << 30,
        page: GuestPageSize::Huge,
    }
}

fn nvme() -> Vec<Rc<dyn Driver>> {
    vec![Rc::new(NvmeDriver::default())]
}

/// Writes `data` at `lba` and reads it back through the NVMe driver bound to `device` of
/// the (guest) kernel `os`.
async fn round_trip(os: HostOs, device: String, lba: u64, data: Vec<u8>) -> Vec<u8> {
    let dev = os.driver_data::<NvmeDevice>(&device).expect("bound");
    let buf = os.alloc(data.len() as u64).expect("ram");
    os.write_memory(buf, &data).expect("guest RAM");
    let blocks = (data.len() / 512) as u32;
    dev.submit(0, BlockOp::Write, 1, lba, blocks, buf)
        .await
        .expect("write");
    os.write_memory(buf, &vec![0u8; data.len()])
        .expect("guest RAM");
    dev.submit(0, BlockOp::Read, 1, lba, blocks, buf)
        .await
        .expect("read");
    let mut back = vec![0u8; data.len()];
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
