//! Device Lending end to end: registry, exclusive borrow and return, the shadow device under
//! the native drivers, the DMA and MSI windows, the lender's IOMMU, and resource accounting.

use crate::common;

use common::tables;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind};
use smartio_devices::gpu::KernelLibrary;
use smartio_drivers::gpu::{GpuContext, RuntimeCosts};
use smartio_drivers::{BlockOp, DmaTestDriver, Location, NvmeDevice, NvmeDriver};
use smartio_host::{DmaDirection, HostOs};
use smartio_machine::Agent;
use smartio_platform::pci;
use smartio_platform::SimDuration;
use smartio_platform::{AccessError, BusAddr, PhysAddr, Port};
use smartio_smartio::{BorrowOptions, Fdid, SmartIo, SmartIoError};
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;

/// A shipped scenario with the `nth` occurrence (0-based) of `from` replaced by `to`, written
/// to a file of its own.
fn variant(name: &str, edits: &[(usize, &str, &str)]) -> PathBuf {
    crate::common::edited(name, edits, "")
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

impl Setup {
    fn host(&self, name: &str) -> HostOs {
        self.hosts
            .iter()
            .find(|h| h.name() == name)
            .cloned()
            .expect("host")
    }

    fn fdid(&self, spec: &str) -> Fdid {
        self.smartio.find(spec).expect("registered")
    }

    /// Runs `task` to the end of the simulation and returns its output.
    fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        self.cluster
            .machine
            .run_task(task)
            .expect("the task finished")
    }
}

fn borrow(s: &Setup, borrower: &str, spec: &str) -> Result<String, SmartIoError> {
    let (smartio, host, fdid) = (s.smartio.clone(), s.host(borrower).id(), s.fdid(spec));
    s.run(async move {
        smartio
            .borrow(host, fdid, &BorrowOptions::default())
            .await
            .map(|l| l.device)
    })
}

fn give_back(s: &Setup, borrower: &str, spec: &str) -> Result<(), SmartIoError> {
    let (smartio, host, fdid) = (s.smartio.clone(), s.host(borrower).id(), s.fdid(spec));
    s.run(async move { smartio.give_back(host, fdid).await })
}

#[test]
fn every_function_but_the_ntb_adapters_is_listed_with_an_fdid() {
    let s = setup("cluster-switch");
    let listed: Vec<String> = s.smartio.devices().iter().map(|d| d.qualified()).collect();
    assert_eq!(
        listed,
        [
            "lender:nvme0",
            "lender:gpu0",
            "lender:gpu1",
            "lender:dma0",
            "lender2:gpu2"
        ]
    );
    let fdids: Vec<u32> = s.smartio.devices().iter().map(|d| d.fdid.0).collect();
    assert_eq!(fdids, [1, 2, 3, 4, 5], "cluster-wide ids");
    assert!(s.smartio.devices().iter().all(|d| d.borrowers.is_empty()));
    let nvme = &s.smartio.devices()[0];
    assert_eq!(
        (nvme.kind.as_str(), nvme.class_code),
        ("nvme", smartio_devices::nvme::spec::CLASS_CODE)
    );
    assert!(matches!(
        s.smartio.register(s.host("lender").id(), "nvme0"),
        Err(SmartIoError::AlreadyRegistered { fdid: Fdid(1), .. })
    ));
    let err = s.smartio.find("lender:nvme9").expect_err("no nvme9");
    assert!(err.to_string().contains("nvme0, gpu0"), "{err}");
}

