//! The GPU commands: `bench gpu-bandwidth`, `bench gpu-p2p`, and the GPU form of `bench
//! p2p` (which runs on the GPU model when both devices are GPUs, as the papers' programs
//! did); `pingpong`'s GPU form is in [`crate::pingpong`].

use crate::args::{Counters, GpuDirection};
use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use smartio_cluster::Cluster;
use smartio_workloads::{
    bench_gpu_bandwidth, bench_gpu_p2p, CounterPlace, GpuBandwidthConfig, GpuCopyDirection,
    GpuP2pConfig, P2pDirection,
};

/// `bench gpu-bandwidth`.
pub fn bandwidth(
    cluster: &Cluster,
    config: GpuBandwidthConfig,
    json: bool,
) -> Result<(), CliError> {
    let result = bench_gpu_bandwidth(cluster, &config)?;
    if json {
        return print_json(&result);
    }
    let what = match result.direction {
        GpuCopyDirection::HostToDevice => "pinned host RAM -> GPU memory",
        GpuCopyDirection::DeviceToHost => "GPU memory -> pinned host RAM",
        GpuCopyDirection::DeviceToDevice => "GPU memory -> GPU memory",
    };
    print!(
        "{}",
        render::wrapped(
            &format!(
                "GPU bandwidth on {} ({} from {}): {what}, copies queued per sample between \
                 two GPU events: {}, samples per size: {}; {} bytes verified",
                result.scenario,
                result.device,
                result.host,
                result.copies,
                result.repeat,
                result.verified_bytes
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&result.samples));
    Ok(())
}

/// `bench gpu-p2p`, and `bench p2p` between two GPUs.
pub fn p2p(
    cluster: &Cluster,
    config: GpuP2pConfig,
    json: bool,
    full_json: bool,
) -> Result<(), CliError> {
    let result = bench_gpu_p2p(cluster, &config)?;
    if json {
        // `bench p2p --json` keeps its shape (the samples); `bench gpu-p2p` prints everything.
        return if full_json {
            print_json(&result)
        } else {
            print_json(&result.samples)
        };
    }
    let (from, to) = match result.direction {
        P2pDirection::Write => (&result.source, &result.target),
        P2pDirection::Read => (&result.target, &result.source),
    };
    print!(
        "{}",
        render::wrapped(
            &format!(
                "GPU peer-to-peer {} on {}: {from} memory -> {to} memory by {}'s copy engine, \
                 programmed from {}; each copy timed by GPU events, a dummy kernel between \
                 copies, copies per size: {}; {} bytes verified",
                if matches!(result.direction, P2pDirection::Write) {
                    "writes"
                } else {
                    "reads"
                },
                result.scenario,
                result.source,
                result.host,
                result.repeat,
                result.verified_bytes
            ),
            "",
            "  "
        )
    );
    println!("{}", render::dma_table(&result.samples));
    print!(
        "{}",
        render::wrapped(
            &format!(
                "path {} -> {} memory: {}",
                result.source,
                result.target,
                result.path.join(" -> ")
            ),
            "",
            "  "
        )
    );
    Ok(())
}

/// The workload's direction for `--direction`.
pub fn copy_direction(d: GpuDirection) -> GpuCopyDirection {
    match d {
        GpuDirection::H2d => GpuCopyDirection::HostToDevice,
        GpuDirection::D2h => GpuCopyDirection::DeviceToHost,
        GpuDirection::D2d => GpuCopyDirection::DeviceToDevice,
    }
}

/// The workload's counter place for `--counters` (GPU memory unless told).
pub fn counter_place(c: Option<Counters>) -> CounterPlace {
    match c {
        Some(Counters::Host) => CounterPlace::Host,
        Some(Counters::Gpu) | None => CounterPlace::Gpu,
    }
}
