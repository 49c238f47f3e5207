//! NVM command set I/O: Read, Write, Flush, Write Zeroes, Dataset Management (deallocate).

use super::controller::{NvmeController, MDTS};
use super::media::MediaOp;
use super::spec::io::{BlockRange, DsmRange, IoCommand, ALL_NAMESPACES};
use super::spec::{Command, Status};
use smartio_platform::{Clock, Port, PAGE_SIZE};

impl NvmeController {
    /// Executes an I/O command (decoded from `cmd`, whose data pointer it uses); returns its
    /// status and completion dword 0.
    pub(super) async fn io<P: Port + Clock>(&self, port: &P, cmd: &Command) -> (Status, u32) {
        let r = match IoCommand::from(cmd) {
            IoCommand::Read(r) => self.read(port, cmd, r).await,
            IoCommand::Write(r) => self.write(port, cmd, r).await,
            IoCommand::Flush { nsid } => self.flush(port, nsid).await,
            IoCommand::WriteZeroes(r) => self.write_zeroes(port, r).await,
            IoCommand::DatasetManagement {
                nsid,
                ranges,
                deallocate,
            } => {
                self.dataset_management(port, cmd, nsid, ranges, deallocate)
                    .await
            }
            IoCommand::Unsupported(_) => Err(Status::INVALID_OPCODE),
        };
        match r {
            Ok(()) => (Status::SUCCESS, 0),
            Err(s) => (s, 0),
        }
    }

    /// Checks namespace and range; returns (byte offset, byte length).
    fn range(&self, r: BlockRange, with_data: bool) -> Result<(u64, u64), Status> {
        if r.nsid == 0 || r.nsid > self.store.count() {
            return Err(Status::INVALID_NAMESPACE);
        }
        let (slba, blocks) = (r.slba, r.blocks());
        let lba = u64::from(self.config.lba_size);
        if with_data && blocks * lba > PAGE_SIZE << MDTS {
            return Err(Status::INVALID_FIELD);
        }
        match slba.checked_add(blocks) {
            Some(end) if end <= self.blocks() => Ok((slba * lba, blocks * lba)),
            _ => Err(Status::LBA_OUT_OF_RANGE),
        }
    }

    async fn read<P: Port + Clock>(
        &self,
        port: &P,
        cmd: &Command,
        r: BlockRange,
    ) -> Result<(), Status> {
        let (offset, len) = self.range(r, true)?;
        let done = self.media.schedule(MediaOp::Read(len), port.now());
        port.spend("media: read", done.since(port.now())).await;
        if self.store.reads_as_zero(r.nsid, offset, len) {
            // Deallocated blocks: zeroes, read into no buffer.
            self.zeroes_to_host(port, cmd, len).await?;
        } else {
            let mut data = self.buffers.take();
            let moved = match self
                .store
                .read_into(r.nsid, offset, len as usize, &mut data)
            {
                Ok(()) => self.to_host(port, cmd, &mut data).await,
                Err(_) => Err(self.media_error()),
            };
            self.buffers.give(data);
            moved?;
        }
        let mut s = self.state.borrow_mut();
        s.health.read_commands += 1;
        s.health.bytes_read += len;
        Ok(())
    }

    async fn write<P: Port + Clock>(
        &self,
        port: &P,
        cmd: &Command,
        r: BlockRange,
    ) -> Result<(), Status> {
        let (offset, len) = self.range(r, true)?;
        let data = self.fetch_from_host(port, cmd, len).await?;
        let done = self.media.schedule(MediaOp::Write(len), port.now());
        port.spend("media: write", done.since(port.now())).await;
        let stored = self.store.write(r.nsid, offset, &data);
        self.buffers.give(data);
        stored.map_err(|_| self.media_error())?;
        let mut s = self.state.borrow_mut();
        s.health.write_commands += 1;
        s.health.bytes_written += len;
        Ok(())
    }

    async fn write_zeroes<P: Port + Clock>(&self, port: &P, r: BlockRange) -> Result<(), Status> {
        let (offset, len) = self.range(r, false)?;
        let done = self.media.schedule(MediaOp::Write(len), port.now());
        port.sleep(done.since(port.now())).await;
        self.store
            .zero(r.nsid, offset, len)
            .map_err(|_| self.media_error())?;
        self.state.borrow_mut().health.write_commands += 1;
        Ok(())
    }

    /// Dataset Management: reads the range list, checks every range before touching any,
    /// then (with the Deallocate attribute) deallocates them — they read as zeroes after
    /// (Identify Namespace's DLFEAT says so). Without it the command only carries access
    /// hints, which this controller takes and ignores. A deallocation costs the media what
    /// a write of no data does (a mapping-table update).
    async fn dataset_management<P: Port + Clock>(
        &self,
        port: &P,
        cmd: &Command,
        nsid: u32,
        ranges: u16,
        deallocate: bool,
    ) -> Result<(), Status> {
        if nsid == 0 || nsid > self.store.count() {
            return Err(Status::INVALID_NAMESPACE);
        }
        let len = u64::from(ranges) * DsmRange::SIZE as u64;
        let list = self.fetch_from_host(port, cmd, len).await?;
        let lba = u64::from(self.config.lba_size);
        let mut extents = Vec::with_capacity(usize::from(ranges));
        for b in list.as_chunks::<{ DsmRange::SIZE }>().0 {
            let r = DsmRange::decode(b);
            match r.slba.checked_add(u64::from(r.blocks)) {
                Some(end) if end <= self.blocks() => {
                    extents.push((r.slba * lba, u64::from(r.blocks) * lba))
                }
                _ => return Err(Status::LBA_OUT_OF_RANGE),
            }
        }
        if !deallocate {
            return Ok(());
        }
        let done = self.media.schedule(MediaOp::Write(0), port.now());
        port.sleep(done.since(port.now())).await;
        for (offset, len) in extents {
            self.store
                .zero(nsid, offset, len)
                .map_err(|_| self.media_error())?;
        }
        Ok(())
    }

    async fn flush<P: Port + Clock>(&self, port: &P, nsid: u32) -> Result<(), Status> {
        if nsid != ALL_NAMESPACES && (nsid == 0 || nsid > self.store.count()) {
            return Err(Status::INVALID_NAMESPACE);
        }
        let done = self.media.schedule(MediaOp::Flush, port.now());
        port.spend("media: flush", done.since(port.now())).await;
        self.store.flush().map_err(|_| self.media_error())
    }

    fn media_error(&self) -> Status {
        self.state.borrow_mut().health.media_errors += 1;
        Status::INTERNAL_ERROR
    }
}

#[cfg(test)]
mod tests;
