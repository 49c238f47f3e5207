//! Device memory: a sparse byte array of a fixed size, and the waiters that poll words of it.
//!
//! Every write — through BAR1, by a copy engine, a release, a kernel's store or an untimed
//! poke — wakes the waiters ([`DeviceMemory::word_written`]: the front end's acquires,
//! kernels in `wait_until`; up to [`super::spec::MAX_THREADS`] threads may poll at once) of
//! every 8-byte word it touches. A waiter polls one word and only a change of that word can
//! satisfy it, so waking it for other writes would only cost the emulator (a 64 KiB DMA into
//! BAR1 is 256 writes). A waiter
//! arms itself *before* it reads the word, so a write that lands between the read and the
//! wait is not missed (the same rule as `smartio_platform::MemoryWatch`).
//!
//! Invariant: every access is checked against [`DeviceMemory::size`] before it touches the
//! bytes; an out-of-range access is refused whole ([`OutsideMemory`]).

use smartio_platform::Broadcast;
use smartio_platform::SparseMemory;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use thiserror::Error;

/// Bytes of the words [`DeviceMemory::word_written`] watches.
const WORD: u64 = 8;

/// An access that does not fit in device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "{len} bytes at device offset {offset:#x} do not fit in {memory:#x} bytes of device memory"
)]
pub struct OutsideMemory {
    /// Where the access starts.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Bytes of device memory.
    pub memory: u64,
}

/// Bytes [`DeviceMemory::copy_within`] moves at a time.
pub const COPY_CHUNK: u64 = 1 << 20;

/// The GPU's memory and its waiters.
#[derive(Debug)]
pub struct DeviceMemory {
    size: u64,
    bytes: RefCell<SparseMemory>,
    /// Fired by writes touching the 8 bytes at the key (made when first waited on).
    words: RefCell<BTreeMap<u64, Rc<Broadcast>>>,
}

impl DeviceMemory {
    /// `size` bytes, all zero.
    pub fn new(size: u64) -> Self {
        Self {
            size,
            bytes: RefCell::new(SparseMemory::new()),
            words: RefCell::new(BTreeMap::new()),
        }
    }

