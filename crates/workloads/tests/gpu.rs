//! The GPU workloads on the GPU model and runtime (Paper V §7.1): CUDA `bandwidthTest`
//! (`bench_gpu_bandwidth`) on a local and a borrowed GPU (Fig. 22) and with the cluster
//! switch's extra hop (Fig. 23), and the kernel ping-pong (`gpu_pingpong`) with its counters
//! in host RAM.
//!
//! ```text
//!   local-chassis:  local ── hib68-host ══ hib68-target ── chassis ─┬─ gpu0, gpu1
//!                                                                   └─ nvme0, dma0
//!   back-to-back:   borrower ── ntb0 ══ lender.ntb0 ── lender.chassis ─┬─ gpu0, gpu1
//!                                                                      └─ nvme0, dma0
//!   cluster-switch: borrower ── ntb0 ══ mxs824 (PM8536) ══ lender.ntb0 ── lender.chassis ─ …
//! ```

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::gpu::BadParameter;
use smartio_workloads::{
    bench_gpu_bandwidth, gpu_pingpong, CounterPlace, DmaSample, GpuBandwidthConfig,
    GpuBandwidthResult, GpuCopyDirection, GpuPingPongConfig, GpuPingPongResult, GpuSizeLimit,
    GpuWorkloadError,
};

/// The sizes of the bandwidth runs, smallest first (so the last copy is the largest, and
/// the workload verifies it).
const SIZES: [u64; 4] = [4 << 10, 64 << 10, 1 << 20, 16 << 20];
/// The largest of [`SIZES`].
const LARGEST: u64 = 16 << 20;
/// A Gen3 x16 link's raw rate: 8 GT/s × 16 lanes × 128/130, in bytes per second.
const GEN3_X16_BYTES_PER_S: f64 = 8e9 * 16.0 * 128.0 / 130.0 / 8.0;

/// The scenario with variation closed: these tests derive each copy's time from the model's
/// typical figures.
fn cluster(scenario: &str) -> Cluster {
    Cluster::new(
        scenario,
        &Calibration::default_embedded().without_variation(),
    )
    .expect("scenario loads")
}

fn config(host: &str, device: &str, direction: GpuCopyDirection) -> GpuBandwidthConfig {
    GpuBandwidthConfig {
        host: host.into(),
        device: device.into(),
        direction,
        sizes: SIZES.to_vec(),
        copies: 10,
        repeat: 2,
    }
}

fn bandwidth(scenario: &str, config: &GpuBandwidthConfig) -> GpuBandwidthResult {
    bench_gpu_bandwidth(&cluster(scenario), config).expect("bandwidthTest runs")
}

/// gpu0 of local-chassis, used by its own host.
fn local(direction: GpuCopyDirection) -> GpuBandwidthResult {
    bandwidth("local-chassis", &config("local", "gpu0", direction))
}

/// The lender's gpu0, borrowed by Device Lending in `scenario`.
fn borrowed(scenario: &str, direction: GpuCopyDirection) -> GpuBandwidthResult {
    bandwidth(scenario, &config("borrower", "lender:gpu0", direction))
}

/// Prints the medians (what the comments below quote).
fn show(what: &str, r: &GpuBandwidthResult) {
    let figures: Vec<String> = r
        .samples
        .iter()
        .map(|s| {
            format!(
                "{} B {:.3} GB/s ({:.1} ns)",
                s.size_bytes,
                s.median_bytes_per_s / 1e9,
                s.median_ns
            )
        })
        .collect();
    eprintln!("{what} {}: {}", r.direction.name(), figures.join(", "));
}

/// How much lower `b` is than `a`, as a fraction of `a`.
fn loss(a: &DmaSample, b: &DmaSample) -> f64 {
    (a.median_bytes_per_s - b.median_bytes_per_s) / a.median_bytes_per_s
}

