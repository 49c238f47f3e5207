//! Which function an endpoint is — physical, or virtual function n of a PF — and a PF's
//! virtual functions as state: their routing ids, names and BAR slices (PCI Express Base
//! Specification §9). Making the VFs, checking them and following SR-IOV Control is in
//! [`crate::sriov`]; this module names no `Fabric`.

use crate::ids::{Bdf, EndpointId};
use crate::layout::{AssignedBar, SriovSpec};
use smartio_platform::{BusAddr, SrIovControl};

/// Which function an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Function {
    /// A physical function (every scenario endpoint).
    Physical,
    /// Virtual function `n` (1-based) of the physical function `pf`.
    Virtual {
        /// The PF.
        pf: EndpointId,
        /// The VF number, 1 to TotalVFs.
        n: u16,
    },
}

/// A PF's virtual functions: the capability, the VF BAR regions, the VF endpoints, and what
/// SR-IOV Control and NumVFs say now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualFunctions {
    /// The capability as the device layout declared it.
    pub spec: SriovSpec,
    /// Each VF BAR's whole region (slice × TotalVFs), by VF BAR index; placed by enumeration.
    pub regions: Vec<AssignedBar>,
    /// The VF endpoints, VF 1 first (all TotalVFs of them, present or not).
    pub vfs: Vec<EndpointId>,
    /// SR-IOV Control and NumVFs as the PF's configuration space holds them.
    pub control: SrIovControl,
}

impl VirtualFunctions {
    pub(crate) fn new(spec: SriovSpec) -> Self {
        Self {
            spec,
            regions: Vec::new(),
            vfs: Vec::new(),
            control: SrIovControl::default(),
        }
    }

    /// The slice size of VF BAR `index`.
    fn slice(&self, index: u8) -> Option<u64> {
        self.spec
            .vf_bars
            .iter()
            .find(|b| b.index == index)
            .map(|b| b.size)
    }

    /// VF `n`'s slice of each VF BAR region.
    pub fn slices_of(&self, n: u16) -> Vec<AssignedBar> {
        self.regions
            .iter()
            .filter_map(|r| {
                let size = self.slice(r.index)?;
                let base = r
                    .base
                    .get()
                    .checked_add(u64::from(n.checked_sub(1)?) * size)?;
                Some(AssignedBar {
                    index: r.index,
                    kind: r.kind,
                    base: BusAddr(base),
                    size,
                })
            })
            .collect()
    }

    /// The VF whose slice holds `addr`, with the VF BAR: `Some((n, bar))` when a region
    /// contains the address.
    pub(crate) fn slice_at(&self, addr: u64) -> Option<(u16, AssignedBar)> {
        let region = self.regions.iter().find(|r| r.range().contains(&addr))?;
        let size = self.slice(region.index)?;
        let k = (addr - region.base.get()) / size;
        let n = u16::try_from(k + 1).ok()?;
        // Computed in place: this runs for every access that reaches a VF.
        let bar = AssignedBar {
            index: region.index,
            kind: region.kind,
            base: BusAddr(region.base.get() + k * size),
            size,
        };
        Some((n, bar))
    }
}

/// The name of VF `n` of the function called `parent` (`nic0.vf1`), in its host's tree and
/// as SmartIO lends it (`lender:nic0.vf1`).
pub fn vf_name(parent: &str, n: u16) -> String {
    format!("{parent}.vf{n}")
}

/// The routing id of VF `n` of a PF at `pf`, if it is at most 0xFFFF.
pub fn vf_bdf(pf: Bdf, spec: &SriovSpec, n: u16) -> Option<Bdf> {
    let id = u32::from(pf.requester_id())
        + u32::from(spec.first_vf_offset)
        + u32::from(n.checked_sub(1)?) * u32::from(spec.vf_stride);
    u16::try_from(id).ok().map(Bdf::from_requester_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{BarKind, BarSpec};

    fn spec() -> SriovSpec {
        SriovSpec {
            total_vfs: 4,
            first_vf_offset: 1,
            vf_stride: 1,
            vf_device_id: 0x10,
            vf_bars: vec![
                BarSpec {
                    index: 0,
                    size: 0x1_0000,
                    kind: BarKind::Mem64,
                },
                BarSpec {
                    index: 2,
                    size: 0x10_0000,
                    kind: BarKind::Mem64Prefetch,
                },
            ],
        }
    }

    #[test]
    fn vf_routing_ids_follow_offset_and_stride_and_stop_at_bus_255() {
        let s = spec();
        assert_eq!(vf_bdf(Bdf::new(3, 0, 0), &s, 1), Some(Bdf::new(3, 0, 1)));
        assert_eq!(vf_bdf(Bdf::new(3, 0, 0), &s, 8), Some(Bdf::new(3, 1, 0)));
        assert_eq!(vf_bdf(Bdf::new(3, 0, 0), &s, 0), None);
        assert_eq!(vf_bdf(Bdf::new(255, 31, 7), &s, 1), None);
    }

    #[test]
    fn an_address_in_a_vf_bar_region_names_the_vf_and_its_slice() {
        let mut v = VirtualFunctions::new(spec());
        v.regions = vec![AssignedBar {
            index: 2,
            kind: BarKind::Mem64Prefetch,
            base: BusAddr(0x100_0000_0000),
            size: 0x40_0000,
        }];
        let (n, bar) = v.slice_at(0x100_0023_0004).expect("inside VF 3's slice");
        assert_eq!(n, 3);
        assert_eq!(bar.base, BusAddr(0x100_0020_0000));
        assert_eq!(bar.size, 0x10_0000);
        assert_eq!(v.slice_at(0x100_0040_0000), None, "past the region");
        assert_eq!(v.slices_of(4)[0].range().end, 0x100_0040_0000);
    }
}
