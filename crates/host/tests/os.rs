//! The host OS model: the device tree from enumeration, driver binding, hot-add and -remove,
//! the DMA API through the IOMMU, and MSI-X delivery.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::nvme::spec::CLASS_CODE;
use smartio_host::{
    BoxFuture, DeviceHandle, DmaDirection, Driver, HostError, HostOs, PciId, ProbeError,
};
use smartio_platform::{AccessError, BusAddr, Port};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

fn cluster(scenario: &str) -> Cluster {
    Cluster::new(scenario, &Calibration::default_embedded()).expect("cluster")
}

/// A driver that records what happens to it.
#[derive(Default)]
struct Recorder {
    events: RefCell<Vec<String>>,
}

struct RecorderDriver(Rc<Recorder>);

impl Driver for RecorderDriver {
    fn name(&self) -> &str {
        "recorder"
    }
    fn matches(&self, id: &PciId) -> bool {
        id.class == CLASS_CODE
    }
    fn probe(&self, device: DeviceHandle) -> BoxFuture<Result<Rc<dyn Any>, ProbeError>> {
        let r = self.0.clone();
        Box::pin(async move {
            device.enable().await?;
            r.events
                .borrow_mut()
                .push(format!("probe {}", device.name()));
            Ok(Rc::new(device.name().to_string()) as Rc<dyn Any>)
        })
    }
    fn remove(&self, state: Rc<dyn Any>) -> BoxFuture<()> {
        let r = self.0.clone();
        Box::pin(async move {
            let name = state
                .downcast::<String>()
                .map(|s| (*s).clone())
                .unwrap_or_default();
            r.events.borrow_mut().push(format!("remove {name}"));
        })
    }
}

#[test]
fn the_tree_holds_what_firmware_enumerated_and_unknown_names_are_listed() {
    let c = cluster("local-chassis");
    let os = HostOs::boot_all(&c.machine).expect("boot").remove(0);
    let names: Vec<String> = os.devices().iter().map(|d| d.name().to_string()).collect();
    assert_eq!(names, ["nvme0", "gpu0", "gpu1", "dma0"]);
    let nvme = os.device("nvme0").expect("present");
    assert_eq!(nvme.id().vendor, 0x8086);
    assert_eq!(nvme.id().class, CLASS_CODE);
    let e = os.device("nvme7").expect_err("absent");
    assert!(matches!(e, HostError::UnknownDevice { .. }));
    assert!(e.to_string().contains("nvme0, gpu0, gpu1, dma0"), "{e}");
}

#[test]
fn hot_remove_unbinds_first_and_hot_add_binds_again() {
    let c = cluster("local-chassis");
    let os = HostOs::boot_all(&c.machine).expect("boot").remove(0);
    let rec = Rc::new(Recorder::default());
    os.register_driver(Rc::new(RecorderDriver(rec.clone())));
    let done = Rc::new(Cell::new(false));
    let (os2, flag) = (os.clone(), done.clone());
    c.machine.spawn(async move {
        os2.probe("nvme0").await.expect("probe");
        assert_eq!(os2.bound_driver("nvme0").as_deref(), Some("recorder"));
        let e = os2.probe("gpu0").await.expect_err("no driver for a GPU");
        assert!(matches!(e, HostError::NoDriver { .. }), "{e}");
        let handle = os2.hot_remove("nvme0").await.expect("hot remove");
        assert!(os2.device("nvme0").is_err());
        os2.hot_add(handle.clone()).await.expect("hot add");
        assert_eq!(os2.bound_driver("nvme0").as_deref(), Some("recorder"));
        let e = os2.hot_add(handle).await.expect_err("twice");
        assert!(matches!(e, HostError::DuplicateDevice { .. }), "{e}");
        flag.set(true);
    });
    c.machine.run();
    assert!(done.get(), "the task did not finish");
    assert_eq!(
        *rec.events.borrow(),
        ["probe nvme0", "remove nvme0", "probe nvme0"]
    );
}

