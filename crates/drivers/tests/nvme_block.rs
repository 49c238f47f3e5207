//! The distributed NVMe driver's kernel-space block client (seed 003): a disk of the
//! borrower's block layer whose requests reach the lender's NVMe through the client's queue
//! pairs, their bytes copied through the bounce buffer.
//!
//! ```text
//!   borrower: program ── block layer ── BlockClient ══ NTB ══ mxs824 ══ NTB ── lender: nvme0
//! ```

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind, SHIPPED};
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{
    BlockClient, BlockClientConfig, BlockClientError, Client, DistError, Manager, PublicationError,
    SqPlacement, DRIVER_NAME, MANAGER_SEGMENT,
};
use smartio_host::{BlockError, BlockRequest, ReqOp};
use smartio_platform::{PhysAddr, PAGE_SIZE};
use smartio_smartio::{Fdid, SegmentLocation};
use std::cell::RefCell;
use std::rc::Rc;

#[allow(dead_code)] // this suite uses only the rig
use crate::common;
use common::rig::Rig;

const BORROWER: usize = 0;
const LENDER: usize = 1;

/// The booted cluster (`Rig`: hosts, SmartIO, running a task to the end) and the NVMe.
struct Setup {
    rig: Rig,
    nvme: Fdid,
}

impl std::ops::Deref for Setup {
    type Target = Rig;
    fn deref(&self) -> &Rig {
        &self.rig
    }
}

fn setup() -> Setup {
    setup_from("nvme-cluster")
}

/// nvme-cluster with the NVMe's `params` replaced, from a scenario file of its own.
fn setup_with(params: &str) -> Setup {
    let line = "params = { profile = \"optane-p4800x\" }";
    let shipped = SHIPPED
        .iter()
        .find(|s| s.name == "nvme-cluster")
        .expect("shipped");
    assert_eq!(
        shipped.text.matches(line).count(),
        1,
        "nvme-cluster changed"
    );
    let path = std::env::temp_dir().join(format!(
        "smartio-nvme-block-{}-{}.toml",
        std::process::id(),
        env!("CARGO_CRATE_NAME")
    ));
    let text = shipped
        .text
        .replacen(line, &format!("params = {{ {params} }}"), 1);
    std::fs::write(&path, text).expect("temp file");
    let s = setup_from(path.to_str().expect("utf-8"));
    let _ = std::fs::remove_file(&path);
    s
}

fn setup_from(scenario: &str) -> Setup {
    let cluster = Cluster::on(
        EngineKind::for_test_target(env!("CARGO_CRATE_NAME")),
        scenario,
        &Calibration::default_embedded(),
    )
    .expect("loads");
    let rig = Rig::new(cluster);
    let nvme = rig.smartio.find("lender:nvme0").expect("registered");
    Setup { rig, nvme }
}

impl Setup {
    fn manager(&self) -> Rc<Manager> {
        let (s, os, nvme) = (self.smartio.clone(), self.hosts[LENDER].clone(), self.nvme);
        self.run(async move { Manager::start(&s, &os, nvme).await })
            .expect("manager starts")
    }

    /// Starts a block client on `host` with `config`.
    fn start(
        &self,
        host: usize,
        manager: &Rc<Manager>,
        config: BlockClientConfig,
    ) -> Result<BlockClient, BlockClientError> {
        let (s, os, nvme, m) = (
            self.smartio.clone(),
            self.hosts[host].clone(),
            self.nvme,
            manager.clone(),
        );
        self.run(async move { BlockClient::start(&s, &os, nvme, &m, &config).await })
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29) ^ seed ^ (i >> 10) as u8)
        .collect()
}

#[test]
fn the_block_client_bootstraps_from_the_managers_segment_and_registers_a_disk_of_its_namespace() {
    let s = setup();
    let manager = s.manager();
    let client = s
        .start(BORROWER, &manager, BlockClientConfig::new("snvme0", 2, 8))
        .expect("starts");
    let p = client.publication();
    assert_eq!(p.host, manager.host());
    assert_eq!(p.granted, 31);
    assert_eq!(p.max_transfer, manager.max_transfer());
    assert_eq!(p.model, manager.model());
    assert_eq!(p.namespaces, manager.namespaces());
    let disk = s.hosts[BORROWER].disk("snvme0").expect("registered");
    assert_eq!(disk.driver(), DRIVER_NAME);
    let g = disk.geometry();
    let ns = manager.namespaces()[0];
    assert_eq!((g.lba_size, g.blocks), (ns.lba_size, ns.blocks));
    assert_eq!((g.hw_queues, g.queue_depth), (2, 8));
    // One slot per request the queues take, each the controller's largest transfer.
    assert_eq!(client.slots(), (16, manager.max_transfer()));
    assert_eq!(g.max_transfer, manager.max_transfer());
    assert_eq!(client.queue_ids().len(), 2);
    // The SQs next to the controller (seed 003 Fig. 8): in the lender's memory.
    for at in client.sq_locations() {
        assert!(
            matches!(at, SegmentLocation::Ram { host, .. } if host == manager.host()),
            "{at:?}"
        );
    }
}

