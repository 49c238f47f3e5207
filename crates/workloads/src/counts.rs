//! The counts and sizes a benchmark refuses before it runs (`--repeat`, `--iterations`,
//! `--sizes`), with the value given.

use thiserror::Error;

/// A count or size a benchmark refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BadCount {
    /// `--repeat 0`.
    #[error("--repeat 0: at least one {per} per size")]
    NoRepeat {
        /// What is repeated (`copy`, `block`).
        per: &'static str,
    },
    /// `--iterations 0`.
    #[error("--iterations 0: at least one round trip")]
    NoIterations,
    /// A size of 0 in `--sizes`.
    #[error("--sizes: {what} size {size} is not allowed; give sizes of 1 byte or more")]
    ZeroSize {
        /// What is sized (`transfer`, `block`).
        what: &'static str,
        /// As given.
        size: u64,
    },
    /// A size in `--sizes` too large to place.
    #[error("--sizes: {what} size {size} is too large")]
    TooLarge {
        /// What is sized.
        what: &'static str,
        /// As given.
        size: u64,
    },
}
