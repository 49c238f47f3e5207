//! A bound GPU (a CUDA context): what the GPU said about itself at open, its device memory
//! and the pinned host memory allocated for it, the channels its streams hold, the peer
//! apertures mapped for it, and the calls that are not a stream's (synchronous `memcpy`,
//! host-memory access, `close`).
//!
//! Invariants:
//! - one context per GPU at a time (channels are claimed in the context, not on the device);
//! - every resource the context hands out (device ranges, pinned buffers, channels with their
//!   rings, event slots, peer mappings) is recorded in `Shared`, so `close` gives back
//!   everything, whatever the program forgot;
//! - once an access shows the device is gone (returned to its lender, hot-removed), or the
//!   context is closed, every later call fails with that same error (`Shared::check`).

use super::error::{BadCall, GpuError};
use super::event::{Event, EventSlots};
use super::memory::{AllocError, DeviceAllocator, DeviceBuffer, HostBuffer};
use super::stream::{Stream, StreamInner};
use super::RuntimeCosts;
use smartio_devices::gpu::spec::{self, channel, reg, GpuAddr, KernelId};
use smartio_devices::gpu::{KernelFn, KernelLibrary};
use smartio_fabric::{EndpointId, HostId};
use smartio_host::{DeviceHandle, DmaBuffer, Mmio};
use smartio_machine::Agent;
use smartio_platform::{AccessError, BusAddr, Port, SimDuration};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// What the GPU reports about itself (read from BAR0 at open: `cudaGetDeviceProperties`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProperties {
    /// Bytes of device memory.
    pub memory: u64,
    /// Bytes of device memory (from offset 0) that BAR1 exposes to peers and CPUs.
    pub aperture: u64,
    /// Copy engines.
    pub copy_engines: u16,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Frequency of the cycle counter kernels read, in kHz.
    pub clock_khz: u64,
    /// Address bits the GPU puts on the bus.
    pub dma_bits: u8,
}

/// What every object of one context shares.
pub(crate) struct Shared {
    pub(crate) handle: DeviceHandle,
    pub(crate) cpu: Agent,
    pub(crate) bar: Mmio,
    pub(crate) kernels: Rc<KernelLibrary<Agent>>,
    pub(crate) costs: RuntimeCosts,
    pub(crate) props: GpuProperties,
    /// Channels the GPU has.
    pub(crate) channels: u16,
    /// `DeviceGone` or `Closed` once either happened.
    failed: RefCell<Option<GpuError>>,
    memory: RefCell<DeviceAllocator>,
    /// Pinned host buffers by CPU address.
    host: RefCell<BTreeMap<u64, DmaBuffer>>,
    /// The stream holding each channel.
    pub(crate) streams: RefCell<Vec<Option<Rc<StreamInner>>>>,
    /// Peer apertures mapped for this GPU: the peer's function → base.
    peers: RefCell<BTreeMap<(HostId, EndpointId), BusAddr>>,
    pub(crate) events: RefCell<EventSlots>,
    /// The stream synchronous copies use (created at the first).
    internal: RefCell<Option<Rc<StreamInner>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("device", &self.handle.name())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Fails if the device is gone or the context closed.
    pub(crate) fn check(&self) -> Result<(), GpuError> {
        match &*self.failed.borrow() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The error for a failed BAR0 access: a BAR that no longer decodes (the NTB window of a
    /// returned device has no translation; a removed function claims nothing) means the device
    /// is gone, from now on for every call.
    pub(crate) fn mmio_failed(&self, e: AccessError) -> GpuError {
        match e {
            AccessError::NtbNoTranslation { .. } | AccessError::UnsupportedRequest { .. } => {
                let gone = GpuError::DeviceGone {
                    device: self.handle.name().to_string(),
                    cause: e,
                };
                self.failed.borrow_mut().get_or_insert(gone).clone()
            }
            other => GpuError::Access(other),
        }
    }

    /// A 64-bit register store of channel `c`.
    pub(crate) async fn write_channel(
        &self,
        c: u16,
        register: u64,
        value: u64,
    ) -> Result<(), GpuError> {
        self.bar
            .write64(channel::base(c) + register, value)
            .await
            .map_err(|e| self.mmio_failed(e))
    }

    /// Pinned host memory mapped for the GPU (zeroed).
    /// Allocates pinned host memory mapped for the GPU; memory the GPU could not address is
    /// given back and refused ([`GpuError::HostOutOfReach`]) rather than handed to a GPU that
    /// would wait for it forever.
    pub(crate) fn alloc_pinned(&self, len: u64) -> Result<DmaBuffer, GpuError> {
        let buf = self.handle.dma_alloc_coherent(len)?;
        let bits = self.props.dma_bits;
        let reachable = bits >= 64
            || buf
                .bus
                .get()
                .checked_add(len.saturating_sub(1))
                .is_some_and(|last| last < 1u64 << bits);
        if !reachable {
            let bus = buf.bus.get();
            self.handle.dma_free_coherent(buf)?;
            return Err(GpuError::HostOutOfReach { bus, len, bits });
        }
        Ok(buf)
    }

    /// Gives pinned memory back.
    pub(crate) fn free_pinned(&self, buf: DmaBuffer) -> Result<(), GpuError> {
        Ok(self.handle.dma_free_coherent(buf)?)
    }
}

/// A bound GPU: one CUDA context. Not `Send`, as nothing of the emulated hosts is.
pub struct GpuContext {
    shared: Rc<Shared>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("device", &self.shared.handle.name())
            .field("properties", &self.shared.props)
            .finish()
    }
}

/// Access to a peer GPU's memory through its BAR1 aperture, mapped for this GPU
/// (`cudaDeviceEnablePeerAccess`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAccess {
    base: BusAddr,
    aperture: u64,
}

