//! The distributed NVMe driver's suite, unchanged, on the direct engine (no timing model): the same file as
//! `nvme_dist.rs`, compiled as a second test target whose name ends in `_on_direct`
//! (`EngineKind::for_test_target`). It passing shows that the code it drives depends only on
//! the platform contract.

#[path = "nvme_dist.rs"]
mod suite;
