//! The time a controller and its media take for a command, by profile.
//!
//! Two limits shape it: an admission stage per direction that starts at most one command per
//! `1 / IOPS` (or per `bytes / bandwidth` for large transfers, whichever is longer) — reads
//! and writes have separate pipelines, so a read is not held back by the write before it —
//! and a set of
//! parallel units (channels) each busy for the media latency. At queue depth 1 a command
//! takes the media latency; under load, throughput is capped by whichever limit binds
//! first. The PCIe link is not part of this model: the engine costs it.
//!
//! The media latency varies from command to command ([`Spread`]: the profile's typical value
//! is the median, its tail reaches the profile's 99th percentile), drawn from the
//! controller's own stream, so that two runs of one seed draw the same times in the same
//! command order.

use smartio_platform::{SimDuration, SimTime, Spread, Stream};
use std::cell::RefCell;

/// A profile's figures (taken from the calibration).
#[derive(Debug, Clone, PartialEq)]
pub struct MediaProfile {
    /// Profile name.
    pub name: String,
    /// Read latency: its median and 99th percentile.
    pub read_latency: Spread,
    /// Write latency: its median and 99th percentile.
    pub write_latency: Spread,
    /// Flush latency.
    pub flush_latency: SimDuration,
    /// Reads started per second, at most.
    pub max_read_iops: f64,
    /// Writes started per second, at most.
    pub max_write_iops: f64,
    /// Internal read bandwidth (bytes/s).
    pub read_bandwidth: f64,
    /// Internal write bandwidth (bytes/s).
    pub write_bandwidth: f64,
    /// Parallel units.
    pub parallel_units: u32,
}

/// What a command asks of the media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaOp {
    /// Read `bytes`.
    Read(u64),
    /// Write `bytes`.
    Write(u64),
    /// Make written data durable.
    Flush,
}

#[derive(Debug)]
struct State {
    /// When the read and the write pipeline can admit their next command.
    admit_free: [SimTime; 2],
    units: Vec<SimTime>,
    /// Where the media's latencies are drawn from.
    stream: Stream,
}

/// The media of one controller.
#[derive(Debug)]
pub struct Media {
    profile: MediaProfile,
    state: RefCell<State>,
}

impl Media {
    /// Idle media of `profile`, drawing its latencies from `stream`.
    pub fn new(profile: MediaProfile, stream: Stream) -> Self {
        let units = vec![SimTime::ZERO; profile.parallel_units.max(1) as usize];
        Self {
            profile,
            state: RefCell::new(State {
                admit_free: [SimTime::ZERO; 2],
                units,
                stream,
            }),
        }
    }

    /// The profile.
    pub fn profile(&self) -> &MediaProfile {
        &self.profile
    }

    /// Books `op` arriving at `now`; returns when it is done. Deterministic for a given
    /// stream: the earliest free unit (lowest index on ties) takes it, for a latency drawn
    /// from the media's stream.
    pub fn schedule(&self, op: MediaOp, now: SimTime) -> SimTime {
        let p = &self.profile;
        let (latency, gap, pipe) = match op {
            MediaOp::Read(bytes) => (
                p.read_latency,
                gap(p.max_read_iops, bytes as f64 / p.read_bandwidth),
                0,
            ),
            MediaOp::Write(bytes) => (
                p.write_latency,
                gap(p.max_write_iops, bytes as f64 / p.write_bandwidth),
                1,
            ),
            MediaOp::Flush => (Spread::fixed(p.flush_latency), SimDuration::ZERO, 1),
        };
        let mut s = self.state.borrow_mut();
        let latency = latency.sample(&mut s.stream);
        let admitted = now.max(s.admit_free[pipe]);
        s.admit_free[pipe] = admitted + gap;
        let (unit, free) = s
            .units
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, t)| (t, i))
            .unwrap_or((0, SimTime::ZERO));
        let done = admitted.max(free) + latency;
        if let Some(u) = s.units.get_mut(unit) {
            *u = done;
        }
        done
    }

    /// Forgets queued work (controller reset).
    pub fn reset(&self, now: SimTime) {
        let mut s = self.state.borrow_mut();
        s.admit_free = [now; 2];
        s.units.fill(now);
    }
}

