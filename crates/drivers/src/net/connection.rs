//! One connection's protocol state, without time or I/O: what a received segment changes,
//! which segment to send next, what a retransmission timeout does. The stream
//! ([`super::stream`]) drives it and charges the costs; this module only decides.
//!
//! Sequence numbers are 64-bit byte offsets: the SYN takes 0, data starts at 1, the FIN takes
//! the number after the last data byte. The receiver accepts only in-order segments (an
//! out-of-order one is dropped and answered with a duplicate acknowledgement); the sender goes
//! back to the first unacknowledged byte on a loss (go-back-N), detected by three duplicate
//! acknowledgements or the retransmission timer. Acknowledgements go out for every second
//! data segment and whenever the segments waiting to be processed run out.

use super::congestion::{Congestion, DuplicateAck};
use super::segment::{flags, Segment};
use std::collections::VecDeque;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The client sent its SYN and waits for the SYN-ACK.
    SynSent,
    /// Data may flow.
    Established,
    /// The peer reset the connection.
    Reset,
}

/// The sizes a connection works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload per segment.
    pub mss: u64,
    /// Bytes the receive buffer holds (the largest window this side advertises).
    pub receive_window: u64,
    /// Bytes the send buffer holds (written, not yet acknowledged).
    pub send_buffer: u64,
}

/// What processing one received segment asks the stream to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reaction {
    /// Send an acknowledgement now.
    pub ack_now: bool,
    /// New bytes were acknowledged (or a loss was detected): the sender may send again.
    pub sender_may_proceed: bool,
    /// New data or the FIN arrived for the reader.
    pub readable: bool,
}

/// A connection's state.
#[derive(Debug)]
pub struct Connection {
    limits: Limits,
    phase: Phase,
    // Sender.
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    /// Data from `snd_una` on: sent-unacknowledged, then unsent.
    send_buf: VecDeque<u8>,
    fin_queued: bool,
    fin_acked: bool,
    peer_window: u64,
    congestion: Congestion,
    /// After a timeout with a closed peer window: one byte may go past it (a window probe).
    probe: bool,
    retransmissions: u64,
    // Receiver.
    rcv_nxt: u64,
    recv_buf: VecDeque<u8>,
    peer_fin: bool,
    unacked_segments: u32,
    advertised: u64,
}

impl Connection {
    /// The client's side after sending its SYN (sequence number 0).
    pub fn client(limits: Limits) -> Connection {
        Self::new(limits, Phase::SynSent, 0, 0)
    }

    /// The server's side on receiving a SYN at `peer_seq` advertising `peer_window`: it
    /// answers with a SYN-ACK at sequence number 0 and is established (a lost SYN-ACK is sent
    /// again when the client's SYN is).
    pub fn server(limits: Limits, peer_seq: u64, peer_window: u64) -> Connection {
        let mut c = Self::new(limits, Phase::Established, peer_seq + 1, peer_window);
        c.snd_una = 1;
        c.snd_nxt = 1;
        c.snd_max = 1;
        c
    }

    fn new(limits: Limits, phase: Phase, rcv_nxt: u64, peer_window: u64) -> Connection {
        Connection {
            limits,
            phase,
            snd_una: 0,
            snd_nxt: 1,
            snd_max: 1,
            send_buf: VecDeque::new(),
            fin_queued: false,
            fin_acked: false,
            peer_window,
            congestion: Congestion::new(limits.mss),
            probe: false,
            retransmissions: 0,
            rcv_nxt,
            recv_buf: VecDeque::new(),
            peer_fin: false,
            unacked_segments: 0,
            advertised: limits.receive_window,
        }
    }

    /// The connection's phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Segments sent again after a loss.
    pub fn retransmissions(&self) -> u64 {
        self.retransmissions
    }

    /// Free bytes in the send buffer.
    pub fn send_space(&self) -> u64 {
        self.limits
            .send_buffer
            .saturating_sub(self.send_buf.len() as u64)
    }

    /// Appends application data to the send buffer (the caller keeps to [`Self::send_space`]).
    pub fn queue_data(&mut self, data: &[u8]) {
        self.send_buf.extend(data);
    }

