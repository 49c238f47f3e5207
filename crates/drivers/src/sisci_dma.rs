//! SISCI's DMA queues (`sci_dma_queue_t`) carried out by the NTB adapter's DMA engine: the
//! one place where a queue's states, a transfer vector's decode and checks, and the
//! descriptors a vector becomes are decided. The live daemon runs `libsisci`'s
//! `SCIStartDmaTransfer` / `SCIStartDmaTransferVec` / `SCIWaitForDMAQueue` /
//! `SCIDMAQueueState` / `SCIAbortDMAQueue` / `SCIRemoveDMAQueue` through it; the timed engine
//! runs `bench dma --adapter` and DMA-queue programs through it, so a transfer's timing on the
//! timed engine is the timing of the same queue code.
//!
//! ```text
//!   entries + flags ──check──► Vector ──descriptors(local bus, window bus)──► ring ──► engine
//!   state:  IDLE ──start──► POSTED ──wait──► DONE | ERROR | ABORTED ──start──► POSTED ...
//! ```
//!
//! A vector entry is `dis_dma_vec_t`: bytes, an offset in the local segment, an offset in
//! the remote segment and flags. Offsets are checked against both segments' sizes before
//! anything is written to the ring; the engine itself (`devices::ntb_dma`) checks the
//! descriptors again and completes a bad one with its status.

use crate::ntb_dma::{
    AdapterDmaError, AdapterDmaQueue, Batch, Descriptor, DescriptorStatus, Direction, QueueMemory,
    QueueView,
};
use smartio_devices::ntb_dma::spec::{MAX_RING_ENTRIES, MAX_TRANSFER_BYTES};
use smartio_platform::{BusAddr, Clock, MemoryWatch, Port, SimDuration};
use smartio_smartio::SciErrorClass;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use thiserror::Error;

/// The SISCI flags of DMA calls, with SISCI's values.
pub mod flag {
    /// `SCI_FLAG_USE_CALLBACK`: call the program's callback when the transfer is done.
    pub const USE_CALLBACK: u32 = 0x1;
    /// `SCI_FLAG_DMA_WAIT`: the start call returns once the transfer is done.
    pub const DMA_WAIT: u32 = 0x4;
    /// `SCI_FLAG_DMA_SOURCE_ONLY`: not meaningful here (refused).
    pub const DMA_SOURCE_ONLY: u32 = 0x8;
    /// `SCI_FLAG_DMA_READ`: remote to local (a pull); without it local to remote (a push).
    pub const DMA_READ: u32 = 0x10;
    /// `SCI_FLAG_DMA_PHDMA`: physical addresses (refused: programs get none).
    pub const DMA_PHDMA: u32 = 0x20;
    /// `SCI_FLAG_DMA_GLOBAL`: use a DMA engine of the cluster, not a per-process one; the
    /// adapter's engine is one, so it is taken and changes nothing.
    pub const DMA_GLOBAL: u32 = 0x40;
    /// `SCI_FLAG_DMA_SYSDMA`: the host's system DMA engine (refused: not modelled).
    pub const DMA_SYSDMA: u32 = 0x100;
    /// `SCI_FLAG_DMA_USER_MEM`: a user buffer as the local side (refused).
    pub const DMA_USER_MEM: u32 = 0x200;
    /// `SCI_FLAG_DMA_ADAPTER`: the adapter's own engine, which is what runs every transfer.
    pub const DMA_ADAPTER: u32 = 0x800;
    /// What a start call takes.
    pub const START: u32 = USE_CALLBACK | DMA_WAIT | DMA_READ | DMA_GLOBAL | DMA_ADAPTER;
    /// What a vector entry takes.
    pub const ENTRY: u32 = DMA_READ;
}

/// Most entries of one vector (`DIS_DMA_MAX_VECLEN`).
pub const MAX_VECTOR: usize = 256;

/// Most entries a queue holds (`maxEntries` of `SCICreateDMAQueue`): the engine's ring.
pub const MAX_QUEUE_ENTRIES: u64 = MAX_RING_ENTRIES;

/// One transfer of a vector, as the program gives it (`dis_dma_vec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VecEntry {
    /// Bytes.
    pub size: u64,
    /// Where it starts in the local segment.
    pub local_offset: u64,
    /// Where it starts in the remote segment.
    pub remote_offset: u64,
    /// [`flag::ENTRY`] bits.
    pub flags: u32,
}

