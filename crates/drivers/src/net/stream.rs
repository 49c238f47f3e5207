//! The two things a stack hands out: a [`Listener`] on a port and a [`Stream`], one end of a
//! connection, whose calls run the protocol ([`super::connection`]) and charge its costs in
//! the calling task: copies, segments sent and received, the retransmission timer.

use super::connection::Phase;
use super::segment::{flags, Segment};
use super::stack::{
    Conn, Inner, Listening, NetError, NetStack, MAX_RETRANSMISSIONS, MAX_RETRANSMIT_TIMEOUT,
    SYN_ATTEMPTS,
};
use super::FrameLink;
use smartio_devices::ethernet::MacAddr;
use smartio_platform::{race, Clock, Either, SimDuration};
use std::cell::Cell;
use std::rc::Rc;

/// Connections arriving at a listened port.
pub struct Listener<L, C> {
    pub(super) stack: NetStack<L, C>,
    pub(super) listening: Rc<Listening>,
}

impl<L: FrameLink + 'static, C: Clock + 'static> Listener<L, C> {
    /// The next connection.
    pub async fn accept(&self) -> Result<Stream<L, C>, NetError> {
        loop {
            if let Some(conn) = self.listening.backlog.borrow_mut().pop_front() {
                return Ok(Stream {
                    stack: self.stack.clone(),
                    conn,
                });
            }
            self.stack.inner.check()?;
            self.listening.arrived.notified().await;
        }
    }
}

/// One end of a connection: a reliable, ordered byte stream. One task writes and one task
/// reads at a time.
pub struct Stream<L, C> {
    pub(super) stack: NetStack<L, C>,
    pub(super) conn: Rc<Conn>,
}

impl<L: FrameLink + 'static, C: Clock + 'static> Stream<L, C> {
    /// The peer's address and port.
    pub fn peer(&self) -> (MacAddr, u16) {
        (self.conn.peer, self.conn.peer_port)
    }

    /// This end's port.
    pub fn local_port(&self) -> u16 {
        self.conn.local_port
    }

    /// Segments this end sent again after a loss.
    pub fn retransmissions(&self) -> u64 {
        self.conn.state.borrow().retransmissions()
    }

    fn inner(&self) -> &Inner<L, C> {
        &self.stack.inner
    }

    fn reset_error(&self) -> NetError {
        NetError::Reset {
            peer: self.conn.peer,
            port: self.conn.peer_port,
        }
    }

    async fn send(&self, mut seg: Segment) -> Result<(), NetError> {
        seg.src_port = self.conn.local_port;
        seg.dst_port = self.conn.peer_port;
        self.inner().send(self.conn.peer, &seg).await
    }

    /// Processes the segments waiting for this connection, acknowledging as the protocol
    /// asks. Returns whether the sender may proceed.
    async fn process(&self) -> Result<bool, NetError> {
        self.inner().check()?;
        let mut proceed = false;
        loop {
            let Some(seg) = self.conn.inbox.borrow_mut().pop_front() else {
                break;
            };
            self.inner()
                .clock
                .sleep(self.inner().costs.segment_receive)
                .await;
            let reaction = self.conn.state.borrow_mut().on_segment(&seg);
            let (snd_una, retransmissions) = {
                let state = self.conn.state.borrow();
                (state.snd_una(), state.retransmissions())
            };
            let mut rtt = self.conn.rtt.get();
            rtt.on_ack(snd_una, self.inner().clock.now(), retransmissions);
            self.conn.rtt.set(rtt);
            proceed |= reaction.sender_may_proceed;
            if reaction.ack_now {
                self.acknowledge().await?;
            }
        }
        if self.conn.state.borrow().owes_acknowledgement() {
            self.acknowledge().await?;
        }
        Ok(proceed)
    }

    async fn acknowledge(&self) -> Result<(), NetError> {
        let ack = self.conn.state.borrow_mut().acknowledgement();
        self.inner()
            .clock
            .sleep(self.inner().costs.segment_send)
            .await;
        self.send(ack).await
    }

