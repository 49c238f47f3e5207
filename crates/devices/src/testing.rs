//! A harness that drives a device model through its BARs and DMA without a cluster, for the
//! models' unit tests: a port onto flat, byte-exact memory (accesses at or above
//! [`MEMORY_END`] fail with an Unsupported Request, as a bus with nothing there answers), a
//! clock whose sleeps wait for virtual time, a spawner, a log of every DMA write (an MSI-X
//! message is a write, so interrupts are in it) and of every DMA read, and an executor that
//! polls the tasks and, when none can go on, moves time to the earliest sleeper. Reads
//! complete at once unless the world is given a read latency (a longer path).
//!
//! Time moves only when every task waits, so what a test reads off the clock is what the
//! model's own costs add up to, with tasks overlapping as they would on an engine.

use smartio_fabric::topology::AssignedBar;
use smartio_fabric::EndpointLayout;
use smartio_platform::{
    AccessError, BusAddr, Clock, LocalTask, Port, SimDuration, SimTime, SparseMemory, Spawner,
};
use std::cell::{Cell, RefCell};
use std::future::{poll_fn, ready, Future};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Memory below this bus address exists; accesses reaching it or above fail.
pub(crate) const MEMORY_END: u64 = 1 << 32;

/// More DMA reads or writes than any test makes: a model that goes past it runs away (a
/// loop that never ends), and the world stops it with a panic before its logs fill memory.
const RUNAWAY: usize = 1_000_000;

/// More tasks than any test spawns: a model that goes past it spawns without end (each
/// task holds memory, so the world stops it long before the machine runs out).
const RUNAWAY_TASKS: usize = 10_000;

/// Appends `entry` to a DMA log, stopping a runaway model.
fn log<T>(log: &RefCell<Vec<T>>, entry: T) {
    let mut log = log.borrow_mut();
    assert!(
        log.len() < RUNAWAY,
        "a runaway model: {RUNAWAY} DMA accesses"
    );
    log.push(entry);
}

/// `layout`'s BARs assigned where `base` says (given each BAR's index), for a model's
/// configuration space in a test.
pub(crate) fn assigned_bars(layout: &EndpointLayout, base: impl Fn(u8) -> u64) -> Vec<AssignedBar> {
    layout
        .bars
        .iter()
        .map(|b| AssignedBar {
            index: b.index,
            kind: b.kind,
            base: BusAddr(base(b.index)),
            size: b.size,
        })
        .collect()
}

/// The world a model runs in (cheap to clone: clones share it).
#[derive(Clone, Default)]
pub(crate) struct World {
    inner: Rc<Inner>,
}

#[derive(Default)]
struct Inner {
    memory: RefCell<SparseMemory>,
    now: Cell<SimTime>,
    /// Tasks sleeping: when each wakes, and its waker.
    sleepers: RefCell<Vec<(SimTime, Waker)>>,
    spawned: RefCell<Vec<LocalTask>>,
    /// Tasks spawned so far.
    spawns: Cell<usize>,
    /// Every DMA write that landed, in order: address and bytes.
    writes: RefCell<Vec<(u64, Vec<u8>)>>,
    /// Every DMA read that completed, in order: address and length.
    reads: RefCell<Vec<(u64, usize)>>,
    /// How long a DMA read takes to complete.
    read_latency: Cell<SimDuration>,
    /// Reads of addresses in these ranges wait until the test lets them go.
    held_reads: RefCell<Vec<(u64, u64)>>,
}