/// Which segment an offset is out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The local segment.
    Local,
    /// The remote segment.
    Remote,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Local => "local",
            Side::Remote => "remote",
        })
    }
}

/// `sci_dma_queue_state_t`, with SISCI's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    /// `SCI_DMAQUEUE_IDLE`: nothing started yet.
    Idle,
    /// `SCI_DMAQUEUE_GATHER`: never reported (transfers are posted as they are started).
    Gather,
    /// `SCI_DMAQUEUE_POSTED`: transfers started and not all waited for.
    Posted,
    /// `SCI_DMAQUEUE_DONE`: every transfer waited for moved its bytes.
    Done,
    /// `SCI_DMAQUEUE_ABORTED`: the transfers were aborted.
    Aborted,
    /// `SCI_DMAQUEUE_ERROR`: a transfer failed.
    Error,
}

impl QueueState {
    /// The `sci_dma_queue_state_t` value.
    pub fn code(self) -> u32 {
        match self {
            QueueState::Idle => 0,
            QueueState::Gather => 1,
            QueueState::Posted => 2,
            QueueState::Done => 3,
            QueueState::Aborted => 4,
            QueueState::Error => 5,
        }
    }

    /// The state with value `code`, if any.
    pub fn from_code(code: u32) -> Option<QueueState> {
        [
            QueueState::Idle,
            QueueState::Gather,
            QueueState::Posted,
            QueueState::Done,
            QueueState::Aborted,
            QueueState::Error,
        ]
        .into_iter()
        .find(|s| s.code() == code)
    }
}

/// Why a queue call was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SisciDmaError {
    /// `SCI_ERR_ILLEGAL_FLAG`: flags the call (`entry: None`) or an entry does not take.
    #[error("flags {flags:#x} are not taken by {}", match entry { Some(i) => format!("DMA vector entry {i}"), None => "a DMA transfer".to_string() })]
    IllegalFlag {
        /// The flags not taken.
        flags: u32,
        /// The entry, if it was one.
        entry: Option<usize>,
    },
    /// `SCI_ERR_ILLEGAL_PARAMETER`: a vector without entries.
    #[error("an empty DMA vector")]
    Empty,
    /// `SCI_ERR_MAX_ENTRIES`: a vector longer than a queue or a vector holds.
    #[error("a DMA vector of {len} entries: at most {max}")]
    TooManyEntries {
        /// Entries given.
        len: usize,
        /// The most taken.
        max: usize,
    },
    /// `SCI_ERR_SIZE_ALIGNMENT`: an entry of no bytes.
    #[error("DMA vector entry {entry} moves no bytes")]
    ZeroSize {
        /// The entry.
        entry: usize,
    },
    /// `SCI_ERR_OUT_OF_RANGE`: an entry more than one descriptor moves.
    #[error("DMA vector entry {entry}: {size} bytes, one transfer moves at most {max}")]
    TooLong {
        /// The entry.
        entry: usize,
        /// Its bytes.
        size: u64,
        /// [`MAX_TRANSFER_BYTES`].
        max: u64,
    },
    /// `SCI_ERR_OUT_OF_RANGE`: an entry's bytes run past the end of a segment.
    #[error("DMA vector entry {entry}: {size} bytes at offset {offset} of the {side} segment of {segment} bytes")]
    OutOfRange {
        /// The entry.
        entry: usize,
        /// Which segment.
        side: Side,
        /// The offset.
        offset: u64,
        /// The entry's bytes.
        size: u64,
        /// The segment's bytes.
        segment: u64,
    },
    /// `SCI_ERR_MAX_ENTRIES`: a queue of no entries or more than the engine's ring holds.
    #[error("a DMA queue of {asked} entries: 1 to {max}")]
    QueueEntries {
        /// Asked for.
        asked: u64,
        /// [`MAX_QUEUE_ENTRIES`].
        max: u64,
    },
    /// `SCI_ERR_MAX_ENTRIES`: more transfers than the queue has room for until it is
    /// waited for.
    #[error("{asked} transfers do not fit: {outstanding} of the queue's {entries} entries are not waited for yet")]
    Full {
        /// Transfers started.
        asked: u64,
        /// Entries posted and not waited for.
        outstanding: u64,
        /// The queue's entries.
        entries: u64,
    },
    /// `SCI_ERR_BUSY`: removing a queue whose transfers are not waited for.
    #[error("the DMA queue has {outstanding} transfers not waited for")]
    Busy {
        /// Transfers not waited for.
        outstanding: u64,
    },
    /// `SCI_ERR_TIMEOUT`: the wait ended before the transfers did.
    #[error("the DMA queue's transfers were not done within {0}")]
    Timeout(SimDuration),
    /// The adapter's engine refused or failed: `SCI_ERR_TRANSFER_FAILED` when it halted or
    /// an access failed, `SCI_ERR_ILLEGAL_OPERATION` for a refusal.
    #[error("the adapter's DMA engine")]
    Engine(#[from] AdapterDmaError),
}

