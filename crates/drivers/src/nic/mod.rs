//! The NIC driver: binds a NIC function through a host device handle — the same code for a
//! local function and a borrowed one, which it cannot tell apart — and implements
//! [`FrameLink`] for a transport.
//!
//! At probe it enables the function, maps BAR0, checks the ID register and reads the MAC
//! address, the MTU and the link; then sets up `queue_pairs` transmit rings and one receive
//! ring (queue pair 0, where the NIC steers every frame for the function) in coherent DMA
//! memory, posts every receive buffer, and checks each ring's `ERROR` register.
//!
//! Completion is by **polling host memory**, not MSI-X: the NIC writes each descriptor back
//! (status, and the length of a received frame) and the driver waits for that write with the
//! platform's memory watch, as a busy-polling driver (DPDK, NAPI busy-poll) would, at no cost
//! while nothing arrives. [`FrameLink::send`] takes the transmit queue of the frame's flow
//! (a hash of the destination and the transport's ports: a flow keeps its order), waits while its ring is full, copies the
//! frame into the slot's buffer, writes the descriptor and rings the doorbell.
//! [`FrameLink::recv`] returns the next received frame and re-posts its buffer (the
//! doorbell once per quarter ring).
//!
//! A device that is gone (returned to its lender, removed) shows as a failed register
//! access: from then on every call fails with [`LinkError::Gone`]. `recv` reads the link
//! register each time it finds no frame ready, so a receiver waiting on a gone device fails
//! instead of waiting forever.

mod ring;

pub use ring::buffer_size;

use crate::net::{FrameLink, LinkError};
use ring::{RingMemory, RxIndices, TxIndices};
use smartio_devices::ethernet::{MacAddr, HEADER_BYTES};
use smartio_devices::nic::spec::{
    self, queue, reg, RingError, RxDescriptor, Status, TxDescriptor, LINK_SPEED_SHIFT, LINK_UP,
    NIC_MAGIC,
};
use smartio_host::{DeviceHandle, DmaError, HostError, Mmio};
use smartio_machine::Agent;
use smartio_platform::{AccessError, BusAddr, FifoLock, MemoryWatch, PhysAddr, Port};
use std::cell::RefCell;
use std::rc::Rc;
use thiserror::Error;

/// Why a NIC could not be bound.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NicError {
    /// The ID register does not hold the NIC's magic.
    #[error("{device}: not a NIC: ID register reads {id:#x}")]
    NotANic {
        /// The device.
        device: String,
        /// What the register held.
        id: u64,
    },
    /// A register access failed.
    #[error("{device}: register access failed: {source}")]
    Access {
        /// The device.
        device: String,
        /// The failure.
        source: AccessError,
    },
    /// The host refused to map BAR0.
    #[error("{device}: {source}")]
    Host {
        /// The device.
        device: String,
        /// The host's refusal.
        source: Box<HostError>,
    },
    /// The DMA API refused ring memory.
    #[error("{device}: {source}")]
    Dma {
        /// The device.
        device: String,
        /// The DMA API's refusal.
        source: DmaError,
    },
    /// A configuration value out of range.
    #[error("{device}: {key} = {value}: out of range (allowed: {allowed})")]
    Config {
        /// The device.
        device: String,
        /// The setting.
        key: &'static str,
        /// Its value.
        value: u64,
        /// What is allowed.
        allowed: String,
    },
    /// The NIC refused a ring the driver set up.
    #[error("{device}: queue pair {queue} refused its ring: {error}")]
    Ring {
        /// The device.
        device: String,
        /// The queue pair.
        queue: u16,
        /// The NIC's reason.
        error: RingError,
    },
}

/// How the driver sets the NIC up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicDriverConfig {
    /// Transmit queues (1 to [`spec::QUEUE_PAIRS`]); a destination always uses the same one.
    pub queue_pairs: u16,
    /// Descriptors per ring: a power of two from 8 to 4096.
    pub ring_entries: u64,
}

impl Default for NicDriverConfig {
    fn default() -> Self {
        Self {
            queue_pairs: 1,
            ring_entries: 256,
        }
    }
}

/// What the NIC counts, as its registers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NicCounters {
    /// Frames sent by this function.
    pub tx_frames: u64,
    /// Frames received into posted buffers.
    pub rx_frames: u64,
    /// Frames dropped because no receive buffer was posted.
    pub rx_no_buffer: u64,
    /// Frames the port put on the wire (every function of the NIC).
    pub wire_tx_frames: u64,
    /// Frames the port took off the wire.
    pub wire_rx_frames: u64,
}

