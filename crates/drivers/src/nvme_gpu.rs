//! GPU-initiated NVMe I/O, the libnvm way (Paper V §6.4, Fig. 18): an I/O queue pair of the
//! distributed NVMe driver whose SQ, CQ, PRP lists and data buffers live in GPU memory, and
//! a kernel that drives it with no CPU in the data path — its threads write commands, ring
//! the SQ tail doorbell through the GPU's own port, poll completions in GPU memory and check
//! the data there.
//!
//! ```text
//!   host H: program ── GpuContext(gpu) ── Client ──(control messages)── Manager (NVMe's host)
//!   gpu memory (BAR1 aperture):  [ctl | done/issued/turn | SQ | CQ | PRP lists | data slots]
//!        ▲ SQE fetch, PRP list reads, data and CQE writes: the NVMe, over the NTB when
//!        │ the GPU is in another host (a local device segment mapped for the NVMe)
//!   gpu threads ── doorbell stores ──► the client's map of NVMe BAR0 (dma-mapped for the GPU)
//! ```
//!
//! The kernel: `workers` threads and one reaper (the last thread). A worker takes a ticket
//! (`atomic_add_u64` on a device word), uses SQ slot `ticket % entries` (command id = slot)
//! once that slot's previous user is done, writes the PRP list and the SQE, waits until the
//! "rung" word equals its ticket, stores the new SQ tail into the doorbell, stores
//! `rung = ticket + 1`, waits for `done[slot]`, then checks every byte of its chunk against
//! the namespace's pattern. The reaper polls the phase tag of the CQ head entry (the NVMe's
//! CQE write arrives through BAR1), records the status in `done[cid]`, advances the head and
//! rings the CQ head doorbell. Tickets are handed out in order and doorbells rung in ticket
//! order, so the SQ tail only moves forward.
//!
//! Emulation notes: a real kernel needs `__threadfence_system()` between the SQE stores and
//! the doorbell store; here stores to device memory land before the thread goes on, so the
//! order holds by construction. A worker loads its whole chunk in one access (one
//! `memory_access` of cost), where a real warp would stream it.

use crate::gpu::{DeviceBuffer, GpuContext, GpuError};
use crate::nvme_dist::{Client, DistError};
use smartio_devices::gpu::kernel::{
    FaultReason, KernelFault, KernelFn, KernelFuture, ThreadContext,
};
use smartio_devices::gpu::spec::{self as gpu_spec, GpuAddr};
use smartio_devices::nvme::prp;
use smartio_devices::nvme::spec::io::{BlockRange, IoCommand};
use smartio_devices::nvme::spec::{Command, Completion, CQE_SIZE, SQE_SIZE};
use smartio_host::{DmaDirection, DmaError};
use smartio_machine::Agent;
use smartio_platform::{BusAddr, PhysAddr, PAGE_SIZE};
use smartio_smartio::{PeerRequester, Segment, SmartIo, SmartIoError};
use std::rc::Rc;
use thiserror::Error;

/// Name the kernel is loaded under.
pub const KERNEL_NAME: &str = "smartio.nvme_gpu.read";

/// Words of the control page (device-memory offsets from its start).
pub mod ctl {
    /// Next ticket (`atomic_add_u64`).
    pub const TICKET: u64 = 0;
    /// Tickets whose SQ tail doorbell has been rung.
    pub const RUNG: u64 = 8;
    /// Chunks that failed: an error status, or a byte that differs from the pattern.
    pub const ERRORS: u64 = 16;
    /// Bytes read and found equal to the pattern.
    pub const VERIFIED: u64 = 24;
    /// The first failure: `1 << 63 | status field` for a status, `1 << 62 | byte offset in
    /// the namespace` for a mismatch (0: none).
    pub const FIRST_ERROR: u64 = 32;
    /// Completions the reaper consumed.
    pub const REAPED: u64 = 40;
}

