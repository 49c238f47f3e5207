//! The function a `config_space` input describes, and where its capabilities must land.
//!
//! Encoding (every byte string decodes; see [`Input`]): vendor id, device id (u16 each),
//! class code (3 bytes); then, slot by slot from BAR0, a kind byte (`% 4`: none, 32-bit,
//! 64-bit, 64-bit prefetchable; a 64-bit kind in the last slot becomes 32-bit), a size byte
//! (log2 from 4 up to 30, or 43 for prefetchable BARs — what the fabric accepts) and a u32
//! picking a size-aligned base in the BAR's window; then a count byte (`% 32`) of standard
//! capabilities, each a kind byte (`% 5`: PCI Express, MSI-X, MSI, Power Management,
//! vendor-specific) and its parameters; then one byte for the extended list: below 0xf0,
//! `% 6` capabilities each with a kind byte (even: Device Serial Number, odd: vendor-specific)
//! and parameters; from 0xf0, a long list of 60 to 360 serial numbers that may not fit.
//!
//! [`expected_placement`] lays the list out from the specification's rules alone (standard
//! capabilities dword-aligned from 0x40 to 0x100, extended ones from 0x100 to 0x1000) so the
//! target can hold the device crate's `CapabilityList` to it.

use super::vendor::{Rules, Vendor, VendorExtended, VENDOR_SPECIFIC, VENDOR_SPECIFIC_EXTENDED};
use crate::input::Input;
use smartio_devices::config::{
    CapabilityError, CapabilityList, DeviceSerialNumber, Msi, Msix, MsixLayout, PciExpress,
    PowerManagement,
};
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{BarKind, BarSpec, EndpointLayout};
use smartio_platform::pci::{self, cap, ext_cap};
use smartio_platform::BusAddr;

/// Largest non-prefetchable BAR the fabric accepts: log2 of 1 GiB.
const MAX_LOG2_NON_PREFETCHABLE: u8 = 30;
/// Largest prefetchable BAR tried: log2 of 8 TiB (an NTB window's limit).
const MAX_LOG2_PREFETCHABLE: u8 = 43;
/// Smallest BAR: 16 bytes (the four type bits).
const MIN_LOG2: u8 = 4;
/// Where 32-bit and non-prefetchable BARs are placed: below 4 GiB.
const WINDOW_32: u64 = 1 << 32;
/// Where prefetchable BARs are placed: a 48-bit address space.
const WINDOW_64: u64 = 1 << 48;

/// Standard capabilities an input may ask for (more than fit: PCI Express alone fills
/// 0x40 of the 0xc0 bytes).
const MAX_STANDARD: u8 = 32;
/// Extended capabilities of a short list.
const FEW_EXTENDED: u8 = 6;
/// The first byte value that asks for a long extended list.
const LONG_EXTENDED: u8 = 0xf0;

/// A standard capability the input chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standard {
    /// [`PciExpress`].
    PciExpress,
    /// [`Msix`].
    Msix(MsixLayout),
    /// [`Msi`].
    Msi(Msi),
    /// [`PowerManagement`].
    PowerManagement,
    /// A [`Vendor`] capability.
    Vendor(Vendor),
}

impl Standard {
    /// The capability id.
    pub fn id(&self) -> u8 {
        match self {
            Standard::PciExpress => cap::PCIE,
            Standard::Msix(_) => cap::MSIX,
            Standard::Msi(_) => cap::MSI,
            Standard::PowerManagement => cap::POWER_MANAGEMENT,
            Standard::Vendor(_) => VENDOR_SPECIFIC,
        }
    }

    /// Its length in bytes, from the specifications (not from the device crate).
    pub fn length(&self) -> usize {
        match self {
            // Version 2 of an endpoint: through Slot Control 2 and Slot Status 2.
            Standard::PciExpress => 0x3c,
            Standard::Msix(_) => 12,
            // Header, control, address (4 or 8), data (2); with masks, data padded to 4
            // then mask and pending dwords.
            Standard::Msi(m) => match (m.address_64, m.per_vector_mask) {
                (false, false) => 0x0a,
                (true, false) => 0x0e,
                (false, true) => 0x14,
                (true, true) => 0x18,
            },
            Standard::PowerManagement => 8,
            Standard::Vendor(v) => v.0.value.len(),
        }
    }

    /// A short name for outcomes.
    pub fn name(&self) -> &'static str {
        match self {
            Standard::PciExpress => "pcie",
            Standard::Msix(_) => "msix",
            Standard::Msi(m) => match (m.address_64, m.per_vector_mask) {
                (false, false) => "msi",
                (true, false) => "msi64",
                (false, true) => "msi-masks",
                (true, true) => "msi64-masks",
            },
            Standard::PowerManagement => "pm",
            Standard::Vendor(_) => "vendor",
        }
    }
}

