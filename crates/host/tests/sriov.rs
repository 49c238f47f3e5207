//! SR-IOV in the OS model (issue 17): the PF driver's `enable_sriov` checks TotalVFs, makes
//! the VFs exist and hot-adds them where drivers bind; `disable_sriov` unbinds and removes
//! them, and their handles answer every call with `FunctionGone`. (The DMA test driver on a
//! VF is tested in `crates/drivers/tests/sriov.rs`.)
//!
//! Scenario: `crates/smartio/tests/scenarios/sriov-lending.toml` (the lender's dma0 has 8
//! VFs, the lender's IOMMU is on).

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::dma::{REGISTER_BAR, VF_DEVICE_ID};
use smartio_host::{
    BoxFuture, DeviceHandle, DmaDirection, DmaError, Driver, HostError, HostOs, PciId, ProbeError,
};
use smartio_platform::pci;
use smartio_platform::AccessError;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../smartio/tests/scenarios/sriov-lending.toml"
);

fn lender() -> (Cluster, HostOs) {
    let c = Cluster::new(SCENARIO, &Calibration::default_embedded()).expect("cluster");
    let os = HostOs::boot_all(&c.machine)
        .expect("boot")
        .into_iter()
        .find(|o| o.name() == "lender")
        .expect("the lender");
    (c, os)
}

/// Runs `test` as a task of the cluster and checks it finished.
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

/// Binds to VFs of the DMA test device and records probe and remove.
#[derive(Default)]
struct VfDriver {
    events: RefCell<Vec<String>>,
}

struct VfDriverRef(Rc<VfDriver>);

