//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod corpus;
mod live_findings;
mod nvme_findings;
mod runner;
mod vm_findings;
