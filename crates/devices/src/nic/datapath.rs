//! The NIC's data path: a transmit engine per queue pair of each function, and one receive
//! engine per NIC.
//!
//! Transmit (decode → validate → execute → complete): fetch ready descriptors in batches of
//! up to `fetch_batch` with one DMA read; validate each against the MTU
//! ([`TxDescriptor::validate`]); start reading the buffers of up to `tx_pipeline` frames at
//! once (as a real NIC keeps several read requests outstanding); then, in ring order, pay the
//! per-frame cost, hand the frame to the internal switch (another function) and/or the port
//! (wait until the transmitter takes it), write the status back into the descriptor, advance
//! `TX_HEAD`, and raise the queue's vector if enabled.
//!
//! Receive: take the next frame that is due from the port's receive queue (from the wire or
//! the eswitch), pay the per-frame cost, pick the functions it is for, and for each take the
//! next posted buffer of its first queue pair with an enabled receive ring; with none posted
//! the frame is dropped and counted (`RX_NO_BUFFER`). Otherwise write the frame, then the
//! descriptor (length and status; PCIe ordering makes the data visible first), advance
//! `RX_HEAD`, raise the vector if enabled.

use super::port::{Arrival, Delivery};
use super::queues::{QueuePair, Ring};
use super::regs::{FunctionCounters, NicFunction};
use super::spec::{irq, RingError, RxDescriptor, Status, TxDescriptor, DESCRIPTOR_BYTES};
use super::{switch, Nic};
use crate::ethernet::FrameHeader;
use smartio_platform::{race, BusAddr, Clock, Notify, Port, Spawner};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// A frame's buffer being read.
#[derive(Default)]
struct Read {
    result: RefCell<Option<Result<Vec<u8>, Status>>>,
    done: Notify,
}

impl Read {
    async fn wait(&self) -> Result<Vec<u8>, Status> {
        loop {
            if let Some(r) = self.result.borrow_mut().take() {
                return r;
            }
            self.done.notified().await;
        }
    }
}

/// A descriptor in flight through the transmit engine.
struct InFlight {
    index: u64,
    /// The setup of the ring it came from ([`Ring::setup`]).
    setup: u64,
    read: Rc<Read>,
}

impl InFlight {
    /// Whether `ring` still holds this descriptor for the NIC: the same setup of the ring,
    /// enabled, and the descriptor below its tail (not taken back).
    fn still_posted(&self, ring: &Ring) -> bool {
        ring.enabled && ring.setup == self.setup && self.index < ring.tail
    }
}

/// A transmit engine's work in hand: descriptors fetched and not yet started, frames whose
/// buffers are being read, and the ring they belong to.
#[derive(Default)]
struct TxWork {
    fetched: VecDeque<(u64, TxDescriptor)>,
    in_flight: VecDeque<InFlight>,
    /// The ring's base and setup the work belongs to (both zero before the first look, as a
    /// ring never set up is); a setup fixes the size and the enable.
    ring: (u64, u64),
}

impl TxWork {
    /// Drops what `ring` no longer holds: all of it when the ring was disabled, moved or set
    /// up again (even in place, even between two looks: a new setup restarts it at
    /// descriptor 0), so no descriptor of the old ring is sent or written back; the
    /// descriptors at or above a lowered tail, which are the driver's again.
    fn follow(&mut self, ring: &Ring) {
        let now = (ring.base, ring.setup);
        if now != self.ring {
            self.fetched.clear();
            self.in_flight.clear();
            self.ring = now;
        }
        self.fetched.retain(|(i, _)| *i < ring.tail);
        self.in_flight.retain(|f| f.index < ring.tail);
    }
}

/// Reads `count` descriptors from `at`.
async fn fetch<P: Port>(port: &P, at: BusAddr, count: u64) -> Option<Vec<[u8; 16]>> {
    let bytes = port
        .read_owned(at, (count * DESCRIPTOR_BYTES) as usize)
        .await
        .ok()?;
    Some(
        bytes
            .chunks_exact(DESCRIPTOR_BYTES as usize)
            .map(|c| {
                let mut d = [0u8; 16];
                d.copy_from_slice(c);
                d
            })
            .collect(),
    )
}