#[test]
fn a_second_exclusive_borrow_names_the_holder_and_return_frees_the_device_and_its_tables() {
    let s = setup("cluster-switch");
    let before = tables(&s.cluster.machine);
    let name = borrow(&s, "borrower", "lender:dma0").expect("first borrow");
    assert_eq!(name, "dma0", "the shadow takes the device's name");
    assert!(s.host("borrower").device("dma0").is_ok(), "hot-added");
    let during = tables(&s.cluster.machine);
    assert_ne!(before, during, "the borrow took table entries");
    let listed = &s.smartio.devices()[3];
    assert_eq!(listed.borrowers.len(), 1);
    assert_eq!(listed.borrowers[0].host, "borrower");

    match borrow(&s, "lender2", "lender:dma0") {
        Err(SmartIoError::Borrowed { borrower, .. }) => assert_eq!(borrower, "borrower"),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(
        during,
        tables(&s.cluster.machine),
        "a refused borrow takes nothing"
    );
    assert!(matches!(
        give_back(&s, "lender2", "lender:dma0"),
        Err(SmartIoError::NotBorrowed { .. })
    ));

    give_back(&s, "borrower", "lender:dma0").expect("return");
    assert!(s.host("borrower").device("dma0").is_err(), "hot-removed");
    assert_eq!(before, tables(&s.cluster.machine), "every entry given back");

    borrow(&s, "lender2", "lender:dma0").expect("another host borrows it now");
    assert_eq!(s.smartio.devices()[3].borrowers[0].host, "lender2");
    give_back(&s, "lender2", "lender:dma0").expect("return");
    assert_eq!(before, tables(&s.cluster.machine));
}

#[test]
fn a_host_cannot_borrow_its_own_device_nor_one_its_lender_drives() {
    let s = setup("back-to-back");
    assert!(matches!(
        borrow(&s, "lender", "lender:nvme0"),
        Err(SmartIoError::OwnDevice { .. })
    ));
    let lender = s.host("lender");
    lender.register_driver(Rc::new(NvmeDriver {
        config: Default::default(),
    }));
    let os = lender.clone();
    s.run(async move { os.probe("nvme0").await })
        .expect("the lender binds its own driver");
    match borrow(&s, "borrower", "lender:nvme0") {
        Err(SmartIoError::InUseByLender { driver, .. }) => assert_eq!(driver, "nvme"),
        other => panic!("expected InUseByLender, got {other:?}"),
    }
}

/// Writes `data` at `lba` and reads it back through the NVMe driver bound to `device`.
async fn round_trip(os: HostOs, device: String, lba: u64, data: Vec<u8>) -> Vec<u8> {
    let dev = os.driver_data::<NvmeDevice>(&device).expect("bound");
    let buf = os.alloc(data.len() as u64).expect("ram");
    os.machine().poke_memory(os.id(), buf, &data);
    let blocks = (data.len() / 512) as u32;
    dev.submit(0, BlockOp::Write, 1, lba, blocks, buf)
        .await
        .expect("write");
    os.machine()
        .poke_memory(os.id(), buf, &vec![0u8; data.len()]);
    dev.submit(0, BlockOp::Read, 1, lba, blocks, buf)
        .await
        .expect("read");
    let mut back = vec![0u8; data.len()];
    os.machine().peek_memory(os.id(), buf, &mut back);
    os.free(buf);
    back
}

#[test]
fn the_native_nvme_driver_binds_to_the_shadow_and_return_unbinds_it_first() {
    let s = setup("back-to-back");
    let before = tables(&s.cluster.machine);
    let borrower = s.host("borrower");
    borrower.register_driver(Rc::new(NvmeDriver {
        config: Default::default(),
    }));
    let name = borrow(&s, "borrower", "lender:nvme0").expect("borrow");
    assert_eq!(borrower.bound_driver(&name).as_deref(), Some("nvme"));
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 + 3) as u8).collect();
    let back = s.run(round_trip(borrower.clone(), name.clone(), 8, data.clone()));
    assert_eq!(
        back, data,
        "bytes read back through the borrowed controller"
    );

    // The MSI-X table of the real controller holds the lender-side MSI window address,
    // not the borrower's own interrupt address.
    let (lender_cpu, endpoint) = {
        let lender = s.host("lender");
        (lender.cpu(), lender.endpoint_of("nvme0").expect("real"))
    };
    let bar0 = s.cluster.machine.fabric().endpoint(endpoint).bars[0].base;
    let borrower_msi = s.cluster.machine.fabric().host(borrower.id()).msi.clone();
    let entry = s.run(async move {
        let mut e = [0u8; 8];
        lender_cpu
            .read(bar0.offset(0x2000), &mut e)
            .await
            .expect("table");
        u64::from_le_bytes(e)
    });
    assert!(!borrower_msi.contains(&entry), "{entry:#x} was intercepted");
    let lender_window = s.cluster.machine.fabric().adapters()[1].window.clone();
    assert!(
        lender_window.contains(&entry),
        "{entry:#x} is in the lender's NTB window"
    );

    // Return while bound: the driver goes first, then the device and every entry.
    give_back(&s, "borrower", "lender:nvme0").expect("return while bound");
    assert!(borrower.device(&name).is_err());
    assert_eq!(before, tables(&s.cluster.machine));

    // Borrowed again, the driver resets and drives it again; the data is still there.
    let name = borrow(&s, "borrower", "lender:nvme0").expect("borrow again");
    let dev = borrower
        .driver_data::<NvmeDevice>(&name)
        .expect("bound again");
    let os = borrower.clone();
    let back = s.run(async move {
        let buf = os.alloc(4096).expect("ram");
        dev.submit(0, BlockOp::Read, 1, 8, 8, buf)
            .await
            .expect("read");
        let mut b = vec![0u8; 4096];
        os.machine().peek_memory(os.id(), buf, &mut b);
        b
    });
    assert_eq!(back, data[..4096], "the namespace kept the data");
}