fn iommu_scenario() -> std::path::PathBuf {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/local-chassis.toml"),
    )
    .expect("scenario");
    let dir = std::env::temp_dir().join(format!("smartio-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("iommu.toml");
    std::fs::write(&path, text.replace("iommu = false", "iommu = true")).expect("write");
    path
}

#[test]
fn with_the_iommu_on_dma_reaches_only_what_the_dma_api_mapped() {
    let path = iommu_scenario();
    let c = cluster(path.to_str().expect("utf-8"));
    let os = HostOs::boot_all(&c.machine).expect("boot").remove(0);
    let endpoint = os.endpoint_of("dma0").expect("enumerated");
    let device = c.machine.device(endpoint);
    let done = Rc::new(Cell::new(false));
    let (os2, flag) = (os.clone(), done.clone());
    c.machine.spawn(async move {
        let dev = os2.device("dma0").expect("present");
        dev.enable().await.expect("enable");
        let buf = dev.dma_alloc_coherent(8192).expect("coherent buffer");
        assert_ne!(
            buf.bus.get(),
            buf.cpu.get(),
            "an I/O virtual address, not physical"
        );
        device
            .write(buf.bus.offset(100), b"through the IOMMU")
            .await
            .expect("mapped DMA");
        // A read on the same path returns after the posted write has landed.
        device.read_owned(buf.bus, 4).await.expect("flushing read");
        let mut seen = [0u8; 17];
        os2.cpu()
            .read(BusAddr(buf.cpu.get() + 100), &mut seen)
            .await
            .expect("cpu read");
        assert_eq!(&seen, b"through the IOMMU");
        // A streaming mapping of a buffer with an offset keeps the offset.
        let other = os2.alloc(4096).expect("alloc");
        let bus = dev
            .dma_map(
                smartio_platform::PhysAddr(other.get() + 24),
                64,
                DmaDirection::FromDevice,
            )
            .expect("map");
        assert_eq!(bus.get() % 4096, 24);
        dev.dma_unmap(bus).expect("unmap");
        let e = device.write(bus, b"stray").await.expect_err("unmapped");
        assert!(matches!(e, AccessError::IommuFault { .. }), "{e}");
        let e = dev.dma_unmap(bus).expect_err("twice");
        assert!(e.to_string().contains("not mapped"), "{e}");
        dev.dma_free_coherent(buf).expect("free");
        let e = device.read_owned(buf.bus, 8).await.expect_err("freed");
        assert!(matches!(e, AccessError::IommuFault { .. }), "{e}");
        flag.set(true);
    });
    c.machine.run();
    assert!(done.get(), "the task did not finish");
    let faults: Vec<_> = c.machine.faults().into_iter().map(|f| f.error).collect();
    assert_eq!(
        faults.len(),
        2,
        "the stray write and the read of freed memory: {faults:?}"
    );
    assert!(
        faults
            .iter()
            .all(|e| matches!(e, AccessError::IommuFault { .. })),
        "{faults:?}"
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn msix_vectors_are_programmed_and_an_msi_write_wakes_the_handler() {
    let c = cluster("local-chassis");
    let os = HostOs::boot_all(&c.machine).expect("boot").remove(0);
    let endpoint = os.endpoint_of("nvme0").expect("enumerated");
    let device = c.machine.device(endpoint);
    let hits = Rc::new(Cell::new(0));
    let (os2, h) = (os.clone(), hits.clone());
    c.machine.spawn(async move {
        let dev = os2.device("nvme0").expect("present");
        dev.enable().await.expect("enable");
        let e = dev.enable_msix(33).await.expect_err("32 vectors");
        assert!(
            matches!(e, HostError::TooManyVectors { available: 32, .. }),
            "{e}"
        );
        let irqs = dev.enable_msix(4).await.expect("4 vectors");
        let bar = dev.map_bar(0).expect("bar0");
        // The table entry of vector 2 holds the host's MSI address and the vector number.
        let lo = bar.read32(0x2000 + 2 * 16).await.expect("table");
        let data = bar.read32(0x2000 + 2 * 16 + 8).await.expect("table");
        assert_eq!(lo, 0xFEE0_0000);
        assert_eq!(data, irqs[2].vector);
        let irq = irqs[2].clone();
        let waiter = h.clone();
        dev.spawn(async move {
            irq.wait().await;
            waiter.set(waiter.get() + 1);
        });
        device
            .write(BusAddr(u64::from(lo)), &data.to_le_bytes())
            .await
            .expect("MSI write");
    });
    c.machine.run();
    assert_eq!(hits.get(), 1);
}

/// `read_memory_append` appends what `read_memory` reads — written bytes across a page
/// boundary, unwritten ones as zeroes — after what the buffer already holds.
#[test]
fn memory_read_by_appending_is_what_a_read_gives_after_what_was_there() {
    let cluster = cluster("back-to-back");
    let os = HostOs::boot_all(&cluster.machine).expect("boots").remove(0);
    let buffer = os.alloc(3 * 4096).expect("ram");
    let at = smartio_platform::PhysAddr(buffer.get() + 4096 - 100);
    let written: Vec<u8> = (0..300u32).map(|i| (i * 7 % 251) as u8 + 1).collect();
    os.write_memory(at, &written).expect("poke");

    // 300 written bytes, then 50 never written.
    let mut read = vec![0u8; 350];
    os.read_memory(at, &mut read).expect("peek");
    let mut appended = b"kept".to_vec();
    os.read_memory_append(at, 350, &mut appended).expect("peek");
    assert_eq!(&appended[..4], b"kept");
    assert_eq!(&appended[4..], &read[..]);
    assert_eq!(&appended[4..304], &written[..]);
    assert!(appended[304..].iter().all(|&b| b == 0));
}
