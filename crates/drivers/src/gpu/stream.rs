//! Streams: one GPU channel each, with its ring and a control block (semaphore and error
//! notifier) in pinned host memory.
//!
//! Ring positions are free-running entry counts, as the GPU's `GET`/`PUT` are. The runtime
//! never reads `GET` (on a borrowed GPU that is a non-posted round trip across the NTB);
//! it learns how far the GPU got from RELEASE entries that write the ring position after
//! themselves into the semaphore, which the CPU reads in its own memory:
//!
//! - `synchronize` queues a RELEASE (unless the last entry already is one) and waits for the
//!   semaphore to reach it, or for an error notice;
//! - every submission that leaves a quarter of the ring or more behind the last RELEASE
//!   appends one, so a full ring always has a RELEASE ahead to wait for;
//! - a submission keeps one ring entry spare, for a RELEASE to wait on when none is pending.
//!
//! Invariants: `PUT - semaphore ≤ RING_ENTRIES` (so `PUT - GET` never exceeds the ring);
//! entries are written before the `PUT` that covers them, by one task at a time (the
//! submission lock); after a channel error the stream resets its channel (GET = PUT = 0, a
//! new epoch), reports the error once to whoever waits, and is usable again.

use super::context::Shared;
use super::error::{BadCall, GpuError};
use super::event::Event;
use super::memory::DeviceBuffer;
use smartio_devices::gpu::spec::{
    self, channel, Command, ErrorNotice, GpuAddr, KernelId, ENTRY_SIZE,
};
use smartio_host::DmaBuffer;
use smartio_platform::{activity, BusAddr, Clock, FifoLock, MemoryWatch, PhysAddr, Port};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Entries per stream ring.
pub const RING_ENTRIES: u64 = 1024;
/// Offset of the semaphore (a little-endian u64) in the control block.
const SEMAPHORE: u64 = 0;
/// Offset of the error notifier ([`ErrorNotice::SIZE`] bytes) in the control block.
const NOTIFIER: u64 = 64;
/// Bytes of the control block the runtime reads and watches.
const CONTROL_LEN: u64 = NOTIFIER + ErrorNotice::SIZE as u64;

/// Where the ring stands, as the runtime knows it.
#[derive(Debug, Clone, Copy, Default)]
struct RingState {
    /// Entries written so far (the last `PUT`).
    put: u64,
    /// Value of the last RELEASE queued (a ring position).
    last_release: u64,
}

/// What a stream reads from its control block.
struct Control {
    semaphore: u64,
    notice: Option<ErrorNotice>,
}

/// A stream's state, shared by the [`Stream`], the context (to reset and free it at close)
/// and the events recorded on it.
#[derive(Debug)]
pub(crate) struct StreamInner {
    pub(crate) channel: u16,
    ring: DmaBuffer,
    control: DmaBuffer,
    ring_state: Cell<RingState>,
    /// Counts the channel's resets after errors.
    epoch: Cell<u64>,
    /// The error behind the last reset.
    last_error: RefCell<Option<GpuError>>,
    lock: Rc<FifoLock>,
    freed: Cell<bool>,
}

