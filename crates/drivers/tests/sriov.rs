//! The DMA test driver bound to a virtual function (issue 17): the VF's own copy engine
//! moves bytes, verified, with the VF's requester id — so the lender's IOMMU translates it
//! in the VF's domain: a VF whose domain lacks a mapping the PF's has faults, and the fault
//! names the VF. Runs on both engines.
//!
//! Scenario: `crates/smartio/tests/scenarios/sriov-lending.toml` (dma0 with 8 VFs in a
//! lender whose IOMMU is on).

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions, EngineKind};
use smartio_devices::dma::REGISTER_BAR;
use smartio_drivers::dma::{DmaTestDriver, DriverError, Location};
use smartio_host::{DeviceHandle, DmaDirection, HostOs};
use smartio_platform::AccessError;
use std::cell::Cell;
use std::rc::Rc;

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../smartio/tests/scenarios/sriov-lending.toml"
);

fn lender(engine: EngineKind) -> (Cluster, HostOs) {
    let options = ClusterOptions {
        engine,
        ..ClusterOptions::default()
    };
    let c = Cluster::with_options(SCENARIO, &Calibration::default_embedded(), &options)
        .expect("cluster");
    let os = HostOs::boot_all(&c.machine)
        .expect("boot")
        .into_iter()
        .find(|o| o.name() == "lender")
        .expect("the lender");
    (c, os)
}

fn run(c: &Cluster, test: impl std::future::Future<Output = ()> + 'static) {
    let done = Rc::new(Cell::new(false));
    let flag = done.clone();
    c.machine.spawn(async move {
        test.await;
        flag.set(true);
    });
    c.machine.run();
    assert!(
        done.get(),
        "the test task did not finish: {}",
        c.machine.blocked_summary()
    );
}