impl SisciDmaError {
    /// The `SCI_ERR_*` class a program sees.
    pub fn class(&self) -> SciErrorClass {
        use SciErrorClass as C;
        match self {
            SisciDmaError::IllegalFlag { .. } => C::IllegalFlag,
            SisciDmaError::Empty => C::IllegalParameter,
            SisciDmaError::TooManyEntries { .. }
            | SisciDmaError::QueueEntries { .. }
            | SisciDmaError::Full { .. } => C::MaxEntries,
            SisciDmaError::ZeroSize { .. } => C::SizeAlignment,
            SisciDmaError::TooLong { .. } | SisciDmaError::OutOfRange { .. } => C::OutOfRange,
            SisciDmaError::Busy { .. } => C::Busy,
            SisciDmaError::Timeout(_) => C::Timeout,
            SisciDmaError::Engine(AdapterDmaError::Entries { .. }) => C::MaxEntries,
            SisciDmaError::Engine(AdapterDmaError::Access(_) | AdapterDmaError::Halted) => {
                C::TransferFailed
            }
            SisciDmaError::Engine(_) => C::IllegalOperation,
        }
    }
}

/// One checked transfer of a vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Bytes.
    pub size: u64,
    /// Offset in the local segment.
    pub local_offset: u64,
    /// Offset in the remote segment.
    pub remote_offset: u64,
    /// Which way.
    pub direction: Direction,
}

/// A vector that passed every check: its transfers, and the part of the remote segment they
/// touch (what must be reachable through the adapter's window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vector {
    /// The transfers, in order.
    pub transfers: Vec<Checked>,
    /// First remote byte touched.
    pub remote_start: u64,
    /// Past the last remote byte touched.
    pub remote_end: u64,
}

impl Vector {
    /// Checks a start call's `entries` and `flags` against segments of `local_size` and
    /// `remote_size` bytes, in this order: the call's flags, the vector's length (1 to
    /// [`MAX_VECTOR`]), then each entry's flags, size and both ranges.
    pub fn check(
        entries: &[VecEntry],
        flags: u32,
        local_size: u64,
        remote_size: u64,
    ) -> Result<Vector, SisciDmaError> {
        if flags & !flag::START != 0 {
            return Err(SisciDmaError::IllegalFlag {
                flags: flags & !flag::START,
                entry: None,
            });
        }
        if entries.is_empty() {
            return Err(SisciDmaError::Empty);
        }
        if entries.len() > MAX_VECTOR {
            return Err(SisciDmaError::TooManyEntries {
                len: entries.len(),
                max: MAX_VECTOR,
            });
        }
        let mut transfers = Vec::with_capacity(entries.len());
        let (mut remote_start, mut remote_end) = (u64::MAX, 0);
        for (i, e) in entries.iter().enumerate() {
            if e.flags & !flag::ENTRY != 0 {
                return Err(SisciDmaError::IllegalFlag {
                    flags: e.flags & !flag::ENTRY,
                    entry: Some(i),
                });
            }
            if e.size == 0 {
                return Err(SisciDmaError::ZeroSize { entry: i });
            }
            if e.size > MAX_TRANSFER_BYTES {
                return Err(SisciDmaError::TooLong {
                    entry: i,
                    size: e.size,
                    max: MAX_TRANSFER_BYTES,
                });
            }
            for (side, offset, segment) in [
                (Side::Local, e.local_offset, local_size),
                (Side::Remote, e.remote_offset, remote_size),
            ] {
                if offset.checked_add(e.size).is_none_or(|end| end > segment) {
                    return Err(SisciDmaError::OutOfRange {
                        entry: i,
                        side,
                        offset,
                        size: e.size,
                        segment,
                    });
                }
            }
            remote_start = remote_start.min(e.remote_offset);
            remote_end = remote_end.max(e.remote_offset + e.size);
            let read = (flags | e.flags) & flag::DMA_READ != 0;
            transfers.push(Checked {
                size: e.size,
                local_offset: e.local_offset,
                remote_offset: e.remote_offset,
                direction: if read {
                    Direction::Read
                } else {
                    Direction::Write
                },
            });
        }
        Ok(Vector {
            transfers,
            remote_start,
            remote_end,
        })
    }

