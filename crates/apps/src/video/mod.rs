//! Multi-stream video analysis on a pool of GPUs, local and borrowed (Paper II: EIR's polyp
//! detection on live full-HD colonoscopy streams; thesis Table 1 and Fig. 3).
//!
//! Host H receives `streams` live 1080p streams at `fps` frames per second; frame `k` of every
//! stream is captured at `k / fps` seconds (the streams are in phase). Each frame then goes
//! through, in order:
//!
//! 1. **Scheduling**, when it is captured: the scheduler gives it to the GPU that would
//!    finish it first — for each GPU, the later of "decoded now" (now + the decode time) and
//!    the moment the frames already given to that GPU are done by the scheduler's reckoning,
//!    plus the GPU's per-frame figure (its calibration profile's `eir_frame_ns`); ties go to
//!    the GPU listed first. The reckoning counts compute only (copies are short next to it).
//! 2. **Decoding** on one of H's CPU cores (`[video] decode_frame_ns`; at most `cores`
//!    decodes at once, the cores handed out first come, first served), straight into one of
//!    the chosen GPU's two pinned host buffers: a GPU holds at most two frames at a time,
//!    so its copy engine brings the next frame in while its kernel works on the current one.
//!    A frame whose GPU has both buffers taken waits, undecoded, in that GPU's queue.
//! 3. **On the GPU**, queued on the buffer's own stream: the copy in (H2D), the feature
//!    kernel (`frame`: it takes the GPU's ticket lock so the GPU's kernels run one at a
//!    time, digests the frame it finds in its memory, works the profile's figure, writes a
//!    64-byte feature vector), the copy back (D2H), a synchronize.
//! 4. **Checking** on the CPU: the feature vector must carry the digest of the frame's
//!    pattern — every frame is verified, and a run with a frame that is not fails with
//!    [`VideoError::Verify`].
//!
//! No frame is dropped: when the GPUs fall behind, frames queue and the rate each stream
//! achieves drops below `fps`. A stream's rate is how fast its frames come out: its frames
//! but one over the time from its first frame verified to its last. Everything runs on the
//! emulated machine (decodes are CPU time, copies cross the fabric, a borrowed GPU's copies
//! cross the NTBs); the two figures taken from outside are each GPU profile's
//! `eir_frame_ns`, which the calibration derives from Paper II, and the CPU's
//! `decode_frame_ns`.

mod frame;
mod pipeline;

pub use frame::FrameId;

use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_fabric::EndpointId;
use smartio_workloads::attach::{check_device_name, AttachError};
use smartio_workloads::booted::UnknownHost;
use smartio_workloads::gpu::{BadParameter, GpuWorkloadError};
use smartio_workloads::LatencySummary;
use thiserror::Error;

/// Most streams in one run: Paper II ran up to 16; 64 is four times that, a run's wall time
/// grows with every stream (each frame moves 3 MB through the timed engine).
pub const MAX_STREAMS: u32 = 64;
/// Highest frame rate a stream may ask for (1080p cameras deliver at most 120 frames/s).
pub const MAX_FPS: u32 = 120;
/// Fewest frames per stream: a stream's rate is measured between its first and last frame.
pub const MIN_FRAMES: u32 = 2;
/// Most frames per stream (over five minutes of video at 30 frames/s).
pub const MAX_FRAMES: u32 = 10_000;
/// Most frames in one run, all streams together (each costs a few milliseconds of wall
/// time: this is several minutes).
pub const MAX_TOTAL_FRAMES: u64 = 100_000;
/// Frames a GPU holds at a time (pinned buffers and streams per GPU).
pub const IN_FLIGHT_PER_GPU: usize = 2;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoConfig {
    /// The host receiving and decoding the streams.
    pub host: String,
    /// The GPU pool, in order (the scheduler's ties go to the earlier): devices of `host`
    /// (`gpu0`) or `lender:gpu`, borrowed for the run.
    pub gpus: Vec<String>,
    /// Live streams.
    pub streams: u32,
    /// Frames per second of each stream.
    pub fps: u32,
    /// Frames of each stream.
    pub frames: u32,
    /// What a GPU of the pool that cannot address the host's memory does to the run.
    pub out_of_reach: OutOfReach,
    /// For tests of the verification: this frame's bytes are spoiled in the GPU's memory
    /// after its copy in and before the kernel reads them (the run must then fail with
    /// [`VideoError::Verify`]). `None` in every real run.
    pub spoil: Option<FrameId>,
}

/// What a GPU of the pool that cannot address the host's memory where it appears to it (a
/// GPU with 40 address bits borrowed through an NTB window above 1 TiB) does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutOfReach {
    /// The run is refused ([`VideoError::OutOfReach`]): the pool was named by the user.
    #[default]
    Refuse,
    /// The GPU is left out of the pool, and named in [`VideoResult::left_out`]: the pool is
    /// a default one, which must take only GPUs the host can reach.
    LeaveOut,
}

