//! What agents have under way in the engine — accesses, timers, memory watches, interrupt
//! waits — as small states polled against the [`Core`], and the slab ([`Ops`]) that the
//! platform contract's tickets name them in.
//!
//! A slot of the slab, and the buffer beside it that holds a local read's data until the
//! read is done, are reused once the operation is given back, so an everyday operation
//! allocates nothing. Every future the engine hands out (the contract's, through
//! [`smartio_machine::Agent`], and [`crate::Agent`]'s own) is a ticket into this slab, but a
//! sleep's and an access's that travels as a transaction: a sleep holds nothing but its
//! timer, and its ticket names the timer itself ([`arm_sleep`]); such an access holds
//! nothing but its transaction, and its ticket names the transaction ([`txn_ticket`]), or
//! the posted write it travels as ([`posted_ticket`]). So the most frequent waits skip the
//! slab.
//!
//! What a dropped operation gives back is what today's hardware model needs: a timer, a
//! watch or an interrupt wait's timer is disarmed; an access goes on by itself (its TLPs
//! still travel, a posted write still lands), its transaction detached so that the core
//! frees it when it finishes.

use crate::core::{Core, TxnResult};
use crate::record;
use crate::txn::{Txn, TxnKind};
use crate::wait::Wait;
use crate::waiters::{keep_waker, TimerKey, WatchKey};
use smartio_fabric::{HostId, Requester};
use smartio_machine::Ticket;
use smartio_platform::{AccessError, BusAddr, SimDuration};
use std::task::{Context, Poll};

/// A local read's buffer is kept for the slot's next operation up to this capacity (a
/// larger one is freed, so that one big read does not hold memory for the run).
const KEPT_LOCAL_BYTES: usize = 64 * 1024;

/// How an access travels, once started.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access {
    /// A transaction of TLPs, named by its ticket ([`txn_ticket`]), or a posted write of one
    /// TLP travelling without one ([`posted_ticket`]).
    Txn(Ticket),
    /// A CPU's access to its own RAM, done when the timer fires, or at once (`None`) when
    /// its time passed in place (a read's data is taken when it starts, into the buffer
    /// beside its slot).
    Local(Option<TimerKey>),
}

/// A CPU's access to its own RAM under way (see [`Access::Local`]), and what its task is
/// told it waits for.
#[derive(Debug)]
pub(crate) struct AccessOp {
    /// When it is done; `None` when its time passed in place (it is done).
    pub timer: Option<TimerKey>,
    pub wait: Wait,
}

/// Where a finished read's bytes go: copied into the caller's buffer, as long as the read
/// (`&mut [u8]`; a write passes an empty one), or handed over in a buffer of their own
/// (`&mut Vec<u8>`: the transaction's buffer is moved there, no copy). Each kind of
/// destination gets its own copy of the poll path.
pub(crate) trait ReadInto {
    /// A local read's bytes (taken when it started).
    fn local(self, local: &[u8]);

    /// Frees finished transaction `id`, a successful read's bytes going here.
    fn take(self, core: &mut Core, id: u32) -> Option<TxnResult>;
}

impl ReadInto for &mut [u8] {
    #[inline(always)]
    fn local(self, local: &[u8]) {
        let n = local.len().min(self.len());
        self[..n].copy_from_slice(&local[..n]);
    }

    #[inline(always)]
    fn take(self, core: &mut Core, id: u32) -> Option<TxnResult> {
        core.take_txn(id, self)
    }
}

impl ReadInto for &mut Vec<u8> {
    #[inline(always)]
    fn local(self, local: &[u8]) {
        self.extend_from_slice(local);
    }

    #[inline(always)]
    fn take(self, core: &mut Core, id: u32) -> Option<TxnResult> {
        core.take_txn_data(id, self)
    }
}

impl AccessOp {
    /// Whether the access is done. When it is, a read's data — `local`, taken when it
    /// started — is in `into`.
    #[inline]
    fn poll(
        &self,
        core: &mut Core,
        cx: &Context<'_>,
        local: &[u8],
        into: impl ReadInto,
    ) -> Poll<Result<(), AccessError>> {
        if let Some(timer) = self.timer {
            if !core.timers.poll(timer, cx.waker()) {
                core.waits.push(self.wait);
                return Poll::Pending;
            }
            core.timers.remove(timer);
        }
        into.local(local);
        Poll::Ready(Ok(()))
    }

