//! The hypervisor with functions of its own host passed through by VFIO, driven from inside
//! the guest without a driver: what the guest kernel's PCI scan finds and where it places
//! each BAR, the guest's loads and stores reaching the real BARs, a function's DMA reaching
//! guest memory and another function's guest BAR at guest-physical addresses, the Command
//! register at reset and at the return, the refusals, and everything given back.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, SHIPPED};
use smartio_devices::dma::{flags, reg, DEVICE_MAGIC, MEMORY_BAR, REGISTER_BAR};
use smartio_host::hypervisor::{PassThrough, Refusal, Vfio, Vm, VmConfig, VmError};
use smartio_host::vm::{GuestPageSize, HIGH_MEMORY_BASE, PCI_HOLE_START};
use smartio_host::{DeviceHandle, DmaBuffer, HostOs};
use smartio_platform::pci::{self, bar, command};
use smartio_platform::{AccessError, BusAddr, Clock, Port, SimDuration};
use std::rc::Rc;

const GIB: u64 = 1 << 30;

/// vm-back-to-back with a GPU (a 32-bit register BAR, two 64-bit prefetchable ones) added
/// to the lender.
fn scenario() -> String {
    let text = SHIPPED
        .iter()
        .find(|s| s.name == "vm-back-to-back")
        .expect("shipped")
        .text;
    let gpu = "\n[[host.device]]\nname = \"gpu0\"\nkind = \"gpu\"\nparent = \"root\"\nlink = \"gen3 x16\"\n";
    // Tests run in parallel: each gets a file of its own.
    static FILES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "smartio-host-vfio-{}-{}.toml",
        std::process::id(),
        FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, format!("{text}{gpu}")).expect("temp file");
    path.to_str().expect("utf-8").to_string()
}

fn lender() -> (Cluster, HostOs, HostOs) {
    lender_on(&Calibration::default_embedded())
}

fn lender_on(calibration: &Calibration) -> (Cluster, HostOs, HostOs) {
    let cluster = Cluster::new(&scenario(), calibration).expect("cluster");
    let mut hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let lender = hosts.remove(1);
    assert_eq!(lender.name(), "lender");
    (cluster, lender, hosts.remove(0))
}

/// Look-up-table entries and requester ids per adapter, and pages mapped in each host's
/// IOMMU (all domains together: a VM's domains stay, empty, after it).
fn tables(cluster: &Cluster) -> (Vec<(usize, usize)>, Vec<usize>) {
    let (adapters, iommus) = cluster.machine.fabric().tables_in_use();
    (adapters, iommus.iter().map(|d| d.iter().sum()).collect())
}

fn vm0() -> VmConfig {
    VmConfig {
        name: "vm0".into(),
        memory: GIB,
        page: GuestPageSize::Huge,
    }
}

fn vfio(os: &HostOs, names: &[&str]) -> Vec<Rc<dyn PassThrough>> {
    names
        .iter()
        .map(|n| Vfio::new(os, n).expect("a function") as Rc<dyn PassThrough>)
        .collect()
}

/// The host's own reading of a function's configuration register at `offset`.
async fn host_config32(os: &HostOs, device: &str, offset: u16) -> u32 {
    let endpoint = os.endpoint_of(device).expect("a function");
    let mut b = [0u8; 4];
    os.cpu()
        .config_read(endpoint, offset, &mut b)
        .await
        .expect("config read");
    u32::from_le_bytes(b)
}

/// What the guest's scan made of one function, and what the host has for it.
#[derive(Debug, PartialEq)]
struct Seen {
    name: String,
    /// (vendor, device, class) as the guest identified it.
    guest_id: (u16, u16, u32),
    /// The same registers as the host reads them.
    host_id: (u16, u16, u32),
    /// (index, size) of each BAR the guest placed.
    guest_bars: Vec<(u8, u64)>,
    /// (index, size) of each real BAR.
    real_bars: Vec<(u8, u64)>,
}

