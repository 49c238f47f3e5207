//! `smartio app video`: multi-stream video analysis on a pool of GPUs, local and borrowed
//! (Paper II). Prints the pool's table (profile and calibrated time per frame, frames, busy
//! fraction), the streams' achieved rates and latency, and notes saying where the figures
//! come from and where the time went; `--json` prints the whole result.

use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::value_error::ValueError;
use smartio_apps::video::{
    video, OutOfReach, VideoConfig, VideoResult, MAX_FPS, MAX_FRAMES, MAX_STREAMS, MIN_FRAMES,
};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;

/// `smartio app video` arguments.
#[derive(clap::Args, Debug)]
pub struct VideoArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long, default_value = "video-lending")]
    pub scenario: String,
    /// The host receiving and decoding the streams (default: the first host with a GPU).
    #[arg(long)]
    pub host: Option<String>,
    /// The GPU pool, comma-separated: the host's own (gpu0) or borrowed (lender:gpu0); ties
    /// of the scheduler go to the one listed first (default: the host's GPUs, then every
    /// other host's, borrowed, leaving out any that cannot reach the host's memory).
    #[arg(long, value_delimiter = ',', value_name = "GPU,...", value_parser = gpu_name)]
    pub gpus: Vec<String>,
    /// Live full-HD streams.
    #[arg(long, default_value = "8", value_name = "N", value_parser = streams)]
    pub streams: u32,
    /// Frames per second of each stream.
    #[arg(long, default_value = "30", value_name = "N", value_parser = fps)]
    pub fps: u32,
    /// Frames of each stream.
    #[arg(long, default_value = "60", value_name = "N", value_parser = frames)]
    pub frames: u32,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn whole_u32(text: &str, min: u32, max: u32, why: &'static str) -> Result<u32, ValueError> {
    crate::values::whole_u32(text, u64::from(min), u64::from(max), why)
}

/// `--streams`.
pub fn streams(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        1,
        MAX_STREAMS,
        "Paper II ran up to 16; every frame moves 3 MB through the timed engine",
    )
}

/// `--fps`.
pub fn fps(text: &str) -> Result<u32, ValueError> {
    whole_u32(text, 1, MAX_FPS, "frames per second of a live 1080p camera")
}

/// `--frames`.
pub fn frames(text: &str) -> Result<u32, ValueError> {
    whole_u32(
        text,
        MIN_FRAMES,
        MAX_FRAMES,
        "a stream's rate is measured between its first and last frame",
    )
}

/// One name of `--gpus`: `gpu`, `lender:gpu` (or a virtual function's name), by the one
/// parser of device names.
fn gpu_name(text: &str) -> Result<String, ValueError> {
    crate::values::device(text.trim())
}

/// The host and pool a run uses when the options leave them out: the first host with a
/// GPU, its GPUs, then every other host's GPUs borrowed (`host:gpu`), in scenario order.
pub(crate) fn default_pool(
    cluster: &Cluster,
    host: Option<&str>,
) -> Result<(String, Vec<String>), CliError> {
    let f = cluster.machine.fabric();
    let gpu_hosts: Vec<&str> = f
        .endpoints()
        .iter()
        .filter(|e| e.kind == "gpu")
        .map(|e| f.host(e.host).name.as_str())
        .collect();
    let host = match host {
        Some(h) => h.to_string(),
        None => gpu_hosts
            .first()
            .map(|h| h.to_string())
            .ok_or_else(|| Usage::NoGpu {
                scenario: f.name.clone(),
            })?,
    };
    let home = host.split('/').next().unwrap_or(&host).to_string();
    let mut own = Vec::new();
    let mut borrowed = Vec::new();
    for e in f.endpoints().iter().filter(|e| e.kind == "gpu") {
        let owner = &f.host(e.host).name;
        if *owner == home {
            own.push(e.name.clone());
        } else {
            borrowed.push(format!("{owner}:{}", e.name));
        }
    }
    own.extend(borrowed);
    Ok((host, own))
}

