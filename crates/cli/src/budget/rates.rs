//! What a unit of each command's work costs on the emulator: wall time per byte moved, per
//! I/O, per round trip, per frame, and memory per buffer byte. Each figure was measured on
//! the project's 2-core machine with the release build while other builds shared it (a
//! busy machine: about 1.5 to 2 times slower than an idle one), from runs of 1 to 60 s
//! (the command and what it took are beside each figure), and rounded up. The models in
//! [`super::models`] multiply them by the work an input asks for.

/// Seconds every command spends before and after its work (parse, build and boot a
/// cluster, print): `devices --scenario cascade-60` 0.01 s; on the largest scenario the
/// limits allow (10 000 hosts under three levels of cluster switches, as `bench topo`
/// builds it) `devices` 0.43 s, `exp share-30 --ops 100` 0.37 s.
pub const START_S: f64 = 0.5;

/// Memory every command holds before its work: a booted cluster of the largest scenario the
/// limits allow (10 000 hosts: `devices` 264 MB, `exp share-30 --ops 100` 315 MB; a shipped
/// scenario 15 to 150 MB).
pub const START_MEMORY: u64 = 320 << 20;

/// Nanoseconds per byte a DMA test device moves between its memory and host RAM, local or
/// borrowed: `bench dma --scenario local-chassis --sizes 64M --repeat 16` (1 GiB written)
/// 2.5 s; reads 1.5 s.
pub const DMA_NS_PER_BYTE: f64 = 2.5;

/// Nanoseconds per byte a device's reads cost when they cross a lender's root complex
/// with its IOMMU on, which re-issues them as 64-byte requests (`[root_complex]
/// forwarded_read_request_bytes`): `bench dma --scenario back-to-back-lender-iommu --host
/// borrower --device lender:dma0 --sizes 64M --repeat 8 --direction read` (512 MiB) 8.1 s;
/// `bench gpu-bandwidth` there, `--sizes 64M --copies 8` host to device, 7.0 s.
pub const CUT_READ_NS_PER_BYTE: f64 = 17.0;

/// Nanoseconds per byte a GPU's copy engine moves (host RAM and device memory, or peer to
/// peer): `bench gpu-bandwidth --scenario local-chassis --sizes 64M --copies 16 --repeat 1`
/// (1 GiB) 1.9 s, borrowed 2.1 s, `bench gpu-p2p ... --sizes 64M --repeat 16` 1.7 s — less
/// the 64 MiB buffers' set-up, [`BUFFER_NS_PER_BYTE`].
pub const GPU_NS_PER_BYTE: f64 = 1.2;

/// Nanoseconds per byte of an NTB adapter's DMA engine, RAM to remote RAM through a DMA
/// queue: `bench dma --adapter --sizes 1M --repeat 64` (64 MiB) 3.0 s, `--sizes 16M
/// --repeat 4` 3.2 s.
pub const ADAPTER_NS_PER_BYTE: f64 = 45.0;

/// Nanoseconds per byte of a CPU's write-combined remote stores: `bench pio --scenario
/// back-to-back --from borrower --to lender --sizes 4M --repeat 64` (256 MiB) 1.2 s.
pub const PIO_NS_PER_BYTE: f64 = 6.0;

/// Nanoseconds per byte `bench engine` streams: `bench engine --bytes 8G` 9.8 s.
pub const ENGINE_NS_PER_BYTE: f64 = 1.5;

/// Nanoseconds per byte of a transfer size to set its buffers up and check them (allocate
/// and fill the source, compare what arrived), once per size: `bench gpu-bandwidth
/// --sizes 512M --copies 1 --repeat 1` 8.5 s, `bench dma --sizes 256M --repeat 1` 4.0 s.
pub const BUFFER_NS_PER_BYTE: f64 = 16.0;

/// Memory per byte of the largest transfer size, as a multiple: source, destination and
/// the copy read back (`bench dma --sizes 256M --repeat 1`: 800 MB; `bench gpu-bandwidth
/// --sizes 512M`: 1.1 GB; `bench gpu-p2p --sizes 64M`: 280 MB, two GPUs' memories too).
pub const DMA_BUFFERS: u64 = 3;
/// As [`DMA_BUFFERS`], for a GPU's copies (host and device memory).
pub const GPU_BUFFERS: u64 = 3;
/// As [`DMA_BUFFERS`], for copies between two devices' memories.
pub const P2P_BUFFERS: u64 = 5;

/// Seconds per round trip of a ping-pong between two hosts' CPUs: `pingpong --scenario
/// back-to-back --from borrower --to lender --iterations 1000000` 2.5 s.
pub const CPU_ROUND_TRIP_S: f64 = 3.5e-6;

/// Seconds per round trip between two devices (DMA test devices) — `pingpong --scenario
/// vm-back-to-back --host borrower --device-a lender:dma0 --device-b lender:dma1
/// --iterations 100000` 0.14 s — or two GPUs' kernels — `pingpong --scenario
/// cluster-switch --host borrower --device-a lender:gpu0 --device-b lender2:gpu2 --gpu
/// --iterations 1000000` 4.9 s.
pub const DEVICE_ROUND_TRIP_S: f64 = 7.0e-6;

