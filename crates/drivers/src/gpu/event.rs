//! Events (`cudaEvent_t`): an 8-byte slot in pinned host memory that a stream's TIMESTAMP
//! entry fills with the GPU's timer (ns), so elapsed times are the GPU's, as the papers
//! measured them.
//!
//! Invariants: a slot is zeroed when its event is recorded (before the entry is queued),
//! and the GPU's timer is never 0 by the time a timestamp runs, so a non-zero slot is a
//! written timestamp. Slots come from pinned pages of [`SLOTS_PER_PAGE`] that the context
//! owns and frees at close; a dropped event's slot is reused unless a timestamp may still be
//! on its way to it (recorded, never seen written).

use super::context::Shared;
use super::error::{BadCall, GpuError};
use super::stream::{cpu_addr, StreamInner};
use smartio_host::DmaBuffer;
use smartio_platform::{race, BusAddr, MemoryWatch, PhysAddr, Port, PAGE_SIZE};
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

/// Bytes per slot.
const SLOT: u64 = 8;
/// Slots per pinned page.
pub const SLOTS_PER_PAGE: u64 = PAGE_SIZE / SLOT;

/// A slot: where the CPU and where the GPU reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    cpu: PhysAddr,
    bus: BusAddr,
}

/// The context's event slots.
#[derive(Debug, Default)]
pub(crate) struct EventSlots {
    pages: Vec<DmaBuffer>,
    free: Vec<Slot>,
}

impl EventSlots {
    /// The pages (and no slots) from now on: the context is closing.
    pub(crate) fn take_pages(&mut self) -> Vec<DmaBuffer> {
        self.free.clear();
        std::mem::take(&mut self.pages)
    }
}

/// Where a recording went.
#[derive(Debug, Clone)]
struct Recorded {
    stream: Rc<StreamInner>,
    epoch: u64,
}

/// An event.
#[derive(Debug)]
pub struct Event {
    shared: Weak<Shared>,
    slot: Slot,
    recorded: RefCell<Option<Recorded>>,
    /// No timestamp is on its way to the slot (never recorded, or the last one was seen).
    settled: Cell<bool>,
}

impl Event {
    /// Takes a free slot, adding a pinned page when none is left.
    pub(crate) fn create(shared: &Rc<Shared>) -> Result<Event, GpuError> {
        let free = shared.events.borrow_mut().free.pop();
        let slot = match free {
            Some(s) => s,
            None => {
                let page = shared.alloc_pinned(PAGE_SIZE)?;
                let mut slots = shared.events.borrow_mut();
                slots.pages.push(page);
                slots.free.extend((1..SLOTS_PER_PAGE).rev().map(|i| Slot {
                    cpu: PhysAddr(page.cpu.get() + i * SLOT),
                    bus: page.bus.offset(i * SLOT),
                }));
                Slot {
                    cpu: page.cpu,
                    bus: page.bus,
                }
            }
        };
        Ok(Event {
            shared: Rc::downgrade(shared),
            slot,
            recorded: RefCell::new(None),
            settled: Cell::new(true),
        })
    }

    pub(crate) fn belongs_to(&self, shared: &Rc<Shared>) -> bool {
        std::ptr::eq(self.shared.as_ptr(), Rc::as_ptr(shared))
    }

    /// Zeroes the slot for a new recording; returns where the GPU writes it.
    pub(crate) async fn rearm(&self, shared: &Shared) -> Result<BusAddr, GpuError> {
        *self.recorded.borrow_mut() = None;
        self.settled.set(false);
        shared
            .cpu
            .write(cpu_addr(self.slot.cpu), &[0u8; SLOT as usize])
            .await
            .map_err(GpuError::Access)?;
        Ok(self.slot.bus)
    }

    /// Notes the stream (and its epoch) the timestamp was queued on.
    pub(crate) fn recorded_on(&self, stream: Rc<StreamInner>, epoch: u64) {
        *self.recorded.borrow_mut() = Some(Recorded { stream, epoch });
    }

    /// Waits for the timestamp (ns); fails if the event was never recorded, or if its
    /// stream's channel stopped on an error before writing it.
    pub(crate) async fn timestamp(&self, shared: &Rc<Shared>) -> Result<u64, GpuError> {
        if !self.belongs_to(shared) {
            return Err(BadCall::ForeignEvent.into());
        }
        let Some(rec) = self.recorded.borrow().clone() else {
            return Err(GpuError::EventNotRecorded);
        };
        loop {
            let slot_written = shared.cpu.written(self.slot.cpu, SLOT);
            let stream_signalled = rec.stream.watch(shared);
            let mut word = [0u8; SLOT as usize];
            shared
                .cpu
                .read(cpu_addr(self.slot.cpu), &mut word)
                .await
                .map_err(GpuError::Access)?;
            let ts = u64::from_le_bytes(word);
            if ts != 0 {
                self.settled.set(true);
                return Ok(ts);
            }
            if rec.stream.epoch() != rec.epoch {
                return Err(rec.stream.reset_error());
            }
            if let Some(e) = rec.stream.notice(shared).await? {
                return Err(e);
            }
            race(slot_written, stream_signalled).await;
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            if shared.check().is_ok() && self.settled.get() {
                shared.events.borrow_mut().free.push(self.slot);
            }
        }
    }
}
