//! Device memory: a sparse byte array of a fixed size, and the waiters that poll words of it.
//!
//! Every write — through BAR1, by a copy engine, a release, a kernel's store or an untimed
//! poke — wakes **every** waiter (acquires and kernels in `wait_until`; up to
//! [`super::spec::MAX_THREADS`] threads may poll at once). A waiter arms itself with
//! [`DeviceMemory::written`] *before* it reads the word, so a write that lands between the
//! read and the wait is not missed (the same rule as `smartio_platform::MemoryWatch`).
//!
//! Invariant: every access is checked against [`DeviceMemory::size`] before it touches the
//! bytes; an out-of-range access is refused whole ([`OutsideMemory`]).

use super::signal::Broadcast;
use smartio_platform::SparseMemory;
use std::cell::RefCell;
use thiserror::Error;

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

/// The GPU's memory and its waiters.
#[derive(Debug)]
pub struct DeviceMemory {
    size: u64,
    bytes: RefCell<SparseMemory>,
    /// Fired by every write; every waiter is woken by it.
    written: Broadcast,
}

impl DeviceMemory {
    /// `size` bytes, all zero.
    pub fn new(size: u64) -> Self {
        Self {
            size,
            bytes: RefCell::new(SparseMemory::new()),
            written: Broadcast::new("a write to GPU device memory"),
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
        self.wake_all();
        Ok(())
    }

    /// Copies `len` bytes inside device memory from `src` to `dst` (the ranges may
    /// overlap), then wakes every waiter.
    pub fn copy_within(&self, src: u64, dst: u64, len: u64) -> Result<(), OutsideMemory> {
        let data = self.read_vec(src, len)?;
        self.write(dst, &data)
    }

    /// Resolves after the next write to device memory. Armed when **called**: a write that
    /// lands after the call, before the first poll, resolves it.
    pub fn written(&self) -> impl std::future::Future<Output = ()> + '_ {
        self.written.fired()
    }

    /// Waiters currently registered.
    pub fn waiter_count(&self) -> usize {
        self.written.waiter_count()
    }

    fn wake_all(&self) {
        self.written.fire();
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
        let mut futures: Vec<_> = (0..1024).map(|_| Box::pin(m.written())).collect();
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
        let armed = m.written();
        m.write(0, &[2]).unwrap();
        let mut armed = pin!(armed);
        assert!(armed.as_mut().poll(&mut cx).is_ready());
    }
}
