//! The MDEV parent's own bookkeeping, seen from outside: which VMs a device is assigned to,
//! what each lender interaction costs, what a VM leaves in the function's Command register,
//! how many guest pages KVM pins, and which table entries a VM's device takes.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind};
use smartio_drivers::NvmeDriver;
use smartio_host::vm::GuestPageSize;
use smartio_host::{Driver, HostOs, PassThrough, Vm, VmConfig};
use smartio_platform::pci::{self, command};
use smartio_platform::SimDuration;
use smartio_smartio::SmartIo;
use std::rc::Rc;

const GIB: u64 = 1 << 30;

struct Setup {
    cluster: Cluster,
    hosts: Vec<HostOs>,
    smartio: SmartIo,
}

/// `scenario` on `calibration`, every device registered with SmartIO.
fn setup(scenario: &str, calibration: &Calibration) -> Setup {
    let engine = EngineKind::for_test_target(env!("CARGO_CRATE_NAME"));
    let cluster = Cluster::on(engine, scenario, calibration).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, calibration);
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

    /// `spec` assigned to `borrower/vm0`.
    fn mdev(&self, spec: &str) -> Rc<dyn PassThrough> {
        let fdid = self.smartio.find(spec).expect("registered");
        self.smartio
            .assign_to_vm(fdid, "borrower/vm0")
            .expect("assigned")
    }

    /// The VMs `spec` is assigned to, as SmartIO lists them.
    fn assigned(&self, spec: &str) -> Vec<String> {
        let fdid = self.smartio.find(spec).expect("registered");
        self.smartio
            .devices()
            .into_iter()
            .find(|d| d.fdid == fdid)
            .expect("listed")
            .assigned
    }
}

fn vm0(page: GuestPageSize) -> VmConfig {
    VmConfig {
        name: "vm0".into(),
        memory: GIB,
        page,
    }
}

fn nvme() -> Vec<Rc<dyn Driver>> {
    vec![Rc::new(NvmeDriver::default())]
}

/// What one MDEV VM's life on `calibration` showed: how long borrower/vm0 took to start
/// with lender:nvme0 (virtual time) and to shut down, and how many lender interactions
/// SmartIO counted in each.
struct Life {
    start: SimDuration,
    shutdown: SimDuration,
    interactions: (u64, u64),
}

fn mdev_vm_life(calibration: &Calibration, page: GuestPageSize) -> Life {
    let s = setup("vm-back-to-back", calibration);
    let borrower = s.host("borrower");
    let device = s.mdev("lender:nvme0");
    let machine = s.cluster.machine.clone();
    let smartio = s.smartio.clone();
    s.cluster
        .machine
        .run_task(async move {
            let (t0, n0) = (machine.now(), smartio.lender_interactions());
            let vm = Vm::start(&borrower, &vm0(page), vec![device], &nvme())
                .await
                .expect("starts");
            let (t1, n1) = (machine.now(), smartio.lender_interactions());
            vm.shutdown().await.expect("shuts down");
            Life {
                start: t1.since(t0),
                shutdown: machine.now().since(t1),
                interactions: (n1 - n0, smartio.lender_interactions() - n1),
            }
        })
        .expect("the task finished")
}

#[test]
fn assigning_a_device_twice_to_one_vm_lists_it_once_and_a_second_vm_beside_it() {
    let s = setup("vm-back-to-back", &Calibration::default_embedded());
    let fdid = s.smartio.find("lender:nvme0").expect("registered");
    assert!(s.assigned("lender:nvme0").is_empty());
    s.smartio
        .assign_to_vm(fdid, "borrower/vm0")
        .expect("assigned");
    s.smartio.assign_to_vm(fdid, "borrower/vm0").expect("again");
    assert_eq!(s.assigned("lender:nvme0"), ["borrower/vm0"]);
    s.smartio
        .assign_to_vm(fdid, "borrower/vm1")
        .expect("assigned");
    assert_eq!(s.assigned("lender:nvme0"), ["borrower/vm0", "borrower/vm1"]);
    s.smartio
        .unassign_from_vm(fdid, "borrower/vm0")
        .expect("withdrawn");
    assert_eq!(s.assigned("lender:nvme0"), ["borrower/vm1"]);
}

