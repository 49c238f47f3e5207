//! Seeded variation with causes: where the same operation takes a different time each time,
//! the model draws it from a distribution whose shape comes from the calibration, using a
//! random stream of its own that the run's seed determines.
//!
//! Each cause has its streams ([`Cause`]), one per entity (a controller's media, the
//! interrupts one requester raises, the fabric's chips), so that what one entity draws never
//! shifts what another draws: a local and a borrowed run of the same QD1 workload draw the
//! same media and interrupt times in the same order (common random numbers). The chips share
//! one stream, so paths of different lengths draw differently there.
//! The same seed gives the same samples, byte for byte; a different seed, another sample.
//!
//! A [`Spread`] whose 99th percentile equals its typical value draws nothing and always
//! answers the typical value: a calibration without spreads is exactly the variance-free model.

use crate::time::SimDuration;
use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// The seed of a run that names none (the command line's `--seed` default).
pub const DEFAULT_SEED: u64 = 1;

/// Why a duration varies: each cause draws from its own streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// An NVMe controller's media and firmware time per command.
    Media = 1,
    /// Interrupt delivery: from the MSI write landing to the handler running (C-state exits,
    /// cache misses, the OS's interrupt entry).
    Interrupt = 2,
    /// A switch chip's cut-through latency within its datasheet range, per TLP.
    Chip = 3,
}

/// One entity's random stream for one cause, derived from the run's seed.
#[derive(Debug, Clone)]
pub struct Stream {
    rng: Pcg64Mcg,
}

impl Stream {
    /// The stream of `cause` for entity `index` (an endpoint or host index) under `seed`.
    pub fn new(seed: u64, cause: Cause, index: u64) -> Stream {
        // The three numbers pick one 128-bit state; `seed_from_u64` spreads each through
        // its own generator, so neighbouring seeds, causes and entities start far apart.
        let mut state = [0u8; 16];
        let a = Pcg64Mcg::seed_from_u64(seed).next_u64();
        let b = Pcg64Mcg::seed_from_u64(((cause as u64) << 56) ^ index).next_u64();
        state[..8].copy_from_slice(&a.to_le_bytes());
        state[8..].copy_from_slice(&b.to_le_bytes());
        Stream {
            rng: Pcg64Mcg::from_seed(state),
        }
    }

    /// A uniform draw in `[0, 1)` (53 random bits).
    pub fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A draw in `0..=max` from one 64-bit word by multiply-and-shift (Lemire): one word per
    /// draw whatever `max` — this runs per chip per transfer — and a bias below `max / 2^64`,
    /// far under anything a picosecond latency can show.
    pub fn up_to(&mut self, max: u64) -> u64 {
        let word = u128::from(self.rng.next_u64());
        ((word * (u128::from(max) + 1)) >> 64) as u64
    }
}

/// A duration that varies around a typical value with a tail: a floor plus an exponentially
/// distributed extra, shaped so that the median is `typical` and the 99th percentile `p99`.
///
/// Invariant (checked by the calibration's ranges): `typical <= p99 <= typical * MAX_TAIL`,
/// so the floor `typical - ln 2 * mean` is not negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    /// The median.
    pub typical: SimDuration,
    /// The 99th percentile.
    pub p99: SimDuration,
}

/// The largest `p99 / typical` a [`Spread`] admits: beyond it the exponential tail that puts
/// the median at `typical` would need a negative floor.
pub const MAX_TAIL: f64 = 6.6;

impl Spread {
    /// A duration that does not vary.
    pub const fn fixed(d: SimDuration) -> Spread {
        Spread { typical: d, p99: d }
    }

    /// Whether it varies at all.
    pub fn varies(&self) -> bool {
        self.p99 > self.typical
    }

    /// (floor, mean of the exponential extra) in picoseconds.
    fn shape(&self) -> (f64, f64) {
        let typical = self.typical.as_ps() as f64;
        let tail = self.p99.as_ps().saturating_sub(self.typical.as_ps()) as f64;
        // Median of floor + Exp(mean) is floor + mean·ln 2, its p99 floor + mean·ln 100.
        let mean = tail / (100f64.ln() - 2f64.ln());
        ((typical - mean * 2f64.ln()).max(0.0), mean)
    }

    /// One draw from `stream`; the typical value (and no draw) when it does not vary.
    pub fn sample(&self, stream: &mut Stream) -> SimDuration {
        if !self.varies() {
            return self.typical;
        }
        let (floor, mean) = self.shape();
        let u = stream.unit();
        let extra = -mean * (1.0 - u).ln();
        SimDuration::from_ps((floor + extra).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percentile(sorted: &[u64], p: f64) -> u64 {
        sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
    }

    #[test]
    fn a_spread_has_its_median_and_99th_percentile() {
        let s = Spread {
            typical: SimDuration::from_ns(5000),
            p99: SimDuration::from_ns(6000),
        };
        let mut stream = Stream::new(7, Cause::Media, 0);
        let mut xs: Vec<u64> = (0..200_000)
            .map(|_| s.sample(&mut stream).as_ps())
            .collect();
        xs.sort_unstable();
        let p50 = percentile(&xs, 0.5) as f64 / 1e3;
        let p99 = percentile(&xs, 0.99) as f64 / 1e3;
        assert!((p50 - 5000.0).abs() < 10.0, "median {p50} ns");
        assert!((p99 - 6000.0).abs() < 30.0, "p99 {p99} ns");
        let (floor, _) = s.shape();
        assert!(xs[0] as f64 >= floor.round(), "nothing below the floor");
        assert!(floor < 5e6, "the floor lies below the median: {floor} ps");
    }

    #[test]
    fn a_fixed_spread_draws_nothing_and_answers_its_value() {
        let s = Spread::fixed(SimDuration::from_ns(1500));
        let mut a = Stream::new(1, Cause::Interrupt, 3);
        let mut b = a.clone();
        assert_eq!(s.sample(&mut a), SimDuration::from_ns(1500));
        assert_eq!(a.unit(), b.unit(), "the stream did not move");
    }

    #[test]
    fn streams_repeat_per_seed_and_differ_by_seed_cause_and_entity() {
        let draw = |seed, cause, index| {
            let mut s = Stream::new(seed, cause, index);
            (0..4).map(|_| s.up_to(1_000_000)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1, Cause::Media, 2), draw(1, Cause::Media, 2));
        assert_ne!(draw(1, Cause::Media, 2), draw(2, Cause::Media, 2));
        assert_ne!(draw(1, Cause::Media, 2), draw(1, Cause::Chip, 2));
        assert_ne!(draw(1, Cause::Media, 2), draw(1, Cause::Media, 3));
    }
}