/// The DMA test driver on `device`, its completion word in a coherent buffer of its own.
async fn bind(os: &HostOs, device: &DeviceHandle) -> DmaTestDriver<smartio_machine::Agent> {
    device.enable().await.expect("enable");
    let completion = device.dma_alloc_coherent(4096).expect("completion word");
    let regs = device.map_bar(REGISTER_BAR).expect("BAR0");
    DmaTestDriver::probe(os.cpu(), regs.window().base, completion.cpu, completion.bus)
        .await
        .expect("probe")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn the_dma_test_driver_on_a_vf_moves_verified_bytes_on_both_engines() {
    for engine in [EngineKind::Timed, EngineKind::Direct] {
        let (c, os) = lender(engine);
        let machine = c.machine.clone();
        run(&c, async move {
            let pf = os.device("dma0").expect("the PF");
            let vfs = pf.enable_sriov(2).await.expect("2 VFs");
            let vf = &vfs[1];
            let driver = bind(&os, vf).await;
            let len = 256 << 10;
            let data = pattern(len, 0x5a);
            let src = vf.dma_alloc_coherent(len as u64).expect("src");
            let dst = vf.dma_alloc_coherent(len as u64).expect("dst");
            os.write_memory(src.cpu, &data).expect("fill");
            // Host memory → the VF's own memory → host memory.
            driver
                .copy(
                    Location::Bus(src.bus),
                    Location::DeviceMemory(0),
                    len as u64,
                )
                .await
                .expect("into the VF");
            driver
                .copy(
                    Location::DeviceMemory(0),
                    Location::Bus(dst.bus),
                    len as u64,
                )
                .await
                .expect("out of the VF");
            let mut got = vec![0u8; len];
            os.read_memory(dst.cpu, &mut got).expect("read back");
            assert_eq!(got, data, "{engine:?}");
            // The VF's memory is its own, not the PF's.
            let pf_memory = pf
                .map_bar(smartio_devices::dma::MEMORY_BAR)
                .expect("PF BAR2");
            let mut first = [0u8; 16];
            pf_memory.read(0, &mut first).await.expect("PF memory");
            assert_eq!(first, [0u8; 16], "{engine:?}");
        });
        assert!(
            machine.faults().is_empty(),
            "{engine:?}: {:?}",
            machine.faults()
        );
    }
}

#[test]
fn a_vf_whose_iommu_domain_lacks_a_mapping_the_pf_has_faults_with_its_own_requester_id() {
    for engine in [EngineKind::Timed, EngineKind::Direct] {
        let (c, os) = lender(engine);
        let machine = c.machine.clone();
        run(&c, async move {
            let pf = os.device("dma0").expect("the PF");
            let pf_driver = bind(&os, &pf).await;
            // Three PF mappings: the last lies past anything the VF maps below.
            let buffers: Vec<_> = (0..3).map(|_| os.alloc(64 << 10).expect("RAM")).collect();
            let data = pattern(64 << 10, 0xa5);
            os.write_memory(buffers[2], &data).expect("fill");
            let mut pf_bus = None;
            for &b in &buffers {
                pf_bus = Some(
                    pf.dma_map(b, 64 << 10, DmaDirection::ToDevice)
                        .expect("map"),
                );
            }
            let pf_bus = pf_bus.expect("mapped");
            // The PF reaches it.
            pf_driver
                .copy(Location::Bus(pf_bus), Location::DeviceMemory(0), 64 << 10)
                .await
                .expect("the PF's domain maps it");
            let vf = pf.enable_sriov(1).await.expect("1 VF").remove(0);
            let vf_driver = bind(&os, &vf).await;
            let err = vf_driver
                .copy(Location::Bus(pf_bus), Location::DeviceMemory(0), 64 << 10)
                .await
                .expect_err("the VF's domain does not map the PF's buffer");
            assert!(matches!(err, DriverError::CopyFailed { .. }), "{err}");
        });
        let faults: Vec<AccessError> = machine.faults().into_iter().map(|f| f.error).collect();
        assert_eq!(faults.len(), 1, "{engine:?}: {faults:?}");
        match &faults[0] {
            AccessError::IommuFault {
                host, requester, ..
            } => {
                assert_eq!((host.as_str(), requester.as_str()), ("lender", "dma0.vf1"));
            }
            other => panic!("{engine:?}: not an IOMMU fault: {other}"),
        }
    }
}

#[test]
fn clearing_vf_enable_makes_vf_bars_unsupported_and_vf_configuration_all_ones_on_both_engines() {
    for engine in [EngineKind::Timed, EngineKind::Direct] {
        let (c, os) = lender(engine);
        run(&c, async move {
            let cpu = os.cpu();
            let pf = os.device("dma0").expect("the PF");
            let vf = pf.enable_sriov(1).await.expect("1 VF").remove(0);
            let (_, endpoint) = vf.function();
            let base = vf.map_bar(REGISTER_BAR).expect("BAR0").window().base;
            let mut id = [0u8; 4];
            cpu.config_read(endpoint, smartio_platform::pci::VENDOR_ID, &mut id)
                .await
                .expect("config");
            assert_eq!(id, [0xff, 0xff, 0x3b, 0x0d], "{engine:?}: a live VF");
            let mut word = [0u8; 8];
            smartio_platform::Port::read(
                &cpu,
                base.offset(smartio_devices::dma::reg::ID),
                &mut word,
            )
            .await
            .expect("decodes");
            assert_eq!(u64::from_le_bytes(word), smartio_devices::dma::DEVICE_MAGIC);
            pf.disable_sriov().await.expect("disable");
            cpu.config_read(endpoint, smartio_platform::pci::VENDOR_ID, &mut id)
                .await
                .expect("an absent function's read completes");
            assert_eq!(id, [0xff; 4], "{engine:?}");
            let load = smartio_platform::Port::read(&cpu, base, &mut word).await;
            assert!(
                matches!(load, Err(AccessError::UnsupportedRequest { .. })),
                "{engine:?}: {load:?}"
            );
        });
    }
}