#[test]
fn every_lender_interaction_of_an_mdev_vm_is_one_control_message_each_way() {
    let plain = Calibration::default_embedded();
    let mut slower = plain.clone();
    // One more microsecond per control message.
    slower.smartio.control_message_ns.value += 1000.0;
    let a = mdev_vm_life(&plain, GuestPageSize::Huge);
    let b = mdev_vm_life(&slower, GuestPageSize::Huge);
    assert_eq!(a.interactions, b.interactions);
    // Starting: the guest's reset (SmartIO takes the device, the lender clears its Command
    // register), its configuration cycles, its Bus Master set; shutting down: the driver's
    // and the hypervisor's configuration cycles and the return. Each is one round trip of
    // messages on the borrower's CPU, one after another.
    let (starting, stopping) = a.interactions;
    assert!(starting >= 3 && stopping >= 1, "{:?}", a.interactions);
    let extra = |n: u64| SimDuration::from_ns(1000).times(2 * n).as_ps();
    assert_eq!(b.start.as_ps() - a.start.as_ps(), extra(starting), "start");
    assert_eq!(
        b.shutdown.as_ps() - a.shutdown.as_ps(),
        extra(stopping),
        "shutdown"
    );
}

#[test]
fn kvm_pins_each_page_of_the_vm_once_when_the_guest_enables_bus_master() {
    let plain = Calibration::default_embedded();
    let mut slower = plain.clone();
    // One more microsecond per page pinned.
    slower.vm.page_pin_ns.value += 1000.0;
    for page in [GuestPageSize::Huge, GuestPageSize::Small] {
        let a = mdev_vm_life(&plain, page);
        let b = mdev_vm_life(&slower, page);
        let pages = GIB / page.bytes();
        assert_eq!(
            b.start.as_ps() - a.start.as_ps(),
            SimDuration::from_ns(1000).times(pages).as_ps(),
            "{page:?}: {pages} pages pinned"
        );
        assert_eq!(
            b.shutdown, a.shutdown,
            "{page:?}: nothing is pinned at shutdown"
        );
    }
}

#[test]
fn a_vm_shut_down_leaves_memory_decoding_and_bus_master_off_and_the_other_command_bits_as_they_were(
) {
    let s = setup("vm-back-to-back", &Calibration::default_embedded());
    let borrower = s.host("borrower");
    let lender = s.host("lender");
    let endpoint = lender.endpoint_of("nvme0").expect("a function");
    let device = s.mdev("lender:nvme0");
    let all = command::MEMORY_SPACE | command::BUS_MASTER | command::INTX_DISABLE;
    let (reset, after) = s
        .cluster
        .machine
        .run_task(async move {
            let cpu = lender.cpu();
            let command = || async {
                let mut cmd = [0u8; 2];
                cpu.config_read(endpoint, pci::COMMAND, &mut cmd)
                    .await
                    .expect("config read");
                u16::from_le_bytes(cmd)
            };
            // Left enabled by whoever had it before.
            cpu.config_write(endpoint, pci::COMMAND, &all.to_le_bytes())
                .await
                .expect("config write");
            // No guest driver: only SmartIO and the hypervisor touch the function.
            let vm = Vm::start(&borrower, &vm0(GuestPageSize::Huge), vec![device], &[])
                .await
                .expect("starts");
            let reset = command().await;
            // Enabled again behind the VM's back, then the VM goes.
            cpu.config_write(endpoint, pci::COMMAND, &all.to_le_bytes())
                .await
                .expect("config write");
            vm.shutdown().await.expect("shuts down");
            (reset, command().await)
        })
        .expect("the task finished");
    let off = command::INTX_DISABLE;
    assert_eq!(
        reset, off,
        "the guest's reset: the lender cleared decoding and Bus Master"
    );
    assert_eq!(
        after, off,
        "the return: the lender stopped the function first"
    );
}

