//! Admin commands: Identify, queue creation and deletion, features, log pages, Abort.

use super::controller::{
    CompQueue, NvmeController, SubQueue, ERROR_LOG_ENTRIES, MAX_AERS, MAX_QUEUE_ENTRIES, MDTS,
};
use super::prp::segments_into;
use super::spec::admin::{
    Abort, AdminCommand, CreateIoCq, CreateIoSq, DeleteQueue, GetFeatures, GetLogPage, Identify,
    SetFeatures,
};
use super::spec::{
    self, async_event, cns, feature, id_ctrl, id_ns, log, vs, Command, Status, SQE_SIZE,
};
use smartio_platform::activity;
use smartio_platform::{BusAddr, Clock, Port, PAGE_SIZE};
use std::task::Poll;

impl NvmeController {
    /// Executes an admin command (decoded from `cmd`, whose data pointer it uses); returns
    /// its status and completion dword 0.
    pub(super) async fn admin<P: Port + Clock>(&self, port: &P, cmd: &Command) -> (Status, u32) {
        let r = match AdminCommand::from(cmd) {
            AdminCommand::Identify(id) => self.identify(port, cmd, id).await,
            AdminCommand::CreateIoCq(q) => self.create_cq(q),
            AdminCommand::CreateIoSq(q) => self.create_sq(q),
            AdminCommand::DeleteIoSq(q) => self.delete_sq(port, q).await,
            AdminCommand::DeleteIoCq(q) => self.delete_cq(q),
            AdminCommand::SetFeatures(f) => self.set_features(f),
            AdminCommand::GetFeatures(f) => self.get_features(f),
            AdminCommand::GetLogPage(l) => self.get_log_page(port, cmd, l).await,
            AdminCommand::Abort(a) => self.abort(port, a).await,
            AdminCommand::AsyncEventRequest => self.async_event_request().await,
            AdminCommand::Unsupported(_) => Err(Status::INVALID_OPCODE),
        };
        match r {
            Ok(dw0) => (Status::SUCCESS, dw0),
            Err(s) => (s, 0),
        }
    }

    /// Copies `data` to the host buffer the command's PRPs describe. Afterwards `data` is a
    /// buffer to reuse, its contents unspecified: written in one piece, the port may take its
    /// bytes as they are and leave a spare buffer ([`Port::write_swapped`]).
    pub(super) async fn to_host<P: Port>(
        &self,
        port: &P,
        cmd: &Command,
        data: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let mut segs = self.segment_lists.take();
        let moved = async {
            let len = data.len() as u64;
            segments_into(port, cmd.prp1, cmd.prp2, len, PAGE_SIZE, &mut segs).await?;
            if let [one] = segs[..] {
                activity::doing("data to the host");
                return port
                    .write_swapped(BusAddr(one.addr), data)
                    .await
                    .map_err(|_| Status::DATA_TRANSFER_ERROR);
            }
            let mut at = 0usize;
            for s in &segs {
                let chunk = &data[at..at + s.len as usize];
                at += s.len as usize;
                activity::doing("data to the host");
                port.write(BusAddr(s.addr), chunk)
                    .await
                    .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            }
            Ok(())
        }
        .await;
        self.segment_lists.give(segs);
        moved
    }

    /// Writes `len` zeroes to the host buffer the command's PRPs describe
    /// ([`Port::write_zeroes`]: no buffer of them).
    pub(super) async fn zeroes_to_host<P: Port>(
        &self,
        port: &P,
        cmd: &Command,
        len: u64,
    ) -> Result<(), Status> {
        let mut segs = self.segment_lists.take();
        let moved = async {
            segments_into(port, cmd.prp1, cmd.prp2, len, PAGE_SIZE, &mut segs).await?;
            for s in &segs {
                activity::doing("data to the host");
                port.write_zeroes(BusAddr(s.addr), s.len as usize)
                    .await
                    .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            }
            Ok(())
        }
        .await;
        self.segment_lists.give(segs);
        moved
    }

