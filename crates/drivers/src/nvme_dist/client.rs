//! A client of the distributed NVMe driver: its own queue pairs, doorbells rung through its
//! mapping of the controller's BAR, completions polled in its own RAM, data by DMA straight
//! into its data segment.

use super::manager::{mapped_segment_of, Manager, Mapped, MANAGER_SEGMENT};
use super::publication::{Publication, PublicationError, HEADER_BYTES, NAMESPACE_BYTES};
use super::{access, BadRequest, DistError};
use crate::nvme::{BlockOp, QueuePair};
use smartio_devices::nvme::prp;
use smartio_devices::nvme::spec::io::{BlockRange, DsmRange};
use smartio_devices::nvme::spec::{Command, CQE_SIZE, SQE_SIZE};
use smartio_host::{BarWindow, DmaBuffer, HostOs, Mmio};
use smartio_platform::{BusAddr, PhysAddr, Port, PAGE_SIZE};
use smartio_smartio::{CpuMap, DeviceBorrow, Fdid, Hints, SmartIo};
use std::cell::RefCell;
use std::rc::Rc;

/// Where a client puts a submission queue (the `sq-placement` experiment compares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqPlacement {
    /// Wherever SmartIO's hints place a queue the device reads and the client writes.
    Hints,
    /// The client's own RAM.
    ClientRam,
    /// The lender's RAM, next to the device.
    LenderRam,
    /// Device memory (an NVMe controller memory buffer), falling back as the hints do.
    DeviceMemory,
    /// The memory of another device the client holds through the API, such as a GPU next to
    /// the controller (placed by that device's hints, so in its memory BAR when it has one).
    Peer(DeviceBorrow),
}

impl SqPlacement {
    fn hints(self) -> Hints {
        let base = Hints {
            device_reads: true,
            host_writes: true,
            ..Hints::default()
        };
        match self {
            SqPlacement::Hints | SqPlacement::DeviceMemory | SqPlacement::Peer(_) => base,
            SqPlacement::ClientRam => Hints {
                host_reads: true,
                ..base
            },
            SqPlacement::LenderRam => Hints {
                host_reads: true,
                multi_host: true,
                ..base
            },
        }
    }
}

/// One of a client's queue pairs.
#[derive(Debug)]
pub struct ClientQueue {
    /// The queue pair (its id is `pair.qid`).
    pub pair: QueuePair,
    /// Where the SQ is (segment and addresses).
    sq: Mapped,
    cq: Mapped,
    /// One PRP-list page per tag.
    prp: Mapped,
}

impl ClientQueue {
    /// Queue id.
    pub fn qid(&self) -> u16 {
        self.pair.qid
    }

    /// Where the SQ lives.
    pub fn sq_location(&self) -> smartio_smartio::SegmentLocation {
        self.sq.seg.location
    }

    /// The SQ's address as the controller sees it (where it fetches commands from).
    pub fn sq_device_addr(&self) -> BusAddr {
        self.sq.buf.bus
    }
}

/// A client: a program using the shared controller through its own queue pairs.
#[derive(Debug)]
pub struct Client {
    smartio: SmartIo,
    os: HostOs,
    hold: DeviceBorrow,
    manager: Rc<Manager>,
    /// What the client read from the manager's segment when it joined.
    publication: Publication,
    bar: Mmio,
    regs: CpuMap,
    data: Mapped,
    queues: RefCell<Vec<Rc<ClientQueue>>>,
    /// Queue pairs whose memory the program placed itself ([`Client::create_queue_at`]).
    placed: RefCell<Vec<u16>>,
    /// Segments of [`Client::extra_segment`].
    extra: RefCell<Vec<Mapped>>,
    /// The NTB adapter of this host the client's paths use, if it chose one.
    via: Option<u32>,
}

impl Client {
    /// Joins the controller `fdid` from `os`'s host: a shared hold, the published manager
    /// checked, the doorbells mapped, and a data segment of `data_size` bytes in this host's
    /// RAM mapped for the device.
    pub async fn connect(
        smartio: &SmartIo,
        os: &HostOs,
        fdid: Fdid,
        manager: &Rc<Manager>,
        data_size: u64,
    ) -> Result<Client, DistError> {
        Self::connect_via(smartio, os, fdid, manager, data_size, None).await
    }