fn gap(iops: f64, transfer_s: f64) -> SimDuration {
    let per_op = if iops > 0.0 { 1.0 / iops } else { 0.0 };
    SimDuration::from_ns_f64(per_op.max(transfer_s) * 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> MediaProfile {
        MediaProfile {
            name: "test".into(),
            read_latency: Spread::fixed(SimDuration::from_us(10)),
            write_latency: Spread::fixed(SimDuration::from_us(20)),
            flush_latency: SimDuration::from_us(1),
            max_read_iops: 1e6,
            max_write_iops: 1e6,
            read_bandwidth: 4096e6,
            write_bandwidth: 4096e6,
            parallel_units: 2,
        }
    }

    fn stream() -> Stream {
        Stream::new(1, smartio_platform::Cause::Media, 0)
    }

    #[test]
    fn latencies_vary_by_the_profiles_spread_and_repeat_per_stream() {
        let varied = MediaProfile {
            read_latency: Spread {
                typical: SimDuration::from_us(10),
                p99: SimDuration::from_us(12),
            },
            ..profile()
        };
        let run = |seed| {
            let m = Media::new(
                varied.clone(),
                Stream::new(seed, smartio_platform::Cause::Media, 0),
            );
            (0..1000u64)
                .map(|i| {
                    let t = SimTime::ZERO + SimDuration::from_us(100 * i);
                    m.schedule(MediaOp::Read(4096), t) - t
                })
                .collect::<Vec<_>>()
        };
        let mut a = run(1);
        assert_eq!(a, run(1), "the same stream draws the same times");
        assert_ne!(a, run(2), "another seed draws others");
        a.sort_unstable();
        let (p50, p99) = (a[500], a[990]);
        assert!(p99 > p50, "p99 {p99:?} above p50 {p50:?}");
        let ns = |d: SimDuration| d.as_ps() as f64 / 1e3;
        assert!(
            (ns(p50) - 10_000.0).abs() < 150.0,
            "median {p50:?} near 10 us"
        );
        assert!((ns(p99) - 12_000.0).abs() < 600.0, "p99 {p99:?} near 12 us");
    }

    #[test]
    fn queue_depth_one_sees_the_bare_latency() {
        let m = Media::new(profile(), stream());
        let t0 = SimTime::ZERO + SimDuration::from_us(100);
        assert_eq!(
            m.schedule(MediaOp::Read(4096), t0),
            t0 + SimDuration::from_us(10)
        );
        let t1 = t0 + SimDuration::from_us(50);
        assert_eq!(
            m.schedule(MediaOp::Write(4096), t1),
            t1 + SimDuration::from_us(20)
        );
    }

    #[test]
    fn units_and_admission_bound_throughput() {
        let m = Media::new(profile(), stream());
        let t0 = SimTime::ZERO;
        let a = m.schedule(MediaOp::Read(4096), t0);
        let b = m.schedule(MediaOp::Read(4096), t0);
        let c = m.schedule(MediaOp::Read(4096), t0);
        // 4096 B at 4096 MB/s = 1 us admission gap; two units.
        assert_eq!(a, t0 + SimDuration::from_us(10));
        assert_eq!(b, t0 + SimDuration::from_us(11));
        assert_eq!(
            c,
            a + SimDuration::from_us(10),
            "third waits for the first unit"
        );
    }

    #[test]
    fn a_read_is_not_held_back_by_the_write_pipeline() {
        let m = Media::new(
            MediaProfile {
                parallel_units: 8,
                ..profile()
            },
            stream(),
        );
        let t0 = SimTime::ZERO;
        // 1 MiB at 4096 MB/s keeps the write pipeline busy for 256 us.
        m.schedule(MediaOp::Write(1 << 20), t0);
        let t1 = t0 + SimDuration::from_us(1);
        assert_eq!(
            m.schedule(MediaOp::Read(4096), t1),
            t1 + SimDuration::from_us(10)
        );
        let w = m.schedule(MediaOp::Write(4096), t1);
        assert!(
            w > t1 + SimDuration::from_us(250),
            "the second write waits its turn"
        );
    }

    #[test]
    fn the_iops_limit_spaces_admissions_and_none_is_no_limit() {
        let limited = Media::new(
            MediaProfile {
                max_read_iops: 1e3,
                parallel_units: 8,
                ..profile()
            },
            stream(),
        );
        let t0 = SimTime::ZERO;
        let a = limited.schedule(MediaOp::Read(512), t0);
        let b = limited.schedule(MediaOp::Read(512), t0);
        assert_eq!(a, t0 + SimDuration::from_us(10));
        assert_eq!(b, t0 + SimDuration::from_us(1010));
        let unlimited = Media::new(
            MediaProfile {
                max_read_iops: 0.0,
                read_bandwidth: 0.5e9,
                parallel_units: 8,
                ..profile()
            },
            stream(),
        );
        // No IOPS figure: only the transfer spaces them (512 B at 0.5 GB/s: 1,024 ns).
        let a = unlimited.schedule(MediaOp::Read(512), t0);
        let b = unlimited.schedule(MediaOp::Read(512), t0);
        assert_eq!(b - a, SimDuration::from_ns(1024));
    }

    #[test]
    fn a_reset_forgets_the_work_queued() {
        let m = Media::new(profile(), stream());
        let t0 = SimTime::ZERO;
        for _ in 0..10 {
            m.schedule(MediaOp::Write(1 << 20), t0);
        }
        let t1 = t0 + SimDuration::from_us(5);
        m.reset(t1);
        assert_eq!(
            m.schedule(MediaOp::Write(4096), t1),
            t1 + SimDuration::from_us(20),
            "as on an idle drive"
        );
    }
}