impl Driver for VfDriverRef {
    fn name(&self) -> &str {
        "dma-vf"
    }
    fn matches(&self, id: &PciId) -> bool {
        id.device == VF_DEVICE_ID
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
fn firmware_shows_the_pf_only_and_enabling_more_vfs_than_totalvfs_is_refused() {
    let (c, os) = lender();
    let names: Vec<String> = os.devices().iter().map(|d| d.name().to_string()).collect();
    assert_eq!(
        names,
        vec!["dma0", "ntb0"],
        "no VF before the PF driver enables them"
    );
    run(&c, async move {
        let pf = os.device("dma0").expect("the PF");
        assert_eq!(pf.sriov_total_vfs().await.expect("a PF"), 8);
        for asked in [9, 0] {
            let err = pf.enable_sriov(asked).await.expect_err("outside 1..=8");
            assert_eq!(
                err,
                HostError::TooManyVfs {
                    device: "dma0".into(),
                    asked,
                    total: 8
                }
            );
        }
        assert_eq!(
            HostError::TooManyVfs {
                device: "dma0".into(),
                asked: 9,
                total: 8
            }
            .to_string(),
            "dma0: 9 VFs asked for, the device supports 1 to 8 (TotalVFs)"
        );
        // The refused write left nothing behind: no VF exists.
        assert_eq!(os.devices().len(), 2);
        let ntb = os.device("ntb0").expect("the adapter");
        assert_eq!(
            ntb.enable_sriov(1).await.expect_err("no capability"),
            HostError::NoSrIov {
                device: "ntb0".into()
            }
        );
    });
}

#[test]
fn enabled_vfs_are_hot_added_with_the_vf_rules_and_a_driver_binds_to_each() {
    let (c, os) = lender();
    let driver = Rc::new(VfDriver::default());
    os.register_driver(Rc::new(VfDriverRef(driver.clone())));
    let seen = driver.clone();
    run(&c, async move {
        let pf = os.device("dma0").expect("the PF");
        let vfs = pf.enable_sriov(3).await.expect("3 of 8");
        let names: Vec<&str> = vfs.iter().map(|v| v.name()).collect();
        assert_eq!(names, vec!["dma0.vf1", "dma0.vf2", "dma0.vf3"]);
        assert_eq!(os.bound_driver("dma0.vf2").as_deref(), Some("dma-vf"));
        let vf2 = os.device("dma0.vf2").expect("in the tree");
        assert!(os.endpoint_of("dma0.vf2").is_some());
        let id = vf2.config_read(pci::VENDOR_ID, 4).await.expect("config");
        assert_eq!(
            id,
            [0xff, 0xff, 0x3b, 0x0d],
            "Vendor ID 0xFFFF, the VF Device ID"
        );
        assert_eq!(
            pf.enable_sriov(2).await.expect_err("enabled already"),
            HostError::SrIovEnabled {
                device: "dma0".into(),
                num_vfs: 3
            }
        );
        // Disabling unbinds and removes them.
        pf.disable_sriov().await.expect("disable");
        let names: Vec<String> = os.devices().iter().map(|d| d.name().to_string()).collect();
        assert_eq!(names, vec!["dma0", "ntb0"]);
    });
    assert_eq!(
        *seen.events.borrow(),
        vec![
            "probe dma0.vf1",
            "probe dma0.vf2",
            "probe dma0.vf3",
            "remove dma0.vf3",
            "remove dma0.vf2",
            "remove dma0.vf1"
        ]
    );
}

#[test]
fn a_vf_used_after_its_pf_disabled_sr_iov_answers_function_gone_and_its_bar_reads_all_ones() {
    let (c, os) = lender();
    let cpu = os.cpu();
    run(&c, async move {
        let pf = os.device("dma0").expect("the PF");
        let vf = pf.enable_sriov(2).await.expect("2 VFs").remove(0);
        let regs = vf.map_bar(REGISTER_BAR).expect("VF BAR0");
        let id = regs
            .read64(smartio_devices::dma::reg::ID)
            .await
            .expect("live");
        assert_eq!(id, smartio_devices::dma::DEVICE_MAGIC);
        let base = regs.window().base;
        pf.disable_sriov().await.expect("disable");
        let gone = || "dma0.vf1".to_string();
        assert!(vf.is_gone());
        assert_eq!(
            vf.config_read(pci::VENDOR_ID, 2).await,
            Err(AccessError::FunctionGone { device: gone() })
        );
        assert_eq!(
            vf.enable().await,
            Err(AccessError::FunctionGone { device: gone() })
        );
        assert_eq!(
            vf.map_bar(REGISTER_BAR).map(|_| ()),
            Err(HostError::FunctionGone { device: gone() })
        );
        assert_eq!(
            vf.dma_alloc_coherent(4096).map(|_| ()),
            Err(DmaError::FunctionGone { device: gone() })
        );
        assert_eq!(
            vf.dma_map(
                smartio_platform::PhysAddr(1 << 30),
                64,
                DmaDirection::ToDevice
            ),
            Err(DmaError::FunctionGone { device: gone() })
        );
        assert!(matches!(
            vf.enable_msix(1).await,
            Err(HostError::FunctionGone { .. })
        ));
        assert_eq!(
            AccessError::FunctionGone { device: gone() }.to_string(),
            "dma0.vf1 is gone: its physical function disabled SR-IOV"
        );
        // A mapping taken before: the load is an Unsupported Request and reads all-ones.
        let mut word = [0u8; 8];
        let load = regs.read(smartio_devices::dma::reg::ID, &mut word).await;
        assert!(
            matches!(load, Err(AccessError::UnsupportedRequest { addr, .. }) if addr == base.offset(smartio_devices::dma::reg::ID)),
            "{load:?}"
        );
        assert_eq!(word, [0xff; 8]);
        // And configuration reads of the VF's routing id return all-ones.
        let mut raw = [0u8; 4];
        let (_, endpoint) = vf.function();
        cpu.config_read(endpoint, pci::VENDOR_ID, &mut raw)
            .await
            .expect("a configuration read of an absent function completes");
        assert_eq!(raw, [0xff; 4]);
        // The PF itself is untouched.
        assert!(!pf.is_gone());
        assert_eq!(pf.sriov_total_vfs().await.expect("still a PF"), 8);
    });
}
