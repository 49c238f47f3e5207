//! Driver for an NTB adapter's own DMA engine (`devices::ntb_dma`): one queue of transfers,
//! shaped after SISCI's DMA queues so that the SISCI API can be carried out on it —
//! [`AdapterDmaQueue::create`] is `SCICreateDMAQueue` (a ring of `maxEntries`),
//! [`AdapterDmaQueue::post`] is `SCIStartDmaTransferVec` (a vector of transfers, each a
//! local and a remote bus address, a length and a direction, `SCI_FLAG_DMA_READ` being
//! [`Direction::Read`]), [`AdapterDmaQueue::wait`] is `SCIWaitForDMAQueue`,
//! [`AdapterDmaQueue::state`] is `SCIDMAQueueState`, [`AdapterDmaQueue::abort`] is
//! `SCIAbortDMAQueue` and [`AdapterDmaQueue::remove`] is `SCIRemoveDMAQueue`.
//!
//! The CPU writes the descriptors into the ring in host memory with stores and rings TAIL
//! through the adapter's BAR0; completion is the engine's done word in host memory, which the
//! CPU watches (no interrupt). A ring slot is free again only once the batch that used it has
//! been waited for, so statuses are never overwritten before they are read.

use smartio_devices::ntb_dma::spec::{
    control, desc, done, reg, QueueState, RegisterError, BLOCK, DESCRIPTOR_BYTES, MAGIC,
    MAX_RING_ENTRIES,
};
pub use smartio_devices::ntb_dma::spec::{Descriptor, DescriptorStatus, Direction};
use smartio_platform::{AccessError, BusAddr, Clock, MemoryWatch, PhysAddr, Port};
use std::cell::Cell;
use thiserror::Error;

/// Why the queue could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AdapterDmaError {
    /// A register or memory access of the CPU failed.
    #[error("access to the DMA engine failed")]
    Access(
        #[from]
        #[source]
        AccessError,
    ),
    /// The BAR does not hold the engine's registers.
    #[error("not an NTB adapter DMA engine: ID reads {0:#x}")]
    NotThisDevice(u64),
    /// A ring size the engine does not take.
    #[error("a queue of {asked} entries: the engine takes 1 to {max}")]
    Entries {
        /// Asked for.
        asked: u64,
        /// The most it takes.
        max: u64,
    },
    /// The engine refused a register write (its ERROR register says why).
    #[error("the DMA engine refused {what}: {}", error.describe())]
    Refused {
        /// What was written.
        what: &'static str,
        /// ERROR.
        error: RegisterError,
    },
    /// Nothing to post.
    #[error("an empty vector of transfers")]
    Empty,
    /// More transfers than the ring has free slots.
    #[error("{asked} transfers do not fit: {free} of the queue's {entries} entries are free")]
    Full {
        /// Transfers posted.
        asked: u64,
        /// Free slots.
        free: u64,
        /// Slots of the ring.
        entries: u64,
    },
    /// A batch that is not the oldest one still to be waited for.
    #[error("transfers {first}..{end} are not the next ones to wait for (that is {next})")]
    OutOfOrder {
        /// The batch's first descriptor.
        first: u64,
        /// Past its last.
        end: u64,
        /// The next descriptor to wait for.
        next: u64,
    },
    /// The engine stopped: it could not reach the ring or write a status back.
    #[error("the DMA queue halted: the engine could not reach its ring")]
    Halted,
}

/// Where a queue's ring and done word live: host memory as the CPU writes it (`cpu`) and as
/// the adapter reaches it (`bus`), [`queue_memory_bytes`] long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueMemory {
    /// The CPU's address.
    pub cpu: PhysAddr,
    /// The adapter's address (32-byte aligned).
    pub bus: BusAddr,
}

/// Where the DMA engine's registers of `adapter` are: its function and its BAR0 (as the
/// host's CPU sees it), if the BAR was assigned.
pub fn engine_registers(
    fabric: &smartio_fabric::Fabric,
    adapter: smartio_fabric::AdapterId,
) -> (smartio_fabric::EndpointId, Option<BusAddr>) {
    let endpoint = fabric.adapter(adapter).endpoint;
    let bar0 = fabric
        .endpoint(endpoint)
        .bars
        .iter()
        .find(|b| b.index == smartio_devices::ntb_dma::spec::REGISTER_BAR)
        .map(|b| b.base);
    (endpoint, bar0)
}

