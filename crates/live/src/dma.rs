//! The daemon's side of SISCI's DMA queues: a queue is the host adapter's DMA engine
//! (`devices::ntb_dma`) driven by the host's CPU through `drivers::sisci_dma` — the same
//! queue code the timed engine runs `bench dma --adapter` with. A request is decoded into a
//! checked vector ([`Vector::check`]) before anything is mapped or posted; each started
//! vector maps the part of the remote segment it touches through the adapter's window
//! (look-up-table entries, given back once the transfers are waited for).
//!
//! The engine has one ring, so an adapter carries one queue at a time: a second
//! `SCICreateDMAQueue` on the same adapter is `SCI_ERR_HW_NOSPC` until the first is removed.
//! The ring lives in a segment of the host's RAM prepared on the adapter; the adapter's own
//! function takes an entry of its requester-id table while the queue exists (its reads
//! through the window need one, as any device's do).

use crate::answer::{error_reply, Answer};
use crate::daemon::Daemon;
use crate::dma_queue::LiveDmaQueue;
use crate::handles::Scope;
use crate::objects::Object;
use crate::protocol::{DmaEntry, Handle, Reply, Request};
use crate::refusal::{Refused, RequestError};
use smartio_drivers::ntb_dma::{engine_registers, queue_memory_bytes, QueueMemory};
use smartio_drivers::sisci_dma::{
    SisciDmaError, SisciDmaQueue, VecEntry, Vector, MAX_QUEUE_ENTRIES,
};
use smartio_fabric::{HostId, LutTarget, Requester};
use smartio_platform::{BusAddr, SimDuration};
use smartio_smartio::sisci::RemoteSegment;
use smartio_smartio::SciError;
use std::cell::RefCell;
use std::rc::Rc;

/// The reply a DMA queue's outcome makes: its SISCI error when it failed.
fn dma_reply(result: Result<Reply, SisciDmaError>) -> Reply {
    result.unwrap_or_else(|e| {
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message = format!("{message}: {c}");
            cause = c.source();
        }
        error_reply(e.class().code(), message)
    })
}

impl Daemon {
    pub(crate) fn dispatch_dma(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        match request {
            Request::CreateDmaQueue { adapter, entries } => {
                self.create_dma_queue(conn, host, adapter, entries)
            }
            Request::StartDma {
                queue,
                local,
                remote,
                entries,
                flags,
            } => self.start_dma(conn, queue, local, remote, &entries, flags),
            Request::WaitDma {
                queue,
                until,
                timeout_ms,
            } => {
                let live = self.dma_queue(conn, queue)?;
                let q = live.queue()?;
                let sisci = self.smartio.sisci().clone();
                let timeout =
                    timeout_ms.map(|ms| SimDuration::from_us(u64::from(ms).saturating_mul(1_000)));
                self.answer_later(conn, Some(queue), async move {
                    let state = q.wait_for(until, timeout).await;
                    live.unmap_waited(&sisci);
                    Ok::<_, SciError>(dma_reply(state.map(|s| Reply::Value(u64::from(s.code())))))
                });
                Ok(None)
            }
            Request::DmaQueueState { queue } => {
                let q = self.dma_queue(conn, queue)?.queue()?;
                self.answer_later(conn, Some(queue), async move {
                    let state = q.state().await;
                    Ok::<_, SciError>(dma_reply(state.map(|s| Reply::Value(u64::from(s.code())))))
                });
                Ok(None)
            }
            Request::AbortDma { queue } => {
                let q = self.dma_queue(conn, queue)?.queue()?;
                self.answer_later(conn, Some(queue), async move {
                    Ok::<_, SciError>(dma_reply(q.abort().await.map(|()| Reply::Done)))
                });
                Ok(None)
            }
            Request::RemoveDmaQueue { queue } => {
                let outstanding = self.dma_queue(conn, queue)?.outstanding();
                if outstanding > 0 {
                    return Ok(Some((
                        dma_reply(Err(SisciDmaError::Busy { outstanding })),
                        None,
                    )));
                }
                Ok(self.end(conn, queue, "DMA queue handle", |o| {
                    matches!(o, Object::DmaQueue(_))
                })?)
            }
            _ => unreachable!("dispatch sends only DMA requests here"),
        }
    }

    fn dma_queue(&self, conn: u64, handle: Handle) -> Result<Rc<LiveDmaQueue>, SciError> {
        self.resolve(
            conn,
            handle,
            Scope::Descriptor,
            "DMA queue handle",
            |o| match o {
                Object::DmaQueue(q) => Some(Rc::clone(q)),
                _ => None,
            },
        )
    }