    /// Reads `len` bytes from the host buffer the command's PRPs describe; the buffer they
    /// come in goes to [`NvmeController::buffers`] when done with (one piece arrives in the
    /// read's own buffer, several are read into one of those).
    pub(super) async fn fetch_from_host<P: Port>(
        &self,
        port: &P,
        cmd: &Command,
        len: u64,
    ) -> Result<Vec<u8>, Status> {
        let mut segs = self.segment_lists.take();
        let fetched = async {
            segments_into(port, cmd.prp1, cmd.prp2, len, PAGE_SIZE, &mut segs).await?;
            if let [s] = &segs[..] {
                // One piece (the usual 4 KiB): the read's own buffer, not one zeroed and
                // copied into.
                activity::doing("data from the host");
                return port
                    .read_owned(BusAddr(s.addr), s.len as usize)
                    .await
                    .map_err(|_| Status::DATA_TRANSFER_ERROR);
            }
            let mut out = self.buffers.take();
            out.resize(len as usize, 0);
            let mut at = 0usize;
            for s in &segs {
                activity::doing("data from the host");
                let to = at + s.len as usize;
                if port.read(BusAddr(s.addr), &mut out[at..to]).await.is_err() {
                    self.buffers.give(out);
                    return Err(Status::DATA_TRANSFER_ERROR);
                }
                at = to;
            }
            Ok(out)
        }
        .await;
        self.segment_lists.give(segs);
        fetched
    }

    /// Logical blocks per namespace.
    pub(super) fn blocks(&self) -> u64 {
        self.config.capacity / u64::from(self.config.lba_size)
    }

    async fn identify<P: Port + Clock>(
        &self,
        port: &P,
        cmd: &Command,
        id: Identify,
    ) -> Result<u32, Status> {
        let mut d = vec![0u8; PAGE_SIZE as usize];
        match id.cns {
            cns::CONTROLLER => self.identify_controller(&mut d),
            cns::NAMESPACE => {
                if id.nsid == 0 || id.nsid > self.store.count() {
                    return Err(Status::INVALID_NAMESPACE);
                }
                let blocks = self.blocks();
                for at in [id_ns::NSZE, id_ns::NCAP, id_ns::NUSE] {
                    d[at..at + 8].copy_from_slice(&blocks.to_le_bytes());
                }
                d[id_ns::NLBAF] = 0;
                d[id_ns::FLBAS] = 0;
                d[id_ns::DLFEAT] = 0b001;
                let lbads = self.config.lba_size.trailing_zeros();
                d[id_ns::LBAF0..id_ns::LBAF0 + 4].copy_from_slice(&(lbads << 16).to_le_bytes());
            }
            cns::ACTIVE_NAMESPACES => {
                if id.nsid >= 0xffff_fffe {
                    return Err(Status::INVALID_NAMESPACE);
                }
                let ids = (id.nsid + 1..=self.store.count()).take(1024);
                for (i, id) in ids.enumerate() {
                    d[4 * i..4 * i + 4].copy_from_slice(&id.to_le_bytes());
                }
            }
            _ => return Err(Status::INVALID_FIELD),
        }
        // The controller reads its tables like a small media read.
        port.sleep(self.config.profile.read_latency.typical).await;
        self.to_host(port, cmd, &mut d).await.map(|()| 0)
    }

    fn identify_controller(&self, d: &mut [u8]) {
        let c = &self.config;
        d[id_ctrl::VID..id_ctrl::VID + 2].copy_from_slice(&c.vendor_id.to_le_bytes());
        d[2..4].copy_from_slice(&c.vendor_id.to_le_bytes());
        ascii(&mut d[id_ctrl::SN..id_ctrl::SN + 20], &c.serial);
        let model = format!("smartio emulated NVMe ({})", c.profile.name);
        ascii(&mut d[id_ctrl::MN..id_ctrl::MN + 40], &model);
        ascii(&mut d[id_ctrl::FR..id_ctrl::FR + 8], "1.0");
        d[id_ctrl::MDTS] = MDTS;
        d[id_ctrl::CNTLID..id_ctrl::CNTLID + 2].copy_from_slice(&1u16.to_le_bytes());
        d[id_ctrl::VER..id_ctrl::VER + 4].copy_from_slice(&vs::V1_4.to_le_bytes());
        d[id_ctrl::ACL] = 3;
        d[id_ctrl::AERL] = (MAX_AERS - 1) as u8;
        d[id_ctrl::ELPE] = (ERROR_LOG_ENTRIES - 1) as u8;
        d[id_ctrl::SQES] = 0x66;
        d[id_ctrl::CQES] = 0x44;
        d[514..516].copy_from_slice(&(MAX_QUEUE_ENTRIES as u16).to_le_bytes());
        d[id_ctrl::NN..id_ctrl::NN + 4].copy_from_slice(&self.store.count().to_le_bytes());
        d[id_ctrl::ONCS..id_ctrl::ONCS + 2].copy_from_slice(&(1u16 << 2 | 1 << 3).to_le_bytes());
        d[id_ctrl::VWC] = 0;
    }

