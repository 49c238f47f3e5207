//! The queue: wait for the doorbell, fetch the posted descriptors by DMA, run each (decode →
//! validate → move → complete), write each status back into its descriptor, and write the
//! done word once HEAD has caught up with TAIL. A descriptor fails alone; the ones posted
//! after it until the done word are completed [`DescriptorStatus::NotRun`], as a DMA
//! channel stops on an error. An abort completes the rest [`DescriptorStatus::Aborted`].
//! A ring, status or done word the engine cannot reach halts the queue (the done word then
//! carries [`done::HALTED`], if it can be written).

use super::spec::{desc, done, Descriptor, DescriptorStatus, QueueState, RegisterError};
use super::{AdapterDma, DESCRIPTOR_BYTES};
use smartio_platform::{BusAddr, Clock, Port};

/// Descriptors fetched with one DMA read: 16 × 32 B, one 512-byte read request.
const FETCH: u64 = 16;

/// What one pass through the posted descriptors ended with.
#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    failed: bool,
    aborted: bool,
}

impl AdapterDma {
    /// The engine: serves the queue at every doorbell. Runs forever.
    pub async fn run<P: Port + Clock>(&self, port: P) {
        loop {
            self.doorbell.notified().await;
            self.drain(&port).await;
        }
    }

    /// Runs every descriptor posted, until HEAD catches up with TAIL (descriptors posted
    /// meanwhile included), then writes the done word. Does nothing when the queue is not
    /// enabled or has nothing posted.
    pub async fn drain<P: Port + Clock>(&self, port: &P) {
        {
            let mut r = self.regs.borrow_mut();
            if r.state != QueueState::Idle || r.head == r.tail {
                // An abort with nothing to abort is forgotten.
                r.abort = false;
                return;
            }
            r.state = QueueState::Busy;
        }
        port.sleep(self.config.setup).await;
        let mut outcome = Outcome::default();
        loop {
            let (base, entries, head, tail) = {
                let r = self.regs.borrow();
                (r.ring_base, r.ring_entries, r.head, r.tail)
            };
            if head == tail {
                break;
            }
            // Consecutive slots from HEAD's, not past the ring's end.
            let first = head % entries;
            let n = (tail - head).min(entries - first).min(FETCH);
            let Some(ring) = self.fetch(port, base, first, n).await else {
                return self.halt(port).await;
            };
            for i in 0..n {
                let at = (i * DESCRIPTOR_BYTES) as usize;
                let entry = ring.get(at..at + DESCRIPTOR_BYTES as usize).unwrap_or(&[]);
                let status = self.complete_one(port, entry, &mut outcome).await;
                let status_at =
                    BusAddr(base + (first + i) * DESCRIPTOR_BYTES + desc::STATUS as u64);
                if port
                    .write(status_at, &status.code().to_le_bytes())
                    .await
                    .is_err()
                {
                    return self.halt(port).await;
                }
                self.regs.borrow_mut().head += 1;
                self.count(|c| {
                    c.completed += 1;
                    if status == DescriptorStatus::Done {
                        c.done += 1;
                    }
                });
            }
        }
        let (head, done_addr) = {
            let mut r = self.regs.borrow_mut();
            r.abort = false;
            (r.head, r.done_addr)
        };
        let mut word = head & done::COUNT;
        if outcome.failed {
            word |= done::FAILED;
        }
        if outcome.aborted {
            word |= done::ABORTED;
        }
        if port
            .write(BusAddr(done_addr), &word.to_le_bytes())
            .await
            .is_err()
        {
            let mut r = self.regs.borrow_mut();
            r.state = QueueState::Halted;
            r.error = RegisterError::RingUnreachable;
            return;
        }
        self.regs.borrow_mut().state = QueueState::Idle;
    }

    /// Reads `n` descriptors from slot `first` of the ring at `base`.
    async fn fetch<P: Port>(&self, port: &P, base: u64, first: u64, n: u64) -> Option<Vec<u8>> {
        let at = base.checked_add(first * DESCRIPTOR_BYTES)?;
        self.read_issued();
        let ring = port
            .read_owned(BusAddr(at), (n * DESCRIPTOR_BYTES) as usize)
            .await;
        self.read_returned();
        ring.ok()
    }

    /// Runs one ring entry and says how it ended.
    async fn complete_one<P: Port + Clock>(
        &self,
        port: &P,
        entry: &[u8],
        outcome: &mut Outcome,
    ) -> DescriptorStatus {
        if self.regs.borrow().abort {
            outcome.aborted = true;
        }
        if outcome.aborted {
            return DescriptorStatus::Aborted;
        }
        if outcome.failed {
            return DescriptorStatus::NotRun;
        }
        let status = match Descriptor::decode(entry) {
            Err(refused) => refused,
            Ok(d) => {
                let (from, to) = d.source_and_destination();
                let status = self.copy(port, from, to, d.length).await;
                if status == DescriptorStatus::Done {
                    self.count(|c| c.bytes_done += d.length);
                }
                status
            }
        };
        match status {
            DescriptorStatus::Done | DescriptorStatus::Pending => {}
            DescriptorStatus::Aborted => outcome.aborted = true,
            _ => outcome.failed = true,
        }
        status
    }

    /// Stops the queue (its ring or a status cannot be reached) and says so in the done word
    /// if that can be written.
    async fn halt<P: Port>(&self, port: &P) {
        let (word, done_addr) = {
            let mut r = self.regs.borrow_mut();
            r.state = QueueState::Halted;
            r.error = RegisterError::RingUnreachable;
            r.abort = false;
            (
                (r.head & done::COUNT) | done::FAILED | done::HALTED,
                r.done_addr,
            )
        };
        // Nowhere to report a done word that cannot be written either: STATE says it.
        let _ = port.write(BusAddr(done_addr), &word.to_le_bytes()).await;
    }
}
