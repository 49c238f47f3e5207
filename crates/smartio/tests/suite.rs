//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod common;
mod device_api;
mod lending;
mod mdev_parent;
mod peer_to_peer;
mod segments;
mod sriov;
mod vm;
