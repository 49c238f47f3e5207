//! The distributed NVMe driver: one controller, a manager on one host, clients on others,
//! each driving its own queue pairs.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, EngineKind, SHIPPED};
use smartio_devices::nvme::spec::cns;
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{BadRequest, Client, DistError, Manager, SqPlacement};
use smartio_host::HostOs;
use smartio_platform::{PhysAddr, PAGE_SIZE};
use smartio_smartio::{Fdid, SegmentLocation, SmartIo};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

struct Setup {
    cluster: Cluster,
    hosts: Vec<HostOs>,
    smartio: SmartIo,
    nvme: Fdid,
}

fn setup() -> Setup {
    setup_with("optane-p4800x", "")
}

/// cluster-switch with the lender's NVMe on media `profile` and `extra` params (such as
/// `lba_size = 4096`), written to a scenario file of its own.
fn setup_with(profile: &str, extra: &str) -> Setup {
    static LOADS: AtomicU32 = AtomicU32::new(0);
    let line = "params = { profile = \"optane-p4800x\" }";
    let shipped = SHIPPED
        .iter()
        .find(|s| s.name == "cluster-switch")
        .expect("shipped");
    assert!(
        shipped.text.contains(line),
        "cluster-switch changed its nvme0 line"
    );
    let params = format!("params = {{ profile = \"{profile}\"{extra} }}");
    let path = std::env::temp_dir().join(format!(
        "smartio-nvme-dist-{}-{}.toml",
        std::process::id(),
        LOADS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, shipped.text.replacen(line, &params, 1)).expect("temp file");
    let cluster = Cluster::on(
        EngineKind::for_test_target(env!("CARGO_CRATE_NAME")),
        path.to_str().expect("utf-8"),
        &Calibration::default_embedded(),
    )
    .expect("loads");
    let _ = std::fs::remove_file(&path);
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    let nvme = smartio.find("lender:nvme0").expect("registered");
    Setup {
        cluster,
        hosts,
        smartio,
        nvme,
    }
}

impl Setup {
    fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        self.cluster
            .machine
            .run_task(task)
            .expect("the task finished")
    }

    fn manager(&self, host: usize) -> Rc<Manager> {
        let (s, os, nvme) = (self.smartio.clone(), self.hosts[host].clone(), self.nvme);
        self.run(async move { Manager::start(&s, &os, nvme).await })
            .expect("manager starts")
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ (i >> 9) as u8)
        .collect()
}

#[test]
fn clients_on_two_hosts_write_disjoint_ranges_and_read_each_others_data() {
    let s = setup();
    let manager = s.manager(0);
    assert_eq!(manager.granted(), 31, "the P4800X profile has 31 I/O pairs");
    // borrower writes LBAs 0..128, lender2 writes 1024..1152, at the same time.
    let results = Rc::new(RefCell::new(Vec::new()));
    let len = 64 * 1024usize;
    for (host, seed, mine, theirs) in [(0usize, 0x21u8, 0u64, 1024u64), (2, 0x85, 1024, 0)] {
        let (svc, os, nvme, m, out) = (
            s.smartio.clone(),
            s.hosts[host].clone(),
            s.nvme,
            manager.clone(),
            results.clone(),
        );
        s.cluster.machine.spawn(async move {
            let client = Client::connect(&svc, &os, nvme, &m, 2 * len as u64)
                .await
                .expect("connects");
            let q = client
                .create_queue(16, SqPlacement::Hints)
                .await
                .expect("queue");
            let (data, _) = client.data();
            os.machine().poke_memory(os.id(), data, &pattern(seed, len));
            client
                .io(&q, BlockOp::Write, 1, mine, 128, 0)
                .await
                .expect("write");
            // Wait until the other client has surely written, then read its range.
            smartio_platform::Clock::sleep(&os.cpu(), smartio_platform::SimDuration::from_us(500))
                .await;
            client
                .io(&q, BlockOp::Read, 1, theirs, 128, len as u64)
                .await
                .expect("read");
            let mut got = vec![0u8; len];
            os.machine().peek_memory(
                os.id(),
                smartio_platform::PhysAddr(data.get() + len as u64),
                &mut got,
            );
            out.borrow_mut().push((os.name().to_string(), got));
            client.leave().await.expect("leaves");
        });
    }
    s.cluster.machine.run();
    let mut got = results.borrow().clone();
    got.sort();
    assert_eq!(got.len(), 2, "both clients finished");
    assert_eq!(got[0].0, "borrower");
    assert_eq!(
        got[0].1,
        pattern(0x85, len),
        "borrower reads lender2's data"
    );
    assert_eq!(got[1].0, "lender2");
    assert_eq!(
        got[1].1,
        pattern(0x21, len),
        "lender2 reads borrower's data"
    );
    assert!(manager.owners().is_empty(), "leaving freed every queue");
}

