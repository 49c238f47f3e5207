//! Multi-stream video analysis on `video-lending` (Paper II): every frame's features are
//! checked against its bytes (and a spoiled frame is caught), runs are byte-identical, the
//! borrowed K40c adds throughput only once the three local GPUs are saturated, the scheduler
//! follows its stated rule, and bad requests are refused by name.
//!
//! ```text
//!   machine-a ─┬─ gpu0 (K40c)  gpu1 (K2200)  gpu2 (GTX 750)
//!              └─ ntb0 ══ machine-b.ntb0 ── machine-b ── gpu0 (K40c), lent
//! ```

use smartio_apps::video::{video, FrameId, OutOfReach, VideoConfig, VideoError, VideoResult};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::progress::{install, Recorder};
use smartio_workloads::{AttachError, GpuWorkloadError};
use std::rc::Rc;

const LOCAL: [&str; 3] = ["gpu0", "gpu1", "gpu2"];

fn cluster(scenario: &str) -> Cluster {
    Cluster::new(scenario, &Calibration::default_embedded()).expect("scenario loads")
}

fn config(streams: u32, frames: u32, gpus: &[&str]) -> VideoConfig {
    VideoConfig {
        streams,
        frames,
        gpus: gpus.iter().map(|g| g.to_string()).collect(),
        ..VideoConfig::paper_ii()
    }
}

fn run(config: &VideoConfig) -> Result<VideoResult, VideoError> {
    video(&cluster("video-lending"), config)
}

fn all_gpus() -> Vec<&'static str> {
    LOCAL.iter().copied().chain(["machine-b:gpu0"]).collect()
}

#[test]
fn every_frame_is_verified_and_each_gpu_accounts_for_its_frames() {
    let r = run(&config(3, 6, &all_gpus())).expect("runs");
    assert_eq!(r.frames_verified, 18);
    assert_eq!(r.gpus.iter().map(|g| g.frames).sum::<u64>(), 18);
    assert_eq!(r.borrowed, ["machine-b:gpu0"]);
    assert_eq!(r.stream_fps.len(), 3);
    assert_eq!(r.cores, 4, "machine-a's cores, from the scenario");
    let profiles: Vec<&str> = r.gpus.iter().map(|g| g.profile.as_str()).collect();
    assert_eq!(profiles, ["k40c", "k2200", "gtx750", "k40c"]);
    assert_eq!(r.gpus[0].frame_ms, 6.876, "the calibration's eir_frame_ns");
    // Three streams are 90 frames/s, within the K40c's 145: they keep up exactly.
    for fps in &r.stream_fps {
        assert!((fps - 30.0).abs() < 1e-4, "{:?}", r.stream_fps);
    }
    // The borrowed GPU's copies pass both NTB adapters and machine-b's root complex.
    let lent = &r.gpus[3];
    assert_eq!(
        lent.path,
        ["machine-b", "machine-b.ntb0", "machine-a.ntb0", "machine-a"]
    );
    assert_eq!(r.gpus[0].path, ["machine-a"]);
    let s = r.stages;
    let parts = s.queued_ms + s.decode_ms + s.copy_in_ms + s.turn_ms + s.kernel_ms + s.back_ms;
    assert!(
        (parts - r.latency_ns.mean / 1e6).abs() < 1e-6,
        "the stages add up to the mean latency: {s:?} vs {}",
        r.latency_ns.mean
    );
    assert_eq!(s.decode_ms, 4.0, "[video] decode_frame_ns");
}

#[test]
fn a_frame_spoiled_in_gpu_memory_fails_verification_by_name() {
    let mut c = config(2, 4, &LOCAL);
    c.spoil = Some(FrameId {
        stream: 1,
        frame: 2,
    });
    match run(&c) {
        Err(VideoError::Verify {
            failed,
            frames,
            first,
        }) => {
            assert_eq!((failed, frames), (1, 8));
            assert!(
                first.starts_with("stream 1 frame 2: the GPU's digest")
                    && first.contains("differs from the decoded frame's"),
                "{first}"
            );
        }
        other => panic!("expected a verification failure, got {other:?}"),
    }
}