impl StreamInner {
    /// Gives the ring and control block back (once).
    pub(crate) fn release_memory(&self, shared: &Shared) -> Result<(), GpuError> {
        if self.freed.replace(true) {
            return Ok(());
        }
        shared.free_pinned(self.ring)?;
        shared.free_pinned(self.control)
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// The error that reset the channel, for waiters of an older epoch.
    pub(crate) fn reset_error(&self) -> GpuError {
        self.last_error
            .borrow()
            .clone()
            .unwrap_or(GpuError::EventNotRecorded)
    }

    /// Arms a watch on the control block (before reading it, as the watch contract wants).
    pub(crate) fn watch<'a>(
        &self,
        shared: &'a Shared,
    ) -> impl std::future::Future<Output = ()> + 'a {
        shared.cpu.written(self.control.cpu, CONTROL_LEN)
    }

    /// Reads semaphore and notifier.
    async fn read_control(&self, shared: &Shared) -> Result<Control, GpuError> {
        activity::doing("GPU runtime: read the stream's semaphore");
        let bytes = shared
            .cpu
            .read_owned(BusAddr(self.control.cpu.get()), CONTROL_LEN as usize)
            .await
            .map_err(GpuError::Access)?;
        let word = |at: u64| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at as usize..at as usize + 8]);
            u64::from_le_bytes(w)
        };
        let mut notice = [0u8; ErrorNotice::SIZE];
        notice.copy_from_slice(&bytes[NOTIFIER as usize..CONTROL_LEN as usize]);
        Ok(Control {
            semaphore: word(SEMAPHORE),
            notice: ErrorNotice::decode(&notice),
        })
    }

    /// The channel error in the notifier, if the channel stopped on one.
    pub(crate) async fn notice(&self, shared: &Shared) -> Result<Option<GpuError>, GpuError> {
        let c = self.read_control(shared).await?;
        Ok(c.notice.map(|n| self.channel_error(n)))
    }

    fn channel_error(&self, n: ErrorNotice) -> GpuError {
        GpuError::Channel {
            channel: self.channel,
            code: n.code,
            info: n.info,
            entry: n.entry,
        }
    }

    /// Programs the channel: reset, ring, notifier.
    async fn program(&self, shared: &Shared) -> Result<(), GpuError> {
        let c = self.channel;
        shared.write_channel(c, channel::RESET, 1).await?;
        shared
            .write_channel(c, channel::RING_BASE, self.ring.bus.get())
            .await?;
        shared
            .write_channel(c, channel::RING_ENTRIES, RING_ENTRIES)
            .await?;
        shared
            .write_channel(c, channel::NOTIFIER, self.control.bus.get() + NOTIFIER)
            .await
    }

    /// After an error notice (submission lock held): clears the control block, resets and
    /// reprograms the channel, starts a new epoch, and returns the error.
    async fn recover(&self, shared: &Shared, notice: ErrorNotice) -> GpuError {
        let error = self.channel_error(notice);
        let cleared = shared
            .cpu
            .write(
                BusAddr(self.control.cpu.get()),
                &[0u8; CONTROL_LEN as usize],
            )
            .await
            .map_err(GpuError::Access);
        self.ring_state.set(RingState::default());
        *self.last_error.borrow_mut() = Some(error.clone());
        self.epoch.set(self.epoch.get() + 1);
        if let Err(e) = cleared {
            return e;
        }
        if let Err(e) = self.program(shared).await {
            return e;
        }
        error
    }

    /// Writes `bytes` (whole entries) into the ring from position `at`, split at the wrap.
    async fn write_ring(&self, shared: &Shared, at: u64, bytes: &[u8]) -> Result<(), GpuError> {
        let slot = at % RING_ENTRIES;
        let first = ((RING_ENTRIES - slot) * ENTRY_SIZE).min(bytes.len() as u64) as usize;
        let cpu = |slot: u64| BusAddr(self.ring.cpu.get() + slot * ENTRY_SIZE);
        shared
            .cpu
            .write(cpu(slot), &bytes[..first])
            .await
            .map_err(GpuError::Access)?;
        if first < bytes.len() {
            shared
                .cpu
                .write(cpu(0), &bytes[first..])
                .await
                .map_err(GpuError::Access)?;
        }
        Ok(())
    }

    /// The RELEASE entry that writes `value` into the semaphore.
    fn release(&self, value: u64) -> [u8; ENTRY_SIZE as usize] {
        Command::Release {
            dst: GpuAddr::Bus(self.control.bus.offset(SEMAPHORE)),
            value,
            interrupt: false,
        }
        .encode()
    }

    /// Queues `entries` (submission lock held), after room for them, plus a RELEASE when a
    /// quarter of the ring has passed since the last. Returns the epoch they went into.
    async fn queue(
        &self,
        shared: &Shared,
        entries: &[[u8; ENTRY_SIZE as usize]],
    ) -> Result<u64, GpuError> {
        self.queue_with(shared, entries, false).await
    }

    /// Queues a RELEASE of the position after it (submission lock held); returns that
    /// position.
    async fn queue_release(&self, shared: &Shared) -> Result<u64, GpuError> {
        self.queue_with(shared, &[], true).await?;
        Ok(self.ring_state.get().last_release)
    }

    /// [`StreamInner::queue`], with a RELEASE after `entries` always if `release`.
    async fn queue_with(
        &self,
        shared: &Shared,
        entries: &[[u8; ENTRY_SIZE as usize]],
        release: bool,
    ) -> Result<u64, GpuError> {
        let n = entries.len() as u64;
        self.reserve(shared, n + 1).await?;
        let RingState { put, last_release } = self.ring_state.get();
        let mut bytes: Vec<u8> = entries.iter().flatten().copied().collect();
        let mut new_put = put + n;
        let mut new_release = last_release;
        if release || new_put - last_release >= RING_ENTRIES / 4 {
            new_put += 1;
            new_release = new_put;
            bytes.extend_from_slice(&self.release(new_put));
        }
        activity::doing("GPU runtime: write the command entries");
        self.write_ring(shared, put, &bytes).await?;
        self.ring_state.set(RingState {
            put: new_put,
            last_release: new_release,
        });
        activity::doing("GPU runtime: ring the channel's doorbell (PUT)");
        shared
            .write_channel(self.channel, channel::PUT, new_put)
            .await?;
        Ok(self.epoch.get())
    }

    /// Waits (submission lock held) until `need` more entries fit with one spare, queueing a
    /// RELEASE into the spare entry when none is pending to wait for.
    async fn reserve(&self, shared: &Shared, need: u64) -> Result<(), GpuError> {
        loop {
            let landed = self.watch(shared);
            let control = self.read_control(shared).await?;
            if let Some(n) = control.notice {
                return Err(self.recover(shared, n).await);
            }
            let RingState { put, last_release } = self.ring_state.get();
            let pending = put.saturating_sub(control.semaphore);
            if pending + need < RING_ENTRIES {
                return Ok(());
            }
            if last_release <= control.semaphore {
                let value = put + 1;
                self.write_ring(shared, put, &self.release(value)).await?;
                self.ring_state.set(RingState {
                    put: value,
                    last_release: value,
                });
                shared
                    .write_channel(self.channel, channel::PUT, value)
                    .await?;
            }
            landed.await;
        }
    }
}