fn assert_grows_with_size(r: &GpuBandwidthResult) {
    let sizes: Vec<u64> = r.samples.iter().map(|s| s.size_bytes).collect();
    assert_eq!(sizes, SIZES, "one sample per size, in order");
    for pair in r.samples.windows(2) {
        assert!(
            pair[1].median_bytes_per_s > pair[0].median_bytes_per_s,
            "{} {}: {} B at {} B/s is not faster than {} B at {} B/s",
            r.device,
            r.direction.name(),
            pair[1].size_bytes,
            pair[1].median_bytes_per_s,
            pair[0].size_bytes,
            pair[0].median_bytes_per_s
        );
    }
}

// Paper V Fig. 22: the local and the borrowed P4000 overlap at every size. Measured here
// (copies 10, repeat 2; median GB/s at 4 KiB, 64 KiB, 1 MiB, 16 MiB):
//   h2d  local-chassis gpu0          1.293   8.943  13.321  13.723
//        back-to-back lender:gpu0    1.284   8.920  13.318  13.723   (0.75 % lower at most)
//   d2h  local-chassis gpu0          1.293   8.943  13.321  13.723
//        back-to-back lender:gpu0    1.283   8.919  13.318  13.723   (0.75 % lower at most)
// The borrowed GPU's path to the borrower's RAM (chassis, two NTB adapters) has the same
// number of chips as the local GPU's path to its host (chassis, the two HIB68 adapters),
// and the copies are timed on the GPU by events, as bandwidthTest times them.
#[test]
fn a_borrowed_gpu_copies_as_fast_as_a_local_one_at_every_size() {
    for direction in [
        GpuCopyDirection::HostToDevice,
        GpuCopyDirection::DeviceToHost,
    ] {
        let near = local(direction);
        let lent = borrowed("back-to-back", direction);
        show("local-chassis gpu0", &near);
        show("back-to-back lender:gpu0", &lent);
        for r in [&near, &lent] {
            assert_grows_with_size(r);
            assert_eq!(r.verified_bytes, LARGEST, "the largest copy was checked");
        }
        for (l, b) in near.samples.iter().zip(&lent.samples) {
            let gap = loss(l, b).abs();
            eprintln!("  {} B: {:.3} %", l.size_bytes, gap * 100.0);
            assert!(
                gap < 0.02,
                "{} at {} B: local {} B/s vs borrowed {} B/s",
                direction.name(),
                l.size_bytes,
                l.median_bytes_per_s,
                b.median_bytes_per_s
            );
        }
    }
}

// d2d (median GB/s at 4 KiB, 64 KiB, 1 MiB, 16 MiB): local-chassis gpu0 1.658, 24.954,
// 176.144, 238.061; back-to-back lender:gpu0 1.658, 24.803, 176.002, 238.056 — the 16 MiB
// copies run at the GDDR5's 243 GB/s less the copy start-up, 15 times a Gen3 x16 link.
// Ten more 16 MiB copies add 13 TLPs to a d2d run (ring entries fetched, the doorbell) and
// 983,053 to an h2d run (327,680 read requests of 512 B and their 655,360 completions).
#[test]
fn device_to_device_copies_stay_off_the_bus() {
    for (scenario, host, device) in [
        ("local-chassis", "local", "gpu0"),
        ("back-to-back", "borrower", "lender:gpu0"),
    ] {
        let r = bandwidth(
            scenario,
            &config(host, device, GpuCopyDirection::DeviceToDevice),
        );
        show(scenario, &r);
        assert_grows_with_size(&r);
        assert_eq!(r.verified_bytes, LARGEST);
        let top = r.samples.last().expect("samples").median_bytes_per_s;
        assert!(
            top > 10.0 * GEN3_X16_BYTES_PER_S,
            "{scenario}: {top} B/s is not far above the link's {GEN3_X16_BYTES_PER_S} B/s"
        );
    }
    // The TLPs a run delivers, for `copies` copies of the largest size.
    let tlps = |direction, copies| {
        let cluster = cluster("back-to-back");
        bench_gpu_bandwidth(
            &cluster,
            &GpuBandwidthConfig {
                sizes: vec![LARGEST],
                copies,
                repeat: 1,
                ..config("borrower", "lender:gpu0", direction)
            },
        )
        .expect("runs");
        cluster.machine.counters().tlp_arrivals
    };
    let d2d =
        tlps(GpuCopyDirection::DeviceToDevice, 20) - tlps(GpuCopyDirection::DeviceToDevice, 10);
    let h2d = tlps(GpuCopyDirection::HostToDevice, 20) - tlps(GpuCopyDirection::HostToDevice, 10);
    eprintln!("ten more 16 MiB copies: d2d {d2d} TLPs, h2d {h2d} TLPs");
    let data_tlps = 10 * LARGEST / 512;
    assert!(h2d >= data_tlps, "h2d moves its data on the bus: {h2d}");
    assert!(
        d2d < 100,
        "d2d moves none of its data on the bus: {d2d} TLPs"
    );
}