    /// [`Client::connect`] with every path between this host and the controller through
    /// this host's NTB adapter `adapter` (for `None`, the first working one). A program with
    /// two adapters connects a client through each and fails over between them.
    pub async fn connect_via(
        smartio: &SmartIo,
        os: &HostOs,
        fdid: Fdid,
        manager: &Rc<Manager>,
        data_size: u64,
        adapter: Option<u32>,
    ) -> Result<Client, DistError> {
        Self::connect_sized(smartio, os, fdid, manager, adapter, |_| Ok(data_size)).await
    }

    /// [`Client::connect_via`] with the data segment's size chosen from what the manager
    /// published (the controller's largest transfer, its namespaces): `data_size` sees the
    /// [`Publication`] the client bootstrapped from, and its refusal — a program that cannot
    /// use this controller — gives the hold back and is returned as it is.
    pub async fn connect_sized<E: From<DistError>>(
        smartio: &SmartIo,
        os: &HostOs,
        fdid: Fdid,
        manager: &Rc<Manager>,
        adapter: Option<u32>,
        data_size: impl FnOnce(&Publication) -> Result<u64, E>,
    ) -> Result<Client, E> {
        let (hold, publication) = Self::bootstrap(smartio, os, fdid, manager, adapter).await?;
        let size = match data_size(&publication) {
            Ok(size) => size,
            Err(refused) => {
                smartio.return_device(hold).map_err(DistError::from)?;
                return Err(refused);
            }
        };
        Ok(Self::join(
            smartio,
            os,
            manager,
            hold,
            publication,
            size,
            adapter,
        )?)
    }

    /// A shared hold on `fdid` and the manager's publication, read through this host's
    /// mapping of the published segment and checked to name `manager`.
    async fn bootstrap(
        smartio: &SmartIo,
        os: &HostOs,
        fdid: Fdid,
        manager: &Rc<Manager>,
        adapter: Option<u32>,
    ) -> Result<(DeviceBorrow, Publication), DistError> {
        let device = || format!("fdid {fdid}");
        let published =
            smartio
                .published(fdid, MANAGER_SEGMENT)
                .ok_or_else(|| DistError::NoManager {
                    device: device(),
                    why: "nothing is published".into(),
                })?;
        let hold = smartio.borrow_device_via(os.id(), fdid, false, adapter)?;
        // Bootstrap from the manager's segment (through the NTB if it is elsewhere): where
        // the manager runs and what the controller is.
        let map = smartio.map_for_cpu_via(os.id(), &published, adapter)?;
        let read = read_publication(os, map.addr, published.size).await;
        smartio.unmap_cpu(map)?;
        let publication = match read {
            Ok(p) if p.host == manager.host() => p,
            Ok(p) => {
                smartio.return_device(hold)?;
                return Err(DistError::NoManager {
                    device: device(),
                    why: format!(
                        "the published segment names the manager on host {}, not host {}",
                        p.host.0,
                        manager.host().0
                    ),
                });
            }
            Err(e) => {
                smartio.return_device(hold)?;
                return Err(match e {
                    DistError::Publication { source, .. } => DistError::Publication {
                        device: device(),
                        source,
                    },
                    e => e,
                });
            }
        };
        Ok((hold, publication))
    }

    /// The rest of joining: the doorbells mapped and a data segment of `data_size` bytes.
    fn join(
        smartio: &SmartIo,
        os: &HostOs,
        manager: &Rc<Manager>,
        hold: DeviceBorrow,
        publication: Publication,
        data_size: u64,
        adapter: Option<u32>,
    ) -> Result<Client, DistError> {
        let regs_seg = smartio.bar_segment(&hold, 0)?;
        let regs = smartio.map_for_cpu_via(os.id(), &regs_seg, adapter)?;
        let bar = Mmio::new(
            os.cpu(),
            BarWindow {
                index: 0,
                base: regs.addr,
                size: regs_seg.size,
            },
            "nvme client BAR0",
        );
        let data = mapped_segment_of(
            smartio,
            os,
            &hold,
            &hold,
            adapter,
            data_size,
            Hints {
                device_reads: true,
                device_writes: true,
                host_reads: true,
                host_writes: true,
                ..Hints::default()
            },
        )?;
        Ok(Client {
            smartio: smartio.clone(),
            os: os.clone(),
            hold,
            manager: manager.clone(),
            publication,
            bar,
            regs,
            data,
            queues: RefCell::new(Vec::new()),
            placed: RefCell::new(Vec::new()),
            extra: RefCell::new(Vec::new()),
            via: adapter,
        })
    }

    /// Where the data segment is in this host's RAM (for the program's own loads/stores).
    pub fn data(&self) -> (PhysAddr, u64) {
        (self.data.buf.cpu, self.data.buf.len)
    }