#[test]
fn writes_and_reads_through_the_disk_move_the_programs_bytes_through_the_bounce_buffer() {
    let s = setup();
    let manager = s.manager();
    let client = Rc::new(
        s.start(BORROWER, &manager, BlockClientConfig::new("snvme0", 1, 4))
            .expect("starts"),
    );
    let os = s.hosts[BORROWER].clone();
    // 4 KiB (PRP1 only), 8 KiB (PRP2) and 64 KiB (the slot's PRP list).
    let sizes = [4096usize, 8192, 65536];
    let buffer = os.alloc(65536).expect("ram");
    let disk = client.disk().clone();
    let back = s.run({
        let os = os.clone();
        async move {
            let mut back = Vec::new();
            for (i, len) in sizes.into_iter().enumerate() {
                let lba = 1000 * i as u64;
                let blocks = (len / 512) as u32;
                os.write_memory(buffer, &pattern(i as u8 + 1, len))
                    .expect("poke");
                disk.submit(0, BlockRequest::new(ReqOp::Write, lba, blocks, buffer))
                    .await?;
                os.write_memory(buffer, &vec![0; len]).expect("clear");
                disk.submit(0, BlockRequest::new(ReqOp::Read, lba, blocks, buffer))
                    .await?;
                let mut got = vec![0; len];
                os.read_memory(buffer, &mut got).expect("peek");
                back.push(got);
            }
            Ok::<_, BlockError>(back)
        }
    });
    let back = back.expect("every request completes");
    for (i, len) in sizes.into_iter().enumerate() {
        assert_eq!(back[i], pattern(i as u8 + 1, len), "{len} bytes");
    }
    let stats = client.stats();
    assert_eq!(stats.requests, 6);
    // Every byte crossed the bounce buffer once per request.
    assert_eq!(stats.bytes_copied, 2 * (4096 + 8192 + 65536));
    assert_eq!(stats.slot_waits, 0, "one request at a time never waits");
    assert!(stats.polls > 0);

    // The namespace holds what the disk wrote: a plain client reads it on its own.
    let (svc, nvme, m) = (s.smartio.clone(), s.nvme, manager.clone());
    let lender = s.hosts[LENDER].clone();
    let on_media = s.run(async move {
        let c = Client::connect(&svc, &lender, nvme, &m, 65536)
            .await
            .expect("connects");
        let q = c.create_queue(4, SqPlacement::Hints).await.expect("queue");
        c.io(&q, BlockOp::Read, 1, 2000, 128, 0)
            .await
            .expect("reads");
        let mut got = vec![0; 65536];
        lender.read_memory(c.data().0, &mut got).expect("peek");
        drop(q);
        c.leave().await.expect("leaves");
        got
    });
    assert_eq!(on_media, pattern(3, 65536));
}

