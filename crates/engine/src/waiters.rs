//! What tasks wait on inside the engine: timers and memory watches.
//!
//! Both live in slabs whose slots are given back when the waiting future completes or is
//! dropped, so a run's memory does not grow with its length (a run of millions of I/Os arms
//! millions of timers, a few at a time). A slot carries a generation; an event or a future
//! that names an older generation of a reused slot is ignored.
//!
//! A memory watch is armed when it is created — not when its future is first polled — so a
//! write that lands while the watcher is still reading the watched word is not lost (see
//! [`smartio_platform::MemoryWatch`]). Watches are indexed by host and start address, so a
//! memory write only looks at the watches that can overlap it.

use crate::record::StepId;
use smartio_fabric::HostId;
use smartio_platform::{PhysAddr, SimTime};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::Waker;

/// A timer's slot and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerKey {
    pub id: u32,
    pub gen: u32,
}

#[derive(Debug, Default)]
struct TimerSlot {
    gen: u32,
    live: bool,
    fired: bool,
    at: SimTime,
    waker: Option<Waker>,
    /// The recorded step the timer ends (`record::NONE` unless recording).
    step: StepId,
}

/// Every armed timer.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    slots: Vec<TimerSlot>,
    free: Vec<u32>,
}

impl Timers {
    /// A new timer due at `at` that ends recorded step `step` (the caller schedules its
    /// event).
    pub fn add(&mut self, at: SimTime, step: StepId) -> TimerKey {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(TimerSlot::default());
                // A slab of more than 2^32 live timers would need 2^32 waiting futures.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let slot = &mut self.slots[id as usize];
        slot.live = true;
        slot.fired = false;
        slot.at = at;
        slot.waker = None;
        slot.step = step;
        TimerKey { id, gen: slot.gen }
    }

    /// The recorded step the timer ends.
    pub fn step(&self, key: TimerKey) -> StepId {
        self.slots
            .get(key.id as usize)
            .filter(|s| s.live && s.gen == key.gen)
            .map_or(crate::record::NONE, |s| s.step)
    }

    fn slot(&mut self, key: TimerKey) -> Option<&mut TimerSlot> {
        self.slots
            .get_mut(key.id as usize)
            .filter(|s| s.live && s.gen == key.gen)
    }

    /// Fires the timer; returns its waker if a task waits on it. A timer that was given back
    /// meanwhile is ignored.
    pub fn fire(&mut self, key: TimerKey) -> Option<Waker> {
        let slot = self.slot(key)?;
        slot.fired = true;
        slot.waker.take()
    }

    /// Whether the timer has fired; if not, `waker` is woken when it does.
    pub fn poll(&mut self, key: TimerKey, waker: &Waker) -> bool {
        match self.slot(key) {
            Some(slot) if slot.fired => true,
            Some(slot) => {
                if !slot.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    slot.waker = Some(waker.clone());
                }
                false
            }
            // Given back: nothing will fire it.
            None => false,
        }
    }

    /// When the timer is due.
    pub fn due(&self, key: TimerKey) -> Option<SimTime> {
        self.slots
            .get(key.id as usize)
            .filter(|s| s.live && s.gen == key.gen)
            .map(|s| s.at)
    }

    /// Gives the slot back (its future completed or was dropped).
    pub fn remove(&mut self, key: TimerKey) {
        if let Some(slot) = self.slot(key) {
            slot.live = false;
            slot.waker = None;
            slot.gen = slot.gen.wrapping_add(1);
            self.free.push(key.id);
        }
    }

    /// Timers armed and not given back.
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// A watch's shared state: set when a write lands, read by its future.
#[derive(Debug, Default)]
pub(crate) struct WatchState {
    pub fired: Cell<bool>,
    pub waker: RefCell<Option<Waker>>,
}

/// Where a watch sits in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct WatchKey {
    host: u32,
    start: u64,
    seq: u64,
}

/// Every armed memory watch, by host and start address.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    index: BTreeMap<WatchKey, (u64, Rc<WatchState>)>,
    seq: u64,
    /// The longest watched range so far (bounds how far below a write a watch can start).
    longest: u64,
    /// Per host: an address range holding every watch armed on it since the index was last
    /// empty (a superset: disarming does not shrink it), so most writes are found to touch
    /// no watch without a look at the index. Cleared whenever the index empties.
    span: Vec<(u64, u64)>,
}