    /// Where the data segment's memory is (this host's RAM, as its hints ask).
    pub fn data_location(&self) -> smartio_smartio::SegmentLocation {
        self.data.seg.location
    }

    /// The data segment as the controller addresses it (where PRPs point).
    pub fn data_device_addr(&self) -> BusAddr {
        self.data.buf.bus
    }

    /// What the manager published about itself and the controller, as the client read it
    /// when it joined.
    pub fn publication(&self) -> &Publication {
        &self.publication
    }

    /// Allocates a segment of `len` bytes by `hints`, maps it for the device and for this
    /// host's CPU (for a driver's own structures, such as PRP lists written once); returns
    /// where the CPU and the controller reach it. [`Client::leave`] removes it.
    pub fn extra_segment(&self, len: u64, hints: Hints) -> Result<DmaBuffer, DistError> {
        let m = mapped_segment_of(
            &self.smartio,
            &self.os,
            &self.hold,
            &self.hold,
            self.via,
            len,
            hints,
        )?;
        self.extra.borrow_mut().push(m);
        Ok(m.buf)
    }

    /// The client's hold on the device (SmartIO drops it if the program dies).
    pub fn hold(&self) -> DeviceBorrow {
        self.hold
    }

    /// The host.
    pub fn os(&self) -> &HostOs {
        &self.os
    }

    /// The manager the client joined.
    pub fn manager(&self) -> &Rc<Manager> {
        &self.manager
    }

    /// Where this host's CPU reaches the controller's BAR0 (the client's map of it): a
    /// program that lets another device of this host ring doorbells maps this range for it.
    pub fn registers(&self) -> CpuMap {
        self.regs
    }

    /// Asks the manager for a queue pair of `entries` entries whose SQ and CQ the program
    /// placed itself — the controller reaches them at `sq` and `cq` (addresses from
    /// [`SmartIo::map_for_device`], e.g. of GPU memory); returns its queue id. The program
    /// drives the pair on its own (nothing of it is polled here); [`Client::delete_queue_at`]
    /// or [`Client::leave`] deletes it.
    pub async fn create_queue_at(
        &self,
        entries: u16,
        sq: BusAddr,
        cq: BusAddr,
    ) -> Result<u16, DistError> {
        let qid = self
            .manager
            .create_pair(&self.hold, &self.os.cpu(), sq, cq, entries)
            .await?;
        self.placed.borrow_mut().push(qid);
        Ok(qid)
    }

    /// Deletes a queue pair made by [`Client::create_queue_at`] (the controller finishes or
    /// aborts what it took from the SQ before it answers).
    pub async fn delete_queue_at(&self, qid: u16) -> Result<(), DistError> {
        if !self.placed.borrow().contains(&qid) {
            return Err(DistError::NotOwner { qid });
        }
        self.manager
            .delete_pair(&self.hold, &self.os.cpu(), qid)
            .await?;
        self.placed.borrow_mut().retain(|&q| q != qid);
        Ok(())
    }

    /// Asks the manager for a queue pair of `entries` entries, with the SQ placed by
    /// `placement` and the CQ in this host's RAM.
    pub async fn create_queue(
        &self,
        entries: u16,
        placement: SqPlacement,
    ) -> Result<Rc<ClientQueue>, DistError> {
        let s = &self.smartio;
        let owner = match placement {
            SqPlacement::Peer(peer) => peer,
            _ => self.hold,
        };
        let sq = mapped_segment_of(
            s,
            &self.os,
            &owner,
            &self.hold,
            self.via,
            u64::from(entries) * SQE_SIZE as u64,
            placement.hints(),
        )?;
        let cq = mapped_segment_of(
            s,
            &self.os,
            &self.hold,
            &self.hold,
            self.via,
            u64::from(entries) * CQE_SIZE as u64,
            Hints {
                device_writes: true,
                host_reads: true,
                ..Hints::default()
            },
        )?;
        let prp = mapped_segment_of(
            s,
            &self.os,
            &self.hold,
            &self.hold,
            self.via,
            u64::from(entries) * PAGE_SIZE,
            Hints {
                device_reads: true,
                host_reads: true,
                host_writes: true,
                ..Hints::default()
            },
        )?;
        let qid = match self
            .manager
            .create_pair(&self.hold, &self.os.cpu(), sq.buf.bus, cq.buf.bus, entries)
            .await
        {
            Ok(qid) => qid,
            Err(refused) => {
                // Nothing of a refused queue stays: its segments go with their maps.
                for m in [sq, cq, prp] {
                    let _ = s.unmap_device(&self.hold, &m.seg);
                    let _ = s.unmap_cpu(m.cpu_map);
                    let _ = s.remove_segment(m.seg);
                }
                return Err(refused);
            }
        };
        let pair = QueuePair::new(
            qid,
            entries,
            sq.buf,
            cq.buf,
            None,
            self.os.cpu(),
            self.bar.clone(),
            self.manager.doorbells(qid),
        );
        let q = Rc::new(ClientQueue { pair, sq, cq, prp });
        self.queues.borrow_mut().push(q.clone());
        Ok(q)
    }