#[test]
fn the_32nd_queue_pair_is_refused_and_leaving_or_vanishing_frees_queues() {
    let s = setup();
    let manager = s.manager(1);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let (err, hold) = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 20)
            .await
            .expect("connects");
        for _ in 0..31 {
            client
                .create_queue(4, SqPlacement::ClientRam)
                .await
                .expect("granted");
        }
        let in_use = os.ram_in_use();
        let err = client
            .create_queue(4, SqPlacement::ClientRam)
            .await
            .expect_err("the 32nd is refused");
        assert_eq!(
            os.ram_in_use(),
            in_use,
            "a refused queue leaves no memory taken"
        );
        // The program dies: SmartIO drops its hold, its queues stay behind.
        let hold = client.hold();
        svc.return_device(hold).expect("drop the hold");
        (err, hold)
    });
    match &err {
        DistError::NoQueues { granted, owners } => {
            assert_eq!(*granted, 31);
            assert_eq!(owners, "borrower 31");
        }
        other => panic!("expected NoQueues, got {other:?}"),
    }
    assert!(err.to_string().contains("all 31"), "{err}");
    assert_eq!(manager.owners().len(), 31);
    assert!(!s.smartio.is_held(&hold));
    let m = manager.clone();
    let freed = s.run(async move { m.sweep().await }).expect("sweeps");
    assert_eq!(freed, (1..=31).collect::<Vec<u16>>());
    assert!(manager.owners().is_empty());

    // Afterwards a new client on another host gets queue 1 again and can do I/O.
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[2].clone(),
        s.nvme,
        manager.clone(),
    );
    let qid = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 20)
            .await
            .expect("connects");
        let q = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("queue");
        client
            .io(&q, BlockOp::Write, 1, 0, 8, 0)
            .await
            .expect("write");
        let qid = q.qid();
        client.leave().await.expect("leaves");
        qid
    });
    assert_eq!(qid, 1);
}

#[test]
fn a_client_cannot_delete_another_clients_queue_pair_and_the_owner_keeps_using_it() {
    let s = setup();
    let manager = s.manager(1);
    let (svc, nvme, m) = (s.smartio.clone(), s.nvme, manager.clone());
    let (owner_os, other_os) = (s.hosts[0].clone(), s.hosts[2].clone());
    let len = 8 * 512usize;
    let (refused, unknown, got, owners_after) = s.run(async move {
        let owner = Client::connect(&svc, &owner_os, nvme, &m, 2 * len as u64)
            .await
            .expect("owner connects");
        let other = Client::connect(&svc, &other_os, nvme, &m, len as u64)
            .await
            .expect("other connects");
        let q = owner
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("owner's queue");
        let mine = other
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("other's queue");
        // The other client asks the manager to delete the owner's pair, then a pair no one
        // has.
        let refused = m.delete_pair(&other.hold(), &other_os.cpu(), q.qid()).await;
        let unknown = m.delete_pair(&other.hold(), &other_os.cpu(), 30).await;
        // The owner's pair still works: write a pattern, read it back.
        let (data, _) = owner.data();
        owner_os
            .machine()
            .poke_memory(owner_os.id(), data, &pattern(0x5a, len));
        owner
            .io(&q, BlockOp::Write, 1, 4096, 8, 0)
            .await
            .expect("write on the pair after the refused delete");
        owner
            .io(&q, BlockOp::Read, 1, 4096, 8, len as u64)
            .await
            .expect("read on the pair after the refused delete");
        let mut got = vec![0u8; len];
        owner_os.machine().peek_memory(
            owner_os.id(),
            smartio_platform::PhysAddr(data.get() + len as u64),
            &mut got,
        );
        let owners_after = m.owners();
        assert_ne!(q.qid(), mine.qid());
        other.leave().await.expect("other leaves");
        owner.leave().await.expect("owner leaves");
        (refused, unknown, got, owners_after)
    });
    assert_eq!(refused, Err(DistError::NotOwner { qid: 1 }));
    assert_eq!(
        refused.expect_err("refused").to_string(),
        "queue pair 1 does not belong to this client"
    );
    assert_eq!(unknown, Err(DistError::NotOwner { qid: 30 }));
    assert_eq!(got, pattern(0x5a, len), "the owner's data came back");
    assert_eq!(
        owners_after,
        [(1, s.hosts[0].id()), (2, s.hosts[2].id())],
        "both pairs still owned by their clients"
    );
    assert!(manager.owners().is_empty(), "leaving freed both");
}

