//! Sparse, byte-exact memory: host RAM and device memory of any size, backed only where
//! written. Unwritten bytes read as zero.

use rustc_hash::FxHashMap;
use std::cell::Cell;

const PAGE_SHIFT: u32 = 12;
const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;

/// A host's RAM as an engine keeps it: byte-exact, addressed by physical address. The
/// timed and direct engines keep it in [`SparseMemory`]; the live engine in shared memory
/// that other processes map (a memfd), so what a device writes there a program sees.
pub trait HostMemory {
    /// Copies `buf.len()` bytes from `offset` into `buf`.
    fn read(&self, offset: u64, buf: &mut [u8]);

    /// Copies `data` to `offset`.
    fn write(&mut self, offset: u64, data: &[u8]);

    /// Zeroes `len` bytes from `offset`.
    fn zero(&mut self, offset: u64, len: u64);
}

impl HostMemory for SparseMemory {
    fn read(&self, offset: u64, buf: &mut [u8]) {
        SparseMemory::read(self, offset, buf)
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        SparseMemory::write(self, offset, data)
    }

    fn zero(&mut self, offset: u64, len: u64) {
        SparseMemory::zero(self, offset, len)
    }
}

/// A sparse byte array addressed by `u64` offsets.
///
/// Invariants: `index` maps page `p` to slot `i` exactly when `frames[i]` holds page `p`'s
/// bytes; the other slots are `None` and listed in `free`; `last` is `NO_PAGE` or names
/// an entry of `index` (the page looked up last: consecutive accesses to one page, the TLPs
/// of a transfer, skip the map).
#[derive(Debug, Clone)]
pub struct SparseMemory {
    index: FxHashMap<u64, u32>,
    frames: Vec<Option<Box<[u8]>>>,
    free: Vec<u32>,
    last: Cell<(u64, u32)>,
}

/// No page: page numbers are offsets shifted by [`PAGE_SHIFT`], so never this.
const NO_PAGE: u64 = u64::MAX;

/// Zeroes are written at most this many bytes at a time: glibc's `memset` uses `rep stosb`
/// from 2 KiB on, no faster on hardware than its vector loop below that and counted by
/// callgrind (this project's yardstick, `scripts/instructions.sh`) as an instruction per byte
/// (the engine gathers the bytes it copies in pages for the same reason).
const ZEROES_AT_ONCE: usize = 1024;

/// Appends `n` zeroes to `out` (see [`ZEROES_AT_ONCE`]).
fn extend_zeroes(out: &mut Vec<u8>, n: usize) {
    let mut left = n;
    while left > 0 {
        let k = left.min(ZEROES_AT_ONCE);
        out.resize(out.len() + k, 0);
        left -= k;
    }
}

/// A page of zeroes.
fn zeroed_page() -> Box<[u8]> {
    vec![0u8; PAGE_SIZE as usize].into_boxed_slice()
}

impl Default for SparseMemory {
    fn default() -> Self {
        SparseMemory {
            index: FxHashMap::default(),
            frames: Vec::new(),
            free: Vec::new(),
            last: Cell::new((NO_PAGE, 0)),
        }
    }
}

impl SparseMemory {
    /// Empty memory (all zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot of `page`, if it is backed.
    #[inline]
    fn slot(&self, page: u64) -> Option<usize> {
        let (last, slot) = self.last.get();
        if last == page {
            return Some(slot as usize);
        }
        let slot = *self.index.get(&page)?;
        self.last.set((page, slot));
        Some(slot as usize)
    }

    /// The bytes of `page`, if it is backed.
    #[inline]
    fn page(&self, page: u64) -> Option<&[u8]> {
        self.frames.get(self.slot(page)?)?.as_deref()
    }

    /// The bytes of `page`, if it is backed.
    fn page_mut(&mut self, page: u64) -> Option<&mut [u8]> {
        let slot = self.slot(page)?;
        self.frames.get_mut(slot)?.as_deref_mut()
    }

