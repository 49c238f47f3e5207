//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod block;
mod os;
mod pass_through;
mod sriov;
mod vm;
