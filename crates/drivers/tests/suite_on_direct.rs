//! The suites that run unchanged on the direct engine (no timing model): the same files as in
//! `suite`, compiled a second time in this binary, whose name ends in `_on_direct`
//! (`EngineKind::for_test_target`). Each passing shows that the code it drives depends only
//! on the platform contract.

mod common;

/// The block client's suite (and the host's block layer under it).
#[path = "nvme_block.rs"]
mod nvme_block;

/// The NVMe conformance suite.
#[path = "nvme_conformance.rs"]
mod nvme_conformance;

/// The distributed NVMe driver's suite.
#[path = "nvme_dist.rs"]
mod nvme_dist;
