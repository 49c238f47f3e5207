//! The result of a run, from the moments recorded for every frame: each stream's rate (its
//! frames but one over the time from its first frame verified to its last), the latency and
//! its stages, and each GPU's share — or the run's first error, or its verification failures.

use super::{Record, Run};
use crate::video::{GpuUse, Stages, VideoError, VideoResult};
use smartio_platform::{SimDuration, SimTime};
use smartio_workloads::LatencySummary;

fn ms(d: SimDuration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The result from the records, or the run's first error.
pub(super) fn summarize(
    run: &Run,
    scenario: &str,
    cores: u32,
    start: SimTime,
) -> Result<VideoResult, VideoError> {
    if let Some(e) = run.error.borrow_mut().take() {
        return Err(e);
    }
    let mismatches = run.mismatches.borrow();
    if let Some(first) = mismatches.first() {
        return Err(VideoError::Verify {
            failed: mismatches.len() as u64,
            frames: run.total(),
            first: first.clone(),
        });
    }
    let records = run.records.borrow();
    // Every frame came back once and matched: a frame never processed (or one processed
    // twice in its place) is a bug of the workload, not a result.
    let verified = records.iter().filter(|r| r.verified).count() as u64;
    if verified != run.total() {
        return Err(smartio_workloads::gpu::GpuWorkloadError::Internal(
            "a frame was never processed (or another was processed twice)",
        )
        .into());
    }
    let end = records.iter().map(|r| r.done).max().unwrap_or(start);
    let span = end.since(start);
    let stream_fps = stream_rates(run, &records, start);
    let stages = stages(&records);
    let latencies: Vec<u64> = records
        .iter()
        .map(|r| r.done.since(r.captured).as_ps())
        .collect();
    let gpus = gpu_uses(run, &records, span);
    Ok(VideoResult {
        scenario: scenario.to_string(),
        host: run.config.host.clone(),
        cores,
        streams: run.config.streams,
        fps: run.config.fps,
        frames: run.config.frames,
        decode_ms: ms(run.decode),
        total_fps: stream_fps.iter().sum(),
        min_stream_fps: stream_fps.iter().copied().fold(f64::INFINITY, f64::min),
        stream_fps,
        latency_ns: LatencySummary::from_ps(&latencies),
        stages,
        frames_verified: verified,
        span_ms: ms(span),
        borrowed: gpus
            .iter()
            .filter(|g| g.borrowed)
            .map(|g| g.device.clone())
            .collect(),
        gpus,
        left_out: run.left_out.clone(),
    })
}

/// Each stream's rate: its frames but one over the time from its first frame done to its
/// last (the configured rate if they all came out at one instant).
fn stream_rates(run: &Run, records: &[Record], start: SimTime) -> Vec<f64> {
    let frames = run.config.frames as usize;
    records
        .chunks(frames.max(1))
        .map(|stream| {
            let first = stream.iter().map(|r| r.done).min().unwrap_or(start);
            let last = stream.iter().map(|r| r.done).max().unwrap_or(start);
            let seconds = last.since(first).as_secs_f64();
            let intervals = (frames.saturating_sub(1)) as f64;
            if seconds > 0.0 {
                intervals / seconds
            } else {
                // Every frame came out at one instant: no slower than they went in.
                f64::from(run.config.fps)
            }
        })
        .collect()
}

/// The mean time of a frame in each stage.
fn stages(records: &[Record]) -> Stages {
    let n = records.len().max(1) as f64;
    let mean =
        |f: &dyn Fn(&Record) -> SimDuration| records.iter().map(|r| ms(f(r))).sum::<f64>() / n;
    Stages {
        queued_ms: mean(&|r| r.decode_start.since(r.captured)),
        decode_ms: mean(&|r| r.decode_end.since(r.decode_start)),
        copy_in_ms: mean(&|r| r.kernel_entry.since(r.decode_end)),
        turn_ms: mean(&|r| r.kernel_start.since(r.kernel_entry)),
        kernel_ms: mean(&|r| r.kernel_end.since(r.kernel_start)),
        back_ms: mean(&|r| r.done.since(r.kernel_end)),
    }
}

/// Each GPU's share of the frames, how busy it was over `span`, and its path to the
/// host's memory.
fn gpu_uses(run: &Run, records: &[Record], span: SimDuration) -> Vec<GpuUse> {
    run.gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mine: Vec<&Record> = records.iter().filter(|r| r.gpu == i).collect();
            // Folded from +0.0: an empty `sum` of floats is -0.0.
            let busy = mine.iter().fold(0.0, |t, r| {
                t + r.kernel_end.since(r.kernel_start).as_secs_f64()
            });
            let per_frame = |f: &dyn Fn(&Record) -> SimDuration| {
                let total = mine.iter().fold(0.0, |t, r| t + ms(f(r)));
                if mine.is_empty() {
                    0.0
                } else {
                    total / mine.len() as f64
                }
            };
            GpuUse {
                device: g.spec.clone(),
                borrowed: g.borrowed,
                profile: g.profile.clone(),
                frame_ms: ms(g.compute),
                frames: mine.len() as u64,
                busy: if span.as_ps() > 0 {
                    busy / span.as_secs_f64()
                } else {
                    0.0
                },
                copy_in_ms: per_frame(&|r| r.kernel_entry.since(r.decode_end)),
                turn_ms: per_frame(&|r| r.kernel_start.since(r.kernel_entry)),
                path: g.res.slots.first().map_or_else(Vec::new, |s| {
                    smartio_workloads::gpu::path(&run.machine, &g.ctx, s.host_in.addr())
                }),
            }
        })
        .collect()
}