/// A GPU left out of a default pool because it cannot reach the host's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// As the pool named it (`machine-a:gpu1`).
    pub device: String,
    /// The address bits it puts on the bus.
    pub bits: u8,
    /// Where the host's pinned memory appears to it.
    pub addr: u64,
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (it puts {} address bits on the bus; the host's memory appears to it at {:#x})",
            self.device, self.bits, self.addr
        )
    }
}

impl VideoConfig {
    /// Paper II's demo on `video-lending`: machine-a's three GPUs and machine-b's K40c, 8
    /// streams at 30 frames/s (one more than the local GPUs keep up with), 60 frames each.
    pub fn paper_ii() -> VideoConfig {
        VideoConfig {
            host: "machine-a".into(),
            gpus: ["gpu0", "gpu1", "gpu2", "machine-b:gpu0"]
                .map(String::from)
                .to_vec(),
            streams: 8,
            fps: 30,
            frames: 60,
            out_of_reach: OutOfReach::Refuse,
            spoil: None,
        }
    }
}

/// Why the video workload could not run or did not verify. None is fatal to the emulator:
/// each is a bad request, or an error of the emulated software.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VideoError {
    /// `streams` out of range.
    #[error(
        "--streams {value}: allowed 1 to {MAX_STREAMS} (Paper II ran up to 16; every stream \
         adds wall time, each frame moving 3 MB through the timed engine)"
    )]
    Streams {
        /// As given.
        value: u32,
    },
    /// `fps` out of range.
    #[error("--fps {value}: allowed 1 to {MAX_FPS} frames per second (a live 1080p camera)")]
    Fps {
        /// As given.
        value: u32,
    },
    /// `frames` out of range.
    #[error(
        "--frames {value}: allowed {MIN_FRAMES} to {MAX_FRAMES} per stream (a stream's rate \
         is measured between its first and its last frame)"
    )]
    Frames {
        /// As given.
        value: u32,
    },
    /// Too many frames in all.
    #[error(
        "--streams {streams} × --frames {frames} = {total} frames: at most {MAX_TOTAL_FRAMES} \
         in one run (each costs milliseconds of wall time); use fewer streams or frames"
    )]
    TooManyFrames {
        /// Streams.
        streams: u32,
        /// Frames per stream.
        frames: u32,
        /// Their product.
        total: u64,
    },
    /// The pool is empty.
    #[error("--gpus: give at least one GPU (gpu0, or lender:gpu0 to borrow one)")]
    NoGpus,
    /// A GPU named that does not exist.
    #[error("--gpus {device}: {why}")]
    UnknownGpu {
        /// As given.
        device: String,
        /// What is missing, and what there is.
        why: String,
    },
    /// A device named that is not a GPU.
    #[error("--gpus {device}: a {kind:?} device, not a GPU (kind \"gpu\")")]
    NotAGpu {
        /// As given.
        device: String,
        /// Its kind.
        kind: String,
    },
    /// The same GPU named twice.
    #[error("--gpus: {first} and {second} are the same GPU; list each GPU once")]
    SameGpu {
        /// The first naming.
        first: String,
        /// The second.
        second: String,
    },
    /// A GPU that cannot address the host's memory where it appears to it (a borrowed GPU
    /// with few address bits, the host's memory behind a high NTB window).
    #[error(
        "--gpus {device}: the GPU puts {bits} address bits on the bus, and {host}'s memory \
         appears to it at {addr:#x} (through the NTB adapters), beyond them; it could not \
         fetch its commands or copy a frame (leave it out, or borrow a GPU with more address \
         bits)"
    )]
    OutOfReach {
        /// As given.
        device: String,
        /// The GPU's address bits.
        bits: u8,
        /// The host running the streams.
        host: String,
        /// Where a pinned host buffer appears to the GPU.
        addr: u64,
    },
    /// Every GPU of a default pool was left out: none can reach the host's memory.
    #[error(
        "no GPU of the default pool can reach {host}'s memory: {}; name GPUs with --gpus (the \
         host's own, or borrowed ones with more address bits)",
        left_out.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    NoGpuInReach {
        /// The host running the streams.
        host: String,
        /// The GPUs left out, and why.
        left_out: Vec<LeftOut>,
    },
    /// Frames whose features did not match their bytes.
    #[error(
        "{failed} of {frames} frames failed verification (first: {first}): the bytes a GPU \
         digested are not the frame that was decoded"
    )]
    Verify {
        /// Frames that failed.
        failed: u64,
        /// Frames in the run.
        frames: u64,
        /// The first failure in virtual time.
        first: String,
    },
    /// The host is unknown, or attaching, the GPU runtime or a copy failed (boxed: the GPU
    /// workloads' error is large, and this one travels through every step of a run).
    #[error(transparent)]
    Run(Box<GpuWorkloadError>),
}