#[test]
fn the_guest_finds_each_function_with_its_ids_and_bars_sized_and_placed_as_a_linux_guest_does() {
    let (cluster, lender, _) = lender();
    let names = ["nvme0", "dma0", "dma1", "gpu0"];
    let devices = vfio(&lender, &names);
    let os = lender.clone();
    let fabric_bars = |name: &str| {
        let endpoint = lender.endpoint_of(name).expect("a function");
        cluster.machine.fabric().endpoint(endpoint).bars.clone()
    };
    let real: Vec<_> = names.iter().map(|n| fabric_bars(n)).collect();
    let (vm_names, seen, windows, registers) = cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&os, &vm0(), devices, &[]).await.expect("starts");
            let mut seen = Vec::new();
            let mut windows = Vec::new();
            let mut registers = Vec::new();
            for (name, real) in names.iter().zip(&real) {
                let dev = vm.device(name).expect("in the guest");
                let id = dev.id();
                let ids = host_config32(&os, name, pci::VENDOR_ID).await;
                let class = host_config32(&os, name, pci::CLASS - 1).await >> 8;
                seen.push(Seen {
                    name: dev.name().to_string(),
                    guest_id: (id.vendor, id.device, id.class),
                    host_id: (ids as u16, (ids >> 16) as u16, class),
                    guest_bars: dev.bars().iter().map(|b| (b.index, b.size)).collect(),
                    real_bars: real.iter().map(|b| (b.index, b.size)).collect(),
                });
                for b in dev.bars() {
                    let r = real.iter().find(|r| r.index == b.index).expect("real");
                    windows.push((name.to_string(), b.index, b.base.get(), b.size, r.kind));
                    // The guest's BAR register holds the guest's address; the function's
                    // own still holds the host's.
                    let at = pci::BAR0 + 4 * u16::from(b.index);
                    let guest = dev.config_read(at, 4).await.expect("guest config read");
                    let guest = u32::from_le_bytes([guest[0], guest[1], guest[2], guest[3]]);
                    let host = host_config32(&os, name, at).await;
                    registers.push((guest & !bar::FLAGS, host & !bar::FLAGS, b.base, r.base));
                }
            }
            let vm_names = (
                vm.name().to_string(),
                vm.context().name().to_string(),
                vm.device_names(),
                format!("{vm:?}"),
            );
            vm.shutdown().await.expect("shuts down");
            (vm_names, seen, windows, registers)
        })
        .expect("the task finished");
    assert_eq!(vm_names.0, "lender/vm0");
    assert_eq!(vm_names.1, "lender/vm0");
    assert_eq!(vm_names.2, names);
    assert!(
        vm_names.3.contains("lender/vm0") && vm_names.3.contains("gpu0"),
        "{}",
        vm_names.3
    );
    for s in &seen {
        assert_eq!(s.guest_id, s.host_id, "{}", s.name);
        assert_eq!(
            s.guest_bars, s.real_bars,
            "{}: every BAR, sized as it is",
            s.name
        );
    }
    assert_eq!(
        seen.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        names
    );
    // 64-bit prefetchable BARs above RAM (from the first GiB boundary past 4 GiB), the others
    // in the PCI hole; each aligned to its size; none overlapping.
    let ram_end = HIGH_MEMORY_BASE;
    for (name, index, base, size, kind) in &windows {
        let high = *kind == smartio_fabric::BarKind::Mem64Prefetch;
        if high {
            assert!(
                *base >= ram_end,
                "{name} BAR{index} at {base:#x}: above RAM"
            );
        } else {
            assert!(
                *base >= PCI_HOLE_START && base + size <= 0xFEC0_0000,
                "{name} BAR{index} at {base:#x}: in the PCI hole"
            );
        }
        assert_eq!(
            base % size.max(&4096),
            0,
            "{name} BAR{index} at {base:#x}: aligned"
        );
    }
    for (i, a) in windows.iter().enumerate() {
        for b in &windows[i + 1..] {
            assert!(a.2 + a.3 <= b.2 || b.2 + b.3 <= a.2, "{a:?} overlaps {b:?}");
        }
    }
    assert!(windows
        .iter()
        .any(|w| w.4 == smartio_fabric::BarKind::Mem32));
    for (guest, host, guest_base, real_base) in registers {
        assert_eq!(u64::from(guest), guest_base.get() & 0xffff_ffff);
        assert_eq!(u64::from(host), real_base.get() & 0xffff_ffff);
    }
}

