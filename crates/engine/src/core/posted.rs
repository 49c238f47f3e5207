//! Posted writes of one TLP that travel without a transaction.
//!
//! Most of a run's writes are one small TLP: a doorbell a CPU rings, a completion queue entry
//! and an MSI-X message a device writes. As a transaction each takes a slot, queues its first
//! step, is stepped to send its TLP, queues its landing and is stepped again to deliver it —
//! work for transfers of many TLPs that one TLP does not need. Such a write (one TLP to one
//! target, unicast, through no IOMMU, nothing recorded) goes as a [`PostedWrite`] instead,
//! doing what the transaction's steps do, at the same times and in the same order:
//!
//! - When its first step would be the run's next event ([`Core::step_in_place`]'s case), it
//!   is sent at once ([`Core::post_in_place`]): booked along its path as the step would book
//!   it, its writer done (a posted write's requester goes on once its TLP has left), its
//!   landing queued just when the transaction's next step would have been.
//! - Otherwise its leaving is queued where the transaction's first step would have been
//!   ([`Core::post_queued`]); then ([`Core::leave_posted`]) it is sent, its writer woken,
//!   and its landing queued — or, with nothing to wake and nothing due before it, landed at
//!   once, as the transaction's step loop (or its write burst) goes on to it.
//!
//! Ties between events go in the order queued, and each event here is queued at the point
//! of the run where the transaction's would be, so every event comes out in the same order;
//! landing, the write is delivered as a transaction's TLP is. The results are those of the
//! transactions, bit for bit (`Sim::set_posted_alone(false)` runs every write as one; a
//! test compares).

use super::{before_queued, Core, Event};
use crate::record::NONE;
use crate::txn::{next_chunk, CostedPath, Segment, TxnKind};
use crate::wait::Wait;
use crate::waiters::{free_slot, keep_waker};
use smartio_fabric::{Access, Requester, Target};
use smartio_platform::{AccessError, BusAddr, SimDuration, SimTime};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A posted write of one TLP: who wrote what where.
#[derive(Debug)]
struct PostedWrite {
    requester: Requester,
    target: Target,
    data: Vec<u8>,
}

/// How a posted write whose leaving is queued goes: its one segment as routed when it was
/// started (as a transaction keeps it) and its writer's waker (none once the writer gave up
/// waiting).
#[derive(Debug)]
struct Leaving {
    segments: Rc<[Segment]>,
    waker: Option<Waker>,
}

/// A slot of [`PostedWrites`]: the write it holds, until it leaves how it goes, and how many
/// writes it has held (so a ticket of an earlier one is told apart).
#[derive(Debug, Default)]
struct Slot {
    write: Option<PostedWrite>,
    leaving: Option<Leaving>,
    gen: u32,
}

/// The posted writes under way, each in a slot its queued event names.
///
/// Invariant: a slot in `free` holds no write; every other slot holds the write that one
/// queued [`Event::Posted`] names (its leaving while the slot's `leaving` is set, else its
/// landing).
#[derive(Debug, Default)]
pub(crate) struct PostedWrites {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Buffers of writes delivered, kept for the next ones.
    spare: Vec<Vec<u8>>,
}

impl PostedWrites {
    /// Keeps `data`, written by `requester` to `target`, until it lands; its slot and the
    /// slot's generation.
    fn hold(
        &mut self,
        requester: Requester,
        target: Target,
        data: &[u8],
        leaving: Option<Leaving>,
    ) -> (u32, u32) {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.extend_from_slice(data);
        let write = Some(PostedWrite {
            requester,
            target,
            data: bytes,
        });
        let id = free_slot(&mut self.slots, &mut self.free);
        let slot = &mut self.slots[id as usize];
        slot.write = write;
        slot.leaving = leaving;
        (id, slot.gen)
    }

    /// Slot `id` if it holds generation `gen`'s write.
    fn get_mut(&mut self, (id, gen): (u32, u32)) -> Option<&mut Slot> {
        let slot = self.slots.get_mut(id as usize)?;
        (slot.gen & crate::ops::GEN_MASK == gen && slot.write.is_some()).then_some(slot)
    }