/// Bytes of host memory a queue of `entries` needs: the ring, then the done word.
pub const fn queue_memory_bytes(entries: u64) -> u64 {
    entries * DESCRIPTOR_BYTES + 8
}

/// Transfers posted together: descriptors `first..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// The first descriptor's number.
    pub first: u64,
    /// Past the last one.
    pub end: u64,
}

/// How a queue stands, as `SCIDMAQueueState` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueView {
    /// Nothing posted since the last wait.
    Idle,
    /// Transfers posted and not all done.
    Posted,
    /// Everything posted is done.
    Done,
    /// A transfer failed.
    Error,
    /// Aborted.
    Aborted,
    /// The engine halted.
    Halted,
}

/// A queue on an adapter's DMA engine.
#[derive(Debug)]
pub struct AdapterDmaQueue<P> {
    cpu: P,
    registers: BusAddr,
    memory: QueueMemory,
    entries: u64,
    /// Descriptors posted since the queue was created.
    posted: Cell<u64>,
    /// Descriptors waited for (their slots are free).
    reaped: Cell<u64>,
}

impl<P: Port + Clock + MemoryWatch> AdapterDmaQueue<P> {
    /// Sets up a queue of `entries` on the engine whose adapter's BAR0 is at `bar0` (as the
    /// CPU sees it), with its ring and done word in `memory`.
    pub async fn create(
        cpu: P,
        bar0: BusAddr,
        memory: QueueMemory,
        entries: u64,
    ) -> Result<Self, AdapterDmaError> {
        let registers = bar0.offset(BLOCK);
        let queue = Self {
            cpu,
            registers,
            memory,
            entries,
            posted: Cell::new(0),
            reaped: Cell::new(0),
        };
        let id = queue.load(reg::ID).await?;
        if id != MAGIC {
            return Err(AdapterDmaError::NotThisDevice(id));
        }
        let most = queue.load(reg::CAPS).await? >> 32;
        if entries == 0 || entries > most.min(MAX_RING_ENTRIES) {
            return Err(AdapterDmaError::Entries {
                asked: entries,
                max: most.min(MAX_RING_ENTRIES),
            });
        }
        queue
            .cpu
            .write(queue.done_word(), &0u64.to_le_bytes())
            .await?;
        queue.store(reg::CONTROL, 0).await?;
        queue.store(reg::ERROR, 0).await?;
        let mut setup = Vec::with_capacity(24);
        for v in [
            memory.bus.get(),
            entries,
            memory.bus.get() + entries * DESCRIPTOR_BYTES,
        ] {
            setup.extend_from_slice(&v.to_le_bytes());
        }
        // RING_BASE, RING_ENTRIES and DONE_ADDR are consecutive: one store.
        queue
            .cpu
            .write(registers.offset(reg::RING_BASE), &setup)
            .await?;
        queue.store(reg::CONTROL, control::ENABLE).await?;
        queue.check("the queue's ring").await?;
        Ok(queue)
    }

    /// The CPU that drives the queue.
    pub fn cpu(&self) -> &P {
        &self.cpu
    }

    /// The queue's ring size.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Posts `transfers` together and rings the doorbell.
    pub async fn post(&self, transfers: &[Descriptor]) -> Result<Batch, AdapterDmaError> {
        let asked = transfers.len() as u64;
        if asked == 0 {
            return Err(AdapterDmaError::Empty);
        }
        let first = self.posted.get();
        let free = self.entries - (first - self.reaped.get());
        if asked > free {
            return Err(AdapterDmaError::Full {
                asked,
                free,
                entries: self.entries,
            });
        }
        // Contiguous runs of slots, split where the ring wraps.
        let mut i = 0u64;
        while i < asked {
            let slot = (first + i) % self.entries;
            let run = (asked - i).min(self.entries - slot);
            let mut bytes = Vec::with_capacity((run * DESCRIPTOR_BYTES) as usize);
            for t in &transfers[i as usize..(i + run) as usize] {
                bytes.extend_from_slice(&t.encode());
            }
            self.cpu.write(self.slot(slot), &bytes).await?;
            i += run;
        }
        let end = first + asked;
        self.store(reg::TAIL, end).await?;
        self.check("the doorbell").await?;
        self.posted.set(end);
        Ok(Batch { first, end })
    }

