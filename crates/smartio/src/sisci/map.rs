//! Maps: a CPU's view of a segment, and the sequences that check what went through one.
//!
//! Stores and loads through a [`RemoteMap`] behave like the hardware: they cannot fail. A
//! store over a dead link is lost and a load returns all-ones; the adapter counts the error,
//! and a [`Sequence`] started before the accesses reports it when checked.

use super::{LocalSegment, RemoteSegment, SciError, Sisci};
use crate::error::check_range;
use smartio_fabric::{AdapterId, NtbMapping};
use smartio_platform::{BusAddr, MemoryWatch, Port};

/// The outcome of starting or checking a sequence (SISCI's `sci_sequence_status_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceStatus {
    /// No error since the sequence started.
    Ok,
    /// An error happened but the path is up again: redo the accesses.
    Retriable,
    /// The path is down: accesses cannot succeed now.
    NotRetriable,
}

/// A started sequence: the adapter's error count when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequence {
    adapter: AdapterId,
    errors: u64,
    /// Status when started.
    pub status: SequenceStatus,
}

/// A remote segment (or multicast group) mapped for the connecting host's CPU.
#[derive(Debug, Clone)]
pub struct RemoteMap {
    sci: Sisci,
    id: u32,
    remote: RemoteSegment,
    mapping: NtbMapping,
}

impl RemoteMap {
    pub(super) fn new(sci: Sisci, id: u32, remote: RemoteSegment, mapping: NtbMapping) -> Self {
        RemoteMap {
            sci,
            id,
            remote,
            mapping,
        }
    }

    /// Map id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The connection it maps.
    pub fn remote(&self) -> RemoteSegment {
        self.remote
    }

    /// The look-up-table entries it uses.
    pub fn mapping(&self) -> NtbMapping {
        self.mapping
    }

    /// Local bus address of byte 0 (inside the adapter's window).
    pub fn bus_addr(&self) -> BusAddr {
        BusAddr(self.mapping.bus_addr)
    }

    /// Mapped bytes.
    pub fn size(&self) -> u64 {
        self.mapping.len
    }

    fn check(&self, offset: u64, len: usize) -> Result<BusAddr, SciError> {
        if !self.sci.is_mapped(self.id) {
            return Err(SciError::Stale {
                what: "map",
                id: u64::from(self.id),
            });
        }
        check_range("map", offset, len as u64, self.mapping.len)?;
        Ok(BusAddr(self.mapping.bus_addr + offset))
    }

    /// Stores `data` at `offset` (posted writes, in order). A store over a dead link is lost
    /// and counted as an adapter error.
    pub async fn store(&self, offset: u64, data: &[u8]) -> Result<(), SciError> {
        let addr = self.check(offset, data.len())?;
        if data.is_empty() {
            return Ok(()); // nothing to send: no transaction (the fabric has no empty TLP)
        }
        let cpu = self.sci.machine.cpu(self.remote.host);
        if cpu.write(addr, data).await.is_err() {
            self.sci.count_error(self.remote.adapter);
        }
        Ok(())
    }

    /// Loads `buf.len()` bytes from `offset`. A failed load returns all-ones and is counted
    /// as an adapter error.
    pub async fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SciError> {
        let addr = self.check(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let cpu = self.sci.machine.cpu(self.remote.host);
        if cpu.read(addr, buf).await.is_err() {
            buf.fill(0xff);
            self.sci.count_error(self.remote.adapter);
        }
        Ok(())
    }

    /// Starts a sequence: `NotRetriable` if the path is down now.
    pub fn start_sequence(&self) -> Sequence {
        Sequence {
            adapter: self.remote.adapter,
            errors: self.sci.errors(self.remote.adapter),
            status: if self.sci.path_up(&self.remote) {
                SequenceStatus::Ok
            } else {
                SequenceStatus::NotRetriable
            },
        }
    }

    /// Checks a sequence: `NotRetriable` if the path is down, `Retriable` if an error happened
    /// on the adapter since the start, else `Ok`.
    pub fn check_sequence(&self, seq: &Sequence) -> SequenceStatus {
        if !self.sci.path_up(&self.remote) {
            SequenceStatus::NotRetriable
        } else if self.sci.errors(seq.adapter) != seq.errors {
            SequenceStatus::Retriable
        } else {
            SequenceStatus::Ok
        }
    }
}

/// A local segment mapped for its own host's CPU.
#[derive(Debug, Clone)]
pub struct LocalMap {
    sci: Sisci,
    id: u32,
    seg: LocalSegment,
}

impl LocalMap {
    pub(super) fn new(sci: Sisci, id: u32, seg: LocalSegment) -> Self {
        LocalMap { sci, id, seg }
    }

    /// Map id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The segment.
    pub fn segment(&self) -> LocalSegment {
        self.seg
    }

    fn check(&self, offset: u64, len: usize) -> Result<BusAddr, SciError> {
        if !self.sci.is_local_mapped(&self.seg, self.id) {
            return Err(SciError::Stale {
                what: "local map",
                id: u64::from(self.id),
            });
        }
        check_range("segment", offset, len as u64, self.seg.size)?;
        Ok(BusAddr(self.seg.phys.get() + offset))
    }

    /// Stores into the segment (local memory).
    pub async fn store(&self, offset: u64, data: &[u8]) -> Result<(), SciError> {
        let addr = self.check(offset, data.len())?;
        // Local RAM is always reachable.
        let _ = self.sci.machine.cpu(self.seg.host).write(addr, data).await;
        Ok(())
    }

    /// Loads from the segment (local memory).
    pub async fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SciError> {
        let addr = self.check(offset, buf.len())?;
        let _ = self.sci.machine.cpu(self.seg.host).read(addr, buf).await;
        Ok(())
    }

    /// Polls `len` bytes at `offset` until `done` accepts them; returns them. The poll that
    /// succeeds costs one load; the wait before it costs nothing (the core spins).
    pub async fn poll_until(
        &self,
        offset: u64,
        len: usize,
        done: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<u8>, SciError> {
        let addr = self.check(offset, len)?;
        let cpu = self.sci.machine.cpu(self.seg.host);
        let mut buf = vec![0u8; len];
        loop {
            // Looking and arming the watch happen at one instant, so no write is missed.
            self.sci.machine.peek_memory(
                self.seg.host,
                smartio_platform::PhysAddr(addr.get()),
                &mut buf,
            );
            if done(&buf) {
                let _ = cpu.read(addr, &mut buf).await;
                return Ok(buf);
            }
            cpu.written(smartio_platform::PhysAddr(addr.get()), len as u64)
                .await;
        }
    }
}
