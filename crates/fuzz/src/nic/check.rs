//! The checks after each drain of the `nic_commands` target: rings within bounds, every
//! transmit descriptor consumed written back with the status its fault predicts, counters that
//! add up to the frames sent, the receive descriptors consumed holding the frames sent to that
//! NIC byte for byte, and host RAM around the harness's area untouched.

use super::host::{payload, Counters, Harness, Posted, Ring, Where, GUARD, REGION};
use super::ops::Op;
use smartio_devices::ethernet::MacAddr;
use smartio_devices::nic::spec::{RxDescriptor, Status, TxDescriptor};
use smartio_fabric::Access;

impl Harness {
    /// The receive ring the NIC fills (the first enabled one) and its posted descriptors.
    pub(super) fn posted(&self, n: usize, rx: &[Ring]) -> Posted {
        let q = rx.iter().position(|r| r.size != 0)?;
        let ring = rx[q];
        let ds = (ring.head..ring.tail)
            .map(
                |i| match self.classify(n, ring.descriptor(i), 16, Access::Read) {
                    Where::Ram(a) => {
                        let b = self.peek(n, a, 16);
                        let mut d = [0u8; 16];
                        d.copy_from_slice(&b);
                        Some(RxDescriptor::from_bytes(&d))
                    }
                    _ => None,
                },
            )
            .collect();
        Some((q, ds))
    }

