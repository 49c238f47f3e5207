//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod adapter_dma;
mod dma_bench;
mod explain;
mod failover;
mod fio;
mod gpu;
mod gpu_nvme;
mod lending;
mod multicast;
mod nbd;
mod nbd_durability;
mod nbd_stop;
mod nvme_client;
mod p2p;
mod pingpong;
mod progress;
mod regressions;
mod share;
mod sriov;
mod variation;