/// Programs DMA test device `dev` of the guest `guest` (through the guest's mapping of its
/// registers) to copy `len` bytes from `src` to `dst` (`fl`); the completion word it
/// wrote into the guest's coherent buffer `word` (bit 63: failed).
async fn copy(
    guest: &HostOs,
    dev: &DeviceHandle,
    word: &DmaBuffer,
    op: (u64, u64, u64, u64),
) -> u64 {
    let (src, dst, len, fl) = op;
    guest.write_memory(word.cpu, &[0; 8]).expect("guest RAM");
    let regs = dev.map_bar(REGISTER_BAR).expect("BAR0");
    for (r, v) in [
        (reg::SRC, src),
        (reg::DST, dst),
        (reg::LEN, len),
        (reg::FLAGS, fl),
        (reg::COMPLETION_ADDR, word.bus.get()),
        (reg::DOORBELL, 7),
    ] {
        regs.write64(r, v).await.expect("register");
    }
    for _ in 0..10_000 {
        dev.cpu().sleep(SimDuration::from_us(1)).await;
        let mut w = [0u8; 8];
        guest.read_memory(word.cpu, &mut w).expect("guest RAM");
        if u64::from_le_bytes(w) != 0 {
            return u64::from_le_bytes(w);
        }
    }
    panic!("the copy did not complete");
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

/// What the host reads at bus address `at` of its own (a function's real BAR).
async fn host_read(os: &HostOs, at: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    os.cpu()
        .read(BusAddr(at), &mut buf)
        .await
        .expect("host load");
    buf
}

/// The Command register of `device`, as its host reads it.
async fn command_of(os: &HostOs, device: &str) -> u16 {
    host_config32(os, device, pci::COMMAND).await as u16
}

/// What a guest's copies did.
#[derive(Debug, PartialEq)]
struct Copies {
    /// The guest's store into dma0's memory, as the host reads it at the real BAR.
    stored: Vec<u8>,
    /// Device memory → guest RAM: the completion word, and what the guest reads there.
    to_ram: (u64, Vec<u8>),
    /// Device memory → the last page of guest RAM, at its guest-physical address.
    to_last_page: (u64, Vec<u8>),
    /// Device memory → dma1's guest BAR (peer-to-peer): the completion word, what the host
    /// reads at dma1's real BAR, and what the guest reads through its mapping of it.
    to_peer: (u64, Vec<u8>, Vec<u8>),
    /// Device memory → the first byte past guest RAM: the completion word.
    past_ram: u64,
}

#[test]
fn a_functions_dma_reaches_guest_memory_and_another_functions_guest_bar_at_guest_physical_addresses(
) {
    let (cluster, lender, _) = lender();
    let before = (lender.ram_in_use(), tables(&cluster));
    let real = |name: &str| {
        let endpoint = lender.endpoint_of(name).expect("a function");
        let f = cluster.machine.fabric();
        let b = f
            .endpoint(endpoint)
            .bars
            .iter()
            .find(|b| b.index == MEMORY_BAR)
            .expect("BAR2")
            .base;
        b.get()
    };
    let (mem0, mem1) = (real("dma0"), real("dma1"));
    let devices = vfio(&lender, &["dma0", "dma1"]);
    let os = lender.clone();
    let data = pattern(4096, 0x5a);
    let expect = data.clone();
    let (copies, commands) = cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&os, &vm0(), devices, &[]).await.expect("starts");
            let guest = vm.guest().clone();
            let dev0 = vm.device("dma0").expect("dma0");
            let dev1 = vm.device("dma1").expect("dma1");
            assert_eq!(
                dev0.map_bar(REGISTER_BAR)
                    .expect("BAR0")
                    .read64(reg::ID)
                    .await,
                Ok(DEVICE_MAGIC),
                "the guest's load reaches the function's registers"
            );
            dev0.enable().await.expect("Bus Master");
            dev0.map_bar(MEMORY_BAR)
                .expect("BAR2")
                .write(0x1000, &data)
                .await
                .expect("guest store");
            let stored = host_read(&os, mem0 + 0x1000, 4096).await;
            let word = dev0.dma_alloc_coherent(8).expect("guest RAM");
            let buf = dev0.dma_alloc_coherent(4096).expect("guest RAM");
            let local = flags::SRC_LOCAL;
            let w = copy(&guest, &dev0, &word, (0x1000, buf.bus.get(), 4096, local)).await;
            let mut back = vec![0u8; 4096];
            guest.read_memory(buf.cpu, &mut back).expect("guest RAM");
            let to_ram = (w, back);

            let last = GIB - 4096;
            let w = copy(&guest, &dev0, &word, (0x1000, last, 4096, local)).await;
            let mut back = vec![0u8; 4096];
            guest
                .read_memory(smartio_platform::PhysAddr(last), &mut back)
                .expect("guest RAM");
            let to_last_page = (w, back);

            let peer = dev0.dma_map_peer(&dev1, MEMORY_BAR).expect("a peer BAR");
            assert_eq!(peer, dev1.map_bar(MEMORY_BAR).expect("BAR2").window().base);
            let w = copy(
                &guest,
                &dev0,
                &word,
                (0x1000, peer.get() + 0x2000, 4096, local),
            )
            .await;
            let host_sees = host_read(&os, mem1 + 0x2000, 4096).await;
            let mut guest_sees = vec![0u8; 4096];
            dev1.map_bar(MEMORY_BAR)
                .expect("BAR2")
                .read(0x2000, &mut guest_sees)
                .await
                .expect("guest load");
            let to_peer = (w, host_sees, guest_sees);

            let past_ram = copy(&guest, &dev0, &word, (0x1000, GIB, 4096, local)).await;
            let during = (command_of(&os, "dma0").await, command_of(&os, "dma1").await);
            vm.shutdown().await.expect("shuts down");
            let after = (command_of(&os, "dma0").await, command_of(&os, "dma1").await);
            let copies = Copies {
                stored,
                to_ram,
                to_last_page,
                to_peer,
                past_ram,
            };
            (copies, (during, after))
        })
        .expect("the task finished");
    let done = 7;
    assert_eq!(
        copies,
        Copies {
            stored: expect.clone(),
            to_ram: (done, expect.clone()),
            to_last_page: (done, expect.clone()),
            to_peer: (done, expect.clone(), expect),
            past_ram: done | smartio_devices::dma::COMPLETION_ERROR,
        }
    );
    let on = command::MEMORY_SPACE | command::BUS_MASTER;
    let ((during0, _), (after0, after1)) = commands;
    assert_eq!(during0 & on, on, "the guest enabled dma0");
    assert_eq!((after0 & on, after1 & on), (0, 0), "the return stops both");
    assert_eq!(
        (lender.ram_in_use(), tables(&cluster)),
        before,
        "the VM's memory and every IOMMU mapping given back"
    );
}

