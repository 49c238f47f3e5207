//! A host's network stack over one interface ([`FrameLink`]): connections (`connect`,
//! `listen` / `accept`), the receive loop that hands each segment to its connection, and the
//! CPU costs of the socket and transport work, charged in the task that does it.
//!
//! Each connection's segments wait in its own queue until one of its tasks — the writer
//! waiting for acknowledgements, the reader waiting for data — processes them, the way Linux
//! processes a busy socket's backlog in its owner's context; so connections on different
//! cores proceed in parallel and the receive loop only sorts frames. Acknowledgements and data
//! go straight to the interface, which keeps each flow's frames in order.

use super::connection::{Connection, Limits};
use super::rtt::RttEstimator;
use super::segment::{self, flags, Segment, ETHERTYPE};
use super::{FrameLink, LinkError};
use smartio_calibration::Calibration;
use smartio_devices::ethernet::{FrameHeader, MacAddr, HEADER_BYTES};
use smartio_platform::{Clock, Notify, SimDuration};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use thiserror::Error;

/// The CPU costs and sizes of the network stack (calibration `[net_stack]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StackCosts {
    /// Sending one segment.
    pub segment_send: SimDuration,
    /// Receiving one segment.
    pub segment_receive: SimDuration,
    /// Copying between application and socket buffers, bytes per nanosecond.
    pub copy_bytes_per_ns: f64,
    /// The smallest (and first) retransmission timeout.
    pub retransmit_timeout: SimDuration,
    /// Receive buffer per connection.
    pub receive_window: u64,
    /// Send buffer per connection.
    pub send_buffer: u64,
    /// The floor of the tail-loss probe's timeout.
    pub probe_timeout_min: SimDuration,
}

impl StackCosts {
    /// The costs of `cal`'s `[net_stack]`.
    pub fn from_calibration(cal: &Calibration) -> StackCosts {
        let n = &cal.net_stack;
        StackCosts {
            segment_send: SimDuration::from_ns_f64(n.segment_send_ns.value),
            segment_receive: SimDuration::from_ns_f64(n.segment_receive_ns.value),
            copy_bytes_per_ns: n.copy_gb_per_s.value,
            retransmit_timeout: SimDuration::from_ns_f64(n.retransmit_timeout_min_ns.value),
            receive_window: n.receive_window_bytes.value as u64,
            send_buffer: n.send_buffer_bytes.value as u64,
            probe_timeout_min: SimDuration::from_ns_f64(n.probe_timeout_min_ns.value),
        }
    }

    pub(super) fn copy(&self, bytes: usize) -> SimDuration {
        SimDuration::from_ns_f64(bytes as f64 / self.copy_bytes_per_ns)
    }
}

/// Errors of the network stack.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NetError {
    /// The interface failed (fatal for every connection on it).
    #[error(transparent)]
    Link(#[from] LinkError),
    /// Another listener has the port.
    #[error("port {port} is already listened on")]
    PortInUse {
        /// The port.
        port: u16,
    },
    /// Nobody listens on the peer's port.
    #[error("{peer} refused the connection to port {port} (nobody listens there)")]
    Refused {
        /// The peer.
        peer: MacAddr,
        /// Its port.
        port: u16,
    },
    /// The peer never answered.
    #[error("{peer} did not answer a connection to port {port} after {attempts} attempts")]
    ConnectTimeout {
        /// The peer.
        peer: MacAddr,
        /// Its port.
        port: u16,
        /// SYNs sent.
        attempts: u32,
    },
    /// The peer reset the connection.
    #[error("{peer} port {port} reset the connection")]
    Reset {
        /// The peer.
        peer: MacAddr,
        /// Its port.
        port: u16,
    },
    /// Nothing came back from the peer through [`MAX_RETRANSMISSIONS`] retransmission
    /// timeouts in a row: the path to it loses every segment (a dead link, frames larger than
    /// it takes), so the connection is given up at the next timeout, as Linux gives one up
    /// after `tcp_retries2` (15). A peer that answers, if only with a zero window, is alive.
    #[error(
        "{peer} port {port} sent nothing back through {retransmissions} retransmission \
         timeouts in a row ({bytes} bytes unacknowledged, in segments of up to {mss} payload \
         bytes): the connection is given up"
    )]
    Unacknowledged {
        /// The peer.
        peer: MacAddr,
        /// Its port.
        port: u16,
        /// Retransmission timeouts in a row.
        retransmissions: u32,
        /// Bytes (and FIN) sent and not acknowledged.
        bytes: u64,
        /// The sender's largest payload per segment.
        mss: u64,
    },
    /// Every ephemeral port towards this peer is in use.
    #[error("no free local port towards {peer}")]
    NoFreePort {
        /// The peer.
        peer: MacAddr,
    },
}

