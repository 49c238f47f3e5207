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
}