// Paper V Fig. 23: the cluster switch's extra hop lowers the bandwidth of small copies.
// Measured here, the borrowed lender:gpu0 (median GB/s at 4 KiB, 64 KiB, 1 MiB, 16 MiB):
//   h2d  back-to-back    1.284   8.920  13.318  13.723
//        cluster-switch  1.141   7.691  11.071  11.366   (11.1, 13.8, 16.9, 17.2 % lower)
//   d2h  back-to-back    1.283   8.919  13.318  13.723
//        cluster-switch  1.140   8.424  13.251  13.719   (11.1, 5.6, 0.5, 0.03 % lower)
// The hop (a PM8536 and one more link, each way) makes every round trip ~400 ns longer.
// A d2h copy's posted writes do not wait for it, but the copy engine ends a copy to the bus
// with a flushing read whose completion proves the writes landed: one longer round trip per
// copy whatever its size (3192.8 -> 3592.4 ns at 4 KiB, 1222561.2 -> 1222957.2 ns at
// 16 MiB), 11 % of a 4 KiB copy and nothing of a 16 MiB one. A 4 KiB h2d copy's eight
// 512-byte read requests all go out at once, so it too pays exactly one longer round trip
// (3190.8 -> 3590.4 ns). Larger h2d copies stay lower because the GPU keeps at most 32 reads
// open (it has no [devices.*] entry and inherits [devices.default] max_outstanding_reads):
// 32 x 512 B per round trip keeps up with the link back-to-back but not across the switch,
// where 16 KiB / 11.366 GB/s implies a ~1.44 us round trip. Fig. 23 shows the loss at small
// sizes only; with a calibration giving the GPU 256 outstanding reads, h2d across the switch
// reaches 13.719 GB/s at 16 MiB (against 13.723) and is still 11 % lower at 4 KiB. The
// assertions below hold either way.
#[test]
fn the_cluster_switch_hop_lowers_small_copies_by_one_round_trip_each() {
    let mut extra_ns = Vec::new();
    for direction in [
        GpuCopyDirection::HostToDevice,
        GpuCopyDirection::DeviceToHost,
    ] {
        let direct = borrowed("back-to-back", direction);
        let switched = borrowed("cluster-switch", direction);
        show("back-to-back", &direct);
        show("cluster-switch", &switched);
        assert_grows_with_size(&switched);
        assert_eq!(switched.verified_bytes, LARGEST);
        let pairs = || direct.samples.iter().zip(&switched.samples);
        let losses: Vec<f64> = pairs().map(|(d, s)| loss(d, s)).collect();
        let extra: Vec<f64> = pairs().map(|(d, s)| s.median_ns - d.median_ns).collect();
        eprintln!(
            "  {} lower by {losses:.4?}, {extra:.1?} ns more per copy",
            direction.name()
        );
        assert!(
            losses.iter().all(|&l| l > 0.0),
            "{}: the extra hop costs something at every size: {losses:?}",
            direction.name()
        );
        assert!(
            losses[0] > 0.05,
            "{}: 4 KiB copies lose {}",
            direction.name(),
            losses[0]
        );
        if direction == GpuCopyDirection::DeviceToHost {
            // One round trip per copy, whatever its size: the loss shrinks to nothing.
            for pair in losses.windows(2) {
                assert!(pair[1] < pair[0], "d2h: {losses:?}");
            }
            assert!(losses[3] < 0.001, "d2h at 16 MiB: {losses:?}");
            // From 64 KiB on, each copy pays one longer round trip (its flushing read). At
            // 4 KiB the timed window also holds the channel's ring fetches (one DMA read of the
            // entries PUT has published so far, from the borrower's memory), and how many there
            // are depends on how the CPU's PUT writes interleave with copies this short, so the
            // small-size extra is not one round trip exactly (311 ns against 396 ns at 16 MiB
            // with the typical chip latencies; 400 against 396 with the worst-case ones).
            let (lo, hi) = extra[1..]
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &e| (lo.min(e), hi.max(e)));
            assert!(hi < 1.25 * lo, "d2h: {extra:?} ns more per copy");
        }
        extra_ns.push(extra[0]);
    }
    // At 4 KiB a read copy and a write copy both pay the one longer round trip.
    assert!(
        (extra_ns[0] - extra_ns[1]).abs() < 1.0,
        "4 KiB: h2d {} ns, d2h {} ns more per copy",
        extra_ns[0],
        extra_ns[1]
    );
}