    /// The bytes of `page`, backed (zeroed) first if it was not.
    #[inline]
    fn page_backed(&mut self, page: u64) -> &mut [u8] {
        let slot = match self.slot(page) {
            Some(slot) => slot,
            None => self.back(page, zeroed_page()),
        };
        self.frames[slot].get_or_insert_with(zeroed_page)
    }

    /// Backs `page`, which is not backed, with `frame` (its bytes); returns its slot.
    fn back(&mut self, page: u64, frame: Box<[u8]>) -> usize {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.frames[slot as usize] = Some(frame);
                slot
            }
            None => {
                self.frames.push(Some(frame));
                // 2^32 pages of 4 KiB would be 16 TiB of backed memory.
                u32::try_from(self.frames.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.index.insert(page, slot);
        self.last.set((page, slot));
        slot as usize
    }

    /// Gives `page` back (it reads as zero again).
    fn drop_page(&mut self, page: u64) {
        if let Some(slot) = self.index.remove(&page) {
            self.frames[slot as usize] = None;
            self.free.push(slot);
            if self.last.get().0 == page {
                self.last.set((NO_PAGE, 0));
            }
        }
    }

    /// The `len` bytes at `offset`, in place, when they lie in one backed page (`None`
    /// otherwise: read them with [`SparseMemory::read`]).
    #[inline]
    pub fn backed(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let within = (offset & (PAGE_SIZE - 1)) as usize;
        self.page(offset >> PAGE_SHIFT)?
            .get(within..within.checked_add(len)?)
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        self.pieces(offset, buf.len(), |piece, n| {
            let to = &mut buf[done..done + n];
            match piece {
                Some(bytes) => to.copy_from_slice(bytes),
                None => to.fill(0),
            }
            done += n;
        });
    }

    /// Whether none of the `len` bytes from `offset` was ever written (or all were given
    /// back): they all read as zero. One look-up per page.
    #[inline]
    pub fn is_unwritten(&self, offset: u64, len: u64) -> bool {
        let Some(last) = len.checked_sub(1).and_then(|l| offset.checked_add(l)) else {
            return len == 0;
        };
        (offset >> PAGE_SHIFT..=last >> PAGE_SHIFT).all(|p| self.page(p).is_none())
    }

    /// Appends the `len` bytes from `offset` to `out` (unwritten bytes as zeroes): a read
    /// into a buffer that is not zeroed first.
    pub fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        out.reserve(len);
        self.pieces(offset, len, |piece, n| match piece {
            Some(bytes) => out.extend_from_slice(bytes),
            None => extend_zeroes(out, n),
        });
    }

    /// Walks `len` bytes from `offset` a page at a time: each piece's bytes, or `None` and
    /// its length where the page was never written.
    #[inline]
    fn pieces(&self, offset: u64, len: usize, mut each: impl FnMut(Option<&[u8]>, usize)) {
        let mut done = 0usize;
        while done < len {
            let at = offset + done as u64;
            let in_page = (at & (PAGE_SIZE - 1)) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(len - done);
            let page = self.page(at >> PAGE_SHIFT);
            each(page.map(|p| &p[in_page..in_page + n]), n);
            done += n;
        }
    }

