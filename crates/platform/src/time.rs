//! Time as the engines see it: picoseconds in a `u64` (about 213 days of virtual time).
//!
//! Models never read the wall clock; they ask their [`crate::Clock`]. Arithmetic saturates:
//! a time past the end of the representable range is [`SimTime::NEVER`], which no event
//! reaches, rather than a wrap back to the start.

use serde::Serialize;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in (virtual or wall-clock) time, in picoseconds since the engine started.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct SimTime(pub u64);

/// A length of time in picoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct SimDuration(pub u64);

impl SimTime {
    /// The start of time.
    pub const ZERO: SimTime = SimTime(0);

    /// The end of representable time: a deadline that is never reached.
    pub const NEVER: SimTime = SimTime(u64::MAX);

    /// Picoseconds since the start.
    pub const fn as_ps(self) -> u64 {
        self.0
    }

    /// Time since `earlier`, or zero if `earlier` is later.
    pub fn since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);

    /// From picoseconds.
    pub const fn from_ps(ps: u64) -> Self {
        Self(ps)
    }

    /// From nanoseconds (saturating at the largest duration).
    pub const fn from_ns(ns: u64) -> Self {
        Self(ns.saturating_mul(1_000))
    }

    /// From microseconds (saturating at the largest duration).
    pub const fn from_us(us: u64) -> Self {
        Self(us.saturating_mul(1_000_000))
    }

    /// From nanoseconds, or `None` if that many picoseconds do not fit in a `u64` (about
    /// 213 days).
    pub const fn checked_from_ns(ns: u64) -> Option<Self> {
        match ns.checked_mul(1_000) {
            Some(ps) => Some(Self(ps)),
            None => None,
        }
    }

    /// `count` times this duration (saturating at the largest duration).
    pub const fn times(self, count: u64) -> Self {
        Self(self.0.saturating_mul(count))
    }

    /// From fractional nanoseconds, rounded to the nearest picosecond (negative and NaN
    /// become zero, values past the range saturate).
    pub fn from_ns_f64(ns: f64) -> Self {
        Self((ns * 1_000.0).round().max(0.0) as u64)
    }

    /// Picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }

    /// Nanoseconds, as a float.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1_000.0
    }

    /// Seconds, as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    /// Saturating: past the end of time is [`SimTime::NEVER`].
    fn add(self, rhs: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, rhs: SimDuration) {
        *self = *self + rhs;
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    /// Saturating at the largest duration.
    fn add(self, rhs: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for SimDuration {
    fn add_assign(&mut self, rhs: SimDuration) {
        *self = *self + rhs;
    }
}

impl Sub for SimTime {
    type Output = SimDuration;
    /// Saturating: a later minus an earlier time.
    fn sub(self, rhs: SimTime) -> SimDuration {
        self.since(rhs)
    }
}

impl fmt::Debug for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", SimDuration(self.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", SimDuration(self.0))
    }
}

impl fmt::Debug for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        if ps < 1_000 {
            write!(f, "{ps} ps")
        } else if ps < 1_000_000 {
            write!(f, "{:.3} ns", ps as f64 / 1e3)
        } else if ps < 1_000_000_000 {
            write!(f, "{:.3} us", ps as f64 / 1e6)
        } else {
            write!(f, "{:.3} ms", ps as f64 / 1e9)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_convert_between_units() {
        assert_eq!(SimDuration::from_ns(3).as_ps(), 3_000);
        assert_eq!(SimDuration::from_us(2).as_ps(), 2_000_000);
        assert_eq!(SimDuration::from_ns_f64(1.2345).as_ps(), 1_235);
    }

    #[test]
    fn time_difference_saturates_at_zero() {
        assert_eq!(SimTime(5) - SimTime(9), SimDuration::ZERO);
        assert_eq!(SimTime(9) - SimTime(5), SimDuration(4));
    }

    #[test]
    fn time_arithmetic_saturates_at_never_instead_of_wrapping() {
        assert_eq!(SimTime(u64::MAX - 1) + SimDuration(5), SimTime::NEVER);
        let mut t = SimTime(10);
        t += SimDuration(u64::MAX);
        assert_eq!(t, SimTime::NEVER);
        assert_eq!(
            SimDuration(u64::MAX) + SimDuration(1),
            SimDuration(u64::MAX)
        );
        assert_eq!(SimDuration::from_ns(u64::MAX), SimDuration(u64::MAX));
        assert_eq!(SimDuration::checked_from_ns(u64::MAX / 999), None);
        assert_eq!(SimDuration::checked_from_ns(7), Some(SimDuration(7_000)));
    }
}
