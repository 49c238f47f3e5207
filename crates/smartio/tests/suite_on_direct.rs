//! The suites that run unchanged on the direct engine (no timing model): the same files as in
//! `suite`, compiled a second time in this binary, whose name ends in `_on_direct`
//! (`EngineKind::for_test_target`). Each passing shows that the code it drives depends only
//! on the platform contract.

mod common;

/// The Device Lending suite.
#[path = "lending.rs"]
mod lending;

/// The SR-IOV lending suite.
#[path = "sriov.rs"]
mod sriov;
