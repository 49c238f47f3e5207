//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod common;
mod gpu;
mod nic;
mod sriov;
mod topology;
mod valid_scenarios;
mod validation;
