//! Round-trip time as a sender measures it (RFC 6298 §2–3): one segment timed at a time,
//! from its sending to the acknowledgement that covers it, never a retransmitted one (Karn's
//! algorithm); the smoothed estimate `SRTT = 7/8 SRTT + 1/8 sample`. It sets the tail-loss
//! probe's timeout (RFC 8985 §7.2: twice SRTT).

use smartio_platform::{SimDuration, SimTime};

/// The estimate and the segment being timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RttEstimator {
    srtt: Option<SimDuration>,
    /// Sequence number just past the timed segment, when it left, and the connection's
    /// retransmission count then.
    timing: Option<(u64, SimTime, u64)>,
}

impl RttEstimator {
    /// A segment ending at `seq_end` left at `now` (`retransmissions` so far): timed unless
    /// another segment is.
    pub fn on_send(&mut self, seq_end: u64, now: SimTime, retransmissions: u64) {
        if self.timing.is_none() {
            self.timing = Some((seq_end, now, retransmissions));
        }
    }

    /// Everything before `snd_una` is acknowledged at `now`: the timed segment, if covered,
    /// gives a sample unless the connection retransmitted since it left.
    pub fn on_ack(&mut self, snd_una: u64, now: SimTime, retransmissions: u64) {
        let Some((end, sent, r)) = self.timing else {
            return;
        };
        if snd_una < end {
            return;
        }
        self.timing = None;
        if r != retransmissions {
            return;
        }
        let sample = now.since(sent).as_ps();
        self.srtt = Some(SimDuration::from_ps(match self.srtt {
            None => sample,
            Some(s) => (7 * s.as_ps() + sample) / 8,
        }));
    }

    /// The smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<SimDuration> {
        self.srtt
    }

    /// When to probe a tail that is not acknowledged: twice SRTT, at least `floor` (and
    /// `floor` before any sample).
    pub fn probe_timeout(&self, floor: SimDuration) -> SimDuration {
        let twice = self.srtt.map_or(0, |s| s.as_ps().saturating_mul(2));
        SimDuration::from_ps(twice.max(floor.as_ps()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;

    #[test]
    fn the_first_sample_is_the_estimate_and_later_ones_move_it_an_eighth() {
        let mut r = RttEstimator::default();
        r.on_send(100, SimTime(0), 0);
        r.on_send(200, SimTime(US), 0); // not timed: one at a time
        r.on_ack(100, SimTime(8 * US), 0);
        assert_eq!(r.srtt(), Some(SimDuration::from_ps(8 * US)));
        r.on_send(300, SimTime(10 * US), 0);
        r.on_ack(300, SimTime(26 * US), 0);
        assert_eq!(r.srtt(), Some(SimDuration::from_ps(9 * US)));
    }

    #[test]
    fn a_segment_acknowledged_after_a_retransmission_gives_no_sample() {
        let mut r = RttEstimator::default();
        r.on_send(100, SimTime(0), 0);
        r.on_ack(50, SimTime(US), 0);
        assert_eq!(r.srtt(), None, "not covered yet");
        r.on_ack(100, SimTime(900 * US), 1);
        assert_eq!(r.srtt(), None, "Karn: ambiguous");
    }

    #[test]
    fn the_probe_waits_twice_the_estimate_but_never_less_than_the_floor() {
        let floor = SimDuration::from_us(2000);
        let mut r = RttEstimator::default();
        assert_eq!(r.probe_timeout(floor), floor);
        r.on_send(1, SimTime(0), 0);
        r.on_ack(1, SimTime(5000 * US), 0);
        assert_eq!(r.probe_timeout(floor), SimDuration::from_us(10_000));
        let mut fast = RttEstimator::default();
        fast.on_send(1, SimTime(0), 0);
        fast.on_ack(1, SimTime(20 * US), 0);
        assert_eq!(fast.probe_timeout(floor), floor);
    }
}