struct TxQueue {
    memory: RingMemory,
    at: TxIndices,
    lock: Rc<FifoLock>,
}

struct Inner {
    handle: DeviceHandle,
    cpu: Agent,
    bar: Mmio,
    mac: MacAddr,
    mtu: usize,
    link_mbps: u64,
    tx: Vec<TxQueue>,
    rx: RingMemory,
    rx_at: RxIndices,
    rx_lock: Rc<FifoLock>,
    gone: RefCell<Option<LinkError>>,
}

/// A bound NIC function: a network interface.
#[derive(Clone)]
pub struct NicDriver {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for NicDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NicDriver")
            .field("device", &self.inner.handle.name())
            .field("mac", &self.inner.mac)
            .field("mtu", &self.inner.mtu)
            .finish()
    }
}

impl NicDriver {
    /// Binds the NIC function behind `handle` with `config`.
    pub async fn probe(
        handle: DeviceHandle,
        config: NicDriverConfig,
    ) -> Result<NicDriver, NicError> {
        let device = handle.name().to_string();
        let entries = check_config(&device, &config)?;
        let access = |source| NicError::Access {
            device: device.clone(),
            source,
        };
        handle.enable().await.map_err(access)?;
        let bar = handle
            .map_bar(spec::REGISTER_BAR)
            .map_err(|source| NicError::Host {
                device: device.clone(),
                source: Box::new(source),
            })?;
        let id = bar.read64(reg::ID).await.map_err(access)?;
        if id != NIC_MAGIC {
            return Err(NicError::NotANic { device, id });
        }
        let mac = MacAddr::from_u64(bar.read64(reg::MAC).await.map_err(access)?);
        let mtu = bar.read64(reg::MTU).await.map_err(access)? as usize;
        let link = bar.read64(reg::LINK).await.map_err(access)?;
        let size = buffer_size(mtu);
        let (tx, rx) = allocate_rings(&handle, config.queue_pairs, entries, size)?;
        program_tx_rings(&bar, &tx, entries).await.map_err(access)?;
        post_rx_ring(&handle, &bar, &rx, entries, size)
            .await
            .map_err(access)?;
        check_rings(&bar, &device, config.queue_pairs).await?;
        let rx_at = RxIndices::default();
        rx_at.posted.set(entries);
        let cpu = handle.cpu().clone();
        Ok(NicDriver {
            inner: Rc::new(Inner {
                cpu,
                bar,
                mac,
                mtu,
                link_mbps: link >> LINK_SPEED_SHIFT,
                tx: tx
                    .into_iter()
                    .map(|memory| TxQueue {
                        memory,
                        at: TxIndices::default(),
                        lock: Rc::new(FifoLock::new("a NIC transmit queue's ring")),
                    })
                    .collect(),
                rx,
                rx_at,
                rx_lock: Rc::new(FifoLock::new("the NIC's receive ring")),
                gone: RefCell::new(None),
                handle,
            }),
        })
    }

    /// The device handle the driver is bound through.
    pub fn handle(&self) -> &DeviceHandle {
        &self.inner.handle
    }

    /// The port's line rate in Mb/s, as the NIC reported it at probe.
    pub fn link_mbps(&self) -> u64 {
        self.inner.link_mbps
    }

    /// Whether the port has a link partner now.
    pub async fn link_up(&self) -> Result<bool, LinkError> {
        Ok(self.read(reg::LINK).await? & LINK_UP != 0)
    }

    /// The NIC's counters for this function and its port.
    pub async fn counters(&self) -> Result<NicCounters, LinkError> {
        Ok(NicCounters {
            tx_frames: self.read(reg::TX_FRAMES).await?,
            rx_frames: self.read(reg::RX_FRAMES).await?,
            rx_no_buffer: self.read(reg::RX_NO_BUFFER).await?,
            wire_tx_frames: self.read(reg::WIRE_TX_FRAMES).await?,
            wire_rx_frames: self.read(reg::WIRE_RX_FRAMES).await?,
        })
    }

    /// Frames the NIC dropped for want of a posted receive buffer (`RX_NO_BUFFER`).
    pub async fn rx_dropped(&self) -> Result<u64, LinkError> {
        self.read(reg::RX_NO_BUFFER).await
    }