#[test]
fn legacy_interrupts_are_masked_for_the_borrower() {
    let s = setup("back-to-back");
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let handle = s.host("borrower").device(&name).expect("shadow");
    let local = s.host("lender").device("dma0").expect("real");
    let (pin_shadow, pin_real, cmd_real) = s.run(async move {
        let pin_shadow = handle
            .config_read(pci::INTERRUPT_PIN, 1)
            .await
            .expect("cfg")[0];
        let pin_real = local.config_read(pci::INTERRUPT_PIN, 1).await.expect("cfg")[0];
        // The borrower's driver asks for INTx to be enabled; the lender keeps it off.
        handle
            .config_write(pci::COMMAND, &pci::command::MEMORY_SPACE.to_le_bytes())
            .await
            .expect("cfg");
        let cmd = local.config_read(pci::COMMAND, 2).await.expect("cfg");
        (pin_shadow, pin_real, u16::from_le_bytes([cmd[0], cmd[1]]))
    });
    assert_eq!(pin_real, 1, "the function has INTA");
    assert_eq!(pin_shadow, 0, "the borrower sees no INTx pin");
    assert_ne!(
        cmd_real & pci::command::INTX_DISABLE,
        0,
        "INTx stays disabled"
    );
    assert_ne!(
        cmd_real & pci::command::MEMORY_SPACE,
        0,
        "the write itself went through"
    );
}

#[test]
fn each_config_access_is_one_lender_interaction_and_a_wide_write_keeps_intx_off() {
    let s = setup("back-to-back");
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let handle = s.host("borrower").device(&name).expect("shadow");
    let local = s.host("lender").device("dma0").expect("real");
    let before = s.smartio.lender_interactions();
    let (svc, h) = (s.smartio.clone(), handle.clone());
    let counts = s.run(async move {
        let mut counts = Vec::new();
        h.config_read(pci::VENDOR_ID, 4).await.expect("cfg");
        counts.push(svc.lender_interactions());
        // Eight bytes from offset 0: vendor and device id (read-only), Command, Status.
        let mut header = h.config_read(0, 8).await.expect("cfg");
        counts.push(svc.lender_interactions());
        header[4..6].copy_from_slice(&pci::command::MEMORY_SPACE.to_le_bytes());
        h.config_write(0, &header).await.expect("cfg");
        counts.push(svc.lender_interactions());
        // One byte: Command's high half, where INTx Disable is.
        h.config_write(pci::COMMAND + 1, &[0]).await.expect("cfg");
        counts
    });
    assert_eq!(counts, [before + 1, before + 2, before + 3], "one each");
    assert!(before > 0, "the borrow itself asked the lender");
    let cmd = s.run(async move { local.config_read(pci::COMMAND, 2).await.expect("cfg") });
    let cmd = u16::from_le_bytes([cmd[0], cmd[1]]);
    assert_ne!(cmd & pci::command::INTX_DISABLE, 0, "INTx stays disabled");
    assert_ne!(
        cmd & pci::command::MEMORY_SPACE,
        0,
        "the write went through"
    );
}

