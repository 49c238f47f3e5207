//! Drivers. Each is written against the [`smartio_platform`] traits only, the way a native
//! driver is written against its kernel's API: it cannot tell which engine runs it, nor
//! whether its device is local or borrowed.
//!
//! # Inside this crate
//!
//! Drivers written against the platform traits and the OS model's device handle, the way a native
//! driver is written against its kernel: `DmaTestDriver` probes the DMA test device by its ID
//! register, programs a copy, rings the doorbell and polls the completion word.
//!
//! `ntb_dma` is the driver of an adapter's DMA engine, shaped after SISCI's DMA queues so the
//! SISCI API can be carried out on it: `AdapterDmaQueue::create` (`SCICreateDMAQueue`: a ring
//! of `maxEntries` and the done word in host memory given as CPU and bus addresses), `post`
//! (`SCIStartDmaTransferVec`: descriptors stored by the CPU, TAIL rung through BAR0; refused
//! when the ring has no free slot — a slot is free once its batch has been waited for), `wait`
//! (`SCIWaitForDMAQueue`: the done word watched in host memory, then each transfer's status),
//! `state` (`SCIDMAQueueState`: idle, posted, done, error, aborted, halted), `abort` and
//! `remove`; a refused register write comes back from ERROR as `AdapterDmaError::Refused`.
//!
//! `nvme` is the native NVMe driver (`NvmeDriver`, bound by class 01:08:02): probe enables the
//! function, resets the controller (CC.EN = 0, wait for RDY = 0 within CAP.TO), places the admin
//! queues in coherent DMA memory, enables MSI-X (interrupt mode), enables the controller,
//! identifies the controller and every active namespace, asks for one I/O queue pair per CPU
//! (Set Features, Number of Queues) and creates them. The block layer (`submit`) charges the
//! calibrated submit cost, takes a tag (command id) on the CPU's queue (waiting when the queue
//! depth is used up), maps the buffer with the DMA API, builds PRP1/PRP2 or a PRP list in the
//! tag's list page (`devices::nvme::prp::build`), writes the command (built from the typed
//! `AdminCommand`/`IoCommand` of `devices::nvme::spec`, as every command of both drivers is)
//! and rings the doorbell; completions arrive by MSI-X to a
//! handler task that reaps the CQ and moves its head doorbell, or by the submitter polling its
//! CQ. `admin_raw`/`io_raw` are the passthrough path. Unbind deletes the I/O queues, disables
//! the controller and frees everything.
//!
//! `nvme_dist` is the distributed NVMe driver (Paper V §6.2), written on the device API only —
//! which is why `drivers` sits above `smartio` (the native drivers use only the OS model; the
//! smartio crate's own tests use the drivers as a dev-dependency). The `Manager` takes the
//! controller exclusively, maps BAR0 for its CPU, places the admin queues in segments, resets,
//! enables and identifies the controller, asks for every I/O queue pair, downgrades to a shared
//! hold and publishes where it runs in a segment. It hands out queue ids and records owners;
//! `create_pair`/`delete_pair` are relayed admin work, a control message each way
//! (`[smartio] control_message_ns`); `sweep` deletes the queues of clients whose hold is gone.
//! A `Client` checks the published manager, maps the doorbells, places its SQ by
//! `SqPlacement` (hints, its RAM, the lender's RAM, device memory, or another held device's
//! memory such as a GPU next to the controller) and its CQ in its RAM, and then submits, rings
//! and polls by itself (the native driver's `QueuePair`), with data and PRP lists (the same
//! `prp::build`) in its own segments. Shared windows take whole look-up-table entries, so the many small segments of one
//! host share an entry. The manager also relays Identify into any buffer the device can write
//! (`identify_to`, a multicast group included) and reads the SMART command counts
//! (`io_commands`). For failover, `Client::connect_via` pins a client to one NTB adapter,
//! `io_within` gives up on a command when a future (timeout, link event) resolves first, and
//! `abandon_queue` has the manager delete a lost pair — the controller finishes or aborts what it
//! had fetched before answering — so a program can check what a command it gave up on did
//! before issuing it again.
//!
//! The manager's published segment (`publication`) carries its host, the queue count and
//! entries, the largest transfer, the model and up to 1024 namespaces; clients bootstrap from it
//! (`Client::connect_sized`) and refuse a malformed one field by field. `BlockClient` (`block`,
//! `bounce`) is seed 003's kernel-space client: one queue pair per block-layer hardware queue, a
//! disk registered with the host's block layer (`snvme0`), and a bounce buffer — one DMA segment
//! mapped for the controller once, cut into equal per-request slots whose PRP lists are written
//! at start — through which every request's bytes are really copied (`[cpu]
//! memcpy_bytes_per_ns`; before the command for writes, after the completion for reads); a
//! request waits for a free slot, and a per-queue poller reads the CQ every `poll_interval_ns`
//! while requests are outstanding. `fio --method nvme-block` runs it.
//!
//! `gpu` is the GPU runtime, shaped like the CUDA runtime (`GpuContext::open` on a device
//! handle, `malloc`/`free`, `host_alloc`, `create_stream`, `create_event`/`elapsed`,
//! `enable_peer_access`, `load_kernel`, `memcpy`, `close`; `Stream::wait_value` is
//! `cuStreamWaitValue64`, an ACQUIRE on device memory). It binds only through the device
//! handle, so it runs unchanged on a local GPU and on a shadow device. A `Stream` holds one of
//! the GPU's channels: its ring (1024 entries) and a control block (semaphore, error notifier)
//! live in coherent DMA memory. An asynchronous call charges `[gpu_runtime] call_ns`, writes
//! its entries with CPU stores and writes `PUT` through BAR0 — for a borrowed GPU that doorbell
//! crosses the NTB. The runtime never reads `GET`: RELEASE entries write the ring position into
//! the semaphore (at every `synchronize` and every quarter of the ring), and ring space and
//! completion are watched there in host memory (`MemoryWatch`), then `sync_ns` is charged. A
//! channel error arrives as the notifier's `ErrorNotice` and becomes `GpuError::Channel` at
//! `synchronize`; the stream resets its channel and is usable again. Events are 8-byte slots that
//! TIMESTAMP entries fill with the GPU's timer. A BAR0 access that no longer decodes (the NTB
//! window of a returned device, a removed function) makes the context `DeviceGone` for good;
//! `close` gives back every channel, pinned page, peer mapping and device range.
//! `gpu::memory::DeviceAllocator` is first fit from offset 0, 256-byte granules, so small
//! allocations land in the BAR1 aperture that peers reach (`PeerAccess::addr`).
//!
//! `nic` is the NIC driver (`NicDriver::probe` on a device handle, so the same code binds a
//! local function and a borrowed one): it enables the function, maps BAR0, checks the ID
//! register, reads MAC, MTU and LINK, places `queue_pairs` transmit rings and one receive ring
//! (queue pair 0, where the NIC steers the function's frames) with their buffers in coherent DMA
//! memory, posts every receive buffer and checks each queue's ERROR. It implements
//! `net::FrameLink`: `send` picks the transmit queue by flow (destination and the transport's
//! ports, hashed as transmit steering does: a flow keeps its order, flows go out in parallel), waits while the ring is full by watching the oldest descriptor's write-back, copies
//! the frame and rings TX_TAIL; `recv` polls the next receive descriptor in host memory
//! (`MemoryWatch`, no MSI-X), copies the frame out and re-posts buffers a quarter ring at a time.
//! A failed register access means the device is gone (`LinkError::Gone` from then on); `recv`
//! reads LINK whenever it finds nothing ready, so a receiver on a returned device fails instead of
//! waiting. `counters` and `rx_dropped` read the NIC's counters.
//!
//! `nvme_gpu` is GPU-initiated NVMe I/O the libnvm way (Paper V §6.4, Fig. 18): a queue pair of
//! the distributed driver whose SQ, CQ, PRP lists and data buffers live in GPU memory
//! (`GpuQueue::create`: device memory in the BAR1 aperture, exported with
//! `SmartIo::local_device_segment` and mapped for the NVMe; the pair created by the manager
//! through `Client::create_queue_at`; the client's map of the NVMe's BAR0 DMA-mapped for the GPU,
//! which is registered as a peer requester). Its kernel (`read_kernel`) has worker threads that
//! take tickets with `atomic_add_u64`, write the SQE and PRP list, ring the SQ tail doorbell in
//! ticket order through the GPU's own port and check every byte of their chunk in GPU memory,
//! and a reaper thread that polls the CQ phase tag, records statuses and rings the CQ head
//! doorbell — no CPU on the data path.
//!
//! `net` is a host's network stack over any interface that implements `net::FrameLink` (frames
//! out and in; a NIC driver, or `net::wire`, a point-to-point test wire with a line rate, a
//! delay and losses on purpose). `segment` is the wire format (40-byte header, the size of the
//! IPv4 + TCP headers it stands for, 64-bit byte sequence numbers); `connection` is one
//! connection's protocol without time or I/O (handshake, in-order receive with cumulative
//! acknowledgements every second segment, go-back-N after three duplicate acknowledgements, the
//! tail-loss probe or the retransmission timeout, receive windows and window probes, FIN);
//! `congestion` is Reno's window (RFC 5681); `rtt` the sender's smoothed round trip (RFC 6298,
//! Karn's rule), which times the tail-loss probe (RFC 8985: max(2 × SRTT, the calibrated floor,
//! 10 ms as Linux 4.x), so a lost last segment costs milliseconds, not the 200 ms minimum
//! retransmission timeout); `stack` sorts received frames to connections and listeners (resets for
//! nobody) and `stream` is the socket-like API (`connect`, `listen`/`accept`, `write`, `read`,
//! `close`). Costs (`[net_stack]`: per segment sent and received, copies, minimum timeout,
//! buffer sizes) are charged in the task that does the work — a connection's segments wait in
//! its own queue until its writer or reader processes them, as Linux processes a socket's
//! backlog in its owner's context — so streams on different cores run in parallel and only the
//! wire is shared.

#![forbid(unsafe_code)]

pub mod dma;
pub mod gpu;
pub mod net;
pub mod nic;
pub mod ntb_dma;
pub mod nvme;
pub mod nvme_dist;
pub mod nvme_gpu;
pub mod sisci_dma;

pub use dma::{DmaTestDriver, DriverError, Location};
pub use gpu::{
    DeviceBuffer, Event, GpuContext, GpuError, GpuProperties, HostBuffer, PeerAccess, RuntimeCosts,
    Stream,
};
pub use ntb_dma::{AdapterDmaError, AdapterDmaQueue, Batch, QueueMemory, QueueView};
pub use nvme::{
    BlockOp, CompletionMode, NvmeDevice, NvmeDriver, NvmeDriverConfig, NvmeError,
    UnknownCompletionMode,
};
pub use sisci_dma::{SisciDmaError, SisciDmaQueue};
