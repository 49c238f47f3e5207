//! Why `smartio repro`, or one of its figures, could not run: a figure or report option it
//! refuses, or an experiment's report without the rows the figure reads.

use std::path::PathBuf;
use thiserror::Error;

/// A repro refusal, or a figure that could not be made.
#[derive(Debug, Error)]
pub enum ReproError {
    /// `--figure` of no figure.
    #[error("--figure {id}: no such figure (known: {})", .known.join(", "))]
    UnknownFigure {
        /// As given.
        id: String,
        /// The figures there are.
        known: Vec<&'static str>,
    },
    /// `--html` in a directory that does not exist.
    #[error("--html {}: cannot write: the directory {} does not exist", .path.display(), .dir.display())]
    HtmlDirectory {
        /// As given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// The report page cannot be written.
    #[error("--html {}: cannot write: {source}", .path.display())]
    HtmlWrite {
        /// As given.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A run kept under a key as another type (an emulator bug).
    #[error("repro: the run {key:?} is kept as another type")]
    KeptAsOther {
        /// The run's key.
        key: String,
    },
    /// An experiment's report without rows.
    #[error("exp {exp} gave no rows")]
    NoRows {
        /// The experiment.
        exp: &'static str,
    },
    /// An experiment's report without a row the figure reads.
    #[error("exp {exp} has no {row} row")]
    NoRow {
        /// The experiment.
        exp: &'static str,
        /// The row.
        row: String,
    },
    /// The figure measures the timed engine's links.
    #[error("the figure needs the timed engine")]
    NeedsTimedEngine,
    /// The scenario has no cable.
    #[error("the scenario has no cable")]
    NoCable,
    /// The cable has no timing.
    #[error("the cable has no timing")]
    NoCableTiming,
    /// The scenario has no link of the kind the figure reads.
    #[error("{scenario} has no such link")]
    NoLink {
        /// The scenario.
        scenario: String,
    },
    /// The link has no timing.
    #[error("the link has no timing")]
    NoLinkTiming,
}