#[test]
fn the_reset_stops_a_function_left_enabled_and_a_held_or_foreign_function_is_refused() {
    let (cluster, lender, borrower) = lender();
    let dma0 = Vfio::new(&lender, "dma0").expect("a function") as Rc<dyn PassThrough>;
    let dma1 = Vfio::new(&lender, "dma1").expect("a function") as Rc<dyn PassThrough>;
    let os = lender.clone();
    let all = command::MEMORY_SPACE | command::BUS_MASTER | command::INTX_DISABLE;
    let (reset, refusals) = cluster
        .machine
        .run_task(async move {
            let endpoint = os.endpoint_of("dma0").expect("a function");
            os.cpu()
                .config_write(endpoint, pci::COMMAND, &all.to_le_bytes())
                .await
                .expect("config write");
            let vm = Vm::start(&os, &vm0(), vec![dma0.clone()], &[])
                .await
                .expect("starts");
            let reset = command_of(&os, "dma0").await;
            let vm1 = VmConfig {
                name: "vm1".into(),
                ..vm0()
            };
            let refusal = |r: Result<Vm, VmError>| match r {
                Err(VmError::PassThrough { vm, device, source }) => (vm, device, *source),
                other => panic!("a pass-through refusal: {other:?}"),
            };
            let held = refusal(Vm::start(&os, &vm1, vec![dma0.clone()], &[]).await);
            let foreign = refusal(Vm::start(&borrower, &vm1, vec![dma1.clone()], &[]).await);
            os.claim("dma1", "smartio").expect("claimed");
            let in_use = refusal(Vm::start(&os, &vm1, vec![dma1.clone()], &[]).await);
            os.unclaim("dma1");
            vm.shutdown().await.expect("shuts down");
            // Given back: the same function goes to the next VM.
            let again = Vm::start(&os, &vm1, vec![dma0], &[])
                .await
                .expect("free again");
            again.shutdown().await.expect("shuts down");
            (reset, [held, foreign, in_use])
        })
        .expect("the task finished");
    assert_eq!(
        reset,
        command::INTX_DISABLE,
        "only decoding and Bus Master cleared"
    );
    let [held, foreign, in_use] = refusals;
    assert_eq!(
        held,
        (
            "lender/vm1".into(),
            "dma0".into(),
            Refusal::AlreadyPassedThrough {
                vm: "lender/vm0".into()
            }
        )
    );
    assert_eq!(
        foreign,
        (
            "borrower/vm1".into(),
            "dma1".into(),
            Refusal::OtherHost {
                host: "lender".into()
            }
        )
    );
    assert_eq!(
        in_use,
        (
            "lender/vm1".into(),
            "dma1".into(),
            Refusal::InUse {
                driver: "smartio".into(),
                host: "lender".into()
            }
        )
    );
}