    /// Bytes of the remote segment the vector touches.
    pub fn remote_span(&self) -> u64 {
        self.remote_end - self.remote_start
    }

    /// The descriptors: the local segment at `local` (as the adapter reaches it), the remote
    /// bytes from [`Vector::remote_start`] at `window` (the adapter's window onto them).
    pub fn descriptors(&self, local: BusAddr, window: BusAddr) -> Vec<Descriptor> {
        self.transfers
            .iter()
            .map(|t| Descriptor {
                local: local.offset(t.local_offset),
                remote: window.offset(t.remote_offset - self.remote_start),
                length: t.size,
                direction: t.direction,
            })
            .collect()
    }
}

/// How long a second waiter looks again while another wait reaps the queue.
const REAPER_LOOK: SimDuration = SimDuration::from_us(10);

/// A SISCI DMA queue on an adapter's DMA engine.
#[derive(Debug)]
pub struct SisciDmaQueue<P> {
    engine: AdapterDmaQueue<P>,
    /// Batches started and not yet waited for, oldest first.
    pending: RefCell<VecDeque<Batch>>,
    /// The state as of the last wait (or start).
    state: Cell<QueueState>,
    /// A wait is reaping batches (others look again later).
    reaping: Cell<bool>,
}

impl<P: Port + Clock + MemoryWatch> SisciDmaQueue<P> {
    /// `SCICreateDMAQueue`: a queue of `max_entries` (1 to [`MAX_QUEUE_ENTRIES`]) on the
    /// engine whose adapter's BAR0 is at `bar0`, its ring in `memory`
    /// ([`crate::ntb_dma::queue_memory_bytes`]).
    pub async fn create(
        cpu: P,
        bar0: BusAddr,
        memory: QueueMemory,
        max_entries: u64,
    ) -> Result<Self, SisciDmaError> {
        if max_entries == 0 || max_entries > MAX_QUEUE_ENTRIES {
            return Err(SisciDmaError::QueueEntries {
                asked: max_entries,
                max: MAX_QUEUE_ENTRIES,
            });
        }
        let engine = AdapterDmaQueue::create(cpu, bar0, memory, max_entries).await?;
        Ok(SisciDmaQueue {
            engine,
            pending: RefCell::default(),
            state: Cell::new(QueueState::Idle),
            reaping: Cell::new(false),
        })
    }

    /// The queue's entries.
    pub fn entries(&self) -> u64 {
        self.engine.entries()
    }

    /// Transfers started and not waited for.
    pub fn outstanding(&self) -> u64 {
        self.pending.borrow().iter().map(|b| b.end - b.first).sum()
    }

    /// The first transfer not waited for yet, if any (the windows of transfers before it
    /// may go).
    pub fn oldest_pending(&self) -> Option<u64> {
        self.pending.borrow().front().map(|b| b.first)
    }

    /// `SCIStartDmaTransfer(Vec)`: posts a checked vector, the local segment at `local`, the
    /// remote bytes from `vector.remote_start` at `window`. The queue is then POSTED.
    pub async fn start(
        &self,
        vector: &Vector,
        local: BusAddr,
        window: BusAddr,
    ) -> Result<Batch, SisciDmaError> {
        let asked = vector.transfers.len() as u64;
        let outstanding = self.outstanding();
        if asked > self.entries() - outstanding.min(self.entries()) {
            return Err(SisciDmaError::Full {
                asked,
                outstanding,
                entries: self.entries(),
            });
        }
        let batch = self.engine.post(&vector.descriptors(local, window)).await?;
        self.pending.borrow_mut().push_back(batch);
        self.state.set(QueueState::Posted);
        Ok(batch)
    }