/// A stream (`cudaStream_t`): work queued on it runs in order on its own GPU channel.
#[derive(Debug)]
pub struct Stream {
    shared: Rc<Shared>,
    inner: Rc<StreamInner>,
}

impl Stream {
    /// Claims a free channel and sets its ring up.
    pub(crate) async fn create(shared: &Rc<Shared>) -> Result<Stream, GpuError> {
        shared.check()?;
        let channel = shared
            .streams
            .borrow()
            .iter()
            .position(Option::is_none)
            .ok_or(GpuError::NoFreeChannel {
                channels: shared.channels,
            })?;
        let channel = u16::try_from(channel).map_err(|_| GpuError::NoFreeChannel {
            channels: shared.channels,
        })?;
        let ring = shared.alloc_pinned(RING_ENTRIES * ENTRY_SIZE)?;
        let control = match shared.alloc_pinned(CONTROL_LEN) {
            Ok(c) => c,
            Err(e) => {
                let _ = shared.free_pinned(ring);
                return Err(e);
            }
        };
        let inner = Rc::new(StreamInner {
            channel,
            ring,
            control,
            ring_state: Cell::new(RingState::default()),
            epoch: Cell::new(0),
            last_error: RefCell::new(None),
            lock: Rc::new(FifoLock::new("a GPU stream's submission lock")),
            freed: Cell::new(false),
        });
        shared.streams.borrow_mut()[usize::from(channel)] = Some(inner.clone());
        if let Err(e) = inner.program(shared).await {
            shared.streams.borrow_mut()[usize::from(channel)] = None;
            let _ = inner.release_memory(shared);
            return Err(e);
        }
        Ok(Stream {
            shared: shared.clone(),
            inner,
        })
    }