#[test]
fn giving_a_device_back_stops_its_memory_decoding_and_bus_mastering_at_the_lender() {
    let s = setup("back-to-back");
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let handle = s.host("borrower").device(&name).expect("shadow");
    let on = pci::command::MEMORY_SPACE | pci::command::BUS_MASTER;
    s.run(async move {
        handle
            .config_write(pci::COMMAND, &on.to_le_bytes())
            .await
            .expect("cfg")
    });
    let command = |s: &Setup| {
        let local = s.host("lender").device("dma0").expect("real");
        let b = s.run(async move { local.config_read(pci::COMMAND, 2).await.expect("cfg") });
        u16::from_le_bytes([b[0], b[1]])
    };
    let lent = command(&s);
    assert_eq!(lent & on, on, "the borrower's driver enabled it");
    give_back(&s, "borrower", "lender:dma0").expect("give back");
    let back = command(&s);
    assert_eq!(back & on, 0, "the lender stopped it");
    assert_eq!(
        back & !on,
        lent & !on,
        "the other Command bits (INTx disable) are left as they were"
    );
}

/// Copies `data` from host RAM into dma `device`'s memory and back out to a second buffer
/// through the DMA API of `handle_name` in `os`; returns what came back.
async fn dma_round_trip(os: HostOs, handle_name: String, data: Vec<u8>) -> Result<Vec<u8>, String> {
    let handle = os.device(&handle_name).map_err(|e| e.to_string())?;
    let regs = handle.map_bar(0).map_err(|e| e.to_string())?.window().base;
    let completion = handle.dma_alloc_coherent(4096).map_err(|e| e.to_string())?;
    let len = data.len() as u64;
    let (src, dst) = (os.alloc(len).expect("ram"), os.alloc(len).expect("ram"));
    os.machine().poke_memory(os.id(), src, &data);
    let src_bus = handle
        .dma_map(src, len, DmaDirection::ToDevice)
        .map_err(|e| e.to_string())?;
    let dst_bus = handle
        .dma_map(dst, len, DmaDirection::FromDevice)
        .map_err(|e| e.to_string())?;
    let driver = DmaTestDriver::probe(handle.cpu().clone(), regs, completion.cpu, completion.bus)
        .await
        .map_err(|e| e.to_string())?;
    driver
        .copy(Location::Bus(src_bus), Location::DeviceMemory(0), len)
        .await
        .map_err(|e| e.to_string())?;
    driver
        .copy(Location::DeviceMemory(0), Location::Bus(dst_bus), len)
        .await
        .map_err(|e| e.to_string())?;
    let mut back = vec![0u8; data.len()];
    os.machine().peek_memory(os.id(), dst, &mut back);
    handle.dma_unmap(src_bus).map_err(|e| e.to_string())?;
    handle.dma_unmap(dst_bus).map_err(|e| e.to_string())?;
    handle
        .dma_free_coherent(completion)
        .map_err(|e| e.to_string())?;
    Ok(back)
}