    fn check(&self) -> Result<(), LinkError> {
        match &*self.inner.gone.borrow() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The error for a failed access: the device is gone, from now on for every call.
    fn failed(&self, e: AccessError) -> LinkError {
        let gone = LinkError::Gone {
            interface: self.inner.handle.name().to_string(),
            reason: e,
        };
        self.inner.gone.borrow_mut().get_or_insert(gone).clone()
    }

    async fn read(&self, offset: u64) -> Result<u64, LinkError> {
        self.check()?;
        self.inner
            .bar
            .read64(offset)
            .await
            .map_err(|e| self.failed(e))
    }

    async fn write_reg(&self, offset: u64, value: u64) -> Result<(), LinkError> {
        self.check()?;
        self.inner
            .bar
            .write64(offset, value)
            .await
            .map_err(|e| self.failed(e))
    }

    async fn host_read(&self, at: PhysAddr, buf: &mut [u8]) -> Result<(), LinkError> {
        self.inner
            .cpu
            .read(BusAddr(at.get()), buf)
            .await
            .map_err(|e| self.failed(e))
    }

    async fn host_write(&self, at: PhysAddr, data: &[u8]) -> Result<(), LinkError> {
        self.inner
            .cpu
            .write(BusAddr(at.get()), data)
            .await
            .map_err(|e| self.failed(e))
    }

    /// The written-back status of the descriptor at `at` (0 while the NIC owns it).
    async fn status_at(&self, at: PhysAddr) -> Result<u16, LinkError> {
        let mut b = [0u8; 2];
        self.host_read(at.offset(spec::STATUS_OFFSET), &mut b)
            .await?;
        Ok(u16::from_le_bytes(b))
    }

    /// The transmit queue (its index) of `frame`'s flow: its destination and the first four payload
    /// bytes (a transport's ports), hashed as a NIC's transmit steering does, so a flow's
    /// frames keep their order and different flows go out on different queues in parallel.
    fn tx_queue(&self, frame: &[u8]) -> u16 {
        let flow = frame
            .get(..6)
            .into_iter()
            .chain(frame.get(HEADER_BYTES..HEADER_BYTES + 4))
            .flatten()
            .fold(0usize, |h, &b| h.wrapping_mul(31) ^ usize::from(b));
        let n = self.inner.tx.len().max(1);
        // Fewer than QUEUE_PAIRS (a u16) queues: the index fits.
        (flow % n) as u16
    }

    async fn send_frame(&self, frame: Vec<u8>) -> Result<(), LinkError> {
        self.check()?;
        let payload = frame.len().saturating_sub(HEADER_BYTES);
        if payload > self.inner.mtu {
            return Err(LinkError::TooLarge {
                len: payload,
                mtu: self.inner.mtu,
            });
        }
        let index = self.tx_queue(&frame);
        let q = &self.inner.tx[usize::from(index)];
        let _held = q.lock.acquire().await;
        let m = q.memory;
        let tail = q.at.tail.get();
        // Wait for room: reclaim written-back descriptors from the oldest on.
        while tail - q.at.clean.get() >= m.entries {
            let at = m.descriptor_cpu(q.at.clean.get());
            let watch = self.inner.cpu.written(at, spec::DESCRIPTOR_BYTES);
            match self.status_at(at).await? {
                0 => watch.await,
                _ => q.at.clean.set(q.at.clean.get() + 1),
            }
        }
        let d = TxDescriptor {
            buffer: m.buffer_bus(tail),
            len: frame.len() as u32,
            status: 0,
        };
        self.host_write(m.buffer_cpu(tail), &frame).await?;
        self.host_write(m.descriptor_cpu(tail), &d.to_bytes())
            .await?;
        q.at.tail.set(tail + 1);
        self.write_reg(queue::base(index) + queue::TX_TAIL, tail + 1)
            .await
    }

    async fn recv_frame(&self) -> Result<Vec<u8>, LinkError> {
        let _held = self.inner.rx_lock.acquire().await;
        let m = self.inner.rx;
        let at = &self.inner.rx_at;
        loop {
            self.check()?;
            let index = at.next.get();
            let desc_at = m.descriptor_cpu(index);
            let watch = self.inner.cpu.written(desc_at, spec::DESCRIPTOR_BYTES);
            let mut bytes = [0u8; 16];
            self.host_read(desc_at, &mut bytes).await?;
            let d = RxDescriptor::from_bytes(&bytes);
            if d.status == 0 {
                // Nothing yet: is the device still there? Then wait for the write-back.
                self.read(reg::LINK).await?;
                watch.await;
                continue;
            }
            drop(watch);
            let frame = if Status::from_code(d.status) == Some(Status::Ok) {
                let mut frame = vec![0u8; d.len as usize];
                self.host_read(m.buffer_cpu(index), &mut frame).await?;
                Some(frame)
            } else {
                None
            };
            // Re-post the buffer; hand the NIC a quarter ring at a time.
            let posted = RxDescriptor {
                buffer: m.buffer_bus(index),
                len: m.buffer_size as u32,
                status: 0,
            };
            self.host_write(desc_at, &posted.to_bytes()).await?;
            at.next.set(index + 1);
            let tail = index + 1 + m.entries;
            if tail - at.posted.get() >= (m.entries / 4).max(1) {
                at.posted.set(tail);
                self.write_reg(queue::base(0) + queue::RX_TAIL, tail)
                    .await?;
            }
            if let Some(frame) = frame {
                return Ok(frame);
            }
        }
    }
}

impl FrameLink for NicDriver {
    fn mac(&self) -> MacAddr {
        self.inner.mac
    }