/// SYNs a `connect` sends before it gives up.
pub(super) const SYN_ATTEMPTS: u32 = 6;
/// Retransmissions after a timeout, in a row with nothing acknowledged, after which the next
/// timeout gives a connection up (Linux `net.ipv4.tcp_retries2`, 15). With the timeout
/// doubling from 200 ms to its 60 s ceiling, the sixteen timeouts take about 8.7 minutes of
/// virtual time, which cost no wall time.
pub const MAX_RETRANSMISSIONS: u32 = 15;
/// The longest retransmission timeout (RFC 6298 §2.5 allows an upper bound of 60 s or more).
pub(super) const MAX_RETRANSMIT_TIMEOUT: SimDuration = SimDuration::from_us(60_000_000);
/// First ephemeral port (IANA dynamic range).
const EPHEMERAL_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;

/// Counts of what the stack sent and received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackCounters {
    /// Segments handed to the interface.
    pub segments_sent: u64,
    /// Segments received for a connection or a listener.
    pub segments_received: u64,
    /// Frames of another EtherType.
    pub other_frames: u64,
    /// Frames addressed to another interface.
    pub not_for_us: u64,
    /// Frames that are not a segment.
    pub malformed: u64,
    /// Segments for no connection and no listener (answered with a reset).
    pub no_connection: u64,
}

type Key = (MacAddr, u16, u16);

pub(super) struct Conn {
    pub(super) peer: MacAddr,
    pub(super) local_port: u16,
    pub(super) peer_port: u16,
    pub(super) state: RefCell<Connection>,
    /// The sender's round-trip estimate.
    pub(super) rtt: Cell<RttEstimator>,
    pub(super) inbox: RefCell<VecDeque<Segment>>,
    pub(super) for_writer: Notify,
    pub(super) for_reader: Notify,
}

pub(super) struct Listening {
    pub(super) backlog: RefCell<VecDeque<Rc<Conn>>>,
    pub(super) arrived: Notify,
}

pub(super) struct Inner<L, C> {
    pub(super) link: L,
    pub(super) clock: C,
    pub(super) costs: StackCosts,
    pub(super) limits: Limits,
    pub(super) conns: RefCell<BTreeMap<Key, Rc<Conn>>>,
    pub(super) listeners: RefCell<BTreeMap<u16, Rc<Listening>>>,
    pub(super) next_port: Cell<u16>,
    pub(super) counters: Cell<StackCounters>,
    /// Set when the interface failed: every call fails with it from then on.
    pub(super) failed: RefCell<Option<LinkError>>,
}

/// A host's network stack on one interface. Cloning shares it.
pub struct NetStack<L, C> {
    pub(super) inner: Rc<Inner<L, C>>,
}

impl<L, C> Clone for NetStack<L, C> {
    fn clone(&self) -> Self {
        NetStack {
            inner: self.inner.clone(),
        }
    }
}