/// Host RAM → GPU memory → host RAM through the GPU runtime on `handle_name`'s handle.
async fn gpu_round_trip(
    os: HostOs,
    handle_name: String,
    kernels: Rc<KernelLibrary<Agent>>,
    data: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let handle = os.device(&handle_name).map_err(|e| e.to_string())?;
    let costs = RuntimeCosts {
        call: SimDuration::ZERO,
        sync: SimDuration::ZERO,
    };
    let gpu = GpuContext::open(handle, kernels, costs)
        .await
        .map_err(|e| e.to_string())?;
    let len = data.len() as u64;
    let (src, dst) = (
        gpu.host_alloc(len).map_err(|e| e.to_string())?,
        gpu.host_alloc(len).map_err(|e| e.to_string())?,
    );
    os.machine().poke_memory(os.id(), src.cpu, &data);
    let device = gpu.malloc(len).map_err(|e| e.to_string())?;
    gpu.memcpy(device.addr(), src.addr(), len)
        .await
        .map_err(|e| e.to_string())?;
    gpu.memcpy(dst.addr(), device.addr(), len)
        .await
        .map_err(|e| e.to_string())?;
    let mut back = vec![0u8; data.len()];
    os.machine().peek_memory(os.id(), dst.cpu, &mut back);
    gpu.close().await.map_err(|e| e.to_string())?;
    Ok(back)
}

#[test]
fn with_a_borrower_iommu_the_dma_api_only_adds_borrower_entries_and_never_asks_the_lender() {
    let path = variant("back-to-back", &[(0, "iommu = false", "iommu = true")]);
    let s = setup(path.to_str().expect("utf-8"));
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let borrower = s.host("borrower");
    let handle = borrower.device(&name).expect("shadow");
    let before = s.smartio.lender_interactions();
    let pages = |s: &Setup| tables(&s.cluster.machine).1[0].iter().sum::<usize>();
    let idle = pages(&s);
    let buf = borrower.alloc(16 << 10).expect("ram");
    let mut maps = Vec::new();
    for i in 0..100u64 {
        let bus = handle
            .dma_map(
                PhysAddr(buf.get() + 64 * i),
                4096,
                DmaDirection::Bidirectional,
            )
            .expect("map");
        maps.push(bus);
    }
    // A 4 KiB buffer at a 64-byte offset spans two pages unless it starts on a page.
    let spanned: usize = (0..100u64)
        .map(|i| if (64 * i) % 4096 == 0 { 1 } else { 2 })
        .sum();
    assert_eq!(
        pages(&s),
        idle + spanned,
        "each map added borrower IOMMU entries"
    );
    let window = s.cluster.machine.fabric().adapters()[1].window.clone();
    assert!(
        maps.iter().all(|b| window.contains(&b.get())),
        "every address is inside the lender's DMA window"
    );
    for bus in maps {
        handle.dma_unmap(bus).expect("unmap");
    }
    assert_eq!(pages(&s), idle, "unmaps removed them");
    assert_eq!(
        s.smartio.lender_interactions(),
        before,
        "no message to the lender in the data path"
    );
    // And the device really reaches the borrower's memory through it.
    let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i ^ (i >> 9)) as u8).collect();
    let back = s
        .run(dma_round_trip(borrower.clone(), name, data.clone()))
        .expect("copies");
    assert_eq!(back, data);
    assert_eq!(
        s.smartio.lender_interactions(),
        before,
        "the copies did not involve the lender either"
    );
}

