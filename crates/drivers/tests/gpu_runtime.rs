//! The GPU runtime on the GPU model (timed engine): copies with their bytes checked, peer
//! access, kernels, GPU-timed events, and each error as its own variant — on a local GPU
//! and on GPUs borrowed by Device Lending, where the same runtime must give the same bytes.
//!
//! ```text
//!   local-chassis:  local ── chassis ─┬─ gpu0
//!                                     └─ gpu1
//!   back-to-back:   borrower ══ NTB ══ lender ── chassis ─┬─ gpu0   (both borrowed)
//!                                                         └─ gpu1
//!   cluster-switch: borrower ══ mxs824 ══╦═ lender  ── chassis ── gpu0
//!                                        ╚═ lender2 ── chassis ── gpu2
//! ```

use crate::common;
use common::pattern;
use common::rig::Rig;

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::gpu::spec::ErrorCode;
use smartio_drivers::gpu::{
    GpuAddr, GpuContext, GpuError, KernelFault, KernelFn, RuntimeCosts, ThreadContext,
};
use smartio_machine::Agent;
use smartio_platform::{BusAddr, Clock, SimDuration};
use smartio_smartio::BorrowOptions;
use std::future::Future;
use std::rc::Rc;

/// A bus address no one claims in any host of the shipped scenarios (below every GPU's
/// address limit).
const UNCLAIMED: u64 = 0x7000_0000_0000;
const MIB: u64 = 1 << 20;

fn rig(scenario: &str) -> Rig {
    Rig::new(Cluster::new(scenario, &Calibration::default_embedded()).expect("scenario loads"))
}

impl Rig {
    /// Opens the GPUs `specs` as host `on` reaches them: a local device by its name, a
    /// lender's (`lender:gpu0`) borrowed by Device Lending first.
    fn open_gpus(
        &self,
        on: &str,
        specs: &[&str],
    ) -> impl Future<Output = Vec<GpuContext>> + 'static {
        let host = self.host(on);
        let smartio = self.smartio.clone();
        let kernels = self.cluster.gpu_kernels().clone();
        let costs = RuntimeCosts::from_calibration(&self.cluster.calibration.gpu_runtime);
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        async move {
            let mut out = Vec::new();
            for spec in specs {
                let name = if spec.contains(':') {
                    let fdid = smartio.find(&spec).expect("registered");
                    smartio
                        .borrow(host.id(), fdid, &BorrowOptions::default())
                        .await
                        .expect("borrow")
                        .device
                } else {
                    spec
                };
                let handle = host.device(&name).expect("device in the host's tree");
                out.push(
                    GpuContext::open(handle, kernels.clone(), costs)
                        .await
                        .expect("open"),
                );
            }
            out
        }
    }
}

/// H2D then D2H of `data` through `gpu`'s memory; returns what came back.
async fn round_trip(gpu: &GpuContext, data: &[u8]) -> Vec<u8> {
    let len = data.len() as u64;
    let src = gpu.host_alloc(len).expect("pinned source");
    let dst = gpu.host_alloc(len).expect("pinned destination");
    let dev = gpu.malloc(len).expect("device buffer");
    gpu.write_host(&src, 0, data).await.expect("fill");
    gpu.memcpy(dev.addr(), src.addr(), len).await.expect("H2D");
    gpu.memcpy(dst.addr(), dev.addr(), len).await.expect("D2H");
    let mut back = vec![0u8; data.len()];
    gpu.read_host(&dst, 0, &mut back).await.expect("read back");
    back
}