    /// Checks what a Create I/O CQ or SQ says about the new queue: its id among the
    /// `io_limit` granted, its size (QSIZE, 0-based) against CAP.MQES, and that it is
    /// physically contiguous (PC, as CAP.CQR demands) and page aligned at `base`. Returns the
    /// id and the number of entries.
    fn check_new_queue(
        &self,
        qid: u16,
        qsize: u16,
        pc: bool,
        base: u64,
        io_limit: u16,
    ) -> Result<(u16, u16), Status> {
        if qid == 0 || qid > io_limit {
            return Err(Status::INVALID_QUEUE_ID);
        }
        if qsize == 0 || u32::from(qsize) >= MAX_QUEUE_ENTRIES {
            return Err(Status::INVALID_QUEUE_SIZE);
        }
        if !pc || base & (PAGE_SIZE - 1) != 0 {
            // CAP.CQR: queues must be physically contiguous and page aligned.
            return Err(Status::INVALID_FIELD);
        }
        // The queue must not run past the end of the 64-bit address space.
        let bytes = (u64::from(qsize) + 1) * SQE_SIZE as u64;
        if base.checked_add(bytes).is_none() {
            return Err(Status::INVALID_FIELD);
        }
        Ok((qid, qsize + 1))
    }

    fn create_cq(&self, q: CreateIoCq) -> Result<u32, Status> {
        let mut s = self.state.borrow_mut();
        let (qid, entries) = self.check_new_queue(q.qid, q.qsize, q.pc, q.base, s.granted.1)?;
        if s.cqs[qid as usize].is_some() {
            return Err(Status::INVALID_QUEUE_ID);
        }
        if spec::cc::iocqes(s.cc) != 4 {
            return Err(Status::INVALID_QUEUE_SIZE);
        }
        if q.ien && usize::from(q.iv) >= self.msix.len() {
            return Err(Status::INVALID_INTERRUPT_VECTOR);
        }
        s.cqs[qid as usize] = Some(CompQueue {
            base: q.base,
            entries,
            head: 0,
            tail: 0,
            phase: true,
            interrupts: q.ien,
            vector: q.iv,
        });
        s.io_queue_created = true;
        Ok(0)
    }

    fn create_sq(&self, q: CreateIoSq) -> Result<u32, Status> {
        let mut s = self.state.borrow_mut();
        let (qid, entries) = self.check_new_queue(q.qid, q.qsize, q.pc, q.base, s.granted.0)?;
        if s.sqs.exists(qid as usize) || s.deleting.iter().any(|d| d.0 == qid) {
            return Err(Status::INVALID_QUEUE_ID);
        }
        if spec::cc::iosqes(s.cc) != 6 {
            return Err(Status::INVALID_QUEUE_SIZE);
        }
        let cqid = q.cqid;
        if cqid == 0 || s.cqs.get(cqid as usize).is_none_or(Option::is_none) {
            return Err(Status::COMPLETION_QUEUE_INVALID);
        }
        let created = s.sqs.put(
            qid,
            SubQueue {
                base: q.base,
                entries,
                head: 0,
                tail: 0,
                cqid,
                fetching: false,
                aborted: Vec::new(),
            },
        );
        if !created {
            return Err(Status::INVALID_QUEUE_ID);
        }
        s.io_queue_created = true;
        Ok(0)
    }

    /// Deletes an I/O submission queue; commands still in it complete as aborted, and the
    /// deletion completes only after the commands already fetched from it have completed.
    async fn delete_sq<P: Port>(&self, port: &P, q: DeleteQueue) -> Result<u32, Status> {
        let qid = q.qid;
        let (q, generation) = {
            let mut s = self.state.borrow_mut();
            let generation = s.generation;
            let q = match qid {
                0 => return Err(Status::INVALID_QUEUE_ID),
                _ => s.sqs.take(qid),
            };
            if let Some(q) = &q {
                s.deleting.push((qid, q.cqid));
            }
            (q, generation)
        };
        let Some(q) = q else {
            return Err(Status::INVALID_QUEUE_ID);
        };
        let mut head = q.head;
        while head != q.tail {
            let addr = q.base + u64::from(head) * SQE_SIZE as u64;
            head = (head + 1) % q.entries;
            if let Ok(raw) = port.read_owned(BusAddr(addr), SQE_SIZE).await {
                let (c, _) = Command::from_bytes(&raw);
                self.complete(
                    port,
                    generation,
                    q.cqid,
                    qid,
                    head,
                    c.cid,
                    Status::ABORTED_SQ_DELETION,
                    0,
                )
                .await;
            }
        }
        self.drain(qid, generation).await;
        let mut s = self.state.borrow_mut();
        if s.generation == generation {
            s.deleting.retain(|d| d.0 != qid);
        }
        Ok(0)
    }

