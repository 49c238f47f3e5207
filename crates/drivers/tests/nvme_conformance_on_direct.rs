//! The NVMe conformance suite, unchanged, on the direct engine (no timing model): the same file as
//! `nvme_conformance.rs`, compiled as a second test target whose name ends in `_on_direct`
//! (`EngineKind::for_test_target`). It passing shows that the code it drives depends only on
//! the platform contract.

#[path = "nvme_conformance.rs"]
mod suite;