    fn mtu(&self) -> usize {
        self.inner.mtu
    }

    fn send(&self, frame: Vec<u8>) -> impl std::future::Future<Output = Result<(), LinkError>> {
        self.send_frame(frame)
    }

    fn recv(&self) -> impl std::future::Future<Output = Result<Vec<u8>, LinkError>> {
        self.recv_frame()
    }
}
/// Refuses `config`'s counts outside what the NIC has; the ring entries.
fn check_config(device: &str, config: &NicDriverConfig) -> Result<u64, NicError> {
    let refused = |key, value, allowed: &str| NicError::Config {
        device: device.to_string(),
        key,
        value,
        allowed: allowed.to_string(),
    };
    if !(1..=spec::QUEUE_PAIRS).contains(&config.queue_pairs) {
        return Err(refused(
            "queue_pairs",
            u64::from(config.queue_pairs),
            "1 to 8",
        ));
    }
    let entries = config.ring_entries;
    if !entries.is_power_of_two() || !spec::RING_ENTRIES.contains(&entries) {
        return Err(refused(
            "ring_entries",
            entries,
            "a power of two from 8 to 4096",
        ));
    }
    Ok(entries)
}

/// The transmit rings (one per queue pair) and the receive ring, in DMA memory, of
/// `entries` descriptors with buffers of `size` bytes.
fn allocate_rings(
    handle: &DeviceHandle,
    queue_pairs: u16,
    entries: u64,
    size: u64,
) -> Result<(Vec<RingMemory>, RingMemory), NicError> {
    let alloc = |_| {
        handle
            .dma_alloc_coherent(RingMemory::bytes(entries, size))
            .map(|dma| RingMemory {
                dma,
                entries,
                buffer_size: size,
            })
            .map_err(|source| NicError::Dma {
                device: handle.name().to_string(),
                source,
            })
    };
    let tx: Vec<RingMemory> = (0..queue_pairs).map(alloc).collect::<Result<_, _>>()?;
    let rx = alloc(0)?;
    Ok((tx, rx))
}

/// Gives the NIC each transmit ring's place and size.
async fn program_tx_rings(bar: &Mmio, tx: &[RingMemory], entries: u64) -> Result<(), AccessError> {
    for (q, m) in tx.iter().enumerate() {
        let base = queue::base(q as u16);
        bar.write64(base + queue::TX_BASE, m.dma.bus.get()).await?;
        bar.write64(base + queue::TX_SIZE, entries).await?;
    }
    Ok(())
}

/// Posts every receive buffer, then enables the ring and hands them over.
async fn post_rx_ring(
    handle: &DeviceHandle,
    bar: &Mmio,
    rx: &RingMemory,
    entries: u64,
    size: u64,
) -> Result<(), AccessError> {
    for i in 0..entries {
        let d = RxDescriptor {
            buffer: rx.buffer_bus(i),
            len: size as u32,
            status: 0,
        };
        handle
            .cpu()
            .write(BusAddr(rx.descriptor_cpu(i).get()), &d.to_bytes())
            .await?;
    }
    let q0 = queue::base(0);
    bar.write64(q0 + queue::RX_BASE, rx.dma.bus.get()).await?;
    bar.write64(q0 + queue::RX_SIZE, entries).await?;
    bar.write64(q0 + queue::RX_TAIL, entries).await
}

/// Refuses a ring the NIC reports an error for (after it took the set-up).
async fn check_rings(bar: &Mmio, device: &str, queue_pairs: u16) -> Result<(), NicError> {
    for q in 0..queue_pairs {
        let code = bar
            .read64(queue::base(q) + queue::ERROR)
            .await
            .map_err(|source| NicError::Access {
                device: device.to_string(),
                source,
            })?;
        if let Some(error) = RingError::from_code(code) {
            return Err(NicError::Ring {
                device: device.to_string(),
                queue: q,
                error,
            });
        }
    }
    Ok(())
}
