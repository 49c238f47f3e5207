//! The NIC's Ethernet port: a transmitter that serializes frames at line rate, one frame after
//! the other (a FIFO), and a receive queue of frames in flight towards the NIC — from the
//! wire, or from the internal switch — each due at the virtual time it has fully arrived.
//!
//! Line time of a frame is [`wire_bytes`]`(len) × 8 / rate` (preamble, padding, FCS and
//! inter-frame gap included). Invariant: the receive queue holds at most
//! [`INBOUND_FRAMES`] frames; a frame arriving when it is full is dropped and counted
//! ([`PortCounters::overflow`]), never queued without bound.

use super::network::Attachment;
use crate::ethernet::wire_bytes;
use smartio_platform::{Notify, SimDuration, SimTime};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// Frames the receive queue holds (the NIC's packet buffer: 256 KiB of 256-byte cells
/// holds about this many minimum-size frames).
pub const INBOUND_FRAMES: usize = 1024;

/// Time `len` buffer bytes (header + payload) occupy a link of `rate_bps` bits per second.
pub fn line_time(len: usize, rate_bps: f64) -> SimDuration {
    let bits = (wire_bytes(len) * 8) as f64;
    SimDuration::from_ps((bits / rate_bps * 1e12).round() as u64)
}

/// Where an arriving frame goes inside the NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// From the wire: to the functions whose address matches (every function for a group
    /// address).
    Wire,
    /// From the internal switch: to this one function.
    Function(usize),
}

/// A frame due at the NIC.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// The frame (header + payload).
    pub frame: Vec<u8>,
    /// Where it goes.
    pub delivery: Delivery,
}

/// What the port counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames put on the wire.
    pub wire_tx: u64,
    /// Frames taken off the wire.
    pub wire_rx: u64,
    /// Frames the internal switch carried between functions.
    pub eswitch: u64,
    /// Frames dropped because the receive queue was full.
    pub overflow: u64,
    /// Frames from the wire for no function of this NIC.
    pub filtered: u64,
}

/// The NIC's side of frames in flight towards it.
#[derive(Debug, Default)]
pub struct Inbound {
    queue: RefCell<BTreeMap<(SimTime, u64), Arrival>>,
    sequence: Cell<u64>,
    notify: Notify,
    pub(crate) counters: RefCell<PortCounters>,
}

impl Inbound {
    /// Queues `arrival`, due at `at`; drops and counts it when the queue is full. Frames due
    /// at the same time keep the order they were queued in.
    pub fn push(&self, at: SimTime, arrival: Arrival) {
        let mut q = self.queue.borrow_mut();
        if q.len() >= INBOUND_FRAMES {
            self.counters.borrow_mut().overflow += 1;
            return;
        }
        let seq = self.sequence.get();
        self.sequence.set(seq + 1);
        q.insert((at, seq), arrival);
        self.notify.notify();
    }

    /// When the first frame is due, if any.
    pub fn next_due(&self) -> Option<SimTime> {
        self.queue.borrow().keys().next().map(|(t, _)| *t)
    }

    /// Takes the first frame if it is due at or before `now`.
    pub fn pop_due(&self, now: SimTime) -> Option<Arrival> {
        let mut q = self.queue.borrow_mut();
        let (&key, _) = q.iter().next()?;
        if key.0 > now {
            return None;
        }
        q.remove(&key)
    }

    /// Waits until something was queued since the last wait.
    pub async fn queued(&self) {
        self.notify.notified().await
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.queue.borrow().len()
    }

    /// Whether no frame is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The Ethernet port of one NIC.
#[derive(Debug)]
pub struct EthPort {
    rate_bps: f64,
    mtu: usize,
    /// When the transmitter is free again.
    tx_busy: Cell<SimTime>,
    inbound: std::rc::Rc<Inbound>,
    attachment: RefCell<Option<Attachment>>,
}

impl EthPort {
    /// A port of `rate_bps` bits per second and `mtu` payload bytes, on no network yet.
    pub fn new(rate_bps: f64, mtu: usize) -> Self {
        Self {
            rate_bps,
            mtu,
            tx_busy: Cell::new(SimTime::ZERO),
            inbound: std::rc::Rc::new(Inbound::default()),
            attachment: RefCell::new(None),
        }
    }