#[test]
fn bench_gpu_bandwidth_is_deterministic_to_the_byte() {
    let run = || {
        serde_json::to_string(&borrowed("back-to-back", GpuCopyDirection::HostToDevice))
            .expect("json")
    };
    assert_eq!(run(), run());
}

#[test]
fn bench_gpu_bandwidth_refuses_zero_counts_devices_that_are_not_gpus_and_sizes_beyond_memory() {
    let cluster = cluster("local-chassis");
    let h2d = config("local", "gpu0", GpuCopyDirection::HostToDevice);
    let err = bench_gpu_bandwidth(
        &cluster,
        &GpuBandwidthConfig {
            copies: 0,
            ..h2d.clone()
        },
    )
    .expect_err("no copies");
    assert!(
        matches!(
            &err,
            GpuWorkloadError::BadParameter(BadParameter::Count {
                option: "--copies",
                value: 0,
                ..
            })
        ),
        "{err}"
    );
    let err = bench_gpu_bandwidth(
        &cluster,
        &GpuBandwidthConfig {
            repeat: 0,
            ..h2d.clone()
        },
    )
    .expect_err("no samples");
    assert!(
        matches!(
            &err,
            GpuWorkloadError::BadParameter(BadParameter::Count {
                option: "--repeat",
                value: 0,
                ..
            })
        ),
        "{err}"
    );
    for (device, kind) in [("nvme0", "nvme"), ("dma0", "dma")] {
        let err = bench_gpu_bandwidth(
            &cluster,
            &config("local", device, GpuCopyDirection::HostToDevice),
        )
        .expect_err("not a GPU");
        assert!(
            matches!(&err, GpuWorkloadError::NotAGpu { device: d, kind: k } if d == device && k == kind),
            "{err}"
        );
    }
    // gpu0 has 8 GiB of memory (the default); a d2d copy needs twice its size.
    let err = bench_gpu_bandwidth(
        &cluster,
        &GpuBandwidthConfig {
            sizes: vec![4096, 9 << 30],
            ..h2d.clone()
        },
    )
    .expect_err("9 GiB does not fit 8 GiB");
    assert!(
        matches!(&err, GpuWorkloadError::BadSize { size, .. } if *size == 9 << 30),
        "{err}"
    );
    let err = bench_gpu_bandwidth(
        &cluster,
        &GpuBandwidthConfig {
            sizes: vec![5 << 30],
            ..config("local", "gpu0", GpuCopyDirection::DeviceToDevice)
        },
    )
    .expect_err("two 5 GiB buffers do not fit 8 GiB");
    assert!(
        matches!(&err, GpuWorkloadError::BadSize { size, why: GpuSizeLimit::DeviceMemory { twice: true, .. } } if *size == 5 << 30),
        "{err}"
    );
    let err = bench_gpu_bandwidth(
        &cluster,
        &GpuBandwidthConfig {
            sizes: vec![4096, 0],
            ..h2d.clone()
        },
    )
    .expect_err("zero bytes");
    assert!(
        matches!(
            err,
            GpuWorkloadError::BadSize {
                size: 0,
                why: GpuSizeLimit::Empty
            }
        ),
        "{err}"
    );
    // Nothing was left half-open by the refusals.
    let r = bench_gpu_bandwidth(
        &cluster,
        &GpuBandwidthConfig {
            sizes: vec![4096],
            ..h2d
        },
    )
    .expect("runs after the refusals");
    assert_eq!(r.verified_bytes, 4096);
}