    /// Dropped while waiting (the other side of a race won): the timer is given back.
    fn cancel(&self, core: &mut Core) {
        if let Some(timer) = self.timer {
            core.timers.remove(timer);
        }
    }
}

/// Polls an access that travels as transaction `id` (its ticket's: see [`txn_of`]). When
/// it is done, a read's data is in `into`, and the transaction is freed or, for a posted
/// write whose TLPs still travel, detached.
#[inline]
pub(crate) fn poll_txn(
    core: &mut Core,
    (id, serial): (u32, u32),
    cx: &Context<'_>,
    into: impl ReadInto,
) -> Poll<Result<(), AccessError>> {
    // A write is finished once all of it has landed, deferred landings too.
    core.settle_txn(id);
    let finished = match core.txn_mut(id) {
        Some(t) if t.serial & GEN_MASK != serial => stale_txn(id),
        Some(t) if t.result.is_some() => t.finished(),
        Some(t) => {
            keep_waker(&mut t.waker, cx.waker());
            let wait = access_wait(t);
            core.waits.push(wait);
            return Poll::Pending;
        }
        None => stale_txn(id),
    };
    let result = if finished {
        into.take(core, id).flatten()
    } else {
        // A posted write: the requester is done; the TLPs still travel.
        core.txn_mut(id).and_then(|t| {
            t.detached = true;
            t.result.clone()
        })
    };
    Poll::Ready(result.unwrap_or(Ok(())))
}

/// Gives back an access that travels as transaction `id`, dropped while waiting (the other
/// side of a race won): the transaction is left to finish on its own.
pub(crate) fn cancel_txn(core: &mut Core, (id, _): (u32, u32)) {
    core.settle_txn(id);
    if core.txn(id).is_some_and(|t| t.finished()) {
        core.take_txn(id, &mut []);
    } else if let Some(t) = core.txn_mut(id) {
        t.detached = true;
        t.waker = None;
    }
}

/// What the task of an access that travels as `t` waits for.
fn access_wait(t: &Txn) -> Wait {
    Wait::Access {
        requester: t.requester,
        addr: BusAddr(t.segments.first().map_or(0, |s| s.bus_addr)),
        len: t.segments.last().map_or(0, |s| s.offset + s.len),
        write: t.kind == TxnKind::Write,
    }
}

/// What a transaction's ticket names that is not under way: a bug of the port that polled
/// it.
fn stale_txn(id: u32) -> ! {
    panic!("emulator bug: the timed engine has no access under way as transaction {id}")
}

/// A sleep: a timer, given back when it fired or was dropped.
#[derive(Debug)]
pub(crate) struct TimerOp {
    timer: TimerKey,
    done: bool,
}

impl TimerOp {
    /// A timer `duration` after now; while recording, a step of `requester`'s sleep.
    pub fn arm(core: &mut Core, duration: SimDuration, requester: Requester) -> TimerOp {
        let now = core.now;
        let at = now + duration;
        let step = if core.recording() {
            let (cause, label) = (core.context(), smartio_platform::activity::take());
            core.record(record::Kind::Sleep { requester }, now, at, cause, label)
        } else {
            record::NONE
        };
        TimerOp {
            timer: core.add_timer(at, step),
            done: false,
        }
    }

    /// Whether the timer fired; otherwise the task is woken when it does.
    #[inline(always)]
    fn fired(&mut self, core: &mut Core, cx: &Context<'_>) -> bool {
        if self.done || core.timers.poll(self.timer, cx.waker()) {
            if !self.done {
                core.timers.remove(self.timer);
                self.done = true;
            }
            return true;
        }
        if let Some(due) = core.timers.due(self.timer) {
            core.waits.push(Wait::Timer { due });
        }
        false
    }

    fn cancel(&self, core: &mut Core) {
        if !self.done {
            core.timers.remove(self.timer);
        }
    }
}

/// A memory watch, armed when made (see [`smartio_platform::MemoryWatch`]).
#[derive(Debug)]
pub(crate) struct WatchOp {
    key: WatchKey,
    wait: Wait,
}

impl WatchOp {
    /// Arms a watch on `len` bytes at `addr` of `host`'s memory.
    pub fn arm(core: &mut Core, host: HostId, addr: smartio_platform::PhysAddr, len: u64) -> Self {
        core.watch_armed(host, addr.get(), len);
        WatchOp {
            key: core.watches.add(host, addr, len),
            wait: Wait::MemoryWrite { host, addr, len },
        }
    }

