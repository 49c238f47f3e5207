//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod common;
mod gpu_runtime;
mod nic;
mod ntb_dma;
mod nvme_block;
mod nvme_conformance;
mod nvme_controller;
mod nvme_dist;
mod nvme_driver;
mod sriov;