#[test]
fn vfio_needs_the_hosts_iommu() {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("cluster");
    let lender = HostOs::boot_all(&cluster.machine).expect("boots").remove(1);
    let before = (lender.ram_in_use(), tables(&cluster));
    let nvme0 = vfio(&lender, &["nvme0"]);
    let os = lender.clone();
    let err = cluster
        .machine
        .run_task(async move { Vm::start(&os, &vm0(), nvme0, &[]).await.map(|_| ()) })
        .expect("the task finished")
        .expect_err("no IOMMU");
    match err {
        VmError::PassThrough { vm, device, source } => {
            assert_eq!((vm.as_str(), device.as_str()), ("lender/vm0", "nvme0"));
            assert_eq!(
                *source,
                Refusal::NoIommu {
                    host: "lender".into()
                }
            );
        }
        other => panic!("a pass-through refusal: {other:?}"),
    }
    assert_eq!((lender.ram_in_use(), tables(&cluster)), before);
}

/// A function that does not answer (configuration reads all ones), as a guest sees a slot
/// with nothing in it.
#[derive(Debug)]
struct Absent(smartio_fabric::HostId, smartio_fabric::EndpointId);

impl PassThrough for Absent {
    fn name(&self) -> String {
        "absent0".into()
    }
    fn reset(
        &self,
        _: &Rc<smartio_host::VmContext>,
    ) -> smartio_host::BoxFuture<Result<(), VmError>> {
        Box::pin(async { Ok(()) })
    }
    fn bars(&self) -> Vec<smartio_fabric::topology::AssignedBar> {
        Vec::new()
    }
    fn config_read(
        &self,
        _: u16,
        len: usize,
    ) -> smartio_host::BoxFuture<Result<Vec<u8>, smartio_platform::AccessError>> {
        Box::pin(async move { Ok(vec![0xff; len]) })
    }
    fn config_write(
        &self,
        _: u16,
        _: Vec<u8>,
    ) -> smartio_host::BoxFuture<Result<(), smartio_platform::AccessError>> {
        Box::pin(async { Ok(()) })
    }
    fn enable_dma(
        &self,
        _: &Rc<smartio_host::VmContext>,
        _: Vec<smartio_host::GuestBar>,
    ) -> smartio_host::BoxFuture<Result<(), VmError>> {
        Box::pin(async { Ok(()) })
    }
    fn interrupt(
        &self,
        vm: &Rc<smartio_host::VmContext>,
        _: u32,
    ) -> Result<smartio_platform::MsiMessage, VmError> {
        Err(VmError::NotRunning {
            vm: vm.name().to_string(),
        })
    }
    fn function(&self) -> (smartio_fabric::HostId, smartio_fabric::EndpointId) {
        (self.0, self.1)
    }
    fn release(
        &self,
        _: &Rc<smartio_host::VmContext>,
    ) -> smartio_host::BoxFuture<Result<(), VmError>> {
        Box::pin(async { Ok(()) })
    }
}