    pub(super) fn check(
        &self,
        op: &Op,
        before: [Counters; 2],
        rings: &[[Vec<Ring>; 2]; 2],
        posted: &[Posted; 2],
        loose: bool,
    ) {
        let after = [self.counters(0), self.counters(1)];
        let now = [
            [self.rings(0, false), self.rings(0, true)],
            [self.rings(1, false), self.rings(1, true)],
        ];
        // HEAD never passes TAIL; TAIL never more than SIZE ahead; a disabled ring is at 0.
        for (n, side) in now.iter().enumerate() {
            for (dir, rs) in side.iter().enumerate() {
                for (q, r) in rs.iter().enumerate() {
                    let ok = if r.size == 0 {
                        r.head == 0 && r.tail == 0
                    } else {
                        r.head <= r.tail && r.tail - r.head <= r.size
                    };
                    assert!(
                        ok,
                        "nic{n} queue {q} {} ring out of bounds after {op:?}: {r:?}",
                        ["transmit", "receive"][dir]
                    );
                }
            }
        }
        // Frames each NIC's function must receive, in order (`None`: bytes unknown).
        let mut arriving: [Vec<Option<Vec<u8>>>; 2] = [Vec::new(), Vec::new()];
        let mut filtered = [0u64; 2];
        // After a doorbell without a drain the counters moved before this drain began.
        let mut exact = [!loose; 2];
        for n in 0..2 {
            let (mut sent, mut wire, mut tx_exact) = (0u64, 0u64, true);
            for (q, (mid, post)) in rings[n][0].iter().zip(&now[n][0]).enumerate() {
                if mid.base != post.base || mid.size != post.size || post.head < mid.head {
                    tx_exact = false;
                    continue;
                }
                if mid.size == 0 {
                    continue;
                }
                for i in mid.head..post.head {
                    let Where::Ram(at) = self.classify(n, post.descriptor(i), 16, Access::Read)
                    else {
                        tx_exact = false;
                        continue;
                    };
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&self.peek(n, at, 16));
                    let d = TxDescriptor::from_bytes(&b);
                    let status = Status::from_code(d.status).unwrap_or_else(|| {
                        panic!(
                            "nic{n} queue {q}: transmit descriptor {i} written back with \
                             unknown status {} after {op:?}",
                            d.status
                        )
                    });
                    self.stats.borrow_mut().tx[status.code() as usize] += 1;
                    let (expected, frame) = match d.validate(self.mtu) {
                        Err(s) => (vec![s], None),
                        Ok(len) => {
                            match self.classify(n, d.buffer.get(), len as u64, Access::Read) {
                                Where::Ram(a) => (vec![Status::Ok], Some(self.peek(n, a, len))),
                                Where::Unmapped => (vec![Status::DmaFailed], None),
                                Where::Other => (vec![Status::Ok, Status::DmaFailed], None),
                            }
                        }
                    };
                    assert!(
                        expected.contains(&status),
                        "nic{n} queue {q}: transmit descriptor {i} ({d:?}, MTU {}) written \
                         back {status:?}, expected {expected:?}",
                        self.mtu
                    );
                    if status != Status::Ok {
                        continue;
                    }
                    sent += 1;
                    let dst = frame.as_ref().map(|f| {
                        let mut m = [0u8; 6];
                        m.copy_from_slice(&f[..6]);
                        MacAddr(m)
                    });
                    match dst {
                        None => {
                            exact = [false; 2];
                            tx_exact = false;
                        }
                        Some(d) if d == self.mac(n) => arriving[n].push(frame),
                        Some(d) => {
                            wire += 1;
                            if d.is_group() || d == self.mac(1 - n) {
                                arriving[1 - n].push(frame);
                            } else {
                                filtered[1 - n] += 1;
                            }
                        }
                    }
                }
            }
            if tx_exact && !loose {
                assert_eq!(
                    (
                        after[n].tx_frames - before[n].tx_frames,
                        after[n].wire_tx - before[n].wire_tx
                    ),
                    (sent, wire),
                    "nic{n}: TX_FRAMES and WIRE_TX_FRAMES grew by other than the frames \
                     written back Ok (and those of them for the wire) after {op:?}"
                );
            } else {
                exact[1 - n] = false;
                exact[n] = false;
            }
        }
        for n in 0..2 {
            let d = |f: fn(&Counters) -> u64| f(&after[n]) - f(&before[n]);
            let peer_wire = after[1 - n].wire_tx - before[1 - n].wire_tx;
            if d(|c| c.overflow) == 0 && !loose {
                assert_eq!(
                    d(|c| c.wire_rx),
                    peer_wire,
                    "nic{n} took {} frames off the wire, the peer put {peer_wire} on it",
                    d(|c| c.wire_rx)
                );
            } else {
                exact[n] = false;
            }
            let rx_changed = rings[n][1]
                .iter()
                .zip(&now[n][1])
                .any(|(a, b)| a.base != b.base || a.size != b.size || b.head < a.head);
            if !exact[n] || rx_changed {
                self.stats.borrow_mut().unmatched += 1;
                continue;
            }
            assert_eq!(
                d(|c| c.filtered),
                filtered[n],
                "nic{n}: frames from the wire for nobody here"
            );
            let frames = &arriving[n];
            let (consumed, ok) = match &posted[n] {
                None => (0, 0),
                Some((q, ds)) => self.check_rx(n, *q, &rings[n][1][*q], &now[n][1][*q], ds, frames),
            };
            assert_eq!(
                (d(|c| c.rx_no_buffer), d(|c| c.rx_frames)),
                ((frames.len() - consumed) as u64, ok),
                "nic{n}: RX_NO_BUFFER and RX_FRAMES after {} frames arrived, {consumed} of them \
                 into posted buffers ({ok} Ok), after {op:?}",
                frames.len()
            );
        }
    }

    /// Checks the receive descriptors NIC `n` consumed against the frames sent to it; returns
    /// how many it consumed and how many of them were written back Ok.
    fn check_rx(
        &self,
        n: usize,
        q: usize,
        mid: &Ring,
        post: &Ring,
        posted: &[Option<RxDescriptor>],
        frames: &[Option<Vec<u8>>],
    ) -> (usize, u64) {
        let consumed = (post.head - mid.head) as usize;
        assert!(
            consumed <= frames.len(),
            "nic{n} queue {q}: {consumed} receive descriptors consumed for {} frames",
            frames.len()
        );
        let mut ok = 0;
        let mut landed: Vec<(u64, u64, &Vec<u8>)> = Vec::new();
        for (j, (d, frame)) in posted.iter().zip(frames).take(consumed).enumerate() {
            let (Some(d), Some(frame)) = (d, frame) else {
                continue;
            };
            let i = mid.head + j as u64;
            let Where::Ram(at) = self.classify(n, post.descriptor(i), 16, Access::Read) else {
                continue;
            };
            let mut b = [0u8; 16];
            b.copy_from_slice(&self.peek(n, at, 16));
            let back = RxDescriptor::from_bytes(&b);
            let status = Status::from_code(back.status).unwrap_or_else(|| {
                panic!(
                    "nic{n} queue {q}: receive descriptor {i} written back with unknown \
                     status {}",
                    back.status
                )
            });
            self.stats.borrow_mut().rx[status.code() as usize] += 1;
            let len = frame.len() as u64;
            let place = self.classify(n, d.buffer.get(), len, Access::Write);
            let expected = if (d.len as usize) < frame.len() {
                vec![Status::BufferTooSmall]
            } else {
                match place {
                    Where::Ram(_) => vec![Status::Ok],
                    Where::Unmapped => vec![Status::DmaFailed],
                    Where::Other => vec![Status::Ok, Status::DmaFailed],
                }
            };
            assert!(
                expected.contains(&status),
                "nic{n} queue {q}: receive descriptor {i} ({d:?}) for a {len}-byte frame \
                 written back {status:?}, expected {expected:?}"
            );
            let want_len = if status == Status::Ok { len as u32 } else { 0 };
            assert_eq!(
                (back.buffer, back.len),
                (d.buffer, want_len),
                "nic{n} queue {q}: receive descriptor {i} written back with the wrong buffer \
                 or length"
            );
            if status == Status::Ok {
                ok += 1;
                if let Where::Ram(a) = place {
                    landed.push((i, a, frame));
                }
            }
        }
        // A frame's bytes are compared unless a later frame of this drain landed over them.
        for (k, (i, a, frame)) in landed.iter().enumerate() {
            let end = a + frame.len() as u64;
            let covered = landed
                .iter()
                .skip(k + 1)
                .any(|(_, b, f)| *b < end && *a < b + f.len() as u64);
            if covered {
                continue;
            }
            let got = self.peek(n, *a, frame.len());
            assert!(
                got == **frame,
                "nic{n} queue {q}: the frame in receive descriptor {i}'s buffer differs from \
                 the one sent (first difference at byte {:?})",
                got.iter().zip(frame.iter()).position(|(a, b)| a != b)
            );
        }
        (consumed, ok)
    }

    /// Fills the guard bands around each host's area with a pattern.
    pub fn fill_guards(&self) {
        for n in 0..2 {
            let a = self.sides[n].area;
            self.poke(n, a - GUARD, &payload(0x47, GUARD as usize));
            self.poke(n, a + REGION, &payload(0x48, GUARD as usize));
        }
    }

    /// The guard bands are as [`Harness::fill_guards`] left them.
    pub fn check_guards(&self) {
        for n in 0..2 {
            let a = self.sides[n].area;
            for (at, seed) in [(a - GUARD, 0x47), (a + REGION, 0x48)] {
                let got = self.peek(n, at, GUARD as usize);
                let want = payload(seed, GUARD as usize);
                if let Some(p) = got.iter().zip(&want).position(|(g, w)| g != w) {
                    panic!(
                        "host RAM of nic{n}'s host at {:#x}, outside the harness's area, was \
                         written",
                        at + p as u64
                    );
                }
            }
        }
    }
}
