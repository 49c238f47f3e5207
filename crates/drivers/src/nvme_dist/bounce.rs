//! The block client's bounce buffer (seed 003 §V): one large segment in the client's RAM,
//! mapped for the controller once and split into equal slots, one per request in flight.
//!
//! - [`Slots`] hands the slots out first come first served; a request that finds none free
//!   waits until one is given back (it does not fail).
//! - [`Bounce`] knows where slot `i` is for the CPU and for the controller, writes every
//!   slot's PRP list once when the client starts (the controller's descriptors stay
//!   programmed, since the segment never moves), gives a request its PRP1/PRP2 without
//!   writing anything, and copies a request's bytes between the program's buffer and its
//!   slot: the real bytes, at the cost of one core's copy (`[cpu] memcpy_bytes_per_ns`).
//!
//! Invariant: a slot belongs to one request from [`Slots::acquire`] to [`Slots::release`];
//! nothing else reads or writes it meanwhile, so the bytes a request copies are its own.

use super::{BadRequest, DistError};
use smartio_devices::nvme::prp;
use smartio_host::{DmaBuffer, HostOs};
use smartio_platform::{BusAddr, Clock, FifoLock, Notify, PhysAddr, Port, PAGE_SIZE};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// The pool of free slots.
pub(super) struct Slots {
    free: RefCell<VecDeque<u32>>,
    /// Requests take their turn here, in arrival order, before they look for a slot.
    turn: Rc<FifoLock>,
    /// A slot was given back.
    released: Notify,
    /// Requests inside [`Slots::acquire`] now.
    inside: Cell<u32>,
    /// Requests that found no slot free (or others already waiting) when they came.
    waits: Cell<u64>,
}

impl Slots {
    /// `count` free slots, 0 to `count - 1`.
    pub fn new(count: u32) -> Slots {
        Slots {
            free: RefCell::new((0..count).collect()),
            turn: Rc::new(FifoLock::new("a turn at the bounce buffer's free slots")),
            released: Notify::new(),
            inside: Cell::new(0),
            waits: Cell::new(0),
        }
    }

    /// Takes a free slot, waiting (behind earlier requests) until one is given back when
    /// none is free. Not meant to be raced: a dropped call leaves its count behind.
    pub async fn acquire(&self) -> u32 {
        if self.free.borrow().is_empty() || self.inside.get() > 0 {
            self.waits.set(self.waits.get() + 1);
        }
        self.inside.set(self.inside.get() + 1);
        let _turn = self.turn.acquire().await;
        let slot = loop {
            if let Some(slot) = self.free.borrow_mut().pop_front() {
                break slot;
            }
            self.released.notified().await;
        };
        self.inside.set(self.inside.get() - 1);
        slot
    }

    /// Gives `slot` back; the first waiting request gets it.
    pub fn release(&self, slot: u32) {
        self.free.borrow_mut().push_back(slot);
        self.released.notify();
    }

    /// Requests that had to wait for a slot so far.
    pub fn waits(&self) -> u64 {
        self.waits.get()
    }

    /// Slots free now.
    pub fn free(&self) -> usize {
        self.free.borrow().len()
    }
}

/// Where the bounce buffer is and how a request uses its slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounce {
    /// The segment in this host's physical memory (where the CPU copies).
    pub cpu: PhysAddr,
    /// The segment as the controller addresses it (where PRPs point).
    pub bus: BusAddr,
    /// Bytes per slot (a whole number of pages).
    pub slot_bytes: u64,
    /// Slots.
    pub slots: u32,
    /// One PRP list page per slot, when a slot spans more than two pages.
    pub lists: Option<DmaBuffer>,
}

impl Bounce {
    /// Slot `slot`'s first byte for the CPU and for the controller.
    fn slot(&self, slot: u32) -> (PhysAddr, u64) {
        let at = u64::from(slot) * self.slot_bytes;
        (PhysAddr(self.cpu.get() + at), self.bus.get() + at)
    }

    /// Slot `slot`'s PRP list page for the CPU and for the controller, if slots have lists.
    fn list(&self, slot: u32) -> Option<(BusAddr, u64)> {
        self.lists.map(|l| {
            let at = u64::from(slot) * PAGE_SIZE;
            (BusAddr(l.cpu.get() + at), l.bus.get() + at)
        })
    }

    /// Whether a slot needs a PRP list (it touches more than two pages).
    pub fn needs_lists(slot_bytes: u64) -> bool {
        prp::list_pages_needed(0, slot_bytes) > 0
    }

    /// Writes every slot's PRP list, for the whole slot, through `os`'s CPU: a request's
    /// list is a prefix of its slot's, so nothing is written per request.
    pub async fn program(&self, os: &HostOs) -> Result<(), DistError> {
        for slot in 0..self.slots {
            let (Some((cpu, list)), (_, bus)) = (self.list(slot), self.slot(slot)) else {
                return Ok(());
            };
            let prps = prp::build(bus, self.slot_bytes, &[list])
                .map_err(|source| BadRequest::SlotList { slot, bus, source })?;
            if let Some(page) = prps.lists.first() {
                os.cpu()
                    .write(cpu, &page.bytes())
                    .await
                    .map_err(super::access("write a bounce slot's PRP list"))?;
            }
        }
        Ok(())
    }

    /// PRP1 and PRP2 of `len` bytes at the start of `slot` (its list already written).
    pub fn prps(&self, slot: u32, len: u64) -> Result<(u64, u64), DistError> {
        let (_, bus) = self.slot(slot);
        let lists: Vec<u64> = self.list(slot).map(|(_, l)| l).into_iter().collect();
        let prps = prp::build(bus, len, &lists).map_err(|source| BadRequest::SlotPrps {
            len,
            slot,
            source,
        })?;
        Ok((prps.prp1, prps.prp2))
    }

    /// Copies `len` bytes from the program's `buffer` into `slot` (a write's submission
    /// path), on `os`'s CPU.
    pub async fn copy_in(
        &self,
        os: &HostOs,
        buffer: PhysAddr,
        slot: u32,
        len: u64,
    ) -> Result<(), CopyError> {
        let (at, _) = self.slot(slot);
        copy(os, buffer, at, len).await
    }

    /// Copies `len` bytes from `slot` into the program's `buffer` (a read's completion
    /// path), on `os`'s CPU.
    pub async fn copy_out(
        &self,
        os: &HostOs,
        slot: u32,
        buffer: PhysAddr,
        len: u64,
    ) -> Result<(), CopyError> {
        let (at, _) = self.slot(slot);
        copy(os, at, buffer, len).await
    }
}

/// A copy that touched memory the kernel does not have (a VM's unbacked guest page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CopyError {
    /// Where the copy read.
    pub from: PhysAddr,
    /// Where it wrote.
    pub to: PhysAddr,
    /// What was wrong.
    pub why: smartio_host::GuestMemoryError,
}

/// One core's memcpy of `len` bytes from `from` to `to` in `os`'s memory: the bytes move
/// and the CPU spends what the calibration says such a copy takes.
async fn copy(os: &HostOs, from: PhysAddr, to: PhysAddr, len: u64) -> Result<(), CopyError> {
    let failed = |e: smartio_host::GuestMemoryError| CopyError { from, to, why: e };
    // At most a slot (the controller's largest transfer).
    let mut bytes = vec![0u8; len as usize];
    os.read_memory(from, &mut bytes).map_err(failed)?;
    os.write_memory(to, &bytes).map_err(failed)?;
    let cpu = os.cpu();
    let cost = cpu.machine().cpu_timing().memcpy(len);
    cpu.spend("block client: copy through the bounce buffer", cost)
        .await;
    Ok(())
}
