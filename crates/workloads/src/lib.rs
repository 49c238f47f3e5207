//! Workloads that run on an emulated cluster and measure it: the DMA bandwidth test (the
//! papers' `bandwidthTest`), peer-to-peer bandwidth and ping-pong between devices (GPU to
//! GPU), ping-pong and remote-store throughput over NTB-mapped segments, and the engine's
//! own speed.
//!
//! # Inside this crate
//!
//! Workloads that run on a cluster and measure it: the DMA bandwidth test (like CUDA's
//! `bandwidthTest`: copies timed from the first register write until the CPU sees the completion
//! word), ping-pong between two hosts' CPUs through NTB-mapped segments (like `ntb_pingpong`),
//! remote-store throughput, the engine's own speed (TLP arrivals per wall-clock second), and
//! `fio`: a fio-like block workload through the native NVMe driver (sequential or random reads,
//! writes or a mix; queue depth per job, one queue pair per job; by I/O count or virtual
//! run time; latency from submission to completion in an HdrHistogram; `--verify` keeps a
//! version per block, never lets two I/Os overlap a block, and checks every byte read).
//! `booted::Booted::boot` is the one way to get a cluster's hosts booted with SmartIO over them
//! (every function registered) and look hosts up; `Workbench`, the distributed-driver fio backend,
//! the device-API workloads and the device-API fuzz target all start there.
//! `attach::Workbench` is how every workload gets its device: the host's own, or
//! `lender:device` borrowed by Device Lending (all hosts booted, SmartIO started, functions
//! registered); the workload then drives it through the same handle and driver either way.
//! A workbench for `host/vm` creates the VM (memory backed, guest kernel booted) and runs the
//! workload on the guest kernel; its devices are passed through (`lender:device` by MDEV, the
//! VM's host's own by VFIO) when the first one is attached, and `detach` shuts the VM down.
//! `migrate` moves a VM with an NVMe between two hosts (cold), checking the data and that the
//! first host's tables are free again; `vm_glance` is the demo's look at a running VM.
//! `fio` has two backends behind one I/O loop: the native driver, or a distributed-driver client
//! (`FioMethod::NvmeClient`, one queue pair per job).
//!
//! The distributed-driver experiments: `client_qd1` (SQ placement, with the timing model's
//! account of each SQE fetch: chips crossed, path, completer and SQE-store costs),
//! `share_clients` (many clients, verified, fairness, the refused extra queue pair),
//! `multicast_identify` and `failover` (two paths, a cut cable, link-event or timeout detection,
//! nothing lost or written twice, checked against the controller's SMART counts and every byte).
//!
//! `adapter_dma_bench` (`bench dma --adapter`) is Paper I Fig. 4(a): the host's adapter 0 DMA
//! engine, through the driver's queue, pushes a segment of the host's RAM into a segment of the
//! peer's (the host its adapter is cabled to) through the adapter's window, or pulls it back;
//! each copy timed from the first descriptor store to the status seen, the largest compared byte
//! for byte; its result also carries the timing model's idle round trip of one read request to
//! the remote side, which `repro` uses to say why a figure comes out as it does.
//!
//! `gpu` holds the GPU workloads, measured the way the papers measured them, all through the
//! GPU runtime on device handles (local or borrowed, or in a VM): `bench_gpu_bandwidth` (CUDA
//! `bandwidthTest`: pinned memory, copies queued between two events, GPU-side time),
//! `bench_gpu_p2p` (peer copies into the target's BAR1 aperture, each between two events with a
//! dummy kernel after it; a size's copies are queued behind a `wait_value` gate and released
//! together, so the intervals hold the GPU's work only) and `gpu_pingpong` (a ping kernel and a
//! pong kernel storing a counter into each other's memory or into host RAM, round trips timed by
//! `clock64` and converted with the GPU's clock). Each reads the moved bytes back and compares
//! them (`verified_bytes`). `gpu::nvme` (`gpu_nvme_read`) reads a namespace through
//! `drivers::nvme_gpu`'s GPU-resident queues and, for comparison, through an ordinary client
//! queue pair driven by the CPU at the same depth and chunk (`exp gpu-nvme`).
//!
//! The applications (training, video) are `smartio-apps`; NVMe-oF is `smartio-nvmeof`; iperf
//! is `smartio-net`. They build on this crate's `booted`, `attach`, `gpu`, `fio` and `progress`.
//!
//! Latency statistics go to `stats::LatencyRecorder` (exact count, min, max and sum; exact
//! percentiles while a run has at most 4096 distinct values, an HdrHistogram beyond), so memory
//! does not grow with a run's length. `progress` lets long runs say how far they are; the CLI
//! shows it on a terminal. A run that ends with its workload unfinished returns the engine's
//! account of every waiting task (`booted::stuck`).
//!
//! `nbd` exports an NVMe namespace, as one host sees it, to real NBD clients (`NbdExport`): it
//! binds the native driver or connects a distributed-driver client through the `fio` backends,
//! gives the host one I/O buffer per queue entry (a `FifoPool`: waiting requests get them oldest
//! first), and
//! `serve` runs the one simulation thread: requests arriving from the connections' threads
//! join at the virtual time reached, the virtual clock runs in slices of 100 µs while any are in
//! flight (and stands still between bursts; a burst starts where the clock stands), each request
//! is cut into MDTS-sized transfers on the next queue pair (a write-zeroes into commands of
//! 65,536 blocks; a trim is one deallocation), and the answers finished in a slice go
//! out together, one write per connection (measured with fio at QD32: 20 µs slices gave ~31k
//! requests/s, 100 µs ~33k, 500 µs ~25k — the client waits for answers the slice holds back). With
//! nothing in flight after a burst the loop keeps looking for the next request for `IDLE_SPIN`
//! (200 µs, yielding the CPU between looks) before it sleeps: waking a sleeping thread cost a
//! fio QD1 read about half of its latency on a 2-vCPU virtual machine. It keeps each request's
//! virtual and wall latency apart, counts the emulation's events and TLPs while serving, and
//! reads the controller's command counts from its SMART log (`io_commands`: a 4 KiB request is
//! one NVMe command, a larger one one per MDTS). The export offers FLUSH and FUA: a FLUSH is an
//! NVMe Flush, a request with `NBD_CMD_FLAG_FUA` its commands and then a Flush (as Linux's block
//! layer serves a device without FUA; the NVMe FUA bit is not modelled), and what a Flush makes
//! durable is the namespace store's business (`devices::nvme::NamespaceStore::flush`: a backing
//! file's `fdatasync`, memory nothing; its `on_sync` hook lets tests count the syncs and fail
//! one). `nbd/durability.rs` numbers the writes acknowledged without FUA and which of them a
//! successful Flush covered, so `make_durable` can flush the rest when serving ends and name how
//! many are at risk if that fails. `nbd/connections.rs` is the connection table and the stop: on
//! the stop flag, requests in flight are finished and answered, later ones answered ESHUTDOWN
//! (counted `dropped`) until the clients leave or fall quiet (`STOP_QUIET`, 250 ms; `STOP_GRACE`,
//! 5 s, at most), then every connection is closed once its answers are written (`hang_up`:
//! requests its reader still hands on are counted dropped and unanswered) and serving returns
//! only when every writer thread has ended — so the figures account for every request read,
//! and no answer is lost when the process exits.

#![forbid(unsafe_code)]

pub mod adapter_dma_bench;
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
pub mod migrate;
pub mod multicast_identify;
pub mod nbd;
pub mod nvme_client;
pub mod nvme_demo;
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
    GpuSizeLimit, GpuWorkloadError, RttStep, MAX_GPU_NVME_BYTES, MAX_STEPS,
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
pub use p2p::{bench_p2p, P2pConfig, P2pDirection, P2pError, P2pRoom};
pub use pingpong::{pingpong, pingpong_explained, PingPongConfig, PingPongResult};
pub use pio_bench::{bench_pio, PioBenchConfig, PioSample};
pub use share::{
    jain_fairness, share_clients, ClientName, ClientStep, ShareClient, ShareConfig, ShareError,
    ShareResult,
};
pub use shm::ShmError;
pub use shm_demo::{shm_demo, ShmDemoReport};
pub use smartio_smartio::DeviceInfo;
pub use stats::{LatencyRecorder, LatencySummary};
pub use topo_bench::{bench_topo, TopoBenchError, TopoBenchResult};