#[test]
fn each_sq_placement_puts_the_queue_where_it_says_and_the_cq_in_the_clients_ram() {
    let s = setup();
    let manager = s.manager(0);
    let (svc, nvme, m) = (s.smartio.clone(), s.nvme, manager.clone());
    let (client_os, lender_os) = (s.hosts[0].clone(), s.hosts[1].clone());
    let placed = s.run(async move {
        let client = Client::connect(&svc, &client_os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let mut placed = Vec::new();
        for placement in [
            SqPlacement::ClientRam,
            SqPlacement::LenderRam,
            SqPlacement::Hints,
            SqPlacement::DeviceMemory,
        ] {
            let (mine, theirs) = (client_os.ram_in_use(), lender_os.ram_in_use());
            let q = client.create_queue(16, placement).await.expect("queue");
            let host = match q.sq_location() {
                SegmentLocation::Ram { host, .. } => host,
                other => panic!("{placement:?}: the SQ is in {other:?}"),
            };
            placed.push((
                placement,
                host,
                client_os.ram_in_use() - mine,
                lender_os.ram_in_use() - theirs,
            ));
        }
        client.leave().await.expect("leaves");
        placed
    });
    let (borrower, lender) = (s.hosts[0].id(), s.hosts[1].id());
    // Pages of 4 KiB: the SQ (16 entries of 64 bytes), the CQ, and one PRP-list page per
    // entry (16) — the CQ and the PRP lists always in the client's RAM. The P4800X has no
    // memory buffer, so the device-memory placement falls back as the hints do.
    assert_eq!(
        placed,
        [
            (SqPlacement::ClientRam, borrower, 18 * PAGE_SIZE, 0),
            (SqPlacement::LenderRam, lender, 17 * PAGE_SIZE, PAGE_SIZE),
            (SqPlacement::Hints, lender, 17 * PAGE_SIZE, PAGE_SIZE),
            (SqPlacement::DeviceMemory, lender, 17 * PAGE_SIZE, PAGE_SIZE),
        ]
    );
}

#[test]
fn a_queue_of_512_entries_wraps_past_the_first_page_of_both_its_queues() {
    let s = setup();
    let manager = s.manager(1);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let done = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 8192)
            .await
            .expect("connects");
        let ram = os.ram_in_use();
        let q = client
            .create_queue(512, SqPlacement::ClientRam)
            .await
            .expect("queue");
        // In 4 KiB pages: the SQ (512 × 64 bytes), the CQ (512 × 16) and a PRP-list page
        // per entry.
        assert_eq!(os.ram_in_use() - ram, (8 + 2 + 512) * 4096, "RAM taken");
        let (data, _) = client.data();
        // 600 writes and read-backs at QD1: the SQ passes entry 64 (the end of its first
        // page), the CQ entry 256 (the end of its first page), and both wrap past 512.
        for i in 0..600u64 {
            let block = pattern(i as u8, 4096);
            os.machine().poke_memory(os.id(), data, &block);
            client
                .io(&q, BlockOp::Write, 1, 8 * i, 8, 0)
                .await
                .expect("write");
            client
                .io(&q, BlockOp::Read, 1, 8 * i, 8, 4096)
                .await
                .expect("read");
            let mut got = vec![0u8; 4096];
            os.machine()
                .peek_memory(os.id(), PhysAddr(data.get() + 4096), &mut got);
            assert_eq!(got, block, "I/O pair {i}");
        }
        client.leave().await.expect("leaves");
        600
    });
    assert_eq!(done, 600);
}