/// Why a GPU queue could not be set up or taken down.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GpuQueueError {
    /// The queues and data buffers do not fit the GPU memory its BAR1 aperture shows.
    #[error(
        "the queues and {entries} data buffers of {chunk} bytes need {len} bytes of GPU memory \
         inside the {aperture}-byte BAR1 aperture; free from {base:#x} there is too little"
    )]
    ApertureTooSmall {
        /// Queue entries (and data buffers) asked for.
        entries: u16,
        /// Bytes of each data buffer.
        chunk: u64,
        /// Bytes the queues and buffers need.
        len: u64,
        /// Bytes of GPU memory the aperture covers.
        aperture: u64,
        /// Where the free GPU memory starts.
        base: u64,
    },
    /// The GPU runtime refused (out of memory, device gone).
    #[error("GPU runtime: {0}")]
    Gpu(#[from] GpuError),
    /// SmartIO refused (a segment, a mapping, a requester-id entry).
    #[error("{0}")]
    SmartIo(#[from] SmartIoError),
    /// The distributed driver refused (no queue pair left, a failed admin command).
    #[error("{0}")]
    Dist(#[from] DistError),
    /// The host's DMA API refused to map the doorbells for the GPU.
    #[error("mapping the NVMe doorbells for the GPU: {0}")]
    Dma(#[from] DmaError),
}

/// Where everything of one GPU queue pair lives, as offsets into device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// First byte (page aligned): the control page.
    pub base: u64,
    /// Queue entries (SQ and CQ alike).
    pub entries: u64,
    /// Bytes per command.
    pub chunk: u64,
}

fn pages(bytes: u64) -> u64 {
    bytes.next_multiple_of(PAGE_SIZE)
}

impl Layout {
    /// `done[slot]`: `(ticket + 1) << 16 | status field` once the reaper saw its completion.
    pub fn done(&self, slot: u64) -> u64 {
        self.base + PAGE_SIZE + 8 * slot
    }
    /// `issued[slot]`: the ticket using the slot.
    pub fn issued(&self, slot: u64) -> u64 {
        self.done(self.entries + slot)
    }
    /// `turn[slot]`: how many tickets have finished with the slot.
    pub fn turn(&self, slot: u64) -> u64 {
        self.done(2 * self.entries + slot)
    }
    /// The SQ.
    pub fn sq(&self) -> u64 {
        self.base + PAGE_SIZE + pages(24 * self.entries)
    }
    /// The CQ.
    pub fn cq(&self) -> u64 {
        self.sq() + pages(SQE_SIZE as u64 * self.entries)
    }
    /// One PRP-list page per slot.
    pub fn prp(&self) -> u64 {
        self.cq() + pages(CQE_SIZE as u64 * self.entries)
    }
    /// One data buffer of `chunk` bytes per slot.
    pub fn data(&self) -> u64 {
        self.prp() + PAGE_SIZE * self.entries
    }
    /// Bytes from the control page to the end of the data buffers.
    pub fn len(&self) -> u64 {
        self.data() + pages(self.chunk) * self.entries - self.base
    }
    /// Bytes the kernel must clear before it starts: control page, slot words and CQ.
    pub fn zeroed_len(&self) -> u64 {
        self.prp() - self.base
    }
    /// Whether the layout is empty (never: it always has a control page).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The namespace's known content: byte `offset` of the namespace is byte `offset % 8` of
/// the little-endian word `mix(seed, offset / 8)`. Fills `buf` with the bytes at `offset`.
pub fn pattern(seed: u64, offset: u64, buf: &mut [u8]) {
    let key = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let word = |w: u64| {
        let mut z = w ^ key;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)).to_le_bytes()
    };
    let mut i = 0usize;
    while i < buf.len() {
        let at = offset + i as u64;
        let skip = (at % 8) as usize;
        let n = (8 - skip).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word(at / 8)[skip..skip + n]);
        i += n;
    }
}

