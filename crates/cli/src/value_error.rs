//! Why an option's value is refused when the command line is parsed (clap shows the message
//! after the option's name): a count, size or duration outside its range, with where the
//! range comes from.

use smartio_fabric::units::format_size;
use smartio_fabric::{DeviceRefError, SizeError};
use std::fmt;
use thiserror::Error;

/// The range a count or size must lie in, and where the bound comes from (`why`, may be
/// empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// The least.
    pub min: u64,
    /// The most.
    pub max: u64,
    /// Where the bound comes from.
    pub why: &'static str,
}

impl fmt::Display for Bounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Bounds { min, max, why } = self;
        if why.is_empty() {
            write!(f, "must be {min}..={max}")
        } else {
            write!(f, "must be {min}..={max} ({why})")
        }
    }
}

/// An option's value that is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    /// A device name of no form the parser knows.
    #[error("{0}")]
    Device(#[from] DeviceRefError),
    /// Not a whole number.
    #[error("not a whole number; {0}")]
    NotWhole(Bounds),
    /// A whole number outside its range.
    #[error("{0}")]
    Whole(Bounds),
    /// Not a size.
    #[error("{0}")]
    NotSize(#[from] SizeError),
    /// A size outside its range.
    #[error(
        "{value} bytes; must be {min}..={max} bytes ({})",
        if why.is_empty() { format!("{} at most", format_size(*max)) } else { why.to_string() }
    )]
    Size {
        /// As given, in bytes.
        value: u64,
        /// The least.
        min: u64,
        /// The most.
        max: u64,
        /// Where the bound comes from.
        why: &'static str,
    },
    /// `bench engine --bytes` that is not whole copies each way.
    #[error(
        "{value} bytes is not a multiple of 8M ({step} bytes): the benchmark streams 4 MiB \
         copies, as many written as read"
    )]
    EngineStep {
        /// As given, in bytes.
        value: u64,
        /// The step.
        step: u64,
    },
    /// Not a duration.
    #[error("{text:?}: expected a duration such as 500us, 10ms or 2s")]
    NotDuration {
        /// As given.
        text: String,
    },
    /// A duration without its unit.
    #[error(
        "{text:?} has no unit: write {number}s, {number}ms, {number}us or {number}ns (units \
         ns, us, ms, s)"
    )]
    NoUnit {
        /// As given.
        text: String,
        /// Its number.
        number: String,
    },
    /// A duration of a unit no duration has.
    #[error("{text:?}: unknown unit {unit:?} (ns, us, ms, s)")]
    UnknownUnit {
        /// As given.
        text: String,
        /// Its unit.
        unit: String,
    },
    /// A virtual run time of nothing or more than an hour.
    #[error(
        "{text:?}: must be more than 0 and at most {max_s}s (an hour of virtual time takes an \
         hour or more of wall time)"
    )]
    Runtime {
        /// As given.
        text: String,
        /// The most, in seconds.
        max_s: u64,
    },
    /// A virtual run time below a picosecond.
    #[error(
        "{text:?} is less than 1 ps; must be more than 0 and at most {max_s}s (an hour of \
         virtual time takes an hour or more of wall time)"
    )]
    BelowPicosecond {
        /// As given.
        text: String,
        /// The most, in seconds.
        max_s: u64,
    },
    /// Not a whole number (a count without a stated range).
    #[error("{text:?} is not a whole number")]
    NotCount {
        /// As given.
        text: String,
    },
    /// `--trace-limit` out of range.
    #[error("{n} is out of range 1..={max} (each slice is a few hundred bytes of the trace file)")]
    TraceLimit {
        /// As given.
        n: usize,
        /// The most.
        max: usize,
    },
    /// An empty name in a list of GPUs.
    #[error("an empty name in the list; give GPUs as gpu0,lender:gpu1")]
    EmptyGpuName,
    /// More GPUs than replicas.
    #[error("{count} GPUs; must be 1..={max} (one model replica per GPU)")]
    TooManyGpus {
        /// GPUs given.
        count: usize,
        /// The most.
        max: usize,
    },
    /// A shard that is not `I/N`.
    #[error("must be I/N with 0 <= I < N <= {max}, e.g. 0/3")]
    Shard {
        /// The most shards.
        max: usize,
    },
    /// A wall-clock period that is not whole seconds from one to a day.
    #[error("{text:?}: must be a whole number of seconds, 1s..={max_s}s")]
    WallSeconds {
        /// As given.
        text: String,
        /// The most, in seconds.
        max_s: u64,
    },
}