    /// Takes the write in slot `id` (it has landed).
    fn take(&mut self, id: u32) -> Option<PostedWrite> {
        let slot = self.slots.get_mut(id as usize)?;
        let write = slot.write.take()?;
        slot.gen = slot.gen.wrapping_add(1);
        self.free.push(id);
        Some(write)
    }

    /// Keeps a delivered write's buffer for the next one.
    fn give_back(&mut self, mut data: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS {
            data.clear();
            self.spare.push(data);
        }
    }
}

/// Buffers [`PostedWrites`] keeps for reuse, at most (more than a run keeps under way as a
/// rule: one or two per queue pair and device).
const SPARE_BUFFERS: usize = 64;

impl Core {
    /// Whether `requester`'s write of `len` bytes to `addr` may go as a [`PostedWrite`] (one
    /// TLP to one target, unicast, through no IOMMU, posted writes alone allowed, nothing
    /// recorded): its segments (the one) if so. Routed as a transaction is, so an address
    /// that routes nowhere fails the same way.
    #[inline(always)]
    fn alone(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        len: u64,
    ) -> Result<Option<Rc<[Segment]>>, AccessError> {
        let limit = self.write_limit(requester);
        if !self.posts_alone || len > limit || self.recording() {
            return Ok(None);
        }
        let segments = self.segments(requester, addr, len, Access::Write)?;
        let [seg] = &segments[..] else {
            return Ok(None);
        };
        let one_tlp = next_chunk(seg.bus_addr, seg.len, limit) == seg.len;
        let unicast = seg.fanout.is_empty()
            && seg.translations.is_empty()
            && !matches!(seg.target, Target::Multicast { .. })
            && !seg.path.forward.is_empty();
        Ok((one_tlp && unicast).then_some(segments))
    }

    /// Sends `data`, `requester`'s write to `addr` whose first step, due at `start`, is the
    /// run's next event (the caller knows: see [`Core::step_in_place`]), at once if it may go
    /// alone — then true, and the writer is done — or does nothing and answers false (it
    /// goes as a transaction).
    #[inline(always)]
    pub fn post_in_place(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        data: &[u8],
        start: SimTime,
    ) -> Result<bool, AccessError> {
        let Some(segments) = self.alone(requester, addr, data.len() as u64)? else {
            return Ok(false);
        };
        // The transaction's first step would be taken at once, in place: an event.
        self.pass_to(start);
        let at = self.send_posted(requester, &segments[0].path, data.len() as u64);
        let (id, _) = self.posted.hold(requester, segments[0].target, data, None);
        self.schedule(at, Event::Posted(id));
        self.posted_alone += 1;
        Ok(true)
    }

    /// Queues the leaving of `data`, `requester`'s write to `addr`, at `start` if it may go
    /// alone: its slot and generation (what its writer's ticket names), or `None` (it goes
    /// as a transaction).
    #[inline(always)]
    pub fn post_queued(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        data: &[u8],
        start: SimTime,
    ) -> Result<Option<(u32, u32)>, AccessError> {
        let Some(segments) = self.alone(requester, addr, data.len() as u64)? else {
            return Ok(None);
        };
        let target = segments[0].target;
        let leaving = Leaving {
            segments,
            waker: None,
        };
        let slot = self.posted.hold(requester, target, data, Some(leaving));
        self.schedule(start, Event::Posted(slot.0));
        self.posted_alone += 1;
        Ok(Some(slot))
    }

    /// Books `requester`'s TLP of `len` bytes along `path` from now, as a transaction's step
    /// books it; when it lands.
    fn send_posted(&mut self, requester: Requester, path: &CostedPath, len: u64) -> SimTime {
        let who = self.booking(requester);
        let crossing = self.cross_alone(&path.forward, self.now, len, who);
        crossing.arrival + SimDuration(path.arrive_ps)
    }

    /// The event of the posted write in slot `id` has come: it leaves, or it lands.
    #[inline]
    pub fn on_posted(&mut self, id: u32) {
        let leaving = self
            .posted
            .slots
            .get_mut(id as usize)
            .and_then(|s| s.leaving.take());
        match leaving {
            Some(leaving) => self.leave_posted(id, leaving),
            None => self.land_posted(id),
        }
    }