    /// Waits until `batch` (the oldest not waited for) is completed, and returns each
    /// transfer's status in order. Its ring slots are free again afterwards.
    pub async fn wait(&self, batch: Batch) -> Result<Vec<DescriptorStatus>, AdapterDmaError> {
        if batch.first != self.reaped.get() || batch.end > self.posted.get() {
            return Err(AdapterDmaError::OutOfOrder {
                first: batch.first,
                end: batch.end,
                next: self.reaped.get(),
            });
        }
        let done_cpu = PhysAddr(self.memory.cpu.get() + self.entries * DESCRIPTOR_BYTES);
        loop {
            // Arm, then read, then wait if stale: no write is missed.
            let written = self.cpu.written(done_cpu, 8);
            let word = self.done().await?;
            if word & done::HALTED != 0 {
                return Err(AdapterDmaError::Halted);
            }
            if word & done::COUNT >= batch.end {
                break;
            }
            written.await;
        }
        let mut statuses = Vec::with_capacity((batch.end - batch.first) as usize);
        for n in batch.first..batch.end {
            let mut s = [0u8; 4];
            let at = self.slot(n % self.entries).offset(desc::STATUS as u64);
            self.cpu.read(at, &mut s).await?;
            statuses.push(
                DescriptorStatus::from_code(u32::from_le_bytes(s))
                    .unwrap_or(DescriptorStatus::Pending),
            );
        }
        self.reaped.set(batch.end);
        Ok(statuses)
    }

    /// How the queue stands, without waiting.
    pub async fn state(&self) -> Result<QueueView, AdapterDmaError> {
        let word = self.done().await?;
        let state = QueueState::from_code(self.load(reg::STATE).await?);
        Ok(
            if word & done::HALTED != 0 || state == Some(QueueState::Halted) {
                QueueView::Halted
            } else if self.posted.get() == self.reaped.get() {
                QueueView::Idle
            } else if word & done::COUNT < self.posted.get() {
                QueueView::Posted
            } else if word & done::ABORTED != 0 {
                QueueView::Aborted
            } else if word & done::FAILED != 0 {
                QueueView::Error
            } else {
                QueueView::Done
            },
        )
    }

    /// Aborts what is posted: the engine stops reading and completes the rest aborted; wait
    /// for the batches as usual.
    pub async fn abort(&self) -> Result<(), AdapterDmaError> {
        self.store(reg::CONTROL, control::ENABLE | control::ABORT)
            .await
    }

    /// Disables the queue; refused ([`RegisterError::Busy`]) while the engine is busy with
    /// it, and the queue then stays as it was.
    pub async fn remove(&self) -> Result<(), AdapterDmaError> {
        self.store(reg::CONTROL, 0).await?;
        self.check("disabling the queue").await
    }

    fn slot(&self, slot: u64) -> BusAddr {
        BusAddr(self.memory.cpu.get() + slot * DESCRIPTOR_BYTES)
    }

    fn done_word(&self) -> BusAddr {
        BusAddr(self.memory.cpu.get() + self.entries * DESCRIPTOR_BYTES)
    }

    async fn done(&self) -> Result<u64, AdapterDmaError> {
        let mut w = [0u8; 8];
        self.cpu.read(self.done_word(), &mut w).await?;
        Ok(u64::from_le_bytes(w))
    }

    async fn load(&self, register: u64) -> Result<u64, AdapterDmaError> {
        let mut w = [0u8; 8];
        self.cpu
            .read(self.registers.offset(register), &mut w)
            .await?;
        Ok(u64::from_le_bytes(w))
    }

    async fn store(&self, register: u64, value: u64) -> Result<(), AdapterDmaError> {
        self.cpu
            .write(self.registers.offset(register), &value.to_le_bytes())
            .await?;
        Ok(())
    }

    /// Reads ERROR after `what`: a refusal becomes [`AdapterDmaError::Refused`] (and ERROR
    /// is cleared).
    async fn check(&self, what: &'static str) -> Result<(), AdapterDmaError> {
        let code = self.load(reg::ERROR).await?;
        match RegisterError::from_code(code) {
            Some(RegisterError::None) => Ok(()),
            error => {
                self.store(reg::ERROR, 0).await?;
                Err(AdapterDmaError::Refused {
                    what,
                    error: error.unwrap_or(RegisterError::RingUnreachable),
                })
            }
        }
    }
}