/// Reads `len` bytes of `gpu`'s memory at `offset` (a D2H copy).
async fn peek(gpu: &GpuContext, offset: u64, len: u64) -> Vec<u8> {
    let host = gpu.host_alloc(len).expect("pinned");
    gpu.memcpy(host.addr(), GpuAddr::Device(offset), len)
        .await
        .expect("D2H");
    let mut out = vec![0u8; len as usize];
    gpu.read_host(&host, 0, &mut out).await.expect("read");
    gpu.host_free(host).expect("free");
    out
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn kernel(
    f: impl Fn(ThreadContext<Agent>) -> std::pin::Pin<Box<dyn Future<Output = Result<(), KernelFault>>>>
        + 'static,
) -> KernelFn<Agent> {
    Rc::new(f)
}

#[test]
fn a_1mib_round_trip_gives_the_same_bytes_on_a_local_and_on_a_borrowed_gpu() {
    let data = pattern(16, MIB as usize);
    let results: Vec<Vec<u8>> = [
        ("local-chassis", "local", "gpu0"),
        ("back-to-back", "borrower", "lender:gpu0"),
    ]
    .into_iter()
    .map(|(scenario, host, gpu)| {
        let r = rig(scenario);
        let open = r.open_gpus(host, &[gpu]);
        let data = data.clone();
        r.run(async move {
            let gpus = open.await;
            round_trip(&gpus[0], &data).await
        })
    })
    .collect();
    assert!(results[0] == data, "local: the bytes came back changed");
    assert!(results[1] == data, "borrowed: the bytes came back changed");
    assert!(results[0] == results[1], "local and borrowed differ");
}

#[test]
fn a_gpu_copies_into_its_peer_through_the_peer_aperture_local_borrowed_and_across_lenders() {
    for (scenario, host, a, b) in [
        ("local-chassis", "local", "gpu0", "gpu1"),
        ("back-to-back", "borrower", "lender:gpu0", "lender:gpu1"),
        ("cluster-switch", "borrower", "lender:gpu0", "lender2:gpu2"),
    ] {
        let r = rig(scenario);
        let open = r.open_gpus(host, &[a, b]);
        let data = pattern(7, 256 << 10);
        let sent = data.clone();
        let back = r.run(async move {
            let data = sent;
            let gpus = open.await;
            let (g0, g1) = (&gpus[0], &gpus[1]);
            let len = data.len() as u64;
            let src = g0.host_alloc(len).expect("pinned");
            g0.write_host(&src, 0, &data).await.expect("fill");
            let on0 = g0.malloc(len).expect("gpu0 buffer");
            g0.memcpy(on0.addr(), src.addr(), len).await.expect("H2D");
            let on1 = g1.malloc(len).expect("gpu1 buffer");
            let peer = g0.enable_peer_access(g1).expect("peer access");
            let at = peer.addr(&on1).expect("inside the aperture");
            g0.memcpy(at, on0.addr(), len).await.expect("peer copy");
            peek(g1, on1.offset, len).await
        });
        assert!(
            back == data,
            "{scenario}: gpu1 does not hold what gpu0 copied"
        );
    }
}

/// Each thread stores its index at `base + 8 × thread` (params: base as a u64).
fn store_index() -> KernelFn<Agent> {
    kernel(|t| {
        Box::pin(async move {
            let base = u64_at(t.params(), 0);
            let at = GpuAddr::Bus(BusAddr(base + 8 * u64::from(t.thread())));
            t.store_u64(at, u64::from(t.thread())).await
        })
    })
}

#[test]
fn every_thread_of_a_kernel_stores_its_index_into_pinned_host_memory_local_and_borrowed() {
    for (scenario, host, gpu) in [
        ("local-chassis", "local", "gpu0"),
        ("back-to-back", "borrower", "lender:gpu0"),
    ] {
        let r = rig(scenario);
        let open = r.open_gpus(host, &[gpu]);
        let words = r.run(async move {
            let gpus = open.await;
            let g = &gpus[0];
            let id = g.load_kernel("store_index", store_index());
            let threads = 512u32;
            let out = g.host_alloc(8 * u64::from(threads)).expect("pinned");
            let s = g.create_stream().await.expect("stream");
            s.launch(id, threads, &out.bus.get().to_le_bytes())
                .await
                .expect("launch");
            s.synchronize().await.expect("kernel ran");
            let mut bytes = vec![0u8; 8 * threads as usize];
            g.read_host(&out, 0, &mut bytes).await.expect("read");
            (0..threads as usize)
                .map(|i| u64_at(&bytes, 8 * i))
                .collect::<Vec<_>>()
        });
        let expected: Vec<u64> = (0..512).collect();
        assert_eq!(words, expected, "{scenario}");
    }
}

/// Ping-pong by kernels: params are (own counter offset, the peer's counter as a bus
/// address, rounds, serves first). The first server writes odd values, the other even ones.
fn ping_pong() -> KernelFn<Agent> {
    kernel(|t| {
        Box::pin(async move {
            let p = t.params();
            let (own, peer, rounds, first) = (
                u64_at(p, 0),
                u64_at(p, 8),
                u64_at(p, 16),
                u64_at(p, 24) == 1,
            );
            let peer = GpuAddr::Bus(BusAddr(peer));
            for i in 0..rounds {
                if first {
                    t.store_u64(peer, 2 * i + 1).await?;
                    t.wait_until(own, |v| v >= 2 * i + 2).await?;
                } else {
                    t.wait_until(own, |v| v > 2 * i).await?;
                    t.store_u64(peer, 2 * i + 2).await?;
                }
            }
            Ok(())
        })
    })
}

#[test]
fn two_gpus_play_ping_pong_by_kernels_on_their_own_streams_and_the_counters_add_up() {
    const ROUNDS: u64 = 50;
    for (scenario, host, a, b) in [
        ("local-chassis", "local", "gpu0", "gpu1"),
        ("back-to-back", "borrower", "lender:gpu0", "lender:gpu1"),
    ] {
        let r = rig(scenario);
        let open = r.open_gpus(host, &[a, b]);
        let (c0, c1) = r.run(async move {
            let gpus = open.await;
            let (g0, g1) = (&gpus[0], &gpus[1]);
            let id = g0.load_kernel("ping_pong", ping_pong());
            let (n0, n1) = (
                g0.malloc(8).expect("counter 0"),
                g1.malloc(8).expect("counter 1"),
            );
            let to1 = g0.enable_peer_access(g1).expect("0 → 1");
            let to0 = g1.enable_peer_access(g0).expect("1 → 0");
            let params = |own: u64, peer: GpuAddr, first: u64| {
                let GpuAddr::Bus(peer) = peer else {
                    panic!("a peer is reached on the bus")
                };
                [own, peer.get(), ROUNDS, first]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>()
            };
            let (s0, s1) = (
                g0.create_stream().await.expect("s0"),
                g1.create_stream().await.expect("s1"),
            );
            s1.launch(
                id,
                1,
                &params(n1.offset, to0.addr(&n0).expect("aperture"), 0),
            )
            .await
            .expect("launch on gpu1");
            s0.launch(
                id,
                1,
                &params(n0.offset, to1.addr(&n1).expect("aperture"), 1),
            )
            .await
            .expect("launch on gpu0");
            s0.synchronize().await.expect("gpu0's kernel");
            s1.synchronize().await.expect("gpu1's kernel");
            (
                u64_at(&peek(g0, n0.offset, 8).await, 0),
                u64_at(&peek(g1, n1.offset, 8).await, 0),
            )
        });
        assert_eq!((c0, c1), (2 * ROUNDS, 2 * ROUNDS - 1), "{scenario}");
    }
}

/// One thread that sleeps `params[0..8]` ns: holds its stream while the host queues more.
fn gate() -> KernelFn<Agent> {
    kernel(|t| {
        Box::pin(async move {
            t.nanosleep(SimDuration::from_ns(u64_at(t.params(), 0)))
                .await;
            Ok(())
        })
    })
}

/// GPU-timed copies of 4 KiB and 4 MiB (host to device) on one stream, queued behind a
/// gate so that the GPU runs them back to back (no host call between them on the clock).
fn timed_copies(scenario: &str, host: &str, gpu: &str) -> (SimDuration, SimDuration) {
    let r = rig(scenario);
    let open = r.open_gpus(host, &[gpu]);
    r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let src = g.host_alloc(4 * MIB).expect("pinned");
        let dev = g.malloc(4 * MIB).expect("device");
        let s = g.create_stream().await.expect("stream");
        let e: Vec<_> = (0..4).map(|_| g.create_event().expect("event")).collect();
        let gate = g.load_kernel("gate", gate());
        s.launch(gate, 1, &100_000u64.to_le_bytes())
            .await
            .expect("gate");
        s.record(&e[0]).await.expect("record");
        s.memcpy_async(dev.addr(), src.addr(), 4 << 10)
            .await
            .expect("4 KiB");
        s.record(&e[1]).await.expect("record");
        s.record(&e[2]).await.expect("record");
        s.memcpy_async(dev.addr(), src.addr(), 4 * MIB)
            .await
            .expect("4 MiB");
        s.record(&e[3]).await.expect("record");
        s.synchronize().await.expect("copies");
        (
            g.elapsed(&e[0], &e[1]).await.expect("small"),
            g.elapsed(&e[2], &e[3]).await.expect("big"),
        )
    })
}

