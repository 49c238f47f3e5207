//! Posted writes of one TLP that travel without a transaction.
//!
//! Most of a run's writes are one small TLP: a doorbell a CPU rings, a completion queue entry
//! and an MSI-X message a device writes. As a transaction each takes a slot, queues its first
//! step, is stepped to send its TLP, queues its landing and is stepped again to deliver it —
//! work for transfers of many TLPs that one TLP does not need. When such a write's first
//! step would be the run's next event ([`Core::step_in_place`]'s case), it is sent at once
//! instead: booked along its path exactly as the transaction's step would book it, its
//! writer done (a posted write's requester goes on once its last TLP has left), and its
//! landing queued as a [`PostedWrite`] just when the transaction's next step would have been
//! queued, at the same time (ties between events go in the order queued, so every event
//! comes out in the same order). Landing, it is delivered as the transaction delivers a TLP.
//! The results are those of the transaction, bit for bit (`Sim::set_in_place(false)` runs
//! every write as one).

use super::{Core, Event};
use crate::record::NONE;
use crate::txn::next_chunk;
use smartio_fabric::{Access, Requester, Target};
use smartio_platform::{AccessError, BusAddr, SimDuration, SimTime};

/// A posted write of one TLP on its way: who wrote what where.
#[derive(Debug)]
struct PostedWrite {
    requester: Requester,
    target: Target,
    data: Vec<u8>,
}

/// The posted writes on their way, each in a slot its landing event names.
///
/// Invariant: a slot in `free` holds no write; every other slot holds the write one queued
/// [`Event::Posted`] names.
#[derive(Debug, Default)]
pub(crate) struct PostedWrites {
    slots: Vec<Option<PostedWrite>>,
    free: Vec<u32>,
    /// Buffers of writes delivered, kept for the next ones.
    spare: Vec<Vec<u8>>,
}

impl PostedWrites {
    /// Keeps `data`, written by `requester` to `target`, until it lands; its slot.
    fn hold(&mut self, requester: Requester, target: Target, data: &[u8]) -> u32 {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.extend_from_slice(data);
        let write = Some(PostedWrite {
            requester,
            target,
            data: bytes,
        });
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = write;
                slot
            }
            None => {
                self.slots.push(write);
                // 2^32 writes on their way at once would need far more memory than exists.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        }
    }

    /// Takes the write in `slot` (its landing event came).
    fn take(&mut self, slot: u32) -> Option<PostedWrite> {
        let write = self.slots.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
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

/// Buffers [`PostedWrites`] keeps for reuse, at most (more than a run keeps on their way as
/// a rule: one or two per queue pair and device).
const SPARE_BUFFERS: usize = 64;

impl Core {
    /// Sends `data`, `requester`'s write to `addr` whose first step, due at `start`, is the
    /// run's next event (the caller knows: see [`Core::step_in_place`]), at once if it is
    /// one TLP to one target (unicast, through no IOMMU) — then true, and the writer is
    /// done — or does nothing and answers false (it goes as a transaction). Routed as a
    /// transaction is, so an address that routes nowhere fails the same way.
    pub fn post_in_place(
        &mut self,
        requester: Requester,
        addr: BusAddr,
        data: &[u8],
        start: SimTime,
    ) -> Result<bool, AccessError> {
        let len = data.len() as u64;
        let limit = self.write_limit(requester);
        if len > limit || self.recording() {
            return Ok(false);
        }
        let segments = self.segments(requester, addr, len, Access::Write)?;
        let [seg] = &segments[..] else {
            return Ok(false);
        };
        let one_tlp = next_chunk(seg.bus_addr, seg.len, limit) == seg.len;
        let alone = seg.fanout.is_empty()
            && seg.translations.is_empty()
            && !matches!(seg.target, Target::Multicast { .. })
            && !seg.path.forward.is_empty();
        if !(one_tlp && alone) {
            return Ok(false);
        }
        // The transaction's first step would be taken at once, in place: an event.
        self.pass_to(start);
        let who = self.booking(requester);
        let crossing = self.cross(&seg.path.forward, start, len, who, false);
        let at = crossing.arrival + SimDuration(seg.path.arrive_ps);
        let slot = self.posted.hold(requester, seg.target, data);
        self.schedule(at, Event::Posted(slot));
        self.posted_alone += 1;
        Ok(true)
    }

    /// The posted write in `slot` lands now: delivered as a transaction's TLP is.
    pub fn land_posted(&mut self, slot: u32) {
        let Some(write) = self.posted.take(slot) else {
            return;
        };
        self.counters.tlp_arrivals += 1;
        // Sent while nothing was recorded, it has no recorded step.
        self.set_context(NONE);
        self.deliver_bytes(write.requester, write.target, &write.data, NONE);
        self.posted.give_back(write.data);
    }
}
