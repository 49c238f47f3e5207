//! The block client's suite, unchanged, on the direct engine (no timing model): the same file
//! as `nvme_block.rs`, compiled as a second test target whose name ends in `_on_direct`
//! (`EngineKind::for_test_target`). It passing shows that the block client and the host's
//! block layer depend only on the platform contract.

#[path = "nvme_block.rs"]
mod suite;