#[test]
fn events_time_a_4mib_copy_longer_than_a_4kib_one_and_two_runs_agree_exactly() {
    for (scenario, host, gpu) in [
        ("local-chassis", "local", "gpu0"),
        ("back-to-back", "borrower", "lender:gpu0"),
    ] {
        let (small, big) = timed_copies(scenario, host, gpu);
        eprintln!(
            "{scenario}: H2D 4 KiB {} ns, 4 MiB {} ns",
            small.as_ns_f64(),
            big.as_ns_f64()
        );
        assert!(
            big > small,
            "{scenario}: 4 MiB ({big:?}) not longer than 4 KiB ({small:?})"
        );
        assert!(small > SimDuration::ZERO, "{scenario}: a copy takes time");
        assert_eq!(
            timed_copies(scenario, host, gpu),
            (small, big),
            "{scenario}: runs differ"
        );
    }
}

#[test]
fn a_kernel_storing_to_an_unmapped_bus_address_is_a_channel_error_at_synchronize_and_the_stream_recovers(
) {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let (error, after) = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let id = g.load_kernel("store_index", store_index());
        let s = g.create_stream().await.expect("stream");
        s.launch(id, 4, &UNCLAIMED.to_le_bytes())
            .await
            .expect("queued");
        let error = s.synchronize().await.expect_err("the kernel faults");
        // The channel was reset: the stream works again.
        let out = g.host_alloc(8 * 4).expect("pinned");
        s.launch(id, 4, &out.bus.get().to_le_bytes())
            .await
            .expect("queued");
        let after = s.synchronize().await;
        (error, after)
    });
    match error {
        GpuError::Channel {
            code: ErrorCode::KernelFault,
            info,
            channel: 0,
            entry: 0,
        } => assert!(
            (UNCLAIMED..UNCLAIMED + 32).contains(&info),
            "fault address {info:#x}"
        ),
        other => panic!("expected a kernel fault, got {other:?}"),
    }
    assert_eq!(after, Ok(()), "the stream works after the error");
}

