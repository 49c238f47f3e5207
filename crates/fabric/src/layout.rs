//! What the fabric needs to know about an endpoint to enumerate it: ids, class and BARs.
//!
//! The device layer supplies a layout per device kind; the fabric never looks further.

use serde::Serialize;
use smartio_platform::BusAddr;
use std::ops::Range;
use thiserror::Error;

/// Why a device layout cannot be enumerated (a bug in the layout the device layer supplies,
/// reported at the scenario line of the device).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// A BAR size that is not a power of two of at least 16 bytes.
    #[error("BAR{index} size {size} is not a power of two >= 16")]
    BarSize {
        /// The BAR.
        index: u8,
        /// Its size.
        size: u64,
    },
    /// A BAR beyond the six slots (a 64-bit BAR takes two).
    #[error("BAR{index} does not fit in the six BAR slots")]
    BeyondSlots {
        /// The BAR.
        index: u8,
    },
    /// Two BARs in one slot.
    #[error("BAR{index} overlaps another BAR's slot")]
    Overlap {
        /// The BAR.
        index: u8,
    },
    /// A non-prefetchable BAR above 1 GiB (it must fit the 32-bit window).
    #[error("BAR{index} is non-prefetchable and larger than 1 GiB")]
    LargeNonPrefetchable {
        /// The BAR.
        index: u8,
    },
    /// An SR-IOV capability with no VFs, or a zero First VF Offset or VF Stride (a VF would
    /// share the PF's or another VF's routing id).
    #[error(
        "SR-IOV capability with TotalVFs {total_vfs}, First VF Offset {first_vf_offset}, VF \
         Stride {vf_stride} (each must be at least 1)"
    )]
    SrIovCounts {
        /// TotalVFs.
        total_vfs: u16,
        /// First VF Offset.
        first_vf_offset: u16,
        /// VF Stride.
        vf_stride: u16,
    },
    /// A VF BAR slice below the 4 KiB page, or whose region (slice × TotalVFs) is too large.
    #[error("VF BAR{index} slice of {size} bytes is below 4096 or its region passes 2^63")]
    VfBarSize {
        /// The VF BAR.
        index: u8,
        /// One VF's slice.
        size: u64,
    },
}

/// How a BAR decodes addresses, which decides the bridge window it is placed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BarKind {
    /// 32-bit memory BAR: placed below 4 GiB.
    Mem32,
    /// 64-bit non-prefetchable memory BAR: still placed in the 32-bit window, as bridges'
    /// non-prefetchable windows are 32-bit.
    Mem64,
    /// 64-bit prefetchable memory BAR: placed in the 64-bit prefetchable window.
    Mem64Prefetch,
}

impl BarKind {
    /// Whether the BAR goes into a bridge's prefetchable (64-bit) window.
    pub const fn is_prefetchable(self) -> bool {
        matches!(self, BarKind::Mem64Prefetch)
    }
}

/// One BAR an endpoint implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BarSpec {
    /// BAR index 0 to 5 (a 64-bit BAR takes two slots).
    pub index: u8,
    /// Size in bytes: a power of two of at least 16.
    pub size: u64,
    /// Decoding kind.
    pub kind: BarKind,
}

/// An endpoint function as enumeration sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointLayout {
    /// PCI vendor id.
    pub vendor_id: u16,
    /// PCI device id.
    pub device_id: u16,
    /// 24-bit class code (base class, subclass, programming interface).
    pub class_code: u32,
    /// A short human description, as `lspci` would print it.
    pub description: String,
    /// The BARs.
    pub bars: Vec<BarSpec>,
    /// The SR-IOV capability, for a physical function that has virtual functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sriov: Option<SriovSpec>,
}

/// What enumeration needs of a physical function's SR-IOV capability (PCI Express Base
/// Specification §9.3.3): how many VFs it may have, where their routing ids fall, and the VF
/// BARs. Enumeration reserves the bus numbers of all TotalVFs routing ids and places each VF
/// BAR as one region of `size × total_vfs`, VF n's slice `(n − 1) · size` from its base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SriovSpec {
    /// TotalVFs, at least 1.
    pub total_vfs: u16,
    /// First VF Offset: VF 1's routing id minus the PF's (at least 1).
    pub first_vf_offset: u16,
    /// VF Stride: the routing-id distance between consecutive VFs (at least 1).
    pub vf_stride: u16,
    /// The device id every VF reports.
    pub vf_device_id: u16,
    /// The VF BARs: the size of *one* VF's slice (a power of two of at least 4 KiB, the
    /// System Page Size), index and kind as for a function's own BARs.
    pub vf_bars: Vec<BarSpec>,
}

/// The smallest VF BAR slice: one 4 KiB page (VF BARs are aligned to the System Page Size).
pub const MIN_VF_BAR_SIZE: u64 = 4096;

