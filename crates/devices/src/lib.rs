//! Device models. Each device owns its configuration identity, BAR layout and registers, and
//! runs its own agent (a DMA engine, a controller) through the [`smartio_platform`] traits. No
//! device knows about hosts' software, SmartIO, or which engine runs it.
//!
//! # Inside this crate
//!
//! Each device kind owns its configuration identity, BAR layout and behaviour. `kinds` gives the
//! layout of every kind a scenario may name (`nvme`, `gpu`, `dma`, `nic`) and checks its parameters;
//! `config` is a function's configuration space: a `RegisterBlock` of values with a write mask
//! and a write-one-to-clear mask per byte (every write goes through it, so read-only bits stay and
//! Status error bits clear on one); the type-0 header from the layout and assigned BARs, whose
//! masks answer BAR sizing (all-ones reads back `!(size − 1)` with the type bits, in both dwords
//! of a 64-bit BAR; writing the base back restores it — routing keeps using the fabric's
//! assignment, so a BAR moved elsewhere is not modelled); and capability lists built from
//! capability types (`Capability`/`ExtendedCapability`: id and registers) by a `CapabilityList`
//! that lays them out dword-aligned from 0x40 (extended ones from 0x100), links the next
//! pointers and sets Status.CapList. Types: `PciExpress`, `Msix`, `Msi`, `PowerManagement`,
//! `DeviceSerialNumber`, `SrIov`. `ConfigSpace::new` exposes PCI Express then, optionally, MSI-X;
//! `with_capabilities` takes any list. Offsets are found by walking the list (`walk`,
//! `ConfigSpace::capability`), never fixed; `msix` is the MSI-X table and pending-bit array a function keeps in a BAR. `dma` is
//! the DMA test device, a copy engine with registers in BAR0 and device memory in BAR2 that runs
//! as its own agent through the platform traits; a test's device-side task can wait for a word of
//! its memory to change (`wait_word`). Like the GPU's copy engines, a copy that wrote to a bus
//! address ends with a flushing read of its last bytes before the completion word is written:
//! PCIe orders the completion word behind the data only where they share a path, so a peer
//! copy whose data still queued on its last links (slower or busier than the way to the
//! completion word) was reported done before it landed (a 16 KiB copy to a peer on an x4 link
//! ran at 6 GB/s, above the link); a failed flushing read reports the copy failed. Every function reports INTA as its interrupt pin; the
//! drivers here use MSI-X.
//!
//! `SrIov` (`config::sriov`, Base Specification §9.3.3) is a PF's SR-IOV extended capability,
//! built from an `SrIovLayout` — the fabric's `SriovSpec` (TotalVFs, First VF Offset, VF Stride,
//! VF Device ID, VF BARs as `BarSpec`s): the fabric owns the description and the arithmetic. A register may also carry an `Accept` rule in the `RegisterBlock` (a write that
//! would leave it outside is dropped for that register), so the PF's rules stay in the one write
//! helper: SR-IOV Control's VF Enable, VF MSE and ARI Capable Hierarchy and NumVFs (0 to
//! TotalVFs) are writable; System Page Size takes only one bit of Supported Page Sizes (4 KiB
//! only, its reset value — other values are undefined in the specification and ignored here);
//! VF BARs size like BARs (`bar::lay_at`, at least a page); everything the device fixes is
//! read-only, and VF migration is not modelled. `ConfigSpace::sriov` reads back what the PF
//! driver programmed (`SrIovSettings`: NumVFs, VF Enable/MSE, VF BAR bases and sizes); VF n's
//! requester id (PF + First VF Offset + (n − 1) · Stride, `fabric::sriov::vf_bdf`) and its slice
//! of each VF BAR (`VirtualFunctions::slices_of`) are the fabric's, which makes the VFs exist. `config::functions` builds an
//! SR-IOV device's PF and VF configuration spaces (`SrIovFunctions`, handlers `PfConfig` and
//! `VfConfig`; the VF rules are described below). The DMA test device takes `params.vfs` (1 to
//! 64): each VF is a copy engine of its own with a 64 KiB register window (VF BAR0) and 1 MiB
//! of its own memory (VF BAR2).
//!
//! `ntb_dma` is the NTB adapter's own DMA engine (Paper I §6.1: Dolphin's adapters carry one,
//! which SISCI's DMA queues program; the PXH810's "handles 64 read requests in flight"). Every
//! NTB adapter has one, as a function of the adapter: its registers are a block of the
//! adapter's BAR0 (`ntb_dma::spec`: ID, CAPS, RING_BASE, RING_ENTRIES, DONE_ADDR, CONTROL with
//! ENABLE and ABORT, TAIL the doorbell, HEAD, STATE, ERROR), and it runs on the adapter
//! endpoint's own port, so its requests carry the adapter's requester id (its reads through its
//! window need an entry in the adapter's requester-id table like any device's) and, by the
//! fabric's rule above, go over the NTB without touching the adapter's link. The interface is
//! the model's own (Dolphin's registers are not public), shaped after what a SISCI DMA queue
//! needs: software writes 32-byte descriptors (local bus address, remote bus address, length,
//! FLAGS.READ for a pull, a status field) into a ring in host memory and writes TAIL; the
//! engine fetches them by DMA (16 a read), decodes and validates each — undefined flags, no
//! length, more than 1 GiB, an address that wraps are completed with their own
//! `DescriptorStatus` — and moves the bytes (`mover`): read requests of the MRRS in force,
//! aligned to it, at most `max_outstanding_reads` in flight (`[devices.ntb]`, 64 from Paper I),
//! each piece written on to the destination as its completions arrive while later reads are
//! out, then a read of the destination's last bytes, ordered behind the writes, before the
//! descriptor is reported `Done`. A failed read or write gives `ReadFailed` / `WriteFailed`;
//! the descriptors after a failure until the done word are `NotRun`; ABORT stops the reads and
//! completes what is posted `Aborted`. Once HEAD has caught up with TAIL the engine writes the
//! done word (HEAD with FAILED and ABORTED flags); a ring, status or done word it cannot reach
//! halts the queue (STATE Halted, ERROR RingUnreachable, the done word with HALTED if it can).
//! Register misuse — the ring changed while enabled, a ring of 0 or more than 4096 entries, a
//! misaligned ring or done word, a TAIL behind or past a full ring or on a stopped queue,
//! undefined CONTROL bits — is refused with its `RegisterError` in ERROR; read-only registers,
//! widths that are not whole registers and offsets outside the block are completer errors;
//! nothing panics. The throughput is the timed engine's: no rate is set in the model (the
//! start-up after a doorbell is `[devices.ntb] setup_ns`). Unit tests run it on a stand-in bus
//! that counts reads in flight itself.
//!
//! `gpu` is the GPU. `gpu::spec` is its programming interface, shared with the GPU runtime:
//! BAR0 registers, eight channels whose 64-byte command rings live in memory the GPU fetches by
//! DMA, error notices; BAR1 is an aperture onto the first `aperture` bytes of device memory.
//! The model is split by job: `memory` (device memory; every write wakes every waiter),
//! `regs` (BAR0/BAR1 and the MSI-X table, a vector per channel), `channel` (the front end:
//! fetch up to 64 entries per DMA read, decode, execute in order, stop on an error with
//! STATUS/ERROR/ERROR_INFO and a notice, RESET), `copy` (copy engines shared FIFO by channels;
//! a copy that wrote to the bus ends with a flushing read of its last bytes, whose completion —
//! ordered behind the posted writes — is the only proof they landed, so a timestamp or semaphore
//! behind a copy follows its data and longer paths show at small sizes; a profile's
//! `copy_bus_bandwidth` holds each piece until the engine's own rate would have moved it — the
//! K40c's 10.5 GB/s, its local bandwidthTest figure, is why Fig. 31's baseline sits below the
//! link),
//! `launch` and `kernel` (kernels are Rust closures in a `KernelLibrary`, run as one task per
//! thread with a `ThreadContext`: device-memory loads and stores at `memory_access` each, bus
//! accesses through the GPU's own port below `1 << dma_bits`, `wait_until` on device memory,
//! `poll_bus_until`, `atomic_add_u64` — atomic by construction, the engine being single-threaded
//! — and `clock64`). Costs come from a calibration `[gpu.*]` profile (`GpuTiming`);
//! scenario `params` are `profile`, `memory`, `aperture` (`gpu::params`).
//!
//! `nic` is a ConnectX-5-like 100 GbE NIC (issue 17), built per function from the start: a
//! `Nic` owns its functions (`NicFunction`: MAC address, eight queue pairs, MSI-X table with a
//! vector per queue pair, configuration space; its BAR0 is the function's `BarHandler`), each
//! function's DMA port (`start_function`; the physical function is index 0 and started by
//! `run`, virtual function `n` is index `n`), one Ethernet port and the internal switch. A
//! function reads its settings (MSI-X enable) from a `config::FunctionSpace`: its own
//! configuration space, or its place in an SR-IOV device's `SrIovFunctions` (`params.vfs`
//! gives the layout an SR-IOV capability, `nic::spec::sriov_spec`: each VF has the PF's BAR0
//! layout, so one driver binds to both). `nic::spec` is the
//! interface shared with the driver: BAR0 registers (ID, MAC, MTU, LINK, counters
//! RX_NO_BUFFER/TX_FRAMES/RX_FRAMES/WIRE_TX_FRAMES/WIRE_RX_FRAMES, per queue pair
//! TX/RX BASE, SIZE, TAIL doorbell, HEAD, IRQ, ERROR), 16-byte transmit and receive descriptors
//! written back with a `Status` (Ok, ZeroLength, TooShort, TooLong, DmaFailed, BufferTooSmall),
//! and `RingError` codes (Misaligned, BadSize, BadTail, Disabled, DescriptorDma) a ring that
//! cannot be enabled or a refused doorbell leaves in ERROR — never a panic. `queues` holds a
//! queue pair's rings and validates them when SIZE is written; `datapath` runs one transmit
//! engine per queue pair (descriptors fetched `fetch_batch` at a time, up to `tx_pipeline`
//! buffers read at once, then in ring order: per-frame cost, the eswitch or the port, status
//! write-back, HEAD, MSI-X) and one receive engine per NIC (frames taken from the port's queue
//! when due, written into the next posted buffer of the function's first enabled receive ring,
//! then the descriptor; with none posted the frame is dropped and counted). `switch` is the
//! eswitch's rule (a frame to another function's MAC goes straight to its receive path, costing
//! `eswitch` and DMA only; a group address to the other functions and the wire; anything else to
//! the wire; from the wire only to the addressed function). `port` serializes at line rate
//! (`ethernet::wire_bytes` × 8 / rate, FIFO) and keeps the frames due at the NIC in a bounded
//! queue (1024; beyond that dropped and counted). `network` is the cluster's Ethernet: named
//! segments (`params.network`) — two ports are a cable (serialization, then
//! `wire_propagation_ns`), three or more a store-and-forward switch that learns source
//! addresses, floods unknown and group destinations, waits `switch_hop_ns` and serializes again
//! on each egress link, FIFO per direction so senders to one port contend. Costs come from a
//! calibration `[nic.*]` profile (`NicTiming`) and `[network]` (`NetworkTiming`); scenario
//! `params` are `profile`, `mtu` (1500 or 9000), `network`, `mac` (`nic::params`).
//!
//! `nvme` is an NVMe controller (base specification 1.4 subset), written from the specification:
//!
//! - `spec`: shared with drivers the way `nvme.h` is — the class code, registers and their
//!   fields by name (CAP, CC, CSTS, AQA, CMBSZ), Identify offsets, features and log pages;
//!   `command` is the 64-byte entry (`Command`, `encode`/`decode`, FUSE/PSDT `Flags`); `admin`
//!   and `io` hold the opcodes and the typed commands (`AdminCommand`, `IoCommand`: QID, QSIZE,
//!   PC, IEN, IV, CQID, CNS, FID, LID, NUMD, SLBA, NLB… by name) that drivers build a `Command`
//!   from and the controller decodes one into (decoding is total; checking values is the
//!   controller's); `completion` is the 16-byte entry and `Status { sct, sc, dnr }` laid out as
//!   the status field says (P, SC, SCT, CRD, M, DNR), DNR set for every failure but aborts.
//! - `controller`: BAR0 registers (CAP with MQES/CQR/TO/DSTRD/CSS/CMBS, VS, INTMS/INTMC, CC,
//!   CSTS, AQA/ASQ/ACQ, CMBLOC/CMBSZ), doorbells with the CAP stride, the MSI-X table (0x2000) and
//!   PBA (0x3000) in BAR0; CC.EN 1→0 resets every queue and drops in-flight work (a generation
//!   count), CSTS.RDY follows after the profile's delay; a main task arbitrates round-robin over
//!   the submission queues that exist (`queues::SubmissionQueues` keeps their ids in order, so a
//!   pass visits only those, not every slot), fetching up to the Arbitration burst per queue per
//!   turn (one fetch in flight per queue); one task per command; completions wait for a free CQ slot, carry the SQ
//!   head and the phase tag, and are followed by the queue's MSI-X message. A function without
//!   bus mastering does not fetch. An optional controller memory buffer in BAR2 can hold
//!   submission queues (fetches from it cross no link). Interrupts are MSI-X only: INTMS/INTMC are
//!   kept as registers but there is no pin or MSI interrupt to mask.
//! - `admin`: Identify (controller, namespace, active namespace list), Create/Delete I/O SQ and
//!   CQ with the specification's checks and statuses, Set/Get Features (Number of Queues,
//!   Arbitration, Interrupt Coalescing), Get Log Page (error information, SMART/health), Abort
//!   (of a command still in its queue).
//! - `io`: Read, Write, Flush, Write Zeroes, Dataset Management (Deallocate: every range of
//!   the list is checked before any is deallocated; deallocated blocks read as zeroes, as
//!   Identify Namespace's DLFEAT says); namespace, range and MDTS (128 KiB) checks. Write
//!   Zeroes and deallocation give sparse memory's whole pages back.
//! - `prp`: the one PRP module. `build` (pure, the drivers' side) gives PRP1/PRP2 and the
//!   contents of the PRP list pages for a buffer, chaining list pages when given several;
//!   `walk` (the controller's side) reads PRP1/PRP2 and chained lists from host memory into
//!   ranges, offsets checked. Memory pages are `platform::PAGE_SIZE` (CC.MPS = 0).
//! - `media`: the time a command takes, by profile (calibration `[nvme.*]`): an admission stage
//!   (one command per 1/IOPS or bytes/bandwidth) and parallel units each busy for the media
//!   latency. QD1 sees the bare latency; throughput under load is bounded by the profile or, when
//!   the profile is faster, by the engine's costing of the link (x4).
//! - `namespace`: namespace blocks in sparse memory or in one file (data persists between runs).
//! - `params`: the scenario parameters (`profile`, `backing`, `queues`, `namespaces`,
//!   `capacity`, `lba_size`, `cmb`).
//! - `testing` (tests only): a controller driven as a driver drives it — registers and
//!   doorbells through BAR0, queues and data in the device world's memory, completions read
//!   back — on which `controller`, `admin` and `io` are tested command by command.
//!
//! `testing` (tests only) is the device world the models' unit tests run in: flat memory
//! behind a port, a virtual clock, logs of every DMA access, reads held on request, and an
//! executor that polls only what was woken and moves time when every task waits.

#![forbid(unsafe_code)]

pub mod config;
pub mod dma;
pub mod ethernet;
pub mod gpu;
pub mod kinds;
pub mod msix;
pub mod nic;
pub mod ntb_dma;
pub mod nvme;

pub use kinds::{layout_for, DeviceKind, ParamError, UnknownDeviceKind};

#[cfg(test)]
pub(crate) mod testing;