#[test]
fn a_copy_larger_than_device_memory_is_refused_before_it_is_queued() {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let (memory, refused) = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let memory = g.properties().memory;
        let s = g.create_stream().await.expect("stream");
        let refused = s
            .memcpy_async(GpuAddr::Device(0), GpuAddr::Bus(BusAddr(0)), memory + 1)
            .await;
        (memory, refused)
    });
    assert_eq!(
        refused,
        Err(GpuError::CopyTooLarge {
            len: memory + 1,
            memory
        })
    );
}

#[test]
fn peer_access_to_a_buffer_beyond_the_peer_aperture_is_refused() {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0", "gpu1"]);
    let (aperture, beyond, refused) = r.run(async move {
        let gpus = open.await;
        let aperture = gpus[1].properties().aperture;
        gpus[1].malloc(aperture).expect("fills the aperture");
        let beyond = gpus[1].malloc(4096).expect("beyond the aperture");
        let peer = gpus[0].enable_peer_access(&gpus[1]).expect("peer");
        (aperture, beyond, peer.addr(&beyond))
    });
    assert_eq!(beyond.offset, aperture, "first fit puts it right after");
    assert_eq!(
        refused,
        Err(GpuError::NotInAperture {
            offset: aperture,
            len: 4096,
            aperture
        })
    );
}

#[test]
fn a_call_after_the_borrowed_gpu_was_returned_fails_as_device_gone_and_close_still_cleans_up() {
    let r = rig("back-to-back");
    let open = r.open_gpus("borrower", &["lender:gpu0"]);
    let smartio = r.smartio.clone();
    let borrower = r.host("borrower");
    let (copy, malloc, closed, ram) = r.run(async move {
        let ram_before = borrower.ram_in_use();
        let mut gpus = open.await;
        let g = gpus.remove(0);
        let host = g.host_alloc(4096).expect("pinned");
        let dev = g.malloc(4096).expect("device");
        g.memcpy(dev.addr(), host.addr(), 4096)
            .await
            .expect("while borrowed");
        let fdid = smartio.find("lender:gpu0").expect("registered");
        smartio
            .give_back(borrower.id(), fdid)
            .await
            .expect("returned");
        let copy = g.memcpy(dev.addr(), host.addr(), 4096).await;
        let malloc = g.malloc(4096);
        let closed = g.close().await;
        (copy, malloc, closed, (ram_before, borrower.ram_in_use()))
    });
    assert!(
        matches!(copy, Err(GpuError::DeviceGone { ref device, .. }) if device == "gpu0"),
        "{copy:?}"
    );
    assert!(
        matches!(malloc, Err(GpuError::DeviceGone { .. })),
        "{malloc:?}"
    );
    assert_eq!(closed, Ok(()));
    assert_eq!(ram.0, ram.1, "close gave every pinned page back");
}

