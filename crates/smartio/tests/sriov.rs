//! SR-IOV virtual functions lent like any device (issue 17): VFs of one PF registered with
//! their own fdids, two of them lent to two borrowers at the same time, each moving its own
//! verified bytes and taking one requester-id entry of the lender's adapter; lending more
//! VFs than that table holds is an error naming it; and a lent VF whose PF disabled SR-IOV
//! answers its borrower with `FunctionGone`.
//!
//! Scenario: `tests/scenarios/sriov-lending.toml` (dma0 with 8 VFs in a lender whose IOMMU is
//! on; two borrowers; one cluster switch).

use crate::common;

use common::tables;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind};
use smartio_drivers::{DmaTestDriver, Location};
use smartio_host::{DmaDirection, DmaError, HostError, HostOs};
use smartio_platform::{pci, AccessError};
use smartio_smartio::{BorrowOptions, Fdid, SmartIo, SmartIoError};
use std::cell::RefCell;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/scenarios/sriov-lending.toml"
);

/// The scenario with dma0's TotalVFs set to `vfs`, in a file of its own.
fn with_vfs(vfs: u16) -> PathBuf {
    let text = std::fs::read_to_string(SCENARIO).expect("the scenario");
    let text = text.replace("vfs = 8", &format!("vfs = {vfs}"));
    let path =
        std::env::temp_dir().join(format!("smartio-sriov-{}-{vfs}.toml", std::process::id()));
    std::fs::write(&path, text).expect("temp file");
    path
}

struct Setup {
    cluster: Cluster,
    hosts: Vec<HostOs>,
    smartio: SmartIo,
}

impl Setup {
    /// The cluster of `scenario`, every host booted, the lender's PF driver having enabled
    /// `vfs` VFs, and every function (VFs included) registered with SmartIO.
    fn new(scenario: &str, vfs: u16) -> Setup {
        let engine = EngineKind::for_test_target(env!("CARGO_CRATE_NAME"));
        let cluster =
            Cluster::on(engine, scenario, &Calibration::default_embedded()).expect("loads");
        let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
        let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
        let s = Setup {
            cluster,
            hosts,
            smartio,
        };
        let lender = s.host("lender");
        s.run(async move {
            let pf = lender.device("dma0").expect("the PF");
            pf.enable_sriov(vfs).await.expect("VFs enabled");
        });
        s.smartio.register_all().expect("registers");
        s
    }

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

    fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        self.cluster
            .machine
            .run_task(task)
            .expect("the task finished")
    }

    fn borrow(&self, borrower: &str, spec: &str) -> Result<String, SmartIoError> {
        let (smartio, host, fdid) = (
            self.smartio.clone(),
            self.host(borrower).id(),
            self.fdid(spec),
        );
        self.run(async move {
            smartio
                .borrow(host, fdid, &BorrowOptions::default())
                .await
                .map(|l| l.device)
        })
    }

    /// Requester-id entries in use on the lender's adapter.
    fn lender_requester_ids(&self) -> usize {
        let f = self.cluster.machine.fabric();
        let lender = f.host_by_name("lender").expect("lender");
        let adapter = f.host_adapter(lender, 0).expect("ntb0");
        f.adapter(adapter).requester_ids_used()
    }
}

/// Copies `data` into the memory of the device `name` of `os` and back out through its DMA
/// API and the DMA test driver; returns what came back.
async fn round_trip(os: HostOs, name: String, data: Vec<u8>) -> Vec<u8> {
    let handle = os.device(&name).expect("the shadow device");
    let regs = handle.map_bar(0).expect("BAR0").window().base;
    let completion = handle.dma_alloc_coherent(4096).expect("coherent");
    let len = data.len() as u64;
    let (src, dst) = (os.alloc(len).expect("ram"), os.alloc(len).expect("ram"));
    os.write_memory(src, &data).expect("fill");
    let src_bus = handle
        .dma_map(src, len, DmaDirection::ToDevice)
        .expect("map src");
    let dst_bus = handle
        .dma_map(dst, len, DmaDirection::FromDevice)
        .expect("map dst");
    let driver = DmaTestDriver::probe(handle.cpu().clone(), regs, completion.cpu, completion.bus)
        .await
        .expect("probe");
    driver
        .copy(Location::Bus(src_bus), Location::DeviceMemory(0), len)
        .await
        .expect("copy in");
    driver
        .copy(Location::DeviceMemory(0), Location::Bus(dst_bus), len)
        .await
        .expect("copy out");
    let mut back = vec![0u8; data.len()];
    os.read_memory(dst, &mut back).expect("read back");
    handle.dma_unmap(src_bus).expect("unmap");
    handle.dma_unmap(dst_bus).expect("unmap");
    handle.dma_free_coherent(completion).expect("free");
    back
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

#[test]
fn vfs_register_with_their_own_fdids_beside_their_pf() {
    let s = Setup::new(SCENARIO, 3);
    let listed: Vec<(String, String)> = s
        .smartio
        .devices()
        .into_iter()
        .map(|d| (d.qualified(), d.kind))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("lender:dma0".to_string(), "dma".to_string()),
            ("lender:dma0.vf1".to_string(), "dma".to_string()),
            ("lender:dma0.vf2".to_string(), "dma".to_string()),
            ("lender:dma0.vf3".to_string(), "dma".to_string()),
        ]
    );
    let fdids: Vec<Fdid> = ["lender:dma0", "lender:dma0.vf1", "lender:dma0.vf3"]
        .iter()
        .map(|d| s.fdid(d))
        .collect();
    assert!(fdids[0] != fdids[1] && fdids[1] != fdids[2], "{fdids:?}");
}