impl<L: FrameLink + 'static, C: Clock + 'static> NetStack<L, C> {
    /// A stack on `link`, charging its costs on `clock`. Nothing is received until
    /// [`NetStack::run`] runs (spawn it).
    pub fn new(link: L, clock: C, costs: StackCosts) -> NetStack<L, C> {
        let mss = link.mtu().saturating_sub(segment::HEADER_BYTES).max(1) as u64;
        NetStack {
            inner: Rc::new(Inner {
                link,
                clock,
                costs,
                limits: Limits {
                    mss,
                    receive_window: costs.receive_window,
                    send_buffer: costs.send_buffer,
                },
                conns: RefCell::default(),
                listeners: RefCell::default(),
                next_port: Cell::new(*EPHEMERAL_PORTS.start()),
                counters: Cell::default(),
                failed: RefCell::default(),
            }),
        }
    }

    /// The interface's address.
    pub fn mac(&self) -> MacAddr {
        self.inner.link.mac()
    }

    /// Largest payload per frame of the interface (its MTU).
    pub fn mtu(&self) -> usize {
        self.inner.link.mtu()
    }

    /// Largest payload per segment.
    pub fn mss(&self) -> u64 {
        self.inner.limits.mss
    }

    /// What the stack sent and received so far.
    pub fn counters(&self) -> StackCounters {
        self.inner.counters.get()
    }

    /// The receive loop: sorts every frame the interface receives to its connection or
    /// listener, until the interface fails (then every connection fails with it).
    pub async fn run(&self) -> LinkError {
        loop {
            match self.inner.link.recv().await {
                Ok(frame) => self.inner.sort(&frame).await,
                Err(e) => {
                    *self.inner.failed.borrow_mut() = Some(e.clone());
                    for conn in self.inner.conns.borrow().values() {
                        conn.for_writer.notify();
                        conn.for_reader.notify();
                    }
                    for l in self.inner.listeners.borrow().values() {
                        l.arrived.notify();
                    }
                    return e;
                }
            }
        }
    }

    /// Accepts connections to `port`.
    pub fn listen(&self, port: u16) -> Result<Listener<L, C>, NetError> {
        let mut listeners = self.inner.listeners.borrow_mut();
        if listeners.contains_key(&port) {
            return Err(NetError::PortInUse { port });
        }
        let listening = Rc::new(Listening {
            backlog: RefCell::default(),
            arrived: Notify::new(),
        });
        listeners.insert(port, listening.clone());
        Ok(Listener {
            stack: self.clone(),
            listening,
        })
    }

    /// Opens a connection to `port` on `peer`: SYN, then the SYN-ACK, resending the SYN on
    /// the retransmission timeout (doubled each time) up to six times.
    pub async fn connect(&self, peer: MacAddr, port: u16) -> Result<Stream<L, C>, NetError> {
        let local_port = self.free_port(peer, port)?;
        let conn = Rc::new(Conn {
            peer,
            local_port,
            peer_port: port,
            state: RefCell::new(Connection::client(self.inner.limits)),
            rtt: Cell::default(),
            inbox: RefCell::default(),
            for_writer: Notify::new(),
            for_reader: Notify::new(),
        });
        self.inner
            .conns
            .borrow_mut()
            .insert((peer, local_port, port), conn.clone());
        let stream = Stream {
            stack: self.clone(),
            conn,
        };
        let result = stream.handshake().await;
        if result.is_err() {
            self.inner
                .conns
                .borrow_mut()
                .remove(&(peer, local_port, port));
        }
        result.map(|()| stream)
    }

    fn free_port(&self, peer: MacAddr, port: u16) -> Result<u16, NetError> {
        let conns = self.inner.conns.borrow();
        for _ in EPHEMERAL_PORTS {
            let p = self.inner.next_port.get();
            let next = if p == *EPHEMERAL_PORTS.end() {
                *EPHEMERAL_PORTS.start()
            } else {
                p + 1
            };
            self.inner.next_port.set(next);
            if !conns.contains_key(&(peer, p, port)) {
                return Ok(p);
            }
        }
        Err(NetError::NoFreePort { peer })
    }
}