fn pingpong(counters: CounterPlace) -> GpuPingPongResult {
    gpu_pingpong(
        &cluster("back-to-back"),
        &GpuPingPongConfig {
            host: "borrower".into(),
            a: "lender:gpu0".into(),
            b: "lender:gpu1".into(),
            iterations: 20,
            counters,
        },
    )
    .expect("ping-pong runs")
}

// A borrowed pair (back-to-back, both GPUs in the lender's chassis), one-way p50: counters in
// the GPUs' memories 187.162 ns (each store crosses the chassis switch, each poll reads the
// GPU's own memory); counters in the borrower's RAM 1583.108 ns (each store crosses both
// NTB adapters to the borrower, and each poll is a read on the bus over the same path and
// back, so a store is seen only by the first poll that starts after it lands).
#[test]
fn counters_in_host_ram_make_a_borrowed_pair_ping_pong_slower() {
    let gpu = pingpong(CounterPlace::Gpu);
    let host = pingpong(CounterPlace::Host);
    eprintln!(
        "one-way p50: counters in GPU memory {} ns, in host RAM {} ns",
        gpu.one_way_ns.p50, host.one_way_ns.p50
    );
    assert_eq!((gpu.iterations, host.iterations), (20, 20));
    assert_eq!(host.counters, CounterPlace::Host);
    assert_eq!(gpu.path_a_to_b, ["lender.chassis", "lender.gpu1"]);
    for path in [&host.path_a_to_b, &host.path_b_to_a] {
        assert_eq!(
            path.last().map(String::as_str),
            Some("borrower"),
            "the counters are in the borrower's RAM: {path:?}"
        );
        assert!(path.iter().any(|n| n == "borrower.ntb0"), "{path:?}");
    }
    assert!(host.one_way_ns.min > 0.0);
    assert!(
        host.one_way_ns.p50 > 2.0 * gpu.one_way_ns.p50,
        "host RAM {} ns vs GPU memory {} ns",
        host.one_way_ns.p50,
        gpu.one_way_ns.p50
    );
    let again = serde_json::to_string(&pingpong(CounterPlace::Host)).expect("json");
    assert_eq!(
        serde_json::to_string(&host).expect("json"),
        again,
        "the same run twice"
    );
}

