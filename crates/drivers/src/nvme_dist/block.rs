//! The kernel-space client of the distributed NVMe driver (seed 003 §V, its "client" kernel
//! module): a disk of its host's block layer backed by I/O queue pairs the manager creates
//! for it.
//!
//! ```text
//!   program ── syscall ── block layer ── queue_rq(hardware queue h)
//!                                          │ slot ← bounce buffer (waits when none is free)
//!                                          │ write: memcpy program buffer → slot
//!                                          │ SQE with PRPs into the slot → SQ, doorbell
//!                                          │   … the poller of queue pair h finds the CQE …
//!                                          │ read: memcpy slot → program buffer
//!                                          │ slot → bounce buffer
//!   program ◄──────────── block layer ◄────┘
//! ```
//!
//! - Bootstrap: the client reads the manager's published segment ([`Publication`]: where the
//!   manager runs, the controller's largest transfer, entries per queue, namespaces), asks
//!   the manager for one queue pair per hardware queue — the SQ placed by its hints, in
//!   memory next to the controller (seed 003 Fig. 8), the CQ in its own RAM — and registers
//!   a disk with the host's block layer ([`smartio_host::block`]), which maps CPUs onto the
//!   hardware queues.
//! - Data: the block layer hands the driver arbitrary program buffers, and mapping them for
//!   the controller through the NTB per request is not feasible, so every request goes
//!   through a slot of the bounce buffer (`bounce`): one copy per request, on the
//!   submission path for a write and on the completion path for a read.
//! - Completions are polled, as the device API gives no device interrupts: one poller per
//!   queue pair reads its CQ every `[cpu] poll_interval_ns` while it has requests
//!   outstanding, and hands each completion to its request.

use super::bounce::{Bounce, CopyError, Slots};
use super::publication::Publication;
use super::{BadRequest, Client, ClientQueue, DistError, Manager, SqPlacement};
use crate::nvme::{BlockOp, NamespaceInfo, QueuePair};
use smartio_devices::nvme::spec::io::BlockRange;
use smartio_devices::nvme::spec::{Command, Completion, Status};
use smartio_host::{
    BlockDevice, BlockDriver, BlockError, BlockRequest, BoxFuture, Geometry, HostOs, IoError, ReqOp,
};
use smartio_platform::{
    race, AccessError, Broadcast, Clock, Either, Notify, SimDuration, PAGE_SIZE,
};
use smartio_smartio::{Fdid, Hints, SegmentLocation, SmartIo};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use thiserror::Error;

/// The driver's name in the block layer.
pub const DRIVER_NAME: &str = "nvme-dist-block";

/// The block client's settings (its module parameters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockClientConfig {
    /// The disk's name in the host's block layer.
    pub disk: String,
    /// The namespace the disk is.
    pub nsid: u32,
    /// Hardware queues, one I/O queue pair each (at most what the manager has left).
    pub hw_queues: u16,
    /// Requests each hardware queue takes at once; its queue pair has one entry more.
    pub queue_depth: u16,
    /// Bounce-buffer slots, 1 to `hw_queues × queue_depth`; `None`: one per request the
    /// queues take at once.
    pub slots: Option<u32>,
    /// Bytes per slot — the disk's largest request — a whole number of 4 KiB pages up to
    /// the controller's largest transfer; `None`: the controller's largest transfer.
    pub slot_bytes: Option<u64>,
}

impl BlockClientConfig {
    /// A disk `disk` of namespace 1 with `hw_queues` hardware queues of `queue_depth`, one
    /// slot per request and slots of the controller's largest transfer.
    pub fn new(disk: &str, hw_queues: u16, queue_depth: u16) -> BlockClientConfig {
        BlockClientConfig {
            disk: disk.to_string(),
            nsid: 1,
            hw_queues,
            queue_depth,
            slots: None,
            slot_bytes: None,
        }
    }
}