/// The guest's view of BAR0 of `dev`, and what the host reads in the real function's.
async fn guest_and_host_bar0(os: &HostOs, dev: &DeviceHandle, name: &str) -> (u32, u32) {
    let g = dev
        .config_read(pci::BAR0, 4)
        .await
        .expect("guest config read");
    let guest = u32::from_le_bytes([g[0], g[1], g[2], g[3]]);
    (guest, host_config32(os, name, pci::BAR0).await)
}

#[test]
fn a_guest_skips_an_empty_slot_and_its_bar_writes_stay_its_own() {
    let (cluster, lender, _) = lender();
    let endpoint = lender.endpoint_of("dma1").expect("a function");
    let mut devices = vfio(&lender, &["dma0"]);
    devices.insert(0, Rc::new(Absent(lender.id(), endpoint)));
    let os = lender.clone();
    let ram_before = lender.ram_in_use();
    let (names, bar0, ram) = cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&os, &vm0(), devices, &[]).await.expect("starts");
            let dev = vm.device("dma0").expect("dma0");
            let names = vm.device_names();
            // One write from the header type to BAR0's low half: the header's bytes go to
            // the function, BAR0's stay the guest's (the real BAR does not move).
            let before = guest_and_host_bar0(&os, &dev, "dma0").await;
            dev.config_write(pci::BAR0 - 4, &[0, 0, 0, 0, 0x00, 0x00, 0x10, 0xc1])
                .await
                .expect("guest config write");
            let after = guest_and_host_bar0(&os, &dev, "dma0").await;
            // BAR0 moved by the guest onto its own RAM: the RAM stays RAM for the guest.
            let ram = 0x1000_0000u64;
            let guest = vm.guest().clone();
            guest
                .write_memory(smartio_platform::PhysAddr(ram), &[0x5a; 8])
                .expect("RAM");
            let load = |at: u64| {
                let cpu = guest.cpu().clone();
                async move {
                    let mut seen = [0u8; 8];
                    cpu.read(BusAddr(at), &mut seen).await.map(|()| seen)
                }
            };
            let move_bar0 = |to: u64| {
                let dev = dev.clone();
                async move {
                    dev.config_write(pci::BAR0, &(to as u32).to_le_bytes())
                        .await
                        .expect("guest config write");
                    dev.config_write(pci::BAR0 + 4, &((to >> 32) as u32).to_le_bytes())
                        .await
                        .expect("guest config write");
                }
            };
            move_bar0(ram).await;
            let on_ram = load(ram).await;
            // Moved between RAM and the PCI hole (where no guest window routes it): not the
            // function's registers there.
            let nowhere = 2 * GIB;
            move_bar0(nowhere).await;
            let id = load(nowhere + reg::ID).await;
            let seen = (on_ram, id.map(u64::from_le_bytes));
            vm.shutdown_in_place().await.expect("shuts down");
            (names, (before, after), seen)
        })
        .expect("the task finished");
    assert_eq!(names, ["dma0"], "the empty slot is skipped");
    let ((guest_before, host_before), (guest_after, host_after)) = bar0;
    assert_eq!(host_after, host_before, "the real BAR stays where it is");
    assert_ne!(guest_after, guest_before);
    assert_eq!(
        guest_after & !bar::FLAGS,
        0xc110_0000,
        "the guest's BAR0 took its write"
    );
    let (on_ram, nowhere) = ram;
    assert_eq!(on_ram, Ok([0x5a; 8]), "guest RAM under a BAR moved onto it");
    assert_ne!(
        nowhere,
        Ok(DEVICE_MAGIC),
        "a BAR outside the guest's PCI windows is not reached"
    );
    assert_eq!(
        lender.ram_in_use(),
        ram_before,
        "shut down in place: the memory went back"
    );
}