impl PeerAccess {
    /// Where this GPU reaches the peer's `peer_buf`; an error if the peer's aperture does not
    /// cover all of it.
    pub fn addr(&self, peer_buf: &DeviceBuffer) -> Result<GpuAddr, GpuError> {
        let end = peer_buf.offset.checked_add(peer_buf.len.max(1));
        match end {
            Some(end) if end <= self.aperture => {
                Ok(GpuAddr::Bus(self.base.offset(peer_buf.offset)))
            }
            _ => Err(GpuError::NotInAperture {
                offset: peer_buf.offset,
                len: peer_buf.len,
                aperture: self.aperture,
            }),
        }
    }

    /// Where this GPU reaches the first byte of the peer's aperture.
    pub fn base(&self) -> BusAddr {
        self.base
    }

    /// Bytes of the peer's memory the aperture covers.
    pub fn aperture(&self) -> u64 {
        self.aperture
    }
}

impl GpuContext {
    /// Binds the GPU behind `handle`: enables it (memory decoding, bus mastering), maps
    /// BAR0, checks the ID register and reads the GPU's properties. Kernels are launched from
    /// `kernels` (the library the GPU model runs them from).
    pub async fn open(
        handle: DeviceHandle,
        kernels: Rc<KernelLibrary<Agent>>,
        costs: RuntimeCosts,
    ) -> Result<GpuContext, GpuError> {
        handle.enable().await.map_err(GpuError::Access)?;
        let bar = handle.map_bar(spec::REGISTER_BAR)?;
        let read = |offset| {
            let bar = bar.clone();
            async move { bar.read64(offset).await.map_err(GpuError::Access) }
        };
        let id = read(reg::ID).await?;
        if id != spec::GPU_MAGIC {
            return Err(GpuError::NotAGpu(id));
        }
        let saturate16 = |v: u64| u16::try_from(v).unwrap_or(u16::MAX);
        let props = GpuProperties {
            memory: read(reg::MEMORY_SIZE).await?,
            aperture: read(reg::APERTURE_SIZE).await?,
            copy_engines: saturate16(read(reg::COPY_ENGINES).await?),
            sm_count: u32::try_from(read(reg::SM_COUNT).await?).unwrap_or(u32::MAX),
            clock_khz: read(reg::CLOCK_KHZ).await?,
            dma_bits: u8::try_from(read(reg::DMA_BITS).await?).unwrap_or(u8::MAX),
        };
        let channels = saturate16(read(reg::CHANNELS).await?);
        let cpu = handle.cpu().clone();
        Ok(GpuContext {
            shared: Rc::new(Shared {
                cpu,
                bar,
                kernels,
                costs,
                props,
                channels,
                failed: RefCell::new(None),
                memory: RefCell::new(DeviceAllocator::new(props.memory)),
                host: RefCell::new(BTreeMap::new()),
                streams: RefCell::new(vec![None; usize::from(channels)]),
                peers: RefCell::new(BTreeMap::new()),
                events: RefCell::new(EventSlots::default()),
                internal: RefCell::new(None),
                handle,
            }),
        })
    }