    /// Ready once a write landed; the watch is then given back.
    fn poll(&self, core: &mut Core, cx: &Context<'_>) -> Poll<()> {
        if core.watches.poll(self.key, cx.waker()) {
            core.watches.remove(self.key);
            return Poll::Ready(());
        }
        core.waits.push(self.wait);
        Poll::Pending
    }

    fn cancel(&self, core: &mut Core) {
        core.watches.remove(self.key);
    }
}

/// Waiting for an interrupt vector of a host, with a timeout's timer if it has one.
#[derive(Debug)]
pub(crate) struct InterruptOp {
    host: HostId,
    vector: u32,
    timeout: Option<TimerOp>,
}

impl InterruptOp {
    /// A wait for `vector` on `host`; `timeout` is armed now.
    pub fn new(host: HostId, vector: u32, timeout: Option<TimerOp>) -> InterruptOp {
        InterruptOp {
            host,
            vector,
            timeout,
        }
    }

    /// `true` when the interrupt came (one is consumed), `false` when the timeout fired
    /// first.
    fn poll(&mut self, core: &mut Core, cx: &Context<'_>) -> Poll<bool> {
        let (host, vector) = (self.host, self.vector);
        let line = core.irqs[host.index()].entry(vector).or_default();
        if line.pending > 0 {
            line.pending -= 1;
            if let Some(timer) = &self.timeout {
                timer.cancel(core);
            }
            return Poll::Ready(true);
        }
        line.waker = Some(cx.waker().clone());
        core.waits.push(Wait::Interrupt { host, vector });
        let timed_out = self
            .timeout
            .as_mut()
            .is_some_and(|timer| timer.fired(core, cx));
        if timed_out {
            Poll::Ready(false)
        } else {
            Poll::Pending
        }
    }

    /// Dropped while waiting: its timeout is given back (the line keeps the waker it was
    /// last given; a wake-up of a task that no longer waits is harmless).
    fn cancel(&self, core: &mut Core) {
        if let Some(timer) = &self.timeout {
            timer.cancel(core);
        }
    }
}

/// One operation under way.
#[derive(Debug)]
pub(crate) enum Op {
    Access(AccessOp),
    Watch(WatchOp),
    Interrupt(InterruptOp),
}

