//! A host IOMMU's translation cache (IOTLB): which (requester, page) translations it holds.
//!
//! A TLP that the IOMMU translates looks its page up; a miss costs a page walk
//! (`[root_complex] iotlb_miss_ns`) before the TLP goes on, and the translation is cached,
//! evicting the least recently used one when all `[root_complex] iotlb_entries` are taken.
//! Unmaps invalidate in batches, as the kernels the papers ran do by default (intel-iommu's
//! deferred flushing; `intel_iommu=strict` makes every unmap flush): every
//! `[root_complex] iotlb_flush_batch` unmaps the whole cache of that IOMMU is flushed (a
//! batch of 1 is strict mode). The fabric's translation stays authoritative: an unmapped
//! page faults whatever the cache holds; the cache only decides what a translation costs.

use smartio_fabric::EndpointId;

/// One IOMMU's cache.
#[derive(Debug, Clone)]
pub struct Iotlb {
    capacity: usize,
    /// (requester, page) with the time of their last use, in no particular order.
    entries: Vec<((EndpointId, u64), u64)>,
    /// Uses so far (the clock of the LRU order).
    uses: u64,
    /// Unmaps per flush (at least 1).
    batch: u64,
    /// Flushes the cache has carried out: (the IOMMU's unmaps divided by the batch, its
    /// forced flushes).
    seen_flushes: (u64, u64),
    /// Look-ups that missed.
    misses: u64,
    /// Look-ups that hit.
    hits: u64,
}

impl Iotlb {
    /// An empty cache of `capacity` entries (0: every look-up misses), flushed once per
    /// `batch` invalidations of its IOMMU (0 is taken as 1: strict).
    pub fn new(capacity: usize, batch: u64) -> Self {
        Iotlb {
            capacity,
            entries: Vec::with_capacity(capacity),
            uses: 0,
            batch: batch.max(1),
            seen_flushes: (0, 0),
            misses: 0,
            hits: 0,
        }
    }

    /// Looks up `page` (an IOVA page number) of `requester`, given the IOMMU's current
    /// unmap and forced-flush counts; returns whether it hit. A miss caches the translation.
    pub fn look_up(
        &mut self,
        requester: EndpointId,
        page: u64,
        invalidations: u64,
        forced: u64,
    ) -> bool {
        let flushes = (invalidations / self.batch, forced);
        if flushes != self.seen_flushes {
            self.entries.clear();
            self.seen_flushes = flushes;
        }
        self.uses += 1;
        let key = (requester, page);
        if let Some(e) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            e.1 = self.uses;
            self.hits += 1;
            return true;
        }
        self.misses += 1;
        if self.capacity == 0 {
            return false;
        }
        if self.entries.len() == self.capacity {
            if let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(i, _)| i)
            {
                self.entries.swap_remove(oldest);
            }
        }
        self.entries.push((key, self.uses));
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_misses_once_then_hits_until_evicted_or_invalidated() {
        let mut t = Iotlb::new(2, 1);
        let e = EndpointId(3);
        assert!(!t.look_up(e, 10, 0, 0));
        assert!(t.look_up(e, 10, 0, 0));
        assert!(!t.look_up(EndpointId(4), 10, 0, 0), "per requester");
        assert!(t.look_up(e, 10, 0, 0));
        assert!(
            !t.look_up(e, 11, 0, 0),
            "evicts the least recently used: device 4's"
        );
        assert!(t.look_up(e, 10, 0, 0));
        assert!(!t.look_up(EndpointId(4), 10, 0, 0), "it was evicted");
        assert!(!t.look_up(e, 10, 1, 0), "an unmap flushed everything");
        assert_eq!((t.hits, t.misses), (3, 5));
    }

    #[test]
    fn deferred_flushing_keeps_translations_until_a_batch_of_unmaps_is_complete() {
        let mut t = Iotlb::new(4, 3);
        let e = EndpointId(0);
        assert!(!t.look_up(e, 1, 0, 0));
        assert!(t.look_up(e, 1, 1, 0), "one unmap: still cached");
        assert!(t.look_up(e, 1, 2, 0));
        assert!(
            !t.look_up(e, 1, 3, 0),
            "the third unmap completed a batch: flushed"
        );
        assert!(t.look_up(e, 1, 5, 0));
        assert!(!t.look_up(e, 1, 5, 1), "a re-attachment flushes at once");
    }
}