    /// `SCIWaitForDMAQueue`: waits until every batch started before `until` (a batch's
    /// `end`; `None`: everything started) is done; the queue's state then (DONE, ERROR or
    /// ABORTED; IDLE or the last state if nothing was started).
    pub async fn wait(&self, until: Option<u64>) -> Result<QueueState, SisciDmaError> {
        loop {
            let front = self.pending.borrow().front().copied();
            let Some(batch) = front.filter(|b| until.is_none_or(|u| b.first < u)) else {
                return Ok(self.state.get());
            };
            if self.reaping.get() {
                self.engine_clock().sleep(REAPER_LOOK).await;
                continue;
            }
            let statuses = {
                // Reset even when the wait is dropped (a timeout, a program that left).
                let _reaping = Reaping::hold(&self.reaping);
                self.engine.wait(batch).await
            };
            let statuses = match statuses {
                Ok(s) => s,
                Err(e) => {
                    self.state.set(QueueState::Error);
                    return Err(e.into());
                }
            };
            self.pending.borrow_mut().pop_front();
            let state = if statuses.contains(&DescriptorStatus::Aborted) {
                QueueState::Aborted
            } else if statuses.iter().any(|s| s.is_failure()) {
                QueueState::Error
            } else if self.state.get() == QueueState::Posted {
                QueueState::Done
            } else {
                // An earlier batch of this round failed or was aborted: that stands.
                self.state.get()
            };
            self.state.set(state);
            if self.pending.borrow().is_empty() {
                return Ok(state);
            }
            // Later batches start a new round only if this one was done.
            if state == QueueState::Done {
                self.state.set(QueueState::Posted);
            }
        }
    }

    /// [`SisciDmaQueue::wait`] bounded by `timeout` on the queue's clock.
    pub async fn wait_for(
        &self,
        until: Option<u64>,
        timeout: Option<SimDuration>,
    ) -> Result<QueueState, SisciDmaError> {
        let Some(limit) = timeout else {
            return self.wait(until).await;
        };
        match smartio_platform::race(self.wait(until), self.engine_clock().sleep(limit)).await {
            smartio_platform::Either::Left(r) => r,
            smartio_platform::Either::Right(()) => Err(SisciDmaError::Timeout(limit)),
        }
    }

    /// `SCIDMAQueueState`: how the queue stands, without waiting: POSTED while the engine
    /// works on what was started; DONE, ERROR or ABORTED as soon as it finished.
    pub async fn state(&self) -> Result<QueueState, SisciDmaError> {
        if self.pending.borrow().is_empty() {
            return Ok(self.state.get());
        }
        Ok(match self.engine.state().await? {
            QueueView::Idle | QueueView::Posted => QueueState::Posted,
            QueueView::Done => QueueState::Done,
            QueueView::Error | QueueView::Halted => QueueState::Error,
            QueueView::Aborted => QueueState::Aborted,
        })
    }

    /// `SCIAbortDMAQueue`: stops what was started; a wait then reports ABORTED.
    pub async fn abort(&self) -> Result<(), SisciDmaError> {
        if self.pending.borrow().is_empty() {
            return Ok(());
        }
        Ok(self.engine.abort().await?)
    }

    /// `SCIRemoveDMAQueue`: disables the queue; refused while transfers are not waited for.
    pub async fn remove(&self) -> Result<(), SisciDmaError> {
        let outstanding = self.outstanding();
        if outstanding > 0 {
            return Err(SisciDmaError::Busy { outstanding });
        }
        Ok(self.engine.remove().await?)
    }

    fn engine_clock(&self) -> &P {
        self.engine.cpu()
    }
}

/// Marks a queue as being reaped for as long as it lives.
struct Reaping<'a>(&'a Cell<bool>);

impl<'a> Reaping<'a> {
    fn hold(flag: &'a Cell<bool>) -> Self {
        flag.set(true);
        Reaping(flag)
    }
}