    /// Reads or writes `blocks` blocks at `lba` of `nsid` to or from the data segment at
    /// `offset`, on queue `q`; polls for the completion. Flush (any `blocks`), Write Zeroes
    /// (1..=65536 blocks) and Deallocate (1..=`u32::MAX`) use no data segment (`offset` is
    /// ignored).
    pub async fn io(
        &self,
        q: &ClientQueue,
        op: BlockOp,
        nsid: u32,
        lba: u64,
        blocks: u32,
        offset: u64,
    ) -> Result<(), DistError> {
        // Nothing to give up for: no race (whose futures may not let time pass in place).
        let never: Option<std::future::Pending<String>> = None;
        self.io_or_give_up(q, op, nsid, lba, blocks, offset, never)
            .await
    }

    /// [`Client::io`] that gives up when `give_up` resolves first (a timeout, or the news
    /// that the path is down), with [`DistError::Abandoned`] carrying its reason. The
    /// command's tag then stays taken, since the controller may still complete it: a
    /// program treats the queue pair as lost and goes on elsewhere.
    #[allow(clippy::too_many_arguments)]
    pub async fn io_within(
        &self,
        q: &ClientQueue,
        op: BlockOp,
        nsid: u32,
        lba: u64,
        blocks: u32,
        offset: u64,
        give_up: impl std::future::Future<Output = String>,
    ) -> Result<(), DistError> {
        self.io_or_give_up(q, op, nsid, lba, blocks, offset, Some(give_up))
            .await
    }

    /// [`Client::io_within`], or [`Client::io`] when there is nothing to give up for.
    #[allow(clippy::too_many_arguments)]
    async fn io_or_give_up(
        &self,
        q: &ClientQueue,
        op: BlockOp,
        nsid: u32,
        lba: u64,
        blocks: u32,
        offset: u64,
        give_up: Option<impl std::future::Future<Output = String>>,
    ) -> Result<(), DistError> {
        let lba_size = self
            .manager
            .namespaces()
            .iter()
            .find(|n| n.nsid == nsid)
            .map_or(512, |n| u64::from(n.lba_size));
        let len = u64::from(blocks) * lba_size;
        // Flush, Write Zeroes and Deallocate move no data: no transfer; a deallocation's
        // range goes in the tag's page of the PRP-list segment.
        let data = op.moves_data();
        if data
            && (blocks == 0
                || len > self.manager.max_transfer()
                || offset + len > self.data.buf.len)
        {
            return Err(BadRequest::Transfer {
                blocks,
                offset,
                max_transfer: self.manager.max_transfer(),
                segment: self.data.buf.len,
            }
            .into());
        }
        if matches!(op, BlockOp::WriteZeroes | BlockOp::Deallocate)
            && !(1..=op.max_blocks()).contains(&blocks)
        {
            return Err(BadRequest::RangeBlocks {
                op,
                blocks,
                max: op.max_blocks(),
            }
            .into());
        }
        let command = op.command(BlockRange::new(nsid, lba, blocks));
        let tag = q.pair.acquire().await;
        let io = async {
            let (prp1, prp2) = if data {
                self.prps(q, tag, self.data.buf.bus.get() + offset, len)
                    .await?
            } else if op == BlockOp::Deallocate {
                let at = u64::from(tag) * PAGE_SIZE;
                self.os
                    .cpu()
                    .write(
                        BusAddr(q.prp.buf.cpu.get() + at),
                        &DsmRange { slba: lba, blocks }.encode(),
                    )
                    .await
                    .map_err(access("write a Dataset Management range"))?;
                (q.prp.buf.bus.get() + at, 0)
            } else {
                (0, 0)
            };
            let cmd = Command::from(command).with_prps(prp1, prp2);
            q.pair.submit(tag, cmd).await.map_err(access("submit"))?;
            q.pair.wait_polled(tag).await.map_err(access("poll"))
        };
        let result = match give_up {
            None => io.await,
            Some(give_up) => match smartio_platform::race(io, give_up).await {
                smartio_platform::Either::Left(result) => result,
                smartio_platform::Either::Right(why) => {
                    return Err(DistError::Abandoned {
                        qid: q.qid(),
                        what: format!("{op:?} of {blocks} blocks at LBA {lba}"),
                        why,
                    })
                }
            },
        };
        q.pair.release(tag);
        let c = result?;
        if !c.status.is_success() {
            return Err(DistError::Command {
                what: format!("{op:?} of {blocks} blocks at LBA {lba}"),
                status: c.status.code(),
            });
        }
        Ok(())
    }