#[test]
fn two_runs_give_byte_identical_results() {
    let c = config(5, 5, &all_gpus());
    let a = serde_json::to_string(&run(&c).expect("first")).expect("json");
    let b = serde_json::to_string(&run(&c).expect("second")).expect("json");
    assert_eq!(a, b);
}

#[test]
fn the_borrowed_gpu_adds_throughput_only_once_the_local_gpus_are_saturated() {
    let total = |streams, gpus: &[&str]| run(&config(streams, 8, gpus)).expect("runs").total_fps;
    // 4 streams (120 frames/s) are within the local GPUs' 225: both pools deliver it all.
    let (local, lent) = (total(4, &LOCAL), total(4, &all_gpus()));
    assert!(
        (local - 120.0).abs() < 1e-3 && (lent - 120.0).abs() < 1e-3,
        "{local} {lent}"
    );
    // 12 streams (360 frames/s) are beyond them: the local GPUs deliver their profiles'
    // 225 at most, the borrowed K40c adds most of its 145.
    let (local, lent) = (total(12, &LOCAL), total(12, &all_gpus()));
    assert!(local < 226.0 && local > 215.0, "{local}");
    assert!(lent > 1.4 * local, "{local} {lent}");
}

#[test]
fn the_scheduler_gives_a_frame_to_the_gpu_that_finishes_it_first_ties_to_the_first_listed() {
    // One stream: each frame finds every GPU idle; the K40cs finish first, and of the two
    // the one listed first wins the tie.
    let r = run(&config(1, 4, &["machine-b:gpu0", "gpu2", "gpu0"])).expect("runs");
    let frames: Vec<u64> = r.gpus.iter().map(|g| g.frames).collect();
    assert_eq!(frames, [4, 0, 0]);
    let r = run(&config(1, 4, &["gpu2", "gpu0", "machine-b:gpu0"])).expect("runs");
    let frames: Vec<u64> = r.gpus.iter().map(|g| g.frames).collect();
    assert_eq!(frames, [0, 4, 0]);
    // Four streams captured at once: the local K40c takes frames while it would still
    // finish first (6.9 ms each), then the next fastest finisher.
    let r = run(&config(4, 2, &LOCAL)).expect("runs");
    let frames: Vec<u64> = r.gpus.iter().map(|g| g.frames).collect();
    assert_eq!(frames, [6, 2, 0]);
}