#[test]
fn with_a_borrower_iommu_a_buffer_at_an_odd_offset_in_a_page_gets_its_bytes_exactly_there() {
    let path = variant("back-to-back", &[(0, "iommu = false", "iommu = true")]);
    let s = setup(path.to_str().expect("utf-8"));
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let borrower = s.host("borrower");
    // Three pages of sentinel; the buffers start 0x2c5 bytes into their first page and end
    // inside their third, so every byte the device touches is mapped through two or three
    // IOMMU entries and any shift shows up against the sentinel.
    const OFFSET: u64 = 0x2c5;
    const LEN: u64 = 5000;
    const SENTINEL: u8 = 0xee;
    let data: Vec<u8> = (0..LEN as u32).map(|i| (i * 7 + (i >> 8)) as u8).collect();
    let (os, payload) = (borrower.clone(), data.clone());
    let (src_base, dst_base, src_bus, dst_bus) = s.run(async move {
        let handle = os.device(&name).expect("shadow");
        let regs = handle.map_bar(0).expect("BAR0").window().base;
        let completion = handle.dma_alloc_coherent(4096).expect("coherent");
        let (src_base, dst_base) = (
            os.alloc(3 * 4096).expect("ram"),
            os.alloc(3 * 4096).expect("ram"),
        );
        for base in [src_base, dst_base] {
            os.machine()
                .poke_memory(os.id(), base, &[SENTINEL; 3 * 4096]);
        }
        let src = PhysAddr(src_base.get() + OFFSET);
        let dst = PhysAddr(dst_base.get() + OFFSET);
        os.machine().poke_memory(os.id(), src, &payload);
        let src_bus = handle
            .dma_map(src, LEN, DmaDirection::ToDevice)
            .expect("map src");
        let dst_bus = handle
            .dma_map(dst, LEN, DmaDirection::FromDevice)
            .expect("map dst");
        let driver =
            DmaTestDriver::probe(handle.cpu().clone(), regs, completion.cpu, completion.bus)
                .await
                .expect("probe");
        driver
            .copy(Location::Bus(src_bus), Location::DeviceMemory(0), LEN)
            .await
            .expect("copy in");
        driver
            .copy(Location::DeviceMemory(0), Location::Bus(dst_bus), LEN)
            .await
            .expect("copy out");
        handle.dma_unmap(src_bus).expect("unmap src");
        handle.dma_unmap(dst_bus).expect("unmap dst");
        (src_base, dst_base, src_bus, dst_bus)
    });
    // The device addresses keep the offset inside the page.
    assert_eq!(src_bus.get() % 4096, OFFSET, "{src_bus}");
    assert_eq!(dst_bus.get() % 4096, OFFSET, "{dst_bus}");
    let mut got = vec![0u8; 3 * 4096];
    s.cluster
        .machine
        .peek_memory(borrower.id(), dst_base, &mut got);
    let (before, rest) = got.split_at(OFFSET as usize);
    let (landed, after) = rest.split_at(LEN as usize);
    assert!(
        before.iter().all(|&b| b == SENTINEL),
        "bytes before the buffer changed"
    );
    assert_eq!(landed, &data[..], "the bytes landed exactly at the offset");
    assert!(
        after.iter().all(|&b| b == SENTINEL),
        "bytes after the buffer changed"
    );
    // The source was read from the offset too (the device copied the payload, not the
    // sentinel in front of it), and was left as it was.
    let mut src = vec![0u8; LEN as usize];
    s.cluster
        .machine
        .peek_memory(borrower.id(), PhysAddr(src_base.get() + OFFSET), &mut src);
    assert_eq!(src, data);
}