    fn delete_cq(&self, q: DeleteQueue) -> Result<u32, Status> {
        let qid = q.qid;
        let mut s = self.state.borrow_mut();
        if qid == 0 || s.cqs.get(qid as usize).is_none_or(Option::is_none) {
            return Err(Status::INVALID_QUEUE_ID);
        }
        if s.sqs.iter().any(|q| q.cqid == qid) || s.deleting.iter().any(|d| d.1 == qid) {
            return Err(Status::INVALID_QUEUE_DELETION);
        }
        s.cqs[qid as usize] = None;
        Ok(0)
    }

    fn set_features(&self, f: SetFeatures) -> Result<u32, Status> {
        let mut s = self.state.borrow_mut();
        let v = f.value;
        match f.fid {
            feature::NUMBER_OF_QUEUES => {
                let (nsqr, ncqr) = feature::queues_of(v);
                if nsqr == 0xffff || ncqr == 0xffff {
                    return Err(Status::INVALID_FIELD);
                }
                if s.io_queue_created {
                    return Err(Status::COMMAND_SEQUENCE_ERROR);
                }
                let max = self.config.queue_pairs - 1;
                s.granted = ((nsqr + 1).min(max), (ncqr + 1).min(max));
                Ok(queues_result(s.granted))
            }
            feature::ARBITRATION => {
                let ab = v & 7;
                s.burst = if ab == 7 { u16::MAX } else { 1 << ab };
                Ok(0)
            }
            feature::INTERRUPT_COALESCING => {
                s.coalescing = v & 0xffff;
                Ok(0)
            }
            _ => Err(Status::INVALID_FIELD),
        }
    }

    fn get_features(&self, f: GetFeatures) -> Result<u32, Status> {
        let s = self.state.borrow();
        match f.fid {
            feature::NUMBER_OF_QUEUES => Ok(queues_result(s.granted)),
            feature::ARBITRATION => Ok(if s.burst == u16::MAX {
                7
            } else {
                s.burst.trailing_zeros()
            }),
            feature::INTERRUPT_COALESCING => Ok(s.coalescing),
            _ => Err(Status::INVALID_FIELD),
        }
    }

    async fn get_log_page<P: Port + Clock>(
        &self,
        port: &P,
        cmd: &Command,
        l: GetLogPage,
    ) -> Result<u32, Status> {
        let (lid, offset, len) = (l.lid, l.offset, l.len());
        if len > PAGE_SIZE << MDTS {
            return Err(Status::INVALID_FIELD);
        }
        let page = match lid {
            log::ERROR_INFORMATION => self.error_log(),
            log::SMART_HEALTH => self.health_log(),
            _ => return Err(Status::INVALID_LOG_PAGE),
        };
        if offset & 3 != 0 || offset >= page.len() as u64 {
            return Err(Status::INVALID_FIELD);
        }
        // Reading the Error Information page without Retain Asynchronous Event unmasks error
        // events.
        if lid == log::ERROR_INFORMATION && !l.rae {
            self.state.borrow_mut().errors_masked = false;
        }
        let mut data = vec![0u8; len as usize];
        let avail = &page[offset as usize..];
        let n = avail.len().min(data.len());
        data[..n].copy_from_slice(&avail[..n]);
        port.sleep(self.config.profile.read_latency.typical).await;
        self.to_host(port, cmd, &mut data).await.map(|()| 0)
    }

    fn error_log(&self) -> Vec<u8> {
        let s = self.state.borrow();
        let mut page = vec![0u8; ERROR_LOG_ENTRIES * log::ERROR_ENTRY_SIZE];
        for (i, e) in s.errors.iter().enumerate() {
            let b = &mut page[i * log::ERROR_ENTRY_SIZE..(i + 1) * log::ERROR_ENTRY_SIZE];
            b[0..8].copy_from_slice(&e.count.to_le_bytes());
            b[8..10].copy_from_slice(&e.sqid.to_le_bytes());
            b[10..12].copy_from_slice(&e.cid.to_le_bytes());
            b[12..14].copy_from_slice(&e.status.with_phase(false).to_le_bytes());
            b[14..16].copy_from_slice(&0xffffu16.to_le_bytes());
            b[16..24].copy_from_slice(&e.lba.to_le_bytes());
            b[24..28].copy_from_slice(&e.nsid.to_le_bytes());
        }
        page
    }