#[test]
fn a_run_reports_its_frames_to_a_progress_sink_without_changing_its_result() {
    let c = config(2, 3, &LOCAL);
    let quiet = run(&c).expect("runs");
    let recorder = Rc::new(Recorder::default());
    let guard = install(recorder.clone());
    let watched = run(&c).expect("runs");
    drop(guard);
    assert_eq!(quiet, watched);
    let events = recorder.events.borrow();
    assert_eq!(
        events.first().map(String::as_str),
        Some("begin video frames 6")
    );
    assert!(events.iter().any(|e| e == "set 6"), "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("end"));
}

#[test]
fn bad_requests_are_refused_by_name() {
    let c = cluster("video-lending");
    let err = |f: &dyn Fn(&mut VideoConfig)| {
        let mut cfg = config(2, 3, &LOCAL);
        f(&mut cfg);
        video(&c, &cfg).expect_err("refused")
    };
    assert_eq!(err(&|c| c.streams = 0), VideoError::Streams { value: 0 });
    assert_eq!(err(&|c| c.streams = 65), VideoError::Streams { value: 65 });
    assert_eq!(err(&|c| c.fps = 121), VideoError::Fps { value: 121 });
    assert_eq!(err(&|c| c.frames = 0), VideoError::Frames { value: 0 });
    assert_eq!(err(&|c| c.gpus.clear()), VideoError::NoGpus);
    assert_eq!(
        err(&|c| c.gpus = vec!["gpu0".into(), "gpu1".into(), "gpu0".into()]),
        VideoError::SameGpu {
            first: "gpu0".into(),
            second: "gpu0".into()
        }
    );
    let e = err(&|c| c.gpus = vec!["gpu7".into()]);
    assert_eq!(
        e.to_string(),
        "--gpus gpu7: host machine-a has no device \"gpu7\" (its GPUs: gpu0, gpu1, gpu2)"
    );
    let e = err(&|c| c.gpus = vec!["nobody:gpu0".into()]);
    assert!(
        matches!(&e, VideoError::UnknownGpu { device, why } if device == "nobody:gpu0"
            && why.contains("no host \"nobody\"") && why.contains("machine-b")),
        "{e}"
    );
    let e = err(&|c| c.gpus = vec!["machine-a:gpu0".into()]);
    assert!(
        e.to_string()
            .contains("name its own GPUs without the host (gpu0)"),
        "{e}"
    );
    let e = err(&|c| c.host = "nobody".into());
    assert!(
        matches!(
            &e,
            VideoError::Run(run) if matches!(
                &**run,
                GpuWorkloadError::Attach(a)
                    if matches!(&**a, AttachError::UnknownHost(u) if u.host == "nobody")
            )
        ),
        "{e}"
    );
    // The GTX 750 puts 40 address bits on the bus; borrowed by machine-b, machine-b's
    // memory appears to it through machine-a's NTB window at 1 TiB and above.
    let e = err(&|c| {
        c.host = "machine-b".into();
        c.gpus = vec!["gpu0".into(), "machine-a:gpu2".into()];
    });
    assert!(
        matches!(&e, VideoError::OutOfReach { device, bits: 40, host, addr }
            if device == "machine-a:gpu2" && host == "machine-b" && *addr >= 1 << 40),
        "{e}"
    );
    // A device that is not a GPU (local-chassis has an NVMe).
    let chassis = cluster("local-chassis");
    let cfg = VideoConfig {
        host: "local".into(),
        ..config(1, 2, &["gpu0", "nvme0"])
    };
    assert_eq!(
        video(&chassis, &cfg).expect_err("refused"),
        VideoError::NotAGpu {
            device: "nvme0".into(),
            kind: "nvme".into()
        }
    );
}

/// A default pool takes only GPUs the host can reach: on machine-b, machine-a's K2200 and
/// GTX 750 (40 address bits) cannot address machine-b's memory behind machine-a's NTB window
/// above 1 TiB, so they are left out and named, and the run goes on with the K40cs.
#[test]
fn a_default_pool_leaves_out_the_gpus_that_cannot_reach_the_host() {
    let cfg = VideoConfig {
        host: "machine-b".into(),
        out_of_reach: OutOfReach::LeaveOut,
        ..config(
            2,
            4,
            &["gpu0", "machine-a:gpu0", "machine-a:gpu1", "machine-a:gpu2"],
        )
    };
    let r = run(&cfg).expect("the GPUs in reach run the streams");
    let used: Vec<&str> = r.gpus.iter().map(|g| g.device.as_str()).collect();
    assert_eq!(used, ["gpu0", "machine-a:gpu0"]);
    let left: Vec<(&str, u8)> = r
        .left_out
        .iter()
        .map(|l| (l.device.as_str(), l.bits))
        .collect();
    assert_eq!(left, [("machine-a:gpu1", 40), ("machine-a:gpu2", 40)]);
    assert!(r.left_out.iter().all(|l| l.addr >= 1 << 40));
    assert_eq!(r.frames_verified, 8);
    // Named by the user, the same pool is refused.
    let named = VideoConfig {
        out_of_reach: OutOfReach::Refuse,
        ..cfg.clone()
    };
    assert!(matches!(run(&named), Err(VideoError::OutOfReach { .. })));
    // With no GPU in reach there is nothing to run on, and the error names why.
    let none = VideoConfig {
        gpus: vec!["machine-a:gpu1".into(), "machine-a:gpu2".into()],
        ..cfg
    };
    let e = run(&none).expect_err("nothing in reach");
    assert!(
        matches!(&e, VideoError::NoGpuInReach { host, left_out } if host == "machine-b" && left_out.len() == 2),
        "{e}"
    );
}