    /// The application closed its side: a FIN follows the data.
    pub fn queue_fin(&mut self) {
        self.fin_queued = true;
    }

    /// Sequence number of the FIN (one past the last data byte).
    fn fin_seq(&self) -> u64 {
        self.snd_una + self.send_buf.len() as u64
    }

    /// Whether everything written, and the FIN if queued, was acknowledged.
    pub fn all_acknowledged(&self) -> bool {
        self.send_buf.is_empty() && (!self.fin_queued || self.fin_acked)
    }

    /// The first sequence number not yet acknowledged.
    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }

    /// Bytes (and FIN) ever sent and not yet acknowledged (also after going back).
    pub fn outstanding(&self) -> u64 {
        self.snd_max - self.snd_una
    }

    /// Bytes (and FIN) sent and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    /// The window this side advertises: free receive-buffer space.
    pub fn window(&self) -> u64 {
        self.limits
            .receive_window
            .saturating_sub(self.recv_buf.len() as u64)
    }

    /// A bare acknowledgement of everything received so far (the ports are the stream's).
    pub fn acknowledgement(&mut self) -> Segment {
        self.unacked_segments = 0;
        self.advertised = self.window();
        Segment {
            src_port: 0,
            dst_port: 0,
            flags: flags::ACK,
            window: clamp_window(self.advertised),
            seq: self.snd_nxt,
            ack: self.rcv_nxt,
            payload: Vec::new(),
        }
    }

    /// Whether acknowledgements are owed (processing ran dry with some unanswered).
    pub fn owes_acknowledgement(&self) -> bool {
        self.unacked_segments > 0
    }

    /// The next segment the windows allow, if any (its ports are the stream's to fill in).
    pub fn next_segment(&mut self) -> Option<Segment> {
        if self.phase != Phase::Established {
            return None;
        }
        let offset = self.snd_nxt - self.snd_una;
        let unsent = (self.send_buf.len() as u64).saturating_sub(offset);
        let window = self.congestion.window().min(self.peer_window);
        let room = window.saturating_sub(self.in_flight());
        let (len, fin) = if unsent > 0 {
            let room = if room == 0 && self.probe && self.in_flight() == 0 {
                1
            } else {
                room
            };
            (unsent.min(self.limits.mss).min(room), false)
        } else {
            let fin_due = self.fin_queued && !self.fin_acked && self.snd_nxt == self.fin_seq();
            (0, fin_due)
        };
        if len == 0 && !fin {
            return None;
        }
        self.probe = false;
        let start = offset as usize;
        let payload: Vec<u8> = self
            .send_buf
            .range(start..start + len as usize)
            .copied()
            .collect();
        let seq = self.snd_nxt;
        self.snd_nxt += len + u64::from(fin);
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.unacked_segments = 0;
        self.advertised = self.window();
        Some(Segment {
            src_port: 0,
            dst_port: 0,
            flags: flags::ACK | if fin { flags::FIN } else { 0 },
            window: clamp_window(self.advertised),
            seq,
            ack: self.rcv_nxt,
            payload,
        })
    }

    /// Processes a segment of this connection.
    pub fn on_segment(&mut self, seg: &Segment) -> Reaction {
        let mut r = Reaction::default();
        if seg.has(flags::RST) {
            self.phase = Phase::Reset;
            r.sender_may_proceed = true;
            r.readable = true;
            return r;
        }
        if seg.has(flags::SYN) {
            if self.phase == Phase::SynSent && seg.has(flags::ACK) && seg.ack == 1 {
                self.phase = Phase::Established;
                self.rcv_nxt = seg.seq + 1;
                self.snd_una = 1;
                self.peer_window = u64::from(seg.window);
                r.sender_may_proceed = true;
            }
            // A SYN-ACK again: ours was a duplicate or our acknowledgement was lost.
            r.ack_now = self.phase == Phase::Established;
            return r;
        }
        if self.phase != Phase::Established {
            return r;
        }
        if seg.has(flags::ACK) {
            self.on_acknowledgement(seg, &mut r);
        }
        if !seg.payload.is_empty() || seg.has(flags::FIN) {
            self.on_data(seg, &mut r);
        }
        r
    }

    fn on_acknowledgement(&mut self, seg: &Segment, r: &mut Reaction) {
        let window_before = self.peer_window;
        self.peer_window = u64::from(seg.window);
        if seg.ack > self.snd_una && seg.ack <= self.snd_max {
            let acked = seg.ack - self.snd_una;
            // Only a FIN takes a number past the data.
            self.fin_acked |= seg.ack > self.fin_seq();
            let data = (acked as usize).min(self.send_buf.len());
            self.send_buf.drain(..data);
            self.snd_una = seg.ack;
            self.snd_nxt = self.snd_nxt.max(self.snd_una);
            self.congestion.on_ack(acked);
            r.sender_may_proceed = true;
        } else if seg.ack == self.snd_una
            && seg.payload.is_empty()
            && !seg.has(flags::FIN)
            && self.snd_max > self.snd_una
            && self.peer_window == window_before
        {
            if self
                .congestion
                .on_duplicate_ack(self.snd_max - self.snd_una)
                == DuplicateAck::Retransmit
            {
                self.go_back();
                r.sender_may_proceed = true;
            }
        } else if self.peer_window > window_before {
            // A window update.
            r.sender_may_proceed = true;
        }
    }

    fn on_data(&mut self, seg: &Segment, r: &mut Reaction) {
        let len = seg.payload.len() as u64;
        if seg.seq != self.rcv_nxt || len > self.window() {
            // Out of order, old, or no room: drop it and repeat what we expect.
            r.ack_now = true;
            return;
        }
        self.recv_buf.extend(&seg.payload);
        self.rcv_nxt += len;
        if seg.has(flags::FIN) {
            self.peer_fin = true;
            self.rcv_nxt += 1;
            r.ack_now = true;
        }
        self.unacked_segments += 1;
        r.ack_now |= self.unacked_segments >= 2;
        r.readable = true;
    }

    /// The retransmission timer expired: go back to the first unacknowledged byte with a
    /// window of one segment, or, with nothing in flight and the peer's window closed, allow
    /// one byte past it. Returns whether something is to be sent again.
    pub fn on_timeout(&mut self) -> bool {
        if self.in_flight() > 0 {
            self.congestion.on_timeout(self.in_flight());
            self.go_back();
            true
        } else if self.peer_window == 0 && !self.send_buf.is_empty() {
            self.probe = true;
            true
        } else {
            false
        }
    }

    /// The tail-loss probe's timer expired (RFC 8985 §7): nothing was acknowledged for a
    /// while with data out, so the tail is taken as lost — the window halves as after three
    /// duplicate acknowledgements, and sending goes back to the first unacknowledged byte (the
    /// receiver keeps only in-order data, so the probe is that byte's segment). Returns
    /// whether anything was out.
    pub fn on_probe_timeout(&mut self) -> bool {
        let flight = self.snd_max - self.snd_una;
        if flight == 0 {
            return false;
        }
        self.congestion.on_tail_loss(flight);
        self.go_back();
        true
    }

    fn go_back(&mut self) {
        self.snd_nxt = self.snd_una;
        self.retransmissions += 1;
    }

    /// Moves up to `buf.len()` received bytes to `buf`: how many, and whether the window
    /// grew enough since it was last advertised that the peer should hear of it (by two
    /// segments, or from below one).
    pub fn take_received(&mut self, buf: &mut [u8]) -> (usize, bool) {
        let n = buf.len().min(self.recv_buf.len());
        for (dst, src) in buf.iter_mut().zip(self.recv_buf.drain(..n)) {
            *dst = src;
        }
        let window = self.window();
        let update = window >= self.advertised + 2 * self.limits.mss
            || (self.advertised < self.limits.mss && window >= self.limits.mss);
        (n, n > 0 && update)
    }

    /// Whether the peer's FIN arrived and every byte before it was read.
    pub fn at_end(&self) -> bool {
        self.peer_fin && self.recv_buf.is_empty()
    }
}

/// The 32-bit window field for `bytes` (larger buffers advertise the largest window).
fn clamp_window(bytes: u64) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
