//! What tasks wait on inside the engine: timers and memory watches.
//!
//! Both live in slabs whose slots are given back when the waiting future completes or is
//! dropped, so a run's memory does not grow with its length (a run of millions of I/Os arms
//! millions of timers, a few at a time) and arming one allocates nothing once the slabs have
//! grown to what a run keeps armed at once. A slot carries a generation (a watch: its
//! sequence number); an event or a future that names an older one of a reused slot is
//! ignored.
//!
//! A memory watch is armed when it is created — not when its future is first polled — so a
//! write that lands while the watcher is still reading the watched word is not lost (see
//! [`smartio_platform::MemoryWatch`]). Watches are indexed by host and start address (a
//! sorted list per host: a host has a few armed at once), so a memory write only looks at
//! the watches that can overlap it.

use crate::record::StepId;
use smartio_fabric::HostId;
use smartio_platform::{PhysAddr, SimTime};
use std::task::Waker;

/// Keeps `waker` in `kept` to wake when a wait ends, unless the one kept already wakes the
/// same task (a task polled again does not clone its waker again).
#[inline]
pub(crate) fn keep_waker(kept: &mut Option<Waker>, waker: &Waker) {
    if !kept.as_ref().is_some_and(|w| w.will_wake(waker)) {
        *kept = Some(waker.clone());
    }
}

/// A slot of `slots` to fill: the last one `free` lists (taken off it), or a new default
/// one. Slabs of more than 2^32 live slots would need as many waiting futures or writes
/// under way, far more memory than exists, so an index always fits.
pub(crate) fn free_slot<T: Default>(slots: &mut Vec<T>, free: &mut Vec<u32>) -> u32 {
    match free.pop() {
        Some(id) => id,
        None => {
            slots.push(T::default());
            u32::try_from(slots.len() - 1).unwrap_or(u32::MAX)
        }
    }
}

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
        let id = free_slot(&mut self.slots, &mut self.free);
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
                keep_waker(&mut slot.waker, waker);
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
            // 31 bits: a sleep's ticket keeps the generation beside a mark of its own.
            slot.gen = slot.gen.wrapping_add(1) & (u32::MAX >> 1);
            self.free.push(key.id);
        }
    }

    /// Timers armed and not given back.
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// A watch armed and not yet given back: fired or not, and the task to wake when it fires.
#[derive(Debug, Default)]
struct WatchSlot {
    /// The watch's sequence number (a key of an older watch in a reused slot is ignored).
    seq: u64,
    fired: bool,
    waker: Option<Waker>,
}

/// A watch's handle: where it sits in its host's index, and its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WatchKey {
    host: u32,
    start: u64,
    seq: u64,
    slot: u32,
}

/// One armed watch in its host's index.
#[derive(Debug, Clone, Copy)]
struct Indexed {
    start: u64,
    seq: u64,
    end: u64,
    slot: u32,
}

