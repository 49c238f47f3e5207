//! The sender's congestion window, as TCP Reno keeps it (RFC 5681): slow start, congestion
//! avoidance, fast retransmit after three duplicate acknowledgements, and a window of one
//! segment after a retransmission timeout. Pure state; the stream drives it.

/// Congestion state of one connection's sender, in bytes.
///
/// Invariant: `cwnd` is at least one segment (`mss`) and `ssthresh` at least two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Congestion {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    duplicate_acks: u32,
}

/// What a duplicate acknowledgement asks of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicateAck {
    /// Keep going.
    Wait,
    /// The third in a row: the segment at the acknowledged sequence number is taken as lost;
    /// send it again now (fast retransmit).
    Retransmit,
}

/// Duplicate acknowledgements that signal a loss (RFC 5681 §3.2).
const DUPLICATE_ACK_THRESHOLD: u32 = 3;

/// Segments in the initial window (RFC 6928).
const INITIAL_WINDOW_SEGMENTS: u64 = 10;

impl Congestion {
    /// A new connection's window: ten segments of `mss` bytes, no threshold yet.
    pub fn new(mss: u64) -> Congestion {
        let mss = mss.max(1);
        Congestion {
            mss,
            cwnd: INITIAL_WINDOW_SEGMENTS * mss,
            ssthresh: u64::MAX,
            duplicate_acks: 0,
        }
    }

    /// Bytes the sender may have in flight.
    pub fn window(&self) -> u64 {
        self.cwnd
    }

    /// Whether the window is still growing exponentially.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// `acked` new bytes were acknowledged: slow start grows the window by up to one segment
    /// per acknowledgement, congestion avoidance by about one segment per window.
    pub fn on_ack(&mut self, acked: u64) {
        self.duplicate_acks = 0;
        if self.in_slow_start() {
            self.cwnd = self.cwnd.saturating_add(acked.min(self.mss));
        } else {
            let step = (self.mss.saturating_mul(self.mss) / self.cwnd).max(1);
            self.cwnd = self.cwnd.saturating_add(step);
        }
    }

    /// An acknowledgement that acknowledged nothing new while `flight` bytes were out.
    pub fn on_duplicate_ack(&mut self, flight: u64) -> DuplicateAck {
        self.duplicate_acks += 1;
        if self.duplicate_acks == DUPLICATE_ACK_THRESHOLD {
            self.ssthresh = self.half(flight);
            self.cwnd = self.ssthresh;
            DuplicateAck::Retransmit
        } else {
            DuplicateAck::Wait
        }
    }

    /// A tail-loss probe found `flight` bytes unacknowledged: the same reduction as a fast
    /// retransmit (RFC 8985 §7.4: a loss repaired by the probe is a congestion event).
    pub fn on_tail_loss(&mut self, flight: u64) {
        self.ssthresh = self.half(flight);
        self.cwnd = self.ssthresh;
        self.duplicate_acks = 0;
    }

    /// The retransmission timer expired with `flight` bytes out: start again from one
    /// segment.
    pub fn on_timeout(&mut self, flight: u64) {
        self.ssthresh = self.half(flight);
        self.cwnd = self.mss;
        self.duplicate_acks = 0;
    }

    fn half(&self, flight: u64) -> u64 {
        (flight / 2).max(2 * self.mss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 8960;

    #[test]
    fn slow_start_doubles_the_window_every_round_trip() {
        let mut c = Congestion::new(MSS);
        assert_eq!(c.window(), 10 * MSS);
        // One round trip: every segment of the window is acknowledged.
        for _ in 0..10 {
            c.on_ack(MSS);
        }
        assert_eq!(c.window(), 20 * MSS);
        assert!(c.in_slow_start());
    }

    #[test]
    fn three_duplicate_acks_halve_the_window_and_ask_for_a_retransmission() {
        let mut c = Congestion::new(MSS);
        let flight = 40 * MSS;
        assert_eq!(c.on_duplicate_ack(flight), DuplicateAck::Wait);
        assert_eq!(c.on_duplicate_ack(flight), DuplicateAck::Wait);
        assert_eq!(c.on_duplicate_ack(flight), DuplicateAck::Retransmit);
        assert_eq!(c.window(), 20 * MSS);
        assert!(!c.in_slow_start());
        // Congestion avoidance: about one segment more per window of acknowledgements.
        for _ in 0..20 {
            c.on_ack(MSS);
        }
        assert!(
            c.window() > 20 * MSS && c.window() <= 21 * MSS,
            "{}",
            c.window()
        );
    }

    #[test]
    fn a_timeout_leaves_one_segment_and_a_new_acknowledgement_resets_the_duplicate_count() {
        let mut c = Congestion::new(MSS);
        c.on_duplicate_ack(MSS);
        c.on_duplicate_ack(MSS);
        c.on_ack(MSS);
        assert_eq!(c.on_duplicate_ack(MSS), DuplicateAck::Wait);
        c.on_timeout(3 * MSS);
        assert_eq!(c.window(), MSS);
        // The threshold never falls below two segments.
        assert!(c.in_slow_start());
        c.on_ack(MSS);
        assert!(!c.in_slow_start());
    }
}