    /// Sends what the windows allow.
    async fn transmit(&self) -> Result<(), NetError> {
        loop {
            let Some(seg) = self.conn.state.borrow_mut().next_segment() else {
                return Ok(());
            };
            self.inner()
                .clock
                .sleep(self.inner().costs.segment_send)
                .await;
            if seg.seq_len() > 0 {
                let mut rtt = self.conn.rtt.get();
                let retransmissions = self.conn.state.borrow().retransmissions();
                rtt.on_send(
                    seg.seq + seg.seq_len(),
                    self.inner().clock.now(),
                    retransmissions,
                );
                self.conn.rtt.set(rtt);
            }
            self.send(seg).await?;
        }
    }

    /// Waits for news for the sender. With data unacknowledged, the tail-loss probe fires
    /// first (once per stall, after twice the smoothed round trip, at least the calibrated
    /// floor) and goes back to the first unacknowledged byte; then the retransmission
    /// timeout (doubling while nothing is acknowledged) does the same from one segment.
    /// After [`MAX_RETRANSMISSIONS`] timeouts in a row with nothing heard from the peer the
    /// next one gives the connection up ([`NetError::Unacknowledged`]).
    async fn wait_as_sender(&self, timers: &Timers) -> Result<(), NetError> {
        let costs = self.inner().costs;
        let probe = self.conn.rtt.get().probe_timeout(costs.probe_timeout_min);
        let probing = !timers.probed.get()
            && probe.as_ps() < timers.rto.get().as_ps()
            && self.conn.state.borrow().outstanding() > 0;
        let wait = if probing { probe } else { timers.rto.get() };
        match race(
            self.conn.for_writer.notified(),
            self.inner().clock.sleep(wait),
        )
        .await
        {
            Either::Left(()) => {
                // The peer answered: it is alive, whatever it said (a zero window too).
                timers.expired.set(0);
                if self.process().await? {
                    timers.rto.set(costs.retransmit_timeout);
                    timers.probed.set(false);
                }
            }
            Either::Right(()) if probing => {
                if self.conn.state.borrow_mut().on_probe_timeout() {
                    timers.probed.set(true);
                }
            }
            Either::Right(()) => {
                if timers.expired.get() >= MAX_RETRANSMISSIONS {
                    return Err(NetError::Unacknowledged {
                        peer: self.conn.peer,
                        port: self.conn.peer_port,
                        retransmissions: timers.expired.get(),
                        bytes: self.conn.state.borrow().outstanding(),
                        mss: self.stack.inner.limits.mss,
                    });
                }
                if self.conn.state.borrow_mut().on_timeout() {
                    timers.expired.set(timers.expired.get() + 1);
                    let doubled = timers.rto.get().as_ps().saturating_mul(2);
                    timers.rto.set(SimDuration::from_ps(
                        doubled.min(MAX_RETRANSMIT_TIMEOUT.as_ps()),
                    ));
                }
            }
        }
        if self.conn.state.borrow().phase() == Phase::Reset {
            return Err(self.reset_error());
        }
        Ok(())
    }

    pub(super) async fn handshake(&self) -> Result<(), NetError> {
        let timeout = Cell::new(self.inner().costs.retransmit_timeout);
        for _ in 0..SYN_ATTEMPTS {
            let syn = Segment {
                src_port: 0,
                dst_port: 0,
                flags: flags::SYN,
                window: u32::try_from(self.conn.state.borrow().window()).unwrap_or(u32::MAX),
                seq: 0,
                ack: 0,
                payload: Vec::new(),
            };
            self.inner()
                .clock
                .sleep(self.inner().costs.segment_send)
                .await;
            self.send(syn).await?;
            let deadline = self.inner().clock.now().as_ps() + timeout.get().as_ps();
            loop {
                let left = deadline.saturating_sub(self.inner().clock.now().as_ps());
                if left == 0 {
                    break;
                }
                let woke = race(
                    self.conn.for_writer.notified(),
                    self.inner().clock.sleep(SimDuration::from_ps(left)),
                )
                .await;
                if let Either::Left(()) = woke {
                    self.process().await?;
                    match self.conn.state.borrow().phase() {
                        Phase::Established => return Ok(()),
                        Phase::Reset => {
                            return Err(NetError::Refused {
                                peer: self.conn.peer,
                                port: self.conn.peer_port,
                            })
                        }
                        Phase::SynSent => {}
                    }
                }
            }
            timeout.set(SimDuration::from_ps(
                timeout.get().as_ps().saturating_mul(2),
            ));
        }
        Err(NetError::ConnectTimeout {
            peer: self.conn.peer,
            port: self.conn.peer_port,
            attempts: SYN_ATTEMPTS,
        })
    }

