//! Sparse, byte-exact memory: host RAM and device memory of any size, backed only where
//! written. Unwritten bytes read as zero.

use std::collections::HashMap;

const PAGE_SHIFT: u32 = 16;
const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;

/// A sparse byte array addressed by `u64` offsets.
#[derive(Debug, Default, Clone)]
pub struct SparseMemory {
    pages: HashMap<u64, Box<[u8]>>,
}

impl SparseMemory {
    /// Empty memory (all zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let in_page = (at & (PAGE_SIZE - 1)) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(buf.len() - done);
            match self.pages.get(&(at >> PAGE_SHIFT)) {
                Some(page) => buf[done..done + n].copy_from_slice(&page[in_page..in_page + n]),
                None => buf[done..done + n].fill(0),
            }
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
            let page = self
                .pages
                .entry(at >> PAGE_SHIFT)
                .or_insert_with(|| vec![0u8; PAGE_SIZE as usize].into_boxed_slice());
            page[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            done += n;
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
        self.pages.len() as u64 * PAGE_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
