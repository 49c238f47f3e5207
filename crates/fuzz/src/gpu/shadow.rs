//! What memory should hold: a sparse byte map in which every byte is known or not. Pages
//! never touched are known zero, as fresh memory is; a byte the model cannot predict (a
//! timestamp, a write of uncertain order) is marked unknown and not compared.

use std::collections::BTreeMap;

const PAGE: u64 = 4096;

#[derive(Clone)]
struct Page {
    data: Vec<u8>,
    known: Vec<bool>,
}

impl Page {
    fn zero() -> Self {
        Page {
            data: vec![0; PAGE as usize],
            known: vec![true; PAGE as usize],
        }
    }
}

/// The expected contents of one memory (host RAM by physical address, or a GPU's memory by
/// offset).
#[derive(Clone, Default)]
pub struct Shadow {
    pages: BTreeMap<u64, Page>,
}

impl std::fmt::Debug for Shadow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shadow({} pages)", self.pages.len())
    }
}

/// Splits `[addr, addr + len)` at page boundaries: (page, offset in it, bytes, offset in the
/// range). The range must not wrap.
fn pieces(addr: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut at = addr;
    let end = addr.saturating_add(len);
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let page = at / PAGE;
        let off = (at % PAGE) as usize;
        let n = (PAGE - at % PAGE).min(end - at) as usize;
        let done = (at - addr) as usize;
        at += n as u64;
        Some((page, off, n, done))
    })
}

impl Shadow {
    /// `data` at `addr` (every byte known).
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        for (page, off, n, done) in pieces(addr, data.len() as u64) {
            let p = self.pages.entry(page).or_insert_with(Page::zero);
            p.data[off..off + n].copy_from_slice(&data[done..done + n]);
            p.known[off..off + n].fill(true);
        }
    }

    /// `data` at `addr`, where `None` is an unknown byte.
    pub fn write_maybe(&mut self, addr: u64, data: &[Option<u8>]) {
        for (page, off, n, done) in pieces(addr, data.len() as u64) {
            let p = self.pages.entry(page).or_insert_with(Page::zero);
            for i in 0..n {
                match data[done + i] {
                    Some(b) => {
                        p.data[off + i] = b;
                        p.known[off + i] = true;
                    }
                    None => p.known[off + i] = false,
                }
            }
        }
    }

    /// Marks `len` bytes at `addr` unknown.
    pub fn forget(&mut self, addr: u64, len: u64) {
        for (page, off, n, _) in pieces(addr, len) {
            let p = self.pages.entry(page).or_insert_with(Page::zero);
            p.known[off..off + n].fill(false);
        }
    }

    /// The `len` bytes at `addr`, `None` where unknown.
    pub fn read_maybe(&self, addr: u64, len: u64) -> Vec<Option<u8>> {
        let mut out = Vec::with_capacity(len as usize);
        for (page, off, n, _) in pieces(addr, len) {
            match self.pages.get(&page) {
                Some(p) => out.extend((off..off + n).map(|i| p.known[i].then_some(p.data[i]))),
                None => out.extend(std::iter::repeat_n(Some(0), n)),
            }
        }
        out
    }

    /// The `len` bytes at `addr` if all are known.
    pub fn read(&self, addr: u64, len: u64) -> Option<Vec<u8>> {
        self.read_maybe(addr, len).into_iter().collect()
    }

    /// The little-endian u64 at `addr` if known.
    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let b = self.read(addr, 8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(&b);
        Some(u64::from_le_bytes(w))
    }

    /// Every page written or forgotten so far: its address, bytes and which are known.
    pub fn touched(&self) -> impl Iterator<Item = (u64, &[u8], &[bool])> {
        self.pages
            .iter()
            .map(|(p, page)| (p * PAGE, page.data.as_slice(), page.known.as_slice()))
    }

    /// The first byte of `actual` (read at `addr`) that differs from a known byte here.
    pub fn first_difference(&self, addr: u64, actual: &[u8]) -> Option<(u64, u8, u8)> {
        let expected = self.read_maybe(addr, actual.len() as u64);
        expected
            .iter()
            .zip(actual)
            .enumerate()
            .find_map(|(i, (e, a))| match e {
                Some(e) if e != a => Some((addr + i as u64, *e, *a)),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_memory_is_known_zero_and_forgotten_bytes_are_not_compared() {
        let mut s = Shadow::default();
        assert_eq!(s.read(4090, 12), Some(vec![0; 12]));
        s.write(4094, &[1, 2, 3, 4]);
        assert_eq!(s.read(4093, 6), Some(vec![0, 1, 2, 3, 4, 0]));
        s.forget(4095, 2);
        assert_eq!(s.read(4094, 4), None);
        assert_eq!(s.read_maybe(4094, 4), vec![Some(1), None, None, Some(4)]);
        assert_eq!(s.first_difference(4094, &[1, 9, 9, 4]), None);
        assert_eq!(s.first_difference(4094, &[1, 9, 9, 5]), Some((4097, 4, 5)));
    }
}
