//! `bench dma --adapter` on the timed engine: the NTB adapter's own DMA engine moving RAM to
//! remote RAM and back (Paper I Fig. 4a) — every byte lands, the figures are the same for
//! the same seed and plausible for the link, the engine never has more than its 64 reads in
//! flight, and a host without an adapter or a peer is refused.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_workloads::{
    bench_adapter_dma, dma_queue_transfer, AdapterDmaBenchConfig, AdapterDmaBenchError,
    AdapterDmaBenchRun, DmaDirection, DmaQueueTransfer,
};

const MIB: u64 = 1 << 20;

fn cluster(scenario: &str, seed: u64) -> Cluster {
    let options = ClusterOptions {
        seed,
        ..ClusterOptions::default()
    };
    Cluster::with_options(scenario, &Calibration::default_embedded(), &options).expect("loads")
}

fn config(host: &str, direction: DmaDirection, sizes: &[u64]) -> AdapterDmaBenchConfig {
    AdapterDmaBenchConfig {
        host: host.into(),
        direction,
        sizes: sizes.to_vec(),
        repeat: 2,
    }
}

fn run(
    c: &Cluster,
    host: &str,
    direction: DmaDirection,
    sizes: &[u64],
) -> Result<AdapterDmaBenchRun, AdapterDmaBenchError> {
    bench_adapter_dma(c, &config(host, direction, sizes))
}

#[test]
fn the_adapter_pushes_and_pulls_between_the_two_rams_and_every_byte_lands() {
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let c = cluster("pxh810-back-to-back", 1);
        let r = run(&c, "machine-a", direction, &[1, 4096 + 3, MIB]).expect("runs");
        assert_eq!(
            (r.adapter.as_str(), r.peer.as_str()),
            ("machine-a.ntb0", "machine-b")
        );
        assert_eq!(
            r.verified_bytes, MIB,
            "the largest copy compared byte for byte"
        );
        assert_eq!(r.samples.len(), 3);
        // The other way round, from machine B's adapter.
        let back = run(&c, "machine-b", direction, &[64 << 10]).expect("runs");
        assert_eq!(back.peer, "machine-a");
    }
}

#[test]
fn the_bandwidth_figures_are_deterministic_and_plausible() {
    let sizes = [4096, 64 << 10, MIB, 4 * MIB];
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        let once = run(
            &cluster("pxh810-back-to-back", 7),
            "machine-a",
            direction,
            &sizes,
        )
        .expect("runs");
        let again = run(
            &cluster("pxh810-back-to-back", 7),
            "machine-a",
            direction,
            &sizes,
        )
        .expect("runs");
        assert_eq!(
            serde_json::to_string(&once).expect("json"),
            serde_json::to_string(&again).expect("json"),
            "same seed, same figures"
        );
        let rates: Vec<f64> = once.samples.iter().map(|s| s.median_bytes_per_s).collect();
        assert!(
            rates.windows(2).all(|w| w[0] < w[1]),
            "{direction:?}: larger transfers amortise the start: {rates:?}"
        );
        // Gen3 x8 carries 7.88 GB/s raw; with 128-byte payloads and 26 bytes per TLP less
        // than 128/154 of it. The plateau must be below that and not far below.
        let plateau = rates[3];
        assert!(
            (4.0e9..=7.88e9 * 128.0 / 154.0).contains(&plateau),
            "{direction:?}: {plateau}"
        );
    }
}

#[test]
fn the_engine_keeps_at_most_its_64_reads_in_flight_and_uses_them_all() {
    let c = cluster("pxh810-back-to-back", 1);
    run(&c, "machine-a", DmaDirection::Read, &[4 * MIB]).expect("runs");
    let (endpoint, engine) = {
        let f = c.machine.fabric();
        let host = f.host_by_name("machine-a").expect("host");
        let a = f.host_adapter(host, 0).expect("adapter");
        let ep = f.adapter(a).endpoint;
        (ep, c.adapter_dma(ep).expect("an engine on every adapter"))
    };
    let counters = engine.counters();
    assert_eq!(
        counters.peak_reads_in_flight, 64,
        "{endpoint:?}: {counters:?}"
    );
    assert_eq!(
        engine.config().read_request_bytes,
        512,
        "MRRS 512 (Paper I)"
    );
    // 4 MiB in 512-byte requests, twice, plus the fetches and the flushing reads.
    assert!(counters.reads >= 2 * 8192, "{counters:?}");
    assert_eq!(counters.bytes_done, 8 * MIB);
}