/// What the kernel is told (its parameter block, little-endian u64s in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadParams {
    /// Where everything is in device memory.
    pub layout: Layout,
    /// The SQ's PRP lists as the NVMe reaches them.
    pub prp_bus: u64,
    /// The data buffers as the NVMe reaches them.
    pub data_bus: u64,
    /// The SQ tail doorbell as the GPU reaches it.
    pub sq_doorbell: u64,
    /// The CQ head doorbell as the GPU reaches it.
    pub cq_doorbell: u64,
    /// Commands in all (one chunk each).
    pub commands: u64,
    /// Namespace.
    pub nsid: u64,
    /// First LBA read.
    pub first_lba: u64,
    /// Bytes per LBA.
    pub lba_size: u64,
    /// Seed of the namespace's pattern.
    pub seed: u64,
    /// Worker threads (the reaper is one more).
    pub workers: u64,
}

impl ReadParams {
    const WORDS: usize = 14;

    /// The parameter block.
    pub fn encode(&self) -> Vec<u8> {
        let l = &self.layout;
        [
            l.base,
            l.entries,
            l.chunk,
            self.prp_bus,
            self.data_bus,
            self.sq_doorbell,
            self.cq_doorbell,
            self.commands,
            self.nsid,
            self.first_lba,
            self.lba_size,
            self.seed,
            self.workers,
            0,
        ]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
    }

    /// Reads a parameter block back, or `None` if it is not one.
    pub fn decode(p: &[u8]) -> Option<ReadParams> {
        if p.len() < 8 * Self::WORDS {
            return None;
        }
        let w = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[8 * i..8 * i + 8]);
            u64::from_le_bytes(b)
        };
        let entries = w(1);
        if entries < 2 || w(2) == 0 || w(10) == 0 {
            return None;
        }
        Some(ReadParams {
            layout: Layout {
                base: w(0),
                entries,
                chunk: w(2),
            },
            prp_bus: w(3),
            data_bus: w(4),
            sq_doorbell: w(5),
            cq_doorbell: w(6),
            commands: w(7),
            nsid: w(8),
            first_lba: w(9),
            lba_size: w(10),
            seed: w(11),
            workers: w(12),
        })
    }
}

/// A fault for a parameter block the kernel cannot use (the program wrote it: a bug).
fn bad_params(t: &ThreadContext<Agent>) -> KernelFault {
    KernelFault {
        address: GpuAddr::Device(u64::MAX),
        reason: FaultReason::OutsideMemory {
            memory: t.memory_size(),
        },
    }
}

/// The read kernel: threads `0..workers` are workers, thread `workers` the reaper.
pub fn read_kernel() -> KernelFn<Agent> {
    Rc::new(|t: ThreadContext<Agent>| -> KernelFuture {
        Box::pin(async move {
            let Some(p) = ReadParams::decode(t.params()) else {
                return Err(bad_params(&t));
            };
            if u64::from(t.thread()) == p.workers {
                reaper(&t, &p).await
            } else {
                worker(&t, &p).await
            }
        })
    })
}

/// Records a failure: counts it, and keeps the first.
async fn fail(t: &ThreadContext<Agent>, l: &Layout, what: u64) -> Result<(), KernelFault> {
    t.atomic_add_u64(l.base + ctl::ERRORS, 1).await?;
    let first = l.base + ctl::FIRST_ERROR;
    if t.load_u64(GpuAddr::Device(first)).await? == 0 {
        t.store_u64(GpuAddr::Device(first), what).await?;
    }
    Ok(())
}

