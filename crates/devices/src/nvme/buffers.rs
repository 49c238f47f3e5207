//! Data buffers of finished commands and fetches, kept for the next ones: a read command's
//! media data and a fetch's submission queue entries go into a buffer that an earlier
//! command used, so a steady stream of commands allocates none.

use std::cell::RefCell;

/// Buffers kept, at most (more than a controller has commands in flight is rare).
const KEPT: usize = 64;

/// A buffer is kept up to this capacity (a larger one is freed: one big transfer does not
/// hold memory for the run). MDTS bounds a command's data well below it.
const KEPT_BYTES: usize = 1 << 20;

/// Spare buffers. Invariant: every buffer kept is empty, its capacity at most
/// [`KEPT_BYTES`].
#[derive(Debug, Default)]
pub(super) struct Buffers(RefCell<Vec<Vec<u8>>>);

impl Buffers {
    /// An empty buffer, with the capacity of an earlier one if one was kept.
    pub fn take(&self) -> Vec<u8> {
        self.0.borrow_mut().pop().unwrap_or_default()
    }

    /// Gives `buf` back for a later [`Buffers::take`].
    pub fn give(&self, mut buf: Vec<u8>) {
        let mut kept = self.0.borrow_mut();
        if kept.len() < KEPT && buf.capacity() <= KEPT_BYTES {
            buf.clear();
            kept.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_handed_out_again_empty_with_its_capacity() {
        let buffers = Buffers::default();
        let mut b = buffers.take();
        b.extend_from_slice(&[1; 4096]);
        let capacity = b.capacity();
        buffers.give(b);
        let again = buffers.take();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity);
    }

    #[test]
    fn a_buffer_larger_than_the_limit_is_not_kept() {
        let buffers = Buffers::default();
        buffers.give(Vec::with_capacity(KEPT_BYTES + 1));
        assert_eq!(buffers.take().capacity(), 0);
    }
}
