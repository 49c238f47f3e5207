//! Physical Region Page (PRP) entries: turning a command's PRP1/PRP2 into the list of host
//! memory ranges its data occupies, reading PRP lists (which may chain) from host memory.

use super::spec::Status;
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
    if prp1 & 3 != 0 {
        return Err(Status::PRP_OFFSET_INVALID);
    }
    let mut out: Vec<Segment> = Vec::new();
    let first = len.min(page - (prp1 & (page - 1)));
    push(&mut out, prp1, first)?;
    let mut left = len - first;
    if left == 0 {
        return Ok(out);
    }
    if left <= page {
        if prp2 & (page - 1) != 0 {
            return Err(Status::PRP_OFFSET_INVALID);
        }
        push(&mut out, prp2, left)?;
        return Ok(out);
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
            push(&mut out, addr, l)?;
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
    Ok(out)
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