async fn worker(t: &ThreadContext<Agent>, p: &ReadParams) -> Result<(), KernelFault> {
    let l = &p.layout;
    let blocks = l.chunk / p.lba_size;
    let bad = || bad_params(t);
    // One chunk read back and its expected bytes, reused by every command of the thread.
    let mut got = vec![0u8; l.chunk as usize];
    let mut want = vec![0u8; l.chunk as usize];
    loop {
        let ticket = t.atomic_add_u64(l.base + ctl::TICKET, 1).await?;
        if ticket >= p.commands {
            return Ok(());
        }
        let slot = ticket % l.entries;
        let turn = ticket / l.entries;
        // The slot's previous user has checked its data.
        t.wait_until(l.turn(slot), |v| v == turn).await?;
        let lba = p.first_lba + ticket * blocks;
        let data_bus = p.data_bus + slot * pages(l.chunk);
        let list_bus = p.prp_bus + slot * PAGE_SIZE;
        let prps = prp::build(data_bus, l.chunk, &[list_bus]).map_err(|_| bad())?;
        if let Some(list) = prps.lists.first() {
            t.store(GpuAddr::Device(l.prp() + slot * PAGE_SIZE), &list.bytes())
                .await?;
        }
        let range = BlockRange::new(
            u32::try_from(p.nsid).map_err(|_| bad())?,
            lba,
            u32::try_from(blocks).map_err(|_| bad())?,
        );
        let mut cmd = Command::from(IoCommand::Read(range)).with_prps(prps.prp1, prps.prp2);
        cmd.cid = slot as u16;
        t.store(
            GpuAddr::Device(l.sq() + slot * SQE_SIZE as u64),
            &cmd.encode(),
        )
        .await?;
        t.store_u64(GpuAddr::Device(l.issued(slot)), ticket).await?;
        // Doorbells in ticket order: the tail only moves forward.
        t.wait_until(l.base + ctl::RUNG, |v| v == ticket).await?;
        let tail = ((ticket + 1) % l.entries) as u32;
        t.store(GpuAddr::Bus(BusAddr(p.sq_doorbell)), &tail.to_le_bytes())
            .await?;
        t.store_u64(GpuAddr::Device(l.base + ctl::RUNG), ticket + 1)
            .await?;
        let done = t
            .wait_until(l.done(slot), |v| v >> 16 == ticket + 1)
            .await?;
        let status = done & 0xffff;
        if status != 0 {
            fail(t, l, 1 << 63 | status).await?;
        } else {
            t.load(GpuAddr::Device(l.data() + slot * pages(l.chunk)), &mut got)
                .await?;
            let at = lba * p.lba_size;
            pattern(p.seed, at, &mut want);
            match got.iter().zip(&want).position(|(a, b)| a != b) {
                Some(i) => fail(t, l, 1 << 62 | (at + i as u64)).await?,
                None => {
                    t.atomic_add_u64(l.base + ctl::VERIFIED, l.chunk).await?;
                }
            }
        }
        t.store_u64(GpuAddr::Device(l.turn(slot)), turn + 1).await?;
    }
}

async fn reaper(t: &ThreadContext<Agent>, p: &ReadParams) -> Result<(), KernelFault> {
    let l = &p.layout;
    let (mut head, mut phase) = (0u64, true);
    for _ in 0..p.commands {
        let entry = l.cq() + head * CQE_SIZE as u64;
        // Dword 3's phase tag is bit 16: bit 48 of the entry's second quadword.
        t.wait_until(entry + 8, |v| (v >> 48) & 1 == u64::from(phase))
            .await?;
        let mut raw = [0u8; CQE_SIZE];
        t.load(GpuAddr::Device(entry), &mut raw).await?;
        let c = Completion::decode(&raw);
        let slot = u64::from(c.cid);
        if slot >= l.entries {
            return Err(bad_params(t));
        }
        let ticket = t.load_u64(GpuAddr::Device(l.issued(slot))).await?;
        let status = u64::from(c.status.with_phase(false));
        t.store_u64(GpuAddr::Device(l.done(slot)), (ticket + 1) << 16 | status)
            .await?;
        head += 1;
        if head == l.entries {
            head = 0;
            phase = !phase;
        }
        t.store(
            GpuAddr::Bus(BusAddr(p.cq_doorbell)),
            &(head as u32).to_le_bytes(),
        )
        .await?;
        t.atomic_add_u64(l.base + ctl::REAPED, 1).await?;
    }
    Ok(())
}

