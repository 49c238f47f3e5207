//! Workloads that run on an emulated cluster and measure it: the DMA bandwidth test (the
//! papers' `bandwidthTest`) and the engine's own speed.

#![forbid(unsafe_code)]

pub mod dma_bench;
pub mod engine_bench;
mod stats;

pub use dma_bench::{bench_dma, DmaBenchConfig, DmaBenchError, DmaDirection, DmaSample};
pub use engine_bench::{bench_engine, EngineBenchResult};
