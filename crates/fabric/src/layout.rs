//! What the fabric needs to know about an endpoint to enumerate it: ids, class and BARs.
//!
//! The device layer supplies a layout per device kind; the fabric never looks further.

use serde::Serialize;
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
}

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
        Ok(())
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
}
