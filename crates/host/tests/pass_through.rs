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
use smartio_platform::{BusAddr, Clock, Port, SimDuration};
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
    let path = std::env::temp_dir().join(format!("smartio-host-vfio-{}.toml", std::process::id()));
    std::fs::write(&path, format!("{text}{gpu}")).expect("temp file");
    path.to_str().expect("utf-8").to_string()
}

fn lender() -> (Cluster, HostOs, HostOs) {
    let cluster = Cluster::new(&scenario(), &Calibration::default_embedded()).expect("cluster");
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
