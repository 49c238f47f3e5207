//! The timed engine's executor: agents are `async` tasks in a slab, polled on one thread.
//!
//! A finished task's slot is given back and reused, so a run that spawns a task per command
//! (the NVMe controller does) does not grow with its length. Every slot carries a
//! generation; a wake-up for an older generation of a reused slot is ignored. A task's waker
//! is made once per slot generation, not once per poll, and renewed in place when no waker
//! of the slot's previous task is left (so spawning a task into a reused slot allocates
//! nothing but the task).
//!
//! For the report of a run that ends with tasks still waiting, each slot remembers where its
//! task was spawned and what the task's last poll said it waits for
//! ([`crate::wait::Wait`]).

use crate::record::{self, StepId};
use crate::wait::Wait;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

/// A spawned agent.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Tasks to poll, as (slot, generation, the recorded step that woke it), and the step the
/// engine is acting on now (what a wake-up is caused by; [`record::NONE`] unless
/// recording).
pub(crate) struct Ready {
    queue: Mutex<VecDeque<(u32, u32, StepId)>>,
    /// How many wake-ups `queue` holds (kept with it), so that finding it empty — what the
    /// engine asks before every event — takes no lock.
    queued: AtomicUsize,
    context: AtomicU32,
}

impl Ready {
    /// Makes `step` the cause of the wake-ups from now on (while recording).
    pub fn set_context(&self, step: StepId) {
        self.context.store(step, Ordering::Relaxed);
    }

    /// The cause of the wake-ups now.
    pub fn context(&self) -> StepId {
        self.context.load(Ordering::Relaxed)
    }

    #[inline]
    fn push(&self, id: u32, gen: u32) {
        let cause = self.context();
        let mut q = self.queue.lock();
        q.push_back((id, gen, cause));
        self.queued.store(q.len(), Ordering::Relaxed);
    }
}

type ReadyQueue = Arc<Ready>;

struct TaskWaker {
    id: u32,
    gen: u32,
    ready: ReadyQueue,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push(self.id, self.gen);
    }
}

struct Slot {
    gen: u32,
    /// `None` while the task is being polled, or when the slot is free.
    task: Option<Task>,
    live: bool,
    waker: Waker,
    /// What `waker` wakes through, kept so that a reused slot whose old waker nobody holds
    /// any more (no stale wake-up can come) renews it in place instead of allocating one.
    handle: Arc<TaskWaker>,
    spawned_at: &'static Location<'static>,
    waits: Vec<Wait>,
}

impl Slot {
    /// Frees the slot: a waker or id of the old task no longer names it. Returns the task,
    /// if it was in the slot.
    fn release(&mut self) -> Option<Task> {
        self.live = false;
        self.gen = self.gen.wrapping_add(1);
        self.waker = Waker::noop().clone();
        self.waits.clear();
        self.task.take()
    }
}

/// The tasks of one simulation.
pub(crate) struct Executor {
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<u32>>,
    ready: ReadyQueue,
}

/// A task taken out of its slot to be polled.
pub(crate) struct Taken {
    pub id: u32,
    pub task: Task,
    pub waker: Waker,
    /// The recorded step that woke it.
    pub cause: StepId,
}

impl Executor {
    pub fn new() -> Executor {
        Executor {
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            ready: Arc::new(Ready {
                queue: Mutex::new(VecDeque::new()),
                queued: AtomicUsize::new(0),
                context: AtomicU32::new(record::NONE),
            }),
        }
    }

    /// The ready queue, where the engine says what wake-ups are caused by.
    pub fn ready(&self) -> Arc<Ready> {
        self.ready.clone()
    }