impl Op {
    fn cancel(&self, core: &mut Core) {
        match self {
            Op::Access(op) => op.cancel(core),
            Op::Watch(op) => op.cancel(core),
            Op::Interrupt(op) => op.cancel(core),
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    gen: u32,
    op: Option<Op>,
    /// A local read's data, from its start until it is done.
    local: Vec<u8>,
}

/// What starting an operation gives [`Ops::start`]: an operation for a slot, or a ticket
/// that names what it holds itself (an access's transaction).
#[derive(Debug)]
pub(crate) enum Begun {
    Slot(Op),
    Named(Ticket),
}

/// Every operation under way that a ticket names. A ticket is the slot's index and its
/// generation: a slot given back and reused does not answer to an old ticket.
#[derive(Debug, Default)]
pub(crate) struct Ops {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// The generation bits a ticket keeps of a slot's generation or a transaction's serial
/// number: the top two bits of a ticket are [`SLEEP`]'s and [`TXN`]'s.
pub(crate) const GEN_MASK: u32 = u32::MAX >> 2;

/// The generation bits a sleep's ticket keeps of its timer's: all of them (timers'
/// generations have 31 bits), beside [`SLEEP`].
const TIMER_GEN_MASK: u32 = u32::MAX >> 1;

/// Marks a ticket that names a sleep's timer itself (see [`arm_sleep`]), not a slot.
const SLEEP: u64 = 1 << 63;

/// Marks a ticket (without [`SLEEP`]) that names an access's transaction itself (see
/// [`txn_ticket`]), not a slot.
const TXN: u64 = 1 << 62;

/// The ticket of an access that travels as transaction `id`: all such an access holds is
/// its transaction, so its ticket names it (no slot of its own: [`poll_txn`] and
/// [`cancel_txn`] take it), with the transaction's serial number, so that a ticket of a
/// transaction freed and reused does not name its successor.
pub(crate) fn txn_ticket(id: u32, serial: u32) -> Ticket {
    Ticket(TXN | u64::from(serial & GEN_MASK) << 32 | u64::from(id))
}

/// The transaction (id, serial number) an access's ticket names, if it is one.
#[inline]
pub(crate) fn txn_of(ticket: Ticket) -> Option<(u32, u32)> {
    (ticket.0 & (SLEEP | TXN | POSTED) == TXN)
        .then_some((ticket.0 as u32, (ticket.0 >> 32) as u32 & GEN_MASK))
}

/// The top bit of a ticket's id half, which neither transaction ids nor posted writes'
/// slots reach: with [`TXN`], it marks a ticket that names a posted write travelling
/// without a transaction (see [`posted_ticket`]).
const POSTED_ID: u32 = 1 << 31;

/// [`POSTED_ID`] in a ticket.
const POSTED: u64 = POSTED_ID as u64;

/// The ticket of a write that travels as the posted write in `slot` of generation `gen`
/// (see `core::posted`): like a transaction's, all its writer holds is the write.
pub(crate) fn posted_ticket((slot, gen): (u32, u32)) -> Ticket {
    Ticket(TXN | POSTED | u64::from(gen & GEN_MASK) << 32 | u64::from(slot & !POSTED_ID))
}

/// The posted write (slot, generation) a ticket names, if it is one.
#[inline]
pub(crate) fn posted_of(ticket: Ticket) -> Option<(u32, u32)> {
    (ticket.0 & (SLEEP | TXN | POSTED) == TXN | POSTED).then_some((
        ticket.0 as u32 & !POSTED_ID,
        (ticket.0 >> 32) as u32 & GEN_MASK,
    ))
}

/// Arms a sleep of `duration` for `requester` (see [`TimerOp::arm`]); its ticket names the
/// timer itself, which is all a sleep holds (no slot of its own: [`poll_sleep`] and
/// [`cancel_sleep`] take it). Timers' generations have 31 bits, so the ticket keeps them.
pub(crate) fn arm_sleep(core: &mut Core, duration: SimDuration, requester: Requester) -> Ticket {
    sleep_ticket(TimerOp::arm(core, duration, requester).timer)
}

/// The ticket of a sleep on `timer`.
fn sleep_ticket(timer: TimerKey) -> Ticket {
    Ticket(SLEEP | u64::from(timer.gen & TIMER_GEN_MASK) << 32 | u64::from(timer.id))
}

/// The timer a sleep's ticket names, if it is one.
#[inline]
pub(crate) fn sleep_timer(ticket: Ticket) -> Option<TimerKey> {
    (ticket.0 & SLEEP != 0).then_some(TimerKey {
        id: ticket.0 as u32,
        gen: (ticket.0 >> 32) as u32 & TIMER_GEN_MASK,
    })
}

/// Polls a sleep: ready once its timer fired (the timer is then given back).
#[inline]
pub(crate) fn poll_sleep(core: &mut Core, timer: TimerKey, cx: &Context<'_>) -> Poll<bool> {
    if core.timers.poll(timer, cx.waker()) {
        core.timers.remove(timer);
        return Poll::Ready(true);
    }
    match core.timers.due(timer) {
        Some(due) => {
            core.waits.push(Wait::Timer { due });
            Poll::Pending
        }
        None => panic!("emulator bug: the timed engine has no sleep under way for {timer:?}"),
    }
}

/// Gives back a sleep whose future was dropped before it was ready.
pub(crate) fn cancel_sleep(core: &mut Core, timer: TimerKey) {
    core.timers.remove(timer);
}

/// What a ticket names that no slot holds: a bug of the port that polled it.
fn stale(ticket: Ticket) -> ! {
    panic!("emulator bug: the timed engine has no operation under way for {ticket:?}")
}

impl Ops {
    /// Starts an operation in a free slot: `start` gets the slot's buffer (emptied) for a
    /// local read's data. The slot stays free if it fails, or if the operation needs none
    /// ([`Begun::Named`]).
    #[inline]
    pub fn start<E>(
        &mut self,
        start: impl FnOnce(&mut Vec<u8>) -> Result<Begun, E>,
    ) -> Result<Ticket, E> {
        let id = match self.free.last() {
            Some(&id) => id,
            None => {
                self.slots.push(Slot::default());
                // 2^32 operations under way at once would need far more memory than exists.
                let id = u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX);
                self.free.push(id);
                id
            }
        };
        let slot = &mut self.slots[id as usize];
        slot.local.clear();
        match start(&mut slot.local)? {
            Begun::Slot(op) => {
                self.free.pop();
                slot.op = Some(op);
                Ok(Ticket(u64::from(slot.gen & GEN_MASK) << 32 | u64::from(id)))
            }
            Begun::Named(ticket) => Ok(ticket),
        }
    }

    #[inline]
    fn slot(&mut self, ticket: Ticket) -> &mut Slot {
        let (gen, id) = ((ticket.0 >> 32) as u32, ticket.0 as u32);
        match self.slots.get_mut(id as usize) {
            Some(slot) if slot.gen & GEN_MASK == gen && slot.op.is_some() => slot,
            _ => stale(ticket),
        }
    }

    /// Frees the slot of a finished or cancelled operation.
    #[inline]
    fn release(&mut self, ticket: Ticket) {
        let id = ticket.0 as u32;
        let slot = self.slot(ticket);
        slot.op = None;
        slot.gen = slot.gen.wrapping_add(1);
        if slot.local.capacity() > KEPT_LOCAL_BYTES {
            slot.local = Vec::new();
        }
        self.free.push(id);
    }

    /// Polls an access; ready, it is given back (see [`AccessOp::poll`]).
    #[inline]
    pub fn poll_read(
        &mut self,
        core: &mut Core,
        ticket: Ticket,
        into: impl ReadInto,
        cx: &Context<'_>,
    ) -> Poll<Result<(), AccessError>> {
        let slot = self.slot(ticket);
        let Some(Op::Access(op)) = &slot.op else {
            panic!("emulator bug: {ticket:?} polled as an access names another operation")
        };
        let result = std::task::ready!(op.poll(core, cx, &slot.local, into));
        self.release(ticket);
        Poll::Ready(result)
    }

    /// Polls a watch or an interrupt wait; ready, it is given back. `true` unless
    /// an interrupt wait timed out.
    #[inline]
    pub fn poll_wait(&mut self, core: &mut Core, ticket: Ticket, cx: &Context<'_>) -> Poll<bool> {
        let slot = self.slot(ticket);
        let outcome = match &mut slot.op {
            Some(Op::Watch(op)) => op.poll(core, cx).is_ready().then_some(true),
            Some(Op::Interrupt(op)) => match op.poll(core, cx) {
                Poll::Ready(came) => Some(came),
                Poll::Pending => None,
            },
            Some(Op::Access(_)) | None => {
                panic!("emulator bug: {ticket:?} polled as a wait names an access")
            }
        };
        match outcome {
            Some(outcome) => {
                self.release(ticket);
                Poll::Ready(outcome)
            }
            None => Poll::Pending,
        }
    }

    /// Gives back an operation whose future was dropped before it was ready.
    pub fn cancel(&mut self, core: &mut Core, ticket: Ticket) {
        if let Some(op) = &self.slot(ticket).op {
            op.cancel(core);
        }
        self.release(ticket);
    }

    /// Operations under way.
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    /// A sleep's ticket gives back its timer whole, whatever its generation (all 31 bits),
    /// a transaction's ticket its slot and serial number (30 bits), and neither is taken
    /// for the other or for a slot's.
    #[test]
    fn tickets_that_name_what_they_hold_give_it_back_and_are_not_taken_for_others() {
        for gen in [0, 1, 5, 1 << 29, 1 << 30, (1 << 30) | 7, TIMER_GEN_MASK] {
            let timer = TimerKey { id: 42, gen };
            let ticket = sleep_ticket(timer);
            assert_eq!(sleep_timer(ticket), Some(timer), "generation {gen:#x}");
            assert_eq!(txn_of(ticket), None);
            assert_eq!(posted_of(ticket), None);
        }
        for serial in [0, 1, 1 << 29, GEN_MASK] {
            let ticket = txn_ticket(7, serial);
            assert_eq!(txn_of(ticket), Some((7, serial)), "serial {serial:#x}");
            assert_eq!(sleep_timer(ticket), None);
            assert_eq!(posted_of(ticket), None);
            let posted = posted_ticket((7, serial));
            assert_eq!(
                posted_of(posted),
                Some((7, serial)),
                "generation {serial:#x}"
            );
            assert_eq!(txn_of(posted), None, "a posted write is no transaction");
            assert_eq!(sleep_timer(posted), None);
        }
        // A serial past 30 bits is kept as its low 30, as the poll compares it.
        assert_eq!(txn_of(txn_ticket(7, u32::MAX)), Some((7, GEN_MASK)));
        let mut ops = Ops::default();
        let slot = ops.start(|_| Ok::<_, Infallible>(Begun::Named(txn_ticket(1, 2))));
        assert_eq!(slot.ok(), Some(txn_ticket(1, 2)));
        assert_eq!(ops.live(), 0, "a named operation takes no slot");
    }
}
