//! The timed engine: a deterministic discrete-event simulation in virtual time (picoseconds).
//!
//! It costs every access on its fabric path — TLP splitting by MPS / MRRS / RCB, per-TLP
//! overhead bytes, per-link per-direction FIFO occupancy, per-chip latency, root-complex and
//! memory latency, a limit on outstanding non-posted requests per requester — and keeps
//! byte-exact sparse memory for every host. Agents (drivers, workloads, device engines) are
//! `async` tasks that use the [`smartio_platform`] traits through an [`Agent`].
//!
//! Same scenario, same calibration, same inputs ⇒ bit-identical results.
//!
//! # Inside this crate
//!
//! A deterministic discrete-event simulation in virtual time (picoseconds). `Sim::machine()` is
//! the simulation behind the platform contract (`contract`: `Sim` implements `Engine`, its
//! `Agent`s implement `AgentPort`; `idle_read_cost` explains the cut-through rule below for
//! one read).
//!
//! - `calibration`: the `smartio-calibration` crate, re-exported (the engine resolves its timing
//!   from it).
//! - `timing`: resolves every link and chip of a fabric against the calibration, and costs one TLP
//!   along a path (formula below).
//! - `txn`: a transaction split into TLPs: writes by MPS, read requests by MRRS, completions at RCB
//!   boundaries up to the completion payload limit; no TLP crosses a 4 KiB boundary. A read whose
//!   path crosses a root complex in the middle *and was translated by that root's IOMMU* (a lent
//!   device with the lender IOMMU on) is requested in pieces of
//!   `root_complex.forwarded_read_request_bytes` (64 B, what the papers traced "on the other side
//!   of the IOMMU" of Xeon root complexes; a read forwarded peer to peer untranslated goes on as
//!   it came — the papers saw no cutting there), each holding one of that root complex's
//!   slots for forwarded reads (`root_complex.forwarded_reads_outstanding`, shared by every
//!   requester whose reads it forwards): the limited open non-posted requests of the CPU's root
//!   complex that Paper V §7.3.1 names as the cause of the lender-IOMMU read penalty. The
//!   requester's own tags are not held for them (a simplification that holds while the root's
//!   slots × 64 B stay below a device's tags × MRRS, 4 KiB against 16 KiB by default).
//! - `events`: the event queue, ordered by `(time, sequence)` packed into one 128-bit key (ties
//!   first in, first out); its earliest 256 events are kept sorted in a `Vec`, next last, and
//!   only later ones in a heap, so taking the next event is a `pop` and scheduling one before
//!   everything else (a transaction's next step while a woken task runs first) a `push`; a
//!   heap's pop cost 165 instructions with 30 queued. (A radix heap, which the queue's monotone
//!   keys allow, and a four-ary heap were measured slower here.)
//! - `core`: the clock, sparse memory per host, link occupancy, transactions, timers, memory watches, interrupts, link state changes, the fault
//!   log. Non-posted requests take a tag from the requester's pool (per device kind; per host:
//!   per-core limit × cores) and wait when none is free; a posted write stream has a window of
//!   flow-control credits (credits per link × links on its path). CPU stores leave as TLPs of at
//!   most `cpu.max_store_bytes` (write combining). A multicast write is costed as a tree: links
//!   shared by several branches carry each TLP once. Finished transactions are parked (up to
//!   64) and reused with their TLP queues' capacity; a transaction's TLPs on their way
//!   (`txn::Flights`) are a `Vec` with a head index that keeps when the first arrives, so a step
//!   asks one field; a transaction stays out of its slot for the whole run of steps it makes
//!   without the queue. A posted write into memory and a read of memory (one unicast segment,
//!   no IOMMU, nothing recorded; for a write, no watch on its bytes) run those steps in bursts
//!   (`core::burst`): the same steps in the same order before the next queued event, asking once
//!   what the generic step asks at each (`Sim::set_bursts(false)` turns them off; a test
//!   compares the two bit for bit). Where at least 8 of a write burst's TLPs can leave one
//!   after another before the next event and within its credits, they go as a train, the
//!   steps between them taken at once (`Sim::set_trains(false)` turns trains off; tests
//!   compare, with a train cut short by the next event): a TLP crosses its path as alone, and
//!   the TLPs of its size after it, which cross each chip with the same latency (the
//!   transaction's), cross each link one period after it (`timing::TrainRun`: the largest
//!   serialization up to that link) when it was booked last everywhere and waited only on
//!   links it fills — costed in closed form (those that may leave one after another sent as a
//!   batch) and booked per link at once, one interval grown where they follow back to back,
//!   one for them all where they leave gaps (`timing::Periodic`, made one per TLP only when
//!   a booking looks for a gap among them). A train is kept as parts (`core::burst::TrainPart`:
//!   one TLP, or a batch of followers whose leavings and landings are a period apart), its
//!   steps counted from those progressions (`train_steps`); its TLPs that land before its
//!   last one leaves land as one piece, and those still on their way when it ends stay one
//!   run in closed form (`txn::FlightRun`), which a write burst with nothing left to send
//!   lands at once up to the next event (`Core::land_run`). Once such a write has sent its
//!   last TLP, its landings, cut from each other by other flows' events, are deferred until
//!   someone looks (`core::deferred`): one queue entry at its last landing, and what is due
//!   landed first wherever memory is read or written at once, a writer polls, the counters
//!   are asked or a run stops at its deadline; a write started onto its bytes, a watch armed
//!   on them or the recording end the deferral (`Sim::set_deferred_landings(false)` turns
//!   it off; a test compares, with reads midway and stops at many deadlines). Before that,
//!   while it sends, such a write cut by an event with all its TLPs left fitting its credits
//!   books them at once, provisionally, and is not queued: its steps are taken in their
//!   place among the queued events (equal times ordered by the sequence number the run had
//!   given when it last stepped), until its last TLP leaves or something else is about to
//!   book on its links, which takes the provisional bookings back first and queues it — or,
//!   for a single TLP sent alone, sends it ahead again once that TLP has booked
//!   (`core::ahead`; `Sim::set_aheads(false)` turns it off; tests compare). Steps taken
//!   without the queue stop at the run's deadline and at the next step of a write ahead as
//!   at the next event (`Core::next_due`).
//!   A write's bytes are copied into
//!   its transaction's buffer; a buffer given away (`AgentPort::write_owned`) is kept as it,
//!   as is one swapped (`AgentPort::write_swapped`: a spare transaction buffer left in its
//!   place, so the caller reuses it without allocating),
//!   and zeroes (`AgentPort::write_zeroes`: an NVMe's deallocated blocks) are kept in none
//!   and land by zeroing memory (whole pages given back). A read burst sends its
//!   requests and completions itself, the path and flow asked once
//!   (`Core::request_in_burst`, `Core::complete_in_burst`). A read's
//!   buffer is filled as its requests are answered (appended in order, never zeroed first);
//!   a write's TLPs that land in memory one after the other in a run of steps are copied
//!   from its buffer in one go (up to a page) when the run ends, before anything else can
//!   look, and their watchers are told as each lands. Each link direction
//!   (`timing::Lane`, found by index from link and direction) keeps the intervals booked on it
//!   that have not ended in a `Vec` with a head index, and the end and requester of the last
//!   one beside it (an interval may stand for several back-to-back TLPs of one requester: a
//!   later TLP finds no gap among them either way): the usual booking reads those two fields and appends (the intervals that
//!   ended are dropped in batches, once `compact_at` are kept), a TLP that may start before
//!   the last interval ends searches the gaps (out of line). A crossing's hop loop is compiled once per
//!   kind of chip draw and hop log (none, the recording's hops, a multicast branch's start
//!   times), so the usual one checks neither; `LinkState` is the per-link snapshot of the lanes' statistics. Memory watches keep a per-host span of what is armed, so a write outside it skips
//!   the index.
//! - `iotlb`: each host IOMMU's translation cache (`[root_complex] iotlb_entries`, LRU, keyed by
//!   the requester as that IOMMU sees it and the I/O virtual page). A TLP looks its page up at
//!   every IOMMU on its route (`Route::translations`: the device's host, and a far host whose
//!   IOMMU translates what its NTB adapter forwards); a miss holds the TLP for a page walk
//!   (`iotlb_miss_ns`) before it leaves. The cache is flushed every `iotlb_flush_batch` unmaps
//!   (intel-iommu's deferred flushing, the default of the papers' kernels; 1 = strict) and at
//!   once when a device moves to another domain. The fabric's translation stays authoritative:
//!   an unmapped page faults whatever the cache holds.
//! - `sim`: `Sim`, the handle: `run` / `run_until`, and `Agent`, a CPU's or device's view that
//!   implements `Port`, `Clock` and `MemoryWatch`. A CPU access to its own RAM costs a calibrated
//!   memory latency and crosses no link; an MMIO access pays the core's issue cost and the root
//!   complex. A future dropped before it is done (the loser of a `race`) gives its timer or
//!   watch back and leaves its transaction to finish on its own. A cost a task spends
//!   (`Clock::spend`, `AgentPort::spend`: awaited where it is made, never raced) passes in
//!   place when its timer's event would be the next thing to happen — no other task ready,
//!   nothing queued due at or before its end, within the run's deadline, not recording, not
//!   inside a `race` (`platform::race::racing`): the clock moves on and the task goes on in
//!   the same poll, without the timer, its event, the wake-up and the re-poll of the task's
//!   futures. Likewise an access a task starts whose first step would be the next event
//!   takes its steps at once (`Core::step_in_place`, as `Core::on_txn_event` takes them) and,
//!   when it completes before anything else must happen, its requester goes on in the same
//!   poll at the clock's new time instead of being woken there. A CPU's access of its own
//!   RAM and a posted write whose end is not the next event (other flows' steps are due
//!   before it) take the run's next steps from the task's poll, in their order, until their
//!   own comes up (the access's timer, the write's leaving), and then go on in that poll —
//!   unless one of those steps wakes a task, which is then polled next, at its time, while
//!   the access waits as usual (`Sim::run_to_own_timer`). The results are the timers' and
//!   events', bit for bit (`Sim::set_in_place(false)` turns all of these off; tests
//!   compare the two).
//! - A posted write of one TLP to one target (a doorbell, a queue entry, an MSI) goes without
//!   a transaction (`core::posted`): sent at once when its first step would be the next
//!   event, else at its queued leaving, booked as the transaction's step would book it, its
//!   landing queued where the transaction's would be and delivered as a transaction's TLP
//!   is (`Sim::set_posted_alone(false)` turns this off; a test compares, with writers that
//!   stop waiting before their write leaves).
//! - A read of one request answered by one completion from memory (a queue entry a device
//!   fetches) whose first step would be the next event runs in place without a transaction
//!   (`core::single_read`) while nothing queued comes before its steps: the same tag, the
//!   same two crossings, the memory read at the request's arrival, its bytes handed over as
//!   a local read's; from a step something queued comes before, it goes on as the
//!   transaction it stands for (`Sim::set_reads_alone(false)` turns this off; a test
//!   compares, with its reader's own large reads holding the tags and DMA under way).
//! - `ops`: what agents have under way (accesses, watches, interrupt waits) in a slab whose
//!   slots the contract's tickets name (a sleep's ticket names its timer, an access that
//!   travels as a transaction names the transaction: each holds nothing else); slots and the
//!   buffers of local reads are reused,
//!   and a transaction's data buffer is the reused one of a parked transaction (a write's data
//!   is copied into it, a read's copied out into the caller's buffer), so an everyday
//!   operation allocates nothing.
//! - `executor`: the single-threaded executor; tasks live in a slab whose slots are reused
//!   (a generation per slot ignores stale wake-ups), so a run that spawns a task per NVMe command
//!   does not grow with its length. A task's waker is moved out of its slot while it is polled
//!   (not cloned); the ready queue (behind a `parking_lot` mutex: wakers may be sent to other
//!   threads, so it must be `Sync`, and that lock costs the least uncontended) keeps its length in
//!   an atomic, so an empty queue is seen without the lock; what a pending task waits for is swapped straight into its slot. `waiters`: timers and memory watches in slabs and an
//!   index by host and address, given back when their futures complete or are dropped.
//! - `wait`: what each task waits for (`Wait`: a timer, a transaction, a memory write, an
//!   interrupt, a link event, or a platform note) and where it was spawned (`#[track_caller]`).
//!   A run that ends with its workload unfinished is always an emulator bug; `Sim::blocked_tasks`
//!   / `blocked_summary` name every waiting task and its wait — "1 task spawned at
//!   crates/workloads/src/fio.rs:513 waits for a write into borrower memory 0x20020030..+16" —
//!   instead of "a task is stuck".
//!
//! The engine does not know what the bytes mean: BAR accesses go to the device's `BarHandler`,
//! memory accesses to sparse memory, MSI writes become interrupt events.
//!
//! # Where the time goes: the recording and the Explainer
//!
//! The project's design asks that every number can be explained step by step. The timed engine can record
//! where time goes (`engine::record`); it is off unless `Machine::start_recording` turns it on, and
//! a run that does not record does exactly what it did before (tests compare both).
//!
//! - **Steps.** While recording, every step the engine makes is kept with its start, its end, its
//!   cause (another step) and, for software, a name: a task's timer (a software or device cost —
//!   code names it with `platform::activity::doing` or `Clock::spend`: "block layer: submit",
//!   "media: read", "GPU runtime: cudaMemcpyAsync"; an unnamed one reads "a timer"), a CPU's load
//!   or store of its own RAM, an MMIO access from the core to a root port, a TLP's whole crossing
//!   with its hops (per link: the wait for the link, serialization and propagation; per chip: its
//!   drawn latency and a rate mismatch), a TLP leaving its first link, the root complex into
//!   memory or to the interrupt controller, a completer's read, a completion back to the core,
//!   an interrupt's delivery, an IOTLB walk. Every step's end is known when it is made (the engine
//!   costs a whole path at once), so a step is complete when recorded.
//! - **Causes** follow the work. The executor's ready queue carries the step that woke each task
//!   (a timer firing, a write landing in a watched word, a device's doorbell handler notifying its
//!   task, an interrupt); the task's new steps and wake-ups are caused by it. A transfer's first
//!   TLP is caused by what its requester was doing (for a CPU, its issue step); each later TLP by
//!   what let it leave — the previous TLP clearing the first link, a credit or a read tag given
//!   back. A CPU's load that is the first to see bytes written since they were last read may have
//!   waited for that write: in a polling loop (the task's context is its own timer, back to its
//!   previous look) the writer is the cause, and the rest of the loop's interval is a wait for its
//!   next look; otherwise the later of the task's wake-up and the write is (an interrupt handler
//!   reading a completion entry waited for the interrupt, which came after the entry).
//! - **Critical paths.** `Recorder::critical_path` walks the causes back from the step that woke
//!   the task that saw an operation end. Each step covers the time from its cause's end to its own
//!   end, so the rows tile the operation exactly and their durations sum to its latency. A step
//!   expands into rows (a TLP hop by hop), rows are clipped to the operation and equal rows back to
//!   back merged with a count. A gap between a step and the next is a `waiting` row: the polling
//!   loop's next look, or "something not recorded" — a cause the engine does not track, which is a
//!   bug to fix in `record.rs`/`core.rs` (`engine/tests/record.rs` holds the cases).
//! - **The ring** keeps the last 2^18 steps (and 2^20 hops) for the walks: an operation's path is
//!   walked when it ends, and a walk that reaches a step no longer kept says so in its first row
//!   (a DMA copy of more than some 20 MiB).
//! - **The trace** keeps the run's first steps, up to `--trace-limit` slices (a TLP is one slice on
//!   its requester's track and one per link it crossed; any other step, or a workload's
//!   operation, one); once one is left out every later one is, so the trace is the run's
//!   beginning. `machine::Trace` is engine-neutral; the CLI writes it as Trace Event JSON (a
//!   process per kind of track — hosts, VMs, devices, links, workload — and a thread per track;
//!   several runs in one file get a process per run and kind).
//!
//! `workloads::explain::Explainer` is what a workload sees. Which operations are representative
//! is known only after a run, so a command that explains runs the workload twice
//! (`cli::explain::ExplainArgs::run`): once as usual, to learn its percentiles, then again on a
//! fresh cluster, recording, with an `ExplainSpec` of `Target`s (a name, the latency to come
//! nearest to, optionally a kind of operation: bench dma's sizes); the two results must be equal.
//! The workload reports each operation from the task that saw it end (`Explainer::report` with an
//! `Operation`: kind, track, start, end and the latency the workload recorded — fio's histogram
//! bucket, a GPU's whole cycles — so the operation explained is one counted at the percentile);
//! the explainer keeps the critical path of the operation nearest each target and, with a trace,
//! a workload slice per operation. fio (each I/O, from its worker), the CPU, device and GPU
//! ping-pongs (each round trip, from the pinging task or kernel), bench dma (each copy, from the
//! driving CPU) and exp vm-nvme (its rows' fio runs) report; a workload added to them needs only
//! the `report` call and an `_explained` entry point.
//!
//! # The timing model
//!
//! Every TLP is costed on its whole path in one step. For each hop (a link in one direction, then
//! the chip it reaches):
//!
//! ```text
//! start      = the first time >= arrive when the link direction is free for the TLP's
//!              wire_bytes / bandwidth, not before a TLP that reached the link earlier
//!              (or an earlier TLP of the same requester) has left
//! arrive'    = start + propagation + chip latency          head reaches the next chip
//!              (+ the serialization difference when the next link is faster)
//! last hop:  received = start + serialization + propagation
//! ```
//!
//! Bandwidth comes from the generation's rate, encoding, lane count and a DLLP overhead fraction;
//! chip latencies, overheads, MPS/MRRS/RCB and the root complex and DRAM latencies come from the
//! calibration file. Contention emerges from each link direction's occupancy: two streams sharing
//! a link direction queue behind each other. End-to-end numbers are never set directly.
//!
//! The legs a TLP's path is made of, each one calibration entry:
//!
//! - a link: serialization at its rate, then propagation — `link_propagation_ns` on a board,
//!   `cable_propagation_ns` on an external cable (NTB cables, and a host's link to a transparent
//!   target adapter in an expansion chassis that the scenario marks `cabled = true`);
//! - a switch or NTB chip: its typical cut-through latency, varied by `chip_latency_spread_ns`;
//! - a root complex at an end of the path: `[root_complex] latency_ns` (the coherent part: memory
//!   controller, cores); a root complex in the middle of a path (a lent device's DMA forwarded
//!   from its root port to the NTB adapter's) only `peer_forward_ns`;
//! - memory: `memory_read_ns` for a read's data.
//!
//! Software legs are charged by the code that does the work, never folded into a path: an MSI's
//! delivery to its handler (`[cpu] interrupt_delivery_ns`, drawn) and, where a thread sleeps on
//! the I/O, waking it (`wakeup_ns`: interrupt-driven NVMe, the block client's hand-off, a SISCI
//! data-interrupt wait, the NVMe-oF kernel initiator); a VM's interrupt relay (`[vm]
//! irq_handler_ns`, `eventfd_signal_ns`, `irq_injection_ns`, a posted interrupt whose entry in the
//! guest is one more interrupt delivery, raised through `Engine::raise_interrupt` so the relay is
//! one cause chain); a guest's own CPU work, scaled by `[vm] cpu_overhead_fraction`
//! (`VcpuPort::sleep`); SmartIO's DMA hook per map (`[smartio] dma_window_map_ns`); a system call
//! where a program makes one (fio's native back end included).
//!
//! Because a whole path is costed when a TLP is issued, links are booked in issue order, not in
//! the order TLPs reach them: a TLP issued first on a long path may hold a link later than one
//! issued afterwards on a short path. Each link direction therefore keeps the intervals booked on
//! it (`timing::Timeline`: the TLPs in flight, and ended ones until enough are kept to drop them
//! in one go — at most twice the most in flight, or 64), and a TLP takes the first gap from its
//! arrival that fits, behind every TLP that reached the link before it (the port is a FIFO in
//! arrival order; PCIe lets no request pass an earlier posted write) and behind the same
//! requester's earlier TLPs. With a single `busy_until` per direction, a 64-byte command fetch
//! once waited 840 ns on an idle link behind another host's store booked for later.
//!
//! There is one event per TLP arrival, not one per hop. Fast path: when a transaction's next TLP
//! is due before anything else in the queue and no task has been woken, the engine processes it
//! directly without pushing it through the queue; otherwise it reschedules the transaction.
//!
//! # Variation
//!
//! Where the same operation takes a different time each time on hardware, the model draws it
//! (`smartio_platform::variation`): a `Spread` (median = the calibration's typical value, a floor
//! plus an exponential tail reaching its `*_p99_ns`) for NVMe media time per command
//! (`[nvme.*] read/write_latency_p99_ns`) and interrupt delivery (`[cpu]
//! interrupt_delivery_p99_ns`), and a uniform draw within typical ± (worst − typical) for each
//! chip a transaction's TLPs cross (typical ± `[pcie] chip_latency_spread_ns`, clipped to the
//! chip's `latency_max_ns` and to zero): drawn when its first TLP crosses a path
//! (`txn::TxnChips`), and the same for all its TLPs along that path — one transfer's TLPs follow
//! each other through a chip at one phase of its clock crossings and arbiter, and the latency
//! varies from transfer to transfer (a TLP sent without a transaction, a lone posted write or a
//! read in place, draws its own, as a transaction of that one TLP would; a transfer drawn faster
//! than its predecessor still leaves each link after it, so a requester's order holds). GPU spin loops
//! read their word every `memory_access`, so a store is noticed at the loop's next read, not at
//! once: round trips fall on steps a poll period apart (Paper V Fig. 25's "three distinct
//! steps"). Each cause draws from its own stream per entity (`Stream::new(seed, cause, index)`:
//! a controller's media, a host's interrupts, the fabric's chips), seeded by the run's seed
//! (`ClusterOptions::seed`, the commands' `--seed`; interrupt streams per raising requester): a
//! local and a borrowed QD1 run of one workload draw the same media and interrupt times in the
//! same order (the chips share one stream, so paths of different lengths draw differently
//! there). A spread
//! whose p99 equals its typical value draws nothing; `Calibration::without_variation()` closes
//! all of them, which tests of the model's arithmetic use.
//!
//! Not (yet) varied: the scheduler's timer tick and preemption on the CPUs' software paths, the
//! controller's arbitration (round robin over the submission queues that have entries: with QD1
//! clients every queue is refilled long before the arbiter comes back, so clients of a shared
//! NVMe differ only by what the draws above give them — Paper V's starving borrowers do not
//! emerge; `repro` V-35s says so).

#![forbid(unsafe_code)]

/// The calibration file, re-exported: the engine resolves its timing from it.
pub use smartio_calibration as calibration;
mod contract;
mod core;
mod events;
mod executor;
pub mod iotlb;
mod ops;
pub mod record;
pub mod sim;
pub mod timing;
pub mod txn;
pub mod wait;
mod waiters;

pub use crate::core::{Counters, FaultRecord, LinkEvent};
pub use calibration::{Calibration, CalibrationError};
pub use sim::{Agent, RunSummary, Sim};
pub use timing::{LinkState, Timing, TimingError};
pub use wait::{BlockedTask, Wait};