impl<P: Port + Clock + Spawner + Clone + 'static> Nic<P> {
    /// Raises vector `q` of function `f` (MSI-X, held pending while masked; or INTx).
    async fn interrupt(&self, f: &NicFunction, q: u16, port: &P) {
        if let Some(m) = f
            .pci
            .with(|c| crate::msix::interrupt_message(c, &f.msix, q))
            .flatten()
        {
            let _ = port.write(m.address, &m.payload()).await;
        }
    }

    /// Queue pair `q` of function `index`'s transmit engine. Runs forever.
    pub(super) async fn transmit_engine(self: Rc<Self>, index: usize, q: u16, port: P) {
        let Some(function) = self.function(index) else {
            return;
        };
        let Some(queue) = function.queue(q) else {
            return;
        };
        let mut work = TxWork::default();
        loop {
            let ring = *queue.tx.borrow();
            work.follow(&ring);
            self.fetch_and_validate(&mut work, &ring, queue, &port)
                .await;
            let Some(next) = work.in_flight.pop_front() else {
                queue.tx_doorbell.notified().await;
                continue;
            };
            let Some(status) = self.transmit(index, &next, queue, &port).await else {
                continue;
            };
            self.complete_tx(&function, q, &next, status, &port).await;
        }
    }

    /// Decode and validate: keeps up to `tx_pipeline` buffers being read, fetching ready
    /// descriptors in batches and checking each against the MTU before its buffer is read.
    async fn fetch_and_validate(
        &self,
        work: &mut TxWork,
        ring: &Ring,
        queue: &QueuePair,
        port: &P,
    ) {
        let timing = self.config.timing;
        while work.in_flight.len() < timing.tx_pipeline.max(1) {
            if work.fetched.is_empty() {
                let next = ring.head + work.in_flight.len() as u64;
                let count = ring.batch(next, timing.fetch_batch.max(1));
                if !ring.enabled || count == 0 {
                    break;
                }
                match fetch(port, ring.descriptor(next), count).await {
                    Some(ds) => work.fetched.extend(
                        ds.iter()
                            .enumerate()
                            .map(|(i, d)| (next + i as u64, TxDescriptor::from_bytes(d))),
                    ),
                    None => {
                        queue.fail(RingError::DescriptorDma);
                        *queue.tx.borrow_mut() = Default::default();
                        break;
                    }
                }
            }
            let Some((i, d)) = work.fetched.pop_front() else {
                break;
            };
            let read = Rc::new(Read::default());
            match d.validate(self.config.mtu) {
                Err(status) => *read.result.borrow_mut() = Some(Err(status)),
                Ok(len) => {
                    let (r, p) = (read.clone(), port.clone());
                    port.spawn_task(Box::pin(async move {
                        let data = p.read_owned(d.buffer, len).await;
                        *r.result.borrow_mut() = Some(data.map_err(|_| Status::DmaFailed));
                        r.done.notify();
                    }));
                }
            }
            work.in_flight.push_back(InFlight {
                index: i,
                setup: ring.setup,
                read,
            });
        }
    }

    /// Execute: once its buffer is read, pays the per-frame cost and sends the frame of
    /// function `index`; its status, or `None` when the driver took the descriptor back
    /// meanwhile (a lowered tail).
    async fn transmit(
        &self,
        index: usize,
        next: &InFlight,
        queue: &QueuePair,
        port: &P,
    ) -> Option<Status> {
        match next.read.wait().await {
            Ok(frame) => {
                port.sleep(self.config.timing.per_frame).await;
                if !next.still_posted(&queue.tx.borrow()) {
                    return None;
                }
                self.send(index, frame, port).await;
                Some(Status::Ok)
            }
            Err(status) => Some(status),
        }
    }

    /// Complete: writes `status` back into the descriptor, advances the head, counts the
    /// frame and raises queue `q`'s vector if enabled.
    async fn complete_tx(
        &self,
        function: &NicFunction,
        q: u16,
        next: &InFlight,
        status: Status,
        port: &P,
    ) {
        let Some(queue) = function.queue(q) else {
            return;
        };
        let ring = *queue.tx.borrow();
        if !next.still_posted(&ring) {
            return;
        }
        let at = ring
            .descriptor(next.index)
            .offset(super::spec::STATUS_OFFSET);
        if port.write(at, &status.code().to_le_bytes()).await.is_err() {
            queue.fail(RingError::DescriptorDma);
        }
        {
            let mut ring = queue.tx.borrow_mut();
            if ring.enabled && ring.setup == next.setup && ring.head == next.index {
                ring.head += 1;
            }
        }
        if status == Status::Ok {
            FunctionCounters::bump(&function.counters.tx_frames);
        }
        if queue.irq() & irq::TX != 0 {
            self.interrupt(function, q, port).await;
        }
    }

    /// Sends a frame function `from` gave the NIC: through the eswitch to other functions,
    /// and out of the port; waits until the transmitter takes it.
    async fn send(&self, from: usize, frame: Vec<u8>, port: &P) {
        let Ok(header) = FrameHeader::parse(&frame) else {
            return;
        };
        let route = switch::route_sent(header.dst, from, &self.macs());
        let now = port.now();
        let at = now + self.config.timing.eswitch;
        let last = route.functions.len();
        let mut frame = Some(frame);
        for (n, to) in route.functions.into_iter().enumerate() {
            let copy = if n + 1 == last && !route.wire {
                frame.take().unwrap_or_default()
            } else {
                frame.clone().unwrap_or_default()
            };
            self.port.loop_back(
                at,
                Arrival {
                    frame: copy,
                    delivery: Delivery::Function(to),
                },
            );
        }
        if let Some(frame) = frame.filter(|_| route.wire) {
            let start = self.port.transmit(now, frame);
            if start > now {
                port.sleep(start - now).await;
            }
        }
    }

    /// The receive engine: delivers due frames, in due order. Runs forever.
    pub(super) async fn receive_engine(&self, clock: P) {
        let inbound = self.port.inbound().clone();
        loop {
            let now = clock.now();
            if let Some(arrival) = inbound.pop_due(now) {
                clock.sleep(self.config.timing.per_frame).await;
                self.deliver(arrival).await;
                continue;
            }
            match inbound.next_due() {
                // A frame queued meanwhile may be due earlier (the eswitch's): wake for it.
                Some(due) => {
                    race(clock.sleep(due - now), inbound.queued()).await;
                }
                None => inbound.queued().await,
            }
        }
    }

    /// Hands `arrival` to the functions it is for.
    async fn deliver(&self, arrival: Arrival) {
        let targets: Vec<usize> = match arrival.delivery {
            Delivery::Wire => {
                let macs = self.macs();
                self.port.inbound().counters.borrow_mut().wire_rx += 1;
                let Ok(header) = FrameHeader::parse(&arrival.frame) else {
                    return;
                };
                let t = switch::route_received(header.dst, &macs);
                if t.is_empty() {
                    self.port.inbound().counters.borrow_mut().filtered += 1;
                }
                t
            }
            Delivery::Function(f) => vec![f],
        };
        for f in targets {
            let (Some(function), Some(port)) = (
                self.function(f),
                self.ports.borrow().get(f).cloned().flatten(),
            ) else {
                continue;
            };
            self.receive(&function, &arrival.frame, &port).await;
        }
    }

    /// Puts `frame` into the next posted buffer of `function`'s first queue pair with an
    /// enabled receive ring, or drops and counts it.
    async fn receive(&self, function: &NicFunction, frame: &[u8], port: &P) {
        let found = function
            .queues
            .iter()
            .enumerate()
            .find(|(_, q)| q.rx.borrow().enabled);
        let Some((q, queue)) = found else {
            FunctionCounters::bump(&function.counters.rx_no_buffer);
            return;
        };
        let ring = *queue.rx.borrow();
        if ring.ready() == 0 {
            FunctionCounters::bump(&function.counters.rx_no_buffer);
            return;
        }
        let index = ring.head;
        let cached = queue.rx_fetched.borrow_mut().pop_front();
        let descriptor = match cached {
            Some((i, d)) if i == index => d,
            _ => {
                queue.rx_fetched.borrow_mut().clear();
                let count = ring.batch(index, self.config.timing.fetch_batch.max(1));
                let Some(ds) = fetch(port, ring.descriptor(index), count).await else {
                    queue.fail(RingError::DescriptorDma);
                    *queue.rx.borrow_mut() = Default::default();
                    FunctionCounters::bump(&function.counters.rx_no_buffer);
                    return;
                };
                let mut ds = ds.iter().map(RxDescriptor::from_bytes);
                let first = ds.next();
                queue
                    .rx_fetched
                    .borrow_mut()
                    .extend(ds.enumerate().map(|(i, d)| (index + 1 + i as u64, d)));
                match first {
                    Some(d) => d,
                    None => return,
                }
            }
        };
        let status = if (descriptor.len as usize) < frame.len() {
            Status::BufferTooSmall
        } else {
            match port.write(descriptor.buffer, frame).await {
                Ok(()) => Status::Ok,
                Err(_) => Status::DmaFailed,
            }
        };
        let written_back = RxDescriptor {
            buffer: descriptor.buffer,
            len: if status == Status::Ok {
                frame.len() as u32
            } else {
                0
            },
            status: status.code(),
        };
        // The ring may have been set up again (even in place) while the frame was written.
        let same = {
            let r = queue.rx.borrow();
            r.enabled && r.setup == ring.setup && r.base == ring.base && r.head == index
        };
        if !same {
            return;
        }
        if port
            .write(ring.descriptor(index), &written_back.to_bytes())
            .await
            .is_err()
        {
            queue.fail(RingError::DescriptorDma);
        }
        {
            let mut r = queue.rx.borrow_mut();
            if r.enabled && r.setup == ring.setup && r.head == index {
                r.head += 1;
            }
        }
        if status == Status::Ok {
            FunctionCounters::bump(&function.counters.rx_frames);
        }
        if queue.irq() & irq::RX != 0 {
            self.interrupt(function, q as u16, port).await;
        }
    }
}