/// Why the block client could not start, or failed a request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BlockClientError {
    /// The distributed driver refused (no manager, no queue pair left, a segment).
    #[error(transparent)]
    Dist(#[from] DistError),
    /// A setting outside its range.
    #[error("{field} = {value}: {allowed}")]
    Config {
        /// The setting.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it may be.
        allowed: String,
    },
    /// The controller has no such namespace.
    #[error("the controller has no namespace {nsid} (active: {known})")]
    NoNamespace {
        /// Asked for.
        nsid: u32,
        /// The namespaces it has.
        known: String,
    },
    /// The host's block layer refused the disk.
    #[error(transparent)]
    Disk(#[from] BlockError),
    /// The bounce buffer is not in this host's RAM (the CPU copies through it).
    #[error("the bounce buffer is at {location}, not in the RAM of the client's host")]
    BounceNotLocal {
        /// Where SmartIO put it.
        location: String,
    },
    /// The controller completed a request with an error status.
    #[error("queue pair {qid}: {op:?} of {blocks} blocks at LBA {lba} failed: {status}")]
    Command {
        /// The queue pair.
        qid: u16,
        /// Read or write.
        op: ReqOp,
        /// First block.
        lba: u64,
        /// Blocks.
        blocks: u32,
        /// What the controller answered.
        status: Status,
    },
    /// Writing the command or ringing the doorbell failed.
    #[error("queue pair {qid}: submit: {source}")]
    Submit {
        /// The queue pair.
        qid: u16,
        /// The access error.
        source: AccessError,
    },
    /// The queue pair's completion poller stopped on an access error; the command's tag
    /// stays taken, as the controller may still complete it.
    #[error("queue pair {qid}: its completion poller stopped: {source}")]
    PollerStopped {
        /// The queue pair.
        qid: u16,
        /// Why the poller stopped.
        source: AccessError,
    },
    /// A copy between the program's buffer and its slot touched memory the kernel lacks.
    #[error("bounce copy from {from} to {to}: {why}")]
    Copy {
        /// Source.
        from: smartio_platform::PhysAddr,
        /// Destination.
        to: smartio_platform::PhysAddr,
        /// Why.
        #[source]
        why: smartio_host::GuestMemoryError,
    },
    /// A request for a hardware queue the disk does not have (the block layer's bug).
    #[error("hardware queue {hw_queue} of {queues}")]
    NoQueue {
        /// Asked for.
        hw_queue: u16,
        /// The disk's hardware queues.
        queues: u16,
    },
}

impl From<CopyError> for BlockClientError {
    fn from(e: CopyError) -> Self {
        BlockClientError::Copy {
            from: e.from,
            to: e.to,
            why: e.why,
        }
    }
}

/// What the block client did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockClientStats {
    /// Requests that reached the driver.
    pub requests: u64,
    /// Requests that found no bounce slot free and waited for one.
    pub slot_waits: u64,
    /// Bytes copied through the bounce buffer (both directions).
    pub bytes_copied: u64,
    /// Completion-queue polls of all pollers.
    pub polls: u64,
}

/// The completion poller of one queue pair: while requests are outstanding it reaps the CQ
/// every poll interval (a completion goes to its request's tag).
struct Poller {
    outstanding: Cell<u32>,
    /// Work arrived (or the client stops).
    wake: Notify,
    stop: Cell<bool>,
    failed: RefCell<Option<AccessError>>,
    failure: Broadcast,
    polls: Cell<u64>,
}

impl Poller {
    fn new() -> Poller {
        Poller {
            outstanding: Cell::new(0),
            wake: Notify::new(),
            stop: Cell::new(false),
            failed: RefCell::new(None),
            failure: Broadcast::new("its queue pair's completion poller to stop"),
            polls: Cell::new(0),
        }
    }

    /// The poller's task: idle until work comes, then one CQ reap per `interval` (a reap
    /// that takes longer starts the next one at once) until nothing is outstanding.
    async fn run(self: Rc<Self>, queue: Rc<ClientQueue>) {
        loop {
            while self.outstanding.get() == 0 {
                if self.stop.get() {
                    return;
                }
                self.wake.notified().await;
            }
            // The core spins on the CQ's head entry, a cached line, until the device's
            // write lands in it: armed before the reap, so an entry landing meanwhile is
            // seen at once, and found by the load after it lands.
            let landed = queue.pair.head_written();
            let reaped = match queue.pair.reap().await {
                Ok(n) => n,
                Err(e) => {
                    *self.failed.borrow_mut() = Some(e);
                    self.failure.fire();
                    return;
                }
            };
            self.polls.set(self.polls.get() + 1);
            if reaped == 0 && self.outstanding.get() > 0 {
                race(landed, self.wake.notified()).await;
            }
        }
    }

    /// One more request outstanding: the poller starts if it was idle.
    fn begin(&self) {
        self.outstanding.set(self.outstanding.get() + 1);
        self.wake.notify();
    }

