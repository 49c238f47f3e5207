//! A host's physical address map: where RAM, the 32-bit MMIO hole, the MSI range and the
//! 64-bit MMIO region are, and the bounds a scenario's RAM and `mmio64` must keep.
//!
//! ```text
//! 0                     RAM (up to 2 GiB)
//! 0x8000_0000           32-bit MMIO: non-prefetchable BARs and bridge memory windows
//! 0xFEE0_0000           MSI range: writes here are interrupts
//! 0x1_0000_0000         RAM above 2 GiB continues here
//! 1 TiB-aligned         64-bit MMIO: prefetchable BARs and bridge prefetchable windows
//! ```
//!
//! Every address here is computed with checked arithmetic; RAM is at most [`MAX_RAM`], so the
//! map itself always fits.

use std::ops::Range;

/// The least RAM a host may have (1 GiB): the OS model keeps the lowest 512 MiB for firmware,
/// the kernel and its fixed buffers (`smartio_host::memory::RESERVED_LOW`), and a host with
/// less than that again could not give a driver its queues (64 MiB used to be accepted and
/// then failed at the first allocation with "0 bytes free").
pub const MIN_RAM: u64 = 1 << 30;
/// The most RAM a host may have (1 PiB): RAM, the hole below 4 GiB and the 16 TiB 64-bit MMIO
/// region above it then end below 2^51, inside x86-64's 52-bit physical address space.
pub const MAX_RAM: u64 = 1 << 50;

const LOW_RAM_LIMIT: u64 = 0x8000_0000;
const MMIO32: Range<u64> = 0x8000_0000..0xFEC0_0000;
const MSI: Range<u64> = smartio_platform::msi::INTERRUPT_CONTROLLER
    ..smartio_platform::msi::INTERRUPT_CONTROLLER + (1 << 20);
const HIGH_RAM_BASE: u64 = 1 << 32;
const MMIO64_ALIGN: u64 = 1 << 40;
/// The size of the 64-bit MMIO region (16 TiB).
pub const MMIO64_SIZE: u64 = 1 << 44;
/// The granule of a base of the 64-bit MMIO region a scenario states (1 GiB).
pub const MMIO64_GRANULE: u64 = 1 << 30;
/// The highest base of the 64-bit MMIO region a scenario may state: the region then ends at
/// 2^51, inside x86-64's 52-bit physical address space.
pub const MMIO64_MAX_BASE: u64 = (1 << 51) - MMIO64_SIZE;

/// The fixed parts of a host's physical address map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressMap {
    /// Ranges backed by RAM.
    pub ram: Vec<Range<u64>>,
    /// 32-bit MMIO region.
    pub mmio32: Range<u64>,
    /// 64-bit MMIO region.
    pub mmio64: Range<u64>,
    /// MSI range.
    pub msi: Range<u64>,
}

impl AddressMap {
    /// The map for a host with `ram` bytes of memory; `None` if the 64-bit MMIO region would
    /// end beyond 2^64 (never for RAM up to [`MAX_RAM`]).
    pub fn for_ram(ram: u64) -> Option<AddressMap> {
        Self::for_host(ram, None)
    }

    /// The map for a host with `ram` bytes of memory whose firmware starts the 64-bit MMIO
    /// region at `mmio64` (`None`: the first 1 TiB boundary above RAM); `None` if that base
    /// is not a multiple of [`MMIO64_GRANULE`], lies below the top of RAM ([`ram_top`]) or
    /// above [`MMIO64_MAX_BASE`], or the region would end beyond 2^64.
    pub fn for_host(ram: u64, mmio64: Option<u64>) -> Option<AddressMap> {
        let low: Range<u64> = 0..ram.min(LOW_RAM_LIMIT);
        let mut ranges = Vec::from([low]);
        if ram > LOW_RAM_LIMIT {
            ranges.push(HIGH_RAM_BASE..HIGH_RAM_BASE.checked_add(ram - LOW_RAM_LIMIT)?);
        }
        let top = ram_top(ram)?;
        let base = match mmio64 {
            None => align_up(top, MMIO64_ALIGN)?,
            Some(base)
                if base >= top
                    && base <= MMIO64_MAX_BASE
                    && base.is_multiple_of(MMIO64_GRANULE) =>
            {
                base
            }
            Some(_) => return None,
        };
        Some(AddressMap {
            ram: ranges,
            mmio32: MMIO32,
            mmio64: base..base.checked_add(MMIO64_SIZE)?,
            msi: MSI,
        })
    }
}

/// The lowest address above a host's RAM and its 32-bit MMIO hole, where a 64-bit MMIO
/// region may start: 4 GiB plus the RAM above the first 2 GiB; `None` past 2^64.
pub fn ram_top(ram: u64) -> Option<u64> {
    HIGH_RAM_BASE.checked_add(ram.saturating_sub(LOW_RAM_LIMIT))
}

/// `value` rounded up to a multiple of `align` (a power of two); `None` past 2^64.
pub(crate) fn align_up(value: u64, align: u64) -> Option<u64> {
    value.checked_next_multiple_of(align)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_hosts_keep_all_ram_low() {
        let map = AddressMap::for_ram(1 << 30).expect("fits");
        assert_eq!(map.ram, vec![0..1 << 30]);
        assert_eq!(map.mmio64.start, 1 << 40);
    }

    #[test]
    fn firmware_may_start_64_bit_mmio_right_above_ram() {
        let ram = 64 << 30;
        let map = AddressMap::for_host(ram, Some(128 << 30)).expect("fits");
        assert_eq!(map.mmio64, 128 << 30..(128 << 30) + MMIO64_SIZE);
        assert_eq!(map.ram, AddressMap::for_ram(ram).expect("fits").ram);
        assert_eq!(ram_top(ram), Some(66 << 30));
        assert!(AddressMap::for_host(ram, Some(66 << 30)).is_some());
        for refused in [
            64 << 30,
            (66 << 30) + 4096,
            MMIO64_MAX_BASE + MMIO64_GRANULE,
        ] {
            assert_eq!(
                AddressMap::for_host(ram, Some(refused)),
                None,
                "{refused:#x}"
            );
        }
    }

    #[test]
    fn large_hosts_continue_ram_above_4_gib() {
        let map = AddressMap::for_ram(64 << 30).expect("fits");
        assert_eq!(
            map.ram,
            vec![0..LOW_RAM_LIMIT, HIGH_RAM_BASE..HIGH_RAM_BASE + (62 << 30)]
        );
        assert!(map.ram.iter().all(|r| r.end <= map.mmio64.start));
        assert!(map
            .ram
            .iter()
            .all(|r| r.end <= MMIO32.start || r.start >= MMIO32.end));
    }

    #[test]
    fn the_largest_ram_fits_below_the_mmio_region_and_2_to_the_52() {
        let map = AddressMap::for_ram(MAX_RAM).expect("fits");
        assert_eq!(map.ram[1].end, HIGH_RAM_BASE + MAX_RAM - LOW_RAM_LIMIT);
        assert!(map.ram[1].end <= map.mmio64.start);
        assert!(map.mmio64.end <= 1 << 52);
    }

    #[test]
    fn a_ram_size_near_2_to_the_64_has_no_address_map_instead_of_a_wrapped_one() {
        assert_eq!(AddressMap::for_ram(u64::MAX), None);
        assert_eq!(AddressMap::for_ram(u64::MAX - (1 << 40)), None);
    }
}
