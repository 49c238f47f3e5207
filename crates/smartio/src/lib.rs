//! The SmartIO layer.
//!
//! [`sisci`]: SISCI-shaped shared-memory segments over NTBs — create, prepare, connect, map
//! for the CPU, sequences, data interrupts and multicast. [`lending`]: Device Lending and
//! the device-oriented API, SISCI's extension: its segments are SISCI segments (one record,
//! one allocator per host). Every call fails with the one [`SciError`], classed by SISCI's
//! error codes ([`SciErrorClass`]).
//!
//! # Inside this crate
//!
//! `lending`: the SmartIO service and Device Lending (Paper V §3–§4). One `SmartIo` value stands
//! for the SmartIO drivers of all hosts, over their `HostOs` kernels. `lending/mod.rs` holds only
//! the `SmartIo` and service state types and the re-exports; one file per job:
//! `registry.rs` (fdids, registration, listing, look-up, a device's faults), `borrow.rs`
//! (borrow and return: the BAR, DMA and MSI windows, the shadow device's handle), `path.rs`
//! (which adapter pair joins two hosts, `Via` pinning, `DeviceSide::reach`/`expose` — how a lent
//! device reaches an address — and peer-to-peer resolution), `grants.rs` (the ledger of taken
//! resources), `shadow.rs` and `api.rs`.
//!
//! - Registry: lenders register functions (`register`, `register_all` skips NTB adapters);
//!   each gets a cluster-wide `Fdid`; `devices()` lists lender, kind, class and borrowers;
//!   `find("lender:nvme0")`.
//! - Borrow (exclusive): refused with the holder's name if borrowed, for the lender itself, or
//!   while the lender's own driver is bound. `grants` takes every resource and records it, so a
//!   failure half-way or a return gives back exactly what was taken: look-up-table mappings on
//!   the borrower's adapter for the BARs (BARs sharing entries share a mapping); the device in
//!   the lender adapter's requester-id table; the DMA window — with a borrower IOMMU a range of
//!   the borrower adapter's IOMMU domain (far above RAM) mapped once through the lender's NTB,
//!   without one a mapping of all borrower RAM, shared by every device lent over the same
//!   adapter pair and refused with both sizes when the window is too small; the MSI window onto
//!   the borrower's interrupt range (shared likewise). With the lender's IOMMU on, the device's
//!   own domain gets exactly these windows (one to one, or remapped below the device's
//!   addressing limit) and the adapter's domain the BARs, so stray DMA faults at the lender.
//! - `shadow`: the shadow device's `DeviceBackend` (configuration requests performed by the
//!   lender's CPU after a control message each way, costed by `[smartio] control_message_ns`;
//!   INTx masked: pin reads 0, INTX_DISABLE forced; the MSI address is the device's address of
//!   the MSI window) and `DmaMapper` (a map adds borrower IOMMU entries inside the window, or is
//!   arithmetic over the whole-RAM window: no message to the lender; `lender_interactions`
//!   counts the ones there are). The handle goes into the borrower's tree with `hot_add`, so
//!   registered drivers bind to it. Return hot-removes (driver first), disables the function
//!   through the lender, releases leftover DMA mappings and every grant.
//! - Peer-to-peer (`map_peer`, Paper V §4.4): same lender — the target's bus address; target in
//!   the borrower or another lender — a look-up-table mapping on the lender's NTB towards the
//!   target's host (plus requester id, and the far adapter's IOMMU domain if on). Routes stay on
//!   the shortest path; `tests/peer_to_peer.rs` asserts it for all three cases.
//! - `mdev`: the MDEV parent (Paper V §5): `assign_to_vm(fdid, "host/vm")` gives the hypervisor
//!   an `Mdev`, a `host::PassThrough`, and lists the assignment; nothing is borrowed until the
//!   guest resets the device at VM start, when it is borrowed exclusively (another VM, borrower
//!   or program gets `Borrowed` naming the VM). Both IOMMUs are required (`MdevNeedsIommu`) and
//!   the VM's memory must fit the lender's NTB window (`VmWindowTooSmall`). At reset it takes
//!   the BAR window on the borrower's NTB (mapped into the guest by the hypervisor), the
//!   requester id and a notification window onto the borrower's interrupt range; when the guest
//!   sets Bus Master it probes the guest-physical layout from 0 and 4 GiB (`page_pin_ns` per
//!   page), and per range takes a contiguous range of the borrower adapter's IOMMU domain mapped
//!   onto the VM's pages, a look-up-table mapping of it on the lender's NTB, and the mapping of
//!   the guest-physical range onto that window in the device's lender domain — so the guest's
//!   bus addresses are guest-physical. Other passed-through functions' guest BARs are mapped at
//!   IOVA = GPA the same way (peer-to-peer through the lender's root), where the guest has them
//!   at each Bus Master set, as for VFIO. Interrupts go to the lender, whose handler writes a
//!   notification through the NTB to the borrower, whose handler signals the VM's eventfd
//!   (`[vm]` costs). Shutting the VM down returns the device and every grant. While SmartIO
//!   lends a function (any method) it is claimed `smartio` on its lender, so VFIO and the
//!   lender's drivers leave it alone.
//!
//! `lending::api` is the device-oriented API (Paper V §6.1, issue 6): programs hold a device
//! through `borrow_device` — exclusive, shared, or exclusive then `downgrade`d — with no shadow
//! device; Device Lending and API holds exclude each other as the rules say. A device's BARs are
//! segments (`bar_segment`); `create_segment` places a segment by access hints (device memory
//! when the device reads it, the caller's RAM when its CPU reads it, else the lender's RAM — the
//! policy is documented on `Hints`). Its segments are SISCI segments (see *Segments* below);
//! `map_for_device` returns a segment's address as the device
//! sees it (through `DeviceSide::reach`, the same shortest-path step as peer-to-peer) and
//! `map_for_cpu` where a host's CPU reaches it; `unmap_device` gives one mapping's grants back.
//! `map_multicast_for_device` maps a SISCI multicast group for a device: a look-up-table entry of
//! its lender's NTB pointing at the group, so one device write lands in every member. A holder
//! with several NTB adapters may pin its paths to one (`borrow_device_via`, `map_for_cpu_via`):
//! a program keeps a hold per adapter and survives a cut cable. `register_peer_requester` puts
//! a host's own (not lent) device into its NTB adapters' requester-id tables, so its reads
//! through the host's NTB windows get their completions back. Holds, maps and segments take
//! their resources through the same grants, so a return gives everything back. The distributed
//! NVMe driver and the experiments of issue 6 are built on it (next).
//!
//! `sisci`: SISCI-shaped shared memory. A host creates a segment in its RAM, prepares it
//! on an adapter (with the IOMMU on, the adapter's domain gets the pages) and makes it
//! available; another host connects by node id and segment id and maps it, which takes
//! look-up-table entries on its adapter. CPU stores and loads through a map are engine
//! transactions; like the hardware they cannot fail: a lost store or an all-ones load bumps the
//! adapter's error count, which sequences (start / check: ok, retriable, not retriable) compare.
//! Segment events report a connection lost or operational again from the engine's link
//! changes. Data interrupts are an inbox segment plus an MSI write mapped through the NTB;
//! multicast connects a sender to a switch group whose members are segments. Teardown is
//! explicit and ordered: unmap, disconnect, remove, each refused with `Busy` while the next
//! layer is in use. One `Sisci` value stands for the drivers of all hosts; control operations
//! take no virtual time. It runs on the platform contract (`Machine`), like the rest of the
//! crate.
//!
//! **Segments — one system.** The device API is SISCI's extension, and its segments are SISCI
//! segments: `SmartIo` owns a `Sisci` (`SmartIo::sisci`), and `create_segment` and
//! `bar_segment` make records in it — one record per segment, one id space per host (automatic
//! ids from `AUTO_ID_BASE`), whichever API made it. A record knows its backing: host RAM
//! (freed on removal), a BAR (nothing to free) or device memory the device API allocated (only
//! `SmartIo::remove_segment` frees it; SISCI's `remove_segment` says `NotOwner`).
//! `SmartIo::sisci_segment` gives a device-API segment's SISCI handle (prepare, make available,
//! connect by the owner's node id and the segment's id, map), `Segment::from(LocalSegment)` a
//! SISCI segment's device-API handle (`map_for_device`, `map_for_cpu`). The record counts
//! connections, local maps, multicast groups and device maps, so neither API frees a segment
//! the other still uses (`Busy`). Segment memory of a host comes from one allocator
//! (`sisci/ram.rs`): the booted kernel's (`Sisci::on_hosts`, and so every `SmartIo`) or, for
//! hosts without kernels (`Sisci::new`), one fallback allocator per host; running out is the
//! same `Memory` error from either API. SISCI segments are 64 KiB aligned, device-API segments
//! page aligned and rounded to whole pages; RAM segments read as zeroes.
//!
//! **Errors — one type.** `smartio::SciError` (`src/error/`) is the error of SISCI, Device
//! Lending and the device API; `SmartIoError` is an alias of it. Each variant's doc names the
//! SISCI error class it belongs to and `SciError::class()` returns it as a `SciErrorClass`
//! (`SCI_ERR_BUSY`, `SCI_ERR_NOSPC`, `SCI_ERR_HW_NOSPC` for full NTB/IOMMU tables and windows,
//! `SCI_ERR_NO_SUCH_SEGMENT`, `SCI_ERR_SEGMENT_NOT_PREPARED`, `SCI_ERR_SEGMENTID_USED`,
//! `SCI_ERR_CONNECTION_REFUSED`, `SCI_ERR_NO_SUCH_NODEID`, `SCI_ERR_NOT_CONNECTED`,
//! `SCI_ERR_OUT_OF_RANGE`, `SCI_ERR_ILLEGAL_PARAMETER`, `SCI_ERR_NO_SUCH_FDID`,
//! `SCI_ERR_NOT_AVAILABLE` for a device another holder excludes, ...) and `code()` its value as
//! `sisci_error.h` defines it; the
//! variant keeps the context (ids, sizes, hosts, devices) for the message.

#![forbid(unsafe_code)]

mod error;
pub mod lending;
pub mod sisci;

pub use error::{check_range, DeviceIommuFailure, SciError, SciErrorClass, SCI_ERR_MASK};

pub use lending::{
    BorrowOptions, CpuMap, DeviceBorrow, DeviceInfo, Fdid, Hints, Lent, Mdev, PeerRequester,
    Segment, SegmentLocation, SmartIo, SmartIoError,
};