/// vm-back-to-back with the `nth` occurrence (from 0) of `from` replaced by `to` (its
/// `window` lines: 0 the borrower's adapter, 1 the lender's).
fn edited(nth: usize, from: &str, to: &str) -> String {
    let path = crate::common::edited("vm-back-to-back", &[(nth, from, to)], "");
    path.to_str().expect("utf-8").to_string()
}

/// Starts borrower/vm0 of `memory` bytes with lender:nvme0 on `scenario`, writes 8 KiB
/// through the guest's NVMe driver and reads it back; what was read, or the refusal.
fn round_trip_in_vm(scenario: &str, memory: u64) -> Result<Vec<u8>, smartio_host::VmError> {
    let s = setup(scenario, &Calibration::default_embedded());
    let borrower = s.host("borrower");
    let device = s.mdev("lender:nvme0");
    let config = VmConfig {
        memory,
        ..vm0(GuestPageSize::Huge)
    };
    s.cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&borrower, &config, vec![device], &nvme()).await?;
            let guest = vm.guest().clone();
            let dev = guest
                .driver_data::<smartio_drivers::NvmeDevice>("nvme0")
                .expect("bound");
            let data = pattern();
            let buf = guest.alloc(data.len() as u64).expect("guest RAM");
            guest.write_memory(buf, &data).expect("guest RAM");
            let blocks = (data.len() / 512) as u32;
            let op = smartio_drivers::BlockOp::Write;
            dev.submit(0, op, 1, 8, blocks, buf).await.expect("write");
            guest
                .write_memory(buf, &vec![0; data.len()])
                .expect("guest RAM");
            let op = smartio_drivers::BlockOp::Read;
            dev.submit(0, op, 1, 8, blocks, buf).await.expect("read");
            let mut back = vec![0u8; data.len()];
            guest.read_memory(buf, &mut back).expect("guest RAM");
            vm.shutdown().await.expect("shuts down");
            Ok(back)
        })
        .expect("the task finished")
}

fn pattern() -> Vec<u8> {
    (0..8192u32).map(|i| (i * 7 + 3) as u8).collect()
}

#[test]
fn a_vm_fits_the_lender_window_with_one_entry_to_spare_for_interrupts_and_no_less() {
    // 1 GiB in 64 entries of 16 MiB (low memory only), and 8 GiB in 64 entries of 128 MiB
    // (low and high memory, each in whole entries).
    for (window, entry) in [("1 GiB", 16 << 20), ("8 GiB", 128 << 20)] {
        let size = 64 * entry;
        let scenario = edited(
            1,
            r#"window = "128 GiB""#,
            &format!("window = \"{window}\""),
        );
        let fits = round_trip_in_vm(&scenario, size - entry)
            .unwrap_or_else(|e| panic!("{window}: 63 entries and one to spare: {e}"));
        assert!(
            fits == pattern(),
            "{window}: the bytes read back are the bytes written"
        );
        let err = round_trip_in_vm(&scenario, size).expect_err("64 entries leave none");
        let source = match &err {
            smartio_host::VmError::PassThrough { source, .. } => source
                .backend_error::<smartio_smartio::SmartIoError>()
                .cloned(),
            _ => None,
        };
        assert!(
            matches!(
                source,
                Some(smartio_smartio::SmartIoError::VmWindowTooSmall { window, memory, entry: e, .. })
                    if window == size && memory == size && e == entry
            ),
            "{window}: refused before anything is taken, naming both sizes: {err:?}"
        );
    }
}