    /// Line rate in bits per second.
    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// Payload bytes per frame.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Frames in flight towards the NIC.
    pub fn inbound(&self) -> &std::rc::Rc<Inbound> {
        &self.inbound
    }

    /// Puts the port on a network segment (the cluster does this when it starts models).
    pub(crate) fn attach(&self, attachment: Attachment) {
        *self.attachment.borrow_mut() = Some(attachment);
    }

    /// Whether the port has a link partner.
    pub fn link_up(&self) -> bool {
        self.attachment
            .borrow()
            .as_ref()
            .is_some_and(|a| a.has_partner())
    }

    /// The counters.
    pub fn counters(&self) -> PortCounters {
        *self.inbound.counters.borrow()
    }

    /// Sends `frame` out of the port, asked at `now`: it starts serializing when the
    /// transmitter is free and the network carries it from there. Returns when serialization
    /// starts (the caller waits until then, so at most one frame waits per transmitter).
    pub fn transmit(&self, now: SimTime, frame: Vec<u8>) -> SimTime {
        let start = now.max(self.tx_busy.get());
        let end = start + line_time(frame.len(), self.rate_bps);
        self.tx_busy.set(end);
        self.inbound.counters.borrow_mut().wire_tx += 1;
        if let Some(a) = self.attachment.borrow().as_ref() {
            a.carry(end, frame);
        }
        start
    }

    /// A frame the internal switch hands from one function to another (or a group frame to
    /// the others), due at `at`.
    pub fn loop_back(&self, at: SimTime, arrival: Arrival) {
        self.inbound.counters.borrow_mut().eswitch += 1;
        self.inbound.push(at, arrival);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::{HEADER_BYTES, JUMBO_MTU};

    #[test]
    fn a_jumbo_frame_takes_its_line_time_at_100_gbps() {
        // 9014 buffer bytes + 24 of preamble, FCS and gap = 9038 bytes = 72304 bits.
        assert_eq!(
            line_time(HEADER_BYTES + JUMBO_MTU, 100e9),
            SimDuration::from_ps(723_040)
        );
        assert_eq!(line_time(20, 100e9), SimDuration::from_ps(6_720), "padded");
    }

    #[test]
    fn frames_queue_behind_each_other_on_the_transmitter() {
        let port = EthPort::new(100e9, 1500);
        let t0 = port.transmit(SimTime::ZERO, vec![0; 1514]);
        let t1 = port.transmit(SimTime::ZERO, vec![0; 1514]);
        assert_eq!(t0, SimTime::ZERO);
        assert_eq!(t1, SimTime::ZERO + line_time(1514, 100e9));
        assert_eq!(port.counters().wire_tx, 2);
        assert!(!port.link_up(), "no network");
    }

    #[test]
    fn a_full_receive_queue_drops_and_counts_instead_of_growing() {
        let inbound = Inbound::default();
        for _ in 0..INBOUND_FRAMES + 3 {
            inbound.push(
                SimTime::ZERO,
                Arrival {
                    frame: vec![1],
                    delivery: Delivery::Wire,
                },
            );
        }
        assert_eq!(inbound.len(), INBOUND_FRAMES);
        assert_eq!(inbound.counters.borrow().overflow, 3);
    }

    #[test]
    fn frames_come_out_in_due_order_and_only_when_due() {
        let inbound = Inbound::default();
        let at = |ns| SimTime::ZERO + SimDuration::from_ns(ns);
        for (t, b) in [(20, 2u8), (10, 1), (20, 3)] {
            inbound.push(
                at(t),
                Arrival {
                    frame: vec![b],
                    delivery: Delivery::Wire,
                },
            );
        }
        assert!(inbound.pop_due(at(5)).is_none());
        assert_eq!(inbound.next_due(), Some(at(10)));
        let order: Vec<u8> = std::iter::from_fn(|| inbound.pop_due(at(30)))
            .map(|a| a.frame[0])
            .collect();
        assert_eq!(order, vec![1, 2, 3]);
    }
}
