//! Peer-to-peer between a borrowed device and another device, in the three cases of Paper
//! V §4.4: the target in the same lender, in the borrower itself, or in a different lender.
//! In each case the source reaches the target over the shortest path — never through the
//! borrower's root complex — and the bytes arrive.
//!
//! The source is a borrowed GPU driven by the GPU runtime (`smartio_drivers::gpu`): its copy
//! engine writes into each target GPU's BAR1 aperture at the address SmartIO resolved for
//! the pair (`enable_peer_access`, which is `dma_map_peer(target, APERTURE_BAR)`). The bytes
//! are set up and checked in the GPUs' memories directly (`Gpu::poke` / `Gpu::peek`).

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::gpu::spec::{GpuAddr, APERTURE_BAR};
use smartio_drivers::gpu::{GpuContext, RuntimeCosts};
use smartio_fabric::{Access, EndpointId, NodeKind, Requester, Target};
use smartio_host::HostOs;
use smartio_platform::BusAddr;
use smartio_smartio::{BorrowOptions, SmartIo};
use std::cell::RefCell;
use std::rc::Rc;

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/scenarios/p2p-three-cases.toml"
);

/// Bytes each copy moves.
const COPY_BYTES: u64 = 4096;
/// Where in each target's buffer the copy lands (not at its start, so an offset that is
/// dropped on the way shows).
const TARGET_OFFSET: u64 = 0x1000;

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

/// What the run learned about one target.
struct Mapped {
    /// Where SmartIO lets the source reach the first byte of the target's aperture.
    base: BusAddr,
    /// Where the copy wrote (inside the aperture).
    written: BusAddr,
    /// The offset in the target's memory that address stands for.
    offset: u64,
}

/// The distinct pattern copied to target `i`.
fn pattern(i: usize) -> Vec<u8> {
    (0..COPY_BYTES as u32)
        .map(|b| (b as u8) ^ (0x30 + i as u8))
        .collect()
}

#[test]
fn a_borrowed_device_reaches_peers_over_the_shortest_path_in_all_three_cases() {
    let cluster = Cluster::new(SCENARIO, &Calibration::default_embedded()).expect("loads");
    let hosts = HostOs::boot_all(&cluster.machine).expect("boots");
    let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
    smartio.register_all().expect("registers");
    let borrower = hosts[0].clone();
    let source_ep = hosts[1].endpoint_of("gpu0").expect("gpu0");
    let source_gpu = cluster.gpu(source_ep).expect("lender:gpu0 is a GPU model");
    let costs = RuntimeCosts::from_calibration(&cluster.calibration.gpu_runtime);

    // Borrow the source and the remote targets, open the GPU runtime on each, map each
    // target's aperture for the source, and let the source's copy engine write a pattern
    // into each.
    let out = Rc::new(RefCell::new(None));
    let slot = out.clone();
    let (svc, os, kernels) = (
        smartio.clone(),
        borrower.clone(),
        cluster.gpu_kernels().clone(),
    );
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
            let open = |name: &str| {
                let handle = os.device(name).map_err(|e| e.to_string());
                let kernels = kernels.clone();
                async move {
                    GpuContext::open(handle?, kernels, costs)
                        .await
                        .map_err(|e| e.to_string())
                }
            };
            let source = open(&names[0]).await?;
            // The source's memory holds three distinct patterns, one per target, put there
            // untimed as a test fixture.
            let from = source
                .malloc(COPY_BYTES * CASES.len() as u64)
                .map_err(|e| e.to_string())?;
            for i in 0..CASES.len() {
                source_gpu
                    .poke(from.offset + COPY_BYTES * i as u64, &pattern(i))
                    .map_err(|e| e.to_string())?;
            }
            let targets = [names[1].as_str(), "gpu3", names[2].as_str()];
            let mut mapped = Vec::new();
            for (i, t) in targets.iter().enumerate() {
                let target = open(t).await?;
                let buf = target
                    .malloc(TARGET_OFFSET + COPY_BYTES)
                    .map_err(|e| e.to_string())?;
                let peer = source
                    .enable_peer_access(&target)
                    .map_err(|e| e.to_string())?;
                let to = peer.addr(&buf).map_err(|e| e.to_string())?;
                let GpuAddr::Bus(to) = to else {
                    return Err(format!("{t}: a peer's memory is not on the bus: {to:?}"));
                };
                let to = to.offset(TARGET_OFFSET);
                source
                    .memcpy(GpuAddr::Bus(to), from.at(COPY_BYTES * i as u64), COPY_BYTES)
                    .await
                    .map_err(|e| e.to_string())?;
                mapped.push(Mapped {
                    base: peer.base(),
                    written: to,
                    offset: buf.offset + TARGET_OFFSET,
                });
            }
            Ok::<_, String>(mapped)
        };
        *slot.borrow_mut() = Some(run.await);
    });
    // Nothing is in the targets before the copies.
    let target_ep = |case: &Case| -> EndpointId {
        let fabric = cluster.machine.fabric();
        let host = fabric.host_by_name(case.host).expect("host");
        fabric.endpoint_by_name(host, case.device).expect("device")
    };
    for case in &CASES {
        let gpu = cluster.gpu(target_ep(case)).expect("a GPU model");
        let mut got = vec![0u8; (TARGET_OFFSET + COPY_BYTES) as usize];
        gpu.peek(0, &mut got).expect("inside memory");
        assert!(got.iter().all(|&b| b == 0), "{}: empty before", case.target);
    }
    cluster.machine.run();
    let mapped = out
        .borrow_mut()
        .take()
        .expect("finished")
        .expect("copies succeed");
    assert_eq!(mapped.len(), CASES.len());

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
    for (i, (case, m)) in CASES.iter().zip(&mapped).enumerate() {
        let target_ep = target_ep(case);
        let route = fabric
            .route(Requester::Device(source_ep), m.base, 8, Access::Write)
            .expect("routes");
        assert_eq!(
            route.target,
            Target::Bar {
                endpoint: target_ep,
                bar: APERTURE_BAR,
                offset: 0
            },
            "{}: the address SmartIO resolved reaches the target's aperture",
            case.target
        );
        let written = fabric
            .route(Requester::Device(source_ep), m.written, 8, Access::Write)
            .expect("routes");
        assert_eq!(
            written.target,
            Target::Bar {
                endpoint: target_ep,
                bar: APERTURE_BAR,
                offset: m.offset
            },
            "{}: the copy's address is the buffer's offset in the aperture",
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
        // The bytes arrived where the route says, and nothing before them moved.
        let gpu = cluster.gpu(target_ep).expect("a GPU model");
        let mut got = vec![0u8; COPY_BYTES as usize];
        gpu.peek(m.offset, &mut got).expect("inside memory");
        assert_eq!(got, pattern(i), "{}: data arrived", case.target);
        let mut before = vec![0u8; m.offset as usize];
        gpu.peek(0, &mut before).expect("inside memory");
        assert!(
            before.iter().all(|&b| b == 0),
            "{}: nothing written before the buffer's offset",
            case.target
        );
    }
}