/// Seconds per NVMe I/O of fio, besides its bytes: `fio --scenario local-chassis --host
/// local --device nvme0 --ops 1000000` 15 s; `--iodepth 64 --jobs 4 --ops 1000000` 20 s;
/// borrowed, through a distributed-driver client or the block client, or in a VM: no more
/// per I/O.
pub const IO_S: f64 = 20e-6;

/// Nanoseconds per byte of an I/O: `fio ... --bs 128k --ops 100000` 12 s.
pub const IO_NS_PER_BYTE: f64 = 1.0;

/// The most I/Os per second of virtual time a fio run by `--runtime` is reckoned to do:
/// per I/O slot (job × depth) one every 8 µs (a local Optane read at QD1 takes about 10),
/// and no more than 800 000 in all (the controller's media limit is about 550 000): `fio
/// ... --iodepth 32 --jobs 4 --runtime 1s` 9.0 s, `--runtime 1s` at QD1 1.3 s.
pub const IO_SLOT_S: f64 = 8e-6;
/// See [`IO_SLOT_S`].
pub const MAX_IOPS: f64 = 800_000.0;

/// Bytes of host memory a written namespace block holds at the least: the emulated
/// namespace keeps written data in 4 KiB pages (`fio --rw randwrite --ops 300000` over the
/// default 1 GiB range: 0.76 GB, its 179,000 or so distinct blocks).
pub const WRITTEN_PAGE: u64 = 4 << 10;

/// Seconds of wall time per second of virtual time of iperf, for the run and per stream:
/// `iperf ... --client borrower=lender:nic0 -t 100ms` 3.2 s (one stream), two clients × 8
/// streams for 50 ms 8.9 s, two × 64 streams for 10 ms 8.6 s.
pub const IPERF_S_PER_S: f64 = 30.0;
/// See [`IPERF_S_PER_S`].
pub const IPERF_S_PER_S_PER_STREAM: f64 = 10.0;

/// Memory per iperf stream: its socket buffers (the calibration's send buffer and receive
/// window, 4 and 6 MiB at most): two × 64 streams held 786 MB.
pub const STREAM_MEMORY: u64 = 10 << 20;

/// Bytes one iperf report row of one stream holds (both ends' counts and rates).
pub const REPORT_ROW: u64 = 64;

/// Seconds per video frame (decode, copies, kernel, check): `app video --streams 20
/// --frames 100` 16 s; `exp video` (6528 frames) 47 s, `--ops 48` 107 s.
pub const FRAME_S: f64 = 8e-3;

/// Memory per video frame of a run: `app video --streams 2 --frames 100` 62 MB, `--streams
/// 20` 88 MB.
pub const FRAME_MEMORY: u64 = 32 << 10;

/// Seconds per training image per epoch: `app train --scenario local-chassis --host local
/// --gpus gpu0,gpu1 --nvme nvme0 --images 8000 --epochs 1` 11.7 s.
pub const IMAGE_S: f64 = 2e-3;

/// Memory per training image (a 224×224 RGB record, 147 KiB, held by the loader and on the
/// NVMe): `--images 8000` 1.26 GB.
pub const IMAGE_MEMORY: u64 = 160 << 10;

/// Seconds per host of bringing a cluster up (`bench topo --hosts 10000` 0.22 s), and
/// memory per host (247 MB).
pub const HOST_S: f64 = 50e-6;
/// See [`HOST_S`].
pub const HOST_MEMORY: u64 = 32 << 10;

/// The whole `repro` set on this machine: 67 s busy (36 s idle, README), 480 MB; a
/// statement is its share of it.
pub const REPRO_S: f64 = 50.0;
/// See [`REPRO_S`].
pub const REPRO_MEMORY: u64 = 768 << 20;

/// `demo`: 0.7 s (2.0 s busy), 155 MB.
pub const DEMO_S: f64 = 4.0;
/// See [`DEMO_S`].
pub const DEMO_MEMORY: u64 = 256 << 20;

/// A trace's slices (`--trace`), each a TLP's crossing or a step of a job: how many a
/// second of a run's work makes (`fio ... --ops 2000 --trace t.json --trace-limit 5000000`:
/// 288 000 slices for the 40 ms its model gives 2000 I/Os), and what each costs to keep
/// and write — that run 1.5 s and 880 MB, `--ops 20000` (5 million slices) 25 s and 8.4 GB.
pub const TRACE_SLICES_PER_S: f64 = 10e6;
/// See [`TRACE_SLICES_PER_S`].
pub const TRACE_SLICE_S: f64 = 5e-6;
/// See [`TRACE_SLICES_PER_S`].
pub const TRACE_SLICE: u64 = 3 << 10;

/// Memory of a recorded run (`--breakdown`, `--trace`): the recording keeps the last 2^18
/// steps.
pub const RECORDING_MEMORY: u64 = 256 << 20;
