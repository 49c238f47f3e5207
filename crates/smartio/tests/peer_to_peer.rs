//! Peer-to-peer between a borrowed device and another device, in the three cases of Paper
//! V §4.4: the target in the same lender, in the borrower itself, or in a different lender.
//! In each case the source reaches the target over the shortest path — never through the
//! borrower's root complex — and the bytes arrive.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::dma::GPU_MEMORY_BAR;
use smartio_drivers::{DmaTestDriver, Location};
use smartio_fabric::{Access, NodeKind, Requester, Target};
use smartio_host::HostOs;
use smartio_smartio::{BorrowOptions, SmartIo};
use std::cell::RefCell;
use std::rc::Rc;

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/scenarios/p2p-three-cases.toml"
);

/// One case: the target as the borrower names it, and where its real function is.
struct Case {
    target: &'static str,
    host: &'static str,
    device: &'static str,
}

const CASES: [Case; 3] = [
    Case {
        target: "lender:gpu1",
        host: "lender",
        device: "gpu1",
    },
    Case {
        target: "gpu3",
        host: "borrower",
        device: "gpu3",
    },
    Case {
        target: "lender2:gpu2",
        host: "lender2",
        device: "gpu2",
    },
];

#[test]
fn a_borrowed_device_reaches_peers_over_the_shortest_path_in_all_three_cases() {
    let cluster = Cluster::new(SCENARIO, &Calibration::default_embedded()).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    let borrower = hosts[0].clone();

    // Borrow the source and the remote targets, map each target's memory for the source,
    // and let the source's copy engine write a pattern into each.
    let out = Rc::new(RefCell::new(None));
    let slot = out.clone();
    let (svc, os) = (smartio.clone(), borrower.clone());
    cluster.machine.spawn(async move {
        let run = async {
            let mut names = Vec::new();
            for spec in ["lender:gpu0", "lender:gpu1", "lender2:gpu2"] {
                let fdid = svc.find(spec).map_err(|e| e.to_string())?;
                let lent = svc
                    .borrow(os.id(), fdid, &BorrowOptions::default())
                    .await
                    .map_err(|e| e.to_string())?;
                names.push(lent.device);
            }
            let source = os.device(&names[0]).map_err(|e| e.to_string())?;
            let targets = [names[1].as_str(), "gpu3", names[2].as_str()];
            let regs = source.map_bar(0).map_err(|e| e.to_string())?.window().base;
            let completion = source.dma_alloc_coherent(4096).map_err(|e| e.to_string())?;
            let driver =
                DmaTestDriver::probe(source.cpu().clone(), regs, completion.cpu, completion.bus)
                    .await
                    .map_err(|e| e.to_string())?;
            let mut addrs = Vec::new();
            for (i, t) in targets.iter().enumerate() {
                let target = os.device(t).map_err(|e| e.to_string())?;
                let addr = source
                    .dma_map_peer(&target, GPU_MEMORY_BAR)
                    .map_err(|e| e.to_string())?;
                driver
                    .copy(
                        Location::DeviceMemory(4096 * i as u64),
                        Location::Bus(addr.offset(0x1000)),
                        4096,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                addrs.push(addr);
            }
            Ok::<_, String>(addrs)
        };
        *slot.borrow_mut() = Some(run.await);
    });
    // The source's memory holds three distinct patterns, one per target.
    let source_ep = hosts[1].endpoint_of("gpu0").expect("gpu0");
    let source_dev = cluster.copy_engine(source_ep).expect("gpu model");
    let patterns: Vec<Vec<u8>> = (0..3u8)
        .map(|i| (0..4096u32).map(|b| (b as u8) ^ (0x30 + i)).collect())
        .collect();
    for (i, p) in patterns.iter().enumerate() {
        smartio_platform::BarHandler::mmio_write(
            source_dev.as_ref(),
            GPU_MEMORY_BAR,
            4096 * i as u64,
            p,
        )
        .expect("device memory");
    }
    cluster.machine.run();
    let addrs = out
        .borrow_mut()
        .take()
        .expect("finished")
        .expect("copies succeed");

    let fabric = cluster.machine.fabric();
    let borrower_root = fabric.host(borrower.id()).root;
    let borrower_nodes: Vec<_> = fabric
        .nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| n.name.starts_with("borrower"))
        .map(|(i, _)| smartio_fabric::NodeId(i as u32))
        .collect();
    let is_ntb = |n: smartio_fabric::NodeId| matches!(fabric.node(n).kind, NodeKind::Ntb { .. });
    for (case, addr) in CASES.iter().zip(&addrs) {
        let route = fabric
            .route(Requester::Device(source_ep), *addr, 8, Access::Write)
            .expect("routes");
        let host = fabric.host_by_name(case.host).expect("host");
        let target_ep = fabric.endpoint_by_name(host, case.device).expect("device");
        assert_eq!(
            route.target,
            Target::Bar {
                endpoint: target_ep,
                bar: GPU_MEMORY_BAR,
                offset: 0
            },
            "{}: the address reaches the target's memory",
            case.target
        );
        let names: Vec<&str> = route
            .hops
            .iter()
            .map(|h| fabric.node(h.node).name.as_str())
            .collect();
        assert!(
            !route.crosses(borrower_root),
            "{}: no detour through the borrower's root complex: {names:?}",
            case.target
        );
        assert!(
            !route
                .hops
                .iter()
                .any(|h| matches!(fabric.node(h.node).kind, NodeKind::RootComplex)),
            "{}: no root complex at all: {names:?}",
            case.target
        );
        let crosses_borrower = route.hops.iter().any(|h| borrower_nodes.contains(&h.node));
        let ntbs = route.hops.iter().filter(|h| is_ntb(h.node)).count();
        match case.host {
            // (1) Same lender: through the chassis switch only.
            "lender" => {
                assert_eq!(ntbs, 0, "same lender stays in the lender: {names:?}");
                assert_eq!(names.len(), 2, "device → chassis → device: {names:?}");
            }
            // (2) Borrower-local target: through both NTBs and the borrower's switch.
            "borrower" => {
                assert!(crosses_borrower, "{names:?}");
                assert!(names.contains(&"borrower.sw"), "{names:?}");
                assert_eq!(ntbs, 2, "{names:?}");
            }
            // (3) Different lenders: lender to lender2 directly, never via the borrower.
            _ => {
                assert!(!crosses_borrower, "{names:?}");
                assert!(names.contains(&"mxs824"), "{names:?}");
                assert_eq!(ntbs, 2, "{names:?}");
            }
        }
        // The bytes arrived where the route says.
        let mut got = vec![0u8; 4096];
        let dev = cluster.copy_engine(target_ep).expect("gpu model");
        dev.read_memory(0x1000, &mut got);
        let i = CASES
            .iter()
            .position(|c| c.target == case.target)
            .expect("case");
        assert_eq!(got, patterns[i], "{}: data arrived", case.target);
    }
}