impl From<GpuWorkloadError> for VideoError {
    fn from(e: GpuWorkloadError) -> Self {
        VideoError::Run(Box::new(e))
    }
}

impl From<AttachError> for VideoError {
    fn from(e: AttachError) -> Self {
        GpuWorkloadError::from(e).into()
    }
}

impl From<smartio_workloads::booted::Stuck> for VideoError {
    fn from(e: smartio_workloads::booted::Stuck) -> Self {
        GpuWorkloadError::Stuck(e).into()
    }
}

/// One GPU of the pool and what it did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuUse {
    /// As given (`gpu0`, `machine-b:gpu0`).
    pub device: String,
    /// Borrowed from another host for the run.
    pub borrowed: bool,
    /// Its calibration profile.
    pub profile: String,
    /// The profile's feature extraction time per frame (`eir_frame_ns`), in milliseconds.
    pub frame_ms: f64,
    /// Frames it processed.
    pub frames: u64,
    /// Time its feature kernels ran (by its cycle counter) over the run's span.
    pub busy: f64,
    /// Mean time from a frame decoded to its kernel running (the copy in, the launch), in
    /// milliseconds.
    pub copy_in_ms: f64,
    /// Mean time its kernels waited for the GPU's other frame, in milliseconds.
    pub turn_ms: f64,
    /// The nodes its copy engine's writes to the host's frame buffers pass, in order (its
    /// reads take the same path).
    pub path: Vec<String>,
}

/// Where a frame's time went on average, in milliseconds: the stages add up to the mean
/// latency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stages {
    /// Captured → decode started (waiting for a free buffer on its GPU, then for a core).
    pub queued_ms: f64,
    /// Decoding on a CPU core.
    pub decode_ms: f64,
    /// Decoded → kernel running (the copy in, the launch).
    pub copy_in_ms: f64,
    /// Kernel running → its turn on the GPU (the GPU's other frame finishing).
    pub turn_ms: f64,
    /// The feature kernel.
    pub kernel_ms: f64,
    /// Kernel done → features checked (the copy back, the synchronize, the check).
    pub back_ms: f64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VideoResult {
    /// Scenario name.
    pub scenario: String,
    /// Host, as given.
    pub host: String,
    /// Its CPU cores (decodes at once).
    pub cores: u32,
    /// Streams.
    pub streams: u32,
    /// Frames per second asked of each stream.
    pub fps: u32,
    /// Frames per stream.
    pub frames: u32,
    /// CPU time to decode one frame (`[video] decode_frame_ns`), in milliseconds.
    pub decode_ms: f64,
    /// Each stream's achieved rate, frames per second (see the module docs).
    pub stream_fps: Vec<f64>,
    /// The sum of the streams' rates.
    pub total_fps: f64,
    /// The slowest stream's rate.
    pub min_stream_fps: f64,
    /// Capture → features verified, per frame, in nanoseconds.
    pub latency_ns: LatencySummary,
    /// Where the time of a frame went, on average.
    pub stages: Stages,
    /// Frames whose features carried the right digest (all of them, or the run fails).
    pub frames_verified: u64,
    /// First capture → last frame verified, in milliseconds of virtual time.
    pub span_ms: f64,
    /// The pool, in the order given.
    pub gpus: Vec<GpuUse>,
    /// The GPUs borrowed for the run.
    pub borrowed: Vec<String>,
    /// GPUs of a default pool left out because they cannot reach the host's memory.
    pub left_out: Vec<LeftOut>,
}

/// A GPU of the pool, resolved.
#[derive(Debug, Clone)]
pub(crate) struct PoolGpu {
    /// As given.
    pub spec: String,
    /// Its endpoint.
    pub endpoint: EndpointId,
    /// Borrowed (named `lender:gpu`).
    pub borrowed: bool,
}

/// Checks the counts (what can be checked before anything runs).
pub fn check_counts(config: &VideoConfig) -> Result<(), VideoError> {
    if config.streams == 0 || config.streams > MAX_STREAMS {
        return Err(VideoError::Streams {
            value: config.streams,
        });
    }
    if config.fps == 0 || config.fps > MAX_FPS {
        return Err(VideoError::Fps { value: config.fps });
    }
    if !(MIN_FRAMES..=MAX_FRAMES).contains(&config.frames) {
        return Err(VideoError::Frames {
            value: config.frames,
        });
    }
    let total = u64::from(config.streams) * u64::from(config.frames);
    if total > MAX_TOTAL_FRAMES {
        return Err(VideoError::TooManyFrames {
            streams: config.streams,
            frames: config.frames,
            total,
        });
    }
    if let Some(id) = config.spoil {
        if id.stream >= config.streams || id.frame >= config.frames {
            return Err(GpuWorkloadError::from(BadParameter::SpoilFrame {
                stream: id.stream,
                frame: id.frame,
                streams: config.streams,
                frames: config.frames,
            })
            .into());
        }
    }
    Ok(())
}