impl<L: FrameLink, C: Clock> Inner<L, C> {
    /// The interface's failure, if it failed.
    pub(super) fn check(&self) -> Result<(), NetError> {
        match &*self.failed.borrow() {
            Some(e) => Err(NetError::Link(e.clone())),
            None => Ok(()),
        }
    }

    fn count(&self, f: impl FnOnce(&mut StackCounters)) {
        let mut c = self.counters.get();
        f(&mut c);
        self.counters.set(c);
    }

    /// Sends `seg` (its ports set) to `peer`.
    pub(super) async fn send(&self, peer: MacAddr, seg: &Segment) -> Result<(), NetError> {
        let frame = FrameHeader {
            dst: peer,
            src: self.link.mac(),
            ethertype: ETHERTYPE,
        }
        .frame(&seg.encode());
        self.link.send(frame).await?;
        self.count(|c| c.segments_sent += 1);
        Ok(())
    }

    /// Hands a received frame to its connection, opens a connection for a SYN to a listener,
    /// or answers with a reset.
    async fn sort(&self, frame: &[u8]) {
        let Ok(header) = FrameHeader::parse(frame) else {
            self.count(|c| c.malformed += 1);
            return;
        };
        if header.dst != self.link.mac() && !header.dst.is_group() {
            self.count(|c| c.not_for_us += 1);
            return;
        }
        if header.ethertype != ETHERTYPE {
            self.count(|c| c.other_frames += 1);
            return;
        }
        let Ok(seg) = Segment::decode(&frame[HEADER_BYTES..]) else {
            self.count(|c| c.malformed += 1);
            return;
        };
        let key = (header.src, seg.dst_port, seg.src_port);
        let existing = self.conns.borrow().get(&key).cloned();
        if let Some(conn) = existing {
            self.count(|c| c.segments_received += 1);
            if seg.has(flags::SYN) && !seg.has(flags::ACK) {
                // The client did not get our SYN-ACK: send it again.
                let _ = self.send(header.src, &syn_ack(&conn)).await;
                return;
            }
            conn.inbox.borrow_mut().push_back(seg);
            conn.for_writer.notify();
            conn.for_reader.notify();
            return;
        }
        let listening = self.listeners.borrow().get(&seg.dst_port).cloned();
        match listening {
            Some(l) if seg.has(flags::SYN) && !seg.has(flags::ACK) => {
                self.count(|c| c.segments_received += 1);
                let conn = Rc::new(Conn {
                    peer: header.src,
                    local_port: seg.dst_port,
                    peer_port: seg.src_port,
                    state: RefCell::new(Connection::server(
                        self.limits,
                        seg.seq,
                        u64::from(seg.window),
                    )),
                    rtt: Cell::default(),
                    inbox: RefCell::default(),
                    for_writer: Notify::new(),
                    for_reader: Notify::new(),
                });
                self.conns.borrow_mut().insert(key, conn.clone());
                let _ = self.send(header.src, &syn_ack(&conn)).await;
                l.backlog.borrow_mut().push_back(conn);
                l.arrived.notify();
            }
            _ if seg.has(flags::RST) => self.count(|c| c.no_connection += 1),
            _ => {
                self.count(|c| c.no_connection += 1);
                let reset = Segment {
                    src_port: seg.dst_port,
                    dst_port: seg.src_port,
                    flags: flags::RST,
                    window: 0,
                    seq: 0,
                    ack: 0,
                    payload: Vec::new(),
                };
                let _ = self.send(header.src, &reset).await;
            }
        }
    }
}

fn syn_ack(conn: &Conn) -> Segment {
    let state = conn.state.borrow();
    Segment {
        src_port: conn.local_port,
        dst_port: conn.peer_port,
        flags: flags::SYN | flags::ACK,
        window: u32::try_from(state.window()).unwrap_or(u32::MAX),
        seq: 0,
        ack: 1,
        payload: Vec::new(),
    }
}

pub use super::stream::{Listener, Stream};