    fn end(&self) {
        self.outstanding
            .set(self.outstanding.get().saturating_sub(1));
    }

    /// `tag`'s completion as the poller hands it over, or the poller's failure.
    async fn wait(&self, pair: &QueuePair, tag: u16) -> Result<Completion, AccessError> {
        loop {
            if let Some(e) = self.failed.borrow().clone() {
                return Err(e);
            }
            let armed = self.failure.generation();
            match race(pair.wait_interrupt(tag), self.failure.fired_since(armed)).await {
                Either::Left(c) => return Ok(c),
                Either::Right(()) => continue,
            }
        }
    }

    fn stop(&self) {
        self.stop.set(true);
        self.wake.notify();
    }
}

struct HwQueue {
    queue: Rc<ClientQueue>,
    poller: Rc<Poller>,
}

struct Inner {
    os: HostOs,
    nsid: u32,
    geometry: Geometry,
    queues: Vec<HwQueue>,
    slots: Slots,
    bounce: Bounce,
    requests: Cell<u64>,
    bytes_copied: Cell<u64>,
}

/// The block layer's view of the client: requests arrive here.
struct Disk(Rc<Inner>);

impl BlockDriver for Disk {
    fn driver(&self) -> &str {
        DRIVER_NAME
    }

    fn geometry(&self) -> Geometry {
        self.0.geometry
    }

    fn queue_rq(&self, hw_queue: u16, rq: BlockRequest) -> BoxFuture<Result<(), IoError>> {
        let inner = self.0.clone();
        Box::pin(async move { inner.request(hw_queue, rq).await.map_err(IoError::from) })
    }
}

impl Inner {
    /// One request on hardware queue `hw` (checked by the block layer against the disk).
    async fn request(&self, hw: u16, rq: BlockRequest) -> Result<(), BlockClientError> {
        let hq = self
            .queues
            .get(usize::from(hw))
            .ok_or(BlockClientError::NoQueue {
                hw_queue: hw,
                queues: self.geometry.hw_queues,
            })?;
        self.requests.set(self.requests.get() + 1);
        let len = u64::from(rq.blocks) * u64::from(self.geometry.lba_size);
        let slot = self.slots.acquire().await;
        let done = self.through_slot(hq, slot, rq, len).await;
        self.slots.release(slot);
        done
    }

    async fn through_slot(
        &self,
        hq: &HwQueue,
        slot: u32,
        rq: BlockRequest,
        len: u64,
    ) -> Result<(), BlockClientError> {
        let qid = hq.queue.qid();
        if rq.op == ReqOp::Write {
            self.bounce.copy_in(&self.os, rq.buffer, slot, len).await?;
            self.bytes_copied.set(self.bytes_copied.get() + len);
        }
        let (prp1, prp2) = self.bounce.prps(slot, len)?;
        let op = match rq.op {
            ReqOp::Read => BlockOp::Read,
            ReqOp::Write => BlockOp::Write,
        };
        let cmd = Command::from(op.command(BlockRange::new(self.nsid, rq.lba, rq.blocks)))
            .with_prps(prp1, prp2);
        let pair = &hq.queue.pair;
        let tag = pair.acquire().await;
        hq.poller.begin();
        if let Err(source) = pair.submit(tag, cmd).await {
            hq.poller.end();
            pair.release(tag);
            return Err(BlockClientError::Submit { qid, source });
        }
        let completion = hq.poller.wait(pair, tag).await;
        hq.poller.end();
        // The request's thread slept in the block layer while the poller (another thread)
        // found its completion; the poller's completion wakes it, as an interrupt handler's
        // would.
        let cpu = self.os.cpu();
        let wakeup = cpu.machine().cpu_timing().wakeup;
        cpu.spend("scheduler: wake the waiting thread", wakeup)
            .await;
        let c = completion.map_err(|source| BlockClientError::PollerStopped { qid, source })?;
        pair.release(tag);
        if !c.status.is_success() {
            return Err(BlockClientError::Command {
                qid,
                op: rq.op,
                lba: rq.lba,
                blocks: rq.blocks,
                status: c.status,
            });
        }
        if rq.op == ReqOp::Read {
            self.bounce.copy_out(&self.os, slot, rq.buffer, len).await?;
            self.bytes_copied.set(self.bytes_copied.get() + len);
        }
        Ok(())
    }
}