impl Watches {
    /// Arms a watch on `[addr, addr + len)` of `host`'s memory.
    pub fn add(&mut self, host: HostId, addr: PhysAddr, len: u64) -> (WatchKey, Rc<WatchState>) {
        self.seq += 1;
        let len = len.max(1);
        self.longest = self.longest.max(len);
        let key = WatchKey {
            host: host.0,
            start: addr.get(),
            seq: self.seq,
        };
        let state = Rc::new(WatchState::default());
        let end = addr.get().saturating_add(len);
        self.index.insert(key, (end, state.clone()));
        let h = host.index();
        if self.span.len() <= h {
            self.span.resize(h + 1, (u64::MAX, 0));
        }
        let span = &mut self.span[h];
        *span = (span.0.min(addr.get()), span.1.max(end));
        (key, state)
    }

    /// Disarms a watch (its future was dropped or completed).
    pub fn remove(&mut self, key: WatchKey) {
        self.index.remove(&key);
        if self.index.is_empty() {
            self.span.clear();
        }
    }

    /// A write of `[start, end)` to `host`'s memory landed: fires and disarms every watch it
    /// overlaps; returns whether any waiting task was woken.
    pub fn written(&mut self, host: HostId, start: u64, end: u64) -> bool {
        match self.span.get(host.index()) {
            Some(&(low, high)) if start < high && end > low && end > start => {}
            _ => return false,
        }
        let from = WatchKey {
            host: host.0,
            start: start.saturating_sub(self.longest - 1),
            seq: 0,
        };
        let to = WatchKey {
            host: host.0,
            start: end,
            seq: 0,
        };
        let hit: Vec<WatchKey> = self
            .index
            .range(from..to)
            .filter(|(_, (w_end, _))| *w_end > start)
            .map(|(k, _)| *k)
            .collect();
        let mut woke = false;
        for key in hit {
            if let Some((_, state)) = self.index.remove(&key) {
                state.fired.set(true);
                if let Some(w) = state.waker.borrow_mut().take() {
                    w.wake();
                    woke = true;
                }
            }
        }
        if self.index.is_empty() {
            self.span.clear();
        }
        woke
    }

    /// Watches armed.
    pub fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_back_timer_slot_is_reused_and_its_old_key_is_ignored() {
        let mut t = Timers::default();
        let a = t.add(SimTime(10), 0);
        t.remove(a);
        let b = t.add(SimTime(20), 0);
        assert_eq!(a.id, b.id, "the slot is reused");
        assert_ne!(a.gen, b.gen);
        assert!(t.fire(a).is_none());
        let noop = Waker::noop();
        assert!(
            !t.poll(b, noop),
            "the old key's event did not fire the new timer"
        );
        t.fire(b);
        assert!(t.poll(b, noop));
        assert_eq!(t.live(), 1);
        t.remove(b);
        assert_eq!(t.live(), 0);
    }

    #[test]
    fn a_write_fires_exactly_the_watches_it_overlaps() {
        let mut w = Watches::default();
        let h = HostId(0);
        let (_, before) = w.add(h, PhysAddr(0x1000), 16);
        let (_, inside) = w.add(h, PhysAddr(0x2008), 8);
        let (_, long) = w.add(h, PhysAddr(0x1f00), 0x200);
        let (_, other_host) = w.add(HostId(1), PhysAddr(0x2008), 8);
        let (_, after) = w.add(h, PhysAddr(0x2010), 8);
        w.written(h, 0x2000, 0x2010);
        assert!(!before.fired.get());
        assert!(inside.fired.get());
        assert!(
            long.fired.get(),
            "a watch starting below the write but reaching into it"
        );
        assert!(!other_host.fired.get());
        assert!(!after.fired.get(), "the write ends where this watch starts");
        assert_eq!(w.len(), 3, "fired watches are disarmed");
    }

    #[test]
    fn writes_outside_every_watched_span_skip_the_index_and_spans_restart_once_it_empties() {
        let mut w = Watches::default();
        let (_, far) = w.add(HostId(2), PhysAddr(0x9000), 8);
        assert!(
            !w.written(HostId(0), 0x9000, 0x9008),
            "a host with no watch"
        );
        assert!(
            !w.written(HostId(7), 0x9000, 0x9008),
            "a host beyond any armed"
        );
        w.written(HostId(2), 0x8ff8, 0x9000);
        assert!(!far.fired.get(), "ends where the watch starts");
        w.written(HostId(2), 0x9007, 0x9010);
        assert!(far.fired.get(), "its last byte");
        assert_eq!(w.len(), 0);
        // A new watch anywhere, after the index emptied, is found again.
        let (_, low) = w.add(HostId(2), PhysAddr(0x10), 4);
        w.written(HostId(2), 0x12, 0x13);
        assert!(low.fired.get());
    }

    #[test]
    fn a_removed_watch_does_not_fire() {
        let mut w = Watches::default();
        let (key, state) = w.add(HostId(0), PhysAddr(64), 8);
        w.remove(key);
        w.written(HostId(0), 0, 4096);
        assert!(!state.fired.get());
        assert_eq!(w.len(), 0);
    }
}