/// The GPU runtime and its workloads run unchanged inside VMs: `lender:gpu0` passed through
/// to `borrower/vm0` by MDEV measures exactly what a bare-metal borrower measures on the same
/// data path (both IOMMUs on: the lender IOMMU's read splitting shows in both), and `gpu0`
/// passed through to `lender/vm0` by VFIO what the lender measures, once the guest's own CPU
/// work costs what the host's does ([vm] cpu_overhead_fraction = 0). With the default, the
/// guests' copies are as long or longer by less than that fraction (only the runtime's host
/// work is the guest's: most of a 4 KiB copy, none that matters of 16 MiB). Bytes are
/// verified inside the guest each time.
#[test]
fn gpus_passed_through_to_vms_measure_what_bare_metal_measures_on_the_same_path() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios/vm-gpus-b2b.toml"
    );
    let default = Calibration::default_embedded().without_variation();
    let mut bare_cpu = default.clone();
    bare_cpu.vm.cpu_overhead_fraction.value = 0.0;
    for direction in [
        GpuCopyDirection::HostToDevice,
        GpuCopyDirection::DeviceToHost,
    ] {
        let run = |cal: &Calibration, host: &str, device: &str| {
            let cluster = Cluster::new(scenario, cal).expect("scenario loads");
            let r = bench_gpu_bandwidth(&cluster, &config(host, device, direction))
                .expect("bandwidthTest runs");
            assert_eq!(r.verified_bytes, LARGEST, "{direction:?}");
            r.samples
        };
        let bare = run(&default, "borrower", "lender:gpu0");
        let native = run(&default, "lender", "gpu0");
        assert_eq!(
            run(&bare_cpu, "borrower/vm0", "lender:gpu0"),
            bare,
            "{direction:?}: MDEV = bare metal"
        );
        assert_eq!(
            run(&bare_cpu, "lender/vm0", "gpu0"),
            native,
            "{direction:?}: VFIO = native"
        );
        for (guest, host) in [
            (run(&default, "borrower/vm0", "lender:gpu0"), &bare),
            (run(&default, "lender/vm0", "gpu0"), &native),
        ] {
            for (g, h) in guest.iter().zip(host.iter()) {
                let longer = g.median_ns / h.median_ns - 1.0;
                assert!(
                    (0.0..default.vm.cpu_overhead_fraction.value).contains(&longer),
                    "{direction:?} {} B: a guest's copy {:.2} % longer",
                    g.size_bytes,
                    longer * 100.0
                );
            }
            let (g, h) = (guest.last().expect("16 MiB"), host.last().expect("16 MiB"));
            assert!(
                g.median_ns / h.median_ns - 1.0 < 1e-5,
                "{direction:?} at 16 MiB"
            );
        }
    }
}

// Paper V Fig. 31's baseline: the K40c (`gpu2`, profile `k40c`) borrowed back to back copies
// at its copy engine's own rate, [gpu.k40c] copy_bus_bandwidth = 10.5 GB/s (a local K40's
// bandwidthTest figure), below what the path carries: the same GPU with no limit of its own
// copies as fast as the P4000 (13.7 GB/s at 16 MiB). Measured here (copies 10, repeat 2,
// 16 MiB): 10.49 GB/s both ways with the limit.
#[test]
fn the_k40c_copies_at_its_engines_own_rate_below_what_the_path_carries() {
    let with_limit = Calibration::default_embedded().without_variation();
    let mut without_limit = with_limit.clone();
    without_limit
        .gpu
        .get_mut("k40c")
        .expect("the k40c profile")
        .copy_bus_bandwidth
        .value = 0.0;
    let largest = |cal: &Calibration, direction| {
        let cluster = Cluster::new("back-to-back", cal).expect("scenario loads");
        let r = bench_gpu_bandwidth(&cluster, &config("borrower", "lender:gpu2", direction))
            .expect("bandwidthTest runs");
        show("back-to-back lender:gpu2", &r);
        r.samples.last().expect("a sample").median_bytes_per_s
    };
    for direction in [
        GpuCopyDirection::HostToDevice,
        GpuCopyDirection::DeviceToHost,
    ] {
        let limited = largest(&with_limit, direction);
        let free = largest(&without_limit, direction);
        assert!(
            (10.3e9..=10.5e9).contains(&limited),
            "{} with the K40c's limit: {limited} B/s",
            direction.name()
        );
        assert!(
            free > 13e9,
            "{} with no limit: {free} B/s",
            direction.name()
        );
    }
}