    /// PRP1/PRP2 for `len` bytes at device address `bus`; a list in the tag's page when the
    /// transfer spans more than two pages.
    async fn prps(
        &self,
        q: &ClientQueue,
        tag: u16,
        bus: u64,
        len: u64,
    ) -> Result<(u64, u64), DistError> {
        // The tag's page of the PRP-list segment: one list page, no chaining.
        let at = u64::from(tag) * PAGE_SIZE;
        let prps = prp::build(bus, len, &[q.prp.buf.bus.get() + at])
            .map_err(|source| BadRequest::Prps { len, bus, source })?;
        if let Some(list) = prps.lists.first() {
            self.os
                .cpu()
                .write(BusAddr(q.prp.buf.cpu.get() + at), &list.bytes())
                .await
                .map_err(access("write a PRP list"))?;
        }
        Ok((prps.prp1, prps.prp2))
    }

    /// Gives up queue pair `q` (its path is lost): the manager deletes it — the controller
    /// finishes or aborts what it had taken from the SQ before it answers — and its segments
    /// go. Afterwards nothing the pair was given can still change; a program may then check
    /// what a command given up on did before issuing it again elsewhere.
    pub async fn abandon_queue(&self, q: &Rc<ClientQueue>) -> Result<(), DistError> {
        self.manager
            .delete_pair(&self.hold, &self.os.cpu(), q.qid())
            .await?;
        self.queues.borrow_mut().retain(|x| !Rc::ptr_eq(x, q));
        let s = &self.smartio;
        for m in [q.sq, q.cq, q.prp] {
            s.unmap_device(&self.hold, &m.seg)?;
            s.unmap_cpu(m.cpu_map)?;
            s.remove_segment(m.seg)?;
        }
        Ok(())
    }

    /// Leaves: every queue pair is deleted through the manager, and the hold, the maps and
    /// the segments are given back.
    pub async fn leave(self) -> Result<(), DistError> {
        let queues = self.queues.take();
        for qid in self.placed.take() {
            self.manager
                .delete_pair(&self.hold, &self.os.cpu(), qid)
                .await?;
        }
        for q in &queues {
            self.manager
                .delete_pair(&self.hold, &self.os.cpu(), q.qid())
                .await?;
        }
        self.smartio.unmap_cpu(self.regs)?;
        let mut segments = vec![self.data];
        segments.extend(self.extra.take());
        for q in &queues {
            segments.extend([q.sq, q.cq, q.prp]);
        }
        for m in &segments {
            self.smartio.unmap_cpu(m.cpu_map)?;
        }
        self.smartio.return_device(self.hold)?;
        for m in segments {
            self.smartio.remove_segment(m.seg)?;
        }
        Ok(())
    }
}

/// Reads the manager's publication at `addr` (this host's CPU mapping of its `size`-byte
/// segment): the header, then as many namespace entries as it says — and the segment holds.
async fn read_publication(os: &HostOs, addr: BusAddr, size: u64) -> Result<Publication, DistError> {
    let unreadable = |source| DistError::Publication {
        device: String::new(),
        source,
    };
    let mut page = vec![0u8; HEADER_BYTES];
    os.cpu()
        .read(addr, &mut page)
        .await
        .map_err(access("read the manager segment"))?;
    let n = Publication::namespace_count(&page).map_err(unreadable)?;
    let need = HEADER_BYTES + n * NAMESPACE_BYTES;
    if need as u64 > size {
        return Err(unreadable(PublicationError::Short {
            len: usize::try_from(size).unwrap_or(usize::MAX),
            need,
        }));
    }
    if n > 0 {
        let mut entries = vec![0u8; n * NAMESPACE_BYTES];
        os.cpu()
            .read(BusAddr(addr.get() + HEADER_BYTES as u64), &mut entries)
            .await
            .map_err(access("read the manager segment's namespaces"))?;
        page.extend_from_slice(&entries);
    }
    Publication::decode(&page).map_err(unreadable)
}
