//! Buffers of finished commands and fetches, kept for the next ones: a read command's media
//! data, a fetch's submission queue entries and a command's PRP segments go into a buffer
//! that an earlier command used, so a steady stream of commands allocates none.

use std::cell::RefCell;

/// Buffers kept, at most (more than a controller has commands in flight is rare).
const KEPT: usize = 64;

/// A buffer is kept up to this capacity in bytes (a larger one is freed: one big transfer
/// does not hold memory for the run). MDTS bounds a command's data well below it.
const KEPT_BYTES: usize = 1 << 20;

/// Spare buffers of `T`. Invariant: every buffer kept is empty, its capacity at most
/// [`KEPT_BYTES`].
#[derive(Debug)]
pub(super) struct Buffers<T = u8>(RefCell<Vec<Vec<T>>>);

impl<T> Default for Buffers<T> {
    fn default() -> Self {
        Buffers(RefCell::new(Vec::new()))
    }
}

impl<T> Buffers<T> {
    /// An empty buffer, with the capacity of an earlier one if one was kept.
    pub fn take(&self) -> Vec<T> {
        self.0.borrow_mut().pop().unwrap_or_default()
    }

    /// Gives `buf` back for a later [`Buffers::take`].
    pub fn give(&self, mut buf: Vec<T>) {
        let mut kept = self.0.borrow_mut();
        let bytes = buf.capacity().saturating_mul(std::mem::size_of::<T>());
        if kept.len() < KEPT && bytes <= KEPT_BYTES {
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
        let buffers = Buffers::<u8>::default();
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
        let buffers = Buffers::<u8>::default();
        buffers.give(Vec::with_capacity(KEPT_BYTES + 1));
        assert_eq!(buffers.take().capacity(), 0);
    }

    #[test]
    fn at_most_64_buffers_are_kept() {
        let buffers = Buffers::<u8>::default();
        for _ in 0..KEPT + 2 {
            buffers.give(Vec::with_capacity(16));
        }
        let kept = (0..KEPT + 2)
            .filter(|_| buffers.take().capacity() > 0)
            .count();
        assert_eq!(kept, KEPT);
    }
}
