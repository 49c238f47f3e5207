//! The training set on the NVMe: image `i` is one record of whole blocks at block
//! `i × blocks_per_record` of the namespace, written before the run (untimed, as a dataset
//! already on disk); each epoch visits the images in an order shuffled from the seed, as
//! Keras shuffles every epoch.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Bytes of one preprocessed image: 224 × 224 pixels × 3 colour channels of one byte, the
/// input VGG19 takes.
pub const IMAGE_BYTES: u64 = 224 * 224 * 3;

/// How the images lie on the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per logical block.
    pub lba_size: u64,
    /// Blocks per record (an image rounded up to whole blocks).
    pub blocks: u64,
}

impl Layout {
    /// The layout for blocks of `lba_size` bytes.
    pub fn new(lba_size: u64) -> Layout {
        Layout {
            lba_size,
            blocks: IMAGE_BYTES.div_ceil(lba_size.max(1)),
        }
    }

    /// Bytes per record.
    pub fn record(&self) -> u64 {
        self.blocks * self.lba_size
    }

    /// First block of image `id`.
    pub fn lba(&self, id: u64) -> u64 {
        id * self.blocks
    }
}

/// The order of the images in `epoch`: a permutation of `0..images` from `seed`.
pub fn epoch_order(images: u64, seed: u64, epoch: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..images).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    order.shuffle(&mut rng);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_the_image_in_whole_blocks() {
        let l = Layout::new(4096);
        assert_eq!(l.blocks, 37);
        assert_eq!(l.record(), 151_552);
        assert_eq!(Layout::new(512).record(), IMAGE_BYTES, "512 divides it");
        assert_eq!(l.lba(2), 74);
    }

    #[test]
    fn every_epoch_visits_every_image_once_in_its_own_order() {
        let a = epoch_order(100, 1, 0);
        let b = epoch_order(100, 1, 1);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_ne!(a, b);
        assert_eq!(a, epoch_order(100, 1, 0), "deterministic");
    }
}