    pub(crate) fn from_inner(shared: Rc<Shared>, inner: Rc<StreamInner>) -> Stream {
        Stream { shared, inner }
    }

    pub(crate) fn into_inner(self) -> Rc<StreamInner> {
        self.inner
    }

    /// The GPU channel the stream runs on.
    pub fn channel(&self) -> u16 {
        self.inner.channel
    }

    /// Fails if the stream can no longer be used (context closed, device gone, destroyed).
    fn usable(&self) -> Result<(), GpuError> {
        self.shared.check()?;
        if self.inner.freed.get() {
            return Err(BadCall::StreamDestroyed {
                channel: self.inner.channel,
            }
            .into());
        }
        Ok(())
    }

    /// An asynchronous call (`what` names it: "GPU runtime: cudaMemcpyAsync"): its CPU cost,
    /// then its entries into the ring and the doorbell.
    async fn call(
        &self,
        what: &'static str,
        entries: &[[u8; ENTRY_SIZE as usize]],
    ) -> Result<u64, GpuError> {
        self.shared.cpu.spend(what, self.shared.costs.call).await;
        let _held = self.inner.lock.acquire().await;
        self.usable()?;
        self.inner.queue(&self.shared, entries).await
    }

    /// Queues a copy of `len` bytes (`cudaMemcpyAsync`). Device-memory ranges are checked
    /// by the GPU (a copy leaving device memory stops the channel with `CopyFailed`).
    pub async fn memcpy_async(&self, dst: GpuAddr, src: GpuAddr, len: u64) -> Result<(), GpuError> {
        self.usable()?;
        if len == 0 {
            return Err(BadCall::EmptyCopy.into());
        }
        let memory = self.shared.props.memory;
        if len > memory {
            return Err(GpuError::CopyTooLarge { len, memory });
        }
        self.call(
            "GPU runtime: cudaMemcpyAsync",
            &[Command::Copy { src, dst, len }.encode()],
        )
        .await
        .map(|_| ())
    }

    /// Queues a launch of `kernel` with `threads` threads and `params` as its parameter
    /// bytes (`cudaLaunchKernel`).
    pub async fn launch(
        &self,
        kernel: KernelId,
        threads: u32,
        params: &[u8],
    ) -> Result<(), GpuError> {
        self.usable()?;
        if threads == 0 || threads > spec::MAX_THREADS {
            return Err(BadCall::Threads { threads }.into());
        }
        let param_bytes = params.len() as u64;
        if param_bytes > spec::MAX_PARAM_BYTES {
            return Err(BadCall::ParamBytes { bytes: param_bytes }.into());
        }
        if self.shared.kernels.get(kernel).is_none() {
            return Err(BadCall::KernelNotLoaded { kernel: kernel.0 }.into());
        }
        let mut entries = vec![Command::Launch {
            kernel,
            threads,
            param_bytes,
        }
        .encode()];
        for chunk in params.chunks(ENTRY_SIZE as usize) {
            let mut e = [0u8; ENTRY_SIZE as usize];
            e[..chunk.len()].copy_from_slice(chunk);
            entries.push(e);
        }
        self.call("GPU runtime: cudaLaunchKernel", &entries)
            .await
            .map(|_| ())
    }