#[test]
fn peer_bars_are_mapped_when_the_guest_sets_bus_master_and_not_before() {
    let (cluster, lender, _) = lender();
    let devices = vfio(&lender, &["dma0", "dma1"]);
    let os = lender.clone();
    let machine = cluster.machine.clone();
    let pages = move || -> usize { machine.fabric().tables_in_use().1[1].iter().sum() };
    let (started, decoding, mastering) = cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&os, &vm0(), devices, &[]).await.expect("starts");
            let dev = vm.device("dma0").expect("dma0");
            let started = pages();
            let cmd = |bits: u16| bits.to_le_bytes();
            dev.config_write(pci::COMMAND, &cmd(command::MEMORY_SPACE))
                .await
                .expect("write");
            let decoding = pages();
            let on = command::MEMORY_SPACE | command::BUS_MASTER;
            dev.config_write(pci::COMMAND, &cmd(on))
                .await
                .expect("write");
            let mastering = pages();
            vm.shutdown().await.expect("shuts down");
            (started, decoding, mastering)
        })
        .expect("the task finished");
    assert_eq!(decoding, started, "decoding alone maps no peer");
    // dma1's two BARs, in pages.
    let peer = (65536 + (256 << 20)) / 4096;
    assert_eq!(
        mastering - started,
        peer,
        "Bus Master maps dma1's BARs for dma0"
    );
}

/// The function it wraps, passed through as that one is, except that mapping the VM's memory
/// for it fails.
struct NoDma(Rc<dyn PassThrough>);

impl PassThrough for NoDma {
    fn name(&self) -> String {
        self.0.name()
    }
    fn reset(
        &self,
        vm: &Rc<smartio_host::VmContext>,
    ) -> smartio_host::BoxFuture<Result<(), VmError>> {
        self.0.reset(vm)
    }
    fn bars(&self) -> Vec<smartio_fabric::topology::AssignedBar> {
        self.0.bars()
    }
    fn config_read(
        &self,
        offset: u16,
        len: usize,
    ) -> smartio_host::BoxFuture<Result<Vec<u8>, AccessError>> {
        self.0.config_read(offset, len)
    }
    fn config_write(
        &self,
        offset: u16,
        data: Vec<u8>,
    ) -> smartio_host::BoxFuture<Result<(), AccessError>> {
        self.0.config_write(offset, data)
    }
    fn enable_dma(
        &self,
        vm: &Rc<smartio_host::VmContext>,
        _: Vec<smartio_host::GuestBar>,
    ) -> smartio_host::BoxFuture<Result<(), VmError>> {
        let e = VmError::NotRunning {
            vm: vm.name().to_string(),
        };
        Box::pin(async move { Err(e) })
    }
    fn interrupt(
        &self,
        vm: &Rc<smartio_host::VmContext>,
        guest_vector: u32,
    ) -> Result<smartio_platform::MsiMessage, VmError> {
        self.0.interrupt(vm, guest_vector)
    }
    fn function(&self) -> (smartio_fabric::HostId, smartio_fabric::EndpointId) {
        self.0.function()
    }
    fn release(
        &self,
        vm: &Rc<smartio_host::VmContext>,
    ) -> smartio_host::BoxFuture<Result<(), VmError>> {
        self.0.release(vm)
    }
}

/// Bus Master set by the guest when the hypervisor cannot map the VM's memory for the
/// function: the guest's configuration write fails with the hypervisor's error as its typed
/// source, and the Command register keeps Bus Master off.
#[test]
fn a_bus_master_the_hypervisor_cannot_map_is_refused_with_its_error_as_the_source() {
    let (cluster, lender, _) = lender();
    let devices: Vec<Rc<dyn PassThrough>> = vfio(&lender, &["dma0"])
        .into_iter()
        .map(|d| Rc::new(NoDma(d)) as Rc<dyn PassThrough>)
        .collect();
    let os = lender.clone();
    let (refused, command) = cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&os, &vm0(), devices, &[]).await.expect("starts");
            let dev = vm.device("dma0").expect("dma0");
            let on = command::MEMORY_SPACE | command::BUS_MASTER;
            let refused = dev.config_write(pci::COMMAND, &on.to_le_bytes()).await;
            let seen = dev
                .config_read(pci::COMMAND, 2)
                .await
                .expect("guest config read");
            vm.shutdown().await.expect("shuts down");
            (refused, u16::from_le_bytes([seen[0], seen[1]]))
        })
        .expect("the task finished");
    let error = refused.expect_err("Bus Master refused");
    let AccessError::Refused { target, reason } = &error else {
        panic!("a refusal by the hypervisor: {error:?}");
    };
    assert_eq!(target, "dma0");
    let cause = VmError::NotRunning {
        vm: "lender/vm0".into(),
    };
    assert_eq!(reason.error().downcast_ref::<VmError>(), Some(&cause));
    let source = std::error::Error::source(&error).expect("a source");
    assert_eq!(source.to_string(), cause.to_string());
    assert_eq!(
        error.to_string(),
        format!("configuration request to dma0 refused by the hypervisor: {cause}")
    );
    assert_eq!(command & command::BUS_MASTER, 0, "Bus Master stays off");
}