    /// Sends the posted write in slot `id` now, as the transaction's first step would: its
    /// writer, if it still waits, goes on; its landing is queued, unless nobody was woken
    /// and nothing is due before it — then the step loop would go on to it at once, and so
    /// does this (counted as that loop, or its write burst, counts it). While recording
    /// (started since it was queued), it goes on as the transaction it stands for.
    #[inline(never)]
    fn leave_posted(&mut self, id: u32, leaving: Leaving) {
        if self.recording() {
            self.leave_as_transaction(id, leaving);
            return;
        }
        let Some(write) = self.posted.slots[id as usize].write.as_ref() else {
            return;
        };
        let (requester, len) = (write.requester, write.data.len());
        let at = self.send_posted(requester, &leaving.segments[0].path, len as u64);
        let woke = leaving.waker.is_some();
        if let Some(w) = leaving.waker {
            w.wake();
        }
        if woke || !before_queued(at, self.next_due()) {
            self.schedule(at, Event::Posted(id));
            return;
        }
        self.step_to(at);
        if self.bursts && self.unwatched_memory(&leaving.segments[0]).is_some() {
            // A write burst's step.
            self.burst_steps += 1;
        }
        self.land_posted(id);
    }

    /// The posted write in slot `id`, whose leaving is due now, goes on as the transaction it
    /// stands for, made now and stepped at once as its queued first step would be (so what
    /// it does is recorded as the transaction's steps are). Its writer's ticket is done with
    /// the slot: the transaction wakes the writer when its TLP has left, and, detached, is
    /// freed once it has landed.
    fn leave_as_transaction(&mut self, id: u32, leaving: Leaving) {
        let Some(write) = self.posted.take(id) else {
            return;
        };
        let now = self.now;
        let (txn, _) = self.new_txn(
            TxnKind::Write,
            write.requester,
            leaving.segments,
            write.data,
            now,
            NONE,
            None,
        );
        if let Some(t) = self.txn_mut(txn) {
            t.waker = leaving.waker;
            t.detached = true;
            t.scheduled = Some(now);
        }
        self.on_txn_event(txn, now);
    }

    /// The posted write in slot `id` lands now: delivered as a transaction's TLP is.
    #[inline(always)]
    fn land_posted(&mut self, id: u32) {
        let Some(write) = self.posted.take(id) else {
            return;
        };
        self.counters.tlp_arrivals += 1;
        // Sent while nothing was recorded, it has no recorded step.
        self.set_context(NONE);
        self.deliver_bytes(write.requester, write.target, &write.data, NONE);
        self.posted.give_back(write.data);
    }

    /// Polls the writer of the posted write `slot` names: done once it has left.
    pub fn poll_posted(&mut self, slot: (u32, u32), cx: &Context<'_>) -> Poll<()> {
        let Some(Slot {
            write: Some(write),
            leaving: Some(leaving),
            ..
        }) = self.posted.get_mut(slot)
        else {
            return Poll::Ready(());
        };
        let requester = write.requester;
        keep_waker(&mut leaving.waker, cx.waker());
        let seg = &leaving.segments[0];
        let wait = Wait::Access {
            requester,
            addr: BusAddr(seg.bus_addr),
            len: seg.len,
            write: true,
        };
        self.waits.push(wait);
        Poll::Pending
    }

    /// The writer of the posted write `slot` names waits for it to leave from inside its
    /// poll (see `Sim::run_to_posted_leaving`): it counts as waiting, so that the write
    /// leaves as it does when its writer waits, though no task is woken.
    pub fn wait_posted_in_place(&mut self, slot: (u32, u32)) {
        if let Some(Slot {
            leaving: Some(leaving),
            ..
        }) = self.posted.get_mut(slot)
        {
            leaving.waker = Some(Waker::noop().clone());
        }
    }

    /// Whether the posted write `slot` names has left (its writer may go on).
    pub fn posted_left(&mut self, slot: (u32, u32)) -> bool {
        self.posted
            .get_mut(slot)
            .is_none_or(|s| s.leaving.is_none())
    }

    /// The writer of the posted write `slot` names gave up waiting: it still goes.
    pub fn cancel_posted(&mut self, slot: (u32, u32)) {
        if let Some(leaving) = self.posted.get_mut(slot).and_then(|s| s.leaving.as_mut()) {
            leaving.waker = None;
        }
    }
}
