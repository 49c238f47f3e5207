//! The driver's side: PRP1, PRP2 and the PRP list pages for a buffer that is contiguous in
//! the device's address space, with memory pages of [`PAGE_SIZE`] (CC.MPS = 0).
//!
//! Pure: the caller says where its list pages are (as the device addresses them) and writes
//! the returned [`ListPage`]s there before submitting the command.

use smartio_platform::PAGE_SIZE;
use thiserror::Error;

/// Bytes per PRP entry.
const ENTRY: u64 = 8;

/// A command's data pointer and the list pages it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prps {
    /// PRP entry 1: the buffer's first byte.
    pub prp1: u64,
    /// PRP entry 2: 0 when one page suffices, the second page when two do, else the first
    /// list page.
    pub prp2: u64,
    /// The list pages to write, in the order they were given to [`build`] (empty without a
    /// list). Only as many as needed are used.
    pub lists: Vec<ListPage>,
}

/// One PRP list page as it must be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// Where the device reads it.
    pub addr: u64,
    /// Its entries: page addresses, and as the last one the next list page's address when
    /// more follow.
    pub entries: Vec<u64>,
}

impl ListPage {
    /// The entries as the device reads them (little-endian quadwords).
    pub fn bytes(&self) -> Vec<u8> {
        self.entries.iter().flat_map(|e| e.to_le_bytes()).collect()
    }
}

/// Why PRPs could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PrpError {
    /// The buffer needs more list pages than were given.
    #[error("the buffer needs {needed} PRP list page(s), {given} given")]
    ListPagesShort {
        /// List pages needed (with the given ones' offsets).
        needed: usize,
        /// List pages given.
        given: usize,
    },
    /// A list page is not quadword aligned (entries are 8 bytes).
    #[error("PRP list page at {0:#x} is not 8-byte aligned")]
    UnalignedList(u64),
    /// The buffer runs past the end of the 64-bit address space.
    #[error("a buffer of {len} bytes at {addr:#x} runs past the end of the address space")]
    Overflow {
        /// Its first byte.
        addr: u64,
        /// Its length.
        len: u64,
    },
}

/// Page addresses after the first page of `len` bytes at `addr`: every page the buffer
/// touches except the one PRP1 points into.
fn later_pages(addr: u64, len: u64) -> Result<Vec<u64>, PrpError> {
    let end = addr
        .checked_add(len)
        .ok_or(PrpError::Overflow { addr, len })?;
    let mut pages = Vec::new();
    let mut page = (addr & !(PAGE_SIZE - 1)).checked_add(PAGE_SIZE);
    while let Some(p) = page.filter(|&p| p < end) {
        pages.push(p);
        page = p.checked_add(PAGE_SIZE);
    }
    Ok(pages)
}

/// How many pages [`later_pages`] lists, without listing them.
fn later_page_count(addr: u64, len: u64) -> Result<u64, PrpError> {
    let end = addr
        .checked_add(len)
        .ok_or(PrpError::Overflow { addr, len })?;
    Ok(if len == 0 {
        0
    } else {
        ((end - 1) / PAGE_SIZE) - (addr / PAGE_SIZE)
    })
}

/// Entries a list page at `addr` holds (up to its page's end).
fn slots(addr: u64) -> u64 {
    (PAGE_SIZE - (addr & (PAGE_SIZE - 1))) / ENTRY
}

/// List pages `len` bytes at `addr` need when every list page is page aligned: 0 when PRP1
/// and PRP2 suffice (at most two pages touched).
pub fn list_pages_needed(addr: u64, len: u64) -> usize {
    let n = later_page_count(addr, len).unwrap_or(0);
    let per_page = PAGE_SIZE / ENTRY;
    match n {
        0 | 1 => 0,
        n if n <= per_page => 1,
        // Every page but the last gives one slot to the chain pointer.
        n => (1 + (n - per_page).div_ceil(per_page - 1)) as usize,
    }
}