    fn create_dma_queue(
        &mut self,
        conn: u64,
        host: HostId,
        number: u32,
        entries: u32,
    ) -> Result<Answer, RequestError> {
        let sisci = self.smartio.sisci().clone();
        let adapter = sisci.adapter(host, number)?;
        let entries = u64::from(entries);
        if entries == 0 || entries > MAX_QUEUE_ENTRIES {
            let refused = SisciDmaError::QueueEntries {
                asked: entries,
                max: MAX_QUEUE_ENTRIES,
            };
            return Ok(Some((dma_reply(Err(refused)), None)));
        }
        let machine = self.cluster.machine.clone();
        let (endpoint, bar0, name) = {
            let f = machine.fabric();
            let (endpoint, bar0) = engine_registers(&f, adapter);
            (endpoint, bar0, f.adapter_name(adapter))
        };
        let bar0 = bar0.ok_or_else(|| Refused::NoRegisterBar {
            adapter: name.clone(),
        })?;
        if self.dma_engines.borrow().contains(&adapter) {
            return Err(SciError::DmaEngineTaken { adapter: name }.into());
        }
        let ring = sisci.create_segment(host, None, queue_memory_bytes(entries))?;
        let taken = sisci.prepare_segment(&ring, number).and_then(|()| {
            machine
                .with_fabric_mut(|f| f.ntb_add_requester(adapter, Requester::Device(endpoint)))
                .map_err(SciError::from)
        });
        if let Err(e) = taken {
            if sisci.remove_segment(&ring).is_ok() {
                machine.zero_memory(host, ring.phys, ring.size);
            }
            return Err(e.into());
        }
        self.dma_engines.borrow_mut().insert(adapter);
        let live = Rc::new(LiveDmaQueue {
            host,
            adapter,
            number,
            endpoint,
            ring,
            queue: RefCell::new(None),
            windows: RefCell::default(),
        });
        // Recorded at once, so a program that leaves meanwhile gives it back.
        let handle = self.keep(conn, Object::DmaQueue(Rc::clone(&live)));
        let (table, engines) = (Rc::clone(&self.table), Rc::clone(&self.dma_engines));
        let cpu = machine.cpu(host);
        self.answer_later(conn, Some(handle), async move {
            let memory = QueueMemory {
                cpu: ring.phys,
                bus: BusAddr(ring.phys.get()),
            };
            match SisciDmaQueue::create(cpu, bar0, memory, entries).await {
                Ok(q) => {
                    *live.queue.borrow_mut() = Some(Rc::new(q));
                    Ok::<_, SciError>(Reply::Made(handle))
                }
                Err(e) => {
                    table.borrow_mut().objects.remove(&handle);
                    live.free(&sisci, &machine, &engines);
                    Ok(dma_reply(Err(e)))
                }
            }
        });
        Ok(None)
    }

    fn start_dma(
        &mut self,
        conn: u64,
        queue: Handle,
        local: Handle,
        remote: Handle,
        entries: &[DmaEntry],
        flags: u32,
    ) -> Result<Answer, RequestError> {
        let live = self.dma_queue(conn, queue)?;
        let q = live.queue()?;
        let seg = self.resolve(conn, local, Scope::Process, "segment handle", |o| match o {
            Object::Segment(s) => Some(*s),
            _ => None,
        })?;
        let r: RemoteSegment = self.resolve(
            conn,
            remote,
            Scope::Process,
            "connection handle",
            |o| match o {
                Object::Remote(r) => Some(*r),
                _ => None,
            },
        )?;
        let sisci = self.smartio.sisci().clone();
        if seg.host != live.host || !sisci.is_prepared(&seg, live.number)? {
            return Err(SciError::NotPrepared {
                host: self.cluster.machine.fabric().host(seg.host).name.clone(),
                id: seg.id,
                adapter: live.number,
            }
            .into());
        }
        if r.adapter != live.adapter || !matches!(r.target, LutTarget::Adapter(_)) {
            return Err(Refused::OtherAdapter {
                connection: remote,
                adapter: live.number,
            }
            .into());
        }
        let vector: Vec<VecEntry> = entries
            .iter()
            .map(|e| VecEntry {
                size: e.size,
                local_offset: e.local_offset,
                remote_offset: e.remote_offset,
                flags: e.flags,
            })
            .collect();
        let vector = match Vector::check(&vector, flags, seg.size, r.size) {
            Ok(v) => v,
            Err(e) => return Ok(Some((dma_reply(Err(e)), None))),
        };
        let window = sisci.map_remote(&r, vector.remote_start, vector.remote_span())?;
        self.answer_later(conn, Some(queue), async move {
            let started = q
                .start(&vector, BusAddr(seg.phys.get()), window.bus_addr())
                .await;
            Ok::<_, SciError>(dma_reply(match started {
                Ok(batch) => {
                    live.windows.borrow_mut().push((batch.end, window));
                    Ok(Reply::Value(batch.end))
                }
                Err(e) => {
                    let _ = sisci.unmap(&window);
                    Err(e)
                }
            }))
        });
        Ok(None)
    }

    /// Releases a DMA queue (its program removed it or left): at once when nothing is in
    /// flight, else after its transfers are aborted and have ended.
    pub(crate) fn release_dma_queue(&self, live: &Rc<LiveDmaQueue>) {
        let sisci = self.smartio.sisci().clone();
        let machine = self.cluster.machine.clone();
        let engines = Rc::clone(&self.dma_engines);
        let q = live.queue.borrow().clone();
        match q.filter(|q| q.outstanding() > 0) {
            None => live.free(&sisci, &machine, &engines),
            Some(q) => {
                let live = Rc::clone(live);
                let on_task = machine.clone();
                let releasing = Rc::clone(&self.dma_releasing);
                releasing.set(releasing.get() + 1);
                machine.spawn(async move {
                    let _ = q.abort().await;
                    let _ = q.wait(None).await;
                    live.free(&sisci, &on_task, &engines);
                    releasing.set(releasing.get().saturating_sub(1));
                });
            }
        }
    }
}