/// A queue pair of the distributed driver living in GPU memory, driven by the GPU.
#[derive(Debug)]
pub struct GpuQueue {
    /// Queue id the manager gave.
    pub qid: u16,
    /// Where everything is in device memory.
    pub layout: Layout,
    /// The GPU memory segment (a local device segment over BAR1).
    segment: Segment,
    /// What `malloc` gave.
    buffer: DeviceBuffer,
    /// Where the NVMe reaches the segment's first byte.
    nvme_base: BusAddr,
    /// Where the GPU reaches NVMe BAR0's first byte (its DMA mapping of the client's map).
    gpu_regs: BusAddr,
    /// The GPU's registration as a peer requester of its host.
    requester: PeerRequester,
}

impl GpuQueue {
    /// Places a queue pair of `entries` entries with `entries` data buffers of `chunk` bytes
    /// in the memory of `gpu` (named `gpu_name` in the client's host), maps it for the NVMe
    /// `client` holds, makes the doorbells reachable by the GPU and asks the manager for the
    /// pair.
    pub async fn create(
        smartio: &SmartIo,
        client: &Client,
        gpu: &GpuContext,
        gpu_name: &str,
        entries: u16,
        chunk: u64,
    ) -> Result<GpuQueue, GpuQueueError> {
        let mut taken = Taken::default();
        let made = Self::take(smartio, client, gpu, gpu_name, entries, chunk, &mut taken).await;
        if made.is_err() {
            taken.give_back(smartio, client, gpu).await;
        }
        made
    }

    /// The steps of [`GpuQueue::create`], each recording in `taken` what it took.
    async fn take(
        smartio: &SmartIo,
        client: &Client,
        gpu: &GpuContext,
        gpu_name: &str,
        entries: u16,
        chunk: u64,
        taken: &mut Taken,
    ) -> Result<GpuQueue, GpuQueueError> {
        let host = client.os().id();
        let probe = Layout {
            base: 0,
            entries: u64::from(entries),
            chunk,
        };
        let len = probe.len();
        let buffer = *taken.buffer.insert(gpu.malloc(len + PAGE_SIZE)?);
        let base = buffer.offset.next_multiple_of(PAGE_SIZE);
        let layout = Layout { base, ..probe };
        let aperture = gpu.properties().aperture;
        if base + len > aperture {
            return Err(GpuQueueError::ApertureTooSmall {
                entries,
                chunk,
                len,
                aperture,
                base,
            });
        }
        let segment = *taken.segment.insert(smartio.local_device_segment(
            host,
            gpu_name,
            gpu_spec::APERTURE_BAR,
            base,
            len,
        )?);
        let nvme_base = smartio.map_for_device(&client.hold(), &segment)?;
        taken.mapped = true;
        let at = |off: u64| nvme_base.offset(off - base);
        let qid = *taken.qid.insert(
            client
                .create_queue_at(entries, at(layout.sq()), at(layout.cq()))
                .await?,
        );
        let regs = client.registers();
        let gpu_regs = *taken.gpu_regs.insert(gpu.handle().dma_map(
            PhysAddr(regs.addr.get()),
            regs.size,
            DmaDirection::Bidirectional,
        )?);
        let requester = smartio.register_peer_requester(host, gpu_name)?;
        // Everything is the queue's now.
        *taken = Taken::default();
        Ok(GpuQueue {
            qid,
            layout,
            segment,
            buffer,
            nvme_base,
            gpu_regs,
            requester,
        })
    }

    /// The kernel's parameters for reading `commands` chunks from LBA `first_lba` of
    /// namespace `nsid` (`lba_size` bytes per LBA, pattern `seed`) with `workers` workers.
    #[allow(clippy::too_many_arguments)]
    pub fn read_params(
        &self,
        client: &Client,
        commands: u64,
        nsid: u32,
        first_lba: u64,
        lba_size: u64,
        seed: u64,
        workers: u32,
    ) -> ReadParams {
        let l = &self.layout;
        let at = |off: u64| self.nvme_base.get() + (off - l.base);
        let (sq_db, cq_db) = client.manager().doorbells(self.qid);
        ReadParams {
            layout: *l,
            prp_bus: at(l.prp()),
            data_bus: at(l.data()),
            sq_doorbell: self.gpu_regs.get() + sq_db,
            cq_doorbell: self.gpu_regs.get() + cq_db,
            commands,
            nsid: u64::from(nsid),
            first_lba,
            lba_size,
            seed,
            workers: u64::from(workers),
        }
    }

