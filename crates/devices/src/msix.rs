//! The MSI-X table and pending-bit array a function keeps in one of its BARs.
//!
//! Software writes each vector's message address and data and may mask it; the function
//! signals vector `v` by writing the data to the address. A masked vector's message is held
//! as a pending bit and sent when software unmasks it.

use smartio_platform::pci::msix;
use smartio_platform::{BusAddr, CompleterError};
use std::cell::{Cell, RefCell};

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    address: u64,
    data: u32,
    control: u32,
}

impl Entry {
    /// The message this entry's address and data registers describe.
    fn message(&self) -> MsiMessage {
        MsiMessage {
            address: BusAddr(self.address),
            data: self.data,
        }
    }
}

/// One function's MSI-X vectors.
#[derive(Debug)]
pub struct MsixTable {
    entries: RefCell<Vec<Entry>>,
    pending: RefCell<Vec<bool>>,
    /// Whether any pending bit may be set (spares the scan on every doorbell).
    any_pending: Cell<bool>,
}

/// A message to send (the platform's type, re-exported where the table produces it).
pub use smartio_platform::MsiMessage;

/// The message a function sends to signal `vector`: the vector's MSI-X message when MSI-X is
/// enabled (`None` while it is masked: held pending), else the legacy INTx assertion — the
/// routed line as a write to the root complex's interrupt controller — when INTx is routed.
pub fn interrupt_message(
    pci: &crate::config::ConfigSpace,
    table: &MsixTable,
    vector: u16,
) -> Option<MsiMessage> {
    if pci.msix_active() {
        table.signal(vector)
    } else {
        pci.intx_line().map(|line| MsiMessage {
            address: BusAddr(smartio_platform::msi::INTERRUPT_CONTROLLER),
            data: u32::from(line),
        })
    }
}

