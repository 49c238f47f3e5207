//! What the fabric needs to know about an endpoint to enumerate it: ids, class and BARs.
//!
//! The device layer supplies a layout per device kind; the fabric never looks further.

use serde::Serialize;

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
    pub fn validate(&self) -> Result<(), String> {
        let mut used = [false; 6];
        for bar in &self.bars {
            if !bar.size.is_power_of_two() || bar.size < 16 {
                return Err(format!(
                    "BAR{} size {} is not a power of two >= 16",
                    bar.index, bar.size
                ));
            }
            let slots = if matches!(bar.kind, BarKind::Mem32) {
                1
            } else {
                2
            };
            let first = bar.index as usize;
            if first + slots > 6 {
                return Err(format!(
                    "BAR{} does not fit in the six BAR slots",
                    bar.index
                ));
            }
            for slot in &mut used[first..first + slots] {
                if *slot {
                    return Err(format!("BAR{} overlaps another BAR's slot", bar.index));
                }
                *slot = true;
            }
            if matches!(bar.kind, BarKind::Mem32 | BarKind::Mem64) && bar.size > (1 << 30) {
                return Err(format!(
                    "BAR{} is non-prefetchable and larger than 1 GiB",
                    bar.index
                ));
            }
        }
        Ok(())
    }
}
