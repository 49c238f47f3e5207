//! Moving one descriptor's bytes as a DMA engine does: the source is read in requests of at
//! most the read request size (aligned to it, so none crosses a 4 KiB boundary), at most
//! [`super::AdapterDmaConfig::max_outstanding_reads`] in flight; each piece is written on to
//! the destination when its completions are in, while later reads are still out; after the
//! last write, a read of the destination's last bytes returns only after the writes before
//! it on that path have landed (PCIe ordering), and only then is the descriptor done.
//!
//! A failed read stops further reads; the pieces already read are still written. An abort
//! stops further reads the same way. Nothing here sets a rate: the time each read and write
//! takes is the engine's (the platform [`Port`]'s).

use super::spec::DescriptorStatus;
use super::AdapterDma;
use smartio_platform::{AccessError, BusAddr, Port};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;

/// Bytes of the read that proves the writes landed.
const FLUSH_BYTES: u64 = 4;

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, AccessError>> + 'a>>;

/// What stopped a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Read,
    Write,
    Abort,
}

impl AdapterDma {
    /// Copies `len` bytes (1 or more; `from + len` and `to + len` do not wrap) from `from` to
    /// `to`, and says how it ended.
    pub(super) async fn copy<P: Port>(
        &self,
        port: &P,
        from: BusAddr,
        to: BusAddr,
        len: u64,
    ) -> DescriptorStatus {
        let request = self.config.read_request_bytes;
        let limit = self.config.max_outstanding_reads as usize;
        let mut next = 0u64;
        let mut reads: VecDeque<(u64, Boxed<'_, Vec<u8>>)> = VecDeque::new();
        let mut writes: Vec<Boxed<'_, ()>> = Vec::new();
        let mut stop: Option<Stop> = None;
        poll_fn(|cx| loop {
            if stop.is_none() && self.regs.borrow().abort {
                stop = Some(Stop::Abort);
            }
            while stop.is_none() && reads.len() < limit && next < len {
                let at = from.get() + next;
                let n = (request - at % request).min(len - next);
                self.read_issued();
                reads.push_back((next, Box::pin(port.read_owned(BusAddr(at), n as usize))));
                next += n;
            }
            let mut moved = false;
            let mut i = 0;
            while i < reads.len() {
                let Poll::Ready(result) = reads[i].1.as_mut().poll(cx) else {
                    i += 1;
                    continue;
                };
                moved = true;
                self.read_returned();
                let Some((offset, _)) = reads.remove(i) else {
                    continue;
                };
                match result {
                    Ok(data) => writes.push(Box::pin(port.write_owned(to.offset(offset), data))),
                    Err(_) => {
                        stop.get_or_insert(Stop::Read);
                    }
                }
            }
            writes.retain_mut(|w| match w.as_mut().poll(cx) {
                Poll::Pending => true,
                Poll::Ready(result) => {
                    moved = true;
                    if result.is_err() {
                        stop.get_or_insert(Stop::Write);
                    }
                    false
                }
            });
            if reads.is_empty() && writes.is_empty() && (next >= len || stop.is_some()) {
                return Poll::Ready(());
            }
            if !moved {
                return Poll::Pending;
            }
        })
        .await;
        match stop {
            Some(Stop::Read) => return DescriptorStatus::ReadFailed,
            Some(Stop::Write) => return DescriptorStatus::WriteFailed,
            Some(Stop::Abort) => return DescriptorStatus::Aborted,
            None => {}
        }
        let n = len.min(FLUSH_BYTES);
        self.read_issued();
        let flushed = port.read_owned(to.offset(len - n), n as usize).await;
        self.read_returned();
        match flushed {
            Ok(_) => DescriptorStatus::Done,
            Err(_) => DescriptorStatus::WriteFailed,
        }
    }
}
