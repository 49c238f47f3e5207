//! The crate's integration tests, one module per file, in one test binary.

mod progress;
mod train;
mod video;