    /// Copies `data` to `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let in_page = (at & (PAGE_SIZE - 1)) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(data.len() - done);
            let (page, bytes) = (at >> PAGE_SHIFT, &data[done..done + n]);
            if n == PAGE_SIZE as usize && self.slot(page).is_none() {
                // A whole page not backed yet: backed by these bytes, no zeroes written first.
                self.back(page, bytes.into());
            } else {
                self.page_backed(page)[in_page..in_page + n].copy_from_slice(bytes);
            }
            done += n;
        }
    }

    /// Zeroes `len` bytes from `offset`: whole pages are given back (they read as zero), so
    /// clearing a large range costs no memory.
    pub fn zero(&mut self, offset: u64, len: u64) {
        let end = offset.saturating_add(len);
        if end == offset {
            return;
        }
        let (first, last) = (offset >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT);
        // Visit only pages that can hold data: the range's, or the resident ones in it when
        // there are fewer of those (a range may span far more pages than are resident).
        if last - first >= self.index.len() as u64 {
            let span = first..=last;
            let resident: Vec<u64> = self
                .index
                .keys()
                .copied()
                .filter(|p| span.contains(p))
                .collect();
            for page in resident {
                self.zero_in_page(page, offset, end);
            }
        } else {
            for page in first..=last {
                self.zero_in_page(page, offset, end);
            }
        }
    }

    /// Zeroes the part of `offset..end` that falls in `page`: drops the page when it is all
    /// of it.
    fn zero_in_page(&mut self, page: u64, offset: u64, end: u64) {
        let base = page << PAGE_SHIFT;
        let from = offset.max(base) - base;
        let to = end.min(base.saturating_add(PAGE_SIZE)) - base;
        if to - from == PAGE_SIZE {
            self.drop_page(page);
        } else if let Some(p) = self.page_mut(page) {
            p[from as usize..to as usize].fill(0);
        }
    }

    /// Reads a little-endian `u64`.
    pub fn read_u64(&self, offset: u64) -> u64 {
        let mut b = [0u8; 8];
        self.read(offset, &mut b);
        u64::from_le_bytes(b)
    }

    /// Writes a little-endian `u64`.
    pub fn write_u64(&mut self, offset: u64, value: u64) {
        self.write(offset, &value.to_le_bytes());
    }

    /// Bytes actually backed (a multiple of the internal page size).
    pub fn resident_bytes(&self) -> u64 {
        self.index.len() as u64 * PAGE_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random 4 KiB block writes (an NVMe namespace under fio) back only the blocks written:
    /// memory follows what was written, not a larger page around it.
    #[test]
    fn a_block_write_backs_that_block_alone_with_its_own_bytes() {
        let mut m = SparseMemory::new();
        let block: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8 + 1).collect();
        for n in [5u64, 1_000_003, 17] {
            m.write(n * 4096, &block);
        }
        assert_eq!(m.resident_bytes(), 3 * 4096);
        let mut back = vec![0u8; 3 * 4096];
        m.read(1_000_002 * 4096, &mut back);
        assert!(
            back[..4096].iter().all(|&b| b == 0),
            "the block before: unwritten"
        );
        assert_eq!(back[4096..8192], block[..]);
        assert!(
            back[8192..].iter().all(|&b| b == 0),
            "the block after: unwritten"
        );
    }

    #[test]
    fn a_range_is_unwritten_until_a_byte_of_one_of_its_pages_is_written_and_again_once_zeroed() {
        let mut m = SparseMemory::new();
        assert!(m.is_unwritten(0, 3 * PAGE_SIZE));
        assert!(m.is_unwritten(u64::MAX, 1), "the last byte, no overflow");
        assert!(m.is_unwritten(5, 0));
        m.write(2 * PAGE_SIZE + 7, &[1]);
        assert!(m.is_unwritten(0, 2 * PAGE_SIZE), "the pages before it");
        assert!(
            !m.is_unwritten(0, 2 * PAGE_SIZE + 1),
            "reaches into the written page"
        );
        assert!(
            !m.is_unwritten(2 * PAGE_SIZE + 100, 1),
            "a page is written as a whole"
        );
        assert!(m.is_unwritten(3 * PAGE_SIZE, PAGE_SIZE));
        m.zero(2 * PAGE_SIZE, PAGE_SIZE);
        assert!(
            m.is_unwritten(0, 4 * PAGE_SIZE),
            "a zeroed page is given back"
        );
    }

    #[test]
    fn an_appending_read_gives_what_a_read_gives_across_written_and_unwritten_pages() {
        let mut m = SparseMemory::new();
        let pattern: Vec<u8> = (0..PAGE_SIZE as usize + 300)
            .map(|i| (i % 251) as u8 + 1)
            .collect();
        m.write(PAGE_SIZE - 100, &pattern);
        for (offset, len) in [
            (0, 10),
            (PAGE_SIZE - 150, 400),
            (PAGE_SIZE - 100, pattern.len()),
            (2 * PAGE_SIZE + 150, PAGE_SIZE as usize),
        ] {
            let mut want = vec![0xeeu8; len];
            m.read(offset, &mut want);
            let mut got = vec![9u8, 9];
            m.read_append(offset, len, &mut got);
            assert_eq!(&got[..2], &[9, 9], "what was there is kept");
            assert_eq!(&got[2..], &want[..], "{offset}+{len}");
        }
    }

    #[test]
    fn bytes_in_one_backed_page_are_handed_over_in_place_and_no_others() {
        let mut m = SparseMemory::new();
        let pattern: Vec<u8> = (0..300).map(|i| (i % 251) as u8 + 1).collect();
        m.write(PAGE_SIZE - 100, &pattern);
        assert_eq!(m.backed(PAGE_SIZE - 100, 100), Some(&pattern[..100]));
        assert_eq!(m.backed(PAGE_SIZE, 200), Some(&pattern[100..]));
        assert_eq!(
            m.backed(PAGE_SIZE, PAGE_SIZE as usize).map(<[u8]>::len),
            Some(4096)
        );
        assert_eq!(m.backed(PAGE_SIZE - 100, 101), None, "across two pages");
        assert_eq!(
            m.backed(PAGE_SIZE + 1, PAGE_SIZE as usize),
            None,
            "past the page"
        );
        assert_eq!(m.backed(5 * PAGE_SIZE, 16), None, "an unbacked page");
        assert_eq!(m.backed(PAGE_SIZE + 8, 0), Some(&[][..]));
        assert_eq!(m.backed(PAGE_SIZE + 8, usize::MAX), None, "no overflow");
    }

    /// Pages a write covers whole are backed by its bytes (new ones, reused slots and pages
    /// already backed alike), and the partial pages at its ends keep the bytes beside it.
    #[test]
    fn a_write_reads_back_whether_it_covers_pages_whole_or_in_part() {
        let mut m = SparseMemory::new();
        let page = PAGE_SIZE as usize;
        let old: Vec<u8> = (0..4 * page).map(|i| (i % 13) as u8 + 1).collect();
        // Page 1 backed before; 0, 2 and 3 not.
        m.write(PAGE_SIZE + 5, &old[page + 5..2 * page - 5]);
        // A page given back leaves a slot to reuse (page 2's, whole).
        m.write(9 * PAGE_SIZE, &[1]);
        m.zero(9 * PAGE_SIZE, PAGE_SIZE);
        let new: Vec<u8> = (0..4 * page - 200).map(|i| (i % 241) as u8 + 7).collect();
        m.write(100, &new);
        let mut got = vec![0xeeu8; 4 * page];
        m.read(0, &mut got);
        assert!(
            got[..100].iter().all(|&b| b == 0),
            "unwritten bytes of page 0"
        );
        assert_eq!(&got[100..4 * page - 100], &new[..]);
        assert!(
            got[4 * page - 100..].iter().all(|&b| b == 0),
            "page 3's last bytes"
        );
        assert_eq!(m.resident_bytes(), 4 * PAGE_SIZE);
        // Whole pages written over whole pages.
        m.write(PAGE_SIZE, &old[..2 * page]);
        m.read(PAGE_SIZE, &mut got[..2 * page]);
        assert_eq!(&got[..2 * page], &old[..2 * page]);
    }

    #[test]
    fn zeroing_gives_whole_pages_back_and_clears_partial_ones() {
        let mut m = SparseMemory::new();
        m.write(100, &vec![7u8; 3 * PAGE_SIZE as usize]);
        assert_eq!(m.resident_bytes(), 4 * PAGE_SIZE);
        m.zero(200, 3 * PAGE_SIZE - 200);
        let mut buf = vec![0xffu8; 4 * PAGE_SIZE as usize];
        m.read(0, &mut buf);
        assert!(buf[100..200].iter().all(|&b| b == 7));
        assert!(buf[200..3 * PAGE_SIZE as usize].iter().all(|&b| b == 0));
        assert!(buf[3 * PAGE_SIZE as usize..3 * PAGE_SIZE as usize + 100]
            .iter()
            .all(|&b| b == 7));
        assert_eq!(
            m.resident_bytes(),
            2 * PAGE_SIZE,
            "the two whole pages are gone"
        );
        m.zero(u64::MAX - 10, 100);
    }

    #[test]
    fn zeroing_a_range_far_larger_than_what_is_resident_visits_only_resident_pages() {
        let mut m = SparseMemory::new();
        let far = 1u64 << 50;
        m.write(far + 10, &[5u8; 20]);
        m.write(far + 5 * PAGE_SIZE, &[6u8; 8]);
        m.write(3, &[9u8; 4]);
        // 2^50 bytes from 5: the first page keeps its first 5 bytes, the far pages go.
        m.zero(5, far + 6 * PAGE_SIZE);
        let mut b = [0xffu8; 8];
        m.read(0, &mut b);
        assert_eq!(b, [0, 0, 0, 9, 9, 0, 0, 0]);
        m.read(far + 10, &mut b);
        assert_eq!(b, [0; 8]);
        assert_eq!(m.resident_bytes(), PAGE_SIZE, "only the first page is left");
    }

    #[test]
    fn pages_given_back_and_backed_again_hold_only_their_own_bytes() {
        let mut m = SparseMemory::new();
        m.write(0, &[1u8; 8]);
        m.write(PAGE_SIZE, &[2u8; 8]);
        // The page looked up last is given back; a read of it is zero, not a stale slot.
        m.zero(PAGE_SIZE, PAGE_SIZE);
        assert_eq!(m.read_u64(PAGE_SIZE), 0);
        m.zero(0, PAGE_SIZE);
        assert_eq!(m.resident_bytes(), 0);
        // Slots are reused by other pages; each reads back its own bytes.
        m.write(5 * PAGE_SIZE, &[5u8; 8]);
        m.write(7 * PAGE_SIZE + 4, &[7u8; 4]);
        assert_eq!(m.read_u64(5 * PAGE_SIZE), u64::from_le_bytes([5; 8]));
        assert_eq!(
            m.read_u64(7 * PAGE_SIZE),
            u64::from_le_bytes([0, 0, 0, 0, 7, 7, 7, 7])
        );
        assert_eq!(m.read_u64(0), 0, "page 0 was given back");
        assert_eq!(m.read_u64(PAGE_SIZE), 0, "page 1 was given back");
        assert_eq!(m.resident_bytes(), 2 * PAGE_SIZE);
        let copy = m.clone();
        assert_eq!(copy.read_u64(5 * PAGE_SIZE), u64::from_le_bytes([5; 8]));
    }

    #[test]
    fn unwritten_memory_reads_as_zero() {
        let m = SparseMemory::new();
        let mut buf = [0xffu8; 16];
        m.read(1 << 40, &mut buf);
        assert_eq!(buf, [0u8; 16]);
        assert_eq!(m.resident_bytes(), 0);
    }

    #[test]
    fn writes_spanning_pages_read_back_exactly() {
        let mut m = SparseMemory::new();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + 3) as u8).collect();
        m.write(PAGE_SIZE - 5, &data);
        let mut back = vec![0u8; data.len()];
        m.read(PAGE_SIZE - 5, &mut back);
        assert_eq!(back, data);
        let mut edge = [0u8; 10];
        m.read(PAGE_SIZE - 10, &mut edge);
        assert_eq!(&edge[..5], &[0; 5]);
        assert_eq!(&edge[5..], &data[..5]);
    }
}