/// Every armed memory watch: per host, the watches not yet fired sorted by start address and
/// arming order (so the watches one write fires wake in that order); their state in slots
/// that are reused, so arming one allocates nothing once a run has warmed up.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    index: Vec<Vec<Indexed>>,
    /// Watches in `index`, all hosts.
    indexed: usize,
    slots: Vec<WatchSlot>,
    free: Vec<u32>,
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
    pub fn add(&mut self, host: HostId, addr: PhysAddr, len: u64) -> WatchKey {
        self.seq += 1;
        let len = len.max(1);
        self.longest = self.longest.max(len);
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(WatchSlot::default());
                // 2^32 watches armed at once would need far more memory than exists.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.slots[slot as usize] = WatchSlot {
            seq: self.seq,
            fired: false,
            waker: None,
        };
        let (start, end) = (addr.get(), addr.get().saturating_add(len));
        let h = host.index();
        if self.index.len() <= h {
            self.index.resize_with(h + 1, Vec::new);
        }
        // After every watch with the same start: sequence numbers only grow.
        let list = &mut self.index[h];
        let at = list.partition_point(|w| w.start <= start);
        let seq = self.seq;
        list.insert(
            at,
            Indexed {
                start,
                seq,
                end,
                slot,
            },
        );
        self.indexed += 1;
        if self.span.len() <= h {
            self.span.resize(h + 1, (u64::MAX, 0));
        }
        let span = &mut self.span[h];
        *span = (span.0.min(start), span.1.max(end));
        WatchKey {
            host: host.0,
            start,
            seq,
            slot,
        }
    }

    fn slot(&mut self, key: WatchKey) -> Option<&mut WatchSlot> {
        self.slots
            .get_mut(key.slot as usize)
            .filter(|s| s.seq == key.seq)
    }

    /// Whether the watch fired; if not, `waker` is woken when it does.
    pub fn poll(&mut self, key: WatchKey, waker: &Waker) -> bool {
        match self.slot(key) {
            Some(slot) if slot.fired => true,
            Some(slot) => {
                keep_waker(&mut slot.waker, waker);
                false
            }
            // Given back: nothing will fire it.
            None => false,
        }
    }

    /// Gives the watch back (its future completed or was dropped): disarmed if it has not
    /// fired, and its slot freed.
    pub fn remove(&mut self, key: WatchKey) {
        let Some(slot) = self.slot(key) else { return };
        let fired = slot.fired;
        *slot = WatchSlot::default();
        self.free.push(key.slot);
        if fired {
            return;
        }
        if let Some(list) = self.index.get_mut(key.host as usize) {
            let from = list.partition_point(|w| w.start < key.start);
            if let Some(i) = list[from..].iter().position(|w| w.seq == key.seq) {
                list.remove(from + i);
                self.indexed -= 1;
            }
        }
        if self.indexed == 0 {
            self.span.clear();
        }
    }

    /// A write of `[start, end)` to `host`'s memory landed: fires and disarms every watch it
    /// overlaps; returns whether any waiting task was woken.
    #[inline]
    pub fn written(&mut self, host: HostId, start: u64, end: u64) -> bool {
        match self.span.get(host.index()) {
            Some(&(low, high)) if start < high && end > low && end > start => {
                self.written_in_span(host, start, end)
            }
            _ => false,
        }
    }

    /// Whether no watch armed on `host` overlaps `[start, end)`: a write there fires none.
    #[inline]
    pub fn none_on(&self, host: HostId, start: u64, end: u64) -> bool {
        match self.span.get(host.index()) {
            Some(&(low, high)) if start < high && end > low => self.none_in_index(host, start, end),
            _ => true,
        }
    }

    /// Where in `list` (a host's watches by start) the first watch that may reach `start`
    /// is: none before it ends past `start`, since none is longer than `longest` (see
    /// [`Watches::longest`]).
    #[inline]
    fn first_reaching(list: &[Indexed], longest: u64, start: u64) -> usize {
        let from = start.saturating_sub(longest.saturating_sub(1));
        list.partition_point(|w| w.start < from)
    }

    /// [`Watches::none_on`] once the range is known to fall in the span of what is armed.
    #[inline(never)]
    fn none_in_index(&self, host: HostId, start: u64, end: u64) -> bool {
        let Some(list) = self.index.get(host.index()) else {
            return true;
        };
        !list[Self::first_reaching(list, self.longest, start)..]
            .iter()
            .take_while(|w| w.start < end)
            .any(|w| w.end > start)
    }

    /// [`Watches::written`] once the write is known to fall in the span of what is armed.
    #[inline(never)]
    fn written_in_span(&mut self, host: HostId, start: u64, end: u64) -> bool {
        let longest = self.longest;
        let Some(list) = self.index.get_mut(host.index()) else {
            return false;
        };
        let mut i = Self::first_reaching(list, longest, start);
        let mut woke = false;
        while i < list.len() && list[i].start < end {
            if list[i].end <= start {
                i += 1;
                continue;
            }
            let hit = list.remove(i);
            self.indexed -= 1;
            if let Some(slot) = self.slots.get_mut(hit.slot as usize) {
                slot.fired = true;
                if let Some(w) = slot.waker.take() {
                    w.wake();
                    woke = true;
                }
            }
        }
        if self.indexed == 0 {
            self.span.clear();
        }
        woke
    }

    /// Watches armed and not given back (fired or not).
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether the watch has fired (tests).
    #[cfg(test)]
    fn fired(&self, key: WatchKey) -> bool {
        self.slots
            .get(key.slot as usize)
            .is_some_and(|s| s.seq == key.seq && s.fired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

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
        let before = w.add(h, PhysAddr(0x1000), 16);
        let inside = w.add(h, PhysAddr(0x2008), 8);
        let long = w.add(h, PhysAddr(0x1f00), 0x200);
        let other_host = w.add(HostId(1), PhysAddr(0x2008), 8);
        let after = w.add(h, PhysAddr(0x2010), 8);
        w.written(h, 0x2000, 0x2010);
        assert!(!w.fired(before));
        assert!(w.fired(inside));
        assert!(
            w.fired(long),
            "a watch starting below the write but reaching into it"
        );
        assert!(!w.fired(other_host));
        assert!(!w.fired(after), "the write ends where this watch starts");
        assert_eq!(w.indexed, 3, "fired watches are disarmed");
        for key in [before, inside, long, other_host, after] {
            w.remove(key);
        }
        assert_eq!((w.len(), w.indexed), (0, 0), "every slot given back");
    }

    #[test]
    fn a_range_between_watches_has_none_on_it_and_one_touching_a_watch_has() {
        let mut w = Watches::default();
        let h = HostId(0);
        // Armed span: 0x1000..0x3000 (two watches far apart, the first a long one).
        let low = w.add(h, PhysAddr(0x1000), 0x100);
        let high = w.add(h, PhysAddr(0x2ff8), 8);
        assert!(
            w.none_on(h, 0x1100, 0x2ff8),
            "between the two, inside the span"
        );
        assert!(w.none_on(h, 0x0, 0x1000), "below, up to the first's start");
        assert!(w.none_on(h, 0x3000, 0x4000), "above");
        assert!(w.none_on(HostId(1), 0x1000, 0x1100), "another host");
        assert!(!w.none_on(h, 0x10ff, 0x1100), "the long one's last byte");
        assert!(!w.none_on(h, 0x2000, 0x2ff9), "the high one's first byte");
        assert!(!w.none_on(h, 0x0, 0x4000), "both");
        w.remove(low);
        assert!(w.none_on(h, 0x1000, 0x1100), "given back");
        w.written(h, 0x2ff8, 0x3000);
        assert!(w.none_on(h, 0x2000, 0x3000), "fired and disarmed");
        w.remove(high);
    }

    #[test]
    fn writes_outside_every_watched_span_skip_the_index_and_spans_restart_once_it_empties() {
        let mut w = Watches::default();
        let far = w.add(HostId(2), PhysAddr(0x9000), 8);
        assert!(
            !w.written(HostId(0), 0x9000, 0x9008),
            "a host with no watch"
        );
        assert!(
            !w.written(HostId(7), 0x9000, 0x9008),
            "a host beyond any armed"
        );
        w.written(HostId(2), 0x8ff8, 0x9000);
        assert!(!w.fired(far), "ends where the watch starts");
        w.written(HostId(2), 0x9007, 0x9010);
        assert!(w.fired(far), "its last byte");
        assert_eq!(w.indexed, 0);
        // A new watch anywhere, after the index emptied, is found again.
        let low = w.add(HostId(2), PhysAddr(0x10), 4);
        w.written(HostId(2), 0x12, 0x13);
        assert!(w.fired(low));
    }

    #[test]
    fn watches_one_write_fires_wake_in_address_then_arming_order() {
        let mut w = Watches::default();
        let h = HostId(0);
        let order = Arc::new(Mutex::new(Vec::new()));
        let keys = [0x40, 0x20, 0x40, 0x30].map(|a| w.add(h, PhysAddr(a), 8));
        for (i, key) in keys.iter().enumerate() {
            let waker = Waker::from(Arc::new(Noting(i, order.clone())));
            assert!(!w.poll(*key, &waker));
        }
        assert!(w.written(h, 0, 0x100));
        assert_eq!(*order.lock().expect("not poisoned"), [1, 3, 0, 2]);
    }

    /// A waker that notes its number when woken.
    struct Noting(usize, Arc<Mutex<Vec<usize>>>);

    impl std::task::Wake for Noting {
        fn wake(self: Arc<Self>) {
            self.1.lock().expect("not poisoned").push(self.0);
        }
    }

    #[test]
    fn a_removed_watch_does_not_fire() {
        let mut w = Watches::default();
        let key = w.add(HostId(0), PhysAddr(64), 8);
        w.remove(key);
        let other = w.add(HostId(0), PhysAddr(4096), 8);
        w.written(HostId(0), 0, 4096);
        assert!(!w.fired(key));
        assert!(!w.fired(other));
        assert_eq!((w.len(), w.indexed), (1, 1));
    }
}