/// PRPs for `len` bytes at device address `addr`, with PRP list pages (when more than two
/// pages are touched) at `lists`, in order. A list page may start at any quadword in its
/// page and then holds the entries up to the page's end, as the controller reads it.
///
/// Errors: too few list pages, a list page not quadword aligned, a buffer past the end of
/// the address space. PRP1's own alignment (dword) is the controller's to check.
pub fn build(addr: u64, len: u64, lists: &[u64]) -> Result<Prps, PrpError> {
    // One or two pages need no list (and no allocation): PRP2 is 0 or the second page.
    match later_page_count(addr, len)? {
        0 => {
            return Ok(Prps {
                prp1: addr,
                prp2: 0,
                lists: Vec::new(),
            })
        }
        1 => {
            return Ok(Prps {
                prp1: addr,
                prp2: (addr & !(PAGE_SIZE - 1)) + PAGE_SIZE,
                lists: Vec::new(),
            })
        }
        _ => {}
    }
    let pages = later_pages(addr, len)?;
    let mut out: Vec<ListPage> = Vec::new();
    let mut rest = pages.as_slice();
    while !rest.is_empty() {
        let i = out.len();
        let Some(&at) = lists.get(i) else {
            return Err(PrpError::ListPagesShort {
                needed: i + 1,
                given: lists.len(),
            });
        };
        if at % ENTRY != 0 {
            return Err(PrpError::UnalignedList(at));
        }
        let slots = slots(at) as usize;
        if rest.len() <= slots {
            out.push(ListPage {
                addr: at,
                entries: rest.to_vec(),
            });
            break;
        }
        // Chain: this page's last slot points to the next list page.
        let Some(&next) = lists.get(i + 1) else {
            return Err(PrpError::ListPagesShort {
                needed: i + 2,
                given: lists.len(),
            });
        };
        let (here, later) = rest.split_at(slots - 1);
        let mut entries = here.to_vec();
        entries.push(next);
        out.push(ListPage { addr: at, entries });
        rest = later;
    }
    Ok(Prps {
        prp1: addr,
        prp2: out.first().map_or(0, |l| l.addr),
        lists: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUF: u64 = 0x10_0000;
    const LIST: u64 = 0x80_0000;

    #[test]
    fn one_page_needs_prp1_only() {
        let p = build(BUF, PAGE_SIZE, &[]).expect("one page");
        assert_eq!((p.prp1, p.prp2, p.lists.len()), (BUF, 0, 0));
        let p = build(BUF + 0x200, 512, &[]).expect("inside one page");
        assert_eq!((p.prp1, p.prp2), (BUF + 0x200, 0));
        assert_eq!(list_pages_needed(BUF, PAGE_SIZE), 0);
    }

    #[test]
    fn two_pages_put_the_second_in_prp2() {
        let p = build(BUF, 2 * PAGE_SIZE, &[]).expect("two pages");
        assert_eq!((p.prp1, p.prp2), (BUF, BUF + PAGE_SIZE));
        // An offset that makes one page's worth of data straddle two pages.
        let p = build(BUF + 0x800, PAGE_SIZE, &[]).expect("straddling");
        assert_eq!((p.prp1, p.prp2), (BUF + 0x800, BUF + PAGE_SIZE));
        assert!(p.lists.is_empty());
    }

    #[test]
    fn more_pages_go_to_a_list_that_prp2_points_to() {
        let p = build(BUF, 3 * PAGE_SIZE, &[LIST]).expect("list");
        assert_eq!((p.prp1, p.prp2), (BUF, LIST));
        assert_eq!(
            p.lists,
            [ListPage {
                addr: LIST,
                entries: vec![BUF + PAGE_SIZE, BUF + 2 * PAGE_SIZE],
            }]
        );
        assert_eq!(
            p.lists[0].bytes()[8..16],
            (BUF + 2 * PAGE_SIZE).to_le_bytes()
        );
        assert_eq!(list_pages_needed(BUF, 3 * PAGE_SIZE), 1);
    }

    #[test]
    fn an_unaligned_start_touches_one_page_more() {
        // 8 KiB from 0x200 into a page touches three pages: PRP1 and a list of two.
        let p = build(BUF + 0x200, 2 * PAGE_SIZE, &[LIST]).expect("list");
        assert_eq!(p.prp1, BUF + 0x200);
        assert_eq!(p.lists[0].entries, [BUF + PAGE_SIZE, BUF + 2 * PAGE_SIZE]);
        assert_eq!(
            build(BUF + 0x200, 2 * PAGE_SIZE, &[]),
            Err(PrpError::ListPagesShort {
                needed: 1,
                given: 0
            })
        );
    }

    #[test]
    fn a_long_list_chains_through_the_last_entry_of_each_list_page() {
        // 600 later pages: 511 in the first list page plus the chain pointer, 89 in the next.
        let len = 601 * PAGE_SIZE;
        assert_eq!(list_pages_needed(BUF, len), 2);
        let second = LIST + 0x10_000;
        let p = build(BUF, len, &[LIST, second]).expect("chained");
        assert_eq!(p.lists.len(), 2);
        assert_eq!(p.lists[0].entries.len(), 512);
        assert_eq!(p.lists[0].entries[510], BUF + 511 * PAGE_SIZE);
        assert_eq!(p.lists[0].entries[511], second);
        assert_eq!(p.lists[1].entries.len(), 89);
        assert_eq!(p.lists[1].entries[88], BUF + 600 * PAGE_SIZE);
        assert_eq!(
            build(BUF, len, &[LIST]),
            Err(PrpError::ListPagesShort {
                needed: 2,
                given: 1
            })
        );
        // Exactly one full list page needs no chain.
        assert_eq!(list_pages_needed(BUF, 513 * PAGE_SIZE), 1);
        assert_eq!(list_pages_needed(BUF, 514 * PAGE_SIZE), 2);
        assert_eq!(list_pages_needed(BUF, (1 + 512 + 511) * PAGE_SIZE), 2);
        assert_eq!(list_pages_needed(BUF, (1 + 512 + 512) * PAGE_SIZE), 3);
    }

    #[test]
    fn a_list_page_with_an_offset_holds_entries_up_to_its_page_end() {
        // Four slots left in the page: three entries and a chain pointer, then the rest.
        let at = LIST + PAGE_SIZE - 32;
        let p = build(BUF, 8 * PAGE_SIZE, &[at, LIST + PAGE_SIZE]).expect("chained");
        assert_eq!(
            p.lists[0].entries,
            [
                BUF + PAGE_SIZE,
                BUF + 2 * PAGE_SIZE,
                BUF + 3 * PAGE_SIZE,
                LIST + PAGE_SIZE
            ]
        );
        assert_eq!(p.lists[1].entries.len(), 4);
        assert_eq!(
            build(BUF, 8 * PAGE_SIZE, &[LIST + 4]),
            Err(PrpError::UnalignedList(LIST + 4))
        );
    }

    #[test]
    fn empty_and_overflowing_buffers() {
        let p = build(BUF, 0, &[]).expect("empty");
        assert_eq!((p.prp1, p.prp2), (BUF, 0));
        assert_eq!(
            build(u64::MAX - 10, 100, &[]),
            Err(PrpError::Overflow {
                addr: u64::MAX - 10,
                len: 100
            })
        );
        // The last page of the address space: nothing after it.
        let top = u64::MAX - (PAGE_SIZE - 1);
        let p = build(top, PAGE_SIZE - 1, &[]).expect("last page");
        assert_eq!((p.prp1, p.prp2), (top, 0));
    }
}
