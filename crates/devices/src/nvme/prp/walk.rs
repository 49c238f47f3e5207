//! The controller's side: turning a command's PRP1/PRP2 into the list of host memory ranges
//! its data occupies, reading PRP lists (which may chain) from host memory.

use crate::nvme::spec::Status;
use smartio_platform::{BusAddr, Port};

/// One contiguous range of a transfer, as the device addresses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Bus address.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// The ranges of a `len`-byte transfer described by `prp1`/`prp2` with memory pages of
/// `page` bytes. Physically adjacent pages are merged into one range.
///
/// Errors: a PRP1 that is not dword aligned, a PRP list pointer that is not qword aligned
/// (its entries are 8 bytes), or a later entry with a page offset, is `PRP Offset Invalid`;
/// a PRP list the controller cannot read, or a range that would run past the end of the
/// 64-bit address space, is a `Data Transfer Error`.
pub async fn segments<P: Port>(
    port: &P,
    prp1: u64,
    prp2: u64,
    len: u64,
    page: u64,
) -> Result<Vec<Segment>, Status> {
    let mut out = Vec::new();
    segments_into(port, prp1, prp2, len, page, &mut out).await?;
    Ok(out)
}

/// [`segments`] into `out` (emptied first), a list the caller reuses.
pub async fn segments_into<P: Port>(
    port: &P,
    prp1: u64,
    prp2: u64,
    len: u64,
    page: u64,
    out: &mut Vec<Segment>,
) -> Result<(), Status> {
    out.clear();
    if prp1 & 3 != 0 {
        return Err(Status::PRP_OFFSET_INVALID);
    }
    let first = len.min(page - (prp1 & (page - 1)));
    push(out, prp1, first)?;
    let mut left = len - first;
    if left == 0 {
        return Ok(());
    }
    if left <= page {
        if prp2 & (page - 1) != 0 {
            return Err(Status::PRP_OFFSET_INVALID);
        }
        push(out, prp2, left)?;
        return Ok(());
    }
    // PRP2 points to a list; its last entry chains to the next list page when more follow.
    let mut list = prp2;
    if list & 7 != 0 {
        return Err(Status::PRP_OFFSET_INVALID);
    }
    while left > 0 {
        let pages_left = left.div_ceil(page);
        let slots = (page - (list & (page - 1))) / 8;
        let chained = pages_left > slots;
        let n = if chained { slots } else { pages_left };
        let entries = port
            .read_owned(BusAddr(list), (n * 8) as usize)
            .await
            .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
        let take = if chained { n - 1 } else { n };
        for e in entries.chunks_exact(8).take(take as usize) {
            let addr = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
            if addr & (page - 1) != 0 {
                return Err(Status::PRP_OFFSET_INVALID);
            }
            let l = left.min(page);
            push(out, addr, l)?;
            left -= l;
        }
        if chained {
            let e = &entries[(n as usize - 1) * 8..];
            list = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
            if list & (page - 1) != 0 {
                return Err(Status::PRP_OFFSET_INVALID);
            }
        }
    }
    Ok(())
}

/// Appends `len` bytes at `addr`, merged with the previous range when adjacent.
fn push(out: &mut Vec<Segment>, addr: u64, len: u64) -> Result<(), Status> {
    if addr.checked_add(len).is_none() {
        return Err(Status::DATA_TRANSFER_ERROR);
    }
    if let Some(last) = out.last_mut() {
        if last.addr.checked_add(last.len) == Some(addr) {
            last.len += len;
            return Ok(());
        }
    }
    out.push(Segment { addr, len });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::build::build;
    use super::*;
    use smartio_platform::{AccessError, SparseMemory, PAGE_SIZE};
    use std::cell::RefCell;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    /// Host memory the controller reads PRP lists from, answering at once.
    #[derive(Default)]
    struct Memory(RefCell<SparseMemory>);

    impl Port for Memory {
        async fn read(&self, addr: BusAddr, buf: &mut [u8]) -> Result<(), AccessError> {
            self.0.borrow().read(addr.get(), buf);
            Ok(())
        }
        async fn write(&self, addr: BusAddr, data: &[u8]) -> Result<(), AccessError> {
            self.0.borrow_mut().write(addr.get(), data);
            Ok(())
        }
    }

    fn now<T>(f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("memory answers at once"),
        }
    }

    /// Builds PRPs for `len` bytes at `addr`, writes the lists, and walks them back.
    fn round_trip(addr: u64, len: u64, lists: &[u64]) -> Result<Vec<Segment>, Status> {
        let mem = Memory::default();
        let p = build(addr, len, lists).expect("built");
        for l in &p.lists {
            mem.0.borrow_mut().write(l.addr, &l.bytes());
        }
        now(segments(&mem, p.prp1, p.prp2, len, PAGE_SIZE))
    }

    #[test]
    fn what_a_driver_builds_the_controller_walks_back_as_one_range() {
        let buf = 0x100_0000;
        let list = 0x800_0000;
        let chained = [list + PAGE_SIZE - 64, list + 2 * PAGE_SIZE];
        for (addr, len, lists) in [
            (buf, 512, &[][..]),
            (buf, 2 * PAGE_SIZE, &[]),
            (buf + 0x800, PAGE_SIZE, &[]),
            (buf, 3 * PAGE_SIZE, &[list]),
            (buf + 0x204, 32 * PAGE_SIZE, &[list]),
            (buf, 40 * PAGE_SIZE, &chained),
            // A list of exactly as many entries as its page has slots left: no chain.
            (buf, 9 * PAGE_SIZE, &[list + PAGE_SIZE - 64]),
            (buf + 8, 600 * PAGE_SIZE, &[list, list + PAGE_SIZE]),
        ] {
            assert_eq!(
                round_trip(addr, len, lists),
                Ok(vec![Segment { addr, len }]),
                "{len} bytes at {addr:#x}"
            );
        }
    }

    #[test]
    fn a_list_entry_with_an_offset_is_refused() {
        let mem = Memory::default();
        let list = 0x800_0000;
        let entries: Vec<u8> = [0x10_1000u64, 0x10_2010]
            .iter()
            .flat_map(|e| e.to_le_bytes())
            .collect();
        mem.0.borrow_mut().write(list, &entries);
        let walked = now(segments(&mem, 0x10_0000, list, 3 * PAGE_SIZE, PAGE_SIZE));
        assert_eq!(walked, Err(Status::PRP_OFFSET_INVALID));
        let unaligned_prp1 = now(segments(&mem, 0x10_0002, 0, 16, PAGE_SIZE));
        assert_eq!(unaligned_prp1, Err(Status::PRP_OFFSET_INVALID));
    }
}