#[test]
fn requests_beyond_the_slots_wait_for_one_and_every_request_keeps_its_own_bytes() {
    let s = setup();
    let manager = s.manager();
    let config = BlockClientConfig {
        slots: Some(2),
        ..BlockClientConfig::new("snvme0", 1, 8)
    };
    let client = Rc::new(s.start(BORROWER, &manager, config).expect("starts"));
    assert_eq!(client.slots().0, 2);
    let os = s.hosts[BORROWER].clone();
    let disk = client.disk().clone();
    // Eight programs at once, three rounds each of write-then-read on their own blocks:
    // 48 requests through 2 slots.
    // Per program: whether every read gave back what it wrote.
    type Outcome = (usize, Result<bool, BlockError>);
    let results: Rc<RefCell<Vec<Outcome>>> = Rc::default();
    for p in 0..8usize {
        let (os, disk, out) = (os.clone(), disk.clone(), results.clone());
        s.cluster.machine.spawn(async move {
            let buffer = os.alloc(4096).expect("ram");
            let mut same = true;
            let r = async {
                for round in 0..3u8 {
                    let lba = 64 * p as u64 + 8 * u64::from(round);
                    let data = pattern(16 * p as u8 + round, 4096);
                    os.write_memory(buffer, &data).expect("poke");
                    disk.submit(0, BlockRequest::new(ReqOp::Write, lba, 8, buffer))
                        .await?;
                    os.write_memory(buffer, &[0; 4096]).expect("clear");
                    disk.submit(0, BlockRequest::new(ReqOp::Read, lba, 8, buffer))
                        .await?;
                    let mut got = vec![0; 4096];
                    os.read_memory(buffer, &mut got).expect("peek");
                    same &= got == data;
                }
                Ok(same)
            }
            .await;
            out.borrow_mut().push((p, r));
        });
    }
    s.cluster.machine.run();
    let results = results.borrow();
    assert_eq!(results.len(), 8, "every program finished");
    for (p, r) in results.iter() {
        assert_eq!(r, &Ok(true), "program {p} read back its own bytes");
    }
    let stats = client.stats();
    assert_eq!(stats.requests, 48);
    assert!(
        stats.slot_waits >= 6,
        "eight programs on two slots must wait: {stats:?}"
    );
    assert_eq!(client.free_slots(), 2, "every slot came back");
}

#[test]
fn requests_the_disk_cannot_take_are_refused_by_the_block_layer_and_never_reach_the_controller() {
    let s = setup();
    let manager = s.manager();
    let config = BlockClientConfig {
        slot_bytes: Some(8192),
        ..BlockClientConfig::new("snvme0", 1, 2)
    };
    let client = s.start(BORROWER, &manager, config).expect("starts");
    let (disk, buffer) = (
        client.disk().clone(),
        s.hosts[BORROWER].alloc(16384).expect("ram"),
    );
    let blocks = disk.geometry().blocks;
    let errors = s.run(async move {
        let mut errors = Vec::new();
        for (lba, n) in [(0, 32), (blocks - 1, 2), (0, 0)] {
            errors.push(
                disk.submit(0, BlockRequest::new(ReqOp::Read, lba, n, buffer))
                    .await,
            );
        }
        errors
    });
    assert_eq!(
        errors[0],
        Err(BlockError::TooLarge {
            disk: "snvme0".into(),
            bytes: 16384,
            max: 8192
        })
    );
    assert!(matches!(errors[1], Err(BlockError::OutOfRange { .. })));
    assert!(matches!(errors[2], Err(BlockError::Empty { .. })));
    assert_eq!(client.stats().requests, 0);
}

#[test]
fn settings_outside_their_ranges_are_refused_by_name_and_leave_nothing_behind() {
    let s = setup();
    let manager = s.manager();
    let base = BlockClientConfig::new("snvme0", 1, 4);
    let refused = |config: BlockClientConfig| {
        s.start(BORROWER, &manager, config)
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        refused(BlockClientConfig {
            slots: Some(5),
            ..base.clone()
        }),
        "slots = 5: 1 to 4 (hw_queues × queue_depth: one per request at most)"
    );
    assert_eq!(
        refused(BlockClientConfig {
            slots: Some(0),
            ..base.clone()
        }),
        "slots = 0: 1 to 4 (hw_queues × queue_depth: one per request at most)"
    );
    assert!(refused(BlockClientConfig {
        slot_bytes: Some(6000),
        ..base.clone()
    })
    .starts_with("slot_bytes = 6000: a multiple of 4096 up to 131072"));
    assert!(refused(BlockClientConfig {
        slot_bytes: Some(256 << 10),
        ..base.clone()
    })
    .starts_with("slot_bytes = 262144"));
    assert!(
        refused(BlockClientConfig::new("snvme0", 1, 0)).starts_with("queue_depth = 0: 1 to 4095")
    );
    assert!(refused(BlockClientConfig::new("snvme0", 32, 1))
        .starts_with("hw_queues = 32: 1 to 31 (one I/O queue pair each"));
    assert_eq!(
        refused(BlockClientConfig {
            nsid: 9,
            ..base.clone()
        }),
        "the controller has no namespace 9 (active: 1)"
    );
    // Nothing of the refused clients stayed: the manager still has every queue pair.
    assert!(manager.owners().is_empty());
    assert!(s.hosts[BORROWER].disk_names().is_empty());
    let all = s
        .start(BORROWER, &manager, BlockClientConfig::new("snvme0", 31, 1))
        .expect("every queue pair is free");
    assert_eq!(all.queue_ids().len(), 31);
    assert_eq!(manager.owners().len(), 31);
}