    fn health_log(&self) -> Vec<u8> {
        let s = self.state.borrow();
        let h = s.health;
        let mut b = vec![0u8; log::SMART_SIZE];
        b[1..3].copy_from_slice(&313u16.to_le_bytes()); // 40 °C in kelvin
        b[3] = 100; // available spare
        b[4] = 10; // spare threshold
        let units = |bytes: u64| (bytes / 512).div_ceil(1000) as u128;
        b[32..48].copy_from_slice(&units(h.bytes_read).to_le_bytes());
        b[48..64].copy_from_slice(&units(h.bytes_written).to_le_bytes());
        let (reads, writes) = (log::SMART_HOST_READS, log::SMART_HOST_WRITES);
        b[reads..reads + 16].copy_from_slice(&u128::from(h.read_commands).to_le_bytes());
        b[writes..writes + 16].copy_from_slice(&u128::from(h.write_commands).to_le_bytes());
        b[112..128].copy_from_slice(&1u128.to_le_bytes()); // power cycles
        b[160..176].copy_from_slice(&u128::from(h.media_errors).to_le_bytes());
        b[176..192].copy_from_slice(&u128::from(s.error_count).to_le_bytes());
        b
    }

    /// Asynchronous Event Request: completes when an event occurs (NVMe 1.4 §5.2), with the
    /// event in dword 0; error events are masked from then until the Error Information log
    /// page is read. At most [`MAX_AERS`] may be outstanding.
    async fn async_event_request(&self) -> Result<u32, Status> {
        let generation = {
            let mut s = self.state.borrow_mut();
            if s.aers >= MAX_AERS {
                return Err(Status::AER_LIMIT_EXCEEDED);
            }
            s.aers += 1;
            s.generation
        };
        let event = std::future::poll_fn(|cx| {
            let mut s = self.state.borrow_mut();
            if s.generation != generation {
                return Poll::Ready(None);
            }
            match s.events.pop_front() {
                Some(e) => {
                    s.aers = s.aers.saturating_sub(1);
                    if (e & 7) as u8 == async_event::TYPE_ERROR {
                        s.errors_masked = true;
                    }
                    Poll::Ready(Some(e))
                }
                None => {
                    self.event_waiters.borrow_mut().push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        // After a reset the completion is discarded anyway.
        event.ok_or(Status::ABORT_REQUESTED)
    }

    /// Abort: a command still waiting in its submission queue is completed as aborted when
    /// it is fetched (dword 0 bit 0 clear); one already fetched is not (bit 0 set).
    async fn abort<P: Port>(&self, port: &P, a: Abort) -> Result<u32, Status> {
        let (sqid, cid) = (a.sqid, a.cid);
        let q = self
            .state
            .borrow()
            .sqs
            .get(sqid as usize)
            .cloned()
            .ok_or(Status::INVALID_FIELD)?;
        // The scan reads entries while the fetcher may take them: an entry found is marked
        // only if it is still waiting (the fetcher consults the marks when its read of the
        // entry returns, so one being fetched right now is caught too).
        let (head, entries) = (q.head, q.entries);
        let mut at = head;
        let mut raw = Vec::with_capacity(SQE_SIZE);
        while at != q.tail {
            let addr = q.base + u64::from(at) * SQE_SIZE as u64;
            let read = self.read_sq(port, addr, SQE_SIZE as u64, &mut raw).await;
            if read.is_ok() && Command::from_bytes(&raw).0.cid == cid {
                let mut s = self.state.borrow_mut();
                let Some(now) = s.sqs.get_mut(sqid as usize) else {
                    break; // deleted meanwhile: the deletion completed it as aborted
                };
                let taken = (now.head + entries - head) % entries;
                let position = (at + entries - head) % entries;
                if position < taken {
                    break; // the fetcher took it: it runs
                }
                now.aborted.push(cid);
                return Ok(0);
            }
            at = (at + 1) % entries;
        }
        Ok(1)
    }
}

/// Dword 0 of Number of Queues: the granted counts, 0-based.
fn queues_result((nsq, ncq): (u16, u16)) -> u32 {
    feature::queues(nsq - 1, ncq - 1)
}

fn ascii(field: &mut [u8], text: &str) {
    field.fill(b' ');
    let n = text.len().min(field.len());
    field[..n].copy_from_slice(&text.as_bytes()[..n]);
}

#[cfg(test)]
mod tests;