impl MsixTable {
    /// `vectors` entries, all masked (the reset state).
    pub fn new(vectors: u16) -> Self {
        let entry = Entry {
            control: msix::VECTOR_MASKED,
            ..Entry::default()
        };
        Self {
            entries: RefCell::new(vec![entry; vectors as usize]),
            pending: RefCell::new(vec![false; vectors as usize]),
            any_pending: Cell::new(false),
        }
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    /// Whether the table has no vectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Back to the reset state: every vector masked, nothing pending.
    pub fn reset(&self) {
        for e in self.entries.borrow_mut().iter_mut() {
            *e = Entry {
                control: msix::VECTOR_MASKED,
                ..Entry::default()
            };
        }
        self.pending.borrow_mut().fill(false);
        self.any_pending.set(false);
    }

    /// The function wants to signal `vector`: the message to send, or `None` when the vector
    /// is masked (it becomes pending) or does not exist.
    pub fn signal(&self, vector: u16) -> Option<MsiMessage> {
        let entries = self.entries.borrow();
        let e = entries.get(vector as usize)?;
        if e.control & msix::VECTOR_MASKED != 0 {
            self.pending.borrow_mut()[vector as usize] = true;
            self.any_pending.set(true);
            return None;
        }
        Some(e.message())
    }

    /// Messages that became sendable since the last call (vectors unmasked while pending).
    pub fn take_unmasked_pending(&self) -> Vec<MsiMessage> {
        if !self.any_pending.get() {
            return Vec::new();
        }
        let entries = self.entries.borrow();
        let mut pending = self.pending.borrow_mut();
        let mut out = Vec::new();
        for (v, p) in pending.iter_mut().enumerate() {
            if *p && entries[v].control & msix::VECTOR_MASKED == 0 {
                *p = false;
                out.push(entries[v].message());
            }
        }
        self.any_pending.set(pending.iter().any(|&p| p));
        out
    }

    /// A read of the table at `offset` (dword or qword accesses).
    pub fn read_table(&self, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        check_width(offset, buf.len())?;
        let entries = self.entries.borrow();
        for (i, chunk) in buf.chunks_mut(4).enumerate() {
            let o = offset + 4 * i as u64;
            let e = entries
                .get((o / msix::ENTRY_SIZE) as usize)
                .ok_or(CompleterError::OutOfRange)?;
            let v = match o % msix::ENTRY_SIZE {
                0 => e.address as u32,
                4 => (e.address >> 32) as u32,
                8 => e.data,
                _ => e.control,
            };
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }

    /// A write of the table at `offset`. Returns whether a vector may have been unmasked.
    pub fn write_table(&self, offset: u64, data: &[u8]) -> Result<bool, CompleterError> {
        check_width(offset, data.len())?;
        let mut entries = self.entries.borrow_mut();
        let mut unmasked = false;
        for (i, chunk) in data.chunks(4).enumerate() {
            let o = offset + 4 * i as u64;
            let e = entries
                .get_mut((o / msix::ENTRY_SIZE) as usize)
                .ok_or(CompleterError::OutOfRange)?;
            let v = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            match o % msix::ENTRY_SIZE {
                0 => e.address = (e.address & !0xffff_ffff) | u64::from(v & !3),
                4 => e.address = (e.address & 0xffff_ffff) | (u64::from(v) << 32),
                8 => e.data = v,
                _ => {
                    unmasked |= v & msix::VECTOR_MASKED == 0;
                    e.control = v & msix::VECTOR_MASKED;
                }
            }
        }
        Ok(unmasked)
    }

    /// A read of the pending-bit array at `offset`.
    pub fn read_pba(&self, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        check_width(offset, buf.len())?;
        let pending = self.pending.borrow();
        // The array is a whole number of qwords.
        let size = pending.len().div_ceil(64) * 8;
        if offset as usize + buf.len() > size {
            return Err(CompleterError::OutOfRange);
        }
        for (i, byte) in buf.iter_mut().enumerate() {
            let first = (offset as usize + i) * 8;
            *byte = (0..8)
                .filter(|b| pending.get(first + b).copied().unwrap_or(false))
                .fold(0u8, |acc, b| acc | 1 << b);
        }
        Ok(())
    }
}

fn check_width(offset: u64, len: usize) -> Result<(), CompleterError> {
    if len == 0 || !len.is_multiple_of(4) || !offset.is_multiple_of(4) {
        return Err(CompleterError::BadWidth(len));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_vectors_hold_their_message_until_unmasked() {
        let t = MsixTable::new(4);
        t.write_table(16, &0xfee0_0000u32.to_le_bytes())
            .expect("addr");
        t.write_table(24, &77u32.to_le_bytes()).expect("data");
        assert_eq!(t.signal(1), None, "reset state is masked");
        let mut pba = [0u8; 4];
        t.read_pba(0, &mut pba).expect("pba");
        assert_eq!(pba[0], 0b10);
        assert!(t.write_table(28, &0u32.to_le_bytes()).expect("unmask"));
        let sent = t.take_unmasked_pending();
        assert_eq!(
            sent,
            vec![MsiMessage {
                address: BusAddr(0xfee0_0000),
                data: 77
            }]
        );
        assert_eq!(t.signal(1), sent.first().copied());
        assert_eq!(t.signal(9), None);
        assert_eq!(t.write_table(64, &[0; 4]), Err(CompleterError::OutOfRange));
    }

    /// Reads `n` bytes of the table at `offset`.
    fn read(t: &MsixTable, offset: u64, n: usize) -> Result<Vec<u8>, CompleterError> {
        let mut buf = vec![0u8; n];
        t.read_table(offset, &mut buf).map(|()| buf)
    }

    fn dword(v: u32) -> [u8; 4] {
        v.to_le_bytes()
    }

    #[test]
    fn an_entry_reads_back_as_written_field_by_field_and_whole() {
        let t = MsixTable::new(3);
        assert_eq!((t.len(), t.is_empty()), (3, false));
        assert!(MsixTable::new(0).is_empty());
        // Vector 2: a 64-bit address (the low two bits are not writable), data, unmasked.
        let e = 2 * msix::ENTRY_SIZE;
        t.write_table(e, &dword(0xfee0_1237)).expect("address low");
        t.write_table(e + 4, &dword(0x1)).expect("address high");
        t.write_table(e + 8, &dword(0x4242)).expect("data");
        assert!(t.write_table(e + 12, &dword(0)).expect("control"));
        assert_eq!(read(&t, e, 4), Ok(dword(0xfee0_1234).to_vec()));
        assert_eq!(read(&t, e + 4, 4), Ok(dword(1).to_vec()));
        assert_eq!(read(&t, e + 8, 4), Ok(dword(0x4242).to_vec()));
        assert_eq!(read(&t, e + 12, 4), Ok(dword(0).to_vec()));
        // A whole entry in one access: address low, high, data, control.
        let whole: Vec<u8> = [0xfee0_1234, 1, 0x4242, 0]
            .into_iter()
            .flat_map(dword)
            .collect();
        assert_eq!(read(&t, e, 16), Ok(whole));
        assert_eq!(
            t.signal(2),
            Some(MsiMessage {
                address: BusAddr(0x1_fee0_1234),
                data: 0x4242
            })
        );
        // Only the mask bit of the control word is writable; masking again says so.
        assert!(!t.write_table(e + 12, &dword(0xffff_ffff)).expect("mask"));
        assert_eq!(read(&t, e + 12, 4), Ok(dword(msix::VECTOR_MASKED).to_vec()));
        // Writing the high half keeps the low half, and the low half the high one.
        t.write_table(e + 4, &dword(0x2)).expect("address high");
        t.write_table(e, &dword(0xfee0_0000)).expect("address low");
        assert_eq!(read(&t, e, 8), Ok([dword(0xfee0_0000), dword(2)].concat()));
    }

    #[test]
    fn a_reset_masks_every_vector_and_forgets_what_was_pending() {
        let t = MsixTable::new(2);
        t.write_table(0, &dword(0xfee0_0000)).expect("address");
        t.write_table(12, &dword(0)).expect("unmask");
        t.write_table(16 + 12, &dword(msix::VECTOR_MASKED))
            .expect("mask 1");
        assert_eq!(t.signal(1), None, "pending");
        t.reset();
        assert_eq!(read(&t, 12, 4), Ok(dword(msix::VECTOR_MASKED).to_vec()));
        assert_eq!(read(&t, 0, 4), Ok(dword(0).to_vec()), "the address cleared");
        assert_eq!(t.signal(0), None, "masked again");
        let mut pba = [0u8; 8];
        t.read_pba(0, &mut pba).expect("pba");
        assert_eq!(
            pba,
            [0b01, 0, 0, 0, 0, 0, 0, 0],
            "only the signal after the reset"
        );
        t.write_table(16 + 12, &dword(0)).expect("unmask 1");
        assert_eq!(
            t.take_unmasked_pending(),
            vec![],
            "vector 1's pending bit is gone"
        );
    }

    #[test]
    fn the_pending_bits_of_vectors_past_the_first_byte_and_qword_read_where_they_belong() {
        let t = MsixTable::new(70);
        for v in [3u16, 9, 64, 69] {
            assert_eq!(t.signal(v), None, "masked: pending");
        }
        let mut pba = [0u8; 16];
        t.read_pba(0, &mut pba).expect("two qwords");
        assert_eq!(pba[..2], [0b1000, 0b10]);
        assert_eq!(pba[8], 0b10_0001, "vectors 64 and 69");
        let mut second = [0u8; 8];
        t.read_pba(8, &mut second).expect("the second qword");
        assert_eq!(second[0], 0b10_0001);
        assert_eq!(t.read_pba(16, &mut second), Err(CompleterError::OutOfRange));
        // Unmasking one of them sends it and leaves the others pending.
        t.write_table(9 * msix::ENTRY_SIZE + 12, &dword(0))
            .expect("unmask 9");
        assert_eq!(t.take_unmasked_pending().len(), 1);
        t.read_pba(0, &mut pba).expect("pba");
        assert_eq!((pba[0], pba[1], pba[8]), (0b1000, 0, 0b10_0001));
        t.write_table(64 * msix::ENTRY_SIZE + 12, &dword(0))
            .expect("unmask 64");
        assert_eq!(t.take_unmasked_pending().len(), 1, "still more pending");
    }

    #[test]
    fn accesses_are_whole_dwords_at_dword_offsets() {
        let t = MsixTable::new(2);
        let mut two = [0u8; 2];
        assert_eq!(t.read_table(0, &mut two), Err(CompleterError::BadWidth(2)));
        assert_eq!(
            t.read_table(2, &mut [0u8; 4]),
            Err(CompleterError::BadWidth(4))
        );
        assert_eq!(t.write_table(0, &[]), Err(CompleterError::BadWidth(0)));
        assert_eq!(t.write_table(6, &[0; 4]), Err(CompleterError::BadWidth(4)));
        assert_eq!(t.read_pba(0, &mut two), Err(CompleterError::BadWidth(2)));
        assert_eq!(
            read(&t, 2 * msix::ENTRY_SIZE, 4),
            Err(CompleterError::OutOfRange)
        );
    }
}