/// An extended capability the input chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extended {
    /// [`DeviceSerialNumber`].
    SerialNumber(u64),
    /// A [`VendorExtended`] capability.
    Vendor(VendorExtended),
}

impl Extended {
    /// The extended capability id.
    pub fn id(&self) -> u16 {
        match self {
            Extended::SerialNumber(_) => ext_cap::DEVICE_SERIAL_NUMBER,
            Extended::Vendor(_) => VENDOR_SPECIFIC_EXTENDED,
        }
    }

    /// Its length in bytes.
    pub fn length(&self) -> usize {
        match self {
            Extended::SerialNumber(_) => 12,
            Extended::Vendor(v) => v.0.value.len(),
        }
    }
}

/// The function: its identity and BARs as the fabric would enumerate them, and its
/// capabilities in list order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Ids, class and BAR specifications (valid by the fabric's rules).
    pub layout: EndpointLayout,
    /// The BARs with size-aligned bases in their windows.
    pub bars: Vec<AssignedBar>,
    /// Standard capabilities.
    pub standard: Vec<Standard>,
    /// Extended capabilities.
    pub extended: Vec<Extended>,
}

impl Device {
    /// The list the device crate lays out.
    pub fn capability_list(&self) -> CapabilityList {
        let mut list = CapabilityList::new();
        for c in &self.standard {
            list = match c {
                Standard::PciExpress => list.with(PciExpress),
                Standard::Msix(m) => list.with(Msix(*m)),
                Standard::Msi(m) => list.with(*m),
                Standard::PowerManagement => list.with(PowerManagement),
                Standard::Vendor(v) => list.with(v.clone()),
            };
        }
        for c in &self.extended {
            list = match c {
                Extended::SerialNumber(s) => list.with_extended(DeviceSerialNumber(*s)),
                Extended::Vendor(v) => list.with_extended(v.clone()),
            };
        }
        list
    }

    /// The first MSI-X capability's layout.
    pub fn msix(&self) -> Option<MsixLayout> {
        self.standard.iter().find_map(|c| match c {
            Standard::Msix(m) => Some(*m),
            _ => None,
        })
    }
}

/// Where each capability must be: (capability index, offset), standard then extended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Offsets of the standard capabilities, in list order.
    pub standard: Vec<u16>,
    /// Offsets of the extended capabilities, in list order.
    pub extended: Vec<u16>,
}

/// Decodes the function from the front of `input`.
pub fn decode(i: &mut Input) -> Device {
    let vendor_id = i.u16();
    let device_id = i.u16();
    let [a, b, c] = i.bytes::<3>();
    let class_code = u32::from_le_bytes([a, b, c, 0]);
    let bars = decode_bars(i);
    let standard = (0..i.u8() % MAX_STANDARD)
        .map(|_| decode_standard(i))
        .collect();
    let extended = decode_extended(i);
    Device {
        layout: EndpointLayout {
            vendor_id,
            device_id,
            class_code,
            description: "fuzzed function".into(),
            bars: bars
                .iter()
                .map(|b| BarSpec {
                    index: b.index,
                    size: b.size,
                    kind: b.kind,
                })
                .collect(),
            sriov: None,
        },
        bars,
        standard,
        extended,
    }
}

fn decode_bars(i: &mut Input) -> Vec<AssignedBar> {
    let mut bars = Vec::new();
    let mut slot = 0u8;
    while slot < pci::BAR_COUNT {
        let kind = match i.u8() % 4 {
            0 => {
                slot += 1;
                continue;
            }
            1 => BarKind::Mem32,
            _ if slot + 1 == pci::BAR_COUNT => BarKind::Mem32,
            2 => BarKind::Mem64,
            _ => BarKind::Mem64Prefetch,
        };
        let (max, window) = if kind.is_prefetchable() {
            (MAX_LOG2_PREFETCHABLE, WINDOW_64)
        } else {
            (MAX_LOG2_NON_PREFETCHABLE, WINDOW_32)
        };
        let log2 = MIN_LOG2 + i.u8() % (max - MIN_LOG2 + 1);
        let base = (u64::from(i.u32()) << log2) & (window - 1);
        bars.push(AssignedBar {
            index: slot,
            kind,
            base: BusAddr(base),
            size: 1 << log2,
        });
        slot += if matches!(kind, BarKind::Mem32) { 1 } else { 2 };
    }
    bars
}