impl Drop for Reaping<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(size: u64, local_offset: u64, remote_offset: u64) -> VecEntry {
        VecEntry {
            size,
            local_offset,
            remote_offset,
            flags: 0,
        }
    }

    #[test]
    fn a_vector_becomes_one_descriptor_per_entry_at_the_segments_addresses() {
        let v = Vector::check(
            &[entry(100, 0, 4096), entry(50, 200, 8192)],
            flag::DMA_GLOBAL,
            1 << 20,
            1 << 20,
        )
        .expect("valid");
        assert_eq!((v.remote_start, v.remote_end), (4096, 8242));
        let d = v.descriptors(BusAddr(0x1000_0000), BusAddr(0x9000_0000));
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].local, BusAddr(0x1000_0000));
        assert_eq!(d[0].remote, BusAddr(0x9000_0000));
        assert_eq!(d[1].local, BusAddr(0x1000_00c8));
        assert_eq!(d[1].remote, BusAddr(0x9000_1000));
        assert_eq!(d[1].length, 50);
        assert!(d.iter().all(|d| d.direction == Direction::Write));
    }

    #[test]
    fn dma_read_on_the_call_or_an_entry_makes_a_pull() {
        let mut pulled = entry(8, 0, 0);
        pulled.flags = flag::DMA_READ;
        let v = Vector::check(&[entry(8, 0, 0), pulled], 0, 64, 64).expect("valid");
        assert_eq!(v.transfers[0].direction, Direction::Write);
        assert_eq!(v.transfers[1].direction, Direction::Read);
        let v = Vector::check(&[entry(8, 0, 0)], flag::DMA_READ, 64, 64).expect("valid");
        assert_eq!(v.transfers[0].direction, Direction::Read);
    }

    #[test]
    fn flags_that_mean_nothing_here_are_illegal_flags() {
        for f in [
            flag::DMA_SYSDMA,
            flag::DMA_PHDMA,
            flag::DMA_USER_MEM,
            flag::DMA_SOURCE_ONLY,
            0x8000_0000,
        ] {
            let e = Vector::check(&[entry(8, 0, 0)], f, 64, 64).expect_err("refused");
            assert_eq!(e.class(), SciErrorClass::IllegalFlag, "{f:#x}");
        }
        let mut bad = entry(8, 0, 0);
        bad.flags = flag::DMA_WAIT;
        let e = Vector::check(&[entry(8, 0, 0), bad], 0, 64, 64).expect_err("refused");
        assert_eq!(
            e,
            SisciDmaError::IllegalFlag {
                flags: flag::DMA_WAIT,
                entry: Some(1)
            }
        );
    }

    #[test]
    fn empty_long_zero_and_out_of_range_vectors_are_refused_with_their_codes() {
        let refused = |entries: &[VecEntry]| {
            Vector::check(entries, 0, 4096, 8192)
                .expect_err("refused")
                .class()
        };
        assert_eq!(refused(&[]), SciErrorClass::IllegalParameter);
        assert_eq!(
            refused(&vec![entry(1, 0, 0); MAX_VECTOR + 1]),
            SciErrorClass::MaxEntries
        );
        assert_eq!(refused(&[entry(0, 0, 0)]), SciErrorClass::SizeAlignment);
        assert_eq!(refused(&[entry(4097, 0, 0)]), SciErrorClass::OutOfRange);
        assert_eq!(refused(&[entry(8, 4092, 0)]), SciErrorClass::OutOfRange);
        assert_eq!(refused(&[entry(8, 0, 8188)]), SciErrorClass::OutOfRange);
        assert_eq!(refused(&[entry(8, u64::MAX, 0)]), SciErrorClass::OutOfRange);
        assert_eq!(
            refused(&[entry(MAX_TRANSFER_BYTES + 1, 0, 0)]),
            SciErrorClass::OutOfRange
        );
    }

    #[test]
    fn queue_states_have_sisci_values() {
        for (s, v) in [
            (QueueState::Idle, 0),
            (QueueState::Gather, 1),
            (QueueState::Posted, 2),
            (QueueState::Done, 3),
            (QueueState::Aborted, 4),
            (QueueState::Error, 5),
        ] {
            assert_eq!(s.code(), v);
            assert_eq!(QueueState::from_code(v), Some(s));
        }
        assert_eq!(QueueState::from_code(6), None);
    }

    proptest! {
        /// Whatever the entries, a vector that passes the checks only names bytes inside
        /// both segments, and its descriptors stay inside the window's span.
        #[test]
        fn checked_vectors_stay_inside_both_segments(
            entries in proptest::collection::vec(
                (0u64..5000, 0u64..5000, 0u64..9000, prop_oneof![Just(0u32), Just(flag::DMA_READ), any::<u32>()]),
                0..6,
            ),
            flags in prop_oneof![Just(0u32), Just(flag::DMA_READ | flag::DMA_WAIT), any::<u32>()],
        ) {
            let entries: Vec<VecEntry> = entries
                .into_iter()
                .map(|(size, local_offset, remote_offset, flags)| VecEntry { size, local_offset, remote_offset, flags })
                .collect();
            if let Ok(v) = Vector::check(&entries, flags, 4096, 8192) {
                prop_assert_eq!(v.transfers.len(), entries.len());
                for t in &v.transfers {
                    prop_assert!(t.size > 0);
                    prop_assert!(t.local_offset + t.size <= 4096);
                    prop_assert!(t.remote_offset + t.size <= 8192);
                }
                for d in v.descriptors(BusAddr(0), BusAddr(0x10_0000)) {
                    prop_assert!(d.remote.get() + d.length <= 0x10_0000 + v.remote_span());
                }
            }
        }
    }
}