    /// Bytes of device memory.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether `len` bytes at `offset` lie inside device memory.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), OutsideMemory> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(OutsideMemory {
                offset,
                len,
                memory: self.size,
            }),
        }
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), OutsideMemory> {
        self.check(offset, buf.len() as u64)?;
        self.bytes.borrow().read(offset, buf);
        Ok(())
    }

    /// `len` bytes at `offset`, in a new buffer.
    pub fn read_vec(&self, offset: u64, len: u64) -> Result<Vec<u8>, OutsideMemory> {
        self.check(offset, len)?;
        let n = usize::try_from(len).map_err(|_| OutsideMemory {
            offset,
            len,
            memory: self.size,
        })?;
        let mut buf = vec![0u8; n];
        self.bytes.borrow().read(offset, &mut buf);
        Ok(buf)
    }

    /// The little-endian u64 at `offset`.
    pub fn read_u64(&self, offset: u64) -> Result<u64, OutsideMemory> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Copies `data` to `offset`, then wakes every waiter.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), OutsideMemory> {
        self.check(offset, data.len() as u64)?;
        self.bytes.borrow_mut().write(offset, data);
        self.wake(offset, data.len() as u64);
        Ok(())
    }

    /// Adds `value` to the little-endian u64 at `offset` (wrapping) and returns the old
    /// value, then wakes the waiters as a write does. Atomic by construction: nothing runs
    /// between the read and the write (the engine is single-threaded and this does not
    /// await).
    pub fn fetch_add_u64(&self, offset: u64, value: u64) -> Result<u64, OutsideMemory> {
        let old = self.read_u64(offset)?;
        self.write(offset, &old.wrapping_add(value).to_le_bytes())?;
        Ok(old)
    }

    /// Copies `len` bytes inside device memory from `src` to `dst` (the ranges may overlap,
    /// as with `memmove`), then wakes every waiter. Moves [`COPY_CHUNK`] bytes at a time, so a
    /// copy of gigabytes never holds more than that outside the memory; chunks go from the
    /// end when the destination overlaps the source from above.
    pub fn copy_within(&self, src: u64, dst: u64, len: u64) -> Result<(), OutsideMemory> {
        self.check(src, len)?;
        self.check(dst, len)?;
        let backwards = dst > src && dst < src + len;
        let mut done = 0;
        while done < len {
            let n = COPY_CHUNK.min(len - done);
            let at = if backwards { len - done - n } else { done };
            let data = self.read_vec(src + at, n)?;
            self.write(dst + at, &data)?;
            done += n;
        }
        Ok(())
    }

    /// Resolves after the next write that touches any of the 8 bytes at `offset`. Armed
    /// when **called**: a write that lands after the call, before the first poll, resolves
    /// it.
    pub fn word_written(&self, offset: u64) -> impl std::future::Future<Output = ()> + 'static {
        let signal = self
            .words
            .borrow_mut()
            .entry(offset)
            .or_insert_with(|| Rc::new(Broadcast::new("a write to a word of GPU device memory")))
            .clone();
        let armed = signal.generation();
        async move { signal.fired_since(armed).await }
    }

    /// Waiters currently registered.
    #[cfg(test)]
    pub fn waiter_count(&self) -> usize {
        self.words
            .borrow()
            .values()
            .map(|w| w.waiter_count())
            .sum::<usize>()
    }

    /// Wakes the waiters of every word `len` bytes at `offset` touch, lowest first.
    fn wake(&self, offset: u64, len: u64) {
        let first = offset.saturating_sub(WORD - 1);
        let end = offset.saturating_add(len);
        let touched: Vec<Rc<Broadcast>> = self
            .words
            .borrow()
            .range(first..end)
            .map(|(_, w)| w.clone())
            .collect();
        for w in touched {
            w.fire();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn copies_within_memory_move_like_memmove_in_both_overlap_directions() {
        let len = 3 * COPY_CHUNK + 123;
        let m = DeviceMemory::new(8 * COPY_CHUNK);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        for (src, dst) in [
            (0, COPY_CHUNK / 2),
            (COPY_CHUNK / 2, 0),
            (0, 4 * COPY_CHUNK),
        ] {
            m.write(src, &data).expect("inside");
            m.copy_within(src, dst, len).expect("inside");
            assert_eq!(
                m.read_vec(dst, len).expect("inside"),
                data,
                "{src} -> {dst}"
            );
        }
        assert!(m.copy_within(0, 7 * COPY_CHUNK, 2 * COPY_CHUNK).is_err());
    }

    #[test]
    fn accesses_outside_memory_are_refused_whole() {
        let m = DeviceMemory::new(4096);
        assert!(m.write(4090, &[1; 6]).is_ok());
        assert_eq!(
            m.write(4090, &[1; 7]),
            Err(OutsideMemory {
                offset: 4090,
                len: 7,
                memory: 4096
            })
        );
        assert!(m.read_u64(u64::MAX - 3).is_err());
        assert_eq!(m.read_u64(4088), Ok(0x0101_0101_0101_0000));
    }

    #[test]
    fn one_write_wakes_every_waiter_and_a_write_after_arming_is_not_missed() {
        let m = DeviceMemory::new(4096);
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut futures: Vec<_> = (0..1024).map(|_| Box::pin(m.word_written(8))).collect();
        for f in &mut futures {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(m.waiter_count(), 1024);
        m.write(8, &[1]).unwrap();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1024);
        assert_eq!(m.waiter_count(), 0);
        for f in &mut futures {
            assert!(f.as_mut().poll(&mut cx).is_ready());
        }
        let armed = m.word_written(0);
        m.write(0, &[2]).unwrap();
        let mut armed = pin!(armed);
        assert!(armed.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_word_waiter_wakes_only_for_writes_that_touch_its_word() {
        let m = DeviceMemory::new(4096);
        let mut cx = Context::from_waker(Waker::noop());
        let mut w = Box::pin(m.word_written(64));
        assert!(w.as_mut().poll(&mut cx).is_pending());
        assert_eq!(m.waiter_count(), 1);
        m.write(0, &[0; 57]).unwrap();
        m.write(72, &[0; 256]).unwrap();
        assert!(
            w.as_mut().poll(&mut cx).is_pending(),
            "neighbours do not wake it"
        );
        m.write(71, &[1]).unwrap();
        assert!(w.as_mut().poll(&mut cx).is_ready(), "its last byte does");
        let mut w = Box::pin(m.word_written(64));
        assert!(w.as_mut().poll(&mut cx).is_pending());
        m.write(60, &[1; 8]).unwrap();
        assert!(
            w.as_mut().poll(&mut cx).is_ready(),
            "a write across its first byte"
        );
        assert_eq!(m.waiter_count(), 0);
    }

    #[test]
    fn fetch_add_returns_the_old_value_wraps_and_wakes_the_word() {
        let m = DeviceMemory::new(4096);
        let mut cx = Context::from_waker(Waker::noop());
        let mut w = Box::pin(m.word_written(8));
        assert!(w.as_mut().poll(&mut cx).is_pending());
        assert_eq!(m.fetch_add_u64(8, 5), Ok(0));
        assert_eq!(m.fetch_add_u64(8, u64::MAX), Ok(5));
        assert_eq!(m.read_u64(8), Ok(4));
        assert!(w.as_mut().poll(&mut cx).is_ready());
        assert!(m.fetch_add_u64(4090, 1).is_err());
    }
}
