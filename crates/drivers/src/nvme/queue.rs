//! One submission/completion queue pair as the driver keeps it: entries in host memory,
//! command ids as tags, phase tracking, and doorbells.
//!
//! Invariant: at most `entries - 1` commands are outstanding (one tag each), so the
//! submission queue can never overflow and every completion finds its tag.

use smartio_devices::nvme::spec::{Command, Completion, CQE_SIZE, SQE_SIZE};
use smartio_host::{DmaBuffer, IrqVector, Mmio};
use smartio_machine::{Agent, Armed};
use smartio_platform::activity;
use smartio_platform::{AccessError, BusAddr, Either, FifoPool, PhysAddr, Port};
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

#[derive(Debug, Default)]
struct Tag {
    done: Option<Completion>,
    waker: Option<Waker>,
}

/// A queue pair.
#[derive(Debug)]
pub struct QueuePair {
    /// Queue id (0 = admin).
    pub qid: u16,
    /// Entries per queue.
    pub entries: u16,
    /// The submission queue memory.
    pub sq: DmaBuffer,
    /// The completion queue memory.
    pub cq: DmaBuffer,
    /// The interrupt vector of the completion queue (interrupt mode).
    pub irq: Option<IrqVector>,
    cpu: Agent,
    bar: Mmio,
    sq_doorbell: u64,
    cq_doorbell: u64,
    sq_tail: Cell<u16>,
    cq_head: Cell<u16>,
    phase: Cell<bool>,
    /// The SQ head the controller reported in the last completion reaped, and the entries
    /// it has fetched in all by then (its reported heads' progress, wraps included).
    sq_fetched: Cell<(u16, u64)>,
    tags: RefCell<Vec<Tag>>,
    /// Free tags; requests wait for one in arrival order.
    free: FifoPool<u16>,
    /// Per-tag PRP list pages, allocated on first use.
    pub(super) prp_lists: RefCell<Vec<Option<DmaBuffer>>>,
    /// A watch on a CQ slot (index and phase) armed before that slot was found empty and
    /// never polled: what the poller that armed it left for the next one (see
    /// [`QueuePair::wait_polled`]).
    next_watch: RefCell<Option<((u16, bool), Armed)>>,
}