/// Resolves the pool against the scenario: every GPU exists, is a GPU, and is named once.
fn resolve(cluster: &Cluster, config: &VideoConfig) -> Result<(u32, Vec<PoolGpu>), VideoError> {
    let f = cluster.machine.fabric();
    let home_name = config.host.split('/').next().unwrap_or(&config.host);
    let home = f
        .host_by_name(home_name)
        .ok_or_else(|| AttachError::from(UnknownHost::named(&config.host, f.host_names())))?;
    if config.gpus.is_empty() {
        return Err(VideoError::NoGpus);
    }
    let mut pool: Vec<PoolGpu> = Vec::new();
    for spec in &config.gpus {
        let unknown = |why: String| VideoError::UnknownGpu {
            device: spec.clone(),
            why,
        };
        check_device_name(spec).map_err(|e| unknown(e.to_string()))?;
        let (host, device, borrowed) = match spec.split_once(':') {
            Some((lender, device)) => {
                let id = f.host_by_name(lender).ok_or_else(|| {
                    unknown(format!("no host {lender:?} (hosts: {})", f.host_names()))
                })?;
                if id == home {
                    return Err(unknown(format!(
                        "{lender} is the host running the streams; name its own GPUs without \
                         the host ({device})"
                    )));
                }
                (id, device, true)
            }
            None => (home, spec.as_str(), false),
        };
        let endpoint = f.endpoint_by_name(host, device).ok_or_else(|| {
            let gpus: Vec<&str> = f
                .endpoints()
                .iter()
                .filter(|e| e.host == host && e.kind == "gpu")
                .map(|e| e.name.as_str())
                .collect();
            unknown(format!(
                "host {} has no device {device:?} (its GPUs: {})",
                f.host(host).name,
                if gpus.is_empty() {
                    "none".to_string()
                } else {
                    gpus.join(", ")
                }
            ))
        })?;
        let kind = &f.endpoint(endpoint).kind;
        if kind != "gpu" {
            return Err(VideoError::NotAGpu {
                device: spec.clone(),
                kind: kind.clone(),
            });
        }
        if let Some(first) = pool.iter().find(|g| g.endpoint == endpoint) {
            return Err(VideoError::SameGpu {
                first: first.spec.clone(),
                second: spec.clone(),
            });
        }
        pool.push(PoolGpu {
            spec: spec.clone(),
            endpoint,
            borrowed,
        });
    }
    Ok((f.host(home).cores, pool))
}

/// Runs the streams on `cluster` (which it leaves at a later virtual time); borrowed GPUs
/// are given back at the end, also when the run fails.
pub fn video(cluster: &Cluster, config: &VideoConfig) -> Result<VideoResult, VideoError> {
    check_counts(config)?;
    let (cores, pool) = resolve(cluster, config)?;
    pipeline::run(cluster, config, cores, pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_out_of_range_are_refused_with_the_option_and_the_range() {
        let ok = VideoConfig::paper_ii();
        assert_eq!(check_counts(&ok), Ok(()));
        let with = |f: fn(&mut VideoConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            check_counts(&c).expect_err("refused")
        };
        assert_eq!(with(|c| c.streams = 0), VideoError::Streams { value: 0 });
        assert_eq!(with(|c| c.streams = 65), VideoError::Streams { value: 65 });
        assert_eq!(with(|c| c.fps = 0), VideoError::Fps { value: 0 });
        assert_eq!(with(|c| c.fps = 121), VideoError::Fps { value: 121 });
        assert_eq!(with(|c| c.frames = 1), VideoError::Frames { value: 1 });
        assert_eq!(
            with(|c| c.frames = 10_001),
            VideoError::Frames { value: 10_001 }
        );
        let e = with(|c| {
            c.streams = 64;
            c.frames = 10_000;
        });
        assert_eq!(
            e.to_string(),
            "--streams 64 × --frames 10000 = 640000 frames: at most 100000 in one run (each \
             costs milliseconds of wall time); use fewer streams or frames"
        );
        assert!(with(|c| c.streams = 0)
            .to_string()
            .starts_with("--streams 0: allowed 1 to 64"));
        let e = with(|c| {
            c.spoil = Some(FrameId {
                stream: 8,
                frame: 0,
            })
        });
        assert!(e.to_string().contains("stream 8 frame 0"), "{e}");
    }
}