    /// The sender's timers: the retransmission timeout in force and whether the tail-loss
    /// probe fired since the last progress.
    fn timers(&self) -> Timers {
        Timers {
            rto: Cell::new(self.inner().costs.retransmit_timeout),
            probed: Cell::new(false),
            expired: Cell::new(0),
        }
    }

    /// Writes `data`: copies it into the send buffer a segment at a time as space frees up and
    /// sends what the windows allow; returns when all of it is buffered (not yet
    /// acknowledged).
    pub async fn write(&self, data: &[u8]) -> Result<(), NetError> {
        let timers = self.timers();
        let mut rest = data;
        while !rest.is_empty() {
            if self.conn.state.borrow().phase() == Phase::Reset {
                return Err(self.reset_error());
            }
            let space = self.conn.state.borrow().send_space() as usize;
            if space == 0 {
                self.transmit().await?;
                self.wait_as_sender(&timers).await?;
                continue;
            }
            // A segment's worth at a time, sending as it goes (as Linux's tcp_sendmsg fills
            // and pushes one segment-sized buffer after another), so the copy of a large
            // write does not hold back what the windows already allow.
            let mss = self.stack.inner.limits.mss as usize;
            let n = space.min(rest.len()).min(mss);
            self.inner().clock.sleep(self.inner().costs.copy(n)).await;
            self.conn.state.borrow_mut().queue_data(&rest[..n]);
            rest = &rest[n..];
            self.process().await?;
            self.transmit().await?;
        }
        Ok(())
    }

    /// Closes this end: sends the FIN after the data and waits until all of it was
    /// acknowledged.
    pub async fn close(&self) -> Result<(), NetError> {
        let timers = self.timers();
        self.conn.state.borrow_mut().queue_fin();
        loop {
            self.transmit().await?;
            if self.conn.state.borrow().all_acknowledged() {
                return Ok(());
            }
            self.wait_as_sender(&timers).await?;
        }
    }

    /// Reads into `buf`: the number of bytes read, 0 at the end of the stream (the peer
    /// closed and everything before its FIN was read).
    pub async fn read(&self, buf: &mut [u8]) -> Result<usize, NetError> {
        loop {
            self.process().await?;
            let (n, update) = self.conn.state.borrow_mut().take_received(buf);
            if n > 0 {
                self.inner().clock.sleep(self.inner().costs.copy(n)).await;
                if update {
                    self.acknowledge().await?;
                }
                return Ok(n);
            }
            let (at_end, reset) = {
                let state = self.conn.state.borrow();
                (state.at_end(), state.phase() == Phase::Reset)
            };
            if at_end {
                return Ok(0);
            }
            if reset {
                return Err(self.reset_error());
            }
            self.conn.for_reader.notified().await;
        }
    }
}

/// A sender's timers while it waits for acknowledgements.
struct Timers {
    /// The retransmission timeout in force (doubled after each expiry, reset by progress).
    rto: Cell<SimDuration>,
    /// The tail-loss probe fired since the last progress.
    probed: Cell<bool>,
    /// Retransmission timeouts since the peer was last heard from.
    expired: Cell<u32>,
}