#[test]
fn without_a_borrower_iommu_a_too_small_ntb_window_refuses_the_borrow_with_both_sizes() {
    let path = variant(
        "back-to-back",
        &[(1, "window = \"128 GiB\"", "window = \"32 GiB\"")],
    );
    let s = setup(path.to_str().expect("utf-8"));
    let before = tables(&s.cluster.machine);
    let err = borrow(&s, "borrower", "lender:dma0").expect_err("window too small");
    assert!(
        matches!(err, SmartIoError::WindowTooSmall { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("RAM (64G, addresses up to 66G)") && msg.contains("window is only 32G"),
        "{msg}"
    );
    assert_eq!(before, tables(&s.cluster.machine), "nothing left taken");
    assert!(
        s.host("borrower").device("dma0").is_err(),
        "nothing hot-added"
    );
}

#[test]
fn with_the_lender_iommu_a_stray_dma_faults_is_reported_and_lender_memory_is_untouched() {
    let path = variant("back-to-back", &[(1, "iommu = false", "iommu = true")]);
    let s = setup(path.to_str().expect("utf-8"));
    let before = tables(&s.cluster.machine);
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let borrower = s.host("borrower");
    // The lender's IOMMU maps exactly the windows, in 4 KiB pages: in dma0's domain, the
    // DMA window (all of the borrower's RAM: addresses up to 66 GiB) and the MSI window
    // (1 MiB); in the lender adapter's domain, dma0's BARs (64 KiB and 256 MiB) for
    // requests arriving through the NTB. The other domains stay empty.
    let (luts, iommu) = tables(&s.cluster.machine);
    // Look-up-table entries of 2 GiB and requester ids, per adapter: on the borrower's, one
    // entry per BAR of dma0; on the lender's, 33 entries for the borrower's RAM (up to
    // 66 GiB) and one for its MSI window, and dma0 as one more requester.
    assert_eq!(luts, [(2, 2), (34, 3)]);
    let lender_pages = iommu[s.host("lender").id().index()].clone();
    let pages = |bytes: u64| (bytes / 4096) as usize;
    assert_eq!(
        lender_pages,
        [
            0,
            0,
            0,
            pages((66 << 30) + (1 << 20)),
            0,
            pages((64 << 10) + (256 << 20))
        ]
    );
    // Legitimate DMA still works through the windows.
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 13) as u8).collect();
    let back = s
        .run(dma_round_trip(borrower.clone(), name.clone(), data.clone()))
        .expect("copies");
    assert_eq!(back, data);
    let fdid = s.fdid("lender:dma0");
    assert!(s.smartio.device_faults(fdid).expect("known").is_empty());

    // A stray copy aimed at lender RAM (an address outside every window).
    let target = PhysAddr(0x4000_0000);
    let lender_id = s.host("lender").id();
    s.cluster
        .machine
        .poke_memory(lender_id, target, &[0x5a; 4096]);
    let handle = borrower.device(&name).expect("shadow");
    let result = s.run(async move {
        let regs = handle.map_bar(0).expect("bar").window().base;
        let completion = handle.dma_alloc_coherent(4096).expect("coherent");
        let driver =
            DmaTestDriver::probe(handle.cpu().clone(), regs, completion.cpu, completion.bus)
                .await
                .expect("probe");
        driver
            .copy(
                Location::DeviceMemory(0),
                Location::Bus(BusAddr(target.get())),
                4096,
            )
            .await
    });
    assert!(result.is_err(), "the copy failed: {result:?}");
    let faults = s.smartio.device_faults(fdid).expect("known");
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(matches!(
        &faults[0].error,
        AccessError::IommuFault { host, addr, .. } if host == "lender" && *addr == BusAddr(0x4000_0000)
    ));
    let mut after = [0u8; 4096];
    s.cluster.machine.peek_memory(lender_id, target, &mut after);
    assert_eq!(after, [0x5a; 4096], "lender memory untouched");
    give_back(&s, "borrower", "lender:dma0").expect("return");
    assert_eq!(before, tables(&s.cluster.machine));
}

#[test]
fn a_32_bit_device_gets_low_windows_through_the_lender_iommu_and_fails_clearly_without() {
    let options = BorrowOptions {
        dma_limit: u64::from(u32::MAX),
        ..BorrowOptions::default()
    };
    let s = setup("back-to-back");
    let (smartio, host, fdid) = (
        s.smartio.clone(),
        s.host("borrower").id(),
        s.fdid("lender:dma0"),
    );
    let err = s
        .run(async move { smartio.borrow(host, fdid, &options).await })
        .expect_err("the window is above 4 GiB");
    assert!(matches!(err, SmartIoError::AddressLimit { .. }), "{err:?}");

    // Lender and borrower IOMMUs on: the DMA window is small and can be remapped low.
    let path = variant(
        "back-to-back",
        &[
            (0, "iommu = false", "iommu = true"),
            (0, "iommu = false", "iommu = true"),
        ],
    );
    let s = setup(path.to_str().expect("utf-8"));
    let (smartio, host, fdid) = (
        s.smartio.clone(),
        s.host("borrower").id(),
        s.fdid("lender:dma0"),
    );
    let name = s
        .run(async move { smartio.borrow(host, fdid, &options).await })
        .expect("remapped low")
        .device;
    let borrower = s.host("borrower");
    let handle = borrower.device(&name).expect("shadow");
    let bus = handle
        .dma_map(
            borrower.alloc(4096).expect("ram"),
            4096,
            DmaDirection::Bidirectional,
        )
        .expect("map");
    assert!(bus.get() < 1 << 32, "{bus} is below 4 GiB");
    let data: Vec<u8> = (0..32 * 1024u32).map(|i| (i * 5) as u8).collect();
    let back = s
        .run(dma_round_trip(borrower.clone(), name, data.clone()))
        .expect("copies");
    assert_eq!(back, data, "DMA through the remapped window");
}