#[test]
fn malloc_beyond_device_memory_says_what_was_asked_and_what_is_free() {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let (memory, whole, rest) = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let memory = g.properties().memory;
        let whole = g.malloc(memory + 1);
        g.malloc(memory / 2).expect("half");
        let rest = g.malloc(memory / 2 + 1);
        (memory, whole, rest)
    });
    assert_eq!(
        whole,
        Err(GpuError::OutOfMemory {
            asked: memory + 256,
            free: memory
        })
    );
    assert_eq!(
        rest,
        Err(GpuError::OutOfMemory {
            asked: memory / 2 + 256,
            free: memory / 2
        })
    );
}

#[test]
fn bad_arguments_are_refused_before_anything_is_queued() {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let errors = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let id = g.load_kernel("store_index", store_index());
        let s = g.create_stream().await.expect("stream");
        let never = g.create_event().expect("event");
        let other = g.create_event().expect("event");
        vec![
            s.memcpy_async(GpuAddr::Device(0), GpuAddr::Device(64), 0)
                .await,
            s.launch(id, 0, &[]).await,
            s.launch(id, 1025, &[]).await,
            s.launch(id, 1, &[0u8; 4097]).await,
            g.malloc(0).map(|_| ()),
            g.elapsed(&never, &other).await.map(|_| ()),
        ]
    });
    for e in &errors[..5] {
        assert!(matches!(e, Err(GpuError::BadParameter(_))), "{e:?}");
    }
    assert_eq!(errors[5], Err(GpuError::EventNotRecorded));
}

#[test]
fn a_ninth_stream_finds_no_free_channel_and_a_destroyed_one_frees_its_channel() {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let (ninth, reused) = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let mut streams = Vec::new();
        for _ in 0..8 {
            streams.push(g.create_stream().await.expect("a channel"));
        }
        let ninth = g.create_stream().await.map(|s| s.channel());
        let third = streams.remove(3);
        third.destroy().await.expect("destroy");
        let reused = g.create_stream().await.map(|s| s.channel());
        (ninth, reused)
    });
    assert_eq!(ninth, Err(GpuError::NoFreeChannel { channels: 8 }));
    assert_eq!(reused, Ok(3));
}

#[test]
fn thousands_of_copies_queued_without_a_synchronize_wrap_the_ring_and_all_land() {
    const COPIES: u64 = 3000;
    const CHUNK: u64 = 256;
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let data = pattern(3, (COPIES * CHUNK) as usize);
    let expected = data.clone();
    let (back, elapsed) = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let len = COPIES * CHUNK;
        let src = g.host_alloc(len).expect("pinned");
        g.write_host(&src, 0, &data).await.expect("fill");
        let dev = g.malloc(len).expect("device");
        let s = g.create_stream().await.expect("stream");
        // The GPU is held for 10 ms while the host queues 6 ms of calls: the ring fills
        // and the host must wait for room.
        let gate = g.load_kernel("gate", gate());
        let t0 = g.handle().cpu().now();
        s.launch(gate, 1, &10_000_000u64.to_le_bytes())
            .await
            .expect("gate");
        for i in 0..COPIES {
            s.memcpy_async(dev.at(i * CHUNK), src.at(i * CHUNK), CHUNK)
                .await
                .expect("queued");
        }
        s.synchronize().await.expect("all ran");
        let elapsed = g.handle().cpu().now().since(t0);
        (peek(g, dev.offset, len).await, elapsed)
    });
    assert!(back == expected, "a chunk did not land");
    assert!(
        elapsed > SimDuration::from_us(10_000),
        "{elapsed:?}: the gate held the GPU"
    );
}