/// The settings checked against what the manager published.
struct Plan {
    ns: NamespaceInfo,
    slots: u32,
    slot_bytes: u64,
}

impl Plan {
    fn of(config: &BlockClientConfig, p: &Publication) -> Result<Plan, BlockClientError> {
        let bad = |field, value: u64, allowed: String| {
            Err(BlockClientError::Config {
                field,
                value,
                allowed,
            })
        };
        let ns = p
            .namespace(config.nsid)
            .ok_or_else(|| BlockClientError::NoNamespace {
                nsid: config.nsid,
                known: p
                    .namespaces
                    .iter()
                    .map(|n| n.nsid.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let most_depth = p.max_entries.saturating_sub(1);
        if config.queue_depth == 0 || u32::from(config.queue_depth) > most_depth {
            return bad(
                "queue_depth",
                u64::from(config.queue_depth),
                format!(
                    "1 to {most_depth} (the controller's queues have {} entries, one always empty)",
                    p.max_entries
                ),
            );
        }
        if config.hw_queues == 0 || config.hw_queues > p.granted {
            return bad(
                "hw_queues",
                u64::from(config.hw_queues),
                format!(
                    "1 to {} (one I/O queue pair each; the controller granted {})",
                    p.granted, p.granted
                ),
            );
        }
        let requests = u32::from(config.hw_queues) * u32::from(config.queue_depth);
        let slots = config.slots.unwrap_or(requests);
        if slots == 0 || slots > requests {
            return bad(
                "slots",
                u64::from(slots),
                format!("1 to {requests} (hw_queues × queue_depth: one per request at most)"),
            );
        }
        let lba = u64::from(ns.lba_size);
        let slot_bytes = config.slot_bytes.unwrap_or(p.max_transfer);
        let unit = lba.max(PAGE_SIZE);
        if slot_bytes < unit || !slot_bytes.is_multiple_of(unit) || slot_bytes > p.max_transfer {
            return bad(
                "slot_bytes",
                slot_bytes,
                format!(
                    "a multiple of {unit} up to {} (whole pages and blocks, at most the controller's largest transfer)",
                    p.max_transfer
                ),
            );
        }
        Ok(Plan {
            ns,
            slots,
            slot_bytes,
        })
    }
}

/// The kernel-space client: a disk of its host backed by the shared controller.
pub struct BlockClient {
    inner: Rc<Inner>,
    client: Client,
    disk: BlockDevice,
}

impl std::fmt::Debug for BlockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockClient")
            .field("disk", &self.disk)
            .field("slots", &self.inner.bounce.slots)
            .field("slot_bytes", &self.inner.bounce.slot_bytes)
            .finish()
    }
}

impl BlockClient {
    /// Loads the client on `os`'s host for controller `fdid` managed by `manager`: it
    /// bootstraps from the manager's published segment, maps a bounce buffer of `slots ×
    /// slot_bytes` for the controller and writes the slots' PRP lists, gets a queue pair
    /// per hardware queue, starts their pollers and registers the disk. What was set up
    /// before a refusal is given back.
    pub async fn start(
        smartio: &SmartIo,
        os: &HostOs,
        fdid: Fdid,
        manager: &Rc<Manager>,
        config: &BlockClientConfig,
    ) -> Result<BlockClient, BlockClientError> {
        let costs = os.machine().cpu_timing();
        if costs.poll_interval == SimDuration::ZERO && costs.memory_read == SimDuration::ZERO {
            return Err(BlockClientError::Config {
                field: "[cpu] poll_interval_ns",
                value: 0,
                allowed: "more than 0 while [cpu] memory_read_ns is 0 (a poller that takes no time would stop virtual time)".into(),
            });
        }
        let mut plan = None;
        let client = Client::connect_sized(smartio, os, fdid, manager, None, |p| {
            let chosen = Plan::of(config, p)?;
            let size = u64::from(chosen.slots) * chosen.slot_bytes;
            plan = Some(chosen);
            Ok::<u64, BlockClientError>(size)
        })
        .await?;
        let Some(plan) = plan else {
            // connect_sized returns a client only after the closure said yes.
            let _ = client.leave().await;
            return Err(DistError::BadRequest(BadRequest::NoPlan).into());
        };
        match Self::set_up(os, client, config, plan).await {
            Ok(started) => Ok(started),
            Err((client, e)) => {
                let _ = client.leave().await;
                Err(e)
            }
        }
    }