#[test]
fn two_bars_sharing_a_look_up_table_entry_are_each_reached_at_their_own_offset() {
    // gpu0's BAR1 (256 MiB of memory) and BAR3 (32 MiB that answers nothing) lie in one
    // 2 GiB look-up-table entry: one mapping serves both, each BAR at its own offset.
    let s = setup("back-to-back");
    let name = borrow(&s, "borrower", "lender:gpu0").expect("borrow");
    let shadow = s.host("borrower").device(&name).expect("shadow");
    let local = s.host("lender").device("gpu0").expect("real");
    let (stored, bar3) = s.run(async move {
        shadow
            .map_bar(1)
            .expect("borrower's BAR1")
            .write(0x1000, &[0x11; 64])
            .await
            .expect("store through the NTB");
        let mut b = [0u8; 64];
        local
            .map_bar(1)
            .expect("lender's BAR1")
            .read(0x1000, &mut b)
            .await
            .expect("local load");
        let mut w = [0u8; 8];
        let bar3 = shadow
            .map_bar(3)
            .expect("borrower's BAR3")
            .read(0x1000, &mut w)
            .await;
        (b, bar3)
    });
    assert_eq!(stored, [0x11; 64], "the store landed in BAR1");
    match bar3 {
        Err(AccessError::CompleterAbort { target, offset, .. }) => {
            assert_eq!((target.as_str(), offset), ("gpu0 BAR3", 0x1000))
        }
        other => panic!("a load from BAR3 reaches BAR3, which answers nothing: {other:?}"),
    }
}

#[test]
fn a_dma_map_the_window_cannot_hold_names_the_shadow_device() {
    let s = setup("back-to-back");
    let name = borrow(&s, "borrower", "lender:dma0").expect("borrow");
    let handle = s.host("borrower").device(&name).expect("shadow");
    let err = handle
        .dma_map(PhysAddr(100 << 30), 4096, DmaDirection::ToDevice)
        .expect_err("beyond the borrower's RAM");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{name}: ")) && msg.contains("beyond the borrower RAM"),
        "{msg}"
    );
}

#[test]
fn two_devices_lent_to_one_borrower_with_its_iommu_get_windows_that_do_not_overlap() {
    let path = variant("back-to-back", &[(0, "iommu = false", "iommu = true")]);
    let s = setup(path.to_str().expect("utf-8"));
    let dma = borrow(&s, "borrower", "lender:dma0").expect("borrow dma0");
    let gpu = borrow(&s, "borrower", "lender:gpu0").expect("borrow gpu0");
    let borrower = s.host("borrower");
    // A buffer mapped for each device, both through the borrower's IOMMU.
    let maps: Vec<_> = [&dma, &gpu]
        .iter()
        .map(|name| {
            let handle = borrower.device(name).expect("shadow");
            let buf = borrower.alloc(4096).expect("ram");
            let bus = handle
                .dma_map(buf, 4096, DmaDirection::Bidirectional)
                .expect("map");
            (handle, bus)
        })
        .collect();
    // Both devices' copies still land where they should.
    let data: Vec<u8> = (0..16 * 1024u32).map(|i| (i * 11) as u8).collect();
    let back = s
        .run(dma_round_trip(borrower.clone(), dma.clone(), data.clone()))
        .expect("copies");
    assert_eq!(back, data, "{dma}");
    let kernels = s.cluster.gpu_kernels().clone();
    let back = s
        .run(gpu_round_trip(
            borrower.clone(),
            gpu.clone(),
            kernels,
            data.clone(),
        ))
        .expect("copies");
    assert_eq!(back, data, "{gpu}");
    for (handle, bus) in maps {
        handle.dma_unmap(bus).expect("unmap");
    }
}