/// The runtime queues a RELEASE every quarter of the ring: a host that found the ring full
/// goes on once the GPU is a quarter of the ring further, not only once it has run the whole
/// ring (which would leave the GPU idle while the host fills it again).
#[test]
fn a_host_waiting_for_room_in_a_full_ring_goes_on_after_a_quarter_of_it_has_run() {
    const COPIES: u64 = 2000;
    const RING: u64 = smartio_drivers::gpu::stream::RING_ENTRIES;
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0"]);
    let (returns, gate_end, all_done) = r.run(async move {
        let gpus = open.await;
        let g = &gpus[0];
        let dev = g.malloc(MIB).expect("device");
        let s = g.create_stream().await.expect("stream");
        let gate = g.load_kernel("gate", gate());
        let cpu = g.handle().cpu();
        s.launch(gate, 1, &10_000_000u64.to_le_bytes())
            .await
            .expect("gate");
        let gate_end = cpu.now() + SimDuration::from_us(10_000);
        let mut returns = Vec::new();
        for i in 0..COPIES {
            let at = (i % 64) * 256;
            s.memcpy_async(dev.at(at + 16384), dev.at(at), 256)
                .await
                .expect("queued");
            returns.push(cpu.now());
        }
        s.synchronize().await.expect("all ran");
        (returns, gate_end, cpu.now())
    });
    // The first call that found no room returned after the gate, once the GPU made room.
    let waited = returns
        .iter()
        .position(|&at| at > gate_end)
        .expect("the ring filled while the gate held the GPU");
    assert!(waited as u64 >= RING / 2, "{waited}: the ring holds more");
    let per_copy = all_done.since(gate_end).as_ps() / COPIES;
    let resumed = returns[waited].since(gate_end).as_ps();
    assert!(
        resumed < per_copy * RING / 2,
        "the host went on {resumed} ps after the gate, {:.0} copies' worth (a quarter ring is {})",
        resumed as f64 / per_copy as f64,
        RING / 4
    );
}

#[test]
fn close_gives_every_pinned_page_back_and_later_calls_say_closed() {
    let r = rig("local-chassis");
    let open = r.open_gpus("local", &["gpu0", "gpu1"]);
    let local = r.host("local");
    let (before, after, later) = r.run(async move {
        let before = local.ram_in_use();
        let mut gpus = open.await;
        let g1 = gpus.pop().expect("gpu1");
        let g0 = gpus.pop().expect("gpu0");
        let _ = g0.host_alloc(3 * MIB).expect("pinned");
        let s = g0.create_stream().await.expect("stream");
        let e = g0.create_event().expect("event");
        s.record(&e).await.expect("record");
        g0.memcpy(GpuAddr::Device(0), GpuAddr::Device(4096), 64)
            .await
            .expect("internal stream");
        g0.enable_peer_access(&g1).expect("peer");
        g0.close().await.expect("close");
        g1.close().await.expect("close");
        let later = s.synchronize().await;
        (before, local.ram_in_use(), later)
    });
    assert_eq!(before, after, "pinned memory left behind");
    assert_eq!(later, Err(GpuError::Closed));
}

/// Peer access needs a path the GPU can address: a K420 (40 address bits) cannot reach a
/// peer's BAR1 in the 64-bit MMIO region (above 1 TiB), so enabling it is refused with what
/// is out of reach; the other way round works.
#[test]
fn peer_access_beyond_a_gpus_address_bits_is_refused_as_out_of_reach() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/local-chassis.toml"
    ))
    .expect("shipped scenario");
    let marker = "name = \"gpu0\"\nkind = \"gpu\"\n";
    assert_eq!(text.matches(marker).count(), 1, "one gpu0 entry");
    let text = text.replace(
        marker,
        &format!("{marker}params = {{ profile = \"k420\" }}\n"),
    );
    let path = std::env::temp_dir().join(format!("k420-chassis-{}.toml", std::process::id()));
    std::fs::write(&path, text).expect("write the variant");
    let r = rig(path.to_str().expect("utf-8"));
    let opened = r.open_gpus("local", &["gpu0", "gpu1"]);
    let (refused, allowed) = r.run(async move {
        let gpus = opened.await;
        let refused = gpus[0].enable_peer_access(&gpus[1]).map(|p| p.base());
        let allowed = gpus[1].enable_peer_access(&gpus[0]).map(|p| p.base());
        (refused, allowed)
    });
    let _ = std::fs::remove_file(&path);
    match refused {
        Err(GpuError::PeerOutOfReach { peer, base, bits }) => {
            assert_eq!((peer.as_str(), bits), ("gpu1", 40));
            assert!(base >= 1 << 40, "{base:#x}");
        }
        other => panic!("expected PeerOutOfReach, got {other:?}"),
    }
    assert!(
        allowed.is_ok(),
        "a 47-bit P4000 reaches the K420: {allowed:?}"
    );
}
