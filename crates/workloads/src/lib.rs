//! Workloads that run on an emulated cluster and measure it: the DMA bandwidth test (the
//! papers' `bandwidthTest`), peer-to-peer bandwidth and ping-pong between devices (GPU to
//! GPU), ping-pong and remote-store throughput over NTB-mapped segments, and the engine's
//! own speed.

#![forbid(unsafe_code)]

pub mod adapter_dma_bench;
pub mod apps;
pub mod attach;
pub mod booted;
pub mod counts;
pub mod device_pingpong;
pub mod dma_bench;
pub mod driver_failure;
pub mod engine_bench;
pub mod explain;
pub mod failover;
pub mod fio;
pub mod gpu;
pub mod iperf;
pub mod migrate;
pub mod multicast_identify;
pub mod nbd;
pub mod nvme_client;
pub mod nvme_demo;
pub mod nvmeof;
pub mod p2p;
pub mod pingpong;
pub mod pio_bench;
pub mod progress;
pub mod share;
mod shm;
pub mod shm_demo;
mod stats;
pub mod topo_bench;
mod verify;

pub use adapter_dma_bench::{
    bench_adapter_dma, dma_queue_transfer, AdapterDmaBenchConfig, AdapterDmaBenchError,
    AdapterDmaBenchRun, AdapterDmaSetup, DmaQueueTransfer, DmaQueueTransferRun,
};
pub use attach::{AttachError, Workbench};
pub use booted::{BootError, Booted, Stuck, UnknownHost};
pub use device_pingpong::{
    device_pingpong, device_pingpong_explained, DevicePingPongConfig, DevicePingPongResult,
};
pub use dma_bench::{
    bench_dma, bench_dma_explained, bench_dma_run, copy_kind, host_pattern, DmaBenchConfig,
    DmaBenchError, DmaBenchRun, DmaDirection, DmaSample, SizeLimit,
};
pub use engine_bench::{bench_engine, EngineBenchError, EngineBenchResult};
pub use explain::{ExplainSpec, Explained, Explainer, Explanation, Operation, Target};
pub use failover::{
    failover, Completed, FailoverConfig, FailoverError, FailoverResult, IoFailure, RecoveryFault,
};
pub use fio::{run_fio, Amount, FioConfig, FioError, FioMethod, FioResult, RwMode, UnknownRwMode};
pub use gpu::{
    bench_gpu_bandwidth, bench_gpu_p2p, gpu_nvme_read, gpu_pingpong, gpu_pingpong_explained,
    CounterPlace, DrivenRead, GpuBandwidthConfig, GpuBandwidthResult, GpuCopyDirection,
    GpuNvmeConfig, GpuNvmeResult, GpuP2pConfig, GpuP2pResult, GpuPingPongConfig, GpuPingPongResult,
    GpuWorkloadError, RttStep, MAX_GPU_NVME_BYTES, MAX_STEPS,
};
pub use iperf::{
    iperf, run_iperf, IperfConfig, IperfEnd, IperfError, IperfInterval, IperfReport, IperfResult,
    IperfStream, IperfTiming, DEFAULT_WRITE_BYTES, IPERF_PORT,
};
pub use migrate::{
    migrate, vm_glance, Leftover, MigrateConfig, MigrateError, MigrateResult, MigrateStep,
    VmGlance, MAX_MIGRATE_BYTES,
};
pub use multicast_identify::{
    multicast_identify, MulticastIdentifyConfig, MulticastIdentifyError, MulticastIdentifyResult,
    Receiver,
};
pub use nvme_client::{client_qd1, ClientQd1Config, ClientQd1Error, ClientQd1Result};
pub use nvme_demo::{nvme_demo, NvmeDemoNamespace, NvmeDemoReport, NVME_DEMO_BYTES};
pub use nvmeof::{
    nvmeof_compare, Gap, InitiatorChoice, IoChoice, IoPath, NvmeofCompare, NvmeofConfig,
    NvmeofError, NvmeofIo, NvmeofRow, NvmeofStep, TargetMode,
};
pub use p2p::{bench_p2p, P2pConfig, P2pDirection, P2pError};
pub use pingpong::{pingpong, pingpong_explained, PingPongConfig, PingPongResult};
pub use pio_bench::{bench_pio, PioBenchConfig, PioSample};
pub use share::{
    jain_fairness, share_clients, ClientStep, ShareClient, ShareConfig, ShareError, ShareResult,
};
pub use shm::ShmError;
pub use shm_demo::{shm_demo, ShmDemoReport};
pub use smartio_smartio::DeviceInfo;
pub use stats::{LatencyRecorder, LatencySummary};
pub use topo_bench::{bench_topo, TopoBenchError, TopoBenchResult};