    /// The device handle the context is bound through.
    pub fn handle(&self) -> &DeviceHandle {
        &self.shared.handle
    }

    /// What the GPU reported at open.
    pub fn properties(&self) -> &GpuProperties {
        &self.shared.props
    }

    /// Allocates `len` bytes of device memory (`cudaMalloc`): 256-byte aligned, the lowest
    /// free range that fits, so small allocations land inside the BAR1 aperture.
    pub fn malloc(&self, len: u64) -> Result<DeviceBuffer, GpuError> {
        self.shared.check()?;
        match self.shared.memory.borrow_mut().alloc(len) {
            Ok(offset) => Ok(DeviceBuffer { offset, len }),
            Err(AllocError::Full { asked, free }) => Err(GpuError::OutOfMemory { asked, free }),
            Err(_) => Err(BadCall::EmptyMalloc.into()),
        }
    }

    /// Gives device memory back (`cudaFree`).
    pub fn free(&self, buf: &DeviceBuffer) -> Result<(), GpuError> {
        self.shared.check()?;
        self.shared
            .memory
            .borrow_mut()
            .free(buf.offset)
            .map_err(|_| BadCall::NotAllocated { offset: buf.offset }.into())
    }

    /// Bytes of device memory free in all (`cudaMemGetInfo`).
    pub fn free_memory(&self) -> u64 {
        self.shared.memory.borrow().free_bytes()
    }

    /// Allocates `len` bytes of pinned host memory mapped for this GPU (`cudaHostAlloc`),
    /// zeroed.
    pub fn host_alloc(&self, len: u64) -> Result<HostBuffer, GpuError> {
        self.shared.check()?;
        if len == 0 {
            return Err(BadCall::EmptyHostAlloc.into());
        }
        let buf = self.shared.alloc_pinned(len)?;
        self.shared.host.borrow_mut().insert(buf.cpu.get(), buf);
        Ok(HostBuffer {
            cpu: buf.cpu,
            bus: buf.bus,
            len,
        })
    }

    /// Gives pinned host memory back (`cudaFreeHost`).
    pub fn host_free(&self, buf: HostBuffer) -> Result<(), GpuError> {
        self.shared.check()?;
        let dma = self
            .shared
            .host
            .borrow_mut()
            .remove(&buf.cpu.get())
            .ok_or(BadCall::NotHostAllocated { cpu: buf.cpu })?;
        self.shared.free_pinned(dma)
    }

    /// Claims a free channel for a new stream, its ring in pinned host memory
    /// (`cudaStreamCreate`).
    pub async fn create_stream(&self) -> Result<Stream, GpuError> {
        Stream::create(&self.shared).await
    }

    /// A new event: an 8-byte timestamp slot in pinned host memory (`cudaEventCreate`).
    pub fn create_event(&self) -> Result<Event, GpuError> {
        self.shared.check()?;
        Event::create(&self.shared)
    }

    /// The time between two recorded events, as the GPU's timer saw it
    /// (`cudaEventElapsedTime`); waits until both timestamps are written.
    pub async fn elapsed(&self, start: &Event, end: &Event) -> Result<SimDuration, GpuError> {
        self.shared.check()?;
        let t0 = start.timestamp(&self.shared).await?;
        let t1 = end.timestamp(&self.shared).await?;
        let ns = t1
            .checked_sub(t0)
            .ok_or(BadCall::EventsReversed { start: t0, end: t1 })?;
        Ok(SimDuration::from_ns(ns))
    }

    /// Maps `peer`'s BAR1 aperture for this GPU (`cudaDeviceEnablePeerAccess`). Enabling
    /// the same peer again returns the same mapping.
    pub fn enable_peer_access(&self, peer: &GpuContext) -> Result<PeerAccess, GpuError> {
        self.shared.check()?;
        peer.shared.check()?;
        let aperture = peer.shared.props.aperture;
        let key = peer.handle().function();
        if let Some(&base) = self.shared.peers.borrow().get(&key) {
            return Ok(PeerAccess { base, aperture });
        }
        let base = self
            .shared
            .handle
            .dma_map_peer(peer.handle(), spec::APERTURE_BAR)?;
        // The peer's whole aperture must lie below this GPU's addressing limit, or its copy
        // engines and kernels could never reach it (cudaErrorPeerAccessUnsupported).
        let bits = self.shared.props.dma_bits;
        let reachable = bits >= 64
            || base
                .get()
                .checked_add(aperture.saturating_sub(1))
                .is_some_and(|end| end < 1u64 << bits);
        if !reachable {
            let _ = self.shared.handle.dma_unmap(base);
            return Err(GpuError::PeerOutOfReach {
                peer: peer.handle().name().to_string(),
                base: base.get(),
                bits,
            });
        }
        self.shared.peers.borrow_mut().insert(key, base);
        Ok(PeerAccess { base, aperture })
    }