#[test]
fn a_transfer_must_be_one_to_mdts_bytes_inside_the_data_segment() {
    let s = setup();
    let manager = s.manager(1);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let max = manager.max_transfer();
    assert_eq!(max, 128 << 10, "MDTS 5");
    let outcomes = s.run(async move {
        // A data segment of MDTS plus 4 KiB.
        let client = Client::connect(&svc, &os, nvme, &m, max + 4096)
            .await
            .expect("connects");
        let q = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("queue");
        let blocks = (max / 512) as u32;
        let mut outcomes = Vec::new();
        for (what, n, offset) in [
            ("no blocks", 0, 0),
            ("MDTS", blocks, 0),
            ("MDTS + 1 block", blocks + 1, 0),
            ("to the segment's end", blocks, 4096),
            ("one block past it", blocks, 4096 + 512),
            ("one block at the end", 1, max + 4096 - 512),
        ] {
            let r = client.io(&q, BlockOp::Read, 1, 0, n, offset).await;
            outcomes.push((what, r.map_err(|e| matches!(e, DistError::BadRequest(_)))));
        }
        client.leave().await.expect("leaves");
        outcomes
    });
    assert_eq!(
        outcomes,
        [
            ("no blocks", Err(true)),
            ("MDTS", Ok(())),
            ("MDTS + 1 block", Err(true)),
            ("to the segment's end", Ok(())),
            ("one block past it", Err(true)),
            ("one block at the end", Ok(())),
        ]
    );
}

#[test]
fn a_client_sizes_its_transfers_by_the_namespaces_own_4_kib_blocks() {
    let s = setup_with("optane-p4800x", ", capacity = \"64M\", lba_size = 4096");
    let manager = s.manager(1);
    assert_eq!(manager.namespaces()[0].lba_size, 4096);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let (got, data) = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let q = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("queue");
        let (at, _) = client.data();
        // Block 13, right after the three below, holds a pattern of its own.
        os.machine().poke_memory(os.id(), at, &pattern(0x77, 4096));
        client
            .io(&q, BlockOp::Write, 1, 13, 1, 0)
            .await
            .expect("write of block 13");
        let data = pattern(0x44, 3 * 4096);
        os.machine().poke_memory(os.id(), at, &data);
        // Three 4 KiB blocks: 12 KiB, which needs PRP2 as a list pointer.
        client
            .io(&q, BlockOp::Write, 1, 10, 3, 0)
            .await
            .expect("write of 3 blocks");
        client
            .io(&q, BlockOp::Read, 1, 10, 3, 3 * 4096)
            .await
            .expect("read of 3 blocks");
        let mut got = vec![0u8; 3 * 4096];
        os.machine()
            .peek_memory(os.id(), PhysAddr(at.get() + 3 * 4096), &mut got);
        // Nothing beyond: the read filled exactly 12 KiB, and block 13 kept its pattern.
        let mut after = vec![0u8; 4096];
        os.machine()
            .peek_memory(os.id(), PhysAddr(at.get() + 6 * 4096), &mut after);
        assert!(after.iter().all(|&b| b == 0), "bytes after the read");
        client
            .io(&q, BlockOp::Read, 1, 13, 1, 0)
            .await
            .expect("read of block 13");
        let mut block13 = vec![0u8; 4096];
        os.machine().peek_memory(os.id(), at, &mut block13);
        assert_eq!(block13, pattern(0x77, 4096), "block 13 untouched");
        client.leave().await.expect("leaves");
        (got, data)
    });
    assert_eq!(got, data, "12 KiB back");
}

#[test]
fn the_managers_io_counts_are_the_controllers_smart_counts_of_what_clients_did() {
    let s = setup();
    let manager = s.manager(1);
    assert_eq!(manager.model(), "smartio emulated NVMe (optane-p4800x)");
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let (before, after) = s.run(async move {
        let before = m.io_commands().await.expect("SMART counts");
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let q = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("queue");
        for lba in 0..5 {
            client
                .io(&q, BlockOp::Write, 1, 8 * lba, 8, 0)
                .await
                .expect("write");
        }
        for lba in 0..3 {
            client
                .io(&q, BlockOp::Read, 1, 8 * lba, 8, 0)
                .await
                .expect("read");
        }
        client.leave().await.expect("leaves");
        (before, m.io_commands().await.expect("SMART counts"))
    });
    assert_eq!(before, (0, 0), "no I/O before");
    assert_eq!(after, (3, 5), "(reads, writes)");
}

#[test]
fn a_failed_admin_command_reports_the_controllers_status_code() {
    let s = setup();
    let manager = s.manager(1);
    let m = manager.clone();
    let (bad_cns, bad_ns) = s.run(async move {
        (
            m.identify(0x55, 0).await.map(|_| ()),
            m.identify(cns::NAMESPACE, 99).await.map(|_| ()),
        )
    });
    let failed = |status: u16| {
        Err(DistError::Command {
            what: "Identify".into(),
            status,
        })
    };
    assert_eq!(bad_cns, failed(0x002), "Invalid Field in Command");
    assert_eq!(bad_ns, failed(0x00b), "Invalid Namespace or Format");
}