impl World {
    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.inner.now.get()
    }

    /// Writes `data` at `addr` as the host would (not logged as a DMA write).
    pub fn poke(&self, addr: u64, data: &[u8]) {
        self.inner.memory.borrow_mut().write(addr, data);
    }

    /// The `len` bytes at `addr`.
    pub fn peek(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.inner.memory.borrow().read(addr, &mut out);
        out
    }

    /// Every DMA write so far: address and bytes.
    pub fn writes(&self) -> Vec<(u64, Vec<u8>)> {
        self.inner.writes.borrow().clone()
    }

    /// Every DMA read so far, completed or refused: address and length.
    pub fn reads(&self) -> Vec<(u64, usize)> {
        self.inner.reads.borrow().clone()
    }

    /// Makes every DMA read from now on complete `latency` after it was issued.
    pub fn set_read_latency(&self, latency: SimDuration) {
        self.inner.read_latency.set(latency);
    }

    /// Makes DMA reads that start in `[start, end)` wait (besides those held already: they
    /// complete once let go with [`World::let_go`] and the world settled again), so a test
    /// can act while a model's read is in flight.
    pub fn hold_reads(&self, start: u64, end: u64) {
        self.inner.held_reads.borrow_mut().push((start, end));
    }

    /// Lets every held read go.
    pub fn let_go(&self) {
        self.inner.held_reads.borrow_mut().clear();
    }

    /// Waits while reads at `addr` are held. Registers no waker: [`World::settle`] polls
    /// it again after the test lets go.
    fn until_let_go(&self, addr: u64) -> impl Future<Output = ()> + '_ {
        poll_fn(move |_| {
            let held = self.inner.held_reads.borrow();
            if held.iter().any(|&(s, e)| (s..e).contains(&addr)) {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
    }

    fn outside(addr: BusAddr, len: usize) -> Result<(), AccessError> {
        match addr.get().checked_add(len as u64) {
            Some(end) if end <= MEMORY_END => Ok(()),
            _ => Err(AccessError::UnsupportedRequest {
                host: "test world".into(),
                addr,
            }),
        }
    }

    /// Runs `tasks` (and whatever they spawn) until none can go on: every one finished, or
    /// waiting for something no task or sleeper will bring. Returns how many are left
    /// waiting. Panics if the tasks keep waking one another without end.
    pub fn run(&self, tasks: impl IntoIterator<Item = LocalTask>) -> usize {
        let mut tasks: Vec<LocalTask> = tasks.into_iter().collect();
        self.settle(&mut tasks)
    }

    /// As [`World::run`], keeping in `tasks` those left waiting (and what they spawned), so
    /// a test can poke memory or registers and settle them again.
    pub fn settle(&self, tasks: &mut Vec<LocalTask>) -> usize {
        let woken = Arc::new(Flag::default());
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..1_000_000 {
            tasks.append(&mut self.inner.spawned.borrow_mut());
            woken.0.store(false, Ordering::SeqCst);
            let before = tasks.len();
            tasks.retain_mut(|t| t.as_mut().poll(&mut cx).is_pending());
            let progressed = woken.0.load(Ordering::SeqCst)
                || !self.inner.spawned.borrow().is_empty()
                || tasks.len() != before;
            if progressed {
                continue;
            }
            // Nothing can go on now: time moves to the earliest sleeper.
            let mut sleepers = self.inner.sleepers.borrow_mut();
            let Some(at) = sleepers.iter().map(|(at, _)| *at).min() else {
                return tasks.len();
            };
            self.inner.now.set(at);
            let (due, later): (Vec<_>, Vec<_>) = sleepers.drain(..).partition(|(t, _)| *t <= at);
            *sleepers = later;
            drop(sleepers);
            due.into_iter().for_each(|(_, w)| w.wake());
        }
        panic!("the tasks never settled");
    }

    /// Runs `future` (with `tasks` beside it) until it is done; its output. Panics if it
    /// can never finish.
    pub fn block_on<T: 'static>(
        &self,
        future: impl Future<Output = T> + 'static,
        tasks: impl IntoIterator<Item = LocalTask>,
    ) -> T {
        let out = Rc::new(RefCell::new(None));
        let slot = out.clone();
        let main: LocalTask = Box::pin(async move {
            *slot.borrow_mut() = Some(future.await);
        });
        self.run(std::iter::once(main).chain(tasks));
        let done = out.borrow_mut().take();
        done.expect("the future could not finish: its tasks all wait")
    }
}

#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Port for World {
    fn read(&self, addr: BusAddr, buf: &mut [u8]) -> impl Future<Output = Result<(), AccessError>> {
        let latency = self.sleep(self.inner.read_latency.get());
        async move {
            latency.await;
            self.until_let_go(addr.get()).await;
            log(&self.inner.reads, (addr.get(), buf.len()));
            World::outside(addr, buf.len()).map(|()| {
                self.inner.memory.borrow().read(addr.get(), buf);
            })
        }
    }

    fn write(&self, addr: BusAddr, data: &[u8]) -> impl Future<Output = Result<(), AccessError>> {
        let r = World::outside(addr, data.len()).map(|()| {
            self.inner.memory.borrow_mut().write(addr.get(), data);
            log(&self.inner.writes, (addr.get(), data.to_vec()));
        });
        ready(r)
    }
}

impl Clock for World {
    fn now(&self) -> SimTime {
        self.inner.now.get()
    }

    fn sleep(&self, duration: SimDuration) -> impl Future<Output = ()> {
        let due = self.inner.now.get() + duration;
        let inner = self.inner.clone();
        poll_fn(move |cx| {
            if inner.now.get() >= due {
                return Poll::Ready(());
            }
            inner.sleepers.borrow_mut().push((due, cx.waker().clone()));
            Poll::Pending
        })
    }
}