#[test]
fn two_vfs_of_one_pf_are_lent_to_two_borrowers_at_once_and_each_moves_its_own_bytes() {
    let s = Setup::new(SCENARIO, 2);
    let before = tables(&s.cluster.machine);
    let ids = s.lender_requester_ids();
    let a = s
        .borrow("borrower-a", "lender:dma0.vf1")
        .expect("VF 1 to borrower-a");
    assert_eq!(
        s.lender_requester_ids(),
        ids + 1,
        "VF 1 takes one requester-id entry"
    );
    let b = s
        .borrow("borrower-b", "lender:dma0.vf2")
        .expect("VF 2 to borrower-b");
    assert_eq!(s.lender_requester_ids(), ids + 2, "and VF 2 one of its own");
    let lent: Vec<(String, Vec<String>)> = s
        .smartio
        .devices()
        .into_iter()
        .map(|d| (d.device, d.borrowers.into_iter().map(|b| b.host).collect()))
        .collect();
    assert_eq!(
        lent,
        vec![
            ("dma0".to_string(), vec![]),
            ("dma0.vf1".to_string(), vec!["borrower-a".to_string()]),
            ("dma0.vf2".to_string(), vec!["borrower-b".to_string()]),
        ]
    );
    // Both transfers run at the same time, each through its own VF.
    let (da, db) = (pattern(96 << 10, 0x11), pattern(96 << 10, 0x77));
    let results = Rc::new(RefCell::new(Vec::new()));
    for (host, name, data) in [("borrower-a", a, da.clone()), ("borrower-b", b, db.clone())] {
        let (os, out) = (s.host(host), results.clone());
        s.cluster.machine.spawn(async move {
            let back = round_trip(os, name, data).await;
            out.borrow_mut().push((host, back));
        });
    }
    s.cluster.machine.run();
    let mut results = results.borrow_mut().clone();
    results.sort();
    assert_eq!(results, vec![("borrower-a", da), ("borrower-b", db)]);
    assert!(
        s.cluster.machine.faults().is_empty(),
        "{:?}",
        s.cluster.machine.faults()
    );
    // Returned, every table is as before.
    for (host, spec) in [
        ("borrower-a", "lender:dma0.vf1"),
        ("borrower-b", "lender:dma0.vf2"),
    ] {
        let (smartio, id, fdid) = (s.smartio.clone(), s.host(host).id(), s.fdid(spec));
        s.run(async move { smartio.give_back(id, fdid).await })
            .expect("give back");
    }
    assert_eq!(tables(&s.cluster.machine), before);
}

#[test]
fn lending_more_vfs_than_the_requester_id_table_holds_is_an_error_naming_the_table() {
    // 32 entries, two reserved for the lender's CPU: 30 VFs fit.
    let path = with_vfs(32);
    let s = Setup::new(path.to_str().expect("utf-8"), 32);
    let _ = std::fs::remove_file(&path);
    for n in 1..=30 {
        let borrower = if n % 2 == 0 {
            "borrower-a"
        } else {
            "borrower-b"
        };
        s.borrow(borrower, &format!("lender:dma0.vf{n}"))
            .unwrap_or_else(|e| panic!("VF {n}: {e}"));
    }
    assert_eq!(s.lender_requester_ids(), 32);
    let err = s
        .borrow("borrower-a", "lender:dma0.vf31")
        .expect_err("the table is full");
    assert!(
        err.to_string()
            .contains("NTB adapter lender.ntb0: requester-id table full (32 entries)"),
        "{err}"
    );
    // Nothing of the refused borrow stays: VF 31 is still available.
    let vf31 = s
        .smartio
        .devices()
        .into_iter()
        .find(|d| d.device == "dma0.vf31")
        .expect("registered");
    assert!(vf31.borrowers.is_empty());
}