fn decode_standard(i: &mut Input) -> Standard {
    let kind = i.u8();
    match kind % 5 {
        0 => Standard::PciExpress,
        1 => Standard::Msix(MsixLayout {
            vectors: 1 + i.u16() % 2048,
            table_bar: i.u8() % pci::BAR_COUNT,
            table_offset: i.u32() & !7,
            pba_bar: i.u8() % pci::BAR_COUNT,
            pba_offset: i.u32() & !7,
        }),
        2 => Standard::Msi(Msi {
            vectors: i.u8(),
            address_64: kind & 0x10 != 0,
            per_vector_mask: kind & 0x20 != 0,
        }),
        3 => Standard::PowerManagement,
        _ => Standard::Vendor(Vendor::new(3 + usize::from(i.u8() % 62), i.u32())),
    }
}

fn decode_extended(i: &mut Input) -> Vec<Extended> {
    let choice = i.u8();
    if choice >= LONG_EXTENDED {
        let count = 60 + 20 * usize::from(choice - LONG_EXTENDED);
        let first = i.u64();
        return (0..count as u64)
            .map(|n| Extended::SerialNumber(first.wrapping_add(n)))
            .collect();
    }
    (0..choice % FEW_EXTENDED)
        .map(|_| {
            if i.u8() & 1 == 0 {
                Extended::SerialNumber(i.u64())
            } else {
                let len = 4 + usize::from(i.u8() % 61);
                Extended::Vendor(VendorExtended(Rules::new(len, i.u32())))
            }
        })
        .collect()
}

/// Where the capabilities of `device` must land, or the error laying them out must give:
/// each capability dword-aligned after the previous one, standard ones in 0x40..0x100 and
/// extended ones in 0x100..0x1000; the first that does not fit (standard list first) is
/// refused with its id, length, offset and the end of its space.
pub fn expected_placement(device: &Device) -> Result<Placement, CapabilityError> {
    let standard = place(
        device
            .standard
            .iter()
            .map(|c| (u16::from(c.id()), c.length())),
        0x40,
        pci::EXTENDED_CAPABILITIES,
    )?;
    let extended = place(
        device.extended.iter().map(|c| (c.id(), c.length())),
        pci::EXTENDED_CAPABILITIES,
        pci::CONFIG_SPACE_SIZE,
    )?;
    Ok(Placement { standard, extended })
}

fn place(
    caps: impl Iterator<Item = (u16, usize)>,
    first: u16,
    end: u16,
) -> Result<Vec<u16>, CapabilityError> {
    let mut at = usize::from(first);
    let mut out = Vec::new();
    for (id, len) in caps {
        if at + len > usize::from(end) {
            return Err(CapabilityError::NoRoom {
                id,
                len,
                at: at as u16,
                end,
            });
        }
        out.push(at as u16);
        at = (at + len).next_multiple_of(4);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decoded_layout_is_one_the_fabric_accepts() {
        for seed in 0..2000u32 {
            let bytes: Vec<u8> = (0..64u32)
                .map(|k| (seed.wrapping_mul(2_654_435_761) >> (k % 25)) as u8 ^ k as u8)
                .collect();
            let d = decode(&mut Input::new(&bytes));
            assert_eq!(d.layout.validate(), Ok(()), "{:?}", d.layout);
            for b in &d.bars {
                assert_eq!(b.base.get() % b.size, 0, "base aligned to size: {b:?}");
            }
        }
    }

    #[test]
    fn the_empty_input_is_a_function_without_bars_or_capabilities() {
        let d = decode(&mut Input::new(&[]));
        assert!(d.bars.is_empty() && d.standard.is_empty() && d.extended.is_empty());
        assert_eq!(expected_placement(&d), Ok(Placement::default()));
    }

    #[test]
    fn a_64_bit_bar_takes_two_slots_and_cannot_start_in_the_last() {
        // ids and class, then BAR0 64-bit 16 KiB, BAR2 and BAR3 none, BAR4 32-bit,
        // BAR5 prefetchable (so 32-bit).
        let mut bytes = vec![0u8; 7];
        bytes.extend([2, 10, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 3, 0, 1, 0, 0, 0]);
        let d = decode(&mut Input::new(&bytes));
        let kinds: Vec<_> = d.bars.iter().map(|b| (b.index, b.kind, b.size)).collect();
        assert_eq!(
            kinds,
            [
                (0, BarKind::Mem64, 16 << 10),
                (4, BarKind::Mem32, 16),
                (5, BarKind::Mem32, 16)
            ]
        );
        assert_eq!(d.bars[0].base.get(), 16 << 10);
    }

    #[test]
    fn the_placement_of_too_many_capabilities_is_the_first_that_does_not_fit() {
        let d = Device {
            layout: decode(&mut Input::new(&[])).layout,
            bars: Vec::new(),
            standard: vec![Standard::PciExpress; 4],
            extended: Vec::new(),
        };
        assert_eq!(
            expected_placement(&d),
            Err(CapabilityError::NoRoom {
                id: cap::PCIE.into(),
                len: 0x3c,
                at: 0xf4,
                end: 0x100
            })
        );
    }
}