impl Spawner for World {
    fn spawn_task(&self, task: LocalTask) {
        let n = self.inner.spawns.get() + 1;
        assert!(n < RUNAWAY_TASKS, "a runaway model: {n} tasks spawned");
        self.inner.spawns.set(n);
        self.inner.spawned.borrow_mut().push(task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_overlap_and_time_moves_only_when_every_task_waits() {
        let world = World::default();
        let ends = Rc::new(RefCell::new(Vec::new()));
        let task = |ns: u64| -> LocalTask {
            let (w, ends) = (world.clone(), ends.clone());
            Box::pin(async move {
                w.sleep(SimDuration::from_ns(ns)).await;
                ends.borrow_mut().push((ns, w.now()));
            })
        };
        assert_eq!(world.run([task(300), task(100), task(200)]), 0);
        assert_eq!(
            *ends.borrow(),
            [
                (100, SimTime::ZERO + SimDuration::from_ns(100)),
                (200, SimTime::ZERO + SimDuration::from_ns(200)),
                (300, SimTime::ZERO + SimDuration::from_ns(300)),
            ],
            "side by side, not one after another"
        );
    }

    #[test]
    fn reads_are_logged_and_complete_after_the_read_latency() {
        let world = World::default();
        world.poke(0x2000, &[5, 6, 7, 8]);
        world.set_read_latency(SimDuration::from_ns(700));
        let w = world.clone();
        let (bytes, at) = world.block_on(
            async move {
                let mut b = [0u8; 4];
                let r = w.read(BusAddr(0x2000), &mut b).await;
                (r.map(|()| b), w.now())
            },
            [],
        );
        assert_eq!(bytes, Ok([5, 6, 7, 8]));
        assert_eq!(at, SimTime::ZERO + SimDuration::from_ns(700));
        assert_eq!(world.reads(), [(0x2000, 4)]);
    }

    #[test]
    fn a_held_read_waits_across_settles_until_let_go_and_others_pass() {
        let world = World::default();
        world.poke(0x3000, &[1, 2]);
        world.poke(0x5000, &[3, 4]);
        world.hold_reads(0x3000, 0x3001);
        world.hold_reads(0x9000, 0xa000);
        let done = Rc::new(RefCell::new(Vec::new()));
        let read = |addr: u64| -> LocalTask {
            let (w, done) = (world.clone(), done.clone());
            Box::pin(async move {
                let mut b = [0u8; 2];
                w.read(BusAddr(addr), &mut b).await.expect("memory");
                done.borrow_mut().push(b);
            })
        };
        let mut tasks = vec![read(0x3000), read(0x5000), read(0x2fff)];
        assert_eq!(world.settle(&mut tasks), 1, "the held one waits");
        assert_eq!(
            *done.borrow(),
            [[3, 4], [0, 1]],
            "a read starting before the range passes"
        );
        assert_eq!(world.settle(&mut tasks), 1, "and keeps waiting");
        world.let_go();
        assert_eq!(world.settle(&mut tasks), 0);
        assert_eq!(*done.borrow(), [[3, 4], [0, 1], [1, 2]]);
        assert_eq!(world.reads(), [(0x5000, 2), (0x2fff, 2), (0x3000, 2)]);
    }

    #[test]
    #[should_panic(expected = "a runaway model: 10000 tasks spawned")]
    fn a_model_that_spawns_without_end_is_stopped() {
        let world = World::default();
        for _ in 0..RUNAWAY_TASKS {
            world.spawn_task(Box::pin(async {}));
        }
    }

    #[test]
    fn writes_land_byte_exact_are_logged_and_nothing_answers_past_the_end() {
        let world = World::default();
        let w = world.clone();
        let r = world.block_on(
            async move {
                w.write(BusAddr(0x1000), &[1, 2, 3]).await?;
                w.write(BusAddr(MEMORY_END - 1), &[9, 9]).await
            },
            [],
        );
        assert!(matches!(r, Err(AccessError::UnsupportedRequest { .. })));
        assert_eq!(world.peek(0x1000, 4), [1, 2, 3, 0]);
        assert_eq!(world.writes(), [(0x1000, vec![1, 2, 3])]);
        world.poke(0x1001, &[7]);
        assert_eq!(world.peek(0x1000, 3), [1, 7, 3]);
        assert_eq!(world.writes().len(), 1, "the host's own stores are not DMA");
    }
}