#[test]
fn an_abandoned_queue_pair_is_deleted_and_its_id_given_to_the_next_request() {
    let s = setup();
    let manager = s.manager(1);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let (owned, after, again) = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let first = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("first");
        let second = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("second");
        let owned = m.owners().len();
        let ram = os.ram_in_use();
        client.abandon_queue(&first).await.expect("abandons");
        let after = (m.owners(), ram - os.ram_in_use());
        let third = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("third");
        client
            .io(&third, BlockOp::Read, 1, 0, 8, 0)
            .await
            .expect("I/O on the new pair");
        let again = (first.qid(), second.qid(), third.qid());
        client.leave().await.expect("leaves");
        (owned, after, again)
    });
    assert_eq!(owned, 2);
    assert_eq!(
        after,
        (vec![(2, s.hosts[0].id())], 9 * 4096),
        "pair 1 deleted; its CQ and 8 PRP-list pages given back (the SQ is the lender's)"
    );
    assert_eq!(again, (1, 2, 1), "the freed id is handed out again");
}

#[test]
fn a_queue_may_have_exactly_the_controllers_maximum_entries_and_no_more() {
    let s = setup();
    let manager = s.manager(1);
    let max = manager.max_entries;
    assert_eq!(max, 4096, "CAP.MQES + 1");
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let (largest, over, one) = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let largest = client
            .create_queue(max as u16, SqPlacement::Hints)
            .await
            .map(|q| q.qid());
        let over = client
            .create_queue(max as u16 + 1, SqPlacement::Hints)
            .await
            .map(|q| q.qid());
        let one = client
            .create_queue(1, SqPlacement::Hints)
            .await
            .map(|q| q.qid());
        client.leave().await.expect("leaves");
        (largest, over, one)
    });
    assert_eq!(largest, Ok(1));
    assert_eq!(
        one,
        Err(DistError::BadRequest(BadRequest::QueueEntries {
            entries: 1,
            max: 4096
        }))
    );
    assert_eq!(
        over,
        Err(DistError::BadRequest(BadRequest::QueueEntries {
            entries: 4097,
            max: 4096
        }))
    );
}

#[test]
fn concurrent_transfers_on_one_pair_each_get_their_own_prp_list() {
    let s = setup();
    let manager = s.manager(1);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let len = 16 * 1024usize;
    let got = s.run(async move {
        let client = Rc::new(
            Client::connect(&svc, &os, nvme, &m, 8 * len as u64)
                .await
                .expect("connects"),
        );
        let q = client
            .create_queue(8, SqPlacement::Hints)
            .await
            .expect("queue");
        let (data, _) = client.data();
        // Four 16 KiB writes at once (four tags, four PRP lists), then four reads at once.
        for i in 0..4u64 {
            let at = PhysAddr(data.get() + i * len as u64);
            os.machine()
                .poke_memory(os.id(), at, &pattern(0x30 + i as u8, len));
        }
        let done = Rc::new(RefCell::new(0));
        for op in [BlockOp::Write, BlockOp::Read] {
            for i in 0..4u64 {
                let (c, q, d) = (client.clone(), q.clone(), done.clone());
                let offset = if op == BlockOp::Write { i } else { 4 + i } * len as u64;
                os.machine().spawn(async move {
                    c.io(&q, op, 1, 64 * i, 32, offset).await.expect("transfer");
                    *d.borrow_mut() += 1;
                });
            }
            // Wait for the four, but not forever: a transfer that never completes is a
            // failure here, not a simulation that keeps polling (1 ms is ~50 times enough).
            let wanted = if op == BlockOp::Write { 4 } else { 8 };
            for _ in 0..100 {
                if *done.borrow() == wanted {
                    break;
                }
                smartio_platform::Clock::sleep(
                    &os.cpu(),
                    smartio_platform::SimDuration::from_us(10),
                )
                .await;
            }
            assert_eq!(*done.borrow(), wanted, "{op:?}s completed within 1 ms");
        }
        let mut got = Vec::new();
        for i in 4..8u64 {
            let mut b = vec![0u8; len];
            os.machine()
                .peek_memory(os.id(), PhysAddr(data.get() + i * len as u64), &mut b);
            got.push(b);
        }
        match Rc::try_unwrap(client) {
            Ok(c) => c.leave().await.expect("leaves"),
            Err(_) => panic!("a transfer still holds the client"),
        }
        got
    });
    for (i, b) in got.iter().enumerate() {
        assert!(*b == pattern(0x30 + i as u8, len), "transfer {i}");
    }
}

