//! Tasks in a slab, polled in wake-up order on one thread.

use smartio_platform::LocalTask;
use std::collections::VecDeque;
use std::panic::Location;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

/// Tasks to poll, as (slot, generation).
type ReadyQueue = Arc<Mutex<VecDeque<(usize, u64)>>>;

struct TaskWaker {
    slot: usize,
    gen: u64,
    ready: ReadyQueue,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut ready) = self.ready.lock() {
            ready.push_back((self.slot, self.gen));
        }
    }
}

struct Slot {
    /// Bumped when the slot is freed, so a stale wake-up names no task.
    gen: u64,
    /// `None` while polled or when free.
    task: Option<LocalTask>,
    live: bool,
    spawned_at: &'static Location<'static>,
}

/// The tasks of one direct engine. Invariant: a slot is `live` from spawn until its task
/// finishes or is dropped; free slots are listed in `free` and reused.
#[derive(Default)]
pub(crate) struct Executor {
    slots: Vec<Slot>,
    free: Vec<usize>,
    ready: ReadyQueue,
}

/// A task taken out of its slot to be polled.
pub(crate) struct Taken {
    slot: usize,
    gen: u64,
    pub task: LocalTask,
}

impl Executor {
    /// Adds a task, ready to run.
    pub fn spawn(&mut self, task: LocalTask, at: &'static Location<'static>) {
        let slot = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    gen: 0,
                    task: None,
                    live: false,
                    spawned_at: at,
                });
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[slot];
        s.task = Some(task);
        s.live = true;
        s.spawned_at = at;
        let gen = s.gen;
        if let Ok(mut ready) = self.ready.lock() {
            ready.push_back((slot, gen));
        }
    }

    /// The next ready task, if any (stale and duplicate wake-ups are skipped).
    pub fn take_ready(&mut self) -> Option<Taken> {
        loop {
            let (slot, gen) = self.ready.lock().ok()?.pop_front()?;
            let Some(s) = self.slots.get_mut(slot) else {
                continue;
            };
            if s.gen != gen || !s.live {
                continue;
            }
            if let Some(task) = s.task.take() {
                return Some(Taken { slot, gen, task });
            }
        }
    }

    /// The waker of a taken task.
    pub fn waker(&self, taken: &Taken) -> Waker {
        Waker::from(Arc::new(TaskWaker {
            slot: taken.slot,
            gen: taken.gen,
            ready: Arc::clone(&self.ready),
        }))
    }

    /// Polls a taken task once; puts it back if it is not done.
    pub fn poll(taken: &mut Taken, waker: &Waker) -> bool {
        let mut cx = Context::from_waker(waker);
        taken.task.as_mut().poll(&mut cx).is_ready()
    }

    /// Returns a polled task into its slot; a finished one frees its slot and is handed back
    /// to be dropped outside the executor's borrow (dropping a task may wake others).
    pub fn put_back(&mut self, taken: Taken, finished: bool) -> Option<LocalTask> {
        let s = &mut self.slots[taken.slot];
        if s.gen != taken.gen {
            return Some(taken.task); // cleared while it was polled
        }
        if finished {
            s.live = false;
            s.gen += 1;
            self.free.push(taken.slot);
            Some(taken.task)
        } else {
            s.task = Some(taken.task);
            None
        }
    }

    /// Drops every task and returns them (the caller drops them outside any borrow).
    pub fn clear(&mut self) -> Vec<LocalTask> {
        let mut dropped = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.live {
                s.live = false;
                s.gen += 1;
                dropped.extend(s.task.take());
                self.free.push(i);
            }
        }
        dropped
    }

    /// Where each unfinished task was spawned.
    pub fn live(&self) -> Vec<&'static Location<'static>> {
        self.slots
            .iter()
            .filter(|s| s.live)
            .map(|s| s.spawned_at)
            .collect()
    }
}