    /// Queues a GPU timestamp into `event` (`cudaEventRecord`).
    pub async fn record(&self, event: &Event) -> Result<(), GpuError> {
        self.usable()?;
        if !event.belongs_to(&self.shared) {
            return Err(BadCall::ForeignEvent.into());
        }
        self.shared
            .cpu
            .spend("GPU runtime: cudaEventRecord", self.shared.costs.call)
            .await;
        let _held = self.inner.lock.acquire().await;
        self.usable()?;
        let slot = event.rearm(&self.shared).await?;
        let entry = Command::Timestamp {
            dst: GpuAddr::Bus(slot),
        }
        .encode();
        let epoch = self.inner.queue(&self.shared, &[entry]).await?;
        event.recorded_on(self.inner.clone(), epoch);
        Ok(())
    }

    /// Makes the stream wait until the u64 at byte `offset` of `flag` is at least `value`
    /// (`cuStreamWaitValue64` with the greater-or-equal flag): an ACQUIRE entry. What is
    /// queued behind it runs only once something else — another stream's copy, a kernel, a
    /// peer through the aperture — has written the value; a program uses it to queue work
    /// ahead and start it at once.
    pub async fn wait_value(
        &self,
        flag: &DeviceBuffer,
        offset: u64,
        value: u64,
    ) -> Result<(), GpuError> {
        self.usable()?;
        let at = flag
            .offset
            .checked_add(offset)
            .filter(|at| at.is_multiple_of(8) && offset.saturating_add(8) <= flag.len)
            .ok_or(BadCall::FlagWord {
                offset,
                len: flag.len,
                buffer: flag.offset,
            })?;
        self.call(
            "GPU runtime: cuStreamWaitValue64",
            &[Command::Acquire { offset: at, value }.encode()],
        )
        .await
        .map(|_| ())
    }

    /// Waits until everything queued so far has run (`cudaStreamSynchronize`): a RELEASE of
    /// the ring position into the semaphore, a watch on it, then the call's CPU cost. A
    /// channel error is returned (once) as [`GpuError::Channel`]; the channel is reset.
    /// A device that goes away while this waits is not noticed by the wait itself (it reads
    /// only host memory); the next call that touches the device fails with `DeviceGone`.
    pub async fn synchronize(&self) -> Result<(), GpuError> {
        self.usable()?;
        let (target, epoch) = {
            let _held = self.inner.lock.acquire().await;
            self.usable()?;
            let RingState { put, last_release } = self.inner.ring_state.get();
            let target = if put == last_release {
                last_release
            } else {
                self.inner.queue_release(&self.shared).await?
            };
            (target, self.inner.epoch())
        };
        loop {
            let landed = self.inner.watch(&self.shared);
            let control = self.inner.read_control(&self.shared).await?;
            if self.inner.epoch() != epoch {
                return Err(self.inner.reset_error());
            }
            if control.semaphore >= target {
                break;
            }
            if let Some(n) = control.notice {
                let _held = self.inner.lock.acquire().await;
                if self.inner.epoch() != epoch {
                    return Err(self.inner.reset_error());
                }
                return Err(self.inner.recover(&self.shared, n).await);
            }
            landed.await;
        }
        self.shared
            .cpu
            .spend("GPU runtime: cudaStreamSynchronize", self.shared.costs.sync)
            .await;
        Ok(())
    }

    /// Waits for the stream's work, resets its channel and gives the channel and the ring
    /// back (`cudaStreamDestroy`). An error of the last work is returned after the clean-up.
    pub async fn destroy(self) -> Result<(), GpuError> {
        self.usable()?;
        let finished = self.synchronize().await;
        let _held = self.inner.lock.acquire().await;
        let reset = match self.shared.check() {
            Ok(()) => {
                self.shared
                    .write_channel(self.inner.channel, channel::RESET, 1)
                    .await
            }
            Err(e) => Err(e),
        };
        self.shared.streams.borrow_mut()[usize::from(self.inner.channel)] = None;
        let freed = self.inner.release_memory(&self.shared);
        finished?;
        reset?;
        freed
    }
}

/// The CPU address of a slot of pinned memory, as the CPU's port takes it.
pub(crate) fn cpu_addr(at: PhysAddr) -> BusAddr {
    BusAddr(at.get())
}
