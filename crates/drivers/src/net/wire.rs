//! A point-to-point Ethernet wire for testing the transport without a NIC: two
//! [`FrameLink`] ends, serialization at a line rate per direction (frames queue behind each
//! other; a sender waits until its frame starts), a propagation delay, and losses on purpose
//! (every n-th frame in one direction, or every frame after the first n).

use super::{FrameLink, LinkError};
use smartio_devices::ethernet::{wire_bytes, MacAddr, HEADER_BYTES};
use smartio_platform::{Clock, Notify, SimDuration};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// How the wire behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WireConfig {
    /// Line rate per direction, gigabits per second.
    pub gbit_per_s: f64,
    /// Propagation delay.
    pub latency: SimDuration,
    /// Payload bytes per frame.
    pub mtu: usize,
    /// Drop every n-th frame sent from end A to end B (`None`: no loss).
    pub lose_every: Option<u64>,
    /// Drop every frame end A sends after its first n (`None`: never): a path that dies
    /// once a connection is up.
    pub cut_after: Option<u64>,
}

struct Direction {
    busy_until_ps: Cell<u64>,
    arriving: RefCell<VecDeque<(u64, Vec<u8>)>>,
    notify: Notify,
    sent: Cell<u64>,
}

struct Shared {
    config: WireConfig,
    /// `[A → B, B → A]`.
    dirs: [Direction; 2],
}

/// One end of the wire.
pub struct WireEnd<C> {
    shared: Rc<Shared>,
    clock: C,
    mac: MacAddr,
    /// Index of the direction this end sends on.
    out: usize,
}

/// The two ends of a new wire, with the MAC addresses `a` and `b`, on `clock`.
pub fn wire<C: Clock + Clone>(
    config: WireConfig,
    clock: C,
    a: MacAddr,
    b: MacAddr,
) -> (WireEnd<C>, WireEnd<C>) {
    let dir = || Direction {
        busy_until_ps: Cell::new(0),
        arriving: RefCell::default(),
        notify: Notify::new(),
        sent: Cell::new(0),
    };
    let shared = Rc::new(Shared {
        config,
        dirs: [dir(), dir()],
    });
    (
        WireEnd {
            shared: shared.clone(),
            clock: clock.clone(),
            mac: a,
            out: 0,
        },
        WireEnd {
            shared,
            clock,
            mac: b,
            out: 1,
        },
    )
}

impl<C> WireEnd<C> {
    /// Frames this end sent (lost ones included).
    pub fn frames_sent(&self) -> u64 {
        self.shared.dirs[self.out].sent.get()
    }
}

impl<C: Clock> FrameLink for WireEnd<C> {
    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.shared.config.mtu
    }

    async fn send(&self, frame: Vec<u8>) -> Result<(), LinkError> {
        let config = self.shared.config;
        let len = frame.len().saturating_sub(HEADER_BYTES);
        if len > config.mtu {
            return Err(LinkError::TooLarge {
                len,
                mtu: config.mtu,
            });
        }
        let dir = &self.shared.dirs[self.out];
        let now = self.clock.now().as_ps();
        let start = now.max(dir.busy_until_ps.get());
        let serialize = (wire_bytes(frame.len()) as f64 * 8.0 / config.gbit_per_s * 1000.0) as u64;
        dir.busy_until_ps.set(start + serialize);
        let arrival = start + serialize + config.latency.as_ps();
        let n = dir.sent.get() + 1;
        dir.sent.set(n);
        let lost = self.out == 0
            && (config.lose_every.is_some_and(|k| n.is_multiple_of(k))
                || config.cut_after.is_some_and(|k| n > k));
        if !lost {
            dir.arriving.borrow_mut().push_back((arrival, frame));
            dir.notify.notify();
        }
        if start > now {
            self.clock.sleep(SimDuration::from_ps(start - now)).await;
        }
        Ok(())
    }

    async fn recv(&self) -> Result<Vec<u8>, LinkError> {
        let dir = &self.shared.dirs[1 - self.out];
        loop {
            let head = dir.arriving.borrow().front().map(|(at, _)| *at);
            match head {
                Some(at) => {
                    let now = self.clock.now().as_ps();
                    if at <= now {
                        if let Some((_, frame)) = dir.arriving.borrow_mut().pop_front() {
                            return Ok(frame);
                        }
                    } else {
                        self.clock.sleep(SimDuration::from_ps(at - now)).await;
                    }
                }
                None => dir.notify.notified().await,
            }
        }
    }
}