#[test]
fn a_lent_vf_whose_pf_disabled_sr_iov_answers_its_borrower_function_gone() {
    let s = Setup::new(SCENARIO, 2);
    let before = tables(&s.cluster.machine);
    let shadow = s.borrow("borrower-a", "lender:dma0.vf1").expect("lent");
    let (lender, borrower) = (s.host("lender"), s.host("borrower-a"));
    let name = shadow.clone();
    s.run(async move {
        let handle = borrower.device(&name).expect("the shadow device");
        handle.config_read(pci::VENDOR_ID, 2).await.expect("alive");
        lender
            .device("dma0")
            .expect("the PF")
            .disable_sriov()
            .await
            .expect("the lender's PF driver disables SR-IOV");
        let gone = || name.clone();
        assert_eq!(
            handle.config_read(pci::VENDOR_ID, 2).await,
            Err(AccessError::FunctionGone { device: gone() })
        );
        assert_eq!(
            handle.map_bar(0).map(|_| ()),
            Err(HostError::FunctionGone { device: gone() })
        );
        assert_eq!(
            handle.dma_alloc_coherent(4096).map(|_| ()),
            Err(DmaError::FunctionGone { device: gone() })
        );
    });
    // Nobody borrows the gone VF again, by Device Lending or the device API.
    let gone = SmartIoError::FunctionGone {
        device: "lender:dma0.vf2".into(),
    };
    assert_eq!(s.borrow("borrower-b", "lender:dma0.vf2"), Err(gone.clone()));
    let api = s
        .smartio
        .borrow_device(s.host("borrower-b").id(), s.fdid("lender:dma0.vf2"), false)
        .map(|_| ());
    assert_eq!(api, Err(gone));
    // Giving it back still releases everything the borrow took.
    let (smartio, id, fdid) = (
        s.smartio.clone(),
        s.host("borrower-a").id(),
        s.fdid("lender:dma0.vf1"),
    );
    s.run(async move { smartio.give_back(id, fdid).await })
        .expect("give back");
    assert_eq!(tables(&s.cluster.machine), before);
}

#[test]
fn a_vf_is_borrowed_through_the_device_api_while_another_vf_is_lent_by_device_lending() {
    let s = Setup::new(SCENARIO, 2);
    s.borrow("borrower-a", "lender:dma0.vf1")
        .expect("VF 1 lent");
    let (smartio, b) = (s.smartio.clone(), s.host("borrower-b"));
    let vf2 = s.fdid("lender:dma0.vf2");
    let id = s.run(async move {
        let hold = smartio
            .borrow_device(b.id(), vf2, true)
            .expect("exclusive hold");
        let regs = smartio.bar_segment(&hold, 0).expect("VF BAR0");
        assert_eq!(regs.size, smartio_devices::dma::REGISTER_BAR_SIZE);
        let map = smartio
            .map_for_cpu(b.id(), &regs)
            .expect("mapped for the CPU");
        let mut id = [0u8; 8];
        smartio_platform::Port::read(
            &b.cpu(),
            map.addr.offset(smartio_devices::dma::reg::ID),
            &mut id,
        )
        .await
        .expect("a load through the NTB");
        smartio.unmap_cpu(map).expect("unmap");
        smartio.return_device(hold).expect("return");
        u64::from_le_bytes(id)
    });
    assert_eq!(id, smartio_devices::dma::DEVICE_MAGIC);
    // A second exclusive borrow of the lent VF 1 is refused like any device's.
    let err = s
        .smartio
        .borrow_device(s.host("borrower-b").id(), s.fdid("lender:dma0.vf1"), true)
        .expect_err("VF 1 is lent");
    assert!(matches!(err, SmartIoError::Borrowed { .. }), "{err}");
}

/// Look-up-table and requester-id entries in use per adapter, and IOMMU pages per domain.
type Tables = (Vec<(usize, usize)>, Vec<Vec<usize>>);

/// The adapter entries `spec`'s borrow by borrower-a takes: (LUT, requester ids) per adapter.
fn taken_by_borrow(spec: &str) -> Vec<(usize, usize)> {
    let s = Setup::new(SCENARIO, 2);
    let before: Tables = tables(&s.cluster.machine);
    s.borrow("borrower-a", spec).expect("lent");
    let after: Tables = tables(&s.cluster.machine);
    after
        .0
        .iter()
        .zip(&before.0)
        .map(|(a, b)| (a.0 - b.0, a.1 - b.1))
        .collect()
}

#[test]
fn a_lent_vf_takes_the_adapter_entries_a_lent_pf_takes() {
    let pf = taken_by_borrow("lender:dma0");
    let vf = taken_by_borrow("lender:dma0.vf2");
    assert_eq!(vf, pf);
    // One requester-id entry, on the lender's adapter only (adapters in node order:
    // borrower-a, borrower-b, lender).
    let ids: Vec<usize> = vf.iter().map(|t| t.1).collect();
    assert_eq!(ids, vec![0, 0, 1]);
}