#[test]
fn the_scenarios_mps_of_128_bytes_is_in_force_and_elsewhere_the_calibrations() {
    let paper = cluster("pxh810-back-to-back", 1);
    assert_eq!(paper.calibration.pcie.max_payload_size.value, 128.0);
    assert_eq!(paper.calibration.pcie.completion_max_payload.value, 128.0);
    let timed = paper.timed().expect("the timed engine");
    assert_eq!(timed.timing().sizes.mps, 128);
    assert_eq!(timed.timing().sizes.completion_max, 128);
    let other = cluster("back-to-back", 1);
    let cal = Calibration::default_embedded();
    assert_eq!(
        other.calibration.pcie.max_payload_size,
        cal.pcie.max_payload_size
    );
    // The PXH830-class adapters of back-to-back carry it too (Gen3 x16, MPS 256).
    let r = run(&other, "borrower", DmaDirection::Write, &[MIB]).expect("runs");
    assert_eq!(r.peer, "lender");
}

#[test]
fn a_host_without_an_adapter_or_a_bad_count_is_refused() {
    let c = cluster("local-chassis", 1);
    assert_eq!(
        run(&c, "local", DmaDirection::Write, &[4096]),
        Err(AdapterDmaBenchError::NoAdapter {
            host: "local".into()
        })
    );
    let c = cluster("pxh810-back-to-back", 1);
    assert!(matches!(
        run(&c, "nobody", DmaDirection::Write, &[4096]),
        Err(AdapterDmaBenchError::UnknownHost(_))
    ));
    let err = run(&c, "machine-a", DmaDirection::Write, &[0]).expect_err("refused");
    assert!(err.to_string().contains("--sizes"), "{err}");
    let zero = AdapterDmaBenchConfig {
        repeat: 0,
        ..config("machine-a", DmaDirection::Write, &[4096])
    };
    assert!(bench_adapter_dma(&c, &zero)
        .expect_err("refused")
        .to_string()
        .contains("--repeat 0"));
}

#[test]
fn a_dma_queue_transfer_takes_what_bench_dma_adapter_reports_for_the_same_adapter_and_size() {
    for direction in [DmaDirection::Write, DmaDirection::Read] {
        for size in [4096, MIB, 8 * MIB] {
            let bench = bench_adapter_dma(
                &cluster("pxh810-back-to-back", 1),
                &AdapterDmaBenchConfig {
                    repeat: 1,
                    ..config("machine-a", direction, &[size])
                },
            )
            .expect("bench runs");
            // A program's transfer at page offsets into both segments, as dma.c makes it.
            let program = dma_queue_transfer(
                &cluster("pxh810-back-to-back", 1),
                &DmaQueueTransfer {
                    host: "machine-a".into(),
                    direction,
                    size,
                    local_offset: 4096,
                    remote_offset: 8192,
                },
            )
            .expect("program runs");
            assert_eq!(program.verified_bytes, size);
            let bench_s = bench.samples[0].median_ns * 1e-9;
            let ratio = program.seconds / bench_s;
            eprintln!(
                "{direction:?} {size} B: DMA queue {:.3} us, bench dma --adapter {:.3} us",
                program.seconds * 1e6,
                bench_s * 1e6
            );
            assert!(
                (ratio - 1.0).abs() < 0.005,
                "{direction:?} {size} B: program {} s vs bench {} s",
                program.seconds,
                bench_s
            );
        }
    }
}