/// What `look` sees while borrower/vm0 runs with `device` and no guest driver (the VM is
/// shut down afterwards).
fn while_running<T: 'static>(
    s: &Setup,
    device: Rc<dyn PassThrough>,
    look: impl FnOnce() -> T + 'static,
) -> T {
    let borrower = s.host("borrower");
    s.cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&borrower, &vm0(GuestPageSize::Huge), vec![device], &[])
                .await
                .expect("starts");
            let seen = look();
            vm.shutdown().await.expect("shuts down");
            seen
        })
        .expect("the task finished")
}

#[test]
fn an_mdev_device_takes_one_lut_entry_per_entry_its_bars_span_and_one_for_interrupts() {
    // The borrower's adapter in 32 MiB entries: dma0's 64 KiB register BAR takes one, its
    // 256 MiB memory BAR eight. The lender's adapter (2 GiB entries) maps the borrower's
    // interrupt controller for the relayed interrupts: one entry; and the device's
    // requester id. No guest driver sets Bus Master, so no guest memory is mapped.
    let scenario = edited(
        0,
        r#"window = "128 GiB""#,
        "window = \"128 GiB\"\nlut_entries = 4096",
    );
    let s = setup(&scenario, &Calibration::default_embedded());
    let device = s.mdev("lender:dma0");
    let machine = s.cluster.machine.clone();
    let before = machine.fabric().tables_in_use().0;
    let during = while_running(&s, device, move || machine.fabric().tables_in_use().0);
    let taken: Vec<(usize, usize)> = during
        .iter()
        .zip(&before)
        .map(|(d, b)| (d.0 - b.0, d.1 - b.1))
        .collect();
    assert_eq!(
        taken,
        [(9, 0), (1, 1)],
        "(LUT entries, requester ids) per adapter"
    );
    assert_eq!(s.cluster.machine.fabric().tables_in_use().0, before);
}

/// Where each of `bars` (addresses in the borrower adapter's window) lands through that
/// adapter: (BAR, its first byte's far-side address, one past its last byte's).
fn reached_through_borrower_adapter(
    machine: &smartio_machine::Machine,
    bars: &[smartio_fabric::topology::AssignedBar],
) -> Vec<(u8, Option<u64>, u64)> {
    let fabric = machine.fabric();
    let adapter = fabric.adapter(smartio_fabric::AdapterId(0));
    let far = |a: u64| adapter.translate(a).map(|t| t.2);
    bars.iter()
        .map(|b| {
            let last = b.base.get() + b.size - 1;
            (b.index, far(b.base.get()), far(last).map_or(0, |f| f + 1))
        })
        .collect()
}

#[test]
fn each_bar_a_vm_is_given_reaches_the_real_bar_through_the_borrowers_adapter() {
    // A GPU's aperture and its third BAR are both prefetchable: they share the borrower's
    // look-up-table entry, and the second lies past the entry's start.
    let gpu = "\n[[host.device]]\nname = \"gpu0\"\nkind = \"gpu\"\nparent = \"root\"\nlink = \"gen3 x16\"\n";
    let scenario = edited(
        0,
        "cable = \"gen3 x16\"",
        &format!("cable = \"gen3 x16\"{gpu}"),
    );
    let s = setup(&scenario, &Calibration::default_embedded());
    let lender = s.host("lender");
    let real = {
        let endpoint = lender.endpoint_of("gpu0").expect("a function");
        s.cluster.machine.fabric().endpoint(endpoint).bars.clone()
    };
    assert_eq!(real.len(), 3, "{real:?}");
    let device = s.mdev("lender:gpu0");
    let given = device.clone();
    let machine = s.cluster.machine.clone();
    let reached = while_running(&s, device, move || {
        reached_through_borrower_adapter(&machine, &given.bars())
    });
    let expected: Vec<(u8, Option<u64>, u64)> = real
        .iter()
        .map(|b| (b.index, Some(b.base.get()), b.base.get() + b.size))
        .collect();
    assert_eq!(
        reached, expected,
        "(BAR, where its first byte lands, its end)"
    );
}
