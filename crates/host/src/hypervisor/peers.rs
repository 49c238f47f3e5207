//! The other passed-through functions' guest BARs a pass-through backend has mapped for its
//! device at their guest-physical addresses (peer-to-peer inside one VM), and how they follow
//! the guest: at each Bus Master set the backend brings them to where the guest has its BARs
//! now. VFIO maps them in the VM's IOMMU domain, MDEV in the device's lender domain; which
//! mappings go and come is decided here, once.

use super::GuestBar;
use smartio_fabric::EndpointId;
use std::collections::BTreeMap;

/// One guest BAR mapped at its guest-physical address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerMapping {
    /// The function the BAR belongs to.
    pub endpoint: EndpointId,
    /// The BAR index.
    pub index: u8,
    /// Bytes mapped.
    pub len: u64,
}

/// A change [`PeerMappings::sync`] asks the backend to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerChange<'a> {
    /// Remove the mapping at guest-physical `at`.
    Unmap {
        /// Where it is mapped.
        at: u64,
        /// What it maps.
        mapping: PeerMapping,
    },
    /// Map `len` bytes of `bar` at its guest-physical address. The backend answers whether
    /// it did (a BAR it cannot resolve is left unmapped).
    Map {
        /// The BAR where the guest has it.
        bar: &'a GuestBar,
        /// Bytes to map.
        len: u64,
    },
}

/// The guest BARs mapped for one device, by guest-physical address.
///
/// Invariant: mapped ranges are disjoint (a mapping in the way of a new one goes first).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PeerMappings {
    mapped: BTreeMap<u64, PeerMapping>,
}

impl PeerMappings {
    /// Nothing mapped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Brings the mappings to `peers` (the BARs where the guest has them now), through
    /// `apply`: mappings of BARs the guest has moved since are unmapped (their old range no
    /// longer reaches them, and a BAR placed there now must be reached instead); then every
    /// BAR not mapped where it is gets mapped, `len(bar)` bytes, after whatever is in its
    /// way. Where the guest made BARs overlap, the later in `peers` wins. Stops at the
    /// first change `apply` refuses.
    pub fn sync<E>(
        &mut self,
        peers: &[GuestBar],
        len: impl Fn(&GuestBar) -> u64,
        mut apply: impl FnMut(PeerChange<'_>) -> Result<bool, E>,
    ) -> Result<(), E> {
        let wanted = |p: &GuestBar| PeerMapping {
            endpoint: p.endpoint,
            index: p.index,
            len: len(p),
        };
        let moved: Vec<u64> = self
            .mapped
            .iter()
            .filter(|&(&at, m)| !peers.iter().any(|p| p.guest == at && wanted(p) == *m))
            .map(|(&at, _)| at)
            .collect();
        for at in moved {
            self.unmap(at, &mut apply)?;
        }
        for p in peers {
            let want = wanted(p);
            if self.mapped.get(&p.guest) == Some(&want) {
                continue;
            }
            let end = p.guest.saturating_add(want.len);
            let in_the_way: Vec<u64> = self
                .mapped
                .range(..end)
                .filter(|(&at, m)| at.saturating_add(m.len) > p.guest)
                .map(|(&at, _)| at)
                .collect();
            for at in in_the_way {
                self.unmap(at, &mut apply)?;
            }
            if apply(PeerChange::Map {
                bar: p,
                len: want.len,
            })? {
                self.mapped.insert(p.guest, want);
            }
        }
        Ok(())
    }

    fn unmap<E>(
        &mut self,
        at: u64,
        apply: &mut impl FnMut(PeerChange<'_>) -> Result<bool, E>,
    ) -> Result<(), E> {
        if let Some(mapping) = self.mapped.remove(&at) {
            apply(PeerChange::Unmap { at, mapping })?;
        }
        Ok(())
    }

    /// Every mapping: (guest-physical address, what it maps).
    pub fn iter(&self) -> impl Iterator<Item = (u64, PeerMapping)> + '_ {
        self.mapped.iter().map(|(&at, &m)| (at, m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_fabric::HostId;

    fn bar(guest: u64, index: u8) -> GuestBar {
        GuestBar {
            guest,
            size: 0x4000,
            host: HostId(0),
            endpoint: EndpointId(3),
            index,
            reached_at: 0x8000_0000,
        }
    }

    /// Syncs to `peers` and returns the changes asked for, as (unmap?, address).
    fn sync(m: &mut PeerMappings, peers: &[GuestBar]) -> Vec<(bool, u64)> {
        let mut log = Vec::new();
        m.sync::<()>(
            peers,
            |p| p.size,
            |c| {
                log.push(match c {
                    PeerChange::Unmap { at, .. } => (true, at),
                    PeerChange::Map { bar, .. } => (false, bar.guest),
                });
                Ok(true)
            },
        )
        .expect("applied");
        log
    }

    #[test]
    fn a_bar_moved_onto_the_address_of_another_replaces_its_mapping() {
        let mut m = PeerMappings::new();
        assert_eq!(
            sync(&mut m, &[bar(0x1_0000_0000, 0)]),
            [(false, 0x1_0000_0000)]
        );
        assert_eq!(
            sync(&mut m, &[bar(0x1_0000_0000, 0)]),
            [],
            "nothing changed"
        );
        // BAR0 moved away, BAR2 placed where BAR0 was.
        assert_eq!(
            sync(&mut m, &[bar(0xc000_0000, 0), bar(0x1_0000_0000, 2)]),
            [
                (true, 0x1_0000_0000),
                (false, 0xc000_0000),
                (false, 0x1_0000_0000)
            ]
        );
        // Two BARs overlapping: the later wins.
        assert_eq!(
            sync(&mut m, &[bar(0xc000_0000, 0), bar(0xc000_2000, 2)]),
            [
                (true, 0x1_0000_0000),
                (true, 0xc000_0000),
                (false, 0xc000_2000)
            ]
        );
        assert_eq!(m.iter().count(), 1);
    }

    #[test]
    fn a_bar_placed_right_after_a_mapped_one_leaves_it_mapped() {
        let mut m = PeerMappings::new();
        assert_eq!(sync(&mut m, &[bar(0xc000_0000, 0)]), [(false, 0xc000_0000)]);
        // BAR2 starts where BAR0's 16 KiB end: not in its way.
        assert_eq!(
            sync(&mut m, &[bar(0xc000_0000, 0), bar(0xc000_4000, 2)]),
            [(false, 0xc000_4000)]
        );
        assert_eq!(m.iter().count(), 2);
    }
}