    /// Adds a task, ready to run.
    pub fn spawn(&self, task: Task, spawned_at: &'static Location<'static>) {
        let mut slots = self.slots.borrow_mut();
        let reused = self.free.borrow_mut().pop();
        let id = match reused {
            Some(id) => id,
            None => {
                // 2^32 tasks alive at once would need far more memory than exists.
                let id = u32::try_from(slots.len()).unwrap_or(u32::MAX);
                slots.push(Slot {
                    gen: 0,
                    task: None,
                    live: false,
                    waker: Waker::noop().clone(),
                    handle: Arc::new(TaskWaker {
                        id,
                        gen: 0,
                        ready: self.ready.clone(),
                    }),
                    spawned_at,
                    waits: Vec::new(),
                });
                id
            }
        };
        let Some(slot) = slots.get_mut(id as usize) else {
            return;
        };
        slot.task = Some(task);
        slot.live = true;
        slot.spawned_at = spawned_at;
        slot.waits.clear();
        match Arc::get_mut(&mut slot.handle) {
            Some(handle) => handle.gen = slot.gen,
            // A waker of the slot's previous task is still held somewhere: it keeps the old
            // generation (and is ignored), this task gets a handle of its own.
            None => {
                slot.handle = Arc::new(TaskWaker {
                    id,
                    gen: slot.gen,
                    ready: self.ready.clone(),
                })
            }
        }
        slot.waker = Waker::from(slot.handle.clone());
        self.ready.push(id, slot.gen);
    }

    /// Whether a wake-up may be waiting (no lock taken).
    #[inline]
    pub fn any_ready(&self) -> bool {
        self.ready.queued.load(Ordering::Relaxed) != 0
    }

    /// The next wake-up, in the order they came.
    fn next_wake(&self) -> Option<(u32, u32, StepId)> {
        if !self.any_ready() {
            return None;
        }
        let mut q = self.ready.queue.lock();
        let next = q.pop_front();
        self.ready.queued.store(q.len(), Ordering::Relaxed);
        next
    }

    /// The next ready task, taken out of its slot with its waker (stale wake-ups are
    /// skipped); [`Executor::put_back`] or [`Executor::finish`] gives both back.
    #[inline]
    pub fn take_ready(&self) -> Option<Taken> {
        loop {
            let (id, gen, cause) = self.next_wake()?;
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots.get_mut(id as usize) else {
                continue;
            };
            if slot.gen != gen || !slot.live {
                continue;
            }
            let Some(task) = slot.task.take() else {
                continue;
            };
            return Some(Taken {
                id,
                task,
                waker: std::mem::replace(&mut slot.waker, Waker::noop().clone()),
                cause,
            });
        }
    }

    /// Puts a task that is still pending back, with what it now waits for.
    #[inline]
    pub fn put_back(&self, taken: Taken, waits: &mut Vec<Wait>) {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(taken.id as usize) {
            slot.task = Some(taken.task);
            slot.waker = taken.waker;
            std::mem::swap(&mut slot.waits, waits);
        }
    }

    /// A task finished: its slot is given back.
    pub fn finish(&self, taken: Taken) {
        drop(taken.task);
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(taken.id as usize) {
            slot.release();
            self.free.borrow_mut().push(taken.id);
        }
    }

    /// Slots in the slab (the most tasks that were ever alive at once).
    pub fn slots(&self) -> usize {
        self.slots.borrow().len()
    }

    /// Tasks that have not finished.
    pub fn live(&self) -> usize {
        self.slots.borrow().len() - self.free.borrow().len()
    }

    /// Where every unfinished task was spawned and what it waits for.
    pub fn blocked(&self) -> Vec<(&'static Location<'static>, Vec<Wait>)> {
        self.slots
            .borrow()
            .iter()
            .filter(|s| s.live)
            .map(|s| (s.spawned_at, s.waits.clone()))
            .collect()
    }

    /// Drops every task, ready or waiting, and frees their slots (their futures hold handles
    /// to the simulation, so a simulation with tasks left would never be freed).
    pub fn clear(&self) {
        {
            let mut q = self.ready.queue.lock();
            q.clear();
            self.ready.queued.store(0, Ordering::Relaxed);
        }
        let tasks: Vec<Task> = {
            let mut slots = self.slots.borrow_mut();
            let mut free = self.free.borrow_mut();
            let mut tasks = Vec::new();
            for (id, slot) in slots.iter_mut().enumerate() {
                if slot.live {
                    tasks.extend(slot.release());
                    free.push(u32::try_from(id).unwrap_or(u32::MAX));
                }
            }
            tasks
        };
        // Dropped outside the borrows: a future's drop may reach the simulation.
        drop(tasks);
    }
}
