//! The SR-IOV lending suite, unchanged, on the direct engine (no timing model): the same
//! file as `sriov.rs`, compiled as a second test target whose name ends in `_on_direct`
//! (`EngineKind::for_test_target`).

#[path = "sriov.rs"]
mod suite;
