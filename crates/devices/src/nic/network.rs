//! Ethernet between NIC ports of hosts that share no PCIe fabric: named segments. A NIC's
//! `params.network = "<name>"` puts its port on segment `<name>`. Two ports on a segment are
//! joined by a cable; three or more by a store-and-forward switch with MAC learning.
//!
//! Timing, in virtual time and deterministic (no randomness; ties keep the order frames were
//! sent in):
//! - a cable: the sender's transmitter serializes the frame at its line rate (FIFO, in
//!   [`super::port::EthPort`]), then the frame propagates (`propagation`) and is in the peer's
//!   receive queue;
//! - a switch: the frame reaches the switch after serialization and propagation, the switch
//!   learns the source address's port, waits `hop_latency` (look-up and forwarding), and
//!   queues the frame on each egress link — the learned port, or every other port for a group
//!   or unknown destination. Each egress link serializes at its port's line rate, one frame
//!   after the other (FIFO per link direction, so senders to one port contend), then the
//!   frame propagates to that port. A frame to an address learned on its own ingress port is
//!   filtered.
//!
//! A port alone on its segment (or on none) sends onto a wire nobody listens to.

use super::port::{line_time, Arrival, Delivery, Inbound};
use crate::ethernet::{FrameHeader, MacAddr};
use smartio_platform::{SimDuration, SimTime};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Costs of the network (a calibration `[network]` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkTiming {
    /// A switch's look-up and forwarding time per frame, after the frame is stored.
    pub hop_latency: SimDuration,
    /// Signal propagation along one cable (a port to its peer or to the switch).
    pub propagation: SimDuration,
}

/// A port's place on a segment.
#[derive(Debug)]
struct Link {
    inbound: Rc<Inbound>,
    rate_bps: f64,
    /// When the switch's egress towards this port is free again.
    egress_busy: Cell<SimTime>,
}

/// One named Ethernet segment.
#[derive(Debug)]
pub struct Segment {
    timing: NetworkTiming,
    links: RefCell<Vec<Link>>,
    /// The switch's learned addresses: MAC → port.
    learned: RefCell<BTreeMap<MacAddr, usize>>,
}

impl Segment {
    fn new(timing: NetworkTiming) -> Self {
        Self {
            timing,
            links: RefCell::new(Vec::new()),
            learned: RefCell::new(BTreeMap::new()),
        }
    }

    /// Ports on the segment.
    pub fn ports(&self) -> usize {
        self.links.borrow().len()
    }

    /// Whether a switch joins the ports (three or more), rather than a cable.
    pub fn is_switched(&self) -> bool {
        self.ports() >= 3
    }

    /// Carries `frame`, sent by port `from` and fully serialized at `sent`.
    fn carry(&self, from: usize, sent: SimTime, frame: Vec<u8>) {
        let links = self.links.borrow();
        let wire = |frame| Arrival {
            frame,
            delivery: Delivery::Wire,
        };
        let prop = self.timing.propagation;
        if links.len() < 3 {
            // A cable (or nobody): the peer, if any.
            if let Some(peer) = links.iter().enumerate().find(|(i, _)| *i != from) {
                peer.1.inbound.push(sent + prop, wire(frame));
            }
            return;
        }
        let Ok(header) = FrameHeader::parse(&frame) else {
            // The NIC sends nothing shorter than a header; a switch would drop a runt.
            return;
        };
        if !header.src.is_group() {
            self.learned.borrow_mut().insert(header.src, from);
        }
        let learned = if header.dst.is_group() {
            None
        } else {
            self.learned.borrow().get(&header.dst).copied()
        };
        let egress: Vec<usize> = match learned {
            Some(to) if to == from => return,
            Some(to) => vec![to],
            None => (0..links.len()).filter(|&i| i != from).collect(),
        };
        let ready = sent + prop + self.timing.hop_latency;
        let last = egress.len().saturating_sub(1);
        let mut frame = Some(frame);
        for (n, to) in egress.into_iter().enumerate() {
            let Some(link) = links.get(to) else { continue };
            // The last egress takes the frame itself, the others a copy.
            let copy = if n == last {
                frame.take().unwrap_or_default()
            } else {
                frame.clone().unwrap_or_default()
            };
            let start = ready.max(link.egress_busy.get());
            let done = start + line_time(copy.len(), link.rate_bps);
            link.egress_busy.set(done);
            link.inbound.push(done + prop, wire(copy));
        }
    }
}

/// A port's attachment to its segment.
#[derive(Debug, Clone)]
pub(crate) struct Attachment {
    segment: Rc<Segment>,
    index: usize,
}

impl Attachment {
    /// Whether another port is on the segment.
    pub(crate) fn has_partner(&self) -> bool {
        self.segment.ports() >= 2
    }

    /// Carries a frame this port finished serializing at `sent`.
    pub(crate) fn carry(&self, sent: SimTime, frame: Vec<u8>) {
        self.segment.carry(self.index, sent, frame);
    }
}

/// Every Ethernet segment of a cluster (built by the cluster when it starts the models, like
/// the GPUs' kernel library: one per cluster, shared by every NIC).
#[derive(Debug)]
pub struct Network {
    timing: NetworkTiming,
    segments: RefCell<BTreeMap<String, Rc<Segment>>>,
}

impl Network {
    /// No segments yet.
    pub fn new(timing: NetworkTiming) -> Self {
        Self {
            timing,
            segments: RefCell::new(BTreeMap::new()),
        }
    }

    /// The costs.
    pub fn timing(&self) -> NetworkTiming {
        self.timing
    }

    /// Puts `port` on segment `name` (created at its first port). Ports join in the order
    /// the cluster starts the NICs (fabric endpoint order), so runs are deterministic.
    pub fn attach(&self, name: &str, port: &super::port::EthPort) {
        let segment = self
            .segments
            .borrow_mut()
            .entry(name.to_string())
            .or_insert_with(|| Rc::new(Segment::new(self.timing)))
            .clone();
        let index = {
            let mut links = segment.links.borrow_mut();
            links.push(Link {
                inbound: port.inbound().clone(),
                rate_bps: port.rate_bps(),
                egress_busy: Cell::new(SimTime::ZERO),
            });
            links.len() - 1
        };
        port.attach(Attachment { segment, index });
    }

    /// The segment named `name`, if a port is on it.
    pub fn segment(&self, name: &str) -> Option<Rc<Segment>> {
        self.segments.borrow().get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::super::port::EthPort;
    use super::*;

    const TIMING: NetworkTiming = NetworkTiming {
        hop_latency: SimDuration::from_ns(300),
        propagation: SimDuration::from_ns(10),
    };

    fn frame(dst: u8, src: u8, len: usize) -> Vec<u8> {
        let mut f = FrameHeader {
            dst: MacAddr([2, 0, 0, 0, 0, dst]),
            src: MacAddr([2, 0, 0, 0, 0, src]),
            ethertype: 0x88b5,
        }
        .frame(&[]);
        f.resize(len, 0xab);
        f
    }

    fn ports(n: usize) -> (Network, Vec<EthPort>) {
        let net = Network::new(TIMING);
        let ports: Vec<EthPort> = (0..n).map(|_| EthPort::new(100e9, 1500)).collect();
        for p in &ports {
            net.attach("lan", p);
        }
        (net, ports)
    }

    #[test]
    fn a_cable_delivers_after_serialization_and_propagation() {
        let (net, p) = ports(2);
        assert!(p[0].link_up() && !net.segment("lan").expect("made").is_switched());
        p[0].transmit(SimTime::ZERO, frame(2, 1, 1514));
        let due = SimTime::ZERO + line_time(1514, 100e9) + TIMING.propagation;
        assert_eq!(p[1].inbound().next_due(), Some(due));
        assert!(!p[1].inbound().is_empty(), "the peer's frame is queued");
        assert!(p[0].inbound().is_empty(), "nothing comes back");
    }

    #[test]
    fn a_switch_floods_unknown_destinations_then_forwards_to_the_learned_port() {
        let (net, p) = ports(3);
        assert!(net.segment("lan").expect("made").is_switched());
        p[0].transmit(SimTime::ZERO, frame(2, 1, 100));
        assert_eq!(
            (p[1].inbound().len(), p[2].inbound().len()),
            (1, 1),
            "flooded"
        );
        // Port 1 answers: the switch learned address 1 on port 0 and sends only there.
        p[1].transmit(SimTime::ZERO, frame(1, 2, 100));
        assert_eq!(p[0].inbound().len(), 1);
        assert_eq!(p[2].inbound().len(), 1, "not flooded again");
        let ser = line_time(100, 100e9);
        let due = SimTime::ZERO
            + ser
            + TIMING.propagation
            + TIMING.hop_latency
            + ser
            + TIMING.propagation;
        assert_eq!(p[0].inbound().next_due(), Some(due), "store and forward");
    }

    #[test]
    fn a_frame_to_an_address_learned_on_its_own_ingress_port_is_filtered() {
        let (_net, p) = ports(3);
        // Addresses 1 and 3 both learned on port 0 (two stations behind it).
        p[0].transmit(SimTime::ZERO, frame(0xff, 1, 100));
        p[0].transmit(SimTime::ZERO, frame(0xff, 3, 100));
        let before: Vec<usize> = p.iter().map(|q| q.inbound().len()).collect();
        p[0].transmit(SimTime::ZERO, frame(3, 1, 100));
        let after: Vec<usize> = p.iter().map(|q| q.inbound().len()).collect();
        assert_eq!(after, before, "neither back to port 0 nor flooded");
    }

    #[test]
    fn a_port_alone_on_its_segment_has_no_link_until_a_second_joins() {
        let net = Network::new(TIMING);
        let a = EthPort::new(100e9, 1500);
        net.attach("lan", &a);
        assert!(!a.link_up(), "nobody listens");
        let b = EthPort::new(100e9, 1500);
        net.attach("lan", &b);
        assert!(a.link_up() && b.link_up());
    }

    #[test]
    fn two_senders_to_one_port_of_a_switch_contend_for_its_egress_link() {
        let (_net, p) = ports(3);
        p[0].transmit(SimTime::ZERO, frame(0xff, 1, 9014));
        p[1].transmit(SimTime::ZERO, frame(0xff, 2, 9014));
        let ser = line_time(9014, 100e9);
        let first = SimTime::ZERO
            + ser
            + TIMING.propagation
            + TIMING.hop_latency
            + ser
            + TIMING.propagation;
        let inbound = p[2].inbound();
        assert_eq!(inbound.pop_due(first).map(|a| a.frame.len()), Some(9014));
        assert!(
            inbound.pop_due(first).is_none(),
            "the second waits for the link"
        );
        assert!(inbound.pop_due(first + ser).is_some());
    }
}