    /// Everything after joining; on a refusal the client comes back to be left.
    async fn set_up(
        os: &HostOs,
        client: Client,
        config: &BlockClientConfig,
        plan: Plan,
    ) -> Result<BlockClient, (Client, BlockClientError)> {
        let phys = match client.data_location() {
            SegmentLocation::Ram { host, phys } if host == os.id() => phys,
            other => {
                let location = format!("{other:?}");
                return Err((client, BlockClientError::BounceNotLocal { location }));
            }
        };
        let lists = if Bounce::needs_lists(plan.slot_bytes) {
            let hints = Hints {
                device_reads: true,
                host_reads: true,
                host_writes: true,
                ..Hints::default()
            };
            match client.extra_segment(u64::from(plan.slots) * PAGE_SIZE, hints) {
                Ok(l) => Some(l),
                Err(e) => return Err((client, e.into())),
            }
        } else {
            None
        };
        let bounce = Bounce {
            cpu: phys,
            bus: client.data_device_addr(),
            slot_bytes: plan.slot_bytes,
            slots: plan.slots,
            lists,
        };
        if let Err(e) = bounce.program(os).await {
            return Err((client, e.into()));
        }
        let mut queues = Vec::new();
        for _ in 0..config.hw_queues {
            match client
                .create_queue(config.queue_depth + 1, SqPlacement::Hints)
                .await
            {
                Ok(queue) => queues.push(HwQueue {
                    queue,
                    poller: Rc::new(Poller::new()),
                }),
                Err(e) => return Err((client, e.into())),
            }
        }
        let inner = Rc::new(Inner {
            os: os.clone(),
            nsid: plan.ns.nsid,
            geometry: Geometry {
                lba_size: plan.ns.lba_size,
                blocks: plan.ns.blocks,
                max_transfer: plan.slot_bytes,
                hw_queues: config.hw_queues,
                queue_depth: u32::from(config.queue_depth),
            },
            queues,
            slots: Slots::new(plan.slots),
            bounce,
            requests: Cell::new(0),
            bytes_copied: Cell::new(0),
        });
        let disk = match os.register_disk(&config.disk, Rc::new(Disk(inner.clone()))) {
            Ok(disk) => disk,
            Err(e) => return Err((client, e.into())),
        };
        for hq in &inner.queues {
            let task = hq.poller.clone().run(hq.queue.clone());
            os.machine().spawn(task);
        }
        Ok(BlockClient {
            inner,
            client,
            disk,
        })
    }

    /// The disk, as programs open it (also [`HostOs::disk`] by its name).
    pub fn disk(&self) -> &BlockDevice {
        &self.disk
    }

    /// What the client bootstrapped from.
    pub fn publication(&self) -> &Publication {
        self.client.publication()
    }

    /// The queue ids of its queue pairs, by hardware queue.
    pub fn queue_ids(&self) -> Vec<u16> {
        self.inner.queues.iter().map(|q| q.queue.qid()).collect()
    }

    /// Where each queue pair's SQ is (by its hints: next to the controller).
    pub fn sq_locations(&self) -> Vec<SegmentLocation> {
        self.inner
            .queues
            .iter()
            .map(|q| q.queue.sq_location())
            .collect()
    }

    /// Bounce slots and bytes per slot.
    pub fn slots(&self) -> (u32, u64) {
        (self.inner.bounce.slots, self.inner.bounce.slot_bytes)
    }

    /// Slots free now.
    pub fn free_slots(&self) -> usize {
        self.inner.slots.free()
    }

    /// What the client did so far.
    pub fn stats(&self) -> BlockClientStats {
        BlockClientStats {
            requests: self.inner.requests.get(),
            slot_waits: self.inner.slots.waits(),
            bytes_copied: self.inner.bytes_copied.get(),
            polls: self.inner.queues.iter().map(|q| q.poller.polls.get()).sum(),
        }
    }

    /// Unloads the client (no request may be in flight): the disk is unregistered, the
    /// pollers stop, and the queue pairs, segments and hold go back through the manager.
    pub async fn stop(self) -> Result<(), BlockClientError> {
        let unregistered = self.inner.os.unregister_disk(self.disk.name());
        for hq in &self.inner.queues {
            hq.poller.stop();
        }
        drop(self.disk);
        drop(self.inner);
        self.client.leave().await?;
        unregistered?;
        Ok(())
    }
}