#[test]
fn the_manager_keeps_its_admin_cq_and_scratch_at_home_and_what_others_reach_in_the_lender() {
    let s = setup();
    let (borrower, lender) = (s.hosts[0].clone(), s.hosts[1].clone());
    let before = (borrower.ram_in_use(), lender.ram_in_use());
    let _manager = s.manager(0);
    let grew = (
        borrower.ram_in_use() - before.0,
        lender.ram_in_use() - before.1,
    );
    // On the borrower: the admin CQ (one page) and the scratch buffer (two) — its CPU
    // reads them. In the lender's RAM, next to the controller (which has no memory
    // buffer): the admin SQ and the segment that tells clients where the manager runs.
    assert_eq!(grew, (3 * 4096, 2 * 4096), "(borrower, lender) RAM taken");
}

#[test]
fn with_a_memory_buffer_the_managers_admin_sq_goes_into_it() {
    let s = setup_with("optane-p4800x", ", cmb = \"1M\"");
    let (borrower, lender) = (s.hosts[0].clone(), s.hosts[1].clone());
    let before = (borrower.ram_in_use(), lender.ram_in_use());
    let _manager = s.manager(0);
    let grew = (
        borrower.ram_in_use() - before.0,
        lender.ram_in_use() - before.1,
    );
    // As without one, but the admin SQ (which only the controller reads) sits in the
    // controller's memory buffer: the lender's RAM holds only the published segment.
    assert_eq!(grew, (3 * 4096, 4096), "(borrower, lender) RAM taken");
}

#[test]
fn an_sq_placed_with_a_peer_device_lives_in_that_devices_memory_and_works() {
    let s = setup();
    let manager = s.manager(1);
    let gpu = s.smartio.find("lender:gpu0").expect("registered");
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let (location, read) = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let peer = svc.borrow_device(os.id(), gpu, false).expect("gpu0 shared");
        let q = client
            .create_queue(8, SqPlacement::Peer(peer))
            .await
            .expect("queue");
        let location = q.sq_location();
        let read = client.io(&q, BlockOp::Read, 1, 0, 8, 0).await;
        client.leave().await.expect("leaves");
        svc.return_device(peer).expect("return gpu0");
        (location, read)
    });
    assert!(
        matches!(location, SegmentLocation::Device { fdid, bar: 1, .. } if fdid == gpu),
        "{location:?}"
    );
    assert_eq!(
        read,
        Ok(()),
        "the controller fetches its commands from the GPU"
    );
}

#[test]
fn with_a_memory_buffer_the_hints_and_device_memory_use_it_and_lender_ram_does_not() {
    let s = setup_with("optane-p4800x", ", cmb = \"1M\"");
    let manager = s.manager(1);
    let (svc, os, nvme, m) = (
        s.smartio.clone(),
        s.hosts[0].clone(),
        s.nvme,
        manager.clone(),
    );
    let placed = s.run(async move {
        let client = Client::connect(&svc, &os, nvme, &m, 1 << 16)
            .await
            .expect("connects");
        let mut placed = Vec::new();
        for placement in [
            SqPlacement::ClientRam,
            SqPlacement::LenderRam,
            SqPlacement::Hints,
            SqPlacement::DeviceMemory,
        ] {
            let q = client.create_queue(16, placement).await.expect("queue");
            placed.push(match q.sq_location() {
                SegmentLocation::Ram { host, .. } => format!("RAM of host {}", host.0),
                SegmentLocation::Device { fdid, bar, .. } => {
                    assert_eq!(fdid, nvme);
                    format!("the controller's BAR{bar}")
                }
                SegmentLocation::LocalDevice { .. } => unreachable!("queues are never there"),
            });
            client
                .io(&q, BlockOp::Read, 1, 0, 8, 0)
                .await
                .expect("a read through it");
        }
        client.leave().await.expect("leaves");
        placed
    });
    let ram = |h: usize| format!("RAM of host {}", s.hosts[h].id().0);
    assert_eq!(
        placed,
        [
            ram(0),
            ram(1),
            "the controller's BAR2".to_string(),
            "the controller's BAR2".to_string()
        ],
        "client RAM, lender RAM, then the memory buffer for the hints and for device memory"
    );
}