    /// Where the GPU reaches the SQ tail doorbell.
    pub fn sq_doorbell(&self, client: &Client) -> BusAddr {
        self.gpu_regs.offset(client.manager().doorbells(self.qid).0)
    }

    /// Deletes the pair and gives back everything [`GpuQueue::create`] took.
    pub async fn destroy(
        self,
        smartio: &SmartIo,
        client: &Client,
        gpu: &GpuContext,
    ) -> Result<(), GpuQueueError> {
        client.delete_queue_at(self.qid).await?;
        smartio.unregister_peer_requester(self.requester)?;
        gpu.handle().dma_unmap(self.gpu_regs)?;
        smartio.unmap_device(&client.hold(), &self.segment)?;
        smartio.remove_segment(self.segment)?;
        gpu.free(&self.buffer)?;
        Ok(())
    }
}

/// What [`GpuQueue::create`] took before a later step failed, given back in reverse order.
#[derive(Default)]
struct Taken {
    buffer: Option<DeviceBuffer>,
    segment: Option<Segment>,
    mapped: bool,
    qid: Option<u16>,
    gpu_regs: Option<BusAddr>,
}

impl Taken {
    /// Gives everything back; a step that fails here is skipped (the creation's own error
    /// is the one the caller sees).
    async fn give_back(self, smartio: &SmartIo, client: &Client, gpu: &GpuContext) {
        if let Some(regs) = self.gpu_regs {
            let _ = gpu.handle().dma_unmap(regs);
        }
        if let Some(qid) = self.qid {
            let _ = client.delete_queue_at(qid).await;
        }
        if let Some(segment) = self.segment {
            if self.mapped {
                let _ = smartio.unmap_device(&client.hold(), &segment);
            }
            let _ = smartio.remove_segment(segment);
        }
        if let Some(buffer) = self.buffer {
            let _ = gpu.free(&buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_keeps_queues_page_aligned_and_apart() {
        let l = Layout {
            base: 0x3000,
            entries: 64,
            chunk: 65536,
        };
        for off in [l.sq(), l.cq(), l.prp(), l.data()] {
            assert_eq!(off % PAGE_SIZE, 0);
        }
        assert!(l.turn(63) + 8 <= l.sq());
        assert_eq!(l.cq() - l.sq(), 4096);
        assert_eq!(l.len(), l.data() + 64 * 65536 - 0x3000);
    }

    #[test]
    fn parameters_survive_the_block_and_a_short_block_is_refused() {
        let p = ReadParams {
            layout: Layout {
                base: 4096,
                entries: 64,
                chunk: 65536,
            },
            prp_bus: 1,
            data_bus: 2,
            sq_doorbell: 3,
            cq_doorbell: 4,
            commands: 5,
            nsid: 1,
            first_lba: 7,
            lba_size: 512,
            seed: 9,
            workers: 32,
        };
        assert_eq!(ReadParams::decode(&p.encode()), Some(p));
        assert_eq!(ReadParams::decode(&p.encode()[..100]), None);
    }

    #[test]
    fn the_pattern_is_the_same_byte_whatever_the_window() {
        let mut whole = vec![0u8; 100];
        pattern(3, 1000, &mut whole);
        let mut part = vec![0u8; 10];
        pattern(3, 1045, &mut part);
        assert_eq!(&whole[45..55], &part[..]);
        let mut other = vec![0u8; 100];
        pattern(4, 1000, &mut other);
        assert_ne!(whole, other);
    }
}