impl QueuePair {
    /// A pair over `sq`/`cq` memory of `entries` entries each.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        qid: u16,
        entries: u16,
        sq: DmaBuffer,
        cq: DmaBuffer,
        irq: Option<IrqVector>,
        cpu: Agent,
        bar: Mmio,
        doorbells: (u64, u64),
    ) -> QueuePair {
        let tags = entries - 1;
        QueuePair {
            qid,
            entries,
            sq,
            cq,
            irq,
            cpu,
            bar,
            sq_doorbell: doorbells.0,
            cq_doorbell: doorbells.1,
            sq_tail: Cell::new(0),
            cq_head: Cell::new(0),
            phase: Cell::new(true),
            sq_fetched: Cell::new((0, 0)),
            tags: RefCell::new((0..tags).map(|_| Tag::default()).collect()),
            free: FifoPool::new(
                "a free command tag of an NVMe queue pair",
                (0..tags).rev().collect(),
            ),
            prp_lists: RefCell::new(vec![None; tags as usize]),
            next_watch: RefCell::new(None),
        }
    }

    /// Takes a free tag, waiting for one if all are in use. Waiters are served in arrival
    /// order (as the kernel's tag wait queues do), so requests that keep arriving cannot
    /// starve one that waits.
    pub async fn acquire(&self) -> u16 {
        self.free.take().await
    }

    /// Returns a tag (to the oldest waiter, if any).
    #[inline]
    pub fn release(&self, tag: u16) {
        self.tags.borrow_mut()[tag as usize] = Tag::default();
        self.free.give(tag);
    }

    /// Writes `cmd` (its `cid` set to `tag`) into the next slot and rings the doorbell.
    pub async fn submit(&self, tag: u16, mut cmd: Command) -> Result<(), AccessError> {
        cmd.cid = tag;
        let slot = self.sq_tail.get();
        let next = (slot + 1) % self.entries;
        self.sq_tail.set(next);
        let at = BusAddr(self.sq.cpu.get() + u64::from(slot) * SQE_SIZE as u64);
        activity::doing("write the submission queue entry");
        self.cpu.write(at, &cmd.encode()).await?;
        activity::doing("ring the SQ tail doorbell");
        self.bar
            .write32(self.sq_doorbell, u32::from(self.sq_tail.get()))
            .await
    }

    /// Consumes every new completion entry, hands each to its tag, and moves the CQ head
    /// doorbell. Returns how many were consumed.
    pub async fn reap(&self) -> Result<usize, AccessError> {
        let mut n = 0;
        while self.consume_next().await? == Next::Consumed {
            n += 1;
        }
        self.ring_cq_head(n).await?;
        Ok(n)
    }

    /// Completes when the completion entry at the CQ head is next written (armed now): what
    /// a core spinning on that cached line waits for.
    pub fn head_written(&self) -> smartio_machine::Armed {
        self.cpu
            .watch(self.cq_slot(self.cq_head.get()), CQE_SIZE as u64)
    }

    /// Where the completion entry at `slot` is in host memory.
    fn cq_slot(&self, slot: u16) -> PhysAddr {
        PhysAddr(self.cq.cpu.get() + u64::from(slot) * CQE_SIZE as u64)
    }

    /// Reads the entry at the CQ head and, if it is new, consumes it: the head moves (and
    /// the phase with it at the wrap) and the entry goes to its tag, waking the tag's waiter.
    async fn consume_next(&self) -> Result<Next, AccessError> {
        let head = self.cq_head.get();
        let mut raw = [0u8; CQE_SIZE];
        activity::doing("read the completion entry");
        self.cpu
            .read(BusAddr(self.cq_slot(head).get()), &mut raw)
            .await?;
        if self.cq_head.get() != head {
            return Ok(Next::Moved);
        }
        let e = Completion::decode(&raw);
        if e.phase != self.phase.get() {
            return Ok(Next::Empty);
        }
        let next = (head + 1) % self.entries;
        self.cq_head.set(next);
        if next == 0 {
            self.phase.set(!self.phase.get());
        }
        let (seen, fetched) = self.sq_fetched.get();
        let step = (u32::from(e.sq_head) + u32::from(self.entries) - u32::from(seen))
            % u32::from(self.entries);
        self.sq_fetched.set((e.sq_head, fetched + u64::from(step)));
        if let Some(t) = self.tags.borrow_mut().get_mut(e.cid as usize) {
            t.done = Some(e);
            if let Some(w) = t.waker.take() {
                w.wake();
            }
        }
        Ok(Next::Consumed)
    }

    /// Tells the controller how far the CQ has been consumed, after `consumed` new entries.
    async fn ring_cq_head(&self, consumed: usize) -> Result<(), AccessError> {
        if consumed == 0 {
            return Ok(());
        }
        activity::doing("ring the CQ head doorbell");
        self.bar
            .write32(self.cq_doorbell, u32::from(self.cq_head.get()))
            .await
    }

    /// Submission queue entries the controller has fetched, by the SQ head pointer it
    /// reports in each completion (its own count, not the driver's), as of the last
    /// completion reaped. Completions are reaped in the order the controller posted them,
    /// so the reported head only moves forward.
    pub fn sq_fetched(&self) -> u64 {
        self.sq_fetched.get().1
    }

    /// The completion of `tag`, if it has arrived.
    #[inline]
    fn take_done(&self, tag: u16) -> Option<Completion> {
        self.tags.borrow_mut()[tag as usize].done.take()
    }

    /// Waits for `tag`'s completion delivered by the interrupt handler.
    pub async fn wait_interrupt(&self, tag: u16) -> Completion {
        poll_fn(|cx| {
            let mut tags = self.tags.borrow_mut();
            let t = &mut tags[tag as usize];
            match t.done.take() {
                Some(c) => Poll::Ready(c),
                None => {
                    t.waker = Some(cx.waker().clone());
                    smartio_platform::waiting::note(
                        "the completion of its NVMe command (handed over by the interrupt handler)",
                    );
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Polls the completion queue until `tag` completes.
    ///
    /// Each CQ slot is watched *before* it is read: an entry that lands while the slot is
    /// being read (or while the head doorbell is rung) wakes the poller, instead of being
    /// missed until some later entry arrives — or forever, when it was the last one.
    ///
    /// A slot whose watch has just seen it written is read again without a new watch (the
    /// entry that landed is there to consume; were it not, a watch is armed and the slot
    /// read once more). The watch on the next slot that a poller leaves with, never polled,
    /// is kept for the next poller of that slot (see `QueuePair::watch_head`): armed before
    /// its read, it still sees every entry that lands after it.
    pub async fn wait_polled(&self, tag: u16) -> Result<Completion, AccessError> {
        // The head slot (and phase) a watch of this poller last saw written.
        let mut seen_written = None;
        loop {
            let mut consumed = 0;
            let landed = loop {
                let head = (self.cq_head.get(), self.phase.get());
                let watch = if seen_written.take() == Some(head) {
                    None
                } else {
                    Some(self.watch_head(head))
                };
                match self.consume_next().await? {
                    Next::Consumed => consumed += 1,
                    // Another poller moved the head meanwhile: look at the new one.
                    Next::Moved => {}
                    Next::Empty => {
                        if let Some(watch) = watch {
                            break (head, watch);
                        }
                    }
                }
            };
            self.ring_cq_head(consumed).await?;
            if let Some(c) = self.take_done(tag) {
                *self.next_watch.borrow_mut() = Some(landed);
                return Ok(c);
            }
            // Wait for the next entry to land, or for another poller to reap ours.
            let handed_over = poll_fn(|cx| {
                let mut tags = self.tags.borrow_mut();
                let t = &mut tags[tag as usize];
                if t.done.is_some() {
                    Poll::Ready(())
                } else {
                    t.waker = Some(cx.waker().clone());
                    smartio_platform::waiting::note(
                        "the completion of its NVMe command (reaped by another poller)",
                    );
                    Poll::Pending
                }
            });
            let (slot, watch) = landed;
            if let Either::Left(()) = smartio_platform::race(watch, handed_over).await {
                seen_written = Some(slot);
            }
            // Looking again itself: consuming its own completion must not wake it.
            self.tags.borrow_mut()[tag as usize].waker = None;
        }
    }

    /// A watch on the CQ slot at `head` (its index and phase): the one a poller left with,
    /// if it is on that slot in that phase, else one armed now.
    fn watch_head(&self, head: (u16, bool)) -> Armed {
        match self.next_watch.borrow_mut().take() {
            Some((slot, watch)) if slot == head => watch,
            _ => self.cpu.watch(self.cq_slot(head.0), CQE_SIZE as u64),
        }
    }
}

/// What reading the entry at the CQ head found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A new entry, now consumed.
    Consumed,
    /// The entry of the previous round (phase unchanged): nothing new.
    Empty,
    /// Another poller consumed the head entry while this one was reading it.
    Moved,
}