#[test]
fn a_second_disk_of_the_same_name_is_refused_and_gives_its_queue_pairs_back() {
    let s = setup();
    let manager = s.manager();
    let _first = s
        .start(BORROWER, &manager, BlockClientConfig::new("snvme0", 2, 4))
        .expect("starts");
    let e = s
        .start(BORROWER, &manager, BlockClientConfig::new("snvme0", 3, 4))
        .expect_err("the name is taken");
    assert_eq!(
        e,
        BlockClientError::Disk(BlockError::DuplicateDisk {
            host: s.hosts[BORROWER].name().into(),
            disk: "snvme0".into()
        })
    );
    assert_eq!(
        manager.owners().len(),
        2,
        "the refused client's three pairs went back"
    );
}

#[test]
fn stopping_the_client_unregisters_its_disk_and_gives_its_queue_pairs_back() {
    let s = setup();
    let manager = s.manager();
    let client = s
        .start(LENDER, &manager, BlockClientConfig::new("snvme0", 3, 2))
        .expect("starts");
    assert_eq!(manager.owners().len(), 3);
    assert_eq!(s.hosts[LENDER].disk_names(), vec!["snvme0".to_string()]);
    let idle = s.cluster.machine.blocked_summary();
    assert!(
        idle.contains("nvme_dist/block.rs"),
        "idle pollers wait for work: {idle}"
    );
    s.run(async move { client.stop().await }).expect("stops");
    assert!(manager.owners().is_empty());
    assert!(s.hosts[LENDER].disk_names().is_empty());
    let waiting = s.cluster.machine.blocked_summary();
    assert!(
        !waiting.contains("nvme_dist/block.rs"),
        "the pollers ended: {waiting}"
    );
}

#[test]
fn a_manager_segment_that_does_not_read_as_its_metadata_stops_the_client_from_starting() {
    let s = setup();
    let manager = s.manager();
    let seg = s
        .smartio
        .published(s.nvme, MANAGER_SEGMENT)
        .expect("published");
    let SegmentLocation::Ram { host, phys } = seg.location else {
        panic!("the publication is in RAM: {:?}", seg.location);
    };
    let count = PhysAddr(phys.get() + 40);
    let start = || {
        s.start(BORROWER, &manager, BlockClientConfig::new("snvme0", 1, 1))
            .expect_err("unreadable")
    };
    // More namespaces than an Identify list holds.
    s.cluster
        .machine
        .poke_memory(host, count, &2000u64.to_le_bytes());
    let e = start();
    assert!(
        matches!(
            &e,
            BlockClientError::Dist(DistError::Publication {
                source: PublicationError::Field {
                    field: "namespaces",
                    value: 2000,
                    ..
                },
                ..
            })
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("namespaces = 2000"), "{e}");
    // A count its one-page segment cannot hold: the client does not read past the segment.
    s.cluster
        .machine
        .poke_memory(host, count, &999u64.to_le_bytes());
    assert_eq!(seg.size, PAGE_SIZE);
    assert_eq!(
        start().to_string(),
        format!(
            "the NVMe manager's segment for fdid {} is unreadable: 4096 bytes, the layout needs {}",
            s.nvme,
            96 + 16 * 999
        )
    );
    assert!(manager.owners().is_empty());
}

#[test]
fn a_controller_with_more_namespaces_than_a_page_holds_is_published_whole() {
    let s = setup_with("profile = \"ramdisk\", namespaces = 300, capacity = \"64M\"");
    let manager = s.manager();
    assert_eq!(manager.namespaces().len(), 300);
    let config = BlockClientConfig {
        nsid: 300,
        ..BlockClientConfig::new("snvme299", 1, 2)
    };
    let client = s.start(BORROWER, &manager, config).expect("starts");
    assert_eq!(client.publication().namespaces.len(), 300);
    assert_eq!(client.publication().namespaces, manager.namespaces());
    assert_eq!(
        client.disk().geometry().blocks,
        manager.namespaces()[299].blocks
    );
}