#[test]
fn a_refused_second_vm_leaves_the_first_vms_function_running() {
    let (cluster, lender, _) = lender();
    let dma0 = Vfio::new(&lender, "dma0").expect("a function") as Rc<dyn PassThrough>;
    let os = lender.clone();
    let (before, after) = cluster
        .machine
        .run_task(async move {
            let vm = Vm::start(&os, &vm0(), vec![dma0.clone()], &[])
                .await
                .expect("starts");
            vm.device("dma0")
                .expect("dma0")
                .enable()
                .await
                .expect("enabled");
            let before = command_of(&os, "dma0").await;
            let vm1 = VmConfig {
                name: "vm1".into(),
                ..vm0()
            };
            assert!(Vm::start(&os, &vm1, vec![dma0], &[]).await.is_err());
            let after = command_of(&os, "dma0").await;
            vm.shutdown().await.expect("shuts down");
            (before, after)
        })
        .expect("the task finished");
    let on = command::MEMORY_SPACE | command::BUS_MASTER;
    assert_eq!(before & on, on);
    assert_eq!(
        after, before,
        "the refused VM stopped nothing of the first's"
    );
}

/// Starts lender/vm0 of `memory` bytes in 4 KiB pages with dma0 by VFIO, copies a page of
/// dma0's memory to the VM's last page (in high memory); how long the start took, and what
/// the guest reads there.
fn high_memory_copy(calibration: &Calibration, memory: u64) -> (SimDuration, Vec<u8>) {
    let (cluster, lender, _) = lender_on(calibration);
    let devices = vfio(&lender, &["dma0"]);
    let os = lender.clone();
    let machine = cluster.machine.clone();
    cluster
        .machine
        .run_task(async move {
            let config = VmConfig {
                memory,
                page: GuestPageSize::Small,
                ..vm0()
            };
            let t0 = machine.now();
            let vm = Vm::start(&os, &config, devices, &[]).await.expect("starts");
            let started = machine.now().since(t0);
            let guest = vm.guest().clone();
            let dev = vm.device("dma0").expect("dma0");
            dev.enable().await.expect("Bus Master");
            dev.map_bar(MEMORY_BAR)
                .expect("BAR2")
                .write(0, &pattern(4096, 3))
                .await
                .expect("guest store");
            let word = dev.dma_alloc_coherent(8).expect("guest RAM");
            let last = HIGH_MEMORY_BASE + (memory - PCI_HOLE_START) - 4096;
            let w = copy(&guest, &dev, &word, (0, last, 4096, flags::SRC_LOCAL)).await;
            assert_eq!(w, 7, "the copy to high memory succeeded");
            let mut back = vec![0u8; 4096];
            guest
                .read_memory(smartio_platform::PhysAddr(last), &mut back)
                .expect("guest RAM");
            vm.shutdown().await.expect("shuts down");
            (started, back)
        })
        .expect("the task finished")
}

#[test]
fn vfio_maps_and_pins_all_of_a_vms_memory_low_and_high() {
    let memory = PCI_HOLE_START + (64 << 20);
    let plain = Calibration::default_embedded();
    let mut slower = plain.clone();
    slower.vm.page_pin_ns.value += 1.0;
    let (a, back) = high_memory_copy(&plain, memory);
    assert_eq!(back, pattern(4096, 3));
    let (b, _) = high_memory_copy(&slower, memory);
    assert_eq!(
        b.as_ps() - a.as_ps(),
        SimDuration::from_ns(memory / 4096).as_ps(),
        "one more nanosecond for each of the {} pages pinned",
        memory / 4096
    );
}