/// Runs `smartio app video`.
pub fn run(calibration: &Calibration, args: VideoArgs) -> Result<(), CliError> {
    let cluster = Cluster::seeded(&args.scenario, calibration, args.seed)?;
    let (host, pool) = default_pool(&cluster, args.host.as_deref())?;
    // The default pool takes only GPUs the host can reach: one that cannot address the
    // host's memory (a 40-bit GPU borrowed through a high NTB window) is left out and named.
    // GPUs the user names are used or refused.
    let (gpus, out_of_reach) = if args.gpus.is_empty() {
        (pool, OutOfReach::LeaveOut)
    } else {
        (args.gpus, OutOfReach::Refuse)
    };
    let config = VideoConfig {
        host,
        gpus,
        streams: args.streams,
        fps: args.fps,
        frames: args.frames,
        out_of_reach,
        spoil: None,
    };
    let result = video(&cluster, &config)?;
    if args.json {
        return print_json(&result);
    }
    print!("{}", render::wrapped(&headline(&result), "", "  "));
    println!("{}", pool_table(&result));
    for line in summary(&result) {
        print!("{}", render::wrapped(&line, "", "  "));
    }
    for note in notes(&result, calibration) {
        print!("{}", render::wrapped(&note, "- ", "  "));
    }
    Ok(())
}