impl EndpointLayout {
    /// Checks BAR sizes and indices; the error says what is wrong.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let mut used = [false; 6];
        for bar in &self.bars {
            if !bar.size.is_power_of_two() || bar.size < 16 {
                return Err(LayoutError::BarSize {
                    index: bar.index,
                    size: bar.size,
                });
            }
            let slots = if matches!(bar.kind, BarKind::Mem32) {
                1
            } else {
                2
            };
            let first = bar.index as usize;
            if first + slots > 6 {
                return Err(LayoutError::BeyondSlots { index: bar.index });
            }
            for slot in &mut used[first..first + slots] {
                if *slot {
                    return Err(LayoutError::Overlap { index: bar.index });
                }
                *slot = true;
            }
            if matches!(bar.kind, BarKind::Mem32 | BarKind::Mem64) && bar.size > (1 << 30) {
                return Err(LayoutError::LargeNonPrefetchable { index: bar.index });
            }
        }
        if let Some(sriov) = &self.sriov {
            sriov.validate()?;
        }
        Ok(())
    }
}

impl SriovSpec {
    /// Checks the counts and the VF BARs (as a function's BARs, each at least
    /// [`MIN_VF_BAR_SIZE`], and each whole region — slice × TotalVFs — inside 2^63).
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.total_vfs == 0 || self.first_vf_offset == 0 || self.vf_stride == 0 {
            return Err(LayoutError::SrIovCounts {
                total_vfs: self.total_vfs,
                first_vf_offset: self.first_vf_offset,
                vf_stride: self.vf_stride,
            });
        }
        let as_function = EndpointLayout {
            vendor_id: 0,
            device_id: 0,
            class_code: 0,
            description: String::new(),
            bars: self.vf_bars.clone(),
            sriov: None,
        };
        as_function.validate()?;
        for bar in &self.vf_bars {
            let region = bar.size.checked_mul(u64::from(self.total_vfs));
            if bar.size < MIN_VF_BAR_SIZE || region.is_none_or(|r| r > 1 << 63) {
                return Err(LayoutError::VfBarSize {
                    index: bar.index,
                    size: bar.size,
                });
            }
        }
        Ok(())
    }
}

/// A BAR after enumeration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AssignedBar {
    /// BAR index.
    pub index: u8,
    /// Decoding kind.
    pub kind: BarKind,
    /// Base address in the host's PCIe domain.
    pub base: BusAddr,
    /// Size in bytes.
    pub size: u64,
}

impl AssignedBar {
    /// The address range the BAR decodes.
    pub fn range(&self) -> Range<u64> {
        self.base.get()..self.base.get() + self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(bars: Vec<BarSpec>) -> EndpointLayout {
        EndpointLayout {
            vendor_id: 0x1234,
            device_id: 0x5678,
            class_code: 0,
            description: "test".into(),
            bars,
            sriov: None,
        }
    }

    #[test]
    fn a_64_bit_bar_in_the_last_slot_does_not_fit() {
        let bar = |index, kind| BarSpec {
            index,
            size: 4096,
            kind,
        };
        assert_eq!(layout(vec![bar(4, BarKind::Mem64)]).validate(), Ok(()));
        let e = layout(vec![bar(5, BarKind::Mem64)])
            .validate()
            .expect_err("two slots from 5");
        assert_eq!(e, LayoutError::BeyondSlots { index: 5 });
        assert_eq!(e.to_string(), "BAR5 does not fit in the six BAR slots");
        assert_eq!(
            layout(vec![bar(0, BarKind::Mem64), bar(1, BarKind::Mem32)]).validate(),
            Err(LayoutError::Overlap { index: 1 })
        );
    }

    #[test]
    fn an_sriov_capability_without_vfs_or_with_a_sub_page_vf_bar_is_refused() {
        let bar = |size| BarSpec {
            index: 0,
            size,
            kind: BarKind::Mem64,
        };
        let sriov = |total_vfs, size| SriovSpec {
            total_vfs,
            first_vf_offset: 1,
            vf_stride: 1,
            vf_device_id: 2,
            vf_bars: vec![bar(size)],
        };
        let mut l = layout(vec![bar(4096)]);
        l.sriov = Some(sriov(8, 4096));
        assert_eq!(l.validate(), Ok(()));
        l.sriov = Some(sriov(0, 4096));
        assert_eq!(
            l.validate(),
            Err(LayoutError::SrIovCounts {
                total_vfs: 0,
                first_vf_offset: 1,
                vf_stride: 1
            })
        );
        l.sriov = Some(sriov(8, 2048));
        let e = l.validate().expect_err("half a page");
        assert_eq!(
            e.to_string(),
            "VF BAR0 slice of 2048 bytes is below 4096 or its region passes 2^63"
        );
    }
}