    /// Loads `kernel` under `name` into the library (same name again: same id, new code).
    pub fn load_kernel(&self, name: &str, kernel: KernelFn<Agent>) -> KernelId {
        self.shared.kernels.load(name, kernel)
    }

    /// Copies `len` bytes and waits for the copy (`cudaMemcpy`): a copy on the context's
    /// internal stream, then a synchronize. The internal stream takes a channel at the first
    /// call (so it fails with `NoFreeChannel` if streams hold every channel by then).
    pub async fn memcpy(&self, dst: GpuAddr, src: GpuAddr, len: u64) -> Result<(), GpuError> {
        self.shared.check()?;
        let existing = self.shared.internal.borrow().clone();
        let inner = match existing {
            Some(s) => s,
            None => {
                let s = Stream::create(&self.shared).await?.into_inner();
                *self.shared.internal.borrow_mut() = Some(s.clone());
                s
            }
        };
        let stream = Stream::from_inner(self.shared.clone(), inner);
        stream.memcpy_async(dst, src, len).await?;
        stream.synchronize().await
    }

    /// Stores `data` at `offset` of pinned `buf` with the CPU.
    pub async fn write_host(
        &self,
        buf: &HostBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), GpuError> {
        self.shared.check()?;
        let at = self.host_range(buf, offset, data.len() as u64)?;
        self.shared
            .cpu
            .write(at, data)
            .await
            .map_err(GpuError::Access)
    }

    /// Loads `out.len()` bytes at `offset` of pinned `buf` with the CPU.
    pub async fn read_host(
        &self,
        buf: &HostBuffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), GpuError> {
        self.shared.check()?;
        let at = self.host_range(buf, offset, out.len() as u64)?;
        self.shared
            .cpu
            .read(at, out)
            .await
            .map_err(GpuError::Access)
    }

    /// The CPU address of `len` bytes at `offset` of `buf`, checked to lie inside it.
    fn host_range(&self, buf: &HostBuffer, offset: u64, len: u64) -> Result<BusAddr, GpuError> {
        if !self.shared.host.borrow().contains_key(&buf.cpu.get()) {
            return Err(BadCall::NotPinned { cpu: buf.cpu }.into());
        }
        match offset.checked_add(len) {
            Some(end) if end <= buf.len => Ok(BusAddr(buf.cpu.get() + offset)),
            _ => Err(BadCall::PastHostBuffer {
                offset,
                len,
                size: buf.len,
            }
            .into()),
        }
    }

    /// Resets every channel the context holds and gives back everything it allocated or
    /// mapped: rings, semaphores, event slots, pinned buffers, peer mappings, device memory.
    /// On a device that is gone, the host side is still given back and `close` succeeds.
    pub async fn close(self) -> Result<(), GpuError> {
        let shared = &self.shared;
        if let Err(GpuError::Closed) = shared.check() {
            return Err(GpuError::Closed);
        }
        let streams: Vec<Rc<StreamInner>> = shared
            .streams
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        *shared.internal.borrow_mut() = None;
        let mut first_error = None;
        let mut note = |r: Result<(), GpuError>| {
            if let Err(e) = r {
                if !matches!(e, GpuError::DeviceGone { .. }) {
                    first_error.get_or_insert(e);
                }
            }
        };
        for s in streams {
            if shared.check().is_ok() {
                note(shared.write_channel(s.channel, channel::RESET, 1).await);
            }
            note(s.release_memory(shared));
        }
        let pinned: Vec<DmaBuffer> = std::mem::take(&mut *shared.host.borrow_mut())
            .into_values()
            .collect();
        for buf in pinned {
            note(shared.free_pinned(buf));
        }
        let pages = shared.events.borrow_mut().take_pages();
        for page in pages {
            note(shared.free_pinned(page));
        }
        let peers = std::mem::take(&mut *shared.peers.borrow_mut());
        for base in peers.into_values() {
            note(shared.handle.dma_unmap(base).map_err(GpuError::from));
        }
        shared.memory.borrow_mut().clear();
        *shared.failed.borrow_mut() = Some(GpuError::Closed);
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