/// What ran, in one line.
fn headline(r: &VideoResult) -> String {
    format!(
        "video analysis on {}: {} full-HD streams at {} fps into {} ({} cores decoding), {} \
         frames each ({} in all), features extracted on {}",
        r.scenario,
        r.streams,
        r.fps,
        r.host,
        r.cores,
        r.frames,
        u64::from(r.streams) * u64::from(r.frames),
        r.gpus
            .iter()
            .map(|g| g.device.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The pool: one row per GPU.
fn pool_table(r: &VideoResult) -> comfy_table::Table {
    let mut t = render::table();
    t.set_header(vec![
        "GPU",
        "where",
        "profile",
        "ms/frame",
        "frames",
        "busy",
        "copy in ms",
        "turn ms",
    ]);
    for g in &r.gpus {
        t.add_row(vec![
            g.device.clone(),
            if g.borrowed { "borrowed" } else { "local" }.to_string(),
            g.profile.clone(),
            format!("{:.3}", g.frame_ms),
            g.frames.to_string(),
            format!("{:.1} %", g.busy * 100.0),
            format!("{:.2}", g.copy_in_ms),
            format!("{:.2}", g.turn_ms),
        ]);
    }
    t
}

/// The streams' rates, the latency and the verification.
fn summary(r: &VideoResult) -> Vec<String> {
    let max = r.stream_fps.iter().copied().fold(0.0, f64::max);
    vec![
        format!(
            "rate: {:.2} fps in all ({} asked); per stream {:.2} to {:.2} fps (asked {})",
            r.total_fps,
            r.streams * r.fps,
            r.min_stream_fps,
            max,
            r.fps
        ),
        format!(
            "latency, capture to features verified: mean {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            r.latency_ns.mean / 1e6,
            r.latency_ns.p99 / 1e6,
            r.latency_ns.max / 1e6
        ),
        format!(
            "verified: {} of {} frames (the digest a GPU computed over the frame in its memory \
             matched the decoded frame's)",
            r.frames_verified,
            u64::from(r.streams) * u64::from(r.frames)
        ),
    ]
}

/// Frames per second the pool computes by its profiles' figures alone.
pub(crate) fn pool_capacity(r: &VideoResult) -> f64 {
    r.gpus.iter().map(|g| 1e3 / g.frame_ms).sum()
}

/// Where the figures come from and where the time went.
pub(crate) fn notes(r: &VideoResult, calibration: &Calibration) -> Vec<String> {
    let figures = r
        .gpus
        .iter()
        .map(|g| format!("{} ({}) {:.3} ms", g.device, g.profile, g.frame_ms))
        .collect::<Vec<_>>()
        .join(", ");
    let s = &r.stages;
    let asked = f64::from(r.streams * r.fps);
    let capacity = pool_capacity(r);
    let mut notes = vec![
        format!(
            "the compute per frame is the calibration's, not the model's: each GPU profile's \
             eir_frame_ns (derived from Paper II's figures) — {figures}; and the CPU's decode, \
             {:.3} ms per frame on one core ([video] decode_frame_ns, an estimate for \
             libavcodec). \
             Everything else — decodes queueing for cores, copies in and out over each GPU's \
             path, kernels waiting their turn — ran on the emulated machine",
            r.decode_ms
        ),
        format!(
            "where a frame's time went, on average: {:.2} ms queued (for a buffer on its GPU, \
             then a core), {:.2} ms decoding, {:.2} ms copying in (and launching), {:.2} ms \
             waiting for the GPU's other frame, {:.2} ms in the kernel, {:.3} ms back (the \
             copy out, the synchronize, the check)",
            s.queued_ms, s.decode_ms, s.copy_in_ms, s.turn_ms, s.kernel_ms, s.back_ms
        ),
    ];
    if r.min_stream_fps < 0.99 * f64::from(r.fps) {
        notes.push(format!(
            "the GPUs fall behind: {asked:.0} frames/s asked against {capacity:.1} frames/s the \
             pool computes by its profiles; no frame is dropped, so frames queue and each \
             stream gets about {:.1} fps",
            r.total_fps / f64::from(r.streams)
        ));
    } else {
        notes.push(format!(
            "the pool keeps up: {asked:.0} frames/s asked, {capacity:.1} frames/s it computes \
             by its profiles"
        ));
    }
    for g in r.gpus.iter().filter(|g| g.borrowed) {
        let lender = g.device.split(':').next().unwrap_or(&g.device);
        // The path starts at the lender's root complex when the GPU and the NTB adapter sit on
        // root ports of their own: its reads then go peer to peer through the root.
        let through_root = if g.path.first().is_some_and(|n| n == lender) {
            format!(
                " ({lender}'s root complex forwards its reads peer to peer to the NTB adapter, \
                 re-emitting each as {:.0}-byte requests: [root_complex] \
                 forwarded_read_request_bytes)",
                calibration.root_complex.forwarded_read_request_bytes.value
            )
        } else {
            String::new()
        };
        notes.push(format!(
            "{} is borrowed for the run by Device Lending: its copies to and from {}'s memory \
             pass {}; a frame's copy in takes it {:.2} ms{through_root}, {}",
            g.device,
            r.host,
            g.path.join(" → "),
            g.copy_in_ms,
            if g.copy_in_ms < g.frame_ms {
                "less than its kernel's time, so with two frames in flight per GPU it overlaps \
                 the kernel of the other"
            } else {
                "more than its kernel's time: the copies limit it"
            }
        ));
    }
    if !r.left_out.is_empty() {
        notes.push(format!(
            "left out of the default pool, which takes only GPUs {} can reach: {}",
            r.host,
            r.left_out
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outside_their_ranges_name_the_range_and_why() {
        assert_eq!(streams("16"), Ok(16));
        let e = streams("65").expect_err("too many").to_string();
        assert!(e.contains("1..=64") && e.contains("Paper II"), "{e}");
        assert!(fps("0").expect_err("zero").to_string().contains("1..=120"));
        let e = frames("1").expect_err("one frame").to_string();
        assert!(
            e.contains("2..=10000") && e.contains("first and last"),
            "{e}"
        );
        assert_eq!(gpu_name(" machine-b:gpu0 "), Ok("machine-b:gpu0".into()));
        assert!(gpu_name("machine-b:").is_err());
        assert!(gpu_name("").is_err());
    }
}
